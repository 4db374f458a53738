//! Control verbs that act on sessions (spec 05 §5): wake/attach, new, interrupt, compact,
//! self-fresh.

use super::endpoint::{Job, WakeJob};
use super::{logged, Router};
use crate::daemon::lifecycle::ModeRequest;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::{undeclared_runtime_refusal, Refusal};
use crate::eventlog::Event;
use crate::markers::Flag;
use crate::names::Identity;
use crate::protocol::{Code, IdentityReply, InterruptReply, NewReply, Reply, RestartReply};
use crate::runtime::RuntimeKind;
use crate::session::handle::{Cause, SessionCmd};

use super::ops::refusal;

impl Router {
    pub(crate) fn op_wake(
        &mut self,
        personality: &str,
        runtime: Option<&str>,
        mode: ModeRequest,
        attach: bool,
        reply: ReplyTo,
    ) {
        let prepared = self
            .control_target(personality, runtime)
            .and_then(|(ident, kind)| {
                if kind == RuntimeKind::Agent {
                    return Ok(ident);
                }
                Err(refusal(
                    Code::InvalidArgument,
                    format!(
                        "{} needs an agent runtime ({} is a human's or a service's runtime)",
                        if attach { "attach" } else { "this" },
                        ident.runtime
                    ),
                ))
            });
        let ident = match prepared {
            Ok(i) => i,
            Err(r) => return reply.finish(r),
        };
        self.queue_wake(&ident, reply, mode, attach);
    }

    /// Queue a wake without a message for `identity` and move its queue.
    pub(crate) fn queue_wake(
        &mut self,
        identity: &Identity,
        reply: ReplyTo,
        mode: ModeRequest,
        attach: bool,
    ) {
        let job = WakeJob {
            reply,
            mode,
            attach,
            launched: false,
            started: self.now.at,
        };
        self.queues
            .endpoint_or_new(identity)
            .queue
            .push_back(Job::Wake(job));
        self.pump(identity);
    }

    pub(crate) fn op_new(&mut self, personality: &str, runtime: Option<&str>, reply: ReplyTo) {
        self.replace_session(personality, runtime, ModeRequest::Fresh, reply);
    }

    /// `restart` (issue 30 item 4): as [`Router::op_new`], but the agent comes back on the
    /// conversation iapeer recorded ([`ModeRequest::Restart`]).
    pub(crate) fn op_restart(&mut self, personality: &str, runtime: Option<&str>, reply: ReplyTo) {
        self.replace_session(personality, runtime, ModeRequest::Restart, reply);
    }

    /// End the identity's session and bring it up again with `mode`, forgetting its crash
    /// history; an always-on peer is restarted and un-parked.
    fn replace_session(
        &mut self,
        personality: &str,
        runtime: Option<&str>,
        mode: ModeRequest,
        reply: ReplyTo,
    ) {
        let (ident, kind) = match self.control_target(personality, runtime) {
            Ok(t) => t,
            Err(r) => return reply.finish(r),
        };
        logged(self.markers(&ident).clear_deaths());
        if kind == RuntimeKind::Router {
            let st = self.supervisor.always_on(&ident);
            st.parked = false;
            st.backoff.reset();
            if self.live.has(&ident) {
                st.restart_on_exit = true;
                self.live.end(&ident, Cause::Replaced);
            } else {
                self.restart_always_on(&ident);
            }
            return reply.finish(NewReply::Restarted(RestartReply {
                identity: ident.to_string(),
                restarted: true,
            }));
        }
        self.queue_wake(&ident, reply, mode, false);
    }

    pub(crate) fn op_interrupt(
        &mut self,
        personality: &str,
        runtime: Option<&str>,
    ) -> Result<Reply, Refusal> {
        let (ident, kind) = self.control_target(personality, runtime)?;
        if kind == RuntimeKind::Router {
            return Err(refusal(
                Code::InvalidArgument,
                format!("{} does not support control commands", ident.runtime),
            ));
        }
        let live = self.live.get(&ident).filter(|s| s.is_ready());
        let s = live.ok_or_else(|| {
            refusal(
                Code::NotLive,
                // `offline`: the word companion packages look for (as the original said).
                format!(
                    "peer \"{personality}\" is offline on {} (not live): nothing to interrupt",
                    ident.runtime
                ),
            )
        })?;
        let keys = self
            .adapter(&ident.runtime)
            .ok()
            .and_then(|a| a.interrupt_keys())
            .ok_or_else(|| {
                refusal(
                    Code::InvalidArgument,
                    format!("{} does not support control commands", ident.runtime),
                )
            })?;
        s.handle.send(SessionCmd::Interrupt(keys));
        self.lifecycle(Event::new("interrupt").field("identity", &ident));
        Ok(InterruptReply {
            identity: ident.to_string(),
            interrupted: true,
        }
        .into())
    }

    pub(crate) fn op_compact(&mut self, personality: &str, runtime: Option<&str>, reply: ReplyTo) {
        let (ident, kind) = match self.control_target(personality, runtime) {
            Ok(t) => t,
            Err(r) => return reply.finish(r),
        };
        if kind == RuntimeKind::Router {
            return reply.finish(Reply::failure(
                Code::InvalidArgument,
                format!("{} does not support control commands", ident.runtime),
            ));
        }
        let supported = self
            .adapter(&ident.runtime)
            .is_ok_and(|a| a.compact(std::path::Path::new("/")).is_some());
        if !supported {
            // Refuse before anything is woken for nothing.
            return reply.finish(Reply::failure(
                Code::InvalidArgument,
                format!("{} does not support compact", ident.runtime),
            ));
        }
        let id = ident;
        let job = super::endpoint::CompactJob {
            id: self.next_id(),
            reply,
        };
        self.queues
            .endpoint_or_new(&id)
            .queue
            .push_back(Job::Compact(job));
        self.pump(&id);
    }

    /// `self-fresh` from `identity`, the wire string of the request (the one place the
    /// router reads an identity from a string: the request edge).
    pub(crate) fn op_self_fresh(&mut self, identity: &str) -> Result<Reply, Refusal> {
        let ident = Identity::parse(identity)
            .map_err(|e| refusal(Code::InvalidArgument, format!("PEER_IDENTITY: {e}")))?;
        let registry = self.registry()?;
        let peer = Self::peer(&registry, &ident.personality)?;
        if !peer.declares(&ident.runtime) {
            return Err(undeclared_runtime_refusal(
                &ident.personality,
                &ident.runtime,
            ));
        }
        let kind = self
            .adapter(&ident.runtime)
            .map(|a| a.kind())
            .unwrap_or(RuntimeKind::Router);
        if kind != RuntimeKind::Agent {
            return Err(refusal(Code::InvalidArgument, format!("self-fresh is for agent sessions; {} is a human's or a service's runtime (restart it with: iapeer restart {} {})", ident.runtime, ident.personality, ident.runtime)));
        }
        logged(self.markers(&ident).set(Flag::NewEager));
        if self.live.end(&ident, Cause::Replaced).is_none() {
            self.bring_up_new_eager(&ident);
        }
        self.lifecycle(Event::new("self-fresh").field("identity", &ident));
        Ok(IdentityReply {
            identity: ident.to_string(),
        }
        .into())
    }
}

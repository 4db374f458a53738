//! Control operations other than `send` (spec 02 §2, spec 05 §5): stop, start, attach,
//! wake, list, status, live-runtime, forget.

use super::endpoint::Job;
use super::{logged, Router};
use crate::daemon::lifecycle::ModeRequest;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::{stopped_refusal, Refusal};
use crate::eventlog::Event;
use crate::markers::Flag;
use crate::names::Identity;
use crate::protocol::{
    Code, ForgetReply, ListReply, LiveRuntimeReply, Reply, Request, SessionCounts, SessionInfo,
    StartReply, StatusReply, StopReply,
};
use crate::registry::{Registry, RegistryPeer};
use crate::runtime::RuntimeKind;
use crate::session::handle::{Cause, SessionCmd};

/// The longest `stop` waits for its sessions to end before answering anyway.
const GONE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

pub(crate) fn refusal(code: Code, error: impl Into<String>) -> Refusal {
    Refusal {
        code,
        error: error.into(),
    }
}

impl Router {
    pub(crate) fn on_op(&mut self, req: Request, reply: ReplyTo) {
        let result = match req {
            Request::List => Ok(self.op_list().into()),
            Request::Status => Ok(self.op_status().into()),
            Request::LiveRuntime { personality } => self.op_live_runtime(&personality),
            Request::Stop {
                personality,
                runtime,
                all,
            } => match self.op_stop(personality.as_deref(), runtime.as_deref(), all) {
                // Answer once the sessions are gone, so `stop` returning means stopped.
                Ok((answer, ending)) => return self.reply_when_gone(reply, answer.into(), ending),
                Err(r) => Err(r),
            },
            Request::Start {
                personality,
                runtime,
                all,
            } => self
                .op_start(personality.as_deref(), runtime.as_deref(), all)
                .map(Reply::from),
            Request::Forget { personality } => Ok(self.op_forget(&personality).into()),
            Request::Wake {
                personality,
                runtime,
            } => {
                return self.op_wake(
                    &personality,
                    runtime.as_deref(),
                    ModeRequest::Auto,
                    false,
                    reply,
                )
            }
            Request::Attach {
                personality,
                runtime,
                fresh,
                no_attach,
            } => {
                let mode = if fresh {
                    ModeRequest::Fresh
                } else {
                    ModeRequest::Resume
                };
                return self.op_wake(&personality, runtime.as_deref(), mode, !no_attach, reply);
            }
            Request::New {
                personality,
                runtime,
            } => return self.op_new(&personality, runtime.as_deref(), reply),
            Request::Interrupt {
                personality,
                runtime,
            } => self.op_interrupt(&personality, runtime.as_deref()),
            Request::Compact {
                personality,
                runtime,
            } => return self.op_compact(&personality, runtime.as_deref(), reply),
            Request::SelfFresh { identity } => self.op_self_fresh(&identity),
            Request::Ping | Request::Send { .. } => unreachable!("handled by on_request"),
        };
        match result {
            Ok(v) => reply.finish(v),
            Err(r) => reply.finish(r),
        }
    }

    pub(crate) fn registry(&self) -> Result<Registry, Refusal> {
        Registry::load(&self.paths).map_err(|e| refusal(Code::Internal, e.to_string()))
    }

    pub(crate) fn peer<'r>(registry: &'r Registry, p: &str) -> Result<&'r RegistryPeer, Refusal> {
        registry.find(p).ok_or_else(|| {
            refusal(
                Code::NotRegistered,
                format!("peer \"{p}\" is not in the iapeer peers index"),
            )
        })
    }

    /// The runtime a control verb acts on (spec 05 §5): the requested one (must be declared),
    /// else the only live runtime, else the default runtime.
    pub(crate) fn control_runtime(
        &self,
        peer: &RegistryPeer,
        requested: Option<&str>,
    ) -> Result<String, Refusal> {
        if let Some(rt) = requested {
            if !peer.declares(rt) {
                return Err(refusal(
                    Code::InvalidArgument,
                    format!(
                        "peer \"{}\" does not declare runtime \"{rt}\"",
                        peer.personality
                    ),
                ));
            }
            return Ok(rt.to_string());
        }
        let live: Vec<&str> = self
            .live
            .sessions
            .values()
            .filter(|s| s.identity.personality == peer.personality)
            .map(|s| s.identity.runtime.as_str())
            .collect();
        match live.as_slice() {
            [one] => Ok(one.to_string()),
            [] => Ok(peer.default_runtime.clone()),
            many => Err(refusal(
                Code::InvalidArgument,
                format!(
                    "\"{}\" is live on several runtimes ({}) — specify runtime",
                    peer.personality,
                    many.join(", ")
                ),
            )),
        }
    }

    fn targets(
        &self,
        personality: Option<&str>,
        runtime: Option<&str>,
        all: bool,
    ) -> Result<Vec<Identity>, Refusal> {
        let registry = self.registry()?;
        let peers: Vec<&RegistryPeer> = match (personality, all) {
            (_, true) => registry.peers.iter().collect(),
            (Some(p), false) => vec![Self::peer(&registry, p)?],
            (None, false) => {
                return Err(refusal(Code::InvalidArgument, "name a peer or pass --all"))
            }
        };
        let mut out = Vec::new();
        for peer in peers {
            let rts: Vec<String> = match runtime {
                Some(rt) if peer.declares(rt) => vec![rt.to_string()],
                Some(rt) if !all => {
                    return Err(refusal(
                        Code::InvalidArgument,
                        format!(
                            "peer \"{}\" does not declare runtime \"{rt}\"",
                            peer.personality
                        ),
                    ))
                }
                Some(_) => vec![],
                None => peer.runtimes.clone(),
            };
            out.extend(rts.into_iter().map(|rt| Identity {
                runtime: rt,
                personality: peer.personality.clone(),
            }));
        }
        Ok(out)
    }

    fn op_stop(
        &mut self,
        personality: Option<&str>,
        runtime: Option<&str>,
        all: bool,
    ) -> Result<(StopReply, Vec<Identity>), Refusal> {
        let targets = self.targets(personality, runtime, all)?;
        let mut ended = Vec::new();
        let mut ending = Vec::new();
        for ident in &targets {
            logged(self.markers(ident).set(Flag::Stopped));
            if let Some(s) = self.live.sessions.get_mut(ident) {
                ending.push(ident.clone());
                if !s.state.is_ending() {
                    s.state.end(Cause::Stop);
                    s.handle.send(SessionCmd::Kill(Cause::Stop));
                    ended.push(ident.to_string());
                }
            }
            self.fail_waiting(ident, stopped_refusal(ident));
            self.lifecycle(Event::new("stop").field("identity", ident));
        }
        let stopped: Vec<String> = targets.iter().map(|i| i.to_string()).collect();
        Ok((StopReply { stopped, ended }, ending))
    }

    /// Send `answer` once none of `identities` has a session any more (at most
    /// [`GONE_DEADLINE`] later: the session threads SIGKILL 3 s after SIGTERM).
    fn reply_when_gone(&mut self, reply: ReplyTo, answer: Reply, identities: Vec<Identity>) {
        let waiting: std::collections::HashSet<Identity> = identities
            .into_iter()
            .filter(|i| self.live.sessions.contains_key(i))
            .collect();
        if waiting.is_empty() {
            return reply.finish(answer);
        }
        let id = self.next_id();
        self.set_timer(self.now.at + GONE_DEADLINE, super::Timer::GoneDeadline(id));
        self.live.gone_waiters.push(super::state::GoneWaiter {
            id,
            reply,
            answer,
            waiting,
        });
    }

    /// Fail every queued job of `identity` that is not already inside the session.
    fn fail_waiting(&mut self, identity: &Identity, r: Refusal) {
        let Some(ep) = self.queues.endpoints.get_mut(identity) else {
            return;
        };
        let keep = usize::from(ep.inflight.is_some());
        let rest: Vec<Job> = ep.queue.drain(keep..).collect();
        for job in rest {
            match job {
                Job::Send(j) => self.finish_send(j.record(), r.clone()),
                Job::Wake(w) => w.reply.finish(r.clone()),
                Job::Compact(c) => c.reply.finish(r.clone()),
            }
        }
    }

    fn op_start(
        &mut self,
        personality: Option<&str>,
        runtime: Option<&str>,
        all: bool,
    ) -> Result<StartReply, Refusal> {
        let targets = self.targets(personality, runtime, all)?;
        let mut started = Vec::new();
        for ident in &targets {
            logged(self.markers(ident).clear(Flag::Stopped));
            self.lifecycle(Event::new("start").field("identity", ident));
            let is_router = self
                .adapter(&ident.runtime)
                .map(|a| a.kind() == RuntimeKind::Router)
                .unwrap_or(false);
            if is_router {
                let st = self.supervisor.always_on.entry(ident.clone()).or_default();
                st.parked = false;
                st.backoff.reset();
                if !self.live.sessions.contains_key(ident) {
                    self.restart_always_on(ident);
                    started.push(ident.to_string());
                }
            }
        }
        let cleared: Vec<String> = targets.iter().map(|i| i.to_string()).collect();
        Ok(StartReply { cleared, started })
    }

    fn op_forget(&mut self, personality: &str) -> ForgetReply {
        let ids: Vec<Identity> = self
            .live
            .sessions
            .keys()
            .filter(|k| k.personality == personality)
            .cloned()
            .collect();
        for id in &ids {
            if let Some(s) = self.live.sessions.get_mut(id) {
                s.state.end(Cause::Removed);
                s.handle.send(SessionCmd::Kill(Cause::Removed));
            }
        }
        let queued: Vec<Identity> = self
            .queues
            .endpoints
            .keys()
            .filter(|k| k.personality == personality)
            .cloned()
            .collect();
        for id in &queued {
            self.fail_waiting(
                id,
                refusal(
                    Code::NotRegistered,
                    format!("peer \"{personality}\" was removed; message NOT delivered"),
                ),
            );
        }
        self.supervisor
            .always_on
            .retain(|k, _| k.personality != personality);
        ForgetReply {
            ended: ids.iter().map(Identity::to_string).collect(),
        }
    }

    fn op_list(&self) -> ListReply {
        let mut sessions: Vec<SessionInfo> = self
            .live
            .sessions
            .values()
            .map(|s| {
                let last_active = s
                    .status
                    .as_ref()
                    .and_then(|st| st.activity_ms)
                    .into_iter()
                    .chain(s.last_delivery_ms)
                    .max()
                    .unwrap_or(s.woke_at_ms);
                SessionInfo {
                    identity: s.identity.to_string(),
                    personality: s.identity.personality.clone(),
                    runtime: s.identity.runtime.clone(),
                    status: if s.is_ready() { "live" } else { "booting" }.to_string(),
                    attached: s.attached,
                    pid: s.pid,
                    woke_at_ms: s.woke_at_ms,
                    last_active_ms: last_active,
                    busy: s.status.as_ref().is_some_and(|st| st.busy),
                    mode: s.mode.as_str().to_string(),
                }
            })
            .collect();
        sessions.sort_by(|a, b| a.identity.cmp(&b.identity));
        let mut parked: Vec<String> = self
            .supervisor
            .always_on
            .iter()
            .filter(|(_, st)| st.parked)
            .map(|(k, _)| k.to_string())
            .collect();
        parked.sort();
        ListReply { sessions, parked }
    }

    fn op_status(&self) -> StatusReply {
        let live = self.live.sessions.values().filter(|s| s.is_ready()).count();
        let booting = self.live.sessions.len() - live;
        StatusReply {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            started_ms: self.info.started_ms,
            uptime_s: crate::clock::now_ms().saturating_sub(self.info.started_ms) / 1000,
            tcp: self.info.tcp.clone(),
            sock: self.info.sock.clone(),
            sessions: SessionCounts { live, booting },
        }
    }

    fn op_live_runtime(&self, personality: &str) -> Result<Reply, Refusal> {
        self.live
            .sessions
            .values()
            .filter(|s| s.identity.personality == personality && s.is_ready())
            .max_by_key(|s| {
                s.status
                    .as_ref()
                    .and_then(|st| st.activity_ms)
                    .into_iter()
                    .chain(s.last_delivery_ms)
                    .chain([s.woke_at_ms])
                    .max()
            })
            .map(|s| {
                LiveRuntimeReply {
                    runtime: s.identity.runtime.clone(),
                }
                .into()
            })
            .ok_or_else(|| refusal(Code::NotLive, format!("peer \"{personality}\" is not live")))
    }
}

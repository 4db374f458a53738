//! The operator's switches on identities (spec 05 §5): `stop` (mark stopped, end the
//! session, answer when it is gone), `start` (clear the mark, start always-on peers),
//! `forget` (a removed peer's sessions and queues).

use super::endpoint::Job;
use super::ops::refusal;
use super::Router;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::{stopped_refusal, Refusal};
use crate::eventlog::Event;
use crate::markers::Flag;
use crate::names::Identity;
use crate::protocol::{Code, ForgetReply, Reply, StartReply, StopReply};
use crate::runtime::RuntimeKind;
use crate::session::handle::Cause;

/// The longest `stop` waits for its sessions to end before answering anyway.
const GONE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// The refusal of a `stop` or `start` (`verb`) whose stop flag could not be written or
/// removed for `failed` (one `"<identity>: <reason>"` each), leaving those identities as
/// they were; `done` were switched all the same.
fn switch_failed(verb: &str, failed: &[String], done: &[String]) -> Refusal {
    let past = if verb == "stop" { "stopped" } else { "started" };
    let also = if done.is_empty() {
        String::new()
    } else {
        format!(" ({} {past})", done.join(", "))
    };
    refusal(
        Code::Internal,
        format!(
            "could not {verb} {}; left as it was{also} — fix that and run {verb} again",
            failed.join("; ")
        ),
    )
}

impl Router {
    pub(crate) fn op_stop(
        &mut self,
        personality: Option<&str>,
        runtime: Option<&str>,
        all: bool,
        everyone: bool,
    ) -> Result<(StopReply, Vec<Identity>), Refusal> {
        let (targets, kept): (Vec<Identity>, Vec<Identity>) = self
            .targets(personality, runtime, all)?
            .into_iter()
            .partition(|i| !all || everyone || !self.is_router_runtime(&i.runtime));
        let mut ended = Vec::new();
        let mut ending = Vec::new();
        let mut failed = Vec::new();
        let mut stopped = Vec::new();
        for ident in &targets {
            // Without its flag a stopped peer would be woken by the next message: an identity
            // whose flag cannot be written is left exactly as it was, and the op fails.
            if let Err(e) = self.markers(ident).set(Flag::Stopped) {
                log::warn!("stop {ident}: {e}");
                failed.push(format!("{ident}: {e}"));
                continue;
            }
            stopped.push(ident.to_string());
            if let Some(fresh) = self.live.end(ident, Cause::Stop) {
                ending.push(ident.clone());
                if fresh {
                    ended.push(ident.to_string());
                }
            }
            self.fail_waiting(ident, stopped_refusal(ident));
            self.lifecycle(Event::new("stop").field("identity", ident));
        }
        if !failed.is_empty() {
            return Err(switch_failed("stop", &failed, &stopped));
        }
        let kept = kept.iter().map(Identity::to_string).collect();
        Ok((
            StopReply {
                stopped,
                ended,
                kept,
            },
            ending,
        ))
    }

    /// Whether `runtime` is a human's or a service's (a router runtime, always on), which
    /// `stop --all` leaves alone unless asked (issue 30 item 4). An unknown runtime is not.
    fn is_router_runtime(&self, runtime: &str) -> bool {
        self.adapter(runtime)
            .is_ok_and(|a| a.kind() == RuntimeKind::Router)
    }

    /// Send `answer` once none of `identities` has a session any more (at most
    /// [`GONE_DEADLINE`] later: the session threads SIGKILL 3 s after SIGTERM).
    pub(crate) fn reply_when_gone(
        &mut self,
        reply: ReplyTo,
        answer: Reply,
        identities: Vec<Identity>,
    ) {
        let waiting: std::collections::HashSet<Identity> = identities
            .into_iter()
            .filter(|i| self.live.has(i))
            .collect();
        if waiting.is_empty() {
            return reply.finish(answer);
        }
        let id = self.next_id();
        self.set_timer(self.now.at + GONE_DEADLINE, super::Timer::GoneDeadline(id));
        self.live.wait_gone(super::state::GoneWaiter {
            id,
            reply,
            answer,
            waiting,
        });
    }

    /// Fail every queued job of `identity` that is not already inside the session.
    fn fail_waiting(&mut self, identity: &Identity, r: Refusal) {
        let Some(ep) = self.queues.endpoint_mut(identity) else {
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

    pub(crate) fn op_start(
        &mut self,
        personality: Option<&str>,
        runtime: Option<&str>,
        all: bool,
    ) -> Result<StartReply, Refusal> {
        let targets = self.targets(personality, runtime, all)?;
        let mut started = Vec::new();
        let mut cleared = Vec::new();
        let mut failed = Vec::new();
        for ident in &targets {
            // A flag that stays would keep the peer stopped: say so rather than "started".
            let was_stopped = match self.markers(ident).take(Flag::Stopped) {
                Ok(was) => was,
                Err(e) => {
                    log::warn!("start {ident}: {e}");
                    failed.push(format!("{ident}: {e}"));
                    continue;
                }
            };
            cleared.push(ident.to_string());
            let is_router = self
                .adapter(&ident.runtime)
                .map(|a| a.kind() == RuntimeKind::Router)
                .unwrap_or(false);
            let mut launched = false;
            if is_router {
                let st = self.supervisor.always_on(ident);
                st.parked = false;
                st.backoff.reset();
                if !self.live.has(ident) {
                    self.restart_always_on(ident);
                    started.push(ident.to_string());
                    launched = true;
                }
            }
            // Logged when it changed something: a second `start` of a running peer is not.
            if was_stopped || launched {
                self.lifecycle(Event::new("start").field("identity", ident));
            }
        }
        if !failed.is_empty() {
            return Err(switch_failed("start", &failed, &cleared));
        }
        Ok(StartReply { cleared, started })
    }

    pub(crate) fn op_forget(&mut self, personality: &str) -> ForgetReply {
        let ids: Vec<Identity> = self
            .live
            .identities()
            .filter(|k| k.personality == personality)
            .cloned()
            .collect();
        for id in &ids {
            self.live.end(id, Cause::Removed);
        }
        let queued: Vec<Identity> = self
            .queues
            .endpoints()
            .map(|(k, _)| k)
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
        self.supervisor.forget(personality);
        ForgetReply {
            ended: ids.iter().map(Identity::to_string).collect(),
        }
    }
}

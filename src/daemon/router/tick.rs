//! The supervise tick and session deaths (spec 05 §4, §8): idle sleep, stop enforcement,
//! death records, always-on restarts with back-off.

use std::time::Duration;

use super::decide::{
    after_exit, idle_sleep, may_start_always_on, tick_step, ExitFacts, IdleFacts, Inflight, Live,
    TickStep,
};
use super::{logged, Router, Timer};
use crate::daemon::lifecycle::{AfterDeath, ModeRequest};
use crate::daemon::route::Refusal;
use crate::eventlog::Event;
use crate::markers::{Flag, Markers};
use crate::names::Identity;
use crate::protocol::Code;
use crate::registry::Registry;
use crate::runtime::RuntimeKind;
use crate::session::handle::{Cause, SessionCmd, SessionStatus};

impl Router {
    pub(crate) fn on_tick(&mut self) {
        let mut to_stop = Vec::new();
        for (id, s) in &self.live.sessions {
            let live = s.live();
            let stopped = live != Live::Ending
                && Markers::new(&self.paths, &s.identity).is_set(Flag::Stopped);
            match tick_step(s.kind, live, stopped) {
                TickStep::Skip => {}
                TickStep::Stop => to_stop.push(id.clone()),
                // Answered by a Status event; the idle decision is made there.
                TickStep::Probe => {
                    s.handle.send(SessionCmd::Probe);
                }
            }
        }
        for id in to_stop {
            if let Some(s) = self.live.sessions.get_mut(&id) {
                s.state.end(Cause::Stop);
                s.handle.send(SessionCmd::Kill(Cause::Stop));
            }
        }
        // `.new-eager` left by a self-fresh whose session is gone (e.g. across a restart).
        for ident in crate::markers::identities_with(&self.paths, Flag::NewEager.suffix()) {
            if !self.live.sessions.contains_key(&ident) {
                self.bring_up_new_eager(&ident);
            }
        }
        if self.cfg.supervise_verbose {
            self.lifecycle(
                Event::new("supervise")
                    .field("action", "tick")
                    .field("sessions", self.live.sessions.len().to_string()),
            );
        }
    }

    pub(crate) fn on_status(&mut self, identity: &Identity, status: SessionStatus) {
        let idle = self.cfg.idle;
        let Some(s) = self.live.sessions.get_mut(identity) else {
            return;
        };
        let queue_busy = self
            .queues
            .endpoints
            .get(identity)
            .is_some_and(|e| !e.queue.is_empty());
        let facts = IdleFacts {
            status: &status,
            woke_at_ms: s.woke_at_ms,
            last_delivery_ms: s.last_delivery_ms,
            ending: s.state.is_ending(),
            queue_busy,
        };
        let verdict = idle_sleep(&facts, self.now, idle);
        s.status = Some(status);
        let Some(age) = verdict else {
            return;
        };
        // Resume-eligible before it ends, so the next message on its topic resumes it.
        logged(Markers::new(&self.paths, &s.identity).set(Flag::IdleReaped));
        s.state.end(Cause::IdleSleep);
        s.handle.send(SessionCmd::Kill(Cause::IdleSleep));
        self.lifecycle(
            Event::new("supervise")
                .field("action", "reaped-idle")
                .field("identity", identity)
                .field("age", format!("{}s", age / 1000)),
        );
    }

    pub(crate) fn on_exited(
        &mut self,
        identity: &Identity,
        session: u64,
        status: Option<i32>,
        signal: Option<String>,
        cause: Cause,
    ) {
        let Some(s) = self.live.unregister(identity, session) else {
            return;
        };
        self.live.settle_gone_waiters(identity);
        let markers = Markers::new(&self.paths, &s.identity);
        logged(markers.remove_session());
        let inflight = self
            .queues
            .endpoints
            .get(identity)
            .is_some_and(|ep| ep.inflight.is_some());
        let plan = after_exit(&ExitFacts {
            kind: s.kind,
            cause,
            boot_failed: s.state.boot_failure().is_some(),
            inflight,
            shutting_down: self.shutdown.is_some(),
            stopped: markers.is_set(Flag::Stopped),
            new_eager: markers.is_set(Flag::NewEager),
        });
        if plan.record_death {
            logged(markers.record_death(self.now.ms));
        }
        self.lifecycle(
            Event::new("session-end")
                .field("identity", identity)
                .field("pid", s.pid.to_string())
                .field("cause", cause.as_str())
                .opt("status", status.map(|c| c.to_string()).as_deref())
                .opt("signal", signal.as_deref()),
        );
        // A delivery the session never answered: the session reports every delivery it
        // took (and a failed boot) before it exits, so this one never reached the child.
        match plan.inflight {
            Inflight::Requeue => {
                if let Some(ep) = self.queues.endpoints.get_mut(identity) {
                    ep.inflight = None;
                }
            }
            Inflight::Fail => {
                let p = s.identity.personality.clone();
                let reason = s
                    .state
                    .boot_failure()
                    .unwrap_or("the session ended")
                    .to_string();
                self.fail_head(
                    identity,
                    Refusal {
                        code: Code::Offline,
                        error: format!("peer \"{p}\" offline and wake failed: {reason}"),
                    },
                );
            }
            Inflight::None => {}
        }
        if plan.back_off {
            let ran = self.now.since(s.started);
            self.back_off(&s.identity, ran, true);
        }
        if plan.restart_if_asked {
            let again = self
                .supervisor
                .always_on
                .get_mut(&s.identity)
                .is_some_and(|st| std::mem::take(&mut st.restart_on_exit));
            if again {
                self.restart_always_on(&s.identity);
            }
        }
        if plan.new_eager {
            self.bring_up_new_eager(identity);
        }
        if plan.pump {
            self.pump(identity);
        }
    }

    /// An always-on peer died (or failed to start) after a run of `ran`: schedule its
    /// restart with back-off, or park it (spec 05 §8). `log`: write the decision to
    /// `lifecycle.log` (a failed start has already logged `start-failed`).
    fn back_off(&mut self, identity: &Identity, ran: Duration, log: bool) {
        let now = self.now;
        let st = self
            .supervisor
            .always_on
            .entry(identity.clone())
            .or_default();
        match st.backoff.on_death(now.ms, ran) {
            AfterDeath::RestartIn(delay) => {
                self.set_timer(now.at + delay, Timer::Restart(identity.clone()));
                if log {
                    self.lifecycle(
                        Event::new("always-on")
                            .field("identity", identity)
                            .field("action", "restart-scheduled")
                            .field("delay_ms", delay.as_millis().to_string()),
                    );
                }
            }
            AfterDeath::Park => {
                st.parked = true;
                if !log {
                    return;
                }
                self.lifecycle(
                    Event::new("always-on")
                        .field("identity", identity)
                        .field("action", "parked"),
                );
            }
        }
    }

    /// `.new-eager` (from `self-fresh`): bring a fresh session up now, with no message and
    /// nobody waiting.
    pub(crate) fn bring_up_new_eager(&mut self, identity: &Identity) {
        if !logged(self.markers(identity).take(Flag::NewEager)).unwrap_or(false) {
            return;
        }
        let reply = crate::daemon::reply::ReplyTo::discard();
        self.queue_wake(identity, reply, ModeRequest::Fresh, false);
    }

    /// Start every always-on peer that is not stopped (daemon start).
    pub(crate) fn start_always_on(&mut self) {
        let registry = match Registry::load(&self.paths) {
            Ok(r) => r,
            Err(e) => {
                log::error!("cannot start always-on peers: {e}");
                return;
            }
        };
        for peer in &registry.peers {
            for rt in &peer.runtimes {
                let is_router = self
                    .adapter(rt)
                    .map(|a| a.kind() == RuntimeKind::Router)
                    .unwrap_or(false);
                if is_router {
                    // Registry names are checked again here: a hand-edited entry that is not
                    // a valid identity is skipped.
                    if let Ok(ident) = Identity::new(rt, &peer.personality) {
                        self.restart_always_on(&ident);
                    }
                }
            }
        }
    }

    /// Launch one always-on identity now, unless it is running, stopped or parked.
    pub(crate) fn restart_always_on(&mut self, ident: &Identity) {
        let identity = ident;
        let start = may_start_always_on(
            self.live.sessions.contains_key(identity),
            self.shutdown.is_some(),
            Markers::new(&self.paths, ident).is_set(Flag::Stopped),
            self.supervisor
                .always_on
                .get(ident)
                .is_some_and(|st| st.parked),
        );
        if !start {
            return;
        }
        self.supervisor.always_on.entry(ident.clone()).or_default();
        let session = self.next_id();
        match self.launch(ident, ModeRequest::Fresh, None, session) {
            Ok((sess, _, _)) => {
                self.lifecycle(
                    Event::new("always-on")
                        .field("identity", identity)
                        .field("action", "started")
                        .field("pid", sess.pid.to_string()),
                );
                self.live.register(sess);
            }
            Err(r) => {
                log::warn!("always-on {identity}: {}", r.error);
                self.lifecycle(
                    Event::new("always-on")
                        .field("identity", identity)
                        .field("action", "start-failed")
                        .field("err", &r.error),
                );
                // Treat a failed start like a death so back-off and parking apply.
                self.back_off(ident, Duration::ZERO, false);
            }
        }
    }
}

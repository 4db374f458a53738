//! The supervise tick and session deaths (spec 05 §4, §8): idle sleep, stop enforcement,
//! death records, always-on restarts with back-off.

use std::time::{Duration, Instant};

use super::{logged, Router, Timer};
use crate::daemon::lifecycle::{idle_age_ms, should_sleep, AfterDeath, ModeRequest};
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
        for (id, s) in &self.sessions {
            if s.stopping.is_some() {
                continue;
            }
            if Markers::new(&self.paths, &s.identity).is_set(Flag::Stopped) {
                to_stop.push(id.clone());
                continue;
            }
            if s.kind == RuntimeKind::Agent && s.ready {
                // Answered by a Status event; the idle decision is made there.
                s.handle.send(SessionCmd::Probe);
            }
        }
        for id in to_stop {
            if let Some(s) = self.sessions.get_mut(&id) {
                s.stopping = Some(Cause::Stop);
                s.handle.send(SessionCmd::Kill(Cause::Stop));
            }
        }
        // `.new-eager` left by a self-fresh whose session is gone (e.g. across a restart).
        for ident in crate::markers::identities_with(&self.paths, Flag::NewEager.suffix()) {
            let id = ident.to_string();
            if !self.sessions.contains_key(&id) {
                self.bring_up_new_eager(&id);
            }
        }
        if self.cfg.supervise_verbose {
            self.lifecycle(
                Event::new("supervise")
                    .field("action", "tick")
                    .field("sessions", self.sessions.len().to_string()),
            );
        }
    }

    pub(crate) fn on_status(&mut self, identity: &str, status: SessionStatus) {
        let idle = self.cfg.idle;
        let Some(s) = self.sessions.get_mut(identity) else {
            return;
        };
        let age = idle_age_ms(
            crate::clock::now_ms(),
            &status,
            s.woke_at_ms,
            s.last_delivery_ms,
        );
        let busy_queue = self
            .endpoints
            .get(identity)
            .is_some_and(|e| !e.queue.is_empty());
        s.status = Some(status.clone());
        if s.stopping.is_some() || busy_queue || !should_sleep(age, idle, &status) {
            return;
        }
        // Resume-eligible before it ends, so the next message on its topic resumes it.
        logged(Markers::new(&self.paths, &s.identity).set(Flag::IdleReaped));
        s.stopping = Some(Cause::IdleSleep);
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
        identity: &str,
        session: u64,
        status: Option<i32>,
        signal: Option<String>,
        cause: Cause,
    ) {
        self.session_ids.remove(&session);
        let Some(s) = self.sessions.get(identity) else {
            return;
        };
        if s.id != session {
            return;
        }
        let Some(s) = self.sessions.remove(identity) else {
            return;
        };
        self.settle_gone_waiters(identity);
        self.tokens.remove(&s.token);
        let markers = Markers::new(&self.paths, &s.identity);
        logged(markers.remove_session());
        let died = matches!(cause, Cause::ChildExit | Cause::BootTimeout)
            || (cause == Cause::KilledByDaemon && s.boot_failure.is_some());
        if died {
            logged(markers.record_death(crate::clock::now_ms()));
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
        let inflight = self
            .endpoints
            .get_mut(identity)
            .filter(|ep| ep.inflight.is_some());
        match inflight {
            // An always-on router peer: keep the message queued; the pump below holds it for
            // the restart within the revive grace (or refuses it if the peer was stopped).
            Some(ep) if s.kind == RuntimeKind::Router => ep.inflight = None,
            // An agent (its thread panicked, or the wake failed): fail it now.
            Some(_) => {
                let p = s.identity.personality.clone();
                let reason = s
                    .boot_failure
                    .clone()
                    .unwrap_or_else(|| "the session ended".into());
                self.fail_head(
                    identity,
                    Refusal {
                        code: Code::Offline,
                        error: format!("peer \"{p}\" offline and wake failed: {reason}"),
                    },
                );
            }
            None => {}
        }
        if s.kind == RuntimeKind::Router
            && self.shutdown.is_none()
            && !markers.is_set(Flag::Stopped)
            && !matches!(cause, Cause::Replaced | Cause::Removed)
        {
            let st = self.always_on.entry(identity.to_string()).or_default();
            match st
                .backoff
                .on_death(crate::clock::now_ms(), s.started.elapsed())
            {
                AfterDeath::RestartIn(delay) => {
                    let at = Instant::now() + delay;
                    st.restart_at = Some(at);
                    self.set_timer(at, Timer::Restart(identity.to_string()));
                    self.lifecycle(
                        Event::new("always-on")
                            .field("identity", identity)
                            .field("action", "restart-scheduled")
                            .field("delay_ms", delay.as_millis().to_string()),
                    );
                }
                AfterDeath::Park => {
                    st.parked = true;
                    self.lifecycle(
                        Event::new("always-on")
                            .field("identity", identity)
                            .field("action", "parked"),
                    );
                }
            }
        }
        if s.kind == RuntimeKind::Router && cause == Cause::Replaced {
            let again = self
                .always_on
                .get_mut(identity)
                .is_some_and(|st| std::mem::take(&mut st.restart_on_exit));
            if again {
                self.restart_always_on(identity);
            }
        }
        if self.shutdown.is_none() {
            if markers.is_set(Flag::NewEager) {
                self.bring_up_new_eager(identity);
            }
            self.pump(identity);
        }
    }

    /// Answer replies that waited for `identity`'s session to end.
    fn settle_gone_waiters(&mut self, identity: &str) {
        let mut done = Vec::new();
        for (i, w) in self.gone_waiters.iter_mut().enumerate() {
            w.waiting.remove(identity);
            if w.waiting.is_empty() {
                done.push(i);
            }
        }
        for i in done.into_iter().rev() {
            let w = self.gone_waiters.remove(i);
            w.reply.finish(w.answer);
        }
    }

    /// `.new-eager` (from `self-fresh`): bring a fresh session up now, with no message and
    /// nobody waiting.
    pub(crate) fn bring_up_new_eager(&mut self, identity: &str) {
        let Some(m) = self.markers(identity) else {
            return;
        };
        if !logged(m.take(Flag::NewEager)).unwrap_or(false) {
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
                    self.restart_always_on(&format!("{rt}-{}", peer.personality));
                }
            }
        }
    }

    /// Launch one always-on identity now, unless it is running, stopped or parked.
    pub(crate) fn restart_always_on(&mut self, identity: &str) {
        if self.sessions.contains_key(identity) || self.shutdown.is_some() {
            return;
        }
        let Ok(ident) = Identity::parse(identity) else {
            return;
        };
        if Markers::new(&self.paths, &ident).is_set(Flag::Stopped) {
            return;
        }
        let st = self.always_on.entry(identity.to_string()).or_default();
        if st.parked {
            return;
        }
        st.restart_at = None;
        let session = self.next_id();
        match self.launch(&ident, ModeRequest::Fresh, None, session) {
            Ok((sess, _, _)) => {
                self.lifecycle(
                    Event::new("always-on")
                        .field("identity", identity)
                        .field("action", "started")
                        .field("pid", sess.pid.to_string()),
                );
                self.register(sess);
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
                let st = self.always_on.entry(identity.to_string()).or_default();
                match st.backoff.on_death(crate::clock::now_ms(), Duration::ZERO) {
                    AfterDeath::RestartIn(d) => {
                        self.set_timer(Instant::now() + d, Timer::Restart(identity.to_string()))
                    }
                    AfterDeath::Park => st.parked = true,
                }
            }
        }
    }
}

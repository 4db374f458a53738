//! The always-on supervisor (spec 05 §8): router-runtime peers start with the daemon and
//! restart after a death, with back-off and parking (decisions in `decide.rs`).

use std::time::Duration;

use super::decide::may_start_always_on;
use super::{Router, Timer};
use crate::daemon::lifecycle::{AfterDeath, ModeRequest};
use crate::eventlog::Event;
use crate::markers::{Flag, Markers};
use crate::names::Identity;
use crate::registry::Registry;
use crate::runtime::RuntimeKind;

impl Router {
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

    /// An always-on peer died (or failed to start) after a run of `ran`: schedule its
    /// restart with back-off, or park it (spec 05 §8). `log`: write the decision to
    /// `lifecycle.log` (a failed start has already logged `start-failed`).
    pub(crate) fn back_off(&mut self, identity: &Identity, ran: Duration, log: bool) {
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
}

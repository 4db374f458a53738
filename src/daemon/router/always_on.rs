//! The always-on supervisor (spec 05 §8): router-runtime peers start with the daemon and
//! restart after a death, with back-off and parking (decisions in `decide.rs`).

use std::time::Duration;

use super::decide::{may_start_always_on, LaunchFor};
use super::{Router, Timer};
use crate::daemon::lifecycle::{AfterDeath, ModeRequest};
use crate::daemon::route::Refusal;
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
                if !self.supervisor.is_unstarted() {
                    log::error!(
                        "cannot start always-on peers: {e} (tried again at every tick; \
                         iapeer verify --fix repairs the registry)"
                    );
                }
                self.supervisor.set_unstarted();
                return;
            }
        };
        if self.supervisor.take_unstarted() {
            log::info!("the registry reads again: starting the always-on peers");
        }
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

    /// A runtime package installed since the last look (by `install-runtime`, by the package's
    /// own `npx` install or by hand) brings its always-on peers up without a daemon restart:
    /// called at every tick, it starts every always-on peer again when a runtime appeared
    /// (running, stopped and parked ones are left as they are).
    pub(crate) fn notice_new_runtimes(&mut self) {
        let now = crate::runtime::manifest::installed(&self.paths);
        let new = self.supervisor.new_runtimes(now);
        if new.is_empty() {
            return;
        }
        self.lifecycle(Event::new("runtime-installed").field("runtimes", new.join(",")));
        self.start_always_on();
    }

    /// True when the supervisor parked this always-on identity after a crash loop (spec 05
    /// §8): it stays down until `start` or `new`.
    pub(crate) fn is_parked(&self, ident: &Identity) -> bool {
        self.supervisor.is_parked(ident)
    }

    /// Launch one always-on identity now, unless it is running, stopped or parked.
    pub(crate) fn restart_always_on(&mut self, ident: &Identity) {
        let identity = ident;
        let start = may_start_always_on(
            self.live.has(identity),
            self.shutdown.is_some(),
            Markers::new(&self.paths, ident).is_set(Flag::Stopped),
            self.is_parked(ident),
        );
        if !start {
            return;
        }
        self.supervisor.always_on(ident);
        // The fresh/resume decision reads the topic files, and a fresh launch empties them.
        self.topics.sync(&self.paths);
        let session = self.next_id();
        match self.plan_launch(ident, ModeRequest::Fresh, None, session) {
            Ok(plan) => self.begin_launch(plan, LaunchFor::AlwaysOn),
            Err(r) => self.always_on_start_failed(ident, &r, true),
        }
    }

    /// An always-on start failed (its checks, or its launcher): log it, and (`back_off`)
    /// treat it like a death so back-off and parking apply. Without the back-off (the
    /// router had ended it while it launched), a `new` that asked for a restart gets it.
    pub(crate) fn always_on_start_failed(&mut self, ident: &Identity, r: &Refusal, back_off: bool) {
        log::warn!("always-on {ident}: {}", r.error);
        self.lifecycle(
            Event::new("always-on")
                .field("identity", ident)
                .field("action", "start-failed")
                .field("err", &r.error),
        );
        if back_off {
            self.back_off(ident, Duration::ZERO, false);
            return;
        }
        let again = self.supervisor.take_restart_on_exit(ident);
        if again {
            self.restart_always_on(ident);
        }
    }

    /// An always-on peer died (or failed to start) after a run of `ran`: schedule its
    /// restart with back-off, or park it (spec 05 §8). `log`: write the decision to
    /// `lifecycle.log` (a failed start has already logged `start-failed`).
    pub(crate) fn back_off(&mut self, identity: &Identity, ran: Duration, log: bool) {
        let now = self.now;
        let st = self.supervisor.always_on(identity);
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

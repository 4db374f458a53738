//! The supervise tick and session deaths (spec 05 §4, §8): idle sleep, stop enforcement,
//! death records, `.new-eager`; a death's always-on restart is `always_on.rs`.

use super::decide::{
    after_exit, ephemeral_wind_down, idle_sleep, tick_step, ExitFacts, IdleFacts, Inflight, Live,
    TickStep, WindDownFacts,
};
use super::{logged, Router};
use crate::daemon::lifecycle::ModeRequest;
use crate::daemon::route::Refusal;
use crate::eventlog::Event;
use crate::markers::{Flag, Markers};
use crate::names::Identity;
use crate::protocol::Code;
use crate::runtime::WakeMode;
use crate::session::handle::{Cause, SessionCmd, SessionStatus};

impl Router {
    pub(crate) fn on_tick(&mut self) {
        let mut to_stop = Vec::new();
        for s in self.live.spawned() {
            let live = s.live();
            let stopped = live != Live::Ending
                && Markers::new(&self.paths, &s.identity).is_set(Flag::Stopped);
            match tick_step(s.kind, live, stopped) {
                TickStep::Skip => {}
                TickStep::Stop => to_stop.push(s.identity.clone()),
                // Answered by a Status event; the idle decision is made there.
                TickStep::Probe => {
                    s.handle.send(SessionCmd::Probe);
                }
            }
        }
        for id in to_stop {
            if let Some(s) = self.live.get_mut(&id) {
                s.state.end(Cause::Stop);
                s.handle.send(SessionCmd::Kill(Cause::Stop));
            }
        }
        // `.new-eager` left by a self-fresh whose session is gone (e.g. across a restart).
        for ident in crate::markers::identities_with(&self.paths, Flag::NewEager.suffix()) {
            if !self.live.has(&ident) {
                self.bring_up_new_eager(&ident);
            }
        }
        self.settle_rename();
        if self.supervisor.is_unstarted() {
            self.start_always_on();
        }
        self.notice_new_runtimes();
        self.expire_holds();
        self.expire_notices();
        self.drain_all();
        self.storms.prune(self.now.at, self.cfg.storm);
        let limits = crate::session::panelog::PaneLimits::current();
        let deleted = crate::session::panelog::enforce_budget(&self.paths.pane_logs_dir(), &limits);
        if !deleted.is_empty() {
            self.lifecycle(
                Event::new("panelog")
                    .field("action", "budget")
                    .field("deleted", deleted.join(",")),
            );
        }
        if self.cfg.supervise_verbose {
            self.lifecycle(
                Event::new("supervise")
                    .field("action", "tick")
                    .field("sessions", self.live.len().to_string()),
            );
        }
        crate::config::test_events::emit("tick-done");
    }

    /// A `rename` killed halfway is settled at daemon start and at every tick (one `stat`
    /// when there is none), so the daemon routes by a registry that is all renamed or not at
    /// all; a finished one brings the peer's always-on runtimes up under the new name.
    pub(crate) fn settle_rename(&mut self) {
        let Some(r) = crate::peers::rename_journal::recover(&self.paths) else {
            return;
        };
        log::warn!("rename: {r}");
        let outcome = match &r {
            crate::peers::rename_journal::Recovery::Finished { .. } => "finished",
            crate::peers::rename_journal::Recovery::Undone { .. } => "undone",
            crate::peers::rename_journal::Recovery::Failed(_) => "failed",
        };
        self.lifecycle(
            Event::new("rename")
                .field("action", outcome)
                .field("detail", r.to_string()),
        );
        if outcome == "finished" {
            self.supervisor.set_unstarted();
        }
    }

    pub(crate) fn on_status(&mut self, identity: &Identity, status: SessionStatus) {
        // A live agent the model API refuses (spec 10 §3): the notice board.
        let api = self.live.get(identity).map(|s| {
            let before = s.status.as_ref().and_then(|st| st.api_error.as_ref());
            let raised =
                crate::runtime::api_error::newly_raised(before, status.api_error.as_ref()).cloned();
            (raised, s.woke_at_ms)
        });
        if let Some((raised, woke_at_ms)) = api {
            self.note_api_outcome(
                identity,
                raised.as_ref(),
                status.api_error.as_ref(),
                woke_at_ms,
            );
        }
        let idle = self.cfg.idle;
        let Some(s) = self.live.get_mut(identity) else {
            return;
        };
        let queue_busy = self
            .queues
            .endpoint(identity)
            .is_some_and(|e| !e.queue.is_empty());
        let facts = IdleFacts {
            status: &status,
            before: s.status.as_ref(),
            woke_at_ms: s.woke_at_ms,
            last_delivery_ms: s.last_delivery_ms,
            ending: s.state.is_ending(),
            queue_busy,
            sending: self.queues.sends_from(identity),
        };
        if s.ephemeral {
            let armed = Markers::new(&self.paths, &s.identity).is_set(Flag::EphemeralArmed);
            let facts = WindDownFacts {
                status: &status,
                woke_at_ms: s.woke_at_ms,
                last_delivery_ms: s.last_delivery_ms,
                armed,
                ending: s.state.is_ending(),
            };
            let verdict = ephemeral_wind_down(
                &facts,
                self.now,
                self.cfg.ephemeral_quiet,
                self.cfg.ephemeral_unarmed_idle,
            );
            s.status = Some(status);
            if let Some(why) = verdict {
                // Not ending yet (the decision waits while it is): the session is told to end.
                self.live.end(identity, Cause::WindDown);
                self.lifecycle(
                    Event::new("supervise")
                        .field("action", "wind-down")
                        .field("identity", identity)
                        .field("reason", why.as_str())
                        .field("age", format!("{}s", why.age_ms() / 1000)),
                );
            }
            return;
        }
        let verdict = idle_sleep(&facts, self.now, idle);
        s.status = Some(status);
        let Some(age) = verdict else {
            return;
        };
        // Resume-eligible before it ends, so the next message on its topic resumes it.
        logged(Markers::new(&self.paths, &s.identity).set(Flag::IdleReaped));
        self.live.end(identity, Cause::IdleSleep);
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
        self.deny_approvals_of(identity);
        self.live.settle_gone_waiters(identity);
        let markers = Markers::new(&self.paths, &s.identity);
        logged(markers.remove_session());
        let inflight = self
            .queues
            .endpoint(identity)
            .is_some_and(|ep| ep.inflight.is_some());
        let plan = after_exit(&ExitFacts {
            kind: s.kind,
            cause,
            boot_failed: s.state.boot_failure().is_some(),
            inflight,
            shutting_down: self.shutdown.is_some(),
            stopped: markers.is_set(Flag::Stopped),
            new_eager: markers.is_set(Flag::NewEager),
            clean_exit: cause == Cause::ChildExit && status == Some(0),
            had_conversation: s.mode == WakeMode::Resume || s.last_delivery_ms.is_some(),
        });
        if plan.record_death {
            logged(markers.record_death(self.now.ms));
        }
        if plan.resume_eligible {
            logged(markers.set(Flag::IdleReaped));
        }
        self.lifecycle(
            Event::new("session-end")
                .field("identity", identity)
                .field("pid", s.pid.to_string())
                .field("cause", cause.as_str())
                .opt("status", status.map(|c| c.to_string()).as_deref())
                .opt("signal", signal.as_deref())
                .opt("resumable", plan.resume_eligible.then_some("true")),
        );
        if !s.cut.is_empty() {
            let how = (status, signal.as_deref());
            self.on_turns_cut(identity, &s.cut, cause, how, plan.resume_eligible);
        }
        self.settle_inflight_after_exit(identity, &s, plan.inflight);
        if self.shutdown.is_some() {
            self.answer_queue_at_shutdown(identity);
        }
        if plan.back_off {
            let ran = self.now.since(s.started);
            self.back_off(&s.identity, ran, true);
        }
        if plan.restart_if_asked {
            let again = self.supervisor.take_restart_on_exit(&s.identity);
            if again {
                self.restart_always_on(&s.identity);
            }
        }
        if plan.new_eager {
            self.bring_up_new_eager(identity);
        }
        if plan.pump {
            self.pump(identity);
            if s.ephemeral {
                self.drain(identity);
            }
        }
    }

    /// The in-flight delivery of a session that ended: requeued or failed as
    /// [`after_exit`] said.
    fn settle_inflight_after_exit(
        &mut self,
        identity: &Identity,
        s: &super::Sess,
        inflight: Inflight,
    ) {
        // A delivery the session never answered: the session reports every delivery it
        // took (and a failed boot) before it exits, so this one never reached the child.
        match inflight {
            Inflight::Requeue => {
                if let Some(ep) = self.queues.endpoint_mut(identity) {
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
                let refusal = self.unanswered(
                    identity,
                    Refusal {
                        code: Code::Offline,
                        error: format!("peer \"{p}\" offline and wake failed: {reason}"),
                    },
                );
                self.fail_head(identity, refusal);
            }
            Inflight::None => {}
        }
    }

    /// During a shutdown, once a session ended: nothing more is begun, so what its queue
    /// still holds is answered now.
    fn answer_queue_at_shutdown(&mut self, identity: &Identity) {
        if let Some(ep) = self.queues.remove_endpoint(identity) {
            for job in ep.queue {
                match job {
                    super::endpoint::Job::Send(j) => {
                        let r = match self.earlier_fate(&j) {
                            Some(crate::msgids::Fate::Begun) => super::ids::unknown_refusal(
                                identity,
                                &j.msg_id,
                                "its session ended without answering for it",
                            ),
                            _ => super::shutting_down(),
                        };
                        self.finish_send(j.record(), r);
                    }
                    other => other.fail(Code::ShuttingDown, super::SHUTTING_DOWN.into()),
                }
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
}

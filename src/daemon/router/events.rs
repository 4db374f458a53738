//! Session events at the router (spec 04 §1, spec 05 §2): phases for waiting senders,
//! readiness, boot failures, delivery and compaction outcomes, probes, attach counts, deaths.

use super::decide::{boot_failure_fails_head, delivery_failure, DeliveryFailure};
use super::endpoint::{Job, SendJob};
use super::Router;
use crate::daemon::route::Refusal;
use crate::eventlog::Event;
use crate::names::Identity;
use crate::protocol::{Code, CompactReply, Progress, QueuedBy, Reply};
use crate::runtime::RuntimeKind;
use crate::session::handle::{EventKind, SessionEvent};
use crate::session::outcome;

impl Router {
    /// A session reported something.
    pub(crate) fn on_session_event(&mut self, ev: SessionEvent) {
        let Some(identity) = self.live.by_session_id(ev.session).cloned() else {
            return;
        };
        // The session thread can speak before its launcher has reported: keep its events
        // for `on_launched` to replay once the session is tracked.
        if let Some(l) = self.live.launching_mut(&identity) {
            if l.session == ev.session {
                l.early.events.push(ev);
                return;
            }
        }
        match ev.kind {
            EventKind::Phase(phase) => self.progress_to_waiters(&identity, &phase),
            EventKind::Ready(waits) => self.on_ready(&identity, waits),
            EventKind::BootMenu {
                options,
                cursor,
                question,
            } => self.on_boot_menu(&identity, options, cursor, question),
            EventKind::PromptOpened { n, prompt, hooked } => {
                self.on_prompt_opened(&identity, ev.session, n, prompt, hooked)
            }
            EventKind::PromptClosed { n, how } => {
                self.on_prompt_closed(&identity, ev.session, n, how)
            }
            EventKind::BootFailed {
                failure,
                screen,
                width,
            } => {
                let reason = outcome::boot_failed_reason(&failure, &screen, width);
                if let Some(s) = self.live.get_mut(&identity) {
                    s.state.boot_failed(reason.clone());
                }
                self.lifecycle(
                    Event::new("wake-failed")
                        .field("identity", &identity)
                        .field("reason", &reason)
                        .field("screen", screen),
                );
                // A wake job waiting for readiness fails now; a first message fails when the
                // session answers its delivery.
                let head = self.queues.head(&identity).map(Job::view);
                if boot_failure_fails_head(head) {
                    let p = &identity.personality;
                    self.fail_head(
                        &identity,
                        Refusal {
                            code: Code::Offline,
                            error: format!("peer \"{p}\" offline and wake failed: {reason}"),
                        },
                    );
                }
            }
            EventKind::Delivered {
                id,
                result,
                taken_ms,
            } => self.on_delivered(&identity, id, result.map(|()| None), taken_ms),
            EventKind::Refused { id, reason } => self.on_refused(&identity, id, reason),
            EventKind::Unconfirmed { id, reason } => self.on_unconfirmed(&identity, id, reason),
            EventKind::Queued { id, by, depth } => {
                self.on_delivered(&identity, id, Ok(Some((by, depth))), None)
            }
            EventKind::QueueOutcome { id, result } => self.on_queue_outcome(id, result),
            EventKind::GateOutcome { id, result, quiet } => {
                self.on_gate_outcome(&identity, id, result, quiet)
            }
            EventKind::Status(status) => self.on_status(&identity, status),
            EventKind::Busy(busy) => {
                // Only the flag: idle decisions stay with the probe's full answer.
                if let Some(s) = self.live.get_mut(&identity) {
                    s.status.get_or_insert_with(Default::default).busy = busy;
                }
            }
            EventKind::ComposerCleared { id } => self.on_composer_cleared(&identity, id),
            EventKind::Conversation { id } => self.on_conversation(&identity, &id),
            EventKind::TurnsCut { ids } => {
                if let Some(s) = self.live.get_mut(&identity) {
                    s.cut = ids;
                }
            }
            EventKind::Compacted { id, result } => self.on_compacted(&identity, id, result),
            EventKind::Attached(n) => {
                if let Some(s) = self.live.get_mut(&identity) {
                    s.attached = n;
                }
            }
            EventKind::Exited {
                status,
                signal,
                cause,
            } => self.on_exited(&identity, ev.session, status, signal, cause),
        }
    }

    /// `identity`'s session is ready: logged with how long it waited for its screen and its
    /// MCP client, its boot menus closed, its queue moved.
    fn on_ready(&mut self, identity: &Identity, waits: crate::session::handle::ReadyWaits) {
        if let Some(s) = self.live.get_mut(identity) {
            s.state.ready();
        }
        self.lifecycle(
            Event::new("ready")
                .field("identity", identity)
                .field("screen_ms", waits.screen_ms.to_string())
                .opt("mcp_ms", waits.mcp_ms.map(|m| m.to_string())),
        );
        self.close_boot_menus_of(identity);
        self.pump(identity);
    }

    /// `identity`'s session learned its conversation's id (issue 32): recorded with its
    /// topics (`.conversation`) and logged (`ev=conversation identity id`).
    fn on_conversation(&mut self, identity: &Identity, id: &str) {
        super::logged(self.markers(identity).write_conversation(id));
        self.lifecycle(
            Event::new("conversation")
                .field("identity", identity)
                .field("id", id),
        );
    }

    pub(crate) fn progress_to_waiters(&self, identity: &Identity, phase: &str) {
        let Some(ep) = self.queues.endpoint(identity) else {
            return;
        };
        if let Some(job) = ep.queue.front() {
            let started = match job {
                Job::Send(j) => Some(j.started),
                Job::Wake(w) => Some(w.started),
                Job::Compact(_) => None,
            };
            let ms = started.map_or(0, |s| self.now.since(s).as_millis() as u64);
            let p = Progress {
                progress: phase.to_string(),
                identity: identity.to_string(),
                elapsed_ms: ms,
            };
            match job {
                Job::Send(j) => j.reply.progress(p),
                Job::Wake(w) => w.reply.progress(p),
                Job::Compact(c) => c.reply.progress(p),
            }
        }
    }

    /// The head job of `identity` when `id` is the one in flight there: taken off the queue
    /// and the endpoint left with nothing in flight. `None` for an answer that is not the
    /// current one (late, or for a job already finished).
    pub(super) fn take_inflight(&mut self, identity: &Identity, id: u64) -> Option<Job> {
        let ep = self.queues.endpoint_mut(identity)?;
        if ep.inflight != Some(id) {
            return None;
        }
        ep.inflight = None;
        ep.queue.pop_front()
    }

    pub(crate) fn on_compacted(
        &mut self,
        identity: &Identity,
        id: u64,
        result: Result<crate::runtime::CompactOutcome, outcome::CompactFailure>,
    ) {
        let Some(Job::Compact(c)) = self.take_inflight(identity, id) else {
            return;
        };
        let resumed = self.live.get(identity).is_some_and(|s| {
            s.mode == crate::runtime::WakeMode::Resume && s.last_delivery_ms.is_none()
        });
        match result {
            Ok(outcome) => {
                self.lifecycle(
                    Event::new("compact")
                        .field("identity", identity)
                        .field("outcome", outcome.as_str()),
                );
                c.reply.finish(CompactReply {
                    identity: identity.to_string(),
                    outcome,
                    resumed,
                });
            }
            Err(e) => c.reply.finish(Reply::failure(Code::Busy, e.to_string())),
        }
        self.pump(identity);
    }

    /// The runtime answered that it cannot take delivery `id` (its reason in `reason`):
    /// the message fails at once with that reason, never held for a revive — the session
    /// is up and goes on with the next message.
    pub(crate) fn on_refused(&mut self, identity: &Identity, id: u64, reason: String) {
        let Some(Job::Send(job)) = self.take_inflight(identity, id) else {
            return;
        };
        self.note_known(identity, &job.key(), super::ids::Known::NotWritten);
        let p = &job.prepared.endpoint;
        let error = format!(
            "peer \"{}\" ({}) could not take the message: {reason}; message NOT delivered",
            p.personality, p.runtime
        );
        // Not the daemon's own error (500 on the fleet API): the peer cannot take messages
        // now, as an offline one cannot (502).
        self.finish_send(
            job.record(),
            Refusal {
                code: Code::Offline,
                error,
            },
        );
        self.after_answer(identity);
    }

    /// A delivery's answer from the session: accepted (`Ok(None)`), accepted into a queue
    /// (`Ok(Some(by))`), or failed with none of it written (a failure after some of it was
    /// written is [`Router::on_unconfirmed`]). `taken_ms`: when the runtime took it (epoch
    /// ms), the moment its delivery.log line records (issue 31 item 2).
    pub(crate) fn on_delivered(
        &mut self,
        identity: &Identity,
        id: u64,
        result: Result<Option<(QueuedBy, Option<u64>)>, outcome::DeliveryFailure>,
        taken_ms: Option<u64>,
    ) {
        let Some(Job::Send(job)) = self.take_inflight(identity, id) else {
            return;
        };
        let job = SendJob { taken_ms, ..*job };
        if result.is_err() {
            // Not one byte of it reached the peer: its id may be sent again.
            self.note_known(identity, &job.key(), super::ids::Known::NotWritten);
        }
        if let (true, Err(reason)) = (job.timed_out, &result) {
            // Its deadline passed and the session gave it back (or failed it): a timeout,
            // never a revive hold or a retry.
            let r = super::deadline::timeout_refusal(identity, job.timeout, &reason.to_string());
            self.finish_send(job.record(), r);
            return self.after_answer(identity);
        }
        if self.shutdown.is_some() && result.is_err() {
            // Given back while the daemon stops: nothing of it was written.
            self.finish_send(job.record(), super::shutting_down());
            return self.after_answer(identity);
        }
        let stopped = self.live.get(identity).and_then(|s| {
            (s.state.ending_cause() == Some(crate::session::handle::Cause::Stop))
                .then(|| s.identity.clone())
        });
        let failure = result
            .is_err()
            .then(|| delivery_failure(job.kind, job.woke, stopped.is_some()));
        if failure == Some(DeliveryFailure::HoldForRevive) {
            return self.hold_for_revive(identity, job);
        }
        let boot_failure = self
            .live
            .get(identity)
            .and_then(|s| s.state.boot_failure().map(str::to_string));
        let p = &job.prepared;
        match (result, stopped) {
            (Ok(queued), _) => {
                let now = self.now.ms;
                if let Some(s) = self.live.get_mut(identity) {
                    s.last_delivery_ms = Some(now);
                }
                if let Some(topic) = p.envelope.topic.clone() {
                    let changed = job.kind == RuntimeKind::Agent
                        && self.topics.note(&self.paths, identity, &topic);
                    if changed && self.topics.arm() {
                        self.set_timer(
                            self.now.at + super::topics::FLUSH_AFTER,
                            super::Timer::TopicFlush,
                        );
                    }
                    if changed {
                        self.lifecycle(
                            Event::new("topic-note")
                                .field("identity", identity)
                                .field("topic", topic),
                        );
                    }
                }
                if job.kind == RuntimeKind::Agent {
                    self.remember_delivered(&job, false);
                }
                match queued {
                    Some((by, _)) => self.follow(&job, super::followup::Awaits::Queue(by)),
                    // The wake's first message: its ready gate runs on (`GateOutcome`).
                    None if job.woke => self.follow(&job, super::followup::Awaits::ReadyGate),
                    None => {}
                }
                self.send_delivered(job, queued);
            }
            // The operator stopped the peer while this message waited for it: say so, not
            // how the ended process exited.
            (Err(_), Some(ident)) => {
                self.finish_send(job.record(), crate::daemon::route::stopped_refusal(&ident));
            }
            (Err(reason), None) => {
                let (pers, rt) = (p.endpoint.personality.clone(), p.endpoint.runtime.clone());
                let woke = failure == Some(DeliveryFailure::WakeFailed);
                let error = if woke {
                    format!(
                        "peer \"{pers}\" offline and wake failed: {}",
                        boot_failure.unwrap_or_else(|| reason.to_string())
                    )
                } else {
                    format!("peer \"{pers}\" ({rt}) is listed live but did not accept the message ({reason}); message NOT delivered")
                };
                let code = if woke { Code::Offline } else { Code::Timeout };
                self.finish_send(job.record(), Refusal { code, error });
            }
        }
        self.after_answer(identity);
    }
}

//! Session events at the router (spec 04 §1, spec 05 §2): phases for waiting senders,
//! readiness, boot failures, delivery and compaction outcomes, probes, attach counts, deaths.

use super::endpoint::Job;
use super::{logged, Router};
use crate::daemon::route::Refusal;
use crate::eventlog::Event;
use crate::names::Identity;
use crate::protocol::{Code, CompactReply, Progress, Reply};
use crate::runtime::RuntimeKind;
use crate::session::handle::{EventKind, SessionEvent};

impl Router {
    /// A session reported something.
    pub(crate) fn on_session_event(&mut self, ev: SessionEvent) {
        let Some(identity) = self.session_ids.get(&ev.session).cloned() else {
            return;
        };
        match ev.kind {
            EventKind::Phase(phase) => self.progress_to_waiters(&identity, &phase),
            EventKind::Ready => {
                if let Some(s) = self.sessions.get_mut(&identity) {
                    s.ready = true;
                }
                self.lifecycle(Event::new("ready").field("identity", &identity));
                self.pump(&identity);
            }
            EventKind::BootFailed { reason, screen, .. } => {
                if let Some(s) = self.sessions.get_mut(&identity) {
                    s.boot_failure = Some(reason.clone());
                }
                self.lifecycle(
                    Event::new("wake-failed")
                        .field("identity", &identity)
                        .field("reason", &reason)
                        .field("screen", screen),
                );
                // A wake job waiting for readiness fails now; a first message fails when the
                // session answers its delivery.
                if let Some(Job::Wake(_)) =
                    self.endpoints.get(&identity).and_then(|e| e.queue.front())
                {
                    let p = Identity::parse(&identity)
                        .map(|i| i.personality)
                        .unwrap_or_default();
                    self.fail_head(
                        &identity,
                        Refusal {
                            code: Code::Offline,
                            error: format!("peer \"{p}\" offline and wake failed: {reason}"),
                        },
                    );
                }
            }
            EventKind::Delivered { id, result } => self.on_delivered(&identity, id, result),
            EventKind::Status(status) => self.on_status(&identity, status),
            EventKind::Compacted { id, result } => self.on_compacted(&identity, id, result),
            EventKind::Attached(n) => {
                if let Some(s) = self.sessions.get_mut(&identity) {
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

    pub(crate) fn progress_to_waiters(&self, identity: &str, phase: &str) {
        let Some(ep) = self.endpoints.get(identity) else {
            return;
        };
        if let Some(job) = ep.queue.front() {
            let (reply, started) = match job {
                Job::Send(j) => (&j.reply, Some(j.started)),
                Job::Wake(w) => (&w.reply, Some(w.started)),
                Job::Compact(c) => (&c.reply, None),
            };
            let ms = started.map_or(0, |s| s.elapsed().as_millis() as u64);
            reply.progress(Progress {
                progress: phase.to_string(),
                identity: identity.to_string(),
                elapsed_ms: ms,
            });
        }
    }

    pub(crate) fn on_compacted(
        &mut self,
        identity: &str,
        id: u64,
        result: Result<crate::runtime::CompactOutcome, String>,
    ) {
        let Some(ep) = self.endpoints.get_mut(identity) else {
            return;
        };
        if ep.inflight != Some(id) {
            return;
        }
        ep.inflight = None;
        let Some(Job::Compact(c)) = ep.queue.pop_front() else {
            return;
        };
        let resumed = self.sessions.get(identity).is_some_and(|s| {
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
            Err(e) => c.reply.finish(Reply::failure(Code::Busy, e)),
        }
        self.pump(identity);
    }

    pub(crate) fn on_delivered(&mut self, identity: &str, id: u64, result: Result<(), String>) {
        let Some(ep) = self.endpoints.get_mut(identity) else {
            return;
        };
        if ep.inflight != Some(id) {
            return;
        }
        ep.inflight = None;
        let Some(Job::Send(job)) = ep.queue.pop_front() else {
            return;
        };
        let job = *job;
        if result.is_err() && job.kind == RuntimeKind::Router {
            return self.hold_for_revive(identity, job);
        }
        let boot_failure = self
            .sessions
            .get(identity)
            .and_then(|s| s.boot_failure.clone());
        let stopped = self.sessions.get(identity).and_then(|s| {
            (s.stopping == Some(crate::session::handle::Cause::Stop)).then(|| s.identity.clone())
        });
        let p = job.prepared.as_ref().expect("delivered sends are prepared");
        match (result, stopped) {
            (Ok(()), _) => {
                let now = crate::clock::now_ms();
                if let Some(s) = self.sessions.get_mut(identity) {
                    s.last_delivery_ms = Some(now);
                }
                if let Some(topic) = p.envelope.topic.clone() {
                    let changed = job.kind == RuntimeKind::Agent
                        && self
                            .markers(identity)
                            .is_some_and(|m| logged(m.note_topic(&topic)).unwrap_or(false));
                    if changed {
                        self.lifecycle(
                            Event::new("topic-note")
                                .field("identity", identity)
                                .field("topic", topic),
                        );
                    }
                }
                self.finish_send(job, Ok(()));
            }
            // The operator stopped the peer while this message waited for it: say so, not
            // how the ended process exited.
            (Err(_), Some(ident)) => {
                self.finish_send(job, Err(crate::daemon::route::stopped_refusal(&ident)));
            }
            (Err(reason), None) => {
                let (pers, rt) = (p.endpoint.personality.clone(), p.endpoint.runtime.clone());
                let error = if job.woke {
                    format!(
                        "peer \"{pers}\" offline and wake failed: {}",
                        boot_failure.unwrap_or(reason)
                    )
                } else {
                    format!("peer \"{pers}\" ({rt}) is listed live but did not accept the message ({reason}); message NOT delivered")
                };
                let code = if job.woke {
                    Code::Offline
                } else {
                    Code::Timeout
                };
                self.finish_send(job, Err(Refusal { code, error }));
            }
        }
        self.pump(identity);
    }
}

//! Following a queued message (spec 03 §1 step 9, spec 05 §7, issue 7): one the agent runtime
//! queued behind a running turn (`queuedBy: "runtime"`), or one the session holds while the
//! composer holds a draft (`queuedBy: "composer"`). The sender was answered `queued`; when the
//! message reaches the model `delivery.log` gets a `delivery-followup` line, and when it is
//! lost instead (removed, held past the limit, the session ended) the line says so and the
//! original sender is told by a message from `iapeer` (spec 05 §7's failure notice), unless
//! its session is asleep.
//!
//! The first message of a wake is followed the same way through its ready gate (spec 05 §2
//! step 10), which runs after its sender was answered `delivered … woke` (issue 13 item 2):
//! `lifecycle.log` gets a `ready-gate` line, and a failed gate a notice to the sender.

use std::time::Instant;

use super::endpoint::QueuedSend;
use super::now::Now;
use super::Router;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::SendInput;
use crate::eventlog::Event;
use crate::names::Identity;
use crate::protocol::QueuedBy;
use crate::session::outcome::{DeliveryFailure, GateFailure};

/// What the router keeps of a runtime-queued send until its fate is known.
#[derive(Debug, Clone, PartialEq)]
pub struct Followed {
    /// The sender (`<runtime>-<personality>`), who gets the failure notice.
    pub caller: Identity,
    /// The endpoint whose runtime holds the message.
    pub endpoint: Identity,
    /// The send's topic (trimmed, not empty).
    pub topic: Option<String>,
    /// The envelope's `ts`, so the sender can tell which message failed.
    pub ts: Option<String>,
    /// When the send arrived.
    pub started: Instant,
    /// The message body's first characters, for the notice.
    pub preview: String,
    /// What it waits for.
    pub by: Awaits,
    /// Its sender and message id.
    pub key: crate::msgids::MsgKey,
}

/// What a followed send waits for after its sender was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaits {
    /// Its turn in a queue (`queued` answer): the runtime's, or the composer hold.
    Queue(QueuedBy),
    /// The ready gate of the wake it rode (`delivered … woke` answer): the model starting.
    ReadyGate,
    /// Nothing: delivered at once. Kept only among the recently delivered, so that its
    /// sender can be told when an interrupt gives it back (issue 26 item 8).
    Nothing,
}

/// Delivered sends remembered (all endpoints), so that an interrupt that gives one back can
/// tell its sender ([`Router::on_composer_cleared`]).
pub const RECENT_DELIVERED: usize = 256;

/// Body characters quoted in a failure notice.
const PREVIEW_CHARS: usize = 80;

impl Followed {
    /// The record of `job`, just answered; `by`: what it waits for now.
    pub fn of(job: &QueuedSend, by: Awaits) -> Followed {
        let p = &job.prepared;
        let preview: String = p.envelope.body.chars().take(PREVIEW_CHARS).collect();
        Followed {
            caller: p.caller.clone(),
            endpoint: p.endpoint.clone(),
            topic: p.envelope.topic.clone(),
            ts: p.envelope.ts.clone(),
            started: job.started,
            preview,
            by,
            key: job.key(),
        }
    }
}

/// The `delivery.log` line for a followed message's fate (pure): `ev=delivery-followup
/// caller=<rt-p> to=<p> via=<rt-p> qkind=runtime|composer
/// outcome=delivered|removed|held-too-long|session-ended ms=<since the send arrived> [topic=]
/// [err=]`.
pub fn followup_event(f: &Followed, result: &Result<(), DeliveryFailure>, now: Now) -> Event {
    let outcome = match result {
        Ok(()) => "delivered",
        Err(e) if e.session_ended() => "session-ended",
        Err(_) if matches!(f.by, Awaits::Queue(QueuedBy::Composer | QueuedBy::Approval)) => {
            "held-too-long"
        }
        Err(_) => "removed",
    };
    let err = result.as_ref().err().map(ToString::to_string);
    followup_line(f, outcome, err.as_ref(), now)
}

/// The `delivery.log` line of a followed message with `outcome` (`delivered`, `removed`,
/// `held-too-long`, `session-ended`, or `unknown`: written to the input, never confirmed)
/// and, unless delivered, `err`.
fn followup_line(f: &Followed, outcome: &str, err: Option<&String>, now: Now) -> Event {
    let qkind = match f.by {
        Awaits::Queue(by) => by.as_str(),
        Awaits::ReadyGate => "ready-gate",
        Awaits::Nothing => "none",
    };
    let ev = Event::new("delivery-followup")
        .field("caller", &f.caller)
        .field("to", &f.endpoint.personality)
        .field("via", &f.endpoint)
        .field("qkind", qkind)
        .field("msgid", &f.key.id)
        .field("outcome", outcome)
        .field("ok", if err.is_none() { "true" } else { "false" })
        .field("ms", now.since(f.started).as_millis().to_string())
        .opt("topic", f.topic.as_deref());
    match err {
        None => ev,
        Some(e) => ev.field("err", e),
    }
}

/// The notice to the sender of a queued message that was written to the peer's input and
/// never confirmed (pure): it may have arrived, and a retry must reuse its id.
pub fn unknown_notice(f: &Followed, reason: &str) -> String {
    let when =
        f.ts.as_deref()
            .map(|ts| format!(" sent at {ts}"))
            .unwrap_or_default();
    format!(
        "Your message to {} ({}){when} (\"{}\") was answered queued, then written to its input, \
         and its arrival was never confirmed: {reason}. Its state is unknown: it may have \
         arrived. If it still matters, send it again with the same message id {} (send_to_peer's \
         id): it is never delivered twice.",
        f.endpoint.personality, f.endpoint.runtime, f.preview, f.key.id
    )
}

/// The failure notice's body (pure): which message, why, and what to do.
pub fn failure_notice(f: &Followed, reason: &str) -> String {
    let what = which_message(f);
    let held = match f.by {
        Awaits::Queue(QueuedBy::Composer) => "held while its composer held a draft",
        Awaits::Queue(QueuedBy::Approval) => {
            "held while the agent waited for a human's approval of a permission prompt"
        }
        Awaits::Queue(_) | Awaits::Nothing => "queued behind its running turn",
        Awaits::ReadyGate => {
            return format!(
                "{what} woke it and reached its input, but its model did not start on it: {reason}. It stays in the agent's conversation; send it again if it still matters once the agent answers.",
            )
        }
    };
    format!("{what} was {held} but NOT delivered: {reason}. Send it again if it still matters.")
}

/// The notice for a delivered message whose turn was interrupted at `at` (an envelope
/// stamp) and whose text the agent's runtime put back into its composer, where iapeer
/// cleared it (pure; issue 26 item 8): the peer, when it was sent, an excerpt, when it was
/// interrupted, and that the agent does not have it.
pub fn interrupted_notice(f: &Followed, at: &str) -> String {
    format!(
        "{} was interrupted at {at} before the agent answered it: its runtime took it back out \
         of the conversation, so the agent does NOT have it (iapeer cleared it from the agent's \
         input). Send it again if it still matters.",
        which_message(f)
    )
}

/// The notice for a message answered `state-unknown` whose written part iapeer later cleared
/// from the agent's input (a cut paste, issue 26 item 5 (c)) — pure.
pub fn cut_cleared_notice(f: &Followed, at: &str) -> String {
    format!(
        "{} was answered \"state unknown\"; it did NOT arrive: the part that reached the \
         agent's input was cleared at {at} without being submitted. Send it again if it still \
         matters (the same message id {} is accepted again).",
        which_message(f),
        f.key.id
    )
}

/// What the sender of a remembered send was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    /// Delivered (or queued by the runtime).
    Delivered,
    /// `state-unknown`: part of it was written, its arrival never confirmed.
    Unknown,
}

impl Told {
    /// `delivered` or `unknown`, for log lines.
    pub fn word(self) -> &'static str {
        match self {
            Told::Delivered => "delivered",
            Told::Unknown => "unknown",
        }
    }
}

/// `Your message to <p> (<runtime>)[ sent at <ts>] ("<preview>[…]")` (pure).
pub(super) fn which_message(f: &Followed) -> String {
    let when =
        f.ts.as_deref()
            .map(|ts| format!(" sent at {ts}"))
            .unwrap_or_default();
    format!(
        "Your message to {} ({}){when} (\"{}{}\")",
        f.endpoint.personality,
        f.endpoint.runtime,
        f.preview,
        if f.preview.chars().count() >= PREVIEW_CHARS {
            "…"
        } else {
            ""
        },
    )
}

impl Router {
    /// Remember a send just answered; `by`: what it waits for now.
    pub(crate) fn follow(&mut self, job: &QueuedSend, by: Awaits) {
        self.queues.follow(job.id, Followed::of(job, by));
    }

    /// A runtime-queued message's fate: its follow-up line, and the notice on failure.
    pub(crate) fn on_queue_outcome(&mut self, id: u64, result: Result<(), DeliveryFailure>) {
        let Some(f) = self.queues.take_followed(id) else {
            return;
        };
        self.delivery_log
            .append(&followup_event(&f, &result, self.now));
        let known = match result {
            Ok(()) => super::ids::Known::Accepted,
            Err(_) => super::ids::Known::NotWritten,
        };
        self.note_known(&f.endpoint, &f.key, known);
        if let Err(reason) = result {
            self.failure_notice(&f, &reason.to_string());
        }
    }

    /// A queued message was written to the input and never confirmed: its follow-up line
    /// (`outcome=unknown`) and the notice that it may have arrived.
    pub(crate) fn on_queue_unknown(&mut self, id: u64, reason: String) {
        let Some(f) = self.queues.take_followed(id) else {
            return;
        };
        self.delivery_log
            .append(&followup_line(&f, "unknown", Some(&reason), self.now));
        let text = unknown_notice(&f, &reason);
        self.send_notice(&f, text);
    }

    /// The ready gate of a wake's first message passed or failed: its `ready-gate` line in
    /// `lifecycle.log` (`identity ok ms=<since the send arrived> [err]`), and on failure
    /// (the session is left running, spec 05 §2 step 10) the notice to the sender — unless
    /// `quiet`: the session was ended on purpose first.
    pub(crate) fn on_gate_outcome(
        &mut self,
        identity: &Identity,
        id: u64,
        result: Result<(), GateFailure>,
        quiet: bool,
    ) {
        let Some(f) = self.queues.take_followed(id) else {
            return;
        };
        let ev = Event::new("ready-gate")
            .field("identity", identity)
            .field("ok", if result.is_ok() { "true" } else { "false" })
            .field("ms", self.now.since(f.started).as_millis().to_string());
        match result {
            Ok(()) => self.lifecycle(ev),
            Err(reason) => {
                let reason = reason.to_string();
                self.lifecycle(ev.field("err", &reason));
                if !quiet {
                    self.failure_notice(&f, &reason);
                }
            }
        }
    }

    /// Remember a send just answered delivered (or queued) — or, with `unknown`, answered
    /// `state-unknown` after part of it was written — in case its text is cleared from the
    /// composer later (an interrupt gives it back, or the rest of a cut paste lands there).
    pub(crate) fn remember_delivered(&mut self, job: &QueuedSend, unknown: bool) {
        let told = if unknown {
            Told::Unknown
        } else {
            Told::Delivered
        };
        let recent = self.queues.recent_mut();
        recent.push_back((job.id, Followed::of(job, Awaits::Nothing), told));
        while recent.len() > RECENT_DELIVERED {
            recent.pop_front();
        }
    }

    /// `identity`'s session cleared the text of delivery `id` from its composer (issue 26
    /// items 8 and 5 (c)): a `composer-cleared` line in `lifecycle.log` (`identity id
    /// delivered=true|false`, `told=delivered|unknown` when the send is known). The agent
    /// does not have that message now, so its id is freed in the ledger (a retry with the same
    /// id goes out again) and its sender gets a notice (topic: the original, or
    /// `delivery-failed`): for one told delivered (the runtime gave it back after an
    /// interrupt) that it was interrupted; for one told `state-unknown` (a cut paste whose
    /// rest landed in the composer) that it did not arrive after all.
    pub(crate) fn on_composer_cleared(&mut self, identity: &Identity, id: u64) {
        let recent = self.queues.recent_mut();
        let known = recent
            .iter()
            .position(|(i, _, _)| *i == id)
            .and_then(|at| recent.remove(at))
            .map(|(_, f, told)| (f, told));
        let mut ev = Event::new("composer-cleared")
            .field("identity", identity)
            .field("id", id.to_string())
            .field(
                "delivered",
                if matches!(known, Some((_, Told::Delivered))) {
                    "true"
                } else {
                    "false"
                },
            );
        if let Some((_, told)) = &known {
            ev = ev.field("told", told.word());
        }
        self.lifecycle(ev);
        let Some((f, told)) = known else {
            return;
        };
        self.note_known(identity, &f.key, super::ids::Known::NotWritten);
        let at = crate::clock::envelope_ts(&crate::clock::now_local());
        let notice = match told {
            Told::Delivered => interrupted_notice(&f, &at),
            Told::Unknown => cut_cleared_notice(&f, &at),
        };
        self.send_notice(&f, notice);
    }

    /// Tell a followed send's sender, by a message from `iapeer`, that it failed for
    /// `reason` — unless the sender is asleep (never woken for this, spec 05 §7).
    fn failure_notice(&mut self, f: &Followed, reason: &str) {
        self.send_notice(f, failure_notice(f, reason));
    }

    /// Send `message` from `iapeer` to a followed send's sender — unless it is asleep.
    pub(super) fn send_notice(&mut self, f: &Followed, message: String) {
        self.notify(&f.caller, f.topic.clone(), message);
    }

    /// Send `message` from `iapeer` to `caller` on `topic` (else `delivery-failed`) — unless
    /// it is asleep (never woken for this, spec 05 §7).
    pub(super) fn notify(&mut self, caller: &Identity, topic: Option<String>, message: String) {
        if !self.live.has(caller) {
            // Never woken for this (spec 05 §7); the follow-up line is the record.
            self.lifecycle(
                Event::new("failure-notice")
                    .field("to", caller)
                    .field("sent", "false")
                    .field("why", "the sender is not live"),
            );
            return;
        }
        let input = SendInput::from_daemon(
            caller.personality.clone(),
            Some(caller.runtime.clone()),
            message,
            Some(topic.unwrap_or_else(|| "delivery-failed".into())),
        );
        self.lifecycle(
            Event::new("failure-notice")
                .field("to", caller)
                .field("sent", "true"),
        );
        self.begin_send(input, ReplyTo::discard(), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn followed() -> Followed {
        Followed {
            caller: Identity::new("echo", "alpha").unwrap(),
            endpoint: Identity::new("claude", "busy").unwrap(),
            topic: Some("t".into()),
            ts: Some("2026-11-30T10:00:03+00:00".into()),
            started: Instant::now(),
            preview: "MID-TURN".into(),
            by: Awaits::Queue(QueuedBy::Runtime),
            key: crate::msgids::MsgKey {
                from: "echo-alpha".into(),
                id: "m-7".into(),
            },
        }
    }

    fn fields(ev: &Event) -> Vec<(String, String)> {
        ev.fields().to_vec()
    }

    #[test]
    fn followup_lines_name_the_outcome() {
        let f = followed();
        let now = Now {
            at: f.started + Duration::from_millis(9000),
            ms: 0,
        };
        let ok = fields(&followup_event(&f, &Ok(()), now));
        let want = [
            ("ev", "delivery-followup"),
            ("caller", "echo-alpha"),
            ("to", "busy"),
            ("via", "claude-busy"),
            ("qkind", "runtime"),
            ("msgid", "m-7"),
            ("outcome", "delivered"),
            ("ok", "true"),
            ("ms", "9000"),
            ("topic", "t"),
        ];
        assert_eq!(
            ok,
            want.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        );
        let removed = followup_event(
            &f,
            &Err(DeliveryFailure::RemovedByRuntime(
                "Claude Code removed it from its input queue (cleared_on_cancel)".into(),
            )),
            now,
        );
        assert!(fields(&removed).contains(&("outcome".into(), "removed".into())));
        let ended = followup_event(&f, &Err(DeliveryFailure::QueuedSessionEnded), now);
        assert!(fields(&ended).contains(&("outcome".into(), "session-ended".into())));
        let composer = Followed {
            by: Awaits::Queue(QueuedBy::Composer),
            ..f
        };
        let held = fields(&followup_event(
            &composer,
            &Err(DeliveryFailure::HeldDraft {
                limit: Duration::from_secs(120),
            }),
            now,
        ));
        assert!(held.contains(&("qkind".into(), "composer".into())));
        assert!(held.contains(&("outcome".into(), "held-too-long".into())));
    }

    #[test]
    fn a_failed_ready_gate_s_notice_says_it_was_delivered_but_not_started() {
        let f = Followed {
            by: Awaits::ReadyGate,
            ..followed()
        };
        assert_eq!(
            failure_notice(&f, "model did not process the task"),
            "Your message to busy (claude) sent at 2026-11-30T10:00:03+00:00 (\"MID-TURN\") woke it and reached its input, but its model did not start on it: model did not process the task. It stays in the agent's conversation; send it again if it still matters once the agent answers."
        );
    }

    #[test]
    fn an_interrupted_message_s_notice_names_the_peer_both_times_and_the_text() {
        let f = Followed {
            by: Awaits::Nothing,
            preview: "x".repeat(PREVIEW_CHARS),
            ..followed()
        };
        assert_eq!(
            interrupted_notice(&f, "2026-11-30T10:00:09+00:00"),
            format!(
                "Your message to busy (claude) sent at 2026-11-30T10:00:03+00:00 (\"{}…\") was interrupted at 2026-11-30T10:00:09+00:00 before the agent answered it: its runtime took it back out of the conversation, so the agent does NOT have it (iapeer cleared it from the agent's input). Send it again if it still matters.",
                "x".repeat(PREVIEW_CHARS)
            )
        );
    }

    #[test]
    fn notice_says_which_message_why_and_what_to_do() {
        let n = failure_notice(&followed(), "the session ended");
        assert_eq!(
            n,
            "Your message to busy (claude) sent at 2026-11-30T10:00:03+00:00 (\"MID-TURN\") was queued behind its running turn but NOT delivered: the session ended. Send it again if it still matters."
        );
    }
}

//! What a session tells the router about a delivery, a ready gate or a compaction that did
//! not end well (spec 04 §1, spec 05 §2 step 10): typed facts whose `Display` is the sentence
//! the sender (or `lifecycle.log`) reads. The router decides on the variant, never on the
//! text (issue 29 item 2).

use std::fmt;
use std::time::Duration;

use crate::clock::spoken;
use crate::session::boot::BootFailure;
use crate::session::handle::Cause;

/// Why a delivery ([`crate::session::handle::EventKind::Delivered`], or the
/// [`crate::session::handle::EventKind::QueueOutcome`] of a queued one) did not reach the
/// model. Its `Display` is the reason its sender reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryFailure {
    /// It came while the session was ending.
    SessionEnding,
    /// Its sender stopped waiting before a byte of it was written.
    NotReadyYet,
    /// Its sender stopped waiting while its program took none of its input.
    NotReading,
    /// Its program took none of its input for `idle` ([`crate::session::thread::SessionConfig::stall`]):
    /// it was taken back whole.
    Stalled {
        /// How long the program read nothing.
        idle: Duration,
    },
    /// Its program took none of its input for `idle`: the rest of an earlier message, cut
    /// off, still waits to be read; none of this one was written.
    StalledBehindCut {
        /// How long the program read nothing.
        idle: Duration,
    },
    /// The runtime did not confirm it within the delivery's grace.
    NoConfirmation {
        /// The grace.
        within: Duration,
    },
    /// The runtime removed it from its input (queue), with the runtime's reason.
    RemovedByRuntime(String),
    /// Writing to the child's input failed (the OS error's text).
    WriteFailed(String),
    /// The composer held a draft for `limit` (composer hold, spec 05 §7).
    HeldDraft {
        /// The composer hold's limit.
        limit: Duration,
    },
    /// It waited `limit` behind an open permission prompt asking for `awaited`
    /// ([`crate::session::hold::awaited_approval`]).
    AwaitedApproval {
        /// What the prompt asks (`an approval: <tool>: <request>`).
        awaited: String,
        /// How long it waited.
        limit: Duration,
    },
    /// A dialog over the agent's input did not close when answered.
    DialogOpen,
    /// The composer held text nobody typed (`crate::adapter::Adapter::composer_leftovers`)
    /// that the runtime's clear key did not clear; the text says what and how often
    /// ([`crate::session::boot::still_there`]).
    UnclearedComposer(String),
    /// The session's boot failed first.
    BootFailed(BootFailure),
    /// The session ended before confirming it.
    SessionEnded,
    /// The session ended before the runtime's queue passed it to the model.
    QueuedSessionEnded,
    /// `failure`, with the screen's most informative line (a wake's first message, issue 32
    /// item 1).
    OnScreen {
        /// What happened.
        failure: Box<DeliveryFailure>,
        /// The screen line that says why.
        line: String,
    },
}

impl DeliveryFailure {
    /// The session ended before the message reached the model (a `session-ended` follow-up,
    /// not `removed` or `held-too-long`).
    pub fn session_ended(&self) -> bool {
        match self {
            DeliveryFailure::SessionEnded | DeliveryFailure::QueuedSessionEnded => true,
            DeliveryFailure::OnScreen { failure, .. } => failure.session_ended(),
            _ => false,
        }
    }

    /// `self`, with the most informative line of `screen` (`width` columns; 0 for a pipe's
    /// output) unless there is none or the reason already holds it.
    pub fn with_screen(self, screen: &str, width: usize) -> DeliveryFailure {
        match screen_line(&self.to_string(), screen, width) {
            Some(line) => DeliveryFailure::OnScreen {
                failure: Box::new(self),
                line,
            },
            None => self,
        }
    }
}

/// The most informative line of `screen` (`width` columns; 0 for a pipe's output) when
/// `reason` does not already hold it.
fn screen_line(reason: &str, screen: &str, width: usize) -> Option<String> {
    crate::session::failure_line::most_informative_line(screen, width)
        .filter(|line| !reason.contains(line))
}

/// `reason` with the most informative line of `screen` (`width` columns; 0 for a pipe's
/// output): `<reason> (on screen: <line>)`, or `reason` alone when there is none or it
/// already holds it.
pub fn with_screen(reason: &str, screen: &str, width: usize) -> String {
    match screen_line(reason, screen, width) {
        Some(line) => format!("{reason} (on screen: {line})"),
        None => reason.to_string(),
    }
}

/// The reason a sender waiting for a wake reads when its boot failed
/// ([`crate::session::handle::EventKind::BootFailed`]): the failure with the last screen's
/// most informative line.
pub fn boot_failed_reason(failure: &BootFailure, screen: &str, width: usize) -> String {
    with_screen(&failure.to_string(), screen, width)
}

impl fmt::Display for DeliveryFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeliveryFailure::SessionEnding => f.write_str("the session is ending"),
            DeliveryFailure::NotReadyYet => {
                f.write_str("the session is not ready for it yet; message NOT delivered")
            }
            DeliveryFailure::NotReading => f.write_str(
                "its program is not reading its input (none of the message was written); \
                 message NOT delivered",
            ),
            DeliveryFailure::Stalled { idle } => write!(
                f,
                "its program took none of its input for {} (none of the message was \
                 written; it was taken back)",
                spoken(*idle)
            ),
            DeliveryFailure::StalledBehindCut { idle } => write!(
                f,
                "its program took none of its input for {}: the rest of an earlier \
                 message, cut off, still waits to be read (none of this message was \
                 written)",
                spoken(*idle)
            ),
            DeliveryFailure::NoConfirmation { within } => {
                write!(f, "no confirmation within {} ms", within.as_millis())
            }
            DeliveryFailure::RemovedByRuntime(why) => f.write_str(why),
            DeliveryFailure::WriteFailed(e) => write!(f, "could not write to the session: {e}"),
            DeliveryFailure::HeldDraft { limit } => write!(
                f,
                "the composer held a draft for {} s (it is never submitted with a message) — clear or send the draft, then resend",
                limit.as_secs()
            ),
            DeliveryFailure::AwaitedApproval { awaited, limit } => write!(
                f,
                "waited {} s for {awaited} — its permission prompt is still open on the agent's \
                 screen; answer it (iapeer approvals, or attach), then resend",
                limit.as_secs()
            ),
            DeliveryFailure::DialogOpen => f.write_str(
                "a dialog the agent shows over its input did not close when answered; attach \
                 to the session to see it (iapeer attach)",
            ),
            DeliveryFailure::UnclearedComposer(what) => write!(
                f,
                "{what}; message NOT delivered — attach to the session (iapeer attach), clear \
                 its input, then resend"
            ),
            DeliveryFailure::BootFailed(failure) => write!(f, "{failure}"),
            DeliveryFailure::SessionEnded => {
                f.write_str("the session ended before confirming the message")
            }
            DeliveryFailure::QueuedSessionEnded => {
                f.write_str("the session ended before the queued message reached the model")
            }
            DeliveryFailure::OnScreen { failure, line } => {
                write!(f, "{failure} (on screen: {line})")
            }
        }
    }
}

/// Why the ready gate of a wake's first message failed
/// ([`crate::session::handle::EventKind::GateOutcome`], spec 05 §2 step 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateFailure {
    /// No sign that the model started within the gate.
    ModelIdle,
    /// The runtime's gate watch saw that the turn cannot start (e.g. the API refuses).
    Refused(String),
    /// The session was ended on purpose (`cause`) before the gate passed.
    EndedFirst(Cause),
    /// The session ended (not on purpose) before the model processed the task.
    SessionEnded,
}

impl fmt::Display for GateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateFailure::ModelIdle => f.write_str("model did not process the task"),
            GateFailure::Refused(why) => f.write_str(why),
            GateFailure::EndedFirst(cause) => {
                write!(f, "the session was ended ({}) first", cause.as_str())
            }
            GateFailure::SessionEnded => {
                f.write_str("the session ended before its model processed the task")
            }
        }
    }
}

/// Why a compaction ([`crate::session::handle::EventKind::Compacted`]) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactFailure {
    /// The session is booting or ending.
    #[error("the session is not ready")]
    NotReady,
    /// A delivery or another compaction is under way.
    #[error("the session is busy with another delivery or compaction")]
    Busy,
    /// iapeer is clearing a message it pasted from the composer.
    #[error(
        "iapeer is clearing a message it pasted (interrupted or cut off) from the \
          composer — compact again in a moment"
    )]
    ClearingOwnText,
    /// The composer holds a draft (`shown`: its first 40 characters).
    #[error("the composer holds a draft (\"{shown}…\") — clear it, then compact")]
    Draft {
        /// The draft's start.
        shown: String,
    },
    /// The composer held text nobody typed (`crate::adapter::Adapter::composer_leftovers`)
    /// that the runtime's clear key did not clear; the text says what and how often
    /// ([`crate::session::boot::still_there`]).
    #[error(
        "{0}; compact NOT started — attach to the session (iapeer attach), clear its input, \
         then compact again"
    )]
    UnclearedComposer(String),
    /// The composer held text nobody typed while a turn ran (its clear key would have
    /// interrupted the turn) for all of `limit` (`crate::session::compact::CLEARING_LIMIT`).
    #[error(
        "the composer holds text nobody typed and a turn ran for {} s, so it could not be \
         cleared; compact NOT started — compact again once the turn ends",
        .limit.as_secs()
    )]
    BusyWithLeftovers {
        /// How long the compaction waited.
        limit: Duration,
    },
    /// The runtime (`runtime`, its name) has no compaction.
    #[error("{runtime} does not support compact")]
    Unsupported {
        /// The runtime's name.
        runtime: String,
    },
    /// The runtime did not finish within `limit`.
    #[error("compaction did not finish within {} s", .limit.as_secs())]
    TimedOut {
        /// The compaction's deadline.
        limit: Duration,
    },
    /// The runtime said it could not compact (`said`, its words).
    #[error("the runtime could not compact: {said}")]
    Refused {
        /// What the runtime said.
        said: String,
    },
    /// The session ended first.
    #[error("the session ended during compaction")]
    SessionEnded,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_on_screen_adds_the_line_once() {
        let f = DeliveryFailure::NoConfirmation {
            within: Duration::from_millis(4000),
        };
        let screen = "\n  Error: open in another app\n";
        let on = f.clone().with_screen(screen, 80);
        assert_eq!(
            on.to_string(),
            "no confirmation within 4000 ms (on screen: Error: open in another app)"
        );
        assert_eq!(f.clone().with_screen("", 80), f);
    }

    #[test]
    fn only_a_session_end_is_a_session_end() {
        assert!(DeliveryFailure::QueuedSessionEnded.session_ended());
        assert!(DeliveryFailure::SessionEnded.session_ended());
        let removed = DeliveryFailure::RemovedByRuntime("the session ended (its words)".into());
        assert!(!removed.session_ended());
    }
}

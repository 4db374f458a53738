//! Compaction of a live agent's conversation (spec 05 §5 `compact`), driven by the session
//! thread: type the runtime's command, Enter after the settle, then watch for its completion
//! record. Pure apart from the watcher it holds.

use std::time::{Duration, Instant};

use super::deliver::SETTLE;
use super::outcome::CompactFailure;
#[cfg(test)]
use crate::adapter::CompactRefused;
use crate::adapter::{CompactOutcome, CompactWatch};

/// How long a compaction may take (the model summarizes the whole conversation).
pub const COMPACT_DEADLINE: Duration = Duration::from_secs(290);
/// How long a compaction may wait for its composer to be cleared of text nobody typed
/// (the clear key goes at most [`super::boot::MAX_CLEARS`] times,
/// [`super::boot::CLEAR_GAP`] apart; while a turn runs no key goes, and this bounds the wait).
pub const CLEARING_LIMIT: Duration = Duration::from_secs(60);
/// How often completion is checked.
pub const COMPACT_POLL: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Nothing typed yet: the session clears text nobody typed from the composer first
    /// (`crate::adapter::Adapter::composer_leftovers`), looking again at `next_check`, and
    /// gives up at `deadline`.
    Clearing {
        next_check: Instant,
        deadline: Instant,
    },
    Typing,
    Settling {
        until: Instant,
    },
    Waiting {
        deadline: Instant,
        next_poll: Instant,
    },
}

/// What the session thread must do after a step.
#[derive(Debug, PartialEq)]
pub enum CompactStep {
    /// Nothing now.
    Wait,
    /// Write these bytes.
    Write(Vec<u8>),
    /// Finished.
    Done(Result<CompactOutcome, CompactFailure>),
}

/// What a compaction that clears its composer first does now
/// ([`ActiveCompact::clearing_due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClearingCheck {
    /// Look at the composer: clear it, or type the command once it is clear.
    Look,
    /// [`CLEARING_LIMIT`] passed with the composer never clear: fail the compaction.
    GiveUp,
}

/// A compaction in progress.
pub struct ActiveCompact {
    /// The router's request id.
    pub id: u64,
    phase: Phase,
    watch: Box<dyn CompactWatch>,
    /// The runtime's command, typed once the composer is clear.
    command: String,
}

impl ActiveCompact {
    /// Start: returns the machine and the command bytes to type now.
    pub fn start(id: u64, command: &str, watch: Box<dyn CompactWatch>) -> (ActiveCompact, Vec<u8>) {
        (
            ActiveCompact {
                id,
                phase: Phase::Typing,
                watch,
                command: command.to_string(),
            },
            command.as_bytes().to_vec(),
        )
    }

    /// Start with nothing typed: the composer holds text nobody typed, which the session
    /// clears first ([`ActiveCompact::clearing_due`], then [`ActiveCompact::cleared`]), for
    /// at most [`CLEARING_LIMIT`] from `now`.
    pub fn after_clearing(
        id: u64,
        command: &str,
        watch: Box<dyn CompactWatch>,
        now: Instant,
    ) -> ActiveCompact {
        ActiveCompact {
            id,
            phase: Phase::Clearing {
                next_check: now,
                deadline: now + CLEARING_LIMIT,
            },
            watch,
            command: command.to_string(),
        }
    }

    /// Whether the composer is to be looked at now, before the command is typed
    /// ([`ClearingCheck`]; the next look is [`super::clear::POLL`] later), `None` when not
    /// clearing or not yet due.
    pub fn clearing_due(&mut self, now: Instant) -> Option<ClearingCheck> {
        let Phase::Clearing {
            next_check,
            deadline,
        } = self.phase
        else {
            return None;
        };
        if now >= deadline {
            return Some(ClearingCheck::GiveUp);
        }
        if now < next_check {
            return None;
        }
        self.phase = Phase::Clearing {
            next_check: now + super::clear::POLL,
            deadline,
        };
        Some(ClearingCheck::Look)
    }

    /// The composer is clear: the command's bytes, to type now.
    pub fn cleared(&mut self) -> Vec<u8> {
        if matches!(self.phase, Phase::Clearing { .. }) {
            self.phase = Phase::Typing;
        }
        self.command.as_bytes().to_vec()
    }

    /// The typed command was fully written.
    pub fn on_written(&mut self, now: Instant) {
        if self.phase == Phase::Typing {
            self.phase = Phase::Settling {
                until: now + SETTLE,
            };
        }
    }

    /// Advance by time; `screen` is the current screen text.
    pub fn poll(&mut self, now: Instant, screen: &str) -> CompactStep {
        match self.phase {
            Phase::Clearing { .. } | Phase::Typing => CompactStep::Wait,
            Phase::Settling { until } => {
                if now < until {
                    return CompactStep::Wait;
                }
                self.phase = Phase::Waiting {
                    deadline: now + COMPACT_DEADLINE,
                    next_poll: now + COMPACT_POLL,
                };
                CompactStep::Write(b"\r".to_vec())
            }
            Phase::Waiting {
                deadline,
                next_poll,
            } => {
                if now < next_poll && now < deadline {
                    return CompactStep::Wait;
                }
                if let Some(end) = self.watch.poll(screen) {
                    return CompactStep::Done(
                        end.map_err(|r| CompactFailure::Refused { said: r.said }),
                    );
                }
                if now >= deadline {
                    return CompactStep::Done(Err(CompactFailure::TimedOut {
                        limit: COMPACT_DEADLINE,
                    }));
                }
                self.phase = Phase::Waiting {
                    deadline,
                    next_poll: now + COMPACT_POLL,
                };
                CompactStep::Wait
            }
        }
    }

    /// When [`ActiveCompact::poll`] next needs to run.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Clearing {
                next_check,
                deadline,
            } => Some(next_check.min(deadline)),
            Phase::Typing => None,
            Phase::Settling { until } => Some(until),
            Phase::Waiting {
                deadline,
                next_poll,
            } => Some(deadline.min(next_poll)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct After(u32, Option<Result<CompactOutcome, CompactRefused>>);
    impl CompactWatch for After {
        fn poll(&mut self, _screen: &str) -> Option<Result<CompactOutcome, CompactRefused>> {
            if self.0 == 0 {
                return self.1.clone();
            }
            self.0 -= 1;
            None
        }
    }

    #[test]
    fn types_settles_enters_and_waits_for_the_record() {
        let t0 = Instant::now();
        let (mut c, bytes) = ActiveCompact::start(
            1,
            "/compact",
            Box::new(After(1, Some(Ok(CompactOutcome::Compacted)))),
        );
        assert_eq!(bytes, b"/compact");
        assert_eq!(c.poll(t0, ""), CompactStep::Wait);
        c.on_written(t0);
        assert_eq!(c.poll(t0 + SETTLE, ""), CompactStep::Write(b"\r".to_vec()));
        let t1 = t0 + SETTLE + COMPACT_POLL;
        assert_eq!(c.poll(t1, ""), CompactStep::Wait);
        assert_eq!(
            c.poll(t1 + COMPACT_POLL, ""),
            CompactStep::Done(Ok(CompactOutcome::Compacted))
        );
    }

    #[test]
    fn a_refusal_ends_it_with_the_runtimes_words() {
        let t0 = Instant::now();
        let said = "Failed to compress chat history: no".to_string();
        let refused = Err(CompactRefused { said: said.clone() });
        let (mut c, _) = ActiveCompact::start(1, "/compress", Box::new(After(0, Some(refused))));
        c.on_written(t0);
        c.poll(t0 + SETTLE, "");
        assert_eq!(
            c.poll(t0 + SETTLE + COMPACT_POLL, ""),
            CompactStep::Done(Err(CompactFailure::Refused { said }))
        );
    }

    #[test]
    fn after_clearing_types_nothing_until_cleared_and_gives_up_at_its_limit() {
        let t0 = Instant::now();
        let watch = || Box::new(After(0, Some(Ok(CompactOutcome::Compacted))));
        let mut c = ActiveCompact::after_clearing(1, "/compress", watch(), t0);
        assert_eq!(c.next_deadline(), Some(t0));
        assert_eq!(c.clearing_due(t0), Some(ClearingCheck::Look));
        assert_eq!(c.clearing_due(t0), None, "looked at just now");
        assert_eq!(c.next_deadline(), Some(t0 + super::super::clear::POLL));
        // A written clear key is no typed command: nothing settles, no Enter.
        c.on_written(t0);
        assert_eq!(c.poll(t0 + SETTLE, ""), CompactStep::Wait);
        assert_eq!(c.cleared(), b"/compress");
        assert_eq!(c.clearing_due(t0 + CLEARING_LIMIT), None, "typing now");
        c.on_written(t0);
        assert_eq!(c.poll(t0 + SETTLE, ""), CompactStep::Write(b"\r".to_vec()));

        let mut c = ActiveCompact::after_clearing(2, "/compress", watch(), t0);
        let before = t0 + CLEARING_LIMIT - Duration::from_millis(1);
        assert_eq!(c.clearing_due(before), Some(ClearingCheck::Look));
        assert_eq!(
            c.clearing_due(t0 + CLEARING_LIMIT),
            Some(ClearingCheck::GiveUp)
        );
    }

    #[test]
    fn gives_up_at_the_deadline() {
        let t0 = Instant::now();
        let (mut c, _) = ActiveCompact::start(1, "/compact", Box::new(After(u32::MAX, None)));
        c.on_written(t0);
        c.poll(t0 + SETTLE, "");
        match c.poll(t0 + SETTLE + COMPACT_DEADLINE, "") {
            CompactStep::Done(Err(e)) => assert!(e.to_string().contains("290 s"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}

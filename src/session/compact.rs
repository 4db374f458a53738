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
/// How often completion is checked.
pub const COMPACT_POLL: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
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

/// A compaction in progress.
pub struct ActiveCompact {
    /// The router's request id.
    pub id: u64,
    phase: Phase,
    watch: Box<dyn CompactWatch>,
}

impl ActiveCompact {
    /// Start: returns the machine and the command bytes to type now.
    pub fn start(id: u64, command: &str, watch: Box<dyn CompactWatch>) -> (ActiveCompact, Vec<u8>) {
        (
            ActiveCompact {
                id,
                phase: Phase::Typing,
                watch,
            },
            command.as_bytes().to_vec(),
        )
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
            Phase::Typing => CompactStep::Wait,
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

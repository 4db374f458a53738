//! The router's time seam: the run loop reads the clock once per turn (a message, a session
//! event, a timer check) and every decision of that turn uses the same [`Now`]. Tests build
//! a `Now` by hand, so the decisions run on fake time.

use std::time::{Duration, Instant};

/// One reading of both clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    /// Monotonic time: timers, run lengths, request ages.
    pub at: Instant,
    /// Wall-clock time, epoch milliseconds: marker files, death records, idle ages.
    pub ms: u64,
}

impl Now {
    /// Read both clocks (the run loop's only clock read).
    pub fn read() -> Now {
        Now {
            at: Instant::now(),
            ms: crate::clock::now_ms(),
        }
    }

    /// `d` later on both clocks (fake time in tests).
    #[cfg(test)]
    pub fn plus(self, d: Duration) -> Now {
        Now {
            at: self.at + d,
            ms: self.ms + d.as_millis() as u64,
        }
    }

    /// Time since `earlier` (zero if `earlier` is later).
    pub fn since(self, earlier: Instant) -> Duration {
        self.at.saturating_duration_since(earlier)
    }
}

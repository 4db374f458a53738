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

    /// The moment `ms` (epoch ms, an event's own time) on both clocks: as far before this
    /// reading as `ms` is, never later than it nor before `floor` (a send's start: a
    /// record's clock cannot put it earlier). Pure.
    pub fn back_to(self, ms: u64, floor: Instant) -> Now {
        let back = Duration::from_millis(self.ms.saturating_sub(ms))
            .min(self.at.saturating_duration_since(floor));
        Now {
            at: self.at - back,
            ms: self.ms - back.as_millis() as u64,
        }
    }

    /// Time since `earlier` (zero if `earlier` is later).
    pub fn since(self, earlier: Instant) -> Duration {
        self.at.saturating_duration_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's own time on both clocks, never after the reading nor before the floor.
    #[test]
    fn back_to_an_earlier_moment() {
        let start = Instant::now();
        let now = Now {
            at: start + Duration::from_millis(500),
            ms: 10_000,
        };
        let back = now.back_to(9_800, start);
        assert_eq!(
            (back.at, back.ms),
            (start + Duration::from_millis(300), 9_800)
        );
        assert_eq!(
            now.back_to(10_050, start),
            now,
            "a record from the future: now"
        );
        let floor = now.back_to(1_000, start);
        assert_eq!(
            (floor.at, floor.ms),
            (start, 9_500),
            "never before the send started"
        );
    }
}

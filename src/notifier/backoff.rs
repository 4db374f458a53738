//! When a watcher script is started again (spec 09 "Semantics"): any exit, even 0, restarts
//! it after a back-off of 1 s doubling to 60 s; a run that lasted at least 1 s or printed a
//! line resets the back-off and the failure count; 5 failures within 60 s (from the first of
//! them) stop the script for good. Pure: times are milliseconds on any monotonic clock.

use std::time::Duration;

/// The first back-off.
pub const START: Duration = Duration::from_secs(1);
/// The longest back-off.
pub const CAP: Duration = Duration::from_secs(60);
/// A run at least this long is healthy.
pub const HEALTHY_RUN: Duration = Duration::from_secs(1);
/// Failures within [`WINDOW`] that stop the script.
pub const STOP_AFTER: u32 = 5;
/// The window of [`STOP_AFTER`].
pub const WINDOW: Duration = Duration::from_secs(60);

/// What to do after an exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start it again after this long.
    Restart(Duration),
    /// Stop for good (and alert the owner).
    Stop,
}

/// The restart state of one script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backoff {
    failures: u32,
    streak_start_ms: Option<u64>,
}

impl Backoff {
    /// The run that started at `started_ms` ended at `ended_ms`; `printed` = it printed at
    /// least one line.
    pub fn on_exit(&mut self, started_ms: u64, ended_ms: u64, printed: bool) -> Decision {
        let ran = Duration::from_millis(ended_ms.saturating_sub(started_ms));
        if printed || ran >= HEALTHY_RUN {
            *self = Backoff::default();
            return Decision::Restart(START);
        }
        match self.streak_start_ms {
            Some(s) if Duration::from_millis(ended_ms.saturating_sub(s)) <= WINDOW => {}
            _ => {
                self.streak_start_ms = Some(ended_ms);
                self.failures = 0;
            }
        }
        self.failures += 1;
        if self.failures >= STOP_AFTER {
            return Decision::Stop;
        }
        let delay = START.saturating_mul(1 << (self.failures - 1).min(16));
        Decision::Restart(delay.min(CAP))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Decision {
        Decision::Restart(Duration::from_secs(s))
    }

    #[test]
    fn quick_failures_double_then_stop_at_the_fifth_within_a_minute() {
        let mut b = Backoff::default();
        let mut t = 0;
        let mut out = Vec::new();
        for _ in 0..5 {
            out.push(b.on_exit(t, t + 100, false));
            t += 5_000;
        }
        assert_eq!(out, [secs(1), secs(2), secs(4), secs(8), Decision::Stop]);
    }

    #[test]
    fn a_long_run_or_a_line_resets() {
        let mut b = Backoff::default();
        assert_eq!(b.on_exit(0, 10, false), secs(1));
        assert_eq!(b.on_exit(1_000, 1_010, false), secs(2));
        assert_eq!(b.on_exit(3_000, 4_000, false), secs(1), "ran 1 s");
        assert_eq!(b.on_exit(5_000, 5_010, false), secs(1), "count restarted");
        assert_eq!(b.on_exit(6_000, 6_010, false), secs(2));
        assert_eq!(b.on_exit(8_000, 8_010, true), secs(1), "printed a line");
    }

    #[test]
    fn failures_spread_over_more_than_a_minute_never_stop_and_the_delay_caps() {
        let mut b = Backoff::default();
        let mut t = 0;
        for i in 0..20 {
            let d = b.on_exit(t, t + 10, false);
            assert_ne!(d, Decision::Stop, "failure {i}");
            t += 61_000;
        }
        // Within one window the delay would cap at 60 s before stopping if the limit allowed.
        let mut c = Backoff {
            failures: 10,
            streak_start_ms: Some(0),
        };
        c.failures = 0;
        assert_eq!(c.on_exit(0, 1, false), secs(1));
        assert_eq!(START.saturating_mul(1 << 10).min(CAP), CAP);
    }
}

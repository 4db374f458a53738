//! Clearing iapeer's own text from an agent's composer with the runtime's own keys (issue 26
//! items 8 and 5 (c)), as a state machine fed with the time and the screen. Pure.
//!
//! The keys are the runtime's ([`ClearKeys`], recorded):
//! - Claude Code 2.1.332: Esc shows `esc again to clear` under the composer, a second Esc
//!   within 800 ms (its double-press window) clears it
//!   (`tests/fixtures/claude-2.1.332/clear-esc-hint.raw`, `clear-esc-cleared.raw`). Esc on
//!   an empty composer twice opens its rewind menu instead, so the second Esc goes only once
//!   the hint shows.
//! - Codex 0.171.0: Ctrl-C clears a composer that holds text
//!   (`tests/fixtures/codex-0.171.0/clear-ctrl-c-cleared.raw`); on an empty composer Ctrl-C
//!   arms its quit, and a second one within 1 s quits, so tries are [`RETRY_GAP`] apart.
//!
//! - Gemini CLI 0.61.0: Ctrl-C clears a composer that holds text and can arm its exit
//!   (`Press Ctrl+C again to exit.`, `late-1200ms-ctrl-c-cleared`; a second Ctrl-C while it
//!   shows quits): a key with an exit warning ([`ClearKeys::exit_warning`]) is pressed as the
//!   boot presses it on text nobody typed — [`ClearPresses`], never two within
//!   [`super::boot::CLEAR_GAP`] — and never while the warning shows.
//!
//! These runtimes take these keys as "interrupt the turn" while one runs: no key is written
//! while the screen shows a turn in progress.

use std::time::{Duration, Instant};

use super::boot::{ClearPresses, Press};
use crate::adapter::ClearKeys;

/// How often the screen is looked at while clearing (and while a delivery waits for it).
pub const POLL: Duration = Duration::from_millis(50);
/// How often a clearing waiting for a turn to end looks again (a turn may run for minutes).
pub const BUSY_POLL: Duration = Duration::from_millis(250);
/// How long the runtime has to show its "again" hint after the first key (Claude Code's
/// double-press window is 800 ms; the second key must land inside it).
pub const HINT_WAIT: Duration = Duration::from_millis(500);
/// How long the composer has to show empty after the last key.
pub const CHECK_WAIT: Duration = Duration::from_millis(1500);
/// The pause before a new try: past Claude's double-press window and Codex's quit window.
pub const RETRY_GAP: Duration = Duration::from_millis(1500);
/// Tries before giving up.
pub const TRIES: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// The first key goes at (or after) this time, once no turn runs.
    Ready(Instant),
    /// The first key went; the hint is awaited until then.
    Hint(Instant),
    /// The keys went; the composer is awaited empty until then.
    Check(Instant),
}

/// What to do now.
#[derive(Debug, PartialEq, Eq)]
pub enum ClearStep {
    /// Nothing now.
    Wait,
    /// Write these keys.
    Write(Vec<u8>),
    /// The composer is empty.
    Cleared,
    /// It did not clear after [`TRIES`] tries.
    GaveUp,
}

/// One clearing of the composer.
#[derive(Debug)]
pub struct Clearing {
    keys: ClearKeys,
    phase: Phase,
    tries: u32,
    /// The first presses of a key that can arm the runtime's exit
    /// ([`ClearKeys::exit_warning`]), paced as the boot paces its clear key.
    paced: Option<ClearPresses>,
}

impl Clearing {
    /// Start clearing with `keys`; the first key may go at once.
    pub fn new(keys: ClearKeys, now: Instant) -> Clearing {
        Clearing {
            paced: keys.exit_warning.map(|_| ClearPresses::default()),
            keys,
            phase: Phase::Ready(now),
            tries: 0,
        }
    }

    /// When to look again.
    pub fn next_deadline(&self) -> Instant {
        match self.phase {
            Phase::Ready(at) => at,
            // The hint and the cleared composer come as output, which wakes the session.
            Phase::Hint(until) | Phase::Check(until) => until,
        }
    }

    /// The step at `now`: `empty` the composer holds nothing, `busy` a turn runs, `screen`
    /// the screen's text (for the hint, and the exit warning: no key while it shows).
    pub fn poll(&mut self, now: Instant, empty: bool, busy: bool, screen: &str) -> ClearStep {
        if empty {
            return ClearStep::Cleared;
        }
        match self.phase {
            Phase::Ready(at) if now < at => ClearStep::Wait,
            Phase::Ready(_) if busy => {
                self.phase = Phase::Ready(now + BUSY_POLL);
                ClearStep::Wait
            }
            Phase::Ready(_) if self.keys.exit_armed(screen) => {
                self.phase = Phase::Ready(now + POLL);
                ClearStep::Wait
            }
            Phase::Ready(_) if self.tries >= TRIES => ClearStep::GaveUp,
            Phase::Ready(_) => {
                if let Some(p) = self.paced.as_mut() {
                    match p.press(now) {
                        Press::Now => {}
                        Press::NotYet => {
                            self.phase = Phase::Ready(p.next_at().unwrap_or(now + POLL));
                            return ClearStep::Wait;
                        }
                        Press::Exhausted => return ClearStep::GaveUp,
                    }
                }
                self.tries += 1;
                self.phase = match self.keys.again {
                    Some(_) => Phase::Hint(now + HINT_WAIT),
                    None => Phase::Check(now + CHECK_WAIT),
                };
                ClearStep::Write(self.keys.first.clone())
            }
            Phase::Hint(until) => match &self.keys.again {
                Some((hint, key)) if screen.contains(hint) => {
                    self.phase = Phase::Check(now + CHECK_WAIT);
                    ClearStep::Write(key.clone())
                }
                _ if now >= until => {
                    self.phase = Phase::Ready(now + RETRY_GAP);
                    ClearStep::Wait
                }
                _ => ClearStep::Wait,
            },
            Phase::Check(until) if now >= until => {
                self.phase = Phase::Ready(now + RETRY_GAP);
                ClearStep::Wait
            }
            Phase::Check(_) => ClearStep::Wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc_esc() -> ClearKeys {
        ClearKeys {
            first: vec![0x1b],
            again: Some(("esc again to clear", vec![0x1b])),
            exit_warning: None,
        }
    }

    /// An Esc-Esc clearing started now whose first poll wrote the first Esc (asserted).
    fn after_first_esc() -> (Instant, Clearing) {
        let t0 = Instant::now();
        let mut c = Clearing::new(esc_esc(), t0);
        assert_eq!(c.poll(t0, false, false, ""), ClearStep::Write(vec![0x1b]));
        (t0, c)
    }

    #[test]
    fn esc_then_esc_once_the_hint_shows() {
        let (t0, mut c) = after_first_esc();
        assert_eq!(c.poll(t0 + POLL, false, false, "…"), ClearStep::Wait);
        assert_eq!(
            c.poll(t0 + POLL * 2, false, false, "  esc again to clear"),
            ClearStep::Write(vec![0x1b])
        );
        assert_eq!(c.poll(t0 + POLL * 3, false, false, ""), ClearStep::Wait);
        assert_eq!(c.poll(t0 + POLL * 4, true, false, ""), ClearStep::Cleared);
    }

    #[test]
    fn no_key_while_a_turn_runs() {
        let t0 = Instant::now();
        let mut c = Clearing::new(esc_esc(), t0);
        assert_eq!(c.poll(t0, false, true, ""), ClearStep::Wait);
        assert_eq!(c.next_deadline(), t0 + BUSY_POLL);
        assert_eq!(c.poll(t0 + BUSY_POLL, false, true, ""), ClearStep::Wait);
        assert_eq!(
            c.poll(t0 + BUSY_POLL * 2 - POLL, false, false, ""),
            ClearStep::Wait
        );
        assert_eq!(
            c.poll(t0 + BUSY_POLL * 2, false, false, ""),
            ClearStep::Write(vec![0x1b])
        );
    }

    #[test]
    fn tries_again_apart_then_gives_up() {
        let t0 = Instant::now();
        let ctrl_c = ClearKeys {
            first: vec![0x03],
            again: None,
            exit_warning: None,
        };
        let mut c = Clearing::new(ctrl_c, t0);
        let mut t = t0;
        for _ in 0..TRIES {
            assert_eq!(c.poll(t, false, false, ""), ClearStep::Write(vec![0x03]));
            assert_eq!(
                c.poll(t + CHECK_WAIT - POLL, false, false, ""),
                ClearStep::Wait
            );
            assert_eq!(c.poll(t + CHECK_WAIT, false, false, ""), ClearStep::Wait);
            assert_eq!(
                c.poll(t + CHECK_WAIT + RETRY_GAP - POLL, false, false, ""),
                ClearStep::Wait,
                "no second Ctrl-C inside Codex's quit window"
            );
            t += CHECK_WAIT + RETRY_GAP;
        }
        assert_eq!(c.poll(t, false, false, ""), ClearStep::GaveUp);
    }

    #[test]
    fn a_hint_that_never_shows_means_a_new_first_press_later() {
        let (t0, mut c) = after_first_esc();
        assert_eq!(c.poll(t0 + HINT_WAIT, false, false, ""), ClearStep::Wait);
        assert_eq!(
            c.poll(
                t0 + HINT_WAIT + RETRY_GAP - POLL,
                false,
                false,
                "esc again to clear"
            ),
            ClearStep::Wait,
            "past the double-press window: the next Esc is a first press again"
        );
        assert_eq!(
            c.poll(t0 + HINT_WAIT + RETRY_GAP, false, false, ""),
            ClearStep::Write(vec![0x1b])
        );
    }

    /// Gemini CLI 0.61.0's Ctrl-C can arm its exit (`Press Ctrl+C again to exit.`, shown for
    /// 3 s): iapeer's own tries are paced as the boot's presses on text nobody typed —
    /// [`CLEAR_GAP`](super::super::boot::CLEAR_GAP) apart, not the 3 s of Codex's pacing —
    /// and none goes while the warning shows, however late.
    #[test]
    fn a_key_that_can_arm_the_exit_never_goes_while_its_warning_shows() {
        use crate::session::boot::CLEAR_GAP;
        let keys = crate::runtime::gemini::clear_keys();
        let warning = format!("  {}\n", crate::runtime::gemini::EXIT_ARMED);
        let t0 = Instant::now();
        let mut c = Clearing::new(keys.clone(), t0);
        assert_eq!(c.poll(t0, false, false, ""), ClearStep::Write(vec![0x03]));
        // The composer still holds the text after the check: no second Ctrl-C within the gap
        // (Codex's pacing would press again here, inside Gemini CLI's 3 s window).
        let retry = t0 + CHECK_WAIT + RETRY_GAP;
        assert_eq!(c.poll(t0 + CHECK_WAIT, false, false, ""), ClearStep::Wait);
        assert_eq!(c.poll(retry, false, false, ""), ClearStep::Wait);
        assert_eq!(c.next_deadline(), t0 + CLEAR_GAP);
        // Past the gap, the warning still drawn (a loaded machine): no key.
        assert_eq!(
            c.poll(t0 + CLEAR_GAP, false, false, &warning),
            ClearStep::Wait
        );
        assert_eq!(c.next_deadline(), t0 + CLEAR_GAP + POLL);
        // Gone: the second try.
        assert_eq!(
            c.poll(t0 + CLEAR_GAP + POLL, false, false, ""),
            ClearStep::Write(vec![0x03])
        );
        // Keys that cannot arm an exit ignore the text.
        let mut codex = Clearing::new(
            ClearKeys {
                exit_warning: None,
                ..keys
            },
            t0,
        );
        assert_eq!(
            codex.poll(t0, false, false, &warning),
            ClearStep::Write(vec![0x03])
        );
    }
}

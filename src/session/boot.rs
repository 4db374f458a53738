//! The boot of an agent session (spec 04 §2, spec 05 §2 step 8): answer dialogs one key per
//! screen update, wait for the ready screen, give up at the boot deadline. Pure: the session
//! thread feeds it the adapter's reading of the screen and the time.

use std::time::{Duration, Instant};

use crate::adapter::BootStep;
use crate::session::handle::Cause;

/// If a key changed nothing on screen for this long, the same dialog may get another key
/// (a key can be lost while the TUI is still wiring up its input).
pub const KEY_RETRY: Duration = Duration::from_secs(2);

/// How long a menu the adapter has no answer for must stay on screen, unchanged, before a
/// human is asked to answer it (spec 10 §4: an unknown blocking dialog goes to a human
/// instead of waiting out the boot deadline).
pub const UNANSWERED_MENU_AFTER: Duration = Duration::from_secs(3);

/// Most presses of a [`BootStep::Clear`] key in one boot; the boot fails if the composer
/// still holds the text after the last one.
pub const MAX_CLEARS: u32 = 3;

/// Least time between two presses of a [`BootStep::Clear`] key. Gemini CLI 0.61.0's clear
/// key is Ctrl-C, and one Ctrl-C on a composer holding text can also arm its exit (recorded:
/// `late-1200ms-ctrl-c`, `Press Ctrl+C again to exit.`): a second Ctrl-C within its warning
/// window (3 s in its source, `WARNING_PROMPT_DURATION_MS`) would quit it. Pressed no sooner
/// than this after the last, a key cannot be that second one.
pub const CLEAR_GAP: Duration = Duration::from_secs(5);

/// The presses of a [`BootStep::Clear`] key on text nobody typed (pure), by the boot or
/// before a delivery (`session::hold::leftovers_step`): at most [`MAX_CLEARS`] while the text
/// stays, never two within [`CLEAR_GAP`].
#[derive(Debug, Default, Clone)]
pub struct ClearPresses {
    count: u32,
    last: Option<Instant>,
}

/// Whether the clear key may be pressed ([`ClearPresses::press`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Press {
    /// Press it now (counted).
    Now,
    /// Not within [`CLEAR_GAP`] of the last press.
    NotYet,
    /// Pressed [`MAX_CLEARS`] times already and the text is still there.
    Exhausted,
}

impl ClearPresses {
    /// Whether the key may be pressed at `now`; [`Press::Now`] counts the press.
    pub fn press(&mut self, now: Instant) -> Press {
        if self.last.is_some_and(|at| now < at + CLEAR_GAP) {
            return Press::NotYet;
        }
        if self.count >= MAX_CLEARS {
            return Press::Exhausted;
        }
        self.count += 1;
        self.last = Some(now);
        Press::Now
    }

    /// The text is gone: text that comes later gets [`MAX_CLEARS`] presses again (still
    /// [`CLEAR_GAP`] after the last one).
    pub fn gone(&mut self) {
        self.count = 0;
    }

    /// When the next press may go, if one went.
    pub fn next_at(&self) -> Option<Instant> {
        self.last.map(|at| at + CLEAR_GAP)
    }
}

/// The reason given when the text `label` describes is still there after [`MAX_CLEARS`]
/// presses: `<label>, still there after 3 presses of its clear key`.
pub fn still_there(label: &str) -> String {
    format!("{label}, still there after {MAX_CLEARS} presses of its clear key")
}

/// What the session must do now.
#[derive(Debug, PartialEq)]
pub enum BootAction {
    /// Keep waiting.
    Wait,
    /// Write this key; `label` describes the dialog for progress lines.
    Key {
        /// Key bytes.
        bytes: Vec<u8>,
        /// What is being answered.
        label: String,
    },
    /// The runtime is ready.
    Ready,
    /// The boot failed.
    Failed(BootFailure),
}

/// Why a boot failed: a timeout and a failure end the session with different causes
/// (`boot-timeout` vs `killed-by-daemon` in `exits.log`, spec 04 §1 "Death"). The text a
/// waiting sender sees is the [`std::fmt::Display`] form, the same for both kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootFailure {
    /// Not ready within `limit` (the boot deadline): "never became ready within N s".
    TimedOut {
        /// The boot deadline it missed.
        limit: Duration,
    },
    /// The runtime showed a failure (e.g. "not logged in"), or the session could not be set
    /// up; the text says which.
    Failed(String),
    /// A human refused the boot's unknown dialog (or nobody answered in time); the text says
    /// why. Ends the session with [`Cause::DialogRefused`], which is no crash.
    Refused(String),
}

impl BootFailure {
    /// The cause the session ends with.
    pub fn cause(&self) -> Cause {
        match self {
            BootFailure::TimedOut { .. } => Cause::BootTimeout,
            BootFailure::Failed(_) => Cause::KilledByDaemon,
            BootFailure::Refused(_) => Cause::DialogRefused,
        }
    }
}

impl std::fmt::Display for BootFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootFailure::TimedOut { limit } => {
                write!(f, "never became ready within {} s", limit.as_secs())
            }
            BootFailure::Failed(reason) | BootFailure::Refused(reason) => f.write_str(reason),
        }
    }
}

/// Boot progress of one session.
pub struct Boot {
    started: Instant,
    deadline: Instant,
    settle: Duration,
    key_gap: Duration,
    last_key: Option<(Instant, u64)>,
    /// A key is due once the gap after the last one is over.
    key_held: bool,
    ready_since: Option<Instant>,
    /// An unanswered menu on screen: since when, the screen's hash, and whether a human was
    /// already asked about this screen.
    menu: Option<(Instant, u64, bool)>,
    /// When [`Boot::evaluate`] last ran: a moment it already looked at needs no wake-up.
    last_eval: Option<Instant>,
    /// Presses of a [`BootStep::Clear`] key so far.
    clears: ClearPresses,
}

impl Boot {
    /// Start booting at `now` with the boot deadline `limit`, the adapter's ready settle and
    /// its least time between two keys (`key_gap`, zero = none).
    pub fn new(now: Instant, limit: Duration, settle: Duration, key_gap: Duration) -> Boot {
        Boot {
            started: now,
            deadline: now + limit,
            settle,
            key_gap,
            last_key: None,
            key_held: false,
            ready_since: None,
            menu: None,
            last_eval: None,
            clears: ClearPresses::default(),
        }
    }

    /// A human is asked to answer a menu: the deadline moves to at least `now + wait`, so
    /// their answer (or their request's own timeout) decides, not the boot deadline.
    pub fn wait_for_human(&mut self, now: Instant, wait: Duration) {
        self.deadline = self.deadline.max(now + wait);
    }

    /// Track a menu the adapter did not answer (`shows_menu` for the screen `screen_hash`,
    /// read while [`Boot::evaluate`] says [`BootAction::Wait`]). True exactly once per
    /// screen: when the same menu screen has stayed unchanged for [`UNANSWERED_MENU_AFTER`].
    /// Any other screen starts the count again.
    pub fn unanswered_menu(&mut self, now: Instant, shows_menu: bool, screen_hash: u64) -> bool {
        if !shows_menu {
            self.menu = None;
            return false;
        }
        let (since, _, asked) = match self.menu {
            Some((since, hash, asked)) if hash == screen_hash => (since, hash, asked),
            _ => (now, screen_hash, false),
        };
        let due = !asked && now >= since + UNANSWERED_MENU_AFTER;
        self.menu = Some((since, screen_hash, asked || due));
        due
    }

    /// Since when the ready screen has been shown without a break, if it is.
    pub fn ready_since(&self) -> Option<Instant> {
        self.ready_since
    }

    /// Decide from the adapter's `step` for the current screen (identified by `screen_hash`).
    pub fn evaluate(&mut self, now: Instant, step: BootStep, screen_hash: u64) -> BootAction {
        self.last_eval = Some(now);
        if now >= self.deadline {
            return BootAction::Failed(BootFailure::TimedOut {
                limit: self.deadline - self.started,
            });
        }
        self.key_held = false;
        match step {
            BootStep::Wait => {
                self.ready_since = None;
                BootAction::Wait
            }
            BootStep::Fail(reason) => BootAction::Failed(BootFailure::Failed(reason)),
            BootStep::Key { bytes, label } => {
                self.ready_since = None;
                let allowed = match self.last_key {
                    None => true,
                    Some((at, hash)) => hash != screen_hash || now >= at + KEY_RETRY,
                };
                let gap_over = self.last_key.is_none_or(|(at, _)| now >= at + self.key_gap);
                self.key_held = allowed && !gap_over;
                if allowed && gap_over {
                    self.last_key = Some((now, screen_hash));
                    BootAction::Key { bytes, label }
                } else {
                    BootAction::Wait
                }
            }
            BootStep::Clear { bytes, label } => {
                self.ready_since = None;
                match self.clears.press(now) {
                    Press::NotYet => BootAction::Wait,
                    Press::Exhausted => {
                        BootAction::Failed(BootFailure::Failed(still_there(&label)))
                    }
                    Press::Now => BootAction::Key { bytes, label },
                }
            }
            BootStep::Ready => {
                let since = *self.ready_since.get_or_insert(now);
                if now >= since + self.settle {
                    BootAction::Ready
                } else {
                    BootAction::Wait
                }
            }
        }
    }

    /// The next instant at which [`Boot::evaluate`] should run even without new output.
    /// Moments an evaluation already reached are left out: a ready screen that waits for the
    /// agent's MCP client, or a key sent long ago, would otherwise give a past instant and
    /// spin the session's loop until something changed (the screen, the MCP listing and
    /// commands wake the loop themselves). The boot deadline always counts.
    pub fn next_deadline(&self) -> Instant {
        let mut next = self.deadline;
        let mut consider = |t: Instant| {
            if self.last_eval.is_none_or(|e| t > e) {
                next = next.min(t);
            }
        };
        if let Some(since) = self.ready_since {
            consider(since + self.settle);
        }
        if let Some((since, _, false)) = self.menu {
            consider(since + UNANSWERED_MENU_AFTER);
        }
        if let Some(at) = self.clears.next_at() {
            consider(at);
        }
        if let Some((at, _)) = self.last_key {
            consider(at + KEY_RETRY);
            if self.key_held {
                // A screen that changed during the key gap gets its key when the gap ends.
                consider(at + self.key_gap);
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> BootStep {
        BootStep::Key {
            bytes: b"\r".to_vec(),
            label: "trust".into(),
        }
    }

    /// A boot begun at `t0` with the 240 s deadline.
    fn boot(t0: Instant, settle: Duration, gap: Duration) -> Boot {
        Boot::new(t0, Duration::from_secs(240), settle, gap)
    }

    #[test]
    fn an_unanswered_menu_is_reported_once_after_it_stayed_unchanged() {
        let t0 = Instant::now();
        let mut b = boot(t0, Duration::ZERO, Duration::ZERO);
        let after = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(!b.unanswered_menu(t0, true, 7));
        assert_eq!(b.next_deadline(), t0 + UNANSWERED_MENU_AFTER);
        assert!(!b.unanswered_menu(after(2_000), true, 7), "not yet");
        // The screen changed: the count starts again.
        assert!(!b.unanswered_menu(after(2_500), true, 8));
        assert!(
            !b.unanswered_menu(after(5_000), true, 8),
            "2.5 s of the new screen"
        );
        assert!(b.unanswered_menu(after(5_500), true, 8), "3 s unchanged");
        assert!(
            !b.unanswered_menu(after(9_000), true, 8),
            "asked once per screen"
        );
        assert_eq!(b.next_deadline(), t0 + Duration::from_secs(240));
        // No menu, then the same menu again: a new count, and a new question.
        assert!(!b.unanswered_menu(after(9_500), false, 9));
        assert!(!b.unanswered_menu(after(10_000), true, 8));
        assert!(b.unanswered_menu(after(13_000), true, 8));
        // Asked, the boot waits for the human past its own deadline.
        b.wait_for_human(after(13_000), Duration::from_secs(300));
        assert_eq!(
            b.evaluate(t0 + Duration::from_secs(250), BootStep::Wait, 8),
            BootAction::Wait
        );
        assert!(matches!(
            b.evaluate(after(313_000), BootStep::Wait, 8),
            BootAction::Failed(BootFailure::TimedOut { .. })
        ));
    }

    fn clear() -> BootStep {
        BootStep::Clear {
            bytes: vec![0x03],
            label: "stray text".into(),
        }
    }

    #[test]
    fn a_clear_key_is_pressed_at_most_max_clears_times_clear_gap_apart_then_the_boot_fails() {
        let t0 = Instant::now();
        let mut b = Boot::new(t0, Duration::from_secs(240), Duration::ZERO, Duration::ZERO);
        let mut at = t0;
        for n in 1..=MAX_CLEARS {
            assert!(
                matches!(b.evaluate(at, clear(), n as u64), BootAction::Key { .. }),
                "press {n}"
            );
            // Another screen within the gap (Gemini CLI's exit warning window): no key.
            let soon = at + CLEAR_GAP - Duration::from_millis(1);
            assert_eq!(b.evaluate(soon, clear(), 100 + n as u64), BootAction::Wait);
            assert_eq!(b.next_deadline(), at + CLEAR_GAP);
            at += CLEAR_GAP;
        }
        match b.evaluate(at, clear(), 9) {
            BootAction::Failed(f @ BootFailure::Failed(_)) => {
                assert_eq!(f.cause(), Cause::KilledByDaemon);
                assert!(
                    f.to_string().starts_with("stray text, still there after 3"),
                    "{f}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Cleared in time, the boot goes on to ready.
        let mut b = Boot::new(t0, Duration::from_secs(240), Duration::ZERO, Duration::ZERO);
        assert!(matches!(b.evaluate(t0, clear(), 1), BootAction::Key { .. }));
        assert_eq!(b.evaluate(t0, BootStep::Ready, 2), BootAction::Ready);
    }

    #[test]
    fn one_key_per_screen_update() {
        let t0 = Instant::now();
        let mut b = boot(t0, Duration::ZERO, Duration::ZERO);
        assert!(matches!(b.evaluate(t0, key(), 1), BootAction::Key { .. }));
        assert_eq!(
            b.evaluate(t0, key(), 1),
            BootAction::Wait,
            "same screen: no second key"
        );
        assert!(
            matches!(b.evaluate(t0, key(), 2), BootAction::Key { .. }),
            "screen changed"
        );
        assert!(
            matches!(b.evaluate(t0 + KEY_RETRY, key(), 2), BootAction::Key { .. }),
            "unchanged for KEY_RETRY: retry"
        );
    }

    #[test]
    fn keys_keep_the_adapters_gap_even_when_the_screen_changes() {
        // Claude Code 2.1.332 takes a key within 700 ms of typing for more typing
        // (tests/fixtures/claude-2.1.332/add-dir-held-loop.txt): the next key waits.
        let t0 = Instant::now();
        let gap = Duration::from_millis(800);
        let mut b = boot(t0, Duration::ZERO, gap);
        assert!(matches!(b.evaluate(t0, key(), 1), BootAction::Key { .. }));
        let early = t0 + Duration::from_millis(100);
        assert_eq!(
            b.evaluate(early, key(), 2),
            BootAction::Wait,
            "inside the gap"
        );
        assert_eq!(b.next_deadline(), t0 + gap);
        assert!(
            matches!(b.evaluate(t0 + gap, key(), 2), BootAction::Key { .. }),
            "the changed screen gets its key once the gap is over"
        );
    }

    #[test]
    fn ready_must_hold_for_the_settle() {
        let t0 = Instant::now();
        let settle = Duration::from_millis(500);
        let mut b = boot(t0, settle, Duration::ZERO);
        assert_eq!(b.evaluate(t0, BootStep::Ready, 1), BootAction::Wait);
        assert_eq!(b.next_deadline(), t0 + settle);
        assert_eq!(
            b.evaluate(t0 + settle, BootStep::Ready, 1),
            BootAction::Ready
        );
        let mut b = boot(t0, settle, Duration::ZERO);
        b.evaluate(t0, BootStep::Ready, 1);
        b.evaluate(t0 + Duration::from_millis(100), BootStep::Wait, 2);
        assert_eq!(
            b.evaluate(t0 + settle, BootStep::Ready, 3),
            BootAction::Wait,
            "restarted"
        );
    }

    #[test]
    fn moments_already_evaluated_give_no_past_deadline() {
        let t0 = Instant::now();
        let limit = Duration::from_secs(240);
        let settle = Duration::from_millis(500);
        let mut b = Boot::new(t0, limit, settle, Duration::ZERO);
        // Ready held past its settle while the session waits for the agent's MCP client:
        // the next wake-up is the boot deadline, not the settle's end (which would spin).
        b.evaluate(t0, BootStep::Ready, 1);
        assert_eq!(
            b.evaluate(t0 + settle, BootStep::Ready, 1),
            BootAction::Ready
        );
        assert_eq!(b.next_deadline(), t0 + limit);
        // A key long ago: its retry time, once evaluated, is no deadline either.
        let key = || BootStep::Key {
            bytes: b"\r".to_vec(),
            label: "enter".into(),
        };
        let mut b = Boot::new(t0, limit, settle, Duration::ZERO);
        assert!(matches!(b.evaluate(t0, key(), 1), BootAction::Key { .. }));
        assert_eq!(b.next_deadline(), t0 + KEY_RETRY);
        b.evaluate(t0 + KEY_RETRY, BootStep::Wait, 2);
        assert_eq!(b.next_deadline(), t0 + limit);
    }

    #[test]
    fn deadline_and_failures() {
        let t0 = Instant::now();
        let mut b = Boot::new(t0, Duration::from_secs(3), Duration::ZERO, Duration::ZERO);
        let timed_out = BootFailure::TimedOut {
            limit: Duration::from_secs(3),
        };
        assert_eq!(
            b.evaluate(t0 + Duration::from_secs(3), BootStep::Wait, 1),
            BootAction::Failed(timed_out.clone())
        );
        assert_eq!(timed_out.to_string(), "never became ready within 3 s");
        assert_eq!(timed_out.cause(), Cause::BootTimeout);
        let mut b = Boot::new(t0, Duration::from_secs(3), Duration::ZERO, Duration::ZERO);
        let failed = BootFailure::Failed("not logged in".into());
        assert_eq!(
            b.evaluate(t0, BootStep::Fail("not logged in".into()), 1),
            BootAction::Failed(failed.clone())
        );
        assert_eq!(failed.to_string(), "not logged in");
        assert_eq!(failed.cause(), Cause::KilledByDaemon);
    }
}

//! The composer hold (spec 05 §7, issue 7 item 2): a delivery that finds text in the agent's
//! composer — typed by an attached human, or left there any other way — is never pasted
//! after it (the runtime would submit both as one turn). It waits in the session, the sender
//! answered `queued` (`queuedBy: "composer"`), re-checked every [`RECHECK`], and goes in once
//! the composer is free. Whether anyone is attached makes no difference: iapeer never types
//! over, cuts or submits text it did not put there. Past its limit
//! (`IAPEER_COMPOSER_QUEUE_TIMEOUT_MS`, 120 s) the message fails and its
//! sender is told (spec 05 §7 says "force-delivered after 120 s"; that would submit the draft
//! with it, which this item forbids, so it fails instead).
//!
//! Text nobody typed is no draft: a composer holding only what the adapter calls leftovers
//! (`Adapter::composer_leftovers`: Gemini CLI 0.61.0's late answers to its terminal queries,
//! which can come after its ready screen, `late-30000ms-after-ready-*`) is cleared with the
//! runtime's key first, paced as the boot paces it ([`leftovers_step`]), and the message goes.

use std::time::{Duration, Instant};

use super::boot::{still_there, ClearPresses, Press};
use super::outcome::DeliveryFailure;
use crate::adapter::BootStep;
use crate::term::paste_view::PasteView;

/// How often a held delivery re-checks the composer.
pub const RECHECK: Duration = Duration::from_millis(500);

/// How long after iapeer's own previous paste the composer may still show it. A runtime that
/// queues a message mid-turn (Claude Code 2.1.332 writes its `queue-operation` record first)
/// redraws its composer only a moment later — on a loaded machine more than 1.5 s later (seen
/// in CI). Within this window a composer showing that paste ([`is_residue`]) is waited out
/// silently, re-checked every [`RESIDUE_RECHECK`]; anything else in it is a draft at once.
pub const RESIDUE: Duration = Duration::from_secs(10);

/// How often a delivery waiting out a residue re-checks the composer.
pub const RESIDUE_RECHECK: Duration = Duration::from_millis(50);

/// iapeer's previous paste into a session.
#[derive(Debug, Clone)]
pub struct LastPaste {
    /// When its delivery ended (confirmed, queued by the runtime, or failed).
    pub ended: Instant,
    /// How to recognise it in the composer.
    pub view: PasteView,
}

/// Whether the composer's `draft` at `now` is still iapeer's own previous paste (pure):
/// within [`RESIDUE`] of its end and showing that paste ([`PasteView::shown_in`]).
pub fn is_residue(last: Option<&LastPaste>, draft: &str, now: Instant) -> bool {
    last.is_some_and(|p| now.saturating_duration_since(p.ended) < RESIDUE && p.view.shown_in(draft))
}

/// What to do with a held delivery now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldStep {
    /// The composer is free: deliver.
    Deliver,
    /// Still a draft: check again at [`RECHECK`].
    Wait,
    /// Held past the limit: fail with this reason.
    GiveUp(DeliveryFailure),
}

/// The decision for a delivery held since `since` (pure): `draft` is the composer's draft now.
pub fn hold_step(draft: Option<&str>, since: Instant, now: Instant, limit: Duration) -> HoldStep {
    match draft {
        None => HoldStep::Deliver,
        Some(_) if now.saturating_duration_since(since) >= limit => {
            HoldStep::GiveUp(DeliveryFailure::HeldDraft { limit })
        }
        Some(_) => HoldStep::Wait,
    }
}

/// What a delivery does about text nobody typed in the composer
/// ([`crate::adapter::Adapter::composer_leftovers`]: Gemini CLI's late answers to its
/// terminal queries, which can come after its ready screen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftoversStep {
    /// Write the runtime's clear key, then look again.
    Press {
        /// The key's bytes.
        bytes: Vec<u8>,
        /// What it clears (the adapter's words).
        label: String,
    },
    /// Look again soon: the last press is within [`super::boot::CLEAR_GAP`], or the runtime's
    /// exit warning shows.
    Wait,
    /// Still there after [`super::boot::MAX_CLEARS`] presses: fail the delivery (or the
    /// compaction) with this text ([`still_there`]).
    GiveUp(String),
}

/// The decision about the composer's leftovers before a delivery or a compaction (pure), the
/// boot's own
/// ([`super::boot::Boot`]): `found` is what the adapter reads on the screen now
/// ([`BootStep::Clear`], [`BootStep::Wait`] or `None`), `busy` whether a turn runs, `presses`
/// this session's presses so far. `None`: nothing to clear now, the composer hold decides —
/// no leftovers (the count starts again), or a turn runs (the runtime's clear key would
/// interrupt it: Gemini CLI's Ctrl-C cancels the turn, so the leftovers hold the message as a
/// draft would until the turn ends). Else the key goes at most
/// [`super::boot::MAX_CLEARS`] times, [`super::boot::CLEAR_GAP`] apart and never while the
/// exit warning shows, then the delivery fails with the reason instead of waiting.
pub fn leftovers_step(
    found: Option<BootStep>,
    busy: bool,
    presses: &mut ClearPresses,
    now: Instant,
) -> Option<LeftoversStep> {
    let Some(found) = found else {
        presses.gone();
        return None;
    };
    if busy {
        return None;
    }
    Some(match found {
        BootStep::Clear { bytes, label } => match presses.press(now) {
            Press::Now => LeftoversStep::Press { bytes, label },
            Press::NotYet => LeftoversStep::Wait,
            Press::Exhausted => LeftoversStep::GiveUp(still_there(&label)),
        },
        _ => LeftoversStep::Wait,
    })
}

/// What a delivery held behind a tool's permission prompt waits for (pure; issue 32 item
/// 4): `an approval: <tool>: <request>`. The prompt takes the keys — a paste's Enter would
/// answer it `Yes` — so the message waits until a human (or the approval's timeout) answers.
pub fn awaited_approval(tool: &str, summary: &str) -> String {
    format!("an approval: {tool}: {summary}")
}

/// The decision for a delivery held since `since` behind the permission prompt that asks
/// `awaited` ([`awaited_approval`]) (pure): wait, or past `limit` fail with a reason that
/// says what it waited for. The approval itself is denied when its own timeout passes, which
/// closes the prompt well before `limit` (the composer hold's limit plus that timeout).
pub fn approval_step(awaited: &str, since: Instant, now: Instant, limit: Duration) -> HoldStep {
    if now.saturating_duration_since(since) < limit {
        return HoldStep::Wait;
    }
    HoldStep::GiveUp(DeliveryFailure::AwaitedApproval {
        awaited: awaited.to_string(),
        limit,
    })
}

/// A delivery waiting for the composer.
pub struct Held {
    /// The delivery.
    pub delivery: super::handle::Delivery,
    /// When it started waiting.
    pub since: Instant,
    /// When to check again.
    pub next_check: Instant,
    /// Whether its sender has been answered `queued` (`queuedBy: "composer"`); false while
    /// the composer still shows iapeer's own paste ([`is_residue`]).
    pub answered: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(120);

    #[test]
    fn held_until_free_or_the_limit() {
        let t0 = Instant::now();
        assert_eq!(hold_step(None, t0, t0, LIMIT), HoldStep::Deliver);
        assert_eq!(
            hold_step(Some("my draft"), t0, t0 + Duration::from_secs(119), LIMIT),
            HoldStep::Wait
        );
        match hold_step(Some("my draft"), t0, t0 + LIMIT, LIMIT) {
            HoldStep::GiveUp(why) => {
                let why = why.to_string();
                assert!(why.contains("held a draft for 120 s"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            hold_step(None, t0, t0 + LIMIT * 2, LIMIT),
            HoldStep::Deliver,
            "a free composer always delivers"
        );
    }

    const LEFTOVERS: &str = "the composer holds `0u>|iapeer(0.1.0)62;22c`";

    fn clear() -> Option<BootStep> {
        Some(BootStep::Clear {
            bytes: vec![0x03],
            label: LEFTOVERS.into(),
        })
    }

    fn press() -> LeftoversStep {
        LeftoversStep::Press {
            bytes: vec![0x03],
            label: LEFTOVERS.into(),
        }
    }

    #[test]
    fn leftovers_are_cleared_before_a_delivery_a_bounded_number_of_times_then_it_fails() {
        use crate::session::boot::{CLEAR_GAP, MAX_CLEARS};
        let t0 = Instant::now();
        let mut p = ClearPresses::default();
        assert_eq!(leftovers_step(None, false, &mut p, t0), None, "none there");
        let mut at = t0;
        for n in 1..=MAX_CLEARS {
            assert_eq!(
                leftovers_step(clear(), false, &mut p, at),
                Some(press()),
                "press {n}"
            );
            // Still there within the gap (Gemini CLI's exit warning window): no key.
            let soon = at + CLEAR_GAP - Duration::from_millis(1);
            assert_eq!(
                leftovers_step(clear(), false, &mut p, soon),
                Some(LeftoversStep::Wait)
            );
            at += CLEAR_GAP;
        }
        match leftovers_step(clear(), false, &mut p, at) {
            Some(LeftoversStep::GiveUp(what)) => {
                let why = DeliveryFailure::UnclearedComposer(what).to_string();
                assert!(
                    why.starts_with(
                        "the composer holds `0u>|iapeer(0.1.0)62;22c`, still there after 3 \
                         presses of its clear key; message NOT delivered"
                    ),
                    "{why}"
                );
                assert!(!why.contains("draft"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        // Once gone, leftovers that come later get their presses again, after the gap.
        assert_eq!(leftovers_step(None, false, &mut p, at), None);
        assert_eq!(leftovers_step(clear(), false, &mut p, at), Some(press()));
    }

    #[test]
    fn leftovers_get_no_key_during_a_turn_or_while_the_exit_warning_shows() {
        let t0 = Instant::now();
        let mut p = ClearPresses::default();
        // A turn runs: the composer hold decides (Ctrl-C would cancel the turn).
        assert_eq!(leftovers_step(clear(), true, &mut p, t0), None);
        // The exit warning shows (the adapter says Wait): look again, no key.
        assert_eq!(
            leftovers_step(Some(BootStep::Wait), false, &mut p, t0),
            Some(LeftoversStep::Wait)
        );
        // Neither counted a press: the first key goes now.
        assert_eq!(leftovers_step(clear(), false, &mut p, t0), Some(press()));
    }

    #[test]
    fn held_behind_a_prompt_it_says_what_it_waits_for() {
        let t0 = Instant::now();
        let awaited = awaited_approval("Bash", "rm /srv/a");
        assert_eq!(awaited, "an approval: Bash: rm /srv/a");
        assert_eq!(
            approval_step(&awaited, t0, t0 + LIMIT - Duration::from_millis(1), LIMIT),
            HoldStep::Wait
        );
        match approval_step(&awaited, t0, t0 + LIMIT, LIMIT) {
            HoldStep::GiveUp(why) => {
                let why = why.to_string();
                assert!(
                    why.starts_with("waited 120 s for an approval: Bash: rm /srv/a"),
                    "{why}"
                );
                assert!(!why.contains("draft"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn residue_only_our_own_paste_and_only_just_after_it() {
        let t0 = Instant::now();
        let env = "<iap from=\"ea\" runtime=\"echo\" ts=\"23:22:25\">\n<msg>MID</msg>\n</iap>\n";
        let last = LastPaste {
            ended: t0,
            view: PasteView::of(env),
        };
        // What the composer row of Claude Code 2.1.332 showed after a paste
        // (tests/fixtures/claude-2.1.332/mid-turn-queue.raw).
        assert!(is_residue(Some(&last), "[Pasted text #3 +3 lines]", t0));
        assert!(is_residue(
            Some(&last),
            "<iap from=\"ea\"   runtime=\"echo\"",
            t0 + RESIDUE - Duration::from_millis(1)
        ));
        assert!(
            !is_residue(Some(&last), "[Pasted text #3 +3 lines]", t0 + RESIDUE),
            "past the window it is a draft"
        );
        assert!(
            !is_residue(None, "[Pasted text #1 +3 lines]", t0),
            "no paste yet: a draft is a draft"
        );
        for draft in ["my unfinished draft", "hi [Pasted text #1 +3 lines]", ""] {
            assert!(!is_residue(Some(&last), draft, t0), "{draft:?}");
        }
    }
}

//! The composer hold (spec 05 §7, issue 7 item 2): a delivery that finds text in the agent's
//! composer — typed by an attached human, or left there any other way — is never pasted
//! after it (the runtime would submit both as one turn). It waits in the session, the sender
//! answered `queued` (`queuedBy: "composer"`), re-checked every [`RECHECK`], and goes in once
//! the composer is free. Whether anyone is attached makes no difference: iapeer never types
//! over, cuts or submits text it did not put there. Past its limit
//! (`IAPEER_COMPOSER_QUEUE_TIMEOUT_MS`, 120 s) the message fails and its
//! sender is told (spec 05 §7 says "force-delivered after 120 s"; that would submit the draft
//! with it, which this item forbids, so it fails instead).

use std::time::{Duration, Instant};

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
    GiveUp(String),
}

/// The decision for a delivery held since `since` (pure): `draft` is the composer's draft now.
pub fn hold_step(draft: Option<&str>, since: Instant, now: Instant, limit: Duration) -> HoldStep {
    match draft {
        None => HoldStep::Deliver,
        Some(_) if now.saturating_duration_since(since) >= limit => HoldStep::GiveUp(format!(
            "the composer held a draft for {} s (it is never submitted with a message) — clear or send the draft, then resend",
            limit.as_secs()
        )),
        Some(_) => HoldStep::Wait,
    }
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
    HoldStep::GiveUp(format!(
        "waited {} s for {awaited} — its permission prompt is still open on the agent's \
         screen; answer it (iapeer approvals, or attach), then resend",
        limit.as_secs()
    ))
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
            HoldStep::GiveUp(why) => assert!(why.contains("held a draft for 120 s"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            hold_step(None, t0, t0 + LIMIT * 2, LIMIT),
            HoldStep::Deliver,
            "a free composer always delivers"
        );
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

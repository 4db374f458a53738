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

/// How often a held delivery re-checks the composer.
pub const RECHECK: Duration = Duration::from_millis(500);

/// How long after iapeer's own previous paste a composer that still shows text is taken for
/// that paste's residue, not a draft: a runtime that queues a message mid-turn (Claude Code
/// 2.1.332 writes its `queue-operation` record first) may redraw its composer a moment
/// later. Within it the next delivery waits silently, re-checking every [`RESIDUE_RECHECK`];
/// text still there afterwards is a draft and the sender is answered `queued`.
pub const RESIDUE: Duration = Duration::from_millis(1500);

/// How often a delivery waiting out [`RESIDUE`] re-checks the composer.
pub const RESIDUE_RECHECK: Duration = Duration::from_millis(50);

/// Whether text in the composer at `now` may still be iapeer's own paste (pure):
/// `last_paste_end` is when iapeer's previous delivery into this session ended.
pub fn may_be_residue(last_paste_end: Option<Instant>, now: Instant) -> bool {
    last_paste_end.is_some_and(|t| now.saturating_duration_since(t) < RESIDUE)
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

/// A delivery waiting for the composer.
pub struct Held {
    /// The delivery.
    pub delivery: super::handle::Delivery,
    /// When it started waiting.
    pub since: Instant,
    /// When to check again.
    pub next_check: Instant,
    /// Whether its sender has been answered `queued` (`queuedBy: "composer"`); false while
    /// the text may still be iapeer's own paste ([`may_be_residue`]).
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
    fn residue_only_just_after_our_own_paste() {
        let t0 = Instant::now();
        assert!(
            !may_be_residue(None, t0),
            "no paste yet: a draft is a draft"
        );
        assert!(may_be_residue(Some(t0), t0));
        assert!(may_be_residue(
            Some(t0),
            t0 + RESIDUE - Duration::from_millis(1)
        ));
        assert!(!may_be_residue(Some(t0), t0 + RESIDUE));
    }
}

//! The delivery chain of every signal (spec 09 "Semantics"): target → fallbacks → owner →
//! `NOTIFIER_FALLBACK_TARGET`, [`ATTEMPTS_PER_LINK`] attempts per link [`RETRY_DELAY`] apart,
//! as a pure state machine over the spool entry (the entry is the whole state, so a restart
//! resumes where the last process stopped).
//!
//! The spool entry is the `@agfpd/notifier-runtime` 0.3.x shape, one file per signal:
//!
//! ```json
//! {"v":1,"id":"mj1k2x3y-9f8e7d6c","createdAt":"2026-12-01T05:42:27.123Z","kind":"fire",
//!  "target":"alice","message":"stand-up","topic":"daily","owner":"alice",
//!  "chain":["alice","bob"],"attempts":[{"target":"alice","at":"…","error":"…"}],
//!  "status":"pending"}
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Attempts on each link before the next.
pub const ATTEMPTS_PER_LINK: usize = 2;
/// Time between two attempts on the same link (spec 09), unless `IAPEER_NOTIFIER_RETRY_MS`
/// says otherwise ([`retry_delay`]).
pub const RETRY_DELAY: Duration = crate::config::vars::IAPEER_NOTIFIER_RETRY_MS.default_duration();

/// The retry delay from `raw` (the value of `IAPEER_NOTIFIER_RETRY_MS`): a positive number of
/// milliseconds, else [`RETRY_DELAY`].
pub fn retry_delay(raw: Option<&str>) -> Duration {
    crate::eventlog::positive_setting(raw)
        .map(Duration::from_millis)
        .unwrap_or(RETRY_DELAY)
}
/// Room kept under the daemon's message limit for the note a fallback link's copy starts
/// with ([`Entry::wrapped`]: whom it was for, what was tried), in characters.
const NOTE_ROOM: usize = 1_000;
/// The longest signal text, in characters: a timer's `message` (refused above it at
/// registration) and each message a watcher line becomes ([`split_signal`]). With the note it
/// still fits the daemon's 16 000-character limit, so a fallback's copy is never refused for
/// its length.
pub const SIGNAL_MAX_CHARS: usize = crate::protocol::MAX_MESSAGE_CHARS - NOTE_ROOM;
/// The longest error quoted per link in a fallback's note, in characters.
const NOTE_ERROR_CHARS: usize = 160;

/// A watcher line as the signals it is sent as (pure): the line itself when it fits
/// [`SIGNAL_MAX_CHARS`], else consecutive parts that do, each starting `[part k/n] `, so a
/// long log line or stack trace arrives whole in order-marked pieces instead of being refused.
pub fn split_signal(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= SIGNAL_MAX_CHARS {
        return vec![line.to_string()];
    }
    // `[part 99/99] ` is 14 characters; 40 leaves room for any count.
    let per = SIGNAL_MAX_CHARS - 40;
    let parts: Vec<String> = chars.chunks(per).map(|c| c.iter().collect()).collect();
    let n = parts.len();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, p)| format!("[part {}/{n}] {p}", i + 1))
        .collect()
}

/// `text` cut to `max` characters, with `…` when it was longer (pure).
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut t: String = text.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// The variable naming the chain's last link (empty or unset = none).
pub const FALLBACK_TARGET_VAR: &str = crate::config::vars::NOTIFIER_FALLBACK_TARGET.name;

/// What a signal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A timer fire.
    Fire,
    /// A watcher line.
    Forward,
    /// A message to a trigger's owner about its trigger (crash loop, silence).
    Alert,
}

/// `pending` until a link accepted it; `lost` when none did (kept for the operator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Still to be delivered (re-driven at start).
    Pending,
    /// No link accepted it.
    Lost,
}

/// One failed attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The peer tried.
    pub target: String,
    /// When (UTC, ms, `Z`).
    pub at: String,
    /// Why it failed (the send's refusal).
    pub error: String,
}

/// A signal on its way: the spool file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Format version: 1.
    pub v: u32,
    /// The file's name without `.json`.
    pub id: String,
    /// When the signal was made (UTC, ms, `Z`).
    pub created_at: String,
    /// What it is.
    pub kind: Kind,
    /// Whom it is for (the chain's first link).
    pub target: String,
    /// The text, verbatim.
    pub message: String,
    /// Its topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The trigger's owner.
    pub owner: String,
    /// Every link, in order, without repeats.
    pub chain: Vec<String>,
    /// The failed attempts so far, in order.
    pub attempts: Vec<Attempt>,
    /// Pending or lost.
    pub status: Status,
    /// Context kept for logs (the trigger id…), opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
}

/// The chain of a signal: `target`, `fallbacks`, `owner`, `backstop`, in that order, each
/// name once, empty names left out.
pub fn build_chain(target: &str, fallbacks: &[String], owner: &str, backstop: &str) -> Vec<String> {
    let mut chain: Vec<String> = Vec::new();
    let all = std::iter::once(target)
        .chain(fallbacks.iter().map(String::as_str))
        .chain([owner, backstop]);
    for name in all {
        if !name.is_empty() && !chain.iter().any(|c| c == name) {
            chain.push(name.to_string());
        }
    }
    chain
}

/// What to do next with a signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send `text` to `to` now (`link` counts from 0).
    Send {
        /// The peer.
        to: String,
        /// The text (the message itself for the target, a wrapped note for a fallback).
        text: String,
        /// The link's index.
        link: usize,
    },
    /// Wait this long, then ask again.
    Wait(Duration),
    /// No link is left: mark it lost.
    Lost,
}

impl Entry {
    /// The next attempt, from the attempts made so far (a re-driven entry resumes here; an
    /// entry whose attempts already cover the chain starts it over).
    pub fn next_send(&self) -> Step {
        let total = self.chain.len() * ATTEMPTS_PER_LINK;
        if total == 0 {
            return Step::Lost;
        }
        let n = self.attempts.len() % total;
        let link = n / ATTEMPTS_PER_LINK;
        let to = self.chain[link].clone();
        let text = if link == 0 {
            self.message.clone()
        } else {
            self.wrapped(link)
        };
        Step::Send { to, text, link }
    }

    /// The recipient of the next attempt ([`Entry::next_send`]'s `to`), `None` for an empty
    /// chain.
    pub fn next_target(&self) -> Option<&str> {
        let total = self.chain.len() * ATTEMPTS_PER_LINK;
        (total > 0).then(|| self.chain[(self.attempts.len() % total) / ATTEMPTS_PER_LINK].as_str())
    }

    /// Record a failed attempt on `to` at `at` and say what follows: a wait of `retry`
    /// before the second attempt on the same link, the next link at once, or lost.
    pub fn failed(&mut self, to: &str, at: String, error: &str, retry: Duration) -> Step {
        self.attempts.push(Attempt {
            target: to.to_string(),
            at,
            error: error.to_string(),
        });
        let n = self.attempts.len();
        if n >= self.chain.len() * ATTEMPTS_PER_LINK {
            self.status = Status::Lost;
            return Step::Lost;
        }
        if n % ATTEMPTS_PER_LINK != 0 {
            Step::Wait(retry)
        } else {
            self.next_send()
        }
    }

    /// Peer `old` was renamed to `new` (`rename`): every link and the owner that name it name
    /// `new` (a link already in the chain is not repeated). True when anything changed; the
    /// attempts made so far are kept as they were.
    pub fn renamed(&mut self, old: &str, new: &str) -> bool {
        if !self.chain.iter().any(|c| c == old) && self.target != old && self.owner != old {
            return false;
        }
        if self.target == old {
            self.target = new.to_string();
        }
        if self.owner == old {
            self.owner = new.to_string();
        }
        let mut chain: Vec<String> = Vec::with_capacity(self.chain.len());
        for link in &self.chain {
            let link = if link == old { new } else { link.as_str() };
            if !chain.iter().any(|c| c == link) {
                chain.push(link.to_string());
            }
        }
        self.chain = chain;
        true
    }

    /// The note a fallback link gets: whom the signal was for, what failed, then the signal.
    fn wrapped(&self, link: usize) -> String {
        let mut tried: Vec<(String, usize, String)> = Vec::new();
        for a in &self.attempts {
            match tried.last_mut() {
                Some((t, n, e)) if *t == a.target => {
                    *n += 1;
                    e.clone_from(&a.error);
                }
                _ => tried.push((a.target.clone(), 1, a.error.clone())),
            }
        }
        let mut tried: String = tried
            .iter()
            .map(|(t, n, e)| format!("{t} ({n} tries, last: {})", cut(e, NOTE_ERROR_CHARS)))
            .collect::<Vec<_>>()
            .join("; ");
        if tried.chars().count() > NOTE_ROOM / 2 {
            // A long chain: its count, so the note keeps within its room.
            tried = format!("{} links (see the notifier's log)", link);
        }
        format!(
            "[notifier] A {} for {} could not be delivered, so it comes to you (link {} of {}; owner {}{}). \
             Tried: {}. Act on it or pass it on to {}. The signal:\n{}",
            match self.kind {
                Kind::Fire => "timer signal",
                Kind::Forward => "watcher line",
                Kind::Alert => "notifier alert",
            },
            self.target,
            link + 1,
            self.chain.len(),
            self.owner,
            self.topic
                .as_deref()
                .map(|t| format!(", topic {t}"))
                .unwrap_or_default(),
            tried,
            self.target,
            self.message
        )
    }

    /// One line for lists and logs: `<id> <kind> for <target> (<created>): <message start>`.
    pub fn summary(&self) -> String {
        let mut m: String = self.message.chars().take(60).collect();
        if self.message.chars().count() > 60 {
            m.push('…');
        }
        format!(
            "{} — {} for {} at {}, tried {}: {m}",
            self.id,
            match self.kind {
                Kind::Fire => "fire",
                Kind::Forward => "line",
                Kind::Alert => "alert",
            },
            self.target,
            self.created_at,
            self.chain.join(" → ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(chain: Vec<String>) -> Entry {
        Entry {
            v: 1,
            id: "mj1-abc".into(),
            created_at: "2026-12-01T05:00:00.000Z".into(),
            kind: Kind::Fire,
            target: "alice".into(),
            message: "stand-up".into(),
            topic: Some("daily".into()),
            owner: "carol".into(),
            chain,
            attempts: vec![],
            status: Status::Pending,
            meta: None,
        }
    }

    #[test]
    fn the_chain_is_target_fallbacks_owner_backstop_without_repeats() {
        assert_eq!(
            build_chain("alice", &["bob".into(), "alice".into()], "carol", "oncall"),
            ["alice", "bob", "carol", "oncall"]
        );
        assert_eq!(build_chain("carol", &[], "carol", ""), ["carol"]);
    }

    #[test]
    fn two_attempts_per_link_30s_apart_then_the_next_link_then_lost() {
        let mut e = entry(build_chain("alice", &["bob".into()], "carol", ""));
        let send = |s: &Step| match s {
            Step::Send { to, link, .. } => (to.clone(), *link),
            other => panic!("{other:?}"),
        };
        assert_eq!(send(&e.next_send()), ("alice".into(), 0));
        assert_eq!(
            e.failed("alice", "t1".into(), "asleep", RETRY_DELAY),
            Step::Wait(RETRY_DELAY)
        );
        assert_eq!(send(&e.next_send()), ("alice".into(), 0));
        let next = e.failed("alice", "t2".into(), "wake failed", RETRY_DELAY);
        assert_eq!(send(&next), ("bob".into(), 1), "the next link at once");
        let Step::Send { text, .. } = next else {
            unreachable!()
        };
        assert!(
            text.contains("for alice could not be delivered")
                && text.contains("alice (2 tries, last: wake failed)")
                && text.ends_with("The signal:\nstand-up"),
            "{text}"
        );
        assert_eq!(
            e.failed("bob", "t3".into(), "x", RETRY_DELAY),
            Step::Wait(RETRY_DELAY)
        );
        assert!(matches!(
            e.failed("bob", "t4".into(), "x", RETRY_DELAY),
            Step::Send { link: 2, .. }
        ));
        assert_eq!(
            e.failed("carol", "t5".into(), "x", RETRY_DELAY),
            Step::Wait(RETRY_DELAY)
        );
        assert_eq!(e.status, Status::Pending);
        assert_eq!(e.failed("carol", "t6".into(), "x", RETRY_DELAY), Step::Lost);
        assert_eq!(e.status, Status::Lost);
        assert_eq!(e.attempts.len(), 6);
    }

    /// A fallback's copy of the longest signal, after long errors on many links, still fits
    /// the daemon's limit (found by a newcomer walkthrough: the note pushed a long timer
    /// message over it, and the owner's copy was refused).
    #[test]
    fn a_fallback_copy_of_the_longest_signal_fits_the_limit() {
        let chain: Vec<String> = (0..12).map(|i| format!("peer{i}")).collect();
        let mut e = entry(chain.clone());
        e.message = "W".repeat(SIGNAL_MAX_CHARS);
        let long_error = "E".repeat(5_000);
        let mut sent = Vec::new();
        for link in &chain[..11] {
            for _ in 0..ATTEMPTS_PER_LINK {
                if let Step::Send { text, .. } =
                    e.failed(link, "T".into(), &long_error, RETRY_DELAY)
                {
                    sent.push(text);
                }
            }
        }
        assert_eq!(sent.len(), 11, "one copy per next link");
        for text in &sent {
            let n = text.chars().count();
            assert!(n <= crate::protocol::MAX_MESSAGE_CHARS, "{n}");
            assert!(text.ends_with(&e.message));
        }
        assert!(sent[0].contains(&format!("last: {}…", "E".repeat(NOTE_ERROR_CHARS - 1))));
        assert!(sent[10].contains("Tried: 11 links (see the notifier's log)"));
    }

    /// A watcher line over the signal limit goes as order-marked parts that each fit and
    /// together hold the whole line; one that fits goes as it is.
    #[test]
    fn a_long_watcher_line_is_split_into_parts_that_fit() {
        assert_eq!(split_signal("short"), ["short"]);
        let exact = "x".repeat(SIGNAL_MAX_CHARS);
        assert_eq!(split_signal(&exact), vec![exact]);
        let line: String = (0..40_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let parts = split_signal(&line);
        assert_eq!(parts.len(), 3);
        let mut whole = String::new();
        for (i, p) in parts.iter().enumerate() {
            assert!(p.chars().count() <= SIGNAL_MAX_CHARS);
            let prefix = format!("[part {}/3] ", i + 1);
            whole.push_str(p.strip_prefix(&prefix).expect("a part marker"));
        }
        assert_eq!(whole, line);
    }

    #[test]
    fn the_retry_delay_is_30_s_unless_set() {
        assert_eq!(retry_delay(None), Duration::from_secs(30));
        assert_eq!(retry_delay(Some("0")), Duration::from_secs(30));
        assert_eq!(retry_delay(Some("x")), Duration::from_secs(30));
        assert_eq!(retry_delay(Some("250")), Duration::from_millis(250));
    }

    #[test]
    fn a_renamed_peer_is_renamed_in_the_chain_and_the_owner() {
        let mut e = entry(vec![]);
        e.target = "kay".into();
        e.owner = "kay".into();
        e.chain = vec!["kay".into(), "ann".into(), "kai".into()];
        assert!(e.renamed("kay", "kai"));
        assert_eq!((e.target.as_str(), e.owner.as_str()), ("kai", "kai"));
        assert_eq!(
            e.chain,
            vec!["kai", "ann"],
            "a link already there is not repeated"
        );
        assert!(
            !e.renamed("zed", "zoe"),
            "a name it does not hold changes nothing"
        );
    }

    #[test]
    fn a_redriven_entry_resumes_at_its_next_attempt() {
        let mut e = entry(build_chain("alice", &[], "carol", ""));
        e.failed("alice", "t1".into(), "x", RETRY_DELAY);
        // A new process reads the file and asks what is next: alice's second attempt.
        let back: Entry = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert!(matches!(back.next_send(), Step::Send { link: 0, .. }));
        e.failed("alice", "t2".into(), "x", RETRY_DELAY);
        assert!(matches!(e.next_send(), Step::Send { link: 1, .. }));
    }

    #[test]
    fn the_spool_shape_matches_the_package() {
        let mut e = entry(vec!["alice".into()]);
        e.failed("alice", "T".into(), "no", RETRY_DELAY);
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"v":1,"id":"mj1-abc","createdAt":"2026-12-01T05:00:00.000Z","kind":"fire","target":"alice","message":"stand-up","topic":"daily","owner":"carol","chain":["alice"],"attempts":[{"target":"alice","at":"T","error":"no"}],"status":"pending"}"#
        );
    }
}

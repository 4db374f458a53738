//! The topic lists that deliveries note (spec 05 §3), written when the router has caught up
//! rather than on every delivery (issue 13 item 3).
//!
//! Each delivery with a topic changes its session's list (`<id>.topic`). Rewriting the file
//! (a new file renamed over the old) on the router thread for each of them took most of the
//! router's time in a burst of 1 000 calls: ext4 writes the new file's blocks out at the
//! rename and frees the old one's, on a disk mounted with `discard` synchronously. So a
//! changed list waits here, and the waiting lists are written when the router has caught up
//! (both its channels empty) and nothing was written in the last [`FLUSH_AFTER`] — so a
//! daemon killed right after a lone delivery has its topic on disk — else [`FLUSH_AFTER`]
//! after the first change (the router's `TopicFlush` timer), before a launch decides fresh
//! or resume from the files, before any control request other than a send (`rename`,
//! `remove`, `new`, … touch the files), and when the router ends. A burst of sends to 20
//! peers costs 20 writes per [`FLUSH_AFTER`]. The file keeps its format; the router's own reads go
//! through [`TopicBook::note`], which starts from the waiting list. What a crash loses is
//! what the unsynced rename could lose before: the newest topics (a later wake of that
//! session starts fresh instead of resuming).
//!
//! The writes themselves run on a one-thread pool, `topic-writer`, in order: 20 renames took
//! the router 3–5 ms, twice in each burst, and every call waiting for the router paid them.
//! The timer's [`TopicBook::flush`] only hands the lists over (and keeps them, so the next
//! note starts from them, not from a file the writer may not have written yet);
//! [`TopicBook::sync`], at the points that read or move the files, waits until the writer
//! has written everything handed to it and forgets the kept lists, so notes read the files
//! again (a fresh launch empties them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::daemon::pool::Pool;
use crate::markers::{note_topic_in, Markers};
use crate::names::Identity;
use crate::paths::Paths;

/// How long after a list changes the waiting lists are written at the latest, while the
/// router never catches up.
pub(crate) const FLUSH_AFTER: Duration = Duration::from_millis(200);

/// How long [`TopicBook::sync`] waits for the writer (a hung file system) before it goes on.
const SYNC_WAIT: Duration = Duration::from_secs(10);

/// Topic lists changed since they were last written, by identity.
pub(crate) struct TopicBook {
    waiting: BTreeMap<Identity, Vec<String>>,
    /// Lists handed to the writer since the last [`TopicBook::sync`]: their files may not
    /// show them yet.
    handed: BTreeMap<Identity, Vec<String>>,
    /// A flush is due (the router's timer is set).
    armed: bool,
    /// When lists were last handed to the writer.
    flushed_at: Option<Instant>,
    /// One thread at most, so the writes keep their order.
    writer: Pool,
}

impl Default for TopicBook {
    fn default() -> TopicBook {
        TopicBook {
            waiting: BTreeMap::new(),
            handed: BTreeMap::new(),
            armed: false,
            flushed_at: None,
            writer: Pool::new("topic-writer", 1),
        }
    }
}

impl TopicBook {
    /// Note `topic` as delivered to `identity` (spec 05 §3: moved to or added at the end,
    /// at most 16 kept). The list starts from the waiting one, else the file. True when the
    /// list changed (an empty topic never changes it); the change waits for [`Self::flush`].
    pub(crate) fn note(&mut self, paths: &Paths, identity: &Identity, topic: &str) -> bool {
        let known = self.waiting.get(identity).or(self.handed.get(identity));
        let mut list = match known {
            Some(list) => list.clone(),
            None => Markers::new(paths, identity).topics(),
        };
        if !note_topic_in(&mut list, topic) {
            return false;
        }
        self.waiting.insert(identity.clone(), list);
        true
    }

    /// True when no list waits to be written.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Mark a flush as due; true when none was (the caller sets the timer).
    pub(crate) fn arm(&mut self) -> bool {
        !std::mem::replace(&mut self.armed, true)
    }

    /// Hand every waiting list to the writer, which writes each to its file (atomically);
    /// a failure is logged and that list is dropped, as a failed write on delivery was
    /// before. Returns at once (the router's `TopicFlush` timer).
    pub(crate) fn flush(&mut self, paths: &Paths) {
        self.armed = false;
        if self.waiting.is_empty() {
            return;
        }
        self.flushed_at = Some(Instant::now());
        let batch: Vec<(Identity, Vec<String>)> =
            std::mem::take(&mut self.waiting).into_iter().collect();
        for (identity, list) in &batch {
            self.handed.insert(identity.clone(), list.clone());
        }
        let p = paths.clone();
        let job = batch.clone();
        if let Err(e) = self.writer.run(move || write_lists(&p, job)) {
            log::warn!("topic lists: no writer thread ({e}); writing them on the router");
            write_lists(paths, batch);
        }
    }

    /// The router has caught up at `now`: [`Self::flush`] when lists wait and nothing was
    /// handed over in the last [`FLUSH_AFTER`] (else the timer's flush comes soon enough).
    pub(crate) fn caught_up(&mut self, paths: &Paths, now: Instant) {
        let recent = self
            .flushed_at
            .is_some_and(|t| now.saturating_duration_since(t) < FLUSH_AFTER);
        if !self.waiting.is_empty() && !recent {
            self.flush(paths);
        }
    }

    /// [`Self::flush`], then wait until the writer has written everything handed to it, and
    /// forget the handed lists: before a launch decides fresh or resume from the files,
    /// before a control request that may touch them, and at the router's end.
    pub(crate) fn sync(&mut self, paths: &Paths) {
        self.flush(paths);
        if !self.handed.is_empty() {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let barrier = self.writer.run(move || {
                let _ = tx.send(());
            });
            if barrier.is_ok() && rx.recv_timeout(SYNC_WAIT).is_err() {
                log::warn!(
                    "topic lists: the writer did not finish within {} s; going on",
                    SYNC_WAIT.as_secs()
                );
            }
        }
        self.handed.clear();
    }
}

/// The writer's job: each list to its file.
fn write_lists(paths: &Paths, batch: Vec<(Identity, Vec<String>)>) {
    for (identity, list) in batch {
        if let Err(e) = Markers::new(paths, &identity).write_topics(&list) {
            log::warn!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(s: &str) -> Identity {
        Identity::parse(s).unwrap()
    }

    #[test]
    fn notes_wait_for_the_flush_and_build_on_each_other() {
        let (_dir, paths) = crate::testkit::temp_root();
        let bob = ident("claude-bob");
        Markers::new(&paths, &bob)
            .write_topics(&["old".into()])
            .unwrap();
        let mut book = TopicBook::default();
        assert!(book.note(&paths, &bob, "a"));
        assert!(book.note(&paths, &bob, "b"));
        assert!(!book.note(&paths, &bob, "b"), "already the most recent");
        assert!(book.note(&paths, &bob, "old"), "moves to the end");
        assert!(!book.note(&paths, &bob, " "), "a blank topic is no topic");
        // Nothing written yet: the file still has what it had.
        assert_eq!(Markers::new(&paths, &bob).topics(), vec!["old"]);
        assert!(!book.is_empty());
        assert!(book.arm(), "the first change sets the timer");
        assert!(!book.arm(), "one timer at a time");
        book.sync(&paths);
        assert!(book.is_empty());
        assert!(book.arm(), "after a flush the next change sets it again");
        assert_eq!(Markers::new(&paths, &bob).topics(), vec!["a", "b", "old"]);
    }

    #[test]
    fn catching_up_writes_at_once_unless_a_flush_was_just_handed_over() {
        let (_dir, paths) = crate::testkit::temp_root();
        let bob = ident("claude-bob");
        let mut book = TopicBook::default();
        assert!(book.note(&paths, &bob, "a"));
        book.caught_up(&paths, Instant::now());
        assert!(
            book.is_empty(),
            "the first change after a quiet spell goes at once"
        );
        assert!(book.note(&paths, &bob, "b"));
        book.caught_up(&paths, Instant::now());
        assert!(
            !book.is_empty(),
            "within FLUSH_AFTER of a flush: left to the timer"
        );
        book.caught_up(&paths, Instant::now() + FLUSH_AFTER);
        assert!(book.is_empty(), "FLUSH_AFTER later it goes");
        book.sync(&paths);
        assert_eq!(Markers::new(&paths, &bob).topics(), vec!["a", "b"]);
    }

    #[test]
    fn a_flush_writes_each_identity_s_own_list_and_keeps_sixteen() {
        let (_dir, paths) = crate::testkit::temp_root();
        let (bob, ann) = (ident("claude-bob"), ident("codex-ann"));
        let mut book = TopicBook::default();
        for i in 0..40 {
            book.note(&paths, &bob, &format!("t{i}"));
        }
        book.note(&paths, &ann, "x");
        book.sync(&paths);
        let bobs = Markers::new(&paths, &bob).topics();
        assert_eq!(bobs.len(), 16);
        assert_eq!(bobs.first().map(String::as_str), Some("t24"));
        assert_eq!(bobs.last().map(String::as_str), Some("t39"));
        assert_eq!(Markers::new(&paths, &ann).topics(), vec!["x"]);
        // After a sync a note starts from the file again: a fresh launch emptied it.
        Markers::new(&paths, &ann).reset_topics().unwrap();
        assert!(book.note(&paths, &ann, "y"));
        book.sync(&paths);
        assert_eq!(Markers::new(&paths, &ann).topics(), vec!["y"]);
    }

    #[test]
    fn a_note_after_a_flush_builds_on_the_handed_list_not_the_file() {
        let (_dir, paths) = crate::testkit::temp_root();
        let bob = ident("claude-bob");
        let mut book = TopicBook::default();
        for round in 0..50 {
            // The writer may or may not have written the last flush's list by now: either
            // way the next note starts from it.
            assert!(book.note(&paths, &bob, &format!("t{round}")));
            book.flush(&paths);
        }
        book.sync(&paths);
        let topics = Markers::new(&paths, &bob).topics();
        let want: Vec<String> = (34..50).map(|i| format!("t{i}")).collect();
        assert_eq!(topics, want);
    }
}

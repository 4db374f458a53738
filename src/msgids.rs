//! Message ids (issue 26 item 5): every send carries an id (the sender's, or one the daemon
//! makes), and a recipient never gets two messages with the same id from the same sender, so
//! no retry — the outbox's, or a sender's acting on a "state unknown" answer — writes a
//! message twice.
//!
//! The [`Ledger`] records, per recipient identity, each id whose paste has begun: the session
//! thread writes `begun` **before** the first byte of the message reaches the child's input,
//! so a daemon killed mid-paste still knows at its next start that the message may have
//! arrived. The router writes `accepted` once the delivery is confirmed (or the message is in
//! a queue that took it), and `free` when the message was provably not written (nothing of it
//! reached the input, or it was taken back whole), so a retry with that id may go out.
//!
//! Files: `<root>/state/iapeer/message-ids/<identity>.ids`, one line per change,
//! `<epoch ms> begun|accepted|free <sender identity> <id>`, appended with `O_APPEND` under the
//! ledger's lock (mode 0600). Bound: an id is kept for [`KEEP`] (7 days) and among the newest
//! [`KEEP_IDS`] (10 000) ids of its recipient; past either, a send with that id is new again.
//! A file with more than twice the lines it needs is rewritten atomically from memory.
//!
//! No fsync: the record has to survive the daemon's death, not the host's. A `write` is in
//! the page cache the moment it returns, and the next daemon reads it even after a kill -9.
//! A power loss can lose the last lines, but it also ends the recipient's process, whose input
//! queue held the message: the retry that follows then delivers a message the recipient may
//! have seen only if its own record of it reached the disk first.

use std::collections::{HashMap, VecDeque};
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fsutil;

/// How long an id is remembered per recipient (a retry after it is a new message).
pub const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// How many ids are remembered per recipient, newest first.
pub const KEEP_IDS: usize = 10_000;
/// Longest message id, in bytes.
pub const MAX_ID_LEN: usize = 64;

/// Whether `id` is a valid message id: 1 to [`MAX_ID_LEN`] ASCII letters, digits, `.`, `_`,
/// `:` or `-` (a UUID, a ULID, a timestamp and counter all fit).
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// What to tell a sender whose id is not valid.
pub const ID_RULE: &str =
    "a message id is 1 to 64 ASCII letters, digits, '.', '_', ':' or '-' (e.g. a UUID)";

/// A fresh message id: `m-` and 16 random hex digits (64 bits: two ids of one sender to one
/// recipient within the [`KEEP`] window collide with odds below 1 in 10^10).
pub fn new_id() -> String {
    format!("m-{}", fsutil::random_hex(8))
}

/// A message as the ledger knows it: who sent it and its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MsgKey {
    /// The sender's identity, `<runtime>-<personality>` (or `iapeer` for the daemon).
    pub from: String,
    /// The message id.
    pub id: String,
}

/// What is known of a message whose id the ledger holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Its paste has begun and its arrival was never confirmed: it may have arrived.
    Begun,
    /// Confirmed delivered, or taken into a queue (the runtime's, the composer hold, an
    /// ephemeral peer's task queue).
    Accepted,
}

impl Fate {
    fn word(self) -> &'static str {
        match self {
            Fate::Begun => "begun",
            Fate::Accepted => "accepted",
        }
    }
}

/// One recipient's ids: the fate of each, and the order they came in (for the bound).
#[derive(Default)]
struct Book {
    fates: HashMap<MsgKey, (Fate, u64)>,
    /// `(first seen, key)`, oldest first; a freed key's entry stays until it is evicted.
    order: VecDeque<(u64, MsgKey)>,
    /// Lines in the file.
    lines: usize,
    /// The file as last read or written: (device, inode, length); `None` when there was none.
    file: Option<(u64, u64, u64)>,
}

/// The ledger file of `recipient` (`<runtime>-<personality>`) in `dir`
/// (`<root>/state/iapeer/message-ids/`): `<recipient>.ids`.
pub fn file_in(dir: &std::path::Path, recipient: &str) -> PathBuf {
    dir.join(format!("{recipient}.ids"))
}

/// (device, inode, length) of `path`, `None` when it cannot be read.
fn file_id(path: &std::path::Path) -> Option<(u64, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.len()))
}

impl Book {
    /// Apply one change at `ms` (as read from the file or made now); `now` bounds the age.
    fn apply(&mut self, change: Option<Fate>, key: &MsgKey, ms: u64, now: u64) {
        match change {
            Some(fate) => {
                if let Some(entry) = self.fates.get_mut(key) {
                    entry.0 = fate;
                } else {
                    self.fates.insert(key.clone(), (fate, ms));
                    self.order.push_back((ms, key.clone()));
                }
            }
            None => {
                self.fates.remove(key);
            }
        }
        self.evict(now);
    }

    /// Forget the ids past the bound: older than [`KEEP`], or beyond [`KEEP_IDS`].
    fn evict(&mut self, now: u64) {
        let oldest = now.saturating_sub(KEEP.as_millis() as u64);
        while let Some((ms, _)) = self.order.front() {
            if self.order.len() <= KEEP_IDS && *ms >= oldest {
                break;
            }
            if let Some((ms, key)) = self.order.pop_front() {
                if self.fates.get(&key).is_some_and(|(_, at)| *at == ms) {
                    self.fates.remove(&key);
                }
            }
        }
    }

    /// The file's text for what the book holds now, oldest first.
    fn text(&self) -> String {
        let mut out = String::new();
        for (ms, key) in &self.order {
            if let Some((fate, at)) = self.fates.get(key) {
                if at == ms {
                    out.push_str(&line(*ms, Some(*fate), key));
                }
            }
        }
        out
    }
}

/// One file line.
fn line(ms: u64, change: Option<Fate>, key: &MsgKey) -> String {
    let word = change.map_or("free", Fate::word);
    format!("{ms} {word} {} {}\n", key.from, key.id)
}

/// Read one file line back; `None` for a line that is not one (skipped).
fn parse_line(l: &str) -> Option<(u64, Option<Fate>, MsgKey)> {
    let mut parts = l.split(' ');
    let ms = parts.next()?.parse().ok()?;
    let change = match parts.next()? {
        "begun" => Some(Fate::Begun),
        "accepted" => Some(Fate::Accepted),
        "free" => None,
        _ => return None,
    };
    let from = parts.next()?.to_string();
    let id = parts.next()?.to_string();
    if parts.next().is_some() || from.is_empty() || !valid_id(&id) {
        return None;
    }
    Some((ms, change, MsgKey { from, id }))
}

/// Whether a message's id, [`Fate::Begun`] at `begun_ms` and never confirmed, may be freed
/// so that a retry delivers it (issue 28 item 7, "0 lost across kill -9"): only when its
/// paste began under an earlier daemon than this one (started at `started_ms`: the session
/// that took the paste ended with it, so nothing of it can still arrive) and the recipient
/// runtime's own records, asked only then (`recorded`: [`crate::adapter::Adapter::records_hold`]),
/// can tell and do not hold it. Records that cannot tell (`None`) or hold it keep the id
/// begun: the retry is answered "state unknown", as before. Pure (but for `recorded`).
pub fn free_after_restart(
    fate: Fate,
    begun_ms: u64,
    started_ms: u64,
    recorded: impl FnOnce() -> Option<bool>,
) -> bool {
    fate == Fate::Begun && begun_ms < started_ms && recorded() == Some(false)
}

/// The daemon's record of message ids, per recipient; shared by the router and the session
/// threads. Each recipient's book has its own lock, held for a lookup or one line's write;
/// the map of books has one more, held only to find a book (no file is touched under it).
///
/// Why a lock per recipient: the router runs real-time and the session threads do not
/// ([`crate::daemon::realtime`]). With one lock for all, a session thread preempted while it
/// wrote its `begun` line (a `stat`, an `open`, a `write`) held up the router's `accepted` for
/// another recipient until it got a core again: in the burst bench (1 000 concurrent sends to
/// 20 echo peers, 2 cores) the router waited on it up to 155 ms (`perf record -e
/// sched:sched_switch`, issue 31 item 3). Now the router can only wait behind the one session
/// whose message it records.
pub struct Ledger {
    dir: PathBuf,
    books: Mutex<HashMap<String, Arc<Mutex<Option<Book>>>>>,
}

impl Ledger {
    /// A ledger kept in `dir` (`<root>/state/iapeer/message-ids/`); each recipient's file is
    /// read the first time it is asked about.
    pub fn new(dir: PathBuf) -> Ledger {
        Ledger {
            dir,
            books: Mutex::new(HashMap::new()),
        }
    }

    fn file(&self, recipient: &str) -> PathBuf {
        file_in(&self.dir, recipient)
    }

    /// Run `f` on `recipient`'s book, read from its file first if this is the first use, or
    /// again when the file is no longer the one the book was read from or last written to
    /// (`rename` moves a peer's file to its new name, or a removed peer's file was replaced):
    /// one `stat` per use.
    fn with_book<T>(&self, recipient: &str, f: impl FnOnce(&mut Book, &Ledger) -> T) -> T {
        let slot = {
            let mut books = self.books.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(books.entry(recipient.to_string()).or_default())
        };
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        let on_disk = file_id(&self.file(recipient));
        if slot.as_ref().is_some_and(|b| b.file != on_disk) {
            *slot = None;
        }
        let book = slot.get_or_insert_with(|| self.read_book(recipient, on_disk));
        f(book, self)
    }

    /// `recipient`'s book as its file (whose identity is `on_disk`) holds it; empty when there
    /// is none (a file that cannot be read is logged).
    fn read_book(&self, recipient: &str, on_disk: Option<(u64, u64, u64)>) -> Book {
        let mut book = Book {
            file: on_disk,
            ..Book::default()
        };
        let now = crate::clock::now_ms();
        match std::fs::read_to_string(self.file(recipient)) {
            Ok(text) => {
                for l in text.lines() {
                    book.lines += 1;
                    if let Some((ms, change, key)) = parse_line(l) {
                        book.apply(change, &key, ms, now);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!(
                "message ids: cannot read {}: {e}; a retry of a message sent to {recipient} \
                 before this start may be delivered again",
                self.file(recipient).display()
            ),
        }
        book
    }

    /// What is known of `key`'s message to `recipient`; `None` when its id was never begun
    /// (or was freed, or is past the bound).
    #[cfg(test)]
    pub fn fate(&self, recipient: &str, key: &MsgKey) -> Option<Fate> {
        self.fate_at(recipient, key).map(|(f, _)| f)
    }

    /// [`Ledger::fate`] with when the id was first recorded (epoch ms): for
    /// [`Fate::Begun`], when its paste began.
    pub fn fate_at(&self, recipient: &str, key: &MsgKey) -> Option<(Fate, u64)> {
        self.with_book(recipient, |b, _| b.fates.get(key).copied())
    }

    /// Record that `key`'s paste into `recipient` begins now (call it before the first byte).
    ///
    /// Errors: the file could not be written (the memory still holds it for this daemon).
    pub fn begun(&self, recipient: &str, key: &MsgKey) -> io::Result<()> {
        self.change(recipient, key, Some(Fate::Begun))
    }

    /// Record that `key`'s message to `recipient` was confirmed (or queued).
    ///
    /// Errors: the file could not be written.
    pub fn accepted(&self, recipient: &str, key: &MsgKey) -> io::Result<()> {
        self.change(recipient, key, Some(Fate::Accepted))
    }

    /// Record that nothing of `key`'s message reached `recipient` (never written, or taken
    /// back whole): a send with that id may go out again.
    ///
    /// Errors: the file could not be written.
    pub fn free(&self, recipient: &str, key: &MsgKey) -> io::Result<()> {
        self.change(recipient, key, None)
    }

    fn change(&self, recipient: &str, key: &MsgKey, change: Option<Fate>) -> io::Result<()> {
        self.with_book(recipient, |book, ledger| {
            let now = crate::clock::now_ms();
            if change.is_none() && !book.fates.contains_key(key) {
                return Ok(());
            }
            book.apply(change, key, now, now);
            let file = ledger.file(recipient);
            if book.lines > 2 * book.fates.len() + 1024 {
                // Rewritten whole (atomically) from memory: the bound holds on disk too.
                fsutil::ensure_dir(&ledger.dir)?;
                fsutil::write_atomic(&file, book.text().as_bytes(), fsutil::MODE_PRIVATE)?;
                book.lines = book.fates.len();
                book.file = file_id(&file);
                return Ok(());
            }
            fsutil::ensure_dir(&ledger.dir)?;
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .mode(fsutil::MODE_PRIVATE)
                .open(&file)?;
            f.write_all(line(now, change, key).as_bytes())?;
            book.lines += 1;
            book.file = file_id(&file);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(from: &str, id: &str) -> MsgKey {
        MsgKey {
            from: from.into(),
            id: id.into(),
        }
    }

    #[test]
    fn a_begun_id_is_freed_only_after_a_restart_and_when_the_records_lack_it() {
        let asked = std::cell::Cell::new(0);
        let records = |r: Option<bool>| {
            let asked = &asked;
            move || {
                asked.set(asked.get() + 1);
                r
            }
        };
        // Begun under the previous daemon, the records can tell and lack it: freed.
        assert!(free_after_restart(
            Fate::Begun,
            100,
            200,
            records(Some(false))
        ));
        // They hold it, or cannot tell: kept (the safe "state unknown").
        assert!(!free_after_restart(
            Fate::Begun,
            100,
            200,
            records(Some(true))
        ));
        assert!(!free_after_restart(Fate::Begun, 100, 200, records(None)));
        assert_eq!(asked.get(), 3);
        // Begun by this daemon (its session may still take it), or accepted: the records
        // are not even read.
        assert!(!free_after_restart(
            Fate::Begun,
            200,
            200,
            records(Some(false))
        ));
        assert!(!free_after_restart(
            Fate::Accepted,
            100,
            200,
            records(Some(false))
        ));
        assert_eq!(asked.get(), 3);
    }

    #[test]
    fn ids_are_short_plain_words() {
        assert!(valid_id("m-0123456789abcdef"));
        assert!(valid_id("550e8400-e29b-41d4-a716-446655440000"));
        assert!(valid_id("job.42:retry_1"));
        for bad in ["", "a b", "a\nb", "é", "a/b", &"x".repeat(65)] {
            assert!(!valid_id(bad), "{bad:?}");
        }
        let a = new_id();
        assert!(valid_id(&a) && a.starts_with("m-") && a.len() == 18, "{a}");
        assert_ne!(a, new_id());
    }

    #[test]
    fn a_fate_survives_a_new_ledger_and_free_forgets_it() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().join("ids"));
        let (a, b, c) = (
            key("echo-alice", "1"),
            key("echo-alice", "2"),
            key("echo-carl", "1"),
        );
        ledger.begun("echo-bob", &a).unwrap();
        ledger.begun("echo-bob", &b).unwrap();
        ledger.accepted("echo-bob", &b).unwrap();
        ledger.begun("echo-bob", &c).unwrap();
        ledger.free("echo-bob", &c).unwrap();
        // A daemon killed now: the next one reads the file.
        let again = Ledger::new(dir.path().join("ids"));
        assert_eq!(again.fate("echo-bob", &a), Some(Fate::Begun));
        assert_eq!(again.fate("echo-bob", &b), Some(Fate::Accepted));
        assert_eq!(again.fate("echo-bob", &c), None, "freed");
        // Per recipient, per sender.
        assert_eq!(again.fate("echo-dan", &a), None);
        assert_eq!(again.fate("echo-bob", &key("echo-zed", "1")), None);
        let text = std::fs::read_to_string(dir.path().join("ids/echo-bob.ids")).unwrap();
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(text.lines().all(|l| parse_line(l).is_some()), "{text}");
    }

    #[test]
    fn a_file_moved_under_a_running_ledger_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().to_path_buf());
        let a = key("echo-ann", "1");
        ledger.begun("echo-bob", &a).unwrap();
        ledger.accepted("echo-bob", &a).unwrap();
        // A book the ledger read before (empty) for the name the file moves to.
        assert_eq!(ledger.fate("echo-bea", &a), None);
        // `rename bob bea` while the daemon runs.
        std::fs::rename(
            file_in(dir.path(), "echo-bob"),
            file_in(dir.path(), "echo-bea"),
        )
        .unwrap();
        assert_eq!(ledger.fate("echo-bea", &a), Some(Fate::Accepted));
        assert_eq!(ledger.fate("echo-bob", &a), None, "moved away");
        // Written to after the move, the new name's file keeps what it had.
        ledger.begun("echo-bea", &key("echo-ann", "2")).unwrap();
        let again = Ledger::new(dir.path().to_path_buf());
        assert_eq!(again.fate("echo-bea", &a), Some(Fate::Accepted));
        assert_eq!(
            again.fate("echo-bea", &key("echo-ann", "2")),
            Some(Fate::Begun)
        );
    }

    #[test]
    fn the_bound_holds_in_memory_and_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::new(dir.path().to_path_buf());
        let n = KEEP_IDS + 3000;
        for i in 0..n {
            let k = key("echo-a", &i.to_string());
            ledger.begun("echo-b", &k).unwrap();
            ledger.accepted("echo-b", &k).unwrap();
        }
        assert_eq!(ledger.fate("echo-b", &key("echo-a", "0")), None);
        assert_eq!(ledger.fate("echo-b", &key("echo-a", "2999")), None);
        assert_eq!(
            ledger.fate("echo-b", &key("echo-a", "3000")),
            Some(Fate::Accepted)
        );
        let lines = std::fs::read_to_string(dir.path().join("echo-b.ids"))
            .unwrap()
            .lines()
            .count();
        assert!(lines <= 2 * KEEP_IDS + 1025, "{lines} lines");
        let again = Ledger::new(dir.path().to_path_buf());
        assert_eq!(
            again.fate("echo-b", &key("echo-a", &(n - 1).to_string())),
            Some(Fate::Accepted)
        );
        assert_eq!(again.fate("echo-b", &key("echo-a", "2999")), None);
    }

    #[test]
    fn old_ids_and_junk_lines_are_dropped_on_reading() {
        let dir = tempfile::tempdir().unwrap();
        let now = crate::clock::now_ms();
        let old = now - KEEP.as_millis() as u64 - 1000;
        std::fs::write(
            dir.path().join("echo-b.ids"),
            format!(
                "{old} accepted echo-a old\n{now} begun echo-a new\njunk\n{now} begun echo-a bad/id\n\
                 {now} weird echo-a x\n"
            ),
        )
        .unwrap();
        let ledger = Ledger::new(dir.path().to_path_buf());
        assert_eq!(ledger.fate("echo-b", &key("echo-a", "old")), None);
        assert_eq!(
            ledger.fate("echo-b", &key("echo-a", "new")),
            Some(Fate::Begun)
        );
    }
}

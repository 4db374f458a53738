//! The durable inbox of a human peer (issue 8 item 3): every message to a peer on the built-in
//! `human` runtime is one JSON line in `<root>/state/iapeer/inbox/<personality>.jsonl`,
//! appended and fsynced before the daemon answers the sender `delivered`. `iapeer inbox`
//! reads it; what has been shown is counted in `<personality>.read` (written atomically).
//!
//! One record (keys in this order, `topic` and `intelligence` omitted when unknown):
//!
//! ```json
//! {"id":"3f9a0c…","received":"2026-07-13T22:23:45.123Z","ts":"2026-07-14T01:23:45+03:00",
//!  "from":"alice","runtime":"echo","intelligence":"artificial","topic":"release",
//!  "body":"the text","attachments":["/root/state/iapeer/attachments/you/<sha>/a.png"]}
//! ```
//!
//! `id` is [`fingerprint`] of the envelope (16 hex digits), `received` the UTC time the record
//! was stored, `ts` the sender's dispatch stamp, attachments the inbox copies (spec 03 §3).

pub mod show;
pub mod writer;

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use fs2::FileExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::envelope::Envelope;
use crate::fsutil::{self, MODE_PRIVATE};
use crate::paths::Paths;

/// One stored message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// [`fingerprint`] of the envelope: 16 hex digits.
    pub id: String,
    /// When the record was stored: UTC, milliseconds (`2026-07-13T22:23:45.123Z`).
    pub received: String,
    /// The sender's dispatch stamp from the envelope (local time, numeric offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<String>,
    /// Sender personality.
    pub from: String,
    /// Sender runtime.
    pub runtime: String,
    /// Sender nature (`artificial`, `natural`, `absent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intelligence: Option<String>,
    /// Thread label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The message text.
    pub body: String,
    /// Inbox copies of the attachments (absolute paths).
    #[serde(default)]
    pub attachments: Vec<String>,
}

impl Record {
    /// The record of `env`, stored at `received` (a log stamp, see [`crate::clock::log_ts`]).
    pub fn from_envelope(env: &Envelope, received: String) -> Record {
        Record {
            id: fingerprint(env),
            received,
            ts: env.ts.clone(),
            from: env.from.clone(),
            runtime: env.runtime.clone(),
            intelligence: env.intelligence.map(|i| i.as_str().to_string()),
            topic: env.topic.clone(),
            body: env.body.clone(),
            attachments: env.attachments.clone(),
        }
    }
}

/// A short digest of everything an envelope says (sender, stamp, topic, attachments, body):
/// the first 16 hex digits of a SHA-256. The inbox writer acknowledges a stored record with
/// it, and the daemon's confirmer computes it from the text it wrote (spec 04 §1 table).
pub fn fingerprint(env: &Envelope) -> String {
    let parts = serde_json::json!([
        env.from,
        env.runtime,
        env.ts,
        env.topic,
        env.attachments,
        env.body
    ]);
    let digest = Sha256::digest(parts.to_string().as_bytes());
    fsutil::hex(&digest[..8])
}

/// The acknowledgement line the writer prints once record `id` is on disk: `stored <id>`.
pub fn ack_line(id: &str) -> String {
    format!("stored {id}")
}

/// The line the writer prints when record `id` could not be stored: `failed <id> <reason>`,
/// the reason on one line (line breaks become spaces).
pub fn failure_line(id: &str, reason: &str) -> String {
    let reason: String = reason
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    format!("failed {id} {reason}")
}

/// The reason of the [`failure_line`] for record `id` in the writer's `output`, if any
/// (pure).
pub fn failure_in(output: &[u8], id: &str) -> Option<String> {
    let prefix = format!("failed {id} ");
    String::from_utf8_lossy(output)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(|r| r.trim().to_string()))
}

/// Append `record` to `path` as one line, under an exclusive lock on the file, with one
/// `O_APPEND` write, then fsync the file (and the folder when the file was new). Creates the
/// folder (0700) and the file (0600).
///
/// The line always starts a line of its own: after a torn last line (a crash mid-write, a
/// full disk) a newline goes first, so the torn line is the only one lost, never the next
/// record. A write that fails part-way is cut back off the file before the error returns.
///
/// Errors: any I/O error (nothing was acknowledged then, and nothing of it stays).
pub fn append(path: &Path, record: &Record) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fsutil::ensure_dir(dir)?;
    let existed = path.exists();
    let mut f = OpenOptions::new()
        .read(true)
        .create(true)
        .append(true)
        .mode(MODE_PRIVATE)
        .open(path)?;
    let mut line = serde_json::to_string(record).map_err(io::Error::other)?;
    line.push('\n');
    f.lock_exclusive()?;
    let result = append_locked(&mut f, &line);
    let _ = FileExt::unlock(&f);
    result?;
    if !existed {
        if let Ok(d) = std::fs::File::open(dir) {
            d.sync_all()?;
        }
    }
    Ok(())
}

/// [`append`]'s write, with the file locked: a newline first when the file ends inside a
/// line, and the file cut back to its old length when the write fails.
fn append_locked(f: &mut std::fs::File, line: &str) -> io::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let len = f.metadata()?.len();
    let mut last = [b'\n'];
    if len > 0 {
        f.read_exact_at(&mut last, len - 1)?;
    }
    let bytes = if last[0] == b'\n' {
        line.to_string()
    } else {
        format!("\n{line}")
    };
    let written = f.write_all(bytes.as_bytes()).and_then(|_| f.sync_data());
    if written.is_err() {
        let _ = f.set_len(len).and_then(|_| f.sync_data());
    }
    written
}

/// Every whole record of an inbox file, oldest first. A missing file is an empty inbox; a
/// line that does not parse (a torn last line after a crash, a hand edit) is skipped, also
/// one cut inside a character: bytes that are not UTF-8 spoil only their own line.
///
/// Errors: the file exists but cannot be read.
pub fn read(path: &Path) -> io::Result<Vec<Record>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(parse_records(&String::from_utf8_lossy(&bytes)))
}

/// The records of inbox text, skipping lines that are not records (pure).
pub fn parse_records(text: &str) -> Vec<Record> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How much of an inbox has been shown: the first `read` records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadMark {
    /// Number of records shown, counted from the start of the file.
    pub read: usize,
}

impl ReadMark {
    /// The read mark of `personality`; missing or unreadable = nothing read.
    pub fn load(paths: &Paths, personality: &str) -> ReadMark {
        fsutil::read_json_or_default(&paths.inbox_read_mark(personality))
    }

    /// Store the mark atomically (temp file, fsync, rename).
    ///
    /// Errors: the file cannot be written.
    pub fn store(self, paths: &Paths, personality: &str) -> io::Result<()> {
        fsutil::write_json_atomic(&paths.inbox_read_mark(personality), &self, MODE_PRIVATE)
    }

    /// Whether record number `index` (0-based) is unread.
    pub fn is_unread(self, index: usize) -> bool {
        index >= self.read
    }

    /// The mark after showing the first `shown` records: it never moves back.
    pub fn after_showing(self, shown: usize) -> ReadMark {
        ReadMark {
            read: self.read.max(shown),
        }
    }
}

#[cfg(test)]
mod tests;

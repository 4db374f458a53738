//! Lifecycle marker files (spec 01 §7, used by spec 05 §2–§4): the daemon's durable memory
//! across its own restarts, one set per identity in `<root>/state/lifecycle/` (folder 0700,
//! files 0600, every write atomic).
//!
//! | file | content |
//! |---|---|
//! | `<id>.session` | [`SessionRecord`] JSON |
//! | `<id>.stopped`, `.idle-reaped`, `.fresh-next`, `.new-eager`, `.ephemeral-armed` | empty flags ([`Flag`]) |
//! | `<id>.deaths` | JSON array of epoch-ms, the last [`DEATHS_KEPT`](lists::DEATHS_KEPT) |
//! | `<id>.topic` | topics, one per line, most recent last, at most [`TOPICS_KEPT`](lists::TOPICS_KEPT) |
//! | `<id>.conversation` | [`ConversationRecord`] JSON: the runtime's id of the conversation those topics belong to (issue 32) |
//! | `<id>.system-prompt.md`, `<id>.queue/` | written by their owners (spec 06, spec 05 §6) |
//!
//! Reading never fails: a corrupt `.session` or `.deaths` reads as none (with a warning), so a
//! damaged marker never stops the daemon.

mod lists;
pub mod queue;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use std::io;
use std::path::PathBuf;

use crate::fsutil;
use crate::names::{Identity, IdentityError};
use crate::paths::Paths;

pub use lists::{crash_looping, note_topic_in, push_death};

/// Suffix of the session record.
pub const SESSION: &str = ".session";
/// Suffix of the death ring.
pub const DEATHS: &str = ".deaths";
/// Suffix of the topic list.
pub const TOPIC: &str = ".topic";
/// Suffix of the conversation record.
pub const CONVERSATION: &str = ".conversation";
/// Suffix of the composed system prompt file.
#[cfg(test)]
pub const SYSTEM_PROMPT: &str = ".system-prompt.md";
/// Suffix of the ephemeral task queue folder.
pub const QUEUE: &str = ".queue";

/// The flag markers: present or absent, no content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flag {
    /// `.stopped`: the operator stopped this identity; never woken until started.
    Stopped,
    /// `.idle-reaped`: the last session ended by idle sleep or daemon shutdown (resumable).
    IdleReaped,
    /// `.fresh-next`: the next wake starts fresh (set by `refresh`).
    FreshNext,
    /// `.new-eager`: the next tick brings a fresh session up without a message.
    NewEager,
    /// `.ephemeral-armed`: an ephemeral worker sent its reply; wind down when quiet.
    EphemeralArmed,
}

impl Flag {
    /// Every flag.
    #[cfg(test)]
    pub const ALL: [Flag; 5] = [
        Flag::Stopped,
        Flag::IdleReaped,
        Flag::FreshNext,
        Flag::NewEager,
        Flag::EphemeralArmed,
    ];

    /// The file suffix, e.g. `.idle-reaped`.
    pub fn suffix(self) -> &'static str {
        match self {
            Flag::Stopped => ".stopped",
            Flag::IdleReaped => ".idle-reaped",
            Flag::FreshNext => ".fresh-next",
            Flag::NewEager => ".new-eager",
            Flag::EphemeralArmed => ".ephemeral-armed",
        }
    }
}

/// `<id>.session`: who was woken, where and when.
///
/// `{"identity":"claude-bob","runtime":"claude","personality":"bob","cwd":"/w/bob",
///   "wokeAt":1752441825000,"pid":4242}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// `<runtime>-<personality>`.
    pub identity: String,
    /// The runtime half.
    pub runtime: String,
    /// The personality half.
    pub personality: String,
    /// The session's working folder.
    pub cwd: PathBuf,
    /// When the wake finished, epoch ms.
    #[serde(rename = "wokeAt")]
    pub woke_at: u64,
    /// The session's child process id.
    pub pid: u32,
}

/// `<id>.conversation`: the runtime's own id of the conversation the topic list belongs to,
/// chosen by iapeer at launch (Claude Code's `--session-id`) or learned from the runtime's
/// records (Codex's session file), so that a resume names it instead of taking the folder's
/// newest conversation (issue 32 item 1).
///
/// `{"id":"3f2c1a5e-1111-4222-8333-444455556666"}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationRecord {
    /// The id as the runtime spells it (a UUID for both Claude Code and Codex, `ses_…` for
    /// OpenCode).
    pub id: String,
}

/// Whether `id` can be a runtime's conversation id: 1 to 64 ASCII letters, digits, dashes
/// and underscores (OpenCode's `ses_…`), starting with a letter or digit (pure). What a launch puts on a command line is
/// never anything else, nor an option.
pub fn valid_conversation_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && id.as_bytes()[0].is_ascii_alphanumeric()
}

/// A marker could not be written or removed.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot {action} lifecycle marker {path}: {source} (check that the iapeer root is writable)"
)]
pub struct MarkerError {
    /// The marker file.
    pub path: PathBuf,
    /// `"write"` or `"remove"`.
    pub action: &'static str,
    /// The underlying error.
    pub source: io::Error,
}

/// The markers of one identity.
#[derive(Debug, Clone)]
pub struct Markers {
    paths: Paths,
    identity: Identity,
}

impl Markers {
    /// The markers of `identity` under `paths`' root.
    pub fn new(paths: &Paths, identity: &Identity) -> Markers {
        Markers {
            paths: paths.clone(),
            identity: identity.clone(),
        }
    }

    /// Like [`Markers::new`] from an identity string such as `claude-bob`.
    ///
    /// Errors: the identity does not parse (so no marker path can escape the folder).
    pub fn parse(paths: &Paths, identity: &str) -> Result<Markers, IdentityError> {
        Ok(Markers::new(paths, &Identity::parse(identity)?))
    }

    /// Whose markers these are.
    #[cfg(test)]
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// `<root>/state/lifecycle/<identity><suffix>`.
    pub fn path(&self, suffix: &str) -> PathBuf {
        self.paths.marker(&self.identity.to_string(), suffix)
    }

    /// `<id>.system-prompt.md`: where the composed system prompt is written (spec 06).
    #[cfg(test)]
    pub fn system_prompt_path(&self) -> PathBuf {
        self.path(SYSTEM_PROMPT)
    }

    /// `<id>.queue/`: the ephemeral task FIFO folder (spec 05 §6).
    pub fn queue_dir(&self) -> PathBuf {
        self.path(QUEUE)
    }

    /// Write `.session` atomically.
    pub fn write_session(&self, record: &SessionRecord) -> Result<(), MarkerError> {
        let path = self.path(SESSION);
        fsutil::write_json_atomic(&path, record, fsutil::MODE_PRIVATE)
            .map_err(|source| write_error(path, source))
    }

    /// The `.session` record; `None` when absent or unreadable (corrupt is logged).
    #[cfg(test)]
    pub fn read_session(&self) -> Option<SessionRecord> {
        self.read_json(SESSION)
    }

    /// Delete `.session` (absent is fine).
    pub fn remove_session(&self) -> Result<(), MarkerError> {
        self.remove(SESSION)
    }

    /// The ephemeral task queue ([`queue::TaskQueue`]) in [`Markers::queue_dir`].
    pub fn task_queue(&self) -> queue::TaskQueue {
        queue::TaskQueue::new(self.queue_dir())
    }

    /// Create the flag marker.
    pub fn set(&self, flag: Flag) -> Result<(), MarkerError> {
        let path = self.path(flag.suffix());
        fsutil::write_atomic(&path, b"", fsutil::MODE_PRIVATE)
            .map_err(|source| write_error(path, source))
    }

    /// Delete the flag marker (absent is fine).
    pub fn clear(&self, flag: Flag) -> Result<(), MarkerError> {
        self.remove(flag.suffix())
    }

    /// True when the flag marker exists.
    pub fn is_set(&self, flag: Flag) -> bool {
        self.path(flag.suffix()).exists()
    }

    /// Consume the flag: delete it and say whether it was set. Of two racing callers only
    /// one sees `true`.
    pub fn take(&self, flag: Flag) -> Result<bool, MarkerError> {
        let path = self.path(flag.suffix());
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(remove_error(path, source)),
        }
    }

    /// The recorded deaths, epoch ms, oldest first; empty when absent or corrupt.
    pub fn deaths(&self) -> Vec<u64> {
        self.read_json(DEATHS).unwrap_or_default()
    }

    /// Append a death at `now_ms` (keeping the last [`DEATHS_KEPT`]) and return the ring.
    pub fn record_death(&self, now_ms: u64) -> Result<Vec<u64>, MarkerError> {
        let mut deaths = self.deaths();
        push_death(&mut deaths, now_ms);
        let path = self.path(DEATHS);
        fsutil::write_json_atomic(&path, &deaths, fsutil::MODE_PRIVATE)
            .map_err(|source| write_error(path, source))?;
        Ok(deaths)
    }

    /// Forget every death (absent is fine).
    pub fn clear_deaths(&self) -> Result<(), MarkerError> {
        self.remove(DEATHS)
    }

    /// The topic list, oldest first (normalized: deduplicated, at most [`TOPICS_KEPT`]).
    pub fn topics(&self) -> Vec<String> {
        let path = self.path(TOPIC);
        let text = fsutil::read_optional(&path).unwrap_or_else(|e| {
            log::warn!("cannot read {}: {e}; treating as empty", path.display());
            None
        });
        let mut topics = Vec::new();
        for line in text.as_deref().unwrap_or("").lines() {
            note_topic_in(&mut topics, line);
        }
        topics
    }

    /// True when `topic` (newlines read as spaces) is in the list; an empty topic never is.
    #[cfg(test)]
    pub fn knows_topic(&self, topic: &str) -> bool {
        let wanted = lists::clean_topic(topic);
        !wanted.is_empty() && self.topics().contains(&wanted)
    }

    /// Note a delivered topic (spec 05 §3): moved to or added at the end, oldest dropped
    /// past [`TOPICS_KEPT`]. Returns whether the list changed (an empty topic never does).
    /// (The daemon notes through its router's topic book, which writes with
    /// [`Markers::write_topics`] once it has caught up.)
    #[cfg(test)]
    pub fn note_topic(&self, topic: &str) -> Result<bool, MarkerError> {
        let mut topics = self.topics();
        if !note_topic_in(&mut topics, topic) {
            return Ok(false);
        }
        self.write_topics(&topics)?;
        Ok(true)
    }

    /// Replace the topic list with `topics` (oldest first, one per line), atomically. No
    /// fsync: a power failure may cost the newest topics, so a later wake starts fresh.
    pub fn write_topics(&self, topics: &[String]) -> Result<(), MarkerError> {
        let text: String = topics.iter().map(|t| format!("{t}\n")).collect();
        let path = self.path(TOPIC);
        fsutil::replace_atomic(&path, text.as_bytes(), fsutil::MODE_PRIVATE)
            .map_err(|source| write_error(path, source))
    }

    /// Empty the topic list (a fresh conversation begins).
    pub fn reset_topics(&self) -> Result<(), MarkerError> {
        self.remove(TOPIC)
    }

    /// The recorded conversation id (`<id>.conversation`); `None` when absent, corrupt or
    /// not a valid id (logged): such a conversation is not resumed by name.
    pub fn conversation(&self) -> Option<String> {
        let record: ConversationRecord = self.read_json(CONVERSATION)?;
        if valid_conversation_id(&record.id) {
            Some(record.id)
        } else {
            log::warn!(
                "{}: {:?} is not a conversation id; ignoring it",
                self.path(CONVERSATION).display(),
                record.id
            );
            None
        }
    }

    /// Record `id` as the conversation of the topic list, atomically.
    pub fn write_conversation(&self, id: &str) -> Result<(), MarkerError> {
        let path = self.path(CONVERSATION);
        let record = ConversationRecord { id: id.to_string() };
        fsutil::write_json_atomic(&path, &record, fsutil::MODE_PRIVATE)
            .map_err(|source| write_error(path, source))
    }

    /// Forget the recorded conversation (absent is fine).
    pub fn clear_conversation(&self) -> Result<(), MarkerError> {
        self.remove(CONVERSATION)
    }

    /// The markers that carry an identity's memory over a rename (`rename`): the topics and
    /// their conversation, the resume, stop and fresh-next flags, and the death ring.
    pub const CARRIED_ON_RENAME: [&'static str; 6] = [
        TOPIC,
        CONVERSATION,
        ".idle-reaped",
        ".stopped",
        ".fresh-next",
        DEATHS,
    ];

    /// Move the markers of [`Markers::CARRIED_ON_RENAME`] to identity `to` (replacing its own),
    /// so a renamed peer resumes its conversation; the other markers stay for
    /// [`Markers::remove_all`].
    ///
    /// Errors: the first file that could not be moved (the others are still tried).
    pub fn carry_to(&self, to: &Identity) -> Result<(), MarkerError> {
        let target = Markers::new(&self.paths, to);
        let mut first_error = None;
        for suffix in Markers::CARRIED_ON_RENAME {
            let from = self.path(suffix);
            if !from.exists() {
                continue;
            }
            if let Err(source) = std::fs::rename(&from, target.path(suffix)) {
                first_error.get_or_insert(MarkerError {
                    path: from,
                    action: "move",
                    source,
                });
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Delete every marker of this identity, including the system prompt, the queue folder
    /// and leftover temp files (used by `iapeer remove`). Returns how many entries were
    /// removed. Errors: the first entry that could not be removed (the others still are).
    pub fn remove_all(&self) -> Result<usize, MarkerError> {
        let dir = self.paths.lifecycle_dir();
        let id = self.identity.to_string();
        let (mine, temp) = (format!("{id}."), format!(".{id}."));
        let mut removed = 0;
        let mut first_error = None;
        for name in lists::dir_names(&dir) {
            if !name.starts_with(&mine) && !name.starts_with(&temp) {
                continue;
            }
            let path = dir.join(&name);
            let result = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                fsutil::remove_if_exists(&path)
            };
            match result {
                Ok(()) => removed += 1,
                Err(source) => {
                    first_error.get_or_insert(remove_error(path, source));
                }
            }
        }
        first_error.map_or(Ok(removed), Err)
    }

    fn remove(&self, suffix: &str) -> Result<(), MarkerError> {
        let path = self.path(suffix);
        fsutil::remove_if_exists(&path).map_err(|source| remove_error(path, source))
    }

    /// Read a JSON marker; absent → `None`, unreadable or corrupt → `None` with a warning.
    fn read_json<T: serde::de::DeserializeOwned>(&self, suffix: &str) -> Option<T> {
        let path = self.path(suffix);
        let text = match fsutil::read_optional(&path) {
            Ok(text) => text?,
            Err(e) => {
                log::warn!("cannot read {}: {e}; ignoring it", path.display());
                return None;
            }
        };
        serde_json::from_str(&text)
            .map_err(|e| log::warn!("corrupt marker {} ({e}); ignoring it", path.display()))
            .ok()
    }
}

/// Every identity that has a marker with `suffix` (e.g. `Flag::Stopped.suffix()`,
/// [`SESSION`]), sorted. Names that are not valid identities are skipped; a missing folder
/// gives an empty list.
pub fn identities_with(paths: &Paths, suffix: &str) -> Vec<Identity> {
    let mut ids: Vec<Identity> = lists::dir_names(&paths.lifecycle_dir())
        .iter()
        .filter(|n| !n.starts_with('.'))
        .filter_map(|n| n.strip_suffix(suffix))
        .filter_map(|id| Identity::parse(id).ok().filter(|i| i.to_string() == id))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

fn write_error(path: PathBuf, source: io::Error) -> MarkerError {
    MarkerError {
        path,
        action: "write",
        source,
    }
}

fn remove_error(path: PathBuf, source: io::Error) -> MarkerError {
    MarkerError {
        path,
        action: "remove",
        source,
    }
}

//! logfmt event logs with rotation (spec 11 §1): `lifecycle.log`, `delivery.log`, `exits.log`.
//!
//! One event per line, `ts=<UTC ms Z>` first, then the event's fields in the order they were
//! added. Writers in several processes may share a log: rotation happens under an `fs2` lock
//! on `<log>.lock`, and each line is one `O_APPEND` write. A writer keeps both files open
//! between lines and opens the log again when its path names another file (rotated by
//! another writer, or removed).

use crate::clock;
use crate::config::vars::{DEFAULT_KEEP, DEFAULT_MAX_BYTES};
use crate::fsutil::{self, MODE_PRIVATE};
use fs2::FileExt;
use std::borrow::Cow;
use std::fmt::Display;
use std::fmt::Write as _;
use std::fs::File;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One event: `ev=<name>` followed by `key=value` fields in the order added.
///
/// ```
/// # use iapeer::eventlog::{Event, format_line};
/// let ev = Event::new("delivery").field("caller", "claude-bob").opt("rt", None::<&str>);
/// assert_eq!(format_line("T", &ev), "ts=T ev=delivery caller=claude-bob");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    fields: Vec<(String, String)>,
}

impl Event {
    /// A new event whose first field is `ev=<name>`.
    pub fn new(name: &str) -> Event {
        Event {
            fields: vec![("ev".to_string(), name.to_string())],
        }
    }

    /// Append `key=value` (the value is formatted with `Display`).
    pub fn field(mut self, key: &str, value: impl Display) -> Event {
        self.fields.push((key.to_string(), value.to_string()));
        self
    }

    /// Append `key=value` only when `value` is `Some` (absent fields are omitted).
    pub fn opt<V: Display>(self, key: &str, value: Option<V>) -> Event {
        match value {
            Some(v) => self.field(key, v),
            None => self,
        }
    }

    /// The fields in order, `ev` first.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }
}

/// Quote one logfmt value (spec 11 §1): empty → `""`; a value with whitespace, `"`, `=` or a
/// control character → double-quoted with `\` → `\\`, `"` → `\"`, newline → `\n`; else bare.
/// Beyond the spec, every other character that would act on a terminal showing the file
/// (`tail -f`: ESC, CR, a C1 control, DEL, a bidi control, U+2028/U+2029; TAB excepted) is
/// written `\uXXXX`, so a peer's topic cannot drive the operator's terminal through a log
/// (issue 26 follow-up); [`parse_line`] gives the value back exactly.
pub fn quote_value(value: &str) -> Cow<'_, str> {
    quote(value, true)
}

/// [`quote_value`] for a reader's view (`iapeer logs`): the characters it would escape as
/// `\uXXXX` are left as they are, for `crate::visible::line` to show as stand-ins.
pub fn quote_shown(value: &str) -> Cow<'_, str> {
    quote(value, false)
}

fn quote(value: &str, escape_acting: bool) -> Cow<'_, str> {
    if value.is_empty() {
        return Cow::Borrowed("\"\"");
    }
    let needs = value.chars().any(|c| {
        c.is_whitespace() || c == '"' || c == '=' || c.is_control() || crate::visible::acts(c)
    });
    if !needs {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push('\t'),
            c if escape_acting && crate::visible::acts(c) => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

/// One log line without its newline: `ts=<ts>` then the event's fields, values quoted by
/// [`quote_value`].
pub fn format_line(ts: &str, event: &Event) -> String {
    let mut line = format!("ts={}", quote_value(ts));
    for (key, value) in &event.fields {
        line.push(' ');
        line.push_str(key);
        line.push('=');
        line.push_str(&quote_value(value));
    }
    line
}

/// What a `\uXXXX` escape whose `\u` was just read stands for: the character of the four hex
/// digits taken from `chars`; anything else is kept as written (`u` and the digits read).
fn unescape_u(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    let mut hex = String::new();
    while hex.len() < 4 {
        match chars.peek() {
            Some(c) if c.is_ascii_hexdigit() => {
                hex.push(*c);
                chars.next();
            }
            _ => break,
        }
    }
    u32::from_str_radix(&hex, 16)
        .ok()
        .filter(|_| hex.len() == 4)
        .and_then(char::from_u32)
        .map_or_else(|| format!("u{hex}"), String::from)
}

/// Parse one logfmt line back into `(key, value)` pairs, undoing [`quote_value`]. Used by
/// readers of the event logs (the demo, tests). A malformed tail is skipped.
pub fn parse_line(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = line.trim_end_matches('\n').chars().peekable();
    loop {
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            return out;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('n') => value.push('\n'),
                        Some('u') => value.push_str(&unescape_u(&mut chars)),
                        Some(other) => value.push(other),
                        None => break,
                    },
                    c => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ' ' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key, value));
    }
}

/// Parse a size or count setting: `Some(n)` for a positive integer, `None` for missing, junk,
/// zero or negative text (the caller then uses its default).
pub fn positive_setting(raw: Option<&str>) -> Option<u64> {
    raw.and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|n| *n > 0)
}

/// Why a line could not be appended.
#[derive(Debug, thiserror::Error)]
#[error("cannot append to event log {path}: {source}")]
pub struct EventLogError {
    path: PathBuf,
    source: io::Error,
}

/// An append-only logfmt file with size-based rotation. Clones share the open descriptors.
#[derive(Debug, Clone)]
pub struct EventLog {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    /// The lock file and the log, kept open between lines (opening both for every line was
    /// most of the router thread's work in a burst of sends, issue 13 item 3).
    open: Arc<Mutex<Option<Open>>>,
}

impl PartialEq for EventLog {
    fn eq(&self, other: &EventLog) -> bool {
        (&self.path, self.max_bytes, self.keep) == (&other.path, other.max_bytes, other.keep)
    }
}

impl Eq for EventLog {}

/// The descriptors of an [`EventLog`] between lines.
#[derive(Debug)]
struct Open {
    lock: File,
    /// The log as opened (append), and its (device, inode): when the path names another
    /// file (rotated by another writer, or deleted), it is opened again.
    log: Option<(File, (u64, u64))>,
}

impl EventLog {
    /// A log at `path` rotated past `max_bytes` bytes keeping `keep` copies; zero values mean
    /// the defaults (5 MiB, 5).
    pub fn new(path: impl Into<PathBuf>, max_bytes: u64, keep: u32) -> EventLog {
        EventLog {
            path: path.into(),
            max_bytes: if max_bytes == 0 {
                DEFAULT_MAX_BYTES
            } else {
                max_bytes
            },
            keep: if keep == 0 { DEFAULT_KEEP } else { keep },
            open: Arc::default(),
        }
    }

    /// A log at `path` whose limits come from `IAPEER_<NAME>_LOG_MAX_BYTES` and
    /// `IAPEER_<NAME>_LOG_KEEP` (`name` = `LIFECYCLE`, `DELIVERY` or `EXITS`; their rows and
    /// defaults are in `config::vars`). Junk or non-positive values fall back to the
    /// defaults with one `log::warn!` line.
    pub fn from_env(path: impl Into<PathBuf>, name: &str) -> EventLog {
        let limits = crate::config::vars::event_log_limits(name);
        let read = |suffix: &str, row: Option<&crate::config::vars::EnvVar>, fallback: u64| {
            let var = format!("IAPEER_{name}_LOG_{suffix}");
            let default = row.map_or(fallback, |r| r.default_u64());
            let raw = std::env::var(&var).ok();
            match (raw.as_deref(), positive_setting(raw.as_deref())) {
                (_, Some(n)) => n,
                (None, None) => default,
                (Some(bad), None) => {
                    log::warn!("{var}={bad:?} is not a positive integer; using {default}");
                    default
                }
            }
        };
        let max = read("MAX_BYTES", limits.map(|l| l.0), DEFAULT_MAX_BYTES);
        let keep = read("KEEP", limits.map(|l| l.1), u64::from(DEFAULT_KEEP));
        EventLog::new(path, max, u32::try_from(keep).unwrap_or(u32::MAX))
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The size limit in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// How many rotated copies are kept.
    pub fn keep(&self) -> u32 {
        self.keep
    }

    /// Append `event` stamped with the current UTC time. Never fails the caller: an error is
    /// reported with `log::warn!` and the event is dropped.
    pub fn append(&self, event: &Event) {
        self.append_stamped(event);
    }

    /// [`EventLog::append`], returning the stamp it wrote (`ts=`, UTC with ms).
    pub fn append_stamped(&self, event: &Event) -> String {
        self.append_ts(event, jiff::Timestamp::now())
    }

    /// [`EventLog::append`] stamped `at_ms` (epoch ms) instead of now: an event that
    /// happened before its line could be written (a delivery taken by the runtime before
    /// its evidence was read, issue 31 item 2). A time out of range is stamped now.
    pub fn append_at(&self, event: &Event, at_ms: u64) {
        self.append_stamped_at(event, at_ms);
    }

    /// [`EventLog::append_at`], returning the stamp it wrote.
    pub fn append_stamped_at(&self, event: &Event, at_ms: u64) -> String {
        let at = i64::try_from(at_ms)
            .ok()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .unwrap_or_else(jiff::Timestamp::now);
        self.append_ts(event, at)
    }

    fn append_ts(&self, event: &Event, at: jiff::Timestamp) -> String {
        let ts = clock::log_ts(at);
        if let Err(e) = self.append_line(&format_line(&ts, event)) {
            log::warn!("{e}");
        }
        ts
    }

    /// Append one already formatted line (a newline is added). Under the lock `<log>.lock`:
    /// rotate when the file is non-empty and `size + len > max`, then one `O_APPEND` write.
    /// The parent folder is created (0700), the file is 0600.
    ///
    /// Errors: any I/O error on the folder, the lock, the rotation or the write.
    pub fn append_line(&self, line: &str) -> Result<(), EventLogError> {
        let err = |source| EventLogError {
            path: self.path.clone(),
            source,
        };
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');

        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let result = self.write_locked(&mut open, &bytes);
        if !matches!(result, Ok(true)) {
            // Start over from the paths next time: an error (a full disk, …), or the lock
            // file is gone (its folder was removed) and other writers lock a new one.
            *open = None;
        }
        result.map(|_| ()).map_err(err)
    }

    /// [`EventLog::append_line`]'s work with the descriptors in `open` (opened as needed).
    /// Returns whether the descriptors may be kept for the next line.
    fn write_locked(&self, open: &mut Option<Open>, bytes: &[u8]) -> io::Result<bool> {
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty());
        if open.is_none() {
            if let Some(dir) = dir {
                fsutil::ensure_dir(dir)?;
            }
            let lock = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(MODE_PRIVATE)
                .open(self.numbered("lock"))?;
            *open = Some(Open { lock, log: None });
        }
        let Some(o) = open.as_mut() else {
            return Ok(false);
        };
        // The write is under the lock too, so the size check stays exact with several
        // writers (other processes share the log).
        o.lock.lock_exclusive()?;
        let written = (|| {
            let current = match fs::metadata(&self.path) {
                Ok(m) => Some(m),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            };
            let size = current.as_ref().map_or(0, |m| m.len());
            let mut id = current.as_ref().map(|m| (m.dev(), m.ino()));
            let mut keep = true;
            if current.is_none() {
                // Rotated away by another writer, or its folder removed.
                if let Some(dir) = dir {
                    fsutil::ensure_dir(dir)?;
                }
                keep = self.numbered("lock").exists();
            }
            if size > 0 && size + bytes.len() as u64 > self.max_bytes {
                self.rotate()?;
                id = None;
            }
            if o.log.as_ref().map(|(_, at)| *at) != id || id.is_none() {
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(MODE_PRIVATE)
                    .open(&self.path)?;
                let m = file.metadata()?;
                o.log = Some((file, (m.dev(), m.ino())));
            }
            if let Some((file, _)) = o.log.as_mut() {
                file.write_all(bytes)?;
            }
            Ok(keep)
        })();
        let unlocked = FileExt::unlock(&o.lock);
        let keep = written?;
        unlocked.map(|()| keep)
    }

    /// Delete `<log>.<keep>`, shift `<log>.<i>` → `<log>.<i+1>`, rename `<log>` → `<log>.1`.
    fn rotate(&self) -> io::Result<()> {
        fsutil::remove_if_exists(&self.numbered(&self.keep.to_string()))?;
        for i in (1..self.keep).rev() {
            match fs::rename(
                self.numbered(&i.to_string()),
                self.numbered(&(i + 1).to_string()),
            ) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        fs::rename(&self.path, self.numbered("1"))
    }

    /// `<log>.<suffix>`.
    fn numbered(&self, suffix: &str) -> PathBuf {
        let mut s = self.path.as_os_str().to_owned();
        s.push(".");
        s.push(suffix);
        PathBuf::from(s)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse_line_inverts_format_line() {
        let ev = Event::new("delivery")
            .field("caller", "echo-a")
            .field("err", "peer \"x\" said = no\nreally")
            .field("empty", "")
            .field("path", "a\\b")
            .field(
                "topic",
                "T\u{1b}]52;c;ZXZpbA==\u{7}\r\u{9b}\u{202e}\u{2028}\u{0}\t\\u0041",
            );
        let line = format_line("2026-01-01T00:00:00.000Z", &ev);
        assert!(
            !line.chars().any(|c| crate::visible::acts(c) && c != '\t'),
            "raw controls in {line:?}"
        );
        let parsed = parse_line(&line);
        let want: Vec<(String, String)> =
            std::iter::once(("ts".to_string(), "2026-01-01T00:00:00.000Z".to_string()))
                .chain(ev.fields().iter().cloned())
                .collect();
        assert_eq!(parsed, want);
    }

    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn quoting_table() {
        let cases = [
            ("", "\"\""),
            ("plain", "plain"),
            ("claude-bob", "claude-bob"),
            ("a\\b", "a\\b"),
            ("two words", "\"two words\""),
            ("tab\there", "\"tab\there\""),
            ("k=v", "\"k=v\""),
            ("say \"hi\"", "\"say \\\"hi\\\"\""),
            ("line\nnext", "\"line\\nnext\""),
            ("back\\slash and space", "\"back\\\\slash and space\""),
            // What would act on a terminal showing the file is escaped (issue 26 follow-up).
            ("bell\u{7}", "\"bell\\u0007\""),
            ("cr\r", "\"cr\\u000d\""),
            (
                "osc\u{1b}]52;c;eA==\u{7}",
                "\"osc\\u001b]52;c;eA==\\u0007\"",
            ),
            ("c1\u{9b}2J", "\"c1\\u009b2J\""),
            ("rlo\u{202e}x", "\"rlo\\u202ex\""),
            ("del\u{7f}", "\"del\\u007f\""),
            ("héllo", "héllo"),
            ("nbsp\u{a0}x", "\"nbsp\u{a0}x\""),
        ];
        for (raw, want) in cases {
            assert_eq!(quote_value(raw), want, "quote_value({raw:?})");
        }
    }

    #[test]
    fn line_has_ts_first_and_fields_in_order() {
        let ev = Event::new("delivery")
            .field("path", "mcp")
            .field("caller", "claude-bob")
            .field("to", "alice")
            .opt("rt", None::<&str>)
            .field("ok", false)
            .opt("woke", Some(true))
            .field("ms", 12)
            .opt("err", Some("peer \"x\" is not in the index"));
        assert_eq!(
            format_line("2026-07-13T22:23:45.123Z", &ev),
            "ts=2026-07-13T22:23:45.123Z ev=delivery path=mcp caller=claude-bob to=alice \
ok=false woke=true ms=12 err=\"peer \\\"x\\\" is not in the index\""
        );
    }

    #[test]
    fn settings_fall_back_on_junk() {
        assert_eq!(positive_setting(Some("1024")), Some(1024));
        assert_eq!(positive_setting(Some(" 7 ")), Some(7));
        for bad in ["0", "-5", "5MB", "", "1.5"] {
            assert_eq!(positive_setting(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(positive_setting(None), None);
        std::env::set_var("IAPEER_UNITTESTA_LOG_MAX_BYTES", "4096");
        std::env::set_var("IAPEER_UNITTESTA_LOG_KEEP", "junk");
        let log = EventLog::from_env("/x/a.log", "UNITTESTA");
        assert_eq!((log.max_bytes(), log.keep()), (4096, DEFAULT_KEEP));
        let log = EventLog::from_env("/x/a.log", "UNITTESTB");
        assert_eq!(
            (log.max_bytes(), log.keep()),
            (DEFAULT_MAX_BYTES, DEFAULT_KEEP)
        );
    }

    fn read(p: &Path) -> String {
        fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn rotation_shifts_copies_and_drops_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/iapeer/delivery.log");
        let log = EventLog::new(&path, 100, 3);
        // Each line is 40 bytes with its newline: two fit under 100, the third rotates.
        let line = |i: usize| format!("n={i:02} {}", "x".repeat(34));
        for i in 1..=9 {
            log.append_line(&line(i)).unwrap();
        }
        let two = |a: usize, b: usize| format!("{}\n{}\n", line(a), line(b));
        assert_eq!(read(&path), format!("{}\n", line(9)));
        assert_eq!(read(&log.numbered("1")), two(7, 8));
        assert_eq!(read(&log.numbered("2")), two(5, 6));
        assert_eq!(read(&log.numbered("3")), two(3, 4));
        assert!(!log.numbered("4").exists());

        use crate::testkit::mode_of as mode;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    #[test]
    fn a_log_removed_between_lines_is_made_again_with_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/lifecycle.log");
        let log = EventLog::new(&path, 0, 0);
        log.append_line("one").unwrap();
        fs::remove_file(&path).unwrap();
        log.append_line("two").unwrap();
        assert_eq!(read(&path), "two\n", "not written to the removed file");
        fs::remove_dir_all(dir.path().join("logs")).unwrap();
        log.append_line("three").unwrap();
        assert_eq!(read(&path), "three\n");
        log.append_line("four").unwrap();
        assert_eq!(read(&path), "three\nfour\n");
        assert!(
            log.numbered("lock").exists(),
            "the lock file is made again too"
        );
    }

    #[test]
    fn append_stamps_utc_millis() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::new(dir.path().join("exits.log"), 0, 0);
        log.append(&Event::new("session-exit").field("identity", "echo-bob"));
        let text = read(log.path());
        let (ts, rest) = text.split_once(' ').unwrap();
        assert_eq!(rest, "ev=session-exit identity=echo-bob\n");
        let ts = ts.strip_prefix("ts=").unwrap();
        assert!(
            ts.ends_with('Z') && ts.len() == "2026-07-13T22:23:45.123Z".len(),
            "{ts}"
        );
        assert!(ts.parse::<jiff::Timestamp>().is_ok());
    }

    /// An event that happened before its line is written keeps its own moment.
    #[test]
    fn append_at_stamps_the_given_moment() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::new(dir.path().join("delivery.log"), 0, 0);
        let at: jiff::Timestamp = "2026-07-13T22:23:45.123Z".parse().unwrap();
        log.append_at(&Event::new("delivery"), at.as_millisecond() as u64);
        log.append_at(&Event::new("delivery"), u64::MAX);
        let text = read(log.path());
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("ts=2026-07-13T22:23:45.123Z ev=delivery")
        );
        let now = lines.next().unwrap();
        assert!(
            !now.starts_with("ts=2026-07-13"),
            "out of range: stamped now: {now}"
        );
    }

    #[test]
    fn append_never_fails_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, "x").unwrap();
        // The parent "folder" is a file: the append fails, is logged, and returns.
        let log = EventLog::new(blocker.join("x.log"), 0, 0);
        log.append(&Event::new("t"));
        assert!(log.append_line("x").is_err());
    }

    #[test]
    fn concurrent_writers_with_rotation_write_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lifecycle.log");
        let (threads, per) = (4, 150);
        let max = 2000;
        std::thread::scope(|s| {
            for t in 0..threads {
                let path = &path;
                s.spawn(move || {
                    // Each writer has its own EventLog (like separate processes).
                    let log = EventLog::new(path, max, 200);
                    for n in 0..per {
                        let ev = Event::new("t")
                            .field("w", t)
                            .field("n", n)
                            .field("pad", "y".repeat(n % 40));
                        log.append_line(&format_line("T", &ev)).unwrap();
                    }
                });
            }
        });
        let log = EventLog::new(&path, max, 200);
        let mut seen = BTreeSet::new();
        let mut files = vec![path.clone()];
        files.extend(
            (1..=200)
                .map(|i| log.numbered(&i.to_string()))
                .filter(|p| p.exists()),
        );
        assert!(
            files.len() > 5,
            "expected several rotations, got {}",
            files.len()
        );
        for f in &files {
            let text = read(f);
            assert!(
                text.len() as u64 <= max,
                "{} is {} bytes",
                f.display(),
                text.len()
            );
            assert!(text.ends_with('\n'));
            for l in text.lines() {
                let parts: Vec<&str> = l.split(' ').collect();
                assert_eq!(parts.len(), 5, "torn line {l:?}");
                let w: usize = parts[2].strip_prefix("w=").unwrap().parse().unwrap();
                let n: usize = parts[3].strip_prefix("n=").unwrap().parse().unwrap();
                let want = format_line(
                    "T",
                    &Event::new("t")
                        .field("w", w)
                        .field("n", n)
                        .field("pad", "y".repeat(n % 40)),
                );
                assert_eq!(l, want);
                assert!(seen.insert((w, n)), "duplicate line {l:?}");
            }
        }
        assert_eq!(seen.len(), threads * per);
    }
}

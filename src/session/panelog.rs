//! The pane log `logs/lifecycle/<identity>.log` (spec 04 §1, spec 11 §2): raw output of an
//! identity's sessions, appended for the session's whole life. The file is re-opened when it
//! was deleted.
//!
//! Rotation (spec 11 §2) is done by the writer itself, as soon as an append takes the file
//! past [`PaneLimits::max_bytes`]: the last `max_bytes` are copied to `<log>.1` (older copies
//! shift up to [`PaneLimits::keep`]) and the file is truncated in place to its last
//! [`TAIL_BYTES`], so the fd keeps working and the newest output stays in the base file. The
//! spec rotates on the supervise tick; doing it at append time keeps the bound under a flood
//! between ticks and leaves no window where another thread's copy misses bytes. The folder
//! budget ([`enforce_budget`]) runs on the tick.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::config::vars;

/// How often the writer checks that its file is still the one at the path.
const RECHECK: Duration = Duration::from_secs(2);

/// What a rotated base file keeps: its last 8 MiB.
pub const TAIL_BYTES: u64 = 8 * 1024 * 1024;

/// The smallest rotation size: more than [`TAIL_BYTES`], so a rotation always shrinks the file.
pub const MIN_MAX_BYTES: u64 = 9 * 1024 * 1024;

/// The pane-log limits (spec 11 §2; `IAPEER_PANELOG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaneLimits {
    /// Rotate when the base file is larger than this many bytes (at least [`MIN_MAX_BYTES`]).
    pub max_bytes: u64,
    /// Rotated copies kept per pane log (`<log>.1` … `<log>.<keep>`).
    pub keep: u32,
    /// Pane logs and copies untouched this long are deleted by [`enforce_budget`].
    pub stale: Duration,
    /// The folder's size bound in bytes: oldest copies go first.
    pub dir_budget: u64,
}

impl PaneLimits {
    /// The limits from the environment; junk values fall back to the default with a warning
    /// in the daemon log, and `max_bytes` is raised to [`MIN_MAX_BYTES`].
    pub fn from_env() -> PaneLimits {
        let mut warnings = Vec::new();
        let mut read =
            |v: &vars::EnvVar| v.parse_u64(std::env::var(v.name).ok().as_deref(), &mut warnings);
        let limits = PaneLimits {
            max_bytes: read(&vars::IAPEER_PANELOG_MAX_BYTES).max(MIN_MAX_BYTES),
            keep: u32::try_from(read(&vars::IAPEER_PANELOG_KEEP)).unwrap_or(u32::MAX),
            stale: Duration::from_secs(
                read(&vars::IAPEER_PANELOG_STALE_DAYS).saturating_mul(86_400),
            ),
            dir_budget: read(&vars::IAPEER_PANELOG_DIR_BUDGET),
        };
        for w in warnings {
            log::warn!("{w}");
        }
        limits
    }
}

impl PaneLimits {
    /// [`PaneLimits::from_env`], read once per process (so a junk value warns once).
    pub fn current() -> PaneLimits {
        static LIMITS: std::sync::OnceLock<PaneLimits> = std::sync::OnceLock::new();
        *LIMITS.get_or_init(PaneLimits::from_env)
    }
}

impl Default for PaneLimits {
    fn default() -> Self {
        PaneLimits {
            max_bytes: vars::IAPEER_PANELOG_MAX_BYTES.default_u64(),
            keep: vars::IAPEER_PANELOG_KEEP.default_u64() as u32,
            stale: Duration::from_secs(vars::IAPEER_PANELOG_STALE_DAYS.default_u64() * 86_400),
            dir_budget: vars::IAPEER_PANELOG_DIR_BUDGET.default_u64(),
        }
    }
}

/// `<log>.<n>`: the n-th rotated copy.
pub fn copy_path(log: &Path, n: u32) -> PathBuf {
    let mut s = log.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// An append-only writer that survives deletion of its file.
pub struct PaneLog {
    path: PathBuf,
    file: Option<File>,
    checked: Instant,
    limits: PaneLimits,
    /// The size of the open file as this writer knows it.
    size: u64,
}

impl PaneLog {
    /// A writer for `path` with the limits of the environment (opened lazily; the parent
    /// folder is created 0700).
    pub fn new(path: PathBuf) -> PaneLog {
        PaneLog::with_limits(path, PaneLimits::current())
    }

    /// A writer for `path` with the given limits.
    pub fn with_limits(path: PathBuf, limits: PaneLimits) -> PaneLog {
        PaneLog {
            path,
            file: None,
            checked: Instant::now(),
            limits,
            size: 0,
        }
    }

    /// Append `bytes`. Failures are logged once per re-open attempt and never propagate:
    /// a pane log problem must not disturb the session.
    pub fn append(&mut self, bytes: &[u8]) {
        if self.checked.elapsed() >= RECHECK {
            self.checked = Instant::now();
            if !self.same_file() {
                self.file = None;
            }
        }
        if self.file.is_none() {
            self.file = self.open();
            self.size = self
                .file
                .as_ref()
                .and_then(|f| f.metadata().ok())
                .map_or(0, |m| m.len());
        }
        if let Some(f) = self.file.as_mut() {
            if let Err(e) = f.write_all(bytes) {
                log::warn!("pane log {}: {e}", self.path.display());
                self.file = None;
                return;
            }
            self.size += bytes.len() as u64;
        }
        if self.size > self.limits.max_bytes {
            if let Err(e) = self.rotate() {
                log::warn!("cannot rotate pane log {}: {e}", self.path.display());
                // Try again only after another max_bytes, not on every append.
                self.size = 0;
            }
        }
    }

    /// Close the file until the next [`PaneLog::append`] opens it again (a quiet session
    /// holds no descriptor for its pane log: issue 31 item 4). Nothing is lost: every
    /// append was written through.
    pub fn close(&mut self) {
        self.file = None;
    }

    /// Whether the file is open.
    #[cfg(test)]
    fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Copy the last `max_bytes` to `<log>.1` (shifting older copies), then truncate the file
    /// in place to its last [`TAIL_BYTES`].
    fn rotate(&mut self) -> std::io::Result<()> {
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let len = f.metadata()?.len();
        let last = |f: &mut File, n: u64| -> std::io::Result<Vec<u8>> {
            let mut r = f.try_clone()?;
            r.seek(SeekFrom::Start(len.saturating_sub(n)))?;
            let mut buf = Vec::new();
            r.take(n).read_to_end(&mut buf)?;
            Ok(buf)
        };
        let keep = self.limits.keep.max(1);
        let _ = std::fs::remove_file(copy_path(&self.path, keep));
        for i in (1..keep).rev() {
            let from = copy_path(&self.path, i);
            if from.exists() {
                std::fs::rename(&from, copy_path(&self.path, i + 1))?;
            }
        }
        let copy = last(f, self.limits.max_bytes)?;
        crate::fsutil::write_atomic(
            &copy_path(&self.path, 1),
            &copy,
            crate::fsutil::MODE_PRIVATE,
        )?;
        let tail = last(f, TAIL_BYTES)?;
        f.set_len(0)?;
        // O_APPEND: the write lands at the new end, offset 0.
        f.write_all(&tail)?;
        self.size = tail.len() as u64;
        Ok(())
    }

    fn same_file(&self) -> bool {
        let (Some(f), Ok(on_disk)) = (self.file.as_ref(), std::fs::metadata(&self.path)) else {
            return false;
        };
        f.metadata()
            .map(|m| m.ino() == on_disk.ino() && m.dev() == on_disk.dev())
            .unwrap_or(false)
    }

    fn open(&self) -> Option<File> {
        if let Some(dir) = self.path.parent() {
            let _ = crate::fsutil::ensure_dir(dir);
        }
        // Readable too: rotation copies the file's tail through this fd.
        match OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .mode(crate::fsutil::MODE_PRIVATE)
            .open(&self.path)
        {
            Ok(f) => Some(f),
            Err(e) => {
                log::warn!("cannot open pane log {}: {e}", self.path.display());
                None
            }
        }
    }
}

/// One file of the pane-log folder, as the budget sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// File name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification.
    pub modified: SystemTime,
}

/// Whether `name` is one of the files the budget may touch: `*.log` or `*.log.<n>`; the
/// second value says whether it is a rotated copy (pure).
pub fn classify(name: &str) -> Option<bool> {
    if name.ends_with(".log") {
        return Some(false);
    }
    let (stem, n) = name.rsplit_once('.')?;
    (stem.ends_with(".log") && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then_some(true)
}

/// Which files of the folder to delete (pure): every pane log or copy untouched for
/// `limits.stale`, then the oldest copies while the rest is over `limits.dir_budget`. Other
/// files are neither deleted nor counted.
pub fn budget_plan(files: &[LogFile], limits: &PaneLimits, now: SystemTime) -> Vec<String> {
    let mut delete = Vec::new();
    let mut kept: Vec<(&LogFile, bool)> = Vec::new();
    for f in files {
        let Some(is_copy) = classify(&f.name) else {
            continue;
        };
        let age = now.duration_since(f.modified).unwrap_or_default();
        if age >= limits.stale {
            delete.push(f.name.clone());
        } else {
            kept.push((f, is_copy));
        }
    }
    let mut total: u64 = kept.iter().map(|(f, _)| f.size).sum();
    let mut copies: Vec<&LogFile> = kept.iter().filter(|(_, c)| *c).map(|(f, _)| *f).collect();
    copies.sort_by_key(|f| f.modified);
    for f in copies {
        if total <= limits.dir_budget {
            break;
        }
        total -= f.size;
        delete.push(f.name.clone());
    }
    delete
}

/// Apply [`budget_plan`] to the pane-log folder `dir`; returns the names deleted. Errors
/// reading the folder or deleting a file are logged, never returned.
pub fn enforce_budget(dir: &Path, limits: &PaneLimits) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let files: Vec<LogFile> = entries
        .flatten()
        .filter_map(|e| {
            let m = e.metadata().ok().filter(|m| m.is_file())?;
            Some(LogFile {
                name: e.file_name().to_str()?.to_string(),
                size: m.len(),
                modified: m.modified().ok()?,
            })
        })
        .collect();
    let plan = budget_plan(&files, limits, SystemTime::now());
    let mut deleted = Vec::new();
    for name in plan {
        match std::fs::remove_file(dir.join(&name)) {
            Ok(()) => deleted.push(name),
            Err(e) => log::warn!("pane-log budget: cannot delete {name}: {e}"),
        }
    }
    deleted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(max: u64, keep: u32) -> PaneLimits {
        PaneLimits {
            max_bytes: max,
            keep,
            ..PaneLimits::default()
        }
    }

    #[test]
    fn rotation_bounds_the_file_and_keeps_the_newest_output() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("echo-a.log");
        let max = MIN_MAX_BYTES;
        let mut log = PaneLog::with_limits(p.clone(), small(max, 2));
        let chunk = vec![b'x'; 64 * 1024];
        let mut written = 0u64;
        let mut n = 0u32;
        while written < 4 * max {
            log.append(&chunk);
            n += 1;
            let mark = format!("<{n}>");
            log.append(mark.as_bytes());
            written += chunk.len() as u64 + mark.len() as u64;
            let size = std::fs::metadata(&p).unwrap().len();
            assert!(
                size <= max + chunk.len() as u64 + 16,
                "{size} tracked {} after {n}",
                log.size
            );
        }
        let base = std::fs::read(&p).unwrap();
        let last = format!("<{n}>");
        assert!(
            base.ends_with(last.as_bytes()),
            "the newest output is in the base file"
        );
        assert!(std::fs::metadata(copy_path(&p, 1)).unwrap().len() <= max);
        assert!(copy_path(&p, 2).exists());
        assert!(!copy_path(&p, 3).exists(), "only keep copies");
        // The writer keeps appending to the same file after truncating it.
        log.append(b"after");
        assert!(std::fs::read(&p).unwrap().ends_with(b"after"));
    }

    /// A quiet session's pane log is closed; the next output opens it again and lands after
    /// what was written, and the size it rotates on is the file's.
    #[test]
    fn a_closed_log_reopens_on_the_next_append_and_keeps_counting() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("echo-a.log");
        let mut log = PaneLog::with_limits(p.clone(), small(MIN_MAX_BYTES, 2));
        log.append(b"before ");
        assert!(log.is_open());
        log.close();
        assert!(!log.is_open(), "no descriptor while closed");
        log.append(b"after");
        assert!(log.is_open());
        assert_eq!(std::fs::read(&p).unwrap(), b"before after");
        assert_eq!(log.size, 12);
    }

    #[test]
    fn names_the_budget_may_touch() {
        assert_eq!(classify("claude-a.log"), Some(false));
        assert_eq!(classify("claude-a.log.2"), Some(true));
        assert_eq!(classify("claude-a.log.x"), None);
        assert_eq!(classify("notes.txt"), None);
        assert_eq!(classify(".claude-a.log.1.tmp-1-ab"), None);
    }

    #[test]
    fn budget_deletes_stale_files_then_oldest_copies() {
        let now = SystemTime::now();
        let day = Duration::from_secs(86_400);
        let f = |name: &str, size: u64, age: Duration| LogFile {
            name: name.into(),
            size,
            modified: now - age,
        };
        let limits = PaneLimits {
            dir_budget: 100,
            ..PaneLimits::default()
        };
        let files = vec![
            f("old.log", 10, 15 * day),
            f("a.log", 60, Duration::ZERO),
            f("a.log.1", 30, 2 * day),
            f("a.log.2", 30, 3 * day),
            f("b.log.1", 5, day),
            f("keep.txt", 1000, 30 * day),
        ];
        assert_eq!(
            budget_plan(&files, &limits, now),
            vec!["old.log".to_string(), "a.log.2".to_string()]
        );
    }

    #[test]
    fn appends_and_reopens_after_deletion() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("logs/echo-a.log");
        let mut log = PaneLog::new(p.clone());
        log.append(b"one ");
        log.append(b"two");
        assert_eq!(std::fs::read(&p).unwrap(), b"one two");
        std::fs::remove_file(&p).unwrap();
        log.checked = Instant::now() - RECHECK;
        log.append(b"three");
        assert_eq!(std::fs::read(&p).unwrap(), b"three");
    }
}

//! The pane log `logs/lifecycle/<identity>.log` (spec 04 §1, spec 11 §2): raw output of an
//! identity's sessions, appended for the session's whole life. The file is re-opened when it
//! was deleted; copy-and-truncate rotation keeps the open fd working.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How often the writer checks that its file is still the one at the path.
const RECHECK: Duration = Duration::from_secs(2);

/// An append-only writer that survives deletion of its file.
pub struct PaneLog {
    path: PathBuf,
    file: Option<File>,
    checked: Instant,
}

impl PaneLog {
    /// A writer for `path` (opened lazily; the parent folder is created 0700).
    pub fn new(path: PathBuf) -> PaneLog {
        PaneLog {
            path,
            file: None,
            checked: Instant::now(),
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
        }
        if let Some(f) = self.file.as_mut() {
            if let Err(e) = f.write_all(bytes) {
                log::warn!("pane log {}: {e}", self.path.display());
                self.file = None;
            }
        }
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
        match OpenOptions::new()
            .create(true)
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

#[cfg(test)]
mod tests {
    use super::*;

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

//! The reference docs embedded in the binary (spec 08 §1) and their copy in
//! `<root>/docs/iapeer/`, the folder the system prompt (layer 2) and the man page point to.
//! Written by `iapeer install` and at every daemon start, each file only when its bytes differ.

use std::io;
use std::path::{Path, PathBuf};

use crate::fsutil::{self, MODE_SHARED};
use crate::paths::Paths;

/// The folder name of iapeer's own docs under `<root>/docs/` (one folder per package).
pub const PACKAGE: &str = "iapeer";

/// Every embedded doc: its file name in `<root>/docs/iapeer/` and its bytes.
pub const FILES: &[(&str, &str)] = &[
    ("README.md", include_str!("../../docs/reference/README.md")),
    ("PROTOCOL.md", include_str!("../../docs/PROTOCOL.md")),
    ("ENVIRONMENT.md", include_str!("../../docs/ENVIRONMENT.md")),
];

/// `<root>/docs/iapeer/`.
pub fn dir(paths: &Paths) -> PathBuf {
    paths.docs_dir().join(PACKAGE)
}

/// Write each embedded doc into `<root>/docs/iapeer/` whose copy is missing or differs
/// (atomically, mode 0644). Returns the paths written; empty when all were current.
///
/// Errors: the first I/O error (the folder cannot be created or a file written).
pub fn sync(paths: &Paths) -> io::Result<Vec<PathBuf>> {
    sync_into(&dir(paths))
}

fn sync_into(dir: &Path) -> io::Result<Vec<PathBuf>> {
    fsutil::ensure_dir(dir)?;
    let mut written = Vec::new();
    for (name, text) in FILES {
        let path = dir.join(name);
        if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            fsutil::write_atomic(&path, text.as_bytes(), MODE_SHARED)?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_writes_missing_and_changed_files_only() {
        let (_tmp, paths) = Paths::temp();
        assert_eq!(sync(&paths).unwrap().len(), FILES.len());
        assert!(
            sync(&paths).unwrap().is_empty(),
            "second sync rewrote files"
        );
        let readme = dir(&paths).join("README.md");
        std::fs::write(&readme, "stale").unwrap();
        assert_eq!(sync(&paths).unwrap(), vec![readme.clone()]);
        assert_eq!(std::fs::read_to_string(&readme).unwrap(), FILES[0].1);
    }

    #[test]
    fn the_readme_names_the_tool_and_the_verbs_it_documents() {
        let readme = FILES[0].1;
        for needle in [
            "send_to_peer",
            "iapeer send",
            "self-fresh",
            "self-done",
            "queued",
        ] {
            assert!(readme.contains(needle), "README lacks {needle}");
        }
    }
}

//! Attachment spooling (spec 03 §3): every source file is copied into the recipient's inbox
//! `state/iapeer/attachments/<recipient>/<sha256>/<basename>` before the envelope is built,
//! so the sender may delete its file as soon as the send returns.

use std::fs;
use std::path::{Path, PathBuf};

use crate::attachment_source::{self as source, Limits, Problem};
use crate::fsutil::{create_new, ensure_dir, hex, temp_path, MODE_PRIVATE};
use crate::paths::Paths;

/// Why a send's attachment cannot be spooled (the whole send fails, nothing is delivered).
/// Its `Display`: `attachment N "<src>" could not be copied: <what was wrong> — <what to do>`
/// ([`source::refusal`]).
#[derive(Debug)]
pub struct AttachmentRefusal {
    /// The attachment's place in the send, from 0.
    pub index: usize,
    /// The source path as the sender gave it.
    pub source: String,
    /// What was wrong.
    pub problem: Problem,
}

impl AttachmentRefusal {
    fn of(index: usize, source: &str) -> impl FnOnce(Problem) -> AttachmentRefusal + '_ {
        move |problem| AttachmentRefusal {
            index,
            source: source.to_string(),
            problem,
        }
    }
}

impl std::fmt::Display for AttachmentRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&source::refusal(self.index, &self.source, &self.problem))
    }
}

impl std::error::Error for AttachmentRefusal {}

/// Copy every source into `recipient`'s inbox and return the inbox paths, in order. Each
/// source is opened and read as [`crate::attachment_source`] says (never blocking on a FIFO,
/// regular files only, under `limits.max_bytes`, read until `limits.deadline`).
///
/// Errors: the first [`AttachmentRefusal`] (the whole send fails, nothing is delivered).
pub fn spool(
    paths: &Paths,
    recipient: &str,
    sources: &[String],
    limits: Limits,
) -> Result<Vec<String>, AttachmentRefusal> {
    let inbox = paths.attachments_dir(recipient);
    sources
        .iter()
        .enumerate()
        .map(|(i, src)| {
            copy_one(&inbox, Path::new(src), limits)
                .map(|p| p.display().to_string())
                .map_err(AttachmentRefusal::of(i, src))
        })
        .collect()
}

/// Whether every source could be spooled now: it opens as [`spool`] would open it and is a
/// regular file under `max_bytes` (nothing is read or copied). Used for a send kept while the
/// daemon is down, which spools later.
///
/// Errors: the first failure, as [`spool`]'s.
pub fn check(sources: &[String], max_bytes: u64) -> Result<(), AttachmentRefusal> {
    for (i, src) in sources.iter().enumerate() {
        source::open(Path::new(src), max_bytes).map_err(AttachmentRefusal::of(i, src))?;
    }
    Ok(())
}

/// The inbox copy's file name: the source's basename as the agent will read it in the pasted
/// envelope (controls as [`crate::term::paste_text`] stand-ins, invalid UTF-8 as `U+FFFD`),
/// so the path the agent sees is the path on disk.
fn inbox_name(name: &std::ffi::OsStr) -> String {
    crate::term::paste_text(&name.to_string_lossy()).into_owned()
}

fn copy_one(inbox: &Path, src: &Path, limits: Limits) -> Result<PathBuf, Problem> {
    let name = source::name(src)?;
    let input = source::open(src, limits.max_bytes)?;
    ensure_dir(inbox).map_err(Problem::WriteFailed)?;
    let staging = temp_path(inbox, ".incoming-");
    let result = (|| {
        let mut out = create_new(&staging, MODE_PRIVATE).map_err(Problem::WriteFailed)?;
        let sha = source::copy(input, &mut out, limits)?;
        out.sync_all().map_err(Problem::WriteFailed)?;
        let dir = inbox.join(hex(&sha));
        ensure_dir(&dir).map_err(Problem::WriteFailed)?;
        let dest = dir.join(inbox_name(name));
        fs::rename(&staging, &dest).map_err(Problem::WriteFailed)?;
        Ok(dest)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&staging);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    const MAX: u64 = 1 << 20;

    fn limits() -> Limits {
        Limits {
            max_bytes: MAX,
            deadline: Instant::now() + Duration::from_secs(60),
        }
    }

    /// A temp folder with a root in it and the file `name` there holding `bytes`.
    fn root_and_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, Paths, PathBuf) {
        let (dir, paths) = crate::testkit::temp_root();
        let file = dir.path().join(name);
        fs::write(&file, bytes).unwrap();
        (dir, paths, file)
    }

    #[test]
    fn check_says_what_spool_would_refuse_and_copies_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        fs::write(&file, b"x").unwrap();
        let (file, folder) = (file.display().to_string(), dir.path().display().to_string());
        assert!(check(std::slice::from_ref(&file), MAX).is_ok());
        let missing = dir.path().join("gone").display().to_string();
        let err = check(&[file.clone(), missing.clone()], MAX)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("attachment 2 \"{missing}\" could not be copied: ")),
            "{err}"
        );
        assert_eq!(
            check(std::slice::from_ref(&folder), MAX)
                .unwrap_err()
                .to_string(),
            format!(
                "attachment 1 \"{folder}\" could not be copied: it is a folder, not a regular \
                 file — attach the files in it, or an archive of it (tar, zip)"
            )
        );
        assert_eq!(
            check(std::slice::from_ref(&file), 0)
                .unwrap_err()
                .to_string(),
            format!(
                "attachment 1 \"{file}\" could not be copied: it is 1 byte, over the 0-byte \
                 limit for an attachment — attach a smaller file, or raise \
                 IAPEER_ATTACHMENT_MAX_BYTES (for the daemon and iapeer send)"
            )
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "nothing copied"
        );
    }

    #[test]
    fn copies_are_content_addressed_and_survive_the_source() {
        let (_dir, paths, src) = root_and_file("report.txt", b"hello");
        let out = spool(&paths, "bob", &[src.display().to_string()], limits()).unwrap();
        fs::remove_file(&src).unwrap();
        let p = PathBuf::from(&out[0]);
        assert_eq!(fs::read(&p).unwrap(), b"hello");
        assert!(p.starts_with(paths.attachments_dir("bob")));
        // sha256("hello")
        assert!(out[0].contains("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"));
        assert!(p.ends_with("report.txt"));
        // The same content twice lands in the same place; no staging files remain.
        fs::write(&src, b"hello").unwrap();
        let again = spool(&paths, "bob", &[src.display().to_string()], limits()).unwrap();
        assert_eq!(again, out);
        assert!(staging_files(&paths).is_empty());
    }

    fn staging_files(paths: &Paths) -> Vec<fs::DirEntry> {
        fs::read_dir(paths.attachments_dir("bob"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with(".incoming"))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn directories_and_missing_files_fail_with_their_number() {
        let (dir, paths, good) = root_and_file("a", b"x");
        let err = spool(
            &paths,
            "bob",
            &[good.display().to_string(), dir.path().display().to_string()],
            limits(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("attachment 2 \""), "{err}");
        assert!(err.contains("it is a folder, not a regular file"), "{err}");
        let err = spool(&paths, "bob", &["/nonexistent/x".into()], limits())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("attachment 1 \"/nonexistent/x\" could not be copied:"),
            "{err}"
        );
    }

    #[test]
    fn a_copy_that_fails_midway_leaves_no_staging_file() {
        let (_dir, paths, src) = root_and_file("data", b"some data");
        let past = Limits {
            max_bytes: MAX,
            deadline: Instant::now(),
        };
        let err = spool(&paths, "bob", &[src.display().to_string()], past)
            .unwrap_err()
            .to_string();
        assert!(err.contains("reading it was not done after"), "{err}");
        assert!(staging_files(&paths).is_empty());
    }
}

//! Attachment spooling (spec 03 §3): every source file is copied into the recipient's inbox
//! `state/iapeer/attachments/<recipient>/<sha256>/<basename>` before the envelope is built,
//! so the sender may delete its file as soon as the send returns.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::fsutil::{ensure_dir, hex, random_hex, MODE_PRIVATE};
use crate::paths::Paths;

/// Copy every source into `recipient`'s inbox and return the inbox paths, in order.
///
/// Errors (the whole send fails, nothing is delivered): `attachment N "<src>" could not be
/// copied: <reason>` with N counted from 1.
pub fn spool(paths: &Paths, recipient: &str, sources: &[String]) -> Result<Vec<String>, String> {
    let inbox = paths.attachments_dir(recipient);
    sources
        .iter()
        .enumerate()
        .map(|(i, src)| {
            copy_one(&inbox, Path::new(src))
                .map(|p| p.display().to_string())
                .map_err(|e| not_copied(i, src, &e))
        })
        .collect()
}

/// Whether every source could be spooled now: a regular file with a name that opens for
/// reading (nothing is copied). Used for a send kept while the daemon is down, which spools
/// later.
///
/// Errors: the first failure, in [`spool`]'s words.
pub fn check(sources: &[String]) -> Result<(), String> {
    for (i, src) in sources.iter().enumerate() {
        open_source(Path::new(src)).map_err(|e| not_copied(i, src, &e))?;
    }
    Ok(())
}

/// `attachment N "<src>" could not be copied: <reason>`, N counted from 1 (`i` from 0).
fn not_copied(i: usize, src: &str, e: &io::Error) -> String {
    format!("attachment {} \"{src}\" could not be copied: {e}", i + 1)
}

/// A source opened for reading, with its file name.
///
/// Errors: it is missing or unreadable, not a regular file, or has no file name.
fn open_source(src: &Path) -> io::Result<(File, &std::ffi::OsStr)> {
    let meta = fs::metadata(src)?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let name = src
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    Ok((File::open(src)?, name))
}

/// The inbox copy's file name: the source's basename as the agent will read it in the pasted
/// envelope (controls as [`crate::term::paste_text`] stand-ins, invalid UTF-8 as `U+FFFD`),
/// so the path the agent sees is the path on disk.
fn inbox_name(name: &std::ffi::OsStr) -> String {
    crate::term::paste_text(&name.to_string_lossy()).into_owned()
}

fn copy_one(inbox: &Path, src: &Path) -> io::Result<PathBuf> {
    let (mut input, name) = open_source(src)?;
    ensure_dir(inbox)?;
    let staging = inbox.join(format!(
        ".incoming-{}-{}",
        std::process::id(),
        random_hex(8)
    ));
    let result = (|| {
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(MODE_PRIVATE)
            .open(&staging)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])?;
        }
        out.sync_all()?;
        let dir = inbox.join(hex(&hasher.finalize()));
        ensure_dir(&dir)?;
        let dest = dir.join(inbox_name(name));
        fs::rename(&staging, &dest)?;
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

    #[test]
    fn check_says_what_spool_would_refuse_and_copies_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        fs::write(&file, b"x").unwrap();
        let (file, folder) = (file.display().to_string(), dir.path().display().to_string());
        assert_eq!(check(std::slice::from_ref(&file)), Ok(()));
        let missing = dir.path().join("gone").display().to_string();
        let err = check(&[file.clone(), missing.clone()]).unwrap_err();
        assert!(
            err.starts_with(&format!("attachment 2 \"{missing}\" could not be copied: ")),
            "{err}"
        );
        assert_eq!(
            check(std::slice::from_ref(&folder)).unwrap_err(),
            format!("attachment 1 \"{folder}\" could not be copied: not a regular file")
        );
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "nothing copied"
        );
    }

    #[test]
    fn copies_are_content_addressed_and_survive_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::at(dir.path().join("root"));
        let src = dir.path().join("report.txt");
        fs::write(&src, b"hello").unwrap();
        let out = spool(&paths, "bob", &[src.display().to_string()]).unwrap();
        fs::remove_file(&src).unwrap();
        let p = PathBuf::from(&out[0]);
        assert_eq!(fs::read(&p).unwrap(), b"hello");
        assert!(p.starts_with(paths.attachments_dir("bob")));
        // sha256("hello")
        assert!(out[0].contains("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"));
        assert!(p.ends_with("report.txt"));
        // The same content twice lands in the same place; no staging files remain.
        fs::write(&src, b"hello").unwrap();
        let again = spool(&paths, "bob", &[src.display().to_string()]).unwrap();
        assert_eq!(again, out);
        let leftovers: Vec<_> = fs::read_dir(paths.attachments_dir("bob"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".incoming"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn directories_and_missing_files_fail_with_their_number() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::at(dir.path().join("root"));
        let good = dir.path().join("a");
        fs::write(&good, b"x").unwrap();
        let err = spool(
            &paths,
            "bob",
            &[good.display().to_string(), dir.path().display().to_string()],
        )
        .unwrap_err();
        assert!(err.starts_with("attachment 2 \""), "{err}");
        assert!(err.contains("not a regular file"), "{err}");
        let err = spool(&paths, "bob", &["/nonexistent/x".into()]).unwrap_err();
        assert!(
            err.starts_with("attachment 1 \"/nonexistent/x\" could not be copied:"),
            "{err}"
        );
    }
}

//! Attachments across hosts (issue 28 item 3): inline in the inbox entry, at most
//! [`INLINE_ATTACHMENTS_MAX`] bytes in all. The sending host reads each source as a local send
//! does ([`crate::attachment_source`]: regular files only, never blocking, until the send's
//! deadline) into the entry ([`inline`]); more is refused there with that reason. The
//! recipient's router writes them to a folder of its own ([`stage`]) and routes them as a local
//! send's sources, so its ordinary path copies them into the recipient's attachment inbox; the
//! folder is removed once the outcome is known ([`Staged`]'s drop).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::attachment_source::{self as source, Limits};
use crate::federation::keys::{is_plain_file_name, Inline, INLINE_ATTACHMENTS_MAX};
use crate::fsutil::{create_new, ensure_dir, random_hex, MODE_PRIVATE};
use crate::paths::Paths;
use crate::protocol::{Code, Failure};

/// The sources of a send to `name@host`, read for its entry, until `deadline`.
///
/// Errors (code `invalid-argument`, message NOT delivered): a source a local send would
/// refuse (as it words it), a name that cannot be a file's name on another host, more than
/// [`INLINE_ATTACHMENTS_MAX`] bytes in all (the cap, what to do).
pub fn inline(
    sources: &[String],
    (name, host): (&str, &str),
    deadline: Instant,
) -> Result<Vec<Inline>, Failure> {
    let refuse = |why: String| {
        Failure::new(
            Code::InvalidArgument,
            format!("{why}; message NOT delivered"),
        )
    };
    let mut out = Vec::with_capacity(sources.len());
    let mut total: u64 = 0;
    for (i, src) in sources.iter().enumerate() {
        let path = Path::new(src);
        let left = INLINE_ATTACHMENTS_MAX.saturating_sub(total);
        let read = source::name(path)
            .map(|n| n.to_string_lossy().into_owned())
            .and_then(|n| source::open(path, left).map(|s| (n, s)))
            .and_then(|(n, s)| {
                let mut data = Vec::new();
                let limits = Limits {
                    max_bytes: left,
                    deadline,
                };
                source::copy(s, &mut data, limits).map(|_| (n, data))
            });
        let (file_name, data) = match read {
            Ok(r) => r,
            Err(source::Problem::TooBig { .. } | source::Problem::Grew { .. }) => {
                return Err(refuse(format!(
                    "attachments cross hosts inline, at most {} KiB in all per message: \
                     attachment {} \"{src}\" makes more — {name}@{host} is on another host; \
                     share a larger file another way (a shared folder, a repository) and send \
                     its location",
                    INLINE_ATTACHMENTS_MAX / 1024,
                    i + 1
                )))
            }
            Err(p) => return Err(refuse(source::refusal(i, src, &p))),
        };
        if !is_plain_file_name(&file_name) {
            return Err(refuse(format!(
                "attachment {} \"{src}\" has a name another host cannot take: rename the file",
                i + 1
            )));
        }
        total += data.len() as u64;
        out.push(Inline {
            name: file_name,
            data,
        });
    }
    Ok(out)
}

/// An entry's attachments written out on the recipient's host: their paths, in order, as a
/// local send's sources. Dropping it removes the folder.
#[derive(Debug)]
pub struct Staged {
    dir: Option<PathBuf>,
    /// The files, in the entry's order.
    pub paths: Vec<String>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Write `attachments` to a new folder under `<root>/state/iapeer/federation-attachments/`
/// (0600 files; one folder per entry, so two files of one name do not meet). None: no folder.
///
/// Errors: a write fails (the folder is removed).
pub fn stage(paths: &Paths, attachments: &[Inline]) -> std::io::Result<Staged> {
    let mut staged = Staged {
        dir: None,
        paths: Vec::new(),
    };
    if attachments.is_empty() {
        return Ok(staged);
    }
    let parent = paths.federation_attachments();
    ensure_dir(&parent)?;
    let dir = parent.join(random_hex(8));
    ensure_dir(&dir)?;
    staged.dir = Some(dir.clone());
    for (i, a) in attachments.iter().enumerate() {
        // One sub-folder per file: two attachments of one name stay apart.
        let sub = dir.join(i.to_string());
        ensure_dir(&sub)?;
        let file = sub.join(&a.name);
        let mut out = create_new(&file, MODE_PRIVATE)?;
        out.write_all(&a.data)?;
        out.sync_all()?;
        staged.paths.push(file.display().to_string());
    }
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn files_within_the_cap_go_inline_and_more_is_refused_with_the_cap() {
        let (dir, small) = crate::testkit::temp_file("notes.txt", b"hello");
        let big = dir.path().join("big.bin");
        std::fs::write(&big, vec![7u8; INLINE_ATTACHMENTS_MAX as usize - 2]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let s = |p: &Path| p.display().to_string();
        let got = inline(&[s(&small)], ("bob", "b"), deadline).unwrap();
        assert_eq!(
            got,
            [Inline {
                name: "notes.txt".into(),
                data: b"hello".to_vec()
            }]
        );
        // Together they pass the cap: refused, saying it.
        let e = inline(&[s(&small), s(&big)], ("bob", "b"), deadline).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.error.contains("at most 256 KiB in all"), "{}", e.error);
        assert!(e.error.contains("attachment 2"), "{}", e.error);
        assert!(e.error.ends_with("message NOT delivered"), "{}", e.error);
        // A folder is refused as a local send refuses it.
        let e = inline(&[s(dir.path())], ("bob", "b"), deadline).unwrap_err();
        assert!(e.error.contains("attachment 1"), "{}", e.error);
    }

    #[test]
    fn staged_files_are_written_apart_and_removed_with_the_stage() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::at(dir.path());
        let a = |d: &[u8]| Inline {
            name: "same.txt".into(),
            data: d.to_vec(),
        };
        let staged = stage(&paths, &[a(b"one"), a(b"two")]).unwrap();
        assert_eq!(staged.paths.len(), 2);
        assert_eq!(std::fs::read(&staged.paths[0]).unwrap(), b"one");
        assert_eq!(std::fs::read(&staged.paths[1]).unwrap(), b"two");
        let folder = Path::new(&staged.paths[0])
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
        drop(staged);
        assert!(!folder.exists());
        assert!(stage(&paths, &[]).unwrap().paths.is_empty());
    }
}

//! Reading an attachment's source file without letting it stall the reader (spec 03 §3,
//! issue 26 item 2). Used where a sender's file is read: the daemon's spool
//! (`daemon::attachments`) and the outbox's copies (`outbox`).
//!
//! What a source must be, checked on the **opened descriptor** (a path checked and then
//! opened can change in between):
//! - The path is resolved first (`realpath`: symbolic links anywhere in it are followed,
//!   which never opens the file), then the resolved path is opened with
//!   `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC`. A user's symlinked attachment
//!   (`latest.log -> log.2026-01-05`) is therefore accepted and read from its target; a
//!   resolved path whose last part became a link meanwhile fails the open (`ELOOP`) instead
//!   of being followed, and a FIFO, a device or a file under a lease never blocks the open.
//! - Before the open, the resolved path's own type is looked at (`lstat`), so a FIFO or a
//!   device is refused without ever being opened; after it, `fstat` of the descriptor must
//!   say a regular file with the same device and inode (else it was swapped meanwhile).
//! - It is not on a kernel pseudo file system (`/proc`, `/sys`, `debugfs`, …: `fstatfs`'s
//!   magic number; their "regular files" report size 0 or a size that is not what a read
//!   gives, and some read without end).
//! - Its size is at most [`Limits::max_bytes`] (`IAPEER_ATTACHMENT_MAX_BYTES`), and the copy
//!   stops if the file grows past it while it is read.
//! - The copy stops at [`Limits::deadline`] (the send's own deadline): a file system that
//!   trickles its data cannot hold the reader longer than the sender waits.
//!
//! What is **not** bounded here: one `realpath`, `open`, `fstat` or `read` call that never
//! returns (a FUSE daemon that stopped answering, a hard NFS mount whose server is gone).
//! No flag makes such a call return, and a thread cannot be taken out of it; the daemon's
//! preparation pool bounds what such a stalled reader costs instead (`daemon::fair_pool`).

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::config::vars::IAPEER_ATTACHMENT_MAX_BYTES;

/// The variable that raises (or lowers) the size cap.
const MAX_BYTES_VAR: &str = IAPEER_ATTACHMENT_MAX_BYTES.name;

/// The size cap of this process's environment (`IAPEER_ATTACHMENT_MAX_BYTES`; the default
/// when unset or not a positive number). The daemon reads it once into its `Config`; the CLI
/// reads it here.
pub fn max_bytes_from_env() -> u64 {
    let raw = std::env::var(MAX_BYTES_VAR).ok();
    IAPEER_ATTACHMENT_MAX_BYTES.parse_u64(raw.as_deref(), &mut Vec::new())
}

/// How much of a source may be read, and until when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest source accepted, in bytes (`IAPEER_ATTACHMENT_MAX_BYTES`).
    pub max_bytes: u64,
    /// The copy stops here (the send's deadline: nobody waits for it afterwards).
    pub deadline: Instant,
}

/// What a source is when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRegular {
    /// A directory.
    Folder,
    /// A named pipe.
    Fifo,
    /// A character device (`/dev/zero`, a terminal).
    CharDevice,
    /// A block device (a disk).
    BlockDevice,
    /// A Unix socket.
    Socket,
    /// A symbolic link where the resolved path's last part should be a file.
    Link,
}

/// Why a source is refused. Its `Display` says what was wrong and what to do.
#[derive(Debug)]
pub enum Problem {
    /// The path could not be resolved, looked at or opened (missing, no permission, …).
    Unreadable(io::Error),
    /// The path has no file name (`/`, `…/..`).
    NoName,
    /// Not a regular file.
    NotRegular(NotRegular),
    /// The resolved path was replaced between the look and the open (a symbolic link or a
    /// file swapped at that moment).
    Changed,
    /// Another program holds a lease on it and is writing it (`EWOULDBLOCK` on open).
    Leased,
    /// On a kernel pseudo file system (its name).
    Pseudo(&'static str),
    /// Larger than the cap.
    TooBig {
        /// Its size, bytes.
        len: u64,
        /// The cap, bytes.
        max: u64,
    },
    /// It grew past the cap while it was copied.
    Grew {
        /// The cap, bytes.
        max: u64,
    },
    /// Reading it did not finish by the deadline.
    TooSlow {
        /// How long it was read.
        after: Duration,
    },
    /// A read failed midway.
    ReadFailed(io::Error),
    /// The copy could not be written (disk full, …).
    WriteFailed(io::Error),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let not_a_file =
            |what: &str, todo: &str| format!("it is {what}, not a regular file — {todo}");
        let text = match self {
            Problem::Unreadable(e) => {
                format!("{e} — attach a regular file that exists and that you can read")
            }
            Problem::NoName => "the path names no file — give the path of a file".to_string(),
            Problem::NotRegular(NotRegular::Folder) => not_a_file(
                "a folder",
                "attach the files in it, or an archive of it (tar, zip)",
            ),
            Problem::NotRegular(NotRegular::Fifo) => not_a_file(
                "a named pipe (FIFO)",
                "write what it carries to a regular file and attach that",
            ),
            Problem::NotRegular(NotRegular::CharDevice) => not_a_file(
                "a character device",
                "copy what you need from it into a regular file and attach that",
            ),
            Problem::NotRegular(NotRegular::BlockDevice) => not_a_file(
                "a block device",
                "copy what you need from it into a regular file and attach that",
            ),
            Problem::NotRegular(NotRegular::Socket) => {
                not_a_file("a socket", "attach a regular file")
            }
            Problem::NotRegular(NotRegular::Link) | Problem::Changed => {
                "it was replaced while it was being opened (a symbolic link or file swapped at \
                 that moment) — attach a file that is not being replaced"
                    .to_string()
            }
            Problem::Leased => "another program holds a lease on it (it is being written) — \
                                attach it once that program is done with it"
                .to_string(),
            Problem::Pseudo(fs) => format!(
                "it is on {fs}, a kernel file system whose files are made up as they are read \
                 (their size is not what a read gives) — copy what you need into a regular \
                 file and attach that"
            ),
            Problem::TooBig { len, max } => format!(
                "it is {len} byte{}, over the {max}-byte limit for an attachment — attach a \
                 smaller file, or raise {MAX_BYTES_VAR} (for the daemon and iapeer send)",
                if *len == 1 { "" } else { "s" }
            ),
            Problem::Grew { max } => format!(
                "it grew past the {max}-byte limit for an attachment while it was copied — \
                 attach a file that is not being written, or raise {MAX_BYTES_VAR}"
            ),
            Problem::TooSlow { after } => format!(
                "reading it was not done after {} s, when the send's deadline came: its file \
                 system is too slow or does not answer — copy it to a local disk and attach \
                 the copy",
                after.as_secs()
            ),
            Problem::ReadFailed(e) => format!(
                "reading it failed: {e} — check the disk or mount it is on, then send again"
            ),
            Problem::WriteFailed(e) => format!(
                "its copy could not be written: {e} — free some disk space, then send again"
            ),
        };
        f.write_str(&text)
    }
}

/// `attachment N "<src>" could not be copied: <problem>`, N counted from 1 (`i` from 0): the
/// refusal wherever a source is read (spec 03 §3's wording).
pub fn refusal(i: usize, src: &str, p: &Problem) -> String {
    format!("attachment {} \"{src}\" could not be copied: {p}", i + 1)
}

/// A source opened for reading and found fit: a regular file on a real file system, under
/// the cap.
#[derive(Debug)]
pub struct Source {
    file: File,
}

/// The file name a source is known by: the last part of the path as the sender gave it (not
/// of the path it resolves to).
///
/// Errors: [`Problem::NoName`].
pub fn name(src: &Path) -> Result<&OsStr, Problem> {
    src.file_name().ok_or(Problem::NoName)
}

/// Open `src` as described in the module doc; nothing is read yet.
///
/// Errors: every [`Problem`] but `Grew`, `TooSlow`, `ReadFailed` and `WriteFailed`.
pub fn open(src: &Path, max_bytes: u64) -> Result<Source, Problem> {
    name(src)?;
    let resolved: PathBuf = fs::canonicalize(src).map_err(Problem::Unreadable)?;
    let seen = fs::symlink_metadata(&resolved).map_err(Problem::Unreadable)?;
    if let Some(what) = not_regular(seen.file_type()) {
        // Never opened: opening a device can have effects of its own.
        return Err(Problem::NotRegular(what));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(
            nix::libc::O_NOFOLLOW
                | nix::libc::O_NONBLOCK
                | nix::libc::O_NOCTTY
                | nix::libc::O_CLOEXEC,
        )
        .open(&resolved)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) | Some(nix::libc::EMLINK) => Problem::Changed,
            Some(code) if code == nix::libc::EWOULDBLOCK || code == nix::libc::EAGAIN => {
                Problem::Leased
            }
            _ => Problem::Unreadable(e),
        })?;
    let meta = file.metadata().map_err(Problem::Unreadable)?;
    if let Some(what) = not_regular(meta.file_type()) {
        return Err(Problem::NotRegular(what));
    }
    if (meta.dev(), meta.ino()) != (seen.dev(), seen.ino()) {
        return Err(Problem::Changed);
    }
    if let Some(fs) = pseudo_fs(&file) {
        return Err(Problem::Pseudo(fs));
    }
    if meta.len() > max_bytes {
        return Err(Problem::TooBig {
            len: meta.len(),
            max: max_bytes,
        });
    }
    Ok(Source { file })
}

/// Copy `source` into `out` and return the SHA-256 of what was copied; `out` is not synced.
///
/// Errors: [`Problem::Grew`] past `limits.max_bytes`, [`Problem::TooSlow`] past
/// `limits.deadline` (checked after every read), [`Problem::ReadFailed`],
/// [`Problem::WriteFailed`].
pub fn copy(mut source: Source, out: &mut impl Write, limits: Limits) -> Result<[u8; 32], Problem> {
    let started = Instant::now();
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = match source.file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Problem::ReadFailed(e)),
        };
        total += n as u64;
        if total > limits.max_bytes {
            return Err(Problem::Grew {
                max: limits.max_bytes,
            });
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(Problem::WriteFailed)?;
        if Instant::now() >= limits.deadline {
            return Err(Problem::TooSlow {
                after: started.elapsed(),
            });
        }
    }
    Ok(hasher.finalize().into())
}

/// What a file type is when it is not a regular file.
fn not_regular(t: fs::FileType) -> Option<NotRegular> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some(NotRegular::Folder)
    } else if t.is_fifo() {
        Some(NotRegular::Fifo)
    } else if t.is_char_device() {
        Some(NotRegular::CharDevice)
    } else if t.is_block_device() {
        Some(NotRegular::BlockDevice)
    } else if t.is_socket() {
        Some(NotRegular::Socket)
    } else {
        Some(NotRegular::Link)
    }
}

/// The pseudo file system an open file is on, by `fstatfs` magic (Linux); `None` for a real
/// one, or when it cannot be told.
#[cfg(target_os = "linux")]
fn pseudo_fs(file: &File) -> Option<&'static str> {
    let st = nix::sys::statfs::fstatfs(file).ok()?;
    pseudo_fs_named(st.filesystem_type().0 as u64)
}

/// Elsewhere there is no `/proc` or `/sys` of this kind (macOS's `/dev` holds only devices,
/// refused by type).
#[cfg(not(target_os = "linux"))]
fn pseudo_fs(_file: &File) -> Option<&'static str> {
    None
}

/// The name of the kernel pseudo file system with `magic` (`statfs.f_type`, linux/magic.h),
/// or `None` for any other.
pub fn pseudo_fs_named(magic: u64) -> Option<&'static str> {
    const PSEUDO: &[(u64, &str)] = &[
        (0x9fa0, "/proc (procfs)"),
        (0x6265_6572, "/sys (sysfs)"),
        (0x6462_6720, "debugfs"),
        (0x7472_6163, "tracefs"),
        (0x7363_6673, "securityfs"),
        (0x0027_e0eb, "cgroupfs"),
        (0x6367_7270, "cgroup2fs"),
        (0xcafe_4a11, "bpffs"),
        (0x6265_6570, "configfs"),
        (0xde5e_81e4, "efivarfs"),
        (0x6165_676c, "pstore"),
        (0x6573_5543, "fusectl"),
        (0x4249_4e4d, "binfmt_misc"),
        (0xf97c_ff8c, "selinuxfs"),
        (0x4341_5d53, "smackfs"),
        (0x1980_0202, "mqueue"),
        (0x6e73_6673, "nsfs"),
        (0x0000_1cd1, "devpts"),
    ];
    PSEUDO
        .iter()
        .find(|(m, _)| *m == magic & 0xffff_ffff)
        .map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const MAX: u64 = 1024;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn read_all(src: &Path) -> Result<Vec<u8>, Problem> {
        let s = open(src, MAX)?;
        let mut out = Vec::new();
        copy(
            s,
            &mut out,
            Limits {
                max_bytes: MAX,
                deadline: later(),
            },
        )?;
        Ok(out)
    }

    #[test]
    fn a_regular_file_and_a_link_to_one_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("log.2026-01-05");
        fs::write(&file, b"hello").unwrap();
        let link = dir.path().join("latest.log");
        symlink(&file, &link).unwrap();
        assert_eq!(read_all(&file).unwrap(), b"hello");
        assert_eq!(read_all(&link).unwrap(), b"hello");
        assert_eq!(
            name(&link).unwrap(),
            "latest.log",
            "the name the sender gave"
        );
    }

    #[test]
    fn a_fifo_is_refused_at_once_and_never_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let link = dir.path().join("looks-like-a-file.txt");
        symlink(&fifo, &link).unwrap();
        for p in [&fifo, &link] {
            let e = open(p, MAX).unwrap_err();
            assert!(matches!(e, Problem::NotRegular(NotRegular::Fifo)), "{e:?}");
            assert_eq!(
                e.to_string(),
                "it is a named pipe (FIFO), not a regular file — write what it carries to a \
                 regular file and attach that"
            );
        }
    }

    /// A name renamed over, in a tight loop, by a regular file and a FIFO in turn (no link
    /// involved): every open returns at once, with the file, the FIFO refused, or the swap
    /// noticed (a FIFO opened where a file was looked at is refused by its descriptor).
    #[test]
    fn a_name_flipped_between_a_file_and_a_fifo_never_blocks_the_open() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let name = dir.path().join("attachment.txt");
        fs::write(&name, b"the file").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flipper = {
            let (stop, dir, name) = (stop.clone(), dir.path().to_path_buf(), name.clone());
            std::thread::spawn(move || {
                let (f, p) = (dir.join(".f"), dir.join(".p"));
                while !stop.load(Ordering::Relaxed) {
                    fs::write(&f, b"the file").unwrap();
                    fs::rename(&f, &name).unwrap();
                    nix::unistd::mkfifo(&p, nix::sys::stat::Mode::S_IRWXU).unwrap();
                    fs::rename(&p, &name).unwrap();
                }
            })
        };
        let (mut files, mut fifos, mut swapped) = (0, 0, 0);
        // At least 2000 opens, and on until one met a FIFO: on a loaded machine the flipper
        // may not run during the first 2000.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut opens = 0;
        while opens < 2000 || (fifos == 0 && Instant::now() < deadline) {
            opens += 1;
            let started = Instant::now();
            match open(&name, MAX) {
                Ok(_) => files += 1,
                Err(Problem::NotRegular(NotRegular::Fifo)) => fifos += 1,
                Err(Problem::Changed) => swapped += 1,
                Err(e) => panic!("{e:?}"),
            }
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "an open blocked"
            );
        }
        stop.store(true, Ordering::Relaxed);
        flipper.join().unwrap();
        assert!(
            files + fifos + swapped == opens && fifos > 0,
            "{files} {fifos} {swapped} of {opens}"
        );
    }

    #[test]
    fn devices_folders_and_proc_files_are_refused_by_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            open(Path::new("/dev/zero"), MAX).unwrap_err(),
            Problem::NotRegular(NotRegular::CharDevice)
        ));
        assert!(matches!(
            open(dir.path(), MAX).unwrap_err(),
            Problem::NotRegular(NotRegular::Folder)
        ));
        #[cfg(target_os = "linux")]
        for p in [
            "/proc/self/status",
            "/proc/self/environ",
            "/sys/kernel/uevent_seqnum",
        ] {
            if Path::new(p).exists() {
                let e = open(Path::new(p), MAX).unwrap_err();
                assert!(matches!(e, Problem::Pseudo(_)), "{p}: {e:?}");
            }
        }
        assert_eq!(pseudo_fs_named(0x9fa0), Some("/proc (procfs)"));
        assert_eq!(pseudo_fs_named(0xef53), None, "ext4 is a real one");
    }

    #[test]
    fn the_cap_is_checked_on_open_and_while_copying() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        fs::write(&big, vec![b'x'; MAX as usize + 1]).unwrap();
        let e = open(&big, MAX).unwrap_err();
        assert!(
            matches!(e, Problem::TooBig { len, max } if len == MAX + 1 && max == MAX),
            "{e:?}"
        );
        assert!(e.to_string().contains("raise IAPEER_ATTACHMENT_MAX_BYTES"));
        // Opened under the cap, then written past it: the copy stops at the cap.
        let growing = dir.path().join("growing");
        fs::write(&growing, b"small").unwrap();
        let s = open(&growing, MAX).unwrap();
        fs::write(&growing, vec![b'y'; MAX as usize * 4]).unwrap();
        let mut out = Vec::new();
        let e = copy(
            s,
            &mut out,
            Limits {
                max_bytes: MAX,
                deadline: later(),
            },
        )
        .unwrap_err();
        assert!(matches!(e, Problem::Grew { max } if max == MAX), "{e:?}");
        assert!(out.len() as u64 <= MAX);
    }

    #[test]
    fn a_copy_past_its_deadline_stops() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, b"data").unwrap();
        let s = open(&f, MAX).unwrap();
        let e = copy(
            s,
            &mut Vec::new(),
            Limits {
                max_bytes: MAX,
                deadline: Instant::now(),
            },
        )
        .unwrap_err();
        assert!(matches!(e, Problem::TooSlow { .. }), "{e:?}");
        assert!(e
            .to_string()
            .starts_with("reading it was not done after 0 s"));
    }

    #[test]
    fn missing_and_nameless_paths_say_so() {
        let e = open(Path::new("/nonexistent/x"), MAX).unwrap_err();
        assert!(matches!(e, Problem::Unreadable(_)), "{e:?}");
        assert_eq!(
            refusal(0, "/nonexistent/x", &e),
            "attachment 1 \"/nonexistent/x\" could not be copied: No such file or directory (os \
             error 2) — attach a regular file that exists and that you can read"
        );
        assert!(matches!(
            open(Path::new("/"), MAX).unwrap_err(),
            Problem::NoName
        ));
    }
}

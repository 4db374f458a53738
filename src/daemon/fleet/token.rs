//! The fleet API's token (issue 26 item 1): the secret every fleet request must carry as
//! `Authorization: Bearer <token>` unless `IAPEER_BEARER_TOKEN` is set. The daemon makes it at
//! its first start in `<root>/state/iapeer/fleet.token` ([`crate::paths::Paths::fleet_token`]:
//! one line, mode 0600, written atomically) and keeps it across restarts, so a script or
//! bridge of the same user reads it there (`$(cat …/fleet.token)`).
//!
//! A token file is trusted only when it is a regular file (not a link, FIFO, folder…) owned
//! by the daemon's user, that no other user may read or write (no group or other mode bits),
//! holding one token; otherwise the daemon makes a new one over it and says why
//! ([`Found::Replaced`]). The rule is the pure [`judge`]; [`load_or_make`] does the I/O.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::fsutil::{self, MODE_PRIVATE};

/// Random bytes of a made token (64 hex digits).
const TOKEN_BYTES: usize = 32;
/// Shortest and longest token the file may hold, in characters.
const TOKEN_CHARS: std::ops::RangeInclusive<usize> = 32..=1024;

/// What kind of file is at the token's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Folder,
    /// A FIFO.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A block or character device.
    Device,
}

impl Kind {
    fn of(t: std::fs::FileType) -> Kind {
        if t.is_file() {
            Kind::File
        } else if t.is_dir() {
            Kind::Folder
        } else if t.is_fifo() {
            Kind::Fifo
        } else if t.is_socket() {
            Kind::Socket
        } else {
            Kind::Device
        }
    }
}

/// What the daemon knows of an opened token file: its kind, owner and permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The file's kind.
    pub kind: Kind,
    /// Its owner's uid.
    pub uid: u32,
    /// Its permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// Why a token file is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distrust {
    /// A symbolic link (never followed).
    Link,
    /// Not a regular file.
    NotAFile(Kind),
    /// Owned by another user.
    Owner {
        /// The file's owner.
        uid: u32,
        /// The daemon's user.
        ours: u32,
    },
    /// Group or other users may read or write it.
    Mode(u32),
    /// Its text is not one token of 32 to 1024 visible ASCII characters.
    Content,
    /// It could not be opened or read.
    Unreadable(String),
}

impl fmt::Display for Distrust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distrust::Link => f.write_str("it is a symbolic link"),
            Distrust::NotAFile(k) => {
                let what = match k {
                    Kind::File => "a file",
                    Kind::Folder => "a folder",
                    Kind::Fifo => "a FIFO",
                    Kind::Socket => "a socket",
                    Kind::Device => "a device",
                };
                write!(f, "it is {what}, not a regular file")
            }
            Distrust::Owner { uid, ours } => {
                write!(
                    f,
                    "it belongs to uid {uid}, not to this daemon's user (uid {ours})"
                )
            }
            Distrust::Mode(m) => write!(
                f,
                "its mode {m:04o} lets other users read or write it (it must be 0600)"
            ),
            Distrust::Content => f.write_str(
                "it does not hold one token (32 to 1024 visible ASCII characters on one line)",
            ),
            Distrust::Unreadable(e) => write!(f, "it cannot be read: {e}"),
        }
    }
}

/// What [`load_or_make`] found at the token's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A trusted token, kept.
    Kept,
    /// No file: a new token was made and written.
    Made,
    /// A file that is not trusted: a new token was made and written over it.
    Replaced(Distrust),
    /// A new token was made (after `Option`'s reason, if the old file was not trusted) but
    /// could not be written: it works for this daemon's life, and only the daemon's own
    /// clients (the page, the fleet-client packages it starts) have it.
    Unsaved(Option<Distrust>, String),
}

/// Whether a file with these `facts` may hold the token of the daemon's user `ours`: a
/// regular file of that user with no group or other permission bits. Pure.
///
/// Errors: the [`Distrust`] of the first failed check, in the order kind, owner, mode.
pub fn judge_file(facts: &Facts, ours: u32) -> Result<(), Distrust> {
    if facts.kind != Kind::File {
        return Err(Distrust::NotAFile(facts.kind));
    }
    if facts.uid != ours {
        return Err(Distrust::Owner {
            uid: facts.uid,
            ours,
        });
    }
    if facts.mode & 0o077 != 0 {
        return Err(Distrust::Mode(facts.mode & 0o7777));
    }
    Ok(())
}

/// The token a file's bytes hold: their text without surrounding whitespace, when that is
/// 32 to 1024 visible ASCII characters. Pure.
///
/// Errors: [`Distrust::Content`] for anything else.
pub fn judge_text(bytes: &[u8]) -> Result<String, Distrust> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| Distrust::Content)?
        .trim();
    let one_token = TOKEN_CHARS.contains(&text.len()) && text.bytes().all(|b| b.is_ascii_graphic());
    if !one_token {
        return Err(Distrust::Content);
    }
    Ok(text.to_string())
}

/// The token in `path` when it is trusted; `Ok(None)` when there is no file.
/// Opens without following a link and without blocking (a FIFO there is refused, never
/// waited on), then judges what the descriptor is.
///
/// Errors: the [`Distrust`] of a file that is there ([`judge_file`], [`judge_text`]).
pub fn read(path: &Path) -> Result<Option<String>, Distrust> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(path, e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| Distrust::Unreadable(e.to_string()))?;
    let facts = Facts {
        kind: Kind::of(meta.file_type()),
        uid: meta.uid(),
        mode: meta.mode(),
    };
    // Judged before reading: a FIFO or device is never read.
    judge_file(&facts, nix::unistd::geteuid().as_raw())?;
    let bytes = read_bounded(file).map_err(|e| Distrust::Unreadable(e.to_string()))?;
    judge_text(&bytes).map(Some)
}

/// `O_NOFOLLOW | O_NONBLOCK`: a link at the path fails the open, a FIFO opens at once.
fn libc_flags() -> i32 {
    (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits()
}

/// Why opening an existing path failed: `ELOOP` is the link `O_NOFOLLOW` refused, `ENXIO` a
/// socket (which cannot be opened).
fn open_error(path: &Path, e: io::Error) -> Distrust {
    match e.raw_os_error().map(nix::errno::Errno::from_raw) {
        Some(nix::errno::Errno::ELOOP) => Distrust::Link,
        Some(nix::errno::Errno::ENXIO) => Distrust::NotAFile(Kind::Socket),
        _ => Distrust::Unreadable(format!("{}: {e}", path.display())),
    }
}

/// At most one byte more than the longest token file.
fn read_bounded(file: File) -> io::Result<Vec<u8>> {
    let limit = *TOKEN_CHARS.end() as u64 + 2;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The fleet token for a daemon starting on `path`: the trusted token there, else a new one
/// (32 random bytes, 64 hex digits) written there atomically, mode 0600.
///
/// Errors: the operating system has no random source (no token can be made).
pub fn load_or_make(path: &Path) -> io::Result<(String, Found)> {
    let distrust = match read(path) {
        Ok(Some(token)) => return Ok((token, Found::Kept)),
        Ok(None) => None,
        Err(d) => Some(d),
    };
    let mut buf = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut buf).map_err(|e| io::Error::other(e.to_string()))?;
    let token = fsutil::hex(&buf);
    let found = match fsutil::write_atomic(path, format!("{token}\n").as_bytes(), MODE_PRIVATE) {
        Ok(()) => distrust.map_or(Found::Made, Found::Replaced),
        Err(e) => Found::Unsaved(distrust, e.to_string()),
    };
    Ok((token, found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::mode_of;
    use std::os::unix::fs::PermissionsExt;

    const OURS: u32 = 1000;
    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn facts(kind: Kind, uid: u32, mode: u32) -> Facts {
        Facts { kind, uid, mode }
    }

    #[test]
    fn only_a_private_regular_file_of_ours_with_one_token_is_trusted() {
        assert_eq!(judge_file(&facts(Kind::File, OURS, 0o600), OURS), Ok(()));
        assert_eq!(judge_file(&facts(Kind::File, OURS, 0o400), OURS), Ok(()));
        for mode in [0o640, 0o604, 0o620, 0o602, 0o644, 0o666, 0o4600] {
            assert_eq!(
                judge_file(&facts(Kind::File, OURS, mode), OURS),
                if mode & 0o077 == 0 {
                    Ok(())
                } else {
                    Err(Distrust::Mode(mode))
                },
                "{mode:o}"
            );
        }
        assert_eq!(
            judge_file(&facts(Kind::File, 0, 0o600), OURS),
            Err(Distrust::Owner { uid: 0, ours: OURS })
        );
        for kind in [Kind::Folder, Kind::Fifo, Kind::Socket, Kind::Device] {
            assert_eq!(
                judge_file(&facts(kind, OURS, 0o600), OURS),
                Err(Distrust::NotAFile(kind))
            );
        }
        assert_eq!(
            judge_text(format!("{TOKEN}\n").as_bytes()),
            Ok(TOKEN.to_string())
        );
        for bad in [
            "",
            "short",
            "two words here and more than thirty-two chars",
            "\u{e9}",
        ] {
            assert_eq!(
                judge_text(bad.as_bytes()),
                Err(Distrust::Content),
                "{bad:?}"
            );
        }
        assert_eq!(judge_text(&[0xff; 40]), Err(Distrust::Content));
        assert_eq!(
            judge_text("x".repeat(1025).as_bytes()),
            Err(Distrust::Content)
        );
        assert!(judge_text("x".repeat(1024).as_bytes()).is_ok());
        let why = Distrust::Mode(0o644).to_string();
        assert!(why.contains("0644") && why.contains("0600"), "{why}");
    }

    #[test]
    fn a_token_is_made_once_kept_and_replaced_when_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("fleet.token");
        let (made, found) = load_or_make(&path).unwrap();
        assert_eq!(found, Found::Made);
        assert_eq!(made.len(), 64);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{made}\n"));
        assert_eq!(mode_of(&path), 0o600);
        assert_eq!(load_or_make(&path).unwrap(), (made.clone(), Found::Kept));

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (fresh, found) = load_or_make(&path).unwrap();
        assert_eq!(found, Found::Replaced(Distrust::Mode(0o644)));
        assert_ne!(fresh, made);
        assert_eq!(mode_of(&path), 0o600);

        // A link is replaced, never followed: its target is left as it was.
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, format!("{TOKEN}\n")).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let (fresh, found) = load_or_make(&path).unwrap();
        assert_eq!(found, Found::Replaced(Distrust::Link));
        assert_ne!(fresh, TOKEN);
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            format!("{TOKEN}\n")
        );

        // A FIFO is not waited on.
        std::fs::remove_file(&path).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (_, found) = load_or_make(&path).unwrap();
        assert_eq!(found, Found::Replaced(Distrust::NotAFile(Kind::Fifo)));

        // A folder cannot be written over: the token works unsaved, and says why.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("x"), "x").unwrap();
        let (token, found) = load_or_make(&path).unwrap();
        assert_eq!(token.len(), 64);
        assert!(
            matches!(
                found,
                Found::Unsaved(Some(Distrust::NotAFile(Kind::Folder)), _)
            ),
            "{found:?}"
        );
    }
}

//! File-system helpers shared by every writer (spec 01 §1): atomic writes, private folders,
//! file modes and random names.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of folders iapeer creates: owner only.
pub const MODE_DIR: u32 = 0o700;
/// Mode of state files, logs and sockets: owner read/write.
pub const MODE_PRIVATE: u32 = 0o600;
/// Mode of files other tools must read (`.mcp.json`, codex `config.toml`, `runtime.json`).
pub const MODE_SHARED: u32 = 0o644;

/// A file operation that failed, as the typed errors above `fsutil` wrap it (`HostError::Io`,
/// `SetupError::Io`, `PeerError::Io`, `RegistryError::Io`…). `Display`:
/// `cannot <action> <what><path>: <error>`; `source()` is the underlying [`io::Error`].
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {what}{path}: {source}")]
pub struct IoError {
    /// What was being done, a verb: `"read"`, `"write"`, `"create"`, `"delete"`…
    pub action: &'static str,
    /// How the text names the file before its path, e.g. `"the peer registry "`, or empty.
    pub what: &'static str,
    /// The file or folder.
    pub path: PathBuf,
    /// The underlying error.
    pub source: io::Error,
}

impl IoError {
    /// For `map_err`: the error `cannot <action> <path>: <error>`; `?` turns it into the
    /// caller's error enum through its `From<IoError>` (an `Io(IoError)` variant).
    pub fn at(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> IoError {
        IoError::named(action, "", path)
    }

    /// [`IoError::at`] with `what` naming the file: `cannot <action> <what><path>: <error>`.
    pub fn named(
        action: &'static str,
        what: &'static str,
        path: &Path,
    ) -> impl FnOnce(io::Error) -> IoError {
        let path = path.to_path_buf();
        move |source| IoError {
            action,
            what,
            path,
            source,
        }
    }
}

/// The last component of `path` as text (lossy for a name that is not UTF-8), empty when
/// it has none (`/`, `..`).
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Create `dir` and any missing parents with mode 0700. Existing folders keep their mode.
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(MODE_DIR).create(dir)
}

/// Write `bytes` to `path` atomically with file mode `mode`: a temp file in the same folder,
/// fsync, rename over the target, fsync the folder. A reader sees the old file or the new one,
/// never a part. Missing parent folders are created (0700).
///
/// Errors: any I/O error; the temp file is removed on failure.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    replace(path, bytes, mode, true)
}

/// [`write_atomic`] without the two fsyncs: a reader still sees the old file or the new one,
/// never a part, but a power failure may lose the last updates. For small state rewritten on
/// hot paths whose loss costs nothing lasting (a session's topic list, written on every
/// delivery by the router thread, where two fsyncs a delivery were a quarter of its work and
/// most of its wait in a burst of 1 000 sends, issue 13 item 3).
///
/// Errors: as [`write_atomic`].
pub fn replace_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    replace(path, bytes, mode, false)
}

/// A path in `dir` for a temporary file no other writer picks: `<prefix><pid>-<8 hex>`.
pub fn temp_path(dir: &Path, prefix: &str) -> PathBuf {
    dir.join(format!("{prefix}{}-{}", std::process::id(), random_hex(8)))
}

/// Create the file `path` for writing with `mode` (the umask applies), never one that exists.
///
/// Errors: it exists (`AlreadyExists`), or cannot be created.
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

/// Temp file, optional fsync, rename, optional fsync of the folder.
fn replace(path: &Path, bytes: &[u8], mode: u32, durable: bool) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    ensure_dir(dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = temp_path(dir, &format!(".{}.tmp-", name.to_string_lossy()));
    let result = (|| {
        let mut f = create_new(&tmp, mode)?;
        f.write_all(bytes)?;
        // The umask may have narrowed the mode given to open(2); set it exactly.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        if durable {
            f.sync_all()?;
        }
        drop(f);
        fs::rename(&tmp, path)?;
        if durable {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Serialize `value` as pretty JSON (2-space indent) with a final newline and write it
/// atomically (see [`write_atomic`]).
pub fn write_json_atomic<T: serde::Serialize + ?Sized>(
    path: &Path,
    value: &T,
    mode: u32,
) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    text.push('\n');
    write_atomic(path, text.as_bytes(), mode)
}

/// Read a JSON state file written by [`write_json_atomic`]; missing, unreadable or not JSON
/// of `T`'s shape reads as `T::default()` (for state where "none" is the safe reading).
pub fn read_json_or_default<T: serde::de::DeserializeOwned + Default>(path: &Path) -> T {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Read a file to a string; a missing file is `Ok(None)`.
///
/// Errors: it cannot be read, is not UTF-8, or is not a regular file (a FIFO would block
/// the reader until someone writes to it; a device never ends).
pub fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match regular_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Read `r` to its end in chunks of at most 64 KiB, a read a signal interrupted tried again,
/// handing each chunk to `each` while it returns true. `Ok(true)`: read to the end;
/// `Ok(false)`: `each` stopped it.
///
/// Errors: the first read that failed.
pub fn read_chunks(mut r: impl io::Read, mut each: impl FnMut(&[u8]) -> bool) -> io::Result<bool> {
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if !each(&chunk[..n]) {
            return Ok(false);
        }
    }
}

/// `Ok` when `path` (symlinks followed) is a regular file, so reading it ends.
///
/// Errors: it does not exist (`NotFound`), or is a FIFO, socket, device or folder
/// (`InvalidInput`, naming what it is).
pub fn regular_file(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let t = fs::metadata(path)?.file_type();
    if t.is_file() {
        return Ok(());
    }
    let what = if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}, not a file"),
    ))
}

/// Remove a file; a missing file is not an error.
pub fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A random UUID, version 4 (RFC 9562 §5.4), lowercase: `xxxxxxxx-xxxx-4xxx-Yxxx-xxxxxxxxxxxx`
/// with `Y` one of `8 9 a b`. What a launch hands Claude Code as `--session-id`, which takes
/// only a valid UUID.
pub fn random_uuid() -> String {
    let hex = random_hex(16);
    let variant = ["8", "9", "a", "b"][usize::from(hex.as_bytes()[16] % 4)];
    format!(
        "{}-{}-4{}-{variant}{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// `n` random bytes from the operating system, as lowercase hex (`2n` chars).
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    // getrandom only fails when the OS has no entropy source at all; fall back to a value
    // mixed from the time and pid, which is still unique enough for temp names.
    if getrandom::fill(&mut buf).is_err() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ u128::from(std::process::id());
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 16) * 8)) as u8;
        }
    }
    hex(&buf)
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_sets_mode() {
        for write in [write_atomic, replace_atomic] {
            atomic_write_replaces_and_sets_mode_with(write);
        }
    }

    fn atomic_write_replaces_and_sets_mode_with(write: fn(&Path, &[u8], u32) -> io::Result<()>) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/state.json");
        write(&p, b"one", MODE_PRIVATE).unwrap();
        write(&p, b"two", MODE_PRIVATE).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        let mode = crate::testkit::mode_of(&p);
        assert_eq!(mode, 0o600);
        let dmode = crate::testkit::mode_of(dir.path().join("sub"));
        assert_eq!(dmode, 0o700);
        // No temp files are left behind.
        let names: Vec<_> = fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn random_hex_has_the_asked_length_and_differs() {
        let a = random_hex(32);
        let b = random_hex(32);
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn random_uuids_are_version_4_and_differ() {
        let a = random_uuid();
        assert_ne!(a, random_uuid());
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'), "{a}");
        assert!(parts[3].starts_with(['8', '9', 'a', 'b']), "{a}");
        assert!(a
            .bytes()
            .all(|c| c == b'-' || c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
    }

    #[test]
    fn read_optional_maps_missing_to_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_optional(&dir.path().join("nope")).unwrap(), None);
    }
}

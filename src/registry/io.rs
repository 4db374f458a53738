//! Reading and writing `peers-profiles.json` (spec 01 §5): readers never lock and always see
//! whole files; every writer holds an exclusive `fs2` lock on `peers-profiles.lock`, then the
//! original TypeScript tool's lock ([`super::original_lock`]), for its whole
//! read-modify-write.

use fs2::FileExt;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::original_lock::OriginalLock;
use super::parse::{parse, validate};
use super::{Registry, REGISTRY_VERSION};
use crate::fsutil;
use crate::paths::Paths;

/// Why the registry could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// An I/O failure on the registry or its lock file.
    #[error(transparent)]
    Io(fsutil::IoError),
    /// The file exists but breaks the format (spec 01 §5).
    #[error(
        "the peer registry {path} is corrupt: {reason} — run `iapeer verify --fix` to \
         rebuild it from the peer profiles"
    )]
    Corrupt {
        /// The registry file.
        path: PathBuf,
        /// What is wrong, e.g. `personality "bob" is listed more than once`.
        reason: String,
    },
    /// A writer asked to store a registry that breaks the format (nothing was written).
    #[error("refusing to write the peer registry: {reason}")]
    Refused {
        /// What is wrong.
        reason: String,
    },
}

impl Registry {
    /// Read `<root>/peers-profiles.json` without locking. A missing file is an empty
    /// registry; a `version` newer than `REGISTRY_VERSION` is logged as a warning and the
    /// known fields are read.
    ///
    /// Errors: `Io` when unreadable; `Corrupt` for invalid JSON, a non-object, a peer
    /// without a valid personality (or runtime, or cwd), a field of the wrong type, or a
    /// duplicate personality.
    pub fn load(paths: &Paths) -> Result<Registry, RegistryError> {
        let path = paths.registry();
        let text = fsutil::read_optional(&path).map_err(|e| {
            RegistryError::Io(fsutil::IoError::named("read", "the peer registry ", &path)(
                e,
            ))
        })?;
        let Some(text) = text else {
            return Ok(Registry::default());
        };
        let registry = parse(&text).map_err(|reason| RegistryError::Corrupt {
            path: path.clone(),
            reason: reason.to_string(),
        })?;
        if registry.version > REGISTRY_VERSION {
            log::warn!(
                "{} has version {} (this iapeer knows {REGISTRY_VERSION}); reading the known fields",
                path.display(),
                registry.version
            );
        }
        Ok(registry)
    }

    /// Read-modify-write under the registry lock: lock, [`Registry::load`], run `edit`, write
    /// the result (version 2, peers sorted by personality, pretty JSON, mode 0600), unlock.
    /// When `edit` fails nothing is written and its error is returned.
    ///
    /// Errors: `edit`'s error; any `RegistryError` (lock, corrupt file, write, or
    /// `Refused` when the edited registry breaks the format), converted with `From`.
    pub fn update<T, E>(
        paths: &Paths,
        edit: impl FnOnce(&mut Registry) -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<RegistryError>,
    {
        let _lock = RegistryLock::acquire(paths)?;
        let mut registry = Registry::load(paths)?;
        let out = edit(&mut registry)?;
        registry.store(paths)?;
        Ok(out)
    }

    /// Run `f` holding the registry's writer lock, reading and writing nothing: for a file
    /// kept in step with the registry (`rename`'s former-names note).
    ///
    /// Errors: `Io` when the lock cannot be taken.
    pub fn with_lock<T>(paths: &Paths, f: impl FnOnce() -> T) -> Result<T, RegistryError> {
        let _lock = RegistryLock::acquire(paths)?;
        Ok(f())
    }

    /// Overwrite the registry with `registry` under the lock, without reading the current
    /// file (it may be corrupt): the way `iapeer verify --fix` rebuilds it from profiles.
    ///
    /// Errors: `Refused` when `registry` breaks the format; `Io` on lock or write failure.
    pub fn replace(paths: &Paths, registry: Registry) -> Result<(), RegistryError> {
        let _lock = RegistryLock::acquire(paths)?;
        registry.store(paths)
    }

    /// The exact bytes written to disk: version 2, peers sorted by personality, pretty JSON
    /// with a 2-space indent and a final newline.
    ///
    /// Errors: `Refused` when the registry breaks the format.
    pub fn to_file_text(&self) -> Result<String, RegistryError> {
        validate(self).map_err(|reason| RegistryError::Refused {
            reason: reason.to_string(),
        })?;
        let mut out = self.clone();
        out.version = REGISTRY_VERSION;
        out.peers.sort_by(|a, b| a.personality.cmp(&b.personality));
        let mut text = serde_json::to_string_pretty(&out).map_err(|e| RegistryError::Refused {
            reason: e.to_string(),
        })?;
        text.push('\n');
        Ok(text)
    }

    /// Write atomically; the caller holds the lock.
    fn store(&self, paths: &Paths) -> Result<(), RegistryError> {
        let text = self.to_file_text()?;
        let path = paths.registry();
        fsutil::write_atomic(&path, text.as_bytes(), fsutil::MODE_PRIVATE).map_err(|e| {
            RegistryError::Io(fsutil::IoError::named("write", "the peer registry ", &path)(e))
        })
    }
}

/// The exclusive writer lock on `peers-profiles.lock` and the original tool's lock directory
/// `peers-profiles.lock.lock`, released on drop (the original's first).
struct RegistryLock {
    original: Option<OriginalLock>,
    file: File,
}

impl RegistryLock {
    /// Block until this process holds the lock. `flock` locks belong to the open file, so
    /// threads of one process exclude each other as well.
    fn acquire(paths: &Paths) -> Result<RegistryLock, RegistryError> {
        let path = paths.registry_lock();
        let io_err = |e| {
            RegistryError::Io(fsutil::IoError::named("lock", "the peer registry ", &path)(
                e,
            ))
        };
        fsutil::ensure_dir(path.parent().unwrap_or(Path::new("."))).map_err(io_err)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(fsutil::MODE_PRIVATE)
            .open(&path)
            .map_err(io_err)?;
        FileExt::lock_exclusive(&file).map_err(io_err)?;
        // Ours first: writers of this build queue on flock without polling the directory.
        let original = OriginalLock::acquire(&path).map_err(|e| {
            let dir = super::original_lock::lock_dir(&path);
            RegistryError::Io(fsutil::IoError::named("lock", "the peer registry ", &dir)(
                e,
            ))
        })?;
        Ok(RegistryLock {
            original: Some(original),
            file,
        })
    }
}

impl Drop for RegistryLock {
    fn drop(&mut self) {
        drop(self.original.take());
        // Closing the file releases the lock too; unlocking first just makes it prompt.
        let _ = FileExt::unlock(&self.file);
    }
}

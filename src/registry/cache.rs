//! The registry as the daemon's send preparation reads it (issue 13 item 3): parsed once and
//! kept while the file stays the same.
//!
//! Every send's preparation read and parsed `peers-profiles.json` (a `serde_json::Value`
//! tree, then the peers): in a burst of 1 000 calls that was most of the send-prep workers'
//! CPU, spent in `malloc` and its arena locks, on two cores the router needed. A file is
//! "the same" while its device, inode, size, modification and change times (to the
//! nanosecond) are: iapeer replaces the registry atomically, so each write is a new inode;
//! an edit in place changes the times.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::io::RegistryError;
use super::Registry;
use crate::paths::Paths;

/// What identifies one version of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

struct Cached {
    path: PathBuf,
    stamp: Stamp,
    registry: Arc<Registry>,
}

/// One entry: a daemon has one registry.
static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

impl Registry {
    /// [`Registry::load`], reusing the last parse while the file is unchanged (module doc).
    /// A missing file is the empty registry, as for `load`.
    ///
    /// Errors: those of [`Registry::load`], and `Io` (`read`) when the file cannot be
    /// examined.
    pub fn load_cached(paths: &Paths) -> Result<Arc<Registry>, RegistryError> {
        let path = paths.registry();
        let stamp = match std::fs::metadata(&path) {
            Ok(m) => Stamp::of(&m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Arc::new(Registry::default()))
            }
            Err(source) => {
                let at = crate::fsutil::IoError::named("read", "the peer registry ", &path);
                return Err(RegistryError::Io(at(source)));
            }
        };
        let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cache
            .as_ref()
            .filter(|c| c.path == path && c.stamp == stamp)
        {
            return Ok(Arc::clone(&c.registry));
        }
        // Stamped before reading: a write in between leaves a stamp the next call no
        // longer matches, so it reads again.
        let registry = Arc::new(Registry::load(paths)?);
        *cache = Some(Cached {
            path,
            stamp,
            registry: Arc::clone(&registry),
        });
        Ok(registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryPeer;

    fn peer(name: &str, description: &str) -> RegistryPeer {
        RegistryPeer {
            description: description.into(),
            ..RegistryPeer::new(name, &["echo"], "artificial", format!("/tmp/{name}"))
        }
    }

    #[test]
    fn a_parse_is_reused_until_the_file_changes() {
        let (_dir, paths) = crate::testkit::temp_root();
        assert!(
            Registry::load_cached(&paths).unwrap().peers.is_empty(),
            "no file yet"
        );
        Registry::update(&paths, |r| {
            r.peers.push(peer("ann", "one"));
            Ok::<_, RegistryError>(())
        })
        .unwrap();
        let first = Registry::load_cached(&paths).unwrap();
        let again = Registry::load_cached(&paths).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same file is not parsed again"
        );

        // An atomic replace (a new inode), as iapeer writes.
        Registry::update(&paths, |r| {
            r.peers[0].description = "two".into();
            Ok::<_, RegistryError>(())
        })
        .unwrap();
        let after = Registry::load_cached(&paths).unwrap();
        assert_eq!(after.peers[0].description, "two");

        // An edit in place of the same size (another tool, an editor): new times.
        let file = paths.registry();
        let text = std::fs::read_to_string(&file)
            .unwrap()
            .replace("two", "six");
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::write(&file, text).unwrap();
        assert_eq!(
            Registry::load_cached(&paths).unwrap().peers[0].description,
            "six"
        );

        // A broken file is the same error as `load`'s.
        std::fs::write(&file, "{not json").unwrap();
        assert!(Registry::load_cached(&paths).is_err());
    }
}

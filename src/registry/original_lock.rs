//! The registry lock of the original TypeScript iapeer, taken beside our own `fs2` lock so a
//! tool of either kind writing `peers-profiles.json` at the same time cannot lose a write
//! (issue 11 item 6, spec 01 §5).
//!
//! The original's single writer locks `<root>/peers-profiles.lock` with the npm package
//! `proper-lockfile` (`realpath: false`, `stale: 10000`, `update: 1000`): it holds the lock by
//! creating the directory `<root>/peers-profiles.lock.lock` (`mkdir` is atomic), refreshes
//! that directory's mtime every second while it holds it, and treats a directory whose mtime
//! is more than 10 s old as left behind by a dead holder (removed, then taken). We do the
//! same: create the directory, refresh its mtime from a helper thread while held, remove it
//! on release.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Age of the lock directory's mtime after which its holder is taken to be dead (the
/// original's `stale: 10000`).
pub const STALE_AFTER: Duration = Duration::from_secs(10);

/// How often a holder refreshes the directory's mtime (the original's `update: 1000`).
const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// How long a writer waits for the lock before giving up. Longer than [`STALE_AFTER`], so a
/// lock left by a dead holder is always taken over within it.
pub const WAIT_AT_MOST: Duration = Duration::from_secs(30);

/// The lock directory for the lock target `peers-profiles.lock` (proper-lockfile appends
/// `.lock` to the target's path).
pub fn lock_dir(target: &Path) -> PathBuf {
    let mut s = target.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

/// What to do about an existing lock directory whose mtime is `age` old.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// A live holder has it: wait and try again.
    Held,
    /// Its holder stopped refreshing it: remove it and try again.
    Stale,
}

/// The decision on an existing lock directory (pure). A clock that went backwards (`age`
/// unknown) counts as held.
pub fn judge(age: Option<Duration>) -> Existing {
    match age {
        Some(a) if a > STALE_AFTER => Existing::Stale,
        _ => Existing::Held,
    }
}

/// The pause before the `attempt`-th retry (0-based): 50 ms growing by 1.4× to at most
/// 500 ms, as the original's retry schedule.
pub fn backoff(attempt: u32) -> Duration {
    let ms = 50.0 * 1.4f64.powi(attempt.min(20) as i32);
    Duration::from_millis(ms.min(500.0) as u64)
}

/// The original tool's lock, held until dropped.
#[derive(Debug)]
pub struct OriginalLock {
    dir: PathBuf,
    stop: Arc<AtomicBool>,
    refresher: Option<JoinHandle<()>>,
}

impl OriginalLock {
    /// Take the lock on `target` (`<root>/peers-profiles.lock`), waiting up to
    /// [`WAIT_AT_MOST`].
    ///
    /// Errors: `TimedOut` when a live holder keeps it longer (the text names the directory
    /// and what to do); any other I/O error creating it.
    pub fn acquire(target: &Path) -> io::Result<OriginalLock> {
        let dir = lock_dir(target);
        let start = Instant::now();
        let mut attempt = 0;
        loop {
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(OriginalLock::held(dir)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            let age = std::fs::metadata(&dir)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok());
            match judge(age) {
                Existing::Stale => {
                    log::warn!(
                        "{} was left by a writer that stopped; taking it over",
                        dir.display()
                    );
                    // Another writer may have removed it first: either way, try again.
                    let _ = std::fs::remove_dir(&dir);
                    continue;
                }
                Existing::Held if start.elapsed() >= WAIT_AT_MOST => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "another iapeer tool has held the registry lock {} for over {} s; \
                             wait for it to finish (a lock no one refreshes for {} s is taken over)",
                            dir.display(),
                            WAIT_AT_MOST.as_secs(),
                            STALE_AFTER.as_secs()
                        ),
                    ))
                }
                Existing::Held => {
                    std::thread::sleep(backoff(attempt));
                    attempt += 1;
                }
            }
        }
    }

    /// The lock just taken: start refreshing its mtime.
    fn held(dir: PathBuf) -> OriginalLock {
        let stop = Arc::new(AtomicBool::new(false));
        let refresher = {
            let (dir, stop) = (dir.clone(), stop.clone());
            std::thread::Builder::new()
                .name("registry-lock".into())
                .spawn(move || refresh_until(&dir, &stop))
                .ok()
        };
        OriginalLock {
            dir,
            stop,
            refresher,
        }
    }
}

/// Touch `dir` every [`REFRESH_EVERY`] until `stop` is set (checked every 50 ms).
fn refresh_until(dir: &Path, stop: &AtomicBool) {
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if last.elapsed() >= REFRESH_EVERY {
            let now = std::fs::FileTimes::new().set_modified(SystemTime::now());
            let _ = std::fs::File::open(dir).and_then(|f| f.set_times(now));
            last = Instant::now();
        }
    }
}

impl Drop for OriginalLock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.refresher.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_directory_and_the_stale_rule_match_the_original() {
        assert_eq!(
            lock_dir(Path::new("/r/peers-profiles.lock")),
            PathBuf::from("/r/peers-profiles.lock.lock")
        );
        assert_eq!(judge(Some(Duration::from_secs(3))), Existing::Held);
        assert_eq!(judge(Some(Duration::from_secs(11))), Existing::Stale);
        assert_eq!(judge(None), Existing::Held);
        assert_eq!(backoff(0), Duration::from_millis(50));
        assert_eq!(backoff(1), Duration::from_millis(70));
        assert_eq!(backoff(30), Duration::from_millis(500));
    }

    #[test]
    fn taken_released_and_a_stale_one_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("peers-profiles.lock");
        {
            let _l = OriginalLock::acquire(&target).unwrap();
            assert!(lock_dir(&target).is_dir());
        }
        assert!(!lock_dir(&target).exists());
        // A directory left by a dead holder 20 s ago.
        std::fs::create_dir(lock_dir(&target)).unwrap();
        let old =
            std::fs::FileTimes::new().set_modified(SystemTime::now() - Duration::from_secs(20));
        std::fs::File::open(lock_dir(&target))
            .unwrap()
            .set_times(old)
            .unwrap();
        let t = Instant::now();
        let l = OriginalLock::acquire(&target).unwrap();
        assert!(t.elapsed() < Duration::from_secs(2));
        drop(l);
        assert!(!lock_dir(&target).exists());
    }
}

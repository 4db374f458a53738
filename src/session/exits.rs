//! One watcher for the end of every session's child in the daemon (Linux; issue 31 item 4:
//! 1 000 live sessions with at most 3 descriptors each). A pidfd per child costs a
//! descriptor per live session; instead one thread, woken by SIGCHLD through a pipe, looks
//! at each watched child (`waitid(WNOWAIT)`: nothing is reaped here) and wakes the session
//! of each one that ended, which then reaps it as before ([`super::reap::Reaper`]).
//!
//! The watcher is started by the daemon ([`start`]), once; where it is not running (unit
//! tests, or it could not start) a session watches its child with a pidfd as before.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use mio::Waker;

static WATCHED: Mutex<BTreeMap<u32, Arc<Waker>>> = Mutex::new(BTreeMap::new());
static RUNNING: OnceLock<bool> = OnceLock::new();

fn watched() -> MutexGuard<'static, BTreeMap<u32, Arc<Waker>>> {
    // A panic while holding the lock leaves a map that is still valid.
    WATCHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Start the watcher: SIGCHLD writes to a pipe whose reader wakes the sessions whose child
/// ended. Called once by the daemon at start; later calls do nothing. A failure is logged
/// and leaves sessions on their pidfds.
pub fn start() {
    RUNNING.get_or_init(|| match on_sigchld("child-exits", wake_ended) {
        Ok(()) => true,
        Err(e) => {
            log::warn!("no shared watcher of session children ({e}): a pidfd per session");
            false
        }
    });
}

/// Start thread `name`, which runs `look` once per burst of SIGCHLD (signal-hook writes
/// to a pipe the thread reads; the byte count does not matter). Also the subreaper's.
///
/// Errors: the pipe, the signal handler or the thread cannot be made.
pub(crate) fn on_sigchld(name: &str, mut look: impl FnMut() + Send + 'static) -> io::Result<()> {
    let (mut read, write) = UnixStream::pair()?;
    signal_hook::low_level::pipe::register(signal_hook::consts::SIGCHLD, write)?;
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let mut buf = [0u8; 64];
            while read.read(&mut buf).is_ok_and(|n| n > 0) {
                look();
            }
        })?;
    Ok(())
}

/// Watch child `pid` (not yet reaped) and wake `waker` once it ended. `false` when the
/// watcher is not running: the caller watches the child another way.
pub fn watch(pid: u32, waker: Arc<Waker>) -> bool {
    if RUNNING.get() != Some(&true) {
        return false;
    }
    add(pid, waker);
    true
}

/// Add `pid` to the watched children, and wake at once if it ended already (its SIGCHLD
/// may have been read before it was added).
fn add(pid: u32, waker: Arc<Waker>) {
    let mut w = watched();
    if ended(pid) {
        let _ = waker.wake();
    } else {
        w.insert(pid, waker);
    }
}

/// Stop watching `pid` (its session reaped it, or ended without it).
pub fn unwatch(pid: u32) {
    watched().remove(&pid);
}

/// Wake the session of every watched child that ended, and stop watching those.
fn wake_ended() {
    watched().retain(|&pid, waker| {
        if ended(pid) {
            let _ = waker.wake();
            false
        } else {
            true
        }
    });
}

/// Whether child `pid` ended (a zombie, left unreaped: `WNOWAIT`), or is no child of
/// this process any more (reaped: nothing to wait for).
fn ended(pid: u32) -> bool {
    use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
    let Ok(raw) = i32::try_from(pid) else {
        return true;
    };
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(nix::unistd::Pid::from_raw(raw)), flags) {
            Ok(WaitStatus::StillAlive) => return false,
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) | Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::time::{Duration, Instant};

    /// Without the SIGCHLD pipe (not installed in the test process: the other tests' threads
    /// would see EINTR), the look it triggers is made by hand.
    #[test]
    fn a_watched_child_that_ends_wakes_its_session_and_is_left_to_it_to_reap() {
        let mut poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), Token(7)).unwrap());
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        let pid = child.id();
        add(pid, waker.clone());
        assert!(watched().contains_key(&pid), "running: watched");
        wake_ended();
        assert!(
            watched().contains_key(&pid),
            "a look while it runs wakes nobody"
        );
        let by = Instant::now() + Duration::from_secs(10);
        while !ended(pid) {
            assert!(Instant::now() < by, "sleep 0.3 never ended");
            std::thread::sleep(Duration::from_millis(20));
        }
        wake_ended();
        assert!(!watched().contains_key(&pid), "ended: no longer watched");
        let mut events = Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(
            events.iter().any(|e| e.token() == Token(7)),
            "its session was woken"
        );
        // Nothing was reaped: the session's own wait gets the status.
        assert!(child.wait().unwrap().success());
        assert!(ended(pid), "reaped: nothing to wait for");
    }

    #[test]
    fn a_child_that_ended_before_it_was_watched_wakes_at_once() {
        let mut poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), Token(3)).unwrap());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let by = Instant::now() + Duration::from_secs(10);
        while !ended(pid) {
            assert!(Instant::now() < by, "true never ended");
            std::thread::sleep(Duration::from_millis(10));
        }
        add(pid, waker.clone());
        assert!(!watched().contains_key(&pid));
        let mut events = Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(events.iter().any(|e| e.token() == Token(3)));
        assert!(child.wait().unwrap().success());
        unwatch(pid);
    }
}

//! How a session learns that its child ended (spec 02 §1; issue 13 item 4: at most one
//! thread per live session). In the daemon on Linux the shared watcher of
//! [`super::exits`] wakes the session (no descriptor per session: issue 31 item 4); where
//! it does not run, on Linux 5.3 and later the child's pidfd joins the session's own `mio`
//! poll, so no thread waits for it; elsewhere, or when the kernel refuses a pidfd, one small
//! waiter thread per child blocks in `wait` and wakes the session. Either way only
//! this child is reaped (never `waitpid(-1)`), and it leaves the daemon-wide record of live
//! process groups ([`super::groups`]) once it is.

use std::io;
use std::process::{Child, ExitStatus};
use std::sync::Arc;

use crossbeam_channel::Receiver;
use mio::{Registry, Token, Waker};

/// A child being watched for its end.
pub enum Reaper {
    /// Linux: the shared watcher ([`super::exits`]) wakes the session when the child ends,
    /// or else the child's pidfd is registered in the session's poll under the token given
    /// to [`Reaper::start`]; it turns readable when the child ends.
    #[cfg(target_os = "linux")]
    Pidfd {
        /// The pidfd (closed on drop, which deregisters it); `None` when the shared watcher
        /// watches the child.
        _fd: Option<std::os::fd::OwnedFd>,
        /// The child, reaped by [`Reaper::try_exit`].
        child: Child,
        /// Whether the status has been taken already.
        done: bool,
    },
    /// A waiter thread blocks in `wait` and sends the status here.
    Thread(Receiver<io::Result<ExitStatus>>),
}

impl Reaper {
    /// Watch `child`: the daemon's shared watcher where it runs, else a pidfd registered with
    /// `registry` under `token` where the OS has one, else a waiter thread; each wakes the
    /// session when the child ends (the first through `waker`).
    ///
    /// Errors: the waiter thread could not be started (no pidfd either).
    pub fn start(
        child: Child,
        registry: &Registry,
        token: Token,
        waker: Arc<Waker>,
    ) -> io::Result<Reaper> {
        #[cfg(target_os = "linux")]
        if super::exits::watch(child.id(), waker.clone()) {
            return Ok(Reaper::Pidfd {
                _fd: None,
                child,
                done: false,
            });
        }
        #[cfg(target_os = "linux")]
        let child = match pidfd(&child) {
            Ok(fd) => {
                use std::os::fd::AsRawFd;
                registry.register(
                    &mut mio::unix::SourceFd(&fd.as_raw_fd()),
                    token,
                    mio::Interest::READABLE,
                )?;
                return Ok(Reaper::Pidfd {
                    _fd: Some(fd),
                    child,
                    done: false,
                });
            }
            Err(e) => {
                log::debug!(
                    "no pidfd for child {} ({e}); a waiter thread watches it",
                    child.id()
                );
                child
            }
        };
        #[cfg(not(target_os = "linux"))]
        let _ = (registry, token);
        spawn_waiter(child, waker)
    }

    /// The child's exit status once it has ended (exactly once); `None` while it runs.
    pub fn try_exit(&mut self) -> Option<io::Result<ExitStatus>> {
        match self {
            #[cfg(target_os = "linux")]
            Reaper::Pidfd { child, done, .. } => {
                if *done {
                    return None;
                }
                let status = match child.try_wait() {
                    Ok(None) => return None,
                    Ok(Some(s)) => Ok(s),
                    Err(e) => Err(e),
                };
                *done = true;
                super::exits::unwatch(child.id());
                super::groups::unregister(child.id());
                Some(status)
            }
            Reaper::Thread(rx) => rx.try_recv().ok(),
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for Reaper {
    /// A session that ends without having seen its child's end (its thread panicked, its
    /// setup failed) must not leave a zombie or a stale entry in [`super::groups`]: reap now
    /// if the child is gone, else hand it to a waiter thread (a rare path).
    fn drop(&mut self) {
        if let Reaper::Pidfd { child, done, .. } = self {
            if *done {
                return;
            }
            super::exits::unwatch(child.id());
            if let Ok(Some(_)) = child.try_wait() {
                super::groups::unregister(child.id());
                return;
            }
            let pid = child.id();
            // The Child itself cannot be moved out of `&mut self`: wait for the pid.
            let spawned = std::thread::Builder::new()
                .name("session-waiter".into())
                .spawn(move || {
                    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid as i32), None);
                    super::groups::unregister(pid);
                });
            if let Err(e) = spawned {
                log::error!("cannot start a waiter for child {pid}: {e}");
            }
        }
    }
}

/// `pidfd_open(2)` for a child that has not been reaped (so its pid cannot have been reused).
#[cfg(target_os = "linux")]
fn pidfd(child: &Child) -> io::Result<std::os::fd::OwnedFd> {
    super::contain::procs::pidfd_open(child.id())
}

/// One waiter thread for `child`: reaps it, records that, and wakes the session.
fn spawn_waiter(mut child: Child, waker: Arc<Waker>) -> io::Result<Reaper> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("session-waiter".into())
        .spawn(move || {
            let status = child.wait();
            super::groups::unregister(child.id());
            let _ = tx.send(status);
            let _ = waker.wake();
        })?;
    Ok(Reaper::Thread(rx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};
    use std::time::{Duration, Instant};

    /// Poll until the reaper reports the exit, at most `limit`.
    fn wait_exit(poll: &mut Poll, r: &mut Reaper, limit: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + limit;
        let mut events = Events::with_capacity(4);
        while Instant::now() < end {
            poll.poll(&mut events, Some(Duration::from_millis(50)))
                .ok()?;
            if let Some(s) = r.try_exit() {
                return s.ok();
            }
        }
        None
    }

    /// The reaper of a real `sh -c <script>`, registered with `poll`.
    fn reaper_of(poll: &Poll, script: &str) -> Reaper {
        let waker = Arc::new(Waker::new(poll.registry(), Token(9)).unwrap());
        let child = std::process::Command::new("sh")
            .args(["-c", script])
            .spawn()
            .unwrap();
        Reaper::start(child, poll.registry(), Token(1), waker).unwrap()
    }

    #[test]
    fn the_exit_of_a_real_child_is_reported_once_with_its_status() {
        let mut poll = Poll::new().unwrap();
        let mut r = reaper_of(&poll, "sleep 0.2; exit 7");
        #[cfg(target_os = "linux")]
        assert!(
            matches!(r, Reaper::Pidfd { .. }),
            "Linux ≥ 5.3 watches the child without a thread"
        );
        assert!(r.try_exit().is_none(), "still running");
        let status = wait_exit(&mut poll, &mut r, Duration::from_secs(10)).expect("exit seen");
        assert_eq!(status.code(), Some(7));
        assert!(r.try_exit().is_none(), "reported exactly once");
    }

    #[test]
    fn the_pidfd_wakes_the_poll_when_the_child_ends() {
        let mut poll = Poll::new().unwrap();
        let mut r = reaper_of(&poll, "sleep 0.3");
        let mut events = Events::with_capacity(4);
        let t = Instant::now();
        // One blocking poll with a long timeout returns on the child's end, not the timeout.
        poll.poll(&mut events, Some(Duration::from_secs(20)))
            .unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(events
            .iter()
            .any(|e| e.token() == Token(1) || e.token() == Token(9)));
        let status = wait_exit(&mut poll, &mut r, Duration::from_secs(5)).expect("exit");
        assert!(status.success());
    }
}

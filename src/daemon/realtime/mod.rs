//! Real-time scheduling of the daemon's latency threads (issue 31 item 3).
//!
//! Under a burst on few cores the router, the HTTP acceptor and the send-prep workers — whose
//! time every waiting caller pays — waited on the run queue behind everything else on the
//! host: the kernel's autogroup (on by default) makes every session, each agent started with
//! `setsid` included, a scheduling group of its own, so a thread's `nice` only ranks it inside
//! the daemon's group ([`crate::session::priority`]). 1 000 concurrent `tools/call` to 20 echo
//! peers on 2 cores had a per-burst daemon overhead p99 of 10–18 ms. With these threads at
//! `SCHED_FIFO` it was 1.1–3.3 ms in 10 of 10 bursts, at load 18–20 too, when first measured
//! (feaeb05); measured again on 2026-12-08, that commit's successor (af13c68) and `main` both
//! had 2–5 of 10 bursts under 5 ms. A real-time thread still waits for a lock a preempted
//! normal thread holds: the router's inbox no longer has one ([`crate::daemon::router::inbox`]),
//! the message-id ledger has one per recipient, and glibc's arena locks remain
//! (`docs/ARCHITECTURE.md`, the burst paragraph).
//!
//! So, when the daemon may ([`decide`]: root, `CAP_SYS_NICE`, or a soft `RLIMIT_RTPRIO` of
//! at least [`PRIORITY`]) and `IAPEER_REALTIME` is not `0`, each of those threads sets itself
//! to `SCHED_FIFO` at [`PRIORITY`] when it starts ([`enter`]), with `SCHED_RESET_ON_FORK`:
//! whatever it starts — an agent's process, a session or launcher thread — begins at the
//! normal policy. The event-stream writer (`http-streams`) runs so too: the router feeds it
//! through the event bus, whose queues drop a stream that falls [`crate::eventbus::QUEUE`]
//! events behind, and at the normal policy on a loaded host it fell behind a burst the
//! router published while its clients read all along. Session threads and agents never run
//! real-time. A [`watchdog`] thread at
//! the normal policy puts a real-time thread that uses more than half a core back to
//! `SCHED_OTHER` (a loop must not hold a core). Linux only; elsewhere nothing changes.

#[cfg(target_os = "linux")]
pub mod watchdog;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The `SCHED_FIFO` priority of a latency thread: 1, the lowest. Any real-time priority runs
/// before every `SCHED_OTHER` thread, which is all these threads need; the lowest one leaves
/// every real-time thread the host has of its own (the kernel's per-CPU threads at 99,
/// threaded interrupts at 50, audio servers' at 5–20) ahead of the daemon, and needs only
/// `RLIMIT_RTPRIO` ≥ 1 (systemd `LimitRTPRIO=1`) where the daemon is not privileged.
pub const PRIORITY: i32 = 1;

/// Whether the daemon's latency threads run real-time, as decided once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Real-time at [`PRIORITY`]: the reason it is allowed (`root`, `CAP_SYS_NICE`,
    /// `RLIMIT_RTPRIO n`).
    On(String),
    /// `IAPEER_REALTIME=0`.
    OptedOut,
    /// Not root, no `CAP_SYS_NICE`, and a soft `RLIMIT_RTPRIO` below [`PRIORITY`] (the value).
    NotAllowed(u64),
    /// Allowed on paper but the kernel refused (a cgroup with real-time group scheduling and
    /// no real-time budget, a sandbox): the error.
    Refused(String),
    /// Not Linux, or the daemon has not started (a unit test, the CLI).
    Unsupported,
}

/// What the process may do, as [`decide`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rights {
    /// The effective user id is 0.
    pub root: bool,
    /// `CAP_SYS_NICE` is in the effective capability set.
    pub cap_sys_nice: bool,
    /// The soft `RLIMIT_RTPRIO` (`u64::MAX` for unlimited).
    pub rtprio: u64,
}

/// The mode for a daemon with `rights` whose `IAPEER_REALTIME` is `enabled` (the config's
/// `realtime`). Pure.
pub fn decide(enabled: bool, rights: Rights) -> Mode {
    if !enabled {
        Mode::OptedOut
    } else if rights.root {
        Mode::On("root".into())
    } else if rights.cap_sys_nice {
        Mode::On("CAP_SYS_NICE".into())
    } else if rights.rtprio >= PRIORITY as u64 {
        Mode::On(format!("RLIMIT_RTPRIO {}", rights.rtprio))
    } else {
        Mode::NotAllowed(rights.rtprio)
    }
}

/// Whether the hexadecimal capability set of a `/proc/<pid>/status` text's `CapEff:` line
/// holds `CAP_SYS_NICE` (bit 23). A text without the line: no. Pure.
pub fn cap_sys_nice_in(status: &str) -> bool {
    const CAP_SYS_NICE: u32 = 23;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0)
}

#[cfg(target_os = "linux")]
fn rights() -> Rights {
    use nix::sys::resource::{getrlimit, Resource};
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    Rights {
        root: nix::unistd::geteuid().is_root(),
        cap_sys_nice: cap_sys_nice_in(&status),
        rtprio: getrlimit(Resource::RLIMIT_RTPRIO).map_or(0, |(soft, _)| soft),
    }
}

static MODE: OnceLock<Mutex<Mode>> = OnceLock::new();
/// Set by [`start`] when the mode is [`Mode::On`]; cleared when the kernel refuses.
static ACTIVE: AtomicBool = AtomicBool::new(false);

fn mode_cell() -> &'static Mutex<Mode> {
    MODE.get_or_init(|| Mutex::new(Mode::Unsupported))
}

fn set_mode(mode: Mode) {
    *mode_cell().lock().unwrap_or_else(|e| e.into_inner()) = mode;
}

/// The mode now (for `status` and `doctor`).
pub fn mode() -> Mode {
    mode_cell()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// The mode and the real-time threads now, for the `status` answer.
pub fn status() -> crate::protocol::RealtimeStatus {
    let (mode, detail) = match mode() {
        Mode::On(why) => ("on", why),
        Mode::OptedOut => ("off", String::new()),
        Mode::NotAllowed(n) => ("not-allowed", format!("RLIMIT_RTPRIO {n}")),
        Mode::Refused(e) => ("refused", e),
        Mode::Unsupported => ("unsupported", String::new()),
    };
    #[cfg(target_os = "linux")]
    let (threads, demoted) = (
        watchdog::threads()
            .into_iter()
            .map(|(_, n)| n.into())
            .collect(),
        watchdog::demoted(),
    );
    #[cfg(not(target_os = "linux"))]
    let (threads, demoted) = (Vec::new(), Vec::new());
    crate::protocol::RealtimeStatus {
        mode: mode.into(),
        detail,
        priority: PRIORITY,
        threads,
        demoted,
    }
}

/// Decide the mode for this daemon (`enabled`: `IAPEER_REALTIME` is not `0`), log it, and
/// start the [`watchdog`] when it is on. Call once, before the latency threads start.
pub fn start(enabled: bool) {
    #[cfg(target_os = "linux")]
    {
        let mode = decide(enabled, rights());
        match &mode {
            Mode::On(why) => {
                log::info!(
                    "realtime: router, http-accept, http-streams and send-prep threads run SCHED_FIFO \
                     {PRIORITY} \
                     (allowed: {why})"
                );
                ACTIVE.store(true, Ordering::SeqCst);
                watchdog::start();
            }
            Mode::OptedOut => log::info!("realtime: off (IAPEER_REALTIME=0)"),
            Mode::NotAllowed(n) => log::info!(
                "realtime: not allowed (not root, no CAP_SYS_NICE, RLIMIT_RTPRIO {n}): the \
                 latency threads run at the normal policy"
            ),
            Mode::Refused(_) | Mode::Unsupported => {}
        }
        set_mode(mode);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = enabled;
}

/// A latency thread's hold on real-time scheduling: the [`watchdog`] watches the thread while
/// this lives. Dropped at the thread's end.
pub struct Realtime {
    #[cfg(target_os = "linux")]
    tid: Option<i32>,
}

impl Drop for Realtime {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(tid) = self.tid {
            watchdog::forget(tid);
        }
    }
}

/// Put the calling thread (named `name` in logs) at `SCHED_FIFO` [`PRIORITY`] with
/// `SCHED_RESET_ON_FORK` when [`start`] turned real-time on; else nothing. Keep the result
/// for the thread's life. A refusal by the kernel is logged once and turns real-time off for
/// the threads that start later.
pub fn enter(name: &'static str) -> Realtime {
    #[cfg(target_os = "linux")]
    {
        if !ACTIVE.load(Ordering::Relaxed) {
            return Realtime { tid: None };
        }
        let tid = nix::unistd::gettid().as_raw();
        match set_policy(tid, libc_fifo()) {
            Ok(()) => {
                watchdog::watch(tid, name);
                Realtime { tid: Some(tid) }
            }
            Err(e) => {
                if ACTIVE.swap(false, Ordering::SeqCst) {
                    log::warn!(
                        "realtime: the kernel refused SCHED_FIFO for the {name} thread ({e}): \
                         the latency threads run at the normal policy"
                    );
                    set_mode(Mode::Refused(e.to_string()));
                }
                Realtime { tid: None }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = name;
        Realtime {}
    }
}

/// Put a thread just started by a real-time thread at `SCHED_FIFO` [`PRIORITY`] from the
/// outside, when [`start`] turned real-time on; else nothing. A real-time thread's children
/// are born at the normal policy (`SCHED_RESET_ON_FORK`), and a send-prep worker born so
/// waits behind every busy agent before its own [`enter`] runs (17–24 ms in a burst,
/// issue 31 item 3); this gives it the CPU at once. Its own [`enter`] still sets the flag and
/// puts it under the watchdog. Best effort: a refusal is left to that [`enter`] to report.
pub fn promote<T>(thread: &std::thread::JoinHandle<T>) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::thread::JoinHandleExt;
        if !ACTIVE.load(Ordering::Relaxed) {
            return;
        }
        let param = nix::libc::sched_param {
            sched_priority: PRIORITY,
        };
        // SAFETY: the handle's pthread_t is alive (the thread is joinable until the handle is
        // dropped, which the caller does after this); `param` outlives the call.
        unsafe {
            nix::libc::pthread_setschedparam(thread.as_pthread_t(), nix::libc::SCHED_FIFO, &param);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = thread;
}

/// A policy for [`set_policy`]: (policy with flags, priority).
#[cfg(target_os = "linux")]
type Policy = (nix::libc::c_int, nix::libc::c_int);

#[cfg(target_os = "linux")]
fn libc_fifo() -> Policy {
    use nix::libc;
    (libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, PRIORITY)
}

/// `SCHED_OTHER` (nice kept).
#[cfg(target_os = "linux")]
fn libc_other() -> Policy {
    (nix::libc::SCHED_OTHER, 0)
}

/// Set thread `tid`'s scheduling policy. Errors: the kernel's (`EPERM`, `ESRCH`).
#[cfg(target_os = "linux")]
fn set_policy(tid: i32, (policy, priority): Policy) -> std::io::Result<()> {
    use nix::libc;
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; no other memory.
    match unsafe { libc::sched_setscheduler(tid, policy, &param) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOBODY: Rights = Rights {
        root: false,
        cap_sys_nice: false,
        rtprio: 0,
    };

    #[test]
    fn real_time_when_root_capable_or_limited_high_enough_and_not_opted_out() {
        assert_eq!(
            decide(
                false,
                Rights {
                    root: true,
                    ..NOBODY
                }
            ),
            Mode::OptedOut
        );
        assert_eq!(
            decide(
                true,
                Rights {
                    root: true,
                    ..NOBODY
                }
            ),
            Mode::On("root".into())
        );
        assert_eq!(
            decide(
                true,
                Rights {
                    cap_sys_nice: true,
                    ..NOBODY
                }
            ),
            Mode::On("CAP_SYS_NICE".into())
        );
        assert_eq!(
            decide(
                true,
                Rights {
                    rtprio: 1,
                    ..NOBODY
                }
            ),
            Mode::On("RLIMIT_RTPRIO 1".into())
        );
        assert_eq!(decide(true, NOBODY), Mode::NotAllowed(0));
    }

    #[test]
    fn cap_sys_nice_is_bit_23_of_cap_eff() {
        let status = |eff: &str| format!("Name:\tx\nCapInh:\t0000000000800000\nCapEff:\t{eff}\n");
        assert!(cap_sys_nice_in(&status("0000000000800000")));
        assert!(cap_sys_nice_in(&status("000001ffffffffff")));
        assert!(!cap_sys_nice_in(&status("0000000000000000")));
        assert!(!cap_sys_nice_in(&status("00000000007fffff")));
        assert!(!cap_sys_nice_in("Name:\tx\n"));
    }
}

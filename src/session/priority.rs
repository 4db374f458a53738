//! Thread priority inside the daemon (issue 13 item 3): a session thread's screen work
//! yields the CPU to the daemon's routing threads.
//!
//! Under load — a burst of sends to many live agents on few cores — the session threads
//! (each feeding its pane output through the screen model) are most of the daemon's CPU, and
//! the router and HTTP threads, whose time every waiting caller pays, queued behind them for
//! a core: 1 000 concurrent calls to 20 echo peers on 2 cores had 15 ms median and 66 ms p99
//! of daemon overhead per call. With session threads at nice [`SESSION_NICE`] the router and
//! the HTTP thread run first when they have work, and the screen work takes the rest of the
//! CPU (a lower weight, not a smaller amount, when nothing else is runnable). Measured with
//! `scripts/bench.sh` (burst phase, five runs each): overhead median 15–55 ms and p99
//! 66–139 ms with every thread at nice 0; median 4.5–15 ms and p99 12–49 ms with session
//! threads at nice 10 (19 was no better); the deliveries' own time (`ms=`) did not grow.
//!
//! Linux only: there `setpriority(PRIO_PROCESS, tid)` sets one thread's nice value. An agent
//! is spawned before its session thread lowers itself, so it keeps the daemon's priority.
//! Elsewhere (macOS sets a whole process's priority that way) this does nothing.

/// The nice value of a session thread (the routing threads stay at the daemon's, 0 as a rule).
pub const SESSION_NICE: i32 = 10;

/// Lower the calling thread's priority to [`SESSION_NICE`] above its nice value (the
/// kernel caps the sum at 19). A failure (a sandbox that forbids it) is logged at debug
/// level and changes nothing else.
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    {
        use nix::libc;
        let tid = nix::unistd::gettid().as_raw();
        // SAFETY: plain syscalls about the calling thread itself; no memory is passed.
        // (getpriority's -1 may be an error or the value; either way the sum is a valid
        // nice, clamped by the kernel to 19.)
        let rc = unsafe {
            let base = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
            libc::setpriority(
                libc::PRIO_PROCESS,
                tid as libc::id_t,
                base.saturating_add(SESSION_NICE),
            )
        };
        if rc != 0 {
            log::debug!(
                "session thread {tid}: could not lower its priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The nice value of thread `tid` of this process, from /proc (field 19 of `stat`).
    fn nice_of(tid: i32) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        // The name (field 2) is in parentheses and may hold spaces: count after it.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[test]
    fn only_the_calling_thread_is_lowered() {
        let me = nix::unistd::gettid().as_raw();
        let before = nice_of(me);
        let (lowered, after) = std::thread::spawn(|| {
            let tid = nix::unistd::gettid().as_raw();
            let before = nice_of(tid);
            lower_this_thread();
            (nice_of(tid), before)
        })
        .join()
        .unwrap();
        assert_eq!(after, before, "a new thread starts at its creator's nice");
        assert_eq!(lowered, (before + SESSION_NICE).min(19));
        assert_eq!(
            nice_of(me),
            before,
            "the calling thread's siblings keep theirs"
        );
    }
}

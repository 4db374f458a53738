//! The real-time threads' watchdog: a thread at the normal policy that reads, every
//! [`PERIOD`], the CPU time of each `SCHED_FIFO` thread of the daemon
//! (`/proc/self/task/<tid>/schedstat`, ns) and puts a thread that used more than
//! [`MAX_SHARE_PERCENT`] % of a core over the period back to `SCHED_OTHER` for good, with one
//! warning in `daemon.log`. A real-time thread that loops would otherwise hold a core from
//! every normal thread on the host; the router and the acceptor wait for work most of the
//! time (a 1 000-call burst costs each of them tens of ms per second).
//!
//! The kernel's own real-time throttling (`sched_rt_runtime_us`, 95 % of each second, and
//! the fair server's share for normal threads) lets this thread run even when the looping
//! thread has the only core. `RLIMIT_RTTIME` was not used: its signal (`SIGXCPU`) goes to the
//! process, not the thread, and its hard limit kills the daemon.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the watchdog looks.
pub const PERIOD: Duration = Duration::from_secs(1);
/// The share of one core (percent, over one period) above which a thread is demoted.
pub const MAX_SHARE_PERCENT: u64 = 50;

/// Whether a thread that used `cpu` of a core over `wall` used too much: more than
/// [`MAX_SHARE_PERCENT`] % of it, measured over at least half a [`PERIOD`] (a shorter window,
/// a late first reading, says nothing). Pure.
pub fn overused(cpu: Duration, wall: Duration) -> bool {
    wall >= PERIOD / 2 && cpu.as_nanos() * 100 > wall.as_nanos() * MAX_SHARE_PERCENT as u128
}

/// A watched thread: its id, name, and its CPU time at the last look.
struct Watched {
    tid: i32,
    name: &'static str,
    last: Option<(Duration, Instant)>,
}

static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());
/// The names of the threads demoted so far.
static DEMOTED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// The names of the threads demoted so far (one entry per demotion).
pub fn demoted() -> Vec<String> {
    DEMOTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|n| n.to_string())
        .collect()
}

fn watched() -> std::sync::MutexGuard<'static, Vec<Watched>> {
    WATCHED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Watch thread `tid` (now real-time) from the next look.
pub(super) fn watch(tid: i32, name: &'static str) {
    watched().push(Watched {
        tid,
        name,
        last: None,
    });
}

/// Stop watching `tid` (its thread ends).
pub(super) fn forget(tid: i32) {
    watched().retain(|w| w.tid != tid);
}

/// The real-time threads watched now: (tid, name).
pub fn threads() -> Vec<(i32, &'static str)> {
    watched().iter().map(|w| (w.tid, w.name)).collect()
}

/// Thread `tid`'s CPU time so far (the first field of its schedstat, ns); `None` when it is
/// gone or the file cannot be read.
fn cpu_of(tid: i32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let ns = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// Start the watchdog thread (once, from [`super::start`]). A failure to start it is logged.
pub(super) fn start() {
    let spawned = std::thread::Builder::new()
        .name("rt-watchdog".into())
        .spawn(|| loop {
            std::thread::sleep(PERIOD);
            look();
        });
    if let Err(e) = spawned {
        log::error!("realtime: cannot start the watchdog thread: {e}");
    }
}

/// One look at every watched thread: demote the ones that used too much.
fn look() {
    let now = Instant::now();
    watched().retain_mut(|w| {
        let Some(cpu) = cpu_of(w.tid) else {
            // Gone without its guard (a thread that did not unwind): nothing to watch.
            return false;
        };
        let over = w.last.is_some_and(|(cpu0, at)| {
            overused(cpu.saturating_sub(cpu0), now.saturating_duration_since(at))
        });
        if !over {
            w.last = Some((cpu, now));
            return true;
        }
        let used = w
            .last
            .map(|(cpu0, at)| (cpu.saturating_sub(cpu0), now.saturating_duration_since(at)))
            .unwrap_or_default();
        DEMOTED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w.name);
        match super::set_policy(w.tid, super::libc_other()) {
            Ok(()) => log::warn!(
                "realtime: the {} thread (tid {}) used {} ms of CPU in {} ms: back to the \
                 normal policy for the rest of its life (a loop must not hold a core)",
                w.name,
                w.tid,
                used.0.as_millis(),
                used.1.as_millis()
            ),
            Err(e) => log::error!(
                "realtime: cannot put the {} thread (tid {}) back to the normal policy: {e}",
                w.name,
                w.tid
            ),
        }
        false
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn over_half_a_core_over_a_period_is_too_much() {
        assert!(overused(MS(510), MS(1000)));
        assert!(overused(MS(1000), MS(1000)));
        assert!(overused(MS(600), MS(1100)));
        assert!(!overused(MS(500), MS(1000)), "exactly half is allowed");
        assert!(!overused(MS(80), MS(1000)), "a burst's share");
        assert!(!overused(MS(0), MS(1000)));
    }

    #[test]
    fn a_window_shorter_than_half_a_period_says_nothing() {
        assert!(!overused(MS(400), MS(400)));
        assert!(overused(MS(500), MS(500)));
    }

    /// The reading the watchdog decides on: a spinning thread's CPU time from /proc grows
    /// by far more than a waiting thread's over a period; a thread that is gone reads as none.
    #[test]
    fn cpu_time_of_a_spinning_thread_is_read_from_proc() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let spinner = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            while !s.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let tid = rx.recv().unwrap();
        let cpu0 = cpu_of(tid).unwrap();
        std::thread::sleep(PERIOD);
        let used = cpu_of(tid).unwrap() - cpu0;
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        // On a shared, loaded machine the spinner may get less than a core, still far more
        // than this.
        assert!(
            used > MS(100),
            "the spinner used {used:?} of CPU in a second"
        );
        assert!(cpu_of(i32::MAX).is_none(), "no such thread");
    }
}

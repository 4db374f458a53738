//! The daemon-wide record of live child process groups (spec 02 §1 "Shutdown"). Every
//! session registers its child's process group when it starts and removes it once the child
//! is reaped, so the daemon can end what is left when the router cannot (the router thread
//! failed, or shutdown ran out of time).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::child::signal_group;

static LIVE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

fn live() -> std::sync::MutexGuard<'static, BTreeSet<u32>> {
    // A panic while holding the lock leaves a set that is still valid.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Record a started child; `pgid` is its pid (children lead their own process group).
/// [`super::spawn`] records each child it starts before it lets go of its spawn lock.
pub fn register(pgid: u32) {
    live().insert(pgid);
}

/// Whether `pgid` is a recorded child not yet reaped.
pub fn is_live(pgid: u32) -> bool {
    live().contains(&pgid)
}

/// Forget a child once it has been reaped.
pub fn unregister(pgid: u32) {
    live().remove(&pgid);
}

/// The process groups of children not yet reaped.
pub fn snapshot() -> Vec<u32> {
    live().iter().copied().collect()
}

/// End every recorded group: SIGHUP and SIGTERM now, SIGKILL to those still unreaped after
/// `grace`. Returns how many groups were signalled. Blocks for at most `grace` (plus a poll
/// step of 20 ms).
pub fn end_all(grace: Duration) -> usize {
    let groups = snapshot();
    for &g in &groups {
        let _ = signal_group(g, Signal::SIGHUP);
        let _ = signal_group(g, Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while !groups.iter().all(|g| !live().contains(g)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for g in groups.iter().filter(|g| live().contains(g)) {
        let _ = signal_group(*g, Signal::SIGKILL);
    }
    groups.len()
}

//! The daemon as child subreaper (Linux, where it cannot make cgroups): a process whose
//! parent dies is re-parented to the daemon instead of PID 1, so it stays findable; the
//! daemon reaps every such child when it ends (woken by SIGCHLD), so no zombie piles up,
//! and ends what is left of its sessions' trees at shutdown.

use std::collections::BTreeSet;
use std::io;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

use super::procs::{self, Daemon, Proc};

/// Make this process the child subreaper of its descendants and start the thread that
/// reaps what is re-parented to it. Returns where the daemon stands.
///
/// Errors: `prctl(PR_SET_CHILD_SUBREAPER)` refused, or the SIGCHLD pipe or thread cannot
/// be made.
pub fn start() -> io::Result<Daemon> {
    nix::sys::prctl::set_child_subreaper(true)?;
    let d = Daemon::me();
    crate::session::exits::on_sigchld("orphan-reaper", move || {
        reap(&d);
    })?;
    Ok(d)
}

/// Reap every child re-parented to the daemon that has ended; returns how many. A child
/// the daemon started itself is left to its owner (its `Child` waits for it): sessions'
/// children are recorded in `session::groups` (checked with new spawns held, so one just
/// started is recorded already), the others are told apart by [`procs::adopted`].
pub fn reap(d: &Daemon) -> usize {
    let _spawns = crate::session::spawn::hold_spawns();
    let mut n = 0;
    for p in procs::walk() {
        if p.zombie && procs::adopted(&p, d) && !crate::session::groups::is_live(p.pid) {
            let pid = Pid::from_raw(p.pid as i32);
            if waitpid(pid, Some(WaitPidFlag::WNOHANG)).is_ok() {
                n += 1;
            }
        }
    }
    n
}

/// The processes of the daemon's sessions' trees in `procs`: its descendants outside its
/// own process session (what it starts itself — notifier scripts, installers — stays in it
/// and is left to its owner), zombies left out.
pub fn session_trees(procs: &[Proc], d: &Daemon) -> BTreeSet<procs::Named> {
    let mut found = BTreeSet::new();
    let mut stack = vec![d.pid];
    while let Some(parent) = stack.pop() {
        for p in procs
            .iter()
            .filter(|p| p.ppid == parent && p.sid != d.sid && !p.zombie)
        {
            if found.insert(p.named()) {
                stack.push(p.pid);
            }
        }
    }
    found
}

/// End what is left of every session's tree (shutdown): SIGTERM, SIGKILL to what is still
/// there after `grace`, then reap (each wait at most `grace`). Returns how many processes there were.
pub fn end_all(d: &Daemon, grace: Duration) -> usize {
    let left = session_trees(&procs::walk(), d);
    if left.is_empty() {
        return 0;
    }
    for sig in [Signal::SIGTERM, Signal::SIGKILL] {
        for &(pid, start) in &session_trees(&procs::walk(), d) {
            procs::signal_if(pid, sig, |p| {
                procs::read(p).is_some_and(|q| q.start == start)
            });
        }
        let by = Instant::now() + grace;
        while !session_trees(&procs::walk(), d).is_empty() && Instant::now() < by {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    reap(d);
    left.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_trees_skip_the_daemons_own_session_and_zombies() {
        let d = Daemon {
            pid: 100,
            pgid: 90,
            sid: 90,
        };
        let p = |pid, ppid, sid, zombie| Proc {
            pid,
            ppid,
            pgid: pid,
            sid,
            start: 1,
            zombie,
        };
        let procs = [
            p(100, 1, 90, false),
            p(200, 100, 200, false), // a session's agent
            p(201, 200, 201, false), // what it started
            p(202, 100, 202, true),  // an orphan that ended
            p(300, 100, 90, false),  // a notifier script
            p(301, 300, 301, false), // what it started
            p(400, 1, 400, false),   // the user's
        ];
        let pids: Vec<u32> = session_trees(&procs, &d).iter().map(|n| n.0).collect();
        assert_eq!(pids, vec![200, 201]);
    }
}

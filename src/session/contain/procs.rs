//! The process table as `/proc` shows it, and the decisions made on it (Linux): which
//! processes a session started ([`members`]), which children of the daemon were re-parented
//! to it ([`adopted`]), and signalling a process only while it is still the one that was
//! chosen ([`signal_if`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use nix::libc;
use nix::sys::signal::Signal;

/// One process, from `/proc/<pid>/stat` (proc(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid (the daemon once re-parented to it as subreaper).
    pub ppid: u32,
    /// Its process group.
    pub pgid: u32,
    /// Its process session.
    pub sid: u32,
    /// Its start time, in clock ticks after boot: with the pid, it names the process for
    /// good (a pid is reused, the pair is not).
    pub start: u64,
    /// Whether it has ended and waits to be reaped (state `Z`).
    pub zombie: bool,
}

/// A process named for good: (pid, start time).
pub type Named = (u32, u64);

impl Proc {
    /// The pair that names this process for good.
    pub fn named(&self) -> Named {
        (self.pid, self.start)
    }
}

/// Parse one `/proc/<pid>/stat` line; `None` when it is not one. The command name (field 2)
/// is in parentheses and may hold spaces and parentheses, so fields are counted after the
/// last `)`.
pub fn parse_stat(pid: u32, text: &str) -> Option<Proc> {
    let rest = text.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state (3), ppid (4), pgrp (5), session (6) … starttime (22).
    let num = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(Proc {
        pid,
        ppid: u32::try_from(num(4)?).ok()?,
        pgid: u32::try_from(num(5)?).ok()?,
        sid: u32::try_from(num(6)?).ok()?,
        start: num(22)?,
        zombie: *f.first()? == "Z",
    })
}

/// One process, or `None` once it is gone.
pub fn read(pid: u32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// Every process of the machine (of this pid namespace) right now: one read of
/// `/proc/<pid>/stat` per process. Processes that end during the walk are left out.
pub fn walk() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(read)
        .collect()
}

/// The daemon's own place: what its children inherit unless they change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Daemon {
    pub pid: u32,
    pub pgid: u32,
    pub sid: u32,
}

impl Daemon {
    /// This process.
    pub fn me() -> Daemon {
        let pid = std::process::id();
        let (pgid, sid) = read(pid).map_or((pid, pid), |p| (p.pgid, p.sid));
        Daemon { pid, pgid, sid }
    }
}

/// Whether `p`, a child of the daemon, came to it by re-parenting (the daemon is the
/// subreaper of what its children start) rather than being started by it. Everything the
/// daemon starts itself stays in its process session, in its process group or one of its
/// own (`Command::process_group(0)`); a session's child starts a session of its own but is
/// recorded in `session::groups` — the caller leaves those alone.
pub fn adopted(p: &Proc, d: &Daemon) -> bool {
    p.ppid == d.pid && !(p.sid == d.sid && (p.pgid == p.pid || p.pgid == d.pgid))
}

/// What is known of one session's tree.
pub struct Tree<'a> {
    /// The session's child (the agent), named for good.
    pub leader: Named,
    /// Processes found in the tree before (they stay members while they live, wherever they
    /// were re-parented).
    pub known: &'a BTreeSet<Named>,
    /// Whether a process re-parented to the daemon carries the session's mark in its
    /// environment (checked only for those: reading an environment costs a file read).
    pub marked: &'a dyn Fn(u32) -> bool,
}

/// The live processes of `tree` in `procs`: the leader; what it started, by the parent
/// chain; everything in a process session one of them leads or belongs to (processes join
/// a session only by being born in it); what was found before; and orphans re-parented to
/// the daemon that carry the session's mark. Never the daemon, PID 1, or anything in the
/// daemon's own process session.
pub fn members(procs: &[Proc], tree: &Tree, d: &Daemon) -> BTreeSet<Named> {
    let live: Vec<&Proc> = procs
        .iter()
        .filter(|p| !p.zombie && p.pid != d.pid && p.pid != 1 && p.sid != d.sid)
        .collect();
    let by_pid: BTreeMap<u32, &Proc> = live.iter().map(|p| (p.pid, *p)).collect();
    let mut children: BTreeMap<u32, Vec<&Proc>> = BTreeMap::new();
    for p in &live {
        children.entry(p.ppid).or_default().push(p);
    }
    let mut found: BTreeSet<Named> = BTreeSet::new();
    let mut sids: BTreeSet<u32> = BTreeSet::new();
    for p in &live {
        let seed = p.named() == tree.leader
            || tree.known.contains(&p.named())
            || p.sid == tree.leader.0
            || (adopted(p, d) && (tree.marked)(p.pid));
        if seed {
            found.insert(p.named());
        }
    }
    // Grow to a fixpoint: children of members, and members' process sessions.
    loop {
        let before = found.len();
        sids.extend(
            live.iter()
                .filter(|p| found.contains(&p.named()))
                .map(|p| p.sid),
        );
        let mut stack: Vec<u32> = live
            .iter()
            .filter(|p| found.contains(&p.named()) || sids.contains(&p.sid))
            .map(|p| p.pid)
            .collect();
        while let Some(pid) = stack.pop() {
            let Some(p) = by_pid.get(&pid) else {
                continue;
            };
            found.insert(p.named());
            for c in children.get(&pid).into_iter().flatten() {
                if !found.contains(&c.named()) {
                    stack.push(c.pid);
                }
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// Whether the environment of `pid` holds the entry `mark` (`NAME=value`); false when it
/// cannot be read.
pub fn environ_has(pid: u32, mark: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|e| e == mark.as_bytes()))
        .unwrap_or(false)
}

/// `pidfd_open(2)`: a descriptor that names process `pid` for good.
///
/// Errors: no such process (`ESRCH`), or a kernel before 5.3 (`ENOSYS`).
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is shared.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: the kernel just returned this fd to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Send `sig` to `pid` only if, once a pidfd holds it, `still(pid)` says it is still the
/// process that was chosen (its start time, its cgroup): a pid that ended and was reused by
/// someone else's process in between is never signalled. Returns whether it was signalled.
/// Before Linux 5.3 (no pidfd) the check is made just before `kill(2)`.
pub fn signal_if(pid: u32, sig: Signal, still: impl Fn(u32) -> bool) -> bool {
    use std::os::fd::AsRawFd;
    let fd = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            let target = nix::unistd::Pid::from_raw(pid as i32);
            return still(pid) && nix::sys::signal::kill(target, sig).is_ok();
        }
        Err(_) => return false,
    };
    if !still(pid) {
        return false;
    }
    // SAFETY: pidfd_send_signal reads only its integer arguments (no siginfo is passed).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Daemon = Daemon {
        pid: 100,
        pgid: 90,
        sid: 90,
    };

    fn p(pid: u32, ppid: u32, pgid: u32, sid: u32) -> Proc {
        Proc {
            pid,
            ppid,
            pgid,
            sid,
            start: u64::from(pid) * 10,
            zombie: false,
        }
    }

    /// The pids of the members among `procs` of the tree led by (300, started 3000) that
    /// knew `known` before, with `marked` saying which processes carry the session's mark.
    fn member_pids(procs: &[Proc], known: &[Named], marked: &dyn Fn(u32) -> bool) -> Vec<u32> {
        let known: BTreeSet<Named> = known.iter().copied().collect();
        let tree = Tree {
            leader: (300, 3000),
            known: &known,
            marked,
        };
        pids(&members(procs, &tree, &D))
    }

    fn pids(set: &BTreeSet<Named>) -> Vec<u32> {
        set.iter().map(|n| n.0).collect()
    }

    #[test]
    fn a_stat_line_with_spaces_and_parentheses_in_the_name_parses() {
        let line = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 200 18446744073709551615";
        let p = parse_stat(4242, line).unwrap();
        assert_eq!(
            p,
            Proc {
                pid: 4242,
                ppid: 1,
                pgid: 4242,
                sid: 4242,
                start: 98765,
                zombie: false
            }
        );
        assert!(parse_stat(1, "1 (x) Z 0 1 1 0").is_none(), "too short");
        let z = "7 (sleep) Z 100 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0";
        assert!(parse_stat(7, z).unwrap().zombie);
    }

    #[test]
    fn this_process_is_found_in_the_walk_with_its_start_time() {
        let me = std::process::id();
        let all = walk();
        let mine = all.iter().find(|p| p.pid == me).expect("this process");
        assert_eq!(Some(*mine), read(me));
        assert!(mine.start > 0);
    }

    #[test]
    fn what_the_daemon_starts_itself_is_not_adopted() {
        // Inherits the daemon's group; a group of its own; a session's child (recorded in
        // session::groups, left to the caller); an orphan that left its session; an orphan
        // in a script's group.
        assert!(!adopted(&p(200, 100, 90, 90), &D));
        assert!(!adopted(&p(201, 100, 201, 90), &D));
        assert!(adopted(&p(202, 100, 202, 202), &D));
        assert!(adopted(&p(203, 100, 250, 250), &D));
        assert!(adopted(&p(204, 100, 201, 90), &D));
        assert!(!adopted(&p(205, 1, 205, 205), &D), "not the daemon's child");
    }

    #[test]
    fn members_follow_parents_sessions_marks_and_what_was_known() {
        let procs = [
            p(100, 1, 90, 90),     // the daemon
            p(300, 100, 300, 300), // the session's agent
            p(301, 300, 301, 300), // an MCP server in its own group
            p(302, 301, 301, 300), // its child
            p(303, 100, 303, 303), // `setsid sleep &` whose shell exited: marked
            p(304, 303, 303, 303), // its child
            p(305, 100, 305, 305), // an orphan known from before
            p(306, 100, 306, 306), // an orphan of another session (unmarked, unknown)
            p(307, 100, 307, 90),  // the daemon's own child (a notifier script)
            p(308, 1, 300, 300),   // re-parented to PID 1, still in the agent's session
            p(400, 1, 400, 400),   // the user's own process
            p(401, 400, 401, 401), // its child
        ];
        assert_eq!(
            member_pids(&procs, &[(305, 3050)], &|pid| pid == 303),
            vec![300, 301, 302, 303, 304, 305, 308]
        );
    }

    #[test]
    fn a_pid_reused_by_another_process_is_not_a_member() {
        let procs = [p(100, 1, 90, 90), p(305, 100, 305, 305)];
        // Known as (305, start 1): the process now at 305 started at 3050.
        assert!(member_pids(&procs, &[(305, 1)], &|_| false).is_empty());
    }

    #[test]
    fn zombies_the_daemon_and_its_session_are_never_members() {
        let mut z = p(301, 300, 301, 300);
        z.zombie = true;
        let procs = [p(100, 1, 90, 90), z, p(302, 100, 302, 90)];
        assert!(member_pids(&procs, &[(100, 1000), (302, 3020)], &|_| true).is_empty());
    }

    #[test]
    fn signal_if_checks_after_holding_the_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(!signal_if(pid, Signal::SIGKILL, |_| false));
        assert!(child.try_wait().unwrap().is_none(), "not signalled");
        assert!(signal_if(pid, Signal::SIGKILL, |_| true));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(9));
    }
}

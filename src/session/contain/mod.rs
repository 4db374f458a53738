//! Everything a session started ends with it (issue 32 item 5; spec 02 §1 "Shutdown").
//! Signalling the child's process group misses what left it: Codex starts MCP servers in
//! process groups of their own, Claude Code's `cmd &` runs in a process session of its own
//! whose parent shell is gone at once. So each session has a [`Scope`]:
//!
//! - a cgroup v2 of its own, where the daemon can make one below its own cgroup (Linux ≥
//!   5.14: root, or a systemd service with `Delegate=yes`): the child is moved into it before
//!   exec, all it starts is born there, `cgroup.kill` ends them all ([`cgroup`]);
//! - else the daemon as child subreaper: orphans are re-parented to it, and the session's
//!   tree is found in `/proc` by parent chain, process session and the session's token in
//!   the environment of orphans ([`procs::members`]); re-parented children are reaped
//!   ([`orphans`]);
//! - elsewhere (macOS, where the daemon runs under launchd: neither exists) nothing more
//!   than the process group, as before.
//!
//! The way is chosen once, at daemon start ([`init`]); docs/ARCHITECTURE.md "Containment"
//! gives the measured costs and the choice.

#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod orphans;
#[cfg(target_os = "linux")]
pub(crate) mod procs;

use std::os::fd::RawFd;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// How long what a session started has, after SIGTERM, before SIGKILL when the session
/// ends; and how long the end then waits for it to be gone.
pub const STRAY_GRACE: Duration = Duration::from_secs(1);

/// How the daemon contains its sessions (chosen once by [`init`]).
#[derive(Debug)]
enum Way {
    /// A cgroup per session below this folder.
    #[cfg(target_os = "linux")]
    Cgroup(cgroup::Base),
    /// The daemon is its sessions' child subreaper.
    #[cfg(target_os = "linux")]
    Subreaper(procs::Daemon),
    /// Process groups only (before [`init`], in unit tests, on macOS).
    Groups,
}

static WAY: OnceLock<Way> = OnceLock::new();

fn way() -> &'static Way {
    WAY.get().unwrap_or(&Way::Groups)
}

/// Choose how sessions are contained (daemon start, with the root's lock held): a cgroup
/// per session when `cgroups` allows it and the machine lets the daemon make them, else
/// the daemon as child subreaper; on Linux, processes a crashed daemon of this root left in
/// its cgroups are ended first. The choice is logged (`session containment: …`).
pub fn init(root: &Path, cgroups: bool) {
    WAY.get_or_init(|| choose(root, cgroups));
}

#[cfg(target_os = "linux")]
fn choose(root: &Path, cgroups: bool) -> Way {
    let tried = if cgroups {
        cgroup::prepare(&base_name(root))
    } else {
        Err(cgroup::Unavailable::TestHook)
    };
    match tried {
        Ok((base, left)) => {
            if left > 0 {
                log::warn!(
                    "ended {left} process(es) the sessions of a previous daemon (it crashed) \
                     had left in {}",
                    base.dir.display()
                );
            }
            log::info!(
                "session containment: a cgroup per session, below {}",
                base.dir.display()
            );
            Way::Cgroup(base)
        }
        Err(why) => match orphans::start() {
            Ok(d) => {
                log::info!("session containment: the daemon as child subreaper (no cgroup: {why})");
                Way::Subreaper(d)
            }
            Err(e) => {
                log::warn!(
                    "session containment: process groups only (no cgroup: {why}; cannot \
                     become a child subreaper: {e}): what a session starts outside its \
                     process group may outlive it"
                );
                Way::Groups
            }
        },
    }
}

#[cfg(not(target_os = "linux"))]
fn choose(_root: &Path, _cgroups: bool) -> Way {
    log::info!("session containment: process groups (this system has no cgroups)");
    Way::Groups
}

/// `iapeer-<16 hex digits>`: the folder of one root's session cgroups, the same for every
/// daemon of that root (so the next one finds what a crashed one left) and different for
/// two roots side by side.
#[cfg(target_os = "linux")]
fn base_name(root: &Path) -> String {
    use sha2::Digest;
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let digest = sha2::Sha256::digest(root.as_os_str().as_encoded_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("iapeer-{hex}")
}

/// End what is left of every session (shutdown, after the sessions were ended): the whole
/// folder of session cgroups, or every process of the daemon's sessions' trees. Returns
/// how many processes there were.
pub fn end_all() -> usize {
    match way() {
        #[cfg(target_os = "linux")]
        Way::Cgroup(base) => match cgroup::clean(&base.dir, STRAY_GRACE) {
            Ok(n) => n,
            Err(e) => {
                log::warn!("cannot remove {}: {e}", base.dir.display());
                0
            }
        },
        #[cfg(target_os = "linux")]
        Way::Subreaper(d) => orphans::end_all(d, STRAY_GRACE),
        Way::Groups => 0,
    }
}

/// What one session started, wherever it went; ended when dropped.
pub struct Scope {
    identity: String,
    inner: Inner,
}

enum Inner {
    #[cfg(target_os = "linux")]
    Cgroup(cgroup::Group),
    #[cfg(target_os = "linux")]
    Tracked(Tracked),
    Groups,
}

impl Scope {
    /// The scope of session `session` (`identity` for the log), whose child gets `env`:
    /// a new cgroup, or a tree to track (marked by the session's `IAPEER_TOKEN` entry, which
    /// everything the child starts inherits unless it clears its environment).
    pub fn new(session: u64, identity: &str, env: &[(String, String)]) -> Scope {
        let inner = match way() {
            #[cfg(target_os = "linux")]
            Way::Cgroup(base) => match cgroup::Group::create(base, &format!("s{session}")) {
                Ok(g) => Inner::Cgroup(g),
                Err(e) => {
                    log::warn!(
                        "{identity}: cannot make its cgroup in {}: {e}; only its process \
                         group is ended with it",
                        base.dir.display()
                    );
                    Inner::Groups
                }
            },
            #[cfg(target_os = "linux")]
            Way::Subreaper(_) => Inner::Tracked(Tracked {
                leader: None,
                mark: env
                    .iter()
                    .rfind(|(k, _)| k == "IAPEER_TOKEN")
                    .map(|(k, v)| format!("{k}={v}")),
                known: Default::default(),
            }),
            Way::Groups => Inner::Groups,
        };
        let _ = env;
        Scope {
            identity: identity.to_string(),
            inner,
        }
    }

    /// The descriptor the child writes `0` into between fork and exec to enter its cgroup
    /// (open until exec: close-on-exec); `None` without a cgroup.
    pub fn placement(&self) -> Option<RawFd> {
        match &self.inner {
            #[cfg(target_os = "linux")]
            Inner::Cgroup(g) => g.procs_fd(),
            _ => None,
        }
    }

    /// The child `pid` started: check it entered its cgroup (whose `cgroup.procs` is then
    /// closed), or note it as the tree's root.
    pub fn started(&mut self, pid: u32) {
        #[cfg(target_os = "linux")]
        if let Inner::Cgroup(g) = &mut self.inner {
            g.placed();
        }
        match &mut self.inner {
            #[cfg(target_os = "linux")]
            Inner::Cgroup(g) if !g.holds(pid) => {
                log::warn!(
                    "{}: its child {pid} did not enter its cgroup {}; only its process group \
                     is ended with it",
                    self.identity,
                    g.dir().display()
                );
                let _ = g.remove();
                self.inner = Inner::Groups;
            }
            #[cfg(target_os = "linux")]
            Inner::Tracked(t) => t.leader = procs::read(pid).map(|p| p.named()),
            _ => {}
        }
        let _ = pid;
    }

    /// SIGTERM to everything the session started (its end begins: `stop`, idle sleep,
    /// shutdown), alongside the signals to its process group.
    pub fn terminate(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGTERM);
    }

    /// SIGKILL to everything the session started (its grace is over).
    pub fn kill(&mut self) {
        match &mut self.inner {
            #[cfg(target_os = "linux")]
            Inner::Cgroup(g) => {
                if let Err(e) = g.kill() {
                    log::warn!("{}: cannot write cgroup.kill: {e}", self.identity);
                }
            }
            _ => self.signal(nix::sys::signal::Signal::SIGKILL),
        }
    }

    fn signal(&mut self, sig: nix::sys::signal::Signal) {
        match &mut self.inner {
            #[cfg(target_os = "linux")]
            Inner::Cgroup(g) => g.signal(sig),
            #[cfg(target_os = "linux")]
            Inner::Tracked(t) => t.signal(sig),
            Inner::Groups => {}
        }
        let _ = sig;
    }

    /// The session's child has ended: end what it left (SIGTERM, SIGKILL after
    /// [`STRAY_GRACE`], each waited for at most that long) and remove the cgroup. Blocks
    /// for at most twice [`STRAY_GRACE`]; at once when nothing is left. Later calls do
    /// nothing.
    pub fn end(&mut self) {
        let inner = std::mem::replace(&mut self.inner, Inner::Groups);
        let ended = match inner {
            #[cfg(target_os = "linux")]
            Inner::Cgroup(g) => end_group(&g),
            #[cfg(target_os = "linux")]
            Inner::Tracked(mut t) => t.end(),
            Inner::Groups => Ok(0),
        };
        match ended {
            Ok(0) => {}
            Ok(n) => log::info!(
                "{}: ended {n} process(es) the session had started",
                self.identity
            ),
            Err(e) => log::warn!("{}: {e}", self.identity),
        }
    }
}

impl Drop for Scope {
    /// A session that ends without [`Scope::end`] (its thread panicked, its setup failed)
    /// still takes what it started with it.
    fn drop(&mut self) {
        self.end();
    }
}

/// Why what a session started was not ended cleanly (logged with the session's identity).
#[derive(Debug)]
enum EndFailure {
    /// Writing the session cgroup's `cgroup.kill` failed.
    #[cfg(target_os = "linux")]
    Kill(std::io::Error),
    /// The emptied session cgroup could not be removed.
    #[cfg(target_os = "linux")]
    Remove(std::path::PathBuf, std::io::Error),
    /// `left` of the `n` processes the session started outlived SIGKILL.
    #[cfg(target_os = "linux")]
    Survived {
        /// Still alive.
        left: usize,
        /// Known at the end.
        n: usize,
    },
}

impl std::fmt::Display for EndFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            #[cfg(target_os = "linux")]
            EndFailure::Kill(e) => write!(f, "cannot write cgroup.kill: {e}"),
            #[cfg(target_os = "linux")]
            EndFailure::Remove(dir, e) => write!(
                f,
                "cannot remove {} ({e}); the daemon's shutdown or next start removes it",
                dir.display()
            ),
            #[cfg(target_os = "linux")]
            EndFailure::Survived { left, n } => write!(
                f,
                "{left} of the {n} process(es) the session started survived SIGKILL"
            ),
            #[cfg(not(target_os = "linux"))]
            _ => Ok(()),
        }
    }
}

/// End a session cgroup's processes and remove it; how many there were.
#[cfg(target_os = "linux")]
fn end_group(g: &cgroup::Group) -> Result<usize, EndFailure> {
    use std::time::Instant;
    let n = g.members().len();
    if g.populated() {
        g.signal(nix::sys::signal::Signal::SIGTERM);
        if !cgroup::wait_empty(g.dir(), Instant::now() + STRAY_GRACE) {
            g.kill().map_err(EndFailure::Kill)?;
            cgroup::wait_empty(g.dir(), Instant::now() + STRAY_GRACE);
        }
    }
    g.remove()
        .map_err(|e| EndFailure::Remove(g.dir().to_path_buf(), e))?;
    Ok(n)
}

/// A session's tree as the subreaper finds it in `/proc`.
#[cfg(target_os = "linux")]
struct Tracked {
    /// The child, once started.
    leader: Option<procs::Named>,
    /// `IAPEER_TOKEN=<token>`: the mark in the environment of what the session started.
    mark: Option<String>,
    /// Members found by the last look: they stay members wherever they are re-parented.
    known: std::collections::BTreeSet<procs::Named>,
}

#[cfg(target_os = "linux")]
impl Tracked {
    /// Look again (one walk of `/proc`): the tree's live members now.
    fn refresh(&mut self) -> std::collections::BTreeSet<procs::Named> {
        let (Some(leader), Way::Subreaper(d)) = (self.leader, way()) else {
            return Default::default();
        };
        let mark = self.mark.as_deref();
        let marked = |pid: u32| mark.is_some_and(|m| procs::environ_has(pid, m));
        let tree = procs::Tree {
            leader,
            known: &self.known,
            marked: &marked,
        };
        self.known = procs::members(&procs::walk(), &tree, d);
        self.known.clone()
    }

    fn signal(&mut self, sig: nix::sys::signal::Signal) {
        for (pid, start) in self.refresh() {
            procs::signal_if(pid, sig, |p| {
                procs::read(p).is_some_and(|q| q.start == start)
            });
        }
    }

    /// Wait at most [`STRAY_GRACE`] for the tree to be empty; whether it is.
    fn gone(&mut self) -> bool {
        let by = std::time::Instant::now() + STRAY_GRACE;
        loop {
            if self.refresh().is_empty() {
                return true;
            }
            if std::time::Instant::now() >= by {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn end(&mut self) -> Result<usize, EndFailure> {
        let n = self.refresh().len();
        if n == 0 {
            return Ok(0);
        }
        self.signal(nix::sys::signal::Signal::SIGTERM);
        if !self.gone() {
            self.signal(nix::sys::signal::Signal::SIGKILL);
            self.gone();
        }
        if let Way::Subreaper(d) = way() {
            orphans::reap(d);
        }
        let left = self.known.len();
        if left > 0 {
            return Err(EndFailure::Survived { left, n });
        }
        Ok(n)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Spawn `program args` (placed in the cgroup at `fd` when given).
    fn spawn(program: &str, args: &[&str], fd: Option<RawFd>) -> std::process::Child {
        use std::os::unix::process::CommandExt;
        let mut c = std::process::Command::new(program);
        c.args(args);
        if let Some(fd) = fd {
            // SAFETY: write(2) only, as in session::spawn.
            unsafe {
                c.pre_exec(move || {
                    nix::libc::write(fd, b"0".as_ptr().cast(), 1);
                    Ok(())
                });
            }
        }
        c.spawn().unwrap()
    }

    /// The cost of each way, for docs/ARCHITECTURE.md "Containment" (run by hand:
    /// `cargo test --lib contain::tests::costs -- --ignored --nocapture`; needs a writable
    /// cgroup v2, e.g. root). Medians of `N` runs, in µs.
    #[test]
    #[ignore]
    fn costs() {
        const N: usize = 100;
        let median = |mut v: Vec<Duration>| {
            v.sort();
            v[v.len() / 2].as_secs_f64() * 1e6
        };
        let (base, _) = cgroup::prepare(&format!("iapeer-cost-{}", std::process::id()))
            .expect("a writable cgroup v2");
        let mut cost: [Vec<Duration>; 6] = Default::default();
        for i in 0..N {
            // A cgroup per session: create; spawn into it (against a plain spawn); end what
            // is in it (cgroup.kill, until cgroup.events says empty); remove.
            let t = Instant::now();
            let g = cgroup::Group::create(&base, &format!("s{i}")).unwrap();
            cost[0].push(t.elapsed());
            let t = Instant::now();
            spawn("true", &[], None).wait().unwrap();
            cost[1].push(t.elapsed());
            let t = Instant::now();
            spawn("true", &[], g.procs_fd()).wait().unwrap();
            cost[2].push(t.elapsed());
            let mut child = spawn("sleep", &["100"], g.procs_fd());
            assert!(g.holds(child.id()));
            let t = Instant::now();
            g.kill().unwrap();
            assert!(cgroup::wait_empty(
                g.dir(),
                Instant::now() + Duration::from_secs(5)
            ));
            cost[3].push(t.elapsed());
            child.wait().unwrap();
            let t = Instant::now();
            g.remove().unwrap();
            cost[4].push(t.elapsed());
            // For comparison: SIGKILL to a process until it is reaped, without a cgroup.
            let mut child = spawn("sleep", &["100"], None);
            let t = Instant::now();
            child.kill().unwrap();
            child.wait().unwrap();
            cost[5].push(t.elapsed());
        }
        cgroup::clean(&base.dir, Duration::from_secs(1)).unwrap();
        // The subreaper: one walk of /proc, and finding a tree in it.
        let (mut walks, mut finds) = (Vec::new(), Vec::new());
        let d = procs::Daemon::me();
        let known = Default::default();
        for _ in 0..N {
            let t = Instant::now();
            let all = procs::walk();
            walks.push(t.elapsed());
            let t = Instant::now();
            let tree = procs::Tree {
                leader: (1, 1),
                known: &known,
                marked: &|_| false,
            };
            std::hint::black_box(procs::members(&all, &tree, &d));
            finds.push(t.elapsed());
        }
        let [create, plain, placed, end, remove, kill] = cost.map(median);
        eprintln!(
            "cgroup per session: create {create:.0}, spawn+wait of `true` {placed:.0} (without \
             a cgroup {plain:.0}), cgroup.kill until empty {end:.0} (SIGKILL until reaped \
             without a cgroup {kill:.0}), remove {remove:.0}; subreaper: /proc walk of {} \
             processes {:.0}, tree search {:.0} (µs, medians of {N})",
            procs::walk().len(),
            median(walks),
            median(finds)
        );
    }
}

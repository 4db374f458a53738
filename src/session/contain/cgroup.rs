//! A cgroup v2 per session (Linux 5.14 and later, where `cgroup.kill` exists): the
//! session's child is moved into `<the daemon's cgroup>/iapeer-<root key>/s<session>`
//! between fork and exec, everything it starts is born there whatever process group or
//! session it makes, and one write to `cgroup.kill` ends them all at once.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::libc;
use nix::sys::signal::Signal;

use super::procs;

/// The daemon's folder of session cgroups.
#[derive(Debug, Clone)]
pub struct Base {
    /// Its folder in the mounted hierarchy.
    pub dir: PathBuf,
    /// Its path as `/proc/<pid>/cgroup` names it (`/…/iapeer-<key>`).
    pub rel: String,
}

/// Where the cgroup v2 hierarchy is mounted, from `/proc/self/mountinfo` (proc(5)): the
/// mount's root inside the hierarchy and the mount point. The first `cgroup2` mount wins.
pub fn mount_of(mountinfo: &str) -> Option<(String, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        Some((unescape(f.get(3)?), PathBuf::from(unescape(f.get(4)?))))
    })
}

/// A mountinfo path field: space, tab, newline and backslash are written as `\ooo`.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup v2 path in a `/proc/<pid>/cgroup` text: its `0::<path>` line.
pub fn own_path(proc_cgroup: &str) -> Option<String> {
    proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// The folder of the cgroup at `path` under a mount of the hierarchy's `root` at `point`;
/// `None` when the mount does not show it.
pub fn folder(root: &str, point: &Path, path: &str) -> Option<PathBuf> {
    let inside = if root == "/" {
        path
    } else {
        let rest = path.strip_prefix(root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest
    };
    Some(point.join(inside.trim_start_matches('/')))
}

/// `rel` joined with `name` as `/proc/<pid>/cgroup` writes it.
fn child_rel(rel: &str, name: &str) -> String {
    format!("{}/{name}", rel.trim_end_matches('/'))
}

/// Why the daemon cannot make a cgroup per session here ([`prepare`]); its `Display` is the
/// text for the log (`session containment: … (no cgroup: <this>)`).
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    /// A test hook (`IAPEER_TEST_HOOK=contain:subreaper`) chose the subreaper.
    #[error("a test hook chose the subreaper")]
    TestHook,
    /// A file of `/proc/self` could not be read.
    #[error("cannot read {0}: {1}")]
    Proc(&'static str, io::Error),
    /// No cgroup v2 hierarchy is mounted.
    #[error("no cgroup v2 hierarchy is mounted")]
    NoHierarchy,
    /// This process is in no cgroup v2.
    #[error("this process is in no cgroup v2")]
    NoOwnCgroup,
    /// This process's cgroup (`own`) is not under the mount at `point`.
    #[error("its cgroup {own} is not under the mount at {point}")]
    NotUnderMount {
        /// This process's cgroup, as `/proc/self/cgroup` names it.
        own: String,
        /// The cgroup v2 mount point.
        point: PathBuf,
    },
    /// What a previous daemon left in `dir` could not be cleaned.
    #[error("cannot clean {0}: {1}")]
    Clean(PathBuf, io::Error),
    /// The folder `dir` could not be created.
    #[error("cannot create {0}: {1}")]
    Create(PathBuf, io::Error),
    /// A process cannot be moved into a cgroup below `dir`.
    #[error("a process cannot be moved into {0}: {1}")]
    Probe(PathBuf, io::Error),
    /// `dir` has no `cgroup.kill` (Linux before 5.14).
    #[error("{0} has no cgroup.kill (Linux before 5.14)")]
    NoKill(PathBuf),
}

/// Make the daemon's folder of session cgroups, `name`, in its own cgroup, ending and
/// removing what a previous daemon of the same root left there (it crashed); then check
/// that a process can be moved into a cgroup below it (a real fork, so permissions,
/// delegation and namespaces all have their say). Returns the folder and how many
/// processes a previous daemon had left.
///
/// Errors ([`Unavailable`]): no cgroup v2 hierarchy, no permission to create or write
/// there, no `cgroup.kill` (Linux before 5.14).
pub fn prepare(name: &str) -> Result<(Base, usize), Unavailable> {
    let read =
        |file: &'static str| std::fs::read_to_string(file).map_err(|e| Unavailable::Proc(file, e));
    let mountinfo = read("/proc/self/mountinfo")?;
    let (root, point) = mount_of(&mountinfo).ok_or(Unavailable::NoHierarchy)?;
    let cg = read("/proc/self/cgroup")?;
    let own = own_path(&cg).ok_or(Unavailable::NoOwnCgroup)?;
    let own_dir = folder(&root, &point, &own).ok_or_else(|| Unavailable::NotUnderMount {
        own: own.clone(),
        point: point.clone(),
    })?;
    let base = Base {
        dir: own_dir.join(name),
        rel: child_rel(&own, name),
    };
    let mut left = 0;
    if base.dir.exists() {
        left =
            clean(&base.dir, CLEAN_BOUND).map_err(|e| Unavailable::Clean(base.dir.clone(), e))?;
    }
    std::fs::create_dir(&base.dir).map_err(|e| Unavailable::Create(base.dir.clone(), e))?;
    let checked = if base.dir.join("cgroup.kill").exists() {
        probe(&base).map_err(|e| Unavailable::Probe(base.dir.clone(), e))
    } else {
        Err(Unavailable::NoKill(base.dir.clone()))
    };
    if let Err(e) = checked {
        let _ = std::fs::remove_dir(&base.dir);
        return Err(e);
    }
    Ok((base, left))
}

/// How long ending a leftover folder waits for its processes to die.
const CLEAN_BOUND: Duration = Duration::from_secs(2);

/// Fork a child that moves itself into a new cgroup below `base` and exits with 0, or with
/// the errno of the refusal.
fn probe(base: &Base) -> io::Result<()> {
    let g = Group::create(base, "probe")?;
    let fd = g
        .procs_fd()
        .ok_or_else(|| io::Error::other("cgroup.procs is closed"))?;
    // SAFETY: between fork and _exit the child makes only async-signal-safe calls (write,
    // reading errno, _exit); it touches no lock and allocates nothing.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } {
            1 => 0,
            _ => io::Error::last_os_error().raw_os_error().unwrap_or(1),
        };
        // SAFETY: _exit ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None)?;
    g.remove()?;
    match status {
        nix::sys::wait::WaitStatus::Exited(_, 0) => Ok(()),
        nix::sys::wait::WaitStatus::Exited(_, errno) => Err(io::Error::from_raw_os_error(errno)),
        other => Err(io::Error::other(format!("the probe ended as {other:?}"))),
    }
}

/// One session's cgroup.
pub struct Group {
    dir: PathBuf,
    rel: String,
    /// Its `cgroup.procs`, open for writing (close-on-exec): the child writes `0` into it
    /// between fork and exec to move itself. Closed once the child started
    /// ([`Group::placed`]): a live session holds no descriptor for its cgroup.
    procs: Option<File>,
}

impl Group {
    /// Create the cgroup `name` below `base`.
    ///
    /// Errors: it cannot be created or its `cgroup.procs` opened.
    pub fn create(base: &Base, name: &str) -> io::Result<Group> {
        let dir = base.dir.join(name);
        std::fs::create_dir(&dir)?;
        let procs = match std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
        {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        Ok(Group {
            rel: child_rel(&base.rel, name),
            dir,
            procs: Some(procs),
        })
    }

    /// The descriptor a child writes `0` into to move itself here; `None` once
    /// [`Group::placed`].
    pub fn procs_fd(&self) -> Option<RawFd> {
        self.procs.as_ref().map(|f| f.as_raw_fd())
    }

    /// The child was started (it moved itself, or failed to): close `cgroup.procs` (issue
    /// 31 item 4: one descriptor fewer per live session).
    pub fn placed(&mut self) {
        self.procs = None;
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether process `pid` is in this cgroup now.
    pub fn holds(&self, pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|t| own_path(&t))
            .is_some_and(|p| p == self.rel)
    }

    /// The processes in it now.
    pub fn members(&self) -> Vec<u32> {
        pids_in(&self.dir)
    }

    /// Send `sig` to every process in it (each checked to still be here once held).
    pub fn signal(&self, sig: Signal) {
        for pid in self.members() {
            procs::signal_if(pid, sig, |p| self.holds(p));
        }
    }

    /// SIGKILL everything in it at once (`cgroup.kill`).
    pub fn kill(&self) -> io::Result<()> {
        kill_dir(&self.dir)
    }

    /// Whether any process is in it (`cgroup.events`); false once it is gone.
    pub fn populated(&self) -> bool {
        populated(&self.dir)
    }

    /// Remove it (it must be empty); gone already is not an error.
    pub fn remove(&self) -> io::Result<()> {
        match std::fs::remove_dir(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }
}

fn pids_in(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|t| t.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}

fn kill_dir(dir: &Path) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))?
        .write_all(b"1")
}

/// Wait until `dir` holds no process, at most until `by`; whether it is empty. Woken by
/// the kernel when `cgroup.events` changes (poll `POLLPRI`), looked at every 100 ms anyway.
pub fn wait_empty(dir: &Path, by: Instant) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::io::{Read, Seek};
    use std::os::fd::AsFd;
    let Ok(mut events) = File::open(dir.join("cgroup.events")) else {
        return true;
    };
    loop {
        let mut text = String::new();
        let read = events
            .rewind()
            .and_then(|_| events.read_to_string(&mut text));
        if read.is_err() || !text.lines().any(|l| l == "populated 1") {
            return true;
        }
        let left = by.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let step = PollTimeout::try_from(left.min(Duration::from_millis(100)))
            .unwrap_or(PollTimeout::ZERO);
        let mut fds = [PollFd::new(events.as_fd(), PollFlags::POLLPRI)];
        let _ = poll(&mut fds, step);
    }
}

/// End every process in `dir` and the cgroups below it (`cgroup.kill`), wait at most
/// `bound` for them to die, and remove the folders bottom-up. Returns how many processes
/// were in it.
///
/// Errors: `cgroup.kill` cannot be written, or a folder cannot be removed (a process
/// survived `bound`).
pub fn clean(dir: &Path, bound: Duration) -> io::Result<usize> {
    let mut folders = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < folders.len() {
        if let Ok(entries) = std::fs::read_dir(&folders[i]) {
            folders.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        i += 1;
    }
    let count = folders.iter().map(|f| pids_in(f).len()).sum();
    if populated(dir) {
        kill_dir(dir)?;
        wait_empty(dir, Instant::now() + bound);
    }
    for f in folders.iter().rev() {
        match std::fs::remove_dir(f) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "25 1 0:23 / /sys rw,nosuid - sysfs sysfs rw\n\
        30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n\
        31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev shared:10 - cgroup2 cgroup2 rw,nsdelegate\n\
        32 30 0:28 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n";

    #[test]
    fn the_cgroup2_mount_is_found_in_hybrid_and_unified_layouts() {
        assert_eq!(
            mount_of(HYBRID),
            Some(("/".into(), PathBuf::from("/sys/fs/cgroup/unified")))
        );
        let unified = "35 24 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n";
        assert_eq!(
            mount_of(unified),
            Some(("/".into(), PathBuf::from("/sys/fs/cgroup")))
        );
        let v1 = "32 30 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert_eq!(mount_of(v1), None);
        let spaced = "40 1 0:31 /sub /mnt/my\\040cg rw - cgroup2 none rw\n";
        assert_eq!(
            mount_of(spaced),
            Some(("/sub".into(), PathBuf::from("/mnt/my cg")))
        );
    }

    #[test]
    fn the_own_cgroup_is_the_v2_line() {
        let hybrid = "9:name=systemd:/\n4:memory:/x/y\n0::/user.slice/user-1000.slice/user@1000.service/app.slice/iapeer.service\n";
        assert_eq!(
            own_path(hybrid).as_deref(),
            Some("/user.slice/user-1000.slice/user@1000.service/app.slice/iapeer.service")
        );
        assert_eq!(own_path("0::/\n").as_deref(), Some("/"));
        assert_eq!(own_path("4:memory:/x\n"), None, "cgroup v1 only");
    }

    #[test]
    fn the_folder_of_a_cgroup_under_its_mount() {
        let point = Path::new("/sys/fs/cgroup");
        assert_eq!(
            folder("/", point, "/a/b.service"),
            Some(PathBuf::from("/sys/fs/cgroup/a/b.service"))
        );
        assert_eq!(folder("/", point, "/"), Some(point.to_path_buf()));
        assert_eq!(
            folder("/a", point, "/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/b"))
        );
        assert_eq!(folder("/a", point, "/ab"), None);
        assert_eq!(folder("/a", point, "/c"), None);
        assert_eq!(child_rel("/", "iapeer-x"), "/iapeer-x");
        assert_eq!(child_rel("/a/b", "s1"), "/a/b/s1");
    }
}

//! Spawning a session's child process (spec 04 §1 "Spawning"): in a pty for agent runtimes,
//! with pipes for router runtimes. Both put the child in its own session and process group
//! (so the whole group can be signalled), and in its session's cgroup when it has one
//! ([`super::contain`]), through a minimal async-signal-safe `pre_exec`; the child is
//! recorded in [`super::groups`] before the spawn lock is let go.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::pty::{openpty, OpenptyResult, Winsize};
use nix::sys::signal::{self, SigHandler, SigSet, SigmaskHow, Signal};
use nix::sys::termios::{self, InputFlags, SetArg};

/// What to run: program, argv (without argv\[0\]), working folder and the **complete**
/// environment (the child inherits nothing else).
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnSpec {
    /// Program path or name (looked up in the child's `PATH` when it has no slash).
    pub program: OsString,
    /// Arguments after the program name.
    pub args: Vec<OsString>,
    /// Working folder; must exist.
    pub cwd: PathBuf,
    /// The whole environment of the child, in order (a later duplicate wins).
    pub env: Vec<(String, String)>,
}

/// A child running in a pty.
pub struct PtyChild {
    /// The master side: non-blocking, close-on-exec. Reads see the child's output.
    pub master: OwnedFd,
    /// The child (its pid is also its process group id).
    pub child: Child,
}

/// A child running with pipes (router runtimes).
pub struct PipeChild {
    /// The child (its pid is also its process group id).
    pub child: Child,
    /// The child's stdin: envelopes are written here.
    pub stdin: ChildStdin,
    /// The child's stdout.
    pub stdout: ChildStdout,
    /// The child's stderr.
    pub stderr: ChildStderr,
}

/// Held while a pty is opened and its child spawned, so that no other spawn in this process
/// can inherit the master fd in the short window before close-on-exec is set on it; and
/// until the child is recorded in [`super::groups`], so that the subreaper's reaping
/// ([`super::contain`]) never takes a session's child for an orphan.
static SPAWN_LOCK: Mutex<()> = Mutex::new(());

/// Hold new spawns back (each child started is recorded in [`super::groups`] by the time
/// this returns).
pub fn hold_spawns() -> std::sync::MutexGuard<'static, ()> {
    SPAWN_LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Signals whose dispositions the daemon may have changed; reset in the child.
const RESET_SIGNALS: [Signal; 7] = [
    Signal::SIGPIPE,
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGCHLD,
    Signal::SIGWINCH,
];

fn command(spec: &SpawnSpec) -> Command {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args).current_dir(&spec.cwd).env_clear();
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs in the child between fork and exec: only async-signal-safe calls. `cgroup` is the
/// session cgroup's `cgroup.procs`: writing `0` moves the writer into it. A refusal leaves
/// the child where it is (the session sees that and says so: `contain::Scope::started`).
fn child_setup(controlling_tty: bool, cgroup: Option<RawFd>) -> io::Result<()> {
    if let Some(fd) = cgroup {
        // SAFETY: write(2) is async-signal-safe; fd stays open until exec (close-on-exec).
        let _ = unsafe { nix::libc::write(fd, b"0".as_ptr().cast(), 1) };
    }
    // SAFETY: resetting dispositions to the default is async-signal-safe.
    for sig in RESET_SIGNALS {
        unsafe { signal::signal(sig, SigHandler::SigDfl) }.map_err(io::Error::from)?;
    }
    signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
        .map_err(io::Error::from)?;
    nix::unistd::setsid().map_err(io::Error::from)?;
    if controlling_tty {
        // SAFETY: fd 0 is the pty slave (set up by Command before pre_exec runs).
        let rc = unsafe { nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Start `spec` in a new pty of `rows`×`cols` (the final size: never resized during boot),
/// in the cgroup whose `cgroup.procs` is open at `cgroup` when given.
///
/// Errors: opening the pty or spawning (e.g. program not found, cwd missing).
pub fn spawn_pty(
    spec: &SpawnSpec,
    rows: u16,
    cols: u16,
    cgroup: Option<RawFd>,
) -> io::Result<PtyChild> {
    let size = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let _guard = hold_spawns();
    let pty = open_pty(&size)?;

    let mut cmd = command(spec);
    cmd.stdin(Stdio::from(pty.slave.try_clone()?))
        .stdout(Stdio::from(pty.slave.try_clone()?))
        .stderr(Stdio::from(pty.slave.try_clone()?));
    // SAFETY: child_setup only makes async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || child_setup(true, cgroup));
    }
    let child = cmd.spawn()?;
    super::groups::register(child.id());
    // Drop every parent copy of the slave now, or EOF/EIO is never seen on the master.
    drop(cmd);
    drop(pty.slave);
    Ok(PtyChild {
        master: pty.master,
        child,
    })
}

/// Start `spec` with piped stdin/stdout/stderr, in its own process group, in the cgroup
/// whose `cgroup.procs` is open at `cgroup` when given.
///
/// Errors: spawning failed (program not found, cwd missing, …).
pub fn spawn_pipes(spec: &SpawnSpec, cgroup: Option<RawFd>) -> io::Result<PipeChild> {
    let mut cmd = command(spec);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: child_setup only makes async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || child_setup(false, cgroup));
    }
    let mut child = {
        let _guard = hold_spawns();
        let child = cmd.spawn()?;
        super::groups::register(child.id());
        child
    };
    let missing = || io::Error::other("child pipe missing");
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr = child.stderr.take().ok_or_else(missing)?;
    set_nonblocking(&stdin)?;
    set_nonblocking(&stdout)?;
    set_nonblocking(&stderr)?;
    Ok(PipeChild {
        child,
        stdin,
        stdout,
        stderr,
    })
}

/// Tell the pty (and so the child) its new size.
pub fn set_pty_size(master: &OwnedFd, rows: u16, cols: u16) -> io::Result<()> {
    let size = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one Winsize from the pointer, which outlives the call.
    let rc = unsafe { nix::libc::ioctl(master.as_raw_fd(), nix::libc::TIOCSWINSZ as _, &size) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_cloexec(fd: &OwnedFd) -> io::Result<()> {
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok(())
}

fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
    fcntl(&fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// Open a pty of `size`: both ends close-on-exec, the master non-blocking, and `IUTF8` set in
/// its line discipline (as alacritty does), so that in canonical mode an erase removes a whole
/// UTF-8 character. Call with [`SPAWN_LOCK`] held.
fn open_pty(size: &Winsize) -> io::Result<OpenptyResult> {
    let pty = openpty(Some(size), None).map_err(io::Error::from)?;
    set_cloexec(&pty.master)?;
    set_cloexec(&pty.slave)?;
    set_nonblocking(&pty.master)?;
    let mut tio = termios::tcgetattr(&pty.master)?;
    tio.input_flags.insert(InputFlags::IUTF8);
    termios::tcsetattr(&pty.master, SetArg::TCSANOW, &tio)?;
    Ok(pty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::time::{Duration, Instant};

    fn spec(cmd: &str) -> SpawnSpec {
        SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), cmd.into()],
            cwd: std::env::temp_dir(),
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("X_TEST".into(), "42".into()),
            ],
        }
    }

    fn read_all(master: &OwnedFd, deadline: Duration) -> String {
        let mut out = Vec::new();
        let mut f = std::fs::File::from(master.try_clone().unwrap());
        let end = Instant::now() + deadline;
        let mut buf = [0u8; 4096];
        while Instant::now() < end {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(_) => break, // EIO: the slave side is closed
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn pty_child_has_a_tty_the_size_and_only_our_env() {
        let mut c = spawn_pty(
            &spec("stty size; tty -s && echo TTY; echo env=$X_TEST; env | wc -l"),
            50,
            220,
            None,
        )
        .unwrap();
        let out = read_all(&c.master, Duration::from_secs(5));
        c.child.wait().unwrap();
        assert!(out.contains("50 220"), "{out}");
        assert!(out.contains("TTY"), "{out}");
        assert!(out.contains("env=42"), "{out}");
    }

    #[test]
    fn pty_has_iutf8_seen_from_the_slave_and_the_child() {
        let size = Winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = {
            let _guard = hold_spawns();
            open_pty(&size).unwrap()
        };
        let slave = termios::tcgetattr(&pty.slave).unwrap();
        assert!(slave.input_flags.contains(InputFlags::IUTF8));
        drop(pty);

        let mut c = spawn_pty(&spec("stty -a"), 24, 80, None).unwrap();
        let out = read_all(&c.master, Duration::from_secs(5));
        c.child.wait().unwrap();
        let words: Vec<&str> = out.split_whitespace().collect();
        assert!(words.contains(&"iutf8"), "{out}");
        assert!(!words.contains(&"-iutf8"), "{out}");
    }

    #[test]
    fn pipe_ends_are_non_blocking() {
        let mut c = spawn_pipes(&spec("sleep 30"), None).unwrap();
        for fd in [c.stdin.as_fd(), c.stdout.as_fd(), c.stderr.as_fd()] {
            let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap());
            assert!(flags.contains(OFlag::O_NONBLOCK));
        }
        crate::child::signal_group(c.child.id(), Signal::SIGKILL).unwrap();
        c.child.wait().unwrap();
    }

    #[test]
    fn child_leads_its_own_process_group() {
        let mut c = spawn_pty(&spec("ps -o pid=,pgid=,sid= -p $$"), 24, 80, None).unwrap();
        let pid = c.child.id();
        let out = read_all(&c.master, Duration::from_secs(5));
        c.child.wait().unwrap();
        let nums: Vec<u32> = out
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        assert_eq!(nums, vec![pid, pid, pid], "{out}");
    }

    #[test]
    fn group_signal_ends_the_child() {
        let mut c = spawn_pipes(&spec("sleep 30"), None).unwrap();
        crate::child::signal_group(c.child.id(), Signal::SIGTERM).unwrap();
        let status = c.child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));
    }

    #[test]
    fn missing_program_is_an_error() {
        let mut s = spec("true");
        s.program = "/nonexistent/prog".into();
        assert!(spawn_pty(&s, 24, 80, None).is_err());
        assert!(spawn_pipes(&s, None).is_err());
    }
}

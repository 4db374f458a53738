//! The daemon without a service manager (issue 8 item 2, spec 08 §1 "no service manager"):
//! `daemon --detach` starts it in the background, in its own session so that closing the
//! terminal does not hang it up, logging to files; `shutdown` stops a running daemon and
//! returns once it is gone.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fs2::FileExt;

use super::{paths, print, CliError, CliResult};
use crate::fsutil::{ensure_dir, MODE_PRIVATE};
use crate::paths::Paths;

/// How long `daemon --detach` waits for the new daemon to answer a ping.
const START_WAIT: Duration = Duration::from_secs(30);
/// How long `shutdown` waits for the daemon to be gone (its own shutdown is bounded at 15 s).
const STOP_WAIT: Duration = Duration::from_secs(30);
/// Poll period of both waits.
const POLL: Duration = Duration::from_millis(50);

/// The files a detached daemon's stdout and stderr go to (spec 08 §1's names), in
/// `<root>/logs/iapeer/`.
pub fn std_logs(paths: &Paths) -> (PathBuf, PathBuf) {
    let dir = paths.logs_dir();
    (dir.join("daemon-stdout.log"), dir.join("daemon-stderr.log"))
}

/// The pid of the daemon answering on the control socket, if one does.
fn running_pid(paths: &Paths) -> Option<u32> {
    super::health::ping(paths).map(|p| p.pid)
}

/// True while a daemon holds the single-instance lock (`<state>/daemon.lock`): the kernel
/// drops it when the process is gone, zombie or not.
fn lock_held(paths: &Paths) -> bool {
    let Ok(f) = OpenOptions::new()
        .read(true)
        .open(paths.state_dir().join("daemon.lock"))
    else {
        return false;
    };
    match f.try_lock_exclusive() {
        Ok(()) => {
            let _ = FileExt::unlock(&f);
            false
        }
        Err(_) => true,
    }
}

fn append_log(path: &Path) -> Result<std::fs::File, CliError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(MODE_PRIVATE)
        .open(path)
        .map_err(|e| CliError::failed(format!("cannot open {}: {e}", path.display())))
}

/// `daemon --detach`: start the daemon in the background and return once it answers.
pub fn detach() -> CliResult {
    let paths = paths()?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find the iapeer binary: {e}")))?;
    let pid = start_detached(&paths, &exe)?;
    print(&format!(
        "daemon running in the background (pid {pid}) — log: {}, its output: {}; stop it with: iapeer shutdown\n",
        paths.daemon_log().display(),
        std_logs(&paths).1.display()
    ))
}

/// Start `<exe> daemon` in the background, in a session of its own, its output appended to
/// [`std_logs`], and return its pid once it answers `ping`.
///
/// Errors: a daemon already runs, the logs cannot be opened, or the daemon exits or stays
/// silent at start (with the last line of its stderr and where to look).
pub fn start_detached(paths: &Paths, exe: &Path) -> Result<u32, CliError> {
    let sock = paths.socket();
    if let Some(pid) = running_pid(paths) {
        return Err(CliError::hinted(
            format!(
                "a daemon is already running (pid {pid}, on {})",
                sock.display()
            ),
            "stop it first with: iapeer shutdown",
        ));
    }
    ensure_dir(&paths.logs_dir()).map_err(|e| {
        CliError::failed(format!("cannot create {}: {e}", paths.logs_dir().display()))
    })?;
    let (out_path, err_path) = std_logs(paths);
    let mut cmd = Command::new(exe);
    cmd.arg("daemon")
        .stdin(Stdio::null())
        .stdout(append_log(&out_path)?)
        .stderr(append_log(&err_path)?);
    // SAFETY: setsid is async-signal-safe. A session of its own has no controlling
    // terminal, so the terminal closing (SIGHUP to its session) does not reach the daemon.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::failed(format!("cannot start the daemon: {e}")))?;
    let start = Instant::now();
    loop {
        if let Some(pid) = running_pid(paths) {
            return Ok(pid);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let tail = std::fs::read_to_string(&err_path).unwrap_or_default();
            let last = tail.lines().last().unwrap_or("").to_string();
            return Err(CliError::failed(format!(
                "the daemon exited at start ({status}): {last} — see {}",
                err_path.display()
            )));
        }
        if start.elapsed() > START_WAIT {
            return Err(CliError::failed(format!(
                "the daemon (pid {}) did not answer on {} within {} s — see {}",
                child.id(),
                sock.display(),
                START_WAIT.as_secs(),
                err_path.display()
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// `shutdown --json`: `{"ok":true,"stopped":<pid>}`, or `"stopped":null` when no daemon
/// was running.
#[derive(Debug, serde::Serialize)]
pub struct ShutdownDoc {
    /// The stopped daemon's process id.
    pub stopped: Option<u32>,
}

/// `shutdown`: stop the running daemon (SIGTERM: its sessions end, live agents resume on
/// their next message) and return once it is gone.
pub fn shutdown(inv: &super::parse::Invocation) -> CliResult {
    let paths = paths()?;
    match stop(&paths)? {
        Some(pid) => super::done(
            inv,
            &ShutdownDoc { stopped: Some(pid) },
            &format!("daemon stopped (pid {pid}); its sessions ended\n"),
        ),
        None => super::done(
            inv,
            &ShutdownDoc { stopped: None },
            &format!(
                "no daemon is running (nothing answers on {})\n",
                paths.socket().display()
            ),
        ),
    }
}

/// Stop the daemon answering on the control socket and wait until it is gone. Returns its
/// pid, or `None` when none was running.
///
/// Errors: it cannot be signalled, or is still there after 30 s (with what to do).
pub fn stop(paths: &Paths) -> Result<Option<u32>, CliError> {
    let Some(pid) = running_pid(paths) else {
        return Ok(None);
    };
    let target = nix::unistd::Pid::from_raw(pid as i32);
    nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM)
        .map_err(|e| CliError::failed(format!("cannot signal the daemon (pid {pid}): {e}")))?;
    let start = Instant::now();
    while lock_held(paths) || running_pid(paths) == Some(pid) {
        if start.elapsed() > STOP_WAIT {
            return Err(CliError::failed(format!(
                "the daemon (pid {pid}) did not stop within {} s — see {}; end it with: kill -KILL {pid}",
                STOP_WAIT.as_secs(),
                paths.daemon_log().display()
            )));
        }
        std::thread::sleep(POLL);
    }
    Ok(Some(pid))
}

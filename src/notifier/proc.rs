//! The child processes of the service: `iapeer send` for every delivery, `check` programs,
//! and watcher scripts (`/bin/sh -c`, each in its own process group, killed with it). Every
//! child's outcome comes back as a message on the service's channel, so the service loop
//! never blocks on a child.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use crossbeam_channel::Sender;
use nix::sys::signal::Signal;

use crate::child::{spawn_leader, wait_bounded};

/// How long one `iapeer send` may take (a cold wake takes tens of seconds).
pub const SEND_TIMEOUT_SECS: u64 = 120;
/// How long a `check` program may run.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(30);
/// After SIGTERM, a script's group gets SIGKILL this much later.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// Why a child of the service failed. `Display` gives the line the service logs or keeps.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// `iapeer send` could not be started.
    #[error("cannot run {exe}: {source}")]
    SendSpawn {
        /// The `iapeer` program.
        exe: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `iapeer send` could not be waited for.
    #[error("iapeer send: {0}")]
    SendWait(#[source] std::io::Error),
    /// The send refused: the last line of its output.
    #[error("{0}")]
    Refused(String),
    /// The send failed without a line of output.
    #[error("iapeer send ended with {0}")]
    SendEnded(ExitStatus),
    /// A `check` program could not be started.
    #[error("check {program} cannot run: {source}")]
    CheckSpawn {
        /// The program.
        program: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A `check` program ran longer than its timeout (seconds) and was killed.
    #[error("check {program} took longer than {secs} s")]
    CheckTimeout {
        /// The program.
        program: String,
        /// The timeout, seconds.
        secs: u64,
    },
    /// A `check` program ended other than with exit 0.
    #[error("check {program} ended with {status}")]
    CheckEnded {
        /// The program.
        program: String,
        /// How it ended.
        status: ExitStatus,
    },
    /// A `check` program could not be waited for.
    #[error("check {program}: {source}")]
    CheckWait {
        /// The program.
        program: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `/bin/sh` could not be started for a script.
    #[error("cannot start /bin/sh: {0}")]
    ShellSpawn(#[source] std::io::Error),
}

/// Send `text` to `to` as `from` (an identity) with `iapeer send`, blocking. `Ok` = the
/// send answered delivered or queued (exit 0), or delivered earlier.
///
/// `id` is the message id (`--id`): a signal sends with its spool id, so a send that
/// reached the peer before this process died (its spool file still on disk) is answered
/// "delivered … earlier" when the next process sends it again, never delivered twice.
///
/// Errors: the send's refusal (its last line of output), or why it could not run.
pub fn send(
    exe: &Path,
    from: &str,
    to: &str,
    text: &str,
    topic: Option<&str>,
    id: Option<&str>,
) -> Result<(), ProcError> {
    let mut cmd = Command::new(exe);
    cmd.args([
        "send",
        to,
        "--message-file",
        "-",
        "--from",
        from,
        "--timeout",
    ])
    .arg(SEND_TIMEOUT_SECS.to_string());
    if let Some(t) = topic {
        cmd.args(["--topic", t]);
    }
    if let Some(id) = id {
        cmd.args(["--id", id]);
    }
    let mut child = cmd
        .env_remove("PEER_IDENTITY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ProcError::SendSpawn {
            exe: exe.to_path_buf(),
            source,
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(ProcError::SendWait)?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let text = if text.is_empty() {
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    } else {
        text
    };
    Err(text
        .lines()
        .last()
        .map(|l| ProcError::Refused(l.to_string()))
        .unwrap_or(ProcError::SendEnded(out.status)))
}

/// Run a `check` program (no shell, no arguments) in `cwd`, killing its process group after
/// `timeout` (spec 09: 30 s, [`CHECK_TIMEOUT`]). Blocks the calling thread (the service runs
/// it on a thread of its own); the wait is a channel receive with a deadline, not a poll.
/// `Ok` = it exited 0.
///
/// Errors: why the fire is skipped (non-zero exit, timeout, cannot run).
pub fn run_check(program: &str, cwd: &Path, timeout: Duration) -> Result<(), ProcError> {
    let child = spawn_leader(
        Command::new(program).current_dir(cwd),
        Stdio::null(),
        Stdio::null(),
    )
    .map_err(|source| ProcError::CheckSpawn {
        program: program.to_string(),
        source,
    })?;
    let status =
        wait_bounded(child, timeout, |mut c| c.wait()).ok_or_else(|| ProcError::CheckTimeout {
            program: program.to_string(),
            secs: timeout.as_secs(),
        })?;
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(status) => Err(ProcError::CheckEnded {
            program: program.to_string(),
            status,
        }),
        Err(source) => Err(ProcError::CheckWait {
            program: program.to_string(),
            source,
        }),
    }
}

/// What a running script reports.
pub enum ScriptEvent {
    /// One line of stdout (without the newline).
    Line(String),
    /// One line of stderr.
    Stderr(String),
    /// It ended: how (`exit status 1`, `killed by SIGTERM`…).
    Exited(String),
}

/// Start `script` with `/bin/sh -c` in `cwd`, in a new process group; every line and the
/// exit are sent on `tx` wrapped by `wrap`. Returns the pid (= the group id).
///
/// Errors: the shell cannot be started.
pub fn start_script<E: Send + 'static>(
    script: &str,
    cwd: &Path,
    tx: Sender<E>,
    wrap: impl Fn(ScriptEvent) -> E + Send + Sync + Clone + 'static,
) -> Result<u32, ProcError> {
    let mut child = spawn_leader(
        Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .current_dir(cwd),
        Stdio::piped(),
        Stdio::piped(),
    )
    .map_err(ProcError::ShellSpawn)?;
    let pid = child.id();
    if let Some(out) = child.stdout.take() {
        let (tx, wrap) = (tx.clone(), wrap.clone());
        std::thread::spawn(move || {
            read_lines(out, |l| tx.send(wrap(ScriptEvent::Line(l))).is_ok())
        });
    }
    if let Some(err) = child.stderr.take() {
        let (tx, wrap) = (tx.clone(), wrap.clone());
        std::thread::spawn(move || {
            read_lines(err, |l| tx.send(wrap(ScriptEvent::Stderr(l))).is_ok())
        });
    }
    std::thread::spawn(move || {
        let how = match child.wait() {
            Ok(s) => describe(s),
            Err(e) => format!("wait failed: {e}"),
        };
        let _ = tx.send(wrap(ScriptEvent::Exited(how)));
    });
    Ok(pid)
}

fn describe(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => Signal::try_from(sig)
            .map(|s| format!("killed by {s}"))
            .unwrap_or_else(|_| format!("killed by signal {sig}")),
        _ => "ended".into(),
    }
}

fn read_lines(r: impl Read, mut each: impl FnMut(String) -> bool) {
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    buf.pop();
                }
                if !each(String::from_utf8_lossy(&buf).into_owned()) {
                    return;
                }
            }
        }
    }
}

/// End a script's process group: SIGTERM now, SIGKILL [`KILL_GRACE`] later (from a helper
/// thread, so the caller does not wait). `now_kill` sends SIGKILL at once (shutdown).
pub fn end_group(pgid: u32, now_kill: bool) {
    use crate::child::signal_group;
    if now_kill {
        let _ = signal_group(pgid, Signal::SIGKILL);
        return;
    }
    let _ = signal_group(pgid, Signal::SIGTERM);
    std::thread::spawn(move || {
        std::thread::sleep(KILL_GRACE);
        let _ = signal_group(pgid, Signal::SIGKILL);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_passes_on_exit_0_and_fails_otherwise_or_after_its_timeout() {
        let cwd = Path::new("/");
        assert!(run_check("/bin/true", cwd, CHECK_TIMEOUT).is_ok());
        let e = run_check("/bin/false", cwd, CHECK_TIMEOUT)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ended with exit status: 1"), "{e}");
        let e = run_check("/nonexistent/check", cwd, CHECK_TIMEOUT)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot run"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let slow = dir.path().join("slow.sh");
        crate::testkit::write_program(&slow, "#!/bin/sh\nsleep 30\n");
        let t = std::time::Instant::now();
        let e = run_check(slow.to_str().unwrap(), cwd, Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(e.contains("took longer than"), "{e}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "killed at its timeout"
        );
    }
}

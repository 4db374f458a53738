//! Running a helper program with a deadline (memory providers, runtime plugin commands): its
//! own process group, stdin closed, stdout and stderr kept, the whole group killed at the
//! deadline.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a helper ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this status (`None`: killed by a signal).
    Exited(Option<i32>),
    /// Still running at the deadline; its process group was killed.
    Timeout,
    /// It could not be started: missing or not executable.
    NotExecutable,
    /// It could not be started for another reason.
    SpawnFailed,
}

/// One run of a helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// How it ended.
    pub ending: Ending,
    /// How long it ran, in milliseconds.
    pub ms: u64,
    /// Its standard output (lossy UTF-8).
    pub stdout: String,
    /// Its standard error, or why it could not start.
    pub stderr: String,
}

impl Finished {
    /// True for exit status 0.
    pub fn ok(&self) -> bool {
        self.ending == Ending::Exited(Some(0))
    }

    /// The last `max` characters of stderr (else stdout), trimmed: what to show of a failure.
    pub fn tail(&self, max: usize) -> String {
        let text = if self.stderr.trim().is_empty() {
            self.stdout.trim()
        } else {
            self.stderr.trim()
        };
        last_chars(text, max)
    }
}

/// The last `max` characters of `text` (the end of a helper's output says most about why it
/// failed).
pub fn last_chars(text: &str, max: usize) -> String {
    let n = text.chars().count();
    text.chars().skip(n.saturating_sub(max)).collect()
}

/// Run `program args` in `cwd` with `env` added, and kill its process group at `deadline`.
pub fn run(
    program: &Path,
    args: &[String],
    cwd: &Path,
    env: &[(&str, &str)],
    deadline: Duration,
) -> Finished {
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.iter().copied())
        .current_dir(cwd);
    run_command(command, deadline)
}

/// [`run`] for a command the caller prepared (program, arguments, folder, environment):
/// stdin closed, stdout and stderr kept, its own process group killed at `deadline`.
pub fn run_command(mut command: Command, deadline: Duration) -> Finished {
    let start = Instant::now();
    let program = std::path::PathBuf::from(command.get_program());
    let spawned = spawn_leader(&mut command, Stdio::piped(), Stdio::piped());
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let ending = match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                    Ending::NotExecutable
                }
                _ => Ending::SpawnFailed,
            };
            return Finished {
                ending,
                ms: start.elapsed().as_millis() as u64,
                stdout: String::new(),
                stderr: format!("cannot run {}: {e}", program.display()),
            };
        }
    };
    // Read both pipes on their own threads: a chatty helper must not block on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        pipe.map(|mut p| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = p.read_to_end(&mut buf);
                buf
            })
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    // Polled from 1 ms, doubling to 20 ms: a quick helper (a git query, ~5 ms) is not held
    // for a whole 20 ms step.
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() >= deadline => break None,
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(_) => break None,
        }
    };
    if status.is_none() {
        let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
    }
    // A grandchild holding a pipe open was killed with the group, so the readers end.
    let text = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
        h.and_then(|h| h.join().ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    Finished {
        ending: match status {
            None => Ending::Timeout,
            Some(s) => Ending::Exited(s.code()),
        },
        ms: start.elapsed().as_millis() as u64,
        stdout: text(out),
        stderr: text(err),
    }
}

/// Start `cmd` with stdin closed and `stdout`, `stderr` as given, leading a process group of
/// its own (its id is the child's pid), so that [`signal_group`] reaches all it starts.
///
/// Errors: the program could not be started (`Command::spawn`'s error).
pub fn spawn_leader(
    cmd: &mut Command,
    stdout: Stdio,
    stderr: Stdio,
) -> std::io::Result<std::process::Child> {
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .spawn()
}

/// Send `sig` to the whole process group `pgid` (our children lead their own groups).
/// A group that is already gone is not an error.
pub fn signal_group(pgid: u32, sig: nix::sys::signal::Signal) -> std::io::Result<()> {
    let pgid = nix::unistd::Pid::from_raw(pgid as i32);
    match nix::sys::signal::killpg(pgid, sig) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Wait for `child` (the leader of a process group of its own) through `wait` —
/// `Child::wait`, or `Child::wait_with_output` to keep its output — on a thread of its own,
/// at most `timeout`: a channel receive with a deadline, not a poll. `None`: it still ran at
/// `timeout`, and its whole group was sent `SIGKILL` (the waiting thread reaps it).
pub fn wait_bounded<T: Send + 'static>(
    child: std::process::Child,
    timeout: Duration,
    wait: impl FnOnce(std::process::Child) -> T + Send + 'static,
) -> Option<T> {
    let pgid = child.id();
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(wait(child));
    });
    let waited = rx.recv_timeout(timeout).ok();
    if waited.is_none() {
        let _ = signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
    }
    waited
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_chars_keeps_the_end_in_characters() {
        assert_eq!(last_chars("abcdef", 3), "def");
        assert_eq!(last_chars("ab", 3), "ab");
        assert_eq!(last_chars("…ééé", 2), "éé");
    }
}

//! `iapeer demo [--keep]` (spec 07 "Demo"): the main job with no accounts. A private daemon
//! in a temporary root, two peers on the built-in `echo` stand-in runtime, and an operator
//! peer (`you`) on the built-in `human` runtime, whose inbox the demo reads. Messages go both
//! ways — one to a sleeping peer, so the wake is visible — and every delivery is printed as
//! it happens.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::error::fail;
use super::parse::Invocation;
use super::spec::flags;
use super::{CliError, CliResult};
use crate::eventlog::parse_line;
use crate::fsutil::{ensure_dir, random_hex};
use crate::paths::Paths;
use crate::runtime_table::{ECHO, HUMAN};

/// The operator's identity: `you` on the built-in human runtime.
const OPERATOR: &str = "human-you";

/// Longest the demo waits for any one step.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// The running demo: its root, its daemon, and the log readers.
pub(super) struct Demo {
    /// What its lines start with: empty, or `[host a] ` in `demo --federation`.
    label: String,
    root: PathBuf,
    exe: PathBuf,
    daemon: Option<Child>,
    deliveries: Tail,
    inbox: Tail,
    inbox_buf: String,
    /// Records read from the operator's inbox, not printed yet.
    stored: std::collections::VecDeque<crate::inbox::Record>,
    seen: usize,
}

/// Follows a growing file from where it was last read.
struct Tail {
    path: PathBuf,
    offset: u64,
}

impl Tail {
    fn read_new(&mut self) -> Vec<u8> {
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_ok() && f.read_to_end(&mut buf).is_ok() {
            self.offset += buf.len() as u64;
        }
        buf
    }
}

impl Demo {
    /// A demo on the daemon `daemon` of `root`, its lines starting with `label`.
    pub(super) fn new(root: &Path, exe: &Path, daemon: Child, label: &str) -> Demo {
        let paths = Paths::at(root);
        Demo {
            label: label.to_string(),
            root: root.to_path_buf(),
            exe: exe.to_path_buf(),
            daemon: Some(daemon),
            deliveries: Tail {
                path: paths.delivery_log(),
                offset: 0,
            },
            inbox: Tail {
                path: paths.inbox("you"),
                offset: 0,
            },
            inbox_buf: String::new(),
            stored: Default::default(),
            seen: 0,
        }
    }

    /// Its root.
    pub(super) fn root(&self) -> &Path {
        &self.root
    }

    fn iapeer(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(args)
            .env("IAPEER_ROOT", &self.root)
            .env_remove("IAPEER_DAEMON_SOCKET")
            .env_remove("PEER_IDENTITY")
            .env_remove("IAPEER_BEARER_TOKEN");
        c
    }

    /// Run one CLI command, echoing it like a shell would, and print its output indented.
    pub(super) fn run(&mut self, args: &[&str]) -> Result<String, CliError> {
        self.run_shown(args, args)
    }

    /// [`Demo::run`], echoing `shown` in place of `args` (a URL with its password masked).
    pub(super) fn run_shown(&mut self, args: &[&str], shown: &[&str]) -> Result<String, CliError> {
        println!("\n{}$ iapeer {}", self.label, shell_words(shown));
        let out = self
            .iapeer(args)
            .stdin(Stdio::null())
            .output()
            .map_err(fail)?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for line in text.lines() {
            println!("  {line}");
        }
        if !out.status.success() {
            return Err(fail(format!(
                "`iapeer {}` failed: {}",
                shell_words(shown),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(text)
    }

    /// Print new delivery lines and, under each delivery to the operator, the message it
    /// stored in the operator's inbox; return how many successful deliveries have been seen
    /// in total.
    pub(super) fn pump_logs(&mut self) -> usize {
        // The inbox first: a record is stored before its delivery is logged.
        self.inbox_buf
            .push_str(&String::from_utf8_lossy(&self.inbox.read_new()));
        // Whole lines only: a record being appended is read on the next pump.
        let whole = self.inbox_buf.rfind('\n').map_or(0, |i| i + 1);
        let lines: String = self.inbox_buf.drain(..whole).collect();
        self.stored.extend(crate::inbox::parse_records(&lines));
        for line in String::from_utf8_lossy(&self.deliveries.read_new()).lines() {
            let f: std::collections::HashMap<String, String> =
                parse_line(line).into_iter().collect();
            let get = |k: &str| f.get(k).map(String::as_str).unwrap_or("");
            if get("ok") == "true" {
                self.seen += 1;
                let woke = if get("woke") == "true" { ", woke" } else { "" };
                // The sender's end of a hop to another host names no session of its own.
                let via = match get("via") {
                    "" if get("path") == "federation" => "another host".to_string(),
                    via => via.to_string(),
                };
                println!(
                    "  {}✓ delivery: {} → {} via {via}{woke} ({} ms)",
                    self.label,
                    get("caller"),
                    get("to"),
                    get("ms")
                );
                if get("via") == OPERATOR {
                    if let Some(r) = self.stored.pop_front() {
                        println!(
                            "  {}✉ you got a message from {} ({}): {}",
                            self.label,
                            r.from,
                            r.runtime,
                            crate::visible::text(&r.body)
                        );
                    }
                }
            } else if !get("ev").is_empty() {
                println!(
                    "  {}✗ delivery: {} → {} failed: {}",
                    self.label,
                    get("caller"),
                    get("to"),
                    crate::visible::line(get("err"))
                );
            }
        }
        self.seen
    }

    /// Wait until `n` successful deliveries were logged in total.
    pub(super) fn wait_deliveries(&mut self, n: usize) -> Result<(), CliError> {
        let start = Instant::now();
        while self.pump_logs() < n {
            if start.elapsed() > STEP_TIMEOUT {
                return Err(fail(format!(
                    "timed out waiting for delivery {n}; see {}",
                    self.root.join("logs/iapeer").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // A delivery to the operator is logged once its record is in the inbox: no wait.
        self.pump_logs();
        Ok(())
    }

    pub(super) fn stop_daemon(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(d.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = d.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.stop_daemon();
    }
}

fn shell_words(args: &[&str]) -> String {
    args.iter()
        .map(|a| {
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=".contains(c))
            {
                a.to_string()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Start a daemon on `root` (any free loopback port; its stderr in `<root>/daemon-stderr.log`),
/// note its pid in `pids` for the interrupt handler, and wait until it answers.
///
/// Errors: it cannot be started, exits, or does not answer within [`STEP_TIMEOUT`].
pub(super) fn spawn_daemon(exe: &Path, root: &Path, pids: &Pids) -> Result<Child, CliError> {
    let daemon_log = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(crate::fsutil::MODE_PRIVATE)
            .open(root.join("daemon-stderr.log"))
            .map_err(fail)?
    };
    let mut daemon = pids
        .spawn(
            Command::new(exe)
                .arg("daemon")
                .env("IAPEER_ROOT", root)
                .env("IAPEER_PORT", "0")
                .env_remove("IAPEER_DAEMON_SOCKET")
                .env_remove("IAPEER_FEDERATION_URL")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(daemon_log),
        )
        .map_err(|e| fail(format!("cannot start the daemon: {e}")))?;
    wait_for_daemon(root, &mut daemon)?;
    Ok(daemon)
}

fn wait_for_daemon(root: &Path, daemon: &mut Child) -> Result<(), CliError> {
    let paths = Paths::at(root);
    let start = Instant::now();
    while start.elapsed() < STEP_TIMEOUT {
        if paths.router_json().exists()
            && std::os::unix::net::UnixStream::connect(paths.socket()).is_ok()
        {
            return Ok(());
        }
        if let Ok(Some(status)) = daemon.try_wait() {
            return Err(fail(format!(
                "the demo daemon exited ({status}); see {}",
                paths.daemon_log().display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(fail("the demo daemon did not come up within 20 s"))
}

/// Set once the demo is interrupted: the main thread then leaves the clean-up (and the exit)
/// to the signal thread.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// On SIGINT, SIGTERM or SIGHUP (its terminal closed): stop the demo's daemon, remove the
/// root (unless `--keep`), exit 130. What it says goes to stderr only if that still works.
/// The pids the interrupt handler ends (the demo's daemons, and `--federation`'s
/// `redis-server`).
#[derive(Clone, Default)]
pub(super) struct Pids(std::sync::Arc<std::sync::Mutex<Vec<u32>>>);

impl Pids {
    /// Start `cmd` and note its pid, under the lock the interrupt handler reads the pids
    /// with: a child started as the signal comes is noted before the handler reads them (it
    /// was left running when the signal came between the start and the note), and none starts
    /// once the demo is interrupted.
    ///
    /// Errors: the start's, or `Interrupted` when the demo was interrupted.
    pub(super) fn spawn(&self, cmd: &mut Command) -> std::io::Result<Child> {
        let mut pids = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "the demo was interrupted",
            ));
        }
        let child = cmd.spawn()?;
        pids.push(child.id());
        Ok(child)
    }

    fn all(&self) -> Vec<u32> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// End the demo's own children `pids`: SIGTERM, up to `grace` for them to end (reaped as
/// they do), then SIGKILL to those left, reaped too (at most 2 s more: a process in an
/// uninterruptible wait is left). Returns the pids that had to be killed. Only these pids are
/// signalled: each is a child of this process, so until it is reaped its pid is not reused.
fn end_children(pids: &[nix::unistd::Pid], grace: Duration) -> Vec<nix::unistd::Pid> {
    use nix::sys::signal::{kill, Signal};
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let mut left: Vec<nix::unistd::Pid> = pids.to_vec();
    // Reaps what ended; keeps the rest (an error: not our child, or gone already).
    let reap = |left: &mut Vec<nix::unistd::Pid>| {
        left.retain(|p| {
            matches!(
                waitpid(*p, Some(WaitPidFlag::WNOHANG)),
                Ok(WaitStatus::StillAlive)
            )
        });
    };
    for pid in &left {
        let _ = kill(*pid, Signal::SIGTERM);
    }
    let start = Instant::now();
    reap(&mut left);
    while !left.is_empty() && start.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(50));
        reap(&mut left);
    }
    let killed = left.clone();
    for pid in &left {
        let _ = kill(*pid, Signal::SIGKILL);
    }
    let start = Instant::now();
    while !left.is_empty() && start.elapsed() < Duration::from_secs(2) {
        reap(&mut left);
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    killed
}

fn on_interrupt(root: PathBuf, keep: bool, pids: Pids) -> CliResult {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use std::io::Write;
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| fail(format!("cannot watch signals: {e}")))?;
    std::thread::spawn(move || {
        if signals.forever().next().is_none() {
            return;
        }
        INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
        let pids: Vec<nix::unistd::Pid> = pids
            .all()
            .into_iter()
            .map(|p| nix::unistd::Pid::from_raw(p as i32))
            .collect();
        // A daemon ends its sessions (SIGKILL after 3 s); give them that long.
        let killed = end_children(&pids, Duration::from_secs(6));
        if !killed.is_empty() {
            let killed: Vec<String> = killed.iter().map(|p| p.to_string()).collect();
            let _ = writeln!(
                std::io::stderr(),
                "\nthe demo's process(es) {} did not end within 6 s of SIGTERM: killed (SIGKILL)",
                killed.join(", ")
            );
        }
        // A closed terminal fails the write (`eprintln!` would panic before the exit).
        let mut err = std::io::stderr();
        if keep {
            let _ = writeln!(
                err,
                "\ninterrupted — the demo root is kept: {}",
                root.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&root);
            let _ = writeln!(
                err,
                "\ninterrupted — the demo daemon is stopped and its temporary root removed"
            );
        }
        std::process::exit(130);
    });
    Ok(())
}

/// Run `iapeer demo`.
pub fn run(inv: &Invocation) -> CliResult {
    let keep = inv.flag(flags::KEEP);
    let federation = inv.flag(flags::FEDERATION);
    // Before anything is made: the federation demo needs a redis-server.
    let redis = match federation {
        true => Some(super::demo_federation::redis_program()?),
        false => None,
    };
    let exe =
        std::env::current_exe().map_err(|e| fail(format!("cannot find the iapeer binary: {e}")))?;
    let root = std::env::temp_dir().join(format!("iapeer-demo-{}", random_hex(4)));
    ensure_dir(&root).map_err(|e| fail(format!("cannot create {}: {e}", root.display())))?;
    let started = Instant::now();
    // Ctrl-C (or SIGTERM, or a closed terminal) must not leave a daemon or the temporary
    // root behind.
    let pids = Pids::default();
    on_interrupt(root.clone(), keep, pids.clone())?;
    let result = match redis {
        Some(program) => super::demo_federation::run(&program, &exe, &root, &pids, started),
        None => (|| -> CliResult {
            println!("iapeer demo — a private daemon in {}", root.display());
            println!(
                "peers: alice and bob on the built-in echo stand-in agent (no account needed),"
            );
            println!("       and you, the operator, on the built-in human runtime (an inbox).");
            let daemon = spawn_daemon(&exe, &root, &pids)?;
            let mut demo = Demo::new(&root, &exe, daemon, "");
            println!(
                "daemon up (pid {})",
                demo.daemon.as_ref().map_or(0, |d| d.id())
            );
            play(&mut demo, started)
        })(),
    };

    if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        // The signal thread is cleaning up and will exit the process.
        loop {
            std::thread::park();
        }
    }
    if keep || result.is_err() {
        print_kept(&root);
    } else {
        let _ = std::fs::remove_dir_all(&root);
    }
    result
}

/// The demo's script on a running daemon: three peers created, three messages with their
/// echoes waited for, the list shown, the daemon stopped and its logs shown.
fn play(demo: &mut Demo, started: Instant) -> CliResult {
    const ECHOES: &str = "Demo agent: echoes every message back to its sender.";
    for (name, runtime, description) in [
        ("alice", ECHO.name, ECHOES),
        ("bob", ECHO.name, ECHOES),
        ("you", HUMAN.name, "The operator of this demo."),
    ] {
        demo.run(&[
            "create",
            name,
            "--runtime",
            runtime,
            "--description",
            description,
        ])?;
    }

    let steps = [
        (
            "alice is asleep: this message wakes her; her echo comes back to you.",
            OPERATOR,
            "alice",
            "Hello Alice, are you there?",
        ),
        (
            "alice writes to bob, who is asleep too; bob's echo goes back to alice.",
            "echo-alice",
            "bob",
            "Hi Bob, this is Alice.",
        ),
        (
            "alice is live now: no wake this time.",
            OPERATOR,
            "alice",
            "Thanks, that is all.",
        ),
    ];
    for (i, (comment, from, to, message)) in steps.into_iter().enumerate() {
        println!("\n# {comment}");
        demo.run(&[
            "send",
            to,
            "--from",
            from,
            "--topic",
            "demo",
            "--message",
            message,
        ])?;
        // Each message and the echo it provokes: two deliveries per step.
        demo.wait_deliveries(2 * (i + 1))?;
    }

    demo.run(&["list"])?;
    demo.stop_daemon();
    demo.pump_logs();
    println!(
        "\nall stopped after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Where the kept demo root is and how to look around in it.
fn print_kept(root: &Path) {
    println!("\nthe demo root is kept: {}", root.display());
    println!(
        "look around:  export IAPEER_ROOT={} IAPEER_PORT=0   (any free port: beside a daemon of yours)",
        root.display()
    );
    println!("              iapeer daemon &   then   iapeer list   /   iapeer attach alice");
    println!("              your inbox: iapeer inbox you   —   what happened: iapeer logs");
    println!(
        "              logs: {}/logs/iapeer/delivery.log",
        root.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that ends at SIGTERM is reaped, not killed; one that ignores SIGTERM (as a
    /// daemon slow to end under load) is killed after the grace and reaped: none is left.
    #[test]
    fn children_left_after_the_grace_are_killed_and_reaped() {
        // Reaped by `end_children` itself (the test asserts it), not by `Child::wait`.
        let spawn = |script: &str| {
            let id = std::process::Command::new("sh")
                .args(["-c", script])
                .spawn()
                .unwrap()
                .id();
            nix::unistd::Pid::from_raw(id as i32)
        };
        let (p, s) = (
            spawn("exec sleep 600"),
            spawn("trap '' TERM; exec sleep 600"),
        );
        // Let the stubborn shell install its trap before it is signalled.
        std::thread::sleep(Duration::from_millis(300));
        let start = Instant::now();
        let killed = end_children(&[p, s], Duration::from_millis(700));
        assert_eq!(killed, [s]);
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "{:?}",
            start.elapsed()
        );
        for pid in [p, s] {
            assert_eq!(
                nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)),
                Err(nix::errno::Errno::ECHILD),
                "{pid} not reaped"
            );
            assert!(nix::sys::signal::kill(pid, None).is_err(), "{pid} is left");
        }
    }
}

//! Attaching a terminal to a session (spec 04 §1 "Attach", spec 05 §5 `attach` and
//! `iapeer <runtime>`): the real `iapeer attach` runs on a pty this test opens, like a human's
//! terminal; the daemon and the echo peers are real.

use crate::common;

use common::{alive, describe, TestEnv};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROWS: u16 = 40;
const COLS: u16 = 120;
const DETACHED: &str = "detached — session still running";

/// A CLI process whose stdin, stdout and stderr are the slave of a pty, as its controlling
/// terminal; everything it prints is collected from the master.
pub(crate) struct Terminal {
    child: Child,
    master: File,
    output: Arc<Mutex<Vec<u8>>>,
    /// Raised by the reader thread when the pty has nothing more to give.
    eof: Arc<AtomicBool>,
    status: Option<ExitStatus>,
}

impl Terminal {
    pub(crate) fn spawn(cmd: Command) -> Terminal {
        Terminal::spawn_sized(cmd, ROWS, COLS)
    }

    /// [`Terminal::spawn`] on a pty of `rows` × `cols`.
    pub(crate) fn spawn_sized(cmd: Command, rows: u16, cols: u16) -> Terminal {
        let mut cmd = cmd;
        let ws = nix::pty::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&ws), None).expect("openpty");
        let slave: OwnedFd = pty.slave;
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if nix::libc::setsid() < 0 || nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn on the pty");
        // The Command holds the parent's copies of the slave: drop them, or EOF never comes.
        drop(cmd);
        let master = File::from(pty.master);
        let output = Arc::new(Mutex::new(Vec::new()));
        let (mut reader, sink) = (master.try_clone().unwrap(), output.clone());
        let eof = Arc::new(AtomicBool::new(false));
        let at_eof = eof.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            // Ends with EIO once the child and every slave fd are gone.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            at_eof.store(true, Ordering::SeqCst);
        });
        Terminal {
            child,
            master,
            output,
            eof,
            status: None,
        }
    }

    /// Everything printed so far, as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// What the terminal shows now, rendered by a terminal emulator of the pty's size.
    pub(crate) fn screen(&self) -> String {
        self.screen_at(ROWS, COLS)
    }

    /// What the terminal shows now, rendered at `rows` × `cols` (a pty made by
    /// [`Terminal::spawn_sized`]).
    pub(crate) fn screen_at(&self, rows: u16, cols: u16) -> String {
        let mut parser = vt100::Parser::new(rows, cols, 0);
        parser.process(&self.output.lock().unwrap());
        parser.screen().contents()
    }

    /// The pid of the process on the terminal.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn type_bytes(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("write to the pty");
    }

    /// Whether the process on the terminal still runs.
    pub(crate) fn running(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.child.try_wait().unwrap();
        }
        self.status.is_none()
    }

    /// Stay attached for `quiet` with nothing on the screen changing, and require that the
    /// client is still there: a quiet session keeps its client.
    fn stays_attached(&mut self, quiet: Duration) {
        // Time is the thing tested: what must not happen is a socket read time-out in the
        // client (the control client paces its progress indicator with a 250 ms one and must
        // clear it before the attach stream), a kernel timer that fires whatever the load; no
        // event reports that it will not. The client is looked at all along the window.
        let left = common::poll(quiet, || !self.running());
        assert!(
            !left,
            "the client left on its own: {:?}\n{}",
            self.status,
            self.text()
        );
    }

    /// Wait (bounded) for the process to exit and return its status.
    pub(crate) fn wait(&mut self, env: &TestEnv) -> ExitStatus {
        if !common::poll(Duration::from_secs(20), || !self.running()) {
            panic!(
                "the attached CLI did not exit; it printed:\n{}\n{}",
                self.text(),
                env.diagnostics()
            );
        }
        // The reader has collected the last bytes (unless something the CLI started still
        // holds the terminal open: then what came so far).
        let eof = self.eof.clone();
        common::poll(Duration::from_secs(2), || eof.load(Ordering::SeqCst));
        self.status.unwrap()
    }

    /// Wait until the terminal shows `needle` (or the raw output has it).
    pub(crate) fn wait_for(&mut self, env: &TestEnv, needle: &str) {
        let start = Instant::now();
        let mut gone = false;
        let shown = common::poll(Duration::from_secs(20), || {
            if self.screen().contains(needle) || self.text().contains(needle) {
                return true;
            }
            gone = !self.running() && start.elapsed() > Duration::from_secs(1);
            gone
        });
        if gone || !shown {
            panic!(
                "the terminal never showed {needle:?} (exit {:?}); screen:\n{}\nraw:\n{:?}\n{}",
                self.status,
                self.screen(),
                self.text(),
                env.diagnostics()
            );
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn alice_and_bob() -> TestEnv {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    env
}

/// Wake bob with a message (no reply: the body starts with `echo:`), leaving a transcript.
fn wake_bob(env: &TestEnv) {
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: wake up",
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
}

/// Whether `list --json` shows bob's echo runtime as attached.
fn bob_attached(env: &TestEnv) -> bool {
    env.list()
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["personality"] == "bob")
        .flat_map(|r| r["runtimes"].as_array().unwrap().clone())
        .any(|r| r["runtime"] == "echo" && r["attached"] == true)
}

/// The window size (rows, cols) of the terminal on a process's stdin, read through /proc.
fn pty_size_of(pid: u32) -> Option<(u16, u16)> {
    let tty = File::open(format!("/proc/{pid}/fd/0")).ok()?;
    let mut ws = nix::pty::Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one Winsize into the pointed struct.
    let rc = unsafe {
        nix::libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&tty),
            nix::libc::TIOCGWINSZ as _,
            &mut ws,
        )
    };
    (rc == 0).then_some((ws.ws_row, ws.ws_col))
}

fn bob_wakes(env: &TestEnv) -> Vec<std::collections::HashMap<String, String>> {
    env.events("lifecycle", "wake")
        .into_iter()
        .filter(|e| e["identity"] == "echo-bob")
        .collect()
}

#[test]
fn attach_shows_the_screen_forwards_keys_and_detaches() {
    let env = alice_and_bob();
    wake_bob(&env);
    let bob_pid: u32 = bob_wakes(&env)[0]["pid"].parse().unwrap();
    assert_eq!(
        pty_size_of(bob_pid),
        Some((50, 220)),
        "sessions start at 220×50"
    );
    let mut term = Terminal::spawn(env.cmd(&["attach", "bob"]));
    // The snapshot: bob's banner, the envelope it received and its prompt.
    term.wait_for(&env, "iapeer echo agent — demo stand-in runtime (echo-bob)");
    let screen = term.screen();
    assert!(screen.contains("from alice: echo: wake up"), "{screen}");
    assert!(
        screen.lines().any(|l| l.starts_with("❯")),
        "the prompt is on screen:\n{screen}"
    );
    env.wait_until(
        "list shows bob attached",
        Duration::from_secs(10),
        bob_attached,
    );
    // bob's pty took the client's size (spec 04: once, after boot).
    env.wait_until(
        "bob's pty has the client's size",
        Duration::from_secs(10),
        |_| pty_size_of(bob_pid) == Some((ROWS, COLS)),
    );
    // Stay attached for a while with nothing on screen changing: the client must not give up.
    term.stays_attached(Duration::from_millis(1500));

    term.type_bytes(b"hello\r");
    env.wait_until("bob printed the typed line", Duration::from_secs(10), |e| {
        e.pane("echo-bob").contains("you: hello")
    });
    term.wait_for(&env, "you: hello");

    // Ctrl-] anywhere in a chunk detaches, and that chunk is not forwarded.
    term.type_bytes(b"xyz\x1d");
    let status = term.wait(&env);
    assert_eq!(status.code(), Some(0), "{}", term.text());
    assert!(term.text().contains(DETACHED), "{}", term.text());
    assert_eq!(
        env.status_of("bob", "echo"),
        "live",
        "detaching leaves the session running"
    );
    assert_eq!(
        pty_size_of(bob_pid),
        Some((ROWS, COLS)),
        "detaching never resizes back"
    );
    env.wait_until(
        "list no longer shows bob attached",
        Duration::from_secs(10),
        |e| !bob_attached(e),
    );
    // bob reads its input in order: once a later message is in, a forwarded "xyz" would be too.
    env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: after detach",
    ]);
    assert!(
        !env.pane("echo-bob").contains("xyz"),
        "the detaching chunk reached bob\n{}",
        env.diagnostics()
    );
    assert_eq!(
        bob_wakes(&env).len(),
        1,
        "attaching to a live session wakes nothing"
    );
}

/// Issue 12 item 3: the resize frame is a peer's choice; a 2000 × 2000 terminal is clamped to
/// what a terminal can be (500 × 1000) before the child's pty and the screen model take it.
#[test]
fn a_huge_attaching_terminal_is_clamped() {
    let env = alice_and_bob();
    wake_bob(&env);
    let bob_pid: u32 = bob_wakes(&env)[0]["pid"].parse().unwrap();
    let mut term = Terminal::spawn_sized(env.cmd(&["attach", "bob"]), 2000, 2000);
    env.wait_until(
        "list shows bob attached",
        Duration::from_secs(10),
        bob_attached,
    );
    env.wait_until(
        "bob's pty has the clamped size",
        Duration::from_secs(10),
        |_| pty_size_of(bob_pid) == Some((500, 1000)),
    );
    term.type_bytes(b"\x1d");
    assert_eq!(term.wait(&env).code(), Some(0), "{}", term.text());
    assert_eq!(env.status_of("bob", "echo"), "live");
    let daemon = env.daemon.as_ref().unwrap().id();
    let status = std::fs::read_to_string(format!("/proc/{daemon}/status")).unwrap();
    let kib = |field: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| {
                v.trim_start_matches(':')
                    .trim()
                    .trim_end_matches(" kB")
                    .parse()
                    .ok()
            })
            .unwrap()
    };
    eprintln!(
        "daemon after a 2000×2000 attach: peak {} KiB, resident {} KiB",
        kib("VmHWM"),
        kib("VmRSS")
    );
    assert!(kib("VmHWM") < 200 * 1024, "peak {} KiB", kib("VmHWM"));
}

/// Issue 12 item 5 (found by the `screen` fuzz target): the screen model panicked (inside
/// vt100) on the first wrapped line of a one-row terminal, and the attaching client chooses the
/// rows. The pty and the model get at least 2 × 2; the session goes on.
#[test]
fn a_one_row_attaching_terminal_does_not_break_the_session() {
    let env = alice_and_bob();
    wake_bob(&env);
    let bob_pid: u32 = bob_wakes(&env)[0]["pid"].parse().unwrap();
    let mut term = Terminal::spawn_sized(env.cmd(&["attach", "bob"]), 1, 10);
    env.wait_until(
        "bob's pty has the clamped size",
        Duration::from_secs(10),
        |_| pty_size_of(bob_pid) == Some((2, 10)),
    );
    // The echo agent prints `you: <line>`: far wider than 10 columns, so it wraps.
    term.type_bytes(b"abcdefghijklmnopqrstuvwxyz\r");
    env.wait_until("bob printed the typed line", Duration::from_secs(10), |e| {
        e.pane("echo-bob")
            .contains("you: abcdefghijklmnopqrstuvwxyz")
    });
    term.type_bytes(b"\x1d");
    assert_eq!(term.wait(&env).code(), Some(0), "{}", term.text());
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: still here",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to bob (echo)",
        "{}",
        env.diagnostics()
    );
    assert_eq!(bob_wakes(&env).len(), 1, "the session never died");
}

#[test]
fn attach_resumes_an_asleep_peer_with_a_transcript() {
    let env = alice_and_bob();
    wake_bob(&env);
    // Make bob asleep (stop ends the session, start clears the flag without waking).
    env.ok(&["stop", "bob"]);
    env.wait_until("bob's session ended", Duration::from_secs(10), |e| {
        e.log("exits").contains("identity=echo-bob")
    });
    env.ok(&["start", "bob"]);
    assert_eq!(env.status_of("bob", "echo"), "asleep");

    let mut term = Terminal::spawn(env.cmd(&["attach", "bob"]));
    term.wait_for(&env, "resumed conversation (1 earlier messages)");
    let wakes = bob_wakes(&env);
    assert_eq!(wakes.len(), 2);
    assert_eq!(
        (wakes[1]["mode"].as_str(), wakes[1]["cause"].as_str()),
        ("resume", "explicit-resume")
    );
    term.type_bytes(&[0x1d]);
    assert_eq!(term.wait(&env).code(), Some(0));
    assert!(term.text().contains(DETACHED));
    assert_eq!(env.status_of("bob", "echo"), "live");
}

#[test]
fn attach_says_how_to_detach_and_ctrl_bracket_cancels_the_wait_for_a_boot() {
    let env = alice_and_bob();
    wake_bob(&env);
    env.ok(&["stop", "bob"]);
    env.wait_until("bob's session ended", Duration::from_secs(10), |e| {
        e.log("exits").contains("identity=echo-bob")
    });
    env.ok(&["start", "bob"]);
    // Resumed, bob never draws its prompt: the attach waits for a boot that does not end.
    env.launch_env("bob", "echo", "PEER_START_ARGS=--no-prompt\n");
    let mut term = Terminal::spawn(env.cmd(&["attach", "bob"]));
    term.wait_for(
        &env,
        "attaching to bob — press Ctrl-] to detach (the session keeps running)",
    );
    env.wait_until("bob is booting again", Duration::from_secs(10), |e| {
        bob_wakes(e).len() == 2
    });
    let pid: u32 = bob_wakes(&env)[1]["pid"].parse().unwrap();
    let ended = |e: &TestEnv| {
        e.events("lifecycle", "session-end")
            .iter()
            .filter(|e| e["identity"] == "echo-bob")
            .count()
    };
    let ended_before = ended(&env);
    term.type_bytes(&[0x1d]);
    let t0 = Instant::now();
    let status = term.wait(&env);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "the cancel took {:?}",
        t0.elapsed()
    );
    assert_eq!(status.code(), Some(0), "{}", term.text());
    assert!(
        term.text().contains(
            "attach cancelled — bob goes on waking; attach later with: iapeer attach bob"
        ),
        "{}",
        term.text()
    );
    // The agent was left alone: still running, no session end, not stopped. The router has
    // handled the cancel and everything its sessions reported since (a wrong stop would be
    // its decision; a session ending on its own would have reported it).
    env.router_settled();
    assert!(alive(pid), "bob's process survived the cancel");
    assert_eq!(ended(&env), ended_before, "{}", env.diagnostics());
    assert_ne!(env.status_of("bob", "echo"), "stopped");
}

#[test]
fn keys_typed_while_the_peer_boots_reach_the_session_once_attached() {
    let env = alice_and_bob();
    wake_bob(&env);
    env.ok(&["stop", "bob"]);
    env.wait_until("bob's session ended", Duration::from_secs(10), |e| {
        e.log("exits").contains("identity=echo-bob")
    });
    env.ok(&["start", "bob"]);
    // Resumed, bob takes 2 s before it draws anything.
    env.launch_env("bob", "echo", "PEER_START_ARGS=--boot-delay-ms 2000\n");
    let mut term = Terminal::spawn(env.cmd(&["attach", "bob"]));
    term.wait_for(&env, "press Ctrl-] to detach");
    term.type_bytes(b"typed ahead\r");
    term.wait_for(&env, "you: typed ahead");
    assert_eq!(bob_wakes(&env).len(), 2, "the keys did not cancel the wake");
    term.type_bytes(&[0x1d]);
    assert_eq!(term.wait(&env).code(), Some(0), "{}", term.text());
}

#[test]
fn attach_to_a_peer_that_never_ran_fails_loudly() {
    let env = alice_and_bob();
    let mut term = Terminal::spawn(env.cmd(&["attach", "bob"]));
    let status = term.wait(&env);
    assert_eq!(status.code(), Some(1), "{}", term.text());
    assert!(
        term.text().contains("no transcript to resume"),
        "{}",
        term.text()
    );
    assert!(bob_wakes(&env).is_empty(), "nothing was launched");
    assert_eq!(env.status_of("bob", "echo"), "asleep");
}

#[test]
fn the_client_reports_when_the_session_ends_under_it() {
    let env = alice_and_bob();
    wake_bob(&env);
    let mut term = Terminal::spawn(env.cmd(&["attach", "bob"]));
    term.wait_for(&env, "demo stand-in runtime (echo-bob)");
    // A quiet session keeps its client: it leaves only when the session ends.
    term.stays_attached(Duration::from_millis(1000));
    env.ok(&["stop", "bob"]);
    let status = term.wait(&env);
    assert_eq!(status.code(), Some(0), "{}", term.text());
    assert!(term.text().contains("session ended"), "{}", term.text());
    assert!(!term.text().contains(DETACHED), "{}", term.text());
    assert_eq!(env.status_of("bob", "echo"), "stopped");
}

#[test]
fn attach_to_a_router_runtime_is_refused() {
    let mut env = TestEnv::new();
    let manifest = env.root.join("runtimes/bot/runtime.json");
    std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    std::fs::write(&manifest, r#"{"runtime":"bot","run":{"command":"cat"}}"#).unwrap();
    env.ok(&["create", "console", "--runtime", "bot"]);
    env.start_daemon();
    env.wait_until("the always-on peer runs", Duration::from_secs(10), |e| {
        e.status_of("console", "bot") == "live"
    });
    let mut term = Terminal::spawn(env.cmd(&["attach", "console"]));
    let status = term.wait(&env);
    assert_eq!(status.code(), Some(1), "{}", term.text());
    assert!(
        term.text().contains("attach needs an agent runtime"),
        "{}",
        term.text()
    );
    // Refused before the terminal is taken over: no detach hint first.
    assert!(!term.text().contains("Ctrl-]"), "{}", term.text());
    // So are a name that is not registered and a runtime the peer does not declare.
    for (args, says) in [
        (vec!["attach", "consol"], "did you mean \"console\""),
        (
            vec!["attach", "console", "echo"],
            "does not declare runtime \"echo\"",
        ),
    ] {
        let mut term = Terminal::spawn(env.cmd(&args));
        assert_eq!(term.wait(&env).code(), Some(1), "{}", term.text());
        assert!(term.text().contains(says), "{}", term.text());
        assert!(!term.text().contains("Ctrl-]"), "{}", term.text());
    }
    assert_eq!(
        env.status_of("console", "bot"),
        "live",
        "the refusal leaves it running"
    );
    // And a stopped agent: start it first (it used to print the detach hint, then refuse).
    env.create_echo("sleepy");
    env.ok(&["stop", "sleepy"]);
    let mut term = Terminal::spawn(env.cmd(&["attach", "sleepy"]));
    assert_eq!(term.wait(&env).code(), Some(1), "{}", term.text());
    assert!(
        term.text()
            .contains("is stopped — iapeer start sleepy first"),
        "{}",
        term.text()
    );
    assert!(!term.text().contains("Ctrl-]"), "{}", term.text());
}

#[test]
fn bare_runtime_verb_starts_fresh_and_attaches_on_a_terminal_or_reports() {
    let env = alice_and_bob();
    let folder = env.peer_dir("bob");
    let mut cmd = env.cmd(&["echo"]);
    cmd.current_dir(&folder);
    let mut term = Terminal::spawn(cmd);
    term.wait_for(&env, "demo stand-in runtime (echo-bob)");
    let wakes = bob_wakes(&env);
    assert_eq!(wakes.len(), 1, "{}", env.diagnostics());
    assert_eq!(
        (wakes[0]["mode"].as_str(), wakes[0]["cause"].as_str()),
        ("fresh", "explicit-fresh")
    );
    env.wait_until(
        "list shows bob attached",
        Duration::from_secs(10),
        bob_attached,
    );
    term.type_bytes(&[0x1d]);
    assert_eq!(term.wait(&env).code(), Some(0), "{}", term.text());
    assert!(term.text().contains(DETACHED));
    let first_pid: u32 = wakes[0]["pid"].parse().unwrap();
    assert!(alive(first_pid));

    // Not a terminal: a fresh session replaces the live one, and the CLI reports and exits.
    let out = env.cmd(&["echo"]).current_dir(&folder).output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        describe(&out),
        env.diagnostics()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let wakes = bob_wakes(&env);
    assert_eq!(wakes.len(), 2, "{}", env.diagnostics());
    assert_eq!(
        (wakes[1]["mode"].as_str(), wakes[1]["cause"].as_str()),
        ("fresh", "explicit-fresh")
    );
    assert_eq!(
        stdout.trim(),
        format!("started a fresh session echo-bob (pid {})", wakes[1]["pid"])
    );
    env.wait_until("the old session is gone", Duration::from_secs(10), |_| {
        !alive(first_pid)
    });
    assert_eq!(env.status_of("bob", "echo"), "live");
}

#[test]
fn an_attached_session_is_not_slept_until_the_human_detaches() {
    let mut env = TestEnv::new();
    env.set("IAPEER_IDLE_SECS", "2")
        .set("IAPEER_TICK_SECS", "1")
        .set("IAPEER_SUPERVISE_LOG_VERBOSE", "1");
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    wake_bob(&env);
    let mut term = Terminal::spawn(env.cmd(&["attach", "bob"]));
    term.wait_for(&env, "demo stand-in runtime (echo-bob)");
    env.wait_until(
        "list shows bob attached",
        Duration::from_secs(10),
        bob_attached,
    );
    // Idle 2 s with a 1 s tick: alone, bob would be asleep by the third tick. Watch five.
    let reaped = |e: &TestEnv| {
        e.events("lifecycle", "supervise")
            .iter()
            .any(|l| l.get("identity").map(String::as_str) == Some("echo-bob"))
    };
    env.watch_ticks(5, "bob slept while a human was attached", reaped);
    assert!(term.running());
    term.type_bytes(&[0x1d]);
    assert_eq!(term.wait(&env).code(), Some(0), "{}", term.text());
    env.wait_until("bob sleeps once alone", Duration::from_secs(20), reaped);
    env.wait_until("bob is asleep", Duration::from_secs(10), |e| {
        e.status_of("bob", "echo") == "asleep"
    });
}

#[test]
fn daemon_shutdown_ends_the_attached_client() {
    let mut env = alice_and_bob();
    wake_bob(&env);
    let mut term = Terminal::spawn(env.cmd(&["attach", "bob"]));
    term.wait_for(&env, "demo stand-in runtime (echo-bob)");
    let status = env.stop_daemon().expect("the daemon was running");
    assert!(status.success(), "{status:?}");
    assert_eq!(term.wait(&env).code(), Some(0), "{}", term.text());
    assert!(term.text().contains("session ended"), "{}", term.text());
    assert!(
        env.marker("echo-bob", ".idle-reaped").exists(),
        "resume-eligible after the shutdown"
    );
}

//! The daemon without a service manager (issue 8 item 2, spec 08 §1): `daemon --detach`
//! started from a shell on a real pty survives that terminal hanging up, refuses a second
//! instance, and `shutdown` returns once the daemon and its sessions are gone.

use crate::common;

use crate::attach::Terminal;
use common::{alive, TestEnv};
use std::process::Command;
use std::time::Duration;

/// SIGKILLs a detached daemon the test did not stop (a failed assertion must not leak it).
struct Reaper(Option<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            if alive(pid) {
                common::signal(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

/// The pid in `daemon running in the background (pid N)`.
fn detached_pid(text: &str) -> Option<u32> {
    let rest = text
        .split("daemon running in the background (pid ")
        .nth(1)?;
    rest.split(')').next()?.parse().ok()
}

#[test]
fn a_detached_daemon_survives_the_terminal_hanging_up_and_shutdown_ends_it() {
    let env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    // A shell on a pty, as a terminal window would run it; it stays after the command.
    let inner = env.cmd(&["daemon", "--detach"]);
    let mut sh = Command::new("sh");
    sh.args([
        "-c",
        &format!("\"{}\" daemon --detach; sleep 60", common::bin().display()),
    ]);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.current_dir(inner.get_current_dir().unwrap());
    let term = Terminal::spawn(sh);
    let mut reaper = Reaper(None);
    let mut printed = None;
    common::poll(Duration::from_secs(20), || {
        printed = detached_pid(&term.screen());
        printed.is_some()
    });
    let pid = printed.unwrap_or_else(|| {
        panic!(
            "never printed that it runs; screen:\n{}\n{}",
            term.screen(),
            env.diagnostics()
        )
    });
    reaper.0 = Some(pid);
    let screen = term.screen();
    assert!(
        screen.contains("/logs/iapeer/daemon.log") && screen.contains("iapeer shutdown"),
        "says where it logs and how to stop it:\n{screen}"
    );
    // It answers, and a session runs under it.
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: hi",
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
    let bob: u32 = env
        .events("lifecycle", "wake")
        .iter()
        .find(|e| e["identity"] == "echo-bob")
        .expect("bob's wake")["pid"]
        .parse()
        .unwrap();

    // The terminal hangs up: its session gets SIGHUP and the pty closes. Neither the daemon
    // nor bob's session is in the terminal's session or process group, so it reaches neither.
    let sh_pid = term.pid();
    assert!(
        common::out_of_reach(pid, sh_pid),
        "the daemon is the terminal's"
    );
    assert!(
        common::out_of_reach(bob, sh_pid),
        "bob's session is the terminal's"
    );
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(sh_pid as i32),
        nix::sys::signal::Signal::SIGHUP,
    );
    drop(term);
    assert!(alive(pid), "the daemon survived the hang-up");
    assert!(alive(bob), "and so did bob's session");
    assert!(env.ok(&["list"]).contains("bob"));

    // One daemon at a time.
    let (_, err) = env.fails(&["daemon", "--detach"], 1);
    assert!(
        err.contains(&format!("a daemon is already running (pid {pid}"))
            && err.contains("iapeer shutdown"),
        "{err}"
    );

    // shutdown answers once the daemon is gone, its sessions ended.
    let out = env.ok(&["shutdown"]);
    assert_eq!(
        out.trim(),
        format!("daemon stopped (pid {pid}); its sessions ended")
    );
    assert!(!alive(pid), "the daemon is gone when shutdown answers");
    assert!(!env.socket().exists(), "its socket was removed");
    env.wait_until("bob's session ended", Duration::from_secs(5), |_| {
        !alive(bob)
    });
    // Nothing left to stop.
    let out = env.ok(&["shutdown"]);
    assert!(out.starts_with("no daemon is running"), "{out}");
}

#[test]
fn foreground_and_detach_together_is_a_usage_error() {
    let env = TestEnv::new();
    let (_, err) = env.fails(&["daemon", "--foreground", "--detach"], 2);
    assert!(
        err.starts_with(
            "iapeer: --foreground and --detach cannot be used together — usage: iapeer daemon"
        ),
        "{err}"
    );
    assert!(!env.socket().exists());
}

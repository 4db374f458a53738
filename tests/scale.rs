//! What a live session costs the daemon in descriptors (issue 31 item 4: 1 000 live echo
//! sessions with at most 3 each): once quiet, an echo session holds its pty master, its poll
//! and its waker — no pidfd (one watcher wakes the session whose child ended), no
//! `cgroup.procs` (closed once the child is in its cgroup), no pane log (closed while the
//! session is quiet, opened again by its next output) — and it still delivers, logs its pane
//! and sees its child end. The real daemon, the real echo agent.

use crate::common;

use common::TestEnv;
use std::time::Duration;

/// What each open descriptor of `pid` points at (`/dev/ptmx`, `anon_inode:[pidfd]`, a path).
fn fds(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|t| t.to_string_lossy().into_owned())
        .collect()
}

fn count(fds: &[String], what: &str) -> usize {
    fds.iter().filter(|f| f.contains(what)).count()
}

#[test]
fn a_quiet_live_session_holds_three_descriptors_and_still_works() {
    let mut env = TestEnv::new();
    let names = ["a", "b", "c"];
    for n in names {
        env.create_echo(n);
    }
    env.start_daemon();
    let pid = env.daemon.as_ref().unwrap().id();
    let polls = |f: &[String]| count(f, "[eventpoll]") + count(f, "[eventfd]");
    let base = polls(&fds(pid));
    for n in names {
        let woke = env.control(&format!(r#"{{"op":"wake","personality":"{n}"}}"#));
        assert_eq!(woke["ok"], true, "{woke}");
    }
    // The pane logs close 10 s after the sessions' last output (QUIET_AFTER).
    env.wait_until(
        "the sessions' pane logs are closed",
        Duration::from_secs(60),
        |_| count(&fds(pid), "/lifecycle/echo-") == 0,
    );
    let open = fds(pid);
    assert_eq!(count(&open, "/dev/ptmx"), 3, "{open:#?}");
    assert_eq!(
        polls(&open) - base,
        2 * 3,
        "a poll and a waker each: {open:#?}"
    );
    assert_eq!(count(&open, "[pidfd]"), 0, "{open:#?}");
    assert_eq!(count(&open, "cgroup.procs"), 0, "{open:#?}");

    // Still delivered, and its pane log opened again for the output.
    let out = env.ok(&[
        "send",
        "a",
        "--from",
        "echo-b",
        "--message",
        "echo: after the quiet",
    ]);
    assert!(out.contains("delivered to a (echo)"), "{out}");
    env.wait_until(
        "the delivery in a's pane log",
        Duration::from_secs(30),
        |e| e.pane("echo-a").contains("after the quiet"),
    );

    // The child's end is still seen: its session ends, and its descriptors go with it.
    let listed = env.control(r#"{"op":"list"}"#);
    let child = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["identity"] == "echo-c")
        .and_then(|s| s["pid"].as_u64())
        .unwrap_or_else(|| panic!("no live echo-c: {listed}")) as u32;
    common::signal(child, nix::sys::signal::Signal::SIGKILL);
    env.wait_until("echo-c's session ends", Duration::from_secs(30), |e| {
        e.status_of("c", "echo") != "live"
    });
    env.wait_until("its pty master is closed", Duration::from_secs(30), |_| {
        count(&fds(pid), "/dev/ptmx") == 2
    });
}

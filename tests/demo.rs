//! `iapeer demo` runs the main job on the built-in echo runtime: it must finish in under 30 s,
//! exit 0, show the deliveries (one with a wake) and clean up its temporary root.

use crate::common;

use iapeer::paths::Paths;

use common::TestEnv;
use std::time::{Duration, Instant};

/// The demo removed its temporary root from `tmp`.
fn assert_nothing_left(tmp: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "the demo left {left:?} behind");
}

/// A fresh world, a `tmp` folder in it, and the command `iapeer <args>` (a demo) that makes
/// its temporary root under that folder.
fn demo_cmd(args: &[&str]) -> (std::process::Command, std::path::PathBuf, TestEnv) {
    let env = TestEnv::new();
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = env.cmd(args);
    cmd.env("TMPDIR", &tmp).env_remove("IAPEER_ROOT");
    (cmd, tmp, env)
}

/// A demo started by [`demo_cmd`] with no stdout and stderr (a vanished terminal's would
/// fail): the child and its `tmp` folder (with the world).
fn spawn_demo(args: &[&str]) -> (std::process::Child, std::path::PathBuf, TestEnv) {
    let (mut cmd, tmp, env) = demo_cmd(args);
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (child, tmp, env)
}

/// Hang up on a demo (SIGHUP): it must exit 130, as after Ctrl-C.
fn hang_up(mut child: std::process::Child) {
    common::signal(child.id(), nix::sys::signal::Signal::SIGHUP);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
}

/// Run `iapeer <args>` (a demo) with its temporary root under a `tmp` folder of a fresh
/// world; it must exit 0 within `within`. Its stdout and that folder (with the world).
fn run_demo(args: &[&str], within: Duration) -> (String, std::path::PathBuf, TestEnv) {
    let (mut cmd, tmp, env) = demo_cmd(args);
    let start = Instant::now();
    let out = cmd.output().unwrap();
    let took = start.elapsed();
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(took < within, "the demo took {took:?}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), tmp, env)
}

#[test]
fn demo_shows_deliveries_and_a_wake_then_cleans_up() {
    let (stdout, tmp, _env) = run_demo(&["demo"], Duration::from_secs(30));
    for want in [
        "delivered to alice (echo), woke",
        "delivered to bob (echo), woke",
        "delivered to alice (echo)\n",
        "✓ delivery: human-you → alice via echo-alice, woke",
        "✓ delivery: echo-alice → bob via echo-bob, woke",
        "✓ delivery: echo-bob → alice via echo-alice",
        "you got a message from alice (echo): echo: Hello Alice, are you there?",
        "all stopped after",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert_nothing_left(&tmp);
}

#[test]
fn demo_keep_leaves_the_root_and_says_where() {
    let env = TestEnv::new();
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = env
        .cmd(&["demo", "--keep"])
        .env("TMPDIR", &tmp)
        .env_remove("IAPEER_ROOT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let kept: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(kept.len(), 1, "{stdout}");
    assert!(
        stdout.contains(&format!("the demo root is kept: {}", kept[0].display())),
        "{stdout}"
    );
    let kept = Paths::at(&kept[0]);
    assert!(kept.registry().is_file());
    assert!(kept.delivery_log().is_file());
    // The daemon is stopped: its socket is gone.
    assert!(!kept.socket().exists());
}

/// The pids of `pid`'s children (of all its threads).
fn children(pid: u32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// A closed terminal (SIGHUP) ends the demo as Ctrl-C does: its daemon is stopped and its
/// temporary root removed (found by a newcomer walkthrough: both were left behind). The
/// demo's stderr is closed here, as a vanished terminal's would fail.
#[test]
fn demo_hung_up_stops_its_daemon_and_removes_its_root() {
    let (child, tmp, _env) = spawn_demo(&["demo"]);
    // Wait until the demo's daemon runs: its discovery file is there, and it is a child of
    // the demo (the demo takes about half a second after that on an idle machine).
    // Polled tightly: the demo moves on about half a second after its daemon is up.
    let mut daemon_pid = None;
    let up = common::poll_every(Duration::from_millis(1), Duration::from_secs(20), || {
        let up = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .any(|e| Paths::at(e.path()).router_json().is_file());
        daemon_pid = children(child.id()).first().copied().filter(|_| up);
        daemon_pid.is_some()
    });
    assert!(up, "the demo's daemon did not come up");
    let daemon_pid = daemon_pid.unwrap();
    hang_up(child);
    let pid = nix::unistd::Pid::from_raw(daemon_pid);
    assert!(
        nix::sys::signal::kill(pid, None).is_err(),
        "the demo's daemon {daemon_pid} still runs"
    );
    assert_nothing_left(&tmp);
}

/// The command lines of the processes whose environment names `dir` (a demo run with
/// `TMPDIR=<dir>` and every process it started: its daemons, their sessions, its
/// redis-server, which inherit it).
fn processes_naming(dir: &std::path::Path) -> Vec<String> {
    let want = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| String::from_utf8_lossy(&env).contains(&want))
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .collect()
}

/// Issue 28 item 9: `demo --federation` runs two hosts on this machine through a private
/// redis-server and shows messages crossing both ways, each delivery on the host that logged
/// it; the URL's password is never shown; afterwards no daemon, no redis-server and no root
/// are left.
#[test]
fn demo_federation_crosses_two_hosts_both_ways_then_cleans_up() {
    let (stdout, tmp, _env) = run_demo(&["demo", "--federation"], Duration::from_secs(60));
    for want in [
        "redis-server up on 127.0.0.1:",
        "[host a] $ iapeer federation join 'redis://:****@127.0.0.1:",
        "bob@b  b (online)  available",
        "[host b] ✓ delivery: human-you@a → bob via echo-bob, woke",
        "[host a] ✓ delivery: human-you → bob@b via another host, woke",
        "[host a] ✉ you got a message from bob@b (echo): echo: Hello Bob, this is host a.",
        "[host a] ✓ delivery: echo-bob@b → alice via echo-alice, woke",
        "[host b] ✓ delivery: echo-alice@a → bob via echo-bob",
        "all stopped after",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    // The password is random hex: no 32-hex-digit run is printed after "redis://:".
    assert!(
        !stdout.contains("redis://:")
            || !stdout
                .split("redis://:")
                .skip(1)
                .any(|s| { s.chars().take(32).all(|c| c.is_ascii_hexdigit()) }),
        "{stdout}"
    );
    assert_nothing_left(&tmp);
    // Its redis-server listens no more (its environment is overwritten by its process title,
    // so it is found by its port).
    let port: u16 = stdout
        .split("redis-server up on 127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .expect("the port the demo's redis-server took");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(
        processes_naming(&tmp).is_empty(),
        "{:?}",
        processes_naming(&tmp)
    );
}

/// `demo --federation` hung up (SIGHUP) mid-way: both daemons and its redis-server are
/// ended and its temporary root removed, as for the plain demo.
#[test]
fn demo_federation_hung_up_ends_its_daemons_and_redis() {
    let (child, tmp, _env) = spawn_demo(&["demo", "--federation"]);
    // Its redis-server and both daemons run: its three long-lived children (told by their
    // command lines: the CLI commands the demo runs meanwhile are children too, for a moment).
    let mut started = Vec::new();
    let up = common::poll_every(Duration::from_millis(5), Duration::from_secs(30), || {
        started = children(child.id())
            .into_iter()
            .filter(|p| {
                let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                words.get(1) == Some(&&b"daemon"[..])
                    || cmdline.windows(12).any(|w| w == b"redis-server")
            })
            .collect();
        started.len() == 3
    });
    assert!(
        up,
        "the demo's three processes did not come up: {started:?}"
    );
    hang_up(child);
    for pid in started {
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        assert!(!alive, "the demo's child {pid} still runs");
    }
    assert_nothing_left(&tmp);
}

//! The daemon's latency threads at `SCHED_FIFO` (issue 31 item 3, `daemon::realtime`): the
//! router, the HTTP acceptor and the send-prep workers run real-time when the daemon may (here:
//! the test runs as root); the session threads, the agents and the agents' threads never do;
//! with `IAPEER_REALTIME=0` none does. `doctor` says which. The real daemon, the real echo
//! agent, the policies read from /proc.

use crate::common;

use common::TestEnv;

/// `SCHED_FIFO` in /proc/<pid>/task/<tid>/stat's policy field.
const FIFO: u32 = 1;
/// `SCHED_OTHER`.
const OTHER: u32 = 0;

/// (name, policy) of every thread of `pid`, from /proc/<pid>/task/*/stat (the name in
/// parentheses, field 2, may hold spaces; the policy is field 41).
fn policies(pid: u32) -> Vec<(String, u32)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .map(|stat| {
            let (open, close) = (stat.find('(').unwrap(), stat.rfind(')').unwrap());
            let after: Vec<&str> = stat[close + 2..].split(' ').collect();
            (
                stat[open + 1..close].to_string(),
                after[38].parse().unwrap(),
            )
        })
        .collect()
}

/// The policy of `pid`'s thread named `name` (the first of that name), if it has one.
fn policy_of(pid: u32, name: &str) -> Option<u32> {
    policies(pid)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, p)| p)
}

/// Whether the daemon this test starts may set `SCHED_FIFO`: the test runs as root (a user
/// with `CAP_SYS_NICE` or `RLIMIT_RTPRIO` may too; not looked for here).
fn privileged() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A world with echo peers a and b, its daemon started by `daemon` (env set on it), a awake,
/// and one send from b to a delivered (a send-prep worker has run).
fn awake_world(realtime: Option<&str>) -> (TestEnv, u32, u32) {
    let mut env = TestEnv::new();
    env.create_echo("a");
    env.create_echo("b");
    let mut daemon = env.cmd(&["daemon"]);
    if let Some(v) = realtime {
        daemon.env("IAPEER_REALTIME", v);
    }
    env.start_daemon_by(daemon);
    let pid = env.daemon.as_ref().unwrap().id();
    let woke = env.control(r#"{"op":"wake","personality":"a"}"#);
    assert_eq!(woke["ok"], true, "{woke}");
    let out = env.ok(&["send", "a", "--from", "echo-b", "--message", "echo: rt"]);
    assert!(out.contains("delivered to a (echo)"), "{out}");
    let agent = env.session_pid("echo-a");
    (env, pid, agent)
}

#[test]
fn the_latency_threads_run_real_time_and_sessions_and_agents_do_not() {
    if !privileged() {
        eprintln!("skipped: the test needs root to see real-time threads");
        return;
    }
    let (env, pid, agent) = awake_world(None);
    let threads = policies(pid);
    assert_eq!(policy_of(pid, "router"), Some(FIFO), "{threads:?}");
    assert_eq!(policy_of(pid, "http-accept"), Some(FIFO), "{threads:?}");
    assert_eq!(policy_of(pid, "http-streams"), Some(FIFO), "{threads:?}");
    // The send above started a send-prep worker; it leaves 2 s after its last job.
    let prep: Vec<_> = threads
        .iter()
        .filter(|(n, _)| n.starts_with("send-prep"))
        .collect();
    assert!(
        !prep.is_empty() && prep.iter().all(|(_, p)| *p == FIFO),
        "{threads:?}"
    );
    // Everything else at the normal policy: the session thread (started by a launcher the
    // router started), the main thread, the ticker, the watchdog itself.
    assert_eq!(policy_of(pid, "session-echo-a"), Some(OTHER), "{threads:?}");
    for (name, p) in &threads {
        if !["router", "http-accept", "http-streams"].contains(&name.as_str())
            && !name.starts_with("send-prep")
        {
            assert_eq!(*p, OTHER, "{name}: {threads:?}");
        }
    }
    // The agent was forked by a thread the router started: it and its threads are normal.
    let agents = policies(agent);
    assert!(agents.iter().all(|(_, p)| *p == OTHER), "{agents:?}");

    let doctor = String::from_utf8_lossy(&env.run(&["doctor"]).stdout).into_owned();
    assert!(
        doctor.contains(
            "realtime: the router, http-accept, http-streams and send-prep threads run \
             SCHED_FIFO 1 (allowed: "
        ),
        "{doctor}"
    );
}

#[test]
fn with_iapeer_realtime_0_no_thread_runs_real_time() {
    let (env, pid, agent) = awake_world(Some("0"));
    let threads = policies(pid);
    assert!(policy_of(pid, "router").is_some(), "{threads:?}");
    assert!(threads.iter().all(|(_, p)| *p == OTHER), "{threads:?}");
    let agents = policies(agent);
    assert!(agents.iter().all(|(_, p)| *p == OTHER), "{agents:?}");
    let doctor = String::from_utf8_lossy(&env.run(&["doctor"]).stdout).into_owned();
    assert!(
        doctor.contains("realtime: off (IAPEER_REALTIME=0)"),
        "{doctor}"
    );
}

/// A real-time thread that loops must not hold a core: the watchdog (`realtime::watchdog`)
/// puts it back to the normal policy, says so in `daemon.log` and in `doctor`, and the
/// daemon goes on serving. The router is made to spin by the `router-spin-on-send` hook
/// (2.5 s on the CPU when a send to `spin` arrives); the watchdog looks every second.
#[test]
fn a_real_time_thread_that_loops_is_put_back_to_the_normal_policy() {
    if !privileged() {
        eprintln!("skipped: the test needs root to see real-time threads");
        return;
    }
    let mut env = TestEnv::new();
    env.create_echo("spin");
    env.create_echo("b");
    let mut daemon = env.cmd(&["daemon"]);
    daemon.env("IAPEER_TEST_HOOK", "router-spin-on-send:spin");
    env.start_daemon_by(daemon);
    let pid = env.daemon.as_ref().unwrap().id();
    assert_eq!(policy_of(pid, "router"), Some(FIFO), "{:?}", policies(pid));

    // The send waits while the router spins, then is delivered as ever.
    let out = env.ok(&[
        "send",
        "spin",
        "--from",
        "echo-b",
        "--message",
        "echo: loop",
    ]);
    assert!(out.contains("delivered to spin (echo)"), "{out}");

    env.wait_until(
        "the watchdog's warning in daemon.log",
        std::time::Duration::from_secs(10),
        |e| e.log("daemon").contains("realtime: the router thread"),
    );
    let log = env.log("daemon");
    assert!(
        log.contains("back to the normal policy for the rest of its life"),
        "{log}"
    );
    let threads = policies(pid);
    assert_eq!(policy_of(pid, "router"), Some(OTHER), "{threads:?}");
    // Only the thread that looped was demoted.
    assert_eq!(policy_of(pid, "http-accept"), Some(FIFO), "{threads:?}");
    let doctor = String::from_utf8_lossy(&env.run(&["doctor"]).stdout).into_owned();
    assert!(
        doctor.contains("put back to the normal policy for using over half a core: router"),
        "{doctor}"
    );
    // The demoted router still routes: a second send to another peer is delivered.
    let out = env.ok(&[
        "send",
        "b",
        "--from",
        "echo-spin",
        "--message",
        "echo: after",
    ]);
    assert!(out.contains("delivered to b (echo)"), "{out}");
}

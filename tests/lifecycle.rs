//! Lifecycle through the real daemon with echo peers in real ptys (spec 05 §1–§5, §9; spec 02
//! §1 start-up and shutdown; spec 04 §1 "Death"): daemon restart leaves peers resume-eligible,
//! the crash-loop guard, the boot deadline, idle sleep and topic resume, one wake at a time,
//! single instance, and the operator's stop/start.

use crate::common;

use common::{alive, describe, TestEnv};
use std::collections::HashMap;
use std::process::Output;
use std::time::{Duration, Instant};

type Line = HashMap<String, String>;

/// alice (the sender) and bob (the target), both echo peers, plus a running daemon with the
/// extra daemon environment `vars`.
fn alice_and_bob(vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    env
}

/// `iapeer send bob --from echo-alice` with `message` and an optional topic. A body starting
/// with `echo:` is never answered by the echo agent, so alice stays asleep.
fn send(env: &TestEnv, message: &str, topic: Option<&str>) -> Output {
    let mut args = vec![
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        message,
        "--json",
    ];
    if let Some(t) = topic {
        args.extend(["--topic", t]);
    }
    env.run(&args)
}

/// Like [`send`] but it must succeed; returns whether the send woke bob.
fn send_ok(env: &TestEnv, message: &str, topic: Option<&str>) -> bool {
    let out = send(env, message, topic);
    assert!(
        out.status.success(),
        "send failed: {}\n{}",
        describe(&out),
        env.diagnostics()
    );
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("send --json prints JSON");
    assert_eq!(v["ok"], true, "{v}");
    v["woke"] == true
}

/// Lines of `log` with `ev` about `identity`.
fn events_of(env: &TestEnv, log: &str, ev: &str, identity: &str) -> Vec<Line> {
    env.events(log, ev)
        .into_iter()
        .filter(|e| e.get("identity").map(String::as_str) == Some(identity))
        .collect()
}

/// The `ev=wake` lines of echo-bob.
fn bob_wakes(env: &TestEnv) -> Vec<Line> {
    events_of(env, "lifecycle", "wake", "echo-bob")
}

/// The pid of bob's newest session, from its `ev=wake` line.
fn bob_pid(env: &TestEnv) -> u32 {
    bob_wakes(env).last().expect("a wake line")["pid"]
        .parse()
        .expect("numeric pid")
}

/// Assert the newest wake of bob was `mode`/`cause`.
fn assert_last_wake(env: &TestEnv, mode: &str, cause: &str) {
    let wakes = bob_wakes(env);
    let last = wakes
        .last()
        .unwrap_or_else(|| panic!("no wake of echo-bob\n{}", env.diagnostics()));
    assert_eq!(
        (last["mode"].as_str(), last["cause"].as_str()),
        (mode, cause),
        "{}",
        env.diagnostics()
    );
}

/// bob's `session-exit` lines in exits.log.
fn bob_exits(env: &TestEnv) -> Vec<Line> {
    events_of(env, "exits", "session-exit", "echo-bob")
}

fn wait_asleep(env: &TestEnv, what: &str) {
    env.wait_until(what, Duration::from_secs(20), |e| {
        e.status_of("bob", "echo") == "asleep"
    });
}

/// Wake bob on topic t1, then stop the daemon with SIGTERM and check the shutdown.
fn wake_then_restart_daemon(env: &mut TestEnv) {
    assert!(
        send_ok(env, "echo: first", Some("t1")),
        "the first send wakes bob"
    );
    let pid = bob_pid(env);
    assert!(alive(pid));
    let status = env.stop_daemon().expect("a daemon was running");
    assert!(
        status.success(),
        "daemon exit status {status:?}\n{}",
        env.diagnostics()
    );
    assert!(!env.socket().exists(), "router.sock removed");
    assert!(!env.router_json().exists(), "router.json removed");
    assert!(!alive(pid), "bob's process {pid} is gone after shutdown");
    assert!(
        env.marker("echo-bob", ".idle-reaped").exists(),
        "bob is resume-eligible\n{}",
        env.diagnostics()
    );
    let exits = bob_exits(env);
    assert_eq!(exits.len(), 1, "{}", env.diagnostics());
    assert_eq!(exits[0]["cause"], "shutdown");
    assert!(
        !exits[0].contains_key("tail"),
        "an expected death logs no screen tail"
    );
    env.start_daemon();
    assert_eq!(env.status_of("bob", "echo"), "asleep");
}

#[test]
fn daemon_restart_then_same_topic_resumes() {
    let mut env = alice_and_bob(&[]);
    wake_then_restart_daemon(&mut env);
    assert!(
        send_ok(&env, "echo: again", Some("t1")),
        "the send after the restart wakes bob"
    );
    assert_eq!(bob_wakes(&env).len(), 2);
    assert_last_wake(&env, "resume", "topic-match");
    assert!(
        env.pane("echo-bob").contains("resumed conversation"),
        "{}",
        env.diagnostics()
    );
    assert!(
        !env.marker("echo-bob", ".idle-reaped").exists(),
        "the marker is consumed by the wake"
    );
}

#[test]
fn daemon_restart_then_new_topic_starts_fresh() {
    let mut env = alice_and_bob(&[]);
    wake_then_restart_daemon(&mut env);
    assert!(send_ok(&env, "echo: other work", Some("t2")));
    assert_last_wake(&env, "fresh", "new-topic");
    assert!(
        !env.pane("echo-bob").contains("resumed conversation"),
        "{}",
        env.diagnostics()
    );
    assert!(
        !env.marker("echo-bob", ".idle-reaped").exists(),
        "the marker is consumed by the wake"
    );
}

#[test]
fn crash_loop_guard_refuses_the_fourth_wake() {
    let env = alice_and_bob(&[]);
    env.launch_env("bob", "echo", "PEER_START_ARGS=--fail-boot\n");
    for n in 1..=3 {
        let (_, stderr) = env.fails(
            &[
                "send",
                "bob",
                "--from",
                "echo-alice",
                "--message",
                "echo: hi",
            ],
            1,
        );
        assert!(
            stderr.contains("peer \"bob\" offline and wake failed"),
            "send {n}: {stderr}"
        );
        // The death is recorded when the router handles the exit; its session-end line
        // comes after that.
        env.wait_until("the death is recorded", Duration::from_secs(10), |e| {
            events_of(e, "lifecycle", "session-end", "echo-bob").len() == n
        });
    }
    let (_, stderr) = env.fails(
        &[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            "echo: hi",
        ],
        1,
    );
    assert!(
        stderr.contains("crash-looping: 3 deaths in 300s — see exits.log; iapeer new bob to force"),
        "fourth send: {stderr}\n{}",
        env.diagnostics()
    );
    assert_eq!(bob_wakes(&env).len(), 3, "the fourth send launched nothing");
    let exits = bob_exits(&env);
    assert_eq!(exits.len(), 3, "{}", env.diagnostics());
    for e in &exits {
        assert_eq!(e["cause"], "child-exit", "{e:?}");
        assert_eq!(e["status"], "3", "--fail-boot exits 3: {e:?}");
        assert!(
            e["tail"].contains("failing at boot on purpose (--fail-boot)"),
            "tail has the agent's error: {e:?}"
        );
    }
    let failed: Vec<Line> = env
        .events("delivery", "delivery")
        .into_iter()
        .filter(|d| d["to"] == "bob" && d["ok"] == "false")
        .collect();
    assert_eq!(failed.len(), 4, "each failure has its delivery.log line");
    assert!(failed[3]["err"].contains("crash-looping"));
}

#[test]
fn boot_deadline_kills_a_tui_that_never_gets_ready() {
    let env = alice_and_bob(&[("IAPEER_BOOT_DEADLINE_SECS", "3")]);
    env.launch_env("bob", "echo", "PEER_START_ARGS=--no-prompt\n");
    let t0 = Instant::now();
    let out = send(&env, "echo: hi", None);
    let took = t0.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("offline and wake failed: never became ready within 3 s"),
        "{stderr}"
    );
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(30),
        "failed after {took:?}"
    );
    let pid = bob_pid(&env);
    // session-end is logged once the router has handled the exit (and recorded the death).
    env.wait_until("bob's boot-timeout exit", Duration::from_secs(10), |e| {
        !events_of(e, "lifecycle", "session-end", "echo-bob").is_empty()
    });
    let exit = &bob_exits(&env)[0];
    assert_eq!(exit["cause"], "boot-timeout", "{exit:?}");
    assert!(
        exit["tail"].contains("demo stand-in runtime"),
        "the screen tail: {exit:?}"
    );
    assert!(!alive(pid), "the process was killed");
    let deaths = std::fs::read_to_string(env.marker("echo-bob", ".deaths")).unwrap_or_default();
    let deaths: Vec<u64> = serde_json::from_str(&deaths).unwrap_or_default();
    assert_eq!(
        deaths.len(),
        1,
        "a boot timeout counts for the crash-loop guard"
    );
    let failed = events_of(&env, "lifecycle", "wake-failed", "echo-bob");
    assert_eq!(failed.len(), 1, "{}", env.diagnostics());
    assert!(
        failed[0]["reason"].starts_with("never became ready within 3 s"),
        "{:?}",
        failed[0]
    );
    assert!(
        failed[0]["screen"].contains("iapeer echo agent — demo stand-in runtime (echo-bob)"),
        "{:?}",
        failed[0]
    );
    assert_eq!(env.status_of("bob", "echo"), "asleep");
}

/// Wait for bob's next idle sleep (the `n`-th) and check its traces.
fn wait_idle_sleep(env: &TestEnv, n: usize) {
    env.wait_until("bob is reaped idle", Duration::from_secs(20), |e| {
        events_of(e, "lifecycle", "supervise", "echo-bob")
            .iter()
            .filter(|l| l["action"] == "reaped-idle")
            .count()
            == n
    });
    wait_asleep(env, "bob shows asleep after the idle sleep");
    assert!(
        env.marker("echo-bob", ".idle-reaped").exists(),
        "resume-eligible after an idle sleep"
    );
    let exits = bob_exits(env);
    assert_eq!(exits.len(), n, "{}", env.diagnostics());
    assert_eq!(exits[n - 1]["cause"], "idle-sleep");
}

#[test]
fn idle_sleep_then_topic_decides_resume_or_fresh() {
    let env = alice_and_bob(&[("IAPEER_IDLE_SECS", "2"), ("IAPEER_TICK_SECS", "1")]);
    assert!(send_ok(&env, "echo: one", Some("t1")));
    let woke = Instant::now();
    wait_idle_sleep(&env, 1);
    assert!(
        woke.elapsed() < Duration::from_secs(15),
        "slept within a few seconds: {:?}",
        woke.elapsed()
    );
    let reaped = events_of(&env, "lifecycle", "supervise", "echo-bob");
    let age: u64 = reaped[0]["age"].trim_end_matches('s').parse().unwrap();
    assert!(
        age >= 2,
        "reaped only once idle longer than IAPEER_IDLE_SECS: {:?}",
        reaped[0]
    );

    assert!(send_ok(&env, "echo: two", Some("t1")), "same topic wakes");
    assert_last_wake(&env, "resume", "topic-match");
    assert!(
        env.pane("echo-bob").contains("resumed conversation"),
        "{}",
        env.diagnostics()
    );
    wait_idle_sleep(&env, 2);

    assert!(
        send_ok(&env, "echo: three", Some("t9")),
        "a new topic wakes"
    );
    assert_last_wake(&env, "fresh", "new-topic");
    wait_idle_sleep(&env, 3);

    assert!(send_ok(&env, "echo: four", None), "no topic wakes");
    assert_last_wake(&env, "fresh", "no-topic");
}

#[test]
fn a_busy_session_is_not_reaped_until_its_reply_is_done() {
    let env = alice_and_bob(&[
        ("IAPEER_IDLE_SECS", "2"),
        ("IAPEER_TICK_SECS", "1"),
        ("IAPEER_SUPERVISE_LOG_VERBOSE", "1"),
    ]);
    // alice is stopped: bob's delayed echo is refused at once when it is finally sent.
    env.ok(&["stop", "alice"]);
    env.launch_env("bob", "echo", "PEER_START_ARGS=--reply-delay-ms 7000\n");
    assert!(send_ok(&env, "please answer", Some("t1")));
    let delivered = Instant::now();
    assert!(
        env.pane("echo-bob").contains("esc to interrupt"),
        "bob shows it is mid-reply\n{}",
        env.diagnostics()
    );
    // Idle 2 s and a 1 s tick: an idle session would be gone by the third tick. Watch four
    // ticks (each probes bob and judges it idle or busy), well inside the 7 s reply.
    env.watch_ticks(4, "bob reaped while busy", |e| {
        !events_of(e, "lifecycle", "supervise", "echo-bob").is_empty()
    });
    assert_eq!(env.status_of("bob", "echo"), "live");
    let pane = env.pane("echo-bob");
    assert!(
        !pane.contains("reply failed") && !pane.contains("replied to"),
        "the reply is still pending after four ticks"
    );
    // Once the reply is done (refused: alice is stopped) bob is idle and sleeps.
    wait_idle_sleep(&env, 1);
    assert!(
        env.pane("echo-bob").contains("reply failed"),
        "{}",
        env.diagnostics()
    );
    assert!(
        delivered.elapsed() >= Duration::from_secs(7),
        "not reaped before the reply ended"
    );
}

#[test]
fn concurrent_sends_to_an_asleep_peer_wake_it_once() {
    let env = alice_and_bob(&[]);
    let spawn = |msg: &str| {
        env.spawn(&[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            msg,
            "--json",
        ])
    };
    let (a, b) = (spawn("echo: from a"), spawn("echo: from b"));
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let mut woke = 0;
    for out in &outs {
        assert!(
            out.status.success(),
            "{}\n{}",
            describe(out),
            env.diagnostics()
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ok"], true);
        if v["woke"] == true {
            woke += 1;
        }
    }
    assert_eq!(woke, 1, "exactly one send woke bob");
    assert_eq!(bob_wakes(&env).len(), 1, "{}", env.diagnostics());
    // The wake's first message passed its ready gate, after its sender was answered.
    env.wait_until("the ready gate's line", Duration::from_secs(30), |e| {
        e.has_event("lifecycle", "ready-gate", &[("ok", "true")])
    });
    let gates = events_of(&env, "lifecycle", "ready-gate", "echo-bob");
    assert_eq!(gates.len(), 1, "one gate, the wake's: {gates:?}");
    let pane = env.pane("echo-bob");
    assert!(
        pane.contains("from alice: echo: from a") && pane.contains("from alice: echo: from b"),
        "{pane}"
    );
}

/// Spawn a second `iapeer daemon` on the same root and wait (bounded) for it to exit.
fn second_daemon(env: &TestEnv) -> Output {
    let mut child = env.spawn(&["daemon"]);
    if common::exit_within(&mut child, Duration::from_secs(15)).is_none() {
        let _ = child.kill();
        panic!("the second daemon did not exit\n{}", env.diagnostics());
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_second_daemon_on_the_same_root_is_refused() {
    let env = alice_and_bob(&[]);
    let first = env.daemon.as_ref().unwrap().id();
    let out = second_daemon(&env);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let want = format!(
        "a daemon already runs on the root {} (it holds {})",
        env.root.display(),
        env.root.join("state/iapeer/daemon.lock").display()
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&want),
        "{}",
        describe(&out)
    );
    // The first one is untouched and keeps working.
    assert!(alive(first));
    assert!(env.socket().exists() && env.router_json().exists());
    assert!(send_ok(&env, "echo: still here", None));
    assert_eq!(env.status_of("bob", "echo"), "live");
}

#[test]
fn a_stale_socket_file_is_removed_at_start() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    let sock = env.socket();
    std::fs::create_dir_all(sock.parent().unwrap()).unwrap();
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists(), "a socket file with nobody listening");
    env.start_daemon();
    assert!(send_ok(&env, "echo: hello", None));
}

#[test]
fn stop_and_start_one_peer_and_all() {
    let env = alice_and_bob(&[]);
    assert!(send_ok(&env, "echo: hi", None));
    let pid = bob_pid(&env);
    let out = env.ok(&["stop", "bob"]);
    assert_eq!(out.trim(), "stopped echo-bob (ended echo-bob)");
    env.wait_until("bob's stop exit", Duration::from_secs(10), |e| {
        !bob_exits(e).is_empty()
    });
    assert_eq!(bob_exits(&env)[0]["cause"], "stop");
    env.wait_until("bob's process is gone", Duration::from_secs(10), |_| {
        !alive(pid)
    });
    assert_eq!(env.status_of("bob", "echo"), "stopped");
    assert!(
        env.ok(&["list"])
            .lines()
            .any(|l| l.starts_with("bob") && l.contains("✕echo")),
        "{}",
        env.ok(&["list"])
    );
    // Idempotent.
    assert_eq!(env.ok(&["stop", "bob"]).trim(), "stopped echo-bob");
    // Messages are refused and nothing is woken.
    let (_, stderr) = env.fails(
        &[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            "echo: x",
        ],
        1,
    );
    assert!(
        stderr.contains("is stopped and not accepting messages"),
        "{stderr}"
    );
    assert_eq!(bob_wakes(&env).len(), 1);

    // start clears the flag but does not start the agent.
    let out = env.ok(&["start", "bob"]);
    assert!(out.starts_with("started echo-bob"), "{out}");
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    assert_eq!(bob_wakes(&env).len(), 1, "start wakes nothing");
    assert!(!env.marker("echo-bob", ".stopped").exists());
    // The lifecycle log has one `start` line: a start of a peer that is not stopped changes
    // nothing and logs nothing.
    env.ok(&["start", "bob"]);
    let starts = |e: &TestEnv| {
        e.events("lifecycle", "start")
            .iter()
            .filter(|l| l["identity"] == "echo-bob")
            .count()
    };
    assert_eq!(starts(&env), 1, "{}", env.log("lifecycle"));

    // --all: a live bob and an asleep alice.
    assert!(send_ok(&env, "echo: again", None));
    let out = env.ok(&["stop", "--all"]);
    assert!(
        out.contains("echo-alice") && out.contains("echo-bob") && out.contains("(ended echo-bob)"),
        "{out}"
    );
    assert_eq!(env.status_of("alice", "echo"), "stopped");
    env.wait_until("bob stopped", Duration::from_secs(10), |e| {
        e.status_of("bob", "echo") == "stopped"
    });
    env.ok(&["start", "--all"]);
    assert_eq!(env.status_of("alice", "echo"), "asleep");
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    assert_eq!(bob_wakes(&env).len(), 2);
}

#[test]
fn stop_during_a_wake_fails_the_waiting_send_promptly() {
    // The default boot deadline (240 s) would keep the sender waiting; stop must not.
    let env = alice_and_bob(&[]);
    env.launch_env("bob", "echo", "PEER_START_ARGS=--no-prompt\n");
    let sender = env.spawn(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: hi",
    ]);
    env.wait_until("bob is booting", Duration::from_secs(10), |e| {
        !bob_wakes(e).is_empty()
    });
    let pid = bob_pid(&env);
    env.ok(&["stop", "bob"]);
    let t0 = Instant::now();
    let out = sender.wait_with_output().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "the send waited {:?} after the stop",
        t0.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    // The sender learns that the peer was stopped, not how the ended process exited.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"bob\" (echo) is stopped and not accepting messages"),
        "{}",
        describe(&out)
    );
    env.wait_until("bob's stop exit", Duration::from_secs(10), |e| {
        !bob_exits(e).is_empty()
    });
    assert_eq!(bob_exits(&env)[0]["cause"], "stop");
    assert!(!alive(pid));
    assert_eq!(env.status_of("bob", "echo"), "stopped");
    assert!(
        !env.marker("echo-bob", ".deaths").exists(),
        "an operator stop is not a crash"
    );
}

/// Spec 12 §5: after kill -9 of the daemon, a new one starts and the sessions are resumable.
/// The killed daemon could not mark its live agents resume-eligible as a shutdown does; the
/// next one does it from the `.session` markers that only an end it never saw leaves behind
/// (`ev=recovered`), so a message on the same topic resumes the conversation.
#[test]
fn after_kill_9_of_the_daemon_a_new_one_starts_and_the_topic_resumes() {
    let mut env = alice_and_bob(&[]);
    assert!(send_ok(&env, "echo: hi", Some("t1")));
    env.wait_until("the topic is noted", Duration::from_secs(15), |e| {
        std::fs::read_to_string(e.marker("echo-bob", ".topic")).is_ok_and(|t| t.contains("t1"))
    });
    let pid = bob_pid(&env);
    let mut daemon = env.daemon.take().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert!(
        env.socket().exists(),
        "a killed daemon leaves its socket file"
    );
    // The pty's master closed with the daemon: the agent got SIGHUP and left.
    env.wait_until("bob's orphan is gone", Duration::from_secs(10), |_| {
        !alive(pid)
    });
    assert!(env.marker("echo-bob", ".session").exists());
    env.start_daemon();
    env.wait_until(
        "the new daemon recovered bob",
        Duration::from_secs(10),
        |e| !events_of(e, "lifecycle", "recovered", "echo-bob").is_empty(),
    );
    let recovered = events_of(&env, "lifecycle", "recovered", "echo-bob");
    assert_eq!(recovered.len(), 1, "{}", env.diagnostics());
    assert_eq!(recovered[0]["resumable"], "true");
    assert!(!env.marker("echo-bob", ".session").exists());
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    assert!(send_ok(&env, "echo: again", Some("t1")));
    assert_last_wake(&env, "resume", "topic-match");
}

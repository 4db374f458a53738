//! Ephemeral workers (spec 05 §6, spec 03 §1 step 8) with the real daemon and echo agents: a
//! message to a peer whose profile says `wake_policy: "ephemeral"` is answered `queued` at
//! once, lands in the peer's durable queue, and runs as the first message of its own fresh
//! session; the worker's reply arms the wind-down; a `kill -9` of the daemon during a burst
//! loses no accepted task and runs none twice.

use crate::common;

use common::TestEnv;
use std::collections::HashMap;
use std::time::Duration;

/// A world with the echo peer `worker` made ephemeral and the router peer `sink` that sends
/// the tasks and collects the replies. Ticks every second; an armed worker ends after 1 s of
/// quiet.
fn world() -> TestEnv {
    world_with(&[])
}

/// [`world`] with more daemon environment (`(name, value)` pairs).
fn world_with(vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    // A burst of 50 tasks, each answered by the worker, is 20 messages each way within a
    // minute on a quick machine: the storm guard (tests/storm.rs) would pause the answers, so
    // it is out of the way here (seen in a fresh-clone CI run).
    env.set("IAPEER_TICK_SECS", "1")
        .set("IAPEER_EPHEMERAL_QUIET_SECS", "1")
        .set("IAPEER_STORM_LIMIT", "1000000");
    // The sender, collecting the workers' replies in <dir>/sink.log.
    env.install_line_sink("sink", &env.dir.path().join("sink.log"));
    env.ok(&["create", "sink", "--runtime", "sink"]);
    env.create_echo("worker");
    let profile = env.peer_dir("worker").join(".iapeer/peer-profile.json");
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    p["wake_policy"] = "ephemeral".into();
    std::fs::write(&profile, p.to_string()).unwrap();
    env.start_daemon();
    env
}

/// How many times the worker received each body (its transcript keeps every session's
/// `user` records).
fn runs(env: &TestEnv) -> HashMap<String, usize> {
    let path = env.peer_dir("worker").join(".echo-agent/transcript.jsonl");
    let mut n = HashMap::new();
    for line in common::read(&path).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["type"] == "user" {
            *n.entry(v["body"].as_str().unwrap_or("").to_string())
                .or_insert(0) += 1;
        }
    }
    n
}

fn queue_depth(env: &TestEnv) -> u64 {
    let list = env.list();
    let worker = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["personality"] == "worker")
        .expect("worker in list")
        .clone();
    worker["runtimes"][0]["queue_depth"]
        .as_u64()
        .expect("queue_depth")
}

/// How many times the worker was ended by the armed wind-down (`reason=armed-quiet`).
fn armed_wind_downs(env: &TestEnv) -> usize {
    env.count_events(
        "lifecycle",
        "supervise",
        &[
            ("action", "wind-down"),
            ("identity", "echo-worker"),
            ("reason", "armed-quiet"),
        ],
    )
}

fn worker_wakes(env: &TestEnv) -> Vec<HashMap<String, String>> {
    env.events("lifecycle", "wake")
        .into_iter()
        .filter(|e| e["identity"] == "echo-worker")
        .collect()
}

/// Spec 05 §6 and 03 §1 step 8: each send is answered `queued … ephemeral, depth n` (exit 0,
/// `--json` with `queued`, `queuedBy`, `queueDepth`), every task runs exactly once as the
/// first message of its own fresh session, in order, the worker's reply arms its wind-down,
/// and the queue is empty afterwards.
#[test]
fn each_task_runs_once_in_its_own_fresh_session() {
    let env = world();
    let out = env.ok(&[
        "send",
        "worker",
        "--from",
        "sink-sink",
        "--message",
        "task-1",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["queued"], true, "{v}");
    assert_eq!(v["queuedBy"], "ephemeral", "{v}");
    assert!(v["queueDepth"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(v["delivered_to"]["personality"], "worker");
    for i in 2..=3 {
        let out = env.ok(&[
            "send",
            "worker",
            "--from",
            "sink-sink",
            "--message",
            &format!("task-{i}"),
        ]);
        assert!(
            out.starts_with("queued for worker (echo) — ephemeral, depth "),
            "{out}"
        );
    }
    env.wait_until(
        "three tasks ran and the queue is empty",
        Duration::from_secs(60),
        |e| runs(e).len() == 3 && queue_depth(e) == 0 && e.status_of("worker", "echo") == "asleep",
    );
    let r = runs(&env);
    for i in 1..=3 {
        assert_eq!(r.get(&format!("task-{i}")), Some(&1), "{r:?}");
    }
    // One fresh session per task, each ended by the armed wind-down.
    let wakes = worker_wakes(&env);
    assert_eq!(wakes.len(), 3, "{}", env.diagnostics());
    for w in &wakes {
        assert_eq!(
            (w["mode"].as_str(), w["cause"].as_str()),
            ("fresh", "ephemeral")
        );
    }
    let pids: std::collections::HashSet<_> = wakes.iter().map(|w| w["pid"].clone()).collect();
    assert_eq!(pids.len(), 3);
    assert_eq!(armed_wind_downs(&env), 3, "{}", env.diagnostics());
    // The replies reached the sender, in task order.
    let sink = common::read(&env.dir.path().join("sink.log"));
    let order: Vec<usize> = (1..=3)
        .map(|i| {
            sink.find(&format!("echo: task-{i}"))
                .expect("reply in sink")
        })
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{sink}");
    // delivery.log: three queued lines and three drained deliveries that woke the worker.
    let d = env.events("delivery", "delivery");
    let queued: Vec<_> = d
        .iter()
        .filter(|e| e["to"] == "worker" && e.get("queued").map(String::as_str) == Some("true"))
        .collect();
    assert_eq!(queued.len(), 3, "{d:?}");
    assert!(queued
        .iter()
        .all(|e| e["qkind"] == "ephemeral" && e["path"] == "cli"));
    let drained: Vec<_> = d
        .iter()
        .filter(|e| e["to"] == "worker" && e["path"] == "daemon")
        .collect();
    assert_eq!(drained.len(), 3, "{d:?}");
    assert!(drained
        .iter()
        .all(|e| e["ok"] == "true" && e["woke"] == "true" && e["caller"] == "sink-sink"));
}

/// A worker so quick that its reply reaches the router before the launcher thread has
/// reported the session (forced here by a test hook holding that report for 1.5 s; it
/// happened by itself on a loaded machine) is still armed by that reply: it winds down after
/// its quiet time, and the next task runs. Before the fix the reply was not counted, the
/// worker waited out the 10-minute unarmed idle, and the queue stood still.
#[test]
fn a_reply_before_the_launcher_reports_arms_the_wind_down() {
    let env = world_with(&[("IAPEER_TEST_HOOK", "slow-launch-report:worker")]);
    for i in 1..=2 {
        env.ok(&[
            "send",
            "worker",
            "--from",
            "sink-sink",
            "--message",
            &format!("quick-{i}"),
        ]);
    }
    env.wait_until(
        "both tasks ran and the worker sleeps",
        Duration::from_secs(40),
        |e| runs(e).len() == 2 && queue_depth(e) == 0 && e.status_of("worker", "echo") == "asleep",
    );
    assert_eq!(armed_wind_downs(&env), 2, "{}", env.diagnostics());
    // Both replies reached the sender.
    let sink = common::read(&env.dir.path().join("sink.log"));
    assert!(sink.contains("echo: quick-2"), "{sink}");
}

/// Spec 05 §6 "a queue survives daemon restarts": `kill -9` of the daemon in the middle of a
/// burst of 50 sends; after a restart every task whose sender was told `queued` runs exactly
/// once, and no task runs twice.
#[test]
fn kill_9_during_a_burst_loses_no_accepted_task_and_runs_none_twice() {
    let mut env = world();
    // The first worker never gets ready while the burst runs, so the kill cannot land between
    // a delivery and its task's removal (that window re-runs a task: at least once).
    env.launch_env("worker", "echo", "PEER_START_ARGS=--no-prompt\n");
    let senders: Vec<_> = (0..50)
        .map(|i| {
            let mut cmd = env.cmd(&[
                "send",
                "worker",
                "--from",
                "sink-sink",
                "--message",
                &format!("burst-{i}"),
            ]);
            std::thread::spawn(move || {
                // Time is the thing tested: a burst spread over the sends, as agents send.
                std::thread::sleep(Duration::from_millis(20 * i));
                let out = cmd.output().expect("run iapeer send");
                let accepted = out.status.success()
                    && String::from_utf8_lossy(&out.stdout).starts_with("queued for worker");
                (format!("burst-{i}"), accepted)
            })
        })
        .collect();
    env.wait_until("ten tasks were queued", Duration::from_secs(30), |e| {
        e.count_events("delivery", "delivery", &[("queued", "true")]) >= 10
    });
    let mut daemon = env.daemon.take().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let outcomes: Vec<(String, bool)> = senders.into_iter().map(|t| t.join().unwrap()).collect();
    let accepted: Vec<&String> = outcomes.iter().filter(|o| o.1).map(|o| &o.0).collect();
    eprintln!(
        "kill -9 during the burst: {} of 50 sends accepted before the kill",
        accepted.len()
    );
    assert!(
        !accepted.is_empty(),
        "the kill came before any send was accepted"
    );
    assert!(accepted.len() < 50, "the kill came after the whole burst");
    env.launch_env("worker", "echo", "");
    env.start_daemon();
    env.wait_until("every queued task ran", Duration::from_secs(240), |e| {
        queue_depth(e) == 0 && e.status_of("worker", "echo") == "asleep"
    });
    let r = runs(&env);
    for task in &accepted {
        assert_eq!(
            r.get(*task),
            Some(&1),
            "{task}: {r:?}\n{}",
            env.diagnostics()
        );
    }
    // A send whose answer the kill cut off may have been queued; it still runs at most once.
    assert!(r.values().all(|n| *n == 1), "{r:?}");
    eprintln!(
        "tasks accepted = {}, tasks run = {} (each once)",
        accepted.len(),
        r.len()
    );
}

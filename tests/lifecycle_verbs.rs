//! The operator's lifecycle verbs and runtime declarations through the real daemon with echo
//! peers in real ptys (spec 05 §5, spec 07 "Peers"): `new`, `refresh`, `interrupt`,
//! `compact`, `self-fresh`, `self-done`, `add-runtime`, `default-runtime`, and the codex
//! folder trust that `create` adds and `remove` takes away (without running codex).

use crate::common;

use iapeer::paths::peer;

use common::{alive, TestEnv};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

type Line = HashMap<String, String>;

/// A world with echo peers `names` and a daemon with the extra environment `vars`.
fn world(names: &[&str], vars: &[(&str, &str)]) -> TestEnv {
    build(names, vars, false)
}

/// Like [`world`], plus the always-on router peer `bot` (running).
fn world_with_bot(names: &[&str], vars: &[(&str, &str)]) -> TestEnv {
    build(names, vars, true)
}

fn build(names: &[&str], vars: &[(&str, &str)], bot: bool) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    if bot {
        install_bot(&env);
    }
    for n in names {
        env.create_echo(n);
    }
    env.start_daemon();
    if bot {
        create_bot(&env);
    }
    env
}

/// Lines of `log` with `ev` about `identity`, oldest first.
fn events_of(env: &TestEnv, log: &str, ev: &str, identity: &str) -> Vec<Line> {
    env.events(log, ev)
        .into_iter()
        .filter(|e| e.get("identity").map(String::as_str) == Some(identity))
        .collect()
}

/// The `ev=wake` lines of `identity`.
fn wakes(env: &TestEnv, identity: &str) -> Vec<Line> {
    events_of(env, "lifecycle", "wake", identity)
}

/// The pid of the newest wake of `identity`.
fn last_pid(env: &TestEnv, identity: &str) -> u32 {
    wakes(env, identity)
        .last()
        .unwrap_or_else(|| panic!("no wake of {identity}\n{}", env.diagnostics()))["pid"]
        .parse()
        .expect("a numeric pid")
}

/// Assert the newest wake of `identity` was `mode`/`cause`.
fn assert_last_wake(env: &TestEnv, identity: &str, mode: &str, cause: &str) {
    let all = wakes(env, identity);
    let last = all
        .last()
        .unwrap_or_else(|| panic!("no wake of {identity}\n{}", env.diagnostics()));
    assert_eq!(
        (last["mode"].as_str(), last["cause"].as_str()),
        (mode, cause),
        "{}",
        env.diagnostics()
    );
}

/// `send <to> --from echo-alice --message <m> [--topic t]`. A body starting with `echo:` is
/// never answered by the echo agent, so alice stays asleep.
fn send(env: &TestEnv, to: &str, message: &str, topic: Option<&str>) -> Output {
    let mut args = vec!["send", to, "--from", "echo-alice", "--message", message];
    if let Some(t) = topic {
        args.extend(["--topic", t]);
    }
    env.run(&args)
}

/// Like [`send`] but it must succeed; returns its stdout line.
fn send_ok(env: &TestEnv, to: &str, message: &str, topic: Option<&str>) -> String {
    let out = send(env, to, message, topic);
    assert!(
        out.status.success(),
        "send to {to} failed: {}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Run with `PEER_IDENTITY` set, as an agent would from inside its session.
fn run_as(env: &TestEnv, identity: &str, args: &[&str]) -> Output {
    env.cmd(args)
        .env("PEER_IDENTITY", identity)
        .output()
        .expect("run iapeer")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Install the router runtime `bot` (a shell script on pipes that swallows its stdin).
fn install_bot(env: &TestEnv) {
    let script = env.dir.path().join("bot.sh");
    std::fs::write(&script, "#!/bin/sh\nwhile IFS= read -r line; do :; done\n").unwrap();
    let manifest = serde_json::json!({
        "runtime": "bot",
        "version": "0.0.1",
        "run": {"command": "/bin/sh", "args": [script]},
    });
    let path = env.root.join("runtimes/bot/runtime.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, manifest.to_string()).unwrap();
}

/// Create the always-on router peer `bot` and wait until it runs.
fn create_bot(env: &TestEnv) {
    env.ok(&[
        "create",
        "bot",
        "--runtime",
        "bot",
        "--intelligence",
        "absent",
    ]);
    env.wait_until("bot-bot runs", Duration::from_secs(20), |e| {
        e.status_of("bot", "bot") == "live"
    });
}

fn registry(env: &TestEnv) -> Value {
    serde_json::from_str(&common::read(&env.paths().registry()))
        .expect("the registry is valid JSON")
}

/// The registry entry of `name`.
fn entry(env: &TestEnv, name: &str) -> Value {
    registry(env)["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["personality"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not registered"))
}

/// The `list --json` row of `name`.
fn list_row(env: &TestEnv, name: &str) -> Value {
    env.list()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["personality"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not listed"))
}

fn profile_text(folder: &Path) -> String {
    common::read(&peer::profile(folder))
}

#[test]
fn new_wakes_fresh_replaces_a_live_session_forces_past_a_crash_loop_and_refuses_stopped() {
    let env = world(&["alice", "bob", "carol"], &[]);

    // Asleep: a fresh session, ready by the time the verb returns.
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    let out = env.ok(&["new", "bob"]);
    let pid1 = last_pid(&env, "echo-bob");
    assert_eq!(out.trim(), format!("echo-bob restarted fresh (pid {pid1})"));
    assert_eq!(env.status_of("bob", "echo"), "live", "ready on exit 0");
    assert!(alive(pid1));
    assert_last_wake(&env, "echo-bob", "fresh", "explicit-fresh");
    assert_eq!(wakes(&env, "echo-bob").len(), 1);

    // Live: the session is replaced by a new one; the old one ends as `replaced`.
    env.ok(&["new", "bob"]);
    let pid2 = last_pid(&env, "echo-bob");
    assert_ne!(pid1, pid2, "a new session");
    assert_eq!(wakes(&env, "echo-bob").len(), 2);
    assert_last_wake(&env, "echo-bob", "fresh", "explicit-fresh");
    assert_eq!(env.status_of("bob", "echo"), "live");
    assert!(!alive(pid1), "the old session {pid1} is gone");
    let exits = events_of(&env, "exits", "session-exit", "echo-bob");
    assert_eq!(exits.len(), 1, "{}", env.diagnostics());
    assert_eq!(exits[0]["pid"], pid1.to_string());
    assert_eq!(exits[0]["cause"], "replaced");
    assert!(
        !exits[0].contains_key("tail"),
        "a replacement is no crash: {:?}",
        exits[0]
    );
    assert!(
        !env.marker("echo-bob", ".deaths").exists()
            || common::read(&env.marker("echo-bob", ".deaths")).trim() == "[]",
        "a replacement is not a death"
    );
    // The new session takes messages live.
    assert_eq!(
        send_ok(&env, "bob", "echo: after new", None),
        "delivered to bob (echo)"
    );

    // A crash-looping peer: sends are refused until `new` clears the history.
    env.launch_env("carol", "echo", "PEER_START_ARGS=--fail-boot\n");
    for n in 1..=3 {
        let out = send(&env, "carol", "echo: hi", None);
        assert_eq!(out.status.code(), Some(1), "send {n}");
        env.wait_until("the death is recorded", Duration::from_secs(10), |e| {
            events_of(e, "lifecycle", "session-end", "echo-carol").len() == n
        });
    }
    let out = send(&env, "carol", "echo: hi", None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("crash-looping: 3 deaths in 300s"),
        "{}",
        stderr(&out)
    );
    // `new` on a peer that still fails at boot: the history is cleared, the wake is tried
    // (no crash-loop refusal) and its failure is reported.
    let (_, err) = env.fails(&["new", "carol"], 1);
    assert!(!err.contains("crash-looping"), "{err}");
    assert!(err.contains("wake failed"), "{err}");
    assert_eq!(wakes(&env, "echo-carol").len(), 4, "new launched it");
    env.wait_until(
        "the fourth death is recorded",
        Duration::from_secs(10),
        |e| events_of(e, "lifecycle", "session-end", "echo-carol").len() == 4,
    );
    // Fixed: `new` brings it up and messages flow again.
    env.launch_env("carol", "echo", "# fixed\n");
    let out = env.ok(&["new", "carol"]);
    assert!(out.starts_with("echo-carol restarted fresh (pid "), "{out}");
    assert_last_wake(&env, "echo-carol", "fresh", "explicit-fresh");
    assert_eq!(env.status_of("carol", "echo"), "live");
    assert_eq!(
        send_ok(&env, "carol", "echo: back", None),
        "delivered to carol (echo)"
    );

    // Stopped: refused with the stopped text; nothing launched.
    env.ok(&["stop", "alice"]);
    let (_, err) = env.fails(&["new", "alice"], 1);
    assert_eq!(
        err.trim(),
        "iapeer new: \"alice\" (echo) is stopped and not accepting messages; start it to resume: iapeer start alice"
    );
    assert!(wakes(&env, "echo-alice").is_empty());
    assert_eq!(env.status_of("alice", "echo"), "stopped");

    // Unknown peers and undeclared runtimes are refused.
    let (_, err) = env.fails(&["new", "zed"], 1);
    assert!(
        err.contains("peer \"zed\" is not in the iapeer peers index"),
        "{err}"
    );
    let (_, err) = env.fails(&["new", "bob", "codex"], 1);
    assert!(err.contains("does not declare runtime \"codex\""), "{err}");
}

/// Issue 30 item 4: `wake` brings a peer up without a message (and leaves a live one alone),
/// `restart` replaces a live session (fresh for the echo agent, which names no conversation:
/// never "the folder's newest"), both refuse a stopped peer with the command that starts it;
/// `stop --all` stops the agents and leaves the human and the services running (messages to
/// the operator still arrive) unless `--everyone`.
#[test]
fn wake_restart_and_stop_all_spare_the_operator() {
    let env = world_with_bot(&["alice", "bob"], &[]);
    env.ok(&["create", "you", "--runtime", "human"]);
    env.wait_until("the human peer is up", Duration::from_secs(30), |e| {
        e.status_of("you", "human") == "live"
    });

    // wake: asleep → up, ready on exit 0; again → the same session.
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    let out = env.ok(&["wake", "bob"]);
    let pid1 = last_pid(&env, "echo-bob");
    assert_eq!(out.trim(), format!("woke echo-bob (pid {pid1})"));
    assert_eq!(env.status_of("bob", "echo"), "live");
    let out = env.ok(&["wake", "bob"]);
    assert_eq!(out.trim(), format!("already live: echo-bob (pid {pid1})"));
    assert_eq!(wakes(&env, "echo-bob").len(), 1);

    // restart: a new session; the old one ends as `replaced`, no death.
    let out = env.ok(&["restart", "bob"]);
    let pid2 = last_pid(&env, "echo-bob");
    assert_ne!(pid1, pid2);
    assert_eq!(
        out.trim(),
        format!(
            "echo-bob restarted with a fresh conversation (none recorded to continue) (pid {pid2})"
        )
    );
    assert_last_wake(&env, "echo-bob", "fresh", "restart-without-conversation");
    assert!(!alive(pid1), "the old session {pid1} is gone");
    let exits = events_of(&env, "exits", "session-exit", "echo-bob");
    assert_eq!(exits.last().unwrap()["cause"], "replaced", "{exits:?}");
    // An asleep peer is simply brought up; --json gives the reply.
    let out = env.ok(&["restart", "alice", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["identity"], "echo-alice", "{out}");
    assert_eq!(v["pid"], last_pid(&env, "echo-alice"), "{out}");
    // An always-on peer is restarted as `new` does.
    let out = env.ok(&["restart", "bot"]);
    assert_eq!(out.trim(), "bot-bot restarted");

    // stop --all: the agents only; the human and the service peer are named and kept.
    let out = env.ok(&["stop", "--all"]);
    assert!(
        out.contains("stopped echo-alice, echo-bob")
            && out.contains("(ended echo-alice, echo-bob)"),
        "{out}"
    );
    assert!(
        out.contains("left running: bot-bot, human-you (humans and services: stop one by name, or add --everyone)"),
        "{out}"
    );
    assert_eq!(env.status_of("bob", "echo"), "stopped");
    assert_eq!(env.status_of("you", "human"), "live");
    assert_eq!(env.status_of("bot", "bot"), "live");
    // The operator is still reachable.
    let out = send(&env, "you", "build is green", None);
    assert!(out.status.success(), "{}", common::describe(&out));
    // Stopped peers: wake and restart are refused with the command that starts them.
    for verb in ["wake", "restart"] {
        let (_, err) = env.fails(&[verb, "bob"], 1);
        assert_eq!(
            err.trim(),
            format!("iapeer {verb}: \"bob\" (echo) is stopped and not accepting messages; start it to resume: iapeer start bob")
        );
    }
    // --everyone goes with --all; with it, humans and services stop too.
    let (_, err) = env.fails(&["stop", "bob", "--everyone"], 2);
    assert!(err.contains("--everyone goes with --all"), "{err}");
    let out = env.ok(&["stop", "--all", "--everyone", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let stopped: Vec<&str> = v["stopped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        stopped,
        ["echo-alice", "echo-bob", "bot-bot", "human-you"],
        "{out}"
    );
    assert!(v.get("kept").is_none(), "{out}");
    env.wait_until("the human is stopped", Duration::from_secs(10), |e| {
        e.status_of("you", "human") == "stopped" && e.status_of("bot", "bot") == "stopped"
    });
}

#[test]
fn refresh_marks_the_next_wake_fresh_without_touching_the_live_session() {
    let env = world_with_bot(
        &["alice", "bob"],
        &[("IAPEER_IDLE_SECS", "2"), ("IAPEER_TICK_SECS", "1")],
    );
    let fresh_next = env.marker("echo-bob", ".fresh-next");
    assert_eq!(
        send_ok(&env, "bob", "echo: one", Some("t1")),
        "delivered to bob (echo), woke"
    );
    let pid = last_pid(&env, "echo-bob");

    // Nothing is killed or woken now.
    let out = env.ok(&["refresh", "bob"]);
    assert_eq!(out.trim(), "the next wake starts fresh: echo-bob");
    assert!(fresh_next.exists());
    assert!(alive(pid), "the live session is untouched");
    assert_eq!(wakes(&env, "echo-bob").len(), 1);
    assert!(wakes(&env, "echo-alice").is_empty(), "nobody else woke");

    // After an idle sleep, a message on the SAME topic (which would resume) starts fresh.
    env.wait_until("bob sleeps idle", Duration::from_secs(30), |e| {
        events_of(e, "lifecycle", "supervise", "echo-bob")
            .iter()
            .any(|l| l["action"] == "reaped-idle")
            && e.status_of("bob", "echo") == "asleep"
    });
    assert!(env.marker("echo-bob", ".idle-reaped").exists());
    assert!(fresh_next.exists(), "the marker survives the sleep");
    assert_eq!(
        send_ok(&env, "bob", "echo: two", Some("t1")),
        "delivered to bob (echo), woke"
    );
    assert_last_wake(&env, "echo-bob", "fresh", "fresh-next");
    assert_ne!(last_pid(&env, "echo-bob"), pid);
    assert!(!fresh_next.exists(), "the marker is consumed by the wake");
    assert!(
        !env.marker("echo-bob", ".idle-reaped").exists(),
        "so is .idle-reaped"
    );

    // --all marks every agent identity and skips the router peer.
    let out = env.ok(&["refresh", "--all"]);
    assert_eq!(
        out.trim(),
        "the next wake starts fresh: echo-alice, echo-bob"
    );
    assert!(env.marker("echo-alice", ".fresh-next").exists());
    assert!(fresh_next.exists());
    assert!(!env.marker("bot-bot", ".fresh-next").exists());
    let out = env.ok(&["refresh", "bot"]);
    assert_eq!(
        out.trim(),
        "nothing to refresh (humans and services have no conversation to refresh)"
    );
    assert!(!env.marker("bot-bot", ".fresh-next").exists());
    assert_eq!(env.status_of("bot", "bot"), "live");

    // Refusals: unknown peer, undeclared runtime, neither a peer nor --all.
    let (_, err) = env.fails(&["refresh", "zed"], 1);
    assert!(
        err.contains("peer \"zed\" is not in the iapeer peers index"),
        "{err}"
    );
    let (_, err) = env.fails(&["refresh", "bob", "codex"], 1);
    assert!(err.contains("does not declare runtime \"codex\""), "{err}");
    env.fails(&["refresh"], 2);
}

#[test]
fn interrupt_and_compact_on_live_asleep_and_router_peers() {
    let env = world_with_bot(&["alice", "bob", "carol"], &[]);
    env.launch_env("bob", "echo", "PEER_START_ARGS=--reply-delay-ms 10000\n");

    // Asleep: nothing to interrupt.
    let (_, err) = env.fails(&["interrupt", "bob"], 1);
    assert_eq!(
        err.trim(),
        "iapeer interrupt: peer \"bob\" is offline on echo (not live): nothing to interrupt"
    );
    assert!(wakes(&env, "echo-bob").is_empty(), "interrupt never wakes");

    // Mid-reply: the runtime's interrupt key reaches the agent.
    assert_eq!(
        send_ok(&env, "bob", "please answer", None),
        "delivered to bob (echo), woke"
    );
    env.wait_until("bob is replying", Duration::from_secs(20), |e| {
        e.screen("echo-bob").contains("esc to interrupt")
    });
    let out = env.ok(&["interrupt", "bob"]);
    assert_eq!(out.trim(), "interrupted echo-bob");
    env.wait_until(
        "bob shows it was interrupted",
        Duration::from_secs(20),
        |e| {
            e.screen("echo-bob").contains("interrupted")
                && !e.screen("echo-bob").contains("esc to interrupt")
        },
    );
    assert!(env.has_event("lifecycle", "interrupt", &[("identity", "echo-bob")]));
    assert_eq!(env.status_of("bob", "echo"), "live", "the session lives on");

    // Compact: the echo runtime cannot compact; a clear refusal while live.
    let pid = last_pid(&env, "echo-bob");
    let (_, err) = env.fails(&["compact", "bob"], 1);
    assert!(err.contains("echo does not support compact"), "{err}");
    assert!(alive(pid), "the session is untouched");
    // Never started: refused the same way, before anything is woken for nothing.
    let (_, err) = env.fails(&["compact", "carol"], 1);
    assert!(err.contains("echo does not support compact"), "{err}");
    assert!(wakes(&env, "echo-carol").is_empty());

    // Router runtimes take no control commands.
    for verb in ["interrupt", "compact"] {
        let (_, err) = env.fails(&[verb, "bot"], 1);
        assert_eq!(
            err.trim(),
            format!("iapeer {verb}: bot does not support control commands")
        );
    }
    assert_eq!(env.status_of("bot", "bot"), "live");
}

#[test]
fn self_fresh_restarts_the_callers_session_and_self_done_reports_what_it_did() {
    let env = world(&["alice", "bob"], &[]);
    env.ok(&["new", "bob"]);
    let pid1 = last_pid(&env, "echo-bob");

    let out = run_as(&env, "echo-bob", &["self-fresh"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(stdout(&out).trim(), "echo-bob: a fresh session follows");
    env.wait_until(
        "a fresh session of bob comes up by itself",
        Duration::from_secs(30),
        |e| {
            wakes(e, "echo-bob").len() == 2
                && e.status_of("bob", "echo") == "live"
                && !e.marker("echo-bob", ".new-eager").exists()
        },
    );
    let pid2 = last_pid(&env, "echo-bob");
    assert_ne!(pid1, pid2);
    assert!(!alive(pid1));
    assert_last_wake(&env, "echo-bob", "fresh", "explicit-fresh");
    // Order in lifecycle.log: self-fresh, the old session's end, then the fresh wake.
    let order: Vec<String> = env
        .log("lifecycle")
        .lines()
        .map(|l| {
            iapeer::eventlog::parse_line(l)
                .into_iter()
                .collect::<Line>()
        })
        .filter(|e| e.get("identity").map(String::as_str) == Some("echo-bob"))
        .map(|e| e["ev"].clone())
        .filter(|ev| ["wake", "self-fresh", "session-end"].contains(&ev.as_str()))
        .collect();
    assert_eq!(order, ["wake", "self-fresh", "session-end", "wake"]);
    let exits = events_of(&env, "exits", "session-exit", "echo-bob");
    assert_eq!(exits.len(), 1);
    assert_eq!(exits[0]["cause"], "replaced");
    assert!(!exits[0].contains_key("tail"));
    assert_eq!(
        send_ok(&env, "bob", "echo: still there", None),
        "delivered to bob (echo)"
    );

    // Outside a session: a clear refusal.
    let (_, err) = env.fails(&["self-fresh"], 1);
    assert_eq!(
        err.trim(),
        "iapeer self-fresh: PEER_IDENTITY is not set — self-* verbs run inside a peer's session"
    );
    let (_, err) = env.fails(&["self-done"], 1);
    assert!(err.contains("PEER_IDENTITY is not set"), "{err}");

    // self-done: inert for a normal peer, "done" for an ephemeral one.
    let out = run_as(&env, "echo-alice", &["self-done"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(
        stdout(&out).trim(),
        "echo-alice: noted — alice is not an ephemeral peer, so the mark changes nothing"
    );
    env.create_echo("worker");
    let profile = peer::profile(&env.peer_dir("worker"));
    let mut v: Value = serde_json::from_str(&common::read(&profile)).unwrap();
    v["wake_policy"] = "ephemeral".into();
    std::fs::write(&profile, v.to_string()).unwrap();
    let out = run_as(&env, "echo-worker", &["self-done"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(
        stdout(&out).trim(),
        "echo-worker: done; the session winds down once quiet"
    );
    assert!(env.marker("echo-worker", ".ephemeral-armed").exists());
    assert!(
        wakes(&env, "echo-worker").is_empty(),
        "self-done wakes nobody"
    );
}

/// An executable stand-in for the Codex CLI: its presence makes the codex runtime
/// "installed"; it is never run by these tests.
fn fake_codex(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("fake-codex");
    std::fs::write(&p, "#!/bin/sh\necho 'not the real codex' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A world where codex is "installed" (a fake binary), claude is not, and Codex's config
/// lives in `<dir>/codex-home`.
fn codex_world() -> TestEnv {
    let mut env = TestEnv::new();
    let bin = fake_codex(env.dir.path());
    let home = env.dir.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    env.set("IAPEER_CODEX_BIN", bin.to_str().unwrap())
        .set("IAPEER_CLAUDE_BIN", "/nonexistent/claude")
        .set("CODEX_HOME", home.to_str().unwrap());
    env
}

fn codex_config(env: &TestEnv) -> PathBuf {
    env.dir.path().join("codex-home/config.toml")
}

#[test]
fn add_runtime_and_default_runtime_for_one_peer_and_all() {
    let mut env = codex_world();
    install_bot(&env);
    env.ok(&["create", "cx", "--runtime", "codex"]);
    // e1 is created while codex is not installed, so it declares echo only.
    let out = env
        .cmd(&["create", "e1", "--runtime", "echo"])
        .env("IAPEER_CODEX_BIN", "/nonexistent/codex")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    env.start_daemon();
    let cx = env.peer_dir("cx");
    assert_eq!(entry(&env, "cx")["runtimes"], serde_json::json!(["codex"]));
    assert_eq!(entry(&env, "e1")["runtimes"], serde_json::json!(["echo"]));

    // add-runtime: declared, set up, default unchanged; a second run changes nothing.
    let out = env.ok(&["add-runtime", "echo", "--peer", "cx"]);
    assert_eq!(out.trim(), "cx: echo added");
    let e = entry(&env, "cx");
    assert_eq!(e["runtimes"], serde_json::json!(["codex", "echo"]));
    assert_eq!(e["default_runtime"], "codex");
    assert!(peer::launch_env(&cx, "echo").is_file());
    let (profile_once, registry_once) = (profile_text(&cx), registry(&env));
    let out = env.ok(&["add-runtime", "echo", "--peer", "cx"]);
    assert_eq!(out.trim(), "cx: echo already declared (setup refreshed)");
    assert_eq!(profile_text(&cx), profile_once);
    assert_eq!(registry(&env), registry_once);
    assert_eq!(list_row(&env, "cx")["default_runtime"], "codex");

    // A router runtime is never added to an agent peer; an unknown one is not installed.
    let (_, err) = env.fails(&["add-runtime", "bot", "--peer", "cx"], 1);
    assert!(
        err.contains("bot is a human's or a service's runtime"),
        "{err}"
    );
    let (_, err) = env.fails(&["add-runtime", "nope", "--peer", "cx"], 1);
    assert!(err.contains("runtime \"nope\" is not installed"), "{err}");
    assert_eq!(registry(&env), registry_once);

    // default-runtime: switched in the registry at once; the daemon routes by it.
    let out = env.ok(&["default-runtime", "echo", "--peer", "cx"]);
    assert_eq!(out.trim(), "cx: default runtime echo");
    assert_eq!(entry(&env, "cx")["default_runtime"], "echo");
    assert!(profile_text(&cx).contains("\"default_runtime\": \"echo\""));
    assert_eq!(list_row(&env, "cx")["default_runtime"], "echo");
    let out = env.ok(&["send", "cx", "--from", "echo-e1", "--message", "echo: hi"]);
    assert_eq!(out.trim(), "delivered to cx (echo), woke");
    // Refused for a peer that does not declare it, naming the peer.
    let (_, err) = env.fails(&["default-runtime", "codex", "--peer", "e1"], 1);
    assert!(
        err.contains("peer \"e1\" does not declare runtime \"codex\""),
        "{err}"
    );
    assert_eq!(entry(&env, "e1")["default_runtime"], "echo");

    // --all: refused for e1 only (exit 1), applied to cx.
    let out = env.run(&["default-runtime", "codex", "--all"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert_eq!(stdout(&out).trim(), "cx: default runtime codex");
    assert!(stderr(&out).contains("peer \"e1\" does not declare"));
    assert_eq!(entry(&env, "cx")["default_runtime"], "codex");
    // add-runtime --all, then the whole team moves.
    let out = env.ok(&["add-runtime", "codex", "--all"]);
    assert_eq!(
        out,
        "cx: codex already declared (setup refreshed)\ne1: codex added\n"
    );
    assert_eq!(
        entry(&env, "e1")["runtimes"],
        serde_json::json!(["echo", "codex"])
    );
    assert_eq!(entry(&env, "e1")["default_runtime"], "echo");
    let out = env.ok(&["default-runtime", "codex", "--all"]);
    assert_eq!(
        out,
        "cx: default runtime codex\ne1: default runtime codex\n"
    );
    for row in env.list().as_array().unwrap() {
        assert_eq!(row["default_runtime"], "codex", "{row}");
    }
    // Usage errors.
    env.fails(&["add-runtime", "echo"], 2);
    env.fails(&["default-runtime", "echo"], 2);
    let (_, err) = env.fails(&["default-runtime", "echo", "--peer", "zed"], 1);
    assert!(
        err.contains("peer \"zed\" is not in the iapeer peers index"),
        "{err}"
    );
}

/// The user's own Codex config: comments, odd spacing, another server, another project.
const USER_CONFIG: &str = "# my codex settings\n\
model = \"o3\"   # favourite\n\
\n\
# other servers\n\
[mcp_servers.other]\n\
command = \"x\"  # spacing kept\n\
\n\
[projects.\"/elsewhere\"]\n\
trust_level = \"trusted\"\n";

/// Lines of `after` not matched, in order, by the lines of `before` (which must all be
/// there, byte for byte, in their order); blank lines are left out of the result.
fn added_lines(before: &str, after: &str) -> Vec<String> {
    let mut want = before.lines().peekable();
    let mut added = Vec::new();
    for line in after.lines() {
        if want.peek() == Some(&line) {
            want.next();
        } else if !line.is_empty() {
            added.push(line.to_string());
        }
    }
    let missing: Vec<&str> = want.collect();
    assert!(
        missing.is_empty(),
        "user lines lost or reordered: {missing:?}\n--- after ---\n{after}"
    );
    added
}

#[test]
fn codex_trust_is_added_by_create_and_removed_by_remove_keeping_the_users_config() {
    let env = codex_world();
    let config = codex_config(&env);
    std::fs::write(&config, USER_CONFIG).unwrap();
    // Created through a symlink: Codex names projects by their real path.
    let real = env.dir.path().join("real");
    std::fs::create_dir_all(&real).unwrap();
    let link = env.dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    env.ok(&[
        "create",
        "cx",
        "--runtime",
        "codex",
        "--path",
        link.join("cx").to_str().unwrap(),
    ]);
    let key = real
        .join("cx")
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    let created = common::read(&config);
    assert_eq!(
        added_lines(USER_CONFIG, &created),
        [
            "check_for_update_on_startup = false # added by iapeer; iapeer uninstall removes it"
                .to_string(),
            "[mcp_servers.iapeer]".into(),
            "url = \"http://127.0.0.1:8765/mcp\"".into(),
            "default_tools_approval_mode = \"approve\"".into(),
            "bearer_token_env_var = \"IAPEER_TOKEN\"".into(),
            "[mcp_servers.iapeer.env_http_headers]".into(),
            "X-IAPeer-Identity = \"PEER_IDENTITY\"".into(),
            format!("[projects.\"{key}\"]"),
            "trust_level = \"trusted\"".into(),
        ],
        "{created}"
    );
    assert!(created.starts_with(
        "# my codex settings\nmodel = \"o3\"   # favourite\ncheck_for_update_on_startup = false # added by iapeer; iapeer uninstall removes it\n"
    ));

    // Again: nothing changes.
    env.ok(&[
        "create",
        "cx",
        "--runtime",
        "codex",
        "--path",
        link.join("cx").to_str().unwrap(),
    ]);
    assert_eq!(common::read(&config), created);
    env.ok(&["init", real.join("cx").to_str().unwrap()]);
    assert_eq!(common::read(&config), created);

    // remove: only this folder's trust goes; everything else stays as it was.
    let out = env.ok(&["remove", "cx"]);
    assert!(out.starts_with("removed cx"), "{out}");
    let expected = created.replace(
        &format!("\n[projects.\"{key}\"]\ntrust_level = \"trusted\"\n"),
        "",
    );
    assert_ne!(expected, created);
    assert_eq!(common::read(&config), expected);
    assert!(
        added_lines(USER_CONFIG, &expected)
            .iter()
            .all(|l| !l.contains(&key)),
        "the trust entry is gone"
    );

    // A config that is not TOML: create fails clearly and leaves the file alone.
    let broken = "this is = = not toml\n# keep me\n";
    std::fs::write(&config, broken).unwrap();
    let (_, err) = env.fails(&["create", "cy", "--runtime", "codex"], 1);
    assert!(
        err.contains(&format!("{} is not valid TOML", config.display())),
        "{err}"
    );
    assert!(err.contains("run the command again"), "{err}");
    assert_eq!(common::read(&config), broken, "untouched");
    // The hint is honest: once the file is fixed, the same command succeeds.
    std::fs::write(&config, USER_CONFIG).unwrap();
    env.ok(&["create", "cy", "--runtime", "codex"]);
    let key_y = env
        .peer_dir("cy")
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    assert!(common::read(&config).contains(&format!("[projects.\"{key_y}\"]")));
    // remove with a broken config still removes the peer, says the trust stays, and leaves
    // the file alone.
    std::fs::write(&config, broken).unwrap();
    let out = env.run(&["remove", "cy"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(
        stderr(&out).contains("is not valid TOML"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(&format!("the trust entry of {key_y} stays")),
        "{}",
        stderr(&out)
    );
    assert_eq!(common::read(&config), broken);
    assert!(registry(&env)["peers"].as_array().unwrap().is_empty());

    // Codex not installed: refused before anything is made.
    let out = env
        .cmd(&["create", "cz", "--runtime", "codex"])
        .env("IAPEER_CODEX_BIN", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert_eq!(
        stderr(&out).trim(),
        "iapeer create: codex is not installed — looked at, in order: IAPEER_CODEX_BIN=/nonexistent (not an executable file) — install the Codex CLI so that one of these finds it (or set IAPEER_CODEX_BIN to the program in the daemon's environment and restart it), or choose another runtime"
    );
    assert!(!env.peer_dir("cz").exists(), "no folder is left behind");
    // Nor when no agent runtime is installed and none is named.
    let out = env
        .cmd(&["create", "cz"])
        .env("IAPEER_CODEX_BIN", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert!(
        stderr(&out).contains("no agent runtime is installed"),
        "{}",
        stderr(&out)
    );
    assert!(!env.peer_dir("cz").exists(), "no folder is left behind");
}

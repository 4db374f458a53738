//! The storm guard with the real daemon: an echo agent and a router bot that answer every
//! message ping-pong for ever until the guard pauses their exchange; a human writing to
//! either peer lifts the pause.

use crate::common;

use common::TestEnv;
use std::time::{Duration, Instant};

/// A router peer's script that answers every message it gets with `message` to `to` (as
/// itself: the daemon sets its identity).
fn answering(to: &str, message: &str) -> String {
    format!(
        r#"#!/bin/sh
bin="$1"
while IFS= read -r line; do
  case "$line" in
    *'<message><![CDATA['*) "$bin" send {to} --message "{message}" >/dev/null 2>&1 ;;
  esac
done
"#
    )
}

fn ok_between(env: &TestEnv) -> usize {
    env.events("delivery", "delivery")
        .iter()
        .filter(|d| {
            d["ok"] == "true"
                && matches!(
                    (d["caller"].as_str(), d["to"].as_str()),
                    ("echo-alice", "bot") | ("bot-bot", "alice")
                )
        })
        .count()
}

/// Install router runtime `name` that runs `script` with `/bin/sh`, the iapeer binary its
/// first argument.
fn install_script_runtime(env: &TestEnv, name: &str, script: &str) {
    let path = env.dir.path().join(format!("{name}.sh"));
    std::fs::write(&path, script).unwrap();
    let manifest = serde_json::json!({
        "runtime": name,
        "version": "0.0.1",
        "run": {"command": "/bin/sh", "args": [path, common::bin()]},
    });
    let at = env.root.join(format!("runtimes/{name}/runtime.json"));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(at, manifest.to_string()).unwrap();
}

#[test]
fn a_runaway_exchange_is_paused_and_a_human_lifts_the_pause() {
    let mut env = TestEnv::new();
    env.set("IAPEER_STORM_LIMIT", "5");
    // The bot answers every message with `again` to alice (who answers it with `echo:
    // again`, …).
    install_script_runtime(&env, "bot", &answering("alice", "again"));
    // The human's console keeps what it gets and answers nothing.
    let inbox = env.dir.path().join("owner-inbox.log");
    let console = serde_json::json!({
        "runtime": "console",
        "version": "0.0.1",
        "run": {"command": "/bin/sh", "args": ["-c", "cat >> \"$0\"", inbox]},
    });
    let path = env.root.join("runtimes/console/runtime.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, console.to_string()).unwrap();
    env.create_echo("alice");
    env.ok(&["create", "bot", "--runtime", "bot"]);
    env.ok(&[
        "create",
        "owner",
        "--runtime",
        "console",
        "--intelligence",
        "natural",
        "--no-bootstrap",
    ]);
    env.start_daemon();
    let started = Instant::now();
    env.ok(&["send", "bot", "--from", "echo-alice", "--message", "start"]);
    env.wait_until(
        "the storm guard pauses the pair",
        Duration::from_secs(60),
        |e| e.has_event("lifecycle", "storm", &[("action", "paused")]),
    );
    let took = started.elapsed();
    // Five messages each way went through; then the pair is refused, and the refusal says why.
    let refused: Vec<_> = env
        .events("delivery", "delivery")
        .into_iter()
        .filter(|d| d["ok"] == "false")
        .collect();
    assert!(!refused.is_empty(), "{}", env.diagnostics());
    assert!(
        refused[0]["err"].contains("are paused") && refused[0]["err"].contains("runaway"),
        "{refused:?}"
    );
    let at_pause = ok_between(&env);
    assert!(
        (9..=11).contains(&at_pause),
        "{at_pause}\n{}",
        env.diagnostics()
    );
    // The exchange stays stopped: each message draws one answer, and the refused one drew
    // none, so once the router has handled everything it had, nothing more can come.
    env.router_settled();
    assert_eq!(ok_between(&env), at_pause, "{}", env.diagnostics());
    eprintln!("ping-pong paused after {took:?} and {at_pause} deliveries");
    // The human was told, by a message from iapeer on topic `storm`.
    env.wait_until(
        "the human hears of the pause",
        Duration::from_secs(10),
        |_| common::read(&inbox).contains("iapeer paused messages between"),
    );
    let told = common::read(&inbox);
    assert!(told.contains("from-personality=\"iapeer\""), "{told}");
    assert!(told.contains("topic=\"storm\""), "{told}");
    // A send between them is refused with the code `paused`.
    let out = env.run(&[
        "send",
        "bot",
        "--from",
        "echo-alice",
        "--message",
        "more",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], "paused", "{v}");
    // The human steps in: the pause is lifted and the pair may talk again.
    env.ok(&[
        "send",
        "alice",
        "--from",
        "console-owner",
        "--message",
        "calm down",
    ]);
    assert!(env.has_event(
        "lifecycle",
        "storm",
        &[
            ("action", "lifted"),
            ("peer", "alice"),
            ("other", "bot"),
            ("by", "owner")
        ]
    ));
}

/// The timer service's own log lines of event `ev`.
fn timer_events(env: &TestEnv, ev: &str) -> Vec<std::collections::HashMap<String, String>> {
    let path = env.root.join("logs/notifier/timer.log");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| iapeer::eventlog::parse_line(l).into_iter().collect())
        .filter(|m: &std::collections::HashMap<String, String>| {
            m.get("ev").map(String::as_str) == Some(ev)
        })
        .collect()
}

/// Issue 26 item 7: an agent that answers every message of the real `timer` service loops
/// with its teaching replies; the guard stops that loop (the agent's messages to the service
/// are refused) and never the owner's scheduled signals: the timer's fires for the owner are
/// delivered during the pause.
#[test]
fn a_loop_with_a_service_is_paused_and_the_owners_timer_fires_still_arrive() {
    let mut env = TestEnv::new();
    env.set("IAPEER_STORM_LIMIT", "5");
    // The bot answers every message with `thanks` to the timer: with the notifier's teaching
    // reply to a message that is not a call, an endless exchange.
    install_script_runtime(&env, "thanker", &answering("timer", "thanks"));
    env.ok(&["create", "bot", "--runtime", "thanker", "--no-bootstrap"]);
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    env.start_daemon();
    let call = serde_json::json!({"when":"@every 1s","message":"tick","target":"self"});
    env.ok(&[
        "send",
        "timer",
        "--from",
        "thanker-bot",
        "--message",
        &call.to_string(),
    ]);
    env.wait_until(
        "the storm guard pauses the bot and the timer",
        Duration::from_secs(60),
        |e| e.has_event("lifecycle", "storm", &[("action", "paused")]),
    );
    let fires = |e: &TestEnv| {
        timer_events(e, "sent")
            .iter()
            .filter(|s| s["kind"] == "fire" && s["to"] == "bot")
            .count()
    };
    let ok_to_timer = |e: &TestEnv| {
        e.count_events(
            "delivery",
            "delivery",
            &[("caller", "thanker-bot"), ("to", "timer"), ("ok", "true")],
        )
    };
    let at_pause = (fires(&env), ok_to_timer(&env));
    // The fires go on during the pause: three more reach the owner.
    env.wait_until(
        "three timer fires delivered during the pause",
        Duration::from_secs(20),
        |e| fires(e) >= at_pause.0 + 3,
    );
    // The loop is stopped: the bot's answers to the fires are refused with `paused`, so the
    // timer gets nothing more from it and sends it no more teaching replies.
    let refused = env
        .events("delivery", "delivery")
        .into_iter()
        .filter(|d| d["caller"] == "thanker-bot" && d["ok"] == "false")
        .count();
    assert!(refused >= 3, "{}", env.diagnostics());
    let why = env
        .events("delivery", "delivery")
        .into_iter()
        .find(|d| d["caller"] == "thanker-bot" && d["ok"] == "false")
        .map(|d| d["err"].clone())
        .unwrap_or_default();
    assert!(
        why.starts_with("messages from \"bot\" to \"timer\"") && why.contains("still arrive"),
        "{why}"
    );
    assert!(env.has_event(
        "lifecycle",
        "storm",
        &[("action", "paused"), ("service", "timer")]
    ));
    assert!(
        ok_to_timer(&env) <= at_pause.1 + 1,
        "{} → {}\n{}",
        at_pause.1,
        ok_to_timer(&env),
        env.diagnostics()
    );
    assert!(
        !env.has_event(
            "delivery",
            "delivery",
            &[("caller", "notifier-timer"), ("ok", "false")]
        ),
        "{}",
        env.diagnostics()
    );
    assert!(timer_events(&env, "deliver-failed").is_empty());
}

//! The storm guard with the real daemon: an echo agent and a router bot that answer every
//! message ping-pong for ever until the guard pauses their exchange; a human writing to
//! either peer lifts the pause.

use crate::common;

use common::TestEnv;
use std::time::{Duration, Instant};

/// Answers every message with `again` to alice (who answers it with `echo: again`, …).
const BOT: &str = r#"#!/bin/sh
bin="$1"
while IFS= read -r line; do
  case "$line" in
    *'<message><![CDATA['*) "$bin" send alice --message "again" >/dev/null 2>&1 ;;
  esac
done
"#;

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

#[test]
fn a_runaway_exchange_is_paused_and_a_human_lifts_the_pause() {
    let mut env = TestEnv::new();
    env.set("IAPEER_STORM_LIMIT", "5");
    let script = env.dir.path().join("bot.sh");
    std::fs::write(&script, BOT).unwrap();
    let manifest = serde_json::json!({
        "runtime": "bot",
        "version": "0.0.1",
        "run": {"command": "/bin/sh", "args": [script, common::bin()]},
    });
    let path = env.root.join("runtimes/bot/runtime.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, manifest.to_string()).unwrap();
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
    // The exchange stays stopped.
    std::thread::sleep(Duration::from_secs(3));
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

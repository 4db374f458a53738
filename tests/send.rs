//! Sending through the real daemon to echo peers: live, asleep (woke), stopped, unknown,
//! validation errors, attachments (spec 03).

mod common;

use common::TestEnv;
use std::time::Duration;

fn two_peers() -> TestEnv {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    env
}

#[test]
fn send_to_an_asleep_peer_wakes_it_and_delivers() {
    let env = two_peers();
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "hello bob",
        "--topic",
        "t1",
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
    assert_eq!(env.status_of("bob", "echo"), "live");
    // The echo agent printed its acknowledgement in its pane.
    assert!(
        env.pane("echo-bob").contains("from alice: hello bob"),
        "{}",
        env.diagnostics()
    );
    let d = env.events("delivery", "delivery");
    let first = d.iter().find(|e| e["to"] == "bob").expect("delivery line");
    assert_eq!(first["ok"], "true");
    assert_eq!(first["woke"], "true");
    assert_eq!(first["via"], "echo-bob");
    assert_eq!(first["caller"], "echo-alice");
    assert_eq!(first["topic"], "t1");
    assert_eq!(first["path"], "cli");
    assert!(
        !env.log("delivery").contains("hello bob"),
        "bodies never reach delivery.log"
    );
    // bob echoes back to alice, which wakes her through MCP with bob's session token.
    env.wait_until("bob's echo reaches alice", Duration::from_secs(10), |e| {
        e.events("delivery", "delivery").iter().any(|d| {
            d["caller"] == "echo-bob"
                && d["to"] == "alice"
                && d["ok"] == "true"
                && d["path"] == "mcp"
        })
    });
    assert!(
        env.pane("echo-alice").contains("from bob: echo: hello bob"),
        "{}",
        env.diagnostics()
    );
}

#[test]
fn send_to_a_live_peer_does_not_wake_and_json_gives_the_result_object() {
    let env = two_peers();
    env.ok(&["send", "bob", "--from", "echo-alice", "--message", "first"]);
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "second",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["woke"], false);
    assert_eq!(v["delivered_to"]["personality"], "bob");
    assert_eq!(v["delivered_to"]["runtime"], "echo");
    let ts = v["ts"].as_str().unwrap();
    assert!(ts.len() >= 25 && &ts[10..11] == "T", "ts with offset: {ts}");
}

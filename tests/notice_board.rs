//! The notice board (spec 10 §3, issue 10 item 2) against a real daemon: a notice in
//! `state/iapeer/notices.json` is shown by `list` (text and JSON), `status` (text and JSON),
//! the fleet snapshot and `GET /fleet/v1/notices[/<id>]`, and goes when it expires. (How the
//! daemon raises and clears notices from the real CLIs' files: tests/notices.rs.)

use crate::common;

use common::TestEnv;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A notice as the daemon writes it, for `echo-alice`, expiring at `expires_ms`.
fn notice(id: &str, expires_ms: u64) -> Value {
    json!({
        "id": id,
        "personality": "alice",
        "runtime": "echo",
        "identity": "echo-alice",
        "kind": "rate-limit",
        "errorType": "rate_limit",
        "status": 429,
        "model": "<synthetic>",
        "text": "API Error: Request rejected (429)",
        "count": 2,
        "firstAt": "2026-12-01T10:00:00.000Z",
        "lastAt": "2026-12-01T10:05:00.000Z",
        "expiresAt": "(not read)",
        "expiresMs": expires_ms,
    })
}

#[test]
fn a_notice_is_shown_by_list_status_and_the_fleet_api_until_it_expires() {
    let mut env = TestEnv::new();
    env.set("IAPEER_TICK_SECS", "1");
    env.create_echo("alice");
    env.create_echo("bob");
    let id = "nt-0a1b2c3d";
    let board = env.paths().state_dir().join("notices.json");
    std::fs::create_dir_all(board.parent().unwrap()).unwrap();
    let expires = now_ms() + 12_000;
    let stale = notice("nt-99999999", now_ms() - 1);
    std::fs::write(
        &board,
        json!({"notices": [notice(id, expires), stale]}).to_string(),
    )
    .unwrap();

    // Without the daemon: list reads the board (an expired notice is never shown).
    let text = env.ok(&["list"]);
    assert!(text.contains("echo*(rate-limit×2)"), "{text}");
    assert!(text.contains("NOTICES"), "{text}");
    assert!(
        text.contains("echo-alice: rate-limit (rate_limit, 429) ×2"),
        "{text}"
    );
    assert!(!text.contains("nt-99999999"), "{text}");

    env.start_daemon();
    let row_notices = |e: &TestEnv, who: &str| -> Vec<Value> {
        let rows = e.list();
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["personality"] == who);
        row.and_then(|r| r["runtimes"][0]["notices"].as_array().cloned())
            .unwrap_or_default()
    };
    let on_alice = row_notices(&env, "alice");
    assert_eq!(on_alice.len(), 1, "{on_alice:?}");
    assert_eq!(on_alice[0]["id"], id);
    assert_eq!(on_alice[0]["count"], 2);
    assert!(row_notices(&env, "bob").is_empty());

    let status = env.ok(&["status"]);
    assert!(status.contains("\nnotices: 1\n"), "{status}");
    assert!(status.contains(&format!("[{id}]")), "{status}");
    let doc: Value = serde_json::from_str(&env.ok(&["status", "--json"])).unwrap();
    assert_eq!(doc["notices"][0]["id"], id, "{doc}");

    let all = crate::fleet::get(&env, "/fleet/v1/notices");
    assert_eq!(all.status, 200);
    let all = all.json();
    assert_eq!(all["api"], 1);
    assert_eq!(all["notices"].as_array().unwrap().len(), 1, "{all}");
    let one = crate::fleet::get(&env, &format!("/fleet/v1/notices/{id}"));
    assert_eq!(one.status, 200);
    assert_eq!(one.json()["notice"]["errorType"], "rate_limit");
    let gone = crate::fleet::get(&env, "/fleet/v1/notices/nt-99999999");
    assert_eq!(gone.status, 404);
    assert!(
        gone.error().contains("expired or was cleared"),
        "{}",
        gone.error()
    );
    let bad = crate::fleet::get(&env, "/fleet/v1/notices/bogus");
    assert_eq!(bad.status, 404);
    assert!(
        bad.error().contains("nt- and 8 hex digits"),
        "{}",
        bad.error()
    );
    let snap = crate::fleet::get(&env, "/fleet/v1/snapshot").json();
    assert_eq!(snap["notices"][0]["id"], id, "{snap}");
    let alice = snap["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["personality"] == "alice")
        .unwrap();
    assert_eq!(alice["runtimes"][0]["notices"][0]["id"], id);

    // The tick expires it: logged, and gone from the file and every view.
    env.wait_until("the notice expires", Duration::from_secs(40), |e| {
        e.has_event(
            "lifecycle",
            "notice-cleared",
            &[("id", id), ("reason", "expired")],
        )
    });
    assert!(row_notices(&env, "alice").is_empty());
    let all = crate::fleet::get(&env, "/fleet/v1/notices").json();
    assert_eq!(all["notices"], json!([]), "{all}");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&board).unwrap()).unwrap();
    assert_eq!(file["notices"], json!([]), "{file}");
    assert!(env.ok(&["status"]).contains("\nnotices: 0\n"));
    env.stop_daemon();
}

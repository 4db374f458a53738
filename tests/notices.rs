//! Recorded truth for notices (spec 10 §3, issue 10 item 2): what the real Claude Code writes
//! to its transcript when the model API answers 429 (rate limit), 529 (overloaded) or 401
//! (expired or bad login). The records are read from the transcript, never from the screen;
//! `src/runtime/claude.rs` parses these fixtures in its unit tests.

use crate::common;

use common::anthropic::{AnthropicStandIn, Reply};
use common::TestEnv;
use std::time::Duration;

/// Where the recordings go (the version is the one scripts/setup-agents.sh installs).
const FIXTURES: &str = "tests/fixtures/claude-2.1.332";

/// Every transcript record under `dir`, recursively.
fn records(dir: &std::path::Path) -> Vec<serde_json::Value> {
    crate::busy::records(dir)
}

/// Run `claude -p hi` (no retries: `CLAUDE_CODE_MAX_RETRIES=0`) against a stand-in that
/// answers every request with `status`, and keep the transcript records that carry
/// `isApiErrorMessage` as `api-error-<name>.jsonl`.
#[test]
#[ignore = "re-records fixtures from the real Claude Code; run by name with --ignored"]
fn record_claude_api_error_records() {
    let bin = std::env::var("IAPEER_TEST_CLAUDE_BIN").expect("IAPEER_TEST_CLAUDE_BIN");
    for (status, name) in [(429u16, "rate-limit"), (529, "overloaded"), (401, "auth")] {
        let env = TestEnv::new();
        let api = AnthropicStandIn::start();
        api.script(move |_| Reply::Error(status));
        let cwd = env.dir.path().join("w");
        std::fs::create_dir_all(&cwd).unwrap();
        api.run_claude_print(&bin, &env.home, &cwd, &[("CLAUDE_CODE_MAX_RETRIES", "0")]);
        let errors: Vec<String> = records(&env.home.join(".claude/projects"))
            .into_iter()
            .filter(|r| r["isApiErrorMessage"] == true)
            .map(|r| r.to_string())
            .collect();
        assert!(!errors.is_empty(), "{status}: no isApiErrorMessage record");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(FIXTURES)
            .join(format!("api-error-{name}.jsonl"));
        std::fs::write(&path, errors.join("\n") + "\n").unwrap();
        eprintln!("{status}: {} record(s) → {}", errors.len(), path.display());
    }
}

/// A live Claude Code whose model API answers 429 (no retries): the daemon reads the refusal
/// from the transcript at its next probe, logs one `notice-raised` line (kind rate-limit,
/// status 429) and puts the notice on the board (`list --json`, `GET /fleet/v1/notices`);
/// later probes of the same refusal raise none, and a turn answered afterwards clears it.
#[test]
fn a_claude_peer_refused_by_its_api_raises_one_notice() {
    use common::anthropic::last_user_text;
    let (env, api) = crate::claude::world(&[
        ("IAPEER_TICK_SECS", "1"),
        ("IAPEER_SUPERVISE_LOG_VERBOSE", "1"),
    ]);
    env.launch_env(
        "cb",
        "claude",
        &format!(
            "ANTHROPIC_BASE_URL={}\nANTHROPIC_API_KEY=sk-ant-standin-key\nIS_SANDBOX=1\n\
             CLAUDE_CODE_MAX_RETRIES=0\n",
            api.url()
        ),
    );
    // Refused once: Claude Code sends the refused message again with the next one (two user
    // messages in a row are merged), which must then be answered.
    let refused = std::sync::atomic::AtomicBool::new(false);
    api.script(move |req| {
        // The conversation's own request (it offers tools; side requests do not).
        let main = req["tools"].as_array().is_some_and(|t| !t.is_empty());
        if main
            && last_user_text(req).contains("LIMITED")
            && !refused.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            Reply::Error(429)
        } else {
            Reply::Text("ok".into())
        }
    });
    crate::busy::wake_claude(&env);
    assert_eq!(env.count_events("lifecycle", "notice-raised", &[]), 0);
    env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "LIMITED please",
    ]);
    let raised = [
        ("identity", "claude-cb"),
        ("kind", "rate-limit"),
        ("error", "rate_limit"),
        ("status", "429"),
    ];
    env.wait_until("the notice", Duration::from_secs(60), |e| {
        e.has_event("lifecycle", "notice-raised", &raised)
    });
    env.watch_ticks(3, "a second notice", |e| {
        e.count_events("lifecycle", "notice-raised", &[]) > 1
    });
    let id = env.events("lifecycle", "notice-raised")[0]["id"].clone();
    let on_row = |e: &TestEnv| -> Vec<serde_json::Value> {
        let rows = e.list();
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["personality"] == "cb");
        row.and_then(|r| r["runtimes"][0]["notices"].as_array().cloned())
            .unwrap_or_default()
    };
    let row = on_row(&env);
    assert_eq!(row.len(), 1, "{row:?}");
    assert_eq!(row[0]["id"], id.as_str());
    assert_eq!(row[0]["kind"], "rate-limit");
    assert_eq!(row[0]["errorType"], "rate_limit");
    assert_eq!(row[0]["count"], 1);
    let board = crate::fleet::get(&env, "/fleet/v1/notices").json();
    assert_eq!(board["notices"].as_array().unwrap().len(), 1, "{board}");
    assert_eq!(board["notices"][0]["identity"], "claude-cb");

    env.ok(&["send", "cb", "--from", "echo-ea", "--message", "fine now"]);
    env.wait_until("the turn after the refusal", Duration::from_secs(60), |e| {
        api.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains("fine now"))
            && !e.screen("claude-cb").contains("esc to interrupt")
    });
    env.watch_ticks(3, "a notice for an answered turn", |e| {
        e.count_events("lifecycle", "notice-raised", &[]) > 1
    });
    let cleared = [("id", id.as_str()), ("reason", "answered")];
    assert!(
        env.has_event("lifecycle", "notice-cleared", &cleared),
        "{}",
        env.log("lifecycle")
    );
    assert!(on_row(&env).is_empty());
}

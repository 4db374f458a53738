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

/// Wait until one `notice-raised` line with `fields` is logged (60 s at most) and no second
/// notice follows in the next 3 ticks; its id.
pub(crate) fn wait_one_notice(env: &TestEnv, fields: &[(&str, &str)]) -> String {
    env.wait_until("the notice", Duration::from_secs(60), |e| {
        e.has_event("lifecycle", "notice-raised", fields)
    });
    env.watch_ticks(3, "a second notice", |e| {
        e.count_events("lifecycle", "notice-raised", &[]) > 1
    });
    env.events("lifecycle", "notice-raised")[0]["id"].clone()
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
    env.send_from("cb", "echo-ea", "LIMITED please");
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

    env.send_from("cb", "echo-ea", "fine now");
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

/// Where the Codex recordings go (the version scripts/setup-agents.sh installs).
const CODEX_FIXTURES: &str = "tests/fixtures/codex-0.171.0";

use common::openai::Reply as OReply;

/// Every line of every rollout file under `dir`, recursively, as written.
fn rollout_lines(dir: &std::path::Path) -> Vec<String> {
    crate::busy::jsonl_lines(dir)
}

/// The rollout records a turn's outcome is read from: `turn_context` (the model) and the
/// `event_msg`s `task_started`, `token_count` (rate limits), `task_complete` (the outcome,
/// with `error` when refused) and `turn_aborted`.
fn is_outcome_record(line: &str) -> bool {
    let Ok(r) = serde_json::from_str::<serde_json::Value>(line) else {
        return false;
    };
    r["type"] == "turn_context"
        || (r["type"] == "event_msg"
            && matches!(
                r["payload"]["type"].as_str(),
                Some("task_started" | "token_count" | "task_complete" | "turn_aborted")
            ))
}

/// Wake codex-cx with a message its stand-in answers `awake`, and wait for that turn's end.
fn wake_codex(env: &TestEnv) {
    env.send_from("cx", "echo-ea", "echo: wake");
    env.wait_until(
        "the wake's turn",
        Duration::from_secs(90),
        codex_idle_with("awake"),
    );
}

/// A wait condition: the codex-cx screen shows `needle` and no turn is running.
fn codex_idle_with(needle: &'static str) -> impl Fn(&TestEnv) -> bool {
    move |e: &TestEnv| {
        let screen = e.screen("codex-cx");
        screen.contains(needle) && !screen.to_lowercase().contains("esc to interrupt")
    }
}

/// Codex's rate-limit headers (`x-codex-primary-*`, `x-codex-secondary-*`): the 5-hour window
/// full (resetting at `reset`), the weekly one at 40 %; with `reached`, also
/// `x-codex-rate-limit-reached-type: rate_limit_reached`.
pub(crate) fn codex_limit_headers(reset: i64, reached: bool) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = [
        ("x-codex-primary-used-percent", "100".to_string()),
        ("x-codex-primary-window-minutes", "300".to_string()),
        ("x-codex-primary-reset-at", reset.to_string()),
        ("x-codex-secondary-used-percent", "40".to_string()),
        ("x-codex-secondary-window-minutes", "10080".to_string()),
        (
            "x-codex-secondary-reset-at",
            (reset + 5 * 86_400).to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if reached {
        h.push((
            "x-codex-rate-limit-reached-type".into(),
            "rate_limit_reached".into(),
        ));
    }
    h
}

/// The 429 the ChatGPT backend sends when a plan's usage limit is reached (the body Codex
/// reads as `usage_limit_reached`), with `headers`.
pub(crate) fn codex_usage_limit(reset: i64, headers: Vec<(String, String)>) -> OReply {
    OReply::Error {
        status: 429,
        body: serde_json::json!({"error": {"type": "usage_limit_reached",
            "message": "stand-in: usage limit reached", "plan_type": "plus", "resets_at": reset}}),
        headers,
    }
}

/// Run `codex exec hi` (no retries: `request_max_retries = 0`, `stream_max_retries = 0` in
/// the provider's block) against a stand-in that answers every model request as the case
/// says, and keep the turn's outcome records ([`is_outcome_record`]) as
/// `api-error-<case>.jsonl` (`api-answered.jsonl` for the answered turn).
#[test]
#[ignore = "re-records fixtures from the real Codex CLI; run by name with --ignored"]
fn record_codex_api_error_records() {
    use common::openai::OpenAiStandIn;
    use serde_json::json;
    let bin = crate::codex::codex_bin();
    let reset = jiff::Timestamp::now().as_second() + 3 * 3600;
    let cases: Vec<(&str, OReply)> = vec![
        // A plan's usage limit, with the rate-limit headers and the reached-type flag.
        (
            "usage-limit",
            codex_usage_limit(reset, codex_limit_headers(reset, true)),
        ),
        // The same without `x-codex-rate-limit-reached-type`.
        (
            "usage-limit-unflagged",
            codex_usage_limit(reset, codex_limit_headers(reset, false)),
        ),
        // The same without any rate-limit header.
        ("usage-limit-bare", codex_usage_limit(reset, Vec::new())),
        // A plain API rate limit (not retried here; Codex retries it by default).
        (
            "rate-limit",
            OReply::error(
                429,
                json!({"error": {"message": "stand-in: Rate limit reached for requests",
                    "type": "requests", "code": "rate_limit_exceeded"}}),
            ),
        ),
        (
            "overloaded",
            OReply::error(
                503,
                json!({"error": {"message": "stand-in: overloaded", "code": "server_is_overloaded"}}),
            ),
        ),
        (
            "server-error",
            OReply::error(
                500,
                json!({"error": {"message": "stand-in: internal error", "type": "server_error"}}),
            ),
        ),
        (
            "auth",
            OReply::error(
                401,
                json!({"error": {"message": "stand-in: Incorrect API key provided",
                    "type": "invalid_request_error", "code": "invalid_api_key"}}),
            ),
        ),
        // An answered turn whose response carries the headers, reached-type flag included.
        (
            "answered",
            OReply::Headed(
                codex_limit_headers(reset, true),
                Box::new(OReply::Text("ok".into())),
            ),
        ),
    ];
    for (name, reply) in cases {
        let env = TestEnv::new();
        let api = OpenAiStandIn::start();
        api.script(move |_| reply.clone());
        let cwd = env.dir.path().join("w");
        std::fs::create_dir_all(&cwd).unwrap();
        api.run_codex_exec(
            &bin,
            &env.home,
            &cwd,
            "hi",
            "request_max_retries = 0\nstream_max_retries = 0",
        );
        let kept: Vec<String> = rollout_lines(&env.home.join(".codex/sessions"))
            .into_iter()
            .filter(|l| is_outcome_record(l))
            .collect();
        assert!(
            kept.iter().any(|l| l.contains("\"task_complete\"")),
            "{name}: no task_complete record"
        );
        let file = if name == "answered" {
            "api-answered.jsonl".to_string()
        } else {
            format!("api-error-{name}.jsonl")
        };
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(CODEX_FIXTURES)
            .join(file);
        std::fs::write(&path, kept.join("\n") + "\n").unwrap();
        eprintln!(
            "{name}: {} request(s), {} record(s) → {}",
            api.recorded().len(),
            kept.len(),
            path.display()
        );
    }
}

/// A live Codex whose model API refuses one turn with a plain 429 (a rate limit of the API,
/// every attempt: Codex retries it with its default settings, then gives the turn up): the
/// daemon reads the refusal from the rollout's `task_complete` at its next probe and logs one
/// `notice-raised` line (kind rate-limit, Codex's word `response_too_many_failed_attempts`,
/// status 429, the turn's model); later probes of the same refusal, and a turn answered
/// afterwards, raise none. (A refusal carrying Codex's rate-limit headers at 100 % makes the
/// TUI open its "Approaching rate limits" model-switch prompt:
/// `a_codex_usage_limit_menu_is_answered_keep_current_model_before_the_next_delivery`.)
#[test]
fn a_codex_peer_refused_by_its_api_raises_one_notice() {
    use common::openai::{input_text, last_input_text};
    let (env, api) = crate::codex::world_with(&[
        ("IAPEER_TICK_SECS", "1"),
        ("IAPEER_SUPERVISE_LOG_VERBOSE", "1"),
    ]);
    api.script(move |req| {
        let last = last_input_text(req);
        if last.contains("LIMITED") {
            OReply::error(
                429,
                serde_json::json!({"error": {"message": "stand-in: Rate limit reached for requests",
                    "type": "requests", "code": "rate_limit_exceeded"}}),
            )
        } else if last.contains("fine now") {
            OReply::Text("answered again".into())
        } else {
            OReply::Text("awake".into())
        }
    });
    let turn_shown = codex_idle_with;
    // Wake it with an answered turn first: an answer is no notice.
    wake_codex(&env);
    env.watch_ticks(2, "a notice for an answered turn", |e| {
        e.count_events("lifecycle", "notice-raised", &[]) > 0
    });
    env.send_from("cx", "echo-ea", "LIMITED please");
    let raised = [
        ("identity", "codex-cx"),
        ("kind", "rate-limit"),
        ("error", "response_too_many_failed_attempts"),
        ("status", "429"),
        ("model", "gpt-5.1"),
    ];
    env.wait_until("the notice", Duration::from_secs(120), |e| {
        e.has_event("lifecycle", "notice-raised", &raised)
    });
    let attempts = api
        .recorded()
        .iter()
        .filter(|r| last_input_text(r).contains("LIMITED"))
        .count();
    eprintln!("the refused turn: {attempts} request(s)");
    env.watch_ticks(3, "a second notice", |e| {
        e.count_events("lifecycle", "notice-raised", &[]) > 1
    });
    env.wait_until(
        "the refused turn's end on screen",
        Duration::from_secs(60),
        turn_shown("429"),
    );
    env.send_from("cx", "echo-ea", "fine now");
    env.wait_until("the turn after the refusal", Duration::from_secs(90), |e| {
        api.recorded()
            .iter()
            .any(|r| input_text(r).contains("fine now"))
            && turn_shown("answered again")(e)
    });
    env.watch_ticks(3, "a notice for an answered turn", |e| {
        e.count_events("lifecycle", "notice-raised", &[]) > 1
    });
}

/// A usage-limit refusal carrying Codex's rate-limit headers at 100 % makes the real Codex
/// 0.171.0 open its "Approaching rate limits" menu, whose first option switches the model. The
/// next delivery answers the menu "Keep current model" before it pastes: the message is
/// delivered, reaches the model, and the peer still asks for its own model (never the one the
/// menu offered). The notice carries the window's reset time.
#[test]
fn a_codex_usage_limit_menu_is_answered_keep_current_model_before_the_next_delivery() {
    use common::openai::{input_text, last_input_text};
    let (env, api) = crate::codex::world_with(&[
        ("IAPEER_TICK_SECS", "1"),
        ("IAPEER_SUPERVISE_LOG_VERBOSE", "1"),
    ]);
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 3600;
    api.script(move |req| {
        let last = last_input_text(req);
        if last.contains("LIMITED") {
            codex_usage_limit(reset, codex_limit_headers(reset, true))
        } else if last.contains("after the menu") {
            OReply::Text("answered after the menu".into())
        } else {
            OReply::Text("awake".into())
        }
    });
    let idle_with = codex_idle_with;
    wake_codex(&env);
    env.send_from("cx", "echo-ea", "LIMITED please");
    env.wait_until(
        "the model-switch menu",
        Duration::from_secs(90),
        idle_with("Keep current model"),
    );
    env.wait_until("the notice", Duration::from_secs(30), |e| {
        e.has_event(
            "lifecycle",
            "notice-raised",
            &[("identity", "codex-cx"), ("kind", "rate-limit")],
        )
    });
    let line = &env.events("lifecycle", "notice-raised")[0];
    assert!(line.contains_key("resets_at"), "{line:?}");

    let out = env.run(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "after the menu",
        "--json",
    ]);
    assert!(out.status.success(), "{}", common::describe(&out));
    env.wait_until(
        "the turn after the menu",
        Duration::from_secs(90),
        idle_with("answered after the menu"),
    );
    let asked: Vec<serde_json::Value> = api
        .recorded()
        .into_iter()
        .filter(|r| input_text(r).contains("after the menu"))
        .collect();
    assert!(!asked.is_empty());
    for r in &asked {
        assert_eq!(
            r["model"], "gpt-5.1",
            "the menu switched the model: {}",
            r["model"]
        );
    }
    let screen = env.screen("codex-cx");
    assert!(!screen.contains("Switch to gpt-6-luna"), "{screen}");
    assert!(
        screen.contains("gpt-5.1") && !screen.to_lowercase().contains("gpt-6-luna"),
        "{screen}"
    );
}

//! Issue 32 item 4: a permission prompt of an agent in the default bypass mode. Claude Code
//! 2.1.332 run with `--dangerously-skip-permissions` still asks before a command a project
//! `permissions.ask` rule names, and when a `PreToolUse` hook answers `ask`.

use crate::common;

use common::anthropic::{last_user_text, AnthropicStandIn, Reply};
use common::TestEnv;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The project settings of the peer `cb`: Bash `rm` asks, and a `PreToolUse` hook answers
/// `ask` for any command holding `hook-asks`.
fn ask_settings(env: &TestEnv) {
    let dir = env.peer_dir("cb").join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    let hook = "grep -q hook-asks && echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"the project hook wants a human\"}}' || true";
    let settings = json!({
        "permissions": {"ask": ["Bash(rm:*)", "Write", "Edit", "mcp__iapeer__send_to_peer"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": hook}]}]},
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
}

/// A message `run <command>` makes the model call Bash with `<command>`, once per message;
/// each tool result the model gets is kept in `results`, and the turn then ends.
fn script_run(api: &AnthropicStandIn, results: Arc<Mutex<Vec<String>>>) {
    crate::approvals::script_tool_per_message(api, "run ", results, |command| {
        if let Some(path) = command.strip_prefix("WRITE ") {
            return Reply::ToolUse(
                "Write".into(),
                json!({"file_path": path, "content": "written\n"}),
            );
        }
        if let Some(path) = command.strip_prefix("EDIT ") {
            return Reply::ToolUse(
                "Edit".into(),
                json!({"file_path": path, "old_string": "x", "new_string": "edited"}),
            );
        }
        if command == "MCP" {
            return Reply::ToolUse(
                "mcp__iapeer__send_to_peer".into(),
                json!({"personality": "ea", "message": "hello from the prompt"}),
            );
        }
        Reply::ToolUse(
            "Bash".into(),
            json!({"command": command, "description": "Remove the file"}),
        )
    });
}

fn send_run(env: &TestEnv, command: &str) -> String {
    send(env, &format!("run {command}"))
}

/// What `approve`/`deny` of a prompt on Claude Code's screen says once its keys went in and
/// the prompt closed (issue 27).
const KEYED: &str = "taken: the answer was keyed in and the prompt closed";

/// Send `message` to `cb` from `echo-ea`; the CLI's answer.
fn send(env: &TestEnv, message: &str) -> String {
    env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        message,
        "--timeout",
        "240",
    ])
}

/// Save the pane log as it is now as `<dir>/bypass-<name>.raw`.
fn save(dir: &Path, name: &str, env: &TestEnv) {
    crate::interrupt::save_pane(dir, &format!("bypass-{name}"), env, "claude-cb");
}

/// Wait until `term` is attached to `cb` and has drawn its first frame, the prompt that
/// is open there (its menu, or its `Esc to cancel`). Keys typed then may still come too
/// soon after the prompt's last frame for Claude Code (runtime/claude.rs): wait for a
/// still screen ([`TestEnv::pane_settled`]) before typing where the prompt allows it.
fn wait_attached(env: &TestEnv, term: &crate::attach::Terminal) {
    env.wait_until("attached", Duration::from_secs(30), |env| attached(env) > 0);
    env.wait_until(
        "the attached terminal shows the prompt",
        Duration::from_secs(30),
        |_| {
            let shown = term.screen_at(50, 220);
            shown.contains("1. Yes") || shown.contains("Esc to cancel")
        },
    );
}

/// Terminals attached to `cb`.
fn attached(env: &TestEnv) -> u64 {
    let list = env.control(r#"{"op":"list"}"#);
    list["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["identity"] == "claude-cb"))
        .and_then(|s| s["attached"].as_u64())
        .unwrap_or(0)
}

/// Close the attached terminal and wait until the session says so.
fn detach(env: &TestEnv, term: crate::attach::Terminal) {
    drop(term);
    env.wait_until("detached", Duration::from_secs(30), |env| {
        attached(env) == 0
    });
}

/// A terminal attached to `cb` at the session's own size (220×50), so the pane log replays
/// at one size from start to end.
fn attach_at_session_size(env: &TestEnv) -> crate::attach::Terminal {
    crate::attach::Terminal::spawn_sized(env.cmd(&["attach", "cb"]), 50, 220)
}

/// Wait until a request of `claude-cb` whose summary ends with `/made/<name>` is pending;
/// the request.
fn pending_for(env: &TestEnv, name: &str) -> Value {
    let mut found = Value::Null;
    let end = format!("/made/{name}");
    env.wait_until(
        &format!("an approval request for {name}"),
        Duration::from_secs(90),
        |env| {
            found = crate::approvals::approvals(env)
                .into_iter()
                .find(|a| a["summary"].as_str().is_some_and(|s| s.ends_with(&end)))
                .unwrap_or(Value::Null);
            !found.is_null()
        },
    );
    found
}

/// Wait until no request is pending and no approval notice is up.
fn none_pending(env: &TestEnv, what: &str) {
    env.wait_until(what, Duration::from_secs(60), |env| {
        crate::approvals::approvals(env).is_empty() && !env.ok(&["list"]).contains("(approval)")
    });
}

/// Issue 32 item 4: with `--dangerously-skip-permissions` Claude Code 2.1.332 still asks
/// before a command a project `permissions.ask` rule names, or a `PreToolUse` hook answers
/// `ask` for. Each such prompt is an approval request: listed by `approvals`, pushed to a
/// long poll, a notice (`list` shows `(approval)`); `approve` runs the command, `deny`
/// refuses it, and the prompt answered on the screen by someone attached retires it. A
/// message sent meanwhile is held and says it waits for that approval.
#[test]
fn a_bypass_peer_s_permission_prompt_is_an_approval_request() {
    let (env, api) = crate::claude::world(&[
        ("IAPEER_APPROVAL_TIMEOUT_MS", "180000"),
        ("IAP_HOST_LIVENESS_GRACE_MS", "10000"),
    ]);
    ask_settings(&env);
    let made = env.dir.path().join("made");
    std::fs::create_dir_all(&made).unwrap();
    for f in ["a", "c", "d"] {
        std::fs::write(made.join(f), "x").unwrap();
    }
    let results = Arc::new(Mutex::new(Vec::new()));
    script_run(&api, results.clone());
    let turn_over = |env: &TestEnv| {
        env.wait_until("the turn is over", Duration::from_secs(60), |env| {
            !env.screen("claude-cb").contains("esc to interrupt")
        });
    };

    // The ask rule: a long poll (a human's channel) is answered by the request.
    let port = env.port();
    let auth = env.fleet_auth();
    let poll = std::thread::spawn(move || {
        crate::fleet::request(port, "GET", "/fleet/v1/approvals?wait=120", &[&auth], b"")
    });
    send_run(&env, &format!("rm {}", made.join("a").display()));
    let a = pending_for(&env, "a");
    let id = a["id"].as_str().unwrap().to_string();
    assert_eq!(a["identity"], "claude-cb", "{a}");
    assert_eq!(a["tool"], "Bash", "{a}");
    assert_eq!(a["options"], json!(["Yes", "No"]), "{a}");
    let polled = poll.join().unwrap();
    assert_eq!(polled.status, 200);
    assert_eq!(polled.json()["approvals"][0]["id"], id.as_str());
    assert!(env.has_event(
        "lifecycle",
        "approval-requested",
        &[("id", &id), ("source", "screen")]
    ));
    // `list` shows the peer waiting for it, with the notice that names it.
    let list = env.ok(&["list"]);
    assert!(list.contains("●claude*(approval)"), "{list}");
    assert!(list.contains(&format!("iapeer approve {id}")), "{list}");
    let notices = crate::fleet::get(&env, "/fleet/v1/notices").json();
    assert!(
        notices
            .to_string()
            .contains(&format!("iapeer approve {id}")),
        "{notices}"
    );
    let text = env.ok(&["approvals"]);
    assert!(
        text.contains(&id) && text.contains("claude-cb") && text.contains("[1. Yes | 2. No]"),
        "{text}"
    );
    // Approving with the option that refuses is refused: that is a deny.
    let (_, err) = env.fails(&["approve", &id, "No"], 1);
    assert!(err.contains(&format!("iapeer deny {id}")), "{err}");
    // A message meanwhile is held, and says what for (not a draft).
    let out = send(&env, "meanwhile");
    assert!(
        out.contains("— approval") && out.contains("waiting for an approval: Bash: rm "),
        "{out}"
    );
    assert!(out.contains(&format!("iapeer approve {id}")), "{out}");
    assert!(!out.contains("draft"), "{out}");
    assert!(made.join("a").exists(), "the command ran unapproved");
    // The reply waits for the session's word (issue 27): the keys went in and the prompt
    // closed.
    let out = env.ok(&["approve", &id]);
    assert_eq!(out.trim(), format!("approved {id} (claude-cb): {KEYED}"));
    env.wait_until("the approved command ran", Duration::from_secs(60), |_| {
        !made.join("a").exists()
    });
    none_pending(&env, "the approved request is gone");
    api.wait_user_text(&env, Duration::from_secs(90), "<msg>meanwhile</msg>");
    turn_over(&env);

    // A hook that asks; deny: the command does not run.
    send_run(&env, &format!("touch {}", made.join("hook-asks").display()));
    let a = pending_for(&env, "hook-asks");
    let id = a["id"].as_str().unwrap().to_string();
    let out = env.ok(&["deny", &id]);
    assert_eq!(out.trim(), format!("denied {id} (claude-cb): {KEYED}"));
    env.wait_until("the denied prompt closed", Duration::from_secs(60), |env| {
        env.screen("claude-cb").contains("Interrupted")
    });
    none_pending(&env, "the denied request is gone");
    env.assert_denied(&id, &made.join("hook-asks"));
    turn_over(&env);

    // Answered on the screen by someone attached: the request is retired.
    send_run(&env, &format!("rm {}", made.join("c").display()));
    let a = pending_for(&env, "c");
    let id = a["id"].as_str().unwrap().to_string();
    let mut term = attach_at_session_size(&env);
    wait_attached(&env, &term);
    env.pane_settled("claude-cb");
    term.type_bytes(b"\r");
    env.wait_until("the command ran", Duration::from_secs(60), |_| {
        !made.join("c").exists()
    });
    none_pending(&env, "the request answered on the screen is gone");
    assert!(env.has_event("lifecycle", "approval-closed", &[("id", &id)]));
    detach(&env, term);
    turn_over(&env);

    // Approved the moment it is listed: Claude Code drops a key that comes within 700 ms
    // of the prompt showing, so the answer waits for the prompt to settle, and lands.
    send_run(&env, &format!("rm {}", made.join("d").display()));
    let a = pending_for(&env, "d");
    let id = a["id"].as_str().unwrap().to_string();
    let out = env.ok(&["approve", &id]);
    assert_eq!(out.trim(), format!("approved {id} (claude-cb): {KEYED}"));
    env.wait_until(
        "the command approved at once ran",
        Duration::from_secs(30),
        |_| !made.join("d").exists(),
    );
    none_pending(&env, "the request approved at once is gone");
}

/// A bypass peer parked on a prompt is mid-turn: never slept for idleness, however long it
/// waits. A prompt nobody answers is denied when `IAPEER_APPROVAL_TIMEOUT_MS` passes: `No`
/// is keyed in, the command does not run, and the request is gone.
#[test]
fn a_bypass_peer_s_unanswered_prompt_keeps_it_awake_then_is_denied_at_its_timeout() {
    let (env, api) = crate::claude::world(&[
        ("IAPEER_APPROVAL_TIMEOUT_MS", "12000"),
        ("IAP_HOST_LIVENESS_GRACE_MS", "10000"),
        ("IAPEER_IDLE_SECS", "2"),
        ("IAPEER_TICK_SECS", "1"),
        ("IAPEER_SUPERVISE_LOG_VERBOSE", "1"),
    ]);
    ask_settings(&env);
    let made = env.dir.path().join("made");
    std::fs::create_dir_all(&made).unwrap();
    std::fs::write(made.join("e"), "x").unwrap();
    script_run(&api, Arc::new(Mutex::new(Vec::new())));
    send_run(&env, &format!("rm {}", made.join("e").display()));
    let a = pending_for(&env, "e");
    let id = a["id"].as_str().unwrap().to_string();
    env.watch_ticks(4, "the peer parked on a prompt was slept", |env| {
        env.status_of("cb", "claude") != "live"
    });
    env.wait_until("the prompt timed out", Duration::from_secs(60), |env| {
        env.has_event(
            "lifecycle",
            "approval-denied",
            &[("id", &id), ("by", "timeout")],
        )
    });
    env.wait_until("No was keyed in", Duration::from_secs(60), |env| {
        env.pane("claude-cb").contains("Interrupted")
    });
    assert!(crate::approvals::approvals(&env).is_empty());
    assert!(made.join("e").exists(), "a timed-out command ran");
}

/// Records Claude Code 2.1.332's permission prompts in bypass mode and what keys answer them
/// into `$IAPEER_RECORD_DIR/bypass` (run by name with `--ignored`).
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_claude_bypass_prompts() {
    let out = crate::interrupt::record_dir("bypass");
    let (env, api) = crate::claude::world(&[("IAP_HOST_LIVENESS_GRACE_MS", "10000")]);
    ask_settings(&env);
    let made = env.dir.path().join("made");
    std::fs::create_dir_all(&made).unwrap();
    for f in ["a", "b", "c", "d"] {
        std::fs::write(made.join(f), "x").unwrap();
    }
    let results = Arc::new(Mutex::new(Vec::new()));
    script_run(&api, results.clone());
    let prompt_open = |env: &TestEnv| env.screen("claude-cb").contains("Do you want to proceed?");

    // The ask rule; Enter on the first option.
    let rm_a = format!("rm {}", made.join("a").display());
    eprintln!("send: {}", send_run(&env, &rm_a));
    env.wait_until("the prompt", Duration::from_secs(90), prompt_open);
    env.pane_settled("claude-cb");
    save(&out, "ask-rule-prompt", &env);
    eprintln!("=== ask rule:\n{}", env.screen("claude-cb"));
    let mut term = attach_at_session_size(&env);
    wait_attached(&env, &term);
    env.pane_settled("claude-cb");
    term.type_bytes(b"\r");
    env.wait_until("the tool ran", Duration::from_secs(60), |_| {
        !made.join("a").exists()
    });
    env.pane_settled("claude-cb");
    save(&out, "ask-rule-approved", &env);
    eprintln!("=== approved:\n{}", env.screen("claude-cb"));
    eprintln!("results: {:?}", results.lock().unwrap());
    detach(&env, term);

    // A hook that answers ask; Down to `No`, then Enter.
    let hooked = format!("touch {}", made.join("hook-asks").display());
    eprintln!("send: {}", send_run(&env, &hooked));
    env.wait_until("the prompt", Duration::from_secs(90), prompt_open);
    env.pane_settled("claude-cb");
    save(&out, "hook-ask-prompt", &env);
    eprintln!("=== hook ask:\n{}", env.screen("claude-cb"));
    let mut term = attach_at_session_size(&env);
    wait_attached(&env, &term);
    env.pane_settled("claude-cb");
    term.type_bytes(b"\x1b[B");
    env.pane_settled("claude-cb");
    eprintln!("=== after Down:\n{}", env.screen("claude-cb"));
    term.type_bytes(b"\r");
    env.pane_settled("claude-cb");
    save(&out, "hook-ask-denied", &env);
    eprintln!("=== denied:\n{}", env.screen("claude-cb"));
    eprintln!("exists: {}", made.join("hook-asks").exists());
    eprintln!("results: {:?}", results.lock().unwrap());
    let n = api.main_requests().len();
    eprintln!(
        "main requests: {n}; last user: {}",
        api.main_requests()
            .last()
            .map(last_user_text)
            .unwrap_or_default()
    );
    detach(&env, term);

    // Esc on the ask rule.
    let rm_b = format!("rm {}", made.join("b").display());
    eprintln!("send: {}", send_run(&env, &rm_b));
    env.wait_until("the prompt", Duration::from_secs(90), prompt_open);
    let mut term = attach_at_session_size(&env);
    wait_attached(&env, &term);
    env.pane_settled("claude-cb");
    term.type_bytes(b"\x1b");
    env.pane_settled("claude-cb");
    save(&out, "ask-rule-esc", &env);
    eprintln!("=== esc:\n{}", env.screen("claude-cb"));
    eprintln!("exists: {}", made.join("b").exists());
    eprintln!("main requests: {}", api.main_requests().len());
}

/// Records the prompts of other tools an `ask` rule names (Write, Edit, an MCP tool) into
/// `$IAPEER_RECORD_DIR/bypass-tools` (run by name with `--ignored`), each answered by Esc.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_claude_bypass_tool_prompts() {
    let out = crate::interrupt::record_dir("bypass-tools");
    let (env, api) = crate::claude::world(&[("IAP_HOST_LIVENESS_GRACE_MS", "10000")]);
    ask_settings(&env);
    let made = env.dir.path().join("made");
    std::fs::create_dir_all(&made).unwrap();
    std::fs::write(made.join("e"), "x").unwrap();
    let results = Arc::new(Mutex::new(Vec::new()));
    script_run(&api, results.clone());
    let cases = [
        ("write", format!("WRITE {}", made.join("w").display())),
        ("edit", format!("EDIT {}", made.join("e").display())),
        ("mcp", "MCP".to_string()),
    ];
    let mut last_shown = String::new();
    for (name, command) in cases {
        eprintln!("send: {}", send_run(&env, &command));
        env.wait_until("a prompt", Duration::from_secs(90), |env| {
            let s = env.screen("claude-cb");
            s.contains("Esc to cancel") && s != last_shown
        });
        env.pane_settled("claude-cb");
        save(&out, &format!("{name}-prompt"), &env);
        last_shown = env.screen("claude-cb");
        eprintln!("=== {name}:\n{last_shown}");
        let mut term = attach_at_session_size(&env);
        wait_attached(&env, &term);
        // Time is the thing tested, as recorded: the MCP tool's prompt keeps drawing while a
        // terminal is attached, so no still second comes to wait for, and Claude Code takes
        // keys that come too soon after a prompt's frame for stray typing (runtime/claude.rs).
        std::thread::sleep(Duration::from_secs(1));
        term.type_bytes(b"\x1b");
        env.wait_until("closed", Duration::from_secs(30), |env| {
            !env.screen("claude-cb").contains("Esc to cancel")
        });
        detach(&env, term);
        last_shown = env.screen("claude-cb");
    }
}

//! End to end with the real Claude Code CLI (spec 12 layer 4): Claude Code runs in an iapeer
//! session exactly as in production; its model requests go to a loopback stand-in for the
//! Anthropic API (the one mock: the cloud API cannot run here). `scripts/setup-agents.sh`
//! installs the CLI and `scripts/test.sh` exports `IAPEER_TEST_CLAUDE_BIN`.

use crate::common;

use common::anthropic::{has_tool_result, last_user_text, AnthropicStandIn, Reply};
use common::TestEnv;
use serde_json::json;
use std::time::Duration;

fn claude_bin() -> String {
    std::env::var("IAPEER_TEST_CLAUDE_BIN").unwrap_or_else(|_| {
        panic!("IAPEER_TEST_CLAUDE_BIN is not set: run scripts/test.sh (it installs Claude Code with scripts/setup-agents.sh)")
    })
}

/// A world with a claude peer `cb` and an echo peer `ea`, the stand-in, and a daemon.
pub(crate) fn world(extra_daemon_env: &[(&str, &str)]) -> (TestEnv, AnthropicStandIn) {
    world_with(extra_daemon_env, true)
}

/// [`world`], choosing whether the peer's launch.env sets `IS_SANDBOX=1`.
fn world_with(extra_daemon_env: &[(&str, &str)], sandbox: bool) -> (TestEnv, AnthropicStandIn) {
    let mut env = TestEnv::new();
    for (k, v) in extra_daemon_env {
        env.set(k, v);
    }
    let api = AnthropicStandIn::start();
    add_peer(&mut env, "cb", &api, sandbox);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    (env, api)
}

/// Make a claude peer `name` (before the daemon starts) whose model API is `api`, with
/// `IS_SANDBOX=1` in its launch.env when `sandbox`; the user has run Claude Code once.
pub(crate) fn add_peer(env: &mut TestEnv, name: &str, api: &AnthropicStandIn, sandbox: bool) {
    env.set("IAPEER_CLAUDE_BIN", &claude_bin());
    // What any user who has run Claude Code once has; every dialog is left to the adapter.
    std::fs::write(
        env.home.join(".claude.json"),
        "{\"hasCompletedOnboarding\": true}",
    )
    .unwrap();
    env.ok(&["create", name, "--runtime", "claude"]);
    env.launch_env(
        name,
        "claude",
        &format!(
            "ANTHROPIC_BASE_URL={}\nANTHROPIC_API_KEY=sk-ant-standin-key\n{}",
            api.url(),
            if sandbox { "IS_SANDBOX=1\n" } else { "" }
        ),
    );
}

/// Reply to an envelope from `ea` (unless it is an echo) with a send_to_peer call; finish
/// the turn after the tool result.
fn converse(api: &AnthropicStandIn, reply: &'static str) {
    api.script(move |req| {
        let text = last_user_text(req);
        // The echo may come folded into the tool turn (it arrives while the send_to_peer
        // call is still running: tests/busy.rs), so it is looked for first.
        if text.contains("<msg>echo:") {
            Reply::Text("echo seen".into())
        } else if has_tool_result(req) {
            Reply::Text("sent".into())
        } else if text.contains("<iap ") {
            Reply::ToolUse(
                "mcp__iapeer__send_to_peer".into(),
                json!({"personality": "ea", "message": reply, "topic": "t1"}),
            )
        } else {
            Reply::Text("ok".into())
        }
    });
}

#[test]
fn claude_peer_wakes_answers_dialogs_sees_its_prompt_and_replies_through_mcp() {
    let (env, api) = world(&[]);
    converse(&api, "hi from claude");
    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "hello claude",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cb (claude), woke",
        "{}",
        env.diagnostics()
    );

    // The model request carried this peer's system prompt and the agent-form envelope. (The
    // wake is answered once Claude took the message; its request follows.)
    env.wait_until(
        "the model gets the message",
        Duration::from_secs(60),
        |_| api.has_main_request_with("hello claude"),
    );
    let main = api.main_requests();
    let first = main
        .iter()
        .find(|r| last_user_text(r).contains("hello claude"))
        .unwrap_or_else(|| panic!("no model request with the message\n{}", env.diagnostics()));
    let system = common::anthropic::flatten(&first["system"]);
    assert!(system.contains("personality: \"cb\""), "{system}");
    assert!(system.contains("## Known peers"), "{system}");
    assert!(system.contains("- ea\n  runtime: echo"), "{system}");
    let user = last_user_text(first);
    assert!(
        user.contains("<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\""),
        "{user}"
    );
    assert!(user.contains("<msg>hello claude</msg>"), "{user}");
    let tools: Vec<String> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    assert!(
        tools.iter().any(|t| t == "mcp__iapeer__send_to_peer"),
        "tools: {tools:?}\n{}",
        env.diagnostics()
    );

    // Claude's tool call went through the daemon to the echo peer, as cb.
    env.wait_mcp_delivery("claude-cb", "ea", Duration::from_secs(60));
    assert!(
        env.pane("echo-ea").contains("from cb: hi from claude"),
        "{}",
        env.diagnostics()
    );
    let d = env.events("delivery", "delivery");
    let woke = d
        .iter()
        .find(|e| e["to"] == "cb" && e["caller"] == "echo-ea")
        .expect("first delivery");
    assert_eq!(woke["woke"], "true");
    // Every boot dialog was answered by label (lifecycle shows the boot reached ready).
    assert!(!env.events("lifecycle", "ready").is_empty());

    // Scenario 2: the echo's answer goes to the now-live claude peer: delivered, not woken,
    // confirmed from the transcript.
    env.wait_until("ea's echo reaches cb", Duration::from_secs(60), |e| {
        e.events("delivery", "delivery").iter().any(|d| {
            d["caller"] == "echo-ea" && d["to"] == "cb" && d["ok"] == "true" && d["woke"] == "false"
        })
    });
    // That echo starts a turn; a message sent during it would be queued by Claude (answered
    // `queued`, tests/busy.rs), so this one waits for the turn to end: the model's answer to
    // the echo is on the screen, and the screen no longer shows a turn in progress (the
    // request alone is not enough: under load the screen shows the turn after it).
    env.wait_until(
        "claude's turn on the echo ends",
        Duration::from_secs(60),
        |e| {
            let s = e.screen("claude-cb");
            s.contains("echo seen") && !s.to_lowercase().contains("esc to interrupt")
        },
    );
    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "echo: second message",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cb (claude)",
        "{}",
        env.diagnostics()
    );
}

/// The tool names a model request offers.
fn tool_names(req: &serde_json::Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect()
}

/// Issue 31 item 1: the daemon answers Claude Code's `tools/list` a second late (the test hook
/// `slow-tools-list`, as a loaded host or a busy daemon can). The wake's first turn still
/// offers `send_to_peer`: no Enter goes before Claude Code can have the listing, whose answer
/// is what counts, not its request (Claude Code 2.1.332 itself holds nothing back:
/// `tests/fixtures/claude-2.1.332/mcp-first-turn/README.md`).
#[test]
fn a_wake_whose_tool_listing_is_answered_late_still_offers_send_to_peer_in_its_first_turn() {
    let (env, api) = world(&[("IAPEER_TEST_HOOK", "slow-tools-list:1000")]);
    let message = "hello from a slow listing";
    let first = env.wake_and_first_request("cb", "claude", message, || {
        api.main_requests()
            .into_iter()
            .find(|r| last_user_text(r).contains(message))
    });
    let tools = tool_names(&first);
    assert!(
        tools.iter().any(|t| t == "mcp__iapeer__send_to_peer"),
        "the wake's first turn went to the model without send_to_peer; tools: {tools:?}\n{}",
        env.diagnostics()
    );
}

/// The model requests whose last user turn mentions `needle`.
fn requests_with(api: &AnthropicStandIn, needle: &str) -> Vec<serde_json::Value> {
    api.main_requests()
        .into_iter()
        .filter(|r| last_user_text(r).contains(needle))
        .collect()
}

fn wait_asleep(env: &TestEnv) {
    env.wait_until("claude-cb is put to sleep", Duration::from_secs(60), |e| {
        e.events("lifecycle", "supervise")
            .iter()
            .filter(|s| s["identity"] == "claude-cb" && s["action"] == "reaped-idle")
            .count()
            > e.events("lifecycle", "wake")
                .iter()
                .filter(|w| w["identity"] == "claude-cb")
                .count()
                - 1
            && e.status_of("cb", "claude") == "asleep"
    });
}

#[test]
fn idle_sleep_then_topic_resume_with_continue_and_a_new_topic_starts_fresh() {
    let (env, api) = world(&[("IAPEER_IDLE_SECS", "3"), ("IAPEER_TICK_SECS", "1")]);
    api.script(|_| Reply::Text("noted".into()));
    env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "remember the number 42",
        "--topic",
        "t1",
    ]);
    wait_asleep(&env);
    assert!(env.marker("claude-cb", ".idle-reaped").exists());

    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "what was the number?",
        "--topic",
        "t1",
    ]);
    assert_eq!(out.trim(), "delivered to cb (claude), woke");
    let wakes = env.events("lifecycle", "wake");
    let last = wakes.last().unwrap();
    assert_eq!(
        (last["mode"].as_str(), last["cause"].as_str()),
        ("resume", "topic-match"),
        "{wakes:?}"
    );
    // --resume <the recorded id>: the model sees the earlier turn in the same conversation.
    env.wait_until(
        "the resumed request reaches the model",
        Duration::from_secs(30),
        |_| !requests_with(&api, "what was the number?").is_empty(),
    );
    let resumed = &requests_with(&api, "what was the number?")[0];
    let history = common::anthropic::flatten(&resumed["messages"]);
    assert!(
        history.contains("remember the number 42"),
        "the resumed conversation lacks the first turn: {history}"
    );

    wait_asleep(&env);
    env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "unrelated work",
        "--topic",
        "t9",
    ]);
    let last = env.events("lifecycle", "wake").last().cloned().unwrap();
    assert_eq!(
        (last["mode"].as_str(), last["cause"].as_str()),
        ("fresh", "new-topic")
    );
    env.wait_until(
        "the fresh request reaches the model",
        Duration::from_secs(30),
        |_| !requests_with(&api, "unrelated work").is_empty(),
    );
    let fresh = &requests_with(&api, "unrelated work")[0];
    assert!(
        !common::anthropic::flatten(&fresh["messages"]).contains("remember the number 42"),
        "a fresh session must not carry old turns"
    );
}

#[test]
fn compact_interrupt_and_new() {
    let (env, api) = world(&[]);
    api.script(|req| {
        let text = last_user_text(req);
        if text.contains("take your time") {
            Reply::Hold(Duration::from_secs(60), "finally".into())
        } else if text.to_lowercase().contains("summar") {
            Reply::Text("Summary: the user said hello; nothing else happened.".into())
        } else {
            Reply::Text("ok".into())
        }
    });
    // A fresh session with no conversation has nothing to compact: refused with exit 1, as
    // the original tool refused it (its callers read the exit status; issue 30 item 7).
    let out = env.ok(&["new", "cb"]);
    assert!(out.contains("claude-cb restarted fresh"), "{out}");
    let (out, err) = env.fails(&["compact", "cb"], 1);
    assert_eq!(out, "", "{}", env.diagnostics());
    assert!(
        err.starts_with(
            "iapeer compact: claude-cb: nothing-to-compact — its conversation is fresh"
        ),
        "{err}\n{}",
        env.diagnostics()
    );

    // With a turn in the conversation, compact waits for the compact_boundary record; the
    // stand-in answers Claude Code's summarization request.
    env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "hello there",
    ]);
    env.wait_until("the turn completes", Duration::from_secs(30), |e| {
        let s = e.screen("claude-cb");
        s.contains("● ok") && !s.contains("esc to interrupt")
    });
    let out = env.ok(&["compact", "cb", "--json"]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["outcome"], "compacted", "{}", env.diagnostics());
    assert!(env
        .events("lifecycle", "compact")
        .iter()
        .any(|c| c["outcome"] == "compacted"));
    assert!(
        api.model_requests()
            .iter()
            .any(|r| last_user_text(r).to_lowercase().contains("summar")),
        "the summarization request reached the model"
    );

    // Interrupt while the stand-in holds its answer open.
    env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "take your time",
    ]);
    env.wait_until("claude is mid-turn", Duration::from_secs(30), |e| {
        e.screen("claude-cb").contains("esc to interrupt")
    });
    let out = env.ok(&["interrupt", "cb"]);
    assert_eq!(out.trim(), "interrupted claude-cb");
    // The answer is held for 60 s: only the interrupt ends the turn this soon. Claude Code
    // then puts the message back into its composer; that is iapeer's own text, which the
    // session clears (issue 26 item 8; tests/interrupt.rs), leaving the composer empty.
    env.wait_until(
        "claude stops the turn and the message is cleared",
        Duration::from_secs(30),
        |e| {
            !e.screen("claude-cb").contains("esc to interrupt")
                && e.has_event(
                    "lifecycle",
                    "composer-cleared",
                    &[("identity", "claude-cb")],
                )
        },
    );
    assert!(
        !env.screen("claude-cb")
            .contains("<msg>take your time</msg>"),
        "{}",
        env.screen("claude-cb")
    );

    // `new` gives a fresh ready session.
    let before = env.events("lifecycle", "wake").len();
    env.ok(&["new", "cb"]);
    let wakes = env.events("lifecycle", "wake");
    assert_eq!(wakes.len(), before + 1);
    let last = wakes.last().unwrap();
    assert_eq!(
        (last["mode"].as_str(), last["cause"].as_str()),
        ("fresh", "explicit-fresh")
    );
    assert_eq!(env.status_of("cb", "claude"), "live");
    assert!(env.screen("claude-cb").contains("bypass permissions on"));
}

/// Start the echo peer `ea` (a live sender gets notices), then wake `cb` with `message`
/// from it: the answer comes once Claude took the message.
fn wake_cb_from_a_live_ea(env: &TestEnv, message: &str) {
    env.ok(&["new", "ea"]);
    let out = env.ok(&["send", "cb", "--from", "echo-ea", "--message", message]);
    assert_eq!(out.trim(), "delivered to cb (claude), woke");
}

/// Wait (at most `within`) for cb's failed `ready-gate` line; its `err`.
fn failed_gate_reason(env: &TestEnv, within: Duration) -> String {
    let failed = [("identity", "claude-cb"), ("ok", "false")];
    env.wait_until("the failed ready gate in lifecycle.log", within, |e| {
        e.has_event("lifecycle", "ready-gate", &failed)
    });
    env.events("lifecycle", "ready-gate")
        .iter()
        .find_map(|l| l.get("err").cloned())
        .unwrap_or_default()
}

/// A wake's session stopped while its model is still thinking: the ready gate's line says
/// the session was ended, and the sender is not told the model failed (it did not).
#[test]
fn a_wake_stopped_before_its_model_answered_tells_the_sender_nothing() {
    let (env, api) = world(&[]);
    api.script(|_| Reply::Hold(Duration::from_secs(30), "late".into()));
    wake_cb_from_a_live_ea(&env, "think");
    env.wait_until("the model has it", Duration::from_secs(30), |_| {
        api.has_main_request_with("think")
    });
    env.ok(&["stop", "cb"]);
    let err = failed_gate_reason(&env, Duration::from_secs(30));
    assert!(err.contains("ended (stop)"), "{err}");
    // The router logs a notice it sends (`failure-notice`) with the gate's line; past that,
    // it has handled everything it had.
    env.router_settled();
    assert!(
        !env.pane("echo-ea").contains("from iapeer"),
        "no notice: {}",
        env.pane("echo-ea")
    );
    assert!(
        !env.has_event("lifecycle", "failure-notice", &[]),
        "no notice was even tried"
    );
}

#[test]
fn failures_are_reported_with_their_reason() {
    // The stand-in is gone. The wake still delivers (Claude Code takes the message), and
    // the ready gate that follows it fails and says why: in lifecycle.log and, by a
    // message from iapeer, to the live sender (issue 13 item 2: the answer does not wait
    // for the model).
    let (mut env, api) = world(&[("IAPEER_BOOT_DEADLINE_SECS", "60")]);
    drop(api);
    wake_cb_from_a_live_ea(&env, "anyone there?");
    let err = failed_gate_reason(&env, Duration::from_secs(90));
    assert!(
        err.to_lowercase().contains("connect"),
        "the reason must name the connection problem: {err}"
    );
    crate::busy::told_by_iapeer(&env, "echo-ea", "cb (claude)", "did not start on it");
    assert_eq!(
        env.status_of("cb", "claude"),
        "live",
        "the session is left running (spec 05 §2 step 10)"
    );

    // A wrong binary path is an error at create time, not a hang at wake. (With no daemon
    // running, create judges with its own lookup; a running daemon's view is in
    // tests/agent_program.rs.)
    env.stop_daemon();
    let (_, err) = env
        .cmd(&["create", "cc", "--runtime", "claude"])
        .env("IAPEER_CLAUDE_BIN", "/nonexistent/claude")
        .output()
        .map(|o| ((), String::from_utf8_lossy(&o.stderr).into_owned()))
        .unwrap();
    assert!(
        err.contains("claude is not installed — looked at, in order: IAPEER_CLAUDE_BIN=/nonexistent/claude (not an executable file) — install Claude Code so that one of these finds it (or set IAPEER_CLAUDE_BIN to the program in the daemon's environment and restart it), or choose another runtime"),
        "{err}"
    );
}

/// Claude Code refuses `--dangerously-skip-permissions` as root unless `IS_SANDBOX=1`: the
/// wake fails and says so, naming both remedies. (As a normal user the same peer just works.)
#[test]
fn root_without_is_sandbox_is_explained() {
    let (env, api) = world_with(&[("IS_SANDBOX", "")], false);
    api.script(|_| Reply::Text("ok".into()));
    let out = env.run(&["send", "cb", "--from", "echo-ea", "--message", "hello"]);
    if nix::unistd::Uid::effective().is_root() {
        assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("refuses --dangerously-skip-permissions as root"),
            "{err}"
        );
        assert!(
            err.contains("run iapeer as a normal user") && err.contains("IS_SANDBOX=1"),
            "{err}"
        );
    } else {
        assert!(
            out.status.success(),
            "as a normal user no IS_SANDBOX is needed: {}",
            common::describe(&out)
        );
    }
}

/// Issue 12 item 1 on the real Claude Code: a body that ends the bracketed paste, presses
/// Enter, types a line and `/exit` reaches the model as one user turn, the controls shown as
/// their pictures inside the envelope, and nothing is typed outside it.
#[test]
fn a_body_with_the_paste_end_marker_reaches_claude_as_one_user_turn() {
    let (env, api) = world(&[]);
    api.script(|_| Reply::Text("ok".into()));
    let out = env.run(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        crate::paste::ATTACK,
        "--topic",
        "t\x1b[201~",
    ]);
    // The envelope's end is the last thing iapeer typed: once the model has it, every turn a
    // stray Enter in the body would have started came before, in the same conversation.
    api.wait_user_text(&env, Duration::from_secs(60), "</iap>");
    let seen: Vec<String> = api.main_requests().iter().map(last_user_text).collect();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "delivered to cb (claude), woke",
        "{}\nuser turns: {seen:#?}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
    let main = api.main_requests();
    let last = main.last().expect("a model request");
    let users: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| common::anthropic::flatten(&m["content"]))
        .filter(|t| t.contains("hi") || t.contains("TYPED") || t.contains("<iap"))
        .collect();
    assert_eq!(users.len(), 1, "{users:#?}\n{}", env.diagnostics());
    let turn = &users[0];
    assert!(!turn.contains('\x1b'), "{turn:?}");
    assert!(turn.contains("topic=\"t\u{241b}[201~\""), "{turn:?}");
    assert!(turn.contains("hi\u{241b}[201~"), "{turn:?}");
    assert!(turn.contains("TYPED\u{241b}[200~\u{2403}/exit"), "{turn:?}");
    // The pasted CR is a line break to both CLIs (recorded: Claude Code 2.1.332, Codex
    // 0.171.0), and the message ends where the envelope does.
    assert!(turn.contains("/exit\n]]></msg>\n</iap>"), "{turn:?}");
    for req in &main {
        let t = last_user_text(req);
        assert!(
            !t.contains("TYPED") || (t.contains("<iap ") && t.contains("</iap>")),
            "a line reached Claude outside the envelope: {t:?}"
        );
    }
    assert_eq!(
        env.status_of("cb", "claude"),
        "live",
        "{}",
        env.diagnostics()
    );
}

/// Issue 31 item 2: "delivered" is the moment the runtime has the message. Claude Code stamps
/// the `user` record of a taken message when it takes it, but writes it to its transcript
/// with the model request, 50–200 ms later; the daemon reads it after that. A live delivery's
/// delivery.log line (`ts=`) is the record's own time, not when the daemon read it.
#[test]
fn a_live_delivery_is_logged_at_the_moment_claude_code_took_it() {
    let (env, api) = world(&[]);
    api.script(|_| Reply::Text("ok".into()));
    let send = |body: &str| env.ok(&["send", "cb", "--from", "echo-ea", "--message", body]);
    assert_eq!(send("echo: wake").trim(), "delivered to cb (claude), woke");
    api.wait_user_text(&env, Duration::from_secs(60), "echo: wake");
    env.wait_until(
        "cb idle after its first turn",
        Duration::from_secs(60),
        |e| {
            let list = e.control(r#"{"op":"list"}"#);
            list["sessions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["identity"] == "claude-cb" && s["busy"] == false)
        },
    );
    let out = send("echo: live #taken#");
    assert_eq!(
        out.trim(),
        "delivered to cb (claude)",
        "{}",
        env.diagnostics()
    );
    let line = env
        .log("delivery")
        .lines()
        .rev()
        .find(|l| l.contains("to=cb") && l.contains("ok=true"))
        .map(String::from)
        .unwrap_or_else(|| panic!("no delivery line to cb\n{}", env.diagnostics()));
    let ts = line.split(' ').next().unwrap().strip_prefix("ts=").unwrap();
    let mut stamps = Vec::new();
    for dir in std::fs::read_dir(env.home.join(".claude/projects")).unwrap() {
        for f in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap_or_default();
            for l in text.lines().filter(|l| l.contains("#taken#")) {
                let r: serde_json::Value = serde_json::from_str(l).unwrap();
                if r["type"] == "user" {
                    stamps.push(r["timestamp"].as_str().unwrap().to_string());
                }
            }
        }
    }
    assert_eq!(stamps.len(), 1, "{stamps:?}\n{}", env.diagnostics());
    assert_eq!(ts, stamps[0], "delivery.log: {line}");
}

/// Issue 27: Claude Code 2.1.332 aborts an MCP POST that has no response after
/// `max(timeout, 60 s)` and ends a tool call at its `timeout`; iapeer's `.mcp.json` entry
/// has `timeout` = `runtime::MCP_TOOL_TIMEOUT` (330 s) and the daemon answers a held call as
/// an event stream. Here ea (echo) takes 65 s to boot, so cb's `send_to_peer` is held over
/// 60 s, and Claude Code gets its result.
#[test]
fn a_claude_send_to_peer_that_waits_over_60_s_for_a_slow_wake_succeeds() {
    let mut env = TestEnv::new();
    let api = AnthropicStandIn::start();
    add_peer(&mut env, "cb", &api, true);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.launch_env("ea", "echo", common::agents::SLOW_BOOT_ENV);
    env.start_daemon();
    api.script(|req| {
        if has_tool_result(req) {
            Reply::Text("sent".into())
        } else if last_user_text(req).contains("<iap ") {
            Reply::ToolUse(
                "mcp__iapeer__send_to_peer".into(),
                json!({"personality": "ea", "message": "hi from claude"}),
            )
        } else {
            Reply::Text("ok".into())
        }
    });
    env.send_from("cb", "echo-ea", "hello claude");
    env.wait_until(
        "the model asks for send_to_peer",
        Duration::from_secs(90),
        |_| {
            api.main_requests()
                .iter()
                .any(|r| last_user_text(r).contains("hello claude"))
        },
    );
    let called = std::time::Instant::now();
    let result = || {
        api.main_requests()
            .into_iter()
            .find(has_tool_result)
            .map(|r| {
                r["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .unwrap()
                    .to_string()
            })
    };
    env.assert_slow_send_result("claude", called, result);
}

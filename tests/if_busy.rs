//! The sender's choice for an agent mid-turn (issue 32 item 7): `iapeer send --if-busy
//! queue|interrupt|refuse` and `send_to_peer`'s `if_busy`. The echo agent is busy while a
//! reply is in flight (`--reply-delay-ms`, `esc to interrupt` on its screen, Escape stops
//! it); the real Claude Code 2.1.332 mid-turn on a turn the stand-in holds. On `main` there
//! is no such choice: `--if-busy` is a usage error and `if_busy` an unknown argument.

use crate::common;

use common::TestEnv;
use serde_json::{json, Value};
use std::time::Duration;

/// Whether the router sees `identity`'s session mid-turn (`busy` of the `list` op).
fn busy(env: &TestEnv, identity: &str) -> bool {
    let list = env.control(r#"{"op":"list"}"#);
    list["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| s["identity"] == identity && s["busy"] == true)
}

/// Echo peers alice and bob; bob holds each reply 60 s (mid-turn meanwhile). Bob is woken
/// and idle (a message starting `echo:` gets no reply).
fn echo_world() -> TestEnv {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.launch_env("bob", "echo", "PEER_START_ARGS=--reply-delay-ms 60000\n");
    env.start_daemon();
    env.send_from("bob", "echo-alice", "echo: wake up");
    env
}

/// Make bob mid-turn: a message it replies to, held 60 s; waits until the router sees it
/// busy.
fn make_bob_busy(env: &TestEnv) {
    env.send_from("bob", "echo-alice", "please answer");
    env.wait_until("bob is mid-turn", Duration::from_secs(30), |e| {
        busy(e, "echo-bob")
    });
}

/// `iapeer send <to> --from <from> --message <m> --json`, plus `--if-busy <choice>` when
/// given: exit code and the parsed answer.
fn send(env: &TestEnv, to: &str, from: &str, m: &str, choice: Option<&str>) -> (i32, Value) {
    let mut args = vec!["send", to, "--from", from, "--message", m, "--json"];
    if let Some(c) = choice {
        args.extend(["--if-busy", c]);
    }
    let out = env.run(&args);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v)
}

/// The `delivery.log` line of message `id`.
fn delivery_line(env: &TestEnv, id: &str) -> std::collections::HashMap<String, String> {
    env.events("delivery", "delivery")
        .into_iter()
        .find(|d| d.get("msgid").map(String::as_str) == Some(id))
        .unwrap_or_else(|| panic!("no delivery line for {id}\n{}", env.diagnostics()))
}

/// `refuse`: an idle or asleep agent gets the message as usual; a busy one is refused with
/// code `busy` (exit 1), nothing written to it, its turn left running.
#[test]
fn refuse_sends_nothing_to_a_busy_agent_and_says_busy() {
    let env = echo_world();
    let (code, v) = send(&env, "bob", "echo-alice", "echo: idle", Some("refuse"));
    assert_eq!(code, 0, "idle: {v}\n{}", env.diagnostics());
    assert!(v["interrupted"].is_null() && v["queued"].is_null(), "{v}");
    make_bob_busy(&env);
    let (code, v) = send(&env, "bob", "echo-alice", "REFUSED-BODY", Some("refuse"));
    assert_eq!(code, 1, "{v}\n{}", env.diagnostics());
    assert_eq!(v["code"], "busy", "{v}");
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("peer \"bob\" is busy") && error.contains("NOT delivered"),
        "{error}"
    );
    assert!(!env.pane("echo-bob").contains("REFUSED-BODY"));
    assert!(busy(&env, "echo-bob"), "its turn still runs");
    assert!(!env.pane("echo-bob").contains("interrupted"));
    let line = env
        .events("delivery", "delivery")
        .into_iter()
        .rev()
        .find(|d| d.get("ok").map(String::as_str) == Some("false"))
        .expect("the refused send's line");
    assert_eq!(line.get("ifbusy").map(String::as_str), Some("refuse"));
    assert!(env.has_event("lifecycle", "busy-refused", &[("identity", "echo-bob")]));
    // Asleep: woken and delivered whatever the choice.
    let (code, v) = send(&env, "alice", "echo-bob", "echo: hi", Some("refuse"));
    assert_eq!((code, &v["woke"]), (0, &json!(true)), "{v}");
}

/// `interrupt`: a busy agent's turn is stopped with the runtime's own keys (the echo agent
/// shows `interrupted` and drops its reply), then the message goes in; the answer says
/// `interrupted`. To an idle agent it is a plain delivery.
#[test]
fn interrupt_stops_the_turn_then_delivers_and_says_so() {
    let env = echo_world();
    let (code, v) = send(&env, "bob", "echo-alice", "echo: idle", Some("interrupt"));
    assert_eq!(code, 0, "{v}");
    assert!(v["interrupted"].is_null(), "nothing to interrupt: {v}");
    make_bob_busy(&env);
    let (code, v) = send(&env, "bob", "echo-alice", "echo: AFTER", Some("interrupt"));
    assert_eq!(code, 0, "{v}\n{}", env.diagnostics());
    assert_eq!(v["interrupted"], true, "{v}");
    assert!(v["queued"].is_null(), "{v}");
    let pane = env.pane("echo-bob");
    let stopped = pane.find("interrupted").expect("the turn was interrupted");
    let after = pane.find("from alice: echo: AFTER").expect("delivered");
    assert!(stopped < after, "interrupted first:\n{pane}");
    assert!(!busy(&env, "echo-bob"), "the turn is over");
    let id = v["id"].as_str().unwrap();
    let line = delivery_line(&env, id);
    assert_eq!(line.get("ifbusy").map(String::as_str), Some("interrupt"));
    assert_eq!(line.get("interrupted").map(String::as_str), Some("true"));
    assert!(env.has_event(
        "lifecycle",
        "interrupt",
        &[("identity", "echo-bob"), ("for", id)]
    ));
    // Through the human line too.
    make_bob_busy(&env);
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: again",
        "--if-busy",
        "interrupt",
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), interrupted its turn");
}

/// `queue` (and no choice at all) is what a send always did: the message goes in while the
/// turn runs (the echo agent takes it at once; Claude Code and Codex queue it, answered
/// `queued`, see `tests/busy.rs`), the turn is not interrupted, nothing says it was.
#[test]
fn queue_and_no_choice_leave_the_turn_running() {
    let env = echo_world();
    make_bob_busy(&env);
    for (body, choice) in [("echo: QUEUED", Some("queue")), ("echo: PLAIN", None)] {
        let (code, v) = send(&env, "bob", "echo-alice", body, choice);
        assert_eq!(code, 0, "{v}\n{}", env.diagnostics());
        assert!(v["interrupted"].is_null(), "{v}");
        assert!(env
            .pane("echo-bob")
            .contains(&format!("from alice: {body}")));
        let line = delivery_line(&env, v["id"].as_str().unwrap());
        assert!(!line.contains_key("interrupted") && !line.contains_key("ifbusy"));
    }
    assert!(busy(&env, "echo-bob"), "the turn still runs");
    assert!(!env.pane("echo-bob").contains("interrupted"));
    // A choice that is not one is a usage error, nothing sent.
    let out = env.run(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "x",
        "--if-busy",
        "wait",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", common::describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--if-busy: expected queue, interrupt or refuse; got \"wait\""));
}

/// `send_to_peer`'s `if_busy` (an agent's own MCP call, its session token): listed as an
/// optional property, refuse answered with a tool error saying busy, interrupt with
/// `interrupted` in the structured result, a wrong value refused naming the choices.
#[test]
fn send_to_peer_carries_if_busy() {
    let env = echo_world();
    let token = crate::mcp::wake_and_token(&env, "alice");
    let bearer = format!("Bearer {token}");
    let headers = [
        ("X-IAPeer-Identity", "echo-alice"),
        ("Authorization", bearer.as_str()),
    ];
    let list = crate::mcp::post(
        env.port(),
        &headers,
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}).to_string(),
    )
    .json();
    let schema = &list["result"]["tools"][0]["inputSchema"];
    assert_eq!(
        schema["properties"]["if_busy"]["enum"],
        json!(["queue", "interrupt", "refuse"])
    );
    assert_eq!(schema["required"], json!(["personality", "message"]));
    make_bob_busy(&env);
    let call = |args: Value| crate::mcp::call_args(env.port(), &headers, args);
    let refused = call(json!({"personality":"bob","message":"MCP-REFUSED","if_busy":"refuse"}));
    let text = crate::mcp::tool_error(&refused);
    assert!(
        text.contains("is busy") && text.contains("NOT delivered"),
        "{text}"
    );
    assert!(!env.pane("echo-bob").contains("MCP-REFUSED"));
    let bad = call(json!({"personality":"bob","message":"x","if_busy":"later"}));
    assert!(crate::mcp::tool_error(&bad).contains("\"if_busy\" must be"));
    let done = call(json!({"personality":"bob","message":"echo: MCP-AFTER","if_busy":"interrupt"}));
    assert_ne!(done["isError"], true, "{done}\n{}", env.diagnostics());
    assert_eq!(done["structuredContent"]["interrupted"], true, "{done}");
    assert!(env.pane("echo-bob").contains("from alice: echo: MCP-AFTER"));
}

/// With the real Claude Code 2.1.332 mid-turn (the stand-in holds a `BUSY` turn): `refuse`
/// is answered `busy` and nothing reaches the model; `interrupt` stops the turn with Esc (as
/// `iapeer interrupt`), the prompt Claude Code puts back into its composer is cleared, the
/// message is delivered — not queued — and reaches the model alone; the sender of the
/// interrupted message is told.
#[test]
fn claude_interrupt_and_refuse_mid_turn() {
    let (env, api) = crate::busy::claude_holding_busy_turns();
    env.send_from("cb", "echo-ea", "BUSY forever\nsecond line");
    env.wait_until("claude is mid-turn", Duration::from_secs(30), |e| {
        busy(e, "claude-cb") && e.screen("claude-cb").contains("esc to interrupt")
    });
    let (code, v) = send(&env, "cb", "echo-ea", "REFUSED one", Some("refuse"));
    assert_eq!((code, &v["code"]), (1, &json!("busy")), "{v}");
    assert!(busy(&env, "claude-cb"), "its turn still runs");
    let (code, v) = send(&env, "cb", "echo-ea", "NEXT one", Some("interrupt"));
    assert_eq!(
        code,
        0,
        "{v}\n{}\n{}",
        env.screen("claude-cb"),
        env.diagnostics()
    );
    assert_eq!(v["interrupted"], true, "{v}");
    assert!(v["queued"].is_null(), "delivered, not queued: {v}");
    crate::interrupt::the_model_gets_it_alone(&env, &api, "NEXT one");
    assert!(!api.has_main_request_with("REFUSED one"));
    crate::busy::told_by_iapeer(&env, "echo-ea", "cb (claude)", "was interrupted at");
}

/// With the real Codex 0.171.0 mid-turn (the stand-in holds a `BUSY` turn): `interrupt` stops
/// the turn with Esc, waits for it to end (Codex keeps the interrupted prompt in its
/// conversation; pasted before the turn ended, the message would join it or wait in its
/// queue), and the message is delivered — not queued — as the newest user message of the
/// next model request.
#[test]
fn codex_interrupt_mid_turn() {
    use common::openai::{last_input_text, Reply};
    let (env, api) = crate::codex::world();
    api.script(|req| {
        if last_input_text(req).contains("BUSY") {
            Reply::Hold(Duration::from_secs(60))
        } else {
            Reply::Text("ok".into())
        }
    });
    env.ok(&["new", "ea"]);
    env.send_from("cx", "echo-ea", "echo: wake");
    crate::busy::wait_codex_turns(&env, 1);
    env.send_from("cx", "echo-ea", "BUSY forever");
    env.wait_until("codex is mid-turn", Duration::from_secs(30), |e| {
        busy(e, "codex-cx")
    });
    let (code, v) = send(&env, "cx", "echo-ea", "NEXT one", Some("interrupt"));
    assert_eq!(
        code,
        0,
        "{v}\n{}\n{}",
        env.screen("codex-cx"),
        env.diagnostics()
    );
    assert_eq!(v["interrupted"], true, "{v}");
    assert!(v["queued"].is_null(), "delivered, not queued: {v}");
    env.wait_until("the model gets it", Duration::from_secs(30), |_| {
        api.recorded().iter().any(|r| {
            let last = last_input_text(r);
            last.contains("<msg>NEXT one</msg>") && !last.contains("BUSY")
        })
    });
}

/// The fleet's `POST /fleet/v1/send` carries `if_busy` too: refused with 502 and code `busy`
/// while bob is mid-turn, interrupted and delivered with `interrupted` in the result.
#[test]
fn the_fleet_send_carries_if_busy() {
    let env = crate::fleet::team_with(&[]);
    env.launch_env("bob", "echo", "PEER_START_ARGS=--reply-delay-ms 60000\n");
    make_bob_busy(&env);
    let send = |message: &str, choice: &str| {
        crate::fleet::post(
            &env,
            "/fleet/v1/send",
            json!({"personality": "bob", "message": message, "if_busy": choice}),
        )
    };
    let refused = send("FLEET-REFUSED", "refuse");
    assert_eq!(
        refused.status,
        502,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert_eq!(refused.json()["code"], "busy");
    assert!(!env.pane("echo-bob").contains("FLEET-REFUSED"));
    let done = send("echo: FLEET-AFTER", "interrupt");
    assert_eq!(done.status, 200, "{}", String::from_utf8_lossy(&done.body));
    assert_eq!(done.json()["result"]["interrupted"], true);
    assert!(env.pane("echo-bob").contains("echo: FLEET-AFTER"));
}

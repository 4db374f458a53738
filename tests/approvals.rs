//! Gated mode (spec 10 §4) with the real Claude Code CLI: a peer with `approval_mode:
//! "gated"` launches without `--dangerously-skip-permissions`, and each permission prompt of
//! its agent reaches the daemon's approval broker through Claude Code's `PermissionRequest`
//! hook (`iapeer approval-request`). Approve lets the tool run, deny stops it and tells the
//! model why, and a prompt nobody answers is denied when `IAPEER_APPROVAL_TIMEOUT_MS` passes.

use crate::common;

use common::anthropic::{has_tool_result, last_user_text, AnthropicStandIn, Reply};
use common::openai::{last_is_tool_output, OpenAiStandIn, Reply as OReply};
use common::TestEnv;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn claude_bin() -> String {
    std::env::var("IAPEER_TEST_CLAUDE_BIN").unwrap_or_else(|_| {
        panic!("IAPEER_TEST_CLAUDE_BIN is not set: run scripts/test.sh (it installs Claude Code with scripts/setup-agents.sh)")
    })
}

/// The fixtures of this area, recorded from Claude Code 2.1.332.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-2.1.332/approvals")
}

/// A world with a gated claude peer `cb`, an echo peer `ea`, the stand-in and a daemon whose
/// approvals time out after `timeout_ms`.
fn gated_world(timeout_ms: &str) -> (TestEnv, AnthropicStandIn) {
    // The confirmation grace of the busy tests: a paste into Claude Code beside another
    // real CLI on two cores can take more than the default 4 s to show in its transcript.
    let (env, api) = crate::claude::world(&[
        ("IAPEER_APPROVAL_TIMEOUT_MS", timeout_ms),
        ("IAP_HOST_LIVENESS_GRACE_MS", "10000"),
    ]);
    mark_gated(&env, "cb");
    (env, api)
}

/// Set `approval_mode: "gated"` in `peer`'s profile. It is read at each launch: marked
/// before the first wake, the peer is gated.
fn mark_gated(env: &TestEnv, peer: &str) {
    let profile = env.peer_dir(peer).join(".iapeer/peer-profile.json");
    let mut p: Value = serde_json::from_str(&common::read(&profile)).unwrap();
    p["approval_mode"] = "gated".into();
    std::fs::write(&profile, p.to_string()).unwrap();
}

/// A message `touch <name>` makes the model ask for `touch <dir>/<name>` through Bash, once
/// per name; the tool's result (the model's next request) is kept in `results`, and the turn
/// then ends.
fn script_touch(api: &AnthropicStandIn, dir: &Path, results: Arc<Mutex<Vec<String>>>) {
    let dir = dir.to_path_buf();
    script_tool_per_message(api, "touch ", results, move |name| {
        Reply::ToolUse(
            "Bash".into(),
            json!({
                "command": format!("touch {}", dir.join(name).display()),
                "description": "Create the file",
            }),
        )
    });
}

/// A message `<verb><arg>` (e.g. `touch a`) makes the model call the tool `tool(arg)`
/// answers, once per argument; each tool result the model gets (its next request) is kept
/// in `results`, and the turn then ends. A message that arrives mid-turn comes folded into
/// the tool-result request (Claude Code's own queue), so a new argument is looked for first.
/// Side requests (no tools: titles, summaries) are answered `ok`.
pub(crate) fn script_tool_per_message(
    api: &AnthropicStandIn,
    verb: &'static str,
    results: Arc<Mutex<Vec<String>>>,
    tool: impl Fn(&str) -> Reply + Send + 'static,
) {
    let asked = Mutex::new(Vec::<String>::new());
    let open = format!("<msg>{verb}");
    api.script(move |req| {
        if req["tools"].as_array().is_none_or(|t| t.is_empty()) {
            return Reply::Text("ok".into());
        }
        let text = last_user_text(req);
        let tool_result = has_tool_result(req);
        if tool_result {
            results.lock().unwrap().push(text.clone());
        }
        // Claude Code folds consecutive user turns into one: every argument in it counts.
        let arg = text
            .split(open.as_str())
            .skip(1)
            .filter_map(|r| r.split("</msg>").next())
            .find(|n| !asked.lock().unwrap().iter().any(|a| a == n))
            .map(String::from);
        match arg {
            Some(arg) => {
                asked.lock().unwrap().push(arg.clone());
                tool(&arg)
            }
            None if tool_result => Reply::Text("done".into()),
            None => Reply::Text("ok".into()),
        }
    });
}

/// Wait until a tool result (Claude) or tool output (Codex) the model got says `why`.
fn told(env: &TestEnv, results: &Mutex<Vec<String>>, why: &str) {
    if common::poll(Duration::from_secs(60), || {
        results.lock().unwrap().iter().any(|r| r.contains(why))
    }) {
        return;
    }
    panic!(
        "no tool result told the model \"{why}\"; results: {:?}\n{}",
        results.lock().unwrap(),
        env.diagnostics()
    );
}

/// Wait until the turn is over (no `esc to interrupt` on the screen), so the next message
/// starts a turn of its own instead of being folded into this one.
fn turn_over(env: &TestEnv) {
    env.wait_until("the turn is over", Duration::from_secs(60), |env| {
        !env.screen("claude-cb").contains("esc to interrupt")
    });
}

/// The prompt `id` still waits for a human (nothing answered it from the screen) and its
/// command has not run; `deny <id> not today` answers `denied <id> (<identity>)` and that
/// the hook has it.
fn deny_the_waiting_prompt(env: &TestEnv, id: &str, dir: &Path, identity: &str) {
    assert!(
        approvals(env).iter().any(|a| a["id"] == id),
        "the prompt was answered from the screen\n{}",
        env.diagnostics()
    );
    assert!(!dir.join("denied").exists(), "the command ran unapproved");
    let out = env.ok(&["deny", id, "not today"]);
    assert_eq!(out.trim(), format!("denied {id} ({identity}): {HANDED}"));
}

/// What `approve`/`deny` of a gated peer's prompt says of the answer (issue 27): its hook has
/// it, and nothing more is reported.
pub(crate) const HANDED: &str = "handed to the session's permission hook, which answers the agent";

/// The pending approval requests (`iapeer approvals --json`).
pub(crate) fn approvals(env: &TestEnv) -> Vec<Value> {
    let out = env.ok(&["approvals", "--json"]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    v["approvals"].as_array().cloned().unwrap_or_default()
}

/// Send `touch <name>` to `cb` and wait for its prompt to be pending; its id.
fn ask_touch(env: &TestEnv, name: &str) -> String {
    ask_touch_of(env, "cb", name)
}

/// Send `touch <name>` to `peer` and wait for its prompt to be pending; its id.
fn ask_touch_of(env: &TestEnv, peer: &str, name: &str) -> String {
    let before: Vec<String> = approvals(env)
        .iter()
        .filter_map(|a| a["id"].as_str().map(String::from))
        .collect();
    env.ok(&[
        "send",
        peer,
        "--from",
        "echo-ea",
        "--message",
        &format!("touch {name}"),
        "--timeout",
        "240",
    ]);
    let mut id = String::new();
    env.wait_until(
        &format!("the prompt for touch {name} is pending"),
        Duration::from_secs(90),
        |env| {
            let now = approvals(env);
            if let Some(a) = now
                .iter()
                .find(|a| !before.iter().any(|b| a["id"].as_str() == Some(b)))
            {
                id = a["id"].as_str().unwrap().to_string();
                true
            } else {
                false
            }
        },
    );
    id
}

#[test]
fn a_gated_claude_peer_asks_a_human_and_approve_deny_and_timeout_decide() {
    let (env, api) = gated_world("20000");
    let dir = env.dir.path().join("made");
    std::fs::create_dir_all(&dir).unwrap();
    let results = Arc::new(Mutex::new(Vec::new()));
    script_touch(&api, &dir, results.clone());

    // Approve: the command runs.
    let id = ask_touch(&env, "approved");
    let list = approvals(&env);
    let a = list.iter().find(|a| a["id"] == id.as_str()).unwrap();
    assert_eq!(a["identity"], "claude-cb", "{a}");
    assert_eq!(a["tool"], "Bash", "{a}");
    let summary = a["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("touch ") && summary.ends_with("/made/approved"),
        "{a}"
    );
    // Launched without the bypass flag, in manual mode, with the hook.
    let list = env.control(r#"{"op":"list"}"#);
    let pid = list["sessions"][0]["pid"].as_u64().unwrap();
    let argv = common::read(Path::new(&format!("/proc/{pid}/cmdline"))).replace('\0', " ");
    assert!(argv.contains("--permission-mode manual"), "{argv}");
    assert!(argv.contains("approval-request"), "{argv}");
    assert!(!argv.contains("--dangerously-skip-permissions"), "{argv}");
    let text = env.ok(&["approvals"]);
    assert!(
        text.contains(&id) && text.contains("iapeer approve <id>"),
        "{text}"
    );
    let out = env.ok(&["approve", &id]);
    assert_eq!(out.trim(), format!("approved {id} (claude-cb): {HANDED}"));
    env.wait_until("the approved command ran", Duration::from_secs(60), |_| {
        dir.join("approved").exists()
    });
    assert!(env.has_event(
        "lifecycle",
        "approval-approved",
        &[("id", &id), ("by", "approved")]
    ));
    // Answered once: a second answer is refused and says what to do.
    let (_, err) = env.fails(&["deny", &id], 1);
    assert!(
        err.contains("is not pending") && err.contains("iapeer approvals"),
        "{err}"
    );
    told(&env, &results, "Bash completed");
    turn_over(&env);

    // Deny: the command does not run and the model is told the reason.
    let id = ask_touch(&env, "denied");
    // A message sent while the prompt is open waits for it to close: pasted with Enter it
    // would answer Claude Code's own prompt `Yes`, past the human.
    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "meanwhile",
        "--timeout",
        "240",
    ]);
    assert!(out.contains("queued"), "{out}");
    // Where it waits depends on what Claude Code's screen showed: a permission prompt there
    // and the session holds it (it looks again and keeps it); none (the hook runs first) and
    // it was pasted into Claude Code's own queue (its transcript records the enqueue). Either
    // way nothing of it reached the model.
    if out.contains("— approval") {
        env.wait_still_held("claude-cb");
    } else {
        env.wait_until(
            "Claude Code queues the message",
            Duration::from_secs(30),
            |e| {
                crate::busy::records(&e.home.join(".claude/projects"))
                    .iter()
                    .any(|r| {
                        r["type"] == "queue-operation"
                            && r["operation"] == "enqueue"
                            && r.to_string().contains("meanwhile")
                    })
            },
        );
    }
    assert!(
        !api.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains("<msg>meanwhile</msg>")),
        "the message went in over the open prompt"
    );
    deny_the_waiting_prompt(&env, &id, &dir, "claude-cb");
    told(&env, &results, "not today");
    api.wait_user_text(&env, Duration::from_secs(60), "<msg>meanwhile</msg>");
    turn_over(&env);
    env.assert_denied(&id, &dir.join("denied"));

    // Nobody answers: denied when the timeout passes.
    let id = ask_touch(&env, "unanswered");
    env.wait_until("the prompt timed out", Duration::from_secs(60), |env| {
        env.has_event(
            "lifecycle",
            "approval-denied",
            &[("id", &id), ("by", "timeout")],
        )
    });
    told(&env, &results, "no human answered");
    assert!(!dir.join("unanswered").exists(), "a timed-out command ran");
    assert!(approvals(&env).is_empty());
    assert!(env.has_event(
        "lifecycle",
        "approval-requested",
        &[("id", &id), ("tool", "Bash")]
    ));
}

/// A gated peer moved over from the original tool: its `.claude/settings.json` still holds
/// the hook the original wrote (`<bin> approval-hook`, its `src/approval/install.ts`), a verb
/// iapeer lacks (exit 2: Claude Code reads it as a deny, so every tool call was refused). At
/// the wake that group is taken out, the user's other settings kept: the prompt reaches a
/// human once, and approve runs the command (issue 30 item 7).
#[test]
fn a_gated_peer_moved_over_from_the_original_runs_what_a_human_approves() {
    let (env, api) = gated_world("60000");
    let settings = env.peer_dir("cb").join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original = json!({
        "hooks": {"PermissionRequest": [{"hooks": [{
            "type": "command",
            "command": format!("{} approval-hook", common::bin().display()),
            "timeout": 900,
        }]}]},
        "permissions": {"allow": ["mcp__iapeer__send_to_peer"]},
    });
    std::fs::write(
        &settings,
        format!("{}\n", serde_json::to_string_pretty(&original).unwrap()),
    )
    .unwrap();
    let dir = env.dir.path().join("made");
    std::fs::create_dir_all(&dir).unwrap();
    let results = Arc::new(Mutex::new(Vec::new()));
    script_touch(&api, &dir, results.clone());

    let id = ask_touch(&env, "approved");
    let kept: Value = serde_json::from_str(&common::read(&settings)).unwrap();
    assert_eq!(
        kept,
        json!({"permissions": {"allow": ["mcp__iapeer__send_to_peer"]}}),
        "only the original's hook is taken out"
    );
    assert_eq!(approvals(&env).len(), 1, "the human is asked once");
    env.ok(&["approve", &id]);
    env.wait_until("the approved command ran", Duration::from_secs(60), |_| {
        dir.join("approved").exists()
    });
    told(&env, &results, "Bash completed");
}

/// Records what Claude Code 2.1.332 gives a `PermissionRequest` hook (its stdin) and the
/// gated ready screen into `tests/fixtures/claude-2.1.332/approvals/`. Run by name with
/// `--ignored`.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_claude_permission_request() {
    let env = TestEnv::new();
    let api = AnthropicStandIn::start();
    let cwd = env.dir.path().join("proj");
    std::fs::create_dir_all(&cwd).unwrap();
    let made = cwd.join("made");
    let results = Arc::new(Mutex::new(Vec::new()));
    script_touch(&api, &cwd, results.clone());
    let input = env.dir.path().join("hook-input.json");
    let settings = json!({"hooks": {"PermissionRequest": [{"matcher": "*", "hooks": [{
        "type": "command",
        "command": format!(
            "cat > '{}'; echo '{{\"hookSpecificOutput\":{{\"hookEventName\":\"PermissionRequest\",\"decision\":{{\"behavior\":\"deny\",\"message\":\"recorded\"}}}}}}'",
            input.display()
        ),
    }]}]}});
    let status = std::process::Command::new(claude_bin())
        .args([
            "-p",
            "<msg>touch made</msg>",
            "--permission-mode",
            "manual",
            "--settings",
        ])
        .arg(settings.to_string())
        .current_dir(&cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", &env.home)
        .env("ANTHROPIC_BASE_URL", api.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-standin-key")
        .env("IS_SANDBOX", "1")
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let text = common::read(&input);
    // Machine-specific paths replaced by placeholders; the shape is kept.
    let cwd_s = cwd.display().to_string();
    let tmp = env.dir.path().display().to_string();
    let text = text.replace(&cwd_s, "/srv/peer1").replace(&tmp, "/tmp/rec");
    let v: Value = serde_json::from_str(&text).unwrap();
    std::fs::create_dir_all(fixtures()).unwrap();
    std::fs::write(
        fixtures().join("permission-request-bash.json"),
        serde_json::to_string_pretty(&v).unwrap() + "\n",
    )
    .unwrap();
    assert!(!made.exists(), "denied by the recording hook");
    assert!(
        results
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains("recorded")),
        "the model got the hook's message"
    );
}

/// The token of a live session, from its child's environment (`IAPEER_TOKEN`).
pub(crate) fn session_token(pid: u64) -> String {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix("IAPEER_TOKEN="))
        .expect("IAPEER_TOKEN in the session's environment")
        .to_string()
}

/// A hook's connection: the `approval-request` line sent, the answer not read yet.
pub(crate) fn hook_ask(
    env: &TestEnv,
    token: &str,
    summary: &str,
) -> std::os::unix::net::UnixStream {
    use std::io::Write;
    let mut s = std::os::unix::net::UnixStream::connect(env.socket()).unwrap();
    let line = json!({"op":"approval-request","identity":"echo-ea","token":token,"tool":"Bash","summary":summary});
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    s
}

pub(crate) fn hook_answer(s: std::os::unix::net::UnixStream) -> Value {
    use std::io::BufRead;
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut line = String::new();
    std::io::BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(line.trim_end()).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

/// The broker without Claude Code: requests as a gated session's hook sends them (with the
/// live echo session's token), the fleet long poll and approve, a hook that hangs up, and a
/// daemon that stops while a prompt waits.
#[test]
fn the_broker_long_polls_approves_over_http_and_denies_a_gone_hook_and_on_shutdown() {
    let mut env = TestEnv::new();
    env.set("IAPEER_APPROVAL_TIMEOUT_MS", "60000");
    env.create_echo("ea");
    env.start_daemon();
    let woke = env.control(r#"{"op":"wake","personality":"ea"}"#);
    assert_eq!(woke["ok"], true, "{woke}");
    let token = session_token(woke["pid"].as_u64().unwrap());

    // Only the live session's token may ask.
    let refused = env.control(
        &json!({"op":"approval-request","identity":"echo-ea","token":"nope","tool":"Bash","summary":"x"})
            .to_string(),
    );
    assert_eq!(refused["code"], "not-live", "{refused}");

    // A long poll is answered by the new prompt; approve over HTTP answers the hook.
    let port = env.port();
    let auth = env.fleet_auth();
    let poll = std::thread::spawn(move || {
        crate::fleet::request(port, "GET", "/fleet/v1/approvals?wait=30", &[&auth], b"")
    });
    // The long poll is parked before the hook asks (one that came late would get the prompt
    // at once, and the wait path would go untested).
    env.wait_hook("approvals-wait", 1);
    let hook = hook_ask(&env, &token, "make build");
    let polled = poll.join().unwrap();
    assert_eq!(polled.status, 200);
    let list = polled.json();
    let a = &list["approvals"][0];
    assert_eq!(a["summary"], "make build", "{list}");
    assert_eq!(a["identity"], "echo-ea", "{list}");
    let id = a["id"].as_str().unwrap().to_string();
    let since = a["created_ms"].as_u64().unwrap();
    // Nothing newer: a long poll with `since` waits its whole time.
    let start = std::time::Instant::now();
    let again = crate::fleet::get(&env, &format!("/fleet/v1/approvals?wait=1&since={since}"));
    assert!(start.elapsed() >= Duration::from_millis(900));
    assert_eq!(again.json()["approvals"][0]["id"], id.as_str());
    let ok = crate::fleet::owner_request(
        &env,
        "POST",
        &format!("/fleet/v1/approvals/{id}/approve"),
        &[],
        b"",
    );
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
    assert_eq!(ok.json()["decision"], "approve");
    // What became of it (issue 27): a hook's answer is handed over at once.
    assert_eq!(
        ok.json()["outcome"],
        json!({"kind": "handed", "to": "hook"})
    );
    assert_eq!(ok.json()["detail"], HANDED);
    let verdict = hook_answer(hook);
    assert_eq!(verdict, json!({"ok":true,"id":id,"allow":true}));
    let gone = crate::fleet::owner_request(
        &env,
        "POST",
        &format!("/fleet/v1/approvals/{id}/deny"),
        &[],
        b"",
    );
    assert_eq!(gone.status, 400, "{}", String::from_utf8_lossy(&gone.body));

    // A hook that hangs up is denied within the sweep.
    let hook = hook_ask(&env, &token, "rm -rf /");
    env.wait_until("the prompt is pending", Duration::from_secs(10), |env| {
        env.has_event(
            "lifecycle",
            "approval-requested",
            &[("summary", "rm -rf /")],
        )
    });
    drop(hook);
    env.wait_until("a gone hook is denied", Duration::from_secs(10), |env| {
        env.has_event("lifecycle", "approval-denied", &[("by", "disconnected")])
    });
    assert!(approvals(&env).is_empty());

    // The daemon stops: the waiting hook is answered deny.
    let hook = hook_ask(&env, &token, "deploy");
    env.wait_until("the prompt is pending", Duration::from_secs(10), |env| {
        env.has_event("lifecycle", "approval-requested", &[("summary", "deploy")])
    });
    env.stop_daemon();
    let verdict = hook_answer(hook);
    assert_eq!(verdict["allow"], false, "{verdict}");
    assert!(
        verdict["reason"].as_str().unwrap().contains("stopping"),
        "{verdict}"
    );
}

/// A world with a gated codex peer `cx`, an echo peer `ea`, the OpenAI stand-in and a daemon
/// whose approvals time out after `timeout_ms`. The user turned Codex's hooks off in their
/// config: the gated launch turns them on for its own session.
fn gated_codex_world(timeout_ms: &str) -> (TestEnv, OpenAiStandIn) {
    let (env, api) = crate::codex::world_with(&[("IAPEER_APPROVAL_TIMEOUT_MS", timeout_ms)]);
    let config = env.home.join(".codex/config.toml");
    let text = common::read(&config);
    assert!(!text.contains("[features]"), "{text}");
    std::fs::write(&config, format!("{text}\n[features]\nhooks = false\n")).unwrap();
    mark_gated(&env, "cx");
    (env, api)
}

/// A message `touch <name>` makes the Codex model ask to run `touch <dir>/<name>` with
/// escalated permissions (outside the read-only sandbox), once per name; each tool output
/// the model gets is kept in `outputs`, and the turn then ends (a turn whose last input is a
/// tool output or a message that joined it answers `done`). A message `say hi` makes it
/// call iapeer's `send_to_peer` to `ea`.
fn script_codex_touch(api: &OpenAiStandIn, dir: &Path, outputs: Arc<Mutex<Vec<String>>>) {
    let dir = dir.to_path_buf();
    let asked = Mutex::new(Vec::<String>::new());
    api.script(move |req| {
        let tools = req["tools"].as_array().is_some_and(|t| !t.is_empty());
        if !tools {
            return OReply::Text("ok".into());
        }
        let last = openai_last_input(req);
        // Every tool output of the conversation (a message that joined the turn may come
        // after the last one).
        for item in req["input"].as_array().into_iter().flatten() {
            if item["type"] == "function_call_output" {
                let mut seen = outputs.lock().unwrap();
                let item = item.to_string();
                if !seen.contains(&item) {
                    seen.push(item);
                }
            }
        }
        if last.contains("<msg>say hi</msg>") {
            return OReply::Call(
                "mcp__iapeer".into(),
                "send_to_peer".into(),
                json!({"personality": "ea", "message": "hi from gated"}),
            );
        }
        let text = common::openai::input_text(req);
        let name = text
            .split("<msg>touch ")
            .skip(1)
            .filter_map(|r| r.split("</msg>").next())
            .find(|n| !asked.lock().unwrap().iter().any(|a| a == n))
            .map(String::from);
        match name {
            Some(name) => {
                asked.lock().unwrap().push(name.clone());
                codex_shell_call(req, &format!("touch {}", dir.join(&name).display()))
            }
            None if last_is_tool_output(req) => OReply::Text("done".into()),
            None => OReply::Text("ok".into()),
        }
    });
}

#[test]
fn a_gated_codex_peer_asks_a_human_and_approve_deny_and_timeout_decide() {
    let (env, api) = gated_codex_world("20000");
    let dir = env.dir.path().join("made");
    std::fs::create_dir_all(&dir).unwrap();
    let outputs = Arc::new(Mutex::new(Vec::new()));
    script_codex_touch(&api, &dir, outputs.clone());

    // Approve: the command runs.
    let id = ask_touch_of(&env, "cx", "approved");
    let list = approvals(&env);
    let a = list.iter().find(|a| a["id"] == id.as_str()).unwrap();
    assert_eq!(a["identity"], "codex-cx", "{a}");
    assert_eq!(a["runtime"], "codex", "{a}");
    assert_eq!(a["tool"], "Bash", "{a}");
    let summary = a["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("touch ") && summary.ends_with("/made/approved"),
        "{a}"
    );
    // The operator's API lists it too.
    let fleet = crate::fleet::get(&env, "/fleet/v1/approvals");
    assert_eq!(fleet.status, 200);
    assert!(
        fleet.json()["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == id.as_str()),
        "{}",
        fleet.json()
    );
    // Launched without the bypass flag: on request, read-only sandbox, with the hook.
    let list = env.control(r#"{"op":"list"}"#);
    let pid = list["sessions"][0]["pid"].as_u64().unwrap();
    let argv = common::read(Path::new(&format!("/proc/{pid}/cmdline"))).replace('\0', " ");
    assert!(argv.contains("-a on-request -s read-only"), "{argv}");
    assert!(argv.contains("approval-request"), "{argv}");
    assert!(!argv.contains("dangerously"), "{argv}");
    // Nothing was written to the user's Codex config for the hook.
    let config = common::read(&env.home.join(".codex/config.toml"));
    assert!(!config.contains("session-flags"), "{config}");
    assert!(!dir.join("approved").exists(), "the command ran unapproved");
    let out = env.ok(&["approve", &id]);
    assert_eq!(out.trim(), format!("approved {id} (codex-cx): {HANDED}"));
    env.wait_until("the approved command ran", Duration::from_secs(60), |_| {
        dir.join("approved").exists()
    });
    assert!(env.has_event(
        "lifecycle",
        "approval-approved",
        &[("id", &id), ("by", "approved")]
    ));
    told(&env, &outputs, "Process exited with code 0");
    env.wait_until("the turn is over", Duration::from_secs(60), |env| {
        !env.screen("codex-cx").contains("esc to interrupt")
    });

    // Deny: the command does not run and the model is told the reason.
    let id = ask_touch_of(&env, "cx", "denied");
    // A message sent while the hook waits goes in: Codex keeps its composer open (the
    // recorded `Running hook` screen), the paste joins the turn and answers nothing.
    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "meanwhile",
        "--timeout",
        "120",
    ]);
    // The paste landed in Codex's open composer while the hook waits: the session saw Codex
    // take it (into its queue, as the turn runs) before the send was answered.
    assert!(
        out.starts_with("queued for cx (codex) — runtime") || out.starts_with("delivered to cx"),
        "{out}\n{}",
        env.diagnostics()
    );
    deny_the_waiting_prompt(&env, &id, &dir, "codex-cx");
    told(&env, &outputs, "not today");
    env.wait_until(
        "the message sent meanwhile reached the model",
        Duration::from_secs(60),
        |_| {
            api.recorded()
                .iter()
                .any(|r| common::openai::input_text(r).contains("<msg>meanwhile</msg>"))
        },
    );
    env.assert_denied(&id, &dir.join("denied"));
    assert!(approvals(&env).is_empty());

    // iapeer's own tool needs no approval: the gated peer still talks to its peers.
    env.wait_until("the turn is over", Duration::from_secs(60), |env| {
        !env.screen("codex-cx").contains("esc to interrupt")
    });
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "say hi"]);
    env.wait_until(
        "the echo of the gated peer's send_to_peer came back",
        Duration::from_secs(60),
        |_| {
            api.recorded()
                .iter()
                .any(|r| common::openai::input_text(r).contains("<msg>echo: hi from gated"))
        },
    );
    assert!(approvals(&env).is_empty());
    assert!(!env.has_event(
        "lifecycle",
        "approval-requested",
        &[("tool", "mcp__iapeer__send_to_peer")]
    ));
}

/// The fixtures of the codex half, recorded from Codex 0.171.0.
fn codex_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex-0.171.0/approvals")
}

/// The shell call a Codex model makes to run `command`, by the shell tool the request offers
/// (`shell_command` takes a string, `exec_command` a `cmd`, `shell` an argv).
fn codex_shell_call(req: &Value, command: &str) -> OReply {
    let offered = |n: &str| {
        req["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == n))
    };
    let why = "Create the file";
    if offered("exec_command") {
        OReply::Function(
            "exec_command".into(),
            json!({ "cmd": command, "sandbox_permissions": "require_escalated", "justification": why }),
        )
    } else if offered("shell_command") {
        OReply::Function(
            "shell_command".into(),
            json!({ "command": command, "sandbox_permissions": "require_escalated", "justification": why }),
        )
    } else {
        OReply::Function(
            "shell".into(),
            json!({ "command": ["bash", "-lc", command], "sandbox_permissions": "require_escalated", "justification": why }),
        )
    }
}

/// Drives a program in a 160×50 pty (Python's `pty`): argv after `--`; stops it once the
/// file `argv[1]` exists and 5 s more have passed (or after 90 s), saving the raw output to
/// `argv[2]`.
const PTY_DRIVER: &str = r#"
import os, pty, sys, time, fcntl, termios, struct, signal, select
done, raw, argv = sys.argv[1], sys.argv[2], sys.argv[4:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
out, start, seen = b"", time.time(), None
while time.time() - start < 90:
    if seen is None and os.path.exists(done):
        seen = time.time()
    if seen is not None and time.time() - seen > 5:
        break
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        try:
            out += os.read(fd, 65536)
        except OSError:
            break
os.kill(pid, signal.SIGKILL)
open(raw, "wb").write(out)
"#;

/// Records what Codex 0.171.0 gives a `PermissionRequest` hook (its stdin) under the gated
/// launch's approval policy and sandbox (`-a on-request -s read-only`), and its screen while
/// the hook runs, into `tests/fixtures/codex-0.171.0/approvals/`: the interactive Codex (`codex
/// exec` forces the `never` policy) in a pty against the stand-in, the model asking to
/// `touch` a file with escalated permissions, a hook that saves its input, waits 4 s and
/// denies. Run by name with `--ignored`.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_codex_permission_request() {
    let deny = r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"recorded"}}}"#;
    let (input, pane, outputs) = record_codex_hook(deny);
    std::fs::create_dir_all(codex_fixtures()).unwrap();
    std::fs::write(codex_fixtures().join("permission-request-exec.json"), input).unwrap();
    std::fs::write(codex_fixtures().join("hook-pending.raw"), pane).unwrap();
    assert!(
        outputs.iter().any(|r| r.contains("recorded")),
        "the model got the hook's message: {outputs:?}"
    );
}

/// Records Codex 0.171.0's own approval dialog, shown when no hook decides (the hook prints
/// nothing), into `tests/fixtures/codex-0.171.0/approvals/approval-dialog.raw`. Run by name
/// with `--ignored`.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_codex_approval_dialog() {
    let (_, pane, _) = record_codex_hook("");
    std::fs::create_dir_all(codex_fixtures()).unwrap();
    std::fs::write(codex_fixtures().join("approval-dialog.raw"), pane).unwrap();
}

/// Codex in a pty with a hook that saves its input, waits 4 s and prints `answer`: the
/// input (pretty JSON, machine paths replaced), the raw screen, the tool outputs the model
/// got.
fn record_codex_hook(answer: &str) -> (String, String, Vec<String>) {
    let python = std::env::var("IAPEER_TEST_PYTHON").expect("IAPEER_TEST_PYTHON");
    let env = TestEnv::new();
    let api = OpenAiStandIn::start();
    let cwd = env.dir.path().join("proj");
    std::fs::create_dir_all(&cwd).unwrap();
    let made = cwd.join("made");
    let codex_home = env.home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5.1\"\nmodel_provider = \"standin\"\n\n[model_providers.standin]\nname = \"Stand-in\"\nbase_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"STANDIN_API_KEY\"\nrequest_max_retries = 0\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            api.base_url(),
            cwd.display()
        ),
    )
    .unwrap();
    let outputs = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = outputs.clone();
    let command = format!("touch {}", made.display());
    api.script(move |req| {
        if last_is_tool_output(req) {
            seen.lock().unwrap().push(openai_last_input(req));
            OReply::Text("done".into())
        } else if openai_last_input(req).contains("touch made") {
            codex_shell_call(req, &command)
        } else {
            OReply::Text("ok".into())
        }
    });
    let input = env.dir.path().join("hook-input.json");
    let hook = format!(
        "cat > '{}.part'; mv '{0}.part' '{0}'; sleep 4; printf %s '{answer}'",
        input.display()
    );
    let hooks = format!(
        "hooks.PermissionRequest=[{{hooks=[{{type=\"command\",command={},timeout=60}}]}}]",
        toml_str(&hook)
    );
    let raw = env.dir.path().join("pane.raw");
    let status = std::process::Command::new(python)
        .args(["-c", PTY_DRIVER])
        .arg(&input)
        .arg(&raw)
        .arg("--")
        .arg(crate::codex::codex_bin())
        .args([
            "--no-daemon",
            "--no-alt-screen",
            "-a",
            "on-request",
            "-s",
            "read-only",
            "--dangerously-bypass-hook-trust",
            "-c",
            &hooks,
            "<msg>touch made</msg>",
        ])
        .current_dir(&cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("TERM", "xterm-256color")
        .env("HOME", &env.home)
        .env("CODEX_HOME", &codex_home)
        .env("STANDIN_API_KEY", "sk-standin-key")
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    eprintln!("tool outputs: {:?}", outputs.lock().unwrap());
    let cwd_s = cwd.display().to_string();
    let tmp = env.dir.path().display().to_string();
    let scrub = |t: String| t.replace(&cwd_s, "/srv/peer1").replace(&tmp, "/tmp/rec");
    let v: Value = serde_json::from_str(&scrub(common::read(&input))).unwrap();
    let pane = String::from_utf8_lossy(&std::fs::read(&raw).unwrap()).into_owned();
    assert!(!made.exists(), "ran without an allow");
    let outputs = outputs.lock().unwrap().clone();
    (
        serde_json::to_string_pretty(&v).unwrap() + "\n",
        scrub(pane),
        outputs,
    )
}

/// `s` as a TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn openai_last_input(req: &Value) -> String {
    req["input"]
        .as_array()
        .and_then(|a| a.last())
        .map(|i| i.to_string())
        .unwrap_or_default()
}

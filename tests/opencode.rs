//! OpenCode 1.18.33 (npm `opencode-ai`) recorded on a real pty against the OpenAI Chat
//! Completions stand-in (issue 27 item 2, groundwork): its first screen, the ready, draft,
//! paste, busy and mid-turn screens, its MCP client with a bearer token from the environment,
//! its system prompt from the config, its session records (the local server of `--port`,
//! `opencode export`) and `--session`. Run by name with `--ignored` and
//! `IAPEER_TEST_OPENCODE_BIN` set; writes `tests/fixtures/opencode-1.18.33/` (described, with
//! what was found, in its README).

use crate::common;

use common::openai_chat::{self, ChatStandIn, Reply};
use common::pty_record::{recorded_screen, McpServer, PtyRecording};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The token the MCP server must see as `Authorization: Bearer <token>`.
const TOKEN: &str = "tok-opencode-standin";
/// The marker of the agent prompt file (`agent.build.prompt`).
const AGENT_MARKER: &str = "IAPEER-AGENT-PROMPT";
/// The marker of the instructions file (`instructions`).
const INSTRUCTIONS_MARKER: &str = "IAPEER-INSTRUCTIONS";
const BOOT: Duration = Duration::from_secs(120);
const QUIET: Duration = Duration::from_millis(1500);

fn opencode_bin() -> String {
    std::env::var("IAPEER_TEST_OPENCODE_BIN").unwrap_or_else(|_| {
        panic!("IAPEER_TEST_OPENCODE_BIN is not set: install opencode-ai@1.18.33 with npm and name its bin")
    })
}

fn python() -> String {
    std::env::var("IAPEER_TEST_PYTHON")
        .expect("IAPEER_TEST_PYTHON names the Python with the MCP SDK (scripts/test.sh)")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode-1.18.33")
}

/// OpenCode in `cwd` with `home` as HOME, the models.dev fetch and the update check off, the
/// stand-in's key and the token in the environment.
fn opencode(home: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("nice");
    c.arg(opencode_bin())
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", home)
        .env("TERM", "xterm-256color")
        .env("COLORTERM", "truecolor")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("STANDIN_API_KEY", "sk-standin-key")
        .env("IAPEER_TOKEN", TOKEN);
    c
}

/// `~/.config/opencode/opencode.json`: the stand-in as an OpenAI-compatible provider and the
/// model, the agent prompt and instructions files, and the MCP server over HTTP with the
/// token from the environment in a header.
fn write_config(home: &Path, dir: &Path, api: &ChatStandIn, mcp: &McpServer) {
    let (prompt, instructions) = (dir.join("agent-prompt.md"), dir.join("instructions.md"));
    std::fs::write(&prompt, format!("{AGENT_MARKER}: you are peer o.\n")).unwrap();
    std::fs::write(
        &instructions,
        format!("{INSTRUCTIONS_MARKER}: the team's rules.\n"),
    )
    .unwrap();
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"standin": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Stand-in",
            "options": {"baseURL": api.base_url(), "apiKey": "{env:STANDIN_API_KEY}"},
            "models": {"standin-model": {"name": "Stand-in model"}},
        }},
        "model": "standin/standin-model",
        "small_model": "standin/standin-model",
        "autoupdate": false,
        "share": "disabled",
        "instructions": [instructions.display().to_string()],
        "agent": {"build": {"prompt": format!("{{file:{}}}", prompt.display())}},
        "mcp": {"iapeer": {
            "type": "remote",
            "url": mcp.url(),
            "headers": {"Authorization": "Bearer {env:IAPEER_TOKEN}"},
        }},
    });
    let path = home.join(".config/opencode/opencode.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
}

/// Answers: a title request gets "Stand-in title"; a tool result "sent"; `HOLD` holds the turn
/// 20 s; `CALL-PEER` calls the MCP server's `send_to_peer`; anything else "ok".
fn script(api: &ChatStandIn) {
    api.script(|req| {
        if openai_chat::is_title_request(req) {
            return Reply::Text("Stand-in title".into());
        }
        if openai_chat::last_is_tool_result(req) {
            return Reply::Text("sent".into());
        }
        let last = openai_chat::last_text(req);
        if last.contains("HOLD") {
            return Reply::Hold(Duration::from_secs(20), "held turn done".into());
        }
        if last.contains("CALL-PEER") {
            let name = openai_chat::declared_functions(req)
                .into_iter()
                .find(|n| n.ends_with("send_to_peer"))
                .unwrap_or_else(|| "send_to_peer".into());
            return Reply::Call(name, json!({"to": "bob", "body": "hi from opencode"}));
        }
        Reply::Text("ok".into())
    });
}

fn calls(mcp: &McpServer) -> usize {
    mcp.entries()
        .iter()
        .filter(|e| e["call"] == "send_to_peer")
        .count()
}

fn ready(s: &str) -> bool {
    s.contains("ctrl+p commands") && !s.contains("esc interrupt")
}

/// A free loopback port (bound, then released for the program to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET` on OpenCode's local server.
fn get(port: u16, path: &str) -> Value {
    let mut resp = ureq::get(&format!("http://127.0.0.1:{port}{path}"))
        .call()
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let text = resp.body_mut().read_to_string().unwrap();
    serde_json::from_str(&text).unwrap_or_else(|_| json!(text))
}

/// Run `opencode <args>` (no pty) and return its stdout.
fn run(home: &Path, cwd: &Path, args: &[&str]) -> String {
    let out = opencode(home, cwd, args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "opencode {args:?}: {}",
        common::describe(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Records OpenCode's first run, turns, mid-turn paste, MCP tool call, records and resume.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().display().to_string();
    let (home, cwd) = (dir.path().join("home"), dir.path().join("proj"));
    std::fs::create_dir_all(&cwd).unwrap();
    let api = ChatStandIn::start();
    script(&api);
    let mcp = McpServer::start(&python(), dir.path());
    write_config(&home, dir.path(), &api, &mcp);
    let out = fixtures();
    let port = free_port();
    let port_s = port.to_string();
    let mut t = PtyRecording::spawn(
        opencode(&home, &cwd, &["--port", &port_s]),
        &out,
        "first-run",
    );

    // First run: straight to the composer (no dialog).
    t.wait("the ready composer", BOOT, |s| s.contains("Ask anything"));
    t.settle(QUIET);
    t.save("01-ready");

    // A typed draft; Ctrl-U clears it.
    t.keys(b"my unfinished draft");
    t.wait_for("my unfinished draft", BOOT);
    t.settle(QUIET);
    t.save("02-draft");
    t.keys(b"\x15");
    t.wait("the draft cleared", BOOT, |s| s.contains("Ask anything"));

    // A paste of 2 lines, then one of 4 lines.
    t.paste("two line paste one\ntwo line paste two");
    t.settle(QUIET);
    t.save("03-paste-2-lines");
    // Ctrl-U clears one line only; Ctrl-C clears the whole composer (on an empty one it quits).
    t.keys(b"\x03");
    t.wait("the paste cleared", BOOT, |s| s.contains("Ask anything"));
    t.paste("HOLD line 1\nHOLD line 2\nHOLD line 3\nHOLD line 4");
    t.wait_for("[Pasted", BOOT);
    t.settle(QUIET);
    t.save("04-paste-4-lines");

    // Enter: the turn runs (held 20 s by the stand-in).
    t.keys(b"\r");
    t.wait_for("esc interrupt", BOOT);
    // A spinner redraws the busy screen all the time: no quiet moment to wait for.
    t.save("05-busy");
    assert!(
        common::poll(BOOT, || api.has_turn_with("HOLD line 4")),
        "the placeholder was sent as the pasted text"
    );

    // A message pasted mid-turn with Enter at once.
    t.paste("MID-TURN message");
    t.keys(b"\r");
    let at_once = common::poll(Duration::from_secs(8), || t.screen().contains("QUEUED"));
    eprintln!("paste and Enter at once queued the message: {at_once}");
    if !at_once {
        t.save("06-enter-right-after-paste");
        t.keys(b"\r");
        t.wait_for("QUEUED", BOOT);
    }
    t.save("07-mid-turn-queued");
    assert!(
        common::poll(BOOT, || api.has_turn_with("MID-TURN message")),
        "the queued message became a turn"
    );
    t.wait("ready after the queued turn", BOOT, |s| {
        ready(s) && !s.contains("QUEUED")
    });
    t.settle(QUIET);
    t.save("08-queued-ran-ready");

    // A call of the MCP tool.
    t.keys(b"CALL-PEER now");
    t.settle(QUIET);
    t.keys(b"\r");
    t.wait("a permission prompt or the call", BOOT, |s| {
        s.contains("Allow") || s.contains("Permission") || calls(&mcp) > 0
    });
    if calls(&mcp) == 0 {
        t.settle(QUIET);
        t.save("09-tool-permission");
        t.keys(b"\r");
    }
    assert!(
        common::poll(BOOT, || calls(&mcp) == 1),
        "the tool was called"
    );
    t.wait("the turn after the call", BOOT, |s| {
        ready(s) && s.contains("sent")
    });
    t.settle(QUIET);
    t.save("10-tool-called");

    // The local server of `--port` while the TUI runs.
    let sessions = get(port, "/session");
    std::fs::write(
        out.join("server-session-list.json"),
        serde_json::to_string_pretty(&sessions)
            .unwrap()
            .replace(&tmp, "/tmp/rec")
            .replace(&tmp[1..], "tmp/rec")
            + "\n",
    )
    .unwrap();
    let id = sessions[0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a session id in {sessions}"))
        .to_string();
    let messages = get(port, &format!("/session/{id}/message"));
    std::fs::write(
        out.join("server-session-messages.json"),
        serde_json::to_string_pretty(&messages)
            .unwrap()
            .replace(&tmp, "/tmp/rec")
            .replace(&tmp[1..], "tmp/rec")
            + "\n",
    )
    .unwrap();
    t.end();

    // What was sent.
    let turns = api.turns();
    let system = openai_chat::system_text(&turns[0]);
    let heads: Vec<Value> = mcp
        .entries()
        .into_iter()
        .filter(|e| e["method"].is_string())
        .collect();
    let requests: Vec<Value> = api
        .recorded()
        .iter()
        .map(|r| {
            json!({"model": r["model"], "stream": r["stream"],
                "title": openai_chat::is_title_request(r),
                "last_text": openai_chat::last_text(r).chars().take(80).collect::<String>(),
                "system_starts": openai_chat::system_text(r).chars().take(80).collect::<String>(),
                "functions": openai_chat::declared_functions(r)})
        })
        .collect();
    std::fs::write(
        out.join("requests.json"),
        serde_json::to_string_pretty(&requests).unwrap() + "\n",
    )
    .unwrap();
    std::fs::write(
        out.join("system-prompt.txt"),
        system
            .replace(&tmp, "/tmp/rec")
            .replace(&tmp[1..], "tmp/rec"),
    )
    .unwrap();
    std::fs::write(
        out.join("mcp-requests.jsonl"),
        mcp.entries()
            .iter()
            .map(|e| e.to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    assert!(
        system.contains(AGENT_MARKER),
        "the agent prompt is in the system prompt"
    );
    assert!(
        system.contains(INSTRUCTIONS_MARKER),
        "the instructions are in the system prompt"
    );
    assert!(
        heads
            .iter()
            .all(|e| e["authorization"] == format!("Bearer {TOKEN}")),
        "every MCP request carried the token: {heads:?}"
    );

    // The records on disk, as `opencode export` gives them.
    let export = run(&home, &cwd, &["export", &id]);
    std::fs::write(
        out.join("export.json"),
        export
            .replace(&tmp, "/tmp/rec")
            .replace(&tmp[1..], "tmp/rec"),
    )
    .unwrap();
    let mut files = Vec::new();
    let mut stack = vec![home.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let s = p.display().to_string();
            if s.contains("/node_modules") || s.contains("/.npm") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(s.replace(&tmp, "/tmp/rec").replace(&tmp[1..], "tmp/rec"));
            }
        }
    }
    files.sort();
    std::fs::write(out.join("home-files.txt"), files.join("\n") + "\n").unwrap();
    // The MCP servers' state and the providers' credentials, as the CLI reports them.
    for (name, args) in [
        ("mcp-list.txt", &["mcp", "list"][..]),
        ("providers-list.txt", &["providers", "list"][..]),
        ("session-list.txt", &["session", "list"][..]),
    ] {
        let text = run(&home, &cwd, args)
            .replace(&tmp, "/tmp/rec")
            .replace(&tmp[1..], "tmp/rec");
        std::fs::write(out.join(name), text).unwrap();
    }

    // Resume by the session id: the history comes back.
    let mut t = PtyRecording::spawn(opencode(&home, &cwd, &["--session", &id]), &out, "resume");
    t.wait("the resumed session", BOOT, |s| {
        ready(s) && s.contains("MID-TURN message")
    });
    t.settle(QUIET);
    t.save("11-resumed-ready");
    t.keys(b"RESUMED hello");
    t.settle(QUIET);
    t.keys(b"\r");
    assert!(
        common::poll(BOOT, || api.has_turn_with("RESUMED hello")),
        "the resumed turn was sent"
    );
    t.wait("the resumed turn's end", BOOT, ready);
    t.settle(QUIET);
    t.save("12-resumed-turn");
    t.end();
    let resumed = api
        .turns()
        .into_iter()
        .find(|r| openai_chat::last_text(r).contains("RESUMED"))
        .expect("the resumed turn");
    assert!(
        resumed["messages"].to_string().contains("MID-TURN message"),
        "the resumed request carries the earlier turns"
    );
}

/// The recorded screens show the signs the README's findings state.
#[test]
fn recorded_screens_show_the_signs() {
    let dir = fixtures();
    let screen = |step: &str| recorded_screen(&dir, "first-run", step);
    let s = screen("01-ready");
    assert!(ready(&s) && s.contains("Ask anything"));
    let s = screen("02-draft");
    assert!(s.contains("my unfinished draft") && !s.contains("Ask anything"));
    let s = screen("03-paste-2-lines");
    assert!(s.contains("two line paste two") && !s.contains("[Pasted"));
    assert!(screen("04-paste-4-lines").contains("[Pasted ~4 lines]"));
    let s = screen("05-busy");
    assert!(s.contains("esc interrupt") && !ready(&s) && s.contains("iapeer Connected"));
    let s = screen("07-mid-turn-queued");
    assert!(s.contains("MID-TURN message") && s.contains("QUEUED") && s.contains("esc interrupt"));
    let s = screen("08-queued-ran-ready");
    assert!(ready(&s) && !s.contains("QUEUED"));
    assert!(screen("10-tool-called").contains("⚙ iapeer_send_to_peer"));
}

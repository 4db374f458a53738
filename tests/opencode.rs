//! OpenCode 1.18.33 (npm `opencode-ai`) recorded on a real pty against the OpenAI Chat
//! Completions stand-in (issue 27 item 2, groundwork): its first screen, the ready, draft,
//! paste, busy and mid-turn screens, its MCP client with a bearer token from the environment,
//! its system prompt from the config, its session records (the local server of `--port`,
//! `opencode export`) and `--session`. Run by name with `--ignored` and
//! `IAPEER_TEST_OPENCODE_BIN` set; writes `tests/fixtures/opencode-1.18.33/` (described, with
//! what was found, in its README).

use crate::common;

use common::openai_chat::{self, ChatStandIn, Reply};
use common::pty_record::{self, recorded_screen, PtyRecording, Scratch};
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

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opencode-1.18.33")
}

/// OpenCode in the world's folder and HOME, the models.dev fetch and the update check off, the
/// stand-in's key and the token in the environment.
fn opencode(w: &Scratch, args: &[&str]) -> Command {
    let bin = pty_record::bin_from("IAPEER_TEST_OPENCODE_BIN", "opencode-ai@1.18.33");
    let env = [
        ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ("STANDIN_API_KEY", "sk-standin-key"),
        ("IAPEER_TOKEN", TOKEN),
    ];
    pty_record::cli(&bin, &w.home, &w.cwd, &env, args)
}

/// `~/.config/opencode/opencode.json`: the stand-in as an OpenAI-compatible provider and the
/// model, the agent prompt and instructions files, and the MCP server over HTTP with the
/// token from the environment in a header.
fn write_config(w: &Scratch, api: &ChatStandIn) {
    let dir = w.dir.path();
    let (prompt, instructions) = (dir.join("agent-prompt.md"), dir.join("instructions.md"));
    std::fs::write(&prompt, format!("{AGENT_MARKER}: you are peer o.\n")).unwrap();
    std::fs::write(
        &instructions,
        format!("{INSTRUCTIONS_MARKER}: the team's rules.\n"),
    )
    .unwrap();
    let mut config = api.opencode_config();
    let own = json!({
        "autoupdate": false,
        "instructions": [instructions.display().to_string()],
        "agent": {"build": {"prompt": format!("{{file:{}}}", prompt.display())}},
        "mcp": {"iapeer": {
            "type": "remote",
            "url": w.mcp.url(),
            "headers": {"Authorization": "Bearer {env:IAPEER_TOKEN}"},
        }},
    });
    config
        .as_object_mut()
        .unwrap()
        .extend(own.as_object().unwrap().clone());
    let path = w.home.join(".config/opencode/opencode.json");
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

fn ready(s: &str) -> bool {
    s.contains("ctrl+p commands") && !s.contains("esc interrupt")
}

/// Type `text`, let the screen settle, press Enter; wait until its turn reaches the model.
fn type_and_submit(t: &mut PtyRecording, api: &ChatStandIn, text: &str) {
    t.keys(text.as_bytes());
    t.settle(QUIET);
    t.keys(b"\r");
    assert!(
        common::poll(BOOT, || api.has_turn_with(text)),
        "the turn of {text:?} was sent"
    );
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

/// Run `opencode <args>` (no pty) to its end and return its stdout.
fn run(w: &Scratch, args: &[&str]) -> String {
    let out = opencode(w, args).stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "opencode {args:?}: {}",
        common::describe(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes the config pointing at `api`, runs `opencode --port <a free port>` in a pty
/// recorded as `name`, and waits for its ready composer to settle: the port (for `get`) and
/// the recording.
fn start_recording(w: &Scratch, api: &ChatStandIn, name: &str) -> (u16, PtyRecording) {
    start_recording_with(w, api, name, json!({}))
}

/// [`start_recording`] with `extra`'s keys set over the recorder's usual config (a gated
/// peer's `permission` rules).
fn start_recording_with(
    w: &Scratch,
    api: &ChatStandIn,
    name: &str,
    extra: Value,
) -> (u16, PtyRecording) {
    write_config(w, api);
    if let Some(extra) = extra.as_object().filter(|o| !o.is_empty()) {
        let path = w.home.join(".config/opencode/opencode.json");
        let mut config: Value = serde_json::from_str(&common::read(&path)).unwrap();
        config.as_object_mut().unwrap().extend(extra.clone());
        std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    }
    let port = free_port();
    let port_s = port.to_string();
    let t = PtyRecording::spawn(opencode(w, &["--port", &port_s]), &w.out, name);
    t.wait("the ready composer", BOOT, |s| s.contains("Ask anything"));
    t.settle(QUIET);
    (port, t)
}

/// Records OpenCode's first run, turns, mid-turn paste, MCP tool call, records and resume.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode() {
    let w = Scratch::new(fixtures());
    let api = ChatStandIn::start();
    script(&api);
    // First run: straight to the composer (no dialog).
    let (port, mut t) = start_recording(&w, &api, "first-run");
    t.save("01-ready");

    // A typed draft; Ctrl-U clears it.
    t.keys(b"my unfinished draft");
    t.shot("my unfinished draft", "02-draft");
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
    t.shot("[Pasted", "04-paste-4-lines");

    // Enter: the turn runs (held 20 s by the stand-in).
    t.keys(b"\r");
    t.shot_now("esc interrupt", "05-busy");
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
        s.contains("Allow") || s.contains("Permission") || w.calls() > 0
    });
    if w.calls() == 0 {
        t.settle(QUIET);
        t.save("09-tool-permission");
        t.keys(b"\r");
    }
    assert!(common::poll(BOOT, || w.calls() == 1), "the tool was called");
    t.wait("the turn after the call", BOOT, |s| {
        ready(s) && s.contains("sent")
    });
    t.settle(QUIET);
    t.save("10-tool-called");

    // The local server of `--port` while the TUI runs.
    let sessions = get(port, "/session");
    w.write_json("server-session-list.json", &sessions);
    let id = sessions[0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a session id in {sessions}"))
        .to_string();
    let messages = get(port, &format!("/session/{id}/message"));
    w.write_json("server-session-messages.json", &messages);
    t.end();

    // What was sent.
    let turns = api.turns();
    let system = openai_chat::system_text(&turns[0]);
    let requests: Vec<Value> = api
        .recorded()
        .iter()
        .map(|r| &r.body)
        .map(|r| {
            json!({"model": r["model"], "stream": r["stream"],
                "title": openai_chat::is_title_request(r),
                "last_text": openai_chat::last_text(r).chars().take(80).collect::<String>(),
                "system_starts": openai_chat::system_text(r).chars().take(80).collect::<String>(),
                "functions": openai_chat::declared_functions(r)})
        })
        .collect();
    w.write_json("requests.json", &json!(requests));
    w.write("system-prompt.txt", &system);
    w.save_mcp_log(TOKEN);
    assert!(
        system.contains(AGENT_MARKER),
        "the agent prompt is in the system prompt"
    );
    assert!(
        system.contains(INSTRUCTIONS_MARKER),
        "the instructions are in the system prompt"
    );

    // The records on disk, as `opencode export` gives them.
    w.write("export.json", &run(&w, &["export", &id]));
    let files: Vec<String> = pty_record::files_under(&w.home, |d| {
        d.ends_with("node_modules") || d.ends_with(".npm")
    })
    .iter()
    .map(|p| p.display().to_string())
    .collect();
    w.write("home-files.txt", &(files.join("\n") + "\n"));
    // The MCP servers' state and the providers' credentials, as the CLI reports them.
    for (name, args) in [
        ("mcp-list.txt", &["mcp", "list"][..]),
        ("providers-list.txt", &["providers", "list"][..]),
        ("session-list.txt", &["session", "list"][..]),
    ] {
        w.write(name, &run(&w, args));
    }

    // Resume by the session id: the history comes back.
    let mut t = PtyRecording::spawn(opencode(&w, &["--session", &id]), &w.out, "resume");
    t.wait("the resumed session", BOOT, |s| {
        ready(s) && s.contains("MID-TURN message")
    });
    t.settle(QUIET);
    t.save("11-resumed-ready");
    type_and_submit(&mut t, &api, "RESUMED hello");
    t.wait("the resumed turn's end", BOOT, ready);
    t.settle(QUIET);
    t.save("12-resumed-turn");

    // Esc during a turn: once, then (if still busy) again.
    t.paste("HOLD interrupt me");
    t.keys(b"\r");
    t.shot_now("esc interrupt", "13-busy-before-esc");
    t.keys(b"\x1b");
    // The spinner never lets the screen go still: wait for the first Esc's answer instead.
    t.wait("the first Esc's answer", BOOT, |s| {
        s.contains("esc again to interrupt") || ready(s)
    });
    t.save("14-after-one-esc");
    if t.screen().contains("esc again to interrupt") {
        t.keys(b"\x1b");
        t.wait("the turn interrupted", BOOT, ready);
    }
    t.settle(QUIET);
    t.save("15-after-esc");
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
    let resumed = |step: &str| recorded_screen(&dir, "resume", step);
    assert!(resumed("14-after-one-esc").contains("esc again to interrupt"));
    let s = resumed("15-after-esc");
    assert!(s.contains("· interrupted") && ready(&s));
}

/// Records what OpenCode shows and keeps when the model API refuses a turn: one session per
/// case, its turn answered 429, 500 or 401 by the stand-in (the title request answered).
/// Writes `api-error-<case>.raw` / `.marks.json`, the screens `api-error-<case>.screen.txt`
/// (soon after the refusal) and `api-error-<case>-later.screen.txt` (20 s later: a retry
/// under way or given up), and the session's messages from its server
/// (`api-error-<case>.messages.json`) and its status then (`GET /session/status`,
/// `api-error-<case>.status.json`), with how many turn requests were made.
fn record_opencode_api_error(status: u16, case: &str) {
    let w = Scratch::new(fixtures());
    let api = ChatStandIn::start();
    api.script(move |req| {
        if openai_chat::is_title_request(req) {
            Reply::Text("Stand-in title".into())
        } else if openai_chat::last_text(req).contains("REFUSED") {
            Reply::Error(status)
        } else {
            Reply::Text("ok".into())
        }
    });
    let name = format!("api-error-{case}");
    let (port, mut t) = start_recording(&w, &api, &name);
    type_and_submit(&mut t, &api, "REFUSED turn");
    t.settle(Duration::from_secs(3));
    t.save(&name);
    // Time is the thing recorded: the screen 20 s after the refusal.
    std::thread::sleep(Duration::from_secs(20));
    t.save(&format!("{name}-later"));
    w.write_json(
        &format!("{name}.status.json"),
        &get(port, "/session/status"),
    );
    let sessions = get(port, "/session");
    let id = sessions[0]["id"]
        .as_str()
        .expect("a session id")
        .to_string();
    let messages = get(port, &format!("/session/{id}/message"));
    w.write_json(&format!("{name}.messages.json"), &messages);
    let turns = api.turns().len();
    eprintln!("{status}: {turns} turn request(s)");
    w.write(&format!("{name}.requests.txt"), &format!("{turns}\n"));
    t.end();
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode_api_error_429() {
    record_opencode_api_error(429, "rate-limit");
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode_api_error_500() {
    record_opencode_api_error(500, "server-error");
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode_api_error_401() {
    record_opencode_api_error(401, "auth");
}

/// Records `opencode auth list` (what iapeer's login check runs; stdout as written, colour
/// codes included) in a fresh HOME: no credential (`auth-list-none.txt`), a provider's key in
/// the environment (`OPENAI_API_KEY`, `auth-list-env.txt`), and a key in its `auth.json`
/// (`~/.local/share/opencode/auth.json` `{"anthropic": {"type": "api", "key": …}}`, the
/// shape its code reads: `auth-list-credential.txt`). Exit statuses in
/// `auth-list-exit.txt`.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode_auth_list() {
    let bin = pty_record::bin_from("IAPEER_TEST_OPENCODE_BIN", "opencode-ai@1.18.33");
    let mut exits = Vec::new();
    for case in ["none", "env", "credential"] {
        let w = Scratch::new(fixtures());
        let mut env = vec![
            ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ];
        if case == "env" {
            env.push(("OPENAI_API_KEY", "sk-standin"));
        }
        if case == "credential" {
            let auth = w.home.join(".local/share/opencode/auth.json");
            std::fs::create_dir_all(auth.parent().unwrap()).unwrap();
            let key = json!({"anthropic": {"type": "api", "key": "sk-ant-standin"}});
            std::fs::write(&auth, key.to_string()).unwrap();
        }
        let out = pty_record::cli(&bin, &w.home, &w.cwd, &env, &["auth", "list"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        exits.push(format!("{case}: {:?}", out.status.code()));
        w.write(
            &format!("auth-list-{case}.txt"),
            &String::from_utf8_lossy(&out.stdout),
        );
    }
    let w = Scratch::new(fixtures());
    w.write("auth-list-exit.txt", &(exits.join("\n") + "\n"));
}

/// Records a paged read of a session's messages on the local server of `--port` (issue 27
/// item 5: the daemon's confirmer read the whole conversation at every look, megabytes by
/// the 400th delivery): four turns, then `GET /session/<id>/message?limit=2` with its
/// headers beside the whole list. Writes `server-session-messages-limit-2.json`,
/// `server-session-messages-limit-2.headers.txt` and `server-session-messages-all-4.json`
/// (and the pty log `pages.raw`). Run by name with `--ignored`.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode_message_pages() {
    let w = Scratch::new(fixtures());
    let api = ChatStandIn::start();
    script(&api);
    let (port, mut t) = start_recording(&w, &api, "pages");
    for n in 1..=4 {
        let text = format!("PAGE turn {n}");
        t.paste(&text);
        t.settle(QUIET);
        t.keys(b"\r");
        assert!(
            common::poll(BOOT, || api.has_turn_with(&text)),
            "turn {n} was sent"
        );
        t.wait("the turn's end", BOOT, ready);
        t.settle(QUIET);
    }
    let sessions = get(port, "/session");
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    w.write_json(
        "server-session-messages-all-4.json",
        &get(port, &format!("/session/{id}/message")),
    );
    let path = format!("/session/{id}/message?limit=2");
    let mut resp = ureq::get(&format!("http://127.0.0.1:{port}{path}"))
        .call()
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let mut heads = format!("GET {path}\n{}\n", resp.status());
    for name in ["link", "x-next-cursor", "content-type"] {
        if let Some(v) = resp.headers().get(name) {
            heads += &format!("{name}: {}\n", v.to_str().unwrap_or("?"));
        }
    }
    let page: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    w.write_json("server-session-messages-limit-2.json", &page);
    w.write("server-session-messages-limit-2.headers.txt", &heads);
    t.end();
}

/// Records OpenCode 1.18.33 when the answers to its terminal queries come 2 s late (as on a
/// loaded machine; Gemini CLI 0.61.0 takes such answers for typed keys, see
/// `gemini-cli-0.61.0/late-answers.txt`): which queries it sends, what its composer shows once
/// the answers came, and whether a typed message then reaches the model as typed. Session
/// `late-2000ms`, notes in `late-answers.txt`.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode_late_answers() {
    let w = Scratch::new(fixtures());
    let api = ChatStandIn::start();
    script(&api);
    write_config(&w, &api);
    let port = free_port().to_string();
    let late = Duration::from_secs(2);
    let mut t = PtyRecording::spawn_answering_late(
        opencode(&w, &["--port", &port]),
        &w.out,
        "late-2000ms",
        late,
    );
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut notes = vec![format!(
        "# late-2000ms: answers 2000 ms late; load average at the start: {}",
        load().trim()
    )];
    t.wait("the ready composer", BOOT, |s| s.contains("Ask anything"));
    t.wait_answers_written(late + Duration::from_secs(30));
    t.settle(Duration::from_secs(3));
    t.save("late-2000ms-ready");
    let raw = t.raw();
    let sent: Vec<String> = [
        &b"\x1b[6n"[..],
        b"\x1b[c",
        b"\x1b[0c",
        b"\x1b[>c",
        b"\x1b[>0c",
        b"\x1b[>q",
        b"\x1b[>0q",
        b"\x1b[?u",
        b"\x1b]10;?",
        b"\x1b]11;?",
    ]
    .iter()
    .filter(|q| raw.windows(q.len()).any(|w| w == **q))
    .map(|q| String::from_utf8_lossy(&q[1..]).into_owned())
    .collect();
    notes.push(format!("queries it sent (ESC left out): {sent:?}"));
    let s = t.screen();
    notes.push(format!(
        "placeholder `Ask anything` shown: {}; answer text on screen: {}",
        s.contains("Ask anything"),
        ["iapeer(", "62;22c", "0u", "rgb:"]
            .iter()
            .filter(|n| s.contains(**n))
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    type_and_submit(&mut t, &api, "LATE typed message");
    let last = api
        .turns()
        .iter()
        .rev()
        .find(|r| openai_chat::last_text(r).contains("LATE typed message"))
        .map(openai_chat::last_text)
        .unwrap_or_default();
    notes.push(format!("the model got: {last:?}"));
    t.wait("ready after the turn", BOOT, ready);
    t.settle(QUIET);
    t.save("late-2000ms-delivered");
    notes.push(format!("load average at the end: {}", load().trim()));
    eprintln!("{}", notes.join("\n"));
    w.write("late-answers.txt", &(notes.join("\n") + "\n"));
    t.end();
}

/// Records `/compact` typed in OpenCode's TUI after two turns: the screens while and after it
/// runs (`20-compact-typed`, `21-compact-running`, `22-compacted`, `23-after`), the session's
/// messages from its server after it (`compact-messages.json`) and the requests
/// (`compact-requests.json`: whether streamed, tools, last text).
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode_compact() {
    let w = Scratch::new(fixtures());
    let api = ChatStandIn::start();
    script(&api);
    let (port, mut t) = start_recording(&w, &api, "compact");
    for n in 1..=2 {
        type_and_submit(&mut t, &api, &format!("TURN {n} remember colour {n}0"));
        t.wait("the turn's end", BOOT, ready);
    }
    t.settle(QUIET);
    let before = api.recorded().len();
    t.keys(b"/compact");
    t.settle(QUIET);
    t.save("20-compact-typed");
    t.keys(b"\r");
    let sent = common::poll(Duration::from_secs(5), || api.recorded().len() > before);
    eprintln!("one Enter sent a request: {sent}");
    t.save("21-compact-running");
    if !sent {
        t.keys(b"\r");
        assert!(
            common::poll(BOOT, || api.recorded().len() > before),
            "compact asked the model"
        );
    }
    t.wait("ready after the compaction", BOOT, ready);
    t.settle(QUIET);
    t.save("22-compacted");
    let sessions = get(port, "/session");
    let id = sessions[0]["id"]
        .as_str()
        .expect("a session id")
        .to_string();
    w.write_json(
        "compact-messages.json",
        &get(port, &format!("/session/{id}/message")),
    );
    type_and_submit(&mut t, &api, "AFTER compact");
    t.wait("the turn's end", BOOT, ready);
    t.settle(QUIET);
    t.save("23-after");
    t.end();
    let requests: Vec<Value> = api
        .recorded()
        .iter()
        .map(|r| &r.body)
        .map(|r| {
            json!({"stream": r["stream"], "title": openai_chat::is_title_request(r),
                "messages": r["messages"].as_array().map_or(0, Vec::len),
                "last_text": openai_chat::last_text(r).chars().take(120).collect::<String>(),
                "system_starts": openai_chat::system_text(r).chars().take(80).collect::<String>(),
                "functions": openai_chat::declared_functions(r).len()})
        })
        .collect();
    w.write_json("compact-requests.json", &json!(requests));
}

/// The `permission` rules of a gated peer's launch config (`src/runtime/opencode.rs`,
/// `gated_permission`): every tool asks but the read-only ones (`read` keeps OpenCode's own
/// rules for `.env` files) and iapeer's own MCP server's (`iapeer_*`).
fn gated_permission() -> Value {
    json!({
        "*": "ask",
        "read": {"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"},
        "glob": "allow", "grep": "allow", "list": "allow", "lsp": "allow",
        "todowrite": "allow", "question": "allow", "plan_enter": "allow",
        "iapeer_*": "allow",
    })
}

/// Whether OpenCode's permission prompt is on the screen.
fn permission_shown(s: &str) -> bool {
    s.contains("Permission required")
}

/// Records OpenCode's permission prompt (issue 27 item 2, approvals): the config's
/// `permission` rules of a gated peer ([`gated_permission`], written as
/// `permission-config.json`); a model's `bash` call then asks on the screen
/// (`40-permission-bash`), and its pending request is listed by its server (`GET
/// /permission`, `permission-pending.json`); Right moves the marker (`41-permission-right`),
/// Left back, Enter on `Allow once` runs the command (`42-allowed-ran`); a second call is
/// refused with Esc (`43-permission-again`, `44-rejected`); iapeer's own MCP tool runs without
/// asking (`45-own-tool-called`). A third call is answered through the server (`POST
/// /permission/<id>/reply {"reply": "once"}`, `permission-reply.json`): the prompt goes from
/// the screen (`46-permission-api`, `47-replied-by-api`).
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_opencode_permission() {
    let w = Scratch::new(fixtures());
    let api = ChatStandIn::start();
    api.script(|req| {
        if openai_chat::is_title_request(req) {
            return Reply::Text("Stand-in title".into());
        }
        if openai_chat::last_is_tool_result(req) {
            return Reply::Text("tool done".into());
        }
        let last = openai_chat::last_text(req);
        for (word, file) in [
            ("RUN-ALLOWED", "allowed-file"),
            ("RUN-REJECTED", "rejected-file"),
            ("RUN-BY-API", "api-file"),
        ] {
            if last.contains(word) {
                let command = format!("touch {file}");
                return Reply::Call(
                    "bash".into(),
                    json!({"command": command, "description": format!("Make {file}")}),
                );
            }
        }
        if last.contains("CALL-PEER") {
            return Reply::Call(
                "iapeer_send_to_peer".into(),
                json!({"to": "bob", "body": "hi from a gated opencode"}),
            );
        }
        Reply::Text("ok".into())
    });
    // The gated rules over the recorder's usual config.
    w.write_json("permission-config.json", &gated_permission());
    let extra = json!({"permission": gated_permission()});
    let (port, mut t) = start_recording_with(&w, &api, "permission", extra);

    type_and_submit(&mut t, &api, "RUN-ALLOWED please");
    t.wait("the permission prompt", BOOT, permission_shown);
    t.settle(QUIET);
    t.save("40-permission-bash");
    w.write_json("permission-pending.json", &get(port, "/permission"));
    assert!(!w.cwd.join("allowed-file").exists(), "ran before an answer");
    t.keys(b"\x1b[C");
    t.settle(QUIET);
    t.save("41-permission-right");
    t.keys(b"\x1b[D");
    t.settle(QUIET);
    t.keys(b"\r");
    assert!(
        common::poll(BOOT, || w.cwd.join("allowed-file").exists()),
        "Enter on Allow once ran the command"
    );
    t.wait("the turn's end", BOOT, |s| ready(s) && !permission_shown(s));
    t.settle(QUIET);
    t.save("42-allowed-ran");

    type_and_submit(&mut t, &api, "RUN-REJECTED please");
    t.wait("the permission prompt", BOOT, permission_shown);
    t.settle(QUIET);
    t.save("43-permission-again");
    t.keys(b"\x1b");
    t.wait("the prompt gone", BOOT, |s| !permission_shown(s));
    t.wait("the turn's end", BOOT, ready);
    t.settle(QUIET);
    t.save("44-rejected");
    assert!(
        !w.cwd.join("rejected-file").exists(),
        "the rejected command ran"
    );

    type_and_submit(&mut t, &api, "CALL-PEER now");
    assert!(
        common::poll(BOOT, || w.calls() == 1),
        "the own tool was called"
    );
    t.wait("the turn after the call", BOOT, |s| {
        ready(s) && s.contains("tool done")
    });
    t.settle(QUIET);
    t.save("45-own-tool-called");

    type_and_submit(&mut t, &api, "RUN-BY-API please");
    t.wait("the permission prompt", BOOT, permission_shown);
    t.settle(QUIET);
    t.save("46-permission-api");
    let pending = get(port, "/permission");
    let id = pending[0]["id"]
        .as_str()
        .expect("a pending request")
        .to_string();
    let mut resp = ureq::post(&format!("http://127.0.0.1:{port}/permission/{id}/reply"))
        .header("Content-Type", "application/json")
        .send(json!({"reply": "once"}).to_string())
        .unwrap();
    let answer = resp.body_mut().read_to_string().unwrap();
    w.write_json(
        "permission-reply.json",
        &json!({"status": resp.status().as_u16(), "body": answer,
            "pending_after": get(port, "/permission")}),
    );
    assert!(
        common::poll(BOOT, || w.cwd.join("api-file").exists()),
        "the reply through the server ran the command"
    );
    t.wait("the turn's end", BOOT, |s| ready(s) && !permission_shown(s));
    t.settle(QUIET);
    t.save("47-replied-by-api");
    t.end();
}

//! Gemini CLI 0.61.0 (npm `@google/gemini-cli`) recorded on a real pty against the Gemini API
//! stand-in (issue 27 item 2, groundwork): its first-run dialogs and the keys that answer
//! them, the ready, draft, paste, busy and mid-turn screens, its MCP client with a bearer
//! token from the environment, its session records and `--resume`. Run by name with
//! `--ignored` and `IAPEER_TEST_GEMINI_BIN` set; writes `tests/fixtures/gemini-cli-0.61.0/`
//! (described, with what was found, in its README).

use crate::common;

use common::gemini::{self, GeminiStandIn, Reply};
use common::pty_record::{self, recorded_screen, PtyRecording, Scratch};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The token the MCP server must see as `Authorization: Bearer <token>`.
const TOKEN: &str = "tok-gemini-standin";
/// The marker of the system prompt file named by `GEMINI_SYSTEM_MD`.
const SYSTEM_MARKER: &str = "IAPEER-LAYERED-SYSTEM-PROMPT";
const BOOT: Duration = Duration::from_secs(120);
const QUIET: Duration = Duration::from_millis(1500);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemini-cli-0.61.0")
}

/// A recorder's world (its fixture folder this one's) with `system.md`, and the stand-in.
fn world() -> (Scratch, GeminiStandIn) {
    let w = Scratch::new(fixtures());
    std::fs::write(system_md(&w), format!("{SYSTEM_MARKER}: you are peer g.\n")).unwrap();
    (w, GeminiStandIn::start())
}

fn system_md(w: &Scratch) -> PathBuf {
    w.dir.path().join("system.md")
}

/// Gemini CLI in the world's folder and HOME, the stand-in as its API (an API key in
/// `GEMINI_API_KEY`), `system.md` as its system prompt and the token in `IAPEER_TOKEN`.
fn gemini(w: &Scratch, api: &GeminiStandIn, args: &[&str]) -> Command {
    let bin = pty_record::bin_from("IAPEER_TEST_GEMINI_BIN", "@google/gemini-cli@0.61.0");
    let system_md = system_md(w);
    let env = [
        ("GEMINI_API_KEY", "standin-key"),
        ("GOOGLE_GEMINI_BASE_URL", &api.url()),
        ("GEMINI_SYSTEM_MD", system_md.to_str().unwrap()),
        ("IAPEER_TOKEN", TOKEN),
    ];
    pty_record::cli(&bin, &w.home, &w.cwd, &env, args)
}

/// `~/.gemini/settings.json`: the MCP server over streamable HTTP with the token from the
/// environment in a header, usage statistics off, and the MCP server `trust`ed (its tools run
/// without a confirmation) when `trusted`.
fn write_settings(w: &Scratch, trusted: bool) {
    let path = w.home.join(".gemini/settings.json");
    let mut settings: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    settings["mcpServers"] = json!({"iapeer": {
        "httpUrl": w.mcp.url(),
        "headers": {"Authorization": "Bearer ${IAPEER_TOKEN}"},
        "trust": trusted,
    }});
    settings["privacy"] = json!({"usageStatisticsEnabled": false});
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&settings).unwrap()).unwrap();
}

/// Answers: a function response gets "sent"; `HOLD` holds the turn 10 s; `CALL-PEER` calls the
/// MCP server's `send_to_peer`; anything else "ok".
fn script(api: &GeminiStandIn) {
    api.script(|req| {
        if gemini::last_is_function_response(req) {
            return Reply::Text("sent".into());
        }
        let last = gemini::last_text(req);
        if last.contains("HOLD") {
            return Reply::Hold(Duration::from_secs(10), "held turn done".into());
        }
        if last.contains("CALL-PEER") {
            let name = gemini::declared_functions(req)
                .into_iter()
                .find(|n| n.ends_with("send_to_peer"))
                .unwrap_or_else(|| "send_to_peer".into());
            return Reply::Call(name, json!({"to": "bob", "body": "hi from gemini"}));
        }
        Reply::Text("ok".into())
    });
}

/// Lines of the session files under `~/.gemini/tmp`, with `tmp` replaced by `/tmp/rec`.
fn session_files(home: &Path) -> Vec<PathBuf> {
    pty_record::files_under(&home.join(".gemini/tmp"), |_| false)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/chats/"))
        .collect()
}

/// Press Enter until `done` holds (at most 3 times, 10 s apart): the first Enter on a slash
/// command with its completion menu open may only take the completion. Prints how many.
fn submit(t: &mut PtyRecording, what: &str, done: impl Fn(&str) -> bool) {
    for n in 1..=3 {
        t.keys(b"\r");
        if common::poll(Duration::from_secs(10), || done(&t.screen())) {
            eprintln!("{what}: {n} Enter(s)");
            return;
        }
    }
    t.wait(what, BOOT, done);
}

fn ready(s: &str) -> bool {
    s.contains("Type your message")
}

/// Records Gemini CLI's first run, turns, mid-turn paste, MCP tool call and resume.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_cli() {
    let (w, api) = world();
    script(&api);
    write_settings(&w, false);
    let mut t = PtyRecording::spawn(gemini(&w, &api, &[]), &w.out, "first-run");

    // First run: folder trust, then the auth choice, then the key (prefilled from the env).
    t.shot("Do you trust the files in this folder?", "01-trust-dialog");
    t.keys(b"\r");
    t.shot("How would you like to authenticate", "02-auth-dialog");
    t.keys(b"\r");
    t.shot("Enter Gemini API Key", "03-api-key-dialog");
    t.keys(b"\r");
    t.wait("the ready composer", BOOT, ready);
    t.settle(QUIET);
    t.save("04-ready");

    // A typed draft; Ctrl-C clears it.
    t.keys(b"my unfinished draft");
    t.shot("my unfinished draft", "05-draft");
    t.keys(b"\x03");
    t.wait("the draft cleared", BOOT, |s| {
        !s.contains("my unfinished draft") && ready(s)
    });

    // A paste of 4 lines is drawn in full; one of 8 lines becomes a placeholder.
    t.paste("short paste one\nshort paste two\nshort paste three\nshort paste four");
    t.shot("short paste four", "06-paste-4-lines");
    t.keys(b"\x03");
    t.wait("the paste cleared", BOOT, |s| {
        !s.contains("short paste") && ready(s)
    });
    let long: String = (1..=8).map(|i| format!("HOLD line {i}\n")).collect();
    let long = long.trim_end().to_string();
    t.paste(&long);
    t.shot("[Pasted Text", "07-paste-8-lines");

    // Enter: the turn runs (held 10 s by the stand-in).
    t.keys(b"\r");
    t.shot_now("esc to cancel", "08-busy");
    assert!(
        common::poll(BOOT, || api.has_turn_with("HOLD line 8")),
        "the placeholder was sent as the pasted text"
    );

    // A message pasted mid-turn, Enter at once: an Enter within 40 ms of a paste is taken as
    // a newline (no kitty keyboard protocol), so the message stays in the composer.
    t.paste("MID-TURN message");
    t.keys(b"\r");
    // The spinner never lets the screen go still: wait for the paste to be drawn instead.
    t.wait("the mid-turn paste drawn", BOOT, |s| {
        s.contains("MID-TURN message")
    });
    t.save("09-enter-right-after-paste");
    // Enter again, later: queued.
    t.keys(b"\r");
    t.shot_now("Queued", "10-mid-turn-queued");
    assert!(
        common::poll(BOOT, || api.has_turn_with("MID-TURN message")),
        "the queued message became a turn"
    );
    t.wait("ready after the queued turn", BOOT, |s| {
        ready(s) && !s.contains("esc to cancel") && !s.contains("Queued")
    });
    t.settle(QUIET);
    t.save("11-queued-ran-ready");

    // The MCP servers and their tools.
    t.keys(b"/mcp list");
    t.settle(QUIET);
    submit(&mut t, "the MCP list", |s| s.contains("send_to_peer"));
    t.settle(QUIET);
    t.save("12-mcp-list");

    // A call of the MCP tool: confirmed by a dialog (the server is not trusted).
    t.keys(b"CALL-PEER now");
    t.settle(QUIET);
    submit(&mut t, "a confirmation or the call", |s| {
        s.contains("Allow") || w.calls() > 0
    });
    if w.calls() == 0 {
        t.settle(QUIET);
        t.save("13-tool-confirmation");
        t.keys(b"\r");
    }
    assert!(common::poll(BOOT, || w.calls() == 1), "the tool was called");
    t.wait("the turn after the call", BOOT, |s| {
        s.contains("sent") && ready(s) && !s.contains("esc to cancel")
    });
    t.settle(QUIET);
    t.save("14-tool-called");
    t.end();

    // What was sent, and where it was kept.
    let turns = api.turns();
    let first = &turns[0];
    assert!(
        gemini::system_text(first).contains(SYSTEM_MARKER),
        "GEMINI_SYSTEM_MD is the system prompt"
    );
    w.save_mcp_log(TOKEN);
    let requests: Vec<Value> = api
        .recorded()
        .iter()
        .map(|r| {
            json!({"method": r.method, "path": r.path, "api_key": r.header("x-goog-api-key"),
                "last_text": gemini::last_text(&r.body).chars().take(80).collect::<String>(),
                "system_starts": gemini::system_text(&r.body).chars().take(60).collect::<String>(),
                "functions": gemini::declared_functions(&r.body)})
        })
        .collect();
    w.write_json("requests.json", &json!(requests));
    let sessions = session_files(&w.home);
    eprintln!("session files: {sessions:?}");
    let main = sessions
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("a session file")
        .clone();
    let text = common::read(&main);
    w.write("session.jsonl", &text);
    w.write("session-path.txt", &format!("{}\n", main.display()));
    let head: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let id = head["sessionId"].as_str().expect("sessionId").to_string();

    // Resume by the session id, the MCP server trusted now: the history comes back and a
    // call runs without a confirmation.
    write_settings(&w, true);
    let mut t = PtyRecording::spawn(gemini(&w, &api, &["--resume", &id]), &w.out, "resume");
    t.wait("the resumed ready composer", BOOT, |s| {
        ready(s) && s.contains("MID-TURN message")
    });
    t.settle(QUIET);
    t.save("15-resumed-ready");
    t.keys(b"RESUMED CALL-PEER");
    t.settle(QUIET);
    submit(&mut t, "the trusted call", |_| w.calls() == 2);
    assert!(
        common::poll(BOOT, || w.calls() == 2),
        "the trusted tool was called"
    );
    t.wait("the turn after the call", BOOT, |s| {
        ready(s) && !s.contains("esc to cancel")
    });
    t.settle(QUIET);
    t.save("16-resumed-trusted-call");
    t.end();
    let resumed = api
        .turns()
        .into_iter()
        .find(|r| gemini::last_text(r).contains("RESUMED"))
        .expect("the resumed turn");
    let history = serde_json::to_string(&resumed["contents"]).unwrap();
    assert!(
        history.contains("MID-TURN message"),
        "the resumed request carries the earlier turns"
    );
    // Where the resumed session wrote its records.
    let after: Vec<String> = session_files(&w.home)
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    w.write("session-files-after-resume.txt", &(after.join("\n") + "\n"));
    for p in session_files(&w.home) {
        if !sessions.contains(&p) {
            w.write("session-resumed.jsonl", &common::read(&p));
        }
    }
    w.write("session-after-resume.jsonl", &common::read(&main));
}

/// Records Gemini CLI started the way an adapter can start it: `--skip-trust`, and
/// `security.auth.selectedType = "gemini-api-key"` in a fresh HOME's settings with the key in
/// `GEMINI_API_KEY` (what the first run's dialogs wrote). Also `gemini mcp list`.
/// [`world`] whose HOME has an API-key login preset and the MCP server trusted in
/// `~/.gemini/settings.json`.
fn preconfigured_world() -> (Scratch, GeminiStandIn) {
    let (w, api) = world();
    std::fs::create_dir_all(w.home.join(".gemini")).unwrap();
    std::fs::write(
        w.home.join(".gemini/settings.json"),
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}).to_string(),
    )
    .unwrap();
    write_settings(&w, true);
    (w, api)
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_preconfigured() {
    let (w, api) = preconfigured_world();
    w.write(
        "mcp-list.txt",
        &w.output(gemini(&w, &api, &["mcp", "list"])),
    );
    let mut t = PtyRecording::spawn(gemini(&w, &api, &["--skip-trust"]), &w.out, "preconfigured");
    t.wait("the ready composer", BOOT, |s| {
        ready(s) || s.contains("Enter Gemini API Key") || s.contains("Do you trust")
    });
    t.settle(QUIET);
    t.save("17-preconfigured-ready");
    assert!(ready(&t.screen()), "no dialog");

    // Delivery as the daemon delivers: one bracketed paste, 300 ms, one Enter.
    paste_as_the_daemon(&mut t, "PEER message one\nsecond line");
    t.keys(b"\r");
    let one = common::poll(Duration::from_secs(10), || {
        api.has_turn_with("PEER message one")
    });
    eprintln!("paste, 300 ms, one Enter submitted it: {one}");
    if !one {
        t.save("18a-paste-enter-not-submitted");
        submit(&mut t, "the pasted message", |_| {
            api.has_turn_with("PEER message one")
        });
    }
    t.wait("ready after the turn", BOOT, |s| {
        ready(s) && !s.contains("esc to cancel")
    });
    t.settle(QUIET);
    t.save("18-preconfigured-delivered");

    // Typed text and one Enter.
    t.keys(b"typed message");
    t.settle(QUIET);
    t.keys(b"\r");
    let one = common::poll(Duration::from_secs(10), || {
        api.has_turn_with("typed message")
    });
    eprintln!("typed text, one Enter submitted it: {one}");
    t.settle(QUIET);
    t.save("19-preconfigured-typed-enter");
    if !one {
        submit(&mut t, "the typed message", |_| {
            api.has_turn_with("typed message")
        });
    }

    // The MCP server under --skip-trust.
    t.wait("ready", BOOT, |s| ready(s) && !s.contains("esc to cancel"));
    t.keys(b"/mcp list");
    t.settle(QUIET);
    submit(&mut t, "the MCP list", |s| {
        s.contains("Configured MCP servers")
    });
    t.settle(QUIET);
    t.save("20-preconfigured-mcp-list");

    // Esc during a turn.
    script(&api);
    paste_as_the_daemon(&mut t, "HOLD interrupt me");
    submit(&mut t, "the held turn", |s| s.contains("esc to cancel"));
    t.shot_now("esc to cancel", "21-busy-before-esc");
    t.keys(b"\x1b");
    t.wait("the turn cancelled", BOOT, |s| !s.contains("esc to cancel"));
    t.settle(QUIET);
    t.save("22-after-esc");
    t.end();
}

/// Records the screens of the approval mode iapeer starts Gemini CLI in (`--skip-trust
/// --approval-mode yolo`, the user-level settings preconfigured): ready, a typed draft, a
/// short paste, a held turn.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_yolo() {
    let (w, api) = preconfigured_world();
    script(&api);
    let args = ["--skip-trust", "--approval-mode", "yolo"];
    let mut t = PtyRecording::spawn(gemini(&w, &api, &args), &w.out, "yolo");
    t.wait("the ready composer", BOOT, ready);
    t.settle(QUIET);
    t.save("23-yolo-ready");
    // Keys typed at once after the ready screen were not drawn for seconds (a first
    // recording: the draft and a paste cleared by Ctrl-C never showed): wait for them.
    t.keys(b"my yolo draft");
    t.wait("the draft", BOOT, |s| s.contains("my yolo draft"));
    t.settle(QUIET);
    t.save("24-yolo-draft");
    t.keys(b"\x03");
    t.wait("the composer cleared", BOOT, ready);
    t.paste("YOLO paste one\nsecond line");
    t.wait("the paste", BOOT, |s| s.contains("second line"));
    t.settle(QUIET);
    t.save("25-yolo-paste");
    t.keys(b"\x03");
    t.wait("the composer cleared", BOOT, ready);
    paste_as_the_daemon(&mut t, "HOLD in yolo");
    submit(&mut t, "the held turn", |s| s.contains("esc to cancel"));
    t.shot_now("esc to cancel", "26-yolo-busy");
    t.keys(b"\x1b");
    t.wait("the turn cancelled", BOOT, |s| !s.contains("esc to cancel"));
    t.end();
}

/// Records when Gemini CLI takes the first Enter after a paste as a submit: in the `yolo`
/// world, a two-line paste, waited for on the screen (as the daemon waits for the paste
/// sign, the screen read every 2 ms), then one Enter after a pause of 0–150 ms; each tried 4
/// times. A first Enter that
/// did not submit is pressed again until it does. Writes `enter-timing.txt` (one line per
/// try: the pause, whether the first Enter submitted, and what the composer showed if not)
/// and `enter-timing.raw` / `.marks.json`.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_enter_after_the_paste_sign() {
    let (w, api) = preconfigured_world();
    let args = ["--skip-trust", "--approval-mode", "yolo"];
    let mut t = PtyRecording::spawn(gemini(&w, &api, &args), &w.out, "enter-timing");
    t.wait("the ready composer", BOOT, ready);
    t.settle(QUIET);
    let mut lines = vec![
        format!("# load average at the start: {}", load_average()),
        "# pause (ms) after the paste showed, try, first Enter submitted, composer if not"
            .to_string(),
    ];
    for pause in [0u64, 25, 50, 75, 100, 150] {
        for n in 1..=4 {
            let text = format!("ENTER pause {pause} try {n}");
            t.paste(&format!("{text}\nsecond line"));
            // Looked for every 2 ms, as the daemon reads the screen on each output.
            let shown = common::poll_every(Duration::from_millis(2), BOOT, || {
                let s = t.screen();
                s.contains(&text) && s.contains("second line")
            });
            assert!(shown, "the paste never showed:\n{}", t.screen());
            // Time is the thing recorded: the pause between the paste sign and Enter.
            std::thread::sleep(Duration::from_millis(pause));
            t.keys(b"\r");
            let one = common::poll(Duration::from_secs(3), || api.has_turn_with(&text));
            let composer = if one {
                String::new()
            } else {
                let s = t.screen();
                let rows: Vec<&str> = s
                    .lines()
                    .skip_while(|l| !l.contains(&text))
                    .take_while(|l| !l.starts_with('▀'))
                    .collect();
                t.save(&format!("enter-timing-{pause}ms-{n}"));
                format!(" {rows:?}")
            };
            lines.push(format!("{pause} {n} {one}{composer}"));
            if !one {
                submit(&mut t, &text, |_| api.has_turn_with(&text));
            }
            t.wait("ready after the turn", BOOT, |s| {
                ready(s) && !s.contains("esc to cancel")
            });
            t.settle(Duration::from_millis(500));
        }
    }
    lines.push(format!("# load average at the end: {}", load_average()));
    eprintln!("{}", lines.join("\n"));
    w.write("enter-timing.txt", &(lines.join("\n") + "\n"));
    t.end();
}

/// A bracketed paste of `text`, then the pause the daemon leaves before its Enter.
fn paste_as_the_daemon(t: &mut PtyRecording, text: &str) {
    t.paste(text);
    // Time is the thing recorded: the daemon's pause between paste and Enter (spec 04 §1 "Input").
    std::thread::sleep(Duration::from_millis(300));
}

/// The recorded screens show the signs the README's findings state.
#[test]
fn recorded_screens_show_the_signs() {
    let dir = fixtures();
    let screen = |session: &str, step: &str| recorded_screen(&dir, session, step);
    let s = screen("first-run", "01-trust-dialog");
    assert!(s.contains("Do you trust the files in this folder?") && s.contains("1. Trust folder"));
    let s = screen("first-run", "02-auth-dialog");
    assert!(
        s.contains("How would you like to authenticate") && s.contains("● 2. Use Gemini API Key")
    );
    assert!(screen("first-run", "03-api-key-dialog").contains("Enter Gemini API Key"));
    let s = screen("first-run", "04-ready");
    assert!(ready(&s) && !s.contains("esc to cancel"));
    let s = screen("first-run", "05-draft");
    assert!(s.contains("> my unfinished draft") && !ready(&s));
    let s = screen("first-run", "06-paste-4-lines");
    assert!(s.contains("short paste four") && !s.contains("[Pasted Text"));
    assert!(screen("first-run", "07-paste-8-lines").contains("> [Pasted Text: 8 lines]"));
    assert!(screen("first-run", "08-busy").contains("(esc to cancel"));
    let s = screen("first-run", "10-mid-turn-queued");
    assert!(s.contains("Queued (press ↑ to edit):") && s.contains("esc to cancel"));
    let s = screen("first-run", "11-queued-ran-ready");
    assert!(ready(&s) && !s.contains("esc to cancel") && !s.contains("Queued"));
    assert!(screen("first-run", "12-mcp-list").contains("🟢 iapeer - Ready (1 tool)"));
    assert!(screen("first-run", "13-tool-confirmation")
        .contains("Allow execution of MCP tool \"send_to_peer\" from server \"iapeer\"?"));
    let s = screen("preconfigured", "17-preconfigured-ready");
    assert!(ready(&s) && !s.contains("Do you trust") && !s.contains("Enter Gemini API Key"));
    let s = screen("preconfigured", "18a-paste-enter-not-submitted");
    assert!(s.contains("> PEER message one") && !s.contains("esc to cancel"));
    assert!(screen("preconfigured", "21-busy-before-esc").contains("esc to cancel"));
    let s = screen("preconfigured", "22-after-esc");
    assert!(s.contains("Request cancelled.") && ready(&s) && !s.contains("esc to cancel"));
}

/// Records what Gemini CLI shows and writes when the model API refuses a turn: in the `yolo`
/// world (as iapeer starts it, default settings: Gemini CLI retries as it does for a user),
/// one pasted message whose turn the stand-in answers `status` (every try). Writes
/// `api-error-<case>.raw` / `.marks.json`, the screens `api-error-<case>-retrying.screen.txt`
/// (20 s into the turn) and `api-error-<case>.screen.txt` (the turn given up, or 4 minutes
/// in), the session
/// file `api-error-<case>.session.jsonl` and `api-error-<case>.requests.txt` (the turn
/// requests: when, which model).
fn record_gemini_api_error(status: u16, case: &str) {
    let (w, api) = preconfigured_world();
    api.script(move |req| {
        if gemini::last_text(req).contains("REFUSED") {
            Reply::Error(status)
        } else {
            Reply::Text("ok".into())
        }
    });
    let args = ["--skip-trust", "--approval-mode", "yolo"];
    let name = format!("api-error-{case}");
    let mut t = PtyRecording::spawn(gemini(&w, &api, &args), &w.out, &name);
    t.wait("the ready composer", BOOT, ready);
    t.settle(QUIET);
    let started = std::time::Instant::now();
    paste_as_the_daemon(&mut t, "REFUSED turn");
    submit(&mut t, "the refused turn", |_| api.has_turn_with("REFUSED"));
    // Time is the thing recorded: the screen 20 s into the refused turn.
    std::thread::sleep(Duration::from_secs(20));
    t.save(&format!("{name}-retrying"));
    // Given up, or still trying after 4 minutes (recorded as it is then).
    let given_up = common::poll(Duration::from_secs(240), || {
        !t.screen().contains("esc to cancel")
    });
    t.settle(Duration::from_secs(3));
    t.save(&name);
    let requests: Vec<String> = api
        .recorded()
        .into_iter()
        .filter(gemini::is_stream)
        .map(|r| format!("+{:.1} s {}", (r.at - started).as_secs_f64(), r.path))
        .collect();
    let outcome = if given_up { "given up" } else { "still trying" };
    eprintln!(
        "{status}: {} turn request(s), {outcome} after {:?}",
        requests.len(),
        started.elapsed()
    );
    w.write(
        &format!("{name}.requests.txt"),
        &format!(
            "{} turn requests, {outcome} after {} s\n{}\n",
            requests.len(),
            started.elapsed().as_secs(),
            requests.join("\n")
        ),
    );
    let files = session_files(&w.home);
    let file = files.first().expect("a session file");
    w.write(&format!("{name}.session.jsonl"), &common::read(file));
    t.end();
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_api_error_429() {
    record_gemini_api_error(429, "rate-limit");
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_api_error_500() {
    record_gemini_api_error(500, "server-error");
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_api_error_401() {
    record_gemini_api_error(401, "auth");
}

/// Records Gemini CLI 0.61.0 when the answers to its terminal queries come late (after its
/// 1 s wait for them), as iapeer starts it (`yolo` world): where the answers' bytes go, what
/// the composer shows, and what `key` (Ctrl-C or Esc) does to it; then a delivery as the
/// daemon makes it. Session `late-<late_ms>ms-<name>`; notes in `late-answers.txt`.
fn record_late_answers(late_ms: u64, name: &str, key: &[u8]) {
    let (w, api) = preconfigured_world();
    let args = ["--skip-trust", "--approval-mode", "yolo"];
    let session = format!("late-{late_ms}ms-{name}");
    let late = Duration::from_millis(late_ms);
    let mut t = PtyRecording::spawn_answering_late(gemini(&w, &api, &args), &w.out, &session, late);
    let mut notes = vec![format!(
        "# {session}: answers {late_ms} ms late, then {key:?}; load average at the start: {}",
        load_average()
    )];
    t.wait("the composer", BOOT, |s| s.contains("YOLO Ctrl+Y"));
    // The answers' bytes come `late` after the queries; the composer is drawn by then.
    t.wait_answers_written(late + Duration::from_secs(30));
    t.settle(Duration::from_secs(3));
    t.save(&format!("{session}-boot"));
    notes.push(format!(
        "composer at boot: {:?}",
        gemini::composer_rows(&t.screen())
    ));
    press_then_deliver(t, &w, &api, &session, key, "LATE delivery", notes);
}

/// The end of a late-answers recording (`session`): press `key` on the composer holding
/// the answers, watch every screen for 8 s (`-cleared` when it emptied, `-8s-after-key`),
/// then deliver `text` as the daemon does (`-delivered`); `notes` (with these) are appended
/// to `late-answers.txt`.
fn press_then_deliver(
    mut t: PtyRecording,
    w: &Scratch,
    api: &GeminiStandIn,
    session: &str,
    key: &[u8],
    text: &str,
    mut notes: Vec<String>,
) {
    // Every screen for 8 s after the key, read every 20 ms: any hint it showed (`Press Ctrl+C
    // again to exit.`, `Press Esc again to clear.`) and when the composer emptied.
    t.keys(key);
    let start = std::time::Instant::now();
    let (mut hints, mut emptied) = (Vec::<String>::new(), None);
    while start.elapsed() < Duration::from_secs(8) {
        let s = t.screen();
        for l in s.lines().filter(|l| l.contains("again")) {
            if !hints.iter().any(|h| h == l.trim()) {
                hints.push(l.trim().to_string());
            }
        }
        if emptied.is_none() && ready(&s) {
            emptied = Some(start.elapsed().as_millis());
            t.save(&format!("{session}-cleared"));
        }
        // Time is the thing recorded: a screen every 20 ms, for when each hint showed.
        std::thread::sleep(Duration::from_millis(20));
    }
    notes.push(format!("composer emptied {emptied:?} ms after {key:?}"));
    notes.push(format!("hints shown meanwhile: {hints:?}"));
    t.save(&format!("{session}-8s-after-key"));
    notes.push(format!(
        "composer 8 s after the key: {:?}",
        gemini::composer_rows(&t.screen())
    ));
    notes.push(format!(
        "still running: {}",
        t.screen().contains("YOLO Ctrl+Y")
    ));
    paste_as_the_daemon(&mut t, text);
    submit(&mut t, "the delivery's turn", |_| api.has_turn_with(text));
    t.wait("ready after the turn", BOOT, |s| {
        ready(s) && !s.contains("esc to cancel")
    });
    t.settle(QUIET);
    t.save(&format!("{session}-delivered"));
    notes.push(format!("load average at the end: {}", load_average()));
    eprintln!("{}", notes.join("\n"));
    let path = w.out.join("late-answers.txt");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    w.write("late-answers.txt", &(old + &notes.join("\n") + "\n"));
    t.end();
}

/// The load average now, for the recorders' notes.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_late_answers_ctrl_c() {
    record_late_answers(2000, "ctrl-c", b"\x03");
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_late_answers_esc() {
    record_late_answers(2000, "esc", b"\x1b");
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_late_answers_just_late() {
    record_late_answers(1200, "ctrl-c", b"\x03");
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_late_answers_very_late() {
    record_late_answers(6000, "ctrl-c", b"\x03");
}

/// Records Gemini CLI 0.61.0 when the answers to its terminal queries come after its ready
/// screen (`late_ms` after the queries, later than the boot; as on a machine so loaded that the
/// daemon answers after the first delivery): a first turn runs, then the answers land —
/// `during_turn`: while a second turn runs (the stand-in holds it 40 s), else in the idle
/// composer. Saved: the screen when they showed (`-landed`), after that turn (`-turn-ended`,
/// with `during_turn`), what one Ctrl-C does (`-cleared`, `-8s-after-key`), and a delivery
/// after it (`-delivered`). Session `late-<late_ms>ms-after-ready-<idle|turn>`; notes appended
/// to `late-answers.txt`.
fn record_late_answers_after_ready(late_ms: u64, during_turn: bool) {
    let (w, api) = preconfigured_world();
    api.script(|req| {
        if gemini::last_text(req).contains("HELD turn") {
            Reply::Hold(Duration::from_secs(40), "held done".into())
        } else {
            Reply::Text("ok".into())
        }
    });
    let args = ["--skip-trust", "--approval-mode", "yolo"];
    let when = if during_turn { "turn" } else { "idle" };
    let session = format!("late-{late_ms}ms-after-ready-{when}");
    let late = Duration::from_millis(late_ms);
    let started = std::time::Instant::now();
    let mut t = PtyRecording::spawn_answering_late(gemini(&w, &api, &args), &w.out, &session, late);
    let mut notes = vec![format!(
        "# {session}: answers {late_ms} ms late, after the ready screen; load average at the \
         start: {}",
        load_average()
    )];
    let landed = |s: &str| s.contains(">|iapeer(");
    t.wait("the ready composer", BOOT, ready);
    notes.push(format!("ready after {} ms", started.elapsed().as_millis()));
    paste_as_the_daemon(&mut t, "FIRST delivery");
    submit(&mut t, "the first turn", |_| {
        api.has_turn_with("FIRST delivery")
    });
    t.wait("ready after the first turn", BOOT, |s| {
        ready(s) && !s.contains("esc to cancel")
    });
    assert!(
        !landed(&t.screen()),
        "the answers came before the first turn ended: record with a later `late_ms`"
    );
    notes.push(format!(
        "first turn done after {} ms",
        started.elapsed().as_millis()
    ));
    if during_turn {
        paste_as_the_daemon(&mut t, "HELD turn");
        submit(&mut t, "the held turn", |_| api.has_turn_with("HELD turn"));
    }
    t.wait("the late answers", late + BOOT, landed);
    t.settle(QUIET);
    t.save(&format!("{session}-landed"));
    notes.push(format!(
        "landed after {} ms; composer: {:?}; busy: {}",
        started.elapsed().as_millis(),
        gemini::composer_rows(&t.screen()),
        t.screen().contains("esc to cancel")
    ));
    if during_turn {
        t.wait("the held turn's end", BOOT, |s| s.contains("held done"));
        t.settle(QUIET);
        t.save(&format!("{session}-turn-ended"));
        notes.push(format!(
            "after the turn, composer: {:?}",
            gemini::composer_rows(&t.screen())
        ));
    }
    press_then_deliver(t, &w, &api, &session, b"\x03", "AFTER delivery", notes);
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_late_answers_after_ready_idle() {
    record_late_answers_after_ready(30_000, false);
}

#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_late_answers_after_ready_during_a_turn() {
    record_late_answers_after_ready(30_000, true);
}

/// Whether the screen shows a line after the last `/compress` typed (read from 0.61.0's
/// bundle: its `CompressionMessage` and its errors; what each is is recorded).
fn compress_answered(s: &str) -> bool {
    let Some(at) = s.rfind("> /compress") else {
        return false;
    };
    let after = &s[at..];
    [
        "Nothing to compress",
        "compressed from",
        "ompression",
        "Failed to compress",
    ]
    .iter()
    .any(|n| after.contains(n))
}

/// Whether the composer (the row under the last `▄` rule) holds `text`.
fn composer_holds(s: &str, text: &str) -> bool {
    let rows: Vec<&str> = s.lines().collect();
    rows.iter()
        .rposition(|r| r.starts_with('▄'))
        .and_then(|at| rows.get(at + 1))
        .is_some_and(|r| r.contains(text))
}

/// Records `/compress` (0.61.0's command for compaction; `/compact` and `/summarize` are its
/// other names) in the `yolo` world: first on an empty conversation, then after four turns,
/// then a turn after it. Writes `compress.raw` / `.marks.json` with the screens
/// `30-compress-empty` (its answer on an empty history), `31-compress-typed` (the command
/// typed), `32-compress-pending` (while it runs, when caught), `33-compressed`, `34-after`;
/// `compress-requests.json` (every request: path, system prompt's start, last text) and
/// `compress-session.jsonl` (the session file after it all).
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_gemini_compress() {
    let (w, api) = preconfigured_world();
    script(&api);
    let args = ["--skip-trust", "--approval-mode", "yolo"];
    let mut t = PtyRecording::spawn(gemini(&w, &api, &args), &w.out, "compress");
    t.wait("the ready composer", BOOT, ready);
    t.settle(QUIET);
    t.keys(b"/compress");
    t.settle(QUIET);
    submit(&mut t, "the empty compression's answer", compress_answered);
    t.settle(QUIET);
    t.save("30-compress-empty");
    for n in 1..=4 {
        let text = format!("TURN {n}: remember that item {n} is the colour number {n}0, please");
        paste_as_the_daemon(&mut t, &text);
        submit(&mut t, &text, |_| api.has_turn_with(&text));
        t.wait("the turn's end", BOOT, |s| {
            ready(s) && !s.contains("esc to cancel")
        });
    }
    t.settle(QUIET);
    let before = api.recorded().len();
    t.keys(b"/compress");
    t.wait("the command typed", BOOT, |s| {
        composer_holds(s, "/compress")
    });
    t.settle(QUIET);
    t.save("31-compress-typed");
    t.keys(b"\r");
    let caught = common::poll_every(Duration::from_millis(5), Duration::from_secs(5), || {
        t.screen().contains("Compressing chat history")
    });
    if caught {
        t.save("32-compress-pending");
    } else if !common::poll(Duration::from_secs(5), || api.recorded().len() > before) {
        // The first Enter took the completion only.
        t.keys(b"\r");
    }
    t.wait("the compression's answer", BOOT, compress_answered);
    t.settle(QUIET);
    t.save("33-compressed");
    paste_as_the_daemon(&mut t, "AFTER compress");
    submit(&mut t, "the turn after", |_| {
        api.has_turn_with("AFTER compress")
    });
    t.wait("the turn's end", BOOT, |s| {
        ready(s) && !s.contains("esc to cancel")
    });
    t.settle(QUIET);
    t.save("34-after");
    // A refused summary request (400: not retried).
    api.script(|req| {
        if gemini::is_compression(req) {
            Reply::Error(400)
        } else {
            Reply::Text("ok".into())
        }
    });
    t.keys(b"/compress");
    t.wait("the command typed", BOOT, |s| {
        composer_holds(s, "/compress")
    });
    t.settle(QUIET);
    submit(&mut t, "the refused compression's answer", |s| {
        s.matches("> /compress").count() >= 3 && compress_answered(s)
    });
    t.settle(QUIET);
    t.save("35-compress-refused");
    t.end();
    let requests: Vec<Value> = api
        .recorded()
        .iter()
        .map(|r| {
            json!({"path": r.path,
                "system_starts": gemini::system_text(&r.body).chars().take(100).collect::<String>(),
                "contents": r.body["contents"].as_array().map_or(0, Vec::len),
                "last_text": gemini::last_text(&r.body).chars().take(200).collect::<String>()})
        })
        .collect();
    w.write_json("compress-requests.json", &json!(requests));
    let files = session_files(&w.home);
    for (i, f) in files.iter().enumerate() {
        w.write(&format!("compress-session-{i}.jsonl"), &common::read(f));
    }
}

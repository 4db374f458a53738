//! End to end with the real Codex CLI: Codex runs in an iapeer session exactly as in
//! production; its model requests go to a loopback stand-in for the OpenAI Responses API (the
//! one mock: the cloud API cannot run here). `scripts/setup-agents.sh` installs the CLI and
//! `scripts/test.sh` exports `IAPEER_TEST_CODEX_BIN`.

use crate::common;

use common::openai::{input_text, last_input_text, last_is_tool_output, OpenAiStandIn, Reply};
use common::TestEnv;
use serde_json::json;
use std::time::Duration;

pub(crate) fn codex_bin() -> String {
    std::env::var("IAPEER_TEST_CODEX_BIN").unwrap_or_else(|_| {
        panic!("IAPEER_TEST_CODEX_BIN is not set: run scripts/test.sh (it installs the Codex CLI with scripts/setup-agents.sh)")
    })
}

/// A world with a codex peer `cx` and an echo peer `ea`, the stand-in, and a daemon. The
/// user's Codex config names the stand-in as its model provider (as a user with a custom
/// provider would); iapeer adds its own blocks at `create`.
pub(crate) fn world() -> (TestEnv, OpenAiStandIn) {
    world_with(&[])
}

/// [`world`] with extra variables in the daemon's environment.
pub(crate) fn world_with(extra_daemon_env: &[(&str, &str)]) -> (TestEnv, OpenAiStandIn) {
    let mut env = TestEnv::new();
    for (k, v) in extra_daemon_env {
        env.set(k, v);
    }
    let api = OpenAiStandIn::start();
    add_peer(&mut env, "cx", &api);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    (env, api)
}

/// Make a codex peer `name` (before the daemon starts) whose model API is `api`: the user's
/// Codex config (`CODEX_HOME` = `<home>/.codex`) names the stand-in as its model provider.
pub(crate) fn add_peer(env: &mut TestEnv, name: &str, api: &OpenAiStandIn) {
    env.set("IAPEER_CODEX_BIN", &codex_bin());
    let codex_home = env.home.join(".codex");
    env.set("CODEX_HOME", codex_home.to_str().unwrap());
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "# the user's own settings\nmodel = \"gpt-5.1\"\nmodel_provider = \"standin\"\n\n[model_providers.standin]\nname = \"Stand-in\"\nbase_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"STANDIN_API_KEY\"\n",
            api.base_url()
        ),
    )
    .unwrap();
    env.ok(&["create", name, "--runtime", "codex"]);
    env.launch_env(name, "codex", "STANDIN_API_KEY=sk-standin-key\n");
}

/// Issue 31 item 1, the Codex audit: the daemon answers Codex's `tools/list` a second late
/// (the test hook `slow-tools-list`). Codex 0.171 builds a turn's tools by awaiting each MCP
/// server's start-up, which ends with its listing, so the wake's first turn offers
/// `send_to_peer` even when the message is submitted before the listing is answered (the
/// daemon reported the listing at its request before issue 31; this test passed then too).
#[test]
fn a_codex_wake_whose_tool_listing_is_answered_late_still_offers_send_to_peer_in_its_first_turn() {
    let (env, api) = world_with(&[("IAPEER_TEST_HOOK", "slow-tools-list:1000")]);
    let message = "hello from a slow listing";
    let first = env.wake_and_first_request("cx", "codex", message, || {
        api.recorded()
            .into_iter()
            .find(|r| last_input_text(r).contains(message))
    });
    assert!(
        first["tools"].to_string().contains("send_to_peer"),
        "the wake's first turn went to the model without send_to_peer: {}\n{}",
        first["tools"],
        env.diagnostics()
    );
}

#[test]
fn codex_peer_wakes_sees_its_prompt_replies_through_mcp_and_takes_a_live_message() {
    let (env, api) = world();
    // The host config got iapeer's blocks without losing the user's.
    let config = std::fs::read_to_string(env.home.join(".codex/config.toml")).unwrap();
    assert!(config.starts_with("# the user's own settings"), "{config}");
    assert!(
        config.contains("[mcp_servers.iapeer]")
            && config.contains("bearer_token_env_var = \"IAPEER_TOKEN\""),
        "{config}"
    );
    assert!(config.contains("trust_level = \"trusted\""), "{config}");

    api.script(|req| {
        let last = last_input_text(req);
        // The echo may come folded into the tool turn (it can arrive while the send_to_peer
        // call still runs: tests/busy.rs), so it is looked for first, anywhere in the input.
        if input_text(req).contains("<msg>echo: hi from codex") {
            Reply::Text("echo seen".into())
        } else if last_is_tool_output(req) {
            Reply::Text("sent".into())
        } else if last.contains("<iap ") && !last.contains("<msg>echo:") {
            Reply::Call(
                "mcp__iapeer".into(),
                "send_to_peer".into(),
                json!({"personality": "ea", "message": "hi from codex", "topic": "t1"}),
            )
        } else {
            Reply::Text("ok".into())
        }
    });
    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "hello codex",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cx (codex), woke",
        "{}",
        env.diagnostics()
    );

    // The wake is answered once Codex took the message; its request follows.
    env.wait_until(
        "the model gets the message",
        Duration::from_secs(60),
        |_| api.has_request_with("hello codex"),
    );
    let reqs = api.recorded();
    let first = reqs
        .iter()
        .find(|r| last_input_text(r).contains("hello codex"))
        .unwrap_or_else(|| panic!("no request with the message\n{}", env.diagnostics()));
    // Sent without waiting for Codex's MCP client, the first turn still offers the tool.
    assert!(
        first["tools"].to_string().contains("send_to_peer"),
        "the first turn offers send_to_peer: {}",
        first["tools"]
    );
    let all = input_text(first);
    assert!(
        all.contains("personality: \"cx\""),
        "the system prompt reached the model: {all}"
    );
    assert!(all.contains("## Known peers"), "{all}");
    let last = last_input_text(first);
    assert!(
        last.contains("<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\""),
        "{last}"
    );

    env.wait_mcp_delivery("codex-cx", "ea", Duration::from_secs(60));
    assert!(
        env.pane("echo-ea").contains("from cx: hi from codex"),
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        env.events("delivery", "delivery")
            .iter()
            .find(|d| d["to"] == "cx")
            .unwrap()["woke"],
        "true"
    );

    env.wait_until(
        "ea's echo reaches the live codex",
        Duration::from_secs(60),
        |e| {
            e.events("delivery", "delivery").iter().any(|d| {
                d["caller"] == "echo-ea"
                    && d["to"] == "cx"
                    && d["ok"] == "true"
                    && d["woke"] == "false"
            })
        },
    );
    // That echo starts a turn; a message sent during it would be queued by Codex (answered
    // `queued`, tests/busy.rs), so this one waits for the turn to end: the model's answer to
    // the echo is on the screen, and the screen no longer shows a turn in progress. (The
    // model's request alone is not enough: under load Codex draws "esc to interrupt" after
    // the request is made, and a send in between was queued — seen in CI; nor is one idle
    // frame: Codex draws the answer a moment before the turn ends, and a send then was queued
    // too — seen in CI.)
    env.wait_until("codex's answer to the echo", Duration::from_secs(60), |e| {
        e.screen("codex-cx").contains("echo seen")
    });
    crate::busy::wait_codex_screen_idle(&env);
    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "echo: a second message",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cx (codex)",
        "{}",
        env.diagnostics()
    );
    // Codex's title request holds the message too; the stand-in answers it itself, so the
    // script's call never reaches Codex's title thread, which has no tools (before: answered
    // "unsupported call: mcp__iapeersend_to_peer" by Codex).
    let refused: Vec<String> = api
        .recorded()
        .iter()
        .flat_map(|r| r["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .filter(|o| o.contains("unsupported call"))
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
}

/// The model's script: a turn on "hello codex" calls `send_to_peer` to ea; the tool's output
/// is answered "sent", anything else "ok".
fn call_ea_on_hello(api: &OpenAiStandIn) {
    api.script(|req| {
        if last_is_tool_output(req) {
            Reply::Text("sent".into())
        } else if last_input_text(req).contains("hello codex") {
            Reply::Call(
                "mcp__iapeer".into(),
                "send_to_peer".into(),
                json!({"personality": "ea", "message": "hi from codex"}),
            )
        } else {
            Reply::Text("ok".into())
        }
    });
}

/// With the daemon in bearer mode (`IAPEER_BEARER_TOKEN`, spec 02 §4) the host config's block
/// sends that bearer and the session token in `X-IAPeer-Token`, so the model's `send_to_peer`
/// still reaches its target (before: `bearer_token_env_var = "IAPEER_TOKEN"`, refused).
#[test]
fn codex_peer_reaches_a_peer_through_mcp_when_the_daemon_requires_a_bearer() {
    let started = std::time::Instant::now();
    let (env, api) = world_with(&[("IAPEER_BEARER_TOKEN", "gate-s3cret")]);
    call_ea_on_hello(&api);
    env.send_from("cx", "echo-ea", "hello codex");
    env.wait_mcp_delivery("codex-cx", "ea", Duration::from_secs(60));
    eprintln!("codex bearer end to end: {:?}", started.elapsed());
}

#[test]
fn codex_turn_is_interrupted() {
    let (env, api) = world();
    api.script(|req| {
        if last_input_text(req).contains("take your time") {
            Reply::Hold(Duration::from_secs(60))
        } else {
            Reply::Text("ok".into())
        }
    });
    // Wake it first (the first message of a wake must pass the ready gate), then hold a
    // live turn open.
    env.send_from("cx", "echo-ea", "echo: wake up");
    // The wake's own turn ends first: a message sent into it is queued, and Esc would then
    // end that turn and submit the queued one at once (Codex's "press esc to interrupt and
    // send immediately") — a new turn, still held. (A wake now takes ~0.4 s: the next send
    // came while that turn ran.) Codex's own record of the turn's end says so; the screen
    // cannot (crate::busy::wait_codex_turns).
    crate::busy::wait_codex_turns(&env, 1);
    interrupt_a_held_turn(&env, "take your time");
}

/// Send `body` to cx (a turn the stand-in holds), wait until Codex shows the turn, `iapeer
/// interrupt` it and wait until the turn stops (only the interrupt ends a held turn so soon).
pub(crate) fn interrupt_a_held_turn(env: &TestEnv, body: &str) {
    env.send_from("cx", "echo-ea", body);
    env.wait_until("codex is mid-turn", Duration::from_secs(30), |e| {
        e.screen("codex-cx")
            .to_lowercase()
            .contains("esc to interrupt")
    });
    let out = env.ok(&["interrupt", "cx"]);
    assert_eq!(out.trim(), "interrupted codex-cx");
    env.wait_until("codex stops the turn", Duration::from_secs(15), |e| {
        !e.screen("codex-cx")
            .to_lowercase()
            .contains("esc to interrupt")
    });
}

/// Issue 12 item 1 on the real Codex: a body that ends the bracketed paste, presses Enter,
/// types a line and `/exit` reaches the model as one user message, the controls shown as their
/// pictures inside the envelope, and nothing is typed outside it.
#[test]
fn a_body_with_the_paste_end_marker_reaches_codex_as_one_user_message() {
    let (env, api) = world();
    api.script(|_| Reply::Text("ok".into()));
    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        crate::paste::ATTACK,
        "--topic",
        "t\x1b[201~",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cx (codex), woke",
        "{}",
        env.diagnostics()
    );
    // The envelope's end is the last thing iapeer typed: once the main turn's request has it
    // (not only the title request), every turn a stray Enter in the body would have started
    // came before, in the same conversation.
    env.wait_until(
        "the model has the whole envelope",
        Duration::from_secs(60),
        |_| {
            api.recorded().iter().any(|r| {
                r["tools"].as_array().is_some_and(|t| !t.is_empty())
                    && common::openai::input_text(r).contains("</iap>")
            })
        },
    );
    // The main turn's requests offer tools (Codex's title request does not).
    let reqs: Vec<_> = api
        .recorded()
        .into_iter()
        .filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .collect();
    let last = reqs.last().expect("a model request");
    let users: Vec<String> = last["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(common::anthropic::flatten)
        .filter(|t| t.contains("TYPED") || t.contains("<iap"))
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
    for req in &reqs {
        let t = last_input_text(req);
        assert!(
            !t.contains("TYPED") || (t.contains("<iap ") && t.contains("</iap>")),
            "a line reached Codex outside the envelope: {t:?}"
        );
    }
    assert_eq!(
        env.status_of("cx", "codex"),
        "live",
        "{}",
        env.diagnostics()
    );
}

/// Issue 27: iapeer launches Codex with `tool_timeout_sec` = `runtime::MCP_TOOL_TIMEOUT`
/// (330 s). Here ea (echo) takes 65 s to boot, so cx's `send_to_peer` is held over 60 s (the
/// limit Gemini CLI's fetch had), and Codex gets its result. (Codex 0.171 passes this
/// without the setting too: its own default is over 65 s, unlike earlier versions' 60 s.)
#[test]
fn a_codex_send_to_peer_that_waits_over_60_s_for_a_slow_wake_succeeds() {
    let mut env = TestEnv::new();
    let api = OpenAiStandIn::start();
    add_peer(&mut env, "cx", &api);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.launch_env("ea", "echo", common::agents::SLOW_BOOT_ENV);
    env.start_daemon();
    call_ea_on_hello(&api);
    env.send_from("cx", "echo-ea", "hello codex");
    env.wait_until(
        "the model asks for send_to_peer",
        Duration::from_secs(90),
        |_| api.has_request_with("hello codex"),
    );
    let called = std::time::Instant::now();
    // The output that counts is the one with the send's result.
    let result = || {
        api.recorded()
            .iter()
            .flat_map(|r| r["input"].as_array().cloned().unwrap_or_default())
            .filter(|i| i["type"] == "function_call_output")
            .map(|i| i.to_string())
            .find(|o| o.contains("delivered_to") || o.contains("timed out"))
    };
    env.assert_slow_send_result("codex", called, result);
}

/// Where Codex's boot recordings go: `tests/fixtures/codex-<version>/boot-queue`, the version
/// the CLI reports (`codex --version`: `codex-cli 0.171.0`).
fn boot_queue_fixtures() -> std::path::PathBuf {
    let out = std::process::Command::new(codex_bin())
        .arg("--version")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let version = said.split_whitespace().last().expect("codex --version");
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/codex-{version}/boot-queue"))
}

/// Records (run by name with `--ignored`) what Codex 0.171 does with a paste and Enter typed
/// the moment its first composer shows (the banner's `loading` replaced by the folder), in a
/// trusted folder with an MCP server.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_codex_enter_at_first_composer() {
    record_enter_at("enter-at-first-composer", |s, _| {
        s.lines().any(|l| l.starts_with("› Ask Codex")) && !s.lines().any(|l| l.trim() == "loading")
    });
}

/// Records (run by name with `--ignored`) a paste and Enter typed the moment Codex 0.171
/// first says it is working (`OSC 7501 state=working`), after its session started.
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_codex_enter_at_boot_working() {
    record_enter_at("enter-at-boot-working", |_, raw| {
        raw.windows(19).any(|w| w == b"7501;state=working:")
    });
}

/// Records (run by name with `--ignored`) a paste and Enter typed the moment Codex 0.171
/// shows its session started (the footer names the model).
#[test]
#[ignore = "recorder: writes fixtures"]
fn record_codex_enter_at_session_footer() {
    // The queue shows when Enter beats the end of Codex's start-up, tens of milliseconds
    // after the footer: a recording that missed it is made again.
    let footer = |s: &str, _: &[u8]| s.contains("gpt-5.1 default");
    let queued = |raw: &[u8]| raw.windows(23).any(|w| w == b"Queued follow-up inputs");
    // The same with its MCP server's address refused: the queue is not Codex waiting for it.
    for name in ["enter-at-session-footer", "enter-at-session-footer-no-mcp"] {
        let caught = (0..5).any(|_| queued(&record_enter_at(name, footer)));
        assert!(caught, "{name}: Enter never came before the start-up's end");
    }
}

/// Start Codex on a pty (a trusted folder, an MCP server — a refused address for a `name`
/// ending in `-no-mcp` — and the stand-in answering `ok`), type
/// a paste and Enter the moment `when(screen, raw)` holds, and record it as
/// `<fixtures>/boot-queue/<name>.raw` with each output read's time since the spawn
/// (`<name>.times.json`: `{"typed": [ms, offset], "reads": [[ms, offset after the read]]}`).
/// Returns the bytes recorded.
fn record_enter_at(name: &str, when: impl Fn(&str, &[u8]) -> bool) -> Vec<u8> {
    use common::pty_record::{self, PtyRecording, Scratch};
    let out = boot_queue_fixtures();
    std::fs::create_dir_all(&out).unwrap();
    let w = Scratch::new(out.clone());
    let api = OpenAiStandIn::start();
    api.script(|_| Reply::Text("ok".into()));
    let codex_home = w.home.join(".codex");
    let mcp = match name.ends_with("-no-mcp") {
        true => "http://127.0.0.1:9/mcp".to_string(),
        false => w.mcp.url(),
    };
    let folder = w.cwd.canonicalize().unwrap();
    api.write_codex_config(
        &codex_home,
        "check_for_update_on_startup = false\n",
        &format!(
            "\n[mcp_servers.iapeer]\nurl = \"{mcp}\"\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            folder.display()
        ),
    );
    let cwd = w.cwd.display().to_string();
    let cmd = pty_record::cli(
        &codex_bin(),
        &w.home,
        &w.cwd,
        &[
            ("CODEX_HOME", codex_home.to_str().unwrap()),
            ("STANDIN_API_KEY", "sk-standin-key"),
        ],
        &[
            "--no-daemon",
            "--no-alt-screen",
            "-C",
            &cwd,
            "--dangerously-bypass-approvals-and-sandbox",
        ],
    );
    let start = std::time::Instant::now();
    let mut t = PtyRecording::spawn(cmd, &out, name);
    let mut times: Vec<(u128, usize)> = Vec::new();
    let note = |t: &PtyRecording, times: &mut Vec<(u128, usize)>| {
        let n = t.raw().len();
        if times.last().map(|l| l.1) != Some(n) {
            times.push((start.elapsed().as_millis(), n));
        }
    };
    while !when(&t.screen(), &t.raw()) {
        note(&t, &mut times);
        assert!(start.elapsed() < Duration::from_secs(60), "{}", t.screen());
        std::thread::sleep(Duration::from_millis(1));
    }
    note(&t, &mut times);
    t.save(&format!("{name}-01-at-enter"));
    t.paste(&format!("{} typed", name.to_uppercase()));
    t.keys(b"\r");
    let typed = (start.elapsed().as_millis(), t.raw().len());
    while start.elapsed().as_millis() < typed.0 + 3000 {
        note(&t, &mut times);
        std::thread::sleep(Duration::from_millis(1));
    }
    t.save(&format!("{name}-02-after"));
    std::fs::write(
        out.join(format!("{name}.times.json")),
        serde_json::to_string(&json!({"typed": [typed.0 as u64, typed.1], "reads": times}))
            .unwrap(),
    )
    .unwrap();
    let raw = t.raw();
    t.end();
    raw
}

/// Codex 0.171's title request (recorded: `tests/fixtures/codex-0.171.0/title-request.json`,
/// made beside the first turn of `call_ea_on_hello`'s script, its temp folder as `/tmp/rec`)
/// is told from a turn's request (`turn-request-metadata.json`: the same turn's main request,
/// its `client_metadata` only), so the stand-in answers it itself.
#[test]
fn the_openai_stand_in_tells_codex_title_requests_from_turns() {
    use common::openai::is_title_request;
    let fixture = |name: &str| -> serde_json::Value {
        let path = format!(
            "{}/tests/fixtures/codex-0.171.0/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let title = fixture("title-request.json");
    assert!(is_title_request(&title));
    assert!(
        last_input_text(&title).contains("<msg>hello codex</msg>"),
        "it holds the message a script matches"
    );
    assert!(!is_title_request(&fixture("turn-request-metadata.json")));
    assert!(!is_title_request(&json!({"input": []})));
}

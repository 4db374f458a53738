//! What iapeer itself put into an agent's composer is not a human's draft (issue 26 items 8
//! and 5 (c)): after `iapeer interrupt` Claude Code 2.1.332 puts the interrupted message back
//! into its composer, and a paste cut off by its deadline lands there without its Enter.
//! Real Claude Code and Codex against the model stand-ins.

use crate::common;

use common::anthropic::last_user_text;
use common::TestEnv;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The session's pane log as written (raw bytes).
fn raw_pane(env: &TestEnv, identity: &str) -> Vec<u8> {
    std::fs::read(env.paths().pane_log(identity)).unwrap_or_default()
}

/// Where the recorders write (`IAPEER_RECORD_DIR`, else a folder under /tmp).
pub(crate) fn record_dir(name: &str) -> PathBuf {
    let dir = std::env::var_os("IAPEER_RECORD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/iapeer-record"))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Save the pane log as it is now as `<dir>/<name>.raw`.
pub(crate) fn save_pane(dir: &Path, name: &str, env: &TestEnv, identity: &str) {
    std::fs::write(dir.join(format!("{name}.raw")), raw_pane(env, identity)).unwrap();
}

/// Signal the process group of the (only) non-echo session.
fn signal_agent(env: &TestEnv, sig: nix::sys::signal::Signal) {
    let list = env.control(r#"{"op":"list"}"#);
    let pid = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["identity"] != "echo-ea")
        .and_then(|s| s["pid"].as_u64())
        .expect("the agent's session");
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

/// The message id of the cut send.
const CUT_ID: &str = "cut-1";

/// Cut a paste to `peer`'s agent: stop its process group, send a message of 15 000 CJK
/// characters (45 KB as UTF-8, more than a pty takes from a stopped reader) with `--timeout
/// 4`, let the agent go on. The send's output.
fn cut_a_paste(env: &TestEnv, peer: &str) -> std::process::Output {
    use nix::sys::signal::Signal;
    signal_agent(env, Signal::SIGSTOP);
    let big = format!("BIG {}", "界".repeat(15000));
    let out = env.run(&[
        "send",
        peer,
        "--from",
        "echo-ea",
        "--message",
        &big,
        "--timeout",
        "4",
        "--id",
        CUT_ID,
    ]);
    signal_agent(env, Signal::SIGCONT);
    out
}

/// A cut paste's sender is told its message's state is unknown (exit 3, issue 26 item 5):
/// part of it was written, and whether it arrives depends on the agent reading again.
fn cut_is_state_unknown(out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(3), "{}", common::describe(out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("state unknown"),
        "{}",
        common::describe(out)
    );
}

/// A codex world whose stand-in answers with `script`, `ea` live and `cx` woken (its wake's
/// turn ended).
fn codex_woken(
    script: impl Fn(&serde_json::Value) -> common::openai::Reply + Send + 'static,
) -> (TestEnv, common::openai::OpenAiStandIn) {
    let (env, api) = crate::codex::world();
    api.script(script);
    env.ok(&["new", "ea"]);
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "echo: wake"]);
    crate::busy::wait_codex_turns(&env, 1);
    (env, api)
}

/// Send `body` to cb, wait until its turn runs (on the screen, and its request is at the
/// model, which `api` holds), `iapeer interrupt` it and wait until the turn has ended.
pub(crate) fn claude_interrupted(
    env: &TestEnv,
    api: &common::anthropic::AnthropicStandIn,
    body: &str,
) {
    env.ok(&["send", "cb", "--from", "echo-ea", "--message", body]);
    claude_interrupted_mid_turn(env, api, body.lines().next().unwrap_or(body));
    env.wait_until("the turn ends", Duration::from_secs(30), |e| {
        !e.screen("claude-cb").contains("esc to interrupt")
    });
}

/// Wait until cb's turn on a message that starts `first_line` runs: the screen shows a turn,
/// and the turn's request is at the model (the stand-in `api` holds it; the spinner never
/// stands still to wait for). Then `iapeer interrupt` it.
pub(crate) fn claude_interrupted_mid_turn(
    env: &TestEnv,
    api: &common::anthropic::AnthropicStandIn,
    first_line: &str,
) {
    env.wait_until("claude is mid-turn", Duration::from_secs(30), |e| {
        e.screen("claude-cb").contains("esc to interrupt")
            && api
                .main_requests()
                .iter()
                .any(|r| common::anthropic::last_user_text(r).contains(first_line))
    });
    env.ok(&["interrupt", "cb"]);
    env.wait_until("the turn ends", Duration::from_secs(30), |e| {
        !e.screen("claude-cb").contains("esc to interrupt")
    });
}

/// `iapeer send <peer> --from echo-ea --message <m> --json`: exit 0 and the parsed answer.
fn send_json(env: &TestEnv, peer: &str, message: &str) -> serde_json::Value {
    let (ok, v, _) = crate::busy::send_json(env, peer, message);
    assert!(ok, "{v}\n{}", env.diagnostics());
    v
}

/// Wait (30 s at most) for the lifecycle line saying `identity`'s session cleared its
/// composer of iapeer's own text, `delivered` naming whether that message had been delivered.
fn composer_cleared(env: &TestEnv, identity: &str, delivered: &str) {
    env.wait_until(
        "the session clears iapeer's own text from the composer",
        Duration::from_secs(30),
        |e| {
            e.has_event(
                "lifecycle",
                "composer-cleared",
                &[("identity", identity), ("delivered", delivered)],
            )
        },
    );
}

/// Wait (30 s at most) until the model gets a request whose last user text holds
/// `<msg>{body}</msg>`, and check that text carries nothing of the interrupted `BUSY` turn
/// (it went in alone, not glued to the prompt Claude Code put back).
pub(crate) fn the_model_gets_it_alone(
    env: &TestEnv,
    api: &common::anthropic::AnthropicStandIn,
    body: &str,
) {
    let msg = format!("<msg>{body}</msg>");
    env.wait_until("the model gets it", Duration::from_secs(30), |_| {
        api.has_main_request_with(&msg)
    });
    let next = api
        .main_requests()
        .into_iter()
        .find(|r| last_user_text(r).contains(&msg))
        .unwrap();
    let text = last_user_text(&next);
    assert!(!text.contains("BUSY"), "glued to the old one: {text}");
}

/// Issue 26 item 8: a claude peer's long turn is interrupted (`iapeer interrupt`); Claude
/// Code takes the message out of the conversation and puts it back into its composer. That
/// is iapeer's own text, not a human's draft: the session clears it (Esc, Esc), the sender
/// (live) is told its message was interrupted, and the next message is delivered at once
/// and reaches the model alone. On `main` the next send was answered `queued … composer`
/// and failed 120 s later.
#[test]
fn claude_interrupted_message_is_cleared_its_sender_told_and_the_next_goes_alone() {
    let (env, api) = crate::busy::claude_holding_busy_turns();
    claude_interrupted(&env, &api, "BUSY forever\nsecond line");
    let v = send_json(&env, "cb", "NEXT one");
    assert!(
        v["ok"] == true && v["queued"].is_null(),
        "{v}\n{}\n{}",
        env.screen("claude-cb"),
        env.diagnostics()
    );
    composer_cleared(&env, "claude-cb", "true");
    the_model_gets_it_alone(&env, &api, "NEXT one");
    crate::busy::told_by_iapeer(&env, "echo-ea", "cb (claude)", "was interrupted at");
    let pane = env.pane("echo-ea");
    assert!(
        pane.contains("BUSY forever"),
        "the notice quotes it: {pane}"
    );
    assert!(
        !env.screen("claude-cb").contains("second line</msg>"),
        "{}",
        env.screen("claude-cb")
    );
}

/// Issue 26 item 5 (c), Claude Code: a paste cut off by its deadline (the agent stopped
/// reading, 45 KB sent with `--timeout 4`) lands in the composer without its Enter once the
/// agent reads again. The session clears it, and later messages are delivered at once, each
/// alone. On `main` every later message was answered `queued … composer` and then failed.
#[test]
fn claude_cut_paste_is_cleared_and_later_messages_are_delivered() {
    let (env, api) = crate::busy::claude_holding_busy_turns();
    let out = cut_a_paste(&env, "cb");
    cut_is_state_unknown(&out);
    for n in 1..=2 {
        let m = format!("LATER {n}");
        let v = send_json(&env, "cb", &m);
        assert!(v["queued"].is_null(), "{v}\n{}", env.diagnostics());
        env.wait_until("the model gets it", Duration::from_secs(30), |_| {
            api.has_main_request_with(&format!("<msg>{m}</msg>"))
        });
        assert!(
            !api.has_main_request_with("BIG"),
            "the cut message was submitted"
        );
        crate::busy::wait_idle(&env, "claude-cb");
    }
    composer_cleared(&env, "claude-cb", "false");
    // It did not arrive after all: its sender is told so, and its id goes out again.
    crate::busy::told_by_iapeer(&env, "echo-ea", "cb (claude)", "it did NOT arrive");
    let again = env.run(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--id",
        CUT_ID,
        "--message",
        "RETRY of the cut one",
    ]);
    assert!(again.status.success(), "{}", common::describe(&again));
    env.wait_until("the model gets the retry", Duration::from_secs(30), |_| {
        api.has_main_request_with("<msg>RETRY of the cut one</msg>")
    });
}

/// Issue 26 item 5 (c), Codex 0.171.0: the rest of the cut paste lands in its composer as
/// `[Pasted Content 15117 chars]`. The session clears it (Ctrl-C); the next message reaches
/// the model alone. On `main` the next paste went in glued to it and both were submitted as
/// one message.
#[test]
fn codex_cut_paste_is_cleared_and_the_next_message_goes_alone() {
    use common::openai::{last_input_text, Reply as OReply};
    let (env, api) = codex_woken(|_| OReply::Text("ok".into()));
    let out = cut_a_paste(&env, "cx");
    cut_is_state_unknown(&out);
    let v = send_json(&env, "cx", "NEXT one");
    assert!(v["queued"].is_null(), "{v}\n{}", env.diagnostics());
    env.wait_until("the model gets it", Duration::from_secs(30), |_| {
        api.recorded()
            .iter()
            .any(|r| last_input_text(r).contains("<msg>NEXT one</msg>"))
    });
    for r in api.recorded() {
        let last = last_input_text(&r);
        assert!(
            !(last.contains("NEXT one") && last.contains("BIG")),
            "glued to the cut paste: {}",
            last.chars().take(300).collect::<String>()
        );
    }
    composer_cleared(&env, "codex-cx", "false");
    assert_eq!(env.status_of("cx", "codex"), "live");
}

/// Records for the fixtures (run by name with `--ignored`; daemon of `main`): Claude Code
/// 2.1.332 interrupted mid-turn (a 2-line and a 60-line message) and its composer cleared by
/// a human's Esc, Esc; a cut paste.
#[test]
#[ignore]
fn record_claude_interrupt_and_cut() {
    let dir = record_dir("claude");
    {
        let (env, api) = crate::busy::claude_holding_busy_turns();
        claude_interrupted(&env, &api, "BUSY forever\nsecond line");
        env.pane_settled("claude-cb");
        save_pane(&dir, "interrupt-restores-prompt", &env, "claude-cb");
        eprintln!("=== restored:\n{}", env.screen("claude-cb"));
        let mut term = crate::attach::Terminal::spawn(env.cmd(&["attach", "cb"]));
        env.wait_until("attached", Duration::from_secs(30), |_| {
            term.screen().contains("second line")
        });
        env.pane_settled("claude-cb");
        term.type_bytes(b"\x1b");
        env.wait_until("the hint", Duration::from_secs(5), |_| {
            term.screen().contains("esc again to clear")
        });
        save_pane(&dir, "clear-esc-hint", &env, "claude-cb");
        term.type_bytes(b"\x1b");
        env.wait_until("cleared", Duration::from_secs(5), |_| {
            !term.screen().contains("second line")
        });
        env.pane_settled("claude-cb");
        save_pane(&dir, "clear-esc-cleared", &env, "claude-cb");
        eprintln!("=== cleared:\n{}", term.screen());
        let recs = crate::busy::records(&env.home.join(".claude/projects"));
        let keep: Vec<String> = recs
            .iter()
            .filter(|r| matches!(r["type"].as_str(), Some("user" | "assistant" | "system")))
            .map(serde_json::Value::to_string)
            .collect();
        std::fs::write(
            dir.join("interrupt-transcript.jsonl"),
            keep.join("\n") + "\n",
        )
        .unwrap();
    }
    {
        let (env, api) = crate::busy::claude_holding_busy_turns();
        let tall = (0..60)
            .map(|i| format!("BUSY line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        claude_interrupted(&env, &api, &tall);
        env.pane_settled("claude-cb");
        save_pane(&dir, "interrupt-restores-tall-prompt", &env, "claude-cb");
        eprintln!("=== tall:\n{}", env.screen("claude-cb"));
    }
    {
        let (env, _api) = crate::busy::claude_holding_busy_turns();
        let out = cut_a_paste(&env, "cb");
        eprintln!("=== the cut send: {}", common::describe(&out));
        env.pane_settled("claude-cb");
        save_pane(&dir, "cut-paste-in-composer", &env, "claude-cb");
        eprintln!("=== cut:\n{}", env.screen("claude-cb"));
    }
}

/// Records for the fixtures (run by name with `--ignored`): Codex 0.171.0 interrupted
/// mid-turn, and a cut paste in its composer cleared by Ctrl-C.
#[test]
#[ignore]
fn record_codex_interrupt_and_cut() {
    use common::openai::{last_input_text, Reply as OReply};
    let dir = record_dir("codex");
    let (env, _api) = codex_woken(|req| {
        if last_input_text(req).contains("BUSY") {
            OReply::Hold(Duration::from_secs(60))
        } else {
            OReply::Text("ok".into())
        }
    });
    crate::codex::interrupt_a_held_turn(&env, "BUSY forever\nsecond line");
    env.pane_settled("codex-cx");
    save_pane(&dir, "interrupt-keeps-prompt", &env, "codex-cx");
    eprintln!("=== interrupted:\n{}", env.screen("codex-cx"));
    let lines = crate::busy::jsonl_lines(&env.home.join(".codex/sessions"));
    let keep: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("BUSY forever") || l.contains("turn_aborted"))
        .collect();
    std::fs::write(
        dir.join("interrupt-rollout.jsonl"),
        keep.iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
    .unwrap();

    let out = cut_a_paste(&env, "cx");
    eprintln!("=== the cut send: {}", common::describe(&out));
    env.pane_settled("codex-cx");
    save_pane(&dir, "cut-paste-in-composer", &env, "codex-cx");
    eprintln!("=== cut:\n{}", env.screen("codex-cx"));
    let mut term = crate::attach::Terminal::spawn(env.cmd(&["attach", "cx"]));
    env.wait_until("attached", Duration::from_secs(30), |_| {
        term.screen().contains("[Pasted Content")
    });
    env.pane_settled("codex-cx");
    term.type_bytes(b"\x03");
    env.wait_until("cleared", Duration::from_secs(5), |_| {
        !term.screen().contains("[Pasted Content")
    });
    env.pane_settled("codex-cx");
    save_pane(&dir, "clear-ctrl-c-cleared", &env, "codex-cx");
    eprintln!("=== cleared:\n{}", term.screen());
    // A human's paste of 60 short lines: taller than the attached terminal.
    let lines = (0..60)
        .map(|i| format!("pasted line {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    term.type_bytes(format!("\x1b[200~{lines}\x1b[201~").as_bytes());
    env.wait_until("the paste shows", Duration::from_secs(10), |_| {
        term.screen().contains("pasted line 59")
    });
    env.pane_settled("codex-cx");
    save_pane(&dir, "composer-tall-paste", &env, "codex-cx");
    eprintln!("=== tall paste:\n{}", term.screen());
}

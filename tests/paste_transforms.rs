//! What a runtime does to the text iapeer pastes (issue 32 item 6): Claude Code turns a tab
//! into spaces, and a confirmation that looks for the exact pasted text reported a message
//! the model got as NOT delivered. Each transformation is recorded from the real CLIs
//! (Claude Code 2.1.332, Codex 0.171.0) against the model stand-ins — what was pasted, what
//! the model request carried, what the transcript / rollout holds — into
//! `tests/fixtures/<runtime>-<version>/paste/`, and every case is sent through the real CLI
//! here and must be answered delivered.

use crate::common;

use common::TestEnv;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// One recorded case: its name (the fixture's file name and the send's topic) and its body.
/// Each body carries `PT-<name>` so its model request and records can be found.
pub(crate) fn cases() -> Vec<(&'static str, String)> {
    let long_line = format!("PT-long-line {}", "0123456789".repeat(500));
    let many_lines = (0..200)
        .map(|i| format!("PT-many-lines row {i}\twith a tab and trailing spaces   "))
        .collect::<Vec<_>>()
        .join("\n");
    vec![
        ("tab", "PT-tab a\tb\n\tindented\ncol1\tcol2\tcol3".into()),
        (
            "tab-stops",
            "PT-tab-stops\n\tA\n1\tB\n12\tC\n123\tD\n1234567\tE\n12345678\tF\n\t\tG".into(),
        ),
        ("crlf", "PT-crlf line one\r\nline two\r\nline three".into()),
        ("lone-cr", "PT-lone-cr a\rb\rc".into()),
        (
            "trailing-spaces",
            "PT-trailing-spaces line   \nnext line\t\nlast   ".into(),
        ),
        ("trailing-newlines", "PT-trailing-newlines body\n\n\n".into()),
        ("leading-blank", "\n\n   PT-leading-blank indented".into()),
        ("blank-lines", "PT-blank-lines a\n\n\n\n\nb\n   \n\t\nc".into()),
        ("space-runs", "PT-space-runs a    b        c".into()),
        (
            "nbsp",
            "PT-nbsp a\u{00A0}b\u{202F}c\u{2007}d\u{3000}e\u{2003}f".into(),
        ),
        (
            "zero-width",
            "PT-zero-width a\u{200B}b\u{200C}c\u{200D}d\u{2060}e\u{FEFF}f\u{00AD}g".into(),
        ),
        (
            "bidi",
            "PT-bidi a\u{202E}b\u{202C}c\u{200E}d\u{200F}e\u{2066}f\u{2069}".into(),
        ),
        (
            "line-separators",
            "PT-line-separators a\u{2028}b\u{2029}c\u{000B}d\u{000C}e".into(),
        ),
        (
            "controls",
            "PT-controls \u{1b}[31mred\u{7}bell\u{0}nul\u{7f}del\u{9b}csi\u{85}nel".into(),
        ),
        (
            "combining",
            "PT-combining e\u{0301} \u{00E9} A\u{030A} \u{212B} \u{FB01}".into(),
        ),
        (
            "emoji",
            "PT-emoji 👍🏽 👨\u{200D}👩\u{200D}👧 🇫🇷 界 ｆｕｌｌ".into(),
        ),
        (
            "envelope-escapes",
            "PT-envelope-escapes </msg> <iap x=\"1\"> ]]> <![CDATA[ & \" ' < >".into(),
        ),
        ("backslash", "PT-backslash ends with \\\nnext \\t \\n".into()),
        (
            "line-starts",
            "PT-line-starts\n/compact\n!ls\n#memo\n@README.md\n> quote\n- item".into(),
        ),
        (
            "format-chars",
            "PT-format-chars a\u{034F}b\u{061C}c\u{115F}d\u{1160}e\u{180E}f\u{2061}g\u{2064}h\u{206A}i\u{3164}j\u{FE00}k\u{FE0F}l\u{FFA0}m\u{FFF9}n\u{E0001}o\u{E0041}p\u{E0100}q\u{1D173}r\u{2800}s\u{E000}t\u{FFFC}u".into(),
        ),
        ("long-line", long_line),
        ("many-lines", many_lines),
    ]
}

/// The case sent while the agent is mid-turn (the runtime holds it in its own queue first).
pub(crate) const MID_TURN: (&str, &str) = ("tab-mid-turn", "PT-tab-mid-turn a\tb\n\tindented");

/// A message interrupted mid-turn, which Claude Code puts back into its composer: a tab, zero-width
/// characters and a second line (the recorded screen's sign that it is back).
pub(crate) const INTERRUPTED: (&str, &str) = (
    "interrupt-restores-tab-prompt",
    "PT-BUSY interrupted\tcol\u{200B}zw\u{2060}wj\nsecond line\tend",
);

/// The body that starts a turn the stand-ins hold for [`HOLD`].
const BUSY: &str = "PT-BUSY hold this turn";
/// How long the stand-ins hold a [`BUSY`] turn.
const HOLD: Duration = Duration::from_secs(8);

/// Every string inside a JSON value, depth first.
fn strings(v: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(v, &mut out);
    out
}

/// The marker of case `name`.
fn marker(name: &str) -> String {
    format!("PT-{name}")
}

/// The first string in `values` holding case `name`'s marker and an envelope.
fn holding(values: &[Value], name: &str) -> Option<String> {
    let m = marker(name);
    values.iter().find_map(|v| {
        strings(v)
            .into_iter()
            .find(|s| s.contains(&m) && s.contains("<iap "))
            .map(str::to_string)
    })
}

/// `iapeer send <to> --from echo-ea --topic <name> --json`, the body on stdin: exit status
/// and the parsed answer.
fn send_case(env: &TestEnv, to: &str, name: &str, body: &str) -> (bool, Value) {
    let out = env.run_stdin(
        &[
            "send",
            to,
            "--from",
            "echo-ea",
            "--topic",
            name,
            "--message-file",
            "-",
            "--json",
        ],
        body.as_bytes(),
    );
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), v)
}

/// What iapeer pasted for case `name`: the agent form of the envelope (read back from the
/// model's copy of its first line, which carries the `ts`), controls as stand-ins.
fn pasted(model: &str, name: &str, body: &str) -> String {
    let header = model.split('\n').next().unwrap_or_default();
    let ts = header
        .split("ts=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map(String::from);
    let env = iapeer::untrusted::Envelope {
        from: "ea".into(),
        runtime: "echo".into(),
        intelligence: Some(iapeer::untrusted::Intelligence::Artificial),
        ts,
        topic: Some(name.into()),
        attachments: Vec::new(),
        body: body.into(),
    };
    let now = jiff::Zoned::now();
    iapeer::untrusted::paste_text(&iapeer::untrusted::render_agent(&env, &now)).into_owned()
}

/// The confirmation grace here: sends into a real CLI on a loaded two-core machine.
const GRACE: (&str, &str) = ("IAP_HOST_LIVENESS_GRACE_MS", "10000");

/// Send `body` (case `name`) to `to` and check the answer: exit 0, delivered (or, for the
/// mid-turn case, queued by the runtime), never "NOT delivered" nor "state unknown".
fn assert_delivered(env: &TestEnv, to: &str, identity: &str, name: &str, body: &str, queued: bool) {
    let (ok, v) = send_case(env, to, name, body);
    assert!(
        ok && v["ok"] == true,
        "{name}: {v}\nscreen:\n{}\n{}",
        env.screen(identity),
        env.diagnostics()
    );
    if queued {
        assert_eq!(v["queuedBy"], "runtime", "{name}: {v}");
    } else {
        assert!(v["queued"].is_null(), "{name}: {v}");
    }
}

/// The message the runtime queued is followed until it reaches the model: its
/// `delivery-followup` line says delivered, and its sender gets no loss notice.
fn followed_to_the_model(env: &TestEnv) {
    env.wait_until(
        "the follow-up says delivered",
        Duration::from_secs(60),
        |e| e.has_event("delivery", "delivery-followup", &[("outcome", "delivered")]),
    );
    assert!(
        !env.pane("echo-ea").contains("from iapeer"),
        "no loss notice"
    );
}

/// Issue 32 item 6: every recorded transformation, sent through the real Claude Code 2.1.332
/// to a live peer, is answered delivered and reaches the model; the message pasted mid-turn
/// is answered queued and followed to the model. On `main` a TAB, a zero-width or bidi
/// character, U+2028 and a format character were answered "state unknown" (never
/// confirmed) though the model got them.
#[test]
fn claude_every_recorded_transformation_is_delivered() {
    use common::anthropic::{last_user_text, Reply};
    let (env, api) = crate::claude::world(&[GRACE]);
    api.script(|req| {
        if last_user_text(req).contains("PT-BUSY") {
            Reply::Hold(HOLD, "held".into())
        } else {
            Reply::Text("ok".into())
        }
    });
    env.ok(&["new", "ea"]);
    crate::busy::wake_claude(&env);
    for (name, body) in cases() {
        crate::busy::wait_idle(&env, "claude-cb");
        assert_delivered(&env, "cb", "claude-cb", name, &body, false);
        let m = marker(name);
        env.wait_until("the model gets it", Duration::from_secs(60), |_| {
            api.main_requests()
                .iter()
                .any(|r| last_user_text(r).contains(&m))
        });
    }
    let (name, body) = MID_TURN;
    crate::busy::wait_idle(&env, "claude-cb");
    env.ok(&["send", "cb", "--from", "echo-ea", "--message", BUSY]);
    env.wait_until("claude is mid-turn", Duration::from_secs(30), |e| {
        e.screen("claude-cb").contains("esc to interrupt")
    });
    assert_delivered(&env, "cb", "claude-cb", name, body, true);
    followed_to_the_model(&env);
}

/// Issue 32 item 6 with the real Codex 0.171.0: every recorded case is answered delivered;
/// the one pasted mid-turn is answered queued (its preview draws a TAB as nothing: on `main`
/// it was never seen queued and was answered "state unknown") and followed to the model.
#[test]
fn codex_every_recorded_transformation_is_delivered() {
    use common::openai::{input_text, last_input_text, Reply};
    let (env, api) = crate::codex::world_with(&[GRACE]);
    api.script(|req| {
        if last_input_text(req).contains("PT-BUSY") {
            Reply::Hold(HOLD)
        } else {
            Reply::Text("ok".into())
        }
    });
    env.ok(&["new", "ea"]);
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "echo: wake"]);
    let mut turns = 1;
    crate::busy::wait_codex_turns(&env, turns);
    for (name, body) in cases() {
        assert_delivered(&env, "cx", "codex-cx", name, &body, false);
        let m = marker(name);
        env.wait_until("the model gets it", Duration::from_secs(60), |_| {
            api.recorded()
                .iter()
                .any(|r| last_input_text(r).contains(&m))
        });
        turns += 1;
        crate::busy::wait_codex_turns(&env, turns);
    }
    let (name, body) = MID_TURN;
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", BUSY]);
    env.wait_until("codex is mid-turn", Duration::from_secs(30), |e| {
        e.screen("codex-cx")
            .to_lowercase()
            .contains("esc to interrupt")
    });
    assert_delivered(&env, "cx", "codex-cx", name, body, true);
    let m = marker(name);
    env.wait_until("the model gets it", Duration::from_secs(60), |_| {
        api.recorded().iter().any(|r| input_text(r).contains(&m))
    });
    followed_to_the_model(&env);
}

/// Write case `name`'s recording (`body` as sent) to `dir`: the runtime (`<name>-<version>`),
/// what iapeer pasted, what the model got, `seen` (an object: where the runtime keeps it —
/// transcript, rollout, its queue, its screen) and what `main` answered (`answer`: exit 0 and
/// the parsed answer).
fn record_case(
    dir: &Path,
    runtime: &str,
    (name, body): (&str, &str),
    model: &str,
    seen: Value,
    answer: (bool, Value),
) {
    let (rt, version) = runtime.split_once('-').unwrap_or((runtime, ""));
    let mut doc = json!({
        "runtime": rt,
        "version": version,
        "case": name,
        "body": body,
        "pasted": pasted(model, name, body),
        "model": model,
        "answer_on_main": {"exit_ok": answer.0, "answer": answer.1},
    });
    if let (Some(doc), Value::Object(seen)) = (doc.as_object_mut(), seen) {
        doc.extend(seen);
    }
    write_case(dir, name, &doc);
    eprintln!("{name}: ok={} {}", answer.0, answer.1);
}

/// One case's recording.
fn write_case(dir: &Path, name: &str, doc: &Value) {
    let text = serde_json::to_string_pretty(doc).unwrap() + "\n";
    std::fs::write(dir.join(format!("{name}.json")), text).unwrap();
}

/// Case `name` as Claude Code passed it on, once the model got it: the string of the model
/// request holding it, and that of the transcript's `user` record.
fn claude_observed(
    env: &TestEnv,
    api: &common::anthropic::AnthropicStandIn,
    name: &str,
) -> (String, Option<String>) {
    use common::anthropic::last_user_text;
    let m = marker(name);
    env.wait_until("the model gets it", Duration::from_secs(60), |_| {
        api.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains(&m))
    });
    let requests: Vec<Value> = api
        .main_requests()
        .into_iter()
        .map(|r| r["messages"].clone())
        .collect();
    let model = holding(&requests, name).unwrap_or_default();
    let mut transcript = None;
    env.wait_until("the transcript has it", Duration::from_secs(30), |e| {
        let recs: Vec<Value> = crate::busy::records(&e.home.join(".claude/projects"))
            .into_iter()
            .filter(|r| r["type"] == "user")
            .collect();
        transcript = holding(&recs, name);
        transcript.is_some()
    });
    (model, transcript)
}

/// Records for `tests/fixtures/claude-2.1.332/paste/` (run by name with `--ignored`): every
/// case sent to a live claude peer, then what the model request and the transcript hold.
#[test]
#[ignore]
fn record_claude_paste_transforms() {
    use common::anthropic::{last_user_text, Reply};
    let dir = crate::interrupt::record_dir("claude-paste");
    let (env, api) = crate::claude::world(&[("IAP_HOST_LIVENESS_GRACE_MS", "6000")]);
    api.script(|req| {
        if last_user_text(req).contains("PT-BUSY") {
            Reply::Hold(HOLD, "held".into())
        } else {
            Reply::Text("ok".into())
        }
    });
    crate::busy::wake_claude(&env);
    for (name, body) in cases() {
        crate::busy::wait_idle(&env, "claude-cb");
        let (ok, answer) = send_case(&env, "cb", name, &body);
        let (model, transcript) = claude_observed(&env, &api, name);
        let seen = json!({"transcript": transcript});
        record_case(
            &dir,
            "claude-2.1.332",
            (name, &body),
            &model,
            seen,
            (ok, answer),
        );
    }
    // Mid-turn: Claude Code holds the message in its queue (an `enqueue` record) first.
    let (name, body) = MID_TURN;
    crate::busy::wait_idle(&env, "claude-cb");
    env.ok(&["send", "cb", "--from", "echo-ea", "--message", BUSY]);
    env.wait_until("claude is mid-turn", Duration::from_secs(30), |e| {
        e.screen("claude-cb").contains("esc to interrupt")
    });
    let (ok, answer) = send_case(&env, "cb", name, body);
    let (model, transcript) = claude_observed(&env, &api, name);
    let queued: Vec<Value> = crate::busy::records(&env.home.join(".claude/projects"))
        .into_iter()
        .filter(|r| r["type"] == "queue-operation")
        .collect();
    let seen = json!({"transcript": transcript, "enqueue": holding(&queued, name)});
    record_case(
        &dir,
        "claude-2.1.332",
        (name, body),
        &model,
        seen,
        (ok, answer),
    );
    crate::interrupt::save_pane(&dir, "session", &env, "claude-cb");
    // Interrupted: Claude Code puts the prompt back into its composer as it shows it.
    crate::busy::wait_idle(&env, "claude-cb");
    let (name, body) = INTERRUPTED;
    // (Answered NOT delivered on `main`: its tab and zero-width characters.)
    env.run(&["send", "cb", "--from", "echo-ea", "--message", body]);
    crate::interrupt::claude_interrupted_mid_turn(&env, &api, "PT-BUSY interrupted");
    env.wait_until("the prompt is back", Duration::from_secs(30), |e| {
        let s = e.screen("claude-cb");
        !s.contains("esc to interrupt") && s.contains("second line")
    });
    env.pane_settled("claude-cb");
    crate::interrupt::save_pane(&dir, name, &env, "claude-cb");
}

/// The string of Codex's session files (its rollout) holding case `name`: the user
/// message's `response_item`.
fn codex_rollout(env: &TestEnv, name: &str) -> Option<String> {
    let recs: Vec<Value> = crate::busy::records(&env.home.join(".codex/sessions"))
        .into_iter()
        .filter(|r| r["type"] == "response_item" && r["payload"]["role"] == "user")
        .collect();
    holding(&recs, name)
}

/// Records for `tests/fixtures/codex-0.171.0/paste/` (run by name with `--ignored`): every
/// case sent to a live codex peer, then what the model request and the rollout hold.
#[test]
#[ignore]
fn record_codex_paste_transforms() {
    use common::openai::{input_text, last_input_text, Reply};
    let dir = crate::interrupt::record_dir("codex-paste");
    let (env, api) = crate::codex::world_with(&[("IAP_HOST_LIVENESS_GRACE_MS", "6000")]);
    api.script(|req| {
        if last_input_text(req).contains("PT-BUSY") {
            Reply::Hold(HOLD)
        } else {
            Reply::Text("ok".into())
        }
    });
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "echo: wake"]);
    let mut turns = 1;
    crate::busy::wait_codex_turns(&env, turns);
    for (name, body) in cases() {
        let (ok, answer) = send_case(&env, "cx", name, &body);
        let m = marker(name);
        env.wait_until("the model gets it", Duration::from_secs(60), |_| {
            api.recorded()
                .iter()
                .any(|r| last_input_text(r).contains(&m))
        });
        turns += 1;
        crate::busy::wait_codex_turns(&env, turns);
        let requests: Vec<Value> = api
            .recorded()
            .into_iter()
            .map(|r| {
                r["input"]
                    .as_array()
                    .and_then(|a| a.last())
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        let model = holding(&requests, name).unwrap_or_default();
        let seen = json!({"rollout": codex_rollout(&env, name)});
        record_case(
            &dir,
            "codex-0.171.0",
            (name, &body),
            &model,
            seen,
            (ok, answer),
        );
    }
    crate::interrupt::save_pane(&dir, "session", &env, "codex-cx");
    // Mid-turn: Codex shows it under its pending-input preview, then writes it when it
    // joins the running turn.
    let (name, body) = MID_TURN;
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", BUSY]);
    env.wait_until("codex is mid-turn", Duration::from_secs(30), |e| {
        e.screen("codex-cx")
            .to_lowercase()
            .contains("esc to interrupt")
    });
    let (ok, answer) = send_case(&env, "cx", name, body);
    let preview = env.screen("codex-cx");
    crate::interrupt::save_pane(&dir, name, &env, "codex-cx");
    let m = marker(name);
    env.wait_until("the model gets it", Duration::from_secs(60), |_| {
        api.recorded().iter().any(|r| input_text(r).contains(&m))
    });
    turns += 1;
    crate::busy::wait_codex_turns(&env, turns);
    let requests: Vec<Value> = api
        .recorded()
        .into_iter()
        .flat_map(|r| r["input"].as_array().cloned().unwrap_or_default())
        .collect();
    let model = holding(&requests, name).unwrap_or_default();
    let seen = json!({"rollout": codex_rollout(&env, name), "screen_while_queued": preview});
    record_case(
        &dir,
        "codex-0.171.0",
        (name, body),
        &model,
        seen,
        (ok, answer),
    );
}

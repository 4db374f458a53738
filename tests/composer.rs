//! Text in an agent's composer is never submitted together with a message (issue 7 item 2,
//! spec 05 §7): real Claude Code against the model stand-in, a real attached terminal.

use crate::common;

use common::anthropic::{last_user_text, Reply};
use serde_json::Value;
use std::time::Duration;

/// A person's pause after typing a draft, before a message is sent to the peer.
fn pause_as_a_person() {
    // Time is the thing tested: Claude Code takes keys within 700 ms of typing for more typing
    // (runtime/claude.rs), so the message comes after a person's pause.
    std::thread::sleep(Duration::from_secs(2));
}

/// Attach to `peer` as a human would, wait for its screen (`shows`), type `my unfinished
/// draft` without Enter and let 2 s pass.
fn attach_and_draft(env: &common::TestEnv, peer: &str, shows: &str) -> crate::attach::Terminal {
    let mut term = crate::attach::Terminal::spawn(env.cmd(&["attach", peer]));
    env.wait_until(
        "the attached terminal shows the agent",
        Duration::from_secs(30),
        |_| term.screen().contains(shows),
    );
    term.type_bytes(b"my unfinished draft");
    env.wait_until("the draft is on screen", Duration::from_secs(30), |_| {
        term.screen().contains("my unfinished draft")
    });
    pause_as_a_person();
    term
}

/// `iapeer send <args> --json`: answered `queued` by the composer (a draft holds it).
fn send_held_by_the_draft(env: &common::TestEnv, args: &[&str]) {
    let out = env.run(&[&["send"], args, &["--json"]].concat());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(
        out.status.success() && v["queued"] == true && v["queuedBy"] == "composer",
        "{}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
}

/// The person deletes the draft ([`attach_and_draft`]'s 19 characters): the held message
/// is delivered and its sender told.
fn clear_the_draft(env: &common::TestEnv, term: &mut crate::attach::Terminal) {
    term.type_bytes(&[0x7f; 19]);
    env.wait_until(
        "the held message is delivered and followed",
        Duration::from_secs(30),
        |e| {
            e.has_event(
                "delivery",
                "delivery-followup",
                &[("qkind", "composer"), ("outcome", "delivered")],
            )
        },
    );
}

/// alice and bob on the echo stand-in, bob live with a human attached who typed `half a
/// thought` without Enter (the daemon with `vars`).
fn echo_bob_with_a_draft(vars: &[(&str, &str)]) -> (common::TestEnv, crate::attach::Terminal) {
    let mut env = common::TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: wake",
    ]);
    let mut term = crate::attach::Terminal::spawn(env.cmd(&["attach", "bob"]));
    env.wait_until(
        "the attached terminal shows bob",
        Duration::from_secs(30),
        |_| term.screen().contains("❯"),
    );
    term.type_bytes(b"half a thought");
    env.wait_until("the draft is on screen", Duration::from_secs(30), |_| {
        term.screen().contains("half a thought")
    });
    (env, term)
}

/// A human attached to a live claude peer types a draft without Enter; a message sent 2 s
/// later waits (`queued`, `queuedBy: "composer"`) instead of being submitted glued to the
/// draft; once the human clears the draft it goes in alone, and `delivery.log` follows it.
#[test]
fn claude_draft_in_the_composer_holds_the_message_until_the_composer_is_free() {
    let (env, api) = crate::claude::world(&[]);
    api.script(|_| Reply::Text("ok".into()));
    crate::busy::wake_claude(&env);
    let mut term = attach_and_draft(&env, "cb", "bypass permissions");
    send_held_by_the_draft(
        &env,
        &[
            "cb",
            "--from",
            "echo-ea",
            "--message",
            "hello there",
            "--topic",
            "t",
        ],
    );
    let glued = |api: &common::anthropic::AnthropicStandIn| {
        api.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains("my unfinished draft"))
    };
    // The session looked at the held message again and kept it: nothing was written to the
    // agent, so no turn could start with the draft.
    env.wait_still_held("claude-cb");
    assert!(!glued(&api), "the draft was submitted");
    assert!(
        !api.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains("<msg>hello there</msg>")),
        "the message went in while the draft was there"
    );
    // The human clears the draft: the message goes in alone.
    clear_the_draft(&env, &mut term);
    env.wait_until("the model gets it", Duration::from_secs(30), |_| {
        api.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains("<msg>hello there</msg>"))
    });
    assert!(!glued(&api), "the draft was submitted");
    assert!(env.has_event(
        "delivery",
        "delivery",
        &[("to", "cb"), ("queued", "true"), ("qkind", "composer")]
    ));
}

/// The same with Codex 0.171: the draft holds the message, clearing it lets the message in
/// alone.
#[test]
fn codex_draft_in_the_composer_holds_the_message_until_the_composer_is_free() {
    use common::openai::{input_text, Reply as OReply};
    let (env, api) = crate::codex::world();
    api.script(|_| OReply::Text("ok".into()));
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "echo: wake"]);
    let mut term = attach_and_draft(&env, "cx", "Ask Codex");
    send_held_by_the_draft(
        &env,
        &["cx", "--from", "echo-ea", "--message", "hello there"],
    );
    let sent = |api: &common::openai::OpenAiStandIn, needle: &str| {
        api.recorded()
            .iter()
            .any(|r| input_text(r).contains(needle))
    };
    // The session looked at the held message again and kept it: nothing was written to the
    // agent, so no turn could start with the draft.
    env.wait_still_held("codex-cx");
    assert!(
        !sent(&api, "<msg>hello there</msg>"),
        "went in with the draft"
    );
    clear_the_draft(&env, &mut term);
    env.wait_until("the model gets it", Duration::from_secs(30), |_| {
        sent(&api, "<msg>hello there</msg>")
    });
    assert!(
        !sent(&api, "my unfinished draft"),
        "the draft was submitted"
    );
}

/// The same with Gemini CLI 0.61.0, whose composer a delivery now clears of stray terminal
/// answers first (`session::hold::leftovers_step`): a person's draft is no such leftover — it
/// holds the message, and clearing it lets the message in alone.
#[test]
fn gemini_draft_in_the_composer_holds_the_message_until_the_composer_is_free() {
    use common::gemini::{last_text, GeminiStandIn};
    let Some(bin) = crate::gemini_e2e::gemini_bin() else {
        return;
    };
    let mut env = common::TestEnv::new();
    let api = GeminiStandIn::start();
    crate::gemini_e2e::add_peer(&mut env, &bin, "gm", &api);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    env.ok(&["send", "gm", "--from", "echo-ea", "--message", "wake"]);
    let mut term = attach_and_draft(&env, "gm", "YOLO Ctrl+Y");
    send_held_by_the_draft(
        &env,
        &["gm", "--from", "echo-ea", "--message", "hello there"],
    );
    let sent = |needle: &str| api.turns().iter().any(|r| last_text(r).contains(needle));
    env.wait_still_held("gemini-gm");
    assert!(!sent("hello there"), "went in with the draft");
    assert!(
        env.screen("gemini-gm").contains("my unfinished draft"),
        "the draft was cleared: {}",
        env.screen("gemini-gm")
    );
    clear_the_draft(&env, &mut term);
    env.wait_until("the model gets it", Duration::from_secs(30), |_| {
        sent("hello there")
    });
    assert!(!sent("my unfinished draft"), "the draft was submitted");
}

/// `IAPEER_COMPOSER_QUEUE_TIMEOUT_MS` (spec 05 §7): a draft left in an echo agent's composer
/// holds a message for that long; then the message fails (`outcome=held-too-long`) and is
/// never typed after the draft — the draft stays as the human left it.
#[test]
fn a_draft_left_past_the_composer_timeout_fails_the_message_and_keeps_the_draft() {
    let (env, term) = echo_bob_with_a_draft(&[("IAPEER_COMPOSER_QUEUE_TIMEOUT_MS", "1500")]);
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: later",
    ]);
    assert!(out.starts_with("queued for bob (echo) — composer"), "{out}");
    env.wait_until("the hold gives up", Duration::from_secs(30), |e| {
        e.has_event(
            "delivery",
            "delivery-followup",
            &[("qkind", "composer"), ("outcome", "held-too-long")],
        )
    });
    assert!(
        !env.pane("echo-bob").contains("echo: later"),
        "{}",
        env.diagnostics()
    );
    assert!(term.screen().contains("half a thought"));
}

/// Every message that comes while a draft holds one is answered at once — `queued`,
/// composer, with its place in line — instead of its sender waiting, unanswered, for the
/// draft to go (spec 05 §7 and spec 07's `— composer, depth <n>`; found by a newcomer
/// walkthrough: the second sender still waited after 40 s). Once the draft is cleared they
/// all go in, in order, each followed to `outcome=delivered`.
#[test]
fn messages_behind_a_draft_are_each_answered_queued_with_their_depth() {
    let (env, mut term) = echo_bob_with_a_draft(&[]);
    for n in 1..=3 {
        let out = env.run(&[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            &format!("echo: later {n}"),
            "--timeout",
            "10",
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && text.starts_with(&format!("queued for bob (echo) — composer, depth {n}")),
            "message {n}: {}",
            common::describe(&out)
        );
    }
    term.type_bytes(&[0x7f; 14]);
    env.wait_until(
        "all three are delivered and followed",
        Duration::from_secs(30),
        |e| {
            e.events("delivery", "delivery-followup")
                .iter()
                .filter(|f| f["qkind"] == "composer" && f["outcome"] == "delivered")
                .count()
                == 3
        },
    );
    let pane = env.pane("echo-bob");
    let at = |m: &str| pane.find(m).unwrap_or_else(|| panic!("{m} not in\n{pane}"));
    assert!(at("echo: later 1") < at("echo: later 2") && at("echo: later 2") < at("echo: later 3"));
    assert!(!pane.contains("half a thoughtecho"), "{pane}");
}

/// Issue 26 item 8's other side: iapeer clears only its own text from a composer. A human
/// who types the first line of a message iapeer delivered earlier (its envelope's header,
/// sender and time) and goes on with their own words has a draft: it holds the next message
/// (`queued … composer`), is never cleared, and is not submitted with it.
#[test]
fn claude_draft_sharing_a_start_with_an_old_message_is_still_a_draft() {
    let (env, api) = crate::claude::world(&[]);
    api.script(|_| Reply::Text("ok".into()));
    crate::busy::wake_claude(&env);
    let header = || {
        crate::busy::records(&env.home.join(".claude/projects"))
            .iter()
            .filter(|r| r["type"] == "user")
            .filter_map(|r| r["message"]["content"].as_str().map(str::to_string))
            .find(|c| c.contains("<msg>hello</msg>"))
            .and_then(|c| c.lines().next().map(str::to_string))
    };
    env.wait_until(
        "the delivered message in the transcript",
        Duration::from_secs(30),
        |_| header().is_some(),
    );
    let header = header().unwrap();
    assert!(header.starts_with("<iap from=\"ea\""), "{header}");
    let mut term = crate::attach::Terminal::spawn(env.cmd(&["attach", "cb"]));
    env.wait_until(
        "the attached terminal shows the agent",
        Duration::from_secs(30),
        |_| term.screen().contains("bypass permissions"),
    );
    term.type_bytes(format!("{header} my own words").as_bytes());
    env.wait_until("the draft is on screen", Duration::from_secs(30), |_| {
        term.screen().contains("my own words")
    });
    pause_as_a_person();
    let (ok, v, _) = crate::busy::send_json(&env, "cb", "hello there");
    assert!(
        ok && v["queued"] == true && v["queuedBy"] == "composer",
        "{v}\n{}",
        env.diagnostics()
    );
    // The held message re-checks the composer and must not go in while the draft is there:
    // the session looked again and kept holding it.
    env.wait_still_held("claude-cb");
    assert!(term.screen().contains("my own words"), "{}", term.screen());
    assert!(!env.has_event("lifecycle", "composer-cleared", &[]));
    assert!(
        !api.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains("my own words")
                || last_user_text(r).contains("<msg>hello there</msg>")),
        "submitted with the draft or over it"
    );
}

//! The origin guard (spec 10 §2, issue 10 item 3) with the real daemon, echo agents and a
//! human on two channels: `ann` (the built-in `human` inbox as her default runtime, plus a
//! `web` channel whose process writes every delivered line to `web.log`). Ann writes to the
//! echo agent `bot` from `web`; bot's echo goes to ann's default runtime — another channel —
//! and is held until `confirm-send`.

use crate::common;

use common::TestEnv;
use std::process::Output;
use std::time::Duration;

/// ann (human + web), the echo agents bot and other, the daemon up with `vars`.
fn world(vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    // The web channel: every line delivered to it goes to <dir>/web.log.
    env.install_line_sink("web", &env.dir.path().join("web.log"));
    env.create_echo("bot");
    env.create_echo("other");
    env.ok(&["create", "ann", "--runtime", "human"]);
    // A second channel of one human is declared in the registry (as channel packages do;
    // `add-runtime` is for agent runtimes).
    let registry = env.paths().registry();
    let mut r: serde_json::Value = serde_json::from_str(&common::read(&registry)).unwrap();
    let ann = r["peers"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["personality"] == "ann")
        .unwrap();
    ann["runtimes"].as_array_mut().unwrap().push("web".into());
    std::fs::write(&registry, r.to_string()).unwrap();
    env.start_daemon();
    env
}

fn pending(env: &TestEnv) -> std::path::PathBuf {
    env.root.join("state/iapeer/origin/pending")
}

/// The ids of the holds waiting for `confirm-send`.
fn hold_ids(env: &TestEnv) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(pending(env))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".json").map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// `iapeer confirm-send <args>` as the session `identity` (its `PEER_IDENTITY`), or as the
/// operator (`None`).
fn confirm(env: &TestEnv, identity: Option<&str>, args: &[&str]) -> Output {
    let mut all = vec!["confirm-send"];
    all.extend_from_slice(args);
    let mut cmd = env.cmd(&all);
    if let Some(id) = identity {
        cmd.env("PEER_IDENTITY", id);
    }
    cmd.output().expect("run iapeer confirm-send")
}

fn web_log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.dir.path().join("web.log")).unwrap_or_default()
}

/// Ann writes from `web`; bot's echo to ann's default runtime is held (its sender is told
/// the origin, the id and the commands; nothing reaches ann); another session cannot confirm
/// it; bot redirects it to `web`; the hold is gone, and the pair answered, bot's next message
/// to ann passes on any channel.
#[test]
fn an_answer_on_another_channel_is_held_until_its_sender_confirms_it() {
    let env = world(&[]);
    env.ok(&[
        "send",
        "bot",
        "--from",
        "web-ann",
        "--message",
        "hi from web",
    ]);
    env.wait_until(
        "bot's echo is held and logged",
        Duration::from_secs(20),
        |e| {
            hold_ids(e).len() == 1
                && e.has_event(
                    "delivery",
                    "delivery",
                    &[("caller", "echo-bot"), ("to", "ann")],
                )
        },
    );
    let id = hold_ids(&env).remove(0);
    let refused = env
        .events("delivery", "delivery")
        .into_iter()
        .find(|d| d["caller"] == "echo-bot" && d["to"] == "ann")
        .expect("bot's send to ann is logged");
    assert_eq!(refused["ok"], "false", "{refused:?}");
    let err = &refused["err"];
    for part in [
        id.as_str(),
        "\"web\"",
        "\"human\"",
        "iapeer confirm-send",
        "--runtime web",
    ] {
        assert!(err.contains(part), "{part} not in: {err}");
    }
    let inbox = env.ok(&["inbox", "ann", "--all", "--json"]);
    assert!(!inbox.contains("hi from web"), "{inbox}");

    let other = confirm(&env, Some("echo-other"), &[&id]);
    assert_eq!(other.status.code(), Some(1), "{}", common::describe(&other));
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("echo-bot's"),
        "{}",
        common::describe(&other)
    );
    assert_eq!(
        hold_ids(&env),
        vec![id.clone()],
        "a refused claim keeps the hold"
    );

    let ok = confirm(&env, Some("echo-bot"), &[&id, "--runtime", "web"]);
    assert!(ok.status.success(), "{}", common::describe(&ok));
    assert!(
        String::from_utf8_lossy(&ok.stdout).starts_with("delivered to ann (web)"),
        "{}",
        common::describe(&ok)
    );
    env.wait_until(
        "the echo reached the web channel",
        Duration::from_secs(10),
        |e| web_log(e).contains("echo: hi from web"),
    );
    assert!(hold_ids(&env).is_empty(), "{:?}", hold_ids(&env));
    assert!(!pending(&env).join(format!("{id}.claimed")).exists());
    assert!(env.has_event(
        "delivery",
        "delivery",
        &[
            ("path", "confirm"),
            ("caller", "echo-bot"),
            ("via", "web-ann"),
            ("ok", "true")
        ]
    ));
    let again = confirm(&env, None, &[&id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("no held message"));

    // Answered on web: bot's own initiative reaches ann on her default channel.
    let out = env.ok(&[
        "send",
        "ann",
        "--from",
        "echo-bot",
        "--message",
        "later, by inbox",
    ]);
    assert_eq!(out.trim(), "delivered to ann (human)");
    assert!(hold_ids(&env).is_empty());
    let state = common::read(&env.root.join("state/iapeer/origin/state.json"));
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["bot"]["ann"]["rt"], "web", "{state}");
    assert!(
        state["bot"]["ann"]["answeredTs"].as_u64().is_some(),
        "{state}"
    );
}

/// A confirm whose send is refused keeps the hold (pending again); two confirms at once
/// deliver it exactly once; an unanswered hold expires and is dropped by the tick.
#[test]
fn a_failed_confirm_keeps_the_hold_two_at_once_deliver_once_and_holds_expire() {
    let env = world(&[
        ("IAPEER_TICK_SECS", "1"),
        ("IAPEER_ORIGIN_HOLD_TTL_MS", "20000"),
    ]);
    env.ok(&["send", "bot", "--from", "web-ann", "--message", "first"]);
    env.wait_until("bot's echo is held", Duration::from_secs(20), |e| {
        hold_ids(e).len() == 1
    });
    let id = hold_ids(&env).remove(0);
    let bad = confirm(&env, None, &[&id, "--runtime", "email"]);
    assert!(!bad.status.success(), "{}", common::describe(&bad));
    assert_eq!(
        hold_ids(&env),
        vec![id.clone()],
        "the hold is pending again"
    );

    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| confirm(&env, None, &[&id, "--runtime", "web", "--json"]));
        let b = s.spawn(|| confirm(&env, None, &[&id, "--runtime", "web", "--json"]));
        (a.join().unwrap(), b.join().unwrap())
    });
    let wins = [&a, &b].iter().filter(|o| o.status.success()).count();
    assert_eq!(
        wins,
        1,
        "{}\n{}",
        common::describe(&a),
        common::describe(&b)
    );
    env.wait_until(
        "the echo reached the web channel",
        Duration::from_secs(10),
        |e| web_log(e).contains("echo: first"),
    );
    assert_eq!(
        web_log(&env).matches("echo: first").count(),
        1,
        "{}",
        web_log(&env)
    );

    // A new message from web arms the pair again; this hold is left to expire.
    env.ok(&["send", "bot", "--from", "web-ann", "--message", "second"]);
    env.wait_until("the second echo is held", Duration::from_secs(20), |e| {
        hold_ids(e).len() == 1
    });
    let late = hold_ids(&env).remove(0);
    // The tick removes the file, then logs the line.
    env.wait_until("the hold expired", Duration::from_secs(40), |e| {
        hold_ids(e).is_empty()
            && e.has_event(
                "lifecycle",
                "origin-hold",
                &[("action", "expired"), ("id", &late)],
            )
    });
    let gone = confirm(&env, Some("echo-bot"), &[&late]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(!web_log(&env).contains("echo: second"));
}

/// `IAPEER_ORIGIN_GUARD=0`: the echo goes to ann's default channel at once.
#[test]
fn with_the_guard_off_the_answer_goes_where_it_was_addressed() {
    let env = world(&[("IAPEER_ORIGIN_GUARD", "0")]);
    env.ok(&["send", "bot", "--from", "web-ann", "--message", "no guard"]);
    env.wait_until("the echo is in ann's inbox", Duration::from_secs(20), |e| {
        e.ok(&["inbox", "ann", "--all", "--json"])
            .contains("echo: no guard")
    });
    assert!(hold_ids(&env).is_empty());
}

/// A hold the original TypeScript iapeer made (its file shape, recorded from its source in
/// `tests/fixtures/iapeer-original-95c837e/`), held 20 minutes ago under its own TTL
/// variable `IAPEER_ORIGIN_GUARD_PENDING_TTL_MS` (1 h here): after the move, a human's
/// `confirm-send --runtime web` delivers it there as its sender (issue 30 item 7).
#[test]
fn a_hold_the_original_tool_made_is_confirmed_after_the_move() {
    let env = world(&[("IAPEER_ORIGIN_GUARD_PENDING_TTL_MS", "3600000")]);
    let recorded = common::read(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/iapeer-original-95c837e/origin/pending/og-1a2b3c4d.json"),
    );
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let created = now_ms - 20 * 60 * 1000;
    let text = recorded.replace(
        "\"createdMs\": 1784102283000",
        &format!("\"createdMs\": {created}"),
    );
    assert_ne!(text, recorded, "the fixture has its createdMs");
    std::fs::create_dir_all(pending(&env)).unwrap();
    std::fs::write(pending(&env).join("og-1a2b3c4d.json"), text).unwrap();

    let out = confirm(&env, None, &["og-1a2b3c4d", "--runtime", "web"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    env.wait_until(
        "the held message reached the web channel",
        Duration::from_secs(20),
        |e| web_log(e).contains("from the original"),
    );
    assert!(hold_ids(&env).is_empty());
    assert!(env.has_event(
        "lifecycle",
        "origin-hold",
        &[
            ("action", "confirmed"),
            ("id", "og-1a2b3c4d"),
            ("from", "echo-bot")
        ]
    ));
}

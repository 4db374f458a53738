//! `iapeer prompt` (issue 30 item 3): the system prompt a peer's next wake starts with, shown
//! layer by layer with where each comes from — and exactly what the real daemon then writes
//! for the real wake.

use crate::common;

use common::TestEnv;
use serde_json::Value;
use std::time::Duration;

/// A world with echo peers `bob` (a role in its doctrine) and `alice`, a host fragment and a
/// file the prompt leaves out; no daemon yet.
fn world() -> TestEnv {
    let env = TestEnv::new();
    env.ok(&[
        "create",
        "bob",
        "--runtime",
        "echo",
        "--description",
        "reviews PRs",
    ]);
    env.create_echo("alice");
    let doctrine = env.peer_dir("bob").join(".iapeer/IAPEER.md");
    std::fs::write(&doctrine, "You review pull requests for the web team.\n").unwrap();
    std::fs::create_dir_all(env.root.join("fragments")).unwrap();
    std::fs::write(env.root.join("fragments/style.md"), "Be terse.\n").unwrap();
    std::fs::write(env.root.join("notes.md"), b"\xff\xfe not text").unwrap();
    env
}

#[test]
fn prompt_shows_each_layer_with_its_source_and_is_what_the_next_wake_gets() {
    let mut env = world();
    // Labelled view, no daemon needed.
    let out = env.ok(&["prompt", "bob"]);
    let doctrine = env.peer_dir("bob").join(".iapeer/IAPEER.md");
    for want in [
        "The system prompt echo-bob's next wake starts with".to_string(),
        "(no host-doctrine: ".to_string(),
        "── identity · the registry entry and this host ──".to_string(),
        "description: \"reviews PRs\"".to_string(),
        format!("── peer-doctrine · {} ──", doctrine.display()),
        "You review pull requests for the web team.".to_string(),
        "── known-peers · the registry ──".to_string(),
        "- alice".to_string(),
        format!(
            "── fragment · {} ──",
            env.root.join("fragments/style.md").display()
        ),
        format!(
            "(left out: {} — not UTF-8)",
            env.root.join("notes.md").display()
        ),
    ] {
        assert!(out.contains(&want), "missing {want:?} in:\n{out}");
    }
    // The order of the layers is the prompt's.
    let at = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} in {out}"));
    assert!(at("── identity") < at("── docs") && at("── docs") < at("── peer-doctrine"));
    assert!(
        at("── peer-doctrine") < at("── known-peers") && at("── known-peers") < at("── fragment")
    );

    let json: Value = serde_json::from_str(&env.ok(&["prompt", "bob", "--json"])).unwrap();
    let layers: Vec<&str> = json["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["layer"].as_str().unwrap())
        .collect();
    assert_eq!(
        layers,
        [
            "identity",
            "docs",
            "peer-doctrine",
            "known-peers",
            "fragment"
        ]
    );
    assert_eq!(json["skipped"][0]["reason"], "not UTF-8");
    let raw = env.ok(&["prompt", "bob", "--raw"]);
    assert_eq!(json["prompt"], raw.as_str());

    // The real wake writes exactly that prompt.
    env.start_daemon();
    let file = env.marker("echo-bob", ".system-prompt.md");
    assert!(!file.exists());
    env.ok(&["wake", "bob"]);
    env.wait_until("the prompt is written", Duration::from_secs(10), |_| {
        file.exists()
    });
    assert_eq!(
        common::read(&file),
        raw,
        "prompt --raw is what the wake wrote"
    );
}

#[test]
fn prompt_refuses_what_has_no_prompt_and_says_what_to_do() {
    let env = world();
    env.ok(&["create", "you", "--runtime", "human"]);
    let (_, err) = env.fails(&["prompt", "you"], 1);
    assert!(
        err.contains("human-you gets no system prompt from iapeer: only agent runtimes do"),
        "{err}"
    );
    let (_, err) = env.fails(&["prompt", "bob", "--runtime", "codex"], 1);
    assert!(
        err.contains("does not declare runtime \"codex\" (its runtimes: echo) — add it with: iapeer add-runtime codex --peer bob"),
        "{err}"
    );
    let (_, err) = env.fails(&["prompt", "bobb"], 1);
    assert!(
        err.contains("peer \"bobb\" is not in the iapeer peers index"),
        "{err}"
    );
    assert!(err.contains("did you mean \"bob\""), "{err}");
}

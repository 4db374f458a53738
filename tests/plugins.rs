//! Capability plugins (spec 08 §4, issue 11 item 5): `iapeer enable <plugin> [peer]` installs
//! a plugin of the `agfpd` marketplace through the real Claude Code's and the real Codex's own
//! plugin commands — here a local marketplace the test builds, shaped like the agfpd one — and
//! runs the plugin's `iapeer.json` setup step with the peer's context.

use crate::common;

use common::TestEnv;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run scripts/test.sh (it installs the agents)")
    })
}

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Run a real agent CLI in this world (its HOME), requiring success.
fn agent(env: &TestEnv, var: &str, args: &[&str], cwd: &Path) -> String {
    let out = Command::new(bin(var))
        .args(args)
        .env("HOME", &env.home)
        .env("CODEX_HOME", env.home.join(".codex"))
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{var} {args:?}: {}",
        common::describe(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A marketplace named `agfpd` with one plugin, `recall`, whose `iapeer.json` declares a
/// setup step that records the peer context it was given; registered with both runtimes.
fn world() -> (TestEnv, PathBuf) {
    let mut env = TestEnv::new();
    env.set("IAPEER_CLAUDE_BIN", &bin("IAPEER_TEST_CLAUDE_BIN"));
    env.set("IAPEER_CODEX_BIN", &bin("IAPEER_TEST_CODEX_BIN"));
    std::fs::create_dir_all(env.home.join(".codex")).unwrap();
    env.set("CODEX_HOME", env.home.join(".codex").to_str().unwrap());
    let market = env.dir.path().join("agfpd-marketplace");
    put(
        &market.join(".claude-plugin/marketplace.json"),
        r#"{"name": "agfpd", "owner": {"name": "test"},
            "plugins": [{"name": "recall", "source": "./plugins/recall", "description": "recall things"}]}"#,
    );
    let plugin = market.join("plugins/recall");
    put(
        &plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "recall", "version": "1.0.0", "description": "recall things"}"#,
    );
    put(
        &plugin.join("iapeer.json"),
        r#"{"setup": {"command": "./setup.sh", "args": ["--for-iapeer"]}}"#,
    );
    let record = env.dir.path().join("setup-calls.txt");
    put(
        &plugin.join("setup.sh"),
        &format!(
            "#!/bin/sh\necho \"$1 $IAPEER_PEER_PERSONALITY $IAPEER_PEER_CWD $(pwd)\" >> {}\n",
            record.display()
        ),
    );
    std::fs::set_permissions(
        plugin.join("setup.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let m = market.to_str().unwrap();
    agent(
        &env,
        "IAPEER_TEST_CLAUDE_BIN",
        &["plugin", "marketplace", "add", m],
        &env.home,
    );
    agent(
        &env,
        "IAPEER_TEST_CODEX_BIN",
        &["plugin", "marketplace", "add", m],
        &env.home,
    );
    (env, record)
}

#[test]
fn enable_installs_through_each_runtime_s_plugin_commands_and_runs_the_setup() {
    let (env, record) = world();
    env.ok(&["create", "bob", "--runtime", "claude"]);
    let cwd = env.peer_dir("bob").canonicalize().unwrap();

    let out = env.ok(&["enable", "recall", "bob"]);
    assert!(out.contains("bob claude: recall@agfpd installed"), "{out}");
    assert!(out.contains("bob codex: recall@agfpd installed"), "{out}");
    assert!(out.contains("bob setup: ran"), "{out}");
    let calls = std::fs::read_to_string(&record).unwrap();
    let line = calls.lines().next().unwrap();
    assert!(
        line.starts_with(&format!("--for-iapeer bob {} ", cwd.display())),
        "setup got the peer's context: {line}"
    );

    // The real programs now list it: Claude for this peer's folder, Codex host-wide.
    let claude: Value = serde_json::from_str(&agent(
        &env,
        "IAPEER_TEST_CLAUDE_BIN",
        &["plugin", "list", "--json"],
        &cwd,
    ))
    .unwrap();
    assert!(
        claude
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == "recall@agfpd"
                && e["scope"] == "project"
                && e["projectPath"] == cwd.to_str().unwrap()),
        "{claude}"
    );
    let codex: Value = serde_json::from_str(&agent(
        &env,
        "IAPEER_TEST_CODEX_BIN",
        &["plugin", "list", "--json"],
        &env.home,
    ))
    .unwrap();
    assert_eq!(codex["installed"][0]["pluginId"], "recall@agfpd", "{codex}");

    // Again, from the peer's own folder and without the setup: nothing to install.
    let out = env
        .cmd(&["enable", "recall", "--no-setup", "--json"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runtimes"][0]["state"], "already", "{doc}");
    assert_eq!(doc["runtimes"][1]["state"], "already", "{doc}");
    assert_eq!(doc["setup"], "skipped");
    assert_eq!(std::fs::read_to_string(&record).unwrap().lines().count(), 1);
}

#[test]
fn a_plugin_the_marketplace_lacks_fails_and_a_missing_runtime_does_not() {
    let (mut env, _) = world();
    env.ok(&["create", "bob", "--runtime", "claude"]);
    let (out, _) = env.fails(&["enable", "nope", "bob"], 1);
    assert!(out.contains("bob claude: nope@agfpd failed"), "{out}");
    assert!(
        out.contains("not found in marketplace"),
        "the runtime's words: {out}"
    );

    // Codex not on this host: its runtime is skipped, Claude's install still counts.
    let missing = env.dir.path().join("no-codex-here");
    env.set("IAPEER_CODEX_BIN", missing.to_str().unwrap());
    let out = env.ok(&["enable", "recall", "bob"]);
    assert!(out.contains("bob claude: recall@agfpd installed"), "{out}");
    assert!(
        out.contains("bob codex: recall@agfpd runtime-missing"),
        "{out}"
    );

    let (_, err) = env.fails(&["enable", "recall"], 1);
    assert!(err.contains("is not a peer's folder"), "{err}");
}

//! CLI basics through the real binary (spec 07 "General rules"): version, help, unknown verbs,
//! verbs that need the daemon when it is down, `list` without the daemon, the man page.

use crate::common;

use common::TestEnv;

const DAEMON_DOWN_HINT: &str =
    "  hint: start it with: iapeer daemon (foreground) or iapeer onboard (as a service)";

#[test]
fn version_in_every_spelling() {
    let env = TestEnv::new();
    // Spec 07: `iapeer x.y.z` (a bare number was a friction, issue 30 item 6).
    let want = format!("iapeer {}\n", env!("CARGO_PKG_VERSION"));
    for args in [&["--version"][..], &["version"], &["-v"]] {
        let out = env.run(args);
        assert!(out.status.success(), "{args:?}: {}", common::describe(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}");
    }
    let v = env!("CARGO_PKG_VERSION");
    assert!(
        v.split('.').count() == 3 && v.split('.').all(|n| n.parse::<u32>().is_ok()),
        "x.y.z: {v}"
    );
}

#[test]
fn help_is_printed_and_runs_nothing() {
    let env = TestEnv::new();
    for args in [
        &["help"][..],
        &[],
        &["--help"],
        &["-h"],
        &["help", "send"],
        &["send", "--help"],
        &["send", "bob", "--message", "x", "-h"],
    ] {
        let out = env.run(args);
        assert!(out.status.success(), "{args:?}: {}", common::describe(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("usage: iapeer"), "{args:?}: {text}");
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let send_help = env.ok(&["send", "--help"]);
    assert!(
        send_help.starts_with("usage: iapeer send <target>"),
        "{send_help}"
    );
    assert_eq!(
        env.ok(&["help", "send"]),
        send_help,
        "help <verb> and <verb> --help agree"
    );
    assert!(
        env.ok(&["help"]).contains("send"),
        "the verb list names send"
    );
    // Help ran nothing: no root was created by the send line above.
    assert!(
        !env.root.join("state").exists(),
        "help must not touch the root"
    );
}

#[test]
fn unknown_verbs_are_usage_errors() {
    let env = TestEnv::new();
    let (out, err) = env.fails(&["frob"], 2);
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("iapeer: unknown verb \"frob\""), "{err}");
    assert!(
        err.contains("iapeer help"),
        "a hint to run iapeer help: {err}"
    );
    let (_, err) = env.fails(&["--frob"], 2);
    assert!(
        err.starts_with("iapeer: unknown flag --frob — usage: iapeer "),
        "{err}"
    );
    let (_, err) = env.fails(&["list", "extra"], 2);
    assert!(
        err.starts_with("iapeer: ") && err.contains(" — usage: iapeer list"),
        "{err}"
    );
}

#[test]
fn verbs_that_need_the_daemon_say_how_to_start_it() {
    let env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    let sock = env.socket().display().to_string();
    // (`send` keeps its message in the outbox instead: tests/migrate.rs.)
    for args in [
        &["stop", "bob"][..],
        &["start", "bob"],
        &["live-runtime", "bob"],
    ] {
        let (out, err) = env.fails(args, 1);
        assert!(out.is_empty(), "{args:?}: {out}");
        // What happened, then what to do as a hint line (issue 29 item 6).
        let want = format!(
            "iapeer: the daemon is not running (no answer on {sock})\n{DAEMON_DOWN_HINT}\n"
        );
        assert_eq!(err, want, "{args:?}");
        // --json keeps the whole sentence in its error.
        let (out, _) = env.fails(&[args, &["--json"]].concat(), 1);
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["code"], "offline", "{args:?}: {v}");
        assert_eq!(
            v["error"],
            format!(
                "the daemon is not running (no answer on {sock}) — {}",
                DAEMON_DOWN_HINT.trim_start().trim_start_matches("hint: ")
            ),
            "{args:?}"
        );
    }
    // Nothing was started behind the user's back.
    assert!(!env.socket().exists());
}

#[test]
fn list_works_without_the_daemon() {
    let env = TestEnv::new();
    let out = env.ok(&["list"]);
    assert!(out.starts_with("daemon: down"), "{out}");
    assert!(out.contains("no peers yet"), "{out}");
    env.create_echo("alice");
    env.ok(&[
        "create",
        "bob",
        "--runtime",
        "echo",
        "--description",
        "the other one",
    ]);
    let out = env.ok(&["list"]);
    let mut lines = out.lines();
    assert!(lines.next().unwrap().starts_with("daemon: down"), "{out}");
    assert!(lines.next().unwrap().starts_with("NAME"), "{out}");
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(
        rows[0].starts_with("alice ") && rows[0].contains("○echo*"),
        "{out}"
    );
    assert!(
        rows[1].starts_with("bob ")
            && rows[1].contains("○echo*")
            && rows[1].ends_with("the other one"),
        "{out}"
    );
    let rows = env.list();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        for rt in r["runtimes"].as_array().unwrap() {
            assert_eq!(rt["status"], "asleep", "{r}");
        }
        assert_eq!(r["default_runtime"], "echo");
        assert_eq!(r["wake_policy"], "warm");
    }
    assert_eq!(rows[1]["description"], "the other one");
}

#[test]
fn the_checked_in_man_page_is_current() {
    let env = TestEnv::new();
    let generated = env.ok(&["--generate", "man"]);
    let checked_in = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/man/iapeer.1"))
        .expect("man/iapeer.1");
    assert!(
        generated == checked_in,
        "man/iapeer.1 is stale: regenerate it with `iapeer --generate man > man/iapeer.1`"
    );
    assert!(
        generated.starts_with(".TH IAPEER 1") || generated.contains("\n.TH IAPEER 1"),
        "roff: {}",
        &generated[..200.min(generated.len())]
    );
    for shell in ["bash", "zsh", "fish"] {
        let script = env.ok(&["--generate", &format!("completions-{shell}")]);
        assert!(
            script.contains("send") && script.contains("--message"),
            "{shell} completions know send"
        );
    }
    let (_, err) = env.fails(&["--generate", "pdf"], 2);
    assert!(err.contains("cannot generate \"pdf\""), "{err}");
}

/// The verbs spec 07 lists that the first builds lacked: `doctor` (status, then verify),
/// `approval-mode` (spec 10 §4: shown, set, applied from the next session), `update
/// --foundation-only` (accepted), and `enable telegram <peer>` as `connect telegram <peer>`.
#[test]
fn the_spec_07_verbs_doctor_approval_mode_and_the_aliases_work() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    // No daemon: doctor prints both reports and fails on the daemon.
    let out = env.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert!(
        text.contains("not running")
            && text.contains("registry and profiles: 1 peer(s), no problems"),
        "{text}"
    );
    // The verdict is the last line, and with the daemon down it is not "no problems"
    // (issue 30 item 6).
    assert_eq!(
        text.lines().last(),
        Some("doctor: the daemon has a problem (above)"),
        "{text}"
    );
    // doctor --json: the same checks, one document, the same exit code (issue 30 item 6).
    let out = env.run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = |doc: &serde_json::Value, name: &str| {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no check {name}: {doc}"))
    };
    assert_eq!(doc["ok"], false, "{doc}");
    let daemon = check(&doc, "daemon");
    assert_eq!(daemon["level"], "fail", "{doc}");
    assert!(
        daemon["message"].as_str().unwrap().contains("not running")
            && daemon["fix"]
                .as_str()
                .unwrap()
                .contains("iapeer daemon --detach"),
        "{doc}"
    );
    assert_eq!(check(&doc, "registry")["level"], "ok", "{doc}");
    assert_eq!(check(&doc, "outbox")["message"], "empty", "{doc}");
    for c in doc["checks"].as_array().unwrap() {
        assert!(
            ["ok", "warn", "fail"].contains(&c["level"].as_str().unwrap())
                && c["message"].is_string()
                && (c["fix"].is_null() || c["fix"].is_string()),
            "{c}"
        );
    }
    env.start_daemon();
    let text = env.ok(&["doctor"]);
    assert_eq!(text.lines().last(), Some("doctor: no problems"), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&env.ok(&["doctor", "--json"])).unwrap();
    assert_eq!(doc["ok"], true, "{doc}");
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(check(&doc, "daemon")["level"], "ok", "{doc}");
    assert!(check(&doc, "daemon")["fix"].is_null(), "{doc}");
    assert_eq!(check(&doc, "send-preparation")["level"], "ok", "{doc}");
    assert!(
        check(&doc, "peers")["message"]
            .as_str()
            .unwrap()
            .starts_with("1 peer(s)"),
        "{doc}"
    );
    // A profile problem fails its check, with what to do.
    let profile_file = env.peer_dir("alice").join(".iapeer/peer-profile.json");
    let profile = common::read(&profile_file);
    std::fs::write(&profile_file, "{ not json").unwrap();
    let out = env.run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let alice = check(&doc, "profile:alice");
    assert_eq!(alice["level"], "fail", "{doc}");
    assert!(
        alice["fix"]
            .as_str()
            .unwrap()
            .contains("iapeer verify --fix"),
        "{doc}"
    );
    let text = String::from_utf8_lossy(&env.run(&["doctor"]).stdout).into_owned();
    assert_eq!(
        text.lines().last(),
        Some("doctor: the registry or a profile has a problem (above)"),
        "{text}"
    );
    std::fs::write(&profile_file, profile).unwrap();
    assert_eq!(
        env.ok(&["approval-mode", "--peer", "alice"]).trim(),
        "alice: bypass (no runtime that can gate approvals: nothing to gate)"
    );
    env.ok(&["approval-mode", "gated", "--peer", "alice"]);
    let profile: serde_json::Value = serde_json::from_str(&common::read(
        &env.peer_dir("alice").join(".iapeer/peer-profile.json"),
    ))
    .unwrap();
    assert_eq!(profile["approval_mode"], "gated");
    let v: serde_json::Value =
        serde_json::from_str(&env.ok(&["approval-mode", "--all", "--json"])).unwrap();
    assert_eq!(v["peers"][0]["mode"], "gated", "{v}");
    env.ok(&["approval-mode", "bypass", "--peer", "alice"]);
    let profile = common::read(&env.peer_dir("alice").join(".iapeer/peer-profile.json"));
    assert!(
        !profile.contains("approval_mode"),
        "bypass is the default: {profile}"
    );
    let (_, err) = env.fails(&["approval-mode", "yolo", "--peer", "alice"], 2);
    assert!(err.contains("unknown mode \"yolo\""), "{err}");
    assert!(env.ok(&["help", "update"]).contains("--foundation-only"));
    let (_, via_enable) = env.fails(
        &[
            "enable", "telegram", "alice", "--token", "t", "--bot", "b_bot",
        ],
        1,
    );
    let (_, via_connect) = env.fails(
        &[
            "connect", "telegram", "alice", "--token", "t", "--bot", "b_bot",
        ],
        1,
    );
    assert!(
        via_enable.contains("the telegram runtime is not installed"),
        "{via_enable}"
    );
    assert_eq!(via_enable, via_connect, "the alias is the same verb");
}

/// Bash completion, with the real binary and the script it generates, sourced in a real bash
/// (issue 30 item 6): peer names, identities and runtimes where a verb takes them, read from
/// the registry and the runtimes folder with the daemon down.
#[test]
fn bash_completes_peers_identities_and_runtimes_with_the_daemon_down() {
    let env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.install_line_sink("pager", &env.dir.path().join("pager.log"));
    env.ok(&["create", "pg", "--runtime", "pager", "--no-bootstrap"]);
    let script = env.dir.path().join("iapeer.bash");
    std::fs::write(&script, env.ok(&["--generate", "completions-bash"])).unwrap();
    let complete = |words: &[&str]| -> String {
        let quoted: Vec<String> = std::iter::once(common::bin().display().to_string())
            .chain(words.iter().map(|w| w.to_string()))
            .map(|w| format!("'{w}'"))
            .collect();
        let line = format!(
            "source {}; COMP_WORDS=({}); COMP_CWORD={}; _iapeer; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            quoted.join(" "),
            words.len()
        );
        let out = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &line])
            .env("HOME", &env.home)
            .env("IAPEER_ROOT", &env.root)
            .output()
            .expect("bash");
        assert!(out.status.success(), "{}", common::describe(&out));
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(complete(&["send", ""]), "alice bob pg");
    assert_eq!(
        complete(&["send", "bob", "--from", ""]),
        "echo-alice echo-bob pager-pg"
    );
    assert_eq!(complete(&["send", "bob", "--from", "p"]), "pager-pg");
    assert_eq!(
        complete(&["send", "bob", "--runtime", ""]),
        "claude codex echo gemini human notifier opencode pager"
    );
    assert_eq!(complete(&["create", "carol", "--runtime", "p"]), "pager");
    for verb in ["wake", "stop", "restart", "attach", "logs"] {
        assert_eq!(complete(&[verb, "a"]), "alice", "{verb}");
    }
    assert_eq!(
        complete(&["stop", "bob", "e"]),
        "echo",
        "the runtime after the peer"
    );
    assert_eq!(
        complete(&["stop", "bob", "echo", ""]),
        "",
        "nothing after the runtime"
    );
    // A new peer's name is free text.
    assert_eq!(complete(&["create", ""]), "");
}

/// A daemon of another build (`IAPEER_TEST_HOOK=daemon-version:…` makes the real daemon
/// report another version to the CLI's `ping` at connect): the CLI says which versions run
/// and what to do, on stderr, and still works; `shutdown` (the way out) works too.
#[test]
fn a_daemon_of_another_version_is_named_with_what_to_do() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.set("IAPEER_TEST_HOOK", "daemon-version:0.0.1");
    env.start_daemon();
    let out = env.run(&["list"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("alice"));
    let want = format!(
        "warning: the daemon runs iapeer 0.0.1, this CLI is iapeer {}: restart the daemon on \
         this build (iapeer shutdown, then iapeer daemon --detach;",
        env!("CARGO_PKG_VERSION")
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with(&want), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let out = env.run(&["shutdown"]);
    assert!(out.status.success(), "{}", common::describe(&out));
}

//! A CLI that guides (issue 8 item 5, spec 07 "General rules"): did-you-mean for verbs, flags
//! and peer names, `--message` named when the text comes as a word, names explained in words,
//! and no internal field names in the CLI's refusals. The real binary and daemon.

use crate::common;

use common::TestEnv;
use iapeer::verb_table::{flags, Complete, Rule, VerbSpec, VERBS};

fn alice_bob_carol() -> TestEnv {
    let mut env = TestEnv::new();
    for p in ["alice", "bob", "carol"] {
        env.create_echo(p);
    }
    env.start_daemon();
    env
}

#[test]
fn a_mistyped_verb_or_flag_is_a_usage_error_with_the_word_meant() {
    let env = TestEnv::new();
    let (_, err) = env.fails(&["sned", "bob"], 2);
    assert_eq!(
        err.trim(),
        "iapeer: unknown verb \"sned\" — did you mean \"send\"? (iapeer help lists the verbs)"
    );
    let (_, err) = env.fails(&["frobnicate"], 2);
    assert!(!err.contains("did you mean"), "{err}");
    let (_, err) = env.fails(&["send", "bob", "--mesage", "hi"], 2);
    assert!(
        err.starts_with(
            "iapeer: unknown flag --mesage (did you mean --message?) — usage: iapeer send"
        ),
        "{err}"
    );
    let (_, err) = env.fails(&["list", "--jsn"], 2);
    assert!(err.contains("(did you mean --json?)"), "{err}");
}

#[test]
fn the_text_as_a_word_points_to_message() {
    let env = TestEnv::new();
    let (_, err) = env.fails(&["send", "bob", "hi there"], 2);
    assert!(
        err.starts_with(
            "iapeer: unexpected argument \"hi there\" — the text of a message goes in --message: --message \"hi there\""
        ),
        "{err}"
    );
}

#[test]
fn peer_names_are_explained_in_words_and_typos_get_the_registered_name() {
    let env = alice_bob_carol();
    let from = ["--from", "echo-alice"];
    let send = |to: &str| {
        let mut args = vec!["send", to, "--message", "hi"];
        args.extend_from_slice(&from);
        env.fails(&args, 1).1
    };
    let err = send("Carol");
    assert_eq!(
        err.trim(),
        "iapeer send: \"Carol\" is not a peer name: a peer name is 1 to 32 lowercase letters, digits and dashes, starting with a letter — did you mean \"carol\"?"
    );
    assert!(!err.contains('^') && !err.contains('$'), "no regex: {err}");
    let err = send("bobb");
    assert!(
        err.trim().ends_with("did you mean \"bob\"?") && err.contains("\"bobb\""),
        "{err}"
    );
    let err = send("zed");
    assert!(!err.contains("did you mean"), "{err}");
    // A name error from create says the rule in words as well.
    let (_, err) = env.fails(&["create", "Dave_2", "--runtime", "echo"], 1);
    assert!(
        err.contains("a peer name is 1 to 32 lowercase letters") && !err.contains('^'),
        "{err}"
    );
}

#[test]
fn an_empty_message_or_peer_is_refused_without_internal_names() {
    let env = alice_bob_carol();
    for (args, want) in [
        (
            ["send", "bob", "--message", "", "--from", "echo-alice"],
            "iapeer send: the message is empty — give its text with --message \"...\" (or --message-file <path>)",
        ),
        (
            ["send", "", "--message", "hi", "--from", "echo-alice"],
            "iapeer send: the peer name is empty — name one of the peers iapeer list shows",
        ),
    ] {
        let (_, err) = env.fails(&args, 1);
        assert_eq!(err.trim(), want);
        assert!(!err.contains("send_to_peer") && !err.contains("personality"));
    }
    // With --json the refusal is a failure object.
    let (out, _) = env.fails(
        &[
            "send",
            "bob",
            "--message",
            "",
            "--from",
            "echo-alice",
            "--json",
        ],
        1,
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], false, "{out}");
    assert!(v["error"]
        .as_str()
        .unwrap()
        .starts_with("the message is empty"));
}

#[test]
fn lifecycle_verbs_name_the_registered_peer_meant() {
    let env = alice_bob_carol();
    let (_, err) = env.fails(&["stop", "Carol"], 1);
    assert_eq!(
        err.trim(),
        "iapeer stop: peer \"Carol\" is not in the iapeer peers index — did you mean \"carol\"?"
    );
    let (_, err) = env.fails(&["start", "carl"], 1);
    assert!(err.trim().ends_with("did you mean \"carol\"?"), "{err}");
    let (_, err) = env.fails(&["stop", "zed"], 1);
    assert!(!err.contains("did you mean"), "{err}");
}

/// The command line of `verb` built from the table, with made-up values for what it requires
/// (`nobody` for names, `hi` for text) and `--json`.
fn json_args(v: &VerbSpec) -> Vec<String> {
    let mut args = vec![v.name.to_string()];
    for p in v.positionals.iter().filter(|p| p.required) {
        let _ = p;
        args.push("nobody".into());
    }
    for rule in v.rules {
        if let Rule::ExactlyOne(set) = rule {
            let f = set.iter().find(|f| f.value.is_some()).unwrap_or(&set[0]);
            args.push(format!("--{}", f.long));
            if f.value.is_some() {
                args.push(if f.long == "peer" { "nobody" } else { "hi" }.into());
            }
        }
    }
    if v.flags.contains(&flags::FROM) {
        args.extend(["--from".into(), "echo-alice".into()]);
    }
    args.push("--json".into());
    args
}

/// Every verb of the table that takes `--json` (new verbs are covered as they are added).
fn json_verbs() -> Vec<&'static VerbSpec> {
    VERBS
        .iter()
        .filter(|v| v.flags.contains(&flags::JSON))
        .collect()
}

/// The one document a `--json` run prints: exactly one JSON line on stdout, with `"ok":false`
/// exactly when it did not exit 0; a failure has the control protocol's shape
/// `{"ok":false,"code":…,"error":…}` (verify's failure is its report).
fn json_doc(env: &TestEnv, args: &[String]) -> serde_json::Value {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = env.run(&argv);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "`iapeer {}`: one JSON line on stdout, got {stdout:?} (stderr {})",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("`iapeer {}`: {e}: {stdout}", args.join(" ")));
    // A success is the verb's own document (list's is an array); a failure says ok:false.
    assert_eq!(
        v["ok"] == false,
        !out.status.success(),
        "`iapeer {}`: {v}",
        args.join(" ")
    );
    if !out.status.success() && args[0] != "verify" {
        assert!(
            v["code"].is_string() && v["error"].as_str().is_some_and(|e| !e.is_empty()),
            "`iapeer {}`: {v}",
            args.join(" ")
        );
    }
    v
}

/// [`json_doc`] of a run that must fail.
fn json_failure(env: &TestEnv, args: &[String]) -> serde_json::Value {
    let v = json_doc(env, args);
    assert_eq!(
        v["ok"],
        false,
        "`iapeer {}` should fail: {v}",
        args.join(" ")
    );
    v
}

#[test]
fn every_verb_with_json_prints_its_failure_as_json() {
    let verbs = json_verbs();
    assert!(verbs.len() >= 15, "{}", verbs.len());
    // A root that cannot be used: every verb fails, locally or for want of a daemon (but
    // shutdown, for which no daemon to stop is a success).
    let env = TestEnv::new();
    std::fs::create_dir_all(env.root.parent().unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&env.root);
    std::fs::write(&env.root, "not a folder").unwrap();
    for v in &verbs {
        let doc = json_doc(&env, &json_args(v));
        assert!(
            doc["ok"] == false || v.name == "shutdown",
            "{}: {doc}",
            v.name
        );
    }
    // A usage error is a failure document too (code invalid-argument, exit 2).
    for v in &verbs {
        let mut args = json_args(v);
        args.push("--no-such-flag".into());
        let doc = json_failure(&env, &args);
        assert_eq!(doc["code"], "invalid-argument", "{doc}");
    }
    // With a daemon and a peer name nobody registered: the daemon's code is kept.
    let env = alice_bob_carol();
    let mut codes = Vec::new();
    // (shutdown would stop the daemon the others need.)
    for v in verbs.iter().filter(|v| v.name != "shutdown") {
        let doc = json_doc(&env, &json_args(v));
        if doc["ok"] != false {
            continue; // list, status, install, an idempotent remove of nobody…
        }
        codes.push(format!(
            "{} {}",
            v.name,
            doc["code"].as_str().unwrap_or("-")
        ));
        let names_a_peer = v
            .positionals
            .first()
            .is_some_and(|p| p.required && p.complete == Complete::Peer);
        if names_a_peer {
            assert_eq!(doc["code"], "not-registered", "{}: {doc}", v.name);
        }
    }
    assert!(codes.len() >= 10, "{codes:?}");
}

/// The `iapeer …` commands a refusal suggests: each one after `: `,
/// `(` or a backquote, up to `)`, `;`, a backquote, ` or ` or the end of the line.
fn suggested(err: &str) -> Vec<String> {
    let mut out = Vec::new();
    for lead in [": ", "(", "`"] {
        let mut rest = err;
        while let Some(i) = rest.find(&format!("{lead}iapeer ")) {
            let cmd = &rest[i + lead.len()..];
            let end = [")", ";", "`", " or ", "\n"]
                .iter()
                .filter_map(|stop| cmd.find(stop))
                .min()
                .unwrap_or(cmd.len());
            out.push(cmd[..end].trim().to_string());
            rest = &cmd[end..];
        }
    }
    out
}

/// Run the one command `err` suggests (placeholders filled from `fill`) and require exit 0.
fn follow(env: &TestEnv, err: &str, fill: &[(&str, &str)], extra_env: &[(&str, &str)]) {
    let cmds = suggested(err);
    assert_eq!(cmds.len(), 1, "one suggested command in {err:?}: {cmds:?}");
    let mut cmd = cmds[0].clone();
    for (from, to) in fill {
        cmd = cmd.replace(from, to);
    }
    assert!(!cmd.contains('<'), "an unfilled placeholder in {cmd:?}");
    let words: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    let mut c = env.cmd(&words);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "the hint `{cmd}` (from {err:?}) fails: {}",
        common::describe(&out)
    );
}

#[test]
fn suggested_commands_run() {
    assert_eq!(
        suggested("x — stop it first (iapeer stop bob) or pass --force"),
        ["iapeer stop bob"]
    );
    let mut env = TestEnv::new();
    // The daemon's Claude Code: installed after alice is made (the daemon looks at every use).
    let claude = env.dir.path().join("claude");
    env.set("IAPEER_CLAUDE_BIN", claude.to_str().unwrap());
    env.start_daemon();
    // No peers yet: list says how to make one.
    let out = env.ok(&["list"]);
    follow(&env, &out, &[("<name>", "alice"), ("<rt>", "echo")], &[]);
    for p in ["bob", "carol"] {
        env.create_echo(p);
    }
    // A router runtime: installed from its runtime.json.
    let manifest = serde_json::json!({"runtime": "bot", "run": {"command": "/bin/cat"}});
    let path = env.root.join("runtimes/bot/runtime.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, manifest.to_string()).unwrap();

    // default-runtime of an agent runtime the peer lacks: add it first.
    std::fs::write(&claude, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let claude_env = [("IAPEER_CLAUDE_BIN", claude.to_str().unwrap())];
    let out = env
        .cmd(&["default-runtime", "claude", "--peer", "alice"])
        .env("IAPEER_CLAUDE_BIN", &claude)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    follow(
        &env,
        &String::from_utf8_lossy(&out.stderr),
        &[],
        &claude_env,
    );
    let out = env
        .cmd(&["default-runtime", "claude", "--peer", "alice"])
        .env("IAPEER_CLAUDE_BIN", &claude)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));

    // default-runtime of a router runtime: a peer is created on it instead.
    let (_, err) = env.fails(&["default-runtime", "bot", "--peer", "bob"], 1);
    follow(&env, &err, &[("<name>", "bot")], &[]);

    // default-runtime of a runtime that is not installed: no command that would refuse.
    let (_, err) = env.fails(&["default-runtime", "relay", "--peer", "bob"], 1);
    assert!(
        !err.contains("add-runtime relay") && err.contains("not installed"),
        "{err}"
    );

    // A live peer is stopped first, then removed.
    env.ok(&["new", "carol"]);
    let (_, err) = env.fails(&["remove", "carol"], 1);
    follow(&env, &err, &[], &[]);
    env.ok(&["remove", "carol"]);

    // A stopped peer refuses messages with the command that starts it.
    env.ok(&["stop", "bob"]);
    let (_, err) = env.fails(
        &["send", "bob", "--message", "hi", "--from", "echo-alice"],
        1,
    );
    follow(&env, &err, &[], &[]);
    env.ok(&["send", "bob", "--message", "hi", "--from", "echo-alice"]);

    // A corrupt registry: verify --fix rebuilds it from the profiles.
    std::fs::write(env.root.join("peers-profiles.json"), "{garbage").unwrap();
    let (_, err) = env.fails(&["list"], 1);
    follow(&env, &err, &[], &[]);
    assert!(env.ok(&["list"]).contains("alice"));

    // A mistyped verb points to help.
    let (_, err) = env.fails(&["frobnicate"], 2);
    assert!(err.contains("iapeer help"), "{err}");
    env.ok(&["help"]);

    // A second daemon: the running one is stopped with shutdown.
    let (_, err) = env.fails(&["daemon", "--detach"], 1);
    follow(&env, &err, &[], &[]);
}

#[test]
fn no_refusal_shows_a_pattern_or_a_tool_name() {
    let env = alice_bob_carol();
    let long_topic = "a".repeat(300);
    type Case<'a> = (Vec<&'a str>, Option<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (
            vec!["send", "bob", "--message", "hi", "--from", "echo-Bad"],
            None,
        ),
        (
            vec!["send", "bob", "--message", "hi", "--from", "Echo-alice"],
            None,
        ),
        (
            vec![
                "send",
                "bob",
                "--message",
                "hi",
                "--from",
                "echo-alice",
                "--runtime",
                "Bad",
            ],
            None,
        ),
        (
            vec!["send", "bob", "--message", "hi"],
            Some(("PEER_IDENTITY", "echo-Bad")),
        ),
        (vec!["self-fresh"], Some(("PEER_IDENTITY", "echo-Bad"))),
        (
            vec!["send", "Bob", "--message", "hi", "--from", "echo-alice"],
            None,
        ),
        (
            vec!["send", "bob", "--message", "", "--from", "echo-alice"],
            None,
        ),
        (
            vec![
                "send",
                "bob",
                "--message",
                "hi",
                "--from",
                "echo-alice",
                "--topic",
                &long_topic,
            ],
            None,
        ),
        (vec!["create", "Bad_Name", "--runtime", "echo"], None),
        (vec!["rename", "bob", "Bad_x"], None),
    ];
    for (args, var) in cases {
        let mut c = env.cmd(&args);
        if let Some((k, v)) = var {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        for internal in ["send_to_peer", "^[", "]{0,31}", "$\"", "\"personality\""] {
            assert!(
                !err.contains(internal),
                "{args:?} shows {internal:?}: {err}"
            );
        }
        assert!(err.starts_with("iapeer"), "{err}");
    }
}

/// A send that wakes bob, whose echo agent takes 2 s to draw anything.
fn slow_bob() -> TestEnv {
    let env = alice_bob_carol();
    env.launch_env("bob", "echo", "PEER_START_ARGS=--boot-delay-ms 2000\n");
    env
}

const SEND_BOB: [&str; 6] = ["send", "bob", "--message", "hi", "--from", "echo-alice"];

#[test]
fn a_waking_send_shows_what_it_waits_for_on_a_terminal_only() {
    let env = slow_bob();
    let mut term = crate::attach::Terminal::spawn(env.cmd(&SEND_BOB));
    term.wait_for(&env, "sending to bob — booting");
    let status = term.wait(&env);
    assert_eq!(status.code(), Some(0), "{}", term.text());
    let text = term.text();
    // One updating line: each redraw returns to the start of the line and clears it, and the
    // line is cleared before the answer.
    let redraws = text.matches("\r\x1b[2K").count();
    assert!(redraws >= 3, "{text:?}");
    assert!(!text.contains("\nsending to bob"), "{text:?}");
    let screen = term.screen();
    assert!(
        screen.trim().starts_with("delivered") && !screen.contains("sending to bob"),
        "{screen}"
    );

    // Without a terminal: nothing but the answer.
    let env = slow_bob();
    let out = env.run(&SEND_BOB);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("delivered"));

    // With --json on a terminal: the document alone.
    let env = slow_bob();
    let mut args = SEND_BOB.to_vec();
    args.push("--json");
    let mut term = crate::attach::Terminal::spawn(env.cmd(&args));
    let status = term.wait(&env);
    assert_eq!(status.code(), Some(0), "{}", term.text());
    let text = term.text();
    assert!(
        !text.contains("sending to") && !text.contains('\x1b'),
        "{text:?}"
    );
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
}

/// Run `scripts/install.sh` into `env`'s temp HOME with the binary under test; returns the
/// PATH a user of that HOME has (`~/.local/bin` first).
fn install_into_home(env: &TestEnv) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install.sh");
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        env.home.join(".local/bin").display()
    );
    let out = std::process::Command::new("bash")
        .arg(&script)
        .env("HOME", &env.home)
        .env("IAPEER_ROOT", &env.root)
        .env("IAPEER_INSTALL_FROM", common::bin())
        .env("PATH", &path)
        .env_remove("IAPEER_BIN_DIR")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("IAPEER_SYSTEMD_DIR")
        .output()
        .expect("run scripts/install.sh");
    assert!(
        out.status.success(),
        "install.sh: {}",
        common::describe(&out)
    );
    path
}

/// Issue 30 item 6: with `~/.local/bin` not on PATH, install.sh prints the exact line that
/// puts it there for the user's shell, and how to run iapeer until then.
#[test]
fn install_without_the_bin_folder_on_path_prints_the_line_to_add() {
    let env = TestEnv::new();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install.sh");
    let bin = env.home.join(".local/bin");
    for (shell, line) in [
        (
            "/bin/bash",
            format!(
                "    echo 'export PATH=\"{}:$PATH\"' >> ~/.bashrc",
                bin.display()
            ),
        ),
        (
            "/usr/bin/zsh",
            format!(
                "    echo 'export PATH=\"{}:$PATH\"' >> ~/.zshrc",
                bin.display()
            ),
        ),
        (
            "/usr/bin/fish",
            format!("    fish_add_path {}", bin.display()),
        ),
    ] {
        let out = std::process::Command::new("bash")
            .arg(&script)
            .env("HOME", &env.home)
            .env("IAPEER_ROOT", &env.root)
            .env("IAPEER_INSTALL_FROM", common::bin())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("SHELL", shell)
            .env_remove("IAPEER_BIN_DIR")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("IAPEER_SYSTEMD_DIR")
            .output()
            .expect("run scripts/install.sh");
        assert!(out.status.success(), "{}", common::describe(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.contains(&line.as_str()),
            "{shell}: {line:?} not in:\n{text}"
        );
        let until = format!(
            "  and open a new shell; until then run it as {} (e.g. {} onboard)",
            bin.join("iapeer").display(),
            bin.join("iapeer").display()
        );
        assert!(lines.contains(&until.as_str()), "{shell}:\n{text}");
    }
}

/// Must show (issue 8): after `scripts/install.sh`, `man iapeer` shows the page with MANPATH
/// unset (man-db finds `~/.local/share/man` from `~/.local/bin` on PATH). `scripts/test.sh`
/// installs man-db when `man` is missing.
#[test]
fn after_install_man_iapeer_shows_the_page() {
    let env = TestEnv::new();
    let path = install_into_home(&env);
    let out = std::process::Command::new("man")
        .arg("iapeer")
        .env("HOME", &env.home)
        .env("PATH", &path)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "80")
        .env_remove("MANPATH")
        .output()
        .expect("`man` is needed (scripts/test.sh installs man-db)");
    assert!(
        out.status.success(),
        "man iapeer: {}",
        common::describe(&out)
    );
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.starts_with("IAPEER(1)") && page.contains("NAME") && page.contains("iapeer send"),
        "{page}"
    );
}

/// Must show (issue 8): bash completes verbs and the registry's peer names with the script
/// install.sh put in place, typed with Tab on a real pty running `bash --norc`.
#[test]
fn after_install_bash_completes_verbs_and_peer_names_on_a_terminal() {
    let env = alice_bob_carol();
    let path = install_into_home(&env);
    let script = env
        .home
        .join(".local/share/bash-completion/completions/iapeer");
    let mut bash = std::process::Command::new("bash");
    bash.args(["--norc", "--noprofile", "-i"])
        .env("HOME", &env.home)
        .env("IAPEER_ROOT", &env.root)
        .env("PATH", &path)
        .env("PS1", "$ ")
        .env("TERM", "xterm")
        .env("INPUTRC", "/dev/null");
    let mut term = crate::attach::Terminal::spawn(bash);
    term.type_bytes(format!("source {}\n", script.display()).as_bytes());
    term.type_bytes(b"echo sourced-$((6*7))\n");
    term.wait_for(&env, "sourced-42");
    // A unique verb prefix completes in place (Ctrl-A then `echo ` prints the line).
    term.type_bytes(b"iapeer shutd\t\x01echo \n");
    term.wait_for(&env, "iapeer shutdown");
    // Two verbs share a prefix: a double Tab lists them.
    term.type_bytes(b"iapeer sta\t\t");
    term.wait_for(&env, "start");
    term.wait_for(&env, "status");
    term.type_bytes(b"\x15");
    // Peer names come from the registry: a prefix completes, a double Tab lists them all.
    term.type_bytes(b"iapeer stop car\t\x01echo \n");
    term.wait_for(&env, "iapeer stop carol");
    term.type_bytes(b"iapeer send \t\t");
    term.wait_for(&env, "alice");
    let screen = term.screen();
    assert!(
        screen
            .lines()
            .any(|l| l.contains("alice") && l.contains("bob") && l.contains("carol")),
        "{screen}"
    );
    term.type_bytes(b"\x15exit\n");
    let _ = term.wait(&env);
}

/// zsh, as a user with the installed completion in `fpath` and `compinit` run, on a real pty.
#[test]
fn after_install_zsh_completes_verbs_and_peer_names_on_a_terminal() {
    let env = alice_bob_carol();
    let path = install_into_home(&env);
    let dir = env.home.join(".local/share/zsh/site-functions");
    assert!(dir.join("_iapeer").is_file());
    let mut zsh = std::process::Command::new("zsh");
    zsh.args(["-f", "-i"])
        .env("HOME", &env.home)
        .env("IAPEER_ROOT", &env.root)
        .env("PATH", &path)
        .env("PS1", "$ ")
        .env("TERM", "xterm");
    let mut term = crate::attach::Terminal::spawn(zsh);
    term.type_bytes(
        format!(
            "bindkey -e; fpath=({} $fpath); autoload -U compinit; compinit -u; echo loaded-$((6*7))\n",
            dir.display()
        )
        .as_bytes(),
    );
    term.wait_for(&env, "loaded-42");
    completes_verbs_and_peers(&env, term);
}

/// On a shell whose iapeer completion is loaded (emacs keys): a unique verb prefix completes
/// in place (Ctrl-A then `echo ` prints the line); peer names come from the registry, for a
/// peer positional and a peer flag. Exits the shell.
fn completes_verbs_and_peers(env: &TestEnv, mut term: crate::attach::Terminal) {
    for (typed, line) in [
        (&b"iapeer shutd"[..], "iapeer shutdown"),
        (b"iapeer stop car", "iapeer stop carol"),
        (
            b"iapeer add-runtime codex --peer al",
            "iapeer add-runtime codex --peer alice",
        ),
    ] {
        term.type_bytes(typed);
        term.type_bytes(b"\t\x01echo \n");
        term.wait_for(env, line);
    }
    term.type_bytes(b"\x15exit\n");
    let _ = term.wait(env);
}

/// fish, with the completion where fish loads it by itself, on a real pty.
#[test]
fn after_install_fish_completes_verbs_and_peer_names_on_a_terminal() {
    let env = alice_bob_carol();
    let path = install_into_home(&env);
    assert!(env
        .home
        .join(".config/fish/completions/iapeer.fish")
        .is_file());
    let mut fish = std::process::Command::new("fish");
    fish.args(["-i"])
        .env("HOME", &env.home)
        .env("IAPEER_ROOT", &env.root)
        .env("PATH", &path)
        .env("TERM", "xterm")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME");
    let mut term = crate::attach::Terminal::spawn(fish);
    term.type_bytes(
        b"set -g fish_greeting; set -g fish_autosuggestion_enabled 0; echo loaded-(math 6 \\* 7)\n",
    );
    term.wait_for(&env, "loaded-42");
    completes_verbs_and_peers(&env, term);
}

/// Install router runtime `rt` whose `run` command is `program` (which may not exist).
fn install_router(env: &TestEnv, rt: &str, program: &std::path::Path) {
    let manifest = serde_json::json!({"runtime": rt, "run": {"command": program}});
    let path = env.root.join(format!("runtimes/{rt}/runtime.json"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, manifest.to_string()).unwrap();
}

#[test]
fn a_router_peer_whose_program_is_missing_is_reported_by_create_list_and_send() {
    let env = alice_bob_carol();
    let program = env.dir.path().join("pager-bot");
    install_router(&env, "pager", &program);
    let out = env
        .cmd(&["create", "ops", "--runtime", "pager"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let why = format!(
        "the program of runtime pager, {}, is not found",
        program.display()
    );
    assert!(
        err.contains(&format!("warning: ops cannot start on pager: {why}")),
        "{err}"
    );
    assert!(!err.contains("starts when"), "{err}");

    let list = env.ok(&["list"]);
    assert!(list.contains("!pager*"), "{list}");
    assert!(
        list.contains(&format!("! ops: cannot start on pager: {why}")),
        "{list}"
    );
    let rows = env.list();
    let ops = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["personality"] == "ops")
        .unwrap();
    assert_eq!(ops["runtimes"][0]["status"], "missing", "{ops}");
    assert!(ops["runtimes"][0]["problem"]
        .as_str()
        .unwrap()
        .starts_with(&why));

    let (_, err) = env.fails(
        &[
            "send",
            "ops",
            "--message",
            "hi",
            "--from",
            "echo-alice",
            "--timeout",
            "3",
        ],
        1,
    );
    assert!(err.contains(&format!("it cannot start: {why}")), "{err}");
    // `start` does not claim it runs.
    env.ok(&["stop", "ops"]);
    let (_, err) = env.fails(&["start", "ops"], 1);
    assert!(
        err.contains(&format!("pager-ops cannot start: {why}")),
        "{err}"
    );

    // Once the program is there, the peer is no longer reported.
    std::fs::write(&program, "#!/bin/sh\nexec cat >/dev/null\n").unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let list = env.ok(&["list"]);
    assert!(
        !list.contains("!pager") && !list.contains("cannot start"),
        "{list}"
    );
}

/// The README's worked example of a router runtime: the `sh` block after its marker, as it is
/// written (so the document and this test cannot drift).
fn readme_example() -> String {
    let readme = include_str!("../README.md");
    let marker = "<!-- example: router runtime (tests/guide.rs runs this block as it is) -->\n";
    let after = &readme[readme.find(marker).expect("the README's example marker") + marker.len()..];
    let body = after
        .strip_prefix("```sh\n")
        .expect("a sh block after the marker");
    body[..body.find("\n```\n").expect("the end of the block") + 1].to_string()
}

#[test]
fn the_readme_router_runtime_example_runs_as_written() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    // "Run it after the commands above": they made `you` on the human runtime.
    env.ok(&["create", "you", "--runtime", "human"]);
    env.start_daemon();
    let block = readme_example();
    assert!(block.contains("runtime.json") && block.contains("--intelligence natural"));
    // A user's shell: iapeer on PATH, HOME and IAPEER_ROOT in temp folders.
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    // The same environment as the CLI under test gets, in a shell.
    let template = env.cmd(&[]);
    let mut sh = std::process::Command::new("sh");
    sh.args(["-e", "-c", &block]);
    for (k, v) in template.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .current_dir(env.dir.path());
    let out = sh.output().unwrap();
    assert!(
        out.status.success(),
        "the README example failed: {}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
    let mailbox = env.peer_dir("pat").join("mailbox.txt");
    env.wait_until(
        "alice's message and the echo of the human's answer reach the mailbox",
        std::time::Duration::from_secs(20),
        |_| {
            let text = common::read(&mailbox);
            text.contains("from alice: the build is green\n")
                && text.contains("from alice: echo: thanks\n")
        },
    );
    let list = env.ok(&["list"]);
    assert!(list.contains("●mailbox*"), "{list}");
    // A second create of an existing peer on another runtime adds it, and says the default
    // stays (it used to say "created").
    let out = env.ok(&[
        "create",
        "you",
        "--runtime",
        "mailbox",
        "--intelligence",
        "natural",
    ]);
    assert!(
        out.starts_with("peer you already exists: added runtime mailbox (its default stays human"),
        "{out}"
    );
}

#[test]
fn every_verb_that_takes_a_peer_name_suggests_the_registered_one() {
    let env = alice_bob_carol();
    let out = env.ok(&["remove", "Bob"]);
    assert!(out.trim().ends_with("did you mean \"bob\"?"), "{out}");
    let (_, err) = env.fails(
        &["send", "bob", "--message", "hi", "--from", "echo-alcie"],
        1,
    );
    assert!(err.trim().ends_with("did you mean \"alice\"?"), "{err}");
    for args in [
        vec!["live-runtime", "Bob"],
        vec!["rename", "Bob", "robert"],
        vec!["refresh", "Bob"],
        vec!["add-runtime", "echo", "--peer", "Bob"],
        vec!["default-runtime", "echo", "--peer", "Bob"],
        vec!["new", "Bob"],
        vec!["interrupt", "Bob"],
        vec!["compact", "Bob"],
    ] {
        let (_, err) = env.fails(&args, 1);
        assert!(
            err.trim().ends_with("did you mean \"bob\"?"),
            "{args:?}: {err}"
        );
    }
    // Not live is still exit 1 with nothing said (for scripts).
    let out = env.run(&["live-runtime", "bob"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        common::describe(&out)
    );
}

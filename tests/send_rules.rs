//! The refusals of `route_send` through the real CLI and daemon (spec 03 §1, spec 07 `send`):
//! stopped peers, unknown peers and senders, sending to self, every validation error with its
//! exact text, usage errors, and the ways a message can be given on the command line.

use crate::common;

use common::TestEnv;
use std::time::Duration;

fn two_peers() -> TestEnv {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    env
}

/// Run `iapeer send <args…>`, require exit 1 and exactly `iapeer send: <want>` on stderr.
fn refused(env: &TestEnv, args: &[&str], want: &str) {
    let mut full = vec!["send"];
    full.extend_from_slice(args);
    let (out, err) = env.fails(&full, 1);
    assert_eq!(
        err.trim_end(),
        format!("iapeer send: {want}"),
        "stderr of `iapeer {}`",
        full.join(" ")
    );
    assert!(
        err.ends_with('\n') && err.lines().count() == 1,
        "one line: {err:?}"
    );
    assert!(out.is_empty(), "nothing on stdout for a refusal: {out:?}");
}

#[test]
fn a_stopped_peer_refuses_messages_until_it_is_started() {
    let env = two_peers();
    // bob is live first, so stopping it ends a real session.
    env.ok(&["send", "bob", "--from", "echo-alice", "--message", "first"]);
    env.wait_until("bob's echo reaches alice", Duration::from_secs(20), |e| {
        e.has_event(
            "delivery",
            "delivery",
            &[("caller", "echo-bob"), ("ok", "true")],
        )
    });
    let session: serde_json::Value =
        serde_json::from_str(&common::read(&env.marker("echo-bob", ".session"))).unwrap();
    let pid = session["pid"].as_u64().unwrap() as u32;
    let out = env.ok(&["stop", "bob"]);
    assert_eq!(out.trim(), "stopped echo-bob (ended echo-bob)");
    env.wait_until("bob's session ends", Duration::from_secs(15), |e| {
        !common::alive(pid)
            && e.has_event(
                "lifecycle",
                "session-end",
                &[("identity", "echo-bob"), ("cause", "stop")],
            )
    });
    assert!(env.marker("echo-bob", ".stopped").exists());
    assert_eq!(env.status_of("bob", "echo"), "stopped");
    let pane_before = env.pane("echo-bob").len();
    let deliveries_before = env.events("delivery", "delivery").len();

    refused(
        &env,
        &["bob", "--from", "echo-alice", "--message", "are you there?"],
        "\"bob\" (echo) is stopped and not accepting messages; start it to resume: iapeer start bob",
    );
    // Nothing was launched: no session, no pane output, no second wake.
    assert_eq!(env.status_of("bob", "echo"), "stopped");
    assert_eq!(
        env.pane("echo-bob").len(),
        pane_before,
        "bob's pane does not grow"
    );
    assert!(!env.marker("echo-bob", ".session").exists());
    assert_eq!(
        env.count_events("lifecycle", "wake", &[("identity", "echo-bob")]),
        1,
        "{}",
        env.diagnostics()
    );
    let lines = env.events("delivery", "delivery");
    assert_eq!(
        lines.len(),
        deliveries_before + 1,
        "one delivery.log line per attempt: {lines:?}"
    );
    let refusal = lines.last().unwrap();
    assert_eq!(refusal["ok"], "false");
    assert_eq!(refusal["caller"], "echo-alice");
    assert_eq!(refusal["to"], "bob");
    assert_eq!(
        refusal["err"],
        "\"bob\" (echo) is stopped and not accepting messages; start it to resume"
    );
    assert!(
        !env.log("delivery").contains("are you there"),
        "bodies never reach delivery.log"
    );

    // --json still prints the daemon's answer with its stable code.
    let out = env.run(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "again",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("a JSON answer on stdout");
    assert_eq!(v["ok"], false);
    assert_eq!(v["code"], "stopped");

    let out = env.ok(&["start", "bob"]);
    assert_eq!(
        out.trim(),
        "started echo-bob — agents wake on their next message"
    );
    assert!(!env.marker("echo-bob", ".stopped").exists());
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "back again",
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
    assert_eq!(
        env.count_events("lifecycle", "wake", &[("identity", "echo-bob")]),
        2
    );
    assert!(
        env.pane("echo-bob").contains("from alice: back again"),
        "{}",
        env.diagnostics()
    );
    assert!(
        !env.pane("echo-bob").contains("are you there"),
        "the refused message never arrives later"
    );
}

#[test]
fn unknown_peers_unknown_senders_and_self_are_refused() {
    let env = two_peers();
    refused(
        &env,
        &["zed", "--from", "echo-alice", "--message", "hi"],
        "peer \"zed\" is not in the iapeer peers index; message NOT delivered",
    );
    refused(
        &env,
        &["bob", "--from", "echo-zed", "--message", "hi"],
        "unknown caller \"zed\" — not registered — sign with --from <runtime>-<peer> as a \
         registered peer (iapeer list shows them)",
    );
    refused(
        &env,
        &["alice", "--from", "echo-alice", "--message", "hi"],
        "cannot send to self — this send is signed as echo-alice (--from, else PEER_IDENTITY, \
         the peer of this folder, or this terminal's human): name another peer, or sign with \
         --from",
    );
    // A runtime the target does not declare.
    refused(
        &env,
        &[
            "bob",
            "--from",
            "echo-alice",
            "--runtime",
            "codex",
            "--message",
            "hi",
        ],
        "peer \"bob\" does not declare runtime \"codex\" — its runtimes: echo (leave out \
         --runtime for its default)",
    );
    // Every refusal is logged, and nothing woke.
    let lines = env.events("delivery", "delivery");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines
            .iter()
            .all(|l| l["ok"] == "false" && l.contains_key("err")),
        "{lines:?}"
    );
    assert!(
        env.events("lifecycle", "wake").is_empty(),
        "{}",
        env.diagnostics()
    );
    assert_eq!(env.status_of("bob", "echo"), "asleep");
}

#[test]
fn every_validation_error_has_its_exact_text() {
    let env = two_peers();
    let from = ["--from", "echo-alice"];
    let send = |args: &[&str], want: &str| {
        let mut full: Vec<&str> = args.to_vec();
        full.extend_from_slice(&from);
        refused(&env, &full, want);
    };
    // The CLI words these three itself (tests/guide.rs has the texts); the daemon's texts
    // for agents are checked in src/daemon/mcp/tests.rs and src/daemon/route.rs.
    send(
        &["bob", "--message", ""],
        "the message is empty — give its text with --message \"...\" (or --message-file <path>)",
    );
    send(
        &["", "--message", "hi"],
        "the peer name is empty — name one of the peers iapeer list shows",
    );
    send(
        &["Bob", "--message", "hi"],
        "\"Bob\" is not a peer name: a peer name is 1 to 32 lowercase letters, digits and dashes, starting with a letter — did you mean \"bob\"?",
    );
    send(
        &["bob", "--runtime", "my-rt", "--message", "hi"],
        "--runtime \"my-rt\" is not a runtime name: a runtime name is 1 to 32 lowercase letters and digits, starting with a letter",
    );
    // Counted in Unicode scalar values: 16001 two-byte characters.
    let long = "é".repeat(16_001);
    send(
        &["bob", "--message", &long],
        "message exceeds 16000 char limit (got 16001)",
    );
    // Counted after trimming.
    let topic = format!("   {}\t ", "t".repeat(201));
    send(
        &["bob", "--message", "hi", "--topic", &topic],
        "topic exceeds 200 char limit (got 201)",
    );
    // 200 characters that escaping makes 1200 bytes: the envelope's open tag would pass the
    // 1024 bytes every decoder allows (issue 12, found by fuzzing).
    send(
        &["bob", "--message", "hi", "--topic", &"\"".repeat(200)],
        "topic exceeds 800 byte limit once escaped for the envelope (got 1200; each & \" < > \
         takes 4 to 6 bytes) — shorten it",
    );
    let file = env.dir.path().join("a.txt");
    std::fs::write(&file, "x").unwrap();
    let file = file.display().to_string();
    let mut many = vec!["bob", "--message", "hi"];
    for _ in 0..21 {
        many.extend_from_slice(&["--attachment", &file]);
    }
    send(&many, "attachments exceeds 20 item limit");
    send(
        &["bob", "--message", "hi", "--attachment", "/tmp/a\nb.txt"],
        "attachment paths must not contain newline characters",
    );
    send(
        &["bob", "--message", "hi", "--attachment", "/tmp/a\rb.txt"],
        "attachment paths must not contain newline characters",
    );

    // The CLI makes relative paths absolute, so the absolute-path rule is reached through the
    // control socket directly.
    let answer = env.control(r#"{"op":"send","from":"echo-alice","to":"bob","message":"hi","attachments":["rel/a.txt"]}"#);
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(
        answer["error"],
        "attachments must contain only absolute local paths"
    );
    assert_eq!(answer["code"], "invalid-argument");

    // Every attempt is one ok=false line; nothing woke and nothing was spooled.
    let lines = env.events("delivery", "delivery");
    assert_eq!(lines.len(), 11, "{lines:?}");
    assert!(lines.iter().all(|l| l["ok"] == "false"), "{lines:?}");
    assert!(
        lines.iter().any(|l| l["len"] == "16001"),
        "len counts characters: {lines:?}"
    );
    assert!(
        env.events("lifecycle", "wake").is_empty(),
        "{}",
        env.diagnostics()
    );
    assert!(!env.paths().attachments_dir("bob").exists());
}

#[test]
fn limits_are_inclusive() {
    let env = two_peers();
    // Exactly 16000 characters and a 200-character topic (after trimming) are accepted.
    let body = "é".repeat(16_000);
    let topic = format!("  {}  ", "t".repeat(200));
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        &body,
        "--topic",
        &topic,
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
    let line = env
        .events("delivery", "delivery")
        .into_iter()
        .find(|l| l["to"] == "bob")
        .expect("delivery line");
    assert_eq!(line["ok"], "true");
    assert_eq!(line["len"], "16000");
    assert_eq!(
        line["topic"],
        "t".repeat(200),
        "the topic is logged trimmed"
    );
    // The body arrived whole: the echo agent's transcript has it.
    let transcript = common::read(&env.peer_dir("bob").join(".echo-agent/transcript.jsonl"));
    let rec: serde_json::Value =
        serde_json::from_str(transcript.lines().next().expect("a transcript record")).unwrap();
    assert_eq!(rec["body"].as_str().unwrap().chars().count(), 16_000);
    assert_eq!(rec["topic"], "t".repeat(200));
}

#[test]
fn usage_errors_exit_2_with_one_targeted_line() {
    // No daemon: usage errors are found before anything is contacted.
    let env = TestEnv::new();
    for (args, what) in [
        (vec!["send", "--message", "hi"], "missing"),
        (
            vec!["send", "bob", "--message", "hi", "--message-file", "/tmp/x"],
            "--message",
        ),
        (vec!["send", "bob", "--message", "hi", "--frob"], "--frob"),
        (vec!["send", "bob", "carol", "--message", "hi"], "carol"),
        (vec!["send", "bob"], "--message"),
        (vec!["send", "bob", "--message"], "--message"),
    ] {
        let (out, err) = env.fails(&args, 2);
        assert!(out.is_empty(), "{args:?}: {out}");
        assert_eq!(
            err.lines().count(),
            1,
            "{args:?}: one line, never the whole help: {err}"
        );
        assert!(err.starts_with("iapeer: "), "{args:?}: {err}");
        assert!(
            err.contains(" — usage: iapeer send <target> "),
            "{args:?}: {err}"
        );
        let (problem, _) = err.split_once(" — usage:").unwrap();
        assert!(
            problem.contains(what),
            "{args:?}: the line says what is wrong: {err}"
        );
    }
}

#[test]
fn message_file_stdin_and_literal_dash_values() {
    let env = two_peers();
    // --message-file - reads stdin (several lines, kept as they are).
    let out = env.run_stdin(
        &["send", "bob", "--from", "echo-alice", "--message-file", "-"],
        "from stdin\nsecond line".as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "delivered to bob (echo), woke"
    );
    // --message-file <path>.
    let file = env.dir.path().join("msg.txt");
    std::fs::write(&file, "from a file").unwrap();
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message-file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo)");
    // --message=--literal keeps the value, even though it looks like a flag.
    let out = env.ok(&["send", "bob", "--from", "echo-alice", "--message=--literal"]);
    assert_eq!(out.trim(), "delivered to bob (echo)");
    let transcript = common::read(&env.peer_dir("bob").join(".echo-agent/transcript.jsonl"));
    let bodies: Vec<String> = transcript
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["type"] == "user")
        .map(|r| r["body"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        bodies,
        ["from stdin\nsecond line", "from a file", "--literal"],
        "{}",
        env.diagnostics()
    );
    // A missing message file is a domain failure (exit 1) naming the file.
    let (_, err) = env.fails(
        &[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message-file",
            "/nonexistent/m.txt",
        ],
        1,
    );
    assert!(
        err.starts_with("iapeer send: cannot read --message-file /nonexistent/m.txt"),
        "{err}"
    );
    env.wait_until("bob's echoes reach alice", Duration::from_secs(20), |e| {
        e.count_events(
            "delivery",
            "delivery",
            &[("caller", "echo-bob"), ("ok", "true")],
        ) == 3
    });
}

/// Install a router runtime `<rt>` that runs `/bin/cat` (it prints what it receives).
fn install_cat_runtime(env: &TestEnv, rt: &str) {
    let path = env.root.join("runtimes").join(rt).join("runtime.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let manifest = serde_json::json!({"runtime": rt, "run": {"command": "/bin/cat"}});
    std::fs::write(path, manifest.to_string()).unwrap();
}

/// Run `cmd` with its stdin on a pty (an interactive terminal), collecting stdout and stderr.
pub(crate) fn on_terminal(mut cmd: std::process::Command) -> std::process::Output {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let out = cmd
        .stdin(std::process::Stdio::from(pty.slave))
        .output()
        .unwrap();
    drop(pty.master);
    out
}

#[test]
fn the_sender_is_found_by_flag_environment_folder_or_owner() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    install_cat_runtime(&env, "console");
    env.ok(&[
        "create",
        "owner",
        "--runtime",
        "console",
        "--intelligence",
        "natural",
        "--no-bootstrap",
    ]);
    env.start_daemon();
    // The last CLI delivery (the echo agents' replies travel over MCP and may land later).
    let caller_of_last = |e: &TestEnv| {
        e.events("delivery", "delivery")
            .iter()
            .rev()
            .find(|d| d["path"] == "cli")
            .unwrap()["caller"]
            .clone()
    };

    // Inside a peer's folder (even a subfolder): that peer on its default runtime.
    let sub = env.peer_dir("alice").join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let out = env
        .cmd(&["send", "bob", "--message", "from the folder"])
        .current_dir(&sub)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
    assert_eq!(caller_of_last(&env), "echo-alice");
    // PEER_IDENTITY beats the folder; --from beats both.
    let out = env
        .cmd(&["send", "alice", "--message", "from the env"])
        .current_dir(&sub)
        .env("PEER_IDENTITY", "echo-bob")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(caller_of_last(&env), "echo-bob");
    let out = env
        .cmd(&[
            "send",
            "bob",
            "--from",
            "console-owner",
            "--message",
            "from the flag",
        ])
        .current_dir(&sub)
        .env("PEER_IDENTITY", "echo-bob")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(caller_of_last(&env), "console-owner");
    // Elsewhere, from a terminal: the only natural peer (the owner).
    let out = on_terminal(env.cmd(&["send", "bob", "--message", "from the owner"]));
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(caller_of_last(&env), "console-owner");
    // Elsewhere, not from a terminal (a script, a pipe, a cron job): never the human.
    refused(
        &env,
        &["bob", "--message", "from a script"],
        "cannot tell who is sending: not run from an interactive terminal (stdin is not a tty), \
         so not sent as the human \"owner\"; pass --from console-owner to speak as them, or \
         --from <runtime>-<name>",
    );
    // A service runtime's process (its PEER_* variables), even on a terminal: never the human.
    let out = on_terminal({
        let mut c = env.cmd(&["send", "bob", "--message", "from a service"]);
        c.env("PEER_PERSONALITY", "alice")
            .env("PEER_RUNTIME", "echo");
        c
    });
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "iapeer send: cannot tell who is sending: this process belongs to a peer \
         (PEER_PERSONALITY=alice is set) but PEER_IDENTITY is not, and it is not sent as the \
         human \"owner\"; pass --from echo-alice"
    );
    assert_eq!(caller_of_last(&env), "console-owner", "nothing was sent");
    // A malformed identity is refused before anything is sent.
    let (_, err) = env.fails(&["send", "bob", "--from", "alice", "--message", "x"], 1);
    assert!(
        err.starts_with("iapeer send: --from: invalid identity"),
        "{err}"
    );
    // A declared runtime is required of the caller too; the refusal lists the ones it has.
    refused(
        &env,
        &["bob", "--from", "codex-alice", "--message", "x"],
        "runtime \"codex\" is not declared for caller \"alice\" — sign with --from \
         <runtime>-alice, one of: echo",
    );

    // Two natural peers: nobody picked, and the choices named (issue 30 item 2).
    env.ok(&[
        "create",
        "owner2",
        "--runtime",
        "console",
        "--intelligence",
        "natural",
        "--no-bootstrap",
    ]);
    let (_, err) = env.fails(&["send", "bob", "--message", "who am I?"], 1);
    assert_eq!(
        err.trim(),
        "iapeer send: cannot tell who is sending: this team has several people — say which \
         with --from console-owner or --from console-owner2"
    );
}

#[test]
fn a_peer_whose_folder_is_gone_fails_to_wake_with_the_reason() {
    let env = two_peers();
    std::fs::remove_dir_all(env.peer_dir("bob")).unwrap();
    let (_, err) = env.fails(
        &["send", "bob", "--from", "echo-alice", "--message", "hi"],
        1,
    );
    assert_eq!(
        err.trim(),
        format!(
            "iapeer send: peer \"bob\" offline and wake failed: working folder {} does not exist",
            env.peer_dir("bob").display()
        )
    );
    let line = env.events("delivery", "delivery").pop().unwrap();
    assert_eq!(line["ok"], "false");
    assert!(env.events("lifecycle", "wake").is_empty());
}

//! Sending through the real daemon to echo peers: live, asleep (woke), stopped, unknown,
//! validation errors, attachments (spec 03).

use crate::attachments::{refused_second_attachment, second};
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

#[test]
fn send_to_an_asleep_peer_wakes_it_and_delivers() {
    let env = two_peers();
    assert_eq!(env.status_of("bob", "echo"), "asleep");
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "hello bob",
        "--topic",
        "t1",
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
    assert_eq!(env.status_of("bob", "echo"), "live");
    // The echo agent printed its acknowledgement in its pane.
    assert!(
        env.pane("echo-bob").contains("from alice: hello bob"),
        "{}",
        env.diagnostics()
    );
    let d = env.events("delivery", "delivery");
    let first = d.iter().find(|e| e["to"] == "bob").expect("delivery line");
    assert_eq!(first["ok"], "true");
    assert_eq!(first["woke"], "true");
    assert_eq!(first["via"], "echo-bob");
    assert_eq!(first["caller"], "echo-alice");
    assert_eq!(first["topic"], "t1");
    assert_eq!(first["path"], "cli");
    assert!(
        !env.log("delivery").contains("hello bob"),
        "bodies never reach delivery.log"
    );
    // bob echoes back to alice, which wakes her through MCP with bob's session token.
    env.wait_mcp_delivery("echo-bob", "alice", Duration::from_secs(10));
    assert!(
        env.pane("echo-alice").contains("from bob: echo: hello bob"),
        "{}",
        env.diagnostics()
    );
}

#[test]
fn send_to_a_live_peer_does_not_wake_and_json_gives_the_result_object() {
    let env = two_peers();
    env.ok(&["send", "bob", "--from", "echo-alice", "--message", "first"]);
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "second",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["woke"], false);
    assert_eq!(v["delivered_to"]["personality"], "bob");
    assert_eq!(v["delivered_to"]["runtime"], "echo");
    let ts = v["ts"].as_str().unwrap();
    assert!(ts.len() >= 25 && &ts[10..11] == "T", "ts with offset: {ts}");
}

/// The SHA-256 of `bytes` in lowercase hex.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn attachments_are_copied_into_the_recipients_inbox() {
    use std::os::unix::fs::PermissionsExt;
    let env = two_peers();
    let content = "quarterly numbers\nß∂ƒ\n".repeat(1000);
    let src = env.dir.path().join("отчёт Q3.txt");
    std::fs::write(&src, &content).unwrap();
    // A relative path: the CLI makes it absolute against its cwd (the test's temp dir).
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "see attached",
        "--attachment",
        "отчёт Q3.txt",
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
    // The sender may delete its file as soon as the send returns.
    std::fs::remove_file(&src).unwrap();

    let hash = sha256_hex(content.as_bytes());
    let inbox = env.paths().attachments_dir("bob");
    let copy = inbox.join(&hash).join("отчёт Q3.txt");
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap_or_default(),
        content,
        "the inbox copy {} remains",
        copy.display()
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&copy), 0o600);
    assert_eq!(mode(copy.parent().unwrap()), 0o700);
    assert_eq!(mode(&inbox), 0o700);
    let leftovers: Vec<_> = std::fs::read_dir(&inbox)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no staging files remain: {leftovers:?}"
    );

    // The envelope the agent received lists the inbox path, never the source.
    let transcript = common::read(&env.peer_dir("bob").join(".echo-agent/transcript.jsonl"));
    let rec: serde_json::Value =
        serde_json::from_str(transcript.lines().next().expect("a transcript record")).unwrap();
    assert_eq!(rec["body"], "see attached");
    assert_eq!(
        rec["attachments"],
        serde_json::json!([copy.display().to_string()]),
        "{transcript}"
    );
    let pane = env.pane("echo-bob");
    assert!(
        pane.contains(&format!("attachment: {}", copy.display())),
        "{}",
        env.diagnostics()
    );
    assert!(
        !pane.contains(&src.display().to_string()),
        "the source path never reaches the agent"
    );
    let line = env
        .events("delivery", "delivery")
        .into_iter()
        .find(|l| l["to"] == "bob")
        .unwrap();
    assert_eq!(line["att"], "1");

    // The same content again is stored once.
    std::fs::write(&src, &content).unwrap();
    env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "once more",
        "--attachment",
        src.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read_dir(&inbox).unwrap().count(),
        1,
        "content-addressed"
    );
}

#[test]
fn an_attachment_that_cannot_be_copied_fails_the_whole_send() {
    let env = two_peers();
    let folder = env.dir.path().join("a-folder");
    std::fs::create_dir(&folder).unwrap();
    let missing = env.dir.path().join("missing.txt");
    // The refusals' words are checked in tests/attachments.rs.
    for (bad, what) in [
        (&folder, "it is a folder, not a regular file — "),
        (&missing, "No such file or directory (os error 2) — "),
    ] {
        let err = refused_second_attachment(&env, bad);
        let want = format!("{}{what}", second(bad));
        assert!(err.starts_with(&want), "want {want:?}, got {err:?}");
    }
    // Nothing was delivered and nothing woke.
    assert!(
        env.events("lifecycle", "wake").is_empty(),
        "{}",
        env.diagnostics()
    );
    assert!(env.pane("echo-bob").is_empty());
    let lines = env.events("delivery", "delivery");
    assert_eq!(lines.len(), 2);
    assert!(
        lines.iter().all(|l| l["ok"] == "false"
            && l["att"] == "2"
            && l["err"].starts_with("attachment 2 ")),
        "{lines:?}"
    );
    assert_eq!(env.status_of("bob", "echo"), "asleep");
}

#[test]
fn concurrent_sends_to_an_asleep_peer_wake_it_once_and_all_arrive() {
    let env = two_peers();
    let children: Vec<_> = (0..5)
        .map(|i| {
            env.cmd(&[
                "send",
                "bob",
                "--from",
                "echo-alice",
                "--message",
                &format!("burst {i}"),
                "--json",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut woke = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}\n{}",
            common::describe(&out),
            env.diagnostics()
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        woke += usize::from(v["woke"] == true);
    }
    assert_eq!(woke, 1, "exactly one send woke bob");
    assert_eq!(
        env.count_events("lifecycle", "wake", &[("identity", "echo-bob")]),
        1
    );
    let pane = env.pane("echo-bob");
    for i in 0..5 {
        assert!(
            pane.contains(&format!("from alice: burst {i}")),
            "{}",
            env.diagnostics()
        );
    }
}

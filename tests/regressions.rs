//! Regression tests, each named after a bug found by trying iapeer as a newcomer would.

use crate::common;

use iapeer::paths::peer;

use common::TestEnv;
use std::time::Duration;

/// `verify --fix` on a registry with a stray comma used to drop every peer whose folder is
/// outside `<root>/peers` and report "no problems".
#[test]
fn verify_fix_keeps_peers_outside_the_root_when_the_registry_is_damaged() {
    let env = TestEnv::new();
    let outside = env.dir.path().join("projects/Outside One");
    std::fs::create_dir_all(&outside).unwrap();
    env.ok(&["init", outside.to_str().unwrap(), "--runtime", "echo"]);
    env.create_echo("inside");
    let reg = env.paths().registry();
    let text = std::fs::read_to_string(&reg).unwrap();
    std::fs::write(&reg, text.replacen("\"cwd\"", ",\"cwd\"", 1)).unwrap();
    let (_, err) = env.fails(&["list"], 1);
    assert!(err.contains("verify --fix"), "{err}");
    let out = env.ok(&["verify", "--fix"]);
    assert!(out.contains("ok: 2 peer(s)"), "{out}");
    let names: Vec<String> = env
        .list()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["personality"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["inside", "outside-one"]);
    let backups: Vec<_> = std::fs::read_dir(&env.root)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("peers-profiles.json.corrupt-")
        })
        .collect();
    assert_eq!(backups.len(), 1, "the damaged registry is kept");

    // A registry that names no folder at all: the peer kept outside cannot be found, and
    // `--fix` says so and how to bring it back, instead of only "no problems".
    std::fs::write(&reg, "garbage").unwrap();
    let out = env.ok(&["verify", "--fix"]);
    assert!(
        out.contains("fixed registry: rebuilt from the profiles under")
            && out.contains("run iapeer init in its folder"),
        "{out}"
    );
    env.ok(&["init", outside.to_str().unwrap()]);
    assert_eq!(env.list().as_array().unwrap().len(), 2);

    // A profile that cannot be read while the registry is rebuilt: the peer cannot be
    // registered, and that is a problem (exit 1), not a "fixed" line over "no problems".
    std::fs::write(peer::profile(&env.peer_dir("inside")), "{broken").unwrap();
    std::fs::write(&reg, "garbage").unwrap();
    let (out, _) = env.fails(&["verify", "--fix"], 1);
    assert!(out.contains("\ninside: not registered: "), "{out}");
    assert!(
        !out.contains("fixed inside") && !out.contains("no problems"),
        "{out}"
    );
}

/// With the registry file gone and the daemon down, a send was refused as from an unknown
/// caller; it is kept for the daemon (the registry may be rebuilt before it starts).
#[test]
fn a_send_while_the_registry_is_missing_is_kept() {
    let env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    std::fs::remove_file(env.paths().registry()).unwrap();
    let out = env.ok(&["send", "bob", "--from", "echo-alice", "--message", "x"]);
    assert!(out.starts_with("kept for bob in the outbox ("), "{out}");
}

/// A copied peer folder: `verify` sent the user to `--fix`, which printed "fixed pete:
/// skipped …" and the same advice again. Now both say it is a copy and the way out, once,
/// and following it works.
#[test]
fn a_copied_peer_folder_is_explained_not_sent_round_in_a_loop() {
    let env = TestEnv::new();
    env.create_echo("pete");
    let copy = env.peer_dir("pete").with_file_name("pete2");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(env.peer_dir("pete"))
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    let (out, _) = env.fails(&["verify"], 1);
    assert!(
        out.contains("holds a copy of the profile of the peer in"),
        "{out}"
    );
    assert!(
        !out.contains("run iapeer verify --fix"),
        "--fix cannot decide it: {out}"
    );
    let (out, _) = env.fails(&["verify", "--fix"], 1);
    assert!(!out.contains("fixed pete"), "{out}");
    assert_eq!(out.matches("holds a copy").count(), 1, "said once: {out}");
    std::fs::remove_file(copy.join(".iapeer/peer-profile.json")).unwrap();
    env.ok(&["init", copy.to_str().unwrap(), "--runtime", "echo"]);
    assert!(env.ok(&["verify"]).contains("ok: 2 peer(s), no problems"));
}

/// After `remove`, `verify` reported the kept folder as an unregistered peer and `--fix`
/// brought the removed peer back.
#[test]
fn removed_peers_stay_removed_through_verify_fix() {
    let env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.ok(&["remove", "alice"]);
    env.ok(&["verify"]);
    env.ok(&["verify", "--fix"]);
    assert_eq!(env.list().as_array().unwrap().len(), 1);
    // init in the kept folder restores the peer with its own profile.
    env.ok(&["init", env.peer_dir("alice").to_str().unwrap()]);
    assert_eq!(env.list().as_array().unwrap().len(), 2);
}

/// A refused `create` used to leave an empty `<root>/peers/<name>` folder behind.
#[test]
fn a_refused_create_leaves_no_folder() {
    let env = TestEnv::new();
    for args in [
        vec![
            "create",
            "d1",
            "--runtime",
            "echo",
            "--intelligence",
            "natural",
        ],
        vec!["create", "d2", "--runtime", "bogus"],
        vec!["create", "d3", "--runtime", "echo", "--description", "a\nb"],
    ] {
        env.fails(&args, 1);
        assert!(!env.peer_dir(args[1]).exists(), "{args:?} left a folder");
    }
    let (_, err) = env.fails(&["create", "a--b", "--runtime", "echo"], 1);
    assert!(err.contains("choose a-b"), "{err}");
}

/// A profile edited to `"intelligence": "natural"` was still launched on an agent runtime.
#[test]
fn a_natural_peer_is_not_launched_on_an_agent_runtime() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    let p = peer::profile(&env.peer_dir("bob"));
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("\"artificial\"", "\"natural\"");
    std::fs::write(&p, text).unwrap();
    // verify flags it (and --fix projects the profile into the registry, still exit 1).
    let (out, _) = env.fails(&["verify", "--fix"], 1);
    assert!(
        out.contains("natural intelligence may not run on \"echo\""),
        "{out}"
    );
    env.start_daemon();
    let (_, err) = env.fails(
        &["send", "bob", "--from", "echo-alice", "--message", "hi"],
        1,
    );
    assert!(
        err.contains("a peer of intelligence natural cannot run on echo"),
        "{err}"
    );
    assert!(env
        .events("lifecycle", "wake")
        .iter()
        .all(|w| w["identity"] != "echo-bob"));
}

/// A 5 MB message on stdin broke the control connection ("Broken pipe") instead of being
/// refused with the size rule.
#[test]
fn a_huge_message_is_refused_with_its_size() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    let mut child = env
        .cmd(&["send", "bob", "--from", "echo-alice", "--message-file", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&vec![b'a'; 5_000_000]).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("message exceeds 16000 char limit (got 5000000)"),
        "{err}"
    );
}

/// `stop` answered before the session had ended, so `live-runtime` still said live.
#[test]
fn stop_returns_once_the_session_is_gone() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    env.ok(&["send", "bob", "--from", "echo-alice", "--message", "hi"]);
    for _ in 0..3 {
        env.ok(&["stop", "bob"]);
        let out = env.run(&["live-runtime", "bob"]);
        assert_eq!(out.status.code(), Some(1), "live right after stop");
        assert!(env
            .events("lifecycle", "session-end")
            .iter()
            .any(|e| e["identity"] == "echo-bob"));
        env.ok(&["start", "bob"]);
        env.ok(&["send", "bob", "--from", "echo-alice", "--message", "again"]);
    }
}

/// The bare `iapeer echo` was refused in a subfolder of a peer's folder.
#[test]
fn the_runtime_shortcut_works_from_a_subfolder() {
    let mut env = TestEnv::new();
    env.create_echo("bob");
    env.start_daemon();
    let sub = env.peer_dir("bob").join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let out = env.cmd(&["echo"]).current_dir(&sub).output().unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("started a fresh session echo-bob"));
    env.wait_until("bob is live", Duration::from_secs(10), |e| {
        e.status_of("bob", "echo") == "live"
    });
}

/// `send --json` printed nothing on stdout when the daemon was down. With the outbox (issue 11
/// item 7) a send is kept and says so on stdout; a verb that needs the daemon still reports
/// the down daemon there.
#[test]
fn send_json_reports_a_down_daemon_on_stdout() {
    let env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "hi",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert!(v["outbox"].as_str().unwrap().contains("outbox"), "{v}");
    let (out, err) = env.fails(&["stop", "bob", "--json"], 1);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["error"]
        .as_str()
        .unwrap()
        .contains("the daemon is not running"));
    assert!(
        err.starts_with("iapeer: the daemon is not running"),
        "{err}"
    );
}

/// The profile's `initial_prompt` opens the first message of a fresh session (spec 05 §2
/// step 9), and only that one; the system prompt file reaches the runtime at every start.
#[test]
fn initial_prompt_prefixes_only_a_fresh_sessions_first_message() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    let p = peer::profile(&env.peer_dir("bob"));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["initial_prompt"] = serde_json::json!("New session. Greet the owner.");
    std::fs::write(&p, v.to_string()).unwrap();
    env.start_daemon();
    env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: first",
    ]);
    env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: second",
    ]);
    let screen = env.screen("echo-bob");
    assert_eq!(
        screen
            .matches("initial prompt: New session. Greet the owner.")
            .count(),
        1,
        "{screen}"
    );
    let prompt_file = env.marker("echo-bob", ".system-prompt.md");
    let prompt = std::fs::read_to_string(&prompt_file).unwrap();
    assert!(
        prompt.contains("personality: \"bob\"") && prompt.contains("## Known peers"),
        "{prompt}"
    );
    assert!(
        screen.contains(&format!("system prompt: {} bytes", prompt.len())),
        "{screen}"
    );
}

/// Issue 26 follow-up: the daemon's binary replaced under it (an install, `update`, a rebuild:
/// a new file renamed over the old one) left it unable to start any built-in session — it
/// ran `<path> (deleted)`. Now the file at the path is run; with none there, the daemon's own
/// image.
#[test]
fn a_daemon_whose_binary_was_replaced_still_starts_sessions() {
    let mut env = TestEnv::new();
    for p in ["alice", "bob", "carol"] {
        env.create_echo(p);
    }
    let dir = env.dir.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    let installed = dir.join("iapeer");
    std::fs::copy(common::bin(), &installed).unwrap();
    let probe = env.cmd(&[]);
    let mut daemon = std::process::Command::new(&installed);
    daemon.arg("daemon");
    for (k, v) in probe.get_envs() {
        match v {
            Some(v) => daemon.env(k, v),
            None => daemon.env_remove(k),
        };
    }
    let log = std::fs::File::create(env.dir.path().join("daemon-stderr.log")).unwrap();
    env.daemon = Some(
        daemon
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    env.wait_until("the daemon answers", Duration::from_secs(15), |e| {
        std::os::unix::net::UnixStream::connect(e.socket()).is_ok()
    });
    // Replaced by a new file at the same path.
    let fresh = dir.join("iapeer.new");
    std::fs::copy(common::bin(), &fresh).unwrap();
    std::fs::rename(&fresh, &installed).unwrap();
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: after",
    ]);
    assert!(
        out.starts_with("delivered to bob (echo)"),
        "{out}{}",
        env.diagnostics()
    );
    // Gone altogether: the daemon's own image starts the session.
    std::fs::remove_file(&installed).unwrap();
    let out = env.ok(&[
        "send",
        "carol",
        "--from",
        "echo-alice",
        "--message",
        "echo: gone",
    ]);
    assert!(
        out.starts_with("delivered to carol (echo)"),
        "{out}{}",
        env.diagnostics()
    );
    env.stop_daemon();
}

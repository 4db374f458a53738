//! A terminal agent declared by a manifest, with no code (issue 27 item 3): the test's own
//! small agent `parrot` (`tests/terminal_agent/`: a composer, bracketed paste, a busy line
//! while it works, its own MCP client — the official Python SDK) installed with the real
//! `iapeer install-runtime <dir>`, made a peer with `iapeer create`, woken by `iapeer send`,
//! answering through `send_to_peer`, taking a message while live, put to sleep when idle and
//! resumed by topic into the same conversation. Everything is real: nothing here is mocked.

use crate::common;

use common::terminal_agent::{self as parrot, events_of, RUNTIME};
use common::TestEnv;
use std::time::Duration;

const FIRST: &str = "hello parrot, remember the number 42";
const NEXT: &str = "what was the number?";

/// `iapeer send pa --from echo-ea --message <message> --topic t1`.
fn send(env: &TestEnv, message: &str) -> String {
    let topic = ["--topic", "t1"];
    env.ok(&[
        &["send", "pa", "--from", "echo-ea", "--message", message],
        &topic[..],
    ]
    .concat())
}

/// The bodies of the messages parrot `pa` took, in order.
fn taken(env: &TestEnv) -> Vec<String> {
    events_of(env, "pa", "message")
        .iter()
        .map(|e| e["body"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_manifest_agent_wakes_replies_through_mcp_takes_a_live_message_sleeps_and_resumes() {
    let Some(python) = parrot::python() else {
        return;
    };
    let started = std::time::Instant::now();
    let mut env = TestEnv::new();
    env.set("IAPEER_IDLE_SECS", "4")
        .set("IAPEER_TICK_SECS", "1");
    let installed = parrot::install(&env, &python);
    assert!(
        installed.contains("terminal runtime parrot installed"),
        "{installed}"
    );
    env.ok(&["create", "pa", "--runtime", RUNTIME]);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    assert_eq!(
        env.status_of("pa", RUNTIME),
        "asleep",
        "{}",
        env.diagnostics()
    );
    // status and doctor name its program next to the built-in agents'.
    let program = format!("  {RUNTIME}: {python}\n");
    let status = env.ok(&["status"]);
    assert!(status.contains(&program), "{status}");
    let doctor = String::from_utf8_lossy(&env.run(&["doctor"]).stdout).into_owned();
    assert!(doctor.contains(&program), "{doctor}");

    // Asleep: the send wakes it and is answered once the screen showed the turn.
    assert_eq!(
        send(&env, FIRST).trim(),
        "delivered to pa (parrot), woke",
        "{}",
        env.diagnostics()
    );
    let starts = events_of(&env, "pa", "start");
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0]["mode"], "fresh");
    assert_eq!(
        starts[0]["prompt_names_peer"], true,
        "the composed system prompt reached it through its flag"
    );
    let conversation = starts[0]["conversation"].as_str().unwrap().to_string();
    assert_eq!(
        conversation.len(),
        36,
        "iapeer chose a UUID: {conversation}"
    );

    // Its send_to_peer reaches ea over MCP with the session's token.
    let reply = [
        ("caller", "parrot-pa"),
        ("to", "ea"),
        ("ok", "true"),
        ("path", "mcp"),
    ];
    env.wait_until("parrot's reply reaches ea", Duration::from_secs(60), |e| {
        e.has_event("delivery", "delivery", &reply)
    });
    assert!(
        env.pane("echo-ea")
            .contains("from pa: parrot heard: hello parrot"),
        "{}",
        env.diagnostics()
    );

    // ea's echo is a second message, into the live session.
    let echo = [
        ("caller", "echo-ea"),
        ("to", "pa"),
        ("ok", "true"),
        ("woke", "false"),
    ];
    env.wait_until(
        "ea's echo reaches the live parrot",
        Duration::from_secs(60),
        |e| e.has_event("delivery", "delivery", &echo),
    );
    env.wait_until("parrot takes the echo", Duration::from_secs(30), |e| {
        taken(e).iter().any(|b| b.starts_with("echo: "))
    });

    // Idle, it sleeps; the next message on the topic resumes the same conversation.
    env.wait_until("pa is put to sleep", Duration::from_secs(60), |e| {
        e.has_event(
            "lifecycle",
            "supervise",
            &[("identity", "parrot-pa"), ("action", "reaped-idle")],
        ) && e.status_of("pa", RUNTIME) == "asleep"
    });
    assert_eq!(
        send(&env, NEXT).trim(),
        "delivered to pa (parrot), woke",
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        crate::conversations::last_wake(&env, "parrot-pa"),
        ("resume".into(), "topic-match".into()),
        "{}",
        env.diagnostics()
    );
    let starts = events_of(&env, "pa", "start");
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!(starts[1]["mode"], "resume");
    assert_eq!(starts[1]["conversation"], conversation.as_str());
    assert_eq!(starts[1]["earlier"], 2, "the first message and the echo");

    // Every message reached the agent exactly once (Enter pressed again never sent one twice).
    env.wait_until(
        "parrot takes the next message",
        Duration::from_secs(30),
        |e| taken(e).len() >= 3,
    );
    let bodies = taken(&env);
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    assert_eq!(bodies[0], FIRST);
    assert!(bodies[1].starts_with("echo: parrot heard: "), "{bodies:?}");
    assert_eq!(bodies[2], NEXT);
    let timings: Vec<String> = env
        .events("delivery", "delivery")
        .iter()
        .filter(|d| d["to"] == "pa")
        .map(|d| format!("woke={} {} ms", d["woke"], d["ms"]))
        .collect();
    eprintln!(
        "parrot end to end in {:?}; to pa: {timings:?}",
        started.elapsed()
    );
}

/// A bad manifest is refused by the real verb with what is wrong, and installs nothing.
#[test]
fn a_bad_terminal_manifest_installs_nothing() {
    let env = TestEnv::new();
    let dir = env.dir.path().join("bad");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("runtime.json"),
        r#"{"runtime":"parrot","kind":"terminal","terminal":{"command":"python3","ready":"^>","busy":"(working"}}"#,
    )
    .unwrap();
    let (_, err) = env.fails(&["install-runtime", dir.to_str().unwrap()], 1);
    assert!(
        err.contains("\"busy\" is not a regular expression")
            && err.contains("nothing was installed"),
        "{err}"
    );
    assert!(!env.root.join("runtimes/parrot").exists());
    let (_, err) = env.fails(&["create", "pa", "--runtime", RUNTIME], 1);
    assert!(err.contains("not installed"), "{err}");
}

/// A terminal agent is an agent runtime though its name is not built in: `create` gives its
/// peers the artificial nature and refuses a natural one, as for Claude (before, the nature
/// was decided by the name alone, and `--intelligence natural` was accepted).
#[test]
fn a_manifest_agent_takes_only_artificial_peers() {
    let Some(python) = parrot::python() else {
        return;
    };
    let env = TestEnv::new();
    parrot::install(&env, &python);
    let (_, err) = env.fails(
        &[
            "create",
            "pn",
            "--runtime",
            RUNTIME,
            "--intelligence",
            "natural",
        ],
        1,
    );
    assert!(
        err.contains(&format!(
            "a peer of intelligence natural cannot run on {RUNTIME}"
        )),
        "{err}"
    );
    assert!(!env.peer_dir("pn").exists(), "nothing was created");
    env.ok(&["create", "pa", "--runtime", RUNTIME]);
    let profile =
        std::fs::read_to_string(env.peer_dir("pa").join(".iapeer/peer-profile.json")).unwrap();
    assert!(profile.contains("\"artificial\""), "{profile}");
}

/// `verify` judges a terminal agent's peer by the runtime as installed, as `create` and the
/// daemon do: an artificial peer conforms, and a profile edited to say natural is an error
/// (before, `verify` read the class from the name, which the table does not know, and took
/// any nature: a peer it passed could not be woken).
#[test]
fn verify_takes_a_manifest_agent_for_an_agent() {
    let Some(python) = parrot::python() else {
        return;
    };
    let env = TestEnv::new();
    parrot::install(&env, &python);
    env.ok(&["create", "pa", "--runtime", RUNTIME, "--no-bootstrap"]);
    let out = env.ok(&["verify"]);
    assert!(!out.contains("pa:"), "{out}");
    let file = env.peer_dir("pa").join(".iapeer/peer-profile.json");
    let profile = std::fs::read_to_string(&file).unwrap();
    assert!(profile.contains("\"artificial\""), "{profile}");
    std::fs::write(&file, profile.replace("\"artificial\"", "\"natural\"")).unwrap();
    let (out, err) = env.fails(&["verify"], 1);
    assert!(
        format!("{out}{err}").contains(&format!(
            "a peer of natural intelligence may not run on \"{RUNTIME}\""
        )),
        "{out}{err}"
    );
}

/// `update-runtime` for a runtime installed from a folder (issue 27 item 3): it reads the
/// folder again, says what changed and installs it whole; an unchanged folder changes nothing;
/// a folder now invalid, or gone, is refused with the reason and the installed runtime is kept.
#[test]
fn update_runtime_reinstalls_a_folder_runtime_from_its_folder() {
    let Some(python) = parrot::python() else {
        return;
    };
    let env = TestEnv::new();
    parrot::install(&env, &python);
    let dir = env.dir.path().join("parrot-runtime");
    let installed = env.root.join("runtimes/parrot");
    let out = env.ok(&["update-runtime", RUNTIME]);
    assert!(out.contains("parrot: unchanged (its folder "), "{out}");

    let program = std::fs::read_to_string(dir.join("parrot.py")).unwrap() + "\n# v2\n";
    std::fs::write(dir.join("parrot.py"), &program).unwrap();
    std::fs::write(dir.join("NOTES.md"), "new\n").unwrap();
    std::fs::remove_file(dir.join("mcp_client.py")).unwrap();
    let out = env.ok(&["update-runtime", RUNTIME]);
    assert!(
        out.contains("runtime parrot updated from ")
            && out.contains(": added NOTES.md, removed mcp_client.py, changed parrot.py\n"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(installed.join("parrot.py")).unwrap(),
        program
    );
    assert!(!installed.join("mcp_client.py").exists());

    // Now invalid: refused, the installed one kept byte for byte.
    let manifest = std::fs::read_to_string(installed.join("runtime.json")).unwrap();
    std::fs::write(
        dir.join("runtime.json"),
        r#"{"runtime":"parrot","kind":"terminal","terminal":{"command":"python3","ready":"^>","busy":"(working"}}"#,
    )
    .unwrap();
    let (_, err) = env.fails(&["update-runtime", RUNTIME], 1);
    assert!(
        err.contains("\"busy\" is not a regular expression")
            && err.contains("the installed parrot is kept as it was"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(installed.join("runtime.json")).unwrap(),
        manifest
    );

    // Gone: refused, named, kept.
    std::fs::remove_dir_all(&dir).unwrap();
    let (_, err) = env.fails(&["update-runtime", RUNTIME], 1);
    assert!(
        err.contains("runtime parrot was installed from ")
            && err.contains("which is gone — the installed parrot is kept as it was"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(installed.join("runtime.json")).unwrap(),
        manifest
    );
    let leftovers: Vec<_> = std::fs::read_dir(env.root.join("runtimes"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("parrot")]);
}

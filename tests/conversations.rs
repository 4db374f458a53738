//! Sessions keep their own conversation (issue 32 items 1 and 2), with the real Claude Code
//! 2.1.332 and Codex 0.171.0 against the local model stand-ins:
//!
//! - a person who runs the CLI by hand in a peer's folder (same `HOME`) between two messages
//!   on the peer's topic does not hand the peer their conversation: the resume names the
//!   peer's own;
//! - an agent killed mid-turn tells the sender of the message it was working on, and the
//!   follow-up on that topic resumes the conversation; a resumed peer that keeps dying is
//!   still stopped by the crash-loop guard.

use crate::attach::Terminal;
use crate::common;

use common::anthropic::{last_user_text, Reply};
use common::openai::{input_text, last_input_text, Reply as OReply};
use common::TestEnv;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// What the person asks in their own session.
const PERSON: &str = "PERSON-QUESTION about the weather";

/// The last `wake` line of `identity`: (mode, cause).
fn last_wake(env: &TestEnv, identity: &str) -> (String, String) {
    let wakes: Vec<_> = env
        .events("lifecycle", "wake")
        .into_iter()
        .filter(|w| w["identity"] == identity)
        .collect();
    let w = wakes
        .last()
        .unwrap_or_else(|| panic!("no wake of {identity}\n{}", env.diagnostics()));
    (w["mode"].clone(), w["cause"].clone())
}

/// Wait until `identity` was put to sleep `n` times and shows asleep.
fn wait_asleep(env: &TestEnv, identity: &str, personality: &str, runtime: &str, n: usize) {
    env.wait_until(
        &format!("{identity} is put to sleep"),
        Duration::from_secs(90),
        |e| {
            e.count_events(
                "lifecycle",
                "supervise",
                &[("identity", identity), ("action", "reaped-idle")],
            ) >= n
                && e.status_of(personality, runtime) == "asleep"
        },
    );
}

/// A person's own terminal: `program` run by hand in `cwd` with the test's `HOME` and
/// `vars`, on a real pty.
fn person(
    env: &TestEnv,
    program: &str,
    args: &[&str],
    cwd: &Path,
    vars: &[(&str, &str)],
) -> Terminal {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", &env.home)
        .env("PWD", cwd)
        .env("TERM", "xterm-256color")
        .envs(vars.iter().copied());
    Terminal::spawn(cmd)
}

/// Type `text` and Enter the way a person does: the text, a moment, then Enter.
fn ask(term: &mut Terminal, text: &str) {
    term.type_bytes(text.as_bytes());
    std::thread::sleep(Duration::from_millis(500));
    term.type_bytes(b"\r");
}

/// Issue 32 item 1, Claude Code: a person runs `claude` in the peer's folder, asks one
/// question and quits; the next message on the peer's topic resumes the peer's own
/// conversation (on `main`, `--continue` took the person's).
#[test]
fn a_claude_resume_by_topic_continues_the_peer_s_conversation_not_a_person_s() {
    let (env, api) = crate::claude::world(&[("IAPEER_IDLE_SECS", "3"), ("IAPEER_TICK_SECS", "1")]);
    api.script(|_| Reply::Text("noted".into()));
    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "remember the number 42",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cb (claude), woke",
        "{}",
        env.diagnostics()
    );
    wait_asleep(&env, "claude-cb", "cb", "claude", 1);

    // The person: plain `claude` in the peer's folder, with the same HOME and key.
    let claude = std::env::var("IAPEER_TEST_CLAUDE_BIN").unwrap();
    let url = api.url();
    let mut term = person(
        &env,
        &claude,
        &[],
        &env.peer_dir("cb"),
        &[
            ("ANTHROPIC_BASE_URL", &url),
            ("ANTHROPIC_API_KEY", "sk-ant-standin-key"),
        ],
    );
    term.wait_for(&env, "❯");
    ask(&mut term, PERSON);
    env.wait_until(
        "the person's question reaches the model",
        Duration::from_secs(60),
        |_| api.has_main_request_with(PERSON),
    );
    env.wait_until(
        "the person sees the answer",
        Duration::from_secs(30),
        |_| term.screen().contains("noted"),
    );
    ask(&mut term, "/exit");
    term.wait(&env);

    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "what was the number?",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cb (claude), woke",
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        last_wake(&env, "claude-cb"),
        ("resume".to_string(), "topic-match".to_string())
    );
    env.wait_until(
        "the resumed request reaches the model",
        Duration::from_secs(60),
        |_| api.has_main_request_with("what was the number?"),
    );
    let resumed = api
        .main_requests()
        .into_iter()
        .find(|r| last_user_text(r).contains("what was the number?"))
        .unwrap();
    let history = common::anthropic::flatten(&resumed["messages"]);
    assert!(
        history.contains("remember the number 42"),
        "the peer's own conversation was not resumed: {history}\n{}",
        env.diagnostics()
    );
    assert!(
        !history.contains(PERSON),
        "the peer was handed the person's conversation: {history}"
    );
}

/// Issue 32 item 1, compatibility: a peer whose conversation id was never recorded (made by
/// the original tool or an older iapeer) is not resumed by "the folder's newest" on its
/// topic: it starts fresh, and `lifecycle.log` says why.
#[test]
fn a_claude_peer_without_a_recorded_conversation_starts_fresh_and_says_why() {
    let (env, api) = crate::claude::world(&[("IAPEER_IDLE_SECS", "3"), ("IAPEER_TICK_SECS", "1")]);
    api.script(|_| Reply::Text("noted".into()));
    env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "remember the number 42",
        "--topic",
        "t1",
    ]);
    wait_asleep(&env, "claude-cb", "cb", "claude", 1);
    // As an older iapeer left it: the topics and the resume flag, no conversation id.
    let _ = std::fs::remove_file(env.marker("claude-cb", ".conversation"));
    assert!(env.marker("claude-cb", ".idle-reaped").exists());

    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "what was the number?",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cb (claude), woke",
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        last_wake(&env, "claude-cb"),
        ("fresh".to_string(), "no-recorded-conversation".to_string())
    );
    env.wait_until(
        "the request reaches the model",
        Duration::from_secs(60),
        |_| api.has_main_request_with("what was the number?"),
    );
    let fresh = api
        .main_requests()
        .into_iter()
        .find(|r| last_user_text(r).contains("what was the number?"))
        .unwrap();
    assert!(!common::anthropic::flatten(&fresh["messages"]).contains("remember the number 42"));
    assert!(
        env.marker("claude-cb", ".conversation").exists(),
        "a new one is recorded"
    );
}

/// The app-server processes a person's Codex left running (it outlives the TUI), ended when
/// the test ends: only those the test's own `CODEX_HOME` names.
struct CodexAppServer(std::path::PathBuf);

impl Drop for CodexAppServer {
    fn drop(&mut self) {
        for file in ["daemon.pid", "daemon-updater.pid"] {
            let path = self.0.join("app-server-daemon").join(file);
            let pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["pid"].as_u64());
            if let Some(pid) = pid {
                let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
                if exe.starts_with(&self.0) {
                    common::signal(pid as u32, nix::sys::signal::Signal::SIGKILL);
                }
            }
        }
    }
}

/// Issue 32 item 1, Codex: the same with a person's `codex`, whose background app server
/// keeps their conversation open after they quit (on `main`, `resume --last` took the
/// person's conversation, found it "open in another app", and the wake failed as "no
/// confirmation within 20000 ms").
#[test]
fn a_codex_resume_by_topic_continues_the_peer_s_conversation_not_a_person_s() {
    let (env, api) =
        crate::codex::world_with(&[("IAPEER_IDLE_SECS", "3"), ("IAPEER_TICK_SECS", "1")]);
    let _app_server = CodexAppServer(env.home.join(".codex"));
    api.script(|_| OReply::Text("noted".into()));
    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "remember the number 42",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cx (codex), woke",
        "{}",
        env.diagnostics()
    );
    crate::busy::wait_codex_turns(&env, 1);
    wait_asleep(&env, "codex-cx", "cx", "codex", 1);

    let codex = std::env::var("IAPEER_TEST_CODEX_BIN").unwrap();
    let codex_home = env.home.join(".codex");
    let mut term = person(
        &env,
        &codex,
        &[],
        &env.peer_dir("cx"),
        &[
            ("CODEX_HOME", codex_home.to_str().unwrap()),
            ("STANDIN_API_KEY", "sk-standin-key"),
        ],
    );
    term.wait_for(&env, "›");
    ask(&mut term, PERSON);
    env.wait_until(
        "the person's question reaches the model",
        Duration::from_secs(60),
        |_| api.has_request_with(PERSON),
    );
    crate::busy::wait_codex_turns(&env, 2);
    // Quit as a person does: Ctrl-C twice on an empty composer.
    term.type_bytes(&[0x03]);
    std::thread::sleep(Duration::from_millis(300));
    term.type_bytes(&[0x03]);
    term.wait(&env);

    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "what was the number?",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cx (codex), woke",
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        last_wake(&env, "codex-cx"),
        ("resume".to_string(), "topic-match".to_string())
    );
    env.wait_until(
        "the resumed request reaches the model",
        Duration::from_secs(60),
        |_| api.has_request_with("what was the number?"),
    );
    let resumed = api
        .recorded()
        .into_iter()
        .find(|r| last_input_text(r).contains("what was the number?"))
        .unwrap();
    let history = input_text(&resumed);
    assert!(
        history.contains("remember the number 42"),
        "the peer's own conversation was not resumed: {history}\n{}",
        env.diagnostics()
    );
    assert!(
        !history.contains(PERSON),
        "the peer was handed the person's conversation: {history}"
    );
}

/// Issue 32 item 1: a person opened the peer's own conversation in their Codex (`codex
/// resume <id>`, whose background app server keeps it open after they quit); the next
/// message on the topic resumes it, Codex says "This conversation is open in another app",
/// and that is what the sender is told (on `main`: "no confirmation within 20000 ms").
/// With `IAPEER_RECORD_DIR` set, the failed session's pane log is saved as
/// `$IAPEER_RECORD_DIR/codex/resume-open-in-another-app.raw`.
#[test]
fn a_codex_conversation_open_in_another_app_is_what_the_sender_is_told() {
    let (env, api) =
        crate::codex::world_with(&[("IAPEER_IDLE_SECS", "3"), ("IAPEER_TICK_SECS", "1")]);
    let _app_server = CodexAppServer(env.home.join(".codex"));
    api.script(|_| OReply::Text("noted".into()));
    env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "remember the number 42",
        "--topic",
        "t1",
    ]);
    crate::busy::wait_codex_turns(&env, 1);
    wait_asleep(&env, "codex-cx", "cx", "codex", 1);
    let id = serde_json::from_str::<serde_json::Value>(&common::read(
        &env.marker("codex-cx", ".conversation"),
    ))
    .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    let codex = std::env::var("IAPEER_TEST_CODEX_BIN").unwrap();
    let codex_home = env.home.join(".codex");
    let mut term = person(
        &env,
        &codex,
        &["resume", &id],
        &env.peer_dir("cx"),
        &[
            ("CODEX_HOME", codex_home.to_str().unwrap()),
            ("STANDIN_API_KEY", "sk-standin-key"),
        ],
    );
    term.wait_for(&env, "›");
    ask(&mut term, PERSON);
    crate::busy::wait_codex_turns(&env, 2);
    term.type_bytes(&[0x03]);
    std::thread::sleep(Duration::from_millis(300));
    term.type_bytes(&[0x03]);
    term.wait(&env);

    let pane_log = env.paths().pane_log("codex-cx");
    let before = std::fs::metadata(&pane_log).map_or(0, |m| m.len() as usize);
    let (_, err) = env.fails(
        &[
            "send",
            "cx",
            "--from",
            "echo-ea",
            "--message",
            "what was the number?",
            "--topic",
            "t1",
        ],
        1,
    );
    if let Ok(dir) = std::env::var("IAPEER_RECORD_DIR") {
        // The failed session's part of the pane log.
        let dir = Path::new(&dir).join("codex");
        std::fs::create_dir_all(&dir).unwrap();
        let pane = std::fs::read(&pane_log).unwrap();
        std::fs::write(dir.join("resume-open-in-another-app.raw"), &pane[before..]).unwrap();
    }
    assert!(
        err.contains("peer \"cx\" offline and wake failed: ")
            && err.contains("This conversation is open in another app"),
        "{err}\n{}",
        env.diagnostics()
    );
    assert_eq!(
        last_wake(&env, "codex-cx"),
        ("resume".to_string(), "topic-match".to_string())
    );
}

/// The pid of `identity`'s live session (its last `wake` line).
fn agent_pid(env: &TestEnv, identity: &str) -> u32 {
    env.events("lifecycle", "wake")
        .iter()
        .rev()
        .find(|w| w["identity"] == identity)
        .and_then(|w| w["pid"].parse().ok())
        .unwrap_or_else(|| panic!("no wake of {identity}\n{}", env.diagnostics()))
}

/// Issue 32 item 2, Claude Code: the agent's process killed 3 s into a 20 s turn. The
/// sender is told the task was interrupted, and the follow-up on the topic resumes the
/// conversation (on `main`: nobody was told, and the follow-up started fresh).
#[test]
fn a_claude_peer_killed_mid_turn_tells_the_sender_and_its_topic_resumes_the_conversation() {
    let (env, api) = crate::claude::world(&[]);
    api.script(|req| {
        if last_user_text(req).contains("LONG-TASK") && !last_user_text(req).contains("did you") {
            Reply::Hold(Duration::from_secs(20), "report written".into())
        } else {
            Reply::Text("ok".into())
        }
    });
    env.ok(&["new", "ea"]);
    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "LONG-TASK: write the report",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cb (claude), woke",
        "{}",
        env.diagnostics()
    );
    env.wait_until("the model works on it", Duration::from_secs(60), |_| {
        api.has_main_request_with("LONG-TASK")
    });
    std::thread::sleep(Duration::from_secs(3)); // 3 s into the held turn, as the issue has it
    common::signal(
        agent_pid(&env, "claude-cb"),
        nix::sys::signal::Signal::SIGKILL,
    );

    crate::busy::told_by_iapeer(&env, "echo-ea", "cb (claude)", "was interrupted");
    let pane = env.pane("echo-ea");
    assert!(pane.contains("LONG-TASK: write the report"), "{pane}");
    assert!(pane.contains("was killed by SIGKILL"), "{pane}");

    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "did you finish?",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cb (claude), woke",
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        last_wake(&env, "claude-cb"),
        ("resume".to_string(), "topic-match".to_string())
    );
    env.wait_until(
        "the follow-up reaches the model",
        Duration::from_secs(60),
        |_| api.has_main_request_with("did you finish?"),
    );
    let follow_up = api
        .main_requests()
        .into_iter()
        .find(|r| last_user_text(r).contains("did you finish?"))
        .unwrap();
    let history = common::anthropic::flatten(&follow_up["messages"]);
    assert!(
        history.contains("LONG-TASK: write the report"),
        "the follow-up lacks the earlier conversation: {history}\n{}",
        env.diagnostics()
    );
}

/// Issue 32 item 2, Codex: the same.
#[test]
fn a_codex_peer_killed_mid_turn_tells_the_sender_and_its_topic_resumes_the_conversation() {
    let (env, api) = crate::codex::world();
    api.script(|req| {
        if last_input_text(req).contains("LONG-TASK") {
            OReply::Hold(Duration::from_secs(20))
        } else {
            OReply::Text("ok".into())
        }
    });
    env.ok(&["new", "ea"]);
    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "LONG-TASK: write the report",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cx (codex), woke",
        "{}",
        env.diagnostics()
    );
    env.wait_until("the model works on it", Duration::from_secs(60), |_| {
        api.has_request_with("LONG-TASK")
    });
    std::thread::sleep(Duration::from_secs(3)); // 3 s into the held turn
    common::signal(
        agent_pid(&env, "codex-cx"),
        nix::sys::signal::Signal::SIGKILL,
    );

    crate::busy::told_by_iapeer(&env, "echo-ea", "cx (codex)", "was interrupted");

    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "did you finish?",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cx (codex), woke",
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        last_wake(&env, "codex-cx"),
        ("resume".to_string(), "topic-match".to_string())
    );
    env.wait_until(
        "the follow-up reaches the model",
        Duration::from_secs(60),
        |_| api.has_request_with("did you finish?"),
    );
    let follow_up = api
        .recorded()
        .into_iter()
        .find(|r| last_input_text(r).contains("did you finish?"))
        .unwrap();
    let history = input_text(&follow_up);
    assert!(
        history.contains("LONG-TASK: write the report"),
        "the follow-up lacks the earlier conversation: {history}\n{}",
        env.diagnostics()
    );
}

/// Issue 32 item 2 and spec 05 §2 step 5: a peer resumed after each death that keeps dying
/// is stopped by the crash-loop guard all the same (the echo agent, killed after each wake).
#[test]
fn a_resumed_peer_that_keeps_dying_is_refused_as_crash_looping() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    let send = |env: &TestEnv| {
        env.run(&[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            "echo: work",
            "--topic",
            "t1",
        ])
    };
    for n in 1..=3 {
        let out = send(&env);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "delivered to bob (echo), woke",
            "send {n}: {}\n{}",
            common::describe(&out),
            env.diagnostics()
        );
        if n > 1 {
            assert_eq!(
                last_wake(&env, "echo-bob"),
                ("resume".to_string(), "topic-match".to_string()),
                "wake {n} resumes the conversation the death left"
            );
        }
        common::signal(
            agent_pid(&env, "echo-bob"),
            nix::sys::signal::Signal::SIGKILL,
        );
        env.wait_until("the death is recorded", Duration::from_secs(10), |e| {
            e.count_events(
                "lifecycle",
                "session-end",
                &[("identity", "echo-bob"), ("resumable", "true")],
            ) == n
        });
    }
    let out = send(&env);
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("crash-looping: 3 deaths in 300s — see exits.log; iapeer new bob to force"),
        "{}",
        common::describe(&out)
    );
    assert_eq!(
        env.count_events("lifecycle", "wake", &[("identity", "echo-bob")]),
        3,
        "the fourth send launched nothing"
    );
}

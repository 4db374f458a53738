//! Agent logins in `doctor`, `status` and `create` (issue 27 item 2: "`onboard`, `status` and
//! `doctor` know them"): the real Claude Code, Codex, Gemini CLI and OpenCode in a fresh HOME,
//! logged out, then logged in the ways each CLI records (Codex's own `login --with-api-key`,
//! Gemini CLI's `~/.gemini/.env`, OpenCode's `auth.json` in the shape recorded in
//! `tests/fixtures/opencode-1.18.33/README.md`, Claude Code's `ANTHROPIC_API_KEY`, recorded in
//! `tests/fixtures/claude-2.1.332/auth-status-api-key.json`); and a status command that hangs
//! does not hang `doctor` or `create`.

use crate::common;

use common::TestEnv;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A world whose four agent runtimes are the real CLIs, or `None` (skipped) when the test
/// environment has not installed Gemini CLI and OpenCode.
fn world() -> Option<TestEnv> {
    let (Some(gemini), Ok(opencode)) = (
        crate::gemini_e2e::gemini_bin(),
        std::env::var("IAPEER_TEST_OPENCODE_BIN"),
    ) else {
        eprintln!("skipped: IAPEER_TEST_GEMINI_BIN / IAPEER_TEST_OPENCODE_BIN not set");
        return None;
    };
    let mut env = TestEnv::new();
    env.set(
        "IAPEER_CLAUDE_BIN",
        &std::env::var("IAPEER_TEST_CLAUDE_BIN").expect("IAPEER_TEST_CLAUDE_BIN (scripts/test.sh)"),
    )
    .set("IAPEER_CODEX_BIN", &crate::codex::codex_bin())
    .set("IAPEER_GEMINI_BIN", &gemini)
    .set("IAPEER_OPENCODE_BIN", &opencode)
    .set("OPENCODE_DISABLE_MODELS_FETCH", "1")
    .set("OPENCODE_DISABLE_AUTOUPDATE", "1")
    // No provider key from the machine running the tests.
    .set("ANTHROPIC_API_KEY", "")
    .set("OPENAI_API_KEY", "")
    .set("GEMINI_API_KEY", "")
    .set("GOOGLE_API_KEY", "");
    Some(env)
}

/// `status --json`'s `logins`, as `runtime → (login, peers)`.
fn status_logins(env: &TestEnv) -> Vec<(String, String, Vec<String>)> {
    let (out, _) = env.fails(&["status", "--json"], 1);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    doc["logins"]
        .as_array()
        .unwrap_or_else(|| panic!("no logins in {out}"))
        .iter()
        .map(|l| {
            (
                l["runtime"].as_str().unwrap().to_string(),
                l["login"].as_str().unwrap().to_string(),
                l["peers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn doctor_status_and_create_say_which_agent_clis_are_not_logged_in() {
    let Some(mut env) = world() else { return };
    // Logged out: `create` warns (and makes the peer), with how to log in.
    for (name, rt, how) in [
        ("cc", "claude", "log in by running `claude` once"),
        ("cx", "codex", "log in with `codex login`"),
        ("gm", "gemini", "give the peers a GEMINI_API_KEY"),
        ("oc", "opencode", "log in with `opencode auth login`"),
    ] {
        let (out, err) = env.fails(&["create", name, "--runtime", rt, "--no-bootstrap"], 0);
        assert!(out.contains(&format!("created peer {name}")), "{out}");
        assert!(
            err.contains(&format!("warning: {rt} ("))
                && err.contains(
                    "is installed but not logged in: agents on it cannot answer until you"
                )
                && err.contains(how),
            "{rt}: {err}"
        );
    }
    // The daemon does not run: doctor and status exit 1, and say the logins all the same.
    let (out, _) = env.fails(&["doctor"], 1);
    for rt in ["claude", "codex", "gemini", "opencode"] {
        assert!(
            out.contains(&format!("warning: {rt} ("))
                && !out.contains(&format!("{rt} is logged in")),
            "{rt}: {out}"
        );
    }
    // `create` gives a peer every installed agent runtime as a fallback, the named one its
    // default: each mark names only the peer that runs on it by default (a fallback's login
    // is doctor's to tell).
    let (out, _) = env.fails(&["status"], 1);
    for (rt, how) in [
        ("claude", "log in by running `claude` once"),
        ("codex", "log in with `codex login`"),
        ("gemini", "give the peers a GEMINI_API_KEY"),
        ("opencode", "log in with `opencode auth login`"),
    ] {
        let peer = match rt {
            "claude" => "cc",
            "codex" => "cx",
            "gemini" => "gm",
            _ => "oc",
        };
        assert!(
            out.contains(&format!(
                "agent login: {rt} is NOT logged in — {peer} cannot answer until you {how}"
            )),
            "{rt}: {out}"
        );
    }
    let mut logins = status_logins(&env);
    logins.sort();
    assert_eq!(
        logins,
        [
            ("claude", "cc"),
            ("codex", "cx"),
            ("gemini", "gm"),
            ("opencode", "oc")
        ]
        .map(|(rt, peer)| (rt.to_string(), "out".to_string(), vec![peer.to_string()]))
    );
    let (out, _) = env.fails(&["doctor", "--json"], 1);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let check = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "agent-login:codex")
        .unwrap_or_else(|| panic!("{out}"))
        .clone();
    assert_eq!(check["level"], "warn", "{check}");
    assert!(
        check["fix"].as_str().unwrap().contains("codex login"),
        "{check}"
    );

    // Logged in, each the way its CLI records it (Claude Code: its key, below).
    codex_login(&env);
    let gemini = env.home.join(".gemini");
    std::fs::create_dir_all(&gemini).unwrap();
    std::fs::write(gemini.join(".env"), "GEMINI_API_KEY=not-a-real-key\n").unwrap();
    let auth = env.home.join(".local/share/opencode/auth.json");
    std::fs::create_dir_all(auth.parent().unwrap()).unwrap();
    std::fs::write(
        &auth,
        r#"{"anthropic": {"type": "api", "key": "sk-ant-not-a-real-key"}}"#,
    )
    .unwrap();
    let (out, _) = env.fails(&["doctor"], 1);
    for rt in ["codex", "gemini", "opencode"] {
        assert!(
            out.contains(&format!("agent login: {rt} is logged in")),
            "{rt}: {out}"
        );
    }
    assert!(out.contains("warning: claude ("), "{out}");
    let (out, _) = env.fails(&["status"], 1);
    assert!(
        out.contains("agent login: claude is NOT logged in — cc cannot"),
        "{out}"
    );
    assert_eq!(out.matches("NOT logged in").count(), 1, "{out}");

    env.set("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key");
    let (out, _) = env.fails(&["status"], 1);
    assert!(!out.contains("logged in"), "no mark when all are: {out}");
    assert!(status_logins(&env).iter().all(|(_, l, _)| l == "in"));
    let (out, _) = env.fails(&["doctor"], 1);
    assert!(out.contains("agent login: claude is logged in"), "{out}");
    let (_, err) = env.fails(
        &["create", "cc2", "--runtime", "claude", "--no-bootstrap"],
        0,
    );
    assert!(!err.contains("not logged in"), "{err}");
}

/// `status` remembers a login answer while nothing it depends on changes (issue 27: it asked
/// every CLI on every call), and a credential file the CLI writes or deletes changes it at once:
/// the real Codex behind a wrapper that counts its calls, logged in and out with its own
/// `login --with-api-key` and `logout`. `doctor` asks every time.
#[test]
fn status_remembers_a_login_until_its_credential_file_changes() {
    let mut env = TestEnv::new();
    let asked = counted_codex(&mut env);
    env.fails(&["create", "cx", "--runtime", "codex", "--no-bootstrap"], 0);
    // `create` left its answer for status: forgotten here, status asks for itself.
    std::fs::remove_file(env.root.join("cache/iapeer/logins.json")).unwrap();
    let before = asked();
    let mark = "agent login: codex is NOT logged in — cx cannot answer until you log in";
    let (out, _) = env.fails(&["status"], 1);
    assert!(out.contains(mark), "{out}");
    assert_eq!(asked(), before + 1);
    let (out, _) = env.fails(&["status"], 1);
    assert!(out.contains(mark), "{out}");
    assert_eq!(asked(), before + 1, "the second status asked codex again");

    codex_login(&env);
    let (out, _) = env.fails(&["status"], 1);
    assert!(!out.contains("logged in"), "logged in at once: {out}");
    assert_eq!(asked(), before + 2);
    env.fails(&["status"], 1);
    assert_eq!(asked(), before + 2);

    codex(&env, &["logout"], b"");
    let (out, _) = env.fails(&["status"], 1);
    assert!(out.contains(mark), "logged out at once: {out}");
    assert_eq!(asked(), before + 3);

    let (out, _) = env.fails(&["doctor"], 1);
    assert!(out.contains("warning: codex ("), "{out}");
    assert_eq!(asked(), before + 4, "doctor asks afresh");
}

/// Run the real Codex with `args` in `env`'s home, `stdin` written to it; it must succeed.
fn codex(env: &TestEnv, args: &[&str], stdin: &[u8]) {
    let mut c = Command::new(crate::codex::codex_bin())
        .args(args)
        .env("HOME", &env.home)
        .env_remove("CODEX_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(stdin).unwrap();
    assert!(c.wait().unwrap().success(), "codex {args:?}");
}

/// Log `env`'s Codex in with its own `login --with-api-key` (a made-up key).
fn codex_login(env: &TestEnv) {
    codex(env, &["login", "--with-api-key"], b"sk-not-a-real-key\n");
}

/// The real Codex behind a wrapper that counts its calls, as `env`'s Codex (logged out: no
/// `OPENAI_API_KEY`); the returned closure counts its `login status` calls so far.
fn counted_codex(env: &mut TestEnv) -> impl Fn() -> usize {
    let calls = env.dir.path().join("codex-calls");
    let wrapper = env.dir.path().join("codex");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            calls.display(),
            crate::codex::codex_bin()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    env.set("IAPEER_CODEX_BIN", wrapper.to_str().unwrap())
        .set("OPENAI_API_KEY", "");
    move || {
        std::fs::read_to_string(&calls)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == "login status")
            .count()
    }
}

/// `create`'s login warning takes the answer `status` remembers and leaves its own for
/// `status` and the next `create` (it asked the CLI afresh each time, seconds for some): the
/// first `create` asks Codex once, warns; the second `create` and `status` warn without
/// asking; a login (Codex's own `login --with-api-key`) is seen at once — no warning.
#[test]
fn create_warns_from_the_remembered_login_and_leaves_its_answer_for_status() {
    let mut env = TestEnv::new();
    let asked = counted_codex(&mut env);
    let warning = "warning: codex (";
    let create = |name: &str| {
        let (out, err) = env.fails(&["create", name, "--runtime", "codex", "--no-bootstrap"], 0);
        assert!(out.contains(&format!("created peer {name}")), "{out}");
        err
    };
    let err = create("cx1");
    assert!(err.contains(warning), "{err}");
    assert_eq!(asked(), 1);
    let err = create("cx2");
    assert!(err.contains(warning), "{err}");
    assert_eq!(asked(), 1, "the second create asked codex again");
    let (out, _) = env.fails(&["status"], 1);
    assert!(out.contains("agent login: codex is NOT logged in"), "{out}");
    assert_eq!(asked(), 1, "status asked codex again after create");

    codex_login(&env);
    let err = create("cx3");
    assert!(!err.contains(warning), "logged in at once: {err}");
    assert_eq!(asked(), 2);
}

/// A login status command that never answers (a wrapper whose child hangs, as npm's launchers
/// start the real CLI) is given `IAPEER_LOGIN_CHECK_SECS` and then ended with its child:
/// `doctor` says it could not tell, and `create` makes the peer without a warning.
#[test]
fn a_hung_login_check_does_not_hang_doctor_or_create() {
    let mut env = TestEnv::new();
    let bin = env.dir.path().join("opencode");
    let pid_file = env.dir.path().join("child.pid");
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\nsleep 600 &\necho $! > {}\nwait\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.set("IAPEER_OPENCODE_BIN", bin.to_str().unwrap())
        .set("IAPEER_LOGIN_CHECK_SECS", "2");
    let start = Instant::now();
    let (out, _) = env.fails(&["doctor"], 1);
    let took = start.elapsed();
    assert!(
        out.contains(
            "agent login: could not tell whether opencode is logged in (no answer within 2 s)"
        ),
        "{out}"
    );
    assert!(took < Duration::from_secs(12), "doctor took {took:?}");
    let child: u32 = common::read(&pid_file).trim().parse().unwrap();
    assert!(
        common::poll(Duration::from_secs(5), || !common::alive(child)),
        "the hung check's child {child} was left running"
    );
    let start = Instant::now();
    let (out, err) = env.fails(
        &["create", "oc", "--runtime", "opencode", "--no-bootstrap"],
        0,
    );
    assert!(out.contains("created peer oc"), "{out}");
    assert!(!err.contains("warning"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(12),
        "{:?}",
        start.elapsed()
    );
}

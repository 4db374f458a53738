//! An agent CLI installed after the daemon started (issue 30 item 1): the daemon looks for
//! Claude Code at every launch — its own PATH, the user's login shell's PATH, the installers'
//! folders — so it is found without a restart, and a refusal names every place looked at.
//! With the real Claude Code CLI (linked into the folder an installer would use) against the
//! loopback stand-in for the Anthropic API (the one mock: the cloud API cannot run here).

use crate::common;

use common::anthropic::{AnthropicStandIn, Reply};
use common::TestEnv;
use std::path::{Path, PathBuf};

fn real_claude() -> PathBuf {
    PathBuf::from(std::env::var("IAPEER_TEST_CLAUDE_BIN").unwrap_or_else(|_| {
        panic!("IAPEER_TEST_CLAUDE_BIN is not set: run scripts/test.sh (it installs Claude Code with scripts/setup-agents.sh)")
    }))
}

/// A world whose daemon and commands know no `IAPEER_CLAUDE_BIN`, whose login shell is bash,
/// on a machine with no agent CLI installed (its `PATH` and its login shell's `PATH` are
/// [`common::path_without_agent_clis`]), with an echo peer `ea` and the stand-in.
fn world() -> (TestEnv, AnthropicStandIn) {
    let mut env = TestEnv::new();
    env.set("IAPEER_CLAUDE_BIN", "");
    env.set("SHELL", "/bin/bash");
    env.set("PATH", &common::path_without_agent_clis());
    login_path_first(&env, None);
    std::fs::write(
        env.home.join(".claude.json"),
        "{\"hasCompletedOnboarding\": true}",
    )
    .unwrap();
    let api = AnthropicStandIn::start();
    api.script(|_| Reply::Text("ok".into()));
    env.ok(&["create", "ea", "--runtime", "echo"]);
    (env, api)
}

/// The world's `~/.bash_profile`: a line the profile prints, then `PATH` as
/// [`common::path_without_agent_clis`], with `first` before it (the installer's line that
/// makes its folder reachable). It replaces the `PATH` `/etc/profile` set, which may name a
/// folder with the machine's own Claude Code.
fn login_path_first(env: &TestEnv, first: Option<&Path>) {
    let path = match first {
        Some(dir) => format!("{}:{}", dir.display(), common::path_without_agent_clis()),
        None => common::path_without_agent_clis(),
    };
    std::fs::write(
        env.home.join(".bash_profile"),
        format!("echo a profile that talks\nexport PATH=\"{path}\"\n"),
    )
    .unwrap();
}

/// Install Claude Code into `dir` as an installer would (a link to the real CLI).
fn install_claude(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let at = dir.join("claude");
    std::os::unix::fs::symlink(real_claude(), &at).unwrap();
    at
}

/// `iapeer create <name> --runtime claude` from a shell whose PATH has `dir` first (the user
/// put the new CLI on PATH).
fn create_from_a_shell_with(env: &TestEnv, name: &str, dir: &Path) -> std::process::Output {
    let path = format!("{}:{}", dir.display(), common::path_without_agent_clis());
    env.cmd(&["create", name, "--runtime", "claude"])
        .env("PATH", path)
        .output()
        .unwrap()
}

/// [`create_from_a_shell_with`] `cb`, then the peer's stand-in settings.
fn create_claude_peer(env: &TestEnv, api: &AnthropicStandIn, dir: &Path) -> std::process::Output {
    let out = create_from_a_shell_with(env, "cb", dir);
    env.launch_env(
        "cb",
        "claude",
        &format!(
            "ANTHROPIC_BASE_URL={}\nANTHROPIC_API_KEY=sk-ant-standin-key\nIS_SANDBOX=1\n",
            api.url()
        ),
    );
    out
}

fn send_to_cb(env: &TestEnv) -> std::process::Output {
    env.run(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "hello claude",
        "--topic",
        "t1",
    ])
}

/// The PATH of the live claude session's process.
fn session_path(env: &TestEnv) -> String {
    let list = env.control(r#"{"op":"list"}"#);
    let pid = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["identity"] == "claude-cb")
        .and_then(|s| s["pid"].as_u64())
        .unwrap_or_else(|| panic!("no claude-cb session: {list}"));
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(b"PATH="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_default()
}

/// The daemon's view of `runtime` in `status --json`.
fn status_agent(env: &TestEnv, runtime: &str) -> serde_json::Value {
    let out = env.ok(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["daemon"]["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["runtime"] == runtime).cloned())
        .unwrap_or_else(|| panic!("no agent {runtime} in status --json: {out}"))
}

fn assert_woke(env: &TestEnv, out: &std::process::Output) {
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).trim() == "delivered to cb (claude), woke",
        "{}\n{}",
        common::describe(out),
        env.diagnostics()
    );
}

#[test]
fn claude_installed_after_the_daemon_started_on_the_login_shells_path_is_found() {
    let (mut env, api) = world();
    let agent_bin = env.dir.path().join("agent-bin");
    login_path_first(&env, Some(&agent_bin));
    env.start_daemon();
    // Installed now, reachable only through the login shell's PATH (the daemon's PATH
    // predates it).
    let claude = install_claude(&agent_bin);
    let out = create_claude_peer(&env, &api, &agent_bin);
    assert!(out.status.success(), "{}", common::describe(&out));
    let out = send_to_cb(&env);
    assert_woke(&env, &out);
    // The folder it was found in comes first on its PATH.
    let path = session_path(&env);
    assert!(
        path.starts_with(&format!("{}:", agent_bin.display())),
        "{path}"
    );
    assert_eq!(
        status_agent(&env, "claude")["path"],
        claude.display().to_string()
    );
    let status = env.ok(&["status"]);
    assert!(
        status.contains(&format!("  claude: {}\n", claude.display())),
        "{status}"
    );
    // What the daemon finds counts for create, although this shell's own login shell (sh,
    // which reads no ~/.bash_profile) does not find it.
    let out = env
        .cmd(&["create", "cd", "--runtime", "claude"])
        .env("SHELL", "/bin/sh")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
}

#[test]
fn claude_installed_after_the_daemon_started_in_an_installers_folder_is_found() {
    let (mut env, api) = world();
    env.start_daemon();
    let dir = env.home.join(".npm-global/bin");
    install_claude(&dir);
    let out = create_claude_peer(&env, &api, &dir);
    assert!(out.status.success(), "{}", common::describe(&out));
    let out = send_to_cb(&env);
    assert_woke(&env, &out);
    assert!(
        session_path(&env).starts_with(&format!("{}:", dir.display())),
        "{}",
        session_path(&env)
    );
}

#[test]
fn claude_the_daemon_cannot_find_is_refused_naming_every_place_it_looked_at() {
    let (mut env, api) = world();
    let dir = env.dir.path().join("elsewhere");
    install_claude(&dir);
    // Created while no daemon runs: judged with the CLI's own view (it finds the program).
    let out = create_claude_peer(&env, &api, &dir);
    assert!(out.status.success(), "{}", common::describe(&out));
    env.start_daemon();
    let out = send_to_cb(&env);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{}", common::describe(&out));
    let home = env.home.display().to_string();
    for place in [
        "IAPEER_CLAUDE_BIN (not set)".to_string(),
        "the daemon's PATH (".to_string(),
        "the PATH of the login shell /bin/bash (".to_string(),
        format!("{home}/.local/bin"),
        format!("{home}/.npm-global/bin"),
        "/usr/local/bin".to_string(),
    ] {
        assert!(err.contains(&place), "{place:?} missing from: {err}");
    }
    assert!(
        err.contains("claude is not installed — looked at, in order: IAPEER_CLAUDE_BIN (not set); the daemon's PATH ("),
        "{err}"
    );

    // status and doctor judge with the daemon's view.
    let claude = status_agent(&env, "claude");
    assert!(claude["path"].is_null(), "{claude}");
    let looked: Vec<&str> = claude["looked"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(looked[0], "IAPEER_CLAUDE_BIN (not set)", "{claude}");
    assert!(
        looked.contains(&format!("{home}/.local/bin").as_str()),
        "{claude}"
    );
    let status = env.ok(&["status"]);
    assert!(
        status.contains("agent programs, as the daemon finds them:\n  claude: not found — looked at, in order: IAPEER_CLAUDE_BIN (not set); "),
        "{status}"
    );
    let (out, _) = env.fails(&["doctor"], 1);
    assert!(
        out.contains("problem: cb declares runtime claude but the daemon cannot find its program — looked at, in order: IAPEER_CLAUDE_BIN (not set); the daemon's PATH ("),
        "{out}"
    );
    // create, with a daemon running, judges with its view: what only the CLI finds is refused.
    let out = create_from_a_shell_with(&env, "cc", &dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(1)
            && err.contains("iapeer create: claude is not installed where the running daemon can find it — looked at, in order: IAPEER_CLAUDE_BIN (not set); the daemon's PATH ("),
        "{}",
        common::describe(&out)
    );
    assert!(!env.peer_dir("cc").exists(), "no folder is left behind");
}

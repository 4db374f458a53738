//! Whether the agent CLIs on this machine are logged in (spec 08 §1, `onboard` step 2), asked
//! through each CLI's own status command — never read from its screen or its files:
//!
//! - Claude Code: `claude auth status` prints JSON with `"loggedIn": true|false` and exits 0
//!   when logged in, 1 when not (an `ANTHROPIC_API_KEY` in the environment counts). Recorded
//!   from 2.1.332: `tests/fixtures/claude-2.1.332/auth-status-*.json`.
//! - Codex: `codex login status` exits 0 when logged in (ChatGPT or a saved API key), 1 when
//!   not, saying so on stderr (stdout stays empty). Recorded from 0.171.0:
//!   `tests/fixtures/codex-0.171.0/login-status-*.stderr`.
//! - OpenCode: `opencode auth list` counts its saved credentials and the providers' keys in
//!   the environment ([`read_opencode`]; recorded from 1.18.33).
//! - Gemini CLI has no status command: its settings, credential files and environment are
//!   read as it reads them ([`super::gemini_login`]).
//!
//! This module is the one place that answers "is runtime X logged in for this user"
//! ([`agent`] then [`check`], or [`check_each`]): `onboard` (step 2), `doctor` (a line per installed
//! agent CLI), `status` (a mark where a peer's runtime is not) and `create` (a warning) ask
//! it. A status command is bounded ([`timeout`], `IAPEER_LOGIN_CHECK_SECS`): one that does not
//! answer in time is killed with its process group, and the answer is unknown. It runs in the
//! home folder. `status` takes an answer remembered while nothing it depends on changed
//! ([`super::login_memo`]); `doctor` asks afresh.
//!
//! The check runs in the asking command's own environment: a key kept only in a peer's
//! `launch.env`, or a Codex model provider with its own `env_key`, is not seen, so the result
//! is a warning with advice, never a refusal.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::runtime_table::{self, LoginAnswer, LoginCheck};

/// How long a status command may take before its answer counts as unknown:
/// `IAPEER_LOGIN_CHECK_SECS` (default 15 s; a value that is not a positive number of seconds
/// counts as the default).
pub fn timeout() -> Duration {
    let var = &crate::config::vars::IAPEER_LOGIN_CHECK_SECS;
    var.parse_duration(std::env::var(var.name).ok().as_deref(), &mut Vec::new())
}

/// An agent runtime's CLI found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The runtime name (`claude` or `codex`).
    pub runtime: &'static str,
    /// Its binary, as the adapter finds it (`IAPEER_CLAUDE_BIN` / `IAPEER_CODEX_BIN`, PATH).
    pub bin: PathBuf,
}

/// What an agent CLI says of its login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// Logged in.
    In,
    /// Not logged in.
    Out,
    /// No answer that says either (the reason: timeout, cannot run, unexpected output).
    Unknown(String),
}

/// The agent CLIs with a login check installed here, in the table's preference order
/// (claude, then codex).
pub fn installed_agents() -> Vec<Agent> {
    runtime_table::located()
        .filter(|r| r.login.is_some())
        .filter_map(|r| {
            let bin = crate::runtime::agent_program::locate(r.name).program?;
            Some(Agent {
                runtime: r.name,
                bin,
            })
        })
        .collect()
}

/// The agent CLI of `runtime` when it has a login check and its program is found here (as
/// [`installed_agents`] finds it); `None` otherwise.
pub fn agent(runtime: &str) -> Option<Agent> {
    installed_agents()
        .into_iter()
        .find(|a| a.runtime == runtime)
}

/// [`check`] each of `agents` at once, each on a thread of its own (so the whole takes about
/// the slowest one, at most [`timeout`]), in their order.
pub fn check_each(agents: Vec<Agent>) -> Vec<(Agent, Login)> {
    let asked: Vec<_> = agents
        .into_iter()
        .map(|a| {
            let b = a.clone();
            (a, std::thread::spawn(move || check(&b)))
        })
        .collect();
    asked
        .into_iter()
        .map(|(a, t)| {
            let login = t
                .join()
                .unwrap_or_else(|_| Login::Unknown("the check panicked".into()));
            (a, login)
        })
        .collect()
}

/// The advice for a logged-out `runtime`: the end of a sentence starting "agents on it cannot
/// answer until you" (its row's; `log in` for a runtime without a login check).
pub fn how_to_log_in(runtime: &str) -> &'static str {
    login_check(runtime).map_or("log in", |c| c.advice)
}

/// A runtime's login check: its row's ([`installed_agents`] gives only runtimes with one).
fn login_check(runtime: &str) -> Option<LoginCheck<'static>> {
    runtime_table::get(runtime).and_then(|r| r.login)
}

/// The arguments of a runtime's status command (none for a runtime without a login check).
pub fn status_args(runtime: &str) -> &'static [&'static str] {
    login_check(runtime).map_or(&[], |c| c.args)
}

/// Read Claude Code's `auth status` answer (pure): the JSON's `loggedIn` when it parses,
/// else the exit status.
pub fn read_claude(exit: Option<i32>, stdout: &str) -> Login {
    let parsed = serde_json::from_str::<serde_json::Value>(stdout)
        .ok()
        .and_then(|v| v["loggedIn"].as_bool());
    match (parsed, exit) {
        (Some(true), _) => Login::In,
        (Some(false), _) => Login::Out,
        (None, Some(0)) => Login::In,
        (None, Some(1)) => Login::Out,
        (None, other) => Login::Unknown(format!("`claude auth status` ended with {other:?}")),
    }
}

/// Read Codex's `login status` answer (pure): exit 0 logged in, 1 not.
pub fn read_codex(exit: Option<i32>) -> Login {
    match exit {
        Some(0) => Login::In,
        Some(1) => Login::Out,
        other => Login::Unknown(format!("`codex login status` ended with {other:?}")),
    }
}

/// Read OpenCode's `auth list` answer (pure; colour codes allowed): logged in when it counts
/// a saved credential or a provider's key in the environment (`└  1 credentials`,
/// `└  1 environment variable`). Recorded from 1.18.33:
/// `tests/fixtures/opencode-1.18.33/auth-list-*.txt` (it exits 0 either way).
pub fn read_opencode(exit: Option<i32>, stdout: &str) -> Login {
    let counted = |what: &str| {
        stdout.lines().any(|l| {
            l.split_whitespace()
                .collect::<Vec<_>>()
                .windows(2)
                .any(|w| w[1].starts_with(what) && w[0].parse::<u32>().is_ok_and(|n| n > 0))
        })
    };
    match exit {
        Some(0) if counted("credential") || counted("environment") => Login::In,
        Some(0) if stdout.contains("credentials") => Login::Out,
        other => Login::Unknown(format!("`opencode auth list` ended with {other:?}")),
    }
}

/// Ask `agent` (runs its status command, at most [`timeout`], or reads its files); unknown
/// for a runtime without a login check.
pub fn check(agent: &Agent) -> Login {
    check_in(
        agent,
        crate::paths::home_dir().as_deref(),
        &|k| std::env::var(k).ok(),
        timeout(),
    )
}

/// [`check`] for a user whose home is `home` and environment `env` (read by a check without
/// a command; a status command runs in this process's environment), waiting at most `limit`.
fn check_in(
    agent: &Agent,
    home: Option<&std::path::Path>,
    env: &dyn Fn(&str) -> Option<String>,
    limit: Duration,
) -> Login {
    let Some(login) = login_check(agent.runtime) else {
        return Login::Unknown(format!("{} has no login check", agent.runtime));
    };
    if login.answer == LoginAnswer::GeminiSettings {
        let Some(home) = home else {
            return Login::Unknown("no home folder (HOME is not set)".into());
        };
        return super::gemini_login::check(home, env);
    }
    // A group of its own: a CLI behind a wrapper (npm's launchers) is ended whole on timeout.
    let mut command = Command::new(&agent.bin);
    // In the home folder: Claude Code and Codex also read the folder they run in (its
    // `.claude/`, `.codex/`), so the answer would depend on where the asking command was
    // typed (recorded with strace; `login_memo` keys an answer on the home's files only).
    if let Some(home) = home.filter(|h| h.is_dir()) {
        command.current_dir(home);
    }
    let mut child = match command
        .args(login.args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Login::Unknown(format!("cannot run {}: {e}", agent.bin.display())),
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                if let Ok(pid) = i32::try_from(child.id()) {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.kill();
                let _ = child.wait();
                return Login::Unknown(format!("no answer within {} s", limit.as_secs_f32()));
            }
            Err(e) => return Login::Unknown(e.to_string()),
        }
    };
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        use std::io::Read;
        let _ = out.read_to_string(&mut stdout);
    }
    match login.answer {
        LoginAnswer::LoggedInJson => read_claude(status.code(), &stdout),
        LoginAnswer::ExitStatus => read_codex(status.code()),
        LoginAnswer::CredentialCount => read_opencode(status.code(), &stdout),
        LoginAnswer::GeminiSettings => unreachable!("answered above without a command"),
    }
}

/// The warning for an agent that is not logged in, with what to do (one line).
pub fn advice(agent: &Agent) -> String {
    format!(
        "{} ({}) is installed but not logged in: agents on it cannot answer until you {}",
        agent.runtime,
        agent.bin.display(),
        how_to_log_in(agent.runtime)
    )
}

/// The command line that asks `agent` (its program and status command's arguments).
fn ask_line(agent: &Agent) -> String {
    format!(
        "{} {}",
        agent.bin.display(),
        status_args(agent.runtime).join(" ")
    )
    .trim_end()
    .to_string()
}

/// A line per agent CLI saying what its login check found (`None`: not asked, what would be
/// asked), or that no agent CLI with a login is installed (pure; `onboard` step 2, `doctor`).
pub fn lines(logins: &[(Agent, Option<Login>)]) -> Vec<String> {
    if logins.is_empty() {
        let with_login: Vec<&str> = runtime_table::located()
            .filter(|r| r.login.is_some())
            .map(|r| r.name)
            .collect();
        return vec![format!(
            "agent logins: nothing to check — no agent CLI with a login ({}) is installed",
            with_login.join(" or ")
        )];
    }
    logins
        .iter()
        .map(|(agent, login)| match login {
            None => format!(
                "check whether {} is logged in (`{}`)",
                agent.runtime,
                ask_line(agent)
            ),
            Some(Login::In) => format!("agent login: {} is logged in", agent.runtime),
            Some(Login::Out) => format!("warning: {}", advice(agent)),
            Some(Login::Unknown(why)) => format!(
                "agent login: could not tell whether {} is logged in ({why}); run `{}` to see",
                agent.runtime,
                ask_line(agent)
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> String {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(path),
        )
        .unwrap()
    }

    /// The recorded answers (exit statuses in the fixtures' README).
    #[test]
    fn recorded_answers_are_read() {
        assert_eq!(
            read_claude(
                Some(1),
                &fixture("claude-2.1.332/auth-status-logged-out.json")
            ),
            Login::Out
        );
        assert_eq!(
            read_claude(Some(0), &fixture("claude-2.1.332/auth-status-api-key.json")),
            Login::In
        );
        // The JSON decides over the status; without it, the status does.
        assert_eq!(
            read_claude(
                Some(0),
                &fixture("claude-2.1.332/auth-status-logged-out.json")
            ),
            Login::Out
        );
        assert_eq!(read_claude(Some(1), "garbage"), Login::Out);
        assert!(matches!(read_claude(None, ""), Login::Unknown(_)));
        assert!(fixture("codex-0.171.0/login-status-logged-out.stderr").contains("Not logged in"));
        assert_eq!(read_codex(Some(1)), Login::Out);
        assert_eq!(read_codex(Some(0)), Login::In);
        assert!(matches!(read_codex(Some(2)), Login::Unknown(_)));
        let oc = |case: &str| fixture(&format!("opencode-1.18.33/auth-list-{case}.txt"));
        assert_eq!(read_opencode(Some(0), &oc("none")), Login::Out);
        assert_eq!(read_opencode(Some(0), &oc("env")), Login::In);
        assert_eq!(read_opencode(Some(0), &oc("credential")), Login::In);
        assert!(matches!(
            read_opencode(Some(1), &oc("credential")),
            Login::Unknown(_)
        ));
        assert!(matches!(
            read_opencode(Some(0), "garbage"),
            Login::Unknown(_)
        ));
    }

    /// Gemini CLI has no status command: its files in HOME decide (the rules are
    /// `gemini_login`'s; here, that `check` reaches them with a temporary HOME).
    #[test]
    fn gemini_is_checked_from_its_files() {
        let home = tempfile::tempdir().unwrap();
        let agent = Agent {
            runtime: "gemini",
            bin: home.path().join("gemini"),
        };
        let no_env = |_: &str| None;
        let ask = || check_in(&agent, Some(home.path()), &no_env, timeout());
        assert_eq!(status_args("gemini"), &[] as &[&str]);
        assert_eq!(ask(), Login::Out);
        let settings = home.path().join(".gemini/settings.json");
        std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
        std::fs::write(
            &settings,
            r#"{"security":{"auth":{"selectedType":"oauth-personal"}}}"#,
        )
        .unwrap();
        assert_eq!(ask(), Login::Out);
        assert!(advice(&agent).contains("GEMINI_API_KEY"));
        std::fs::write(home.path().join(".gemini/oauth_creds.json"), "{}").unwrap();
        assert_eq!(ask(), Login::In);
        assert!(matches!(
            check_in(&agent, None, &no_env, timeout()),
            Login::Unknown(_)
        ));
    }

    /// A status command that does not answer (here a wrapper whose child hangs, as npm's
    /// launchers start the real CLI) is ended with its whole group at the limit: unknown.
    #[test]
    fn a_hung_status_command_is_ended_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("opencode");
        let pid_file = dir.path().join("child.pid");
        crate::testkit::write_program(
            &bin,
            &format!(
                "#!/bin/sh\nsleep 600 &\necho $! > {}\nwait\n",
                pid_file.display()
            ),
        );
        let agent = Agent {
            runtime: "opencode",
            bin,
        };
        let start = Instant::now();
        let login = check_in(&agent, None, &|_| None, Duration::from_millis(700));
        assert_eq!(login, Login::Unknown("no answer within 0.7 s".into()));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let child: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let gone = || {
            std::fs::read_to_string(format!("/proc/{child}/stat")).map_or(true, |st| {
                st.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !gone() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            gone(),
            "the status command's child {child} was left running"
        );
        let lines = lines(&[(agent, Some(login))]);
        assert!(
            lines[0].starts_with("agent login: could not tell whether opencode is logged in (no answer within 0.7 s); run `"),
            "{lines:?}"
        );
    }

    #[test]
    fn the_advice_is_the_rows() {
        assert_eq!(how_to_log_in("echo"), "log in");
        assert!(how_to_log_in("codex").contains("codex login"));
    }

    #[test]
    fn a_status_command_is_run_and_read() {
        let (dir, bin) = crate::testkit::temp_path("codex");
        crate::testkit::write_program(
            &bin,
            "#!/bin/sh\n[ \"$*\" = 'login status' ] || exit 3\nexit 1\n",
        );
        let agent = Agent {
            runtime: "codex",
            bin,
        };
        assert_eq!(check(&agent), Login::Out);
        assert!(advice(&agent).contains("codex login"));
        let missing = Agent {
            runtime: "claude",
            bin: dir.path().join("nope"),
        };
        assert!(matches!(check(&missing), Login::Unknown(_)));
    }
}

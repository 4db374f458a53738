//! Whether the agent CLIs on this machine are logged in (spec 08 §1, `onboard` step 2), asked
//! through each CLI's own status command — never read from its screen or its files:
//!
//! - Claude Code: `claude auth status` prints JSON with `"loggedIn": true|false` and exits 0
//!   when logged in, 1 when not (an `ANTHROPIC_API_KEY` in the environment counts). Recorded
//!   from 2.1.332: `tests/fixtures/claude-2.1.332/auth-status-*.json`.
//! - Codex: `codex login status` exits 0 when logged in (ChatGPT or a saved API key), 1 when
//!   not, saying so on stderr (stdout stays empty). Recorded from 0.171.0:
//!   `tests/fixtures/codex-0.171.0/login-status-*.stderr`.
//!
//! The check runs in onboard's own environment: a key kept only in a peer's `launch.env`, or a
//! Codex model provider with its own `env_key`, is not seen, so the result is a warning with
//! advice, never a refusal.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::runtime_table::{self, LoginAnswer, LoginCheck};

/// How long a status command may take before its answer counts as unknown.
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(15);

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

/// Ask `agent` (runs its status command, at most [`STATUS_TIMEOUT`]); unknown for a runtime
/// without a login check.
pub fn check(agent: &Agent) -> Login {
    let Some(login) = login_check(agent.runtime) else {
        return Login::Unknown(format!("{} has no login check", agent.runtime));
    };
    let mut child = match Command::new(&agent.bin)
        .args(login.args)
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
            Ok(None) if start.elapsed() < STATUS_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Login::Unknown(format!("no answer within {} s", STATUS_TIMEOUT.as_secs()));
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
    }
}

/// The warning for an agent that is not logged in, with what to do (one line).
pub fn advice(agent: &Agent) -> String {
    let how = login_check(agent.runtime).map_or("log in", |c| c.advice);
    format!(
        "{} ({}) is installed but not logged in: agents on it cannot answer until you {how}",
        agent.runtime,
        agent.bin.display()
    )
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
    }

    #[test]
    fn a_status_command_is_run_and_read() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("codex");
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

//! The environment of a session's child (spec 04 §1 "Spawning", spec 01 §6): built in a fixed
//! order where later steps win, as a pure function.

use std::collections::BTreeMap;
use std::path::Path;

use crate::launch_env::LaunchEnv;
use crate::names::Identity;

/// Variables removed from every session: a Claude started from inside another Claude would
/// behave as its sub-session (no transcript of its own); multiplexer variables would make the
/// TUI think it runs inside tmux/screen.
fn is_scrubbed(key: &str) -> bool {
    key.starts_with("CLAUDE_CODE_") || matches!(key, "CLAUDECODE" | "TMUX" | "TMUX_PANE" | "STY")
}

/// A PATH for children when neither `launch.env` nor the daemon has one.
pub fn default_path(home: Option<&Path>) -> String {
    let mut dirs = Vec::new();
    if let Some(h) = home {
        dirs.push(h.join(".local/bin").display().to_string());
    }
    dirs.extend(
        [
            "/usr/local/bin",
            "/opt/homebrew/bin",
            "/usr/bin",
            "/bin",
            "/usr/sbin",
            "/sbin",
        ]
        .map(String::from),
    );
    dirs.join(":")
}

/// Inputs of [`session_env`].
pub struct EnvInput<'a> {
    /// The daemon's own environment.
    pub inherited: Vec<(String, String)>,
    /// The peer's `launch.env` for this runtime.
    pub launch: &'a LaunchEnv,
    /// The session's identity.
    pub identity: &'a Identity,
    /// The session token (`IAPEER_TOKEN`).
    pub token: &'a str,
    /// The storage root, exported as `IAPEER_ROOT` so children reach the same daemon.
    pub root: &'a Path,
    /// The daemon's bound loopback port, exported as `IAPEER_PORT` (agents' MCP configs
    /// expand it).
    pub port: u16,
    /// The home folder, for the default PATH.
    pub home: Option<&'a Path>,
    /// Runtime-specific variables, set last.
    pub extra: &'a [(String, String)],
}

/// Build the child's complete environment: daemon env (minus the hygiene removals) →
/// `launch.env` extras → identity variables, token, `IAPEER_ROOT`, `IAPEER_PORT` → PATH
/// (launch.env's, else inherited, else [`default_path`]) → `TERM=xterm-256color`,
/// `COLORTERM=truecolor` → runtime extras. The removals (`CLAUDE_CODE_*`, `CLAUDECODE`,
/// `TMUX`, `TMUX_PANE`, `STY`) apply to what the daemon inherited, so a `launch.env` can still
/// set such a variable deliberately.
pub fn session_env(input: &EnvInput) -> Vec<(String, String)> {
    // Hygiene applies to what the daemon inherited; launch.env may set these on purpose.
    let mut env: BTreeMap<String, String> = input
        .inherited
        .iter()
        .filter(|(k, _)| !is_scrubbed(k))
        .cloned()
        .collect();
    let inherited_path = env.get("PATH").cloned().filter(|p| !p.is_empty());
    let mut launch_path = None;
    for (k, v) in &input.launch.vars {
        if k == "PATH" {
            launch_path = Some(v.clone());
        }
        env.insert(k.clone(), v.clone());
    }
    env.insert(
        "PEER_PERSONALITY".into(),
        input.identity.personality.clone(),
    );
    env.insert("PEER_RUNTIME".into(), input.identity.runtime.clone());
    env.insert("PEER_IDENTITY".into(), input.identity.to_string());
    env.insert("IAPEER_TOKEN".into(), input.token.to_string());
    env.insert("IAPEER_ROOT".into(), input.root.display().to_string());
    env.insert("IAPEER_PORT".into(), input.port.to_string());
    let path = launch_path
        .or(inherited_path)
        .unwrap_or_else(|| default_path(input.home));
    env.insert("PATH".into(), path);
    env.insert("TERM".into(), "xterm-256color".into());
    env.insert("COLORTERM".into(), "truecolor".into());
    for (k, v) in input.extra {
        env.insert(k.clone(), v.clone());
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(env: &'a [(String, String)], k: &str) -> Option<&'a str> {
        env.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn order_hygiene_and_identity() {
        let launch = LaunchEnv {
            vars: vec![
                ("FOO".into(), "from-launch".into()),
                ("CLAUDE_CODE_MAX_OUTPUT_TOKENS".into(), "999".into()),
                ("TERM".into(), "dumb".into()),
            ],
            ..LaunchEnv::default()
        };
        let id = Identity::parse("claude-bob").unwrap();
        let inherited = vec![
            ("FOO".into(), "from-daemon".into()),
            ("PATH".into(), "/daemon/bin".into()),
            ("CLAUDECODE".into(), "1".into()),
            ("CLAUDE_CODE_ENTRYPOINT".into(), "cli".into()),
            ("TMUX".into(), "/tmp/tmux".into()),
            ("PEER_IDENTITY".into(), "claude-other".into()),
        ];
        let extra = vec![("CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN".into(), "1".into())];
        let env = session_env(&EnvInput {
            inherited,
            launch: &launch,
            identity: &id,
            token: "tok",
            root: Path::new("/r"),
            port: 4242,
            home: None,
            extra: &extra,
        });
        assert_eq!(get(&env, "FOO"), Some("from-launch"));
        assert_eq!(get(&env, "PATH"), Some("/daemon/bin"));
        assert_eq!(get(&env, "PEER_IDENTITY"), Some("claude-bob"));
        assert_eq!(get(&env, "PEER_PERSONALITY"), Some("bob"));
        assert_eq!(get(&env, "PEER_RUNTIME"), Some("claude"));
        assert_eq!(get(&env, "IAPEER_TOKEN"), Some("tok"));
        assert_eq!(get(&env, "IAPEER_ROOT"), Some("/r"));
        assert_eq!(get(&env, "IAPEER_PORT"), Some("4242"));
        assert_eq!(get(&env, "CLAUDECODE"), None);
        assert_eq!(get(&env, "CLAUDE_CODE_ENTRYPOINT"), None);
        assert_eq!(get(&env, "TMUX"), None);
        assert_eq!(
            get(&env, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"),
            Some("999"),
            "deliberate launch.env value"
        );
        assert_eq!(
            get(&env, "TERM"),
            Some("xterm-256color"),
            "TERM is always ours"
        );
        assert_eq!(get(&env, "COLORTERM"), Some("truecolor"));
        assert_eq!(
            get(&env, "CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN"),
            Some("1"),
            "extras last"
        );
    }

    #[test]
    fn path_falls_back_from_launch_env_to_inherited_to_default() {
        let id = Identity::parse("echo-a").unwrap();
        let launch = LaunchEnv {
            vars: vec![("PATH".into(), "/mine".into())],
            ..LaunchEnv::default()
        };
        let mk = |launch: &LaunchEnv, inherited: Vec<(String, String)>| {
            session_env(&EnvInput {
                inherited,
                launch,
                identity: &id,
                token: "t",
                root: Path::new("/r"),
                port: 8765,
                home: Some(Path::new("/home/me")),
                extra: &[],
            })
        };
        let env = mk(&launch, vec![("PATH".into(), "/daemon".into())]);
        assert_eq!(get(&env, "PATH"), Some("/mine"));
        let env = mk(&LaunchEnv::default(), vec![]);
        let path = get(&env, "PATH").unwrap();
        assert!(
            path.starts_with("/home/me/.local/bin:/usr/local/bin"),
            "{path}"
        );
    }
}

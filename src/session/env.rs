//! The environment of a session's child (spec 04 §1 "Spawning", spec 01 §6): built in a fixed
//! order where later steps win, as a pure function.

use std::collections::BTreeMap;
use std::path::Path;

use crate::launch_env::LaunchEnv;
use crate::names::Identity;

/// Variables removed from every session: a Claude started from inside another Claude would
/// behave as its sub-session (no transcript of its own); everything that describes the
/// terminal or terminal session the daemon was started from ([`describes_parent_terminal`]);
/// the daemon's own [`BEARER_VAR`], a secret a session gets only when the launch hands it
/// one ([`EnvInput::bearer`]); and `IAPEER_FEDERATION_URL`, which carries the Redis password.
fn is_scrubbed(key: &str) -> bool {
    key.starts_with("CLAUDE_CODE_")
        || key == "CLAUDECODE"
        || key == BEARER_VAR
        || key == crate::config::vars::IAPEER_FEDERATION_URL.name
        || describes_parent_terminal(key)
}

/// `IAPEER_BEARER_TOKEN`: the bearer of the daemon's HTTP gate (the daemon reads it from its
/// own environment; a fleet client such as the telegram runtime sends it).
pub const BEARER_VAR: &str = "IAPEER_BEARER_TOKEN";

/// Exact names of variables that describe the daemon's own terminal: its size (`COLUMNS`,
/// `LINES` would override the session's 220×50 pty in every curses/TUI program), the
/// terminal program and window, the multiplexer (tmux, screen, zellij) and the login tty.
/// `TERM` and `COLORTERM` are not here: iapeer sets both for the pty it made.
/// The colour switches are not here either: see [`COLOUR_SWITCHES`].
const PARENT_TERMINAL_VARS: [&str; 17] = [
    "COLUMNS",
    "LINES",
    "TERMCAP",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "TERM_SESSION_ID",
    "TERMINAL_EMULATOR",
    "LC_TERMINAL",
    "LC_TERMINAL_VERSION",
    "WINDOWID",
    "VTE_VERSION",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "WINDOW",
    "SSH_TTY",
    "ZELLIJ",
];

/// Name prefixes of the same kind, set by one terminal program each (its window, pane,
/// profile or control socket).
const PARENT_TERMINAL_PREFIXES: [&str; 9] = [
    "ITERM_",
    "KITTY_",
    "WT_",
    "WEZTERM_",
    "ALACRITTY_",
    "KONSOLE_",
    "GNOME_TERMINAL_",
    "ZELLIJ_",
    "VSCODE_",
];

/// True for a variable that describes the terminal or terminal session of the process that
/// started the daemon, which a session's child must not inherit: the child runs on iapeer's
/// own pty (or pipes), not on that terminal, and would size, colour or integrate itself for
/// the wrong one (e.g. `COLUMNS=40` makes a TUI draw 40 columns in a 220-column pty).
pub fn describes_parent_terminal(key: &str) -> bool {
    PARENT_TERMINAL_VARS.contains(&key)
        || PARENT_TERMINAL_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// Conventions that turn a program's colours off (or force a level): `NO_COLOR`,
/// `FORCE_COLOR` (`0` turns colours off in Node's `chalk`/`supports-color`), `CLICOLOR`,
/// `CLICOLOR_FORCE`, and the CI markers `CI` and `CONTINUOUS_INTEGRATION` (with `CI` set,
/// `supports-color` answers "no colours" before it looks at `COLORTERM`). The pty is
/// iapeer's terminal, not the user's, and iapeer reads the screen by its attributes: a
/// composer placeholder is dim, typed text is not (spec 05 §7). With `NO_COLOR=1` or
/// `CI=true` (which CI runners set) Claude Code 2.1.332 draws its placeholders ("Press up to
/// edit queued messages", "Resend your message to try again") plain, every placeholder was
/// read as a draft, and every message to a busy agent was held as if a human were typing.
/// So these are removed from the child's environment, inherited or from `launch.env` alike,
/// as `TERM` is always ours.
pub const COLOUR_SWITCHES: [&str; 6] = [
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "CI",
    "CONTINUOUS_INTEGRATION",
];

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
    /// What the session gets as `IAPEER_BEARER_TOKEN` (the daemon's own value is never
    /// inherited): `None`, nothing (unless its `launch.env` sets one).
    pub bearer: Option<&'a str>,
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
/// `launch.env` extras → identity variables, token, the handed bearer, `IAPEER_ROOT`,
/// `IAPEER_PORT` → PATH
/// (launch.env's, else inherited, else [`default_path`]) → `TERM=xterm-256color`,
/// `COLORTERM=truecolor`, minus the [`COLOUR_SWITCHES`] → runtime extras. The removals (`CLAUDE_CODE_*`, `CLAUDECODE` and
/// the variables of [`describes_parent_terminal`]) apply to what the daemon inherited, so a
/// `launch.env` can still set such a variable deliberately.
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
    // The variable the original tool's Codex config names as its bearer (issue 11 item 1).
    env.insert("IAPEER_BEARER".into(), input.token.to_string());
    if let Some(b) = input.bearer {
        env.insert(BEARER_VAR.into(), b.to_string());
    }
    env.insert("IAPEER_ROOT".into(), input.root.display().to_string());
    env.insert("IAPEER_PORT".into(), input.port.to_string());
    let path = launch_path
        .or(inherited_path)
        .unwrap_or_else(|| default_path(input.home));
    env.insert("PATH".into(), path);
    env.insert("TERM".into(), "xterm-256color".into());
    env.insert("COLORTERM".into(), "truecolor".into());
    for k in COLOUR_SWITCHES {
        env.remove(k);
    }
    for (k, v) in input.extra {
        env.insert(k.clone(), v.clone());
    }
    env.into_iter().collect()
}

/// Put `dir` first on the `PATH` of a child's environment `env` (as built by
/// [`session_env`]; a `PATH` is added when there is none). Used for an agent CLI found outside
/// the daemon's `PATH`, whose `#!/usr/bin/env node` needs the `node` next to it.
pub fn put_first_on_path(env: &mut Vec<(String, String)>, dir: &Path) {
    let dir = dir.display().to_string();
    match env.iter_mut().find(|(k, _)| k == "PATH") {
        Some((_, v)) if v.is_empty() => *v = dir,
        Some((_, v)) => *v = format!("{dir}:{v}"),
        None => env.push(("PATH".into(), dir)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_put_first_on_the_childs_path() {
        let mut env = vec![
            ("A".to_string(), "1".to_string()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ];
        put_first_on_path(&mut env, Path::new("/h/.npm-global/bin"));
        assert_eq!(env[1].1, "/h/.npm-global/bin:/usr/bin:/bin");
        let mut env = vec![("PATH".to_string(), String::new())];
        put_first_on_path(&mut env, Path::new("/x"));
        assert_eq!(env, [("PATH".to_string(), "/x".to_string())]);
        let mut env = vec![];
        put_first_on_path(&mut env, Path::new("/x"));
        assert_eq!(env, [("PATH".to_string(), "/x".to_string())]);
    }

    /// The environment of `identity`'s child with these `launch.env` variables and these
    /// inherited from the daemon (no runtime extras).
    fn env_of(
        identity: &str,
        launch: &[(&str, &str)],
        inherited: &[(&str, &str)],
    ) -> Vec<(String, String)> {
        let id = Identity::parse(identity).unwrap();
        let own = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let launch = LaunchEnv {
            vars: own(launch),
            ..LaunchEnv::default()
        };
        session_env(&EnvInput {
            inherited: own(inherited),
            launch: &launch,
            identity: &id,
            token: "t",
            bearer: None,
            root: Path::new("/r"),
            port: 8765,
            home: None,
            extra: &[],
        })
    }

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
            bearer: None,
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
        assert_eq!(get(&env, "IAPEER_BEARER"), Some("tok"));
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
    fn the_daemons_terminal_does_not_leak_but_launch_env_may_set_it() {
        let env = env_of(
            "echo-a",
            &[("LINES", "33")],
            &[
                ("COLUMNS", "40"),
                ("LINES", "10"),
                ("TERM_PROGRAM", "iTerm.app"),
                ("TERM_PROGRAM_VERSION", "3.5"),
                ("TERM_SESSION_ID", "w0t0p0"),
                ("ITERM_SESSION_ID", "w0t0p0:1"),
                ("KITTY_WINDOW_ID", "3"),
                ("WT_SESSION", "abc"),
                ("WINDOWID", "123"),
                ("VTE_VERSION", "7000"),
                ("TMUX", "/tmp/t,1,0"),
                ("TMUX_PANE", "%1"),
                ("STY", "1.pts"),
                ("WINDOW", "0"),
                ("SSH_TTY", "/dev/pts/3"),
                ("COLORTERM", "24bit"),
                ("TERM", "screen"),
                ("HOME", "/home/me"),
                ("LANG", "C.UTF-8"),
                ("SSH_CONNECTION", "1 2 3 4"),
            ],
        );
        for k in [
            "COLUMNS",
            "TERM_PROGRAM",
            "TERM_PROGRAM_VERSION",
            "TERM_SESSION_ID",
            "ITERM_SESSION_ID",
            "KITTY_WINDOW_ID",
            "WT_SESSION",
            "WINDOWID",
            "VTE_VERSION",
            "TMUX",
            "TMUX_PANE",
            "STY",
            "WINDOW",
            "SSH_TTY",
        ] {
            assert_eq!(get(&env, k), None, "{k} leaked");
        }
        assert_eq!(
            get(&env, "LINES"),
            Some("33"),
            "deliberate launch.env value"
        );
        assert_eq!(get(&env, "TERM"), Some("xterm-256color"));
        assert_eq!(get(&env, "COLORTERM"), Some("truecolor"));
        for (k, v) in [
            ("HOME", "/home/me"),
            ("LANG", "C.UTF-8"),
            ("SSH_CONNECTION", "1 2 3 4"),
        ] {
            assert_eq!(get(&env, k), Some(v), "{k} is not about the terminal");
        }
    }

    #[test]
    fn the_daemons_bearer_is_never_inherited_only_handed() {
        let id = Identity::parse("echo-a").unwrap();
        let inherited = vec![
            (
                "IAPEER_BEARER_TOKEN".to_string(),
                "daemon-s3cret".to_string(),
            ),
            (
                "IAPEER_FEDERATION_URL".to_string(),
                "redis://:pw@h".to_string(),
            ),
        ];
        let mk = |launch: &LaunchEnv, bearer| {
            session_env(&EnvInput {
                inherited: inherited.clone(),
                launch,
                identity: &id,
                token: "t",
                bearer,
                root: Path::new("/r"),
                port: 8765,
                home: None,
                extra: &[],
            })
        };
        let none = LaunchEnv::default();
        assert_eq!(get(&mk(&none, None), BEARER_VAR), None);
        assert_eq!(get(&mk(&none, None), "IAPEER_FEDERATION_URL"), None);
        assert_eq!(get(&mk(&none, Some("fleet")), BEARER_VAR), Some("fleet"));
        // A launch.env may set one on purpose; a handed one wins over it.
        let own = LaunchEnv {
            vars: vec![(BEARER_VAR.into(), "mine".into())],
            ..LaunchEnv::default()
        };
        assert_eq!(get(&mk(&own, None), BEARER_VAR), Some("mine"));
        assert_eq!(get(&mk(&own, Some("fleet")), BEARER_VAR), Some("fleet"));
    }

    #[test]
    fn colour_switches_never_reach_the_child() {
        let env = env_of(
            "claude-a",
            &[("FORCE_COLOR", "0")],
            &[
                ("NO_COLOR", "1"),
                ("CLICOLOR", "0"),
                ("CLICOLOR_FORCE", "0"),
                ("CI", "true"),
                ("CONTINUOUS_INTEGRATION", "1"),
                ("LANG", "C.UTF-8"),
            ],
        );
        for k in COLOUR_SWITCHES {
            assert_eq!(get(&env, k), None, "{k} reached the child");
        }
        assert_eq!(get(&env, "LANG"), Some("C.UTF-8"));
        assert_eq!(get(&env, "COLORTERM"), Some("truecolor"));
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
                bearer: None,
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

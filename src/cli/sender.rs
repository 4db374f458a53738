//! Who is sending (spec 07 `send`): `--from`, else `PEER_IDENTITY`, else the peer whose
//! folder contains the current directory (its default runtime), else the registry's only
//! natural peer (the owner) — but only for the owner's own terminal: an interactive terminal
//! with no `PEER_*` variable in the environment. A service runtime (`PEER_PERSONALITY` /
//! `PEER_RUNTIME` set), a script or a cron job is refused with the way to say `--from`, so
//! nothing ever speaks as a human it is not. A pure function of its inputs.

use std::path::Path;

use crate::names::Identity;
use crate::registry::Registry;

/// The refusal when no rule applies.
pub const CANNOT_TELL: &str =
    "cannot tell who is sending: pass --from <runtime>-<name> or run inside a peer's folder";

/// Where the `send` runs, as far as speaking for the owner goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The command runs on an interactive terminal (its input is a tty).
    pub interactive: bool,
    /// The non-empty `PEER_*` variables of its environment other than `PEER_IDENTITY`, as
    /// `(name, value)` (a session or service runtime sets `PEER_PERSONALITY` and
    /// `PEER_RUNTIME`).
    pub peer_vars: Vec<(String, String)>,
}

impl Caller {
    /// The `PEER_*` variables of `vars` (a process environment) that mark a peer's process.
    pub fn from_env(interactive: bool, vars: impl IntoIterator<Item = (String, String)>) -> Caller {
        let mut peer_vars: Vec<(String, String)> = vars
            .into_iter()
            .filter(|(k, v)| k.starts_with("PEER_") && k != "PEER_IDENTITY" && !v.trim().is_empty())
            .collect();
        peer_vars.sort();
        Caller {
            interactive,
            peer_vars,
        }
    }

    fn var(&self, key: &str) -> Option<&str> {
        self.peer_vars
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim())
    }
}

/// Resolve the sender identity. `cwd` should be canonical (symlinks resolved), as are the
/// registry's folders. The owner is chosen only for a [`Caller`] that is interactive and
/// has no `PEER_*` variable.
///
/// Errors: an invalid `--from`/`PEER_IDENTITY`, [`CANNOT_TELL`], or a refusal saying why
/// this process is not taken for the owner, naming the `--from` to pass.
pub fn resolve_sender(
    from: Option<&str>,
    env_identity: Option<&str>,
    cwd: &Path,
    registry: &Registry,
    caller: &Caller,
) -> Result<String, String> {
    for (source, value) in [("--from", from), ("PEER_IDENTITY", env_identity)] {
        if let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) {
            return Identity::parse(v)
                .map(|i| i.to_string())
                .map_err(|e| format!("{source}: {e}"));
        }
    }
    let inside = registry
        .peers
        .iter()
        .filter(|p| cwd.starts_with(&p.cwd))
        .max_by_key(|p| p.cwd.components().count());
    if let Some(p) = inside {
        return Ok(format!("{}-{}", p.default_runtime, p.personality));
    }
    let owner = match registry.only_natural() {
        Ok(owner) => owner,
        Err(0) => return Err(CANNOT_TELL.to_string()),
        // Several people on the team (issue 30 item 2): say who they are and how to pick.
        Err(_) => {
            let people: Vec<String> = registry
                .naturals()
                .map(|p| format!("--from {}-{}", p.default_runtime, p.personality))
                .collect();
            return Err(format!(
                "cannot tell who is sending: this team has several people — say which with {}",
                people.join(" or ")
            ));
        }
    };
    let owner_id = format!("{}-{}", owner.default_runtime, owner.personality);
    if let Some((name, value)) = caller.peer_vars.first() {
        let hint = match (caller.var("PEER_RUNTIME"), caller.var("PEER_PERSONALITY")) {
            (Some(rt), Some(p)) if Identity::parse(&format!("{rt}-{p}")).is_ok() => {
                format!("--from {rt}-{p}")
            }
            _ => "--from <runtime>-<name>".to_string(),
        };
        return Err(format!(
            "cannot tell who is sending: this process belongs to a peer ({name}={value} is \
             set) but PEER_IDENTITY is not, and it is not sent as the human \"{}\"; pass {hint}",
            owner.personality
        ));
    }
    if !caller.interactive {
        return Err(format!(
            "cannot tell who is sending: not run from an interactive terminal (stdin is not \
             a tty), so not sent as the human \"{}\"; pass --from {owner_id} to speak as \
             them, or --from <runtime>-<name>",
            owner.personality
        ));
    }
    Ok(owner_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryPeer;

    fn peer(p: &str, rt: &str, intel: &str, cwd: &str) -> RegistryPeer {
        RegistryPeer::new(p, &[rt], intel, cwd)
    }

    fn registry(peers: Vec<RegistryPeer>) -> Registry {
        Registry { version: 2, peers }
    }

    #[test]
    fn rules_in_order() {
        let reg = registry(vec![
            peer("alice", "echo", "artificial", "/w/alice"),
            peer("inner", "claude", "artificial", "/w/alice/inner"),
            peer("owner", "telegram", "natural", "/w/owner"),
        ]);
        let tty = Caller {
            interactive: true,
            peer_vars: vec![],
        };
        let r = |from, env, cwd: &str| resolve_sender(from, env, Path::new(cwd), &reg, &tty);
        assert_eq!(
            r(Some("codex-x"), Some("echo-y"), "/"),
            Ok("codex-x".into())
        );
        assert!(r(Some("bad"), None, "/")
            .unwrap_err()
            .starts_with("--from: invalid identity"));
        assert_eq!(r(None, Some("echo-y"), "/w/alice"), Ok("echo-y".into()));
        assert_eq!(r(None, None, "/w/alice/src"), Ok("echo-alice".into()));
        assert_eq!(
            r(None, None, "/w/alice/inner/x"),
            Ok("claude-inner".into()),
            "deepest folder wins"
        );
        assert_eq!(
            r(None, None, "/w/alicex"),
            Ok("telegram-owner".into()),
            "no prefix match on names"
        );
        let mut two = reg.clone();
        two.peers.push(peer("owner2", "telegram", "human", "/w/o2"));
        assert_eq!(
            resolve_sender(None, None, Path::new("/tmp"), &two, &tty),
            Err(
                "cannot tell who is sending: this team has several people — say which with \
                 --from telegram-owner or --from telegram-owner2"
                    .into()
            )
        );
        let none = registry(vec![peer("alice", "echo", "artificial", "/w/alice")]);
        assert_eq!(
            resolve_sender(None, None, Path::new("/tmp"), &none, &tty),
            Err(CANNOT_TELL.into())
        );
    }

    #[test]
    fn the_owner_only_for_an_interactive_terminal_without_peer_variables() {
        let reg = registry(vec![
            peer("bot", "telegram", "absent", "/w/bot"),
            peer("owner", "console", "natural", "/w/owner"),
        ]);
        let vars = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let r = |caller: &Caller| resolve_sender(None, None, Path::new("/tmp"), &reg, caller);
        let tty = Caller::from_env(true, vars(&[("HOME", "/h"), ("PEER_IDENTITY", "")]));
        assert_eq!(r(&tty), Ok("console-owner".into()));

        // A service runtime's process: its PEER_* variables say it is a peer.
        let service = Caller::from_env(
            false,
            vars(&[("PEER_PERSONALITY", "bot"), ("PEER_RUNTIME", "telegram")]),
        );
        assert_eq!(
            r(&service),
            Err(
                "cannot tell who is sending: this process belongs to a peer \
                 (PEER_PERSONALITY=bot is set) but PEER_IDENTITY is not, and it is not sent as \
                 the human \"owner\"; pass --from telegram-bot"
                    .into()
            )
        );
        // Even on a terminal (a session's pty).
        let on_tty = Caller {
            interactive: true,
            ..service.clone()
        };
        assert!(r(&on_tty)
            .unwrap_err()
            .ends_with("pass --from telegram-bot"));
        let half = Caller::from_env(true, vars(&[("PEER_RUNTIME", "telegram")]));
        assert!(r(&half)
            .unwrap_err()
            .ends_with("pass --from <runtime>-<name>"));

        // A script, a cron job, a pipe: no terminal, no owner.
        let script = Caller::from_env(false, vars(&[("HOME", "/h")]));
        assert_eq!(
            r(&script),
            Err(
                "cannot tell who is sending: not run from an interactive terminal (stdin is \
                 not a tty), so not sent as the human \"owner\"; pass --from console-owner to \
                 speak as them, or --from <runtime>-<name>"
                    .into()
            )
        );
        // The earlier rules are unchanged for any caller.
        assert_eq!(
            resolve_sender(None, None, Path::new("/w/bot/x"), &reg, &script),
            Ok("telegram-bot".into())
        );
        assert_eq!(
            resolve_sender(Some("echo-x"), None, Path::new("/tmp"), &reg, &service),
            Ok("echo-x".into())
        );
    }
}

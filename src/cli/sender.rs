//! Who is sending (spec 07 `send`): `--from`, else `PEER_IDENTITY`, else the peer whose
//! folder contains the current directory (its default runtime), else the registry's only
//! natural peer (the owner). A pure function of its inputs.

use std::path::Path;

use crate::names::{Identity, Intelligence};
use crate::registry::Registry;

/// The refusal when no rule applies.
pub const CANNOT_TELL: &str =
    "cannot tell who is sending: pass --from <runtime>-<name> or run inside a peer's folder";

/// Resolve the sender identity. `cwd` should be canonical (symlinks resolved), as are the
/// registry's folders.
///
/// Errors: an invalid `--from`/`PEER_IDENTITY`, or [`CANNOT_TELL`].
pub fn resolve_sender(
    from: Option<&str>,
    env_identity: Option<&str>,
    cwd: &Path,
    registry: &Registry,
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
    let mut owners = registry
        .peers
        .iter()
        .filter(|p| p.nature() == Intelligence::Natural);
    match (owners.next(), owners.next()) {
        (Some(owner), None) => Ok(format!("{}-{}", owner.default_runtime, owner.personality)),
        _ => Err(CANNOT_TELL.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryPeer;

    fn peer(p: &str, rt: &str, intel: &str, cwd: &str) -> RegistryPeer {
        RegistryPeer {
            personality: p.into(),
            default_runtime: rt.into(),
            runtimes: vec![rt.into()],
            description: String::new(),
            intelligence: intel.into(),
            cwd: cwd.into(),
            interfaces: None,
        }
    }

    #[test]
    fn rules_in_order() {
        let reg = Registry {
            version: 2,
            peers: vec![
                peer("alice", "echo", "artificial", "/w/alice"),
                peer("inner", "claude", "artificial", "/w/alice/inner"),
                peer("owner", "telegram", "natural", "/w/owner"),
            ],
        };
        let r = |from, env, cwd: &str| resolve_sender(from, env, Path::new(cwd), &reg);
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
            resolve_sender(None, None, Path::new("/tmp"), &two),
            Err(CANNOT_TELL.into())
        );
    }
}

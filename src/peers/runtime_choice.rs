//! Which runtime a new peer gets (spec 07 `init`).

use std::path::Path;

use super::PeerError;
use crate::names;
use crate::paths::Paths;
use crate::runtime;

/// Agent runtimes usable on this host besides the demo stand-in (`claude`, `codex`), in
/// preference order.
pub fn installed_agents(paths: &Paths) -> Vec<&'static str> {
    ["claude", "codex"]
        .into_iter()
        .filter(|rt| runtime::is_installed(paths, rt))
        .collect()
}

/// The runtime for a new peer in `folder`: `requested` (must be valid and usable), else the
/// first marker folder (`.claude/`, `.codex/`) whose runtime is installed, else the first
/// installed agent runtime.
///
/// Errors: [`PeerError::InvalidRuntime`], [`PeerError::Runtime`] (unknown or not installed),
/// [`PeerError::NoAgentRuntime`].
pub fn choose_runtime(
    paths: &Paths,
    folder: &Path,
    requested: Option<&str>,
) -> Result<String, PeerError> {
    let installed = installed_agents(paths);
    if let Some(rt) = requested {
        if !names::is_valid_runtime(rt) {
            return Err(PeerError::InvalidRuntime(rt.to_string()));
        }
        return runtime::adapter_for(paths, rt)
            .map(|_| rt.to_string())
            .map_err(PeerError::Runtime);
    }
    for (marker, rt) in [(".claude", "claude"), (".codex", "codex")] {
        if folder.join(marker).is_dir() && installed.contains(&rt) {
            return Ok(rt.to_string());
        }
    }
    installed
        .first()
        .map(|rt| rt.to_string())
        .ok_or(PeerError::NoAgentRuntime)
}

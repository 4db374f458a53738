//! Which runtime a new peer gets (spec 07 `init`).

use std::path::Path;

use super::PeerError;
use crate::names;
use crate::paths::Paths;
use crate::runtime;
use crate::runtime_table;

/// Agent runtimes usable on this host besides the demo stand-in (`claude`, `codex`): the
/// table's default preference order ([`runtime_table::by_preference`]), installed ones only.
pub fn installed_agents(paths: &Paths) -> Vec<&'static str> {
    runtime_table::by_preference(runtime_table::BUILT_IN)
        .map(|r| r.name)
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
    for row in runtime_table::by_preference(runtime_table::BUILT_IN) {
        let Some(marker) = row.project_folder else {
            continue;
        };
        if folder.join(marker).is_dir() && installed.contains(&row.name) {
            return Ok(row.name.to_string());
        }
    }
    installed
        .first()
        .map(|rt| rt.to_string())
        .ok_or(PeerError::NoAgentRuntime)
}

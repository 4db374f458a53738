//! Decoding and validating `peers-profiles.json` (spec 01 §5). Known fields are read; the
//! file's shape errors become one sentence each for [`super::RegistryError::Corrupt`].

use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::path::PathBuf;

use super::{Registry, RegistryPeer, REGISTRY_VERSION};
use crate::names::{self, Intelligence};

/// One peer as found on disk, every field but the personality optional.
#[derive(Deserialize)]
struct RawPeer {
    default_runtime: Option<String>,
    /// Legacy single-runtime field, read as `default_runtime` when that is missing.
    runtime: Option<String>,
    runtimes: Option<Vec<String>>,
    description: Option<String>,
    intelligence: Option<String>,
    cwd: Option<PathBuf>,
    interfaces: Option<Map<String, Value>>,
}

/// Decode the registry text. `version` is kept as read (absent → the current version).
///
/// Errors: invalid JSON, a non-object, `version`/`peers` of the wrong type, a peer without a
/// valid personality, a peer without a runtime or cwd, a field of the wrong type, or a
/// personality listed twice.
pub(super) fn parse(text: &str) -> Result<Registry, String> {
    let root = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err("it is not a JSON object".to_string()),
        Err(e) => return Err(format!("invalid JSON ({e})")),
    };
    let version = match root.get("version") {
        None | Some(Value::Null) => REGISTRY_VERSION,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| "\"version\" is not a whole number".to_string())?,
    };
    let items = match root.get("peers") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err("\"peers\" is not an array".to_string()),
    };
    let peers = items
        .into_iter()
        .enumerate()
        .map(|(i, item)| parse_peer(i, item))
        .collect::<Result<Vec<_>, _>>()?;
    let registry = Registry { version, peers };
    validate(&registry)?;
    Ok(registry)
}

fn parse_peer(index: usize, item: Value) -> Result<RegistryPeer, String> {
    let personality = item
        .get("personality")
        .and_then(Value::as_str)
        .filter(|p| names::is_valid_personality(p))
        .map(str::to_string)
        .ok_or_else(|| format!("peer #{} has no valid \"personality\"", index + 1))?;
    let raw: RawPeer =
        serde_json::from_value(item).map_err(|e| format!("peer \"{personality}\": {e}"))?;
    let mut runtimes = raw.runtimes.unwrap_or_default();
    let default_runtime = raw
        .default_runtime
        .or(raw.runtime)
        .filter(|r| !r.is_empty())
        .or_else(|| runtimes.first().cloned())
        .ok_or_else(|| format!("peer \"{personality}\" declares no runtime"))?;
    if !runtimes.contains(&default_runtime) {
        runtimes.insert(0, default_runtime.clone());
    }
    let cwd = raw
        .cwd
        .filter(|c| !c.as_os_str().is_empty())
        .ok_or_else(|| format!("peer \"{personality}\" has no \"cwd\""))?;
    let intelligence = raw
        .intelligence
        .unwrap_or_else(|| Intelligence::default_for_runtime(&default_runtime).to_string());
    Ok(RegistryPeer {
        personality,
        default_runtime,
        runtimes,
        description: raw.description.unwrap_or_default(),
        intelligence,
        cwd,
        interfaces: raw.interfaces,
    })
}

/// The rules every registry on disk obeys: valid, unique personalities, each with a runtime
/// and a cwd. Errors: the first rule broken, in words.
pub(super) fn validate(registry: &Registry) -> Result<(), String> {
    let mut seen = HashSet::new();
    for p in &registry.peers {
        if !names::is_valid_personality(&p.personality) {
            return Err(format!(
                "invalid personality \"{}\" ({})",
                p.personality,
                names::PERSONALITY_RULE
            ));
        }
        if !seen.insert(p.personality.as_str()) {
            return Err(format!(
                "personality \"{}\" is listed more than once",
                p.personality
            ));
        }
        if p.default_runtime.is_empty() {
            return Err(format!("peer \"{}\" declares no runtime", p.personality));
        }
        if p.cwd.as_os_str().is_empty() {
            return Err(format!("peer \"{}\" has no \"cwd\"", p.personality));
        }
    }
    Ok(())
}

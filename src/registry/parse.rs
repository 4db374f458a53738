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

/// How a registry breaks the format (spec 01 §5). `Display` gives the one sentence that
/// [`super::RegistryError`] quotes as its reason.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The text is not JSON.
    #[error("invalid JSON ({0})")]
    InvalidJson(#[source] serde_json::Error),
    /// The text is JSON but not an object.
    #[error("it is not a JSON object")]
    NotObject,
    /// `version` is not a whole number.
    #[error("\"version\" is not a whole number")]
    BadVersion,
    /// `peers` is not an array.
    #[error("\"peers\" is not an array")]
    PeersNotArray,
    /// Peer number `n` (from 1) has no valid `personality`.
    #[error("peer #{0} has no valid \"personality\"")]
    NoPersonality(usize),
    /// A peer's field has the wrong type.
    #[error("peer \"{personality}\": {source}")]
    BadField {
        /// The peer.
        personality: String,
        /// The decoder's error.
        source: serde_json::Error,
    },
    /// A peer declares no runtime.
    #[error("peer \"{0}\" declares no runtime")]
    NoRuntime(String),
    /// A peer has no `cwd`.
    #[error("peer \"{0}\" has no \"cwd\"")]
    NoCwd(String),
    /// A personality that does not match the pattern.
    #[error("invalid personality \"{0}\" ({rule})", rule = names::PERSONALITY_RULE)]
    InvalidPersonality(String),
    /// A personality listed more than once.
    #[error("personality \"{0}\" is listed more than once")]
    Duplicate(String),
}

/// Decode the registry text. `version` is kept as read (absent → the current version).
///
/// Errors: invalid JSON, a non-object, `version`/`peers` of the wrong type, a peer without a
/// valid personality, a peer without a runtime or cwd, a field of the wrong type, or a
/// personality listed twice.
pub(super) fn parse(text: &str) -> Result<Registry, ShapeError> {
    let root = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err(ShapeError::NotObject),
        Err(e) => return Err(ShapeError::InvalidJson(e)),
    };
    let version = match root.get("version") {
        None | Some(Value::Null) => REGISTRY_VERSION,
        Some(v) => v.as_u64().ok_or(ShapeError::BadVersion)?,
    };
    let items = match root.get("peers") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => return Err(ShapeError::PeersNotArray),
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

fn parse_peer(index: usize, item: Value) -> Result<RegistryPeer, ShapeError> {
    let personality = item
        .get("personality")
        .and_then(Value::as_str)
        .filter(|p| names::is_valid_personality(p))
        .map(str::to_string)
        .ok_or(ShapeError::NoPersonality(index + 1))?;
    let raw: RawPeer = match serde_json::from_value(item) {
        Ok(raw) => raw,
        Err(source) => {
            return Err(ShapeError::BadField {
                personality,
                source,
            })
        }
    };
    let mut runtimes = raw.runtimes.unwrap_or_default();
    let default_runtime = raw
        .default_runtime
        .or(raw.runtime)
        .filter(|r| !r.is_empty())
        .or_else(|| runtimes.first().cloned())
        .ok_or_else(|| ShapeError::NoRuntime(personality.clone()))?;
    if !runtimes.contains(&default_runtime) {
        runtimes.insert(0, default_runtime.clone());
    }
    let cwd = raw
        .cwd
        .filter(|c| !c.as_os_str().is_empty())
        .ok_or_else(|| ShapeError::NoCwd(personality.clone()))?;
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
pub(super) fn validate(registry: &Registry) -> Result<(), ShapeError> {
    let mut seen = HashSet::new();
    for p in &registry.peers {
        if !names::is_valid_personality(&p.personality) {
            return Err(ShapeError::InvalidPersonality(p.personality.clone()));
        }
        if !seen.insert(p.personality.as_str()) {
            return Err(ShapeError::Duplicate(p.personality.clone()));
        }
        if p.default_runtime.is_empty() {
            return Err(ShapeError::NoRuntime(p.personality.clone()));
        }
        if p.cwd.as_os_str().is_empty() {
            return Err(ShapeError::NoCwd(p.personality.clone()));
        }
    }
    Ok(())
}

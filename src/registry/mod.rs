//! The registry `peers-profiles.json` (spec 01 §5): a projection of the peer profiles plus
//! each peer's working folder, written by one writer at a time under a lock. Companion
//! packages read this file directly; its shape is a public contract.
//!
//! ```json
//! { "version": 2,
//!   "peers": [ { "personality": "boris", "default_runtime": "claude",
//!                "runtimes": ["claude", "codex"], "description": "…",
//!                "intelligence": "artificial", "cwd": "/home/me/.iapeer/peers/boris",
//!                "interfaces": { "telegram": { "bot_username": "boris_bot" } } } ] }
//! ```

mod cache;
pub mod former;
mod io;
pub mod original_lock;
mod parse;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::names::Intelligence;

pub use io::RegistryError;

/// The registry format version this build writes.
pub const REGISTRY_VERSION: u64 = 2;

/// One peer as the registry shows it. Field order is the order written to disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistryPeer {
    /// The peer's name.
    pub personality: String,
    /// Where messages route by default.
    pub default_runtime: String,
    /// Every runtime the peer may be present on (includes `default_runtime`).
    pub runtimes: Vec<String>,
    /// One line, ≤450 chars; may be empty.
    #[serde(default)]
    pub description: String,
    /// `artificial` / `natural` / `absent` (legacy values preserved as written).
    pub intelligence: String,
    /// The peer's working folder (absolute).
    pub cwd: PathBuf,
    /// Public routing attributes, e.g. `{"telegram":{"bot_username":"boris_bot"}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<serde_json::Map<String, serde_json::Value>>,
}

impl RegistryPeer {
    /// A peer named `personality` of nature `intelligence` working in `cwd`, present on
    /// `runtimes` with the first as its default; no description, no interfaces. Panics when
    /// `runtimes` is empty (a registered peer always declares one).
    pub fn new(
        personality: &str,
        runtimes: &[&str],
        intelligence: &str,
        cwd: impl Into<PathBuf>,
    ) -> RegistryPeer {
        RegistryPeer {
            personality: personality.to_string(),
            default_runtime: runtimes[0].to_string(),
            runtimes: runtimes.iter().map(|r| r.to_string()).collect(),
            description: String::new(),
            intelligence: intelligence.to_string(),
            cwd: cwd.into(),
            interfaces: None,
        }
    }

    /// The peer's nature, read-compatible with legacy spellings; unknown values fall back to
    /// the default nature of its default runtime.
    pub fn nature(&self) -> Intelligence {
        Intelligence::parse(&self.intelligence)
            .unwrap_or_else(|| Intelligence::default_for_runtime(&self.default_runtime))
    }

    /// True when `runtime` is one of the peer's declared runtimes.
    pub fn declares(&self, runtime: &str) -> bool {
        self.runtimes.iter().any(|r| r == runtime)
    }

    /// The Telegram bot username of the peer, when it has a Telegram face.
    pub fn telegram_bot(&self) -> Option<&str> {
        self.interfaces
            .as_ref()?
            .get("telegram")?
            .get("bot_username")?
            .as_str()
            .filter(|s| !s.is_empty())
    }
}

/// The whole registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registry {
    /// Format version (2).
    pub version: u64,
    /// Peers, sorted by personality on write.
    pub peers: Vec<RegistryPeer>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            version: REGISTRY_VERSION,
            peers: Vec::new(),
        }
    }
}

impl Registry {
    /// The peer named `personality`, if registered.
    pub fn find(&self, personality: &str) -> Option<&RegistryPeer> {
        self.peers.iter().find(|p| p.personality == personality)
    }

    /// Insert `peer`, or replace the entry with the same personality. Returns the entry it
    /// replaced, if any. Order does not matter: peers are sorted on write.
    pub fn upsert(&mut self, peer: RegistryPeer) -> Option<RegistryPeer> {
        match self
            .peers
            .iter_mut()
            .find(|p| p.personality == peer.personality)
        {
            Some(slot) => Some(std::mem::replace(slot, peer)),
            None => {
                self.peers.push(peer);
                None
            }
        }
    }

    /// Drop the peer named `personality`; true when it was registered.
    pub fn remove(&mut self, personality: &str) -> bool {
        let before = self.peers.len();
        self.peers.retain(|p| p.personality != personality);
        self.peers.len() != before
    }

    /// The only natural (human) peer: the owner a send speaks for when no sender is named
    /// (spec 07 `send`, spec 10 §1 `send`). `Err(n)` = there are `n` (0 or ≥ 2) instead.
    pub fn only_natural(&self) -> Result<&RegistryPeer, usize> {
        let mut humans = self.naturals();
        match (humans.next(), humans.next()) {
            (Some(h), None) => Ok(h),
            (None, _) => Err(0),
            (Some(_), Some(_)) => Err(2 + humans.count()),
        }
    }

    /// The natural (human) peers, in registry order: the people a send may speak for.
    pub fn naturals(&self) -> impl Iterator<Item = &RegistryPeer> {
        self.peers
            .iter()
            .filter(|p| p.nature() == crate::names::Intelligence::Natural)
    }

    /// The peer whose working folder is `path` or the nearest folder above it (the longest
    /// matching `cwd`, compared by path components; no canonicalization is done here).
    pub fn containing(&self, path: &Path) -> Option<&RegistryPeer> {
        self.peers
            .iter()
            .filter(|p| path.starts_with(&p.cwd))
            .max_by_key(|p| p.cwd.components().count())
    }
}

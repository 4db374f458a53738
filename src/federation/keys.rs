//! The Redis key layout of the federation: the wire contract between hosts (issue 28;
//! `docs/FEDERATION.md` quotes it). Every host of one federation uses the same Redis
//! database; every key iapeer writes starts with [`PREFIX`], so other data in that database is
//! left alone, and a later layout takes a new version in the prefix.
//!
//! | key | type | written by | holds |
//! |---|---|---|---|
//! | `iapeer:v1:alive:<host>` | string, TTL [`ALIVE_TTL`] | host `<host>`, every [`HEARTBEAT_INTERVAL`] | its last [`Heartbeat`] as JSON; present = the host is online |
//! | `iapeer:v1:hosts` | hash `<host>` → JSON | each host, with its heartbeat | every host's last [`Heartbeat`], kept after it goes offline (when it was last seen) |
//!
//! A host deletes its `alive` key when its daemon stops and both its keys when it leaves
//! (`iapeer federation leave`). Reserved for the next steps (not written yet):
//! `iapeer:v1:inbox:<host>` (a stream: messages to the host's peers, read with a consumer
//! group by its link thread) and `iapeer:v1:reply:<host>` (a stream: outcomes back to the
//! sending host).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What every key starts with: the product and the layout's version.
pub const PREFIX: &str = "iapeer:v1:";

/// How often a host writes its heartbeat: 5 s.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// The life of a host's `alive` key: 3 heartbeats (15 s). A host whose key expired is
/// offline.
pub const ALIVE_TTL: Duration = Duration::from_secs(15);

/// `iapeer:v1:hosts`: the hash of every host's last heartbeat.
pub fn hosts() -> String {
    format!("{PREFIX}hosts")
}

/// `iapeer:v1:alive:<host>`: the host's presence, expiring after [`ALIVE_TTL`].
pub fn alive(host: &str) -> String {
    format!("{PREFIX}alive:{host}")
}

/// One host's heartbeat, as JSON in `alive:<host>` and in the `hosts` hash:
/// `{"host","time_ms","version","interval_secs"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The host's name (the peer-name rule).
    pub host: String,
    /// When it was written, in ms since the epoch by the writer's clock.
    pub time_ms: u64,
    /// The writer's iapeer version.
    pub version: String,
    /// The writer's heartbeat interval, in seconds.
    pub interval_secs: u64,
}

impl Heartbeat {
    /// This host's heartbeat now.
    pub fn now(host: &str) -> Heartbeat {
        Heartbeat {
            host: host.to_string(),
            time_ms: crate::clock::now_ms(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            interval_secs: HEARTBEAT_INTERVAL.as_secs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_the_prefix_and_the_host() {
        assert_eq!(hosts(), "iapeer:v1:hosts");
        assert_eq!(alive("b"), "iapeer:v1:alive:b");
        assert!(ALIVE_TTL >= HEARTBEAT_INTERVAL * 2);
    }

    #[test]
    fn a_heartbeat_reads_back_as_written() {
        let hb = Heartbeat::now("a");
        let text = serde_json::to_string(&hb).unwrap();
        assert_eq!(serde_json::from_str::<Heartbeat>(&text).unwrap(), hb);
        assert!(text.contains("\"interval_secs\":5"));
    }
}

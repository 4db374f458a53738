//! The other hosts' peers as this host knows them (issue 28 items 2 and 6): what `iapeer
//! list`, the page (the fleet snapshot's `remote`) and the system prompt's team list show.
//! The link ([`super::link`]) writes it to `<root>/state/iapeer/federation-peers.json` after
//! a heartbeat turn, only when it changed (an idle team writes nothing), and removes it when the
//! daemon stops or the root is not joined; readers need no Redis and no daemon.
//!
//! A host's roster expires with its `alive` key, so an offline host has none in Redis: the
//! link keeps the roster it last saw of a host that goes offline ([`merge`]), shown with the
//! host offline, until the daemon stops. A roster's peers are taken only when their name and
//! runtimes follow the peer-name rule (another host wrote them: a name that could not be
//! addressed, or a line break in a runtime, is dropped, not shown).

use serde::{Deserialize, Serialize};

use super::keys::{Roster, RosterPeer};
use super::link::HostSeen;
use crate::fsutil::{self, MODE_PRIVATE};
use crate::names::is_valid_personality;
use crate::paths::Paths;

/// One other host and its peers: `{"host","online","peers":[RosterPeer…]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteHost {
    /// The host's name.
    pub host: String,
    /// Its `alive` key exists now.
    pub online: bool,
    /// Its peers from its roster (the last one seen, for a host that went offline), sorted by
    /// name; empty for a host never seen online by this daemon.
    pub peers: Vec<RosterPeer>,
}

/// The file: `{"hosts":[RemoteHost…]}`, hosts sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemotePeers {
    /// The other hosts.
    pub hosts: Vec<RemoteHost>,
}

/// What the link's last turn saw, merged with what it knew before: each host of `seen`
/// with its roster from `rosters` when it has one, else its `before` peers when it is
/// offline (its roster expired with it). Peers with a name or a runtime that breaks the
/// peer-name rule are dropped. Pure.
pub fn merge(before: &RemotePeers, seen: &[HostSeen], rosters: &[Roster]) -> RemotePeers {
    let mut hosts: Vec<RemoteHost> = seen
        .iter()
        .map(|h| {
            let fresh = rosters.iter().find(|r| r.host == h.host);
            let peers = match fresh {
                Some(r) => valid_peers(&r.peers),
                None if !h.online => before
                    .hosts
                    .iter()
                    .find(|b| b.host == h.host)
                    .map(|b| b.peers.clone())
                    .unwrap_or_default(),
                None => Vec::new(),
            };
            RemoteHost {
                host: h.host.clone(),
                online: h.online,
                peers,
            }
        })
        .collect();
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    RemotePeers { hosts }
}

/// The peers whose name and runtimes follow the peer-name rule, sorted by name.
fn valid_peers(peers: &[RosterPeer]) -> Vec<RosterPeer> {
    let mut kept: Vec<RosterPeer> = peers
        .iter()
        .filter(|p| is_valid_personality(&p.name))
        .filter(|p| p.runtimes.iter().all(|r| is_valid_personality(r)))
        .cloned()
        .collect();
    kept.sort_by(|a, b| a.name.cmp(&b.name));
    kept.dedup_by(|a, b| a.name == b.name);
    kept
}

/// The other hosts' peers as the running daemon's link last wrote them; empty when there is
/// no file (not joined, no daemon, or not yet) or it cannot be read.
pub fn read(paths: &Paths) -> RemotePeers {
    fsutil::read_optional(&paths.federation_peers())
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Write the file atomically, mode 0600.
///
/// Errors: the write fails.
pub fn write(paths: &Paths, peers: &RemotePeers) -> std::io::Result<()> {
    fsutil::write_json_atomic(&paths.federation_peers(), peers, MODE_PRIVATE)
}

/// Remove the file (not joined, or the daemon stops). Best effort.
pub fn remove(paths: &Paths) {
    let _ = fsutil::remove_if_exists(&paths.federation_peers());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str) -> RosterPeer {
        RosterPeer {
            name: name.into(),
            runtimes: vec!["echo".into()],
            state: "available".into(),
            description: String::new(),
            intelligence: "artificial".into(),
        }
    }

    fn seen(host: &str, online: bool) -> HostSeen {
        HostSeen {
            host: host.into(),
            version: "0.1.0".into(),
            last_heartbeat_ms: 1,
            online,
        }
    }

    fn roster(host: &str, peers: Vec<RosterPeer>) -> Roster {
        Roster {
            host: host.into(),
            time_ms: 1,
            peers,
        }
    }

    #[test]
    fn a_host_that_goes_offline_keeps_its_last_roster() {
        let first = merge(
            &RemotePeers::default(),
            &[seen("c", true), seen("b", true)],
            &[roster("b", vec![peer("carol"), peer("bob")])],
        );
        let names = |p: &RemotePeers, i: usize| -> Vec<String> {
            p.hosts[i].peers.iter().map(|p| p.name.clone()).collect()
        };
        assert_eq!(first.hosts[0].host, "b");
        assert_eq!(names(&first, 0), ["bob", "carol"]);
        // c is online without a roster (not written yet): no peers.
        assert_eq!(first.hosts[1].host, "c");
        assert!(first.hosts[1].peers.is_empty());
        // b goes offline: its roster expired in Redis, its last one is kept.
        let later = merge(&first, &[seen("b", false), seen("c", true)], &[]);
        assert!(!later.hosts[0].online);
        assert_eq!(names(&later, 0), ["bob", "carol"]);
        // A host first seen offline has nothing to show.
        let fresh = merge(&RemotePeers::default(), &[seen("b", false)], &[]);
        assert!(fresh.hosts[0].peers.is_empty());
    }

    #[test]
    fn peers_that_break_the_name_rule_are_dropped() {
        let mut bad_runtime = peer("dave");
        bad_runtime.runtimes = vec!["echo\nrm -rf".into()];
        let got = merge(
            &RemotePeers::default(),
            &[seen("b", true)],
            &[roster(
                "b",
                vec![peer("Bob Smith"), bad_runtime, peer("bob"), peer("bob")],
            )],
        );
        let names: Vec<&str> = got.hosts[0].peers.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["bob"]);
    }

    #[test]
    fn the_file_reads_back_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::at(dir.path());
        assert_eq!(read(&paths), RemotePeers::default());
        let p = merge(
            &RemotePeers::default(),
            &[seen("b", true)],
            &[roster("b", vec![peer("bob")])],
        );
        write(&paths, &p).unwrap();
        let mode = crate::testkit::mode_of(paths.federation_peers());
        assert_eq!(mode, 0o600);
        assert_eq!(read(&paths), p);
        remove(&paths);
        assert_eq!(read(&paths), RemotePeers::default());
    }
}

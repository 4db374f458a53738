//! The other hosts' peers as rows (issue 28 items 2 and 6): `iapeer list` (text and
//! `--json`), the fleet snapshot's `remote` (the page groups them by host) and the system
//! prompt's team list, all from what the daemon's federation link last saw
//! (`federation::peers`, `state/iapeer/federation-peers.json`).

use serde::Serialize;

use crate::federation::peers::{self, RemotePeers};
use crate::paths::Paths;
use crate::prompt::RemotePeer;

/// One peer of another host: `{"personality","host","address","host_online","state",
/// "description","intelligence","default_runtime","runtimes"}` — `address` is `name@host`, as a
/// send names it; `state` is `available` or `stopped` (its host's roster), `offline` while its
/// host is (the roster it showed last); `runtimes` are names, the default first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteRow {
    /// The peer's name on its host.
    pub personality: String,
    /// Its host.
    pub host: String,
    /// `name@host`.
    pub address: String,
    /// Whether its host is online now.
    pub host_online: bool,
    /// `available`, `stopped` or `offline`.
    pub state: String,
    /// Its description.
    pub description: String,
    /// `artificial`, `natural` or `absent`.
    pub intelligence: String,
    /// Its default runtime.
    pub default_runtime: String,
    /// Its runtimes, the default first.
    pub runtimes: Vec<String>,
}

/// The rows of `known`, by host then name (peers without a runtime are left out). Pure.
pub fn rows_of(known: &RemotePeers) -> Vec<RemoteRow> {
    known
        .hosts
        .iter()
        .flat_map(|h| {
            h.peers.iter().filter_map(move |p| {
                Some(RemoteRow {
                    personality: p.name.clone(),
                    host: h.host.clone(),
                    address: format!("{}@{}", p.name, h.host),
                    host_online: h.online,
                    state: if h.online {
                        p.state.clone()
                    } else {
                        "offline".into()
                    },
                    description: p.description.clone(),
                    intelligence: p.intelligence.clone(),
                    default_runtime: p.runtimes.first()?.clone(),
                    runtimes: p.runtimes.clone(),
                })
            })
        })
        .collect()
}

/// The other hosts' peers now, as rows; empty when this root has not joined or its daemon
/// does not run.
pub fn remote_rows(paths: &Paths) -> Vec<RemoteRow> {
    rows_of(&peers::read(paths))
}

/// The other hosts' peers for the system prompt's team list (`name@host`).
pub fn prompt_peers(paths: &Paths) -> Vec<RemotePeer> {
    remote_rows(paths)
        .into_iter()
        .map(|r| RemotePeer {
            address: r.address,
            description: r.description,
            runtimes: r.runtimes,
            intelligence: r.intelligence,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::federation::keys::RosterPeer;
    use crate::federation::peers::RemoteHost;

    #[test]
    fn rows_name_the_host_and_an_offline_host_makes_its_peers_offline() {
        let peer = |name: &str, state: &str, runtimes: &[&str]| RosterPeer {
            name: name.into(),
            runtimes: runtimes.iter().map(|r| r.to_string()).collect(),
            state: state.into(),
            description: "d".into(),
            intelligence: "artificial".into(),
        };
        let known = RemotePeers {
            hosts: vec![
                RemoteHost {
                    host: "b".into(),
                    online: true,
                    peers: vec![
                        peer("bob", "available", &["claude", "codex"]),
                        peer("dan", "stopped", &["echo"]),
                        peer("nobody", "available", &[]),
                    ],
                },
                RemoteHost {
                    host: "c".into(),
                    online: false,
                    peers: vec![peer("carol", "available", &["echo"])],
                },
            ],
        };
        let rows = rows_of(&known);
        let got: Vec<(&str, &str, bool, &str)> = rows
            .iter()
            .map(|r| {
                (
                    r.address.as_str(),
                    r.state.as_str(),
                    r.host_online,
                    r.default_runtime.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("bob@b", "available", true, "claude"),
                ("dan@b", "stopped", true, "echo"),
                ("carol@c", "offline", false, "echo"),
            ]
        );
    }
}

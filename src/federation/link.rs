//! The daemon's federation link (issue 28 item 1): one thread, `federation-link`, with a
//! blocking Redis connection (the `redis` crate's synchronous API; no async runtime). It
//! reads the membership ([`super::effective`]) every [`POLL`], so a `join` or `leave` reaches a
//! running daemon within a second; while joined it writes this host's heartbeat every
//! [`keys::HEARTBEAT_INTERVAL`] and reads the other hosts'. When Redis is away it says so in
//! its report and tries again after [`backoff`] (1 s doubling to [`BACKOFF_CAP`]); nothing
//! local waits for it. What it saw goes to `state/iapeer/federation-link.json`
//! ([`LinkReport`]), which `iapeer federation status` reads. The password is never logged:
//! every line shows [`super::masked`]. Later steps add the inbox stream's consumer group here.

use std::collections::HashMap;
use std::io;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde::{Deserialize, Serialize};

use super::keys::{self, Heartbeat};
use super::{effective, masked, Joined};
use crate::paths::Paths;

/// How often the membership file is looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// The longest wait between two connection attempts.
pub const BACKOFF_CAP: Duration = Duration::from_secs(10);

/// How long a connection attempt or one command may take before Redis counts as away.
pub const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// The wait before the next attempt after `failures` failed ones in a row (1 or more): 1 s,
/// 2 s, 4 s, 8 s, then [`BACKOFF_CAP`]. Pure.
pub fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(16);
    Duration::from_secs(secs).min(BACKOFF_CAP)
}

/// The link's state in its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkState {
    /// No membership: nothing to connect to.
    NotJoined,
    /// Connected; the heartbeat is being written.
    Connected,
    /// Redis cannot be reached (or the membership is not valid); trying again.
    Away,
}

/// Another host as its heartbeat shows it: `{"host","version","last_heartbeat_ms","online"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSeen {
    /// Its name.
    pub host: String,
    /// Its iapeer version.
    pub version: String,
    /// Its last heartbeat, ms since the epoch by its clock.
    pub last_heartbeat_ms: u64,
    /// True while its `alive` key has not expired.
    pub online: bool,
}

/// What the link last saw, `federation-link.json` (absent while not joined): `{"state","host","url","since_ms",
/// "last_error","last_heartbeat_ms","hosts","updated_ms"}` (the URL masked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkReport {
    /// Connected, away or not joined.
    pub state: LinkState,
    /// This host's name, when joined.
    pub host: Option<String>,
    /// The URL in use, password masked, when joined.
    pub url: Option<String>,
    /// Since when the state holds, ms since the epoch.
    pub since_ms: u64,
    /// The last failure (connecting or a command), kept after a reconnection.
    pub last_error: Option<String>,
    /// The last heartbeat this host wrote, ms since the epoch.
    pub last_heartbeat_ms: Option<u64>,
    /// The other hosts seen in the `hosts` hash, by name.
    pub hosts: Vec<HostSeen>,
    /// When the report was written, ms since the epoch.
    pub updated_ms: u64,
}

/// The report the link last wrote, `None` when there is none (no daemon, or not yet).
pub fn read_report(paths: &Paths) -> Option<LinkReport> {
    let text = std::fs::read_to_string(paths.federation_link()).ok()?;
    serde_json::from_str(&text).ok()
}

/// Start the link thread; it ends when `stop` receives or is dropped, deleting this host's
/// `alive` key on the way out (the host goes offline at once) and its report file.
pub fn spawn(paths: Paths, hub: Tell, stop: Receiver<()>) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("federation-link".into())
        .spawn(move || {
            let mut link = Link {
                paths,
                hub,
                stop,
                conn: None,
                failures: 0,
                written: None,
                peers: None,
                report: LinkReport {
                    state: LinkState::NotJoined,
                    host: None,
                    url: None,
                    since_ms: crate::clock::now_ms(),
                    last_error: None,
                    last_heartbeat_ms: None,
                    hosts: Vec::new(),
                    updated_ms: 0,
                },
            };
            link.run();
            link.close(false);
            let _ = std::fs::remove_file(link.paths.federation_link());
            super::peers::remove(&link.paths);
        })
}

/// Who hears what the link saw after each turn: the membership in effect (`None`: not
/// joined), whether Redis answered, and the other hosts with the names of their rosters'
/// peers (the daemon's `Hub`, which the router resolves addresses with).
pub type Tell = Box<dyn Fn(Option<Joined>, bool, Vec<super::address::HostView>) + Send>;

/// The membership in effect, or why it is not usable.
type Want = Result<Option<Joined>, String>;

fn want(paths: &Paths) -> Want {
    effective(paths).map(|o| o.map(|(j, _)| j))
}

struct Link {
    paths: Paths,
    /// Told the membership, the other hosts and their rosters after each turn.
    hub: Tell,
    stop: Receiver<()>,
    /// The open connection and the membership it serves.
    conn: Option<(Joined, redis::Connection)>,
    /// Failed attempts in a row.
    failures: u32,
    /// What the link sees now (`updated_ms` set only in the written copy).
    report: LinkReport,
    /// The report as last written.
    written: Option<LinkReport>,
    /// The other hosts' peers as last written to `federation-peers.json` (`None`: no file).
    peers: Option<super::peers::RemotePeers>,
}

impl Link {
    fn run(&mut self) {
        let mut logged_invalid = None;
        loop {
            let want = want(&self.paths);
            let pause = match &want {
                Ok(None) => {
                    self.close(true);
                    self.set_state(LinkState::NotJoined, None);
                    if self.peers.take().is_some() {
                        super::peers::remove(&self.paths);
                    }
                    POLL
                }
                Err(e) => {
                    self.close(false);
                    if logged_invalid.as_ref() != Some(e) {
                        log::warn!("federation: {e}");
                        logged_invalid = Some(e.clone());
                    }
                    self.report.last_error = Some(e.clone());
                    self.set_state(LinkState::Away, None);
                    POLL
                }
                Ok(Some(j)) => self.serve(j),
            };
            let joined = want.as_ref().ok().cloned().flatten();
            let connected = self.report.state == LinkState::Connected;
            if !connected {
                (self.hub)(joined, false, Vec::new());
            }
            self.write_report();
            if !self.pause(pause, &want) {
                return;
            }
        }
    }

    /// One turn while joined: connect when not connected, then a heartbeat. The wait before
    /// the next turn.
    fn serve(&mut self, j: &Joined) -> Duration {
        if self.conn.as_ref().is_some_and(|(c, _)| c != j) {
            self.close(self.conn.as_ref().is_some_and(|(c, _)| c.host != j.host));
        }
        if self.conn.is_none() {
            match connect(j) {
                Ok(c) => {
                    log::info!(
                        "federation: connected to {} as host {}",
                        masked(&j.url),
                        j.host
                    );
                    self.conn = Some((j.clone(), c));
                    self.failures = 0;
                }
                Err(e) => return self.away(j, e.to_string()),
            }
        }
        let Some((_, con)) = self.conn.as_mut() else {
            return POLL;
        };
        let roster = roster_of(&self.paths, &j.host);
        match beat(con, &j.host, &roster) {
            Ok((at, hosts, rosters)) => {
                self.report.last_heartbeat_ms = Some(at);
                let views = hosts
                    .iter()
                    .map(|h| super::address::HostView {
                        host: h.host.clone(),
                        online: h.online,
                        peers: rosters
                            .iter()
                            .filter(|r| r.host == h.host)
                            .flat_map(|r| r.peers.iter().map(|p| p.name.clone()))
                            .collect(),
                    })
                    .collect();
                (self.hub)(Some(j.clone()), true, views);
                self.write_peers(&hosts, &rosters);
                self.report.hosts = hosts;
                self.set_state(LinkState::Connected, Some(j));
                keys::HEARTBEAT_INTERVAL
            }
            Err(e) => {
                self.conn = None;
                self.away(j, e.to_string())
            }
        }
    }

    /// Redis failed: say so (logged once per outage), back off.
    fn away(&mut self, j: &Joined, error: String) -> Duration {
        self.failures += 1;
        if self.report.state != LinkState::Away {
            log::warn!(
                "federation: {} is away ({error}); local delivery goes on, trying again",
                masked(&j.url)
            );
        }
        self.report.last_error = Some(error);
        self.set_state(LinkState::Away, Some(j));
        backoff(self.failures)
    }

    /// The state (its `since` moves only when it changes) and the membership it is for.
    fn set_state(&mut self, state: LinkState, j: Option<&Joined>) {
        if self.report.state != state {
            self.report.state = state;
            self.report.since_ms = crate::clock::now_ms();
        }
        self.report.host = j.map(|j| j.host.clone());
        self.report.url = j.map(|j| masked(&j.url));
        if state == LinkState::NotJoined {
            self.report.hosts.clear();
            self.report.last_heartbeat_ms = None;
            self.report.last_error = None;
        }
    }

    /// Close the connection; with `leaving`, delete this host's keys first (it left the
    /// federation), else only its `alive` key (it goes offline). Best effort.
    fn close(&mut self, leaving: bool) {
        let Some((j, mut con)) = self.conn.take() else {
            return;
        };
        let mut cmd = redis::pipe();
        cmd.cmd("DEL").arg(keys::alive(&j.host)).ignore();
        cmd.cmd("DEL").arg(keys::roster(&j.host)).ignore();
        if leaving {
            cmd.cmd("HDEL").arg(keys::hosts()).arg(&j.host).ignore();
        }
        let _: redis::RedisResult<()> = cmd.query(&mut con);
        log::info!(
            "federation: {} host {} at {}",
            if leaving { "left as" } else { "offline as" },
            j.host,
            masked(&j.url)
        );
    }

    /// Write the other hosts' peers ([`super::peers::merge`]) when they changed.
    fn write_peers(&mut self, hosts: &[HostSeen], rosters: &[keys::Roster]) {
        let before = self.peers.take().unwrap_or_default();
        let now = super::peers::merge(&before, hosts, rosters);
        if now != before || !self.paths.federation_peers().exists() {
            if let Err(e) = super::peers::write(&self.paths, &now) {
                log::warn!("federation: cannot write the other hosts' peers: {e}");
            }
        }
        self.peers = Some(now);
    }

    /// Write the report when it changed since the last write (so an idle link writes
    /// nothing); not joined, remove it.
    fn write_report(&mut self) {
        if self.written.as_ref() == Some(&self.report) {
            return;
        }
        self.written = Some(self.report.clone());
        if self.report.state == LinkState::NotJoined {
            // Nothing to report: a root that never joined gets no file.
            let _ = std::fs::remove_file(self.paths.federation_link());
            return;
        }
        let mut report = self.report.clone();
        report.updated_ms = crate::clock::now_ms();
        if let Ok(text) = serde_json::to_vec_pretty(&report) {
            let _ = crate::fsutil::replace_atomic(
                &self.paths.federation_link(),
                &text,
                crate::fsutil::MODE_PRIVATE,
            );
        }
    }

    /// Wait up to `d`, ending early when the membership changes from `seen`; false when the
    /// daemon stops.
    fn pause(&self, d: Duration, seen: &Want) -> bool {
        let end = Instant::now() + d;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            match self.stop.recv_timeout(left.min(POLL)) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return false,
            }
            if want(&self.paths) != *seen {
                return true;
            }
        }
    }
}

/// A connection for the membership `j` (TLS for `rediss://`: [`super::tls`]) with
/// [`IO_TIMEOUT`] on connecting, reading and writing.
///
/// Errors: in words with what to do ([`super::tls::explain`]), without the password.
pub fn connect(j: &Joined) -> Result<redis::Connection, super::tls::ClientError> {
    let client = super::tls::client(j)?;
    let opened = || -> redis::RedisResult<redis::Connection> {
        let con = client.get_connection_with_timeout(IO_TIMEOUT)?;
        con.set_read_timeout(Some(IO_TIMEOUT))?;
        con.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(con)
    };
    opened().map_err(|e| super::tls::ClientError::Refused(super::tls::explain(&e.to_string(), j)))
}

/// This host's roster now: each registered peer with its default runtime's state.
fn roster_of(paths: &Paths, host: &str) -> keys::Roster {
    let registry = crate::registry::Registry::load_cached(paths).unwrap_or_default();
    let mut peers: Vec<keys::RosterPeer> = registry
        .peers
        .iter()
        .map(|p| {
            let mut runtimes = vec![p.default_runtime.clone()];
            runtimes.extend(
                p.runtimes
                    .iter()
                    .filter(|r| **r != p.default_runtime)
                    .cloned(),
            );
            let endpoint = crate::names::Identity {
                runtime: p.default_runtime.clone(),
                personality: p.personality.clone(),
            };
            let stopped = crate::markers::Markers::new(paths, &endpoint)
                .is_set(crate::markers::Flag::Stopped);
            keys::RosterPeer {
                name: p.personality.clone(),
                runtimes,
                state: if stopped { "stopped" } else { "available" }.into(),
                description: p.description.clone(),
                intelligence: p.nature().as_str().into(),
            }
        })
        .collect();
    peers.sort_by(|a, b| a.name.cmp(&b.name));
    keys::Roster {
        host: host.to_string(),
        time_ms: crate::clock::now_ms(),
        peers,
    }
}

/// What one heartbeat turn learns: its time, the other hosts, the rosters of those online.
type Beat = (u64, Vec<HostSeen>, Vec<keys::Roster>);

/// Write this host's heartbeat and roster, then read every other host's heartbeat and the
/// rosters of those online.
fn beat(
    con: &mut redis::Connection,
    host: &str,
    roster: &keys::Roster,
) -> redis::RedisResult<Beat> {
    let hb = Heartbeat::now(host);
    let json = serde_json::to_string(&hb).unwrap_or_default();
    redis::pipe()
        .cmd("SET")
        .arg(keys::roster(host))
        .arg(serde_json::to_string(roster).unwrap_or_default())
        .arg("EX")
        .arg(keys::ALIVE_TTL.as_secs())
        .ignore()
        .cmd("SET")
        .arg(keys::alive(host))
        .arg(&json)
        .arg("EX")
        .arg(keys::ALIVE_TTL.as_secs())
        .ignore()
        .cmd("HSET")
        .arg(keys::hosts())
        .arg(host)
        .arg(&json)
        .ignore()
        .query::<()>(con)?;
    let all: HashMap<String, String> = redis::cmd("HGETALL").arg(keys::hosts()).query(con)?;
    // A heartbeat or roster counts only under its own host's name (a value naming another
    // host is ignored): the key (or the hash field) says whose it is, not the value.
    let mut others: Vec<Heartbeat> = all
        .iter()
        .filter(|(name, _)| name.as_str() != host)
        .filter_map(|(name, v)| {
            serde_json::from_str::<Heartbeat>(v)
                .ok()
                .filter(|hb| hb.host == *name)
        })
        .collect();
    others.sort_by(|a, b| a.host.cmp(&b.host));
    let (alive, rosters): (Vec<Option<String>>, Vec<Option<String>>) = if others.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let names: Vec<String> = others.iter().map(|h| keys::alive(&h.host)).collect();
        let rosters: Vec<String> = others.iter().map(|h| keys::roster(&h.host)).collect();
        (
            redis::cmd("MGET").arg(names).query(con)?,
            redis::cmd("MGET").arg(rosters).query(con)?,
        )
    };
    let rosters = others
        .iter()
        .zip(rosters)
        .filter_map(|(h, r)| {
            serde_json::from_str::<keys::Roster>(&r?)
                .ok()
                .filter(|r| r.host == h.host)
        })
        .collect();
    let hosts = others
        .into_iter()
        .zip(alive.into_iter().chain(std::iter::repeat(None)))
        .map(|(h, a)| HostSeen {
            host: h.host,
            version: h.version,
            last_heartbeat_ms: h.time_ms,
            online: a.is_some(),
        })
        .collect();
    Ok((hb.time_ms, hosts, rosters))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap() {
        let secs: Vec<u64> = (1..=7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 10, 10, 10]);
        assert_eq!(backoff(u32::MAX), BACKOFF_CAP);
    }
}

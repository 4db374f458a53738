//! The peer rows of `iapeer list --json` (spec 07 "Peers"), also the rows of the fleet API's
//! snapshot (spec 10 §1: "one function builds both"): [`list_rows`] builds them from the
//! registry, the daemon's live sessions and the peers' files.

use std::collections::HashMap;

use serde::Serialize;

use crate::markers::{Flag, Markers};
use crate::paths::Paths;
use crate::profile::Profile;
use crate::protocol::{ListReply, SessionInfo};
use crate::registry::Registry;

/// What the daemon reported about live sessions (`list` op), keyed by identity.
#[derive(Debug, Default)]
pub struct LiveState {
    /// identity → the session of the `list` op.
    pub sessions: HashMap<String, SessionInfo>,
    /// Parked always-on identities.
    pub parked: Vec<String>,
}

impl LiveState {
    /// Read it from a `list` reply.
    pub fn from_reply(r: ListReply) -> LiveState {
        let sessions = r
            .sessions
            .into_iter()
            .map(|s| (s.identity.clone(), s))
            .collect();
        LiveState {
            sessions,
            parked: r.parked,
        }
    }
}

/// One runtime of a `list --json` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeRow {
    /// The runtime.
    pub runtime: String,
    /// `live`, `asleep`, `stopped`, `parked` or `missing` (a router runtime whose program is
    /// not there: it cannot start; in the fleet API's rows also an agent runtime the daemon
    /// cannot start, [`add_daemon_view`], where `parked` also names a crash-looping agent).
    pub status: String,
    /// Why it cannot start, with what to do (only present for `missing`, and for an agent
    /// `parked` by the crash-loop guard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// A terminal is attached (only present when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub attached: bool,
    /// Tasks waiting in an ephemeral peer's queue (only present for ephemeral peers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u64>,
    /// The notices in force on this runtime (spec 10 §3: its model API refused it; only
    /// present when there are some), as `GET /fleet/v1/notices` shows them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices: Vec<crate::notices::Notice>,
    /// The verbs of `POST /fleet/v1/peers/<p>/<verb>` that work on this runtime in its state
    /// ([`actions`]); only in the fleet API's rows ([`add_daemon_view`]), absent from `list
    /// --json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<&'static str>>,
}

/// One peer of `list --json` (spec 07).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeerRow {
    /// Peer name.
    pub personality: String,
    /// Its description.
    pub description: String,
    /// `artificial` or `natural`.
    pub intelligence: String,
    /// The default runtime.
    pub default_runtime: String,
    /// Its working folder.
    pub cwd: std::path::PathBuf,
    /// Each declared runtime's state.
    pub runtimes: Vec<RuntimeRow>,
    /// The profile's wake policy (default `warm`).
    pub wake_policy: String,
    /// Latest activity of a live session, epoch ms (absent when none is live).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_active_ms: Option<u64>,
    /// The runtime with the freshest activity, live or from its transcripts (what `attach`
    /// resumes); the original tool's `list --json` field, read by companion packages.
    /// Absent when no runtime shows any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_active_runtime: Option<String>,
    /// The git worktree its folder is, when `create --worktree` made it (issue 32 item 8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeRow>,
}

/// The `worktree` of a `list --json` row: what git knows of the peer's folder now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorktreeRow {
    /// The repository, as `git -C` takes it (its main working tree, or the bare repository).
    pub repository: std::path::PathBuf,
    /// The branch checked out (absent when HEAD is detached or git does not know the folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit checked out (absent when git does not know the folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// What is wrong in a few words (git no longer knows the worktree, the repository is
    /// gone…; `iapeer verify` says what to do); absent when git knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The runtime of the freshest activity among `(runtime, epoch ms)` pairs; the earlier-listed
/// runtime wins a tie. `None` for no activity at all.
pub fn freshest(activity: impl IntoIterator<Item = (String, Option<u64>)>) -> Option<String> {
    let mut best: Option<(String, u64)> = None;
    for (rt, t) in activity {
        if let Some(t) = t {
            if best.as_ref().is_none_or(|(_, b)| t > *b) {
                best = Some((rt, t));
            }
        }
    }
    best.map(|(rt, _)| rt)
}

/// Build the `list --json` rows (spec 07): `{personality, description, intelligence,
/// default_runtime, cwd, runtimes:[{runtime, status, attached?}], wake_policy, last_active_ms?}`.
/// `status` is `live`, `asleep`, `stopped` or `parked`; `queue_depth` is present for ephemeral
/// peers. `stopped(identity)` reads the stop flag; `wake_policy(peer)` reads the profile;
/// `queue_depth(identity)` counts an ephemeral identity's queued tasks.
pub fn build_rows(
    registry: &Registry,
    live: &LiveState,
    stopped: impl Fn(&str) -> bool,
    wake_policy: impl Fn(&crate::registry::RegistryPeer) -> Option<String>,
    queue_depth: impl Fn(&str) -> u64,
) -> Vec<PeerRow> {
    registry
        .peers
        .iter()
        .map(|p| {
            let policy = wake_policy(p).unwrap_or_else(|| "warm".into());
            let ephemeral = policy == crate::profile::WAKE_POLICY_EPHEMERAL;
            let mut last_active: Option<u64> = None;
            let runtimes: Vec<RuntimeRow> = p
                .runtimes
                .iter()
                .map(|rt| {
                    let id = format!("{rt}-{}", p.personality);
                    let mut attached = false;
                    let status = if let Some(s) = live.sessions.get(&id) {
                        attached = s.attached > 0;
                        let t = s.last_active_ms;
                        last_active = Some(last_active.map_or(t, |x: u64| x.max(t)));
                        "live"
                    } else if stopped(&id) {
                        "stopped"
                    } else if live.parked.contains(&id) {
                        "parked"
                    } else {
                        "asleep"
                    };
                    RuntimeRow {
                        runtime: rt.clone(),
                        status: status.to_string(),
                        problem: None,
                        attached,
                        queue_depth: ephemeral.then(|| queue_depth(&id)),
                        notices: Vec::new(),
                        actions: None,
                    }
                })
                .collect();
            PeerRow {
                personality: p.personality.clone(),
                description: p.description.clone(),
                intelligence: p.intelligence.clone(),
                default_runtime: p.default_runtime.clone(),
                cwd: p.cwd.clone(),
                runtimes,
                wake_policy: policy,
                last_active_ms: last_active,
                last_active_runtime: freshest(p.runtimes.iter().map(|rt| {
                    let id = format!("{rt}-{}", p.personality);
                    (rt.clone(), live.sessions.get(&id).map(|s| s.last_active_ms))
                })),
                worktree: None,
            }
        })
        .collect()
}

/// Mark `missing` (with the reason) every runtime of `rows` that is not running and not
/// stopped, for which `missing(runtime, cwd)` says why its program cannot start: such a peer
/// is not asleep, it cannot wake.
pub fn mark_missing(
    rows: &mut [PeerRow],
    missing: impl Fn(&str, &std::path::Path) -> Option<String>,
) {
    for row in rows {
        for rt in &mut row.runtimes {
            if matches!(rt.status.as_str(), "asleep" | "parked") {
                if let Some(why) = missing(&rt.runtime, &row.cwd) {
                    rt.status = "missing".into();
                    rt.problem = Some(why);
                }
            }
        }
    }
}

/// What a runtime's adapter can do, for [`actions`]: its kind and whether it has interrupt
/// keys and a compact command ([`crate::adapter::Adapter::interrupt_keys`],
/// [`crate::adapter::Adapter::compact`]), the same answers the router's `interrupt` and
/// `compact` go by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abilities {
    /// Agent (pty, woken on demand) or router (always on: a human's inbox, a service).
    pub kind: crate::adapter::RuntimeKind,
    /// `interrupt` works on a live session.
    pub interrupt: bool,
    /// `compact` works on a live session.
    pub compact: bool,
}

impl Abilities {
    /// The abilities of `adapter`.
    pub fn of(adapter: &dyn crate::adapter::Adapter) -> Abilities {
        Abilities {
            kind: adapter.kind(),
            interrupt: adapter.interrupt_keys().is_some(),
            compact: adapter.compact(std::path::Path::new("/")).is_some(),
        }
    }
}

/// The verbs of `POST /fleet/v1/peers/<p>/<verb>` that work on a runtime with `abilities` in
/// state `status` (a `list --json` status), in the order a person reaches for them; the
/// router refuses the others (`wake`, `interrupt` and `compact` of a human's or a service's
/// runtime, `interrupt` of a session that is not live, a `start` of what is not stopped…).
/// An agent: live → `interrupt`, `compact` (each when it has them), `restart`, `new`,
/// `stop`; asleep → `wake`, `new`, `stop`; parked (crash-looping) → `restart`, `new`,
/// `stop`. A router runtime (always on): `restart`, `stop` while not stopped. Stopped →
/// `start`; missing (it cannot start) → none. Pure.
pub fn actions(abilities: Abilities, status: &str) -> Vec<&'static str> {
    use crate::adapter::RuntimeKind;
    match (abilities.kind, status) {
        (_, "stopped") => vec!["start"],
        (_, "missing") => vec![],
        (RuntimeKind::Router, _) => vec!["restart", "stop"],
        (RuntimeKind::Agent, "live") => {
            let mut v = Vec::new();
            if abilities.interrupt {
                v.push("interrupt");
            }
            if abilities.compact {
                v.push("compact");
            }
            v.extend(["restart", "new", "stop"]);
            v
        }
        (RuntimeKind::Agent, "parked") => vec!["restart", "new", "stop"],
        (RuntimeKind::Agent, _) => vec!["wake", "new", "stop"],
    }
}

/// What only the daemon knows of its rows, added for the fleet API (issue 30 item 5): a
/// runtime that is not running and cannot start — `abilities(runtime)` fails (the daemon
/// cannot find an agent's program, a router runtime is not installed or its manifest is
/// broken: the text says why and what to do), or its peer's folder is gone — becomes
/// `missing` with that `problem`; an agent runtime `crash_loop(identity)` names as refused by
/// the crash-loop guard becomes `parked` with its reason; then every runtime gets its
/// [`actions`] (none for one whose adapter cannot be made). `E` is the daemon's error for a
/// runtime it cannot use (`runtime::RuntimeError`); its `Display` is the `problem`.
pub fn add_daemon_view<E: std::fmt::Display + Clone>(
    rows: &mut [PeerRow],
    abilities: impl Fn(&str) -> Result<Abilities, E>,
    crash_loop: impl Fn(&str) -> Option<String>,
) {
    // One look per runtime (an agent's is a search for its program).
    let mut known: HashMap<String, Result<Abilities, E>> = HashMap::new();
    for rt in rows.iter().flat_map(|r| &r.runtimes) {
        if !known.contains_key(&rt.runtime) {
            known.insert(rt.runtime.clone(), abilities(&rt.runtime));
        }
    }
    let abilities = |rt: &str| known.get(rt).cloned().unwrap_or_else(|| abilities(rt));
    mark_missing(rows, |rt, cwd| {
        if !cwd.is_dir() {
            return Some(format!(
                "its working folder {} does not exist — restore it, or run iapeer init in the \
                 new folder",
                cwd.display()
            ));
        }
        abilities(rt).err().map(|e| e.to_string())
    });
    for row in rows {
        for rt in &mut row.runtimes {
            let able = abilities(&rt.runtime).ok();
            if rt.status == "asleep"
                && able.is_some_and(|a| a.kind == crate::adapter::RuntimeKind::Agent)
            {
                if let Some(why) = crash_loop(&format!("{}-{}", rt.runtime, row.personality)) {
                    rt.status = "parked".into();
                    rt.problem = Some(why);
                }
            }
            rt.actions = Some(able.map_or_else(Vec::new, |a| actions(a, &rt.status)));
        }
    }
}

/// Put each notice on the runtime row it is about (spec 10 §3); a notice whose peer or
/// runtime is no longer registered is left out.
pub fn attach_notices(rows: &mut [PeerRow], notices: Vec<crate::notices::Notice>) {
    for n in notices {
        let rt = rows
            .iter_mut()
            .filter(|r| r.personality == n.personality)
            .flat_map(|r| r.runtimes.iter_mut())
            .find(|rt| rt.runtime == n.runtime);
        if let Some(rt) = rt {
            rt.notices.push(n);
        }
    }
}

/// Give each row of a peer made by `create --worktree` its [`WorktreeRow`] (one `git worktree
/// list` per repository).
fn attach_worktrees(rows: &mut [PeerRow]) {
    let mut listings = HashMap::new();
    for row in rows {
        let Some(record) = Profile::worktree_record(&row.cwd) else {
            continue;
        };
        let listed = listings
            .entry(record.repository.clone())
            .or_insert_with(|| crate::worktree::Repository::at(&record.repository).worktrees());
        let state = crate::worktree::state_in(&row.cwd, &record, listed);
        let problem = state.summary(&record);
        let (branch, head) = match state {
            crate::worktree::State::Known(l) => (l.branch, l.head),
            _ => (None, None),
        };
        row.worktree = Some(WorktreeRow {
            repository: crate::worktree::shown_repository(&record.repository),
            branch,
            head,
            problem,
        });
    }
}

/// The rows of `iapeer list --json` and of `GET /fleet/v1/snapshot`: [`build_rows`] with the
/// stop flags, wake policies and ephemeral queue depths read from `paths`, runtimes whose
/// program cannot start marked `missing`, and, for a peer with no live session, the runtime
/// of its freshest transcript as `last_active_runtime`. Reads files (registry already loaded
/// by the caller, markers, profiles, transcripts); never fails (an unreadable file counts as
/// absent).
pub fn list_rows(paths: &Paths, registry: &Registry, live: &LiveState) -> Vec<PeerRow> {
    let mut rows = build_rows(
        registry,
        live,
        |id| Markers::parse(paths, id).is_ok_and(|m| m.is_set(Flag::Stopped)),
        |p| {
            Profile::read(&p.cwd)
                .ok()
                .flatten()
                .and_then(|pr| pr.wake_policy.clone())
        },
        |id| Markers::parse(paths, id).map_or(0, |m| m.task_queue().depth()),
    );
    mark_missing(&mut rows, |rt, cwd| {
        crate::runtime::router::missing_program(paths, rt, cwd)
    });
    attach_notices(&mut rows, crate::notices::current(paths));
    attach_worktrees(&mut rows);
    // Without a live session, the runtime's own transcripts tell which was active last: those
    // of the peer's recorded conversation, not a person's in the same folder (issue 32).
    for row in rows.iter_mut().filter(|r| r.last_active_runtime.is_none()) {
        row.last_active_runtime = freshest(row.runtimes.iter().map(|r| {
            let recorded = crate::names::Identity::new(&r.runtime, &row.personality)
                .ok()
                .and_then(|id| Markers::new(paths, &id).conversation());
            let t = crate::runtime::adapter_for(paths, &r.runtime)
                .ok()
                .map(|a| recorded.and_then(|id| a.for_conversation(&id)).unwrap_or(a))
                .and_then(|a| a.activity_ms(&row.cwd));
            (r.runtime.clone(), t)
        }));
    }
    rows
}

pub mod remote {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::adapter::RuntimeKind;

    const ECHO: Abilities = Abilities {
        kind: RuntimeKind::Agent,
        interrupt: true,
        compact: false,
    };
    const CLAUDE: Abilities = Abilities {
        kind: RuntimeKind::Agent,
        interrupt: true,
        compact: true,
    };
    const SERVICE: Abilities = Abilities {
        kind: RuntimeKind::Router,
        interrupt: false,
        compact: false,
    };

    /// Issue 30 item 5: only what works on the runtime's kind, in its state.
    #[test]
    fn each_kind_offers_only_the_verbs_that_work_on_it() {
        assert_eq!(
            actions(CLAUDE, "live"),
            ["interrupt", "compact", "restart", "new", "stop"]
        );
        assert_eq!(
            actions(ECHO, "live"),
            ["interrupt", "restart", "new", "stop"]
        );
        assert_eq!(actions(ECHO, "asleep"), ["wake", "new", "stop"]);
        assert_eq!(actions(ECHO, "parked"), ["restart", "new", "stop"]);
        assert_eq!(actions(ECHO, "stopped"), ["start"]);
        assert!(actions(CLAUDE, "missing").is_empty());
        for status in ["live", "asleep", "parked"] {
            assert_eq!(actions(SERVICE, status), ["restart", "stop"], "{status}");
        }
        assert_eq!(actions(SERVICE, "stopped"), ["start"]);
    }

    fn row(personality: &str, cwd: &std::path::Path, runtimes: &[(&str, &str)]) -> PeerRow {
        PeerRow {
            personality: personality.into(),
            description: String::new(),
            intelligence: "artificial".into(),
            default_runtime: runtimes[0].0.into(),
            cwd: cwd.to_path_buf(),
            runtimes: runtimes
                .iter()
                .map(|(rt, status)| RuntimeRow {
                    runtime: rt.to_string(),
                    status: status.to_string(),
                    problem: None,
                    attached: false,
                    queue_depth: None,
                    notices: Vec::new(),
                    actions: None,
                })
                .collect(),
            wake_policy: "warm".into(),
            last_active_ms: None,
            last_active_runtime: None,
            worktree: None,
        }
    }

    /// A peer the daemon cannot start is said so on its row: its agent's program not found,
    /// its folder gone, its agent crash-looping; a running session is left as it is.
    #[test]
    fn what_the_daemon_cannot_start_is_missing_or_parked_with_why() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path();
        let mut rows = vec![
            row("a", here, &[("claude", "asleep"), ("echo", "asleep")]),
            row("b", here, &[("claude", "live")]),
            row("gone", &here.join("nope"), &[("echo", "asleep")]),
            row("you", here, &[("human", "live")]),
        ];
        let abilities = |rt: &str| match rt {
            "claude" => Err("claude is not installed — looked at, in order: …".to_string()),
            "echo" => Ok(ECHO),
            _ => Ok(SERVICE),
        };
        add_daemon_view(&mut rows, abilities, |id| {
            (id == "echo-a").then(|| "crash-looping: …".to_string())
        });
        let view = |r: &RuntimeRow| {
            (
                r.status.clone(),
                r.problem.clone().unwrap_or_default(),
                r.actions.clone().unwrap(),
            )
        };
        let a: Vec<_> = rows[0].runtimes.iter().map(view).collect();
        assert_eq!(a[0].0, "missing");
        assert!(a[0].1.starts_with("claude is not installed"), "{a:?}");
        assert!(a[0].2.is_empty());
        assert_eq!(a[1].0, "parked");
        assert_eq!(a[1].1, "crash-looping: …");
        assert_eq!(a[1].2, ["restart", "new", "stop"]);
        let b = view(&rows[1].runtimes[0]);
        assert_eq!((b.0.as_str(), b.2.len()), ("live", 0), "live stays live");
        let gone = view(&rows[2].runtimes[0]);
        assert_eq!(gone.0, "missing");
        assert!(gone.1.contains("does not exist"), "{gone:?}");
        assert_eq!(view(&rows[3].runtimes[0]).2, ["restart", "stop"]);
    }

    #[test]
    fn the_freshest_runtime_is_the_last_active_one() {
        let a = |rt: &str, t: Option<u64>| (rt.to_string(), t);
        assert_eq!(
            freshest([a("claude", Some(5)), a("codex", Some(9))]).as_deref(),
            Some("codex")
        );
        assert_eq!(
            freshest([a("claude", Some(9)), a("codex", Some(9))]).as_deref(),
            Some("claude")
        );
        assert_eq!(
            freshest([a("claude", None), a("codex", Some(1))]).as_deref(),
            Some("codex")
        );
        assert_eq!(freshest([a("claude", None)]), None);
    }
}

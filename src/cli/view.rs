//! `iapeer list` (spec 07 "Peers"): one row per peer with its runtimes' states. Works without
//! the daemon (then every agent shows asleep and the header says the daemon is down).

use std::collections::HashMap;
use std::io::IsTerminal;

use serde::Serialize;

use super::client::Client;
use super::parse::Invocation;
use super::spec::flags;
use super::{json_line, paths, print, CliError, CliResult};
use crate::markers::{Flag, Markers};
use crate::paths::Paths;
use crate::profile::Profile;
use crate::protocol::{Answer, ListReply, Request, SessionInfo};
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
    /// not there: it cannot start).
    pub status: String,
    /// Why it cannot start, with what to do (only present for `missing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// A terminal is attached (only present when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub attached: bool,
    /// Tasks waiting in an ephemeral peer's queue (only present for ephemeral peers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u64>,
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

fn glyph(status: &str) -> &'static str {
    match status {
        "live" => "●",
        "stopped" => "✕",
        "parked" => "◌",
        "missing" => "!",
        _ => "○",
    }
}

/// A compact age: `12s`, `5m`, `3h`, `2d`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Render rows as the text table; descriptions are cut to `width` columns when given.
pub fn render_table(rows: &[PeerRow], now_ms: u64, width: Option<usize>) -> String {
    let cells: Vec<(String, String, String, String)> = rows
        .iter()
        .map(|r| {
            let rts: Vec<String> = r
                .runtimes
                .iter()
                .map(|x| {
                    let mut s = format!("{}{}", glyph(&x.status), x.runtime);
                    if x.runtime == r.default_runtime {
                        s.push('*');
                    }
                    if x.attached {
                        s.push('@');
                    }
                    if let Some(n) = x.queue_depth.filter(|n| *n > 0) {
                        s.push_str(&format!("[{n}]"));
                    }
                    s
                })
                .collect();
            let active = r
                .last_active_ms
                .map(|t| age(now_ms.saturating_sub(t)))
                .unwrap_or_else(|| "-".into());
            (
                r.personality.clone(),
                rts.join(" "),
                active,
                r.description.clone(),
            )
        })
        .collect();
    let w0 = cells
        .iter()
        .map(|c| c.0.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let w1 = cells
        .iter()
        .map(|c| c.1.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let w2 = cells.iter().map(|c| c.2.len()).max().unwrap_or(0).max(6);
    let header = format!(
        "{:w0$}  {:w1$}  {:w2$}  DESCRIPTION",
        "NAME", "RUNTIMES", "ACTIVE"
    );
    let mut out: String = match width {
        Some(w) => header.chars().take(w).collect(),
        None => header,
    };
    out.push('\n');
    for (name, rts, active, desc) in cells {
        let mut line = format!("{name:w0$}  {rts:w1$}  {active:w2$}  ");
        let room = width.map(|w| w.saturating_sub(line.chars().count()));
        match room {
            Some(room) if desc.chars().count() > room => {
                line.extend(desc.chars().take(room.saturating_sub(1)));
                line.push('…');
            }
            _ => line.push_str(&desc),
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Ask the daemon for live sessions; `None` when it is not running.
pub fn live_state(paths: &Paths) -> Option<LiveState> {
    let mut c = Client::connect(paths).ok()?;
    match c.request::<ListReply>(&Request::List, |_| {}).ok()? {
        Answer::Ok(list) => Some(LiveState::from_reply(list)),
        Answer::Failed(_) => None,
    }
}

/// Run `iapeer list`.
pub fn list(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let registry = Registry::load(&paths).map_err(|e| CliError::Failed(e.to_string()))?;
    let live = live_state(&paths);
    let up = live.is_some();
    let live = live.unwrap_or_default();
    let mut rows = build_rows(
        &registry,
        &live,
        |id| Markers::parse(&paths, id).is_ok_and(|m| m.is_set(Flag::Stopped)),
        |p| {
            Profile::read(&p.cwd)
                .ok()
                .flatten()
                .and_then(|pr| pr.wake_policy.clone())
        },
        |id| Markers::parse(&paths, id).map_or(0, |m| m.task_queue().depth()),
    );
    mark_missing(&mut rows, |rt, cwd| {
        crate::runtime::router::missing_program(&paths, rt, cwd)
    });
    // Without a live session, the runtime's own transcripts tell which was active last.
    for row in rows.iter_mut().filter(|r| r.last_active_runtime.is_none()) {
        row.last_active_runtime = freshest(row.runtimes.iter().map(|r| {
            let t = crate::runtime::adapter_for(&paths, &r.runtime)
                .ok()
                .and_then(|a| a.activity_ms(&row.cwd));
            (r.runtime.clone(), t)
        }));
    }
    if inv.flag(flags::JSON) {
        return print(&format!("{}\n", json_line(&rows)));
    }
    let width = std::io::stdout()
        .is_terminal()
        .then(|| super::attach::terminal_size().map(|(_, c)| c as usize))
        .flatten();
    let header = if up {
        format!("daemon: running, {} live session(s)\n", live.sessions.len())
    } else {
        "daemon: down — every agent shows asleep (start it with: iapeer daemon)\n".to_string()
    };
    if rows.is_empty() {
        return print(&format!(
            "{header}no peers yet — create one with: iapeer create <name> --runtime <rt>\n"
        ));
    }
    let mut problems = String::new();
    for row in &rows {
        for rt in row.runtimes.iter().filter(|r| r.problem.is_some()) {
            let why = rt.problem.as_deref().unwrap_or_default();
            problems.push_str(&format!(
                "! {}: cannot start on {}: {why}\n",
                row.personality, rt.runtime
            ));
        }
    }
    print(&format!(
        "{header}{}{problems}",
        render_table(&rows, crate::clock::now_ms(), width)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryPeer;

    #[test]
    fn a_runtime_that_cannot_start_is_missing_not_asleep() {
        let live = LiveState {
            sessions: HashMap::new(),
            parked: vec!["claude-alice".into()],
        };
        let mut rows = build_rows(&reg(), &live, |id| id == "echo-alice", |_| None, |_| 0);
        let all = rows.clone();
        mark_missing(&mut rows, |_, _| Some("gone".into()));
        for (row, before) in rows.iter().zip(&all) {
            for (rt, was) in row.runtimes.iter().zip(&before.runtimes) {
                match was.status.as_str() {
                    "asleep" | "parked" => {
                        assert_eq!(
                            (rt.status.as_str(), rt.problem.as_deref()),
                            ("missing", Some("gone"))
                        )
                    }
                    _ => assert_eq!(rt, was, "live and stopped are kept"),
                }
            }
        }
        assert!(rows
            .iter()
            .flat_map(|r| &r.runtimes)
            .any(|r| r.status == "missing"));
        assert!(rows
            .iter()
            .flat_map(|r| &r.runtimes)
            .any(|r| r.status == "stopped"));
        let mut rows = all.clone();
        mark_missing(&mut rows, |_, _| None);
        assert_eq!(rows, all);
    }

    fn reg() -> Registry {
        Registry {
            version: 2,
            peers: vec![
                RegistryPeer {
                    personality: "alice".into(),
                    default_runtime: "echo".into(),
                    runtimes: vec!["echo".into(), "claude".into()],
                    description: "Demo peer that echoes".into(),
                    intelligence: "artificial".into(),
                    cwd: "/w/alice".into(),
                    interfaces: None,
                },
                RegistryPeer {
                    personality: "bot".into(),
                    default_runtime: "console".into(),
                    runtimes: vec!["console".into()],
                    description: String::new(),
                    intelligence: "natural".into(),
                    cwd: "/w/bot".into(),
                    interfaces: None,
                },
            ],
        }
    }

    /// Spec 07 `list`: an ephemeral peer's runtimes carry their queue depth (JSON
    /// `queue_depth`, and `[n]` after the runtime in the table); other peers have none.
    #[test]
    fn ephemeral_rows_carry_their_queue_depth() {
        let policy = |p: &crate::registry::RegistryPeer| {
            (p.personality == "alice").then(|| "ephemeral".to_string())
        };
        let depth = |id: &str| if id == "echo-alice" { 3 } else { 0 };
        let rows = build_rows(&reg(), &LiveState::default(), |_| false, policy, depth);
        assert_eq!(rows[0].wake_policy, "ephemeral");
        assert_eq!(rows[0].runtimes[0].queue_depth, Some(3));
        assert_eq!(rows[0].runtimes[1].queue_depth, Some(0));
        assert_eq!(rows[1].runtimes[0].queue_depth, None);
        let json = serde_json::to_string(&rows[0].runtimes).unwrap();
        assert!(
            json.contains(r#""runtime":"echo","status":"asleep","queue_depth":3"#),
            "{json}"
        );
        let table = render_table(&rows, 0, None);
        assert!(table.contains("○echo*[3] ○claude"), "{table}");
    }

    #[test]
    fn rows_carry_states_and_activity() {
        let session = SessionInfo {
            identity: "echo-alice".into(),
            personality: "alice".into(),
            runtime: "echo".into(),
            status: "live".into(),
            attached: 1,
            pid: 42,
            woke_at_ms: 1000,
            last_active_ms: 5000,
            busy: false,
            mode: "fresh".into(),
        };
        let live = LiveState::from_reply(ListReply {
            sessions: vec![session],
            parked: vec!["console-bot".into()],
        });
        let rows = build_rows(&reg(), &live, |id| id == "claude-alice", |_| None, |_| 0);
        let rt = |runtime: &str, status: &str, attached| RuntimeRow {
            runtime: runtime.into(),
            status: status.into(),
            problem: None,
            attached,
            queue_depth: None,
        };
        assert_eq!(
            rows[0].runtimes,
            [rt("echo", "live", true), rt("claude", "stopped", false)]
        );
        assert_eq!(rows[0].last_active_ms, Some(5000));
        assert_eq!(rows[0].wake_policy, "warm");
        assert_eq!(rows[1].runtimes, [rt("console", "parked", false)]);
        // `attached` and `last_active_ms` appear only when set; keys print sorted.
        assert_eq!(
            json_line(&rows[1]),
            r#"{"cwd":"/w/bot","default_runtime":"console","description":"","intelligence":"natural","personality":"bot","runtimes":[{"runtime":"console","status":"parked"}],"wake_policy":"warm"}"#
        );
        assert_eq!(
            json_line(&rows[0].runtimes[0]),
            r#"{"attached":true,"runtime":"echo","status":"live"}"#
        );
        let table = render_table(&rows, 17_000, Some(40));
        assert!(table.contains("●echo*@ ✕claude"), "{table}");
        assert!(table.contains("12s"), "{table}");
        assert!(table.lines().all(|l| l.chars().count() <= 40), "{table}");
        assert!(table.contains('…'), "{table}");
    }

    #[test]
    fn ages() {
        assert_eq!(age(59_000), "59s");
        assert_eq!(age(60_000), "1m");
        assert_eq!(age(7_200_000), "2h");
        assert_eq!(age(172_800_000), "2d");
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

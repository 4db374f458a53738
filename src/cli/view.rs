//! `iapeer list` (spec 07 "Peers"): one row per peer with its runtimes' states. Works without
//! the daemon (then every agent shows asleep and the header says the daemon is down).

use std::collections::HashMap;
use std::io::IsTerminal;

use serde_json::{json, Value};

use super::client::Client;
use super::parse::Invocation;
use super::spec::flags;
use super::{paths, print, CliError, CliResult};
use crate::markers::{Flag, Markers};
use crate::paths::Paths;
use crate::profile::Profile;
use crate::registry::Registry;

/// What the daemon reported about live sessions (`list` op), keyed by identity.
#[derive(Debug, Default)]
pub struct LiveState {
    /// identity → the session object of the `list` op.
    pub sessions: HashMap<String, Value>,
    /// Parked always-on identities.
    pub parked: Vec<String>,
}

impl LiveState {
    /// Read it from a `list` answer.
    pub fn from_answer(v: &Value) -> LiveState {
        let sessions = v["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| Some((s["identity"].as_str()?.to_string(), s.clone())))
            .collect();
        let parked = v["parked"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect();
        LiveState { sessions, parked }
    }
}

/// Build the `list --json` rows (spec 07): `{personality, description, intelligence,
/// default_runtime, cwd, runtimes:[{runtime, status, attached?}], wake_policy, last_active_ms?}`.
/// `status` is `live`, `asleep`, `stopped` or `parked`. `stopped(identity)` reads the stop flag;
/// `wake_policy(peer)` reads the profile.
pub fn build_rows(
    registry: &Registry,
    live: &LiveState,
    stopped: impl Fn(&str) -> bool,
    wake_policy: impl Fn(&crate::registry::RegistryPeer) -> Option<String>,
) -> Vec<Value> {
    registry
        .peers
        .iter()
        .map(|p| {
            let mut last_active: Option<u64> = None;
            let runtimes: Vec<Value> = p
                .runtimes
                .iter()
                .map(|rt| {
                    let id = format!("{rt}-{}", p.personality);
                    let mut r = json!({"runtime": rt});
                    if let Some(s) = live.sessions.get(&id) {
                        r["status"] = json!("live");
                        if s["attached"].as_u64().unwrap_or(0) > 0 {
                            r["attached"] = json!(true);
                        }
                        if let Some(t) = s["last_active_ms"].as_u64() {
                            last_active = Some(last_active.map_or(t, |x: u64| x.max(t)));
                        }
                    } else if stopped(&id) {
                        r["status"] = json!("stopped");
                    } else if live.parked.contains(&id) {
                        r["status"] = json!("parked");
                    } else {
                        r["status"] = json!("asleep");
                    }
                    r
                })
                .collect();
            let mut row = json!({
                "personality": p.personality,
                "description": p.description,
                "intelligence": p.intelligence,
                "default_runtime": p.default_runtime,
                "cwd": p.cwd,
                "runtimes": runtimes,
                "wake_policy": wake_policy(p).unwrap_or_else(|| "warm".into()),
            });
            if let Some(t) = last_active {
                row["last_active_ms"] = json!(t);
            }
            row
        })
        .collect()
}

fn glyph(status: &str) -> &'static str {
    match status {
        "live" => "●",
        "stopped" => "✕",
        "parked" => "◌",
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
pub fn render_table(rows: &[Value], now_ms: u64, width: Option<usize>) -> String {
    let cells: Vec<(String, String, String, String)> = rows
        .iter()
        .map(|r| {
            let def = r["default_runtime"].as_str().unwrap_or("");
            let rts: Vec<String> = r["runtimes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| {
                    let rt = x["runtime"].as_str().unwrap_or("?");
                    let mut s = format!("{}{rt}", glyph(x["status"].as_str().unwrap_or("")));
                    if rt == def {
                        s.push('*');
                    }
                    if x["attached"] == json!(true) {
                        s.push('@');
                    }
                    s
                })
                .collect();
            let active = r["last_active_ms"]
                .as_u64()
                .map(|t| age(now_ms.saturating_sub(t)))
                .unwrap_or_else(|| "-".into());
            (
                r["personality"].as_str().unwrap_or("").to_string(),
                rts.join(" "),
                active,
                r["description"].as_str().unwrap_or("").to_string(),
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
    let v = c.request(&json!({"op": "list"}), |_| {}).ok()?;
    (v["ok"] == json!(true)).then(|| LiveState::from_answer(&v))
}

/// Run `iapeer list`.
pub fn list(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let registry = Registry::load(&paths).map_err(|e| CliError::Failed(e.to_string()))?;
    let live = live_state(&paths);
    let up = live.is_some();
    let live = live.unwrap_or_default();
    let rows = build_rows(
        &registry,
        &live,
        |id| Markers::parse(&paths, id).is_ok_and(|m| m.is_set(Flag::Stopped)),
        |p| {
            Profile::read(&p.cwd)
                .ok()
                .flatten()
                .and_then(|pr| pr.wake_policy.clone())
        },
    );
    if inv.flag(flags::JSON) {
        return print(&format!("{}\n", Value::Array(rows)));
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
    print(&format!(
        "{header}{}",
        render_table(&rows, crate::clock::now_ms(), width)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryPeer;

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

    #[test]
    fn rows_carry_states_and_activity() {
        let live = LiveState::from_answer(
            &json!({"sessions":[{"identity":"echo-alice","attached":1,"last_active_ms":5000}],"parked":["console-bot"]}),
        );
        let rows = build_rows(&reg(), &live, |id| id == "claude-alice", |_| None);
        assert_eq!(
            rows[0]["runtimes"],
            json!([{"runtime":"echo","status":"live","attached":true},{"runtime":"claude","status":"stopped"}])
        );
        assert_eq!(rows[0]["last_active_ms"], json!(5000));
        assert_eq!(rows[0]["wake_policy"], json!("warm"));
        assert_eq!(
            rows[1]["runtimes"],
            json!([{"runtime":"console","status":"parked"}])
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
}

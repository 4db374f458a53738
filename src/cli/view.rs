//! `iapeer list` (spec 07 "Peers"): one row per peer with its runtimes' states. Works without
//! the daemon (then every agent shows asleep and the header says the daemon is down).

use std::io::IsTerminal;

use super::client::Client;
use super::parse::Invocation;
use super::spec::flags;
use super::{json_line, paths, print, CliResult};
use crate::paths::Paths;
use crate::protocol::{call, Answer};
use crate::registry::Registry;
use crate::roster::remote::RemoteRow;
use crate::roster::{list_rows, LiveState, PeerRow};

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

/// Render rows as the text table; descriptions are cut to `width` columns when given. Every
/// cell is a one-line field with its control characters visible ([`crate::visible::line`]: a
/// registry entry is not checked for them, other tools write it too).
pub fn render_table(rows: &[PeerRow], now_ms: u64, width: Option<usize>) -> String {
    /// NAME, RUNTIMES, ACTIVE, DESCRIPTION and BRANCH of a row.
    type Cells = (String, String, String, String, String);
    let cells: Vec<Cells> = rows
        .iter()
        .map(|r| {
            let rts: Vec<String> = r
                .runtimes
                .iter()
                .map(|x| runtime_cell(x, &r.default_runtime))
                .collect();
            let active = r
                .last_active_ms
                .map(|t| age(now_ms.saturating_sub(t)))
                .unwrap_or_else(|| "-".into());
            (
                r.personality.clone(),
                crate::visible::line(&rts.join(" ")).into_owned(),
                active,
                crate::visible::line(&r.description).into_owned(),
                r.worktree
                    .as_ref()
                    .map(|w| branch_cell(w).into_owned())
                    .unwrap_or_default(),
            )
        })
        .collect();
    // The BRANCH column only when a peer's folder is a git worktree (issue 32 item 8).
    let branches = rows.iter().any(|r| r.worktree.is_some());
    // A column's width: its widest cell in characters, at least `min` (its heading).
    let widest = |cell: fn(&Cells) -> &str, min: usize| {
        let widths = cells.iter().map(|c| cell(c).chars().count());
        widths.max().unwrap_or(0).max(min)
    };
    let w0 = widest(|c| &c.0, 4);
    let w1 = widest(|c| &c.1, 8);
    let w2 = widest(|c| &c.2, 6);
    let w3 = widest(|c| &c.4, 6);
    let branch_head = if branches {
        format!("{:w3$}  ", "BRANCH")
    } else {
        String::new()
    };
    let header = format!(
        "{:w0$}  {:w1$}  {:w2$}  {branch_head}DESCRIPTION",
        "NAME", "RUNTIMES", "ACTIVE"
    );
    let mut out: String = match width {
        Some(w) => header.chars().take(w).collect(),
        None => header,
    };
    out.push('\n');
    for (name, rts, active, desc, branch) in cells {
        let mut line = format!("{name:w0$}  {rts:w1$}  {active:w2$}  ");
        if branches {
            line.push_str(&format!("{branch:w3$}  "));
        }
        push_cut(&mut line, &desc, width);
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let notices: Vec<&crate::notices::Notice> = rows
        .iter()
        .flat_map(|r| r.runtimes.iter().flat_map(|x| x.notices.iter()))
        .collect();
    if !notices.is_empty() {
        out.push_str(
            "\nNOTICES (its model API refuses a live agent, or it waits for a human's approval)\n",
        );
        for n in notices {
            out.push_str(&crate::notices::describe(n));
            out.push('\n');
        }
    }
    out
}

/// Append `text` (a row's last cell) to `line`, cut to end by column `width` when given: its
/// last kept character replaced by `…` when it does not fit. Pure.
fn push_cut(line: &mut String, text: &str, width: Option<usize>) {
    let room = width.map(|w| w.saturating_sub(line.chars().count()));
    match room {
        Some(room) if text.chars().count() > room => {
            line.extend(text.chars().take(room.saturating_sub(1)));
            line.push('…');
        }
        _ => line.push_str(text),
    }
}

/// One runtime in the RUNTIMES cell: its status glyph and name, `*` for the default runtime,
/// `@` when attached, `[n]` queued messages, `(kind×count)` per notice.
fn runtime_cell(x: &crate::roster::RuntimeRow, default_runtime: &str) -> String {
    let mut s = format!("{}{}", glyph(&x.status), x.runtime);
    if x.runtime == default_runtime {
        s.push('*');
    }
    if x.attached {
        s.push('@');
    }
    if let Some(n) = x.queue_depth.filter(|n| *n > 0) {
        s.push_str(&format!("[{n}]"));
    }
    for n in &x.notices {
        s.push_str(&format!("({}", n.kind));
        if n.count > 1 {
            s.push_str(&format!("×{}", n.count));
        }
        s.push(')');
    }
    s
}

/// The BRANCH cell of a worktree peer: its branch, `(detached)`, or `!` when git does not
/// know the worktree (the problem is said below the table). Its control characters visible.
fn branch_cell(w: &crate::roster::WorktreeRow) -> std::borrow::Cow<'_, str> {
    match (&w.problem, &w.branch) {
        (Some(_), _) => "!".into(),
        (None, Some(b)) => crate::visible::line(b),
        (None, None) => "(detached)".into(),
    }
}

/// Ask the daemon for live sessions; `None` when it is not running.
pub fn live_state(paths: &Paths) -> Option<LiveState> {
    let mut c = Client::connect(paths).ok()?;
    match c.request(&call::List {}, |_| {}).ok()? {
        Answer::Ok(list) => Some(LiveState::from_reply(list)),
        Answer::Failed(_) => None,
    }
}

/// Run `iapeer list`.
pub fn list(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let registry = Registry::load(&paths)?;
    let live = live_state(&paths);
    let up = live.is_some();
    let live = live.unwrap_or_default();
    let rows = list_rows(&paths, &registry, &live);
    let remote = crate::roster::remote::remote_rows(&paths);
    if inv.flag(flags::JSON) {
        let all: Vec<serde_json::Value> = rows
            .iter()
            .map(serde_json::to_value)
            .chain(remote.iter().map(serde_json::to_value))
            .collect::<Result<_, _>>()
            .map_err(|e| super::CliError::failed(format!("internal error: {e}")))?;
        return print(&format!("{}\n", json_line(&all)));
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
    let others = other_hosts(&paths, up, &remote, width);
    if rows.is_empty() {
        return print(&format!(
            "{header}no peers yet — create one with: iapeer create <name> --runtime <rt>\n{others}"
        ));
    }
    let mut problems = String::new();
    for row in &rows {
        if let Some(why) = row.worktree.as_ref().and_then(|w| w.problem.as_deref()) {
            problems.push_str(&format!(
                "! {}: worktree: {}\n",
                row.personality,
                crate::visible::line(why)
            ));
        }
        for rt in row.runtimes.iter().filter(|r| r.problem.is_some()) {
            let why = rt.problem.as_deref().unwrap_or_default();
            problems.push_str(&format!(
                "! {}: cannot start on {}: {}\n",
                row.personality,
                crate::visible::line(&rt.runtime),
                crate::visible::line(why)
            ));
        }
    }
    print(&format!(
        "{header}{}{problems}{others}",
        render_table(&rows, crate::clock::now_ms(), width)
    ))
}

/// The part of `list` about the other hosts of the federation (issue 28 item 2): their
/// peers' table ([`render_remote`]) after a blank line; a line saying they are not known while
/// the daemon is down; nothing when this root has not joined or no other host has peers.
fn other_hosts(paths: &Paths, up: bool, remote: &[RemoteRow], width: Option<usize>) -> String {
    let joined = matches!(crate::federation::effective(paths), Ok(Some(_)));
    match (joined, up, remote.is_empty()) {
        (true, false, _) => {
            "\npeers of other hosts: not known while the daemon is down (its federation link \
             reads them)\n"
                .into()
        }
        (_, _, false) => format!("\n{}", render_remote(remote, width)),
        _ => String::new(),
    }
}

/// The other hosts' peers as a table: `NAME` (`name@host`, as a send names it), `HOST` (with
/// `online` or `offline`), `STATE` (`available`, `stopped`, `offline`), `RUNTIMES` (the
/// default first, marked `*`) and `DESCRIPTION`, every cell one line with its controls
/// visible; cut to `width` columns when given, as [`render_table`] is. Pure.
pub fn render_remote(rows: &[RemoteRow], width: Option<usize>) -> String {
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let mut runtimes = r.runtimes.clone();
            if let Some(first) = runtimes.first_mut() {
                first.push('*');
            }
            let online = if r.host_online { "online" } else { "offline" };
            [
                r.address.clone(),
                format!("{} ({online})", r.host),
                r.state.clone(),
                crate::visible::line(&runtimes.join(" ")).into_owned(),
                crate::visible::line(&r.description).into_owned(),
            ]
        })
        .collect();
    let heads = ["NAME", "HOST", "STATE", "RUNTIMES", "DESCRIPTION"];
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            let widest = cells.iter().map(|c| c[i].chars().count()).max();
            widest.unwrap_or(0).max(heads[i].len())
        })
        .collect();
    let line = |c: [&str; 5]| {
        let mut l = String::new();
        for (i, w) in widths.iter().enumerate() {
            l.push_str(&format!("{:w$}  ", c[i]));
        }
        push_cut(&mut l, c[4], width);
        format!("{}\n", l.trim_end())
    };
    let mut out = String::new();
    push_cut(
        &mut out,
        "PEERS OF OTHER HOSTS (send to <name>@<host>)",
        width,
    );
    out.push('\n');
    out.push_str(&line(heads));
    for c in &cells {
        out.push_str(&line([&c[0], &c[1], &c[2], &c[3], &c[4]]));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::protocol::SessionInfo;
    use crate::registry::RegistryPeer;
    use crate::roster::{build_rows, mark_missing, RuntimeRow};

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
                    description: "Demo peer that echoes".into(),
                    ..RegistryPeer::new("alice", &["echo", "claude"], "artificial", "/w/alice")
                },
                RegistryPeer::new("bot", &["console"], "natural", "/w/bot"),
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

    /// A description is not checked for control characters (the registry is written by other
    /// tools too): the table shows it as one line, its controls visible, and `--json` exact
    /// (newcomer walkthrough: a newline split a row, `ESC[2J` cleared the screen).
    #[test]
    fn descriptions_are_one_line_with_visible_controls_in_the_table_only() {
        let mut reg = reg();
        reg.peers[0].description = "line one\nline two \u{1b}[2J\tend".into();
        let rows = build_rows(&reg, &LiveState::default(), |_| false, |_| None, |_| 0);
        let table = render_table(&rows, 0, None);
        assert_eq!(table.lines().count(), 3, "{table}");
        assert!(
            table.contains("line one\u{2424}line two \u{241b}[2J\u{2409}end"),
            "{table}"
        );
        assert!(!table.contains('\u{1b}'), "{table}");
        assert!(
            json_line(&rows[0]).contains(r#""description":"line one\nline two \u001b[2J\tend""#)
        );
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
        let live = LiveState::from_reply(crate::protocol::ListReply {
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
            notices: Vec::new(),
            actions: None,
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
    fn other_hosts_peers_show_their_address_host_and_state() {
        let row = |name: &str, host: &str, online: bool, state: &str| RemoteRow {
            personality: name.into(),
            host: host.into(),
            address: format!("{name}@{host}"),
            host_online: online,
            state: state.into(),
            description: "runs \u{1b}[2J jobs".into(),
            intelligence: "artificial".into(),
            default_runtime: "claude".into(),
            runtimes: vec!["claude".into(), "codex".into()],
        };
        let rows = [
            row("bob", "b", true, "available"),
            row("carol", "build-box", false, "offline"),
        ];
        let table = render_remote(&rows, None);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "PEERS OF OTHER HOSTS (send to <name>@<host>)");
        assert!(
            lines[1].starts_with("NAME             HOST                 STATE"),
            "{table}"
        );
        assert!(
            lines[2].starts_with("bob@b            b (online)           available  claude* codex"),
            "{table}"
        );
        assert!(lines[3].contains("build-box (offline)  offline"), "{table}");
        assert!(!table.contains('\u{1b}'), "{table}");
        // Cut to the terminal's width as the local table is: no line longer, the
        // description ends with `…`.
        let table = render_remote(&rows, Some(70));
        assert!(table.lines().all(|l| l.chars().count() <= 70), "{table}");
        assert!(table.contains("claude* codex  runs"), "{table}");
        assert!(table.lines().nth(2).unwrap().ends_with('…'), "{table}");
        assert_eq!(render_remote(&rows, Some(200)), render_remote(&rows, None));
    }

    #[test]
    fn ages() {
        assert_eq!(age(59_000), "59s");
        assert_eq!(age(60_000), "1m");
        assert_eq!(age(7_200_000), "2h");
        assert_eq!(age(172_800_000), "2d");
    }
}

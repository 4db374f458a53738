//! `iapeer status` (spec 08 §1 "Health"): daemon health, service, peers summary, memory slot.
//! Exit 1 iff the daemon is unhealthy.

use std::time::Duration;

use serde_json::{json, Value};

use super::client::Client;
use super::parse::Invocation;
use super::spec::flags;
use super::view::{build_rows, LiveState};
use super::{paths, print, CliError, CliResult};
use crate::markers::{Flag, Markers};
use crate::paths::Paths;
use crate::registry::Registry;

/// Ask the daemon for `status` with a deadline of 2.5 s (health needs one answered ping).
fn daemon_status(paths: &Paths) -> Option<Value> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let p = paths.clone();
    std::thread::spawn(move || {
        let answer = Client::connect(&p).ok().and_then(|mut c| {
            let ping = c.request(&json!({"op": "ping"}), |_| {}).ok()?;
            if ping["ok"] != json!(true) {
                return None;
            }
            let status = c.request(&json!({"op": "status"}), |_| {}).ok()?;
            let list = c.request(&json!({"op": "list"}), |_| {}).ok()?;
            Some(json!({"status": status, "list": list}))
        });
        let _ = tx.send(answer);
    });
    rx.recv_timeout(Duration::from_millis(2500)).ok().flatten()
}

/// Counts of runtimes by state across all peers: (live, asleep, stopped, parked).
pub fn summarize(rows: &[Value]) -> (usize, usize, usize, usize) {
    let mut c = (0, 0, 0, 0);
    for r in rows
        .iter()
        .flat_map(|r| r["runtimes"].as_array().cloned().unwrap_or_default())
    {
        match r["status"].as_str() {
            Some("live") => c.0 += 1,
            Some("stopped") => c.2 += 1,
            Some("parked") => c.3 += 1,
            _ => c.1 += 1,
        }
    }
    c
}

fn memory_line(paths: &Paths) -> String {
    let Ok(text) = std::fs::read_to_string(paths.memory_provider()) else {
        return "memory: none".into();
    };
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return "memory: none".into();
    };
    match (v["provider"].as_str(), v["version"].as_str()) {
        (Some(p), Some(ver)) if !p.is_empty() && !ver.is_empty() => {
            let hb = v["heartbeat"]
                .as_str()
                .and_then(|h| std::fs::metadata(h).ok()?.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .map(|d| format!(" (heartbeat {}s ago)", d.as_secs()))
                .unwrap_or_default();
            format!("memory: {p} {ver}{hb}")
        }
        _ => "memory: none".into(),
    }
}

/// Run `iapeer status`.
pub fn run(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let answer = daemon_status(&paths);
    let registry = Registry::load(&paths).map_err(|e| CliError::Failed(e.to_string()))?;
    let live = answer
        .as_ref()
        .map(|a| LiveState::from_answer(&a["list"]))
        .unwrap_or_default();
    let rows = build_rows(
        &registry,
        &live,
        |id| Markers::parse(&paths, id).is_ok_and(|m| m.is_set(Flag::Stopped)),
        |_| None,
    );
    let (l, a, s, p) = summarize(&rows);
    let healthy = answer.is_some();
    if inv.flag(flags::JSON) {
        let st = answer
            .as_ref()
            .map(|a| a["status"].clone())
            .unwrap_or(Value::Null);
        print(&format!(
            "{}\n",
            json!({"version": env!("CARGO_PKG_VERSION"), "healthy": healthy, "daemon": st, "service": "none",
                   "peers": {"count": rows.len(), "live": l, "asleep": a, "stopped": s, "parked": p}})
        ))?;
    } else {
        let daemon = match &answer {
            Some(a) => format!(
                "daemon: healthy @ {} + {}",
                a["status"]["tcp"].as_str().unwrap_or("?"),
                a["status"]["sock"].as_str().unwrap_or("?")
            ),
            None => "daemon: NOT healthy (socket not accepting connections)".to_string(),
        };
        print(&format!(
            "iapeer {}\n{daemon}\nservice: none (run in the foreground with: iapeer daemon)\npeers: {} ({l} live, {a} asleep, {s} stopped{})\n{}\n",
            env!("CARGO_PKG_VERSION"),
            rows.len(),
            if p > 0 { format!(", {p} parked") } else { String::new() },
            memory_line(&paths)
        ))?;
    }
    if healthy {
        Ok(())
    } else {
        Err(CliError::Exit(1))
    }
}

//! Lifecycle verbs that talk to the daemon (spec 05 §5): `stop`, `start`, `attach`,
//! `live-runtime` and the bare `iapeer <runtime>`.

use std::io::IsTerminal;

use serde_json::{json, Value};

use super::client::Client;
use super::parse::Invocation;
use super::{paths, print, usage, CliError, CliResult};
use crate::names::normalize;

fn failed(answer: &Value) -> CliError {
    CliError::Failed(answer["error"].as_str().unwrap_or("failed").to_string())
}

/// `stop <peer> [runtime] | --all` and `start …`.
pub fn stop_start(inv: &Invocation, stop: bool) -> CliResult {
    let all = inv.flag("all");
    let peer = inv.positional("peer");
    if all == peer.is_some() {
        return Err(usage(inv, "name a peer or pass --all"));
    }
    let op = if stop { "stop" } else { "start" };
    let req =
        json!({"op": op, "personality": peer, "runtime": inv.positional("runtime"), "all": all});
    let paths = paths()?;
    let answer = Client::connect(&paths)?.request(&req, |_| {})?;
    if answer["ok"] != json!(true) {
        return Err(failed(&answer));
    }
    let list = |k: &str| -> Vec<String> {
        answer[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let text = if stop {
        let ended = list("ended");
        let stopped = list("stopped");
        let mut s = format!(
            "stopped {}",
            if stopped.is_empty() {
                "nothing".to_string()
            } else {
                stopped.join(", ")
            }
        );
        if !ended.is_empty() {
            s.push_str(&format!(" (ended {})", ended.join(", ")));
        }
        s
    } else {
        let cleared = list("cleared");
        let started = list("started");
        let mut s = format!(
            "started {}",
            if cleared.is_empty() {
                "nothing".to_string()
            } else {
                cleared.join(", ")
            }
        );
        if !started.is_empty() {
            s.push_str(&format!(" (running now: {})", started.join(", ")));
        } else if !cleared.is_empty() {
            s.push_str(" — agents wake on their next message");
        }
        s
    };
    print(&format!("{text}\n"))
}

/// `live-runtime <peer>`: the runtime the peer is live on; exit 1 with empty stdout if none.
pub fn live_runtime(inv: &Invocation) -> CliResult {
    let peer = inv
        .positional("peer")
        .ok_or_else(|| usage(inv, "missing <peer>"))?;
    let paths = paths()?;
    let answer = Client::connect(&paths)?
        .request(&json!({"op": "live-runtime", "personality": peer}), |_| {})?;
    match answer["runtime"].as_str() {
        Some(rt) if answer["ok"] == json!(true) => print(&format!("{rt}\n")),
        _ => Err(CliError::Exit(1)),
    }
}

/// `attach <peer> [runtime]`: wake with resume if asleep, then attach this terminal.
pub fn attach(inv: &Invocation) -> CliResult {
    let peer = inv
        .positional("peer")
        .ok_or_else(|| usage(inv, "missing <peer>"))?;
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Failed("attach needs a terminal on stdin".into()));
    }
    let req = json!({"op": "attach", "personality": peer, "runtime": inv.positional("runtime")});
    connect_and_attach(&req, peer)
}

fn connect_and_attach(req: &Value, what: &str) -> CliResult {
    let paths = paths()?;
    let mut client = Client::connect(&paths)?;
    let answer = client.request_with_indicator(req, &format!("attaching to {what}"))?;
    if answer["ok"] != json!(true) {
        return Err(failed(&answer));
    }
    super::attach::run(client.into_stream()).map_err(|e| CliError::Failed(e.to_string()))
}

/// `iapeer <runtime>` in a peer's folder: a fresh session of that peer on `runtime`, then
/// attach (on a TTY) or report and exit.
pub fn runtime_shortcut(runtime: &str, _inv: &Invocation) -> CliResult {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::Failed(format!("cannot read the current folder: {e}")))?;
    let name = cwd
        .file_name()
        .map(|n| normalize(&n.to_string_lossy()))
        .unwrap_or_default();
    if crate::profile::Profile::read(&cwd).ok().flatten().is_none() {
        return Err(CliError::Failed(format!(
            "{} is not a peer's folder — run iapeer init here first (or cd into a peer's folder)",
            cwd.display()
        )));
    }
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let req = json!({"op": "attach", "personality": name, "runtime": runtime, "fresh": true, "no_attach": !tty});
    if tty {
        return connect_and_attach(&req, &name);
    }
    let paths = paths()?;
    let answer = Client::connect(&paths)?.request(&req, |_| {})?;
    if answer["ok"] != json!(true) {
        return Err(failed(&answer));
    }
    print(&format!(
        "started a fresh session {runtime}-{name} (pid {})\n",
        answer["pid"]
    ))
}

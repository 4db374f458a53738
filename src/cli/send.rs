//! `iapeer send` (spec 07 "Messaging"): route one message through the daemon.

use std::io::Read;
use std::path::Path;

use serde_json::{json, Value};

use super::client::Client;
use super::parse::Invocation;
use super::sender::resolve_sender;
use super::{paths, print, usage, CliError, CliResult};
use crate::registry::Registry;

/// The human line for a successful send result object.
pub fn describe_result(result: &Value) -> String {
    let p = result["delivered_to"]["personality"]
        .as_str()
        .unwrap_or("?");
    let rt = result["delivered_to"]["runtime"].as_str().unwrap_or("?");
    if result["queued"] == json!(true) {
        let kind = result["queuedBy"].as_str().unwrap_or("queue");
        let depth = result["queueDepth"].as_u64().unwrap_or(0);
        format!("queued for {p} ({rt}) — {kind}, depth {depth}")
    } else if result["woke"] == json!(true) {
        format!("delivered to {p} ({rt}), woke")
    } else {
        format!("delivered to {p} ({rt})")
    }
}

fn read_message(inv: &Invocation) -> Result<String, CliError> {
    match (inv.value("message"), inv.value("message-file")) {
        (Some(_), Some(_)) => Err(usage(inv, "pass --message or --message-file, not both")),
        (None, None) => Err(usage(
            inv,
            "missing --message <text> or --message-file <path|->",
        )),
        (Some(m), None) => Ok(m.to_string()),
        (None, Some("-")) => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| {
                CliError::Failed(format!("cannot read the message from stdin: {e}"))
            })?;
            Ok(s)
        }
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| CliError::Failed(format!("cannot read --message-file {path}: {e}"))),
    }
}

/// Run `iapeer send`.
pub fn run(inv: &Invocation) -> CliResult {
    let target = inv
        .positional("target")
        .ok_or_else(|| usage(inv, "missing <target>"))?
        .to_string();
    let message = read_message(inv)?;
    let paths = paths()?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::Failed(format!("cannot read the current folder: {e}")))?;
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    let needs_registry = inv.value("from").is_none()
        && std::env::var("PEER_IDENTITY").map_or(true, |v| v.trim().is_empty());
    let registry = if needs_registry {
        Registry::load(&paths).map_err(|e| CliError::Failed(e.to_string()))?
    } else {
        Registry::default()
    };
    let from = resolve_sender(
        inv.value("from"),
        std::env::var("PEER_IDENTITY").ok().as_deref(),
        &cwd,
        &registry,
    )
    .map_err(CliError::Failed)?;
    let attachments: Vec<String> = inv
        .values("attachment")
        .iter()
        .map(|a| absolute(&cwd, a))
        .collect();
    let mut req = json!({"op": "send", "from": from, "to": target, "message": message, "attachments": attachments});
    if let Some(rt) = inv.value("runtime") {
        req["runtime"] = json!(rt);
    }
    if let Some(t) = inv.value("topic") {
        req["topic"] = json!(t);
    }
    let mut client = Client::connect(&paths)?;
    let answer = client.request_with_indicator(&req, &format!("sending to {target}"))?;
    let json_out = inv.flag("json");
    if answer["ok"] == json!(true) {
        let result = &answer["result"];
        if json_out {
            print(&format!("{result}\n"))
        } else {
            print(&format!("{}\n", describe_result(result)))
        }
    } else {
        if json_out {
            print(&format!("{answer}\n"))?;
        }
        Err(CliError::Failed(
            answer["error"].as_str().unwrap_or("failed").to_string(),
        ))
    }
}

fn absolute(cwd: &Path, p: &str) -> String {
    let path = Path::new(p);
    if path.is_absolute() {
        p.to_string()
    } else {
        cwd.join(path).display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines() {
        let r =
            json!({"ok":true,"delivered_to":{"personality":"bob","runtime":"echo"},"woke":false});
        assert_eq!(describe_result(&r), "delivered to bob (echo)");
        let r =
            json!({"ok":true,"delivered_to":{"personality":"bob","runtime":"echo"},"woke":true});
        assert_eq!(describe_result(&r), "delivered to bob (echo), woke");
        let r = json!({"ok":true,"delivered_to":{"personality":"bob","runtime":"claude"},"woke":false,"queued":true,"queuedBy":"composer","queueDepth":2});
        assert_eq!(
            describe_result(&r),
            "queued for bob (claude) — composer, depth 2"
        );
    }
}

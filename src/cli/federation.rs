//! `federation join|leave|status` (issue 28 item 1): the membership file and what the daemon's
//! federation link last saw (`federation`, `federation::link`). The password is never
//! printed: every URL shown is `federation::masked`.

use super::error::fail;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{done, paths, usage, CliError, CliResult};
use crate::federation::link::{self, LinkReport, LinkState};
use crate::federation::{self, Joined, Source};
use crate::paths::Paths;

/// `federation <action> [redis-url] [--host-name <name>] [--json]`.
pub fn run(inv: &Invocation) -> CliResult {
    let action = inv
        .positional(args::FEDERATION_ACTION)
        .ok_or_else(|| usage(inv, "missing <action> (join, leave or status)"))?;
    let url = inv.positional(args::REDIS_URL);
    let host_name = inv.value(flags::HOST_NAME);
    match action {
        "join" => join(inv, url, host_name),
        "leave" | "status" if url.is_some() || host_name.is_some() => Err(usage(
            inv,
            format!("{action} takes no <redis-url> and no --host-name"),
        )),
        "leave" => leave(inv),
        "status" => status(inv),
        other => Err(usage(
            inv,
            format!(
                "unknown action \"{}\": join, leave or status",
                crate::visible::line(other)
            ),
        )),
    }
}

/// `federation join --json`: `{"host","url"}` (the URL masked).
#[derive(Debug, serde::Serialize)]
pub struct JoinedDoc {
    /// This host's name.
    pub host: String,
    /// The stored URL, password masked.
    pub url: String,
}

fn join(inv: &Invocation, url: Option<&str>, host_name: Option<&str>) -> CliResult {
    let url = url.ok_or_else(|| {
        usage(
            inv,
            "missing <redis-url>: give redis://[user:password@]host[:port][/db]",
        )
    })?;
    federation::check_url(url).map_err(fail)?;
    let host = match host_name {
        Some(h) => federation::check_host_name(h).map(|_| h.to_string()),
        None => federation::default_host_name(),
    }
    .map_err(fail)?;
    let paths = paths()?;
    let joined = Joined {
        url: url.to_string(),
        host: host.clone(),
    };
    federation::store(&paths, &joined).map_err(|e| {
        fail(format!(
            "cannot write {}: {e}",
            paths.federation().display()
        ))
    })?;
    let shown = federation::masked(url);
    let text = format!(
        "joined as host {host} at {shown}\nthe daemon's federation link connects within a second \
         (or when the daemon starts): iapeer federation status\n"
    );
    done(inv, &JoinedDoc { host, url: shown }, &text)
}

/// `federation leave --json`: `{"left"}`, false when this root had not joined.
#[derive(Debug, serde::Serialize)]
pub struct LeftDoc {
    /// True when a membership was removed.
    pub left: bool,
}

fn leave(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let left = federation::forget(&paths).map_err(|e| {
        fail(format!(
            "cannot remove {}: {e}",
            paths.federation().display()
        ))
    })?;
    let text = if left {
        "left the federation; the daemon's link removes this host's keys from Redis\n"
    } else {
        "not joined: nothing to leave\n"
    };
    done(inv, &LeftDoc { left }, text)
}

/// `federation status --json`: `{"joined","host","url","source","link"}`.
#[derive(Debug, serde::Serialize)]
pub struct StatusDoc {
    /// True when a membership is in effect (file or `IAPEER_FEDERATION_URL`).
    pub joined: bool,
    /// This host's name, when joined.
    pub host: Option<String>,
    /// The URL in use, password masked, when joined.
    pub url: Option<String>,
    /// Where the URL comes from (`file`, `env`), when joined.
    pub source: Option<Source>,
    /// What the daemon's link last saw; `None` without a running daemon.
    pub link: Option<LinkReport>,
}

fn status(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let doc = status_doc(&paths)?;
    done(inv, &doc, &status_text(&doc))
}

fn status_doc(paths: &Paths) -> Result<StatusDoc, CliError> {
    let (joined, source) = match federation::effective(paths).map_err(fail)? {
        Some((j, s)) => (Some(j), Some(s)),
        None => (None, None),
    };
    Ok(StatusDoc {
        joined: joined.is_some(),
        host: joined.as_ref().map(|j| j.host.clone()),
        url: joined.as_ref().map(|j| federation::masked(&j.url)),
        source,
        link: link::read_report(paths),
    })
}

/// A time in ms since the epoch as the logs show it.
fn at(ms: u64) -> String {
    jiff::Timestamp::from_millisecond(ms as i64)
        .map(crate::clock::log_ts)
        .unwrap_or_else(|_| ms.to_string())
}

/// The text of `status`. Pure.
pub fn status_text(doc: &StatusDoc) -> String {
    let (Some(host), Some(url)) = (&doc.host, &doc.url) else {
        return "federation: not joined (iapeer federation join <redis-url>)\n".into();
    };
    let from = match doc.source {
        Some(Source::Env) => " (from IAPEER_FEDERATION_URL)",
        _ => "",
    };
    let mut out = format!("federation: joined as host {host} at {url}{from}\n");
    let Some(l) = &doc.link else {
        out.push_str("link: the daemon is not running; it connects when it starts\n");
        return out;
    };
    match l.state {
        LinkState::Connected => {
            out.push_str(&format!("link: connected since {}\n", at(l.since_ms)))
        }
        LinkState::Away => out.push_str(&format!(
            "link: away since {}: {}; trying again (local delivery goes on)\n",
            at(l.since_ms),
            l.last_error.as_deref().unwrap_or("unknown error")
        )),
        LinkState::NotJoined => out.push_str(
            "link: not connected yet (the daemon picks the membership up within a second)\n",
        ),
    }
    if let Some(hb) = l.last_heartbeat_ms {
        out.push_str(&format!("last heartbeat: {}\n", at(hb)));
    }
    if l.hosts.is_empty() {
        out.push_str("other hosts: none seen\n");
    }
    for h in &l.hosts {
        out.push_str(&format!(
            "host {} {} (last heartbeat {}, iapeer {})\n",
            h.host,
            if h.online { "online" } else { "offline" },
            at(h.last_heartbeat_ms),
            h.version
        ));
    }
    out
}

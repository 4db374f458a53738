//! `federation join|leave|status` (issue 28 item 1): the membership file and what the daemon's
//! federation link last saw (`federation`, `federation::link`). The password is never
//! printed: every URL shown is `federation::masked`.

use super::error::fail;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::status::{Check, Level};
use super::{done, paths, usage, CliError, CliResult};
use crate::federation::link::{self, LinkReport, LinkState};
use crate::federation::{self, skew, Joined, Source};
use crate::paths::Paths;

/// `federation <action> [redis-url] [--host-name <name>] [--ca-file <pem>] [--client-cert
/// <pem> --client-key <pem>] [--json]`.
pub fn run(inv: &Invocation) -> CliResult {
    let action = inv
        .positional(args::FEDERATION_ACTION)
        .ok_or_else(|| usage(inv, "missing <action> (join, leave or status)"))?;
    let url = inv.positional(args::REDIS_URL);
    let host_name = inv.value(flags::HOST_NAME);
    let tls_files = [flags::CA_FILE, flags::CLIENT_CERT, flags::CLIENT_KEY]
        .iter()
        .any(|f| inv.value(*f).is_some());
    match action {
        "join" => join(inv, url, host_name),
        "leave" | "status" if url.is_some() || host_name.is_some() || tls_files => Err(usage(
            inv,
            format!(
                "{action} takes no <redis-url>, no --host-name and no --ca-file, --client-cert or \
                 --client-key"
            ),
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
    let absolute = |flag: super::spec::FlagSpec| inv.value(flag).map(absolute_path).transpose();
    let joined = Joined {
        url: url.to_string(),
        host: host.clone(),
        tls: federation::TlsFiles {
            ca_file: absolute(flags::CA_FILE)?,
            client_cert: absolute(flags::CLIENT_CERT)?,
            client_key: absolute(flags::CLIENT_KEY)?,
        },
    };
    // The TLS files are read now, so a mistake is told here and not only in the link's report.
    federation::tls::client(&joined).map_err(fail)?;
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

/// `path` made absolute against the current folder (the daemon reads it from elsewhere).
fn absolute_path(path: &str) -> Result<String, CliError> {
    std::path::absolute(path)
        .map(|p| p.display().to_string())
        .map_err(|e| fail(format!("cannot make {path} an absolute path: {e}")))
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
    /// For `rediss://`, where the server's certificate is checked (`federation::tls::trust`).
    pub tls: Option<String>,
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
        tls: joined.as_ref().and_then(federation::tls::trust),
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
    if let Some(tls) = &doc.tls {
        out.push_str(&format!("tls: {tls}\n"));
    }
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

/// A `doctor` check of the federation (the fields of `status::Check`).
fn check(name: String, level: Level, message: String, fix: Option<String>) -> Check {
    Check {
        name,
        level,
        message,
        fix,
    }
}

/// The federation's checks for `doctor` (issue 28 item 6), none when this root has not
/// joined: `federation` (the link's state from its report: connected, or away since when and
/// why) and `clock-skew` (this host's clock against Redis's `TIME`, measured by `doctor` over
/// its own short connection: `federation::skew`), then `clock-skew:<host>` for each other
/// online host (its last heartbeat against Redis's clock). The password is in none of them.
pub fn doctor_checks(paths: &Paths) -> Vec<Check> {
    let joined = match federation::effective(paths) {
        Ok(None) => return Vec::new(),
        Ok(Some((j, _))) => j,
        Err(e) => {
            return vec![check(
                "federation".into(),
                Level::Fail,
                e,
                Some(
                    "join again with a valid URL (iapeer federation join <redis-url>) or correct \
                     IAPEER_FEDERATION_URL"
                        .into(),
                ),
            )]
        }
    };
    let target = federation::redis_cli_target(&joined.url);
    let tls = match (federation::tls::is_tls(&joined.url), &joined.tls.ca_file) {
        (false, _) => String::new(),
        (true, None) => "--tls ".to_string(),
        (true, Some(ca)) => format!("--tls --cacert {ca} "),
    };
    let reach = format!(
        "check that redis-server runs and that this host reaches it: redis-cli {tls}{target} \
         ping (give the password with AUTH); the daemon's link tries again by itself"
    );
    let shown = federation::masked(&joined.url);
    let mut checks = vec![link_check(
        &joined.host,
        &shown,
        link::read_report(paths).as_ref(),
        &reach,
    )];
    checks.extend(skew_checks(
        skew::measure(&joined),
        &federation::place(&joined.url),
        &reach,
    ));
    checks
}

/// The `federation` check from the link's report (`None`: no daemon writes one). Pure.
pub fn link_check(host: &str, url: &str, report: Option<&LinkReport>, reach: &str) -> Check {
    let name = "federation".to_string();
    let Some(l) = report else {
        return check(
            name,
            Level::Warn,
            format!(
                "joined as host {host} at {url}; the daemon is not running (its link connects \
                 when it starts)"
            ),
            None,
        );
    };
    match l.state {
        LinkState::Connected => check(
            name,
            Level::Ok,
            format!("host {host} connected to {url} since {}", at(l.since_ms)),
            None,
        ),
        LinkState::Away => check(
            name,
            Level::Fail,
            format!(
                "host {host} away from {url} since {}: {}; local delivery goes on, other hosts \
                 are not reached",
                at(l.since_ms),
                l.last_error.as_deref().unwrap_or("unknown error")
            ),
            Some(reach.to_string()),
        ),
        LinkState::NotJoined => check(
            name,
            Level::Warn,
            format!(
                "joined as host {host} at {url}; the daemon's link has not picked it up yet \
                 (it looks every second)"
            ),
            None,
        ),
    }
}

/// What to do about a clock that is off.
const NTP: &str = "keep the clocks right with NTP (timedatectl set-ntp true, or chrony) on";

/// The level of a `doctor` check for a skew.
fn skew_level(skew_ms: i64) -> Level {
    match skew::level(skew_ms) {
        skew::SkewLevel::Ok => Level::Ok,
        skew::SkewLevel::Warn => Level::Warn,
        skew::SkewLevel::Fail => Level::Fail,
    }
}

/// The `clock-skew` checks from a measurement (or why there is none), `at` being Redis's
/// `host:port`. Pure.
pub fn skew_checks(measured: Result<skew::Measured, String>, at: &str, reach: &str) -> Vec<Check> {
    let m = match measured {
        Ok(m) => m,
        Err(e) => {
            return vec![check(
                "clock-skew".into(),
                Level::Warn,
                format!("not measured: redis at {at} does not answer doctor ({e})"),
                Some(reach.to_string()),
            )]
        }
    };
    let limits = format!(
        "(warn above {} s, fail above {} s)",
        skew::WARN_ABOVE_MS / 1000,
        skew::FAIL_ABOVE_MS / 1000
    );
    let fix = |level: Level, whom: &str| (level != Level::Ok).then(|| format!("{NTP} {whom}"));
    let level = skew_level(m.skew_ms);
    let mut checks = vec![check(
        "clock-skew".into(),
        level,
        format!(
            "this host's clock is {} redis's at {at} (measured with a round trip of {} ms) {limits}",
            skew::words(m.skew_ms),
            m.round_trip_ms
        ),
        fix(level, "this host and the redis host"),
    )];
    for (host, ms) in m.hosts {
        let level = skew_level(ms);
        checks.push(check(
            format!("clock-skew:{host}"),
            level,
            format!(
                "host {host}'s clock is {} redis's (by its last heartbeat) {limits}",
                skew::words(ms)
            ),
            fix(level, &format!("host {host}")),
        ));
    }
    checks
}

/// The text form of the federation's checks: `<name>: <message>` and `  what to do: <fix>`
/// lines; empty without checks. Pure.
pub fn doctor_lines(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let mark = match c.level {
            Level::Ok => "",
            Level::Warn => "WARNING: ",
            Level::Fail => "PROBLEM: ",
        };
        out.push_str(&format!("{}: {mark}{}\n", c.name, c.message));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("  what to do: {fix}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(state: LinkState, error: Option<&str>) -> LinkReport {
        LinkReport {
            state,
            host: Some("a".into()),
            url: Some("redis://:****@h:6379".into()),
            since_ms: 1_764_579_600_123,
            last_error: error.map(str::to_string),
            last_heartbeat_ms: None,
            hosts: vec![],
            updated_ms: 0,
        }
    }

    #[test]
    fn the_link_check_says_connected_or_away_since_when_and_why() {
        let url = "redis://:****@h:6379";
        let c = link_check("a", url, Some(&report(LinkState::Connected, None)), "R");
        assert_eq!(c.level, Level::Ok);
        assert_eq!(
            c.message,
            "host a connected to redis://:****@h:6379 since 2025-12-01T09:00:00.123Z"
        );
        let c = link_check(
            "a",
            url,
            Some(&report(LinkState::Away, Some("Connection refused"))),
            "R",
        );
        assert_eq!((c.level, c.fix.as_deref()), (Level::Fail, Some("R")));
        assert!(
            c.message
                .starts_with("host a away from redis://:****@h:6379 since 2025-12-01T09:00:00.123Z: Connection refused;"),
            "{}",
            c.message
        );
        let c = link_check("a", url, None, "R");
        assert_eq!(c.level, Level::Warn);
        assert!(
            c.message.contains("the daemon is not running"),
            "{}",
            c.message
        );
    }

    #[test]
    fn the_skew_checks_give_the_figure_and_the_verdict() {
        let m = skew::Measured {
            skew_ms: -3,
            round_trip_ms: 1,
            hosts: vec![("b".into(), 2_500), ("c".into(), -12_000)],
        };
        let checks = skew_checks(Ok(m), "h:6379", "R");
        let got: Vec<(&str, Level)> = checks.iter().map(|c| (c.name.as_str(), c.level)).collect();
        assert_eq!(
            got,
            [
                ("clock-skew", Level::Ok),
                ("clock-skew:b", Level::Warn),
                ("clock-skew:c", Level::Fail)
            ]
        );
        assert_eq!(
            checks[0].message,
            "this host's clock is 3 ms behind redis's at h:6379 (measured with a round trip of 1 \
             ms) (warn above 2 s, fail above 10 s)"
        );
        assert!(checks[0].fix.is_none());
        assert!(checks[1]
            .message
            .starts_with("host b's clock is 2.500 s ahead of redis's"));
        assert!(checks[2].fix.as_deref().unwrap().ends_with("on host c"));
        let not = skew_checks(Err("Connection refused".into()), "h:6379", "R");
        assert_eq!(not[0].level, Level::Warn);
        assert_eq!(
            not[0].message,
            "not measured: redis at h:6379 does not answer doctor (Connection refused)"
        );
        assert_eq!(
            doctor_lines(&not),
            "clock-skew: WARNING: not measured: redis at h:6379 does not answer doctor \
             (Connection refused)\n  what to do: R\n"
        );
        assert_eq!(doctor_lines(&[]), "");
    }
}

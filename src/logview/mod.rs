//! `iapeer logs` as pure functions (issue 8 item 4): the event logs (`delivery.log`,
//! `lifecycle.log`, `exits.log`; spec 11 §1) parsed into entries, merged in time order,
//! filtered by peer and time, and rendered one readable line each or as JSON. The logfmt
//! files stay the source; nothing here writes them.

use jiff::{civil, tz::TimeZone, Timestamp, ToSpan};

use crate::eventlog::parse_line;
use crate::names::Identity;

/// Which log an entry comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// `lifecycle.log`: wakes, sleeps, starts, stops.
    Lifecycle,
    /// `delivery.log`: one line per delivery attempt.
    Delivery,
    /// `exits.log`: one line per session death.
    Exits,
}

impl Source {
    /// The log's name without `.log`, as `--json` shows it in `"log"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Lifecycle => "lifecycle",
            Source::Delivery => "delivery",
            Source::Exits => "exits",
        }
    }
}

/// One event line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `ts=` as written: UTC with milliseconds, `Z` (sorts as text).
    pub ts: String,
    /// The log it came from.
    pub source: Source,
    /// Every field after `ts`, in order (`ev` first).
    pub fields: Vec<(String, String)>,
}

impl Entry {
    /// The value of field `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The event name (`ev=`).
    pub fn ev(&self) -> &str {
        self.get("ev").unwrap_or("")
    }
}

/// The entries of one log's text, in file order; lines without `ts=` are skipped.
pub fn parse(text: &str, source: Source) -> Vec<Entry> {
    text.lines()
        .filter_map(|line| {
            let mut fields = parse_line(line);
            if fields.first().map(|(k, _)| k.as_str()) != Some("ts") {
                return None;
            }
            let (_, ts) = fields.remove(0);
            Some(Entry { ts, source, fields })
        })
        .collect()
}

/// All entries in time order. Entries of the same millisecond keep the order of their logs
/// (lifecycle, then delivery, then exits: a wake is logged before the delivery it carried)
/// and, within one log, file order.
pub fn merge(mut entries: Vec<Entry>) -> Vec<Entry> {
    entries.sort_by(|a, b| a.ts.cmp(&b.ts).then(a.source.cmp(&b.source)));
    entries
}

/// Whether a person wants to see this entry: deliveries, wakes, sleeps, deaths, starts and
/// stops and the like; not the routine bookkeeping (tick decisions, topic notes, pane-log
/// rotation, `ready` after a wake, a ready gate passed) nor the second record of one session end (an expected end
/// is shown from `lifecycle.log`, a death from `exits.log`).
pub fn is_shown(e: &Entry) -> bool {
    match e.ev() {
        "supervise" | "topic-note" | "panelog" | "ready" | "" => false,
        "session-end" => expected_end(e.get("cause").unwrap_or("")),
        "session-exit" => !expected_end(e.get("cause").unwrap_or("")),
        "ready-gate" => e.get("ok") != Some("true"),
        _ => true,
    }
}

/// Causes of a session end that are not a death (`Cause::expected`).
fn expected_end(cause: &str) -> bool {
    matches!(
        cause,
        "idle-sleep" | "stop" | "shutdown" | "replaced" | "removed" | "wind-down"
    )
}

/// The personality an identity-or-name field names (`echo-bob` → `bob`, `bob` → `bob`).
fn personality(v: &str) -> &str {
    match v.split_once('-') {
        Some((_, p)) if Identity::parse(v).is_ok() => p,
        _ => v,
    }
}

/// Whether the entry is about `peer`: as sender, recipient or session.
pub fn mentions(e: &Entry, peer: &str) -> bool {
    ["caller", "to", "via", "identity"]
        .iter()
        .filter_map(|k| e.get(k))
        .any(|v| personality(v) == peer)
}

/// A `--since` value in none of the forms [`parse_since`] reads (the text as given, trimmed).
/// `Display` lists the forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--since: \"{0}\" is neither a duration (90s, 15m, 2h, 1d) nor a time (14:03, \
     2026-07-14, 2026-07-14T14:03, 2026-07-14T14:03:00Z)"
)]
pub struct SinceError(pub String);

/// The start of `--since`: a duration back from `now` (`90s`, `15m`, `2h`, `1d`), a local
/// time of today (`14:03`, `14:03:07`), a local date (`2026-07-14`) or date-time
/// (`2026-07-14T14:03`, `2026-07-14 14:03:07`), or an RFC 3339 time with offset or `Z`.
///
/// Errors: [`SinceError`], text in none of these forms (the message lists them).
pub fn parse_since(s: &str, now: Timestamp, tz: &TimeZone) -> Result<Timestamp, SinceError> {
    let s = s.trim();
    let bad = || SinceError(s.to_string());
    if let Some((num, unit)) = s
        .char_indices()
        .last()
        .map(|(i, c)| (&s[..i], c))
        .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    {
        let n: i64 = num.parse().map_err(|_| bad())?;
        let secs = match unit {
            's' => n,
            'm' => n.saturating_mul(60),
            'h' => n.saturating_mul(3600),
            'd' => n.saturating_mul(86_400),
            _ => return Err(bad()),
        };
        return now.checked_sub(secs.seconds()).map_err(|_| bad());
    }
    if let Ok(t) = s.parse::<Timestamp>() {
        return Ok(t);
    }
    let local = |dt: civil::DateTime| dt.to_zoned(tz.clone()).map(|z| z.timestamp());
    // A bare time has no `-`; jiff would also read the time out of a date-time.
    if !s.contains('-') {
        if let Ok(t) = s.parse::<civil::Time>() {
            let today = now.to_zoned(tz.clone()).date();
            return local(today.to_datetime(t)).map_err(|_| bad());
        }
        return Err(bad());
    }
    if let Ok(dt) = s.replacen(' ', "T", 1).parse::<civil::DateTime>() {
        return local(dt).map_err(|_| bad());
    }
    Err(bad())
}

/// Whether the entry is at or after `since`.
pub fn is_since(e: &Entry, since: Timestamp) -> bool {
    e.ts.parse::<Timestamp>().is_ok_and(|t| t >= since)
}

/// `bob (echo)` for `echo-bob`; other text as is.
fn who(identity: &str) -> String {
    match Identity::parse(identity) {
        Ok(id) => format!("{} ({})", id.personality, id.runtime),
        Err(_) => identity.to_string(),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Why a wake started fresh or resumed, in the user's words: the `cause` field of a `wake`
/// line (`daemon::lifecycle::decide_mode`'s rule) as `logs` shows it (issue 30 item 6: it
/// showed `cause=not-idle-reaped`); an unknown cause as it is. `logs --json` keeps the field.
fn wake_cause(cause: &str) -> &str {
    match cause {
        "explicit-fresh" => "asked for (iapeer new)",
        "explicit-resume" => "asked for (iapeer attach)",
        "fresh-next" => "iapeer refresh asked for it",
        "ephemeral" => "an ephemeral peer starts fresh every time",
        "not-idle-reaped" => {
            "its last session did not end by going to sleep when idle (first start, crash or stop)"
        }
        "human-facing" => "a human-facing peer keeps its conversation",
        "topic-match" => "the message's topic is one this conversation had",
        "new-topic" => "the message's topic is new to its last conversation",
        "no-topic" => "the message has no topic",
        "restart" => "iapeer restart takes up the conversation it recorded",
        "restart-without-conversation" => "iapeer restart found no conversation recorded",
        "no-recorded-conversation" => {
            "no conversation of its own was recorded (the folder's newest may be a person's)"
        }
        other => other,
    }
}

/// Why a session died, in the user's words (the `cause` of an `exits.log` line); an unknown
/// cause as it is.
fn exit_cause(cause: &str) -> &str {
    match cause {
        "child-exit" => "its program exited",
        "killed-by-daemon" => "ended by the daemon",
        "boot-timeout" => "it did not come up in time",
        "dialog-refused" => "it stopped at a dialog iapeer does not answer",
        other => other,
    }
}

/// One entry as a person reads it (no newline), times local (`HH:MM:SS` today):
///
/// ```text
/// 14:03:07 alice → bob  delivered  topic=x (woke)
/// 14:03:05 bob (echo)  woke  fresh conversation: the message has no topic
/// 15:03:05 bob (echo)  slept  idle
/// 15:10:00 bob (echo)  died  exit status 1 (its program exited)
/// ```
///
/// A logged value is a one-line field ([`crate::visible::line`]): its control characters,
/// bidi controls and line breaks are shown as visible stand-ins, so one entry is always one
/// line and nothing in it acts on the terminal.
pub fn render(e: &Entry, tz: &TimeZone, today: civil::Date) -> String {
    crate::visible::line(&render_raw(e, tz, today)).into_owned()
}

fn render_raw(e: &Entry, tz: &TimeZone, today: civil::Date) -> String {
    let t = crate::clock::local_clock(&e.ts, tz, today);
    let get = |k: &str| e.get(k).unwrap_or("");
    let ident = who(get("identity"));
    let detail = match e.ev() {
        "delivery" | "delivery-followup" => {
            let from = personality(get("caller"));
            let outcome = if get("ok") != "true" {
                format!("failed: {}", first_line(get("err")))
            } else if get("queued") == "true" {
                match e.get("qd") {
                    Some(d) => format!("queued ({}, depth {d})", get("qkind")),
                    None => format!("queued ({})", get("qkind")),
                }
            } else if e.ev() == "delivery-followup" {
                format!("{} after queue ({})", get("outcome"), get("qkind"))
            } else {
                "delivered".to_string()
            };
            let mut line = format!("{from} → {}  {outcome}", get("to"));
            if let Some(topic) = e.get("topic") {
                line.push_str(&format!("  topic={topic}"));
            }
            if let Some(n) = e.get("att") {
                line.push_str(&format!("  attachments={n}"));
            }
            if get("woke") == "true" {
                line.push_str(" (woke)");
            }
            return format!("{t} {line}");
        }
        "wake" => {
            let mode = match get("mode") {
                "fresh" => "fresh conversation",
                "resume" => "conversation resumed",
                other => other,
            };
            match e.get("cause") {
                Some(c) => format!("woke  {mode}: {}", wake_cause(c)),
                None => format!("woke  {mode}"),
            }
        }
        "wake-failed" => format!("wake failed: {}", first_line(get("reason"))),
        "ready-gate" => format!(
            "model did not start on the wake's message: {}",
            first_line(get("err"))
        ),
        "session-end" => match get("cause") {
            "idle-sleep" => "slept  idle".into(),
            "wind-down" => "slept  task done (ephemeral wind-down)".into(),
            "stop" => "ended  stopped".into(),
            "shutdown" => "ended  daemon shutdown".into(),
            "replaced" => "ended  replaced by a fresh session".into(),
            "removed" => "ended  peer removed".into(),
            other => format!("ended  {other}"),
        },
        "session-exit" => {
            let how = match (e.get("signal").filter(|s| !s.is_empty()), e.get("status")) {
                (Some(sig), _) => format!("killed by {sig}"),
                (None, Some(st)) if !st.is_empty() => format!("exit status {st}"),
                _ => "exited".into(),
            };
            format!("died  {how} ({})", exit_cause(get("cause")))
        }
        "always-on" => match e.get("err") {
            Some(err) => format!("always-on {}: {}", get("action"), first_line(err)),
            None => format!("always-on {}", get("action")),
        },
        "stop" => "stopped".into(),
        "start" => "started".into(),
        "recovered" => match get("resumable") {
            "true" => "ended  with the daemon (killed); resumable on its topic".into(),
            _ => "ended  with the daemon (killed)".into(),
        },
        ev => {
            let rest: Vec<String> = e
                .fields
                .iter()
                .filter(|(k, _)| k != "ev" && k != "identity")
                .map(|(k, v)| format!("{k}={}", crate::eventlog::quote_shown(first_line(v))))
                .collect();
            format!("{ev}  {}", rest.join(" ")).trim_end().to_string()
        }
    };
    if ident.is_empty() {
        format!("{t} {detail}")
    } else {
        format!("{t} {ident}  {detail}")
    }
}

/// One entry as a `--json` line: `{"ts":…,"log":"delivery","ev":…, <every field>}` (values
/// are strings, as in the log; written by [`crate::visible::json`]).
pub fn json(e: &Entry) -> String {
    let mut o = serde_json::Map::new();
    o.insert("ts".into(), e.ts.clone().into());
    o.insert("log".into(), e.source.as_str().into());
    for (k, v) in &e.fields {
        o.insert(k.clone(), v.clone().into());
    }
    crate::visible::json(&serde_json::Value::Object(o))
}

#[cfg(test)]
mod tests;

//! The fleet API's answers as pure functions (spec 10 §1): control replies as HTTP answers,
//! the `host` object, events as JSON and as Server-Sent Events frames.

use serde_json::{json, Value};

use super::route::{error, ok};
use crate::daemon::http::reply::Reply;
use crate::eventbus::BusEvent;
use crate::protocol::{Code, Failure, Reply as Control};
use crate::registry::Registry;

/// The HTTP status of a refused control request: 404 for an unknown peer, 400 for a bad
/// argument, 500 for an internal error, 502 for an operation that failed (stopped, offline,
/// busy, not live, timeout, paused, shutting down) or whose outcome is not known
/// (`state-unknown`: the body's `code` tells it apart).
pub fn status_of(code: Code) -> u16 {
    match code {
        Code::NotRegistered => 404,
        Code::InvalidArgument | Code::BadRequest | Code::UnknownOp => 400,
        Code::Internal => 500,
        Code::Stopped
        | Code::Offline
        | Code::Busy
        | Code::Timeout
        | Code::NotLive
        | Code::ShuttingDown
        | Code::StateUnknown
        | Code::Paused
        | Code::Held
        | Code::Failed => 502,
    }
}

/// A refused control request: `{"error":…,"code":…}` with [`status_of`] its code.
pub fn failure(f: &Failure) -> Reply {
    ok(
        status_of(f.code),
        &json!({ "error": f.error, "code": f.code }),
    )
}

/// A verb's answer: the control reply as the CLI's `--json` sees it (`{"ok":true,…}`), or
/// its failure.
pub fn verb(r: Control) -> Reply {
    match r {
        Control::Failed(f) => failure(&f),
        other => match serde_json::to_value(&other) {
            Ok(v) => ok(200, &v),
            Err(e) => error(500, &format!("internal error: {e}")),
        },
    }
}

/// `GET /fleet/v1/approvals`: `{api, version, ts, approvals:[…]}` (each as in the control
/// reply of `approvals`), or the failure; `ts` is the answer's time stamp.
pub fn approvals(r: Control, ts: &str, people: &[String]) -> Reply {
    match r {
        Control::Approvals(a) => ok(
            200,
            &json!({
                "api": 1,
                "version": env!("CARGO_PKG_VERSION"),
                "ts": ts,
                "approvals": a.approvals.iter().map(|x| super::faces::approval(x, people)).collect::<Vec<_>>(),
            }),
        ),
        Control::Failed(f) => failure(&f),
        other => error(
            500,
            &format!("internal error: approvals answered {other:?}"),
        ),
    }
}

/// `GET /fleet/v1/approvals/<id>`: `{api, version, ts, approval}` when `id` is pending,
/// else 404 saying it was answered, expired or never existed.
pub fn one_approval(r: Control, id: &str, ts: &str, people: &[String]) -> Reply {
    match r {
        Control::Approvals(a) => match a.approvals.iter().find(|x| x.id == id) {
            Some(x) => ok(
                200,
                &json!({
                    "api": 1,
                    "version": env!("CARGO_PKG_VERSION"),
                    "ts": ts,
                    "approval": super::faces::approval(x, people),
                }),
            ),
            None => error(
                404,
                &format!(
                    "no pending approval {id:?}: it was answered or expired, or never asked \
                     (GET /fleet/v1/approvals lists the pending ones)"
                ),
            ),
        },
        Control::Failed(f) => failure(&f),
        other => error(
            500,
            &format!("internal error: approvals answered {other:?}"),
        ),
    }
}

/// `send`'s answer: `{"from":…,"result":<result object of spec 03 §1>}`, or the failure.
pub fn send(from: &str, r: Control) -> Reply {
    match r {
        Control::Send(s) => ok(200, &json!({ "from": from, "result": s.result })),
        Control::Failed(f) => failure(&f),
        other => error(500, &format!("internal error: send answered {other:?}")),
    }
}

/// `screen`'s answer: `{"api":1,"identity":…,"rows":[…],"cursor":[row,col]}`, or the
/// failure (`not-live` → 502).
pub fn screen(r: Control) -> Reply {
    match r {
        Control::Screen(s) => ok(
            200,
            &json!({ "api": 1, "identity": s.identity, "rows": s.rows, "cursor": s.cursor }),
        ),
        Control::Failed(f) => failure(&f),
        other => error(500, &format!("internal error: screen answered {other:?}")),
    }
}

/// 404 for a peer the registry does not hold.
pub fn unknown_peer(p: &str) -> Reply {
    error(
        404,
        &format!("peer \"{p}\" is not in the iapeer peers index (see GET /fleet/v1/snapshot)"),
    )
}

/// The default sender of `send`: the only natural peer, as `<default runtime>-<name>`.
///
/// Errors: 400 when there is none or several (then `from` must be given).
pub fn sole_natural(registry: &Registry) -> Result<String, Reply> {
    match registry.only_natural() {
        Ok(h) => Ok(format!("{}-{}", h.default_runtime, h.personality)),
        Err(0) => Err(error(
            400,
            "bad request: no natural (human) peer to send from; pass \"from\": \"<runtime>-<name>\"",
        )),
        Err(_) => {
            let people: Vec<String> = registry
                .naturals()
                .map(|p| format!("\"{}-{}\"", p.default_runtime, p.personality))
                .collect();
            Err(error(
                400,
                &format!(
                    "bad request: several natural (human) peers; pass \"from\": one of {}",
                    people.join(", ")
                ),
            ))
        }
    }
}

/// The snapshot's `host`: `{version, pid, startedAt (epoch ms), uptimeSecs, memory:
/// {rssBytes}}` (`rssBytes` null where the platform does not tell).
pub fn host(started_ms: u64) -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "startedAt": started_ms,
        "uptimeSecs": crate::clock::now_ms().saturating_sub(started_ms) / 1000,
        "memory": { "rssBytes": rss_bytes() },
    })
}

/// Resident set size of this process, bytes (Linux `/proc/self/statm`).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()?;
    Some(pages * u64::try_from(page).ok()?)
}

/// An event as JSON: `{"src":"lifecycle|delivery|exits","ts":…,"ev":…, …fields}` (values are
/// strings, as in the log) plus `"id"` and, for an event `iapeer logs` shows, `"text"`: the
/// line it prints for it, times in the daemon's local time zone, 24-hour
/// ([`crate::logview::render`]: `14:03:07 alice → bob  delivered (woke)`).
pub fn event_json(e: &BusEvent) -> Value {
    let tz = jiff::tz::TimeZone::system();
    let today = jiff::Timestamp::now().to_zoned(tz.clone()).date();
    event_json_at(e, &tz, today)
}

/// [`event_json`] with `text` rendered in `tz` on `today`. Pure.
pub fn event_json_at(e: &BusEvent, tz: &jiff::tz::TimeZone, today: jiff::civil::Date) -> Value {
    let mut o = serde_json::Map::new();
    o.insert("id".into(), e.id.into());
    o.insert("src".into(), e.entry.source.as_str().into());
    o.insert("ts".into(), e.entry.ts.clone().into());
    for (k, v) in &e.entry.fields {
        o.insert(k.clone(), v.clone().into());
    }
    if crate::logview::is_shown(&e.entry) {
        o.insert(
            "text".into(),
            crate::logview::render(&e.entry, tz, today).into(),
        );
    }
    Value::Object(o)
}

/// One Server-Sent Events frame: `event: <ev>`, `id: <id>`, `data: <event_json>` (written by
/// [`crate::visible::json`]), blank line.
pub fn sse_frame(e: &BusEvent) -> Vec<u8> {
    let ev = e.entry.ev();
    let ev = if ev.is_empty() || ev.contains(['\n', '\r']) {
        "event"
    } else {
        ev
    };
    let data = crate::visible::json(&event_json(e));
    format!("event: {ev}\nid: {}\ndata: {data}\n\n", e.id).into_bytes()
}

/// The head of an event stream: 200, `text/event-stream`, no length (the stream ends when the
/// connection closes), `Connection: close`.
pub const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n\r\n";

/// The comment sent after the replay, before live events.
pub const SSE_CONNECTED: &[u8] = b": connected\n\n";

/// The heartbeat comment.
pub const SSE_HEARTBEAT: &[u8] = b": hb\n\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logview::{Entry, Source};
    use crate::protocol::{StopReply, WakeReply};

    #[test]
    fn control_replies_become_http_answers() {
        let r = verb(Control::Wake(WakeReply {
            identity: "echo-bob".into(),
            woke: false,
            pid: 7,
        }));
        assert_eq!(r.status, 200);
        assert_eq!(
            String::from_utf8(r.body).unwrap(),
            "{\"identity\":\"echo-bob\",\"ok\":true,\"pid\":7,\"woke\":false}\n"
        );
        assert_eq!(
            verb(Control::Stop(StopReply {
                stopped: vec![],
                ended: vec![],
                kept: vec![],
            }))
            .status,
            200
        );
        for (code, status) in [
            (Code::NotRegistered, 404),
            (Code::InvalidArgument, 400),
            (Code::Offline, 502),
            (Code::NotLive, 502),
            (Code::Internal, 500),
        ] {
            let r = verb(Control::failure(code, "why"));
            assert_eq!(r.status, status, "{code:?}");
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(v["error"], "why");
        }
    }

    #[test]
    fn frames_carry_event_id_and_data() {
        let e = BusEvent {
            id: 42,
            entry: Entry {
                ts: "2026-12-01T09:00:00.000Z".into(),
                source: Source::Delivery,
                fields: vec![
                    ("ev".into(), "delivery".into()),
                    ("to".into(), "bob".into()),
                ],
            },
            rendered: Default::default(),
        };
        let f = String::from_utf8(sse_frame(&e)).unwrap();
        let data = f
            .strip_prefix("event: delivery\nid: 42\ndata: ")
            .and_then(|d| d.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("{f}"));
        let mut v: Value = serde_json::from_str(data).unwrap();
        assert!(
            v["text"].as_str().unwrap().ends_with(" → bob  failed: "),
            "{v}"
        );
        v.as_object_mut().unwrap().remove("text");
        assert_eq!(
            v,
            json!({"ev":"delivery","id":42,"src":"delivery","to":"bob","ts":"2026-12-01T09:00:00.000Z"})
        );
    }

    /// Issue 30 item 5: an event carries the line `iapeer logs` prints for it (24-hour, the
    /// date when not today); one `logs` hides (`ready`) carries none.
    #[test]
    fn an_event_carries_the_line_iapeer_logs_prints() {
        let event = |fields: &[(&str, &str)]| BusEvent {
            id: 7,
            entry: Entry {
                ts: "2026-12-01T21:05:09.000Z".into(),
                source: Source::Delivery,
                fields: fields
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
            rendered: Default::default(),
        };
        let utc = jiff::tz::TimeZone::UTC;
        let today = jiff::civil::date(2026, 12, 1);
        let delivered = event(&[
            ("ev", "delivery"),
            ("path", "ui"),
            ("caller", "human-you"),
            ("to", "alice"),
            ("ok", "true"),
            ("woke", "true"),
        ]);
        let v = event_json_at(&delivered, &utc, today);
        assert_eq!(v["text"], "21:05:09 you → alice  delivered (woke)");
        assert_eq!(v["path"], "ui", "the logged fields stay");
        let v = event_json_at(&delivered, &utc, jiff::civil::date(2026, 12, 2));
        assert_eq!(
            v["text"],
            "2026-12-01 21:05:09 you → alice  delivered (woke)"
        );
        let ready = event(&[("ev", "ready"), ("identity", "echo-alice")]);
        assert!(event_json_at(&ready, &utc, today).get("text").is_none());
    }

    /// A logged value with C1, bidi and separator characters travels escaped (issue 26 item
    /// 4); the frame's data parses back to it.
    #[test]
    fn frames_and_answers_carry_no_raw_control() {
        let topic = "t\u{9b}2J\u{202e}x\u{2028}\u{1b}]52;c;aGk=\u{7}";
        let e = BusEvent {
            id: 1,
            entry: Entry {
                ts: "2026-12-01T09:00:00.000Z".into(),
                source: Source::Delivery,
                fields: vec![
                    ("ev".into(), "delivery".into()),
                    ("topic".into(), topic.into()),
                ],
            },
            rendered: Default::default(),
        };
        let f = String::from_utf8(sse_frame(&e)).unwrap();
        assert!(
            f.contains(r"t\u009b2J\u202ex\u2028\u001b]52;c;aGk=\u0007"),
            "{f}"
        );
        let data = f.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        assert_eq!(serde_json::from_str::<Value>(data).unwrap()["topic"], topic);
        let r = failure(&Failure::new(Code::Failed, format!("no {topic}")));
        let body = String::from_utf8(r.body).unwrap();
        assert!(!body.contains(['\u{9b}', '\u{202e}', '\u{2028}']), "{body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["error"],
            format!("no {topic}")
        );
    }
}

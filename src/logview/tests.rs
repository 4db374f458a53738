use super::*;

const LIFECYCLE: &str = "\
ts=2026-07-13T22:00:00.100Z ev=wake identity=echo-bob mode=fresh cause=message pid=42
ts=2026-07-13T22:00:01.000Z ev=ready identity=echo-bob
ts=2026-07-13T22:00:02.000Z ev=topic-note identity=echo-bob topic=x
ts=2026-07-13T22:00:02.100Z ev=ready-gate identity=echo-bob ok=true ms=2000
ts=2026-07-13T22:30:00.000Z ev=ready-gate identity=claude-dan ok=false ms=120000 err=\"model did not process the task\"
ts=2026-07-13T23:00:02.000Z ev=session-end identity=echo-bob pid=42 cause=idle-sleep
ts=2026-07-13T23:30:00.000Z ev=session-end identity=echo-carol pid=43 cause=child-exit status=1
";
const DELIVERY: &str = "\
ts=2026-07-13T22:00:01.500Z ev=delivery path=cli caller=echo-alice to=bob ok=true via=echo-bob woke=true ms=1400 len=2 topic=x
ts=2026-07-13T22:00:00.100Z ev=delivery path=cli caller=human-you to=alice ok=false ms=3 len=2 err=\"peer \\\"alice\\\" (echo) is stopped\"
";
const EXITS: &str = "\
ts=2026-07-13T23:00:02.000Z ev=session-exit identity=echo-bob pid=42 status=0 signal=\"\" uptime_s=3600 cause=idle-sleep
ts=2026-07-13T23:30:00.000Z ev=session-exit identity=echo-carol pid=43 status=1 signal=\"\" uptime_s=5 cause=child-exit tail=boom
";

fn all() -> Vec<Entry> {
    let mut v = parse(DELIVERY, Source::Delivery);
    v.extend(parse(EXITS, Source::Exits));
    v.extend(parse(LIFECYCLE, Source::Lifecycle));
    merge(v)
}

fn utc() -> (TimeZone, civil::Date) {
    (TimeZone::UTC, civil::date(2026, 7, 13))
}

/// Merge order: time first; the same millisecond keeps lifecycle before delivery (a wake
/// before the delivery it carried); each session end shows once.
#[test]
fn merged_in_time_order_and_rendered_one_line_each() {
    let (tz, today) = utc();
    let lines: Vec<String> = all()
        .iter()
        .filter(|e| is_shown(e))
        .map(|e| render(e, &tz, today))
        .collect();
    assert_eq!(
        lines,
        [
            "22:00:00 bob (echo)  woke  fresh conversation: message",
            "22:00:00 you → alice  failed: peer \"alice\" (echo) is stopped",
            "22:00:01 alice → bob  delivered  topic=x (woke)",
            "22:30:00 dan (claude)  model did not start on the wake's message: model did not process the task",
            "23:00:02 bob (echo)  slept  idle",
            "23:30:00 carol (echo)  died  exit status 1 (its program exited)",
        ]
    );
}

/// A wake's rule reads in the user's words, not the daemon's (issue 30 item 6).
#[test]
fn a_wake_says_why_in_the_users_words() {
    let (tz, today) = utc();
    let line =
        "ts=2026-07-13T22:00:00.000Z ev=wake identity=echo-bob mode=fresh cause=not-idle-reaped\n";
    let e = &parse(line, Source::Lifecycle)[0];
    let shown = render(e, &tz, today);
    assert_eq!(
        shown,
        "22:00:00 bob (echo)  woke  fresh conversation: its last session did not end by going \
         to sleep when idle (first start, crash or stop)"
    );
    assert!(
        !shown.contains("cause=") && !shown.contains("reaped"),
        "{shown}"
    );
}

/// A session the previous daemon never saw end reads as ended with it.
#[test]
fn a_recovered_session_reads_as_ended_with_the_daemon() {
    let (tz, today) = utc();
    let line = "ts=2026-07-13T22:00:00.000Z ev=recovered identity=echo-bob resumable=true\n";
    let e = &parse(line, Source::Lifecycle)[0];
    assert!(is_shown(e));
    assert_eq!(
        render(e, &tz, today),
        "22:00:00 bob (echo)  ended  with the daemon (killed); resumable on its topic"
    );
}

#[test]
fn a_peer_filter_keeps_what_names_it() {
    let entries = all();
    let bob: Vec<&str> = entries
        .iter()
        .filter(|e| is_shown(e) && mentions(e, "bob"))
        .map(|e| e.ev())
        .collect();
    assert_eq!(bob, ["wake", "delivery", "session-end"]);
    assert!(all().iter().any(|e| mentions(e, "you")));
    assert!(
        !all().iter().any(|e| mentions(e, "echo")),
        "a runtime is no peer"
    );
}

#[test]
fn since_forms() {
    let tz = TimeZone::UTC;
    let now: Timestamp = "2026-07-13T23:00:00Z".parse().unwrap();
    let at = |s: &str| parse_since(s, now, &tz).unwrap().to_string();
    for (since, want) in [
        ("90s", "2026-07-13T22:58:30Z"),
        ("15m", "2026-07-13T22:45:00Z"),
        ("2h", "2026-07-13T21:00:00Z"),
        ("1d", "2026-07-12T23:00:00Z"),
        ("14:03", "2026-07-13T14:03:00Z"),
        ("14:03:07", "2026-07-13T14:03:07Z"),
        ("2026-07-01", "2026-07-01T00:00:00Z"),
        ("2026-07-01T08:30", "2026-07-01T08:30:00Z"),
        ("2026-07-01 08:30:05", "2026-07-01T08:30:05Z"),
        ("2026-07-01T08:30:00+02:00", "2026-07-01T06:30:00Z"),
    ] {
        assert_eq!(at(since), want, "{since}");
    }
    for bad in ["", "soon", "5w", "m", "-5m"] {
        let e = parse_since(bad, now, &tz).unwrap_err();
        assert!(e.to_string().starts_with("--since:"), "{bad}: {e}");
    }
    let since = parse_since("23:00:02", now, &tz).unwrap();
    let recent: Vec<_> = all().into_iter().filter(|e| is_since(e, since)).collect();
    assert_eq!(recent.len(), 4);
}

#[test]
fn json_keeps_every_field_with_its_log() {
    let e = &all()[0];
    let v: serde_json::Value = serde_json::from_str(&json(e)).unwrap();
    assert_eq!(v["ts"], "2026-07-13T22:00:00.100Z");
    assert_eq!(v["log"], "lifecycle");
    assert_eq!(v["ev"], "wake");
    assert_eq!(v["identity"], "echo-bob");
    assert_eq!(v["pid"], "42");
}

#[test]
fn other_days_show_the_date_and_unknown_events_their_fields() {
    let tz = TimeZone::UTC;
    let e = parse(
        "ts=2026-07-12T10:00:00.000Z ev=storm caller=echo-a to=b action=paused",
        Source::Lifecycle,
    );
    assert_eq!(
        render(&e[0], &tz, civil::date(2026, 7, 13)),
        "2026-07-12 10:00:00 storm  caller=echo-a to=b action=paused"
    );
}

#[test]
fn one_entry_is_one_safe_line() {
    let e = parse(
        "ts=2026-07-13T10:00:00.000Z ev=wake-failed identity=echo-a reason=\"boom\\n\u{1b}[2Jmore\" screen=x",
        Source::Lifecycle,
    );
    let line = render(&e[0], &TimeZone::UTC, civil::date(2026, 7, 13));
    assert_eq!(line, "10:00:00 a (echo)  wake failed: boom");
    let e = parse(
        "ts=2026-07-13T10:00:00.000Z ev=storm note=\"a\u{1b}[31mb\"",
        Source::Lifecycle,
    );
    let line = render(&e[0], &TimeZone::UTC, civil::date(2026, 7, 13));
    assert!(
        !line.contains('\u{1b}') && line.contains("a␛[31mb"),
        "{line}"
    );
}

//! The cron and `@every` table from spec 09, with fake time (fixed instants and a POSIX time
//! zone with daylight saving, so nothing depends on the machine's zone or clock).

use super::*;

/// US Eastern: DST starts 2026-03-08 02:00 → 03:00, ends 2026-11-01 02:00 → 01:00.
fn ny() -> TimeZone {
    TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap()
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// The next `n` fires of `expr` after `from` in New York, as RFC 3339 with offset.
fn fires(expr: &str, from: &str, n: usize) -> Vec<String> {
    let tz = ny();
    let w = parse(expr).unwrap();
    let mut at = ts(from);
    let mut out = Vec::new();
    for _ in 0..n {
        at = w.next_after(at, at, &tz).unwrap();
        out.push(
            at.to_zoned(tz.clone())
                .strftime("%Y-%m-%d %H:%M%:z %a")
                .to_string(),
        );
    }
    out
}

/// Asserts that the next fires of `expr` after `from` are `want` (as `fires` writes them),
/// naming the expression when they are not.
fn assert_fires(expr: &str, from: &str, want: &[&str]) {
    assert_eq!(fires(expr, from, want.len()), want, "{expr:?} after {from}");
}

#[test]
fn fields_ranges_steps_and_lists() {
    assert_fires(
        "*/20 9-10 * * *",
        "2026-06-01T08:00:00-04:00",
        &[
            "2026-06-01 09:00-04:00 Mon",
            "2026-06-01 09:20-04:00 Mon",
            "2026-06-01 09:40-04:00 Mon",
            "2026-06-01 10:00-04:00 Mon",
            "2026-06-01 10:20-04:00 Mon",
            "2026-06-01 10:40-04:00 Mon",
            "2026-06-02 09:00-04:00 Tue",
        ],
    );
    // n/step = n..max/step; a-b/step; lists mixing forms.
    assert_fires(
        "50/5 0 * * *",
        "2026-06-01T00:00:00-04:00",
        &[
            "2026-06-01 00:50-04:00 Mon",
            "2026-06-01 00:55-04:00 Mon",
            "2026-06-02 00:50-04:00 Tue",
        ],
    );
    assert_fires(
        "0 1-5/2,23 * * *",
        "2026-06-01T00:00:00-04:00",
        &[
            "2026-06-01 01:00-04:00 Mon",
            "2026-06-01 03:00-04:00 Mon",
            "2026-06-01 05:00-04:00 Mon",
            "2026-06-01 23:00-04:00 Mon",
        ],
    );
    // Strictly after: a fire exactly at `after` is not repeated.
    assert_fires(
        "0 9 * * *",
        "2026-06-01T09:00:00-04:00",
        &["2026-06-02 09:00-04:00 Tue"],
    );
}

#[test]
fn sunday_is_0_and_7_and_weekday_ranges() {
    let zero = fires("0 12 * * 0", "2026-06-01T00:00:00-04:00", 2);
    assert_eq!(zero, fires("0 12 * * 7", "2026-06-01T00:00:00-04:00", 2));
    assert_eq!(
        zero,
        ["2026-06-07 12:00-04:00 Sun", "2026-06-14 12:00-04:00 Sun"]
    );
    assert_fires(
        "0 9 * * 5-7",
        "2026-06-01T00:00:00-04:00",
        &[
            "2026-06-05 09:00-04:00 Fri",
            "2026-06-06 09:00-04:00 Sat",
            "2026-06-07 09:00-04:00 Sun",
            "2026-06-12 09:00-04:00 Fri",
        ],
    );
}

#[test]
fn both_day_fields_restricted_means_either() {
    // The 13th OR any Friday.
    assert_fires(
        "0 0 13 * 5",
        "2026-11-01T12:00:00-05:00",
        &[
            "2026-11-06 00:00-05:00 Fri",
            "2026-11-13 00:00-05:00 Fri",
            "2026-11-20 00:00-05:00 Fri",
            "2026-11-27 00:00-05:00 Fri",
        ],
    );
    assert_fires(
        "0 0 13 * 1",
        "2026-07-01T00:00:00-04:00",
        &[
            "2026-07-06 00:00-04:00 Mon",
            "2026-07-13 00:00-04:00 Mon",
            "2026-07-20 00:00-04:00 Mon",
        ],
    );
    assert_fires(
        "0 0 14 * 1",
        "2026-07-01T00:00:00-04:00",
        &[
            "2026-07-06 00:00-04:00 Mon",
            "2026-07-13 00:00-04:00 Mon",
            "2026-07-14 00:00-04:00 Tue",
        ],
    );
    // Only day-of-month restricted: weekday ignored.
    assert_fires(
        "0 0 31 * *",
        "2026-01-01T00:00:00-05:00",
        &[
            "2026-01-31 00:00-05:00 Sat",
            "2026-03-31 00:00-04:00 Tue",
            "2026-05-31 00:00-04:00 Sun",
        ],
    );
}

#[test]
fn spring_forward_skips_the_missing_hour() {
    // 2026-03-08 02:00-02:59 does not exist in New York.
    assert_fires(
        "30 2 * * *",
        "2026-03-07T00:00:00-05:00",
        &[
            "2026-03-07 02:30-05:00 Sat",
            "2026-03-09 02:30-04:00 Mon",
            "2026-03-10 02:30-04:00 Tue",
        ],
    );
    // Every 30 minutes across the change: 01:30 EST is followed by 03:00 EDT.
    assert_fires(
        "*/30 * * * *",
        "2026-03-08T01:00:00-05:00",
        &[
            "2026-03-08 01:30-05:00 Sun",
            "2026-03-08 03:00-04:00 Sun",
            "2026-03-08 03:30-04:00 Sun",
        ],
    );
}

#[test]
fn fall_back_fires_on_both_passes_of_the_repeated_hour() {
    assert_fires(
        "30 1 * * *",
        "2026-10-31T12:00:00-04:00",
        &[
            "2026-11-01 01:30-04:00 Sun",
            "2026-11-01 01:30-05:00 Sun",
            "2026-11-02 01:30-05:00 Mon",
        ],
    );
    // A daily time outside the repeated hour fires once.
    assert_fires(
        "0 9 * * *",
        "2026-10-31T12:00:00-04:00",
        &["2026-11-01 09:00-05:00 Sun", "2026-11-02 09:00-05:00 Mon"],
    );
}

#[test]
fn leap_day_fires_within_four_years_and_impossible_dates_are_rejected() {
    let now = ts("2026-03-01T00:00:00Z");
    let tz = ny();
    assert!(check("0 0 29 2 *", now, &tz).is_ok(), "29 Feb 2028");
    assert_fires(
        "0 0 29 2 *",
        "2026-03-01T00:00:00Z",
        &["2028-02-29 00:00-05:00 Tue"],
    );
    for never in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"] {
        let e = check(never, now, &tz).unwrap_err();
        assert!(e.to_string().contains("can never fire"), "{never}: {e}");
    }
    // …but an impossible day-of-month ORed with a weekday fires on the weekday.
    assert!(check("0 0 30 2 1", now, &tz).is_ok());
}

#[test]
fn malformed_expressions_say_what_is_wrong() {
    let cases = [
        ("", "empty"),
        ("* * * *", "has 4 fields"),
        ("* * * * * *", "has 6 fields"),
        ("60 * * * *", "minute value 60 is outside 0-59"),
        ("* 24 * * *", "hour value 24 is outside 0-23"),
        ("* * 0 * *", "day-of-month value 0 is outside 1-31"),
        ("* * * 13 *", "month value 13 is outside 1-12"),
        ("* * * * 8", "day-of-week value 8 is outside 0-7"),
        ("* * * JAN *", "names like MON or JAN are not supported"),
        ("* * * * MON", "names like MON"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "starts after it ends"),
        ("1,,2 * * * *", "empty list item"),
        ("@daily", "only @ form is @every"),
        ("@every", "needs a duration"),
        ("@every 0s", "shorter than the minimum of 1s"),
        ("@every 500", "has no unit"),
        ("@every 5x", "\"x\" where a unit"),
        ("@every m", "needs a number"),
    ];
    for (expr, want) in cases {
        let e = parse(expr).unwrap_err();
        assert!(e.to_string().contains(want), "{expr:?}: {e}");
    }
}

#[test]
fn every_sums_units_and_has_a_one_second_minimum() {
    assert_eq!(parse("@every 1s"), Ok(When::Every(1_000)));
    assert_eq!(parse("@every 90s"), Ok(When::Every(90_000)));
    assert_eq!(parse("@every 1h30m"), Ok(When::Every(5_400_000)));
    assert_eq!(parse(" @every 2d "), Ok(When::Every(172_800_000)));
    assert_eq!(parse("@every 1d2h3m4s"), Ok(When::Every(93_784_000)));
}

#[test]
fn every_grid_is_anchored_at_arming_and_skips_missed_slots() {
    let anchor = ts("2026-06-01T10:00:00.250Z");
    let p = 2_000;
    for (now, want, case) in [
        (
            anchor,
            "2026-06-01T10:00:02.250Z",
            "before the first slot: the first slot",
        ),
        (
            ts("2026-06-01T10:00:02.300Z"),
            "2026-06-01T10:00:04.250Z",
            "just after a slot: the next one, on the anchor's grid (not the wake time's)",
        ),
        (
            ts("2026-06-01T10:00:04.250Z"),
            "2026-06-01T10:00:06.250Z",
            "exactly at a slot: strictly after",
        ),
        (
            ts("2026-06-01T11:00:01.000Z"),
            "2026-06-01T11:00:02.250Z",
            "an hour of missed slots (a sleep, a stop) collapses into the single next one",
        ),
        (
            ts("2026-06-01T09:00:00Z"),
            "2026-06-01T10:00:02.250Z",
            "a wake before the anchor (clock stepped back): anchor + period",
        ),
    ] {
        assert_eq!(every_next(anchor, p, now), ts(want), "{case}");
    }
    // Daylight saving does not bend an @every grid: 1h slots stay 1h apart in real time.
    let tz = ny();
    let w = parse("@every 1h").unwrap();
    let a = ts("2026-03-08T00:30:00-05:00");
    let t1 = w.next_after(a, a, &tz).unwrap();
    let t2 = w.next_after(t1, a, &tz).unwrap();
    let t3 = w.next_after(t2, a, &tz).unwrap();
    assert_eq!(t2.duration_since(t1), SignedDuration::from_hours(1));
    assert_eq!(t3.to_zoned(tz).strftime("%H:%M").to_string(), "04:30");
}

#[test]
fn a_tick_fires_at_most_once_and_never_replays_missed_slots() {
    let tz = ny();
    let w = parse("@every 2s").unwrap();
    let anchor = ts("2026-06-01T10:00:00Z");
    let slack = SignedDuration::from_millis(1);
    let next = w.next_after(anchor, anchor, &tz);
    // Not yet due.
    let (fire, n) = tick(&w, anchor, next, ts("2026-06-01T10:00:01Z"), slack, &tz);
    assert_eq!((fire, n), (None, next));
    // Due (woken a hair early is still due).
    let (fire, n) = tick(
        &w,
        anchor,
        next,
        ts("2026-06-01T10:00:01.9995Z"),
        slack,
        &tz,
    );
    assert_eq!(fire, Some(ts("2026-06-01T10:00:02Z")));
    assert_eq!(n, Some(ts("2026-06-01T10:00:04Z")));
    // Woken an hour late (a suspended laptop): one fire, then the next future slot.
    let (fire, n) = tick(&w, anchor, n, ts("2026-06-01T11:00:03Z"), slack, &tz);
    assert_eq!(fire, Some(ts("2026-06-01T10:00:04Z")));
    assert_eq!(n, Some(ts("2026-06-01T11:00:04Z")));
    let (fire, _) = tick(&w, anchor, n, ts("2026-06-01T11:00:03Z"), slack, &tz);
    assert_eq!(fire, None, "the same tick again fires nothing");
    // Cron the same way: a day missed gives one fire and tomorrow's slot.
    let c = parse("0 9 * * *").unwrap();
    let (fire, n) = tick(
        &c,
        anchor,
        Some(ts("2026-06-01T09:00:00-04:00")),
        ts("2026-06-03T12:00:00-04:00"),
        slack,
        &tz,
    );
    assert_eq!(fire, Some(ts("2026-06-01T09:00:00-04:00")));
    assert_eq!(n, Some(ts("2026-06-04T09:00:00-04:00")));
}

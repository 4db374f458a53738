//! Time stamps: the envelope `ts` (local, second precision, numeric offset; spec 03 §1 step 7),
//! its agent-form rendering (spec 03 §2), and log stamps (UTC with milliseconds; spec 11 §1).

use jiff::{Timestamp, Zoned};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A duration as people set it: whole seconds as `3 s`, else milliseconds (`1500 ms`).
pub fn spoken(d: std::time::Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// The current local time in the system time zone.
pub fn now_local() -> Zoned {
    Zoned::now()
}

/// An envelope stamp: `2026-07-14T01:23:45+03:00` (local time, numeric offset, seconds).
pub fn envelope_ts(at: &Zoned) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
}

/// A log stamp: `2026-07-13T22:23:45.123Z` (UTC, milliseconds).
pub fn log_ts(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// A stored time for a person: `HH:MM:SS` when `stamp` (any RFC 3339 time) falls on `today`
/// in `tz`, else `YYYY-MM-DD HH:MM:SS`; text that is not a time passes through. Used by
/// `iapeer inbox` and `iapeer logs`.
pub fn local_clock(stamp: &str, tz: &jiff::tz::TimeZone, today: jiff::civil::Date) -> String {
    let Ok(t) = stamp.parse::<Timestamp>() else {
        return stamp.to_string();
    };
    let z = t.to_zoned(tz.clone());
    if z.date() == today {
        z.strftime("%H:%M:%S").to_string()
    } else {
        z.strftime("%Y-%m-%d %H:%M:%S").to_string()
    }
}

/// Render an envelope `ts` for the agent form, relative to `now` (spec 03 §2): `HH:MM:SS`
/// when the stamp falls on the same local calendar day as `now` (in `now`'s time zone), else
/// `YYYY-MM-DD HH:MM:SS`. A stamp that does not parse passes through unchanged.
pub fn render_agent_ts(ts: &str, now: &Zoned) -> String {
    let Ok(stamp) = ts.parse::<Timestamp>() else {
        return ts.to_string();
    };
    let local = stamp.to_zoned(now.time_zone().clone());
    if local.date() == now.date() {
        local.strftime("%H:%M:%S").to_string()
    } else {
        local.strftime("%Y-%m-%d %H:%M:%S").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::tz::TimeZone;

    fn at(s: &str, tz: &str) -> Zoned {
        s.parse::<Timestamp>()
            .unwrap()
            .to_zoned(TimeZone::get(tz).unwrap())
    }

    #[test]
    fn envelope_ts_has_offset_and_seconds() {
        let z = at("2026-07-13T22:23:45.987Z", "Europe/Moscow");
        assert_eq!(envelope_ts(&z), "2026-07-14T01:23:45+03:00");
    }

    #[test]
    fn log_ts_is_utc_with_millis() {
        let t: Timestamp = "2026-07-13T22:23:45.987654Z".parse().unwrap();
        assert_eq!(log_ts(t), "2026-07-13T22:23:45.987Z");
    }

    #[test]
    fn agent_ts_same_day_is_time_only() {
        let now = at("2026-07-14T10:00:00Z", "Europe/Moscow");
        assert_eq!(
            render_agent_ts("2026-07-14T01:23:45+03:00", &now),
            "01:23:45"
        );
        assert_eq!(
            render_agent_ts("2026-07-13T23:59:59+03:00", &now),
            "2026-07-13 23:59:59"
        );
        // A stamp written in another offset is shown in the renderer's zone.
        assert_eq!(render_agent_ts("2026-07-14T08:00:00Z", &now), "11:00:00");
        assert_eq!(render_agent_ts("yesterday-ish", &now), "yesterday-ish");
    }
}

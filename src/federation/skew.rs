//! Clock skew between the hosts of a federation (issue 28 item 6), for `iapeer doctor`.
//!
//! Redis's clock is the reference: `doctor` opens its own short connection ([`measure`]) and
//! asks `TIME` between two readings of this host's clock, so the figure is fresh and its
//! error is bounded by the round trip (the link's report is written only when its state
//! changes, so a figure kept there would be stale or would make an idle link write every 5 s).
//! In the same round trip it reads every online host's `alive` key and its remaining life
//! (`PTTL`): Redis set that life to [`keys::ALIVE_TTL`] when the heartbeat arrived, so the
//! heartbeat's `time_ms` (by its writer's clock) can be set against Redis's clock of that
//! moment. [`level`] decides: up to [`WARN_ABOVE`] is fine, above [`FAIL_ABOVE`] is a problem.

use std::time::Instant;

use super::keys::{self, Heartbeat};

/// Skew above this (2 s) is worth a warning: heartbeat times shown by one host for another
/// read wrong by that much, and the delivery deadlines of the next steps are seconds long.
pub const WARN_ABOVE_MS: u64 = 2_000;

/// Skew above this (10 s, two heartbeat intervals) is a problem: a host's heartbeat time
/// then reads as lapsed (or from the future) by more than the heartbeat window, so "last
/// seen" and the retention of messages to an offline host are off by that much. Fix: NTP.
pub const FAIL_ABOVE_MS: u64 = 10_000;

/// How a skew figure comes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkewLevel {
    /// At most [`WARN_ABOVE_MS`].
    Ok,
    /// Above [`WARN_ABOVE_MS`], at most [`FAIL_ABOVE_MS`].
    Warn,
    /// Above [`FAIL_ABOVE_MS`].
    Fail,
}

/// The verdict on a skew of `skew_ms` (either sign: ahead or behind). Pure.
pub fn level(skew_ms: i64) -> SkewLevel {
    match skew_ms.unsigned_abs() {
        s if s > FAIL_ABOVE_MS => SkewLevel::Fail,
        s if s > WARN_ABOVE_MS => SkewLevel::Warn,
        _ => SkewLevel::Ok,
    }
}

/// A skew in words: `"12 ms ahead of"`, `"3.400 s behind"`, `"in step (0 ms) with"`. Pure.
pub fn words(skew_ms: i64) -> String {
    let abs = skew_ms.unsigned_abs();
    let amount = if abs < 1000 {
        format!("{abs} ms")
    } else {
        format!("{}.{:03} s", abs / 1000, abs % 1000)
    };
    match skew_ms {
        0 => "in step (0 ms) with".into(),
        s if s > 0 => format!("{amount} ahead of"),
        _ => format!("{amount} behind"),
    }
}

/// This host's clock minus Redis's, in ms: Redis answered `TIME` = `redis_ms` between this
/// host's readings `before_ms` and `after_ms`, taken as halfway. Pure.
pub fn own_skew(before_ms: u64, redis_ms: u64, after_ms: u64) -> i64 {
    let mid = before_ms / 2 + after_ms / 2 + (before_ms % 2 + after_ms % 2) / 2;
    mid as i64 - redis_ms as i64
}

/// Another host's clock minus Redis's, in ms: its heartbeat says `time_ms`, and Redis, at
/// `redis_now_ms`, has `pttl_ms` left of the [`keys::ALIVE_TTL`] it set when the heartbeat
/// arrived. Pure.
pub fn heartbeat_skew(time_ms: u64, redis_now_ms: u64, pttl_ms: u64) -> i64 {
    let ttl = keys::ALIVE_TTL.as_millis() as u64;
    let arrived = redis_now_ms.saturating_sub(ttl.saturating_sub(pttl_ms));
    time_ms as i64 - arrived as i64
}

/// What [`measure`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured {
    /// This host's clock minus Redis's, in ms.
    pub skew_ms: i64,
    /// The round trip of the `TIME` query, in ms (the figure's uncertainty is half of it).
    pub round_trip_ms: u64,
    /// Each other online host's clock minus Redis's, in ms, by name.
    pub hosts: Vec<(String, i64)>,
}

/// Connect for the membership `j` (timeouts and TLS as the link's), ask `TIME`, then read
/// the other online hosts' heartbeats with their remaining life against a second `TIME`.
///
/// Errors: Redis's (cannot connect, refused password, timeout, a TLS failure put in words by
/// [`super::tls::explain`]).
pub fn measure(j: &super::Joined) -> Result<Measured, String> {
    let mut con = super::link::connect(j).map_err(|e| e.to_string())?;
    measure_on(&mut con, &j.host).map_err(|e| e.to_string())
}

fn measure_on(con: &mut redis::Connection, this_host: &str) -> redis::RedisResult<Measured> {
    let started = Instant::now();
    let before = crate::clock::now_ms();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con)?;
    let after = crate::clock::now_ms();
    let round_trip_ms = started.elapsed().as_millis() as u64;
    let skew_ms = own_skew(before, secs * 1000 + micros / 1000, after);
    let names: Vec<String> = redis::cmd("HKEYS").arg(keys::hosts()).query(con)?;
    let mut hosts = Vec::new();
    for name in names.into_iter().filter(|n| n != this_host) {
        let alive = keys::alive(&name);
        let ((s, us), value, pttl): ((u64, u64), Option<String>, i64) = redis::pipe()
            .atomic()
            .cmd("TIME")
            .cmd("GET")
            .arg(&alive)
            .cmd("PTTL")
            .arg(&alive)
            .query(con)?;
        let hb = value.and_then(|v| serde_json::from_str::<Heartbeat>(&v).ok());
        if let (Some(hb), Ok(pttl)) = (hb, u64::try_from(pttl)) {
            hosts.push((name, heartbeat_skew(hb.time_ms, s * 1000 + us / 1000, pttl)));
        }
    }
    Ok(Measured {
        skew_ms,
        round_trip_ms,
        hosts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_up_to_two_seconds_is_fine_above_ten_a_problem() {
        for (skew, want) in [
            (0, SkewLevel::Ok),
            (2_000, SkewLevel::Ok),
            (-2_000, SkewLevel::Ok),
            (2_001, SkewLevel::Warn),
            (-9_999, SkewLevel::Warn),
            (10_000, SkewLevel::Warn),
            (10_001, SkewLevel::Fail),
            (-600_000, SkewLevel::Fail),
            (i64::MIN, SkewLevel::Fail),
        ] {
            assert_eq!(level(skew), want, "{skew}");
        }
    }

    #[test]
    fn skew_reads_as_ahead_or_behind() {
        assert_eq!(words(0), "in step (0 ms) with");
        assert_eq!(words(12), "12 ms ahead of");
        assert_eq!(words(-3_400), "3.400 s behind");
        assert_eq!(words(61_005), "61.005 s ahead of");
    }

    #[test]
    fn own_skew_is_taken_halfway_through_the_round_trip() {
        assert_eq!(own_skew(1_000, 1_005, 1_010), 0);
        assert_eq!(own_skew(1_000, 500, 1_010), 505);
        assert_eq!(own_skew(1_001, 4_000, 1_002), -2_999);
    }

    #[test]
    fn a_heartbeat_is_set_against_redis_s_clock_when_it_arrived() {
        let ttl = keys::ALIVE_TTL.as_millis() as u64;
        // Arrived 4 s ago by Redis's clock (4 s of its life gone), stamped 1.5 s later.
        assert_eq!(heartbeat_skew(97_500, 100_000, ttl - 4_000), 1_500);
        assert_eq!(heartbeat_skew(90_000, 100_000, ttl), -10_000);
    }
}

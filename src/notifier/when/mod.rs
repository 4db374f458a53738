//! A timer's schedule, the `when` field (spec 09 "Semantics"): a 5-field cron expression in
//! local time, or `@every <n><s|m|h|d>…` (minimum 1 s) on a grid anchored where the trigger
//! was armed. Pure: every function takes the time zone and the instants it works on.
//!
//! Cron fields are minute (0–59), hour (0–23), day-of-month (1–31), month (1–12) and
//! day-of-week (0–7, 0 and 7 = Sunday); each is a comma list of `*`, `n`, `a-b`, `*/s`,
//! `a-b/s` or `n/s` (= `n-max/s`); no names. When both day fields are restricted (not `*`),
//! a day matches when either matches. An expression that cannot fire within 4 years of the
//! time it is checked is rejected.
//!
//! Time changes: a cron time is matched against the wall clock of every real instant (the
//! `@agfpd/notifier-runtime` 0.3.x rule), so a time skipped by a spring-forward change does
//! not fire that day, and a time repeated by a fall-back change fires on both passes.

use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};

/// How far ahead a cron expression must be able to fire (spec 09: 4 years).
pub const HORIZON_DAYS: i64 = 4 * 366;

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// A 5-field cron expression.
    Cron(Cron),
    /// `@every`: the period in milliseconds (≥ 1000).
    Every(u64),
}

/// The sets of a cron expression, one bit per allowed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    /// Bit 0 = Sunday … bit 6 = Saturday (7 folded into 0).
    dow: u64,
    dom_restricted: bool,
    dow_restricted: bool,
}

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
}

const FIELDS: [Field; 5] = [
    Field {
        name: "minute",
        min: 0,
        max: 59,
    },
    Field {
        name: "hour",
        min: 0,
        max: 23,
    },
    Field {
        name: "day-of-month",
        min: 1,
        max: 31,
    },
    Field {
        name: "month",
        min: 1,
        max: 12,
    },
    Field {
        name: "day-of-week",
        min: 0,
        max: 7,
    },
];

/// Why a `when` schedule was refused. `Display` gives one sentence saying what is wrong, in
/// terms the caller can fix (spec 09 "Semantics").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhenError {
    /// The expression is empty.
    #[error("\"when\" is empty")]
    Empty,
    /// An `@` form other than `@every`.
    #[error("\"{0}\" is not a schedule: the only @ form is @every <n><s|m|h|d> (e.g. @every 30m)")]
    UnknownAt(String),
    /// `@every` without a duration.
    #[error("@every needs a duration, e.g. @every 30s, @every 5m, @every 1h30m")]
    EveryEmpty,
    /// `@every <body>` has a character that is not a unit.
    #[error("\"@every {body}\" has \"{found}\" where a unit s, m, h or d was expected (e.g. @every 90s, @every 1h30m)")]
    EveryBadUnit {
        /// The duration text.
        body: String,
        /// The character found.
        found: char,
    },
    /// `@every <body>` has a unit without a number before it.
    #[error("\"@every {0}\": each unit needs a number before it (e.g. @every 2h)")]
    EveryUnitWithoutNumber(String),
    /// `@every <body>`: a number does not fit.
    #[error("\"@every {body}\": the number {digits} is too large")]
    EveryNumberTooLarge {
        /// The duration text.
        body: String,
        /// The digits.
        digits: String,
    },
    /// `@every <body>` overflows milliseconds in a `u64`.
    #[error("\"@every {0}\" is too long")]
    EveryTooLong(String),
    /// `@every <body>` ends with a number without a unit.
    #[error("\"@every {body}\": the number {digits} has no unit; write s, m, h or d after it (e.g. @every {digits}s)")]
    EveryNumberWithoutUnit {
        /// The duration text.
        body: String,
        /// The digits.
        digits: String,
    },
    /// `@every <body>` is under one second.
    #[error("\"@every {0}\" is shorter than the minimum of 1s")]
    EveryTooShort(String),
    /// A cron expression with a field count other than 5.
    #[error("\"{expr}\" has {count} fields; a cron expression has 5: minute hour day-of-month month day-of-week (e.g. \"0 9 * * 1-5\" = 09:00 on weekdays)")]
    FieldCount {
        /// The expression.
        expr: String,
        /// How many fields it has.
        count: usize,
    },
    /// A cron field has something other than a number where one is expected.
    #[error("the {field} field has \"{token}\" where a number was expected (names like MON or JAN are not supported)")]
    NotANumber {
        /// The field's name (`minute`, `hour`, …).
        field: &'static str,
        /// The token.
        token: String,
    },
    /// A cron value outside its field's range.
    #[error("the {field} value {token} is outside {min}-{max}")]
    OutOfRange {
        /// The field's name.
        field: &'static str,
        /// The token.
        token: String,
        /// The field's minimum.
        min: u32,
        /// The field's maximum.
        max: u32,
    },
    /// A cron list with an empty item.
    #[error("the {field} field \"{raw}\" has an empty list item")]
    EmptyListItem {
        /// The field's name.
        field: &'static str,
        /// The field's text.
        raw: String,
    },
    /// A cron step that is not a whole number ≥ 1.
    #[error("the {field} step in \"{item}\" must be a whole number of at least 1")]
    BadStep {
        /// The field's name.
        field: &'static str,
        /// The list item.
        item: String,
    },
    /// A cron range whose start is after its end.
    #[error("the {field} range \"{range}\" starts after it ends")]
    BackwardRange {
        /// The field's name.
        field: &'static str,
        /// The range text.
        range: String,
    },
    /// A cron expression that cannot fire within [`HORIZON_DAYS`].
    #[error("the cron expression \"{0}\" can never fire (no date matches it within 4 years: check its day of month against its month)")]
    NeverFires(String),
}

/// Parse `when` without checking that a cron expression can ever fire (see [`check`]).
///
/// Errors: [`WhenError`], one sentence saying what is wrong, in terms the caller can fix.
pub fn parse(when: &str) -> Result<When, WhenError> {
    let w = when.trim();
    if w.is_empty() {
        return Err(WhenError::Empty);
    }
    if let Some(rest) = w.strip_prefix("@every") {
        return parse_every(rest.trim()).map(When::Every);
    }
    if w.starts_with('@') {
        return Err(WhenError::UnknownAt(w.to_string()));
    }
    parse_cron(w).map(When::Cron)
}

/// Parse `when` and, for cron, check that it fires within [`HORIZON_DAYS`] after `now` in
/// `tz`. This is the validation every trigger goes through.
///
/// Errors: as [`parse`], or [`WhenError::NeverFires`].
pub fn check(when: &str, now: Timestamp, tz: &TimeZone) -> Result<When, WhenError> {
    let parsed = parse(when)?;
    if let When::Cron(c) = &parsed {
        if c.next_after(now, tz).is_none() {
            return Err(WhenError::NeverFires(when.trim().to_string()));
        }
    }
    Ok(parsed)
}

fn parse_every(body: &str) -> Result<u64, WhenError> {
    if body.is_empty() {
        return Err(WhenError::EveryEmpty);
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in body.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            _ => {
                return Err(WhenError::EveryBadUnit {
                    body: body.to_string(),
                    found: c,
                })
            }
        };
        if digits.is_empty() {
            return Err(WhenError::EveryUnitWithoutNumber(body.to_string()));
        }
        let n: u64 = digits.parse().map_err(|_| WhenError::EveryNumberTooLarge {
            body: body.to_string(),
            digits: digits.clone(),
        })?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| WhenError::EveryTooLong(body.to_string()))?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(WhenError::EveryNumberWithoutUnit {
            body: body.to_string(),
            digits,
        });
    }
    if total < 1_000 {
        return Err(WhenError::EveryTooShort(body.to_string()));
    }
    Ok(total)
}

fn parse_cron(w: &str) -> Result<Cron, WhenError> {
    let parts: Vec<&str> = w.split_whitespace().collect();
    if parts.len() != 5 {
        return Err(WhenError::FieldCount {
            expr: w.to_string(),
            count: parts.len(),
        });
    }
    let mut sets = [0u64; 5];
    for (i, (raw, field)) in parts.iter().zip(FIELDS.iter()).enumerate() {
        sets[i] = parse_field(raw, field)?;
    }
    // Fold day-of-week 7 into 0 (both Sunday).
    let mut dow = sets[4];
    if dow & (1 << 7) != 0 {
        dow = (dow & !(1 << 7)) | 1;
    }
    Ok(Cron {
        minute: sets[0],
        hour: sets[1],
        dom: sets[2],
        month: sets[3],
        dow,
        dom_restricted: parts[2] != "*",
        dow_restricted: parts[4] != "*",
    })
}

fn number(tok: &str, field: &Field) -> Result<u32, WhenError> {
    if tok.is_empty() || !tok.bytes().all(|b| b.is_ascii_digit()) {
        return Err(WhenError::NotANumber {
            field: field.name,
            token: tok.to_string(),
        });
    }
    let v: u32 = tok.parse().unwrap_or(u32::MAX);
    if v < field.min || v > field.max {
        return Err(WhenError::OutOfRange {
            field: field.name,
            token: tok.to_string(),
            min: field.min,
            max: field.max,
        });
    }
    Ok(v)
}

fn parse_field(raw: &str, field: &Field) -> Result<u64, WhenError> {
    let mut set = 0u64;
    for item in raw.split(',') {
        if item.is_empty() {
            return Err(WhenError::EmptyListItem {
                field: field.name,
                raw: raw.to_string(),
            });
        }
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u32 =
                    s.parse()
                        .ok()
                        .filter(|v| *v >= 1)
                        .ok_or_else(|| WhenError::BadStep {
                            field: field.name,
                            item: item.to_string(),
                        })?;
                (r, Some(step))
            }
            None => (item, None),
        };
        let (lo, hi) = if range == "*" {
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (number(a, field)?, number(b, field)?)
        } else {
            let v = number(range, field)?;
            (v, if step.is_some() { field.max } else { v })
        };
        if lo > hi {
            return Err(WhenError::BackwardRange {
                field: field.name,
                range: range.to_string(),
            });
        }
        let mut v = lo;
        while v <= hi {
            set |= 1 << v;
            v += step.unwrap_or(1);
        }
    }
    Ok(set)
}

impl Cron {
    fn day_matches(&self, d: Date) -> bool {
        let dom = self.dom & (1 << d.day()) != 0;
        let dow = self.dow & (1 << d.weekday().to_sunday_zero_offset()) != 0;
        match (self.dom_restricted, self.dow_restricted) {
            (true, true) => dom || dow,
            (true, false) => dom,
            (false, true) => dow,
            (false, false) => true,
        }
    }

    /// The first instant strictly after `after` whose wall clock in `tz` matches, at a whole
    /// minute; `None` when there is none within [`HORIZON_DAYS`].
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let start = tz.to_datetime(after).date();
        let mut day = start;
        for _ in 0..=HORIZON_DAYS {
            if self.month & (1 << day.month()) != 0 && self.day_matches(day) {
                if let Some(t) = self.first_on(day, after, tz) {
                    return Some(t);
                }
            }
            day = day.tomorrow().ok()?;
        }
        None
    }

    fn first_on(&self, day: Date, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        for h in 0..24i8 {
            if self.hour & (1 << h) == 0 {
                continue;
            }
            for m in 0..60i8 {
                if self.minute & (1 << m) == 0 {
                    continue;
                }
                let dt = DateTime::from_parts(day, jiff::civil::time(h, m, 0, 0));
                for t in instants_of(dt, tz) {
                    if t > after {
                        return Some(t);
                    }
                }
            }
        }
        None
    }
}

/// The real instants whose wall clock in `tz` reads `dt`: none in a gap, two in a fold.
fn instants_of(dt: DateTime, tz: &TimeZone) -> Vec<Timestamp> {
    let offsets = match tz.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => vec![offset],
        AmbiguousOffset::Gap { .. } => vec![],
        AmbiguousOffset::Fold { before, after } => vec![before, after],
    };
    let mut out: Vec<Timestamp> = offsets
        .into_iter()
        .filter_map(|o| o.to_timestamp(dt).ok())
        .collect();
    out.sort();
    out
}

/// The next slot of an `@every` grid of `period_ms` anchored at `anchor`, strictly after
/// `after`. Slots missed before `after` are skipped, never replayed.
pub fn every_next(anchor: Timestamp, period_ms: u64, after: Timestamp) -> Timestamp {
    let period = period_ms.max(1) as i128 * 1_000_000;
    let a = anchor.as_nanosecond();
    let t = after.as_nanosecond();
    let n = if t < a { 1 } else { (t - a) / period + 1 };
    let next = a + n * period;
    Timestamp::from_nanosecond(next).unwrap_or(after + SignedDuration::from_millis(1000))
}

impl When {
    /// The next fire strictly after `after`: cron in `tz`, `@every` on the grid of `anchor`.
    /// `None` for a cron expression with no fire within the horizon.
    pub fn next_after(
        &self,
        after: Timestamp,
        anchor: Timestamp,
        tz: &TimeZone,
    ) -> Option<Timestamp> {
        match self {
            When::Cron(c) => c.next_after(after, tz),
            When::Every(ms) => Some(every_next(anchor, *ms, after)),
        }
    }
}

/// One tick of a timer whose next fire is `next`, at `now`: `(fire, next')`. `fire` is the
/// scheduled instant to fire now (`None` when `next` is still ahead, within `slack`);
/// `next'` is the slot after it, strictly after `now` — so a trigger fires at most once per
/// tick, and slots missed while the process slept or was down are skipped, never replayed.
pub fn tick(
    when: &When,
    anchor: Timestamp,
    next: Option<Timestamp>,
    now: Timestamp,
    slack: SignedDuration,
    tz: &TimeZone,
) -> (Option<Timestamp>, Option<Timestamp>) {
    match next {
        Some(n) if n <= now + slack => (Some(n), when.next_after(now.max(n), anchor, tz)),
        other => (None, other),
    }
}

#[cfg(test)]
mod tests;

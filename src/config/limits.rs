//! The limits the daemon's guards and notices read from the environment: plain data, filled
//! by [`super::Config`] and used by `daemon::storm`, `origin`, `notices` and `limits`. Kept
//! here, on the floor of `config`, so that `config` imports nothing above it.

use std::time::Duration;

/// The storm guard's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StormLimits {
    /// Messages in each direction within `window` that make an exchange a storm; 0 turns the
    /// guard off.
    pub limit: usize,
    /// The sliding window.
    pub window: Duration,
    /// How long a storm's pair stays paused.
    pub pause: Duration,
}

/// The origin guard's settings (`IAPEER_ORIGIN_GUARD`, `IAPEER_ORIGIN_GUARD_ARM_TTL_MS`,
/// `IAPEER_ORIGIN_HOLD_TTL_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OriginLimits {
    /// The guard is on (`IAPEER_ORIGIN_GUARD=0` turns it off).
    pub enabled: bool,
    /// How long an unanswered human message arms the guard (48 h).
    pub arm_ttl: Duration,
    /// How long a held send waits for `confirm-send` (15 min).
    pub hold_ttl: Duration,
}

/// How long a notice lives after its last repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoticeLimits {
    /// `IAPEER_NOTICE_TTL_MS`, default 1 h.
    pub ttl: Duration,
}

impl Default for NoticeLimits {
    fn default() -> Self {
        NoticeLimits {
            ttl: Duration::from_secs(3600),
        }
    }
}

/// Taking limited turns up again (`IAPEER_LIMIT_RESUME`, `IAPEER_LIMIT_BACKOFF_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeLimits {
    /// Take limited turns up again (`IAPEER_LIMIT_RESUME`, on unless `0`).
    pub enabled: bool,
    /// The first wait when no reset time was recorded (`IAPEER_LIMIT_BACKOFF_MS`, 5 min).
    pub backoff: Duration,
}

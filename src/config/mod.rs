//! Daemon configuration from the environment (spec 11 §3). Integer knobs that do not parse as
//! positive integers fall back to their default with one warning each. Every variable's name,
//! default and doc line is a row of [`vars::ENV_VARS`]; this file only says where each value
//! goes.

use std::time::Duration;

pub mod limits;
pub mod test_events;
pub mod vars;

/// How `tools/call` callers are authenticated (spec 02 §4, `IAPEER_MCP_AUTH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpAuth {
    /// A live session token bound to the identity header is required (default).
    Token,
    /// The identity header alone is trusted (the original tool's behaviour).
    Header,
}

/// Every tunable the daemon reads at start-up.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Loopback HTTP port (`IAPEER_PORT`).
    pub port: u16,
    /// Bearer required on every HTTP request (`IAPEER_BEARER_TOKEN`).
    pub bearer: Option<String>,
    /// Caller authentication mode (`IAPEER_MCP_AUTH`).
    pub mcp_auth: McpAuth,
    /// Idle time before an agent is slept (`IAPEER_IDLE_SECS`).
    pub idle: Duration,
    /// Quiet time that ends an armed ephemeral worker (`IAPEER_EPHEMERAL_QUIET_SECS`).
    pub ephemeral_quiet: Duration,
    /// Idleness that ends an unarmed ephemeral worker
    /// (`IAPEER_EPHEMERAL_UNARMED_IDLE_SECS`).
    pub ephemeral_unarmed_idle: Duration,
    /// The storm guard (`IAPEER_STORM_LIMIT`, `_WINDOW_SECS`, `_PAUSE_SECS`).
    pub storm: limits::StormLimits,
    /// The origin guard (`IAPEER_ORIGIN_GUARD`, `_ARM_TTL_MS`, `IAPEER_ORIGIN_HOLD_TTL_MS`).
    pub origin: limits::OriginLimits,
    /// The notice board (`IAPEER_NOTICE_TTL_MS`).
    pub notices: limits::NoticeLimits,
    /// Taking limited turns up again (`IAPEER_LIMIT_RESUME`, `IAPEER_LIMIT_BACKOFF_MS`).
    pub limits: limits::ResumeLimits,
    /// How long a permission prompt waits for a human (`IAPEER_APPROVAL_TIMEOUT_MS`, spec
    /// 10 §4).
    pub approval_timeout: Duration,
    /// Boot → ready deadline (`IAPEER_BOOT_DEADLINE_SECS`).
    pub boot_deadline: Duration,
    /// First message → model activity deadline (`IAPEER_READY_GATE_SECS`).
    pub ready_gate: Duration,
    /// Deaths that trip the crash-loop guard (`IAPEER_CRASHLOOP_MAX`).
    pub crashloop_max: usize,
    /// Window of the crash-loop guard (`IAPEER_CRASHLOOP_WINDOW_SECS`).
    pub crashloop_window: Duration,
    /// Delivery confirmation grace (`IAP_HOST_LIVENESS_GRACE_MS`).
    pub liveness_grace: Duration,
    /// How long a send waits for its answer unless it asks otherwise
    /// (`IAPEER_SEND_TIMEOUT_MS`).
    pub send_timeout: Duration,
    /// The largest attachment, bytes (`IAPEER_ATTACHMENT_MAX_BYTES`).
    pub attachment_max_bytes: u64,
    /// How long a message waits for a free composer (`IAPEER_COMPOSER_QUEUE_TIMEOUT_MS`).
    pub composer_hold: Duration,
    /// How long a live session may take no byte of a message being written before the send
    /// ends (`IAPEER_SEND_STALL_MS`, issue 26 item 6).
    pub send_stall: Duration,
    /// Supervise tick period (`IAPEER_TICK_SECS`).
    pub tick: Duration,
    /// Log routine tick decisions (`IAPEER_SUPERVISE_LOG_VERBOSE=1`).
    pub supervise_verbose: bool,
    /// Grace for an always-on peer that is restarting (`IAP_ALWAYS_ON_REVIVE_GRACE_MS`).
    pub revive_grace: Duration,
    /// Cap on held fleet long polls, and on event streams (`IAPEER_FLEET_HOLD_MAX`).
    pub fleet_hold_max: usize,
    /// The latency threads at `SCHED_FIFO` when the daemon may (`IAPEER_REALTIME`, on unless
    /// `0`; `daemon::realtime`).
    pub realtime: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: vars::IAPEER_PORT.default_u64() as u16,
            bearer: None,
            mcp_auth: McpAuth::Token,
            idle: vars::IAPEER_IDLE_SECS.default_duration(),
            ephemeral_quiet: vars::IAPEER_EPHEMERAL_QUIET_SECS.default_duration(),
            ephemeral_unarmed_idle: vars::IAPEER_EPHEMERAL_UNARMED_IDLE_SECS.default_duration(),
            storm: limits::StormLimits {
                limit: vars::IAPEER_STORM_LIMIT.default_u64() as usize,
                window: vars::IAPEER_STORM_WINDOW_SECS.default_duration(),
                pause: vars::IAPEER_STORM_PAUSE_SECS.default_duration(),
            },
            origin: limits::OriginLimits {
                enabled: true,
                arm_ttl: vars::IAPEER_ORIGIN_GUARD_ARM_TTL_MS.default_duration(),
                hold_ttl: vars::IAPEER_ORIGIN_HOLD_TTL_MS.default_duration(),
            },
            notices: limits::NoticeLimits {
                ttl: vars::IAPEER_NOTICE_TTL_MS.default_duration(),
            },
            limits: limits::ResumeLimits {
                enabled: true,
                backoff: vars::IAPEER_LIMIT_BACKOFF_MS.default_duration(),
            },
            approval_timeout: vars::IAPEER_APPROVAL_TIMEOUT_MS.default_duration(),
            boot_deadline: vars::IAPEER_BOOT_DEADLINE_SECS.default_duration(),
            ready_gate: vars::IAPEER_READY_GATE_SECS.default_duration(),
            crashloop_max: vars::IAPEER_CRASHLOOP_MAX.default_u64() as usize,
            crashloop_window: vars::IAPEER_CRASHLOOP_WINDOW_SECS.default_duration(),
            liveness_grace: vars::IAP_HOST_LIVENESS_GRACE_MS.default_duration(),
            send_timeout: vars::IAPEER_SEND_TIMEOUT_MS.default_duration(),
            attachment_max_bytes: vars::IAPEER_ATTACHMENT_MAX_BYTES.default_u64(),
            composer_hold: vars::IAPEER_COMPOSER_QUEUE_TIMEOUT_MS.default_duration(),
            send_stall: vars::IAPEER_SEND_STALL_MS.default_duration(),
            tick: vars::IAPEER_TICK_SECS.default_duration(),
            supervise_verbose: false,
            revive_grace: vars::IAP_ALWAYS_ON_REVIVE_GRACE_MS.default_duration(),
            fleet_hold_max: vars::IAPEER_FLEET_HOLD_MAX.default_u64() as usize,
            realtime: true,
        }
    }
}

impl Config {
    /// Read the process environment. Returns the config and one warning line per ignored
    /// value.
    pub fn from_env() -> (Config, Vec<String>) {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Build from any key lookup (pure; used by tests). Names, defaults and parsing come from
    /// the rows of [`vars`].
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> (Config, Vec<String>) {
        let mut warnings = Vec::new();
        let w = &mut warnings;
        let raw = |v: &vars::EnvVar| get(v.name);
        let duration =
            |w: &mut Vec<String>, v: &vars::EnvVar| v.parse_duration(raw(v).as_deref(), w);
        let port = vars::IAPEER_PORT.parse_u64(raw(&vars::IAPEER_PORT).as_deref(), w);
        let port = u16::try_from(port).unwrap_or_else(|_| {
            let default = vars::IAPEER_PORT.default_u64();
            w.push(format!(
                "IAPEER_PORT={port} is out of range; using {default}"
            ));
            default as u16
        });
        let crashloop_max =
            vars::IAPEER_CRASHLOOP_MAX.parse_u64(raw(&vars::IAPEER_CRASHLOOP_MAX).as_deref(), w);
        let mut cfg = Config {
            port,
            bearer: raw(&vars::IAPEER_BEARER_TOKEN).filter(|v| !v.is_empty()),
            mcp_auth: McpAuth::Token,
            idle: duration(w, &vars::IAPEER_IDLE_SECS),
            ephemeral_quiet: duration(w, &vars::IAPEER_EPHEMERAL_QUIET_SECS),
            ephemeral_unarmed_idle: duration(w, &vars::IAPEER_EPHEMERAL_UNARMED_IDLE_SECS),
            storm: limits::StormLimits {
                limit: vars::IAPEER_STORM_LIMIT
                    .parse_u64(raw(&vars::IAPEER_STORM_LIMIT).as_deref(), w)
                    as usize,
                window: duration(w, &vars::IAPEER_STORM_WINDOW_SECS),
                pause: duration(w, &vars::IAPEER_STORM_PAUSE_SECS),
            },
            origin: limits::OriginLimits {
                enabled: raw(&vars::IAPEER_ORIGIN_GUARD).as_deref().map(str::trim) != Some("0"),
                arm_ttl: duration(w, &vars::IAPEER_ORIGIN_GUARD_ARM_TTL_MS),
                // The original tool's name is read when ours is not set.
                hold_ttl: match raw(&vars::IAPEER_ORIGIN_HOLD_TTL_MS) {
                    None => duration(w, &vars::IAPEER_ORIGIN_GUARD_PENDING_TTL_MS),
                    Some(_) => duration(w, &vars::IAPEER_ORIGIN_HOLD_TTL_MS),
                },
            },
            notices: limits::NoticeLimits {
                ttl: duration(w, &vars::IAPEER_NOTICE_TTL_MS),
            },
            limits: limits::ResumeLimits {
                enabled: raw(&vars::IAPEER_LIMIT_RESUME).as_deref().map(str::trim) != Some("0"),
                backoff: duration(w, &vars::IAPEER_LIMIT_BACKOFF_MS),
            },
            approval_timeout: duration(w, &vars::IAPEER_APPROVAL_TIMEOUT_MS),
            boot_deadline: duration(w, &vars::IAPEER_BOOT_DEADLINE_SECS),
            ready_gate: duration(w, &vars::IAPEER_READY_GATE_SECS),
            crashloop_max: crashloop_max as usize,
            crashloop_window: duration(w, &vars::IAPEER_CRASHLOOP_WINDOW_SECS),
            liveness_grace: duration(w, &vars::IAP_HOST_LIVENESS_GRACE_MS),
            send_timeout: duration(w, &vars::IAPEER_SEND_TIMEOUT_MS),
            attachment_max_bytes: vars::IAPEER_ATTACHMENT_MAX_BYTES
                .parse_u64(raw(&vars::IAPEER_ATTACHMENT_MAX_BYTES).as_deref(), w),
            composer_hold: duration(w, &vars::IAPEER_COMPOSER_QUEUE_TIMEOUT_MS),
            send_stall: duration(w, &vars::IAPEER_SEND_STALL_MS),
            tick: duration(w, &vars::IAPEER_TICK_SECS),
            supervise_verbose: vars::IAPEER_SUPERVISE_LOG_VERBOSE
                .parse_switch(raw(&vars::IAPEER_SUPERVISE_LOG_VERBOSE).as_deref()),
            revive_grace: duration(w, &vars::IAP_ALWAYS_ON_REVIVE_GRACE_MS),
            fleet_hold_max: vars::IAPEER_FLEET_HOLD_MAX
                .parse_u64(raw(&vars::IAPEER_FLEET_HOLD_MAX).as_deref(), w)
                .try_into()
                .unwrap_or(usize::MAX),
            realtime: raw(&vars::IAPEER_REALTIME).as_deref().map(str::trim) != Some("0"),
        };
        match raw(&vars::IAPEER_MCP_AUTH).as_deref() {
            None | Some("") | Some("token") => {}
            Some("header") => cfg.mcp_auth = McpAuth::Header,
            Some(other) => warnings.push(format!(
                "IAPEER_MCP_AUTH={other:?} is not token or header; using token"
            )),
        }
        (cfg, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> (Config, Vec<String>) {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_when_unset() {
        let (c, w) = cfg(&[]);
        assert_eq!(c, Config::default());
        assert!(w.is_empty());
    }

    #[test]
    fn values_are_read_and_junk_falls_back_with_a_warning() {
        let (c, w) = cfg(&[
            ("IAPEER_PORT", "0"),
            ("IAPEER_IDLE_SECS", "2"),
            ("IAPEER_TICK_SECS", "junk"),
            ("IAPEER_CRASHLOOP_MAX", "-1"),
            ("IAPEER_MCP_AUTH", "header"),
        ]);
        assert_eq!(c.port, 0);
        assert_eq!(c.idle, Duration::from_secs(2));
        assert_eq!(c.tick, Duration::from_secs(60));
        assert_eq!(c.crashloop_max, 3);
        assert_eq!(c.mcp_auth, McpAuth::Header);
        assert_eq!(w.len(), 2, "{w:?}");
    }

    /// The original tool's name of the hold TTL is read; ours wins when both are set.
    #[test]
    fn the_original_name_of_the_hold_ttl_is_read() {
        let (c, _) = cfg(&[("IAPEER_ORIGIN_GUARD_PENDING_TTL_MS", "60000")]);
        assert_eq!(c.origin.hold_ttl, Duration::from_secs(60));
        let (c, _) = cfg(&[
            ("IAPEER_ORIGIN_GUARD_PENDING_TTL_MS", "60000"),
            ("IAPEER_ORIGIN_HOLD_TTL_MS", "120000"),
        ]);
        assert_eq!(c.origin.hold_ttl, Duration::from_secs(120));
    }

    #[test]
    fn an_out_of_range_port_falls_back() {
        let (c, w) = cfg(&[("IAPEER_PORT", "70000")]);
        assert_eq!(c.port, 8765);
        assert_eq!(w.len(), 1);
    }
}

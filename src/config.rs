//! Daemon configuration from the environment (spec 11 §3). Integer knobs that do not parse as
//! positive integers fall back to their default with one warning each.

use std::time::Duration;

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
    /// Loopback HTTP port (`IAPEER_PORT`, default 8765; 0 = any free port).
    pub port: u16,
    /// Bearer required on every HTTP request (`IAPEER_BEARER_TOKEN`).
    pub bearer: Option<String>,
    /// Caller authentication mode (`IAPEER_MCP_AUTH`).
    pub mcp_auth: McpAuth,
    /// Idle time before an agent is slept (`IAPEER_IDLE_SECS`, 3600 s).
    pub idle: Duration,
    /// Boot → ready deadline (`IAPEER_BOOT_DEADLINE_SECS`, 240 s).
    pub boot_deadline: Duration,
    /// First message → model activity deadline (`IAPEER_READY_GATE_SECS`, 120 s).
    pub ready_gate: Duration,
    /// Deaths that trip the crash-loop guard (`IAPEER_CRASHLOOP_MAX`, 3).
    pub crashloop_max: usize,
    /// Window of the crash-loop guard (`IAPEER_CRASHLOOP_WINDOW_SECS`, 300 s).
    pub crashloop_window: Duration,
    /// Delivery confirmation grace (`IAP_HOST_LIVENESS_GRACE_MS`, 4000 ms).
    pub liveness_grace: Duration,
    /// Supervise tick period (`IAPEER_TICK_SECS`, 60 s; a test knob).
    pub tick: Duration,
    /// Log routine tick decisions (`IAPEER_SUPERVISE_LOG_VERBOSE=1`).
    pub supervise_verbose: bool,
    /// Grace for an always-on peer that is restarting (`IAP_ALWAYS_ON_REVIVE_GRACE_MS`, 4000 ms).
    pub revive_grace: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 8765,
            bearer: None,
            mcp_auth: McpAuth::Token,
            idle: Duration::from_secs(3600),
            boot_deadline: Duration::from_secs(240),
            ready_gate: Duration::from_secs(120),
            crashloop_max: 3,
            crashloop_window: Duration::from_secs(300),
            liveness_grace: Duration::from_millis(4000),
            tick: Duration::from_secs(60),
            supervise_verbose: false,
            revive_grace: Duration::from_millis(4000),
        }
    }
}

impl Config {
    /// Read the process environment. Returns the config and one warning line per ignored
    /// value.
    pub fn from_env() -> (Config, Vec<String>) {
        Config::from_lookup(|k| std::env::var(k).ok())
    }

    /// Build from any key lookup (pure; used by tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> (Config, Vec<String>) {
        let d = Config::default();
        let mut warnings = Vec::new();
        let num = |warnings: &mut Vec<String>, key: &str, default: u64, allow_zero: bool| -> u64 {
            match get(key) {
                None => default,
                Some(v) if v.trim().is_empty() => default,
                Some(v) => match v.trim().parse::<u64>() {
                    Ok(n) if n > 0 || allow_zero => n,
                    _ => {
                        warnings.push(format!(
                            "{key}={v:?} is not a positive integer; using {default}"
                        ));
                        default
                    }
                },
            }
        };
        let w = &mut warnings;
        let port = num(w, "IAPEER_PORT", 8765, true);
        let port = u16::try_from(port).unwrap_or_else(|_| {
            w.push(format!("IAPEER_PORT={port} is out of range; using 8765"));
            8765
        });
        let cfg = Config {
            port,
            bearer: get("IAPEER_BEARER_TOKEN").filter(|v| !v.is_empty()),
            mcp_auth: McpAuth::Token,
            idle: Duration::from_secs(num(w, "IAPEER_IDLE_SECS", d.idle.as_secs(), false)),
            boot_deadline: Duration::from_secs(num(
                w,
                "IAPEER_BOOT_DEADLINE_SECS",
                d.boot_deadline.as_secs(),
                false,
            )),
            ready_gate: Duration::from_secs(num(
                w,
                "IAPEER_READY_GATE_SECS",
                d.ready_gate.as_secs(),
                false,
            )),
            crashloop_max: num(w, "IAPEER_CRASHLOOP_MAX", 3, false) as usize,
            crashloop_window: Duration::from_secs(num(
                w,
                "IAPEER_CRASHLOOP_WINDOW_SECS",
                d.crashloop_window.as_secs(),
                false,
            )),
            liveness_grace: Duration::from_millis(num(
                w,
                "IAP_HOST_LIVENESS_GRACE_MS",
                4000,
                false,
            )),
            tick: Duration::from_secs(num(w, "IAPEER_TICK_SECS", 60, false)),
            supervise_verbose: get("IAPEER_SUPERVISE_LOG_VERBOSE").as_deref() == Some("1"),
            revive_grace: Duration::from_millis(num(
                w,
                "IAP_ALWAYS_ON_REVIVE_GRACE_MS",
                4000,
                false,
            )),
        };
        let mut cfg = cfg;
        match get("IAPEER_MCP_AUTH").as_deref() {
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

    #[test]
    fn an_out_of_range_port_falls_back() {
        let (c, w) = cfg(&[("IAPEER_PORT", "70000")]);
        assert_eq!(c.port, 8765);
        assert_eq!(w.len(), 1);
    }
}

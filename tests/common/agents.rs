//! Steps the end-to-end tests of the agent CLIs share (codex, gemini_e2e, opencode_peer,
//! claude, notices, if_busy): a send (on a topic), the wait for the model's `send_to_peer` to
//! arrive.

use std::time::Duration;

use super::TestEnv;

impl TestEnv {
    /// The approval request `id` was denied by a human: the command it asked for did not
    /// run (`made`, the file it would have made, is absent) and `lifecycle.log` has its
    /// `approval-denied` event `by=denied`. Panics otherwise.
    pub fn assert_denied(&self, id: &str, made: &std::path::Path) {
        assert!(
            !made.exists(),
            "a denied command ran ({} exists)\n{}",
            made.display(),
            self.diagnostics()
        );
        assert!(
            self.has_event(
                "lifecycle",
                "approval-denied",
                &[("id", id), ("by", "denied")]
            ),
            "no approval-denied event for {id}\n{}",
            self.diagnostics()
        );
    }

    /// `iapeer send <to> --from <from> --message <message> --topic <topic>`: its answer,
    /// trimmed. Panics when the send fails.
    pub fn send_on_topic(&self, to: &str, from: &str, message: &str, topic: &str) -> String {
        self.ok(&[
            "send",
            to,
            "--from",
            from,
            "--message",
            message,
            "--topic",
            topic,
        ])
        .trim()
        .to_string()
    }

    /// `iapeer send <to> --from <from> --message <message>`: its stdout. Panics when the send
    /// fails.
    pub fn send_from(&self, to: &str, from: &str, message: &str) -> String {
        self.ok(&["send", to, "--from", from, "--message", message])
    }

    /// Wait (at most `within`) until `delivery.log` records a successful MCP send from the
    /// identity `caller` to `to`: a model's `send_to_peer` reached its target.
    pub fn wait_mcp_delivery(&self, caller: &str, to: &str, within: Duration) {
        self.wait_until(
            &format!("{caller}'s send_to_peer reaches {to}"),
            within,
            |e| {
                e.events("delivery", "delivery").iter().any(|d| {
                    d["caller"] == caller
                        && d["to"] == to
                        && d["ok"] == "true"
                        && d["path"] == "mcp"
                })
            },
        );
    }
}

/// Issue 27's slow wake: the echo peer `ea`'s `launch.env` makes it take 65 s to boot, so a
/// `send_to_peer` to it while asleep is held by the daemon over 60 s (the limit Gemini CLI's
/// fetch and Claude Code's POST had, and OpenCode's MCP SDK default).
pub const SLOW_BOOT_ENV: &str = "PEER_START_ARGS=--boot-delay-ms 65000\n";

impl TestEnv {
    /// Wait until `result` finds the tool result the agent's model got for its `send_to_peer`
    /// to a slow-waking peer ([`SLOW_BOOT_ENV`]), called at `called`; panics unless it came
    /// over 60 s later and carries the send's result (`delivered_to`, no "timed out").
    /// Returns how long the call was held.
    pub fn assert_slow_send_result(
        &self,
        agent: &str,
        called: std::time::Instant,
        result: impl Fn() -> Option<String>,
    ) -> Duration {
        self.wait_until(
            &format!("{agent}'s send_to_peer result reaches its model"),
            Duration::from_secs(150),
            |_| result().is_some(),
        );
        let waited = called.elapsed();
        let result = result().unwrap_or_default();
        assert!(
            waited > Duration::from_secs(60),
            "{agent}: answered in {waited:?}: {result}\n{}",
            self.diagnostics()
        );
        assert!(
            result.contains("delivered_to") && !result.to_lowercase().contains("timed out"),
            "{agent} got no result: {result}\n{}",
            self.diagnostics()
        );
        eprintln!("{agent} slow send: held {waited:?}");
        waited
    }
}

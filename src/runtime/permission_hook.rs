//! The `PermissionRequest` hook both gated runtimes run (spec 10 §4): `iapeer
//! approval-request`, its input (what the prompt asks) and its output (the decision). Claude
//! Code 2.1.332 and Codex 0.171.0 were each recorded with the same shapes
//! (`tests/fixtures/claude-2.1.332/approvals/`, `tests/fixtures/codex-0.171.0/approvals/`):
//! stdin `{…,"hook_event_name":"PermissionRequest","tool_name","tool_input":{…}}`, stdout
//! `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":
//! "allow"|"deny","message"?}}}`, the message handed to the model. Each runtime's launch
//! flags are in [`super::claude_gate`] and [`super::codex_gate`].

use std::time::Duration;

use serde_json::{json, Value};

/// The hidden verb a gated runtime runs as the hook (`iapeer approval-request`).
pub const HOOK_VERB: &str = "approval-request";

/// The longest `summary` of a request, in characters (the rest is cut with `…`).
pub const SUMMARY_MAX_CHARS: usize = 500;

/// What a permission prompt asks, as read from the hook's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionAsk {
    /// The tool (`Bash`, `Write`, `NetworkAccess`, `mcp__srv__tool`, …).
    pub tool: String,
    /// What it wants to run, for a human: a `command`, a file tool's `file_path`, a `url`
    /// or a `pattern`, else the tool input as compact JSON; at most [`SUMMARY_MAX_CHARS`]
    /// characters.
    pub summary: String,
}

/// Why the hook's input is not a permission request.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The input is not JSON.
    #[error("the hook input is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The input has no string `tool_name`.
    #[error("the hook input has no string \"tool_name\"")]
    NoToolName,
}

/// Read the hook's stdin.
///
/// Errors: [`AskError`], the text is not a JSON object with a string `tool_name`.
pub fn read_ask(text: &str) -> Result<PermissionAsk, AskError> {
    let v: Value = serde_json::from_str(text).map_err(AskError::NotJson)?;
    let tool = v["tool_name"]
        .as_str()
        .ok_or(AskError::NoToolName)?
        .to_string();
    let input = &v["tool_input"];
    let summary = ["command", "file_path", "url", "pattern"]
        .iter()
        .find_map(|k| input[*k].as_str().map(str::to_string))
        .unwrap_or_else(|| input.to_string());
    Ok(PermissionAsk {
        tool,
        summary: clip(&summary, SUMMARY_MAX_CHARS),
    })
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// The hook's stdout for a decision: allow, or deny with `message` (which the runtime hands
/// to the model).
pub fn answer(allow: bool, message: &str) -> String {
    let decision = if allow {
        json!({"behavior": "allow"})
    } else {
        json!({"behavior": "deny", "message": message})
    };
    json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}})
        .to_string()
}

/// The hook's command line: `<exe> approval-request`, the path as one POSIX shell word.
pub fn hook_command(exe: &std::path::Path) -> String {
    format!("{} {HOOK_VERB}", sh_quote(&exe.to_string_lossy()))
}

/// How much longer than the broker's timeout a gated runtime lets the hook run, so the
/// broker's deny (not the runtime's hook timeout, after which Codex would ask on its own
/// screen) ends a prompt nobody answered.
const HOOK_MARGIN: Duration = Duration::from_secs(30);

/// The hook timeout a gated launch gives its runtime, in whole seconds (at least 1): the
/// broker's `timeout` and a 30 s margin.
pub fn hook_timeout_secs(timeout: Duration) -> u64 {
    (timeout + HOOK_MARGIN).as_secs().max(1)
}

/// `s` as one POSIX shell word (single quotes; a `'` inside becomes `'\''`).
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_outlasts_the_broker_by_the_margin_in_whole_seconds() {
        assert_eq!(hook_timeout_secs(Duration::from_millis(300_000)), 330);
        assert_eq!(hook_timeout_secs(Duration::from_millis(300_999)), 330);
        assert_eq!(hook_timeout_secs(Duration::ZERO), 30);
    }

    #[test]
    fn quotes_survive_the_shell_word() {
        assert_eq!(sh_quote("a'b"), r"'a'\''b'");
        assert_eq!(
            hook_command(std::path::Path::new("/opt/i p/iapeer")),
            "'/opt/i p/iapeer' approval-request"
        );
    }

    #[test]
    fn the_recorded_hook_inputs_of_both_runtimes_are_read() {
        let claude = include_str!(
            "../../tests/fixtures/claude-2.1.332/approvals/permission-request-bash.json"
        );
        let ask = read_ask(claude).unwrap();
        assert_eq!(ask.tool, "Bash");
        assert!(ask.summary.contains("touch "), "{}", ask.summary);
        let codex = include_str!(
            "../../tests/fixtures/codex-0.171.0/approvals/permission-request-exec.json"
        );
        let ask = read_ask(codex).unwrap();
        assert_eq!(ask.tool, "Bash");
        assert_eq!(ask.summary, "touch /srv/peer1/made");
    }

    #[test]
    fn summaries_fall_back_to_the_input_and_are_clipped() {
        let ask = read_ask(r#"{"tool_name":"NetworkAccess","tool_input":{"n":1}}"#).unwrap();
        assert_eq!(ask.summary, r#"{"n":1}"#);
        let long = "y".repeat(900);
        let ask = read_ask(&json!({"tool_name":"Bash","tool_input":{"command":long}}).to_string())
            .unwrap();
        assert_eq!(ask.summary.chars().count(), SUMMARY_MAX_CHARS);
        assert!(ask.summary.ends_with('…'));
        assert!(read_ask("{}").is_err());
        assert!(read_ask("nope").is_err());
    }

    #[test]
    fn answers_have_the_recorded_shape() {
        let allow: Value = serde_json::from_str(&answer(true, "")).unwrap();
        assert_eq!(
            allow,
            json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}})
        );
        let deny: Value = serde_json::from_str(&answer(false, "no")).unwrap();
        assert_eq!(
            deny["hookSpecificOutput"]["decision"],
            json!({"behavior":"deny","message":"no"})
        );
    }
}

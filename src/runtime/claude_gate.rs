//! Claude Code's gated mode (spec 10 §4): the launch flags of a gated peer and the shapes of
//! Claude Code's `PermissionRequest` hook, through which each permission prompt reaches the
//! daemon's approval broker instead of the screen.
//!
//! Recorded from Claude Code 2.1.332 (`tests/fixtures/claude-2.1.332/approvals/`): without
//! `--dangerously-skip-permissions` the default permission mode is now `auto` ("Claude checks
//! each tool call for risky actions … runs the ones it assesses as lower-risk"), so a gated
//! launch asks for `--permission-mode manual` (status line `⏸ manual mode on`). A hook
//! registered for `PermissionRequest` gets on stdin
//! `{"session_id","transcript_path","cwd","permission_mode","hook_event_name":"PermissionRequest","tool_name","tool_input",…}`
//! and answers on stdout
//! `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"|"deny","message"?}}}`.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

/// The hidden verb Claude Code runs as the hook (`iapeer approval-request`).
pub const HOOK_VERB: &str = "approval-request";

/// iapeer's own MCP tool, allowed without a prompt: a gated peer still talks to its peers.
pub const OWN_TOOL: &str = "mcp__iapeer__send_to_peer";

/// How much longer than the broker's timeout Claude Code lets the hook run, so the broker's
/// deny (not Claude's hook timeout) ends a prompt nobody answered.
const HOOK_MARGIN: Duration = Duration::from_secs(30);

/// The longest `summary` of a request, in characters (the rest is cut with `…`).
pub const SUMMARY_MAX_CHARS: usize = 500;

/// The flags a gated launch uses instead of `--dangerously-skip-permissions`: manual
/// permission mode, iapeer's own tool allowed, and `--settings` with a `PermissionRequest`
/// hook that runs `<exe> approval-request` for every tool (its timeout: `timeout` + 30 s, in
/// whole seconds).
pub fn launch_args(exe: &Path, timeout: Duration) -> Vec<OsString> {
    let command = format!("{} {HOOK_VERB}", sh_quote(&exe.to_string_lossy()));
    let settings = json!({
        "hooks": {
            "PermissionRequest": [{
                "matcher": "*",
                "hooks": [{
                    "type": "command",
                    "command": command,
                    "timeout": (timeout + HOOK_MARGIN).as_secs().max(1),
                }],
            }],
        },
    });
    vec![
        "--permission-mode".into(),
        "manual".into(),
        "--allowedTools".into(),
        OWN_TOOL.into(),
        "--settings".into(),
        settings.to_string().into(),
    ]
}

/// `s` as one POSIX shell word (single quotes; a `'` inside becomes `'\''`).
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What a permission prompt asks, as read from the hook's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionAsk {
    /// The tool (`Bash`, `Write`, `mcp__srv__tool`, …).
    pub tool: String,
    /// What it wants to run, for a human: a Bash `command`, a file tool's `file_path`, else
    /// the tool input as compact JSON; at most [`SUMMARY_MAX_CHARS`] characters.
    pub summary: String,
}

/// Read the hook's stdin (a `PermissionRequest` hook input of Claude Code 2.1.332).
///
/// Errors: the text is not a JSON object with a string `tool_name`.
pub fn read_ask(text: &str) -> Result<PermissionAsk, String> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("the hook input is not JSON: {e}"))?;
    let tool = v["tool_name"]
        .as_str()
        .ok_or("the hook input has no string \"tool_name\"")?
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

/// The hook's stdout for a decision: allow, or deny with `message` (which Claude Code hands
/// to the model).
pub fn answer(allow: bool, message: &str) -> String {
    let decision = if allow {
        json!({"behavior": "allow"})
    } else {
        json!({"behavior": "deny", "message": message})
    };
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": decision,
        },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_args_install_the_hook_with_a_margin_over_the_timeout() {
        let args = launch_args(Path::new("/opt/i p/iapeer"), Duration::from_millis(300_000));
        assert_eq!(
            &args[..4],
            &["--permission-mode", "manual", "--allowedTools", OWN_TOOL]
        );
        assert_eq!(args[4], "--settings");
        let v: Value = serde_json::from_str(args[5].to_str().unwrap()).unwrap();
        let hook = &v["hooks"]["PermissionRequest"][0];
        assert_eq!(hook["matcher"], "*");
        assert_eq!(
            hook["hooks"][0]["command"],
            "'/opt/i p/iapeer' approval-request"
        );
        assert_eq!(hook["hooks"][0]["timeout"], 330);
        assert!(!args.iter().any(|a| a == "--dangerously-skip-permissions"));
    }

    #[test]
    fn quotes_survive_the_shell_word() {
        assert_eq!(sh_quote("a'b"), r"'a'\''b'");
    }

    #[test]
    fn the_recorded_hook_input_is_read() {
        let text = include_str!(
            "../../tests/fixtures/claude-2.1.332/approvals/permission-request-bash.json"
        );
        let ask = read_ask(text).unwrap();
        assert_eq!(ask.tool, "Bash");
        assert!(ask.summary.contains("touch "), "{}", ask.summary);
    }

    #[test]
    fn summaries_fall_back_to_the_input_and_are_clipped() {
        let ask = read_ask(r#"{"tool_name":"X","tool_input":{"n":1}}"#).unwrap();
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
    fn answers_have_the_shape_claude_code_reads() {
        let allow: Value = serde_json::from_str(&answer(true, "")).unwrap();
        assert_eq!(
            allow,
            json!({"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}})
        );
        let deny: Value = serde_json::from_str(&answer(false, "no")).unwrap();
        assert_eq!(deny["hookSpecificOutput"]["decision"]["behavior"], "deny");
        assert_eq!(deny["hookSpecificOutput"]["decision"]["message"], "no");
    }
}

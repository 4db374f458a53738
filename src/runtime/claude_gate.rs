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

use serde_json::json;

use super::permission_hook::{hook_command, hook_timeout_secs};

/// iapeer's own MCP tool, allowed without a prompt: a gated peer still talks to its peers.
pub const OWN_TOOL: &str = "mcp__iapeer__send_to_peer";

/// The flags a gated launch uses instead of `--dangerously-skip-permissions`: manual
/// permission mode, iapeer's own tool allowed, and `--settings` with a `PermissionRequest`
/// hook that runs `<exe> approval-request` for every tool (its timeout: `timeout` + 30 s, in
/// whole seconds, [`hook_timeout_secs`]).
pub fn launch_args(exe: &Path, timeout: Duration) -> Vec<OsString> {
    let command = hook_command(exe);
    let settings = json!({
        "hooks": {
            "PermissionRequest": [{
                "matcher": "*",
                "hooks": [{
                    "type": "command",
                    "command": command,
                    "timeout": hook_timeout_secs(timeout),
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
        let v: serde_json::Value = serde_json::from_str(args[5].to_str().unwrap()).unwrap();
        let hook = &v["hooks"]["PermissionRequest"][0];
        assert_eq!(hook["matcher"], "*");
        assert_eq!(
            hook["hooks"][0]["command"],
            "'/opt/i p/iapeer' approval-request"
        );
        assert_eq!(hook["hooks"][0]["timeout"], 330);
        assert!(!args.iter().any(|a| a == "--dangerously-skip-permissions"));
    }
}

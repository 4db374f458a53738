//! Codex's gated mode (spec 10 §4): the launch flags of a gated Codex peer and the shapes of
//! Codex's `PermissionRequest` hook, through which each approval Codex would ask its user for
//! reaches the daemon's approval broker instead.
//!
//! Recorded from Codex 0.171.0 (`tests/fixtures/codex-0.171.0/approvals/`):
//!
//! - Approval policies: 0.171.0 knows `on-request` and `never` only (`untrusted` is refused:
//!   "no longer supported"). A gated launch uses `-a on-request -s read-only`: commands run
//!   in a read-only sandbox, and anything more (a write, the network) is run only once the
//!   model asks for it with escalated permissions and the approval is granted.
//! - The hook: Codex reads hooks from the `hooks` table of every config layer, the `-c`
//!   flags included (layer "session flags", file `/<session-flags>/config.toml`), and runs a
//!   non-managed hook only when `hooks.state."<file>:permission_request:<group>:<handler>"`
//!   in a user or session-flags layer holds its `trusted_hash` ([`hook_trust`]). A gated
//!   launch passes both with one `-c hooks={…}`, so nothing is written to the user's config
//!   and no review dialog appears.
//! - Its stdin: `{"session_id","turn_id","transcript_path","cwd","hook_event_name":
//!   "PermissionRequest","model","permission_mode","tool_name":"Bash"|"NetworkAccess",
//!   "tool_input":{"command","description"?}}`.
//! - Its stdout: `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":
//!   {"behavior":"allow"|"deny","message"?}}}`; the deny message reaches the model as the
//!   tool's failure (`Rejected("<message>")`). While the hook runs, Codex shows `Running
//!   hook` above its composer (still busy, `esc to interrupt`); its own approval dialog
//!   appears only when no hook decides.
//!
//! [`hook_trust`]: crate::memory::hook_trust

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use toml_edit::{Array, InlineTable};

use super::permission_hook::{hook_command, hook_timeout_secs};
use crate::memory::hook_trust;

/// The file Codex 0.171.0 names the `-c` layer by in hook keys.
pub const SESSION_FLAGS_FILE: &str = "/<session-flags>/config.toml";

/// iapeer's own MCP server's tools are approved without a prompt: a gated peer still talks
/// to its peers (as [`super::claude_gate::OWN_TOOL`] is allowed on Claude Code). Codex
/// 0.171.0 does not prompt for `send_to_peer` without it either (seen in
/// `tests/approvals.rs`); it keeps a future prompt from holding a peer's messages.
pub const OWN_TOOLS_APPROVED: &str = "mcp_servers.iapeer.default_tools_approval_mode=\"approve\"";

/// The flags a gated launch uses instead of `--dangerously-bypass-approvals-and-sandbox`:
/// `-a on-request -s read-only`, iapeer's own tools approved ([`OWN_TOOLS_APPROVED`]),
/// `--enable hooks` (a stable feature, on by default, which a user's config may turn off),
/// and `-c hooks={…}` holding a `PermissionRequest` hook that runs `<exe> approval-request`
/// for every tool (timeout: `timeout` + 30 s, in whole seconds, [`hook_timeout_secs`]) and its
/// trust.
pub fn launch_args(exe: &Path, timeout: Duration) -> Vec<OsString> {
    let command = hook_command(exe);
    let secs = hook_timeout_secs(timeout);
    vec![
        "-a".into(),
        "on-request".into(),
        "-s".into(),
        "read-only".into(),
        "-c".into(),
        OWN_TOOLS_APPROVED.into(),
        "--enable".into(),
        "hooks".into(),
        "-c".into(),
        hooks_override(&command, secs).into(),
    ]
}

/// `hooks={PermissionRequest=[{hooks=[{type="command",command=…,timeout=…}]}],state={…}}`:
/// one `-c` value (TOML) with the hook and the trust Codex needs to run it.
pub fn hooks_override(command: &str, timeout_secs: u64) -> String {
    let as_json = json!({"hooks": {"PermissionRequest": [{"hooks": [{
        "type": "command",
        "command": command,
        "timeout": timeout_secs,
    }]}]}});
    // The key and hash Codex computes for this handler (the same rule as a hooks.json's).
    let trust = hook_trust::hooks_in(SESSION_FLAGS_FILE, &as_json.to_string())
        .ok()
        .and_then(|h| h.into_iter().next())
        .expect("one command hook");

    let mut handler = InlineTable::new();
    handler.insert("type", "command".into());
    handler.insert("command", command.into());
    handler.insert("timeout", (timeout_secs as i64).into());
    let mut handlers = Array::new();
    handlers.push(handler);
    let mut group = InlineTable::new();
    group.insert("hooks", handlers.into());
    let mut groups = Array::new();
    groups.push(group);
    let mut entry = InlineTable::new();
    entry.insert("trusted_hash", trust.hash.as_str().into());
    let mut state = InlineTable::new();
    state.insert(&trust.key, entry.into());
    let mut hooks = InlineTable::new();
    hooks.insert("PermissionRequest", groups.into());
    hooks.insert("state", state.into());
    hooks.fmt();
    format!("hooks={hooks}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_args_ask_on_request_in_a_read_only_sandbox_with_a_trusted_hook() {
        let args = launch_args(Path::new("/opt/i p/iapeer"), Duration::from_millis(300_000));
        assert_eq!(
            &args[..9],
            &[
                "-a",
                "on-request",
                "-s",
                "read-only",
                "-c",
                OWN_TOOLS_APPROVED,
                "--enable",
                "hooks",
                "-c"
            ]
        );
        let value = args[9].to_str().unwrap();
        let toml: toml_edit::DocumentMut = value.parse().unwrap();
        let hooks = &toml["hooks"];
        let handler = &hooks["PermissionRequest"][0]["hooks"][0];
        assert_eq!(handler["type"].as_str(), Some("command"));
        assert_eq!(
            handler["command"].as_str(),
            Some("'/opt/i p/iapeer' approval-request")
        );
        assert_eq!(handler["timeout"].as_integer(), Some(330));
        let key = "/<session-flags>/config.toml:permission_request:0:0";
        let hash = hooks["state"][key]["trusted_hash"].as_str().unwrap();
        assert!(hash.starts_with("sha256:") && hash.len() == 71, "{hash}");
        assert!(!args
            .iter()
            .any(|a| a.to_string_lossy().contains("dangerously")));
    }

    #[test]
    fn the_trust_hash_follows_the_command() {
        let a = hooks_override("a approval-request", 60);
        let b = hooks_override("b approval-request", 60);
        let hash = |v: &str| {
            let d: toml_edit::DocumentMut = v.parse().unwrap();
            d["hooks"]["state"]["/<session-flags>/config.toml:permission_request:0:0"]
                ["trusted_hash"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_ne!(hash(&a), hash(&b));
    }
}

//! The original TypeScript iapeer's approval hook in a peer's folder, taken out (issue 30
//! item 7). For a gated peer the original wrote a hook group running `<its bin>
//! approval-hook` into the project's own hook files (its `src/approval/install.ts`):
//! `<cwd>/.claude/settings.json` `hooks.PermissionRequest` (earlier `PreToolUse`) and
//! `<cwd>/.codex/hooks.json` `hooks.PreToolUse`, each `{…, "hooks":[{"type":"command",
//! "command":"<bin> approval-hook","timeout":900}]}`. iapeer has no such verb (it exits 2,
//! which both runtimes read as a deny, so every tool call of the peer was refused), and it
//! gives a gated session its own hook at launch ([`super::claude_gate`],
//! [`super::codex_gate`]): a second one in the project would ask the human twice. So the
//! original's groups are removed (the rest of each file kept; a `hooks.json` left empty is
//! deleted, as the original does when it turns gating off) at each wake and by `verify
//! --fix`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::SetupError;
use crate::fsutil::{write_json_atomic, MODE_SHARED};

/// The hook events the original registered its group under.
const EVENTS: [&str; 2] = ["PermissionRequest", "PreToolUse"];

/// The verb the original's hook command runs (how the original itself recognises its group).
const ORIGINAL_VERB: &str = "approval-hook";

/// True when `group` (one entry of a hook event's list) runs the original's hook.
fn is_original_group(group: &Value) -> bool {
    group["hooks"].as_array().is_some_and(|hooks| {
        hooks.iter().any(|h| {
            h["command"]
                .as_str()
                .is_some_and(|c| c.split_whitespace().any(|w| w == ORIGINAL_VERB))
        })
    })
}

/// Remove the original's groups from `doc` (a hook file's JSON), dropping an event list and
/// a `hooks` object they leave empty. Returns whether anything was removed (pure).
pub fn strip(doc: &mut Value) -> bool {
    let Some(hooks) = doc.get_mut("hooks").and_then(Value::as_object_mut) else {
        return false;
    };
    let mut removed = false;
    for event in EVENTS {
        let Some(list) = hooks.get_mut(event).and_then(Value::as_array_mut) else {
            continue;
        };
        let before = list.len();
        list.retain(|g| !is_original_group(g));
        if list.len() != before {
            removed = true;
            if list.is_empty() {
                hooks.remove(event);
            }
        }
    }
    if removed && hooks.is_empty() {
        if let Some(obj) = doc.as_object_mut() {
            obj.remove("hooks");
        }
    }
    removed
}

/// Take the original's approval hook out of `cwd`'s `.claude/settings.json` and
/// `.codex/hooks.json`. A file that is missing, not JSON, or has no such hook is left as it
/// is. Returns the files changed.
///
/// Errors: [`SetupError::Io`], a file that could not be read or written (it names the file).
pub fn remove(cwd: &Path) -> Result<Vec<PathBuf>, SetupError> {
    let mut changed = Vec::new();
    for (file, drop_if_empty) in [
        (cwd.join(".claude").join("settings.json"), false),
        (cwd.join(".codex").join("hooks.json"), true),
    ] {
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(SetupError::io("read", &file)(e)),
        };
        let Ok(mut doc) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        if !strip(&mut doc) {
            continue;
        }
        let empty = doc.as_object().is_some_and(|o| o.is_empty());
        if drop_if_empty && empty {
            std::fs::remove_file(&file).map_err(SetupError::io("remove", &file))?;
        } else {
            write_json_atomic(&file, &doc, MODE_SHARED).map_err(SetupError::io("write", &file))?;
        }
        changed.push(file);
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The group as the original's `install.ts` writes it for Claude Code and for Codex.
    fn original(bin: &str) -> Value {
        json!({"hooks": [{"type": "command", "command": format!("{bin} approval-hook"), "timeout": 900}]})
    }

    #[test]
    fn only_the_originals_groups_go_and_empty_lists_with_them() {
        let own = json!({"matcher": "Read", "hooks": [{"type": "command", "command": "audit.sh"}]});
        let mut doc = json!({
            "hooks": {
                "PermissionRequest": [original("/Users/a/.local/bin/iapeer")],
                "PreToolUse": [own.clone(), original("iapeer")],
            },
            "permissions": {"allow": ["mcp__iapeer__send_to_peer"]},
        });
        assert!(strip(&mut doc));
        assert_eq!(
            doc,
            json!({"hooks": {"PreToolUse": [own]}, "permissions": {"allow": ["mcp__iapeer__send_to_peer"]}})
        );
        assert!(!strip(&mut doc), "nothing left to remove");
        // iapeer's own hook verb is not the original's.
        let mut ours = json!({"hooks": {"PermissionRequest": [{"hooks": [{"type": "command", "command": "'/x/iapeer' approval-request"}]}]}});
        assert!(!strip(&mut ours));
        let mut only = json!({"hooks": {"PreToolUse": [original("iapeer")]}});
        assert!(strip(&mut only));
        assert_eq!(only, json!({}));
    }

    #[test]
    fn a_codex_hooks_file_left_empty_is_deleted_and_settings_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        std::fs::create_dir_all(cwd.join(".claude")).unwrap();
        std::fs::create_dir_all(cwd.join(".codex")).unwrap();
        let settings = cwd.join(".claude/settings.json");
        std::fs::write(
            &settings,
            json!({"hooks": {"PermissionRequest": [original("iapeer")]}, "model": "opus"})
                .to_string(),
        )
        .unwrap();
        let hooks = cwd.join(".codex/hooks.json");
        std::fs::write(
            &hooks,
            json!({"hooks": {"PreToolUse": [original("iapeer")]}}).to_string(),
        )
        .unwrap();
        assert_eq!(remove(cwd).unwrap(), vec![settings.clone(), hooks.clone()]);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
        assert_eq!(v, json!({"model": "opus"}));
        assert!(!hooks.exists());
        assert!(remove(cwd).unwrap().is_empty());
        std::fs::write(&settings, "not json").unwrap();
        assert!(remove(cwd).unwrap().is_empty());
    }
}

//! Peer setup for the `claude` runtime (spec 02 §4 "Agent-side MCP configuration"): the
//! project `.mcp.json` entry for iapeer and the Claude setting that loads it without asking.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::SetupError;
use crate::fsutil::{write_json_atomic, MODE_SHARED};

/// The `mcpServers.iapeer` entry. The URL expands `IAPEER_PORT` (the daemon exports the real
/// port to every session); the identity header falls back to this peer's claude identity.
/// With `bearer` (the daemon requires `IAPEER_BEARER_TOKEN`), `Authorization` carries the
/// bearer and the session token travels in `X-IAPeer-Token`. `timeout` is the tool-call
/// timeout ([`super::mcp_tool_timeout`]).
pub fn server_entry(personality: &str, bearer: bool, timeout: std::time::Duration) -> Value {
    let mut headers = Map::new();
    headers.insert(
        "X-IAPeer-Identity".into(),
        json!(format!("${{PEER_IDENTITY:-claude-{personality}}}")),
    );
    if bearer {
        headers.insert(
            "Authorization".into(),
            json!("Bearer ${IAPEER_BEARER_TOKEN}"),
        );
        headers.insert("X-IAPeer-Token".into(), json!("${IAPEER_TOKEN}"));
    } else {
        headers.insert("Authorization".into(), json!("Bearer ${IAPEER_TOKEN}"));
    }
    json!({
        "type": "http",
        "url": "http://127.0.0.1:${IAPEER_PORT:-8765}/mcp",
        "headers": headers,
        "timeout": super::timeout_ms(timeout),
    })
}

/// Read a JSON object file. A missing file is an empty object; a file that is not a JSON
/// object is moved to `<name>.corrupt.bak` first (so nothing the user wrote is lost) and
/// treated as empty.
fn read_object_or_backup(path: &Path) -> Result<Map<String, Value>, SetupError> {
    match super::read_json_object(path)? {
        None => Ok(Map::new()),
        Some(Ok(m)) => Ok(m),
        Some(Err(_)) => {
            let mut bak = path.as_os_str().to_owned();
            bak.push(".corrupt.bak");
            let bak = PathBuf::from(bak);
            std::fs::rename(path, &bak).map_err(SetupError::io("back up", path))?;
            log::warn!(
                "{} was not a JSON object; moved to {}",
                path.display(),
                bak.display()
            );
            Ok(Map::new())
        }
    }
}

/// Merge the iapeer server into `<cwd>/.mcp.json` (other servers kept; mode 0644) and list it
/// in `enabledMcpjsonServers` of `<cwd>/.claude/settings.local.json` (other keys kept).
/// Idempotent.
///
/// Errors: a file that cannot be read or written (text names the file).
pub fn setup(cwd: &Path, personality: &str, bearer: bool) -> Result<(), SetupError> {
    let mcp_path = cwd.join(".mcp.json");
    let mut mcp = read_object_or_backup(&mcp_path)?;
    let servers = mcp.entry("mcpServers").or_insert_with(|| json!({}));
    if !servers.is_object() {
        *servers = json!({});
    }
    // The daemon's own send deadline is not known here: its refresh at each launch raises it.
    servers["iapeer"] = server_entry(personality, bearer, super::MCP_TOOL_TIMEOUT);
    write_json_atomic(&mcp_path, &Value::Object(mcp), MODE_SHARED)
        .map_err(SetupError::io("write", &mcp_path))?;
    enable_in_settings(cwd)
}

/// List `iapeer` in `enabledMcpjsonServers` of `<cwd>/.claude/settings.local.json` (other
/// keys kept), so Claude Code loads the project server without asking.
///
/// Errors: the file cannot be read or written (text names it).
fn enable_in_settings(cwd: &Path) -> Result<(), SetupError> {
    let settings_path = cwd.join(".claude").join("settings.local.json");
    let mut settings = read_object_or_backup(&settings_path)?;
    let enabled = settings
        .entry("enabledMcpjsonServers")
        .or_insert_with(|| json!([]));
    if !enabled.is_array() {
        *enabled = json!([]);
    }
    if let Some(list) = enabled.as_array_mut() {
        if !list.iter().any(|v| v == "iapeer") {
            list.push(json!("iapeer"));
        }
    }
    write_json_atomic(&settings_path, &Value::Object(settings), MODE_SHARED)
        .map_err(SetupError::io("write", &settings_path))
}

/// The `iapeer` entry brought to the current form (spec 08 §2–§5 migration, issue 11 item 1):
/// `current`'s keys win but `timeout`, which stays the user's when it is longer than
/// `current`'s ([`super::tool_timeout_ms_at_least`]); every other key of `existing` is kept, and
/// so are the user's own headers, except the session-token headers iapeer owns
/// (`Authorization`, `X-IAPeer-Token`), which follow `current`. A non-object `existing`
/// gives `current`.
pub fn upgraded_entry(existing: &Value, current: &Value) -> Value {
    let (Some(old), Some(new)) = (existing.as_object(), current.as_object()) else {
        return current.clone();
    };
    let mut out = old.clone();
    for (k, v) in new {
        if k == "headers" {
            let mut headers = old
                .get("headers")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            headers.retain(|name, _| {
                !name.eq_ignore_ascii_case("authorization")
                    && !name.eq_ignore_ascii_case("x-iapeer-token")
                    && !name.eq_ignore_ascii_case("x-iapeer-identity")
            });
            if let Some(h) = v.as_object() {
                headers.extend(h.clone());
            }
            out.insert(k.clone(), Value::Object(headers));
        } else if k == "timeout" {
            out.insert(
                k.clone(),
                super::tool_timeout_ms_at_least(
                    old.get("timeout"),
                    v.as_u64()
                        .unwrap_or(super::timeout_ms(super::MCP_TOOL_TIMEOUT)),
                ),
            );
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// Bring a peer's existing `iapeer` entry in `<cwd>/.mcp.json` to the current form (the
/// daemon does this at every wake, so a `.mcp.json` written by the original tool, which
/// sends only the identity header, gets the session token). Other servers and keys are kept;
/// the file is written only when it changes, and `enabledMcpjsonServers` is made to list
/// `iapeer`; its `timeout` becomes at least `tool_timeout`. A folder without an `iapeer`
/// entry is left alone (the user removed it). Returns whether anything was written.
///
/// Errors: a file that cannot be read or written (text names the file).
pub fn refresh(
    cwd: &Path,
    personality: &str,
    bearer: bool,
    tool_timeout: std::time::Duration,
) -> Result<bool, SetupError> {
    let mcp_path = cwd.join(".mcp.json");
    let text = match std::fs::read_to_string(&mcp_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(SetupError::io("read", &mcp_path)(e)),
    };
    let Ok(Value::Object(mut mcp)) = serde_json::from_str::<Value>(&text) else {
        return Ok(false);
    };
    let Some(existing) = mcp.get("mcpServers").and_then(|s| s.get("iapeer")).cloned() else {
        return Ok(false);
    };
    let entry = upgraded_entry(&existing, &server_entry(personality, bearer, tool_timeout));
    let mut changed = false;
    if entry != existing {
        mcp["mcpServers"]["iapeer"] = entry;
        write_json_atomic(&mcp_path, &Value::Object(mcp), MODE_SHARED)
            .map_err(SetupError::io("write", &mcp_path))?;
        changed = true;
    }
    let settings_path = cwd.join(".claude").join("settings.local.json");
    let listed = std::fs::read_to_string(&settings_path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("enabledMcpjsonServers").cloned())
        .and_then(|v| v.as_array().cloned())
        .is_some_and(|l| l.iter().any(|v| v == "iapeer"));
    if !listed {
        enable_in_settings(cwd)?;
        changed = true;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::MCP_TOOL_TIMEOUT;

    /// The JSON file `name` in `dir`, parsed.
    fn json_in(dir: &Path, name: &str) -> Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
    }

    /// The iapeer entry of `dir/.mcp.json` is in bearer mode: the bearer token in
    /// `Authorization`, the host token in its own header.
    fn assert_bearer_headers(dir: &Path) {
        let v = json_in(dir, ".mcp.json");
        let h = &v["mcpServers"]["iapeer"]["headers"];
        assert_eq!(h["Authorization"], "Bearer ${IAPEER_BEARER_TOKEN}");
        assert_eq!(h["X-IAPeer-Token"], "${IAPEER_TOKEN}");
    }

    #[test]
    fn merges_keeps_other_servers_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".mcp.json"),
            r#"{"mcpServers":{"other":{"command":"x"}},"extra":1}"#,
        )
        .unwrap();
        setup(dir.path(), "bob", false).unwrap();
        setup(dir.path(), "bob", false).unwrap();
        let v = json_in(dir.path(), ".mcp.json");
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        assert_eq!(v["extra"], 1);
        let e = &v["mcpServers"]["iapeer"];
        assert_eq!(
            e["headers"]["X-IAPeer-Identity"],
            "${PEER_IDENTITY:-claude-bob}"
        );
        assert_eq!(e["headers"]["Authorization"], "Bearer ${IAPEER_TOKEN}");
        assert_eq!(e["url"], "http://127.0.0.1:${IAPEER_PORT:-8765}/mcp");
        let s = json_in(dir.path(), ".claude/settings.local.json");
        assert_eq!(s["enabledMcpjsonServers"], json!(["iapeer"]));
        let mode = crate::testkit::mode_of(dir.path().join(".mcp.json"));
        assert_eq!(mode, 0o644);
    }

    #[test]
    fn a_corrupt_file_is_backed_up_not_lost() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".mcp.json"), "{not json").unwrap();
        setup(dir.path(), "bob", true).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".mcp.json.corrupt.bak")).unwrap(),
            "{not json"
        );
        assert_bearer_headers(dir.path());
    }

    #[test]
    fn an_entry_of_the_original_tool_is_upgraded_keeping_the_users_keys() {
        let dir = tempfile::tempdir().unwrap();
        // As the original tool writes it: only the identity header, a literal URL.
        let original = json!({"mcpServers": {
            "iapeer": {"type": "http", "url": "http://127.0.0.1:8765/mcp", "timeout": 9,
                       "headers": {"X-IAPeer-Identity": "${PEER_IDENTITY:-claude-bob}", "X-Mine": "1"}},
            "other": {"command": "x"}}});
        std::fs::write(dir.path().join(".mcp.json"), original.to_string()).unwrap();
        assert!(refresh(dir.path(), "bob", false, MCP_TOOL_TIMEOUT).unwrap());
        let v = json_in(dir.path(), ".mcp.json");
        let e = &v["mcpServers"]["iapeer"];
        assert_eq!(e["headers"]["Authorization"], "Bearer ${IAPEER_TOKEN}");
        assert_eq!(e["headers"]["X-Mine"], "1");
        // A user's timeout under the longest a send is held is raised to it (issue 27).
        assert_eq!(e["timeout"], 330_000);
        assert_eq!(e["url"], "http://127.0.0.1:${IAPEER_PORT:-8765}/mcp");
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        // Current now: nothing more to do, nothing written.
        assert!(!refresh(dir.path(), "bob", false, MCP_TOOL_TIMEOUT).unwrap());
        // A longer one of the user's is kept.
        let mut longer = json_in(dir.path(), ".mcp.json");
        longer["mcpServers"]["iapeer"]["timeout"] = json!(900_000);
        std::fs::write(dir.path().join(".mcp.json"), longer.to_string()).unwrap();
        assert!(!refresh(dir.path(), "bob", false, MCP_TOOL_TIMEOUT).unwrap());
        assert_eq!(
            json_in(dir.path(), ".mcp.json")["mcpServers"]["iapeer"]["timeout"],
            900_000
        );
        // Bearer mode moves the token to its own header.
        assert!(refresh(dir.path(), "bob", true, MCP_TOOL_TIMEOUT).unwrap());
        assert_bearer_headers(dir.path());
    }

    /// Issue 27: a daemon whose send deadline is longer than the default (here 20 min) raises
    /// the entry a peer's birth wrote to its own send deadline plus the margin, at launch;
    /// a user's still longer one stays.
    #[test]
    fn the_daemon_s_longer_send_deadline_raises_the_timeout_at_launch() {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path(), "bob", false).unwrap();
        let timeout =
            |dir: &Path| json_in(dir, ".mcp.json")["mcpServers"]["iapeer"]["timeout"].clone();
        assert_eq!(timeout(dir.path()), 330_000, "a birth writes the least");
        let daemon = crate::runtime::mcp_tool_timeout(std::time::Duration::from_secs(1200));
        assert!(refresh(dir.path(), "bob", false, daemon).unwrap());
        assert_eq!(timeout(dir.path()), 1_230_000);
        assert!(!refresh(dir.path(), "bob", false, daemon).unwrap());
        // Back to the default: the longer one written stays (a longer wait does no harm).
        assert!(!refresh(dir.path(), "bob", false, MCP_TOOL_TIMEOUT).unwrap());
        assert_eq!(timeout(dir.path()), 1_230_000);
    }

    #[test]
    fn a_folder_without_the_entry_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!refresh(dir.path(), "bob", false, MCP_TOOL_TIMEOUT).unwrap());
        assert!(!dir.path().join(".mcp.json").exists());
        std::fs::write(dir.path().join(".mcp.json"), r#"{"mcpServers":{}}"#).unwrap();
        assert!(!refresh(dir.path(), "bob", false, MCP_TOOL_TIMEOUT).unwrap());
        assert!(!dir.path().join(".claude").exists());
    }
}

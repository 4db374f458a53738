//! Peer setup for the `claude` runtime (spec 02 §4 "Agent-side MCP configuration"): the
//! project `.mcp.json` entry for iapeer and the Claude setting that loads it without asking.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::fsutil::{write_json_atomic, MODE_SHARED};

/// The `mcpServers.iapeer` entry. The URL expands `IAPEER_PORT` (the daemon exports the real
/// port to every session); the identity header falls back to this peer's claude identity.
/// With `bearer` (the daemon requires `IAPEER_BEARER_TOKEN`), `Authorization` carries the
/// bearer and the session token travels in `X-IAPeer-Token`.
pub fn server_entry(personality: &str, bearer: bool) -> Value {
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
    })
}

/// Read a JSON object file. A missing file is an empty object; a file that is not a JSON
/// object is moved to `<name>.corrupt.bak` first (so nothing the user wrote is lost) and
/// treated as empty.
fn read_object_or_backup(path: &Path) -> Result<Map<String, Value>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        _ => {
            let mut bak = path.as_os_str().to_owned();
            bak.push(".corrupt.bak");
            let bak = PathBuf::from(bak);
            std::fs::rename(path, &bak)
                .map_err(|e| format!("cannot back up {}: {e}", path.display()))?;
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
pub fn setup(cwd: &Path, personality: &str, bearer: bool) -> Result<(), String> {
    let mcp_path = cwd.join(".mcp.json");
    let mut mcp = read_object_or_backup(&mcp_path)?;
    let servers = mcp.entry("mcpServers").or_insert_with(|| json!({}));
    if !servers.is_object() {
        *servers = json!({});
    }
    servers["iapeer"] = server_entry(personality, bearer);
    write_json_atomic(&mcp_path, &Value::Object(mcp), MODE_SHARED)
        .map_err(|e| format!("cannot write {}: {e}", mcp_path.display()))?;

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
        .map_err(|e| format!("cannot write {}: {e}", settings_path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(".mcp.json")).unwrap())
                .unwrap();
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        assert_eq!(v["extra"], 1);
        assert_eq!(
            v["mcpServers"]["iapeer"]["headers"]["X-IAPeer-Identity"],
            "${PEER_IDENTITY:-claude-bob}"
        );
        assert_eq!(
            v["mcpServers"]["iapeer"]["headers"]["Authorization"],
            "Bearer ${IAPEER_TOKEN}"
        );
        assert_eq!(
            v["mcpServers"]["iapeer"]["url"],
            "http://127.0.0.1:${IAPEER_PORT:-8765}/mcp"
        );
        let s: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(".claude/settings.local.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(s["enabledMcpjsonServers"], json!(["iapeer"]));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(".mcp.json"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
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
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(".mcp.json")).unwrap())
                .unwrap();
        assert_eq!(
            v["mcpServers"]["iapeer"]["headers"]["Authorization"],
            "Bearer ${IAPEER_BEARER_TOKEN}"
        );
        assert_eq!(
            v["mcpServers"]["iapeer"]["headers"]["X-IAPeer-Token"],
            "${IAPEER_TOKEN}"
        );
    }
}

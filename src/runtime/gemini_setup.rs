//! Peer setup for the `gemini` runtime (issue 27 item 2): the `mcpServers.iapeer` entry of the
//! user's Gemini CLI settings, `~/.gemini/settings.json`, merged in with `serde_json` (the
//! user's other settings kept) and written atomically; a file that is not a JSON object is left
//! alone with an error.
//!
//! Why the user's file and not the project's `.gemini/settings.json`: recorded for 0.61.0
//! (`tests/fixtures/gemini-cli-0.61.0/README.md`), a user-level server is enabled in a folder
//! started with `--skip-trust` (`20-preconfigured-mcp-list`), which is how iapeer starts it;
//! a project file's servers were not recorded working. The URL cannot expand variables, so
//! like the Codex config's it is the running daemon's, refreshed at every wake; the headers
//! expand `${IAPEER_TOKEN}` from the session's environment (recorded: `mcp-requests.jsonl`).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::SetupError;
use crate::fsutil::{write_json_atomic, MODE_SHARED};

/// `~/.gemini` (Gemini CLI's folder under the home it is started with).
pub fn gemini_dir() -> Option<PathBuf> {
    Some(crate::paths::home_dir()?.join(".gemini"))
}

/// `~/.gemini/settings.json`.
pub fn settings_path() -> Option<PathBuf> {
    Some(gemini_dir()?.join("settings.json"))
}

/// The `mcpServers.iapeer` entry for the MCP endpoint `url`: the session token as a bearer
/// (expanded by Gemini CLI from `IAPEER_TOKEN`), the peer's identity, and `trust: true` so
/// that a call of `send_to_peer` asks no confirmation (recorded: `13-tool-confirmation` vs
/// `16-resumed-trusted-call`).
pub fn server_entry(url: &str) -> Value {
    json!({
        "httpUrl": url,
        "headers": {
            "Authorization": "Bearer ${IAPEER_TOKEN}",
            "X-IAPeer-Identity": "${PEER_IDENTITY}",
        },
        "trust": true,
    })
}

/// Put iapeer's entry for `url` into `settings` (pure): added when absent; an existing entry
/// gets iapeer's keys (`httpUrl`, the two headers, `trust`) and keeps any other key the user
/// gave it. Returns whether `settings` changed.
pub fn merge_server(settings: &mut Map<String, Value>, url: &str) -> bool {
    let before = settings.clone();
    let servers = settings
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    if !servers.is_object() {
        *servers = Value::Object(Map::new());
    }
    let Value::Object(entry) = server_entry(url) else {
        return false;
    };
    let own = servers
        .as_object_mut()
        .map(|s| s.entry("iapeer").or_insert_with(|| json!({})));
    if let Some(own) = own {
        if !own.is_object() {
            *own = json!({});
        }
        if let Some(own) = own.as_object_mut() {
            for (k, v) in entry {
                match (k.as_str(), own.get_mut(&k)) {
                    ("headers", Some(Value::Object(headers))) => {
                        if let Value::Object(ours) = v {
                            headers.extend(ours);
                        }
                    }
                    _ => {
                        own.insert(k, v);
                    }
                }
            }
        }
    }
    *settings != before
}

/// Read the settings file at `path` as a JSON object; a missing file is an empty one.
///
/// Errors: [`SetupError::Io`]; [`SetupError::NotJson`] for a file that is not a JSON object
/// (left as it is).
fn read_settings(path: &Path) -> Result<Map<String, Value>, SetupError> {
    match super::read_json_object(path)? {
        None => Ok(Map::new()),
        Some(Ok(m)) => Ok(m),
        Some(Err(why)) => Err(SetupError::NotJson {
            path: path.to_path_buf(),
            why,
        }),
    }
}

/// [`merge_server`] on the settings file at `path`, written atomically when it changed;
/// whether it changed.
///
/// Errors: as [`read_settings`]; the write's [`SetupError::Io`].
pub fn refresh_at(path: &Path, url: &str) -> Result<bool, SetupError> {
    let mut settings = read_settings(path)?;
    if !merge_server(&mut settings, url) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(SetupError::io("create", dir))?;
    }
    write_json_atomic(path, &Value::Object(settings), MODE_SHARED)
        .map_err(SetupError::io("write", path))?;
    Ok(true)
}

/// What a gemini peer's birth writes: iapeer's entry in the user's settings.
///
/// Errors: [`SetupError::FixAndRetry`] around [`refresh_at`]'s.
pub fn setup(mcp_url: &str) -> Result<(), SetupError> {
    refresh(mcp_url)
        .map(|_| ())
        .map_err(|e| SetupError::FixAndRetry(Box::new(e)))
}

/// What the daemon does at every wake of a gemini peer: the entry brought to the running
/// daemon's URL. Returns whether the file changed.
///
/// Errors: [`SetupError::NoGeminiHome`] without `HOME`; as [`refresh_at`].
pub fn refresh(mcp_url: &str) -> Result<bool, SetupError> {
    let path = settings_path().ok_or(SetupError::NoGeminiHome)?;
    refresh_at(&path, mcp_url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_merged_into_the_user_s_settings_and_theirs_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".gemini/settings.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},
               "mcpServers":{"other":{"command":"x"},
                             "iapeer":{"timeout":5000,"httpUrl":"http://old/mcp",
                                       "headers":{"X-Mine":"1"}}}}"#,
        )
        .unwrap();
        assert!(refresh_at(&path, "http://127.0.0.1:9/mcp").unwrap());
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["security"]["auth"]["selectedType"], "gemini-api-key");
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        let own = &v["mcpServers"]["iapeer"];
        assert_eq!(own["httpUrl"], "http://127.0.0.1:9/mcp");
        assert_eq!(own["timeout"], 5000);
        assert_eq!(own["trust"], true);
        assert_eq!(own["headers"]["X-Mine"], "1");
        assert_eq!(own["headers"]["Authorization"], "Bearer ${IAPEER_TOKEN}");
        // Idempotent: nothing to write the second time.
        assert!(!refresh_at(&path, "http://127.0.0.1:9/mcp").unwrap());
        // A new file is made.
        let fresh = dir.path().join("new/.gemini/settings.json");
        assert!(refresh_at(&fresh, "http://127.0.0.1:9/mcp").unwrap());
        assert!(fresh.is_file());
    }

    #[test]
    fn a_settings_file_that_is_not_json_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let text = "{ // a comment\n \"theme\": \"x\" }";
        std::fs::write(&path, text).unwrap();
        let err = refresh_at(&path, "http://127.0.0.1:9/mcp").unwrap_err();
        assert!(err.to_string().contains("settings.json"), "{err}");
        assert!(err.to_string().contains("left it alone"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
}

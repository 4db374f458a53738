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

/// `~/.gemini` (Gemini CLI's folder under the home it is started with, its row's
/// [`home_folder`](crate::runtime_table::RuntimeInfo::home_folder)).
pub fn gemini_dir() -> Option<PathBuf> {
    Some(crate::paths::home_dir()?.join(crate::runtime_table::GEMINI.home_folder?))
}

/// `~/.gemini/settings.json`.
pub fn settings_path() -> Option<PathBuf> {
    Some(gemini_dir()?.join("settings.json"))
}

/// The `mcpServers.iapeer` entry for the MCP endpoint `url`: the session token as a bearer
/// (expanded by Gemini CLI from `IAPEER_TOKEN`), the peer's identity, and `trust: true` so
/// that a call of `send_to_peer` asks no confirmation (recorded: `13-tool-confirmation` vs
/// `16-resumed-trusted-call`). With `bearer` (the daemon requires `IAPEER_BEARER_TOKEN`, a
/// host-wide mode like this file), `Authorization` carries that bearer and the session token
/// travels in `X-IAPeer-Token` (spec 02 §4).
pub fn server_entry(url: &str, bearer: bool, timeout: std::time::Duration) -> Value {
    let mut headers = Map::new();
    if bearer {
        headers.insert(
            "Authorization".into(),
            json!("Bearer ${IAPEER_BEARER_TOKEN}"),
        );
        headers.insert(TOKEN_HEADER.into(), json!("${IAPEER_TOKEN}"));
    } else {
        headers.insert("Authorization".into(), json!("Bearer ${IAPEER_TOKEN}"));
    }
    headers.insert("X-IAPeer-Identity".into(), json!("${PEER_IDENTITY}"));
    json!({
        "httpUrl": url,
        "headers": headers,
        "trust": true,
        "timeout": super::timeout_ms(timeout),
    })
}

/// The header that carries the session token in bearer mode.
const TOKEN_HEADER: &str = "X-IAPeer-Token";

/// Put iapeer's entry for `url` (in `bearer` mode or not, [`server_entry`]) into `settings`
/// (pure): added when absent; an existing entry gets iapeer's keys (`httpUrl`, its headers,
/// `trust`, a `timeout` of at least `timeout`, [`super::mcp_tool_timeout`]) and keeps any other key
/// the user gave it; out of bearer mode a left-over
/// `X-IAPeer-Token` header goes. Returns whether `settings` changed.
pub fn merge_server(
    settings: &mut Map<String, Value>,
    url: &str,
    bearer: bool,
    timeout: std::time::Duration,
) -> bool {
    let before = settings.clone();
    let servers = settings
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    if !servers.is_object() {
        *servers = Value::Object(Map::new());
    }
    let Value::Object(entry) = server_entry(url, bearer, timeout) else {
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
                            if !bearer {
                                headers.remove(TOKEN_HEADER);
                            }
                            headers.extend(ours);
                        }
                    }
                    ("timeout", existing) => {
                        let ms = super::tool_timeout_ms_at_least(
                            existing.as_deref(),
                            super::timeout_ms(timeout),
                        );
                        own.insert(k, ms);
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
pub fn refresh_at(
    path: &Path,
    url: &str,
    bearer: bool,
    timeout: std::time::Duration,
) -> Result<bool, SetupError> {
    let mut settings = read_settings(path)?;
    if !merge_server(&mut settings, url, bearer, timeout) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(SetupError::io("create", dir))?;
    }
    write_json_atomic(path, &Value::Object(settings), MODE_SHARED)
        .map_err(SetupError::io("write", path))?;
    Ok(true)
}

/// What a gemini peer's birth writes: iapeer's entry in the user's settings (`bearer`: the
/// daemon's mode, as [`server_entry`]), with the least tool-call timeout
/// ([`super::MCP_TOOL_TIMEOUT`]: the daemon's own send deadline is not known here; its
/// [`refresh`] at each wake raises it).
///
/// Errors: [`SetupError::FixAndRetry`] around [`refresh_at`]'s.
pub fn setup(mcp_url: &str, bearer: bool) -> Result<(), SetupError> {
    refresh(mcp_url, bearer, super::MCP_TOOL_TIMEOUT)
        .map(|_| ())
        .map_err(|e| SetupError::FixAndRetry(Box::new(e)))
}

/// What the daemon does at every wake of a gemini peer: the entry brought to the running
/// daemon's URL and its `bearer` mode (a switch of mode rewrites the headers), its
/// `timeout` at least `tool_timeout` ([`super::mcp_tool_timeout`]). Returns whether the file
/// changed.
///
/// Errors: [`SetupError::NoGeminiHome`] without `HOME`; as [`refresh_at`].
pub fn refresh(
    mcp_url: &str,
    bearer: bool,
    tool_timeout: std::time::Duration,
) -> Result<bool, SetupError> {
    let path = settings_path().ok_or(SetupError::NoGeminiHome)?;
    refresh_at(&path, mcp_url, bearer, tool_timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::MCP_TOOL_TIMEOUT;

    #[test]
    fn the_entry_is_merged_into_the_user_s_settings_and_theirs_are_kept() {
        let (dir, path) = crate::testkit::temp_file(
            ".gemini/settings.json",
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},
               "mcpServers":{"other":{"command":"x"},
                             "iapeer":{"timeout":5000,"httpUrl":"http://old/mcp",
                                       "headers":{"X-Mine":"1"}}}}"#,
        );
        assert!(refresh_at(&path, "http://127.0.0.1:9/mcp", false, MCP_TOOL_TIMEOUT).unwrap());
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["security"]["auth"]["selectedType"], "gemini-api-key");
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        let own = &v["mcpServers"]["iapeer"];
        assert_eq!(own["httpUrl"], "http://127.0.0.1:9/mcp");
        // 5 s would fail a send that wakes its peer: raised to the longest a send is held.
        assert_eq!(own["timeout"], 330_000);
        assert_eq!(own["trust"], true);
        assert_eq!(own["headers"]["X-Mine"], "1");
        assert_eq!(own["headers"]["Authorization"], "Bearer ${IAPEER_TOKEN}");
        // Idempotent: nothing to write the second time.
        assert!(!refresh_at(&path, "http://127.0.0.1:9/mcp", false, MCP_TOOL_TIMEOUT).unwrap());
        // A new file is made.
        let fresh = dir.path().join("new/.gemini/settings.json");
        assert!(refresh_at(&fresh, "http://127.0.0.1:9/mcp", false, MCP_TOOL_TIMEOUT).unwrap());
        assert!(fresh.is_file());
    }

    #[test]
    fn a_settings_file_that_is_not_json_is_left_alone() {
        let text = "{ // a comment\n \"theme\": \"x\" }";
        let (_dir, path) = crate::testkit::temp_file("settings.json", text);
        let err = refresh_at(&path, "http://127.0.0.1:9/mcp", false, MCP_TOOL_TIMEOUT).unwrap_err();
        assert!(err.to_string().contains("settings.json"), "{err}");
        assert!(err.to_string().contains("left it alone"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn the_entry_follows_the_daemon_s_bearer_mode() {
        let plain = server_entry("http://u/mcp", false, MCP_TOOL_TIMEOUT);
        assert_eq!(plain["headers"]["Authorization"], "Bearer ${IAPEER_TOKEN}");
        assert_eq!(plain["headers"].get(TOKEN_HEADER), None);
        let bearer = server_entry("http://u/mcp", true, MCP_TOOL_TIMEOUT);
        assert_eq!(
            bearer["headers"]["Authorization"],
            "Bearer ${IAPEER_BEARER_TOKEN}"
        );
        assert_eq!(bearer["headers"][TOKEN_HEADER], "${IAPEER_TOKEN}");
        for e in [&plain, &bearer] {
            assert_eq!(e["headers"]["X-IAPeer-Identity"], "${PEER_IDENTITY}");
            assert_eq!(e["trust"], true);
        }
    }

    #[test]
    fn a_switch_of_mode_rewrites_the_headers_and_keeps_the_user_s() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".gemini/settings.json");
        let url = "http://127.0.0.1:9/mcp";
        let headers = |path: &Path| -> Value {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            v["mcpServers"]["iapeer"]["headers"].clone()
        };
        assert!(refresh_at(&path, url, false, MCP_TOOL_TIMEOUT).unwrap());
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        v["mcpServers"]["iapeer"]["headers"]["X-Mine"] = json!("1");
        std::fs::write(&path, v.to_string()).unwrap();
        // Plain -> bearer: the bearer replaces the session token, which moves to its header.
        assert!(refresh_at(&path, url, true, MCP_TOOL_TIMEOUT).unwrap());
        let h = headers(&path);
        assert_eq!(h["Authorization"], "Bearer ${IAPEER_BEARER_TOKEN}");
        assert_eq!(h[TOKEN_HEADER], "${IAPEER_TOKEN}");
        assert_eq!(h["X-Mine"], "1");
        assert!(!refresh_at(&path, url, true, MCP_TOOL_TIMEOUT).unwrap());
        // Bearer -> plain: back to the session token as the bearer, its own header gone.
        assert!(refresh_at(&path, url, false, MCP_TOOL_TIMEOUT).unwrap());
        let h = headers(&path);
        assert_eq!(h["Authorization"], "Bearer ${IAPEER_TOKEN}");
        assert_eq!(h.get(TOKEN_HEADER), None);
        assert_eq!(h["X-Mine"], "1");
        assert_eq!(h["X-IAPeer-Identity"], "${PEER_IDENTITY}");
    }
}

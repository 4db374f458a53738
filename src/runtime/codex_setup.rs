//! Peer setup for the `codex` runtime (spec 02 §4, spec 04 §2 "codex"): edits of the host's
//! Codex `config.toml` made with a format-preserving TOML editor (`toml_edit`), so the user's
//! comments, order and values survive; idempotent; never clobbering a file it cannot parse.

use std::path::{Path, PathBuf};

use toml_edit::{value, DocumentMut, Item, Table, TableLike};

use super::SetupError;
use crate::fsutil::{write_atomic, MODE_SHARED};

/// `$CODEX_HOME`, else `~/.codex`.
pub fn codex_home() -> Option<PathBuf> {
    crate::paths::env_or_home_dir("CODEX_HOME", crate::runtime_table::CODEX.home_folder?)
}

/// `<codex home>/config.toml`.
pub fn config_path() -> Option<PathBuf> {
    Some(codex_home()?.join("config.toml"))
}

/// The top-level table `key` of `doc`, made implicit (no header of its own) when absent;
/// `None` when `key` holds something other than a table.
fn implicit_table<'a>(doc: &'a mut DocumentMut, key: &str) -> Option<&'a mut dyn TableLike> {
    doc.entry(key)
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_like_mut()
}

/// Add `[mcp_servers.iapeer]` when absent (an existing block is the user's and is kept):
/// `url`, `default_tools_approval_mode = "approve"`, `bearer_token_env_var = "IAPEER_TOKEN"`,
/// and `[mcp_servers.iapeer.env_http_headers] "X-IAPeer-Identity" = "PEER_IDENTITY"`. With
/// `bearer` (the daemon requires `IAPEER_BEARER_TOKEN`, host-wide like this file; spec 02 §4)
/// the bearer variable is `IAPEER_BEARER_TOKEN` and `"X-IAPeer-Token" = "IAPEER_TOKEN"`
/// carries the session token. Returns whether the document changed.
pub fn ensure_mcp_server(doc: &mut DocumentMut, url: &str, bearer: bool) -> bool {
    let Some(servers) = implicit_table(doc, "mcp_servers") else {
        return false;
    };
    if servers.contains_key("iapeer") {
        return false;
    }
    let mut server = Table::new();
    server["url"] = value(url);
    server["default_tools_approval_mode"] = value("approve");
    server["bearer_token_env_var"] = value(bearer_var(bearer));
    let mut headers = Table::new();
    headers["X-IAPeer-Identity"] = value("PEER_IDENTITY");
    if bearer {
        headers[TOKEN_HEADER] = value(TOKEN_VAR);
    }
    server["env_http_headers"] = Item::Table(headers);
    servers.insert("iapeer", Item::Table(server));
    true
}

/// The `bearer_token_env_var` the original TypeScript iapeer wrote (its daemon took any
/// bearer; the variable held a fixed non-secret stand-in).
const ORIGINAL_BEARER_VAR: &str = "IAPEER_BEARER";

/// The session token's variable, the bearer out of bearer mode.
const TOKEN_VAR: &str = "IAPEER_TOKEN";

/// The daemon's bearer's variable, the bearer in bearer mode.
const DAEMON_BEARER_VAR: &str = "IAPEER_BEARER_TOKEN";

/// The header that carries the session token in bearer mode.
const TOKEN_HEADER: &str = "X-IAPeer-Token";

/// The `bearer_token_env_var` of iapeer's block in `bearer` mode or not.
fn bearer_var(bearer: bool) -> &'static str {
    if bearer {
        DAEMON_BEARER_VAR
    } else {
        TOKEN_VAR
    }
}

/// Bring an existing `[mcp_servers.iapeer]` block to the current form (issue 11 item 1): a
/// block written by the original tool names `bearer_token_env_var = "IAPEER_BEARER"`, which
/// becomes `"IAPEER_TOKEN"` (a variable name the user chose is kept); a missing
/// `X-IAPeer-Identity` in `env_http_headers` is added. A block whose variable is iapeer's
/// follows the `bearer` mode ([`ensure_mcp_server`]): its variable switched, the
/// `X-IAPeer-Token` header added or taken out. Every other key stays. Without the block this
/// is [`ensure_mcp_server`]. Returns whether the document changed.
pub fn upgrade_mcp_server(doc: &mut DocumentMut, url: &str, bearer: bool) -> bool {
    let exists = doc
        .get("mcp_servers")
        .and_then(|s| s.get("iapeer"))
        .is_some();
    if !exists {
        return ensure_mcp_server(doc, url, bearer);
    }
    let Some(server) = doc["mcp_servers"]["iapeer"].as_table_like_mut() else {
        return false;
    };
    let mut changed = false;
    let var = server.get("bearer_token_env_var").and_then(|v| v.as_str());
    let ours = var.is_none_or(|b| [ORIGINAL_BEARER_VAR, TOKEN_VAR, DAEMON_BEARER_VAR].contains(&b));
    if ours && var != Some(bearer_var(bearer)) {
        server.insert("bearer_token_env_var", value(bearer_var(bearer)));
        changed = true;
    }
    if server.get("env_http_headers").is_none() {
        server.insert("env_http_headers", Item::Table(Table::new()));
    }
    if let Some(headers) = server
        .get_mut("env_http_headers")
        .and_then(|h| h.as_table_like_mut())
    {
        if headers.get("X-IAPeer-Identity").is_none() {
            headers.insert("X-IAPeer-Identity", value("PEER_IDENTITY"));
            changed = true;
        }
        let token = headers.get(TOKEN_HEADER).and_then(|v| v.as_str());
        if ours && bearer && token != Some(TOKEN_VAR) {
            headers.insert(TOKEN_HEADER, value(TOKEN_VAR));
            changed = true;
        } else if ours && !bearer && headers.remove(TOKEN_HEADER).is_some() {
            changed = true;
        }
    }
    changed
}

/// The comment after a setting iapeer adds that would otherwise look like the user's
/// (`check_for_update_on_startup = false # <MARK>`): how `uninstall` knows it is iapeer's.
pub const MARK: &str = "added by iapeer; iapeer uninstall removes it";

/// The top-level key that turns off Codex's update check at start.
const UPDATE_CHECK: &str = "check_for_update_on_startup";

/// Set top-level `check_for_update_on_startup = false # <MARK>` unless the key exists with
/// any value.
pub fn ensure_no_update_check(doc: &mut DocumentMut) -> bool {
    if doc.contains_key(UPDATE_CHECK) {
        return false;
    }
    let mut off = toml_edit::Value::from(false);
    off.decor_mut().set_suffix(format!(" # {MARK}"));
    // Top-level keys must come before the first table; toml_edit places new root values there.
    doc[UPDATE_CHECK] = Item::Value(off);
    true
}

/// Whether `[mcp_servers.iapeer]` in `doc` is iapeer's: its `bearer_token_env_var` is
/// `IAPEER_TOKEN` or `IAPEER_BEARER_TOKEN` (this tool's) or `IAPEER_BEARER` (the original's).
fn is_iapeer_server(doc: &DocumentMut) -> bool {
    let var = doc
        .get("mcp_servers")
        .and_then(|s| s.get("iapeer"))
        .and_then(|b| b.get("bearer_token_env_var"))
        .and_then(|v| v.as_str());
    matches!(
        var,
        Some(TOKEN_VAR) | Some(DAEMON_BEARER_VAR) | Some(ORIGINAL_BEARER_VAR)
    )
}

/// Take out what [`setup`] added for every peer (`uninstall`, spec 08 §1; issue 30 item 6),
/// leaving the user's comments and settings as they are: `[mcp_servers.iapeer]` when it is
/// iapeer's ([`is_iapeer_server`]; a block of another kind is the user's), an `mcp_servers`
/// table left empty that iapeer made implicitly, and `check_for_update_on_startup = false`
/// when it carries [`MARK`] or, as builds before the mark wrote it, stands without a comment
/// beside iapeer's block. Folder trust entries stay with the peers (`remove` takes them out).
/// Returns whether the document changed.
pub fn remove_setup(doc: &mut DocumentMut) -> bool {
    let ours = is_iapeer_server(doc);
    let marked = doc
        .get(UPDATE_CHECK)
        .and_then(|i| i.as_value())
        .filter(|v| v.as_bool() == Some(false))
        .map(|v| v.decor().suffix().and_then(|s| s.as_str()).unwrap_or(""))
        .is_some_and(|comment| {
            let comment = comment.trim().trim_start_matches('#').trim();
            comment == MARK || (ours && comment.is_empty())
        });
    if marked {
        remove_root_key(doc, UPDATE_CHECK);
    }
    if ours {
        if let Some(servers) = doc.get_mut("mcp_servers").and_then(|s| s.as_table_mut()) {
            servers.remove("iapeer");
            if servers.is_empty() && servers.is_implicit() {
                doc.remove("mcp_servers");
            }
        }
    }
    marked || ours
}

/// Remove the root key `key`, handing the comment lines above it (the user's, e.g. at the top
/// of the file) to what follows it: the next root key, else the first table.
fn remove_root_key(doc: &mut DocumentMut, key: &str) {
    let prefix = doc
        .as_table()
        .key(key)
        .and_then(|k| k.leaf_decor().prefix())
        .and_then(|p| p.as_str())
        .unwrap_or("")
        .to_string();
    let names: Vec<String> = doc.iter().map(|(k, _)| k.to_string()).collect();
    doc.remove(key);
    if prefix.trim().is_empty() {
        return;
    }
    let next_value = names
        .iter()
        .skip_while(|k| *k != key)
        .skip(1)
        .find(|k| doc.get(k).is_some_and(|i| i.is_value()));
    if let Some(mut next) = next_value.and_then(|k| doc.as_table_mut().key_mut(k)) {
        prepend(next.leaf_decor_mut(), &prefix);
    } else if let Some(table) = first_table(doc.as_table_mut()) {
        prepend(table.decor_mut(), &prefix);
    }
}

/// Put `text` before what `decor` already has in front of its item.
fn prepend(decor: &mut toml_edit::Decor, text: &str) {
    let own = decor.prefix().and_then(|p| p.as_str()).unwrap_or("");
    let joined = format!("{text}{own}");
    decor.set_prefix(joined);
}

/// The table under `t` whose header comes first in the text (implicit tables have none).
fn first_table(t: &mut Table) -> Option<&mut Table> {
    let mut best: Option<&mut Table> = None;
    for (_, item) in t.iter_mut() {
        let Some(child) = item.as_table_mut() else {
            continue;
        };
        let candidate = if child.position().is_some() {
            Some(child)
        } else {
            first_table(child)
        };
        if let Some(c) = candidate {
            if best.as_ref().is_none_or(|b| c.position() < b.position()) {
                best = Some(c);
            }
        }
    }
    best
}

/// Whether the Codex config at `path` holds something [`remove_setup`] would take out (false
/// when it is missing or not TOML).
pub fn has_setup(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.parse::<DocumentMut>().ok())
        .is_some_and(|mut d| remove_setup(&mut d))
}

/// [`remove_setup`] on the Codex config at `path`, written atomically when it changed.
///
/// Errors: as [`edit_config`].
pub fn remove_setup_from(path: &Path) -> Result<bool, SetupError> {
    edit_file(path, remove_setup)
}

/// Mark `folder` trusted: `[projects."<folder>"] trust_level = "trusted"`.
pub fn trust(doc: &mut DocumentMut, folder: &str) -> bool {
    if trusted_in(doc, folder) {
        return false;
    }
    let Some(projects) = implicit_table(doc, "projects") else {
        return false;
    };
    let entry = projects
        .entry(folder)
        .or_insert_with(|| Item::Table(Table::new()));
    entry["trust_level"] = value("trusted");
    true
}

/// Whether the Codex config (`config_path`) marks `cwd` trusted: `[projects."<real path>"]
/// trust_level = "trusted"`. False when the file is missing or unreadable.
pub fn is_trusted(cwd: &Path) -> bool {
    let key = project_key(cwd);
    config_path()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| t.parse::<DocumentMut>().ok())
        .is_some_and(|d| trusted_in(&d, &key))
}

/// Whether `doc` marks the folder `key` trusted (pure).
fn trusted_in(doc: &DocumentMut, key: &str) -> bool {
    doc.get("projects")
        .and_then(|p| p.get(key))
        .and_then(|e| e.get("trust_level"))
        .and_then(|v| v.as_str())
        == Some("trusted")
}

/// Remove the trust entry of `folder` (spec 07 `remove`). Returns whether it changed.
pub fn untrust(doc: &mut DocumentMut, folder: &str) -> bool {
    let Some(projects) = doc.get_mut("projects").and_then(|p| p.as_table_like_mut()) else {
        return false;
    };
    projects.remove(folder).is_some()
}

/// Read, edit and (when changed) atomically write the host config, mode 0644.
///
/// Errors: the file cannot be read or written, or is not valid TOML (then it is left alone).
pub fn edit_config(edit: impl FnOnce(&mut DocumentMut) -> bool) -> Result<bool, SetupError> {
    let path = config_path().ok_or(SetupError::NoCodexHome)?;
    edit_file(&path, edit)
}

fn edit_file(path: &Path, edit: impl FnOnce(&mut DocumentMut) -> bool) -> Result<bool, SetupError> {
    let text = crate::fsutil::read_optional(path)
        .map_err(SetupError::io("read", path))?
        .unwrap_or_default();
    let mut doc: DocumentMut = text.parse().map_err(|source| SetupError::NotToml {
        path: path.to_path_buf(),
        source,
    })?;
    if !edit(&mut doc) {
        return Ok(false);
    }
    write_atomic(path, doc.to_string().as_bytes(), MODE_SHARED)
        .map_err(SetupError::io("write", path))?;
    Ok(true)
}

/// The folder as Codex names it in `[projects]`: its real path.
pub fn project_key(cwd: &Path) -> String {
    cwd.canonicalize()
        .unwrap_or_else(|_| cwd.to_path_buf())
        .display()
        .to_string()
}

/// Everything a codex peer needs at birth: the MCP server block, no update check at start,
/// the folder trusted.
///
/// Errors: as [`edit_config`], with a hint to fix the file and run the same command again
/// (`create`, `init` and `add-runtime` redo this setup).
pub fn setup(cwd: &Path, mcp_url: &str, bearer: bool) -> Result<(), SetupError> {
    configure(cwd, |doc| ensure_mcp_server(doc, mcp_url, bearer))
        .map(|_| ())
        .map_err(|e| SetupError::FixAndRetry(Box::new(e)))
}

/// What the daemon does at every wake of a codex peer: [`setup`]'s edits, with an existing
/// `[mcp_servers.iapeer]` block brought to the current form ([`upgrade_mcp_server`]).
/// Returns whether the file changed.
///
/// Errors: as [`edit_config`].
pub fn refresh(cwd: &Path, mcp_url: &str, bearer: bool) -> Result<bool, SetupError> {
    configure(cwd, |doc| upgrade_mcp_server(doc, mcp_url, bearer))
}

/// [`edit_config`] with `server`'s edit of the MCP server block, no update check at start
/// and the folder `cwd` trusted; whether the file changed.
fn configure(
    cwd: &Path,
    server: impl FnOnce(&mut DocumentMut) -> bool,
) -> Result<bool, SetupError> {
    let key = project_key(cwd);
    edit_config(|doc| {
        let a = server(doc);
        let b = ensure_no_update_check(doc);
        let c = trust(doc, &key);
        a || b || c
    })
}

/// Undo [`setup`]'s folder trust when a codex peer is removed, with the hook trust recorded
/// for its `.codex/hooks.json` (`trust-hooks`, spec 08 §3); the MCP server block stays
/// (other peers use it).
///
/// Errors: as [`edit_config`], saying that the folder's trust entry stays and how to delete
/// it by hand.
pub fn teardown(cwd: &Path) -> Result<(), SetupError> {
    let key = project_key(cwd);
    let hooks_file = format!("{key}/.codex/hooks.json");
    edit_config(|d| {
        let folder = untrust(d, &key);
        let hooks = crate::memory::hook_trust::forget(d, &hooks_file);
        folder || hooks
    })
    .map(|_| ())
    .map_err(|e| SetupError::TrustStays {
        key,
        source: Box::new(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` parsed as a TOML document.
    fn toml(text: &str) -> DocumentMut {
        text.parse().unwrap()
    }

    const USER: &str =
        "# my settings\nmodel = \"o3\" # favourite\n\n[mcp_servers.other]\ncommand = \"x\"\n";

    #[test]
    fn edits_keep_the_users_text_and_are_idempotent() {
        let mut doc = toml(USER);
        assert!(ensure_mcp_server(
            &mut doc,
            "http://127.0.0.1:8765/mcp",
            false
        ));
        assert!(ensure_no_update_check(&mut doc));
        assert!(trust(&mut doc, "/w/bob"));
        let once = doc.to_string();
        assert!(!ensure_mcp_server(&mut doc, "http://other", false));
        assert!(!ensure_no_update_check(&mut doc));
        assert!(!trust(&mut doc, "/w/bob"));
        assert_eq!(doc.to_string(), once, "a second run changes nothing");
        assert!(once.starts_with("# my settings\n"), "{once}");
        assert!(once.contains("model = \"o3\" # favourite"), "{once}");
        assert!(
            once.contains("[mcp_servers.other]\ncommand = \"x\""),
            "{once}"
        );
        let v = toml(&once);
        assert_eq!(
            v["mcp_servers"]["iapeer"]["bearer_token_env_var"].as_str(),
            Some("IAPEER_TOKEN")
        );
        assert_eq!(
            v["mcp_servers"]["iapeer"]["default_tools_approval_mode"].as_str(),
            Some("approve")
        );
        assert_eq!(
            v["mcp_servers"]["iapeer"]["env_http_headers"]["X-IAPeer-Identity"].as_str(),
            Some("PEER_IDENTITY")
        );
        assert_eq!(v["check_for_update_on_startup"].as_bool(), Some(false));
        assert_eq!(
            v["projects"]["/w/bob"]["trust_level"].as_str(),
            Some("trusted")
        );
        // The update-check key is a root key, so it must come before the first table.
        let root_pos = once.find("check_for_update_on_startup").unwrap();
        let table_pos = once.find('[').unwrap();
        assert!(root_pos < table_pos, "{once}");
    }

    #[test]
    fn remove_setup_takes_out_exactly_what_setup_added() {
        let user = format!("{USER}\n[projects.\"/w/eve\"]\ntrust_level = \"trusted\"\n");
        let mut doc = toml(&user);
        assert!(ensure_mcp_server(
            &mut doc,
            "http://127.0.0.1:8765/mcp",
            false
        ));
        assert!(ensure_no_update_check(&mut doc));
        let set_up = doc.to_string();
        assert!(set_up.contains(&format!("check_for_update_on_startup = false # {MARK}")));
        assert!(remove_setup(&mut doc));
        assert_eq!(
            doc.to_string(),
            user,
            "the user's text comes back byte for byte"
        );
        assert!(!remove_setup(&mut doc), "nothing left to take out");
        // Alone in the file: nothing of it stays.
        let mut doc = DocumentMut::new();
        ensure_mcp_server(&mut doc, "http://127.0.0.1:8765/mcp", false);
        ensure_no_update_check(&mut doc);
        assert!(remove_setup(&mut doc));
        assert_eq!(doc.to_string().trim(), "");
    }

    #[test]
    fn remove_setup_keeps_the_users_own_values() {
        // The user's own update setting (a comment of theirs, or true) and an iapeer block of
        // their own making (another token variable) stay.
        for text in [
            "check_for_update_on_startup = false # I want no updates\n",
            "check_for_update_on_startup = true\n",
            "check_for_update_on_startup = false\n",
            "[mcp_servers.iapeer]\nurl = \"http://mine\"\nbearer_token_env_var = \"MY_VAR\"\n",
            "[mcp_servers]\n",
        ] {
            let mut doc = toml(text);
            assert!(!remove_setup(&mut doc), "{text}");
            assert_eq!(doc.to_string(), text);
        }
        for (old, want) in [
            // A block the original tool wrote, with the bare key older builds wrote beside it.
            (
                "# mine\ncheck_for_update_on_startup = false\nmodel = \"o3\"\n\n[mcp_servers.iapeer]\nurl = \"http://127.0.0.1:8765/mcp\"\nbearer_token_env_var = \"IAPEER_BEARER\"\n\n[mcp_servers.other]\ncommand = \"x\"\n",
                "# mine\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n",
            ),
            // The comments above the key go to the first table when no root key follows.
            (
                "# mine\ncheck_for_update_on_startup = false # added by iapeer; iapeer uninstall removes it\n\n[mcp_servers.other]\ncommand = \"x\"\n",
                "# mine\n\n[mcp_servers.other]\ncommand = \"x\"\n",
            ),
        ] {
            let mut doc = toml(old);
            assert!(remove_setup(&mut doc), "{old}");
            assert_eq!(doc.to_string(), want);
        }
    }

    #[test]
    fn existing_values_are_the_users() {
        let mut doc = toml(
            "check_for_update_on_startup = true\n[mcp_servers.iapeer]\nurl = \"http://mine\"\n",
        );
        assert!(!ensure_no_update_check(&mut doc));
        assert!(!ensure_mcp_server(
            &mut doc,
            "http://127.0.0.1:8765/mcp",
            false
        ));
        assert_eq!(
            doc["mcp_servers"]["iapeer"]["url"].as_str(),
            Some("http://mine")
        );
    }

    #[test]
    fn trusted_means_the_trusted_level_for_that_very_folder() {
        let mut doc = toml("[projects.\"/w/eve\"]\ntrust_level = \"untrusted\"\n");
        assert!(!trusted_in(&doc, "/w/bob"));
        assert!(!trusted_in(&doc, "/w/eve"));
        assert!(trust(&mut doc, "/w/bob"));
        assert!(trusted_in(&doc, "/w/bob"));
        assert!(!trust(&mut doc, "/w/bob"), "already trusted: no change");
        assert!(!trusted_in(&doc, "/w/eve"));
        assert!(trust(&mut doc, "/w/eve"));
        assert!(trusted_in(&doc, "/w/eve"));
    }

    #[test]
    fn untrust_removes_only_that_folder() {
        let mut doc = toml("[projects.\"/w/bob\"]\ntrust_level = \"trusted\"\n\n[projects.\"/w/eve\"]\ntrust_level = \"trusted\"\n");
        assert!(untrust(&mut doc, "/w/bob"));
        assert!(!untrust(&mut doc, "/w/bob"));
        let text = doc.to_string();
        assert!(
            !text.contains("/w/bob") && text.contains("/w/eve"),
            "{text}"
        );
    }

    #[test]
    fn an_unparseable_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.toml");
        std::fs::write(&p, "this is = = not toml").unwrap();
        let err = edit_file(&p, |d| trust(d, "/x")).unwrap_err();
        assert!(err.to_string().contains("not valid TOML"), "{err}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "this is = = not toml");
        let fresh = dir.path().join("new/config.toml");
        assert!(edit_file(&fresh, |d| trust(d, "/x")).unwrap());
        assert_eq!(crate::testkit::mode_of(&fresh), 0o644);
    }

    /// The block exactly as the original tool appends it.
    const ORIGINAL: &str = "check_for_update_on_startup = false\nmodel = \"o3\"\n\n[mcp_servers.iapeer]\nurl = \"http://127.0.0.1:8765/mcp\"\ndefault_tools_approval_mode = \"approve\"\nbearer_token_env_var = \"IAPEER_BEARER\"\ntool_timeout_sec = 90\n\n[mcp_servers.iapeer.env_http_headers]\n\"X-IAPeer-Identity\" = \"PEER_IDENTITY\"\n";

    #[test]
    fn the_original_block_is_upgraded_and_the_rest_kept() {
        let mut doc = toml(ORIGINAL);
        assert!(upgrade_mcp_server(&mut doc, "http://x", false));
        let out = doc.to_string();
        assert!(
            out.contains("bearer_token_env_var = \"IAPEER_TOKEN\""),
            "{out}"
        );
        assert!(out.contains("tool_timeout_sec = 90"), "{out}");
        assert!(out.contains("url = \"http://127.0.0.1:8765/mcp\""), "{out}");
        assert!(out.contains("model = \"o3\""), "{out}");
        assert!(!upgrade_mcp_server(&mut doc, "http://x", false));
        assert_eq!(doc.to_string(), out);
    }

    /// Bearer mode (spec 02 §4): the daemon's bearer as Codex's bearer, the session token in
    /// `X-IAPeer-Token`; a switch of mode at a wake rewrites iapeer's block both ways, and a
    /// variable the user chose is left alone.
    #[test]
    fn the_block_follows_the_daemon_s_bearer_mode() {
        let server = |doc: &DocumentMut| toml(&doc.to_string())["mcp_servers"]["iapeer"].clone();
        let in_bearer_form = |doc: &DocumentMut| {
            let s = server(doc);
            s["bearer_token_env_var"].as_str() == Some("IAPEER_BEARER_TOKEN")
                && s["env_http_headers"][TOKEN_HEADER].as_str() == Some("IAPEER_TOKEN")
        };
        let mut doc = toml("");
        assert!(ensure_mcp_server(&mut doc, "http://x", true));
        assert!(in_bearer_form(&doc), "{doc}");
        assert!(is_iapeer_server(&doc));
        assert!(!upgrade_mcp_server(&mut doc, "http://x", true));
        // Bearer -> plain.
        assert!(upgrade_mcp_server(&mut doc, "http://x", false));
        let s = server(&doc);
        assert_eq!(s["bearer_token_env_var"].as_str(), Some("IAPEER_TOKEN"));
        assert!(s["env_http_headers"].get(TOKEN_HEADER).is_none());
        assert_eq!(
            s["env_http_headers"]["X-IAPeer-Identity"].as_str(),
            Some("PEER_IDENTITY")
        );
        // Plain -> bearer.
        assert!(upgrade_mcp_server(&mut doc, "http://x", true));
        assert!(in_bearer_form(&doc), "{doc}");
        // The user's own variable stays, in either mode.
        let mut mine =
            toml("[mcp_servers.iapeer]\nurl = \"u\"\nbearer_token_env_var = \"MY_VAR\"\n");
        upgrade_mcp_server(&mut mine, "http://x", true);
        let s = server(&mine);
        assert_eq!(s["bearer_token_env_var"].as_str(), Some("MY_VAR"));
        assert!(s["env_http_headers"].get(TOKEN_HEADER).is_none());
    }

    #[test]
    fn a_bearer_variable_the_user_chose_is_kept_and_a_missing_identity_added() {
        let mut doc =
            toml("[mcp_servers.iapeer]\nurl = \"u\"\nbearer_token_env_var = \"MY_VAR\"\n");
        assert!(upgrade_mcp_server(&mut doc, "http://x", false));
        let out = doc.to_string();
        assert!(out.contains("bearer_token_env_var = \"MY_VAR\""), "{out}");
        let v = toml(&out);
        assert_eq!(
            v["mcp_servers"]["iapeer"]["env_http_headers"]["X-IAPeer-Identity"].as_str(),
            Some("PEER_IDENTITY")
        );
    }
}

//! The agent runtimes' own memory (spec 08 §3 `native-memory`): a memory provider replaces
//! it, so a peer's native memory is turned off at birth when the slot is claimed, and
//! `iapeer native-memory on|off` flips it by hand. One lever per runtime, in the peer folder
//! (names checked in the real programs: tests/fixtures/codex-0.171.0/hook-trust/README.md):
//!
//! - Claude Code: `"autoMemoryEnabled": false` in `<cwd>/.claude/settings.json` (a JSON
//!   merge; the other keys are kept; a file that is not a JSON object is refused);
//! - Codex: `memories = false` under `[features]` in `<cwd>/.codex/config.toml` (a
//!   format-preserving edit).
//!
//! `on` deletes the key (the runtime's default, on, applies); it never writes `true`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use toml_edit::{value, DocumentMut, Item};

use crate::fsutil::{self, MODE_SHARED};
use crate::runtime_table::{self, LeverEdit};

/// The position asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The runtime's own memory is off.
    Off,
    /// The runtime decides (its default is on).
    On,
}

impl Setting {
    /// `off` or `on`; `None` for anything else.
    pub fn parse(word: &str) -> Option<Setting> {
        match word {
            "off" => Some(Setting::Off),
            "on" => Some(Setting::On),
            _ => None,
        }
    }
}

/// What happened to one lever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeverState {
    /// The file was changed.
    Written,
    /// The file already said so.
    Already,
    /// The file could not be read, parsed or written (why, naming it).
    Failed(String),
}

impl LeverState {
    /// `written`, `already` or `failed`.
    pub fn word(&self) -> &'static str {
        match self {
            LeverState::Written => "written",
            LeverState::Already => "already",
            LeverState::Failed(_) => "failed",
        }
    }

    /// Why it failed; `None` when it did not.
    pub fn failure(&self) -> Option<&str> {
        match self {
            LeverState::Failed(why) => Some(why),
            _ => None,
        }
    }
}

/// The runtimes that have a lever (their row's [`runtime_table::MemoryLever`]): `claude`,
/// `codex`.
pub fn has_lever(runtime: &str) -> bool {
    runtime_table::get(runtime).is_some_and(|r| r.memory.is_some())
}

/// The file holding `runtime`'s lever for the peer folder `cwd`, if the runtime has one
/// (`<cwd>/.claude/settings.json`, `<cwd>/.codex/config.toml`).
pub fn lever_file(runtime: &str, cwd: &Path) -> Option<PathBuf> {
    runtime_table::get(runtime)?.lever_file(cwd)
}

/// Set `runtime`'s lever in `cwd` to `setting`; `None` for a runtime without one.
pub fn set(runtime: &str, cwd: &Path, setting: Setting) -> Option<(PathBuf, LeverState)> {
    let lever = runtime_table::get(runtime)?.memory?;
    let file = lever_file(runtime, cwd)?;
    let text = match fsutil::read_optional(&file) {
        Ok(t) => t,
        Err(e) => {
            let why = format!("cannot read {}: {e}", file.display());
            return Some((file, LeverState::Failed(why)));
        }
    };
    let edited = match lever.edit {
        LeverEdit::ClaudeSettings => edit_claude(text.as_deref(), setting),
        LeverEdit::CodexConfig => edit_codex(text.as_deref(), setting),
    };
    let state = match edited {
        Err(why) => LeverState::Failed(format!("{} {why}", file.display())),
        Ok(None) => LeverState::Already,
        Ok(Some(new)) => match write(&file, &new) {
            Ok(()) => LeverState::Written,
            Err(e) => LeverState::Failed(format!("cannot write {}: {e}", file.display())),
        },
    };
    Some((file, state))
}

fn write(file: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    fsutil::write_atomic(file, text.as_bytes(), MODE_SHARED)
}

const CLAUDE_KEY: &str = "autoMemoryEnabled";

/// Why a lever file was left alone. `Display` is the end of a sentence that starts with the
/// file's path.
#[derive(Debug)]
enum LeverError {
    /// A Claude settings file that is not a JSON object.
    NotJsonObject,
    /// A Codex config that is not valid TOML.
    NotToml(toml_edit::TomlError),
    /// A Codex config whose `features` is not a table.
    FeaturesNotTable,
}

impl std::fmt::Display for LeverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeverError::NotJsonObject => {
                f.write_str("is not a JSON object, so iapeer left it alone")
            }
            LeverError::NotToml(e) => {
                write!(f, "is not valid TOML, so iapeer left it alone: {e}")
            }
            LeverError::FeaturesNotTable => {
                f.write_str("has a \"features\" that is not a table, so iapeer left it alone")
            }
        }
    }
}

/// The new text of a Claude `settings.json` (`None`: nothing to change).
///
/// Errors: the text is not a JSON object (it is left alone).
fn edit_claude(text: Option<&str>, setting: Setting) -> Result<Option<String>, LeverError> {
    let mut obj = match text.filter(|t| !t.trim().is_empty()) {
        None => Map::new(),
        Some(t) => match serde_json::from_str::<Value>(t) {
            Ok(Value::Object(o)) => o,
            _ => return Err(LeverError::NotJsonObject),
        },
    };
    let changed = match setting {
        Setting::Off if obj.get(CLAUDE_KEY) == Some(&Value::Bool(false)) => false,
        Setting::Off => {
            obj.insert(CLAUDE_KEY.into(), Value::Bool(false));
            true
        }
        Setting::On => obj.remove(CLAUDE_KEY).is_some(),
    };
    Ok(changed.then(|| {
        let pretty = serde_json::to_string_pretty(&Value::Object(obj)).unwrap_or_default();
        format!("{pretty}\n")
    }))
}

/// The new text of a Codex project `config.toml` (`None`: nothing to change).
///
/// Errors: the text is not valid TOML, or its `features` is not a table (left alone).
fn edit_codex(text: Option<&str>, setting: Setting) -> Result<Option<String>, LeverError> {
    let mut doc: DocumentMut = text
        .unwrap_or_default()
        .parse()
        .map_err(LeverError::NotToml)?;
    if doc.get("features").is_some_and(|f| !f.is_table_like()) {
        return Err(LeverError::FeaturesNotTable);
    }
    let current = doc
        .get("features")
        .and_then(|f| f.get("memories"))
        .and_then(Item::as_bool);
    match setting {
        Setting::Off if current == Some(false) => return Ok(None),
        Setting::Off => {
            let features = doc
                .entry("features")
                .or_insert_with(|| Item::Table(toml_edit::Table::new()));
            features["memories"] = value(false);
        }
        Setting::On => {
            let Some(features) = doc.get_mut("features").and_then(Item::as_table_like_mut) else {
                return Ok(None);
            };
            if features.remove("memories").is_none() {
                return Ok(None);
            }
            if features.is_empty() {
                doc.remove("features");
            }
        }
    }
    Ok(Some(doc.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_off_merges_the_key_and_on_deletes_it() {
        let mine = r#"{"model":"opus","permissions":{"allow":["Bash"]}}"#;
        let off = edit_claude(Some(mine), Setting::Off).unwrap().unwrap();
        let v: Value = serde_json::from_str(&off).unwrap();
        assert_eq!(v["autoMemoryEnabled"], Value::Bool(false));
        assert_eq!(v["model"], "opus");
        assert_eq!(v["permissions"]["allow"][0], "Bash");
        assert_eq!(edit_claude(Some(&off), Setting::Off).unwrap(), None);
        let on = edit_claude(Some(&off), Setting::On).unwrap().unwrap();
        let v: Value = serde_json::from_str(&on).unwrap();
        assert!(v.get("autoMemoryEnabled").is_none(), "on never writes true");
        assert_eq!(v["model"], "opus");
        assert_eq!(edit_claude(Some(&on), Setting::On).unwrap(), None);
        assert_eq!(edit_claude(None, Setting::On).unwrap(), None);
        assert_eq!(
            edit_claude(None, Setting::Off).unwrap().unwrap(),
            "{\n  \"autoMemoryEnabled\": false\n}\n"
        );
    }

    #[test]
    fn claude_refuses_a_file_that_is_not_an_object() {
        for bad in ["[1]", "not json", "\"x\""] {
            assert!(edit_claude(Some(bad), Setting::Off).is_err(), "{bad}");
        }
    }

    #[test]
    fn codex_off_edits_in_place_and_on_removes_only_its_key() {
        let mine = "# my settings\nmodel = \"o3\"\n\n[features]\nweb_search = true # keep\n";
        let off = edit_codex(Some(mine), Setting::Off).unwrap().unwrap();
        assert_eq!(
            off,
            "# my settings\nmodel = \"o3\"\n\n[features]\nweb_search = true # keep\nmemories = false\n"
        );
        assert_eq!(edit_codex(Some(&off), Setting::Off).unwrap(), None);
        assert_eq!(
            edit_codex(Some(&off), Setting::On).unwrap().unwrap(),
            mine,
            "on restores the user's file"
        );
        let fresh = edit_codex(None, Setting::Off).unwrap().unwrap();
        assert_eq!(fresh, "[features]\nmemories = false\n");
        assert_eq!(edit_codex(Some(&fresh), Setting::On).unwrap().unwrap(), "");
        assert_eq!(edit_codex(None, Setting::On).unwrap(), None);
    }

    #[test]
    fn codex_refuses_a_file_it_cannot_edit() {
        assert!(edit_codex(Some("[broken"), Setting::Off).is_err());
        assert!(edit_codex(Some("features = 3\n"), Setting::Off).is_err());
    }

    #[test]
    fn set_reports_each_state_and_leaves_a_bad_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (file, s) = set("claude", dir.path(), Setting::Off).unwrap();
        assert_eq!(
            (file.clone(), s),
            (
                dir.path().join(".claude/settings.json"),
                LeverState::Written
            )
        );
        assert_eq!(
            set("claude", dir.path(), Setting::Off).unwrap().1,
            LeverState::Already
        );
        std::fs::write(&file, "[]").unwrap();
        let (_, s) = set("claude", dir.path(), Setting::On).unwrap();
        assert!(
            matches!(&s, LeverState::Failed(w) if w.contains("not a JSON object")),
            "{s:?}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "[]");
        assert_eq!(set("echo", dir.path(), Setting::Off), None);
    }
}

//! Parsing the profile's JSON object into [`Profile`] (spec 01 §4): known fields are typed,
//! everything else is kept in `extra`.

use serde_json::{Map, Value};
use std::path::Path;

use super::{Profile, ProfileError};
use crate::fsutil;

/// Longest description kept, in chars (spec 01 §4).
pub const DESCRIPTION_MAX_CHARS: usize = 450;

/// Keys this build owns, in the order they are written (spec 01 §4); never kept in `extra`.
/// `runtime` is the legacy field (read, never written by `update`; `repair` leaves it).
pub const KNOWN_KEYS: &[&str] = &[
    "personality",
    "runtimes",
    "default_runtime",
    "runtime",
    "description",
    "intelligence",
    "initial_prompt",
    "wake_policy",
    "approval_mode",
    "interfaces",
    "worktree",
];

/// Make a description one line of at most [`DESCRIPTION_MAX_CHARS`] chars: lines are joined
/// with single spaces, the ends trimmed, and an over-long text cut to 449 chars plus `…`.
pub fn clamp_description(text: &str) -> String {
    let one_line = text
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if one_line.chars().count() <= DESCRIPTION_MAX_CHARS {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(DESCRIPTION_MAX_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// Read `path` as a JSON object. Missing file → `Ok(None)`.
///
/// Errors: `Io` when unreadable, `Corrupt` when not JSON or not an object.
pub(super) fn read_object(path: &Path) -> Result<Option<Map<String, Value>>, ProfileError> {
    Ok(read_object_text(path)?.map(|(map, _)| map))
}

/// A profile object and the text it was read from.
pub(super) type ObjectText = (Map<String, Value>, String);

/// [`read_object`], with the file's text (a writer keeps the text of what it leaves alone).
///
/// Errors: as [`read_object`].
pub(super) fn read_object_text(path: &Path) -> Result<Option<ObjectText>, ProfileError> {
    let text = fsutil::read_optional(path).map_err(|e| {
        ProfileError::Io(fsutil::IoError::named("read", "the peer profile ", path)(e))
    })?;
    let Some(text) = text else {
        return Ok(None);
    };
    Ok(Some((parse_object(path, &text)?, text)))
}

/// Parse `text`, the content of `path`, as a JSON object.
fn parse_object(path: &Path, text: &str) -> Result<Map<String, Value>, ProfileError> {
    let corrupt = |reason: String| ProfileError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(corrupt(format!(
            "it holds a JSON {} instead of an object",
            json_kind(&other)
        ))),
        Err(e) => Err(corrupt(format!("invalid JSON ({e})"))),
    }
}

/// A known profile field of the wrong type. `Display` names the field and what it must be;
/// [`ProfileError::Corrupt`] quotes it as its reason.
#[derive(Debug, thiserror::Error)]
pub enum FieldError {
    /// A field that must be a string holds another kind of value.
    #[error("\"{key}\" must be a string, not a {kind}")]
    NotString {
        /// The key.
        key: String,
        /// The kind found ([`json_kind`]).
        kind: &'static str,
    },
    /// A field that must be an array of strings holds something else.
    #[error("\"{0}\" must be an array of strings")]
    NotStringList(String),
    /// `interfaces` is not an object.
    #[error("\"interfaces\" must be an object")]
    InterfacesNotObject,
    /// `worktree` does not decode.
    #[error("\"worktree\" must be {{\"repository\": <path>, \"branch\": <name>}} ({0})")]
    BadWorktree(#[source] serde_json::Error),
}

/// Split a profile object into typed fields and `extra`. The personality is taken as
/// written; runtimes are not settled yet.
///
/// Errors: [`FieldError`], naming the first known field with the wrong type.
pub(super) fn from_map(mut map: Map<String, Value>) -> Result<Profile, FieldError> {
    let mut p = Profile::blank("");
    p.personality = take_string(&mut map, "personality")?.unwrap_or_default();
    p.runtimes = take_string_list(&mut map, "runtimes")?;
    p.default_runtime = take_string(&mut map, "default_runtime")?.unwrap_or_default();
    p.legacy_runtime = take_string(&mut map, "runtime")?;
    p.description = take_string(&mut map, "description")?;
    p.intelligence = take_string(&mut map, "intelligence")?;
    p.initial_prompt = take_string(&mut map, "initial_prompt")?;
    p.wake_policy = take_string(&mut map, "wake_policy")?;
    p.approval_mode = take_string(&mut map, "approval_mode")?;
    p.interfaces = match map.remove("interfaces") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err(FieldError::InterfacesNotObject),
    };
    p.worktree = match map.remove("worktree") {
        None | Some(Value::Null) => None,
        Some(v) => Some(serde_json::from_value(v).map_err(FieldError::BadWorktree)?),
    };
    p.extra = map;
    Ok(p)
}

fn take_string(map: &mut Map<String, Value>, key: &str) -> Result<Option<String>, FieldError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(FieldError::NotString {
            key: key.to_string(),
            kind: json_kind(&other),
        }),
    }
}

fn take_string_list(map: &mut Map<String, Value>, key: &str) -> Result<Vec<String>, FieldError> {
    let bad = || FieldError::NotStringList(key.to_string());
    match map.remove(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(bad()),
            })
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// A JSON value's kind in words, for error messages.
pub(super) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

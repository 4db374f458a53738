//! The profile standard that `iapeer verify` enforces (spec 07 peers, spec 01 §4).

use std::path::Path;

use super::fields::{from_map, read_object, DESCRIPTION_MAX_CHARS};
use super::{personality_of, Profile, ProfileError};
use crate::names::{self, Intelligence};
use crate::paths;
use crate::runtime_table::Class;

/// What [`check`] found, one sentence each.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Findings {
    /// What is broken: `verify` exits 1, `verify --fix` repairs what it can.
    pub errors: Vec<String>,
    /// What departs from the standard by someone's choice (a hand-chosen name, a runtime
    /// package's long description, the original tool's legacy `runtime` mirror): reported,
    /// never rewritten (issue 11 item 2).
    pub warnings: Vec<String>,
}

/// The words of the finding for a registered folder that no longer exists (`verify` gives
/// its own advice for it, not `--fix`).
pub const FOLDER_GONE: &str = "is gone";

/// Every way the profile in `cwd` departs from the standard; both lists empty when it
/// conforms. Checked on the file as written (before any in-memory healing).
///
/// Errors: the file is missing or does not parse; no valid name (neither the written
/// `personality` nor the folder's); a runtime name is invalid; no runtime is declared; the
/// default runtime is not listed in `runtimes`; `intelligence` is unknown (legacy spellings
/// count as known); the nature is not allowed on a declared runtime of the class `class_of`
/// gives ([`Intelligence::allowed_in`]; `verify` gives `runtime::class_installed`, so a
/// terminal agent installed by a manifest is an agent though the table does not know its
/// name).
///
/// Warnings: `personality` differs from the folder's normalized name; the legacy `runtime`
/// field beside `default_runtime`; a description of several lines or over 450 chars (it is
/// shown clamped to one line).
pub fn check(cwd: &Path, class_of: &dyn Fn(&str) -> Class) -> Findings {
    let path = paths::peer::profile(cwd);
    let error = |e: String| Findings {
        errors: vec![e],
        warnings: Vec::new(),
    };
    let map = match read_object(&path) {
        Ok(Some(map)) => map,
        // A folder moved by hand (issue 30 item 6): `init` belongs in its new place.
        Ok(None) if !cwd.exists() => {
            return error(format!(
                "its folder {} {FOLDER_GONE} — if you moved it, run `iapeer init` in its new \
                 place (the registry follows); if you deleted it, `iapeer remove` the peer",
                cwd.display()
            ))
        }
        Ok(None) => {
            return error(format!(
                "no profile at {} — run `iapeer init {}`",
                path.display(),
                cwd.display()
            ))
        }
        Err(e) => return error(e.to_string()),
    };
    match from_map(map) {
        Ok(raw) => problems(personality_of(cwd), &raw, class_of),
        Err(reason) => error(
            ProfileError::Corrupt {
                path,
                reason: reason.to_string(),
            }
            .to_string(),
        ),
    }
}

/// The checks on an already parsed profile; `folder_name` is `personality_of(cwd)`,
/// `class_of` the class of a runtime.
fn problems(
    folder_name: Result<String, ProfileError>,
    raw: &Profile,
    class_of: &dyn Fn(&str) -> Class,
) -> Findings {
    let mut out = Vec::new();
    let mut warn = Vec::new();
    let written_ok = names::is_valid_personality(&raw.personality);
    match folder_name {
        Err(e) if !written_ok => out.push(e.to_string()),
        Err(_) => {}
        Ok(name) if raw.personality.is_empty() => {
            out.push(format!("\"personality\" is missing (expected \"{name}\")"))
        }
        Ok(name) if !written_ok => out.push(format!(
            "personality \"{}\" is not a valid name (expected \"{name}\")",
            raw.personality
        )),
        Ok(name) if raw.personality != name => warn.push(format!(
            "personality \"{}\" does not match the folder name \"{name}\" (kept: messages \
             route to \"{}\")",
            raw.personality, raw.personality
        )),
        Ok(_) => {}
    }
    if let Some(legacy) = &raw.legacy_runtime {
        if raw.default_runtime.is_empty() {
            out.push(format!(
                "legacy field \"runtime\": \"{legacy}\" without \"default_runtime\" — \
                 `iapeer verify --fix` adds \"default_runtime\""
            ));
        } else {
            warn.push(format!(
                "legacy field \"runtime\": \"{legacy}\" (the original tool's mirror; \
                 \"default_runtime\" wins)"
            ));
        }
    }
    for rt in raw.runtimes.iter().filter(|r| !names::is_valid_runtime(r)) {
        out.push(format!(
            "runtime \"{rt}\" is not a valid runtime name ({})",
            names::RUNTIME_RULE
        ));
    }
    if raw.default_runtime.is_empty() {
        if raw.legacy_runtime.is_none() {
            out.push(if raw.runtimes.is_empty() {
                "no runtime declared — set \"default_runtime\" (e.g. \"claude\")".to_string()
            } else {
                "\"default_runtime\" is missing".to_string()
            });
        }
    } else if !raw.declares(&raw.default_runtime) {
        out.push(format!(
            "default runtime \"{}\" is not listed in \"runtimes\" {:?}",
            raw.default_runtime, raw.runtimes
        ));
    }
    let known_nature = match raw.intelligence.as_deref() {
        Some(s) if Intelligence::parse(s).is_none() => {
            out.push(format!(
                "unknown intelligence \"{s}\" (use artificial, natural or absent)"
            ));
            false
        }
        _ => true,
    };
    if let Some(d) = &raw.description {
        if d.contains(['\n', '\r']) {
            warn.push(
                "description spans several lines (peers see it joined into one line)".to_string(),
            );
        }
        let n = d.chars().count();
        if n > DESCRIPTION_MAX_CHARS {
            warn.push(format!(
                "description is {n} chars long (peers see it cut to {DESCRIPTION_MAX_CHARS})"
            ));
        }
    }
    let mut settled = raw.clone();
    if known_nature && settled.settle_runtimes(Path::new("")).is_ok() {
        let nature = settled.nature();
        for rt in settled
            .runtimes
            .iter()
            .filter(|r| !nature.allowed_in(class_of(r)))
        {
            out.push(format!(
                "a peer of {nature} intelligence may not run on \"{rt}\""
            ));
        }
    }
    Findings {
        errors: out,
        warnings: warn,
    }
}

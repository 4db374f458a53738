//! The profile standard that `iapeer verify` enforces (spec 07 peers, spec 01 §4).

use std::path::Path;

use super::fields::{from_map, read_object, DESCRIPTION_MAX_CHARS};
use super::{personality_of, Profile, ProfileError};
use crate::names::{self, Intelligence};
use crate::paths;

/// Every way the profile in `cwd` departs from the standard, one sentence each; empty when
/// it conforms. Checked on the file as written (before any in-memory healing):
/// the file exists and parses; `personality` equals the folder's normalized name (and that
/// name is valid); no legacy `runtime` field; runtime names are valid; a runtime is declared
/// and `default_runtime` is listed in `runtimes`; `intelligence` is known (legacy spellings
/// count as known); `description` is one line of at most 450 chars; the nature is allowed on
/// every declared runtime ([`Intelligence::allowed_on`]).
pub fn check(cwd: &Path) -> Vec<String> {
    let path = paths::peer::profile(cwd);
    let map = match read_object(&path) {
        Ok(Some(map)) => map,
        Ok(None) => {
            return vec![format!(
                "no profile at {} — run `iapeer init {}`",
                path.display(),
                cwd.display()
            )]
        }
        Err(e) => return vec![e.to_string()],
    };
    match from_map(map) {
        Ok(raw) => problems(personality_of(cwd), &raw),
        Err(reason) => vec![ProfileError::Corrupt { path, reason }.to_string()],
    }
}

/// The checks on an already parsed profile; `folder_name` is `personality_of(cwd)`.
fn problems(folder_name: Result<String, ProfileError>, raw: &Profile) -> Vec<String> {
    let mut out = Vec::new();
    match folder_name {
        Err(e) => out.push(e.to_string()),
        Ok(name) if raw.personality.is_empty() => {
            out.push(format!("\"personality\" is missing (expected \"{name}\")"))
        }
        Ok(name) if raw.personality != name => out.push(format!(
            "personality \"{}\" does not match the folder name (expected \"{name}\")",
            raw.personality
        )),
        Ok(_) => {}
    }
    if let Some(legacy) = &raw.legacy_runtime {
        out.push(format!(
            "legacy field \"runtime\": \"{legacy}\" — `iapeer verify --fix` moves it to \
             \"default_runtime\""
        ));
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
            out.push("description spans several lines (it must be one line)".to_string());
        }
        let n = d.chars().count();
        if n > DESCRIPTION_MAX_CHARS {
            out.push(format!(
                "description is {n} chars long (at most {DESCRIPTION_MAX_CHARS})"
            ));
        }
    }
    let mut settled = raw.clone();
    if known_nature && settled.settle_runtimes(Path::new("")).is_ok() {
        let nature = settled.nature();
        for rt in settled.runtimes.iter().filter(|r| !nature.allowed_on(r)) {
            out.push(format!(
                "a peer of {nature} intelligence may not run on \"{rt}\""
            ));
        }
    }
    out
}

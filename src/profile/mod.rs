//! The peer profile `<cwd>/.iapeer/peer-profile.json` (spec 01 §4): the source of truth
//! about a peer. Every writer reads, merges and writes the whole file back, keeping every key
//! it does not know (plugins and runtime packages own those), and every value it did not
//! change, byte for byte as it was written ([`keep`]).
//!
//! ```json
//! { "personality": "assistant", "runtimes": ["claude", "codex"], "default_runtime": "claude",
//!   "description": "General-purpose assistant.", "intelligence": "artificial",
//!   "initial_prompt": "New session. Greet the owner.", "wake_policy": "ephemeral",
//!   "interfaces": { "telegram": { "bot_username": "assistant_bot" } } }
//! ```

mod check;
mod fields;
mod keep;
#[cfg(test)]
mod tests;

use serde::Serialize;
use serde_json::{Map, Value};
use std::io;
use std::path::{Path, PathBuf};

use crate::fsutil;
use crate::names::{self, Intelligence};
use crate::paths;
use crate::registry::RegistryPeer;

pub use check::{check, Findings, FOLDER_GONE};
pub use fields::{clamp_description, DESCRIPTION_MAX_CHARS, KNOWN_KEYS};

/// Why a profile could not be read or written. Every variant names the file or folder.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file exists but could not be read, or could not be written.
    #[error(transparent)]
    Io(fsutil::IoError),
    /// The file is not a JSON object, or a known field has the wrong type.
    #[error(
        "peer profile {path} is unusable: {reason} — the file must be a valid JSON object; \
         fix it by hand (run `iapeer verify` to check it)"
    )]
    Corrupt {
        /// The profile file.
        path: PathBuf,
        /// What is wrong, e.g. `"runtimes" must be an array of strings`.
        reason: String,
    },
    /// The folder's normalized name is not a valid personality (spec 01 §3).
    #[error(
        "folder {cwd} does not give a valid peer name (it normalizes to \"{normalized}\"; \
         {rule}) — rename the folder",
        rule = names::PERSONALITY_RULE
    )]
    FolderName {
        /// The peer's working folder.
        cwd: PathBuf,
        /// What `normalize(basename(cwd))` gave.
        normalized: String,
    },
    /// Neither `default_runtime`, legacy `runtime` nor `runtimes` names a runtime.
    #[error(
        "peer profile {path} declares no runtime — set \"default_runtime\" (e.g. \"claude\") \
         in it, or run `iapeer init` in that folder"
    )]
    NoRuntime {
        /// The profile file.
        path: PathBuf,
    },
}

/// The value of `approval_mode` that gates a peer's permission prompts (spec 10 §4).
pub const APPROVAL_MODE_GATED: &str = "gated";

/// The value of `wake_policy` that makes a peer ephemeral (spec 05 §6).
pub const WAKE_POLICY_EPHEMERAL: &str = "ephemeral";

/// `"worktree"` of a profile: the peer's folder is a git worktree that `create --worktree`
/// made (issue 32 item 8), e.g. `{"repository": "/src/app/.git", "branch": "iapeer/bob"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct WorktreeRecord {
    /// The repository's git directory (git's common directory, absolute): `<repo>/.git`, or
    /// the bare repository.
    pub repository: PathBuf,
    /// The branch the worktree was made on (without `refs/heads/`); git's listing says
    /// which one it has now.
    pub branch: String,
}

/// A peer profile. Fields are written in this order, then the unknown keys (in the file's
/// order, new ones sorted), each unchanged value as the text it had in the file.
///
/// Invariants after [`Profile::read`] and [`Profile::update`]: `personality` is the folder's
/// normalized name (when that is valid), `default_runtime` is non-empty and listed in
/// `runtimes`, `description` is one line of at most [`DESCRIPTION_MAX_CHARS`] chars.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Profile {
    /// The peer's name: mirror of `normalize(basename(cwd))`.
    pub personality: String,
    /// Every runtime the peer may be present on, without duplicates.
    pub runtimes: Vec<String>,
    /// The primary runtime (legacy `runtime` is read into it when it is missing).
    pub default_runtime: String,
    /// One-line description shown to every peer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The nature as written (`artificial`/`natural`/`absent`, legacy `human`/`scripted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intelligence: Option<String>,
    /// Text put before the first message of a fresh session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_prompt: Option<String>,
    /// Absent = warm agent; `"ephemeral"` = one fresh session per task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake_policy: Option<String>,
    /// Absent = yolo; `"gated"` is only ever written by a later feature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_mode: Option<String>,
    /// Public routing attributes, projected into the registry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Map<String, Value>>,
    /// Set when `create --worktree` made the folder as a git worktree (issue 32 item 8):
    /// `remove` and `rename` then remove and move it with git.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeRecord>,
    /// Every key this build does not know, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// The legacy `runtime` field as read (informational; never written).
    #[serde(skip)]
    pub legacy_runtime: Option<String>,
}

/// The personality a folder gives: `normalize(basename(cwd))` (spec 01 §3).
///
/// Errors: [`ProfileError::FolderName`] when the result is not a valid personality (or the
/// path has no final component).
pub fn personality_of(cwd: &Path) -> Result<String, ProfileError> {
    let base = crate::fsutil::file_name(cwd);
    let name = names::normalize(&base);
    if names::is_valid_personality(&name) {
        Ok(name)
    } else {
        Err(ProfileError::FolderName {
            cwd: cwd.to_path_buf(),
            normalized: name,
        })
    }
}

impl Profile {
    /// An empty profile named `personality` (no runtime yet).
    pub fn blank(personality: &str) -> Profile {
        Profile {
            personality: personality.to_string(),
            runtimes: Vec::new(),
            default_runtime: String::new(),
            description: None,
            intelligence: None,
            initial_prompt: None,
            wake_policy: None,
            approval_mode: None,
            interfaces: None,
            worktree: None,
            extra: Map::new(),
            legacy_runtime: None,
        }
    }

    /// Read `<cwd>/.iapeer/peer-profile.json`. A missing file is `Ok(None)`.
    ///
    /// In memory, `personality` is healed to the folder's name (when valid), a missing
    /// `default_runtime` is taken from legacy `runtime` (else the first of `runtimes`), the
    /// default runtime is added to `runtimes`, and `description` is clamped to one line.
    ///
    /// Errors: `Io` (unreadable), `Corrupt` (not a JSON object, or a known field of the wrong
    /// type), `NoRuntime` (no runtime named anywhere).
    pub fn read(cwd: &Path) -> Result<Option<Profile>, ProfileError> {
        let path = paths::peer::profile(cwd);
        let Some((mut profile, _)) = read_lenient(cwd)? else {
            return Ok(None);
        };
        profile.settle_runtimes(&path)?;
        Ok(Some(profile))
    }

    /// The `worktree` record of the profile in `cwd` (a peer made by `create --worktree`):
    /// `None` when there is none, or the profile is missing or cannot be read.
    pub fn worktree_record(cwd: &Path) -> Option<WorktreeRecord> {
        Profile::read(cwd).ok().flatten().and_then(|p| p.worktree)
    }

    /// [`Profile::read`], except that a valid `personality` is kept as written even when it
    /// differs from the folder's name (a peer the user or the original tool named by hand,
    /// e.g. `labbot` in `Peers/Old Lab Agent`; issue 11 item 2). This is the name the registry
    /// routes by; the folder's name stands in only when the written one is missing or invalid.
    ///
    /// Errors: as [`Profile::read`].
    pub fn read_keeping_name(cwd: &Path) -> Result<Option<Profile>, ProfileError> {
        let path = paths::peer::profile(cwd);
        let written = fields::read_object(&path)?
            .and_then(|m| m.get("personality")?.as_str().map(String::from))
            .filter(|n| names::is_valid_personality(n));
        let Some(mut profile) = Profile::read(cwd)? else {
            return Ok(None);
        };
        if let Some(name) = written {
            profile.personality = name;
        }
        if !names::is_valid_personality(&profile.personality) {
            return Err(ProfileError::FolderName {
                cwd: cwd.to_path_buf(),
                normalized: profile.personality,
            });
        }
        Ok(Some(profile))
    }

    /// Repair in the file only what is broken (`verify --fix`, issue 11 item 2): a missing
    /// `default_runtime` (taken from the legacy `runtime`, else the first of `runtimes`), a
    /// default runtime not listed in `runtimes`, a missing or invalid `personality` (the
    /// folder's name). Everything else, the legacy `runtime` mirror, a hand-chosen name and a
    /// package's long description included, is left as written. Returns one sentence per
    /// repair; the file is written (atomically, mode 0600) only when there is one.
    ///
    /// Errors: `Io`, `Corrupt` (a file that cannot be parsed is never overwritten).
    pub fn repair(cwd: &Path) -> Result<Vec<String>, ProfileError> {
        let path = paths::peer::profile(cwd);
        let Some((mut map, old)) = fields::read_object_text(&path)? else {
            return Ok(Vec::new());
        };
        let mut done = Vec::new();
        let text = |m: &Map<String, Value>, k: &str| {
            m.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        if text(&map, "personality").is_none_or(|n| !names::is_valid_personality(&n)) {
            if let Ok(name) = personality_of(cwd) {
                done.push(format!(
                    "set \"personality\" to the folder's name \"{name}\""
                ));
                map.insert("personality".into(), Value::from(name));
            }
        }
        let runtimes: Vec<String> = map
            .get("runtimes")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let default = match text(&map, "default_runtime") {
            Some(d) => Some(d),
            None => {
                let from = text(&map, "runtime").or_else(|| runtimes.first().cloned());
                if let Some(d) = &from {
                    done.push(format!("set \"default_runtime\" to \"{d}\""));
                    map.insert("default_runtime".into(), Value::from(d.clone()));
                }
                from
            }
        };
        if let Some(d) = default.filter(|d| !runtimes.contains(d)) {
            if map.get("runtimes").is_none_or(Value::is_array) {
                let mut list = vec![Value::from(d.clone())];
                list.extend(runtimes.iter().cloned().map(Value::from));
                map.insert("runtimes".into(), Value::Array(list));
                done.push(format!(
                    "listed the default runtime \"{d}\" in \"runtimes\""
                ));
            }
        }
        if !done.is_empty() {
            write(&path, Some(&old), &map)?;
        }
        Ok(done)
    }

    /// Read-merge-write: read the profile (a blank one when absent), apply `edit`, settle the
    /// invariants and write it atomically (mode 0600). Unknown keys are kept; legacy `runtime`
    /// is dropped (migrated into `default_runtime`); `personality` is set to the folder's name.
    /// Returns the profile as written.
    ///
    /// Errors: `FolderName` (the folder gives no valid name), `Io`, `Corrupt` (an existing
    /// file is never overwritten when it cannot be parsed), `NoRuntime` (after `edit` no
    /// runtime is named).
    pub fn update(cwd: &Path, edit: impl FnOnce(&mut Profile)) -> Result<Profile, ProfileError> {
        let rewrite = Profile::rewrite(cwd, edit)?;
        fsutil::write_atomic(&rewrite.path, rewrite.text.as_bytes(), fsutil::MODE_PRIVATE)
            .map_err(|e| {
                ProfileError::Io(fsutil::IoError::named(
                    "write",
                    "the peer profile ",
                    &rewrite.path,
                )(e))
            })?;
        Ok(rewrite.profile)
    }

    /// What [`Profile::update`] would write, without writing it (a caller that must write
    /// several files at once stages them first: `rename`).
    ///
    /// Errors: as [`Profile::update`], but for the write.
    pub fn rewrite(cwd: &Path, edit: impl FnOnce(&mut Profile)) -> Result<Rewrite, ProfileError> {
        let path = paths::peer::profile(cwd);
        let name = personality_of(cwd)?;
        let (read, base) = match read_lenient(cwd)? {
            Some((p, text)) => (Some(p), Some(text)),
            None => (None, None),
        };
        let mut profile = read.unwrap_or_else(|| Profile::blank(&name));
        edit(&mut profile);
        profile.personality = name;
        profile.settle_runtimes(&path)?;
        profile.description = profile.description.as_deref().map(clamp_description);
        profile.legacy_runtime = None;
        for key in fields::KNOWN_KEYS {
            profile.extra.remove(*key);
        }
        let doc = match serde_json::to_value(&profile) {
            Ok(Value::Object(map)) => map,
            Ok(_) => unreachable!("a struct serializes as an object"),
            Err(e) => return Err(write_error(&path, e)),
        };
        let text = keep::render(base.as_deref(), &doc).map_err(|e| write_error(&path, e))?;
        Ok(Rewrite {
            profile,
            text,
            base,
            path,
        })
    }

    /// The primary runtime.
    pub fn default_runtime(&self) -> &str {
        &self.default_runtime
    }

    /// True when `runtime` is declared in `runtimes`.
    pub fn declares(&self, runtime: &str) -> bool {
        self.runtimes.iter().any(|r| r == runtime)
    }

    /// The peer's nature: `intelligence` parsed with legacy spellings, else (absent or
    /// unknown) the default nature of the default runtime (spec 01 §4).
    pub fn nature(&self) -> Intelligence {
        self.intelligence
            .as_deref()
            .and_then(Intelligence::parse)
            .unwrap_or_else(|| Intelligence::default_for_runtime(&self.default_runtime))
    }

    /// True for `approval_mode: "gated"`: the peer launches without the runtime's
    /// permission-bypass flags and its permission prompts go to a human (spec 10 §4). Any
    /// other value (absent, `"yolo"`, unknown) is the default bypass mode.
    pub fn is_gated(&self) -> bool {
        self.approval_mode.as_deref() == Some(APPROVAL_MODE_GATED)
    }

    /// True for `wake_policy: "ephemeral"` (one fresh session per task, spec 05 §6).
    pub fn is_ephemeral(&self) -> bool {
        self.wake_policy.as_deref() == Some(WAKE_POLICY_EPHEMERAL)
    }

    /// The registry projection of this profile for a peer living in `cwd` (spec 01 §5).
    /// `intelligence` is the current term (`artificial`/`natural`/`absent`): a legacy
    /// spelling the profile keeps (`human`, `scripted`, written by the original tool) is
    /// projected as what it means, an absent one as the default nature's name, and an
    /// unknown one is copied as written (`verify` reports it).
    pub fn to_registry_peer(&self, cwd: &Path) -> RegistryPeer {
        RegistryPeer {
            personality: self.personality.clone(),
            default_runtime: self.default_runtime.clone(),
            runtimes: self.runtimes.clone(),
            description: self.description.clone().unwrap_or_default(),
            intelligence: match self.intelligence.as_deref() {
                Some(written) if Intelligence::parse(written).is_none() => written.to_string(),
                _ => self.nature().as_str().to_string(),
            },
            cwd: cwd.to_path_buf(),
            interfaces: self.interfaces.clone(),
        }
    }

    /// Fill `default_runtime` (legacy `runtime`, else the first runtime), drop duplicate
    /// runtimes and make sure the default is listed (first, when it was missing).
    fn settle_runtimes(&mut self, path: &Path) -> Result<(), ProfileError> {
        let mut seen = Vec::with_capacity(self.runtimes.len());
        for rt in self.runtimes.drain(..) {
            if !rt.is_empty() && !seen.contains(&rt) {
                seen.push(rt);
            }
        }
        self.runtimes = seen;
        if self.default_runtime.is_empty() {
            self.default_runtime = self
                .legacy_runtime
                .clone()
                .filter(|r| !r.is_empty())
                .or_else(|| self.runtimes.first().cloned())
                .ok_or_else(|| ProfileError::NoRuntime {
                    path: path.to_path_buf(),
                })?;
        }
        if !self.declares(&self.default_runtime) {
            self.runtimes.insert(0, self.default_runtime.clone());
        }
        Ok(())
    }
}

/// A profile as [`Profile::update`] would write it ([`Profile::rewrite`]).
#[derive(Debug, Clone)]
pub struct Rewrite {
    /// The profile as it would be written.
    pub profile: Profile,
    /// The file's new text.
    pub text: String,
    /// The file's text it was made from; `None` when there was no file.
    pub base: Option<String>,
    /// The profile file.
    pub path: PathBuf,
}

fn write_error(path: &Path, e: serde_json::Error) -> ProfileError {
    ProfileError::Io(fsutil::IoError::named("write", "the peer profile ", path)(
        io::Error::other(e),
    ))
}

/// Write profile document `doc` to `path` atomically (mode 0600), keeping the text of every
/// value unchanged since `old` ([`keep::render`]).
fn write(path: &Path, old: Option<&str>, doc: &Map<String, Value>) -> Result<(), ProfileError> {
    let text = keep::render(old, doc).map_err(|e| write_error(path, e))?;
    fsutil::write_atomic(path, text.as_bytes(), fsutil::MODE_PRIVATE).map_err(|e| {
        ProfileError::Io(fsutil::IoError::named("write", "the peer profile ", path)(
            e,
        ))
    })
}

/// Read and parse the file without requiring a runtime (`update` may be adding one); the
/// profile and the file's text.
fn read_lenient(cwd: &Path) -> Result<Option<(Profile, String)>, ProfileError> {
    let path = paths::peer::profile(cwd);
    let Some((map, text)) = fields::read_object_text(&path)? else {
        return Ok(None);
    };
    let mut profile = fields::from_map(map).map_err(|reason| ProfileError::Corrupt {
        path,
        reason: reason.to_string(),
    })?;
    if let Ok(name) = personality_of(cwd) {
        profile.personality = name;
    }
    profile.description = profile.description.as_deref().map(clamp_description);
    Ok(Some((profile, text)))
}

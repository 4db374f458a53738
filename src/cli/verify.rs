//! `iapeer verify [--json] [--fix]` (spec 07, spec 01 §5): check each profile against the
//! standard and the registry against the profiles; `--fix` rebuilds the registry from the
//! profiles (the profile wins) without losing peers: the folders the old registry names are
//! read even from a registry that no longer parses, a damaged registry is backed up first,
//! and every peer added, kept or dropped is reported. What a runtime package or the user
//! chose (a name other than the folder's, a long description, the original tool's legacy
//! `runtime` mirror) is a warning, never rewritten; `--fix` repairs in a profile only what is
//! broken ([`Profile::repair`], issue 11 item 2). `--fix` also takes the original tool's
//! approval hook out of each peer folder ([`crate::runtime::original_hook`], issue 30 item 7).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::error::fail;
use super::parse::Invocation;
use super::spec::flags;
use super::{json_line, paths, print, CliError, CliResult};
use crate::paths::{peer, Paths};
use crate::profile::{self, Profile};
use crate::registry::{Registry, RegistryPeer};

/// One problem in the `verify --json` document.
#[derive(Serialize)]
struct ProblemDoc<'a> {
    peer: &'a str,
    problem: &'a str,
}

/// One warning in the `verify --json` document.
#[derive(Serialize)]
struct WarningDoc<'a> {
    peer: &'a str,
    warning: &'a str,
}

/// One change `--fix` made, in the `verify --json` document.
#[derive(Serialize)]
struct ChangeDoc<'a> {
    peer: &'a str,
    change: &'a str,
}

/// The `verify --json` document.
#[derive(Serialize)]
struct VerifyDoc<'a> {
    ok: bool,
    peers: usize,
    fixed: bool,
    changes: Vec<ChangeDoc<'a>>,
    problems: Vec<ProblemDoc<'a>>,
    warnings: Vec<WarningDoc<'a>>,
}

/// Run `iapeer verify`.
pub fn run(inv: &Invocation) -> CliResult {
    check(inv.flag(flags::FIX), inv.flag(flags::JSON), false)
}

/// Verify (and with `fix` rebuild) the registry and profiles, printing the outcome (one
/// JSON document with `json`; for `doctor`, a line that does not read as the whole verdict);
/// `Err` (exit 1) when a problem is left.
pub fn check(fix: bool, json: bool, doctor: bool) -> CliResult {
    let paths = paths()?;
    let (mut changes, mut left_out) = (Vec::new(), Vec::new());
    if fix {
        (changes, left_out) = rebuild(&paths)?;
        changes.extend(repair_worktrees(&paths));
    }
    let Findings {
        problems,
        warnings,
        peers,
    } = findings(&paths, left_out);
    if json {
        let doc = VerifyDoc {
            ok: problems.is_empty(),
            peers,
            fixed: fix,
            changes: changes
                .iter()
                .map(|(p, what)| ChangeDoc {
                    peer: p,
                    change: what,
                })
                .collect(),
            problems: problems
                .iter()
                .map(|(p, what)| ProblemDoc {
                    peer: p,
                    problem: what,
                })
                .collect(),
            warnings: warnings
                .iter()
                .map(|(p, what)| WarningDoc {
                    peer: p,
                    warning: what,
                })
                .collect(),
        };
        print(&format!("{}\n", json_line(&doc)))?;
    } else {
        // A finding quotes what a profile or the registry holds (a name, a description, a
        // folder), which other tools write: each is one line with its controls visible.
        let show = |p: &str, what: &str| {
            (
                crate::visible::line(p).into_owned(),
                crate::visible::line(what).into_owned(),
            )
        };
        let mut out = String::new();
        for (p, what) in &changes {
            let (p, what) = show(p, what);
            out.push_str(&format!("fixed {p}: {what}\n"));
        }
        for (p, what) in &warnings {
            let (p, what) = show(p, what);
            out.push_str(&format!("warning: {p}: {what}\n"));
        }
        if problems.is_empty() && doctor {
            out.push_str(&format!(
                "registry and profiles: {peers} peer(s), no problems\n"
            ));
        } else if problems.is_empty() {
            out.push_str(&format!(
                "ok: {peers} peer(s), no problems{}\n",
                if fix {
                    " (registry rebuilt from the profiles)"
                } else {
                    ""
                }
            ));
        } else {
            for (p, what) in &problems {
                let (p, what) = show(p, what);
                out.push_str(&format!("{p}: {what}\n"));
            }
            if !fix && problems.iter().any(|(_, what)| !has_own_advice(what)) {
                out.push_str(&format!("run {FIX_ADVICE}\n"));
            }
        }
        print(&out)?;
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Exit(1))
    }
}

/// What to do about a problem that does not say it itself (after "run ").
pub const FIX_ADVICE: &str = "iapeer verify --fix to rebuild the registry from the profiles (an \
    error inside a profile is fixed by editing that file)";

/// Whether a problem's own words say what to do (a copied or moved folder), so that
/// [`FIX_ADVICE`] does not apply to it.
pub fn has_own_advice(what: &str) -> bool {
    what.contains(COPIED) || what.contains(crate::profile::FOLDER_GONE)
}

/// What `verify` finds without changing anything (`doctor --json` reads it too): the
/// problems and warnings as (peer, what) pairs, and how many peers the registry has.
pub struct Findings {
    /// Each problem once (a copied folder is found by two checks).
    pub problems: Vec<(String, String)>,
    /// What a package or the user chose that is not the standard's.
    pub warnings: Vec<(String, String)>,
    /// The registry's peers (0 when it does not load).
    pub peers: usize,
}

/// The [`Findings`] of the registry and profiles under `paths`, with `left_out` (folders a
/// rebuild could not register: out of the registry now, so no check sees them) as problems.
pub fn findings(paths: &Paths, mut left_out: Vec<(String, String)>) -> Findings {
    let (mut problems, warnings) = find_problems(paths);
    problems.append(&mut left_out);
    let mut seen = std::collections::HashSet::new();
    problems.retain(|p| seen.insert(p.clone()));
    let peers = Registry::load(paths).map(|r| r.peers.len()).unwrap_or(0);
    Findings {
        problems,
        warnings,
        peers,
    }
}

/// The working folders a registry file names, read leniently: from the parsed registry when it
/// loads, else every `"cwd": "<string>"` found in its text (so a stray comma loses no peer).
pub fn registry_folders(text: &str) -> Vec<PathBuf> {
    /// The registry's shape as far as folders go; each entry is read leniently.
    #[derive(serde::Deserialize)]
    struct Folders {
        peers: Vec<Value>,
    }
    if let Ok(f) = serde_json::from_str::<Folders>(text) {
        return f
            .peers
            .iter()
            .filter_map(|p| p.get("cwd")?.as_str().map(PathBuf::from))
            .collect();
    }
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("\"cwd\"") {
        rest = &rest[at + 5..];
        let after_colon = rest.trim_start().strip_prefix(':').map(str::trim_start);
        if let Some(s) = after_colon.filter(|s| s.starts_with('"')) {
            if let Some(Ok(cwd)) = serde_json::Deserializer::from_str(s)
                .into_iter::<String>()
                .next()
            {
                out.push(PathBuf::from(cwd));
            }
        }
    }
    out
}

/// Folders with a live profile under `<root>/peers/` (a removed peer's folder keeps its
/// profile only as `peer-profile.removed.json`, so it is not found here).
fn orphan_candidates(paths: &Paths) -> Vec<PathBuf> {
    std::fs::read_dir(paths.peers_dir())
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| peer::profile(p).is_file())
                .collect()
        })
        .unwrap_or_default()
}

/// Findings per peer: `(peer, sentence)`.
type PerPeer = Vec<(String, String)>;

/// The problems (errors) and warnings of the registry and every profile, per peer.
fn find_problems(paths: &Paths) -> (PerPeer, PerPeer) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let registry = match Registry::load(paths) {
        Ok(r) => r,
        Err(e) => {
            out.push(("registry".to_string(), e.to_string()));
            Registry::default()
        }
    };
    for entry in &registry.peers {
        // The class as installed: a manifest's terminal agent takes artificial peers only.
        let class_of = |rt: &str| crate::runtime::class_installed(paths, rt);
        let found: profile::Findings = profile::check(&entry.cwd, &class_of);
        for p in found.errors {
            out.push((entry.personality.clone(), p));
        }
        for w in found.warnings {
            warnings.push((entry.personality.clone(), w));
        }
        if let Ok(Some(prof)) = Profile::read_keeping_name(&entry.cwd) {
            if let Some(record) = &prof.worktree {
                let state = crate::worktree::state(&entry.cwd, record);
                if let Some(problem) = state.problem(&entry.cwd, record) {
                    out.push((entry.personality.clone(), problem));
                }
            }
            let projected = prof.to_registry_peer(&entry.cwd);
            let only_description = RegistryPeer {
                description: entry.description.clone(),
                ..projected.clone()
            } == *entry;
            let legacy_term = RegistryPeer {
                intelligence: entry.intelligence.clone(),
                ..projected.clone()
            } == *entry
                && crate::names::Intelligence::parse(&entry.intelligence)
                    .is_some_and(|n| n.as_str() == projected.intelligence);
            if projected != *entry && legacy_term {
                warnings.push((
                    entry.personality.clone(),
                    format!(
                        "the registry writes the legacy intelligence \"{}\" (`iapeer verify \
                         --fix` writes \"{}\")",
                        entry.intelligence, projected.intelligence
                    ),
                ));
            } else if projected != *entry && only_description && cut_by_the_original(entry) {
                warnings.push((
                    entry.personality.clone(),
                    "the registry's copy of the description differs from the profile's \
                     (`iapeer verify --fix` refreshes it)"
                        .into(),
                ));
            } else if projected != *entry {
                out.push((
                    entry.personality.clone(),
                    "the registry entry differs from the profile (the profile wins)".into(),
                ));
            }
        }
    }
    for folder in orphan_candidates(paths) {
        if let Ok(Some(prof)) = Profile::read_keeping_name(&folder) {
            if !registry.peers.iter().any(|p| p.cwd == folder) {
                let problem = match registry.find(&prof.personality) {
                    Some(owner) => copied_profile(&folder, &owner.cwd, &prof.default_runtime),
                    None => format!(
                        "has a profile in {} but is not registered",
                        folder.display()
                    ),
                };
                out.push((prof.personality, problem));
            }
        }
    }
    (out, warnings)
}

/// `--fix` for worktree peers (issue 32 item 8): a worktree folder moved without git gets
/// git's record of it repaired (`git worktree repair`). Returns the changes made; what is
/// left is reported as a problem by [`find_problems`].
fn repair_worktrees(paths: &Paths) -> PerPeer {
    let Ok(registry) = Registry::load(paths) else {
        return Vec::new();
    };
    let mut changes = Vec::new();
    for entry in &registry.peers {
        let Some(record) = Profile::worktree_record(&entry.cwd) else {
            continue;
        };
        if crate::worktree::state(&entry.cwd, &record) != crate::worktree::State::Moved {
            continue;
        }
        let repo = crate::worktree::Repository::at(&record.repository);
        match repo.repair(&entry.cwd) {
            Ok(()) => changes.push((
                entry.personality.clone(),
                format!(
                    "repaired git's record of the worktree {} (git worktree repair)",
                    entry.cwd.display()
                ),
            )),
            Err(e) => log::warn!("verify --fix: {}: {e}", entry.personality),
        }
    }
    changes
}

/// What every problem [`copied_profile`] describes says: `--fix` cannot decide it.
const COPIED: &str = "holds a copy of the profile of the peer in";

/// The problem of `folder`, whose profile (default runtime `runtime`) names a peer
/// registered at `owner` (a copied peer folder): what `--fix` cannot decide, and the two
/// ways out.
fn copied_profile(folder: &Path, owner: &Path, runtime: &str) -> String {
    format!(
        "{} {COPIED} {} — to make it a peer of its own, delete {} and run iapeer init {} \
         --runtime {runtime}; or delete that folder",
        folder.display(),
        owner.display(),
        peer::profile(folder).display(),
        folder.display()
    )
}

/// Whether the registry's description of `entry` is a long profile description cut as the
/// original tool cuts it (its first 450 characters, lines kept): drift of the projection,
/// not damage, so a warning.
fn cut_by_the_original(entry: &RegistryPeer) -> bool {
    let written = std::fs::read_to_string(peer::profile(&entry.cwd))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("description")?.as_str().map(String::from));
    written.is_some_and(|d| {
        d.chars().count() > profile::DESCRIPTION_MAX_CHARS && d.starts_with(&entry.description)
    })
}

/// Keep a damaged registry file beside it (`peers-profiles.json.corrupt-<ms>.bak`): it may
/// hold what the profiles cannot tell. Returns the copy's path.
fn back_up_damaged(paths: &Paths) -> Result<PathBuf, CliError> {
    let bak = paths.root().join(format!(
        "peers-profiles.json.corrupt-{}.bak",
        crate::clock::now_ms()
    ));
    std::fs::copy(paths.registry(), &bak).map_err(|e| {
        fail(format!(
            "cannot back up the damaged registry to {}: {e}",
            bak.display()
        ))
    })?;
    eprintln!(
        "iapeer verify: the damaged registry was saved as {}",
        bak.display()
    );
    Ok(bak)
}

/// `verify --fix`'s repairs of one peer folder (`label` names it): the original tool's
/// approval hook removed, the profile repaired. Returns what was changed; a failure is logged
/// (what is still wrong is listed as a problem).
fn repair_folder(folder: &Path, label: &str) -> PerPeer {
    let mut changes = Vec::new();
    match crate::runtime::original_hook::remove(folder) {
        Ok(files) => changes.extend(files.iter().map(|f| {
            (
                label.to_string(),
                format!(
                    "removed the original tool's approval hook from {} (iapeer gives a \
                     gated session its own at launch)",
                    f.display()
                ),
            )
        })),
        Err(e) => log::warn!("verify --fix: {label}: {e}"),
    }
    match Profile::repair(folder) {
        Ok(done) => changes.extend(done.into_iter().map(|d| (label.to_string(), d))),
        // Nothing was fixed: what is still wrong with it is listed below as a problem.
        Err(e) => log::debug!("verify --fix: {label}: the profile was not repaired: {e}"),
    }
    changes
}

/// The folders a rebuilt registry is made from: those the registry file (`text`, even
/// damaged) names, then the folders with a live profile under `<root>/peers/` it does not.
fn folders_to_register(paths: &Paths, text: &str) -> Vec<PathBuf> {
    let mut folders = registry_folders(text);
    for f in orphan_candidates(paths) {
        if !folders.contains(&f) {
            folders.push(f);
        }
    }
    folders
}

/// Rebuild the registry from the profiles. Returns the changes made, and the folders that
/// could not be registered (with why), per peer.
fn rebuild(paths: &Paths) -> Result<(PerPeer, PerPeer), CliError> {
    let text = crate::fsutil::read_optional(&paths.registry())
        .map_err(fail)?
        .unwrap_or_default();
    let old = Registry::load(paths).ok();
    let damaged = match old {
        None if !text.trim().is_empty() => Some(back_up_damaged(paths)?),
        _ => None,
    };
    let old_entry = |cwd: &Path| -> Option<RegistryPeer> {
        old.as_ref()?.peers.iter().find(|p| p.cwd == cwd).cloned()
    };
    let folders = folders_to_register(paths, &text);
    let mut rebuilt = Registry::default();
    let mut changes = Vec::new();
    let mut left_out = Vec::new();
    for folder in folders {
        let label =
            profile::personality_of(&folder).unwrap_or_else(|_| folder.display().to_string());
        if !folder.is_dir() {
            changes.push((
                label,
                format!("dropped: its folder {} no longer exists", folder.display()),
            ));
            continue;
        }
        if !peer::profile(&folder).is_file() {
            changes.push((
                label,
                format!(
                    "dropped: {} has no peer profile (removed?)",
                    folder.display()
                ),
            ));
            continue;
        }
        let label = Profile::read_keeping_name(&folder)
            .ok()
            .flatten()
            .map_or(label, |p| p.personality);
        changes.extend(repair_folder(&folder, &label));
        let read = Profile::read_keeping_name(&folder).and_then(|p| {
            p.ok_or_else(|| crate::profile::ProfileError::NoRuntime {
                path: peer::profile(&folder),
            })
        });
        let entry = match read {
            Ok(p) => p.to_registry_peer(&folder),
            Err(e) => match old_entry(&folder) {
                Some(kept) => {
                    changes.push((
                        kept.personality.clone(),
                        format!("kept the old registry entry: the profile cannot be read ({e})"),
                    ));
                    kept
                }
                None => {
                    left_out.push((label, format!("not registered: {e}")));
                    continue;
                }
            },
        };
        if let Some(owner) = rebuilt.find(&entry.personality) {
            let runtime = entry.default_runtime.clone();
            left_out.push((
                entry.personality.clone(),
                copied_profile(&folder, &owner.cwd, &runtime),
            ));
            continue;
        }
        if old
            .as_ref()
            .and_then(|o| o.find(&entry.personality))
            .is_none()
        {
            changes.push((
                entry.personality.clone(),
                format!("registered from {}", folder.display()),
            ));
        }
        rebuilt.upsert(entry);
    }
    Registry::replace(paths, rebuilt)?;
    if let Some(bak) = damaged {
        // Folders elsewhere (`create --path`) are known only from the registry itself.
        changes.push((
            "registry".into(),
            format!(
                "rebuilt from the profiles under {} and the folders the damaged file still \
                 names ({}); a peer kept elsewhere that is missing now: run iapeer init in its \
                 folder",
                paths.peers_dir().display(),
                bak.display()
            ),
        ));
    }
    Ok((changes, left_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_survive_a_damaged_registry() {
        let good = r#"{"version":2,"peers":[{"personality":"a","cwd":"/w/a"},{"personality":"b","cwd":"/w/b"}]}"#;
        assert_eq!(
            registry_folders(good),
            vec![PathBuf::from("/w/a"), PathBuf::from("/w/b")]
        );
        let stray_comma = "{\"version\":2,\"peers\":[{\"personality\":\"a\",\"cwd\":\"/w/a\",},{\"cwd\" : \"/w/My \\\"Project\\\"\"}]}";
        assert_eq!(
            registry_folders(stray_comma),
            vec![PathBuf::from("/w/a"), PathBuf::from("/w/My \"Project\"")]
        );
        assert!(registry_folders("").is_empty());
    }
}

//! `create` and `init` (spec 07 "Peers"): make a folder a peer.

use std::path::Path;

use serde_json::Value;

use super::{choose_runtime, installed_agents, PeerError};
use crate::fsutil::{self, MODE_PRIVATE};
use crate::names::{self, Intelligence};
use crate::paths::{peer, Paths};
use crate::profile::{self, Profile, WorktreeRecord, DESCRIPTION_MAX_CHARS};
use crate::registry::{Registry, RegistryError, RegistryPeer};
use crate::runtime::{self, RuntimeKind};

/// What the doctrine file of a new peer says until its owner writes it.
const DOCTRINE_STUB: &str = "<!-- Personal doctrine of this peer: who it is, what it does, how it works with the team.\n     iapeer puts this file into the peer's system prompt at every start. Write plain markdown below. -->\n";

/// Options shared by [`create_peer`] and [`init_peer`]; `None` keeps what the folder's profile
/// says (or the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct InitOptions<'a> {
    /// The default runtime to use (`--runtime`); else the profile's, else [`choose_runtime`].
    pub runtime: Option<&'a str>,
    /// One line of at most [`DESCRIPTION_MAX_CHARS`] characters.
    pub description: Option<&'a str>,
    /// `artificial`, `natural` (or `human`) or `absent`; else the profile's, else the
    /// runtime's default.
    pub intelligence: Option<&'a str>,
    /// Whether the daemon's agent MCP entries carry the bearer token (claude setup).
    pub bearer: bool,
}

/// A peer that now exists.
#[derive(Debug, Clone)]
pub struct Initialized {
    /// Its registry entry, as stored.
    pub peer: RegistryPeer,
    /// `Some(runtime)` when its default runtime is a router runtime: an always-on peer the
    /// caller may ask a running daemon to start now (it starts with the daemon anyway).
    pub always_on: Option<String>,
}

/// `create`: make `folder` (default `<root>/peers/<name>`; absolute) for a new peer `name`
/// and initialize it. Everything is checked before the folder is made; a folder made here is
/// removed again when the initialization fails.
///
/// Errors: [`PeerError::InvalidName`], [`PeerError::NameNotReachable`] and
/// [`PeerError::FolderGivesOtherName`] for a name no folder can carry; [`PeerError::NameTaken`];
/// a runtime that cannot be used; `Io { action: "create" }`; anything [`init_peer`] returns.
pub fn create_peer(
    paths: &Paths,
    name: &str,
    folder: Option<&Path>,
    opts: &InitOptions,
) -> Result<Initialized, PeerError> {
    let folder = new_peer_folder(paths, name, folder, opts)?;
    let existed = folder.exists();
    fsutil::ensure_dir(&folder).map_err(fsutil::IoError::at("create", &folder))?;
    let folder = folder.canonicalize().unwrap_or(folder);
    init_folder(paths, &folder, opts, None).inspect_err(|_| {
        // A refused create leaves nothing behind: the folder was made for this peer.
        if !existed {
            let _ = std::fs::remove_dir_all(&folder);
        }
    })
}

/// The folder `create` makes for the new peer `name` (`folder`, else `<root>/peers/<name>`),
/// once everything that can be refused before it is made was checked: the name, the folder's
/// name, the runtime (for a folder that does not exist yet), the name taken by another folder.
///
/// Errors: as [`create_peer`] before it makes the folder.
pub(super) fn new_peer_folder(
    paths: &Paths,
    name: &str,
    folder: Option<&Path>,
    opts: &InitOptions,
) -> Result<std::path::PathBuf, PeerError> {
    check_name(name)?;
    let folder = match folder {
        Some(p) => p.to_path_buf(),
        None => paths.peers_dir().join(name),
    };
    let base = crate::fsutil::file_name(&folder);
    let derived = names::normalize(&base);
    if derived != name {
        return Err(PeerError::FolderGivesOtherName {
            base,
            derived,
            name: name.to_string(),
        });
    }
    // Refuse a taken name or an unusable runtime before creating anything, so no empty
    // folder is left behind (an existing folder may hold a profile that names its runtime).
    if !folder.exists() {
        choose_runtime(paths, &folder, opts.runtime)?;
    }
    let registry = Registry::load(paths)?;
    if let Some(other) = registry.find(name) {
        let same = folder.canonicalize().is_ok_and(|f| f == other.cwd) || folder == other.cwd;
        if !same {
            return Err(PeerError::NameTaken {
                name: name.to_string(),
                at: other.cwd.clone(),
            });
        }
    }
    Ok(folder)
}

/// Whether `name` can name a new peer at all: it matches the personality pattern and some
/// folder name normalizes to it (spec 01 §3). [`create_peer`] checks this first.
///
/// Errors: [`PeerError::InvalidName`], [`PeerError::NameNotReachable`].
pub fn check_name(name: &str) -> Result<(), PeerError> {
    if !names::is_valid_personality(name) {
        return Err(PeerError::InvalidName(name.to_string()));
    }
    let canonical = names::normalize(name);
    if canonical != name {
        return Err(PeerError::NameNotReachable {
            name: name.to_string(),
            canonical,
        });
    }
    Ok(())
}

/// `init`: turn the existing `folder` (absolute) into a peer named after it, or bring its
/// profile up to date. A profile set aside by `remove` is restored first.
///
/// Errors: [`PeerError::NotAFolder`], [`PeerError::HoldsOtherPeer`],
/// [`PeerError::FolderNameTaken`], a runtime or intelligence that cannot be used, a bad
/// description, [`PeerError::Setup`], and I/O, profile or registry failures.
pub fn init_peer(
    paths: &Paths,
    folder: &Path,
    opts: &InitOptions,
) -> Result<Initialized, PeerError> {
    if !folder.is_dir() {
        return Err(PeerError::NotAFolder(folder.to_path_buf()));
    }
    let folder = folder.canonicalize().unwrap_or(folder.to_path_buf());
    init_folder(paths, &folder, opts, None)
}

/// Make `folder` (absolute, existing) a peer named after it: `init`'s work. `worktree` is
/// written into its profile when `create --worktree` made the folder.
pub(super) fn init_folder(
    paths: &Paths,
    folder: &Path,
    opts: &InitOptions,
    worktree: Option<&WorktreeRecord>,
) -> Result<Initialized, PeerError> {
    let name = profile::personality_of(folder)?;
    let removed = peer::removed_profile(folder);
    if !peer::profile(folder).exists() && removed.is_file() {
        // A peer removed earlier comes back with its own profile (description, keys…).
        std::fs::rename(&removed, peer::profile(folder))
            .map_err(fsutil::IoError::at("restore", &removed))?;
    }
    if let Some(written) = raw_personality(folder) {
        if written != name {
            return Err(PeerError::HoldsOtherPeer {
                folder: folder.to_path_buf(),
                written,
            });
        }
    }
    let registry = Registry::load(paths)?;
    let existing = Profile::read(folder)?;
    if let Some(other) = registry.find(&name) {
        let moved = existing.is_some() && !holds_peer(&other.cwd, &name);
        if other.cwd != folder && !moved {
            return Err(PeerError::FolderNameTaken {
                name,
                at: other.cwd.clone(),
            });
        }
    }
    let runtime = match (opts.runtime, &existing) {
        (None, Some(p)) => p.default_runtime().to_string(),
        (requested, _) => choose_runtime(paths, folder, requested)?,
    };
    let kind = runtime::adapter_for(paths, &runtime)
        .map_err(PeerError::Runtime)?
        .kind();
    let nature = nature_of(paths, opts.intelligence, existing.as_ref(), &runtime)?;
    if let Some(d) = opts.description {
        if d.contains('\n') || d.chars().count() > DESCRIPTION_MAX_CHARS {
            return Err(PeerError::BadDescription);
        }
    }
    let mut declared = vec![runtime.clone()];
    if kind == RuntimeKind::Agent {
        declared.extend(installed_agents(paths).into_iter().map(String::from));
    }
    let profile = Profile::update(folder, |p| {
        if p.default_runtime.is_empty() {
            p.default_runtime = runtime.clone();
        }
        for rt in &declared {
            if !p.declares(rt) {
                p.runtimes.push(rt.clone());
            }
        }
        if let Some(d) = opts.description {
            p.description = Some(d.to_string());
        }
        if p.description.is_none() && is_builtin_notifier(paths, &runtime) {
            // A service peer of the built-in notifier: its call card tells agents how to call it.
            let role = crate::notifier::trigger::Role::of_personality(&name);
            p.description = Some(crate::notifier::call::call_card(role).to_string());
        }
        if opts.intelligence.is_some() || p.intelligence.is_none() {
            p.intelligence = Some(nature.as_str().to_string());
        }
        if let Some(w) = worktree {
            p.worktree = Some(w.clone());
        }
    })?;
    equip_folder(folder, &name, &profile.runtimes, opts.bearer)?;
    let entry = profile.to_registry_peer(folder);
    let stored = entry.clone();
    Registry::update(paths, |r| -> Result<(), RegistryError> {
        r.upsert(stored);
        Ok(())
    })?;
    // The peer exists: the memory provider equips its agent runtimes (never blocks the birth).
    crate::memory::provision::at_birth(paths, folder, &name, &profile.runtimes);
    Ok(Initialized {
        peer: entry,
        always_on: (kind == RuntimeKind::Router).then_some(runtime),
    })
}

/// The nature a peer gets (`intelligence` asked for, else the profile's, else the runtime's
/// default), checked against every runtime it will have: `runtime` and those `existing`
/// declares.
///
/// Errors: [`PeerError::UnknownIntelligence`], [`PeerError::IntelligenceNotAllowed`].
fn nature_of(
    paths: &Paths,
    intelligence: Option<&str>,
    existing: Option<&Profile>,
    runtime: &str,
) -> Result<Intelligence, PeerError> {
    let nature = match intelligence {
        Some(i) => {
            Intelligence::parse(i).ok_or_else(|| PeerError::UnknownIntelligence(i.to_string()))?
        }
        None => existing
            .map(|p| p.nature())
            .unwrap_or_else(|| Intelligence::default_for_runtime(runtime)),
    };
    // Every runtime the peer will have must take its nature, not only the one named now
    // (an echo peer given `--runtime human --intelligence natural` would run on echo as a
    // natural peer, which no send accepts).
    let already = existing
        .iter()
        .flat_map(|p| p.runtimes.iter().map(String::as_str));
    if let Some(rt) = std::iter::once(runtime)
        .chain(already)
        .find(|rt| !nature.allowed_in(runtime::class_installed(paths, rt)))
    {
        return Err(PeerError::IntelligenceNotAllowed {
            nature,
            runtime: rt.to_string(),
        });
    }
    Ok(nature)
}

/// The files a peer's folder gets at `init` (the doctrine stub when missing, a `launch.env`
/// stub per runtime) and each runtime's setup of it.
fn equip_folder(
    folder: &Path,
    name: &str,
    runtimes: &[String],
    bearer: bool,
) -> Result<(), PeerError> {
    let doctrine = peer::doctrine(folder);
    if !doctrine.exists() {
        write_private(&doctrine, DOCTRINE_STUB)?;
    }
    for rt in runtimes {
        write_launch_env_stub(folder, rt)?;
    }
    for rt in runtimes {
        runtime::setup_peer(rt, folder, name, bearer).map_err(PeerError::Setup)?;
    }
    Ok(())
}

/// Whether `folder` still holds the peer `name`: its profile is there and names it. A peer
/// folder moved by hand leaves none behind, so `init` in its new place re-points the
/// registry (issue 30 item 6) instead of refusing the name as taken.
fn holds_peer(folder: &Path, name: &str) -> bool {
    peer::profile(folder).is_file() && profile::personality_of(folder).is_ok_and(|n| n == name)
}

/// Write the `launch.env` stub of runtime `rt` in `folder` unless the file exists (spec 01
/// `launch.env`).
///
/// Errors: `Io { action: "write" }` naming the file.
pub fn write_launch_env_stub(folder: &Path, rt: &str) -> Result<(), PeerError> {
    let env = peer::launch_env(folder, rt);
    if env.exists() {
        return Ok(());
    }
    write_private(&env, &crate::launch_env::stub(rt))
}

fn write_private(path: &Path, text: &str) -> Result<(), PeerError> {
    fsutil::write_atomic(path, text.as_bytes(), MODE_PRIVATE)
        .map_err(fsutil::IoError::at("write", path))?;
    Ok(())
}

/// The `personality` field exactly as written in the folder's profile, if any.
fn raw_personality(folder: &Path) -> Option<String> {
    let text = std::fs::read_to_string(peer::profile(folder)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v.get("personality")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// True when `runtime` is the built-in `notifier` (no installed package manifest replaces it).
fn is_builtin_notifier(paths: &Paths, runtime: &str) -> bool {
    runtime == crate::runtime::notifier::NAME && !paths.runtime_manifest(runtime).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(name: &str, folder: Option<&Path>) -> PeerError {
        let (_root, paths) = Paths::temp();
        let opts = InitOptions {
            runtime: Some("echo"),
            ..InitOptions::default()
        };
        let err = create_peer(&paths, name, folder, &opts).unwrap_err();
        assert!(
            !paths.peers_dir().join(name).exists(),
            "a refused create leaves no folder"
        );
        err
    }

    #[test]
    fn create_refuses_names_no_folder_can_carry_with_typed_errors() {
        assert!(
            matches!(refusal("Bad Name!", None), PeerError::InvalidName(n) if n == "Bad Name!")
        );
        let folder = std::env::temp_dir().join("some-other-folder");
        match refusal("bob", Some(&folder)) {
            PeerError::FolderGivesOtherName {
                base,
                derived,
                name,
            } => {
                assert_eq!((base.as_str(), name.as_str()), ("some-other-folder", "bob"));
                assert_eq!(derived, names::normalize("some-other-folder"));
            }
            e => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn create_refuses_an_invalid_runtime_before_making_the_folder() {
        let (_root, paths) = Paths::temp();
        let opts = InitOptions {
            runtime: Some("Not A Runtime"),
            ..InitOptions::default()
        };
        let err = create_peer(&paths, "bob", None, &opts).unwrap_err();
        assert!(matches!(err, PeerError::InvalidRuntime(_)), "{err:?}");
        assert!(err
            .to_string()
            .starts_with("invalid runtime \"Not A Runtime\""));
        assert!(!paths.peers_dir().join("bob").exists());
    }

    #[test]
    fn init_refuses_a_path_that_is_not_a_folder() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("bob");
        std::fs::write(&file, "").unwrap();
        let err = init_peer(&Paths::at(root.path()), &file, &InitOptions::default()).unwrap_err();
        assert!(matches!(&err, PeerError::NotAFolder(p) if *p == file));
        assert_eq!(
            err.to_string(),
            format!("{} is not a folder", file.display())
        );
    }
}

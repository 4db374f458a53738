//! `rename <old> <new>` (spec 07 "Peers"): a peer is named after its folder (spec 01 §3), so
//! renaming it moves its folder to `<parent>/<new>`, moves its Claude Code history folder
//! with it (so `--continue` still finds its conversation), rewrites the profile and the
//! registry entry, redoes each runtime's setup for the new folder, and renames the peer in
//! every timer/watcher trigger that names it. Every step before the
//! registry is rolled back when a later one fails. Whether the peer is live is the caller's
//! business (the CLI asks the daemon).

use std::io;
use std::path::{Path, PathBuf};

use super::{check_name, PeerError};
use crate::markers::Markers;
use crate::names::Identity;
use crate::paths::Paths;
use crate::profile::Profile;
use crate::registry::{Registry, RegistryError, RegistryPeer};
use crate::runtime::{self, claude_paths};

/// What [`rename_peer`] did.
#[derive(Debug)]
pub struct Renamed {
    /// The registry entry as written (new name, new folder).
    pub peer: RegistryPeer,
    /// The folder before the move.
    pub from: PathBuf,
    /// The Claude Code history folder moved, if any: (from, to).
    pub history: Option<(PathBuf, PathBuf)>,
    /// Follow-up steps that failed without undoing the rename (each names what to do).
    pub warnings: Vec<String>,
    /// The peers whose timer/watcher triggers named the old name (now the new one): the
    /// running services must read them again.
    pub triggers_in: Vec<String>,
}

/// The folder a peer named `new` gets when renamed from `old_cwd`: a sibling (pure).
pub fn renamed_folder(old_cwd: &Path, new: &str) -> Option<PathBuf> {
    Some(old_cwd.parent()?.join(new))
}

/// A rename that passed every check: what moves where.
#[derive(Debug)]
pub struct RenamePlan {
    /// The registry entry of the peer.
    entry: RegistryPeer,
    /// Its folder now.
    from: PathBuf,
    /// Its folder after the rename.
    to: PathBuf,
    /// Claude Code's history folder and where it goes, when there is one.
    history: Option<(PathBuf, PathBuf)>,
}

/// Check that `old` can be renamed to `new`, changing nothing (the CLI asks this before it
/// ends a live peer's sessions).
///
/// Errors: the new name is invalid ([`PeerError::InvalidName`],
/// [`PeerError::NameNotReachable`]), `old` is not registered ([`PeerError::NotRegistered`]),
/// `new` is taken ([`PeerError::NameTaken`]), the folder is missing or the new folder or
/// history folder exists ([`PeerError::Rename`]), the registry cannot be read.
pub fn plan_rename(paths: &Paths, old: &str, new: &str) -> Result<RenamePlan, PeerError> {
    check_name(new)?;
    let registry = Registry::load(paths)?;
    let entry = registry
        .find(old)
        .cloned()
        .ok_or_else(|| PeerError::NotRegistered(old.to_string()))?;
    if old == new {
        return Err(PeerError::Rename(format!(
            "peer \"{old}\" already has that name — choose another one"
        )));
    }
    if let Some(other) = registry.find(new) {
        return Err(PeerError::NameTaken {
            name: new.to_string(),
            at: other.cwd.clone(),
        });
    }
    let from = entry.cwd.clone();
    let to = renamed_folder(&from, new).ok_or_else(|| {
        PeerError::Rename(format!(
            "{} has no parent folder to rename in",
            from.display()
        ))
    })?;
    if !from.is_dir() {
        return Err(PeerError::Rename(format!(
            "the folder of peer \"{old}\" ({}) is missing — run iapeer verify",
            from.display()
        )));
    }
    if to.exists() {
        return Err(PeerError::Rename(format!(
            "{} already exists — move it away, or choose another name",
            to.display()
        )));
    }
    // Claude Code's history folder, found while the old folder still resolves.
    let history = match (
        claude_paths::transcript_dir(&from),
        claude_paths::computed_project_dir(&real_parent(&from).join(new)),
    ) {
        (Some(h), Some(target)) => {
            if target.exists() {
                return Err(PeerError::Rename(format!(
                    "Claude Code already has a history folder for {} ({}) — move it away, or choose another name",
                    to.display(),
                    target.display()
                )));
            }
            Some((h, target))
        }
        _ => None,
    };
    Ok(RenamePlan {
        entry,
        from,
        to,
        history,
    })
}

/// Rename peer `old` to `new`: see the module doc.
///
/// Errors: those of [`plan_rename`]; a move failed ([`PeerError::Rename`], undone); the
/// profile or registry cannot be written (undone).
pub fn rename_peer(
    paths: &Paths,
    old: &str,
    new: &str,
    bearer: bool,
) -> Result<Renamed, PeerError> {
    let RenamePlan {
        entry,
        from,
        to,
        history,
    } = plan_rename(paths, old, new)?;
    std::fs::rename(&from, &to).map_err(|e| {
        PeerError::Rename(format!(
            "cannot move {} to {}: {e} — nothing was changed",
            from.display(),
            to.display()
        ))
    })?;
    let undo_folder = || {
        if let Err(e) = std::fs::rename(&to, &from) {
            format!(
                "; moving the folder back failed too ({e}) — move {} back to {} by hand",
                to.display(),
                from.display()
            )
        } else {
            String::new()
        }
    };
    if let Some((h, target)) = &history {
        if let Err(e) = move_dir(h, target) {
            let undo = undo_folder();
            return Err(PeerError::Rename(format!(
                "cannot move Claude Code's history {} to {}: {e} — the rename was undone{undo}",
                h.display(),
                target.display()
            )));
        }
    }
    let undo_all = |why: String| -> PeerError {
        let mut undo = String::new();
        if let Some((h, target)) = &history {
            if let Err(e) = move_dir(target, h) {
                undo.push_str(&format!(
                    "; moving Claude's history back failed ({e}) — move {} back to {} by hand",
                    target.display(),
                    h.display()
                ));
            }
        }
        undo.push_str(&undo_folder());
        // The profile names the folder it is in; heal it back.
        let _ = Profile::update(&from, |_| {});
        PeerError::Rename(format!("{why} — the rename was undone{undo}"))
    };
    let profile = Profile::update(&to, |_| {}).map_err(|e| undo_all(e.to_string()))?;
    let peer = profile.to_registry_peer(&to);
    let written = peer.clone();
    let noted = Registry::update(paths, |r| -> Result<io::Result<()>, RegistryError> {
        r.remove(old);
        r.upsert(written);
        // Under the registry's lock: a send to the old name can then say where it went.
        Ok(super::former::note(
            paths,
            old,
            Some(new),
            crate::clock::now_ms(),
        ))
    })
    .map_err(|e| undo_all(e.to_string()))?;

    let mut warnings = Vec::new();
    if let Err(e) = noted {
        warnings.push(format!(
            "cannot note the old name in {}: {e} (a send to {old} will not say it was renamed)",
            paths.state_dir().display()
        ));
    }
    for rt in &entry.runtimes {
        if let Err(e) = runtime::teardown_peer(rt, &from) {
            warnings.push(e);
        }
        if let Err(e) = runtime::setup_peer(rt, &to, new, bearer) {
            warnings.push(format!("{e} — run iapeer add-runtime {rt} --peer {new}"));
        }
        if let (Ok(id), Ok(to_id)) = (Identity::new(rt, old), Identity::new(rt, new)) {
            let markers = Markers::new(paths, &id);
            if let Err(e) = markers.carry_to(&to_id) {
                warnings.push(e.to_string());
            }
            if let Err(e) = markers.remove_all() {
                warnings.push(e.to_string());
            }
        }
    }
    let inbox = paths.attachments_dir(old);
    if inbox.exists() {
        if let Err(e) = move_dir(&inbox, &paths.attachments_dir(new)) {
            warnings.push(format!(
                "cannot move the attachment inbox {}: {e}",
                inbox.display()
            ));
        }
    }
    if entry
        .runtimes
        .iter()
        .any(|rt| rt == crate::runtime::human::NAME)
    {
        warnings.extend(move_human_inbox(paths, old, new));
    }
    // Triggers are stored resolved (`self` as the owner's name), in the owner's profile and
    // in those of peers aiming at it: they follow the rename.
    let (triggers_in, errors) = crate::notifier::store::rename_in_triggers(paths, old, new);
    warnings.extend(errors.into_iter().map(|e| {
        format!(
            "timer/watcher triggers naming {old} could not be updated: {e} — register them again"
        )
    }));
    Ok(Renamed {
        peer,
        from,
        history,
        warnings,
        triggers_in,
    })
}

/// Move the human inbox of `old` (its messages and read mark, spec 01 `inbox/`) to `new`'s
/// name, so the renamed peer keeps its messages and a later peer named `old` does not get
/// them. A file already there under the new name (left by a removed peer) is not overwritten:
/// that is a warning naming both files. Returns the warnings.
fn move_human_inbox(paths: &Paths, old: &str, new: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    for (from, to) in [
        (paths.inbox(old), paths.inbox(new)),
        (paths.inbox_read_mark(old), paths.inbox_read_mark(new)),
    ] {
        if !from.exists() {
            continue;
        }
        if to.exists() {
            warnings.push(format!(
                "{} already exists, so {} was left where it is — merge them by hand",
                to.display(),
                from.display()
            ));
            continue;
        }
        if let Err(e) = std::fs::rename(&from, &to) {
            warnings.push(format!(
                "cannot move {} to {}: {e} — move it by hand",
                from.display(),
                to.display()
            ));
        }
    }
    warnings
}

/// The real path of `cwd`'s parent (symlinks resolved), as Claude Code would see the renamed
/// folder.
fn real_parent(cwd: &Path) -> PathBuf {
    let parent = cwd.parent().unwrap_or(cwd);
    parent
        .canonicalize()
        .unwrap_or_else(|_| parent.to_path_buf())
}

/// Rename a folder, creating the target's parent first.
fn move_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        crate::fsutil::ensure_dir(parent)?;
    }
    std::fs::rename(from, to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_folder_is_a_sibling() {
        assert_eq!(
            renamed_folder(Path::new("/w/peers/bob"), "eve"),
            Some(PathBuf::from("/w/peers/eve"))
        );
        assert_eq!(renamed_folder(Path::new("/"), "eve"), None);
    }
}

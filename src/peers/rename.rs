//! `rename <old> <new>` (spec 07 "Peers"): a peer is named after its folder (spec 01 §3), so
//! renaming it moves its folder to `<parent>/<new>`, moves its Claude Code history folder
//! with it (so `--continue` still finds its conversation), rewrites the profile and the
//! registry entry, carries its markers (topics, resume and stop flags) to the new identities,
//! moves its attachment and human inboxes, redoes each runtime's setup for the new folder, and
//! renames the peer in every timer/watcher trigger that names it. All or nothing, as seen
//! after any failure or kill: see [`super::rename_journal`]. Whether the peer is live is the
//! caller's business (the CLI asks the daemon).

use std::path::{Path, PathBuf};

use super::rename_journal::{self as journal, kill_point, Journal};
use super::{check_name, PeerError};
use crate::paths::Paths;
use crate::registry::{Registry, RegistryError, RegistryPeer};
use crate::runtime::claude_paths;

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
    /// For a worktree peer, the repository's git directory: git moves the folder.
    worktree: Option<PathBuf>,
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
    // A worktree peer's folder is moved by git, which must know it and not have it locked.
    let worktree = match crate::profile::Profile::worktree_record(&from) {
        Some(record) => Some(super::worktree::check_movable(&from, &record)?),
        None => None,
    };
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
        worktree,
    })
}

/// Rename peer `old` to `new`: see the module doc. A rename an earlier process left halfway
/// is settled first (its outcome is the first warning).
///
/// Errors: those of [`plan_rename`]; the journal cannot be written (nothing was changed); a
/// move, a staged file or the registry failed (a full disk): the rename was undone, or, when
/// even that failed, is undone by the next `iapeer` command.
pub fn rename_peer(
    paths: &Paths,
    old: &str,
    new: &str,
    bearer: bool,
) -> Result<Renamed, PeerError> {
    let cannot = |what: String| PeerError::Rename(format!("{what} — nothing was changed"));
    let _lock = journal::lock(paths).map_err(|e| {
        cannot(format!(
            "cannot lock {}: {e}",
            paths.state_dir().join("rename.lock").display()
        ))
    })?;
    let mut warnings: Vec<String> = journal::recover_locked(paths)
        .map(|r| r.to_string())
        .into_iter()
        .collect();
    let RenamePlan {
        entry,
        from,
        to,
        history,
        worktree,
    } = plan_rename(paths, old, new)?;
    let registry = Registry::load(paths)?;
    let journal::StagePlan {
        staged,
        triggers_in,
        warnings: unreadable,
    } = journal::plan_staged(paths, &registry, old, new, &to);
    warnings.extend(unreadable);
    let j = Journal {
        v: 1,
        old: old.to_string(),
        new: new.to_string(),
        from: from.clone(),
        to: to.clone(),
        history: history.clone(),
        runtimes: entry.runtimes.clone(),
        bearer,
        at_ms: crate::clock::now_ms(),
        staged,
        worktree: worktree.clone(),
    };
    journal::write(paths, &j).map_err(|e| {
        cannot(format!(
            "cannot write {}: {e}",
            journal::path(paths).display()
        ))
    })?;
    kill_point("journal");
    let undone = |why: String| -> PeerError {
        match journal::undo(paths, &j) {
            Ok(()) => PeerError::Rename(format!("{why} — the rename was undone")),
            Err(e) => PeerError::Rename(format!(
                "{why}; undoing the rename failed too ({e}) — the next iapeer command undoes it"
            )),
        }
    };
    for (point, step) in APPLY {
        step(&j, &undone)?;
        kill_point(point);
    }
    let profile = journal::stage(paths, &j).map_err(|e| undone(e.to_string()))?;
    kill_point("staged");
    let peer = profile.to_registry_peer(&to);
    let written = peer.clone();
    Registry::update(paths, |r| -> Result<(), RegistryError> {
        r.remove(old);
        r.upsert(written);
        Ok(())
    })
    .map_err(|e| undone(e.to_string()))?;
    kill_point("committed");
    // Committed: from here the rename is finished, now or by the next `iapeer` command.
    match journal::finish(paths, &j) {
        Ok(w) => warnings.extend(w),
        Err(e) => warnings.push(format!(
            "{old} is renamed, but finishing it failed: {e} — the next iapeer command finishes it"
        )),
    }
    Ok(Renamed {
        peer,
        from,
        history,
        warnings,
        triggers_in,
    })
}

/// A move of a rename once its journal is written: done, or the rename undone (`undone`
/// words the failure and undoes it).
type Step = fn(&Journal, &dyn Fn(String) -> PeerError) -> Result<(), PeerError>;

/// The moves of a rename once its journal is written, in order, each with the kill point
/// after it. Then the profile is staged and the registry written (the commit).
const APPLY: [(&str, Step); 2] = [("folder", move_folder), ("history", move_history)];

/// The peer's folder to its new place: git moves a worktree's folder and its record of it
/// (issue 32 item 8).
fn move_folder(j: &Journal, undone: &dyn Fn(String) -> PeerError) -> Result<(), PeerError> {
    let (from, to) = (&j.from, &j.to);
    match &j.worktree {
        Some(git_dir) => crate::worktree::Repository::at(git_dir)
            .move_worktree(from, to)
            .map_err(|e| undone(format!("git could not move the worktree ({e})"))),
        None => std::fs::rename(from, to).map_err(|e| {
            undone(format!(
                "cannot move {} to {}: {e}",
                from.display(),
                to.display()
            ))
        }),
    }
}

/// Claude Code's history folder, when there is one, beside the new folder's name.
fn move_history(j: &Journal, undone: &dyn Fn(String) -> PeerError) -> Result<(), PeerError> {
    match &j.history {
        Some((h, target)) => move_dir(h, target).map_err(|e| {
            undone(format!(
                "cannot move Claude Code's history {} to {}: {e}",
                h.display(),
                target.display()
            ))
        }),
        None => Ok(()),
    }
}

/// Move the human inbox of `old` (its messages and read mark, spec 01 `inbox/`) to `new`'s
/// name, so the renamed peer keeps its messages and a later peer named `old` does not get
/// them. A file already there under the new name (left by a removed peer) is not overwritten:
/// that is a warning naming both files. Returns the warnings.
pub(super) fn move_human_inbox(paths: &Paths, old: &str, new: &str) -> Vec<String> {
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

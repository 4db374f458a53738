//! A folder per agent from a repository (issue 32 item 8): `create <name> --worktree <repo>
//! [--branch <b>]` makes the peer's folder (`<root>/peers/<name>`, or `--path`: a peer is
//! named after its folder, spec 01 §3) a new git worktree of `<repo>`, on a new branch
//! `iapeer/<name>` by default; `remove` removes the worktree and keeps the branch; `rename`
//! moves it with git (a step of the rename journal, [`super::rename_journal`]). The profile
//! records it ([`WorktreeRecord`]); git's listing is the truth about it
//! ([`crate::worktree::state`]).
//!
//! The peer's own files (`.iapeer/`, spec 01 §2) are kept out of git's sight by
//! `.iapeer/.gitignore` (`*`), so `git status` in the worktree shows only the work, and an
//! agent's `git add -A` never commits the peer's profile.

use std::path::{Path, PathBuf};

use super::create::{init_folder, new_peer_folder};
use super::{InitOptions, Initialized, PeerError};
use crate::fsutil;
use crate::paths::{peer, Paths};
use crate::profile::WorktreeRecord;
use crate::registry::Registry;
use crate::worktree::{self, Change, Checkout, Repository, State};

/// The branch a worktree peer gets without `--branch`.
pub fn default_branch(name: &str) -> String {
    format!("iapeer/{name}")
}

/// What [`create_worktree_peer`] made besides the peer.
#[derive(Debug, Clone)]
pub struct Made {
    /// The repository, as `git -C` takes it (its main working tree, or the bare repository).
    pub repository: PathBuf,
    /// The branch and how the worktree got it.
    pub checkout: Checkout,
    /// For a new branch, the commit it starts from (abbreviated); `None` when the
    /// repository has no commit yet (git makes an orphan branch).
    pub from: Option<String>,
}

/// `create <name> --worktree <repo> [--branch <b>]`: make the folder of new peer `name`
/// (`folder`, else `<root>/peers/<name>`) a new worktree of the repository `repo` is in, then
/// initialize it as [`super::create_peer`] does. Everything is checked before git makes the
/// worktree; a worktree (and a branch) made here is removed again when the initialization
/// fails.
///
/// Errors: those of [`super::create_peer`]; [`PeerError::NameTaken`] for a registered name;
/// [`PeerError::Worktree`]: the folder exists, `repo` is not in a repository, the branch
/// cannot be used (the default one exists, the one asked for is checked out in another
/// worktree, is not a valid name, is on several remotes), git refused.
pub fn create_worktree_peer(
    paths: &Paths,
    name: &str,
    folder: Option<&Path>,
    repo: &Path,
    branch: Option<&str>,
    opts: &InitOptions,
) -> Result<(Initialized, Made), PeerError> {
    let folder = new_peer_folder(paths, name, folder, opts)?;
    if let Some(other) = Registry::load(paths)?.find(name) {
        return Err(PeerError::NameTaken {
            name: name.to_string(),
            at: other.cwd.clone(),
        });
    }
    if folder.exists() {
        return Err(PeerError::Worktree(format!(
            "{} exists already — a worktree peer gets a new folder: move it away, or choose \
             another name or --path",
            folder.display()
        )));
    }
    let repository = Repository::open(repo).map_err(|e| {
        PeerError::Worktree(format!(
            "{} is not in a git repository ({e}) — give --worktree the folder of a repository",
            repo.display()
        ))
    })?;
    let checkout = plan_checkout(&repository, name, branch)?;
    let from = match checkout {
        Checkout::NewBranch(_) => repository.head().map_err(refused)?,
        _ => None,
    };
    if let Some(parent) = folder.parent() {
        fsutil::ensure_dir(parent).map_err(fsutil::IoError::at("create", parent))?;
    }
    repository.add(&folder, &checkout).map_err(|e| {
        PeerError::Worktree(format!(
            "git could not make the worktree {} ({e}) — nothing was created",
            folder.display()
        ))
    })?;
    let folder = folder.canonicalize().unwrap_or(folder);
    let record = WorktreeRecord {
        repository: repository.git_dir().to_path_buf(),
        branch: checkout.branch().to_string(),
    };
    let born =
        hide_peer_files(&folder).and_then(|()| init_folder(paths, &folder, opts, Some(&record)));
    match born {
        Ok(born) => Ok((
            born,
            Made {
                repository: repository.shown(),
                checkout,
                from,
            },
        )),
        Err(e) => {
            // A refused create leaves nothing behind: the worktree (and the branch) were
            // made for this peer.
            let undone = repository.remove(&folder, true).and_then(|()| {
                if checkout.makes_branch() {
                    repository.delete_branch(checkout.branch())
                } else {
                    Ok(())
                }
            });
            match undone {
                Ok(()) => Err(e),
                Err(g) => Err(PeerError::Worktree(format!(
                    "{e}; removing the worktree it made failed too ({g}) — remove it with git -C \
                     {} worktree remove --force {}",
                    repository.shown().display(),
                    folder.display()
                ))),
            }
        }
    }
}

/// A git failure while looking at the repository, as a refusal.
fn refused(e: worktree::GitError) -> PeerError {
    PeerError::Worktree(format!("{e} — nothing was created"))
}

/// Write `.iapeer/.gitignore` (`*`) in `folder` unless the repository has one there: git then
/// leaves the peer's own files out of `status` and `add -A`.
///
/// Errors: `Io { action: "write" }`.
fn hide_peer_files(folder: &Path) -> Result<(), PeerError> {
    let path = peer::profile(folder).with_file_name(".gitignore");
    if path.exists() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(folder);
    fsutil::ensure_dir(dir)
        .and_then(|()| fsutil::write_atomic(&path, b"*\n", fsutil::MODE_PRIVATE))
        .map_err(fsutil::IoError::at("write", &path))?;
    Ok(())
}

/// The checkout `create` makes: the facts from git, the choice by [`decide_checkout`].
fn plan_checkout(
    repo: &Repository,
    name: &str,
    requested: Option<&str>,
) -> Result<Checkout, PeerError> {
    let branch = requested.map_or_else(|| default_branch(name), String::from);
    if requested.is_some() {
        repo.check_branch_name(&branch).map_err(|e| {
            PeerError::Worktree(format!("--branch {branch} cannot name a branch ({e})"))
        })?;
    }
    let local = repo.has_branch(&branch).map_err(refused)?;
    let listed = repo.worktrees().map_err(refused)?;
    let in_use = listed
        .iter()
        .find(|w| w.branch.as_deref() == Some(branch.as_str()))
        .map(|w| w.path.clone());
    let remotes = if local {
        Vec::new()
    } else {
        repo.remote_branches(&branch).map_err(refused)?
    };
    decide_checkout(&Facts {
        name,
        requested: requested.is_some(),
        branch: &branch,
        local,
        in_use: in_use.as_deref(),
        remotes: &remotes,
        repo: &repo.shown(),
    })
}

/// What [`decide_checkout`] decides from.
struct Facts<'a> {
    /// The peer's name.
    name: &'a str,
    /// `--branch` was given.
    requested: bool,
    /// The branch (`--branch`, else the default).
    branch: &'a str,
    /// A local branch of that name exists.
    local: bool,
    /// The worktree that has it checked out.
    in_use: Option<&'a Path>,
    /// The remote branches of that name (`<remote>/<branch>`), when there is no local one.
    remotes: &'a [String],
    /// The repository as `git -C` takes it.
    repo: &'a Path,
}

/// How the new worktree gets its branch (pure): without `--branch` a new branch
/// `iapeer/<name>`, refused when it exists (a peer removed earlier left it); with `--branch`
/// the local branch when there is one (refused when another worktree has it: git checks a
/// branch out in one worktree at a time), else a new branch tracking the one remote branch of
/// that name, else a new branch from `HEAD`.
///
/// Errors: [`PeerError::Worktree`] saying why and what to do.
fn decide_checkout(f: &Facts) -> Result<Checkout, PeerError> {
    let (b, repo) = (f.branch, f.repo.display());
    if !f.requested {
        if f.local {
            return Err(PeerError::Worktree(format!(
                "the branch {b} exists already in {repo} (left by an earlier peer named {}?) — \
                 pass --branch {b} to give the new peer that branch, or delete it first: git -C \
                 {repo} branch -D {b}",
                f.name
            )));
        }
        return Ok(Checkout::NewBranch(b.to_string()));
    }
    if f.local {
        if let Some(at) = f.in_use {
            return Err(PeerError::Worktree(format!(
                "the branch {b} is checked out in the worktree {} — git checks a branch out in \
                 one worktree at a time: pass another --branch, or none for a new branch {}",
                at.display(),
                default_branch(f.name)
            )));
        }
        return Ok(Checkout::Existing(b.to_string()));
    }
    match f.remotes {
        [] => Ok(Checkout::NewBranch(b.to_string())),
        [remote] => Ok(Checkout::Tracking {
            name: b.to_string(),
            remote: remote.clone(),
        }),
        several => Err(PeerError::Worktree(format!(
            "the branch {b} is on several remotes ({}) — make the local branch from the one you \
             want first (git -C {repo} branch --track {b} {}), then pass --branch {b} again",
            several.join(", "),
            several[0]
        ))),
    }
}

/// Whether `c` is a file iapeer wrote in the peer's folder — its own files (`.iapeer/`, spec
/// 01 §2) or a runtime's ([`crate::runtime::FOLDER_FILES`]) — untracked: the peer's, not
/// work, so it goes with the worktree (pure).
fn written_by_iapeer(c: &Change) -> bool {
    let own = |f: &str| match f.strip_suffix('/') {
        Some(dir) => c.path.strip_prefix(dir).is_some_and(|r| r.starts_with('/')),
        None => c.path == f,
    };
    c.untracked() && (own(".iapeer/") || crate::runtime::FOLDER_FILES.iter().any(|f| own(f)))
}

/// What `remove` does with a worktree peer's folder, decided before anything changes.
#[derive(Debug)]
pub enum Removal {
    /// git removes the worktree; its branch stays.
    Worktree {
        /// The repository.
        repo: Repository,
        /// The branch it has now; `None` when its HEAD is detached (at `head`).
        branch: Option<String>,
        /// The commit it has checked out.
        head: Option<String>,
    },
    /// git does not know the folder as its worktree (the text says what is wrong and what to
    /// do): the folder is kept, as for any peer.
    KeepFolder(String),
}

impl Removal {
    /// Whether git removes the worktree (else the folder is kept).
    pub fn removes(&self) -> bool {
        matches!(self, Removal::Worktree { .. })
    }

    /// The branch the worktree has (and keeps), when git knows it.
    pub fn branch(&self) -> Option<&str> {
        match self {
            Removal::Worktree { branch, .. } => branch.as_deref(),
            Removal::KeepFolder(_) => None,
        }
    }
}

/// The files of a worktree listing: `code path`, at most `max`, and how many more (pure).
fn shown_changes(changes: &[&Change], max: usize) -> String {
    let mut out: Vec<String> = changes
        .iter()
        .take(max)
        .map(|c| format!("{} {}", c.code.trim(), c.path))
        .collect();
    if changes.len() > max {
        out.push(format!("and {} more", changes.len() - max));
    }
    out.join(", ")
}

/// Decide what `remove` does with the worktree peer folder `cwd` (recorded as `record`):
/// refused when git has it locked, or (without `force`) when it holds work — uncommitted
/// changes or untracked files other than the peer's own — that removing it would lose.
///
/// Errors: [`PeerError::Worktree`] naming the files and how to go ahead.
pub fn plan_removal(
    cwd: &Path,
    record: &WorktreeRecord,
    force: bool,
) -> Result<Removal, PeerError> {
    let listed = match worktree::state(cwd, record) {
        State::Known(l) => l,
        other => {
            return Ok(Removal::KeepFolder(
                other.problem(cwd, record).unwrap_or_default(),
            ))
        }
    };
    let repo = Repository::at(&record.repository);
    let shown = repo.shown();
    if let Some(reason) = &listed.locked {
        let reason = if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        };
        return Err(PeerError::Worktree(format!(
            "git has the worktree {} locked{reason} — unlock it first (git -C {} worktree unlock \
             {}), then remove again",
            cwd.display(),
            shown.display(),
            cwd.display()
        )));
    }
    let changes = worktree::changes(cwd).map_err(|e| {
        PeerError::Worktree(format!(
            "cannot tell whether the worktree {} holds work ({e}) — nothing was removed",
            cwd.display()
        ))
    })?;
    let work: Vec<&Change> = changes.iter().filter(|c| !written_by_iapeer(c)).collect();
    if !work.is_empty() && !force {
        let branch = listed.branch.as_deref().map_or_else(
            || "its detached HEAD".to_string(),
            |b| format!("the branch {b}"),
        );
        return Err(PeerError::Worktree(format!(
            "the worktree {} holds work that removing it would lose: {} — commit what you want \
             to keep (git -C {} status), or pass --force, which deletes the folder with those \
             changes and files (the commits of {branch} are kept); nothing was removed",
            cwd.display(),
            shown_changes(&work, 10),
            cwd.display()
        )));
    }
    Ok(Removal::Worktree {
        repo,
        branch: listed.branch.clone(),
        head: listed.head.clone(),
    })
}

/// Remove the worktree `cwd` as `removal` decided (with `force`, whatever it holds). Without
/// `force` the untracked files iapeer wrote there are deleted first and git removes the
/// worktree only if it is clean then (git's own check has the last word). Returns what became
/// of the folder and the branch, with the command that deletes the branch.
///
/// Errors: [`PeerError::Worktree`] quoting git (the folder is then kept).
pub fn remove_worktree(removal: &Removal, cwd: &Path, force: bool) -> Result<String, PeerError> {
    let (repo, branch, head) = match removal {
        Removal::KeepFolder(why) => return Ok(format!("folder kept: {} — {why}", cwd.display())),
        Removal::Worktree { repo, branch, head } => (repo, branch, head),
    };
    if !force {
        let own = worktree::changes(cwd).unwrap_or_default();
        for c in own.iter().filter(|c| written_by_iapeer(c)) {
            let file = cwd.join(&c.path);
            let _ = fsutil::remove_if_exists(&file);
            if let Some(dir) = file.parent().filter(|d| *d != cwd) {
                // Empty now (`.claude/` held only iapeer's settings): git would keep it.
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
    repo.remove(cwd, force).map_err(|e| {
        PeerError::Worktree(format!(
            "the worktree {} was kept: {e} — remove it with git -C {} worktree remove --force {}",
            cwd.display(),
            repo.shown().display(),
            cwd.display()
        ))
    })?;
    let shown = repo.shown();
    let kept = match (branch, head) {
        (Some(b), _) => format!(
            "branch {b} kept (delete it with: git -C {} branch -D {b})",
            shown.display()
        ),
        (None, Some(h)) => format!("its HEAD was detached at {h}"),
        (None, None) => "its HEAD was detached".to_string(),
    };
    Ok(format!("worktree {} removed; {kept}", cwd.display()))
}

/// Check that the worktree peer folder `from` can be moved by `rename`: git knows it and has
/// not locked it. Returns the repository's git directory (what the rename journal records).
///
/// Errors: [`PeerError::Rename`] saying what is wrong and what to do.
pub fn check_movable(from: &Path, record: &WorktreeRecord) -> Result<PathBuf, PeerError> {
    match worktree::state(from, record) {
        State::Known(l) => match l.locked {
            Some(reason) => Err(PeerError::Rename(format!(
                "git has the worktree {} locked{} — unlock it first (git -C {} worktree unlock \
                 {}), then rename again",
                from.display(),
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(": {reason}")
                },
                worktree::shown_repository(&record.repository).display(),
                from.display()
            ))),
            None => Ok(record.repository.clone()),
        },
        other => Err(PeerError::Rename(format!(
            "{} — nothing was changed",
            other.problem(from, record).unwrap_or_default()
        ))),
    }
}

/// What `rename` says of a worktree peer's branch, which it does not rename (pure): kept, and
/// for the default branch of the old name, the command that gives it the new one.
pub fn branch_after_rename(branch: Option<&str>, repo: &Path, old: &str, new: &str) -> String {
    match branch {
        Some(b) if b == default_branch(old) => format!(
            "its branch {b} is kept (git -C {} branch -m {b} {} renames it)",
            repo.display(),
            default_branch(new)
        ),
        Some(b) => format!("its branch {b} is kept"),
        None => "its HEAD is detached".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(
        requested: bool,
        local: bool,
        in_use: Option<&'a Path>,
        remotes: &'a [String],
    ) -> Facts<'a> {
        Facts {
            name: "bob",
            requested,
            branch: if requested { "feat" } else { "iapeer/bob" },
            local,
            in_use,
            remotes,
            repo: Path::new("/src/app"),
        }
    }

    #[test]
    fn the_default_branch_is_new_and_never_taken_over() {
        assert_eq!(
            decide_checkout(&facts(false, false, None, &[])).unwrap(),
            Checkout::NewBranch("iapeer/bob".into())
        );
        let e = decide_checkout(&facts(false, true, None, &[])).unwrap_err();
        assert!(
            e.to_string().contains("pass --branch iapeer/bob")
                && e.to_string()
                    .contains("git -C /src/app branch -D iapeer/bob"),
            "{e}"
        );
    }

    #[test]
    fn a_branch_asked_for_is_checked_out_tracked_or_made() {
        assert_eq!(
            decide_checkout(&facts(true, true, None, &[])).unwrap(),
            Checkout::Existing("feat".into())
        );
        let e = decide_checkout(&facts(true, true, Some(Path::new("/src/app")), &[])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the branch feat is checked out in the worktree /src/app"),
            "{e}"
        );
        let one = ["origin/feat".to_string()];
        assert_eq!(
            decide_checkout(&facts(true, false, None, &one)).unwrap(),
            Checkout::Tracking {
                name: "feat".into(),
                remote: "origin/feat".into()
            }
        );
        assert_eq!(
            decide_checkout(&facts(true, false, None, &[])).unwrap(),
            Checkout::NewBranch("feat".into())
        );
        let two = ["origin/feat".to_string(), "up/feat".to_string()];
        let e = decide_checkout(&facts(true, false, None, &two)).unwrap_err();
        assert!(e.to_string().contains("origin/feat, up/feat"), "{e}");
    }

    #[test]
    fn a_rename_keeps_the_branch_and_says_how_to_rename_the_default_one() {
        let repo = Path::new("/src/app");
        assert_eq!(
            branch_after_rename(Some("iapeer/bob"), repo, "bob", "eve"),
            "its branch iapeer/bob is kept (git -C /src/app branch -m iapeer/bob iapeer/eve renames it)"
        );
        assert_eq!(
            branch_after_rename(Some("feat"), repo, "bob", "eve"),
            "its branch feat is kept"
        );
    }

    #[test]
    fn only_untracked_files_iapeer_wrote_are_the_peer_s() {
        let c = |code: &str, path: &str| Change {
            code: code.into(),
            path: path.into(),
        };
        for own in [
            ".iapeer/peer-profile.json",
            ".mcp.json",
            ".claude/settings.local.json",
            ".echo-agent/transcript.jsonl",
        ] {
            assert!(written_by_iapeer(&c("??", own)), "{own}");
            assert!(!written_by_iapeer(&c(" M", own)), "tracked {own} is work");
        }
        for work in [
            ".claude/settings.json",
            ".echo-agentx",
            "src/.mcp.json",
            ".iapeerx/a",
        ] {
            assert!(!written_by_iapeer(&c("??", work)), "{work}");
        }
    }

    #[test]
    fn changes_are_listed_up_to_a_bound() {
        let c = |code: &str, path: &str| Change {
            code: code.into(),
            path: path.into(),
        };
        let all = [c(" M", "a.rs"), c("??", "n.txt"), c("D ", "gone")];
        let refs: Vec<&Change> = all.iter().collect();
        assert_eq!(shown_changes(&refs, 10), "M a.rs, ?? n.txt, D gone");
        assert_eq!(shown_changes(&refs, 2), "M a.rs, ?? n.txt, and 1 more");
    }
}

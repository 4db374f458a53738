//! The journal that makes `rename` all or nothing as seen after any failure or kill (issue 26
//! item 9).
//!
//! Before it changes anything, `rename` writes what it is about to do to
//! `<root>/state/iapeer/rename.json` ([`Journal`]), and it holds an exclusive lock on
//! `rename.lock` until it is done. Every file the rename rewrites — the peer's profile, the
//! profiles whose timer/watcher triggers name it, the former-names notes — is first written
//! beside its target as a staged copy (`.<name>.rename`), so that all the new disk space the
//! rename needs is taken before anything is visible. The registry's atomic rewrite is the one
//! step that makes the rename happen (the commit):
//! - before it, everything is undone ([`undo`]): staged copies deleted, Claude Code's history
//!   and the folder moved back, the journal deleted;
//! - after it, everything is finished ([`finish`]): staged copies renamed over their targets,
//!   the markers (topics, resume, stop and fresh flags, deaths) and the message ids
//!   ([`crate::msgids`]) carried to the new identities,
//!   the attachment and human inboxes moved, each runtime's setup redone, the journal deleted.
//!
//! Undoing and finishing only rename and delete: they need no free space, so a full disk
//! cannot stop them halfway. A rename killed halfway leaves its journal with the lock released;
//! the next `iapeer` command, and the daemon at start and at every tick, call [`recover`],
//! which finishes a committed rename and undoes any other. Each step checks where things are
//! before it acts, so recovering twice (or after a recovery that was killed) is harmless.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use fs2::FileExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::fsutil;
use crate::markers::Markers;
use crate::names::Identity;
use crate::notifier::store;
use crate::paths::{self, Paths};
use crate::profile::Profile;
use crate::registry::former;
use crate::registry::Registry;
use crate::runtime;

/// Why a step of the journal failed. `Display` names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The journal is not a rename journal.
    NotAJournal {
        /// The journal file.
        path: PathBuf,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The journal has another format version.
    Version {
        /// The journal file.
        path: PathBuf,
        /// Its version.
        v: u32,
    },
    /// A file changed between planning and staging.
    Changed(PathBuf),
    /// No staged copy was the renamed peer's profile.
    NoProfile(PathBuf),
    /// A file could not be written or deleted.
    Io(#[from] crate::fsutil::IoError),
    /// A file or folder could not be moved (`what` is how the text names it, e.g.
    /// `"Claude Code's history "`, or empty).
    Move {
        /// How the thing moved is named before its path (empty or ending with a space).
        what: &'static str,
        /// Where it is.
        from: PathBuf,
        /// Where it was going.
        to: PathBuf,
        /// True when moving it back (undoing).
        back: bool,
        /// The underlying error.
        source: io::Error,
    },
    /// A file or folder could not be moved to its new name (`what` names it).
    MoveAway {
        /// How the thing is named before its path (`"the message ids "`…).
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A profile could not be read or rewritten.
    Profile(#[from] crate::profile::ProfileError),
    /// The registry could not be read or locked.
    Registry(#[from] crate::registry::RegistryError),
    /// The trigger lists' lock could not be taken.
    Store(#[from] store::StoreError),
    /// The markers could not be carried.
    Markers(#[from] crate::markers::MarkerError),
}

impl std::fmt::Display for JournalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JournalError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            JournalError::NotAJournal { path, source } => {
                write!(f, "{} is not a rename journal: {source}", path.display())
            }
            JournalError::Version { path, v } => write!(
                f,
                "{} has version {v} (this iapeer knows {VERSION})",
                path.display()
            ),
            JournalError::Changed(path) => write!(
                f,
                "{} changed while the rename was being prepared — run the rename again",
                path.display()
            ),
            JournalError::NoProfile(to) => {
                write!(f, "no profile of the peer in {}", to.display())
            }
            JournalError::Io(e) => write!(f, "{e}"),
            JournalError::Move {
                what,
                from,
                to,
                back,
                source,
            } => write!(
                f,
                "cannot move {what}{} {}to {}: {source}",
                from.display(),
                if *back { "back " } else { "" },
                to.display()
            ),
            JournalError::MoveAway { what, path, source } => {
                write!(f, "cannot move {what}{}: {source}", path.display())
            }
            JournalError::Profile(e) => e.fmt(f),
            JournalError::Registry(e) => e.fmt(f),
            JournalError::Store(e) => e.fmt(f),
            JournalError::Markers(e) => e.fmt(f),
        }
    }
}

/// `cannot <action> <path>: <error>`, for `map_err`.
fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> JournalError {
    let at = fsutil::IoError::at(action, path);
    move |e| JournalError::Io(at(e))
}

/// `<path>: <error>`, for `map_err`.
fn read_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError {
    let path = path.to_path_buf();
    move |source| JournalError::Read { path, source }
}

/// The journal's format version.
const VERSION: u32 = 1;

/// A rename in progress, as written before its first change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    /// Format version ([`VERSION`]).
    pub v: u32,
    /// The name before.
    pub old: String,
    /// The name after.
    pub new: String,
    /// The peer's folder before.
    pub from: PathBuf,
    /// The peer's folder after.
    pub to: PathBuf,
    /// Claude Code's history folder and where it goes, when there is one.
    pub history: Option<(PathBuf, PathBuf)>,
    /// The peer's runtimes (whose markers and setups follow the rename).
    pub runtimes: Vec<String>,
    /// Whether the runtime setups use bearer authentication.
    pub bearer: bool,
    /// When the rename began, Unix milliseconds (the former-names note's time).
    pub at_ms: u64,
    /// The files rewritten at the commit.
    pub staged: Vec<Staged>,
    /// For a worktree peer (issue 32 item 8), the repository's git directory: git moved the
    /// folder (`git worktree move`), and undoing or finishing the rename ends with `git
    /// worktree repair` on the folder where it is, so git's record names it whatever step a
    /// kill cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<PathBuf>,
}

/// One file the rename rewrites: its new text waits beside it until the commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Staged {
    /// The file the staged copy replaces.
    pub target: PathBuf,
    /// SHA-256 (hex) of the target's text the copy is made from; `None` when there was no
    /// file.
    pub base: Option<String>,
    /// What the file is (how to make its new text again if it changed meanwhile).
    pub kind: StagedKind,
}

/// What a [`Staged`] file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StagedKind {
    /// The renamed peer's profile: new personality, its triggers renamed.
    OwnProfile,
    /// Another peer's profile whose triggers name the peer.
    Triggers,
    /// `former-names.json`, with the old name noted as renamed.
    FormerNames,
}

/// `IAPEER_TEST_HOOK=rename-kill-after:<step>` (test-only): the process kills itself with
/// SIGKILL right after that step of a rename, as a `kill -9` there would. The steps, in order:
/// `journal`, `folder`, `history`, `staged`, `committed` (in `rename_peer`), `former-names`,
/// `profiles`, `markers`, `inboxes` (in [`finish`]).
pub const KILL_HOOK: &str = "rename-kill-after:";

/// The test hook: die here when asked to (see [`KILL_HOOK`]); never in a build without the
/// test hooks (`crate::config::vars::TEST_HOOKS_COMPILED_IN`).
pub fn kill_point(step: &str) {
    if !crate::config::vars::TEST_HOOKS_COMPILED_IN {
        return;
    }
    let asked = std::env::var(crate::config::vars::TEST_HOOK)
        .ok()
        .and_then(|v| v.strip_prefix(KILL_HOOK).map(|s| s == step))
        .unwrap_or(false);
    if asked {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

/// `<root>/state/iapeer/rename.json`.
pub fn path(paths: &Paths) -> PathBuf {
    paths.state_dir().join("rename.json")
}

fn lock_path(paths: &Paths) -> PathBuf {
    paths.state_dir().join("rename.lock")
}

fn open_lock(paths: &Paths) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    fsutil::ensure_dir(&paths.state_dir())?;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(fsutil::MODE_PRIVATE)
        .open(lock_path(paths))
}

/// Wait for and take the rename lock (released when the file is dropped or the process
/// ends, however it ends).
///
/// Errors: the lock file cannot be opened or locked.
pub fn lock(paths: &Paths) -> io::Result<File> {
    let file = open_lock(paths)?;
    file.lock_exclusive()?;
    Ok(file)
}

/// Write `j` atomically. Errors: the write failed (nothing was written).
pub fn write(paths: &Paths, j: &Journal) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(j).map_err(io::Error::other)?;
    text.push('\n');
    fsutil::write_atomic(&path(paths), text.as_bytes(), fsutil::MODE_PRIVATE)
}

/// The journal of an unfinished rename, if any.
///
/// Errors: it exists but cannot be read or is not a journal of this format.
fn read(paths: &Paths) -> Result<Option<Journal>, JournalError> {
    let file = path(paths);
    let text = fsutil::read_optional(&file).map_err(read_err(&file))?;
    let Some(text) = text else {
        return Ok(None);
    };
    let j: Journal = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(source) => return Err(JournalError::NotAJournal { path: file, source }),
    };
    if j.v != VERSION {
        return Err(JournalError::Version { path: file, v: j.v });
    }
    Ok(Some(j))
}

/// Where a staged copy of `target` waits: `.<name>.rename` beside it.
pub fn staged_path(target: &Path) -> PathBuf {
    let name = crate::fsutil::file_name(target);
    target.with_file_name(format!(".{name}.rename"))
}

/// SHA-256 (hex) of `text`.
fn digest(text: &str) -> String {
    fsutil::hex(&Sha256::digest(text.as_bytes()))
}

/// SHA-256 (hex) of the file at `path` now; `None` when there is none.
fn digest_of(path: &Path) -> io::Result<Option<String>> {
    Ok(fsutil::read_optional(path)?.map(|t| digest(&t)))
}

/// The peer folder of a profile file (`<cwd>/.iapeer/peer-profile.json`).
fn cwd_of(profile: &Path) -> &Path {
    profile
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("/"))
}

/// What [`plan_staged`] found.
#[derive(Debug, Default)]
pub struct StagePlan {
    /// The files the rename rewrites.
    pub staged: Vec<Staged>,
    /// The peers whose timer/watcher triggers name the old name (the renamed one under its
    /// new name).
    pub triggers_in: Vec<String>,
    /// One line per profile that cannot be read (its triggers are left as they are).
    pub warnings: Vec<String>,
}

/// Everything the rename of `old` (registered in `registry`) to `new` (folder `to`) will
/// rewrite, with the text each file has now.
pub fn plan_staged(
    paths: &Paths,
    registry: &Registry,
    old: &str,
    new: &str,
    to: &Path,
) -> StagePlan {
    let mut plan = StagePlan::default();
    for peer in &registry.peers {
        let own = peer.personality == old;
        let file = paths::peer::profile(&peer.cwd);
        let text = match fsutil::read_optional(&file) {
            Ok(t) => t,
            Err(e) => {
                plan.warnings.push(format!(
                    "{}: cannot be read ({e}); timer/watcher triggers in it naming {old} were \
                     left as they are — register them again",
                    file.display()
                ));
                continue;
            }
        };
        let names_old = match text.as_deref().map(serde_json::from_str) {
            Some(Ok(serde_json::Value::Object(mut map))) => store::rename_in(&mut map, old, new),
            _ => false,
        };
        if names_old {
            plan.triggers_in
                .push(if own { new } else { &peer.personality }.to_string());
        }
        if own || names_old {
            plan.staged.push(Staged {
                target: if own {
                    paths::peer::profile(to)
                } else {
                    file.clone()
                },
                base: text.as_deref().map(digest),
                kind: if own {
                    StagedKind::OwnProfile
                } else {
                    StagedKind::Triggers
                },
            });
        }
    }
    plan.triggers_in.sort();
    let notes = former::path(paths);
    plan.staged.push(Staged {
        base: fsutil::read_optional(&notes)
            .ok()
            .flatten()
            .as_deref()
            .map(digest),
        target: notes,
        kind: StagedKind::FormerNames,
    });
    plan
}

/// A staged file's new text, made from the file as it is now.
struct Made {
    /// The new text.
    text: String,
    /// SHA-256 of the text it was made from; `None` when there was no file.
    base: Option<String>,
    /// For a profile, the profile as the new text holds it.
    profile: Option<Profile>,
}

/// The new text of staged file `s` of rename `j`, made from the file as it is now.
///
/// Errors: the file cannot be read or its new text made (text names it).
fn new_text(paths: &Paths, j: &Journal, s: &Staged) -> Result<Made, JournalError> {
    match s.kind {
        StagedKind::OwnProfile | StagedKind::Triggers => {
            let rewrite = Profile::rewrite(cwd_of(&s.target), |p| {
                store::rename_in(&mut p.extra, &j.old, &j.new);
            })?;
            Ok(Made {
                base: rewrite.base.as_deref().map(digest),
                text: rewrite.text,
                profile: Some(rewrite.profile),
            })
        }
        StagedKind::FormerNames => {
            let base = digest_of(&s.target).map_err(read_err(&s.target))?;
            let text = former::noted_text(paths, &j.old, Some(&j.new), j.at_ms)
                .map_err(read_err(&s.target))?;
            Ok(Made {
                text,
                base,
                profile: None,
            })
        }
    }
}

/// The file mode of a staged file's target: a profile and the former-names notes are the
/// user's alike (spec 01 §1).
fn mode_of(_kind: StagedKind) -> u32 {
    fsutil::MODE_PRIVATE
}

/// Write every staged copy of rename `j` (after the folder moved, before the commit). Returns
/// the renamed peer's profile as it will be.
///
/// Errors: a file cannot be read or a copy written (a full disk), or a file changed since the
/// rename planned it (someone wrote it meanwhile): the caller undoes the rename.
pub fn stage(paths: &Paths, j: &Journal) -> Result<Profile, JournalError> {
    let mut own = None;
    for s in &j.staged {
        let made = new_text(paths, j, s)?;
        if made.base != s.base {
            return Err(JournalError::Changed(s.target.clone()));
        }
        let at = staged_path(&s.target);
        fsutil::write_atomic(&at, made.text.as_bytes(), mode_of(s.kind))
            .map_err(io_err("write", &at))?;
        if s.kind == StagedKind::OwnProfile {
            own = made.profile;
        }
    }
    own.ok_or_else(|| JournalError::NoProfile(j.to.clone()))
}

/// Move `from` to `to` unless that is done already (`from` gone and `to` there).
fn move_once(from: &Path, to: &Path) -> io::Result<()> {
    if !from.exists() && to.exists() {
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        fsutil::ensure_dir(parent)?;
    }
    std::fs::rename(from, to)
}

/// Undo rename `j` (never committed): delete the staged copies, move Claude Code's history
/// and the folder back, delete the journal. Renames and deletions only.
///
/// Errors: a step failed (text names it); the journal stays, so the next [`recover`] tries
/// again.
pub fn undo(paths: &Paths, j: &Journal) -> Result<(), JournalError> {
    for s in &j.staged {
        let at = staged_path(&s.target);
        // The renamed peer's copy is in the new folder, or in the old one if the folder was
        // moved back already.
        let back = at.strip_prefix(&j.to).ok().map(|rest| j.from.join(rest));
        for p in std::iter::once(at).chain(back) {
            fsutil::remove_if_exists(&p).map_err(io_err("delete", &p))?;
        }
    }
    if let Some((h, target)) = &j.history {
        if target.exists() && !h.exists() {
            std::fs::rename(target, h).map_err(|source| JournalError::Move {
                what: "Claude Code's history ",
                from: target.clone(),
                to: h.clone(),
                back: true,
                source,
            })?;
        }
    }
    if j.to.exists() && !j.from.exists() {
        std::fs::rename(&j.to, &j.from).map_err(|source| JournalError::Move {
            what: "",
            from: j.to.clone(),
            to: j.from.clone(),
            back: true,
            source,
        })?;
    }
    if let Some(git_dir) = &j.worktree {
        repair_worktree(git_dir, &j.from);
    }
    fsutil::remove_if_exists(&path(paths)).map_err(io_err("delete", &path(paths)))
}

/// Make git's record of the worktree `folder` name it again (`git worktree repair`; nothing
/// to do when it does). A failure is logged, not retried: `iapeer verify` finds such a
/// worktree and `verify --fix` repairs it.
fn repair_worktree(git_dir: &Path, folder: &Path) -> Option<String> {
    let failed = crate::worktree::Repository::at(git_dir)
        .repair(folder)
        .err()?;
    let why = format!(
        "git's record of the worktree {} may name another folder ({failed}) — iapeer verify \
         --fix repairs it",
        folder.display()
    );
    log::warn!("rename: {why}");
    Some(why)
}

/// Put staged file `s` in place: its copy renamed over the target when the target is still
/// what the copy was made from; else (someone wrote it meanwhile) the copy is dropped and the
/// change made again on what is there now. Nothing to do when the copy is gone (placed
/// already).
fn place(paths: &Paths, j: &Journal, s: &Staged) -> Result<(), JournalError> {
    let at = staged_path(&s.target);
    if !at.exists() {
        return Ok(());
    }
    let now = digest_of(&s.target).map_err(read_err(&s.target))?;
    if now == s.base {
        return std::fs::rename(&at, &s.target).map_err(|source| JournalError::Move {
            what: "",
            from: at.clone(),
            to: s.target.clone(),
            back: false,
            source,
        });
    }
    fsutil::remove_if_exists(&at).map_err(io_err("delete", &at))?;
    let made = new_text(paths, j, s)?;
    fsutil::write_atomic(&s.target, made.text.as_bytes(), mode_of(s.kind))
        .map_err(io_err("write", &s.target))
}

/// Finish rename `j` (committed): see the module doc. Returns the warnings of steps that could
/// not be done and are not retried (an inbox already there under the new name, a runtime's
/// setup).
///
/// Errors: a step failed that the next [`recover`] tries again (the journal stays).
pub fn finish(paths: &Paths, j: &Journal) -> Result<Vec<String>, JournalError> {
    let mut warnings = Vec::new();
    let (notes, profiles): (Vec<&Staged>, Vec<&Staged>) = j
        .staged
        .iter()
        .partition(|s| s.kind == StagedKind::FormerNames);
    // Under the registry's lock, as every note is written.
    Registry::with_lock(paths, || notes.iter().try_for_each(|s| place(paths, j, s)))??;
    kill_point("former-names");
    // Under the lock of the trigger lists' writers (the timer and watcher services).
    store::with_profiles_lock(paths, || {
        profiles.iter().try_for_each(|s| place(paths, j, s))
    })??;
    kill_point("profiles");
    for rt in &j.runtimes {
        if let (Ok(id), Ok(to_id)) = (Identity::new(rt, &j.old), Identity::new(rt, &j.new)) {
            let markers = Markers::new(paths, &id);
            markers.carry_to(&to_id)?;
            markers.remove_all()?;
            // The message ids begun for the peer follow it: a retry sent to its new name is
            // still never written twice (issue 26 item 5). One left under the new name by a
            // removed peer is replaced.
            let (ids, to_ids) = (
                crate::msgids::file_in(&paths.message_ids_dir(), &id.to_string()),
                crate::msgids::file_in(&paths.message_ids_dir(), &to_id.to_string()),
            );
            if ids.exists() {
                std::fs::rename(&ids, &to_ids).map_err(|source| JournalError::MoveAway {
                    what: "the message ids ",
                    path: ids.clone(),
                    source,
                })?;
            }
        }
    }
    kill_point("markers");
    let inbox = paths.attachments_dir(&j.old);
    if inbox.exists() {
        let target = paths.attachments_dir(&j.new);
        if target.exists() {
            warnings.push(format!(
                "{} already exists, so the attachment inbox {} was left where it is — merge \
                 them by hand",
                target.display(),
                inbox.display()
            ));
        } else {
            move_once(&inbox, &target).map_err(|source| JournalError::MoveAway {
                what: "the attachment inbox ",
                path: inbox.clone(),
                source,
            })?;
        }
    }
    if j.runtimes
        .iter()
        .any(|rt| rt == crate::names::HUMAN_RUNTIME)
    {
        warnings.extend(super::rename::move_human_inbox(paths, &j.old, &j.new));
    }
    kill_point("inboxes");
    if let Some(git_dir) = &j.worktree {
        warnings.extend(repair_worktree(git_dir, &j.to));
    }
    for rt in &j.runtimes {
        if let Err(e) = runtime::teardown_peer(rt, &j.from) {
            warnings.push(e.to_string());
        }
        if let Err(e) = runtime::setup_peer(rt, &j.to, &j.new, j.bearer) {
            warnings.push(format!(
                "{e} — run iapeer add-runtime {rt} --peer {}",
                j.new
            ));
        }
    }
    fsutil::remove_if_exists(&path(paths)).map_err(io_err("delete", &path(paths)))?;
    Ok(warnings)
}

/// Whether rename `j` committed: the registry names the new name at the new folder and no
/// longer the old one.
///
/// Errors: the registry cannot be read (nothing can be decided).
fn committed(paths: &Paths, j: &Journal) -> Result<bool, JournalError> {
    let r = Registry::load(paths)?;
    Ok(r.find(&j.new).is_some_and(|p| p.cwd == j.to) && r.find(&j.old).is_none())
}

/// What [`recover`] did with a rename an earlier process left halfway.
#[derive(Debug, Clone, PartialEq)]
pub enum Recovery {
    /// It had committed and was finished; the warnings of [`finish`].
    Finished {
        /// The old name.
        old: String,
        /// The new name.
        new: String,
        /// Steps that could not be done.
        warnings: Vec<String>,
    },
    /// It had not committed and was undone.
    Undone {
        /// The old name.
        old: String,
        /// The new name.
        new: String,
    },
    /// It could not be settled now (the next recovery tries again).
    Failed(String),
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recovery::Finished { old, new, warnings } => {
                write!(
                    f,
                    "the rename of {old} to {new} that was cut short is finished"
                )?;
                for w in warnings {
                    write!(f, "; {w}")?;
                }
                Ok(())
            }
            Recovery::Undone { old, new } => write!(
                f,
                "the rename of {old} to {new} that was cut short is undone: {old} is as it was"
            ),
            Recovery::Failed(why) => write!(
                f,
                "a rename that was cut short could not be settled: {why} — the next iapeer \
                 command tries again"
            ),
        }
    }
}

/// Settle a rename an earlier process left halfway (killed, or its undo failed): finish it if
/// it committed, else undo it. `None` when there is none, or a rename is running now (it holds
/// the lock). Cheap when there is nothing to do: one `stat`.
pub fn recover(paths: &Paths) -> Option<Recovery> {
    if !path(paths).exists() {
        return None;
    }
    let lock = open_lock(paths).ok()?;
    lock.try_lock_exclusive().ok()?;
    let out = recover_locked(paths);
    drop(lock);
    out
}

/// [`recover`] for a caller that holds the lock.
pub fn recover_locked(paths: &Paths) -> Option<Recovery> {
    let j = match read(paths) {
        Ok(Some(j)) => j,
        Ok(None) => return None,
        Err(e) => return Some(Recovery::Failed(e.to_string())),
    };
    let settled = match committed(paths, &j) {
        Ok(true) => finish(paths, &j).map(|warnings| Recovery::Finished {
            old: j.old.clone(),
            new: j.new.clone(),
            warnings,
        }),
        Ok(false) => undo(paths, &j).map(|()| Recovery::Undone {
            old: j.old.clone(),
            new: j.new.clone(),
        }),
        Err(e) => Err(e),
    };
    Some(settled.unwrap_or_else(|e| Recovery::Failed(e.to_string())))
}

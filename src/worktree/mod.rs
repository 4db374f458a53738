//! A peer's folder as a git worktree (issue 32 item 8): the real `git` binary, run with a
//! deadline in its own process group ([`crate::child`]), its output read from its
//! `--porcelain -z` forms ([`porcelain`]). Every failure is a [`GitError`] that quotes what
//! git said.
//!
//! A repository is named by its git directory (git's *common* directory: `<repo>/.git`, or
//! the bare repository itself) and every command on it runs as `git --git-dir=<that>`, so it
//! works the same for a repository with a working tree and a bare one, whatever the current
//! folder. git's repository-local environment (`GIT_DIR`, `GIT_WORK_TREE`, …, the list of
//! `git rev-parse --local-env-vars`) is removed first: an `iapeer` run from a git hook or an
//! agent's shell must not point git elsewhere.
//!
//! Which peers are worktrees is written in their profile ([`crate::profile::WorktreeRecord`]);
//! [`state`] says what git knows of one now, for `list`, `verify`, `remove` and `rename`.

pub mod porcelain;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub use porcelain::{Change, Listed};

use crate::child::{self, Ending};
use crate::profile::WorktreeRecord;

/// How long a git query may take (`worktree list`, `status`, `rev-parse`, …).
const QUERY_DEADLINE: Duration = Duration::from_secs(60);

/// How long a git command that writes or deletes a checkout may take (`worktree add`,
/// `remove`, `move`): a large repository's checkout takes a while.
const CHECKOUT_DEADLINE: Duration = Duration::from_secs(600);

/// git's repository-local environment variables (`git rev-parse --local-env-vars`, git
/// 2.47), removed from every git run here.
const LOCAL_ENV: &[&str] = &[
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
];

/// Why a git command did not do its job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitError {
    /// git could not be started (not installed, not on `PATH`).
    #[error("git cannot be run ({0}) — install git, or put it on PATH")]
    Missing(String),
    /// git ran and failed.
    #[error("{command}: {said}")]
    Failed {
        /// The command, as a user would type it.
        command: String,
        /// What git said (its standard error, trimmed; else its exit status).
        said: String,
    },
    /// git did not finish by its deadline (its process group was killed).
    #[error("{command} did not finish within {secs} s")]
    Timeout {
        /// The command, as a user would type it.
        command: String,
        /// The deadline, in seconds.
        secs: u64,
    },
}

/// Where a git command runs: on a repository (`--git-dir`), or in a worktree's folder.
#[derive(Clone, Copy)]
enum At<'a> {
    Repo(&'a Path),
    Folder(&'a Path),
}

/// Run `git <args>` at `at`; its standard output when it exits 0. `quiet_codes` are exit
/// statuses that are answers, not failures (`show-ref --verify --quiet`: 1 = no such ref):
/// they come back as `Ok(Err(code))`.
fn git_with(
    at: At,
    args: &[OsString],
    deadline: Duration,
    quiet_codes: &[i32],
) -> Result<Result<String, i32>, GitError> {
    let mut cmd = Command::new("git");
    let shown_at = match at {
        At::Repo(dir) => {
            let mut flag = OsString::from("--git-dir=");
            flag.push(dir);
            cmd.arg(flag).current_dir(dir);
            format!("git --git-dir={}", dir.display())
        }
        At::Folder(dir) => {
            cmd.current_dir(dir);
            format!("git -C {}", dir.display())
        }
    };
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0");
    for var in LOCAL_ENV {
        cmd.env_remove(var);
    }
    let command = std::iter::once(shown_at)
        .chain(args.iter().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ");
    let done = child::run_command(cmd, deadline);
    match done.ending {
        Ending::Exited(Some(0)) => Ok(Ok(done.stdout)),
        Ending::Exited(Some(code)) if quiet_codes.contains(&code) => Ok(Err(code)),
        Ending::NotExecutable | Ending::SpawnFailed => Err(GitError::Missing(done.stderr)),
        Ending::Timeout => Err(GitError::Timeout {
            command,
            secs: deadline.as_secs(),
        }),
        Ending::Exited(code) => {
            let said = done.stderr.trim();
            let said = if said.is_empty() {
                match code {
                    Some(c) => format!("exit status {c}"),
                    None => "killed by a signal".to_string(),
                }
            } else {
                said.to_string()
            };
            Err(GitError::Failed { command, said })
        }
    }
}

/// `git <args>` at `at` with the query deadline; its standard output.
fn git(at: At, args: &[&str]) -> Result<String, GitError> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    git_with(at, &args, QUERY_DEADLINE, &[]).map(|r| r.unwrap_or_default())
}

/// A git repository, named by its git directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    git_dir: PathBuf,
}

/// How a new worktree gets its branch (what `create --worktree` decided).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkout {
    /// A new branch made from the repository's `HEAD` (`worktree add -b <name>`).
    NewBranch(String),
    /// A local branch that exists (`worktree add <folder> <name>`).
    Existing(String),
    /// A new local branch tracking the remote branch `remote` (`<remote>/<name>`), as git's
    /// `worktree add <folder> <name>` makes one when only a remote has it.
    Tracking {
        /// The branch.
        name: String,
        /// `<remote>/<name>`.
        remote: String,
    },
}

impl Checkout {
    /// The branch the worktree has.
    pub fn branch(&self) -> &str {
        match self {
            Checkout::NewBranch(b) | Checkout::Existing(b) => b,
            Checkout::Tracking { name, .. } => name,
        }
    }

    /// Whether the branch is made by the checkout (so undoing it deletes the branch).
    pub fn makes_branch(&self) -> bool {
        !matches!(self, Checkout::Existing(_))
    }
}

impl Repository {
    /// The repository whose git directory is `git_dir` (as recorded in a profile).
    pub fn at(git_dir: &Path) -> Repository {
        Repository {
            git_dir: git_dir.to_path_buf(),
        }
    }

    /// The repository `path` is in: a working tree (main or linked, or a folder inside one)
    /// or a bare repository.
    ///
    /// Errors: `path` is not a folder ([`GitError::Failed`] saying so), or git says it is not
    /// in a repository (its message).
    pub fn open(path: &Path) -> Result<Repository, GitError> {
        if !path.is_dir() {
            return Err(GitError::Failed {
                command: format!("git -C {} rev-parse", path.display()),
                said: format!("{} is not a folder", path.display()),
            });
        }
        let out = git(
            At::Folder(path),
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )?;
        Ok(Repository {
            git_dir: PathBuf::from(out.trim_end_matches('\n')),
        })
    }

    /// Its git directory (git's common directory).
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// What a user gives `git -C` to reach it: the main working tree (`<repo>` of
    /// `<repo>/.git`), else the git directory (a bare repository).
    pub fn shown(&self) -> PathBuf {
        shown_repository(&self.git_dir)
    }

    /// Every worktree git knows of it (`worktree list --porcelain -z`).
    ///
    /// Errors: git fails (the repository is gone, …).
    pub fn worktrees(&self) -> Result<Vec<Listed>, GitError> {
        git(
            At::Repo(&self.git_dir),
            &["worktree", "list", "--porcelain", "-z"],
        )
        .map(|out| porcelain::worktree_list(&out))
    }

    /// Whether the local branch `name` exists (`show-ref --verify --quiet refs/heads/<name>`).
    ///
    /// Errors: git fails.
    pub fn has_branch(&self, name: &str) -> Result<bool, GitError> {
        let args: Vec<OsString> = ["show-ref", "--verify", "--quiet"]
            .iter()
            .map(OsString::from)
            .chain([OsString::from(format!("refs/heads/{name}"))])
            .collect();
        git_with(At::Repo(&self.git_dir), &args, QUERY_DEADLINE, &[1]).map(|r| r.is_ok())
    }

    /// Check that `name` can name a branch (`check-ref-format --branch`).
    ///
    /// Errors: git's refusal (`fatal: '…' is not a valid branch name`).
    pub fn check_branch_name(&self, name: &str) -> Result<(), GitError> {
        git(
            At::Repo(&self.git_dir),
            &["check-ref-format", "--branch", name],
        )
        .map(drop)
    }

    /// The remote branches named `name` (`<remote>/<name>`).
    ///
    /// Errors: git fails.
    pub fn remote_branches(&self, name: &str) -> Result<Vec<String>, GitError> {
        git(
            At::Repo(&self.git_dir),
            &["for-each-ref", "--format=%(refname)", "refs/remotes"],
        )
        .map(|out| porcelain::remote_branches_named(&out, name))
    }

    /// The commit `HEAD` names, abbreviated; `None` when it names none (no commit yet).
    ///
    /// Errors: git fails.
    pub fn head(&self) -> Result<Option<String>, GitError> {
        let args: Vec<OsString> = ["rev-parse", "--verify", "--quiet", "--short", "HEAD"]
            .iter()
            .map(OsString::from)
            .collect();
        git_with(At::Repo(&self.git_dir), &args, QUERY_DEADLINE, &[1])
            .map(|r| r.ok().map(|s| s.trim().to_string()))
    }

    /// Make the worktree `folder` (absolute; must not exist) as `how` says.
    ///
    /// Errors: git's refusal (the branch is checked out elsewhere, no commit to branch
    /// from, …).
    pub fn add(&self, folder: &Path, how: &Checkout) -> Result<(), GitError> {
        let mut args: Vec<OsString> = vec!["worktree".into(), "add".into()];
        match how {
            Checkout::NewBranch(b) => {
                args.extend(["-b".into(), b.into(), folder.into()]);
            }
            Checkout::Existing(b) => args.extend([folder.into(), b.into()]),
            Checkout::Tracking { name, remote } => args.extend([
                "--track".into(),
                "-b".into(),
                name.into(),
                folder.into(),
                remote.into(),
            ]),
        }
        self.write(&args)
    }

    /// `worktree remove [--force] <folder>`: delete the worktree and git's record of it; the
    /// branch stays. Without `force` git refuses a worktree with changes or untracked files.
    ///
    /// Errors: git's refusal.
    pub fn remove(&self, folder: &Path, force: bool) -> Result<(), GitError> {
        let mut args: Vec<OsString> = vec!["worktree".into(), "remove".into()];
        if force {
            args.push("--force".into());
        }
        args.push(folder.into());
        self.write(&args)
    }

    /// `worktree move <from> <to>`: move the folder and git's record of it.
    ///
    /// Errors: git's refusal (locked, holds submodules, …).
    pub fn move_worktree(&self, from: &Path, to: &Path) -> Result<(), GitError> {
        self.write(&["worktree".into(), "move".into(), from.into(), to.into()])
    }

    /// `worktree repair <folder>`: make git's record of the worktree and the folder's `.git`
    /// file name each other again (after the folder was moved without git).
    ///
    /// Errors: git's refusal.
    pub fn repair(&self, folder: &Path) -> Result<(), GitError> {
        self.write(&["worktree".into(), "repair".into(), folder.into()])
    }

    /// `branch -D <name>` (undoing a `create` that made the branch).
    ///
    /// Errors: git's refusal.
    pub fn delete_branch(&self, name: &str) -> Result<(), GitError> {
        self.write(&["branch".into(), "-D".into(), name.into()])
    }

    fn write(&self, args: &[OsString]) -> Result<(), GitError> {
        git_with(At::Repo(&self.git_dir), args, CHECKOUT_DEADLINE, &[]).map(drop)
    }
}

/// What a user gives `git -C` to reach the repository of git directory `git_dir`: its parent
/// for `<repo>/.git`, else `git_dir` itself (pure).
pub fn shown_repository(git_dir: &Path) -> PathBuf {
    match (git_dir.file_name(), git_dir.parent()) {
        (Some(n), Some(parent)) if n == ".git" => parent.to_path_buf(),
        _ => git_dir.to_path_buf(),
    }
}

/// The uncommitted changes and untracked files of the worktree `folder` (`status
/// --porcelain=v1 -z --untracked-files=all`; ignored files are not changes).
///
/// Errors: git fails (not a worktree any more, …).
pub fn changes(folder: &Path) -> Result<Vec<Change>, GitError> {
    git(
        At::Folder(folder),
        &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
    )
    .map(|out| porcelain::status(&out))
}

/// What git knows of a worktree peer's folder now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// git knows the worktree at the folder (its listing).
    Known(Listed),
    /// The folder is a worktree of the repository but git's record of it names another
    /// place (the folder was moved without git): `git worktree repair` fixes it.
    Moved,
    /// git has no record of the folder any more (`git worktree prune` after it was away):
    /// its files are intact, git commands in it fail.
    Forgotten(GitError),
    /// The repository cannot be read (moved, deleted).
    NoRepository(GitError),
    /// The folder does not exist.
    NoFolder,
}

/// What git knows of the worktree peer folder `cwd` recorded as `record` (see [`State`]):
/// one `worktree list`, and when it does not list the folder one `rev-parse` in it.
pub fn state(cwd: &Path, record: &WorktreeRecord) -> State {
    if !cwd.is_dir() {
        return State::NoFolder;
    }
    state_in(cwd, record, &Repository::at(&record.repository).worktrees())
}

/// [`state`] with the repository's listing given (`list` asks git once per repository).
pub fn state_in(
    cwd: &Path,
    record: &WorktreeRecord,
    listed: &Result<Vec<Listed>, GitError>,
) -> State {
    if !cwd.is_dir() {
        return State::NoFolder;
    }
    let listed = match listed {
        Ok(l) => l,
        Err(e) => return State::NoRepository(e.clone()),
    };
    if let Some(found) = find(listed, cwd) {
        return State::Known(found.clone());
    }
    match Repository::open(cwd) {
        Ok(r) if same_path(r.git_dir(), &record.repository) => State::Moved,
        Ok(r) => State::Forgotten(GitError::Failed {
            command: format!("git -C {} rev-parse", cwd.display()),
            said: format!("it is a worktree of {} now", r.shown().display()),
        }),
        Err(e) => State::Forgotten(e),
    }
}

/// The entry of `listed` for `folder` (compared as real paths), unless git would prune it.
pub fn find<'a>(listed: &'a [Listed], folder: &Path) -> Option<&'a Listed> {
    listed
        .iter()
        .find(|w| w.prunable.is_none() && same_path(&w.path, folder))
}

/// Whether two paths name the same folder (their real paths, else as written).
fn same_path(a: &Path, b: &Path) -> bool {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    a == b || real(a) == real(b)
}

impl State {
    /// What is wrong in a few words, with where to read more (`list`); `None` when git knows
    /// the worktree.
    pub fn summary(&self, record: &WorktreeRecord) -> Option<String> {
        let what = match self {
            State::Known(_) => return None,
            State::NoFolder => "its folder is missing".to_string(),
            State::Moved => "git's record of it names another folder".to_string(),
            State::Forgotten(_) => "git no longer knows it".to_string(),
            State::NoRepository(_) => format!(
                "its repository {} cannot be read",
                shown_repository(&record.repository).display()
            ),
        };
        Some(format!("{what} — iapeer verify says what to do"))
    }

    /// What is wrong and what to do, for a peer whose folder `cwd` is recorded as `record`;
    /// `None` when git knows the worktree.
    pub fn problem(&self, cwd: &Path, record: &WorktreeRecord) -> Option<String> {
        let repo = shown_repository(&record.repository);
        match self {
            State::Known(_) => None,
            State::NoFolder => Some(format!(
                "its worktree folder {} is missing — git -C {} worktree prune forgets it; the \
                 branch {} is kept",
                cwd.display(),
                repo.display(),
                record.branch
            )),
            State::Moved => Some(format!(
                "git's record of the worktree {} names another folder (it was moved without \
                 git) — iapeer verify --fix repairs it (git -C {} worktree repair {})",
                cwd.display(),
                repo.display(),
                cwd.display()
            )),
            State::Forgotten(e) => Some(format!(
                "git no longer knows the worktree {} ({e}): its files are intact but git \
                 commands in it fail — to attach it again on its branch {b}: git -C {r} \
                 worktree add --no-checkout {c}.reattach {b} && mv {c}.reattach/.git {c}/.git \
                 && rmdir {c}.reattach && git -C {r} worktree repair {c} && git -C {c} reset -q",
                cwd.display(),
                b = record.branch,
                r = repo.display(),
                c = cwd.display()
            )),
            State::NoRepository(e) => Some(format!(
                "its repository {} cannot be read ({e}) — put the repository back, or remove \
                 the peer (iapeer remove keeps the folder then)",
                repo.display()
            )),
        }
    }
}

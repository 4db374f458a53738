//! Readers of git's `--porcelain -z` output (pure): `git worktree list --porcelain -z` and
//! `git status --porcelain=v1 -z`. Both forms are git's stable interface for scripts
//! (git-worktree(1) "Porcelain Format", git-status(1) "Porcelain Format Version 1"); `-z`
//! ends each field with NUL, so a path is never quoted or cut at a line break.

use std::path::PathBuf;

/// One worktree of `git worktree list --porcelain -z`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listed {
    /// Its folder, as git records it (absolute).
    pub path: PathBuf,
    /// The commit checked out (40 or 64 hex digits); `None` for a bare repository's entry
    /// or an unborn branch.
    pub head: Option<String>,
    /// The branch checked out, `refs/heads/` left out; `None` when HEAD is detached.
    pub branch: Option<String>,
    /// The repository's own entry of a bare repository.
    pub bare: bool,
    /// HEAD is detached.
    pub detached: bool,
    /// `Some(reason)` (possibly empty) when the worktree is locked (`git worktree lock`).
    pub locked: Option<String>,
    /// `Some(reason)` when git would prune it: its record points to a folder that is gone.
    pub prunable: Option<String>,
}

/// Read `git worktree list --porcelain -z`: records of `key[ value]` fields, each field
/// ended by NUL, a record ended by an empty field. Unknown keys are skipped (a later git may
/// add some).
pub fn worktree_list(out: &str) -> Vec<Listed> {
    let mut all = Vec::new();
    let mut cur: Option<Listed> = None;
    for field in out.split('\0') {
        if field.is_empty() {
            all.extend(cur.take());
            continue;
        }
        let (key, value) = field.split_once(' ').unwrap_or((field, ""));
        if key == "worktree" {
            all.extend(cur.take());
            cur = Some(Listed {
                path: PathBuf::from(value),
                ..Listed::default()
            });
            continue;
        }
        let Some(w) = cur.as_mut() else { continue };
        match key {
            "HEAD" => w.head = Some(value.to_string()),
            "branch" => {
                w.branch = Some(
                    value
                        .strip_prefix("refs/heads/")
                        .unwrap_or(value)
                        .to_string(),
                )
            }
            "bare" => w.bare = true,
            "detached" => w.detached = true,
            "locked" => w.locked = Some(value.to_string()),
            "prunable" => w.prunable = Some(value.to_string()),
            _ => {}
        }
    }
    all.extend(cur);
    all
}

/// One entry of `git status --porcelain=v1 -z`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The two status letters `XY` (index, work tree): `??` untracked, ` M` modified, …
    pub code: String,
    /// The path, relative to the worktree's top (for a rename or copy, the new path).
    pub path: String,
}

impl Change {
    /// Not tracked by git (`??`).
    pub fn untracked(&self) -> bool {
        self.code == "??"
    }
}

/// Read `git status --porcelain=v1 -z`: `XY path` fields; a rename or copy (`R`/`C` in
/// either column) is followed by one more field, the path it came from, which is skipped.
pub fn status(out: &str) -> Vec<Change> {
    let mut all = Vec::new();
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    while let Some(field) = fields.next() {
        let Some((code, path)) = field.get(..2).zip(field.get(3..)) else {
            continue;
        };
        if code.contains(['R', 'C']) {
            fields.next();
        }
        all.push(Change {
            code: code.to_string(),
            path: path.to_string(),
        });
    }
    all
}

/// The branches of `remote_refs` (full names, `refs/remotes/<remote>/<branch>`) whose branch
/// part is `branch`, as `<remote>/<branch>`: what git's `worktree add <path> <branch>` would
/// track when no local branch has that name. A remote's own `HEAD` is never one.
pub fn remote_branches_named(remote_refs: &str, branch: &str) -> Vec<String> {
    remote_refs
        .lines()
        .filter_map(|r| r.strip_prefix("refs/remotes/"))
        .filter(|short| {
            short
                .split_once('/')
                .is_some_and(|(_, b)| b == branch && b != "HEAD")
        })
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from git 2.47.3: a main worktree, a linked one on a branch, a detached and
    /// locked one, one whose folder was moved away by hand.
    const LIST: &str = "worktree /tmp/gt/repo\0HEAD bf961d0fa980706cb61b6e63b9c7bc1e89fb09d5\0branch refs/heads/master\0\0\
        worktree /tmp/gt/bob\0HEAD bf961d0fa980706cb61b6e63b9c7bc1e89fb09d5\0branch refs/heads/iapeer/bob\0\0\
        worktree /tmp/gt/d e\0HEAD bf961d0fa980706cb61b6e63b9c7bc1e89fb09d5\0detached\0locked on a USB stick\0\0\
        worktree /tmp/gt/gone\0HEAD bf961d0fa980706cb61b6e63b9c7bc1e89fb09d5\0branch refs/heads/g\0prunable gitdir file points to non-existent location\0\0";

    #[test]
    fn worktree_list_reads_every_record() {
        let all = worktree_list(LIST);
        assert_eq!(all.len(), 4);
        assert_eq!(all[1].path, PathBuf::from("/tmp/gt/bob"));
        assert_eq!(all[1].branch.as_deref(), Some("iapeer/bob"));
        assert!(all[1].locked.is_none() && all[1].prunable.is_none());
        assert_eq!(all[2].path, PathBuf::from("/tmp/gt/d e"));
        assert!(all[2].detached && all[2].branch.is_none());
        assert_eq!(all[2].locked.as_deref(), Some("on a USB stick"));
        assert_eq!(
            all[3].prunable.as_deref(),
            Some("gitdir file points to non-existent location")
        );
        let bare = worktree_list("worktree /r/b.git\0bare\0\0worktree /r/x\0HEAD 00\0locked\0\0");
        assert!(bare[0].bare && bare[0].head.is_none());
        assert_eq!(bare[1].locked.as_deref(), Some(""));
        assert!(worktree_list("").is_empty());
    }

    #[test]
    fn status_reads_changes_and_skips_the_origin_of_a_rename() {
        let out = " M src/a.rs\0?? notes/new file.txt\0R  b.rs\0a.rs\0D  gone\0";
        let all = status(out);
        let shown: Vec<(&str, &str)> = all
            .iter()
            .map(|c| (c.code.as_str(), c.path.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                (" M", "src/a.rs"),
                ("??", "notes/new file.txt"),
                ("R ", "b.rs"),
                ("D ", "gone")
            ]
        );
        assert!(all[1].untracked() && !all[0].untracked());
        assert!(status("").is_empty());
    }

    #[test]
    fn remote_branches_match_the_whole_branch_name() {
        let refs = "refs/remotes/origin/HEAD\nrefs/remotes/origin/feat\nrefs/remotes/origin/x/feat\nrefs/remotes/up/feat\n";
        assert_eq!(
            remote_branches_named(refs, "feat"),
            ["origin/feat", "up/feat"]
        );
        assert_eq!(remote_branches_named(refs, "x/feat"), ["origin/x/feat"]);
        assert!(remote_branches_named(refs, "HEAD").is_empty());
    }
}

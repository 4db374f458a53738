//! A folder per agent from a repository (issue 32 item 8): `create <name> --worktree <repo>
//! [--branch <b>]` makes the peer's folder a new git worktree; `list` shows its branch,
//! `remove` removes the worktree and keeps the branch (refusing one that holds work unless
//! `--force`), `rename` moves it with git (a step of the rename journal), `verify` finds a
//! worktree git no longer knows. Real git repositories in temp folders, the real `git`
//! binary, the real daemon and CLI.

use crate::common;

use common::TestEnv;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// `git <args>` in `dir` (author, committer and `HOME` of the test's world); its stdout.
fn git(env: &TestEnv, dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", &env.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {}: {}",
        args.join(" "),
        common::describe(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository `<test>/<name>` on branch `main` with one commit (`README.md`).
fn repo(env: &TestEnv, name: &str) -> PathBuf {
    let dir = env.dir.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    git(env, &dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README.md"), "# app\n").unwrap();
    git(env, &dir, &["add", "README.md"]);
    git(env, &dir, &["commit", "-q", "-m", "first"]);
    dir
}

/// The worktrees git knows of `repo`: (real path, branch), from `git worktree list
/// --porcelain`, without the ones git would prune.
fn worktrees(env: &TestEnv, repo: &Path) -> Vec<(PathBuf, Option<String>)> {
    let out = git(env, repo, &["worktree", "list", "--porcelain"]);
    out.split("\n\n")
        .filter(|r| !r.trim().is_empty() && !r.contains("\nprunable"))
        .map(|r| {
            let field = |k: &str| {
                r.lines()
                    .find_map(|l| l.strip_prefix(k).map(str::to_string))
            };
            let path = PathBuf::from(field("worktree ").unwrap());
            let branch = field("branch refs/heads/");
            (path.canonicalize().unwrap_or(path), branch)
        })
        .collect()
}

/// The branch git has checked out in `folder`, if it lists it.
fn branch_of(env: &TestEnv, repo: &Path, folder: &Path) -> Option<Option<String>> {
    let real = folder.canonicalize().ok()?;
    worktrees(env, repo)
        .into_iter()
        .find(|(p, _)| *p == real)
        .map(|(_, b)| b)
}

/// Whether the local branch `b` exists in `repo`.
fn has_branch(env: &TestEnv, repo: &Path, b: &str) -> bool {
    !git(env, repo, &["branch", "--list", b]).trim().is_empty()
}

/// The `list --json` row of `name`.
fn row(env: &TestEnv, name: &str) -> Option<serde_json::Value> {
    env.list()
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["personality"] == name)
        .cloned()
}

#[test]
fn create_makes_a_worktree_on_a_new_branch_and_the_peer_works_in_it() {
    let mut env = TestEnv::new();
    let repo = repo(&env, "app");
    let r = repo.to_str().unwrap();
    let out = env.ok(&["create", "ann", "--runtime", "echo", "--worktree", r]);
    assert!(
        out.contains("is a worktree of")
            && out.contains("on a new branch iapeer/ann (made from HEAD"),
        "{out}"
    );
    let out = env.ok(&[
        "create",
        "bob",
        "--runtime",
        "echo",
        "--worktree",
        r,
        "--branch",
        "feat",
    ]);
    assert!(
        out.contains("on a new branch feat (made from HEAD"),
        "{out}"
    );
    let (ann, bob) = (env.peer_dir("ann"), env.peer_dir("bob"));
    assert_eq!(
        branch_of(&env, &repo, &ann),
        Some(Some("iapeer/ann".into()))
    );
    assert_eq!(branch_of(&env, &repo, &bob), Some(Some("feat".into())));
    assert!(
        ann.join("README.md").is_file(),
        "the repository's files are checked out"
    );
    // The peer's own files are out of git's sight: the new worktree is clean.
    assert_eq!(
        git(
            &env,
            &ann,
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        ""
    );
    let a = row(&env, "ann").unwrap();
    assert_eq!(a["worktree"]["branch"], "iapeer/ann");
    assert_eq!(
        PathBuf::from(a["worktree"]["repository"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        repo.canonicalize().unwrap()
    );
    let table = env.ok(&["list"]);
    let line = table.lines().find(|l| l.starts_with("bob ")).unwrap();
    assert!(table.contains("BRANCH") && line.contains("feat"), "{table}");

    // The peers work in their worktrees: bob receives ann's message there and answers; ann
    // receives the answer.
    env.start_daemon();
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-ann",
        "--message",
        "hello from ann",
    ]);
    assert!(out.contains("delivered to bob"), "{out}");
    env.wait_until("ann got bob's answer", Duration::from_secs(60), |e| {
        e.pane("echo-ann")
            .contains("from bob: echo: hello from ann")
    });
    assert!(
        bob.join(".echo-agent/transcript.jsonl").is_file(),
        "bob's agent ran in its worktree"
    );
    env.ok(&["stop", "ann"]);
    env.ok(&["stop", "bob"]);
    env.stop_daemon();

    // Clean (what the peer's agent wrote there is the peer's): removed, its branch kept.
    let out = env.ok(&["remove", "ann"]);
    assert!(
        out.contains(&format!("worktree {} removed", ann.display())),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "branch iapeer/ann kept (delete it with: git -C {} branch -D iapeer/ann)",
            repo.display()
        )),
        "{out}"
    );
    assert!(!ann.exists());
    assert_eq!(
        branch_of(&env, &repo, &ann),
        None,
        "git forgot the worktree"
    );
    assert!(has_branch(&env, &repo, "iapeer/ann"));
    assert!(row(&env, "ann").is_none());
}

#[test]
fn a_branch_that_exists_is_checked_out_unless_another_worktree_has_it() {
    let env = TestEnv::new();
    let repo = repo(&env, "app");
    let r = repo.to_str().unwrap();
    git(&env, &repo, &["branch", "topic"]);
    let out = env.ok(&[
        "create",
        "cal",
        "--runtime",
        "echo",
        "--worktree",
        r,
        "--branch",
        "topic",
    ]);
    assert!(out.contains("on the existing branch topic"), "{out}");
    assert_eq!(
        branch_of(&env, &repo, &env.peer_dir("cal")),
        Some(Some("topic".into()))
    );

    let before = worktrees(&env, &repo);
    for (branch, at) in [("main", repo.clone()), ("topic", env.peer_dir("cal"))] {
        let (_, err) = env.fails(
            &[
                "create",
                "dan",
                "--runtime",
                "echo",
                "--worktree",
                r,
                "--branch",
                branch,
            ],
            1,
        );
        assert!(
            err.contains(&format!(
                "the branch {branch} is checked out in the worktree {}",
                at.display()
            )) && err.contains("one worktree at a time"),
            "{err}"
        );
    }
    assert_eq!(worktrees(&env, &repo), before, "nothing was made");
    assert!(!env.peer_dir("dan").exists() && row(&env, "dan").is_none());

    // The default branch of a name is never taken over (a peer removed earlier left it).
    git(&env, &repo, &["branch", "iapeer/fay"]);
    let (_, err) = env.fails(&["create", "fay", "--runtime", "echo", "--worktree", r], 1);
    assert!(
        err.contains("the branch iapeer/fay exists already") && err.contains("--branch iapeer/fay"),
        "{err}"
    );
    let (_, err) = env.fails(
        &[
            "create",
            "fay",
            "--runtime",
            "echo",
            "--worktree",
            r,
            "--branch",
            "a..b",
        ],
        1,
    );
    assert!(
        err.contains("not a valid branch name"),
        "git's own words: {err}"
    );

    // Only a remote has it: a new local branch tracking it.
    let clone = env.dir.path().join("clone");
    git(
        &env,
        env.dir.path(),
        &["clone", "-q", r, clone.to_str().unwrap()],
    );
    git(&env, &repo, &["branch", "remote-only"]);
    git(&env, &clone, &["fetch", "-q"]);
    let out = env.ok(&[
        "create",
        "eve",
        "--runtime",
        "echo",
        "--worktree",
        clone.to_str().unwrap(),
        "--branch",
        "remote-only",
    ]);
    assert!(
        out.contains("on a new branch remote-only tracking origin/remote-only"),
        "{out}"
    );
    let upstream = git(
        &env,
        &env.peer_dir("eve"),
        &["rev-parse", "--abbrev-ref", "@{upstream}"],
    );
    assert_eq!(upstream.trim(), "origin/remote-only");

    // A name that is taken.
    let (_, err) = env.fails(&["create", "cal", "--runtime", "echo", "--worktree", r], 1);
    assert!(err.contains("peer \"cal\" already exists"), "{err}");
    // --branch alone.
    let (_, err) = env.fails(&["create", "gus", "--runtime", "echo", "--branch", "x"], 2);
    assert!(err.contains("--branch goes with --worktree"), "{err}");
}

#[test]
fn a_folder_that_is_not_a_repository_is_refused_and_a_bare_repository_works() {
    let env = TestEnv::new();
    let plain = env.dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let (_, err) = env.fails(
        &[
            "create",
            "gil",
            "--runtime",
            "echo",
            "--worktree",
            plain.to_str().unwrap(),
        ],
        1,
    );
    assert!(
        err.contains(&format!("{} is not in a git repository", plain.display()))
            && err.contains("fatal: not a git repository"),
        "git's own words: {err}"
    );
    let missing = env.dir.path().join("missing");
    let (_, err) = env.fails(
        &[
            "create",
            "gil",
            "--runtime",
            "echo",
            "--worktree",
            missing.to_str().unwrap(),
        ],
        1,
    );
    assert!(err.contains("is not a folder"), "{err}");
    assert!(!env.peer_dir("gil").exists() && row(&env, "gil").is_none());

    // A bare repository (a common way to keep only worktrees): git makes worktrees of it.
    let source = repo(&env, "app");
    let bare = env.dir.path().join("app.git");
    git(
        &env,
        env.dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            source.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let out = env.ok(&[
        "create",
        "hal",
        "--runtime",
        "echo",
        "--worktree",
        bare.to_str().unwrap(),
    ]);
    assert!(out.contains("on a new branch iapeer/hal"), "{out}");
    assert_eq!(
        branch_of(&env, &bare, &env.peer_dir("hal")),
        Some(Some("iapeer/hal".into()))
    );
    let out = env.ok(&["remove", "hal"]);
    assert!(
        out.contains(&format!("git -C {} branch -D iapeer/hal", bare.display())),
        "{out}"
    );
    assert!(!env.peer_dir("hal").exists());
}

#[test]
fn remove_refuses_a_worktree_holding_work_and_force_removes_it() {
    let env = TestEnv::new();
    let repo = repo(&env, "app");
    env.ok(&[
        "create",
        "bob",
        "--runtime",
        "echo",
        "--worktree",
        repo.to_str().unwrap(),
    ]);
    let bob = env.peer_dir("bob");
    std::fs::write(bob.join("README.md"), "# app, changed\n").unwrap();
    std::fs::write(bob.join("notes.txt"), "not committed\n").unwrap();
    let profile = iapeer::paths::peer::profile(&bob);
    let before = common::read(&profile);

    let (_, err) = env.fails(&["remove", "bob"], 1);
    assert!(
        err.contains("holds work that removing it would lose: M README.md, ?? notes.txt")
            && err.contains("pass --force")
            && err.contains("nothing was removed"),
        "{err}"
    );
    // Nothing changed.
    assert!(row(&env, "bob").is_some());
    assert_eq!(common::read(&profile), before);
    assert_eq!(common::read(&bob.join("notes.txt")), "not committed\n");
    assert_eq!(
        branch_of(&env, &repo, &bob),
        Some(Some("iapeer/bob".into()))
    );

    let out = env.ok(&["remove", "bob", "--force"]);
    assert!(out.contains("branch iapeer/bob kept"), "{out}");
    assert!(!bob.exists());
    assert_eq!(branch_of(&env, &repo, &bob), None);
    assert!(has_branch(&env, &repo, "iapeer/bob"));
    assert!(row(&env, "bob").is_none());
}

#[test]
fn rename_moves_the_worktree_with_git() {
    let env = TestEnv::new();
    let repo = repo(&env, "app");
    env.ok(&[
        "create",
        "bob",
        "--runtime",
        "echo",
        "--worktree",
        repo.to_str().unwrap(),
    ]);
    let (bob, eve) = (env.peer_dir("bob"), env.peer_dir("eve"));
    std::fs::write(bob.join("wip.txt"), "half done\n").unwrap();

    let out = env.ok(&["rename", "bob", "eve"]);
    assert!(
        out.contains(&format!(
            "worktree moved with git, its branch iapeer/bob is kept (git -C {} branch -m iapeer/bob iapeer/eve renames it)",
            repo.display()
        )),
        "{out}"
    );
    assert!(!bob.exists());
    assert_eq!(
        branch_of(&env, &repo, &eve),
        Some(Some("iapeer/bob".into()))
    );
    assert_eq!(branch_of(&env, &repo, &bob), None);
    // The work moved with it, and git works there.
    assert_eq!(git(&env, &eve, &["status", "--porcelain"]), "?? wip.txt\n");
    assert_eq!(
        row(&env, "eve").unwrap()["worktree"]["branch"],
        "iapeer/bob"
    );

    // A worktree git has locked is refused, and nothing changes.
    git(
        &env,
        &repo,
        &[
            "worktree",
            "lock",
            "--reason",
            "on hold",
            eve.to_str().unwrap(),
        ],
    );
    let (_, err) = env.fails(&["rename", "eve", "fay"], 1);
    assert!(
        err.contains("git has the worktree") && err.contains("locked: on hold"),
        "{err}"
    );
    assert!(eve.is_dir() && row(&env, "eve").is_some());
    let (_, err) = env.fails(&["remove", "eve", "--force"], 1);
    assert!(err.contains("locked: on hold"), "{err}");
    assert!(eve.is_dir() && row(&env, "eve").is_some());
}

#[test]
fn a_rename_killed_after_git_moved_the_worktree_is_undone_or_finished_with_git() {
    let env = TestEnv::new();
    let repo = repo(&env, "app");
    env.ok(&[
        "create",
        "bob",
        "--runtime",
        "echo",
        "--worktree",
        repo.to_str().unwrap(),
    ]);
    for (step, done) in [("folder", false), ("staged", false), ("committed", true)] {
        let out = env
            .cmd(&["rename", "bob", "eve"])
            .env("IAPEER_TEST_HOOK", format!("rename-kill-after:{step}"))
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            Some(9),
            "killed after {step}: {}",
            common::describe(&out)
        );
        // The next command settles it.
        env.ok(&["list"]);
        let (now, gone) = if done { ("eve", "bob") } else { ("bob", "eve") };
        assert!(
            row(&env, now).is_some() && row(&env, gone).is_none(),
            "after {step}"
        );
        assert_eq!(
            branch_of(&env, &repo, &env.peer_dir(now)),
            Some(Some("iapeer/bob".into())),
            "git knows the worktree where it is after {step}"
        );
        assert!(!env.peer_dir(gone).exists());
        assert_eq!(
            git(&env, &env.peer_dir(now), &["status", "--porcelain"]),
            ""
        );
        if done {
            env.ok(&["rename", "eve", "bob"]);
        }
    }
}

#[test]
fn verify_finds_a_worktree_git_no_longer_knows_and_says_what_to_do() {
    let env = TestEnv::new();
    let repo = repo(&env, "app");
    let r = repo.to_str().unwrap();
    env.ok(&["create", "bob", "--runtime", "echo", "--worktree", r]);
    env.ok(&["create", "cal", "--runtime", "echo", "--worktree", r]);
    let (bob, cal) = (env.peer_dir("bob"), env.peer_dir("cal"));
    env.ok(&["verify"]);

    // cal's folder was away while git pruned its record.
    let away = env.dir.path().join("cal-away");
    std::fs::rename(&cal, &away).unwrap();
    git(&env, &repo, &["worktree", "prune"]);
    std::fs::rename(&away, &cal).unwrap();
    // bob's folder was moved by git, then back by hand: git's record names the other place.
    let elsewhere = env.dir.path().join("bob-elsewhere");
    git(
        &env,
        &repo,
        &[
            "worktree",
            "move",
            bob.to_str().unwrap(),
            elsewhere.to_str().unwrap(),
        ],
    );
    std::fs::rename(&elsewhere, &bob).unwrap();

    let table = env.ok(&["list"]);
    assert!(
        table.contains("! bob: worktree: git's record of it names another folder")
            && table.contains(
                "! cal: worktree: git no longer knows it — iapeer verify says what to do"
            ),
        "{table}"
    );
    let (out, _) = env.fails(&["verify"], 1);
    assert!(out.contains("iapeer verify --fix repairs it"), "{out}");
    let recipe = format!(
        "git -C {} worktree add --no-checkout {}.reattach iapeer/cal",
        repo.display(),
        cal.display()
    );
    assert!(
        out.contains("git no longer knows the worktree") && out.contains(&recipe),
        "{out}"
    );

    // --fix repairs the moved one; the pruned one stays a problem until attached again.
    let (out, _) = env.fails(&["verify", "--fix"], 1);
    assert!(
        out.contains("fixed bob: repaired git's record of the worktree"),
        "{out}"
    );
    assert_eq!(
        branch_of(&env, &repo, &bob),
        Some(Some("iapeer/bob".into()))
    );
    // The commands verify gave attach cal again.
    let line = out.lines().find(|l| l.starts_with("cal: ")).unwrap();
    let commands = line.split_once("iapeer/cal: ").unwrap().1;
    let sh = Command::new("/bin/sh")
        .args(["-c", commands])
        .env("HOME", &env.home)
        .output()
        .unwrap();
    assert!(sh.status.success(), "{}", common::describe(&sh));
    assert_eq!(
        branch_of(&env, &repo, &cal),
        Some(Some("iapeer/cal".into()))
    );
    env.ok(&["verify"]);

    // remove of a worktree git does not know keeps the folder and says why.
    std::fs::rename(&cal, &away).unwrap();
    git(&env, &repo, &["worktree", "prune"]);
    std::fs::rename(&away, &cal).unwrap();
    let out = env.ok(&["remove", "cal"]);
    assert!(
        out.contains(&format!("folder kept: {}", cal.display()))
            && out.contains("git no longer knows"),
        "{out}"
    );
    assert!(cal.is_dir());
}

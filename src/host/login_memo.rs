//! Remembered answers of the agent CLIs' login status commands (issue 27): `status` marks each
//! runtime some peer runs on that is not logged in, and asking the CLIs on every call made it
//! slow (`claude auth status` ≈ 0.9 s, `opencode auth list` up to 5 s under load). An answer
//! ([`super::login::check`]) is kept with a key of everything it depends on, and given again
//! while the key is the same and the answer is younger than [`MAX_AGE`]:
//!
//! - the program: the path asked, the file it resolves to, that file's identity, size and
//!   times (an upgrade changes them);
//! - the files the command reads (its row's `LoginCheck::records`, recorded with `strace` from
//!   the real CLIs): each one's identity, size and times, or its absence — a credential file
//!   written, replaced or deleted changes the key at once;
//! - the environment the command runs in (a provider's key in it counts for Claude Code and
//!   OpenCode), but for the variables a shell or terminal changes as it goes ([`VOLATILE`]);
//! - the home folder, where the command runs.
//!
//! The key is a SHA-256 of these, so no value of the environment is written down. Only "logged
//! in" and "not logged in" are kept; an unknown answer (timeout, cannot run) is asked again.
//! A runtime whose check has no command (Gemini CLI: its files are read, fast) is never kept.
//!
//! The answers live in `<root>/cache/iapeer/logins.json` (rebuildable, replaced atomically),
//! not in the daemon: the check runs in the asking command's own environment, which the
//! daemon does not share, and `status` answers when no daemon runs.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::login::{Agent, Login};
use crate::paths::Paths;
use crate::runtime_table::{self, LoginFile};

/// How long a remembered answer is given at most: a bound on what the key cannot see (a
/// token revoked elsewhere, a keyring changed under Codex).
pub const MAX_AGE: Duration = Duration::from_secs(600);

/// Environment variables left out of the key: set by shells and terminals, different from one
/// prompt or pane to the next, and read by no login check.
pub const VOLATILE: &[&str] = &[
    "_",
    "OLDPWD",
    "PWD",
    "SHLVL",
    "COLUMNS",
    "LINES",
    "PS1",
    "PS2",
    "PROMPT_COMMAND",
    "HISTCMD",
    "TMUX_PANE",
    "WINDOWID",
    "WINDOW",
    "STY",
    "KITTY_WINDOW_ID",
    "WEZTERM_PANE",
    "ITERM_SESSION_ID",
    "TERM_SESSION_ID",
    "VTE_VERSION",
    "SSH_TTY",
    "GPG_TTY",
    "INVOCATION_ID",
    "JOURNAL_STREAM",
];

/// Whether the answers are asked for or may be remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// A remembered answer whose key still holds is given (`status`).
    Remembered,
    /// Every CLI is asked; the answers are remembered for the next `status` (`doctor`).
    Fresh,
}

/// One remembered answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Kept {
    /// The key it was given under ([`key`]).
    key: String,
    /// `true`: logged in; `false`: not.
    logged_in: bool,
    /// When it was asked, in seconds since the Unix epoch.
    asked_at: u64,
}

/// The file: the kept answer per runtime name.
type Store = BTreeMap<String, Kept>;

/// The file holding the remembered answers.
fn store_path(paths: &Paths) -> PathBuf {
    paths.cache_dir().join("logins.json")
}

/// The login of each of `agents`, in their order: remembered where `ask` allows and the key
/// holds, else asked ([`super::login::check_each`], at once) and remembered. A file that
/// cannot be written costs the next `status` its speed, nothing else.
pub fn answers(paths: &Paths, agents: Vec<Agent>, ask: Ask) -> Vec<(Agent, Login)> {
    answers_with(
        &store_path(paths),
        agents,
        ask,
        crate::paths::home_dir().as_deref(),
        &user_env(),
        now(),
        &super::login::check_each,
    )
}

/// This process's environment, the one its login checks run in.
fn user_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

/// The key `agent`'s answer is kept under now, for this process's home and environment
/// ([`key`]); `None` for an answer never kept.
pub fn key_now(agent: &Agent) -> Option<String> {
    key(agent, crate::paths::home_dir().as_deref(), &user_env())
}

/// iapeer itself wrote files that `agent`'s kept answer's key reads (`create` sets the new
/// peer up in the CLI's own config — Codex's `config.toml` gets a trust entry — which logs
/// no one in or out): the answer kept under `before` ([`key_now`] before the write) is kept
/// under the key of the files now, as old as it was (still bounded by [`MAX_AGE`]).
/// Nothing when it is no longer kept under `before` (none kept, or another answer since).
/// A file that cannot be written costs the next `status` its speed, nothing else.
pub fn rekey(paths: &Paths, agent: &Agent, before: &str) {
    if let Some(after) = key_now(agent) {
        rekey_in(&store_path(paths), agent.runtime, before, after);
    }
}

/// [`rekey`] in `file`, for the runtime named `runtime`, to the key `after`.
fn rekey_in(file: &Path, runtime: &str, before: &str, after: String) {
    let mut store: Store = crate::fsutil::read_json_or_default(file);
    match store.get_mut(runtime) {
        Some(kept) if kept.key == before && kept.key != after => kept.key = after,
        _ => return,
    }
    if let Ok(mut text) = serde_json::to_string_pretty(&store) {
        text.push('\n');
        let _ = crate::fsutil::replace_atomic(file, text.as_bytes(), 0o600);
    }
}

/// Seconds since the Unix epoch.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// [`answers`] for a user whose home is `home` and environment `env` at `now`, keeping them in
/// `file`, asking with `check_each`.
fn answers_with(
    file: &Path,
    agents: Vec<Agent>,
    ask: Ask,
    home: Option<&Path>,
    env: &[(String, String)],
    now: u64,
    check_each: &dyn Fn(Vec<Agent>) -> Vec<(Agent, Login)>,
) -> Vec<(Agent, Login)> {
    let kept: Store = crate::fsutil::read_json_or_default(file);
    let keyed: Vec<(Agent, Option<String>)> = agents
        .into_iter()
        .map(|a| {
            let k = key(&a, home, env);
            (a, k)
        })
        .collect();
    let given: Vec<Option<Login>> = keyed
        .iter()
        .map(|(a, k)| match (ask, k) {
            (Ask::Remembered, Some(k)) => remembered(kept.get(a.runtime), k, now),
            _ => None,
        })
        .collect();
    let to_ask: Vec<Agent> = keyed
        .iter()
        .zip(&given)
        .filter(|(_, g)| g.is_none())
        .map(|((a, _), _)| a.clone())
        .collect();
    let mut asked = check_each(to_ask).into_iter();
    let mut fresh = Store::new();
    let out: Vec<(Agent, Login)> = keyed
        .into_iter()
        .zip(given)
        .map(|((a, k), g)| {
            let login = match g {
                Some(l) => l,
                None => {
                    let login = asked
                        .next()
                        .map_or_else(|| Login::Unknown("not asked".into()), |(_, l)| l);
                    if let (Some(k), Some(logged_in)) = (k, kept_as(&login)) {
                        fresh.insert(
                            a.runtime.to_string(),
                            Kept {
                                key: k,
                                logged_in,
                                asked_at: now,
                            },
                        );
                    }
                    login
                }
            };
            (a, login)
        })
        .collect();
    if !fresh.is_empty() {
        // Read again: another command may have kept answers meanwhile.
        let mut store: Store = crate::fsutil::read_json_or_default(file);
        store.extend(fresh);
        if let Ok(mut text) = serde_json::to_string_pretty(&store) {
            text.push('\n');
            let _ = crate::fsutil::replace_atomic(file, text.as_bytes(), 0o600);
        }
    }
    out
}

/// How `login` is kept: logged in or not; an unknown answer is not kept.
fn kept_as(login: &Login) -> Option<bool> {
    match login {
        Login::In => Some(true),
        Login::Out => Some(false),
        Login::Unknown(_) => None,
    }
}

/// The answer `kept` gives under `key` at `now` (pure): its login when the key is the same
/// and it was asked less than [`MAX_AGE`] ago (and not in the future); else none.
fn remembered(kept: Option<&Kept>, key: &str, now: u64) -> Option<Login> {
    let kept = kept.filter(|k| k.key == key)?;
    let age = now.checked_sub(kept.asked_at)?;
    let login = match kept.logged_in {
        true => Login::In,
        false => Login::Out,
    };
    (age < MAX_AGE.as_secs()).then_some(login)
}

/// The key of `agent`'s answer for a user whose home is `home` and environment `env`: a
/// SHA-256 (hex) of the program, the files its check reads and the environment (see the
/// module's doc). `None`: its answer is never remembered (no login check, or one without a
/// command).
pub fn key(agent: &Agent, home: Option<&Path>, env: &[(String, String)]) -> Option<String> {
    let check = runtime_table::get(agent.runtime)?.login?;
    if check.records.is_empty() {
        return None;
    }
    let lookup = |var: &str| {
        env.iter()
            .find(|(k, _)| k == var)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let mut text = format!("runtime {}\n", agent.runtime);
    text.push_str(&format!("home {:?}\n", home));
    text.push_str(&format!("program {:?} {}\n", agent.bin, stamp(&agent.bin)));
    if let Ok(real) = std::fs::canonicalize(&agent.bin) {
        text.push_str(&format!("resolved {:?}\n", real));
    }
    for file in record_paths(check.records, home, &lookup) {
        text.push_str(&format!("file {:?} {}\n", file, stamp(&file)));
    }
    let mut vars: Vec<&(String, String)> = env
        .iter()
        .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
        .collect();
    vars.sort();
    for (k, v) in vars {
        text.push_str(&format!("env {k:?}={v:?}\n"));
    }
    Some(crate::fsutil::hex(&Sha256::digest(text.as_bytes())))
}

/// The paths of `records` for a user whose home is `home` (relative paths are dropped without
/// one) and environment `env` (pure): `$<var>/<in_var>` when the variable is set, and the
/// home's (or absolute) path, each once.
pub fn record_paths(
    records: &[LoginFile],
    home: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for r in records {
        let moved = r.var.and_then(env).map(|dir| match r.in_var {
            "" => PathBuf::from(dir),
            file => Path::new(&dir).join(file),
        });
        let plain = match Path::new(r.path) {
            p if p.is_absolute() => Some(p.to_path_buf()),
            p => home.map(|h| h.join(p)),
        };
        for p in moved.into_iter().chain(plain) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// What a file is now, for a key: its device, inode, size and change and modification times
/// (the program's, through a link), or that it is missing.
fn stamp(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) => format!(
            "{}:{} {} m{}.{} c{}.{}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "missing".into(),
        Err(e) => format!("unreadable ({:?})", e.kind()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A codex whose answer is the presence of `~/.codex/auth.json` (as the real one's is,
    /// `tests/logins.rs`), counting how often it is asked.
    struct World {
        _dir: tempfile::TempDir,
        home: PathBuf,
        file: PathBuf,
        agent: Agent,
        asked: RefCell<usize>,
    }

    impl World {
        fn new() -> World {
            let dir = tempfile::tempdir().unwrap();
            let home = dir.path().join("home");
            std::fs::create_dir_all(home.join(".codex")).unwrap();
            let bin = dir.path().join("codex");
            crate::testkit::write_program(&bin, "#!/bin/sh\nexit 1\n");
            World {
                file: dir.path().join("root/cache/iapeer/logins.json"),
                agent: Agent {
                    runtime: "codex",
                    bin,
                },
                home,
                _dir: dir,
                asked: RefCell::new(0),
            }
        }

        fn status(&self, env: &[(String, String)], now: u64) -> Login {
            self.answer(Ask::Remembered, env, now)
        }

        fn answer(&self, ask: Ask, env: &[(String, String)], now: u64) -> Login {
            let check = |agents: Vec<Agent>| {
                *self.asked.borrow_mut() += agents.len();
                let login = match self.home.join(".codex/auth.json").exists() {
                    true => Login::In,
                    false => Login::Out,
                };
                agents.into_iter().map(|a| (a, login.clone())).collect()
            };
            let got = answers_with(
                &self.file,
                vec![self.agent.clone()],
                ask,
                Some(&self.home),
                env,
                now,
                &check,
            );
            got[0].1.clone()
        }

        fn asked(&self) -> usize {
            *self.asked.borrow()
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Asked once, then remembered; a credential file written, replaced or deleted, the
    /// program changed, or a key in the environment makes it ask again at once.
    #[test]
    fn an_answer_holds_while_what_it_read_is_the_same() {
        let w = World::new();
        let e = env(&[("PATH", "/bin"), ("PWD", "/a")]);
        assert_eq!(w.status(&e, 1000), Login::Out);
        assert_eq!(w.status(&e, 1001), Login::Out);
        assert_eq!(w.asked(), 1, "the second status asked again");
        // Another folder, another shell level: the same answer.
        let moved = env(&[("PATH", "/bin"), ("PWD", "/b"), ("SHLVL", "3")]);
        assert_eq!(w.status(&moved, 1002), Login::Out);
        assert_eq!(w.asked(), 1);
        // Logged in: the file appears.
        let auth = w.home.join(".codex/auth.json");
        std::fs::write(&auth, "{}").unwrap();
        assert_eq!(w.status(&e, 1003), Login::In);
        assert_eq!(w.asked(), 2);
        assert_eq!(w.status(&e, 1004), Login::In);
        assert_eq!(w.asked(), 2);
        // Replaced atomically (same size, same second): a new file all the same.
        crate::fsutil::write_atomic(&auth, b"{}", 0o600).unwrap();
        assert_eq!(w.status(&e, 1005), Login::In);
        assert_eq!(w.asked(), 3);
        // Logged out: the file goes.
        std::fs::remove_file(&auth).unwrap();
        assert_eq!(w.status(&e, 1006), Login::Out);
        assert_eq!(w.asked(), 4);
        // A key in the environment, and the program upgraded.
        let keyed = env(&[("PATH", "/bin"), ("OPENAI_API_KEY", "sk-x")]);
        w.status(&keyed, 1007);
        assert_eq!(w.asked(), 5);
        crate::testkit::write_program(&w.agent.bin, "#!/bin/sh\nexit 1 # 2\n");
        w.status(&keyed, 1008);
        assert_eq!(w.asked(), 6);
        w.status(&keyed, 1009);
        assert_eq!(w.asked(), 6);
        // No longer than MAX_AGE.
        w.status(&keyed, 1008 + MAX_AGE.as_secs());
        assert_eq!(w.asked(), 7);
        // `doctor` asks every time, and its answer is the next status's.
        w.answer(Ask::Fresh, &keyed, 1010 + MAX_AGE.as_secs());
        assert_eq!(w.asked(), 8);
        w.status(&keyed, 1011 + MAX_AGE.as_secs());
        assert_eq!(w.asked(), 8);
        // The file holds no value of the environment.
        let text = std::fs::read_to_string(&w.file).unwrap();
        assert!(
            !text.contains("sk-x") && text.contains("\"codex\""),
            "{text}"
        );
    }

    /// iapeer's own write to a file the key reads (`create`'s trust entry in Codex's
    /// `config.toml`) keeps the answer under the new key, as old as it was; an answer no
    /// longer kept under the key from before the write is left alone.
    #[test]
    fn an_answer_moves_to_the_key_after_iapeers_own_write() {
        let w = World::new();
        let e = env(&[("PATH", "/bin")]);
        let key_now = || key(&w.agent, Some(&w.home), &e).unwrap();
        assert_eq!(w.status(&e, 1000), Login::Out);
        let before = key_now();
        let config = w.home.join(".codex/config.toml");
        std::fs::write(&config, "[projects.\"/p\"]\ntrust_level = \"trusted\"\n").unwrap();
        assert_ne!(key_now(), before, "the trust entry changed the key");
        rekey_in(&w.file, "codex", &before, key_now());
        assert_eq!(w.status(&e, 1001), Login::Out);
        assert_eq!(w.asked(), 1, "asked again after iapeer's own write");
        // As old as it was: asked again MAX_AGE after the first ask, not after the move.
        w.status(&e, 1000 + MAX_AGE.as_secs());
        assert_eq!(w.asked(), 2);
        // Under another key since (a login meanwhile): left alone.
        std::fs::write(&config, "# another write\n").unwrap();
        rekey_in(&w.file, "codex", &before, key_now());
        w.status(&e, 1002 + MAX_AGE.as_secs());
        assert_eq!(w.asked(), 3);
    }

    /// An unknown answer is asked again; a runtime without a command is never kept.
    #[test]
    fn only_yes_and_no_are_kept() {
        assert_eq!(kept_as(&Login::Unknown("timeout".into())), None);
        let gemini = Agent {
            runtime: "gemini",
            bin: PathBuf::from("/nonexistent/gemini"),
        };
        assert_eq!(key(&gemini, Some(Path::new("/h")), &[]), None);
        let kept = Kept {
            key: "k".into(),
            logged_in: true,
            asked_at: 100,
        };
        assert_eq!(remembered(Some(&kept), "k", 100), Some(Login::In));
        assert_eq!(remembered(Some(&kept), "other", 100), None);
        assert_eq!(
            remembered(Some(&kept), "k", 99),
            None,
            "asked in the future"
        );
        assert_eq!(remembered(None, "k", 100), None);
    }

    /// A folder moved by its variable is watched where it moved and where it was.
    #[test]
    fn record_paths_follow_the_variables() {
        let records = runtime_table::CODEX.login.unwrap().records;
        let home = Path::new("/h");
        let none = |_: &str| None;
        let plain = record_paths(records, Some(home), &none);
        assert!(plain.contains(&PathBuf::from("/h/.codex/auth.json")));
        assert!(plain.contains(&PathBuf::from("/etc/codex/config.toml")));
        let moved = |v: &str| (v == "CODEX_HOME").then(|| "/c".to_string());
        let both = record_paths(records, Some(home), &moved);
        assert!(both.contains(&PathBuf::from("/c/auth.json")));
        assert!(both.contains(&PathBuf::from("/h/.codex/auth.json")));
        let oc = runtime_table::OPENCODE.login.unwrap().records;
        let file = |v: &str| (v == "OPENCODE_CONFIG").then(|| "/x/oc.json".to_string());
        assert!(record_paths(oc, None, &file).contains(&PathBuf::from("/x/oc.json")));
    }
}

//! Where an agent runtime's program is found (issue 30 item 1): Claude Code's `claude`, the
//! Codex CLI's `codex`. The daemon looks at every launch, so a CLI installed after it started
//! is found without a restart, and a refusal names every place it looked at, in order:
//!
//! 1. `IAPEER_<RT>_BIN` (when set, the only place: an explicit choice is never second-guessed);
//! 2. this process's `PATH`;
//! 3. the `PATH` of the user's login shell (`$SHELL -l -c …`, else the passwd entry's shell;
//!    stdin from `/dev/null`, at most [`LOGIN_SHELL_TIMEOUT`], remembered for
//!    [`LOGIN_PATH_TTL`]) — where installers put the line that makes their folder reachable;
//! 4. the folders installers use ([`install_folders`]).
//!
//! A program found in 3 or 4 has its folder put first on the child's `PATH`
//! ([`Lookup::path_first`]): a `#!/usr/bin/env node` script needs the `node` installed next
//! to it. [`decide`] is the decision, pure; [`locate`] gathers its inputs. Running the login
//! shell blocks: call [`locate`] off the router thread (the launcher thread, a request's own
//! thread, the CLI).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::adapter::LaunchError;
use crate::runtime_table::{self, Program};

/// The agent runtimes whose program is looked up here, in preference order: the rows of the
/// table of runtimes whose program is [`Program::Located`].
pub fn runtimes() -> impl Iterator<Item = &'static str> {
    runtime_table::located().map(|r| r.name)
}

/// Whether `runtime`'s program is looked up here ([`runtimes`]).
pub fn is_located(runtime: &str) -> bool {
    runtime_table::get(runtime).is_some_and(|r| matches!(r.program, Program::Located { .. }))
}

/// How long the login shell may take to print its `PATH` before it is killed and its `PATH`
/// counts as unknown.
pub const LOGIN_SHELL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a login shell's `PATH` is reused before the shell is asked again (a program
/// installed into a folder already on it is found at once: only the folder list is kept).
pub const LOGIN_PATH_TTL: Duration = Duration::from_secs(30);

/// How long a login shell that answered may take to end before its group is killed.
const REAP_GRACE: Duration = Duration::from_millis(500);

/// The line the login shell prints its `PATH` after (its profile may print too).
const MARK: &str = "IAPEER-LOGIN-PATH=";

/// The result of one lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The runtime (`claude`, `codex`).
    pub runtime: String,
    /// The program found (absolute unless `IAPEER_<RT>_BIN` was relative), or `None`.
    pub program: Option<PathBuf>,
    /// The folder to put first on the child's `PATH`: the program's, when it was found
    /// outside this process's `PATH`.
    pub path_first: Option<PathBuf>,
    /// Every place looked at, in order, each as `<place>: <what it holds>`.
    pub looked: Vec<String>,
    /// The running daemon looked, not this process ([`adopt`]).
    pub by_daemon: bool,
}

impl Lookup {
    /// Why the runtime cannot start, naming every place looked at, with what to do; `None`
    /// when the program was found.
    pub fn refusal(&self) -> Option<String> {
        if self.program.is_some() {
            return None;
        }
        Some(format!(
            "{} is not installed{} — looked at, in order: {} — {}, or choose another runtime",
            self.runtime,
            if self.by_daemon {
                " where the running daemon can find it"
            } else {
                ""
            },
            self.looked.join("; "),
            what_to_do(&self.runtime)
        ))
    }
}

impl Lookup {
    /// The lookup as the daemon's `status` reply gives it.
    pub fn view(&self) -> crate::protocol::AgentProgram {
        crate::protocol::AgentProgram {
            runtime: self.runtime.clone(),
            path: self.program.as_ref().map(|p| p.display().to_string()),
            looked: if self.program.is_some() {
                Vec::new()
            } else {
                self.looked.clone()
            },
        }
    }
}

/// [`locate`] each of [`runtimes`], as the daemon's `status` reply gives them.
pub fn views() -> Vec<crate::protocol::AgentProgram> {
    runtimes().map(|rt| locate(rt).view()).collect()
}

/// `IAPEER_<RT>_BIN`, e.g. `IAPEER_CLAUDE_BIN`.
pub fn bin_var(runtime: &str) -> String {
    format!("IAPEER_{}_BIN", runtime.to_ascii_uppercase())
}

/// What to do when `runtime`'s program is not found where it was looked for. A runtime whose
/// program is not looked for here (a terminal runtime's manifest names it): install it, or fix
/// the manifest.
pub fn what_to_do(runtime: &str) -> String {
    if !is_located(runtime) {
        return format!(
            "install it, or fix \"terminal\".\"command\" in runtimes/{runtime}/runtime.json and run iapeer install-runtime <dir> again"
        );
    }
    format!(
        "install {} so that one of these finds it (or set {} to the program in the daemon's environment and restart it)",
        product(runtime),
        bin_var(runtime)
    )
}

/// The product a runtime's program comes with, for advice (its row's).
fn product(runtime: &str) -> &'static str {
    runtime_table::get(runtime).map_or("its program", |r| r.product())
}

/// Why the login shell's `PATH` is unknown. `Display` is the reason the lookup quotes.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoginPathError {
    /// Neither `SHELL` nor the passwd entry names a shell.
    #[error("no login shell: SHELL is not set and passwd names none")]
    NoShell,
    /// The shell could not be started (shared: the answer is remembered).
    #[error("{shell} -l cannot start: {source}")]
    Spawn {
        /// The shell.
        shell: PathBuf,
        /// The underlying error.
        source: std::sync::Arc<std::io::Error>,
    },
    /// The shell printed no marked `PATH` line.
    #[error("{0} -l printed no PATH")]
    NoPath(PathBuf),
    /// The shell did not answer in time (seconds).
    #[error("{shell} -l did not answer within {secs}s")]
    Timeout {
        /// The shell.
        shell: PathBuf,
        /// The time allowed, seconds.
        secs: u64,
    },
}

/// The inputs of [`decide`].
pub struct Inputs<'a> {
    /// The runtime, which is also the program's name (`claude`, `codex`).
    pub runtime: &'a str,
    /// `IAPEER_<RT>_BIN` when set and not empty.
    pub explicit: Option<&'a OsStr>,
    /// This process's `PATH`.
    pub own_path: Option<&'a OsStr>,
    /// The login shell's `PATH` (asked only when 1 and 2 find nothing): `Ok((shell, PATH))`,
    /// or why it is unknown.
    pub login_path: &'a dyn Fn() -> Result<(String, OsString), LoginPathError>,
    /// The installers' folders, in order.
    pub folders: &'a [PathBuf],
    /// Whether a path is an executable file.
    pub is_executable: &'a dyn Fn(&Path) -> bool,
}

/// Which candidate wins and what was looked at (pure, given its closures): see the module
/// documentation for the order.
pub fn decide(inp: &Inputs) -> Lookup {
    let rt = inp.runtime;
    let mut out = Lookup {
        runtime: rt.to_string(),
        program: None,
        path_first: None,
        looked: Vec::new(),
        by_daemon: false,
    };
    let var = bin_var(rt);
    if let Some(p) = inp.explicit {
        let p = PathBuf::from(p);
        if (inp.is_executable)(&p) {
            out.program = Some(p);
        } else {
            out.looked
                .push(format!("{var}={} (not an executable file)", p.display()));
        }
        return out;
    }
    out.looked.push(format!("{var} (not set)"));
    let in_path = |path: &OsStr| {
        std::env::split_paths(path)
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| d.join(rt))
            .find(|c| (inp.is_executable)(c))
    };
    match inp.own_path {
        Some(path) => {
            if let Some(p) = in_path(path) {
                out.program = Some(p);
                return out;
            }
            out.looked
                .push(format!("the daemon's PATH ({})", path.to_string_lossy()));
        }
        None => out.looked.push("the daemon's PATH (not set)".into()),
    }
    match (inp.login_path)() {
        Ok((shell, path)) => {
            if let Some(p) = in_path(&path) {
                out.path_first = p.parent().map(Path::to_path_buf);
                out.program = Some(p);
                return out;
            }
            out.looked.push(format!(
                "the PATH of the login shell {shell} ({})",
                path.to_string_lossy()
            ));
        }
        Err(why) => out.looked.push(format!("the login shell's PATH ({why})")),
    }
    for dir in inp.folders {
        let c = dir.join(rt);
        if (inp.is_executable)(&c) {
            out.path_first = Some(dir.clone());
            out.program = Some(c);
            return out;
        }
        out.looked.push(dir.display().to_string());
    }
    out
}

/// The folders installers put agent CLIs in, in the order looked at: `~/.local/bin` (Claude
/// Code's installer), `~/.claude/local` (its older local install), npm's global prefix from
/// `~/.npmrc` (`prefix=`), `~/.npm-global/bin`, `~/.bun/bin`, `~/.volta/bin`,
/// `/usr/local/bin`, `/opt/homebrew/bin`. Reads `~/.npmrc` only.
pub fn install_folders(home: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(h) = home {
        out.push(h.join(".local/bin"));
        out.push(h.join(".claude/local"));
        if let Some(prefix) = std::fs::read_to_string(h.join(".npmrc"))
            .ok()
            .and_then(|t| npm_prefix(&t, h))
        {
            out.push(prefix.join("bin"));
        }
        for d in [".npm-global/bin", ".bun/bin", ".volta/bin"] {
            out.push(h.join(d));
        }
    }
    out.push("/usr/local/bin".into());
    out.push("/opt/homebrew/bin".into());
    let mut seen = std::collections::HashSet::new();
    out.retain(|d| seen.insert(d.clone()));
    out
}

/// The `prefix=` of an `.npmrc` (`~/` expanded against `home`), pure.
fn npm_prefix(npmrc: &str, home: &Path) -> Option<PathBuf> {
    let v = npmrc.lines().rev().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "prefix").then(|| v.trim().trim_matches('"').to_string())
    })?;
    match v.strip_prefix("~/") {
        Some(rest) => Some(home.join(rest)),
        None if v.starts_with('/') => Some(PathBuf::from(v)),
        None => None,
    }
}

/// The running daemon's view, once [`adopt`]ed.
static ADOPTED: std::sync::OnceLock<Vec<crate::protocol::AgentProgram>> =
    std::sync::OnceLock::new();

/// Judge with the running daemon's view (its `status` reply's `agents`) instead of this
/// process's from now on: the CLI's `create`, `init` and `add-runtime` do, so a peer is made
/// on an agent runtime exactly when the daemon that wakes it finds the program (issue 30
/// item 1). The first call wins.
pub fn adopt(views: Vec<crate::protocol::AgentProgram>) {
    let _ = ADOPTED.set(views);
}

impl Lookup {
    /// The lookup a daemon's `status` reply gave.
    fn from_view(v: &crate::protocol::AgentProgram) -> Lookup {
        Lookup {
            runtime: v.runtime.clone(),
            program: v.path.as_ref().map(PathBuf::from),
            path_first: None,
            looked: v.looked.clone(),
            by_daemon: true,
        }
    }
}

/// Look `runtime`'s program up now, with this process's environment (blocks up to
/// [`LOGIN_SHELL_TIMEOUT`] when the login shell must be asked), or as the daemon found it
/// once its view is [`adopt`]ed.
pub fn locate(runtime: &str) -> Lookup {
    if let Some(v) = ADOPTED
        .get()
        .and_then(|views| views.iter().find(|v| v.runtime == runtime))
    {
        return Lookup::from_view(v);
    }
    let explicit = std::env::var_os(bin_var(runtime)).filter(|v| !v.is_empty());
    let own_path = std::env::var_os("PATH");
    let home = crate::paths::home_dir();
    let folders = install_folders(home.as_deref());
    decide(&Inputs {
        runtime,
        explicit: explicit.as_deref(),
        own_path: own_path.as_deref(),
        login_path: &login_path,
        folders: &folders,
        is_executable: &super::claude::is_executable,
    })
}

/// Read the login shell's `PATH` on a thread of its own, so it is remembered before the first
/// [`locate`] needs it (the daemon calls this at start). Logs what it found.
pub fn prime() {
    let spawned =
        std::thread::Builder::new()
            .name("login-path".into())
            .spawn(|| match login_path() {
                Ok((shell, path)) => {
                    log::info!(
                        "the login shell {shell} has PATH={}",
                        path.to_string_lossy()
                    )
                }
                Err(why) => log::warn!("cannot read the login shell's PATH: {why}"),
            });
    if let Err(e) = spawned {
        log::warn!("cannot start a thread to read the login shell's PATH: {e}");
    }
}

/// The user's login shell: `$SHELL`, else the passwd entry's.
fn login_shell() -> Option<PathBuf> {
    std::env::var_os("SHELL")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.shell)
        })
}

/// The login shell's `PATH`, remembered for [`LOGIN_PATH_TTL`] per shell and home.
fn login_path() -> Result<(String, OsString), LoginPathError> {
    type Cached = (
        Instant,
        PathBuf,
        Option<PathBuf>,
        Result<OsString, LoginPathError>,
    );
    static CACHE: Mutex<Option<Cached>> = Mutex::new(None);
    let shell = login_shell().ok_or(LoginPathError::NoShell)?;
    let home = crate::paths::home_dir();
    let label = shell.display().to_string();
    {
        let cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, s, h, r)) = cache.as_ref() {
            if at.elapsed() < LOGIN_PATH_TTL && *s == shell && *h == home {
                return r.clone().map(|p| (label, p));
            }
        }
    }
    let r = ask_login_shell(&shell);
    *CACHE.lock().unwrap_or_else(|e| e.into_inner()) =
        Some((Instant::now(), shell, home, r.clone()));
    r.map(|p| (label, p))
}

/// Run `shell -l -c` printing `PATH` after [`MARK`], with stdin from `/dev/null`, in its own
/// process group. Its answer counts as soon as the marked line is whole (a process the profile
/// left holding the pipe is not waited for); the group is killed when the shell has not
/// answered within [`LOGIN_SHELL_TIMEOUT`], or still runs [`REAP_GRACE`] after answering.
/// (Unlike `crate::child`, which keeps the whole output, this never waits for the pipe's end.)
fn ask_login_shell(shell: &Path) -> Result<OsString, LoginPathError> {
    use std::io::Read;
    let script = if shell.file_name().is_some_and(|n| n == "fish") {
        format!("printf '\\n%s%s\\n' '{MARK}' (string join : $PATH)")
    } else {
        format!("printf '\\n%s%s\\n' '{MARK}' \"$PATH\"")
    };
    let mut child = crate::child::spawn_leader(
        Command::new(shell).args(["-l", "-c", &script]),
        Stdio::piped(),
        Stdio::null(),
    )
    .map_err(|e| LoginPathError::Spawn {
        shell: shell.to_path_buf(),
        source: std::sync::Arc::new(e),
    })?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let (mut out, mut chunk) = (Vec::new(), [0u8; 4096]);
        loop {
            match stdout.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
            }
            if let Some(p) = printed_path(&out) {
                let _ = tx.send(Some(p));
                return;
            }
        }
        let _ = tx.send(printed_path(&out));
    });
    let answer = rx.recv_timeout(LOGIN_SHELL_TIMEOUT);
    let grace = Instant::now() + REAP_GRACE;
    while answer.is_ok() && Instant::now() < grace && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(5));
    }
    if matches!(child.try_wait(), Ok(None)) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.wait();
    match answer {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(LoginPathError::NoPath(shell.to_path_buf())),
        Err(_) => Err(LoginPathError::Timeout {
            shell: shell.to_path_buf(),
            secs: LOGIN_SHELL_TIMEOUT.as_secs(),
        }),
    }
}

/// The `PATH` a login shell printed after [`MARK`] (its last such whole line), pure.
fn printed_path(out: &[u8]) -> Option<OsString> {
    use std::os::unix::ffi::OsStrExt;
    let whole = &out[..out.iter().rposition(|b| *b == b'\n')?];
    whole
        .split(|b| *b == b'\n')
        .rev()
        .find_map(|l| l.strip_prefix(MARK.as_bytes()))
        .filter(|p| !p.is_empty())
        .map(|p| OsStr::from_bytes(p).to_owned())
}

/// An agent adapter's program and the conversation it is bound to (issue 32): what the
/// claude, codex, gemini and opencode adapters hold, and how each makes the copy
/// [`crate::adapter::Adapter::for_conversation`] returns.
#[derive(Debug, Clone)]
pub struct Bound {
    program: PathBuf,
    conversation: Option<String>,
}

impl Bound {
    /// `program` (not checked until a launch), bound to no conversation yet.
    pub fn new(program: PathBuf) -> Bound {
        Bound {
            program,
            conversation: None,
        }
    }

    /// The same program bound to the conversation `id`.
    pub fn to(&self, id: &str) -> Bound {
        Bound {
            program: self.program.clone(),
            conversation: Some(id.to_string()),
        }
    }

    /// The program, as a launch command names it.
    pub fn program(&self) -> OsString {
        self.program.clone().into_os_string()
    }

    /// The bound conversation's id, if any.
    pub fn conversation(&self) -> Option<&str> {
        self.conversation.as_deref()
    }

    /// The id a resume names: the bound conversation's, never the folder's newest (that may
    /// be a person's conversation, issue 32 item 1).
    ///
    /// Errors: [`LaunchError::ConversationNotRecorded`] when none is bound; `missing(id)` when
    /// `resumable` (asked only then) says the runtime's own record of it is gone.
    pub fn resume_id(
        &self,
        resumable: impl FnOnce() -> bool,
        missing: fn(String) -> LaunchError,
    ) -> Result<&str, LaunchError> {
        let id = self
            .conversation()
            .ok_or(LaunchError::ConversationNotRecorded)?;
        if !resumable() {
            return Err(missing(id.to_string()));
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resume names the bound conversation; unbound, nothing is resumed and the runtime's
    /// records are not looked at; bound but gone from them, the runtime's own error.
    #[test]
    fn a_resume_needs_a_bound_conversation_the_runtime_still_has() {
        let unbound = Bound::new(PathBuf::from("codex"));
        let asked = std::cell::Cell::new(false);
        let looked = || {
            asked.set(true);
            true
        };
        assert!(matches!(
            unbound.resume_id(looked, LaunchError::CodexSessionMissing),
            Err(LaunchError::ConversationNotRecorded)
        ));
        assert!(
            !asked.get(),
            "an unbound adapter asked the runtime's records"
        );
        let bound = unbound.to("c-1");
        assert_eq!(
            bound
                .resume_id(|| true, LaunchError::CodexSessionMissing)
                .unwrap(),
            "c-1"
        );
        assert!(matches!(
            bound.resume_id(|| false, LaunchError::CodexSessionMissing),
            Err(LaunchError::CodexSessionMissing(id)) if id == "c-1"
        ));
    }

    fn run(
        explicit: Option<&str>,
        own: Option<&str>,
        login: Result<&str, LoginPathError>,
        folders: &[&str],
        exists: &[&str],
    ) -> Lookup {
        let folders: Vec<PathBuf> = folders.iter().map(PathBuf::from).collect();
        let login = || {
            login
                .clone()
                .map(|p| ("/bin/bash".to_string(), OsString::from(p)))
        };
        let is_exec = |p: &Path| exists.iter().any(|e| Path::new(e) == p);
        decide(&Inputs {
            runtime: "claude",
            explicit: explicit.map(OsStr::new),
            own_path: own.map(OsStr::new),
            login_path: &login,
            folders: &folders,
            is_executable: &is_exec,
        })
    }

    #[test]
    fn the_first_place_that_has_the_program_wins_in_order() {
        let all = ["/own/claude", "/login/claude", "/well/claude", "/x/claude"];
        let r = run(
            Some("/x/claude"),
            Some("/own"),
            Ok("/login"),
            &["/well"],
            &all,
        );
        assert_eq!(r.program, Some("/x/claude".into()));
        assert_eq!(r.path_first, None);
        let r = run(None, Some("/a:/own"), Ok("/login"), &["/well"], &all);
        assert_eq!(r.program, Some("/own/claude".into()));
        assert_eq!(r.path_first, None, "on the daemon's PATH: its PATH is kept");
        let r = run(None, Some("/a"), Ok("/b:/login"), &["/well"], &all);
        assert_eq!(r.program, Some("/login/claude".into()));
        assert_eq!(r.path_first, Some("/login".into()));
        let r = run(None, Some("/a"), Ok("/b"), &["/none", "/well"], &all);
        assert_eq!(r.program, Some("/well/claude".into()));
        assert_eq!(r.path_first, Some("/well".into()));
        assert_eq!(r.refusal(), None);
    }

    #[test]
    fn an_explicit_program_is_the_only_place_looked_at() {
        let r = run(
            Some("/x/claude"),
            Some("/own"),
            Ok("/login"),
            &[],
            &["/own/claude"],
        );
        assert_eq!(r.program, None);
        assert_eq!(
            r.looked,
            ["IAPEER_CLAUDE_BIN=/x/claude (not an executable file)"]
        );
    }

    #[test]
    fn the_refusal_names_every_place_in_order() {
        let r = run(
            None,
            Some("/usr/bin:/bin"),
            Ok("/usr/bin:/opt/x"),
            &["/h/.local/bin", "/usr/local/bin"],
            &[],
        );
        assert_eq!(
            r.looked,
            [
                "IAPEER_CLAUDE_BIN (not set)",
                "the daemon's PATH (/usr/bin:/bin)",
                "the PATH of the login shell /bin/bash (/usr/bin:/opt/x)",
                "/h/.local/bin",
                "/usr/local/bin",
            ]
        );
        let why = r.refusal().unwrap();
        assert!(why.starts_with("claude is not installed — looked at, in order: IAPEER_CLAUDE_BIN (not set); the daemon's PATH (/usr/bin:/bin); "), "{why}");
        assert!(why.contains("install Claude Code"), "{why}");
        let r = run(
            None,
            None,
            Err(LoginPathError::Timeout {
                shell: "/bin/zsh".into(),
                secs: 2,
            }),
            &[],
            &[],
        );
        assert_eq!(
            r.looked,
            [
                "IAPEER_CLAUDE_BIN (not set)",
                "the daemon's PATH (not set)",
                "the login shell's PATH (/bin/zsh -l did not answer within 2s)",
            ]
        );
    }

    #[test]
    fn the_daemons_view_says_the_daemon_looked() {
        let v = crate::protocol::AgentProgram {
            runtime: "codex".into(),
            path: None,
            looked: vec!["IAPEER_CODEX_BIN (not set)".into()],
        };
        let why = Lookup::from_view(&v).refusal().unwrap();
        assert!(
            why.starts_with("codex is not installed where the running daemon can find it — looked at, in order: IAPEER_CODEX_BIN (not set) — install the Codex CLI"),
            "{why}"
        );
        assert_eq!(Lookup::from_view(&v).view(), v);
    }

    #[test]
    fn the_login_shell_is_asked_only_when_needed() {
        let asked = std::cell::Cell::new(false);
        let login = || {
            asked.set(true);
            Err::<(String, OsString), _>(LoginPathError::NoShell)
        };
        let r = decide(&Inputs {
            runtime: "codex",
            explicit: None,
            own_path: Some(OsStr::new("/own")),
            login_path: &login,
            folders: &[],
            is_executable: &|p| p == Path::new("/own/codex"),
        });
        assert_eq!(r.program, Some("/own/codex".into()));
        assert!(!asked.get());
    }

    #[test]
    fn the_printed_path_is_the_last_marked_line() {
        let out = b"welcome to my shell\nIAPEER-LOGIN-PATH=/old\nmotd\n\nIAPEER-LOGIN-PATH=/a:/b\n";
        assert_eq!(printed_path(out), Some(OsString::from("/a:/b")));
        assert_eq!(printed_path(b"nothing\n"), None);
        assert_eq!(printed_path(b"IAPEER-LOGIN-PATH=\n"), None);
        assert_eq!(
            printed_path(b"IAPEER-LOGIN-PATH=/a:/par"),
            None,
            "not whole yet"
        );
    }

    #[test]
    fn npm_prefix_reads_the_last_prefix_line() {
        let h = Path::new("/h");
        assert_eq!(
            npm_prefix("registry=x\nprefix=~/.npm-g\n", h),
            Some("/h/.npm-g".into())
        );
        assert_eq!(
            npm_prefix("prefix = \"/opt/npm\"", h),
            Some("/opt/npm".into())
        );
        assert_eq!(npm_prefix("prefix=relative", h), None);
        assert_eq!(npm_prefix("", h), None);
    }

    /// A login shell (bash run with its HOME in a temp folder) whose `~/.bash_profile` is
    /// `profile`; the folder to remove after.
    fn shell_with_profile(tag: &str, profile: &str) -> (PathBuf, PathBuf) {
        let home = std::env::temp_dir().join(format!("iapeer-login-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".bash_profile"), profile).unwrap();
        // ask_login_shell passes this process's HOME on: the wrapper sets the temp one.
        let shell = home.join("sh");
        crate::testkit::write_program(
            &shell,
            &format!("#!/bin/sh\nHOME={} exec bash \"$@\"\n", home.display()),
        );
        (shell, home)
    }

    #[test]
    fn a_real_login_shell_prints_its_profile_path() {
        let (shell, home) = shell_with_profile(
            "talks",
            "echo hello from the profile\nexport PATH=\"/from/profile:$PATH\"\n",
        );
        let path = ask_login_shell(&shell).unwrap();
        assert!(
            path.to_string_lossy().starts_with("/from/profile:"),
            "{path:?}"
        );
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn a_profile_that_leaves_a_process_on_the_pipe_or_hangs_does_not_hold_the_lookup() {
        // A job the profile leaves running keeps the pipe open: the answer still counts at once.
        let (shell, home) = shell_with_profile("job", "sleep 30 &\nexport PATH=/job:$PATH\n");
        let t = Instant::now();
        let path = ask_login_shell(&shell).unwrap();
        assert!(path.to_string_lossy().starts_with("/job:"), "{path:?}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
        let _ = std::fs::remove_dir_all(&home);
        // A profile that never ends is cut off at the timeout.
        let (shell, home) = shell_with_profile("hang", "sleep 30\n");
        let t = Instant::now();
        let why = ask_login_shell(&shell).unwrap_err().to_string();
        assert!(why.ends_with("-l did not answer within 2s"), "{why}");
        assert!(
            t.elapsed() < LOGIN_SHELL_TIMEOUT + Duration::from_secs(1),
            "{:?}",
            t.elapsed()
        );
        let _ = std::fs::remove_dir_all(&home);
    }
}

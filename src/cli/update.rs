//! `iapeer update` and `iapeer rollback` (spec 08 §1): swap the installed binary (atomic, one
//! `iapeer.prev` kept), restart the daemon on it — through the service manager when the
//! service is loaded, else `shutdown` + `daemon --detach` — and verify its health. `update`
//! refuses while an agent is mid-turn unless `--force`.

use std::path::{Path, PathBuf};

use super::client::Client;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{background, health, paths, print, CliError, CliResult};
use crate::fsutil::{self, MODE_SHARED};
use crate::host::binary::{self, Layout};
use crate::host::control::{self, ServiceCtl};
use crate::host::install::{self, InstallEnv, ServiceOutcome};
use crate::host::service::{Manager, WriteDecision};
use crate::paths::Paths;
use crate::protocol::{call, ListReply, SessionInfo};

/// The service manager and whether it has the service loaded, asked through the seam.
pub(super) struct ServiceSide {
    /// The seam.
    pub ctl: ServiceCtl,
    /// The user id.
    pub uid: u32,
    /// The manager and its definition file, where one is available.
    pub file: Option<(Manager, PathBuf)>,
    /// The manager that has the service loaded now.
    pub loaded: Option<Manager>,
    /// The manager the service is enabled in (`iapeer onboard`), running or not.
    pub enabled: Option<Manager>,
    /// What install would write (the service's command and environment).
    pub env: InstallEnv,
}

impl ServiceSide {
    /// Ask the seam about this machine's service.
    pub fn gather(paths: &Paths) -> Result<ServiceSide, CliError> {
        let env = InstallEnv::from_process(paths)?;
        let ctl = ServiceCtl::from_env();
        let uid = nix::unistd::getuid().as_raw();
        let file = env.service_file();
        let state = file
            .as_ref()
            .filter(|(_, f)| f.exists())
            .map(|(m, _)| (*m, ctl.state(*m, uid)));
        let loaded = state.as_ref().filter(|(_, s)| s.loaded).map(|(m, _)| *m);
        let enabled = state.as_ref().filter(|(_, s)| s.enabled).map(|(m, _)| *m);
        Ok(ServiceSide {
            ctl,
            uid,
            file,
            loaded,
            enabled,
            env,
        })
    }
}

/// How to restart the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// The service manager has it loaded: restart it there.
    Service(Manager),
    /// A daemon runs outside a service manager: `shutdown`, then `daemon --detach` of the
    /// installed binary.
    Detached,
    /// No daemon runs: nothing to restart.
    NotRunning,
}

/// The way to restart, from the manager that has the service loaded and whether a daemon
/// answers.
pub fn how_to_restart(loaded: Option<Manager>, daemon_runs: bool) -> Restart {
    match (loaded, daemon_runs) {
        (Some(m), _) => Restart::Service(m),
        (None, true) => Restart::Detached,
        (None, false) => Restart::NotRunning,
    }
}

/// Restart the daemon on the installed binary and verify its health; prints what it did.
/// `advice` ends a failure message (`update` advises a rollback, [`rollback_advice`]). With
/// `start_if_stopped` (rollback, which follows a failed update) a daemon that is not running
/// is started with `daemon --detach`.
fn restart_and_verify(
    paths: &Paths,
    layout: &Layout,
    side: &ServiceSide,
    advice: &str,
    start_if_stopped: bool,
) -> CliResult {
    let old = health::ping(paths).map(|p| p.pid);
    let how = match how_to_restart(side.loaded, old.is_some()) {
        Restart::NotRunning if start_if_stopped => Restart::Detached,
        how => how,
    };
    match how {
        Restart::NotRunning => {
            return print(
                "daemon: none was running, so none was started (start it with: iapeer onboard)\n",
            )
        }
        Restart::Service(m) => {
            let changed = point_service_at(layout, side)?;
            let file = side
                .file
                .as_ref()
                .map(|(_, f)| f.clone())
                .unwrap_or_default();
            side.ctl
                .run_all(&control::restart_with(m, &file, side.uid, changed))
                .map_err(|e| {
                    CliError::failed(format!("cannot restart the service: {e}{advice}"))
                })?;
        }
        Restart::Detached => {
            background::stop(paths)?;
            if let Err(e) = background::start_detached(paths, &layout.bin()) {
                let why = match e {
                    CliError::Failed(m) => m,
                    other => return Err(other),
                };
                eprintln!("iapeer: the daemon did not start again: {why}{advice}");
                return Err(CliError::Exit(1));
            }
        }
    }
    match health::wait_healthy(paths, old) {
        Ok(pong) => print(&format!(
            "daemon: {}, healthy (pid {}, iapeer {})\n",
            match (how, old) {
                (Restart::Service(m), _) => format!("restarted by {}", m.name()),
                (_, Some(_)) => "restarted with `iapeer daemon --detach`".to_string(),
                (_, None) => "started with `iapeer daemon --detach`".to_string(),
            },
            pong.pid,
            pong.version
        )),
        Err(e) => {
            eprintln!("iapeer: the daemon is NOT healthy after the restart: {e}{advice}");
            Err(CliError::Exit(1))
        }
    }
}

/// Make the loaded service's definition run the installed binary (it names the binary that
/// ran `install` or `onboard`, which may be a build folder): rewritten only when the bytes
/// change and only when it is ours. Returns whether it changed.
fn point_service_at(layout: &Layout, side: &ServiceSide) -> Result<bool, CliError> {
    let Some((manager, file)) = &side.file else {
        return Ok(false);
    };
    let mut spec = side.env.spec.clone();
    spec.bin = layout.bin();
    let dir = file.parent().unwrap_or(file);
    match install::write_service(*manager, dir, &spec)? {
        ServiceOutcome::Written {
            decision: WriteDecision::Create | WriteDecision::Update,
            ..
        } => {
            print(&format!(
                "service: {} now runs {}\n",
                file.display(),
                spec.bin.display()
            ))?;
            Ok(true)
        }
        ServiceOutcome::Foreign { .. } => {
            eprintln!(
                "iapeer: {} was not written by iapeer: it is restarted as it is, and runs whatever it names",
                file.display()
            );
            Ok(false)
        }
        _ => Ok(false),
    }
}

/// What the positional of `update` names.
///
/// Errors: nothing given, a version (the registry is out of reach), or no file there — each
/// with what to do.
pub fn resolve_source(
    arg: Option<&str>,
    exists: impl Fn(&Path) -> bool,
) -> Result<PathBuf, String> {
    const HOW: &str =
        "build it and give the path of the binary, e.g. iapeer update target/release/iapeer";
    let Some(arg) = arg else {
        return Err(format!(
            "give the new build to install; installing the latest published version from the package registry (cargo) is not available in this version: {HOW}"
        ));
    };
    if exists(Path::new(arg)) {
        return Ok(PathBuf::from(arg));
    }
    let v = arg.strip_prefix('v').unwrap_or(arg);
    if v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
    {
        return Err(format!(
            "installing version {arg} from the package registry (cargo) is not available in this version: {HOW}"
        ));
    }
    Err(format!("there is no file at {arg}: {HOW}"))
}

/// The version `<bin> --version` prints, as `iapeer X.Y.Z` ([`version_of`]).
///
/// Errors: it does not run, or prints something else.
fn probe_version(bin: &Path) -> Result<String, String> {
    let out = std::process::Command::new(bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if let (true, Some(v)) = (out.status.success(), version_of(&text)) {
        Ok(format!("iapeer {v}"))
    } else {
        Err(format!(
            "{} is not an iapeer binary (`--version` answered {text:?})",
            bin.display()
        ))
    }
}

/// The version in an iapeer build's `--version` answer: `iapeer X.Y.Z[-pre]` as this build
/// prints it (spec 07), or the bare `X.Y.Z` the original and the builds of issues 11–30 printed. `None` for
/// anything else (not an iapeer build).
pub fn version_of(text: &str) -> Option<&str> {
    let v = text.trim();
    let v = v.strip_prefix("iapeer ").unwrap_or(v).trim();
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    let numeric = parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    numeric.then_some(v)
}

/// The live sessions (empty when no daemon runs).
fn live_sessions(paths: &Paths) -> Result<Vec<SessionInfo>, CliError> {
    let Ok(mut c) = Client::connect(paths) else {
        return Ok(Vec::new());
    };
    let list: ListReply = c
        .request(&call::List {}, |_| {})?
        .into_result()
        .map_err(|e| {
            CliError::failed(format!(
                "the daemon refused to list its sessions: {}",
                e.error
            ))
        })?;
    Ok(list.sessions)
}

/// One line listing the sessions with their state.
fn sessions_line(sessions: &[SessionInfo]) -> String {
    if sessions.is_empty() {
        return "live sessions: none\n".into();
    }
    let each: Vec<String> = sessions
        .iter()
        .map(|s| {
            format!(
                "{} ({})",
                s.identity,
                if s.busy {
                    "mid-turn"
                } else if s.status == "booting" {
                    "booting"
                } else {
                    "idle"
                }
            )
        })
        .collect();
    format!("live sessions: {}\n", each.join(", "))
}

/// The installed man page and completions, regenerated by the new binary where present.
fn regenerate(layout: &Layout) -> Vec<String> {
    let mut problems = Vec::new();
    for (file, what) in layout.generated() {
        if !file.exists() {
            continue;
        }
        let out = std::process::Command::new(layout.bin())
            .args(["--generate", what])
            .output();
        match out {
            Ok(o) if o.status.success() && !o.stdout.is_empty() => {
                if let Err(e) = fsutil::write_atomic(&file, &o.stdout, MODE_SHARED) {
                    problems.push(format!("cannot write {}: {e}", file.display()));
                }
            }
            _ => problems.push(format!("cannot regenerate {}", file.display())),
        }
    }
    problems
}

/// What ends `update`'s failure messages: how to go back. Not `iapeer rollback`: `iapeer`
/// is the new binary now, the one that failed, so the advice names the previous binary,
/// which runs `rollback` itself.
fn rollback_advice(layout: &Layout) -> String {
    format!(
        " — go back to the previous binary with: {} rollback (`iapeer` is the new binary now)",
        crate::inbox::show::shell_word(&layout.prev().to_string_lossy())
    )
}

/// Run `iapeer update`.
pub fn update(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let layout = Layout::from_env()?;
    let src = resolve_source(inv.positional(args::PATH_OR_VERSION), Path::exists)
        .map_err(CliError::failed)?;
    let version = probe_version(&src).map_err(CliError::failed)?;
    let dest = layout.bin();
    if !dest.exists() {
        return Err(CliError::failed(format!(
            "iapeer is not installed at {} — install it first with scripts/install.sh (or set IAPEER_BIN_DIR to where it is)",
            dest.display()
        )));
    }
    let same = std::fs::read(&src).ok() == std::fs::read(&dest).ok();
    if same {
        return print(&format!(
            "{} is this build already ({version}): nothing to do\n",
            dest.display()
        ));
    }
    let sessions = live_sessions(&paths)?;
    print(&sessions_line(&sessions))?;
    let busy: Vec<&str> = sessions
        .iter()
        .filter(|s| s.busy)
        .map(|s| s.identity.as_str())
        .collect();
    if !busy.is_empty() && !inv.flag(flags::UPDATE_FORCE) {
        return Err(CliError::failed(format!(
            "not updated: {} mid-turn ({}); a restart would cut that turn short — try again when it is done, or pass --force (conversations resume by topic after the restart)",
            if busy.len() == 1 { "an agent is" } else { "agents are" },
            busy.join(", ")
        )));
    }
    let side = ServiceSide::gather(&paths)?;
    binary::replace(&layout, &src)?;
    print(&format!(
        "binary: {} is now {version} (the previous one is {})\n",
        dest.display(),
        layout.prev().display()
    ))?;
    let advice = rollback_advice(&layout);
    // The copy that was installed must run too (a copy cut short, a folder mounted noexec):
    // the daemon is not restarted on a binary that cannot start.
    if let Err(e) = probe_version(&dest) {
        eprintln!("iapeer update: the installed binary does not run: {e}; the daemon was not restarted{advice}");
        return Err(CliError::Exit(1));
    }
    for p in regenerate(&layout) {
        eprintln!("iapeer update: {p}");
    }
    restart_and_verify(&paths, &layout, &side, &advice, false)
}

/// Run `iapeer rollback`.
pub fn rollback(_inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let layout = Layout::from_env()?;
    let side = ServiceSide::gather(&paths)?;
    binary::restore_prev(&layout)?;
    let version = probe_version(&layout.bin()).unwrap_or_else(|e| e);
    print(&format!(
        "binary: {} is the previous one again ({version})\n",
        layout.bin().display()
    ))?;
    for p in regenerate(&layout) {
        eprintln!("iapeer rollback: {p}");
    }
    restart_and_verify(
        &paths,
        &layout,
        &side,
        " — there is no older binary to go back to; see the daemon's logs",
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_answer_is_read_bare_or_with_the_old_prefix() {
        for (answer, read) in [
            ("0.4.86\n", Some("0.4.86")),
            ("iapeer 0.1.0", Some("0.1.0")),
            ("1.2.3-rc.1", Some("1.2.3-rc.1")),
            ("2.1.332 (Claude Code)", None),
            ("iapeer", None),
            ("1.2", None),
        ] {
            assert_eq!(version_of(answer), read, "{answer:?}");
        }
    }

    #[test]
    fn the_source_is_a_file_and_a_version_is_refused_with_what_to_do() {
        let exists = |p: &Path| p == Path::new("target/release/iapeer");
        assert_eq!(
            resolve_source(Some("target/release/iapeer"), exists),
            Ok(PathBuf::from("target/release/iapeer"))
        );
        let e = resolve_source(Some("0.3.1"), exists).unwrap_err();
        assert!(
            e.starts_with("installing version 0.3.1 from the package registry"),
            "{e}"
        );
        assert!(e.contains("iapeer update target/release/iapeer"), "{e}");
        assert!(resolve_source(Some("v1.2.0-rc1"), exists)
            .unwrap_err()
            .starts_with("installing version v1.2.0-rc1"));
        assert!(resolve_source(None, exists)
            .unwrap_err()
            .contains("not available in this version"));
        assert!(resolve_source(Some("/tmp/nope"), exists)
            .unwrap_err()
            .starts_with("there is no file at /tmp/nope"));
    }

    #[test]
    fn the_rollback_advice_names_the_previous_binary_not_the_new_one() {
        let layout = Layout::new(Path::new("/h"), None, None, None);
        assert_eq!(
            rollback_advice(&layout),
            " — go back to the previous binary with: /h/.local/bin/iapeer.prev rollback \
             (`iapeer` is the new binary now)"
        );
        let odd = Layout::new(Path::new("/h"), Some("/my bins"), None, None);
        assert!(rollback_advice(&odd).contains(": '/my bins/iapeer.prev' rollback"));
    }

    #[test]
    fn restart_goes_through_the_manager_that_has_the_service() {
        assert_eq!(
            how_to_restart(Some(Manager::Systemd), true),
            Restart::Service(Manager::Systemd)
        );
        assert_eq!(
            how_to_restart(Some(Manager::Launchd), false),
            Restart::Service(Manager::Launchd)
        );
        assert_eq!(how_to_restart(None, true), Restart::Detached);
        assert_eq!(how_to_restart(None, false), Restart::NotRunning);
    }

    #[test]
    fn sessions_are_listed_with_their_turn_state() {
        let s = |id: &str, busy: bool| SessionInfo {
            identity: id.into(),
            personality: id.into(),
            runtime: "echo".into(),
            status: "live".into(),
            attached: 0,
            pid: 1,
            woke_at_ms: 0,
            last_active_ms: 0,
            busy,
            mode: "fresh".into(),
        };
        assert_eq!(sessions_line(&[]), "live sessions: none\n");
        assert_eq!(
            sessions_line(&[s("echo-a", false), s("echo-b", true)]),
            "live sessions: echo-a (idle), echo-b (mid-turn)\n"
        );
    }
}

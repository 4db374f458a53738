//! The one seam between iapeer and the service manager (spec 08 §1): every `systemctl` and
//! `launchctl` call goes through [`ServiceCtl::run`]. The commands are built by pure functions
//! ([`load_commands`], [`restart_commands`], [`unload_commands`], [`query_commands`]) and the
//! answers read by one ([`read_state`]), so only `run` touches a real program.
//!
//! `IAPEER_SERVICE_CTL` names a program to run instead of the real one (tests, where no service
//! manager runs): it is called with the whole command line, the real program's name first
//! (`$IAPEER_SERVICE_CTL systemctl --user enable --now iapeer`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::service::{Manager, LAUNCHD_LABEL};

/// The systemd unit's name as `systemctl` takes it.
const UNIT: &str = "iapeer";

/// Why a service-manager command did not succeed. `Display` names the command.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// An empty command line.
    #[error("empty service command")]
    Empty,
    /// The program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// `systemctl` or `launchctl`.
        program: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A command exited non-zero.
    #[error("`{command}` failed: {why}")]
    Failed {
        /// The command line.
        command: String,
        /// Its stderr, else its stdout.
        why: String,
    },
}

/// What one call answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CtlOutput {
    /// Exit status 0.
    pub success: bool,
    /// Its stdout, trimmed.
    pub stdout: String,
    /// Its stderr, trimmed.
    pub stderr: String,
}

/// Runs service-manager commands: the real program, or the stand-in named by
/// `IAPEER_SERVICE_CTL`.
#[derive(Debug, Clone, Default)]
pub struct ServiceCtl {
    stand_in: Option<PathBuf>,
}

impl ServiceCtl {
    /// The seam as the environment sets it up.
    pub fn from_env() -> ServiceCtl {
        ServiceCtl {
            stand_in: std::env::var_os("IAPEER_SERVICE_CTL")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        }
    }

    /// Run `cmd` (`cmd[0]` is `systemctl` or `launchctl`) with no input and wait for it.
    ///
    /// Errors: [`CtlError`], the program cannot be started (naming it).
    pub fn run(&self, cmd: &[String]) -> Result<CtlOutput, CtlError> {
        let (program, args) = cmd.split_first().ok_or(CtlError::Empty)?;
        let mut c = match &self.stand_in {
            Some(stand_in) => {
                let mut c = Command::new(stand_in);
                c.arg(program);
                c
            }
            None => Command::new(program),
        };
        let out = c
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| CtlError::Spawn {
                program: program.clone(),
                source,
            })?;
        Ok(CtlOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).trim().to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// Run each command in order; stop at the first failure.
    ///
    /// Errors: [`CtlError`], a command could not run or exited non-zero (the command and its
    /// stderr).
    pub fn run_all(&self, cmds: &[Vec<String>]) -> Result<(), CtlError> {
        for cmd in cmds {
            let out = self.run(cmd)?;
            if !out.success {
                let why = if out.stderr.is_empty() {
                    out.stdout
                } else {
                    out.stderr
                };
                return Err(CtlError::Failed {
                    command: cmd.join(" "),
                    why,
                });
            }
        }
        Ok(())
    }
}

fn words(ws: &[&str]) -> Vec<String> {
    ws.iter().map(|w| w.to_string()).collect()
}

fn launchd_target(uid: u32) -> String {
    format!("gui/{uid}/{LAUNCHD_LABEL}")
}

/// Commands as one shell-like line for people: `a b && c d`.
pub fn as_line(commands: &[Vec<String>]) -> String {
    commands
        .iter()
        .map(|c| c.join(" "))
        .collect::<Vec<_>>()
        .join(" && ")
}

/// The commands that load the written definition and start the daemon: `systemctl --user
/// daemon-reload` and `systemctl --user enable --now iapeer`, or `launchctl bootstrap
/// gui/<uid> <plist>`.
pub fn load_commands(manager: Manager, file: &Path, uid: u32) -> Vec<Vec<String>> {
    match manager {
        Manager::Systemd => vec![
            words(&["systemctl", "--user", "daemon-reload"]),
            words(&["systemctl", "--user", "enable", "--now", UNIT]),
        ],
        Manager::Launchd => vec![vec![
            "launchctl".into(),
            "bootstrap".into(),
            format!("gui/{uid}"),
            file.to_string_lossy().into_owned(),
        ]],
    }
}

/// The command that restarts the loaded service: `systemctl --user restart iapeer` or
/// `launchctl kickstart -k gui/<uid>/com.agfpd.iapeer`.
pub fn restart_commands(manager: Manager, uid: u32) -> Vec<Vec<String>> {
    match manager {
        Manager::Systemd => vec![words(&["systemctl", "--user", "restart", UNIT])],
        Manager::Launchd => vec![vec![
            "launchctl".into(),
            "kickstart".into(),
            "-k".into(),
            launchd_target(uid),
        ]],
    }
}

/// The commands that restart a loaded service, first making the manager read its definition
/// again when it `changed` on disk: systemd `daemon-reload` then `restart`; launchd `bootout`
/// then `bootstrap` (launchd reads a plist only when it is bootstrapped), else `kickstart -k`.
pub fn restart_with(manager: Manager, file: &Path, uid: u32, changed: bool) -> Vec<Vec<String>> {
    match (manager, changed) {
        (_, false) => restart_commands(manager, uid),
        (Manager::Systemd, true) => {
            let mut c = vec![words(&["systemctl", "--user", "daemon-reload"])];
            c.extend(restart_commands(manager, uid));
            c
        }
        (Manager::Launchd, true) => {
            let mut c = unload_commands(manager, uid);
            c.extend(load_commands(manager, file, uid));
            c
        }
    }
}

/// The command that stops the service and unloads it (before its file is removed):
/// `systemctl --user disable --now iapeer` or `launchctl bootout gui/<uid>/com.agfpd.iapeer`.
pub fn unload_commands(manager: Manager, uid: u32) -> Vec<Vec<String>> {
    match manager {
        Manager::Systemd => vec![words(&["systemctl", "--user", "disable", "--now", UNIT])],
        Manager::Launchd => vec![vec![
            "launchctl".into(),
            "bootout".into(),
            launchd_target(uid),
        ]],
    }
}

/// The commands whose answers [`read_state`] reads: `systemctl --user is-enabled iapeer` and
/// `systemctl --user is-active iapeer`, or `launchctl print gui/<uid>/com.agfpd.iapeer`.
pub fn query_commands(manager: Manager, uid: u32) -> Vec<Vec<String>> {
    match manager {
        Manager::Systemd => vec![
            words(&["systemctl", "--user", "is-enabled", UNIT]),
            words(&["systemctl", "--user", "is-active", UNIT]),
        ],
        Manager::Launchd => vec![vec![
            "launchctl".into(),
            "print".into(),
            launchd_target(uid),
        ]],
    }
}

/// Whether the service is loaded, with the manager's own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceState {
    /// systemd: enabled and active (or activating); launchd: `launchctl print` knows it.
    pub loaded: bool,
    /// The user asked for it to run (`iapeer onboard`): systemd `is-enabled` says so (it may
    /// be stopped); launchd: as `loaded` (a job launchd knows is one it runs).
    pub enabled: bool,
    /// What the manager said, e.g. `enabled, active` or `state = running`.
    pub detail: String,
}

/// Read the answers to [`query_commands`] (same order; a command that could not run is
/// `Err`).
pub fn read_state(manager: Manager, answers: &[Result<CtlOutput, CtlError>]) -> ServiceState {
    let word = |i: usize| match answers.get(i) {
        Some(Ok(o)) if !o.stdout.is_empty() => o.stdout.lines().next().unwrap_or("").to_string(),
        Some(Ok(_)) => "unknown".to_string(),
        Some(Err(e)) => e.to_string(),
        None => "not asked".to_string(),
    };
    match manager {
        Manager::Systemd => {
            let enabled = matches!(answers.first(), Some(Ok(o)) if o.success);
            let active = word(1);
            ServiceState {
                loaded: enabled && matches!(active.as_str(), "active" | "activating" | "reloading"),
                enabled,
                detail: format!("{}, {active}", word(0)),
            }
        }
        Manager::Launchd => match answers.first() {
            Some(Ok(o)) if o.success => ServiceState {
                loaded: true,
                enabled: true,
                detail: o
                    .stdout
                    .lines()
                    .map(str::trim)
                    .find(|l| l.starts_with("state = "))
                    .unwrap_or("loaded")
                    .to_string(),
            },
            Some(Ok(_)) => ServiceState {
                loaded: false,
                enabled: false,
                detail: "launchctl does not know it".into(),
            },
            _ => ServiceState {
                loaded: false,
                enabled: false,
                detail: word(0),
            },
        },
    }
}

impl ServiceCtl {
    /// Ask the manager whether the service is loaded ([`query_commands`] → [`read_state`]).
    pub fn state(&self, manager: Manager, uid: u32) -> ServiceState {
        let answers: Vec<_> = query_commands(manager, uid)
            .iter()
            .map(|c| self.run(c))
            .collect();
        read_state(manager, &answers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(stdout: &str) -> Result<CtlOutput, CtlError> {
        Ok(CtlOutput {
            success: true,
            stdout: stdout.into(),
            stderr: String::new(),
        })
    }

    fn fail(stdout: &str) -> Result<CtlOutput, CtlError> {
        Ok(CtlOutput {
            success: false,
            stdout: stdout.into(),
            stderr: String::new(),
        })
    }

    #[test]
    fn commands_are_the_ones_spec_08_names() {
        let plist = Path::new("/Users/u/Library/LaunchAgents/com.agfpd.iapeer.plist");
        let line =
            |cs: Vec<Vec<String>>| -> Vec<String> { cs.iter().map(|c| c.join(" ")).collect() };
        assert_eq!(
            line(load_commands(Manager::Systemd, plist, 501)),
            [
                "systemctl --user daemon-reload",
                "systemctl --user enable --now iapeer"
            ]
        );
        // The commands that are one line each, and that line.
        let single = [
            (
                load_commands(Manager::Launchd, plist, 501),
                "launchctl bootstrap gui/501 /Users/u/Library/LaunchAgents/com.agfpd.iapeer.plist",
            ),
            (
                restart_commands(Manager::Launchd, 501),
                "launchctl kickstart -k gui/501/com.agfpd.iapeer",
            ),
            (
                restart_commands(Manager::Systemd, 501),
                "systemctl --user restart iapeer",
            ),
            (
                unload_commands(Manager::Systemd, 501),
                "systemctl --user disable --now iapeer",
            ),
            (
                unload_commands(Manager::Launchd, 501),
                "launchctl bootout gui/501/com.agfpd.iapeer",
            ),
            (
                query_commands(Manager::Launchd, 501),
                "launchctl print gui/501/com.agfpd.iapeer",
            ),
        ];
        for (commands, want) in single {
            assert_eq!(line(commands), [want]);
        }
        assert_eq!(
            line(restart_with(Manager::Systemd, plist, 501, true)),
            [
                "systemctl --user daemon-reload",
                "systemctl --user restart iapeer"
            ]
        );
        assert_eq!(
            line(restart_with(Manager::Launchd, plist, 501, true)),
            [
                "launchctl bootout gui/501/com.agfpd.iapeer",
                "launchctl bootstrap gui/501 /Users/u/Library/LaunchAgents/com.agfpd.iapeer.plist"
            ]
        );
        assert_eq!(
            restart_with(Manager::Launchd, plist, 501, false),
            restart_commands(Manager::Launchd, 501)
        );
    }

    #[test]
    fn systemd_is_loaded_when_enabled_and_active() {
        let s = read_state(Manager::Systemd, &[ok("enabled"), ok("active")]);
        assert!(s.loaded);
        assert_eq!(s.detail, "enabled, active");
        let s = read_state(Manager::Systemd, &[fail("disabled"), fail("inactive")]);
        assert!(!s.loaded);
        assert!(!s.enabled, "a unit only written by install is not enabled");
        assert_eq!(s.detail, "disabled, inactive");
        let stopped = read_state(Manager::Systemd, &[ok("enabled"), fail("failed")]);
        assert!(!stopped.loaded);
        assert!(stopped.enabled, "enabled and stopped");
        let s = read_state(
            Manager::Systemd,
            &[
                Err(CtlError::Spawn {
                    program: "systemctl".into(),
                    source: std::io::Error::from(std::io::ErrorKind::NotFound),
                }),
                Err(CtlError::Empty),
            ],
        );
        assert!(!s.loaded);
        assert!(s.detail.starts_with("cannot run systemctl"), "{}", s.detail);
    }

    #[test]
    fn launchd_is_loaded_when_print_knows_the_label() {
        let printed = "gui/501/com.agfpd.iapeer = {\n\tactive count = 1\n\tstate = running\n}";
        let s = read_state(Manager::Launchd, &[ok(printed)]);
        assert_eq!(
            s,
            ServiceState {
                loaded: true,
                enabled: true,
                detail: "state = running".into()
            }
        );
        assert!(!read_state(Manager::Launchd, &[fail("Could not find service")]).loaded);
    }

    #[test]
    fn the_stand_in_gets_the_real_program_name_first() {
        let tmp = tempfile::tempdir().unwrap();
        let script = tmp.path().join("ctl");
        crate::testkit::write_program(&script, "#!/bin/sh\necho \"$@\"\n");
        let ctl = ServiceCtl {
            stand_in: Some(script),
        };
        let out = ctl
            .run(&words(&["systemctl", "--user", "is-active", "iapeer"]))
            .unwrap();
        assert_eq!(out.stdout, "systemctl --user is-active iapeer");
        let missing = ServiceCtl {
            stand_in: Some(tmp.path().join("nope")),
        };
        assert!(missing
            .run(&words(&["systemctl"]))
            .unwrap_err()
            .to_string()
            .starts_with("cannot run systemctl"));
    }
}

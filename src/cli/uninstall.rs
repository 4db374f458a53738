//! `iapeer uninstall` (spec 08 §1): stop the daemon (unloading the service), then remove
//! exactly what install created — the binary and `iapeer.prev`, the man page, the
//! completions, the service file when it carries iapeer's ownership mark — and what codex
//! peers added to Codex's `config.toml` (the iapeer MCP server block and the update setting,
//! issue 30 item 6), and the root only with `--purge`. The steps come from a pure function, [`plan`].

use std::path::PathBuf;

use super::confirm::{self, Gate};
use super::parse::Invocation;
use super::spec::flags;
use super::update::ServiceSide;
use super::{background, health, paths, print, usage, CliError, CliResult};
use crate::host::binary::Layout;
use crate::host::control;
use crate::host::service::{self, Manager};

/// What uninstall found.
#[derive(Debug, Clone)]
pub struct UninstallEnv {
    /// The files of [`Layout::files`] that exist.
    pub files: Vec<PathBuf>,
    /// The service definition when it exists: its manager, path and whether it is ours.
    pub service: Option<(Manager, PathBuf, bool)>,
    /// The manager that has the service loaded.
    pub loaded: Option<Manager>,
    /// A daemon answering now.
    pub daemon_pid: Option<u32>,
    /// Codex's `config.toml` when it holds iapeer's MCP server block or update setting
    /// ([`crate::runtime::codex_setup::has_setup`]).
    pub codex_config: Option<PathBuf>,
    /// The root, when it exists.
    pub root: Option<PathBuf>,
    /// `--purge`.
    pub purge: bool,
    /// The user id.
    pub uid: u32,
}

/// One step of uninstall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Stop and unload the service.
    Unload {
        /// The manager.
        manager: Manager,
        /// Its commands.
        commands: Vec<Vec<String>>,
    },
    /// Stop the daemon running outside a service manager.
    StopDaemon {
        /// Its pid.
        pid: u32,
    },
    /// Delete a file install created.
    Remove(PathBuf),
    /// Leave a service file iapeer did not write.
    KeepForeign(PathBuf),
    /// Tell systemd its unit is gone.
    Reload(Vec<String>),
    /// Take iapeer's MCP server block and update setting out of Codex's `config.toml`.
    CodexConfig(PathBuf),
    /// Delete the root (`--purge`).
    RemoveRoot(PathBuf),
    /// Keep the root.
    KeepRoot(PathBuf),
}

/// The steps of uninstall for `env`, in order: stop, remove the files, the root.
pub fn plan(env: &UninstallEnv) -> Vec<Removal> {
    let mut steps = Vec::new();
    if let Some(manager) = env.loaded {
        steps.push(Removal::Unload {
            manager,
            commands: control::unload_commands(manager, env.uid),
        });
    } else if let Some(pid) = env.daemon_pid {
        steps.push(Removal::StopDaemon { pid });
    }
    steps.extend(env.files.iter().cloned().map(Removal::Remove));
    match &env.service {
        Some((manager, file, true)) => {
            steps.push(Removal::Remove(file.clone()));
            if *manager == Manager::Systemd {
                steps.push(Removal::Reload(
                    ["systemctl", "--user", "daemon-reload"]
                        .map(String::from)
                        .to_vec(),
                ));
            }
        }
        Some((_, file, false)) => steps.push(Removal::KeepForeign(file.clone())),
        None => {}
    }
    if let Some(config) = &env.codex_config {
        steps.push(Removal::CodexConfig(config.clone()));
    }
    if let Some(root) = &env.root {
        steps.push(if env.purge {
            Removal::RemoveRoot(root.clone())
        } else {
            Removal::KeepRoot(root.clone())
        });
    }
    steps
}

/// One line for a step.
pub fn describe(step: &Removal) -> String {
    match step {
        Removal::Unload { manager, commands } => format!(
            "stop the daemon and unload the {} service: {}",
            manager.name(),
            crate::host::control::as_line(commands)
        ),
        Removal::StopDaemon { pid } => format!("stop the daemon (pid {pid})"),
        Removal::Remove(p) => format!("remove {}", p.display()),
        Removal::KeepForeign(p) => format!(
            "keep {} (iapeer did not write it: it has no {} mark)",
            p.display(),
            service::OWNERSHIP_MARK
        ),
        Removal::Reload(c) => format!("tell systemd: {}", c.join(" ")),
        Removal::CodexConfig(p) => format!(
            "take iapeer's MCP server block and update setting out of {} (the rest stays)",
            p.display()
        ),
        Removal::RemoveRoot(p) => format!(
            "delete the root {} with every peer folder, log and message (--purge)",
            p.display()
        ),
        Removal::KeepRoot(p) => format!(
            "keep the root {} (peers, logs, messages; --purge deletes it)",
            p.display()
        ),
    }
}

/// Run `iapeer uninstall`.
pub fn run(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let layout = Layout::from_env()?;
    let side = ServiceSide::gather(&paths)?;
    let env = UninstallEnv {
        files: layout.files().into_iter().filter(|p| p.exists()).collect(),
        service: side.file.as_ref().and_then(|(m, f)| {
            let bytes = std::fs::read(f).ok()?;
            Some((*m, f.clone(), service::is_ours(&bytes)))
        }),
        loaded: side.loaded,
        daemon_pid: health::ping(&paths).map(|p| p.pid),
        codex_config: crate::runtime::codex_setup::config_path()
            .filter(|p| crate::runtime::codex_setup::has_setup(p)),
        root: Some(paths.root().to_path_buf()).filter(|r| r.exists()),
        purge: inv.flag(flags::PURGE),
        uid: side.uid,
    };
    let steps = plan(&env);
    let dry_run = inv.flag(flags::DRY_RUN);
    match confirm::gate(inv.flag(flags::YES), dry_run, confirm::stdin_is_tty()) {
        Gate::Proceed => {}
        Gate::Ask => {
            for s in &steps {
                eprintln!("  {}", describe(s));
            }
            if !confirm::ask("Uninstall iapeer?") {
                return Err(CliError::failed(
                    "not confirmed: nothing was changed",
                ));
            }
        }
        Gate::Refuse => {
            return Err(usage(
                inv,
                "uninstall removes files and stdin is not a terminal to ask on: pass --yes (or --dry-run to see what it would remove)",
            ))
        }
    }
    if dry_run {
        let mut out = String::from("iapeer uninstall --dry-run: nothing is changed. The steps:\n");
        for (i, s) in steps.iter().enumerate() {
            out.push_str(&format!("  {}. {}\n", i + 1, describe(s)));
        }
        return print(&out);
    }
    let mut problems = Vec::new();
    for step in &steps {
        let result = match step {
            Removal::Unload { commands, .. } => {
                side.ctl.run_all(commands).map_err(|e| e.to_string())
            }
            Removal::Reload(c) => side
                .ctl
                .run_all(std::slice::from_ref(c))
                .map_err(|e| e.to_string()),
            Removal::StopDaemon { .. } => match background::stop(&paths) {
                Ok(_) => Ok(()),
                Err(CliError::Failed(m)) => Err(m.to_string()),
                Err(other) => return Err(other),
            },
            Removal::Remove(p) => std::fs::remove_file(p)
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .map_err(|e| format!("cannot remove {}: {e}", p.display())),
            Removal::CodexConfig(p) => crate::runtime::codex_setup::remove_setup_from(p)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Removal::RemoveRoot(p) => std::fs::remove_dir_all(p)
                .map_err(|e| format!("cannot delete {}: {e}", p.display())),
            Removal::KeepForeign(_) | Removal::KeepRoot(_) => Ok(()),
        };
        match result {
            Ok(()) => print(&format!("✓ {}\n", describe(step)))?,
            Err(e) => {
                eprintln!("iapeer uninstall: {e}");
                problems.push(e);
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::failed(format!(
            "{} step(s) failed (above); the other steps were done — fix the cause and run it again",
            problems.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> UninstallEnv {
        UninstallEnv {
            files: vec![PathBuf::from("/h/.local/bin/iapeer")],
            service: Some((
                Manager::Systemd,
                PathBuf::from("/h/.config/systemd/user/iapeer.service"),
                true,
            )),
            loaded: Some(Manager::Systemd),
            daemon_pid: Some(9),
            codex_config: None,
            root: Some(PathBuf::from("/h/.iapeer")),
            purge: false,
            uid: 1000,
        }
    }

    #[test]
    fn it_unloads_removes_ours_and_keeps_the_root_without_purge() {
        let steps = plan(&env());
        let lines: Vec<String> = steps.iter().map(describe).collect();
        assert_eq!(
            lines,
            [
                "stop the daemon and unload the systemd service: systemctl --user disable --now iapeer",
                "remove /h/.local/bin/iapeer",
                "remove /h/.config/systemd/user/iapeer.service",
                "tell systemd: systemctl --user daemon-reload",
                "keep the root /h/.iapeer (peers, logs, messages; --purge deletes it)",
            ]
        );
    }

    #[test]
    fn a_foreign_service_file_is_kept_and_purge_deletes_the_root() {
        let mut e = env();
        e.loaded = None;
        e.service.as_mut().unwrap().2 = false;
        e.purge = true;
        let steps = plan(&e);
        assert_eq!(steps[0], Removal::StopDaemon { pid: 9 });
        assert_eq!(
            steps[2],
            Removal::KeepForeign(PathBuf::from("/h/.config/systemd/user/iapeer.service"))
        );
        assert_eq!(
            steps.last(),
            Some(&Removal::RemoveRoot(PathBuf::from("/h/.iapeer")))
        );
        e.daemon_pid = None;
        assert!(matches!(plan(&e)[0], Removal::Remove(_)));
        // Codex's config is edited before the root goes.
        e.codex_config = Some(PathBuf::from("/h/.codex/config.toml"));
        let steps = plan(&e);
        assert_eq!(
            describe(&steps[steps.len() - 2]),
            "take iapeer's MCP server block and update setting out of /h/.codex/config.toml (the rest stays)"
        );
    }
}

//! `iapeer install` (spec 08 §1): the `<root>` layout, the host doctrine stub, the reference
//! docs and the service definition, written without loading anything. Idempotent: a second
//! run changes no file.

use std::io;
use std::path::{Path, PathBuf};

use super::docs;
use super::service::{self, Manager, ServiceEnv, ServiceSpec, WriteDecision};
use super::HostError;
use crate::fsutil::{self, MODE_SHARED};
use crate::paths::Paths;

/// The host doctrine stub written to `<root>/IAPEER.md` when the file is absent.
pub const DOCTRINE_STUB: &str = "# Host doctrine\n\n\
Rules every agent on this host follows. This file is part of each agent's system prompt; \
edit it freely (iapeer never overwrites it).\n";

/// What install needs from the environment, gathered once so the steps stay testable.
#[derive(Debug, Clone)]
pub struct InstallEnv {
    /// The service's command, environment and log folder.
    pub spec: ServiceSpec,
    /// The chosen service manager, if any ([`service::choose`]).
    pub manager: Option<Manager>,
    /// The folder the definition goes to (`$IAPEER_SYSTEMD_DIR`, `$IAPEER_LAUNCHAGENTS_DIR` or
    /// the manager's default under home).
    pub service_dir: Option<PathBuf>,
}

impl InstallEnv {
    /// Read the process environment: the running binary, `HOME`, `PATH`, `IAPEER_ROOT` and
    /// `IAPEER_PORT` (when set), `IAPEER_SYSTEMD_DIR`, `IAPEER_LAUNCHAGENTS_DIR`, the OS and
    /// whether `/run/systemd/system` exists.
    ///
    /// Errors: the running binary's path cannot be found, or `HOME` is unset.
    pub fn from_process(paths: &Paths) -> Result<InstallEnv, HostError> {
        let var = |v: Result<String, std::env::VarError>| v.ok().filter(|v| !v.is_empty());
        let bin = std::env::current_exe().map_err(HostError::CurrentExe)?;
        let home = var(std::env::var("HOME"))
            .map(PathBuf::from)
            .ok_or(HostError::NoHome {
                rerun_install: true,
            })?;
        let systemd_dir = var(std::env::var("IAPEER_SYSTEMD_DIR")).map(PathBuf::from);
        let launchagents_dir = var(std::env::var("IAPEER_LAUNCHAGENTS_DIR")).map(PathBuf::from);
        let manager = service::choose(
            std::env::consts::OS,
            systemd_dir.is_some(),
            Path::new("/run/systemd/system").is_dir(),
        );
        let service_dir = manager.map(|m| match m {
            Manager::Systemd => {
                systemd_dir.unwrap_or_else(|| home.join(".config").join("systemd").join("user"))
            }
            Manager::Launchd => {
                launchagents_dir.unwrap_or_else(|| home.join("Library").join("LaunchAgents"))
            }
        });
        let spec = ServiceSpec {
            bin,
            home,
            env: ServiceEnv {
                path: var(std::env::var("PATH"))
                    .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
                root: var(std::env::var("IAPEER_ROOT"))
                    .map(|_| paths.root().to_string_lossy().into_owned()),
                port: var(std::env::var("IAPEER_PORT")),
            },
            logs_dir: paths.logs_dir(),
        };
        Ok(InstallEnv {
            spec,
            manager,
            service_dir,
        })
    }
}

/// What happened to the service definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceOutcome {
    /// The definition at `file` was created, updated or left unchanged.
    Written {
        /// The service manager it is for.
        manager: Manager,
        /// The definition file.
        file: PathBuf,
        /// Create, Update or Unchanged.
        decision: WriteDecision,
    },
    /// `file` exists without the ownership mark and was left alone.
    Foreign {
        /// The service manager it is for.
        manager: Manager,
        /// The file that is not ours.
        file: PathBuf,
    },
    /// No service manager is available here.
    NoManager,
}

/// What `install` did, step by step.
#[derive(Debug, Clone)]
pub struct Report {
    /// Whether `<root>/IAPEER.md` was created now (false: it existed and was kept).
    pub doctrine_created: bool,
    /// The docs written (empty: all were current).
    pub docs_written: Vec<PathBuf>,
    /// The service step.
    pub service: ServiceOutcome,
}

/// Run every step of install. A foreign service file is reported, not an error.
///
/// Errors: an I/O failure, as a sentence naming the path.
pub fn install(paths: &Paths, env: &InstallEnv) -> Result<Report, HostError> {
    let (doctrine_created, docs_written) = prepare_root(paths)?;
    let service = match (env.manager, &env.service_dir) {
        (Some(manager), Some(dir)) => write_service(manager, dir, &env.spec)?,
        _ => ServiceOutcome::NoManager,
    };
    Ok(Report {
        doctrine_created,
        docs_written,
        service,
    })
}

/// The root's part of install: its folders, the doctrine stub when absent and the reference
/// docs. Returns whether the doctrine was created and the docs written.
///
/// Errors: an I/O failure, as a sentence naming the path.
pub fn prepare_root(paths: &Paths) -> Result<(bool, Vec<PathBuf>), HostError> {
    for dir in [
        paths.root().to_path_buf(),
        paths.state_dir(),
        paths.logs_dir(),
        paths.lifecycle_dir(),
        paths.peers_dir(),
        paths.runtimes_dir(),
        paths.host_fragments(),
    ] {
        fsutil::ensure_dir(&dir).map_err(HostError::io("create", &dir))?;
    }
    let doctrine = paths.host_doctrine();
    let doctrine_created = create_if_absent(&doctrine, DOCTRINE_STUB.as_bytes())
        .map_err(HostError::io("write", &doctrine))?;
    let docs_written = docs::sync(paths).map_err(|source| HostError::Docs {
        dir: docs::dir(paths),
        source,
    })?;
    Ok((doctrine_created, docs_written))
}

impl InstallEnv {
    /// The service definition's path, when a service manager is available.
    pub fn service_file(&self) -> Option<(Manager, PathBuf)> {
        Some((
            self.manager?,
            self.service_dir.as_ref()?.join(self.manager?.file_name()),
        ))
    }

    /// What writing the definition would do now ([`service::decide`] on the file's bytes).
    pub fn service_decision(&self) -> Option<WriteDecision> {
        let (manager, file) = self.service_file()?;
        let existing = std::fs::read(&file).ok();
        Some(service::decide(
            existing.as_deref(),
            manager.render(&self.spec).as_bytes(),
        ))
    }
}

/// Write the service definition for `manager` into `dir` (created when missing) when
/// [`service::decide`] says so.
///
/// Errors: an I/O failure, as a sentence naming the path.
pub fn write_service(
    manager: Manager,
    dir: &Path,
    spec: &ServiceSpec,
) -> Result<ServiceOutcome, HostError> {
    let file = dir.join(manager.file_name());
    let text = manager.render(spec);
    let existing = std::fs::read(&file).ok();
    let decision = service::decide(existing.as_deref(), text.as_bytes());
    match decision {
        WriteDecision::Foreign => return Ok(ServiceOutcome::Foreign { manager, file }),
        WriteDecision::Create | WriteDecision::Update => {
            fsutil::write_atomic(&file, text.as_bytes(), MODE_SHARED)
                .map_err(HostError::io("write", &file))?;
        }
        WriteDecision::Unchanged => {}
    }
    Ok(ServiceOutcome::Written {
        manager,
        file,
        decision,
    })
}

/// Write `bytes` to `path` only if no file is there, atomically: a temp file hard-linked to
/// the name (the link fails when the name exists, so a file that appears meanwhile is kept).
/// Returns whether the file was created.
fn create_if_absent(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    if path.exists() {
        return Ok(false);
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    // The host doctrine is the user's to fill in: no other user reads it.
    fsutil::write_atomic(&tmp, bytes, fsutil::MODE_PRIVATE)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doctrine_stub_is_written_once_and_never_overwritten() {
        let (tmp, p) = crate::testkit::temp_path("IAPEER.md");
        assert!(create_if_absent(&p, b"stub").unwrap());
        assert_eq!(crate::testkit::mode_of(&p), 0o600);
        std::fs::write(&p, "mine").unwrap();
        assert!(!create_if_absent(&p, b"stub").unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "mine");
        let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "a temp file was left behind");
    }
}

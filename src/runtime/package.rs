//! Runtime packages (spec 08 §2): installing one with the real `npm`, letting it install
//! itself, asking the registry for its latest version, and running its per-peer `selfConfig`
//! hook. The verbs that use these (`install-runtime`, `update-runtime`, `create`) are in
//! `cli::runtimes` and `cli::peers`.
//!
//! A package is installed with `npm install --prefix <root>/runtimes/<rt>/package <spec>`
//! (a durable copy, unlike npx's cache) and then its program is run once without arguments,
//! as `npx -y <package>` does: that is how the real packages
//! (`@agfpd/telegram-runtime`, `@agfpd/notifier-runtime`) write
//! `<root>/runtimes/<rt>/runtime.json` and put their launcher in place.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::manifest::{CommandSpec, Manifest};
use crate::fsutil::IoError;
use crate::paths::Paths;

/// How long `npm install` and a package's own install may take.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// How long asking the registry for a version may take (spec 08 §2: 60 s).
pub const VIEW_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a `selfConfig` hook may take.
pub const SELF_CONFIG_TIMEOUT: Duration = Duration::from_secs(120);

/// The file under the install folder that records what was installed (`{"package": spec}`),
/// for `update-runtime`.
const SOURCE_FILE: &str = "iapeer-source.json";

/// The package of a runtime iapeer knows by name (spec 08 §2's built-in map).
pub fn known_package(runtime: &str) -> Option<&'static str> {
    match runtime {
        "telegram" => Some("@agfpd/telegram-runtime"),
        "notifier" => Some("@agfpd/notifier-runtime"),
        _ => None,
    }
}

/// `<root>/runtimes/<rt>/package`: where npm installs the runtime's package.
pub fn install_dir(paths: &Paths, runtime: &str) -> PathBuf {
    paths.runtimes_dir().join(runtime).join("package")
}

/// A package spec as npm should get it: a path to a local tarball or folder is made absolute
/// (npm reads relative paths from its own working folder); anything else is kept.
pub fn absolute_spec(spec: &str, cwd: &Path) -> String {
    let p = Path::new(spec);
    let pathlike = spec.starts_with('.') || spec.starts_with('/') || spec.ends_with(".tgz");
    if pathlike && !p.is_absolute() && cwd.join(p).exists() {
        return cwd.join(p).to_string_lossy().into_owned();
    }
    spec.to_string()
}

/// True when `spec` names a local file or folder rather than a registry package.
pub fn is_local(spec: &str) -> bool {
    spec.starts_with('/') || spec.starts_with("file:")
}

/// Why a bounded child (npm, a package's program, a `selfConfig` hook) did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// It could not start.
    #[error("cannot run {program:?}: {source}")]
    Spawn {
        /// The program.
        program: OsString,
        /// The underlying error.
        source: std::io::Error,
    },
    /// It could not be waited for.
    #[error("{0}")]
    Wait(#[source] std::io::Error),
    /// It was killed after this many seconds.
    #[error("still running after {0} s")]
    Timeout(u64),
    /// It ended non-zero.
    #[error("ended with {status}: {tail}")]
    Failed {
        /// How it ended.
        status: std::process::ExitStatus,
        /// Its last three non-empty lines of output, joined with ` | `.
        tail: String,
    },
}

/// Why a runtime package could not be installed or its version learned. `Display` has the
/// tail of what npm or the package said and what to do.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// A folder could not be cleared (`"clear"`) or created (`"create"`).
    #[error(transparent)]
    Io(#[from] crate::fsutil::IoError),
    /// `npm install <spec>` failed.
    #[error("npm install {spec} failed: {source} — check the package name (or tarball path) and that npm can reach its registry")]
    NpmInstall {
        /// The package spec.
        spec: String,
        /// How npm failed.
        source: RunError,
    },
    /// The installed package's spec could not be recorded.
    #[error("cannot record the installed package: {0}")]
    Record(#[source] std::io::Error),
    /// A folder could not be moved.
    #[error("cannot move {from} to {to}: {source}")]
    Move {
        /// From.
        from: PathBuf,
        /// To.
        to: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The package's own install (its program run once) failed.
    #[error("the package's own install ({bin}) failed: {source}")]
    SelfInstall {
        /// The program.
        bin: PathBuf,
        /// How it failed.
        source: RunError,
    },
    /// npm failed or timed out.
    #[error("{0}")]
    Npm(#[source] RunError),
    /// `npm pack --json` answered something that is not JSON.
    #[error("npm pack said {0}")]
    PackSaid(#[source] serde_json::Error),
    /// npm answered no version (`"npm pack"` or `"npm view"`).
    #[error("{tool} names no version for {spec}")]
    NoVersion {
        /// Which npm command.
        tool: &'static str,
        /// The package spec.
        spec: String,
    },
    /// npm installed nothing into the folder.
    #[error("npm installed nothing into {0}")]
    NothingInstalled(PathBuf),
    /// The package declares no program to install itself with.
    #[error("the package {name} has no program to install itself with (package.json \"bin\", named {wanted}) — it is not an iapeer runtime package")]
    NoProgram {
        /// The package's name.
        name: String,
        /// The `bin` name looked for (`<rt>-runtime`).
        wanted: String,
    },
    /// A `package.json` could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A `package.json` is not JSON.
    #[error("{path} is not JSON: {source}")]
    NotJson {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        source: serde_json::Error,
    },
}

/// Install `spec` for `runtime` with the real `npm`, record the spec, then run the package's
/// program once without arguments so it writes its manifest (as `npx -y` does). `npm` and
/// the package see `IAPEER_ROOT`. npm installs into a fresh folder beside the install folder,
/// which replaces the earlier install only once npm succeeded: a failed install leaves the
/// installed package as it was.
///
/// Errors: npm or the package's program failed or timed out (text has the tail of what they
/// said and what to do), or the package has no program.
pub fn install(paths: &Paths, runtime: &str, spec: &str) -> Result<(), PackageError> {
    let dir = install_dir(paths, runtime);
    let staging = dir.with_file_name("package.new");
    let old = dir.with_file_name("package.old");
    for leftover in [&staging, &old] {
        if leftover.exists() {
            std::fs::remove_dir_all(leftover).map_err(IoError::at("clear", leftover))?;
        }
    }
    crate::fsutil::ensure_dir(&staging).map_err(IoError::at("create", &staging))?;
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-audit", "--no-fund", "--no-update-notifier"])
        .arg("--prefix")
        .arg(&staging)
        .arg(spec)
        .current_dir(&staging)
        .env("IAPEER_ROOT", paths.root());
    if let Err(e) = run_bounded(npm, INSTALL_TIMEOUT) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(PackageError::NpmInstall {
            spec: spec.to_string(),
            source: e,
        });
    }
    let record = serde_json::json!({ "package": spec }).to_string();
    crate::fsutil::write_atomic(&staging.join(SOURCE_FILE), record.as_bytes(), 0o644)
        .map_err(PackageError::Record)?;
    let swap = |from: &Path, to: &Path| {
        std::fs::rename(from, to).map_err(|source| PackageError::Move {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            source,
        })
    };
    if dir.exists() {
        swap(&dir, &old)?;
    }
    swap(&staging, &dir)?;
    if old.exists() {
        let _ = std::fs::remove_dir_all(&old);
    }
    let bin = package_program(&dir, runtime)?;
    let mut cmd = Command::new(&bin);
    cmd.current_dir(&dir)
        .env("IAPEER_ROOT", paths.root())
        .env("PATH", path_with(&dir.join("node_modules/.bin")));
    run_bounded(cmd, INSTALL_TIMEOUT).map_err(|source| PackageError::SelfInstall {
        bin: bin.clone(),
        source,
    })?;
    Ok(())
}

/// The package spec `runtime` was installed from, if recorded.
pub fn recorded_spec(paths: &Paths, runtime: &str) -> Option<String> {
    let text = std::fs::read_to_string(install_dir(paths, runtime).join(SOURCE_FILE)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v["package"].as_str().map(String::from)
}

/// The version `spec` would install now: the registry's latest (`npm view <spec> version`),
/// or a local tarball's or folder's own (`npm pack --dry-run --json`).
///
/// Errors: npm failed or timed out, or answered no version.
pub fn latest_version(spec: &str) -> Result<String, PackageError> {
    let tmp = std::env::temp_dir();
    let mut npm = Command::new("npm");
    npm.current_dir(&tmp);
    if is_local(spec) {
        npm.args(["pack", "--dry-run", "--json", spec]);
        let out = run_bounded(npm, VIEW_TIMEOUT).map_err(PackageError::Npm)?;
        let v: Value = serde_json::from_str(&out).map_err(PackageError::PackSaid)?;
        return v[0]["version"]
            .as_str()
            .map(String::from)
            .ok_or_else(|| PackageError::NoVersion {
                tool: "npm pack",
                spec: spec.to_string(),
            });
    }
    npm.args(["view", spec, "version"]);
    let out = run_bounded(npm, VIEW_TIMEOUT).map_err(PackageError::Npm)?;
    let version = out.trim().lines().last().unwrap_or("").trim().to_string();
    if version.is_empty() {
        return Err(PackageError::NoVersion {
            tool: "npm view",
            spec: spec.to_string(),
        });
    }
    Ok(version)
}

/// The installed package's program: its `bin` named `<rt>-runtime`, else its only one.
fn package_program(dir: &Path, runtime: &str) -> Result<PathBuf, PackageError> {
    let top: Value = read_json(&dir.join("package.json"))?;
    let name = top["dependencies"]
        .as_object()
        .and_then(|d| d.keys().next().cloned())
        .ok_or_else(|| PackageError::NothingInstalled(dir.to_path_buf()))?;
    let pkg_dir = dir.join("node_modules").join(&name);
    let pkg: Value = read_json(&pkg_dir.join("package.json"))?;
    let wanted = format!("{runtime}-runtime");
    let rel = match &pkg["bin"] {
        Value::String(s) => Some(s.clone()),
        Value::Object(bins) => bins
            .get(&wanted)
            .or_else(|| (bins.len() == 1).then(|| bins.values().next()).flatten())
            .and_then(|v| v.as_str().map(String::from)),
        _ => None,
    };
    let rel = rel.ok_or(PackageError::NoProgram {
        name: name.clone(),
        wanted,
    })?;
    Ok(pkg_dir.join(rel))
}

fn read_json(path: &Path) -> Result<Value, PackageError> {
    let text = std::fs::read_to_string(path).map_err(|source| PackageError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| PackageError::NotJson {
        path: path.to_path_buf(),
        source,
    })
}

/// This process's PATH with `first` in front.
fn path_with(first: &Path) -> OsString {
    let mut dirs = vec![first.to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

/// What a peer's `selfConfig` hook did.
#[derive(Debug, Clone, PartialEq)]
pub enum SelfConfig {
    /// The manifest declares none.
    NotDeclared,
    /// It exited 0: the peer is configured.
    Configured,
    /// It failed (why, with the tail of its output).
    Failed(String),
}

/// The peer a hook configures.
pub struct HookPeer<'a> {
    /// Its name.
    pub personality: &'a str,
    /// Its folder (the hook's working folder).
    pub cwd: &'a Path,
    /// Its nature (`absent`, `natural`, `artificial`).
    pub intelligence: &'a str,
}

/// Run `manifest`'s `selfConfig` for `peer` in its folder with `IAPEER_PEER_PERSONALITY`,
/// `IAPEER_PEER_CWD`, `IAPEER_PEER_RUNTIME`, `IAPEER_PEER_INTELLIGENCE` and `IAPEER_ROOT`
/// set (the rest of this process's environment is passed on: operator inputs such as
/// `TELEGRAM_USER_ID` reach the hook), no shell, [`SELF_CONFIG_TIMEOUT`].
pub fn run_self_config(paths: &Paths, manifest: &Manifest, peer: &HookPeer) -> SelfConfig {
    let Some(CommandSpec { command, args }) = &manifest.self_config else {
        return SelfConfig::NotDeclared;
    };
    let mut cmd = Command::new(command);
    cmd.args(args)
        .current_dir(peer.cwd)
        .env("IAPEER_PEER_PERSONALITY", peer.personality)
        .env("IAPEER_PEER_CWD", peer.cwd)
        .env("IAPEER_PEER_RUNTIME", &manifest.runtime)
        .env("IAPEER_PEER_INTELLIGENCE", peer.intelligence)
        .env("IAPEER_ROOT", paths.root());
    match run_bounded(cmd, SELF_CONFIG_TIMEOUT) {
        Ok(_) => SelfConfig::Configured,
        Err(e) => SelfConfig::Failed(format!("{command}: {e}")),
    }
}

/// Run `cmd` (stdin closed, in a process group of its own) and wait at most `timeout`;
/// its stdout on exit 0.
///
/// Errors: it could not start, ended non-zero (with the last lines it printed), or was
/// killed at the timeout.
fn run_bounded(mut cmd: Command, timeout: Duration) -> Result<String, RunError> {
    let child =
        crate::child::spawn_leader(&mut cmd, Stdio::piped(), Stdio::piped()).map_err(|source| {
            RunError::Spawn {
                program: cmd.get_program().to_owned(),
                source,
            }
        })?;
    let out = crate::child::wait_bounded(child, timeout, std::process::Child::wait_with_output)
        .ok_or(RunError::Timeout(timeout.as_secs()))?
        .map_err(RunError::Wait)?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok(stdout);
    }
    let said = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let tail: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
    Err(RunError::Failed {
        status: out.status,
        tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_runtimes_map_to_their_packages() {
        assert_eq!(known_package("telegram"), Some("@agfpd/telegram-runtime"));
        assert_eq!(known_package("notifier"), Some("@agfpd/notifier-runtime"));
        assert_eq!(known_package("bot"), None);
    }

    #[test]
    fn local_specs_are_made_absolute_and_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bot-1.0.0.tgz"), "").unwrap();
        let abs = absolute_spec("bot-1.0.0.tgz", dir.path());
        assert_eq!(Path::new(&abs), dir.path().join("bot-1.0.0.tgz"));
        assert!(is_local(&abs));
        assert_eq!(absolute_spec("@agfpd/bot", dir.path()), "@agfpd/bot");
        assert!(!is_local("@agfpd/bot"));
        assert_eq!(absolute_spec("./missing.tgz", dir.path()), "./missing.tgz");
    }

    #[test]
    fn a_failed_npm_install_leaves_the_installed_package_as_it_was() {
        let (dir, paths) = Paths::temp();
        let installed = install_dir(&paths, "bot");
        std::fs::create_dir_all(&installed).unwrap();
        std::fs::write(installed.join(SOURCE_FILE), r#"{"package":"bot@1.0.0"}"#).unwrap();
        let missing = dir.path().join("missing.tgz");
        let err = install(&paths, "bot", missing.to_str().unwrap()).unwrap_err();
        assert!(err.to_string().starts_with("npm install"), "{err}");
        assert_eq!(recorded_spec(&paths, "bot").as_deref(), Some("bot@1.0.0"));
        assert!(!installed.with_file_name("package.new").exists());
    }

    #[test]
    fn a_self_config_gets_the_peer_variables_and_its_exit_decides() {
        let (dir, paths) = Paths::temp();
        let m = Manifest::parse(
            r#"{"selfConfig":{"command":"/bin/sh","args":["-c","echo \"$IAPEER_PEER_PERSONALITY $IAPEER_PEER_RUNTIME $IAPEER_PEER_INTELLIGENCE $PWD\" > seen; test \"$IAPEER_PEER_CWD\" = \"$PWD\" && exit 0"]}}"#,
            "bot",
        )
        .unwrap();
        let peer = HookPeer {
            personality: "pager",
            cwd: dir.path(),
            intelligence: "absent",
        };
        assert_eq!(run_self_config(&paths, &m, &peer), SelfConfig::Configured);
        let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
        assert!(seen.starts_with("pager bot absent /"), "{seen}");
        let none = Manifest::parse("{}", "bot").unwrap();
        assert_eq!(
            run_self_config(&paths, &none, &peer),
            SelfConfig::NotDeclared
        );
        let failing = Manifest::parse(
            r#"{"selfConfig":{"command":"/bin/sh","args":["-c","echo no user_id >&2; exit 3"]}}"#,
            "bot",
        )
        .unwrap();
        match run_self_config(&paths, &failing, &peer) {
            SelfConfig::Failed(why) => assert!(why.contains("no user_id"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}

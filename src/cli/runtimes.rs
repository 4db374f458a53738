//! Runtime package verbs (spec 08 §2): `install-runtime` and `update-runtime`. The package
//! work is in [`crate::runtime::package`], the peers' in [`crate::peers`]; this module says
//! what happened, one line per step.

use super::client::Client;
use super::error::fail;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{paths, print, required, CliError, CliResult};
use crate::markers::{Flag, Markers};
use crate::names::is_valid_runtime;
use crate::paths::Paths;
use crate::peers::{self, Provisioned, NOTIFIER_PEERS};
use crate::protocol::{call, Answer};
use crate::registry::Registry;
use crate::runtime::manifest::Manifest;
use crate::runtime::package::{self, SelfConfig};

/// The runtime named on the command line, checked.
fn runtime_arg(inv: &Invocation) -> Result<&str, CliError> {
    let rt = required(inv, args::RT)?;
    if !is_valid_runtime(rt) {
        return Err(fail(format!(
            "invalid runtime \"{rt}\" — a runtime name is a lower-case letter then up to 31 letters or digits"
        )));
    }
    Ok(rt)
}

/// The manifest of `rt`, which must exist now.
fn installed_manifest(paths: &Paths, rt: &str) -> Result<Manifest, CliError> {
    Manifest::load(paths, rt)?.ok_or_else(|| {
        fail(format!(
            "the package wrote no {} — it is not an iapeer runtime package for \"{rt}\"",
            paths.runtime_manifest(rt).display()
        ))
    })
}

/// `install-runtime <rt> [--package <spec>] [--no-bootstrap]`, or `install-runtime <dir>`.
pub fn install_runtime(inv: &Invocation) -> CliResult {
    if crate::runtime::folder::is_folder_arg(required(inv, args::RT)?) {
        return install_folder(inv);
    }
    let rt = runtime_arg(inv)?;
    let paths = paths()?;
    let given = inv.value(flags::PACKAGE);
    let installed = paths.runtime_manifest(rt).exists();
    if rt == crate::runtime::notifier::NAME && given.is_none() && !installed {
        return provision_builtin_notifier(inv, &paths);
    }
    // The peers on this runtime before the install: they run the program it had until now.
    let before = runtime_peers(&paths, rt);
    let fetched = given.is_some() || !installed || inv.flag(flags::NPX);
    if fetched {
        let spec = package_spec(&paths, rt, given)?;
        print(&format!("installing {spec} with npm…\n"))?;
        package::install(&paths, rt, &spec).map_err(fail)?;
    }
    let manifest = installed_manifest(&paths, rt)?;
    print(&format!(
        "runtime {rt} installed{} ({})\n",
        manifest
            .version
            .as_ref()
            .map(|v| format!(" at version {v}"))
            .unwrap_or_default(),
        paths.runtime_manifest(rt).display()
    ))?;
    let start = !inv.flag(flags::NO_BOOTSTRAP);
    let provisioned = provision_all(&paths, &manifest, start);
    if start {
        // Peers registered on this runtime before it was installed (a team moved over from
        // the original tool) failed to start and may be parked, and the ones the package
        // declares may be running the program the runtime had (the built-in notifier's
        // timer and watcher): bring them up on the package now. Those it created were just
        // started.
        let started: Vec<&str> = manifest
            .peers
            .iter()
            .map(|p| p.personality.as_str())
            .filter(|p| !fetched || !before.iter().any(|b| b == p))
            .collect();
        restart_peers(&paths, rt, &started);
    }
    provisioned
}

/// `install-runtime <dir>`: the runtime folder's manifest checked, the folder copied to
/// `<root>/runtimes/<rt>/` (nothing when the manifest is bad), then the peers it declares
/// provisioned as a package's.
fn install_folder(inv: &Invocation) -> CliResult {
    use crate::runtime::folder;
    let dir = std::path::Path::new(required(inv, args::RT)?);
    let paths = paths()?;
    let (rt, manifest) = folder::read(dir).map_err(fail)?;
    folder::install(&paths, &rt, dir).map_err(fail)?;
    let what = if manifest.terminal.is_some() {
        "terminal runtime"
    } else {
        "runtime"
    };
    print(&format!(
        "{what} {rt} installed from {} ({})\n",
        dir.display(),
        paths.runtime_manifest(&rt).display()
    ))?;
    provision_all(&paths, &manifest, !inv.flag(flags::NO_BOOTSTRAP))
}

/// The names of the peers registered on runtime `rt` (none when the registry cannot be
/// read).
fn runtime_peers(paths: &Paths, rt: &str) -> Vec<String> {
    Registry::load(paths)
        .map(|r| {
            r.peers
                .iter()
                .filter(|p| p.declares(rt))
                .map(|p| p.personality.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The spec to install: `--package` (a local path made absolute), else the one it was
/// installed from, else the runtime's known package.
fn package_spec(paths: &Paths, rt: &str, given: Option<&str>) -> Result<String, CliError> {
    match given {
        Some(spec) => {
            let cwd = std::env::current_dir()
                .map_err(|e| fail(format!("cannot read the current folder: {e}")))?;
            Ok(package::absolute_spec(spec, &cwd))
        }
        None => package::recorded_spec(paths, rt)
            .or_else(|| package::known_package(rt).map(String::from))
            .ok_or_else(|| {
                CliError::hinted(
                    format!("no package is known for runtime \"{rt}\""),
                    "give it with --package <npm package or tarball>",
                )
            }),
    }
}

/// Provision every peer `manifest` declares and (`start`) ask a running daemon to start the
/// configured ones; exit 1 when a peer's `selfConfig` failed.
fn provision_all(paths: &Paths, manifest: &Manifest, start: bool) -> CliResult {
    let rt = &manifest.runtime;
    if manifest.peers.is_empty() {
        return print(&format!(
            "it declares no peers: add them with iapeer create <name> --runtime {rt}\n"
        ));
    }
    let mut failed = Vec::new();
    for decl in &manifest.peers {
        let Provisioned {
            born,
            configured,
            description_skipped,
        } = peers::provision_declared(paths, manifest, decl).map_err(|e| {
            fail(format!(
                "could not create the peer {} that the package declares: {e}",
                decl.personality
            ))
        })?;
        let name = &born.peer.personality;
        if description_skipped {
            eprintln!(
                "warning: the description the package declares for {name} is not one line of at most {} characters: left empty",
                crate::profile::DESCRIPTION_MAX_CHARS
            );
        }
        let state = match &configured {
            SelfConfig::NotDeclared => String::new(),
            SelfConfig::Configured => " and configured".to_string(),
            SelfConfig::Failed(why) => {
                failed.push(name.clone());
                format!(", but its selfConfig failed ({why}): it stays stopped")
            }
        };
        print(&format!(
            "peer {name} ({rt}) created in {}{state}\n",
            born.peer.cwd.display()
        ))?;
        let missing = crate::runtime::router::missing_program(paths, rt, &born.peer.cwd);
        if let Some(why) = &missing {
            eprintln!("warning: {name} cannot start on {rt}: {why}");
        }
        let start = start && missing.is_none() && !matches!(configured, SelfConfig::Failed(_));
        if let (true, Some(always_on)) = (start, &born.always_on) {
            super::peers::start_always_on(paths, name, always_on);
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(fail(format!(
        "the package could not configure {}: fix what it said, run iapeer install-runtime {rt} again, then iapeer start <peer>",
        failed.join(", ")
    )))
}

/// `install-runtime notifier` without a package: the built-in service peers `timer` and
/// `watcher`, as `onboard` makes them.
fn provision_builtin_notifier(inv: &Invocation, paths: &Paths) -> CliResult {
    let registry = Registry::load(paths)?;
    for name in NOTIFIER_PEERS {
        if let Some(p) = registry.find(name) {
            print(&format!(
                "peer {name} exists already ({}): kept\n",
                p.default_runtime
            ))?;
            continue;
        }
        let born = peers::create_notifier_peer(paths, name).map_err(|e| {
            fail(format!(
                "could not create the notifier service peer {name}: {e} — remove or rename what holds that name, then run install-runtime notifier again"
            ))
        })?;
        print(&format!(
            "peer {name} (notifier, built in) created in {} with its call card\n",
            born.peer.cwd.display()
        ))?;
        if let (false, Some(rt)) = (inv.flag(flags::NO_BOOTSTRAP), &born.always_on) {
            super::peers::start_always_on(paths, name, rt);
        }
    }
    Ok(())
}

/// `update-runtime (<rt> | --all) [--force]`.
pub fn update_runtime(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let runtimes = if inv.flag(flags::RUNTIMES_ALL) {
        crate::runtime::manifest::installed(&paths)
    } else {
        vec![runtime_arg(inv)?.to_string()]
    };
    if runtimes.is_empty() {
        return print("no runtime package is installed: nothing to update\n");
    }
    if !inv.flag(flags::RUNTIMES_ALL) {
        return update_one(inv, &paths, &runtimes[0]);
    }
    // --all: a runtime written by hand has no package to update (a note, not a failure), and
    // one runtime's failure does not keep the others from being checked.
    let mut failed = Vec::new();
    for rt in &runtimes {
        let from_folder = crate::runtime::folder::installed_from(&paths, rt).is_some();
        if package_of(&paths, rt).is_none() && !from_folder {
            print(&format!(
                "{rt}: skipped (no package is known for it: its runtime.json was written by hand)\n"
            ))?;
            continue;
        }
        match update_one(inv, &paths, rt) {
            Ok(()) => {}
            Err(CliError::Failed(why)) => {
                eprintln!("iapeer update-runtime: {rt}: {why}");
                failed.push(rt.as_str());
            }
            Err(other) => return Err(other),
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(fail(format!(
        "not updated: {} (the reasons are above); the other runtimes were checked",
        failed.join(", ")
    )))
}

/// The package `rt` is updated from: the one it was installed from, else the known package
/// of that runtime name. `None` for a runtime whose manifest was written by hand.
fn package_of(paths: &Paths, rt: &str) -> Option<String> {
    package::recorded_spec(paths, rt).or_else(|| package::known_package(rt).map(String::from))
}

fn update_one(inv: &Invocation, paths: &Paths, rt: &str) -> CliResult {
    if let Some(dir) = crate::runtime::folder::installed_from(paths, rt) {
        return update_from_folder(paths, rt, &dir);
    }
    let before = Manifest::load(paths, rt)?.ok_or_else(|| {
        CliError::hinted(
            format!("runtime \"{rt}\" is not installed from a package"),
            format!("install it with iapeer install-runtime {rt}"),
        )
    })?;
    let spec = package_of(paths, rt).ok_or_else(|| {
        CliError::hinted(
            format!("it is not known which package provides \"{rt}\""),
            format!("reinstall it with iapeer install-runtime {rt} --package <spec>"),
        )
    })?;
    match (&before.version, inv.flag(flags::REINSTALL)) {
        (Some(have), false) => {
            let latest = package::latest_version(&spec)
                .map_err(|e| fail(format!("cannot learn the latest version of {spec}: {e}")))?;
            if &latest == have {
                return print(&format!("{rt}: already-latest ({have})\n"));
            }
            print(&format!("{rt}: {have} → {latest}\n"))?;
        }
        (Some(have), true) => print(&format!("{rt}: reinstalling {have} (--force)\n"))?,
        (None, _) => print(&format!(
            "{rt}: its manifest has no version stamp: the version gate was skipped, reinstalling\n"
        ))?,
    }
    package::install(paths, rt, &spec).map_err(fail)?;
    let manifest = installed_manifest(paths, rt)?;
    print(&format!(
        "runtime {rt} installed{}\n",
        manifest
            .version
            .as_ref()
            .map(|v| format!(" at version {v}"))
            .unwrap_or_default()
    ))?;
    // The restart below brings the peers up on the new package.
    provision_all(paths, &manifest, false)?;
    restart_peers(paths, rt, &[]);
    Ok(())
}

/// `update-runtime <rt>` for a runtime installed from a folder (`install-runtime <dir>`): the
/// folder read and checked again, then copied in place of the installed one (atomically,
/// `folder::install`), saying which files changed; its peers restarted. A folder that is gone,
/// now invalid or now names another runtime is refused, and the installed runtime is kept.
fn update_from_folder(paths: &Paths, rt: &str, dir: &std::path::Path) -> CliResult {
    use crate::runtime::folder;
    let kept = format!("the installed {rt} is kept as it was");
    if !dir.is_dir() {
        return Err(CliError::hinted(
            format!(
                "runtime {rt} was installed from {}, which is gone — {kept}",
                dir.display()
            ),
            format!("install it again from where it is now: iapeer install-runtime <dir> (its runtime.json names {rt})"),
        ));
    }
    let (name, manifest) = folder::read(dir).map_err(|e| fail(format!("{e} — {kept}")))?;
    if name != rt {
        return Err(fail(format!(
            "{} now declares runtime {name}, not {rt} — {kept} (install-runtime {} installs {name} beside it)",
            dir.join(folder::MANIFEST_FILE).display(),
            dir.display()
        )));
    }
    let changes = folder::changes(&paths.runtimes_dir().join(rt), dir);
    if changes.is_empty() {
        return print(&format!(
            "{rt}: unchanged (its folder {} holds what is installed)\n",
            dir.display()
        ));
    }
    folder::install(paths, rt, dir).map_err(fail)?;
    print(&format!(
        "runtime {rt} updated from {}: {}\n",
        dir.display(),
        changes.join(", ")
    ))?;
    provision_all(paths, &manifest, false)?;
    restart_peers(paths, rt, &[]);
    Ok(())
}

/// Ask a running daemon to (re)start every peer of runtime `rt` but those in `except` on the
/// package now installed (`new`: a parked peer is unparked; a stopped one stays stopped),
/// printing `<rt>-<peer> restarted` for each.
fn restart_peers(paths: &Paths, rt: &str, except: &[&str]) {
    for outcome in restart_runtime_peers(paths, rt, except) {
        match outcome {
            Ok(identity) => {
                let _ = print(&format!("{identity} restarted\n"));
            }
            Err(note) => eprintln!("note: {note}"),
        }
    }
}

/// Ask a running daemon for a fresh session of every peer of runtime `rt` but those in
/// `except` and the stopped ones: per peer, its identity when restarted, else why not.
/// Nothing when the daemon does not answer.
pub(crate) fn restart_runtime_peers(
    paths: &Paths,
    rt: &str,
    except: &[&str],
) -> Vec<Result<String, String>> {
    let Ok(registry) = Registry::load(paths) else {
        return Vec::new();
    };
    let stopped = |name: &str| {
        crate::names::Identity::new(rt, name)
            .is_ok_and(|id| Markers::new(paths, &id).is_set(Flag::Stopped))
    };
    let peers = registry.peers.iter().filter(|p| {
        p.runtimes.iter().any(|r| r == rt)
            && !except.contains(&p.personality.as_str())
            && !stopped(&p.personality)
    });
    let mut out = Vec::new();
    for p in peers {
        let Ok(mut c) = Client::connect(paths) else {
            break;
        };
        let req = call::New {
            personality: p.personality.clone(),
            runtime: Some(rt.to_string()),
        };
        let identity = format!("{rt}-{}", p.personality);
        out.push(match c.request(&req, |_| {}) {
            Ok(Answer::Ok(_)) => Ok(identity),
            Ok(Answer::Failed(f)) => Err(format!("could not restart {identity}: {}", f.error)),
            Err(e) => Err(format!("could not restart {identity}: {e}")),
        });
    }
    out
}

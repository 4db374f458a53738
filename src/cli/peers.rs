//! Peer verbs (spec 07 "Peers"): `create`, `init`, `verify`, `remove`. They work on the
//! profile and the registry directly (no daemon needed), and tell the daemon when one runs.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::client::Client;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{paths, print, usage, CliError, CliResult};
use crate::fsutil::{self, MODE_PRIVATE};
use crate::markers::Markers;
use crate::names::{self, Identity, Intelligence};
use crate::paths::{peer, Paths};
use crate::profile::{self, Profile, DESCRIPTION_MAX_CHARS};
use crate::registry::{Registry, RegistryError, RegistryPeer};
use crate::runtime::{self, RuntimeKind};

fn fail(e: impl std::fmt::Display) -> CliError {
    CliError::Failed(e.to_string())
}

/// Options shared by `create` and `init`.
struct InitOpts<'a> {
    runtime: Option<&'a str>,
    description: Option<&'a str>,
    intelligence: Option<&'a str>,
    bootstrap: bool,
}

impl<'a> InitOpts<'a> {
    fn from(inv: &'a Invocation) -> InitOpts<'a> {
        InitOpts {
            runtime: inv.value(flags::PEER_RUNTIME),
            description: inv.value(flags::DESCRIPTION),
            intelligence: inv.value(flags::INTELLIGENCE),
            bootstrap: !inv.flag(flags::NO_BOOTSTRAP),
        }
    }
}

/// `create <name>`: make the folder (`--path`, else `<root>/peers/<name>`) and `init` it.
pub fn create(inv: &Invocation) -> CliResult {
    let name = inv
        .positional(args::NAME)
        .ok_or_else(|| usage(inv, "missing <name>"))?;
    if !names::is_valid_personality(name) {
        return Err(fail(format!(
            "invalid name \"{name}\" — must match {}",
            names::PERSONALITY_PATTERN
        )));
    }
    let canonical = names::normalize(name);
    if canonical != name {
        return Err(fail(format!(
            "no folder can be named so that it gives \"{name}\" (a folder \"{name}\" gives \"{canonical}\") — choose {canonical}"
        )));
    }
    let paths = paths()?;
    let folder = match inv.value(flags::PATH) {
        Some(p) => absolute(Path::new(p))?,
        None => paths.peers_dir().join(name),
    };
    let base = folder
        .file_name()
        .map(|b| b.to_string_lossy().into_owned())
        .unwrap_or_default();
    let derived = names::normalize(&base);
    if derived != name {
        return Err(fail(format!(
            "the folder name \"{base}\" gives the peer name \"{derived}\", not \"{name}\" — a peer is named after its folder: choose a folder named {name}"
        )));
    }
    // Refuse a taken name or an unusable runtime before creating anything, so no empty
    // folder is left behind (an existing folder may hold a profile that names its runtime).
    if !folder.exists() {
        choose_runtime(&paths, &folder, inv.value(flags::PEER_RUNTIME))?;
    }
    let registry = Registry::load(&paths).map_err(fail)?;
    if let Some(other) = registry.find(name) {
        let same = folder.canonicalize().is_ok_and(|f| f == other.cwd) || folder == other.cwd;
        if !same {
            return Err(fail(format!(
                "peer \"{name}\" already exists at {} — two peers can never share a name",
                other.cwd.display()
            )));
        }
    }
    let existed = folder.exists();
    fsutil::ensure_dir(&folder)
        .map_err(|e| fail(format!("cannot create {}: {e}", folder.display())))?;
    let folder = folder.canonicalize().unwrap_or(folder);
    match init_folder(&paths, &folder, &InitOpts::from(inv)) {
        Ok(peer) => report(inv, "created", &peer),
        Err(e) => {
            // A refused create leaves nothing behind: the folder was made for this peer.
            if !existed {
                let _ = std::fs::remove_dir_all(&folder);
            }
            Err(e)
        }
    }
}

/// `init [folder]`: turn a folder (default: the current one) into a peer named after it.
pub fn init(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let folder = match inv.positional(args::FOLDER) {
        Some(f) => absolute(Path::new(f))?,
        None => std::env::current_dir()
            .map_err(|e| fail(format!("cannot read the current folder: {e}")))?,
    };
    if !folder.is_dir() {
        return Err(fail(format!("{} is not a folder", folder.display())));
    }
    let folder = folder.canonicalize().unwrap_or(folder);
    let peer = init_folder(&paths, &folder, &InitOpts::from(inv))?;
    report(inv, "initialized", &peer)
}

fn report(inv: &Invocation, what: &str, p: &RegistryPeer) -> CliResult {
    if inv.flag(flags::JSON) {
        return print(&format!(
            "{}\n",
            serde_json::to_value(p).unwrap_or(Value::Null)
        ));
    }
    print(&format!(
        "{what} peer {} in {} — runtimes: {} (default {}), intelligence {}\n",
        p.personality,
        p.cwd.display(),
        p.runtimes.join(", "),
        p.default_runtime,
        p.intelligence
    ))
}

fn absolute(p: &Path) -> Result<PathBuf, CliError> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()
            .map_err(|e| fail(format!("cannot read the current folder: {e}")))?
            .join(p))
    }
}

/// Agent runtimes usable on this host besides the demo stand-in (claude, codex), in
/// preference order.
fn installed_agents(paths: &Paths) -> Vec<&'static str> {
    ["claude", "codex"]
        .into_iter()
        .filter(|rt| runtime::is_installed(paths, rt))
        .collect()
}

/// The runtime for a new peer (spec 07 `init`): `--runtime` (must be installed), else a
/// marker folder (`.claude/`, `.codex/`), else the installed agent runtimes.
fn choose_runtime(
    paths: &Paths,
    folder: &Path,
    requested: Option<&str>,
) -> Result<String, CliError> {
    let installed = installed_agents(paths);
    if let Some(rt) = requested {
        if !names::is_valid_runtime(rt) {
            return Err(fail(format!(
                "invalid runtime \"{rt}\" — must match {}",
                names::RUNTIME_PATTERN
            )));
        }
        return runtime::adapter_for(paths, rt)
            .map(|_| rt.to_string())
            .map_err(fail);
    }
    for (marker, rt) in [(".claude", "claude"), (".codex", "codex")] {
        if folder.join(marker).is_dir() && installed.contains(&rt) {
            return Ok(rt.to_string());
        }
    }
    installed.first().map(|rt| rt.to_string()).ok_or_else(|| {
        fail("no agent runtime is installed (claude or codex) — install one, or pass --runtime echo for the built-in demo stand-in")
    })
}

const DOCTRINE_STUB: &str = "<!-- Personal doctrine of this peer: who it is, what it does, how it works with the team.\n     iapeer puts this file into the peer's system prompt at every start. Write plain markdown below. -->\n";

/// Where `remove` keeps a removed peer's profile (the folder is kept; `init` restores it).
fn removed_profile(folder: &Path) -> PathBuf {
    peer::dir(folder).join("peer-profile.removed.json")
}

fn init_folder(paths: &Paths, folder: &Path, opts: &InitOpts) -> Result<RegistryPeer, CliError> {
    let name = profile::personality_of(folder).map_err(fail)?;
    let removed = removed_profile(folder);
    if !peer::profile(folder).exists() && removed.is_file() {
        // A peer removed earlier comes back with its own profile (description, keys…).
        std::fs::rename(&removed, peer::profile(folder))
            .map_err(|e| fail(format!("cannot restore {}: {e}", removed.display())))?;
    }
    if let Some(written) = raw_personality(folder) {
        if written != name {
            return Err(fail(format!(
                "{} already holds the profile of peer \"{written}\" — a peer is named after its folder; move that peer with iapeer rename, or init another folder",
                folder.display()
            )));
        }
    }
    let registry = Registry::load(paths).map_err(fail)?;
    if let Some(other) = registry.find(&name) {
        if other.cwd != folder {
            return Err(fail(format!(
                "peer \"{name}\" already exists at {} — two peers can never share a name; rename this folder",
                other.cwd.display()
            )));
        }
    }
    let existing = Profile::read(folder).map_err(fail)?;
    let runtime = match (opts.runtime, &existing) {
        (None, Some(p)) => p.default_runtime().to_string(),
        (requested, _) => choose_runtime(paths, folder, requested)?,
    };
    let kind = runtime::adapter_for(paths, &runtime).map_err(fail)?.kind();
    let nature = match opts.intelligence {
        Some(i) => Intelligence::parse(i).ok_or_else(|| {
            fail(format!(
                "unknown intelligence \"{i}\" — use artificial, natural or absent"
            ))
        })?,
        None => existing
            .as_ref()
            .map(|p| p.nature())
            .unwrap_or_else(|| Intelligence::default_for_runtime(&runtime)),
    };
    if !nature.allowed_on(&runtime) {
        return Err(fail(format!(
            "a peer of intelligence {nature} cannot run on {runtime}"
        )));
    }
    if let Some(d) = opts.description {
        if d.contains('\n') || d.chars().count() > DESCRIPTION_MAX_CHARS {
            return Err(fail(format!(
                "--description must be one line of at most {DESCRIPTION_MAX_CHARS} characters"
            )));
        }
    }
    let mut declared = vec![runtime.clone()];
    if kind == RuntimeKind::Agent {
        declared.extend(installed_agents(paths).into_iter().map(String::from));
    }
    let profile = Profile::update(folder, |p| {
        if p.default_runtime.is_empty() {
            p.default_runtime = runtime.clone();
        }
        for rt in &declared {
            if !p.declares(rt) {
                p.runtimes.push(rt.clone());
            }
        }
        if let Some(d) = opts.description {
            p.description = Some(d.to_string());
        }
        if opts.intelligence.is_some() || p.intelligence.is_none() {
            p.intelligence = Some(nature.as_str().to_string());
        }
    })
    .map_err(fail)?;
    let doctrine = peer::doctrine(folder);
    if !doctrine.exists() {
        fsutil::write_atomic(&doctrine, DOCTRINE_STUB.as_bytes(), MODE_PRIVATE)
            .map_err(|e| fail(format!("cannot write {}: {e}", doctrine.display())))?;
    }
    for rt in &profile.runtimes {
        let env = peer::launch_env(folder, rt);
        if !env.exists() {
            fsutil::write_atomic(&env, crate::launch_env::stub(rt).as_bytes(), MODE_PRIVATE)
                .map_err(|e| fail(format!("cannot write {}: {e}", env.display())))?;
        }
    }
    let bearer = std::env::var("IAPEER_BEARER_TOKEN").is_ok_and(|b| !b.is_empty());
    for rt in &profile.runtimes {
        runtime::setup_peer(rt, folder, &name, bearer).map_err(fail)?;
    }
    let entry = profile.to_registry_peer(folder);
    let stored = entry.clone();
    Registry::update(paths, |r| -> Result<(), RegistryError> {
        r.upsert(stored);
        Ok(())
    })
    .map_err(fail)?;
    if kind == RuntimeKind::Router && opts.bootstrap {
        start_always_on(paths, &name, &runtime);
    }
    Ok(entry)
}

/// The `personality` field exactly as written in the folder's profile, if any.
fn raw_personality(folder: &Path) -> Option<String> {
    let text = std::fs::read_to_string(peer::profile(folder)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v.get("personality")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// Ask a running daemon to start an always-on peer now (quietly skipped when it is down: it
/// starts with the daemon).
fn start_always_on(paths: &Paths, name: &str, runtime: &str) {
    let Ok(mut c) = Client::connect(paths) else {
        eprintln!("note: the daemon is not running; {runtime}-{name} starts when it does");
        return;
    };
    match c.request(
        &json!({"op": "start", "personality": name, "runtime": runtime}),
        |_| {},
    ) {
        Ok(v) if v["ok"] == json!(true) => {}
        Ok(v) => eprintln!(
            "note: could not start {runtime}-{name}: {}",
            v["error"].as_str().unwrap_or("?")
        ),
        Err(e) => eprintln!("note: could not start {runtime}-{name}: {e}"),
    }
}

/// `remove <peer> [--force]`: drop the registry entry, end its sessions, delete its inbox and
/// markers; keep the folder.
pub fn remove(inv: &Invocation) -> CliResult {
    let name = inv
        .positional(args::PEER)
        .ok_or_else(|| usage(inv, "missing <peer>"))?;
    let paths = paths()?;
    let registry = Registry::load(&paths).map_err(fail)?;
    let Some(entry) = registry.find(name).cloned() else {
        return print(&format!(
            "peer \"{name}\" is not registered — nothing to remove\n"
        ));
    };
    if let Some(live) = super::view::live_state(&paths) {
        let ids: Vec<&String> = live
            .sessions
            .keys()
            .filter(|k| k.split_once('-').map(|(_, p)| p) == Some(name))
            .collect();
        if !ids.is_empty() && !inv.flag(flags::FORCE) {
            let ids: Vec<&str> = ids.iter().map(|s| s.as_str()).collect();
            return Err(fail(format!(
                "peer \"{name}\" is live ({}) — stop it first (iapeer stop {name}) or pass --force",
                ids.join(", ")
            )));
        }
        if let Ok(mut c) = Client::connect(&paths) {
            let _ = c.request(&json!({"op": "forget", "personality": name}), |_| {});
        }
    }
    Registry::update(&paths, |r| -> Result<bool, RegistryError> {
        Ok(r.remove(name))
    })
    .map_err(fail)?;
    let inbox = paths.attachments_dir(name);
    if inbox.exists() {
        std::fs::remove_dir_all(&inbox)
            .map_err(|e| fail(format!("cannot delete {}: {e}", inbox.display())))?;
    }
    if entry.declares("codex") {
        let key = runtime::codex_setup::project_key(&entry.cwd);
        if let Err(e) =
            runtime::codex_setup::edit_config(|d| runtime::codex_setup::untrust(d, &key))
        {
            eprintln!("iapeer remove: {e} — the trust entry of {key} stays; delete its [projects] table by hand");
        }
    }
    for rt in &entry.runtimes {
        if let Ok(id) = Identity::new(rt, name) {
            if let Err(e) = Markers::new(&paths, &id).remove_all() {
                eprintln!("iapeer remove: {e}");
            }
        }
    }
    // Keep the profile, out of the way: `verify --fix` must not bring the peer back, and
    // `init` in this folder restores it.
    let profile_path = peer::profile(&entry.cwd);
    if profile_path.is_file() {
        if let Err(e) = std::fs::rename(&profile_path, removed_profile(&entry.cwd)) {
            eprintln!("iapeer remove: cannot set the profile aside ({e}); verify --fix would register the peer again");
        }
    }
    print(&format!(
        "removed {name} (folder kept: {})\n",
        entry.cwd.display()
    ))
}

/// The peers a `--peer <p> | --all` verb acts on.
fn selected_peers(paths: &Paths, inv: &Invocation) -> Result<Vec<RegistryPeer>, CliError> {
    let registry = Registry::load(paths).map_err(fail)?;
    if inv.flag(flags::ALL) {
        return Ok(registry.peers);
    }
    let p = inv
        .value(flags::PEER)
        .ok_or_else(|| usage(inv, "pass --peer <p> or --all"))?;
    registry
        .find(p)
        .cloned()
        .map(|e| vec![e])
        .ok_or_else(|| fail(format!("peer \"{p}\" is not in the iapeer peers index")))
}

fn store(paths: &Paths, profile: &Profile, cwd: &Path) -> Result<(), CliError> {
    let entry = profile.to_registry_peer(cwd);
    Registry::update(paths, |r| -> Result<(), RegistryError> {
        r.upsert(entry);
        Ok(())
    })
    .map_err(fail)
}

/// `add-runtime <rt> (--peer <p> | --all)`: declare another agent runtime and do its setup;
/// the default runtime never changes.
pub fn add_runtime(inv: &Invocation) -> CliResult {
    let rt = inv
        .positional(args::RT)
        .ok_or_else(|| usage(inv, "missing <rt>"))?;
    let paths = paths()?;
    let kind = runtime::adapter_for(&paths, rt).map_err(fail)?.kind();
    if kind != RuntimeKind::Agent {
        return Err(fail(format!("{rt} is a router runtime; add-runtime declares agent runtimes (create a peer with --runtime {rt} instead)")));
    }
    let bearer = std::env::var("IAPEER_BEARER_TOKEN").is_ok_and(|b| !b.is_empty());
    let mut out = String::new();
    for peer in selected_peers(&paths, inv)? {
        if peer.nature() != Intelligence::Artificial {
            out.push_str(&format!(
                "{}: skipped (a {} peer cannot run on {rt})\n",
                peer.personality,
                peer.nature()
            ));
            continue;
        }
        let had = peer.declares(rt);
        let profile = Profile::update(&peer.cwd, |p| {
            if !p.declares(rt) {
                p.runtimes.push(rt.to_string());
            }
        })
        .map_err(fail)?;
        runtime::setup_peer(rt, &peer.cwd, &peer.personality, bearer).map_err(fail)?;
        let env = peer::launch_env(&peer.cwd, rt);
        if !env.exists() {
            fsutil::write_atomic(&env, crate::launch_env::stub(rt).as_bytes(), MODE_PRIVATE)
                .map_err(|e| fail(format!("cannot write {}: {e}", env.display())))?;
        }
        store(&paths, &profile, &peer.cwd)?;
        out.push_str(&format!(
            "{}: {rt} {}\n",
            peer.personality,
            if had {
                "already declared (setup refreshed)"
            } else {
                "added"
            }
        ));
    }
    print(&out)
}

/// `default-runtime <rt> (--peer <p> | --all)`: switch the primary runtime of peers that
/// declare it; refuse for those that do not.
pub fn default_runtime(inv: &Invocation) -> CliResult {
    let rt = inv
        .positional(args::RT)
        .ok_or_else(|| usage(inv, "missing <rt>"))?;
    let paths = paths()?;
    let mut out = String::new();
    let mut refused = 0;
    for peer in selected_peers(&paths, inv)? {
        if !peer.declares(rt) {
            refused += 1;
            eprintln!("iapeer default-runtime: peer \"{}\" does not declare runtime \"{rt}\" — add it first: iapeer add-runtime {rt} --peer {}", peer.personality, peer.personality);
            continue;
        }
        let profile =
            Profile::update(&peer.cwd, |p| p.default_runtime = rt.to_string()).map_err(fail)?;
        store(&paths, &profile, &peer.cwd)?;
        out.push_str(&format!("{}: default runtime {rt}\n", peer.personality));
    }
    print(&out)?;
    if refused > 0 {
        Err(CliError::Exit(1))
    } else {
        Ok(())
    }
}

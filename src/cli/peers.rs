//! Peer verbs (spec 07 "Peers"): `create`, `init`, `verify`, `remove`. They work on the
//! profile and the registry directly (no daemon needed), and tell the daemon when one runs.

use std::path::{Path, PathBuf};

use super::client::Client;
use super::error::fail;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{done, paths, print, required, usage, CliError, CliResult};
use crate::host::login::{self, Login};
use crate::host::login_memo::{self, Ask};
use crate::markers::Markers;
use crate::names::{Identity, Intelligence};
use crate::paths::{peer, Paths};
use crate::peers::{self, InitOptions, Initialized};
use crate::profile::Profile;
use crate::protocol::{call, Answer};
use crate::registry::{Registry, RegistryError, RegistryPeer};
use crate::runtime::{self, RuntimeKind};
use crate::worktree::Checkout;

/// Whether agent MCP entries carry the bearer token (`IAPEER_BEARER_TOKEN` set and not empty).
fn bearer() -> bool {
    std::env::var("IAPEER_BEARER_TOKEN").is_ok_and(|b| !b.is_empty())
}

/// The options `create` and `init` share, from their flags.
fn init_options(inv: &Invocation) -> InitOptions<'_> {
    InitOptions {
        runtime: inv.value(flags::PEER_RUNTIME),
        description: inv.value(flags::DESCRIPTION),
        intelligence: inv.value(flags::INTELLIGENCE),
        bearer: bearer(),
    }
}

/// `create <name>`: make the folder (`--path`, else `<root>/peers/<name>`) and `init` it.
pub fn create(inv: &Invocation) -> CliResult {
    let name = required(inv, args::NAME)?;
    // The name is judged before anything else, as it always was.
    peers::check_name(name)?;
    let paths = paths()?;
    judge_agents_as_the_daemon(&paths);
    let login = LoginWarning::ask(&paths, inv.value(flags::PEER_RUNTIME));
    let folder = match inv.value(flags::PATH) {
        Some(p) => Some(absolute(Path::new(p))?),
        None => None,
    };
    if let Some(repo) = inv.value(flags::WORKTREE) {
        let made = create_worktree(
            inv,
            &paths,
            name,
            folder.as_deref(),
            &absolute(Path::new(repo))?,
        );
        login.warn(&paths);
        return made;
    }
    if inv.value(flags::BRANCH).is_some() {
        return Err(usage(inv, "--branch goes with --worktree <repo>"));
    }
    let before = registered(&paths, name);
    let born = peers::create_peer(&paths, name, folder.as_deref(), &init_options(inv))?;
    let unconfigured = bootstrap(inv, &paths, &born);
    report(inv, "created", before.as_ref(), &born.peer)?;
    login.warn(&paths);
    unconfigured.map_or(Ok(()), Err)
}

/// Whether the agent CLI `create --runtime <rt>` names is logged in (issue 27 item 2), found
/// on a thread of its own while the peer is made: the answer `status` remembers while nothing
/// it depends on changed (`host::login_memo`: a login or logout changes the CLI's credential
/// files, and with them the key, at once), else asked (`host::login`, at most its timeout)
/// and remembered for `status` and the next `create` — a fresh ask costs seconds
/// (`opencode auth list` up to 5 s under load) and would tell nothing the key does not. The
/// peer's setup writes the CLI's config, which the key reads: the answer is moved to the key
/// after it ([`login_memo::rekey`]).
struct LoginWarning(Option<std::thread::JoinHandle<Option<Asked>>>);

/// What [`LoginWarning`]'s thread found: the agent, the key its answer was kept under before
/// the peer's setup, and the advice when it is not logged in.
struct Asked {
    agent: login::Agent,
    before: Option<String>,
    advice: Option<String>,
}

impl LoginWarning {
    /// Start finding out about `runtime` (nothing for a runtime without a login check or
    /// whose program is not found), remembered in `paths`' cache.
    fn ask(paths: &Paths, runtime: Option<&str>) -> LoginWarning {
        let agent = runtime.and_then(login::agent);
        let paths = paths.clone();
        LoginWarning(agent.map(|a| {
            std::thread::spawn(move || {
                let before = login_memo::key_now(&a);
                let (agent, answer) =
                    login_memo::answers(&paths, vec![a], Ask::Remembered).pop()?;
                let advice = (answer == Login::Out).then(|| login::advice(&agent));
                Some(Asked {
                    agent,
                    before,
                    advice,
                })
            })
        }))
    }

    /// Wait for the answer and warn on stderr when the CLI is not logged in, saying how to
    /// log in (a warning, never a refusal: the check runs in this environment, not the
    /// peer's `launch.env`).
    fn warn(self, paths: &Paths) {
        let Some(asked) = self.0.and_then(|t| t.join().ok().flatten()) else {
            return;
        };
        if let Some(before) = &asked.before {
            login_memo::rekey(paths, &asked.agent, before);
        }
        if let Some(advice) = asked.advice {
            eprintln!("warning: {advice}");
        }
    }
}

/// `create <name> --worktree <repo> [--branch <b>]`: the peer's folder is a new worktree of
/// the repository (issue 32 item 8); says which branch it got and how.
fn create_worktree(
    inv: &Invocation,
    paths: &Paths,
    name: &str,
    folder: Option<&Path>,
    repo: &Path,
) -> CliResult {
    let (born, made) = peers::worktree::create_worktree_peer(
        paths,
        name,
        folder,
        repo,
        inv.value(flags::BRANCH),
        &init_options(inv),
    )?;
    let unconfigured = bootstrap(inv, paths, &born);
    let repo = made.repository.display();
    let how = match &made.checkout {
        Checkout::NewBranch(b) => match &made.from {
            Some(c) => format!("on a new branch {b} (made from HEAD, {c})"),
            None => format!("on a new branch {b} (the repository has no commit yet)"),
        },
        Checkout::Existing(b) => format!("on the existing branch {b}"),
        Checkout::Tracking { name, remote } => {
            format!("on a new branch {name} tracking {remote} (there was no local {name})")
        }
    };
    if inv.flag(flags::JSON) {
        let doc = CreatedWorktreeDoc {
            peer: &born.peer,
            worktree: CreatedWorktree {
                repository: &made.repository,
                branch: made.checkout.branch(),
                branch_made: made.checkout.makes_branch(),
                from: made.from.as_deref(),
            },
        };
        print(&format!("{}\n", super::json_line(&doc)))?;
    } else {
        report(inv, "created", None, &born.peer)?;
        print(&format!(
            "{} is a worktree of {repo} {how}\n",
            born.peer.cwd.display()
        ))?;
    }
    unconfigured.map_or(Ok(()), Err)
}

/// The registry entry of `name` now, if any (to tell a second `create`/`init` from a birth).
fn registered(paths: &Paths, name: &str) -> Option<RegistryPeer> {
    Registry::load(paths).ok()?.find(name).cloned()
}

/// Judge agent runtimes with the running daemon's view of their programs, when a daemon
/// answers (issue 30 item 1: the daemon wakes the peer, so what it finds is what counts);
/// else with this process's own lookup, which looks at the same places.
fn judge_agents_as_the_daemon(paths: &Paths) {
    if let Some(views) = super::status::daemon_agents(paths) {
        runtime::agent_program::adopt(views);
    }
}

/// `init [folder]`: turn a folder (default: the current one) into a peer named after it.
pub fn init(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    judge_agents_as_the_daemon(&paths);
    let folder = match inv.positional(args::FOLDER) {
        Some(f) => absolute(Path::new(f))?,
        None => std::env::current_dir()
            .map_err(|e| fail(format!("cannot read the current folder: {e}")))?,
    };
    let name = folder
        .file_name()
        .map(|n| crate::names::normalize(&n.to_string_lossy()))
        .unwrap_or_default();
    let before = registered(&paths, &name);
    let born = peers::init_peer(&paths, &folder, &init_options(inv))?;
    let unconfigured = bootstrap(inv, &paths, &born);
    match before.as_ref().filter(|b| b.cwd != born.peer.cwd) {
        // A peer folder moved by hand, found again (issue 30 item 6).
        Some(old) if !inv.flag(flags::JSON) => print(&format!(
            "moved peer {}: the registry now points to {} (was {})\n",
            born.peer.personality,
            born.peer.cwd.display(),
            old.cwd.display()
        ))?,
        _ => report(inv, "initialized", before.as_ref(), &born.peer)?,
    }
    unconfigured.map_or(Ok(()), Err)
}

/// Run the package's `selfConfig` for a peer born on a package runtime (spec 08 §2), then
/// start a new always-on peer in a running daemon, unless `--no-bootstrap`. A router runtime
/// whose program is missing is said first (the peer is made, but cannot start until then).
/// Returns the failure to exit with when the package could not configure the peer (it is
/// made, and stays stopped).
fn bootstrap(inv: &Invocation, paths: &Paths, born: &Initialized) -> Option<CliError> {
    let mut unconfigured = None;
    if let Some(rt) = &born.always_on {
        if let Ok(Some(manifest)) = runtime::manifest::Manifest::load(paths, rt) {
            if let runtime::package::SelfConfig::Failed(why) =
                peers::configure(paths, &manifest, &born.peer)
            {
                unconfigured = Some(fail(format!(
                    "the {rt} package could not configure {} ({why}); the peer is created but stays stopped — give the package what it needs (see its self-config), then run iapeer init {} and iapeer start {}",
                    born.peer.personality,
                    born.peer.cwd.display(),
                    born.peer.personality
                )));
            }
        }
    }
    let mut missing = Vec::new();
    for rt in &born.peer.runtimes {
        if let Some(why) = runtime::router::missing_program(paths, rt, &born.peer.cwd) {
            eprintln!(
                "warning: {} cannot start on {rt}: {why}",
                born.peer.personality
            );
            missing.push(rt);
        }
    }
    if let Some(rt) = &born.always_on {
        if !inv.flag(flags::NO_BOOTSTRAP) && !missing.contains(&rt) && unconfigured.is_none() {
            start_always_on(paths, &born.peer.personality, rt);
        } else if inv.flag(flags::NO_BOOTSTRAP) && super::view::live_state(paths).is_some() {
            let name = &born.peer.personality;
            eprintln!(
                "note: {name} was not started (--no-bootstrap): iapeer start {name} starts it"
            );
        }
    }
    unconfigured
}

/// Print the peer `create`/`init` left: `<what> peer <name> in …`, also for one that was
/// there `before` unchanged (idempotent, spec 07); for one a runtime was added to, that it
/// was added and that the default stays.
fn report(
    inv: &Invocation,
    what: &str,
    before: Option<&RegistryPeer>,
    p: &RegistryPeer,
) -> CliResult {
    if inv.flag(flags::JSON) {
        return print(&format!("{}\n", super::json_line(p)));
    }
    let head = match before {
        None => format!("{what} peer {}", p.personality),
        Some(old) => {
            let added: Vec<&str> = p
                .runtimes
                .iter()
                .filter(|r| !old.runtimes.contains(r))
                .map(String::as_str)
                .collect();
            if added.is_empty() && old.description != p.description {
                // Not silently (issue 30 item 6): an existing peer's description was replaced.
                format!(
                    "peer {} already exists: description set to \"{}\" (was \"{}\")",
                    p.personality,
                    crate::visible::line(&p.description),
                    crate::visible::line(&old.description)
                )
            } else if added.is_empty() {
                // Idempotent (spec 07): the same line as the first time.
                format!("{what} peer {}", p.personality)
            } else {
                format!(
                    "peer {} already exists: added runtime {} (its default stays {}: iapeer \
                     default-runtime {} --peer {} makes it the default)",
                    p.personality,
                    added.join(", "),
                    p.default_runtime,
                    added[0],
                    p.personality
                )
            }
        }
    };
    print(&format!(
        "{head} in {} — runtimes: {} (default {}), intelligence {}\n",
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

/// Ask a running daemon to start an always-on peer now (quietly skipped when it is down: it
/// starts with the daemon).
pub(crate) fn start_always_on(paths: &Paths, name: &str, runtime: &str) {
    let Ok(mut c) = Client::connect(paths) else {
        eprintln!("note: the daemon is not running; {runtime}-{name} starts when it does");
        return;
    };
    let req = call::Start {
        personality: Some(name.to_string()),
        runtime: Some(runtime.to_string()),
        all: false,
    };
    match c.request(&req, |_| {}) {
        Ok(Answer::Ok(_)) => {}
        Ok(Answer::Failed(f)) => eprintln!("note: could not start {runtime}-{name}: {}", f.error),
        Err(e) => eprintln!("note: could not start {runtime}-{name}: {e}"),
    }
}

/// `remove --json`: `{"ok":true,"removed":false}` for a name that is not registered, else
/// `"removed":true` with the kept `"folder"`, `"inbox_kept"` (the file a human's messages were
/// set aside in, or null) and, for a worktree peer, `"worktree"`.
#[derive(Debug, Default, serde::Serialize)]
pub struct RemovedDoc {
    /// Whether a peer was removed.
    pub removed: bool,
    /// The peer's folder, kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<PathBuf>,
    /// Where a human's messages were set aside (`null` when there were none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inbox_kept: Option<Option<PathBuf>>,
    /// A worktree peer's worktree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<RemovedWorktree>,
}

/// `remove --json`'s `"worktree"`: `{"removed", "branch", "note"}`.
#[derive(Debug, serde::Serialize)]
pub struct RemovedWorktree {
    /// Whether git removed the worktree.
    pub removed: bool,
    /// The branch it was on, kept.
    pub branch: Option<String>,
    /// What became of it, in words.
    pub note: String,
}

/// `remove <peer> [--force]`: drop the registry entry, end its sessions, delete its attachment
/// inbox and markers, set a human's messages aside; keep the folder.
pub fn remove(inv: &Invocation) -> CliResult {
    let name = required(inv, args::PEER)?;
    let paths = paths()?;
    let registry = Registry::load(&paths)?;
    let Some(entry) = registry.find(name).cloned() else {
        return done(
            inv,
            &RemovedDoc::default(),
            &format!(
                "peer \"{name}\" is not registered — nothing to remove{}\n",
                super::suggest::peer_hint(&paths, name)
            ),
        );
    };
    let force = inv.flag(flags::REMOVE_FORCE);
    // A worktree holding work is refused before anything changes (issue 32 item 8).
    let worktree = match Profile::read(&entry.cwd)
        .ok()
        .flatten()
        .and_then(|p| p.worktree)
    {
        Some(record) => Some(peers::worktree::plan_removal(&entry.cwd, &record, force)?),
        None => None,
    };
    if super::view::live_state(&paths).is_some() {
        let ids = live_sessions(&paths, name);
        if !ids.is_empty() && !force {
            return Err(CliError::hinted(
                format!("peer \"{name}\" is live ({})", ids.join(", ")),
                format!("stop it first (iapeer stop {name}) or pass --force"),
            ));
        }
        if worktree.is_some() && !ids.is_empty() {
            // Its agent must be gone before git deletes the folder it works in.
            end_sessions(&paths, name, "removed")?;
        } else if let Ok(mut c) = Client::connect(&paths) {
            let req = call::Forget {
                personality: name.to_string(),
            };
            let _ = c.request(&req, |_| {});
        }
    }
    // The memory provider strips its surfaces while the peer's state is still there.
    crate::memory::provision::at_remove(&paths, &entry.cwd, name, &entry.runtimes);
    let noted = Registry::update(&paths, |r| -> Result<std::io::Result<()>, RegistryError> {
        r.remove(name);
        // Under the registry's lock: a send to this name can then say it was removed.
        Ok(crate::registry::former::note(
            &paths,
            name,
            None,
            crate::clock::now_ms(),
        ))
    })?;
    if let Err(e) = noted {
        eprintln!("iapeer remove: cannot note the removal ({e}); a send to {name} will not say it was removed");
    }
    let inbox = paths.attachments_dir(name);
    if inbox.exists() {
        std::fs::remove_dir_all(&inbox)
            .map_err(|e| fail(format!("cannot delete {}: {e}", inbox.display())))?;
    }
    let kept = set_human_inbox_aside(&paths, name);
    undo_peer_setup(&paths, name, &entry);
    let kept_note = kept
        .as_ref()
        .map(|k| format!("; its inbox kept as {}", k.display()))
        .unwrap_or_default();
    let mut doc = RemovedDoc {
        removed: true,
        folder: Some(entry.cwd.clone()),
        inbox_kept: Some(kept.clone()),
        worktree: None,
    };
    let Some(removal) = worktree else {
        return done(
            inv,
            &doc,
            &format!(
                "removed {name} (folder kept: {}{kept_note})\n",
                entry.cwd.display()
            ),
        );
    };
    let outcome = peers::worktree::remove_worktree(&removal, &entry.cwd, force);
    doc.worktree = Some(RemovedWorktree {
        removed: outcome.is_ok() && removal.removes(),
        branch: removal.branch().map(String::from),
        note: outcome
            .as_ref()
            .map_or_else(ToString::to_string, Clone::clone),
    });
    match outcome {
        Ok(note) => done(inv, &doc, &format!("removed {name} ({note}{kept_note})\n")),
        Err(e) => Err(fail(format!("removed {name}{kept_note}, but {e}"))),
    }
}

/// What `remove` undoes in a removed peer's folder and state: each runtime's setup, the
/// markers of each of its identities, and its profile, set aside as
/// `peer-profile.removed.json`. A failure is said on stderr and the rest goes on.
fn undo_peer_setup(paths: &Paths, name: &str, entry: &RegistryPeer) {
    for rt in &entry.runtimes {
        if let Err(e) = runtime::teardown_peer(rt, &entry.cwd) {
            eprintln!("iapeer remove: {e}");
        }
    }
    for rt in &entry.runtimes {
        if let Ok(id) = Identity::new(rt, name) {
            if let Err(e) = Markers::new(paths, &id).remove_all() {
                eprintln!("iapeer remove: {e}");
            }
        }
    }
    // Keep the profile, out of the way: `verify --fix` must not bring the peer back, and
    // `init` in this folder restores it.
    let profile_path = peer::profile(&entry.cwd);
    if profile_path.is_file() {
        if let Err(e) = std::fs::rename(&profile_path, peer::removed_profile(&entry.cwd)) {
            eprintln!("iapeer remove: cannot set the profile aside ({e}); verify --fix would register the peer again");
        }
    }
}

/// A removed human's messages and read mark are kept, under a name no later peer reads
/// (`<name>.removed-<ms>.jsonl` and `.read`): a new peer given the same name starts with an
/// empty inbox instead of someone else's messages. Returns where the messages went.
fn set_human_inbox_aside(paths: &Paths, name: &str) -> Option<PathBuf> {
    let stamp = crate::clock::now_ms();
    let aside = |p: PathBuf, ext: &str| p.with_file_name(format!("{name}.removed-{stamp}.{ext}"));
    let mut kept = None;
    for (from, ext) in [
        (paths.inbox(name), "jsonl"),
        (paths.inbox_read_mark(name), "read"),
    ] {
        if !from.exists() {
            continue;
        }
        let to = aside(from.clone(), ext);
        match std::fs::rename(&from, &to) {
            Ok(()) if ext == "jsonl" => kept = Some(to),
            Ok(()) => {}
            Err(e) => eprintln!(
                "iapeer remove: cannot set {} aside ({e}); a later peer named {name} would see it",
                from.display()
            ),
        }
    }
    kept
}

/// The live sessions of peer `name` (identities), from the running daemon's state file.
fn live_sessions(paths: &Paths, name: &str) -> Vec<String> {
    super::view::live_state(paths)
        .map(|live| {
            live.sessions
                .keys()
                .filter(|k| k.split_once('-').map(|(_, p)| p) == Some(name))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// How long `rename --force` (and `remove --force` of a worktree peer) waits for the peer's
/// sessions to end (the daemon sends SIGKILL 3 s after SIGTERM).
const END_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// End the live sessions of `name` through the daemon and wait until they are gone: the
/// daemon answers once it has asked them to end, and their processes may still write into
/// the folder (an echo agent finishing a reply) until then. `what` is what the verb does to
/// the folder (`moved`, `removed`), for the refusal.
fn end_sessions(paths: &Paths, name: &str, what: &str) -> Result<(), CliError> {
    let verb = if what == "moved" { "rename" } else { "remove" };
    let mut c = Client::connect(paths).map_err(|e| {
        CliError::hinted(
            format!("peer \"{name}\" is live but the daemon does not answer ({e})"),
            "stop it first",
        )
    })?;
    let req = call::Forget {
        personality: name.to_string(),
    };
    c.request(&req, |_| {})
        .map_err(|e| fail(format!("could not end the sessions of \"{name}\": {e}")))?;
    let deadline = std::time::Instant::now() + END_WAIT;
    while !live_sessions(paths, name).is_empty() {
        if std::time::Instant::now() >= deadline {
            return Err(fail(format!(
                "the sessions of \"{name}\" did not end within {} s; nothing was {what} — \
                 run iapeer stop {name}, then {verb} again",
                END_WAIT.as_secs()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(())
}

/// `rename --json`: the old `"from"` folder, the registry entry as written (`"peer"`), the
/// moved Claude Code `"history"` folder (or null), the peers whose triggers named the old
/// name (`"triggers_in"`) and, for a worktree peer, `"worktree": {"branch"}`.
#[derive(Debug, serde::Serialize)]
pub struct RenamedDoc<'a> {
    /// The folder before the move.
    pub from: &'a Path,
    /// The registry entry as written.
    pub peer: &'a RegistryPeer,
    /// Where the Claude Code history folder went, if one moved.
    pub history: Option<&'a Path>,
    /// The peers whose timer/watcher triggers named the old name.
    pub triggers_in: &'a [String],
    /// A worktree peer's branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<RenamedWorktree<'a>>,
}

/// `rename --json`'s `"worktree"`.
#[derive(Debug, serde::Serialize)]
pub struct RenamedWorktree<'a> {
    /// The worktree's branch, if git names one.
    pub branch: Option<&'a str>,
}

/// `create --worktree --json`: the registry entry's fields (as `create --json` prints them)
/// and `"worktree": {"repository", "branch", "branch_made", "from"}`.
#[derive(Debug, serde::Serialize)]
pub struct CreatedWorktreeDoc<'a> {
    /// The registry entry, its fields at the top level.
    #[serde(flatten)]
    pub peer: &'a RegistryPeer,
    /// The worktree made.
    pub worktree: CreatedWorktree<'a>,
}

/// `create --worktree --json`'s `"worktree"`.
#[derive(Debug, serde::Serialize)]
pub struct CreatedWorktree<'a> {
    /// The repository's git directory.
    pub repository: &'a Path,
    /// The branch checked out.
    pub branch: &'a str,
    /// Whether the branch was made for it.
    pub branch_made: bool,
    /// The start point a new branch was made from, if any.
    pub from: Option<&'a str>,
}

/// `rename <old> <new> [--force]`: move the peer's folder (and Claude history) to `<new>`,
/// update profile and registry. A live peer needs `--force`, which ends its sessions first.
pub fn rename(inv: &Invocation) -> CliResult {
    let old = required(inv, args::OLD)?;
    let new = required(inv, args::NEW)?;
    let paths = paths()?;
    // Everything that can be refused is refused before a live peer is ended.
    peers::plan_rename(&paths, old, new).map_err(|e| match e {
        peers::PeerError::NotRegistered(name) => super::suggest::not_registered(&paths, &name),
        e => fail(e),
    })?;
    let live = live_sessions(&paths, old);
    if !live.is_empty() {
        if !inv.flag(flags::FORCE) {
            return Err(CliError::hinted(
                format!("peer \"{old}\" is live ({})", live.join(", ")),
                format!("stop it first (iapeer stop {old}) or pass --force"),
            ));
        }
        // A write after the move would bring the old folder back.
        end_sessions(&paths, old, "moved")?;
    }
    let moved = peers::rename_peer(&paths, old, new, bearer())?;
    for w in &moved.warnings {
        eprintln!("iapeer rename: {w}");
    }
    restart_always_on_after_rename(&paths, &moved.peer);
    if !moved.triggers_in.is_empty() && super::view::live_state(&paths).is_some() {
        // The services hold the triggers they read at start: a fresh one reads the new name.
        for outcome in super::runtimes::restart_runtime_peers(&paths, runtime::notifier::NAME, &[])
        {
            match outcome {
                Ok(identity) => {
                    eprintln!("note: {identity} restarted to read the renamed triggers")
                }
                Err(note) => eprintln!("note: {note}"),
            }
        }
    }
    let history = match &moved.history {
        Some((_, to)) => format!("; Claude Code history moved to {}", to.display()),
        None => String::new(),
    };
    let triggers = if moved.triggers_in.is_empty() {
        String::new()
    } else {
        format!(
            "; timer/watcher triggers naming {old} now name {new} (in the profiles of {})",
            moved.triggers_in.join(", ")
        )
    };
    // A worktree peer's folder was moved by git; its branch keeps its name (issue 32 item 8).
    let worktree = Profile::read(&moved.peer.cwd)
        .ok()
        .flatten()
        .and_then(|p| p.worktree)
        .map(|record| {
            let branch = match crate::worktree::state(&moved.peer.cwd, &record) {
                crate::worktree::State::Known(l) => l.branch,
                _ => Some(record.branch.clone()),
            };
            let repo = crate::worktree::shown_repository(&record.repository);
            let note = peers::worktree::branch_after_rename(branch.as_deref(), &repo, old, new);
            (branch, note)
        });
    let worktree_note = worktree
        .as_ref()
        .map(|(_, note)| format!("; worktree moved with git, {note}"))
        .unwrap_or_default();
    let doc = RenamedDoc {
        from: &moved.from,
        peer: &moved.peer,
        history: moved.history.as_ref().map(|(_, to)| to.as_path()),
        triggers_in: &moved.triggers_in,
        worktree: worktree.as_ref().map(|(branch, _)| RenamedWorktree {
            branch: branch.as_deref(),
        }),
    };
    let text = format!(
        "renamed {old} to {new}: {} → {}{history}{triggers}{worktree_note}\n",
        moved.from.display(),
        moved.peer.cwd.display()
    );
    done(inv, &doc, &text)
}

/// After a rename, bring the peer's always-on runtimes (a human's inbox writer, a service)
/// back under the new name: the daemon supervises identities, and the old one is gone
/// (spec 05 §8). One that was stopped stays stopped (its mark moved with the rename).
fn restart_always_on_after_rename(paths: &Paths, peer: &RegistryPeer) {
    if super::view::live_state(paths).is_none() {
        return; // it starts with the daemon
    }
    for rt in &peer.runtimes {
        let always_on = runtime::adapter_for(paths, rt)
            .map(|a| a.kind() == RuntimeKind::Router)
            .unwrap_or(false);
        let stopped = Identity::new(rt, &peer.personality)
            .map(|id| Markers::new(paths, &id).is_set(crate::markers::Flag::Stopped))
            .unwrap_or(true);
        if always_on && !stopped {
            start_always_on(paths, &peer.personality, rt);
        }
    }
}

/// The peers a `--peer <p> | --all` verb acts on.
/// The peers `--peer <p>` or `--all` names (the registry entries).
pub(crate) fn selected_peers(
    paths: &Paths,
    inv: &Invocation,
) -> Result<Vec<RegistryPeer>, CliError> {
    let registry = Registry::load(paths)?;
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
        .ok_or_else(|| super::suggest::not_registered(paths, p))
}

fn store(paths: &Paths, profile: &Profile, cwd: &Path) -> Result<(), CliError> {
    let entry = profile.to_registry_peer(cwd);
    Registry::update(paths, |r| -> Result<(), RegistryError> {
        r.upsert(entry);
        Ok(())
    })
    .map_err(CliError::from)
}

/// `add-runtime --json` and `default-runtime --json`: `{"runtime":<rt>,"peers":[…]}`, each
/// peer an [`AddedRow`] (add-runtime) or its name (default-runtime).
#[derive(Debug, serde::Serialize)]
pub struct RuntimeDoc<'a, Row> {
    /// The runtime named.
    pub runtime: &'a str,
    /// What became of each selected peer.
    pub peers: Vec<Row>,
}

/// One peer of `add-runtime --json`.
#[derive(Debug, serde::Serialize)]
pub struct AddedRow {
    /// The peer.
    pub personality: String,
    /// `added`, `refreshed` (already declared: setup done again) or `skipped` (a peer of
    /// another intelligence, with --all).
    pub outcome: &'static str,
}

/// `approval-mode --json`: `{"peers":[{"peer","mode"}…]}`.
#[derive(Debug, serde::Serialize)]
pub struct ModesDoc {
    /// Each selected peer's mode.
    pub peers: Vec<ModeRow>,
}

/// One peer of `approval-mode --json`.
#[derive(Debug, serde::Serialize)]
pub struct ModeRow {
    /// The peer.
    pub peer: String,
    /// `gated` or `bypass`.
    pub mode: &'static str,
}

/// `add-runtime <rt> (--peer <p> | --all)`: declare another agent runtime and do its setup;
/// the default runtime never changes.
pub fn add_runtime(inv: &Invocation) -> CliResult {
    let rt = required(inv, args::RT)?;
    let paths = paths()?;
    judge_agents_as_the_daemon(&paths);
    let kind = runtime::adapter_for(&paths, rt)?.kind();
    if kind != RuntimeKind::Agent {
        return Err(fail(format!("{rt} is a human's or a service's runtime; add-runtime declares agent runtimes (create a peer with --runtime {rt} instead)")));
    }
    let bearer = bearer();
    let mut out = String::new();
    let mut rows = Vec::new();
    let all = inv.flag(flags::ALL);
    for peer in selected_peers(&paths, inv)? {
        if peer.nature() != Intelligence::Artificial {
            if !all {
                // One named peer: a refusal, as create refuses the same (spec 07).
                return Err(fail(format!(
                    "peer \"{}\": {} (e.g. iapeer create <name> --runtime {rt})",
                    peer.personality,
                    peers::PeerError::IntelligenceNotAllowed {
                        nature: peer.nature(),
                        runtime: rt.to_string(),
                    }
                )));
            }
            rows.push(AddedRow {
                personality: peer.personality.clone(),
                outcome: "skipped",
            });
            out.push_str(&format!(
                "{}: skipped (a peer of intelligence {} cannot run on {rt})\n",
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
        })?;
        runtime::setup_peer(rt, &peer.cwd, &peer.personality, bearer).map_err(fail)?;
        peers::write_launch_env_stub(&peer.cwd, rt)?;
        store(&paths, &profile, &peer.cwd)?;
        if !had {
            // A runtime's birth (spec 08 §3): the memory provider equips it too.
            crate::memory::provision::at_birth(
                &paths,
                &peer.cwd,
                &peer.personality,
                &[rt.to_string()],
            );
        }
        let outcome = if had { "refreshed" } else { "added" };
        rows.push(AddedRow {
            personality: peer.personality.clone(),
            outcome,
        });
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
    done(
        inv,
        &RuntimeDoc {
            runtime: rt,
            peers: rows,
        },
        &out,
    )
}

/// `default-runtime <rt> (--peer <p> | --all)`: switch the primary runtime of peers that
/// declare it; refuse for those that do not.
pub fn default_runtime(inv: &Invocation) -> CliResult {
    let rt = required(inv, args::RT)?;
    let paths = paths()?;
    let kind = runtime::adapter_for(&paths, rt)?.kind();
    let mut out = String::new();
    let mut rows = Vec::new();
    let mut refusals = Vec::new();
    for peer in selected_peers(&paths, inv)? {
        if !peer.declares(rt) {
            let refusal = undeclared_default(&peer.personality, rt, kind);
            eprintln!("iapeer default-runtime: {refusal}");
            refusals.push(refusal);
            continue;
        }
        let profile = Profile::update(&peer.cwd, |p| p.default_runtime = rt.to_string())?;
        store(&paths, &profile, &peer.cwd)?;
        rows.push(peer.personality.clone());
        out.push_str(&format!("{}: default runtime {rt}\n", peer.personality));
    }
    if refusals.is_empty() {
        return done(
            inv,
            &RuntimeDoc {
                runtime: rt,
                peers: rows,
            },
            &out,
        );
    }
    print(&out)?;
    if super::wants_json(inv) {
        // Printed on stderr already; the --json document carries them once more.
        return Err(CliError::failed(refusals.join("; ")));
    }
    Err(CliError::Exit(1))
}

/// `approval-mode [gated|bypass] (--peer <p> | --all)` (spec 10 §4): print each selected
/// peer's approval mode, or set it in the profile (`approval_mode: "gated"`; bypass removes
/// the key, the default). It applies from the peer's next session.
pub fn approval_mode(inv: &Invocation) -> CliResult {
    let gated = match inv.positional(args::MODE) {
        None => None,
        Some("gated") => Some(true),
        Some("bypass") => Some(false),
        Some(other) => {
            return Err(usage(
                inv,
                format!(
                "unknown mode \"{other}\": gated (a human answers permission prompts) or bypass"
            ),
            ))
        }
    };
    let paths = paths()?;
    let (mut out, mut rows) = (String::new(), Vec::new());
    for peer in selected_peers(&paths, inv)? {
        let profile = match gated {
            Some(g) => Profile::update(&peer.cwd, |p| {
                p.approval_mode = g.then(|| crate::profile::APPROVAL_MODE_GATED.to_string())
            })?,
            None => Profile::read(&peer.cwd)?.ok_or_else(|| {
                fail(format!(
                    "{} has no profile in {} — iapeer verify says what to do",
                    peer.personality,
                    peer.cwd.display()
                ))
            })?,
        };
        let mode = if profile.is_gated() {
            "gated"
        } else {
            "bypass"
        };
        let agent = peer
            .runtimes
            .iter()
            .any(|r| crate::runtime_table::get(r).is_some_and(|row| row.gates_approvals));
        let note = match (agent, gated.is_some()) {
            (false, _) => " (no runtime that can gate approvals: nothing to gate)".to_string(),
            (true, true) => format!(
                " — from its next session (iapeer new {} starts one now)",
                peer.personality
            ),
            (true, false) => String::new(),
        };
        out.push_str(&format!("{}: {mode}{note}\n", peer.personality));
        rows.push(ModeRow {
            peer: peer.personality.clone(),
            mode,
        });
    }
    done(inv, &ModesDoc { peers: rows }, &out)
}

/// Why `default-runtime <rt>` is refused for a peer that does not declare `rt`, with the step
/// that works for this kind of runtime: an agent runtime is added first; a router runtime
/// cannot be added to an existing peer, so a peer is created on it.
fn undeclared_default(peer: &str, rt: &str, kind: RuntimeKind) -> String {
    match kind {
        RuntimeKind::Agent => format!(
            "peer \"{peer}\" does not declare runtime \"{rt}\" — add it first: iapeer add-runtime {rt} --peer {peer}"
        ),
        _ => format!(
            "peer \"{peer}\" does not declare runtime \"{rt}\", and {rt} is a human's or a service's runtime, which is \
             not added to an existing peer — create a peer on it instead: iapeer create <name> --runtime {rt}"
        ),
    }
}

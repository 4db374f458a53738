//! Lifecycle verbs that talk to the daemon (spec 05 §5): `stop`, `start`, `attach`,
//! `live-runtime` and the bare `iapeer <runtime>`.

use std::io::IsTerminal;

use super::client::Client;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{done, paths, print, required, usage, CliError, CliResult};
use crate::protocol::{
    call, Answer, Call, Code, CompactOutcome, CompactReply, Failure, IdentityReply, InterruptReply,
    ListReply, NewReply, StartReply, StopReply, WakeReply,
};

fn failed(f: Failure) -> CliError {
    let mut error = super::suggest::with_start_command(&f.error);
    if f.code == Code::NotRegistered {
        // A typo of a registered name: say which one.
        if let (Some(name), Ok(paths)) = (super::suggest::refused_peer(&error), paths()) {
            let hint = super::suggest::peer_hint(&paths, name);
            error.push_str(&hint);
        }
    }
    // Nothing to resume: no transcript, no recorded conversation, or its file is gone.
    let nothing = error.ends_with("no transcript to resume")
        || error.ends_with(crate::runtime::NO_RECORDED_CONVERSATION)
        || (error.contains(" of conversation ") && error.ends_with(" to resume"));
    if nothing {
        let peer = super::suggest::refused_peer(&error).unwrap_or("<peer>");
        let hint = format!(" — start a fresh session with: iapeer new {peer}");
        error.push_str(&hint);
    }
    CliError::Refused(Failure {
        code: f.code,
        error,
    })
}

/// The success of `answer`, or its failure as the CLI's error.
fn succeeded<T>(answer: Answer<T>) -> Result<T, CliError> {
    answer.into_result().map_err(failed)
}

/// `stop <peer> [runtime] | --all` and `start …`.
pub fn stop_start(inv: &Invocation, stop: bool) -> CliResult {
    let all = inv.flag(flags::ALL);
    let peer = inv.positional(args::PEER);
    if all == peer.is_some() {
        return Err(usage(inv, "name a peer or pass --all"));
    }
    let personality = peer.map(String::from);
    let runtime = inv.positional(args::RUNTIME).map(String::from);
    let paths = paths()?;
    let mut client = Client::connect(&paths)?;
    let nothing_or = |ids: &[String]| {
        if ids.is_empty() {
            "nothing".to_string()
        } else {
            ids.join(", ")
        }
    };
    let everyone = stop && inv.flag(flags::EVERYONE);
    if everyone && !all {
        return Err(usage(inv, "--everyone goes with --all"));
    }
    if stop {
        let req = call::Stop {
            personality,
            runtime,
            all,
            everyone,
        };
        let reply: StopReply = succeeded(client.request(&req, |_| {})?)?;
        let mut s = format!("stopped {}", nothing_or(&reply.stopped));
        if !reply.ended.is_empty() {
            s.push_str(&format!(" (ended {})", reply.ended.join(", ")));
        }
        if !reply.kept.is_empty() {
            s.push_str(&format!(
                "\nleft running: {} (humans and services: stop one by name, or add --everyone)",
                reply.kept.join(", ")
            ));
        }
        done(inv, &reply, &format!("{s}\n"))
    } else {
        let req = call::Start {
            personality,
            runtime,
            all,
        };
        let reply: StartReply = succeeded(client.request(&req, |_| {})?)?;
        // A router runtime whose program is missing was launched in vain: say why (exit 1).
        let cannot: Vec<String> = reply
            .started
            .iter()
            .filter_map(|id| {
                let ident = crate::names::Identity::parse(id).ok()?;
                super::send::missing_program_of(&paths, &ident.personality, Some(&ident.runtime))
                    .map(|why| format!("{id} cannot start: {why}"))
            })
            .collect();
        if !cannot.is_empty() {
            return Err(CliError::failed(format!(
                "{} take messages again, but {}",
                nothing_or(&reply.cleared),
                cannot.join("; ")
            )));
        }
        let mut s = format!("started {}", nothing_or(&reply.cleared));
        if !reply.started.is_empty() {
            s.push_str(&format!(" (running now: {})", reply.started.join(", ")));
        } else if !reply.cleared.is_empty() {
            s.push_str(" — agents wake on their next message");
        }
        done(inv, &reply, &format!("{s}\n"))
    }
}

/// `live-runtime <peer>`: the runtime the peer is live on; exit 1 with empty stdout if none.
pub fn live_runtime(inv: &Invocation) -> CliResult {
    let peer = required(inv, args::PEER)?;
    let paths = paths()?;
    let req = call::LiveRuntime {
        personality: peer.to_string(),
    };
    match Client::connect(&paths)?.request(&req, |_| {})? {
        Answer::Ok(r) => done(inv, &r, &format!("{}\n", r.runtime)),
        // Not live: exit 1 and nothing more (for scripts); an unknown name is said.
        Answer::Failed(f) if inv.flag(flags::JSON) || f.code != Code::NotLive => Err(failed(f)),
        Answer::Failed(_) => Err(CliError::Exit(1)),
    }
}

/// `attach <peer> [runtime]`: wake with resume if asleep, then attach this terminal.
pub fn attach(inv: &Invocation) -> CliResult {
    let peer = required(inv, args::PEER)?;
    if !std::io::stdin().is_terminal() {
        return Err(CliError::failed("attach needs a terminal on stdin"));
    }
    refuse_attach_to_a_router_peer(peer, inv.positional(args::RUNTIME))?;
    let req = call::Attach {
        personality: peer.to_string(),
        runtime: inv.positional(args::RUNTIME).map(String::from),
        fresh: false,
        no_attach: false,
    };
    connect_and_attach(&req, peer)
}

/// What the daemon would refuse, refused before the terminal is taken over and the detach
/// hint printed: a peer that is not registered (with the name meant), a runtime it does not
/// declare, one with no agent runtime to attach to (a human's inbox, a service), and a
/// stopped endpoint. An unreadable registry is left to the daemon.
fn refuse_attach_to_a_router_peer(peer: &str, runtime: Option<&str>) -> CliResult {
    let paths = paths()?;
    let Ok(registry) = crate::registry::Registry::load(&paths) else {
        return Ok(());
    };
    let Some(entry) = registry.find(peer).cloned() else {
        return Err(super::suggest::not_registered(&paths, peer));
    };
    if let Some(rt) = runtime.filter(|rt| !entry.runtimes.iter().any(|d| d == rt)) {
        return Err(CliError::failed(format!(
            "peer \"{peer}\" does not declare runtime \"{rt}\" (it has {}) — attach {peer} \
             without a runtime for its default",
            entry.runtimes.join(", ")
        )));
    }
    let rt = runtime.unwrap_or(&entry.default_runtime);
    let router = crate::runtime::adapter_for(&paths, rt)
        .is_ok_and(|a| a.kind() == crate::runtime::RuntimeKind::Router);
    if router {
        return Err(CliError::failed(format!(
            "attach needs an agent runtime ({rt} is a human's or a service's runtime: {peer} has no session \
             to attach to)"
        )));
    }
    let stopped = crate::names::Identity::new(rt, peer).is_ok_and(|id| {
        crate::markers::Markers::new(&paths, &id).is_set(crate::markers::Flag::Stopped)
    });
    if stopped {
        return Err(CliError::failed(format!(
            "\"{peer}\" ({rt}) is stopped — iapeer start {peer} first, then attach"
        )));
    }
    Ok(())
}

/// Ask the daemon to wake and attach, with the terminal raw from the start: Ctrl-] (or
/// Ctrl-C) during the wait cancels the attach and leaves the peer booting; other keys are
/// typed ahead into the session.
fn connect_and_attach(req: &call::Attach, what: &str) -> CliResult {
    use super::attach::{self, WaitKeys};
    let paths = paths()?;
    let mut client = Client::connect(&paths)?;
    let cancel_handle = client
        .stream_handle()
        .map_err(|e| CliError::failed(format!("cannot use the daemon's socket: {e}")))?;
    // Raw before the hint: keys typed once it shows must not meet the line discipline (it
    // turned a typed-ahead Enter into a line feed the session ignores; seen in CI).
    let guard = attach::RawGuard::enter();
    eprint!("{}{}", attach::detach_hint(what), guard.line_end());
    let keys = attach::keys();
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    let (req, label) = (req.clone(), format!("attaching to {what}"));
    std::thread::spawn(move || {
        let answer = client.request_with_indicator(&req, &label);
        let _ = done_tx.send((answer, client));
    });
    let mut typed_ahead = Vec::new();
    let mut cancelled = false;
    let (answer, client) = loop {
        crossbeam_channel::select! {
            recv(done_rx) -> r => break r.map_err(|_| CliError::failed("the attach request ended without an answer"))?,
            recv(keys) -> k => match k {
                Ok(chunk) if !cancelled => match attach::wait_keys(&chunk) {
                    WaitKeys::Cancel => {
                        cancelled = true;
                        let _ = cancel_handle.shutdown(std::net::Shutdown::Both);
                    }
                    WaitKeys::TypeAhead => typed_ahead.extend_from_slice(&chunk),
                },
                Ok(_) => {}
                // End of input: wait for the answer alone.
                Err(_) => {
                    let r = done_rx.recv().map_err(|_| CliError::failed("the attach request ended without an answer"))?;
                    break r;
                }
            },
        }
    };
    if cancelled {
        drop(guard);
        eprintln!(
            "attach cancelled — {what} goes on waking; attach later with: iapeer attach {what}"
        );
        return Ok(());
    }
    let reply = answer.map_err(CliError::from);
    let reply = reply.and_then(succeeded);
    if let Err(e) = reply {
        drop(guard);
        return Err(e);
    }
    attach::run(client.into_stream(), keys, typed_ahead, guard).map_err(super::error::fail)
}

/// `iapeer <runtime>` in a peer's folder: a fresh session of that peer on `runtime`, then
/// attach (on a TTY) or report and exit.
pub fn runtime_shortcut(runtime: &str, _inv: &Invocation) -> CliResult {
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failed(format!("cannot read the current folder: {e}")))?;
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    let paths = paths()?;
    // The peer whose folder holds the current directory (a subfolder works too).
    let registry = crate::registry::Registry::load(&paths)?;
    let name = match registry.containing(&cwd) {
        Some(p) => p.personality.clone(),
        None => {
            return Err(CliError::failed(format!(
                "{} is not inside a peer's folder — run `iapeer init` here first (or cd into a peer's folder)",
                cwd.display()
            )))
        }
    };
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let req = call::Attach {
        personality: name.clone(),
        runtime: Some(runtime.to_string()),
        fresh: true,
        no_attach: !tty,
    };
    if tty {
        return connect_and_attach(&req, &name);
    }
    let ready: WakeReply = succeeded(Client::connect(&paths)?.request(&req, |_| {})?)?;
    print(&format!(
        "started a fresh session {runtime}-{name} (pid {})\n",
        ready.pid
    ))
}

/// Send `req` with a progress indicator (none with `--json`) and return its success.
fn daemon_op<C: Call>(inv: &Invocation, req: &C, what: &str) -> Result<C::Reply, CliError> {
    let paths = paths()?;
    let mut client = Client::connect(&paths)?;
    let answer = if super::wants_json(inv) {
        client.request(req, |_| {})?
    } else {
        client.request_with_indicator(req, what)?
    };
    succeeded(answer)
}

/// [`daemon_op`] for a verb on `<peer> [runtime]`: the request `make(peer, runtime)`, the
/// indicator `<doing> <peer>`.
fn peer_op<C: Call>(
    inv: &Invocation,
    doing: &str,
    make: impl FnOnce(String, Option<String>) -> C,
) -> Result<C::Reply, CliError> {
    let peer = required(inv, args::PEER)?;
    let req = make(
        peer.to_string(),
        inv.positional(args::RUNTIME).map(String::from),
    );
    daemon_op(inv, &req, &format!("{doing} {peer}"))
}

/// `new <peer> [runtime]`: a fresh session now; exit 0 once it is ready.
pub fn new(inv: &Invocation) -> CliResult {
    let answer: NewReply = peer_op(inv, "restarting", |personality, runtime| call::New {
        personality,
        runtime,
    })?;
    done(
        inv,
        &answer,
        &format!(
            "{} restarted fresh{}\n",
            answer.identity(),
            answer
                .pid()
                .map(|p| format!(" (pid {p})"))
                .unwrap_or_default()
        ),
    )
}

/// `wake <peer> [runtime]`: the session up now, as a message would bring it; exit 0 once
/// it is ready (issue 30 item 4).
pub fn wake(inv: &Invocation) -> CliResult {
    let answer: WakeReply = peer_op(inv, "waking", |personality, runtime| call::Wake {
        personality,
        runtime,
    })?;
    let what = if answer.woke { "woke" } else { "already live:" };
    done(
        inv,
        &answer,
        &format!("{what} {} (pid {})\n", answer.identity, answer.pid),
    )
}

/// `restart <peer> [runtime]`: end the session and bring it up again on the recorded
/// conversation; says whether it resumed or started fresh (from `list`'s `mode`).
pub fn restart(inv: &Invocation) -> CliResult {
    let answer: NewReply = peer_op(inv, "restarting", |personality, runtime| call::Restart {
        personality,
        runtime,
    })?;
    let how = match answer.pid() {
        None => String::new(),
        Some(pid) => {
            let mode = session_mode(answer.identity());
            let on = match mode.as_deref() {
                Some("resume") => " on its conversation",
                Some("fresh") => " with a fresh conversation (none recorded to continue)",
                _ => "",
            };
            format!("{on} (pid {pid})")
        }
    };
    done(
        inv,
        &answer,
        &format!("{} restarted{how}\n", answer.identity()),
    )
}

/// The `mode` (`fresh`/`resume`) of `identity`'s live session per `list`; `None` when it
/// cannot be asked or is not live.
fn session_mode(identity: &str) -> Option<String> {
    let paths = paths().ok()?;
    let mut client = Client::connect(&paths).ok()?;
    let list: ListReply = client
        .request(&call::List {}, |_| {})
        .ok()?
        .into_result()
        .ok()?;
    list.sessions
        .into_iter()
        .find(|s| s.identity == identity)
        .map(|s| s.mode)
}

/// `interrupt <peer> [runtime]`.
pub fn interrupt(inv: &Invocation) -> CliResult {
    let answer: InterruptReply = peer_op(inv, "interrupting", |personality, runtime| {
        call::Interrupt {
            personality,
            runtime,
        }
    })?;
    done(inv, &answer, &format!("interrupted {}\n", answer.identity))
}

/// `compact <peer> [runtime] [--json]`.
pub fn compact(inv: &Invocation) -> CliResult {
    let answer: CompactReply = peer_op(inv, "compacting", |personality, runtime| call::Compact {
        personality,
        runtime,
    })?;
    let resumed = if answer.resumed {
        " (resumed first)"
    } else {
        ""
    };
    match answer.outcome {
        // A refusal (exit 1), as the original tool's `compact` answers it: its callers read
        // the exit status; the line keeps its outcome word `nothing-to-compact`.
        CompactOutcome::NothingToCompact => Err(CliError::failed(format!(
            "{}: nothing-to-compact{resumed} — its conversation is fresh, there is nothing to \
             compact yet",
            answer.identity
        ))),
        CompactOutcome::Compacted => done(
            inv,
            &answer,
            &format!("{}: compacted{resumed}\n", answer.identity),
        ),
    }
}

/// The caller's own identity for `self-*` verbs.
fn own_identity() -> Result<crate::names::Identity, CliError> {
    let v = std::env::var("PEER_IDENTITY").unwrap_or_default();
    if v.trim().is_empty() {
        return Err(CliError::failed(
            "PEER_IDENTITY is not set — self-* verbs run inside a peer's session",
        ));
    }
    crate::names::Identity::parse(&v).map_err(|e| CliError::failed(format!("PEER_IDENTITY: {e}")))
}

/// `self-fresh`: end own session; a fresh one comes up right after.
pub fn self_fresh(inv: &Invocation) -> CliResult {
    let me = own_identity()?;
    let req = call::SelfFresh {
        identity: me.to_string(),
    };
    let answer: IdentityReply = daemon_op(inv, &req, "restarting")?;
    done(
        inv,
        &answer,
        &format!("{}: a fresh session follows\n", answer.identity),
    )
}

/// `self-done`: arm the ephemeral quiet wind-down without sending anything.
pub fn self_done(inv: &Invocation) -> CliResult {
    let me = own_identity()?;
    let paths = paths()?;
    let markers = crate::markers::Markers::new(&paths, &me);
    markers.set(crate::markers::Flag::EphemeralArmed)?;
    let registry = crate::registry::Registry::load(&paths)?;
    let ephemeral = registry
        .find(&me.personality)
        .and_then(|p| crate::profile::Profile::read(&p.cwd).ok().flatten())
        .is_some_and(|p| p.is_ephemeral());
    let doc = SelfDoneDoc {
        identity: me.to_string(),
        ephemeral,
    };
    if ephemeral {
        done(
            inv,
            &doc,
            &format!("{me}: done; the session winds down once quiet\n"),
        )
    } else {
        done(
            inv,
            &doc,
            &format!(
                "{me}: noted — {} is not an ephemeral peer, so the mark changes nothing\n",
                me.personality
            ),
        )
    }
}

/// `self-done --json`: `{"identity":<runtime>-<peer>,"ephemeral":…}`.
#[derive(Debug, serde::Serialize)]
pub struct SelfDoneDoc {
    /// The calling session's identity.
    pub identity: String,
    /// Whether the peer is ephemeral (only then does the mark end the session).
    pub ephemeral: bool,
}

/// `refresh --json`: `{"marked":[<identity>…]}`, the sessions whose next wake starts fresh.
#[derive(Debug, serde::Serialize)]
pub struct RefreshDoc {
    /// The identities marked.
    pub marked: Vec<String>,
}

/// `refresh (<peer> [runtime] | --all)`: the next natural wake starts fresh.
pub fn refresh(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let registry = crate::registry::Registry::load(&paths)?;
    let peers: Vec<&crate::registry::RegistryPeer> = if inv.flag(flags::ALL) {
        registry.peers.iter().collect()
    } else {
        let p = inv
            .positional(args::PEER)
            .ok_or_else(|| usage(inv, "name a peer or pass --all"))?;
        vec![registry
            .find(p)
            .ok_or_else(|| super::suggest::not_registered(&paths, p))?]
    };
    let mut marked = Vec::new();
    for peer in peers {
        let ids = crate::peers::refresh_peer(&paths, peer, inv.positional(args::RUNTIME))?;
        marked.extend(ids.iter().map(ToString::to_string));
    }
    let doc = RefreshDoc { marked };
    let marked = &doc.marked;
    if marked.is_empty() {
        return done(
            inv,
            &doc,
            "nothing to refresh (humans and services have no conversation to refresh)\n",
        );
    }
    done(
        inv,
        &doc,
        &format!("the next wake starts fresh: {}\n", marked.join(", ")),
    )
}

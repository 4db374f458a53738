//! `iapeer send` (spec 07 "Messaging"): route one message through the daemon.

use std::io::{IsTerminal, Read};
use std::path::Path;

use super::client::{Client, ClientError};
use super::parse::Invocation;
use super::sender::{resolve_sender, Caller};
use super::spec::{args, flags};
use super::suggest;
use super::{json_line, paths, print, required, usage, CliError, CliResult};
use crate::names::{
    is_valid_personality, is_valid_runtime, normalize, PERSONALITY_RULE, RUNTIME_RULE,
};
use crate::paths::Paths;
use crate::protocol::MAX_MESSAGE_CHARS;
use crate::protocol::{call, Answer, Call, Code, IfBusy, Request, SendReply, SendResult, MAX_LINE};
use crate::registry::Registry;

/// `iapeer send`'s (and `confirm-send`'s) exit status when the message's state is unknown
/// (code `state-unknown`): some of it reached the peer's input and its arrival was never
/// confirmed, or the connection broke after the request was sent. It may have arrived.
pub const EXIT_STATE_UNKNOWN: i32 = 3;

/// The human line for a successful send result.
pub fn describe_result(result: &SendResult) -> String {
    let p = &result.delivered_to.personality;
    let rt = &result.delivered_to.runtime;
    if result.earlier {
        let id = result.id.as_deref().unwrap_or("-");
        return format!("delivered to {p} ({rt}) earlier (message id {id}): not sent again");
    }
    if let Some(q) = &result.queued {
        let by = q.queued_by.as_str();
        let line = match q.queue_depth {
            Some(n) => format!("queued for {p} ({rt}) — {by}, depth {n}"),
            None => format!("queued for {p} ({rt}) — {by}"),
        };
        return match &q.waiting_for {
            // The agent's screen, so its control characters are shown, not run.
            Some(w) => format!("{line}: waiting for {}", crate::visible::line(w)),
            None => line,
        };
    }
    if result.interrupted {
        format!("delivered to {p} ({rt}), interrupted its turn")
    } else if result.woke {
        format!("delivered to {p} ({rt}), woke")
    } else {
        format!("delivered to {p} ({rt})")
    }
}

/// Bytes of a message body the CLI keeps; beyond them characters are only counted.
const KEEP_BYTES: usize = 256 * 1024;

/// Read a message body. An over-long body is normally sent and refused by the daemon (which
/// logs the attempt); one too big to travel — over [`KEEP_BYTES`], where the rest is only
/// counted so a 50 MB file neither fills memory nor breaks the control connection — is
/// refused here with the daemon's own words.
fn read_bounded(r: impl Read) -> Result<String, CliError> {
    let keep = KEEP_BYTES;
    let mut kept = Vec::new();
    let mut extra_chars = 0usize;
    crate::fsutil::read_chunks(r, |chunk| {
        let room = keep.saturating_sub(kept.len()).min(chunk.len());
        kept.extend_from_slice(&chunk[..room]);
        // Count the characters of what is not kept: every byte that does not continue a
        // UTF-8 sequence starts one.
        extra_chars += chunk[room..]
            .iter()
            .filter(|b| (**b & 0xC0) != 0x80)
            .count();
        true
    })
    .map_err(|e| CliError::failed(format!("cannot read the message: {e}")))?;
    let text = match String::from_utf8(kept) {
        Ok(t) => t,
        // The cut may split the last character; anything else is not UTF-8.
        Err(e) if extra_chars > 0 => String::from_utf8_lossy(&e.into_bytes()).into_owned(),
        Err(_) => return Err(CliError::failed("the message is not valid UTF-8 text")),
    };
    if extra_chars > 0 {
        let total = text.chars().count() + extra_chars;
        return Err(CliError::failed(format!(
            "message exceeds {MAX_MESSAGE_CHARS} char limit (got {total})"
        )));
    }
    Ok(text)
}

fn read_message(inv: &Invocation) -> Result<String, CliError> {
    match (inv.value(flags::MESSAGE), inv.value(flags::MESSAGE_FILE)) {
        (Some(_), Some(_)) => Err(usage(inv, "pass --message or --message-file, not both")),
        (None, None) => Err(usage(
            inv,
            "missing --message <text> or --message-file <path|->",
        )),
        (Some(m), None) => read_bounded(m.as_bytes()),
        (None, Some("-")) => read_bounded(std::io::stdin().lock()),
        (None, Some(path)) => {
            let f = std::fs::File::open(path)
                .map_err(|e| CliError::failed(format!("cannot read --message-file {path}: {e}")))?;
            read_bounded(f)
        }
    }
}

/// Who runs this `send`: the owner at a terminal (stdin is a tty, or, when stdin carries
/// the message, stderr is) and what the environment says.
fn caller_here(inv: &Invocation) -> Caller {
    // The owner's terminal: stdin is a tty, or (when stdin carries the message) stderr is.
    let interactive = std::io::stdin().is_terminal()
        || (inv.value(flags::MESSAGE_FILE) == Some("-") && std::io::stderr().is_terminal());
    Caller::from_env(
        interactive,
        std::env::vars_os().map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        }),
    )
}

/// `--timeout` (ms), `--id` (a new id when not given) and `--if-busy`, checked.
///
/// Errors: a usage error that names the flag, what it takes and what it got.
fn send_options(inv: &Invocation) -> Result<(Option<u64>, String, Option<IfBusy>), CliError> {
    let timeout_ms = inv
        .value(flags::SEND_TIMEOUT)
        .map(|v| timeout_ms(v).ok_or_else(|| usage(inv, format!("--timeout: expected a number of seconds above 0 and at most 86400 (a day), e.g. 30 or 2.5; got \"{v}\""))))
        .transpose()?;
    let msg_id = match inv.value(flags::SEND_ID) {
        None => crate::msgids::new_id(),
        Some(id) if crate::msgids::valid_id(id) => id.to_string(),
        Some(id) => {
            return Err(usage(
                inv,
                format!("--id \"{id}\": {}", crate::msgids::ID_RULE),
            ))
        }
    };
    let if_busy = inv
        .value(flags::IF_BUSY)
        .map(|v| {
            IfBusy::parse(v).ok_or_else(|| {
                usage(
                    inv,
                    format!("--if-busy: expected queue, interrupt or refuse; got \"{v}\""),
                )
            })
        })
        .transpose()?;
    Ok((timeout_ms, msg_id, if_busy))
}

/// Run `iapeer send`.
pub fn run(inv: &Invocation) -> CliResult {
    let target = required(inv, args::TARGET)?.to_string();
    let message = read_message(inv)?;
    let json_out = inv.flag(flags::JSON);
    // Checked here only to word the daemon's refusal for a person (the daemon still sees
    // the attempt and logs it, spec 03).
    let problem = local_problem(&target, &message, inv.value(flags::SEND_RUNTIME));
    let paths = paths()?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::failed(format!("cannot read the current folder: {e}")))?;
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    let needs_registry = inv.value(flags::FROM).is_none()
        && std::env::var("PEER_IDENTITY").map_or(true, |v| v.trim().is_empty());
    let registry = if needs_registry {
        Registry::load(&paths)?
    } else {
        Registry::default()
    };
    let caller = caller_here(inv);
    let from = resolve_sender(
        inv.value(flags::FROM),
        std::env::var("PEER_IDENTITY").ok().as_deref(),
        &cwd,
        &registry,
        &caller,
    )
    .map_err(CliError::failed)?;
    let attachments: Vec<String> = inv
        .values(flags::ATTACHMENT)
        .iter()
        .map(|a| absolute(&cwd, a))
        .collect();
    let (timeout_ms, msg_id, if_busy) = send_options(inv)?;
    let n = message.chars().count();
    let signed_as = from.clone();
    let req = call::Send {
        from,
        to: target.clone(),
        runtime: inv.value(flags::SEND_RUNTIME).map(String::from),
        message,
        topic: inv.value(flags::TOPIC).map(String::from),
        attachments,
        timeout_ms,
        id: Some(msg_id.clone()),
        if_busy,
    };
    let encoded = serde_json::to_string(&req).map_or(usize::MAX, |line| line.len());
    if encoded >= MAX_LINE {
        // Too big for one protocol line (escaping can grow a body): refuse it here.
        return Err(CliError::failed(format!(
            "message exceeds {MAX_MESSAGE_CHARS} char limit (got {n})"
        )));
    }
    let runtime = inv.value(flags::SEND_RUNTIME);
    let refused = |f| {
        let problem = problem.as_deref();
        refusal_for_a_person(f, &paths, (&target, runtime), &signed_as, problem)
    };
    let mut client = match Client::connect(&paths) {
        Ok(c) => c,
        Err(ClientError::NotRunning(_)) => match start_service(&paths) {
            Some(c) => c,
            None => {
                if let Some(f) = refusal_without_daemon(&paths, &req.clone().into()) {
                    return Err(refused(f));
                }
                return keep_in_outbox(&paths, &req.clone().into(), &target, json_out);
            }
        },
        Err(e) => return Err(e.into()),
    };
    let retry = format!("iapeer send {target} --id {msg_id} with the same message");
    match ask(&mut client, &req, json_out, &format!("sending to {target}")) {
        Ok(Ok(result)) => print_result(&result, json_out),
        Ok(Err(f)) if f.code == Code::StateUnknown => {
            state_unknown(&f, Some(&msg_id), Some(&retry), json_out)
        }
        Ok(Err(f)) => Err(refused(f)),
        // Never written whole: the daemon did not get it (it is going away), so the send
        // is kept for its next start like one made while it is down.
        Err(ClientError::Broken(why)) => {
            eprintln!("iapeer send: lost the connection to the daemon before the message was sent ({why})");
            keep_in_outbox(&paths, &req.clone().into(), &target, json_out)
        }
        // Written, then the connection broke: the daemon may have delivered it.
        Err(ClientError::Unanswered(why)) => {
            let f = unanswered(&why, &msg_id);
            state_unknown(&f, Some(&msg_id), Some(&retry), json_out)
        }
        Err(e) => Err(e.into()),
    }
}

/// The failure of a send written whole to the daemon whose connection then broke (`why`):
/// `state-unknown`, it may have arrived; a retry with `msg_id` is never delivered twice.
fn unanswered(why: &str, msg_id: &str) -> crate::protocol::Failure {
    crate::protocol::Failure::new(
        Code::StateUnknown,
        format!(
            "state unknown: it may have arrived — the connection to the daemon broke \
             after the message was sent to it ({why}). Message id {msg_id}: a retry \
             with this id is never delivered twice"
        ),
    )
}

/// `send --json` when the message's state is unknown (exit [`EXIT_STATE_UNKNOWN`]): the
/// failure document with the message id, `{"ok":false,"code":"state-unknown","error":…,"id":…}`.
#[derive(Debug, serde::Serialize)]
pub struct StateUnknownDoc<'a> {
    /// Always `false`.
    pub ok: bool,
    /// `state-unknown`.
    pub code: Code,
    /// What happened.
    pub error: &'a str,
    /// The message id a retry passes as `--id` (absent when none is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a str>,
}

/// `send --json` with the daemon not running and the message kept:
/// `{"ok":true,"outbox":<file>,"to":<target>}`.
#[derive(Debug, serde::Serialize)]
pub struct KeptDoc<'a> {
    /// Always `true`.
    pub ok: bool,
    /// The outbox file the message is kept in.
    pub outbox: &'a Path,
    /// The target peer.
    pub to: &'a str,
}

/// Say that a send's state is unknown (`f`, code `state-unknown`) and exit
/// [`EXIT_STATE_UNKNOWN`]: `iapeer send: <error>` with the command that retries safely
/// (`retry`) on stderr; with `--json` the failure document plus the message `id` on stdout.
fn state_unknown(
    f: &crate::protocol::Failure,
    id: Option<&str>,
    retry: Option<&str>,
    json_out: bool,
) -> CliResult {
    if json_out {
        let doc = StateUnknownDoc {
            ok: false,
            code: f.code,
            error: &f.error,
            id,
        };
        print(&format!("{}\n", json_line(&doc)))?;
    }
    match retry {
        Some(r) => eprintln!("iapeer send: {} — to retry: {r}", f.error),
        None => eprintln!("iapeer send: {}", f.error),
    }
    Err(CliError::Exit(EXIT_STATE_UNKNOWN))
}

/// What the daemon would refuse `req` (a send) for, judged while it is down
/// ([`crate::daemon::route::check_without_daemon`]); a root with neither a registry nor a
/// peer folder is refused (no peer was ever created there); `None` when it would take it, or
/// when the registry is lost or cannot be read (the daemon decides then: `verify --fix` may
/// rebuild it first).
fn refusal_without_daemon(paths: &Paths, req: &Request) -> Option<crate::protocol::Failure> {
    let (input, _) = crate::daemon::route::SendInput::of_cli_request(req.clone())?;
    if !paths.registry().exists() && !has_peer_folders(paths) {
        // No peer was ever created under this root (a cron job with another HOME, an unset
        // IAPEER_ROOT): no daemon started here would deliver it. (A registry lost beside
        // peer folders is another matter: `verify --fix` rebuilds it, so the send is kept.)
        return Some(crate::protocol::Failure::new(
            crate::protocol::Code::NotRegistered,
            format!(
                "no peers are registered under {} (there is no {}) — create them first (iapeer \
                 create <name>), or point IAPEER_ROOT at the root your peers live in; message NOT \
                 delivered",
                crate::paths::tilde(paths.root(), crate::paths::home_dir().as_deref()),
                paths.registry().display()
            ),
        ));
    }
    if !paths.registry().is_file() {
        return None;
    }
    let registry = Registry::load(paths).ok()?;
    crate::daemon::route::check_without_daemon(paths, &input, &registry).err()
}

/// Whether `<root>/peers/` holds any folder (a peer created there, registered or not).
fn has_peer_folders(paths: &Paths) -> bool {
    std::fs::read_dir(paths.peers_dir())
        .map(|mut entries| entries.any(|e| e.is_ok_and(|e| e.path().is_dir())))
        .unwrap_or(false)
}

/// What to do about the refusals whose spec 03 wording says only what is wrong (the text is
/// kept as the spec words it; this is appended): a send to oneself names the sender the CLI
/// signed as; a runtime the target or the sender does not declare lists the ones it does; an
/// unknown sender with no near name says how to sign. Empty for any other refusal.
fn way_out(error: &str, paths: &Paths, from: &str) -> String {
    // Read only for the two refusals that list runtimes.
    let runtimes_of = |name: &str| {
        Registry::load(paths)
            .ok()
            .and_then(|r| r.find(name).map(|p| p.runtimes.join(", ")))
            .unwrap_or_default()
    };
    let quoted = |s: &str| s.split('"').nth(1).map(str::to_string);
    if error == "cannot send to self" {
        return format!(
            " — this send is signed as {from} (--from, else PEER_IDENTITY, the peer of this \
             folder, or this terminal's human): name another peer, or sign with --from"
        );
    }
    if error.starts_with("peer \"") && error.contains("\" does not declare runtime \"") {
        if let Some(peer) = quoted(error) {
            return format!(
                " — its runtimes: {} (leave out --runtime for its default)",
                runtimes_of(&peer)
            );
        }
    }
    if error.starts_with("runtime \"") && error.contains("\" is not declared for caller \"") {
        if let Some(caller) = error.split('"').nth(3) {
            return format!(
                " — sign with --from <runtime>-{caller}, one of: {}",
                runtimes_of(caller)
            );
        }
    }
    if error.starts_with("unknown caller \"") && !error.contains("did you mean") {
        return " — sign with --from <runtime>-<peer> as a registered peer (iapeer list shows \
                them)"
            .into();
    }
    String::new()
}

/// The daemon's refusal `f` of a send to `target` on `runtime` signed as `from`, worded for
/// a person: the CLI's own text for a malformed field (`problem`), why a router runtime
/// cannot start, the start command, the registered name a misspelt sender or target meant,
/// and [`way_out`].
fn refusal_for_a_person(
    mut f: crate::protocol::Failure,
    paths: &Paths,
    (target, runtime): (&str, Option<&str>),
    from: &str,
    problem: Option<&str>,
) -> CliError {
    if let (Code::InvalidArgument, Some(p)) = (f.code, problem) {
        f.error = p.to_string();
    }
    if matches!(f.code, Code::Offline | Code::Timeout) {
        // A router runtime that cannot start at all: say why instead of "retry".
        if let Some(why) = missing_program_of(paths, target, runtime) {
            f.error = format!(
                "{} — it cannot start: {why}",
                f.error.trim_end_matches(" — retry")
            );
        }
    }
    f.error = suggest::with_start_command(&f.error);
    if let Some(caller) = unknown_caller(&f) {
        // A typo in --from (or PEER_IDENTITY): the registered name meant.
        let hint = suggest::peer_hint(paths, caller);
        f.error.push_str(&hint);
    }
    if f.code == Code::NotRegistered && suggest::refused_peer(&f.error) == Some(target) {
        // A typo of a registered name: say which one (the daemon said what became of a
        // renamed or removed one).
        f.error.push_str(&suggest::typo_hint(paths, target));
    }
    let way_out = way_out(&f.error, paths, from);
    f.error.push_str(&way_out);
    CliError::Refused(f)
}

/// `confirm-send <id> [--runtime <rt>]` (spec 10 §2): send a message the origin guard held,
/// as its sender; inside a session (`PEER_IDENTITY`) only the session's own. Prints what
/// `send` prints.
pub fn confirm_send(inv: &Invocation) -> CliResult {
    let id = required(inv, args::HOLD_ID)?.trim().to_string();
    let caller = std::env::var("PEER_IDENTITY")
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    let req = call::ConfirmSend {
        id: id.clone(),
        runtime: inv.value(flags::CONFIRM_RUNTIME).map(String::from),
        caller,
    };
    let json_out = inv.flag(flags::JSON);
    let paths = paths()?;
    let mut client = Client::connect(&paths)?;
    match ask(
        &mut client,
        &req,
        json_out,
        &format!("sending held message {id}"),
    ) {
        Ok(Ok(result)) => print_result(&result, json_out),
        Ok(Err(f)) if f.code == Code::StateUnknown => state_unknown(&f, None, None, json_out),
        Ok(Err(f)) => Err(CliError::Refused(f)),
        // The daemon had the request: it may have sent the held message.
        Err(ClientError::Unanswered(why)) => {
            let f = crate::protocol::Failure::new(
                Code::StateUnknown,
                format!(
                    "state unknown: it may have arrived — the connection to the daemon broke \
                     after the confirmation was sent to it ({why}); the delivery log (iapeer \
                     logs) says whether held message {id} went out"
                ),
            );
            state_unknown(&f, None, None, json_out)
        }
        Err(e) => Err(e.into()),
    }
}

/// Send a send-shaped request and read its answer: the send's result, or the daemon's
/// refusal. The one updating progress line (`what`) is for a person at a terminal, never for
/// a script (`json_out`).
fn ask(
    client: &mut Client,
    req: &impl Call<Reply = SendReply>,
    json_out: bool,
    what: &str,
) -> Result<Result<SendResult, crate::protocol::Failure>, ClientError> {
    let answer: Answer<SendReply> = if json_out {
        client.request(req, |_| {})?
    } else {
        client.request_with_indicator(req, what)?
    };
    Ok(match answer {
        Answer::Ok(SendReply { result }) => Ok(result),
        Answer::Failed(f) => Err(f),
    })
}

/// Print a send's result: one JSON line, or the human line.
fn print_result(result: &SendResult, json_out: bool) -> CliResult {
    if json_out {
        print(&format!("{}\n", json_line(result)))
    } else {
        print(&format!("{}\n", describe_result(result)))
    }
}

/// How long `send` waits for a daemon it started through the service to answer.
const SERVICE_START_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The daemon is not running: when its service is enabled (`iapeer onboard`), start it
/// there (load it, or restart it when loaded) and connect once it answers, saying so on
/// stderr. `None` (then the send goes to the outbox) when no service is installed, when it
/// is only written (`iapeer install`) or disabled — turning it on is the user's choice — or
/// when it did not come up within [`SERVICE_START_WAIT`] (issue 11 item 7).
fn start_service(paths: &Paths) -> Option<Client> {
    use crate::host::control;
    let side = super::update::ServiceSide::gather(paths).ok()?;
    let (manager, file) = side.file.as_ref().filter(|(_, f)| f.exists())?;
    if side.enabled.is_none() {
        // Written by `install` but never enabled (`onboard` asks first), or disabled by the
        // user: not ours to turn on for a send.
        eprintln!(
            "iapeer send: the daemon's service is installed but not enabled, so it was not              started (iapeer onboard enables it)"
        );
        return None;
    }
    let cmds = match side.loaded {
        Some(m) => control::restart_commands(m, side.uid),
        None => control::load_commands(*manager, file, side.uid),
    };
    if let Err(e) = side.ctl.run_all(&cmds) {
        eprintln!("iapeer send: the daemon is not running and its service did not start: {e}");
        return None;
    }
    let until = std::time::Instant::now() + SERVICE_START_WAIT;
    while std::time::Instant::now() < until {
        if let Ok(c) = Client::connect(paths) {
            eprintln!(
                "iapeer send: started the daemon through its service ({})",
                control::as_line(&cmds)
            );
            return Some(c);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    eprintln!(
        "iapeer send: the daemon's service was started but did not answer within {} s",
        SERVICE_START_WAIT.as_secs()
    );
    None
}

/// The daemon is not running: keep the send in the durable outbox (the daemon routes it when
/// it starts, [`crate::outbox`]) and say so — never a silent loss (issue 11 item 7). Exit 0:
/// the message is safe; `--json` prints `{"ok":true,"outbox":<file>,"to":<target>}`.
///
/// Errors: the outbox cannot be written (then nothing was kept, and the text says so).
fn keep_in_outbox(paths: &Paths, req: &Request, target: &str, json_out: bool) -> CliResult {
    let file = crate::outbox::put(paths, req).map_err(|e| {
        CliError::hinted(
            format!(
                "the daemon is not running and the message could not be kept in {}: {e}",
                crate::outbox::dir(paths).display()
            ),
            "start the daemon (iapeer daemon) and send again",
        )
    })?;
    if json_out {
        let doc = KeptDoc {
            ok: true,
            outbox: &file,
            to: target,
        };
        return print(&format!("{}\n", json_line(&doc)));
    }
    print(&format!(
        "kept for {target} in the outbox ({}): the daemon is not running; it delivers the \
         message when it starts (iapeer daemon, or iapeer onboard for the service)\n",
        file.display()
    ))
}

/// What is wrong with a send's target or message, in the CLI's words: the daemon refuses the
/// same sends with texts that name the MCP tool's fields (spec 03), which the CLI replaces
/// with these. `None` when fine.
pub fn local_problem(target: &str, message: &str, runtime: Option<&str>) -> Option<String> {
    if target.is_empty() {
        return Some("the peer name is empty — name one of the peers iapeer list shows".into());
    }
    // `name@host` (a peer of another host of the federation) is a target too: only the
    // daemon knows whether that host and peer exist.
    let remote = crate::federation::address::Address::parse(target).is_ok_and(|a| a.host.is_some());
    if !is_valid_personality(target) && !remote {
        let n = normalize(target);
        let example = if is_valid_personality(&n) {
            format!(" — did you mean \"{n}\"?")
        } else {
            String::new()
        };
        return Some(format!(
            "\"{target}\" is not a peer name: {PERSONALITY_RULE}{example}"
        ));
    }
    if let Some(rt) = runtime.filter(|rt| !is_valid_runtime(rt)) {
        return Some(format!(
            "--runtime \"{rt}\" is not a runtime name: {RUNTIME_RULE}"
        ));
    }
    if message.is_empty() {
        return Some(
            "the message is empty — give its text with --message \"...\" (or --message-file <path>)"
                .into(),
        );
    }
    None
}

/// The sender's name in the daemon's refusal of an unknown caller (`unknown caller "<name>"
/// — not registered`), if `f` is one.
fn unknown_caller(f: &crate::protocol::Failure) -> Option<&str> {
    if f.code != Code::NotRegistered {
        return None;
    }
    let rest = f.error.strip_prefix("unknown caller \"")?;
    rest.split('"').next().filter(|n| !n.is_empty())
}

/// Why `target`'s runtime (`runtime`, else its default) cannot start because its program is
/// missing; `None` when it can, or when the target is unknown.
pub(super) fn missing_program_of(
    paths: &crate::paths::Paths,
    target: &str,
    runtime: Option<&str>,
) -> Option<String> {
    let registry = Registry::load(paths).ok()?;
    let peer = registry.find(target)?;
    let rt = runtime.unwrap_or(&peer.default_runtime);
    crate::runtime::router::missing_program(paths, rt, &peer.cwd)
}

/// `--timeout <seconds>` in milliseconds: a finite number above 0 (fractions allowed, at
/// least 1 ms, at most a day). `None` when it is not one.
fn timeout_ms(v: &str) -> Option<u64> {
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs > 0.0 && secs <= 86_400.0)
        .then(|| ((secs * 1000.0).round() as u64).max(1))
}

fn absolute(cwd: &Path, p: &str) -> String {
    let path = Path::new(p);
    if path.is_absolute() {
        p.to_string()
    } else {
        cwd.join(path).display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_reads_count_what_they_do_not_keep() {
        assert_eq!(read_bounded("héllo".as_bytes()).unwrap(), "héllo");
        // Over the limit but small enough to travel: the daemon refuses it (and logs it).
        let over = "é".repeat(MAX_MESSAGE_CHARS + 1);
        assert_eq!(read_bounded(over.as_bytes()).unwrap(), over);
        let big = "é".repeat(KEEP_BYTES);
        match read_bounded(big.as_bytes()) {
            Err(CliError::Failed(m)) => {
                assert_eq!(
                    m.to_string(),
                    format!("message exceeds 16000 char limit (got {KEEP_BYTES})")
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(read_bounded(&[0xff, 0xfe][..]), Err(CliError::Failed(m)) if m.message.contains("UTF-8"))
        );
    }

    #[test]
    fn timeouts_are_positive_seconds() {
        assert_eq!(timeout_ms("3"), Some(3000));
        assert_eq!(timeout_ms(" 2.5 "), Some(2500));
        assert_eq!(timeout_ms("0.0001"), Some(1));
        for bad in ["0", "-1", "x", "", "inf", "NaN", "100000"] {
            assert_eq!(timeout_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn result_lines() {
        let mut r = SendResult {
            ok: true,
            delivered_to: crate::protocol::DeliveredTo {
                personality: "bob".into(),
                runtime: "echo".into(),
            },
            woke: false,
            ts: None,
            queued: None,
            id: Some("m-1".into()),
            earlier: false,
            interrupted: false,
        };
        assert_eq!(describe_result(&r), "delivered to bob (echo)");
        r.interrupted = true;
        assert_eq!(
            describe_result(&r),
            "delivered to bob (echo), interrupted its turn"
        );
        r.interrupted = false;
        r.woke = true;
        assert_eq!(describe_result(&r), "delivered to bob (echo), woke");
        r.queued = Some(crate::protocol::Queued {
            queued: true,
            queued_by: crate::protocol::QueuedBy::Ephemeral,
            queue_depth: Some(3),
            waiting_for: None,
        });
        assert_eq!(
            describe_result(&r),
            "queued for bob (echo) — ephemeral, depth 3"
        );
        r.queued = Some(crate::protocol::Queued {
            queued: true,
            queued_by: crate::protocol::QueuedBy::Approval,
            queue_depth: Some(1),
            waiting_for: Some("an approval: Bash: rm a\u{1b}[2J".into()),
        });
        assert_eq!(
            describe_result(&r),
            "queued for bob (echo) — approval, depth 1: waiting for an approval: Bash: rm a␛[2J"
        );
        r.earlier = true;
        assert_eq!(
            describe_result(&r),
            "delivered to bob (echo) earlier (message id m-1): not sent again"
        );
    }
}

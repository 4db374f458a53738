//! The first half of `route_send` (spec 03 §1 steps 1–7): authenticate the caller, validate
//! the fields, resolve the target and its endpoint, apply the sender policies, spool
//! attachments and build the envelope. Runs on a worker thread (it reads the registry and
//! copies files); the router does the rest.

use crate::config::limits::OriginLimits;
use crate::config::McpAuth;
use crate::envelope::{escape_attr, Envelope, MAX_TOPIC_ATTR_BYTES};
use crate::markers::Markers;
use crate::names::{
    is_valid_personality, is_valid_runtime, Identity, Intelligence, PERSONALITY_PATTERN,
};
use crate::origin;
use crate::paths::Paths;
use crate::protocol::{Code, DAEMON_RUNTIME, MAX_MESSAGE_CHARS};
use crate::registry::former::{self, Fate};
use crate::registry::{Registry, RegistryPeer};
use crate::runtime::RuntimeKind;

/// Longest topic after trimming, in Unicode scalar values.
pub const MAX_TOPIC_CHARS: usize = 200;
/// Most attachments per message.
pub const MAX_ATTACHMENTS: usize = 20;

/// Who is sending, as the entry point knows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Caller {
    /// The CLI (`iapeer send`): the identity it resolved (`--from`, `PEER_IDENTITY`, cwd…).
    Cli(String),
    /// An MCP `tools/call`: the identity header, the identity bound to the presented session
    /// token (if the token is live) and the authentication mode.
    Mcp {
        /// `X-IAPeer-Identity`, trimmed.
        header: Option<String>,
        /// The identity the session token belongs to, when it is a live token.
        token_identity: Option<String>,
        /// `IAPEER_MCP_AUTH`.
        auth: McpAuth,
    },
    /// The daemon itself (sender `iapeer`), for its failure notices (spec 05 §7).
    Daemon,
    /// A peer of another host of the federation (issue 28), as its inbox entry names it:
    /// `<runtime>-<personality>@<host>`, and its nature. Its host's link is trusted for both
    /// (only hosts holding the Redis credentials write inbox entries).
    Remote {
        /// `<runtime>-<personality>@<host>`.
        identity: String,
        /// `artificial`, `natural` or `absent`.
        intelligence: String,
    },
}

impl Caller {
    /// Who the send says it is from, before the registry is read: the preparation pool's
    /// line it waits in (`crate::daemon::fair_pool`). The CLI's sender; an MCP caller's
    /// token identity, else its header (marked unauthenticated when a token was required);
    /// the daemon's `iapeer`.
    pub fn claimed(&self) -> String {
        match self {
            Caller::Cli(from) => from.clone(),
            Caller::Mcp {
                token_identity: Some(id),
                ..
            } => id.clone(),
            Caller::Mcp { header, auth, .. } => {
                let header = header.as_deref().unwrap_or("(no identity header)");
                match auth {
                    McpAuth::Header => header.to_string(),
                    McpAuth::Token => format!("{header} (no valid session token)"),
                }
            }
            Caller::Daemon => DAEMON_SENDER.to_string(),
            Caller::Remote { identity, .. } => identity.clone(),
        }
    }
}

/// The sender name of messages the daemon writes itself (spec 05 §7).
pub const DAEMON_SENDER: &str = "iapeer";

/// What a send asks for, as the sender wrote it: shape-checked by its entry point (the MCP
/// tool's arguments, the control socket's `send` request, the fleet API's body) but not
/// value-checked ([`validate`] checks patterns and limits, spec 03 §1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendArgs {
    /// Target personality (the MCP tool's `personality`, the control request's `to`); never
    /// empty when built by the MCP module.
    pub to: String,
    /// Forced endpoint runtime; `None` = the target's default runtime. Never `Some("")` when
    /// built by the MCP module.
    pub runtime: Option<String>,
    /// The body; never empty when built by the MCP module.
    pub message: String,
    /// Thread label as sent ([`validate`] trims it; blank = none).
    pub topic: Option<String>,
    /// Attachment paths as sent ([`validate`] checks they are absolute).
    pub attachments: Vec<String>,
    /// The sender's message id as sent (`msgids::valid_id`); `None`: the router makes one.
    pub id: Option<String>,
    /// `if_busy` as sent (`queue` when absent): what to do when the peer's agent is mid-turn
    /// at delivery (issue 32 item 7).
    pub if_busy: crate::protocol::IfBusy,
}

impl SendArgs {
    /// The topic trimmed; `None` when absent or blank (a blank topic is no topic).
    pub fn trimmed_topic(&self) -> Option<&str> {
        self.topic
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }
}

/// One send as it arrived: who sent it, by which entry point, and what it asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct SendInput {
    /// Entry point for `delivery.log`: `cli`, `mcp`, `fleet` (the fleet API's `send`), `ui`
    /// (the operator's page's, issue 30 item 5), `daemon` or `confirm` (a held message sent
    /// by `confirm-send`).
    pub path: &'static str,
    /// The sender.
    pub caller: Caller,
    /// What it asks for.
    pub args: SendArgs,
}

impl SendInput {
    /// A message the daemon writes itself (path `daemon`, sent as `iapeer`, spec 05
    /// §7): `to` on `runtime` (`None`: the target's default), no attachments, the router makes
    /// its id, `if_busy` queue.
    pub fn from_daemon(
        to: String,
        runtime: Option<String>,
        message: String,
        topic: Option<String>,
    ) -> SendInput {
        SendInput {
            path: "daemon",
            caller: Caller::Daemon,
            args: SendArgs {
                to,
                runtime,
                message,
                topic,
                ..SendArgs::default()
            },
        }
    }

    /// The send a control-socket `send` request makes (path `cli`, the CLI's resolved
    /// sender) and its `timeoutMs`; `None` for any other request.
    pub fn of_cli_request(req: crate::protocol::Request) -> Option<(SendInput, Option<u64>)> {
        let crate::protocol::Request::Send {
            from,
            to,
            runtime,
            message,
            topic,
            attachments,
            timeout_ms,
            id,
            if_busy,
        } = req
        else {
            return None;
        };
        let input = SendInput {
            path: "cli",
            caller: Caller::Cli(from),
            args: SendArgs {
                to,
                runtime,
                message,
                topic,
                attachments,
                id,
                if_busy: if_busy.unwrap_or_default(),
            },
        };
        Some((input, timeout_ms))
    }
}

/// A send ready for delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The sender's identity.
    pub caller: Identity,
    /// The target's registry entry.
    pub target: RegistryPeer,
    /// The endpoint: target personality on the chosen runtime.
    pub endpoint: Identity,
    /// The envelope (wire form is built from it; the inbox paths are in it).
    pub envelope: Envelope,
    /// The target's profile says `wake_policy: "ephemeral"` (spec 03 §1 step 8): the
    /// message goes to its durable task queue, never live.
    pub ephemeral: bool,
    /// The endpoint runtime's kind, or why its adapter cannot be had (e.g. `claude is not
    /// installed — …`). Looked up here, on the preparation worker: it may search `PATH` or
    /// read a runtime manifest, which the router thread should not wait for on every send.
    pub kind: Result<RuntimeKind, String>,
}

/// A refused request: the stable code and the exact error text (spec 03 §1 wording for
/// sends). It is the failure reply itself, so it reaches the requester unchanged.
pub type Refusal = crate::protocol::Failure;

fn refuse(code: Code, error: impl Into<String>) -> Refusal {
    Refusal {
        code,
        error: error.into(),
    }
}

/// Step 1: field validation, in the spec's order. Returns the trimmed topic (empty → none).
pub fn validate(input: &SendInput) -> Result<Option<String>, Refusal> {
    let bad = |e: String| refuse(Code::InvalidArgument, e);
    if input.args.to.is_empty() || input.args.message.is_empty() {
        return Err(bad(
            "send_to_peer requires non-empty \"personality\" and \"message\"".into(),
        ));
    }
    if !is_valid_personality(&input.args.to) {
        return Err(bad(format!(
            "invalid personality \"{}\" — must match {PERSONALITY_PATTERN}",
            input.args.to
        )));
    }
    if let Some(rt) = &input.args.runtime {
        if !is_valid_runtime(rt) {
            return Err(bad(format!("invalid runtime \"{rt}\"")));
        }
    }
    let n = input.args.message.chars().count();
    if n > MAX_MESSAGE_CHARS {
        return Err(bad(format!(
            "message exceeds {MAX_MESSAGE_CHARS} char limit (got {n})"
        )));
    }
    let topic = input.args.trimmed_topic();
    if let Some(t) = topic {
        let n = t.chars().count();
        if n > MAX_TOPIC_CHARS {
            return Err(bad(format!(
                "topic exceeds {MAX_TOPIC_CHARS} char limit (got {n})"
            )));
        }
        if t.contains(['\n', '\r']) {
            // The envelope's header is one line (spec 03 §2), as for attachment paths.
            return Err(bad(
                "topic must not contain newline characters — put it on one line".into(),
            ));
        }
        let escaped = escape_attr(t).len();
        if escaped > MAX_TOPIC_ATTR_BYTES {
            return Err(bad(format!(
                "topic exceeds {MAX_TOPIC_ATTR_BYTES} byte limit once escaped for the envelope \
                 (got {escaped}; each & \" < > takes 4 to 6 bytes) — shorten it"
            )));
        }
    }
    if input
        .args
        .id
        .as_deref()
        .is_some_and(|id| !crate::msgids::valid_id(id))
    {
        return Err(bad(format!(
            "invalid message id \"{}\" — {}",
            input.args.id.as_deref().unwrap_or_default(),
            crate::msgids::ID_RULE
        )));
    }
    if input.args.attachments.len() > MAX_ATTACHMENTS {
        return Err(bad(format!(
            "attachments exceeds {MAX_ATTACHMENTS} item limit"
        )));
    }
    if input.args.attachments.iter().any(|a| !a.starts_with('/')) {
        return Err(bad(
            "attachments must contain only absolute local paths".into()
        ));
    }
    if input
        .args
        .attachments
        .iter()
        .any(|a| a.contains('\n') || a.contains('\r'))
    {
        return Err(bad(
            "attachment paths must not contain newline characters".into()
        ));
    }
    Ok(topic.map(str::to_string))
}

/// Authenticate the caller against the registry (spec 02 §4 "Caller authentication"; the
/// CLI's `--from` gets the same registration checks).
pub fn resolve_caller<'r>(
    caller: &Caller,
    registry: &'r Registry,
) -> Result<(Identity, &'r RegistryPeer), Refusal> {
    let (text, token_check) = match caller {
        Caller::Daemon | Caller::Remote { .. } => {
            return Err(refuse(
                Code::Internal,
                "the daemon's own messages and another host's have no registry entry here",
            ))
        }
        Caller::Cli(from) => (Some(from.as_str()), None),
        Caller::Mcp {
            header,
            token_identity,
            auth,
        } => (
            header.as_deref(),
            (*auth == McpAuth::Token).then_some(token_identity.as_deref()),
        ),
    };
    let identity = text
        .and_then(|t| Identity::parse(t).ok())
        .ok_or_else(|| match caller {
            Caller::Mcp { .. } => refuse(
                Code::InvalidArgument,
                "missing or malformed x-iapeer-identity header — expected \"<runtime>-<personality>\"",
            ),
            Caller::Cli(from) => refuse(
                Code::InvalidArgument,
                format!("invalid sender \"{from}\" — expected \"<runtime>-<personality>\""),
            ),
            Caller::Daemon | Caller::Remote { .. } => {
                refuse(Code::Internal, "the daemon has no sender identity")
            }
        })?;
    let peer = registry.find(&identity.personality).ok_or_else(|| {
        refuse(
            Code::NotRegistered,
            format!(
                "unknown caller \"{}\" — not registered",
                identity.personality
            ),
        )
    })?;
    if !peer.declares(&identity.runtime) {
        return Err(refuse(
            Code::InvalidArgument,
            format!(
                "runtime \"{}\" is not declared for caller \"{}\"",
                identity.runtime, identity.personality
            ),
        ));
    }
    if let Some(bound) = token_check {
        if bound != Some(identity.to_string().as_str()) {
            return Err(refuse(
                Code::InvalidArgument,
                format!("session token missing or not valid for {identity}"),
            ));
        }
    }
    Ok((identity, peer))
}

/// Steps 2–4: the target, its endpoint and the Telegram sender policy. `former` says what
/// became of a target name that is not registered (renamed or removed), asked only then.
pub fn resolve_target<'r>(
    input: &SendInput,
    caller: &Identity,
    caller_peer: &RegistryPeer,
    registry: &'r Registry,
    former: impl FnOnce(&str) -> Option<Fate>,
) -> Result<(&'r RegistryPeer, Identity), Refusal> {
    let target = registry.find(&input.args.to).ok_or_else(|| {
        let fate = former(&input.args.to)
            .map(|f| f.clause())
            .unwrap_or_default();
        refuse(
            Code::NotRegistered,
            format!(
                "peer \"{}\" is not in the iapeer peers index{fate}; message NOT delivered",
                input.args.to
            ),
        )
    })?;
    if target.personality == caller.personality {
        return Err(refuse(Code::InvalidArgument, "cannot send to self"));
    }
    let runtime = match &input.args.runtime {
        Some(rt) if !target.declares(rt) => {
            return Err(undeclared_runtime_refusal(&target.personality, rt))
        }
        Some(rt) => rt.clone(),
        None => target.default_runtime.clone(),
    };
    if runtime == "telegram" && caller_peer.telegram_bot().is_none() {
        return Err(refuse(
            Code::InvalidArgument,
            format!(
                "telegram policy: sender \"{}\" has no telegram face (give it one: \"interfaces\": {{\"telegram\": {{\"bot_username\": \"<bot>\"}}}} in {}, then iapeer verify --fix); message NOT delivered",
                caller.personality,
                crate::paths::peer::profile(&caller_peer.cwd).display()
            ),
        ));
    }
    let endpoint = Identity {
        runtime,
        personality: target.personality.clone(),
    };
    Ok((target, endpoint))
}

/// What [`prepare`] would refuse the send for, in its order, without the daemon and without
/// writing anything: the caller, the fields, the target, a stopped endpoint, an attachment
/// that cannot be read. The CLI asks this of a send it is about to keep in the outbox while
/// the daemon is down (issue 11 item 7): such a send would only be set aside when the daemon
/// starts, so it is refused at once instead.
///
/// Errors: the first refusal, in the daemon's words.
pub fn check_without_daemon(
    paths: &Paths,
    input: &SendInput,
    registry: &Registry,
) -> Result<(), Refusal> {
    let (caller, caller_peer) = resolve_caller(&input.caller, registry)?;
    validate(input)?;
    let (_, endpoint) = resolve_target(input, &caller, caller_peer, registry, |to| {
        former::fate_of(paths, registry, to)
    })?;
    if Markers::new(paths, &endpoint).is_set(crate::markers::Flag::Stopped) {
        return Err(stopped_refusal(&endpoint));
    }
    let max_bytes = crate::attachment_source::max_bytes_from_env();
    crate::daemon::attachments::check(&input.args.attachments, max_bytes)
        .map_err(|e| refuse(Code::InvalidArgument, e.to_string()))
}

/// Who settles a send whose preparation is under way: the router, when the send's deadline
/// comes first ([`PrepTicket::give_up`]: the sender is answered `timeout` at once and the
/// preparation's result, whenever it comes, is dropped), or the worker, just before it
/// leaves a trace the sender must hear about ([`PrepTicket::commit`]: a held message's hold
/// file; the router then waits for its result). Exactly one of the two wins. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct PrepTicket(std::sync::Arc<std::sync::atomic::AtomicU8>);

const PREP_OPEN: u8 = 0;
const PREP_GIVEN_UP: u8 = 1;
const PREP_COMMITTED: u8 = 2;

impl PrepTicket {
    /// The router stops waiting: `true` unless the worker committed first.
    pub fn give_up(&self) -> bool {
        self.settle(PREP_GIVEN_UP)
    }

    /// The worker is about to leave a trace: `true` unless the router gave up first.
    pub fn commit(&self) -> bool {
        self.settle(PREP_COMMITTED)
    }

    fn settle(&self, to: u8) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        match self.0.compare_exchange(PREP_OPEN, to, SeqCst, SeqCst) {
            Ok(_) => true,
            Err(now) => now == to,
        }
    }
}

/// What bounds one send's preparation.
#[derive(Debug, Clone)]
pub struct PrepBounds {
    /// How much of each attachment may be read, and until when (the send's deadline).
    pub attachments: crate::attachment_source::Limits,
    /// Shared with the router (see [`PrepTicket`]).
    pub ticket: PrepTicket,
}

/// Steps 1–7 with file access: validate, authenticate, resolve, refuse a stopped endpoint,
/// spool attachments (within `bounds`), stamp `ts` and build the envelope.
///
/// `guard`: the origin guard's settings when it applies to this send (on, and the send is not
/// a `confirm-send` of a held message); a send it holds is kept as a hold file and refused
/// with code `held` (spec 10 §2) — unless the router gave up on the send first (then nothing
/// is kept and the result is refused `timeout`, which nobody reads).
pub fn prepare(
    paths: &Paths,
    input: &SendInput,
    ts: String,
    guard: Option<OriginLimits>,
    bounds: &PrepBounds,
) -> Result<Prepared, Refusal> {
    crate::daemon::test_hooks::on_prepare(&input.args.to);
    let registry =
        Registry::load_cached(paths).map_err(|e| refuse(Code::Internal, e.to_string()))?;
    let daemon_peer;
    let (caller, caller_peer) = match &input.caller {
        Caller::Remote {
            identity,
            intelligence,
        } => {
            daemon_peer = remote_sender(paths, identity, intelligence)?;
            let id = Identity {
                runtime: daemon_peer.default_runtime.clone(),
                personality: daemon_peer.personality.clone(),
            };
            (id, &daemon_peer)
        }
        Caller::Daemon => {
            daemon_peer = daemon_sender(paths);
            let id = Identity {
                runtime: DAEMON_RUNTIME.into(),
                personality: DAEMON_SENDER.into(),
            };
            (id, &daemon_peer)
        }
        _ => resolve_caller(&input.caller, &registry)?,
    };
    let topic = validate(input)?;
    let (target, endpoint) = resolve_target(input, &caller, caller_peer, &registry, |to| {
        former::fate_of(paths, &registry, to)
    })?;
    if Markers::new(paths, &endpoint).is_set(crate::markers::Flag::Stopped) {
        return Err(stopped_refusal(&endpoint));
    }
    let attachments = crate::daemon::attachments::spool(
        paths,
        &target.personality,
        &input.args.attachments,
        bounds.attachments,
    )
    .map_err(|e| refuse(Code::InvalidArgument, e.to_string()))?;
    if let Some(limits) = guard {
        origin_check(
            paths,
            input,
            (&caller, caller_peer),
            (target, &endpoint),
            &attachments,
            limits,
            &bounds.ticket,
        )?;
    }
    let envelope = Envelope {
        from: caller.personality.clone(),
        runtime: caller.runtime.clone(),
        intelligence: Some(caller_peer.nature()),
        ts: Some(ts),
        topic,
        attachments,
        body: input.args.message.clone(),
    };
    let ephemeral = crate::profile::Profile::read(&target.cwd)
        .ok()
        .flatten()
        .is_some_and(|p| p.is_ephemeral());
    let kind = crate::runtime::adapter_for(paths, &endpoint.runtime)
        .map(|a| a.kind())
        .map_err(|e| e.to_string());
    Ok(Prepared {
        caller,
        target: target.clone(),
        endpoint,
        envelope,
        ephemeral,
        kind,
    })
}

/// The origin guard on one send (spec 10 §2): only an agent writing to a human reads the
/// pair state; a send [`origin::decide`] holds is kept as a hold file (its attachments
/// already spooled) and refused with code `held`, naming the hold and the ways on.
fn origin_check(
    paths: &Paths,
    input: &SendInput,
    (caller, caller_peer): (&Identity, &RegistryPeer),
    (target, endpoint): (&RegistryPeer, &Identity),
    attachments: &[String],
    limits: OriginLimits,
    ticket: &PrepTicket,
) -> Result<(), Refusal> {
    let (from, to) = (caller_peer.nature(), target.nature());
    if (from, to) != (Intelligence::Artificial, Intelligence::Natural) {
        return Ok(());
    }
    let now_ms = crate::clock::now_ms();
    let state = origin::OriginState::load(paths);
    let verdict = origin::decide(
        &state,
        (&caller.personality, from),
        (&target.personality, to),
        &endpoint.runtime,
        now_ms,
        limits.arm_ttl,
    );
    let origin::Verdict::Hold { origin } = verdict else {
        return Ok(());
    };
    if !ticket.commit() {
        // The sender was already told `timeout`: keep nothing it was not told about.
        return Err(refuse(
            Code::Timeout,
            "the send's deadline passed during its preparation; message NOT delivered",
        ));
    }
    let hold = origin::Hold {
        id: origin::new_id(),
        from: caller.to_string(),
        to: target.personality.clone(),
        runtime: endpoint.runtime.clone(),
        origin,
        message: input.args.message.clone(),
        topic: input.args.topic.clone(),
        attachments: attachments.to_vec(),
        created_ms: now_ms,
        expires_ms: now_ms + limits.hold_ttl.as_millis() as u64,
    };
    origin::write_hold(paths, &hold).map_err(|e| {
        refuse(
            Code::Internal,
            format!(
                "the origin guard would hold this message but cannot keep it ({e}); message NOT \
                 delivered"
            ),
        )
    })?;
    let expires = crate::clock::now_local()
        .checked_add(limits.hold_ttl)
        .map(|z| z.strftime("%H:%M:%S").to_string())
        .unwrap_or_else(|_| format!("{} min from now", limits.hold_ttl.as_secs() / 60));
    Err(refuse(Code::Held, hold.refusal_text(&expires)))
}

/// The registry-like entry of the daemon as a sender: personality `iapeer`, runtime
/// `daemon`, artificial, no interfaces (so it cannot write to a Telegram endpoint).
fn daemon_sender(paths: &Paths) -> RegistryPeer {
    RegistryPeer::new(DAEMON_SENDER, &["daemon"], "artificial", paths.root())
}

/// The registry-like entry of a peer of another host as a sender: personality
/// `<personality>@<host>` (never a local name: those have no `@`), its runtime, its nature,
/// no interfaces.
///
/// Errors: the identity is not `<runtime>-<personality>@<host>`.
fn remote_sender(
    paths: &Paths,
    identity: &str,
    intelligence: &str,
) -> Result<RegistryPeer, Refusal> {
    let bad = || {
        refuse(
            Code::InvalidArgument,
            format!("invalid remote sender \"{identity}\" — expected \"<runtime>-<personality>@<host>\""),
        )
    };
    let (id, host) = identity.rsplit_once('@').ok_or_else(bad)?;
    let id = Identity::parse(id).map_err(|_| bad())?;
    if !is_valid_personality(host) {
        return Err(bad());
    }
    let nature = Intelligence::parse(intelligence).map_or("artificial", Intelligence::as_str);
    Ok(RegistryPeer::new(
        &format!("{}@{host}", id.personality),
        &[&id.runtime],
        nature,
        paths.root(),
    ))
}

/// The refusal for a send whose preparation panicked (`panic` is the panic message): code
/// `internal`, so the sender is answered rather than left waiting.
pub fn prep_panicked(panic: &str) -> Refusal {
    Refusal {
        code: Code::Internal,
        error: format!(
            "internal error: preparing the send failed ({panic}); message NOT delivered"
        ),
    }
}

/// The refusal of a runtime that peer `personality` does not declare (code
/// `invalid-argument`): `peer "<personality>" does not declare runtime "<runtime>"`.
pub fn undeclared_runtime_refusal(personality: &str, runtime: &str) -> Refusal {
    refuse(
        Code::InvalidArgument,
        format!("peer \"{personality}\" does not declare runtime \"{runtime}\""),
    )
}

/// The refusal for an endpoint whose stop flag is set.
pub fn stopped_refusal(endpoint: &Identity) -> Refusal {
    refuse(
        Code::Stopped,
        format!(
            "\"{}\" ({}) is stopped and not accepting messages; start it to resume",
            endpoint.personality, endpoint.runtime
        ),
    )
}

/// The refusal of a message to an always-on peer the supervisor parked after a crash loop
/// (spec 05 §8): said at once, with what to do; code `offline`.
pub fn parked_refusal(endpoint: &Identity) -> Refusal {
    refuse(
        Code::Offline,
        format!(
            "peer \"{p}\" ({rt}) is parked: it died {n} times within {w} s and is not restarted \
             (see lifecycle.log and its pane log); message NOT delivered — fix it, then run \
             `iapeer start {p} {rt}`",
            p = endpoint.personality,
            rt = endpoint.runtime,
            n = crate::daemon::lifecycle::PARK_DEATHS,
            w = crate::daemon::lifecycle::PARK_WINDOW.as_secs(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(to: &str, message: &str) -> SendArgs {
        SendArgs {
            to: to.into(),
            message: message.into(),
            ..SendArgs::default()
        }
    }

    /// `args` sent by `echo-alice` from the CLI.
    fn sent(args: SendArgs) -> SendInput {
        SendInput {
            path: "cli",
            caller: Caller::Cli("echo-alice".into()),
            args,
        }
    }

    fn input(to: &str, message: &str) -> SendInput {
        sent(args(to, message))
    }

    fn peer(p: &str, rts: &[&str]) -> RegistryPeer {
        RegistryPeer::new(p, rts, "artificial", format!("/w/{p}"))
    }

    fn registry() -> Registry {
        Registry {
            version: 2,
            peers: vec![
                peer("alice", &["echo"]),
                peer("bob", &["echo", "claude"]),
                {
                    let mut h = peer("owner", &["telegram"]);
                    h.intelligence = "natural".into();
                    h
                },
            ],
        }
    }

    #[test]
    fn a_prep_ticket_is_settled_once_by_whoever_comes_first() {
        let router = PrepTicket::default();
        let worker = router.clone();
        assert!(router.give_up(), "the deadline came first");
        assert!(!worker.commit(), "so nothing is kept");
        assert!(router.give_up(), "asking again says the same");
        let router = PrepTicket::default();
        let worker = router.clone();
        assert!(worker.commit(), "a hold is being kept");
        assert!(!router.give_up(), "so the router waits for it");
    }

    #[test]
    fn the_line_a_send_waits_in_is_its_claimed_sender() {
        let mcp = |header: Option<&str>, tok: Option<&str>, auth| Caller::Mcp {
            header: header.map(String::from),
            token_identity: tok.map(String::from),
            auth,
        };
        assert_eq!(Caller::Cli("echo-alice".into()).claimed(), "echo-alice");
        assert_eq!(
            mcp(Some("echo-bob"), Some("echo-alice"), McpAuth::Token).claimed(),
            "echo-alice",
            "the token says who it is"
        );
        assert_eq!(
            mcp(Some("echo-bob"), None, McpAuth::Token).claimed(),
            "echo-bob (no valid session token)",
            "not bob's own line"
        );
        assert_eq!(
            mcp(Some("echo-bob"), None, McpAuth::Header).claimed(),
            "echo-bob"
        );
        assert_eq!(Caller::Daemon.claimed(), "iapeer");
    }

    #[test]
    fn every_validation_message() {
        let cases: Vec<(SendInput, &str)> = vec![
            (
                input("", "x"),
                "send_to_peer requires non-empty \"personality\" and \"message\"",
            ),
            (
                input("bob", ""),
                "send_to_peer requires non-empty \"personality\" and \"message\"",
            ),
            (
                input("Bob", "x"),
                "invalid personality \"Bob\" — must match ^[a-z][a-z0-9-]{0,31}$",
            ),
            (
                sent(SendArgs {
                    runtime: Some("my-rt".into()),
                    ..args("bob", "x")
                }),
                "invalid runtime \"my-rt\"",
            ),
            (
                input("bob", &"é".repeat(16_001)),
                "message exceeds 16000 char limit (got 16001)",
            ),
            (
                sent(SendArgs {
                    topic: Some(format!(" {} ", "t".repeat(201))),
                    ..args("bob", "x")
                }),
                "topic exceeds 200 char limit (got 201)",
            ),
            (
                sent(SendArgs {
                    topic: Some("release\n</iap>".into()),
                    ..args("bob", "x")
                }),
                "topic must not contain newline characters — put it on one line",
            ),
            (
                sent(SendArgs {
                    topic: Some("a\rb".into()),
                    ..args("bob", "x")
                }),
                "topic must not contain newline characters — put it on one line",
            ),
            (
                sent(SendArgs {
                    topic: Some("\"".repeat(200)),
                    ..args("bob", "x")
                }),
                "topic exceeds 800 byte limit once escaped for the envelope (got 1200; each & \" < > \
                 takes 4 to 6 bytes) — shorten it",
            ),
            (
                sent(SendArgs {
                    attachments: vec!["/a".into(); 21],
                    ..args("bob", "x")
                }),
                "attachments exceeds 20 item limit",
            ),
            (
                sent(SendArgs {
                    attachments: vec!["rel/a".into()],
                    ..args("bob", "x")
                }),
                "attachments must contain only absolute local paths",
            ),
            (
                sent(SendArgs {
                    attachments: vec!["/a\nb".into()],
                    ..args("bob", "x")
                }),
                "attachment paths must not contain newline characters",
            ),
        ];
        for (i, want) in cases {
            let e = validate(&i).unwrap_err();
            assert_eq!(e.error, want);
            assert_eq!(e.code, Code::InvalidArgument);
        }
        assert_eq!(validate(&input("bob", &"é".repeat(16_000))).unwrap(), None);
        let widest = "😀".repeat(200);
        let t = sent(SendArgs {
            topic: Some(widest.clone()),
            ..args("bob", "x")
        });
        assert_eq!(
            validate(&t).unwrap(),
            Some(widest),
            "200 four-byte chars fit"
        );
        let t = sent(SendArgs {
            topic: Some("  release  ".into()),
            ..args("bob", "x")
        });
        assert_eq!(validate(&t).unwrap(), Some("release".into()));
        let t = sent(SendArgs {
            topic: Some("   ".into()),
            ..args("bob", "x")
        });
        assert_eq!(validate(&t).unwrap(), None, "blank topic is no topic");
    }

    #[test]
    fn caller_authentication_messages() {
        let reg = registry();
        let mcp = |header: Option<&str>, tok: Option<&str>, auth| Caller::Mcp {
            header: header.map(String::from),
            token_identity: tok.map(String::from),
            auth,
        };
        let err = |c: Caller| resolve_caller(&c, &reg).unwrap_err().error;
        assert_eq!(
            err(mcp(None, None, McpAuth::Token)),
            "missing or malformed x-iapeer-identity header — expected \"<runtime>-<personality>\""
        );
        assert_eq!(
            err(mcp(Some("echo-zed"), None, McpAuth::Token)),
            "unknown caller \"zed\" — not registered"
        );
        assert_eq!(
            err(mcp(Some("claude-alice"), None, McpAuth::Token)),
            "runtime \"claude\" is not declared for caller \"alice\""
        );
        assert_eq!(
            err(mcp(Some("echo-alice"), Some("echo-bob"), McpAuth::Token)),
            "session token missing or not valid for echo-alice"
        );
        assert_eq!(
            err(mcp(Some("echo-alice"), None, McpAuth::Token)),
            "session token missing or not valid for echo-alice"
        );
        assert!(resolve_caller(
            &mcp(Some("echo-alice"), Some("echo-alice"), McpAuth::Token),
            &reg
        )
        .is_ok());
        assert!(resolve_caller(&mcp(Some("echo-alice"), None, McpAuth::Header), &reg).is_ok());
        assert!(resolve_caller(&Caller::Cli("echo-alice".into()), &reg).is_ok());
    }

    #[test]
    fn target_resolution_rules() {
        let reg = registry();
        let (alice_id, alice) = resolve_caller(&Caller::Cli("echo-alice".into()), &reg).unwrap();
        let go = |i: SendInput| {
            resolve_target(&i, &alice_id, alice, &reg, |_| None).map(|(_, e)| e.to_string())
        };
        assert_eq!(
            go(input("bob", "x")).unwrap(),
            "echo-bob",
            "default runtime"
        );
        assert_eq!(
            go(sent(SendArgs {
                runtime: Some("claude".into()),
                ..args("bob", "x")
            }))
            .unwrap(),
            "claude-bob"
        );
        assert_eq!(
            go(sent(SendArgs {
                runtime: Some("codex".into()),
                ..args("bob", "x")
            }))
            .unwrap_err()
            .error,
            "peer \"bob\" does not declare runtime \"codex\""
        );
        let e = go(input("zed", "x")).unwrap_err();
        assert_eq!(
            e.error,
            "peer \"zed\" is not in the iapeer peers index; message NOT delivered"
        );
        assert_eq!(e.code, Code::NotRegistered);
        let renamed = resolve_target(&input("zed", "x"), &alice_id, alice, &reg, |to| {
            assert_eq!(to, "zed", "asked about the target");
            Some(Fate::Renamed { now: "zoe".into() })
        })
        .unwrap_err();
        assert_eq!(
            renamed.error,
            "peer \"zed\" is not in the iapeer peers index — it was renamed to \"zoe\"; message NOT delivered"
        );
        assert!(
            resolve_target(&input("bob", "x"), &alice_id, alice, &reg, |_| panic!(
                "asked"
            ))
            .is_ok(),
            "a registered target never reads the former names"
        );
        assert_eq!(
            go(input("alice", "x")).unwrap_err().error,
            "cannot send to self"
        );
        assert!(go(input("owner", "x"))
            .unwrap_err()
            .error
            .starts_with("telegram policy: sender \"alice\" has no telegram face"));
    }
}

//! The control-socket protocol between the CLI and the daemon (spec 02 §2), as Rust types used
//! by both ends: one JSON object per line each way. Requests carry `"op"` ([`Request`]); a final
//! reply carries `"ok"`: `true` plus the op's fields ([`Reply`] on the daemon side, [`Answer`]
//! on the client side), or `false` plus `"code"` and `"error"` ([`Failure`]). Long requests
//! may first send [`Progress`] lines. `docs/PROTOCOL.md` documents the wire shapes; a test
//! parses every example there into these types.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Longest accepted request line (1 MiB, without the `\n`); longer is a protocol error.
pub const MAX_LINE: usize = 1 << 20;

/// Longest message, in Unicode scalar values.
pub const MAX_MESSAGE_CHARS: usize = 16_000;

/// The runtime the daemon's own notices carry in their envelope (`runtime="daemon"`).
pub const DAEMON_RUNTIME: &str = "daemon";

/// Stable failure tokens (`"code"`), spelled in kebab-case on the wire (`not-registered`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// The target or caller is not in the registry.
    NotRegistered,
    /// The endpoint has its stop flag set.
    Stopped,
    /// The endpoint is not running and could not be woken or revived.
    Offline,
    /// A field failed validation.
    InvalidArgument,
    /// The request conflicts with work in progress: a compaction that could not run, or a
    /// send with `IfBusy::Refuse` to an agent mid-turn.
    Busy,
    /// Something did not finish in time.
    Timeout,
    /// The op is unknown.
    UnknownOp,
    /// The line is not a JSON object of a known shape.
    BadRequest,
    /// The peer has no live session where one is needed.
    NotLive,
    /// The daemon is shutting down.
    ShuttingDown,
    /// A send whose outcome is not known: some of the message reached the peer's input (or
    /// the request reached the daemon) and its arrival was never confirmed, so it may have
    /// arrived. A send again with the same message id is never delivered twice.
    StateUnknown,
    /// Messages between the two peers are paused: their exchange ran away (a storm).
    Paused,
    /// The origin guard held the message: an agent wrote to a human on another channel
    /// than the one the human's unanswered message came from (spec 10 §2).
    Held,
    /// The CLI could not do what was asked on its own side (a refused name, a runtime that
    /// is not installed, a file it cannot read); only in the CLI's `--json` output, never
    /// from the daemon.
    Failed,
    /// Anything else.
    Internal,
}

/// Declares [`Request`] and, from the same list, [`Op`] (its tags alone) and
/// [`Request::op`], so the set of op names cannot drift from the request shapes.
macro_rules! requests {
    ($(
        $(#[doc = $doc:literal])*
        $variant:ident $({ $(
            $(#[$fmeta:meta])*
            $field:ident : $ty:ty
        ),* $(,)? })? => $reply:ty
    ),* $(,)?) => {
        /// A control request (spec 02 §2). The variant is the `"op"` (kebab-case); field names
        /// are the JSON keys. Absent optional fields are left out when serialized.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
        pub enum Request {
            $(
                $(#[doc = $doc])*
                $variant $({ $( $(#[$fmeta])* $field: $ty ),* })?
            ),*
        }

        /// The op names alone (the `"op"` tag of a [`Request`]), to tell an unknown op from a
        /// malformed request.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Op {
            $(
                $(#[doc = $doc])*
                $variant
            ),*
        }

        impl Op {
            /// Every op, in declaration order.
            #[cfg(test)]
            pub const ALL: &'static [Op] = &[$(Op::$variant),*];
        }

        impl Request {
            /// This request's op.
            #[cfg(test)]
            pub fn op(&self) -> Op {
                match self {
                    $(Request::$variant { .. } => Op::$variant),*
                }
            }
        }

        impl Reply {
            /// Parse the final reply line to a request with op `op` (each op has one reply
            /// type, declared with it in `requests!`).
            ///
            /// Errors: the line is not JSON, or not the shape of `op`'s reply or of a failure.
            #[cfg(test)]
            pub fn parse(op: Op, line: &str) -> Result<Reply, serde_json::Error> {
                fn typed<T: DeserializeOwned + Into<Reply>>(
                    line: &str,
                ) -> Result<Reply, serde_json::Error> {
                    Ok(match serde_json::from_str::<Answer<T>>(line)? {
                        Answer::Ok(t) => t.into(),
                        Answer::Failed(f) => Reply::Failed(f),
                    })
                }
                match op {
                    $(Op::$variant => typed::<$reply>(line)),*
                }
            }
        }

        /// Each op as a type of its own, with the type of its success answer ([`Call`]):
        /// what the CLI asks with, so a reply type that does not match its request does not
        /// compile. The fields are the [`Request`] variant's.
        pub mod call {
            use super::*;

            $(
                #[doc = concat!("The `", stringify!($variant), "` request, as a [`Call`].")]
                #[derive(Debug, Clone, PartialEq, Deserialize)]
                pub struct $variant { $($( $(#[$fmeta])* pub $field: $ty ),*)? }

                /// Serialized as the request line it makes (with its `"op"`).
                impl Serialize for $variant {
                    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        Request::from(self.clone()).serialize(s)
                    }
                }

                impl From<$variant> for Request {
                    fn from(c: $variant) -> Request {
                        let $variant { $($($field),*)? } = c;
                        Request::$variant $({ $($field),* })?
                    }
                }

                impl Call for $variant {
                    type Reply = $reply;
                }
            )*
        }
    };
}

/// A request of one op ([`call`]) and the type of its success answer, declared together in
/// `requests!`: `Client::request` (in `cli::client`) takes a `Call` and returns
/// `Answer<Self::Reply>`.
pub trait Call: Clone + Into<Request> {
    /// The success answer's type (`{"ok":true, …}`).
    type Reply: DeserializeOwned;
}

requests! {
    /// Health check → `Pong`.
    Ping => Pong,
    /// Route one message (spec 03 §1) → `SendReply`.
    Send {
        /// Sender identity `<runtime>-<personality>`.
        from: String,
        /// Target personality.
        to: String,
        /// Forced endpoint runtime.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
        /// The body.
        message: String,
        /// Optional thread label.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        topic: Option<String>,
        /// Absolute source paths.
        #[serde(default)]
        attachments: Vec<String>,
        /// Milliseconds the sender waits for the answer; absent = the daemon's
        /// `IAPEER_SEND_TIMEOUT_MS`. Past it the send is refused with code `timeout` and
        /// whatever of it has not started is cancelled.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        /// The message id the sender chose (`msgids::valid_id`: 1 to 64 ASCII
        /// letters, digits, `.`, `_`, `:`, `-`); absent = the daemon makes one. A recipient
        /// never gets two messages with the same id from the same sender: a send again with
        /// an id already begun is answered with what is known of the first, never written
        /// again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// What to do when the peer's agent is mid-turn at delivery (issue 32 item 7):
        /// `IfBusy`; absent = `queue`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        if_busy: Option<IfBusy>,
    } => SendReply,
    /// Live session states → `ListReply`.
    List => ListReply,
    /// Wake a peer without a message → `WakeReply` once ready.
    Wake {
        /// Peer.
        personality: String,
        /// Runtime (default: the peer's default runtime).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    } => WakeReply,
    /// Set the stop flag and end sessions → `StopReply` once they are gone.
    Stop {
        /// Peer (absent with `all`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        personality: Option<String>,
        /// One runtime (default: every declared runtime).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
        /// Every agent peer; humans and services (router runtimes) too with `everyone`.
        #[serde(default)]
        all: bool,
        /// With `all`: humans and services as well (issue 30 item 4).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        everyone: bool,
    } => StopReply,
    /// Clear the stop flag (always-on peers are started) → `StartReply`.
    Start {
        /// Peer (absent with `all`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        personality: Option<String>,
        /// One runtime (default: every declared runtime).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
        /// Every peer.
        #[serde(default)]
        all: bool,
    } => StartReply,
    /// Attach a terminal → `WakeReply`; after it the connection carries frames.
    Attach {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule of spec 05 §5).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
        /// Start a fresh session first (the bare `iapeer <runtime>` form).
        #[serde(default)]
        fresh: bool,
        /// Only bring the session up; do not turn the connection into an attach stream.
        #[serde(default)]
        no_attach: bool,
    } => WakeReply,
    /// A fresh session now → `NewReply` (agents: once ready; always-on peers: restarted
    /// and un-parked).
    New {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    } => NewReply,
    /// End the peer's session if any and bring it up again on the conversation iapeer
    /// recorded (fresh without one) → `NewReply` (agents: once ready; always-on peers:
    /// restarted and un-parked), issue 30 item 4.
    Restart {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    } => NewReply,
    /// Send the runtime's interrupt keys to the live session → `InterruptReply`.
    Interrupt {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    } => InterruptReply,
    /// Compact the conversation → `CompactReply`.
    Compact {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    } => CompactReply,
    /// From inside a session: end it and bring up a fresh one → `IdentityReply`.
    SelfFresh {
        /// The caller's `PEER_IDENTITY`.
        identity: String,
    } => IdentityReply,
    /// Send a message the origin guard held, as its sender, to the runtime it addressed or
    /// to `runtime` → `SendReply` (spec 10 §2). The hold is claimed atomically, deleted
    /// once the send is accepted and put back when it fails.
    ConfirmSend {
        /// The hold id, `og-<8 hex>`.
        id: String,
        /// Send on this runtime instead (the origin, to redirect).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
        /// The confirming session's `PEER_IDENTITY`, which may confirm only its own holds;
        /// absent: the operator, who may confirm any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caller: Option<String>,
    } => SendReply,
    /// End every session of a peer being removed → `ForgetReply`.
    Forget {
        /// Peer.
        personality: String,
    } => ForgetReply,
    /// The runtime a peer is live on → `LiveRuntimeReply` (or `not-live`).
    LiveRuntime {
        /// Peer.
        personality: String,
    } => LiveRuntimeReply,
    /// Daemon health and a sessions summary → `StatusReply`.
    Status => StatusReply,
    /// The live screen of a peer's session as text → `ScreenReply` (`not-live` without a
    /// session); read-only, for the operator's web page.
    Screen {
        /// Peer.
        personality: String,
        /// Runtime (default: the control-verb rule).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<String>,
    } => ScreenReply,
    /// From a gated session's permission hook (`iapeer approval-request`, spec 10 §4): ask a
    /// human whether the tool may run → `ApprovalVerdict`, once a human decides or the
    /// request is denied (timeout, the session ended, the daemon stopping). The hook's
    /// connection closing denies it too.
    ApprovalRequest {
        /// The session's `PEER_IDENTITY`.
        identity: String,
        /// The session's `IAPEER_TOKEN`: it must be the live session's token.
        token: String,
        /// The tool (`Bash`, `Write`, …).
        tool: String,
        /// What it wants to run (a command, a file path, or the tool input as JSON).
        summary: String,
    } => ApprovalVerdict,
    /// The permission prompts waiting for a human → `ApprovalsReply`. With `wait_ms`, a
    /// long poll: answered as soon as a prompt asked after `since_ms` is pending, else when
    /// `wait_ms` has passed (with whatever is pending then).
    Approvals {
        /// Wait at most this long for a new prompt, in ms (at most 300 000; absent: answer
        /// at once).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wait_ms: Option<u64>,
        /// Count as new only prompts asked after this time, epoch ms (absent: any pending).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since_ms: Option<u64>,
    } => ApprovalsReply,
    /// Let a pending prompt's tool run → `ApprovalDone`.
    Approve {
        /// The approval id, `ap-<8 hex>`.
        id: String,
        /// For a boot dialog's request (tool `dialog`): the option to choose, by 1-based
        /// number or label (absent: the dialog's selected one). Refused for a tool prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        option: Option<String>,
    } => ApprovalDone,
    /// Refuse a pending prompt → `ApprovalDone`; `reason` is given to the model.
    Deny {
        /// The approval id, `ap-<8 hex>`.
        id: String,
        /// Why, for the model (default: `denied by a human`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    } => ApprovalDone,
}

/// Parse one request line. Errors are the failure to send back: `bad-request` for malformed
/// JSON or a wrong shape, `unknown-op` for an op no [`Request`] has; the connection stays
/// usable either way.
pub fn parse_request(line: &[u8]) -> Result<Request, Failure> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| Failure::new(Code::BadRequest, format!("malformed JSON: {e}")))?;
    let op = value
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| Failure::new(Code::BadRequest, "a request needs a string \"op\""))?
        .to_string();
    if serde_json::from_value::<Op>(Value::String(op.clone())).is_err() {
        return Err(Failure::new(
            Code::UnknownOp,
            format!("unknown op \"{op}\""),
        ));
    }
    serde_json::from_value(value)
        .map_err(|e| Failure::new(Code::BadRequest, format!("bad \"{op}\" request: {e}")))
}

/// A failed request: `{"ok":false,"code":…,"error":…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The stable token.
    pub code: Code,
    /// Text for humans.
    pub error: String,
}

impl Failure {
    /// A failure with `code` and `error`.
    pub fn new(code: Code, error: impl Into<String>) -> Failure {
        Failure {
            code,
            error: error.into(),
        }
    }
}

/// A progress line sent before the final reply:
/// `{"progress":"waking","identity":"echo-bob","elapsed_ms":1200}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The current phase, for humans.
    pub progress: String,
    /// The session it is about.
    pub identity: String,
    /// Milliseconds since the request began.
    pub elapsed_ms: u64,
}

/// `ping` → `{"ok":true,"version":"0.1.0","pid":123}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pong {
    /// The daemon's version.
    pub version: String,
    /// The daemon's process id.
    pub pid: u32,
}

/// Where a message went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveredTo {
    /// Target personality.
    pub personality: String,
    /// The runtime of the endpoint that took it.
    pub runtime: String,
}

/// Who holds a message that was accepted but not yet handed to the model (spec 03 §1 steps
/// 8–9, spec 05 §6–§7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueuedBy {
    /// The runtime's own queue behind its running turn.
    Runtime,
    /// The daemon's composer queue: a draft is in the agent's composer.
    Composer,
    /// The ephemeral peer's durable task queue on disk.
    Ephemeral,
    /// The daemon's composer queue while a tool's permission prompt is open on the agent's
    /// screen (issue 32 item 4): it waits for a human's approval (or its timeout), which
    /// [`Queued::waiting_for`] names.
    Approval,
    /// The inbox stream of another host whose heartbeat lapsed (issue 28 item 4): the
    /// message waits there until that host's daemon reads it, at most
    /// `crate::federation::keys::RETENTION`; [`Queued::waiting_for`] says so.
    Host,
}

impl QueuedBy {
    /// The wire spelling (`runtime`, `composer`, `ephemeral`, `approval`, `host`), also used in
    /// `delivery.log`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueuedBy::Runtime => "runtime",
            QueuedBy::Composer => "composer",
            QueuedBy::Ephemeral => "ephemeral",
            QueuedBy::Approval => "approval",
            QueuedBy::Host => "host",
        }
    }
}

/// What a send does when the peer's agent is mid-turn when its message's turn to be
/// delivered comes (issue 32 item 7; busy as the session's screen shows it, the `busy` of
/// [`SessionInfo`]); kebab-case on the wire. Not about a peer asleep or waking: such a
/// message is delivered as usual.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IfBusy {
    /// Paste it anyway (the default, as before): the runtime queues it behind its turn
    /// (answered `queued`, `queuedBy: "runtime"`) or takes it into the turn (delivered).
    #[default]
    Queue,
    /// Interrupt the turn with the runtime's own keys (as `iapeer interrupt`), then deliver
    /// it; the answer says `interrupted: true`.
    Interrupt,
    /// Refuse it, code `busy`, NOT delivered.
    Refuse,
}

impl IfBusy {
    /// Every choice, in the order the help lists them.
    pub const ALL: [IfBusy; 3] = [IfBusy::Queue, IfBusy::Interrupt, IfBusy::Refuse];

    /// The wire spelling (`queue`, `interrupt`, `refuse`).
    pub fn as_str(self) -> &'static str {
        match self {
            IfBusy::Queue => "queue",
            IfBusy::Interrupt => "interrupt",
            IfBusy::Refuse => "refuse",
        }
    }

    /// The choice spelled `s` (exactly, as on the wire); `None` for anything else.
    pub fn parse(s: &str) -> Option<IfBusy> {
        IfBusy::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// The queue fields of a [`SendResult`], present only when the message was queued:
/// `"queued":true,"queuedBy":"ephemeral","queueDepth":3`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queued {
    /// Always `true`.
    pub queued: bool,
    /// Whose queue holds it.
    #[serde(rename = "queuedBy")]
    pub queued_by: QueuedBy,
    /// Messages in that queue, this one included, when the queue can tell.
    #[serde(
        rename = "queueDepth",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub queue_depth: Option<u64>,
    /// What the message waits for, when the queue can say (`queuedBy: "approval"`: `an
    /// approval: Bash: rm /srv/a (iapeer approve ap-0123abcd | iapeer deny ap-0123abcd)`).
    #[serde(
        rename = "waitingFor",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub waiting_for: Option<String>,
}

/// A delivered (or queued) send (spec 03 §1 step 10); also the MCP tool's structured result:
/// `{"ok":true,"delivered_to":{…},"woke":false,"ts":"2026-11-30T10:00:00+00:00"}`, with the
/// `Queued` fields after `ts` when the message waits in a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendResult {
    /// Always `true` (the result object is only produced for a delivery).
    pub ok: bool,
    /// The endpoint.
    pub delivered_to: DeliveredTo,
    /// The message woke the endpoint (it rode the wake as its first message).
    pub woke: bool,
    /// The envelope timestamp (RFC 3339, local offset); `null` only if the envelope had none.
    pub ts: Option<String>,
    /// Set when the message waits in a queue instead of being in the model's input.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<Queued>,
    /// The message id (the sender's, or the one the daemon made); absent only from a daemon
    /// older than message ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `true`: a message with this id from this sender was delivered (or queued) earlier, and
    /// this send wrote nothing (a retry). Left out when `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub earlier: bool,
    /// `true`: the peer's agent was mid-turn and the sender chose `IfBusy::Interrupt`, so
    /// its turn was interrupted before this message went in. Left out when `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// `send` → `{"ok":true,"result":<SendResult>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendReply {
    /// The delivery.
    pub result: SendResult,
}

/// One live session in a [`ListReply`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// `<runtime>-<personality>`.
    pub identity: String,
    /// Peer.
    pub personality: String,
    /// Runtime.
    pub runtime: String,
    /// `live` (ready) or `booting`.
    pub status: String,
    /// Attached terminals.
    pub attached: usize,
    /// The session's child pid.
    pub pid: u32,
    /// When it woke, epoch ms.
    pub woke_at_ms: u64,
    /// Latest of activity, delivery and wake, epoch ms.
    pub last_active_ms: u64,
    /// The runtime reports a turn in progress.
    pub busy: bool,
    /// `fresh` or `resume`.
    pub mode: String,
}

/// `list` → `{"ok":true,"sessions":[…],"parked":["console-bot"]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListReply {
    /// Live and booting sessions, sorted by identity.
    pub sessions: Vec<SessionInfo>,
    /// Parked always-on identities, sorted.
    pub parked: Vec<String>,
}

/// `wake` and `attach` (and `new` for agents) → `{"ok":true,"identity":…,"woke":false,"pid":…}`
/// once the session is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeReply {
    /// The session's identity.
    pub identity: String,
    /// Always `false` today (kept for the wire shape).
    pub woke: bool,
    /// The session's child pid.
    pub pid: u32,
}

/// `new` on an always-on peer → `{"ok":true,"identity":…,"restarted":true}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartReply {
    /// The identity.
    pub identity: String,
    /// Always `true`.
    pub restarted: bool,
}

/// `new` → a ready agent session or a restarted always-on peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NewReply {
    /// An agent's fresh session is ready.
    Ready(WakeReply),
    /// An always-on peer was restarted and un-parked.
    Restarted(RestartReply),
}

impl NewReply {
    /// The identity it is about.
    pub fn identity(&self) -> &str {
        match self {
            NewReply::Ready(w) => &w.identity,
            NewReply::Restarted(r) => &r.identity,
        }
    }

    /// The new session's pid, when known.
    pub fn pid(&self) -> Option<u32> {
        match self {
            NewReply::Ready(w) => Some(w.pid),
            NewReply::Restarted(_) => None,
        }
    }
}

/// `stop` → `{"ok":true,"stopped":[ids],"ended":[ids]}`, sent once those sessions are gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopReply {
    /// Identities whose stop flag is now set.
    pub stopped: Vec<String>,
    /// Sessions told to end by this request.
    pub ended: Vec<String>,
    /// `all` without `everyone`: the human and service identities left as they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
}

/// `start` → `{"ok":true,"cleared":[ids],"started":[ids]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartReply {
    /// Identities whose stop flag was cleared.
    pub cleared: Vec<String>,
    /// Always-on sessions started now.
    pub started: Vec<String>,
}

/// `interrupt` → `{"ok":true,"identity":…,"interrupted":true}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptReply {
    /// The session.
    pub identity: String,
    /// Always `true`.
    pub interrupted: bool,
}

/// `compact` → `{"ok":true,"identity":…,"outcome":"compacted","resumed":false}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactReply {
    /// The session.
    pub identity: String,
    /// `compacted` or `nothing-to-compact`.
    pub outcome: CompactOutcome,
    /// The session was resumed first to compact it.
    pub resumed: bool,
}

/// How a compaction ended (spec 05 §5 `compact`); kebab-case on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompactOutcome {
    /// The runtime wrote its completion record.
    Compacted,
    /// The runtime said there was nothing to compact (an honest, non-error outcome).
    NothingToCompact,
}

impl CompactOutcome {
    /// The wire spelling (`compacted`, `nothing-to-compact`).
    pub fn as_str(self) -> &'static str {
        match self {
            CompactOutcome::Compacted => "compacted",
            CompactOutcome::NothingToCompact => "nothing-to-compact",
        }
    }
}

/// `self-fresh` → `{"ok":true,"identity":…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityReply {
    /// The session being replaced.
    pub identity: String,
}

/// `forget` → `{"ok":true,"ended":[ids]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgetReply {
    /// Sessions told to end.
    pub ended: Vec<String>,
}

/// `live-runtime` → `{"ok":true,"runtime":"echo"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveRuntimeReply {
    /// The runtime of the most recently active ready session.
    pub runtime: String,
}

/// Session counts in a [`StatusReply`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCounts {
    /// Ready sessions.
    pub live: usize,
    /// Sessions still booting.
    pub booting: usize,
}

/// A daemon thread that panicked and was started again, in a [`StatusReply`] (issue 26
/// item 9): the HTTP acceptor (`http-accept`) or the event-stream writer (`http-streams`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadRestart {
    /// The thread's name.
    pub thread: String,
    /// How many times it panicked and was restarted since the daemon started.
    pub restarts: u64,
    /// When it last panicked, epoch ms.
    pub last_ms: u64,
    /// What happened the last time: `panicked at <file:line:col> (<message>)`.
    pub last: String,
}

/// The send-preparation pool in a [`StatusReply`] (issue 26 item 2): the workers that read
/// the registry and copy attachments for each send, shared fairly between senders
/// (`daemon::fair_pool`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepStatus {
    /// Preparations running now, stalled ones included (both pools: sends with attachments
    /// and sends without).
    pub running: usize,
    /// Preparations waiting for a worker, in their senders' lines.
    pub waiting: usize,
    /// Worker threads alive now (idle and stalled ones included) in the pool for sends
    /// with attachments.
    pub threads: usize,
    /// The most worker threads there may be in that pool, stalled ones included.
    pub threads_max: usize,
    /// Worker threads alive now in the pool for sends without attachments (absent from an
    /// older daemon: 0).
    #[serde(default)]
    pub plain_threads: usize,
    /// The most worker threads there may be in that pool (absent from an older daemon: 0).
    #[serde(default)]
    pub plain_threads_max: usize,
    /// A preparation running this long (ms) is stalled: it no longer counts against the
    /// workers, so another is started for the other senders.
    pub stalled_after_ms: u64,
    /// Stalled preparations by sender, the longest-stalled first.
    pub stalled: Vec<StalledPrep>,
}

/// One sender's (for sends without attachments: one target's) stalled preparations in a
/// [`PrepStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StalledPrep {
    /// The sender, `<runtime>-<personality>` as it asked.
    pub sender: String,
    /// Its stalled preparations.
    pub jobs: usize,
    /// How long the oldest of them has run, ms.
    pub oldest_ms: u64,
    /// Its sends waiting in its line behind them.
    pub waiting: usize,
    /// The attachments they read, as the sender gave them (each once).
    pub attachments: Vec<String>,
    /// For sends without attachments: the peer (as the senders gave it) whose folder their
    /// preparation reads; their line is the peer's, so `sender` is then `to <peer>` (absent
    /// for sends with attachments and from an older daemon).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub peer: String,
}

/// `status` → `{"ok":true,"version","pid","started_ms","uptime_s","tcp","sock","sessions",
/// "prep"}`,
/// plus `"restarts":[…]` once a thread was restarted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReply {
    /// The daemon's version.
    pub version: String,
    /// The daemon's process id.
    pub pid: u32,
    /// Start time, epoch ms.
    pub started_ms: u64,
    /// Seconds since start.
    pub uptime_s: u64,
    /// The MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub tcp: String,
    /// The control socket path.
    pub sock: String,
    /// Session counts.
    pub sessions: SessionCounts,
    /// Threads that panicked and were restarted (absent when none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<ThreadRestart>,
    /// The send-preparation pool (absent from a daemon older than issue 26: empty).
    #[serde(default)]
    pub prep: PrepStatus,
    /// The agent runtimes' programs as the daemon finds them now (issue 30 item 1; absent
    /// from an older daemon: empty).
    #[serde(default)]
    pub agents: Vec<AgentProgram>,
    /// Whether the latency threads run real-time (issue 31 item 3, `daemon::realtime`;
    /// absent from an older daemon: the default, mode empty).
    #[serde(default)]
    pub realtime: RealtimeStatus,
}

/// The daemon's real-time scheduling in a [`StatusReply`] (`daemon::realtime`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RealtimeStatus {
    /// `on`, `off` (`IAPEER_REALTIME=0`), `not-allowed`, `refused` (by the kernel) or
    /// `unsupported` (not Linux).
    pub mode: String,
    /// For `on`: why it is allowed (`root`, `CAP_SYS_NICE`, `RLIMIT_RTPRIO n`); for
    /// `not-allowed`: the soft `RLIMIT_RTPRIO`; for `refused`: the kernel's error.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The `SCHED_FIFO` priority the threads get.
    pub priority: i32,
    /// The threads at `SCHED_FIFO` now, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<String>,
    /// Threads the watchdog put back to the normal policy for using too much CPU, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub demoted: Vec<String>,
}

/// An agent runtime's program as the daemon finds it, in a [`StatusReply`] (issue 30 item 1,
/// `crate::runtime::agent_program`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentProgram {
    /// `claude` or `codex`.
    pub runtime: String,
    /// The program found; absent when none is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// When none is found: every place looked at, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub looked: Vec<String>,
}

/// `screen` → `{"ok":true,"identity":"echo-bob","rows":["…"],"cursor":[row,col]}`: the
/// session's screen model (its vt100 screen) as text, one right-trimmed string per row, top
/// first; the cursor 0-based.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenReply {
    /// The session.
    pub identity: String,
    /// The visible rows, top first, each without trailing blanks (as many as the screen has).
    pub rows: Vec<String>,
    /// The cursor as 0-based `[row, col]`.
    pub cursor: [u16; 2],
}

/// The `tool` of an [`ApprovalInfo`] that is a boot menu's request (spec 10 §4).
pub const DIALOG_TOOL: &str = "dialog";

/// One permission prompt waiting for a human, in an [`ApprovalsReply`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalInfo {
    /// `ap-<8 hex>`.
    pub id: String,
    /// The asking session, `<runtime>-<personality>`.
    pub identity: String,
    /// Peer.
    pub personality: String,
    /// Runtime.
    pub runtime: String,
    /// The tool.
    pub tool: String,
    /// What it wants to run.
    pub summary: String,
    /// When it was asked, epoch ms.
    pub created_ms: u64,
    /// When it is denied unanswered, epoch ms.
    pub deadline_ms: u64,
    /// For a boot dialog's request (tool `dialog`): its option labels, top to bottom
    /// (`approve <id> <number>` counts from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    /// For a boot dialog's request: the 0-based index of the option a plain approve chooses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_option: Option<usize>,
}

/// `approvals` → `{"ok":true,"approvals":[…]}`, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalsReply {
    /// The pending prompts.
    pub approvals: Vec<ApprovalInfo>,
}

/// `approve`/`deny` → `{"ok":true,"id":…,"decision":"approve"|"deny","identity":…,
/// "outcome":{"kind":…},"detail":…}`: answered once the session has said what became of the
/// answer, or after [`APPROVAL_CONFIRM_WAIT`] without word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDone {
    /// The approval id.
    pub id: String,
    /// `approve` or `deny`.
    pub decision: String,
    /// The session that asked.
    pub identity: String,
    /// What became of the answer (absent from a daemon older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ApprovalOutcome>,
    /// [`ApprovalOutcome::describe`] of `outcome`: one line for a person.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl ApprovalDone {
    /// Whether the answer is known to have reached the agent (or its hook, or its boot).
    pub fn taken(&self) -> bool {
        self.outcome.as_ref().is_none_or(ApprovalOutcome::taken)
    }
}

/// The longest `approve`/`deny` of a permission prompt on an agent's screen waits for the
/// session to say what became of the answer: the session gives up on an answer its prompt
/// did not take within 10 s (`session::prompts::ANSWER_LIMIT`) and asks again, so by then it
/// has said one or the other; 5 s more for a prompt that settles first, the keys' gaps and a
/// loaded machine.
pub const APPROVAL_CONFIRM_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// What became of a human's answer to an approval request (`approve`/`deny`'s `outcome`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ApprovalOutcome {
    /// Handed over where nothing more is reported: a gated session's permission hook got it
    /// (the hook answers the agent), or a booting session got its dialog's choice.
    Handed {
        /// `hook` or `boot-dialog`.
        to: String,
    },
    /// The agent took it: its prompt closed after the answer went in.
    Taken {
        /// `keys` (keyed in on the prompt) or `runtime` (given through the runtime's API).
        by: String,
    },
    /// The agent did not take it; the prompt is asked again as a new request.
    AskedAgain {
        /// The new request's id (absent when the session did not report it in time).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        again: Option<String>,
        /// Why, as the session says it.
        reason: String,
    },
    /// The prompt left the agent's screen before the answer went in (answered there by
    /// someone attached, or its turn ended).
    PromptGone,
    /// The session ended before it said.
    SessionEnded,
    /// The daemon is stopping.
    Shutdown,
    /// No word from the session within `waited_ms` ([`APPROVAL_CONFIRM_WAIT`]).
    Unconfirmed {
        /// How long the answer waited.
        waited_ms: u64,
    },
}

impl ApprovalOutcome {
    /// Whether the answer is known to have reached the agent, its hook or its boot.
    pub fn taken(&self) -> bool {
        matches!(
            self,
            ApprovalOutcome::Handed { .. } | ApprovalOutcome::Taken { .. }
        )
    }

    /// One line for a person, after `approved <id> (<identity>)` (`verb`: `approve` or
    /// `deny`).
    pub fn describe(&self, verb: &str) -> String {
        match self {
            ApprovalOutcome::Handed { to } if to == "hook" => {
                "handed to the session's permission hook, which answers the agent".into()
            }
            ApprovalOutcome::Handed { .. } => "handed to the booting session's dialog".into(),
            ApprovalOutcome::Taken { by } if by == "runtime" => {
                "taken: the runtime's API took the answer and the prompt closed".into()
            }
            ApprovalOutcome::Taken { .. } => {
                "taken: the answer was keyed in and the prompt closed".into()
            }
            ApprovalOutcome::AskedAgain { again, reason } => match again {
                Some(id) => format!(
                    "NOT taken — {reason}; asked again as {id} (iapeer approve {id} | \
                     iapeer deny {id})"
                ),
                None => format!("NOT taken — {reason}; iapeer approvals lists it again"),
            },
            ApprovalOutcome::PromptGone => format!(
                "NOT taken — the prompt left the agent's screen before the answer went in \
                 (answered there, or its turn ended); nothing to {verb} now"
            ),
            ApprovalOutcome::SessionEnded => {
                "NOT confirmed — the session ended before its prompt took the answer".into()
            }
            ApprovalOutcome::Shutdown => {
                "NOT confirmed — the daemon is stopping; the session ends with it".into()
            }
            ApprovalOutcome::Unconfirmed { waited_ms } => format!(
                "NOT confirmed — no word from the session in {} s that its prompt took the \
                 answer; look with iapeer screen or iapeer attach, and iapeer approvals \
                 lists it again if it is asked again",
                waited_ms / 1000
            ),
        }
    }
}

/// `approval-request` → `{"ok":true,"id":…,"allow":true}` or
/// `{"ok":true,"id":…,"allow":false,"reason":…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalVerdict {
    /// The approval id the request had.
    pub id: String,
    /// The tool may run.
    pub allow: bool,
    /// Why not (a human's reason, or `denied: …` for a timeout, a session end, a shutdown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Declares [`Reply`] with one variant per successful reply type, its `From` conversions and
/// the wire encoding `{"ok":true, …fields}`.
macro_rules! replies {
    ($($(#[doc = $doc:literal])* $variant:ident($ty:ty)),* $(,)?) => {
        /// A final reply as the daemon produces it (serialized at the socket edge). Every
        /// success is `{"ok":true}` plus the fields of its type; [`Reply::Failed`] is
        /// `{"ok":false,"code":…,"error":…}`.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Reply {
            $($(#[doc = $doc])* $variant($ty),)*
            /// The request failed.
            Failed(Failure),
        }

        $(impl From<$ty> for Reply {
            fn from(r: $ty) -> Reply {
                Reply::$variant(r)
            }
        })*

        impl From<Failure> for Reply {
            fn from(f: Failure) -> Reply {
                Reply::Failed(f)
            }
        }

        impl Serialize for Reply {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(Reply::$variant(body) => Wire { ok: true, body }.serialize(s),)*
                    Reply::Failed(body) => Wire { ok: false, body }.serialize(s),
                }
            }
        }
    };
}

replies! {
    /// `ping`.
    Pong(Pong),
    /// `send`.
    Send(SendReply),
    /// `list`.
    List(ListReply),
    /// `wake`, `attach`.
    Wake(WakeReply),
    /// `new`.
    New(NewReply),
    /// `stop`.
    Stop(StopReply),
    /// `start`.
    Start(StartReply),
    /// `interrupt`.
    Interrupt(InterruptReply),
    /// `compact`.
    Compact(CompactReply),
    /// `self-fresh`.
    Identity(IdentityReply),
    /// `forget`.
    Forget(ForgetReply),
    /// `live-runtime`.
    LiveRuntime(LiveRuntimeReply),
    /// `status`.
    Status(StatusReply),
    /// `screen`.
    Screen(ScreenReply),
    /// `approvals`.
    Approvals(ApprovalsReply),
    /// `approve`, `deny`.
    ApprovalDone(ApprovalDone),
    /// `approval-request`.
    ApprovalVerdict(ApprovalVerdict),
}

impl Reply {
    /// A failure reply.
    pub fn failure(code: Code, error: impl Into<String>) -> Reply {
        Reply::Failed(Failure::new(code, error))
    }
}

/// `{"ok":…}` followed by the fields of `body`.
#[derive(Serialize)]
struct Wire<'a, T> {
    ok: bool,
    #[serde(flatten)]
    body: &'a T,
}

/// A final reply as the client reads it, for a request whose success type is `T`.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer<T> {
    /// `{"ok":true, …}`.
    Ok(T),
    /// `{"ok":false,"code":…,"error":…}`.
    Failed(Failure),
}

impl<T> Answer<T> {
    /// The success, or the failure as an error.
    pub fn into_result(self) -> Result<T, Failure> {
        match self {
            Answer::Ok(t) => Ok(t),
            Answer::Failed(f) => Err(f),
        }
    }
}

impl<T: Serialize> Serialize for Answer<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Answer::Ok(body) => Wire { ok: true, body }.serialize(s),
            Answer::Failed(body) => Wire { ok: false, body }.serialize(s),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Answer<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut v = Value::deserialize(d)?;
        let ok = v
            .as_object_mut()
            .ok_or_else(|| D::Error::custom("a reply is a JSON object"))?
            .remove("ok")
            .ok_or_else(|| D::Error::missing_field("ok"))?;
        match ok {
            Value::Bool(true) => serde_json::from_value(v).map(Answer::Ok),
            Value::Bool(false) => serde_json::from_value(v).map(Answer::Failed),
            _ => return Err(D::Error::custom("\"ok\" is not a boolean")),
        }
        .map_err(D::Error::custom)
    }
}

/// One line from the daemon before the final reply: a progress line or the final reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Line<T> {
    /// A progress line.
    Progress(Progress),
    /// The final reply.
    Final(Answer<T>),
}

impl<T: DeserializeOwned> Line<T> {
    /// Parse one line from the daemon (a line with `"progress"` is a progress line).
    ///
    /// Errors: neither a progress line nor the final reply shape for `T`.
    pub fn parse(line: &str) -> Result<Line<T>, serde_json::Error> {
        let v: Value = serde_json::from_str(line)?;
        if v.get("progress").is_some() {
            serde_json::from_value(v).map(Line::Progress)
        } else {
            serde_json::from_value(v).map(Line::Final)
        }
    }
}

#[cfg(test)]
mod tests;

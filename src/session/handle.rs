//! Messages between the router and a session thread (spec 02 §1): commands in, events out.

use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;

/// Why a session is being ended (becomes `cause=` in `exits.log`, spec 04 §1 "Death").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The child exited on its own.
    ChildExit,
    /// The daemon ended it for another reason (e.g. a failed boot, a fresh restart).
    KilledByDaemon,
    /// Idle sleep.
    IdleSleep,
    /// `iapeer stop`.
    Stop,
    /// Daemon shutdown.
    Shutdown,
    /// Not ready by the boot deadline.
    BootTimeout,
    /// Ended on purpose to make room for a fresh session (`new`, `self-fresh`, `iapeer <rt>`).
    Replaced,
    /// Ended because its peer is being removed.
    Removed,
    /// An ephemeral worker's wind-down (spec 05 §4): its task is done, or it never replied.
    WindDown,
    /// A human refused to answer a dialog at boot that iapeer does not know (`iapeer deny`,
    /// or nobody answered in time): not a crash, so not a death for the crash-loop guard.
    DialogRefused,
}

impl Cause {
    /// The logfmt spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::ChildExit => "child-exit",
            Cause::KilledByDaemon => "killed-by-daemon",
            Cause::IdleSleep => "idle-sleep",
            Cause::Stop => "stop",
            Cause::Shutdown => "shutdown",
            Cause::BootTimeout => "boot-timeout",
            Cause::Replaced => "replaced",
            Cause::Removed => "removed",
            Cause::WindDown => "wind-down",
            Cause::DialogRefused => "dialog-refused",
        }
    }

    /// Whether a death with this cause was expected (no screen tail is logged for it).
    pub fn expected(self) -> bool {
        matches!(
            self,
            Cause::IdleSleep
                | Cause::Stop
                | Cause::Shutdown
                | Cause::Replaced
                | Cause::Removed
                | Cause::WindDown
        )
    }
}

/// One message to put into a session's input (spec 04 §1 "Input").
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Router-assigned id, echoed in [`EventKind::Delivered`].
    pub id: u64,
    /// The text to deliver: the agent-form envelope (pasted) for agent runtimes, the
    /// wire-form envelope for router runtimes (a `\n` is added when written).
    pub text: String,
    /// The agent-form `ts` of the envelope (the echo runtime confirms by it).
    pub agent_ts: Option<String>,
    /// How long to wait for confirmation (`IAP_HOST_LIVENESS_GRACE_MS`, longer with
    /// attachments).
    pub grace: Duration,
    /// When set, after confirmation wait until the runtime's activity time advances past
    /// its value before the paste, for at most this long (the ready gate, spec 05 §2 step 10).
    pub ready_gate: Option<Duration>,
    /// The message's sender and id: recorded as begun in the session's
    /// [`crate::msgids::Ledger`] before the first byte is written (issue 26 item 5).
    pub key: Option<crate::msgids::MsgKey>,
}

/// The visible screen as text, for [`SessionCmd::Screen`]: the rows, top first, each
/// right-trimmed, and the cursor as 0-based (row, col).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenText {
    /// The visible rows.
    pub rows: Vec<String>,
    /// The cursor (row, col).
    pub cursor: (u16, u16),
}

/// Where a session sends its [`ScreenText`].
pub type ScreenFn = Box<dyn FnOnce(ScreenText) + Send>;

/// A command from the router to a session thread.
pub enum SessionCmd {
    /// Deliver one message; answered by [`EventKind::Delivered`].
    Deliver(Delivery),
    /// The sender of delivery `id` stopped waiting: take it back if none of its bytes were
    /// written (answered by an `Err` [`EventKind::Delivered`]); if part of it is written,
    /// stop tracking it and answer [`EventKind::Unconfirmed`] while the rest is still
    /// written; past writing, ignored (its own deadlines end it).
    Cancel(u64),
    /// `iapeer interrupt`: write the runtime's interrupt keys, and watch for the interrupted
    /// message coming back into the composer (Claude Code puts it back there): iapeer's own
    /// text is cleared ([`crate::session::own_text`]) and reported by
    /// [`EventKind::ComposerCleared`].
    Interrupt(Vec<u8>),
    /// Hand over an attach client: the socket (already past the JSON handshake) and any
    /// bytes read from it beyond the request line.
    Attach(UnixStream, Vec<u8>),
    /// Compact the conversation; answered by [`EventKind::Compacted`].
    Compact(u64),
    /// The session's MCP client is connected (it listed the tools).
    McpUp,
    /// Pass the screen model as text to the callback (at once, on the session thread: it
    /// must be quick).
    Screen(ScreenFn),
    /// Report a [`EventKind::Status`].
    Probe,
    /// End the session: signal its process group, SIGKILL after 3 s.
    Kill(Cause),
    /// A human's answer to the menu of an [`EventKind::BootMenu`] (spec 10 §4):
    /// `Ok((index, options))` moves the marker to option `index` of the menu with those
    /// labels and confirms it; `Err(reason)` fails the boot now with that reason.
    AnswerBootMenu(Result<(usize, Vec<String>), String>),
    /// A human's answer to permission prompt `n` of an [`EventKind::PromptOpened`] (spec 10
    /// §4, issue 32 item 4): key in option `choice` of that prompt's menu while it is open
    /// ([`crate::session::prompts`]); ignored once it has closed.
    AnswerPrompt {
        /// The prompt's number.
        n: u64,
        /// The option chosen (the prompt's `approve` or `deny`, or another by a human).
        choice: usize,
    },
}

/// What the last part of a boot waited for, in milliseconds before `ready` (zero for a
/// router runtime, which is ready at once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadyWaits {
    /// Since the runtime's ready screen was first seen (without a break).
    pub screen_ms: u64,
    /// Since the agent's MCP client listed the daemon's tools, when the boot waited for it.
    pub mcp_ms: Option<u64>,
}

/// What a session tells the router.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// Boot progress for waiting senders (`booting`, `answering dialog: <label>`, …).
    Phase(String),
    /// The runtime is ready for input (after boot; immediately for router runtimes), with what
    /// the boot waited for last (logged on the lifecycle `ready` line, issue 13 item 2).
    Ready(ReadyWaits),
    /// The boot failed; the session is being ended.
    BootFailed {
        /// Timed out or failed, typed (the session ends with [`BootFailure::cause`]).
        ///
        /// [`BootFailure::cause`]: crate::session::boot::BootFailure::cause
        failure: crate::session::boot::BootFailure,
        /// The last screen text, for `lifecycle.log`; with the failure, the waiting sender's
        /// reason ([`crate::session::outcome::boot_failed_reason`]).
        screen: String,
        /// `screen`'s width in columns (0: a pipe's output, no wrapping).
        width: usize,
    },
    /// The boot is stuck on a menu the adapter has no answer for, unchanged for
    /// [`crate::session::boot::UNANSWERED_MENU_AFTER`]: a human is to choose (spec 10 §4);
    /// answered by [`SessionCmd::AnswerBootMenu`]. Sent once per such screen.
    BootMenu {
        /// The option labels, top to bottom.
        options: Vec<String>,
        /// Index into `options` of the one under the menu's marker (the default).
        cursor: usize,
        /// The nearest text row above the options (the dialog's question, usually).
        question: String,
    },
    /// A tool's permission prompt opened on the live agent's screen (spec 10 §4, issue 32
    /// item 4; [`crate::session::prompts`]). `hooked`: the session is gated, so its
    /// permission hook asks the same question through the approval broker; otherwise the
    /// router asks a human and answers with [`SessionCmd::AnswerPrompt`].
    PromptOpened {
        /// The prompt's number in this session.
        n: u64,
        /// What it asks.
        prompt: crate::adapter::PermissionPrompt,
        /// A permission hook asks it too (a gated session).
        hooked: bool,
    },
    /// Permission prompt `n` is gone from the screen: answered (by iapeer's keys or
    /// someone attached), or its turn ended.
    PromptClosed {
        /// The prompt's number.
        n: u64,
        /// How: after iapeer's answer went in, with none, or to be asked again at once
        /// (the next [`EventKind::PromptOpened`] of the session is that new request).
        how: crate::session::prompts::Closing,
    },
    /// Outcome of a [`SessionCmd::Deliver`].
    Delivered {
        /// The delivery id.
        id: u64,
        /// `Ok(())` = confirmed; `Err(why)` otherwise.
        result: Result<(), crate::session::outcome::DeliveryFailure>,
        /// When the runtime took it, epoch ms, when the evidence says (the accepting record's
        /// own time, or when the screen showed its turn): what delivery.log records as the
        /// delivery's moment (issue 31 item 2). `None`: the router's clock stands in.
        taken_ms: Option<u64>,
    },
    /// Instead of an `Err` [`EventKind::Delivered`] (or [`EventKind::QueueOutcome`]): some of
    /// delivery `id`'s bytes were written to the child's input and its arrival was never
    /// confirmed (no confirmation in time, the session ended, the child stopped reading
    /// mid-message): it may have arrived, so the sender is told the state is unknown and the
    /// message is never written again (issue 26 item 5).
    Unconfirmed {
        /// The delivery id.
        id: u64,
        /// What happened, one line (e.g. `no confirmation within 4000 ms`).
        reason: String,
    },
    /// Instead of [`EventKind::Delivered`]: the runtime answered that it cannot take
    /// delivery `id` (the human inbox writer's `failed <id> <reason>`), or the child took
    /// none of it for [`crate::session::thread::SessionConfig::stall`] and it was taken back
    /// whole: nothing reached the peer and its input is in a known state, so the message
    /// fails with `reason` at once (no hold for a revive).
    Refused {
        /// The delivery id.
        id: u64,
        /// The runtime's reason, one line.
        reason: String,
    },
    /// Instead of [`EventKind::Delivered`]: the message was accepted into a queue — the
    /// runtime's own, behind a running turn (`Runtime`), or the session's composer hold while
    /// the composer holds a draft (`Composer`, spec 05 §7). A [`EventKind::QueueOutcome`] with
    /// the same id follows.
    Queued {
        /// The delivery id.
        id: u64,
        /// Which queue holds it.
        by: crate::protocol::QueuedBy,
        /// How many messages that queue holds with it counted, when the session knows
        /// (the composer hold: the held one and those waiting behind it).
        depth: Option<u64>,
    },
    /// The fate of a [`EventKind::Queued`] message: `Ok(())` = it reached the model;
    /// `Err(reason)` = removed from the runtime's queue, held past the composer limit, or the
    /// session ended first.
    QueueOutcome {
        /// The delivery id.
        id: u64,
        /// Reached the model, or why not.
        result: Result<(), crate::session::outcome::DeliveryFailure>,
    },
    /// The ready gate of a wake's first message (spec 05 §2 step 10), after its
    /// [`EventKind::Delivered`]: `Ok(())` = the model started on it; `Err(reason)` = it did
    /// not (the API does not answer, no activity within the gate, the session ended).
    GateOutcome {
        /// The delivery id.
        id: u64,
        /// Passed, or why not.
        result: Result<(), crate::session::outcome::GateFailure>,
        /// The session was ended on purpose before the gate passed (stop, new, shutdown…):
        /// logged, nobody told.
        quiet: bool,
    },
    /// The composer held the text of delivery `id` — put back by the runtime after an
    /// interrupt, a paste cut off by its deadline, or one whose Enter never took — and the
    /// session cleared it with the runtime's own keys (issue 26 items 8 and 5 (c)). A message
    /// its sender was told was delivered did not stay with the agent.
    ComposerCleared {
        /// The delivery id.
        id: u64,
    },
    /// The session's conversation id, learned from the runtime's records of its first
    /// confirmed delivery ([`crate::adapter::ConversationNaming::Learned`], issue 32): the
    /// router records it with the topics (`.conversation`), and the session's readers follow
    /// that conversation from now on.
    Conversation {
        /// The runtime's id of the conversation.
        id: String,
    },
    /// Sent just before [`EventKind::Exited`]: the deliveries the runtime had taken whose
    /// turn had not ended by the runtime's own records (issue 32 item 2: an agent that dies
    /// mid-task), oldest first. A wake's first message among them has its failed
    /// [`EventKind::GateOutcome`] sent `quiet`.
    TurnsCut {
        /// The delivery ids.
        ids: Vec<u64>,
    },
    /// Outcome of a [`SessionCmd::Compact`].
    Compacted {
        /// The request id.
        id: u64,
        /// How it ended, or why it failed.
        result: Result<crate::adapter::CompactOutcome, crate::session::outcome::CompactFailure>,
    },
    /// Answer to [`SessionCmd::Probe`].
    Status(SessionStatus),
    /// The screen started (`true`) or stopped showing the runtime mid-turn
    /// ([`crate::adapter::Adapter::is_busy`]), so `list` and `update`'s mid-turn check see a
    /// turn at once, not at the next probe.
    Busy(bool),
    /// The number of attached interactive clients changed.
    Attached(usize),
    /// The child is gone and its output drained; the thread is ending.
    Exited {
        /// Exit code, when it exited normally.
        status: Option<i32>,
        /// Signal name, when it was killed by one.
        signal: Option<String>,
        /// Why it ended.
        cause: Cause,
    },
}

/// A session's observable state, for idle decisions and `list`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionStatus {
    /// Newest activity of the runtime (transcript mtime), epoch ms.
    pub activity_ms: Option<u64>,
    /// The runtime shows it is mid-turn.
    pub busy: bool,
    /// Attached interactive clients.
    pub attached: usize,
    /// Last output byte seen while a client was attached, epoch ms.
    pub attached_output_ms: Option<u64>,
    /// Last output byte of the child, attached or not, epoch ms (an ephemeral worker's
    /// "quiet", spec 05 §4).
    pub output_ms: Option<u64>,
    /// The model API refused the runtime's latest turn (spec 10 §3).
    pub api_error: Option<crate::adapter::ApiError>,
}

/// An event tagged with the session it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// The session's unique id (a new one for every launch).
    pub session: u64,
    /// What happened.
    pub kind: EventKind,
}

/// Where a session thread sends its [`SessionEvent`]s: the router's one inbox, each event
/// wrapped as the router's own message by the function the daemon gives
/// [`EventSink::new`] (issue 31 item 3: the router waits on one channel, not a select over
/// two, so its events and the other threads' messages reach it in the order they were sent).
#[derive(Clone)]
pub struct EventSink(Arc<dyn Fn(SessionEvent) -> bool + Send + Sync>);

impl EventSink {
    /// A sink that hands each event to `send`, which returns false when the receiver is gone.
    pub fn new(send: impl Fn(SessionEvent) -> bool + Send + Sync + 'static) -> EventSink {
        EventSink(Arc::new(send))
    }

    /// Send one event. Returns false when the router is gone.
    pub fn send(&self, ev: SessionEvent) -> bool {
        (self.0)(ev)
    }
}

/// The router's handle on a session thread: a command channel plus the thread's poll waker.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) tx: Sender<SessionCmd>,
    pub(crate) waker: Arc<mio::Waker>,
}

impl SessionHandle {
    /// Send a command and wake the session thread. Returns false when the thread is gone.
    pub fn send(&self, cmd: SessionCmd) -> bool {
        let ok = self.tx.send(cmd).is_ok();
        let _ = self.waker.wake();
        ok
    }
}

#[cfg(test)]
mod sink_tests {
    use super::*;

    /// Issue 31 item 3: a session's events reach the one inbox wrapped as its owner's message,
    /// in the order sent among the other senders' messages; a gone inbox is told.
    #[test]
    fn an_event_sink_wraps_events_into_the_one_inbox_in_order() {
        #[derive(Debug, PartialEq)]
        enum Inbox {
            Other(u32),
            Session(SessionEvent),
        }
        let (tx, rx) = crossbeam_channel::unbounded();
        let sink = {
            let tx = tx.clone();
            EventSink::new(move |ev| tx.send(Inbox::Session(ev)).is_ok())
        };
        let ev = |n| SessionEvent {
            session: n,
            kind: EventKind::Busy(true),
        };
        assert!(sink.clone().send(ev(1)));
        tx.send(Inbox::Other(2)).unwrap();
        assert!(sink.send(ev(3)));
        let got: Vec<Inbox> = rx.try_iter().collect();
        assert_eq!(
            got,
            [
                Inbox::Session(ev(1)),
                Inbox::Other(2),
                Inbox::Session(ev(3))
            ]
        );
        drop(rx);
        assert!(!sink.send(ev(4)), "the inbox is gone");
    }
}

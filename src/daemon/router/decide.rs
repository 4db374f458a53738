//! The router's decisions as pure functions (spec 03 §1 step 9, spec 05 §2–§4, §8). The
//! router gathers the facts (its own state, marker files, the turn's [`Now`]), asks one of
//! these functions, and carries out the answer: what the head of an identity's queue does
//! next ([`head_step`]), what a session's end sets in motion ([`after_exit`]), whether an
//! idle session sleeps ([`idle_sleep`]), what the tick does to a session ([`tick_step`]),
//! the crash-loop guard ([`crash_looping`]), the always-on start check
//! ([`may_start_always_on`]), the revive grace ([`revive_deadline`], [`revive_gives_up`]) and
//! what a launcher thread's report sets in motion ([`launched`]).
//! The fresh/resume rules and the always-on back-off live in [`crate::daemon::lifecycle`].

use std::time::{Duration, Instant};

use super::now::Now;
use crate::daemon::lifecycle::{idle_age_ms, settled_idle, should_sleep, ModeRequest};
use crate::runtime::RuntimeKind;
use crate::session::handle::{Cause, SessionStatus};

/// What a session the router tracks can take right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Live {
    /// Booting (or a router session that lost its input): wait for `Ready` or `Exited`.
    Starting,
    /// Ready and not asked to end: takes deliveries and commands.
    Ready,
    /// Told to end (stop, idle sleep, replace, shutdown): wait for `Exited`.
    Ending,
}

impl Live {
    /// The state from the router's flags: `stopping` wins over `ready`.
    pub fn of(ready: bool, ending: bool) -> Live {
        match (ready, ending) {
            (_, true) => Live::Ending,
            (true, false) => Live::Ready,
            (false, false) => Live::Starting,
        }
    }
}

/// The head of an identity's queue, as the decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Head {
    /// A message to an endpoint of this runtime kind.
    Send(RuntimeKind),
    /// A `compact` request.
    Compact,
    /// A wake without a message.
    Wake {
        /// Fresh, resume or let the rules decide.
        mode: ModeRequest,
        /// For fresh wakes: the old session was told to end, or the new one launched.
        launched: bool,
    },
}

/// Where the identity stands: a tracked session, a launch under way, or none and what its
/// markers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// A session exists.
    Session(Live),
    /// A launcher thread is starting its session: the head waits for the launch's result.
    Launching,
    /// An always-on (router) peer the supervisor parked after a crash loop (spec 05 §8): no
    /// session, none coming until `start` or `new`; not stopped.
    Parked,
    /// No session.
    Asleep {
        /// `.stopped` is set.
        stopped: bool,
        /// `.idle-reaped` is set (there is a conversation to resume).
        resumable: bool,
    },
}

/// What the router does with the queue head (the `pump` step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadStep {
    /// Hand the message to the live session; it becomes the in-flight delivery.
    Deliver,
    /// Send the compact command to the live session; it becomes in flight.
    StartCompact,
    /// The session is live: answer the wake job `woke: false` (or attach) and go on.
    AnswerLive,
    /// A fresh wake with an old session still running: tell it to end (`Replaced`).
    Replace,
    /// Nothing to do until the session is ready or gone.
    Wait,
    /// An always-on peer is not running: hold the message for the revive grace.
    HoldForRevive,
    /// Launch a session for the head with this mode request.
    Launch(ModeRequest),
    /// The peer is stopped: refuse the head and go on.
    RefuseStopped,
    /// An always-on peer is parked: refuse the message at once with the park reason (no
    /// restart is coming for the revive grace to wait for) and go on.
    RefuseParked,
    /// `compact` of a peer with no conversation: answer `nothing-to-compact` and go on.
    NothingToCompact,
}

/// The next step for the queue head (spec 03 §1 step 9, spec 05 §2 steps 2–4, §5 compact).
///
/// A message to an asleep agent launches with [`ModeRequest::Auto`]; the launch itself
/// refuses a stopped or crash-looping peer (spec 05 §2 steps 2 and 5), so `stopped` is only
/// read here for router peers and `compact`.
pub(crate) fn head_step(head: Head, presence: Presence) -> HeadStep {
    use HeadStep::*;
    match (head, presence) {
        // One launch at a time per identity: whatever the head is, it waits for the result.
        (_, Presence::Launching) => Wait,
        (Head::Send(_), Presence::Session(Live::Ready)) => Deliver,
        (Head::Send(_), Presence::Session(_)) => Wait,
        (Head::Send(RuntimeKind::Router), Presence::Asleep { stopped: true, .. }) => RefuseStopped,
        (Head::Send(RuntimeKind::Router), Presence::Asleep { .. }) => HoldForRevive,
        (Head::Send(_), Presence::Parked) => RefuseParked,
        // Wakes and compactions of a parked peer go as they would for any asleep one.
        (head, Presence::Parked) => head_step(
            head,
            Presence::Asleep {
                stopped: false,
                resumable: false,
            },
        ),
        (Head::Send(RuntimeKind::Agent), Presence::Asleep { .. }) => Launch(ModeRequest::Auto),
        (Head::Compact, Presence::Session(Live::Ready)) => StartCompact,
        (Head::Compact, Presence::Session(_)) => Wait,
        (Head::Compact, Presence::Asleep { stopped: true, .. }) => RefuseStopped,
        (
            Head::Compact,
            Presence::Asleep {
                resumable: false, ..
            },
        ) => NothingToCompact,
        (Head::Compact, Presence::Asleep { .. }) => Launch(ModeRequest::Resume),
        (Head::Wake { mode, launched }, Presence::Session(live)) => {
            let wants_new = matches!(mode, ModeRequest::Fresh | ModeRequest::Restart) && !launched;
            match live {
                Live::Ready if !wants_new => AnswerLive,
                Live::Ready | Live::Starting if wants_new => Replace,
                _ => Wait,
            }
        }
        (Head::Wake { mode, .. }, Presence::Asleep { .. }) => Launch(mode),
    }
}

/// Whether a session's end counts as a death (crash-loop guard, spec 05 §2 step 5 and
/// "a session that died during the wake counts as a death"): the child exited on its own,
/// it missed the boot deadline, or the daemon ended it because its boot failed — not when a
/// human refused its unknown boot dialog ([`Cause::DialogRefused`]).
pub(crate) fn counts_as_death(cause: Cause, boot_failed: bool) -> bool {
    matches!(cause, Cause::ChildExit | Cause::BootTimeout)
        || (cause == Cause::KilledByDaemon && boot_failed)
}

/// The facts [`after_exit`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitFacts {
    /// The ended session's runtime kind.
    pub kind: RuntimeKind,
    /// Why it ended.
    pub cause: Cause,
    /// It reported a failed boot before it ended.
    pub boot_failed: bool,
    /// A delivery or compaction was handed to it and never answered.
    pub inflight: bool,
    /// The daemon is shutting down.
    pub shutting_down: bool,
    /// `.stopped` is set.
    pub stopped: bool,
    /// `.new-eager` is set (from `self-fresh`).
    pub new_eager: bool,
    /// The child exited by itself with status 0 (a self-close, e.g. `/exit`).
    pub clean_exit: bool,
    /// The session held a conversation: it resumed one, or a message was delivered to it.
    pub had_conversation: bool,
}

/// What happens to the unanswered in-flight job of an ended session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inflight {
    /// There was none.
    None,
    /// A router peer's message: keep it queued; the pump holds it for the restart within
    /// the revive grace (or refuses it if the peer was stopped).
    Requeue,
    /// An agent's (its wake failed or its thread ended): fail it `offline and wake failed`.
    Fail,
}

/// What a session's end sets in motion ([`after_exit`]), in the order the router applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitPlan {
    /// Append a death record (crash-loop guard).
    pub record_death: bool,
    /// The fate of the in-flight job.
    pub inflight: Inflight,
    /// An always-on peer died: apply the back-off (restart later, or park) (spec 05 §8).
    pub back_off: bool,
    /// An always-on peer ended by `new`: start it again now if `new` asked for that.
    pub restart_if_asked: bool,
    /// Bring a fresh session up now (`.new-eager`, spec 05 §4).
    pub new_eager: bool,
    /// Move the identity's queue (not during shutdown).
    pub pump: bool,
    /// Make the conversation resume-eligible (`.idle-reaped`): an agent that died holding
    /// a conversation (issue 32 item 2) resumes it on the next message on its topic, as
    /// after an idle sleep; the crash-loop guard still refuses one that keeps dying.
    pub resume_eligible: bool,
}

/// The decision after a session ended (spec 05 §4 "dead session", §8, spec 03 §1 step 9).
/// Spec 05 §2 rule 5 starts fresh after a crash; an agent that dies holding a conversation
/// (killed, or exited with an error, not a self-close) is resumed on its topic instead
/// (issue 32 item 2: a crash lost the thread).
pub(crate) fn after_exit(f: &ExitFacts) -> ExitPlan {
    let router = f.kind == RuntimeKind::Router;
    let inflight = match (f.inflight, router) {
        (false, _) => Inflight::None,
        (true, true) => Inflight::Requeue,
        (true, false) => Inflight::Fail,
    };
    let record_death = counts_as_death(f.cause, f.boot_failed);
    ExitPlan {
        record_death,
        resume_eligible: !router
            && record_death
            && !f.clean_exit
            && f.had_conversation
            && !f.shutting_down
            && !f.stopped,
        inflight,
        back_off: router
            && !f.shutting_down
            && !f.stopped
            && !matches!(f.cause, Cause::Replaced | Cause::Removed),
        restart_if_asked: router && f.cause == Cause::Replaced,
        new_eager: !f.shutting_down && f.new_eager,
        pump: !f.shutting_down,
    }
}

/// Why a delivery the session answered with an error failed ([`delivery_failure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeliveryFailure {
    /// A router peer could not take it (nothing reached the peer): back to the queue head
    /// for the revive grace.
    HoldForRevive,
    /// The operator stopped the peer while the message waited: say so.
    Stopped,
    /// It rode a wake that failed: `offline and wake failed: <boot failure or reason>`.
    WakeFailed,
    /// A live session did not confirm it: `listed live but did not accept the message`.
    NotAccepted,
}

/// Classify a failed delivery (spec 03 §1 step 9 and "the promise").
pub(crate) fn delivery_failure(kind: RuntimeKind, woke: bool, stopped: bool) -> DeliveryFailure {
    match (kind, stopped, woke) {
        (RuntimeKind::Router, _, _) => DeliveryFailure::HoldForRevive,
        (_, true, _) => DeliveryFailure::Stopped,
        (_, false, true) => DeliveryFailure::WakeFailed,
        (_, false, false) => DeliveryFailure::NotAccepted,
    }
}

/// A failed boot fails a waiting wake job at once; a message riding the wake fails when the
/// session answers its delivery (spec 05 §2 "failures at any step are reported").
pub(crate) fn boot_failure_fails_head(head: Option<Head>) -> bool {
    matches!(head, Some(Head::Wake { .. }))
}

/// The crash-loop guard (spec 05 §2 step 5): an agent with `max` deaths within `window`
/// before `now` is refused. Router peers have their own back-off and are never refused.
pub(crate) fn crash_looping(
    kind: RuntimeKind,
    deaths_ms: &[u64],
    now: Now,
    max: usize,
    window: Duration,
) -> bool {
    kind == RuntimeKind::Agent
        && crate::markers::crash_looping(deaths_ms, now.ms, max, window.as_millis() as u64)
}

/// The facts [`idle_sleep`] reads about one live agent session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IdleFacts<'a> {
    /// The session's latest probe answer.
    pub status: &'a SessionStatus,
    /// The probe answer before it, if any ([`settled_idle`]).
    pub before: Option<&'a SessionStatus>,
    /// When it woke, epoch ms.
    pub woke_at_ms: u64,
    /// Its last confirmed delivery, epoch ms.
    pub last_delivery_ms: Option<u64>,
    /// It was already told to end.
    pub ending: bool,
    /// Work is queued for it.
    pub queue_busy: bool,
    /// It waits on a send of its own ([`super::state::Queues::sends_from`]): its agent is in
    /// a `send_to_peer` call, mid-turn (a wake of the peer it sends to can take a minute).
    pub sending: bool,
}

/// Idle sleep (spec 05 §4): `Some(age_ms)` when the session should end and become
/// resume-eligible (idle longer than `idle`, not mid-turn — its screen settled without a busy
/// sign over two probes ([`settled_idle`]) —, nobody attached, not already ending, nothing
/// queued, no send of its own waiting); `None` to leave it.
pub(crate) fn idle_sleep(f: &IdleFacts<'_>, now: Now, idle: Duration) -> Option<u64> {
    let age = idle_age_ms(now.ms, f.status, f.woke_at_ms, f.last_delivery_ms);
    let quiet = !f.ending && !f.queue_busy && !f.sending;
    (quiet && should_sleep(age, idle, f.status) && settled_idle(f.before, f.status, now.ms))
        .then_some(age)
}

/// The facts [`ephemeral_wind_down`] reads about one live ephemeral worker.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WindDownFacts<'a> {
    /// The session's latest probe answer.
    pub status: &'a SessionStatus,
    /// When it woke, epoch ms.
    pub woke_at_ms: u64,
    /// Its last confirmed delivery (its task), epoch ms.
    pub last_delivery_ms: Option<u64>,
    /// `.ephemeral-armed` is set: it sent its reply or ran `self-done`.
    pub armed: bool,
    /// It was already told to end.
    pub ending: bool,
}

/// Why an ephemeral worker is ended ([`ephemeral_wind_down`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindDown {
    /// Armed and quiet (no model activity, no screen output) this long, ms.
    ArmedQuiet(u64),
    /// Never armed and idle this long, ms.
    UnarmedIdle(u64),
}

impl WindDown {
    /// The logfmt `reason=` value.
    pub fn as_str(self) -> &'static str {
        match self {
            WindDown::ArmedQuiet(_) => "armed-quiet",
            WindDown::UnarmedIdle(_) => "unarmed-idle",
        }
    }

    /// The quiet or idle time that decided it, ms.
    pub fn age_ms(self) -> u64 {
        match self {
            WindDown::ArmedQuiet(ms) | WindDown::UnarmedIdle(ms) => ms,
        }
    }
}

/// An ephemeral worker's wind-down (spec 05 §4): armed and quiet for `quiet` (neither model
/// activity nor screen output) → end it; not armed and idle longer than `unarmed` → end it.
/// Never while it is mid-turn, a human is attached or it is already ending. An ephemeral
/// worker is never idle-slept (its conversation is never resumed).
pub(crate) fn ephemeral_wind_down(
    f: &WindDownFacts<'_>,
    now: Now,
    quiet: Duration,
    unarmed: Duration,
) -> Option<WindDown> {
    if f.ending || f.status.busy || f.status.attached > 0 {
        return None;
    }
    let idle = idle_age_ms(now.ms, f.status, f.woke_at_ms, f.last_delivery_ms);
    if f.armed {
        let since_output = f
            .status
            .output_ms
            .map_or(idle, |o| now.ms.saturating_sub(o));
        let quiet_ms = idle.min(since_output);
        (quiet_ms >= quiet.as_millis() as u64).then_some(WindDown::ArmedQuiet(quiet_ms))
    } else {
        (idle > unarmed.as_millis() as u64).then_some(WindDown::UnarmedIdle(idle))
    }
}

/// What the supervise tick does to one session (spec 05 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TickStep {
    /// Nothing now.
    Skip,
    /// The stop flag is set: end it.
    Stop,
    /// Ask a ready agent for its status; the idle decision follows its answer.
    Probe,
}

/// The tick's step for one session (spec 05 §4).
pub(crate) fn tick_step(kind: RuntimeKind, live: Live, stopped: bool) -> TickStep {
    match (live, stopped, kind) {
        (Live::Ending, _, _) => TickStep::Skip,
        (_, true, _) => TickStep::Stop,
        (Live::Ready, false, RuntimeKind::Agent) => TickStep::Probe,
        _ => TickStep::Skip,
    }
}

/// Whether an always-on peer is started now (spec 05 §8): not when it runs, the daemon is
/// shutting down, it is stopped, or it is parked.
pub(crate) fn may_start_always_on(
    running: bool,
    shutting_down: bool,
    stopped: bool,
    parked: bool,
) -> bool {
    !running && !shutting_down && !stopped && !parked
}

/// When a send to a restarting always-on peer, started at `started`, gives up (spec 03 §1
/// step 9: the revive grace, 4 s by default).
pub(crate) fn revive_deadline(started: Instant, grace: Duration) -> Instant {
    started + grace
}

/// At the revive deadline: the send gives up if it is still the queue head and no session
/// can take it.
pub(crate) fn revive_gives_up(still_head: bool, usable_session: bool) -> bool {
    still_head && !usable_session
}

/// What a launch is for: the head of the identity's queue (a message, a wake, a compact)
/// or the always-on supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaunchFor {
    /// The queue head asked for it (`pump`).
    Head,
    /// The always-on supervisor started it (daemon start, restart, `start`, `new`).
    AlwaysOn,
}

/// The facts [`launched`] reads when a launcher thread reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaunchedFacts {
    /// What the launch was for.
    pub purpose: LaunchFor,
    /// The child and its session thread started.
    pub started: bool,
    /// The router ended the identity while it launched (stop, forget, `new`, self-fresh,
    /// shutdown): the first cause, or shutdown's.
    pub ending: Option<Cause>,
    /// The queue head that asked for the launch is still there (a message in flight, or a
    /// head nobody ended).
    pub head_waits: bool,
}

/// What the router does with a launch's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaunchedStep {
    /// Track the new session as booting (spec 05 §2 step 8).
    Booting,
    /// Track the new session and end it at once for this cause, exactly as if it had been
    /// booting when the router ended it.
    EndAtOnce(Cause),
    /// The launch failed: fail the queue head with the launch's refusal, or with the
    /// stopped refusal when `stop` came while it launched.
    FailHead {
        /// `stop` ended it while it launched.
        stopped: bool,
    },
    /// An always-on start failed: log it, and back off unless the router had ended it.
    StartFailed {
        /// Apply the back-off (spec 05 §8).
        back_off: bool,
    },
    /// The launch failed and nothing waits for it any more.
    Gone,
}

/// The decision when a launcher thread reports (spec 05 §2 steps 6–8, §8).
pub(crate) fn launched(f: &LaunchedFacts) -> LaunchedStep {
    match (f.started, f.ending, f.purpose) {
        (true, None, _) => LaunchedStep::Booting,
        (true, Some(cause), _) => LaunchedStep::EndAtOnce(cause),
        (false, ending, LaunchFor::AlwaysOn) => LaunchedStep::StartFailed {
            back_off: ending.is_none(),
        },
        (false, ending, LaunchFor::Head) if f.head_waits => LaunchedStep::FailHead {
            stopped: ending == Some(Cause::Stop),
        },
        (false, _, LaunchFor::Head) => LaunchedStep::Gone,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;

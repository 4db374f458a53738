//! One delivery into a live session, as a state machine driven by the session thread
//! (spec 04 §1 "Input" and "Delivery confirmation"; spec 05 §2 step 10, the ready gate).
//!
//! The ready gate of a wake's first message runs after its sender was answered
//! ([`GateFollower`]): it waits on the model, not on delivery, and a real model's first
//! answer takes seconds (issue 13 item 2). Its failure reaches the sender as a notice.
//!
//! Pure apart from the confirmer it holds: time and activity readings are passed in, so the
//! rules are tested with fake clocks.

use std::time::{Duration, Instant};

use super::handle::Delivery;
use super::outcome::{DeliveryFailure, GateFailure};
use crate::adapter::{Acceptance, Confirm, GateState, GateWatch};

/// The pause between typed text and Enter where no screen signal is awaited (the typed
/// `/compact` command, `session::compact`). Codex treats an Enter that arrives within ~120 ms
/// of fast unbracketed input as part of it; 300 ms clears that with margin.
pub const SETTLE: Duration = Duration::from_millis(300);
/// The most to wait after a complete paste for the screen to show it taken
/// ([`ActiveDelivery::on_paste_shown`]) before Enter goes anyway. Usually the sign comes in
/// milliseconds; under load Claude Code 2.1.332 has drawn a paste more than 300 ms after it
/// was written (its composer busy redrawing the queue after an `enqueue`), and the one lost
/// Enter seen in the mid-turn test runs (`tests/busy.rs`, about 1 run in 10 on a loaded
/// machine, the message left in the composer and reported NOT delivered) was written blind
/// at 300 ms. Waiting for the sign costs nothing when it comes; this bound only matters when
/// it never does.
pub const PASTE_SIGNAL_WAIT: Duration = Duration::from_millis(1500);
/// While unconfirmed, Enter is re-sent this often (a TUI busy redrawing may drop one).
pub const ENTER_RETRY: Duration = Duration::from_millis(1500);
/// How often confirmation is re-checked when no output arrives (transcripts are files; a
/// check reads only what was appended since the last one). Output from the child checks at
/// once. At 100 ms the wait for the next check was a visible part of a delivery (issue 13).
pub const CONFIRM_POLL: Duration = Duration::from_millis(25);
/// How often the ready gate re-reads the runtime's activity when no output arrives; output
/// re-reads at once (a turn that starts redraws the screen).
pub const GATE_POLL: Duration = Duration::from_millis(50);
/// How often the turn of an accepted message is looked at ([`TurnFollower`]): only its
/// end is wanted, and only while the session lives.
pub const TURN_POLL: Duration = Duration::from_secs(1);
/// At most this much output since the paste is kept for confirmation.
const OUTPUT_CAP: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Bytes are still being written to the child.
    Writing,
    /// Paste written; Enter goes at `until`.
    Settling { until: Instant },
    /// Enter written; waiting for the runtime to confirm.
    Confirming {
        deadline: Instant,
        next_enter: Instant,
        next_poll: Instant,
    },
}

/// What the session thread must do after a step.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Nothing now.
    Wait,
    /// Write these bytes to the child.
    Write(Vec<u8>),
    /// The delivery is over.
    Done(Result<(), DeliveryFailure>),
    /// The first message of a wake was accepted: its sender is answered `delivered`, and
    /// the session follows the ready gate with [`ActiveDelivery::into_gate`].
    Gate,
    /// The runtime put the message into its own input queue behind a running turn: the
    /// sender is answered `queued`, and the session follows it with
    /// [`ActiveDelivery::into_follower`] until it reaches the model or is removed.
    Queued,
}

/// A delivery in progress.
pub struct ActiveDelivery {
    /// The router's delivery id.
    pub id: u64,
    pty: bool,
    phase: Phase,
    confirmer: Box<dyn Confirm>,
    output: Vec<u8>,
    grace: Duration,
    gate: Option<Duration>,
    activity_before: Option<u64>,
    gate_watch: Option<Box<dyn GateWatch>>,
    /// The screen showed the whole paste while settling.
    paste_shown: bool,
    /// The most to wait for that sign before Enter.
    enter_wait: Duration,
    /// Enter goes no sooner than this ([`ActiveDelivery::hold_enter_until`]).
    enter_not_before: Option<Instant>,
    /// Enter goes this long after the paste's sign ([`ActiveDelivery::enter_after_sign`]).
    after_sign: Duration,
    /// Enters written so far.
    enters: u32,
    /// While unconfirmed, Enter is written again this often ([`ENTER_RETRY`] unless
    /// [`ActiveDelivery::enter_retry`] says otherwise).
    retry: Duration,
    /// The runtime said it will not take the message ([`Acceptance::Removed`]), as opposed
    /// to no answer within the grace.
    refused: bool,
    /// When the screen showed its turn (epoch ms), for a wake's first message confirmed so.
    shown_ms: Option<u64>,
}

impl ActiveDelivery {
    /// Start delivering `d`. Returns the machine and the bytes to write now: a bracketed
    /// paste for a pty, the text plus `\n` for pipes. `activity_before` is the runtime's
    /// activity time read just before (for the ready gate).
    pub fn start(
        d: &Delivery,
        pty: bool,
        confirmer: Box<dyn Confirm>,
        activity_before: Option<u64>,
        gate_watch: Option<Box<dyn GateWatch>>,
    ) -> (ActiveDelivery, Vec<u8>) {
        let bytes = if pty {
            crate::term::bracketed_paste(&d.text)
        } else {
            let mut b = d.text.clone().into_bytes();
            b.push(b'\n');
            b
        };
        (
            ActiveDelivery {
                id: d.id,
                pty,
                phase: Phase::Writing,
                confirmer,
                output: Vec::new(),
                grace: d.grace,
                gate: d.ready_gate,
                activity_before,
                gate_watch,
                paste_shown: false,
                enter_wait: PASTE_SIGNAL_WAIT,
                enter_not_before: None,
                after_sign: Duration::ZERO,
                enters: 0,
                retry: ENTER_RETRY,
                refused: false,
                shown_ms: None,
            },
            bytes,
        )
    }

    /// Whether the delivery failed because the runtime answered that it will not take the
    /// message (the human inbox writer's `failed <id> <reason>`), rather than by silence: the
    /// runtime's input is then in a known state.
    pub fn refused_by_runtime(&self) -> bool {
        self.refused
    }

    /// For a runtime whose screen never shows a paste taken (no composer to read): Enter
    /// goes after the fixed [`SETTLE`] instead of waiting [`PASTE_SIGNAL_WAIT`] for a sign.
    pub fn without_paste_sign(mut self) -> ActiveDelivery {
        self.enter_wait = SETTLE;
        self
    }

    /// Enter goes `pause` after the screen shows the paste taken rather than at once: a
    /// runtime may take an Enter that follows a paste too closely for a line break
    /// (`Adapter::enter_after_paste_sign`).
    pub fn enter_after_sign(mut self, pause: Duration) -> ActiveDelivery {
        self.after_sign = pause;
        self
    }

    /// While unconfirmed, Enter is written again every `every` instead of [`ENTER_RETRY`]
    /// (`Adapter::enter_retry`).
    pub fn enter_retry(mut self, every: Duration) -> ActiveDelivery {
        self.retry = every;
        self
    }

    /// Enter goes no sooner than `at`, whatever the screen shows (issue 13 item 2: a boot's
    /// first message is pasted as soon as the agent's MCP client listed the tools, and its
    /// Enter waits out the runtime's MCP settle, so the paste overlaps that wait).
    pub fn hold_enter_until(mut self, at: Instant) -> ActiveDelivery {
        self.enter_not_before = Some(at);
        self
    }

    /// When Enter may go while settling: the paste's sign (or the end of the wait for it),
    /// and not before the hold.
    fn enter_at(&self, until: Instant) -> Instant {
        self.enter_not_before.map_or(until, |hold| until.max(hold))
    }

    /// Its bytes are still being written (nothing after the paste has happened yet).
    pub fn is_writing(&self) -> bool {
        self.phase == Phase::Writing
    }

    /// Its paste is written and Enter has not gone yet.
    pub fn is_settling(&self) -> bool {
        matches!(self.phase, Phase::Settling { .. })
    }

    /// Its Enter (or a pipe runtime's line) was written.
    pub fn enter_written(&self) -> bool {
        matches!(self.phase, Phase::Confirming { .. })
    }

    /// The screen shows that the runtime has taken the whole paste (issue 13 item 1): Enter
    /// goes at the next [`ActiveDelivery::poll`] instead of at the end of [`PASTE_SIGNAL_WAIT`].
    pub fn on_paste_shown(&mut self, now: Instant) {
        if let Phase::Settling { until } = &mut self.phase {
            if !self.paste_shown {
                log::debug!("delivery {}: the composer shows the paste", self.id);
            }
            *until = (*until).min(now + self.after_sign);
            self.paste_shown = true;
        }
    }

    /// Whether Enter went (or goes) on the screen's sign rather than at the end of
    /// [`PASTE_SIGNAL_WAIT`].
    pub fn paste_was_shown(&self) -> bool {
        self.paste_shown
    }

    /// Everything queued for the child has been written.
    pub fn on_written(&mut self, now: Instant) -> Step {
        if self.phase != Phase::Writing {
            return Step::Wait;
        }
        if self.pty {
            log::debug!("delivery {}: paste written", self.id);
            self.phase = Phase::Settling {
                until: now + self.enter_wait,
            };
            Step::Wait
        } else if self.confirmer.confirmed(&self.output) {
            // Router runtimes: bytes fully written to stdin is the confirmation.
            Step::Done(Ok(()))
        } else {
            // A pipe runtime that acknowledges on its output (the `human` inbox writer says
            // `stored <id>` once the record is on disk): wait for it within the grace. No
            // Enter is ever written to a pipe.
            let deadline = now + self.grace;
            self.phase = Phase::Confirming {
                deadline,
                next_enter: deadline,
                next_poll: now + CONFIRM_POLL,
            };
            Step::Wait
        }
    }

    /// Output arrived from the child. While confirming, the next [`ActiveDelivery::poll`]
    /// checks at once instead of waiting for the next [`CONFIRM_POLL`] tick.
    pub fn on_output(&mut self, bytes: &[u8], now: Instant) {
        if self.output.len() + bytes.len() <= OUTPUT_CAP {
            self.output.extend_from_slice(bytes);
        }
        if let Phase::Confirming {
            next_poll,
            deadline,
            ..
        } = &mut self.phase
        {
            *next_poll = (*next_poll).min(now).min(*deadline);
        }
    }

    /// The screen shows a turn of the runtime's own, its composer empty. For a wake's first
    /// message, after Enter, that is the message accepted: the session was idle at its ready
    /// screen, so the only turn that can start is this one (issue 13 item 2; Claude Code
    /// 2.1.332 draws it 90–280 ms after Enter but writes a new conversation's transcript
    /// ~250–380 ms after, measured). Any other delivery ignores it: a live
    /// session's turn may be someone else's, and only the transcript tells a message queued
    /// behind it (`Queued`) from one taken.
    /// `at_ms` (epoch ms) is when the output that drew the turn was read.
    pub fn on_turn_shown(&mut self, at_ms: u64) -> Step {
        if !self.turn_confirms() {
            return Step::Wait;
        }
        log::debug!("delivery {}: the screen shows its turn", self.id);
        self.shown_ms = Some(at_ms);
        self.confirmed()
    }

    /// When the runtime took the message (epoch ms), once confirmed: the accepting record's
    /// own time ([`Confirm::taken_ms`]), else when the screen showed its turn; `None` when
    /// neither is known (the caller's clock stands in). Issue 31 item 2: delivered is when
    /// the runtime has the message, not when the evidence was read or logged.
    pub fn taken_ms(&self) -> Option<u64> {
        self.confirmer.taken_ms().or(self.shown_ms)
    }

    /// Whether a turn on the screen would confirm it ([`ActiveDelivery::on_turn_shown`]): a
    /// wake's first message after Enter, whose paste the composer showed before it (so an
    /// empty composer now means the text left it; with Enter on the fallback clock the paste
    /// may not have been drawn yet).
    pub fn turn_confirms(&self) -> bool {
        self.gate.is_some() && self.paste_shown && matches!(self.phase, Phase::Confirming { .. })
    }

    /// Advance by time. `screen` reads the screen text on demand.
    pub fn poll<S: AsRef<str>>(&mut self, now: Instant, screen: impl FnOnce() -> S) -> Step {
        match self.phase {
            Phase::Writing => Step::Wait,
            Phase::Settling { until } => {
                if now < self.enter_at(until) {
                    return Step::Wait;
                }
                if !self.confirmer.ready_for_enter() {
                    self.phase = Phase::Settling {
                        until: now + CONFIRM_POLL,
                    };
                    return Step::Wait;
                }
                self.phase = Phase::Confirming {
                    deadline: now + self.grace,
                    next_enter: now + self.retry,
                    next_poll: now,
                };
                log::debug!("delivery {}: Enter", self.id);
                self.enters = 1;
                Step::Write(b"\r".to_vec())
            }
            Phase::Confirming {
                deadline,
                next_enter,
                next_poll,
            } => {
                if now >= next_poll || now >= deadline {
                    match accept(self.confirmer.as_mut(), &self.output, screen) {
                        Acceptance::Accepted => return self.confirmed(),
                        Acceptance::Queued => return Step::Queued,
                        Acceptance::Removed(why) => {
                            self.refused = true;
                            return Step::Done(Err(DeliveryFailure::RemovedByRuntime(why)));
                        }
                        Acceptance::Pending => {}
                    }
                    if now >= deadline {
                        if self.confirmer.held_by_runtime() {
                            // Its own queue holds it; it submits it once it is ready.
                            return Step::Queued;
                        }
                        return Step::Done(Err(DeliveryFailure::NoConfirmation {
                            within: self.grace,
                        }));
                    }
                    self.phase = Phase::Confirming {
                        deadline,
                        next_enter,
                        next_poll: now + CONFIRM_POLL,
                    };
                }
                if self.pty && now >= next_enter {
                    if let Phase::Confirming { next_enter, .. } = &mut self.phase {
                        *next_enter = now + self.retry;
                    }
                    log::info!(
                        "delivery {}: not confirmed {} ms after its Enter; Enter again",
                        self.id,
                        (self.retry * self.enters).as_millis()
                    );
                    self.enters += 1;
                    return Step::Write(b"\r".to_vec());
                }
                Step::Wait
            }
        }
    }

    fn confirmed(&self) -> Step {
        log::debug!("delivery {}: accepted by the runtime", self.id);
        match self.gate {
            None => Step::Done(Ok(())),
            Some(_) => Step::Gate,
        }
    }

    /// Whether it is a wake's first message (it has a ready gate).
    pub fn is_wake_first(&self) -> bool {
        self.gate.is_some()
    }

    /// The ready gate of a delivery that ended in [`Step::Gate`], from `now`, and the
    /// follower of its turn.
    pub fn into_gate(self, now: Instant) -> (GateFollower, TurnFollower) {
        (
            GateFollower {
                id: self.id,
                deadline: now + self.gate.unwrap_or_default(),
                next_poll: now,
                activity_before: self.activity_before,
                watch: self.gate_watch,
            },
            TurnFollower::new(self.id, self.confirmer, now),
        )
    }

    /// The follower of the turn of a delivery that ended in `Step::Done(Ok)`.
    pub fn into_turn(self, now: Instant) -> TurnFollower {
        TurnFollower::new(self.id, self.confirmer, now)
    }

    /// The follower of a delivery that ended in [`Step::Queued`]: it keeps the confirmer.
    pub fn into_follower(self, now: Instant) -> QueueFollower {
        QueueFollower {
            id: self.id,
            confirmer: self.confirmer,
            next_poll: now + CONFIRM_POLL,
        }
    }

    /// When [`ActiveDelivery::poll`] next needs to run, if it is waiting on time.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Writing => None,
            Phase::Settling { until } => Some(self.enter_at(until)),
            Phase::Confirming {
                deadline,
                next_enter,
                next_poll,
            } => Some(deadline.min(next_enter).min(next_poll)),
        }
    }
}

/// The ready gate of a wake's first message (spec 05 §2 step 10), followed after its sender
/// was answered: passes when the runtime's own [`GateWatch`] says so (Claude: the model's
/// first record) or, without one, when the runtime's activity time passes its value from
/// just before the paste; fails on the watch's early sign (the API retry loop) or at the
/// deadline with `model did not process the task`.
pub struct GateFollower {
    /// The router's delivery id.
    pub id: u64,
    deadline: Instant,
    next_poll: Instant,
    activity_before: Option<u64>,
    watch: Option<Box<dyn GateWatch>>,
}

impl GateFollower {
    /// Check again when due (`activity` reads the runtime's activity time, epoch ms;
    /// `screen` the screen text); `Some` once the gate passed (`Ok`) or failed (`Err`).
    pub fn poll<S: AsRef<str>>(
        &mut self,
        now: Instant,
        activity: impl FnOnce() -> Option<u64>,
        screen: impl FnOnce() -> S,
    ) -> Option<Result<(), GateFailure>> {
        if now < self.next_poll && now < self.deadline {
            return None;
        }
        let state = match self.watch.as_mut() {
            Some(g) => g.poll(screen().as_ref()),
            None => match (activity(), self.activity_before) {
                (Some(now_ms), Some(before)) if now_ms > before => GateState::Passed,
                (Some(_), None) => GateState::Passed,
                _ => GateState::Pending,
            },
        };
        match state {
            GateState::Passed => {
                log::debug!("delivery {}: ready gate passed", self.id);
                Some(Ok(()))
            }
            GateState::Failed(reason) => Some(Err(GateFailure::Refused(reason))),
            GateState::Pending if now >= self.deadline => Some(Err(GateFailure::ModelIdle)),
            GateState::Pending => {
                self.next_poll = now + GATE_POLL;
                None
            }
        }
    }

    /// One last look when the session ends, due or not and whatever the deadline: `Some` when
    /// the gate passed or failed by its own sign, `None` while it is still pending.
    pub fn last_look<S: AsRef<str>>(
        &mut self,
        activity: impl FnOnce() -> Option<u64>,
        screen: impl FnOnce() -> S,
    ) -> Option<Result<(), GateFailure>> {
        self.deadline = self.deadline.max(self.next_poll + GATE_POLL);
        self.poll(self.next_poll, activity, screen)
    }

    /// Output arrived: the next [`GateFollower::poll`] checks at once (a turn that starts
    /// redraws the screen).
    pub fn on_output(&mut self, now: Instant) {
        self.next_poll = self.next_poll.min(now);
    }

    /// When [`GateFollower::poll`] next needs to run.
    pub fn next_deadline(&self) -> Instant {
        self.next_poll.min(self.deadline)
    }
}

/// How far a delivery's bytes got, for taking it back.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// Not one byte written: remove `len` bytes at `offset` of the pending output.
    NotBegun {
        /// Offset of its first byte in the bytes not yet written.
        offset: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// Partly written: the rest must still be written, or the next message is corrupted.
    Partial {
        /// Bytes of it written.
        written: u64,
        /// Its length in bytes.
        len: u64,
    },
    /// Fully written.
    Written,
}

/// Where one delivery's bytes are in the child's input stream: `[start, end)` as offsets of
/// every byte ever queued for the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The delivery's id.
    pub id: u64,
    /// Offset of its first byte.
    pub start: u64,
    /// Offset just past its last byte.
    pub end: u64,
}

impl Span {
    /// Where it stands when `written` bytes of the stream have been written ([`cancel_span`]).
    pub fn taken(&self, written: u64) -> Taken {
        cancel_span((self.start, self.end), written)
    }

    /// Whether any byte of delivery `id` has been written once `written` bytes of the stream
    /// have: from then on it may have reached the peer, and only a confirmation says so.
    pub fn begun(&self, id: u64, written: u64) -> bool {
        self.id == id && written > self.start
    }
}

/// Where a delivery whose bytes are `[start, end)` of the child's input stream stands when
/// `written` bytes of that stream have been written (pure; offsets are byte counts since
/// the session began).
pub fn cancel_span((start, end): (u64, u64), written: u64) -> Taken {
    if written <= start {
        Taken::NotBegun {
            offset: (start - written) as usize,
            len: (end - start) as usize,
        }
    } else if written < end {
        Taken::Partial {
            written: written - start,
            len: end - start,
        }
    } else {
        Taken::Written
    }
}

/// `confirmer`'s [`Confirm::acceptance`] of `output`, the screen text read by `screen` only
/// when the confirmer reads it ([`Confirm::reads_screen`]).
fn accept<S: AsRef<str>>(
    confirmer: &mut dyn Confirm,
    output: &[u8],
    screen: impl FnOnce() -> S,
) -> Acceptance {
    if confirmer.reads_screen() {
        confirmer.acceptance(output, screen().as_ref())
    } else {
        confirmer.acceptance(output, "")
    }
}

/// A message the runtime queued behind a running turn, followed until it reaches the model
/// (`Ok`) or is removed from the runtime's queue (`Err(reason)`). No time limit: a turn may
/// run for hours; the session's end fails it (spec 03 §1 step 9, issue 7).
pub struct QueueFollower {
    /// The router's delivery id.
    pub id: u64,
    confirmer: Box<dyn Confirm>,
    next_poll: Instant,
}

impl QueueFollower {
    /// Check again when due (`screen` reads the screen text); `Some` once the message's
    /// fate is known.
    pub fn poll<S: AsRef<str>>(
        &mut self,
        now: Instant,
        screen: impl FnOnce() -> S,
    ) -> Option<Result<(), DeliveryFailure>> {
        if now < self.next_poll {
            return None;
        }
        self.next_poll = now + CONFIRM_POLL;
        match accept(self.confirmer.as_mut(), &[], screen) {
            Acceptance::Accepted => Some(Ok(())),
            Acceptance::Removed(why) => Some(Err(DeliveryFailure::RemovedByRuntime(why))),
            Acceptance::Pending | Acceptance::Queued => None,
        }
    }

    /// When [`QueueFollower::poll`] next needs to run.
    pub fn next_deadline(&self) -> Instant {
        self.next_poll
    }

    /// The follower of its turn, once [`QueueFollower::poll`] said it reached the model.
    pub fn into_turn(self, now: Instant) -> TurnFollower {
        TurnFollower::new(self.id, self.confirmer, now)
    }
}

/// A message the runtime took, followed until the turn that took it ends (issue 32 item 2),
/// as its confirmer reads the runtime's records ([`Confirm::turn_ended`]): a session that
/// dies first reports the message's turn as cut off, and its sender is told.
pub struct TurnFollower {
    /// The router's delivery id.
    pub id: u64,
    confirmer: Box<dyn Confirm>,
    next_poll: Instant,
}

impl TurnFollower {
    /// Follow delivery `id`'s turn with the `confirmer` that accepted it, from `now`.
    pub fn new(id: u64, confirmer: Box<dyn Confirm>, now: Instant) -> TurnFollower {
        TurnFollower {
            id,
            confirmer,
            next_poll: now,
        }
    }

    /// Check again when due (every [`TURN_POLL`]); true once the turn ended.
    pub fn poll(&mut self, now: Instant) -> bool {
        if now < self.next_poll {
            return false;
        }
        self.next_poll = now + TURN_POLL;
        self.confirmer.turn_ended()
    }

    /// One last look when the session ends, due or not.
    pub fn last_look(&mut self) -> bool {
        self.poll(self.next_poll)
    }

    /// The conversation whose records accepted the message, when the runtime's ids are
    /// learned ([`Confirm::conversation`]).
    pub fn conversation(&self) -> Option<String> {
        self.confirmer.conversation()
    }

    /// When [`TurnFollower::poll`] next needs to run.
    pub fn next_deadline(&self) -> Instant {
        self.next_poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enter_waits_for_the_paste_sign_only_where_one_can_come() {
        let t0 = Instant::now();
        let mut d = paste_ok();
        d.on_written(t0);
        assert_eq!(d.next_deadline(), Some(t0 + PASTE_SIGNAL_WAIT));
        let d = paste_ok();
        let mut d = d.without_paste_sign();
        d.on_written(t0);
        assert_eq!(d.next_deadline(), Some(t0 + SETTLE));
        assert_eq!(
            d.poll(t0 + SETTLE, String::new),
            Step::Write(b"\r".to_vec())
        );
    }

    #[test]
    fn a_delivery_is_taken_back_only_before_its_first_byte() {
        // 100 bytes of an earlier message's rest ahead of it, 50 of those written.
        assert_eq!(
            cancel_span((100, 180), 50),
            Taken::NotBegun {
                offset: 50,
                len: 80
            }
        );
        assert_eq!(
            cancel_span((100, 180), 100),
            Taken::NotBegun { offset: 0, len: 80 }
        );
        assert_eq!(
            cancel_span((100, 180), 101),
            Taken::Partial {
                written: 1,
                len: 80
            }
        );
        assert_eq!(cancel_span((100, 180), 180), Taken::Written);
        assert_eq!(cancel_span((100, 180), 500), Taken::Written);
    }

    #[test]
    fn a_delivery_has_begun_from_its_first_written_byte() {
        let s = Span {
            id: 7,
            start: 100,
            end: 180,
        };
        assert!(!s.begun(7, 100), "the bytes ahead of it are not its own");
        assert!(s.begun(7, 101));
        assert!(s.begun(7, 500));
        assert!(
            !s.begun(8, 500),
            "another delivery's span says nothing of it"
        );
        assert_eq!(s.taken(101), cancel_span((100, 180), 101));
    }

    struct Always;
    impl Confirm for Always {
        fn confirmed(&mut self, _: &[u8]) -> bool {
            true
        }
    }

    /// A confirmer whose turn ends at its `n`th look.
    struct EndsAt(u32);
    impl Confirm for EndsAt {
        fn confirmed(&mut self, _: &[u8]) -> bool {
            true
        }
        fn turn_ended(&mut self) -> bool {
            self.0 = self.0.saturating_sub(1);
            self.0 == 0
        }
    }

    #[test]
    fn a_turn_is_looked_at_every_turn_poll_and_once_more_at_the_end() {
        let t0 = Instant::now();
        let mut t = TurnFollower::new(3, Box::new(EndsAt(3)), t0);
        assert!(!t.poll(t0), "first look");
        assert_eq!(t.next_deadline(), t0 + TURN_POLL);
        assert!(!t.poll(t0 + TURN_POLL / 2), "not due: no look");
        assert!(!t.poll(t0 + TURN_POLL), "second look");
        assert!(
            t.last_look(),
            "the last look is taken whenever the session ends"
        );
        // A runtime that records no turns has none in progress.
        assert!(TurnFollower::new(4, Box::new(Always), t0).poll(t0));
    }

    struct Needle(&'static [u8]);
    impl Confirm for Needle {
        fn confirmed(&mut self, output: &[u8]) -> bool {
            output.windows(self.0.len()).any(|w| w == self.0)
        }
    }

    /// A delivery (gated by `gate`) started with `enter`, confirmed when `needle` shows in
    /// the output; its first write is dropped.
    fn start_with_needle(
        gate: Option<Duration>,
        enter: bool,
        needle: &'static [u8],
    ) -> ActiveDelivery {
        ActiveDelivery::start(&delivery(gate), enter, Box::new(Needle(needle)), None, None).0
    }

    fn delivery(gate: Option<Duration>) -> Delivery {
        Delivery {
            id: 7,
            text: "hello".into(),
            agent_ts: None,
            grace: Duration::from_secs(4),
            ready_gate: gate,
            key: None,
        }
    }

    /// Never confirms; says whether the runtime holds the message in its own queue.
    struct Held(bool);
    impl Confirm for Held {
        fn confirmed(&mut self, _: &[u8]) -> bool {
            false
        }
        fn held_by_runtime(&self) -> bool {
            self.0
        }
    }

    /// Ready for Enter once its `n`th ask comes; confirms after.
    struct ReadyAt(std::sync::Arc<std::sync::atomic::AtomicU32>);
    impl Confirm for ReadyAt {
        fn confirmed(&mut self, _: &[u8]) -> bool {
            true
        }
        fn ready_for_enter(&mut self) -> bool {
            use std::sync::atomic::Ordering;
            self.0.fetch_sub(1, Ordering::SeqCst) <= 1
        }
    }

    /// Issue 27 item 5: Enter waits for a confirmer that is still reading the runtime's
    /// records (OpenCode's known messages, read while the paste is drawn), and goes at the
    /// first poll after it is ready — never before, or a message taken meanwhile would be
    /// counted as known and never confirmed.
    #[test]
    fn enter_waits_until_the_confirmer_is_ready_for_it() {
        let asks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(3));
        let t0 = Instant::now();
        let (mut d, _) = ActiveDelivery::start(
            &delivery(None),
            true,
            Box::new(ReadyAt(asks.clone())),
            None,
            None,
        );
        d.on_written(t0);
        d.on_paste_shown(t0);
        assert_eq!(d.poll(t0, String::new), Step::Wait, "not ready: no Enter");
        assert_eq!(
            d.next_deadline(),
            Some(t0 + CONFIRM_POLL),
            "asked again soon"
        );
        assert!(d.is_settling());
        let t1 = t0 + CONFIRM_POLL;
        assert_eq!(d.poll(t1, String::new), Step::Wait, "still not ready");
        let t2 = t1 + CONFIRM_POLL;
        assert_eq!(d.poll(t2, String::new), Step::Write(b"\r".to_vec()));
        assert_eq!(d.poll(t2, String::new), Step::Done(Ok(())));
    }

    /// At the deadline an unconfirmed delivery fails, unless the runtime was seen holding it
    /// in a queue it submits by itself (Gemini CLI waiting for its MCP servers): queued.
    #[test]
    fn a_message_the_runtime_holds_at_the_deadline_is_queued_not_failed() {
        for (held, want_queued) in [(true, true), (false, false)] {
            let t0 = Instant::now();
            let (mut d, _) =
                ActiveDelivery::start(&delivery(None), true, Box::new(Held(held)), None, None);
            d.on_written(t0);
            assert_eq!(
                d.poll(t0 + PASTE_SIGNAL_WAIT, String::new),
                Step::Write(b"\r".to_vec())
            );
            let end = t0 + PASTE_SIGNAL_WAIT + Duration::from_secs(4);
            let step = d.poll(end, String::new);
            if want_queued {
                assert_eq!(step, Step::Queued);
            } else {
                assert!(
                    matches!(
                        step,
                        Step::Done(Err(DeliveryFailure::NoConfirmation { .. }))
                    ),
                    "{step:?}"
                );
            }
        }
    }

    #[test]
    fn pty_paste_settles_then_enter_then_confirms() {
        let t0 = Instant::now();
        let (mut d, bytes) =
            ActiveDelivery::start(&delivery(None), true, Box::new(Needle(b"ok")), None, None);
        assert_eq!(bytes, b"\x1b[200~hello\x1b[201~");
        assert_eq!(
            d.poll(t0, String::new),
            Step::Wait,
            "nothing before the write completes"
        );
        d.on_written(t0);
        assert_eq!(
            d.poll(t0 + Duration::from_millis(299), String::new),
            Step::Wait
        );
        assert_eq!(
            d.poll(t0 + PASTE_SIGNAL_WAIT, String::new),
            Step::Write(b"\r".to_vec())
        );
        assert_eq!(
            d.poll(
                t0 + PASTE_SIGNAL_WAIT + Duration::from_millis(100),
                String::new
            ),
            Step::Wait
        );
        d.on_output(
            b"...ok...",
            t0 + PASTE_SIGNAL_WAIT + Duration::from_millis(150),
        );
        assert_eq!(
            d.poll(
                t0 + PASTE_SIGNAL_WAIT + Duration::from_millis(200),
                String::new
            ),
            Step::Done(Ok(()))
        );
    }

    #[test]
    fn a_held_enter_waits_for_its_hold_however_early_the_paste_shows() {
        let t0 = Instant::now();
        let hold = t0 + Duration::from_millis(150);
        let d = paste_ok();
        let mut d = d.hold_enter_until(hold);
        d.on_written(t0);
        let shown = t0 + Duration::from_millis(20);
        d.on_paste_shown(shown);
        assert_eq!(d.next_deadline(), Some(hold));
        assert_eq!(d.poll(shown, String::new), Step::Wait);
        assert_eq!(
            d.poll(hold - Duration::from_millis(1), String::new),
            Step::Wait
        );
        assert_eq!(d.poll(hold, String::new), Step::Write(b"\r".to_vec()));
        // A hold already past changes nothing: Enter goes on the paste's sign.
        let d = paste_ok();
        let mut d = d.hold_enter_until(t0);
        d.on_written(t0);
        d.on_paste_shown(shown);
        assert_eq!(d.next_deadline(), Some(shown));
        assert_eq!(d.poll(shown, String::new), Step::Write(b"\r".to_vec()));
    }

    /// Gemini CLI takes an Enter right after a paste for a line break (`runtime::gemini`
    /// `ENTER_AFTER_PASTE`): its Enter goes that long after the sign, however often the sign
    /// is seen again, and never later than the wait for a sign that does not come.
    #[test]
    fn enter_goes_the_runtimes_pause_after_the_paste_sign() {
        let t0 = Instant::now();
        let pause = Duration::from_millis(60);
        let mut d = paste_ok().enter_after_sign(pause);
        d.on_written(t0);
        let shown = t0 + Duration::from_millis(4);
        d.on_paste_shown(shown);
        d.on_paste_shown(shown + Duration::from_millis(30));
        assert_eq!(d.next_deadline(), Some(shown + pause));
        assert_eq!(d.poll(shown, String::new), Step::Wait);
        assert_eq!(
            d.poll(shown + pause - Duration::from_millis(1), String::new),
            Step::Wait
        );
        assert_eq!(
            d.poll(shown + pause, String::new),
            Step::Write(b"\r".to_vec())
        );
        let mut d = paste_ok().enter_after_sign(pause);
        d.on_written(t0);
        d.on_paste_shown(t0 + PASTE_SIGNAL_WAIT - Duration::from_millis(10));
        assert_eq!(d.next_deadline(), Some(t0 + PASTE_SIGNAL_WAIT));
    }

    #[test]
    fn a_runtimes_own_enter_retry_replaces_the_default() {
        let t0 = Instant::now();
        let every = Duration::from_millis(400);
        let mut d = paste_ok().enter_retry(every);
        d.on_written(t0);
        assert_eq!(
            d.poll(t0 + PASTE_SIGNAL_WAIT, String::new),
            Step::Write(b"\r".to_vec())
        );
        let t1 = t0 + PASTE_SIGNAL_WAIT;
        assert_eq!(
            d.poll(t1 + every - Duration::from_millis(1), String::new),
            Step::Wait
        );
        assert_eq!(d.poll(t1 + every, String::new), Step::Write(b"\r".to_vec()));
        assert_eq!(d.next_deadline().map(|at| at <= t1 + every * 2), Some(true));
    }

    #[test]
    fn enter_goes_as_soon_as_the_paste_shows() {
        let t0 = Instant::now();
        let mut d = paste_ok();
        d.on_paste_shown(t0);
        assert!(
            !d.is_settling(),
            "no signal counts before the paste is written"
        );
        d.on_written(t0);
        assert!(d.is_settling());
        let shown = t0 + Duration::from_millis(4);
        assert_eq!(d.next_deadline(), Some(t0 + PASTE_SIGNAL_WAIT));
        d.on_paste_shown(shown);
        assert_eq!(d.next_deadline(), Some(shown));
        assert_eq!(d.poll(shown, String::new), Step::Write(b"\r".to_vec()));
        assert!(!d.is_settling());
        assert!(d.paste_was_shown());
        d.on_paste_shown(shown + PASTE_SIGNAL_WAIT);
        assert_eq!(
            d.poll(shown + Duration::from_millis(1), String::new),
            Step::Wait,
            "a late signal changes nothing once Enter has gone"
        );
    }

    /// A paste of `hello` confirmed by the output `ok`.
    fn paste_ok() -> ActiveDelivery {
        start_with_needle(None, true, b"ok")
    }

    /// [`paste_ok`] written now and its Enter sent when the paste signal wait ran out; the
    /// delivery and when Enter went.
    fn entered() -> (ActiveDelivery, Instant) {
        let t0 = Instant::now();
        let mut d = paste_ok();
        d.on_written(t0);
        let t1 = t0 + PASTE_SIGNAL_WAIT;
        assert_eq!(d.poll(t1, String::new), Step::Write(b"\r".to_vec()));
        (d, t1)
    }

    #[test]
    fn output_while_confirming_is_checked_at_once() {
        let (mut d, t1) = entered();
        assert_eq!(d.poll(t1, String::new), Step::Wait);
        let t2 = t1 + Duration::from_millis(10);
        d.on_output(b"ok", t2);
        assert_eq!(d.next_deadline(), Some(t2));
        assert_eq!(
            d.poll(t2, String::new),
            Step::Done(Ok(())),
            "no 100 ms wait"
        );
    }

    #[test]
    fn enter_is_resent_and_the_grace_ends_in_failure() {
        let (mut d, t1) = entered();
        assert_eq!(
            d.poll(t1 + ENTER_RETRY, String::new),
            Step::Write(b"\r".to_vec())
        );
        match d.poll(t1 + Duration::from_secs(4), String::new) {
            Step::Done(Err(e)) => assert!(e.to_string().contains("4000 ms"), "{e}"),
            other => panic!("expected failure, got {other:?}"),
        }
    }

    /// The first message of a wake: Enter, accepted, and the delivery ends in `Gate` — its
    /// sender is answered now; the gate is followed on its own.
    fn gated(
        gate: Duration,
        before: Option<u64>,
        watch: Option<Box<dyn GateWatch>>,
    ) -> (GateFollower, Instant) {
        let t0 = Instant::now();
        let (mut d, _) =
            ActiveDelivery::start(&delivery(Some(gate)), true, Box::new(Always), before, watch);
        d.on_written(t0);
        let t1 = t0 + PASTE_SIGNAL_WAIT;
        assert_eq!(d.poll(t1, String::new), Step::Write(b"\r".to_vec()));
        assert_eq!(
            d.poll(t1, String::new),
            Step::Gate,
            "accepted: the sender is answered before the gate"
        );
        (d.into_gate(t1).0, t1)
    }

    #[test]
    fn ready_gate_waits_for_activity_to_advance() {
        let (mut g, t1) = gated(Duration::from_secs(2), Some(100), None);
        assert_eq!(g.id, 7);
        assert_eq!(g.next_deadline(), t1, "checked at once");
        assert_eq!(g.poll(t1, || Some(100), String::new), None);
        assert_eq!(g.next_deadline(), t1 + GATE_POLL);
        assert_eq!(
            g.poll(t1 + GATE_POLL / 2, || Some(101), String::new),
            None,
            "not due before its poll"
        );
        g.on_output(t1 + GATE_POLL / 2);
        assert_eq!(
            g.poll(t1 + GATE_POLL / 2, || Some(101), String::new),
            Some(Ok(())),
            "output makes it due"
        );
    }

    #[test]
    fn ready_gate_times_out() {
        let (mut g, t1) = gated(Duration::from_secs(1), None, None);
        assert_eq!(g.poll(t1, || None, String::new), None);
        assert_eq!(
            g.poll(t1 + Duration::from_secs(1), || None, String::new),
            Some(Err(GateFailure::ModelIdle))
        );
    }

    /// At the session's end the gate gets one last look: a pending gate stays pending (the
    /// end's own reason is reported), even past its deadline; a passed one passes.
    #[test]
    fn the_last_look_never_blames_the_deadline() {
        let past = Instant::now().checked_sub(Duration::from_secs(10)).unwrap();
        let gate = Some(Duration::from_millis(1));
        let late = || {
            let (mut d, _) =
                ActiveDelivery::start(&delivery(gate), true, Box::new(Always), Some(100), None);
            d.on_written(past);
            assert_eq!(
                d.poll(past + PASTE_SIGNAL_WAIT, String::new),
                Step::Write(b"\r".to_vec())
            );
            assert_eq!(d.poll(past + PASTE_SIGNAL_WAIT, String::new), Step::Gate);
            d.into_gate(past + PASTE_SIGNAL_WAIT).0
        };
        let mut g = late();
        assert_eq!(
            g.last_look(|| Some(100), String::new),
            None,
            "still pending"
        );
        assert_eq!(g.last_look(|| Some(101), String::new), Some(Ok(())));
        assert_eq!(
            late().poll(Instant::now(), || Some(100), String::new),
            Some(Err(GateFailure::ModelIdle)),
            "while the session lives, the deadline counts"
        );
    }

    struct FailsOn(&'static str);
    impl GateWatch for FailsOn {
        fn poll(&mut self, screen: &str) -> GateState {
            if screen.contains(self.0) {
                GateState::Failed(format!("saw {}", self.0))
            } else {
                GateState::Pending
            }
        }
    }

    #[test]
    fn a_runtime_gate_can_fail_early_from_the_screen() {
        let watch: Box<dyn GateWatch> = Box::new(FailsOn("ECONNREFUSED"));
        let (mut g, t1) = gated(Duration::from_secs(120), Some(1), Some(watch));
        assert_eq!(
            g.poll(t1, || Some(5), String::new),
            None,
            "activity alone does not pass a runtime gate"
        );
        assert_eq!(
            g.poll(
                t1 + GATE_POLL,
                || Some(5),
                || "Connection refused (ECONNREFUSED) · retrying"
            ),
            Some(Err(GateFailure::Refused("saw ECONNREFUSED".into())))
        );
    }

    /// Issue 13 item 2: a turn on the screen after Enter confirms a wake's first message at
    /// once (its transcript comes later) when the composer showed its paste before Enter; it
    /// confirms nothing before Enter, after an Enter on the fallback clock, nor any other
    /// delivery, whose turn may be someone else's.
    #[test]
    fn a_turn_on_the_screen_confirms_only_a_wake_s_first_message_after_enter() {
        let t0 = Instant::now();
        let gate = Some(Duration::from_secs(120));
        let start = |gate| {
            let mut d = start_with_needle(gate, true, b"never");
            d.on_written(t0);
            d
        };
        let mut d = start(gate);
        d.on_paste_shown(t0);
        assert!(!d.turn_confirms());
        assert_eq!(d.on_turn_shown(0), Step::Wait, "before Enter");
        assert_eq!(d.poll(t0, String::new), Step::Write(b"\r".to_vec()));
        assert!(d.turn_confirms());
        assert_eq!(d.on_turn_shown(1234), Step::Gate);
        assert_eq!(d.taken_ms(), Some(1234), "taken when the screen showed it");

        let mut blind = start(gate);
        let late = t0 + PASTE_SIGNAL_WAIT;
        assert_eq!(blind.poll(late, String::new), Step::Write(b"\r".to_vec()));
        assert!(!blind.turn_confirms(), "Enter on the fallback clock");
        assert_eq!(blind.on_turn_shown(0), Step::Wait);

        let mut live = start(None);
        live.on_paste_shown(t0);
        live.poll(t0, String::new);
        assert!(!live.turn_confirms());
        assert_eq!(live.on_turn_shown(0), Step::Wait);
    }

    /// A confirmer that answers from a script, one answer per call (last one repeats).
    struct Script(Vec<Acceptance>);
    impl Confirm for Script {
        fn confirmed(&mut self, _: &[u8]) -> bool {
            unreachable!("acceptance is asked")
        }
        fn acceptance(&mut self, _: &[u8], _: &str) -> Acceptance {
            if self.0.len() > 1 {
                self.0.remove(0)
            } else {
                self.0[0].clone()
            }
        }
    }

    /// Issue 31 item 3: the screen's text (every cell of a 50 × 220 screen) is made for a
    /// confirmation poll only when the confirmer reads it: never for the echo agent's
    /// acknowledgement, which is in the output; still for one that reads the screen.
    #[test]
    fn the_screen_text_is_made_only_for_a_confirmer_that_reads_it() {
        use crate::adapter::Adapter;
        let t0 = Instant::now();
        let t1 = t0 + PASTE_SIGNAL_WAIT;
        let echo = crate::runtime::echo::Echo::from_env();
        for (confirmer, reads) in [
            (echo.confirmer(std::path::Path::new("/"), "x", None), 0),
            (
                Box::new(Script(vec![Acceptance::Pending])) as Box<dyn Confirm>,
                1,
            ),
        ] {
            let made = std::cell::Cell::new(0);
            let screen = || {
                made.set(made.get() + 1);
                String::new()
            };
            let (mut d, _) = ActiveDelivery::start(&delivery(None), true, confirmer, None, None);
            d.on_written(t0);
            assert_eq!(d.poll(t1, String::new), Step::Write(b"\r".to_vec()));
            assert_eq!(d.poll(t1, screen), Step::Wait, "pending");
            assert_eq!(made.get(), reads, "screen texts made for a poll");
        }
    }

    /// Issue 7: a message the runtime queued ends the delivery at once as queued (no more
    /// Enter, no "no confirmation" failure); the follower then reports its fate.
    #[test]
    fn runtime_queue_ends_the_delivery_and_is_followed() {
        let t0 = Instant::now();
        let script = Script(vec![
            Acceptance::Pending,
            Acceptance::Queued,
            Acceptance::Queued,
            Acceptance::Accepted,
        ]);
        let (mut d, _) = ActiveDelivery::start(&delivery(None), true, Box::new(script), None, None);
        d.on_written(t0);
        let t1 = t0 + PASTE_SIGNAL_WAIT;
        assert_eq!(d.poll(t1, String::new), Step::Write(b"\r".to_vec()));
        assert_eq!(d.poll(t1, String::new), Step::Wait, "pending");
        assert_eq!(d.poll(t1 + CONFIRM_POLL, String::new), Step::Queued);
        let mut f = d.into_follower(t1 + CONFIRM_POLL);
        assert_eq!(f.id, 7);
        assert_eq!(f.poll(t1 + CONFIRM_POLL, String::new), None, "not due yet");
        assert_eq!(
            f.poll(t1 + CONFIRM_POLL * 2, String::new),
            None,
            "still queued"
        );
        assert_eq!(f.poll(t1 + CONFIRM_POLL * 3, String::new), Some(Ok(())));

        let removed = Script(vec![Acceptance::Removed("gone (cleared_on_cancel)".into())]);
        let (mut d, _) =
            ActiveDelivery::start(&delivery(None), true, Box::new(removed), None, None);
        d.on_written(t0);
        d.poll(t1, String::new);
        assert_eq!(
            d.poll(t1 + CONFIRM_POLL, String::new),
            Step::Done(Err(DeliveryFailure::RemovedByRuntime(
                "gone (cleared_on_cancel)".into()
            )))
        );
    }

    #[test]
    fn pipes_are_confirmed_by_the_write() {
        let written = crate::runtime::WrittenIsConfirmed;
        let (mut d, bytes) =
            ActiveDelivery::start(&delivery(None), false, Box::new(written), None, None);
        assert_eq!(bytes, b"hello\n");
        assert_eq!(d.on_written(Instant::now()), Step::Done(Ok(())));
    }

    /// A pipe runtime that acknowledges on its output (the human inbox writer): the
    /// delivery waits for the acknowledgement, never writes Enter into the pipe, and fails
    /// at the grace without it.
    #[test]
    fn pipes_with_an_ack_wait_for_it_without_enter() {
        let t0 = Instant::now();
        let mut d = start_with_needle(None, false, b"stored");
        assert_eq!(d.on_written(t0), Step::Wait);
        for i in 1..=20 {
            let step = d.poll(t0 + CONFIRM_POLL * i, String::new);
            assert_eq!(step, Step::Wait, "no Enter into a pipe (poll {i})");
        }
        d.on_output(b"stored 1234\n", t0 + CONFIRM_POLL * 21);
        assert_eq!(
            d.poll(t0 + CONFIRM_POLL * 21, String::new),
            Step::Done(Ok(()))
        );

        let mut late = start_with_needle(None, false, b"stored");
        late.on_written(t0);
        let grace = late.grace;
        assert!(matches!(
            late.poll(t0 + grace, String::new),
            Step::Done(Err(_))
        ));
    }
}

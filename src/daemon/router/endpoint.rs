//! Per-identity delivery queues (spec 03 §1 steps 8–10, spec 05 §2): deliveries to one
//! identity are serialized; a message to an asleep agent wakes it and rides the wake as its
//! first message; later ones wait and go live.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::decide::{head_step, Head, HeadStep, Presence};
use super::{Router, RouterMsg};
use crate::daemon::lifecycle::ModeRequest;
use crate::daemon::reply::{ReplyTo, SendReplyTo};
use crate::daemon::route::{self, Prepared, Refusal, SendInput};
use crate::envelope;
use crate::markers::Flag;
use crate::names::Identity;
use crate::protocol::{Code, CompactOutcome, CompactReply, Failure, Reply, WakeReply};
use crate::runtime::RuntimeKind;
use crate::session::handle::{Cause, Delivery, SessionCmd};

/// A send in flight, from arrival to its delivery.log line. `P` is what it holds of its
/// prepared message: nothing while the worker prepares it ([`PendingSend`]), always the
/// message while it is queued ([`QueuedSend`]), and maybe when it is finished
/// ([`SendRecord`]: a send refused during preparation has none).
pub struct SendJob<P> {
    pub(crate) id: u64,
    pub(crate) input: SendInput,
    pub(crate) prepared: P,
    pub(crate) reply: SendReplyTo,
    pub(crate) started: Instant,
    /// Set when this message rides a wake as its first message.
    pub(crate) woke: bool,
    /// The runtime kind of the endpoint (decided when queued).
    pub(crate) kind: RuntimeKind,
    /// For a task drained from an ephemeral queue: its file, removed once it is delivered.
    pub(crate) drained: Option<PathBuf>,
    /// For a `confirm-send` of a message the origin guard held: its claimed hold, deleted
    /// once the send is accepted and put back when it fails (spec 10 §2).
    pub(crate) hold: Option<crate::origin::Claim>,
    /// How long the sender waits (`timeout_ms`, else `IAPEER_SEND_TIMEOUT_MS`); the
    /// deadline is `started + timeout` (a [`super::Timer::SendDeadline`]).
    pub(crate) timeout: Duration,
    /// Its deadline passed while the session held it: the session was told to take it back,
    /// and its failure is answered as a timeout.
    pub(crate) timed_out: bool,
    /// The message id: the sender's (`input.id`), else one the router made
    /// ([`crate::msgids`]).
    pub(crate) msg_id: String,
    /// Its agent was mid-turn and its sender chose `interrupt`: the turn was interrupted
    /// before it went in ([`super::if_busy`]).
    pub(crate) interrupted: bool,
    /// When the runtime took it, epoch ms, as the session's evidence says
    /// (`EventKind::Delivered`'s `taken_ms`): its delivery.log line's moment.
    pub(crate) taken_ms: Option<u64>,
}

/// A send whose preparation runs on a worker thread: it holds the ticket it shares with
/// that preparation ([`route::PrepTicket`]).
pub type PendingSend = SendJob<route::PrepTicket>;
/// A prepared send in an identity's queue.
pub type QueuedSend = SendJob<Prepared>;
/// A send being finished (its delivery.log line and answer).
pub type SendRecord = SendJob<Option<Prepared>>;

impl<P> SendJob<P> {
    /// The same send holding `prepared` instead.
    fn holding<Q>(self, prepared: Q) -> SendJob<Q> {
        self.map_prepared(|_| prepared)
    }

    /// The same send holding `f` of what it held.
    fn map_prepared<Q>(self, f: impl FnOnce(P) -> Q) -> SendJob<Q> {
        SendJob {
            id: self.id,
            input: self.input,
            prepared: f(self.prepared),
            reply: self.reply,
            started: self.started,
            woke: self.woke,
            kind: self.kind,
            drained: self.drained,
            hold: self.hold,
            timeout: self.timeout,
            timed_out: self.timed_out,
            msg_id: self.msg_id,
            interrupted: self.interrupted,
            taken_ms: self.taken_ms,
        }
    }
}

impl PendingSend {
    /// Refused before it was prepared.
    pub(crate) fn unprepared(self) -> SendRecord {
        self.holding(None)
    }
}

impl QueuedSend {
    /// Leaving the queue to be finished.
    pub(crate) fn record(self) -> SendRecord {
        self.map_prepared(Some)
    }

    /// Its sender and id, as the message-id ledger keys it.
    pub(crate) fn key(&self) -> crate::msgids::MsgKey {
        crate::msgids::MsgKey {
            from: self.prepared.caller.to_string(),
            id: self.msg_id.clone(),
        }
    }
}

/// A wake with no message (`attach`, `iapeer <runtime>`, `wake`).
pub struct WakeJob {
    pub(crate) reply: ReplyTo,
    pub(crate) mode: ModeRequest,
    /// Hand the connection to the session once ready.
    pub(crate) attach: bool,
    /// For fresh wakes: the old session was told to end or the new one was launched, so
    /// the next ready session is the one this job asked for.
    pub(crate) launched: bool,
    pub(crate) started: Instant,
}

/// A compaction request (`compact`).
pub struct CompactJob {
    pub(crate) id: u64,
    pub(crate) reply: ReplyTo,
}

/// Queued work for one identity.
pub enum Job {
    /// A message.
    Send(Box<QueuedSend>),
    /// A wake without a message.
    Wake(WakeJob),
    /// Compact the conversation (after any delivery ahead of it).
    Compact(CompactJob),
}

impl Job {
    /// The job as [`head_step`] sees it.
    pub(crate) fn view(&self) -> Head {
        match self {
            Job::Send(j) => Head::Send(j.kind),
            Job::Compact(_) => Head::Compact,
            Job::Wake(w) => Head::Wake {
                mode: w.mode,
                launched: w.launched,
            },
        }
    }

    /// Its requester is known to have stopped waiting ([`ReplyTo::abandoned`]).
    pub(crate) fn abandoned(&self) -> bool {
        match self {
            Job::Send(j) => j.reply.abandoned(),
            Job::Wake(w) => w.reply.abandoned(),
            Job::Compact(c) => c.reply.abandoned(),
        }
    }

    /// Fail the job with `code` and `error` (the send's delivery.log line is written by
    /// [`Router::finish_send`]; this is for paths that bypass it, like shutdown).
    pub(crate) fn fail(self, code: Code, error: String) {
        match self {
            Job::Send(j) => j.reply.finish(Err(Failure::new(code, &error))),
            Job::Wake(w) => w.reply.finish(Reply::failure(code, &error)),
            Job::Compact(c) => c.reply.finish(Reply::failure(code, &error)),
        }
    }
}

/// Queue state of one identity.
#[derive(Default)]
pub struct Endpoint {
    pub(crate) queue: VecDeque<Job>,
    /// The delivery id handed to the session and not yet answered (the queue head).
    pub(crate) inflight: Option<u64>,
}

impl Router {
    /// Start a send: its preparation (registry, validation, attachment copies) runs on a
    /// preparation pool (the one for sends with attachments, or the one for sends without,
    /// [`Router::prep_pool`]) and comes back as [`RouterMsg::Prepared`]. `timeout` is how long the
    /// sender waits (`None`: `IAPEER_SEND_TIMEOUT_MS`); its deadline is armed here.
    pub(crate) fn begin_send(
        &mut self,
        input: SendInput,
        reply: impl Into<SendReplyTo>,
        timeout: Option<Duration>,
    ) {
        self.begin_send_of(input, reply.into(), timeout, None)
    }

    /// [`Router::begin_send`] of a held message that `confirm-send` claimed (`hold`): the
    /// origin guard does not look at it again.
    pub(crate) fn begin_send_of(
        &mut self,
        input: SendInput,
        reply: SendReplyTo,
        timeout: Option<Duration>,
        hold: Option<crate::origin::Claim>,
    ) {
        crate::daemon::test_hooks::on_router_send(&input.args.to);
        // A held message was resolved when it was held; one from another host is for a peer
        // of this host (never relayed on).
        let resolve = hold.is_none() && !matches!(input.caller, route::Caller::Remote { .. });
        if resolve {
            match self.remote_target(&input.args.to) {
                Ok(None) => {}
                Ok(Some((name, host))) => {
                    let own = self.remote.hub.as_ref().and_then(|h| h.view()).map(|v| v.0);
                    if own.as_deref() != Some(host.as_str()) {
                        return self.begin_remote(input, reply, timeout, (name, host));
                    }
                    // `name@<this host>`: the local send of `name`.
                    let mut input = input;
                    input.args.to = name;
                    return self.begin_local_send(input, reply, timeout, hold);
                }
                Err(f) => return self.refuse_remote(input, reply, f),
            }
        }
        self.begin_local_send(input, reply, timeout, hold)
    }

    /// [`Router::begin_send_of`] of a send to a peer of this host.
    fn begin_local_send(
        &mut self,
        input: SendInput,
        reply: SendReplyTo,
        timeout: Option<Duration>,
        hold: Option<crate::origin::Claim>,
    ) {
        let id = self.next_id();
        let msg_id = input.args.id.clone().unwrap_or_else(crate::msgids::new_id);
        let timeout = timeout.unwrap_or(self.cfg.send_timeout);
        let guard = (self.cfg.origin.enabled && hold.is_none()).then_some(self.cfg.origin);
        let deadline = self.now.at + timeout;
        self.set_timer(deadline, super::Timer::SendDeadline(id));
        let paths = self.paths.clone();
        let tx = self.tx.clone();
        let input_for_job = input.clone();
        let ticket = route::PrepTicket::default();
        let bounds = route::PrepBounds {
            attachments: crate::attachment_source::Limits {
                max_bytes: self.cfg.attachment_max_bytes,
                deadline,
            },
            ticket: ticket.clone(),
        };
        // The line is what can stall the preparation: the sender's files for a send with
        // attachments, the target's folder for one without (`fair_pool::PLAIN_PREP_LIMITS`).
        let info = crate::daemon::fair_pool::JobInfo {
            sender: match input.args.attachments.is_empty() {
                true => crate::daemon::fair_pool::target_line(&input.args.to),
                false => input.caller.claimed(),
            },
            attachments: input.args.attachments.clone(),
        };
        self.queues.prepare(
            id,
            SendJob {
                id,
                input,
                prepared: ticket,
                reply,
                started: self.now.at,
                woke: false,
                kind: RuntimeKind::Agent,
                drained: None,
                hold,
                timeout,
                timed_out: false,
                msg_id,
                interrupted: false,
                taken_ms: None,
            },
        );
        let pool = self.prep_pool(info.attachments.is_empty());
        let spawned = pool.run(id, info, move || {
            let ts = crate::clock::envelope_ts(&crate::clock::now_local());
            // A panic here must still answer the sender (the panic hook logs it).
            let result = crate::daemon::guard::catch(|| {
                route::prepare(&paths, &input_for_job, ts, guard, &bounds)
            })
            .unwrap_or_else(|panic| Err(route::prep_panicked(&panic)));
            let _ = tx.send(RouterMsg::Prepared {
                job: id,
                result: Box::new(result),
            });
        });
        match spawned {
            Ok(()) => self.arm_prep_check(),
            Err(e) => {
                if let Some(job) = self.queues.take_preparing(id) {
                    self.finish_send(
                        job.unprepared(),
                        Refusal {
                            code: Code::Internal,
                            error: format!("cannot start a worker thread: {e}"),
                        },
                    );
                }
            }
        }
    }

    /// The pool that prepares a send: sends without attachments (`plain`) have their own,
    /// so they never wait behind a read of someone's attachment that does not return; its
    /// lines are the targets, so a peer whose folder does not answer holds only its share.
    pub(crate) fn prep_pool(&self, plain: bool) -> &crate::daemon::fair_pool::FairPool {
        if plain {
            &self.prep_plain
        } else {
            &self.prep
        }
    }

    /// Look at the preparation pools again when one of their jobs turns stalled while
    /// another waits (its capacity for other senders comes back then,
    /// [`crate::daemon::fair_pool`]): a [`super::Timer::PrepCheck`] unless one is set.
    pub(crate) fn arm_prep_check(&mut self) {
        if self.timers.any(|t| matches!(t, super::Timer::PrepCheck)) {
            return;
        }
        let next = [self.prep.next_check(), self.prep_plain.next_check()];
        if let Some(at) = next.into_iter().flatten().min() {
            self.set_timer(at, super::Timer::PrepCheck);
        }
    }

    /// [`super::Timer::PrepCheck`]: start what the pools now allow, and look again later if
    /// need be.
    pub(crate) fn on_prep_check(&mut self) {
        let next = [self.prep.recheck(), self.prep_plain.recheck()];
        if let Some(at) = next.into_iter().flatten().min() {
            self.set_timer(at, super::Timer::PrepCheck);
        }
    }

    pub(crate) fn on_prepared(&mut self, id: u64, result: Result<Prepared, Refusal>) {
        let Some(mut job) = self.queues.take_preparing(id) else {
            return;
        };
        let prepared = match result {
            Ok(p) => p,
            Err(r) => return self.finish_send(job.unprepared(), r),
        };
        self.note_worker_send(&prepared.caller);
        if let Some(r) = self.storm_check(&prepared) {
            return self.finish_send(job.holding(Some(prepared)), r);
        }
        let endpoint = prepared.endpoint.clone();
        if job.timed_out {
            let r = super::deadline::timeout_refusal(
                &endpoint,
                job.timeout,
                "its preparation (registry, attachments) took too long; message NOT delivered",
            );
            return self.finish_send(job.holding(Some(prepared)), r);
        }
        job.kind = match &prepared.kind {
            Ok(kind) => *kind,
            Err(e) => {
                let r = Refusal {
                    code: Code::Offline,
                    error: format!(
                        "peer \"{}\" ({}) cannot be reached: {e}",
                        prepared.endpoint.personality, prepared.endpoint.runtime
                    ),
                };
                return self.finish_send(job.holding(Some(prepared)), r);
            }
        };
        self.note_origin(&prepared, true);
        if job.kind == RuntimeKind::Agent && prepared.ephemeral {
            let job = job.holding(prepared);
            return match self.earlier_fate(&job) {
                Some(fate) => self.answer_again(job, fate),
                None => self.enqueue_task(job),
            };
        }
        self.queues
            .endpoint_or_new(&endpoint)
            .queue
            .push_back(Job::Send(Box::new(job.holding(prepared))));
        self.pump(&endpoint);
    }

    /// Move the head of `identity`'s queue forward as far as it can go now: gather the
    /// facts, ask [`head_step`], carry out its answer. A send whose id was begun earlier
    /// there is answered from the message-id ledger instead, never begun again. Nothing
    /// moves once the daemon is shutting down.
    pub(crate) fn pump(&mut self, identity: &Identity) {
        if self.shutdown.is_some() {
            return;
        }
        while self.pump_once(identity) == Pump::Again {}
    }

    /// One turn of [`Router::pump`]: what settles the head before any decision, then
    /// [`head_step`]'s answer carried out by the method for that step.
    fn pump_once(&mut self, identity: &Identity) -> Pump {
        let Some(ep) = self.queues.endpoint(identity) else {
            return Pump::Done;
        };
        if ep.inflight.is_some() {
            return Pump::Done;
        }
        let Some(head) = ep.queue.front() else {
            self.queues.remove_endpoint(identity);
            return Pump::Done;
        };
        if head.abandoned() {
            // Its requester gave up (Ctrl-C): nothing was begun for it, begin nothing.
            self.drop_abandoned_head(identity);
            return Pump::Again;
        }
        if self.head_answered_earlier(identity) || !self.apply_if_busy(identity) {
            return Pump::Again;
        }
        let Some(head) = self.head_of(identity) else {
            return Pump::Done;
        };
        match head_step(head.view(), self.presence(identity)) {
            step @ (HeadStep::Deliver | HeadStep::StartCompact) => {
                self.hand_head_over(identity, step)
            }
            HeadStep::AnswerLive => self.answer_wake(identity),
            HeadStep::Replace => self.replace_then_launch(identity),
            HeadStep::Wait => Pump::Done,
            HeadStep::HoldForRevive => self.hold_head_for_revive(identity),
            HeadStep::Launch(mode) => self.launch_head(identity, mode),
            HeadStep::RefuseStopped => {
                self.fail_head(identity, route::stopped_refusal(identity));
                Pump::Again
            }
            HeadStep::RefuseParked => {
                self.fail_head(identity, route::parked_refusal(identity));
                Pump::Again
            }
            HeadStep::NothingToCompact => self.answer_nothing_to_compact(identity),
        }
    }

    fn head_of(&self, identity: &Identity) -> Option<&Job> {
        self.queues.head(identity)
    }

    /// Where `identity` is, for [`head_step`]: its live session's state, launching, parked,
    /// or asleep (markers read from disk only then).
    fn presence(&self, identity: &Identity) -> Presence {
        if let Some(s) = self.live.get(identity) {
            return Presence::Session(s.live());
        }
        if self.live.is_launching(identity) {
            return Presence::Launching;
        }
        let m = self.markers(identity);
        let stopped = m.is_set(Flag::Stopped);
        if !stopped && self.is_parked(identity) {
            Presence::Parked
        } else {
            Presence::Asleep {
                stopped,
                resumable: m.is_set(Flag::IdleReaped),
            }
        }
    }

    /// [`HeadStep::Deliver`] (the head send) and [`HeadStep::StartCompact`] (the head
    /// compact): the job goes to the live session and is in flight.
    fn hand_head_over(&mut self, identity: &Identity, step: HeadStep) -> Pump {
        let Some(s) = self.live.get(identity) else {
            return Pump::Done;
        };
        let (cmd, id) = match (step, self.head_of(identity)) {
            (HeadStep::Deliver, Some(Job::Send(job))) => {
                (SessionCmd::Deliver(self.live_delivery(job)), job.id)
            }
            (HeadStep::StartCompact, Some(Job::Compact(c))) => (SessionCmd::Compact(c.id), c.id),
            _ => return Pump::Done, // a step that does not fit the head (cannot happen)
        };
        s.handle.send(cmd);
        self.set_inflight(identity, id);
        Pump::Done
    }

    /// [`HeadStep::AnswerLive`]: the head wake is answered (or attached) from the live
    /// session, and the queue goes on.
    fn answer_wake(&mut self, identity: &Identity) -> Pump {
        let (Some(Job::Wake(_)), Some(s)) = (self.head_of(identity), self.live.get(identity))
        else {
            return Pump::Done;
        };
        let (handle, pid) = (s.handle.clone(), s.pid);
        if let Some(Job::Wake(w)) = self
            .queues
            .endpoint_mut(identity)
            .and_then(|e| e.queue.pop_front())
        {
            // `woke`: this job had to start the session (it was asleep).
            let body = WakeReply {
                identity: identity.to_string(),
                woke: w.launched,
                pid,
            };
            if w.attach {
                w.reply.attach(body, handle)
            } else {
                w.reply.finish(body)
            }
        }
        Pump::Again
    }

    /// [`HeadStep::Replace`]: the old session is told to end; the head wake launches the
    /// new one when it has.
    fn replace_then_launch(&mut self, identity: &Identity) -> Pump {
        if !matches!(self.head_of(identity), Some(Job::Wake(_))) || !self.live.is_live(identity) {
            return Pump::Done;
        }
        if let Some(Job::Wake(w)) = self
            .queues
            .endpoint_mut(identity)
            .and_then(|e| e.queue.front_mut())
        {
            w.launched = true;
        }
        if let Some(s) = self.live.get_mut(identity) {
            s.handle.send(SessionCmd::Kill(Cause::Replaced));
            s.state.end(Cause::Replaced);
        }
        Pump::Done
    }

    /// [`HeadStep::HoldForRevive`]: the head send waits for the always-on peer's revive.
    fn hold_head_for_revive(&mut self, identity: &Identity) -> Pump {
        let Some(Job::Send(job)) = self.head_of(identity) else {
            return Pump::Done;
        };
        let (id, started) = (job.id, job.started);
        self.ensure_revive_timer(identity, id, started);
        Pump::Done
    }

    /// [`HeadStep::NothingToCompact`]: no conversation to compact (never started, crashed or
    /// ended on purpose): the head is answered so, and the queue goes on.
    fn answer_nothing_to_compact(&mut self, identity: &Identity) -> Pump {
        if let Some(Job::Compact(c)) = self
            .queues
            .endpoint_mut(identity)
            .and_then(|e| e.queue.pop_front())
        {
            c.reply.finish(CompactReply {
                identity: identity.to_string(),
                outcome: CompactOutcome::NothingToCompact,
                resumed: false,
            });
        }
        Pump::Again
    }

    /// [`HeadStep::Launch`]: a session is launched for the head; a refusal fails the head and
    /// the queue goes on.
    fn launch_head(&mut self, identity: &Identity, mode: ModeRequest) -> Pump {
        match self.launch_for_head(identity, mode) {
            Ok(()) => Pump::Done,
            Err(refusal) => {
                self.fail_head(identity, refusal);
                Pump::Again
            }
        }
    }

    fn set_inflight(&mut self, identity: &Identity, id: u64) {
        if let Some(ep) = self.queues.endpoint_mut(identity) {
            ep.inflight = Some(id);
        }
    }

    /// The delivery of `job` into a live session.
    fn live_delivery(&self, job: &QueuedSend) -> Delivery {
        delivery_for(job, None, &self.cfg, None)
    }

    /// Fail the queue head with a refusal, writing its log line.
    /// Take the queue head whose requester gave up out of the queue, before anything is
    /// begun for it; a send gets its `delivery.log` line saying so.
    fn drop_abandoned_head(&mut self, identity: &Identity) {
        let Some(job) = self
            .queues
            .endpoint_mut(identity)
            .and_then(|e| e.queue.pop_front())
        else {
            return;
        };
        let error = "the sender stopped waiting (its connection closed) before the message was \
                     begun; message NOT delivered"
            .to_string();
        match job {
            Job::Send(j) => self.finish_send(
                j.record(),
                Refusal {
                    code: Code::Timeout,
                    error,
                },
            ),
            other => {
                log::info!("{identity}: a wake or compaction whose requester left was dropped");
                other.fail(Code::Timeout, error);
            }
        }
    }

    pub(crate) fn fail_head(&mut self, identity: &Identity, refusal: Refusal) {
        let Some(ep) = self.queues.endpoint_mut(identity) else {
            return;
        };
        ep.inflight = None;
        match ep.queue.pop_front() {
            Some(Job::Send(job)) => self.finish_send(job.record(), refusal),
            Some(Job::Wake(w)) => w.reply.finish(refusal),
            Some(Job::Compact(c)) => c.reply.finish(refusal),
            None => {}
        }
    }
}

/// Confirmation grace of a message with attachments (the agent may read them first).
const ATTACHMENT_GRACE: std::time::Duration = std::time::Duration::from_secs(60);
/// Confirmation grace of a wake's first message: an agent that has just drawn its composer
/// may take its input slowly (in CI on a loaded 2-core machine Claude Code 2.1.332 still
/// showed a woken peer's pasted message in its composer 4 s and three Enters later, and the
/// wake was reported failed). Enter is re-sent meanwhile; the ready gate bounds the wake.
const FIRST_MESSAGE_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// Build the delivery of a queued send on its endpoint's runtime kind: the agent form for
/// agent runtimes (prefixed with `initial_prompt` and a blank line for the first message of a
/// fresh session) passed through [`crate::term::paste_text`] (it is pasted into a pty), the
/// wire form for router runtimes (written to a pipe, byte for byte). It carries the send's
/// message key, which the session records as begun before its first byte.
pub(crate) fn delivery_for(
    job: &QueuedSend,
    initial_prompt: Option<&str>,
    cfg: &crate::config::Config,
    ready_gate: Option<std::time::Duration>,
) -> Delivery {
    let (id, p, kind, key) = (job.id, &job.prepared, job.kind, Some(job.key()));
    let grace = if !p.envelope.attachments.is_empty() {
        cfg.liveness_grace.max(ATTACHMENT_GRACE)
    } else if ready_gate.is_some() {
        cfg.liveness_grace.max(FIRST_MESSAGE_GRACE)
    } else {
        cfg.liveness_grace
    };
    match kind {
        RuntimeKind::Router => Delivery {
            id,
            text: envelope::encode_wire(&p.envelope),
            agent_ts: None,
            grace,
            ready_gate: None,
            key,
        },
        RuntimeKind::Agent => {
            let now = crate::clock::now_local();
            let rendered = envelope::render_agent(&p.envelope, &now);
            let agent_ts = p
                .envelope
                .ts
                .as_deref()
                .map(|ts| crate::clock::render_agent_ts(ts, &now));
            let text = match initial_prompt.map(str::trim_end).filter(|s| !s.is_empty()) {
                Some(seed) => format!("{seed}\n\n{rendered}"),
                None => rendered,
            };
            // Exactly what the paste carries (controls shown as stand-ins), so confirmation
            // searches the transcript for what the agent really received.
            let text = crate::term::paste_text(&text).into_owned();
            Delivery {
                id,
                text,
                agent_ts,
                grace,
                ready_gate,
                key,
            }
        }
    }
}

/// After one turn of [`Router::pump`]: look at the head again, or stop until something
/// changes (a delivery in flight, a launch, a wait, an empty queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pump {
    Again,
    Done,
}

//! The router thread (spec 02 §1, spec 03, spec 05): owns the routing state — live
//! sessions, session tokens, per-identity delivery queues, always-on restart state — and
//! reacts to requests, session events and ticks. It never waits on a session: long
//! operations are started and finished by later events.

mod always_on;
mod approvals;
mod broker;
mod confirm;
mod cut;
mod deadline;
mod decide;
mod endpoint;
mod ephemeral;
mod events;
mod followup;
mod ids;
mod if_busy;
pub mod inbox;
mod launch;
mod launch_plan;
mod limits;
mod notices;
mod now;
mod ops;
mod origin;
mod remote;
mod report;
mod revive;
mod send_end;
mod sess_state;
mod state;
mod stop;
mod storms;
mod tick;
mod topics;
mod verbs;

use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, Sender};

use super::lifecycle::Backoff;
use super::mcp::{CallerCreds, SendArgs};
use super::reply::{ReplyTo, SendReplyTo};
use super::route::{Caller, Prepared, Refusal, SendInput};
use crate::config::Config;
use crate::eventbus::{Bus, TappedLog};
use crate::eventlog::{Event, EventLog};
use crate::logview::Source;
use crate::names::Identity;
use crate::paths::Paths;
use crate::protocol::{Code, Failure, Pong, Request};
use crate::runtime::{Adapter, RuntimeKind, WakeMode};
use crate::session::handle::{Cause, EventSink, SessionEvent, SessionHandle, SessionStatus};
use decide::Live;
pub use inbox::RouterTx;
use launch::Spawned;
use now::Now;
use sess_state::SessState;
use state::{LiveSessions, Queues, Supervisor, Timers};

/// A message for the router thread.
pub enum RouterMsg {
    /// A control-socket request.
    Control {
        /// The request.
        req: Box<Request>,
        /// Where to answer.
        reply: ReplyTo,
    },
    /// An MCP `send_to_peer` call.
    Mcp {
        /// Caller credentials from the HTTP request.
        creds: CallerCreds,
        /// Tool arguments.
        args: SendArgs,
        /// Where to answer: the send's outcome, its failure's code included.
        reply: SendReplyTo,
    },
    /// An MCP client listed the tools (its connection is up).
    ToolsListed {
        /// Its credentials (token and identity header).
        creds: CallerCreds,
    },
    /// A send's preparation (worker thread) finished.
    Prepared {
        /// The job id.
        job: u64,
        /// The prepared send or its refusal.
        result: Box<Result<Prepared, Refusal>>,
    },
    /// A launcher thread finished the blocking part of a launch.
    Launched {
        /// The identity it launched.
        identity: Identity,
        /// The new session's id.
        session: u64,
        /// The started session, or why it did not start.
        result: Box<Result<Spawned, Refusal>>,
    },
    /// The supervise tick.
    Tick,
    /// A send of the fleet API (`POST /fleet/v1/send`): the control request's send with its
    /// own `path` (`fleet`, or `ui` from the operator's page).
    Send {
        /// The send, as [`SendInput::of_cli_request`] makes it, its path set.
        input: Box<SendInput>,
        /// Where to answer.
        reply: ReplyTo,
    },
    /// A session thread reported something (through the [`EventSink`] the router gives each
    /// session: one inbox for everything the router hears).
    Session(SessionEvent),
    /// A lifecycle event another daemon thread saw (the team changed: `ev=peers`,
    /// [`crate::daemon::peers_watch`]): logged.
    Lifecycle(crate::eventlog::Event),
    /// A federation thread's news (issue 28): an inbox entry to route, or a remote send's
    /// outcome.
    Federation(crate::daemon::federation::hub::Event),
    /// End every session and report on `done` when they are gone.
    Shutdown {
        /// Signalled when shutdown work is complete.
        done: Sender<()>,
    },
}

/// Static facts the router reports (`ping`, `status`). `Debug` hides the fleet's secret.
#[derive(Clone)]
pub struct DaemonInfo {
    /// `http://127.0.0.1:<port>/mcp`.
    pub tcp: String,
    /// The control socket path.
    pub sock: String,
    /// The bound loopback HTTP port.
    pub port: u16,
    /// Daemon start time, epoch ms.
    pub started_ms: u64,
    /// Threads restarted after a panic (the HTTP server's), for `status`.
    pub restarts: crate::daemon::guard::Restarts,
    /// The fleet API's secret (`IAPEER_BEARER_TOKEN` when set, else the fleet token), handed
    /// to the router-runtime packages that call the fleet API
    /// ([`crate::runtime::router::handed_bearer`]). `None`: the daemon has none.
    pub fleet_secret: Option<String>,
}

impl std::fmt::Debug for DaemonInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonInfo")
            .field("tcp", &self.tcp)
            .field("sock", &self.sock)
            .field("port", &self.port)
            .field("started_ms", &self.started_ms)
            .field("restarts", &self.restarts)
            .field("fleet_secret", &self.fleet_secret.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// One live session as the router tracks it.
pub(crate) struct Sess {
    pub id: u64,
    pub identity: Identity,
    pub handle: SessionHandle,
    pub pid: u32,
    pub kind: RuntimeKind,
    /// Booting, ready, boot failed or ending.
    pub state: SessState,
    pub woke_at_ms: u64,
    pub started: Instant,
    pub last_delivery_ms: Option<u64>,
    pub attached: usize,
    pub token: String,
    pub status: Option<SessionStatus>,
    pub mode: WakeMode,
    /// Its MCP client listed the tools.
    pub mcp_up: bool,
    /// The peer is an ephemeral worker (spec 05 §6): wound down, never idle-slept.
    pub ephemeral: bool,
    /// Deliveries whose turn the session reported cut off as it ended (issue 32 item 2).
    pub cut: Vec<u64>,
}

impl Sess {
    /// What the session can take now (see [`Live`]).
    pub fn live(&self) -> Live {
        self.state.live()
    }

    /// It became ready (`list` shows it live; see [`SessState::is_ready`]).
    pub fn is_ready(&self) -> bool {
        self.state.is_ready()
    }
}

/// Restart state of one always-on identity.
#[derive(Default)]
pub(crate) struct AlwaysOn {
    pub backoff: Backoff,
    pub parked: bool,
    /// `new` ended it on purpose: start it again as soon as it is gone.
    pub restart_on_exit: bool,
}

/// Deferred work the router schedules for itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// An always-on peer is due for a restart.
    Restart(Identity),
    /// A send to a restarting always-on peer gives up.
    Revive { identity: Identity, job: u64 },
    /// Shutdown stops waiting for deliveries in flight to finish (`SHUTDOWN_DRAIN`): those
    /// still unanswered are cancelled and their sessions ended.
    ShutdownDrain,
    /// Shutdown gives up waiting for sessions.
    ShutdownDeadline,
    /// A reply waiting for sessions to end is sent anyway.
    GoneDeadline(u64),
    /// Send `job` reaches its deadline (`deadline.rs`).
    SendDeadline(u64),
    /// Check pending approvals for their deadline and for a hook that left
    /// (`approvals.rs`).
    ApprovalSweep,
    /// Write the topic lists that deliveries changed (`topics.rs`).
    TopicFlush,
    /// A preparation may have turned stalled while others wait (`endpoint.rs`).
    PrepCheck,
    /// A turn refused for a limit is due to be taken up again (`limits.rs`).
    LimitResume(Identity),
    /// A send to another host reaches its deadline (`remote.rs`), by its ticket.
    RemoteDeadline(String),
    /// A send kept for a host that was offline is given up (`remote.rs`), by its ticket.
    RemoteKept(String),
}

/// The router's state.
pub struct Router {
    paths: Paths,
    cfg: Config,
    info: DaemonInfo,
    /// Live sessions, their id and token indexes, replies waiting for some to end.
    live: LiveSessions,
    /// Delivery queues and the sends being prepared.
    queues: Queues,
    /// Always-on restart state.
    supervisor: Supervisor,
    /// The router's own deferred work.
    timers: Timers,
    next_id: u64,
    tx: RouterTx,
    /// What each session thread sends its events to: `tx`, wrapped.
    sessions: EventSink,
    shutdown: Option<Sender<()>>,
    /// `lifecycle.log`, `delivery.log` and `exits.log` (written by session threads), each
    /// line also published on the daemon's event bus (spec 10 §1).
    lifecycle_log: TappedLog,
    delivery_log: TappedLog,
    exits_log: TappedLog,
    /// The time of the current turn, read once by [`Router::run`] before each message,
    /// session event and timer check; nothing else in the router reads the clock.
    now: Now,
    /// Message counts of non-human pairs, and the paused ones.
    storms: crate::daemon::storm::StormGuard,
    /// Workers that prepare sends with attachments (registry reads, attachment copies) off
    /// the router thread, shared fairly between senders.
    prep: crate::daemon::fair_pool::FairPool,
    /// Workers that prepare sends without attachments, so that these never wait behind a
    /// stuck attachment read.
    prep_plain: crate::daemon::fair_pool::FairPool,
    /// The notice board (spec 10 §3), kept in `state/iapeer/notices.json`.
    notices: crate::notices::Board,
    /// Permission prompts of gated peers waiting for a human (spec 10 §4); in memory only,
    /// so a restart forgets them and their hooks deny.
    approvals: broker::Broker<approvals::Asker, ReplyTo>,
    /// Answers to prompts on agents' screens whose `approve`/`deny` waits for the session to
    /// say what became of them.
    confirming: confirm::Confirmations<approvals::Held>,
    /// A [`Timer::ApprovalSweep`] is set.
    sweep_armed: bool,
    /// Topic lists noted by deliveries, written once the router has caught up.
    topics: topics::TopicBook,
    /// The message ids begun per recipient (shared with the session threads, which record
    /// each before its first byte).
    ids: std::sync::Arc<crate::msgids::Ledger>,
    /// Turns refused for a rate or usage limit that iapeer will take up again (issue 32
    /// item 3); in memory only.
    limited: std::collections::HashMap<Identity, limits::Limited>,
    /// Sends across hosts (issue 28), when the daemon runs the federation.
    remote: remote::Remote,
}

impl Router {
    /// Build the router. `tx` must be the sender of the channel `run` will receive on; every
    /// event-log line the router and its sessions write is also published on `bus`.
    pub fn new(paths: Paths, cfg: Config, info: DaemonInfo, tx: RouterTx, bus: Bus) -> Router {
        let tapped = |path, name, source| {
            TappedLog::new(EventLog::from_env(path, name), source, bus.clone())
        };
        let lifecycle_log = tapped(paths.lifecycle_log(), "LIFECYCLE", Source::Lifecycle);
        let delivery_log = tapped(paths.delivery_log(), "DELIVERY", Source::Delivery);
        let exits_log = tapped(paths.exits_log(), "EXITS", Source::Exits);
        let mut notices = crate::notices::Board::load(&paths);
        // The approval board is in memory only: the last daemon's requests are gone.
        if !notices.clear_approvals().is_empty() {
            if let Err(e) = notices.save(&paths) {
                log::warn!("notices: cannot drop the last daemon's approvals: {e}");
            }
        }
        let ids = std::sync::Arc::new(crate::msgids::Ledger::new(paths.message_ids_dir()));
        Router {
            paths,
            cfg,
            info,
            live: LiveSessions::default(),
            queues: Queues::default(),
            supervisor: Supervisor::default(),
            timers: Timers::default(),
            next_id: 1,
            sessions: {
                let tx = tx.clone();
                EventSink::new(move |ev| tx.send(RouterMsg::Session(ev)).is_ok())
            },
            tx,
            shutdown: None,
            lifecycle_log,
            delivery_log,
            exits_log,
            now: Now::read(),
            storms: Default::default(),
            prep: crate::daemon::fair_pool::FairPool::new(
                "send-prep",
                crate::daemon::fair_pool::PREP_LIMITS,
            ),
            prep_plain: crate::daemon::fair_pool::FairPool::new(
                "send-prep-plain",
                crate::daemon::fair_pool::PLAIN_PREP_LIMITS,
            ),
            notices,
            approvals: broker::Broker::default(),
            confirming: confirm::Confirmations::default(),
            sweep_armed: false,
            topics: topics::TopicBook::default(),
            ids,
            limited: Default::default(),
            remote: Default::default(),
        }
    }

    /// Sessions the previous daemon never saw end (it was killed, or the host lost power):
    /// their `.session` marker is still there, since every exit the daemon sees removes it.
    /// An agent among them is made resume-eligible, as a shutdown would have made it, so the
    /// next message on its topic continues its conversation (spec 05 §9's shutdown rule
    /// applied to a daemon that could not shut down; rule 5's "crash → fresh" is about the
    /// agent's own end, which removes the marker). Logged as `ev=recovered`.
    fn recover_sessions_of_a_crash(&mut self) {
        use crate::markers::{Flag, Markers, SESSION};
        for ident in crate::markers::identities_with(&self.paths, SESSION) {
            let markers = Markers::new(&self.paths, &ident);
            let agent = self
                .adapter(&ident.runtime)
                .is_ok_and(|a| a.kind() == RuntimeKind::Agent);
            if agent {
                logged(markers.set(Flag::IdleReaped));
            }
            logged(markers.remove_session());
            self.lifecycle(
                Event::new("recovered")
                    .field("identity", &ident)
                    .field("resumable", agent.to_string()),
            );
        }
    }

    /// Run until shutdown completes or every sender is gone.
    pub fn run(mut self, rx: inbox::Inbox) {
        self.now = Now::read();
        // The runtimes installed at start are the baseline of `notice_new_runtimes`.
        self.supervisor
            .new_runtimes(crate::runtime::manifest::installed(&self.paths));
        self.recover_sessions_of_a_crash();
        self.settle_rename();
        self.start_always_on();
        loop {
            let timeout = self
                .timers
                .next_at()
                .map(|at| at.saturating_duration_since(Now::read().at))
                .unwrap_or(Duration::from_secs(3600));
            match rx.recv_timeout(timeout) {
                Ok(m) => {
                    self.now = Now::read();
                    self.on_msg(m)
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.topics.flush(&self.paths);
                    return;
                }
            }
            self.now = Now::read();
            self.fire_timers(self.now.at);
            if rx.is_empty() {
                self.topics.caught_up(&self.paths, self.now.at);
                crate::config::test_events::emit("router-idle");
            }
            if self.shutdown.is_some() && self.live.is_empty() {
                self.topics.flush(&self.paths);
                if let Some(done) = self.shutdown.take() {
                    let _ = done.send(());
                }
                return;
            }
        }
    }

    pub(crate) fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub(crate) fn set_timer(&mut self, at: Instant, t: Timer) {
        self.timers.set(at, t);
    }

    fn fire_timers(&mut self, now: Instant) {
        while let Some(t) = self.timers.pop_due(now) {
            self.on_timer(t);
        }
    }

    fn on_timer(&mut self, t: Timer) {
        match t {
            Timer::Restart(identity) => self.restart_always_on(&identity),
            Timer::Revive { identity, job } => self.revive_expired(&identity, job),
            Timer::GoneDeadline(id) => self.live.expire_gone_waiter(id),
            Timer::SendDeadline(job) => self.send_deadline(job),
            Timer::ApprovalSweep => self.on_approval_sweep(),
            Timer::TopicFlush => self.topics.flush(&self.paths),
            Timer::PrepCheck => self.on_prep_check(),
            Timer::LimitResume(identity) => self.limit_resume_due(&identity),
            Timer::RemoteDeadline(ticket) => self.remote_deadline(&ticket),
            Timer::RemoteKept(ticket) => self.remote_kept_expired(&ticket),
            Timer::ShutdownDrain => self.drain_over(),
            Timer::ShutdownDeadline => {
                log::warn!(
                    "shutdown: {} session(s) did not end in time",
                    self.live.len()
                );
                // A delivery no session answered for: the daemon handed it over and knows no
                // more.
                let left: Vec<_> = self.queues.drain_endpoints();
                for (ident, ep) in left {
                    for job in ep.queue {
                        match job {
                            endpoint::Job::Send(j) => {
                                let r = ids::unknown_refusal(
                                    &ident,
                                    &j.msg_id,
                                    "the daemon stopped before the session answered for it",
                                );
                                self.finish_send(j.record(), r);
                            }
                            other => other.fail(Code::ShuttingDown, SHUTTING_DOWN.into()),
                        }
                    }
                }
                self.live.clear();
            }
        }
    }

    fn on_msg(&mut self, msg: RouterMsg) {
        // A launch's end and the sessions' ends are handled as always while shutting down:
        // the sessions' ends are what a shutdown waits for (and `begin_shutdown` ended every
        // launch, so a launch ends at once).
        let always = matches!(msg, RouterMsg::Launched { .. } | RouterMsg::Session(_));
        if self.shutdown.is_some() && !always {
            return self.on_msg_shutting_down(msg);
        }
        match msg {
            RouterMsg::Control { req, reply } => {
                // Verbs other than a send (and the CLI's version check) may read or move the
                // topic files.
                if !matches!(*req, Request::Send { .. } | Request::Ping) {
                    self.topics.flush(&self.paths);
                }
                self.on_request(*req, reply)
            }
            RouterMsg::Mcp { creds, args, reply } => {
                let token_identity = creds
                    .session_token
                    .as_deref()
                    .and_then(|t| self.live.by_token(t))
                    .map(Identity::to_string);
                let input = SendInput {
                    path: "mcp",
                    caller: Caller::Mcp {
                        header: creds.identity_header,
                        token_identity,
                        auth: self.cfg.mcp_auth,
                    },
                    args,
                };
                self.begin_send(input, reply, None);
            }
            RouterMsg::Send { input, reply } => self.begin_send(*input, reply, None),
            RouterMsg::Prepared { job, result } => self.on_prepared(job, *result),
            RouterMsg::ToolsListed { creds } => self.on_tools_listed(&creds),
            RouterMsg::Launched {
                identity,
                session,
                result,
            } => self.on_launched(&identity, session, *result),
            RouterMsg::Session(ev) => self.on_session_event(ev),
            RouterMsg::Tick => self.on_tick(),
            RouterMsg::Lifecycle(ev) => self.lifecycle(ev),
            RouterMsg::Federation(ev) => self.on_federation(ev),
            RouterMsg::Shutdown { done } => self.begin_shutdown(done),
        }
    }

    /// What the router does with a message once it is shutting down: requests and sends
    /// are refused, the rest dropped.
    fn on_msg_shutting_down(&mut self, msg: RouterMsg) {
        let refusal = || Failure::new(Code::ShuttingDown, "the daemon is shutting down");
        match msg {
            RouterMsg::Control { reply, .. } | RouterMsg::Send { reply, .. } => {
                reply.finish(refusal())
            }
            RouterMsg::Mcp { reply, .. } => reply.finish(Err(refusal())),
            // Normally answered by `begin_shutdown` already; logged like any send.
            RouterMsg::Prepared { job, .. } => {
                if let Some(j) = self.queues.take_preparing(job) {
                    self.finish_send(j.unprepared(), shutting_down());
                }
            }
            // Handled by `on_msg` as always.
            RouterMsg::Launched { .. } | RouterMsg::Session(_) => {}
            // An inbox entry is left unacknowledged: the next start reads it again.
            RouterMsg::Federation(crate::daemon::federation::hub::Event::Inbound { .. }) => {}
            RouterMsg::Federation(ev) => self.on_federation(ev),
            RouterMsg::Tick
            | RouterMsg::Shutdown { .. }
            | RouterMsg::ToolsListed { .. }
            | RouterMsg::Lifecycle(_) => {}
        }
    }

    fn on_request(&mut self, req: Request, reply: ReplyTo) {
        match req {
            Request::Ping => reply.finish(Pong {
                version: crate::daemon::test_hooks::version().to_string(),
                pid: std::process::id(),
            }),
            send @ Request::Send { .. } => {
                if let Some((input, timeout_ms)) = SendInput::of_cli_request(send) {
                    self.begin_send(input, reply, timeout_ms.map(Duration::from_millis));
                }
            }
            Request::ConfirmSend {
                id,
                runtime,
                caller,
            } => self.op_confirm_send(&id, runtime, caller.as_deref(), reply),
            Request::ApprovalRequest {
                identity,
                token,
                tool,
                summary,
            } => self.op_approval_request(&identity, &token, tool, summary, reply),
            other => self.on_op(other, reply),
        }
    }

    /// Tell the session whose token (or, in header mode, identity) listed the tools that its
    /// MCP connection is up.
    fn on_tools_listed(&mut self, creds: &CallerCreds) {
        let by_token = creds
            .session_token
            .as_deref()
            .and_then(|t| self.live.by_token(t))
            .cloned();
        // In header mode the identity comes from the request's header: a wire string.
        let identity = by_token.or_else(|| {
            (self.cfg.mcp_auth == crate::config::McpAuth::Header)
                .then_some(creds.identity_header.as_deref())
                .flatten()
                .and_then(|h| Identity::parse(h).ok())
        });
        let Some(identity) = identity else {
            return;
        };
        if let Some(s) = self.live.get_mut(&identity) {
            if !s.mcp_up {
                s.mcp_up = true;
                s.handle.send(crate::session::handle::SessionCmd::McpUp);
            }
        } else if let Some(l) = self.live.launching_mut(&identity) {
            // Told to the session when its launcher reports.
            l.early.mcp_up = true;
        }
    }

    /// Log one lifecycle event.
    pub(crate) fn lifecycle(&self, ev: Event) {
        self.lifecycle_log.append(&ev);
    }

    fn begin_shutdown(&mut self, done: Sender<()>) {
        log::info!("shutdown: ending {} session(s)", self.live.len());
        self.deny_all_approvals();
        self.live.finish_gone_waiters();
        // Every send not begun is answered `shutting-down` (NOT delivered: nothing of it
        // reached a session) and gets its delivery.log line.
        let preparing: Vec<_> = self.queues.drain_preparing();
        for job in preparing {
            // One still waiting for a worker never runs.
            self.prep_pool(job.input.args.attachments.is_empty())
                .cancel(job.id);
            self.finish_send(job.unprepared(), shutting_down());
        }
        // A send a session holds now is answered by that session: its delivery usually
        // confirms within milliseconds, so it gets until `SHUTDOWN_DRAIN` before the
        // session is told to give it back and end (then "NOT delivered" only if none of it
        // was written, else "state unknown").
        let queued: Vec<_> = self.queues.drain_endpoints();
        for (ident, mut ep) in queued {
            let held = ep.inflight.and_then(|id| match ep.queue.front() {
                Some(endpoint::Job::Send(j)) if j.id == id => ep.queue.pop_front(),
                _ => None,
            });
            for job in ep.queue.drain(..) {
                match job {
                    endpoint::Job::Send(j) => self.finish_send(j.record(), shutting_down()),
                    other => other.fail(Code::ShuttingDown, SHUTTING_DOWN.into()),
                }
            }
            if let Some(job) = held {
                let kept = self.queues.endpoint_or_new(&ident);
                kept.inflight = ep.inflight;
                kept.queue.push_back(job);
            }
        }
        for sess in self.live.spawned_mut() {
            if sess.kind == RuntimeKind::Agent {
                // Resume-eligible: the next message on its topic continues the conversation.
                logged(
                    crate::markers::Markers::new(&self.paths, &sess.identity)
                        .set(crate::markers::Flag::IdleReaped),
                );
            }
            if self.queues.has_endpoint(&sess.identity) {
                continue; // ended once its delivery is answered, or at the drain's end
            }
            sess.state.end_now(Cause::Shutdown);
            sess.handle
                .send(crate::session::handle::SessionCmd::Kill(Cause::Shutdown));
        }
        // A launch under way is ended the moment its launcher reports, the same way.
        for (identity, l) in self.live.launches_mut() {
            if l.kind == RuntimeKind::Agent {
                logged(
                    crate::markers::Markers::new(&self.paths, identity)
                        .set(crate::markers::Flag::IdleReaped),
                );
            }
            l.state.end_now(Cause::Shutdown);
        }
        self.timers.clear();
        self.set_timer(self.now.at + SHUTDOWN_DRAIN, Timer::ShutdownDrain);
        // Sessions get SIGKILL 3 s after SIGTERM; allow for draining after that.
        self.set_timer(
            self.now.at + SHUTDOWN_DRAIN + Duration::from_secs(5),
            Timer::ShutdownDeadline,
        );
        self.shutdown = Some(done);
    }

    /// The shutdown's wait for deliveries in flight is over: each session still holding one
    /// is told to give it back (it answers: taken back, or unconfirmed) and to end.
    fn drain_over(&mut self) {
        let holding: Vec<(Identity, u64)> = self
            .queues
            .endpoints()
            .filter_map(|(ident, ep)| Some((ident.clone(), ep.inflight?)))
            .collect();
        for (ident, id) in holding {
            if let Some(s) = self.live.get_mut(&ident) {
                s.handle
                    .send(crate::session::handle::SessionCmd::Cancel(id));
                s.state.end_now(Cause::Shutdown);
                s.handle
                    .send(crate::session::handle::SessionCmd::Kill(Cause::Shutdown));
            }
        }
    }

    /// A send's answer was given: go on with `identity`'s queue — or, while shutting down,
    /// end its session once it holds no delivery.
    pub(crate) fn after_answer(&mut self, identity: &Identity) {
        if self.shutdown.is_none() {
            return self.pump(identity);
        }
        if self
            .queues
            .endpoint(identity)
            .is_some_and(|e| e.inflight.is_some())
        {
            return;
        }
        self.queues.remove_endpoint(identity);
        if let Some(s) = self.live.get_mut(identity) {
            if !s.state.is_ending() {
                s.state.end_now(Cause::Shutdown);
                s.handle
                    .send(crate::session::handle::SessionCmd::Kill(Cause::Shutdown));
            }
        }
    }

    /// The marker files of an identity.
    pub(crate) fn markers(&self, identity: &Identity) -> crate::markers::Markers {
        crate::markers::Markers::new(&self.paths, identity)
    }

    /// The adapter for a runtime, or the reason it cannot be used. An agent runtime's program
    /// is not looked for here (that may block): the launch finds it (issue 30 item 1).
    pub(crate) fn adapter(
        &self,
        runtime: &str,
    ) -> Result<std::sync::Arc<dyn Adapter>, crate::runtime::RuntimeError> {
        crate::runtime::launch_adapter_for(&self.paths, runtime)
    }
}

/// How long a shutdown lets the deliveries sessions hold finish before it ends their sessions
/// (a delivery usually confirms within milliseconds; an agent's within a second or two).
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(2);

/// The answer to work the daemon drops because it is stopping.
const SHUTTING_DOWN: &str =
    "the daemon is shutting down; message NOT delivered — send it again once the daemon is back";

/// The refusal of a send the daemon drops because it is stopping (code `shutting-down`).
fn shutting_down() -> Refusal {
    Refusal {
        code: Code::ShuttingDown,
        error: SHUTTING_DOWN.into(),
    }
}

/// Log a failed marker write (the daemon carries on: markers are best-effort memory).
pub(crate) fn logged<T>(r: Result<T, crate::markers::MarkerError>) -> Option<T> {
    r.map_err(|e| log::warn!("{e}")).ok()
}

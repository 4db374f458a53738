//! The accepting side of the loopback HTTP server (spec 02 §3; issue 12 item 2): one thread
//! owns the listening socket and every connection until its request is complete, on a
//! `mio::Poll`, so a client that sends slowly costs one fd and a buffer, never a thread.
//!
//! Only the daemon's own uid is served (Linux, [`super::peer_uid`]): a connection whose
//! client socket belongs to another user is answered the fleet's 401 at its accept, before
//! anything of it is read, and only lingers (first let go when room is needed), so it never
//! takes the place of one of the owner's.
//!
//! Per connection, in order: the head within [`HEAD_TIMEOUT`] of the accept and
//! [`MAX_HEAD_BYTES`](super::head::MAX_HEAD_BYTES) (parsed by [`super::head`]); the gate
//! ([`super::gate`]); the body within [`BODY_TIMEOUT`] of the head, never more than the route's
//! limit. A complete `/mcp` request is begun with [`mcp::start`]: answered at once, or its
//! `send_to_peer` calls are routed with [`Backend::submit`](crate::daemon::mcp::Backend::submit)
//! and the connection waits (no deadline of its own: the router's send deadline ends every
//! send) until their outcomes come back on this thread's channel, which wakes the poll.
//! Answers are written without blocking (at most [`WRITE_TIMEOUT`] for a client that does not
//! read); then the connection lingers (input discarded, at most [`LINGER`] and
//! [`LINGER_BYTES`]) so that the answer is not lost to a reset, and is closed. A client that
//! hangs up while its sends are routed has them abandoned (work not begun is not begun).
//!
//! Bounds: at most `limit` connections ([`conn_limit`]) and `max_in_flight` waiting requests.
//! At the limit the connections accepted since the last poll are read first; then a new
//! connection evicts the oldest one still being read (answered 503) when that one has sent
//! part of a head, or nothing for [`EVICT_AFTER`] ([`make_room`]), else it waits in the
//! listen backlog a moment (a burst of prompt clients is never answered 503 for its number);
//! when every connection has been waiting or being answered for [`REFUSE_AFTER`], the
//! newcomer is answered 503, as is a request over `max_in_flight` (both with `Retry-After`).
//! Fleet long polls ([`Begun::Held`]) are not counted against `limit`: they have a budget of
//! their own ([`hold_limit`], issue 26 item 3), and when it is full the oldest long poll is
//! answered early (its normal answer, asked for again without waiting) to make room, so
//! however many are held, MCP requests keep their places. Event streams, handed to
//! [`super::streams`], have the same rule there.
//! `accept` failing for want of fds (`EMFILE`, `ENFILE`) evicts the oldest connection, or, with
//! none, spends a reserve fd to accept and answer 503, and retries; the loop never ends on an
//! accept error.
//!
//! Failure: a panic on this thread drops the connections it held (their clients see them
//! close; sends they were waiting for are abandoned) and the loop starts again on the same
//! listening socket ([`crate::daemon::guard::serve_restarting`]; `status` reports it), so the
//! port never stays dead (issue 26 item 9).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use super::doorbell::Doorbell;
use super::gate::{self, Admitted, Head, Route};
use super::head::{self, RequestHead, MAX_HEAD_BYTES};
use super::reply::Reply;
use super::streams::{Handoff, NewStream};
use super::{Shared, SHUTDOWN_GRACE};
use crate::daemon::fleet::{self, answer, Begun, Early, FleetRequest};
use crate::daemon::mcp::{self, SendOutcome, Started};

/// The head must be complete this long after the accept.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The body must be complete this long after the head.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a refused connection's input is read and discarded before it is closed.
pub const LINGER: Duration = Duration::from_secs(1);
/// Most bytes discarded while lingering.
pub const LINGER_BYTES: usize = 1024 * 1024;
/// How long a client may take to read its answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often deadlines are checked, and how soon a failed `accept` is retried.
const TICK: Duration = Duration::from_millis(100);

/// Token of the listening socket.
pub const LISTENER: Token = Token(0);
/// Token of the waker that stops the loop.
pub const WAKER: Token = Token(1);
const FIRST_CONN: usize = 2;

/// How many connections the server holds at once, from the soft `RLIMIT_NOFILE`: a quarter of
/// it (the rest is for sessions, logs and the control socket), at least 16 and at most 4096.
/// Event streams are not counted: they have their own cap ([`stream_limit`]).
pub fn conn_limit(nofile: u64) -> usize {
    usize::try_from((nofile / 4).clamp(16, 4096)).unwrap_or(4096)
}

/// How many fleet long polls (`GET /fleet/v1/approvals?wait=S`), and as many fleet event
/// streams (`GET /fleet/v1/events`), are held at once, each on top of [`conn_limit`]: an
/// eighth of the soft `RLIMIT_NOFILE`, at least 16, at most `max` (`IAPEER_FLEET_HOLD_MAX`,
/// default 1 024). With the connections' quarter that leaves at least half of the fds (of a
/// limit of 256 or more) to the sessions, logs and the control socket. When a kind's budget is full, its oldest is
/// answered early to make room for a new one: neither ever takes the places of MCP requests.
pub fn hold_limit(nofile: u64, max: usize) -> usize {
    usize::try_from(nofile / 8)
        .unwrap_or(usize::MAX)
        .max(16)
        .min(max.max(1))
}

/// How long a connection that has sent nothing yet is left to begin its request before a
/// newcomer may evict it: in a burst of hundreds of connections (long polls among them) a
/// client may be accepted before it has written its request, and is then only slow to be
/// scheduled; newcomers wait in the listen backlog meanwhile instead of evicting it with 503.
/// One that has sent part of a head and stopped (slowloris) may be evicted at once.
pub const EVICT_AFTER: Duration = Duration::from_secs(1);

/// How long newcomers wait in the listen backlog while every held connection is being
/// served (nothing to evict) before they are answered 503: long enough for a burst of
/// answers already on their way (long polls answered early, the router's replies under
/// load) to free places, short enough that a server full of long calls says so promptly.
pub const REFUSE_AFTER: Duration = Duration::from_secs(2);

/// The connection a newcomer would evict: answered and lingering, or still being read since
/// `opened`.
#[derive(Debug, Clone, Copy)]
pub struct Unserved {
    /// Answered already (lingering): evicted without a word.
    pub answered: bool,
    /// Some of its request has been read (and it is not complete).
    pub heard: bool,
    /// When it was accepted.
    pub opened: Instant,
}

/// What to do before accepting the next connection of the backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Under the limit: take it.
    Free,
    /// Let the oldest unserved connection go (503 unless it was answered), then take it.
    Evict,
    /// Leave it in the backlog: the connection that would go has sent nothing yet and was
    /// accepted less than [`EVICT_AFTER`] ago; look again shortly.
    Later,
    /// Every connection has been served (waiting for its answer or being answered) for
    /// [`REFUSE_AFTER`]: answer it 503 with `Retry-After`.
    Refuse,
}

/// [`Room`] for a server that is `full` (at its connection limit) whose oldest unserved
/// connection is `oldest`, at `now`; `served_since` is since when it has been full with every
/// connection served (`None`: not so before this look).
pub fn make_room(
    full: bool,
    oldest: Option<Unserved>,
    served_since: Option<Instant>,
    now: Instant,
) -> Room {
    match oldest {
        _ if !full => Room::Free,
        None if served_since.is_some_and(|t| now.saturating_duration_since(t) >= REFUSE_AFTER) => {
            Room::Refuse
        }
        None => Room::Later,
        Some(o)
            if o.answered || o.heard || now.saturating_duration_since(o.opened) >= EVICT_AFTER =>
        {
            Room::Evict
        }
        Some(_) => Room::Later,
    }
}

enum Stage {
    /// Reading the head; `scanned` bytes were searched for its end already.
    Head { scanned: usize },
    /// Reading `len` body bytes that start at `at` in the buffer.
    Body {
        head: Box<RequestHead>,
        admitted: Admitted,
        at: usize,
        len: usize,
    },
    /// Waiting for the outcomes of routed sends (one slot each, in order), then `pending`
    /// builds the answer. `gone` is raised when the client hangs up. `held` says whether the
    /// answer has become an event stream ([`HOLD_AS_EVENTS_AFTER`]).
    Calling {
        pending: Box<mcp::Pending>,
        outcomes: Vec<Option<SendOutcome>>,
        gone: Arc<AtomicBool>,
        held: Held,
    },
    /// A fleet request whose answer comes later (on this thread's channel). `gone` is
    /// raised when the client hangs up. A held long poll has `early` (and counts against the
    /// long-poll budget) until it is answered or asked to answer early.
    Fleet {
        gone: Arc<AtomicBool>,
        head_only: bool,
        early: Option<Early>,
    },
    /// Writing the answer: `at` bytes of `out` are written.
    Writing { out: Vec<u8>, at: usize },
    /// Answered; discarding input until EOF, the deadline or [`LINGER_BYTES`].
    Linger { discarded: usize },
}

impl Stage {
    /// Still being read (head or body): such a connection may be evicted or timed out 408.
    fn reading(&self) -> bool {
        matches!(self, Stage::Head { .. } | Stage::Body { .. })
    }

    /// Holding a request the server accepted (waiting or being answered): never evicted.
    fn serving(&self) -> bool {
        matches!(
            self,
            Stage::Calling { .. } | Stage::Fleet { .. } | Stage::Writing { .. }
        )
    }

    /// Waiting for an answer from elsewhere: no deadline here.
    fn open_ended(&self) -> bool {
        matches!(self, Stage::Calling { .. } | Stage::Fleet { .. })
    }
}

/// How long a `tools/call` answer waits as it is before, for a client whose `Accept` lists
/// `text/event-stream`, it becomes an event stream: the head (200, `text/event-stream`, no
/// length, `Connection: close`) and a comment go out at once, a comment every
/// [`KEEP_ALIVE`] after, and the JSON-RPC answer as the one `event: message` at the end
/// (streamable HTTP lets a POST be answered so). Why: a send that wakes a peer can take
/// minutes (spec 03 §1, `IAPEER_SEND_TIMEOUT_MS`), and a client that waits for response
/// headers only so long fails the call although the message is delivered (Gemini CLI 0.61's
/// global fetch has undici's `headersTimeout` of 60 s, issue 27). A send answered sooner
/// (the common case: a peer awake) is answered as before, byte for byte; 3 s is well past a
/// delivery to an awake peer and far below any client's header timeout.
pub const HOLD_AS_EVENTS_AFTER: Duration = Duration::from_secs(3);

/// How often a held event stream gets a comment (`: keep-alive`), so that a client (or a
/// proxy) that counts silence on a body sees the connection alive: the fleet streams'
/// heartbeat.
pub const KEEP_ALIVE: Duration = super::streams::HEARTBEAT;

/// The comment written on a held answer's event stream: at its head and every [`KEEP_ALIVE`].
pub const KEEP_ALIVE_COMMENT: &[u8] = b": keep-alive\n\n";

/// The daemon log's line when an answer becomes an event stream (tests look for it).
pub const HELD_AS_EVENTS_LOG: &str = "mcp: a tools/call has waited 3 s for its sends; its \
     answer goes on as an event stream (its head sent, a keep-alive every 15 s)";

/// How a waiting `/mcp` answer is held ([`HOLD_AS_EVENTS_AFTER`]).
enum Held {
    /// Nothing written yet; at `Some(t)` the answer becomes an event stream (`None`: the
    /// client takes JSON only, and waits for it whole).
    Quiet(Option<Instant>),
    /// The event stream's head is sent: `unsent` is what the client has not taken yet
    /// (at most a comment or two: one is added only when all before it went out), the next
    /// comment is due at `beat`.
    Events { unsent: Vec<u8>, beat: Instant },
}

/// What comes back on the acceptor's channel.
enum Outcome {
    /// The outcome of send `usize` of the `/mcp` request on connection `Token`.
    Send(Token, usize, SendOutcome),
    /// The answer of the fleet request on connection `Token`.
    Fleet(Token, Reply),
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    opened: Instant,
    /// When its request had been read whole (head and body), for the answer's
    /// `Server-Timing`; `None` until then.
    read_at: Option<Instant>,
    deadline: Instant,
    stage: Stage,
}

/// What reading a connection led to.
enum Next {
    Keep,
    Close,
    Refuse(Reply, bool),
    Dispatch,
}

/// The loop's state. Built by [`Acceptor::new`], consumed by [`Acceptor::run`].
pub(super) struct Acceptor {
    poll: Poll,
    listener: TcpListener,
    conns: HashMap<Token, Conn>,
    next: usize,
    reserve: Option<File>,
    retry_accept: Option<Instant>,
    /// Since when the table has been full with every connection served ([`make_room`]).
    served_since: Option<Instant>,
    limit: usize,
    last_fd_warning: Option<Instant>,
    shared: Arc<Shared>,
    /// Rung after each outcome is sent (one wake until the loop takes them).
    bell: Arc<Doorbell>,
    outcomes_tx: Sender<Outcome>,
    outcomes: Receiver<Outcome>,
    /// Connections in [`Stage::Calling`].
    calling: usize,
    /// Held long polls: connections in [`Stage::Fleet`] with `early`; not counted against
    /// `limit`.
    polls: usize,
    /// The long-poll budget ([`hold_limit`]).
    poll_limit: usize,
    /// Where admitted event streams go (their own thread, not counted against `limit`).
    streams: Handoff,
    /// Set once stopping: answer what is in flight until then, accept nothing.
    stop_by: Option<Instant>,
    /// Who may connect ([`Owner`]).
    owner: Owner,
    /// Connections accepted since the last poll, not read yet ([`Acceptor::accept_all`]).
    unread: Vec<Token>,
}

/// Only the daemon's own uid is served (Linux: [`super::peer_uid`]); another user's
/// connection is answered 401 before anything of it is read ([`Acceptor::turn_away`]), so it
/// takes no place of the owner's.
struct Owner {
    uid: u32,
    /// The lookup; `Err` (Linux) when it could not be opened (a sandbox without netlink):
    /// said once at start, and every connection is let in (the fleet token and the MCP
    /// session tokens still apply).
    #[cfg(target_os = "linux")]
    uids: Result<super::peer_uid::PeerUids, String>,
    /// When a refusal was last logged (at most one line per 10 s).
    logged: Option<Instant>,
}

impl Owner {
    fn new() -> Owner {
        #[cfg(target_os = "linux")]
        let uids = super::peer_uid::PeerUids::new().map_err(|e| e.to_string());
        #[cfg(target_os = "linux")]
        if let Err(e) = &uids {
            log::warn!(
                "http: the owner of a connection cannot be looked up here (sock_diag: {e}); \
                 other local users' connections are let in and refused by the fleet token \
                 and the MCP session tokens only"
            );
        }
        Owner {
            uid: nix::unistd::getuid().as_raw(),
            #[cfg(target_os = "linux")]
            uids,
            logged: None,
        }
    }

    /// Whether the connection from `client` (accepted as `stream`) is the owner's; a
    /// refusal is logged (rate-limited) with the uid.
    #[cfg(target_os = "linux")]
    fn lets_in(&mut self, stream: &TcpStream, client: std::net::SocketAddr) -> bool {
        let found = match (&mut self.uids, stream.local_addr()) {
            (Ok(uids), Ok(server)) => uids.lookup(client, server).map_err(|e| e.to_string()),
            (Err(_), _) => return true,
            (_, Err(e)) => Err(e.to_string()),
        };
        let why = match found {
            Ok(uid) if super::peer_uid::admitted(uid, self.uid) => return true,
            Ok(Some(uid)) => format!("its client socket belongs to uid {uid}"),
            Ok(None) => "its client socket is gone".to_string(),
            Err(e) => format!("its client's uid cannot be known ({e})"),
        };
        if warn_due(&mut self.logged) {
            log::warn!(
                "http: answered 401 to a connection from {client} unread: {why}, and this \
                 daemon serves only uid {} (further refusals are not logged for 10 s)",
                self.uid
            );
        }
        false
    }

    #[cfg(not(target_os = "linux"))]
    fn lets_in(&mut self, _stream: &TcpStream, _client: std::net::SocketAddr) -> bool {
        true
    }
}

impl Acceptor {
    /// Take over a bound listener; returns the loop and the `Poll` registry's waker (wake it
    /// after setting `shared.stopping` to end the loop).
    pub(super) fn new(
        listener: std::net::TcpListener,
        (limit, poll_limit): (usize, usize),
        streams: Handoff,
        shared: Arc<Shared>,
    ) -> io::Result<(Acceptor, Arc<mio::Waker>)> {
        listener.set_nonblocking(true)?;
        let poll = Poll::new()?;
        let mut listener = TcpListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
        let (outcomes_tx, outcomes) = crossbeam_channel::unbounded();
        Ok((
            Acceptor {
                poll,
                listener,
                conns: HashMap::new(),
                next: FIRST_CONN,
                reserve: File::open("/dev/null").ok(),
                retry_accept: None,
                served_since: None,
                limit: limit.max(1),
                last_fd_warning: None,
                shared,
                bell: Arc::new(Doorbell::new(Arc::clone(&waker))),
                outcomes_tx,
                outcomes,
                calling: 0,
                polls: 0,
                poll_limit: poll_limit.max(1),
                streams,
                stop_by: None,
                owner: Owner::new(),
                unread: Vec::new(),
            },
            waker,
        ))
    }

    /// Serve until `shared.stopping` is set and the waker woken; then answer the requests
    /// whose sends are in flight for at most [`SHUTDOWN_GRACE`] and return. Poll errors other
    /// than `EINTR` are retried after a pause; nothing a client does ends the loop.
    pub(super) fn serve(&mut self) {
        let mut events = Events::with_capacity(256);
        let mut next_sweep = Instant::now() + TICK;
        loop {
            if self.shared.stopping.load(Ordering::SeqCst) && self.stopping_done() {
                return;
            }
            let idle = self.conns.is_empty() && self.retry_accept.is_none();
            let timeout = if idle && self.stop_by.is_none() {
                None
            } else {
                Some(next_sweep.saturating_duration_since(Instant::now()))
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    log::error!("http: poll failed: {e}");
                    std::thread::sleep(TICK);
                }
            }
            if self.shared.stopping.load(Ordering::SeqCst) && self.stopping_done() {
                return;
            }
            self.unread.clear();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    WAKER => self.take_outcomes(),
                    t => {
                        if ev.is_writable() {
                            self.flush(t);
                        }
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.on_readable(t);
                        }
                    }
                }
            }
            // Outcomes may arrive without a wake if the waker raced with a previous poll.
            self.take_outcomes();
            let now = Instant::now();
            if self.retry_accept.is_some_and(|at| now >= at) {
                self.accept_all();
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + TICK;
            }
        }
    }

    /// After a panic in [`Acceptor::serve`]: let go of every connection (whatever the panic
    /// left half done goes with them; sends they waited for are abandoned) and accept again
    /// at once (connections may wait in the backlog with no new event to say so).
    pub(super) fn recover(&mut self) {
        for (_, mut c) in self.conns.drain() {
            let _ = self.poll.registry().deregister(&mut c.stream);
            if let Stage::Calling { gone, .. } | Stage::Fleet { gone, .. } = &c.stage {
                gone.store(true, Ordering::Relaxed);
            }
        }
        self.calling = 0;
        self.polls = 0;
        if self.reserve.is_none() {
            self.reserve = File::open("/dev/null").ok();
        }
        self.retry_accept = Some(Instant::now());
    }

    /// Called while stopping: the first time, stop accepting and drop connections not being
    /// served. True once nothing is in flight or the grace is over.
    fn stopping_done(&mut self) -> bool {
        let now = Instant::now();
        if self.stop_by.is_none() {
            self.stop_by = Some(now + SHUTDOWN_GRACE);
            self.retry_accept = None;
            let _ = self.poll.registry().deregister(&mut self.listener);
            let idle: Vec<Token> = self
                .conns
                .iter()
                .filter(|(_, c)| !c.stage.serving())
                .map(|(t, _)| *t)
                .collect();
            for t in idle {
                self.remove(t);
            }
        }
        self.conns.values().all(|c| !c.stage.serving()) || self.stop_by.is_some_and(|by| now >= by)
    }

    fn accept_all(&mut self) {
        self.retry_accept = None;
        if self.stop_by.is_some() {
            return;
        }
        loop {
            // At the limit: read what was accepted since the last poll (in a burst their
            // heads are often there already: a long poll is then held apart, a quick request
            // answered), then make room, or leave the backlog to the kernel for now.
            if self.conns.len() - self.polls >= self.limit {
                for t in std::mem::take(&mut self.unread) {
                    self.on_readable(t);
                }
            }
            let full = self.conns.len() - self.polls >= self.limit;
            // Room is made only for a connection that is there: this loop comes round after
            // every accept, and the one that filled the table must not evict a slow client
            // (503) for a newcomer that never came. One that comes later raises the
            // listener's readiness again.
            if full && !backlog_waiting(&self.listener) {
                return;
            }
            let oldest = self.oldest_unserved().map(|(_, o)| o);
            let now = Instant::now();
            self.served_since = match (full, oldest) {
                (true, None) => Some(self.served_since.unwrap_or(now)),
                _ => None,
            };
            let refuse = match make_room(full, oldest, self.served_since, now) {
                Room::Free => false,
                Room::Evict => {
                    self.evict_oldest();
                    false
                }
                Room::Later => {
                    self.retry_accept = Some(Instant::now() + TICK.min(EVICT_AFTER));
                    return;
                }
                Room::Refuse => true,
            };
            match self.listener.accept() {
                Ok((stream, client)) => {
                    if !self.owner.lets_in(&stream, client) {
                        self.turn_away(stream, refuse);
                        continue;
                    }
                    if refuse {
                        answer_now(&stream, &Reply::busy(), false);
                    } else {
                        self.take(stream);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) if out_of_fds(&e) => {
                    self.warn_fds(&e);
                    if self.evict_oldest() {
                        continue;
                    }
                    // Nothing of ours to let go: spend the reserve fd to take the connection
                    // off the backlog with an answer, then get the reserve back.
                    if self.reserve.take().is_some() {
                        if let Ok((stream, _)) = self.listener.accept() {
                            answer_now(&stream, &Reply::busy(), false);
                        }
                        self.reserve = File::open("/dev/null").ok();
                        if self.reserve.is_some() {
                            continue;
                        }
                    }
                    self.retry_accept = Some(Instant::now() + TICK);
                    return;
                }
                Err(e) => {
                    log::warn!("http: accept failed: {e}; retrying");
                    self.retry_accept = Some(Instant::now() + TICK);
                    return;
                }
            }
        }
    }

    fn warn_fds(&mut self, e: &io::Error) {
        if warn_due(&mut self.last_fd_warning) {
            log::warn!(
                "http: accept failed ({e}): out of file descriptors; refusing with 503 until \
                 some are free ({} connections held)",
                self.conns.len()
            );
        }
    }

    /// Answer another user's connection 401 (the fleet's, the same as for a missing token)
    /// without reading anything of it, then linger like any answered connection so the
    /// answer is not lost to a reset (not when the table is `full`: then it is closed, and a
    /// lingering connection is the first let go for a newcomer anyway).
    fn turn_away(&mut self, stream: TcpStream, full: bool) {
        let refusal = fleet::route::gate_refusal(Reply::unauthorized());
        if !answer_now(&stream, &refusal, false)
            || stream.shutdown(Shutdown::Write).is_err()
            || full
        {
            return;
        }
        if let Some(t) = self.hold(stream, Stage::Linger { discarded: 0 }, LINGER) {
            // Its request may be waiting already; edge-triggered polls will not say so again.
            if let Some(c) = self.conns.get_mut(&t) {
                if matches!(read_conn(c, &self.shared), Next::Close) {
                    self.remove(t);
                }
            }
        }
    }

    /// Hold a new connection, to be read from its head.
    fn take(&mut self, stream: TcpStream) {
        crate::daemon::test_hooks::on_http_accept(self.shared.port);
        if let Some(t) = self.hold(stream, Stage::Head { scanned: 0 }, HEAD_TIMEOUT) {
            self.unread.push(t);
        }
    }

    /// Watch `stream` as a new connection at `stage`, due within `due`; `None` when it
    /// cannot be watched (it is closed).
    fn hold(&mut self, mut stream: TcpStream, stage: Stage, due: Duration) -> Option<Token> {
        let token = Token(self.next);
        self.next += 1;
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, token, Interest::READABLE)
        {
            log::warn!("http: cannot watch a connection: {e}");
            return None;
        }
        let now = Instant::now();
        self.conns.insert(
            token,
            Conn {
                stream,
                buf: Vec::new(),
                opened: now,
                read_at: None,
                deadline: now + due,
                stage,
            },
        );
        Some(token)
    }

    /// The connection [`Acceptor::evict_oldest`] would let go, and what it is.
    fn oldest_unserved(&self) -> Option<(Token, Unserved)> {
        self.conns
            .iter()
            .filter(|(_, c)| !c.stage.serving())
            .min_by_key(|(_, c)| (!matches!(c.stage, Stage::Linger { .. }), c.opened))
            .map(|(t, c)| {
                let o = Unserved {
                    answered: matches!(c.stage, Stage::Linger { .. }),
                    heard: !c.buf.is_empty(),
                    opened: c.opened,
                };
                (*t, o)
            })
    }

    /// Answer 503 to the connection held longest (lingering ones first) and close it; never
    /// one whose request is being served. False when there is none to let go.
    fn evict_oldest(&mut self) -> bool {
        let Some((t, _)) = self.oldest_unserved() else {
            return false;
        };
        if let Some(c) = self.remove(t) {
            if !matches!(c.stage, Stage::Linger { .. }) {
                answer_now(&c.stream, &Reply::busy(), false);
            }
        }
        true
    }

    /// Let a connection go. One waiting for its sends has them abandoned.
    fn remove(&mut self, t: Token) -> Option<Conn> {
        let mut c = self.conns.remove(&t)?;
        let _ = self.poll.registry().deregister(&mut c.stream);
        match &c.stage {
            Stage::Calling { gone, .. } => {
                self.calling -= 1;
                if !gone.swap(true, Ordering::Relaxed) {
                    log::info!("mcp: a send_to_peer caller hung up; its send is abandoned");
                }
            }
            Stage::Fleet { gone, early, .. } => {
                gone.store(true, Ordering::Relaxed);
                if early.is_some() {
                    self.polls -= 1;
                }
            }
            _ => {}
        }
        Some(c)
    }

    /// The long-poll budget is full: answer the oldest held long poll now. Its held ask is
    /// let go (`gone`; the router drops it at its next look) and its answer is asked for again
    /// without waiting; it no longer counts against the budget.
    fn answer_oldest_poll(&mut self) {
        let oldest = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.stage, Stage::Fleet { early: Some(_), .. }))
            .map(|(t, _)| *t)
            .min();
        let Some(t) = oldest else {
            return;
        };
        let done = self.fleet_done(t);
        let Some(Conn {
            stage: Stage::Fleet { gone, early, .. },
            ..
        }) = self.conns.get_mut(&t)
        else {
            return;
        };
        let Some(early) = early.take() else {
            return;
        };
        self.polls -= 1;
        gone.store(true, Ordering::Relaxed);
        *gone = Arc::new(AtomicBool::new(false));
        early(Arc::clone(gone), done);
    }

    /// Where the answer of the fleet request on connection `t` goes: this thread's channel.
    fn fleet_done(&self, t: Token) -> fleet::Done {
        let tx = self.outcomes_tx.clone();
        let bell = Arc::clone(&self.bell);
        Box::new(move |reply| {
            if tx.send(Outcome::Fleet(t, reply)).is_ok() {
                bell.ring();
            }
        })
    }

    /// Close connections past their deadline; one still being read is answered 408. Waiting
    /// requests have no deadline here (every send ends by the router's send deadline).
    fn sweep(&mut self, now: Instant) {
        self.hold_as_events(now);
        let expired: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.stage.open_ended() && now >= c.deadline)
            .map(|(t, _)| *t)
            .collect();
        for t in expired {
            if let Some(c) = self.remove(t) {
                if c.stage.reading() {
                    answer_now(&c.stream, &Reply::timeout(), false);
                }
            }
        }
    }

    /// Turn each waiting `/mcp` answer due at `now` into an event stream (its head and a
    /// comment), and give each held stream due its comment ([`HOLD_AS_EVENTS_AFTER`]).
    fn hold_as_events(&mut self, now: Instant) {
        let mut due = Vec::new();
        for (t, c) in &mut self.conns {
            let Stage::Calling { held, .. } = &mut c.stage else {
                continue;
            };
            match held {
                Held::Quiet(Some(at)) if now >= *at => {
                    let mut unsent = answer::SSE_HEAD.to_vec();
                    unsent.extend_from_slice(KEEP_ALIVE_COMMENT);
                    *held = Held::Events {
                        unsent,
                        beat: now + KEEP_ALIVE,
                    };
                    log::info!("{HELD_AS_EVENTS_LOG}");
                }
                // A comment only once the last one went out: what waits stays small.
                Held::Events { unsent, beat } if now >= *beat && unsent.is_empty() => {
                    unsent.extend_from_slice(KEEP_ALIVE_COMMENT);
                    *beat = now + KEEP_ALIVE;
                }
                _ => continue,
            }
            due.push(*t);
        }
        for t in due {
            self.flush(t);
        }
    }

    /// Begin a complete request: `/mcp` or the fleet API.
    fn dispatch(&mut self, t: Token) {
        let Some(c) = self.conns.get_mut(&t) else {
            return;
        };
        c.read_at = Some(Instant::now());
        let Stage::Body {
            head,
            admitted,
            at,
            len,
        } = std::mem::replace(&mut c.stage, Stage::Linger { discarded: 0 })
        else {
            return;
        };
        // The body is exactly Content-Length bytes: what the head's read took beyond it (a
        // pipelined request; every answer closes the connection) is not part of it.
        c.buf.truncate(at + len);
        match admitted.route {
            Route::Fleet => self.dispatch_fleet(t, &head, &admitted, at),
            Route::Ui => {
                let reply = match &self.shared.ui {
                    Some(keys) => crate::daemon::ui::serve(
                        &head.method,
                        &head.target,
                        &admitted.path,
                        &head.headers,
                        keys,
                        self.shared.port,
                    ),
                    None => Reply::not_found(),
                };
                self.answer_as(t, &reply, head.method == "HEAD");
            }
            Route::Mcp | Route::NotFound => self.dispatch_mcp(t, &head, &admitted, at),
        }
    }

    /// Begin a complete fleet request (spec 10 §1): answer it, start its stream, or wait for
    /// its answer.
    fn dispatch_fleet(&mut self, t: Token, head: &RequestHead, admitted: &Admitted, at: usize) {
        let Some(fleet) = self.shared.fleet.clone() else {
            return self.answer(t, &Reply::not_found());
        };
        let done = self.fleet_done(t);
        let Some(c) = self.conns.get_mut(&t) else {
            return;
        };
        let gone = Arc::new(AtomicBool::new(false));
        let req = FleetRequest {
            method: &head.method,
            target: &head.target,
            path: &admitted.path,
            headers: &head.headers,
            body: &c.buf[at..],
        };
        // Set before `begin`: its answer may come back before it returns.
        let begun = fleet.begin(&req, Arc::clone(&gone), done);
        c.buf = Vec::new();
        log::debug!("http: {} {}", head.method, head.target);
        let head_only = head.method == "HEAD";
        match begun {
            Begun::Done(reply) => self.answer_as(t, &reply, head_only),
            Begun::Later => {
                c.stage = Stage::Fleet {
                    gone,
                    head_only,
                    early: None,
                }
            }
            Begun::Held { early } => {
                if self.polls >= self.poll_limit {
                    self.answer_oldest_poll();
                }
                if let Some(c) = self.conns.get_mut(&t) {
                    c.stage = Stage::Fleet {
                        gone,
                        head_only,
                        early: Some(early),
                    };
                    self.polls += 1;
                }
            }
            Begun::Stream { .. } if head_only => {
                c.stage = Stage::Writing {
                    out: answer::SSE_HEAD.to_vec(),
                    at: 0,
                };
                c.deadline = Instant::now() + WRITE_TIMEOUT;
                self.flush(t);
            }
            Begun::Stream { sub } => {
                // Without a slot (all are held) the streams thread ends its oldest stream.
                let slot = self.streams.slots.reserve();
                // The stream leaves this thread: the streams thread writes it from now on.
                let Some(mut c) = self.conns.remove(&t) else {
                    return;
                };
                let _ = self.poll.registry().deregister(&mut c.stream);
                self.streams.hand_over(NewStream {
                    stream: c.stream,
                    sub,
                    slot,
                });
            }
        }
    }

    /// Begin a complete `/mcp` request: answer it, or route its sends and wait.
    fn dispatch_mcp(&mut self, t: Token, head: &RequestHead, admitted: &Admitted, at: usize) {
        let Some(c) = self.conns.get_mut(&t) else {
            return;
        };
        let body = &c.buf[at..];
        let headers = mcp::McpHeaders {
            accept: gate::first(&head.headers, "accept"),
            protocol_version: gate::first(&head.headers, "mcp-protocol-version"),
            method: gate::first(&head.headers, "mcp-method"),
            name: gate::first(&head.headers, "mcp-name"),
        };
        let backend = Arc::clone(&self.shared.backend);
        let (pending, sends) = match mcp::start(body, &headers, &admitted.creds, backend.as_ref()) {
            Started::Done(answer) => {
                log::debug!("http: {} {} -> {}", head.method, head.target, answer.status);
                return self.answer(t, &Reply::from(answer));
            }
            Started::Sends(pending, sends) => (pending, sends),
        };
        if self.calling >= self.shared.max_in_flight {
            return self.answer(t, &Reply::busy());
        }
        let gone = Arc::new(AtomicBool::new(false));
        c.buf = Vec::new();
        let events_at = pending
            .takes_events()
            .then(|| Instant::now() + HOLD_AS_EVENTS_AFTER);
        c.stage = Stage::Calling {
            pending: Box::new(pending),
            outcomes: (0..sends.len()).map(|_| None).collect(),
            gone: Arc::clone(&gone),
            held: Held::Quiet(events_at),
        };
        self.calling += 1;
        for (i, args) in sends.into_iter().enumerate() {
            let tx = self.outcomes_tx.clone();
            let bell = Arc::clone(&self.bell);
            let done = Box::new(move |outcome| {
                if tx.send(Outcome::Send(t, i, outcome)).is_ok() {
                    bell.ring();
                }
            });
            backend.submit(admitted.creds.clone(), args, Arc::clone(&gone), done);
        }
    }

    /// Take the outcomes that came back; answer each request whose sends are all done.
    fn take_outcomes(&mut self) {
        self.bell.answer();
        while let Ok(outcome) = self.outcomes.try_recv() {
            let (t, i, outcome) = match outcome {
                Outcome::Send(t, i, outcome) => (t, i, outcome),
                Outcome::Fleet(t, reply) => {
                    if let Some(Stage::Fleet {
                        head_only, early, ..
                    }) = self.conns.get(&t).map(|c| &c.stage)
                    {
                        let head_only = *head_only;
                        if early.is_some() {
                            self.polls -= 1;
                        }
                        self.answer_as(t, &reply, head_only);
                    }
                    continue;
                }
            };
            // The connection may be gone (its client hung up): the outcome is dropped.
            let Some(c) = self.conns.get_mut(&t) else {
                continue;
            };
            let Stage::Calling { outcomes, .. } = &mut c.stage else {
                continue;
            };
            if let Some(slot) = outcomes.get_mut(i) {
                *slot = Some(outcome);
            }
            if outcomes.iter().any(Option::is_none) {
                continue;
            }
            let Stage::Calling {
                pending,
                outcomes,
                held,
                ..
            } = std::mem::replace(&mut c.stage, Stage::Linger { discarded: 0 })
            else {
                continue;
            };
            self.calling -= 1;
            let outcomes = outcomes.into_iter().flatten().collect();
            match held {
                Held::Quiet(_) => self.answer(t, &Reply::from(pending.finish(outcomes))),
                Held::Events { mut unsent, .. } => {
                    // The stream's head went out: the answer ends it as its one event.
                    unsent.extend_from_slice(&pending.finish_as_event(outcomes));
                    c.stage = Stage::Writing { out: unsent, at: 0 };
                    c.deadline = Instant::now() + WRITE_TIMEOUT;
                    self.flush(t);
                }
            }
        }
    }

    /// Start writing `reply` to connection `t` (then it lingers and closes).
    fn answer(&mut self, t: Token, reply: &Reply) {
        self.answer_as(t, reply, false);
    }

    /// [`Acceptor::answer`], without the body for a `HEAD` request (`head_only`).
    fn answer_as(&mut self, t: Token, reply: &Reply, head_only: bool) {
        let Some(c) = self.conns.get_mut(&t) else {
            return;
        };
        c.stage = Stage::Writing {
            out: reply.to_http(head_only, c.read_at.map(|at| at.elapsed())),
            at: 0,
        };
        c.deadline = Instant::now() + WRITE_TIMEOUT;
        self.flush(t);
    }

    /// Write what connection `t` can take of its answer; once all is written, shut the
    /// writing side and linger. A held event stream ([`Held::Events`]) is written as far as
    /// it goes.
    fn flush(&mut self, t: Token) {
        let Some(c) = self.conns.get_mut(&t) else {
            return;
        };
        if let Stage::Calling {
            held: Held::Events { unsent, .. },
            ..
        } = &mut c.stage
        {
            let ok = write_some(&c.stream, unsent)
                && (unsent.is_empty() || watch_writes(&self.poll, &mut c.stream, t));
            if !ok {
                self.remove(t);
            }
            return;
        }
        let Stage::Writing { out, at } = &mut c.stage else {
            return;
        };
        loop {
            match c.stream.write(&out[*at..]) {
                Ok(0) => break,
                Ok(n) => {
                    *at += n;
                    if *at == out.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !watch_writes(&self.poll, &mut c.stream, t) {
                        self.remove(t);
                    }
                    return;
                }
                Err(_) => break,
            }
        }
        let complete = matches!(&c.stage, Stage::Writing { out, at } if *at == out.len());
        if !complete || c.stream.shutdown(Shutdown::Write).is_err() {
            self.remove(t);
            return;
        }
        let _ = self
            .poll
            .registry()
            .reregister(&mut c.stream, t, Interest::READABLE);
        self.linger(t);
    }

    /// Connection `t`, answered and shut for writing, lingers: its input is discarded until
    /// EOF, [`LINGER`] or [`LINGER_BYTES`], starting with what is waiting already.
    fn linger(&mut self, t: Token) {
        let Some(c) = self.conns.get_mut(&t) else {
            return;
        };
        c.stage = Stage::Linger { discarded: 0 };
        c.deadline = Instant::now() + LINGER;
        // Input may already be waiting; edge-triggered polls will not say so again.
        if matches!(read_conn(c, &self.shared), Next::Close) {
            self.remove(t);
        }
    }

    fn on_readable(&mut self, t: Token) {
        let next = match self.conns.get_mut(&t) {
            Some(c) => read_conn(c, &self.shared),
            None => return,
        };
        match next {
            Next::Keep => {}
            Next::Close => {
                self.remove(t);
            }
            Next::Refuse(reply, head_only) => {
                let Some(c) = self.conns.get_mut(&t) else {
                    return;
                };
                if answer_now(&c.stream, &reply, head_only)
                    && c.stream.shutdown(Shutdown::Write).is_ok()
                {
                    self.linger(t);
                } else {
                    self.remove(t);
                }
            }
            Next::Dispatch => self.dispatch(t),
        }
    }
}

/// Read what the connection has (until `WouldBlock`) and say what comes next.
fn read_conn(c: &mut Conn, shared: &Shared) -> Next {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let want = match &c.stage {
            Stage::Head { .. } => chunk.len().min(MAX_HEAD_BYTES + 1 - c.buf.len()),
            Stage::Body { at, len, .. } => chunk.len().min(at + len - c.buf.len()),
            Stage::Calling { .. }
            | Stage::Fleet { .. }
            | Stage::Writing { .. }
            | Stage::Linger { .. } => chunk.len(),
        };
        let n = match c.stream.read(&mut chunk[..want]) {
            Ok(0) => return Next::Close,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Next::Close,
        };
        match &mut c.stage {
            Stage::Linger { discarded } => {
                *discarded += n;
                if *discarded > LINGER_BYTES {
                    return Next::Close;
                }
                continue;
            }
            // Nothing more is expected before the answer: discarded.
            Stage::Calling { .. } | Stage::Fleet { .. } | Stage::Writing { .. } => continue,
            Stage::Head { scanned } => {
                c.buf.extend_from_slice(&chunk[..n]);
                let Some(end) = head::head_end(&c.buf, *scanned) else {
                    if c.buf.len() > MAX_HEAD_BYTES {
                        return Next::Refuse(head::too_large(), false);
                    }
                    *scanned = c.buf.len();
                    continue;
                };
                if end > MAX_HEAD_BYTES {
                    return Next::Refuse(head::too_large(), false);
                }
                match admit_head(&c.buf[..end], shared) {
                    Err((reply, head_only)) => return Next::Refuse(reply, head_only),
                    Ok((head, admitted)) => {
                        let len = head.content_length.unwrap_or(0);
                        if head.expect_continue && c.buf.len() < end + len {
                            let _ = c.stream.write(b"HTTP/1.1 100 Continue\r\n\r\n");
                        }
                        c.stage = Stage::Body {
                            head: Box::new(head),
                            admitted,
                            at: end,
                            len,
                        };
                        c.deadline = Instant::now() + BODY_TIMEOUT;
                    }
                }
            }
            Stage::Body { .. } => c.buf.extend_from_slice(&chunk[..n]),
        }
        if let Stage::Body { at, len, .. } = &c.stage {
            if c.buf.len() >= at + len {
                return Next::Dispatch;
            }
        }
    }
}

/// Parse a complete head and run the gate; `/mcp` requests that pass come back with the
/// route's admission, everything else as the answer to send (and whether it is head-only).
fn admit_head(bytes: &[u8], shared: &Shared) -> Result<(RequestHead, Admitted), (Reply, bool)> {
    let head = head::parse(bytes).map_err(|r| (r, false))?;
    let head_only = head.method == "HEAD";
    let gate_head = Head {
        method: &head.method,
        target: &head.target,
        headers: &head.headers,
        content_length: head.content_length,
    };
    let admitted = gate::admit(
        &gate_head,
        shared.port,
        shared.bearer.as_deref(),
        shared.fleet_token.as_deref(),
        shared.ui.as_ref(),
    )
    .map_err(|r| {
        // The fleet API answers every refusal in its own shape (spec 10 §1).
        let fleet_path = gate::route_of(gate::split_target(&head.target).1) == Route::Fleet;
        let r = if fleet_path && shared.fleet.is_some() {
            fleet::route::gate_refusal(r)
        } else {
            r
        };
        (r, head_only)
    })?;
    match admitted.route {
        Route::Mcp => {
            gate::mcp_precheck(&head.method, &head.headers).map_err(|r| (r, head_only))?;
            Ok((head, admitted))
        }
        Route::Fleet if shared.fleet.is_some() => Ok((head, admitted)),
        Route::Ui if shared.ui.is_some() => Ok((head, admitted)),
        Route::NotFound if gate::split_target(&head.target).1 == "/" => {
            Err((Reply::front_door(), head_only))
        }
        Route::Fleet | Route::Ui | Route::NotFound => Err((Reply::not_found(), head_only)),
    }
}

/// One nonblocking write of a whole small answer; true when all of it was taken. A client
/// whose socket buffer is full gets nothing more (the caller closes it).
fn answer_now(stream: &impl AsRawWrite, reply: &Reply, head_only: bool) -> bool {
    let bytes = reply.to_http(head_only, None);
    matches!(stream.write_once(&bytes), Ok(n) if n == bytes.len())
}

/// Write what `stream` takes of `unsent` without blocking, taking it off the front; false
/// when the connection failed (the peer is gone).
fn write_some(stream: &impl AsRawWrite, unsent: &mut Vec<u8>) -> bool {
    while !unsent.is_empty() {
        match stream.write_once(unsent) {
            Ok(0) => return false,
            Ok(n) => {
                unsent.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
    true
}

/// Watch connection `t` for room to write (and input) too, to go on with what it has not
/// taken; false when it cannot be watched (it is to be closed).
fn watch_writes(poll: &Poll, stream: &mut TcpStream, t: Token) -> bool {
    let both = Interest::READABLE | Interest::WRITABLE;
    poll.registry().reregister(stream, t, both).is_ok()
}

/// A single `write` through a shared reference (both stream types allow `&S: Write`).
trait AsRawWrite {
    fn write_once(&self, bytes: &[u8]) -> io::Result<usize>;
}

impl AsRawWrite for TcpStream {
    fn write_once(&self, bytes: &[u8]) -> io::Result<usize> {
        let mut s = self;
        s.write(bytes)
    }
}

impl AsRawWrite for std::net::TcpStream {
    fn write_once(&self, bytes: &[u8]) -> io::Result<usize> {
        let mut s = self;
        s.write(bytes)
    }
}

/// Whether a connection waits in `listener`'s backlog, nothing accepted (a poll with no
/// timeout: level-triggered, unlike the loop's edge-triggered events).
fn backlog_waiting(listener: &TcpListener) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
}

/// `accept` failed because this process or the system is out of file descriptors.
fn out_of_fds(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EMFILE | nix::libc::ENFILE | nix::libc::ENOBUFS | nix::libc::ENOMEM)
    )
}

/// Whether a warning logged at most once per 10 s may be logged now (the last one, `last`,
/// is older); when it may, `last` becomes now.
fn warn_due(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    if last.is_some_and(|t| now.duration_since(t) <= Duration::from_secs(10)) {
        return false;
    }
    *last = Some(now);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newcomer_evicts_only_a_stale_or_answered_connection() {
        let now = Instant::now();
        let read = |age: Duration| Unserved {
            answered: false,
            heard: false,
            opened: now.checked_sub(age).unwrap(),
        };
        let young = EVICT_AFTER / 3;
        assert_eq!(make_room(false, Some(read(young)), None, now), Room::Free);
        assert_eq!(
            make_room(true, None, Some(now), now),
            Room::Later,
            "all are served, just now: answers on their way may free places"
        );
        let long_ago = now.checked_sub(REFUSE_AFTER).unwrap();
        assert_eq!(
            make_room(true, None, Some(long_ago), now),
            Room::Refuse,
            "all have been served for REFUSE_AFTER"
        );
        assert_eq!(
            make_room(true, Some(read(young)), None, now),
            Room::Later,
            "a head not read yet, of a burst, is not evicted: the newcomer waits in the backlog"
        );
        assert_eq!(
            make_room(true, Some(read(EVICT_AFTER)), None, now),
            Room::Evict
        );
        let slowloris = Unserved {
            heard: true,
            ..read(young)
        };
        assert_eq!(make_room(true, Some(slowloris), None, now), Room::Evict);
        let answered = Unserved {
            answered: true,
            heard: false,
            opened: now,
        };
        assert_eq!(make_room(true, Some(answered), None, now), Room::Evict);
    }

    #[test]
    fn the_connection_limit_follows_the_fd_limit() {
        assert_eq!(conn_limit(1024), 256);
        assert_eq!(conn_limit(20), 16);
        assert_eq!(conn_limit(1 << 20), 4096);
        assert_eq!(hold_limit(1024, 1024), 128);
        assert_eq!(hold_limit(20, 1024), 16);
        assert_eq!(hold_limit(1 << 20, 1024), 1024);
        assert_eq!(hold_limit(1 << 20, 5000), 5000);
        assert_eq!(hold_limit(1024, 4), 4, "the knob may go under 16");
        assert_eq!(hold_limit(1024, 0), 1);
        // Connections and both budgets leave at least half of the fds to everything else.
        for nofile in [256, 1024, 4096, 65536] {
            assert!(conn_limit(nofile) + 2 * hold_limit(nofile, 1024) <= nofile as usize / 2);
        }
        assert!(out_of_fds(&io::Error::from_raw_os_error(nix::libc::EMFILE)));
        assert!(!out_of_fds(&io::Error::from_raw_os_error(
            nix::libc::ECONNABORTED
        )));
    }
}

//! The control socket's event loop (spec 02 §1–§2): a `mio::Poll` on the listener, the
//! connections, the signal pipe and a waker for replies. Requests go to the router; replies
//! come back tagged with the connection id. An `attach` connection is handed, past its final
//! line, to the session thread.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use mio::net::{UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::guard::Fatal;
use super::reply::{ReplyMsg, ReplyTo};
use super::router::{RouterMsg, RouterTx};
use crate::protocol::{self, Code, Failure, Request, MAX_LINE};
use crate::session::clients::{read_chunk, Chunk};
use crate::session::handle::{SessionCmd, SessionHandle};

/// Token of the listening socket.
pub const LISTENER: Token = Token(0);
/// Token of the waker used by repliers.
pub const WAKER: Token = Token(1);
/// Token of the signal pipe.
pub const SIGNALS: Token = Token(2);
const FIRST_CONN: usize = 16;

/// Requests one connection may have with the router at once (issue 12 item 3: fairness). Its
/// further lines wait in its buffer, and its socket is not read past [`READ_HIGH_WATER`], until
/// answers come back; so a client pipelining thousands of requests has at most this many ahead
/// of another client's request in the router's queue, and clients are served in turn.
pub const MAX_PENDING_PER_CONN: usize = 4;
/// Buffered input (bytes) past which a connection's socket is not read while it has a complete
/// line waiting.
const READ_HIGH_WATER: usize = 64 * 1024;

/// Whether a connection with `pending` requests at the router may hand it another.
pub fn may_dispatch(pending: usize) -> bool {
    pending < MAX_PENDING_PER_CONN
}

/// Whether to stop reading a connection's socket for now: enough is buffered and at least one
/// whole line is waiting (a partial line is read on, up to the line limit).
fn buffer_full(rbuf: &[u8]) -> bool {
    rbuf.len() >= READ_HIGH_WATER && rbuf.contains(&b'\n')
}

struct Conn {
    stream: UnixStream,
    rbuf: Vec<u8>,
    wbuf: VecDeque<u8>,
    /// An attach request is pending: stop reading lines (frames follow).
    attaching: bool,
    /// Hand the connection to this session once `wbuf` is flushed.
    handoff: Option<SessionHandle>,
    /// Close once `wbuf` is flushed (protocol error).
    close_after_flush: bool,
    /// Requests handed to the router and not yet given their final line.
    pending: usize,
    /// The client shut down its writing side (`shutdown(SHUT_WR)`, `nc -N`): no more
    /// requests come, but the ones it sent are still answered; closed once they are.
    read_closed: bool,
    /// Set once the client is gone (closed or hung up), read by the router through
    /// [`ReplyTo::abandoned`] so it does not begin work nobody waits for.
    gone: Arc<AtomicBool>,
    /// Reading stopped at [`READ_HIGH_WATER`]; the socket may hold more.
    unread: bool,
}

/// The control loop state.
pub struct Control {
    poll: Poll,
    listener: UnixListener,
    waker: Arc<Waker>,
    signals: UnixStream,
    router: RouterTx,
    replies_tx: Sender<(u64, ReplyMsg)>,
    replies: Receiver<(u64, ReplyMsg)>,
    conns: HashMap<Token, Conn>,
    next: usize,
    uid: u32,
    fatal: Fatal,
}

impl Control {
    /// Set up the loop on a bound listener and the read end of the signal pipe. Once `fatal`
    /// holds a failure, requests the router can no longer answer get it (code `internal`).
    pub fn new(
        listener: std::os::unix::net::UnixListener,
        signals: std::os::unix::net::UnixStream,
        router: RouterTx,
        fatal: Fatal,
    ) -> io::Result<Control> {
        let poll = Poll::new()?;
        listener.set_nonblocking(true)?;
        signals.set_nonblocking(true)?;
        let mut listener = UnixListener::from_std(listener);
        let mut signals = UnixStream::from_std(signals);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        poll.registry()
            .register(&mut signals, SIGNALS, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (replies_tx, replies) = crossbeam_channel::unbounded();
        Ok(Control {
            poll,
            listener,
            waker,
            signals,
            router,
            replies_tx,
            replies,
            conns: HashMap::new(),
            next: FIRST_CONN,
            uid: nix::unistd::getuid().as_raw(),
            fatal,
        })
    }

    /// Serve until SIGTERM/SIGINT/SIGHUP arrives on the signal pipe, or a fatal failure is
    /// recorded and the pipe is written to (then every request still waiting for the router
    /// gets the failure before this returns).
    pub fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(128);
        loop {
            if let Err(e) = self.poll.poll(&mut events, None) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    SIGNALS => {
                        let mut buf = [0u8; 64];
                        while matches!(self.signals.read(&mut buf), Ok(n) if n > 0) {}
                        if self.fatal.get().is_some() {
                            self.answer_pending();
                        } else {
                            log::info!("signal received: shutting down");
                        }
                        return Ok(());
                    }
                    t => {
                        // Hung up (both directions closed: the client exited or was
                        // interrupted). A client that only half-closed (shut its writing side)
                        // still waits for its answers and gets no hang-up.
                        if ev.is_write_closed() || ev.is_error() {
                            if let Some(c) = self.conns.get(&t) {
                                c.gone.store(true, Ordering::Relaxed);
                            }
                        }
                        if ev.is_readable() || ev.is_read_closed() {
                            self.read(t);
                        }
                        if ev.is_writable() {
                            self.flush(t);
                        }
                    }
                }
            }
            self.drain_replies();
        }
    }

    /// After [`Control::run`] returned on a signal and the router was told to shut down
    /// (it answers every queued request `shutting-down`): accept nothing more, and keep
    /// writing replies until every request handed to the router has its final line or
    /// `deadline` passes. The connections close when `self` is dropped.
    pub fn finish_pending(&mut self, deadline: Instant) {
        let _ = self.poll.registry().deregister(&mut self.listener);
        let mut events = Events::with_capacity(128);
        loop {
            self.drain_replies();
            let owed = self
                .conns
                .values()
                .filter(|c| c.pending > 0 || !c.wbuf.is_empty())
                .count();
            if owed == 0 {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                log::warn!("shutdown: {owed} control client(s) left without their answer");
                return;
            }
            if let Err(e) = self.poll.poll(&mut events, Some(left)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    return;
                }
            }
            for ev in events.iter() {
                if ev.token().0 >= FIRST_CONN && ev.is_writable() {
                    self.flush(ev.token());
                }
            }
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    if peer_uid(&stream) != Some(self.uid) {
                        log::warn!("refused a control connection from another user");
                        continue;
                    }
                    let token = Token(self.next);
                    self.next += 1;
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                        .is_ok()
                    {
                        self.conns.insert(
                            token,
                            Conn {
                                stream,
                                rbuf: Vec::new(),
                                wbuf: VecDeque::new(),
                                attaching: false,
                                handoff: None,
                                close_after_flush: false,
                                pending: 0,
                                read_closed: false,
                                gone: Arc::new(AtomicBool::new(false)),
                                unread: false,
                            },
                        );
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::warn!("control accept: {e}");
                    return;
                }
            }
        }
    }

    fn read(&mut self, t: Token) {
        let Some(conn) = self.conns.get_mut(&t) else {
            return;
        };
        let mut buf = [0u8; 16 * 1024];
        let mut closed = false;
        conn.unread = false;
        loop {
            if buffer_full(&conn.rbuf) {
                conn.unread = true;
                break;
            }
            match read_chunk(&mut conn.stream, &mut buf) {
                Chunk::Read(n) => conn.rbuf.extend_from_slice(&buf[..n]),
                Chunk::Drained => break,
                Chunk::Gone => {
                    closed = true;
                    break;
                }
            }
        }
        if closed {
            // A last request without its newline still counts once the client is done.
            if !conn.rbuf.is_empty() && !conn.rbuf.ends_with(b"\n") && !conn.attaching {
                conn.rbuf.push(b'\n');
            }
            conn.read_closed = true;
        }
        self.process_lines(t);
        if closed {
            // Closed now only when nothing is owed: the answers to a half-closed client's
            // requests are written when they come (a fully closed one fails that write).
            self.close_if_done(t);
        }
    }

    /// Close a connection whose client stopped sending once it is owed nothing: no request
    /// waiting for the router or held back by the per-connection cap, nothing left to write,
    /// no attach hand-off under way.
    fn close_if_done(&mut self, t: Token) {
        if self.conns.get(&t).is_some_and(|c| {
            c.read_closed
                && c.pending == 0
                && c.wbuf.is_empty()
                && c.handoff.is_none()
                && !c.rbuf.contains(&b'\n')
        }) {
            self.close(t);
        }
    }

    fn process_lines(&mut self, t: Token) {
        loop {
            let Some(conn) = self.conns.get_mut(&t) else {
                return;
            };
            if conn.attaching || conn.close_after_flush || !may_dispatch(conn.pending) {
                return;
            }
            let Some(nl) = conn.rbuf.iter().position(|b| *b == b'\n') else {
                if conn.rbuf.len() > MAX_LINE {
                    let f = Failure::new(Code::BadRequest, "request line longer than 1 MiB");
                    queue_line(conn, &f.into());
                    conn.close_after_flush = true;
                    conn.rbuf.clear();
                    self.flush(t);
                }
                return;
            };
            let line: Vec<u8> = conn.rbuf.drain(..=nl).collect();
            let line = &line[..line.len() - 1];
            if line.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            if line.len() > MAX_LINE {
                let f = Failure::new(Code::BadRequest, "request line longer than 1 MiB");
                queue_line(conn, &f.into());
                self.flush(t);
                continue;
            }
            match protocol::parse_request(line) {
                Err(f) => {
                    queue_line(conn, &f.into());
                    self.flush(t);
                }
                Ok(req) => {
                    if matches!(
                        req,
                        Request::Attach {
                            no_attach: false,
                            ..
                        }
                    ) {
                        conn.attaching = true;
                    }
                    let reply = ReplyTo::control(
                        t.0 as u64,
                        self.replies_tx.clone(),
                        self.waker.clone(),
                        conn.gone.clone(),
                    );
                    let sent = self.router.send(RouterMsg::Control {
                        req: Box::new(req),
                        reply,
                    });
                    let conn = self.conns.get_mut(&t).expect("present");
                    if sent.is_err() {
                        let f = self.fatal.failure().unwrap_or_else(|| {
                            Failure::new(Code::ShuttingDown, "the daemon is shutting down")
                        });
                        queue_line(conn, &f.into());
                        self.flush(t);
                        return;
                    }
                    conn.pending += 1;
                }
            }
        }
    }

    fn drain_replies(&mut self) {
        while let Ok((conn_id, msg)) = self.replies.try_recv() {
            let t = Token(conn_id as usize);
            let Some(conn) = self.conns.get_mut(&t) else {
                continue;
            };
            match msg {
                ReplyMsg::Progress(p) => queue_json(conn, &p),
                ReplyMsg::Final(v) => {
                    // A failed attach returns the connection to line mode.
                    conn.attaching = false;
                    conn.pending = conn.pending.saturating_sub(1);
                    queue_line(conn, &v);
                }
                ReplyMsg::Attach(v, handle) => {
                    conn.pending = conn.pending.saturating_sub(1);
                    queue_line(conn, &v);
                    conn.handoff = Some(handle);
                }
            }
            self.flush(t);
            self.process_lines(t);
            // Lines were waiting for answers; read on what their socket still holds.
            if self
                .conns
                .get(&t)
                .is_some_and(|c| c.unread && !buffer_full(&c.rbuf))
            {
                self.read(t);
            }
        }
    }

    /// A fatal failure: deliver what the router answered before it failed, then give every
    /// request still waiting the failure (code `internal`).
    fn answer_pending(&mut self) {
        self.drain_replies();
        let Some(f) = self.fatal.failure() else {
            return;
        };
        let waiting: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| c.pending > 0)
            .map(|(t, _)| *t)
            .collect();
        log::error!(
            "answering {} waiting control request(s): {}",
            waiting.len(),
            f.error
        );
        for t in waiting {
            if let Some(conn) = self.conns.get_mut(&t) {
                for _ in 0..conn.pending {
                    queue_line(conn, &f.clone().into());
                }
                conn.pending = 0;
                conn.close_after_flush = true;
            }
            self.flush(t);
        }
    }

    fn flush(&mut self, t: Token) {
        let Some(conn) = self.conns.get_mut(&t) else {
            return;
        };
        while !conn.wbuf.is_empty() {
            let (a, _) = conn.wbuf.as_slices();
            match conn.stream.write(a) {
                Ok(n) => {
                    conn.wbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(t);
                    return;
                }
            }
        }
        if conn.close_after_flush {
            self.close(t);
        } else if conn.handoff.is_some() {
            self.hand_off(t);
        } else {
            self.close_if_done(t);
        }
    }

    fn hand_off(&mut self, t: Token) {
        let Some(mut conn) = self.conns.remove(&t) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        let handle = conn.handoff.take().expect("checked by caller");
        let stream = std::os::unix::net::UnixStream::from(OwnedFd::from(conn.stream));
        let prebuf = std::mem::take(&mut conn.rbuf);
        handle.send(SessionCmd::Attach(stream, prebuf));
    }

    fn close(&mut self, t: Token) {
        if let Some(mut conn) = self.conns.remove(&t) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
    }
}

/// Queue a final reply line: the socket edge where typed replies become JSON.
fn queue_line(conn: &mut Conn, r: &protocol::Reply) {
    queue_json(conn, r);
}

fn queue_json(conn: &mut Conn, v: &impl serde::Serialize) {
    let mut line = match serde_json::to_vec(v) {
        Ok(line) => line,
        Err(e) => {
            // Only a serializer bug gets here; answer rather than leave the client waiting.
            log::error!("cannot encode a reply: {e}");
            let f = Failure::new(Code::Internal, "cannot encode the reply");
            serde_json::to_vec(&protocol::Reply::from(f)).expect("a failure encodes")
        }
    };
    line.push(b'\n');
    conn.wbuf.extend(line);
}

/// The uid of the process at the other end of a Unix socket.
fn peer_uid(stream: &UnixStream) -> Option<u32> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
        getsockopt(&stream.as_fd(), PeerCredentials)
            .ok()
            .map(|c| c.uid())
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        nix::unistd::getpeereid(stream.as_fd())
            .ok()
            .map(|(uid, _)| uid.as_raw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_has_a_few_requests_at_the_router_and_a_bounded_buffer() {
        assert!(may_dispatch(0));
        assert!(may_dispatch(MAX_PENDING_PER_CONN - 1));
        assert!(!may_dispatch(MAX_PENDING_PER_CONN));
        assert!(!buffer_full(b"{\"op\":\"ping\"}\n"));
        let mut lines = b"{\"op\":\"ping\"}\n".repeat(READ_HIGH_WATER / 14 + 1);
        assert!(buffer_full(&lines));
        // A long partial line is read on (the 1 MiB line limit applies to it).
        lines.retain(|b| *b != b'\n');
        assert!(!buffer_full(&lines));
    }
}

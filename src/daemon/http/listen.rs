//! The accepting side of the loopback HTTP server (spec 02 §3; issue 12 item 2): one thread
//! owns the listening socket and every connection until its request is complete, on a
//! `mio::Poll`, so a client that sends slowly costs one fd and a buffer, never a thread.
//!
//! Per connection, in order: the head within [`HEAD_TIMEOUT`] of the accept and
//! [`MAX_HEAD_BYTES`](super::head::MAX_HEAD_BYTES) (parsed by [`super::head`]); the gate
//! ([`super::gate`]); the body within [`BODY_TIMEOUT`] of the head, never more than the route's
//! limit. A complete `/mcp` request is handed to a request thread ([`super::serve_job`]); every
//! other outcome is answered from here with a small nonblocking write, then the connection
//! lingers (input discarded, at most [`LINGER`] and [`LINGER_BYTES`]) so that the answer is
//! not lost to a reset, and is closed.
//!
//! Bounds: at most `limit` connections (this thread's plus the request threads'; see
//! [`conn_limit`]). A new connection over it evicts the oldest one still being read (answered
//! 503); when every connection is with a request thread, the newcomer is answered 503.
//! `accept` failing for want of fds (`EMFILE`, `ENFILE`) evicts the oldest connection, or, with
//! none, spends a reserve fd to accept and answer 503, and retries; the loop never ends on an
//! accept error.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use super::gate::{self, Admitted, Head, Route};
use super::head::{self, RequestHead, MAX_HEAD_BYTES};
use super::reply::Reply;
use super::Shared;

/// The head must be complete this long after the accept.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The body must be complete this long after the head.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a refused connection's input is read and discarded before it is closed.
pub const LINGER: Duration = Duration::from_secs(1);
/// Most bytes discarded while lingering.
pub const LINGER_BYTES: usize = 1024 * 1024;
/// How often deadlines are checked, and how soon a failed `accept` is retried.
const TICK: Duration = Duration::from_millis(100);

/// Token of the listening socket.
pub const LISTENER: Token = Token(0);
/// Token of the waker that stops the loop.
pub const WAKER: Token = Token(1);
const FIRST_CONN: usize = 2;

/// How many connections the server holds at once, from the soft `RLIMIT_NOFILE`: a quarter of
/// it (the rest is for sessions, logs and the control socket), at least 16 and at most 4096.
pub fn conn_limit(nofile: u64) -> usize {
    usize::try_from((nofile / 4).clamp(16, 4096)).unwrap_or(4096)
}

/// A complete, admitted `/mcp` request, with its connection.
pub struct Job {
    /// The client's connection (nonblocking, as accepted).
    pub stream: std::net::TcpStream,
    /// The parsed head.
    pub head: RequestHead,
    /// What the gate let through (route, caller credentials).
    pub admitted: Admitted,
    /// The body, exactly `Content-Length` bytes.
    pub body: Vec<u8>,
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
    /// Answered; discarding input until EOF, the deadline or [`LINGER_BYTES`].
    Linger { discarded: usize },
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    opened: Instant,
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
    limit: usize,
    last_fd_warning: Option<Instant>,
    shared: Arc<Shared>,
}

impl Acceptor {
    /// Take over a bound listener; returns the loop and the `Poll` registry's waker (wake it
    /// after setting `shared.stopping` to end the loop).
    pub(super) fn new(
        listener: std::net::TcpListener,
        limit: usize,
        shared: Arc<Shared>,
    ) -> io::Result<(Acceptor, mio::Waker)> {
        listener.set_nonblocking(true)?;
        let poll = Poll::new()?;
        let mut listener = TcpListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        Ok((
            Acceptor {
                poll,
                listener,
                conns: HashMap::new(),
                next: FIRST_CONN,
                reserve: File::open("/dev/null").ok(),
                retry_accept: None,
                limit: limit.max(1),
                last_fd_warning: None,
                shared,
            },
            waker,
        ))
    }

    /// Serve until `shared.stopping` is set and the waker woken. Poll errors other than
    /// `EINTR` are retried after a pause; nothing a client does ends the loop.
    pub(super) fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let mut next_sweep = Instant::now() + TICK;
        loop {
            let timeout = if self.conns.is_empty() && self.retry_accept.is_none() {
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
            if self.shared.stopping.load(Ordering::SeqCst) {
                return;
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    t => self.on_readable(t),
                }
            }
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

    fn accept_all(&mut self) {
        self.retry_accept = None;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => self.take(stream),
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
        let now = Instant::now();
        if self
            .last_fd_warning
            .is_none_or(|t| now.duration_since(t) > Duration::from_secs(10))
        {
            self.last_fd_warning = Some(now);
            log::warn!(
                "http: accept failed ({e}): out of file descriptors; refusing with 503 until \
                 some are free ({} connections held)",
                self.conns.len()
            );
        }
    }

    /// Hold a new connection, making room (or refusing it) at the limit.
    fn take(&mut self, mut stream: TcpStream) {
        crate::daemon::test_hooks::on_http_accept(self.shared.port);
        let held = self.conns.len() + self.shared.in_flight.load(Ordering::SeqCst);
        if held >= self.limit && !self.evict_oldest() {
            answer_now(&stream, &Reply::busy(), false);
            return;
        }
        let token = Token(self.next);
        self.next += 1;
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, token, Interest::READABLE)
        {
            log::warn!("http: cannot watch a connection: {e}");
            return;
        }
        let now = Instant::now();
        self.conns.insert(
            token,
            Conn {
                stream,
                buf: Vec::new(),
                opened: now,
                deadline: now + HEAD_TIMEOUT,
                stage: Stage::Head { scanned: 0 },
            },
        );
    }

    /// Answer 503 to the connection held longest (lingering ones first) and close it. False
    /// when this thread holds none.
    fn evict_oldest(&mut self) -> bool {
        let victim = self
            .conns
            .iter()
            .min_by_key(|(_, c)| (!matches!(c.stage, Stage::Linger { .. }), c.opened))
            .map(|(t, _)| *t);
        let Some(t) = victim else {
            return false;
        };
        if let Some(c) = self.remove(t) {
            if !matches!(c.stage, Stage::Linger { .. }) {
                answer_now(&c.stream, &Reply::busy(), false);
            }
        }
        true
    }

    fn remove(&mut self, t: Token) -> Option<Conn> {
        let mut c = self.conns.remove(&t)?;
        let _ = self.poll.registry().deregister(&mut c.stream);
        Some(c)
    }

    /// Close connections past their deadline; one still being read is answered 408.
    fn sweep(&mut self, now: Instant) {
        let expired: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| now >= c.deadline)
            .map(|(t, _)| *t)
            .collect();
        for t in expired {
            if let Some(c) = self.remove(t) {
                if !matches!(c.stage, Stage::Linger { .. }) {
                    answer_now(&c.stream, &Reply::timeout(), false);
                }
            }
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
                    c.stage = Stage::Linger { discarded: 0 };
                    c.deadline = Instant::now() + LINGER;
                    // Input may already be waiting; edge-triggered polls will not say so again.
                    if matches!(read_conn(c, &self.shared), Next::Close) {
                        self.remove(t);
                    }
                } else {
                    self.remove(t);
                }
            }
            Next::Dispatch => {
                let Some(c) = self.remove(t) else {
                    return;
                };
                let Stage::Body {
                    head,
                    admitted,
                    at,
                    len,
                } = c.stage
                else {
                    return;
                };
                let mut buf = c.buf;
                buf.truncate(at + len);
                let body = buf.split_off(at);
                let job = Box::new(Job {
                    stream: c.stream.into(),
                    head: *head,
                    admitted,
                    body,
                });
                if let Err(job) = super::serve_job(&self.shared, job) {
                    answer_now(&job.stream, &Reply::busy(), false);
                }
            }
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
            Stage::Linger { .. } => chunk.len(),
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
        target: &head.target,
        headers: &head.headers,
        content_length: head.content_length,
    };
    let admitted = gate::admit(&gate_head, shared.port, shared.bearer.as_deref())
        .map_err(|r| (r, head_only))?;
    match admitted.route {
        Route::Mcp => {
            gate::mcp_precheck(&head.method, &head.headers).map_err(|r| (r, head_only))?;
            Ok((head, admitted))
        }
        // The fleet API (part 10) is not served yet.
        Route::Fleet | Route::NotFound => Err((Reply::not_found(), head_only)),
    }
}

/// One nonblocking write of a whole small answer; true when all of it was taken. A client
/// whose socket buffer is full gets nothing more (the caller closes it).
fn answer_now(stream: &impl AsRawWrite, reply: &Reply, head_only: bool) -> bool {
    let bytes = reply.to_http(head_only);
    matches!(stream.write_once(&bytes), Ok(n) if n == bytes.len())
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

/// `accept` failed because this process or the system is out of file descriptors.
fn out_of_fds(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::EMFILE | nix::libc::ENFILE | nix::libc::ENOBUFS | nix::libc::ENOMEM)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limit_follows_the_fd_limit() {
        assert_eq!(conn_limit(1024), 256);
        assert_eq!(conn_limit(20), 16);
        assert_eq!(conn_limit(1 << 20), 4096);
        assert!(out_of_fds(&io::Error::from_raw_os_error(nix::libc::EMFILE)));
        assert!(!out_of_fds(&io::Error::from_raw_os_error(
            nix::libc::ECONNABORTED
        )));
    }
}

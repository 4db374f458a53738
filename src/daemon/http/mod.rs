//! Loopback HTTP (spec 02 §3): a `tiny_http` server on `127.0.0.1:<port>` serving MCP at
//! `/mcp` (spec 02 §4); `/fleet` is reserved for the fleet API (part 10) and answers 404 for now.
//!
//! Threads: `tiny_http` reads connections on its own pool; one acceptor thread takes each
//! parsed request and hands it to a fresh request thread (the backend may block for minutes
//! while a sleeping agent wakes). At most `max_in_flight` requests are served at once; beyond
//! that a single rejecter thread answers 503, so a flood cannot multiply threads.
//!
//! Known limits of `tiny_http` 0.12 (not fixable from here): it sets no socket timeouts, so a
//! client that stalls mid-body holds its request slot (and its connection thread); setting
//! SO_RCVTIMEO on the listener is no cure: `accept` then times out and `tiny_http`'s accept
//! thread stops for good. A request line with a version above HTTP/1.1 deadlocks its
//! connection thread inside `tiny_http` (its 505 answer waits for the request it still holds).
//!
//! Worked around here: when a request with an unread body is dropped, `tiny_http` drains the
//! rest into a buffer sized by the *declared* Content-Length, so an absurd value (e.g. 2^62)
//! would abort the process (upstream PR #290). Requests declaring more than
//! [`abandon::DRAIN_LIMIT`] are therefore answered through [`abandon::answer_and_abandon`],
//! which never drops their body reader and leaks that one connection instead (two fds and a
//! `tiny_http` thread; details there). Every path that lets go of a `Request` goes through
//! `respond`, so no request is ever dropped unanswered by this module.

//! Loopback HTTP (spec 02 §3): a server on `127.0.0.1:<port>` serving MCP at `/mcp`
//! (spec 02 §4); `/fleet` is reserved for the fleet API (part 10) and answers 404 for now.
//!
//! Threads: one acceptor thread ([`listen`]) owns the listening socket and reads every
//! connection's head and body on a `mio::Poll`, with size limits ([`head`]), deadlines and a
//! connection limit, and answers everything but a complete `/mcp` request itself. A complete
//! `/mcp` request goes to a fresh request thread ([`serve_job`]; the backend may block for
//! minutes while a sleeping agent wakes), which answers and closes the connection. At most
//! `max_in_flight` request threads run at once; beyond that the acceptor answers 503.
//!
//! `tiny_http` prints the answers ([`Reply::to_http`]); it no longer reads requests: its
//! 0.12 reader has no deadlines or header limits, deadlocks a thread on a request line above
//! HTTP/1.1, would abort the process draining an absurd `Content-Length`, and its accept loop
//! ends for good on the first `EMFILE` (issue 12 item 2; docs/ARCHITECTURE.md "Loopback
//! HTTP"). Every connection gets `Connection: close` and one answer.

pub mod gate;
pub mod head;
pub mod listen;
pub mod reply;

#[cfg(test)]
mod tests;

use std::io::{self, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::daemon::mcp::{self, Backend};
use listen::{Acceptor, Job};
use reply::Reply;

/// Default cap on requests served at once.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

/// How long [`HttpServerHandle::shutdown`] waits for in-flight requests to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// How long a request thread may spend writing its answer to a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Server settings. `Debug` hides the bearer.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// TCP port on 127.0.0.1; 0 = any free port (read it back with [`HttpServerHandle::port`]).
    pub port: u16,
    /// `IAPEER_BEARER_TOKEN`: when set and non-empty, every request must carry
    /// `Authorization: Bearer <it>`. An empty string counts as unset.
    pub bearer: Option<String>,
    /// Cap on requests served at once (over it → 503). At least 1.
    pub max_in_flight: usize,
}

impl HttpConfig {
    /// Settings with the default in-flight cap ([`DEFAULT_MAX_IN_FLIGHT`]).
    pub fn new(port: u16, bearer: Option<String>) -> HttpConfig {
        HttpConfig {
            port,
            bearer,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("port", &self.port)
            .field("bearer", &self.bearer.as_ref().map(|_| "<set>"))
            .field("max_in_flight", &self.max_in_flight)
            .finish()
    }
}

/// State shared by the acceptor and request threads.
struct Shared {
    port: u16,
    bearer: Option<String>,
    max_in_flight: usize,
    in_flight: AtomicUsize,
    stopping: AtomicBool,
    backend: Arc<dyn Backend>,
}

/// A running server. Dropping it shuts it down.
pub struct HttpServerHandle {
    shared: Arc<Shared>,
    waker: mio::Waker,
    acceptor: Option<JoinHandle<()>>,
}

/// Bind `127.0.0.1:<cfg.port>` and start serving, holding at most
/// [`listen::conn_limit`] connections for the process's current soft `RLIMIT_NOFILE`.
///
/// Errors: the bind error (port in use, permission) or a failure to start the acceptor thread.
pub fn start(cfg: HttpConfig, backend: Arc<dyn Backend>) -> io::Result<HttpServerHandle> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, cfg.port))?;
    let port = listener.local_addr()?.port();
    let shared = Arc::new(Shared {
        port,
        bearer: cfg.bearer.filter(|b| !b.is_empty()),
        max_in_flight: cfg.max_in_flight.max(1),
        in_flight: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        backend,
    });
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft);
    let limit = listen::conn_limit(nofile);
    let (acceptor, waker) = Acceptor::new(listener, limit, Arc::clone(&shared))?;
    let acceptor = thread::Builder::new()
        .name("http-accept".into())
        .spawn(move || acceptor.run())?;
    log::info!("http: listening on 127.0.0.1:{port} (at most {limit} connections)");
    Ok(HttpServerHandle {
        shared,
        waker,
        acceptor: Some(acceptor),
    })
}

impl HttpServerHandle {
    /// The bound port (the real one when the config asked for 0).
    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// Stop accepting (the listening socket closes as the acceptor ends), then wait up to 3 s
    /// for in-flight requests to finish. Idempotent.
    pub fn shutdown(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Err(e) = self.waker.wake() {
            log::error!("http: cannot wake the acceptor to stop it: {e}");
        }
        if acceptor.join().is_err() {
            log::error!("http: the acceptor thread panicked");
        }
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        while self.shared.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for HttpServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Serve a complete `/mcp` request on a request thread of its own. `Err` gives the job back
/// when `max_in_flight` threads already run or no thread can be started (the caller answers
/// 503).
fn serve_job(shared: &Arc<Shared>, job: Box<Job>) -> Result<(), Box<Job>> {
    if shared.in_flight.fetch_add(1, Ordering::SeqCst) >= shared.max_in_flight {
        shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        return Err(job);
    }
    let guard = InFlight(Arc::clone(shared));
    // The job travels through a one-slot channel so that it can be taken back if the thread
    // cannot be started.
    let (handoff, pickup) = crossbeam_channel::bounded(1);
    let take_back = pickup.clone();
    // Cannot fail: the channel is empty and both receivers are alive.
    let _ = handoff.send(job);
    let spawned = thread::Builder::new()
        .name("http-request".into())
        .spawn(move || {
            if let Ok(job) = pickup.recv() {
                serve(job, &guard.0);
            }
        });
    match spawned {
        Ok(_) => Ok(()),
        Err(e) => {
            log::error!("http: cannot start a request thread: {e}");
            take_back.try_recv().map_or(Ok(()), Err)
        }
    }
}

/// Decrements the in-flight count when a request thread ends, even by panic.
struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Answer one `/mcp` request and close its connection.
fn serve(job: Box<Job>, shared: &Shared) {
    let Job {
        stream,
        head,
        admitted,
        body,
    } = *job;
    let accept = gate::first(&head.headers, "accept");
    let watched = Watched {
        inner: shared.backend.as_ref(),
        stream: &stream,
    };
    let reply: Reply = mcp::handle(&body, accept, admitted.creds, &watched).into();
    log::debug!("http: {} {} -> {}", head.method, head.target, reply.status);
    let bytes = reply.to_http(false);
    let sent = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_write_timeout(Some(WRITE_TIMEOUT)))
        .and_then(|()| (&stream).write_all(&bytes));
    if let Err(e) = sent {
        log::debug!("http: could not send the response: {e}");
    }
    let _ = stream.shutdown(Shutdown::Both);
}

/// The backend as one request thread sees it: a send is abandoned once the request's client
/// hangs up (issue 7 item 4: work not begun for a caller that gave up is not begun).
struct Watched<'a> {
    inner: &'a dyn Backend,
    /// The request's connection, still nonblocking while the answer is prepared.
    stream: &'a std::net::TcpStream,
}

impl Backend for Watched<'_> {
    fn send_to_peer(
        &self,
        creds: mcp::CallerCreds,
        args: mcp::SendArgs,
    ) -> Result<crate::protocol::SendResult, String> {
        let stream = self.stream;
        self.inner
            .send_to_peer_watched(creds, args, &|| client_gone(stream))
    }

    fn tools_listed(&self, creds: &mcp::CallerCreds) {
        self.inner.tools_listed(creds);
    }
}

/// Whether the client of a nonblocking connection whose request was read in full has hung
/// up: end of stream or an error (a waiting client sends nothing more).
fn client_gone(stream: &std::net::TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock && e.kind() != io::ErrorKind::Interrupted,
    }
}

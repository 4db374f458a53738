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

pub mod abandon;
pub mod gate;
pub mod reply;

#[cfg(test)]
mod tests;

use std::io::{self, Read};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use tiny_http::{Header, Request, Response, Server};

use crate::daemon::mcp::{self, Backend};
use gate::{Head, Route};
use reply::Reply;

pub use gate::MCP_BODY_LIMIT;

/// Default cap on requests served at once.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

/// How long [`HttpServerHandle::shutdown`] waits for in-flight requests to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

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
    server: Arc<Server>,
    acceptor: Option<JoinHandle<()>>,
}

/// Bind `127.0.0.1:<cfg.port>` and start serving.
///
/// Errors: the bind error (port in use, permission) or a failure to start the acceptor thread.
pub fn start(cfg: HttpConfig, backend: Arc<dyn Backend>) -> io::Result<HttpServerHandle> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, cfg.port))?;
    let port = listener.local_addr()?.port();
    let server = Arc::new(Server::from_listener(listener, None).map_err(io::Error::other)?);
    let shared = Arc::new(Shared {
        port,
        bearer: cfg.bearer.filter(|b| !b.is_empty()),
        max_in_flight: cfg.max_in_flight.max(1),
        in_flight: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        backend,
    });
    let (reject_tx, reject_rx) = unbounded();
    thread::Builder::new()
        .name("http-reject".into())
        .spawn(move || reject_loop(reject_rx))?;
    let acceptor = {
        let (shared, server) = (Arc::clone(&shared), Arc::clone(&server));
        thread::Builder::new()
            .name("http-accept".into())
            .spawn(move || accept_loop(&server, &shared, reject_tx))?
    };
    log::info!("http: listening on 127.0.0.1:{port}");
    Ok(HttpServerHandle {
        shared,
        server,
        acceptor: Some(acceptor),
    })
}

impl HttpServerHandle {
    /// The bound port (the real one when the config asked for 0).
    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// Stop accepting, join the acceptor, then wait up to 3 s for in-flight requests to
    /// finish. Idempotent. The listening socket closes when the handle is dropped.
    pub fn shutdown(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.server.unblock();
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

fn accept_loop(server: &Server, shared: &Arc<Shared>, reject: Sender<Request>) {
    loop {
        let request = match server.recv() {
            Ok(request) => request,
            Err(e) => {
                if !shared.stopping.load(Ordering::SeqCst) {
                    log::error!("http: listener stopped: {e}");
                }
                return;
            }
        };
        if shared.stopping.load(Ordering::SeqCst) {
            respond(request, Reply::busy());
            return;
        }
        if shared.in_flight.fetch_add(1, Ordering::SeqCst) >= shared.max_in_flight {
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            // The rejecter only ends when this sender is dropped, so sending cannot fail.
            let _ = reject.send(request);
            continue;
        }
        // The request travels through a one-slot channel so that it can be taken back (and
        // answered 503) if the thread cannot be started, instead of being dropped unanswered.
        let (handoff, pickup) = crossbeam_channel::bounded(1);
        let take_back = pickup.clone();
        // Cannot fail: the channel is empty and both receivers are alive.
        let _ = handoff.send(request);
        let guard = InFlight(Arc::clone(shared));
        let spawned = thread::Builder::new()
            .name("http-request".into())
            .spawn(move || {
                if let Ok(request) = pickup.recv() {
                    serve(request, &guard.0);
                }
            });
        if let Err(e) = spawned {
            log::error!("http: cannot start a request thread: {e}");
            if let Ok(request) = take_back.try_recv() {
                let _ = reject.send(request);
            }
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

fn reject_loop(requests: Receiver<Request>) {
    for request in requests {
        respond(request, Reply::busy());
    }
}

/// Serve one request: gate, route, answer.
fn serve(mut request: Request, shared: &Shared) {
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|h| {
            let name = h.field.as_str().as_str().to_ascii_lowercase();
            (name, h.value.as_str().to_owned())
        })
        .collect();
    let method = request.method().as_str().to_owned();
    let target = request.url().to_owned();
    let head = Head {
        target: &target,
        headers: &headers,
        content_length: request.body_length(),
    };
    let reply = match gate::admit(&head, shared.port, shared.bearer.as_deref()) {
        Err(reply) => reply,
        Ok(admitted) => match admitted.route {
            Route::Mcp => serve_mcp(&mut request, &method, &headers, admitted.creds, shared)
                .unwrap_or_else(|reply| reply),
            // The fleet API (part 10) is not served yet.
            Route::Fleet | Route::NotFound => Reply::not_found(),
        },
    };
    log::debug!("http: {method} {target} -> {}", reply.status);
    respond(request, reply);
}

/// `/mcp`: method and content type, body, then the MCP handler.
fn serve_mcp(
    request: &mut Request,
    method: &str,
    headers: &[(String, String)],
    creds: mcp::CallerCreds,
    shared: &Shared,
) -> Result<Reply, Reply> {
    gate::mcp_precheck(method, headers)?;
    let body = read_body(request, MCP_BODY_LIMIT)?;
    let accept = gate::first(headers, "accept");
    Ok(mcp::handle(&body, accept, creds, shared.backend.as_ref()).into())
}

/// Read the body, at most `limit` bytes (413 beyond, even when no length was declared).
fn read_body(request: &mut Request, limit: usize) -> Result<Vec<u8>, Reply> {
    let capacity = request.body_length().unwrap_or(0).min(limit);
    let mut body = Vec::with_capacity(capacity);
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    match request.as_reader().take(cap).read_to_end(&mut body) {
        Ok(_) if body.len() > limit => Err(Reply::too_large(limit)),
        Ok(_) => Ok(body),
        Err(e) => {
            log::debug!("http: body read failed: {e}");
            Err(Reply::unreadable_body())
        }
    }
}

/// Send `reply` and let go of `request`. Requests declaring a body too large for `tiny_http`
/// to drain safely are answered and abandoned instead (see [`abandon`]).
fn respond(request: Request, reply: Reply) {
    if abandon::must_abandon(request.body_length()) {
        abandon::answer_and_abandon(request, &reply);
        return;
    }
    let mut response = Response::from_data(reply.body)
        .with_status_code(reply.status)
        .with_chunked_threshold(usize::MAX);
    let headers = reply
        .content_type
        .map(|ct| ("content-type", ct))
        .into_iter()
        .chain(reply.headers);
    for (name, value) in headers {
        if let Ok(h) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(h);
        }
    }
    if let Err(e) = request.respond(response) {
        log::debug!("http: could not send the response: {e}");
    }
}

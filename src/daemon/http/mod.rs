//! Loopback HTTP (spec 02 §3): a server on `127.0.0.1:<port>` serving MCP at `/mcp`
//! (spec 02 §4), the fleet API under `/fleet/v1` (spec 10 §1, [`crate::daemon::fleet`]; only
//! for the holders of its token or the page's cookie, 401 for everyone else, whatever the
//! path; without a fleet, 404 to those) and the operator's web page under `/ui`
//! ([`crate::daemon::ui`]; without its secrets, 404).
//!
//! Threads: two. The acceptor thread ([`listen`], issue 13 item 3) owns the listening socket
//! and every connection on a `mio::Poll`: it reads each head and body with size limits
//! ([`head`]), deadlines and a connection limit, answers `/mcp` requests through
//! [`mcp::start`] at once, and routes their `send_to_peer` calls with [`Backend::submit`],
//! whose outcome comes back on a channel that wakes the poll (a wake can take minutes; the
//! connection waits, not a thread). At most `max_in_flight` requests wait for sends at once
//! and at most [`listen::conn_limit`] connections are held; beyond either the answer is 503
//! with `Retry-After`. An admitted fleet event stream is handed to the second thread,
//! [`streams`], which writes every stream as the event bus publishes (issue 10 item 1), so
//! that hundreds of streams never stand between an MCP request and its answer. Fleet long
//! polls and event streams are not counted against the connection limit: each kind has a
//! budget of its own ([`listen::hold_limit`]) whose oldest is answered early when it is full
//! (issue 26 item 3).
//!
//! A panic on either thread costs the connections it held, never the port: the thread's loop
//! starts again and [`HttpConfig::restarts`] records it for `status` (issue 26 item 9).
//!
//! `tiny_http` prints the answers ([`Reply::to_http`]); it no longer reads requests: its
//! 0.12 reader has no deadlines or header limits, deadlocks a thread on a request line above
//! HTTP/1.1, would abort the process draining an absurd `Content-Length`, and its accept loop
//! ends for good on the first `EMFILE` (issue 12 item 2; docs/ARCHITECTURE.md "Loopback
//! HTTP"). Every connection gets `Connection: close` and one answer.

pub mod doorbell;
pub mod gate;
pub mod head;
pub mod listen;
#[cfg(target_os = "linux")]
pub mod peer_uid;
pub mod reply;
pub mod streams;

#[cfg(test)]
mod tests;

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::daemon::fleet::Fleet;
use crate::daemon::guard::{self, Restarts};
#[cfg(doc)]
use crate::daemon::mcp;
use crate::daemon::mcp::Backend;
use crate::daemon::ui::UiKeys;
use listen::Acceptor;

/// Default cap on `/mcp` requests waiting for their sends at once: as many as the largest
/// connection limit ([`listen::conn_limit`]), so the fd limit is the one that binds.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 4096;

/// How long [`HttpServerHandle::shutdown`] keeps answering requests whose sends are in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Server settings. `Debug` hides the bearer. Neither `Clone` nor comparable: the page's
/// link key changes as it is used ([`UiKeys::redeem`]).
pub struct HttpConfig {
    /// TCP port on 127.0.0.1; 0 = any free port (read it back with [`HttpServerHandle::port`]).
    pub port: u16,
    /// `IAPEER_BEARER_TOKEN`: when set and non-empty, every request must carry
    /// `Authorization: Bearer <it>`. An empty string counts as unset.
    pub bearer: Option<String>,
    /// The fleet token (`<root>/state/iapeer/fleet.token`, [`crate::daemon::fleet::token`]):
    /// without `bearer`, every `/fleet` request but the page's must carry
    /// `Authorization: Bearer <it>`. `None` (none could be made): the fleet answers only the
    /// page.
    pub fleet_token: Option<String>,
    /// Cap on `/mcp` requests waiting for their sends at once (over it → 503). At least 1.
    pub max_in_flight: usize,
    /// The web page's secrets (`iapeer ui`); `None`: no page, `/ui` answers 404.
    pub ui: Option<UiKeys>,
    /// `IAPEER_FLEET_HOLD_MAX`: the most fleet long polls, and event streams, held at once
    /// whatever the fd limit ([`listen::hold_limit`]).
    pub hold_max: usize,
    /// Where a panic of the server's threads (restarted) is recorded, for `status`.
    pub restarts: Restarts,
}

impl HttpConfig {
    /// Settings with the default in-flight cap ([`DEFAULT_MAX_IN_FLIGHT`]).
    pub fn new(port: u16, bearer: Option<String>) -> HttpConfig {
        HttpConfig {
            port,
            bearer,
            fleet_token: None,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            ui: None,
            hold_max: crate::config::vars::IAPEER_FLEET_HOLD_MAX.default_u64() as usize,
            restarts: Restarts::new(),
        }
    }

    /// These settings, admitting fleet requests that carry `token` as their bearer.
    pub fn with_fleet_token(self, token: Option<String>) -> HttpConfig {
        HttpConfig {
            fleet_token: token,
            ..self
        }
    }

    /// These settings, serving the web page with `keys`.
    pub fn with_ui(self, keys: UiKeys) -> HttpConfig {
        HttpConfig {
            ui: Some(keys),
            ..self
        }
    }
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("port", &self.port)
            .field("bearer", &self.bearer.as_ref().map(|_| "<set>"))
            .field("fleet_token", &self.fleet_token.as_ref().map(|_| "<set>"))
            .field("max_in_flight", &self.max_in_flight)
            .field("ui", &self.ui.as_ref().map(|_| "<set>"))
            .field("hold_max", &self.hold_max)
            .finish()
    }
}

/// State shared by the handle and the acceptor thread.
struct Shared {
    port: u16,
    bearer: Option<String>,
    /// The fleet token (see [`HttpConfig::fleet_token`]).
    fleet_token: Option<String>,
    max_in_flight: usize,
    stopping: AtomicBool,
    backend: Arc<dyn Backend>,
    /// The fleet API, when served.
    fleet: Option<Arc<Fleet>>,
    /// The web page's secrets, when the page is served.
    ui: Option<UiKeys>,
}

/// A running server. Dropping it shuts it down.
pub struct HttpServerHandle {
    shared: Arc<Shared>,
    waker: Arc<mio::Waker>,
    acceptor: Option<JoinHandle<()>>,
    /// The event streams' thread.
    streams: streams::StreamWriter,
}

/// Backlog of the listening socket: connections the kernel completes before the acceptor
/// takes them. The standard library's 128 overflowed when 1 000 agents called at once
/// (issue 13 item 3): the kernel then dropped their handshakes and each retried a second
/// later (`release .. connected` p90 1 013 ms in `scripts/bench.sh`). The kernel caps it at
/// `net.core.somaxconn` (4096 on Linux since 5.4).
pub const LISTEN_BACKLOG: i32 = 4096;

/// A TCP listener on `127.0.0.1:<port>` (0 = any free port) with [`LISTEN_BACKLOG`], close-on-exec
/// and `SO_REUSEADDR` (as the standard library's `TcpListener::bind` sets, so a restarted
/// daemon rebinds a port whose old connections linger in `TIME_WAIT`).
///
/// Errors: the socket, bind or listen error (port in use: `AddrInUse`).
pub fn bind_loopback(port: u16) -> io::Result<TcpListener> {
    use nix::sys::socket::{
        bind, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag, SockType,
        SockaddrIn,
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    let [a, b, c, d] = Ipv4Addr::LOCALHOST.octets();
    bind(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &SockaddrIn::new(a, b, c, d, port),
    )?;
    listen(&fd, Backlog::new(LISTEN_BACKLOG)?)?;
    Ok(TcpListener::from(fd))
}

/// Bind `127.0.0.1:<cfg.port>` and start serving MCP (and the fleet API when `fleet` is
/// given), holding at most [`listen::conn_limit`] connections plus [`listen::hold_limit`]
/// fleet long polls and as many event streams for the process's current soft
/// `RLIMIT_NOFILE`.
///
/// Errors: the bind error (port in use, permission) or a failure to start the acceptor thread.
pub fn start(
    cfg: HttpConfig,
    backend: Arc<dyn Backend>,
    fleet: Option<Arc<Fleet>>,
) -> io::Result<HttpServerHandle> {
    let listener = bind_loopback(cfg.port)?;
    let port = listener.local_addr()?.port();
    let shared = Arc::new(Shared {
        port,
        bearer: cfg.bearer.filter(|b| !b.is_empty()),
        fleet_token: cfg.fleet_token.filter(|t| !t.is_empty()),
        max_in_flight: cfg.max_in_flight.max(1),
        stopping: AtomicBool::new(false),
        backend,
        fleet,
        ui: cfg.ui,
    });
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft);
    let limit = listen::conn_limit(nofile);
    let hold = listen::hold_limit(nofile, cfg.hold_max);
    let stream_writer = streams::StreamWriter::start(hold, port, cfg.restarts.clone())?;
    let handoff = stream_writer.handoff();
    if let Some(f) = &shared.fleet {
        // A publish a stream's subscription took (or a drop for falling behind) rings the
        // streams thread, which writes the new events to each stream.
        f.bus().set_notify(handoff.notify());
    }
    let (mut acceptor, waker) =
        Acceptor::new(listener, (limit, hold), handoff, Arc::clone(&shared))?;
    let restarts = cfg.restarts;
    let acceptor = thread::Builder::new()
        .name("http-accept".into())
        .spawn(move || {
            let _realtime = crate::daemon::realtime::enter("http-accept");
            guard::serve_restarting(&mut acceptor, &restarts, Acceptor::serve, Acceptor::recover)
        })?;
    log::info!(
        "http: listening on 127.0.0.1:{port} (at most {limit} connections, and {hold} fleet \
         long polls and {hold} event streams)"
    );
    Ok(HttpServerHandle {
        shared,
        waker,
        acceptor: Some(acceptor),
        streams: stream_writer,
    })
}

impl HttpServerHandle {
    /// The bound port (the real one when the config asked for 0).
    pub fn port(&self) -> u16 {
        self.shared.port
    }

    /// Stop accepting at once, keep answering requests whose sends are in flight for up to
    /// 3 s, then close everything (the listening socket closes as the acceptor ends).
    /// Idempotent.
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
        self.streams.stop();
    }
}

impl Drop for HttpServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

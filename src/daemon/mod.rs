//! The daemon (spec 02): control socket, loopback HTTP, router, sessions, ticker.
//! `iapeer daemon` runs [`run`] in the foreground.

pub mod attachments;
pub mod control;
pub mod fair_pool;
pub mod federation;
pub mod fleet;
pub mod guard;
pub mod http;
pub mod lifecycle;
pub mod mcp;
pub mod peers_watch;
pub mod pool;
pub mod realtime;
pub mod reply;
pub mod route;
pub mod router;
pub mod storm;
pub mod test_hooks;
pub mod ui;

use std::io::{self, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use fs2::FileExt;
use serde_json::json;

use crate::config::Config;
use crate::fsutil::{ensure_dir, write_json_atomic, MODE_PRIVATE};
use crate::logview::Source;
use crate::paths::Paths;
use guard::Fatal;
use mcp::{Backend, CallerCreds, SendArgs, SendDone};
use reply::SendReplyTo;
use router::{DaemonInfo, Router, RouterMsg, RouterTx};

/// Why the daemon could not start.
#[derive(Debug)]
pub enum DaemonError {
    /// Another daemon serves this root.
    AlreadyRunning(String),
    /// Setting up failed.
    Io(String, io::Error),
    /// The loopback HTTP port (`IAPEER_PORT`) could not be had.
    Listen(u16, io::Error),
    /// A thread the daemon cannot run without failed (the router thread panicked); the
    /// daemon ended its sessions and stopped, so that the service manager restarts it.
    Fatal(String),
}

impl std::fmt::Display for DaemonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DaemonError::AlreadyRunning(s) => f.write_str(s),
            DaemonError::Io(what, e) => write!(f, "{what}: {e}"),
            DaemonError::Listen(port, e) => {
                write!(f, "cannot listen on 127.0.0.1:{port}: {e}")?;
                if e.kind() == io::ErrorKind::AddrInUse {
                    write!(
                        f,
                        " — another program (or the daemon of another iapeer root) holds the \
                         port: set IAPEER_PORT to a free port, or to 0 for any free one"
                    )?;
                }
                Ok(())
            }
            DaemonError::Fatal(what) => write!(f, "{what}; the daemon exited"),
        }
    }
}

impl std::error::Error for DaemonError {}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
    let what = what.into();
    move |e| DaemonError::Io(what, e)
}

/// Routes MCP `send_to_peer` calls to the router; the send's outcome comes back through a
/// callback ([`SendReplyTo::on_outcome`]), so no thread waits for it.
struct RouterBackend {
    tx: RouterTx,
    fatal: Fatal,
}

impl RouterBackend {
    /// Why the router cannot answer ([`gone_failure`]).
    fn gone_failure(&self) -> crate::protocol::Failure {
        gone_failure(&self.fatal)
    }
}

/// Why the router cannot answer a send, as its failure (`shutting-down`): the router's
/// failure, or else an ordinary shutdown.
fn gone_failure(fatal: &Fatal) -> crate::protocol::Failure {
    crate::protocol::Failure::new(crate::protocol::Code::ShuttingDown, gone_reason(fatal))
}

/// Why the router cannot answer: its failure, or else an ordinary shutdown.
pub(crate) fn gone_reason(fatal: &Fatal) -> String {
    fatal
        .sentence()
        .unwrap_or_else(|| "the daemon is shutting down".to_string())
}

impl Backend for RouterBackend {
    fn send_to_peer(&self, creds: CallerCreds, args: SendArgs) -> mcp::SendOutcome {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.submit(
            creds,
            args,
            Arc::new(AtomicBool::new(false)),
            Box::new(move |outcome| {
                let _ = tx.send(outcome);
            }),
        );
        rx.recv().unwrap_or_else(|_| Err(self.gone_failure()))
    }

    fn submit(&self, creds: CallerCreds, args: SendArgs, gone: Arc<AtomicBool>, done: SendDone) {
        let fatal = self.fatal.clone();
        let reply = SendReplyTo::on_outcome(gone, move |r| {
            done(match r {
                Some(r) => r.map(|sent| sent.result),
                // Dropped unanswered: the router failed (its reason) or is ending.
                None => Err(gone_failure(&fatal)),
            })
        });
        if let Err(router::inbox::RouterGone(m)) =
            self.tx.send(RouterMsg::Mcp { creds, args, reply })
        {
            if let RouterMsg::Mcp { reply, .. } = *m {
                reply.finish(Err(self.gone_failure()));
            }
        }
    }

    fn tools_listed(&self, creds: &CallerCreds) {
        let _ = self.tx.send(RouterMsg::ToolsListed {
            creds: creds.clone(),
        });
    }
}

/// Is something answering on the control socket? (connect within `timeout`)
pub fn socket_answers(path: &std::path::Path, timeout: Duration) -> bool {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(UnixStream::connect(p).is_ok());
    });
    rx.recv_timeout(timeout).unwrap_or(false)
}

/// Raise the soft `RLIMIT_NOFILE` to the hard limit (issue 12 item 2: at the systemd default
/// of 1024 a local client could exhaust the daemon's fds). Logged; a failure only warns. Child
/// sessions inherit the raised limit.
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => log::info!("open file limit raised from {soft} to {hard}"),
            Err(e) => log::warn!("cannot raise the open file limit from {soft} to {hard}: {e}"),
        },
        Ok((soft, _)) => log::info!("open file limit {soft} (already the hard limit)"),
        Err(e) => log::warn!("cannot read the open file limit: {e}"),
    }
}

/// The most descriptors the daemon's table is sized for at start ([`size_fd_table`]): 8 192
/// slots cost the kernel 64 KiB of pointers, and hold a burst of a thousand MCP connections
/// beside a thousand sessions' descriptors.
pub const FD_TABLE_AT_START: u64 = 8192;

/// How many descriptor slots [`size_fd_table`] asks for under a soft `RLIMIT_NOFILE` of
/// `soft`: the limit, at most [`FD_TABLE_AT_START`]; 0 (nothing to do) under 64, which the
/// kernel's first table already holds.
pub fn fd_table_size(soft: u64) -> u64 {
    let size = soft.min(FD_TABLE_AT_START);
    if size <= 64 {
        0
    } else {
        size
    }
}

/// Grow the process's descriptor table once, now, to [`fd_table_size`] slots (issue 31 item
/// 3): the kernel grows it by doubling as descriptors are opened, and each growth copies the
/// table under its lock, which stalled the acceptor twice for ~20 ms in the first burst of
/// connections. A duplicate at the table's last slot makes the kernel size it, and closing
/// the duplicate keeps the size (the table never shrinks). Returns the slots asked for (0:
/// none); a failure only warns.
fn size_fd_table() -> u64 {
    use nix::fcntl::{fcntl, FcntlArg};
    use nix::sys::resource::{getrlimit, Resource};
    let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 0;
    };
    let size = fd_table_size(soft);
    let Ok(last) = std::os::fd::RawFd::try_from(size.saturating_sub(1)) else {
        return 0;
    };
    if size == 0 {
        return 0;
    }
    // F_DUPFD takes the lowest free descriptor at or above `last`: never one in use.
    match fcntl(std::io::stderr(), FcntlArg::F_DUPFD_CLOEXEC(last)) {
        Ok(fd) => {
            // SAFETY: `fd` was just made by F_DUPFD and nothing else holds it.
            drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
            size
        }
        Err(e) => {
            log::warn!("cannot size the descriptor table for {size} descriptors: {e}");
            0
        }
    }
}

/// Name the colour switches of the daemon's environment that its agents will not get
/// ([`crate::session::env::COLOUR_SWITCHES`]): a screen drawn without colours is the first
/// thing to suspect when drafts are seen where none were typed.
fn log_colour_switches() {
    let set: Vec<String> = crate::session::env::COLOUR_SWITCHES
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
        .collect();
    if !set.is_empty() {
        log::info!(
            "kept from the agents' terminals (iapeer reads their screens by colour): {}",
            set.join(" ")
        );
    }
}

fn init_logging(paths: &Paths) {
    use simplelog::{
        ColorChoice, CombinedLogger, ConfigBuilder, LevelFilter, SharedLogger, TermLogger,
        TerminalMode, WriteLogger,
    };
    let level = match std::env::var("IAPEER_LOG").as_deref() {
        Ok("debug") => LevelFilter::Debug,
        Ok("warn") => LevelFilter::Warn,
        Ok("trace") => LevelFilter::Trace,
        Ok("error") => LevelFilter::Error,
        _ => LevelFilter::Info,
    };
    let config = ConfigBuilder::new().set_time_format_rfc3339().build();
    let mut loggers: Vec<Box<dyn SharedLogger>> = vec![TermLogger::new(
        level,
        config.clone(),
        TerminalMode::Stderr,
        ColorChoice::Never,
    )];
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(MODE_PRIVATE)
        .open(paths.daemon_log())
    {
        loggers.push(WriteLogger::new(level, config, f));
    }
    let _ = CombinedLogger::init(loggers);
}

/// The fleet token for this start ([`fleet::token::load_or_make`]), each outcome logged; `None`
/// when none can be made (no random source): the fleet API then answers only the page.
fn fleet_token(paths: &Paths) -> Option<String> {
    use fleet::token::Found;
    let path = paths.fleet_token();
    let file = path.display();
    match fleet::token::load_or_make(&path) {
        Ok((token, found)) => {
            match found {
                Found::Kept => log::info!("fleet API: its token is in {file} (kept)"),
                Found::Made => log::info!("fleet API: made its token in {file} (mode 0600)"),
                Found::Replaced(why) => log::warn!(
                    "fleet API: {file} was not trusted ({why}): made a new token there; clients \
                     that read the old one must read it again"
                ),
                Found::Unsaved(why, e) => log::error!(
                    "fleet API: cannot write its token to {file} ({e}){}: scripts cannot read \
                     it, only the page (iapeer ui) and the packages the daemon starts have it \
                     until that file can be written and the daemon restarts",
                    why.map(|w| format!("; the file there was not trusted: {w}"))
                        .unwrap_or_default()
                ),
            }
            Some(token)
        }
        Err(e) => {
            log::error!(
                "fleet API: no token can be made ({e}): it answers only the page (iapeer ui)"
            );
            None
        }
    }
}

/// The name of the router thread (the panic hook records a panic on it as fatal).
const ROUTER_THREAD: &str = "router";
/// How long a normal shutdown waits for the router to end the sessions (they get SIGKILL
/// 3 s after SIGTERM; the router gives up on them after 5 s) and to return.
const ROUTER_SHUTDOWN: Duration = Duration::from_secs(10);
/// How long a normal shutdown keeps writing the final lines of control requests: the router
/// answers those it never began at once (`shutting-down`), and a send a session holds as
/// that delivery ends — within its 2 s drain, or when its session is ended after it (SIGKILL
/// 3 s after SIGTERM), or at its 7 s deadline at the latest (`state-unknown`). This also bounds
/// a client that reads slowly. Part of [`ROUTER_SHUTDOWN`].
const ANSWER_BOUND: Duration = Duration::from_secs(8);
/// Children still unreaped after the router is done (or gone) get SIGKILL this long after
/// SIGTERM.
const LEFTOVER_GRACE: Duration = Duration::from_secs(1);
/// The bound on a whole shutdown, from the end of the control loop to the return of [`run`]:
/// whatever has not finished by then is logged and left to end with the process. The HTTP
/// server stops last and gets what is left of it: at least 4 s after the router's 10 s and
/// the leftover children's 1 s (its own in-flight grace is 3 s).
const SHUTDOWN_BOUND: Duration = Duration::from_secs(15);

/// Run the daemon in the foreground until SIGTERM/SIGINT/SIGHUP (spec 02 §1), or until the
/// router thread fails: [`Daemon::start`], [`Running::serve`], [`Running::shutdown`].
/// Shutdown takes at most [`SHUTDOWN_BOUND`].
///
/// Errors: another daemon already serves this root; the socket, port or state folder cannot
/// be set up; [`DaemonError::Fatal`] when the router thread panicked (the panic, with its
/// location, is in `daemon.log`; sessions were ended; the caller exits non-zero).
pub fn run(paths: &Paths) -> Result<(), DaemonError> {
    let mut running = Daemon::start(paths)?;
    let served = running.serve();
    running.shutdown(served)
}

/// Starting a daemon: the steps of [`Daemon::start`], in their order.
pub struct Daemon;

/// A started daemon: its threads run, its socket and port listen, `router.json` is written.
pub struct Running {
    paths: Paths,
    sock: std::path::PathBuf,
    /// The root's single-instance lock, held until the end of [`Running::shutdown`].
    lock: std::fs::File,
    control: control::Control,
    router_tx: RouterTx,
    router_thread: std::thread::JoinHandle<()>,
    http: http::HttpServerHandle,
    fatal: Fatal,
    peers_watch_stop: Arc<AtomicBool>,
    /// Dropped at shutdown: the federation link ends (`federation::link`).
    federation_stop: Sender<()>,
    /// The link and the stream threads (`federation::streams`).
    federation_threads: Vec<std::thread::JoinHandle<()>>,
}

/// What [`Daemon::start`]'s steps share: the configuration, the failure record, the router's
/// channel and the start time (ms since the epoch).
struct Wiring {
    cfg: Config,
    fatal: Fatal,
    router_tx: RouterTx,
    started_ms: u64,
    /// What the federation threads and the router share (issue 28).
    hub: Arc<federation::hub::Hub>,
}

impl Daemon {
    /// Start the daemon on `paths`' root: folders and logs, the single-instance lock and the
    /// control socket, the event bus, the HTTP server (MCP, fleet API, page), `router.json`,
    /// the signal pipe and control loop, the router, ticker and peers-watch threads; then
    /// say "daemon ready" on stderr and in `daemon.log`.
    ///
    /// Errors: those of [`run`] before serving.
    pub fn start(paths: &Paths) -> Result<Running, DaemonError> {
        let (cfg, fatal) = Self::prepare(paths)?;
        let (lock, listener) = Self::claim(paths)?;
        let sock = paths.socket();
        let (router_tx, router_rx) = router::inbox::inbox();
        // The event bus (spec 10 §1): every event-log line the daemon writes, with history
        // from the durable logs.
        let bus = crate::eventbus::Bus::new();
        bus.seed(&[
            (Source::Lifecycle, paths.lifecycle_log()),
            (Source::Delivery, paths.delivery_log()),
            (Source::Exits, paths.exits_log()),
        ]);
        let (hub, fed_writes) = federation::hub::Hub::new();
        let wiring = Wiring {
            cfg,
            fatal,
            router_tx,
            started_ms: crate::clock::now_ms(),
            hub: Arc::new(hub),
        };
        let (http, info) = Self::start_http(paths, &wiring, &bus)?;
        let tcp = info.tcp.clone();
        let (sig_read, router_failed) = Self::signal_pipe()?;
        let control = control::Control::new(
            listener,
            sig_read,
            wiring.router_tx.clone(),
            wiring.fatal.clone(),
        )
        .map_err(io_err("cannot start the control loop"))?;
        let router_thread =
            Self::spawn_router(paths, &wiring, router_rx, info, bus, router_failed)?;
        let Wiring {
            cfg,
            fatal,
            router_tx,
            hub,
            ..
        } = wiring;
        let tick_tx = router_tx.clone();
        let tick = cfg.tick;
        std::thread::Builder::new()
            .name("ticker".into())
            .spawn(move || loop {
                std::thread::sleep(tick);
                if tick_tx.send(RouterMsg::Tick).is_err() {
                    return;
                }
            })
            .map_err(io_err("cannot start the ticker thread"))?;
        // The team's changes on the event stream (a peer created, renamed, removed).
        let peers_watch_stop = Arc::new(AtomicBool::new(false));
        peers_watch::spawn(paths.clone(), router_tx.clone(), peers_watch_stop.clone())
            .map_err(io_err("cannot start the peers-watch thread"))?;
        // The federation link (issue 28): its own thread and blocking connection to Redis.
        let (federation_stop, stop_rx) = crossbeam_channel::bounded(1);
        let link = crate::federation::link::spawn(
            paths.clone(),
            {
                let hub = hub.clone();
                Box::new(move |joined, connected, hosts| hub.set(joined, connected, hosts))
            },
            stop_rx.clone(),
        )
        .map_err(io_err("cannot start the federation-link thread"))?;
        let fed_tx = router_tx.clone();
        let sink: federation::streams::Sink =
            Arc::new(move |ev| fed_tx.send(RouterMsg::Federation(ev)).is_ok());
        let mut federation_threads =
            federation::streams::spawn(paths.clone(), hub, fed_writes, sink, stop_rx)
                .map_err(io_err("cannot start the federation stream threads"))?;
        federation_threads.push(link);
        // Read the login shell's PATH now, so the first launch or status need not wait for it.
        crate::runtime::agent_program::prime();
        eprintln!("iapeer daemon ready tcp={tcp} sock={}", sock.display());
        log::info!(
            "daemon ready tcp={tcp} sock={} pid={}",
            sock.display(),
            std::process::id()
        );
        Ok(Running {
            paths: paths.clone(),
            sock,
            lock,
            control,
            router_tx,
            router_thread,
            http,
            fatal,
            peers_watch_stop,
            federation_stop,
            federation_threads,
        })
    }

    /// The root's folders, logging, the reference docs, the panic hook, test hooks, the
    /// configuration (its warnings logged), the fd limit and the colour switches.
    fn prepare(paths: &Paths) -> Result<(Config, Fatal), DaemonError> {
        for dir in [
            paths.root().to_path_buf(),
            paths.state_dir(),
            paths.logs_dir(),
            paths.lifecycle_dir(),
        ] {
            ensure_dir(&dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
        }
        init_logging(paths);
        // The reference docs the system prompt points to (spec 08 §1); a failure is not fatal.
        match crate::host::docs::sync(paths) {
            Ok(written) if !written.is_empty() => {
                log::info!("reference docs: {} file(s) written", written.len())
            }
            Ok(_) => {}
            Err(e) => log::warn!("cannot write the reference docs: {e}"),
        }
        let fatal = Fatal::new();
        guard::install_panic_hook(fatal.clone(), ROUTER_THREAD);
        test_hooks::init();
        let (cfg, warnings) = Config::from_env();
        for w in warnings {
            log::warn!("{w}");
        }
        if cfg.send_timeout > crate::config::vars::IAPEER_SEND_TIMEOUT_MS.default_duration() {
            // The agents' MCP clients are given the longer wait at each launch (issue 27).
            log::info!(
                "IAPEER_SEND_TIMEOUT_MS is {} ms: the agents' MCP clients get a tool-call \
                 timeout of {} s from their next launch",
                cfg.send_timeout.as_millis(),
                crate::runtime::mcp_tool_timeout(cfg.send_timeout).as_secs()
            );
        }
        raise_fd_limit();
        size_fd_table();
        realtime::start(cfg.realtime);
        log_colour_switches();
        Ok((cfg, fatal))
    }

    /// Single instance: a lock held for the daemon's life, plus the spec's socket probe; then
    /// the control socket, listening, mode 0600.
    fn claim(paths: &Paths) -> Result<(std::fs::File, UnixListener), DaemonError> {
        let sock = paths.socket();
        let lock_path = paths.state_dir().join("daemon.lock");
        let lock = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(MODE_PRIVATE)
                .open(&lock_path)
                .map_err(io_err(format!("cannot open {}", lock_path.display())))?
        };
        if lock.try_lock_exclusive().is_err() {
            // The lock is the root's: a daemon with another socket (IAPEER_DAEMON_SOCKET) on
            // the same root holds it too.
            return Err(DaemonError::AlreadyRunning(format!(
                "a daemon already runs on the root {} (it holds {}) — iapeer shutdown stops it, \
                 or give this one another IAPEER_ROOT",
                paths.root().display(),
                lock_path.display()
            )));
        }
        if socket_answers(&sock, Duration::from_millis(500)) {
            return Err(DaemonError::AlreadyRunning(format!(
                "a daemon is already listening on {} — iapeer shutdown stops it",
                sock.display()
            )));
        }
        // With the root's lock held: what a crashed daemon's sessions left is this one's to end.
        crate::session::contain::init(paths.root(), test_hooks::allows_cgroups());
        #[cfg(target_os = "linux")]
        crate::session::exits::start();
        let _ = std::fs::remove_file(&sock);
        if let Some(dir) = sock.parent() {
            ensure_dir(dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
        }
        let listener = UnixListener::bind(&sock).map_err(|e| {
            // A Unix socket path has a small limit (about 100 bytes).
            let hint = if sock.as_os_str().len() > 100 {
                " — the path is too long for a Unix socket: set IAPEER_DAEMON_SOCKET to a shorter one"
            } else {
                ""
            };
            DaemonError::Io(format!("cannot listen on {}{hint}", sock.display()), e)
        })?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(MODE_PRIVATE))
            .map_err(io_err(format!("cannot set the mode of {}", sock.display())))?;
        Ok((lock, listener))
    }

    /// The HTTP server (MCP, the fleet API with its token, the page with its keys) and
    /// `router.json`; what the router is told about them.
    fn start_http(
        paths: &Paths,
        w: &Wiring,
        bus: &crate::eventbus::Bus,
    ) -> Result<(http::HttpServerHandle, DaemonInfo), DaemonError> {
        let (cfg, sock) = (&w.cfg, paths.socket());
        let backend: Arc<dyn Backend> = Arc::new(RouterBackend {
            tx: w.router_tx.clone(),
            fatal: w.fatal.clone(),
        });
        let fleet = Arc::new(fleet::Fleet::new(
            paths.clone(),
            bus.clone(),
            w.router_tx.clone(),
            w.fatal.clone(),
            w.started_ms,
        ));
        // The fleet API's secret: IAPEER_BEARER_TOKEN when set, else the fleet token.
        let fleet_token = match &cfg.bearer {
            Some(_) => {
                log::info!(
                    "fleet API: IAPEER_BEARER_TOKEN is set and gates it ({} is not used)",
                    paths.fleet_token().display()
                );
                None
            }
            None => fleet_token(paths),
        };
        // The web page's secrets (`iapeer ui`): without a random source or a writable key file
        // the daemon runs without the page, and says so.
        let restarts = guard::Restarts::new();
        let mut http_cfg = http::HttpConfig {
            hold_max: cfg.fleet_hold_max,
            restarts: restarts.clone(),
            ..http::HttpConfig::new(cfg.port, cfg.bearer.clone())
        }
        .with_fleet_token(fleet_token.clone());
        match ui::UiKeys::generate().and_then(|k| k.store(&paths.ui_key())) {
            Ok(keys) => http_cfg = http_cfg.with_ui(keys),
            Err(e) => log::warn!(
                "ui: the web page is not served: cannot make its key {}: {e}",
                paths.ui_key().display()
            ),
        }
        let http = match http::start(http_cfg, backend, Some(fleet)) {
            Ok(http) => http,
            Err(e) => {
                // No daemon: leave no socket that looks like one.
                let _ = std::fs::remove_file(&sock);
                return Err(DaemonError::Listen(cfg.port, e));
            }
        };
        let tcp = format!("http://127.0.0.1:{}/mcp", http.port());
        // `fleet: 1` advertises the fleet API under the same origin (spec 02 §1 step 4).
        write_json_atomic(
            &paths.router_json(),
            &json!({"sock": sock.display().to_string(), "tcp": tcp, "version": env!("CARGO_PKG_VERSION"), "fleet": 1}),
            MODE_PRIVATE,
        )
        .map_err(io_err("cannot write router.json"))?;
        let info = DaemonInfo {
            tcp,
            sock: sock.display().to_string(),
            port: http.port(),
            started_ms: w.started_ms,
            restarts,
            fleet_secret: cfg.bearer.clone().or(fleet_token),
        };
        Ok((http, info))
    }

    /// The signal pipe: SIGTERM, SIGINT and SIGHUP write to it, and so does the router thread
    /// when it fails (the second end returned), so the control loop stops.
    fn signal_pipe() -> Result<(UnixStream, UnixStream), DaemonError> {
        let (sig_read, sig_write) =
            UnixStream::pair().map_err(io_err("cannot create the signal pipe"))?;
        for sig in [
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGHUP,
        ] {
            let w = sig_write
                .try_clone()
                .map_err(io_err("cannot create the signal pipe"))?;
            signal_hook::low_level::pipe::register(sig, w)
                .map_err(io_err("cannot install signal handlers"))?;
        }
        let router_failed = sig_write
            .try_clone()
            .map_err(io_err("cannot create the signal pipe"))?;
        Ok((sig_read, router_failed))
    }

    /// The router thread; a panic on it is recorded in `fatal` and written to `router_failed`.
    fn spawn_router(
        paths: &Paths,
        w: &Wiring,
        router_rx: router::inbox::Inbox,
        info: DaemonInfo,
        bus: crate::eventbus::Bus,
        mut router_failed: UnixStream,
    ) -> Result<std::thread::JoinHandle<()>, DaemonError> {
        let mut router = Router::new(paths.clone(), w.cfg.clone(), info, w.router_tx.clone(), bus);
        router.set_federation(w.hub.clone());
        let router_fatal = w.fatal.clone();
        std::thread::Builder::new()
            .name(ROUTER_THREAD.into())
            .spawn(move || {
                let _realtime = realtime::enter(ROUTER_THREAD);
                // Unwinding drops the router's state, and with it every waiting requester's
                // reply channel; the hook has recorded the failure before that, so they read it.
                if let Err(panic) = guard::catch(move || router.run(router_rx)) {
                    router_fatal.set(format!("the router thread panicked ({panic})"));
                    let _ = router_failed.write_all(b"!");
                }
            })
            .map_err(io_err("cannot start the router thread"))
    }
}

impl Running {
    /// Serve until a signal or the router's failure stops the control loop: claims a previous
    /// daemon left are pending again, the outbox drains, then the control loop runs.
    ///
    /// Errors: the control loop's own failure (passed to [`Running::shutdown`]).
    pub fn serve(&mut self) -> io::Result<()> {
        // Holds a previous daemon claimed for confirm-send and never finished wait again.
        for id in crate::origin::recover_claims(&self.paths) {
            log::info!(
                "origin guard: held message {id} is pending again (its confirm-send was cut off)"
            );
        }
        // Sends kept while the daemon was down go out now (issue 11 item 7).
        crate::outbox::drain_in_background(self.paths.clone());
        let served = self.control.run();
        self.peers_watch_stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        served
    }

    /// Shut down, bounded by [`SHUTDOWN_BOUND`] from now: stop accepting, end sessions
    /// (marking agents resume-eligible), clean up. After a router failure the router's
    /// sessions are gone: their children are ended by process group instead.
    ///
    /// Errors: [`DaemonError::Fatal`] after a router failure; else `served`'s error.
    pub fn shutdown(self, served: io::Result<()>) -> Result<(), DaemonError> {
        let Running {
            paths,
            sock,
            lock,
            mut control,
            router_tx,
            router_thread,
            mut http,
            fatal,
            federation_stop,
            federation_threads,
            ..
        } = self;
        drop(federation_stop);
        let _ = std::fs::remove_file(&sock);
        let start = Instant::now();
        let failed = fatal.get().map(str::to_string);
        let router_by = start + ROUTER_SHUTDOWN;
        match &failed {
            Some(what) => log::error!("{what}: ending the sessions and exiting"),
            None => {
                let (done_tx, done_rx) = crossbeam_channel::bounded(1);
                if router_tx
                    .send(RouterMsg::Shutdown { done: done_tx })
                    .is_ok()
                {
                    // Every request the router held gets its final line (`shutting-down`, or
                    // a send's own answer once the delivery a session holds ends; a
                    // delivery.log line for each send) before the connections close.
                    control.finish_pending(start + ANSWER_BOUND);
                    let _ =
                        done_rx.recv_timeout(router_by.saturating_duration_since(Instant::now()));
                }
            }
        }
        drop(control);
        drop(router_tx);
        guard::finish_by(router_by, "the router thread", move || {
            let _ = router_thread.join();
        });
        let ended = crate::session::groups::end_all(LEFTOVER_GRACE);
        if ended > 0 {
            log::warn!("shutdown: ended {ended} child process group(s) the router did not");
        }
        let strays = crate::session::contain::end_all();
        if strays > 0 {
            log::warn!("shutdown: ended {strays} process(es) the sessions had left");
        }
        guard::finish_by(start + SHUTDOWN_BOUND, "the HTTP server", move || {
            http.shutdown()
        });
        guard::finish_by(start + SHUTDOWN_BOUND, "the federation link", move || {
            for t in federation_threads {
                let _ = t.join();
            }
        });
        let _ = std::fs::remove_file(paths.router_json());
        let _ = std::fs::remove_file(paths.ui_key());
        let _ = std::fs::remove_file(paths.ui_open());
        drop(lock);
        match failed {
            Some(what) => {
                log::error!("daemon stopped after a failure: {what}");
                Err(DaemonError::Fatal(what))
            }
            None => {
                log::info!("daemon stopped");
                served.map_err(io_err("control loop failed"))
            }
        }
    }
}

#[cfg(test)]
mod fd_table_tests {
    use super::*;

    /// `FDSize:` of `/proc/self/status`: the slots of this process's descriptor table.
    fn fd_slots() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("FDSize:")).unwrap();
        line["FDSize:".len()..].trim().parse().unwrap()
    }

    #[test]
    fn the_table_is_sized_for_the_limit_at_most_the_cap() {
        assert_eq!(fd_table_size(1024), 1024);
        assert_eq!(fd_table_size(1_048_576), FD_TABLE_AT_START);
        assert_eq!(fd_table_size(64), 0, "the kernel's first table");
        assert_eq!(fd_table_size(0), 0);
    }

    #[test]
    fn sizing_grows_the_table_and_leaves_no_descriptor_open() {
        let size = size_fd_table();
        assert!(size > 64, "a test process's limit is above 64");
        assert!(fd_slots() >= size, "FDSize {} < {size}", fd_slots());
        let last = format!("/proc/self/fd/{}", size - 1);
        assert!(!std::path::Path::new(&last).exists(), "{last} left open");
    }
}

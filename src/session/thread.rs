//! The session thread (spec 04 §1): owns one child (pty or pipes), its pane log, its screen
//! model and its attached clients; boots it, delivers into it, reports to the router, and
//! writes `exits.log` when it dies.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use nix::sys::signal::Signal;

use super::boot::{Boot, BootAction};
use super::clients::{Client, ClientInput};
use super::compact::{ActiveCompact, CompactStep};
use super::deliver::{ActiveDelivery, Step};
use super::handle::{
    Cause, Delivery, EventKind, SessionCmd, SessionEvent, SessionHandle, SessionStatus,
};
use super::panelog::PaneLog;
use super::screen::Screen;
use super::spawn::{self, SpawnSpec};
use crate::eventlog::{Event, EventLog};
use crate::runtime::{Adapter, RuntimeKind};

/// Session pty size: 50 rows × 220 columns, set before the child starts (spec 04 §1).
pub const ROWS: u16 = 50;
/// See [`ROWS`].
pub const COLS: u16 = 220;
/// After SIGTERM, the process group gets SIGKILL this much later.
const KILL_GRACE: Duration = Duration::from_secs(3);
/// A ready screen whose MCP client has not connected after this long goes ahead anyway (the
/// agent then lacks `send_to_peer` for its first turn; the lifecycle log says so).
const MCP_GRACE: Duration = Duration::from_secs(20);
/// Bytes of screen text kept in `exits.log` for an unexpected death.
const EXIT_TAIL: usize = 2048;

const CHILD_OUT: Token = Token(0);
const CHILD_ERR: Token = Token(1);
const CHILD_IN: Token = Token(2);
const WAKER: Token = Token(3);
const FIRST_CLIENT: usize = 16;

/// Everything a session thread needs besides the child.
pub struct SessionConfig {
    /// Unique id of this launch (events carry it).
    pub session: u64,
    /// `<runtime>-<personality>`.
    pub identity: String,
    /// The peer's working folder.
    pub cwd: PathBuf,
    /// The runtime's behaviour.
    pub adapter: Arc<dyn Adapter>,
    /// `logs/lifecycle/<identity>.log`.
    pub pane_log: PathBuf,
    /// `logs/iapeer/exits.log`.
    pub exits_log: PathBuf,
    /// Boot → ready deadline.
    pub boot_deadline: Duration,
    /// The first message of a wake, delivered once ready.
    pub first: Option<Delivery>,
}

/// Spawn the child for `spec` and start its session thread. Returns the handle and the pid.
///
/// Errors: the child could not be started (the reason is the wake failure reason).
pub fn start(
    cfg: SessionConfig,
    spec: &SpawnSpec,
    events: Sender<SessionEvent>,
) -> io::Result<(SessionHandle, u32)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let (io, child) = match cfg.adapter.kind() {
        RuntimeKind::Agent => {
            let p = spawn::spawn_pty(spec, ROWS, COLS)?;
            (Io::Pty(File::from(p.master)), p.child)
        }
        RuntimeKind::Router => {
            let p = spawn::spawn_pipes(spec)?;
            (
                Io::Pipes {
                    stdin: Some(p.stdin),
                    stdout: Some(p.stdout),
                    stderr: Some(p.stderr),
                },
                p.child,
            )
        }
    };
    let pid = child.id();
    let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
    let (exit_tx, exit_rx) = crossbeam_channel::bounded(1);
    spawn_waiter(child, exit_tx, waker.clone())?;
    let handle = SessionHandle { tx: cmd_tx, waker };
    let name = format!("session-{}", cfg.identity);
    let session_id = cfg.session;
    let events_for_panic = events.clone();
    std::thread::Builder::new().name(name).spawn(move || {
        let run = std::panic::AssertUnwindSafe(move || {
            match Session::new(cfg, poll, io, pid, cmd_rx, exit_rx, events) {
                Ok(mut s) => s.run(),
                Err(e) => log::error!("session setup failed: {e}"),
            }
        });
        if std::panic::catch_unwind(run).is_err() {
            // A panic must not take the daemon down: end the child, report the death.
            log::error!("session thread {session_id} panicked; ending its process group");
            let _ = spawn::signal_group(pid, Signal::SIGKILL);
            let _ = events_for_panic.send(SessionEvent {
                session: session_id,
                kind: EventKind::Exited {
                    status: None,
                    signal: None,
                    cause: Cause::KilledByDaemon,
                },
            });
        }
    })?;
    Ok((handle, pid))
}

/// One waiter thread per child (no `waitpid(-1)`): reaps it and wakes the session.
fn spawn_waiter(
    mut child: Child,
    tx: Sender<io::Result<ExitStatus>>,
    waker: Arc<Waker>,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("session-waiter".into())
        .spawn(move || {
            let status = child.wait();
            let _ = tx.send(status);
            let _ = waker.wake();
        })?;
    Ok(())
}

enum Io {
    Pty(File),
    Pipes {
        stdin: Option<ChildStdin>,
        stdout: Option<ChildStdout>,
        stderr: Option<ChildStderr>,
    },
}

enum State {
    Booting(Boot),
    Ready,
}

struct Session {
    cfg: SessionConfig,
    poll: Poll,
    io: Io,
    pid: u32,
    started: Instant,
    cmd_rx: Receiver<SessionCmd>,
    exit_rx: Receiver<io::Result<ExitStatus>>,
    events: Sender<SessionEvent>,
    screen: Screen,
    /// Last output kept for router runtimes (they have no screen model worth reading).
    pipe_tail: VecDeque<u8>,
    pane: PaneLog,
    to_child: VecDeque<u8>,
    state: State,
    delivery: Option<ActiveDelivery>,
    queued: VecDeque<Delivery>,
    compact: Option<ActiveCompact>,
    clients: HashMap<Token, Client>,
    next_client: usize,
    pending_size: Option<(u16, u16)>,
    attached_output_ms: Option<u64>,
    kill: Option<(Cause, Instant)>,
    exit: Option<io::Result<ExitStatus>>,
    /// The agent's MCP client has listed the tools.
    mcp_up: bool,
    /// When the screen first looked ready while the MCP client was still connecting.
    mcp_wait_since: Option<Instant>,
}

impl Session {
    fn new(
        cfg: SessionConfig,
        poll: Poll,
        io: Io,
        pid: u32,
        cmd_rx: Receiver<SessionCmd>,
        exit_rx: Receiver<io::Result<ExitStatus>>,
        events: Sender<SessionEvent>,
    ) -> io::Result<Session> {
        let reg = poll.registry();
        match &io {
            Io::Pty(master) => reg.register(
                &mut SourceFd(&master.as_raw_fd()),
                CHILD_OUT,
                Interest::READABLE | Interest::WRITABLE,
            )?,
            Io::Pipes {
                stdin,
                stdout,
                stderr,
            } => {
                if let Some(s) = stdin {
                    reg.register(&mut SourceFd(&s.as_raw_fd()), CHILD_IN, Interest::WRITABLE)?;
                }
                if let Some(s) = stdout {
                    reg.register(&mut SourceFd(&s.as_raw_fd()), CHILD_OUT, Interest::READABLE)?;
                }
                if let Some(s) = stderr {
                    reg.register(&mut SourceFd(&s.as_raw_fd()), CHILD_ERR, Interest::READABLE)?;
                }
            }
        }
        let now = Instant::now();
        let state = match cfg.adapter.kind() {
            RuntimeKind::Agent => State::Booting(Boot::new(
                now,
                cfg.boot_deadline,
                cfg.adapter.ready_settle(),
            )),
            RuntimeKind::Router => State::Ready,
        };
        let mut queued = VecDeque::new();
        if let Some(first) = cfg.first.clone() {
            queued.push_back(first);
        }
        let pane = PaneLog::new(cfg.pane_log.clone());
        Ok(Session {
            cfg,
            poll,
            io,
            pid,
            started: now,
            cmd_rx,
            exit_rx,
            events,
            screen: Screen::new(ROWS, COLS),
            pipe_tail: VecDeque::new(),
            pane,
            to_child: VecDeque::new(),
            state,
            delivery: None,
            queued,
            compact: None,
            clients: HashMap::new(),
            next_client: FIRST_CLIENT,
            pending_size: None,
            attached_output_ms: None,
            kill: None,
            exit: None,
            mcp_up: false,
            mcp_wait_since: None,
        })
    }

    fn emit(&self, kind: EventKind) {
        let _ = self.events.send(SessionEvent {
            session: self.cfg.session,
            kind,
        });
    }

    fn run(&mut self) {
        match self.state {
            State::Booting(_) => self.emit(EventKind::Phase("booting".into())),
            State::Ready => {
                self.emit(EventKind::Ready);
                self.next_delivery();
            }
        }
        let mut events = Events::with_capacity(64);
        loop {
            let timeout = self
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    log::error!("session {} poll: {e}", self.cfg.identity);
                    self.kill(Cause::KilledByDaemon);
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    CHILD_OUT => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read_child(false);
                        }
                        if ev.is_writable() {
                            self.flush_child();
                        }
                    }
                    CHILD_ERR => self.read_child(true),
                    CHILD_IN => self.flush_child(),
                    WAKER => self.drain_commands(),
                    t => self.client_event(t, ev.is_readable(), ev.is_writable()),
                }
            }
            // Commands may arrive without a wake if the waker raced with a previous poll.
            self.drain_commands();
            self.on_time(Instant::now());
            if self.exit.is_none() {
                if let Ok(status) = self.exit_rx.try_recv() {
                    self.exit = Some(status);
                }
            }
            if self.exit.is_some() {
                self.finish();
                return;
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if let State::Booting(b) = &self.state {
            consider(Some(b.next_deadline()));
            consider(self.mcp_wait_since.map(|s| s + MCP_GRACE));
        }
        consider(self.delivery.as_ref().and_then(|d| d.next_deadline()));
        consider(self.compact.as_ref().and_then(|c| c.next_deadline()));
        consider(self.kill.map(|(_, at)| at));
        next
    }

    // ----- child I/O -------------------------------------------------------------------

    fn read_child(&mut self, stderr: bool) {
        let mut buf = [0u8; 64 * 1024];
        loop {
            let r = match &mut self.io {
                Io::Pty(m) => m.read(&mut buf),
                Io::Pipes {
                    stdout,
                    stderr: err,
                    ..
                } => {
                    let src: Option<&mut dyn Read> = if stderr {
                        err.as_mut().map(|s| s as &mut dyn Read)
                    } else {
                        stdout.as_mut().map(|s| s as &mut dyn Read)
                    };
                    match src {
                        Some(s) => s.read(&mut buf),
                        None => return,
                    }
                }
            };
            match r {
                Ok(0) => {
                    self.close_output(stderr);
                    return;
                }
                Ok(n) => {
                    let chunk = buf[..n].to_vec();
                    self.on_output(&chunk);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // EIO on Linux: every slave fd is closed (the child and its children exited).
                    self.close_output(stderr);
                    return;
                }
            }
        }
    }

    fn close_output(&mut self, stderr: bool) {
        let reg = self.poll.registry();
        match &mut self.io {
            Io::Pty(m) => {
                let _ = reg.deregister(&mut SourceFd(&m.as_raw_fd()));
            }
            Io::Pipes {
                stdout,
                stderr: err,
                ..
            } => {
                let slot = if stderr {
                    err.take().map(|s| s.as_raw_fd())
                } else {
                    stdout.take().map(|s| s.as_raw_fd())
                };
                if let Some(fd) = slot {
                    let _ = reg.deregister(&mut SourceFd(&fd));
                }
            }
        }
    }

    fn on_output(&mut self, chunk: &[u8]) {
        self.pane.append(chunk);
        if matches!(self.io, Io::Pipes { .. }) {
            self.pipe_tail.extend(chunk);
            let excess = self.pipe_tail.len().saturating_sub(EXIT_TAIL);
            self.pipe_tail.drain(..excess);
            return;
        }
        let human = self.clients.values().any(|c| c.sized);
        let fed = self.screen.feed(chunk, !human);
        if !fed.replies.is_empty() {
            self.write_child(&fed.replies);
        }
        if human {
            self.attached_output_ms = Some(crate::clock::now_ms());
            let mut dropped = Vec::new();
            for (t, c) in self.clients.iter_mut().filter(|(_, c)| c.sized) {
                if !c.queue(&fed.forward) || c.flush().is_err() {
                    dropped.push(*t);
                }
            }
            for t in dropped {
                self.drop_client(t);
            }
        }
        if let Some(d) = self.delivery.as_mut() {
            d.on_output(chunk, Instant::now());
        }
        self.evaluate_boot(Instant::now());
    }

    fn write_child(&mut self, bytes: &[u8]) {
        self.to_child.extend(bytes);
        self.flush_child();
    }

    fn flush_child(&mut self) {
        let mut failed = None;
        while !self.to_child.is_empty() {
            let (a, _) = self.to_child.as_slices();
            let r = match &mut self.io {
                Io::Pty(m) => m.write(a),
                Io::Pipes { stdin, .. } => match stdin {
                    Some(s) => s.write(a),
                    None => Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "its stdin is closed",
                    )),
                },
            };
            match r {
                Ok(n) => {
                    self.to_child.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::warn!("session {}: write to child failed: {e}", self.cfg.identity);
                    self.to_child.clear();
                    failed = Some(e);
                    break;
                }
            }
        }
        // Bytes that never reached the child confirm nothing: for a router runtime "written"
        // is the confirmation, so a failed write must fail the delivery, not complete it.
        if let Some(e) = failed {
            if let Some(d) = self.delivery.take() {
                self.emit(EventKind::Delivered {
                    id: d.id,
                    result: Err(format!("could not write to the session: {e}")),
                });
            }
            return;
        }
        if let Some(d) = self.delivery.as_mut() {
            let step = d.on_written(Instant::now());
            self.apply(step);
        }
        if let Some(c) = self.compact.as_mut() {
            c.on_written(Instant::now());
        }
    }

    // ----- boot and deliveries ---------------------------------------------------------

    fn evaluate_boot(&mut self, now: Instant) {
        let State::Booting(boot) = &mut self.state else {
            return;
        };
        let step = self.cfg.adapter.boot_step(&self.screen);
        let hash = hash_text(&self.screen.text());
        match boot.evaluate(now, step, hash) {
            BootAction::Wait => {}
            BootAction::Key { bytes, label } => {
                self.emit(EventKind::Phase(format!("answering dialog: {label}")));
                self.write_child(&bytes);
            }
            BootAction::Ready
                if !self.mcp_up
                    && self.cfg.adapter.waits_for_mcp(&self.cfg.cwd)
                    && !self.mcp_grace_over(now) => {}
            BootAction::Ready => {
                if !self.mcp_up && self.mcp_wait_since.is_some() {
                    self.emit(EventKind::Phase(
                        "ready without MCP: the agent's iapeer server did not connect".into(),
                    ));
                }
                self.state = State::Ready;
                if let Some((rows, cols)) = self.pending_size.take() {
                    self.resize(rows, cols);
                }
                self.emit(EventKind::Ready);
                self.next_delivery();
            }
            BootAction::Failed(reason) => {
                let timeout = reason.starts_with("never became ready");
                let screen = self.screen.tail_text(EXIT_TAIL);
                self.emit(EventKind::BootFailed {
                    reason: with_screen(&reason, &screen),
                    screen,
                });
                self.fail_deliveries(&reason);
                self.kill(if timeout {
                    Cause::BootTimeout
                } else {
                    Cause::KilledByDaemon
                });
                // Stop evaluating: the session is ending.
                self.state = State::Ready;
            }
        }
    }

    /// Start (or check) the wait for the MCP client; true once [`MCP_GRACE`] is over.
    fn mcp_grace_over(&mut self, now: Instant) -> bool {
        match self.mcp_wait_since {
            None => {
                self.mcp_wait_since = Some(now);
                self.emit(EventKind::Phase(
                    "waiting for the agent's MCP connection".into(),
                ));
                false
            }
            Some(since) => now >= since + MCP_GRACE,
        }
    }

    fn next_delivery(&mut self) {
        if self.delivery.is_some() || self.kill.is_some() || !matches!(self.state, State::Ready) {
            return;
        }
        let Some(d) = self.queued.pop_front() else {
            return;
        };
        if d.ready_gate.is_some() {
            self.emit(EventKind::Phase("delivering".into()));
        }
        let confirmer = self
            .cfg
            .adapter
            .confirmer(&self.cfg.cwd, &d.text, d.agent_ts.as_deref());
        let before = d
            .ready_gate
            .and_then(|_| self.cfg.adapter.activity_ms(&self.cfg.cwd));
        let pty = matches!(self.io, Io::Pty(_));
        let gate = d
            .ready_gate
            .and_then(|_| self.cfg.adapter.gate_watch(&self.cfg.cwd));
        let (active, bytes) = ActiveDelivery::start(&d, pty, confirmer, before, gate);
        self.delivery = Some(active);
        self.write_child(&bytes);
    }

    fn apply(&mut self, step: Step) {
        match step {
            Step::Wait => {}
            Step::Write(bytes) => self.write_child(&bytes),
            Step::Done(result) => {
                if let Some(d) = self.delivery.take() {
                    self.emit(EventKind::Delivered { id: d.id, result });
                }
                self.next_delivery();
            }
        }
    }

    fn fail_deliveries(&mut self, reason: &str) {
        if let Some(d) = self.delivery.take() {
            self.emit(EventKind::Delivered {
                id: d.id,
                result: Err(reason.to_string()),
            });
        }
        while let Some(d) = self.queued.pop_front() {
            self.emit(EventKind::Delivered {
                id: d.id,
                result: Err(reason.to_string()),
            });
        }
    }

    fn on_time(&mut self, now: Instant) {
        if matches!(self.state, State::Booting(_)) {
            self.evaluate_boot(now);
        }
        if let Some(d) = self.delivery.as_mut() {
            let adapter = self.cfg.adapter.clone();
            let cwd = self.cfg.cwd.clone();
            let screen = &self.screen;
            let step = d.poll(now, || adapter.activity_ms(&cwd), || screen.text());
            self.apply(step);
        }
        if let Some(c) = self.compact.as_mut() {
            match c.poll(now, &self.screen.text()) {
                CompactStep::Wait => {}
                CompactStep::Write(bytes) => self.write_child(&bytes),
                CompactStep::Done(result) => {
                    let id = c.id;
                    self.compact = None;
                    self.emit(EventKind::Compacted { id, result });
                }
            }
        }
        if let Some((cause, at)) = self.kill {
            if now >= at {
                let _ = spawn::signal_group(self.pid, Signal::SIGKILL);
                self.kill = Some((cause, now + KILL_GRACE));
            }
        }
    }

    // ----- commands --------------------------------------------------------------------

    fn drain_commands(&mut self) {
        while let Ok(cmd) = self.cmd_rx.try_recv() {
            match cmd {
                SessionCmd::Deliver(d) => {
                    if self.kill.is_some() {
                        self.emit(EventKind::Delivered {
                            id: d.id,
                            result: Err("the session is ending".into()),
                        });
                    } else {
                        self.queued.push_back(d);
                        self.next_delivery();
                    }
                }
                SessionCmd::Keys(bytes) => self.write_child(&bytes),
                SessionCmd::McpUp => {
                    self.mcp_up = true;
                    self.evaluate_boot(Instant::now());
                }
                SessionCmd::Compact(id) => self.start_compact(id),
                SessionCmd::Attach(stream, prebuf) => self.attach(stream, prebuf),
                SessionCmd::Probe => {
                    let status = self.status();
                    self.emit(EventKind::Status(status));
                }
                SessionCmd::Kill(cause) => self.kill(cause),
            }
        }
    }

    fn start_compact(&mut self, id: u64) {
        let refuse = |s: &Self, why: &str| {
            s.emit(EventKind::Compacted {
                id,
                result: Err(why.to_string()),
            });
        };
        if self.kill.is_some() || !matches!(self.state, State::Ready) {
            return refuse(self, "the session is not ready");
        }
        if self.delivery.is_some() || self.compact.is_some() {
            return refuse(
                self,
                "the session is busy with another delivery or compaction",
            );
        }
        // Never type a command into someone's draft (a human's, or a message an interrupt
        // put back into the composer).
        let draft = self
            .cfg
            .adapter
            .prompt_glyph()
            .and_then(|g| self.screen.composer_text(g))
            .filter(|c| c.typed);
        if let Some(d) = draft {
            let shown: String = d.text.chars().take(40).collect();
            return refuse(
                self,
                &format!("the composer holds a draft (\"{shown}…\") — clear it, then compact"),
            );
        }
        match self.cfg.adapter.compact(&self.cfg.cwd) {
            None => refuse(
                self,
                &format!("{} does not support compact", self.cfg.adapter.name()),
            ),
            Some((command, watch)) => {
                let (c, bytes) = ActiveCompact::start(id, command, watch);
                self.compact = Some(c);
                self.write_child(&bytes);
            }
        }
    }

    fn status(&self) -> SessionStatus {
        let pty = matches!(self.io, Io::Pty(_));
        SessionStatus {
            activity_ms: self.cfg.adapter.activity_ms(&self.cfg.cwd),
            busy: pty && self.cfg.adapter.is_busy(&self.screen),
            attached: self.clients.values().filter(|c| c.sized).count(),
            attached_output_ms: self.attached_output_ms,
        }
    }

    fn kill(&mut self, cause: Cause) {
        if self.kill.is_some() {
            return;
        }
        let _ = spawn::signal_group(self.pid, Signal::SIGHUP);
        let _ = spawn::signal_group(self.pid, Signal::SIGTERM);
        self.kill = Some((cause, Instant::now() + KILL_GRACE));
    }

    // ----- attach clients --------------------------------------------------------------

    fn attach(&mut self, stream: std::os::unix::net::UnixStream, prebuf: Vec<u8>) {
        let mut client = match Client::new(stream, &prebuf) {
            Ok(c) => c,
            Err(e) => {
                log::warn!("attach to {} failed: {e}", self.cfg.identity);
                return;
            }
        };
        let token = Token(self.next_client);
        self.next_client += 1;
        if let Err(e) = self.poll.registry().register(
            &mut client.stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warn!("attach to {} failed: {e}", self.cfg.identity);
            return;
        }
        let input = client.pending_input().unwrap_or_default();
        self.clients.insert(token, client);
        self.handle_client_input(token, input);
    }

    fn client_event(&mut self, token: Token, readable: bool, writable: bool) {
        let Some(client) = self.clients.get_mut(&token) else {
            return;
        };
        if writable && client.flush().is_err() {
            self.drop_client(token);
            return;
        }
        if readable {
            let (input, gone) = client.read();
            self.handle_client_input(token, input);
            if gone {
                self.drop_client(token);
            }
        }
    }

    fn handle_client_input(&mut self, token: Token, input: Vec<ClientInput>) {
        for i in input {
            match i {
                ClientInput::Data(bytes) => self.write_child(&bytes),
                ClientInput::Resize { rows, cols, first } => {
                    // Resize first (once booted), so the snapshot is taken at the client's size
                    // and the TUI's redraw for that size follows it.
                    if rows > 0 && cols > 0 {
                        match self.state {
                            // Never resize during boot: some TUIs hang when resized while starting.
                            State::Booting(_) => self.pending_size = Some((rows, cols)),
                            State::Ready => self.resize(rows, cols),
                        }
                    }
                    if first {
                        let snapshot = self.screen.snapshot();
                        if let Some(c) = self.clients.get_mut(&token) {
                            if !c.queue(&snapshot) || c.flush().is_err() {
                                self.drop_client(token);
                                return;
                            }
                        }
                        let n = self.clients.values().filter(|c| c.sized).count();
                        self.emit(EventKind::Attached(n));
                    }
                }
            }
        }
    }

    fn resize(&mut self, rows: u16, cols: u16) {
        if let Io::Pty(m) = &self.io {
            let fd: std::os::fd::OwnedFd = match m.try_clone() {
                Ok(f) => f.into(),
                Err(_) => return,
            };
            if spawn::set_pty_size(&fd, rows, cols).is_ok() {
                self.screen.resize(rows, cols);
            }
        }
    }

    fn drop_client(&mut self, token: Token) {
        if let Some(mut c) = self.clients.remove(&token) {
            let _ = self.poll.registry().deregister(&mut c.stream);
            if c.sized {
                let n = self.clients.values().filter(|c| c.sized).count();
                self.emit(EventKind::Attached(n));
            }
        }
    }

    // ----- death -----------------------------------------------------------------------

    fn finish(&mut self) {
        // Drain what the child printed before it died (the pty may still hold output).
        self.read_child(false);
        if matches!(self.io, Io::Pipes { .. }) {
            self.read_child(true);
        }
        let status = self.exit.take().and_then(|r| r.ok());
        let code = status.and_then(|s| s.code());
        let signal = status
            .and_then(|s| s.signal())
            .and_then(|n| Signal::try_from(n).ok())
            .map(|s| s.as_str().to_string());
        let cause = self.kill.map(|(c, _)| c).unwrap_or(Cause::ChildExit);
        let tail = self.tail_text();
        if let State::Booting(_) = self.state {
            let reason = self
                .cfg
                .adapter
                .explain_exit(&tail)
                .unwrap_or_else(|| exit_reason(code, signal.as_deref()));
            self.emit(EventKind::BootFailed {
                reason: with_screen(&reason, &tail),
                screen: tail.clone(),
            });
        }
        self.fail_deliveries("the session ended before confirming the message");
        if let Some(c) = self.compact.take() {
            self.emit(EventKind::Compacted {
                id: c.id,
                result: Err("the session ended during compaction".into()),
            });
        }
        let mut ev = Event::new("session-exit")
            .field("identity", &self.cfg.identity)
            .field("pid", self.pid.to_string())
            .field("status", code.map(|c| c.to_string()).unwrap_or_default())
            .field("signal", signal.clone().unwrap_or_default())
            .field("uptime_s", self.started.elapsed().as_secs().to_string())
            .field("cause", cause.as_str());
        if !cause.expected() {
            ev = ev.field("tail", tail);
        }
        EventLog::from_env(self.cfg.exits_log.clone(), "EXITS").append(&ev);
        self.emit(EventKind::Exited {
            status: code,
            signal,
            cause,
        });
        // Dropping the clients closes their sockets: attached terminals see the end.
    }

    fn tail_text(&self) -> String {
        match self.io {
            Io::Pty(_) => self.screen.tail_text(EXIT_TAIL),
            Io::Pipes { .. } => {
                let bytes: Vec<u8> = self.pipe_tail.iter().copied().collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
        }
    }
}

fn exit_reason(code: Option<i32>, signal: Option<&str>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exited during boot (status {c})"),
        (None, Some(s)) => format!("exited during boot ({s})"),
        _ => "exited during boot".to_string(),
    }
}

/// A boot failure reason plus the last screen line that is not blank, for the sender.
fn with_screen(reason: &str, screen: &str) -> String {
    match screen.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
        Some(last) if !reason.contains(last) => format!("{reason} (last screen line: {last})"),
        _ => reason.to_string(),
    }
}

fn hash_text(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

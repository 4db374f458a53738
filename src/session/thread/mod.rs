//! The session thread (spec 04 §1): owns one child (pty or pipes), its pane log, its screen
//! model and its attached clients; boots it, delivers into it, reports to the router, and
//! writes `exits.log` when it dies.

mod attach;
mod child_io;
mod commands;
mod death;
mod own;
mod prompt;
mod turns;
mod work;

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use nix::sys::signal::Signal;

use super::boot::{Boot, BootAction};
use super::clients::{Client, ClientInput};
use super::compact::{ActiveCompact, CompactStep};
use super::deliver::{ActiveDelivery, GateFollower, QueueFollower, Span, Step, Taken};
use super::handle::{
    Cause, Delivery, EventKind, EventSink, ScreenText, SessionCmd, SessionEvent, SessionHandle,
    SessionStatus,
};
use super::outcome::{CompactFailure, DeliveryFailure, GateFailure};
use super::panelog::PaneLog;
use super::reap::Reaper;
use super::spawn::{self, SpawnSpec};
use crate::adapter::{Adapter, RuntimeKind};
use crate::eventlog::Event;
use crate::term::Screen;

// Session pty size, set before the child starts (spec 04 §1): the terminal layer's.
use crate::term::{SESSION_COLS as COLS, SESSION_ROWS as ROWS};
/// After SIGTERM, the process group (and all the session started: [`super::contain`]) gets
/// SIGKILL this much later.
const KILL_GRACE: Duration = Duration::from_secs(3);
/// A ready screen whose MCP client has not connected after this long goes ahead anyway (the
/// agent then lacks `send_to_peer` for its first turn; the lifecycle log says so).
const MCP_GRACE: Duration = Duration::from_secs(20);
/// Bytes of screen text kept in `exits.log` for an unexpected death.
const EXIT_TAIL: usize = 2048;
/// A session with no output for this long goes quiet (issue 31 item 4): its screen model
/// rests ([`Screen::rest`]: 344 KiB of cells become the few hundred bytes that redraw them)
/// and its pane log is closed (reopened by the next output).
const QUIET_AFTER: Duration = Duration::from_secs(10);

const CHILD_OUT: Token = Token(0);
const CHILD_ERR: Token = Token(1);
const CHILD_IN: Token = Token(2);
const WAKER: Token = Token(3);
const CHILD_EXIT: Token = Token(4);
const FIRST_CLIENT: usize = 16;

/// Everything a session thread needs besides the child.
pub struct SessionConfig {
    /// Unique id of this launch (events carry it).
    pub session: u64,
    /// `<runtime>-<personality>`.
    pub identity: String,
    /// The peer's working folder.
    pub cwd: PathBuf,
    /// The runtime's behaviour (bound to the session's conversation when its id is known:
    /// [`Adapter::for_conversation`]).
    pub adapter: Arc<dyn Adapter>,
    /// The session's conversation id when known at launch (chosen or resumed, issue 32);
    /// `None` until learned for a runtime whose ids iapeer learns
    /// ([`crate::adapter::ConversationNaming::Learned`]).
    pub conversation: Option<String>,
    /// `logs/lifecycle/<identity>.log`.
    pub pane_log: PathBuf,
    /// `logs/iapeer/exits.log`, tapped into the daemon's event bus.
    pub exits_log: crate::eventbus::TappedLog,
    /// Boot → ready deadline.
    pub boot_deadline: Duration,
    /// How long a human may take to answer a boot menu the adapter does not know
    /// (`IAPEER_APPROVAL_TIMEOUT_MS`): the boot deadline is moved to at least that far once
    /// they are asked, so their request, not the boot deadline, decides.
    pub human_wait: Duration,
    /// The first message of a wake, delivered once ready.
    pub first: Option<Delivery>,
    /// How long a delivery waits for a free composer ([`crate::session::hold`]).
    pub composer_hold: Duration,
    /// How long the child may take no byte of a delivery still being written before the
    /// delivery ends (`IAPEER_SEND_STALL_MS`; issue 26 item 6): taken back whole when none of
    /// it was written, else answered [`EventKind::Unconfirmed`] with the rest left queued.
    pub stall: Duration,
    /// Where message ids are recorded as begun before their first byte ([`crate::msgids`]);
    /// `None` records nothing.
    pub ids: Option<Arc<crate::msgids::Ledger>>,
    /// A gated agent (spec 10 §4): its permission hook puts each prompt to a human, so a
    /// prompt on its screen is reported as [`EventKind::PromptOpened`] with `hooked`.
    pub gated: bool,
    /// How long the answers to the child's terminal capability queries are held before they
    /// are written: zero (at once) but under the test hook `late-query-answers:<ms>`
    /// (`daemon::test_hooks`), which makes them come as late as on a loaded machine.
    pub late_answers: Duration,
}

/// Spawn the child for `spec` and start its session thread. Returns the handle and the pid.
///
/// Errors: the child could not be started (the reason is the wake failure reason).
pub fn start(
    cfg: SessionConfig,
    spec: &SpawnSpec,
    events: EventSink,
) -> io::Result<(SessionHandle, u32)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    // Everything the child starts ends with the session (dropping the scope ends it).
    let mut scope = super::contain::Scope::new(cfg.session, &cfg.identity, &spec.env);
    let (io, child) = match cfg.adapter.kind() {
        RuntimeKind::Agent => {
            let p = spawn::spawn_pty(spec, ROWS, COLS, scope.placement())?;
            (Io::Pty(File::from(p.master)), p.child)
        }
        RuntimeKind::Router => {
            let p = spawn::spawn_pipes(spec, scope.placement())?;
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
    scope.started(pid);
    let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
    let reaper = Reaper::start(child, poll.registry(), CHILD_EXIT, waker.clone())?;
    let handle = SessionHandle { tx: cmd_tx, waker };
    let name = format!("session-{}", cfg.identity);
    let session_id = cfg.session;
    let events_for_panic = events.clone();
    std::thread::Builder::new().name(name).spawn(move || {
        crate::session::priority::lower_this_thread();
        let events_for_setup = events.clone();
        let run = std::panic::AssertUnwindSafe(move || {
            match Session::new(cfg, poll, io, pid, cmd_rx, reaper, events) {
                Ok(mut s) => {
                    s.scope = Some(scope);
                    s.run()
                }
                Err(e) => {
                    // The child is already running: end it, and tell the router so the
                    // waiting sender gets the reason instead of waiting for ever.
                    log::error!("session {session_id} setup failed: {e}; ending its process group");
                    let _ = crate::child::signal_group(pid, Signal::SIGKILL);
                    for ev in setup_failed(session_id, &e) {
                        let _ = events_for_setup.send(ev);
                    }
                }
            }
        });
        if std::panic::catch_unwind(run).is_err() {
            // A panic must not take the daemon down: end the child, report the death.
            log::error!("session thread {session_id} panicked; ending its process group");
            let _ = crate::child::signal_group(pid, Signal::SIGKILL);
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

/// What a session whose setup failed reports, once its process group is killed: the boot
/// failure (for a waiting sender and `lifecycle.log`), then its end (`killed-by-daemon`).
fn setup_failed(session: u64, err: &io::Error) -> [SessionEvent; 2] {
    let reason = format!("the session could not be set up: {err}");
    [
        SessionEvent {
            session,
            kind: EventKind::BootFailed {
                failure: super::boot::BootFailure::Failed(reason),
                screen: String::new(),
                width: 0,
            },
        },
        SessionEvent {
            session,
            kind: EventKind::Exited {
                status: None,
                signal: None,
                cause: Cause::KilledByDaemon,
            },
        },
    ]
}

enum Io {
    Pty(File),
    Pipes {
        stdin: Option<ChildStdin>,
        stdout: Option<ChildStdout>,
        stderr: Option<ChildStderr>,
    },
}

/// Where the session is in its life; each state holds only its data.
enum State {
    Booting(Boot),
    Ready,
    /// Told to end (SIGHUP and SIGTERM sent) for `cause`: the process group gets SIGKILL at
    /// `kill_at` (and again [`KILL_GRACE`] later) until the child is reaped.
    Ending {
        cause: Cause,
        kill_at: Instant,
        /// The boot still under way when the end began: it is still evaluated until the
        /// child exits (a late ready screen or failure is reported as before the end).
        boot: Option<Boot>,
    },
}

impl State {
    /// The boot under way, if any (also while ending).
    fn boot_mut(&mut self) -> Option<&mut Boot> {
        match self {
            State::Booting(b) | State::Ending { boot: Some(b), .. } => Some(b),
            _ => None,
        }
    }

    /// The boot under way, if any (also while ending).
    fn boot(&self) -> Option<&Boot> {
        match self {
            State::Booting(b) | State::Ending { boot: Some(b), .. } => Some(b),
            _ => None,
        }
    }

    /// The boot is over (ready, or failed): `Ready`, or an end without its boot.
    fn boot_done(&mut self) {
        match self {
            State::Ending { boot, .. } => *boot = None,
            other => *other = State::Ready,
        }
    }

    /// Told to end for `cause`, SIGKILL due at `kill_at` (a boot under way goes on being
    /// evaluated). Nothing changes for a session already ending: its first cause stays.
    fn end(&mut self, cause: Cause, kill_at: Instant) {
        let boot = match std::mem::replace(self, State::Ready) {
            State::Booting(b) => Some(b),
            State::Ready => None,
            ending @ State::Ending { .. } => {
                *self = ending;
                return;
            }
        };
        *self = State::Ending {
            cause,
            kill_at,
            boot,
        };
    }

    /// The session was told to end.
    fn is_ending(&self) -> bool {
        matches!(self, State::Ending { .. })
    }

    /// Why the session was told to end, if it was.
    fn ending_cause(&self) -> Option<Cause> {
        match self {
            State::Ending { cause, .. } => Some(*cause),
            _ => None,
        }
    }
}

/// The delivery being written into the child or confirmed, with what belongs to it alone
/// (set at its start, gone at its end, together).
struct InFlight {
    /// Its machine: writing, the paste settling, the confirmation.
    active: ActiveDelivery,
    /// Its bytes as offsets of the child's input stream: how much of it was written
    /// ([`SessionCmd::Cancel`], a stall, an unconfirmed end).
    span: Span,
    /// Its paste as the composer shows it: Enter goes once the composer shows it (issue 13
    /// item 1); at its end it becomes [`Session::last_paste`].
    paste: crate::term::paste_view::PasteView,
}

struct Session {
    cfg: SessionConfig,
    poll: Poll,
    io: Io,
    pid: u32,
    started: Instant,
    /// The clock reading of this loop turn: read once, after the poll returns (as the
    /// router's `Now`), and used by everything the turn does.
    now: Instant,
    cmd_rx: Receiver<SessionCmd>,
    reaper: Reaper,
    events: EventSink,
    screen: Screen,
    /// When the session goes quiet next ([`QUIET_AFTER`] after its last output, or after a
    /// read brought a resting screen model back).
    quiet_at: Option<Instant>,
    /// Last output kept for router runtimes (they have no screen model worth reading).
    pipe_tail: VecDeque<u8>,
    pane: PaneLog,
    to_child: VecDeque<u8>,
    /// Bytes ever queued for the child's input, and ever written to it (the stream offsets
    /// that say how much of the active delivery was written, for [`SessionCmd::Cancel`]).
    out_queued: u64,
    out_written: u64,
    /// When the child last took a byte of its pending input (or the latest delivery began):
    /// a delivery still being written is ended [`SessionConfig::stall`] after it.
    out_progress_at: Instant,
    state: State,
    delivery: Option<InFlight>,
    queued: VecDeque<Delivery>,
    /// Messages the runtime queued behind a running turn, followed until their fate is known.
    followers: Vec<QueueFollower>,
    /// The ready gate of the wake's first message, followed after its sender was answered.
    gate: Option<GateFollower>,
    /// The turns of the messages the runtime took, until each ends (issue 32 item 2).
    turns: Vec<super::deliver::TurnFollower>,
    /// A delivery waiting for the composer to be free (spec 05 §7).
    held: Option<super::hold::Held>,
    /// iapeer's previous paste into this session (it may still show in the composer for a
    /// moment: [`super::hold::is_residue`]).
    last_paste: Option<super::hold::LastPaste>,
    /// iapeer's recent pastes, to tell its own text in the composer from a draft.
    own: super::own_text::Tracker,
    /// The composer being cleared of iapeer's own text, and that text's delivery id.
    clearing: Option<(super::clear::Clearing, u64)>,
    /// The clear key's presses on text nobody typed in the composer, before a delivery
    /// ([`super::hold::leftovers_step`]).
    leftover_presses: super::boot::ClearPresses,
    /// What the screen last said about a turn in progress (flips are reported).
    busy_shown: bool,
    /// Deliveries already answered as queued: their end is a `QueueOutcome`, not `Delivered`.
    answered_queued: std::collections::HashSet<u64>,
    compact: Option<ActiveCompact>,
    clients: HashMap<Token, Client>,
    next_client: usize,
    pending_size: Option<(u16, u16)>,
    attached_output_ms: Option<u64>,
    /// Last output byte of the child, epoch ms.
    output_ms: Option<u64>,
    /// What the child started, wherever it went (ended with the session, at the latest when
    /// the session is dropped).
    scope: Option<super::contain::Scope>,
    /// When the agent's MCP client first listed the tools.
    mcp_up_at: Option<Instant>,
    /// When the screen first looked ready while the MCP client was still connecting.
    mcp_wait_since: Option<Instant>,
    /// A human's choice for a boot menu the adapter did not know ([`SessionCmd::AnswerBootMenu`]):
    /// the option's index among that menu's labels, keyed in while that menu shows.
    menu_answer: Option<(usize, Vec<String>)>,
    /// The permission prompt on the live agent's screen, and the keys of its answer.
    prompts: super::prompts::Watch,
    /// Answers to terminal queries held for [`SessionConfig::late_answers`]: when each is due.
    late_answers: std::collections::VecDeque<(Instant, Vec<u8>)>,
}

impl Session {
    fn new(
        cfg: SessionConfig,
        poll: Poll,
        io: Io,
        pid: u32,
        cmd_rx: Receiver<SessionCmd>,
        reaper: Reaper,
        events: EventSink,
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
                cfg.adapter.ready_settle(&cfg.cwd),
                cfg.adapter.boot_key_gap(),
            )),
            RuntimeKind::Router => State::Ready,
        };
        let mut queued = VecDeque::new();
        if let Some(first) = cfg.first.clone() {
            queued.push_back(first);
        }
        let pane = PaneLog::new(cfg.pane_log.clone());
        let prompts =
            super::prompts::Watch::new(cfg.adapter.boot_key_gap(), cfg.adapter.prompt_settle());
        Ok(Session {
            cfg,
            poll,
            io,
            pid,
            started: now,
            now,
            cmd_rx,
            reaper,
            events,
            screen: Screen::new(ROWS, COLS),
            quiet_at: None,
            pipe_tail: VecDeque::new(),
            pane,
            to_child: VecDeque::new(),
            out_queued: 0,
            out_written: 0,
            out_progress_at: now,
            state,
            delivery: None,
            queued,
            followers: Vec::new(),
            gate: None,
            turns: Vec::new(),
            held: None,
            last_paste: None,
            own: Default::default(),
            clearing: None,
            leftover_presses: Default::default(),
            busy_shown: false,
            answered_queued: std::collections::HashSet::new(),
            compact: None,
            clients: HashMap::new(),
            next_client: FIRST_CLIENT,
            pending_size: None,
            attached_output_ms: None,
            output_ms: None,
            scope: None,
            mcp_up_at: None,
            mcp_wait_since: None,
            menu_answer: None,
            prompts,
            late_answers: Default::default(),
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
                self.emit(EventKind::Ready(Default::default()));
                self.next_delivery();
            }
            State::Ending { .. } => {}
        }
        let mut events = Events::with_capacity(64);
        loop {
            let timeout = self
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()));
            let polled = self.poll.poll(&mut events, timeout);
            self.now = Instant::now();
            if let Err(e) = polled {
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
                    CHILD_EXIT => {} // the reaper is asked below
                    t => self.client_event(t, ev.is_readable(), ev.is_writable()),
                }
            }
            // Commands may arrive without a wake if the waker raced with a previous poll.
            self.drain_commands();
            self.on_time(self.now);
            self.go_quiet();
            if let Some(status) = self.reaper.try_exit() {
                self.finish(status);
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
        if let Some(b) = self.state.boot() {
            consider(Some(b.next_deadline()));
            consider(self.mcp_wait_since.map(|s| s + MCP_GRACE));
        }
        consider(
            self.delivery
                .as_ref()
                .and_then(|f| f.active.next_deadline()),
        );
        consider(self.stall_at());
        for f in &self.followers {
            consider(Some(f.next_deadline()));
        }
        consider(self.gate.as_ref().map(|g| g.next_deadline()));
        consider(self.next_turn_poll());
        consider(self.held.as_ref().map(|h| h.next_check));
        consider(self.clearing.as_ref().map(|(c, _)| c.next_deadline()));
        consider(self.own.next_deadline());
        consider(self.compact.as_ref().and_then(|c| c.next_deadline()));
        if let State::Ending { kill_at, .. } = self.state {
            consider(Some(kill_at));
        }
        consider(self.prompts.next_deadline());
        consider(self.late_answers.front().map(|(at, _)| *at));
        consider(self.quiet_at);
        next
    }

    /// Go quiet when due: the screen model rests and the pane log is closed. A model in
    /// memory that may rest is due [`QUIET_AFTER`] from now (output pushes that back:
    /// [`Session::on_output`]).
    fn go_quiet(&mut self) {
        match self.quiet_at {
            Some(at) if self.now >= at => {
                let held = self.screen.in_memory();
                if self.screen.rest() && held {
                    release_freed_memory();
                }
                self.pane.close();
                self.quiet_at = None;
            }
            None if self.screen.may_rest() => {
                self.quiet_at = Some(self.now + QUIET_AFTER);
            }
            _ => {}
        }
    }
    // The rest of the session's methods live in the submodules: child_io, work
    // (boot, deliveries, compaction), commands, attach (clients), death.
}

/// Hand the memory a rested screen freed back to the kernel. glibc keeps what is freed in
/// its arenas resident (only the top of a heap is given back), so without this the 344 KiB
/// of a rested model stay in the daemon's RSS: measured with 200 echo screens, 78 MiB held,
/// the same after they rested, 14 MiB after `malloc_trim(0)` (issue 31 item 4).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer; it walks glibc's own free lists under their locks.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

fn exit_reason(code: Option<i32>, signal: Option<&str>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exited during boot (status {c})"),
        (None, Some(s)) => format!("exited during boot ({s})"),
        _ => "exited during boot".to_string(),
    }
}

/// A boot failure reason plus the screen's most informative line
/// ([`crate::session::failure_line::most_informative_line`]), for the sender. `width` is the
/// screen's width in columns (0 for pipes' output).
fn hash_text(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod state_tests {
    use super::*;

    fn booting(now: Instant) -> State {
        let s = Duration::from_secs(1);
        State::Booting(Boot::new(now, s, s, s))
    }

    /// An end during boot keeps the boot (still evaluated; reported at exit unless it ends
    /// first), and the first cause stays.
    #[test]
    fn an_end_during_boot_keeps_the_boot_and_its_first_cause() {
        let now = Instant::now();
        let mut s = booting(now);
        s.end(Cause::IdleSleep, now + KILL_GRACE);
        assert!(s.is_ending() && s.boot().is_some());
        s.end(Cause::KilledByDaemon, now + 2 * KILL_GRACE);
        assert_eq!(s.ending_cause(), Some(Cause::IdleSleep));
        assert!(matches!(s, State::Ending { kill_at, .. } if kill_at == now + KILL_GRACE));
        s.boot_done();
        assert!(s.is_ending() && s.boot().is_none());
        assert_eq!(s.ending_cause(), Some(Cause::IdleSleep));
    }

    #[test]
    fn a_boot_ends_ready_and_a_ready_session_ends_without_a_boot() {
        let now = Instant::now();
        let mut s = booting(now);
        assert_eq!(s.ending_cause(), None);
        s.boot_done();
        assert!(matches!(s, State::Ready) && s.boot_mut().is_none());
        s.end(Cause::ChildExit, now);
        assert!(s.boot().is_none());
        assert_eq!(s.ending_cause(), Some(Cause::ChildExit));
    }
}

#[cfg(test)]
mod setup_tests {
    use super::*;

    #[test]
    fn a_failed_setup_reports_the_failure_then_the_end() {
        let err = io::Error::other("poll register failed");
        let [failed, ended] = setup_failed(7, &err);
        assert_eq!(failed.session, 7);
        match failed.kind {
            EventKind::BootFailed {
                failure,
                screen,
                width,
            } => {
                assert_eq!(
                    crate::session::outcome::boot_failed_reason(&failure, &screen, width),
                    "the session could not be set up: poll register failed"
                );
                assert_eq!(failure.cause(), Cause::KilledByDaemon);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            ended,
            SessionEvent {
                session: 7,
                kind: EventKind::Exited {
                    status: None,
                    signal: None,
                    cause: Cause::KilledByDaemon,
                },
            }
        );
    }
}

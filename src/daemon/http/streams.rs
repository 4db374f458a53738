//! Fleet event streams on their own thread (spec 10 §1; issue 10 item 1): once the acceptor
//! ([`super::listen`]) has admitted `GET /fleet/v1/events`, it hands the connection here and
//! forgets it. This thread writes each stream's frames as the event bus publishes them and
//! its client takes them, a heartbeat comment after [`HEARTBEAT`] of silence, and closes a
//! stream whose client hung up or fell a whole queue behind.
//!
//! Why a thread of its own: every publish is written to every stream, and with 200 streams
//! that is 200 `write`s per event. On the acceptor's thread those writes stood between MCP
//! requests and their answers (MCP p99 26 ms alone, 70 ms beside 200 streams, measured with
//! `scripts/bench/fleet.py`); here they cost MCP nothing but a share of the CPU.
//!
//! Bounds (issue 26 item 3): at most `limit` streams ([`super::listen::hold_limit`]), counted
//! in [`StreamSlots`]. The acceptor reserves a slot before it hands a stream over; when all
//! are held it hands the stream over without one, and this thread ends its oldest stream
//! cleanly (a last comment at a frame boundary, then the end of the stream: its client
//! reconnects with `Last-Event-ID`) and gives the newcomer that slot. A client's hang-up
//! (EOF, `HUP` or an error in this thread's poll) ends its stream at once, and with it the
//! stream's bus subscription and queue.
//!
//! Failure: a panic on this thread ends the streams it held and the loop starts again
//! ([`guard::serve_restarting`]; `status` reports it), so new streams are still served.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};

use super::doorbell::Doorbell;
use crate::daemon::fleet::answer;
use crate::daemon::guard::{self, Restarts};
use crate::eventbus::{BusEvent, Subscription};

/// A stream with nothing to send gets a heartbeat comment this often (spec 10 §1).
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// Most bytes of frames taken from a stream's queue before they are written.
const STREAM_CHUNK: usize = 64 * 1024;
/// How often heartbeats are due-checked when nothing else wakes the thread.
const TICK: Duration = Duration::from_millis(250);
/// Token of the waker (bus publishes, new streams, stop).
const WAKER: Token = Token(0);
const FIRST_STREAM: usize = 1;

/// The last comment of a stream ended to make room for a newer one.
const OVER_BUDGET: &[u8] =
    b": closed to make room for a newer stream; reconnect with Last-Event-ID\n\n";

/// How many streams are held, against their limit; shared by the acceptor (which reserves a
/// slot before handing a stream over) and this thread (whose streams hold their [`Slot`]s).
#[derive(Debug)]
pub struct StreamSlots {
    held: AtomicUsize,
    limit: usize,
}

impl StreamSlots {
    /// Slots for at most `limit` streams (at least 1).
    pub fn new(limit: usize) -> Arc<StreamSlots> {
        Arc::new(StreamSlots {
            held: AtomicUsize::new(0),
            limit: limit.max(1),
        })
    }

    /// Take a slot; `None` when all `limit` are held.
    pub fn reserve(self: &Arc<Self>) -> Option<Slot> {
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(self)))
    }

    /// Take a slot over the limit (a newcomer for which no stream could be ended).
    fn force(self: &Arc<Self>) -> Slot {
        self.held.fetch_add(1, Ordering::SeqCst);
        Slot(Arc::clone(self))
    }

    /// Slots held now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }
}

/// One held stream's place in [`StreamSlots`], given back when dropped (whichever way the
/// stream ends, a panic's unwinding included).
#[derive(Debug)]
pub struct Slot(Arc<StreamSlots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A stream handed over by the acceptor: its connection (already sent nothing), its bus
/// subscription (whose first [`Subscription::replayed`] events are the replay: `: connected`
/// follows their last frame, at once when there are none) and its slot.
pub struct NewStream {
    /// The client's connection, nonblocking, registered with no poll.
    pub stream: TcpStream,
    /// Where its events come from.
    pub sub: Subscription,
    /// Its place among the held streams; `None` when all were held: the thread ends its
    /// oldest stream and gives this one that slot.
    pub slot: Option<Slot>,
}

/// The handle of the streams thread: the acceptor hands streams over through its
/// [`Handoff`]; [`StreamWriter::stop`] closes every stream and joins the thread.
pub struct StreamWriter {
    handoff: Handoff,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The acceptor's way to the streams thread: reserve a slot, then hand a stream over.
#[derive(Clone)]
pub struct Handoff {
    tx: Sender<NewStream>,
    waker: Arc<Waker>,
    /// The bus's way to wake the thread: one wake per pump, however many events a burst
    /// publishes meanwhile.
    bell: Arc<Doorbell>,
    /// The slots the acceptor reserves.
    pub slots: Arc<StreamSlots>,
}

impl StreamWriter {
    /// Start the thread, for at most `limit` streams of the server on `port`; a panic on it
    /// is recorded in `restarts` and the thread's loop starts again.
    ///
    /// Errors: creating the poll or its waker, or spawning the thread.
    pub fn start(limit: usize, port: u16, restarts: Restarts) -> io::Result<StreamWriter> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = crossbeam_channel::unbounded();
        let stopping = Arc::new(AtomicBool::new(false));
        let slots = StreamSlots::new(limit);
        let bell = Arc::new(Doorbell::new(Arc::clone(&waker)));
        let mut writer = Writer {
            poll,
            rx,
            bell: Arc::clone(&bell),
            streams: BTreeMap::new(),
            next: FIRST_STREAM,
            slots: Arc::clone(&slots),
            stopping: Arc::clone(&stopping),
            port,
        };
        let thread = thread::Builder::new()
            .name("http-streams".into())
            .spawn(move || {
                // Real-time like the router that feeds it: at the normal policy on a loaded
                // host it fell a queue behind a burst the router published, and the bus
                // dropped streams whose clients were reading all along.
                let _realtime = crate::daemon::realtime::enter("http-streams");
                guard::serve_restarting(&mut writer, &restarts, Writer::serve, Writer::close_all);
                writer.close_all();
            })?;
        Ok(StreamWriter {
            handoff: Handoff {
                tx,
                waker,
                bell: Arc::clone(&bell),
                slots,
            },
            stopping,
            thread: Some(thread),
        })
    }

    /// The acceptor's way in.
    pub fn handoff(&self) -> Handoff {
        self.handoff.clone()
    }

    /// Close every stream and end the thread. Idempotent.
    pub fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stopping.store(true, Ordering::SeqCst);
        let _ = self.handoff.waker.wake();
        if thread.join().is_err() {
            log::error!("http: the event stream thread panicked");
        }
    }
}

impl Handoff {
    /// A wake for the bus to call after a publish a stream queued: it rings the thread's
    /// [`Doorbell`], so a burst of events costs one wake until the thread pumps again.
    pub fn notify(&self) -> impl Fn() + Send + Sync + 'static {
        let bell = Arc::clone(&self.bell);
        move || bell.ring()
    }

    /// Give the thread a stream (with the slot [`StreamSlots::reserve`] gave, or none when
    /// all were held).
    pub fn hand_over(&self, s: NewStream) {
        if self.tx.send(s).is_ok() {
            let _ = self.waker.wake();
        }
    }
}

impl Drop for StreamWriter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One stream's state on the thread.
struct State {
    stream: TcpStream,
    sub: Subscription,
    slot: Slot,
    /// Replay events still to write before `: connected`.
    replay_left: usize,
    out: Vec<u8>,
    at: usize,
    next_heartbeat: Instant,
}

/// The thread's side.
struct Writer {
    poll: Poll,
    rx: Receiver<NewStream>,
    /// Answered before every pump of all streams ([`Handoff::notify`]).
    bell: Arc<Doorbell>,
    /// By token: tokens only grow, so the first is the oldest stream.
    streams: BTreeMap<Token, State>,
    next: usize,
    slots: Arc<StreamSlots>,
    stopping: Arc<AtomicBool>,
    /// The server's port (for the test hook).
    port: u16,
}

impl Writer {
    /// Serve the streams until stopped.
    fn serve(&mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            let timeout = (!self.streams.is_empty()).then_some(TICK);
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    log::error!("http: stream poll failed: {e}");
                    thread::sleep(TICK);
                }
            }
            if self.stopping.load(Ordering::SeqCst) {
                break;
            }
            let mut publish = false;
            for ev in events.iter() {
                match ev.token() {
                    WAKER => publish = true,
                    t => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.on_readable(t);
                        }
                        if ev.is_writable() {
                            self.pump(t);
                        }
                    }
                }
            }
            self.take_new();
            if publish {
                // Before the pumps: an event published after this rings again.
                self.bell.answer();
                let all: Vec<Token> = self.streams.keys().copied().collect();
                for t in all {
                    self.pump(t);
                }
            }
            self.heartbeats(Instant::now());
        }
    }

    /// Close every stream (stopping, or after a panic: whatever it left half done goes).
    fn close_all(&mut self) {
        for t in self.streams.keys().copied().collect::<Vec<_>>() {
            self.remove(t);
        }
    }

    /// Register the streams the acceptor handed over and write their head and replay.
    fn take_new(&mut self) {
        while let Ok(n) = self.rx.try_recv() {
            crate::daemon::test_hooks::on_http_stream(self.port);
            let slot = match n.slot {
                Some(slot) => slot,
                None => self.end_oldest().unwrap_or_else(|| self.slots.force()),
            };
            let t = Token(self.next);
            self.next += 1;
            let mut out = answer::SSE_HEAD.to_vec();
            if n.sub.replayed == 0 {
                out.extend_from_slice(answer::SSE_CONNECTED);
            }
            let mut s = State {
                stream: n.stream,
                replay_left: n.sub.replayed,
                sub: n.sub,
                slot,
                out,
                at: 0,
                next_heartbeat: Instant::now() + HEARTBEAT,
            };
            let both = Interest::READABLE | Interest::WRITABLE;
            if let Err(e) = self.poll.registry().register(&mut s.stream, t, both) {
                log::warn!("http: cannot watch an event stream: {e}");
                continue;
            }
            self.streams.insert(t, s);
            self.pump(t);
        }
    }

    /// Input on a stream is discarded; its end (or an error) ends the stream.
    fn on_readable(&mut self, t: Token) {
        let Some(s) = self.streams.get_mut(&t) else {
            return;
        };
        let mut chunk = [0u8; 4096];
        loop {
            match s.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        self.remove(t);
    }

    /// Move queued events of stream `t` into its buffer once the previous ones are written,
    /// and write what the client takes. A stream the bus dropped (its client fell behind) or
    /// whose client is gone is closed.
    fn pump(&mut self, t: Token) {
        let Some(s) = self.streams.get_mut(&t) else {
            return;
        };
        // The bus let it go: its client fell behind by a whole queue. It reconnects with
        // `Last-Event-ID` and gets what the ring still holds.
        if s.sub.dropped.load(Ordering::SeqCst) {
            log::info!("fleet: an event stream fell behind; closed");
            self.remove(t);
            return;
        }
        loop {
            if s.at == s.out.len() {
                s.out.clear();
                s.at = 0;
                fill(s);
                if s.out.is_empty() {
                    return;
                }
            }
            match s.stream.write(&s.out[s.at..]) {
                Ok(0) => break,
                Ok(n) => {
                    s.at += n;
                    s.next_heartbeat = Instant::now() + HEARTBEAT;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Edge-triggered: a writable event comes when the client has read.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        self.remove(t);
    }

    /// Queue a heartbeat on every stream idle since [`HEARTBEAT`], and write it.
    fn heartbeats(&mut self, now: Instant) {
        let due: Vec<Token> = self
            .streams
            .iter_mut()
            .filter_map(|(t, s)| {
                (now >= s.next_heartbeat && s.at == s.out.len()).then(|| {
                    s.out.clear();
                    s.at = 0;
                    s.out.extend_from_slice(answer::SSE_HEARTBEAT);
                    s.next_heartbeat = now + HEARTBEAT;
                    *t
                })
            })
            .collect();
        for t in due {
            self.pump(t);
        }
    }

    /// End the oldest stream cleanly to make room for a newer one, and give back its slot
    /// (`None` when no stream is held here). What it still had to write is written when its
    /// client takes it at once, then [`OVER_BUDGET`] at a frame boundary; then its writing
    /// side is shut (the client reads the end of the stream, not a reset).
    fn end_oldest(&mut self) -> Option<Slot> {
        let (&t, _) = self.streams.first_key_value()?;
        let mut s = self.remove(t)?;
        let mut rest = s.out.split_off(s.at);
        rest.extend_from_slice(OVER_BUDGET);
        let mut at = 0;
        while at < rest.len() {
            match s.stream.write(&rest[at..]) {
                Ok(0) => break,
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = s.stream.shutdown(std::net::Shutdown::Write);
        log::info!("fleet: the oldest event stream was ended to make room for a new one");
        Some(s.slot)
    }

    fn remove(&mut self, t: Token) -> Option<State> {
        let mut s = self.streams.remove(&t)?;
        let _ = self.poll.registry().deregister(&mut s.stream);
        Some(s)
    }
}

/// Take frames from the stream's queue into its buffer, up to [`STREAM_CHUNK`] bytes, adding
/// `: connected` after the last replayed one.
fn fill(s: &mut State) {
    while s.out.len() < STREAM_CHUNK {
        let Ok(ev) = s.sub.rx.try_recv() else {
            return;
        };
        push_frame(s, &ev);
    }
}

fn push_frame(s: &mut State, ev: &BusEvent) {
    s.out
        .extend_from_slice(ev.rendered.get_or_init(|| answer::sse_frame(ev)));
    if s.replay_left > 0 {
        s.replay_left -= 1;
        if s.replay_left == 0 {
            s.out.extend_from_slice(answer::SSE_CONNECTED);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stop_at_the_limit_and_come_back() {
        let slots = StreamSlots::new(2);
        let a = slots.reserve().expect("first");
        let _b = slots.reserve().expect("second");
        assert!(slots.reserve().is_none(), "a third is over the limit");
        drop(a);
        let _c = slots.reserve().expect("a released slot is taken again");
        assert!(slots.reserve().is_none());
        let over = slots.force();
        assert_eq!(slots.held(), 3, "forced over the limit");
        drop(over);
        assert_eq!(slots.held(), 2);
        let one = StreamSlots::new(0);
        let _d = one.reserve().expect("the limit is at least 1");
        assert!(one.reserve().is_none());
    }
}

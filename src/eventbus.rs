//! The daemon's in-memory event bus (spec 10 §1, `GET /fleet/v1/events`): every line the
//! daemon appends to `lifecycle.log`, `delivery.log` or `exits.log` is also published here,
//! numbered, kept in a bounded ring for replay, and copied to each subscriber's bounded queue.
//!
//! Guarantees: ids are unique and increasing (epoch ms of the event, bumped by one when two
//! fall in the same millisecond), so a subscriber that reconnects with the last id it saw
//! misses nothing the ring still holds, and [`Bus::subscribe`] takes the replay and joins the
//! live stream under one lock (nothing falls between them: at-least-once). A publisher never
//! waits on a subscriber: a subscriber whose queue is full is dropped (its `dropped` flag is
//! raised and its queue's sender let go), so a client that stops reading costs at most
//! [`QUEUE`] events of memory and never slows the router. A [`Subscription`] that is dropped
//! leaves the bus at once: its queue (allocated whole, ~16 KB) is freed then, not at the next
//! publish (issue 26 item 3: 60 000 streams opened and closed while nothing was published
//! held 960 MB).
//!
//! One `Mutex` guards the ring and the subscriber list; it is held only to copy pointers, never
//! across I/O.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::eventlog::{Event, EventLog};
use crate::logview::{Entry, Source};

/// Events kept for replay and for `GET /fleet/v1/peers/<p>`.
pub const RING: usize = 2000;
/// Most events one subscriber may have waiting before it is dropped: the largest replay
/// (500) plus room for a burst.
pub const QUEUE: usize = 1024;

/// One published event: its id and the log line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusEvent {
    /// Unique, increasing; the event's epoch ms (bumped past the previous id when equal).
    pub id: u64,
    /// The line: `ts`, the log it went to, its fields (`ev` first).
    pub entry: Entry,
    /// The event as its readers send it (an SSE frame), made once by the first of them and
    /// shared by all: 200 streams cost one encoding per event, not 200.
    pub rendered: std::sync::OnceLock<Vec<u8>>,
}

/// A subscriber's end: its queue and the flag raised when the bus dropped it. Dropping it
/// takes the subscriber off the bus.
pub struct Subscription {
    /// Events in id order; disconnected once the subscriber is dropped.
    pub rx: Receiver<Arc<BusEvent>>,
    /// Raised when the bus dropped this subscriber because its queue was full.
    pub dropped: Arc<AtomicBool>,
    /// How many of the first events in `rx` are the replay (counted under the bus's lock:
    /// a live event published right after joining is not among them).
    pub replayed: usize,
    /// The bus and this subscriber's number on it, to leave it when dropped.
    bus: Weak<Inner>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(inner) = self.bus.upgrade() {
            lock(&inner.state).subs.retain(|s| s.id != self.id);
        }
    }
}

struct Sub {
    id: u64,
    tx: Sender<Arc<BusEvent>>,
    dropped: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    ring: VecDeque<Arc<BusEvent>>,
    last_id: u64,
    subs: Vec<Sub>,
    /// The number the next subscriber gets.
    next_sub: u64,
}

type Notify = Box<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    /// Called after a publish that a subscriber queued or was dropped for (the event-stream
    /// thread's bell).
    notify: Mutex<Option<Notify>>,
}

/// A handle on the bus; clones share it.
#[derive(Clone, Default)]
pub struct Bus(Arc<Inner>);

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bus")
    }
}

/// Epoch ms of a log time stamp (`2026-12-01T09:00:00.123Z`); 0 when it does not parse.
pub fn ts_ms(ts: &str) -> u64 {
    ts.parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| u64::try_from(t.as_millisecond()).ok())
        .unwrap_or(0)
}

impl Bus {
    /// An empty bus.
    pub fn new() -> Bus {
        Bus::default()
    }

    /// Call `f` after every publish that reached a subscriber's queue, or dropped a subscriber
    /// that fell behind, from now on (replaces an earlier one): with no subscriber, nobody is
    /// woken. `f` must be quick.
    pub fn set_notify(&self, f: impl Fn() + Send + Sync + 'static) {
        *lock(&self.0.notify) = Some(Box::new(f));
    }

    /// Publish one line just written to the log `source` with time stamp `ts`.
    pub fn publish(&self, source: Source, ts: &str, event: &Event) {
        let queued = self.publish_entry(Entry {
            ts: ts.to_string(),
            source,
            fields: event.fields().to_vec(),
        });
        if queued {
            if let Some(f) = lock(&self.0.notify).as_ref() {
                f();
            }
        }
    }

    /// Fill the ring from the newest lines of the durable logs (`(source, path)`; the last
    /// [`SEED_BYTES`] of each, merged in time order, at most [`RING`] lines), so a replay after a
    /// daemon restart still has history. Unreadable logs are skipped. No subscriber sees these.
    pub fn seed(&self, logs: &[(Source, std::path::PathBuf)]) {
        let mut entries = Vec::new();
        for (source, path) in logs {
            if let Some(text) = tail(path, SEED_BYTES) {
                entries.extend(crate::logview::parse(&text, *source));
            }
        }
        let entries = crate::logview::merge(entries);
        let skip = entries.len().saturating_sub(RING);
        for e in entries.into_iter().skip(skip) {
            self.publish_entry(e);
        }
    }

    /// Number `entry`, keep it in the ring and queue it for every subscriber (dropping those
    /// whose queue is full or gone). No notification; returns whether a subscriber has
    /// something to act on: the event queued, or its drop for falling behind.
    pub fn publish_entry(&self, entry: Entry) -> bool {
        let mut st = lock(&self.0.state);
        let id = ts_ms(&entry.ts).max(st.last_id + 1);
        st.last_id = id;
        let ev = Arc::new(BusEvent {
            id,
            entry,
            rendered: std::sync::OnceLock::new(),
        });
        if st.ring.len() == RING {
            st.ring.pop_front();
        }
        st.ring.push_back(Arc::clone(&ev));
        let mut reached = false;
        st.subs.retain(|s| match s.tx.try_send(Arc::clone(&ev)) {
            Ok(()) => {
                reached = true;
                true
            }
            Err(TrySendError::Full(_)) => {
                reached = true;
                s.dropped.store(true, Ordering::SeqCst);
                log::info!("fleet: an event-stream client fell {QUEUE} events behind; dropped");
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
        reached
    }

    /// Join the live stream, first queueing the newest `replay` events (at most [`RING`]) or,
    /// when `after` is given (a client's `Last-Event-ID`), every held event with a larger id
    /// (at most [`QUEUE`] of the newest).
    pub fn subscribe(&self, replay: usize, after: Option<u64>) -> Subscription {
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        let dropped = Arc::new(AtomicBool::new(false));
        let mut st = lock(&self.0.state);
        let held: Vec<&Arc<BusEvent>> = match after {
            Some(last) => st.ring.iter().filter(|e| e.id > last).collect(),
            None => st.ring.iter().collect(),
        };
        let want = match after {
            Some(_) => held.len().min(QUEUE),
            None => replay.min(held.len()).min(QUEUE),
        };
        for ev in &held[held.len() - want..] {
            let _ = tx.try_send(Arc::clone(ev));
        }
        let id = st.next_sub;
        st.next_sub += 1;
        st.subs.push(Sub {
            id,
            tx,
            dropped: Arc::clone(&dropped),
        });
        Subscription {
            rx,
            dropped,
            replayed: want,
            bus: Arc::downgrade(&self.0),
            id,
        }
    }

    /// The newest `n` held events for which `keep` is true, oldest first.
    pub fn recent(&self, n: usize, keep: impl Fn(&Entry) -> bool) -> Vec<Arc<BusEvent>> {
        let st = lock(&self.0.state);
        let mut out: Vec<Arc<BusEvent>> = st
            .ring
            .iter()
            .rev()
            .filter(|e| keep(&e.entry))
            .take(n)
            .cloned()
            .collect();
        out.reverse();
        out
    }

    /// Subscribers attached now.
    #[cfg(test)]
    pub fn subscribers(&self) -> usize {
        lock(&self.0.state).subs.len()
    }
}

/// An event log whose every line is also published on a [`Bus`]: the daemon's writers of
/// `lifecycle.log`, `delivery.log` and `exits.log` (spec 11 §1) use it, so the bus sees
/// exactly what the durable logs hold.
#[derive(Debug, Clone)]
pub struct TappedLog {
    log: EventLog,
    source: Source,
    bus: Bus,
}

impl TappedLog {
    /// `log` (which holds lines of kind `source`) tapped into `bus`.
    pub fn new(log: EventLog, source: Source, bus: Bus) -> TappedLog {
        TappedLog { log, source, bus }
    }

    /// Append `event` (see [`EventLog::append`]) and publish it with the same time stamp.
    pub fn append(&self, event: &Event) {
        let ts = self.log.append_stamped(event);
        self.bus.publish(self.source, &ts, event);
    }

    /// [`TappedLog::append`] stamped `at_ms` (epoch ms; see [`EventLog::append_at`]). The
    /// bus's ids stay increasing whatever the stamp.
    pub fn append_at(&self, event: &Event, at_ms: u64) {
        let ts = self.log.append_stamped_at(event, at_ms);
        self.bus.publish(self.source, &ts, event);
    }
}

/// How much of each durable log [`Bus::seed`] reads, bytes.
pub const SEED_BYTES: u64 = 512 * 1024;

/// The last `max` bytes of a file, from its first whole line.
fn tail(path: &std::path::Path, max: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(max);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Some(match (from, text.find('\n')) {
        (0, _) => text,
        (_, Some(nl)) => text[nl + 1..].to_string(),
        (_, None) => String::new(),
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(n: u32) -> Event {
        Event::new("delivery").field("n", n)
    }

    const TS: &str = "2026-12-01T09:00:00.000Z";

    #[test]
    fn ids_are_unique_and_increasing_within_one_millisecond() {
        let bus = Bus::new();
        for n in 0..3 {
            bus.publish(Source::Delivery, TS, &ev(n));
        }
        let ids: Vec<u64> = bus.recent(10, |_| true).iter().map(|e| e.id).collect();
        let base = ts_ms(TS);
        assert_eq!(ids, [base, base + 1, base + 2]);
    }

    #[test]
    fn replay_then_live_without_a_gap_and_reconnect_by_last_id() {
        let bus = Bus::new();
        for n in 0..5 {
            bus.publish(Source::Lifecycle, TS, &ev(n));
        }
        let sub = bus.subscribe(2, None);
        bus.publish(Source::Delivery, TS, &ev(5));
        assert_eq!(sub.replayed, 2, "the live event is not counted as replay");
        let got: Vec<String> = sub
            .rx
            .try_iter()
            .map(|e| e.entry.get("n").unwrap().to_string())
            .collect();
        assert_eq!(got, ["3", "4", "5"]);
        let third = bus.recent(10, |_| true)[2].id;
        let again = bus.subscribe(0, Some(third));
        assert_eq!(
            again.rx.try_iter().count(),
            3,
            "ids after the third: 3, 4, 5"
        );
        assert_eq!(bus.subscribe(10_000, None).rx.len(), 6);
        assert_eq!(bus.subscribe(10_000, None).replayed, 6);
        assert_eq!(bus.subscribe(0, Some(third)).replayed, 3);
    }

    /// Issue 13 item 3: a publish nobody subscribed to wakes nobody (every delivery.log line
    /// used to wake the event-stream thread); a subscriber's event, or its drop, does.
    #[test]
    fn only_a_publish_a_subscriber_takes_notifies() {
        let bus = Bus::new();
        let wakes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = Arc::clone(&wakes);
        bus.set_notify(move || {
            w.fetch_add(1, Ordering::SeqCst);
        });
        bus.publish(Source::Delivery, TS, &ev(0));
        assert_eq!(wakes.load(Ordering::SeqCst), 0, "no subscriber: no wake");
        let sub = bus.subscribe(0, None);
        for n in 1..=QUEUE as u32 {
            bus.publish(Source::Delivery, TS, &ev(n));
        }
        assert_eq!(wakes.load(Ordering::SeqCst), QUEUE);
        // The queue is full: this one drops the subscriber, and that too is news to act on.
        bus.publish(Source::Delivery, TS, &ev(0));
        assert_eq!(wakes.load(Ordering::SeqCst), QUEUE + 1);
        assert!(sub.dropped.load(Ordering::SeqCst));
        bus.publish(Source::Delivery, TS, &ev(0));
        assert_eq!(
            wakes.load(Ordering::SeqCst),
            QUEUE + 1,
            "dropped: nobody left"
        );
        drop(sub);
    }

    /// Issue 26 item 3: a subscription dropped while nothing is published leaves the bus at
    /// once, with its queue; the others stay.
    #[test]
    fn a_dropped_subscription_leaves_the_bus_at_once() {
        let bus = Bus::new();
        let kept = bus.subscribe(0, None);
        let subs: Vec<Subscription> = (0..100).map(|_| bus.subscribe(0, None)).collect();
        assert_eq!(bus.subscribers(), 101);
        drop(subs);
        assert_eq!(bus.subscribers(), 1, "no publish needed to let them go");
        bus.publish(Source::Delivery, TS, &ev(1));
        assert_eq!(kept.rx.len(), 1, "the one still held gets its events");
        drop(kept);
        assert_eq!(bus.subscribers(), 0);
        let late = bus.subscribe(0, None);
        drop(bus);
        drop(late);
    }

    #[test]
    fn a_full_subscriber_is_dropped_and_never_blocks_the_publisher() {
        let bus = Bus::new();
        let slow = bus.subscribe(0, None);
        let quick = bus.subscribe(0, None);
        for n in 0..QUEUE as u32 + 1 {
            bus.publish(Source::Delivery, TS, &ev(n));
            let _ = quick.rx.try_recv();
        }
        assert!(slow.dropped.load(Ordering::SeqCst));
        assert!(!quick.dropped.load(Ordering::SeqCst));
        assert_eq!(bus.subscribers(), 1);
        assert_eq!(slow.rx.len(), QUEUE, "what it had stays readable");
        drop(quick);
        assert_eq!(bus.subscribers(), 0, "a gone subscriber is let go");
        bus.publish(Source::Delivery, TS, &ev(0));
        assert_eq!(bus.recent(usize::MAX, |_| true).len(), RING.min(QUEUE + 2));
    }
}

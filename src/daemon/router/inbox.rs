//! The router's inbox: one unbounded queue of [`RouterMsg`] from every thread of the daemon,
//! and a wake-up that takes no lock (issue 31 item 3).
//!
//! Why not a blocking `crossbeam_channel::Receiver::recv_timeout`: a receiver blocked on a
//! crossbeam channel is registered in the channel's waker, a `Mutex`, and each send takes that
//! mutex to wake it. The router runs real-time ([`crate::daemon::realtime`]) and its senders
//! (the session threads above all) do not: the woken router preempted the session thread that
//! woke it, often while that thread still held the waker's mutex, then blocked on that mutex to
//! unregister, and waited until the session thread got a core again, behind every busy agent.
//! Traced with `perf record -e sched:sched_switch --call-graph dwarf` during the burst bench
//! (1 000 concurrent `tools/call` to 20 echo peers, 2 cores, load ~8): 1 512 such waits in
//! four bursts, p99 24 ms, the longest 42 ms; they were the per-burst overhead's tail.
//!
//! Here the queue is the same crossbeam channel, but nobody ever blocks on it: the router
//! takes with `try_recv` and, when it is empty, parks its own thread
//! ([`std::thread::park_timeout`]); a sender pushes, then unparks the router thread
//! ([`std::thread::Thread::unpark`]: an atomic swap, and a futex wake only when the router is
//! parked; no lock). A message pushed between the router's last look and its park leaves the
//! park token set, so the park returns at once: nothing is missed. The last sender to go
//! unparks it too, so the router sees the queue disconnected.

use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use super::RouterMsg;

/// The thread to wake: the router's, known once it first waits ([`Inbox::recv_timeout`]).
#[derive(Default)]
struct Wake {
    router: OnceLock<Thread>,
}

impl Wake {
    fn ring(&self) {
        if let Some(t) = self.router.get() {
            t.unpark();
        }
    }
}

/// The router has stopped: the message sent to it, back unsent.
pub struct RouterGone(pub Box<RouterMsg>);

impl std::fmt::Debug for RouterGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RouterGone(..)")
    }
}

/// A sender to the router's inbox; clone it freely (as a `crossbeam_channel::Sender`).
pub struct RouterTx {
    /// `None` only while being dropped.
    tx: Option<Sender<RouterMsg>>,
    wake: Arc<Wake>,
}

impl RouterTx {
    /// Queue `m` for the router and wake it.
    ///
    /// Errors: [`RouterGone`]: the router has stopped (its [`Inbox`] was dropped); `m` comes
    /// back in it.
    pub fn send(&self, m: RouterMsg) -> Result<(), RouterGone> {
        let Some(tx) = &self.tx else {
            return Err(RouterGone(Box::new(m)));
        };
        tx.send(m).map_err(|e| RouterGone(Box::new(e.0)))?;
        self.wake.ring();
        Ok(())
    }
}

impl Clone for RouterTx {
    fn clone(&self) -> RouterTx {
        RouterTx {
            tx: self.tx.clone(),
            wake: Arc::clone(&self.wake),
        }
    }
}

impl Drop for RouterTx {
    fn drop(&mut self) {
        // Dropped first, so that a router woken by the last sender sees the queue closed.
        drop(self.tx.take());
        self.wake.ring();
    }
}

/// The router's end of the inbox. Used by one thread: the first to wait on it is the one
/// senders wake.
pub struct Inbox {
    rx: Receiver<RouterMsg>,
    wake: Arc<Wake>,
}

impl Inbox {
    /// The next message, waiting at most `timeout` for one.
    ///
    /// Errors: `Timeout` when none came in time; `Disconnected` when every [`RouterTx`] is
    /// gone and the queue is empty.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<RouterMsg, RecvTimeoutError> {
        let me = self.wake.router.get_or_init(std::thread::current);
        debug_assert_eq!(me.id(), std::thread::current().id(), "one router thread");
        let deadline = Instant::now().checked_add(timeout);
        loop {
            match self.rx.try_recv() {
                Ok(m) => return Ok(m),
                Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
                Err(TryRecvError::Empty) => {}
            }
            match deadline {
                Some(at) => {
                    let now = Instant::now();
                    if now >= at {
                        return Err(RecvTimeoutError::Timeout);
                    }
                    std::thread::park_timeout(at - now);
                }
                None => std::thread::park(),
            }
        }
    }

    /// Whether no message waits.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

/// A new inbox: its senders and the router's end.
pub fn inbox() -> (RouterTx, Inbox) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let wake = Arc::new(Wake::default());
    (
        RouterTx {
            tx: Some(tx),
            wake: Arc::clone(&wake),
        },
        Inbox { rx, wake },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick() -> RouterMsg {
        RouterMsg::Tick
    }

    /// A message sent while the router is parked wakes it at once, far before its timeout.
    #[test]
    fn a_send_wakes_the_parked_router() {
        let (tx, inbox) = inbox();
        let router = std::thread::spawn(move || {
            let t0 = Instant::now();
            let got = inbox.recv_timeout(Duration::from_secs(30));
            (got.is_ok(), t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100)); // the router is parked by then
        tx.send(tick()).expect("the router is there");
        let (got, took) = router.join().expect("the router thread");
        assert!(got, "the message arrived");
        assert!(
            took < Duration::from_secs(5),
            "woken by the send, not the timeout: {took:?}"
        );
    }

    /// Nothing sent: the wait ends at its timeout.
    #[test]
    fn an_empty_inbox_times_out() {
        let (_tx, inbox) = inbox();
        let t0 = Instant::now();
        let got = inbox.recv_timeout(Duration::from_millis(50));
        assert!(matches!(got, Err(RecvTimeoutError::Timeout)));
        assert!(t0.elapsed() >= Duration::from_millis(50));
    }

    /// The last sender gone wakes a parked router, which sees the inbox closed; a send to a
    /// dropped inbox gives its message back.
    #[test]
    fn the_last_sender_gone_closes_the_inbox() {
        let (tx, inbox) = inbox();
        let tx2 = tx.clone();
        let router = std::thread::spawn(move || {
            let mut got = Vec::new();
            loop {
                match inbox.recv_timeout(Duration::from_secs(30)) {
                    Ok(_) => got.push(()),
                    Err(e) => return (got.len(), e),
                }
            }
        });
        std::thread::sleep(Duration::from_millis(50));
        tx.send(tick()).expect("sent");
        drop(tx);
        std::thread::sleep(Duration::from_millis(50));
        drop(tx2);
        let (n, e) = router.join().expect("the router thread");
        assert_eq!((n, e), (1, RecvTimeoutError::Disconnected));
        let (tx, rx) = super::inbox();
        drop(rx);
        let Err(RouterGone(back)) = tx.send(tick()) else {
            panic!("sent to a router that is gone");
        };
        assert!(matches!(*back, RouterMsg::Tick));
    }

    /// Many senders, many messages: every one is received once, none is left behind by a
    /// wake-up that raced with the router's park.
    #[test]
    fn no_message_is_missed_between_a_look_and_a_park() {
        let (tx, inbox) = inbox();
        let senders: Vec<_> = (0..4)
            .map(|_| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..5_000 {
                        tx.send(tick()).expect("sent");
                        if i % 97 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        let t0 = Instant::now();
        let mut n = 0;
        while inbox.recv_timeout(Duration::from_secs(30)).is_ok() {
            n += 1;
        }
        for s in senders {
            s.join().expect("a sender");
        }
        assert_eq!(n, 20_000);
        // A missed wake-up would have left the router parked for its 30 s.
        assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    }
}

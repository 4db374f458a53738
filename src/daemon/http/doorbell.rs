//! A coalescing wake-up for a `mio` loop that is fed through a channel (issue 13 item 3).
//!
//! The acceptor thread learns of a send's outcome from a channel and a [`mio::Waker`]. In a
//! burst the router finished hundreds of sends while the acceptor was already awake or about
//! to wake, and each outcome still paid an `eventfd` write and a wake-up attempt on the
//! router thread (3.4 % of the daemon's samples in `perf`, the router's largest cost). With a
//! [`Doorbell`] only the first outcome after the loop last looked rings; the rest find the
//! bell already rung and only queue.
//!
//! Protocol: the producer sends on the channel, then [`Doorbell::ring`]s; the loop, woken,
//! calls [`Doorbell::answer`] *before* it drains the channel. An outcome sent after the
//! answer rings again, so none waits for a later event; at worst the loop wakes once more
//! and finds the channel empty.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A [`mio::Waker`] that is woken at most once until the loop answers.
pub struct Doorbell {
    waker: Arc<mio::Waker>,
    rung: AtomicBool,
}

impl Doorbell {
    /// A bell on `waker` (the loop's `Poll` registry's).
    pub fn new(waker: Arc<mio::Waker>) -> Doorbell {
        Doorbell {
            waker,
            rung: AtomicBool::new(false),
        }
    }

    /// After sending to the loop's channel: wake the loop unless a wake is already pending.
    /// A failed wake (the loop is gone) is not an error here: there is nobody to answer. The
    /// bell is not left rung by it, so a later ring tries again.
    pub fn ring(&self) {
        // AcqRel pairs with `answer`'s swap: if this sees `true`, the loop's answer comes
        // later in the flag's order and its drain sees what was sent before this ring.
        if !self.rung.swap(true, Ordering::AcqRel) && self.waker.wake().is_err() {
            self.rung.store(false, Ordering::Release);
        }
    }

    /// The loop, woken by the bell, before it drains its channel: the next ring wakes it.
    pub fn answer(&self) {
        self.rung.swap(false, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::time::{Duration, Instant};

    const BELL: Token = Token(7);

    fn wakes(poll: &mut Poll, events: &mut Events, timeout: Duration) -> usize {
        poll.poll(events, Some(timeout)).unwrap();
        events.iter().filter(|e| e.token() == BELL).count()
    }

    #[test]
    fn rings_once_until_answered() {
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(8);
        let bell = Doorbell::new(Arc::new(mio::Waker::new(poll.registry(), BELL).unwrap()));
        let short = Duration::from_millis(20);
        assert_eq!(wakes(&mut poll, &mut events, short), 0, "nothing rang yet");
        bell.ring();
        bell.ring();
        bell.ring();
        assert_eq!(wakes(&mut poll, &mut events, short), 1);
        bell.ring();
        assert_eq!(
            wakes(&mut poll, &mut events, short),
            0,
            "still rung: no new wake"
        );
        bell.answer();
        bell.ring();
        assert_eq!(
            wakes(&mut poll, &mut events, short),
            1,
            "answered: rings again"
        );
    }

    /// Many producers, a loop that answers and drains: every message is taken, none is left
    /// waiting for a wake that never comes (each poll waits up to 2 s, far above the test's
    /// whole run, so a lost wake fails it).
    #[test]
    fn no_message_is_left_without_a_wake() {
        const PRODUCERS: usize = 4;
        const EACH: usize = 5_000;
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(8);
        let bell = Arc::new(Doorbell::new(Arc::new(
            mio::Waker::new(poll.registry(), BELL).unwrap(),
        )));
        let (tx, rx) = crossbeam_channel::unbounded::<usize>();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|_| {
                let (tx, bell) = (tx.clone(), Arc::clone(&bell));
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        tx.send(i).unwrap();
                        bell.ring();
                        if i % 512 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let started = Instant::now();
        let mut taken = 0;
        while taken < PRODUCERS * EACH {
            let n = wakes(&mut poll, &mut events, Duration::from_secs(2));
            assert!(
                n > 0 || !rx.is_empty(),
                "no wake for 2 s with {} taken of {}",
                taken,
                PRODUCERS * EACH
            );
            bell.answer();
            taken += rx.try_iter().count();
        }
        for p in producers {
            p.join().unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(taken, PRODUCERS * EACH);
    }
}

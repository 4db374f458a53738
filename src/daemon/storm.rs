//! The storm guard: a runaway exchange between two peers that are not human (two agents
//! answering each other, or an agent and a service that both reply to every message) is
//! paused before it burns tokens for ever.
//!
//! A pair of personalities counts its messages in each direction over a sliding window. When
//! both directions reach the limit within the window (`IAPEER_STORM_LIMIT` messages each way
//! within `IAPEER_STORM_WINDOW_SECS`), the pair is paused for `IAPEER_STORM_PAUSE_SECS`: sends
//! between them are refused with code `paused`. A message from a human to either peer lifts
//! the pause at once (the human has stepped in). A one-way burst (a script sending a hundred
//! tasks) is not an exchange and is never paused.
//!
//! A service (intelligence `absent`: the `timer` and `watcher` services, a webhook) only
//! answers what it is sent, and its own messages to a peer that is not a service are the
//! owner's scheduled and watched signals (timer fires, watcher lines, alerts). So in a pair of
//! a service and a peer that is not one, the pause refuses only the peer's messages to the
//! service — which stops any loop between them — and never the service's messages to the peer
//! ([`refusable`]; issue 26 item 7).
//!
//! Pure: time is passed in, so the rules are tested with fake clocks.

use crate::config::limits::StormLimits;
use crate::names::Intelligence;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// What the guard says about one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through.
    Pass,
    /// This message made the exchange a storm: the pair is paused until `until` (the caller
    /// logs and reports the new pause). The message itself is refused unless the guard never
    /// refuses its direction ([`refusable`]): then `refused` is false and it passes.
    Tripped {
        /// End of the pause.
        until: Instant,
        /// Whether this message is refused.
        refused: bool,
    },
    /// The pair is paused (since an earlier message) until the given time: refuse it.
    Paused {
        /// End of the pause.
        until: Instant,
    },
}

#[derive(Debug, Default)]
struct PairLog {
    /// Send times from the lower name to the higher, newest last, at most `limit` kept.
    up: VecDeque<Instant>,
    /// Send times from the higher name to the lower.
    down: VecDeque<Instant>,
    paused_until: Option<Instant>,
}

/// Message counts of every pair of non-human peers that talked recently.
#[derive(Debug, Default)]
pub struct StormGuard {
    pairs: HashMap<(String, String), PairLog>,
}

/// Whether the storm guard may refuse a message from a peer of nature `from` to a peer of
/// nature `to` (both not human): every message but a service's (`absent`) to a peer that is
/// not a service, so a pause never silences an owner's timer fires, watcher lines and alerts.
pub fn refusable(from: Intelligence, to: Intelligence) -> bool {
    from != Intelligence::Absent || to == Intelligence::Absent
}

impl StormGuard {
    /// A message from `from` to `to` (personalities), both not human, at `now`; `refusable`
    /// is [`refusable`] of their natures. A message the guard may not refuse passes a pause
    /// (and is not counted while it lasts).
    pub fn note(
        &mut self,
        from: &str,
        to: &str,
        refusable: bool,
        now: Instant,
        limits: StormLimits,
    ) -> Verdict {
        if limits.limit == 0 || from == to {
            return Verdict::Pass;
        }
        let (key, upward) = pair_key(from, to);
        let log = self.pairs.entry(key).or_default();
        match log.paused_until {
            Some(until) if now < until && refusable => return Verdict::Paused { until },
            Some(until) if now < until => return Verdict::Pass,
            Some(_) => *log = PairLog::default(),
            None => {}
        }
        let times = if upward { &mut log.up } else { &mut log.down };
        times.push_back(now);
        while times.len() > limits.limit {
            times.pop_front();
        }
        let full = |q: &VecDeque<Instant>| {
            q.len() >= limits.limit
                && q.front()
                    .is_some_and(|first| now.duration_since(*first) <= limits.window)
        };
        if full(&log.up) && full(&log.down) {
            let until = now + limits.pause;
            log.paused_until = Some(until);
            return Verdict::Tripped {
                until,
                refused: refusable,
            };
        }
        Verdict::Pass
    }

    /// A human wrote to `peer`: lift every pause that involves it. Returns the other peers of
    /// the pairs that were paused.
    pub fn human_stepped_in(&mut self, peer: &str, now: Instant) -> Vec<String> {
        let mut lifted = Vec::new();
        for ((a, b), log) in self.pairs.iter_mut() {
            let involved = a == peer || b == peer;
            if involved && log.paused_until.is_some_and(|u| now < u) {
                *log = PairLog::default();
                lifted.push(if a == peer { b.clone() } else { a.clone() });
            }
        }
        lifted.sort();
        lifted
    }

    /// Forget pairs with nothing recent and no pause (bounded memory; called on the tick).
    pub fn prune(&mut self, now: Instant, limits: StormLimits) {
        self.pairs.retain(|_, log| {
            let recent = |q: &VecDeque<Instant>| {
                q.back()
                    .is_some_and(|last| now.duration_since(*last) <= limits.window)
            };
            log.paused_until.is_some_and(|u| now < u) || recent(&log.up) || recent(&log.down)
        });
    }

    /// Pairs tracked.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.pairs.len()
    }
}

/// The pair's key (names in order) and whether `from → to` is the upward direction.
fn pair_key(from: &str, to: &str) -> ((String, String), bool) {
    if from < to {
        ((from.to_string(), to.to_string()), true)
    } else {
        ((to.to_string(), from.to_string()), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const LIMITS: StormLimits = StormLimits {
        limit: 5,
        window: Duration::from_secs(60),
        pause: Duration::from_secs(300),
    };

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Two peers answering each other three times a second trip the guard on the message
    /// that completes the limit in both directions; later messages either way are paused
    /// until the pause ends, and then counting starts over.
    #[test]
    fn a_ping_pong_is_paused_then_released() {
        let mut g = StormGuard::default();
        let t0 = Instant::now();
        let mut t = t0;
        for _ in 0..4 {
            assert_eq!(g.note("a", "timer", true, t, LIMITS), Verdict::Pass);
            t += ms(330);
            assert_eq!(g.note("timer", "a", true, t, LIMITS), Verdict::Pass);
            t += ms(330);
        }
        assert_eq!(g.note("a", "timer", true, t, LIMITS), Verdict::Pass);
        t += ms(330);
        let until = t + LIMITS.pause;
        assert_eq!(
            g.note("timer", "a", true, t, LIMITS),
            Verdict::Tripped {
                until,
                refused: true
            }
        );
        assert_eq!(
            g.note("a", "timer", true, t + ms(1), LIMITS),
            Verdict::Paused { until }
        );
        assert_eq!(
            g.note("timer", "a", true, until - ms(1), LIMITS),
            Verdict::Paused { until }
        );
        assert_eq!(g.note("timer", "a", true, until, LIMITS), Verdict::Pass);
        // Other pairs are not affected.
        assert_eq!(g.note("a", "b", true, t, LIMITS), Verdict::Pass);
    }

    /// Only a service's (absent) messages to a peer that is not a service are beyond the
    /// guard; between two services, two agents, or an agent and a service the other way, the
    /// guard may refuse.
    #[test]
    fn only_a_services_message_to_a_non_service_is_never_refused() {
        use Intelligence::{Absent, Artificial};
        assert!(!refusable(Absent, Artificial));
        assert!(refusable(Artificial, Absent));
        assert!(refusable(Artificial, Artificial));
        assert!(refusable(Absent, Absent));
    }

    /// An agent that answers every message of the timer service loops with its teaching
    /// replies. The guard trips on the exchange; for the whole pause the agent's messages to
    /// the service are refused (the loop stops), while the service's messages to the agent —
    /// its fires, once a second — all pass, the tripping one included, and are not counted.
    /// After the pause, counting starts over.
    #[test]
    fn a_loop_with_a_service_refuses_only_the_messages_to_the_service() {
        let mut g = StormGuard::default();
        let mut t = Instant::now();
        let to_service = |g: &mut StormGuard, t| g.note("bot", "timer", true, t, LIMITS);
        let from_service = |g: &mut StormGuard, t| g.note("timer", "bot", false, t, LIMITS);
        for _ in 0..4 {
            assert_eq!(to_service(&mut g, t), Verdict::Pass);
            t += ms(5);
            assert_eq!(from_service(&mut g, t), Verdict::Pass);
            t += ms(5);
        }
        assert_eq!(to_service(&mut g, t), Verdict::Pass);
        t += ms(5);
        let until = t + LIMITS.pause;
        let tripped = |refused| Verdict::Tripped { until, refused };
        assert_eq!(
            from_service(&mut g, t),
            tripped(false),
            "the tripping teaching reply is let through"
        );
        let mut fire = t + ms(1);
        while fire < until {
            assert_eq!(
                from_service(&mut g, fire),
                Verdict::Pass,
                "a fire at {fire:?}"
            );
            assert_eq!(
                to_service(&mut g, fire + ms(1)),
                Verdict::Paused { until },
                "the agent's answer to it"
            );
            fire += Duration::from_secs(1);
        }
        assert_eq!(to_service(&mut g, until), Verdict::Pass);
        assert_eq!(from_service(&mut g, until), Verdict::Pass);
        // The agent tripping it: its own message is refused.
        let mut g = StormGuard::default();
        for _ in 0..5 {
            from_service(&mut g, t);
        }
        for _ in 0..4 {
            to_service(&mut g, t);
        }
        assert_eq!(to_service(&mut g, t), tripped(true));
        assert_eq!(from_service(&mut g, t), Verdict::Pass);
        // A human writing to the agent lifts the pause.
        assert_eq!(g.human_stepped_in("bot", t), ["timer"]);
        assert_eq!(to_service(&mut g, t), Verdict::Pass);
    }

    /// A one-way burst is not an exchange: a thousand messages from a script to an agent,
    /// with a few replies, never trip the guard.
    #[test]
    fn a_one_way_burst_is_never_paused() {
        let mut g = StormGuard::default();
        let mut t = Instant::now();
        for i in 0..1000 {
            assert_eq!(g.note("script", "worker", true, t, LIMITS), Verdict::Pass);
            if i % 300 == 0 {
                assert_eq!(g.note("worker", "script", true, t, LIMITS), Verdict::Pass);
            }
            t += ms(10);
        }
    }

    /// The window slides: an exchange slower than `limit` messages per window each way is
    /// never paused, however long it runs.
    #[test]
    fn a_slow_conversation_is_never_paused() {
        let mut g = StormGuard::default();
        let mut t = Instant::now();
        for _ in 0..100 {
            assert_eq!(g.note("a", "b", true, t, LIMITS), Verdict::Pass);
            t += Duration::from_secs(7);
            assert_eq!(g.note("b", "a", true, t, LIMITS), Verdict::Pass);
            t += Duration::from_secs(7);
        }
    }

    /// A human writing to either peer lifts the pause at once; limit 0 turns the guard off.
    #[test]
    fn a_human_lifts_the_pause_and_zero_turns_it_off() {
        let mut g = StormGuard::default();
        let t = Instant::now();
        for _ in 0..5 {
            g.note("a", "b", true, t, LIMITS);
            g.note("b", "a", true, t, LIMITS);
        }
        assert!(matches!(
            g.note("a", "b", true, t, LIMITS),
            Verdict::Paused { .. }
        ));
        assert_eq!(g.human_stepped_in("b", t), ["a"]);
        assert_eq!(g.human_stepped_in("b", t), Vec::<String>::new());
        assert_eq!(g.note("a", "b", true, t, LIMITS), Verdict::Pass);
        let off = StormLimits { limit: 0, ..LIMITS };
        let mut g = StormGuard::default();
        for _ in 0..100 {
            assert_eq!(g.note("a", "b", true, t, off), Verdict::Pass);
            assert_eq!(g.note("b", "a", true, t, off), Verdict::Pass);
        }
    }

    /// Pairs that went quiet are forgotten; a paused pair is kept until its pause ends.
    #[test]
    fn prune_keeps_recent_and_paused_pairs() {
        let mut g = StormGuard::default();
        let t = Instant::now();
        g.note("a", "b", true, t, LIMITS);
        for _ in 0..5 {
            g.note("c", "d", true, t, LIMITS);
            g.note("d", "c", true, t, LIMITS);
        }
        g.prune(t + ms(1000), LIMITS);
        assert_eq!(g.len(), 2);
        g.prune(t + Duration::from_secs(61), LIMITS);
        assert_eq!(g.len(), 1, "the paused pair stays");
        g.prune(t + Duration::from_secs(301), LIMITS);
        assert_eq!(g.len(), 0);
    }
}

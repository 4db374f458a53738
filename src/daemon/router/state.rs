//! The router's state, split by what each part owns: the live sessions and their indexes
//! ([`LiveSessions`]), the delivery queues and the sends being prepared ([`Queues`]), the
//! always-on supervisor ([`Supervisor`]) and the router's own timers ([`Timers`]). The
//! methods that act on one part live with the concern that owns it (`endpoint.rs` for the
//! queues, `always_on.rs` for the supervisor, `events.rs` and `tick.rs` for sessions).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use super::endpoint::{Endpoint, PendingSend};
use super::{AlwaysOn, Sess, Timer};
use crate::daemon::reply::ReplyTo;
use crate::names::Identity;
use crate::protocol::Reply;

/// Every session the router started and has not yet seen end, with the indexes that lead
/// to it (session id from a session event, MCP token from a request), and the replies that
/// wait for some of them to end.
#[derive(Default)]
pub(crate) struct LiveSessions {
    /// At most one session per identity.
    pub sessions: HashMap<Identity, Sess>,
    /// Session id (in [`crate::session::handle::SessionEvent`]) → identity.
    pub session_ids: HashMap<u64, Identity>,
    /// MCP session token → identity.
    pub tokens: HashMap<String, Identity>,
    /// Replies held until some sessions have ended (`stop`).
    pub gone_waiters: Vec<GoneWaiter>,
}

impl LiveSessions {
    /// Track a session that was just spawned (and index its id and token).
    pub fn register(&mut self, sess: Sess) {
        let identity = sess.identity.clone();
        self.tokens.insert(sess.token.clone(), identity.clone());
        self.session_ids.insert(sess.id, identity.clone());
        self.sessions.insert(identity, sess);
    }

    /// Forget session `session` of `identity` (it exited): its indexes go with it. `None`
    /// when `identity`'s tracked session is another one (an older session's late exit).
    pub fn unregister(&mut self, identity: &Identity, session: u64) -> Option<Sess> {
        self.session_ids.remove(&session);
        if self.sessions.get(identity)?.id != session {
            return None;
        }
        let s = self.sessions.remove(identity)?;
        self.tokens.remove(&s.token);
        Some(s)
    }

    /// Answer the replies that waited for `identity`'s session to end and now wait for
    /// nothing.
    pub fn settle_gone_waiters(&mut self, identity: &Identity) {
        let mut done = Vec::new();
        for (i, w) in self.gone_waiters.iter_mut().enumerate() {
            w.waiting.remove(identity);
            if w.waiting.is_empty() {
                done.push(i);
            }
        }
        for i in done.into_iter().rev() {
            let w = self.gone_waiters.remove(i);
            w.reply.finish(w.answer);
        }
    }

    /// Send the reply of gone-waiter `id` now (its deadline passed).
    pub fn expire_gone_waiter(&mut self, id: u64) {
        if let Some(pos) = self.gone_waiters.iter().position(|w| w.id == id) {
            let w = self.gone_waiters.remove(pos);
            w.reply.finish(w.answer);
        }
    }
}

/// A reply held until some sessions have ended (`stop`).
pub(crate) struct GoneWaiter {
    /// Its id (the `GoneDeadline` timer names it).
    pub id: u64,
    /// Where the answer goes.
    pub reply: ReplyTo,
    /// The answer, ready before the sessions end.
    pub answer: Reply,
    /// The identities whose sessions have not ended yet.
    pub waiting: HashSet<Identity>,
}

/// The delivery side: one queue per identity, and the sends whose preparation runs on a
/// worker thread (they join a queue when `RouterMsg::Prepared` arrives).
#[derive(Default)]
pub(crate) struct Queues {
    /// Per-identity queues (spec 03 §1 steps 8–10).
    pub endpoints: HashMap<Identity, Endpoint>,
    /// Sends being prepared, by job id.
    pub preparing: HashMap<u64, PendingSend>,
}

/// Restart state of the always-on (router runtime) identities (spec 05 §8).
#[derive(Default)]
pub(crate) struct Supervisor {
    /// Back-off and parking, per identity.
    pub always_on: HashMap<Identity, AlwaysOn>,
}

/// Deferred work the router schedules for itself, in deadline order.
#[derive(Default)]
pub(crate) struct Timers {
    pending: BTreeMap<(Instant, u64), Timer>,
    seq: u64,
}

impl Timers {
    /// Schedule `t` at `at`.
    pub fn set(&mut self, at: Instant, t: Timer) {
        self.seq += 1;
        self.pending.insert((at, self.seq), t);
    }

    /// The earliest deadline.
    pub fn next_at(&self) -> Option<Instant> {
        self.pending.keys().next().map(|(at, _)| *at)
    }

    /// Take the earliest timer due at `now`, if any.
    pub fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        let (&key, _) = self.pending.iter().next()?;
        if key.0 > now {
            return None;
        }
        self.pending.remove(&key)
    }

    /// A pending timer matches `f`.
    pub fn any(&self, f: impl Fn(&Timer) -> bool) -> bool {
        self.pending.values().any(f)
    }

    /// Drop every pending timer.
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

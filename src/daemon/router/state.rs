//! The router's state, split by what each part owns: the live sessions and their indexes
//! ([`LiveSessions`]), the delivery queues and the sends being prepared ([`Queues`]), the
//! always-on supervisor ([`Supervisor`]) and the router's own timers ([`Timers`]). The
//! methods that act on one part live with the concern that owns it (`endpoint.rs` for the
//! queues, `always_on.rs` for the supervisor, `events.rs` and `tick.rs` for sessions).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use super::decide::LaunchFor;
use super::endpoint::{Endpoint, Job, PendingSend};
use super::now::Now;
use super::sess_state::SessState;
use super::{AlwaysOn, Sess, Timer};
use crate::daemon::lifecycle::WakeDecision;
use crate::daemon::reply::ReplyTo;
use crate::names::Identity;
use crate::protocol::Reply;
use crate::runtime::{RuntimeKind, WakeMode};
use crate::session::handle::{Cause, SessionCmd, SessionEvent};

/// Every session the router started and has not yet seen end, with the indexes that lead
/// to it (session id from a session event, MCP token from a request), and the replies that
/// wait for some of them to end.
///
/// An identity has at most one session, spawned ([`Tracked::Live`]) or being spawned by a
/// launcher thread ([`Tracked::Launching`]).
#[derive(Default)]
pub(crate) struct LiveSessions {
    /// At most one session per identity, spawned or being launched.
    tracked: HashMap<Identity, Tracked>,
    /// Session id (in [`crate::session::handle::SessionEvent`]) → identity.
    session_ids: HashMap<u64, Identity>,
    /// MCP session token → identity.
    tokens: HashMap<String, Identity>,
    /// Replies held until some sessions have ended (`stop`).
    gone_waiters: Vec<GoneWaiter>,
}

/// An identity's session: being launched, or spawned.
pub(crate) enum Tracked {
    /// A launcher thread is spawning it and has not reported yet (its id and token are
    /// indexed already, so early events and MCP calls find them).
    Launching(Launching),
    /// Spawned: its session thread runs (boxed: a `Sess` is several times a `Launching`).
    Live(Box<Sess>),
}

/// A session being launched: what the router decided, and what arrived for it before the
/// launcher thread reported.
pub(crate) struct Launching {
    /// The new session's id.
    pub session: u64,
    /// Its runtime kind.
    pub kind: RuntimeKind,
    /// Its MCP session token (made by the router, so it is indexed from the start).
    pub token: String,
    /// What the launch is for.
    pub purpose: LaunchFor,
    /// `Booting`, or `Ending` once the router ended it while it launched.
    pub state: SessState,
    /// When the router decided the launch (the session's wake time).
    pub started: Now,
    /// What its `wake` line says: fresh or resume, the conversation, the decision.
    pub wake: WakeLine,
    /// The queued send that rides the wake as its first message.
    pub first_job: Option<u64>,
    /// What arrived for it before the launcher reported.
    pub early: Early,
    /// The peer is an ephemeral worker (spec 05 §6).
    pub ephemeral: bool,
}

/// What a launch's `wake` line in `lifecycle.log` says besides the identity and the pid.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WakeLine {
    /// Fresh or resume (`mode=`).
    pub mode: WakeMode,
    /// The conversation it starts or resumes, when known at launch (`conversation=`; issue
    /// 32).
    pub conversation: Option<String>,
    /// The fresh/resume decision (agents only; `cause=`).
    pub decision: Option<WakeDecision>,
}

/// What arrived for a session being launched before its launcher thread reported.
#[derive(Default)]
pub(crate) struct Early {
    /// Session events, replayed in order once the session is tracked.
    pub events: Vec<SessionEvent>,
    /// Its MCP client listed the tools (told to the session when it is tracked).
    pub mcp_up: bool,
}

impl LiveSessions {
    /// `identity`'s spawned session.
    pub fn get(&self, identity: &Identity) -> Option<&Sess> {
        match self.tracked.get(identity)? {
            Tracked::Live(s) => Some(&**s),
            Tracked::Launching(_) => None,
        }
    }

    /// `identity`'s spawned session, to change.
    pub fn get_mut(&mut self, identity: &Identity) -> Option<&mut Sess> {
        match self.tracked.get_mut(identity)? {
            Tracked::Live(s) => Some(&mut **s),
            Tracked::Launching(_) => None,
        }
    }

    /// `identity`'s session being launched, to change.
    pub fn launching_mut(&mut self, identity: &Identity) -> Option<&mut Launching> {
        match self.tracked.get_mut(identity)? {
            Tracked::Launching(l) => Some(l),
            Tracked::Live(_) => None,
        }
    }

    /// `identity`'s session is being launched.
    pub fn is_launching(&self, identity: &Identity) -> bool {
        matches!(self.tracked.get(identity), Some(Tracked::Launching(_)))
    }

    /// `identity` has a spawned session.
    pub fn is_live(&self, identity: &Identity) -> bool {
        self.get(identity).is_some()
    }

    /// Every spawned session.
    pub fn spawned(&self) -> impl Iterator<Item = &Sess> {
        self.tracked.values().filter_map(|t| match t {
            Tracked::Live(s) => Some(&**s),
            Tracked::Launching(_) => None,
        })
    }

    /// Every spawned session, to change.
    pub fn spawned_mut(&mut self) -> impl Iterator<Item = &mut Sess> {
        self.tracked.values_mut().filter_map(|t| match t {
            Tracked::Live(s) => Some(&mut **s),
            Tracked::Launching(_) => None,
        })
    }

    /// Every session being launched, by identity.
    pub fn launches(&self) -> impl Iterator<Item = (&Identity, &Launching)> {
        self.tracked.iter().filter_map(|(id, t)| match t {
            Tracked::Launching(l) => Some((id, l)),
            Tracked::Live(_) => None,
        })
    }

    /// Every session being launched, by identity, to change.
    pub fn launches_mut(&mut self) -> impl Iterator<Item = (&Identity, &mut Launching)> {
        self.tracked.iter_mut().filter_map(|(id, t)| match t {
            Tracked::Launching(l) => Some((id, l)),
            Tracked::Live(_) => None,
        })
    }

    /// Forget every session, spawned or being launched (their indexes stay).
    pub fn clear(&mut self) {
        self.tracked.clear();
    }

    /// `identity`'s session, spawned or still being launched, is an ephemeral worker (spec
    /// 05 §6). A launching one counts: an echo-fast worker answers its first message (which
    /// its session thread delivers on its own) before the launcher thread has reported.
    pub fn is_ephemeral(&self, identity: &Identity) -> bool {
        match self.tracked.get(identity) {
            Some(Tracked::Live(s)) => s.ephemeral,
            Some(Tracked::Launching(l)) => l.ephemeral,
            None => false,
        }
    }

    /// `identity` has a session, spawned or being launched.
    pub fn has(&self, identity: &Identity) -> bool {
        self.tracked.contains_key(identity)
    }

    /// Every identity with a session, spawned or being launched.
    pub fn identities(&self) -> impl Iterator<Item = &Identity> {
        self.tracked.keys()
    }

    /// No session is left, spawned or being launched.
    pub fn is_empty(&self) -> bool {
        self.tracked.is_empty()
    }

    /// How many sessions there are, spawned or being launched.
    pub fn len(&self) -> usize {
        self.tracked.len()
    }

    /// Track a launch the router just handed to a launcher thread (and index its id and
    /// token).
    pub fn begin_launch(&mut self, identity: Identity, l: Launching) {
        self.tokens.insert(l.token.clone(), identity.clone());
        self.session_ids.insert(l.session, identity.clone());
        self.tracked.insert(identity, Tracked::Launching(l));
    }

    /// Take the launch of session `session` of `identity` (its launcher reported). A failed
    /// launch's indexes go with it when `failed`.
    pub fn end_launch(
        &mut self,
        identity: &Identity,
        session: u64,
        failed: bool,
    ) -> Option<Launching> {
        match self.tracked.get(identity)? {
            Tracked::Launching(l) if l.session == session => {}
            _ => return None,
        }
        let Some(Tracked::Launching(l)) = self.tracked.remove(identity) else {
            return None;
        };
        if failed {
            self.session_ids.remove(&session);
            self.tokens.remove(&l.token);
        }
        Some(l)
    }

    /// Tell `identity`'s session to end for `cause` (a launching one is ended as soon as
    /// its launcher reports). `None` when it has no session; otherwise whether it was not
    /// ending already (a session already ending keeps its first cause).
    pub fn end(&mut self, identity: &Identity, cause: Cause) -> Option<bool> {
        match self.tracked.get_mut(identity)? {
            Tracked::Live(s) => {
                let fresh = !s.state.is_ending();
                s.state.end(cause);
                if fresh {
                    s.handle.send(SessionCmd::Kill(cause));
                }
                Some(fresh)
            }
            Tracked::Launching(l) => {
                let fresh = !l.state.is_ending();
                l.state.end(cause);
                Some(fresh)
            }
        }
    }

    /// Track a session that was just spawned (and index its id and token).
    pub fn register(&mut self, sess: Sess) {
        let identity = sess.identity.clone();
        self.tokens.insert(sess.token.clone(), identity.clone());
        self.session_ids.insert(sess.id, identity.clone());
        self.tracked.insert(identity, Tracked::Live(Box::new(sess)));
    }

    /// Forget session `session` of `identity` (it exited): its indexes go with it. `None`
    /// when `identity`'s tracked session is another one (an older session's late exit).
    pub fn unregister(&mut self, identity: &Identity, session: u64) -> Option<Sess> {
        self.session_ids.remove(&session);
        if self.get(identity)?.id != session {
            return None;
        }
        let Some(Tracked::Live(s)) = self.tracked.remove(identity) else {
            return None;
        };
        self.tokens.remove(&s.token);
        Some(*s)
    }

    /// The identity whose session has id `session` (of a session event), spawned or being
    /// launched.
    pub fn by_session_id(&self, session: u64) -> Option<&Identity> {
        self.session_ids.get(&session)
    }

    /// The identity whose session has MCP token `token`, spawned or being launched.
    pub fn by_token(&self, token: &str) -> Option<&Identity> {
        self.tokens.get(token)
    }

    /// Hold `w`'s reply until its sessions have ended (or its deadline passes).
    pub fn wait_gone(&mut self, w: GoneWaiter) {
        self.gone_waiters.push(w);
    }

    /// Send every held gone-waiter reply now (the daemon is shutting down).
    pub fn finish_gone_waiters(&mut self) {
        for w in self.gone_waiters.drain(..) {
            w.reply.finish(w.answer);
        }
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
    endpoints: HashMap<Identity, Endpoint>,
    /// Sends being prepared, by job id.
    preparing: HashMap<u64, PendingSend>,
    /// Sends an agent runtime queued behind a running turn, by job (= delivery) id, until
    /// their fate is known (spec 03 §1 step 9).
    followed: HashMap<u64, super::followup::Followed>,
    /// The last [`super::followup::RECENT_DELIVERED`] sends answered delivered (or queued) or
    /// `state-unknown`, by job id, oldest first, with what their senders were told (issue 26
    /// items 8 and 5 (c): a notice when their text is cleared from a composer).
    delivered: Recent,
}

/// The recently delivered sends of [`Queues`]: job id, the send, what its sender was told.
pub(crate) type Recent =
    std::collections::VecDeque<(u64, super::followup::Followed, super::followup::Told)>;

impl Queues {
    /// `identity`'s queue, when it has one.
    pub fn endpoint(&self, identity: &Identity) -> Option<&Endpoint> {
        self.endpoints.get(identity)
    }

    /// The head of `identity`'s queue (the job in flight, or the next one).
    pub fn head(&self, identity: &Identity) -> Option<&Job> {
        self.endpoints.get(identity)?.queue.front()
    }

    /// `identity`'s queue, to change, when it has one.
    pub fn endpoint_mut(&mut self, identity: &Identity) -> Option<&mut Endpoint> {
        self.endpoints.get_mut(identity)
    }

    /// `identity`'s queue, made empty when it has none.
    pub fn endpoint_or_new(&mut self, identity: &Identity) -> &mut Endpoint {
        self.endpoints.entry(identity.clone()).or_default()
    }

    /// `identity` has a queue.
    pub fn has_endpoint(&self, identity: &Identity) -> bool {
        self.endpoints.contains_key(identity)
    }

    /// Take `identity`'s queue away.
    pub fn remove_endpoint(&mut self, identity: &Identity) -> Option<Endpoint> {
        self.endpoints.remove(identity)
    }

    /// Every queue, by identity.
    pub fn endpoints(&self) -> impl Iterator<Item = (&Identity, &Endpoint)> {
        self.endpoints.iter()
    }

    /// Take every queue away.
    pub fn drain_endpoints(&mut self) -> Vec<(Identity, Endpoint)> {
        self.endpoints.drain().collect()
    }

    /// Whether `identity` waits on a send of its own: one being prepared, or queued at an
    /// endpoint (a wake it rides on included). An agent's `send_to_peer` is answered once its
    /// message is taken, so until then the agent is mid-turn, whatever its screen says.
    pub fn sends_from(&self, identity: &Identity) -> bool {
        let claimed = identity.to_string();
        self.preparing
            .values()
            .any(|j| j.input.caller.claimed() == claimed)
            || self
                .endpoints
                .values()
                .flat_map(|e| e.queue.iter())
                .any(|j| matches!(j, Job::Send(s) if s.prepared.caller == *identity))
    }

    /// Track send `id` while a worker prepares it.
    pub fn prepare(&mut self, id: u64, job: PendingSend) {
        self.preparing.insert(id, job);
    }

    /// Send `id` being prepared, to change.
    pub fn preparing_mut(&mut self, id: u64) -> Option<&mut PendingSend> {
        self.preparing.get_mut(&id)
    }

    /// Take send `id` out of preparation.
    pub fn take_preparing(&mut self, id: u64) -> Option<PendingSend> {
        self.preparing.remove(&id)
    }

    /// Take every send being prepared.
    pub fn drain_preparing(&mut self) -> Vec<PendingSend> {
        self.preparing.drain().map(|(_, j)| j).collect()
    }

    /// Follow send `id`, queued by its runtime, until its fate is known.
    pub fn follow(&mut self, id: u64, f: super::followup::Followed) {
        self.followed.insert(id, f);
    }

    /// Stop following send `id` (its fate is known).
    pub fn take_followed(&mut self, id: u64) -> Option<super::followup::Followed> {
        self.followed.remove(&id)
    }

    /// The recently delivered sends, oldest first.
    pub fn recent(&self) -> &Recent {
        &self.delivered
    }

    /// The recently delivered sends, to change.
    pub fn recent_mut(&mut self) -> &mut Recent {
        &mut self.delivered
    }
}

/// Restart state of the always-on (router runtime) identities (spec 05 §8).
#[derive(Default)]
pub(crate) struct Supervisor {
    /// Back-off and parking, per identity.
    always_on: HashMap<Identity, AlwaysOn>,
    /// Ephemeral identities whose drained task failed: no new attempt before this time.
    drain_retry: HashMap<Identity, Instant>,
    /// The package runtimes installed at the last look (`runtime::manifest::installed`).
    runtimes_seen: Vec<String>,
    /// The always-on peers could not be started because the registry could not be read:
    /// every tick tries again (until `verify --fix` repairs it).
    always_on_unstarted: bool,
}

impl Supervisor {
    /// `ident`'s restart state, made when it has none yet.
    pub fn always_on(&mut self, ident: &Identity) -> &mut AlwaysOn {
        self.always_on.entry(ident.clone()).or_default()
    }

    /// `ident` was parked after a crash loop.
    pub fn is_parked(&self, ident: &Identity) -> bool {
        self.always_on.get(ident).is_some_and(|st| st.parked)
    }

    /// Every parked identity (in no order).
    pub fn parked(&self) -> impl Iterator<Item = &Identity> {
        self.always_on
            .iter()
            .filter(|(_, st)| st.parked)
            .map(|(k, _)| k)
    }

    /// Whether `ident` is to start again as soon as it is gone (`new`); clears it.
    pub fn take_restart_on_exit(&mut self, ident: &Identity) -> bool {
        self.always_on
            .get_mut(ident)
            .is_some_and(|st| std::mem::take(&mut st.restart_on_exit))
    }

    /// Forget the restart state of every runtime of `personality` (`forget`).
    pub fn forget(&mut self, personality: &str) {
        self.always_on.retain(|k, _| k.personality != personality);
    }

    /// `ident`'s next drained task may not start yet at `now` (the last one failed).
    pub fn drain_waits(&self, ident: &Identity, now: Instant) -> bool {
        self.drain_retry.get(ident).is_some_and(|at| *at > now)
    }

    /// `ident`'s next drained task waits until `at`.
    pub fn retry_drain_at(&mut self, ident: &Identity, at: Instant) {
        self.drain_retry.insert(ident.clone(), at);
    }

    /// `ident`'s drained task started: no wait before the next one.
    pub fn drain_started(&mut self, ident: &Identity) {
        self.drain_retry.remove(ident);
    }

    /// Take `installed` as the package runtimes now installed and return those that were
    /// not at the last look.
    pub fn new_runtimes(&mut self, installed: Vec<String>) -> Vec<String> {
        let seen = std::mem::replace(&mut self.runtimes_seen, installed);
        self.runtimes_seen
            .iter()
            .filter(|rt| !seen.contains(rt))
            .cloned()
            .collect()
    }

    /// The always-on peers could not be started (the registry did not read).
    pub fn is_unstarted(&self) -> bool {
        self.always_on_unstarted
    }

    /// Mark the always-on peers as not started: every tick tries again.
    pub fn set_unstarted(&mut self) {
        self.always_on_unstarted = true;
    }

    /// Whether the always-on peers were marked not started; clears the mark.
    pub fn take_unstarted(&mut self) -> bool {
        std::mem::take(&mut self.always_on_unstarted)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn launching(session: u64, ephemeral: bool) -> Launching {
        Launching {
            session,
            kind: RuntimeKind::Agent,
            token: format!("token-{session}"),
            purpose: LaunchFor::Head,
            state: SessState::Booting,
            started: Now::read(),
            wake: WakeLine {
                mode: WakeMode::Fresh,
                conversation: None,
                decision: None,
            },
            first_job: Some(1),
            early: Early::default(),
            ephemeral,
        }
    }

    /// The reply of a worker whose launcher has not reported yet still arms its wind-down
    /// (seen as a stalled ephemeral queue: the reply came before `Launched`).
    #[test]
    fn a_launching_worker_is_ephemeral_and_a_stranger_is_not() {
        let mut live = LiveSessions::default();
        let worker = Identity::new("echo", "worker").unwrap();
        let other = Identity::new("echo", "other").unwrap();
        assert!(!live.is_ephemeral(&worker));
        live.begin_launch(worker.clone(), launching(7, true));
        live.begin_launch(other.clone(), launching(8, false));
        assert!(live.is_ephemeral(&worker));
        assert!(!live.is_ephemeral(&other));
        assert!(!live.is_ephemeral(&Identity::new("echo", "nobody").unwrap()));
    }

    /// A runtime counts as new once: the first look is the baseline, a later look names
    /// only what was not there before.
    #[test]
    fn new_runtimes_are_those_not_seen_at_the_last_look() {
        let mut s = Supervisor::default();
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(s.new_runtimes(v(&["a"])), v(&["a"]));
        assert!(s.new_runtimes(v(&["a"])).is_empty());
        assert_eq!(s.new_runtimes(v(&["b", "a", "c"])), v(&["b", "c"]));
        assert!(s.new_runtimes(v(&["c"])).is_empty());
    }

    /// A spawned session for `identity` whose commands arrive on the returned receiver (a
    /// real channel and a real mio waker).
    fn sess(
        identity: &Identity,
        id: u64,
        poll: &mio::Poll,
    ) -> (Sess, crossbeam_channel::Receiver<SessionCmd>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let waker = mio::Waker::new(poll.registry(), mio::Token(0)).unwrap();
        let handle = crate::session::handle::SessionHandle {
            tx,
            waker: std::sync::Arc::new(waker),
        };
        let sess = Sess {
            id,
            identity: identity.clone(),
            handle,
            pid: 1,
            kind: RuntimeKind::Agent,
            state: SessState::Booting,
            woke_at_ms: 0,
            started: Instant::now(),
            last_delivery_ms: None,
            attached: 0,
            token: format!("token-{id}"),
            status: None,
            mode: WakeMode::Fresh,
            mcp_up: false,
            ephemeral: false,
            cut: Vec::new(),
        };
        (sess, rx)
    }

    /// One identity goes launching → ended while launching → spawned → gone; at every step
    /// it is exactly one of launching or live, and its indexes follow it.
    #[test]
    fn an_identity_is_launching_or_live_never_both() {
        let poll = mio::Poll::new().unwrap();
        let mut live = LiveSessions::default();
        let bob = Identity::new("claude", "bob").unwrap();
        live.begin_launch(bob.clone(), launching(7, false));
        assert!(live.has(&bob) && live.is_launching(&bob) && !live.is_live(&bob));
        assert_eq!(live.by_session_id(7), Some(&bob));
        assert_eq!(live.by_token("token-7"), Some(&bob));
        // Ended while launching: the first cause is kept, nothing is sent.
        assert_eq!(live.end(&bob, Cause::Stop), Some(true));
        assert_eq!(live.end(&bob, Cause::Shutdown), Some(false));
        // Another session's launcher report does not take this launch.
        assert!(live.end_launch(&bob, 8, false).is_none());
        let l = live.end_launch(&bob, 7, false).unwrap();
        assert_eq!(l.state.ending_cause(), Some(Cause::Stop));
        assert!(!live.has(&bob) && live.is_empty());
        // Its indexes stay for the session it becomes.
        assert_eq!(live.by_session_id(7), Some(&bob));
        let (s, rx) = sess(&bob, 7, &poll);
        live.register(s);
        assert!(live.is_live(&bob) && !live.is_launching(&bob));
        assert_eq!(live.len(), 1);
        assert_eq!(live.spawned().count(), 1);
        assert_eq!(live.launches().count(), 0);
        assert_eq!(live.end(&bob, Cause::Stop), Some(true));
        assert!(matches!(rx.try_recv(), Ok(SessionCmd::Kill(Cause::Stop))));
        assert_eq!(live.end(&bob, Cause::Stop), Some(false));
        assert!(rx.try_recv().is_err());
        // An older session's late exit leaves it; its own exit takes it and its indexes.
        assert!(live.unregister(&bob, 6).is_none());
        assert!(live.is_live(&bob));
        assert_eq!(live.unregister(&bob, 7).map(|s| s.id), Some(7));
        assert!(live.is_empty());
        assert_eq!(live.by_session_id(7), None);
        assert_eq!(live.by_token("token-7"), None);
    }

    /// A failed launch takes its indexes with it.
    #[test]
    fn a_failed_launch_takes_its_indexes() {
        let mut live = LiveSessions::default();
        let bob = Identity::new("claude", "bob").unwrap();
        live.begin_launch(bob.clone(), launching(3, false));
        assert!(live.end_launch(&bob, 3, true).is_some());
        assert!(live.is_empty());
        assert_eq!(live.by_session_id(3), None);
        assert_eq!(live.by_token("token-3"), None);
    }
}

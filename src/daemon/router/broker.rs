//! The approval broker's state (spec 10 §4): the permission prompts of gated peers waiting
//! for a human, each with the requester's held answer. Pure: no clock, no I/O; the router
//! passes the time in and carries out what the methods return (answer the requester, log).
//!
//! Every way a request can end other than a human's `approve` is a deny: its deadline passes
//! ([`Broker::expired`]), its requester goes away ([`Broker::abandoned`]), its session ends
//! ([`Broker::of_identity`]) or the daemon stops ([`Broker::drain`]; a restart forgets the
//! board, and the hook, whose connection closed, denies).

use std::collections::BTreeMap;

use crate::names::Identity;

/// One pending permission prompt. `R` is how its requester is answered (the router's
/// `ReplyTo`; `()` in tests).
#[derive(Debug)]
pub struct Pending<R> {
    /// `ap-<8 hex>`.
    pub id: String,
    /// The asking session.
    pub identity: Identity,
    /// The tool (`Bash`, `Write`, …).
    pub tool: String,
    /// What it wants to run.
    pub summary: String,
    /// When it was asked, epoch ms.
    pub created_ms: u64,
    /// When it is denied unanswered, epoch ms.
    pub deadline_ms: u64,
    /// The held answer.
    pub reply: R,
}

/// Why a request was denied without a human's `deny` (the `reason=` of its log line and
/// the message the model gets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoDeny {
    /// Nobody answered within `IAPEER_APPROVAL_TIMEOUT_MS`.
    Timeout,
    /// The asking hook's connection closed.
    Disconnected,
    /// The asking session ended.
    SessionEnded,
    /// The daemon is stopping.
    Shutdown,
}

impl AutoDeny {
    /// The log word: `timeout`, `disconnected`, `session-ended`, `shutdown`.
    pub fn as_str(self) -> &'static str {
        match self {
            AutoDeny::Timeout => "timeout",
            AutoDeny::Disconnected => "disconnected",
            AutoDeny::SessionEnded => "session-ended",
            AutoDeny::Shutdown => "shutdown",
        }
    }

    /// The message the model is given with the deny.
    pub fn message(self) -> &'static str {
        match self {
            AutoDeny::Timeout => "denied: no human answered the approval request in time",
            AutoDeny::Disconnected => "denied: the approval request was cut off",
            AutoDeny::SessionEnded => "denied: the session ended",
            AutoDeny::Shutdown => "denied: the iapeer daemon is stopping",
        }
    }
}

/// A long poll of the list (`approvals` with `wait_ms`): answered once a prompt asked after
/// `since_ms` is pending, or at `deadline_ms`, whichever comes first.
#[derive(Debug)]
pub struct Waiter<R> {
    /// Only prompts asked after this time (epoch ms) wake it.
    pub since_ms: u64,
    /// When it is answered anyway, epoch ms.
    pub deadline_ms: u64,
    /// The held answer.
    pub reply: R,
}

/// The pending prompts by id (`R`: how each asker is answered), and the long polls of
/// their list (`W`: how each poller is answered).
#[derive(Debug)]
pub struct Broker<R, W = R> {
    pending: BTreeMap<String, Pending<R>>,
    waiters: Vec<Waiter<W>>,
}

impl<R, W> Default for Broker<R, W> {
    fn default() -> Self {
        Broker {
            pending: BTreeMap::new(),
            waiters: Vec::new(),
        }
    }
}

impl<R, W> Broker<R, W> {
    /// An id no pending prompt has: the first of `draw`'s ids that is free.
    pub fn free_id(&self, mut draw: impl FnMut() -> String) -> String {
        loop {
            let id = draw();
            if !self.pending.contains_key(&id) {
                return id;
            }
        }
    }

    /// Add a prompt; its id must be free ([`Broker::free_id`]), else it replaces nothing and
    /// is refused with `false`.
    pub fn open(&mut self, p: Pending<R>) -> bool {
        if self.pending.contains_key(&p.id) {
            return false;
        }
        self.pending.insert(p.id.clone(), p);
        true
    }

    /// Take the prompt `id` out to answer it (approve or deny); `None` when no prompt has
    /// that id (answered, denied already, or never asked).
    pub fn take(&mut self, id: &str) -> Option<Pending<R>> {
        self.pending.remove(id)
    }

    /// The prompts, oldest first (by `created_ms`, then id).
    pub fn list(&self) -> Vec<&Pending<R>> {
        let mut v: Vec<&Pending<R>> = self.pending.values().collect();
        v.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        v
    }

    /// Number of prompts pending.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when something waits for the clock: a prompt's deadline or a long poll's.
    pub fn needs_sweep(&self) -> bool {
        !self.pending.is_empty() || !self.waiters.is_empty()
    }

    /// True when a long poll asked after `since_ms` would be answered now.
    pub fn has_newer(&self, since_ms: u64) -> bool {
        self.pending.values().any(|p| p.created_ms > since_ms)
    }

    /// Hold a long poll.
    pub fn wait(&mut self, w: Waiter<W>) {
        self.waiters.push(w);
    }

    /// Take out the long polls to answer now: a newer prompt is pending, their deadline is
    /// at or before `now_ms`, or `gone` says their requester left (answered all the same;
    /// the answer is dropped).
    pub fn due_waiters(&mut self, now_ms: u64, gone: impl Fn(&W) -> bool) -> Vec<Waiter<W>> {
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiters)
            .into_iter()
            .partition(|w| w.deadline_ms <= now_ms || gone(&w.reply) || self.has_newer(w.since_ms));
        self.waiters = keep;
        due
    }

    /// Take out every long poll (the daemon is stopping).
    pub fn drain_waiters(&mut self) -> Vec<Waiter<W>> {
        std::mem::take(&mut self.waiters)
    }

    /// Take out every prompt whose deadline is at or before `now_ms`.
    pub fn expired(&mut self, now_ms: u64) -> Vec<Pending<R>> {
        self.take_where(|p| p.deadline_ms <= now_ms)
    }

    /// Take out every prompt whose requester `gone` says has left.
    pub fn abandoned(&mut self, gone: impl Fn(&R) -> bool) -> Vec<Pending<R>> {
        self.take_where(|p| gone(&p.reply))
    }

    /// Take out every prompt of `identity` (its session ended).
    pub fn of_identity(&mut self, identity: &Identity) -> Vec<Pending<R>> {
        self.take_where(|p| &p.identity == identity)
    }

    /// Take out every prompt (the daemon is stopping).
    pub fn drain(&mut self) -> Vec<Pending<R>> {
        std::mem::take(&mut self.pending).into_values().collect()
    }

    /// Take out every prompt `f` picks.
    pub fn take_where(&mut self, f: impl Fn(&Pending<R>) -> bool) -> Vec<Pending<R>> {
        let ids: Vec<String> = self
            .pending
            .values()
            .filter(|p| f(p))
            .map(|p| p.id.clone())
            .collect();
        ids.iter()
            .filter_map(|id| self.pending.remove(id))
            .collect()
    }
}

/// A new approval id: `ap-` and 8 lowercase hex digits.
pub fn new_id() -> String {
    format!("ap-{}", crate::fsutil::random_hex(4))
}

/// True when `id` has the shape of an approval id (`ap-` and 8 lowercase hex digits).
pub fn valid_id(id: &str) -> bool {
    id.strip_prefix("ap-").is_some_and(|h| {
        h.len() == 8
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(id: &str, who: &str, created: u64, deadline: u64, reply: u32) -> Pending<u32> {
        Pending {
            id: id.into(),
            identity: Identity::parse(who).unwrap(),
            tool: "Bash".into(),
            summary: "touch x".into(),
            created_ms: created,
            deadline_ms: deadline,
            reply,
        }
    }

    /// A broker with `asks` opened, each one new.
    fn opened<const N: usize>(asks: [Pending<u32>; N]) -> Broker<u32> {
        let mut b = Broker::default();
        for a in asks {
            assert!(b.open(a));
        }
        b
    }

    #[test]
    fn open_list_oldest_first_and_take_once() {
        let mut b = opened([
            ask("ap-00000002", "claude-a", 20, 100, 2),
            ask("ap-00000001", "claude-b", 30, 100, 1),
        ]);
        let ids: Vec<&str> = b.list().iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["ap-00000002", "ap-00000001"]);
        assert!(!b.open(ask("ap-00000001", "claude-c", 40, 100, 3)));
        let mut draws = vec!["ap-00000003".to_string(), "ap-00000002".to_string()];
        assert_eq!(b.free_id(|| draws.pop().unwrap()), "ap-00000003");
        assert_eq!(b.take("ap-00000001").map(|p| p.reply), Some(1));
        assert!(b.take("ap-00000001").is_none(), "answered once");
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn a_deadline_denies_at_its_millisecond_not_before() {
        let mut b = opened([
            ask("ap-00000001", "claude-a", 0, 100, 1),
            ask("ap-00000002", "claude-a", 0, 200, 2),
        ]);
        assert!(b.expired(99).is_empty());
        let gone: Vec<u32> = b.expired(100).into_iter().map(|p| p.reply).collect();
        assert_eq!(gone, [1]);
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn departed_requesters_ended_sessions_and_shutdown_all_take_theirs() {
        let mut b = opened([
            ask("ap-00000001", "claude-a", 0, 100, 1),
            ask("ap-00000002", "claude-b", 0, 100, 2),
            ask("ap-00000003", "claude-b", 0, 100, 3),
        ]);
        let left: Vec<u32> = b
            .abandoned(|r| *r == 1)
            .into_iter()
            .map(|p| p.reply)
            .collect();
        assert_eq!(left, [1]);
        let ended = b.of_identity(&Identity::parse("claude-b").unwrap());
        assert_eq!(ended.len(), 2);
        assert!(b.open(ask("ap-00000004", "claude-c", 0, 100, 4)));
        assert_eq!(b.drain().len(), 1);
        assert_eq!(b.len(), 0);
    }

    #[test]
    fn a_long_poll_is_answered_by_a_newer_prompt_or_its_deadline() {
        let mut b = opened([ask("ap-00000001", "claude-a", 50, 1_000, 1)]);
        assert!(b.has_newer(0) && !b.has_newer(50));
        b.wait(Waiter {
            since_ms: 50,
            deadline_ms: 500,
            reply: 10,
        });
        b.wait(Waiter {
            since_ms: 50,
            deadline_ms: 900,
            reply: 11,
        });
        b.wait(Waiter {
            since_ms: 50,
            deadline_ms: 900,
            reply: 12,
        });
        assert!(
            b.due_waiters(100, |_| false).is_empty(),
            "the old prompt wakes nobody"
        );
        let left: Vec<u32> = b
            .due_waiters(100, |r| *r == 12)
            .into_iter()
            .map(|w| w.reply)
            .collect();
        assert_eq!(left, [12]);
        let timed: Vec<u32> = b
            .due_waiters(500, |_| false)
            .into_iter()
            .map(|w| w.reply)
            .collect();
        assert_eq!(timed, [10]);
        assert!(b.open(ask("ap-00000002", "claude-a", 60, 1_000, 2)));
        let woken: Vec<u32> = b
            .due_waiters(100, |_| false)
            .into_iter()
            .map(|w| w.reply)
            .collect();
        assert_eq!(woken, [11]);
        assert!(b.needs_sweep());
        b.drain();
        assert!(!b.needs_sweep());
    }

    #[test]
    fn ids_are_ap_and_eight_hex_digits() {
        let id = new_id();
        assert!(valid_id(&id), "{id}");
        for bad in ["ap-0123ABCD", "ap-123", "og-0123abcd", "ap-0123abcde", ""] {
            assert!(!valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn every_automatic_end_is_a_deny_with_its_reason() {
        for (r, word) in [
            (AutoDeny::Timeout, "timeout"),
            (AutoDeny::Disconnected, "disconnected"),
            (AutoDeny::SessionEnded, "session-ended"),
            (AutoDeny::Shutdown, "shutdown"),
        ] {
            assert_eq!(r.as_str(), word);
            assert!(r.message().starts_with("denied: "));
        }
    }
}

//! Message ids at the router (issue 26 item 5): a send whose id was begun before for its
//! endpoint is answered with what is known of the first and never written again; the
//! [`crate::msgids::Ledger`] is told each send's known end; a delivery that may have arrived
//! is answered "state unknown" (code `state-unknown`), never "NOT delivered".

use super::endpoint::{Job, QueuedSend};
use super::Router;
use crate::daemon::route::Refusal;
use crate::eventlog::Event;
use crate::msgids::{Fate, MsgKey};
use crate::names::Identity;
use crate::protocol::Code;

/// The answer to a send whose message may have arrived: `state unknown: it may have
/// arrived`, the peer, `cause` (what happened) and the id a retry must reuse.
pub(crate) fn unknown_refusal(to: &Identity, msg_id: &str, cause: &str) -> Refusal {
    Refusal {
        code: Code::StateUnknown,
        error: format!(
            "state unknown: it may have arrived — the message was written (in part or whole) to \
             the input of peer \"{}\" ({}) and its arrival was never confirmed: {cause}. Message \
             id {msg_id}: a retry with this id is never delivered twice",
            to.personality, to.runtime
        ),
    }
}

/// The answer to a send whose id was begun earlier for the same peer and never confirmed.
pub(crate) fn begun_earlier(to: &Identity, msg_id: &str) -> Refusal {
    Refusal {
        code: Code::StateUnknown,
        error: format!(
            "state unknown: it may have arrived; not sent again — a message with id {msg_id} \
             from this sender was begun earlier into the input of peer \"{}\" ({}) and its \
             arrival was never confirmed",
            to.personality, to.runtime
        ),
    }
}

/// A message's end as the ledger records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// Confirmed delivered, or taken into a queue.
    Accepted,
    /// Not one byte reached the peer (or it was taken back whole): its id is free again.
    NotWritten,
}

impl Router {
    /// What the ledger knows of `job`'s id at its endpoint (`None`: never begun, or free).
    /// An id begun under an earlier daemon and never confirmed is freed here when the
    /// endpoint runtime's records show the message never arrived
    /// ([`crate::msgids::free_after_restart`]): the send goes out again (issue 28 item 7).
    pub(crate) fn earlier_fate(&self, job: &QueuedSend) -> Option<Fate> {
        let to = job.prepared.endpoint.to_string();
        let key = job.key();
        let (fate, begun_ms) = self.ids.fate_at(&to, &key)?;
        let recorded = || {
            let adapter = self.adapter(&job.prepared.endpoint.runtime).ok()?;
            let body = &job.prepared.envelope.body;
            adapter.records_hold(&job.prepared.target.cwd, body, begun_ms)
        };
        if !crate::msgids::free_after_restart(fate, begun_ms, self.info.started_ms, recorded) {
            return Some(fate);
        }
        log::info!(
            "message ids: {} from {} to {to} was begun under the previous daemon and never \
             confirmed, and {}'s records do not hold it: sent again",
            key.id,
            key.from,
            job.prepared.endpoint.runtime
        );
        if let Err(e) = self.ids.free(&to, &key) {
            log::warn!("message ids: cannot record {} to {to}: {e}", key.id);
        }
        None
    }

    /// Answer `job`, whose id was begun earlier for its endpoint, with what is known of that
    /// message; nothing of it is written again.
    pub(crate) fn answer_again(&mut self, job: QueuedSend, fate: Fate) {
        match fate {
            Fate::Accepted => self.send_earlier(job),
            Fate::Begun => {
                let r = begun_earlier(&job.prepared.endpoint, &job.msg_id);
                self.finish_send(job.record(), r);
            }
        }
    }

    /// If the head of `identity`'s queue is a send whose id was begun earlier there, answer
    /// it from the ledger (taking it off the queue); true when it did.
    pub(crate) fn head_answered_earlier(&mut self, identity: &Identity) -> bool {
        let fate = match self.queues.head(identity) {
            Some(Job::Send(j)) => self.earlier_fate(j),
            _ => None,
        };
        let Some(fate) = fate else {
            return false;
        };
        if let Some(Job::Send(job)) = self
            .queues
            .endpoint_mut(identity)
            .and_then(|e| e.queue.pop_front())
        {
            self.answer_again(*job, fate);
        }
        true
    }

    /// The answer to the head send of `identity` that its session never answered for:
    /// `state-unknown` when the ledger says its paste had begun (the session records that
    /// before the first byte), else `otherwise`.
    pub(crate) fn unanswered(&self, identity: &Identity, otherwise: Refusal) -> Refusal {
        match self.queues.head(identity) {
            Some(Job::Send(j)) if self.earlier_fate(j) == Some(Fate::Begun) => unknown_refusal(
                identity,
                &j.msg_id,
                "its session ended without answering for it",
            ),
            _ => otherwise,
        }
    }

    /// Record what is now known of the message `key` sent to `to`.
    pub(crate) fn note_known(&self, to: &Identity, key: &MsgKey, known: Known) {
        let to = to.to_string();
        let written = match known {
            Known::Accepted => self.ids.accepted(&to, key),
            Known::NotWritten => self.ids.free(&to, key),
        };
        if let Err(e) = written {
            log::warn!("message ids: cannot record {} to {to}: {e}", key.id);
        }
    }

    /// Delivery `id` to `identity` may have arrived ([`crate::session::handle::EventKind::
    /// Unconfirmed`]): its sender is told the state is unknown — the one waiting for the
    /// answer, or, for a message already answered `queued`, by a follow-up and a notice.
    pub(crate) fn on_unconfirmed(&mut self, identity: &Identity, id: u64, reason: String) {
        let Some(Job::Send(job)) = self.take_inflight(identity, id) else {
            return self.on_queue_unknown(id, reason);
        };
        let cause = if job.timed_out {
            format!(
                "it did not take all of it within {}: {reason}",
                super::deadline::spoken(job.timeout)
            )
        } else {
            reason
        };
        let r = unknown_refusal(identity, &job.msg_id, &cause);
        self.lifecycle(
            Event::new("delivery-unconfirmed")
                .field("identity", identity)
                .field("msgid", &job.msg_id)
                .field("why", &cause),
        );
        self.remember_delivered(&job, true);
        self.finish_send(job.record(), r);
        self.after_answer(identity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_answer_says_so_first_and_names_the_id_to_retry_with() {
        let bob = Identity::parse("echo-bob").unwrap();
        let r = unknown_refusal(&bob, "m-1", "no confirmation within 4000 ms");
        assert_eq!(r.code, Code::StateUnknown);
        assert!(
            r.error.starts_with("state unknown: it may have arrived — "),
            "{r:?}"
        );
        assert!(r.error.contains("peer \"bob\" (echo)"), "{}", r.error);
        assert!(r.error.contains("no confirmation within 4000 ms"));
        assert!(r.error.contains("Message id m-1: a retry with this id"));
        assert!(!r.error.contains("NOT delivered"), "{}", r.error);
        let again = begun_earlier(&bob, "m-1");
        assert_eq!(again.code, Code::StateUnknown);
        assert!(again
            .error
            .starts_with("state unknown: it may have arrived; not sent again"));
    }
}

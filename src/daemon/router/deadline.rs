//! A send's deadline (spec 03 §1; `IAPEER_SEND_TIMEOUT_MS`, `iapeer send --timeout`): past
//! it the sender is answered with code `timeout`, naming the peer and what the message was
//! waiting for. Work not begun for it is taken back: a message still in the queue is removed;
//! one the session holds is cancelled by the session if none of its bytes were written (see
//! `session::deliver::cancel_span`), so nothing half-written ever reaches a peer's input.

use std::time::Duration;

use super::endpoint::Job;
use super::Router;
use crate::daemon::route::Refusal;
use crate::names::Identity;
use crate::protocol::Code;
use crate::session::handle::SessionCmd;

/// How often the router asks again while the session that holds a timed-out message is
/// still being launched (it has no handle to ask yet).
const RECHECK: Duration = Duration::from_millis(250);

/// A duration as the sender set it: whole seconds as `3 s`, else milliseconds.
pub(crate) use crate::clock::spoken;

/// The refusal of a send to `to` whose `timeout` passed, because of `cause`.
pub(crate) fn timeout_refusal(to: &Identity, timeout: Duration, cause: &str) -> Refusal {
    Refusal {
        code: Code::Timeout,
        error: format!(
            "peer \"{}\" ({}) did not take the message within {}: {cause}",
            to.personality,
            to.runtime,
            spoken(timeout)
        ),
    }
}

/// What a message still in the queue at position `ahead` (0 = the head) waited for.
pub(crate) fn queued_cause(ahead: usize, waking: bool) -> String {
    match (ahead, waking) {
        (0, true) => "it is still starting; message NOT delivered".to_string(),
        (0, false) => "it could not be reached yet; message NOT delivered".to_string(),
        (1, _) => "it is still busy with 1 earlier request (a message, wake or compaction); \
                   message NOT delivered"
            .to_string(),
        (n, _) => format!(
            "it is still busy with {n} earlier requests (messages, wakes or compactions); \
             message NOT delivered"
        ),
    }
}

impl Router {
    /// Send `id` reached its deadline.
    pub(crate) fn send_deadline(&mut self, id: u64) {
        // Still being prepared: answered when the preparation returns (`on_prepared`).
        if let Some(job) = self.queues.preparing.get_mut(&id) {
            job.timed_out = true;
            return;
        }
        let found = self.queues.endpoints.iter().find_map(|(ident, ep)| {
            ep.queue
                .iter()
                .position(|j| matches!(j, Job::Send(s) if s.id == id))
                .map(|pos| (ident.clone(), pos, ep.inflight == Some(id)))
        });
        let Some((ident, pos, inflight)) = found else {
            return; // answered already
        };
        if inflight {
            if let Some(Job::Send(job)) = self
                .queues
                .endpoints
                .get_mut(&ident)
                .and_then(|ep| ep.queue.get_mut(pos))
            {
                job.timed_out = true;
            }
            // The session holds it: it gives it back (answered by `Delivered`) unless part
            // of it is written already, which it then finishes.
            match self.live.sessions.get(&ident) {
                Some(s) => {
                    s.handle.send(SessionCmd::Cancel(id));
                }
                None => self.set_timer(self.now.at + RECHECK, super::Timer::SendDeadline(id)),
            }
            return;
        }
        let waking = self.live.launching.contains_key(&ident)
            || self
                .live
                .sessions
                .get(&ident)
                .is_some_and(|s| !s.is_ready());
        let Some(ep) = self.queues.endpoints.get_mut(&ident) else {
            return;
        };
        let Some(Job::Send(job)) = ep.queue.remove(pos) else {
            return;
        };
        let refusal = timeout_refusal(&ident, job.timeout, &queued_cause(pos, waking));
        self.finish_send(job.record(), refusal);
        self.pump(&ident);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_the_peer_the_time_and_the_cause() {
        let bot = Identity::parse("bot-bot").unwrap();
        let r = timeout_refusal(&bot, Duration::from_secs(3), &queued_cause(2, false));
        assert_eq!(r.code, Code::Timeout);
        assert_eq!(
            r.error,
            "peer \"bot\" (bot) did not take the message within 3 s: it is still busy with 2 \
             earlier requests (messages, wakes or compactions); message NOT delivered"
        );
        assert_eq!(spoken(Duration::from_millis(1500)), "1500 ms");
        assert_eq!(
            queued_cause(0, true),
            "it is still starting; message NOT delivered"
        );
        assert!(queued_cause(1, false).starts_with("it is still busy with 1 earlier request "));
    }
}

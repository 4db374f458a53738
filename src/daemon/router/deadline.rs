//! A send's deadline (spec 03 §1; `IAPEER_SEND_TIMEOUT_MS`, `iapeer send --timeout`): past
//! it the sender is answered with code `timeout`, naming the peer and what the message was
//! waiting for. Work not begun for it is taken back: a message still in the queue is removed;
//! one the session holds is cancelled by the session if none of its bytes were written (see
//! `session::deliver::cancel_span`), so nothing half-written ever reaches a peer's input.

use std::time::Duration;

use super::endpoint::Job;
use super::Router;
use crate::daemon::fair_pool::Waited;
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

/// The refusal of a send to `to` (its requested `runtime`, if any) whose `timeout` passed
/// before its preparation had resolved the endpoint.
pub(crate) fn unprepared_timeout_refusal(
    to: &str,
    runtime: Option<&str>,
    timeout: Duration,
    cause: &str,
) -> Refusal {
    let rt = runtime.map(|r| format!(" ({r})")).unwrap_or_default();
    Refusal {
        code: Code::Timeout,
        error: format!(
            "peer \"{to}\"{rt} did not take the message within {}: {cause}",
            spoken(timeout)
        ),
    }
}

/// What a send to `to` whose deadline came during its preparation waited for: a worker
/// (`waited`, and why: see [`Waited`]), or its own preparation, which reads `attachments`
/// files; one without attachments reads the registry and `to`'s folder (its pool's lines are
/// the targets, `fair_pool::PLAIN_PREP_LIMITS`).
pub(crate) fn prep_cause(waited: Option<Waited>, attachments: usize, to: &str) -> String {
    match (waited, attachments) {
        (Some(Waited::OwnJobs), 0) => format!(
            "it waited for a preparation worker behind earlier sends to peer \"{to}\", whose \
             preparation (reading its folder) did not finish — a file system that does not \
             answer? (iapeer status shows them and what to do); message NOT delivered"
        ),
        (Some(Waited::OwnJobs), _) => "it waited for a preparation worker behind this \
                                        sender's earlier sends, which are still being prepared \
                                        (iapeer status shows them); message NOT delivered"
            .to_string(),
        (Some(Waited::Full), 0) => "it waited for a preparation worker, but every thread \
                                     that prepares sends without attachments is stuck reading \
                                     other peers' folders that do not answer (iapeer status \
                                     names them and what to do); message NOT delivered"
            .to_string(),
        (Some(Waited::Full), _) => "it waited for a preparation worker, but every thread \
                                     that reads attachments is stuck in other senders' reads \
                                     that do not return (iapeer status names them and what to \
                                     do); message NOT delivered"
            .to_string(),
        (Some(Waited::Busy), _) => "it waited for a preparation worker, and all were busy \
                                     preparing other sends (is the host overloaded?); message \
                                     NOT delivered"
            .to_string(),
        (None, 0) => format!(
            "its preparation (reading the registry and the folder of peer \"{to}\") did not \
             finish — a file system that does not answer? (iapeer status shows stalled \
             preparations); message NOT delivered"
        ),
        (None, _) => "its preparation (reading its attachments) did not finish — a file \
                       system that does not answer? (iapeer status shows stalled \
                       preparations); message NOT delivered"
            .to_string(),
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
        if let Some(job) = self.queues.preparing_mut(id) {
            // Still waiting for a worker: taken back. Running: given up on, unless it is
            // keeping a held message (then answered when it returns, `on_prepared`).
            let pool = match job.input.args.attachments.is_empty() {
                true => &self.prep_plain,
                false => &self.prep,
            };
            let waited = pool.cancel(id);
            if waited.is_none() && !job.prepared.give_up() {
                job.timed_out = true;
                return;
            }
            if let Some(job) = self.queues.take_preparing(id) {
                let cause =
                    prep_cause(waited, job.input.args.attachments.len(), &job.input.args.to);
                let refusal = unprepared_timeout_refusal(
                    &job.input.args.to,
                    job.input.args.runtime.as_deref(),
                    job.timeout,
                    &cause,
                );
                self.finish_send(job.unprepared(), refusal);
            }
            return;
        }
        let found = self.queues.endpoints().find_map(|(ident, ep)| {
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
                .endpoint_mut(&ident)
                .and_then(|ep| ep.queue.get_mut(pos))
            {
                job.timed_out = true;
            }
            // The session holds it: it gives it back (answered by `Delivered`) unless part
            // of it is written already, which it then finishes.
            match self.live.get(&ident) {
                Some(s) => {
                    s.handle.send(SessionCmd::Cancel(id));
                }
                None => self.set_timer(self.now.at + RECHECK, super::Timer::SendDeadline(id)),
            }
            return;
        }
        let waking =
            self.live.is_launching(&ident) || self.live.get(&ident).is_some_and(|s| !s.is_ready());
        let Some(ep) = self.queues.endpoint_mut(&ident) else {
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

    #[test]
    fn a_send_timed_out_in_preparation_says_what_it_waited_for() {
        let r = unprepared_timeout_refusal(
            "bob",
            None,
            Duration::from_secs(5),
            &prep_cause(None, 1, "bob"),
        );
        assert_eq!(r.code, Code::Timeout);
        assert_eq!(
            r.error,
            "peer \"bob\" did not take the message within 5 s: its preparation (reading its \
             attachments) did not finish — a file system that does not answer? (iapeer status \
             shows stalled preparations); message NOT delivered"
        );
        let r = unprepared_timeout_refusal(
            "bob",
            Some("echo"),
            Duration::from_millis(1500),
            &prep_cause(Some(Waited::OwnJobs), 1, "bob"),
        );
        assert!(
            r.error.starts_with(
                "peer \"bob\" (echo) did not take the message within 1500 ms: it waited for a \
                 preparation worker"
            ),
            "{}",
            r.error
        );
        // A send without attachments names the peer whose folder it reads, not attachments.
        for waited in [None, Some(Waited::OwnJobs), Some(Waited::Full)] {
            let cause = prep_cause(waited, 0, "bob");
            assert!(!cause.contains("reading its attachments"), "{cause}");
            assert!(!cause.contains("other senders"), "{cause}");
            assert!(cause.contains("folder"), "{cause}");
        }
        assert!(prep_cause(None, 0, "bob").starts_with(
            "its preparation (reading the registry and the folder of peer \"bob\") did not \
             finish — a file system that does not answer?"
        ));
        assert!(prep_cause(Some(Waited::OwnJobs), 0, "bob")
            .contains("behind earlier sends to peer \"bob\""));
    }
}

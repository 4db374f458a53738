//! The revive grace of router peers (spec 05 §8): a message to an always-on peer that is
//! restarting waits for it up to `IAPEER_REVIVE_GRACE`, then fails "offline — retry".

use std::time::Instant;

use super::decide::{revive_deadline, revive_gives_up};
use super::endpoint::{Job, QueuedSend};
use super::{Router, Timer};
use crate::daemon::route::Refusal;
use crate::names::Identity;
use crate::protocol::Code;

impl Router {
    pub(crate) fn revive_expired(&mut self, identity: &Identity, job: u64) {
        let head_matches = matches!(self.queues.head(identity), Some(Job::Send(j)) if j.id == job);
        // No session, or one that can no longer take input (see `on_delivered`).
        let usable = self.live.get(identity).is_some_and(|s| s.is_ready());
        if revive_gives_up(head_matches, usable) {
            let (p, rt) = (&identity.personality, &identity.runtime);
            let ms = self.cfg.revive_grace.as_millis();
            // Coming back: a session booting, or a restart due. Else nothing will bring it
            // (created with --no-bootstrap, or its restarts were given up): "retry" would not
            // help, starting it does.
            let coming = self.live.is_live(identity)
                || self
                    .timers
                    .any(|t| matches!(t, Timer::Restart(id) if id == identity));
            let error = if coming {
                format!(
                    "peer \"{p}\" ({rt}) is offline and did not come back within {ms}ms — retry"
                )
            } else {
                format!("peer \"{p}\" ({rt}) is not running and nothing is starting it — start it: iapeer start {p}")
            };
            self.fail_head(
                identity,
                Refusal {
                    code: Code::Offline,
                    error,
                },
            );
            self.pump(identity);
        }
    }

    /// A message the router session could not take (its process died or closed its stdin
    /// before the bytes were written): nothing reached the peer, so the message goes back to
    /// the head of the queue and waits for the always-on restart for up to the revive grace
    /// (spec 03 §1 step 9), like a message that arrives while the peer is restarting. The
    /// session is marked not ready so nothing more is handed to it.
    pub(crate) fn hold_for_revive(&mut self, identity: &Identity, job: QueuedSend) {
        if let Some(s) = self.live.get_mut(identity) {
            s.state.input_lost();
        }
        self.ensure_revive_timer(identity, job.id, job.started);
        self.queues
            .endpoint_or_new(identity)
            .queue
            .push_front(Job::Send(Box::new(job)));
        self.pump(identity);
    }

    /// Give send `job` (started at `started`) to a restarting router peer until
    /// `started + revive grace`; one timer per job.
    pub(crate) fn ensure_revive_timer(&mut self, identity: &Identity, job: u64, started: Instant) {
        let exists = self
            .timers
            .any(|t| matches!(t, Timer::Revive { job: j, .. } if *j == job));
        if !exists {
            let at = revive_deadline(started, self.cfg.revive_grace);
            self.set_timer(
                at,
                Timer::Revive {
                    identity: identity.clone(),
                    job,
                },
            );
        }
    }
}

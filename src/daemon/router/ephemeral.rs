//! Ephemeral workers (spec 05 §6, spec 03 §1 step 8): a message to a peer whose profile says
//! `wake_policy: "ephemeral"` is appended to its durable task queue and answered `queued` at
//! once; the queue is drained one task at a time, each task the first message of a fresh
//! session; a task file is removed only once its wake delivered it. The worker arms its
//! wind-down by sending (its reply) or by `self-done`; the tick ends it when armed and quiet,
//! or when it idles unarmed too long ([`super::decide::ephemeral_wind_down`]).

use std::time::Duration;

use super::endpoint::{Job, QueuedSend, SendJob};
use super::{logged, Router};
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::{Caller, Prepared, Refusal, SendArgs, SendInput};
use crate::envelope;
use crate::eventlog::Event;
use crate::markers::queue::{HeadTask, Task};
use crate::markers::Flag;
use crate::names::Identity;
use crate::protocol::{Code, QueuedBy};
use crate::registry::Registry;
use crate::runtime::RuntimeKind;

/// After a drained task failed to be delivered, the next attempt waits this long (the task
/// stays at the head of the queue).
pub(crate) const DRAIN_RETRY: Duration = Duration::from_secs(60);

impl Router {
    /// Spec 03 §1 step 8: put an ephemeral target's message in its durable queue and answer
    /// `queued` (`queuedBy: "ephemeral"`, `queueDepth`); then start it if nothing runs.
    pub(crate) fn enqueue_task(&mut self, job: QueuedSend) {
        let p = &job.prepared;
        let endpoint = p.endpoint.clone();
        let task = Task {
            task: envelope::encode_wire(&p.envelope),
            topic: p.envelope.topic.clone(),
        };
        match self.markers(&endpoint).task_queue().append(&task) {
            Ok(depth) => {
                self.send_queued(job, QueuedBy::Ephemeral, Some(depth));
                self.drain(&endpoint);
            }
            Err(e) => {
                let r = Refusal {
                    code: Code::Internal,
                    error: format!(
                        "cannot queue the task for ephemeral peer \"{}\" ({}): {e}; message NOT \
                         delivered",
                        endpoint.personality, endpoint.runtime
                    ),
                };
                self.finish_send(job.record(), r);
            }
        }
    }

    /// A send from `caller`: when it is an ephemeral worker's session (spawned, or still
    /// being launched), this is its reply, which arms its wind-down (spec 05 §6).
    pub(crate) fn note_worker_send(&mut self, caller: &Identity) {
        if self.live.is_ephemeral(caller) {
            logged(self.markers(caller).set(Flag::EphemeralArmed));
        }
    }

    /// Start the next task of `identity` when nothing runs or waits for it: no session (live
    /// or launching), no queued job, not stopped, not shutting down, no failed attempt in the
    /// last [`DRAIN_RETRY`]. A head that is not a valid task is moved aside.
    pub(crate) fn drain(&mut self, identity: &Identity) {
        if self.shutdown.is_some()
            || self.live.has(identity)
            || self.queues.has_endpoint(identity)
            || self.supervisor.drain_waits(identity, self.now.at)
        {
            return;
        }
        let markers = self.markers(identity);
        if markers.is_set(Flag::Stopped) {
            return;
        }
        let queue = markers.task_queue();
        let job = loop {
            let Some(head) = queue.head() else {
                return;
            };
            match self.drained_job(identity, &head) {
                Ok(job) => break job,
                Err(DrainError::Later(why)) => {
                    log::warn!("ephemeral {identity}: cannot start the next task now: {why}");
                    self.supervisor
                        .retry_drain_at(identity, self.now.at + DRAIN_RETRY);
                    return;
                }
                Err(DrainError::Bad(why)) => {
                    let bad = head.path.with_extension("bad");
                    log::warn!(
                        "ephemeral {identity}: {} is not a deliverable task ({why}); moved aside",
                        head.path.display()
                    );
                    if let Err(e) = std::fs::rename(&head.path, &bad) {
                        log::warn!("cannot move {} aside: {e}", head.path.display());
                        return;
                    }
                }
            }
        };
        self.supervisor.drain_started(identity);
        self.lifecycle(
            Event::new("ephemeral")
                .field("action", "drain")
                .field("identity", identity)
                .field("depth", queue.depth().to_string()),
        );
        self.queues
            .endpoint_or_new(identity)
            .queue
            .push_back(Job::Send(Box::new(job)));
        self.pump(identity);
    }

    /// Drain every ephemeral identity that has tasks (the tick, spec 05 §4 "drain ephemeral
    /// queues").
    pub(crate) fn drain_all(&mut self) {
        let with_queue = crate::markers::identities_with(&self.paths, crate::markers::QUEUE);
        for identity in with_queue {
            self.drain(&identity);
        }
    }

    /// The end of a drained task's delivery: delivered → its file goes; failed → it stays at
    /// the head and the next attempt waits [`DRAIN_RETRY`].
    pub(crate) fn drained_done<P>(&mut self, job: &SendJob<P>, endpoint: &Identity, ok: bool) {
        let Some(path) = &job.drained else {
            return;
        };
        if ok {
            if let Err(e) = self.markers(endpoint).task_queue().remove(path) {
                log::warn!("cannot remove the delivered task {}: {e}", path.display());
            }
        } else {
            self.supervisor
                .retry_drain_at(endpoint, self.now.at + DRAIN_RETRY);
        }
        self.lifecycle(
            Event::new("ephemeral")
                .field("action", if ok { "task-delivered" } else { "task-failed" })
                .field("identity", endpoint)
                .field(
                    "task",
                    path.file_name().unwrap_or_default().to_string_lossy(),
                ),
        );
    }

    /// The queued send that carries `head` to `identity`'s next fresh session.
    fn drained_job(
        &mut self,
        identity: &Identity,
        head: &HeadTask,
    ) -> Result<QueuedSend, DrainError> {
        let env = envelope::decode(&head.task.task)
            .map_err(|e| DrainError::Bad(format!("its envelope does not decode: {e}")))?;
        let caller = Identity::new(&env.runtime, &env.from)
            .map_err(|e| DrainError::Bad(format!("its sender is not an identity: {e}")))?;
        let registry = Registry::load(&self.paths)
            .map_err(|e| DrainError::Later(format!("cannot read the registry: {e}")))?;
        let target = registry
            .find(&identity.personality)
            .cloned()
            .ok_or_else(|| DrainError::Bad("its peer is no longer registered".into()))?;
        let input = SendInput {
            path: "daemon",
            caller: Caller::Cli(caller.to_string()),
            args: SendArgs {
                to: identity.personality.clone(),
                runtime: Some(identity.runtime.clone()),
                message: env.body.clone(),
                topic: head.task.topic.clone().or_else(|| env.topic.clone()),
                attachments: env.attachments.clone(),
                ..SendArgs::default()
            },
        };
        let mut envelope = env;
        envelope.topic = input.args.topic.clone();
        Ok(SendJob {
            id: self.next_id(),
            input,
            prepared: Prepared {
                caller,
                target,
                endpoint: identity.clone(),
                envelope,
                ephemeral: true,
                kind: Ok(RuntimeKind::Agent),
            },
            reply: ReplyTo::discard().into(),
            started: self.now.at,
            woke: false,
            kind: RuntimeKind::Agent,
            drained: Some(head.path.clone()),
            hold: None,
            // Nobody waits for a drained task: no deadline timer; its wake's boot deadline
            // and ready gate bound it.
            timeout: self.cfg.send_timeout,
            timed_out: false,
            msg_id: crate::msgids::new_id(),
            interrupted: false,
            taken_ms: None,
        })
    }
}

/// Why the head task cannot start now.
enum DrainError {
    /// Something outside the task is wrong (e.g. the registry cannot be read): try later.
    Later(String),
    /// The task itself can never be delivered: move it aside.
    Bad(String),
}

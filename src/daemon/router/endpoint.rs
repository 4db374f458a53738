//! Per-identity delivery queues (spec 03 §1 steps 8–10, spec 05 §2): deliveries to one
//! identity are serialized; a message to an asleep agent wakes it and rides the wake as its
//! first message; later ones wait and go live.

use std::collections::VecDeque;
use std::time::Instant;

use super::{Router, RouterMsg, Timer};
use crate::daemon::lifecycle::ModeRequest;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::{self, Caller, Prepared, Refusal, SendInput};
use crate::envelope;
use crate::eventlog::Event;
use crate::markers::{Flag, Markers};
use crate::names::Identity;
use crate::protocol::{
    Code, CompactOutcome, CompactReply, DeliveredTo, Reply, SendReply, SendResult, WakeReply,
};
use crate::runtime::RuntimeKind;
use crate::session::handle::{Delivery, SessionCmd};

/// A send in flight, from arrival to its delivery.log line.
pub struct SendJob {
    pub(crate) id: u64,
    pub(crate) input: SendInput,
    pub(crate) prepared: Option<Prepared>,
    pub(crate) reply: ReplyTo,
    pub(crate) started: Instant,
    /// Set when this message rides a wake as its first message.
    pub(crate) woke: bool,
    /// The runtime kind of the endpoint (decided when queued).
    pub(crate) kind: RuntimeKind,
}

/// A wake with no message (`attach`, `iapeer <runtime>`, `wake`).
pub struct WakeJob {
    pub(crate) reply: ReplyTo,
    pub(crate) mode: ModeRequest,
    /// Hand the connection to the session once ready.
    pub(crate) attach: bool,
    /// For fresh wakes: the old session was told to end or the new one was launched, so
    /// the next ready session is the one this job asked for.
    pub(crate) launched: bool,
    pub(crate) started: Instant,
}

/// A compaction request (`compact`).
pub struct CompactJob {
    pub(crate) id: u64,
    pub(crate) reply: ReplyTo,
}

/// Queued work for one identity.
pub enum Job {
    /// A message.
    Send(Box<SendJob>),
    /// A wake without a message.
    Wake(WakeJob),
    /// Compact the conversation (after any delivery ahead of it).
    Compact(CompactJob),
}

impl Job {
    /// Fail the job with `code` and `error` (the send's delivery.log line is written by
    /// [`Router::finish_send`]; this is for paths that bypass it, like shutdown).
    pub(crate) fn fail(self, code: Code, error: String) {
        match self {
            Job::Send(j) => j.reply.finish(Reply::failure(code, &error)),
            Job::Wake(w) => w.reply.finish(Reply::failure(code, &error)),
            Job::Compact(c) => c.reply.finish(Reply::failure(code, &error)),
        }
    }
}

/// Queue state of one identity.
#[derive(Default)]
pub struct Endpoint {
    pub(crate) queue: VecDeque<Job>,
    /// The delivery id handed to the session and not yet answered (the queue head).
    pub(crate) inflight: Option<u64>,
}

fn caller_label(input: &SendInput) -> String {
    match &input.caller {
        Caller::Cli(from) => from.clone(),
        Caller::Mcp { header, .. } => header.clone().unwrap_or_else(|| "-".into()),
    }
}

impl Router {
    /// Start a send: its preparation (registry, validation, attachment copies) runs on a
    /// worker thread and comes back as [`RouterMsg::Prepared`].
    pub(crate) fn begin_send(&mut self, input: SendInput, reply: ReplyTo) {
        crate::daemon::test_hooks::on_router_send(&input.to);
        let id = self.next_id();
        let paths = self.paths.clone();
        let tx = self.tx.clone();
        let input_for_job = input.clone();
        self.preparing.insert(
            id,
            SendJob {
                id,
                input,
                prepared: None,
                reply,
                started: Instant::now(),
                woke: false,
                kind: RuntimeKind::Agent,
            },
        );
        let spawned = std::thread::Builder::new()
            .name("send-prep".into())
            .spawn(move || {
                let ts = crate::clock::envelope_ts(&crate::clock::now_local());
                // A panic here must still answer the sender (the panic hook logs it).
                let result =
                    crate::daemon::guard::catch(|| route::prepare(&paths, &input_for_job, ts))
                        .unwrap_or_else(|panic| Err(route::prep_panicked(&panic)));
                let _ = tx.send(RouterMsg::Prepared {
                    job: id,
                    result: Box::new(result),
                });
            });
        if let Err(e) = spawned {
            if let Some(job) = self.preparing.remove(&id) {
                self.finish_send(
                    job,
                    Err(Refusal {
                        code: Code::Internal,
                        error: format!("cannot start a worker thread: {e}"),
                    }),
                );
            }
        }
    }

    pub(crate) fn on_prepared(&mut self, id: u64, result: Result<Prepared, Refusal>) {
        let Some(mut job) = self.preparing.remove(&id) else {
            return;
        };
        let prepared = match result {
            Ok(p) => p,
            Err(r) => return self.finish_send(job, Err(r)),
        };
        let endpoint = prepared.endpoint.to_string();
        job.kind = match self.adapter(&prepared.endpoint.runtime) {
            Ok(a) => a.kind(),
            Err(e) => {
                let r = Refusal {
                    code: Code::Offline,
                    error: format!(
                        "peer \"{}\" ({}) cannot be reached: {e}",
                        prepared.endpoint.personality, prepared.endpoint.runtime
                    ),
                };
                job.prepared = Some(prepared);
                return self.finish_send(job, Err(r));
            }
        };
        job.prepared = Some(prepared);
        self.endpoints
            .entry(endpoint.clone())
            .or_default()
            .queue
            .push_back(Job::Send(Box::new(job)));
        self.pump(&endpoint);
    }

    /// Move the head of `identity`'s queue forward as far as it can go now.
    pub(crate) fn pump(&mut self, identity: &str) {
        loop {
            let Some(ep) = self.endpoints.get(identity) else {
                return;
            };
            if ep.inflight.is_some() {
                return;
            }
            let Some(head) = ep.queue.front() else {
                self.endpoints.remove(identity);
                return;
            };
            let live = self.sessions.get(identity);
            match head {
                Job::Send(job) => {
                    match live {
                        Some(s) if s.ready && s.stopping.is_none() => {
                            let delivery = self.live_delivery(job);
                            let id = job.id;
                            s.handle.send(SessionCmd::Deliver(delivery));
                            if let Some(ep) = self.endpoints.get_mut(identity) {
                                ep.inflight = Some(id);
                            }
                            return;
                        }
                        // Booting, or ending: wait for Ready or Exited.
                        Some(_) => return,
                        None if job.kind == RuntimeKind::Router => {
                            // Stopped while the message waited: refuse it now rather than
                            // at the end of the revive grace.
                            let stopped = Identity::parse(identity)
                                .ok()
                                .filter(|e| Markers::new(&self.paths, e).is_set(Flag::Stopped));
                            if let Some(e) = stopped {
                                self.fail_head(identity, route::stopped_refusal(&e));
                                continue;
                            }
                            let (id, started) = (job.id, job.started);
                            self.ensure_revive_timer(identity, id, started);
                            return;
                        }
                        None => {
                            // Asleep: wake with this message as the first one.
                            if let Err(refusal) = self.launch_for_head(identity, ModeRequest::Auto)
                            {
                                self.fail_head(identity, refusal);
                                continue;
                            }
                            return;
                        }
                    }
                }
                Job::Compact(c) => match live {
                    Some(s) if s.ready && s.stopping.is_none() => {
                        let id = c.id;
                        s.handle.send(SessionCmd::Compact(id));
                        if let Some(ep) = self.endpoints.get_mut(identity) {
                            ep.inflight = Some(id);
                        }
                        return;
                    }
                    Some(_) => return,
                    None if self
                        .markers(identity)
                        .is_some_and(|m| m.is_set(crate::markers::Flag::Stopped)) =>
                    {
                        let ident = Identity::parse(identity).expect("queue keys are identities");
                        self.fail_head(identity, crate::daemon::route::stopped_refusal(&ident));
                        continue;
                    }
                    None => {
                        let resumable = self
                            .markers(identity)
                            .is_some_and(|m| m.is_set(crate::markers::Flag::IdleReaped));
                        if !resumable {
                            // Never started, crashed or ended on purpose: no conversation to compact.
                            if let Some(Job::Compact(c)) = self
                                .endpoints
                                .get_mut(identity)
                                .and_then(|e| e.queue.pop_front())
                            {
                                c.reply.finish(CompactReply {
                                    identity: identity.to_string(),
                                    outcome: CompactOutcome::NothingToCompact,
                                    resumed: false,
                                });
                            }
                            continue;
                        }
                        if let Err(refusal) = self.launch_for_head(identity, ModeRequest::Resume) {
                            self.fail_head(identity, refusal);
                            continue;
                        }
                        return;
                    }
                },
                Job::Wake(w) => match live {
                    Some(s)
                        if s.ready
                            && s.stopping.is_none()
                            && (w.mode != ModeRequest::Fresh || w.launched) =>
                    {
                        let handle = s.handle.clone();
                        let body = WakeReply {
                            identity: identity.to_string(),
                            woke: false,
                            pid: s.pid,
                        };
                        if let Some(Job::Wake(w)) = self
                            .endpoints
                            .get_mut(identity)
                            .and_then(|e| e.queue.pop_front())
                        {
                            if w.attach {
                                w.reply.attach(body, handle)
                            } else {
                                w.reply.finish(body)
                            }
                        }
                        continue;
                    }
                    Some(s)
                        if w.mode == ModeRequest::Fresh && !w.launched && s.stopping.is_none() =>
                    {
                        s.handle
                            .send(SessionCmd::Kill(crate::session::handle::Cause::Replaced));
                        if let Some(Job::Wake(w)) = self
                            .endpoints
                            .get_mut(identity)
                            .and_then(|e| e.queue.front_mut())
                        {
                            w.launched = true;
                        }
                        if let Some(s) = self.sessions.get_mut(identity) {
                            s.stopping = Some(crate::session::handle::Cause::Replaced);
                        }
                        return;
                    }
                    Some(_) => return,
                    None => {
                        let mode = w.mode;
                        if let Err(refusal) = self.launch_for_head(identity, mode) {
                            self.fail_head(identity, refusal);
                            continue;
                        }
                        return;
                    }
                },
            }
        }
    }

    /// The delivery of `job` into a live session.
    fn live_delivery(&self, job: &SendJob) -> Delivery {
        let p = job.prepared.as_ref().expect("queued sends are prepared");
        delivery_for(job.id, p, job.kind, None, &self.cfg, None)
    }

    /// Fail the queue head with a refusal, writing its log line.
    pub(crate) fn fail_head(&mut self, identity: &str, refusal: Refusal) {
        let Some(ep) = self.endpoints.get_mut(identity) else {
            return;
        };
        ep.inflight = None;
        match ep.queue.pop_front() {
            Some(Job::Send(job)) => self.finish_send(*job, Err(refusal)),
            Some(Job::Wake(w)) => w.reply.finish(refusal),
            Some(Job::Compact(c)) => c.reply.finish(refusal),
            None => {}
        }
    }

    pub(crate) fn revive_expired(&mut self, identity: &str, job: u64) {
        let head_matches = matches!(self.endpoints.get(identity).and_then(|e| e.queue.front()), Some(Job::Send(j)) if j.id == job);
        // No session, or one that can no longer take input (see `on_delivered`).
        let usable = self.sessions.get(identity).is_some_and(|s| s.ready);
        if head_matches && !usable {
            let id = Identity::parse(identity).ok();
            let (p, rt) = id.map(|i| (i.personality, i.runtime)).unwrap_or_default();
            let ms = self.cfg.revive_grace.as_millis();
            self.fail_head(identity, Refusal { code: Code::Offline, error: format!("peer \"{p}\" ({rt}) is offline and did not come back within {ms}ms — retry") });
            self.pump(identity);
        }
    }

    /// Write the delivery.log line and answer the sender.
    pub(crate) fn finish_send(&mut self, job: SendJob, outcome: Result<(), Refusal>) {
        let ms = job.started.elapsed().as_millis();
        let input = &job.input;
        let mut ev = Event::new("delivery")
            .field("path", input.path)
            .field("caller", caller_label(input))
            .field("to", &input.to)
            .opt("rt", input.runtime.as_deref())
            .field("ok", if outcome.is_ok() { "true" } else { "false" });
        if let Some(p) = &job.prepared {
            ev = ev
                .field("via", p.endpoint.to_string())
                .field("woke", if job.woke { "true" } else { "false" });
        }
        ev = ev
            .field("ms", ms.to_string())
            .field("len", input.message.chars().count().to_string());
        if !input.attachments.is_empty() {
            ev = ev.field("att", input.attachments.len().to_string());
        }
        let topic = input
            .topic
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty());
        ev = ev.opt("topic", topic);
        match outcome {
            Ok(()) => {
                self.delivery_log.append(&ev);
                let p = job.prepared.as_ref().expect("delivered sends are prepared");
                let result = SendResult {
                    ok: true,
                    delivered_to: DeliveredTo {
                        personality: p.endpoint.personality.clone(),
                        runtime: p.endpoint.runtime.clone(),
                    },
                    woke: job.woke,
                    ts: p.envelope.ts.clone(),
                };
                job.reply.finish(SendReply { result });
            }
            Err(r) => {
                self.delivery_log.append(&ev.field("err", &r.error));
                job.reply.finish(r);
            }
        }
    }
}

impl Router {
    /// A message the router session could not take (its process died or closed its stdin
    /// before the bytes were written): nothing reached the peer, so the message goes back to
    /// the head of the queue and waits for the always-on restart for up to the revive grace
    /// (spec 03 §1 step 9), like a message that arrives while the peer is restarting. The
    /// session is marked not ready so nothing more is handed to it.
    pub(crate) fn hold_for_revive(&mut self, identity: &str, job: SendJob) {
        if let Some(s) = self.sessions.get_mut(identity) {
            s.ready = false;
        }
        self.ensure_revive_timer(identity, job.id, job.started);
        self.endpoints
            .entry(identity.to_string())
            .or_default()
            .queue
            .push_front(Job::Send(Box::new(job)));
        self.pump(identity);
    }

    /// Give send `job` (started at `started`) to a restarting router peer until
    /// `started + revive grace`; one timer per job.
    fn ensure_revive_timer(&mut self, identity: &str, job: u64, started: Instant) {
        let exists = self
            .timers
            .values()
            .any(|t| matches!(t, Timer::Revive { job: j, .. } if *j == job));
        if !exists {
            let at = started + self.cfg.revive_grace;
            self.set_timer(
                at,
                Timer::Revive {
                    identity: identity.to_string(),
                    job,
                },
            );
        }
    }
}

/// Build the delivery of a prepared send: the agent form for agent runtimes (prefixed with
/// `initial_prompt` and a blank line for the first message of a fresh session), the wire
/// form for router runtimes.
pub(crate) fn delivery_for(
    id: u64,
    p: &Prepared,
    kind: RuntimeKind,
    initial_prompt: Option<&str>,
    cfg: &crate::config::Config,
    ready_gate: Option<std::time::Duration>,
) -> Delivery {
    let grace = if p.envelope.attachments.is_empty() {
        cfg.liveness_grace
    } else {
        cfg.liveness_grace.max(std::time::Duration::from_secs(60))
    };
    match kind {
        RuntimeKind::Router => Delivery {
            id,
            text: envelope::encode_wire(&p.envelope),
            agent_ts: None,
            grace,
            ready_gate: None,
        },
        RuntimeKind::Agent => {
            let now = crate::clock::now_local();
            let rendered = envelope::render_agent(&p.envelope, &now);
            let agent_ts = p
                .envelope
                .ts
                .as_deref()
                .map(|ts| crate::clock::render_agent_ts(ts, &now));
            let text = match initial_prompt.map(str::trim_end).filter(|s| !s.is_empty()) {
                Some(seed) => format!("{seed}\n\n{rendered}"),
                None => rendered,
            };
            Delivery {
                id,
                text,
                agent_ts,
                grace,
                ready_gate,
            }
        }
    }
}

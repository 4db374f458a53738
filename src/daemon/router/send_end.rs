//! The end of a send (spec 03 §1 step 10, spec 02 §3): its `delivery.log` line and the
//! sender's answer — typed success built from the prepared message, or the refusal.

use super::endpoint::{QueuedSend, SendJob, SendRecord};
use super::now::Now;
use super::Router;
use crate::daemon::route::{Caller, Refusal, SendInput};
use crate::eventlog::Event;
use crate::names::Identity;
use crate::protocol::{DeliveredTo, Queued, QueuedBy, SendReply, SendResult};

fn caller_label(input: &SendInput) -> String {
    match &input.caller {
        Caller::Cli(from) => from.clone(),
        Caller::Mcp { header, .. } => header.clone().unwrap_or_else(|| "-".into()),
        Caller::Daemon => "iapeer".into(),
        Caller::Remote { identity, .. } => identity.clone(),
    }
}

impl Router {
    /// A send delivered: its delivery.log line and the sender's typed answer, built from
    /// the prepared message the queued send holds. `queued` names the queue that took it
    /// when it did not go to the model at once (the runtime's own queue behind a running
    /// turn, or the composer hold), with its depth when known: answered `queued`.
    pub(crate) fn send_delivered(
        &mut self,
        job: QueuedSend,
        queued: Option<(QueuedBy, Option<u64>)>,
    ) {
        match queued {
            Some((by, depth)) => self.send_queued(job, by, depth),
            None => {
                self.drained_done(&job, &job.prepared.endpoint, true);
                self.send_accepted(job, None, false);
            }
        }
    }

    /// A send whose id was delivered (or queued) earlier to the same endpoint: answered
    /// `ok` with `earlier`, nothing written (its delivery.log line says `again=true`).
    pub(crate) fn send_earlier(&mut self, job: QueuedSend) {
        self.send_accepted(job, None, true);
    }

    /// A send accepted into a queue (`by`, holding `depth` messages) rather than delivered:
    /// its delivery.log line (`queued=true qkind=… qd=…`) and the sender's `queued` answer.
    pub(crate) fn send_queued(&mut self, job: QueuedSend, by: QueuedBy, depth: Option<u64>) {
        let waiting_for =
            (by == QueuedBy::Approval).then(|| self.awaited_approval(&job.prepared.endpoint));
        let queued = Queued {
            queued: true,
            queued_by: by,
            queue_depth: depth,
            waiting_for,
        };
        self.send_accepted(job, Some(queued), false);
    }

    /// The delivery.log line and the typed answer of a send delivered (`queued` none) or
    /// queued — or, with `earlier`, of one whose id was accepted before (nothing written now).
    fn send_accepted(&mut self, job: QueuedSend, queued: Option<Queued>, earlier: bool) {
        self.hold_done(&job, true);
        if !earlier {
            self.note_origin(&job.prepared, false);
            self.note_known(
                &job.prepared.endpoint,
                &job.key(),
                super::ids::Known::Accepted,
            );
        }
        let p = &job.prepared;
        // Recorded at the moment the runtime took it when the session knows it (issue 31
        // item 2), else now.
        let at = taken_at(&job, self.now);
        let mut ev = delivery_event(&job, Some(&p.endpoint), queued.as_ref(), None, at);
        if earlier {
            ev = ev.field("again", "true");
        }
        match job.taken_ms {
            Some(_) => self.delivery_log.append_at(&ev, at.ms),
            None => self.delivery_log.append(&ev),
        }
        let result = SendResult {
            ok: true,
            delivered_to: DeliveredTo {
                personality: p.endpoint.personality.clone(),
                runtime: p.endpoint.runtime.clone(),
            },
            woke: job.woke && !earlier,
            ts: p.envelope.ts.clone(),
            queued,
            id: Some(job.msg_id.clone()),
            earlier,
            interrupted: job.interrupted && !earlier,
        };
        job.reply.finish(Ok(SendReply { result }));
    }

    /// A send refused (during preparation, in the queue or at delivery): its delivery.log
    /// line and the refusal to the sender.
    pub(crate) fn finish_send(&mut self, job: SendRecord, r: Refusal) {
        let via = job.prepared.as_ref().map(|p| &p.endpoint);
        let ev = delivery_event(&job, via, None, Some(&r), self.now);
        self.delivery_log.append(&ev);
        if let Some(endpoint) = via.cloned() {
            self.drained_done(&job, &endpoint, false);
        }
        self.hold_done(&job, false);
        job.reply.finish(Err(r));
    }
}

/// When `job` was delivered: the moment its runtime took it ([`SendJob::taken_ms`],
/// [`Now::back_to`], never before the send started), else `now` (pure).
fn taken_at<P>(job: &SendJob<P>, now: Now) -> Now {
    job.taken_ms.map_or(now, |ms| now.back_to(ms, job.started))
}

/// The delivery.log line of a send that ends at `now` (spec 03 §1 step 10, §4: one line for
/// every attempt, ok or not): its message id (`msgid`; not `id`, which the fleet event stream's
/// `data` uses for the event number), `via` and `woke` once an endpoint was chosen (`via`),
/// `queued=true qkind=… qd=…` when it went to a queue, `err` when refused (`refusal`), the
/// topic trimmed and only when not empty.
fn delivery_event<P>(
    job: &SendJob<P>,
    via: Option<&Identity>,
    queued: Option<&Queued>,
    refusal: Option<&Refusal>,
    now: Now,
) -> Event {
    let ms = now.since(job.started).as_millis();
    let input = &job.input;
    let mut ev = Event::new("delivery")
        .field("path", input.path)
        .field("caller", caller_label(input))
        .field("to", &input.args.to)
        .opt("rt", input.args.runtime.as_deref())
        .field("msgid", &job.msg_id)
        .field("ok", if refusal.is_none() { "true" } else { "false" });
    if let Some(endpoint) = via {
        ev = ev
            .field("via", endpoint)
            .field("woke", if job.woke { "true" } else { "false" });
    }
    if let Some(q) = queued {
        ev = ev
            .field("queued", "true")
            .field("qkind", q.queued_by.as_str())
            .opt("qd", q.queue_depth.map(|d| d.to_string()).as_deref());
    }
    if input.args.if_busy != crate::protocol::IfBusy::Queue {
        ev = ev.field("ifbusy", input.args.if_busy.as_str());
    }
    if job.interrupted {
        ev = ev.field("interrupted", "true");
    }
    ev = ev
        .field("ms", ms.to_string())
        .field("len", input.args.message.chars().count().to_string());
    if !input.args.attachments.is_empty() {
        ev = ev.field("att", input.args.attachments.len().to_string());
    }
    let topic = input.args.trimmed_topic();
    match refusal {
        Some(r) => ev.opt("topic", topic).field("err", &r.error),
        None => ev.opt("topic", topic),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::daemon::reply::ReplyTo;
    use crate::daemon::route::SendArgs;
    use crate::protocol::Code;
    use crate::runtime::RuntimeKind;

    fn job(topic: Option<&str>, attachments: usize) -> SendJob<()> {
        SendJob {
            id: 1,
            input: SendInput {
                path: "cli",
                caller: Caller::Cli("alice".into()),
                args: SendArgs {
                    to: "bob".into(),
                    message: "héllo".into(),
                    topic: topic.map(String::from),
                    attachments: vec!["/tmp/a".into(); attachments],
                    id: Some("m-1".into()),
                    ..SendArgs::default()
                },
            },
            prepared: (),
            reply: ReplyTo::discard().into(),
            started: Instant::now(),
            timeout: std::time::Duration::from_secs(300),
            timed_out: false,
            msg_id: "m-1".into(),
            interrupted: false,
            taken_ms: None,
            woke: true,
            kind: RuntimeKind::Agent,
            drained: None,
            hold: None,
        }
    }

    /// The fields every delivery line of `job(..)` starts with, in order.
    const JOB_HEAD: [(&str, &str); 5] = [
        ("ev", "delivery"),
        ("path", "cli"),
        ("caller", "alice"),
        ("to", "bob"),
        ("msgid", "m-1"),
    ];

    fn fields(ev: &Event) -> Vec<(&str, &str)> {
        ev.fields()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// Spec 03 §1 step 10: a delivered send's line names the endpoint, the wake, the time
    /// it took on fake time, the length in characters and the trimmed topic.
    #[test]
    fn delivered_send_line() {
        let j = job(Some("  plans "), 2);
        let now = Now {
            at: j.started + Duration::from_millis(1234),
            ms: 0,
        };
        let via = Identity::new("claude", "bob").unwrap();
        let ev = delivery_event(&j, Some(&via), None, None, now);
        assert_eq!(
            fields(&ev),
            [
                &JOB_HEAD[..],
                &[
                    ("ok", "true"),
                    ("via", "claude-bob"),
                    ("woke", "true"),
                    ("ms", "1234"),
                    ("len", "5"),
                    ("att", "2"),
                    ("topic", "plans"),
                ][..],
            ]
            .concat()
        );
    }

    /// Issue 31 item 2: a send the runtime took before its evidence was read is timed to
    /// that moment (`ms=` and the line's stamp), one without it to the router's now.
    #[test]
    fn a_delivery_is_timed_when_the_runtime_took_it() {
        let mut j = job(None, 0);
        let now = Now {
            at: j.started + Duration::from_millis(1234),
            ms: 100_000,
        };
        assert_eq!(taken_at(&j, now), now);
        j.taken_ms = Some(99_900);
        let at = taken_at(&j, now);
        assert_eq!(at.ms, 99_900);
        let ev = delivery_event(&j, None, None, None, at);
        assert!(fields(&ev).contains(&("ms", "1134")), "{:?}", fields(&ev));
    }

    /// Spec 03 §1 step 10 "for every attempt, ok or not": a send refused before an
    /// endpoint was chosen has no `via`/`woke`, an empty topic is left out, `err` is last.
    #[test]
    fn refused_send_line() {
        let j = job(Some("   "), 0);
        let now = Now {
            at: j.started,
            ms: 0,
        };
        let r = Refusal {
            code: Code::NotRegistered,
            error: "peer \"bob\" is not in the iapeer peers index; message NOT delivered".into(),
        };
        let ev = delivery_event(&j, None, None, Some(&r), now);
        assert_eq!(
            fields(&ev),
            [
                &JOB_HEAD[..],
                &[
                    ("ok", "false"),
                    ("ms", "0"),
                    ("len", "5"),
                    ("err", r.error.as_str()),
                ][..],
            ]
            .concat()
        );
    }
}

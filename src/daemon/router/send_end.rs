//! The end of a send (spec 03 §1 step 10, spec 02 §3): its `delivery.log` line and the
//! sender's answer — typed success built from the prepared message, or the refusal.

use super::endpoint::{QueuedSend, SendJob, SendRecord};
use super::Router;
use crate::daemon::route::{Caller, Prepared, Refusal, SendInput};
use crate::eventlog::Event;
use crate::protocol::{DeliveredTo, SendReply, SendResult};

fn caller_label(input: &SendInput) -> String {
    match &input.caller {
        Caller::Cli(from) => from.clone(),
        Caller::Mcp { header, .. } => header.clone().unwrap_or_else(|| "-".into()),
    }
}

impl Router {
    /// A send delivered: its delivery.log line and the sender's typed answer, built from
    /// the prepared message the queued send holds.
    pub(crate) fn send_delivered(&mut self, job: QueuedSend) {
        let ev = self.delivery_event(&job, Some(&job.prepared), None);
        self.delivery_log.append(&ev);
        let p = &job.prepared;
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

    /// A send refused (during preparation, in the queue or at delivery): its delivery.log
    /// line and the refusal to the sender.
    pub(crate) fn finish_send(&mut self, job: SendRecord, r: Refusal) {
        let ev = self.delivery_event(&job, job.prepared.as_ref(), Some(&r));
        self.delivery_log.append(&ev);
        job.reply.finish(r);
    }

    /// The delivery.log line of a send that ends now (`refusal` is `None` when delivered).
    fn delivery_event<P>(
        &self,
        job: &SendJob<P>,
        prepared: Option<&Prepared>,
        refusal: Option<&Refusal>,
    ) -> Event {
        let ms = self.now.since(job.started).as_millis();
        let input = &job.input;
        let mut ev = Event::new("delivery")
            .field("path", input.path)
            .field("caller", caller_label(input))
            .field("to", &input.to)
            .opt("rt", input.runtime.as_deref())
            .field("ok", if refusal.is_none() { "true" } else { "false" });
        if let Some(p) = prepared {
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
        match refusal {
            Some(r) => ev.opt("topic", topic).field("err", &r.error),
            None => ev.opt("topic", topic),
        }
    }
}

//! Sends across hosts (issue 28 items 2–3), the router's part: a send whose recipient
//! resolves to a peer of another host ([`crate::federation::address::resolve`]) is handed to
//! the `federation-write` thread and waits here, under its own deadline, for its outcome
//! from the recipient's host; an inbox entry from another host is routed as a local send
//! (`path=federation`, sender `<runtime>-<personality>@<host>`, its message id kept, so the
//! recipient's id ledger never pastes it twice) and its outcome goes back through the
//! writer, which acknowledges the entry once the outcome is written.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Router;
use crate::daemon::federation::hub::{Event as FedEvent, Hub, Write};
use crate::daemon::reply::{SendOutcome, SendReplyTo};
use crate::daemon::route::{Caller, SendInput};
use crate::eventlog::Event;
use crate::federation::address::{resolve, Address, Known, Target};
use crate::federation::keys::Entry;
use crate::protocol::{Code, Failure, IfBusy};
use crate::registry::Registry;

/// A send waiting for its outcome from another host.
pub(crate) struct RemoteSend {
    input: SendInput,
    reply: SendReplyTo,
    started: Instant,
    timeout: Duration,
    msg_id: String,
    /// `name@host`.
    to: String,
}

impl RemoteSend {
    /// The host the send went to.
    fn host(&self) -> &str {
        self.to.rsplit('@').next().unwrap_or("")
    }
}

/// The federation's state in the router.
#[derive(Default)]
pub(crate) struct Remote {
    /// Set when the daemon runs the federation threads.
    pub(crate) hub: Option<Arc<Hub>>,
    /// Remote sends waiting, by ticket.
    waiting: HashMap<String, RemoteSend>,
}

impl Router {
    /// Give the router the federation's hub: from then on a send may go to another host.
    pub fn set_federation(&mut self, hub: Arc<Hub>) {
        self.remote.hub = Some(hub);
    }

    /// Where a send goes when this host has joined a federation: `None` for a local send
    /// (and always when not joined), else peer `name` of `host`, or the refusal.
    pub(crate) fn remote_target(&self, to: &str) -> Result<Option<(String, String)>, Failure> {
        let Some((own, connected, hosts)) = self.remote.hub.as_ref().and_then(|h| h.view()) else {
            return Ok(None);
        };
        let addr = Address::parse(to)?;
        // The registry is read only for a plain name some other host has.
        let local = addr.host.is_none()
            && hosts.iter().any(|h| h.peers.contains(&addr.name))
            && Registry::load_cached(&self.paths)
                .map(|r| r.find(&addr.name).is_some())
                .unwrap_or(true);
        let known = Known {
            own_host: &own,
            connected,
            local,
            hosts: &hosts,
        };
        Ok(match resolve(&addr, known)? {
            Target::Local(_) if addr.host.is_none() => None,
            // `name@<this host>`: the local send of `name`.
            Target::Local(name) => Some((name, own)),
            Target::Remote { name, host } => Some((name, host)),
        })
    }

    /// A send to peer `name` of `host` (`host` = this host: the local send of `name`).
    /// Hands it to the writer and waits for its outcome until `started + timeout`.
    pub(crate) fn begin_remote(
        &mut self,
        mut input: SendInput,
        reply: SendReplyTo,
        timeout: Option<Duration>,
        (name, host): (String, String),
    ) {
        let Some(hub) = self.remote.hub.clone() else {
            return;
        };
        let timeout = timeout.unwrap_or(self.cfg.send_timeout);
        let msg_id = input.id.clone().unwrap_or_else(crate::msgids::new_id);
        input.id = Some(msg_id.clone());
        let ticket = crate::fsutil::random_hex(8);
        let to = format!("{name}@{host}");
        self.set_timer(
            self.now.at + timeout,
            super::Timer::RemoteDeadline(ticket.clone()),
        );
        self.remote.waiting.insert(
            ticket.clone(),
            RemoteSend {
                input: input.clone(),
                reply,
                started: self.now.at,
                timeout,
                msg_id,
                to,
            },
        );
        let queued = hub.write(Write::Send {
            ticket: ticket.clone(),
            input: Box::new(input),
            name,
            host,
            timeout_ms: timeout.as_millis() as u64,
        });
        if !queued {
            self.remote_done(
                &ticket,
                Err(Failure::new(
                    Code::ShuttingDown,
                    "the daemon is shutting down; message NOT delivered",
                )),
            );
        }
    }

    /// A send whose address is refused before it goes anywhere (malformed, ambiguous, an
    /// unknown host): its delivery.log line and the refusal.
    pub(crate) fn refuse_remote(&mut self, input: SendInput, reply: SendReplyTo, f: Failure) {
        let ev = Event::new("delivery")
            .field("path", input.path)
            .field("caller", input.caller.claimed())
            .field("to", &input.to)
            .opt("msgid", input.id.as_deref())
            .field("ok", "false")
            .field("ms", 0)
            .field("len", input.message.chars().count())
            .field("err", &f.error);
        self.delivery_log.append(&ev);
        reply.finish(Err(f));
    }

    /// A federation thread's event.
    pub(crate) fn on_federation(&mut self, ev: FedEvent) {
        match ev {
            FedEvent::Outcome {
                ticket,
                from,
                outcome,
            } => {
                if let Some(from) = from {
                    let host = self.remote.waiting.get(&ticket).map(|s| s.host());
                    if host.is_some_and(|h| h != from) {
                        log::warn!(
                            "federation: an answer to send {ticket} came from host {from}, not \
                             from the host it went to: dropped"
                        );
                        return;
                    }
                }
                self.remote_done(&ticket, outcome)
            }
            FedEvent::Inbound {
                host,
                entry,
                stream_id,
            } => self.inbound(host, entry, stream_id),
        }
    }

    /// An inbox entry from host `sender_host` (the one its stream's key names; its `from`
    /// was checked to be of that host): routed as a local send; its outcome goes to the
    /// writer.
    fn inbound(&mut self, sender_host: String, entry: Entry, stream_id: String) {
        let Some(hub) = self.remote.hub.clone() else {
            return;
        };
        // Its attachments as files of this host, kept until the outcome is known.
        let staged = match crate::daemon::federation::attach::stage(&self.paths, &entry.attachments)
        {
            Ok(s) => s,
            Err(e) => {
                let f = crate::protocol::Failure::new(
                    crate::protocol::Code::Internal,
                    format!(
                        "the recipient's host cannot keep the message's attachments: {e}; \
                         message NOT delivered"
                    ),
                );
                hub.write(Write::Outcome {
                    host: sender_host,
                    outcome: crate::daemon::federation::streams::outcome_record(&entry, &Err(f)),
                    entry: stream_id,
                });
                return;
            }
        };
        let input = SendInput {
            path: "federation",
            caller: Caller::Remote {
                identity: entry.from.clone(),
                intelligence: entry.intelligence.clone(),
            },
            to: entry.to.clone(),
            runtime: entry.runtime.clone(),
            message: entry.body.clone(),
            topic: entry.topic.clone(),
            attachments: staged.paths.clone(),
            id: Some(entry.id.clone()),
            if_busy: IfBusy::parse(&entry.if_busy).unwrap_or_default(),
        };
        // The recipient's side waits at least as long as a local send would: an entry read
        // late (this host was down) is still delivered.
        let timeout = Duration::from_millis(entry.timeout_ms).max(self.cfg.send_timeout);
        let writer = hub;
        let reply = SendReplyTo::on_outcome(Arc::new(AtomicBool::new(false)), move |o| {
            // Dropped unanswered (the daemon is ending): not acknowledged, read again at the
            // next start.
            let Some(o) = o else { return };
            drop(staged);
            writer.write(Write::Outcome {
                host: sender_host,
                outcome: crate::daemon::federation::streams::outcome_record(&entry, &o),
                entry: stream_id,
            });
        });
        self.begin_send(input, reply, Some(timeout));
    }

    /// The remote send `ticket` ends with `outcome` (once; later answers are dropped).
    fn remote_done(&mut self, ticket: &str, outcome: SendOutcome) {
        let Some(send) = self.remote.waiting.remove(ticket) else {
            return;
        };
        let ms = self.now.since(send.started).as_millis();
        let mut ev = Event::new("delivery")
            .field("path", "federation")
            .field("entry", send.input.path)
            .field("caller", send.input.caller.claimed())
            .field("to", &send.to)
            .opt("rt", send.input.runtime.as_deref())
            .field("msgid", &send.msg_id)
            .field("ok", if outcome.is_ok() { "true" } else { "false" });
        if let Ok(r) = &outcome {
            ev = ev.field("woke", r.result.woke);
            if let Some(q) = &r.result.queued {
                ev = ev
                    .field("queued", "true")
                    .field("qkind", q.queued_by.as_str());
            }
            if r.result.earlier {
                ev = ev.field("again", "true");
            }
        }
        ev = ev
            .field("ms", ms)
            .field("len", send.input.message.chars().count());
        if let Err(f) = &outcome {
            ev = ev.field("err", &f.error);
        }
        self.delivery_log.append(&ev);
        send.reply.finish(outcome);
    }

    /// [`super::Timer::RemoteDeadline`]: the outcome did not come in time.
    pub(crate) fn remote_deadline(&mut self, ticket: &str) {
        let Some(send) = self.remote.waiting.get(ticket) else {
            return;
        };
        let host = send.host().to_string();
        let online = self
            .remote
            .hub
            .as_ref()
            .and_then(|h| h.view())
            .is_some_and(|(_, _, hosts)| hosts.iter().any(|v| v.host == host && v.online));
        let why = if online {
            format!("host {host} did not answer")
        } else {
            format!("host {host} is offline")
        };
        let f = Failure::new(
            Code::Timeout,
            format!(
                "timeout: {why} within {} s; the message waits in its inbox stream and is \
                 delivered when its daemon reads it — a send again with message id {} is never \
                 delivered twice",
                send.timeout.as_secs_f64(),
                send.msg_id
            ),
        );
        self.remote_done(ticket, Err(f));
    }
}

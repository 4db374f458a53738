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
use crate::daemon::route::{Caller, SendArgs, SendInput};
use crate::daemon::test_hooks;
use crate::eventlog::Event;
use crate::federation::address::{resolve, Address, Known, Target};
use crate::federation::keys::{self, Entry};
use crate::names::Identity;
use crate::protocol::{
    Code, DeliveredTo, Failure, IfBusy, Queued, QueuedBy, SendReply, SendResult,
};
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
    /// The host's heartbeat had lapsed when the send began: once its entry is in the
    /// host's inbox stream the sender is answered `queued` (issue 28 item 4).
    offline: bool,
}

/// A send answered `queued` for a host that was offline, followed until its outcome comes
/// back (the host returned) or [`crate::federation::keys::RETENTION`] passes: its sender is
/// told then when it was not delivered, as for a message the runtime queued
/// ([`super::followup`]).
pub(crate) struct Kept {
    /// The sender as authenticated by the writer.
    caller: Identity,
    topic: Option<String>,
    ts: String,
    started: Instant,
    preview: String,
    msg_id: String,
    /// `name@host`.
    to: String,
    retention: Duration,
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
    /// Remote sends answered `queued` (their host was offline), by ticket.
    kept: HashMap<String, Kept>,
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
        let msg_id = input.args.id.clone().unwrap_or_else(crate::msgids::new_id);
        input.args.id = Some(msg_id.clone());
        let ticket = crate::fsutil::random_hex(8);
        let to = format!("{name}@{host}");
        let offline = hub
            .view()
            .is_some_and(|(_, _, hosts)| hosts.iter().any(|v| v.host == host && !v.online));
        if offline && input.args.if_busy == IfBusy::Refuse {
            let f = offline_refusal(&host, test_hooks::federation_retention().0);
            return self.refuse_remote(input, reply, f);
        }
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
                offline,
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
            .field("to", &input.args.to)
            .opt("msgid", input.args.id.as_deref())
            .field("ok", "false")
            .field("ms", 0)
            .field("len", input.args.message.chars().count())
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
            FedEvent::Written { ticket, from } => self.remote_written(&ticket, &from),
        }
    }

    /// The entry of remote send `ticket` (by `from`) is in its host's inbox stream: a send
    /// to a host that was offline is answered `queued` now and followed ([`Kept`]).
    fn remote_written(&mut self, ticket: &str, from: &str) {
        if !self.remote.waiting.get(ticket).is_some_and(|s| s.offline) {
            return;
        }
        let Some(send) = self.remote.waiting.remove(ticket) else {
            return;
        };
        let (retention, grace) = test_hooks::federation_retention();
        let ts = crate::clock::envelope_ts(&crate::clock::now_local());
        let reply = kept_reply(&send, &ts, retention);
        self.log_remote(&send, &Ok(reply.clone()));
        let Ok(caller) = Identity::parse(from) else {
            return send.reply.finish(Ok(reply));
        };
        self.remote.kept.insert(
            ticket.to_string(),
            Kept {
                caller,
                topic: send.input.args.topic.clone(),
                ts,
                started: send.started,
                preview: send.input.args.message.chars().take(80).collect(),
                msg_id: send.msg_id.clone(),
                to: send.to.clone(),
                retention,
            },
        );
        self.set_timer(
            self.now.at + retention + grace,
            super::Timer::RemoteKept(ticket.to_string()),
        );
        send.reply.finish(Ok(reply));
    }

    /// The outcome of a kept send came back (its host returned): its `delivery-followup`
    /// line, and the sender told when it was not delivered.
    fn kept_done(&mut self, ticket: &str, outcome: &SendOutcome) {
        let Some(k) = self.remote.kept.remove(ticket) else {
            return;
        };
        match outcome {
            Ok(_) => self.kept_line(&k, "delivered", None),
            Err(f) => {
                self.kept_line(&k, "refused", Some(&f.error));
                let text = kept_notice(&k, &f.error);
                self.notify(&k.caller, k.topic.clone(), text);
            }
        }
    }

    /// [`super::Timer::RemoteKept`]: the host did not come back within the retention.
    pub(crate) fn remote_kept_expired(&mut self, ticket: &str) {
        let Some(k) = self.remote.kept.remove(ticket) else {
            return;
        };
        let host = k.to.rsplit('@').next().unwrap_or("");
        let why = format!(
            "host {host} did not come back within the {} a message is kept for it",
            keys::retention_text(k.retention)
        );
        self.kept_line(&k, "expired", Some(&why));
        let text = kept_notice(&k, &why);
        self.notify(&k.caller, k.topic.clone(), text);
    }

    /// `ev=delivery-followup path=federation caller=<rt-p> to=<name@host> qkind=host
    /// msgid=… outcome=delivered|refused|expired ok=… ms=<since the send> [topic=] [err=]`.
    fn kept_line(&mut self, k: &Kept, outcome: &str, err: Option<&String>) {
        let ev = Event::new("delivery-followup")
            .field("path", "federation")
            .field("caller", &k.caller)
            .field("to", &k.to)
            .field("qkind", QueuedBy::Host.as_str())
            .field("msgid", &k.msg_id)
            .field("outcome", outcome)
            .field("ok", if err.is_none() { "true" } else { "false" })
            .field("ms", self.now.since(k.started).as_millis())
            .opt("topic", k.topic.as_deref());
        let ev = match err {
            Some(e) => ev.field("err", e),
            None => ev,
        };
        self.delivery_log.append(&ev);
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
            args: SendArgs {
                to: entry.to.clone(),
                runtime: entry.runtime.clone(),
                message: entry.body.clone(),
                topic: entry.topic.clone(),
                attachments: staged.paths.clone(),
                id: Some(entry.id.clone()),
                if_busy: IfBusy::parse(&entry.if_busy).unwrap_or_default(),
            },
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
            return self.kept_done(ticket, &outcome);
        };
        self.log_remote(&send, &outcome);
        send.reply.finish(outcome);
    }

    /// The sender's `delivery.log` line of a remote send's answer.
    fn log_remote(&mut self, send: &RemoteSend, outcome: &SendOutcome) {
        let ms = self.now.since(send.started).as_millis();
        let mut ev = Event::new("delivery")
            .field("path", "federation")
            .field("entry", send.input.path)
            .field("caller", send.input.caller.claimed())
            .field("to", &send.to)
            .opt("rt", send.input.args.runtime.as_deref())
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
            .field("len", send.input.args.message.chars().count());
        if let Err(f) = &outcome {
            ev = ev.field("err", &f.error);
        }
        self.delivery_log.append(&ev);
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

/// The answer to a send whose host is offline, once its entry is in the host's inbox stream
/// (pure): `queued`, `queuedBy: "host"`, `waitingFor: "host b, which is offline: kept until
/// it returns, at most 24 h"`; `delivered_to` is `name@host` with the runtime named, else
/// `default` (the host's roster is gone with its heartbeat).
fn kept_reply(send: &RemoteSend, ts: &str, retention: Duration) -> SendReply {
    SendReply {
        result: SendResult {
            ok: true,
            delivered_to: DeliveredTo {
                personality: send.to.clone(),
                runtime: send
                    .input
                    .args
                    .runtime
                    .clone()
                    .unwrap_or_else(|| "default".into()),
            },
            woke: false,
            ts: Some(ts.to_string()),
            queued: Some(Queued {
                queued: true,
                queued_by: QueuedBy::Host,
                queue_depth: None,
                waiting_for: Some(format!(
                    "host {}, which is offline: kept until it returns, at most {}",
                    send.host(),
                    keys::retention_text(retention)
                )),
            }),
            id: Some(send.msg_id.clone()),
            earlier: false,
            interrupted: false,
        },
    }
}

/// The refusal of a send to host `host`, offline, whose sender chose not to wait
/// (`if_busy: refuse`). Pure.
fn offline_refusal(host: &str, retention: Duration) -> Failure {
    Failure::new(
        Code::Offline,
        format!(
            "host {host} is offline (its heartbeat lapsed); message NOT delivered — if-busy \
             refuse does not wait: send it again when the host returns (iapeer federation \
             status), or without if-busy refuse to have it kept for it, at most {}",
            keys::retention_text(retention)
        ),
    )
}

/// The notice to the sender of a kept message that was not delivered (pure).
fn kept_notice(k: &Kept, why: &str) -> String {
    let more = if k.preview.chars().count() >= 80 {
        "…"
    } else {
        ""
    };
    format!(
        "Your message to {} sent at {} (\"{}{more}\") was kept for its host while it was \
         offline, and NOT delivered: {why}. Send it again if it still matters.",
        k.to, k.ts, k.preview
    )
}

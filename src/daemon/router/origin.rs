//! The router's side of the origin guard (spec 10 §2): the pair state follows accepted
//! deliveries, `confirm-send` claims a hold and sends it as its sender, expired holds go.
//! The rule and the files are [`crate::origin`]; the check itself runs in `route::prepare`.

use super::endpoint::SendJob;
use super::Router;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::{Caller, Prepared, Refusal, SendArgs, SendInput};
use crate::eventlog::Event;
use crate::origin::{self, ClaimError};
use crate::protocol::Code;

impl Router {
    /// A confirmed hold's send ended: accepted → its file goes; refused → it is pending
    /// again, so the sender can confirm it once more before it expires.
    pub(crate) fn hold_done<P>(&mut self, job: &SendJob<P>, ok: bool) {
        let Some(claim) = &job.hold else {
            return;
        };
        let done = if ok {
            origin::finish(claim)
        } else {
            origin::release(claim)
        };
        if let Err(e) = done {
            log::warn!("origin hold {}: {e}", claim.path.display());
        }
    }

    /// A send's effect on the pair state. `inbound` (called when a prepared send is queued,
    /// before its delivery begins): a human's message to an agent arms the guard for that
    /// pair — before the agent can see the message, so its answer, prepared on another
    /// thread, is judged against it. Otherwise (called when a send is accepted): the agent's
    /// answer on the human's channel disarms it.
    pub(crate) fn note_origin(&mut self, p: &Prepared, inbound: bool) {
        if !self.cfg.origin.enabled {
            return;
        }
        let Some(from) = p.envelope.intelligence else {
            return;
        };
        let to = p.target.nature();
        // Only a human ↔ agent pair ever changes the state (no file read otherwise).
        use crate::names::Intelligence::{Artificial, Natural};
        let wanted = if inbound {
            (Natural, Artificial)
        } else {
            (Artificial, Natural)
        };
        if (from, to) != wanted {
            return;
        }
        let state = origin::OriginState::load(&self.paths);
        let next = origin::note(
            &state,
            (&p.caller.personality, from),
            (&p.target.personality, to),
            &p.endpoint.runtime,
            &p.caller.runtime,
            self.now.ms,
        );
        if let Some(next) = next {
            if let Err(e) = next.save(&self.paths) {
                log::warn!("cannot write the origin guard's state: {e}");
            }
        }
    }

    /// `confirm-send <id> [--runtime <rt>]`: claim the hold (only the sender's own session,
    /// or the operator) and send it as its sender; answered like a send.
    pub(crate) fn op_confirm_send(
        &mut self,
        id: &str,
        runtime: Option<String>,
        caller: Option<&str>,
        reply: ReplyTo,
    ) {
        let (hold, claim) = match origin::claim(
            &self.paths,
            id,
            caller,
            self.now.ms,
            self.cfg.origin.hold_ttl,
        ) {
            Ok(c) => c,
            Err(e) => return reply.finish(claim_refusal(id, e)),
        };
        self.lifecycle(
            Event::new("origin-hold")
                .field("action", "confirmed")
                .field("id", id)
                .field("from", &hold.from)
                .field("to", &hold.to)
                .field("rt", runtime.as_deref().unwrap_or(&hold.runtime)),
        );
        let input = SendInput {
            path: "confirm",
            caller: Caller::Cli(hold.from),
            args: SendArgs {
                to: hold.to,
                runtime: Some(runtime.unwrap_or(hold.runtime)),
                message: hold.message,
                topic: hold.topic,
                attachments: hold.attachments,
                ..SendArgs::default()
            },
        };
        self.begin_send_of(input, reply.into(), None, Some(claim));
    }

    /// Drop the holds whose time ran out (the tick), each with a lifecycle line.
    pub(crate) fn expire_holds(&mut self) {
        for id in origin::expire(&self.paths, self.now.ms, self.cfg.origin.hold_ttl) {
            self.lifecycle(
                Event::new("origin-hold")
                    .field("action", "expired")
                    .field("id", id),
            );
        }
    }
}

/// The refusal of a `confirm-send` whose hold cannot be claimed, saying what to do.
fn claim_refusal(id: &str, e: ClaimError) -> Refusal {
    let (code, error) = match e {
        ClaimError::Unknown => (
            Code::InvalidArgument,
            format!(
                "no held message {id}: it was confirmed already, expired, or never held — \
                 held ids look like og-1a2b3c4d and come in the error of the send that was held"
            ),
        ),
        ClaimError::NotYours { owner } => (
            Code::InvalidArgument,
            format!(
                "held message {id} is {owner}'s: a session may confirm only the messages it \
                 sent itself"
            ),
        ),
        ClaimError::Expired => (
            Code::InvalidArgument,
            format!("held message {id} expired and was dropped; send it again if it still matters"),
        ),
        ClaimError::Io(why) => (
            Code::Internal,
            format!("cannot take held message {id}: {why}"),
        ),
    };
    Refusal { code, error }
}

//! The sender's choice for an agent mid-turn (issue 32 item 7): `--if-busy
//! queue|interrupt|refuse` of `send`, `if_busy` of `send_to_peer` and of the fleet's send
//! ([`IfBusy`]). Looked at when a message's turn to go in comes (the queue head, its session
//! ready): busy is what the session's screen shows ([`crate::adapter::Adapter::is_busy`],
//! the `busy` of `list`). `queue` is what iapeer always did — paste it, and the runtime
//! queues it behind its turn or takes it in; `interrupt` first writes the runtime's own
//! interrupt keys, as `iapeer interrupt` does (the session then waits for the turn to end
//! and for an interrupted prompt put back into the composer, and clears it, before it
//! pastes: [`crate::session::own_text`]); `refuse` answers code `busy`, nothing written.

use super::Router;
use crate::daemon::route::Refusal;
use crate::eventlog::Event;
use crate::names::Identity;
use crate::protocol::{Code, IfBusy};
use crate::session::handle::SessionCmd;

/// What the queue head's message does about a busy agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BusyStep {
    /// Deliver it as it is (not busy, or the sender chose `queue`).
    Deliver,
    /// Interrupt the turn, then deliver it.
    Interrupt,
    /// Refuse it: NOT delivered.
    Refuse,
}

/// The step for a message whose sender chose `choice`, to an agent that is `busy` now
/// (pure). `interruptible`: its runtime has interrupt keys; without them an interrupt is
/// not possible and the message goes as `queue` would (its answer then does not say
/// `interrupted`).
pub(crate) fn busy_step(choice: IfBusy, busy: bool, interruptible: bool) -> BusyStep {
    match (choice, busy) {
        (_, false) | (IfBusy::Queue, true) => BusyStep::Deliver,
        (IfBusy::Interrupt, true) if interruptible => BusyStep::Interrupt,
        (IfBusy::Interrupt, true) => BusyStep::Deliver,
        (IfBusy::Refuse, true) => BusyStep::Refuse,
    }
}

/// The refusal of a message to `identity`'s busy agent (code `busy`).
pub(crate) fn busy_refusal(identity: &Identity) -> Refusal {
    Refusal {
        code: Code::Busy,
        error: format!(
            "peer \"{}\" is busy: its agent ({}) is in the middle of a turn, and this send chose \
             if-busy refuse; message NOT delivered — send it again later, or with if-busy queue \
             (its runtime queues it) or interrupt (its turn is stopped first)",
            identity.personality, identity.runtime
        ),
    }
}

impl Router {
    /// Carry out the busy choice of `identity`'s queue head when it is a message its ready
    /// session is about to be handed ([`super::decide::HeadStep::Deliver`]): `false` when it
    /// was refused and taken out of the queue, else `true` (delivered next, its turn
    /// interrupted first when so chosen; anything else at the head goes on as it would).
    pub(crate) fn apply_if_busy(&mut self, identity: &Identity) -> bool {
        let Some(session) = self
            .live
            .get(identity)
            .filter(|s| s.live() == super::decide::Live::Ready)
        else {
            return true;
        };
        let busy = session.status.as_ref().is_some_and(|st| st.busy);
        let Some(super::endpoint::Job::Send(job)) = self.queues.head(identity) else {
            return true;
        };
        let keys = self
            .adapter(&identity.runtime)
            .ok()
            .and_then(|a| a.interrupt_keys());
        match busy_step(job.input.args.if_busy, busy, keys.is_some()) {
            BusyStep::Deliver => true,
            BusyStep::Refuse => {
                self.lifecycle(
                    Event::new("busy-refused")
                        .field("identity", identity)
                        .field("msgid", &job.msg_id),
                );
                self.fail_head(identity, busy_refusal(identity));
                false
            }
            BusyStep::Interrupt => {
                let msgid = job.msg_id.clone();
                if let Some(keys) = keys {
                    session.handle.send(SessionCmd::Interrupt(keys));
                }
                if let Some(super::endpoint::Job::Send(job)) = self
                    .queues
                    .endpoint_mut(identity)
                    .and_then(|e| e.queue.front_mut())
                {
                    job.interrupted = true;
                }
                self.lifecycle(
                    Event::new("interrupt")
                        .field("identity", identity)
                        .field("for", &msgid),
                );
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each choice against an idle and a busy agent, with and without interrupt keys.
    #[test]
    fn each_choice_idle_and_busy() {
        use BusyStep::*;
        for keys in [true, false] {
            for choice in IfBusy::ALL {
                assert_eq!(busy_step(choice, false, keys), Deliver, "{choice:?} idle");
            }
            assert_eq!(busy_step(IfBusy::Queue, true, keys), Deliver);
            assert_eq!(busy_step(IfBusy::Refuse, true, keys), Refuse);
        }
        assert_eq!(busy_step(IfBusy::Interrupt, true, true), Interrupt);
        assert_eq!(busy_step(IfBusy::Interrupt, true, false), Deliver);
    }

    #[test]
    fn the_refusal_says_busy_not_delivered_and_what_to_do() {
        let r = busy_refusal(&Identity::new("claude", "bob").unwrap());
        assert_eq!(r.code, Code::Busy);
        for needle in [
            "peer \"bob\" is busy",
            "(claude)",
            "NOT delivered",
            "if-busy queue",
            "interrupt",
        ] {
            assert!(r.error.contains(needle), "{needle}: {}", r.error);
        }
    }
}

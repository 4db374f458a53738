//! The `approve`/`deny` replies that wait for a session's word on a prompt on its screen
//! (issue 27): what became of the human's answer, as the session reports its prompt closing
//! ([`Closing`]) and, when it asks again, the new request. Pure: no clock, no I/O; the router
//! passes the time in and answers the replies the methods hand back (`R`: how each is
//! answered; a plain value in tests).

use crate::names::Identity;
use crate::protocol::ApprovalOutcome;
use crate::session::prompts::Closing;

/// One held reply: the answer to prompt `n` of `identity`'s session `session`.
#[derive(Debug)]
pub struct Waiting<R> {
    /// The asking session's identity.
    pub identity: Identity,
    /// Its session id.
    pub session: u64,
    /// The prompt's number in that session.
    pub n: u64,
    /// When the answer was given, epoch ms.
    pub created_ms: u64,
    /// When the reply says it is unconfirmed, epoch ms.
    pub deadline_ms: u64,
    /// The held reply.
    pub reply: R,
    /// The prompt closed to be asked again, for this reason: the session's next opened
    /// prompt is the new request.
    again: Option<&'static str>,
}

impl<R> Waiting<R> {
    /// A reply waiting for word on prompt `n` of `identity`'s session `session`, from
    /// `created_ms` until `deadline_ms`.
    pub fn new(
        identity: Identity,
        session: u64,
        n: u64,
        (created_ms, deadline_ms): (u64, u64),
        reply: R,
    ) -> Waiting<R> {
        Waiting {
            identity,
            session,
            n,
            created_ms,
            deadline_ms,
            reply,
            again: None,
        }
    }
}

/// The held replies.
#[derive(Debug)]
pub struct Confirmations<R> {
    list: Vec<Waiting<R>>,
}

impl<R> Default for Confirmations<R> {
    fn default() -> Self {
        Confirmations { list: Vec::new() }
    }
}

/// A settled reply: the requester's, and what to tell it.
pub type Settled<R> = (R, ApprovalOutcome);

impl<R> Confirmations<R> {
    /// Hold `w` until its session says.
    pub fn wait(&mut self, w: Waiting<R>) {
        self.list.push(w);
    }

    /// Nothing is held.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Prompt `n` of `identity`'s session `session` closed (`how`): the reply waiting for it
    /// is settled — taken, or the prompt gone first — unless the prompt is asked again, when
    /// it waits for the new request ([`Confirmations::opened`]).
    pub fn closed(
        &mut self,
        identity: &Identity,
        session: u64,
        n: u64,
        how: &Closing,
    ) -> Option<Settled<R>> {
        let at = self.list.iter().position(|w| {
            &w.identity == identity && w.session == session && w.n == n && w.again.is_none()
        })?;
        let outcome = match how {
            Closing::Answered { by_runtime } => ApprovalOutcome::Taken {
                by: if *by_runtime { "runtime" } else { "keys" }.into(),
            },
            Closing::Unanswered => ApprovalOutcome::PromptGone,
            Closing::AskedAgain(why) => {
                self.list[at].again = Some(why);
                return None;
            }
        };
        Some((self.list.swap_remove(at).reply, outcome))
    }

    /// A prompt opened on `identity`'s session `session` as request `id`: a reply waiting
    /// for its prompt to be asked again is settled with it.
    pub fn opened(&mut self, identity: &Identity, session: u64, id: &str) -> Option<Settled<R>> {
        let at = self
            .list
            .iter()
            .position(|w| &w.identity == identity && w.session == session && w.again.is_some())?;
        let w = self.list.swap_remove(at);
        let outcome = ApprovalOutcome::AskedAgain {
            again: Some(id.to_string()),
            reason: asked_again_reason(w.again.unwrap_or_default()),
        };
        Some((w.reply, outcome))
    }

    /// `identity`'s session ended: its replies are settled so.
    pub fn ended(&mut self, identity: &Identity) -> Vec<Settled<R>> {
        self.take(|w| &w.identity == identity)
            .map(|w| (w.reply, ApprovalOutcome::SessionEnded))
            .collect()
    }

    /// The replies past their deadline at `now_ms`: unconfirmed, or asked again without the
    /// new request seen.
    pub fn due(&mut self, now_ms: u64) -> Vec<Settled<R>> {
        self.take(|w| w.deadline_ms <= now_ms)
            .map(|w| {
                let outcome = match w.again {
                    Some(why) => ApprovalOutcome::AskedAgain {
                        again: None,
                        reason: asked_again_reason(why),
                    },
                    None => ApprovalOutcome::Unconfirmed {
                        waited_ms: now_ms.saturating_sub(w.created_ms),
                    },
                };
                (w.reply, outcome)
            })
            .collect()
    }

    /// Every reply: the daemon is stopping.
    pub fn drain(&mut self) -> Vec<Settled<R>> {
        std::mem::take(&mut self.list)
            .into_iter()
            .map(|w| (w.reply, ApprovalOutcome::Shutdown))
            .collect()
    }

    /// Drop the replies whose requester left (`gone`).
    pub fn forget(&mut self, gone: impl Fn(&R) -> bool) {
        self.list.retain(|w| !gone(&w.reply));
    }

    fn take(&mut self, which: impl Fn(&Waiting<R>) -> bool) -> impl Iterator<Item = Waiting<R>> {
        let (taken, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.list).into_iter().partition(which);
        self.list = kept;
        taken.into_iter()
    }
}

/// The session's reason for asking again ([`crate::session::prompts::NOT_TAKEN`],
/// [`crate::session::prompts::NOT_CLOSED`]) without its leading `asked again: `.
fn asked_again_reason(why: &str) -> String {
    why.strip_prefix("asked again: ").unwrap_or(why).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::prompts::{NOT_CLOSED, NOT_TAKEN};

    fn id(p: &str) -> Identity {
        Identity::new("claude", p).unwrap()
    }

    fn held(c: &mut Confirmations<&'static str>, who: &str, session: u64, n: u64, r: &'static str) {
        c.wait(Waiting::new(id(who), session, n, (1_000, 16_000), r));
    }

    #[test]
    fn a_closed_prompt_settles_its_own_reply_only() {
        let mut c = Confirmations::default();
        held(&mut c, "a", 7, 1, "a1");
        held(&mut c, "b", 9, 1, "b1");
        // Another session's, another prompt's, another number: nothing.
        let keys = Closing::Answered { by_runtime: false };
        assert_eq!(c.closed(&id("a"), 8, 1, &keys), None);
        assert_eq!(c.closed(&id("a"), 7, 2, &keys), None);
        assert_eq!(
            c.closed(&id("a"), 7, 1, &keys),
            Some(("a1", ApprovalOutcome::Taken { by: "keys".into() }))
        );
        assert_eq!(c.closed(&id("a"), 7, 1, &keys), None, "settled once");
        let api = Closing::Answered { by_runtime: true };
        assert_eq!(
            c.closed(&id("b"), 9, 1, &api),
            Some((
                "b1",
                ApprovalOutcome::Taken {
                    by: "runtime".into()
                }
            ))
        );
        held(&mut c, "a", 7, 3, "a3");
        assert_eq!(
            c.closed(&id("a"), 7, 3, &Closing::Unanswered),
            Some(("a3", ApprovalOutcome::PromptGone))
        );
        assert!(c.is_empty());
    }

    #[test]
    fn a_prompt_asked_again_settles_with_the_new_request_and_the_reason() {
        let mut c = Confirmations::default();
        held(&mut c, "a", 7, 1, "a1");
        assert_eq!(
            c.opened(&id("a"), 7, "ap-00000000"),
            None,
            "not asked again"
        );
        assert_eq!(
            c.closed(&id("a"), 7, 1, &Closing::AskedAgain(NOT_TAKEN)),
            None
        );
        assert_eq!(c.opened(&id("b"), 7, "ap-11111111"), None);
        assert_eq!(
            c.opened(&id("a"), 7, "ap-22222222"),
            Some((
                "a1",
                ApprovalOutcome::AskedAgain {
                    again: Some("ap-22222222".into()),
                    reason: "the runtime did not take the last answer through its API; answer \
                             it on the agent's screen (iapeer attach)"
                        .into()
                }
            ))
        );
        // Asked again, and the new request not seen by the deadline.
        held(&mut c, "a", 7, 2, "a2");
        c.closed(&id("a"), 7, 2, &Closing::AskedAgain(NOT_CLOSED));
        assert_eq!(c.due(15_999), []);
        let due = c.due(16_000);
        assert!(
            matches!(&due[..], [("a2", ApprovalOutcome::AskedAgain { again: None, reason })]
                if reason.starts_with("the last answer did not close the prompt")),
            "{due:?}"
        );
    }

    #[test]
    fn no_word_by_the_deadline_an_ended_session_and_shutdown_settle_it() {
        let mut c = Confirmations::default();
        held(&mut c, "a", 7, 1, "a1");
        held(&mut c, "b", 9, 1, "b1");
        held(&mut c, "c", 4, 1, "c1");
        assert_eq!(
            c.due(16_500),
            [
                ("a1", ApprovalOutcome::Unconfirmed { waited_ms: 15_500 }),
                ("b1", ApprovalOutcome::Unconfirmed { waited_ms: 15_500 }),
                ("c1", ApprovalOutcome::Unconfirmed { waited_ms: 15_500 })
            ]
        );
        held(&mut c, "a", 7, 2, "a2");
        held(&mut c, "b", 9, 2, "b2");
        held(&mut c, "c", 4, 2, "c2");
        assert_eq!(c.ended(&id("a")), [("a2", ApprovalOutcome::SessionEnded)]);
        c.forget(|r| *r == "c2");
        assert_eq!(c.drain(), [("b2", ApprovalOutcome::Shutdown)]);
        assert!(c.is_empty());
    }
}

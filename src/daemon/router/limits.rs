//! The router's side of taking limited turns up again (issue 32 item 3): a refusal for a rate
//! or usage limit, read by a status probe (`notices.rs`), is planned by
//! [`crate::limits::plan`]; the sender of the message in progress (the newest one delivered
//! to that agent) is told; at the planned time ([`Timer::LimitResume`]) iapeer sends the
//! agent a short prompt to continue from `iapeer` (the refused message is still in its
//! conversation, so it is not delivered twice) and tells the sender; an answered turn ends
//! the matter (and tells the sender when the runtime took the turn up by itself). Kept in
//! memory only: a daemon restart forgets a planned prompt.

use std::time::Duration;

use super::followup::{which_message, Followed};
use super::{Router, Timer};
use crate::adapter::ApiError;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::SendInput;
use crate::eventlog::Event;
use crate::limits::{self, Due, Plan};
use crate::names::Identity;

/// A limited turn iapeer will take up again.
#[derive(Debug, Clone)]
pub(crate) struct Limited {
    /// The message in progress when the limit was hit, if iapeer delivered it.
    pub followed: Followed,
    /// The refusal.
    pub error: ApiError,
    /// When iapeer prompts, epoch ms.
    pub at_ms: u64,
    /// Prompts iapeer sent for this turn so far.
    pub tries: u32,
    /// The prompt for the planned time was sent; waiting for the outcome.
    pub prompted: bool,
}

impl Router {
    /// `identity`'s runtime gave a turn up on a limit (refusal `e`, of this session): plan
    /// the taking up, log it (`ev=limit action=limited`), tell the sender of the message in
    /// progress. A turn iapeer did not deliver (no message known) is only logged.
    pub(crate) fn on_limited(&mut self, identity: &Identity, e: &ApiError) {
        let prev = self.limited.remove(identity);
        let tries = prev.as_ref().map_or(0, |l| l.tries);
        let followed = prev.map(|l| l.followed).or_else(|| {
            self.queues
                .recent()
                .iter()
                .rev()
                .find(|(_, f, _)| &f.endpoint == identity)
                .map(|(_, f, _)| f.clone())
        });
        let plan = limits::plan(e, tries, self.now.ms, self.cfg.limits);
        let (word, at, due) = match plan {
            Plan::Resume { at_ms, due, .. } => (
                "resume",
                Some(limits::when(at_ms)),
                Some(match due {
                    Due::Reset => "reset",
                    Due::Backoff => "backoff",
                }),
            ),
            Plan::Off { .. } => ("off", None, None),
            Plan::GiveUp => ("give-up", None, None),
        };
        self.lifecycle(
            Event::new("limit")
                .field("action", "limited")
                .field("identity", identity)
                .field("plan", word)
                .opt("at", at.as_deref())
                .opt("due", due)
                .field("tries", tries.to_string())
                .opt("msgid", followed.as_ref().map(|f| f.key.id.as_str()))
                .opt("resets_at", e.resets_at.as_deref()),
        );
        let Some(f) = followed else {
            return;
        };
        self.send_notice(&f, limits::limited_notice(&which_message(&f), e, plan));
        if let Plan::Resume { at_ms, .. } = plan {
            let wait = Duration::from_millis(at_ms.saturating_sub(self.now.ms));
            self.set_timer(self.now.at + wait, Timer::LimitResume(identity.clone()));
            self.limited.insert(
                identity.clone(),
                Limited {
                    followed: f,
                    error: e.clone(),
                    at_ms,
                    tries,
                    prompted: false,
                },
            );
        }
    }

    /// A later probe read refusal `e` again. Claude Code writes its word that it continues
    /// by itself (`runtime_resumes`) just after the refusal record, so a probe between the
    /// two planned without it: plan again, quietly (the sender was told already).
    pub(crate) fn limit_seen(&mut self, identity: &Identity, e: &ApiError) {
        let (now, cfg) = (self.now, self.cfg.limits);
        let Some(l) = self.limited.get_mut(identity) else {
            return;
        };
        if l.prompted || l.error.at != e.at || l.error.runtime_resumes || !e.runtime_resumes {
            return;
        }
        if let Plan::Resume { at_ms, .. } = limits::plan(e, l.tries, now.ms, cfg) {
            l.error = e.clone();
            l.at_ms = at_ms;
            let wait = Duration::from_millis(at_ms.saturating_sub(now.ms));
            self.set_timer(now.at + wait, Timer::LimitResume(identity.clone()));
        }
    }

    /// `identity` answered a turn: a limited turn of its is over. When iapeer had not
    /// prompted yet, its runtime (or a later message) took the turn up: the sender is told.
    pub(crate) fn limit_answered(&mut self, identity: &Identity) {
        let Some(l) = self.limited.remove(identity) else {
            return;
        };
        self.lifecycle(
            Event::new("limit")
                .field("action", "answered")
                .field("identity", identity)
                .field("by", if l.prompted { "iapeer" } else { "runtime" })
                .field("msgid", &l.followed.key.id),
        );
        if !l.prompted {
            let text = limits::resumed_notice(&which_message(&l.followed), self.now.ms, true);
            self.send_notice(&l.followed, text);
        }
    }

    /// [`Timer::LimitResume`]: the planned time came; unless the turn was answered (the entry
    /// is gone) or already prompted, prompt the agent to continue and tell the sender.
    pub(crate) fn limit_resume_due(&mut self, identity: &Identity) {
        let now = self.now.ms;
        let Some(l) = self.limited.get_mut(identity) else {
            return;
        };
        // A timer of an earlier plan (the entry was planned again since).
        if l.prompted || l.at_ms > now + 1000 {
            return;
        }
        l.prompted = true;
        l.tries += 1;
        let l = l.clone();
        self.lifecycle(
            Event::new("limit")
                .field("action", "prompted")
                .field("identity", identity)
                .field("tries", l.tries.to_string())
                .field("msgid", &l.followed.key.id),
        );
        let input = SendInput::from_daemon(
            identity.personality.clone(),
            Some(identity.runtime.clone()),
            limits::continue_prompt(&l.error),
            l.followed.topic.clone(),
        );
        self.begin_send(input, ReplyTo::discard(), None);
        let text = limits::resumed_notice(&which_message(&l.followed), now, false);
        self.send_notice(&l.followed, text);
    }
}

//! The router's side of the notice board (spec 10 §3): each status probe's reading of the
//! runtime's files raises a notice (or repeats one) for a new refusal, clears the session's
//! notices once it answers again, and the tick expires old ones. The board and its rules are
//! [`crate::notices`]; the readings are [`crate::runtime::api_error`].

use super::Router;
use crate::adapter::ApiError;
use crate::eventlog::Event;
use crate::names::Identity;
use crate::notices::{self, Notice};

impl Router {
    /// What one status probe of `identity` read: `raised`, a refusal the previous probe had
    /// not seen; `outcome`, the newest outcome in its files (`None`: an answer, or nothing
    /// yet). A refusal older than the session (`woke_at_ms`) is an old transcript's, not
    /// this session's, and raises nothing. A new refusal for a limit is planned to be taken
    /// up again, and an answer ends a limited turn (`limits.rs`, issue 32 item 3).
    pub(crate) fn note_api_outcome(
        &mut self,
        identity: &Identity,
        raised: Option<&ApiError>,
        outcome: Option<&ApiError>,
        woke_at_ms: u64,
    ) {
        let id = identity.to_string();
        if outcome.is_none() {
            let cleared = self.notices.clear(&id);
            if !cleared.is_empty() {
                self.notices_changed(&cleared, "answered");
            }
            self.limit_answered(identity);
            return;
        }
        let Some(e) = raised.filter(|e| notices::of_this_session(&e.at, woke_at_ms)) else {
            if let Some(e) = outcome {
                self.limit_seen(identity, e);
            }
            return;
        };
        let r = self.notices.raise(
            &identity.personality,
            &identity.runtime,
            &id,
            e,
            self.now.ms,
            self.cfg.notices,
        );
        self.save_notices();
        self.lifecycle(
            Event::new("notice-raised")
                .field("id", &r.notice.id)
                .field("identity", &id)
                .field("kind", e.kind.as_str())
                .field("error", &e.error_type)
                .opt("status", e.status.map(|s| s.to_string()).as_deref())
                .field("model", &e.model)
                .field("count", r.notice.count.to_string())
                .opt("resets_at", e.resets_at.as_deref())
                .field("at", &e.at),
        );
        if e.kind == crate::adapter::ApiErrorKind::RateLimit {
            self.on_limited(identity, e);
        }
    }

    /// A pending approval request `approval` of `identity` (its `tool`, `summary`) is a
    /// notice until `deadline_ms` or until it ends ([`Router::clear_approval_notice`]).
    pub(crate) fn raise_approval_notice(
        &mut self,
        identity: &Identity,
        approval: &str,
        tool: &str,
        summary: &str,
        deadline_ms: u64,
    ) {
        let n = self.notices.raise_approval(
            &identity.personality,
            &identity.runtime,
            &identity.to_string(),
            approval,
            tool,
            summary,
            self.now.ms,
            deadline_ms,
        );
        self.save_notices();
        self.lifecycle(
            Event::new("notice-raised")
                .field("id", &n.id)
                .field("identity", identity.to_string())
                .field("kind", &n.kind)
                .field("approval", approval)
                .field("tool", tool)
                .field("count", n.count.to_string()),
        );
    }

    /// The approval request `approval` ended: its notice goes.
    pub(crate) fn clear_approval_notice(&mut self, identity: &Identity, approval: &str) {
        if let Some(n) =
            self.notices
                .clear_approval(&identity.personality, &identity.runtime, approval)
        {
            self.notices_changed(&[n], "approval-ended");
        }
    }

    /// The tick: notices past their time go.
    pub(crate) fn expire_notices(&mut self) {
        let gone = self.notices.expire(self.now.ms);
        if !gone.is_empty() {
            self.notices_changed(&gone, "expired");
        }
    }

    fn notices_changed(&mut self, gone: &[Notice], reason: &str) {
        self.save_notices();
        for n in gone {
            self.lifecycle(
                Event::new("notice-cleared")
                    .field("id", &n.id)
                    .field("identity", &n.identity)
                    .field("kind", &n.kind)
                    .field("count", n.count.to_string())
                    .field("reason", reason),
            );
        }
    }

    fn save_notices(&self) {
        if let Err(e) = self.notices.save(&self.paths) {
            log::warn!(
                "notices: cannot write {}: {e}; list and status may show an old board",
                notices::file(&self.paths).display()
            );
        }
    }
}

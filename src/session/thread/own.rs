//! The session thread's side of iapeer's own text in the composer (issue 26 items 8 and
//! 5 (c), [`crate::session::own_text`]): a composer holding what iapeer pasted — put back by
//! the runtime after an interrupt, a cut paste, a paste whose Enter never took — is cleared
//! with the runtime's own keys ([`crate::session::clear`]) before the next delivery, never
//! taken for a human's draft and never glued to the next message.

use super::*;
use crate::session::clear::{ClearStep, Clearing};
use crate::session::own_text::Own;

impl Session {
    /// Which of iapeer's own pastes the composer holds now, if that is what it holds.
    pub(super) fn own_text_in_composer(&self, now: Instant) -> Option<Own> {
        let content = self.cfg.adapter.composer_content(&self.screen)?;
        self.own.find(&self.cfg.adapter.pasted_form(&content), now)
    }

    /// Whether the next delivery must wait for iapeer's own text: the composer is being
    /// cleared, a cut paste's rest is still being written or drawn, an interrupted prompt may
    /// still come back; or the composer holds own text that is settled and is now being
    /// cleared (`own`: what it holds).
    pub(super) fn waits_for_own_text(&mut self, own: Option<Own>, now: Instant) -> bool {
        if self.clearing.is_some() {
            return true;
        }
        let shown = self.cfg.adapter.composer_content(&self.screen).is_some();
        let busy = self.cfg.adapter.is_busy(&self.screen);
        if self.own.waits_for_cut(now, shown) || self.own.waits_for_restore(now, busy, shown) {
            return true;
        }
        own.is_some_and(|o| o.settled && self.begin_clearing(o.id, now))
    }

    /// Start clearing the composer of delivery `id`'s text; false when the runtime has no
    /// keys for it (its own text then holds messages like a draft).
    fn begin_clearing(&mut self, id: u64, now: Instant) -> bool {
        let Some(keys) = self.cfg.adapter.clear_keys() else {
            return false;
        };
        log::info!(
            "{}: the composer holds iapeer's own text (delivery {id}), not a draft; clearing it",
            self.cfg.identity
        );
        self.own.seen_back();
        self.clearing = Some((Clearing::new(keys, now), id));
        true
    }

    /// Drive the clearing in progress; with none, look for own text after an interrupt or a
    /// cut paste ([`crate::session::own_text::Tracker::watching`]).
    pub(super) fn poll_clearing(&mut self, now: Instant) {
        if self.own.on_written(self.out_written, now) {
            log::info!(
                "{}: the rest of a cut paste is written; iapeer clears it from the composer once it \
                 shows there alone (a person's typing beside it is left alone)",
                self.cfg.identity
            );
        }
        let Some((_, id)) = self.clearing.as_ref() else {
            if self.delivery.is_none()
                && self.held.is_none()
                && matches!(self.state, State::Ready)
                && self.own.watching(now)
            {
                if let Some(own) = self.own_text_in_composer(now).filter(|o| o.settled) {
                    self.begin_clearing(own.id, now);
                }
            }
            return;
        };
        let id = *id;
        let content = self.cfg.adapter.composer_content(&self.screen);
        if let Some(text) = &content {
            let text = self.cfg.adapter.pasted_form(text);
            if self.own.find(&text, now).is_none_or(|o| o.id != id) {
                log::info!(
                    "{}: the composer changed while iapeer cleared its own text (delivery {id}); \
                     left alone",
                    self.cfg.identity
                );
                self.clearing = None;
                return;
            }
        }
        let busy = self.cfg.adapter.is_busy(&self.screen);
        let Some((clearing, _)) = self.clearing.as_mut() else {
            return;
        };
        match clearing.poll(now, content.is_none(), busy, self.screen.text()) {
            ClearStep::Wait => {}
            ClearStep::Write(keys) => self.write_child(&keys),
            ClearStep::Cleared => {
                self.clearing = None;
                self.own.forget(id);
                log::info!(
                    "{}: cleared iapeer's own text (delivery {id}) from the composer",
                    self.cfg.identity
                );
                self.emit(EventKind::ComposerCleared { id });
                if let Some(h) = self.held.as_mut() {
                    h.next_check = now;
                }
            }
            ClearStep::GaveUp => {
                self.clearing = None;
                self.own.forget(id);
                log::warn!(
                    "{}: the composer still holds iapeer's own text (delivery {id}) after {} \
                     tries to clear it; it now holds messages like a draft",
                    self.cfg.identity,
                    crate::session::clear::TRIES
                );
            }
        }
    }
}

//! The session thread's side of a tool's permission prompt on a live agent's screen (spec 10
//! §4, issue 32 item 4; [`crate::session::prompts`]): each one that opens or closes is
//! reported to the router, which asks a human; the answer comes back as
//! [`SessionCmd::AnswerPrompt`] and is keyed in one key at a time, spaced by the adapter's
//! key gap. While a prompt is open no delivery is pasted (its Enter would answer it), and
//! the session counts as mid-turn.

use super::*;
use crate::adapter::PermissionAnswer;
use crate::session::prompts::Report;

impl Session {
    /// Read the screen for a permission prompt (a live agent on a pty only), report what
    /// opened or closed, and write the next key of an answer being keyed in.
    pub(super) fn watch_prompts(&mut self, now: Instant) {
        if !matches!(self.state, State::Ready) || !matches!(self.io, Io::Pty(_)) {
            return;
        }
        let shown = self.cfg.adapter.permission_prompt(&self.screen);
        let reports = self.prompts.look(shown, now);
        self.report_prompts(reports, now);
        if let Some(step) = self.prompts.key(now) {
            let bytes = crate::term::encode_keys(&[step.key_name()], false).unwrap_or_default();
            log::info!(
                "{}: answering the permission prompt: {}",
                self.cfg.identity,
                step.key_name()
            );
            self.write_child(&bytes);
        }
    }

    /// Report to the router each prompt that opened or closed (`reports`, in order); a
    /// closed one lets a message held behind it go on.
    fn report_prompts(&mut self, reports: Vec<Report>, now: Instant) {
        let hooked = self.cfg.gated && self.cfg.adapter.gated_by_hook();
        for report in reports {
            match report {
                Report::Opened(n, prompt) => {
                    log::info!(
                        "{}: permission prompt {n} open: {}: {}{}",
                        self.cfg.identity,
                        prompt.tool,
                        crate::visible::line(&prompt.summary),
                        if hooked {
                            " (its permission hook asks a human)"
                        } else {
                            ""
                        }
                    );
                    self.emit(EventKind::PromptOpened { n, prompt, hooked });
                }
                Report::Closed(n, how) => {
                    log::info!(
                        "{}: permission prompt {n} closed ({how:?})",
                        self.cfg.identity
                    );
                    self.emit(EventKind::PromptClosed { n, how });
                    // A message held behind it goes on now; the composer's own hold limit
                    // counts from here.
                    if let Some(h) = self.held.as_mut() {
                        h.next_check = now;
                        h.since = now;
                    }
                }
            }
        }
    }

    /// [`SessionCmd::AnswerPrompt`]: key in option `choice` of prompt `n`, if it is still
    /// open.
    pub(super) fn answer_prompt(&mut self, n: u64, choice: usize) {
        let now = self.now;
        let how = match self.prompts.open() {
            Some((m, p)) if m == n => self.cfg.adapter.answer_permission(&self.cfg.cwd, p, choice),
            _ => PermissionAnswer::Keys,
        };
        match how {
            PermissionAnswer::Taken if self.prompts.answered_by_runtime(n, choice, now) => {
                log::info!(
                    "{}: permission prompt {n} answered through the runtime's own API",
                    self.cfg.identity
                );
                return;
            }
            PermissionAnswer::NotTaken => {
                log::warn!(
                    "{}: the runtime's API did not take the answer to permission prompt {n}, \
                     and its screen takes no keys for it: asked again",
                    self.cfg.identity
                );
                let reports = self.prompts.not_taken(n, now);
                self.report_prompts(reports, now);
                return;
            }
            _ => {}
        }
        if !self.prompts.answer(n, choice, now) {
            log::info!(
                "{}: permission prompt {n} closed before its answer came; nothing keyed",
                self.cfg.identity
            );
            return;
        }
        self.watch_prompts(now);
    }

    /// Whether the watch is due for a look without new output.
    pub(super) fn prompts_due(&self, now: Instant) -> bool {
        self.prompts.next_deadline().is_some_and(|at| at <= now)
    }

    /// What a delivery held now waits for: `Some` (an approval, with its tool and request)
    /// while a permission prompt is open.
    pub(super) fn awaited_prompt(&self) -> Option<String> {
        self.prompts
            .open()
            .map(|(_, p)| crate::session::hold::awaited_approval(&p.tool, &p.summary))
    }
}

//! The session thread's work on the child: boot (dialogs, readiness, the MCP wait),
//! deliveries and compaction.

use super::*;

/// How soon a delivery waiting behind a dialog it answered looks at the screen again.
const DIALOG_RECHECK: Duration = Duration::from_millis(150);

/// The key for a human's choice `index` of the boot menu with `labels`, while that very menu
/// is `shown`: a marker move or Enter, or a wait while it is mid-redraw; `None` once another
/// screen (or none) shows.
fn human_menu_step(
    shown: Option<&crate::term::menu::Menu>,
    index: usize,
    labels: &[String],
) -> Option<crate::adapter::BootStep> {
    let shown = shown.filter(|m| m.options.iter().map(|o| &o.label).eq(labels.iter()))?;
    Some(match crate::term::menu::step_to_index(shown, index) {
        Some(step) => crate::adapter::BootStep::Key {
            bytes: crate::term::encode_keys(&[step.key_name()], false).unwrap_or_default(),
            label: format!(
                "the boot menu as a human chose: {}. {} ({})",
                index + 1,
                labels[index],
                step.key_name()
            ),
        },
        None => crate::adapter::BootStep::Wait,
    })
}

impl Session {
    pub(super) fn evaluate_boot(&mut self, now: Instant) {
        let Some(boot) = self.state.boot_mut() else {
            return;
        };
        let rows = self.screen.rows();
        let marker = self
            .cfg
            .adapter
            .prompt_glyph()
            .and_then(|g| g.chars().next());
        let menu = marker.and_then(|m| crate::term::menu::find_menu_with(rows, m));
        // A human's choice for a menu the adapter does not know goes first, while that very
        // menu (the same labels) shows; mid-redraw (no single marker) it waits. Once the
        // menu is gone the choice is spent.
        let chosen = self
            .menu_answer
            .as_ref()
            .and_then(|(index, labels)| human_menu_step(menu.as_ref(), *index, labels));
        let answering = chosen.is_some();
        if !answering {
            self.menu_answer = None;
        }
        let step = chosen.unwrap_or_else(|| self.cfg.adapter.boot_step(&self.screen));
        let hash = hash_text(self.screen.text());
        // Only a menu the adapter has no key for counts as unknown: not one whose key is
        // held for the key gap or sent again after KEY_RETRY (a slow dialog under load), nor
        // one a human's answer is being keyed into.
        let adapter_waits = !answering && matches!(step, crate::adapter::BootStep::Wait);
        let open = menu.filter(|m| adapter_waits && m.cursor.is_some());
        let action = boot.evaluate(now, step, hash);
        let ask = boot.unanswered_menu(now, open.is_some(), hash);
        let ready_since = boot.ready_since();
        match action {
            BootAction::Wait => {
                if let Some(m) = open.filter(|_| ask) {
                    boot.wait_for_human(now, self.cfg.human_wait);
                    self.emit(EventKind::Phase(
                        "waiting for a human to answer a dialog iapeer does not know \
                         (iapeer approvals)"
                            .into(),
                    ));
                    self.emit(EventKind::BootMenu {
                        question: crate::term::menu::question_of(rows, &m),
                        cursor: m.cursor.unwrap_or(0),
                        options: m.options.into_iter().map(|o| o.label).collect(),
                    });
                }
            }
            BootAction::Key { bytes, label } => {
                self.emit(EventKind::Phase(format!("answering dialog: {label}")));
                self.write_child(&bytes);
            }
            // Ready once the agent's MCP client listed the tools: the first message is pasted
            // then, and its Enter waits out the adapter's MCP settle (`start_delivery`).
            BootAction::Ready
                if self.mcp_up_at.is_none()
                    && self.cfg.adapter.waits_for_mcp(&self.cfg.cwd)
                    && !self.mcp_grace_over(now) => {}
            BootAction::Ready => {
                if self.mcp_up_at.is_none() && self.mcp_wait_since.is_some() {
                    self.emit(EventKind::Phase(
                        "ready without MCP: the agent's iapeer server did not connect".into(),
                    ));
                }
                let since = |t: Option<Instant>| {
                    t.map(|t| now.saturating_duration_since(t).as_millis() as u64)
                };
                let waits = crate::session::handle::ReadyWaits {
                    screen_ms: since(ready_since).unwrap_or(0),
                    mcp_ms: since(self.mcp_up_at),
                };
                self.state.boot_done();
                if let Some((rows, cols)) = self.pending_size.take() {
                    self.resize(rows, cols);
                }
                self.emit(EventKind::Ready(waits));
                self.next_delivery();
            }
            BootAction::Failed(failure) => self.fail_boot(failure),
        }
    }

    /// End the boot as failed: tell the router (with the screen), fail the waiting
    /// deliveries, end the session.
    fn fail_boot(&mut self, failure: crate::session::boot::BootFailure) {
        let screen = self.screen.tail_text(EXIT_TAIL);
        let cause = failure.cause();
        self.emit(EventKind::BootFailed {
            failure: failure.clone(),
            screen,
            width: self.screen_width(),
        });
        self.fail_deliveries(DeliveryFailure::BootFailed(failure));
        self.kill(cause);
        // Stop evaluating: the session is ending.
        self.state.boot_done();
    }

    /// [`SessionCmd::AnswerBootMenu`]: key in the human's choice, or fail the boot.
    pub(super) fn answer_boot_menu(&mut self, answer: Result<(usize, Vec<String>), String>) {
        if !matches!(self.state, State::Booting(_)) {
            return;
        }
        match answer {
            Ok(choice) => {
                self.menu_answer = Some(choice);
                self.evaluate_boot(self.now);
            }
            Err(reason) => self.fail_boot(crate::session::boot::BootFailure::Refused(reason)),
        }
    }

    /// When the adapter's [`crate::adapter::Adapter::mcp_settle`] after the agent's MCP
    /// client listed the tools ends, if that is still ahead: no Enter goes before it.
    fn mcp_settle_end(&self, now: Instant) -> Option<Instant> {
        self.mcp_up_at
            .map(|at| at + self.cfg.adapter.mcp_settle())
            .filter(|end| *end > now)
    }

    /// Start (or check) the wait for the MCP client; true once [`MCP_GRACE`] is over.
    pub(super) fn mcp_grace_over(&mut self, now: Instant) -> bool {
        match self.mcp_wait_since {
            None => {
                self.mcp_wait_since = Some(now);
                self.emit(EventKind::Phase(
                    "waiting for the agent's tools (its iapeer MCP server)".into(),
                ));
                false
            }
            Some(since) => now >= since + MCP_GRACE,
        }
    }

    pub(super) fn next_delivery(&mut self) {
        if self.delivery.is_some() || self.held.is_some() || !matches!(self.state, State::Ready) {
            return;
        }
        let Some(d) = self.queued.pop_front() else {
            return;
        };
        // Never paste after someone's draft (spec 05 §7). A wake's first message meets a
        // fresh composer and is not held.
        let pty = matches!(self.io, Io::Pty(_));
        if pty && d.ready_gate.is_none() {
            // A permission prompt takes the keys (its Enter would answer it `Yes`): the
            // message waits for a human's answer (issue 32 item 4).
            if let Some(awaited) = self.awaited_prompt() {
                self.answer_held(
                    d.id,
                    &format!("a permission prompt is open, waiting for {awaited}"),
                    crate::protocol::QueuedBy::Approval,
                );
                self.hold(d, super::super::hold::RECHECK, true);
                return;
            }
            // A menu over the composer would take the paste and its Enter: answer it first.
            if self.answer_live_dialog() {
                self.hold(d, DIALOG_RECHECK, false);
                return;
            }
            // iapeer's own text there is no draft: cleared first (issue 26 items 8, 5 (c)).
            let now = self.now;
            let own = self.own_text_in_composer(now);
            if self.waits_for_own_text(own, now) {
                self.hold(d, super::super::clear::POLL, false);
                return;
            }
            // Text nobody typed there is no draft either: cleared first, as at boot
            // ([`Session::clear_leftovers`], from the held delivery's check).
            if self.cfg.adapter.composer_leftovers(&self.screen).is_some() {
                self.hold(d, Duration::ZERO, false);
                return;
            }
            if let Some(draft) = self.cfg.adapter.composer_draft(&self.screen) {
                use super::super::hold::{is_residue, RECHECK, RESIDUE_RECHECK};
                let residue = own.is_some_and(|o| !o.settled)
                    || is_residue(
                        self.last_paste.as_ref(),
                        &self.cfg.adapter.pasted_form(&draft),
                        now,
                    );
                if !residue {
                    let why = format!(
                        "the composer holds a draft ({} chars)",
                        draft.chars().count()
                    );
                    self.answer_held(d.id, &why, crate::protocol::QueuedBy::Composer);
                }
                self.hold(d, if residue { RESIDUE_RECHECK } else { RECHECK }, !residue);
                return;
            }
        }
        self.start_delivery(d);
    }

    /// Hold `d` from now, to be checked again `recheck` later; `answered`: its sender was
    /// answered `queued` ([`super::super::hold::Held`]).
    fn hold(&mut self, d: super::super::handle::Delivery, recheck: Duration, answered: bool) {
        self.held = Some(super::super::hold::Held {
            delivery: d,
            since: self.now,
            next_check: self.now + recheck,
            answered,
        });
    }

    /// Write one key towards the safe answer of the menu the runtime shows over its composer
    /// ([`crate::adapter::Adapter::live_dialog`]); true while such a menu is up.
    fn answer_live_dialog(&mut self) -> bool {
        match self.cfg.adapter.live_dialog(&self.screen) {
            None => false,
            Some(crate::adapter::BootStep::Key { bytes, label }) => {
                log::info!(
                    "{}: a dialog is open over the composer; answering it before delivering: \
                     {label}",
                    self.cfg.identity
                );
                self.emit(EventKind::Phase(format!("answering dialog: {label}")));
                self.write_child(&bytes);
                true
            }
            Some(_) => true,
        }
    }

    /// Tell delivery `id`'s sender that it waits (`why`, for the log) in the session's hold
    /// (`by`: behind a draft, or a permission prompt), as the first of the messages waiting
    /// there; then the messages queued behind it are answered too
    /// ([`Session::answer_those_behind_the_draft`]).
    fn answer_held(&mut self, id: u64, why: &str, by: crate::protocol::QueuedBy) {
        log::info!("{}: {why}; delivery {id} waits for it", self.cfg.identity);
        if self.answered_queued.insert(id) {
            self.emit(EventKind::Queued {
                id,
                by,
                depth: Some(1),
            });
        }
        self.answer_those_behind_the_draft();
    }

    /// While a draft holds a message, every message queued behind it in this session waits
    /// for the composer too: its sender is answered `queued` (composer, its place in line
    /// as the depth) at once instead of waiting, unanswered, for the draft to go (spec 05
    /// §7: each message is held; each sender gets `queued`). Their outcomes follow as the
    /// held one's does ([`EventKind::QueueOutcome`]).
    pub(super) fn answer_those_behind_the_draft(&mut self) {
        if !self.held.as_ref().is_some_and(|h| h.answered) {
            return;
        }
        let waiting: Vec<(u64, u64)> = self
            .queued
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id, i as u64 + 2))
            .filter(|(id, _)| !self.answered_queued.contains(id))
            .collect();
        let by = if self.awaited_prompt().is_some() {
            crate::protocol::QueuedBy::Approval
        } else {
            crate::protocol::QueuedBy::Composer
        };
        for (id, depth) in waiting {
            self.answered_queued.insert(id);
            self.emit(EventKind::Queued {
                id,
                by,
                depth: Some(depth),
            });
        }
    }

    /// A held delivery's turn: deliver once the composer is free, fail past the limit.
    pub(super) fn check_held(&mut self, now: Instant) {
        use super::super::hold::{hold_step, is_residue, HoldStep, RECHECK, RESIDUE_RECHECK};
        let Some(h) = self.held.as_ref() else {
            return;
        };
        if now < h.next_check {
            return;
        }
        let (since, id, answered) = (h.since, h.delivery.id, h.answered);
        if let Some(awaited) = self.awaited_prompt() {
            // Bounded by the approval's own timeout, which denies and closes the prompt.
            let limit = self.cfg.composer_hold + self.cfg.human_wait;
            if let HoldStep::GiveUp(reason) =
                super::super::hold::approval_step(&awaited, since, now, limit)
            {
                if let Some(h) = self.held.take() {
                    self.report_delivery(h.delivery.id, Err(reason));
                }
                return self.next_delivery();
            }
            if !answered {
                let why = format!("a permission prompt is open, waiting for {awaited}");
                self.answer_held(id, &why, crate::protocol::QueuedBy::Approval);
            }
            if let Some(h) = self.held.as_mut() {
                h.answered = true;
                h.next_check = now + RECHECK;
            }
            return self.still_held();
        }
        if self.answer_live_dialog() {
            if now.saturating_duration_since(since) < self.cfg.composer_hold {
                if let Some(h) = self.held.as_mut() {
                    h.next_check = now + DIALOG_RECHECK;
                }
                return;
            }
            if let Some(h) = self.held.take() {
                self.report_delivery(h.delivery.id, Err(DeliveryFailure::DialogOpen));
            }
            return self.next_delivery();
        }
        if self.cut_rest_stalled(now) {
            if let Some(h) = self.held.take() {
                let idle = self.cfg.stall;
                self.refuse_unread(h.delivery.id, DeliveryFailure::StalledBehindCut { idle });
            }
            return self.next_delivery();
        }
        let own = self.own_text_in_composer(now);
        if self.waits_for_own_text(own, now) {
            if let Some(h) = self.held.as_mut() {
                h.next_check = now + super::super::clear::POLL;
            }
            return;
        }
        if self.clear_leftovers(now) {
            return;
        }
        let draft = self.cfg.adapter.composer_draft(&self.screen);
        match hold_step(draft.as_deref(), since, now, self.cfg.composer_hold) {
            HoldStep::Wait => {
                let residue = own.is_some_and(|o| !o.settled)
                    || draft.as_deref().is_some_and(|t| {
                        let t = self.cfg.adapter.pasted_form(t);
                        is_residue(self.last_paste.as_ref(), &t, now)
                    });
                if !residue && !answered {
                    let chars = draft.map_or(0, |t| t.chars().count());
                    let why = format!("the composer holds a draft ({chars} chars)");
                    self.answer_held(id, &why, crate::protocol::QueuedBy::Composer);
                }
                if let Some(h) = self.held.as_mut() {
                    h.answered |= !residue;
                    h.next_check = now + if residue { RESIDUE_RECHECK } else { RECHECK };
                }
                self.still_held();
            }
            HoldStep::Deliver => {
                if let Some(h) = self.held.take() {
                    self.start_delivery(h.delivery);
                }
            }
            HoldStep::GiveUp(reason) => {
                if let Some(h) = self.held.take() {
                    self.report_delivery(h.delivery.id, Err(reason));
                }
                self.next_delivery();
            }
        }
    }

    /// Clear text nobody typed from the composer before the held delivery
    /// ([`super::super::hold::leftovers_step`]): press the runtime's key, wait, or fail the
    /// delivery when the key did not clear it. False when there is nothing to clear now (the
    /// composer hold decides).
    fn clear_leftovers(&mut self, now: Instant) -> bool {
        use super::super::hold::{leftovers_step, LeftoversStep};
        let found = self.cfg.adapter.composer_leftovers(&self.screen);
        let busy = self.cfg.adapter.is_busy(&self.screen);
        let Some(step) = leftovers_step(found, busy, &mut self.leftover_presses, now) else {
            return false;
        };
        match step {
            LeftoversStep::Press { bytes, label } => {
                log::info!(
                    "{}: {label}: nobody typed it, no draft; clearing it before the delivery",
                    self.cfg.identity
                );
                self.write_child(&bytes);
            }
            LeftoversStep::Wait => {}
            LeftoversStep::GiveUp(what) => {
                let reason = DeliveryFailure::UnclearedComposer(what);
                log::warn!("{}: {reason}", self.cfg.identity);
                if let Some(h) = self.held.take() {
                    self.report_delivery(h.delivery.id, Err(reason));
                }
                self.next_delivery();
                return true;
            }
        }
        if let Some(h) = self.held.as_mut() {
            h.next_check = now + super::super::clear::POLL;
        }
        true
    }

    /// A held delivery was looked at again and stays held (behind a draft or an open
    /// permission prompt): the `session-held:<identity>` test event (`daemon::test_hooks`).
    fn still_held(&self) {
        crate::config::test_events::emit(format_args!("session-held:{}", self.cfg.identity));
    }

    /// The end of the in-flight delivery whose bytes are `span`. A failure after some of its
    /// bytes reached the child's input is [`EventKind::Unconfirmed`]: it may have arrived
    /// (issue 26 item 5). Otherwise [`Session::report_delivery`].
    pub(super) fn finish_in_flight(&mut self, span: Span, result: Result<(), DeliveryFailure>) {
        let id = span.id;
        if let Err(reason) = &result {
            if span.begun(id, self.out_written) {
                self.answered_queued.remove(&id);
                return self.emit(EventKind::Unconfirmed {
                    id,
                    reason: reason.to_string(),
                });
            }
        }
        self.report_delivery(id, result);
    }

    /// The end of delivery `id` as it is known: its `Delivered` answer, or — when its sender
    /// was already answered `queued` — its `QueueOutcome`.
    pub(super) fn report_delivery(&mut self, id: u64, result: Result<(), DeliveryFailure>) {
        if self.answered_queued.remove(&id) {
            self.emit(EventKind::QueueOutcome { id, result });
        } else {
            self.emit(EventKind::Delivered {
                id,
                result,
                taken_ms: None,
            });
        }
    }

    /// Delivery `id` confirmed, the runtime having taken it at `taken_ms` (epoch ms, when
    /// known: [`crate::session::deliver::ActiveDelivery::taken_ms`]):
    /// [`Session::report_delivery`] with that time.
    fn report_taken(&mut self, id: u64, taken_ms: Option<u64>) {
        if self.answered_queued.contains(&id) {
            return self.report_delivery(id, Ok(()));
        }
        self.emit(EventKind::Delivered {
            id,
            result: Ok(()),
            taken_ms,
        });
    }

    fn start_delivery(&mut self, d: Delivery) {
        if d.ready_gate.is_some() {
            self.emit(EventKind::Phase("delivering".into()));
        }
        let confirmer = self
            .cfg
            .adapter
            .confirmer(&self.cfg.cwd, &d.text, d.agent_ts.as_deref());
        let before = d
            .ready_gate
            .and_then(|_| self.cfg.adapter.activity_ms(&self.cfg.cwd));
        let pty = matches!(self.io, Io::Pty(_));
        let gate = d
            .ready_gate
            .and_then(|_| self.cfg.adapter.gate_watch(&self.cfg.cwd));
        // Known on screen and in the composer as the runtime shows it (a TAB as spaces, …).
        let pasted = crate::term::paste_text(&d.text);
        let shown = self.cfg.adapter.pasted_form(&pasted);
        let paste = crate::term::paste_view::PasteView::shown(&pasted, &shown);
        if pty {
            self.own.pasting_shown(d.id, &pasted, &shown, self.now);
        }
        let (mut active, bytes) = ActiveDelivery::start(&d, pty, confirmer, before, gate);
        if !self.cfg.adapter.has_paste_sign() {
            active = active.without_paste_sign();
        }
        active = active.enter_after_sign(self.cfg.adapter.enter_after_paste_sign());
        if let Some(every) = self.cfg.adapter.enter_retry() {
            active = active.enter_retry(every);
        }
        if let Some(end) = self.mcp_settle_end(self.now) {
            active = active.hold_enter_until(end);
        }
        // Recorded before the first byte: a daemon killed mid-paste still knows at its next
        // start that this message may have arrived, and never writes it again.
        if let (Some(key), Some(ids)) = (&d.key, &self.cfg.ids) {
            if let Err(e) = ids.begun(&self.cfg.identity, key) {
                log::warn!(
                    "{}: cannot record message id {} as begun: {e}; after a daemon restart a \
                     retry with that id may deliver it again",
                    self.cfg.identity,
                    key.id
                );
            }
        }
        let span = Span {
            id: d.id,
            start: self.out_queued,
            end: self.out_queued + bytes.len() as u64,
        };
        self.delivery = Some(InFlight {
            active,
            span,
            paste,
        });
        self.out_progress_at = self.now;
        self.write_child(&bytes);
    }

    /// Delivery `d` ended now: remember its paste as the last one.
    fn end_paste(&mut self, d: &ActiveDelivery, view: crate::term::paste_view::PasteView) {
        self.own.ended(d.id, d.enter_written(), self.now);
        self.last_paste = Some(super::super::hold::LastPaste {
            ended: self.now,
            view,
        });
    }

    pub(super) fn apply(&mut self, step: Step) {
        match step {
            Step::Wait => {}
            Step::Write(bytes) => self.write_child(&bytes),
            Step::Done(result) => {
                let mut silent = result.is_err();
                if let Some(InFlight {
                    active: d,
                    span,
                    paste,
                }) = self.delivery.take()
                {
                    let refused = d.refused_by_runtime();
                    silent &= !refused;
                    self.end_paste(&d, paste);
                    let pty = matches!(self.io, Io::Pty(_));
                    match result {
                        Err(reason) if refused && !self.answered_queued.contains(&d.id) => self
                            .emit(EventKind::Refused {
                                id: d.id,
                                reason: reason.to_string(),
                            }),
                        // The runtime said it will not take it: known, whatever was written.
                        result if refused => self.report_delivery(d.id, result),
                        // A wake whose first message went unconfirmed: the screen says why
                        // (issue 32 item 1: Codex's "open in another app").
                        Err(reason) if pty && d.is_wake_first() => {
                            let screen = self.screen.tail_text(EXIT_TAIL);
                            let reason = reason.with_screen(&screen, self.screen_width());
                            self.finish_in_flight(span, Err(reason));
                        }
                        Ok(()) if pty => {
                            self.report_taken(span.id, d.taken_ms());
                            self.follow_turn(d.into_turn(self.now));
                        }
                        result => self.finish_in_flight(span, result),
                    }
                }
                if silent && matches!(self.io, Io::Pipes { .. }) {
                    // A pipe runtime that did not acknowledge (the human inbox writer could
                    // not store the message in time): its input stream is in an unknown
                    // state, so end it; the always-on supervisor starts a fresh one and the
                    // router holds the message for it (spec 05 §8). A write failure means
                    // the child is gone already. One that answered it cannot take the
                    // message (`failed <id> <reason>`) goes on to the next.
                    self.kill(Cause::KilledByDaemon);
                    return;
                }
                self.next_delivery();
            }
            Step::Gate => {
                if let Some(InFlight {
                    active: d,
                    span,
                    paste,
                }) = self.delivery.take()
                {
                    self.end_paste(&d, paste);
                    let taken = d.taken_ms();
                    let (gate, turn) = d.into_gate(self.now);
                    self.gate = Some(gate);
                    self.report_taken(span.id, taken);
                    self.follow_turn(turn);
                }
                self.next_delivery();
            }
            Step::Queued => {
                if let Some(InFlight {
                    active: d, paste, ..
                }) = self.delivery.take()
                {
                    self.end_paste(&d, paste);
                    // A held message's sender already has its `queued` answer; its follower
                    // reports the outcome either way.
                    if !self.answered_queued.remove(&d.id) {
                        self.emit(EventKind::Queued {
                            id: d.id,
                            by: crate::protocol::QueuedBy::Runtime,
                            depth: None,
                        });
                    }
                    self.followers.push(d.into_follower(self.now));
                }
                self.next_delivery();
            }
        }
    }

    /// Check the messages the runtime queued; report each whose fate is known.
    pub(super) fn poll_followers(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.followers.len() {
            let screen = &self.screen;
            match self.followers[i].poll(now, || screen.text()) {
                Some(result) => {
                    let f = self.followers.swap_remove(i);
                    let taken = result.is_ok();
                    self.emit(EventKind::QueueOutcome { id: f.id, result });
                    if taken {
                        self.follow_turn(f.into_turn(now));
                    }
                }
                None => i += 1,
            }
        }
    }

    /// Follow the ready gate of the wake's first message; report its outcome once known.
    pub(super) fn poll_gate(&mut self, now: Instant) {
        let Some(g) = self.gate.as_mut() else {
            return;
        };
        let (adapter, cwd, screen) = (&self.cfg.adapter, &self.cfg.cwd, &self.screen);
        if let Some(result) = g.poll(now, || adapter.activity_ms(cwd), || screen.text()) {
            let id = g.id;
            self.gate = None;
            self.emit(EventKind::GateOutcome {
                id,
                result,
                quiet: false,
            });
        }
    }

    /// The session is over (`cause`): one last look at the ready gate, else it fails. An end
    /// on purpose (stop, new, shutdown…) is only logged: the sender is not told the model
    /// failed when someone ended the session. Nor when the message's turn is followed: the
    /// runtime took it, and the end cut its turn off ([`Session::cut_turns`] tells; a model
    /// that streams a long first answer writes no record before its end, so the gate cannot
    /// tell "not started" from "cut off").
    pub(super) fn end_gate(&mut self, cause: Cause) {
        let Some(mut g) = self.gate.take() else {
            return;
        };
        let (adapter, cwd, screen) = (&self.cfg.adapter, &self.cfg.cwd, &self.screen);
        let result = g
            .last_look(|| adapter.activity_ms(cwd), || screen.text())
            .unwrap_or_else(|| {
                Err(if cause.expected() {
                    GateFailure::EndedFirst(cause)
                } else {
                    GateFailure::SessionEnded
                })
            });
        let cut = self.turns.iter().any(|t| t.id == g.id);
        self.emit(EventKind::GateOutcome {
            id: g.id,
            result,
            quiet: cause.expected() || cut,
        });
    }

    /// The session is over: one last look at each runtime-queued message (it may have reached
    /// the model just before the end), then fail the rest with `reason`.
    pub(super) fn end_followers(&mut self, reason: DeliveryFailure) {
        for mut f in std::mem::take(&mut self.followers) {
            let screen = &self.screen;
            let result = f
                .poll(f.next_deadline(), || screen.text())
                .unwrap_or_else(|| Err(reason.clone()));
            let taken = result.is_ok();
            self.emit(EventKind::QueueOutcome { id: f.id, result });
            if taken {
                // It reached the model just before the end: its turn was cut too.
                self.follow_turn(f.into_turn(self.now));
            }
        }
    }

    pub(super) fn fail_deliveries(&mut self, reason: DeliveryFailure) {
        if let Some(f) = self.delivery.take() {
            self.finish_in_flight(f.span, Err(reason.clone()));
        }
        if let Some(h) = self.held.take() {
            self.report_delivery(h.delivery.id, Err(reason.clone()));
        }
        while let Some(d) = self.queued.pop_front() {
            self.report_delivery(d.id, Err(reason.clone()));
        }
    }

    pub(super) fn on_time(&mut self, now: Instant) {
        self.write_late_answers(now);
        if self.state.boot().is_some() {
            self.evaluate_boot(now);
        }
        if self.prompts_due(now) {
            self.watch_prompts(now);
        }
        if self.stall_at().is_some_and(|at| now >= at) {
            if let Some(id) = self.delivery.as_ref().map(|f| f.active.id) {
                self.end_writing(id, Some(self.cfg.stall));
            }
        }
        if let Some(d) = self.delivery.as_mut().map(|f| &mut f.active) {
            let adapter = self.cfg.adapter.clone();
            let screen = &self.screen;
            let settling = d.is_settling();
            let step = d.poll(now, || screen.text());
            if settling
                && !d.is_settling()
                && !d.paste_was_shown()
                && adapter.prompt_glyph().is_some()
            {
                // Enter on the fallback clock: worth knowing when it happens (issue 13 item 1).
                let row = adapter
                    .prompt_glyph()
                    .and_then(|g| self.screen.composer_text(g))
                    .map(|c| c.text.chars().take(60).collect::<String>());
                log::info!(
                    "{}: delivery {}: the composer did not show the paste within {} ms (its row: {row:?}); Enter anyway",
                    self.cfg.identity,
                    d.id,
                    super::super::deliver::PASTE_SIGNAL_WAIT.as_millis()
                );
            }
            self.apply(step);
        }
        self.poll_followers(now);
        self.poll_gate(now);
        self.poll_turns(now);
        self.poll_clearing(now);
        self.check_held(now);
        self.clear_before_compact(now);
        if let Some(c) = self.compact.as_mut() {
            match c.poll(now, self.screen.text()) {
                CompactStep::Wait => {}
                CompactStep::Write(bytes) => self.write_child(&bytes),
                CompactStep::Done(result) => {
                    let id = c.id;
                    self.compact = None;
                    self.emit(EventKind::Compacted { id, result });
                }
            }
        }
        if let State::Ending { kill_at, .. } = &mut self.state {
            if now >= *kill_at {
                let _ = crate::child::signal_group(self.pid, Signal::SIGKILL);
                if let Some(scope) = &mut self.scope {
                    scope.kill();
                }
                *kill_at = now + KILL_GRACE;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::human_menu_step;
    use crate::adapter::BootStep;
    use crate::term::menu::find_menu;

    fn labels(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_human_choice_is_keyed_only_into_its_own_menu() {
        let rows = ["Q?", "❯ 1. A", "  2. A", "  3. B"];
        let menu = find_menu(&rows).unwrap();
        let ours = labels(&["A", "A", "B"]);
        let key = |step: Option<BootStep>| match step {
            Some(BootStep::Key { label, .. }) => label,
            other => format!("{other:?}"),
        };
        assert!(key(human_menu_step(Some(&menu), 1, &ours)).ends_with("2. A (Down)"));
        assert!(key(human_menu_step(Some(&menu), 0, &ours)).ends_with("1. A (Enter)"));
        // Another menu, or none: the choice is spent.
        assert_eq!(human_menu_step(Some(&menu), 0, &labels(&["A", "B"])), None);
        assert_eq!(human_menu_step(None, 0, &ours), None);
        // Mid-redraw (two markers): wait.
        let torn = ["Q?", "❯ 1. A", "❯ 2. A", "  3. B"];
        let menu = find_menu(&torn).unwrap();
        assert_eq!(human_menu_step(Some(&menu), 1, &ours), Some(BootStep::Wait));
    }
}

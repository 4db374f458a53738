//! The session thread's commands from the router.

use super::*;
use crate::clock::spoken;

impl Session {
    pub(super) fn drain_commands(&mut self) {
        while let Ok(cmd) = self.cmd_rx.try_recv() {
            match cmd {
                SessionCmd::Deliver(d) => {
                    if self.state.is_ending() {
                        self.emit(EventKind::Delivered {
                            id: d.id,
                            result: Err(DeliveryFailure::SessionEnding),
                            taken_ms: None,
                        });
                    } else {
                        self.queued.push_back(d);
                        self.next_delivery();
                        self.answer_those_behind_the_draft();
                    }
                }
                SessionCmd::Interrupt(bytes) => {
                    if !self.cfg.adapter.interrupt_turn(&self.cfg.cwd) {
                        self.write_child(&bytes);
                    }
                    let restores = self.cfg.adapter.restores_interrupted_prompt();
                    self.own.interrupted(self.now, restores);
                    self.turns_interrupted();
                }
                SessionCmd::McpUp => {
                    let now = self.now;
                    self.mcp_up_at.get_or_insert(now);
                    self.evaluate_boot(now);
                }
                SessionCmd::Compact(id) => self.start_compact(id),
                SessionCmd::Attach(stream, prebuf) => self.attach(stream, prebuf),
                SessionCmd::Screen(answer) => answer(ScreenText {
                    rows: self.screen.rows().to_vec(),
                    cursor: self.screen.cursor(),
                }),
                SessionCmd::Probe => {
                    let status = self.status();
                    self.emit(EventKind::Status(status));
                }
                SessionCmd::Kill(cause) => self.kill(cause),
                SessionCmd::Cancel(id) => self.cancel_delivery(id),
                SessionCmd::AnswerBootMenu(answer) => self.answer_boot_menu(answer),
                SessionCmd::AnswerPrompt { n, choice } => self.answer_prompt(n, choice),
            }
        }
    }

    /// The sender of delivery `id` stopped waiting (see [`SessionCmd::Cancel`]).
    fn cancel_delivery(&mut self, id: u64) {
        if let Some(pos) = self.queued.iter().position(|d| d.id == id) {
            self.queued.remove(pos);
            return self.emit(EventKind::Delivered {
                id,
                result: Err(DeliveryFailure::NotReadyYet),
                taken_ms: None,
            });
        }
        // Held, its sender not answered yet (waiting out iapeer's own text in the composer, a
        // cut paste's rest, a dialog): nothing of it was written.
        if self
            .held
            .as_ref()
            .is_some_and(|h| h.delivery.id == id && !h.answered)
        {
            self.held = None;
            self.emit(EventKind::Delivered {
                id,
                result: Err(DeliveryFailure::NotReadyYet),
                taken_ms: None,
            });
            return self.next_delivery();
        }
        self.end_writing(id, None);
    }

    /// End delivery `id` while its bytes are still being written — its sender stopped
    /// waiting (`stalled` none), or the child took no byte of its input for `stalled`
    /// ([`SessionConfig::stall`]; issue 26 item 6). Not one byte written: it is taken out of
    /// the pending output whole, NOT delivered. Part written: the rest stays queued (the
    /// message arrives whole if the child reads again; cutting it would corrupt the next
    /// message), answered [`EventKind::Unconfirmed`]. Past writing: nothing to do here.
    pub(super) fn end_writing(&mut self, id: u64, stalled: Option<Duration>) {
        let Some(span) = self
            .delivery
            .as_ref()
            .filter(|f| f.active.id == id && f.active.is_writing())
            .map(|f| f.span)
        else {
            return;
        };
        match span.taken(self.out_written) {
            Taken::NotBegun { offset, len } => {
                self.to_child.drain(offset..offset + len);
                self.out_queued -= len as u64;
                self.own.forget(id);
                self.delivery = None;
                match stalled {
                    Some(idle) => self.refuse_unread(id, DeliveryFailure::Stalled { idle }),
                    None => self.report_delivery(id, Err(DeliveryFailure::NotReading)),
                }
            }
            Taken::Partial { written, len } => {
                // Its rest lands in the composer without an Enter: cleared before the next.
                self.own.cut(id, span.end);
                let idle =
                    stalled.map(|d| format!(" (it took none of its input for {})", spoken(d)));
                self.delivery = None;
                self.answered_queued.remove(&id);
                let fate = crate::session::own_text::cut_rest_fate(
                    matches!(self.io, Io::Pty(_)),
                    self.cfg.adapter.clear_keys().is_some(),
                );
                self.emit(EventKind::Unconfirmed {
                    id,
                    reason: format!(
                        "its program stopped reading its input after {written} of the message's \
                         {len} bytes{}; {fate}",
                        idle.as_deref().unwrap_or_default()
                    ),
                });
            }
            Taken::Written => return,
        }
        self.next_delivery();
    }

    /// Fail delivery `id`, none of it written, because its live session's program takes
    /// none of its input (`reason`): at once, never held for a revive (its program runs, it
    /// does not read) — unless its sender was answered `queued`, whose outcome follows.
    pub(super) fn refuse_unread(&mut self, id: u64, reason: DeliveryFailure) {
        if self.answered_queued.contains(&id) {
            self.report_delivery(id, Err(reason));
        } else {
            self.emit(EventKind::Refused {
                id,
                reason: reason.to_string(),
            });
        }
    }

    /// A cut paste's rest has waited [`SessionConfig::stall`] for the child to read any of
    /// it (issue 26 items 5 (c) and 6): a delivery held behind it fails then, not at its
    /// send deadline (never with a stall of 0).
    pub(super) fn cut_rest_stalled(&self, now: Instant) -> bool {
        !self.cfg.stall.is_zero()
            && self.own.cut_unwritten()
            && now >= self.out_progress_at + self.cfg.stall
    }

    /// When the delivery being written is ended for a child that takes none of its input
    /// ([`Session::end_writing`]): [`SessionConfig::stall`] after the child last took a byte
    /// (never with a stall of 0).
    pub(super) fn stall_at(&self) -> Option<Instant> {
        if self.cfg.stall.is_zero() {
            return None;
        }
        let f = self.delivery.as_ref()?;
        (f.active.is_writing() && self.out_written < f.span.end)
            .then(|| self.out_progress_at + self.cfg.stall)
    }

    pub(super) fn start_compact(&mut self, id: u64) {
        let refuse = |s: &Self, why: CompactFailure| {
            s.emit(EventKind::Compacted {
                id,
                result: Err(why),
            });
        };
        if !matches!(self.state, State::Ready) {
            return refuse(self, CompactFailure::NotReady);
        }
        if self.delivery.is_some() || self.compact.is_some() {
            return refuse(self, CompactFailure::Busy);
        }
        // iapeer's own text (an interrupted message put back, a cut paste) is cleared first.
        let now = self.now;
        let own = self.own_text_in_composer(now);
        if self.waits_for_own_text(own, now) {
            return refuse(self, CompactFailure::ClearingOwnText);
        }
        // Text nobody typed there (Gemini CLI's late terminal answers) is no draft: cleared
        // first with the paced presses a delivery uses ([`Session::clear_before_compact`]).
        let leftovers = self.cfg.adapter.composer_leftovers(&self.screen).is_some();
        // Never type a command into someone's draft.
        if !leftovers {
            if let Some(why) = self.compact_draft() {
                return refuse(self, why);
            }
        }
        match self.cfg.adapter.compact(&self.cfg.cwd) {
            None => refuse(
                self,
                CompactFailure::Unsupported {
                    runtime: self.cfg.adapter.name().to_string(),
                },
            ),
            Some((command, watch)) if leftovers => {
                self.compact = Some(ActiveCompact::after_clearing(id, command, watch, now));
            }
            Some((command, watch)) => {
                let (c, bytes) = ActiveCompact::start(id, command, watch);
                self.compact = Some(c);
                self.write_child(&bytes);
            }
        }
    }

    /// The refusal of a compaction whose composer holds a draft, if it does.
    fn compact_draft(&self) -> Option<CompactFailure> {
        let d = self.cfg.adapter.composer_draft(&self.screen)?;
        let shown: String = d.chars().take(40).collect();
        Some(CompactFailure::Draft { shown })
    }

    /// A compaction waiting to type its command ([`ActiveCompact::after_clearing`]): clear
    /// the composer's leftovers ([`super::super::hold::leftovers_step`], the presses a
    /// delivery makes, counted with theirs), then type the command once they are gone — or
    /// fail it when the key did not clear them, when a human's draft took their place, or
    /// when a turn kept them there for [`super::super::compact::CLEARING_LIMIT`].
    pub(super) fn clear_before_compact(&mut self, now: Instant) {
        use super::super::compact::{ClearingCheck, CLEARING_LIMIT};
        use super::super::hold::{leftovers_step, LeftoversStep};
        let Some(c) = self.compact.as_mut() else {
            return;
        };
        let id = c.id;
        let fail = |s: &mut Self, why: CompactFailure| {
            log::warn!("{}: compact: {why}", s.cfg.identity);
            s.compact = None;
            s.emit(EventKind::Compacted {
                id,
                result: Err(why),
            });
        };
        match c.clearing_due(now) {
            None => return,
            Some(ClearingCheck::GiveUp) => {
                let limit = CLEARING_LIMIT;
                return fail(self, CompactFailure::BusyWithLeftovers { limit });
            }
            Some(ClearingCheck::Look) => {}
        }
        let found = self.cfg.adapter.composer_leftovers(&self.screen);
        let there = found.is_some();
        let busy = self.cfg.adapter.is_busy(&self.screen);
        match leftovers_step(found, busy, &mut self.leftover_presses, now) {
            Some(LeftoversStep::Press { bytes, label }) => {
                log::info!(
                    "{}: {label}: nobody typed it, no draft; clearing it before compacting",
                    self.cfg.identity
                );
                self.write_child(&bytes);
            }
            Some(LeftoversStep::Wait) => {}
            Some(LeftoversStep::GiveUp(what)) => {
                fail(self, CompactFailure::UnclearedComposer(what));
            }
            // A turn runs: no key (it would interrupt the turn); look again.
            None if there => {}
            None => match self.compact_draft() {
                Some(why) => fail(self, why),
                None => {
                    let bytes = self.compact.as_mut().map(|c| c.cleared());
                    if let Some(bytes) = bytes {
                        self.write_child(&bytes);
                    }
                }
            },
        }
    }

    pub(super) fn status(&self) -> SessionStatus {
        let pty = matches!(self.io, Io::Pty(_));
        SessionStatus {
            activity_ms: self.cfg.adapter.activity_ms(&self.cfg.cwd),
            // A turn parked on a permission prompt is mid-turn too (its status line no longer
            // says so): never idle.
            busy: pty && (self.cfg.adapter.is_busy(&self.screen) || self.prompts.open().is_some()),
            attached: self.clients.values().filter(|c| c.sized).count(),
            attached_output_ms: self.attached_output_ms,
            output_ms: self.output_ms,
            api_error: if pty {
                self.cfg.adapter.api_error(&self.cfg.cwd)
            } else {
                None
            },
        }
    }

    pub(super) fn kill(&mut self, cause: Cause) {
        if self.state.is_ending() {
            return;
        }
        let _ = crate::child::signal_group(self.pid, Signal::SIGHUP);
        let _ = crate::child::signal_group(self.pid, Signal::SIGTERM);
        if let Some(scope) = &mut self.scope {
            scope.terminate();
        }
        self.state.end(cause, self.now + KILL_GRACE);
    }
}

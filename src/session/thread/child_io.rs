//! The session thread's child I/O: reading output (pane log, screen model, capability
//! answers, attached clients) and the non-blocking write queue.

use super::*;

impl Session {
    pub(super) fn read_child(&mut self, stderr: bool) {
        // On the heap, for this read only: on the stack its 64 KiB stayed resident in every
        // session thread's stack once touched (issue 31 item 4).
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let r = match &mut self.io {
                Io::Pty(m) => m.read(&mut buf),
                Io::Pipes {
                    stdout,
                    stderr: err,
                    ..
                } => {
                    let src: Option<&mut dyn Read> = if stderr {
                        err.as_mut().map(|s| s as &mut dyn Read)
                    } else {
                        stdout.as_mut().map(|s| s as &mut dyn Read)
                    };
                    match src {
                        Some(s) => s.read(&mut buf),
                        None => return,
                    }
                }
            };
            match r {
                Ok(0) => {
                    self.close_output(stderr);
                    return;
                }
                Ok(n) => {
                    let chunk = buf[..n].to_vec();
                    self.on_output(&chunk);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // EIO on Linux: every slave fd is closed (the child and its children exited).
                    self.close_output(stderr);
                    return;
                }
            }
        }
    }

    pub(super) fn close_output(&mut self, stderr: bool) {
        let reg = self.poll.registry();
        match &mut self.io {
            Io::Pty(m) => {
                let _ = reg.deregister(&mut SourceFd(&m.as_raw_fd()));
            }
            Io::Pipes {
                stdout,
                stderr: err,
                ..
            } => {
                let slot = if stderr {
                    err.take().map(|s| s.as_raw_fd())
                } else {
                    stdout.take().map(|s| s.as_raw_fd())
                };
                if let Some(fd) = slot {
                    let _ = reg.deregister(&mut SourceFd(&fd));
                }
            }
        }
    }

    pub(super) fn on_output(&mut self, chunk: &[u8]) {
        self.output_ms = Some(crate::clock::now_ms());
        self.pane.append(chunk);
        self.quiet_at = Some(self.now + QUIET_AFTER);
        if matches!(self.io, Io::Pipes { .. }) {
            self.pipe_tail.extend(chunk);
            let excess = self.pipe_tail.len().saturating_sub(EXIT_TAIL);
            self.pipe_tail.drain(..excess);
            // A pipe runtime may confirm on its output (the human inbox writer's ack).
            if let Some(f) = self.delivery.as_mut() {
                f.active.on_output(chunk, self.now);
            }
            return;
        }
        let human = self.clients.values().any(|c| c.sized);
        let fed = self.screen.feed(chunk, !human);
        if self.cfg.late_answers.is_zero() {
            if !fed.replies.is_empty() {
                self.write_child(&fed.replies);
            }
        } else if !fed.replies.is_empty() {
            let due = Instant::now() + self.cfg.late_answers;
            self.late_answers.push_back((due, fed.replies));
        }
        if human {
            self.attached_output_ms = Some(crate::clock::now_ms());
            let mut dropped = Vec::new();
            for (t, c) in self.clients.iter_mut().filter(|(_, c)| c.sized) {
                if !c.queue(&fed.forward) || c.flush().is_err() {
                    dropped.push(*t);
                }
            }
            for t in dropped {
                self.drop_client(t);
            }
        }
        if let Some(g) = self.gate.as_mut() {
            g.on_output(self.now);
        }
        if let Some(f) = self.delivery.as_mut() {
            let d = &mut f.active;
            d.on_output(chunk, self.now);
            if d.is_settling() && self.cfg.adapter.paste_shown(&self.screen, &f.paste) {
                d.on_paste_shown(self.now);
            }
            let turn = d.turn_confirms() && self.cfg.adapter.turn_started(&self.screen, &f.paste);
            if turn {
                let step = d.on_turn_shown(self.output_ms.unwrap_or_else(crate::clock::now_ms));
                self.apply(step);
            }
        }
        self.evaluate_boot(self.now);
        self.watch_prompts(self.now);
        let busy = self.cfg.adapter.is_busy(&self.screen);
        if busy != self.busy_shown {
            self.busy_shown = busy;
            self.emit(EventKind::Busy(busy));
        }
    }

    /// Write the held answers to terminal queries that are due (`late-query-answers`).
    pub(super) fn write_late_answers(&mut self, now: Instant) {
        while self.late_answers.front().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, bytes)) = self.late_answers.pop_front() {
                self.write_child(&bytes);
            }
        }
    }

    pub(super) fn write_child(&mut self, bytes: &[u8]) {
        self.to_child.extend(bytes);
        self.out_queued += bytes.len() as u64;
        self.flush_child();
    }

    pub(super) fn flush_child(&mut self) {
        let mut failed = None;
        while !self.to_child.is_empty() {
            let (a, _) = self.to_child.as_slices();
            let r = match &mut self.io {
                Io::Pty(m) => m.write(a),
                Io::Pipes { stdin, .. } => match stdin {
                    Some(s) => s.write(a),
                    None => Err(io::Error::new(
                        io::ErrorKind::BrokenPipe,
                        "its stdin is closed",
                    )),
                },
            };
            match r {
                Ok(n) => {
                    self.to_child.drain(..n);
                    self.out_written += n as u64;
                    if n > 0 {
                        self.out_progress_at = self.now;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::warn!("session {}: write to child failed: {e}", self.cfg.identity);
                    failed = Some(e);
                    break;
                }
            }
        }
        // Bytes that never reached the child confirm nothing: for a router runtime "written"
        // is the confirmation, so a failed write must fail the delivery, not complete it
        // (and one with bytes already written is unconfirmed: told before the counters are
        // moved past what was never written).
        if let Some(e) = failed {
            if let Some(f) = self.delivery.take() {
                self.finish_in_flight(f.span, Err(DeliveryFailure::WriteFailed(e.to_string())));
            }
            self.to_child.clear();
            self.out_written = self.out_queued;
            return;
        }
        if let Some(d) = self.delivery.as_mut().map(|f| &mut f.active) {
            let was_writing = d.is_writing();
            let step = d.on_written(self.now);
            // A pty delivery now waits for the agent to show it took the message.
            let confirming = was_writing && !d.is_writing() && matches!(step, Step::Wait);
            self.apply(step);
            if confirming {
                self.emit(EventKind::Phase("confirming".into()));
            }
        }
        if let Some(c) = self.compact.as_mut() {
            c.on_written(self.now);
        }
    }
}

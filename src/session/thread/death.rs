//! The session thread's end: drain, report, `exits.log`.

use super::*;

impl Session {
    /// The child exited with `exit` (as the reaper read it): report it and the end of all
    /// that was under way.
    pub(super) fn finish(&mut self, exit: io::Result<ExitStatus>) {
        // Drain what the child printed before it died (the pty may still hold output).
        self.read_child(false);
        if matches!(self.io, Io::Pipes { .. }) {
            self.read_child(true);
        }
        // What the child started ends before the session is reported gone.
        if let Some(scope) = &mut self.scope {
            scope.end();
        }
        let status = exit.ok();
        let code = status.and_then(|s| s.code());
        let signal = status
            .and_then(|s| s.signal())
            .and_then(|n| Signal::try_from(n).ok())
            .map(|s| s.as_str().to_string());
        let cause = self.state.ending_cause().unwrap_or(Cause::ChildExit);
        let tail = self.tail_text();
        if self.state.boot().is_some() {
            let reason = self
                .cfg
                .adapter
                .explain_exit(&tail)
                .unwrap_or_else(|| exit_reason(code, signal.as_deref()));
            self.emit(EventKind::BootFailed {
                failure: super::super::boot::BootFailure::Failed(reason),
                screen: tail.clone(),
                width: self.screen_width(),
            });
        }
        self.fail_deliveries(DeliveryFailure::SessionEnded);
        self.end_followers(DeliveryFailure::QueuedSessionEnded);
        self.end_gate(cause);
        self.cut_turns();
        if let Some(c) = self.compact.take() {
            self.emit(EventKind::Compacted {
                id: c.id,
                result: Err(CompactFailure::SessionEnded),
            });
        }
        let mut ev = Event::new("session-exit")
            .field("identity", &self.cfg.identity)
            .field("pid", self.pid.to_string())
            .field("status", code.map(|c| c.to_string()).unwrap_or_default())
            .field("signal", signal.clone().unwrap_or_default())
            .field("uptime_s", self.started.elapsed().as_secs().to_string())
            .field("cause", cause.as_str());
        if !cause.expected() {
            ev = ev.field("tail", tail);
        }
        self.cfg.exits_log.append(&ev);
        self.emit(EventKind::Exited {
            status: code,
            signal,
            cause,
        });
        // Dropping the clients closes their sockets: attached terminals see the end.
    }

    /// The width of what [`Session::tail_text`] returns: the screen's columns for a pty, 0
    /// for pipes' output (no wrapping).
    pub(super) fn screen_width(&self) -> usize {
        match self.io {
            Io::Pty(_) => self.screen.size().1 as usize,
            Io::Pipes { .. } => 0,
        }
    }

    pub(super) fn tail_text(&self) -> String {
        match self.io {
            Io::Pty(_) => self.screen.tail_text(EXIT_TAIL),
            Io::Pipes { .. } => {
                let bytes: Vec<u8> = self.pipe_tail.iter().copied().collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
        }
    }
}

//! The state of one session as the router tracks it (spec 04 §1, spec 05 §1–§2), as an
//! enum holding only what is valid in each state (watchexec's `CommandState`), with the
//! transitions the router's events make.

use super::decide::Live;
use crate::session::handle::Cause;

/// Where a tracked session is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessState {
    /// Launched; not ready yet (or a router session whose input is gone: it takes nothing
    /// more until it exits and is restarted).
    Booting,
    /// Its boot failed (the session reported why and ends itself next).
    BootFailed {
        /// The session's reason (`offline and wake failed: <reason>`).
        reason: String,
    },
    /// Ready: takes deliveries and commands.
    Ready,
    /// Told to end; waiting for `Exited`.
    Ending {
        /// Why the router ended it.
        cause: Cause,
        /// It had become ready (`list` shows it live; a held message waits for its exit).
        was_ready: bool,
        /// Its boot had failed before it was told to end.
        boot_failure: Option<String>,
    },
}

impl SessState {
    /// The session became ready (`Ready` event).
    pub fn ready(&mut self) {
        match self {
            SessState::Ending { was_ready, .. } => *was_ready = true,
            other => *other = SessState::Ready,
        }
    }

    /// The session's input is gone (a router peer died before taking a message): it takes
    /// nothing more.
    pub fn input_lost(&mut self) {
        match self {
            SessState::Ending { was_ready, .. } => *was_ready = false,
            SessState::Ready => *self = SessState::Booting,
            SessState::Booting | SessState::BootFailed { .. } => {}
        }
    }

    /// The session reported a failed boot.
    pub fn boot_failed(&mut self, reason: String) {
        match self {
            SessState::Ending { boot_failure, .. } => *boot_failure = Some(reason),
            other => *other = SessState::BootFailed { reason },
        }
    }

    /// The router told the session to end for `cause`; a session already ending keeps its
    /// first cause.
    pub fn end(&mut self, cause: Cause) {
        if !self.is_ending() {
            self.end_now(cause);
        }
    }

    /// Like [`SessState::end`], but `cause` replaces an earlier one (daemon shutdown).
    pub fn end_now(&mut self, cause: Cause) {
        let was_ready = self.is_ready();
        let boot_failure = self.boot_failure().map(str::to_string);
        *self = SessState::Ending {
            cause,
            was_ready,
            boot_failure,
        };
    }

    /// It became ready (and, if ending, was ready when told to end).
    pub fn is_ready(&self) -> bool {
        matches!(
            self,
            SessState::Ready
                | SessState::Ending {
                    was_ready: true,
                    ..
                }
        )
    }

    /// It was told to end.
    pub fn is_ending(&self) -> bool {
        matches!(self, SessState::Ending { .. })
    }

    /// Why it was told to end, if it was.
    pub fn ending_cause(&self) -> Option<Cause> {
        match self {
            SessState::Ending { cause, .. } => Some(*cause),
            _ => None,
        }
    }

    /// The reason its boot failed, if it did.
    pub fn boot_failure(&self) -> Option<&str> {
        match self {
            SessState::BootFailed { reason } => Some(reason),
            SessState::Ending { boot_failure, .. } => boot_failure.as_deref(),
            _ => None,
        }
    }

    /// What it can take now, for the decisions.
    pub fn live(&self) -> Live {
        Live::of(self.is_ready(), self.is_ending())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec 05 §2 steps 8–9: booting, then ready, then told to end.
    #[test]
    fn boot_ready_end() {
        let mut s = SessState::Booting;
        assert_eq!(s.live(), Live::Starting);
        s.ready();
        assert_eq!(s, SessState::Ready);
        assert_eq!(s.live(), Live::Ready);
        s.end(Cause::IdleSleep);
        assert_eq!(s.live(), Live::Ending);
        assert!(
            s.is_ready(),
            "list still shows a session that was ready as live"
        );
        s.end(Cause::Stop);
        assert_eq!(
            s.ending_cause(),
            Some(Cause::IdleSleep),
            "the first cause stays"
        );
        s.end_now(Cause::Shutdown);
        assert_eq!(
            s.ending_cause(),
            Some(Cause::Shutdown),
            "shutdown overrides"
        );
    }

    /// Spec 05 §2 "failures at any step are reported": a failed boot is remembered through
    /// the end, for the crash-loop record and the sender's error.
    #[test]
    fn boot_failure_survives_the_end() {
        let mut s = SessState::Booting;
        s.boot_failed("never became ready".into());
        assert_eq!(s.boot_failure(), Some("never became ready"));
        assert_eq!(s.live(), Live::Starting);
        s.end(Cause::Stop);
        assert_eq!(s.boot_failure(), Some("never became ready"));
        assert!(!s.is_ready());
        let mut s = SessState::Booting;
        s.end(Cause::Replaced);
        s.boot_failed("x".into());
        assert_eq!(s.boot_failure(), Some("x"));
        assert_eq!(s.ending_cause(), Some(Cause::Replaced));
    }

    /// Spec 03 §1 step 9: a router session that lost its input takes nothing more.
    #[test]
    fn lost_input_is_not_ready() {
        let mut s = SessState::Ready;
        s.input_lost();
        assert_eq!(s.live(), Live::Starting);
        assert!(!s.is_ready());
        let mut s = SessState::Ready;
        s.end(Cause::Stop);
        s.input_lost();
        assert!(!s.is_ready());
        assert_eq!(s.live(), Live::Ending);
    }
}

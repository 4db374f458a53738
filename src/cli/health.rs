//! Daemon health (spec 08 §1 "Health"): the control socket accepts a connection and answers
//! `ping`. `onboard`, `update` and `rollback` wait for two answers in a row within 15 s,
//! polling every 400 ms.

use std::time::{Duration, Instant};

use super::client::Client;
use crate::paths::Paths;
use crate::protocol::{call, Pong};

/// Answers in a row that make a daemon healthy after a start or a restart.
pub const NEED_IN_A_ROW: usize = 2;
/// How long a start or a restart may take to become healthy.
pub const WITHIN: Duration = Duration::from_secs(15);
/// The poll period of the wait.
pub const POLL: Duration = Duration::from_millis(400);

/// The daemon's answer to one `ping`, or `None` when nothing (or something else) answers.
pub fn ping(paths: &Paths) -> Option<Pong> {
    // The CLI that waits may be the build before the daemon's (update) or after (rollback).
    let mut c = Client::connect_unchecked(paths).ok()?;
    c.request(&call::Ping {}, |_| {}).ok()?.into_result().ok()
}

/// Counts answers in a row; a miss, or an answer from another process than the one before,
/// starts the count again. An answer from `not_pid` (the daemon before a restart) is a miss.
#[derive(Debug, Clone)]
pub struct Streak {
    need: usize,
    not_pid: Option<u32>,
    pid: Option<u32>,
    run: usize,
}

impl Streak {
    /// A streak of `need` answers, not counting answers from `not_pid`.
    pub fn new(need: usize, not_pid: Option<u32>) -> Streak {
        Streak {
            need,
            not_pid,
            pid: None,
            run: 0,
        }
    }

    /// Record one poll (`Some(pid)`: answered by that process); true once the streak is
    /// complete.
    pub fn record(&mut self, answer: Option<u32>) -> bool {
        match answer {
            Some(pid) if Some(pid) != self.not_pid => {
                self.run = if self.pid == Some(pid) {
                    self.run + 1
                } else {
                    1
                };
                self.pid = Some(pid);
            }
            _ => {
                self.run = 0;
                self.pid = None;
            }
        }
        self.run >= self.need
    }
}

/// Wait until the daemon is healthy ([`NEED_IN_A_ROW`] pings in a row within [`WITHIN`],
/// every [`POLL`]), ignoring a daemon with pid `not_pid` (the one before a restart). Returns
/// the healthy daemon's answer.
///
/// Errors: not healthy in time (a sentence with the wait and where to look).
pub fn wait_healthy(paths: &Paths, not_pid: Option<u32>) -> Result<Pong, String> {
    let start = Instant::now();
    let mut streak = Streak::new(NEED_IN_A_ROW, not_pid);
    loop {
        let pong = ping(paths);
        if streak.record(pong.as_ref().map(|p| p.pid)) {
            if let Some(p) = pong {
                return Ok(p);
            }
        }
        if start.elapsed() + POLL > WITHIN {
            return Err(format!(
                "the daemon did not become healthy within {} s (it must answer ping on {} {} times in a row) — see {}",
                WITHIN.as_secs(),
                paths.socket().display(),
                NEED_IN_A_ROW,
                paths.daemon_log().display()
            ));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_answers_in_a_row_from_one_new_daemon() {
        let mut s = Streak::new(2, None);
        assert!(!s.record(Some(7)));
        assert!(!s.record(None));
        assert!(!s.record(Some(7)));
        assert!(s.record(Some(7)));

        // A daemon that restarts between two answers is not healthy yet.
        let mut s = Streak::new(2, None);
        assert!(!s.record(Some(7)));
        assert!(!s.record(Some(8)));
        assert!(s.record(Some(8)));

        // The daemon before the restart does not count.
        let mut s = Streak::new(2, Some(7));
        assert!(!s.record(Some(7)));
        assert!(!s.record(Some(7)));
        assert!(!s.record(Some(9)));
        assert!(s.record(Some(9)));
    }
}

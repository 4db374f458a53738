//! How the router answers a request: progress lines, one final line, or (for `attach`) a
//! final line plus the session to hand the connection to. Control-socket replies go to the
//! main loop (tagged with the connection id, then its poll is woken); HTTP workers wait on
//! their own channel.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use crate::protocol::{Progress, Reply};
use crate::session::handle::SessionHandle;

/// One message back to a requester.
pub enum ReplyMsg {
    /// A progress line (`{"progress":…}`).
    Progress(Progress),
    /// The final line.
    Final(Reply),
    /// The final line, after which the connection belongs to this session (attach).
    Attach(Reply, SessionHandle),
}

/// Where a request's answers go.
#[derive(Clone)]
pub struct ReplyTo {
    conn: u64,
    tx: Sender<(u64, ReplyMsg)>,
    waker: Option<Arc<mio::Waker>>,
    /// Set by the control loop once the requester's connection is gone.
    gone: Option<Arc<AtomicBool>>,
}

impl ReplyTo {
    /// Replies for control connection `conn`, delivered to the main loop. `gone` is set by
    /// the control loop when that connection closes (the requester gave up).
    pub fn control(
        conn: u64,
        tx: Sender<(u64, ReplyMsg)>,
        waker: Arc<mio::Waker>,
        gone: Arc<AtomicBool>,
    ) -> ReplyTo {
        ReplyTo {
            conn,
            tx,
            waker: Some(waker),
            gone: Some(gone),
        }
    }

    /// The requester is known to have stopped waiting (its control connection closed, e.g.
    /// Ctrl-C of the CLI): work not begun for it should not be begun.
    pub fn abandoned(&self) -> bool {
        self.gone
            .as_ref()
            .is_some_and(|g| g.load(Ordering::Relaxed))
    }

    /// A private channel for a blocking requester that tells through `gone` when it stops
    /// waiting (an HTTP worker whose client hung up).
    pub fn channel_watched(gone: Arc<AtomicBool>) -> (ReplyTo, Receiver<(u64, ReplyMsg)>) {
        let (mut reply, rx) = ReplyTo::channel();
        reply.gone = Some(gone);
        (reply, rx)
    }

    /// A private channel for a blocking requester (an HTTP worker).
    pub fn channel() -> (ReplyTo, Receiver<(u64, ReplyMsg)>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        (
            ReplyTo {
                conn: 0,
                tx,
                waker: None,
                gone: None,
            },
            rx,
        )
    }

    fn send(&self, msg: ReplyMsg) {
        // A requester that went away is not an error: its answer is simply dropped.
        if self.tx.send((self.conn, msg)).is_ok() {
            if let Some(w) = &self.waker {
                let _ = w.wake();
            }
        }
    }

    /// A requester nobody listens to (work the daemon starts for itself).
    pub fn discard() -> ReplyTo {
        let (reply, _rx) = ReplyTo::channel();
        reply
    }

    /// Send a progress line.
    pub fn progress(&self, p: Progress) {
        self.send(ReplyMsg::Progress(p));
    }

    /// Send the final line (any success type or a [`crate::protocol::Failure`]).
    pub fn finish(self, r: impl Into<Reply>) {
        self.send(ReplyMsg::Final(r.into()));
    }

    /// Send the final line and hand the connection to `session`.
    pub fn attach(self, r: impl Into<Reply>, session: SessionHandle) {
        self.send(ReplyMsg::Attach(r.into(), session));
    }
}

//! How the router answers a request: progress lines, one final line, or (for `attach`) a
//! final line plus the session to hand the connection to. Control-socket replies go to the
//! main loop (tagged with the connection id, then its poll is woken); HTTP workers wait on
//! their own channel.

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
}

impl ReplyTo {
    /// Replies for control connection `conn`, delivered to the main loop.
    pub fn control(conn: u64, tx: Sender<(u64, ReplyMsg)>, waker: Arc<mio::Waker>) -> ReplyTo {
        ReplyTo {
            conn,
            tx,
            waker: Some(waker),
        }
    }

    /// A private channel for a blocking requester (an HTTP worker).
    pub fn channel() -> (ReplyTo, Receiver<(u64, ReplyMsg)>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        (
            ReplyTo {
                conn: 0,
                tx,
                waker: None,
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

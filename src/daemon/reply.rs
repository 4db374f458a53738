//! How the router answers a request: progress lines, one final line, or (for `attach`) a
//! final line plus the session to hand the connection to. Control-socket replies go to the
//! main loop (tagged with the connection id, then its poll is woken); an MCP send's final
//! answer goes to a callback that hands it to the HTTP acceptor ([`ReplyTo::on_final`]);
//! blocking requesters wait on a channel of their own. A send's answers go to a
//! [`SendReplyTo`]: typed, so a requester that takes only a send's outcome (MCP) gets the
//! failure whole, its code included.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use crate::protocol::{Failure, Progress, Reply, SendReply};
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

/// The callback of [`ReplyTo::on_final`] (`T` = [`Reply`]) or [`SendReplyTo::on_outcome`]
/// (`T` = [`SendOutcome`]): the final answer, or `None` when the request was dropped without
/// one.
type FinalFn<T> = Box<dyn FnOnce(Option<T>) + Send>;

/// Where a request's answers go.
#[derive(Clone)]
pub struct ReplyTo {
    sink: Sink,
    /// Set by the control loop once the requester's connection is gone.
    gone: Option<Arc<AtomicBool>>,
}

#[derive(Clone)]
enum Sink {
    /// Tagged with `conn` into a channel, then `waker` (if any) is woken.
    Channel {
        conn: u64,
        tx: Sender<(u64, ReplyMsg)>,
        waker: Option<Arc<mio::Waker>>,
    },
    /// The final answer to a callback, called once on the router thread; progress is dropped.
    Final(Arc<FinalOnce<Reply>>),
}

/// A callback run exactly once: with the final reply, or with `None` when every
/// [`ReplyTo`] holding it is dropped unanswered (the router failed or ended without
/// answering), so a requester without a thread of its own is never left waiting.
struct FinalOnce<T>(std::sync::Mutex<Option<FinalFn<T>>>);

impl<T> FinalOnce<T> {
    fn new(done: impl FnOnce(Option<T>) + Send + 'static) -> Arc<FinalOnce<T>> {
        Arc::new(FinalOnce(std::sync::Mutex::new(Some(Box::new(done)))))
    }

    fn call(&self, reply: Option<T>) {
        let taken = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(f) = taken {
            f(reply);
        }
    }
}

impl<T> Drop for FinalOnce<T> {
    fn drop(&mut self) {
        self.call(None);
    }
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
            sink: Sink::Channel {
                conn,
                tx,
                waker: Some(waker),
            },
            gone: Some(gone),
        }
    }

    /// Answers for a requester that waits for the final one only, without a thread: `done`
    /// runs once, on the router thread (so it must be quick: hand the reply on and return),
    /// with the final reply (an `attach` answer's session is dropped). `gone` is set by the
    /// requester when it stops waiting. If the request is dropped without an answer (the
    /// router failed or is ending), `done` gets `None`.
    pub fn on_final(
        gone: Arc<AtomicBool>,
        done: impl FnOnce(Option<Reply>) + Send + 'static,
    ) -> ReplyTo {
        ReplyTo {
            sink: Sink::Final(FinalOnce::new(done)),
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

    /// A private channel for a blocking requester.
    pub fn channel() -> (ReplyTo, Receiver<(u64, ReplyMsg)>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        (
            ReplyTo {
                sink: Sink::Channel {
                    conn: 0,
                    tx,
                    waker: None,
                },
                gone: None,
            },
            rx,
        )
    }

    fn send(&self, msg: ReplyMsg) {
        match &self.sink {
            Sink::Channel { conn, tx, waker } => {
                // A requester that went away is not an error: its answer is simply dropped.
                if tx.send((*conn, msg)).is_ok() {
                    if let Some(w) = waker {
                        let _ = w.wake();
                    }
                }
            }
            Sink::Final(done) => match msg {
                ReplyMsg::Progress(_) => {}
                ReplyMsg::Final(r) | ReplyMsg::Attach(r, _) => done.call(Some(r)),
            },
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

/// A send's outcome: its answer, or the failure with its code (spec 03 §1).
pub type SendOutcome = Result<SendReply, Failure>;

/// Where a send's answers go: progress lines (a wake's boot), then its [`SendOutcome`].
/// Either a [`ReplyTo`] (a control connection, the fleet API, nobody), which gets the outcome
/// as a [`Reply`], or a callback that takes the outcome itself ([`SendReplyTo::on_outcome`]).
#[derive(Clone)]
pub struct SendReplyTo(SendSink);

#[derive(Clone)]
enum SendSink {
    Reply(ReplyTo),
    Outcome {
        done: Arc<FinalOnce<SendOutcome>>,
        gone: Arc<AtomicBool>,
    },
}

impl From<ReplyTo> for SendReplyTo {
    fn from(reply: ReplyTo) -> SendReplyTo {
        SendReplyTo(SendSink::Reply(reply))
    }
}

impl SendReplyTo {
    /// Answers for a requester that waits for the send's outcome only, without a thread (as
    /// [`ReplyTo::on_final`]): `done` runs once, on the router thread, with the outcome, or
    /// with `None` when the send is dropped unanswered (the router failed or is ending).
    /// `gone` is set by the requester when it stops waiting.
    pub fn on_outcome(
        gone: Arc<AtomicBool>,
        done: impl FnOnce(Option<SendOutcome>) + Send + 'static,
    ) -> SendReplyTo {
        SendReplyTo(SendSink::Outcome {
            done: FinalOnce::new(done),
            gone,
        })
    }

    /// The requester is known to have stopped waiting ([`ReplyTo::abandoned`]).
    pub fn abandoned(&self) -> bool {
        match &self.0 {
            SendSink::Reply(r) => r.abandoned(),
            SendSink::Outcome { gone, .. } => gone.load(Ordering::Relaxed),
        }
    }

    /// Send a progress line (dropped by an outcome callback).
    pub fn progress(&self, p: Progress) {
        if let SendSink::Reply(r) = &self.0 {
            r.progress(p);
        }
    }

    /// Send the outcome.
    pub fn finish(self, outcome: SendOutcome) {
        match self.0 {
            SendSink::Reply(r) => match outcome {
                Ok(sent) => r.finish(sent),
                Err(f) => r.finish(f),
            },
            SendSink::Outcome { done, .. } => done.call(Some(outcome)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Code;

    fn recorder() -> (ReplyTo, Receiver<Option<Reply>>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let reply = ReplyTo::on_final(Arc::new(AtomicBool::new(false)), move |r| {
            let _ = tx.send(r);
        });
        (reply, rx)
    }

    #[test]
    fn a_final_callback_runs_once_with_the_final_reply() {
        let (reply, rx) = recorder();
        let copy = reply.clone();
        reply.progress(Progress {
            progress: "booting".into(),
            identity: "echo-bob".into(),
            elapsed_ms: 5,
        });
        copy.finish(Reply::failure(Code::Offline, "first"));
        drop(reply);
        let got: Vec<Option<Reply>> = rx.try_iter().collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(matches!(&got[0], Some(Reply::Failed(f)) if f.error == "first"));
    }

    #[test]
    fn a_request_dropped_unanswered_still_reaches_its_callback() {
        let (reply, rx) = recorder();
        let copy = reply.clone();
        drop(reply);
        assert!(rx.try_recv().is_err(), "a clone is still held");
        drop(copy);
        assert!(matches!(rx.try_recv(), Ok(None)), "told it was dropped");
    }
}

//! What the daemon's federation threads share (issue 28 items 2–3): the membership and the
//! other hosts as the link last saw them ([`Hub::view`], for [`super::address::resolve`]),
//! and the queue of writes to Redis ([`Write`], done by the `federation-write` thread of
//! [`super::streams`]). The router holds an `Arc<Hub>`; nothing in it blocks on Redis.

use std::sync::Mutex;

use crossbeam_channel::{Receiver, Sender};
use serde::{Deserialize, Serialize};

use crate::daemon::reply::SendOutcome;
use crate::daemon::route::SendInput;
use crate::federation::address::HostView;
use crate::federation::Joined;
use crate::protocol::{Failure, SendReply};

/// A write for the `federation-write` thread.
#[derive(Debug)]
pub enum Write {
    /// Send a message to peer `name` of host `host`: the sender is authenticated and the
    /// fields checked there (off the router thread), then the entry goes onto the host's
    /// inbox stream; a refusal comes back as an [`Event::Outcome`] with `ticket`.
    Send {
        /// The router's handle on the send.
        ticket: String,
        /// The send as it arrived (its `to` is the address as named).
        input: Box<SendInput>,
        /// The peer's name on its host.
        name: String,
        /// The host.
        host: String,
        /// How long the sender still waits, ms.
        timeout_ms: u64,
    },
    /// The outcome of an inbox entry: written to the sender host's reply stream
    /// (`reply:<host>:from:<this host>`), then the entry is acknowledged (`XACK` on
    /// `inbox:<this host>:from:<host>`), in that order.
    Outcome {
        /// The sending host (the one its inbox stream's key names).
        host: String,
        /// The outcome.
        outcome: crate::federation::keys::Outcome,
        /// The inbox entry's stream id.
        entry: String,
    },
}

/// What the federation threads tell the router.
#[derive(Debug)]
pub enum Event {
    /// An inbox entry to route as a local send.
    Inbound {
        /// The sending host: the one the key of the stream it was read from names (its
        /// `from` was checked to be of that host).
        host: String,
        /// The entry.
        entry: crate::federation::keys::Entry,
        /// Its stream id, acknowledged once its outcome is written.
        stream_id: String,
    },
    /// A remote send's entry is in the recipient host's inbox stream (issue 28 item 4: a
    /// send to a host that is offline is answered `queued` then).
    Written {
        /// The send's ticket.
        ticket: String,
        /// The sender as authenticated, `<runtime>-<personality>` (told later when the
        /// message is not delivered).
        from: String,
    },
    /// A remote send's outcome (or its refusal before it left this host).
    Outcome {
        /// The send's ticket.
        ticket: String,
        /// The host that answered, the one the reply stream's key names (`None`: refused on
        /// this host before it left); an answer from another host than the send's is dropped.
        from: Option<String>,
        /// The answer.
        outcome: SendOutcome,
    },
}

/// A send's outcome as a reply stream carries it: the control protocol's send answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum Wire {
    Sent(SendReply),
    Refused(Failure),
}

/// The outcome as JSON for a reply stream.
pub fn outcome_json(o: &SendOutcome) -> String {
    let w = match o {
        Ok(r) => Wire::Sent(r.clone()),
        Err(f) => Wire::Refused(f.clone()),
    };
    serde_json::to_string(&w).unwrap_or_default()
}

/// The outcome of a reply stream's JSON. Pure.
///
/// Errors: the text is not a send's answer (serde_json's reason).
pub fn outcome_of(json: &str) -> Result<SendOutcome, serde_json::Error> {
    serde_json::from_str::<Wire>(json).map(|w| match w {
        Wire::Sent(r) => Ok(r),
        Wire::Refused(f) => Err(f),
    })
}

#[derive(Default)]
struct State {
    joined: Option<Joined>,
    connected: bool,
    hosts: Vec<HostView>,
}

/// The shared state (module doc).
pub struct Hub {
    state: Mutex<State>,
    writes: Sender<Write>,
}

impl Hub {
    /// A hub and the receiving end of its writes (for the `federation-write` thread).
    pub fn new() -> (Hub, Receiver<Write>) {
        let (writes, rx) = crossbeam_channel::unbounded();
        let hub = Hub {
            state: Mutex::new(State::default()),
            writes,
        };
        (hub, rx)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The link's news: the membership in effect (`None`: not joined), whether Redis
    /// answers, the other hosts with the peers of their rosters.
    pub fn set(&self, joined: Option<Joined>, connected: bool, hosts: Vec<HostView>) {
        let mut s = self.state();
        s.joined = joined;
        s.connected = connected;
        s.hosts = hosts;
    }

    /// The membership in effect, when joined.
    pub fn joined(&self) -> Option<Joined> {
        self.state().joined.clone()
    }

    /// This host's name, whether the link reaches Redis, and the other hosts, when joined.
    pub fn view(&self) -> Option<(String, bool, Vec<HostView>)> {
        let s = self.state();
        let j = s.joined.as_ref()?;
        Some((j.host.clone(), s.connected, s.hosts.clone()))
    }

    /// Queue a write; false when the writer has ended (the daemon is stopping).
    pub fn write(&self, w: Write) -> bool {
        self.writes.send(w).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Code;

    #[test]
    fn outcomes_cross_as_the_protocol_answers() {
        let f: SendOutcome = Err(Failure::new(Code::Stopped, "stopped"));
        let json = outcome_json(&f);
        assert_eq!(json, r#"{"code":"stopped","error":"stopped"}"#);
        assert_eq!(outcome_of(&json).unwrap(), f);
        assert!(outcome_of("{}").is_err());
    }
}

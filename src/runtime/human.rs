//! The built-in `human` runtime (issue 8 item 3): a person at a terminal (intelligence
//! natural). It is hosted like a router runtime — on pipes, always on — and its program is
//! this very binary, `iapeer human-inbox` ([`crate::inbox::writer`]), which stores every
//! message in the peer's durable inbox and acknowledges it. A delivery is confirmed only by
//! that acknowledgement, so `delivered` means the record is on disk (spec 03 §1 "the
//! promise"); `iapeer inbox` shows it.

use super::own_verb::OwnVerb;
use super::{Acceptance, Confirm};
use crate::runtime_table::HUMAN;

use crate::names::HUMAN_RUNTIME as NAME;

/// The human adapter: `iapeer human-inbox`, a delivery confirmed by its [`StoredAck`].
pub fn from_env() -> OwnVerb {
    OwnVerb::from_env(NAME, HUMAN.own_verb(), |text| {
        Box::new(StoredAck::for_wire(text))
    })
}

/// Confirms a delivery once the writer printed `stored <id>` for its envelope, and fails it
/// with the writer's reason when it printed `failed <id> <reason>`.
pub struct StoredAck {
    /// The record id of the envelope; `None` for text that does not decode.
    id: Option<String>,
}

impl StoredAck {
    /// The confirmer of the wire-form envelope `text`. Text that does not decode can never be
    /// stored, so it is never confirmed (the delivery fails at the grace).
    pub fn for_wire(text: &str) -> StoredAck {
        let id = crate::envelope::decode(text)
            .ok()
            .map(|env| crate::inbox::fingerprint(&env));
        StoredAck { id }
    }
}

impl Confirm for StoredAck {
    fn confirmed(&mut self, output: &[u8]) -> bool {
        let Some(id) = &self.id else {
            return false;
        };
        let needle = crate::inbox::ack_line(id);
        output.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    fn acceptance(&mut self, output: &[u8], _screen: &str) -> Acceptance {
        if self.confirmed(output) {
            return Acceptance::Accepted;
        }
        match self
            .id
            .as_deref()
            .and_then(|id| crate::inbox::failure_in(output, id))
        {
            Some(reason) => Acceptance::Removed(reason),
            None => Acceptance::Pending,
        }
    }

    fn reads_screen(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{encode_wire, Envelope};

    fn envelope(body: &str) -> Envelope {
        Envelope {
            from: "alice".into(),
            runtime: "echo".into(),
            intelligence: None,
            ts: Some("2026-07-14T01:23:45+03:00".into()),
            topic: Some("plans".into()),
            attachments: vec![],
            body: body.into(),
        }
    }

    /// The ack of this envelope confirms it; the ack of another (even from the same second)
    /// does not, and neither does a text that is not an envelope.
    #[test]
    fn only_the_ack_of_this_envelope_confirms() {
        let mine = envelope("hello");
        let other = envelope("hello again");
        let mut c = StoredAck::for_wire(&encode_wire(&mine));
        let other_ack = crate::inbox::ack_line(&crate::inbox::fingerprint(&other));
        assert!(!c.confirmed(format!("{other_ack}\n").as_bytes()));
        let ack = crate::inbox::ack_line(&crate::inbox::fingerprint(&mine));
        assert!(c.confirmed(format!("noise\n{ack}\n").as_bytes()));
        assert!(!StoredAck::for_wire("not an envelope").confirmed(b"stored x"));
    }

    /// The writer's `failed <id> <reason>` for this envelope fails it with that reason; one
    /// for another envelope leaves it pending.
    #[test]
    fn the_failure_of_this_envelope_fails_it_with_the_reason() {
        let mine = envelope("hello");
        let other = envelope("hello again");
        let mut c = StoredAck::for_wire(&encode_wire(&mine));
        let id = |e: &Envelope| crate::inbox::fingerprint(e);
        let theirs = crate::inbox::failure_line(&id(&other), "disk full");
        assert_eq!(
            c.acceptance(format!("{theirs}\n").as_bytes(), ""),
            Acceptance::Pending
        );
        let line = crate::inbox::failure_line(&id(&mine), "cannot store it:\nNo space left");
        assert_eq!(
            c.acceptance(format!("{theirs}\n{line}\n").as_bytes(), ""),
            Acceptance::Removed("cannot store it: No space left".into())
        );
    }
}

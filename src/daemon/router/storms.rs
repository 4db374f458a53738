//! The router's side of the storm guard ([`crate::daemon::storm`]): every prepared send
//! between two non-human peers is counted; a message from a human lifts the pauses of the
//! peer it goes to. A service's messages to a peer that is not a service (its owners'
//! scheduled and watched signals) are never refused.

use super::Router;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::{Prepared, Refusal, SendInput};
use crate::daemon::storm::{refusable, Verdict};
use crate::eventlog::Event;
use crate::names::Intelligence;
use crate::protocol::Code;

impl Router {
    /// Count `p` with the storm guard; `Some(refusal)` when its pair is paused (spec: issue 7
    /// item 9 — a runaway exchange is paused, logged and reported).
    pub(crate) fn storm_check(&mut self, p: &Prepared) -> Option<Refusal> {
        let from = &p.caller.personality;
        let to = &p.target.personality;
        if p.envelope.intelligence == Some(Intelligence::Natural) {
            for other in self.storms.human_stepped_in(to, self.now.at) {
                self.lifecycle(
                    Event::new("storm")
                        .field("action", "lifted")
                        .field("peer", to)
                        .field("other", &other)
                        .field("by", from),
                );
            }
            return None;
        }
        let (from_nature, to_nature) = (
            p.envelope.intelligence.unwrap_or(Intelligence::Artificial),
            p.target.nature(),
        );
        if to_nature == Intelligence::Natural {
            return None;
        }
        let limits = self.cfg.storm;
        let may_refuse = refusable(from_nature, to_nature);
        let (until, tripped, refused) =
            match self.storms.note(from, to, may_refuse, self.now.at, limits) {
                Verdict::Pass => return None,
                Verdict::Tripped { until, refused } => (until, true, refused),
                Verdict::Paused { until } => (until, false, true),
            };
        // In a pair of a service and a peer that is not one, only the peer's messages to the
        // service are refused: `service` names that service.
        let service = match (from_nature, to_nature) {
            (Intelligence::Absent, Intelligence::Absent) => None,
            (Intelligence::Absent, _) => Some(from),
            (_, Intelligence::Absent) => Some(to),
            _ => None,
        };
        let what = match service {
            Some(s) => {
                let other = if s == from { to } else { from };
                format!(
                    "messages from \"{other}\" to \"{s}\" (\"{s}\"'s scheduled and watched \
                     signals to \"{other}\" still arrive)"
                )
            }
            None => format!("messages between \"{from}\" and \"{to}\""),
        };
        if tripped {
            log::warn!(
                "storm: {from} and {to} sent {} messages each way within {} s; {what} are \
                 paused for {} s",
                limits.limit,
                limits.window.as_secs(),
                limits.pause.as_secs()
            );
            self.lifecycle(
                Event::new("storm")
                    .field("action", "paused")
                    .field("a", from)
                    .field("b", to)
                    .opt("service", service)
                    .field("limit", limits.limit.to_string())
                    .field("window", format!("{}s", limits.window.as_secs()))
                    .field("pause", format!("{}s", limits.pause.as_secs())),
            );
            self.tell_humans_of_storm(from, to, &what);
        }
        if !refused {
            return None;
        }
        let left = until.saturating_duration_since(self.now.at).as_secs();
        Some(Refusal {
            code: Code::Paused,
            error: format!(
                "{what} are paused for {left} more s: they sent {} messages each way within {} \
                 s, a runaway exchange (IAPEER_STORM_LIMIT); a human writing to either peer \
                 lifts the pause; message NOT delivered",
                limits.limit,
                limits.window.as_secs()
            ),
        })
    }

    /// Tell every human peer (intelligence natural) that `a` and `b` were paused (`what`:
    /// which of their messages), by a message from `iapeer` on topic `storm`; with no human
    /// peer, the daemon.log warning is the operator's notice.
    fn tell_humans_of_storm(&mut self, a: &str, b: &str, what: &str) {
        let humans: Vec<String> = crate::registry::Registry::load(&self.paths)
            .map(|r| {
                r.peers
                    .iter()
                    .filter(|p| p.nature() == Intelligence::Natural)
                    .map(|p| p.personality.clone())
                    .collect()
            })
            .unwrap_or_default();
        let limits = self.cfg.storm;
        let message = format!(
            "iapeer paused {what}: \"{a}\" and \"{b}\" sent {} messages each way within {} s, \
             which looks like a runaway exchange. The pause ends in {} s; a message from you to \
             either of them lifts it now.",
            limits.limit,
            limits.window.as_secs(),
            limits.pause.as_secs()
        );
        for human in humans {
            self.lifecycle(
                Event::new("storm")
                    .field("action", "notice")
                    .field("to", &human),
            );
            let input = SendInput::from_daemon(human, None, message.clone(), Some("storm".into()));
            self.begin_send(input, ReplyTo::discard(), None);
        }
    }
}

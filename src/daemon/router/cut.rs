//! Messages an agent's death cut off (issue 32 item 2): the session reports the deliveries
//! its runtime had taken whose turn had not ended by the runtime's records
//! ([`EventKind::TurnsCut`](crate::session::handle::EventKind::TurnsCut)), and when the
//! session ends unexpectedly (not stopped, slept, replaced or shut down) each one's sender is
//! told, by a message from `iapeer`, that its task was interrupted — unless the sender is
//! asleep (never woken for this, spec 05 §7). The conversation stays resume-eligible
//! ([`super::decide::ExitPlan::resume_eligible`]), so the notice says how to carry on.

use super::followup::{which_message, Followed};
use super::Router;
use crate::eventlog::Event;
use crate::names::Identity;
use crate::session::handle::Cause;

/// How the agent's process ended, for the notice (pure): `was killed by SIGKILL`, `exited
/// with status 1`, or `ended`.
pub fn how_it_ended(status: Option<i32>, signal: Option<&str>) -> String {
    match (status, signal) {
        (_, Some(sig)) => format!("was killed by {sig}"),
        (Some(code), None) => format!("exited with status {code}"),
        (None, None) => "ended".to_string(),
    }
}

/// The notice to the sender of a message whose turn the agent's death cut off (pure): which
/// message, that the task was interrupted and how the agent ended, and what carries on —
/// the conversation, on the message's topic, when the death left it `resumable`.
pub fn cut_notice(f: &Followed, ended: &str, resumable: bool) -> String {
    let after = match (f.topic.as_deref(), resumable) {
        (Some(topic), true) => format!(
            "Its conversation is kept: the next message on topic \"{topic}\" resumes it, so \
             you can ask it to carry on or send the task again."
        ),
        (None, true) => "The message had no topic, so the agent's next session starts a fresh \
                         conversation: send the task again if it still matters."
            .to_string(),
        (_, false) => "The agent's next session starts a fresh conversation: send the task \
                       again if it still matters."
            .to_string(),
    };
    format!(
        "{} was interrupted: the agent's process {ended} while it was working on it, before \
         its turn ended. {after}",
        which_message(f)
    )
}

impl Router {
    /// `identity`'s session ended (`cause`, `status`/`signal`; its conversation left
    /// `resumable` or not) with the turns of deliveries `ids` not ended: a `turn-cut` line in
    /// `lifecycle.log` for each, and for an unexpected end a notice to each sender still known
    /// among the recent deliveries.
    pub(crate) fn on_turns_cut(
        &mut self,
        identity: &Identity,
        ids: &[u64],
        cause: Cause,
        (status, signal): (Option<i32>, Option<&str>),
        resumable: bool,
    ) {
        let ended = how_it_ended(status, signal);
        for id in ids {
            let recent = self.queues.recent_mut();
            let followed = recent
                .iter()
                .position(|(i, _, _)| i == id)
                .and_then(|at| recent.remove(at))
                .map(|(_, f, _)| f);
            let tell = !cause.expected() && followed.is_some();
            self.lifecycle(
                Event::new("turn-cut")
                    .field("identity", identity)
                    .field("id", id.to_string())
                    .field("cause", cause.as_str())
                    .opt(
                        "caller",
                        followed.as_ref().map(|f| f.caller.to_string()).as_deref(),
                    )
                    .field("notice", if tell { "true" } else { "false" }),
            );
            if let (true, Some(f)) = (tell, followed) {
                self.send_notice(&f, cut_notice(&f, &ended, resumable));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::QueuedBy;

    fn followed(topic: Option<&str>) -> Followed {
        Followed {
            caller: Identity::new("echo", "ea").unwrap(),
            endpoint: Identity::new("claude", "cb").unwrap(),
            topic: topic.map(String::from),
            ts: Some("2026-12-06T15:00:03+00:00".into()),
            started: std::time::Instant::now(),
            preview: "build the report".into(),
            by: super::super::followup::Awaits::Queue(QueuedBy::Runtime),
            key: crate::msgids::MsgKey {
                from: "echo-ea".into(),
                id: "m-1".into(),
            },
        }
    }

    #[test]
    fn the_notice_says_interrupted_how_and_what_carries_on() {
        assert_eq!(how_it_ended(None, Some("SIGKILL")), "was killed by SIGKILL");
        assert_eq!(how_it_ended(Some(3), None), "exited with status 3");
        assert_eq!(how_it_ended(None, None), "ended");
        assert_eq!(
            cut_notice(&followed(Some("t1")), "was killed by SIGKILL", true),
            "Your message to cb (claude) sent at 2026-12-06T15:00:03+00:00 (\"build the \
             report\") was interrupted: the agent's process was killed by SIGKILL while it was \
             working on it, before its turn ended. Its conversation is kept: the next message \
             on topic \"t1\" resumes it, so you can ask it to carry on or send the task again."
        );
        assert!(cut_notice(&followed(None), "exited with status 1", true)
            .ends_with("starts a fresh conversation: send the task again if it still matters."));
        assert!(
            cut_notice(&followed(Some("t1")), "exited with status 0", false).ends_with(
                "The agent's next session starts a fresh conversation: send the task again if it \
             still matters."
            )
        );
    }
}

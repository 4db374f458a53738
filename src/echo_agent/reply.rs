//! The reply worker: one background thread that owns the MCP client and sends replies in
//! order, so the terminal stays responsive (and Escape works) while a reply is in flight.

use super::mcp::{McpClient, McpError};
use crate::envelope::Envelope;
use crate::names::Intelligence;
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The daemon's message limit in characters (spec 03 §1).
const MESSAGE_LIMIT: usize = 16000;
/// Granularity of the cancellable reply delay.
const DELAY_STEP: Duration = Duration::from_millis(20);

/// One reply to send.
#[derive(Debug, Clone)]
pub struct Job {
    /// Matches the [`Done`] answer.
    pub id: u64,
    /// Recipient personality (the original sender).
    pub to: String,
    /// The reply text.
    pub message: String,
    /// Topic to reply on.
    pub topic: Option<String>,
    /// Wait this long before sending (`--reply-delay-ms`).
    pub delay: Duration,
    /// Set by Escape: the job is not sent if the flag is up when its delay ends.
    pub cancel: Arc<AtomicBool>,
}

/// The outcome of a [`Job`] that was attempted.
#[derive(Debug)]
pub struct Done {
    /// The job's id.
    pub id: u64,
    /// Short result or the error.
    pub result: Result<String, McpError>,
}

/// Whether the echo agent answers `env`: not when its body is itself an echo (`echo:`
/// prefix), and not when its sender is a service — intelligence `absent` in the envelope,
/// which the daemon stamps from the sender's registry entry (spec 03 §1 step 7): a service's
/// confirmations, teaching replies and signals are not a conversation, and answering them
/// would only start an exchange with it (issue 26 item 7).
pub fn wants_reply(env: &Envelope) -> bool {
    !env.body.starts_with("echo:") && env.intelligence != Some(Intelligence::Absent)
}

/// The reply text `echo: <body>`, cut to the daemon's 16000-character limit.
pub fn echo_message(body: &str) -> String {
    format!("echo: {body}")
        .chars()
        .take(MESSAGE_LIMIT)
        .collect()
}

/// Start the worker; it ends when the job sender is dropped. `wake` ends the main loop's
/// wait each time a [`Done`] is sent.
pub fn spawn(wake: super::term::WakeSender) -> (Sender<Job>, Receiver<Done>) {
    let (job_tx, job_rx) = crossbeam_channel::unbounded::<Job>();
    let (done_tx, done_rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        let mut client: Option<McpClient> = None;
        for job in job_rx {
            let until = Instant::now() + job.delay;
            while Instant::now() < until && !job.cancel.load(Ordering::SeqCst) {
                std::thread::sleep(DELAY_STEP);
            }
            if job.cancel.load(Ordering::SeqCst) {
                continue;
            }
            let result = send(&mut client, &job);
            if matches!(result, Err(McpError::Http(_) | McpError::Status(..))) {
                // Reconnect (and initialize again) next time: the daemon may have restarted.
                client = None;
            }
            if done_tx.send(Done { id: job.id, result }).is_err() {
                return;
            }
            wake.wake();
        }
    });
    (job_tx, done_rx)
}

fn send(client: &mut Option<McpClient>, job: &Job) -> Result<String, McpError> {
    if client.is_none() {
        *client = Some(McpClient::connect()?);
    }
    match client {
        Some(c) => c.send_to_peer(&job.to, &job.message, job.topic.as_deref()),
        None => Err(McpError::Protocol("no MCP client".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(intelligence: Option<Intelligence>, body: &str) -> Envelope {
        Envelope {
            from: "timer".into(),
            runtime: "notifier".into(),
            intelligence,
            ts: None,
            topic: None,
            attachments: Vec::new(),
            body: body.into(),
        }
    }

    #[test]
    fn echo_rules() {
        let agent = |body| from(Some(Intelligence::Artificial), body);
        assert!(wants_reply(&agent("hello")));
        assert!(wants_reply(&agent(" echo: indented")));
        assert!(!wants_reply(&agent("echo: hello")));
        assert!(wants_reply(&from(Some(Intelligence::Natural), "hi")));
        assert!(wants_reply(&from(None, "hi")));
        // A service's message (its confirmation, a fire) is never answered.
        assert!(!wants_reply(&from(
            Some(Intelligence::Absent),
            "✓ registered timer trigger"
        )));
        assert_eq!(echo_message("hi"), "echo: hi");
        assert_eq!(echo_message(&"é".repeat(16000)).chars().count(), 16000);
    }
}

//! The echo agent's conversation transcript: `<cwd>/.echo-agent/transcript.jsonl`, one JSON
//! record per line, so idle and resume logic have something to read (spec 04 §2 "echo").

use crate::envelope::Envelope;
use crate::fsutil::{self, MODE_PRIVATE};
use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One transcript line. `type` comes first:
/// `{"type":"user","at":1752445425000,"from":"alice","runtime":"claude","ts":"01:23:45","topic":null,"body":"hi"}`,
/// `{"type":"assistant","at":…,"to":"alice","topic":null,"body":"echo: hi","ok":true,"result":"delivered"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Record {
    /// A message received (decoded from a pasted envelope).
    User {
        /// Epoch milliseconds when it was received.
        at: u64,
        /// Sender personality.
        from: String,
        /// Sender runtime.
        runtime: String,
        /// The envelope's `ts` text as delivered.
        ts: Option<String>,
        /// The envelope's topic.
        topic: Option<String>,
        /// The message body.
        body: String,
        /// The envelope's attachment paths (the recipient's inbox copies); omitted when none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<String>,
    },
    /// A reply sent (or attempted) through MCP.
    Assistant {
        /// Epoch milliseconds when the reply finished.
        at: u64,
        /// Recipient personality.
        to: String,
        /// Topic the reply was sent on.
        topic: Option<String>,
        /// The reply text.
        body: String,
        /// Whether `send_to_peer` succeeded.
        ok: bool,
        /// Short result, or the error text.
        result: String,
    },
}

impl Record {
    /// The `user` record for a received envelope.
    pub fn received(env: &Envelope, at: u64) -> Record {
        Record::User {
            at,
            from: env.from.clone(),
            runtime: env.runtime.clone(),
            ts: env.ts.clone(),
            topic: env.topic.clone(),
            body: env.body.clone(),
            attachments: env.attachments.clone(),
        }
    }
}

/// `<cwd>/.echo-agent/transcript.jsonl`.
pub fn path(cwd: &Path) -> PathBuf {
    cwd.join(".echo-agent").join("transcript.jsonl")
}

/// Append one record as one line (one `O_APPEND` write; folder 0700, file 0600).
///
/// Errors: I/O errors creating the folder or writing.
pub fn append(cwd: &Path, record: &Record) -> io::Result<()> {
    let file = path(cwd);
    if let Some(dir) = file.parent() {
        fsutil::ensure_dir(dir)?;
    }
    let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
    line.push(b'\n');
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(MODE_PRIVATE)
        .open(file)?
        .write_all(&line)
}

/// Count the readable records of an existing transcript; `None` when there is none.
///
/// Errors: I/O errors other than "not found".
pub fn count(cwd: &Path) -> io::Result<Option<usize>> {
    Ok(fsutil::read_optional(&path(cwd))?.map(|text| {
        text.lines()
            .filter(|l| serde_json::from_str::<Record>(l).is_ok())
            .count()
    }))
}

/// Whether transcript `text` holds a `user` record of `body` received at or after
/// `since_ms` (give or take [`HOLD_SLACK_MS`], counted as holding it). Pure.
pub fn holds(text: &str, body: &str, since_ms: u64) -> bool {
    text.lines().any(|l| {
        matches!(serde_json::from_str::<Record>(l),
            Ok(Record::User { at, body: b, .. })
                if b == body && at + HOLD_SLACK_MS >= since_ms)
    })
}

/// How far before `since_ms` a record still counts in [`holds`]: a clock read a little
/// earlier by the agent than by the daemon errs towards "it arrived" (the safe answer).
pub const HOLD_SLACK_MS: u64 = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_held_when_a_user_record_of_its_body_came_after_its_paste_began() {
        let user = |at: u64, body: &str| {
            let env = Envelope {
                from: "alice@a".into(),
                runtime: "echo".into(),
                intelligence: None,
                ts: None,
                topic: None,
                attachments: vec![],
                body: body.into(),
            };
            serde_json::to_string(&Record::received(&env, at)).unwrap()
        };
        let text = format!(
            "{}\nnot json\n{}\n{{\"type\":\"assistant\",\"at\":9000,\"to\":\"alice\",\"topic\":null,\"body\":\"burst 033.\",\"ok\":true,\"result\":\"x\"}}\n",
            user(5000, "burst 032."),
            user(2000, "burst 033."),
        );
        assert!(holds(&text, "burst 032.", 5000));
        assert!(holds(&text, "burst 032.", 5900), "within the slack");
        // The same body received long before the paste began, or only in an answer: not it.
        assert!(!holds(&text, "burst 033.", 5000));
        assert!(!holds(&text, "burst 034.", 0));
        assert!(!holds("", "burst 032.", 0));
    }

    #[test]
    fn records_append_and_count() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(count(dir.path()).unwrap(), None);
        let env = Envelope {
            from: "alice".into(),
            runtime: "claude".into(),
            intelligence: None,
            ts: Some("01:23:45".into()),
            topic: None,
            attachments: vec![],
            body: "hi".into(),
        };
        append(dir.path(), &Record::received(&env, 7)).unwrap();
        append(
            dir.path(),
            &Record::Assistant {
                at: 8,
                to: "alice".into(),
                topic: None,
                body: "echo: hi".into(),
                ok: true,
                result: "delivered".into(),
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(path(dir.path())).unwrap();
        let first = text.lines().next().unwrap();
        assert_eq!(
            first,
            r#"{"type":"user","at":7,"from":"alice","runtime":"claude","ts":"01:23:45","topic":null,"body":"hi"}"#
        );
        assert_eq!(count(dir.path()).unwrap(), Some(2));
        let with = Envelope {
            attachments: vec!["/in/a.png".into()],
            ..env
        };
        let rec = serde_json::to_string(&Record::received(&with, 9)).unwrap();
        assert!(
            rec.ends_with(r#""body":"hi","attachments":["/in/a.png"]}"#),
            "{rec}"
        );
    }
}

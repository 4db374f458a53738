//! Gemini CLI 0.61.0's compaction, `/compress` (its other names: `/compact`, `/summarize`),
//! as recorded in `tests/fixtures/gemini-cli-0.61.0/compress.raw` (`record_gemini_compress`
//! in `tests/gemini.rs`):
//!
//! - While it runs the screen shows `⠋ Compressing chat history` (`32-compress-pending`); it
//!   asks the model twice, non-streamed (`compress-requests.json`: a `<state_snapshot>`, then
//!   its critique).
//! - When it ends the session file gets one record (`compress-session-0.jsonl`): `{"type":
//!   "info","content":""}` for an answer drawn as `✦ Chat history compressed from <n> to <m>
//!   tokens.` (`33-compressed`) or `✦ Nothing to compress.` (`30-compress-empty`), and
//!   `{"type":"error","content":"Failed to compress chat history: …"}` for a refusal, drawn
//!   as `✕ Failed to compress chat history: …` (`35-compress-refused`).
//!
//! The record says it ended; which answer it was is on the screen only (the `info` record
//! is empty), read under the last `> /compress` row once the record is there.

use crate::adapter::{CompactOutcome, CompactRefused, CompactWatch};
use crate::runtime::transcript::TranscriptWatch;

/// The command that compacts the conversation.
pub const COMMAND: &str = "/compress";

/// The answer of a compaction that compacted.
const COMPRESSED: &str = "Chat history compressed from ";
/// The answer on a conversation with nothing to compact.
const NOTHING: &str = "Nothing to compress.";
/// The start of a refusal's text (screen and `error` record).
const FAILED: &str = "Failed to compress chat history";
/// The glyphs an answer row starts with: `✦` (an answer), `✕` (an error).
const ANSWER_GLYPHS: [char; 2] = ['✦', '✕'];

/// The answer drawn under the last `> /compress` row of `screen` (pure): compacted, nothing
/// to compact, or any other answer as the CLI's refusal (its words). `None` while no answer
/// is drawn under it.
pub fn answer_on_screen(screen: &str) -> Option<Result<CompactOutcome, CompactRefused>> {
    let rows: Vec<&str> = screen.lines().collect();
    let echo = format!("> {COMMAND}");
    let at = rows.iter().rposition(|r| r.trim() == echo)?;
    let answer = rows[at + 1..].iter().find_map(|r| {
        let r = r.trim();
        r.starts_with(ANSWER_GLYPHS)
            .then(|| r.trim_start_matches(ANSWER_GLYPHS).trim())
    })?;
    Some(if answer.starts_with(COMPRESSED) {
        Ok(CompactOutcome::Compacted)
    } else if answer == NOTHING {
        Ok(CompactOutcome::NothingToCompact)
    } else {
        Err(CompactRefused {
            said: answer.to_string(),
        })
    })
}

/// What new session records say of a compaction (pure): `Some(Err)` for its refusal (an
/// `error` record `Failed to compress chat history: …`, whose text is whole where the screen
/// may wrap it), `Some(Ok(()))` once an `info` record says it ended, else `None`.
pub fn ended_in_records(records: &[serde_json::Value]) -> Option<Result<(), CompactRefused>> {
    let mut ended = None;
    for r in records {
        match (r["type"].as_str(), r["content"].as_str()) {
            (Some("error"), Some(c)) if c.starts_with(FAILED) => {
                return Some(Err(CompactRefused {
                    said: c.to_string(),
                }))
            }
            (Some("info"), _) => ended = Some(Ok(())),
            _ => {}
        }
    }
    ended
}

/// Watches one `/compress`: the session's records for its end, then the screen for which
/// answer it was.
pub struct CompressWatch {
    watch: TranscriptWatch,
    /// The `info` record that ends it was seen.
    ended: bool,
}

impl CompressWatch {
    /// Watch the records `watch` follows from now.
    pub fn new(watch: TranscriptWatch) -> CompressWatch {
        CompressWatch {
            watch,
            ended: false,
        }
    }
}

impl CompactWatch for CompressWatch {
    fn poll(&mut self, screen: &str) -> Option<Result<CompactOutcome, CompactRefused>> {
        match ended_in_records(&self.watch.new_records()) {
            Some(Err(refused)) => return Some(Err(refused)),
            Some(Ok(())) => self.ended = true,
            None => {}
        }
        if !self.ended {
            return None;
        }
        answer_on_screen(screen)
    }
}

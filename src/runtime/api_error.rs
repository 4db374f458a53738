//! A live agent that cannot answer because its model API refused the turn (spec 10 §3,
//! notices): read from the runtime's structured files, never from screen prose.
//!
//! Claude Code 2.1.332 writes one transcript record per refused turn: `type: "assistant"`,
//! `isApiErrorMessage: true`, `error` (`rate_limit`, `server_error`, `authentication_failed`,
//! …), `apiErrorStatus` (the HTTP status), `apiErrorType` (the API's error type) and the text it
//! shows in `message.content`, with `message.model` `<synthetic>`. Recorded from the real CLI
//! against a stand-in answering 429, 529 and 401 (`tests/notices.rs`,
//! `tests/fixtures/claude-2.1.332/api-error-*.jsonl`). The notice board that deduplicates and
//! expires these is not built yet (issue 10 item 2).

use serde_json::Value;

/// What kind of refusal, as an operator acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// Too many requests or a usage limit reached: wait for the reset.
    RateLimit,
    /// The API is overloaded (or another server-side failure): usually passes.
    Overloaded,
    /// The login expired or the key is wrong: a human must log in again.
    Auth,
    /// Any other refusal the runtime marks as an API error.
    Other,
}

impl ApiErrorKind {
    /// The logfmt / JSON word: `rate-limit`, `overloaded`, `auth`, `api-error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiErrorKind::RateLimit => "rate-limit",
            ApiErrorKind::Overloaded => "overloaded",
            ApiErrorKind::Auth => "auth",
            ApiErrorKind::Other => "api-error",
        }
    }
}

/// One refused turn, as a runtime's file records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The kind.
    pub kind: ApiErrorKind,
    /// The runtime's own word for it (Claude's `error`, e.g. `rate_limit`).
    pub error_type: String,
    /// The HTTP status, when recorded.
    pub status: Option<u16>,
    /// The model named by the record (`<synthetic>` for Claude's error records).
    pub model: String,
    /// The text the runtime showed the user.
    pub text: String,
    /// The record's timestamp, as written.
    pub at: String,
    /// When the limit resets, as the runtime recorded it, if it did (Codex).
    pub resets_at: Option<String>,
}

/// The API error a Claude Code transcript record carries, if it is one (pure).
pub fn from_claude_record(record: &Value) -> Option<ApiError> {
    if record["type"] != "assistant" || record["isApiErrorMessage"] != true {
        return None;
    }
    let error_type = record["error"].as_str().unwrap_or("unknown").to_string();
    let status = record["apiErrorStatus"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok());
    let api_type = record["apiErrorType"].as_str().unwrap_or("");
    let kind = match (error_type.as_str(), status, api_type) {
        ("rate_limit", _, _) | (_, Some(429), _) | (_, _, "rate_limit_error") => {
            ApiErrorKind::RateLimit
        }
        ("authentication_failed", _, _) | (_, Some(401), _) | (_, _, "authentication_error") => {
            ApiErrorKind::Auth
        }
        (_, Some(529), _) | (_, _, "overloaded_error") => ApiErrorKind::Overloaded,
        _ => ApiErrorKind::Other,
    };
    let text = record["message"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join(" ");
    Some(ApiError {
        kind,
        error_type,
        status,
        model: record["message"]["model"]
            .as_str()
            .unwrap_or("unknown")
            .to_string(),
        text,
        at: record["timestamp"].as_str().unwrap_or("").to_string(),
        resets_at: None,
    })
}

/// The API error of the newest assistant record in `text` (a transcript's end, JSON lines;
/// a cut first line is skipped): `None` when the newest outcome is an answer, or there is
/// none (pure).
pub fn latest_claude_outcome(text: &str) -> Option<ApiError> {
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["type"] == "assistant")
        .and_then(|r| from_claude_record(&r))
}

/// The refusal in `now` that `prev` (the previous probe's) did not already report: a new
/// record (another timestamp), or the first (pure).
pub fn newly_raised<'a>(
    prev: Option<&ApiError>,
    now: Option<&'a ApiError>,
) -> Option<&'a ApiError> {
    now.filter(|n| prev.is_none_or(|p| p.at != n.at))
}

/// The last `max` bytes of `path` as text (lossy); empty when it cannot be read.
pub fn tail(path: &std::path::Path, max: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut buf = Vec::new();
    let _ = f.take(max).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!(
            "{}/tests/fixtures/claude-2.1.332/api-error-{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        serde_json::from_str(text.lines().next().unwrap()).unwrap()
    }

    /// The records the real Claude Code 2.1.332 wrote for a 429, a 529 and a 401.
    #[test]
    fn recorded_claude_refusals_are_read_by_kind() {
        for (name, kind, error_type, status) in [
            ("rate-limit", ApiErrorKind::RateLimit, "rate_limit", 429),
            ("overloaded", ApiErrorKind::Overloaded, "server_error", 529),
            ("auth", ApiErrorKind::Auth, "authentication_failed", 401),
        ] {
            let e = from_claude_record(&fixture(name)).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(e.kind, kind, "{name}");
            assert_eq!(e.error_type, error_type, "{name}");
            assert_eq!(e.status, Some(status), "{name}");
            assert_eq!(e.model, "<synthetic>", "{name}");
            assert!(e.text.contains(&status.to_string()), "{name}: {}", e.text);
            assert!(e.at.starts_with("20"), "{name}: {}", e.at);
        }
    }

    /// The newest assistant record decides: an error after an answer is current, an answer
    /// after an error clears it; user records and cut lines do not count.
    #[test]
    fn the_newest_outcome_decides() {
        let err = fixture("rate-limit").to_string();
        let answer = r#"{"type":"assistant","message":{"model":"m","content":[{"type":"text","text":"ok"}]}}"#;
        let user = r#"{"type":"user","message":{"content":"hi"}}"#;
        let joined = |ls: &[&str]| ls.join("\n");
        assert!(latest_claude_outcome(&joined(&[answer, &err, user])).is_some());
        assert_eq!(latest_claude_outcome(&joined(&[&err, user, answer])), None);
        assert_eq!(
            latest_claude_outcome(&joined(&["{\"type\":\"assis", user])),
            None
        );
        assert_eq!(latest_claude_outcome(""), None);
    }

    /// A refusal is raised once per record: the next probe seeing the same one is quiet.
    #[test]
    fn each_refusal_is_raised_once() {
        let a = from_claude_record(&fixture("rate-limit")).unwrap();
        let mut b = a.clone();
        b.at = "2026-12-01T14:00:00.000Z".into();
        assert_eq!(newly_raised(None, Some(&a)), Some(&a));
        assert_eq!(newly_raised(Some(&a), Some(&a)), None);
        assert_eq!(newly_raised(Some(&a), Some(&b)), Some(&b));
        assert_eq!(newly_raised(Some(&a), None), None);
    }

    /// Ordinary records are not API errors, whatever their text says.
    #[test]
    fn other_records_are_not_api_errors() {
        let mut answer = fixture("rate-limit");
        answer["isApiErrorMessage"] = Value::Bool(false);
        assert_eq!(from_claude_record(&answer), None);
        let user = serde_json::json!({"type": "user", "isApiErrorMessage": true});
        assert_eq!(from_claude_record(&user), None);
        let text = serde_json::json!({"type": "assistant", "message": {"content": [
            {"type": "text", "text": "API Error: 429 rate limited"}]}});
        assert_eq!(from_claude_record(&text), None);
    }
}

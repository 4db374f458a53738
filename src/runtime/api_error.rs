//! A live agent that cannot answer because its model API refused the turn (spec 10 §3,
//! notices): read from the runtime's structured files, never from screen prose.
//!
//! Claude Code 2.1.332 writes one transcript record per refused turn: `type: "assistant"`,
//! `isApiErrorMessage: true`, `error` (`rate_limit`, `server_error`, `authentication_failed`,
//! …), `apiErrorStatus` (the HTTP status), `apiErrorType` (the API's error type) and the text it
//! shows in `message.content`, with `message.model` `<synthetic>`. Recorded from the real CLI
//! against a stand-in answering 429, 529 and 401 (`tests/notices.rs`,
//! `tests/fixtures/claude-2.1.332/api-error-*.jsonl`). Codex, Gemini CLI and OpenCode are read
//! the same way from their own records (`from_codex_record`, `from_gemini_record`,
//! `from_opencode_message`; each recorded from the real CLI).

use serde_json::Value;

use crate::adapter::{ApiError, ApiErrorKind};

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
        resets_at: claude_reset(record),
        runtime_resumes: false,
    })
}

/// The reset time of a Claude Code refusal record, epoch seconds as written: a plan's usage
/// limit (`apiError: "usage_limit_reached"`) carries it in `apiErrorParams.rate_limit_info`
/// and `quotaLimits` (`resetsAt`); an API key's 429 carries none, whatever reset headers the
/// API sent (recorded: `tests/fixtures/claude-2.1.332/limits/`).
fn claude_reset(record: &Value) -> Option<String> {
    [
        &record["apiErrorParams"]["rate_limit_info"]["resetsAt"],
        &record["quotaLimits"]["resetsAt"],
    ]
    .into_iter()
    .find_map(|v| match v {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    })
}

/// Whether a Claude Code record says the refused turn continues by itself at the reset (the
/// `system` record written just after a usage-limit refusal: "Usage limit reached · set to
/// continue automatically at 5:50pm").
fn claude_continues_by_itself(record: &Value) -> bool {
    record["type"] == "system"
        && record["content"]
            .as_str()
            .is_some_and(|c| c.contains("continue automatically"))
}

/// The API error of the newest assistant record in `text` (a transcript's end, JSON lines;
/// a cut first line is skipped): `None` when the newest outcome is an answer, or there is
/// none (pure).
///
/// A refusal followed by Claude Code's word that it continues by itself at the reset is
/// marked [`ApiError::runtime_resumes`].
pub fn latest_claude_outcome(text: &str) -> Option<ApiError> {
    let mut resumes = false;
    for r in text
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if r["type"] == "assistant" {
            let mut e = from_claude_record(&r)?;
            e.runtime_resumes = resumes;
            return Some(e);
        }
        resumes |= claude_continues_by_itself(&r);
    }
    None
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

/// The API error a Codex rollout record carries, if it is one (pure): an `event_msg`
/// `task_complete` with an `error` whose `codex_error_info` names the model API.
///
/// Codex 0.171.0 ends every turn with `task_complete`; a refused turn's has `error`:
/// `message` (the text shown) and `codex_error_info`, a name (`usage_limit_exceeded`,
/// `server_overloaded`, `internal_server_error`, `unauthorized`, …) or a name with the HTTP
/// status (`{"response_too_many_failed_attempts":{"http_status_code":429}}`,
/// `{"http_connection_failed":{"http_status_code":401}}`). Recorded from the real CLI against
/// a stand-in answering a usage-limit 429, a plain 429, 503, 500 and 401 (`tests/notices.rs`,
/// `tests/fixtures/codex-0.171.0/api-error-*.jsonl`). Errors of Codex's own machinery
/// (`sandbox_error`, `bad_request`, `thread_rollback_failed`, `other`, …) are not API errors.
/// The record names no model and no reset time: [`latest_codex_outcome`] adds them from the
/// turn's other records.
pub fn from_codex_record(record: &Value) -> Option<ApiError> {
    let p = &record["payload"];
    if record["type"] != "event_msg" || p["type"] != "task_complete" {
        return None;
    }
    let error = p["error"].as_object()?;
    let info = &error.get("codex_error_info")?;
    // A bare name, or `{name: {http_status_code}}`.
    let (name, status) = match info {
        Value::String(name) => (name.clone(), None),
        Value::Object(o) => {
            let (name, detail) = o.iter().next()?;
            let status = detail["http_status_code"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok());
            (name.clone(), status)
        }
        _ => return None,
    };
    let kind = codex_kind(&name, status)?;
    Some(ApiError {
        kind,
        error_type: name,
        status,
        model: "unknown".into(),
        text: error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        at: record["timestamp"].as_str().unwrap_or("").to_string(),
        resets_at: None,
        runtime_resumes: false,
    })
}

/// The kind of a Codex `codex_error_info` (its name and HTTP status), `None` when it is not
/// the model API's refusal (pure).
fn codex_kind(name: &str, status: Option<u16>) -> Option<ApiErrorKind> {
    Some(match (name, status) {
        ("usage_limit_exceeded", _) | (_, Some(429)) => ApiErrorKind::RateLimit,
        ("unauthorized", _) | (_, Some(401)) => ApiErrorKind::Auth,
        ("server_overloaded" | "internal_server_error", _) | (_, Some(500..=599)) => {
            ApiErrorKind::Overloaded
        }
        (
            "context_window_exceeded"
            | "cyber_policy"
            | "http_connection_failed"
            | "response_stream_connection_failed"
            | "response_stream_disconnected"
            | "response_too_many_failed_attempts",
            _,
        )
        | (_, Some(_)) => ApiErrorKind::Other,
        _ => return None,
    })
}

/// Whether a Codex rollout record ends a turn: `task_complete` (answered or refused) or
/// `turn_aborted` (interrupted).
fn is_codex_outcome(r: &Value) -> bool {
    r["type"] == "event_msg"
        && matches!(
            r["payload"]["type"].as_str(),
            Some("task_complete" | "turn_aborted")
        )
}

/// The reset time of the fullest window of a `token_count` record's `rate_limits` (the
/// highest `used_percent`; of equals, the later reset), as Codex wrote it (epoch seconds).
fn fullest_reset(rate_limits: &Value) -> Option<String> {
    let windows = ["primary", "secondary"].map(|w| &rate_limits[w]);
    windows
        .into_iter()
        .filter(|w| !w["resets_at"].is_null())
        .max_by(|a, b| {
            let used = |w: &Value| w["used_percent"].as_f64().unwrap_or(0.0);
            used(a)
                .total_cmp(&used(b))
                .then(a["resets_at"].as_i64().cmp(&b["resets_at"].as_i64()))
        })
        .map(|w| match &w["resets_at"] {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        })
}

/// The API error of the newest turn outcome in `text` (a rollout's end, JSON lines; a cut
/// first line is skipped): `None` when that turn was answered, interrupted or failed for
/// another reason, or there is none (pure). The refused turn's own records (back to its
/// `task_started`) give the model (`turn_context`) and, for a usage limit, the reset time
/// (the newest `token_count`'s fullest window).
pub fn latest_codex_outcome(text: &str) -> Option<ApiError> {
    let records: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let end = records.iter().rposition(is_codex_outcome)?;
    let mut e = from_codex_record(&records[end])?;
    let turn = records[..end]
        .iter()
        .rev()
        .take_while(|r| !(r["type"] == "event_msg" && r["payload"]["type"] == "task_started"));
    let mut counted = false;
    for r in turn {
        if r["type"] == "turn_context" && e.model == "unknown" {
            if let Some(m) = r["payload"]["model"].as_str() {
                e.model = m.to_string();
            }
        } else if r["type"] == "event_msg" && r["payload"]["type"] == "token_count" && !counted {
            counted = true;
            e.resets_at = fullest_reset(&r["payload"]["rate_limits"]);
        }
    }
    Some(e)
}

/// The API error a Gemini CLI session record carries, if it is one (pure): a record of
/// `type: "error"` whose `content` is `[API Error: <the API's JSON error body>]`.
///
/// Gemini CLI 0.61.0 writes, when a turn is given up, an `error` record with the text it shows
/// (`✕ [API Error: …]`) and an `info` record after it; the body's `error.code` is the HTTP
/// status and `error.status` the API's word (`RESOURCE_EXHAUSTED`, `PERMISSION_DENIED`, …).
/// Recorded from the real CLI against a stand-in answering 429, 500 and 401
/// (`tests/gemini.rs`, `tests/fixtures/gemini-cli-0.61.0/api-error-*.session.jsonl`). Other
/// `error` records (not the model API's) are not API errors. The record names no model and no
/// reset time.
pub fn from_gemini_record(record: &Value) -> Option<ApiError> {
    if record["type"] != "error" {
        return None;
    }
    let text = record["content"].as_str()?;
    let inner = text.strip_prefix("[API Error: ")?;
    let inner = inner.strip_suffix(']').unwrap_or(inner);
    let body: Value = serde_json::from_str(inner).unwrap_or(Value::Null);
    let status = body["error"]["code"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok());
    let word = body["error"]["status"].as_str().unwrap_or("");
    let kind = match (status, word) {
        (Some(429), _) | (_, "RESOURCE_EXHAUSTED") => ApiErrorKind::RateLimit,
        (Some(401 | 403), _) | (_, "UNAUTHENTICATED" | "PERMISSION_DENIED") => ApiErrorKind::Auth,
        (Some(500..=599), _) | (_, "UNAVAILABLE" | "INTERNAL") => ApiErrorKind::Overloaded,
        _ => ApiErrorKind::Other,
    };
    Some(ApiError {
        kind,
        error_type: if word.is_empty() { "api_error" } else { word }.to_string(),
        status,
        model: "unknown".into(),
        text: text.to_string(),
        at: record["timestamp"].as_str().unwrap_or("").to_string(),
        resets_at: None,
        runtime_resumes: false,
    })
}

/// The API error of the newest turn outcome in `text` (a Gemini CLI session file's end, JSON
/// lines; a cut first line is skipped): the newest `gemini` record (an answer) or API-error
/// record decides; `None` when it is an answer or there is none (pure). A turn under way
/// after a refusal (its `user` record only) leaves the refusal current, as for Claude Code.
pub fn latest_gemini_outcome(text: &str) -> Option<ApiError> {
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|r| {
            if r["type"] == "gemini" {
                Some(None)
            } else {
                from_gemini_record(&r).map(Some)
            }
        })
        .flatten()
}

/// The API error an OpenCode assistant message (its `info`, as its server serves it) carries,
/// if it is one (pure): `error.name` `APIError` with `data.statusCode`, `data.message` (the
/// text shown) and `data.responseBody` (the API's body), or `ProviderAuthError`.
///
/// OpenCode 1.18.33 gives a turn up at once on an error it does not retry (a 401: one
/// request) and writes it on the turn's assistant message; a rate limit or server error it
/// retries with growing pauses, showing `[retrying in 23s attempt #5]` and serving the
/// session's status `{"type": "retry", "attempt", "message", "next"}` (still retrying at
/// attempt 5, 45 s in). Recorded from the real CLI against a stand-in answering 401, 429
/// and 500 (`tests/opencode.rs`, `tests/fixtures/opencode-1.18.33/api-error-*`). Other
/// errors (an interrupted turn's `MessageAbortedError`, …) are not API errors.
pub fn from_opencode_message(info: &Value) -> Option<ApiError> {
    if info["role"] != "assistant" {
        return None;
    }
    let name = info["error"]["name"].as_str()?;
    let data = &info["error"]["data"];
    let status = data["statusCode"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok());
    let kind = match (name, status) {
        ("ProviderAuthError", _) | ("APIError", Some(401 | 403)) => ApiErrorKind::Auth,
        ("APIError", Some(429)) => ApiErrorKind::RateLimit,
        ("APIError", Some(500..=599)) => ApiErrorKind::Overloaded,
        ("APIError", _) => ApiErrorKind::Other,
        _ => return None,
    };
    let body: Value = data["responseBody"]
        .as_str()
        .and_then(|b| serde_json::from_str(b).ok())
        .unwrap_or_default();
    let error_type = [&body["error"]["code"], &body["error"]["type"]]
        .into_iter()
        .find_map(Value::as_str)
        .unwrap_or(name);
    Some(ApiError {
        kind,
        error_type: error_type.to_string(),
        status,
        model: info["modelID"].as_str().unwrap_or("unknown").to_string(),
        text: data["message"].as_str().unwrap_or("").to_string(),
        at: info["time"]["created"].to_string(),
        resets_at: None,
        runtime_resumes: false,
    })
}

/// The API error of an OpenCode session's newest turn (pure): `messages` as `GET
/// /session/<id>/message` serves them, `status` the session's entry of `GET
/// /session/status` (absent when idle). A turn OpenCode is retrying is one, marked
/// [`ApiError::runtime_resumes`] (kind `Other`: the status names no HTTP status), once per
/// turn (its assistant message's creation time); else the newest assistant message's error,
/// if it is the API's.
pub fn latest_opencode_outcome(messages: &Value, status: Option<&Value>) -> Option<ApiError> {
    let turn = messages
        .as_array()?
        .iter()
        .rev()
        .map(|m| &m["info"])
        .find(|i| i["role"] == "assistant");
    if let Some(s) = status.filter(|s| s["type"] == "retry") {
        return Some(ApiError {
            kind: ApiErrorKind::Other,
            error_type: "retry".into(),
            status: None,
            model: turn
                .and_then(|t| t["modelID"].as_str())
                .unwrap_or("unknown")
                .to_string(),
            text: format!(
                "{} (OpenCode retries it: attempt {})",
                s["message"].as_str().unwrap_or(""),
                s["attempt"]
            ),
            at: turn.map_or("retry".into(), |t| t["time"]["created"].to_string()),
            resets_at: None,
            runtime_resumes: true,
        });
    }
    from_opencode_message(turn?)
}

/// The text of the recording `tests/fixtures/<rel>`.
#[cfg(test)]
fn recorded(rel: &str) -> String {
    let path = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

#[cfg(test)]
mod codex_tests {
    use super::*;

    fn text(name: &str) -> String {
        recorded(&format!("codex-0.171.0/{name}.jsonl"))
    }

    fn outcome(name: &str) -> Value {
        let t = text(name);
        let line = t.lines().last().unwrap();
        serde_json::from_str(line).unwrap()
    }

    /// The `resets_at` of a fixture's `token_count` window, as written.
    fn window_reset(name: &str, window: &str) -> String {
        let t = text(name);
        let r: Value = t
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["payload"]["type"] == "token_count")
            .unwrap();
        r["payload"]["rate_limits"][window]["resets_at"].to_string()
    }

    /// The records the real Codex 0.171.0 wrote for each refusal, read by kind with the
    /// model of the turn and, for a usage limit with rate-limit headers, the fullest window's
    /// reset.
    #[test]
    fn recorded_codex_refusals_are_read_by_kind() {
        use ApiErrorKind::*;
        for (name, kind, error_type, status, shown) in [
            (
                "usage-limit",
                RateLimit,
                "usage_limit_exceeded",
                None,
                "usage limit",
            ),
            (
                "usage-limit-unflagged",
                RateLimit,
                "usage_limit_exceeded",
                None,
                "usage limit",
            ),
            (
                "usage-limit-bare",
                RateLimit,
                "usage_limit_exceeded",
                None,
                "usage limit",
            ),
            (
                "rate-limit",
                RateLimit,
                "response_too_many_failed_attempts",
                Some(429),
                "429",
            ),
            (
                "overloaded",
                Overloaded,
                "server_overloaded",
                None,
                "capacity",
            ),
            (
                "server-error",
                Overloaded,
                "internal_server_error",
                None,
                "demand",
            ),
            ("auth", Auth, "http_connection_failed", Some(401), "401"),
        ] {
            let file = format!("api-error-{name}");
            let e = latest_codex_outcome(&text(&file)).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(e.kind, kind, "{name}");
            assert_eq!(e.error_type, error_type, "{name}");
            assert_eq!(e.status, status, "{name}");
            assert_eq!(e.model, "gpt-5.1", "{name}");
            assert!(e.text.contains(shown), "{name}: {}", e.text);
            assert!(e.at.starts_with("20"), "{name}: {}", e.at);
            let reset = match name {
                "usage-limit" | "usage-limit-unflagged" => Some(window_reset(&file, "primary")),
                _ => None,
            };
            assert_eq!(e.resets_at, reset, "{name}");
            // The record alone: the same refusal, without the turn's model and reset.
            let alone = from_codex_record(&outcome(&file)).unwrap();
            assert_eq!((alone.kind, alone.model.as_str()), (kind, "unknown"));
            assert_eq!(alone.resets_at, None, "{name}");
        }
    }

    /// The newest outcome decides: a refusal after an answer is current, an answered or
    /// interrupted turn after a refusal clears it; a turn under way and cut lines do not
    /// count. A later answered turn's rate limits (its windows at 100 %, the reached-type
    /// header sent) are not a refusal.
    #[test]
    fn the_newest_codex_outcome_decides() {
        let refused = text("api-error-usage-limit");
        let answered = text("api-answered");
        assert_eq!(latest_codex_outcome(&answered), None);
        assert!(latest_codex_outcome(&(answered.clone() + &refused)).is_some());
        assert_eq!(latest_codex_outcome(&(refused.clone() + &answered)), None);
        let started = answered.lines().next().unwrap();
        let under_way = format!("{refused}{started}\n");
        assert!(latest_codex_outcome(&under_way).is_some());
        let aborted = r#"{"timestamp":"2026-12-01T15:40:00.000Z","type":"event_msg","payload":{"type":"turn_aborted","reason":"interrupted"}}"#;
        assert_eq!(latest_codex_outcome(&format!("{refused}{aborted}\n")), None);
        let cut = &refused[refused.len() / 2..];
        assert_eq!(latest_codex_outcome(&cut[..cut.len() - 10]), None);
        assert_eq!(latest_codex_outcome(""), None);
    }

    /// Errors of Codex's own machinery and answered turns are not API errors, whatever
    /// their text says; an HTTP status alone makes an unknown name one.
    #[test]
    fn other_codex_records_are_not_api_errors() {
        let mut r = outcome("api-error-overloaded");
        for (info, api) in [
            (serde_json::json!("sandbox_error"), false),
            (serde_json::json!("bad_request"), false),
            (serde_json::json!("other"), false),
            (serde_json::json!("thread_rollback_failed"), false),
            (
                serde_json::json!({"some_new_failure": {"http_status_code": 418}}),
                true,
            ),
            (serde_json::json!("context_window_exceeded"), true),
        ] {
            r["payload"]["error"]["codex_error_info"] = info.clone();
            assert_eq!(from_codex_record(&r).is_some(), api, "{info}");
        }
        assert_eq!(from_codex_record(&outcome("api-answered")), None);
        let mut token_count = outcome("api-error-usage-limit");
        token_count["payload"]["type"] = "token_count".into();
        assert_eq!(from_codex_record(&token_count), None);
    }

    /// The fullest window's reset: the highest use, then the later reset; none without
    /// windows.
    #[test]
    fn the_fullest_window_gives_the_reset() {
        let w = |p: f64, pr: i64, s: f64, sr: i64| {
            serde_json::json!({"primary": {"used_percent": p, "resets_at": pr},
                "secondary": {"used_percent": s, "resets_at": sr}})
        };
        assert_eq!(
            fullest_reset(&w(100.0, 10, 40.0, 20)).as_deref(),
            Some("10")
        );
        assert_eq!(
            fullest_reset(&w(30.0, 10, 100.0, 20)).as_deref(),
            Some("20")
        );
        assert_eq!(
            fullest_reset(&w(100.0, 10, 100.0, 20)).as_deref(),
            Some("20")
        );
        let none = serde_json::json!({"primary": null, "secondary": null});
        assert_eq!(fullest_reset(&none), None);
        assert_eq!(fullest_reset(&Value::Null), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let text = recorded(&format!("claude-2.1.332/api-error-{name}.jsonl"));
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

    /// A plan's usage limit (recorded with the `anthropic-ratelimit-unified-*` headers): the
    /// refusal carries its reset (`resetsAt`, epoch seconds) and the `system` record after it
    /// says Claude Code continues by itself; once it did (its own prompt, then an answer),
    /// the newest outcome is an answer. An API key's 429 carries no reset, whatever headers.
    #[test]
    fn recorded_usage_limit_carries_its_reset_and_the_runtime_continues() {
        let read = |case: &str| {
            std::fs::read_to_string(format!(
                "{}/tests/fixtures/claude-2.1.332/limits/{case}/transcript.jsonl",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        };
        let e = latest_claude_outcome(&read("unified")).unwrap();
        assert_eq!(e.kind, ApiErrorKind::RateLimit);
        assert_eq!(e.resets_at.as_deref(), Some("1796579417"));
        assert!(e.runtime_resumes);
        assert!(e.text.contains("resets"), "{}", e.text);
        let continued = read("unified-continues");
        assert!(continued.contains("usage limit has reset"));
        assert_eq!(latest_claude_outcome(&continued), None);
        for case in ["plain", "retry-after", "ratelimit-reset"] {
            let e = latest_claude_outcome(&read(case)).unwrap();
            assert_eq!(
                (e.kind, e.resets_at, e.runtime_resumes),
                (ApiErrorKind::RateLimit, None, false),
                "{case}"
            );
        }
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

#[cfg(test)]
mod gemini_tests {
    use super::*;

    fn text(case: &str) -> String {
        recorded(&format!("gemini-cli-0.61.0/api-error-{case}.session.jsonl"))
    }

    /// The session files the real Gemini CLI 0.61.0 wrote: the 401 it gave up at once is
    /// read (kind, the API's word, the status); the 429 and 500 it was still retrying after
    /// 5 minutes left no record, so no refusal is read there.
    #[test]
    fn recorded_gemini_refusals_are_read_by_kind() {
        let e = latest_gemini_outcome(&text("auth")).expect("the 401");
        assert_eq!(e.kind, ApiErrorKind::Auth);
        assert_eq!(e.error_type, "PERMISSION_DENIED");
        assert_eq!(e.status, Some(401));
        assert!(e.text.starts_with("[API Error: "), "{}", e.text);
        assert!(e.at.starts_with("20"), "{}", e.at);
        for retried in ["rate-limit", "server-error"] {
            assert_eq!(latest_gemini_outcome(&text(retried)), None, "{retried}");
        }
    }

    /// The newest outcome decides: a refusal after an answer is current, an answer after a
    /// refusal clears it; a turn under way (its `user` record) and cut lines do not count;
    /// an `error` record that is not the API's is no refusal.
    #[test]
    fn the_newest_gemini_outcome_decides() {
        let refused = text("auth");
        let answer = r#"{"id":"a","timestamp":"2026-12-07T11:00:00.000Z","type":"gemini","content":"ok","model":"m"}"#;
        let user = r#"{"id":"u","timestamp":"2026-12-07T11:00:01.000Z","type":"user","content":[{"text":"next"}]}"#;
        assert!(latest_gemini_outcome(&format!("{answer}\n{refused}")).is_some());
        assert_eq!(latest_gemini_outcome(&format!("{refused}{answer}\n")), None);
        assert!(latest_gemini_outcome(&format!("{refused}{user}\n")).is_some());
        let own = r#"{"id":"e","timestamp":"2026-12-07T11:00:02.000Z","type":"error","content":"Failed to save the chat"}"#;
        assert_eq!(latest_gemini_outcome(&format!("{answer}\n{own}\n")), None);
        assert_eq!(
            latest_gemini_outcome(&format!("{answer}\n{own}\n{refused}")).map(|e| e.kind),
            Some(ApiErrorKind::Auth)
        );
        let cut = &refused[refused.len() - 40..];
        assert_eq!(latest_gemini_outcome(cut), None);
        assert_eq!(latest_gemini_outcome(""), None);
    }
}

#[cfg(test)]
mod opencode_tests {
    use super::*;

    fn json(name: &str) -> Value {
        serde_json::from_str(&recorded(&format!("opencode-1.18.33/{name}"))).unwrap()
    }

    /// The 401 OpenCode 1.18.33 gave up at once: read from the turn's assistant message.
    #[test]
    fn a_recorded_opencode_refusal_is_read() {
        let m = json("api-error-auth.messages.json");
        let e = latest_opencode_outcome(&m, None).unwrap();
        assert_eq!(e.kind, ApiErrorKind::Auth);
        assert_eq!(e.error_type, "invalid_api_key");
        assert_eq!(e.status, Some(401));
        assert_eq!(e.model, "standin-model");
        assert!(e.text.contains("Incorrect API key"), "{}", e.text);
        assert!(e.at.starts_with("17"), "{}", e.at);
        assert!(!e.runtime_resumes);
    }

    /// A 429 OpenCode keeps retrying: the session's recorded `retry` status is the refusal,
    /// marked as resumed by the runtime, the same for every attempt of the turn; the same
    /// messages without the status (the retry over) are no refusal.
    #[test]
    fn a_recorded_opencode_retry_is_a_refusal_the_runtime_resumes() {
        let m = json("api-error-rate-limit.messages.json");
        let status = json("api-error-rate-limit.status.json");
        let entry = status.as_object().unwrap().values().next().unwrap().clone();
        let e = latest_opencode_outcome(&m, Some(&entry)).unwrap();
        assert_eq!((e.kind, e.runtime_resumes), (ApiErrorKind::Other, true));
        assert!(e.text.contains("Rate limit reached"), "{}", e.text);
        assert!(e.text.contains("attempt 5"), "{}", e.text);
        let mut later = entry.clone();
        later["attempt"] = 6.into();
        let again = latest_opencode_outcome(&m, Some(&later)).unwrap();
        assert_eq!(newly_raised(Some(&e), Some(&again)), None);
        assert_eq!(latest_opencode_outcome(&m, None), None);
        let busy = serde_json::json!({"type": "busy"});
        assert_eq!(latest_opencode_outcome(&m, Some(&busy)), None);
    }

    /// Errors that are not the API's, and answered turns, are no refusal; kinds by status.
    #[test]
    fn other_opencode_errors_are_not_api_errors() {
        let m = json("api-error-auth.messages.json");
        let info = m.as_array().unwrap().last().unwrap()["info"].clone();
        let with = |name: &str, status: u64| {
            let mut i = info.clone();
            i["error"]["name"] = name.into();
            i["error"]["data"]["statusCode"] = status.into();
            from_opencode_message(&i).map(|e| e.kind)
        };
        assert_eq!(with("MessageAbortedError", 0), None);
        assert_eq!(with("UnknownError", 500), None);
        assert_eq!(with("APIError", 429), Some(ApiErrorKind::RateLimit));
        assert_eq!(with("APIError", 503), Some(ApiErrorKind::Overloaded));
        assert_eq!(with("APIError", 400), Some(ApiErrorKind::Other));
        assert_eq!(with("ProviderAuthError", 0), Some(ApiErrorKind::Auth));
        let mut answered = info.clone();
        answered.as_object_mut().unwrap().remove("error");
        assert_eq!(from_opencode_message(&answered), None);
        let mut user = info;
        user["role"] = "user".into();
        assert_eq!(from_opencode_message(&user), None);
    }
}

//! The notice board (spec 10 §3): live peers that cannot answer because their model API
//! refuses them (rate limit, overload, expired login), as read from the runtime's own files
//! ([`crate::runtime::api_error`]).
//!
//! A notice is keyed by `personality|runtime|kind|errorType|model`: a repeat of the same
//! refusal adds to its `count` and moves its `lastAt`; it expires [`NoticeLimits::ttl`] after
//! the last repeat (1 h, `IAPEER_NOTICE_TTL_MS`), and is cleared sooner when the same session
//! answers a turn again. The router alone changes the board and writes it to
//! `state/iapeer/notices.json` (atomically, mode 0600) after every change; `list`, `status`
//! and the fleet API read that file, dropping what has expired since. Missing or corrupt reads
//! as empty.
//!
//! Every decision here is a pure function of the board and the time, for unit tests.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::adapter::ApiError;
use crate::config::limits::NoticeLimits;
use crate::paths::Paths;

/// One notice: a peer's runtime refused by its model API, `count` times since `firstAt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// `nt-<8 hex>`: a hash of the key, stable across repeats and restarts.
    pub id: String,
    /// The peer.
    pub personality: String,
    /// Its runtime.
    pub runtime: String,
    /// The session's identity (`<runtime>-<personality>`).
    pub identity: String,
    /// `rate-limit`, `overloaded`, `auth` or `api-error`.
    pub kind: String,
    /// The runtime's own word for the refusal (Claude's `error`, e.g. `rate_limit`).
    pub error_type: String,
    /// The HTTP status, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The model the refused request named, as recorded (`<synthetic>` for Claude).
    pub model: String,
    /// What the runtime showed its user, last time.
    pub text: String,
    /// When the limit resets, as the runtime recorded it (Codex; Claude Code for a plan's
    /// usage limit), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<String>,
    /// Refusals seen.
    pub count: u32,
    /// The first refusal's time, RFC 3339.
    pub first_at: String,
    /// The last refusal's time, RFC 3339.
    pub last_at: String,
    /// When the notice goes if nothing repeats it, RFC 3339.
    pub expires_at: String,
    /// `expiresAt` in epoch ms.
    pub expires_ms: u64,
}

impl Notice {
    /// The board key: `personality|runtime|kind|errorType|model`.
    pub fn key(&self) -> String {
        key(
            &self.personality,
            &self.runtime,
            &self.kind,
            &self.error_type,
            &self.model,
        )
    }
}

/// The `kind` of a notice that a live agent waits for a human's approval (spec 10 §4, issue
/// 32 item 4): raised with each pending approval request, cleared with it; its `errorType`
/// is the request's tool, `model` empty.
pub const APPROVAL_KIND: &str = "approval";

/// The notices in force, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Board {
    /// The notices.
    pub notices: Vec<Notice>,
}

/// What one raise did to the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raised {
    /// The notice after it (new, or repeated).
    pub notice: Notice,
    /// True when the key was not on the board.
    pub new: bool,
}

/// `personality|runtime|kind|errorType|model`.
pub fn key(personality: &str, runtime: &str, kind: &str, error_type: &str, model: &str) -> String {
    format!("{personality}|{runtime}|{kind}|{error_type}|{model}")
}

/// `nt-` and the first 8 hex digits of the key's SHA-256.
pub fn id_of(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("nt-{hex}")
}

/// Whether `id` has the shape of a notice id (`nt-` and 8 lowercase hex digits).
pub fn valid_id(id: &str) -> bool {
    id.strip_prefix("nt-")
        .is_some_and(|h| h.len() == 8 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

fn rfc3339(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| format!("{t:.3}"))
        .unwrap_or_default()
}

impl Board {
    /// Read the board file; missing or not valid JSON of this shape reads as empty.
    pub fn load(paths: &Paths) -> Board {
        crate::fsutil::read_json_or_default(&file(paths))
    }

    /// Write the board file atomically (mode 0600).
    ///
    /// Errors: the write failed (the old file stays).
    pub fn save(&self, paths: &Paths) -> io::Result<()> {
        crate::fsutil::write_json_atomic(&file(paths), self, 0o600)
    }

    /// Record one refusal of `identity` (`runtime`-`personality`) at `now_ms`: a new notice,
    /// or a repeat of the one with the same key (count + 1, last time and text updated). Its
    /// expiry moves to `now_ms + ttl` (pure).
    pub fn raise(
        &mut self,
        personality: &str,
        runtime: &str,
        identity: &str,
        e: &ApiError,
        now_ms: u64,
        limits: NoticeLimits,
    ) -> Raised {
        let kind = e.kind.as_str();
        let k = key(personality, runtime, kind, &e.error_type, &e.model);
        let expires_ms = now_ms.saturating_add(limits.ttl.as_millis() as u64);
        let now = rfc3339(now_ms);
        if let Some(n) = self.notices.iter_mut().find(|n| n.key() == k) {
            n.count = n.count.saturating_add(1);
            n.last_at = now;
            n.text = e.text.clone();
            n.status = e.status;
            n.resets_at = e.resets_at.clone();
            n.expires_ms = expires_ms;
            n.expires_at = rfc3339(expires_ms);
            return Raised {
                notice: n.clone(),
                new: false,
            };
        }
        let n = Notice {
            id: id_of(&k),
            personality: personality.to_string(),
            runtime: runtime.to_string(),
            identity: identity.to_string(),
            kind: kind.to_string(),
            error_type: e.error_type.clone(),
            status: e.status,
            model: e.model.clone(),
            text: e.text.clone(),
            resets_at: e.resets_at.clone(),
            count: 1,
            first_at: now.clone(),
            last_at: now,
            expires_at: rfc3339(expires_ms),
            expires_ms,
        };
        self.notices.push(n.clone());
        Raised {
            notice: n,
            new: true,
        }
    }

    /// Record that `identity` waits for the approval request `approval` (its `tool` and
    /// `summary`) until `deadline_ms`, at `now_ms`: a notice of kind [`APPROVAL_KIND`] whose
    /// id is its own (pure). It expires with the request.
    #[allow(clippy::too_many_arguments)]
    pub fn raise_approval(
        &mut self,
        personality: &str,
        runtime: &str,
        identity: &str,
        approval: &str,
        tool: &str,
        summary: &str,
        now_ms: u64,
        deadline_ms: u64,
    ) -> Notice {
        let now = rfc3339(now_ms);
        let n = Notice {
            id: id_of(&key(personality, runtime, APPROVAL_KIND, approval, "")),
            personality: personality.to_string(),
            runtime: runtime.to_string(),
            identity: identity.to_string(),
            kind: APPROVAL_KIND.to_string(),
            error_type: tool.to_string(),
            status: None,
            model: String::new(),
            text: format!(
                "waits for a human's approval: {tool}: {summary} — iapeer approve {approval} | \
                 iapeer deny {approval}"
            ),
            resets_at: None,
            count: 1,
            first_at: now.clone(),
            last_at: now,
            expires_at: rfc3339(deadline_ms),
            expires_ms: deadline_ms,
        };
        self.notices.retain(|o| o.id != n.id);
        self.notices.push(n.clone());
        n
    }

    /// Take off the approval notice of request `approval` of `identity` (answered, closed or
    /// denied); returns it (pure).
    pub fn clear_approval(
        &mut self,
        personality: &str,
        runtime: &str,
        approval: &str,
    ) -> Option<Notice> {
        let id = id_of(&key(personality, runtime, APPROVAL_KIND, approval, ""));
        let at = self.notices.iter().position(|n| n.id == id)?;
        Some(self.notices.remove(at))
    }

    /// Take off every approval notice (pure): at the daemon's start, whose requests were all
    /// answered deny when the last daemon stopped (or died with it); returns them.
    pub fn clear_approvals(&mut self) -> Vec<Notice> {
        let (gone, kept) = std::mem::take(&mut self.notices)
            .into_iter()
            .partition(|n| n.kind == APPROVAL_KIND);
        self.notices = kept;
        gone
    }

    /// Take off the notices expired at `now_ms`; returns them (pure).
    pub fn expire(&mut self, now_ms: u64) -> Vec<Notice> {
        let (gone, kept) = std::mem::take(&mut self.notices)
            .into_iter()
            .partition(|n| n.expires_ms <= now_ms);
        self.notices = kept;
        gone
    }

    /// Take off every notice of `identity` (its session answered again); returns them (pure).
    /// An approval's notice stays: it goes with its request.
    pub fn clear(&mut self, identity: &str) -> Vec<Notice> {
        let (gone, kept) = std::mem::take(&mut self.notices)
            .into_iter()
            .partition(|n| n.identity == identity && n.kind != APPROVAL_KIND);
        self.notices = kept;
        gone
    }

    /// The notices still in force at `now_ms` (what readers show), oldest first (pure).
    pub fn current(&self, now_ms: u64) -> Vec<Notice> {
        self.notices
            .iter()
            .filter(|n| n.expires_ms > now_ms)
            .cloned()
            .collect()
    }
}

/// One line for people: `claude-cb: rate-limit (rate_limit, 429) ×2 since
/// 2026-12-01T15:21:06Z, resets …: <text> [nt-…]` (pure). The text is the runtime's (its
/// transcript, which the agent's program writes): the line shows its control characters as
/// visible stand-ins ([`crate::visible::line`]).
pub fn describe(n: &Notice) -> String {
    let mut s = format!("{}: {} ({}", n.identity, n.kind, n.error_type);
    if let Some(st) = n.status {
        s.push_str(&format!(", {st}"));
    }
    s.push(')');
    if n.count > 1 {
        s.push_str(&format!(" ×{}", n.count));
    }
    s.push_str(&format!(" since {}", n.first_at));
    if let Some(r) = &n.resets_at {
        s.push_str(&format!(", resets {r}"));
    }
    let text: String = n.text.chars().take(120).collect();
    if !text.is_empty() {
        s.push_str(&format!(": {text}"));
    }
    s.push_str(&format!(" [{}]", n.id));
    crate::visible::line(&s).into_owned()
}

/// `state/iapeer/notices.json`.
pub fn file(paths: &Paths) -> PathBuf {
    paths.state_dir().join("notices.json")
}

/// The notices in force now, read from the board file (for `list`, `status`, the fleet API).
pub fn current(paths: &Paths) -> Vec<Notice> {
    Board::load(paths).current(crate::clock::now_ms())
}

/// Whether a refusal recorded at `at` (RFC 3339) belongs to a session that woke at
/// `woke_at_ms` (epoch ms): not an old record left in a transcript the new session has not
/// written to yet. An unreadable time counts as belonging (pure).
pub fn of_this_session(at: &str, woke_at_ms: u64) -> bool {
    match at.parse::<jiff::Timestamp>() {
        Ok(t) => t.as_millisecond() >= i64::try_from(woke_at_ms).unwrap_or(i64::MAX) - 1000,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::ApiErrorKind;
    use std::time::Duration;

    fn refusal(kind: ApiErrorKind, error: &str, text: &str) -> ApiError {
        ApiError {
            kind,
            error_type: error.into(),
            status: Some(429),
            model: "<synthetic>".into(),
            text: text.into(),
            at: "2026-12-01T10:00:00.000Z".into(),
            resets_at: None,
            runtime_resumes: false,
        }
    }

    const HOUR: NoticeLimits = NoticeLimits {
        ttl: Duration::from_secs(3600),
    };

    #[test]
    fn a_repeat_counts_up_and_moves_the_expiry_a_new_key_is_a_new_notice() {
        let mut b = Board::default();
        let e = refusal(ApiErrorKind::RateLimit, "rate_limit", "first");
        let r = b.raise("cb", "claude", "claude-cb", &e, 1_000, HOUR);
        assert!(r.new);
        assert_eq!(r.notice.count, 1);
        assert_eq!(r.notice.expires_ms, 3_601_000);
        assert!(valid_id(&r.notice.id), "{}", r.notice.id);
        assert_eq!(
            r.notice.id,
            id_of("cb|claude|rate-limit|rate_limit|<synthetic>")
        );

        let e2 = refusal(ApiErrorKind::RateLimit, "rate_limit", "second");
        let r2 = b.raise("cb", "claude", "claude-cb", &e2, 5_000, HOUR);
        assert!(!r2.new);
        assert_eq!(r2.notice.id, r.notice.id);
        assert_eq!(r2.notice.count, 2);
        assert_eq!(r2.notice.text, "second");
        assert_eq!(r2.notice.first_at, r.notice.first_at);
        assert_eq!(r2.notice.expires_ms, 3_605_000);
        assert_eq!(b.notices.len(), 1);

        // Another kind, another runtime, another peer: each its own notice.
        let auth = refusal(ApiErrorKind::Auth, "authentication_failed", "login");
        assert!(b.raise("cb", "claude", "claude-cb", &auth, 6_000, HOUR).new);
        assert!(b.raise("cb", "codex", "codex-cb", &e, 6_000, HOUR).new);
        assert!(b.raise("dd", "claude", "claude-dd", &e, 6_000, HOUR).new);
        assert_eq!(b.notices.len(), 4);
        let ids: std::collections::HashSet<_> = b.notices.iter().map(|n| &n.id).collect();
        assert_eq!(ids.len(), 4);
    }

    #[test]
    fn an_approval_is_a_notice_of_its_own_until_its_request_ends() {
        let mut b = Board::default();
        let n = b.raise_approval(
            "cb",
            "claude",
            "claude-cb",
            "ap-0123abcd",
            "Bash",
            "rm a",
            1_000,
            301_000,
        );
        assert_eq!(n.kind, APPROVAL_KIND);
        assert!(valid_id(&n.id), "{}", n.id);
        assert_eq!(n.expires_ms, 301_000);
        assert!(
            n.text.contains("Bash: rm a") && n.text.contains("iapeer approve ap-0123abcd"),
            "{}",
            n.text
        );
        let other = b.raise_approval(
            "cb",
            "claude",
            "claude-cb",
            "ap-0123abce",
            "Bash",
            "rm a",
            2_000,
            302_000,
        );
        assert_ne!(other.id, n.id, "each request its own id");
        // The model answering again clears its API notices, not the approvals.
        let e = refusal(ApiErrorKind::RateLimit, "rate_limit", "slow down");
        b.raise("cb", "claude", "claude-cb", &e, 3_000, HOUR);
        assert_eq!(b.clear("claude-cb").len(), 1);
        assert_eq!(b.notices.len(), 2);
        assert_eq!(
            b.clear_approval("cb", "claude", "ap-0123abcd")
                .map(|n| n.id),
            Some(n.id)
        );
        assert!(b.clear_approval("cb", "claude", "ap-0123abcd").is_none());
        let approvals = |b: &Board| {
            b.current(0)
                .iter()
                .filter(|n| n.kind == APPROVAL_KIND)
                .count()
        };
        assert_eq!(approvals(&b), 1);
        assert_eq!(
            b.current(302_000)
                .iter()
                .filter(|n| n.kind == APPROVAL_KIND)
                .count(),
            0,
            "it expires with its request"
        );
        // A new daemon's start: every approval notice goes, an API notice stays.
        b.raise("cb", "claude", "claude-cb", &e, 4_000, HOUR);
        assert_eq!(b.clear_approvals().len(), 1);
        assert_eq!(approvals(&b), 0);
        assert_eq!(b.notices.len(), 1);
    }

    #[test]
    fn notices_expire_after_the_ttl_and_clear_per_identity() {
        let mut b = Board::default();
        let e = refusal(ApiErrorKind::Overloaded, "server_error", "busy");
        b.raise("cb", "claude", "claude-cb", &e, 0, HOUR);
        b.raise("dd", "claude", "claude-dd", &e, 1_800_000, HOUR);
        assert_eq!(b.current(3_599_999).len(), 2);
        assert_eq!(b.current(3_600_000).len(), 1, "expired at ttl exactly");
        assert!(b.expire(3_599_999).is_empty());
        let gone = b.expire(3_600_000);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].identity, "claude-cb");
        assert_eq!(b.clear("claude-cb"), vec![]);
        assert_eq!(b.clear("claude-dd").len(), 1);
        assert!(b.notices.is_empty());
    }

    #[test]
    fn the_board_file_round_trips_and_garbage_reads_empty() {
        let (_dir, paths) = Paths::temp();
        assert_eq!(Board::load(&paths), Board::default());
        let mut b = Board::default();
        let e = refusal(ApiErrorKind::RateLimit, "rate_limit", "x");
        b.raise("cb", "claude", "claude-cb", &e, 1_000, HOUR);
        b.save(&paths).unwrap();
        assert_eq!(Board::load(&paths), b);
        let text = std::fs::read_to_string(file(&paths)).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["notices"][0]["errorType"], "rate_limit", "{text}");
        std::fs::write(file(&paths), "{not json").unwrap();
        assert_eq!(Board::load(&paths), Board::default());
    }

    #[test]
    fn an_old_record_is_not_this_sessions() {
        let woke = "2026-12-01T10:00:00Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_millisecond() as u64;
        assert!(of_this_session("2026-12-01T10:00:05.123Z", woke));
        assert!(
            of_this_session("2026-12-01T09:59:59.500Z", woke),
            "clock slack"
        );
        assert!(!of_this_session("2026-12-01T09:00:00Z", woke));
        assert!(of_this_session("not a time", woke));
    }

    #[test]
    fn ids_have_one_shape() {
        assert!(valid_id("nt-0123abcd"));
        for bad in ["nt-0123ABCD", "nt-123", "og-0123abcd", "nt-0123abcde", ""] {
            assert!(!valid_id(bad), "{bad}");
        }
    }
}

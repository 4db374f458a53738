//! What a Claude Code screen shows (spec 04 §2 "claude": boot dialogs, readiness, busy, nags).
//!
//! [`classify`] is a pure function of the plain-text screen rows (`Screen::rows`); [`next_key`]
//! turns a dialog or nag into the one key to send now (see `term::menu`).

use crate::term::menu::{self as dialog, DialogStep};

mod prompt;
pub use prompt::permission_prompt;

/// What the screen shows, most urgent first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudeScreen {
    /// A boot dialog to answer. `wanted` is the label to choose by moving the `❯` cursor
    /// ([`dialog::step_towards`]); `None` means accept the default with Enter.
    Dialog {
        /// Short name for logs: `trust`, `bypass-permissions`, `custom-api-key`, `theme`,
        /// `claude-md-imports`, `mcp-server`, `resume-summary`.
        name: &'static str,
        /// Option label to choose; `None` = press Enter on the default.
        wanted: Option<&'static str>,
    },
    /// The login-method picker: Claude Code is not logged in. Do not answer; the wake fails.
    LoginRequired,
    /// `Unable to connect to Anthropic services`: do not answer; the wake fails.
    CannotConnect,
    /// Claude refused `--dangerously-skip-permissions` as root (`IS_SANDBOX=1` missing).
    RootRefused,
    /// A mid-session nag whose menu is the bottom-most `❯` block; dismiss with `wanted`.
    Nag {
        /// Short name for logs (`fullscreen-renderer`).
        name: &'static str,
        /// The "not now" option label.
        wanted: &'static str,
    },
    /// A tool's permission prompt ([`permission_prompt`]): put to a human through the
    /// approval broker (spec 10 §4) — a gated peer's by its hook, a bypass peer's from the
    /// screen. Never answered by the adapter, and nothing is pasted while it is open: Enter
    /// would choose `Yes`.
    PermissionPrompt,
    /// A turn is running (`esc to interrupt`).
    Busy,
    /// No dialog, the `❯` composer and `bypass permissions on` (or, gated, `manual mode on`)
    /// are on screen.
    Ready,
    /// Nothing recognised (still painting, or between states).
    Booting,
}

/// A boot dialog: every trigger text on screen (ignoring case) plus a menu that offers
/// `wanted`.
struct BootDialog {
    name: &'static str,
    triggers: &'static [&'static str],
    wanted: Option<&'static str>,
}

/// Boot dialogs seen on Claude Code 2.1.332 and the choice for each (spec 04 §2 table).
const BOOT_DIALOGS: &[BootDialog] = &[
    BootDialog {
        name: "trust",
        triggers: &["trust this folder"],
        wanted: Some("Yes, I trust this folder"),
    },
    BootDialog {
        // Asked since 2.1.x for `--add-dir /` in a session that never worked there.
        name: "add-dir",
        triggers: &["Adding a new directory"],
        wanted: Some("Yes, add it"),
    },
    BootDialog {
        name: "bypass-permissions",
        triggers: &["Bypass Permissions mode"],
        wanted: Some("Yes, I accept"),
    },
    BootDialog {
        name: "custom-api-key",
        triggers: &["Detected a custom API key"],
        wanted: Some("Yes"),
    },
    BootDialog {
        name: "theme",
        triggers: &["Choose the text style"],
        wanted: None,
    },
    BootDialog {
        name: "claude-md-imports",
        triggers: &["Allow external CLAUDE.md file imports?"],
        wanted: None,
    },
    BootDialog {
        name: "mcp-server",
        triggers: &["new MCP server", "found in"],
        wanted: Some("Use this MCP server"),
    },
    BootDialog {
        name: "resume-summary",
        triggers: &["Resume from summary"],
        wanted: Some("Resume full session as-is"),
    },
];

/// Mid-session nags: (name, trigger text, the "not now" label).
const NAGS: &[(&str, &str, &str)] = &[(
    "fullscreen-renderer",
    "Try the new fullscreen renderer?",
    "Not now",
)];

const ROOT_REFUSED: &str = "cannot be used with root/sudo privileges";
const CANNOT_CONNECT: &str = "Unable to connect to Anthropic services";
const LOGIN_PICKER: &[&str] = &["Select login method", "Claude account with subscription"];
const BUSY: &str = "esc to interrupt";
/// The status line of a ready composer: the bypass mode, or a gated peer's manual mode
/// (`⏸ manual mode on`, recorded in `tests/fixtures/claude-2.1.332/approvals/`).
const READY: &[&str] = &["bypass permissions on", "manual mode on"];

/// Classify a Claude Code screen from its rows.
///
/// Order: root refusal, cannot-connect, login picker, boot dialogs, nags, permission prompt,
/// busy, ready, booting.
/// A dialog or nag needs its trigger text (any case) AND a `❯` menu (the bottom-most `❯` block) that
/// offers its wanted label, so the same words in the conversation never count; a dialog whose
/// choice is the default needs only some menu.
pub fn classify<S: AsRef<str>>(rows: &[S]) -> ClaudeScreen {
    let text = rows
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join("\n");
    if text.contains(ROOT_REFUSED) {
        return ClaudeScreen::RootRefused;
    }
    if text.contains(CANNOT_CONNECT) {
        return ClaudeScreen::CannotConnect;
    }
    if LOGIN_PICKER.iter().any(|t| text.contains(t)) {
        return ClaudeScreen::LoginRequired;
    }
    let lower = text.to_lowercase();
    let shows = |trigger: &str| lower.contains(&trigger.to_lowercase());
    let menu = dialog::find_menu(rows);
    let offers = |wanted: Option<&str>| match (&menu, wanted) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(m), Some(w)) => m.position(w).is_some(),
    };
    for d in BOOT_DIALOGS {
        if d.triggers.iter().all(|t| shows(t)) && offers(d.wanted) {
            return ClaudeScreen::Dialog {
                name: d.name,
                wanted: d.wanted,
            };
        }
    }
    for &(name, trigger, wanted) in NAGS {
        if shows(trigger) && offers(Some(wanted)) {
            return ClaudeScreen::Nag { name, wanted };
        }
    }
    if permission_prompt(rows).is_some() {
        return ClaudeScreen::PermissionPrompt;
    }
    if text.contains(BUSY) {
        return ClaudeScreen::Busy;
    }
    let composer = rows
        .iter()
        .any(|r| r.as_ref().trim_start().starts_with(dialog::CLAUDE_MARKER));
    if composer && READY.iter().any(|r| text.contains(r)) {
        return ClaudeScreen::Ready;
    }
    ClaudeScreen::Booting
}

/// The one key to send now for `screen` (as classified from `rows`): the next step toward the
/// wanted option of a dialog or nag, Enter for a default-choice dialog, `None` for every other
/// state or while the menu is mid-redraw (wait for the next screen update).
pub fn next_key<S: AsRef<str>>(screen: &ClaudeScreen, rows: &[S]) -> Option<DialogStep> {
    match *screen {
        ClaudeScreen::Dialog {
            wanted: Some(label),
            ..
        }
        | ClaudeScreen::Nag { wanted: label, .. } => dialog::step_towards(rows, label),
        ClaudeScreen::Dialog { wanted: None, .. } => Some(DialogStep::Enter),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

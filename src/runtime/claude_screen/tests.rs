use super::*;
use crate::runtime::dialog::cursor_label;
use crate::term::{Screen, SESSION_COLS, SESSION_ROWS};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/claude-2.1.332/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn trust() -> ClaudeScreen {
    ClaudeScreen::Dialog {
        name: "trust",
        wanted: Some("Yes, I trust this folder"),
    }
}
fn api_key() -> ClaudeScreen {
    ClaudeScreen::Dialog {
        name: "custom-api-key",
        wanted: Some("Yes"),
    }
}
fn bypass() -> ClaudeScreen {
    ClaudeScreen::Dialog {
        name: "bypass-permissions",
        wanted: Some("Yes, I accept"),
    }
}

fn push_new<T: PartialEq>(v: &mut Vec<T>, item: T) {
    if v.last() != Some(&item) {
        v.push(item);
    }
}

/// Replay the whole recorded boot in small chunks, classifying every screen update.
fn replay_boot(step: usize) -> (Vec<ClaudeScreen>, Vec<(&'static str, DialogStep)>) {
    let bytes = fixture("boot-trust-apikey-bypass-ready-paste-busy.raw");
    let mut screen = Screen::new(SESSION_ROWS, SESSION_COLS);
    let mut states = Vec::new();
    let mut keys = Vec::new();
    let mut last_rows = Vec::new();
    for chunk in bytes.chunks(step) {
        screen.feed(chunk, true);
        let rows = screen.rows();
        if rows == last_rows {
            continue;
        }
        let state = classify(rows);
        if let (ClaudeScreen::Dialog { name, .. }, Some(key)) = (state, next_key(&state, rows)) {
            push_new(&mut keys, (name, key));
        }
        if state != ClaudeScreen::Booting {
            push_new(&mut states, state);
        }
        last_rows = rows.to_vec();
    }
    (states, keys)
}

#[test]
fn boot_fixture_visits_trust_apikey_bypass_ready_busy_in_order() {
    for step in [5, 29] {
        let (states, _) = replay_boot(step);
        assert_eq!(
            states,
            vec![
                trust(),
                api_key(),
                bypass(),
                ClaudeScreen::Ready,
                ClaudeScreen::Busy
            ],
            "chunks of {step} bytes"
        );
    }
}

#[test]
fn boot_fixture_dialog_keys_are_the_recorded_ones() {
    for step in [4, 11] {
        let (_, keys) = replay_boot(step);
        assert_eq!(
            keys,
            vec![
                ("trust", DialogStep::Down),
                ("trust", DialogStep::Enter),
                ("custom-api-key", DialogStep::Up),
                ("custom-api-key", DialogStep::Enter),
                ("bypass-permissions", DialogStep::Down),
                ("bypass-permissions", DialogStep::Enter),
            ],
            "chunks of {step} bytes"
        );
    }
}

#[test]
fn trust_dialog_fixture_alone() {
    let mut screen = Screen::new(SESSION_ROWS, SESSION_COLS);
    screen.feed(&fixture("trust-dialog.raw"), true);
    let rows = screen.rows();
    let state = classify(rows);
    assert_eq!(state, trust());
    assert_eq!(cursor_label(rows).as_deref(), Some("No, exit"));
    assert_eq!(next_key(&state, rows), Some(DialogStep::Down));
}

const RULE: &str = "──────────────────────";

#[test]
fn failures_are_recognised() {
    let login = [
        " Select login method:",
        "",
        " ❯ 1. Claude account with subscription · Pro, Max, Team, or Enterprise",
        "   2. Anthropic Console account · API usage billing",
    ];
    assert_eq!(classify(&login), ClaudeScreen::LoginRequired);
    assert_eq!(next_key(&ClaudeScreen::LoginRequired, &login), None);
    let offline = [
        "Unable to connect to Anthropic services",
        "",
        "Failed to connect",
    ];
    assert_eq!(classify(&offline), ClaudeScreen::CannotConnect);
    let root = ["--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"];
    assert_eq!(classify(&root), ClaudeScreen::RootRefused);
    assert_eq!(
        classify(&["", "  Claude Code v2.1.332", ""]),
        ClaudeScreen::Booting
    );
}

#[test]
fn default_choice_dialogs_press_enter() {
    let theme = [
        " Choose the text style that looks best with your terminal",
        "",
        " ❯ 1. Dark mode ✔",
        "   2. Light mode",
    ];
    let state = classify(&theme);
    assert_eq!(
        state,
        ClaudeScreen::Dialog {
            name: "theme",
            wanted: None
        }
    );
    assert_eq!(next_key(&state, &theme), Some(DialogStep::Enter));
}

#[test]
fn mcp_and_resume_dialogs_choose_by_label() {
    let mcp = [
        " New MCP server found in .mcp.json: iapeer",
        "",
        " ❯ 1. Use this and all future MCP servers in this project",
        "   2. Use this MCP server",
        "   3. Continue without using this MCP server",
    ];
    let state = classify(&mcp);
    assert_eq!(
        state,
        ClaudeScreen::Dialog {
            name: "mcp-server",
            wanted: Some("Use this MCP server")
        }
    );
    assert_eq!(next_key(&state, &mcp), Some(DialogStep::Down));
    let resume = [
        " This session is 9h 44m old and 540k tokens.",
        "",
        " ❯ 1. Resume from summary (recommended)",
        "   2. Resume full session as-is",
        "   3. Don't ask me again",
    ];
    let state = classify(&resume);
    assert_eq!(
        state,
        ClaudeScreen::Dialog {
            name: "resume-summary",
            wanted: Some("Resume full session as-is")
        }
    );
    assert_eq!(next_key(&state, &resume), Some(DialogStep::Down));
}

#[test]
fn nag_only_when_its_menu_is_the_bottom_block() {
    let nag = [
        "❯ earlier message",
        "",
        "  Try the new fullscreen renderer?",
        "",
        "  ❯ 1. Yes, try it",
        "    2. Not now",
        "",
        "  Enter to confirm · Esc to cancel",
    ];
    let state = classify(&nag);
    assert_eq!(
        state,
        ClaudeScreen::Nag {
            name: "fullscreen-renderer",
            wanted: "Not now"
        }
    );
    assert_eq!(next_key(&state, &nag), Some(DialogStep::Down));

    // The same words in the conversation above a live composer are not a nag.
    let mut talk: Vec<&str> = nag[..6].to_vec();
    talk.extend([
        RULE,
        "❯",
        RULE,
        "  ⏵⏵ bypass permissions on (shift+tab to cycle)",
    ]);
    assert_eq!(classify(&talk), ClaudeScreen::Ready);
}

#[test]
fn dialog_words_without_their_menu_do_not_count() {
    let rows = [
        "❯ what does Bypass Permissions mode mean?",
        "",
        RULE,
        "❯",
        RULE,
        "  ⏵⏵ bypass permissions on (shift+tab to cycle) · esc to interrupt",
    ];
    assert_eq!(classify(&rows), ClaudeScreen::Busy);
    let idle = rows.map(|r| r.replace(" · esc to interrupt", ""));
    assert_eq!(classify(&idle), ClaudeScreen::Ready);
}

/// Recorded by iapeer itself (the session's pane log): `--add-dir /` makes Claude Code
/// 2.1.332 ask whether to add `/` after the trust dialog; the cursor starts on `No, exit`.
#[test]
fn add_dir_dialog_fixture() {
    let mut screen = Screen::new(SESSION_ROWS, SESSION_COLS);
    screen.feed(&fixture("trust-then-add-dir.raw"), true);
    let rows = screen.rows();
    let state = classify(rows);
    assert_eq!(
        state,
        ClaudeScreen::Dialog {
            name: "add-dir",
            wanted: Some("Yes, add it")
        }
    );
    assert_eq!(cursor_label(rows).as_deref(), Some("No, exit"));
    assert_eq!(next_key(&state, rows), Some(DialogStep::Down));
}

#[test]
fn a_gated_peer_is_ready_in_manual_mode() {
    // Claude Code 2.1.332 started with `--permission-mode manual` (a gated peer, spec 10 §4):
    // the status line says `⏸ manual mode on` where the bypass launch says `bypass
    // permissions on`.
    let bytes = fixture("approvals/ready-manual-mode.raw");
    let mut screen = Screen::new(SESSION_ROWS, SESSION_COLS);
    screen.feed(&bytes, true);
    let rows = screen.rows();
    assert!(
        rows.iter().any(|r| r.contains("manual mode on")),
        "{rows:#?}"
    );
    assert_eq!(classify(rows), ClaudeScreen::Ready);
}

#[test]
fn a_permission_prompt_is_neither_answered_nor_a_composer() {
    // The pane of a gated session (tests/approvals.rs) while its Bash call waits for a human:
    // Claude Code draws its own prompt, the `❯` on `1. Yes`, beside the hook.
    let bytes = fixture("approvals/permission-dialog.raw");
    let mut screen = Screen::new(SESSION_ROWS, SESSION_COLS);
    screen.feed(&bytes, true);
    let rows = screen.rows();
    let state = classify(rows);
    assert_eq!(state, ClaudeScreen::PermissionPrompt, "{rows:#?}");
    assert_eq!(next_key(&state, rows), None);
    // The same words in the conversation without the menu are not a prompt.
    assert_eq!(
        classify(&[
            "● Do you want to proceed? I can do it.",
            "❯ ",
            "  ⏸ manual mode on"
        ]),
        ClaudeScreen::Ready
    );
}

use super::*;
use crate::term::menu::cursor_label;
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

/// The boot recording, fed in chunks of several sizes, visits trust, API key, bypass, ready,
/// busy in order, and the keys pressed on the dialogs are the recorded ones.
#[test]
fn boot_fixture_visits_trust_apikey_bypass_ready_busy_with_the_recorded_keys() {
    let want_states = vec![
        trust(),
        api_key(),
        bypass(),
        ClaudeScreen::Ready,
        ClaudeScreen::Busy,
    ];
    let want_keys = vec![
        ("trust", DialogStep::Down),
        ("trust", DialogStep::Enter),
        ("custom-api-key", DialogStep::Up),
        ("custom-api-key", DialogStep::Enter),
        ("bypass-permissions", DialogStep::Down),
        ("bypass-permissions", DialogStep::Enter),
    ];
    for step in [4, 5, 11, 29] {
        let (states, keys) = replay_boot(step);
        assert_eq!(states, want_states, "chunks of {step} bytes");
        assert_eq!(keys, want_keys, "chunks of {step} bytes");
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

/// Asserts that `rows` read as `want` and that the key iapeer presses on them is `key`.
fn assert_reads_as<S: AsRef<str> + std::fmt::Debug>(
    rows: &[S],
    want: ClaudeScreen,
    key: DialogStep,
) {
    let state = classify(rows);
    assert_eq!(state, want, "{rows:#?}");
    assert_eq!(next_key(&state, rows), Some(key), "{rows:#?}");
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
    assert_reads_as(
        &theme,
        ClaudeScreen::Dialog {
            name: "theme",
            wanted: None,
        },
        DialogStep::Enter,
    );
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
    assert_reads_as(
        &mcp,
        ClaudeScreen::Dialog {
            name: "mcp-server",
            wanted: Some("Use this MCP server"),
        },
        DialogStep::Down,
    );
    let resume = [
        " This session is 9h 44m old and 540k tokens.",
        "",
        " ❯ 1. Resume from summary (recommended)",
        "   2. Resume full session as-is",
        "   3. Don't ask me again",
    ];
    assert_reads_as(
        &resume,
        ClaudeScreen::Dialog {
            name: "resume-summary",
            wanted: Some("Resume full session as-is"),
        },
        DialogStep::Down,
    );
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
    assert_reads_as(
        &nag,
        ClaudeScreen::Nag {
            name: "fullscreen-renderer",
            wanted: "Not now",
        },
        DialogStep::Down,
    );

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
    assert_eq!(cursor_label(rows).as_deref(), Some("No, exit"));
    assert_reads_as(
        rows,
        ClaudeScreen::Dialog {
            name: "add-dir",
            wanted: Some("Yes, add it"),
        },
        DialogStep::Down,
    );
}

#[test]
fn a_gated_peer_is_ready_in_manual_mode() {
    // Claude Code 2.1.332 started with `--permission-mode manual` (a gated peer, spec 10 §4):
    // the status line says `⏸ manual mode on` where the bypass launch says `bypass
    // permissions on`.
    let rows = final_rows("ready-manual-mode.raw");
    assert!(
        rows.iter().any(|r| r.contains("manual mode on")),
        "{rows:#?}"
    );
    assert_eq!(classify(&rows), ClaudeScreen::Ready);
}

#[test]
fn a_permission_prompt_is_neither_answered_nor_a_composer() {
    // The pane of a gated session (tests/approvals.rs) while its Bash call waits for a human:
    // Claude Code draws its own prompt, the `❯` on `1. Yes`, beside the hook.
    let rows = final_rows("permission-dialog.raw");
    let state = classify(&rows);
    assert_eq!(state, ClaudeScreen::PermissionPrompt, "{rows:#?}");
    assert_eq!(next_key(&state, &rows), None);
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

/// The screen at the end of a recorded pane log (`approvals/<name>`), at the session size.
fn final_rows(name: &str) -> Vec<String> {
    let mut screen = Screen::new(SESSION_ROWS, SESSION_COLS);
    screen.feed(&fixture(&format!("approvals/{name}")), true);
    screen.rows().to_vec()
}

/// The permission prompt on the screen at the end of `approvals/<name>`; panics with the
/// screen when there is none.
fn recorded_prompt(name: &str) -> crate::adapter::PermissionPrompt {
    let rows = final_rows(name);
    permission_prompt(&rows).unwrap_or_else(|| panic!("{name}: {rows:#?}"))
}

#[test]
fn a_bypass_ask_rule_prompt_is_read_whole() {
    let rows = final_rows("bypass-ask-rule-prompt.raw");
    let p = recorded_prompt("bypass-ask-rule-prompt.raw");
    assert_eq!(p.tool, "Bash");
    assert!(
        p.summary.starts_with("rm /tmp/") && p.summary.ends_with("/made/a"),
        "{p:?}"
    );
    assert_eq!(
        p.reason,
        "Rule Bash(rm:*) from shared project settings says to ask."
    );
    assert_eq!(p.options, ["Yes", "No"]);
    assert_eq!((p.approve, p.deny, p.cursor), (0, 1, Some(0)));
    assert_eq!(classify(&rows), ClaudeScreen::PermissionPrompt);
}

#[test]
fn a_hook_that_asks_brings_up_the_same_prompt_with_its_reason() {
    let p = recorded_prompt("bypass-hook-ask-prompt.raw");
    assert_eq!(p.tool, "Bash");
    assert!(p.summary.starts_with("touch /tmp/"), "{p:?}");
    assert!(p.summary.ends_with("/made/hook-asks"), "{p:?}");
    assert_eq!(
        p.reason,
        "Hook PreToolUse:Bash requires confirmation for this command: the project hook wants a \
         human [settings]"
    );
    assert_eq!((p.approve, p.deny), (0, 1));
}

#[test]
fn write_edit_and_mcp_prompts_name_their_tool_and_request() {
    let cases = [
        ("bypass-write-prompt.raw", "Write", "../../../made/w"),
        ("bypass-edit-prompt.raw", "Edit", "../../../made/e"),
        (
            "bypass-mcp-prompt.raw",
            "MCP tool",
            "iapeer — Send to IAP peer Tool: (MCP) message: \"hello from the prompt\" \
             personality: \"ea\"",
        ),
    ];
    for (name, tool, summary) in cases {
        let p = recorded_prompt(name);
        assert_eq!(
            (p.tool.as_str(), p.summary.as_str()),
            (tool, summary),
            "{name}"
        );
        assert_eq!(p.options[p.approve], "Yes", "{name}");
        assert_eq!(p.options[p.deny], "No", "{name}");
    }
    let mcp = permission_prompt(&final_rows("bypass-mcp-prompt.raw")).unwrap();
    assert_eq!(mcp.options.len(), 3, "{mcp:?}");
    assert_eq!(mcp.deny, 2);
    assert_eq!(
        mcp.reason,
        "Rule mcp__iapeer__send_to_peer from shared project settings says to ask."
    );
}

#[test]
fn a_gated_prompt_is_read_too_and_an_answered_one_is_gone() {
    let p = recorded_prompt("permission-dialog.raw");
    assert_eq!(p.tool, "Bash");
    assert!(p.summary.starts_with("touch "), "{p:?}");
    assert_eq!((p.approve, p.deny, p.options.len()), (0, 3, 4));
    for closed in [
        "bypass-ask-rule-approved.raw",
        "bypass-hook-ask-denied.raw",
        "bypass-ask-rule-esc.raw",
        "ready-manual-mode.raw",
    ] {
        let rows = final_rows(closed);
        assert_eq!(permission_prompt(&rows), None, "{closed}: {rows:#?}");
    }
    // The words without the frame's menu and footer are no prompt; nor is a boot dialog.
    assert_eq!(
        permission_prompt(&[
            "● Do you want to proceed? I can do it.",
            "❯ 1. Yes",
            "  2. No",
        ]),
        None
    );
    assert_eq!(
        permission_prompt(&[
            "Do you want to use this API key?",
            "",
            "❯ 1. Yes",
            "  2. No (recommended)",
            "",
            "Enter to confirm · Esc to cancel",
        ]),
        None
    );
}

/// The keys that answer a prompt, replayed from the recordings: Enter on `Yes` ran the
/// command (`bypass-ask-rule-approved.raw`); Down, then Enter on `No` refused it and ended
/// the turn (`bypass-hook-ask-denied.raw`: `Interrupted · What should Claude do instead?`).
#[test]
fn the_recorded_answers_move_to_their_option_then_enter() {
    let p = permission_prompt(&final_rows("bypass-hook-ask-prompt.raw")).unwrap();
    let menu = dialog::find_menu(&final_rows("bypass-hook-ask-prompt.raw")).unwrap();
    assert_eq!(
        dialog::step_to_index(&menu, p.approve),
        Some(DialogStep::Enter)
    );
    assert_eq!(dialog::step_to_index(&menu, p.deny), Some(DialogStep::Down));
    let denied = final_rows("bypass-hook-ask-denied.raw").join("\n");
    assert!(
        denied.contains("Interrupted · What should Claude do instead?"),
        "{denied}"
    );
    let approved = final_rows("bypass-ask-rule-approved.raw").join("\n");
    assert!(approved.contains("Done"), "{approved}");
}

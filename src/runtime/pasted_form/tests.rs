//! One test per recorded transformation (`tests/fixtures/<runtime>-<version>/paste/<case>.json`,
//! recorded by `tests/paste_transforms.rs`): what the runtime did to the paste, exactly, and
//! that the confirmation finds the message where the runtime put it.

use super::*;
use crate::runtime::transcript::record_contains;
use crate::runtime::Acceptance;
use serde_json::{json, Value};

/// A recorded case of `runtime` (`claude-2.1.332`, `codex-0.171.0`).
fn case(runtime: &str, name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(runtime)
        .join("paste")
        .join(format!("{name}.json"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// The session screen (220×50) after the recorded pane log `file` of `runtime`.
fn screen(runtime: &str, file: &str) -> crate::term::Screen {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(runtime)
        .join("paste")
        .join(file);
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut screen = crate::term::Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
    screen.feed(&raw, true);
    screen
}

fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {}", v["case"]))
}

/// Claude Code's case `name`: the model got `expected(pasted)`, the transcript holds the
/// same, and the confirmation (its transcript's `user` record) takes it; a changed text is
/// not found as pasted.
fn claude_case(name: &str, expected: impl Fn(&str) -> String) {
    let c = case("claude-2.1.332", name);
    let (pasted, model, transcript) = (
        field(&c, "pasted"),
        field(&c, "model"),
        field(&c, "transcript"),
    );
    assert_eq!(model, expected(pasted), "what the model got");
    assert_eq!(transcript, model, "the transcript holds what the model got");
    assert_eq!(claude(pasted), claude(transcript));
    let user = json!({"type": "user", "message": {"role": "user", "content": transcript}});
    assert_eq!(
        crate::runtime::claude::acceptance_from_records(&[user], pasted, Acceptance::Pending),
        Acceptance::Accepted,
        "{name}: confirmed"
    );
    if transcript != pasted {
        assert!(
            !transcript.contains(pasted),
            "{name}: the runtime changed it"
        );
    }
}

/// Codex's case `name`: the model got the paste with LF line breaks, the session file holds
/// the same, and the confirmation (its user record) takes it.
fn codex_case(name: &str) {
    let c = case("codex-0.171.0", name);
    let (pasted, model, rollout) = (
        field(&c, "pasted"),
        field(&c, "model"),
        field(&c, "rollout"),
    );
    assert_eq!(
        model,
        pasted.replace("\r\n", "\n").replace('\r', "\n"),
        "what the model got"
    );
    assert_eq!(rollout, model, "the session file holds what the model got");
    let user = json!({"type": "response_item", "payload": {"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": rollout}]}});
    assert!(record_contains(&user, pasted, codex), "{name}: confirmed");
}

/// `text` without the characters `gone`.
fn without(text: &str, gone: &[char]) -> String {
    text.chars().filter(|c| !gone.contains(c)).collect()
}

fn tabs_as_4(text: &str) -> String {
    text.replace('\t', "    ")
}

fn lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

fn same(text: &str) -> String {
    text.to_string()
}

#[test]
fn claude_tab_is_four_spaces() {
    claude_case("tab", tabs_as_4);
}

#[test]
fn claude_tab_is_four_spaces_not_the_next_tab_stop() {
    claude_case("tab-stops", tabs_as_4);
}

#[test]
fn claude_trailing_spaces_stay_and_a_trailing_tab_is_four_spaces() {
    claude_case("trailing-spaces", tabs_as_4);
}

#[test]
fn claude_blank_lines_stay() {
    claude_case("blank-lines", tabs_as_4);
}

#[test]
fn claude_two_hundred_lines_with_tabs() {
    claude_case("many-lines", tabs_as_4);
}

#[test]
fn claude_crlf_is_lf() {
    claude_case("crlf", lf);
}

#[test]
fn claude_lone_cr_is_lf() {
    claude_case("lone-cr", lf);
}

#[test]
fn claude_line_and_paragraph_separators_are_lf() {
    claude_case("line-separators", |t| {
        t.replace(['\u{2028}', '\u{2029}'], "\n")
    });
}

#[test]
fn claude_drops_zero_width_characters() {
    let zw = [
        '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}', '\u{AD}',
    ];
    claude_case("zero-width", |t| without(t, &zw));
}

#[test]
fn claude_drops_bidi_controls() {
    let bidi = [
        '\u{202E}', '\u{202C}', '\u{200E}', '\u{200F}', '\u{2066}', '\u{2069}',
    ];
    claude_case("bidi", |t| without(t, &bidi));
}

#[test]
fn claude_drops_format_characters_and_default_ignorables() {
    let gone = [
        '\u{034F}',
        '\u{061C}',
        '\u{115F}',
        '\u{1160}',
        '\u{180E}',
        '\u{2061}',
        '\u{2064}',
        '\u{206A}',
        '\u{3164}',
        '\u{FE00}',
        '\u{FE0F}',
        '\u{FFA0}',
        '\u{FFF9}',
        '\u{E0001}',
        '\u{E0041}',
        '\u{E0100}',
        '\u{1D173}',
    ];
    claude_case("format-chars", |t| without(t, &gone));
    // Kept: braille blank, private use, object replacement.
    let c = case("claude-2.1.332", "format-chars");
    assert!(field(&c, "model").contains("\u{2800}s\u{E000}t\u{FFFC}u"));
}

/// The cases both Claude Code and Codex record as pasted, unchanged.
const KEPT_BY_BOTH: [&str; 11] = [
    "trailing-newlines",
    "leading-blank",
    "space-runs",
    "nbsp",
    "controls",
    "combining",
    "emoji",
    "envelope-escapes",
    "backslash",
    "line-starts",
    "long-line",
];

#[test]
fn claude_keeps_what_it_does_not_change() {
    for name in KEPT_BY_BOTH {
        claude_case(name, same);
    }
}

/// A message pasted mid-turn: Claude Code's queue record (`enqueue`) holds it as the
/// transcript does, tabs as spaces; queued, then accepted.
#[test]
fn claude_queue_records_hold_the_changed_text() {
    claude_case("tab-mid-turn", tabs_as_4);
    let c = case("claude-2.1.332", "tab-mid-turn");
    let (pasted, enqueue) = (field(&c, "pasted"), field(&c, "enqueue"));
    assert_eq!(enqueue, tabs_as_4(pasted));
    let queued = json!({"type": "queue-operation", "operation": "enqueue", "content": enqueue});
    assert_eq!(
        crate::runtime::claude::acceptance_from_records(&[queued], pasted, Acceptance::Pending),
        Acceptance::Queued
    );
}

/// After an interrupt Claude Code puts the prompt back into its composer as it took it (a TAB
/// as spaces, zero-width characters gone): iapeer knows it for its own in that form
/// (`interrupt-restores-tab-prompt.raw`); as pasted it would be a draft.
#[test]
fn claude_an_interrupted_prompt_is_known_in_its_form() {
    use crate::adapter::Adapter;
    use crate::session::own_text::Tracker;
    let screen = screen("claude-2.1.332", "interrupt-restores-tab-prompt.raw");
    let c = crate::runtime::claude::Claude::with_program("/bin/claude".into());
    let content = c.composer_content(&screen).expect("the prompt is back");
    let header = content.lines().next().unwrap();
    assert!(header.starts_with("<iap from=\"ea\""), "{content}");
    let pasted = format!(
        "{header}\nReply via send_to_peer.\n<msg>PT-BUSY interrupted\tcol\u{200B}zw\u{2060}wj\nsecond line\tend</msg>\n</iap>"
    );
    let t0 = std::time::Instant::now();
    let mut own = Tracker::default();
    own.pasting(1, &c.pasted_form(&pasted), t0);
    own.ended(1, true, t0);
    own.interrupted(t0, true);
    assert_eq!(
        own.find(&c.pasted_form(&content), t0).map(|o| o.id),
        Some(1)
    );
    let mut as_pasted = Tracker::default();
    as_pasted.pasting(1, &pasted, t0);
    as_pasted.ended(1, true, t0);
    assert_eq!(as_pasted.find(&content, t0), None, "zero-width characters");
}

#[test]
fn codex_keeps_tabs_spaces_and_unicode_in_its_records() {
    let codex_only = [
        "tab",
        "tab-stops",
        "trailing-spaces",
        "blank-lines",
        "zero-width",
        "bidi",
        "line-separators",
        "format-chars",
        "many-lines",
    ];
    for name in KEPT_BY_BOTH.into_iter().chain(codex_only) {
        codex_case(name);
        let c = case("codex-0.171.0", name);
        assert_eq!(field(&c, "model"), field(&c, "pasted"), "{name}");
    }
}

#[test]
fn codex_crlf_is_lf() {
    codex_case("crlf");
}

#[test]
fn codex_lone_cr_is_lf() {
    codex_case("lone-cr");
}

/// Codex's queue preview drops a TAB (`tab-mid-turn.raw`: `a\tb` drawn as `ab`): the message
/// is known there in Codex's form, and not as pasted.
#[test]
fn codex_preview_drops_a_tab() {
    codex_case("tab-mid-turn");
    let c = case("codex-0.171.0", "tab-mid-turn");
    let pasted = field(&c, "pasted");
    let screen = screen("codex-0.171.0", "tab-mid-turn.raw");
    assert!(screen.text().contains("<msg>PT-tab-mid-turn ab"));
    assert!(crate::runtime::codex::pending_input_shows(
        screen.text(),
        pasted
    ));
}

#[test]
fn forms_are_idempotent() {
    for text in [
        "a\tb\r\nc\rd\u{2028}e\u{200B}f",
        "👨\u{200D}👩 x\u{FE0F}",
        "",
    ] {
        assert_eq!(claude(&claude(text)), claude(text));
        assert_eq!(codex(&codex(text)), codex(text));
    }
    assert_eq!(claude("a\tb\r\nc\u{2029}d\u{200B}"), "a    b\nc\nd");
    assert_eq!(codex("a\tb\r\nc\rd\u{200B}"), "ab\nc\nd\u{200B}");
}

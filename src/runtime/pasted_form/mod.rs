//! What each runtime makes of the text iapeer pastes (issue 32 item 6): the comparison form in
//! which a pasted text and what the runtime shows of it — its transcript or session file, its
//! model request, its screen — are the same. One pure function per runtime, given to the
//! confirmers and to everything else that looks for a paste ([`crate::adapter::Adapter::pasted_form`]:
//! the composer's paste sign, iapeer's own text in a composer, Codex's queue preview).
//!
//! Recorded from the real CLIs against the model stand-ins, every case in
//! `tests/fixtures/claude-2.1.332/paste/` and `tests/fixtures/codex-0.171.0/paste/`
//! (`tests/paste_transforms.rs` records them; what was pasted, what the model request and the
//! transcript or rollout held):
//!
//! - **Claude Code 2.1.332** takes a pasted TAB as four spaces (not to the next tab stop), a
//!   CR LF, a lone CR, U+2028 and U+2029 as LF, and drops every format character and default
//!   ignorable code point (zero-width space and joiners, word joiner, BOM, soft hyphen, bidi
//!   marks and isolates, variation selectors, tags, Hangul fillers, …) — except a zero-width
//!   joiner inside an emoji sequence, which it keeps. The model request and the transcript
//!   hold the same text, and so does its queue's `enqueue` record of a message pasted
//!   mid-turn. Everything else arrives as pasted: trailing spaces and newlines, runs of
//!   spaces, blank lines, no-break spaces, combining marks (no NFC), emoji, the envelope's
//!   CDATA, a 5 000-character line, 200 lines.
//! - **Codex 0.171.0** takes CR LF and a lone CR as LF and keeps everything else in its model
//!   request and its session file; its screen drops a TAB (its queue preview shows `a\tb` as
//!   `ab`, `tab-mid-turn.raw`).
//!
//! The form applies the same steps to both sides of a comparison, so it needs to hold only
//! where the runtime changes something: a zero-width joiner is dropped on both sides whether
//! the runtime kept it or not.

use std::sync::LazyLock;

/// `text` with every CR LF, lone CR, U+2028 and U+2029 as LF.
fn lf_breaks(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace(['\r', '\u{2028}', '\u{2029}'], "\n")
}

/// The ranges of the characters Claude Code drops from pasted text: general category `Cf`
/// (format) and `Default_Ignorable_Code_Point`, from `regex-syntax`'s Unicode tables.
static IGNORABLE: LazyLock<Vec<(char, char)>> = LazyLock::new(|| {
    use regex_syntax::hir::{Class, HirKind};
    let hir = regex_syntax::Parser::new()
        .parse(r"[\p{Cf}\p{Default_Ignorable_Code_Point}]")
        .expect("a valid class");
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => {
            c.ranges().iter().map(|r| (r.start(), r.end())).collect()
        }
        _ => Vec::new(),
    }
});

/// Whether `c` is a format character or a default ignorable code point.
fn ignorable(c: char) -> bool {
    let ranges = &*IGNORABLE;
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Claude Code 2.1.332's form of `text` (pure, idempotent): line breaks as LF, a TAB as four
/// spaces, format characters and default ignorable code points left out.
pub fn claude(text: &str) -> String {
    lf_breaks(text).chars().filter(|c| !ignorable(*c)).fold(
        String::with_capacity(text.len()),
        |mut out, c| {
            if c == '\t' {
                out.push_str("    ");
            } else {
                out.push(c);
            }
            out
        },
    )
}

/// Codex 0.171.0's form of `text` (pure, idempotent): CR LF and a lone CR as LF (its model
/// request and session file), a TAB left out (its screen).
pub fn codex(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace('\t', "")
}

#[cfg(test)]
mod tests;

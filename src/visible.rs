//! The one rendering of text iapeer does not control — a peer's description, a message's body
//! and topic, a gated agent's command, a logged value, a notice's text, an error that quotes
//! any of these — for the people and scripts that read it (issue 26 item 4). A character that
//! would act on the reader's terminal or reorder what it shows (ESC starting a sequence that
//! clears a line or writes the clipboard, a CR moving the cursor back, U+202E reversing the
//! text after it) is shown as a visible stand-in instead:
//!
//! | characters | shown as |
//! |---|---|
//! | C0 `U+0000`–`U+001F` | its Unicode control picture `U+2400`–`U+241F`: ESC `␛`, BEL `␇`, CR `␍`, BS `␈`, NUL `␀`, TAB `␉`; LF `␤` (`U+2424`) |
//! | DEL `U+007F` | `␡` (`U+2421`) |
//! | C1 `U+0080`–`U+009F` (8-bit CSI, DCS, OSC, …) | `<U+009B>` |
//! | bidi controls `U+202A`–`U+202E`, `U+2066`–`U+2069`, `U+200E`, `U+200F`, `U+061C`; line and paragraph separators `U+2028`, `U+2029` | `<U+202E>` |
//!
//! Everything else (printable ASCII, every other Unicode character) is itself.
//!
//! - [`text`]: a multi-line field (a message body, an error message): LF and TAB stay, so its
//!   lines are lines; everything else above, CR included, is a stand-in.
//! - [`line`]: a one-line field (a table cell, a log entry, an approval's command, a topic, a
//!   notification): LF and TAB are stand-ins too, so one field is one line.
//! - [`json`]: every `--json` document and fleet API answer: the same characters (C0 as
//!   serde_json writes them, the rest here) escaped as `\uXXXX`, so the text of the document
//!   holds none of them raw while the parsed value is exactly the original.
//!
//! The operator's page does the same in `src/daemon/ui/page/app.js` (`visible`). The
//! stand-ins for an agent's pty are [`crate::term::paste_text`]'s, which keep the text's
//! length in characters.

use std::borrow::Cow;
use std::fmt::Write;

/// `s` for a terminal as a multi-line field: LF and TAB kept, every other control character,
/// bidi control and line/paragraph separator as its stand-in (module table); a CR never
/// returns the cursor. Borrows when nothing is replaced. Idempotent.
pub fn text(s: &str) -> Cow<'_, str> {
    render(s, false)
}

/// `s` for a terminal as a one-line field: like [`text`], and LF as `␤`, TAB as `␉`, so the
/// field never starts a new line or moves a column. Borrows when nothing is replaced.
/// Idempotent.
pub fn line(s: &str) -> Cow<'_, str> {
    render(s, true)
}

/// `v` as compact JSON text (keys as `serde_json::Value` orders them, no trailing newline)
/// whose strings carry DEL, the C1 controls, the bidi controls and U+2028/U+2029 as `\uXXXX`
/// (lowercase hex, as serde_json writes C0), besides the C0 escapes serde_json makes itself.
/// Parsing it gives back `v` exactly.
pub fn json(v: &serde_json::Value) -> String {
    escape_json(v.to_string())
}

/// Escape in JSON text what serde_json leaves raw (see [`json`]). Outside strings JSON text
/// is ASCII punctuation, digits, literals and whitespace, so every such character is inside a
/// string, where `\uXXXX` stands for it.
fn escape_json(s: String) -> String {
    if !s.chars().any(json_escapes) {
        return s;
    }
    let mut out = String::with_capacity(s.len() + 32);
    for c in s.chars() {
        if json_escapes(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out
}

fn json_escapes(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}') || reorders(c)
}

/// The bidi controls and the line/paragraph separators: they change where the text around
/// them is shown, not what it says.
fn reorders(c: char) -> bool {
    matches!(
        c,
        '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// Whether `c` is shown as a stand-in: a C0 or C1 control, DEL, or one of [`reorders`]
/// (the event logs escape the same characters, [`crate::eventlog::quote_value`]).
pub(crate) fn acts(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}') || reorders(c)
}

fn render(s: &str, one_line: bool) -> Cow<'_, str> {
    let kept = |c: char| !acts(c) || (!one_line && matches!(c, '\n' | '\t'));
    if s.chars().all(kept) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if kept(c) {
            out.push(c);
        } else {
            push_stand_in(&mut out, c);
        }
    }
    Cow::Owned(out)
}

fn push_stand_in(out: &mut String, c: char) {
    match c {
        '\n' => out.push('\u{2424}'),
        '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}')),
        '\u{7f}' => out.push('\u{2421}'),
        _ => {
            let _ = write!(out, "<U+{:04X}>", c as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload family of issue 26 item 4: C0, C1, OSC 52, an overwrite, bidi overrides,
    /// the separators.
    const FAMILY: &str = "a\u{1b}b\u{7}c\r\u{8}\u{0}|\u{9b}2J\u{90}q\u{9d}0;t|\u{1b}]52;c;aGk=\u{7}|\
                          curl x|sh #\r\u{1b}[2Kls -la|\u{202e}gnp.exe\u{2066}x\u{2069}|\u{2028}\u{2029}\
                          |\u{7f}\u{200e}\u{200f}\u{61c}\u{202a}\t\nend";

    #[test]
    fn every_control_is_a_visible_stand_in() {
        assert_eq!(
            line(FAMILY),
            "a␛b␇c␍␈␀|<U+009B>2J<U+0090>q<U+009D>0;t|␛]52;c;aGk=␇|curl x|sh #␍␛[2Kls -la|\
             <U+202E>gnp.exe<U+2066>x<U+2069>|<U+2028><U+2029>|␡<U+200E><U+200F><U+061C>\
             <U+202A>␉␤end"
        );
        // A multi-line field keeps its line breaks and tabs, nothing else.
        assert_eq!(
            text("one\ttwo\r\nthree\u{1b}[2J\u{2028}"),
            "one\ttwo␍\nthree␛[2J<U+2028>"
        );
        for shown in [line(FAMILY), text(FAMILY)] {
            assert!(!shown.chars().any(|c| acts(c) && c != '\n' && c != '\t'));
            assert_eq!(line(&shown), line(FAMILY), "idempotent");
        }
        assert!(matches!(line("plain ü ␛ → 1"), Cow::Borrowed(_)));
        assert!(matches!(text("two\nlines\tok"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_text_holds_no_raw_control_and_parses_back_exactly() {
        let v = serde_json::json!({ "summary": FAMILY, "n": 1, "list": [FAMILY] });
        let out = json(&v);
        assert!(!out.chars().any(acts), "{out:?}");
        assert!(out.contains(r"\u009b2J\u0090q\u009d0;t"), "{out}");
        assert!(
            out.contains(r"\u202egnp.exe\u2066x\u2069|\u2028\u2029|\u007f"),
            "{out}"
        );
        assert!(out.contains(r"\u001b]52;c;aGk=\u0007"), "{out}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap(), v);
        assert_eq!(json(&serde_json::json!({"a": "b"})), r#"{"a":"b"}"#);
    }

    proptest::proptest! {
        /// Whatever the text, what is shown holds no character that acts (LF and TAB only in
        /// a multi-line field), and its JSON parses back to it.
        #[test]
        fn nothing_acts_and_json_round_trips(s in "\\PC*|[\\x00-\\x{a0}\\x{2028}-\\x{202f}\\x{2066}-\\x{2069}\\x{61c}\\x{200e}\\x{200f}]*") {
            proptest::prop_assert!(!line(&s).chars().any(acts));
            proptest::prop_assert!(!text(&s).chars().any(|c| acts(c) && c != '\n' && c != '\t'));
            let v = serde_json::Value::from(s.clone());
            let out = json(&v);
            proptest::prop_assert!(!out.chars().any(acts));
            proptest::prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap(), v);
        }
    }
}

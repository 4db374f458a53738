//! Input encoding for agent sessions (spec 04 §1 "Input"): bracketed paste for message delivery
//! and tmux-like key names for dialogs and control.

use std::borrow::Cow;

/// Start of a bracketed paste.
pub const PASTE_START: &[u8] = b"\x1b[200~";
/// End of a bracketed paste.
pub const PASTE_END: &[u8] = b"\x1b[201~";

/// Make `text` safe to paste: every control character that could end the paste or be read as
/// a key is replaced by a visible stand-in, so nothing in it can reach the application as
/// anything but pasted text (issue 12, the bracketed-paste end marker `ESC[201~` in a body).
///
/// - C0 controls `U+0000`–`U+001F` except LF, TAB and CR become their Unicode control
///   pictures `U+2400`–`U+241F` (ESC → `␛`, NUL → `␀`, Ctrl-C → `␃`);
/// - DEL `U+007F` becomes `␡` (`U+2421`);
/// - C1 controls `U+0080`–`U+009F` (8-bit CSI, OSC, …) have no picture and become `U+FFFD`.
///
/// LF, TAB and CR stay: inside a paste that cannot end early they are text (terminals paste
/// line breaks as CR, and Claude Code and Codex read a pasted CR as a line break).
/// Everything else (printable ASCII, all other Unicode) is unchanged. Idempotent; borrows
/// when nothing needed replacing.
pub fn paste_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_stand_in) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().map(stand_in).collect())
}

fn needs_stand_in(c: char) -> bool {
    c.is_control() && !matches!(c, '\n' | '\t' | '\r')
}

fn stand_in(c: char) -> char {
    match c {
        c if !needs_stand_in(c) => c,
        '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
        '\u{7f}' => '\u{2421}',
        _ => '\u{fffd}',
    }
}

/// Wrap `text` in one bracketed paste: `ESC[200~` + [`paste_text`]`(text)` + `ESC[201~`.
/// Nothing is added (no trailing newline); the caller writes `\r` separately after the
/// settle delay. The bytes between the markers never contain ESC or another control that a
/// terminal application would read as a key.
pub fn bracketed_paste(text: &str) -> Vec<u8> {
    let text = paste_text(text);
    let mut out = Vec::with_capacity(text.len() + PASTE_START.len() + PASTE_END.len());
    out.extend_from_slice(PASTE_START);
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(PASTE_END);
    out
}

/// A key name [`encode_keys`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The token is not one of the key names; carries the token as given.
    #[error(
        "unknown key name {0:?} (known: Enter, Escape, Tab, Space, BSpace, Up, Down, \
          Right, Left; use -l before literal text)"
    )]
    UnknownKey(String),
}

/// Bytes of one named key. Arrow keys depend on the application-cursor mode (DECCKM).
fn key_bytes(name: &str, app_cursor: bool) -> Option<&'static [u8]> {
    let arrow =
        |normal: &'static [u8], app: &'static [u8]| Some(if app_cursor { app } else { normal });
    match name {
        "Enter" => Some(b"\r"),
        "Escape" => Some(b"\x1b"),
        "Tab" => Some(b"\t"),
        "Space" => Some(b" "),
        "BSpace" => Some(b"\x7f"),
        "Up" => arrow(b"\x1b[A", b"\x1bOA"),
        "Down" => arrow(b"\x1b[B", b"\x1bOB"),
        "Right" => arrow(b"\x1b[C", b"\x1bOC"),
        "Left" => arrow(b"\x1b[D", b"\x1bOD"),
        _ => None,
    }
}

/// Encode tmux-like key tokens into the bytes to write to the pty.
///
/// Names: `Enter`=`\r`, `Escape`=`\x1b`, `Tab`=`\t`, `Space`=` `, `BSpace`=`\x7f`,
/// `Up`/`Down`/`Right`/`Left` = `ESC[A..D`, or `ESC O A..D` when `app_cursor` is true (the
/// screen's application-cursor mode). The token `-l` makes every following token literal text,
/// joined by single spaces (`["-l", "/compact"]` → `/compact`).
///
/// Errors: [`KeyError::UnknownKey`] naming the first unknown token.
pub fn encode_keys(tokens: &[&str], app_cursor: bool) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if *token == "-l" {
            out.extend_from_slice(tokens[i + 1..].join(" ").as_bytes());
            return Ok(out);
        }
        let bytes =
            key_bytes(token, app_cursor).ok_or_else(|| KeyError::UnknownKey(token.to_string()))?;
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paste_wraps_without_newline() {
        assert_eq!(bracketed_paste("a\nb"), b"\x1b[200~a\nb\x1b[201~".to_vec());
        assert_eq!(bracketed_paste(""), b"\x1b[200~\x1b[201~".to_vec());
    }

    #[test]
    fn controls_in_a_paste_become_visible_stand_ins() {
        assert_eq!(
            bracketed_paste("hi\x1b[201~\rTYPED"),
            "\x1b[200~hi\u{241b}[201~\rTYPED\x1b[201~".as_bytes()
        );
        assert_eq!(
            paste_text("a\u{0}b\u{3}\u{7f}\u{9b}c"),
            "a\u{2400}b\u{2403}\u{2421}\u{fffd}c"
        );
        assert_eq!(paste_text("tab\tlf\ncr\r ü ␛"), "tab\tlf\ncr\r ü ␛");
        assert!(matches!(paste_text("plain"), Cow::Borrowed(_)));
    }

    proptest::proptest! {
        /// Whatever a sender writes, the paste ends only at its own end marker and carries no
        /// control a terminal application would read as a key.
        #[test]
        fn no_text_escapes_the_paste(text in "\\PC*|[\\x00-\\x{a0}\\x{241b}]*", raw in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            for t in [text, String::from_utf8_lossy(&raw).into_owned()] {
                let bytes = bracketed_paste(&t);
                let inner = &bytes[PASTE_START.len()..bytes.len() - PASTE_END.len()];
                proptest::prop_assert!(bytes.starts_with(PASTE_START) && bytes.ends_with(PASTE_END));
                proptest::prop_assert!(!inner.contains(&0x1b));
                let inner = std::str::from_utf8(inner).unwrap();
                proptest::prop_assert!(inner.chars().all(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\r')));
                // One stand-in per character: line structure and length in chars are kept.
                proptest::prop_assert_eq!(inner.chars().count(), t.chars().count());
                proptest::prop_assert_eq!(paste_text(inner), inner);
            }
        }
    }

    #[test]
    fn named_keys() {
        assert_eq!(
            encode_keys(&["Enter", "Escape", "Tab", "Space", "BSpace"], false).unwrap(),
            b"\r\x1b\t \x7f".to_vec()
        );
    }

    #[test]
    fn arrows_follow_application_cursor_mode() {
        let keys = ["Up", "Down", "Right", "Left"];
        assert_eq!(
            encode_keys(&keys, false).unwrap(),
            b"\x1b[A\x1b[B\x1b[C\x1b[D".to_vec()
        );
        assert_eq!(
            encode_keys(&keys, true).unwrap(),
            b"\x1bOA\x1bOB\x1bOC\x1bOD".to_vec()
        );
    }

    #[test]
    fn literal_mode_joins_the_rest_with_spaces() {
        assert_eq!(
            encode_keys(&["-l", "/compact"], false).unwrap(),
            b"/compact".to_vec()
        );
        assert_eq!(
            encode_keys(&["Escape", "-l", "Enter", "is", "text"], false).unwrap(),
            b"\x1bEnter is text".to_vec()
        );
        assert_eq!(encode_keys(&["-l"], false).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn unknown_key_is_named() {
        let err = encode_keys(&["Enter", "PageUp"], false).unwrap_err();
        assert_eq!(err, KeyError::UnknownKey("PageUp".into()));
        assert!(err.to_string().contains("\"PageUp\""));
        // Names are case-sensitive, like tmux.
        assert!(encode_keys(&["enter"], false).is_err());
    }
}

//! How a runtime's composer shows a paste (issue 13 item 1, issue 7 item 2): iapeer presses
//! Enter as soon as the composer shows its whole paste, and takes a composer that still shows
//! its previous paste for that paste's residue, not for someone's draft. Pure.
//!
//! Recorded forms (one composer row, read by [`crate::term::Screen::composer_text`]):
//! - Claude Code 2.1.332: `[Pasted text #3 +3 lines]`, the count being the paste's line
//!   breaks (`tests/fixtures/claude-2.1.332/mid-turn-queue.raw`); the echo agent copies it.
//! - Codex 0.171: the pasted text itself, its first line on the composer row
//!   (`tests/fixtures/codex-0.171.0/boot-trust-ready-paste-call.raw`); above 1 000 characters
//!   `[Pasted Content N chars]` (its composer inserts either only when the whole bracketed
//!   paste has arrived).

/// The most of a pasted text kept to recognise it (one composer row is far shorter).
const KEPT: usize = 1024;

/// What iapeer knows of one paste, to recognise it on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasteView {
    /// The beginning of the text as pasted (at most 1 KiB).
    pub head: String,
    /// Its line breaks (`\r\n`, `\n` and a lone `\r` each count once).
    pub breaks: usize,
}

impl PasteView {
    /// The view of a paste of `text` (exactly the text between the paste markers).
    pub fn of(text: &str) -> PasteView {
        let cut = text.char_indices().nth(KEPT).map_or(text.len(), |(i, _)| i);
        PasteView {
            head: text[..cut].to_string(),
            breaks: text.replace("\r\n", "\n").matches(['\n', '\r']).count(),
        }
    }

    /// The view of a paste of `pasted` that the runtime shows as `shown` (its
    /// [`crate::adapter::Adapter::pasted_form`]): the text as shown, the line breaks as
    /// pasted (what a placeholder counts).
    pub fn shown(pasted: &str, shown: &str) -> PasteView {
        PasteView {
            breaks: PasteView::of(pasted).breaks,
            ..PasteView::of(shown)
        }
    }

    /// Whether `row` (the composer's row, typed text only) shows this whole paste and nothing
    /// else: a placeholder alone whose line count, when it has one, is this paste's, or the
    /// start of the text itself (runs of white space compared as one space).
    pub fn shown_in(&self, row: &str) -> bool {
        let row = row.trim();
        if row.is_empty() {
            return false;
        }
        if let Some(inner) = placeholder(row) {
            return match inner.strip_prefix("Pasted text #") {
                Some(rest) => line_count(rest).is_none_or(|n| n == self.breaks),
                None => inner.starts_with("Pasted Content "),
            };
        }
        squeeze(&self.head).starts_with(&squeeze(row))
    }

    /// Whether `row` (one row of the conversation above the composer, the history glyph cut
    /// off) shows this paste as a submitted message: the whole of its first line and nothing
    /// else, runs of white space compared as one space. Claude Code 2.1.332 draws a submitted
    /// paste in full above the composer, its first line on the glyph's row
    /// (`tests/fixtures/claude-2.1.332/wake-instant-turn.raw`). A first line cut by a narrow
    /// terminal is not taken: an envelope's start names only its sender, its `ts` comes
    /// later, and an older message from the same sender may be the row.
    pub fn echoed_in(&self, row: &str) -> bool {
        let first = squeeze(self.head.split(['\n', '\r']).next().unwrap_or_default());
        !first.is_empty() && squeeze(row) == first
    }
}

/// `s` with each run of white space made one space, trimmed.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The inside of a row that is one `[Pasted …]` placeholder and nothing else.
fn placeholder(row: &str) -> Option<&str> {
    let inner = row.strip_prefix('[')?.strip_suffix(']')?;
    (inner.starts_with("Pasted ") && !inner.contains(['[', ']'])).then_some(inner)
}

/// `N` of `k +N lines` (the part after `#`), if the placeholder gives one.
fn line_count(rest: &str) -> Option<usize> {
    let (_, lines) = rest.split_once(" +")?;
    lines.strip_suffix(" lines")?.parse().ok()
}

/// What a composer row that is one paste placeholder and nothing else says of the paste
/// (pure): Claude Code 2.1.332's `[Pasted text #k +N lines]` its line breaks, Codex 0.171's
/// `[Pasted Content N chars]` its characters (Unicode scalar values, counted as pasted:
/// `tests/fixtures/codex-0.171.0/cut-paste-in-composer.raw` shows 15117 for a 15 117-character
/// envelope). `None` for any other row.
pub fn placeholder_size(row: &str) -> Option<PlaceholderSize> {
    let inner = placeholder(row.trim())?;
    if let Some(rest) = inner.strip_prefix("Pasted text #") {
        return Some(PlaceholderSize::Breaks(line_count(rest)));
    }
    let chars = inner
        .strip_prefix("Pasted Content ")?
        .strip_suffix(" chars")
        .and_then(|n| n.parse().ok());
    Some(PlaceholderSize::Chars(chars))
}

/// The size a paste placeholder gives ([`placeholder_size`]), when it gives one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceholderSize {
    /// Line breaks (`+N lines`).
    Breaks(Option<usize>),
    /// Characters (`N chars`).
    Chars(Option<usize>),
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENVELOPE: &str =
        "<iap from=\"ea\" runtime=\"echo\" ts=\"23:22:25\">\n<msg>MID</msg>\n</iap>\n";

    #[test]
    fn placeholders_count_the_line_breaks() {
        let p = PasteView::of(ENVELOPE);
        assert_eq!(p.breaks, 3);
        assert!(p.shown_in("[Pasted text #3 +3 lines]"));
        assert!(p.shown_in("  [Pasted text #12 +3 lines] "));
        assert!(
            !p.shown_in("[Pasted text #3 +2 lines]"),
            "another paste (or part of this one)"
        );
        assert!(p.shown_in("[Pasted text #1]"), "no count given");
        assert!(p.shown_in("[Pasted Content 1200 chars]"));
        assert_eq!(PasteView::of("a\r\nb\rc\nd").breaks, 3);
    }

    #[test]
    fn the_text_itself_from_its_start() {
        let p = PasteView::of(ENVELOPE);
        assert!(p.shown_in("<iap from=\"ea\"  runtime=\"echo\""));
        assert!(p.shown_in(ENVELOPE.lines().next().unwrap()));
    }

    #[test]
    fn a_submitted_paste_is_known_by_its_first_line() {
        let p = PasteView::of(ENVELOPE);
        let first = ENVELOPE.lines().next().unwrap();
        assert!(p.echoed_in(first));
        assert!(
            p.echoed_in(&format!("  {first}      ")),
            "the row's padding"
        );
        for row in [
            &first[..first.len() - 1],
            &first[..30],
            "",
            "<iap from=",
            "<iap from=\"ea\" runtime=\"codex\" ts=\"23:22:25\">",
            "<msg>MID</msg>",
            "[Pasted text #3 +3 lines]",
        ] {
            assert!(!p.echoed_in(row), "{row:?}");
        }
        let short = PasteView::of("hi\nthere");
        assert!(short.echoed_in("hi") && !short.echoed_in("there"));
        assert!(!PasteView::of("\nhi").echoed_in(""), "an empty first line");
    }

    #[test]
    fn anything_else_is_not_this_paste() {
        let p = PasteView::of(ENVELOPE);
        for row in [
            "",
            "   ",
            "my unfinished draft",
            "hi [Pasted text #1 +3 lines]",
            "[Pasted text #1 +3 lines][Pasted text #2 +3 lines]",
            "[Pasted text #1 +3 lines] more",
            "<iap from=\"someone else\"",
            "[Image #1]",
        ] {
            assert!(!p.shown_in(row), "{row:?}");
        }
    }

    #[test]
    fn placeholders_give_their_size() {
        use PlaceholderSize::*;
        assert_eq!(
            placeholder_size(" [Pasted text #2 +3 lines] "),
            Some(Breaks(Some(3)))
        );
        assert_eq!(placeholder_size("[Pasted text #2]"), Some(Breaks(None)));
        assert_eq!(
            placeholder_size("[Pasted Content 15117 chars]"),
            Some(Chars(Some(15117)))
        );
        for row in ["", "hi", "[Pasted text #1 +3 lines] more", "[Image #1]"] {
            assert_eq!(placeholder_size(row), None, "{row:?}");
        }
    }

    #[test]
    fn a_long_paste_keeps_only_its_head() {
        let text = "é".repeat(5000);
        let p = PasteView::of(&text);
        assert_eq!(p.head.chars().count(), KEPT);
        assert!(p.shown_in(&"é".repeat(200)));
    }
}

//! Answering TUI dialogs by option label, never by position (spec 04 §2 "Boot dialogs").
//!
//! Pure functions over the plain-text rows of a screen (`Screen::rows`). A **menu** is the block
//! of option rows around the bottom-most row that starts with the cursor marker (`❯` for
//! claude): option rows share the marker column and the label column, the selected one shows
//! the marker, the others a space. [`step_towards`] gives the ONE next key that moves the marker
//! toward a wanted label, or Enter once it is there; the caller sends it, waits for the screen to
//! change and asks again.
//!
//! A prompt row with no options around it (the composer, framed by rule lines) is not a menu.

/// Cursor marker of Claude Code menus (also its composer prompt glyph).
pub const CLAUDE_MARKER: char = '❯';

/// One key of a dialog answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogStep {
    /// Move the marker one option up.
    Up,
    /// Move the marker one option down.
    Down,
    /// Confirm the option under the marker.
    Enter,
}

impl DialogStep {
    /// The key name for `term::encode_keys` (`"Up"`, `"Down"`, `"Enter"`).
    pub fn key_name(self) -> &'static str {
        match self {
            DialogStep::Up => "Up",
            DialogStep::Down => "Down",
            DialogStep::Enter => "Enter",
        }
    }
}

/// One option of a menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuOption {
    /// Index of the option's row in the rows given.
    pub row: usize,
    /// The label, trimmed, without a leading `N. ` number.
    pub label: String,
}

/// A menu found on screen: at least two options, top to bottom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Menu {
    /// The options in screen order.
    pub options: Vec<MenuOption>,
    /// Index into `options` of the one showing the marker; `None` when no option or more than
    /// one shows it (the TUI is half-way through redrawing: wait for the next screen).
    pub cursor: Option<usize>,
}

impl Menu {
    /// Label under the marker, if exactly one option shows it.
    #[cfg(test)]
    pub fn cursor_label(&self) -> Option<&str> {
        self.cursor.map(|i| self.options[i].label.as_str())
    }

    /// Index of the first option whose label matches `wanted` (see [`label_matches`]).
    pub fn position(&self, wanted: &str) -> Option<usize> {
        self.options
            .iter()
            .position(|o| label_matches(&o.label, wanted))
    }
}

/// The one key that moves `menu`'s marker to option `index` (by position, so equal labels
/// are told apart), or Enter once it is there; `None` while the marker is not on exactly
/// one option (mid-redraw) or `index` is past the options.
pub fn step_to_index(menu: &Menu, index: usize) -> Option<DialogStep> {
    let cursor = menu.cursor?;
    (index < menu.options.len()).then(|| match cursor.cmp(&index) {
        std::cmp::Ordering::Less => DialogStep::Down,
        std::cmp::Ordering::Greater => DialogStep::Up,
        std::cmp::Ordering::Equal => DialogStep::Enter,
    })
}

/// The menu's question: the nearest row above its first option with a letter or digit in
/// it, trimmed (empty when there is none).
pub fn question_of<S: AsRef<str>>(rows: &[S], menu: &Menu) -> String {
    let first = menu.options.first().map_or(0, |o| o.row).min(rows.len());
    rows[..first]
        .iter()
        .map(|r| r.as_ref().trim())
        .rev()
        .find(|r| r.chars().any(char::is_alphanumeric))
        .unwrap_or_default()
        .to_string()
}

/// Whether an option `label` is the `wanted` one: equal, or equal followed by a parenthesised
/// note (`Yes (recommended)` matches `Yes`; `Yes, I accept` does not).
pub fn label_matches(label: &str, wanted: &str) -> bool {
    label
        .strip_prefix(wanted)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(" ("))
}

/// How a row relates to a menu whose marker is at char column `marker_col` and whose labels
/// start at char column `label_col`.
enum RowKind {
    /// An option row; `marked` when it shows the marker.
    Option { marked: bool },
    /// Indented deeper than the labels (a description or a wrapped label): part of the block.
    Continuation,
    /// Anything else ends the block.
    Other,
}

/// Spaces as TUIs draw them (some pad with no-break spaces).
fn is_blank(c: char) -> bool {
    c == ' ' || c == '\u{a0}'
}

fn row_kind(row: &str, marker: char, marker_col: usize, label_col: usize) -> RowKind {
    let chars: Vec<char> = row.chars().collect();
    let first = chars.iter().position(|c| !is_blank(*c));
    match first {
        None => RowKind::Other,
        Some(f) if f > label_col => RowKind::Continuation,
        Some(f) if f == label_col => RowKind::Option { marked: false },
        Some(f) if f == marker_col && chars[f] == marker => {
            let label_starts = chars.len() > label_col
                && chars[marker_col + 1..label_col]
                    .iter()
                    .all(|c| is_blank(*c))
                && !is_blank(chars[label_col]);
            if label_starts {
                RowKind::Option { marked: true }
            } else {
                RowKind::Other
            }
        }
        Some(_) => RowKind::Other,
    }
}

/// Split a leading `N. ` (or `N) `) off a label: (number, rest).
fn split_number(label: &str) -> (Option<u32>, &str) {
    let digits = label.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 3 {
        return (None, label);
    }
    let (num, rest) = label.split_at(digits);
    match rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
        Some(rest) => (num.parse().ok(), rest.trim_start()),
        None => (None, label),
    }
}

/// The menu around the bottom-most row starting with the Claude marker `❯`.
/// See [`find_menu_with`].
pub fn find_menu<S: AsRef<str>>(rows: &[S]) -> Option<Menu> {
    find_menu_with(rows, CLAUDE_MARKER)
}

/// The menu around the bottom-most row whose first visible character is `marker`.
///
/// `None` when that row has no label after the marker (an empty prompt), when fewer than two
/// option rows line up with it (a prompt with no options around it), or when the options are
/// numbered inconsistently. Blank rows end the block; rows indented deeper than the labels are
/// skipped as descriptions.
pub fn find_menu_with<S: AsRef<str>>(rows: &[S], marker: char) -> Option<Menu> {
    let (anchor, marker_col) = rows.iter().enumerate().rev().find_map(|(i, r)| {
        let r = r.as_ref();
        let indent = r.chars().take_while(|c| is_blank(*c)).count();
        (r.chars().nth(indent) == Some(marker)).then_some((i, indent))
    })?;
    let anchor_chars: Vec<char> = rows[anchor].as_ref().chars().collect();
    let label_col = (marker_col + 1..anchor_chars.len()).find(|&c| !is_blank(anchor_chars[c]))?;

    let mut marked_rows = Vec::new();
    let mut option_rows = Vec::new();
    let mut visit = |i: usize| -> bool {
        match row_kind(rows[i].as_ref(), marker, marker_col, label_col) {
            RowKind::Option { marked } => {
                option_rows.push(i);
                if marked {
                    marked_rows.push(i);
                }
                true
            }
            RowKind::Continuation => true,
            RowKind::Other => false,
        }
    };
    let mut top = anchor;
    while top > 0 && visit(top - 1) {
        top -= 1;
    }
    visit(anchor);
    let mut bottom = anchor + 1;
    while bottom < rows.len() && visit(bottom) {
        bottom += 1;
    }
    option_rows.sort_unstable();
    if option_rows.len() < 2 {
        return None;
    }

    let mut options = Vec::with_capacity(option_rows.len());
    let mut numbers = Vec::new();
    for &row in &option_rows {
        let text: String = rows[row].as_ref().chars().skip(label_col).collect();
        let (number, label) = split_number(text.trim());
        numbers.extend(number);
        options.push(MenuOption {
            row,
            label: label.to_string(),
        });
    }
    let numbered_in_order =
        numbers.len() == options.len() && numbers.windows(2).all(|w| w[1] == w[0] + 1);
    if !numbers.is_empty() && !numbered_in_order {
        return None;
    }
    let cursor = match marked_rows.as_slice() {
        [only] => options.iter().position(|o| o.row == *only),
        _ => None,
    };
    Some(Menu { options, cursor })
}

/// Label under the `❯` cursor of the menu on screen, if any.
#[cfg(test)]
pub fn cursor_label<S: AsRef<str>>(rows: &[S]) -> Option<String> {
    find_menu(rows)?.cursor_label().map(str::to_string)
}

/// The one next key toward the option labelled `wanted` in the `❯` menu on screen: Up or Down
/// while the marker is above or below it, Enter when it is on it. `None` when there is no
/// menu, the marker is not on exactly one option, or no option matches `wanted`.
pub fn step_towards<S: AsRef<str>>(rows: &[S], wanted: &str) -> Option<DialogStep> {
    step_towards_with(rows, CLAUDE_MARKER, wanted)
}

/// [`step_towards`] for menus drawn with another cursor `marker` (codex uses `›`).
pub fn step_towards_with<S: AsRef<str>>(
    rows: &[S],
    marker: char,
    wanted: &str,
) -> Option<DialogStep> {
    let menu = find_menu_with(rows, marker)?;
    let target = menu.position(wanted)?;
    let cursor = menu.cursor?;
    Some(match target.cmp(&cursor) {
        std::cmp::Ordering::Less => DialogStep::Up,
        std::cmp::Ordering::Greater => DialogStep::Down,
        std::cmp::Ordering::Equal => DialogStep::Enter,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRUST: &[&str] = &[
        " Accessing workspace:",
        "",
        " Security guide",
        "",
        " ❯ No, exit",
        "   Yes, I trust this folder",
        "",
        " Enter to confirm · Esc to cancel",
    ];

    #[test]
    fn reads_an_unnumbered_menu() {
        let menu = find_menu(TRUST).expect("menu");
        let labels: Vec<&str> = menu.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["No, exit", "Yes, I trust this folder"]);
        assert_eq!(menu.options[0].row, 4);
        assert_eq!(menu.cursor_label(), Some("No, exit"));
        assert_eq!(cursor_label(TRUST).as_deref(), Some("No, exit"));
    }

    #[test]
    fn steps_one_key_at_a_time_by_label() {
        assert_eq!(
            step_towards(TRUST, "Yes, I trust this folder"),
            Some(DialogStep::Down)
        );
        assert_eq!(step_towards(TRUST, "No, exit"), Some(DialogStep::Enter));
        let moved = [" ", "   No, exit", " ❯ Yes, I trust this folder", ""];
        assert_eq!(
            step_towards(&moved, "Yes, I trust this folder"),
            Some(DialogStep::Enter)
        );
        assert_eq!(step_towards(&moved, "No, exit"), Some(DialogStep::Up));
        assert_eq!(step_towards(TRUST, "Maybe"), None);
        assert_eq!(DialogStep::Down.key_name(), "Down");
    }

    #[test]
    fn numbered_menu_with_recommended_note() {
        let rows = [
            "  Try the new fullscreen renderer?",
            "",
            "  ❯ 1. Yes, try it (recommended)",
            "    2. Not now",
            "",
            "  Enter to confirm · Esc to cancel",
        ];
        let menu = find_menu(&rows).unwrap();
        assert_eq!(menu.options[1].label, "Not now");
        assert_eq!(step_towards(&rows, "Not now"), Some(DialogStep::Down));
        assert_eq!(step_towards(&rows, "Yes, try it"), Some(DialogStep::Enter));
        assert_eq!(step_towards(&rows, "Yes"), None, "a prefix is not a label");
    }

    #[test]
    fn descriptions_under_options_are_skipped() {
        let rows = [
            " ❯ 1. Claude account with subscription",
            "      Pro, Max, Team or Enterprise",
            "   2. Anthropic Console account",
            "      API usage billing",
        ];
        let menu = find_menu(&rows).unwrap();
        assert_eq!(menu.options.len(), 2);
        assert_eq!(menu.options[1].row, 2);
    }

    #[test]
    fn steps_to_an_index_tell_equal_labels_apart() {
        let rows = ["Dup?", "  1. A", "❯ 2. A", "  3. B"];
        let menu = find_menu(&rows).unwrap();
        assert_eq!(step_to_index(&menu, 0), Some(DialogStep::Up));
        assert_eq!(step_to_index(&menu, 1), Some(DialogStep::Enter));
        assert_eq!(step_to_index(&menu, 2), Some(DialogStep::Down));
        assert_eq!(step_to_index(&menu, 3), None);
    }

    #[test]
    fn the_question_is_the_nearest_text_row_above_the_options() {
        let rows = ["Welcome", "Send telemetry?", "", "❯ 1. Yes", "  2. No"];
        let menu = find_menu(&rows).unwrap();
        assert_eq!(question_of(&rows, &menu), "Send telemetry?");
        let bare = ["❯ 1. Yes", "  2. No"];
        assert_eq!(question_of(&bare, &find_menu(&bare).unwrap()), "");
    }

    /// `rows` show no menu, and so no step towards `option`.
    fn no_menu(rows: &[&str], option: &str) {
        assert_eq!(find_menu(rows), None);
        assert_eq!(step_towards(rows, option), None);
    }

    #[test]
    fn composer_is_not_a_menu() {
        let ready = [
            "  ✻ tip",
            "──────────",
            "❯",
            "──────────",
            "  ⏵⏵ bypass permissions on",
        ];
        assert_eq!(find_menu(&ready), None);
        no_menu(
            &["──────────", "❯ hello there", "──────────"],
            "hello there",
        );
    }

    #[test]
    fn a_menu_above_the_composer_is_not_the_bottom_block() {
        let rows = [
            "  ❯ 1. Yes, try it",
            "    2. Not now",
            "",
            "───",
            "❯",
            "───",
        ];
        no_menu(&rows, "Not now");
    }

    #[test]
    fn two_markers_mid_redraw_give_no_step() {
        let rows = [
            "  Do you want to use this API key?",
            "",
            "  ❯ Yes",
            "  ❯ No (recommended)",
        ];
        let menu = find_menu(&rows).unwrap();
        assert_eq!(menu.cursor, None);
        assert_eq!(step_towards(&rows, "Yes"), None);
        let none = ["    Yes", "    No (recommended)"];
        assert_eq!(find_menu(&none), None, "no marker at all");
    }

    #[test]
    fn inconsistent_numbering_is_not_a_menu() {
        let rows = ["❯ 1. a", "  3. b"];
        assert_eq!(find_menu(&rows), None);
    }

    #[test]
    fn other_markers() {
        let rows = ["› 1. Yes, continue", "  2. No, quit"];
        assert_eq!(
            step_towards_with(&rows, '›', "No, quit"),
            Some(DialogStep::Down)
        );
        assert_eq!(step_towards(&rows, "No, quit"), None);
    }
}

//! The line of a failed session's screen that tells a sender why (spec 05 §2, "wake
//! failed"): the most informative one, not the last. A program that dies often ends its
//! screen with noise — Codex 0.171 prints its error and then a `Stack backtrace:` of
//! `N: <unknown>` frames — so the lines are scored: error words first, ordinary text next,
//! and never blank lines, backtrace frames or box drawing. Pure.

/// Longest line handed to a sender, in characters (longer ones end with `…`).
pub const MAX_CHARS: usize = 300;

/// Words that mark a line as an error report (matched case-insensitively). `open in another
/// app` is Codex 0.171.0's screen for a conversation another Codex holds
/// (`codex-0.171.0/resume-open-in-another-app.raw`), whose other lines are keys to press.
const ERROR_WORDS: [&str; 25] = [
    "open in another app",
    "error",
    "failed",
    "failure",
    "fatal",
    "panic",
    "cannot",
    "can't",
    "could not",
    "couldn't",
    "unable",
    "not found",
    "no such",
    "no longer",
    "denied",
    "invalid",
    "refused",
    "not configured",
    "missing",
    "unauthorized",
    "forbidden",
    "expired",
    "exceeded",
    "unsupported",
    "not supported",
];

/// Leading decoration TUIs put before a line's text (prompt glyphs, bullets, borders).
fn is_decoration(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '›' | '•'
                | '>'
                | '│'
                | '┃'
                | '|'
                | '■'
                | '⚠'
                | '✗'
                | '✘'
                | '×'
                | '*'
                | '⏺'
                | '●'
        )
}

/// A line that says nothing about the failure: a backtrace frame (`3: <unknown>`,
/// `12: core::panicking::panic`, `at src/main.rs:4:5`), a backtrace header, or no letter or
/// digit at all (box drawing, rules, spinners).
fn is_noise(line: &str) -> bool {
    let l = line.trim();
    if !l.chars().any(char::is_alphanumeric) {
        return true;
    }
    let lower = l.to_lowercase();
    if lower == "stack backtrace:"
        || lower == "backtrace:"
        || lower.starts_with("note: run with `rust_backtrace")
    {
        return true;
    }
    if let Some((n, _)) = l.split_once(": ") {
        if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) {
            return true;
        }
    }
    l.starts_with("at ")
        && l.rsplit(':')
            .next()
            .is_some_and(|c| !c.is_empty() && c.chars().all(|d| d.is_ascii_digit()))
}

/// How much `line` says about a failure: 3 an error line that starts as one (`Error: …`,
/// `fatal: …`), 2 a line with an error word, 1 other text (a `warning` scores at most 1).
fn score(line: &str) -> u8 {
    let lower = line.to_lowercase();
    if lower.starts_with("warning") || lower.starts_with("warn:") {
        return 1;
    }
    let leads = ["error", "fatal", "panic", "failed"]
        .iter()
        .any(|w| lower.starts_with(w));
    if leads {
        3
    } else if ERROR_WORDS.iter().any(|w| lower.contains(w)) {
        2
    } else {
        1
    }
}

/// The screen's rows as logical lines: a row that fills the whole `width` continues on the
/// next row (the terminal wrapped it).
fn logical_lines(screen: &str, width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut continues = false;
    for row in screen.lines() {
        let full = width > 0 && row.chars().count() >= width;
        match out.last_mut() {
            Some(last) if continues => last.push_str(row),
            _ => out.push(row.to_string()),
        }
        continues = full;
    }
    out
}

/// The most informative line of a failed session's `screen` (plain text, rows of `width`
/// columns; pipes' output with `width` 0): the highest-scoring line that is not noise, the
/// later one on a tie, without its leading decoration, at most [`MAX_CHARS`] characters.
/// `None` when every line is noise.
pub fn most_informative_line(screen: &str, width: usize) -> Option<String> {
    let lines = logical_lines(screen, width);
    let best = lines
        .iter()
        .map(|l| l.trim_start_matches(is_decoration).trim_end())
        .filter(|l| !is_noise(l))
        .enumerate()
        .max_by_key(|(i, l)| (score(l), *i))
        .map(|(_, l)| l)?;
    // Runs of blanks are one (a TUI spreads a row's parts over the width).
    let best = best.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(if best.chars().count() > MAX_CHARS {
        let cut: String = best.chars().take(MAX_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        best
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::{Screen, SESSION_COLS, SESSION_ROWS};

    fn recorded(name: &str) -> String {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(&path).unwrap();
        let mut screen = Screen::new(SESSION_ROWS, SESSION_COLS);
        screen.feed(&bytes, true);
        screen.text().to_string()
    }

    /// Codex 0.171 resuming a conversation whose model provider was renamed: the screen
    /// ends with six backtrace frames; the error is above them, wrapped over two rows.
    #[test]
    fn codex_renamed_provider_gives_the_error_not_a_backtrace_frame() {
        let screen = recorded("codex-0.171.0/resume-provider-renamed.raw");
        let last = screen.lines().rev().map(str::trim).find(|l| !l.is_empty());
        assert_eq!(last, Some("5: <unknown>"), "the recording ends in noise");
        let line = most_informative_line(&screen, SESSION_COLS as usize).unwrap();
        assert!(
            line.starts_with(
                "Error: account/gatewayOAuth/read failed: This chat uses model provider \
                 “standin”, which is no longer configured. Restore this provider’s \
                 configuration to continue."
            ),
            "{line}"
        );
        assert!(line.chars().count() <= MAX_CHARS);
    }

    #[test]
    fn noise_is_never_chosen_and_error_words_win() {
        assert_eq!(
            most_informative_line("\n  \n╭────╮\n│    │\n╰────╯\n", 80),
            None
        );
        assert_eq!(
            most_informative_line("Stack backtrace:\n   0: <unknown>\n  12: std::rt::lang_start\n      at src/main.rs:4:5\n", 80),
            None
        );
        let screen = "WARNING: could not create PATH aliases\n  Loading…\n› Error: the key expired\nsome later text\n   0: <unknown>\n";
        assert_eq!(
            most_informative_line(screen, 80).as_deref(),
            Some("Error: the key expired")
        );
        assert_eq!(
            most_informative_line("starting\nconnection refused by host\nbye\n", 80).as_deref(),
            Some("connection refused by host")
        );
        assert_eq!(
            most_informative_line("starting\nready soon\n", 80).as_deref(),
            Some("ready soon"),
            "no error word: the last text line"
        );
        // A row that fills the width continues on the next.
        assert_eq!(
            most_informative_line("Error: abcde\nfgh\n", 12).as_deref(),
            Some("Error: abcdefgh")
        );
        let long = format!("error: {}", "x".repeat(400));
        assert_eq!(
            most_informative_line(&long, 0).unwrap().chars().count(),
            MAX_CHARS
        );
    }
}

//! No runtime's name is matched as a string outside the table of runtimes and the adapters
//! (issue 27 item 1): a fact about a runtime is read from its row ([`crate::runtime_table`]),
//! so adding a runtime is one row and one adapter, and no module silently misses it.
//!
//! The scan is the layer test's ([`crate::layers_tests`]): production code only (test items
//! and test files skipped), comments blanked; a string literal whose whole text is a built-in
//! runtime's name is a match.

use crate::layers_tests::{mask_noting, production_sources, test_items};
use crate::runtime_table::BUILT_IN;

/// Where a runtime's name may be spelled: the table, the adapters with their setup, and the
/// notifier service's own program (spec 09), whose files, log and profile section are named
/// after it.
const ALLOWED: &[&str] = &["runtime_table", "runtime", "adapter", "notifier"];

/// What marks a literal on its line as some other word spelled like a runtime's name (a flag,
/// a legacy spelling): a comment on the same line.
const NOT_A_NAME: &str = "// not a runtime name";

/// The text inside a string literal as written (`"…"`, `r#"…"#`, `b"…"`), its quotes off.
fn inside(literal: &str) -> &str {
    let body = literal.trim_start_matches(['b', 'r', '#']);
    let body = body.trim_end_matches('#');
    body.strip_prefix('"')
        .and_then(|b| b.strip_suffix('"'))
        .unwrap_or(body)
}

/// The built-in runtime named by a literal's text when the text is made of runtime names only
/// (`claude`, `claude|codex|echo`, `(claude | codex)`), or is a path with a runtime's own
/// folder in it (`.gemini`, `~/.codex/auth.json`: where a runtime keeps its files is a fact of
/// its row, [`crate::runtime_table::RuntimeInfo::home_folder`]): the first; else none (a
/// sentence, even one naming such a folder, a flag, an identity such as `claude-bob`, a prefix
/// such as `echo:`).
fn names_only(text: &str) -> Option<&'static str> {
    if !text.contains(char::is_whitespace) {
        let folder = text.split('/').find_map(|part| {
            BUILT_IN
                .iter()
                .find(|r| part.strip_prefix('.') == Some(r.name))
        });
        if let Some(r) = folder {
            return Some(r.name);
        }
    }
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "|,()[]{}".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    let named: Vec<&'static str> = words
        .iter()
        .filter_map(|w| BUILT_IN.iter().find(|r| r.name == *w).map(|r| r.name))
        .collect();
    (!words.is_empty() && named.len() == words.len()).then(|| named[0])
}

/// The runtime names spelled as string literals in one file's production code: `(line, name)`.
fn stray_names(text: &str) -> Vec<(usize, &'static str)> {
    let mut literals = Vec::new();
    let masked = mask_noting(text, &mut literals);
    let tests = test_items(&masked);
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    literals
        .into_iter()
        .filter(|(at, _)| !tests.iter().any(|(s, e)| (s..e).contains(&at)))
        .filter(|&(_, end)| {
            let line_end = text[end..].find('\n').map_or(text.len(), |n| end + n);
            !text[end..line_end].contains(NOT_A_NAME)
        })
        .filter_map(|(at, end)| names_only(inside(&text[at..end])).map(|n| (line_of(at), n)))
        .collect()
}

/// No production code outside [`ALLOWED`] matches a built-in runtime's name as a string.
#[test]
fn runtime_names_live_in_the_table_and_the_adapters() {
    let found: Vec<String> = production_sources()
        .into_iter()
        .filter(|s| !ALLOWED.contains(&s.top.as_str()))
        .flat_map(|s| {
            stray_names(&s.text)
                .into_iter()
                .map(move |(line, name)| format!("src/{}:{line}: \"{name}\"", s.rel.display()))
        })
        .collect();
    assert!(
        found.is_empty(),
        "{} runtime name(s) spelled as a string outside the table of runtimes \
         (src/runtime_table.rs) and the adapters (src/runtime/):\n  {}\nRead the fact from the \
         runtime's row instead (runtime_table::get(name), a field such as `class`, `login`, \
         `memory`, `plugins`, `gates_approvals`, `project_folder`), or add the fact to \
         RuntimeInfo when no field says it.",
        found.len(),
        found.join("\n  ")
    );
}

/// The scan sees string literals in code, and not in comments or test items; a name inside a
/// sentence or an identity is not a match; a raw or byte string, or a list of names (the
/// shortcut verbs were spelled `"claude|codex|echo"` in `cli/spec`), is.
#[test]
fn the_scan_finds_names_in_code_only() {
    let src = r##"
// "claude" in a comment
/// `"codex"` in a doc comment
fn f(rt: &str) -> bool { matches!(rt, "claude" | "x") || rt == r#"echo"# }
fn g() -> &'static str { "codex is not installed" }
#[cfg(test)]
mod tests { const A: &str = "codex"; }
fn h() -> char { '"' } fn k() -> &'static str { "human" }
const FLAG: &str = "echo"; // not a runtime name: a flag
const VERB: &str = "claude|codex|echo"; const USAGE: &str = "(gemini | opencode)";
const ID: &str = "claude-bob"; const B: &[u8] = b"codex"; const D: &str = ".gemini";
const F: &str = "~/.codex/auth.json"; const S: &str = "kept in ~/.claude by it";
const N: &str = ".geminis";
"##;
    assert_eq!(
        stray_names(src),
        [
            (4, "claude"),
            (4, "echo"),
            (8, "human"),
            (10, "claude"),
            (10, "gemini"),
            (11, "codex"),
            (11, "gemini"),
            (12, "codex")
        ]
    );
}

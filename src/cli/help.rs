//! Help text from the table (spec 07): `iapeer help`, `iapeer help <verb>`, `--help`/`-h`.

use std::fmt::Write as _;

use super::parse::UsageError;
use super::spec::{
    find_verb, FlagSpec, Group, VerbSpec, ABOUT, GENERAL_SIGNATURE, GLOBAL_FLAGS, HELP_FLAG,
    RUNTIME_SHORTCUT, SHORTCUT_RUNTIMES,
};

/// Width help paragraphs are wrapped to.
const WIDTH: usize = 80;

/// The help text, ending with a newline: the verb list when `verb` is `None`, else the usage
/// line, description and flags of that verb (a runtime name gives the bare-runtime form;
/// hidden verbs have help too). Every text starts with `usage: iapeer `.
///
/// Errors: [`UsageError::UnknownVerb`] for a name that is neither a verb nor a runtime of
/// the bare form.
pub fn render_help(verb: Option<&str>) -> Result<String, UsageError> {
    match verb {
        None => Ok(general_help()),
        Some(name) if SHORTCUT_RUNTIMES.contains(&name) => Ok(verb_help(&RUNTIME_SHORTCUT)),
        Some(name) => find_verb(name)
            .map(verb_help)
            .ok_or_else(|| UsageError::UnknownVerb(name.to_string())),
    }
}

fn general_help() -> String {
    let mut out = format!("usage: iapeer {GENERAL_SIGNATURE}\n\niapeer: {ABOUT}.\n");
    let rows: Vec<(Group, &VerbSpec)> = Group::ALL
        .iter()
        .flat_map(|g| super::spec::visible_in(*g).map(move |v| (*g, v)))
        .collect();
    let width = rows.iter().map(|(_, v)| v.name.len()).max().unwrap_or(0) + 2;
    let mut current = None;
    for (group, v) in rows {
        if current != Some(group) {
            let _ = write!(out, "\n{}:\n", group.title());
            current = Some(group);
        }
        let _ = writeln!(out, "  {:width$}{}", v.name, v.summary);
    }
    out.push_str("\nFlags:\n");
    out.push_str(&flag_rows(GLOBAL_FLAGS));
    out.push_str(
        "\nRun \"iapeer help <verb>\" for the usage and flags of one verb, \
         or \"man iapeer\" for the manual.\n",
    );
    out
}

fn verb_help(v: &VerbSpec) -> String {
    let mut out = format!("usage: iapeer {}\n\n", v.signature);
    out.push_str(&wrap(v.description, WIDTH));
    if v.passthrough {
        // Every word after the verb belongs to the program, --help included.
        return out;
    }
    let mut flags: Vec<FlagSpec> = v.flags.to_vec();
    flags.push(HELP_FLAG);
    out.push_str("\nFlags:\n");
    out.push_str(&flag_rows(&flags));
    out.push_str(&examples(v));
    out
}

/// The `Examples:` rows of a verb's help (nothing when it has none).
fn examples(v: &VerbSpec) -> String {
    let examples = super::spec::examples_of(v.name);
    if examples.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nExamples:\n");
    for e in examples {
        let _ = writeln!(out, "  iapeer {e}");
    }
    out
}

/// Aligned `  -h, --help  text` rows, one per flag.
fn flag_rows(flags: &[FlagSpec]) -> String {
    let shown: Vec<String> = flags.iter().map(flag_label).collect();
    let width = shown.iter().map(|s| s.chars().count()).max().unwrap_or(0) + 2;
    let mut out = String::new();
    for (label, f) in shown.iter().zip(flags) {
        let repeat = if f.repeatable { " (repeatable)" } else { "" };
        let _ = writeln!(out, "  {label:width$}{}{repeat}", f.help);
    }
    out
}

/// A flag as typed: `-h, --help`, `--message <text>`.
pub fn flag_label(f: &FlagSpec) -> String {
    let mut s = match f.short {
        Some(c) => format!("-{c}, --{}", f.long),
        None => format!("--{}", f.long),
    };
    if let Some(value) = f.value {
        s.push(' ');
        s.push_str(value);
    }
    s
}

/// Greedy word wrap of one paragraph at `width` columns, ending with a newline.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line_len = 0;
    for word in text.split_whitespace() {
        let n = word.chars().count();
        if line_len > 0 && line_len + 1 + n > width {
            out.push('\n');
            line_len = 0;
        }
        if line_len > 0 {
            out.push(' ');
            line_len += 1;
        }
        out.push_str(word);
        line_len += n;
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::spec::VERBS;

    #[test]
    fn general_help_lists_visible_verbs_by_group() {
        let h = render_help(None).unwrap();
        assert!(h.starts_with("usage: iapeer <verb> [args] [flags]\n"));
        for v in VERBS.iter().filter(|v| !v.hidden) {
            let row = h.lines().find(|l| l.starts_with(&format!("  {} ", v.name)));
            assert!(row.is_some_and(|r| r.ends_with(v.summary)), "{}", v.name);
        }
        assert!(
            !h.contains("echo-agent"),
            "hidden verbs stay out of the list"
        );
        assert!(h.contains("claude|codex|echo"));
        assert!(h.contains("-h, --help") && h.contains("-v, --version"));
        assert!(!h.contains("--generate"));
        let messaging = h.find("\nMessaging:\n").unwrap();
        let peers = h.find("\nPeers:\n").unwrap();
        let send = h.find("  send ").unwrap();
        assert!(messaging < send && send < peers);
    }

    #[test]
    fn verb_help_shows_usage_description_and_flags() {
        for v in VERBS {
            let h = render_help(Some(v.name)).unwrap();
            assert!(h.starts_with(&format!("usage: iapeer {}\n\n", v.signature)));
            for f in v.flags {
                assert!(h.contains(&flag_label(f)), "{}: --{}", v.name, f.long);
            }
            assert_eq!(h.contains("-h, --help"), !v.passthrough, "{}", v.name);
            assert!(h
                .lines()
                .all(|l| l.starts_with("usage:") || l.chars().count() <= 100));
        }
        let send = render_help(Some("send")).unwrap();
        assert!(send.contains(
            "\nExamples:\n  iapeer send bob --message \"the build is green\"  # from you"
        ));
        assert!(send.contains("--attachment <path>"));
        assert!(send.contains("(repeatable)"));
        let claude = render_help(Some("codex")).unwrap();
        assert!(claude.starts_with("usage: iapeer (claude | codex | echo)\n"));
    }

    #[test]
    fn unknown_verb_is_a_usage_error() {
        let e = render_help(Some("frob")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "iapeer: unknown verb \"frob\" — run iapeer help for the list of verbs"
        );
    }

    #[test]
    fn wrap_breaks_at_word_boundaries() {
        assert_eq!(wrap("a bb ccc dd", 6), "a bb\nccc dd\n");
        assert_eq!(wrap("", 10), "\n");
        assert_eq!(wrap("averylongword x", 4), "averylongword\nx\n");
    }
}

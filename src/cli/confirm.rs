//! Confirmation before a change (spec 08 §1): a flag (`--accept-risk`, `--yes`) or a "yes"
//! typed on a terminal; without a terminal and without the flag, a usage error (exit 2).

use std::io::{BufRead, IsTerminal, Write};

/// What to do before changing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Go ahead: the flag was given, or nothing will change (`--dry-run`).
    Proceed,
    /// Ask on the terminal and go ahead only on "yes".
    Ask,
    /// Refuse with exit 2: no flag and no terminal to ask on.
    Refuse,
}

/// The gate for `flag_given` (the confirming flag), `dry_run` and whether stdin is a
/// terminal.
pub fn gate(flag_given: bool, dry_run: bool, stdin_is_tty: bool) -> Gate {
    if flag_given || dry_run {
        Gate::Proceed
    } else if stdin_is_tty {
        Gate::Ask
    } else {
        Gate::Refuse
    }
}

/// Whether stdin is a terminal.
pub fn stdin_is_tty() -> bool {
    std::io::stdin().is_terminal()
}

/// Whether an answer typed at the prompt means yes: `yes` or `y`, any case, spaces ignored.
pub fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "yes" | "y")
}

/// Print `question` on stderr and read one line from stdin; true on "yes".
pub fn ask(question: &str) -> bool {
    eprint!("{question} [yes/no] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).is_ok() && is_yes(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_needs_the_flag_or_a_terminal() {
        assert_eq!(gate(true, false, false), Gate::Proceed);
        assert_eq!(gate(false, true, false), Gate::Proceed);
        assert_eq!(gate(false, false, true), Gate::Ask);
        assert_eq!(gate(false, false, false), Gate::Refuse);
        assert!(is_yes(" YES\n") && is_yes("y") && !is_yes("") && !is_yes("no"));
    }
}

//! Names (spec 01 §3): personality and runtime patterns, `normalize`, identities, and the
//! peer's nature (intelligence, spec 01 §4).

use std::fmt;

use crate::runtime_table::{self, class_of, Class};

/// The personality pattern, as shown in error messages.
pub const PERSONALITY_PATTERN: &str = "^[a-z][a-z0-9-]{0,31}$";
/// The runtime pattern, as shown in error messages.
pub const RUNTIME_PATTERN: &str = "^[a-z][a-z0-9]{0,31}$";

/// What a valid personality is, in words (for people; [`PERSONALITY_PATTERN`] is for schemas).
pub const PERSONALITY_RULE: &str =
    "a peer name is 1 to 32 lowercase letters, digits and dashes, starting with a letter";
/// What a valid runtime name is, in words.
pub const RUNTIME_RULE: &str =
    "a runtime name is 1 to 32 lowercase letters and digits, starting with a letter";

/// True when `s` matches `^[a-z][a-z0-9-]{0,31}$`.
pub fn is_valid_personality(s: &str) -> bool {
    is_name(s, true)
}

/// True when `s` matches `^[a-z][a-z0-9]{0,31}$` (no dash: the first dash splits identities).
pub fn is_valid_runtime(s: &str) -> bool {
    is_name(s, false)
}

/// `^[a-z][a-z0-9]{0,31}$`, with `-` allowed after the first letter when `dash`.
fn is_name(s: &str, dash: bool) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 32
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || (dash && *c == b'-'))
}

/// Turn a folder name into a personality candidate (spec 01 §3): transliterate to ASCII,
/// lowercase, collapse every run outside `[a-z0-9]` into one `-`, trim dashes, cut to 32
/// chars, trim a trailing dash again.
///
/// The result is not forced to be valid (`2nd` stays `2nd`, `!!!` becomes empty): callers
/// check it with [`is_valid_personality`]. Idempotent on valid names.
pub fn normalize(s: &str) -> String {
    let ascii = deunicode::deunicode(s).to_ascii_lowercase();
    let mut out = String::with_capacity(ascii.len());
    let mut pending_dash = false;
    for c in ascii.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            out.push(c);
        } else {
            pending_dash = true;
        }
    }
    out.truncate(32);
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// `<runtime>-<personality>`: one peer on one runtime, e.g. `claude-code-reviewer`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// The runtime half (before the first dash).
    pub runtime: String,
    /// The personality half (after the first dash).
    pub personality: String,
}

/// Why an identity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// No dash, or an empty half.
    #[error("invalid identity \"{0}\" — expected \"<runtime>-<personality>\"")]
    Shape(String),
    /// The runtime half does not match [`RUNTIME_PATTERN`].
    #[error("invalid runtime \"{0}\" — {RUNTIME_RULE}")]
    Runtime(String),
    /// The personality half does not match [`PERSONALITY_PATTERN`].
    #[error("invalid personality \"{0}\" — {PERSONALITY_RULE}")]
    Personality(String),
}

impl Identity {
    /// Build from two halves, validating both.
    pub fn new(runtime: &str, personality: &str) -> Result<Identity, IdentityError> {
        if !is_valid_runtime(runtime) {
            return Err(IdentityError::Runtime(runtime.to_string()));
        }
        if !is_valid_personality(personality) {
            return Err(IdentityError::Personality(personality.to_string()));
        }
        Ok(Identity {
            runtime: runtime.to_string(),
            personality: personality.to_string(),
        })
    }

    /// Parse `<runtime>-<personality>`, splitting at the **first** dash (spec 01 §3).
    /// Surrounding whitespace is trimmed.
    pub fn parse(s: &str) -> Result<Identity, IdentityError> {
        let s = s.trim();
        let (rt, p) = s
            .split_once('-')
            .filter(|(rt, p)| !rt.is_empty() && !p.is_empty())
            .ok_or_else(|| IdentityError::Shape(s.to_string()))?;
        Identity::new(rt, p)
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.runtime, self.personality)
    }
}

/// A peer's nature (spec 01 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Intelligence {
    /// An AI agent.
    Artificial,
    /// A human.
    Natural,
    /// A program with no intelligence (a service).
    Absent,
}

impl Intelligence {
    /// Parse a stored value, accepting the legacy spellings `human` (natural) and `scripted`
    /// (absent). Unknown values are `None`.
    pub fn parse(s: &str) -> Option<Intelligence> {
        match s {
            "artificial" => Some(Intelligence::Artificial),
            "natural" | "human" => Some(Intelligence::Natural), // not a runtime name
            "absent" | "scripted" => Some(Intelligence::Absent),
            _ => None,
        }
    }

    /// The canonical spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Intelligence::Artificial => "artificial",
            Intelligence::Natural => "natural",
            Intelligence::Absent => "absent",
        }
    }

    /// The default nature of a peer whose default runtime is `runtime`.
    pub fn default_for_runtime(runtime: &str) -> Intelligence {
        if is_human_channel(runtime) {
            Intelligence::Natural
        } else if class_of(runtime) == Class::Service
            || runtime_table::SERVICE_PACKAGES.contains(&runtime)
        {
            Intelligence::Absent
        } else {
            Intelligence::Artificial
        }
    }

    /// Whether a peer of this nature may run on a runtime of `class` (spec 01 §4): human
    /// channels take natural or absent, services (`notifier`) only absent, agent runtimes
    /// only artificial, other (installed router) runtimes any nature. The class is the
    /// runtime as installed (`runtime::class_installed`), not its name's: a terminal agent
    /// declared by a manifest is `Class::Agent` though the runtime table does not know it.
    pub fn allowed_in(self, class: Class) -> bool {
        match class {
            Class::Human => self != Intelligence::Artificial,
            Class::Service => self == Intelligence::Absent,
            Class::Agent => self == Intelligence::Artificial,
            Class::Router => true,
        }
    }
}

impl fmt::Display for Intelligence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The built-in `human` runtime's name (a person at a terminal with a durable inbox;
/// `runtime::human` hosts it, `inbox` stores its messages).
pub const HUMAN_RUNTIME: &str = runtime_table::HUMAN.name;

/// Runtimes that are channels to humans ([`Class::Human`]): the built-in `human` (a person at
/// a terminal, with a durable inbox) and the chat and mail packages.
pub fn is_human_channel(runtime: &str) -> bool {
    class_of(runtime) == Class::Human
}

/// Runtimes hosted in a pty as an agent TUI ([`Class::Agent`]): `claude`, `codex` and the
/// stand-in `echo`.
pub fn is_agent_runtime(runtime: &str) -> bool {
    class_of(runtime) == Class::Agent
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden cases for `normalize` (spec 01 §3).
    #[test]
    fn normalize_golden() {
        let cases = [
            ("assistant", "assistant"),
            ("Code Reviewer", "code-reviewer"),
            ("my_project.v2", "my-project-v2"),
            ("--Hello,,  World!!--", "hello-world"),
            ("Привет", "privet"),
            ("Мой помощник", "moi-pomoshchnik"),
            ("Köln", "koln"),
            ("Crème Brûlée", "creme-brulee"),
            ("Αθήνα", "athena"),
            ("λόγος", "logos"),
            ("2nd", "2nd"),
            ("!!!", ""),
            ("", ""),
            (
                "a-very-long-folder-name-that-goes-past-the-limit",
                "a-very-long-folder-name-that-goe",
            ),
            // The cut lands on a dash, which is trimmed again.
            (
                "abcdefghij abcdefghij abcdefghij x",
                "abcdefghij-abcdefghij-abcdefghij",
            ),
            (
                "abcdefghijklmnopqrstuvwxyz01234 z",
                "abcdefghijklmnopqrstuvwxyz01234",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input), want, "normalize({input:?})");
        }
    }

    #[test]
    fn normalize_is_idempotent_on_valid_names() {
        for name in [
            "a",
            "bob",
            "code-reviewer",
            "x1-y2",
            "abcdefghijklmnopqrstuvwxyz012345",
        ] {
            assert!(is_valid_personality(name));
            assert_eq!(normalize(name), name);
        }
    }

    #[test]
    fn patterns() {
        assert!(is_valid_personality("a"));
        assert!(is_valid_personality("a-b-"));
        assert!(!is_valid_personality("2nd"));
        assert!(!is_valid_personality("Bob"));
        assert!(!is_valid_personality(&"a".repeat(33)));
        assert!(is_valid_personality(&"a".repeat(32)));
        assert!(is_valid_runtime("claude"));
        assert!(!is_valid_runtime("my-rt"));
        assert!(!is_valid_runtime(""));
    }

    #[test]
    fn identity_splits_at_the_first_dash() {
        let id = Identity::parse("claude-code-reviewer").unwrap();
        assert_eq!(id.runtime, "claude");
        assert_eq!(id.personality, "code-reviewer");
        assert_eq!(id.to_string(), "claude-code-reviewer");
        assert_eq!(Identity::parse(" echo-bob \n").unwrap().personality, "bob");
        for (text, want) in [
            ("claude", "shape"),
            ("-bob", "shape"),
            ("Claude-bob", "runtime"),
            ("claude-2x", "personality"),
        ] {
            let kind = match Identity::parse(text) {
                Err(IdentityError::Shape(_)) => "shape",
                Err(IdentityError::Runtime(_)) => "runtime",
                Err(IdentityError::Personality(_)) => "personality",
                Ok(id) => panic!("{text} parsed as {id}"),
            };
            assert_eq!(kind, want, "{text}");
        }
    }

    #[test]
    fn intelligence_rules() {
        assert_eq!(Intelligence::parse("human"), Some(Intelligence::Natural));
        assert_eq!(Intelligence::parse("scripted"), Some(Intelligence::Absent));
        assert_eq!(Intelligence::parse("robot"), None);
        assert_eq!(
            Intelligence::default_for_runtime("telegram"),
            Intelligence::Natural
        );
        assert_eq!(
            Intelligence::default_for_runtime("notifier"),
            Intelligence::Absent
        );
        assert_eq!(
            Intelligence::default_for_runtime("claude"),
            Intelligence::Artificial
        );
        assert!(Intelligence::Absent.allowed_in(class_of("telegram")));
        assert!(!Intelligence::Artificial.allowed_in(class_of("telegram")));
        assert!(!Intelligence::Natural.allowed_in(class_of("notifier")));
        assert!(!Intelligence::Natural.allowed_in(class_of("claude")));
        assert!(Intelligence::Natural.allowed_in(class_of("console")));
    }
}

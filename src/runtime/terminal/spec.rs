//! The `terminal` section of a runtime manifest (issue 27 item 3): what a terminal agent
//! declares instead of code, read and checked here (pure). `docs/RUNTIMES.md` is the
//! user's reference, with a worked example.
//!
//! ```json
//! "terminal": {
//!   "command": "{dir}/parrot", "args": ["--plain"],
//!   "prompt": {"flag": "--system-prompt-file"},
//!   "mcp": {"env": {"PARROT_MCP_URL": "{url}"},
//!           "file": {"path": ".parrot/mcp.json", "template": "{\"url\": \"{url}\"}"}},
//!   "fresh": ["--session-id", "{conversation}"], "resume": ["--resume", "{conversation}"],
//!   "ready": "^> ", "busy": "^working", "composer": "^> (.*)$", "paste": "^\\[pasted",
//!   "interrupt": ["Escape"]
//! }
//! ```
//!
//! Placeholders, written `{name}`, are filled at every launch: `{url}` the daemon's MCP
//! endpoint, `{port}` its loopback port, `{token_env}` the name of the variable holding the
//! session token (`IAPEER_TOKEN`), `{cwd}` the peer's folder, `{dir}` the installed runtime's
//! folder, and in `fresh` / `resume` only `{conversation}`, the conversation's id.

use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The placeholders every templated field may use.
pub const PLACEHOLDERS: &[&str] = &["url", "port", "token_env", "cwd", "dir"];
/// The placeholder of the conversation id, in `fresh` and `resume` only.
pub const CONVERSATION: &str = "conversation";

/// How the composed system-prompt file reaches the program; neither set: not at all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    /// A flag followed by the file's path (`--system-prompt-file <file>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flag: Option<String>,
    /// An environment variable holding the file's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
}

/// A config file written in the peer's folder at every launch from a template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileTemplate {
    /// The file, relative to the peer's folder (no `..`).
    pub path: String,
    /// Its text, with placeholders.
    pub template: String,
}

/// How the MCP endpoint and the session token reach the program; both empty: not at all
/// (the session's environment still has `IAPEER_TOKEN` and `IAPEER_PORT`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSpec {
    /// Environment variables set at launch, values with placeholders.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A config file written at launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileTemplate>,
}

/// The `terminal` section as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalSpec {
    /// The program (a name on `PATH`, or a path; placeholders allowed).
    pub command: String,
    /// Its arguments at every launch.
    #[serde(default)]
    pub args: Vec<String>,
    /// How the system prompt is passed.
    #[serde(default)]
    pub prompt: PromptSpec,
    /// How the MCP endpoint and token are passed.
    #[serde(default)]
    pub mcp: McpSpec,
    /// Arguments of a fresh start; `{conversation}` here makes iapeer choose the id (a UUID).
    #[serde(default)]
    pub fresh: Vec<String>,
    /// Arguments of a resume; absent: the program cannot resume (every wake is fresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<String>>,
    /// A regex on a screen row: the program waits for input.
    pub ready: String,
    /// A regex on a screen row: the program is working on a turn.
    pub busy: String,
    /// A regex on the composer row, its one capture group the text in it (a draft, a paste).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composer: Option<String>,
    /// A regex on the composer's text: the program shows a paste as a placeholder. Absent:
    /// the composer shows the pasted text itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paste: Option<String>,
    /// The keys that interrupt a turn (`Escape`, `Enter`, `Tab`, …, as `iapeer keys`).
    #[serde(default)]
    pub interrupt: Vec<String>,
}

/// How a terminal runtime's conversations are named ([`crate::adapter::ConversationNaming`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// `fresh` names `{conversation}`: iapeer chooses it; `resume` names it too.
    Chosen,
    /// `resume` without `{conversation}` resumes the folder's conversation.
    Folder,
    /// No `resume`: every wake is fresh.
    NoResume,
}

/// A checked `terminal` section: the spec and its compiled patterns.
#[derive(Debug, Clone)]
pub struct Terminal {
    /// The section as written.
    pub spec: TerminalSpec,
    /// Its screen patterns, compiled.
    pub patterns: Patterns,
    /// The interrupt keys' bytes (empty: none).
    pub interrupt: Vec<u8>,
    /// How conversations are named.
    pub naming: Naming,
}

/// The screen patterns of a `terminal` section, compiled ([`Patterns::compile`]).
#[derive(Debug, Clone)]
pub struct Patterns {
    /// Compiled `ready`.
    pub ready: Regex,
    /// Compiled `busy`.
    pub busy: Regex,
    /// Compiled `composer`.
    pub composer: Option<Regex>,
    /// Compiled `paste`.
    pub paste: Option<Regex>,
}

/// What is wrong with a `terminal` section: one sentence that names the field and says what
/// to do (`"busy" is not a regular expression (…): fix the pattern`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

impl From<&str> for SpecError {
    fn from(s: &str) -> Self {
        SpecError(s.to_string())
    }
}

/// A pattern compiled, or why not (`"<field>" is not a regular expression: …`).
fn pattern(field: &str, text: &str) -> Result<Regex, SpecError> {
    if text.is_empty() {
        return Err(SpecError(format!(
            "\"{field}\" is empty: give a regular expression"
        )));
    }
    Regex::new(text).map_err(|e| {
        SpecError(format!(
            "\"{field}\" is not a regular expression ({}): fix the pattern",
            e.to_string().lines().last().unwrap_or_default().trim()
        ))
    })
}

/// The `{name}` placeholders in `text`: every `{` followed by lower-case letters or `_` and
/// `}` (other braces, as in a JSON template, are text).
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        rest = &rest[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(rest.len());
        if end > 0 && rest[end..].starts_with('}') {
            out.push(&rest[..end]);
        }
    }
    out
}

/// Every placeholder of `text` is known (`conversation` only where `conversation`).
fn check_placeholders(field: &str, text: &str, conversation: bool) -> Result<(), SpecError> {
    for p in placeholders(text) {
        let known = PLACEHOLDERS.contains(&p) || (conversation && p == CONVERSATION);
        if !known {
            let mut names: Vec<String> = PLACEHOLDERS.iter().map(|n| format!("{{{n}}}")).collect();
            if conversation {
                names.push(format!("{{{CONVERSATION}}}"));
            }
            let only = if p == CONVERSATION {
                " ({conversation} is for \"fresh\" and \"resume\" only)"
            } else {
                ""
            };
            return Err(SpecError(format!(
                "\"{field}\" has the unknown placeholder {{{p}}}{only}: use one of {}",
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// Whether `name` can be an environment variable's name (a letter or `_`, then letters,
/// digits or `_`).
fn env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether any argument of `args` names `{conversation}`.
fn names_conversation(args: &[String]) -> bool {
    args.iter().any(|a| placeholders(a).contains(&CONVERSATION))
}

/// How `fresh` and `resume` name conversations, or why they do not agree.
fn naming(spec: &TerminalSpec) -> Result<Naming, SpecError> {
    let fresh = names_conversation(&spec.fresh);
    match (&spec.resume, fresh) {
        (None, _) => Ok(Naming::NoResume),
        (Some(resume), true) if names_conversation(resume) => Ok(Naming::Chosen),
        (Some(_), true) => Err("\"fresh\" chooses {conversation} but \"resume\" does not name it: \
             add {conversation} to \"resume\" (e.g. [\"--resume\", \"{conversation}\"])"
            .into()),
        (Some(resume), false) if names_conversation(resume) => Err(
            "\"resume\" names {conversation} but \"fresh\" does not choose it: add it to \"fresh\" \
             (e.g. [\"--session-id\", \"{conversation}\"]; iapeer passes a new UUID at every fresh \
             start)"
                .into(),
        ),
        (Some(_), false) => Ok(Naming::Folder),
    }
}

impl Terminal {
    /// Check a `terminal` section (pure).
    ///
    /// Errors: the first thing wrong, with what to do: an empty `command`, a pattern that is
    /// not a regular expression, a `composer` without exactly one capture group, both or a
    /// bad prompt variable, a bad MCP variable name or file path, an unknown placeholder,
    /// `fresh` and `resume` that disagree on `{conversation}`, an unknown interrupt key.
    pub fn check(spec: TerminalSpec) -> Result<Terminal, SpecError> {
        if spec.command.trim().is_empty() {
            return Err("\"command\" is empty: name the program to run".into());
        }
        check_placeholders("command", &spec.command, false)?;
        for a in &spec.args {
            check_placeholders("args", a, false)?;
        }
        for (field, args) in [
            ("fresh", Some(&spec.fresh)),
            ("resume", spec.resume.as_ref()),
        ] {
            for a in args.into_iter().flatten() {
                check_placeholders(field, a, true)?;
            }
        }
        let naming = naming(&spec)?;
        match (&spec.prompt.flag, &spec.prompt.env) {
            (Some(_), Some(_)) => {
                return Err("\"prompt\" has both \"flag\" and \"env\": keep one".into())
            }
            (Some(f), None) if f.trim().is_empty() => {
                return Err(
                    "\"prompt\".\"flag\" is empty: give the flag, or leave \"prompt\" out".into(),
                )
            }
            (None, Some(v)) if !env_name(v) => {
                return Err(SpecError(format!(
                    "\"prompt\".\"env\" {v:?} is not a variable name"
                )))
            }
            _ => {}
        }
        for (name, value) in &spec.mcp.env {
            if !env_name(name) {
                return Err(SpecError(format!(
                    "\"mcp\".\"env\" has {name:?}, which is not a variable name"
                )));
            }
            check_placeholders("mcp.env", value, false)?;
        }
        if let Some(file) = &spec.mcp.file {
            let path = std::path::Path::new(&file.path);
            let inside = !file.path.is_empty()
                && path.is_relative()
                && path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside {
                return Err(SpecError(format!(
                    "\"mcp\".\"file\".\"path\" {:?} must be a path inside the peer's folder \
                     (relative, without ..)",
                    file.path
                )));
            }
            check_placeholders("mcp.file.template", &file.template, false)?;
        }
        let patterns = Patterns::compile(&spec)?;
        let keys: Vec<&str> = spec.interrupt.iter().map(String::as_str).collect();
        let interrupt = crate::term::keys::encode_keys(&keys, false)
            .map_err(|e| SpecError(format!("\"interrupt\": {e}")))?;
        Ok(Terminal {
            spec,
            patterns,
            interrupt,
            naming,
        })
    }
}

impl Patterns {
    /// Compile the patterns of `spec` (pure).
    ///
    /// Errors: a pattern that is not a regular expression, a `composer` without exactly one
    /// capture group, a `paste` without a `composer`.
    pub fn compile(spec: &TerminalSpec) -> Result<Patterns, SpecError> {
        let ready = pattern("ready", &spec.ready)?;
        let busy = pattern("busy", &spec.busy)?;
        let composer = match &spec.composer {
            Some(c) => {
                let re = pattern("composer", c)?;
                if re.captures_len() != 2 {
                    return Err(
                        "\"composer\" must have exactly one capture group, the text in the \
                     composer (e.g. \"^> (.*)$\")"
                            .into(),
                    );
                }
                Some(re)
            }
            None => None,
        };
        let paste = match &spec.paste {
            Some(p) if composer.is_none() => {
                return Err(SpecError(format!(
                    "\"paste\" ({p:?}) is read in the composer: give \"composer\" too"
                )))
            }
            Some(p) => Some(pattern("paste", p)?),
            None => None,
        };
        Ok(Patterns {
            ready,
            busy,
            composer,
            paste,
        })
    }
}

/// The values of the placeholders at one launch.
#[derive(Debug, Clone, Default)]
pub struct Values<'a> {
    /// `{url}`.
    pub url: &'a str,
    /// `{port}`.
    pub port: &'a str,
    /// `{cwd}`.
    pub cwd: &'a str,
    /// `{dir}`.
    pub dir: &'a str,
    /// `{conversation}`, when known.
    pub conversation: Option<&'a str>,
}

/// The session-token variable `{token_env}` names.
pub const TOKEN_ENV: &str = "IAPEER_TOKEN";

/// `text` with its placeholders filled (pure; an unknown one is left as written — [`Terminal::check`]
/// refused it at install).
pub fn fill(text: &str, v: &Values) -> String {
    let mut out = text.to_string();
    for (name, value) in [
        ("url", v.url),
        ("port", v.port),
        ("token_env", TOKEN_ENV),
        ("cwd", v.cwd),
        ("dir", v.dir),
        (CONVERSATION, v.conversation.unwrap_or("")),
    ] {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> Result<Terminal, String> {
        let spec: TerminalSpec = serde_json::from_value(json).map_err(|e| e.to_string())?;
        Terminal::check(spec).map_err(|e| e.0)
    }

    fn base() -> serde_json::Value {
        serde_json::json!({
            "command": "{dir}/parrot",
            "args": ["--plain"],
            "prompt": {"flag": "--system-prompt-file"},
            "mcp": {"env": {"PARROT_MCP_URL": "{url}", "PARROT_TOKEN_VAR": "{token_env}"},
                    "file": {"path": ".parrot/mcp.json",
                             "template": "{\"url\": \"{url}\", \"tokenEnv\": \"{token_env}\"}"}},
            "fresh": ["--session-id", "{conversation}"],
            "resume": ["--resume", "{conversation}"],
            "ready": "^> ", "busy": "^working", "composer": "^> (.*)$",
            "interrupt": ["Escape"]
        })
    }

    fn with(key: &str, value: serde_json::Value) -> serde_json::Value {
        let mut v = base();
        v[key] = value;
        v
    }

    #[test]
    fn a_full_section_is_read() {
        let t = spec(base()).unwrap();
        assert_eq!(t.naming, Naming::Chosen);
        assert_eq!(t.interrupt, b"\x1b");
        assert!(t.patterns.paste.is_none());
        let v = Values {
            url: "http://127.0.0.1:9/mcp",
            port: "9",
            cwd: "/w/p",
            dir: "/r/parrot",
            conversation: Some("u-1"),
        };
        assert_eq!(fill(&t.spec.command, &v), "/r/parrot/parrot");
        assert_eq!(
            fill(&t.spec.mcp.file.as_ref().unwrap().template, &v),
            r#"{"url": "http://127.0.0.1:9/mcp", "tokenEnv": "IAPEER_TOKEN"}"#
        );
        assert_eq!(fill("{conversation}", &v), "u-1");
    }

    #[test]
    fn each_mistake_is_named_with_what_to_do() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (with("command", " ".into()), "\"command\" is empty"),
            (
                with("busy", "(".into()),
                "\"busy\" is not a regular expression",
            ),
            (with("ready", "".into()), "\"ready\" is empty"),
            (
                with("composer", "^> .*$".into()),
                "exactly one capture group",
            ),
            (
                with("paste", "[".into()),
                "\"paste\" is not a regular expression",
            ),
            (
                with("interrupt", serde_json::json!(["Esc"])),
                "unknown key name \"Esc\"",
            ),
            (
                with("args", serde_json::json!(["{home}"])),
                "unknown placeholder {home}",
            ),
            (
                with("args", serde_json::json!(["{conversation}"])),
                "for \"fresh\" and \"resume\" only",
            ),
            (
                with("fresh", serde_json::json!([])),
                "\"fresh\" does not choose it",
            ),
            (
                with("resume", serde_json::json!(["--continue"])),
                "\"resume\" does not name it",
            ),
            (
                with("prompt", serde_json::json!({"flag": "-p", "env": "P"})),
                "keep one",
            ),
            (
                with("prompt", serde_json::json!({"env": "1X"})),
                "not a variable name",
            ),
            (
                with(
                    "mcp",
                    serde_json::json!({"file": {"path": "../x", "template": ""}}),
                ),
                "inside the peer's folder",
            ),
            (
                with("mcp", serde_json::json!({"env": {"A-B": "x"}})),
                "not a variable name",
            ),
            (with("colour", "red".into()), "unknown field `colour`"),
        ];
        for (json, want) in cases {
            let err = spec(json.clone()).unwrap_err();
            assert!(err.contains(want), "{json}: {err}");
        }
        let mut no_composer = base();
        no_composer.as_object_mut().unwrap().remove("composer");
        no_composer["paste"] = "x".into();
        assert!(spec(no_composer)
            .unwrap_err()
            .contains("give \"composer\" too"));
    }

    #[test]
    fn fresh_and_resume_decide_the_naming() {
        let folder = spec(with("fresh", serde_json::json!([])));
        assert!(folder.is_err());
        let mut v = with("fresh", serde_json::json!([]));
        v["resume"] = serde_json::json!(["--continue"]);
        assert_eq!(spec(v).unwrap().naming, Naming::Folder);
        let mut v = base();
        v.as_object_mut().unwrap().remove("resume");
        assert_eq!(spec(v).unwrap().naming, Naming::NoResume);
    }

    #[test]
    fn json_braces_are_not_placeholders() {
        assert_eq!(
            placeholders(r#"{"a": {"b": "{url}"}, "{x1}": "{}"}"#),
            vec!["url"]
        );
    }
}

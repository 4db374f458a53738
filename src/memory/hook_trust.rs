//! Codex hook trust (spec 08 §3 `trust-hooks`): Codex runs the hooks of a `hooks.json` only
//! once the user has trusted each of them (a review dialog otherwise, and a silent skip in a
//! headless session). `trust-hooks` records that trust the way the installed Codex does, so
//! the hooks a memory provider installs run without a dialog.
//!
//! The format is Codex 0.171.0's, recorded from the real program
//! (`tests/fixtures/codex-0.171.0/hook-trust/README.md`): in the user's
//! `$CODEX_HOME/config.toml`,
//!
//! ```toml
//! [hooks.state."/abs/peer/.codex/hooks.json:post_tool_use:0:0"]
//! trusted_hash = "sha256:60404e84…"
//! ```
//!
//! where the key names the file, the event, the matcher group and the handler, and the hash
//! is SHA-256 of a normalized JSON identity of the handler ([`hook_hash`]).

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use toml_edit::{value, DocumentMut, Item, Table};

/// The Codex version whose hook-trust format this module writes.
pub const RECORDED_CODEX_VERSION: &str = "0.171.0";

/// One event Codex 0.171.0 knows: its `hooks.json` name, its key label, whether its matcher
/// counts, and its timeout rule in seconds (default, ceiling).
struct EventRule {
    name: &'static str,
    label: &'static str,
    uses_matcher: bool,
    default_timeout: u64,
    max_timeout: Option<u64>,
}

const fn event(name: &'static str, label: &'static str, uses_matcher: bool) -> EventRule {
    EventRule {
        name,
        label,
        uses_matcher,
        default_timeout: 600,
        max_timeout: None,
    }
}

/// [`event`] with a 1 s default and a 3 s longest timeout (`SessionEnd`, `Interrupt`).
const fn short(name: &'static str, label: &'static str, uses_matcher: bool) -> EventRule {
    EventRule {
        default_timeout: 1,
        max_timeout: Some(3),
        ..event(name, label, uses_matcher)
    }
}

/// The events of Codex 0.171.0 (recorded: `all-events`, `matchers-and-skips`).
const EVENTS: &[EventRule] = &[
    event("PreToolUse", "pre_tool_use", true),
    event("PermissionRequest", "permission_request", true),
    event("PostToolUse", "post_tool_use", true),
    event("PreCompact", "pre_compact", true),
    event("PostCompact", "post_compact", true),
    event("SessionStart", "session_start", true),
    short("SessionEnd", "session_end", true),
    event("UserPromptSubmit", "user_prompt_submit", false),
    event("SubagentStart", "subagent_start", true),
    event("SubagentStop", "subagent_stop", true),
    event("Stop", "stop", false),
    event("PreModelRequest", "pre_model_request", false),
    event("PostModelRequest", "post_model_request", false),
    short("Interrupt", "interrupt", false),
];

/// One command hook of a `hooks.json`, as Codex identifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// `<file>:<event label>:<group index>:<handler index>`.
    pub key: String,
    /// `sha256:<64 hex digits>`.
    pub hash: String,
    /// The command it runs.
    pub command: String,
}

/// Why a text is not a Codex hooks file. `Display` says what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum HooksError {
    /// Not JSON.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// Not a JSON object.
    #[error("it is not a JSON object")]
    NotObject,
    /// `hooks` is not an object of events.
    #[error("its \"hooks\" is not an object of events")]
    HooksNotObject,
    /// An event's entry is not a list (the event's name).
    #[error("its \"hooks\".\"{0}\" is not a list")]
    EventNotList(&'static str),
}

/// The command hooks of `text` (a `hooks.json`) whose file is `file` (its absolute, real
/// path, which Codex puts in every key), by the rules of Codex 0.171.0: unknown events,
/// non-command handlers and empty commands are skipped (their positions still count).
///
/// Errors: [`HooksError`], the text is not JSON, or its `hooks` is not an object of arrays.
pub fn hooks_in(file: &str, text: &str) -> Result<Vec<Hook>, HooksError> {
    let doc: Value = serde_json::from_str(text).map_err(HooksError::NotJson)?;
    let doc = doc.as_object().ok_or(HooksError::NotObject)?;
    let Some(events) = doc.get("hooks") else {
        return Ok(Vec::new());
    };
    let events = events.as_object().ok_or(HooksError::HooksNotObject)?;
    let mut out = Vec::new();
    for rule in EVENTS {
        let Some(groups) = events.get(rule.name) else {
            continue;
        };
        let groups = groups
            .as_array()
            .ok_or(HooksError::EventNotList(rule.name))?;
        for (g, group) in groups.iter().enumerate() {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .filter(|_| rule.uses_matcher);
            let handlers = group.get("hooks").and_then(Value::as_array);
            for (h, handler) in handlers.into_iter().flatten().enumerate() {
                if handler.get("type").and_then(Value::as_str) != Some("command") {
                    continue;
                }
                let Some(command) = handler.get("command").and_then(Value::as_str) else {
                    continue;
                };
                if command.trim().is_empty() {
                    continue;
                }
                out.push(Hook {
                    key: format!("{file}:{}:{g}:{h}", rule.label),
                    hash: hook_hash(rule, matcher, command, handler),
                    command: command.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// The trust hash of one command handler (recorded rule, fixture README): SHA-256 of the
/// compact, key-sorted JSON of its normalized identity.
fn hook_hash(rule: &EventRule, matcher: Option<&str>, command: &str, handler: &Value) -> String {
    let asked = handler.get("timeout").and_then(Value::as_u64);
    let mut timeout = asked.unwrap_or(rule.default_timeout).max(1);
    if let Some(max) = rule.max_timeout {
        timeout = timeout.min(max);
    }
    let mut normalized = Map::new();
    normalized.insert("type".into(), json!("command"));
    normalized.insert("command".into(), json!(command));
    normalized.insert("timeout".into(), json!(timeout));
    normalized.insert(
        "async".into(),
        json!(handler
            .get("async")
            .and_then(Value::as_bool)
            .unwrap_or(false)),
    );
    if let Some(s) = handler.get("statusMessage").and_then(Value::as_str) {
        normalized.insert("statusMessage".into(), json!(s));
    }
    let mut identity = Map::new();
    identity.insert("event_name".into(), json!(rule.label));
    identity.insert(
        "hooks".into(),
        Value::Array(vec![Value::Object(normalized)]),
    );
    if let Some(m) = matcher {
        identity.insert("matcher".into(), json!(m));
    }
    // serde_json's map keeps keys sorted (no `preserve_order`), and `to_string` is compact.
    let bytes = Value::Object(identity).to_string();
    format!(
        "sha256:{}",
        crate::fsutil::hex(&Sha256::digest(bytes.as_bytes()))
    )
}

/// What the Codex config says about one hook (`trust-hooks --check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustState {
    /// Its recorded hash is its current hash.
    Trusted,
    /// No hash is recorded: Codex asks for a review.
    Missing,
    /// Another hash is recorded: the hook changed since it was trusted.
    Drift,
}

impl TrustState {
    /// `trusted`, `missing` or `drift`.
    pub fn as_str(self) -> &'static str {
        match self {
            TrustState::Trusted => "trusted",
            TrustState::Missing => "missing",
            TrustState::Drift => "drift",
        }
    }
}

fn states(doc: &DocumentMut) -> Option<&Table> {
    doc.get("hooks")?.get("state")?.as_table()
}

/// The trust of `hook` in the Codex config `doc`.
pub fn state_of(doc: &DocumentMut, hook: &Hook) -> TrustState {
    let recorded = states(doc)
        .and_then(|t| t.get(&hook.key))
        .and_then(|e| e.get("trusted_hash"))
        .and_then(Item::as_str);
    match recorded {
        Some(h) if h == hook.hash => TrustState::Trusted,
        Some(_) => TrustState::Drift,
        None => TrustState::Missing,
    }
}

/// Record trust for every hook of `file` in `doc` (other keys of an entry, such as
/// `enabled`, are kept), and drop the entries of `file` that name no hook any more. Returns
/// whether `doc` changed.
pub fn trust(doc: &mut DocumentMut, file: &str, hooks: &[Hook]) -> bool {
    let mut changed = forget_stale(doc, file, hooks);
    for hook in hooks {
        if state_of(doc, hook) == TrustState::Trusted {
            continue;
        }
        let hooks_table = implicit_table(doc.as_table_mut(), "hooks");
        let state = implicit_table(hooks_table, "state");
        let entry = state
            .entry(&hook.key)
            .or_insert_with(|| Item::Table(Table::new()));
        if !entry.is_table() {
            *entry = Item::Table(Table::new());
        }
        entry["trusted_hash"] = value(hook.hash.as_str());
        changed = true;
    }
    changed
}

/// Drop every trust entry of `file` (a peer's hooks file whose folder is removed). Returns
/// whether `doc` changed.
pub fn forget(doc: &mut DocumentMut, file: &str) -> bool {
    forget_stale(doc, file, &[])
}

fn forget_stale(doc: &mut DocumentMut, file: &str, keep: &[Hook]) -> bool {
    let prefix = format!("{file}:");
    let Some(state) = doc
        .get_mut("hooks")
        .and_then(|h| h.get_mut("state"))
        .and_then(Item::as_table_mut)
    else {
        return false;
    };
    let stale: Vec<String> = state
        .iter()
        .map(|(k, _)| k.to_string())
        .filter(|k| k.starts_with(&prefix) && !keep.iter().any(|h| &h.key == k))
        .collect();
    for k in &stale {
        state.remove(k);
    }
    !stale.is_empty()
}

/// `parent[name]` as a table, made (implicit: no header of its own) when absent.
fn implicit_table<'a>(parent: &'a mut Table, name: &str) -> &'a mut Table {
    let item = parent.entry(name).or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    if !item.is_table() {
        let mut t = Table::new();
        t.set_implicit(true);
        *item = Item::Table(t);
    }
    item.as_table_mut().expect("made a table above")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The path the recorder put every case's hooks.json at (fixture README).
    const RECORDED_FILE: &str = "/tmp/cxrec/proj/.codex/hooks.json";

    fn case(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/codex-0.171.0/hook-trust")
            .join(name)
    }

    /// (key, currentHash, trustStatus) of every hook the real Codex listed, sorted by key.
    fn recorded(name: &str) -> Vec<(String, String, String)> {
        let text = std::fs::read_to_string(case(name).join("hooks-list.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let mut out: Vec<_> = v["data"][0]["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let s = |k: &str| h[k].as_str().unwrap().to_string();
                (s("key"), s("currentHash"), s("trustStatus"))
            })
            .collect();
        out.sort();
        out
    }

    fn ours(name: &str) -> Vec<Hook> {
        let text = std::fs::read_to_string(case(name).join("hooks.json")).unwrap();
        let mut hooks = hooks_in(RECORDED_FILE, &text).unwrap();
        hooks.sort_by(|a, b| a.key.cmp(&b.key));
        hooks
    }

    #[test]
    fn keys_and_hashes_match_what_codex_0_171_0_computed() {
        for name in [
            "all-events",
            "matchers-and-skips",
            "edge-cases",
            "trust-state",
        ] {
            let want: Vec<_> = recorded(name).into_iter().map(|(k, h, _)| (k, h)).collect();
            let got: Vec<_> = ours(name).into_iter().map(|h| (h.key, h.hash)).collect();
            assert_eq!(got, want, "case {name}");
        }
    }

    #[test]
    fn the_trust_state_reads_as_codex_read_it() {
        let config = std::fs::read_to_string(case("trust-state").join("config.toml")).unwrap();
        let doc: DocumentMut = config.parse().unwrap();
        let codex_word = |s: TrustState| match s {
            TrustState::Trusted => "trusted",
            TrustState::Drift => "modified",
            TrustState::Missing => "untrusted",
        };
        let got: Vec<_> = ours("trust-state")
            .iter()
            .map(|h| (h.key.clone(), codex_word(state_of(&doc, h)).to_string()))
            .collect();
        let want: Vec<_> = recorded("trust-state")
            .into_iter()
            .map(|(k, _, t)| (k, t))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn trusting_writes_every_hook_keeps_other_settings_and_drops_stale_entries() {
        let file = "/w/bob/.codex/hooks.json";
        let text = r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"a"},{"type":"command","command":"b"}]}]}}"#;
        let hooks = hooks_in(file, text).unwrap();
        let mut doc: DocumentMut = concat!(
            "model = \"m\" # mine\n\n",
            "[hooks.state.\"/w/bob/.codex/hooks.json:stop:0:0\"]\nenabled = true\ntrusted_hash = \"sha256:old\"\n\n",
            "[hooks.state.\"/w/bob/.codex/hooks.json:stop:4:0\"]\ntrusted_hash = \"sha256:gone\"\n\n",
            "[hooks.state.\"/w/eve/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:eve\"\n",
        )
        .parse()
        .unwrap();
        assert!(trust(&mut doc, file, &hooks));
        assert!(hooks
            .iter()
            .all(|h| state_of(&doc, h) == TrustState::Trusted));
        assert!(
            !trust(&mut doc, file, &hooks),
            "a second run changes nothing"
        );
        let text = doc.to_string();
        assert!(text.starts_with("model = \"m\" # mine\n"), "{text}");
        assert!(text.contains("enabled = true"), "{text}");
        assert!(!text.contains(":stop:4:0"), "stale entry dropped: {text}");
        assert!(
            text.contains("sha256:eve"),
            "another file's entry kept: {text}"
        );
        assert!(forget(&mut doc, file));
        assert!(hooks
            .iter()
            .all(|h| state_of(&doc, h) == TrustState::Missing));
        assert!(doc.to_string().contains("sha256:eve"));
    }

    #[test]
    fn a_fresh_config_gets_one_table_per_hook_and_no_empty_headers() {
        let file = "/w/bob/.codex/hooks.json";
        let hooks = hooks_in(
            file,
            r#"{"hooks":{"PostToolUse":[{"hooks":[{"type":"command","command":"x"}]}]}}"#,
        )
        .unwrap();
        let mut doc = DocumentMut::new();
        trust(&mut doc, file, &hooks);
        assert_eq!(
            doc.to_string(),
            format!(
                "[hooks.state.\"{file}:post_tool_use:0:0\"]\ntrusted_hash = \"{}\"\n",
                hooks[0].hash
            )
        );
    }

    #[test]
    fn a_file_that_is_not_a_hooks_file_is_refused() {
        assert!(hooks_in("/f", "nope").is_err());
        assert!(hooks_in("/f", "[]").is_err());
        assert!(hooks_in("/f", r#"{"hooks":[]}"#).is_err());
        assert!(hooks_in("/f", r#"{"hooks":{"Stop":{}}}"#).is_err());
        assert_eq!(hooks_in("/f", "{}").unwrap(), Vec::new());
    }
}

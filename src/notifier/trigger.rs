//! Triggers as stored in an owner's profile, `notifier.triggers[]` (spec 09 "Storage"), in
//! the shape of the `@agfpd/notifier-runtime` package 0.3.x so either can read what the other
//! wrote:
//!
//! ```json
//! {"role":"time","id":"time-3f9a0c1b2d4e","owner":"alice","target":"alice",
//!  "when":"@every 2s","message":"stand-up","topic":"daily","fallback":["bob"]}
//! {"role":"event","id":"ci-red","owner":"alice","target":"alice",
//!  "script":"tail -F ci.log | grep --line-buffered FAIL","heartbeatSec":600}
//! ```
//!
//! Keys are written in the order `role id owner target when check message script
//! heartbeatSec topic fallback stopped`, absent ones left out. `stopped` is this build's
//! addition (a watcher stopped for good, [`Stopped`]); an entry without it runs, so entries
//! the package wrote read as they always did. An entry without `id` gets
//! [`content_id`]: the role's prefix (`time-`/`event-`) and 12 hex digits of the SHA-256 of
//! the compact JSON of its semantic fields, in the package's order (time: `when check message
//! target topic fallback`; event: `script target topic heartbeatSec fallback`; absent fields
//! left out, `fallback` after resolving `self`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

use super::when::WhenError;
use crate::names::is_valid_personality;

/// Why an entry of `notifier.triggers[]` is not a valid trigger ([`parse_entry`]). `Display`
/// says what is wrong with the entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TriggerError {
    /// The entry is not a JSON object.
    NotObject,
    /// `role` is absent or not `time`/`event` (the value found, when a string).
    UnknownRole(Option<String>),
    /// A key that must be a string holds another value.
    NotString {
        /// The key.
        key: String,
        /// The value found.
        found: Value,
    },
    /// `target` is absent or not a peer name.
    BadTarget,
    /// A `fallback` item that is not `self` or a peer name.
    BadFallback(Value),
    /// `id` is not a peer name.
    BadId(Value),
    /// A time trigger without `when`.
    MissingWhen,
    /// A time trigger's schedule is refused.
    When(#[from] WhenError),
    /// A time trigger without a non-empty `message`.
    MissingMessage,
    /// A time trigger's `message` is longer than [`super::chain::SIGNAL_MAX_CHARS`].
    MessageTooLong(usize),
    /// A time trigger's `check` is empty.
    EmptyCheck,
    /// An event trigger without a non-empty `script`.
    MissingScript,
    /// `heartbeatSec` is not a positive number.
    BadHeartbeat(Value),
    /// `stopped` is neither absent, a boolean nor an object.
    BadStopped(Value),
}

impl std::fmt::Display for TriggerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TriggerError::NotObject => f.write_str("a trigger must be a JSON object"),
            TriggerError::UnknownRole(r) => write!(
                f,
                "unknown role {} (expected \"time\" or \"event\")",
                r.as_ref()
                    .map_or("(none)".to_string(), |r| format!("\"{r}\""))
            ),
            TriggerError::NotString { key, found } => {
                write!(f, "\"{key}\" must be a string, not {found}")
            }
            TriggerError::BadTarget => f.write_str("\"target\" must be a peer name"),
            TriggerError::BadFallback(item) => write!(
                f,
                "\"fallback\" has {item}, which is not a peer name or \"self\""
            ),
            TriggerError::BadId(v) => write!(
                f,
                "\"id\" {v} must be lowercase letters, digits and dashes, starting with a letter, at most 32"
            ),
            TriggerError::MissingWhen => f.write_str("missing \"when\""),
            TriggerError::When(e) => e.fmt(f),
            TriggerError::MissingMessage => f.write_str("missing non-empty \"message\""),
            TriggerError::MessageTooLong(n) => write!(
                f,
                "\"message\" is {n} characters; at most {} (the rest of the daemon's \
                 16000 is kept for the note a fallback's copy starts with) — shorten it, or \
                 point to a file",
                super::chain::SIGNAL_MAX_CHARS
            ),
            TriggerError::EmptyCheck => f.write_str("\"check\" is empty"),
            TriggerError::MissingScript => f.write_str("missing non-empty \"script\""),
            TriggerError::BadHeartbeat(v) => write!(
                f,
                "\"heartbeatSec\" must be a positive number of seconds, not {v}"
            ),
            TriggerError::BadStopped(v) => write!(
                f,
                "\"stopped\" must be an object like {{\"at\":…,\"last\":…}}, not {v}"
            ),
        }
    }
}

/// Which service a trigger belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `timer`: fires `message` on a schedule.
    Time,
    /// `watcher`: forwards the lines of a script.
    Event,
}

impl Role {
    /// The stored `role` value: `time` or `event`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Time => "time",
            Role::Event => "event",
        }
    }

    /// The role a service peer serves: `watcher` (and any name ending in `watcher`) serves
    /// `event` triggers, every other name `time` triggers.
    pub fn of_personality(personality: &str) -> Role {
        if personality.ends_with("watcher") {
            Role::Event
        } else {
            Role::Time
        }
    }

    /// The service name used in replies: `timer` or `watcher`.
    pub fn service(self) -> &'static str {
        match self {
            Role::Time => "timer",
            Role::Event => "watcher",
        }
    }
}

/// The longest `topic` (characters), spec 09.
pub const TOPIC_MAX: usize = 200;

/// One trigger as stored (validated: see [`parse_entry`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    /// `time` or `event`.
    pub role: String,
    /// Unique among the owner's triggers; a peer name.
    pub id: String,
    /// The peer whose profile holds it (the registering sender).
    pub owner: String,
    /// Who receives the signals (a peer name; `self` is resolved when stored).
    pub target: String,
    /// time: the schedule ([`super::when`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// time: a program run before each fire (no shell, no arguments); fire only on exit 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// time: the text delivered verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// event: the `/bin/sh -c` command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// event: seconds without a line after which the script is taken as hung.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_sec: Option<Number>,
    /// The topic of every signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Who to try after the target, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Vec<String>>,
    /// event: the script was stopped for good (spec 09: 5 quick failures); it is not started
    /// again until the trigger is registered again, which stores it without this mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

/// The mark of a watcher stopped for good, stored with its trigger as
/// `"stopped":{"at":"<UTC, ms, Z>","last":"exit status 7"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    /// When it was stopped (UTC, ms, `Z`); empty when the mark does not say.
    #[serde(default)]
    pub at: String,
    /// How its last run ended (`exit status 7`); empty when the mark does not say.
    #[serde(default)]
    pub last: String,
}

/// Read a stored `stopped` value: absent, `null` or `false` = not stopped; `true` or an
/// object = stopped (an object's `at` and `last` kept when they are strings).
///
/// Errors: any other value.
fn parse_stopped(v: Option<&Value>) -> Result<Option<Stopped>, TriggerError> {
    let text = |o: &Map<String, Value>, k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(None),
        Some(Value::Bool(true)) => Ok(Some(Stopped::default())),
        Some(Value::Object(o)) => Ok(Some(Stopped {
            at: text(o, "at"),
            last: text(o, "last"),
        })),
        Some(other) => Err(TriggerError::BadStopped(other.clone())),
    }
}

impl Trigger {
    /// The trigger's role.
    pub fn role(&self) -> Role {
        if self.role == "event" {
            Role::Event
        } else {
            Role::Time
        }
    }

    /// `heartbeatSec` in milliseconds.
    pub fn heartbeat_ms(&self) -> Option<u64> {
        self.heartbeat_sec
            .as_ref()
            .and_then(Number::as_f64)
            .map(|s| (s * 1000.0).round() as u64)
    }

    /// The declared fallbacks (empty when none).
    pub fn fallbacks(&self) -> &[String] {
        self.fallback.as_deref().unwrap_or(&[])
    }
}

#[derive(Serialize)]
struct TimeFields<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    when: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    check: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback: Option<&'a [String]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventFields<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    script: Option<&'a str>,
    target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    topic: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    heartbeat_sec: Option<&'a Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback: Option<&'a [String]>,
}

/// The default id of `t` (its `id` is ignored): see the module doc.
pub fn content_id(t: &Trigger) -> String {
    let json = match t.role() {
        Role::Time => serde_json::to_string(&TimeFields {
            when: t.when.as_deref(),
            check: t.check.as_deref(),
            message: t.message.as_deref(),
            target: &t.target,
            topic: t.topic.as_deref(),
            fallback: t.fallback.as_deref(),
        }),
        Role::Event => serde_json::to_string(&EventFields {
            script: t.script.as_deref(),
            target: &t.target,
            topic: t.topic.as_deref(),
            heartbeat_sec: t.heartbeat_sec.as_ref(),
            fallback: t.fallback.as_deref(),
        }),
    }
    .unwrap_or_default();
    let digest = Sha256::digest(json.as_bytes());
    format!(
        "{}-{}",
        t.role().as_str(),
        &crate::fsutil::hex(&digest)[..12]
    )
}

/// A number as JavaScript would print it: integral values as integers (so the hash and the
/// stored text match the package's for `30` and `30.0` alike).
pub fn js_number(n: &Number) -> Number {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
            if f >= 0.0 {
                Number::from(f as u64)
            } else {
                Number::from(f as i64)
            }
        }
        _ => n.clone(),
    }
}

fn opt_str(entry: &Map<String, Value>, key: &str) -> Result<Option<String>, TriggerError> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(TriggerError::NotString {
            key: key.to_string(),
            found: other.clone(),
        }),
    }
}

/// Resolve `fallback` (one name or a list; `self` = `owner`). Absent or empty = `None`.
///
/// Errors: [`TriggerError::BadFallback`], an element that is not `self` or a peer name.
pub fn resolve_fallback(
    v: Option<&Value>,
    owner: &str,
) -> Result<Option<Vec<String>>, TriggerError> {
    let items: Vec<&Value> = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(a)) => a.iter().collect(),
        Some(one) => vec![one],
    };
    let mut out = Vec::new();
    for item in items {
        match item.as_str() {
            Some("self") => out.push(owner.to_string()),
            Some(n) if is_valid_personality(n) => out.push(n.to_string()),
            _ => return Err(TriggerError::BadFallback(item.clone())),
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// Validate one entry of `notifier.triggers[]` of `owner`'s profile and complete it (`self`
/// fallbacks resolved, default id, `owner` set to the profile's peer). `check_when` is
/// called on a time trigger's `when` (the schedule check, see [`super::when::check`]).
///
/// Errors: [`TriggerError`], what is wrong with the entry (the caller logs it and skips the
/// entry).
pub fn parse_entry(
    entry: &Value,
    owner: &str,
    check_when: &dyn Fn(&str) -> Result<(), WhenError>,
) -> Result<Trigger, TriggerError> {
    let Some(obj) = entry.as_object() else {
        return Err(TriggerError::NotObject);
    };
    let role = match obj.get("role").and_then(Value::as_str) {
        Some("time") => Role::Time,
        Some("event") => Role::Event,
        other => return Err(TriggerError::UnknownRole(other.map(str::to_string))),
    };
    let target = opt_str(obj, "target")?
        .filter(|t| is_valid_personality(t))
        .ok_or(TriggerError::BadTarget)?;
    let topic = opt_str(obj, "topic")?.filter(|t| !t.is_empty());
    let fallback = resolve_fallback(obj.get("fallback"), owner)?;
    let id = match obj.get("id") {
        None => None,
        Some(Value::String(s)) if is_valid_personality(s) => Some(s.clone()),
        Some(other) => return Err(TriggerError::BadId(other.clone())),
    };
    let mut t = Trigger {
        role: role.as_str().into(),
        id: String::new(),
        owner: owner.to_string(),
        target,
        when: None,
        check: None,
        message: None,
        script: None,
        heartbeat_sec: None,
        topic,
        fallback,
        stopped: None,
    };
    match role {
        Role::Time => {
            let when = opt_str(obj, "when")?.ok_or(TriggerError::MissingWhen)?;
            check_when(&when)?;
            t.when = Some(when);
            let message = opt_str(obj, "message")?
                .filter(|m| !m.is_empty())
                .ok_or(TriggerError::MissingMessage)?;
            let n = message.chars().count();
            if n > super::chain::SIGNAL_MAX_CHARS {
                return Err(TriggerError::MessageTooLong(n));
            }
            t.message = Some(message);
            t.check = match opt_str(obj, "check")? {
                Some(c) if c.is_empty() => return Err(TriggerError::EmptyCheck),
                c => c,
            };
        }
        Role::Event => {
            t.script = Some(
                opt_str(obj, "script")?
                    .filter(|s| !s.trim().is_empty())
                    .ok_or(TriggerError::MissingScript)?,
            );
            t.heartbeat_sec = match obj.get("heartbeatSec") {
                None | Some(Value::Null) => None,
                Some(Value::Number(n)) if n.as_f64().is_some_and(|f| f > 0.0) => Some(js_number(n)),
                Some(other) => return Err(TriggerError::BadHeartbeat(other.clone())),
            };
            t.stopped = parse_stopped(obj.get("stopped"))?;
        }
    }
    t.id = id.unwrap_or_else(|| content_id(&t));
    Ok(t)
}

/// Every valid trigger of one profile (its JSON object), plus one line per skipped entry
/// (`<owner>[<index>]: <why>`). A profile without `notifier.triggers` has none.
pub fn from_profile(
    profile: &Map<String, Value>,
    owner: &str,
    check_when: &dyn Fn(&str) -> Result<(), WhenError>,
) -> (Vec<Trigger>, Vec<String>) {
    let Some(list) = profile.get("notifier").and_then(|n| n.get("triggers")) else {
        return (Vec::new(), Vec::new());
    };
    let Some(list) = list.as_array() else {
        return (
            Vec::new(),
            vec![format!("{owner}: notifier.triggers is not a list")],
        );
    };
    let mut ok = Vec::new();
    let mut errors = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        match parse_entry(entry, owner, check_when) {
            Ok(t) => ok.push(t),
            Err(e) => errors.push(format!("{owner}[{i}]: {e}")),
        }
    }
    (ok, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn any_when(_: &str) -> Result<(), WhenError> {
        Ok(())
    }

    /// Ids computed by the `@agfpd/notifier-runtime` 0.3.x rule (sha256 over the compact JSON
    /// of the fields in its order), checked with `sha256sum` on the same JSON text.
    #[test]
    fn default_ids_follow_the_package_rule() {
        let t = parse_entry(
            &json!({"role":"time","when":"@every 2s","message":"tick","target":"alice"}),
            "alice",
            &any_when,
        )
        .unwrap();
        let want = Sha256::digest(br#"{"when":"@every 2s","message":"tick","target":"alice"}"#);
        assert_eq!(t.id, format!("time-{}", &crate::fsutil::hex(&want)[..12]));
        let e = parse_entry(
            &json!({"role":"event","script":"echo hi","target":"bob","heartbeatSec":30.0,
                    "topic":"ci","fallback":"self"}),
            "alice",
            &any_when,
        )
        .unwrap();
        let want = Sha256::digest(
            br#"{"script":"echo hi","target":"bob","topic":"ci","heartbeatSec":30,"fallback":["alice"]}"#,
        );
        assert_eq!(e.id, format!("event-{}", &crate::fsutil::hex(&want)[..12]));
        assert_eq!(e.fallback, Some(vec!["alice".to_string()]));
        // An explicit id is kept.
        let n = parse_entry(
            &json!({"role":"time","id":"standup","when":"0 9 * * 1-5","message":"m","target":"a"}),
            "a",
            &any_when,
        )
        .unwrap();
        assert_eq!(n.id, "standup");
    }

    #[test]
    fn stored_shape_has_the_package_key_order() {
        let t = parse_entry(
            &json!({"fallback":["bob"],"topic":"t","target":"alice","message":"m",
                    "check":"/bin/true","when":"* * * * *","id":"x1","role":"time","owner":"zed"}),
            "alice",
            &any_when,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"role":"time","id":"x1","owner":"alice","target":"alice","when":"* * * * *","check":"/bin/true","message":"m","topic":"t","fallback":["bob"]}"#
        );
    }

    #[test]
    fn bad_entries_are_skipped_with_a_reason_and_the_rest_kept() {
        let profile = json!({"personality":"alice","notifier":{"triggers":[
            {"role":"time","when":"@every 1m","message":"ok","target":"alice"},
            {"role":"timer","when":"@every 1m","message":"x","target":"alice"},
            {"role":"time","when":"bad","message":"x","target":"alice"},
            {"role":"time","when":"@every 1m","target":"alice"},
            {"role":"event","script":"","target":"alice"},
            {"role":"event","script":"x","target":"Bad Name"},
            {"role":"event","script":"x","target":"a","heartbeatSec":-1},
            {"role":"event","script":"x","target":"a","fallback":[3]},
            "nope",
            {"role":"event","script":"tail -f x","target":"alice"},
            {"role":"time","when":"@every 1m","target":"alice",
             "message": "m".repeat(super::super::chain::SIGNAL_MAX_CHARS + 1)}
        ]}});
        let check = |w: &str| super::super::when::parse(w).map(|_| ());
        let (ok, errors) = from_profile(profile.as_object().unwrap(), "alice", &check);
        assert_eq!(ok.len(), 2);
        assert_eq!(errors.len(), 9, "{errors:#?}");
        assert!(
            errors[8].starts_with("alice[10]: \"message\" is 15001 characters; at most 15000"),
            "{}",
            errors[8]
        );
        assert!(errors[0].starts_with("alice[1]: unknown role \"timer\""));
        assert!(errors[1].starts_with("alice[2]: \"bad\" has 1 fields"));
        assert!(errors[7].starts_with("alice[8]: a trigger must be a JSON object"));
        let (none, errs) = from_profile(json!({"a":1}).as_object().unwrap(), "a", &check);
        assert!(none.is_empty() && errs.is_empty());
    }

    /// A watcher's stop mark is read back, written last, and changes neither its id nor an
    /// entry without it (the package's entries run as before).
    #[test]
    fn a_stop_mark_round_trips_and_its_absence_is_running() {
        let plain = json!({"role":"event","script":"exit 7","target":"op"});
        let running = parse_entry(&plain, "op", &any_when).unwrap();
        assert_eq!(running.stopped, None);
        let mut marked = plain.clone();
        marked["stopped"] = json!({"at":"2026-12-01T05:42:27.123Z","last":"exit status 7"});
        let t = parse_entry(&marked, "op", &any_when).unwrap();
        assert_eq!(
            t.stopped,
            Some(Stopped {
                at: "2026-12-01T05:42:27.123Z".into(),
                last: "exit status 7".into()
            })
        );
        assert_eq!(t.id, running.id, "the mark is not part of the content id");
        assert!(serde_json::to_string(&t)
            .unwrap()
            .ends_with(r#""stopped":{"at":"2026-12-01T05:42:27.123Z","last":"exit status 7"}}"#));
        assert!(!serde_json::to_string(&running).unwrap().contains("stopped"));
        for (v, stopped) in [
            (json!(true), true),
            (json!(false), false),
            (json!(null), false),
        ] {
            let mut e = plain.clone();
            e["stopped"] = v;
            assert_eq!(
                parse_entry(&e, "op", &any_when).unwrap().stopped.is_some(),
                stopped
            );
        }
        let mut bad = plain.clone();
        bad["stopped"] = json!("yes");
        assert!(parse_entry(&bad, "op", &any_when)
            .unwrap_err()
            .to_string()
            .starts_with("\"stopped\" must be an object"));
    }

    #[test]
    fn js_numbers_print_integral_values_as_integers() {
        let n: Number = serde_json::from_str("30.0").unwrap();
        assert_eq!(js_number(&n).to_string(), "30");
        let n: Number = serde_json::from_str("1.5").unwrap();
        assert_eq!(js_number(&n).to_string(), "1.5");
    }
}

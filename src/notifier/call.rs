//! How peers call `timer` and `watcher` (spec 09 "Calling them"): the message body is JSON
//! (or `help` / `?`). Parsing a body into a [`Command`], turning a register call into a
//! stored [`Trigger`], and every text the services answer with — call cards, the format
//! description, teaching replies, confirmations and lists. Pure.

use serde_json::{Map, Value};

use super::trigger::{parse_entry, Role, Trigger, TriggerError, TOPIC_MAX};
use super::when::WhenError;
use crate::names::is_valid_personality;

/// A call.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `help`, `?`, `{"cmd":"help"}`.
    Help,
    /// `{"cmd":"list"}`.
    List,
    /// `{"cmd":"unregister","id":…}`.
    Unregister(String),
    /// `{"cmd":"register",…}` or an object without `cmd`: the trigger's fields.
    Register(Map<String, Value>),
}

/// The registry description of a service peer: its call card (≤ 450 characters).
pub fn call_card(role: Role) -> &'static str {
    match role {
        Role::Time => {
            "Scheduler. Message it JSON: {\"when\":\"0 9 * * 1-5\" (cron, local time) or \"@every 30m\", \
             \"message\":\"text to deliver\",\"target\":\"self\" or a peer} — optional \"topic\", \"id\", \
             \"check\":\"/path/prog\" (fire only if it exits 0), \"fallback\":[\"peer\"]. \
             {\"cmd\":\"list\"} shows your timers, {\"cmd\":\"unregister\",\"id\":\"…\"} removes one, \
             help explains."
        }
        Role::Event => {
            "Event watcher. Message it JSON: {\"script\":\"shell command\",\"target\":\"self\" or a peer} — \
             each stdout line of the script is sent to target; the script restarts when it exits. \
             Optional \"topic\", \"id\", \"heartbeatSec\":600 (alert you when silent that long), \
             \"fallback\":[\"peer\"]. {\"cmd\":\"list\"} shows your watchers, \
             {\"cmd\":\"unregister\",\"id\":\"…\"} removes one, help explains."
        }
    }
}

/// The format description sent with help and every teaching reply.
pub fn format_text(role: Role) -> String {
    let common = "Other calls: {\"cmd\":\"list\"} lists your triggers (and your lost signals, if any); \
                  {\"cmd\":\"unregister\",\"id\":\"<id>\"} removes one of your triggers, or dismisses \
                  one of your lost signals; help or ? shows this text.\n\
                  Optional for every trigger: \"id\" (lowercase letters, digits, dashes; registering an \
                  existing id replaces it; default: a hash of the fields), \"topic\" (at most 200 \
                  characters, set on every message), \"fallback\" (a peer name or a list, \"self\" \
                  allowed: who gets the signal when the target cannot be reached; after them you, the \
                  owner).";
    match role {
        Role::Time => format!(
            "How to call timer: send one message whose body is a JSON object.\n\
             Register: {{\"when\":\"<schedule>\",\"message\":\"<text>\",\"target\":\"self\"}}\n\
             - \"when\": a 5-field cron expression in local time, minute hour day-of-month month \
             day-of-week (0-7, 0 and 7 = Sunday; *, n, a-b, */n, a-b/n, lists; no names), e.g. \
             \"0 9 * * 1-5\" = 09:00 on weekdays, \"*/15 * * * *\" = every 15 minutes; or \
             \"@every <n><s|m|h|d>\", e.g. \"@every 90s\", \"@every 1h30m\" (minimum 1s, counted \
             from when it is armed: registration, and again each time the notifier starts, so \
             use cron for fixed times of day).\n\
             - \"message\": the text delivered, verbatim (at most 15000 characters).\n\
             - \"target\": \"self\" (you) or a peer name.\n\
             - \"check\" (optional): the path of a program run with no arguments before each fire; \
             the message is sent only if it exits 0 within 30 s.\n{common}\n\
             Example: {{\"when\":\"@every 30m\",\"message\":\"check the build\",\"target\":\"self\",\"topic\":\"ci\"}}"
        ),
        Role::Event => format!(
            "How to call watcher: send one message whose body is a JSON object.\n\
             Register: {{\"script\":\"<shell command>\",\"target\":\"self\"}}\n\
             - \"script\": a command line run with /bin/sh -c that keeps running; every non-empty \
             line it prints is one message to the target (stderr is only logged). When it exits it \
             is restarted (waiting 1 s, doubling up to 60 s); 5 failures within 60 s stop it for \
             good and you are told (list marks it; register it again, same id, to run it again). A \
             run that printed a line is no failure: a script that prints and exits repeats every \
             second.\n\
             - \"target\": \"self\" (you) or a peer name.\n\
             - \"heartbeatSec\" (optional): seconds; when the script prints nothing for that long \
             you are alerted and it is restarted.\n{common}\n\
             Example: {{\"script\":\"tail -F /var/log/app.log | grep --line-buffered ERROR\",\
             \"target\":\"self\",\"topic\":\"app-errors\"}}"
        ),
    }
}

/// A teaching reply: what was wrong, then the format.
pub fn teaching(role: Role, what: &str) -> String {
    format!(
        "{}: that was not a valid call — {what}\n\n{}",
        role.service(),
        format_text(role)
    )
}

/// What a registration's confirmation adds when peers of the trigger's chain (`missing`,
/// target and fallbacks in order) are not registered: the trigger stands (spec 09 checks a
/// call's syntax only, and the peer may be created later), but until then each of its signals
/// goes on down the chain. Empty when every one is registered.
pub fn unregistered_note(missing: &[&str]) -> String {
    if missing.is_empty() {
        return String::new();
    }
    let names: Vec<String> = missing.iter().map(|n| format!("\"{n}\"")).collect();
    format!(
        "\nNote: not a registered peer (yet): {} — until it is, each signal for it goes on \
         down the chain (fallbacks, then you); iapeer list shows the peers.",
        names.join(", ")
    )
}

/// Why a call to a notifier service was not valid. `Display` says what is wrong, for
/// [`teaching`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The body starts like a JSON object but does not parse (the parser's message).
    InvalidJson(String),
    /// The body is not JSON at all.
    NotJson,
    /// The body is JSON but not an object.
    NotObject,
    /// `cmd` is not a string.
    CmdNotString(Value),
    /// `unregister` without an `id`.
    UnregisterWithoutId,
    /// An unknown `cmd`.
    UnknownCmd(String),
    /// A field this role does not know.
    UnknownField {
        /// The role the call was made to.
        role: Role,
        /// The field.
        key: String,
        /// True when the field belongs to the other role.
        other_role: bool,
    },
    /// Required fields are missing.
    Missing(Vec<&'static str>),
    /// `target` is not `self` or a peer name.
    BadTarget(Value),
    /// `topic` is longer than [`TOPIC_MAX`].
    TopicTooLong,
    /// `topic` holds a line break.
    TopicLineBreak,
    /// The target or a fallback is the service itself (its name).
    TargetIsService(String),
    /// The entry the call makes is not a valid trigger.
    Trigger(#[from] TriggerError),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::InvalidJson(e) => write!(
                f,
                "the body is not valid JSON ({e}); send only the JSON object, no other text"
            ),
            CallError::NotJson => {
                f.write_str("the body is not JSON; send a JSON object (no other text around it)")
            }
            CallError::NotObject => f.write_str("the body is JSON but not an object; send {…}"),
            CallError::CmdNotString(v) => write!(f, "\"cmd\" must be a string, not {v}"),
            CallError::UnregisterWithoutId => {
                f.write_str("unregister needs the trigger's \"id\" (see {\"cmd\":\"list\"})")
            }
            CallError::UnknownCmd(c) => write!(
                f,
                "unknown \"cmd\" \"{c}\"; use register (or no cmd), list, unregister or help"
            ),
            CallError::UnknownField {
                role,
                key,
                other_role,
            } => {
                let allowed = match role {
                    Role::Time => TIME_KEYS,
                    Role::Event => EVENT_KEYS,
                };
                let hint = if *other_role {
                    format!(
                        " (\"{key}\" belongs to {}, not {})",
                        match role {
                            Role::Time => "watcher",
                            Role::Event => "timer",
                        },
                        role.service()
                    )
                } else {
                    String::new()
                };
                write!(
                    f,
                    "unknown field \"{key}\"{hint}; the fields are {}",
                    allowed.join(", ")
                )
            }
            CallError::Missing(keys) => write!(f, "missing {}", quoted(keys)),
            CallError::BadTarget(t) => write!(
                f,
                "\"target\" {t} is not \"self\" or a peer name (lowercase letters, digits, dashes)"
            ),
            CallError::TopicTooLong => {
                write!(f, "\"topic\" is longer than {TOPIC_MAX} characters")
            }
            CallError::TopicLineBreak => {
                f.write_str("\"topic\" holds a line break; a topic is one line")
            }
            CallError::TargetIsService(me) => write!(
                f,
                "\"{me}\" is this service itself; signals go to a peer that acts on \
                 them (\"self\" is you)"
            ),
            CallError::Trigger(e) => e.fmt(f),
        }
    }
}

/// Parse a message body.
///
/// Errors: [`CallError`], what is wrong, for [`teaching`].
pub fn parse_call(body: &str) -> Result<Command, CallError> {
    let text = body.trim();
    if text.eq_ignore_ascii_case("help") || text == "?" {
        return Ok(Command::Help);
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        if text.starts_with('{') {
            CallError::InvalidJson(e.to_string())
        } else {
            CallError::NotJson
        }
    })?;
    let Value::Object(mut obj) = value else {
        return Err(CallError::NotObject);
    };
    let cmd = match obj.remove("cmd") {
        None => "register".to_string(),
        Some(Value::String(c)) => c,
        Some(other) => return Err(CallError::CmdNotString(other)),
    };
    match cmd.as_str() {
        "help" => Ok(Command::Help),
        "list" => Ok(Command::List),
        "unregister" => match obj.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Ok(Command::Unregister(id.to_string())),
            _ => Err(CallError::UnregisterWithoutId),
        },
        "register" => Ok(Command::Register(obj)),
        other => Err(CallError::UnknownCmd(other.to_string())),
    }
}

const TIME_KEYS: &[&str] = &[
    "when", "message", "target", "check", "id", "topic", "fallback",
];
const EVENT_KEYS: &[&str] = &[
    "script",
    "target",
    "heartbeatSec",
    "id",
    "topic",
    "fallback",
];

/// The trigger a register call of `sender` makes: `owner` = `sender`, `self` resolved.
/// `check_when` validates a schedule (see [`super::when::check`]).
///
/// Errors: [`CallError`], what is wrong, for [`teaching`].
pub fn build_trigger(
    role: Role,
    mut fields: Map<String, Value>,
    sender: &str,
    check_when: &dyn Fn(&str) -> Result<(), WhenError>,
) -> Result<Trigger, CallError> {
    let (allowed, other) = match role {
        Role::Time => (TIME_KEYS, EVENT_KEYS),
        Role::Event => (EVENT_KEYS, TIME_KEYS),
    };
    for key in fields.keys() {
        if !allowed.contains(&key.as_str()) && key != "role" && key != "owner" {
            return Err(CallError::UnknownField {
                role,
                key: key.clone(),
                other_role: other.contains(&key.as_str()),
            });
        }
    }
    let required: &[&str] = match role {
        Role::Time => &["when", "message", "target"],
        Role::Event => &["script", "target"],
    };
    let missing: Vec<&'static str> = required
        .iter()
        .copied()
        .filter(|k| !fields.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(CallError::Missing(missing));
    }
    match fields.get("target") {
        Some(Value::String(t)) if t == "self" => {
            fields.insert("target".into(), Value::String(sender.into()));
        }
        Some(Value::String(t)) if is_valid_personality(t) => {}
        Some(t) => return Err(CallError::BadTarget(t.clone())),
        None => {}
    }
    if let Some(Value::String(t)) = fields.get("topic") {
        if t.chars().count() > TOPIC_MAX {
            return Err(CallError::TopicTooLong);
        }
        // Trimmed as a send trims it: a line break at either end is no second line.
        if t.trim().contains(['\n', '\r']) {
            // Every signal would be refused (spec 03 §1: a topic is one line).
            return Err(CallError::TopicLineBreak);
        }
    }
    fields.insert("role".into(), Value::String(role.as_str().into()));
    fields.remove("owner");
    Ok(parse_entry(&Value::Object(fields), sender, check_when)?)
}

fn quoted(keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// One line describing a trigger: `• <id> — <when|script> → <target> (extras)`; a watcher
/// stopped for good gets a second line saying so and how to run it again.
pub fn trigger_line(t: &Trigger) -> String {
    let spec = t.when.as_deref().or(t.script.as_deref()).unwrap_or("?");
    let mut extras = Vec::new();
    if let Some(h) = &t.heartbeat_sec {
        extras.push(format!("heartbeat {h}s"));
    }
    if !t.fallbacks().is_empty() {
        extras.push(format!("fallback {}", t.fallbacks().join(", ")));
    }
    if let Some(topic) = &t.topic {
        extras.push(format!("topic {topic}"));
    }
    let tail = if extras.is_empty() {
        String::new()
    } else {
        format!(" ({})", extras.join("; "))
    };
    let stop =
        match &t.stopped {
            None => String::new(),
            Some(s) => {
                format!(
            "\n  STOPPED{}{} after 5 quick failures; it does not run until you register it \
             again with the same id (which lets it run again)",
            if s.at.is_empty() { String::new() } else { format!(" since {}", s.at) },
            if s.last.is_empty() { String::new() } else { format!(" (last: {})", s.last) },
        )
            }
        };
    format!("• {} — {spec} → {}{tail}{stop}", t.id, t.target)
}

/// The list of `mine` (the caller's triggers of this role) and of the caller's lost signals
/// (`lost`: one line each, starting with the signal's id), as every reply ends. Each part
/// that has entries ends with how to remove one of them (`unregister` takes a trigger's id or
/// a lost signal's); an empty list offers nothing to remove.
pub fn list_text(role: Role, mine: &[&Trigger], lost: &[String]) -> String {
    let mut out = if mine.is_empty() {
        format!("You have no {} triggers.", role.service())
    } else {
        let mut s = format!("Your {} triggers ({}):", role.service(), mine.len());
        for t in mine {
            s.push('\n');
            s.push_str(&trigger_line(t));
        }
        s.push_str("\nRemove one: {\"cmd\":\"unregister\",\"id\":\"<id>\"}");
        s
    };
    if !lost.is_empty() {
        out.push_str(&format!(
            "\nLost signals (no one could be reached; kept in the spool) ({}):",
            lost.len()
        ));
        for l in lost {
            out.push_str("\n• ");
            out.push_str(l);
        }
        out.push_str(
            "\nDismiss one (its spool file is deleted): {\"cmd\":\"unregister\",\"id\":\"<signal id>\"}",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(_: &str) -> Result<(), WhenError> {
        Ok(())
    }

    #[test]
    fn a_topic_is_one_line() {
        let call = |topic: &str| {
            let body = serde_json::json!({"when":"@every 5s","message":"m","target":"self",
                                          "topic": topic});
            match parse_call(&body.to_string()).unwrap() {
                Command::Register(m) => build_trigger(Role::Time, m, "alice", &ok),
                other => panic!("{other:?}"),
            }
        };
        assert!(call("daily stand-up").is_ok());
        assert!(call("daily\n").is_ok(), "trimmed as a send trims it");
        for bad in ["a\nb", "a\rb"] {
            assert_eq!(
                call(bad).unwrap_err().to_string(),
                "\"topic\" holds a line break; a topic is one line"
            );
        }
    }

    #[test]
    fn only_unregistered_peers_get_a_note() {
        assert_eq!(unregistered_note(&[]), "");
        let note = unregistered_note(&["ghost", "later"]);
        assert!(
            note.starts_with("\nNote: not a registered peer (yet): \"ghost\", \"later\" — "),
            "{note}"
        );
    }

    #[test]
    fn call_cards_fit_in_450_characters() {
        for role in [Role::Time, Role::Event] {
            let n = call_card(role).chars().count();
            assert!(n <= 450, "{role:?}: {n}");
        }
    }

    #[test]
    fn lists_show_triggers_and_lost_signals() {
        let t = build_trigger(
            Role::Event,
            match parse_call(
                r#"{"script":"x","target":"self","heartbeatSec":60,"id":"w1","fallback":"bob"}"#,
            )
            .unwrap()
            {
                Command::Register(m) => m,
                other => panic!("{other:?}"),
            },
            "alice",
            &ok,
        )
        .unwrap();
        let text = list_text(Role::Event, &[&t], &["sig-1 — line for bob".into()]);
        assert_eq!(
            text,
            "Your watcher triggers (1):\n• w1 — x → alice (heartbeat 60s; fallback bob)\n\
             Remove one: {\"cmd\":\"unregister\",\"id\":\"<id>\"}\n\
             Lost signals (no one could be reached; kept in the spool) (1):\n• sig-1 — line for bob\n\
             Dismiss one (its spool file is deleted): {\"cmd\":\"unregister\",\"id\":\"<signal id>\"}"
        );
        // Each hint only where there is something it applies to.
        assert_eq!(
            list_text(Role::Time, &[], &[]),
            "You have no timer triggers."
        );
        assert_eq!(
            list_text(Role::Time, &[], &["sig-2 — fire for ghost".into()]),
            "You have no timer triggers.\n\
             Lost signals (no one could be reached; kept in the spool) (1):\n• sig-2 — fire for ghost\n\
             Dismiss one (its spool file is deleted): {\"cmd\":\"unregister\",\"id\":\"<signal id>\"}"
        );
        assert!(!list_text(Role::Event, &[&t], &[]).contains("Dismiss"));
    }

    #[test]
    fn a_stopped_watcher_is_marked_with_how_to_run_it_again() {
        let mut t = parse_entry(
            &serde_json::json!({"role":"event","id":"bad","script":"exit 7","target":"op"}),
            "op",
            &ok,
        )
        .unwrap();
        assert_eq!(trigger_line(&t), "• bad — exit 7 → op");
        t.stopped = Some(super::super::trigger::Stopped {
            at: "2026-12-01T05:42:27.123Z".into(),
            last: "exit status 7".into(),
        });
        assert_eq!(
            trigger_line(&t),
            "• bad — exit 7 → op\n  STOPPED since 2026-12-01T05:42:27.123Z (last: exit status 7) \
             after 5 quick failures; it does not run until you register it again with the same \
             id (which lets it run again)"
        );
    }

    #[test]
    fn bodies_parse_into_commands() {
        assert_eq!(parse_call(" help "), Ok(Command::Help));
        assert_eq!(parse_call("?"), Ok(Command::Help));
        assert_eq!(parse_call(r#"{"cmd":"help"}"#), Ok(Command::Help));
        assert_eq!(parse_call(r#"{"cmd":"list"}"#), Ok(Command::List));
        assert_eq!(
            parse_call(r#"{"cmd":"unregister","id":"x"}"#),
            Ok(Command::Unregister("x".into()))
        );
        assert!(matches!(
            parse_call(r#"{"when":"@every 1s"}"#),
            Ok(Command::Register(_))
        ));
        for (body, want) in [
            ("remind me at 9", "not JSON"),
            ("{\"when\":", "not valid JSON"),
            ("[1]", "not an object"),
            (r#"{"cmd":"add"}"#, "unknown \"cmd\" \"add\""),
            (r#"{"cmd":"unregister"}"#, "needs the trigger's \"id\""),
        ] {
            let e = parse_call(body).unwrap_err();
            assert!(e.to_string().contains(want), "{body}: {e}");
        }
    }

    #[test]
    fn register_resolves_self_and_teaches_on_mistakes() {
        let fields = |s: &str| match parse_call(s).unwrap() {
            Command::Register(m) => m,
            other => panic!("{other:?}"),
        };
        let t = build_trigger(
            Role::Time,
            fields(r#"{"when":"@every 2s","message":"tick","target":"self","owner":"mallory"}"#),
            "alice",
            &ok,
        )
        .unwrap();
        assert_eq!((t.owner.as_str(), t.target.as_str()), ("alice", "alice"));
        assert!(t.id.starts_with("time-"));
        for (role, body, want) in [
            (
                Role::Time,
                r#"{"message":"m","target":"self"}"#,
                "missing \"when\"",
            ),
            (
                Role::Time,
                r#"{"when":"x"}"#,
                "missing \"message\" and \"target\"",
            ),
            (
                Role::Time,
                r#"{"script":"x","target":"self"}"#,
                "\"script\" belongs to watcher",
            ),
            (
                Role::Event,
                r#"{"schedule":"x"}"#,
                "unknown field \"schedule\"",
            ),
            (
                Role::Time,
                r#"{"when":"* * * * *","message":"m","target":"Bob!"}"#,
                "not \"self\" or a peer name",
            ),
        ] {
            let e = build_trigger(role, fields(body), "alice", &ok).unwrap_err();
            assert!(e.to_string().contains(want), "{body}: {e}");
        }
        let long = "x".repeat(201);
        let e = build_trigger(
            Role::Event,
            fields(&format!(
                r#"{{"script":"x","target":"self","topic":"{long}"}}"#
            )),
            "alice",
            &ok,
        )
        .unwrap_err();
        assert!(e.to_string().contains("longer than 200"), "{e}");
        let teach = teaching(Role::Time, "missing \"when\"");
        assert!(teach.starts_with("timer: that was not a valid call — missing \"when\""));
        assert!(teach.contains("Example: {\"when\":\"@every 30m\""));
    }
}

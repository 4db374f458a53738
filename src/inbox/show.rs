//! What `iapeer inbox` decides and prints, as pure functions: whose inbox, and how one record
//! reads on a terminal or as JSON.

use std::path::Path;

use jiff::tz::TimeZone;

use super::Record;
use crate::names::{Identity, HUMAN_RUNTIME as HUMAN};
use crate::registry::{Registry, RegistryPeer};

/// Why [`pick_peer`] found no inbox to show. `Display` is the user text (it names the human
/// peers to choose from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickError {
    /// The named peer is not on the human runtime.
    NotHuman {
        /// The peer.
        personality: String,
        /// Its runtimes.
        runtimes: Vec<String>,
        /// The human peers.
        humans: Vec<String>,
    },
    /// The named peer is not registered.
    NotRegistered {
        /// The name given.
        name: String,
        /// The human peers.
        humans: Vec<String>,
    },
    /// No peer is on the human runtime.
    NoHuman,
    /// Several human peers and none named (their names).
    Several(Vec<String>),
}

impl std::fmt::Display for PickError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PickError::NotHuman {
                personality,
                runtimes,
                humans,
            } => write!(
                f,
                "\"{personality}\" is not on the human runtime (its runtimes: {}), so it has no inbox{}",
                runtimes.join(", "),
                choices_hint(humans)
            ),
            PickError::NotRegistered { name, humans } => write!(
                f,
                "peer \"{name}\" is not registered{}",
                choices_hint(humans)
            ),
            PickError::NoHuman => f.write_str(
                "no peer is on the human runtime, so there is no inbox to show — make yours with: \
                 iapeer create <name> --runtime human",
            ),
            PickError::Several(names) => write!(
                f,
                "several human peers ({}) — name the one to show: iapeer inbox <peer>",
                names.join(", ")
            ),
        }
    }
}

impl std::error::Error for PickError {}

/// The inbox to show. `given` is the `[peer]` argument; otherwise the human this terminal
/// speaks as, in `iapeer send`'s order: `PEER_IDENTITY` (`env_identity`) when it is a human
/// identity, the peer whose folder holds `cwd` when it is on the human runtime, else the
/// registry's only peer on the human runtime.
///
/// Errors: [`PickError`], the named peer is unknown or not on the human runtime; no human
/// peer; several and none chosen (the text names them).
pub fn pick_peer(
    given: Option<&str>,
    env_identity: Option<&str>,
    cwd: &Path,
    registry: &Registry,
) -> Result<String, PickError> {
    let humans: Vec<&RegistryPeer> = registry.peers.iter().filter(|p| is_human(p)).collect();
    if let Some(name) = given {
        return match registry.find(name) {
            Some(p) if is_human(p) => Ok(p.personality.clone()),
            Some(p) => Err(PickError::NotHuman {
                personality: p.personality.clone(),
                runtimes: p.runtimes.clone(),
                humans: names(&humans),
            }),
            None => Err(PickError::NotRegistered {
                name: name.to_string(),
                humans: names(&humans),
            }),
        };
    }
    if let Some(id) = env_identity.and_then(|v| Identity::parse(v.trim()).ok()) {
        if id.runtime == HUMAN && registry.find(&id.personality).is_some() {
            return Ok(id.personality);
        }
    }
    if let Some(p) = registry.containing(cwd).filter(|p| is_human(p)) {
        return Ok(p.personality.clone());
    }
    match humans.as_slice() {
        [one] => Ok(one.personality.clone()),
        [] => Err(PickError::NoHuman),
        several => Err(PickError::Several(names(several))),
    }
}

fn is_human(p: &RegistryPeer) -> bool {
    p.declares(HUMAN)
}

fn names(peers: &[&RegistryPeer]) -> Vec<String> {
    peers.iter().map(|p| p.personality.clone()).collect()
}

fn choices_hint(humans: &[String]) -> String {
    if humans.is_empty() {
        " — no peer is on the human runtime yet (iapeer create <name> --runtime human)".into()
    } else {
        format!(" — human peers: {}", humans.join(", "))
    }
}

/// One record as a person reads it: a head line (`●` unread / `·` read, time received,
/// sender and runtime, topic), the body indented by four spaces, one `attachment:` line per
/// file. Ends with a newline.
///
/// ```text
/// ● 14:03:07  alice (echo)  topic: plans
///     the body
///     attachment: /root/state/iapeer/attachments/you/<sha>/a.png
/// ```
///
/// What a sender wrote is shown with its control characters as visible stand-ins, never
/// sent to the terminal ([`crate::visible`]): the head's fields and each attachment are
/// one-line fields ([`crate::visible::line`]); the body keeps its line breaks (LF, or CR LF)
/// and tabs, every line indented, and a CR anywhere else is `␍` ([`crate::visible::text`]).
pub fn render(r: &Record, unread: bool, tz: &TimeZone, today: jiff::civil::Date) -> String {
    use crate::visible::{line, text};
    let mark = if unread { '●' } else { '·' };
    let mut out = format!(
        "{mark} {}  {} ({})",
        line(&crate::clock::local_clock(&r.received, tz, today)),
        line(&r.from),
        line(&r.runtime)
    );
    if let Some(t) = &r.topic {
        out.push_str(&format!("  topic: {}", line(t)));
    }
    out.push('\n');
    for l in r.body.lines() {
        out.push_str("    ");
        out.push_str(&text(l));
        out.push('\n');
    }
    if r.body.is_empty() {
        out.push_str("    \n");
    }
    for a in &r.attachments {
        out.push_str(&format!("    attachment: {}\n", line(a)));
    }
    out
}

/// One record as a `--json` line: the stored record plus `"unread"` (written by
/// [`crate::visible::json`]).
pub fn json(r: &Record, unread: bool) -> String {
    let mut v = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("unread".into(), unread.into());
    }
    crate::visible::json(&v)
}

/// The reply hint under a listing: how `peer` answers the newest message of `records` that
/// has someone to answer. A notice of iapeer itself (runtime `daemon`: a message that could
/// not be delivered, a paused exchange) has no one behind it, so it gets no hint; `None`
/// when no record has a sender to answer.
pub fn reply_hint(peer: &str, records: &[Record]) -> Option<String> {
    let r = records
        .iter()
        .rev()
        .find(|r| r.runtime != crate::protocol::DAEMON_RUNTIME)?;
    Some(crate::visible::line(&reply_hint_raw(peer, r)).into_owned())
}

fn reply_hint_raw(peer: &str, r: &Record) -> String {
    let topic = r
        .topic
        .as_deref()
        .map(|t| format!(" --topic {}", shell_word(t)))
        .unwrap_or_default();
    format!(
        "reply: iapeer send {}{topic} --from {HUMAN}-{peer} --message '…'",
        r.from
    )
}

/// `s` as one POSIX shell word: as it is when it holds only letters, digits and `-_./:`,
/// else in single quotes (a `'` inside becomes `'\''`). Also used for a path the CLI tells
/// the user to run (`update`'s rollback advice).
pub(crate) fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

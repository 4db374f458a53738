//! The Redis key layout of the federation: the wire contract between hosts (issue 28;
//! `docs/FEDERATION.md` quotes it). Every host of one federation uses the same Redis
//! database; every key iapeer writes starts with [`PREFIX`], so other data in that database is
//! left alone, and a later layout takes a new version in the prefix.
//!
//! | key | type | written by | holds |
//! |---|---|---|---|
//! | `iapeer:v1:alive:<host>` | string, TTL [`ALIVE_TTL`] | host `<host>`, every [`HEARTBEAT_INTERVAL`] | its last [`Heartbeat`] as JSON; present = the host is online |
//! | `iapeer:v1:hosts` | hash `<host>` → JSON | each host, with its heartbeat | every host's last [`Heartbeat`], kept after it goes offline (when it was last seen) |
//! | `iapeer:v1:roster:<host>` | string, TTL [`ALIVE_TTL`] | host `<host>`, with its heartbeat | its peers as a [`Roster`] (JSON) |
//! | `iapeer:v1:inbox:<to>:from:<from>` | stream, ≈ [`STREAM_MAXLEN`] entries | host `<from>` only | messages from `<from>`'s peers to `<to>`'s, one [`Entry`] each; read by `<to>` with the consumer group [`GROUP`] |
//! | `iapeer:v1:reply:<to>:from:<from>` | stream, ≈ [`STREAM_MAXLEN`] entries | host `<from>` only | the outcomes of `<to>`'s sends to `<from>`, one [`Outcome`] each |
//!
//! Each stream names both ends (issue 28 item 5, "who may send"): the recipient takes the
//! sending host from the KEY it read ([`inbox_sender`], [`reply_sender`]), never from an
//! entry's body, so an ACL user allowed to write only `…:from:<itself>` (the layout in
//! `docs/FEDERATION.md`) cannot pass as another host; an entry whose `from` names another host
//! than its key is refused ([`Entry::check_host`]). A recipient learns which streams to read
//! from the `hosts` hash (each heartbeat).
//!
//! A host deletes its `alive` and `roster` keys when its daemon stops and its `hosts` entry too
//! when it leaves (`iapeer federation leave`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What every key starts with: the product and the layout's version.
pub const PREFIX: &str = "iapeer:v1:";

/// How often a host writes its heartbeat: 5 s.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// The life of a host's `alive` key: 3 heartbeats (15 s). A host whose key expired is
/// offline.
pub const ALIVE_TTL: Duration = Duration::from_secs(15);

/// The consumer group every host reads its own inbox stream with (its consumer: its host
/// name).
pub const GROUP: &str = "iapeer";

/// About how many entries an inbox or reply stream keeps (`XADD … MAXLEN ~`): older ones
/// are trimmed (an inbox entry nobody read by then is lost; 10 000 is days of a busy team).
pub const STREAM_MAXLEN: usize = 10_000;

/// How long a message for a host that is offline is kept for it (issue 28 item 4): 24 h
/// after its entry was written (its stream id's time, Redis's clock). The recipient refuses
/// an entry older than that when it reads it ([`expired`]); the sender stops following it
/// a little later ([`RETENTION_GRACE`]).
pub const RETENTION: Duration = Duration::from_secs(24 * 3600);

/// What the sender waits past [`RETENTION`] for an outcome before it tells its peer the
/// message was not delivered: the recipient's refusal of a too old entry comes first, give
/// or take the clocks' skew (`doctor` fails above 10 s).
pub const RETENTION_GRACE: Duration = Duration::from_secs(60);

/// Whether the inbox entry of stream id `stream_id` (`<ms>-<seq>`, Redis's clock) is older
/// than `keep` at `now_ms` (this host's clock, ms since the epoch). Pure. An id that is not
/// `<ms>-<seq>` is not expired (it is read, as before).
pub fn expired(stream_id: &str, now_ms: u64, keep: Duration) -> bool {
    stream_id
        .split_once('-')
        .and_then(|(ms, _)| ms.parse::<u64>().ok())
        .is_some_and(|at| now_ms.saturating_sub(at) > keep.as_millis() as u64)
}

/// A retention as the answers say it: `24 h`, `90 min`, `3 s`. Pure.
pub fn retention_text(keep: Duration) -> String {
    let s = keep.as_secs();
    if s >= 3600 && s % 3600 == 0 {
        format!("{} h", s / 3600)
    } else if s >= 60 && s % 60 == 0 {
        format!("{} min", s / 60)
    } else {
        format!("{} s", keep.as_secs_f64())
    }
}

/// `iapeer:v1:roster:<host>`: the host's peers, expiring with its `alive` key.
pub fn roster(host: &str) -> String {
    format!("{PREFIX}roster:{host}")
}

/// `iapeer:v1:inbox:<to>:from:<from>`: the stream of messages from host `from`'s peers to
/// host `to`'s (written by `from` only, read by `to`).
pub fn inbox(to: &str, from: &str) -> String {
    format!("{PREFIX}inbox:{to}:from:{from}")
}

/// `iapeer:v1:reply:<to>:from:<from>`: the stream of the outcomes of host `to`'s sends to
/// host `from` (written by `from` only, read by `to`).
pub fn reply(to: &str, from: &str) -> String {
    format!("{PREFIX}reply:{to}:from:{from}")
}

/// The sending host of inbox stream `key` addressed to host `to`: the `<from>` of
/// `iapeer:v1:inbox:<to>:from:<from>`; `None` for any other key or a `<from>` that is not a
/// host name (the peer-name rule). Pure.
pub fn inbox_sender(key: &str, to: &str) -> Option<String> {
    sender_in(key, "inbox", to)
}

/// The answering host of reply stream `key` addressed to host `to`, as [`inbox_sender`].
/// Pure.
pub fn reply_sender(key: &str, to: &str) -> Option<String> {
    sender_in(key, "reply", to)
}

fn sender_in(key: &str, kind: &str, to: &str) -> Option<String> {
    let from = key.strip_prefix(&format!("{PREFIX}{kind}:{to}:from:"))?;
    crate::names::is_valid_personality(from).then(|| from.to_string())
}

/// One peer in a host's [`Roster`]: `{"name","runtimes","state","description","intelligence"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RosterPeer {
    /// The peer's name on its host.
    pub name: String,
    /// Its runtimes, the default first.
    pub runtimes: Vec<String>,
    /// `stopped` (its default runtime's stop flag is set: a send is refused) or `available`
    /// (a send is delivered, waking it when it sleeps).
    pub state: String,
    /// Its one-line description.
    pub description: String,
    /// `artificial`, `natural` or `absent`.
    pub intelligence: String,
}

/// A host's peers, as JSON in `roster:<host>`: `{"host","time_ms","peers":[RosterPeer…]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roster {
    /// The host's name.
    pub host: String,
    /// When it was written, ms since the epoch by the writer's clock.
    pub time_ms: u64,
    /// Its peers, sorted by name.
    pub peers: Vec<RosterPeer>,
}

/// The most bytes of attachments one inbox entry carries, all of its files together: 256 KiB.
/// They travel inline (base64 in the entry's `attachments` field), so a stream of
/// [`STREAM_MAXLEN`] entries stays within memory; a send with more is refused on the sending
/// host with this reason, and an entry with more is not taken by the recipient.
pub const INLINE_ATTACHMENTS_MAX: u64 = 256 * 1024;

/// One attachment carried in an [`Entry`]: its file name (a plain name: no `/`, not `.` or
/// `..`, no NUL, at most 255 bytes) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inline {
    /// The file's name as the sender gave it (the last part of its path).
    pub name: String,
    /// Its content.
    pub data: Vec<u8>,
}

/// The stream field's JSON: `[{"name","base64"}…]`.
#[derive(Serialize, Deserialize)]
struct InlineWire {
    name: String,
    base64: String,
}

/// Whether `name` can be a file's name in a folder: not empty, no `/` or NUL, not `.` or
/// `..`, at most 255 bytes. Pure.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.contains(['/', '\0'])
        && name != "."
        && name != ".."
}

/// One message in an inbox stream; each field is a stream field of the entry (strings):
/// `ticket` (the sending host's handle on the send, echoed in its [`Outcome`]), `id` (the message id), `from` (`<runtime>-<personality>@<host>`), `intelligence` (the
/// sender's), `to` (a peer of the inbox's host), `runtime` (optional), `topic` (optional),
/// `body`, `if_busy` (`queue`, `interrupt` or `refuse`), `timeout_ms` (how long the sender
/// still waits for the outcome when it writes the entry), `attachments` (optional: JSON
/// `[{"name","base64"}…]`, at most [`INLINE_ATTACHMENTS_MAX`] bytes decoded in all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The sending host's handle on the send (random hex), echoed in the outcome.
    pub ticket: String,
    /// The message id ([`crate::msgids::valid_id`]).
    pub id: String,
    /// The sender, `<runtime>-<personality>@<host>`.
    pub from: String,
    /// The sender's nature.
    pub intelligence: String,
    /// The recipient's name on the inbox's host.
    pub to: String,
    /// The recipient's runtime, when the sender named one.
    pub runtime: Option<String>,
    /// The thread label.
    pub topic: Option<String>,
    /// The message.
    pub body: String,
    /// What to do when the recipient is mid-turn.
    pub if_busy: String,
    /// How long the sender still waits, ms.
    pub timeout_ms: u64,
    /// The attachments, inline (none: no `attachments` field).
    pub attachments: Vec<Inline>,
}

/// Why an inbox stream's entry is not taken ([`Entry::from_fields`], [`Entry::check_host`]).
/// `Display` gives the sentence the recipient logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// A field the entry must have is missing (its name).
    #[error("the inbox entry has no \"{0}\" field")]
    Missing(&'static str),
    /// `timeout_ms` is not a number.
    #[error("the inbox entry's timeout_ms is not a number")]
    Timeout,
    /// `attachments` is not `[{"name","base64"}…]` of plain file names within
    /// [`INLINE_ATTACHMENTS_MAX`] (what is wrong).
    #[error("the inbox entry's attachments are refused: {0}")]
    Attachments(String),
    /// The entry's `from` is not `<identity>@<host>` of the host whose stream holds it.
    #[error("its sender \"{from}\" is not of host {host}, the host whose stream it is in")]
    OtherHost {
        /// The entry's `from`.
        from: String,
        /// The host the stream's key names.
        host: String,
    },
}

impl Entry {
    /// The entry's sender as it stands when it came from host `host` (the one its stream's
    /// key names): its `from`, which must be `<identity>@<host>`. Pure.
    ///
    /// Errors: [`EntryError::OtherHost`], `from` names no host or another one (a host
    /// passing as another).
    pub fn check_host(&self, host: &str) -> Result<(), EntryError> {
        match self.from.rsplit_once('@') {
            Some((identity, h)) if h == host && !identity.is_empty() => Ok(()),
            _ => Err(EntryError::OtherHost {
                from: self.from.clone(),
                host: host.to_string(),
            }),
        }
    }

    /// The stream fields, in order.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let mut f = vec![
            ("ticket", self.ticket.clone()),
            ("id", self.id.clone()),
            ("from", self.from.clone()),
            ("intelligence", self.intelligence.clone()),
            ("to", self.to.clone()),
            ("body", self.body.clone()),
            ("if_busy", self.if_busy.clone()),
            ("timeout_ms", self.timeout_ms.to_string()),
        ];
        if let Some(rt) = &self.runtime {
            f.push(("runtime", rt.clone()));
        }
        if let Some(t) = &self.topic {
            f.push(("topic", t.clone()));
        }
        if !self.attachments.is_empty() {
            use base64::Engine as _;
            let wire: Vec<InlineWire> = self
                .attachments
                .iter()
                .map(|a| InlineWire {
                    name: a.name.clone(),
                    base64: base64::engine::general_purpose::STANDARD.encode(&a.data),
                })
                .collect();
            f.push((
                "attachments",
                serde_json::to_string(&wire).unwrap_or_default(),
            ));
        }
        f
    }

    /// The entry of a stream entry's fields. Pure.
    ///
    /// Errors: [`EntryError::Missing`], a field missing (named); [`EntryError::Timeout`],
    /// `timeout_ms` is not a number.
    pub fn from_fields(
        map: &std::collections::HashMap<String, String>,
    ) -> Result<Entry, EntryError> {
        let need = |k: &'static str| map.get(k).cloned().ok_or(EntryError::Missing(k));
        Ok(Entry {
            ticket: need("ticket")?,
            id: need("id")?,
            from: need("from")?,
            intelligence: need("intelligence")?,
            to: need("to")?,
            runtime: map.get("runtime").cloned(),
            topic: map.get("topic").cloned(),
            body: need("body")?,
            if_busy: map
                .get("if_busy")
                .cloned()
                .unwrap_or_else(|| "queue".into()),
            timeout_ms: need("timeout_ms")?
                .parse()
                .map_err(|_| EntryError::Timeout)?,
            attachments: match map.get("attachments") {
                Some(json) => inline_of(json)?,
                None => Vec::new(),
            },
        })
    }
}

/// The attachments of an entry's `attachments` field. Pure.
///
/// Errors: [`EntryError::Attachments`]: not the JSON shape, not base64, a name that is not a
/// plain file name, more than [`INLINE_ATTACHMENTS_MAX`] bytes in all.
fn inline_of(json: &str) -> Result<Vec<Inline>, EntryError> {
    use base64::Engine as _;
    let bad = |why: String| EntryError::Attachments(why);
    let wire: Vec<InlineWire> =
        serde_json::from_str(json).map_err(|e| bad(format!("not [{{name, base64}}…]: {e}")))?;
    let mut total: u64 = 0;
    let mut out = Vec::with_capacity(wire.len());
    for w in wire {
        if !is_plain_file_name(&w.name) {
            return Err(bad(format!("{:?} is not a plain file name", w.name)));
        }
        let data = base64::engine::general_purpose::STANDARD
            .decode(w.base64.as_bytes())
            .map_err(|e| bad(format!("{:?} is not base64: {e}", w.name)))?;
        total += data.len() as u64;
        if total > INLINE_ATTACHMENTS_MAX {
            return Err(bad(format!(
                "more than {INLINE_ATTACHMENTS_MAX} bytes in all"
            )));
        }
        out.push(Inline { name: w.name, data });
    }
    Ok(out)
}

/// One outcome in a reply stream: fields `ticket` and `id` (as in the [`Entry`]) and `outcome`, the send's answer as the control protocol gives it
/// (`{"ok":true,"result":…}` or `{"ok":false,"code":…,"error":…}`, JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The entry's ticket.
    pub ticket: String,
    /// The message id.
    pub id: String,
    /// The answer, JSON.
    pub outcome: String,
}

/// `iapeer:v1:hosts`: the hash of every host's last heartbeat.
pub fn hosts() -> String {
    format!("{PREFIX}hosts")
}

/// `iapeer:v1:alive:<host>`: the host's presence, expiring after [`ALIVE_TTL`].
pub fn alive(host: &str) -> String {
    format!("{PREFIX}alive:{host}")
}

/// One host's heartbeat, as JSON in `alive:<host>` and in the `hosts` hash:
/// `{"host","time_ms","version","interval_secs"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The host's name (the peer-name rule).
    pub host: String,
    /// When it was written, in ms since the epoch by the writer's clock.
    pub time_ms: u64,
    /// The writer's iapeer version.
    pub version: String,
    /// The writer's heartbeat interval, in seconds.
    pub interval_secs: u64,
}

impl Heartbeat {
    /// This host's heartbeat now.
    pub fn now(host: &str) -> Heartbeat {
        Heartbeat {
            host: host.to_string(),
            time_ms: crate::clock::now_ms(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            interval_secs: HEARTBEAT_INTERVAL.as_secs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_the_prefix_and_the_host() {
        assert_eq!(hosts(), "iapeer:v1:hosts");
        assert_eq!(alive("b"), "iapeer:v1:alive:b");
        assert_eq!(roster("b"), "iapeer:v1:roster:b");
        assert_eq!(inbox("b", "a"), "iapeer:v1:inbox:b:from:a");
        assert_eq!(reply("a", "b"), "iapeer:v1:reply:a:from:b");
        assert!(ALIVE_TTL >= HEARTBEAT_INTERVAL * 2);
    }

    #[test]
    fn the_sending_host_is_the_one_the_key_names() {
        assert_eq!(inbox_sender(&inbox("b", "a"), "b"), Some("a".into()));
        assert_eq!(reply_sender(&reply("a", "b"), "a"), Some("b".into()));
        // Another host's stream, another kind, or no valid host name: none.
        assert_eq!(inbox_sender(&inbox("c", "a"), "b"), None);
        assert_eq!(inbox_sender(&reply("b", "a"), "b"), None);
        assert_eq!(inbox_sender("iapeer:v1:inbox:b", "b"), None);
        assert_eq!(inbox_sender("iapeer:v1:inbox:b:from:A:x", "b"), None);
        assert_eq!(inbox_sender("iapeer:v1:inbox:b:from:", "b"), None);
    }

    #[test]
    fn an_entry_claiming_another_host_than_its_key_is_refused() {
        let mut e = Entry {
            ticket: "t".into(),
            id: "m-1".into(),
            from: "echo-alice@a".into(),
            intelligence: "artificial".into(),
            to: "bob".into(),
            runtime: None,
            topic: None,
            body: "hi".into(),
            if_busy: "queue".into(),
            timeout_ms: 1,
            attachments: Vec::new(),
        };
        assert_eq!(e.check_host("a"), Ok(()));
        assert_eq!(
            e.check_host("c").unwrap_err().to_string(),
            "its sender \"echo-alice@a\" is not of host c, the host whose stream it is in"
        );
        e.from = "echo-alice".into();
        assert!(e.check_host("a").is_err());
        e.from = "@a".into();
        assert!(e.check_host("a").is_err());
    }

    #[test]
    fn an_entry_reads_back_from_its_fields() {
        let e = Entry {
            ticket: "t1".into(),
            id: "m-1".into(),
            from: "echo-alice@a".into(),
            intelligence: "artificial".into(),
            to: "bob".into(),
            runtime: None,
            topic: Some("t".into()),
            body: "hi".into(),
            if_busy: "queue".into(),
            timeout_ms: 1500,
            attachments: vec![Inline {
                name: "notes.txt".into(),
                data: b"\x00binary\xff".to_vec(),
            }],
        };
        let map = e
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(Entry::from_fields(&map), Ok(e));
        let mut map = map;
        map.remove("body");
        assert_eq!(
            Entry::from_fields(&map).unwrap_err().to_string(),
            "the inbox entry has no \"body\" field"
        );
    }

    #[test]
    fn attachments_must_be_plain_names_within_the_cap() {
        use base64::Engine as _;
        let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
        let field = |name: &str, data: &[u8]| {
            format!(
                r#"[{{"name":{},"base64":"{}"}}]"#,
                serde_json::json!(name),
                b64(data)
            )
        };
        assert_eq!(inline_of(&field("a.txt", b"hi")).unwrap()[0].data, b"hi");
        for (json, says) in [
            (field("../x", b"hi"), "plain file name"),
            (field("..", b"hi"), "plain file name"),
            (field("", b"hi"), "plain file name"),
            (
                field("big", &vec![0u8; INLINE_ATTACHMENTS_MAX as usize + 1]),
                "262144 bytes",
            ),
            (r#"[{"name":"a","base64":"***"}]"#.to_string(), "not base64"),
            ("{}".to_string(), "not [{name, base64}…]"),
        ] {
            let e = inline_of(&json).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn an_entry_expires_past_its_retention_by_its_stream_id() {
        let keep = Duration::from_secs(3);
        assert!(!expired("1000-0", 4000, keep));
        assert!(expired("1000-0", 4001, keep));
        assert!(expired("1000-7", 1_000_000, RETENTION.min(keep)));
        // A clock behind the id's: not expired. An id of another form: read.
        assert!(!expired("5000-0", 1000, keep));
        assert!(!expired("x", u64::MAX, keep));
        assert_eq!(retention_text(RETENTION), "24 h");
        assert_eq!(retention_text(Duration::from_secs(90 * 60)), "90 min");
        assert_eq!(retention_text(Duration::from_millis(2500)), "2.5 s");
    }

    #[test]
    fn a_heartbeat_reads_back_as_written() {
        let hb = Heartbeat::now("a");
        let text = serde_json::to_string(&hb).unwrap();
        assert_eq!(serde_json::from_str::<Heartbeat>(&text).unwrap(), hb);
        assert!(text.contains("\"interval_secs\":5"));
    }
}

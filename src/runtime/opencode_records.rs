//! OpenCode's own records of a session, read over the local server its TUI runs with
//! `--port <n>` (recorded for 1.18.33: `tests/fixtures/opencode-1.18.33/README.md`,
//! "Records"). OpenCode keeps its sessions in SQLite (`~/.local/share/opencode/opencode.db`);
//! its server serves the same records as JSON, so iapeer reads them there instead of linking
//! a SQLite reader:
//!
//! - `GET /session`: every session of the instance, `[{"id": "ses_…", "directory",
//!   "time": {"created", "updated"}, …}]` (epoch ms).
//! - `GET /session/<id>/message`: its messages, oldest first, each `{"info": {"id": "msg_…",
//!   "role": "user" | "assistant", "sessionID", "parentID" (an assistant's user message),
//!   "finish" ("stop", "tool-calls", …), "time": {"created", "completed"}}, "parts": [{"type":
//!   "text", "text"}, …]}`. With `?limit=<n>` only the newest `n`, still oldest first, and a
//!   `Link: <…&before=<cursor>>; rel="next"` to the older ones
//!   (`server-session-messages-limit-2.json` beside `server-session-messages-all-4.json`).
//!   iapeer reads a page of the newest [`PAGE`]: the whole conversation was megabytes by the
//!   400th delivery of the bench's 1 B–16 KB bodies, read before every paste and at every
//!   look, and its reads outlasted the delivery's grace under load (issue 27 item 5).
//!
//! The server is closed to other local users: the adapter starts it with a random
//! `OPENCODE_SERVER_PASSWORD` (HTTP basic auth, user `opencode`; without it the server
//! answers 401, recorded here), which only the daemon and the child's environment hold.
//!
//! Decisions on the records are pure functions; [`Server::get`] is the only I/O.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::adapter::{CompactOutcome, CompactRefused, CompactWatch, Confirm, GateState, GateWatch};

/// How long one request to OpenCode's server may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The least time between two reads of the records by one confirmer or gate.
const READ_GAP: Duration = Duration::from_millis(150);

/// How many of a conversation's newest messages a read asks for: a delivery's message is
/// among them from the moment OpenCode writes it until more than this many came after it
/// (then [`RecordsConfirm`] reads the whole conversation once to see its turn's end).
pub const PAGE: usize = 20;

/// How far before a delivery started a record it made may say it was created (epoch ms): the
/// same host's clock, read by two processes.
const CLOCK_SLACK_MS: u64 = 2_000;

/// The address and password of one session's OpenCode server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Its loopback port (`--port`).
    pub port: u16,
    /// Its `OPENCODE_SERVER_PASSWORD`.
    pub password: String,
}

/// The server of the session launched last by an adapter and the copies it made for its
/// conversation (`Adapter::for_conversation`): set by the launch, read by the confirmers.
pub type SharedServer = Arc<Mutex<Option<Server>>>;

impl Server {
    /// A server for a new launch: a free loopback port (bound, then let go for OpenCode to
    /// take) and a random password (32 hex digits). `None` when no port is free or the OS has
    /// no randomness.
    pub fn choose() -> Option<Server> {
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).ok()?;
        let password = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Some(Server { port, password })
    }

    /// `GET <path>` as JSON; `None` when the server does not answer 200 with JSON in time.
    pub fn get(&self, path: &str) -> Option<Value> {
        let mut resp = self
            .agent()
            .get(&self.url(path))
            .header("Authorization", &self.basic_auth())
            .call()
            .ok()?;
        if resp.status().as_u16() != 200 {
            return None;
        }
        let body = resp.body_mut().read_to_string().ok()?;
        serde_json::from_str(&body).ok()
    }

    /// `POST <path>` with no body; whether the server answered 200.
    pub fn post(&self, path: &str) -> bool {
        self.agent()
            .post(&self.url(path))
            .header("Authorization", &self.basic_auth())
            .send_empty()
            .is_ok_and(|r| r.status().as_u16() == 200)
    }

    /// `POST <path>` with the JSON `body`; whether the server answered 200.
    pub fn post_json(&self, path: &str, body: &Value) -> bool {
        self.agent()
            .post(&self.url(path))
            .header("Authorization", &self.basic_auth())
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .is_ok_and(|r| r.status().as_u16() == 200)
    }

    fn agent(&self) -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `Basic <base64 of opencode:<password>>`.
    fn basic_auth(&self) -> String {
        use base64::Engine;
        let pair = format!("opencode:{}", self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }

    /// The messages of the sessions a reader follows: `conversation`'s, else those of every
    /// session of `cwd` updated since `since_ms`, newest first; of each, the newest `limit`
    /// (all with `None`). Each item: (session id, its messages, oldest first).
    fn messages(
        &self,
        cwd: &Path,
        conversation: Option<&str>,
        since_ms: u64,
        limit: Option<usize>,
    ) -> Vec<(String, Value)> {
        let ids = match conversation {
            Some(id) => vec![id.to_string()],
            None => match self.get("/session") {
                Some(list) => sessions_of(&list, cwd, since_ms),
                None => return Vec::new(),
            },
        };
        ids.into_iter()
            .filter_map(|id| {
                let messages = self.get(&messages_path(&id, limit))?;
                Some((id, messages))
            })
            .collect()
    }
}

/// The path of session `id`'s messages on OpenCode's server: the newest `limit` of them,
/// or all with `None` (pure).
pub fn messages_path(id: &str, limit: Option<usize>) -> String {
    match limit {
        Some(n) => format!("/session/{id}/message?limit={n}"),
        None => format!("/session/{id}/message"),
    }
}

/// Whether `messages` holds the message `id` (pure).
pub fn holds_message(messages: &Value, id: &str) -> bool {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["info"]["id"] == id)
}

/// The ids of the sessions in `list` (`GET /session`) whose folder is `cwd` and which were
/// updated at or after `since_ms`, newest first (pure).
pub fn sessions_of(list: &Value, cwd: &Path, since_ms: u64) -> Vec<String> {
    let mut found: Vec<(u64, String)> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["directory"].as_str().is_some_and(|d| same_folder(d, cwd)))
        .filter_map(|s| {
            let updated = s["time"]["updated"].as_u64().unwrap_or(0);
            let id = s["id"].as_str()?;
            (updated >= since_ms).then(|| (updated, id.to_string()))
        })
        .collect();
    found.sort_by_key(|s| std::cmp::Reverse(s.0));
    found.into_iter().map(|(_, id)| id).collect()
}

fn same_folder(recorded: &str, cwd: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(Path::new(recorded)) == canon(cwd)
}

/// A message's text: its `text` parts joined by `\n` (pure).
pub fn message_text(message: &Value) -> String {
    message["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The ids of the user messages in `messages` (pure).
pub fn user_message_ids(messages: &Value) -> HashSet<String> {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["info"]["role"] == "user")
        .filter_map(|m| m["info"]["id"].as_str().map(String::from))
        .collect()
}

/// The id of the user message in `messages` that holds `text` (in OpenCode's form: trimmed,
/// [`super::opencode::pasted_form`]), is not one of `known` and was created at or after
/// `since_ms` (pure). The message is written when OpenCode takes it, queued behind a running
/// turn or not (`server-session-messages.json`: `MID-TURN message` was recorded while the
/// held turn ran), and it reaches the model in its turn.
pub fn user_message_with(
    messages: &Value,
    text: &str,
    known: &HashSet<String>,
    since_ms: u64,
) -> Option<String> {
    let want = super::opencode::pasted_form(text);
    messages
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["info"]["role"] == "user")
        .filter(|m| m["info"]["time"]["created"].as_u64().unwrap_or(0) >= since_ms)
        .filter(|m| super::opencode::pasted_form(&message_text(m)).contains(want.as_str()))
        .filter_map(|m| m["info"]["id"].as_str())
        .find(|id| !known.contains(*id))
        .map(String::from)
}

/// Whether the turn of user message `id`, created at `created_ms` (epoch ms), has ended in
/// `messages` (pure): an assistant message answering it (`parentID`) — or answering a user
/// message created after it — completed with a finish other than `tool-calls` (a tool call's
/// step is followed by another assistant message; `server-session-messages.json`), or
/// completed with an error (an interrupted turn). A message OpenCode took before it began a
/// turn for the one ahead gets no answer of its own: the next turn answers both
/// (`server-session-messages-two-before-a-turn.json`, from a bench run at load 20).
pub fn turn_ended(messages: &Value, id: &str, created_ms: u64) -> bool {
    let list = messages.as_array().map(Vec::as_slice).unwrap_or_default();
    let at_or_after = |parent: &Value| {
        parent == id
            || list.iter().any(|u| {
                u["info"]["id"] == *parent
                    && u["info"]["role"] == "user"
                    && u["info"]["time"]["created"].as_u64().unwrap_or(0) >= created_ms
            })
    };
    list.iter().any(|m| {
        let info = &m["info"];
        info["role"] == "assistant"
            && info["time"]["completed"].is_u64()
            && (info["finish"] != "tool-calls" || !info["error"].is_null())
            && at_or_after(&info["parentID"])
    })
}

/// When user message `id` in `messages` was created (epoch ms), 0 when not there (pure).
pub fn created_ms(messages: &Value, id: &str) -> u64 {
    messages
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["info"]["id"] == id)
        .and_then(|m| m["info"]["time"]["created"].as_u64())
        .unwrap_or(0)
}

/// Whether the model started a turn in `messages` at or after `since_ms` (pure): an
/// assistant message created then.
pub fn model_started(messages: &Value, since_ms: u64) -> bool {
    messages.as_array().into_iter().flatten().any(|m| {
        m["info"]["role"] == "assistant"
            && m["info"]["time"]["created"].as_u64().unwrap_or(0) >= since_ms
    })
}

/// Now, epoch ms.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What a confirmer and a gate share: which session's records to read, since when, and how
/// often.
struct Reader {
    server: SharedServer,
    cwd: std::path::PathBuf,
    conversation: Option<String>,
    since_ms: u64,
    next_read: Instant,
}

impl Reader {
    fn new(server: &SharedServer, cwd: &Path, conversation: Option<&str>) -> Reader {
        Reader {
            server: server.clone(),
            cwd: cwd.to_path_buf(),
            conversation: conversation.map(String::from),
            since_ms: now_ms().saturating_sub(CLOCK_SLACK_MS),
            next_read: Instant::now(),
        }
    }

    /// The followed sessions' newest [`PAGE`] messages (all with `whole`), unless the last
    /// read was less than [`READ_GAP`] ago or the server is not known.
    fn read(&mut self, whole: bool) -> Option<Vec<(String, Value)>> {
        let now = Instant::now();
        if now < self.next_read {
            return None;
        }
        self.next_read = now + READ_GAP;
        let server = self
            .server
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        let limit = (!whole).then_some(PAGE);
        let read = server.messages(
            &self.cwd,
            self.conversation.as_deref(),
            self.since_ms,
            limit,
        );
        log::debug!(
            "opencode records: read {} session(s){} in {} ms",
            read.len(),
            if whole { ", whole" } else { "" },
            now.elapsed().as_millis()
        );
        Some(read)
    }
}

/// Confirms one delivery from OpenCode's records: a user message holding the text, new since
/// the delivery started, in the session's own conversation (or, before it is known, in a
/// session of its folder); the conversation id is learned from it.
pub struct RecordsConfirm {
    reader: Reader,
    text: String,
    /// The user messages that were there before the delivery (a resumed conversation may
    /// hold the same text).
    known: HashSet<String>,
    /// The read of [`RecordsConfirm::known`], on a thread of its own while the paste is
    /// written and drawn (it took 100 ms at the median, 2 s at worst, at load 20 — on the
    /// path of every delivery when the session thread read it before the paste).
    reading_known: Option<std::thread::JoinHandle<HashSet<String>>>,
    /// The accepting message: (session id, message id, when it was created, epoch ms).
    accepted: Option<(String, String, u64)>,
    ended: bool,
}

impl RecordsConfirm {
    /// Start confirming `text` in `cwd`'s session (the conversation's when known).
    pub fn start(
        server: &SharedServer,
        cwd: &Path,
        conversation: Option<&str>,
        text: &str,
    ) -> RecordsConfirm {
        let reader = Reader::new(server, cwd, conversation);
        let mut first = Reader::new(server, cwd, conversation);
        first.since_ms = reader.since_ms;
        let reading_known = std::thread::Builder::new()
            .name("opencode-known".into())
            .spawn(move || {
                first
                    .read(false)
                    .unwrap_or_default()
                    .iter()
                    .flat_map(|(_, m)| user_message_ids(m))
                    .collect()
            })
            .ok();
        RecordsConfirm {
            reader,
            text: text.to_string(),
            known: HashSet::new(),
            reading_known,
            accepted: None,
            ended: false,
        }
    }

    /// Take the known messages' read once it is done (`wait`: wait for it).
    fn take_known(&mut self, wait: bool) -> bool {
        match self.reading_known.take() {
            Some(h) if wait || h.is_finished() => {
                self.known = h.join().unwrap_or_default();
                true
            }
            Some(h) => {
                self.reading_known = Some(h);
                false
            }
            None => true,
        }
    }

    fn look(&mut self) {
        self.take_known(true);
        let Some(sessions) = self.reader.read(false) else {
            return;
        };
        for (session, messages) in &sessions {
            match &self.accepted {
                None => {
                    if let Some(id) =
                        user_message_with(messages, &self.text, &self.known, self.reader.since_ms)
                    {
                        let created = created_ms(messages, &id);
                        self.ended = turn_ended(messages, &id, created);
                        self.accepted = Some((session.clone(), id, created));
                        self.reader.conversation = Some(session.clone());
                        return;
                    }
                }
                Some((own, id, created)) if own == session => {
                    self.ended = turn_ended(messages, id, *created)
                        || (!holds_message(messages, id) && {
                            // More than a page came after it: its answer may be older too.
                            self.reader.next_read = Instant::now();
                            self.reader.read(true).is_some_and(|all| {
                                all.iter()
                                    .any(|(s, m)| s == own && turn_ended(m, id, *created))
                            })
                        });
                }
                Some(_) => {}
            }
        }
    }
}

impl Confirm for RecordsConfirm {
    /// Once the known messages are read: OpenCode writes the message at Enter.
    fn ready_for_enter(&mut self) -> bool {
        self.take_known(false)
    }

    fn confirmed(&mut self, _output: &[u8]) -> bool {
        if self.accepted.is_none() {
            self.look();
        }
        self.accepted.is_some()
    }

    fn reads_screen(&self) -> bool {
        false
    }

    fn conversation(&self) -> Option<String> {
        self.accepted.as_ref().map(|(s, _, _)| s.clone())
    }

    fn turn_ended(&mut self) -> bool {
        if !self.ended {
            self.look();
        }
        self.ended
    }
}

/// The ready gate from OpenCode's records: passes when an assistant message appears in the
/// session's conversation (or, before it is known, a session of its folder).
pub struct RecordsGate {
    reader: Reader,
}

impl RecordsGate {
    /// Start watching `cwd`'s session (the conversation's when known).
    pub fn start(server: &SharedServer, cwd: &Path, conversation: Option<&str>) -> RecordsGate {
        RecordsGate {
            reader: Reader::new(server, cwd, conversation),
        }
    }
}

impl GateWatch for RecordsGate {
    fn poll(&mut self, _screen: &str) -> GateState {
        let since = self.reader.since_ms;
        match self.reader.read(false) {
            Some(sessions) if sessions.iter().any(|(_, m)| model_started(m, since)) => {
                GateState::Passed
            }
            _ => GateState::Pending,
        }
    }
}

/// Whether `messages` hold a finished compaction created at or after `since_ms` (pure): the
/// assistant message OpenCode 1.18.33's `/compact` writes, `summary: true` (its `mode` and
/// `agent` `compaction`) with a `finish`, after a user message whose only part is of type
/// `compaction` (`compact-messages.json`).
pub fn compacted_since(messages: &Value, since_ms: u64) -> bool {
    messages.as_array().into_iter().flatten().any(|m| {
        let info = &m["info"];
        info["role"] == "assistant"
            && info["summary"] == true
            && info["finish"].is_string()
            && info["time"]["created"].as_u64().unwrap_or(0) >= since_ms
    })
}

/// Watches one `/compact` through OpenCode's records: done when the session's conversation
/// (or, before it is known, a session of its folder) holds a finished compaction made since
/// it started ([`compacted_since`]).
pub struct RecordsCompact {
    reader: Reader,
}

impl RecordsCompact {
    /// Start watching `cwd`'s session (the conversation's when known).
    pub fn start(server: &SharedServer, cwd: &Path, conversation: Option<&str>) -> RecordsCompact {
        RecordsCompact {
            reader: Reader::new(server, cwd, conversation),
        }
    }
}

impl CompactWatch for RecordsCompact {
    fn poll(&mut self, _screen: &str) -> Option<Result<CompactOutcome, CompactRefused>> {
        let since = self.reader.since_ms;
        self.reader
            .read(false)?
            .iter()
            .any(|(_, m)| compacted_since(m, since))
            .then_some(Ok(CompactOutcome::Compacted))
    }
}

/// Stop the running turn of `conversation` (else of `cwd`'s newest session) through the
/// server's `POST /session/<id>/abort`; whether the server took it.
pub fn abort(server: &SharedServer, cwd: &Path, conversation: Option<&str>) -> bool {
    let Some(server) = server.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
        return false;
    };
    let id = match conversation {
        Some(id) => Some(id.to_string()),
        None => server
            .get("/session")
            .and_then(|list| sessions_of(&list, cwd, 0).into_iter().next()),
    };
    id.is_some_and(|id| server.post(&format!("/session/{id}/abort")))
}

/// The id of the permission request in `pending` (`GET /permission`: `[{"id": "per_…",
/// "sessionID", "permission": "bash", "patterns": ["touch a"], "metadata": {"command"}, …}]`,
/// recorded in `permission-pending.json`; an `edit`'s and an `external_directory`'s metadata
/// carry `filepath` (and `parentDir`) instead, `permission-pending-{edit,external}.json`)
/// that a prompt showing `(tool, summary)` ([`super::opencode::permission_prompt_in`])
/// stands for (pure): of `conversation`'s requests (every one's when it is unknown), the one
/// whose command or a pattern is `summary`, or whose file (an `edit`'s) or folder (an
/// `external_directory`'s) is the path `summary` starts with (as shown: in full, or its end
/// relative to the project), else the only one when it is of the prompt's kind
/// ([`super::opencode::PROMPT_PERMISSIONS`]; any, for a title not recorded). `None` when
/// none, or several and none matches. The kind matters: after `Allow once` on a folder's
/// prompt the screen went on showing it while the server already held the file's `edit`
/// request (`55-permission-external-write`), which an answer to the stale prompt must not
/// take.
pub fn pending_request(
    pending: &Value,
    conversation: Option<&str>,
    (tool, summary): (&str, &str),
) -> Option<String> {
    let mine: Vec<&Value> = pending
        .as_array()?
        .iter()
        .filter(|p| conversation.is_none_or(|c| p["sessionID"] == c))
        .collect();
    // The path an `Edit` summary starts with (`notes.txt (- colour = red)`).
    let path = [" (- ", " (+ "]
        .iter()
        .filter_map(|c| summary.find(c))
        .min()
        .map_or(summary, |at| &summary[..at]);
    let names_path = |v: &Value| {
        v.as_str()
            .is_some_and(|v| v == path || v.ends_with(&format!("/{path}")))
    };
    let shows = |p: &&&Value| {
        p["metadata"]["command"] == summary
            || p["patterns"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|x| x == summary))
            || names_path(match p["permission"].as_str() {
                // Its prompt shows the folder; its metadata also names the file.
                Some("external_directory") => &p["metadata"]["parentDir"],
                Some("edit") => &p["metadata"]["filepath"],
                _ => &Value::Null,
            })
    };
    let kind = super::opencode::PROMPT_PERMISSIONS
        .iter()
        .find(|(t, _)| *t == tool)
        .map(|(_, permission)| *permission);
    let found = match mine.iter().find(shows) {
        Some(p) => p,
        None if mine.len() == 1 && kind.is_none_or(|k| mine[0]["permission"] == k) => &mine[0],
        None => return None,
    };
    found["id"].as_str().map(str::to_string)
}

/// Answer the pending permission request a prompt showing `(tool, summary)` stands for
/// ([`pending_request`]) with `reply` (`once`, `always` or `reject`) through the server's
/// `POST /permission/<id>/reply` (`{"reply": …}`, answered `true`: `permission-reply.json`);
/// whether the server took it (not when its `GET /permission` fails, as it did with a
/// `webfetch` pending: `permission-pending-webfetch.json`).
pub fn reply_permission(
    server: &SharedServer,
    conversation: Option<&str>,
    shown: (&str, &str),
    reply: &str,
) -> bool {
    let Some(server) = server.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
        return false;
    };
    let Some(id) = server
        .get("/permission")
        .and_then(|list| pending_request(&list, conversation, shown))
    else {
        return false;
    };
    server.post_json(
        &format!("/permission/{id}/reply"),
        &serde_json::json!({ "reply": reply }),
    )
}

/// The newest update of `conversation` (or of `cwd`'s newest session) on the server, epoch
/// ms: the runtime's activity time.
pub fn activity_ms(server: &SharedServer, cwd: &Path, conversation: Option<&str>) -> Option<u64> {
    let server = server.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
    let list = server.get("/session")?;
    list.as_array()?
        .iter()
        .filter(|s| match conversation {
            Some(id) => s["id"] == id,
            None => s["directory"].as_str().is_some_and(|d| same_folder(d, cwd)),
        })
        .filter_map(|s| s["time"]["updated"].as_u64())
        .max()
}

/// The API error of `conversation`'s newest turn (else of `cwd`'s newest session), read from
/// the server: its messages and its status (`GET /session/status`, a map of the sessions
/// that are not idle). `None` when it was answered or the server does not answer.
pub fn api_error(
    server: &SharedServer,
    cwd: &Path,
    conversation: Option<&str>,
) -> Option<crate::adapter::ApiError> {
    let server = server.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
    let id = match conversation {
        Some(id) => id.to_string(),
        None => sessions_of(&server.get("/session")?, cwd, 0)
            .into_iter()
            .next()?,
    };
    let messages = server.get(&format!("/session/{id}/message"))?;
    let status = server.get("/session/status");
    super::api_error::latest_opencode_outcome(&messages, status.as_ref().map(|s| &s[&id]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(name: &str) -> Value {
        let path = format!(
            "{}/tests/fixtures/opencode-1.18.33/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    /// The compaction `/compact` made (`compact-messages.json`): found when made after the
    /// watch started, not in the messages before it, nor when it is older.
    #[test]
    fn a_finished_compaction_is_read_from_the_records() {
        let all = recorded("compact-messages.json");
        let summary = all
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["info"]["summary"] == true)
            .unwrap();
        let made = summary["info"]["time"]["created"].as_u64().unwrap();
        assert!(compacted_since(&all, made));
        assert!(!compacted_since(&all, made + 1), "an older compaction");
        let before: Vec<Value> = all
            .as_array()
            .unwrap()
            .iter()
            .take_while(|m| m["info"]["summary"] != true)
            .cloned()
            .collect();
        assert!(!compacted_since(&Value::Array(before), 0));
        let mut unfinished = all.clone();
        for m in unfinished.as_array_mut().unwrap() {
            if m["info"]["summary"] == true {
                m["info"].as_object_mut().unwrap().remove("finish");
            }
        }
        assert!(!compacted_since(&unfinished, 0), "still running");
    }

    /// File requests pending together (`permission-pending-{edit,write,external,
    /// external-write}.json`, one session): each prompt's tool and summary as read from its
    /// screen (the path as shown, relative in the project, in full outside) picks its own.
    #[test]
    fn the_pending_file_request_of_a_prompt() {
        let all: Vec<Value> = ["edit", "write", "external", "external-write"]
            .iter()
            .map(|c| recorded(&format!("permission-pending-{c}.json"))[0].clone())
            .collect();
        let id = |i: usize| all[i]["id"].as_str().map(str::to_string);
        let ses = all[0]["sessionID"].as_str();
        let pending = Value::Array(all.clone());
        let folder = "Access external directory";
        for (shown, want) in [
            (("Edit", "notes.txt (- colour = red)"), 0),
            (("Edit", "new-file.txt (+ a new file)"), 1),
            ((folder, "/tmp/rec/outside"), 2),
            (
                ("Edit", "/tmp/rec/outside/out.txt (+ outside the project)"),
                3,
            ),
        ] {
            assert_eq!(pending_request(&pending, ses, shown), id(want), "{shown:?}");
        }
        assert_eq!(
            pending_request(&pending, ses, ("Edit", "other.txt (+ x)")),
            None
        );
        // The folder's prompt still on the screen, the server holding only the file's
        // request: not taken; the only one of the prompt's kind is, and of a title not
        // recorded.
        let file_only = Value::Array(vec![all[3].clone()]);
        assert_eq!(
            pending_request(&file_only, ses, (folder, "/tmp/rec/outside")),
            None
        );
        assert_eq!(
            pending_request(&file_only, ses, ("Edit", "/tmp/rec/outsi")),
            id(3)
        );
        assert_eq!(
            pending_request(&file_only, ses, ("Call tool x", "Tool: x")),
            id(3)
        );
    }

    /// The recorded `GET /session`: the one session of `/tmp/rec/proj`.
    /// The pending request a prompt stands for, from the recorded `GET /permission`: by its
    /// command, else the conversation's only one; another conversation's is never taken.
    #[test]
    fn the_pending_request_of_a_prompt() {
        let pending = recorded("permission-pending.json");
        let id = "per_2519fb9c70010TFpSIfEPwbQc7";
        let ses = "ses_dae60931effecFHD1asluBxaCF";
        assert_eq!(
            pending_request(&pending, Some(ses), ("Shell command", "touch allowed-file"))
                .as_deref(),
            Some(id)
        );
        assert_eq!(
            pending_request(&pending, None, ("Shell command", "touch allowed-file")).as_deref(),
            Some(id)
        );
        // The only one, though the screen's summary was cut.
        assert_eq!(
            pending_request(&pending, Some(ses), ("Shell command", "touch allo")).as_deref(),
            Some(id)
        );
        assert_eq!(
            pending_request(
                &pending,
                Some("ses_other"),
                ("Shell command", "touch allowed-file")
            ),
            None
        );
        // Two pending and none shows the summary: no guess.
        let mut two = pending.clone();
        let mut other = pending[0].clone();
        other["id"] = "per_2".into();
        other["metadata"]["command"] = "rm b".into();
        other["patterns"] = serde_json::json!(["rm b"]);
        two.as_array_mut().unwrap().push(other);
        assert_eq!(
            pending_request(&two, Some(ses), ("Shell command", "touch x")),
            None
        );
        assert_eq!(
            pending_request(&two, Some(ses), ("Shell command", "rm b")).as_deref(),
            Some("per_2")
        );
        assert_eq!(
            pending_request(&serde_json::json!([]), None, ("Shell command", "x")),
            None
        );
    }

    #[test]
    fn sessions_of_a_folder_newest_first() {
        let list = recorded("server-session-list.json");
        let ses = "ses_db18a5ee6ffeRyD67j6PZOFRbl";
        assert_eq!(sessions_of(&list, Path::new("/tmp/rec/proj"), 0), [ses]);
        assert!(sessions_of(&list, Path::new("/tmp/rec/other"), 0).is_empty());
        assert!(sessions_of(&list, Path::new("/tmp/rec/proj"), u64::MAX).is_empty());
    }

    /// The recorded messages: a 4-line paste is stored trimmed with a space after it, and
    /// is found by the text as pasted; a message known before is not taken again; each
    /// turn's end is read from its answer (the tool-call step does not end it).
    #[test]
    fn user_messages_and_turn_ends_from_the_recorded_records() {
        let m = recorded("server-session-messages.json");
        let none = HashSet::new();
        let paste = "HOLD line 1\nHOLD line 2\nHOLD line 3\nHOLD line 4\n";
        let held = user_message_with(&m, paste, &none, 0).expect("the paste");
        assert_eq!(held, "msg_24e75af8c001Qt5o4Z5POgF4ru");
        assert!(turn_ended(&m, &held, created_ms(&m, &held)));
        let known: HashSet<String> = [held.clone()].into();
        assert_eq!(user_message_with(&m, paste, &known, 0), None);
        assert_eq!(
            user_message_with(&m, "MID-TURN message", &none, 1796612670895),
            None,
            "created before the delivery"
        );
        let call = user_message_with(&m, "CALL-PEER now", &none, 0).unwrap();
        assert!(turn_ended(&m, &call, created_ms(&m, &call)));
        let mut cut = m.clone();
        cut.as_array_mut().unwrap().pop();
        assert!(
            !turn_ended(&cut, &call, created_ms(&m, &call)),
            "only the tool-call step so far"
        );
        assert_eq!(user_message_ids(&m).len(), 3);
        assert!(model_started(&m, 1796612693742));
        assert!(!model_started(&m, 1796612693743));
    }

    /// Recorded in a bench run (OpenCode 1.18.33 at load 20): a message OpenCode took before
    /// it began the turn of the one ahead got no answer of its own — the next message's
    /// turn answered both. Its turn has ended with that one's; an earlier message's answer
    /// says nothing of a later one.
    #[test]
    fn a_message_answered_by_the_next_turn_has_its_turn_ended() {
        let m = recorded("server-session-messages-two-before-a-turn.json");
        let (first, unanswered, next, last) = (
            "msg_2503a5306001bu7r07ETS2Pzz6",
            "msg_2503a611a0013g6yFRkELYdlxR",
            "msg_2503a699d001LjLipvnGUlYROw",
            "msg_2503a76fd0016RcFuy2az3gWdr",
        );
        assert!(!m
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["info"]["parentID"] == unanswered));
        for id in [first, unanswered, next] {
            assert!(turn_ended(&m, id, created_ms(&m, id)), "{id}");
        }
        assert!(
            !turn_ended(&m, last, created_ms(&m, last)),
            "not answered yet"
        );
        // The first turn's answer is older than the unanswered message: not its end.
        let mut cut = m.clone();
        cut.as_array_mut().unwrap().truncate(4);
        assert!(!turn_ended(&cut, unanswered, created_ms(&m, unanswered)));
    }

    /// The recorded page: `?limit=2` is the newest two messages of the whole list, oldest
    /// first, and the newest turn and its end are read from it as from the whole.
    #[test]
    fn a_page_is_the_tail_of_the_whole_conversation() {
        let all = recorded("server-session-messages-all-4.json");
        let page = recorded("server-session-messages-limit-2.json");
        let all = all.as_array().unwrap();
        assert_eq!(all.len(), 8);
        assert_eq!(page.as_array().unwrap()[..], all[6..]);
        let none = HashSet::new();
        let id = user_message_with(&page, "PAGE turn 4", &none, 0).expect("turn 4");
        assert!(holds_message(&page, &id) && turn_ended(&page, &id, created_ms(&page, &id)));
        assert_eq!(user_message_with(&page, "PAGE turn 3", &none, 0), None);
        assert!(!holds_message(&page, "msg_2502522500019JctPMJ7LKHUd9"));
        assert_eq!(
            messages_path("ses_1", Some(PAGE)),
            "/session/ses_1/message?limit=20"
        );
        assert_eq!(messages_path("ses_1", None), "/session/ses_1/message");
    }

    /// A server on loopback that answers every GET with the recorded whole conversation
    /// (the last turn only from the second request on: it arrives with the delivery) and
    /// keeps the paths it was asked for. A replay of `server-session-messages-all-4.json`;
    /// the real OpenCode's pages are recorded beside it.
    fn replaying() -> (SharedServer, Arc<Mutex<Vec<String>>>) {
        replaying_after(Duration::ZERO)
    }

    /// [`replaying`], its first answer `first_delay` late.
    fn replaying_after(first_delay: Duration) -> (SharedServer, Arc<Mutex<Vec<String>>>) {
        let http = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let port = http.server_addr().to_ip().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let all = recorded("server-session-messages-all-4.json");
        let before = Value::Array(all.as_array().unwrap()[..6].to_vec());
        std::thread::spawn(move || {
            for (n, req) in http.incoming_requests().enumerate() {
                log.lock().unwrap().push(req.url().to_string());
                let body = if n == 0 {
                    std::thread::sleep(first_delay);
                    &before
                } else {
                    &all
                };
                let _ = req.respond(tiny_http::Response::from_string(body.to_string()));
            }
        });
        let server = Server {
            port,
            password: "p".into(),
        };
        (Arc::new(Mutex::new(Some(server))), asked)
    }

    /// Issue 27 item 5: a delivery is confirmed, and its turn's end seen, from pages of the
    /// newest messages — the confirmer never asks for the whole conversation while its
    /// message is in the page (the 500-delivery bench went `state unknown` at delivery 398
    /// with whole reads).
    #[test]
    fn a_delivery_is_confirmed_from_a_page_of_the_newest_messages() {
        let (server, asked) = replaying();
        let ses = "ses_dafdb21bfffeilR2qiqo4TQ4Ws";
        let mut c = RecordsConfirm::start(&server, Path::new("/tmp"), Some(ses), "PAGE turn 4");
        c.reader.since_ms = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !c.ready_for_enter() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        while !c.confirmed(b"") && Instant::now() < deadline {
            std::thread::sleep(READ_GAP);
        }
        assert_eq!(c.conversation().as_deref(), Some(ses));
        std::thread::sleep(READ_GAP);
        assert!(c.turn_ended());
        let asked = asked.lock().unwrap().clone();
        assert!(asked.len() >= 2, "{asked:?}");
        let page = format!("/session/{ses}/message?limit={PAGE}");
        assert!(asked.iter().all(|p| *p == page), "{asked:?}");
    }

    /// Issue 27 item 5: the messages there before a delivery are read off the session
    /// thread — starting a confirmer does not wait for OpenCode's server — and Enter waits
    /// for that read (a message the runtime already holds is never taken for the delivery).
    #[test]
    fn the_known_messages_are_read_while_the_paste_is_drawn() {
        let slow = Duration::from_millis(600);
        let (server, _) = replaying_after(slow);
        let ses = "ses_dafdb21bfffeilR2qiqo4TQ4Ws";
        let t0 = Instant::now();
        let mut c = RecordsConfirm::start(&server, Path::new("/tmp"), Some(ses), "PAGE turn 3");
        c.reader.since_ms = 0;
        assert!(t0.elapsed() < slow / 2, "{:?}", t0.elapsed());
        assert!(!c.ready_for_enter(), "the read is still going");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !c.ready_for_enter() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(t0.elapsed() >= slow);
        // Turn 3 was there before: never this delivery's.
        std::thread::sleep(READ_GAP);
        assert!(!c.confirmed(b""));
        assert_eq!(c.conversation(), None);
    }
}

//! Reading an agent runtime's JSONL transcripts incrementally: which records were appended
//! since a point in time (delivery confirmation, compaction completion), and the newest
//! modification time (activity, for idle sleep and the ready gate).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

/// Finds the folder to follow once it exists (see [`TranscriptWatch::located`]).
pub type Locate = Box<dyn FnMut() -> Option<PathBuf> + Send>;

/// Follows every `*.jsonl` file directly in one folder (or only the one named by
/// [`TranscriptWatch::only`]) from the sizes they had at [`TranscriptWatch::start`]; files
/// created later are read from their beginning.
pub struct TranscriptWatch {
    /// The folder, once known.
    dir: Option<PathBuf>,
    /// The one file name followed, when not every `*.jsonl`.
    only: Option<std::ffi::OsString>,
    /// The end of the names of the files followed, when not every `*.jsonl`.
    ending: Option<String>,
    /// Asked again (at most every [`LOCATE_EVERY`]) while `dir` is unknown.
    locate: Option<Locate>,
    last_locate: Option<Instant>,
    started: SystemTime,
    offsets: HashMap<PathBuf, u64>,
    partial: HashMap<PathBuf, Vec<u8>>,
}

/// How often a watch whose folder is not known yet looks for it again.
pub const LOCATE_EVERY: Duration = Duration::from_millis(100);

/// `*.jsonl` files directly in `dir` (missing folder: none).
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .collect()
}

impl TranscriptWatch {
    /// Remember the current size of every transcript in `dir`.
    pub fn start(dir: &Path) -> TranscriptWatch {
        let offsets = jsonl_files(dir)
            .into_iter()
            .filter_map(|p| Some((p.clone(), std::fs::metadata(&p).ok()?.len())))
            .collect();
        TranscriptWatch {
            dir: Some(dir.to_path_buf()),
            only: None,
            ending: None,
            locate: None,
            last_locate: None,
            started: SystemTime::now(),
            offsets,
            partial: HashMap::new(),
        }
    }

    /// A watch of the folder `locate` names, as [`TranscriptWatch::start`] when it names one
    /// now; else asked again on later polls. A folder found later is followed from the sizes
    /// its files have then for files last modified before this call, from their beginning for
    /// the others.
    pub fn located(mut locate: Locate) -> TranscriptWatch {
        match locate() {
            Some(dir) => TranscriptWatch::start(&dir),
            None => TranscriptWatch {
                dir: None,
                only: None,
                ending: None,
                locate: Some(locate),
                last_locate: Some(Instant::now()),
                started: SystemTime::now(),
                offsets: HashMap::new(),
                partial: HashMap::new(),
            },
        }
    }

    /// Follow only the file `name` of the folder (a conversation's own transcript, issue
    /// 32), from the size it had when the watch started.
    pub fn only(mut self, name: impl Into<std::ffi::OsString>) -> TranscriptWatch {
        let name = name.into();
        self.offsets
            .retain(|p, _| p.file_name() == Some(name.as_os_str()));
        self.only = Some(name);
        self
    }

    /// Follow only the files whose names end with `ending` (those there now and those made
    /// later, read from their start).
    pub fn only_ending(mut self, ending: impl Into<String>) -> TranscriptWatch {
        let ending = ending.into();
        let ends = |p: &Path| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&ending))
        };
        self.offsets.retain(|p, _| ends(p));
        self.ending = Some(ending);
        self
    }

    /// The files of `dir` this watch follows.
    fn files(&self, dir: &Path) -> Vec<PathBuf> {
        let mut files = jsonl_files(dir);
        if let Some(name) = &self.only {
            files.retain(|p| p.file_name() == Some(name.as_os_str()));
        }
        if let Some(ending) = &self.ending {
            files.retain(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(ending.as_str()))
            });
        }
        files
    }

    /// The followed folder, asking the locator again when it is due.
    fn dir(&mut self) -> Option<PathBuf> {
        if self.dir.is_none() {
            let due = self.last_locate.is_none_or(|t| t.elapsed() >= LOCATE_EVERY);
            if let (true, Some(locate)) = (due, self.locate.as_mut()) {
                self.last_locate = Some(Instant::now());
                if let Some(dir) = locate() {
                    for p in self.files(&dir) {
                        let Ok(m) = std::fs::metadata(&p) else {
                            continue;
                        };
                        if m.modified().is_ok_and(|t| t < self.started) {
                            self.offsets.insert(p, m.len());
                        }
                    }
                    self.dir = Some(dir);
                }
            }
        }
        self.dir.clone()
    }

    /// Records (parsed JSON lines) appended since the last call. Incomplete last lines wait
    /// for their end; lines that are not JSON are skipped.
    pub fn new_records(&mut self) -> Vec<Value> {
        self.new_records_by_file()
            .into_iter()
            .map(|(_, v)| v)
            .collect()
    }

    /// [`TranscriptWatch::new_records`], each with the file it was appended to.
    pub fn new_records_by_file(&mut self) -> Vec<(PathBuf, Value)> {
        let mut out = Vec::new();
        let Some(dir) = self.dir() else {
            return out;
        };
        for path in self.files(&dir) {
            let from = self.offsets.get(&path).copied().unwrap_or(0);
            let Ok(mut f) = File::open(&path) else {
                continue;
            };
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len <= from {
                continue;
            }
            let mut buf = Vec::new();
            if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut buf).is_err() {
                continue;
            }
            self.offsets.insert(path.clone(), from + buf.len() as u64);
            let pending = self.partial.entry(path.clone()).or_default();
            pending.extend_from_slice(&buf);
            while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                    out.push((path.clone(), v));
                }
            }
        }
        out
    }
}

/// Where the turn that took one delivered message stands (issue 32 item 2), read from the
/// runtime's records in the order they were written: `taken` once a record shows the runtime
/// took the message, `ended` once a record ending a turn follows that one. A turn's end
/// before the message was taken (the turn it was queued behind) is not its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnProgress {
    /// A record shows the message taken into a turn.
    pub taken: bool,
    /// A turn's end followed it.
    pub ended: bool,
}

impl TurnProgress {
    /// Read newly appended `records` (pure): `takes` says whether a record shows the message
    /// taken, `ends` whether it ends a turn.
    pub fn read(
        &mut self,
        records: &[Value],
        takes: impl Fn(&Value) -> bool,
        ends: impl Fn(&Value) -> bool,
    ) {
        for r in records {
            if self.ended {
                return;
            }
            if !self.taken {
                self.taken = takes(r);
            } else if ends(r) {
                self.ended = true;
            }
        }
    }
}

/// Where records appended to a runtime's session files come from, each with its file
/// ([`TranscriptWatch`], or a runtime's own watch over several folders).
pub trait RecordSource: Send {
    /// The records appended since the last call, each with its file.
    fn new_records_by_file(&mut self) -> Vec<(PathBuf, Value)>;
}

impl RecordSource for TranscriptWatch {
    fn new_records_by_file(&mut self) -> Vec<(PathBuf, Value)> {
        TranscriptWatch::new_records_by_file(self)
    }
}

/// A runtime's reading of its session files for [`SessionFileConfirm`] (pure functions).
#[derive(Clone, Copy)]
pub struct SessionRules {
    /// Whether a record is the user's turn (one that can hold the message).
    pub is_user: fn(&Value) -> bool,
    /// The runtime's form of pasted text ([`super::pasted_form`]).
    pub form: fn(&str) -> String,
    /// Whether a record ends a turn.
    pub is_turn_end: fn(&Value) -> bool,
    /// Whether the screen shows the message (second argument) in the runtime's own queue,
    /// behind a running turn: answered queued at once.
    pub queued: fn(&str, &str) -> bool,
    /// Whether the screen shows the message in a queue the runtime submits by itself as soon
    /// as its own start-up is done, no turn running (Gemini CLI waiting for its MCP servers):
    /// the record is waited for until the delivery's deadline, then it is answered queued
    /// ([`crate::adapter::Confirm::held_by_runtime`]).
    pub waiting: fn(&str, &str) -> bool,
    /// The conversation id a session file records.
    pub conversation: fn(&Path) -> Option<String>,
}

/// Confirms one delivery from a runtime's session files (Codex's rollouts, Gemini CLI's
/// chats): accepted when a new user record holds the pasted text — the file holding it is
/// the session's own conversation (issue 32), read alone from then on — queued while the
/// screen shows it in the runtime's queue, and its turn followed to its end.
pub struct SessionFileConfirm<W: RecordSource> {
    watch: W,
    text: String,
    rules: SessionRules,
    /// Where the message stands so far (never goes back to `Pending`).
    state: super::Acceptance,
    /// The session file whose record accepted it.
    file: Option<PathBuf>,
    /// That record's own time ([`record_ms`]).
    taken_ms: Option<u64>,
    /// Where the turn that took it stands.
    turn: TurnProgress,
    /// Whether the screen showed it waiting in a queue the runtime submits by itself.
    held: bool,
}

impl<W: RecordSource> SessionFileConfirm<W> {
    /// Start confirming `text` from the records `watch` gives.
    pub fn new(watch: W, text: &str, rules: SessionRules) -> Self {
        SessionFileConfirm {
            watch,
            text: text.to_string(),
            rules,
            state: super::Acceptance::Pending,
            file: None,
            taken_ms: None,
            turn: TurnProgress::default(),
            held: false,
        }
    }

    /// Read what was appended (to the accepting file only, once known).
    fn read(&mut self) {
        let mut records = self.watch.new_records_by_file();
        if let Some(own) = &self.file {
            records.retain(|(f, _)| f == own);
        }
        let (text, rules) = (&self.text, self.rules);
        let takes = |r: &Value| (rules.is_user)(r) && record_contains(r, text, rules.form);
        if self.file.is_none() {
            if let Some((f, r)) = records.iter().find(|(_, r)| takes(r)) {
                self.taken_ms = record_ms(r);
                let own = f.clone();
                records.retain(|(f, _)| *f == own);
                self.file = Some(own);
                self.state = super::Acceptance::Accepted;
            }
        }
        let records: Vec<Value> = records.into_iter().map(|(_, r)| r).collect();
        self.turn.read(&records, takes, rules.is_turn_end);
    }
}

impl<W: RecordSource> super::Confirm for SessionFileConfirm<W> {
    fn confirmed(&mut self, output: &[u8]) -> bool {
        self.acceptance(output, "") == super::Acceptance::Accepted
    }

    fn acceptance(&mut self, _output: &[u8], screen: &str) -> super::Acceptance {
        use super::Acceptance;
        if self.state == Acceptance::Accepted {
            return Acceptance::Accepted;
        }
        self.read();
        if self.state == Acceptance::Pending {
            if (self.rules.queued)(screen, &self.text) {
                self.state = Acceptance::Queued;
            } else if (self.rules.waiting)(screen, &self.text) {
                self.held = true;
            }
        }
        self.state.clone()
    }

    /// The id the accepting session file records: the session's own conversation, matched by
    /// the message iapeer pasted (a person's CLI in the same folder never holds it).
    fn conversation(&self) -> Option<String> {
        (self.rules.conversation)(self.file.as_deref()?)
    }

    fn turn_ended(&mut self) -> bool {
        if !self.turn.ended {
            self.read();
        }
        self.turn.ended
    }

    fn held_by_runtime(&self) -> bool {
        self.held
    }

    fn taken_ms(&self) -> Option<u64> {
        self.taken_ms
    }
}

/// A transcript record's own time, epoch ms: its top-level `timestamp` (RFC 3339, as Claude
/// Code 2.1.332 and Codex 0.171.0 write it on every record: `2026-12-06T15:11:34.736Z`);
/// `None` without one or before 1970 (pure).
pub fn record_ms(r: &Value) -> Option<u64> {
    let t: jiff::Timestamp = r["timestamp"].as_str()?.parse().ok()?;
    u64::try_from(t.as_millisecond()).ok()
}

/// Every string value inside a JSON value, depth first.
pub fn strings(v: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(v, &mut out);
    out
}

/// Whether a record holds the delivered `text` (spec 04 §1 confirmation table): some string
/// value contains it, both compared in the runtime's `form` ([`super::pasted_form`]: what the
/// runtime makes of pasted text — line breaks as LF for both, a TAB as four spaces for Claude
/// Code, …). With attachments, the text before `<attachments>` and the text after
/// `</attachments>` must both be in the same string (a runtime may rewrite the attachment
/// lines).
pub fn record_contains(record: &Value, text: &str, form: fn(&str) -> String) -> bool {
    let text = form(text);
    let parts: Vec<String> = match (text.find("<attachments>"), text.find("</attachments>")) {
        (Some(a), Some(b)) if a < b => vec![
            text[..a].to_string(),
            text[b + "</attachments>".len()..].to_string(),
        ],
        _ => vec![text],
    };
    strings(record).iter().any(|s| {
        let s = form(s);
        parts.iter().all(|p| s.contains(p.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write;

    #[test]
    fn watch_sees_only_new_complete_records() {
        let (dir, a) = crate::testkit::temp_file("a.jsonl", "{\"n\":1}\n");
        let mut w = TranscriptWatch::start(dir.path());
        assert!(w.new_records().is_empty());
        let mut f = std::fs::OpenOptions::new().append(true).open(&a).unwrap();
        f.write_all(b"{\"n\":2}\n{\"n\":").unwrap();
        assert_eq!(w.new_records(), vec![json!({"n":2})]);
        f.write_all(b"3}\n").unwrap();
        std::fs::write(dir.path().join("b.jsonl"), "{\"n\":4}\nnot json\n").unwrap();
        let mut got = w.new_records();
        got.sort_by_key(|v| v["n"].as_i64());
        assert_eq!(got, vec![json!({"n":3}), json!({"n":4})]);
    }

    #[test]
    fn a_watch_of_one_file_ignores_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        std::fs::write(&a, "{\"n\":1}\n").unwrap();
        let mut w = TranscriptWatch::start(dir.path()).only("a.jsonl");
        std::fs::write(&b, "{\"n\":2}\n").unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&a).unwrap();
        f.write_all(b"{\"n\":3}\n").unwrap();
        assert_eq!(w.new_records(), vec![json!({"n":3})]);
    }

    #[test]
    fn a_located_watch_follows_the_folder_once_it_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let found = dir.path().join("found");
        let probe = found.clone();
        let mut w =
            TranscriptWatch::located(Box::new(move || probe.is_dir().then(|| probe.clone())));
        assert!(w.new_records().is_empty());
        // File times come from a coarse clock (a few ms behind `SystemTime::now`).
        std::thread::sleep(Duration::from_millis(50));
        std::fs::create_dir(&found).unwrap();
        std::fs::write(found.join("a.jsonl"), "{\"n\":1}\n").unwrap();
        std::thread::sleep(LOCATE_EVERY);
        assert_eq!(w.new_records(), vec![json!({"n":1})]);
    }

    #[test]
    fn a_turn_ends_only_after_the_message_was_taken() {
        let takes = |r: &Value| r["m"] == "ours";
        let ends = |r: &Value| r["end"] == true;
        let mut t = TurnProgress::default();
        // The end of the turn it was queued behind, then ours taken: not ended.
        t.read(
            &[json!({"end":true}), json!({"m":"ours"}), json!({"m":"x"})],
            takes,
            ends,
        );
        assert_eq!(
            t,
            TurnProgress {
                taken: true,
                ended: false
            }
        );
        t.read(&[json!({"m":"y"}), json!({"end":true})], takes, ends);
        assert!(t.ended);
        let mut both = TurnProgress::default();
        both.read(&[json!({"m":"ours"}), json!({"end":true})], takes, ends);
        assert!(both.ended, "taken and ended in one read");
    }

    #[test]
    fn containment_rules() {
        let record_contains =
            |r: &Value, t: &str| record_contains(r, t, super::super::pasted_form::claude);
        let env = "<iap from=\"a\">\nReply via send_to_peer.\n<msg>hi\r\nthere</msg>\n</iap>";
        let rec = json!({"type":"user","message":{"content":"\n\n<pasted_content id=\"1\">\n<iap from=\"a\">\nReply via send_to_peer.\n<msg>hi\nthere</msg>\n</iap>\n</pasted_content id=\"1\">\n"}});
        assert!(record_contains(&rec, env));
        // A lone CR in a paste is recorded as a line break.
        let lone = "<msg>hi\u{241b}[201~\rTYPED</msg>";
        let rec = json!({"content":"<msg>hi\u{241b}[201~\nTYPED</msg>"});
        assert!(record_contains(&rec, lone));
        assert!(!record_contains(&json!({"x":"<iap from=\"b\">"}), env));
        let with_att =
            "<iap from=\"a\">\n<attachments>/x/a.png</attachments>\n<msg>look</msg>\n</iap>";
        let rewritten = json!({"content":[{"type":"text","text":"<iap from=\"a\">\n[Image #1]\n<msg>look</msg>\n</iap>"}]});
        assert!(record_contains(&rewritten, with_att));
        let split = json!({"content":["<iap from=\"a\">\n", "\n<msg>look</msg>\n</iap>"]});
        assert!(
            !record_contains(&split, with_att),
            "both halves must be in one string"
        );
    }
}

//! Reading an agent runtime's JSONL transcripts incrementally: which records were appended
//! since a point in time (delivery confirmation, compaction completion), and the newest
//! modification time (activity, for idle sleep and the ready gate).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Follows every `*.jsonl` file directly in one folder from the sizes they had at
/// [`TranscriptWatch::start`]; files created later are read from their beginning.
pub struct TranscriptWatch {
    dir: PathBuf,
    offsets: HashMap<PathBuf, u64>,
    partial: HashMap<PathBuf, Vec<u8>>,
}

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
            dir: dir.to_path_buf(),
            offsets,
            partial: HashMap::new(),
        }
    }

    /// Records (parsed JSON lines) appended since the last call. Incomplete last lines wait
    /// for their end; lines that are not JSON are skipped.
    pub fn new_records(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        for path in jsonl_files(&self.dir) {
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
            let pending = self.partial.entry(path).or_default();
            pending.extend_from_slice(&buf);
            while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                    out.push(v);
                }
            }
        }
        out
    }
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
/// value contains it, line breaks compared as LF on both sides (CRLF and a lone CR are one
/// line break each: Claude Code 2.1.332 and Codex 0.171.0 record a pasted lone CR as LF). With attachments, the text before
/// `<attachments>` and the text after `</attachments>` must both be in the same string (a
/// runtime may rewrite the attachment lines).
pub fn record_contains(record: &Value, text: &str) -> bool {
    let text = lf_breaks(text);
    let parts: Vec<String> = match (text.find("<attachments>"), text.find("</attachments>")) {
        (Some(a), Some(b)) if a < b => vec![
            text[..a].to_string(),
            text[b + "</attachments>".len()..].to_string(),
        ],
        _ => vec![text],
    };
    strings(record).iter().any(|s| {
        let s = lf_breaks(s);
        parts.iter().all(|p| s.contains(p.as_str()))
    })
}

/// `text` with every CRLF and every lone CR as LF.
fn lf_breaks(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write;

    #[test]
    fn watch_sees_only_new_complete_records() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.jsonl");
        std::fs::write(&a, "{\"n\":1}\n").unwrap();
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
    fn containment_rules() {
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

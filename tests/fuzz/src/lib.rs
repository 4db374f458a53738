//! The fuzz targets' bodies: each takes the fuzzer's bytes, drives one reader of untrusted
//! input through [`iapeer::untrusted`] and checks invariants beyond "no panic". A broken
//! invariant panics, which AFL++ records as a crash. `src/bin/<target>.rs` wraps each in
//! `afl::fuzz!`; the tests at the bottom replay the seed corpora (`seeds/<target>/`) and the
//! regression inputs (`tests/fixtures/fuzz/<target>/`) without AFL++.

use iapeer::untrusted as u;
use serde_json::Value;
use unicode_width::UnicodeWidthChar;

/// The target names, as used by `scripts/fuzz.sh`, the seed folders and the binaries.
pub const TARGETS: &[&str] = &["envelope", "control", "attach", "mcp", "screen", "files"];

/// Run target `name` on `data` (for replaying inputs outside AFL++).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "envelope" => envelope(data),
        "control" => control(data),
        "attach" => attach(data),
        "mcp" => mcp(data),
        "screen" => screen(data),
        "files" => files(data),
        other => panic!("unknown fuzz target {other}"),
    }
}

/// A split point inside `data` chosen by its first byte (so the fuzzer controls it).
fn split_point(data: &[u8]) -> usize {
    match data.first() {
        Some(&b) if !data.is_empty() => usize::from(b) * data.len() / 256,
        _ => 0,
    }
}

// ---------------------------------------------------------------------------------------------
// Envelopes: decoder, stream extractor, encoder.

/// Whether `env` is an envelope the daemon can write: valid sender names, a daemon-stamped `ts`
/// (RFC 3339), and a topic, body and attachments the router's validation accepts as they are.
fn producible(env: &u::Envelope) -> bool {
    let input = u::SendInput {
        path: "cli",
        caller: u::Caller::Cli(format!("{}-{}", env.runtime, env.from)),
        args: u::SendArgs {
            to: "bob".into(),
            message: env.body.clone(),
            topic: env.topic.clone(),
            attachments: env.attachments.clone(),
            ..Default::default()
        },
    };
    u::is_valid_personality(&env.from)
        && u::is_valid_runtime(&env.runtime)
        && env.ts.as_deref().is_none_or(|t| {
            !t.is_empty()
                && t.bytes()
                    .all(|b| b.is_ascii_digit() || b"-:T+Z.".contains(&b))
        })
        && u::validate_send(&input).is_ok_and(|topic| topic == env.topic)
}

/// Every producible envelope survives the wire form: decode and extract give it back whole.
fn check_wire_round_trip(env: &u::Envelope) {
    let wire = u::encode_wire(env);
    let back = u::decode_envelope(&wire);
    assert_eq!(
        back.as_ref(),
        Ok(env),
        "wire form does not decode back: {wire:?}"
    );
    let (found, used) = u::extract_envelopes(wire.as_bytes());
    assert_eq!(
        found,
        vec![env.clone()],
        "extract misses the wire form: {wire:?}"
    );
    assert_eq!(used, wire.len());
}

/// Build an envelope from fuzzer bytes: fields separated by 0xFF, names mapped onto their
/// alphabets.
fn envelope_from_bytes(data: &[u8]) -> u::Envelope {
    let mut fields = data.split(|&b| b == 0xFF);
    let mut next = || String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
    let name = |s: String, dash: bool| -> String {
        let mut out = String::from("p");
        out.extend(s.bytes().take(31).map(|b| {
            let alphabet: &[u8] = if dash {
                b"abcdefghijklmnopqrstuvwxyz0123456789-"
            } else {
                b"abcdefghijklmnopqrstuvwxyz0123456789"
            };
            char::from(alphabet[usize::from(b) % alphabet.len()])
        }));
        out
    };
    let from = name(next(), true);
    let runtime = name(next(), false);
    let flags = next().bytes().next().unwrap_or(0);
    let topic = next();
    let topic: String = topic.trim().chars().take(200).collect();
    let attachments = next();
    let body: String = next().chars().take(16_000).collect();
    u::Envelope {
        from,
        runtime,
        intelligence: match flags % 4 {
            0 => None,
            1 => Some(u::Intelligence::Artificial),
            2 => Some(u::Intelligence::Natural),
            _ => Some(u::Intelligence::Absent),
        },
        ts: (flags & 4 != 0).then(|| "2026-07-14T01:23:45+03:00".to_string()),
        topic: Some(topic).filter(|t| !t.is_empty()),
        attachments: attachments
            .split(['\n', '\r'])
            .filter(|a| !a.is_empty())
            .map(|a| format!("/{a}"))
            .collect(),
        body: if body.is_empty() { "x".into() } else { body },
    }
}

/// The envelope decoder and stream extractor on arbitrary bytes.
///
/// Invariants: a decoded envelope that the daemon could have written survives encode → decode;
/// the extractor never consumes more than it was given, and a stream split in two parts (kept
/// rest + new bytes, as the callers do) yields the same envelopes as the whole stream; an
/// envelope built from the bytes survives encode → decode and encode → extract.
pub fn envelope(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(env) = u::decode_envelope(&text) {
        assert!(!env.from.is_empty() && !env.runtime.is_empty());
        if producible(&env) {
            check_wire_round_trip(&env);
        }
    }

    let (whole, used) = u::extract_envelopes(data);
    assert!(used <= data.len());
    let cut = split_point(data);
    let (mut parts, used1) = u::extract_envelopes(&data[..cut]);
    assert!(used1 <= cut);
    let mut rest = data[used1..cut].to_vec();
    rest.extend_from_slice(&data[cut..]);
    let (more, used2) = u::extract_envelopes(&rest);
    assert!(used2 <= rest.len());
    parts.extend(more);
    assert_eq!(parts, whole, "a split at {cut} changes what is extracted");
    assert_eq!(
        used1 + used2,
        used,
        "a split at {cut} changes what is consumed"
    );
    for env in &whole {
        assert!(!env.from.is_empty() && !env.runtime.is_empty());
    }

    let built = envelope_from_bytes(data);
    if producible(&built) {
        check_wire_round_trip(&built);
    }
}

// ---------------------------------------------------------------------------------------------
// Control protocol.

/// The control-protocol request parser on one arbitrary line.
///
/// Invariants: a failure is `bad-request` or `unknown-op` with a message; an accepted request
/// serialises to one line that parses back to the same request (the parser accepts nothing the
/// serialiser would not produce, up to JSON spelling).
pub fn control(data: &[u8]) {
    match u::parse_request(data) {
        Ok(req) => {
            let line = serde_json::to_string(&req).expect("a request serialises");
            assert!(
                !line.contains('\n'),
                "a request line holds a newline: {line:?}"
            );
            let back = u::parse_request(line.as_bytes());
            assert_eq!(
                back.as_ref().ok(),
                Some(&req),
                "{line:?} does not parse back"
            );
        }
        Err(failure) => {
            let v = serde_json::to_value(&failure).expect("a failure serialises");
            let code = v["code"].as_str().unwrap_or_default();
            assert!(
                code == "bad-request" || code == "unknown-op",
                "unexpected code {code}"
            );
            assert!(!v["error"].as_str().unwrap_or_default().is_empty());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Attach frames.

/// Decode everything `d` holds: the frames, and the error that stopped it (if any).
fn drain(d: &mut u::Deframer, out: &mut Vec<u::Frame>) -> Option<u::FrameError> {
    loop {
        match d.next() {
            Ok(Some(f)) => out.push(f),
            Ok(None) => return None,
            Err(e) => {
                // Errors are sticky.
                assert_eq!(d.next().err(), Some(e.clone()));
                return Some(e);
            }
        }
    }
}

/// The attach frame decoder on an arbitrary stream, pushed whole and in two reads.
///
/// Invariants: both ways give the same frames and error; no payload exceeds the limit; the
/// decoded frames re-encode to exactly the bytes consumed (the decoder never reads past its
/// buffer and accepts only what the encoder writes); the unconsumed rest is what `pending`
/// says.
pub fn attach(data: &[u8]) {
    let mut whole = u::Deframer::new();
    whole.push(data);
    let mut frames = Vec::new();
    let err = drain(&mut whole, &mut frames);

    let cut = split_point(data);
    let mut split = u::Deframer::new();
    let mut frames2 = Vec::new();
    split.push(&data[..cut]);
    let err1 = drain(&mut split, &mut frames2);
    let err2 = if err1.is_none() {
        split.push(&data[cut..]);
        drain(&mut split, &mut frames2)
    } else {
        err1
    };
    assert_eq!(frames2, frames, "a split at {cut} changes the frames");
    assert_eq!(err2, err, "a split at {cut} changes the error");

    let mut encoded = Vec::new();
    for f in &frames {
        if let u::Frame::Data(bytes) = f {
            assert!(bytes.len() <= u::MAX_PAYLOAD);
        }
        encoded.extend_from_slice(&u::encode_frame(f));
    }
    let consumed = data.len() - whole.pending();
    assert_eq!(
        encoded.as_slice(),
        &data[..consumed],
        "frames do not re-encode to the input"
    );
    if err.is_some() {
        assert!(whole.pending() >= u::HEADER_LEN);
    }
}

// ---------------------------------------------------------------------------------------------
// MCP JSON-RPC.

/// A router stand-in: refuses or accepts by the message's first byte.
struct Backend;

impl u::McpBackend for Backend {
    fn send_to_peer(
        &self,
        _creds: u::CallerCreds,
        args: u::SendArgs,
    ) -> Result<u::SendResult, u::Failure> {
        assert!(!args.to.is_empty() && !args.message.is_empty());
        assert_ne!(args.runtime.as_deref(), Some(""));
        if args.message.len().is_multiple_of(2) {
            return Err(u::Failure::new(
                u::Code::Offline,
                "refused by the stand-in router",
            ));
        }
        Ok(u::SendResult {
            ok: true,
            delivered_to: u::DeliveredTo {
                personality: args.to,
                runtime: args.runtime.unwrap_or_else(|| "echo".into()),
            },
            woke: false,
            ts: None,
            queued: None,
            id: args.id,
            earlier: false,
            interrupted: false,
        })
    }
}

/// Check one JSON-RPC answer object.
fn check_answer(v: &Value) {
    let obj = v.as_object().expect("an answer is an object");
    assert_eq!(obj.get("jsonrpc"), Some(&Value::String("2.0".into())));
    assert!(obj.contains_key("id"), "an answer without an id: {v}");
    assert!(
        obj.contains_key("result") != obj.contains_key("error"),
        "an answer needs exactly one of result and error: {v}"
    );
}

/// The MCP handler on an arbitrary POST body (the first byte picks the `Accept` header and
/// the modern MCP headers: none, a modern `tools/call`, a modern `tools/list`, or a legacy
/// version).
///
/// Invariants: status 200, 202, 400 or 404; 202 has no body; any other body is one JSON
/// answer (or an array of them for a batch), as JSON or as one SSE event, each with
/// `jsonrpc`, `id` and exactly one of `result`/`error`; a single request's answer carries its
/// id.
pub fn mcp(data: &[u8]) {
    let (first, body) = match data.split_first() {
        Some((b, rest)) => (*b, rest),
        None => (0, data),
    };
    let accept = match first % 4 {
        0 => None,
        1 => Some("application/json, text/event-stream"),
        2 => Some("text/event-stream"),
        _ => Some("*/*;q=0.5"),
    };
    let (protocol_version, method, name) = match first / 4 % 4 {
        0 => (None, None, None),
        1 => (Some("2026-07-28"), Some("tools/call"), Some("send_to_peer")),
        2 => (Some("2026-07-28"), Some("tools/list"), None),
        _ => (Some("2025-11-25"), None, None),
    };
    let headers = u::McpHeaders {
        accept,
        protocol_version,
        method,
        name,
    };
    let creds = u::CallerCreds::default();
    let r = u::mcp_handle(body, &headers, creds, &Backend);
    assert!(
        matches!(r.status, 200 | 202 | 400 | 404),
        "status {}",
        r.status
    );
    if r.status == 202 {
        assert!(r.body.is_empty() && r.content_type.is_none());
        return;
    }
    let text = String::from_utf8(r.body).expect("answers are UTF-8");
    let json = match r.content_type {
        Some("application/json") => text.as_str(),
        Some("text/event-stream") => text
            .strip_prefix("event: message\ndata: ")
            .and_then(|t| t.strip_suffix("\n\n"))
            .expect("one SSE event"),
        other => panic!("content type {other:?}"),
    };
    assert!(!json.contains('\n'), "an SSE data line holds a newline");
    let v: Value = serde_json::from_str(json).expect("the answer is JSON");
    match &v {
        Value::Array(items) => {
            assert!(!items.is_empty());
            items.iter().for_each(check_answer);
        }
        single => {
            check_answer(single);
            if let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(body) {
                // A fractional or huge id is compared only loosely: serde_json reads floats to
                // within an ulp, so the echo of `9733446689999999967352238` may read back one ulp
                // off (a finding of this target, left as is: JSON-RPC ids are strings or
                // integers in practice).
                let exact = |n: &serde_json::Number| n.is_i64() || n.is_u64();
                if let Some(id @ Value::String(_)) | Some(id @ Value::Number(_)) =
                    req.get("id").filter(|v| v.as_number().is_none_or(exact))
                {
                    if req.get("method").is_some_and(Value::is_string) {
                        assert_eq!(&single["id"], id, "the answer carries another id");
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Screen and the adapters' detectors.

/// The screen model and every screen detector on arbitrary pty output.
///
/// Bytes 0–3 pick the size (clamped as sessions do), byte 4 a resize point; the rest is fed in
/// chunks split at 0xFE. Invariants: after every chunk the screen keeps its size, its rows fit
/// in it and the cursor stays inside it; at the end the detectors never panic, a composer draft
/// is non-empty and trimmed, and a snapshot repaints the same rows on a fresh screen of the same
/// size. (Detectors run once: each reads the whole screen, and the instrumented screen model is
/// what bounds this target's speed.)
pub fn screen(data: &[u8]) {
    if data.len() < 5 {
        return;
    }
    let (rows, cols) = u::clamp_size(
        u16::from_be_bytes([data[0], data[1]]) % 80,
        u16::from_be_bytes([data[2], data[3]]) % 300,
    );
    let resize_at = usize::from(data[4]);
    let mut s = u::Screen::new(rows, cols);
    let mut size = (rows, cols);
    assert_eq!(s.size(), size);
    for (i, chunk) in data[5..].split(|&b| b == 0xFE).enumerate() {
        if i == resize_at % 8 && i > 0 {
            let r = u::clamp_size(u16::from(chunk.first().copied().unwrap_or(1)), 300);
            s.resize(r.0, r.1);
            size = r;
        }
        let fed = s.feed(chunk, i % 2 == 0);
        assert!(fed.replies.len() <= 64 * (chunk.len() + 1));
        assert_eq!(s.size(), size);
        assert!(size.0 <= u::MAX_ROWS && size.1 <= u::MAX_COLS);
        let texts = s.rows();
        assert_eq!(texts.len(), usize::from(size.0));
        for row in texts {
            // A combining mark (width 0) shares the cell of the character before it.
            let cells = row.chars().filter(|c| c.width() != Some(0)).count();
            assert!(
                cells <= usize::from(size.1),
                "row wider than the screen ({size:?}): {row:?}"
            );
        }
        let (cr, cc) = s.cursor();
        assert!(
            cr < size.0 && cc <= size.1,
            "cursor {cr},{cc} outside {size:?}"
        );
    }
    let claude = u::Claude::with_program("/nonexistent/claude".into());
    let codex = u::Codex::with_program("/nonexistent/codex".into());
    let echo = u::Echo::from_env();
    let adapters: [&dyn u::Adapter; 3] = [&claude, &codex, &echo];
    let text = s.text();
    for a in adapters {
        let _ = a.boot_step(&s);
        let _ = a.is_busy(&s);
        let _ = a.explain_exit(text);
        if let Some(draft) = a.composer_draft(&s) {
            assert!(
                !draft.is_empty() && draft.trim() == draft,
                "draft {draft:?}"
            );
        }
    }
    let _ = u::api_retry_line(text);
    let _ = u::stream_error_line(text);
    let _ = s.tail_text(4096);
    let mut again = u::Screen::new(size.0, size.1);
    again.feed(&s.snapshot(), false);
    assert_eq!(again.rows(), s.rows(), "the snapshot repaints other rows");
}

// ---------------------------------------------------------------------------------------------
// Files: registry, profile, runtime.json.

/// A scratch folder for this process (persistent mode runs many inputs in one process).
fn scratch() -> &'static std::path::Path {
    use std::sync::OnceLock;
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("iapeer-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        dir
    })
}

/// The keys of a profile's text that no iapeer code owns, each with its value's text.
fn unknown_texts(text: &str) -> std::collections::BTreeMap<String, String> {
    let all: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> =
        serde_json::from_str(text).expect("a profile that reads is an object");
    all.into_iter()
        .filter(|(k, _)| !u::PROFILE_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k, v.get().to_string()))
        .collect()
}

/// The registry, profile and runtime manifest readers on an arbitrary file (the first byte
/// picks which), read from a real file as the daemon does.
///
/// Invariants: a registry that loads can be written (the reader accepts nothing the writer
/// refuses) and reads back the same; a profile that reads has its default runtime among its
/// runtimes and a one-line description within the limit, a no-op update keeps it, and the
/// update keeps the text of every key it does not own byte for byte (spec 01 §4); a manifest
/// that loads names its folder's runtime.
pub fn files(data: &[u8]) {
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let root = scratch();
    let paths = u::Paths::at(root.join("root"));
    match which % 3 {
        0 => {
            let file = paths.registry();
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, text).unwrap();
            if let Ok(reg) = u::Registry::load(&paths) {
                let written = reg
                    .to_file_text()
                    .unwrap_or_else(|e| panic!("a loaded registry cannot be written: {e}"));
                std::fs::write(&file, &written).unwrap();
                let back = u::Registry::load(&paths).expect("a written registry loads");
                assert_eq!(
                    back.to_file_text().unwrap(),
                    written,
                    "registry text not stable"
                );
            }
        }
        1 => {
            let cwd = root.join("peer-one");
            let file = iapeer::paths::peer::profile(&cwd);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, text).unwrap();
            if let Ok(Some(p)) = u::Profile::read(&cwd) {
                assert!(p.declares(p.default_runtime()));
                let description = p.description.as_deref().unwrap_or_default();
                assert!(!description.contains('\n'));
                assert!(description.chars().count() <= u::DESCRIPTION_MAX_CHARS);
                let _ = p.to_registry_peer(&cwd);
                let kept = u::Profile::update(&cwd, |_| {}).expect("a readable profile updates");
                let again = u::Profile::read(&cwd).expect("rereads").expect("exists");
                assert_eq!(again, kept, "an update does not read back");
                let written = std::fs::read_to_string(&file).expect("rereads");
                assert_eq!(
                    unknown_texts(&written),
                    unknown_texts(std::str::from_utf8(text).expect("a profile that reads")),
                    "an update changed the text of a key it does not own"
                );
            }
        }
        _ => {
            let file = paths.runtime_manifest("bot");
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, text).unwrap();
            if let Ok(Some(m)) = u::Manifest::load(&paths, "bot") {
                assert_eq!(m.runtime, "bot");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn inputs(folder: PathBuf) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(&folder)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Every seed and every recorded regression input passes its target's invariants.
    #[test]
    fn seeds_and_regressions_pass() {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        for target in TARGETS {
            let seeds = inputs(here.join("seeds").join(target));
            assert!(!seeds.is_empty(), "no seeds for {target}");
            let regressions = inputs(here.join("../fixtures/fuzz").join(target));
            for file in seeds.iter().chain(&regressions) {
                let data = std::fs::read(file).unwrap();
                eprintln!("{target}: {}", file.display());
                run(target, &data);
            }
        }
    }
}

use super::*;
use crate::envelope::{decode, encode_wire, extract};
use crate::names::Intelligence;

fn env() -> Envelope {
    Envelope {
        from: "alice".into(),
        runtime: "echo".into(),
        intelligence: Some(Intelligence::Artificial),
        ts: Some("2026-07-14T01:23:45+03:00".into()),
        topic: Some("plans".into()),
        attachments: vec!["/r/a b.png".into()],
        body: "hello\nhuman ]]> </iap>".into(),
    }
}

/// The daemon's confirmer decodes the text it wrote; the writer extracts the envelope from
/// its stdin: both must arrive at the same fingerprint.
#[test]
fn fingerprint_is_the_same_on_both_sides_of_the_pipe() {
    let wire = encode_wire(&env());
    let decoded = decode(&wire).unwrap();
    let mut stream = wire.clone().into_bytes();
    stream.push(b'\n');
    let (found, _) = extract(&stream);
    assert_eq!(found.len(), 1);
    assert_eq!(fingerprint(&decoded), fingerprint(&found[0]));
    assert_eq!(fingerprint(&decoded), fingerprint(&env()));
    assert_eq!(fingerprint(&env()).len(), 16);
}

fn record(n: usize) -> Record {
    Record::from_envelope(
        &Envelope {
            body: format!("message {n}"),
            ..env()
        },
        format!("2026-07-13T22:00:0{n}.000Z"),
    )
}

/// The day `record(n)` was written (its stamps are 2026-07-13, UTC).
const RECORD_DAY: jiff::civil::Date = jiff::civil::date(2026, 7, 13);

/// `record(1)` with `body` as its text.
fn record_saying(body: &str) -> Record {
    Record {
        body: body.into(),
        ..record(1)
    }
}

/// Appends land as whole lines in order; a torn last line (a crash mid-write) is skipped,
/// not fatal.
#[test]
fn append_then_read_in_order_and_a_torn_line_is_skipped() {
    let (_dir, paths) = Paths::temp();
    let file = paths.inbox("you");
    assert_eq!(read(&file).unwrap(), vec![], "missing file = empty inbox");
    append(&file, &record(1)).unwrap();
    append(&file, &record(2)).unwrap();
    {
        use std::io::Write;
        let mut f = OpenOptions::new().append(true).open(&file).unwrap();
        // Cut inside a two-byte character: the bytes are not UTF-8.
        f.write_all(b"{\"id\":\"torn K\xc3").unwrap();
    }
    let got = read(&file).unwrap();
    assert_eq!(got, vec![record(1), record(2)]);
    // The next record starts a line of its own: only the torn line is lost, not it.
    append(&file, &record(3)).unwrap();
    assert_eq!(read(&file).unwrap(), vec![record(1), record(2), record(3)]);
    let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
    assert!(
        text.ends_with("}\n") && text.contains("\"torn K\u{fffd}\n{"),
        "{text}"
    );
    let mode = crate::testkit::mode_of(&file);
    assert_eq!(mode, 0o600);
}

/// The read mark counts records from the start, is stored atomically, and never moves back.
#[test]
fn read_marks() {
    let (_dir, paths) = Paths::temp();
    let m = ReadMark::load(&paths, "you");
    assert_eq!(m, ReadMark { read: 0 });
    assert!(m.is_unread(0));
    let m = m.after_showing(2);
    assert!(!m.is_unread(1) && m.is_unread(2));
    m.store(&paths, "you").unwrap();
    assert_eq!(ReadMark::load(&paths, "you"), ReadMark { read: 2 });
    assert_eq!(m.after_showing(1), m, "never back");
    std::fs::write(paths.inbox_read_mark("you"), "junk").unwrap();
    assert_eq!(ReadMark::load(&paths, "you"), ReadMark::default());
}

#[test]
fn a_record_for_a_person_and_for_json() {
    let tz = jiff::tz::TimeZone::UTC;
    let mut r = record_saying("line one\nline two");
    assert_eq!(
        show::render(&r, true, &tz, RECORD_DAY),
        "● 22:00:01  alice (echo)  topic: plans\n    line one\n    line two\n    attachment: /r/a b.png\n"
    );
    r.topic = None;
    r.attachments.clear();
    let other_day = jiff::civil::date(2026, 7, 14);
    assert_eq!(
        show::render(&r, false, &tz, other_day),
        "· 2026-07-13 22:00:01  alice (echo)\n    line one\n    line two\n"
    );
    let v: serde_json::Value = serde_json::from_str(&show::json(&record(1), true)).unwrap();
    assert_eq!(v["unread"], true);
    assert_eq!(v["from"], "alice");
    assert_eq!(v["topic"], "plans");
    assert_eq!(v["attachments"][0], "/r/a b.png");
    assert_eq!(v["id"].as_str().unwrap().len(), 16);
    assert_eq!(
        show::reply_hint("you", &[record(1)]).as_deref(),
        Some("reply: iapeer send alice --topic plans --from human-you --message '…'")
    );
    // iapeer's own notice has no one to answer: the hint names the newest real sender, or
    // there is none.
    let notice = Record {
        from: "iapeer".into(),
        runtime: "daemon".into(),
        ..record(2)
    };
    assert_eq!(
        show::reply_hint("you", &[record(1), notice.clone()]).as_deref(),
        Some("reply: iapeer send alice --topic plans --from human-you --message '…'")
    );
    assert_eq!(show::reply_hint("you", &[notice]), None);
}

#[test]
fn whose_inbox() {
    use crate::registry::{Registry, RegistryPeer};
    let peer = |p: &str, rt: &str| RegistryPeer::new(p, &[rt], "natural", format!("/w/{p}"));
    let one = Registry {
        version: 2,
        peers: vec![peer("alice", "echo"), peer("you", "human")],
    };
    let cwd = Path::new("/elsewhere");
    let pick = |reg: &Registry, given, env, cwd| {
        show::pick_peer(given, env, cwd, reg).map_err(|e| e.to_string())
    };
    assert_eq!(pick(&one, None, None, cwd).unwrap(), "you");
    assert_eq!(pick(&one, Some("you"), None, cwd).unwrap(), "you");
    let e = pick(&one, Some("alice"), None, cwd).unwrap_err();
    assert!(
        e.contains("not on the human runtime") && e.contains("human peers: you"),
        "{e}"
    );
    let e = pick(&one, Some("zed"), None, cwd).unwrap_err();
    assert!(e.contains("\"zed\" is not registered"), "{e}");
    let two = Registry {
        version: 2,
        peers: vec![peer("ann", "human"), peer("you", "human")],
    };
    let e = pick(&two, None, None, cwd).unwrap_err();
    assert_eq!(
        e,
        "several human peers (ann, you) — name the one to show: iapeer inbox <peer>"
    );
    assert_eq!(pick(&two, None, Some("human-ann"), cwd).unwrap(), "ann");
    assert_eq!(
        pick(&two, None, None, Path::new("/w/you/sub")).unwrap(),
        "you"
    );
    let none = Registry {
        version: 2,
        peers: vec![peer("alice", "echo")],
    };
    assert!(pick(&none, None, None, cwd)
        .unwrap_err()
        .contains("iapeer create <name> --runtime human"));
}

/// A sender cannot drive the reader's terminal: escape sequences and a bare CR in the text
/// are shown as stand-ins.
#[test]
fn control_characters_never_reach_the_terminal() {
    let r = Record {
        topic: Some("t\u{1b}[2J".into()),
        ..record_saying("ok\u{1b}]0;pwned\u{7}\rfake")
    };
    let shown = show::render(&r, true, &jiff::tz::TimeZone::UTC, RECORD_DAY);
    assert!(
        !shown
            .chars()
            .any(|c| c == '\u{1b}' || c == '\r' || c == '\u{7}'),
        "{shown:?}"
    );
    assert!(shown.contains("ok␛]0;pwned␇␍fake"), "{shown}");
    assert!(!show::reply_hint("you", std::slice::from_ref(&r))
        .unwrap()
        .contains('\u{1b}'));
}

//! Golden and property tests for the envelope codec (spec 03 §2).

use super::decode::DecodeError;
use super::*;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use proptest::prelude::*;

fn sample() -> Envelope {
    Envelope {
        from: "boris".into(),
        runtime: "claude".into(),
        intelligence: Some(Intelligence::Artificial),
        ts: Some("2026-07-14T01:23:45+03:00".into()),
        topic: Some("release".into()),
        attachments: vec!["/abs/a.png".into(), "/abs/b.txt".into()],
        body: "the body".into(),
    }
}

fn moscow(at: &str) -> Zoned {
    at.parse::<Timestamp>()
        .unwrap()
        .to_zoned(TimeZone::get("Europe/Moscow").unwrap())
}

/// The longest open tag the daemon writes (longest names, `artificial`, a `ts` with offset, a
/// topic at the escaped limit) still decodes, in both forms; 200 `"` would not (issue 12,
/// found by the `envelope` fuzz target: tests/fixtures/fuzz/envelope/topic-of-quotes).
#[test]
fn the_longest_producible_open_tag_decodes() {
    let name = format!("a{}", "b".repeat(31));
    let mut env = Envelope {
        from: name.clone(),
        runtime: name,
        intelligence: Some(Intelligence::Artificial),
        ts: Some("2026-07-14T01:23:45-09:30".into()),
        topic: Some("\"".repeat(MAX_TOPIC_ATTR_BYTES / 6) + "ab"),
        attachments: vec![],
        body: "b".into(),
    };
    assert_eq!(
        escape_attr(env.topic.as_deref().unwrap()).len(),
        MAX_TOPIC_ATTR_BYTES
    );
    assert_eq!(decode(&encode_wire(&env)), Ok(env.clone()));
    let now = moscow("2026-07-14T00:00:00Z");
    let agent = render_agent(&env, &now);
    assert!(agent.starts_with("<iap from="), "the agent form is used");
    assert_eq!(decode(&agent).unwrap().topic, env.topic);
    env.topic = Some("\"".repeat(200));
    assert_eq!(
        decode(&encode_wire(&env)),
        Err(DecodeError::BadOpenTag),
        "why the router refuses such a topic"
    );
}

#[test]
fn wire_form_golden() {
    let want = "<iap from-personality=\"boris\" from-runtime=\"claude\" \
from-intelligence=\"artificial\" ts=\"2026-07-14T01:23:45+03:00\" topic=\"release\">\n\
Reply via send_to_peer.\n\
<attachments><![CDATA[/abs/a.png\n/abs/b.txt]]></attachments>\n\
<message><![CDATA[the body]]></message>\n\
</iap>";
    assert_eq!(encode_wire(&sample()), want);
}

#[test]
fn wire_form_minimal_escapes_and_splits() {
    let env = Envelope {
        intelligence: None,
        ts: None,
        topic: Some(String::new()),
        attachments: vec![],
        body: "a]]>b\r\n".into(),
        from: "x".into(),
        runtime: "r".into(),
    };
    assert_eq!(
        encode_wire(&env),
        "<iap from-personality=\"x\" from-runtime=\"r\">\nReply via send_to_peer.\n\
<message><![CDATA[a]]]]><![CDATA[>b\r\n]]></message>\n</iap>"
    );
    let env = Envelope {
        topic: Some("a&b \"q\" <t>".into()),
        ..sample()
    };
    assert!(encode_wire(&env).contains(" topic=\"a&amp;b &quot;q&quot; &lt;t&gt;\">"));
}

#[test]
fn agent_form_golden() {
    let want = "<iap from=\"boris\" runtime=\"claude\" intelligence=\"artificial\" \
ts=\"01:23:45\" topic=\"release\">\n\
Reply via send_to_peer.\n\
<attachments>/abs/a.png\n/abs/b.txt</attachments>\n\
<msg>the body</msg>\n\
</iap>";
    let now = moscow("2026-07-14T10:00:00Z");
    assert_eq!(render_agent(&sample(), &now), want);
    // Deterministic.
    assert_eq!(render_agent(&sample(), &now), want);
    // Another day: the date is shown.
    let later = moscow("2026-07-16T10:00:00Z");
    assert!(render_agent(&sample(), &later).contains(" ts=\"2026-07-14 01:23:45\" "));
}

#[test]
fn agent_form_keeps_cdata_for_machinery_and_cr() {
    let now = moscow("2026-07-14T10:00:00Z");
    for body in [
        "see </iap> here",
        "x]]>y",
        "line\r\nnext",
        "<msg>",
        "<![CDATA[ a",
    ] {
        let env = Envelope {
            body: body.into(),
            attachments: vec![],
            ..sample()
        };
        let out = render_agent(&env, &now);
        assert!(out.contains("<msg><![CDATA["), "{body:?}: {out}");
        assert_eq!(decode(&out).unwrap().body, body);
    }
    let env = Envelope {
        attachments: vec!["/a/<msg>".into()],
        ..sample()
    };
    let out = render_agent(&env, &now);
    assert!(out.contains("<attachments><![CDATA[/a/<msg>]]></attachments>"));
    assert!(out.contains("<msg>the body</msg>"));
}

#[test]
fn decode_reads_both_namings_and_compat_values() {
    let text = "noise <iap from-personality=\"old\" from=\"new\" from-runtime=\"claude\" \
runtime=\"codex\" from-intelligence=\"human\" topic=\"\">\n\
IAP message from known peers. Reply via send_to_peer.\n\
<message><![CDATA[a]]><![CDATA[b]]></message>\n</iap> tail";
    let env = decode(text).unwrap();
    assert_eq!(env.from, "new");
    assert_eq!(env.runtime, "codex");
    assert_eq!(env.intelligence, Some(Intelligence::Natural));
    assert_eq!(env.topic, None);
    assert_eq!(env.body, "ab");
    assert!(env.attachments.is_empty());

    let text = "<iap from-personality=\"p\" from-runtime=\"claude\" intelligence=\"robot\">\
<msg>raw body</msg></iap>";
    let env = decode(text).unwrap();
    assert_eq!((env.runtime.as_str(), env.intelligence), ("claude", None));
    assert_eq!(env.body, "raw body");
}

#[test]
fn decode_errors() {
    assert_eq!(decode("hello"), Err(DecodeError::NoEnvelope));
    assert_eq!(
        decode("<iap from=\"a\"><msg>x</msg></iap>"),
        Err(DecodeError::NoSender)
    );
    assert_eq!(
        decode("<iap from=\"a\" runtime=\"b\"><msg>x</msg>"),
        Err(DecodeError::Unclosed)
    );
    assert_eq!(
        decode("<iap from=\"a\" runtime=\"b\"><message><![CDATA[</iap>"),
        Err(DecodeError::Unclosed)
    );
    assert_eq!(
        decode("<iap from=\"a\" runtime=\"b\">text</iap>"),
        Err(DecodeError::NoMessage)
    );
    assert_eq!(
        decode("<iap from=\"a\" runtime=\"b\"><msg>x</iap>"),
        Err(DecodeError::BadElement("msg"))
    );
    assert_eq!(
        decode("<iap from=\"a\" runtime=\"b\"><iap from=\"c\" runtime=\"d\"><msg>x</msg></iap>"),
        Err(DecodeError::Nested)
    );
}

#[test]
fn extract_tolerates_paste_markers_and_keeps_tails() {
    let one = encode_wire(&sample());
    let stream = format!("\x1b[200~{one}\x1b[201~\r\n<iap from=\"a\"");
    let (envs, used) = extract(stream.as_bytes());
    assert_eq!(envs, vec![sample()]);
    assert_eq!(&stream[used..], "<iap from=\"a\"");
    // No `<iap ` at all: keep the last 5 bytes.
    let (envs, used) = extract(b"0123456789<iap");
    assert!(envs.is_empty());
    assert_eq!(used, 9);
    // An open tag without a sender is skipped.
    let stream = format!("<iap x=\"1\"><msg>no</msg></iap>{one}");
    assert_eq!(extract(stream.as_bytes()).0, vec![sample()]);
    // A sender-less open tag longer than the limit is skipped once 1024 bytes are in.
    let junk = format!("<iap {}", "z".repeat(1100));
    let (envs, used) = extract(junk.as_bytes());
    assert!(envs.is_empty());
    assert_eq!(used, junk.len() - 5);
}

// ---- property tests ----

fn text() -> impl Strategy<Value = String> {
    // Bias towards the characters that matter to the codec.
    let piece = prop_oneof![
        12 => prop::sample::select(
            &[
                "]]>",
                "</iap>",
                "<iap ",
                "<msg>",
                "</message>",
                "<![CDATA[",
                "\r",
                "\n",
                "&amp;\"<>",
                "привет ✓",
                "\x1b[201~\r/exit\r",
                "\x1b\x03\x7f\u{9b}\u{85}\x0b",
            ][..]
        )
        .prop_map(String::from),
        1 => "[a-z ]{0,8}".prop_map(|s| s),
        1 => any::<String>(),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

fn path() -> impl Strategy<Value = String> {
    "/[^\r\n]{1,20}".prop_map(|s| s)
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (
        "[a-z][a-z0-9-]{0,10}",
        "[a-z][a-z0-9]{0,6}",
        prop::option::of(prop_oneof![
            Just(Intelligence::Artificial),
            Just(Intelligence::Natural),
            Just(Intelligence::Absent)
        ]),
        prop::option::of(prop_oneof![
            Just("2026-07-14T01:23:45+03:00".to_string()),
            "[^\"]{0,12}".prop_map(|s| s),
        ]),
        prop::option::of(text()),
        prop::collection::vec(path(), 0..3),
        text(),
    )
        .prop_map(
            |(from, runtime, intelligence, ts, topic, attachments, body)| Envelope {
                from,
                runtime,
                intelligence,
                ts,
                topic: topic.filter(|t| !t.is_empty()),
                attachments,
                body,
            },
        )
}

fn noise() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"\x1b[200~".to_vec()),
        Just(b"\x1b[201~".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"<ia".to_vec()),
        Just(b"<iap x=\"1\">".to_vec()),
        Just(b"<iap from=\"a\" runtime=\"b\">".to_vec()),
        Just(b"</iap>]]>".to_vec()),
        "[a-z <>]{0,6}".prop_map(String::into_bytes),
    ];
    prop::collection::vec(piece, 0..4).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn wire_roundtrip(env in envelope()) {
        prop_assert_eq!(decode(&encode_wire(&env)), Ok(env));
    }

    #[test]
    fn empty_topic_is_no_topic(env in envelope()) {
        let with_empty = Envelope { topic: Some(String::new()), ..env.clone() };
        prop_assert_eq!(decode(&encode_wire(&with_empty)).unwrap().topic, None);
    }

    #[test]
    fn agent_roundtrip(env in envelope()) {
        let now = moscow("2026-07-14T10:00:00Z");
        let back = decode(&render_agent(&env, &now)).unwrap();
        prop_assert_eq!(&back.from, &env.from);
        prop_assert_eq!(&back.runtime, &env.runtime);
        prop_assert_eq!(&back.body, &env.body);
        prop_assert_eq!(&back.attachments, &env.attachments);
        prop_assert_eq!(back.topic, env.topic);
    }

    /// What is pasted (the agent form through `term::paste_text`) holds no ESC and decodes to
    /// the envelope with every sender-controlled field shown as the agent sees it.
    #[test]
    fn pasted_agent_form_decodes_to_what_the_agent_sees(env in envelope()) {
        let now = moscow("2026-07-14T10:00:00Z");
        let seen = |t: &str| crate::term::paste_text(t).into_owned();
        let pasted = seen(&render_agent(&env, &now));
        prop_assert!(!pasted.contains('\x1b'));
        let back = decode(&pasted).unwrap();
        prop_assert_eq!(&back.from, &env.from);
        prop_assert_eq!(&back.runtime, &env.runtime);
        prop_assert_eq!(back.body, seen(&env.body));
        prop_assert_eq!(back.attachments, env.attachments.iter().map(|a| seen(a)).collect::<Vec<_>>());
        prop_assert_eq!(back.topic, env.topic.as_deref().map(seen));
    }
}

proptest! {
    // Each case tries every split point (quadratic), so fewer cases.
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn extractor_finds_every_envelope_at_every_split(
        parts in prop::collection::vec((noise(), envelope(), any::<bool>()), 1..4),
        tail in noise(),
    ) {
        let now = moscow("2026-07-14T10:00:00Z");
        let mut stream = Vec::new();
        let mut want = Vec::new();
        for (noise, env, agent) in &parts {
            stream.extend_from_slice(noise);
            let text = if *agent { render_agent(env, &now) } else { encode_wire(env) };
            stream.extend_from_slice(text.as_bytes());
            want.push(decode(&text).unwrap());
        }
        stream.extend_from_slice(&tail);
        for cut in 0..=stream.len() {
            let (mut got, used) = extract(&stream[..cut]);
            prop_assert!(used <= cut);
            let rest: Vec<u8> = stream[used..].to_vec();
            let (more, _) = extract(&rest);
            got.extend(more);
            prop_assert_eq!(&got, &want, "cut at {}", cut);
        }
    }
}

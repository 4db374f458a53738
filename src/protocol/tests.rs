use serde_json::{json, Value};

use super::*;

/// The reference document, whose examples must parse into the types.
const DOC: &str = include_str!("../../docs/PROTOCOL.md");

/// The ```json blocks of the document, each a list of lines.
fn json_blocks(doc: &str) -> Vec<Vec<&str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in doc.lines() {
        match (&mut current, line.trim()) {
            (None, "```json") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().expect("open block")),
            (Some(b), l) if !l.is_empty() => b.push(l),
            _ => {}
        }
    }
    assert!(current.is_none(), "an unterminated ```json block");
    blocks
}

/// Serialize `v` and read it back as a generic JSON value.
fn value(v: &impl Serialize) -> Value {
    serde_json::to_value(v).expect("serializes")
}

#[test]
fn every_example_in_the_protocol_doc_parses_into_the_types() {
    let blocks = json_blocks(DOC);
    assert!(blocks.len() >= Op::ALL.len(), "{} blocks", blocks.len());
    let mut seen = Vec::new();
    for block in &blocks {
        // The request this block's answer belongs to: parsed, or refused by the parser.
        let mut asked: Option<Result<Op, Failure>> = None;
        let mut answered = false;
        for line in block {
            let v: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
            assert!(!answered, "a line after the final answer: {line}");
            if v.get("op").is_some() {
                assert!(asked.is_none(), "two requests in one block: {line}");
                asked = Some(parse_request(line.as_bytes()).map(|r| {
                    seen.push(r.op());
                    r.op()
                }));
            } else if v.get("progress").is_some() {
                let p: Progress = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("bad progress line {line}: {e}"));
                assert_eq!(value(&p), v, "{line}");
            } else {
                let asked = asked
                    .clone()
                    .unwrap_or_else(|| panic!("an answer without a request: {line}"));
                match asked {
                    Ok(op) => {
                        let reply = Reply::parse(op, line)
                            .unwrap_or_else(|e| panic!("not a {op:?} reply: {line}: {e}"));
                        // Exactly the fields the type writes: none missing, none extra.
                        assert_eq!(value(&reply), v, "{line}");
                    }
                    Err(refused) => {
                        let answer: Answer<Pong> = serde_json::from_str(line)
                            .unwrap_or_else(|e| panic!("not a failure: {line}: {e}"));
                        assert_eq!(answer, Answer::Failed(refused), "{line}");
                    }
                }
                answered = true;
            }
        }
        assert!(answered, "a block without a final answer: {block:?}");
    }
    for op in Op::ALL {
        assert!(
            seen.contains(op),
            "docs/PROTOCOL.md has no example of {op:?}"
        );
    }
}

#[test]
fn every_code_in_the_protocol_doc_table_is_a_code() {
    let codes: Vec<Code> = DOC
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(code, _)| {
            serde_json::from_value(json!(code)).unwrap_or_else(|e| panic!("{code}: {e}"))
        })
        .collect();
    assert_eq!(codes.len(), 15, "{codes:?}");
    assert_eq!(value(&Code::NotRegistered), json!("not-registered"));
}

fn every_request() -> Vec<Request> {
    let s = |x: &str| x.to_string();
    let reqs = vec![
        Request::Ping,
        Request::Send {
            from: s("echo-a"),
            to: s("b"),
            runtime: Some(s("echo")),
            message: s("hi \"there\"\n"),
            topic: Some(s("t")),
            attachments: vec![s("/a"), s("/b c")],
            timeout_ms: Some(3000),
            id: Some(s("m-0123456789abcdef")),
            if_busy: Some(IfBusy::Interrupt),
        },
        Request::Send {
            from: s("echo-a"),
            to: s("b"),
            runtime: None,
            message: s("hi"),
            topic: None,
            attachments: vec![],
            timeout_ms: None,
            id: None,
            if_busy: None,
        },
        Request::List,
        Request::Wake {
            personality: s("bob"),
            runtime: None,
        },
        Request::Stop {
            personality: None,
            runtime: None,
            all: true,
            everyone: false,
        },
        Request::Stop {
            personality: None,
            runtime: None,
            all: true,
            everyone: true,
        },
        Request::Start {
            personality: Some(s("bob")),
            runtime: Some(s("echo")),
            all: false,
        },
        Request::Attach {
            personality: s("bob"),
            runtime: Some(s("echo")),
            fresh: true,
            no_attach: true,
        },
        Request::New {
            personality: s("bob"),
            runtime: None,
        },
        Request::Restart {
            personality: s("bob"),
            runtime: Some(s("claude")),
        },
        Request::Interrupt {
            personality: s("bob"),
            runtime: Some(s("claude")),
        },
        Request::Compact {
            personality: s("bob"),
            runtime: None,
        },
        Request::SelfFresh {
            identity: s("claude-bob"),
        },
        Request::ConfirmSend {
            id: s("og-1a2b3c4d"),
            runtime: Some(s("web")),
            caller: Some(s("claude-bob")),
        },
        Request::Forget {
            personality: s("bob"),
        },
        Request::LiveRuntime {
            personality: s("bob"),
        },
        Request::Status,
        Request::Screen {
            personality: s("bob"),
            runtime: Some(s("echo")),
        },
        Request::ApprovalRequest {
            identity: s("claude-bob"),
            token: s("9f0c"),
            tool: s("Bash"),
            summary: s("rm -rf build"),
        },
        Request::Approvals {
            wait_ms: Some(30_000),
            since_ms: Some(1_764_496_800_000),
        },
        Request::Approvals {
            wait_ms: None,
            since_ms: None,
        },
        Request::Approve {
            id: s("ap-1a2b3c4d"),
            option: None,
        },
        Request::Approve {
            id: s("ap-1a2b3c4d"),
            option: Some(s("2")),
        },
        Request::Deny {
            id: s("ap-1a2b3c4d"),
            reason: Some(s("not on main")),
        },
    ];
    for op in Op::ALL {
        assert!(reqs.iter().any(|r| r.op() == *op), "no {op:?} request");
    }
    reqs
}

#[test]
fn every_request_round_trips_through_the_daemon_parser() {
    for req in every_request() {
        let line = serde_json::to_string(&req).unwrap();
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(parse_request(line.as_bytes()), Ok(req.clone()), "{line}");
        // The tag is the op's own spelling.
        assert_eq!(value(&req)["op"], value(&req.op()), "{line}");
    }
    // Absent optional fields are left out.
    let line = serde_json::to_string(&Request::Wake {
        personality: "bob".into(),
        runtime: None,
    })
    .unwrap();
    assert_eq!(line, r#"{"op":"wake","personality":"bob"}"#);
}

#[test]
fn parses_known_ops_and_defaults() {
    assert_eq!(parse_request(br#"{"op":"ping"}"#).unwrap(), Request::Ping);
    let r = parse_request(br#"{"op":"send","from":"echo-a","to":"b","message":"hi"}"#).unwrap();
    assert_eq!(
        r,
        Request::Send {
            from: "echo-a".into(),
            to: "b".into(),
            runtime: None,
            message: "hi".into(),
            topic: None,
            attachments: vec![],
            timeout_ms: None,
            id: None,
            if_busy: None,
        }
    );
    let r = parse_request(br#"{"op":"stop","all":true,"personality":null}"#).unwrap();
    assert!(matches!(r, Request::Stop { all: true, .. }));
}

#[test]
fn unknown_op_and_bad_requests_have_codes() {
    let e = parse_request(br#"{"op":"fly"}"#).unwrap_err();
    assert_eq!(e.code, Code::UnknownOp);
    assert_eq!(e.error, "unknown op \"fly\"");
    let e = parse_request(b"{nope").unwrap_err();
    assert_eq!(e.code, Code::BadRequest);
    let e = parse_request(br#"{"op":"send","to":"b"}"#).unwrap_err();
    assert_eq!(e.code, Code::BadRequest);
    assert!(e.error.contains("from"), "{e:?}");
    let e = parse_request(br#"["op"]"#).unwrap_err();
    assert_eq!(e.code, Code::BadRequest);
    let e = parse_request(br#"{"op":7}"#).unwrap_err();
    assert_eq!(e.code, Code::BadRequest);
    let e = parse_request(br#"{"op":"wake","personality":"b","extra":1}"#).unwrap_err();
    assert_eq!(e.code, Code::BadRequest);
}

#[test]
fn replies_have_the_wire_shape() {
    let r = Reply::from(Pong {
        version: "1".into(),
        pid: 2,
    });
    assert_eq!(value(&r), json!({"ok":true,"version":"1","pid":2}));
    let r = Reply::failure(Code::ShuttingDown, "bye");
    assert_eq!(
        value(&r),
        json!({"ok":false,"code":"shutting-down","error":"bye"})
    );
    let r = Reply::from(NewReply::Restarted(RestartReply {
        identity: "console-bot".into(),
        restarted: true,
    }));
    assert_eq!(
        value(&r),
        json!({"ok":true,"identity":"console-bot","restarted":true})
    );
    // The client reads the same line back as the op's type.
    let line = serde_json::to_string(&r).unwrap();
    assert_eq!(Reply::parse(Op::New, &line).unwrap(), r);
    let answer: Answer<NewReply> = serde_json::from_str(&line).unwrap();
    assert_eq!(answer.into_result().unwrap().identity(), "console-bot");
}

#[test]
fn client_lines_tell_progress_from_the_final_answer() {
    let p =
        Line::<ForgetReply>::parse(r#"{"progress":"booting","identity":"echo-b","elapsed_ms":5}"#)
            .unwrap();
    assert!(matches!(p, Line::Progress(Progress { elapsed_ms: 5, .. })));
    let f = Line::<ForgetReply>::parse(r#"{"ok":true,"ended":[]}"#).unwrap();
    assert_eq!(f, Line::Final(Answer::Ok(ForgetReply { ended: vec![] })));
    let f = Line::<ForgetReply>::parse(r#"{"ok":false,"code":"internal","error":"x"}"#).unwrap();
    assert_eq!(
        f,
        Line::Final(Answer::Failed(Failure::new(Code::Internal, "x")))
    );
    assert!(Line::<ForgetReply>::parse(r#"{"ok":"yes"}"#).is_err());
    assert!(Line::<ForgetReply>::parse(r#"{"ended":[]}"#).is_err());
    assert!(Line::<ForgetReply>::parse(r#"{"ok":true}"#).is_err());
}

/// A [`call`] value is the request line of its op, and its answer type is the op's.
#[test]
fn a_call_is_its_request_with_its_reply_type() {
    assert_eq!(
        serde_json::to_string(&call::Ping {}).unwrap(),
        r#"{"op":"ping"}"#
    );
    let stop = call::Stop {
        personality: Some("bob".into()),
        runtime: None,
        all: false,
        everyone: false,
    };
    assert_eq!(
        serde_json::to_string(&stop).unwrap(),
        r#"{"op":"stop","personality":"bob","all":false}"#
    );
    fn reply_of<C: Call>(_: &C) -> std::any::TypeId
    where
        C::Reply: 'static,
    {
        std::any::TypeId::of::<C::Reply>()
    }
    assert_eq!(reply_of(&stop), std::any::TypeId::of::<StopReply>());
    assert_eq!(reply_of(&call::Ping {}), std::any::TypeId::of::<Pong>());
}

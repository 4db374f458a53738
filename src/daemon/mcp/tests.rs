use std::sync::Mutex;

use serde_json::{json, Value};

use super::*;

/// Records every call; answers a fixed result or error.
struct Fake {
    calls: Mutex<Vec<(CallerCreds, SendArgs)>>,
    answer: crate::daemon::mcp::SendOutcome,
}

impl Fake {
    fn ok() -> Fake {
        Fake {
            calls: Mutex::new(Vec::new()),
            answer: Ok(serde_json::from_value(
                json!({"ok": true, "delivered_to": {"personality": "boris", "runtime": "claude"}, "woke": false, "ts": "2026-07-14T01:23:45+03:00"}),
            ).unwrap()),
        }
    }
    fn failing(text: &str) -> Fake {
        Fake {
            calls: Mutex::new(Vec::new()),
            answer: Err(crate::protocol::Failure::new(
                crate::protocol::Code::NotRegistered,
                text,
            )),
        }
    }
    fn calls(&self) -> Vec<(CallerCreds, SendArgs)> {
        self.calls.lock().unwrap().clone()
    }
}

impl Backend for Fake {
    fn send_to_peer(&self, creds: CallerCreds, args: SendArgs) -> crate::daemon::mcp::SendOutcome {
        self.calls.lock().unwrap().push((creds, args));
        self.answer.clone()
    }
}

fn creds() -> CallerCreds {
    CallerCreds {
        identity_header: Some("claude-alice".into()),
        session_token: Some("tok".into()),
    }
}

fn run(backend: &Fake, body: Value) -> (u16, Value) {
    run_with(backend, body, &McpHeaders::default())
}

/// `body` answered with `headers`; the answer must be JSON.
fn run_with(backend: &Fake, body: Value, headers: &McpHeaders<'_>) -> (u16, Value) {
    let r = handle(body.to_string().as_bytes(), headers, creds(), backend);
    assert_eq!(r.content_type, Some(JSON));
    (r.status, serde_json::from_slice(&r.body).unwrap())
}

fn call(backend: &Fake, arguments: Value) -> Value {
    let (status, v) = run(
        backend,
        json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send_to_peer","arguments":arguments}}),
    );
    assert_eq!(status, 200);
    assert_eq!(v["id"], 7);
    v["result"].clone()
}

fn tool_error_text(result: &Value) -> String {
    assert_eq!(result["isError"], true, "not a tool error: {result}");
    result["content"][0]["text"].as_str().unwrap().to_owned()
}

#[test]
fn initialize_echoes_supported_version_else_newest() {
    let b = Fake::ok();
    for (asked, expected) in [
        ("2025-06-18", "2025-06-18"),
        ("2024-11-05", "2024-11-05"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let (status, v) = run(
            &b,
            json!({"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":asked,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        );
        assert_eq!(status, 200);
        let r = &v["result"];
        assert_eq!(r["protocolVersion"], expected);
        assert_eq!(
            r["serverInfo"],
            json!({"name":"iapeer","version":env!("CARGO_PKG_VERSION")})
        );
        assert_eq!(r["capabilities"], json!({"tools":{}}));
        assert!(r["instructions"]
            .as_str()
            .unwrap()
            .contains("acknowledgement"));
    }
    assert!(b.calls().is_empty());
}

#[test]
fn tools_list_has_exactly_the_spec_tool() {
    let (_, v) = run(
        &Fake::ok(),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
    );
    let tools = v["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    let t = &tools[0];
    assert_eq!(t["name"], "send_to_peer");
    let s = &t["inputSchema"];
    assert_eq!(s["type"], "object");
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["required"], json!(["personality", "message"]));
    let p = &s["properties"];
    assert_eq!(
        p["personality"]["pattern"],
        "^[a-z][a-z0-9-]{0,31}(@[a-z][a-z0-9-]{0,31})?$"
    );
    assert_eq!(p["runtime"]["pattern"], "^[a-z][a-z0-9]{0,31}$");
    assert_eq!(p["message"]["minLength"], 1);
    assert_eq!(p["message"]["maxLength"], 16000);
    assert_eq!(p["topic"]["maxLength"], 200);
    assert_eq!(p["attachments"]["maxItems"], 20);
    assert_eq!(p["attachments"]["items"]["type"], "string");
    // The spec's five, plus the optional message id (issue 26 item 5).
    assert_eq!(p["id"]["pattern"], "^[A-Za-z0-9._:-]{1,64}$");
    // And the optional busy choice (issue 32 item 7).
    assert_eq!(
        p["if_busy"]["enum"],
        json!(["queue", "interrupt", "refuse"])
    );
    // What the choices mean for a host that is offline (issue 28 item 4).
    let busy = p["if_busy"]["description"].as_str().unwrap();
    assert!(
        busy.contains("in the middle of a turn")
            && busy.contains("another host that is offline")
            && busy.contains("at most 24 h")
            && busy.contains("refuses it at once (code offline)"),
        "{busy}"
    );
    assert_eq!(p.as_object().unwrap().len(), 7);
    assert_eq!(
        t["annotations"],
        json!({"title":"Send to IAP peer","readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true})
    );
    assert_eq!(t["_meta"], json!({"anthropic/alwaysLoad": true}));
    let d = t["description"].as_str().unwrap();
    for needle in [
        "personality",
        "runtime",
        "<iap from=",
        "ts",
        "absolute",
        "acknowledgement",
    ] {
        assert!(d.contains(needle), "description lacks {needle}");
    }
}

#[test]
fn tools_call_success_wraps_result() {
    let b = Fake::ok();
    let r = call(
        &b,
        json!({"personality":"boris","message":"hi","runtime":"codex","topic":"t1","attachments":["/tmp/a"]}),
    );
    assert_eq!(r["structuredContent"]["ok"], true);
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains('\n'), "text should be pretty JSON");
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        r["structuredContent"]
    );
    assert!(r.get("isError").is_none());
    let calls = b.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, creds());
    assert_eq!(
        calls[0].1,
        SendArgs {
            to: "boris".into(),
            runtime: Some("codex".into()),
            message: "hi".into(),
            topic: Some("t1".into()),
            attachments: vec!["/tmp/a".into()],
            id: None,
            if_busy: crate::protocol::IfBusy::Queue,
        }
    );
}

#[test]
fn backend_error_is_tool_error() {
    let b = Fake::failing("cannot send to self");
    let r = call(&b, json!({"personality":"alice","message":"hi"}));
    assert_eq!(tool_error_text(&r), "cannot send to self");
}

#[test]
fn argument_shape_errors_are_tool_errors_without_backend_call() {
    let b = Fake::ok();
    let missing = "send_to_peer requires non-empty \"personality\" and \"message\"";
    let cases = [
        (json!({"message":"hi"}), missing.to_owned()),
        (json!({"personality":"","message":"hi"}), missing.to_owned()),
        (
            json!({"personality":"bob","message":null}),
            missing.to_owned(),
        ),
        (
            json!({"personality":42,"message":"hi"}),
            ArgError::NotAString("personality").to_string(),
        ),
        (
            json!({"personality":"bob","message":"hi","attachments":"/a"}),
            ArgError::BadAttachments.to_string(),
        ),
        (
            json!({"personality":"bob","message":"hi","attachments":["/a",3]}),
            ArgError::BadAttachments.to_string(),
        ),
        (
            json!({"personality":"bob","message":"hi","color":"red"}),
            ArgError::UnknownKey("color".into()).to_string(),
        ),
        (json!("text"), ArgError::NotAnObject.to_string()),
        (
            json!({"personality":"bob","message":"hi","if_busy":"wait"}),
            "send_to_peer: \"if_busy\" must be \"queue\", \"interrupt\" or \"refuse\" (got \"wait\"); leave it out to queue".to_owned(),
        ),
        (
            json!({"personality":"bob","message":"hi","if_busy":true}),
            ArgError::BadIfBusy("true".into()).to_string(),
        ),
    ];
    for (args, expected) in cases {
        assert_eq!(
            tool_error_text(&call(&b, args.clone())),
            expected,
            "args {args}"
        );
    }
    assert!(b.calls().is_empty());
}

#[test]
fn empty_runtime_and_null_optionals_count_as_absent() {
    let b = Fake::ok();
    call(
        &b,
        json!({"personality":"bob","message":"hi","runtime":"","topic":null,"attachments":null}),
    );
    let args = &b.calls()[0].1;
    assert_eq!(args.runtime, None);
    assert_eq!(args.topic, None);
    assert!(args.attachments.is_empty());
}

#[test]
fn unknown_tool_is_tool_error() {
    let (_, v) = run(
        &Fake::ok(),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}),
    );
    assert_eq!(tool_error_text(&v["result"]), "unknown tool: rm_rf");
}

#[test]
fn protocol_errors() {
    let b = Fake::ok();
    let r = handle(b"{not json", &McpHeaders::default(), creds(), &b);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        (r.status, v["error"]["code"].clone(), v["id"].clone()),
        (400, json!(-32700), Value::Null)
    );

    let (_, v) = run(
        &b,
        json!({"jsonrpc":"2.0","id":3,"method":"resources/list"}),
    );
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(3), json!(-32601))
    );

    let (_, v) = run(&b, json!({"jsonrpc":"2.0","id":4,"method":"ping"}));
    assert_eq!(v["result"], json!({}));

    let (_, v) = run(
        &b,
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}),
    );
    assert_eq!(v["error"]["code"], -32602);

    for bad in [
        json!(5),
        json!({"jsonrpc":"1.0","id":1,"method":"ping"}),
        json!({"jsonrpc":"2.0","id":{},"method":"ping"}),
        json!({"jsonrpc":"2.0","id":1,"method":7}),
        json!([]),
    ] {
        let (status, v) = run(&b, bad.clone());
        assert_eq!(
            (status, v["error"]["code"].clone()),
            (400, json!(-32600)),
            "for {bad}"
        );
    }
}

#[test]
fn notifications_and_client_responses_get_202() {
    let b = Fake::ok();
    for body in [
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":9,"result":{}}),
        json!([{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}]),
    ] {
        let r = handle(
            body.to_string().as_bytes(),
            &McpHeaders::default(),
            creds(),
            &b,
        );
        assert_eq!(
            (r.status, r.content_type, r.body.len()),
            (202, None, 0),
            "for {body}"
        );
    }
}

#[test]
fn batch_answers_requests_only_in_order() {
    let (status, v) = run(
        &Fake::ok(),
        json!([
            {"jsonrpc":"2.0","id":1,"method":"ping"},
            {"jsonrpc":"2.0","method":"notifications/initialized"},
            {"jsonrpc":"2.0","id":"two","method":"nope"},
            17
        ]),
    );
    assert_eq!(status, 200);
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 3);
    assert_eq!(
        (arr[0]["id"].clone(), arr[0]["result"].clone()),
        (json!(1), json!({}))
    );
    assert_eq!(
        (arr[1]["id"].clone(), arr[1]["error"]["code"].clone()),
        (json!("two"), json!(-32601))
    );
    assert_eq!(
        (arr[2]["id"].clone(), arr[2]["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
}

#[test]
fn sse_encoding_when_json_not_accepted() {
    let b = Fake::ok();
    let body = json!({"jsonrpc":"2.0","id":1,"method":"ping"}).to_string();
    let r = handle(
        body.as_bytes(),
        &McpHeaders {
            accept: Some("text/event-stream"),
            ..McpHeaders::default()
        },
        creds(),
        &b,
    );
    assert_eq!(r.content_type, Some(EVENT_STREAM));
    let text = String::from_utf8(r.body).unwrap();
    let data = text
        .strip_prefix("event: message\ndata: ")
        .and_then(|t| t.strip_suffix("\n\n"))
        .expect("one SSE event");
    assert_eq!(
        serde_json::from_str::<Value>(data).unwrap()["result"],
        json!({})
    );
}

#[test]
fn accept_header_choices() {
    assert!(wants_json(None));
    assert!(wants_json(Some("  ")));
    assert!(wants_json(Some("application/json, text/event-stream")));
    assert!(wants_json(Some(
        "text/event-stream, Application/JSON;q=0.9"
    )));
    assert!(wants_json(Some("*/*")));
    assert!(!wants_json(Some("text/event-stream")));
    assert!(!wants_json(Some("text/html, application/jsonx")));
    // Whether a slow answer may be held as an event stream: only when the stream is named.
    assert!(takes_events(Some("application/json, text/event-stream")));
    assert!(takes_events(Some("Text/Event-Stream;q=0.5")));
    assert!(!takes_events(Some("application/json")));
    assert!(!takes_events(Some("*/*")));
    assert!(!takes_events(Some("text/*")));
    assert!(!takes_events(None));
}

/// A modern (2026-07-28) request: its version in `_meta`, the headers that mirror the body.
fn run_modern(backend: &Fake, method: &str, mut params: Value, name: Option<&str>) -> (u16, Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": "m1", "method": method, "params": params});
    let headers = McpHeaders {
        accept: Some("application/json, text/event-stream"),
        protocol_version: Some("2026-07-28"),
        method: Some(method),
        name,
    };
    run_with(backend, body, &headers)
}

/// The `result` of a modern request that must succeed: answered 200 and `resultType:
/// "complete"`, as every modern result is.
fn modern_result(b: &Fake, method: &str, params: Value, name: Option<&str>) -> Value {
    let (status, v) = run_modern(b, method, params, name);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    v
}

#[test]
fn server_discover_names_every_version_and_the_tools_capability() {
    let b = Fake::ok();
    let v = modern_result(&b, "server/discover", json!({}), None);
    let r = &v["result"];
    assert_eq!(r["supportedVersions"][0], "2026-07-28");
    let versions = r["supportedVersions"].as_array().unwrap();
    for v in tool::SUPPORTED_PROTOCOL_VERSIONS {
        assert!(versions.contains(&json!(v)), "{v} missing: {r}");
    }
    assert_eq!(r["capabilities"], json!({"tools": {}}));
    assert_eq!(r["instructions"], tool::INSTRUCTIONS);
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "iapeer"
    );
    assert_eq!(
        (&r["ttlMs"], &r["cacheScope"]),
        (&json!(0), &json!("private"))
    );
    // A client that probes without `_meta` is answered the same.
    let (status, legacy) = run(
        &b,
        json!({"jsonrpc":"2.0","id":1,"method":"server/discover"}),
    );
    assert_eq!((status, &legacy["result"]), (200, r));
}

#[test]
fn modern_results_carry_result_type_and_the_listing_its_cache_hints() {
    let b = Fake::ok();
    let v = modern_result(&b, "tools/list", json!({}), None);
    let r = &v["result"];
    assert_eq!(r["tools"][0]["name"], "send_to_peer");
    // No client may answer a later tools/list from a cache: it is how a boot learns the
    // agent's tools are loaded.
    assert_eq!(
        (&r["ttlMs"], &r["cacheScope"]),
        (&json!(0), &json!("private"))
    );

    let args =
        json!({"name": "send_to_peer", "arguments": {"personality": "boris", "message": "hi"}});
    let v = modern_result(&b, "tools/call", args, Some("send_to_peer"));
    assert_eq!(v["id"], "m1");
    assert_eq!(v["result"]["structuredContent"]["ok"], true);
    assert_eq!(b.calls().len(), 1);

    // The handshake era's answers are as before: no resultType, no cache hints.
    let (_, legacy) = run(&b, json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}));
    let r = legacy["result"].as_object().unwrap();
    assert!(
        !r.contains_key("resultType") && !r.contains_key("ttlMs"),
        "{legacy}"
    );
}

#[test]
fn modern_refusals_use_the_transport_statuses() {
    let b = Fake::ok();
    let (status, v) = run_modern(&b, "subscriptions/listen", json!({}), None);
    assert_eq!((status, &v["error"]["code"]), (404, &json!(-32601)), "{v}");
    // 2026-07-28 removed ping; the handshake era keeps it.
    let (status, _) = run_modern(&b, "ping", json!({}), None);
    assert_eq!(status, 404);
    let (status, v) = run(&b, json!({"jsonrpc":"2.0","id":1,"method":"ping"}));
    assert_eq!((status, &v["result"]), (200, &json!({})));
    // Invalid params are a 400 in the modern transport.
    let (status, v) = run_modern(&b, "tools/call", json!({}), None);
    assert_eq!((status, &v["error"]["code"]), (400, &json!(-32602)), "{v}");
    // A modern body is one request, never a batch.
    let batch = json!([{"jsonrpc":"2.0","id":1,"method":"tools/list"}]);
    let headers = McpHeaders {
        protocol_version: Some("2026-07-28"),
        method: Some("tools/list"),
        ..McpHeaders::default()
    };
    let (status, v) = run_with(&b, batch, &headers);
    assert_eq!((status, &v["error"]["code"]), (400, &json!(-32600)), "{v}");

    // Mcp-Name disagrees with the tool called: refused before anything is routed.
    let args =
        json!({"name": "send_to_peer", "arguments": {"personality": "boris", "message": "hi"}});
    let (status, v) = run_modern(&b, "tools/call", args, Some("other"));
    assert_eq!(
        (status, &v["error"]["code"]),
        (400, &json!(era::HEADER_MISMATCH)),
        "{v}"
    );
    assert!(b.calls().is_empty());

    let body = json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}});
    let headers = McpHeaders {
        protocol_version: Some("2099-01-01"),
        method: Some("tools/list"),
        ..McpHeaders::default()
    };
    let (status, v) = run_with(&b, body, &headers);
    assert_eq!(status, 400);
    assert_eq!(v["error"]["code"], era::UNSUPPORTED_PROTOCOL_VERSION);
    assert_eq!(v["error"]["data"]["requested"], "2099-01-01");
    assert_eq!(v["error"]["data"]["supported"][0], "2026-07-28");
}

/// Issue 32 item 7: `if_busy` is optional (absent or null: queue) and carries each choice.
#[test]
fn if_busy_is_optional_and_carries_each_choice() {
    use crate::protocol::IfBusy;
    let b = Fake::ok();
    call(&b, json!({"personality":"bob","message":"hi"}));
    call(
        &b,
        json!({"personality":"bob","message":"hi","if_busy":null}),
    );
    for choice in ["queue", "interrupt", "refuse"] {
        call(
            &b,
            json!({"personality":"bob","message":"hi","if_busy":choice}),
        );
    }
    let got: Vec<IfBusy> = b.calls().iter().map(|c| c.1.if_busy).collect();
    assert_eq!(
        got,
        [
            IfBusy::Queue,
            IfBusy::Queue,
            IfBusy::Queue,
            IfBusy::Interrupt,
            IfBusy::Refuse
        ]
    );
}

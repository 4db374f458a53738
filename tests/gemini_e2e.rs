//! End to end with the real Gemini CLI 0.61.0 (issue 27 item 2): a `gemini` peer made by the
//! CLI's own verbs, woken by `iapeer send`, answering through `send_to_peer` over MCP, taking a
//! message while live and resuming its conversation by topic after it slept. Its model
//! requests go to the loopback Gemini API stand-in (`common::gemini`, the one mock: the cloud
//! API cannot run here). `scripts/setup-agents.sh` installs the CLI and `scripts/test.sh`
//! exports `IAPEER_TEST_GEMINI_BIN`.

use crate::common;

use common::gemini::{
    composer_rows, is_compression, last_is_function_response, last_text, system_text,
    GeminiStandIn, Reply,
};
use common::TestEnv;
use serde_json::{json, Value};
use std::time::Duration;

/// Gemini CLI's busy sign (`08-busy`).
const BUSY: &str = "esc to cancel";

/// The Gemini CLI program, or `None` (the test says why and skips) when
/// `IAPEER_TEST_GEMINI_BIN` is not set.
pub(crate) fn gemini_bin() -> Option<String> {
    let bin = std::env::var("IAPEER_TEST_GEMINI_BIN").ok();
    if bin.is_none() {
        eprintln!(
            "skipped: IAPEER_TEST_GEMINI_BIN is not set (scripts/test.sh sets it; \
             scripts/setup-agents.sh installs Gemini CLI)"
        );
    }
    bin
}

/// The first message, the reply the model sends through `send_to_peer`, and the message on
/// the same topic after the peer slept.
const FIRST: &str = "hello gemini, remember the number 42";
const REPLY: &str = "hi from gemini";
const NEXT: &str = "what was the number?";

/// Wait until `identity` was put to sleep and shows asleep.
fn wait_asleep(env: &TestEnv, personality: &str) {
    env.wait_until(
        &format!("gemini-{personality} is put to sleep"),
        Duration::from_secs(60),
        |e| {
            e.has_event(
                "lifecycle",
                "supervise",
                &[
                    ("identity", &format!("gemini-{personality}")),
                    ("action", "reaped-idle"),
                ],
            ) && e.status_of(personality, "gemini") == "asleep"
        },
    );
}

/// The streamed turns whose last content holds `needle`.
fn turns_with(api: &GeminiStandIn, needle: &str) -> Vec<Value> {
    api.turns()
        .into_iter()
        .filter(|r| last_text(r).contains(needle))
        .collect()
}

/// The whole conversation a request carries, as text.
fn history(req: &Value) -> String {
    req["contents"].to_string()
}

/// A world with a gemini peer `gm` made by `iapeer create` and an echo peer `ea`, the
/// stand-in as gm's model API (its key and URL in gm's `launch.env`), and a daemon that puts
/// an idle agent to sleep within seconds. The user's own Gemini settings (an API-key login,
/// as `gemini`'s first run writes it) are there before iapeer merges its MCP entry in.
/// The model's script: a turn on [`FIRST`] calls `send_to_peer` to ea with [`REPLY`]; the
/// tool's result is answered "sent", anything else "noted".
fn reply_to_ea_on_first(api: &GeminiStandIn) {
    api.script(|req| {
        if last_is_function_response(req) {
            Reply::Text("sent".into())
        } else if last_text(req).contains(FIRST) {
            Reply::Call(
                "mcp_iapeer_send_to_peer".into(),
                json!({"personality": "ea", "message": REPLY}),
            )
        } else {
            Reply::Text("noted".into())
        }
    });
}

fn world(bin: &str) -> (TestEnv, GeminiStandIn) {
    world_with(bin, None)
}

/// [`world`], with the daemon (and the CLI) run with `IAPEER_BEARER_TOKEN=<bearer>` when given.
fn world_with(bin: &str, bearer: Option<&str>) -> (TestEnv, GeminiStandIn) {
    let mut env = TestEnv::new();
    if let Some(b) = bearer {
        env.set("IAPEER_BEARER_TOKEN", b);
    }
    env.set("IAPEER_IDLE_SECS", "4")
        .set("IAPEER_TICK_SECS", "1");
    let api = GeminiStandIn::start();
    add_peer(&mut env, bin, "gm", &api);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    (env, api)
}

/// Make a gemini peer `name` (before the daemon starts) run by `bin`, whose model API is
/// `api` (its key and URL in the peer's `launch.env`). The user's own Gemini settings (an
/// API-key login, as `gemini`'s first run writes it) are there before iapeer merges its MCP
/// entry in.
pub(crate) fn add_peer(env: &mut TestEnv, bin: &str, name: &str, api: &GeminiStandIn) {
    env.set("IAPEER_GEMINI_BIN", bin);
    let settings = env.home.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        json!({"security": {"auth": {"selectedType": "gemini-api-key"}},
               "privacy": {"usageStatisticsEnabled": false}})
        .to_string(),
    )
    .unwrap();
    env.ok(&["create", name, "--runtime", "gemini"]);
    env.launch_env(
        name,
        "gemini",
        &format!(
            "GEMINI_API_KEY=standin-key\nGOOGLE_GEMINI_BASE_URL={}\n",
            api.url()
        ),
    );
}

#[test]
fn gemini_peer_wakes_replies_through_mcp_takes_a_live_message_and_resumes_by_topic() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let started = std::time::Instant::now();
    let (env, api) = world(&bin);
    let settings = env.home.join(".gemini/settings.json");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(
        written["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
    assert_eq!(
        written["mcpServers"]["iapeer"]["headers"]["Authorization"],
        "Bearer ${IAPEER_TOKEN}"
    );

    api.script(|req| {
        let last = last_text(req);
        if last_is_function_response(req) {
            Reply::Text("sent".into())
        } else if last.contains("<msg>echo: ") {
            Reply::Text("echo seen".into())
        } else if last.contains(FIRST) {
            Reply::Call(
                "mcp_iapeer_send_to_peer".into(),
                json!({"personality": "ea", "message": REPLY, "topic": "t1"}),
            )
        } else {
            Reply::Text("noted".into())
        }
    });
    let send = |message: &str| env.send_on_topic("gm", "echo-ea", message, "t1");

    // Asleep: the send wakes it, and the wake is answered once Gemini took the message.
    assert_eq!(
        send(FIRST),
        "delivered to gm (gemini), woke",
        "{}",
        env.diagnostics()
    );
    env.wait_until(
        "the model gets the message",
        Duration::from_secs(60),
        |_| !turns_with(&api, FIRST).is_empty(),
    );
    let first = &turns_with(&api, FIRST)[0];
    let system = system_text(first);
    assert!(
        system.contains("personality: \"gm\"") && system.contains("## Known peers"),
        "the composed system prompt replaced Gemini's: {system}"
    );
    assert!(
        last_text(first).contains("<iap from=\"ea\" runtime=\"echo\""),
        "{}",
        last_text(first)
    );

    // The model's send_to_peer reaches ea over MCP with the session's token.
    env.wait_mcp_delivery("gemini-gm", "ea", Duration::from_secs(60));
    assert!(
        env.pane("echo-ea").contains(&format!("from gm: {REPLY}")),
        "{}",
        env.diagnostics()
    );

    // ea's echo is a second message, into the live session.
    env.wait_until(
        "ea's echo reaches the live gemini",
        Duration::from_secs(60),
        |e| {
            e.events("delivery", "delivery").iter().any(|d| {
                d["caller"] == "echo-ea"
                    && d["to"] == "gm"
                    && d["ok"] == "true"
                    && d["woke"] == "false"
            })
        },
    );
    env.wait_until("the model gets the echo", Duration::from_secs(60), |_| {
        !turns_with(&api, "<msg>echo: ").is_empty()
    });

    // Idle, it sleeps; the next message on the topic resumes the same conversation.
    wait_asleep(&env, "gm");
    assert_eq!(
        send(NEXT),
        "delivered to gm (gemini), woke",
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        crate::conversations::last_wake(&env, "gemini-gm"),
        ("resume".into(), "topic-match".into()),
        "{}",
        env.diagnostics()
    );
    env.wait_until(
        "the model gets the next message",
        Duration::from_secs(60),
        |_| !turns_with(&api, NEXT).is_empty(),
    );
    let next = &turns_with(&api, NEXT)[0];
    assert!(
        history(next).contains(FIRST),
        "the resumed conversation carries the first message: {}",
        history(next)
    );

    // Every message reached the model exactly once (an Enter pressed again never sent one
    // twice).
    for needle in [FIRST, "<msg>echo: ", NEXT] {
        assert_eq!(
            turns_with(&api, needle).len(),
            1,
            "{needle}: {}",
            env.diagnostics()
        );
    }
    for d in env.events("delivery", "delivery") {
        if d["to"] == "gm" {
            eprintln!("delivery to gm: woke={} ms={}", d["woke"], d["ms"]);
        }
    }
    eprintln!("gemini end to end: {:?}", started.elapsed());
}

/// With the daemon in bearer mode (`IAPEER_BEARER_TOKEN`, spec 02 §4) the user-level MCP
/// entry sends that bearer and the session token in `X-IAPeer-Token`, so the model's
/// `send_to_peer` still reaches its target (before: `Authorization: Bearer <session token>`,
/// refused).
#[test]
fn gemini_peer_reaches_a_peer_through_mcp_when_the_daemon_requires_a_bearer() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let started = std::time::Instant::now();
    let (env, api) = world_with(&bin, Some("gate-s3cret"));
    let settings = env.home.join(".gemini/settings.json");
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let headers = &written["mcpServers"]["iapeer"]["headers"];
    assert_eq!(headers["Authorization"], "Bearer ${IAPEER_BEARER_TOKEN}");
    assert_eq!(headers["X-IAPeer-Token"], "${IAPEER_TOKEN}");
    reply_to_ea_on_first(&api);
    env.send_from("gm", "echo-ea", FIRST);
    env.wait_mcp_delivery("gemini-gm", "ea", Duration::from_secs(60));
    eprintln!("gemini bearer end to end: {:?}", started.elapsed());
}

/// A message sent during a turn is answered `queued` by the runtime (Gemini CLI shows it under
/// `Queued (press ↑ to edit):`, `10-mid-turn-queued`) and reaches the model once, as a turn of
/// its own after the running one. Then `iapeer interrupt` presses Esc in a turn: Gemini CLI
/// cancels it at once (recorded: `21-busy-before-esc`, `22-after-esc`), and the peer takes
/// the next message.
#[test]
fn gemini_mid_turn_message_is_queued_and_a_turn_is_interrupted() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let (env, api) = world(&bin);
    api.script(|req| {
        if last_text(req).contains("take your time") {
            Reply::Hold(Duration::from_secs(60), "late".into())
        } else if last_text(req).contains("short hold") {
            Reply::Hold(Duration::from_secs(4), "held".into())
        } else {
            Reply::Text("ok".into())
        }
    });
    let send = |message: &str| env.send_from("gm", "echo-ea", message);
    // Woken first (a wake's first message has a ready gate), its turn over before the next.
    send("echo: wake up");
    env.wait_until("the wake's turn ends", Duration::from_secs(60), |e| {
        e.screen("gemini-gm").contains("✦ ok") && !e.screen("gemini-gm").contains(BUSY)
    });
    // A message into a running turn: queued by Gemini CLI, then its own turn, once.
    send("short hold");
    env.wait_until("gemini is mid-turn", Duration::from_secs(30), |e| {
        e.screen("gemini-gm").contains(BUSY)
    });
    let out = env.run(&[
        "send",
        "gm",
        "--from",
        "echo-ea",
        "--message",
        "MID-TURN one",
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", common::describe(&out)));
    assert_eq!(
        (&v["ok"], &v["queued"], &v["queuedBy"]),
        (&json!(true), &json!(true), &json!("runtime")),
        "{v}\n{}\n{}",
        env.screen("gemini-gm"),
        env.diagnostics()
    );
    env.wait_until("the queued message's turn", Duration::from_secs(30), |e| {
        !turns_with(&api, "MID-TURN one").is_empty() && !e.screen("gemini-gm").contains(BUSY)
    });
    assert_eq!(turns_with(&api, "MID-TURN one").len(), 1);

    send("take your time");
    env.wait_until("gemini is mid-turn", Duration::from_secs(30), |e| {
        e.screen("gemini-gm").contains(BUSY)
    });
    assert_eq!(env.ok(&["interrupt", "gm"]).trim(), "interrupted gemini-gm");
    env.wait_until("gemini stops the turn", Duration::from_secs(15), |e| {
        let s = e.screen("gemini-gm");
        !s.contains(BUSY) && s.contains("Request cancelled.")
    });
    assert_eq!(
        send("after the interrupt").trim(),
        "delivered to gm (gemini)",
        "{}",
        env.diagnostics()
    );
}

/// A user's own MCP server that takes seconds to start: Gemini CLI 0.61.0 does not take a
/// prompt until every configured server is discovered (`isMcpReady` in its composer; before,
/// it shows "Waiting for MCP servers to initialize... prompts will be queued." and keeps the
/// message in its queue), then submits the queue by itself. iapeer's own server is listed
/// first, so the wake's message meets that wait: it is the wake's delivery, answered
/// `delivered …, woke` once the session file has it, never `queued` (before: `queued for gm
/// (gemini) — runtime`, the answer a message into a running turn gets).
#[test]
fn a_gemini_wake_waiting_for_another_mcp_server_is_delivered_not_queued() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let python = std::env::var("IAPEER_TEST_PYTHON").expect("IAPEER_TEST_PYTHON");
    let (env, api) = world(&bin);
    let server = env.dir.path().join("slow_mcp.py");
    std::fs::write(
        &server,
        "import time\ntime.sleep(5)\n\
         from mcp.server.fastmcp import FastMCP\n\
         m = FastMCP('slow')\n\
         @m.tool()\ndef nothing() -> str:\n    return 'nothing'\n\
         m.run()\n",
    )
    .unwrap();
    let settings = env.home.join(".gemini/settings.json");
    let mut user: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    user["mcpServers"]["slow"] = json!({
        "command": python,
        "args": [server.to_string_lossy()],
        "trust": true,
    });
    std::fs::write(&settings, user.to_string()).unwrap();
    reply_to_ea_on_first(&api);
    let out = env.send_from("gm", "echo-ea", FIRST);
    assert_eq!(
        out.trim(),
        "delivered to gm (gemini), woke",
        "{}\n{}",
        env.screen("gemini-gm"),
        env.diagnostics()
    );
    env.wait_mcp_delivery("gemini-gm", "ea", Duration::from_secs(60));
    assert_eq!(turns_with(&api, FIRST).len(), 1, "{}", env.diagnostics());
}

/// A live Gemini CLI whose model API refuses one turn with 401 (not retried by Gemini CLI):
/// the daemon reads the refusal from the session file (its `error` record, recorded in
/// `tests/fixtures/gemini-cli-0.61.0/api-error-auth.session.jsonl`) at its next probe, logs
/// one `notice-raised` line (kind auth, status 401) and puts the notice on the board as for
/// Claude Code and Codex; later probes of the same refusal raise none, and a turn answered
/// afterwards clears it.
#[test]
fn a_gemini_peer_refused_by_its_api_raises_one_notice() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let mut env = TestEnv::new();
    env.set("IAPEER_TICK_SECS", "1")
        .set("IAPEER_SUPERVISE_LOG_VERBOSE", "1");
    let api = GeminiStandIn::start();
    add_peer(&mut env, &bin, "gm", &api);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    api.script(|req| {
        if last_text(req).contains("REFUSED") {
            Reply::Error(401)
        } else {
            Reply::Text("ok".into())
        }
    });
    let send = |message: &str| env.ok(&["send", "gm", "--from", "echo-ea", "--message", message]);
    let idle_after = |needle: &'static str| {
        move |e: &TestEnv| {
            let s = e.screen("gemini-gm");
            s.contains(needle) && !s.contains(BUSY)
        }
    };
    send("echo: wake up");
    env.wait_until(
        "the wake's turn ends",
        Duration::from_secs(60),
        idle_after("✦ ok"),
    );
    assert_eq!(env.count_events("lifecycle", "notice-raised", &[]), 0);

    send("REFUSED please");
    let raised = [
        ("identity", "gemini-gm"),
        ("kind", "auth"),
        ("error", "PERMISSION_DENIED"),
        ("status", "401"),
    ];
    let id = crate::notices::wait_one_notice(&env, &raised);
    let board = crate::fleet::get(&env, "/fleet/v1/notices").json();
    let notices = board["notices"].as_array().unwrap();
    assert_eq!(notices.len(), 1, "{board}");
    assert_eq!(notices[0]["identity"], "gemini-gm");
    assert_eq!(notices[0]["kind"], "auth");

    send("fine now");
    env.wait_until("the turn after the refusal", Duration::from_secs(60), |e| {
        api.has_turn_with("fine now") && idle_after("✦ ok")(e)
    });
    let cleared = [("id", id.as_str()), ("reason", "answered")];
    env.wait_until("the notice cleared", Duration::from_secs(30), |e| {
        e.has_event("lifecycle", "notice-cleared", &cleared)
    });
    assert_eq!(env.count_events("lifecycle", "notice-raised", &[]), 1);
}

/// A gemini peer `gm` and an echo peer `ea`, the daemon holding its answers to terminal
/// queries `late_ms` (`late-query-answers`), the model answering "noted".
/// Whether Gemini CLI's late terminal answers show in `gm`'s composer.
fn late_answers_shown(e: &TestEnv) -> bool {
    composer_rows(&e.screen("gemini-gm"))
        .iter()
        .any(|r| r.contains(">|iapeer("))
}

/// What a command wrote, its output then its errors, each trimmed.
fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

fn late_answers_world(bin: &str, late_ms: u64) -> (TestEnv, GeminiStandIn) {
    let mut env = TestEnv::new();
    env.set("IAPEER_TEST_HOOK", &format!("late-query-answers:{late_ms}"))
        .set("IAPEER_BOOT_DEADLINE_SECS", "90");
    let api = GeminiStandIn::start();
    add_peer(&mut env, bin, "gm", &api);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    api.script(|_| Reply::Text("noted".into()));
    (env, api)
}

/// The answers to Gemini CLI's terminal queries come late (the daemon's test hook
/// `late-query-answers`, 1.2 s: after Gemini CLI's 1 s wait for them, as on a loaded machine)
/// and land in its composer as typed text (`late-answers.txt`): the boot clears them, the
/// peer becomes ready, and the first message is delivered once and confirmed. (Before the
/// boot knew that text, it waited for an empty composer until its deadline.) The hold was
/// 2 s until a quiet machine made Gemini ready ~3.2 s after its wake: the answers then came
/// during its first turn, which draws nothing of them until it ends, and the boot had
/// nothing to clear (the test's first check failed, the old code's too); 1.2 s lands them
/// before ready quiet and at load 4.5 alike.
#[test]
fn gemini_peer_boots_when_its_terminal_answers_come_late() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let (env, api) = late_answers_world(&bin, 1200);

    // Answered once Gemini CLI's session file holds the message (the delivery confirmed).
    let sent = env.run(&["send", "gm", "--from", "echo-ea", "--message", FIRST]);
    let pane = env.pane("gemini-gm");
    assert!(
        pane.contains(">|iapeer("),
        "the late answers reached the composer (else the hook did nothing): {}",
        env.diagnostics()
    );
    assert_eq!(
        String::from_utf8_lossy(&sent.stdout).trim(),
        "delivered to gm (gemini), woke",
        "{}\n{}",
        String::from_utf8_lossy(&sent.stderr),
        env.diagnostics()
    );
    env.wait_until(
        "the model gets the message",
        Duration::from_secs(60),
        |_| !turns_with(&api, FIRST).is_empty(),
    );
    assert_eq!(turns_with(&api, FIRST).len(), 1, "{}", env.diagnostics());
}

/// The answers to Gemini CLI's terminal queries come after its ready screen and after the
/// first delivery (`late-query-answers`, 30 s: recorded at load average 15-16, Gemini CLI was
/// ready 12.5-14 s after its start and its first turn done after 25 s, with two Enters 10 s
/// apart where the daemon presses again every 400 ms; the queries go out after its start, so
/// the answers come 30 s after that, past the first delivery with some 10 s to spare). They
/// land in the idle composer (`late-30000ms-after-ready-idle`): the next message is not held
/// behind them as behind a human's draft (before, it was answered `queued … composer` and
/// waited for a composer that no one would clear), they are cleared with Ctrl-C and the
/// message is delivered once and confirmed, with nothing of them in it.
#[test]
fn gemini_peer_takes_the_next_message_when_its_terminal_answers_come_after_ready() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let (env, api) = late_answers_world(&bin, 30_000);
    let send =
        |message: &str| said(&env.run(&["send", "gm", "--from", "echo-ea", "--message", message]));

    assert_eq!(
        send(FIRST),
        "delivered to gm (gemini), woke",
        "{}",
        env.diagnostics()
    );
    assert!(
        !late_answers_shown(&env),
        "the answers came before the first delivery ended (a slower boot than measured): \
         this test needs a later `late-query-answers`\n{}",
        env.screen("gemini-gm")
    );
    env.wait_until(
        "the late answers land in the composer",
        Duration::from_secs(60),
        late_answers_shown,
    );
    const SECOND: &str = "SECOND message after the late answers";
    assert_eq!(
        send(SECOND),
        "delivered to gm (gemini)",
        "{}\n{}",
        env.screen("gemini-gm"),
        env.diagnostics()
    );
    env.wait_until(
        "the model gets the second message",
        Duration::from_secs(60),
        |_| !turns_with(&api, SECOND).is_empty(),
    );
    let turns = turns_with(&api, SECOND);
    assert_eq!(turns.len(), 1, "{}", env.diagnostics());
    let text = last_text(&turns[0]);
    assert!(
        !text.contains("iapeer(") && !text.contains("62;22c"),
        "{text}"
    );
    assert_eq!(turns_with(&api, FIRST).len(), 1, "{}", env.diagnostics());
    assert!(!late_answers_shown(&env), "{}", env.screen("gemini-gm"));
}

/// The same late answers in the idle composer (`late-30000ms-after-ready-idle-landed`) and
/// then `iapeer compact`: they are no draft, so compact is not refused for one (before, it
/// answered `the composer holds a draft ("0u>|iapeer(0.1.0)62;22c…")`); they are cleared with
/// the delivery's paced Ctrl-C, and `/compress` is typed alone and runs (its summary
/// requests reach the model).
#[test]
fn gemini_peer_compacts_when_its_terminal_answers_come_after_ready() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let (env, api) = late_answers_world(&bin, 30_000);
    assert_eq!(
        env.send_from("gm", "echo-ea", FIRST).trim(),
        "delivered to gm (gemini), woke",
        "{}",
        env.diagnostics()
    );
    env.wait_until(
        "the late answers land in the composer",
        Duration::from_secs(60),
        late_answers_shown,
    );
    let said = said(&env.run(&["compact", "gm"]));
    assert!(!said.contains("draft"), "{said}");
    assert_eq!(
        said,
        "gemini-gm: compacted",
        "{}\n{}",
        env.screen("gemini-gm"),
        env.diagnostics()
    );
    assert!(
        api.recorded().iter().any(|r| is_compression(&r.body)),
        "`/compress` ran"
    );
    assert!(!late_answers_shown(&env), "{}", env.screen("gemini-gm"));
}

/// `iapeer compact` on a gemini peer: Gemini CLI's `/compress` runs (its two summary
/// requests reach the model), `compacted` is answered from its record and screen, and the
/// next message is delivered into the compacted conversation (its request carries the
/// summary). A refused summary request makes `compact` fail with Gemini CLI's words.
#[test]
fn a_gemini_peer_compacts_and_takes_a_message_after() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let mut env = TestEnv::new();
    let api = GeminiStandIn::start();
    add_peer(&mut env, &bin, "gm", &api);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    let send = |message: &str| env.send_from("gm", "echo-ea", message);
    for n in 1..=4 {
        send(&format!(
            "TURN {n}: remember that item {n} is colour number {n}0"
        ));
    }
    env.wait_until("the four turns end", Duration::from_secs(60), |e| {
        let s = e.screen("gemini-gm");
        s.matches("✦ ok").count() >= 4 && !s.contains(BUSY)
    });
    assert_eq!(
        env.ok(&["compact", "gm"]).trim(),
        "gemini-gm: compacted",
        "{}",
        env.screen("gemini-gm")
    );
    let summaries = || {
        api.recorded()
            .into_iter()
            .filter(|r| is_compression(&r.body))
            .count()
    };
    assert_eq!(summaries(), 2, "the summary and its critique were asked");
    assert_eq!(
        send("AFTER the compaction").trim(),
        "delivered to gm (gemini)",
        "{}",
        env.diagnostics()
    );
    env.wait_until(
        "the turn after reaches the model",
        Duration::from_secs(60),
        |_| !turns_with(&api, "AFTER the compaction").is_empty(),
    );
    let after = turns_with(&api, "AFTER the compaction");
    let history = history(&after[0]);
    assert!(
        history.contains("Stand-in summary") && !history.contains("TURN 1"),
        "the turn after runs on the summary: {history}"
    );
    env.wait_until("the turn after ends", Duration::from_secs(60), |e| {
        !e.screen("gemini-gm").contains(BUSY)
    });

    // A refused summary request: compact fails with what Gemini CLI said.
    api.script(|req| {
        if is_compression(req) {
            Reply::Error(400)
        } else {
            Reply::Text("ok".into())
        }
    });
    let (_, err) = env.fails(&["compact", "gm"], 1);
    assert!(
        err.contains("could not compact: Failed to compress chat history"),
        "{err}"
    );
}

/// Issue 27: Gemini CLI 0.61's fetch gives up on a response whose headers take over 60 s
/// (undici `headersTimeout`), and a `send_to_peer` that wakes a slow peer is held longer.
/// Here ea (echo) takes 65 s to boot, so gm's call waits over 60 s; the daemon answers it
/// as an event stream whose head goes out at once, and Gemini gets the tool's result (the
/// model's next request carries it, and the session file has no `MCP ERROR`). Before the
/// event-stream answer Gemini's call failed with "fetch failed" at 60 s.
#[test]
fn a_gemini_send_to_peer_that_waits_over_60_s_for_a_slow_wake_succeeds() {
    let Some(bin) = gemini_bin() else {
        return;
    };
    let started = std::time::Instant::now();
    let mut env = TestEnv::new();
    let api = GeminiStandIn::start();
    add_peer(&mut env, &bin, "gm", &api);
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.launch_env("ea", "echo", common::agents::SLOW_BOOT_ENV);
    env.start_daemon();
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(env.home.join(".gemini/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(written["mcpServers"]["iapeer"]["timeout"], 330_000);
    reply_to_ea_on_first(&api);
    env.send_from("gm", "echo-ea", FIRST);
    env.wait_until(
        "the model asks for send_to_peer",
        Duration::from_secs(90),
        |_| !turns_with(&api, FIRST).is_empty(),
    );
    let called = std::time::Instant::now();
    let result = || {
        api.turns()
            .into_iter()
            .find(last_is_function_response)
            .map(|r| {
                r["contents"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()
                    .to_string()
            })
            .map(|r| r.replace("fetch failed", "timed out"))
    };
    let waited = env.assert_slow_send_result("gemini", called, result);
    let delivered = env.events("delivery", "delivery");
    let line = delivered
        .iter()
        .find(|d| d["caller"] == "gemini-gm" && d["to"] == "ea")
        .unwrap_or_else(|| panic!("no delivery to ea\n{}", env.diagnostics()));
    assert_eq!(
        (line["ok"].as_str(), line["woke"].as_str()),
        ("true", "true")
    );
    assert!(
        env.log("daemon")
            .contains("answer goes on as an event stream"),
        "{}",
        env.diagnostics()
    );
    // Gemini's own record of the call: the result, not `MCP ERROR`.
    env.wait_until("gm's turn ends", Duration::from_secs(60), |_| {
        api.turns().len() >= 2
    });
    let sessions: Vec<String> =
        common::pty_record::files_under(&env.home.join(".gemini/tmp"), |_| false)
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("/chats/"))
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect();
    assert!(!sessions.is_empty(), "no Gemini session file");
    let all = sessions.join("\n");
    assert!(!all.contains("MCP ERROR"), "{all}");
    assert!(all.contains("delivered_to"), "{all}");
    eprintln!(
        "gemini slow send: held {waited:?}, whole test {:?}",
        started.elapsed()
    );
}

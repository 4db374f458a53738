//! A mixed team works (issue 27 item 4): one conversation goes claude → codex → gemini →
//! opencode → a manifest agent → back to claude, each hop through the agent's own
//! `send_to_peer` MCP call, with the four real CLIs against the loopback model stand-ins the
//! other tests use (`common::anthropic`, `common::openai`, `common::gemini`,
//! `common::openai_chat`: the model APIs are the one mock, a cloud API cannot run here), and
//! the terminal agent `parrot` installed from its `runtime.json` (`common::terminal_agent`,
//! its own MCP client). Each stand-in is scripted to call `send_to_peer` to the next member
//! when it sees the hop's message; parrot passes what it hears on (`PARROT_REPLY_TO`), as
//! `parrot heard: <message>` ([`hop_text`]).
//!
//! Rounds on one topic: every member asleep (each hop wakes it), then every member live; and
//! in a second world whose daemon puts idle members to sleep within seconds, every member
//! resumed by the topic (`mode=resume cause=topic-match`). Two tests, so they run side by
//! side: a live round needs an idle time longer than a round of wakes (OpenCode alone boots
//! in 15–40 s here), a resumed one a short idle time. Each hop reaches its model exactly once
//! and is confirmed in delivery.log, and the last one is back at the start.
//!
//! The team is a list ([`TEAM`] and [`member`]): a member of another runtime is one row
//! there and one arm in [`member`] that starts its stand-in and scripts it with
//! [`next_hop`].

use crate::common;

use common::TestEnv;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The team in conversation order, (peer, runtime): the test's message goes to the first,
/// each member passes it to the next, the last back to the first.
const TEAM: [(&str, &str); 5] = [
    ("cb", "claude"),
    ("cx", "codex"),
    ("gm", "gemini"),
    ("oc", "opencode"),
    ("pa", common::terminal_agent::RUNTIME),
];

/// The conversation's topic: every hop carries it.
const TOPIC: &str = "mixed";

/// How long one hop may take (a wake of OpenCode under load included).
const HOP: Duration = Duration::from_secs(150);

/// The text of hop `k` of round `round` (hop 0 is the test's message to the first member).
fn tag(round: usize, k: usize) -> String {
    format!("MIXED-r{round}-k{k}.")
}

/// The message of hop `k` of round `round`: its [`tag`], or after the manifest agent (which
/// has no model to script) what it says of the hop it heard, `parrot heard: <tag of k - 1>`.
/// Parrot is the last member: the member after it is the first, where the round ends
/// whatever the tag says ([`next_hop`] of an earlier hop's tag is nothing there).
fn hop_text(round: usize, k: usize) -> String {
    let after_parrot = k > 0 && TEAM[(k - 1) % TEAM.len()].1 == common::terminal_agent::RUNTIME;
    match after_parrot {
        true => format!("parrot heard: {}", tag(round, k - 1)),
        false => tag(round, k),
    }
}

/// The round and hop of the last [`tag`] in `text` (the newest message, when a turn holds
/// two).
fn parse_tag(text: &str) -> Option<(usize, usize)> {
    let rest = &text[text.rfind("MIXED-r")? + "MIXED-r".len()..];
    let (round, rest) = rest.split_once("-k")?;
    let k = rest.split('.').next()?;
    Some((round.parse().ok()?, k.parse().ok()?))
}

/// What the model of member `me` does with a turn whose newest input is `text` (pure): when
/// it holds hop `k` addressed to `me` and the conversation is not back at the start yet,
/// `send_to_peer` hop `k + 1` to the next member: `Some((to, message))`.
fn next_hop(team: &[&str], me: &str, text: &str) -> Option<(String, String)> {
    let (round, k) = parse_tag(text)?;
    let n = team.len();
    (k < n && team[k % n] == me).then(|| (team[(k + 1) % n].to_string(), tag(round, k + 1)))
}

/// The text of the user messages after the request's last assistant message (a Chat
/// Completions request): its new input, empty for a request that answers a tool call. (Not
/// only the last message: OpenCode may put another after it in a resumed session.)
fn new_user_text(req: &Value) -> String {
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    let start = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .map_or(0, |i| i + 1);
    messages[start..]
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| common::anthropic::flatten(&m["content"]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `send_to_peer`'s arguments for a hop.
fn hop_args(to: &str, message: &str) -> Value {
    json!({"personality": to, "message": message, "topic": TOPIC})
}

/// What one member's model does with the hops it sees: [`next_hop`], once per hop (a CLI may
/// show the model a message again, folded into a later turn: Claude Code puts a message that
/// came after a tool call into the tool result's turn).
struct Hops {
    team: Arc<Vec<&'static str>>,
    me: &'static str,
    passed: Mutex<HashSet<String>>,
}

impl Hops {
    fn new(team: Arc<Vec<&'static str>>, me: &'static str) -> Arc<Hops> {
        Arc::new(Hops {
            team,
            me,
            passed: Mutex::new(HashSet::new()),
        })
    }

    /// The hop to pass on for model request `req` whose new input is `text`: only a turn's
    /// request (one that offers tools; a CLI's side requests — Claude Code's and Gemini CLI's
    /// small questions, OpenCode's session title — carry the message too), and only once.
    fn next(&self, req: &Value, text: &str) -> Option<(String, String)> {
        let turn = req["tools"].as_array().is_some_and(|t| !t.is_empty());
        next_hop(&self.team, self.me, text)
            .filter(|(_, m)| turn && self.passed.lock().unwrap().insert(m.clone()))
    }
}

/// The turn requests of a member's stand-in whose new input holds a needle.
type TurnsWith = Box<dyn Fn(&str) -> Vec<Value>>;

/// A member's stand-in, read: [`TurnsWith`], and the newest turn's whole conversation as
/// JSON text. (The closures own the stand-in, which lives as long as the member.)
type Reads = (TurnsWith, Box<dyn Fn() -> String>);

/// One member: its peer, runtime and [`Reads`].
struct Member {
    name: &'static str,
    runtime: &'static str,
    turns_with: TurnsWith,
    history: Box<dyn Fn() -> String>,
}

impl Member {
    fn identity(&self) -> String {
        format!("{}-{}", self.runtime, self.name)
    }
}

/// [`Reads`] of a stand-in whose turn requests `turns()` lists, by `input` (a request's new
/// input as text) and `conversation` (the part of a request holding the conversation).
fn reads<A: Send + Sync + 'static>(
    api: A,
    turns: fn(&A) -> Vec<Value>,
    input: fn(&Value) -> String,
    conversation: &'static str,
) -> Reads {
    let api = Arc::new(api);
    let api2 = api.clone();
    (
        Box::new(move |needle| {
            turns(&api)
                .into_iter()
                .filter(|r| input(r).contains(needle))
                .collect()
        }),
        Box::new(move || {
            turns(&api2)
                .last()
                .map(|r| r[conversation].to_string())
                .unwrap_or_default()
        }),
    )
}

/// [`Reads`] of the parrot in peer folder `dir`: the messages it logged holding a needle,
/// each with the whole conversation file it was recorded in, and its newest conversation.
fn parrot_reads(dir: std::path::PathBuf) -> Reads {
    let state = dir.join(".parrot");
    let conversation = move |state: &std::path::Path, id: &str| {
        std::fs::read_to_string(state.join("conversations").join(format!("{id}.jsonl")))
            .unwrap_or_default()
    };
    let messages = move |state: &std::path::Path| -> Vec<Value> {
        std::fs::read_to_string(state.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["ev"] == "message")
            .collect()
    };
    let state2 = state.clone();
    (
        Box::new(move |needle| {
            messages(&state)
                .into_iter()
                .filter(|e| e["body"].as_str().unwrap_or_default().contains(needle))
                .map(|e| {
                    let id = e["conversation"].as_str().unwrap_or_default().to_string();
                    json!({"message": e, "conversation": conversation(&state, &id)})
                })
                .collect()
        }),
        Box::new(move || {
            messages(&state2)
                .last()
                .map(|e| conversation(&state2, e["conversation"].as_str().unwrap_or_default()))
                .unwrap_or_default()
        }),
    )
}

/// Make the member `(name, runtime)` (before the daemon starts): its model stand-in, scripted
/// to pass each hop on to the next member of `team`, and its peer.
fn member(env: &mut TestEnv, gemini: &str, team: Arc<Vec<&'static str>>, i: usize) -> Member {
    let (name, runtime) = TEAM[i];
    let next = team[(i + 1) % team.len()];
    let hops = Hops::new(team, name);
    let (turns_with, history) = match runtime {
        "claude" => {
            use common::anthropic::{has_tool_result, last_user_text, AnthropicStandIn, Reply};
            let api = AnthropicStandIn::start();
            crate::claude::add_peer(env, name, &api, true);
            api.script(move |req| match hops.next(req, &last_user_text(req)) {
                Some((to, m)) => {
                    Reply::ToolUse("mcp__iapeer__send_to_peer".into(), hop_args(&to, &m))
                }
                None if has_tool_result(req) => Reply::Text("sent".into()),
                None => Reply::Text("ok".into()),
            });
            reads(
                api,
                AnthropicStandIn::main_requests,
                last_user_text,
                "messages",
            )
        }
        "codex" => {
            use common::openai::{last_input_text, last_is_tool_output, OpenAiStandIn, Reply};
            let api = OpenAiStandIn::start();
            crate::codex::add_peer(env, name, &api);
            api.script(move |req| match hops.next(req, &last_input_text(req)) {
                Some((to, m)) => Reply::Call(
                    "mcp__iapeer".into(),
                    "send_to_peer".into(),
                    hop_args(&to, &m),
                ),
                None if last_is_tool_output(req) => Reply::Text("sent".into()),
                None => Reply::Text("ok".into()),
            });
            let turns = |api: &OpenAiStandIn| {
                api.recorded()
                    .into_iter()
                    .filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
                    .collect()
            };
            reads(api, turns, last_input_text, "input")
        }
        "gemini" => {
            use common::gemini::{last_is_function_response, last_text, GeminiStandIn, Reply};
            let api = GeminiStandIn::start();
            crate::gemini_e2e::add_peer(env, gemini, name, &api);
            api.script(move |req| match hops.next(req, &last_text(req)) {
                Some((to, m)) => Reply::Call("mcp_iapeer_send_to_peer".into(), hop_args(&to, &m)),
                None if last_is_function_response(req) => Reply::Text("sent".into()),
                None => Reply::Text("ok".into()),
            });
            reads(api, GeminiStandIn::turns, last_text, "contents")
        }
        "opencode" => {
            use common::openai_chat::{last_is_tool_result, ChatStandIn, Reply};
            let api = ChatStandIn::start();
            crate::opencode_peer::add_peer(env, name, &api);
            api.script(move |req| match hops.next(req, &new_user_text(req)) {
                Some((to, m)) => Reply::Call("iapeer_send_to_peer".into(), hop_args(&to, &m)),
                None if last_is_tool_result(req) => Reply::Text("sent".into()),
                None => Reply::Text("ok".into()),
            });
            reads(api, ChatStandIn::turns, new_user_text, "messages")
        }
        common::terminal_agent::RUNTIME => {
            let python = std::env::var("IAPEER_TEST_PYTHON").expect("IAPEER_TEST_PYTHON");
            common::terminal_agent::install(env, &python);
            env.ok(&["create", name, "--runtime", runtime]);
            env.launch_env(name, runtime, &format!("PARROT_REPLY_TO={next}\n"));
            parrot_reads(env.peer_dir(name))
        }
        other => panic!("no stand-in for runtime {other}"),
    };
    Member {
        name,
        runtime,
        turns_with,
        history,
    }
}

/// The `delivery` lines of delivery.log after the first `skip`.
fn deliveries_after(env: &TestEnv, skip: usize) -> Vec<std::collections::HashMap<String, String>> {
    env.events("delivery", "delivery")
        .into_iter()
        .skip(skip)
        .collect()
}

/// Who sends hop `k`: the test (as the echo peer `ea`) for hop 0, else the member before.
fn caller(team: &[Member], k: usize) -> String {
    match k {
        0 => "echo-ea".to_string(),
        _ => team[(k - 1) % team.len()].identity(),
    }
}

/// One round: the test sends hop 0 to the first member, each member's model passes it on,
/// the last hop reaches the first member's model. Each hop is waited for at its model, then
/// checked in delivery.log: exactly one delivery from its sender to its member, confirmed
/// (or queued by the runtime and confirmed by its follow-up line), which woke the member or
/// found it live as `woke(k)` says (`None`: either). Returns the round's time.
fn round(
    env: &TestEnv,
    team: &[Member],
    r: usize,
    woke: impl Fn(usize) -> Option<bool>,
) -> Duration {
    let started = Instant::now();
    let n = team.len();
    let before = env.events("delivery", "delivery").len();
    let first = &team[0];
    // The last round's last turn is over: this round's first message is a turn of its own.
    env.wait_turn_over(&first.identity());
    let out = env.ok(&[
        "send",
        first.name,
        "--from",
        "echo-ea",
        "--message",
        &tag(r, 0),
        "--topic",
        TOPIC,
    ]);
    let said = if woke(0) == Some(true) { ", woke" } else { "" };
    assert_eq!(
        out.trim(),
        format!("delivered to {} ({}){said}", first.name, first.runtime),
        "{}",
        env.diagnostics()
    );
    for k in 0..=n {
        let m = &team[k % n];
        let t = hop_text(r, k);
        if !common::poll(HOP, || !(m.turns_with)(&t).is_empty()) {
            let all = (m.turns_with)("");
            let tail: Vec<String> = all.iter().rev().take(3).map(Value::to_string).collect();
            panic!(
                "round {r} hop {k} ({t}) did not reach {}'s model within {HOP:?}; its last \
                 requests (newest first):\n{}\n{}",
                m.identity(),
                tail.join("\n"),
                env.diagnostics()
            );
        }
        eprintln!(
            "mixed team: round {r} hop {k} at {} after {:?}",
            m.identity(),
            started.elapsed()
        );
    }
    env.wait_until(
        &format!("round {r}'s {} deliveries are in delivery.log", n + 1),
        HOP,
        |e| deliveries_after(e, before).len() > n,
    );
    let lines = deliveries_after(env, before);
    for k in 0..=n {
        let (from, to) = (caller(team, k), team[k % n].name);
        let hop: Vec<_> = lines
            .iter()
            .filter(|d| d["caller"] == from && d["to"] == to)
            .collect();
        assert_eq!(
            hop.len(),
            1,
            "round {r} hop {k}, {from} → {to}: one delivery: {lines:?}\n{}",
            env.diagnostics()
        );
        let d = hop[0];
        assert_eq!(d["ok"], "true", "round {r} hop {k}, {from} → {to}: {d:?}");
        if d.get("queued").is_some() {
            // Taken into the runtime's own queue (Gemini CLI queues a message that comes
            // while it is still starting): confirmed by the follow-up line once it reached
            // the model.
            env.wait_until(
                &format!("round {r} hop {k}, {from} → {to}: its follow-up says delivered"),
                HOP,
                |e| {
                    e.has_event(
                        "delivery",
                        "delivery-followup",
                        &[
                            ("msgid", &d["msgid"]),
                            ("outcome", "delivered"),
                            ("ok", "true"),
                        ],
                    )
                },
            );
        }
        if let Some(w) = woke(k) {
            assert_eq!(
                d["woke"],
                w.to_string(),
                "round {r} hop {k}, {from} → {to}: woke={w}: {d:?}"
            );
        }
    }
    assert_eq!(
        lines.len(),
        n + 1,
        "round {r}: nothing else was sent: {lines:?}"
    );
    eprintln!("mixed team: round {r} took {:?}", started.elapsed());
    started.elapsed()
}

/// Every hop of rounds `1..=rounds` reached its member's model exactly once: the member's
/// newest turn carries the conversation, which holds the hop once (the member's own
/// `send_to_peer` calls carry the next hop, another text).
fn each_hop_once(team: &[Member], rounds: usize) {
    let n = team.len();
    for r in 1..=rounds {
        for k in 0..=n {
            let m = &team[k % n];
            let t = hop_text(r, k);
            let history = (m.history)();
            assert_eq!(
                history.matches(&t).count(),
                1,
                "{t} is in {}'s conversation once: {history}",
                m.identity()
            );
        }
    }
}

/// A world with the [`TEAM`] (every member asleep), an echo peer `ea` the test sends as, and
/// a daemon that puts a member to sleep after `idle_secs` idle; `None` without Gemini CLI.
fn world(idle_secs: &str) -> Option<(TestEnv, Vec<Member>)> {
    let gemini = crate::gemini_e2e::gemini_bin()?;
    let mut env = TestEnv::new();
    env.set("IAPEER_IDLE_SECS", idle_secs)
        .set("IAPEER_TICK_SECS", "1");
    let names = Arc::new(TEAM.iter().map(|(name, _)| *name).collect::<Vec<_>>());
    let team: Vec<Member> = (0..TEAM.len())
        .map(|i| member(&mut env, &gemini, names.clone(), i))
        .collect();
    env.ok(&["create", "ea", "--runtime", "echo"]);
    env.start_daemon();
    for m in &team {
        assert_eq!(env.status_of(m.name, m.runtime), "asleep");
    }
    Some((env, team))
}

/// Round 1: every member asleep, each hop wakes its member (the last finds the first live).
/// Round 2: every member live. (The daemon puts nobody to sleep in between.)
#[test]
fn a_conversation_goes_round_a_mixed_team_woken_then_live() {
    let started = Instant::now();
    let Some((env, team)) = world("3600") else {
        return;
    };
    let n = team.len();
    round(&env, &team, 1, |k| Some(k < n));
    round(&env, &team, 2, |_| Some(false));
    each_hop_once(&team, 2);
    eprintln!("mixed team, woken then live: {:?}", started.elapsed());
}

/// Members put to sleep idle within seconds: after round 1 (every hop wakes its member) each
/// is asleep, and round 2 on the same topic resumes each member's own conversation (`wake
/// mode=resume cause=topic-match`; its model gets its round-1 hop again in the history).
#[test]
fn a_mixed_team_resumes_its_conversations_by_topic_after_idle_sleep() {
    let started = Instant::now();
    let Some((env, team)) = world("8") else {
        return;
    };
    let n = team.len();
    // The last hop finds the first member asleep again or not yet (idle 8 s against a round
    // of wakes): either.
    round(&env, &team, 1, |k| (k < n).then_some(true));
    for m in &team {
        crate::conversations::wait_asleep(&env, &m.identity());
    }
    let wakes_before = env.events("lifecycle", "wake").len();
    round(&env, &team, 2, |k| (k < n).then_some(true));
    let wakes: Vec<_> = env
        .events("lifecycle", "wake")
        .into_iter()
        .skip(wakes_before)
        .collect();
    for (k, m) in team.iter().enumerate() {
        let own: Vec<_> = wakes
            .iter()
            .filter(|w| w["identity"] == m.identity())
            .collect();
        assert!(
            !own.is_empty()
                && own
                    .iter()
                    .all(|w| (w["mode"].as_str(), w["cause"].as_str()) == ("resume", "topic-match")),
            "{} resumed by the topic: {own:?}\n{}",
            m.identity(),
            env.diagnostics()
        );
        let resumed = &(m.turns_with)(&hop_text(2, k))[0];
        assert!(
            resumed.to_string().contains(&hop_text(1, k)),
            "{}'s resumed conversation carries its round-1 hop: its first turn of round 2 \
             was {resumed}\n{}",
            m.identity(),
            env.diagnostics()
        );
    }
    each_hop_once(&team, 2);
    eprintln!("mixed team, resumed by topic: {:?}", started.elapsed());
}

#[test]
fn each_member_passes_its_hop_to_the_next_and_the_last_ends_at_the_start() {
    let team = ["a", "b", "c"];
    assert_eq!(
        next_hop(&team, "a", "<msg>MIXED-r1-k0.</msg>"),
        Some(("b".into(), tag(1, 1)))
    );
    assert_eq!(
        next_hop(&team, "c", &tag(2, 2)),
        Some(("a".into(), tag(2, 3)))
    );
    // Back at the start: the conversation ends there.
    assert_eq!(next_hop(&team, "a", &tag(2, 3)), None);
    // A hop addressed to another member, or no hop at all: nothing is sent.
    assert_eq!(next_hop(&team, "b", &tag(1, 0)), None);
    assert_eq!(next_hop(&team, "a", "hello"), None);
    assert_eq!(parse_tag("x MIXED-r12-k3. y"), Some((12, 3)));
    assert_eq!(parse_tag("MIXED-r1-k4. then MIXED-r2-k0."), Some((2, 0)));
}

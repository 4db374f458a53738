//! Deliveries to a busy agent (issue 7 item 1; spec 03 §1 step 9): a message pasted while
//! the agent is mid-turn goes into the runtime's own input queue. The sender is answered
//! `queued` (`queuedBy: "runtime"`) at once, never a false "NOT delivered"; the daemon
//! follows the message to the model (`delivery-followup` lines) and tells the sender when it
//! is lost instead. With the real CLIs against the model stand-ins.

use crate::common;

use common::anthropic::{last_user_text, Reply};
use common::TestEnv;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Every line of every `*.jsonl` file under `dir` (recursively), as written.
pub(crate) fn jsonl_lines(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(jsonl_lines(&p));
        } else if p.extension().is_some_and(|x| x == "jsonl") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            out.extend(text.lines().map(str::to_string));
        }
    }
    out
}

/// Every `*.jsonl` record under `dir` (recursively).
pub(crate) fn records(dir: &std::path::Path) -> Vec<Value> {
    jsonl_lines(dir)
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A field of a parsed log line ("" when absent).
fn f<'a>(d: &'a std::collections::HashMap<String, String>, k: &str) -> &'a str {
    d.get(k).map(String::as_str).unwrap_or("")
}

/// The confirmation grace of the rounds of sends into held turns: twenty pastes into a busy
/// Claude Code or Codex, with another real agent CLI booting beside it on two cores (CI), can take
/// more than the default 4 s to show in its transcript; what these tests check is how each
/// message is answered (delivered or queued, and followed), not how fast.
const BUSY_GRACE: (&str, &str) = ("IAP_HOST_LIVENESS_GRACE_MS", "10000");

/// `iapeer send <to> --json` from echo-ea; the parsed answer (exit status checked by the
/// caller through `ok`).
pub(crate) fn send_json(env: &TestEnv, to: &str, message: &str) -> (bool, Value, Duration) {
    let t = Instant::now();
    let out = env.run(&[
        "send",
        to,
        "--from",
        "echo-ea",
        "--message",
        message,
        "--topic",
        "t",
        "--json",
    ]);
    let took = t.elapsed();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), v, took)
}

/// Wake the claude peer with a first message. Under load Claude Code 2.1.332 sometimes
/// writes the first turn of a fresh session to its transcript more than 4 s after the
/// paste (seen here with two Claude boots on a loaded 2-core machine; not this issue's
/// subject): such a wake reports "no confirmation" though the session is up, so this setup
/// step waits for the answer instead of trusting the exit status.
pub(crate) fn wake_claude(env: &TestEnv) {
    let out = env.run(&["send", "cb", "--from", "echo-ea", "--message", "hello"]);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no confirmation"),
            "{}",
            common::describe(&out)
        );
        eprintln!("setup: the wake reported {err}");
    }
    env.wait_until("the first answer", Duration::from_secs(60), |e| {
        let s = e.screen("claude-cb");
        s.contains("● ok") && !s.contains("esc to interrupt")
    });
}

/// Wait (30 s at most) until the live echo peer `sender` shows a message from `iapeer` about
/// its message to `to` (`<personality> (<runtime>)`) that says `phrase`.
pub(crate) fn told_by_iapeer(env: &TestEnv, sender: &str, to: &str, phrase: &str) {
    let about = format!("from iapeer: Your message to {to}");
    env.wait_until(
        "the sender is told by iapeer",
        Duration::from_secs(30),
        |e| {
            let pane = e.pane(sender);
            pane.contains(&about) && pane.contains(phrase)
        },
    );
}

/// Wait (60 s at most) until `identity`'s screen shows no turn in progress (Claude Code and
/// Codex both say "esc to interrupt" during one).
pub(crate) fn wait_idle(env: &TestEnv, identity: &str) {
    env.wait_until("the agent shows no turn", Duration::from_secs(60), |e| {
        !e.screen(identity)
            .to_lowercase()
            .contains("esc to interrupt")
    });
}

/// Wait (60 s at most) until Codex has ended `turns` turns in all: its session files
/// (`$CODEX_HOME/sessions/**.jsonl`, `CODEX_HOME` = `<home>/.codex` in these tests) hold that
/// many `task_complete` events, and then until the `codex-cx` screen has shown no turn for
/// 300 ms in a row. The screen alone cannot tell: it shows no busy line in the moment before
/// Codex draws it, and shows a turn's answer a moment before the turn ends (a send then is
/// queued behind it, correctly, and answered so). Nor can the record alone: Codex writes it
/// a moment before its screen takes the turn's end in (seen once in CI: a send 22 ms after
/// the wake's answer, with the record already there, was queued).
pub(crate) fn wait_codex_turns(env: &TestEnv, turns: usize) {
    let sessions = env.home.join(".codex/sessions");
    env.wait_until(
        &format!("Codex has ended {turns} turn(s)"),
        Duration::from_secs(60),
        |_| {
            records(&sessions)
                .iter()
                .filter(|r| r["type"] == "event_msg" && r["payload"]["type"] == "task_complete")
                .count()
                >= turns
        },
    );
    wait_codex_screen_idle(env);
}

/// Wait (60 s at most) until the `codex-cx` screen has shown no turn for 300 ms in a row.
pub(crate) fn wait_codex_screen_idle(env: &TestEnv) {
    let mut idle_since: Option<Instant> = None;
    env.wait_until("Codex shows the turn's end", Duration::from_secs(60), |e| {
        if e.screen("codex-cx")
            .to_lowercase()
            .contains("esc to interrupt")
        {
            idle_since = None;
            return false;
        }
        idle_since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_millis(300)
    });
}

/// Rounds of one held turn with several sends into it; returns (sent, queued) and checks
/// every answer: exit 0, and either delivered or queued by the runtime.
fn busy_rounds(
    env: &TestEnv,
    to: &str,
    identity: &str,
    rounds: usize,
    per_round: usize,
) -> (Vec<String>, usize) {
    let mut sent = Vec::new();
    let mut queued = 0;
    let mut slowest = Duration::ZERO;
    for r in 0..rounds {
        // Each round starts from an idle agent, so its own BUSY message starts a turn.
        wait_idle(env, identity);
        env.ok(&[
            "send",
            to,
            "--from",
            "echo-ea",
            "--message",
            &format!("BUSY round {r}"),
        ]);
        env.wait_until("the agent is mid-turn", Duration::from_secs(30), |e| {
            e.screen(identity)
                .to_lowercase()
                .contains("esc to interrupt")
        });
        for i in 0..per_round {
            let msg = format!("MID-{r}-{i}");
            let (ok, v, took) = send_json(env, to, &msg);
            assert!(
                ok && v["ok"] == true,
                "a send to a busy agent failed: {v}\nscreen:\n{}\n{}",
                env.screen(identity),
                env.diagnostics()
            );
            if v["queued"] == true {
                // Seen once under CPU load (Codex): `composer` — the screen and the daemon's
                // log say which draft the composer held.
                assert_eq!(
                    v["queuedBy"],
                    "runtime",
                    "{v}\nscreen:\n{}\n{}",
                    env.screen(identity),
                    env.diagnostics()
                );
                queued += 1;
                slowest = slowest.max(took);
            }
            sent.push(msg);
        }
    }
    eprintln!(
        "{identity}: {} sends to a busy agent, {queued} queued by the runtime, slowest queued answer {} ms",
        sent.len(),
        slowest.as_millis()
    );
    (sent, queued)
}

#[test]
fn claude_mid_turn_messages_are_queued_followed_and_never_duplicated() {
    let (env, api) = crate::claude::world(&[BUSY_GRACE]);
    api.script(|req| {
        if last_user_text(req).contains("BUSY") {
            Reply::Hold(Duration::from_secs(8), "held turn done".into())
        } else {
            Reply::Text("ok".into())
        }
    });
    wake_claude(&env);
    let (sent, queued) = busy_rounds(&env, "cb", "claude-cb", 4, 5);
    assert!(sent.len() >= 20);
    assert!(queued >= 15, "most sends landed mid-turn: {queued}");

    // Each queued message is followed to the model: one follow-up line each, all delivered.
    env.wait_until(
        "a delivery-followup line for every queued message",
        Duration::from_secs(90),
        |e| e.count_events("delivery", "delivery-followup", &[]) >= queued,
    );
    // (A round's own BUSY message may land in the previous round's queued turn too.)
    let lines = env.events("delivery", "delivery");
    let queued_lines = lines
        .iter()
        .filter(|d| f(d, "queued") == "true" && f(d, "qkind") == "runtime")
        .count();
    assert!(queued_lines >= queued);
    env.wait_until(
        "a delivery-followup line for every queued line",
        Duration::from_secs(60),
        |e| e.count_events("delivery", "delivery-followup", &[]) >= queued_lines,
    );
    let follow = env.events("delivery", "delivery-followup");
    assert_eq!(follow.len(), queued_lines, "{follow:?}");
    assert!(
        follow.iter().all(|l| f(l, "outcome") == "delivered"
            && f(l, "qkind") == "runtime"
            && f(l, "to") == "cb"),
        "{follow:?}"
    );
    // 0 false "NOT delivered" among the sends to the live agent (the wake is setup).
    assert!(
        lines
            .iter()
            .filter(|d| f(d, "woke") == "false")
            .all(|d| f(d, "ok") == "true"),
        "{lines:?}"
    );

    // No duplicates: every message is in exactly one submitted user record of the
    // transcript (or, when Claude Code folded it into a running turn, one `queued_command`
    // attachment: fixtures/claude-2.1.332/mid-turn-absorbed.jsonl), and reached the model.
    let recs = records(&env.home.join(".claude/projects"));
    for m in &sent {
        let needle = format!("<msg>{m}</msg>");
        let users = recs
            .iter()
            .filter(|r| {
                (r["type"] == "user"
                    || (r["type"] == "attachment" && r["attachment"]["type"] == "queued_command"))
                    && r.to_string().contains(&needle)
            })
            .count();
        assert_eq!(users, 1, "{m} is in {users} user records");
        assert!(
            api.main_requests()
                .iter()
                .any(|r| common::anthropic::flatten(&r["messages"]).contains(&needle)),
            "{m} never reached the model"
        );
    }
    assert!(
        recs.iter()
            .any(|r| r["type"] == "queue-operation" && r["operation"] == "enqueue"),
        "the runtime's queue was exercised"
    );
}

/// A claude world whose stand-in holds every turn on a `BUSY` message for 60 s (else answers
/// `ok`), with `ea` live (a notice is never a reason to wake it) and `cb` woken.
pub(crate) fn claude_holding_busy_turns() -> (TestEnv, common::anthropic::AnthropicStandIn) {
    let (env, api) = crate::claude::world(&[]);
    api.script(|req| {
        if last_user_text(req).contains("BUSY") {
            Reply::Hold(Duration::from_secs(60), "late".into())
        } else {
            Reply::Text("ok".into())
        }
    });
    env.ok(&["new", "ea"]);
    wake_claude(&env);
    (env, api)
}

/// A claude peer whose turn on `BUSY forever` the stand-in holds for 60 s, and `MID-TURN`
/// (from a live `ea`) answered queued by the runtime.
fn claude_with_a_queued_message() -> (TestEnv, common::anthropic::AnthropicStandIn) {
    let (env, api) = claude_holding_busy_turns();
    env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "BUSY forever",
    ]);
    env.wait_until("claude is mid-turn", Duration::from_secs(30), |e| {
        e.screen("claude-cb").contains("esc to interrupt")
    });
    let (ok, v, _) = send_json(&env, "cb", "MID-TURN");
    assert!(ok && v["queued"] == true, "{v}\n{}", env.diagnostics());
    assert_eq!(v["queuedBy"], "runtime");
    (env, api)
}

/// A queued message whose session ends before it reaches the model: the follow-up line says
/// so and the (live) sender gets a notice from `iapeer`.
#[test]
fn claude_queued_message_lost_with_its_session_is_reported_to_the_sender() {
    let (env, _api) = claude_with_a_queued_message();
    env.ok(&["stop", "cb"]);
    env.wait_until("the follow-up line", Duration::from_secs(30), |e| {
        e.has_event(
            "delivery",
            "delivery-followup",
            &[("outcome", "session-ended"), ("ok", "false")],
        )
    });
    told_by_iapeer(&env, "echo-ea", "cb (claude)", "NOT delivered");
    env.wait_until("the notice's delivery line", Duration::from_secs(30), |e| {
        e.has_event(
            "delivery",
            "delivery",
            &[
                ("path", "daemon"),
                ("caller", "iapeer"),
                ("to", "ea"),
                ("ok", "true"),
            ],
        )
    });
}

/// Codex 0.171 takes a message pasted mid-turn into the running turn at its next step
/// ("Messages to be submitted after next tool call"); it is written to the session file only
/// then. The sender is answered `queued` at once and the message is followed to the model.
#[test]
fn codex_mid_turn_messages_are_queued_followed_and_never_duplicated() {
    use common::openai::{input_text, last_input_text, Reply as OReply};
    let (env, api) = crate::codex::world_with(&[BUSY_GRACE]);
    api.script(|req| {
        if last_input_text(req).contains("BUSY") {
            OReply::Hold(Duration::from_secs(8))
        } else {
            OReply::Text("ok".into())
        }
    });
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "echo: wake"]);
    let (sent, queued) = busy_rounds(&env, "cx", "codex-cx", 4, 5);
    assert!(sent.len() >= 20);
    assert!(queued >= 15, "most sends landed mid-turn: {queued}");
    let lines = env.events("delivery", "delivery");
    let queued_lines = lines
        .iter()
        .filter(|d| f(d, "queued") == "true" && f(d, "qkind") == "runtime")
        .count();
    assert!(queued_lines >= queued);
    env.wait_until(
        "a delivery-followup line for every queued line",
        Duration::from_secs(90),
        |e| e.count_events("delivery", "delivery-followup", &[]) >= queued_lines,
    );
    let follow = env.events("delivery", "delivery-followup");
    assert_eq!(follow.len(), queued_lines, "{follow:?}");
    assert!(
        follow
            .iter()
            .all(|l| f(l, "outcome") == "delivered" && f(l, "via") == "codex-cx"),
        "{follow:?}"
    );
    assert!(lines.iter().all(|d| f(d, "ok") == "true"), "{lines:?}");

    // No duplicates: one user message item per message in the session files, and the
    // model saw each.
    let recs = records(&env.home.join(".codex/sessions"));
    for m in &sent {
        let needle = format!("<msg>{m}</msg>");
        let users = recs
            .iter()
            .filter(|r| {
                r["type"] == "response_item"
                    && r["payload"]["role"] == "user"
                    && r.to_string().contains(&needle)
            })
            .count();
        assert_eq!(users, 1, "{m} is in {users} user items");
        assert!(
            api.recorded()
                .iter()
                .any(|r| input_text(r).contains(&needle)),
            "{m} never reached the model"
        );
    }
}

/// Esc during the running turn does not drop a queued message: Claude Code 2.1.332 ends the
/// turn, dequeues the message and submits it (recorded here: `enqueue`, then `dequeue` half a
/// second after the interrupt, then its `user` record). The follow-up says `delivered` and
/// nobody is told otherwise.
#[test]
fn claude_interrupt_submits_the_queued_message() {
    let (env, api) = claude_with_a_queued_message();
    env.ok(&["interrupt", "cb"]);
    env.wait_until("the follow-up line", Duration::from_secs(30), |e| {
        e.count_events("delivery", "delivery-followup", &[]) > 0
    });
    let follow = env.events("delivery", "delivery-followup");
    assert_eq!(f(&follow[0], "outcome"), "delivered", "{follow:?}");
    env.wait_until("the model gets it", Duration::from_secs(30), |_| {
        api.main_requests()
            .iter()
            .any(|r| last_user_text(r).contains("<msg>MID-TURN</msg>"))
    });
    let recs = records(&env.home.join(".claude/projects"));
    let ops: Vec<&str> = recs
        .iter()
        .filter(|r| r["type"] == "queue-operation")
        .filter_map(|r| r["operation"].as_str())
        .collect();
    assert_eq!(ops, ["enqueue", "dequeue"]);
    assert!(!env.pane("echo-ea").contains("from iapeer"));
}

/// A message pasted while Claude Code runs a tool is folded into the running turn: the
/// bundle's queue writes `enqueue`, then `remove` with `reason: "absorbed_mid_turn"` when the
/// turn's next model request carries it (after the tool result). That is a delivery, not a
/// loss: the sender is answered ok (delivered, or queued then followed as delivered), the
/// model gets the message once, and nobody is told it was lost (seen in CI as a false "NOT
/// delivered" between a claude and a codex peer).
#[test]
fn claude_folds_a_message_sent_during_a_tool_call_into_the_running_turn() {
    use common::anthropic::has_tool_result;
    let (env, api) = crate::claude::world(&[]);
    api.script(|req| {
        if has_tool_result(req) {
            Reply::Text("tool turn done".into())
        } else if last_user_text(req).contains("TOOL-TURN") {
            Reply::ToolUse(
                "Bash".into(),
                serde_json::json!({"command": "sleep 6", "description": "wait six seconds"}),
            )
        } else {
            Reply::Text("ok".into())
        }
    });
    env.ok(&["new", "ea"]);
    wake_claude(&env);
    env.ok(&["send", "cb", "--from", "echo-ea", "--message", "TOOL-TURN"]);
    env.wait_until("the tool runs", Duration::from_secs(30), |e| {
        e.screen("claude-cb").contains("sleep 6")
    });
    let (ok, v, _) = send_json(&env, "cb", "MID-TOOL");
    assert!(
        ok && v["ok"] == true,
        "{v}\n{}\n{}",
        env.screen("claude-cb"),
        env.diagnostics()
    );
    let needle = "<msg>MID-TOOL</msg>";
    env.wait_until("the model gets it", Duration::from_secs(60), |_| {
        api.main_requests()
            .iter()
            .any(|r| common::anthropic::flatten(&r["messages"]).contains(needle))
    });
    if v["queued"] == true {
        env.wait_until("the follow-up line", Duration::from_secs(30), |e| {
            e.count_events("delivery", "delivery-followup", &[]) > 0
        });
        let follow = env.events("delivery", "delivery-followup");
        assert_eq!(f(&follow[0], "outcome"), "delivered", "{follow:?}");
    }
    let recs = records(&env.home.join(".claude/projects"));
    if std::env::var_os("IAPEER_RECORD_ABSORBED").is_some() {
        let keep: Vec<String> = recs
            .iter()
            .filter(|r| {
                matches!(
                    r["type"].as_str(),
                    Some("user" | "assistant" | "queue-operation" | "attachment")
                )
            })
            .map(Value::to_string)
            .collect();
        std::fs::write("/tmp/mid-turn-absorbed.jsonl", keep.join("\n") + "\n").unwrap();
    }
    let absorbed = recs.iter().any(|r| {
        r["type"] == "queue-operation"
            && r["operation"] == "remove"
            && r["reason"] == "absorbed_mid_turn"
            && r.to_string().contains(needle)
    });
    assert!(
        absorbed,
        "Claude Code folded it into the running turn: {:?}",
        recs.iter()
            .filter(|r| r["type"] == "queue-operation")
            .collect::<Vec<_>>()
    );
    // The model saw it in the turn that carried the tool result.
    assert!(
        api.main_requests()
            .iter()
            .any(|r| has_tool_result(r)
                && common::anthropic::flatten(&r["messages"]).contains(needle)),
        "folded into the tool turn"
    );
    // No loss notice: the turn is over on the screen (the session's watch of the composer
    // ends with it), the router has handled all the session reported, and what it would
    // have sent ea has had its way to ea's screen (a still second there).
    wait_idle(&env, "claude-cb");
    env.router_settled();
    env.pane_settled("echo-ea");
    assert!(
        !env.pane("echo-ea").contains("from iapeer"),
        "no loss notice"
    );
}

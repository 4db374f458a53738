//! Consecutive deliveries, Enter on the screen's sign (issue 13 item 1): every message reaches
//! the agent as exactly one user turn with exactly its body — no swallowed Enter, no two
//! messages merged, no false "NOT delivered" — on the echo agent, the real Claude Code, Codex,
//! Gemini CLI and OpenCode against the model stand-ins. Bodies from 1 byte to 16 KB, multi-line, unicode,
//! sent right after the previous turn ended and after a pause.
//!
//! The suite runs a few rounds per runtime; `scripts/bench.sh` runs the same tests with
//! `IAPEER_CORRECTNESS_N=500` (its correctness mode) and reads the `correctness:` line each
//! prints. A send answered `state unknown` stops a run unless `IAPEER_CORRECTNESS_UNKNOWN=count`
//! (the bench's default): then it is counted, the run carries on, and each is checked against
//! the model stand-in's requests — reached the model once, never, or twice (issue 27 item 5).
//! Swallowed, merged and false answers stay strict either way.

use crate::common;

use common::anthropic::{AnthropicStandIn, Reply as AReply};
use common::openai::{OpenAiStandIn, Reply as OReply};
use common::TestEnv;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Body sizes in bytes, cycled: around each placeholder threshold of the CLIs (Codex shows a
/// paste above 1 000 characters as `[Pasted Content N chars]`) up to 16 KB.
const SIZES: [usize; 10] = [1, 9, 80, 700, 999, 1001, 1500, 4096, 9000, 16384];

/// The echo agent answers every message, and hundreds of exchanges in a minute are this
/// test's point, not a runaway: the storm guard stays out of it.
const STORM: (&str, &str) = ("IAPEER_STORM_LIMIT", "1000000");

/// How a send was answered.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    /// Delivered (or queued by the runtime): it must reach the model exactly once.
    Delivered,
    /// `state unknown`: it may have arrived; counted, checked, not a failure by itself.
    Unknown,
}

/// Whether a `state unknown` answer is counted and the run carries on
/// (`IAPEER_CORRECTNESS_UNKNOWN=count`) rather than failing the run.
fn count_unknown() -> bool {
    std::env::var("IAPEER_CORRECTNESS_UNKNOWN").as_deref() == Ok("count")
}

/// The most a send waits for the one before to reach the model ([`drive_after`]).
const REACH_WAIT: Duration = Duration::from_secs(20);

/// How many deliveries a run makes: `IAPEER_CORRECTNESS_N`, else `default`.
fn rounds(default: usize) -> usize {
    std::env::var("IAPEER_CORRECTNESS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The body of delivery `i`: [`SIZES`]`[i % len]` bytes (at a char boundary, never more),
/// several lines of mixed scripts, no control character but `\n`, no white space at either
/// end (the envelope keeps it, but a CLI may trim a turn).
pub(crate) fn body(i: usize) -> String {
    let size = SIZES[i % SIZES.len()];
    let line = |k: usize| format!("{i}.{k} héllo wörld — 漢字 🙂 <b>&amp; \"quoted\" end");
    let mut text = String::new();
    let mut k = 0;
    while text.len() < size {
        if k > 0 {
            text.push('\n');
        }
        text.push_str(&line(k));
        k += 1;
    }
    let mut cut = size.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    let trimmed = text.trim_end().to_string();
    if trimmed.is_empty() {
        "x".to_string()
    } else {
        trimmed
    }
}

/// The bodies of every envelope in `turns` (one user turn's text each), in order; a turn that
/// holds no envelope or more than one is reported as an error.
fn bodies_of(turns: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for t in turns {
        let n = t.matches("<iap ").count();
        if n != 1 {
            return Err(format!("a user turn holds {n} envelopes: {t:.300}"));
        }
        let env = iapeer::untrusted::decode_envelope(t).map_err(|e| format!("{e:?}: {t:.300}"))?;
        out.push(env.body);
    }
    Ok(out)
}

/// Compare what the agent got with what was sent, every delivery answered delivered; the
/// first difference, if any.
fn compare(sent: &[String], got: &[String]) -> Result<(), String> {
    compare_answered(sent, &vec![Answer::Delivered; sent.len()], got).map(|_| ())
}

/// Compare what the agent got (`got`, its turns in order) with what was sent and how each
/// send was answered (pure): a delivered message is the next turn, exactly once; a `state
/// unknown` one is the next turn once, never, or more often. How many turns each delivery
/// became, or the first difference.
fn compare_answered(
    sent: &[String],
    answers: &[Answer],
    got: &[String],
) -> Result<Vec<usize>, String> {
    let mut times = Vec::with_capacity(sent.len());
    let mut j = 0;
    for (i, (s, a)) in sent.iter().zip(answers).enumerate() {
        match a {
            Answer::Delivered => match got.get(j) {
                None => return Err(format!("delivery {i} never reached the agent as a turn")),
                Some(g) if g != s => {
                    return Err(format!(
                        "turn {j} differs from delivery {i}: sent {} bytes {s:.80?}…, got {} bytes {g:.80?}…",
                        s.len(),
                        g.len()
                    ))
                }
                Some(_) => {
                    times.push(1);
                    j += 1;
                }
            },
            Answer::Unknown => {
                let from = j;
                while got.get(j) == Some(s) {
                    j += 1;
                }
                times.push(j - from);
            }
        }
    }
    if got.len() > j {
        return Err(format!("{} turns for {} deliveries", got.len(), sent.len()));
    }
    Ok(times)
}

/// What a run sent: each body, when its send began and how it was answered.
struct Sent {
    bodies: Vec<String>,
    began: Vec<Instant>,
    answers: Vec<Answer>,
}

/// Send `n` bodies to `to` one after another, each once the agent shows no turn in progress
/// (right after a turn ended), every third after a pause as well; check each answer (a
/// `state unknown` one is counted with [`count_unknown`], else fails the run).
fn drive(env: &TestEnv, to: &str, identity: &str, n: usize) -> Sent {
    drive_after(env, to, identity, n, None)
}

/// [`drive`], and with `reached` (how many model requests had a body as their newest input)
/// each send also waits (at most [`REACH_WAIT`]) until the one before reached the model: a
/// turn not yet begun shows no busy sign, and OpenCode 1.18.33 answers a message it took
/// before beginning the turn ahead together with that one
/// (`server-session-messages-two-before-a-turn.json`): the next send would not come after
/// the turn ended, as this test means it to.
fn drive_after(
    env: &TestEnv,
    to: &str,
    identity: &str,
    n: usize,
    reached: Option<&dyn Fn(&str) -> usize>,
) -> Sent {
    let mut sent: Vec<String> = Vec::new();
    let mut began = Vec::new();
    let mut answers = Vec::new();
    let mut queued = 0;
    let mut slowest = Duration::ZERO;
    for i in 0..n {
        if let (Some(reached), Some(prev)) = (reached, sent.last()) {
            let times = sent.iter().filter(|b| *b == prev).count();
            common::poll(REACH_WAIT, || reached(prev) >= times);
        }
        wait_no_turn(env, identity);
        if i % 3 == 2 {
            // Time is the thing tested: an idle gap before every third send, as between a
            // person's messages.
            std::thread::sleep(Duration::from_millis(700));
        }
        let b = body(i);
        let t = Instant::now();
        began.push(t);
        let out = env.run(&[
            "send",
            to,
            "--from",
            "echo-ea",
            "--message",
            &b,
            "--topic",
            "c",
            "--json",
        ]);
        slowest = slowest.max(t.elapsed());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if v["code"] == "state-unknown" && count_unknown() {
            let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            eprintln!(
                "correctness: {identity}: delivery {i} ({} bytes) answered state unknown after {} ms \
                 (load average {}): {}",
                b.len(),
                t.elapsed().as_millis(),
                load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
                v["error"].as_str().unwrap_or_default()
            );
            answers.push(Answer::Unknown);
            sent.push(b);
            continue;
        }
        assert!(
            out.status.success() && v["ok"] == true,
            "delivery {i} ({} bytes) was refused: {}\nscreen:\n{}\n{}",
            b.len(),
            common::describe(&out),
            env.screen(identity),
            env.diagnostics()
        );
        if v["queued"] == true {
            assert_eq!(v["queuedBy"], "runtime", "{v}");
            queued += 1;
        }
        answers.push(Answer::Delivered);
        sent.push(b);
    }
    let log = env.log("daemon");
    let fallback_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("did not show the paste"))
        .collect();
    for l in fallback_lines.iter().take(5) {
        eprintln!("correctness: {l}");
    }
    let fallbacks = fallback_lines.len();
    eprintln!(
        "correctness: {identity}: {n} deliveries, {queued} queued by the runtime, \
         Enter on the settle fallback {fallbacks}, slowest answer {} ms",
        slowest.as_millis()
    );
    Sent {
        bodies: sent,
        began,
        answers,
    }
}

/// Wait until `identity` shows no turn in progress: Claude Code's and Codex's screen sign
/// ([`crate::busy::wait_idle`]); for the others the daemon's own reading of the runtime's
/// busy sign (Gemini CLI `esc to cancel`, OpenCode `esc interrupt`).
fn wait_no_turn(env: &TestEnv, identity: &str) {
    if identity.starts_with("claude-") || identity.starts_with("codex-") {
        crate::busy::wait_idle(env, identity)
    } else {
        env.wait_turn_over(identity)
    }
}

/// Print the send → model request latency of the deliveries sent at `began` whose model
/// requests came at `reached` (in the same order), all of them and those with bodies up to
/// 1 000 bytes, with the load average.
fn latency(identity: &str, sent: &[String], began: &[Instant], reached: &[Instant]) {
    let ms = |keep: &dyn Fn(&String) -> bool| {
        let mut v: Vec<u128> = sent
            .iter()
            .zip(began.iter().zip(reached))
            .filter(|(b, _)| keep(b))
            .map(|(_, (s, r))| r.saturating_duration_since(*s).as_millis())
            .collect();
        v.sort_unstable();
        v
    };
    let at = |v: &[u128], q: f64| {
        v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    let (all, small) = (ms(&|_| true), ms(&|b| b.len() <= 1000));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    eprintln!(
        "latency: {identity}: send -> model request, {} live deliveries: median {} ms, p90 {} ms, max {} ms; bodies up to 1 000 bytes ({}): median {} ms, p90 {} ms; load average {}",
        all.len(),
        at(&all, 0.5),
        at(&all, 0.9),
        all.last().copied().unwrap_or(0),
        small.len(),
        at(&small, 0.5),
        at(&small, 0.9),
        load.join(" ")
    );
}

/// Wait until the user turns with envelopes `turns()` lists match what was sent (the last
/// may still be on its way to the model; at most 60 s), then compare them with `sent`. How
/// many turns each delivery became.
fn check(
    env: &TestEnv,
    identity: &str,
    sent: &Sent,
    turns: impl Fn() -> Vec<String>,
) -> Vec<usize> {
    let compared =
        || bodies_of(&turns()).and_then(|b| compare_answered(&sent.bodies, &sent.answers, &b));
    common::poll(Duration::from_secs(60), || compared().is_ok());
    let times = compared().unwrap_or_else(|e| {
        // Each request's newest input, by its first 12 characters: a second request for
        // one delivery (the CLI sending it again) tells apart from a second paste.
        let newest: Vec<String> = turns()
            .iter()
            .map(|t| {
                bodies_of(std::slice::from_ref(t))
                    .map(|b| b[0].chars().take(12).collect())
                    .unwrap_or_else(|_| "?".into())
            })
            .collect();
        panic!(
            "{identity}: {e}\nturns' bodies, first 12 characters: {newest:?}\n{}",
            env.diagnostics()
        )
    });
    let unknown: Vec<usize> = times
        .iter()
        .zip(&sent.answers)
        .filter(|(_, a)| **a == Answer::Unknown)
        .map(|(t, _)| *t)
        .collect();
    let summary = if count_unknown() {
        let of = |n: usize| unknown.iter().filter(|t| **t == n).count();
        format!(
            "; {} state-unknown ({} reached the model once, {} never, {} twice or more)",
            unknown.len(),
            of(1),
            of(0),
            unknown.iter().filter(|t| **t >= 2).count()
        )
    } else {
        String::new()
    };
    eprintln!(
        "correctness: {identity}: {} deliveries, 0 swallowed, 0 merged, 0 false NOT delivered{summary}",
        sent.bodies.len()
    );
    assert!(
        unknown.iter().all(|t| *t < 2),
        "{identity}: a message answered state unknown reached the model twice\n{}",
        env.diagnostics()
    );
    times
}

#[test]
fn echo_consecutive_deliveries_are_each_one_turn() {
    let mut env = TestEnv::new();
    env.set(STORM.0, STORM.1);
    env.create_echo("ea");
    env.create_echo("eb");
    env.start_daemon();
    env.ok(&["send", "eb", "--from", "echo-ea", "--message", "hello"]);
    let sent = drive(&env, "eb", "echo-eb", rounds(40)).bodies;
    let transcript = env.peer_dir("eb").join(".echo-agent/transcript.jsonl");
    let got: Vec<String> = common::read(&transcript)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "user")
        .map(|r| r["body"].as_str().unwrap_or_default().to_string())
        .skip(1)
        .collect();
    assert!(
        !env.pane("echo-eb").contains("you: "),
        "text reached the echo agent outside an envelope\n{}",
        env.diagnostics()
    );
    let r = compare(&sent, &got);
    assert!(r.is_ok(), "{}\n{}", r.unwrap_err(), env.diagnostics());
    eprintln!(
        "correctness: echo-eb: {} deliveries, 0 swallowed, 0 merged",
        sent.len()
    );
}

/// The texts of the user items of `items` (a request's `messages` or `input`) that hold an
/// envelope.
fn envelope_turns(items: &Value) -> Vec<String> {
    items
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .map(|m| common::anthropic::flatten(&m["content"]))
                .filter(|t| t.contains("<iap "))
                .collect()
        })
        .unwrap_or_default()
}

/// The user turns holding an envelope in the newest main request to Claude's stand-in.
fn claude_turns(api: &AnthropicStandIn) -> Vec<String> {
    api.main_requests()
        .last()
        .map(|r| envelope_turns(&r["messages"]))
        .unwrap_or_default()
}

#[test]
fn claude_consecutive_deliveries_are_each_one_turn() {
    let (env, api) = crate::claude::world(&[STORM]);
    api.script(|_| AReply::Text("ok".into()));
    crate::busy::wake_claude(&env);
    let n = rounds(12);
    let sent = drive(&env, "cb", "claude-cb", n);
    // The wake's `hello` is the first turn.
    check(&env, "claude-cb", &sent, || {
        claude_turns(&api).into_iter().skip(1).collect()
    });
}

/// The user turns holding an envelope in the newest main request (one that offers tools) to
/// Codex's stand-in.
fn codex_turns(api: &OpenAiStandIn) -> Vec<String> {
    api.recorded()
        .into_iter()
        .rfind(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .map(|r| envelope_turns(&r["input"]))
        .unwrap_or_default()
}

#[test]
fn codex_consecutive_deliveries_are_each_one_turn() {
    let (env, api) = crate::codex::world_with(&[STORM]);
    api.script(|_| OReply::Text("ok".into()));
    let out = env.run(&["send", "cx", "--from", "echo-ea", "--message", "hello"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    let n = rounds(12);
    let sent = drive(&env, "cx", "codex-cx", n);
    check(&env, "codex-cx", &sent, || {
        codex_turns(&api).into_iter().skip(1).collect()
    });
}

/// The turns holding an envelope in `requests` (time, newest input's text), skipping the
/// wake's `hello`: each delivery must be the newest input of one turn of its own.
fn newest_envelopes(requests: Vec<(Instant, String)>) -> Vec<(Instant, String)> {
    requests
        .into_iter()
        .filter(|(_, t)| t.contains("<iap "))
        .skip(1)
        .collect()
}

/// How many times an Enter was pressed again because the delivery was not confirmed yet
/// (the daemon logs each).
fn enters_again(env: &TestEnv) -> usize {
    env.log("daemon")
        .lines()
        .filter(|l| l.contains("Enter again"))
        .count()
}

/// A world whose daemon leaves the storm guard out, with the peer `add` makes and the echo
/// peer `ea` that sends.
fn world_with(add: impl FnOnce(&mut TestEnv)) -> TestEnv {
    let mut env = TestEnv::new();
    env.set(STORM.0, STORM.1);
    add(&mut env);
    env.create_echo("ea");
    env.start_daemon();
    env
}

/// Wake `to` with `hello`, [`drive`] the deliveries, [`check`] them against the model
/// requests `requests()` lists (each one's time and newest input's text, in order) and print
/// their [`latency`]. How many were sent.
fn wake_drive_check(
    env: &TestEnv,
    to: &str,
    identity: &str,
    requests: impl Fn() -> Vec<(Instant, String)>,
    conversation: Option<&dyn Fn() -> Vec<String>>,
) -> usize {
    let out = env.run(&["send", to, "--from", "echo-ea", "--message", "hello"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    let turns = || newest_envelopes(requests());
    let reached = |body: &str| {
        turns()
            .iter()
            .filter(|(_, t)| bodies_of(std::slice::from_ref(t)).is_ok_and(|b| b[0] == body))
            .count()
    };
    let sent = drive_after(env, to, identity, rounds(12), Some(&reached));
    // The conversation the model has, when given (a request sent again by the CLI is not a
    // second delivery); else each request's newest input.
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check(env, identity, &sent, || match conversation {
            Some(c) => c().into_iter().skip(1).collect(),
            None => turns().into_iter().map(|(_, t)| t).collect(),
        })
    }));
    let times = checked.unwrap_or_else(|panic| {
        // Each model request's newest input (first 12 characters), in order.
        let newest: Vec<String> = turns()
            .into_iter()
            .map(|(_, t)| {
                t.rsplit("<iap ")
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(120)
                    .collect()
            })
            .map(|t: String| t.split('>').nth(1).unwrap_or("").chars().take(12).collect())
            .collect();
        eprintln!("correctness: {identity}: the model requests' newest inputs: {newest:?}");
        std::panic::resume_unwind(panic)
    });
    // The deliveries that reached the model, in the order of their requests.
    let (bodies, began): (Vec<String>, Vec<Instant>) = sent
        .bodies
        .iter()
        .zip(&sent.began)
        .zip(&times)
        .filter(|(_, t)| **t > 0)
        .map(|((b, at), _)| (b.clone(), *at))
        .unzip();
    let reached: Vec<Instant> = turns().into_iter().map(|(at, _)| at).collect();
    latency(identity, &bodies, &began, &reached);
    sent.bodies.len()
}

/// Gemini CLI 0.61.0 (issue 27 item 5). Its Enter goes 100 ms after the paste shows and is
/// pressed again every 400 ms while unconfirmed (an Enter soon after a paste is a line break
/// there: `runtime::gemini::ENTER_AFTER_PASTE`); how many needed it again is printed.
#[test]
fn gemini_consecutive_deliveries_are_each_one_turn() {
    use common::gemini::{is_stream, last_text, GeminiStandIn};
    let Some(bin) = crate::gemini_e2e::gemini_bin() else {
        return;
    };
    let api = GeminiStandIn::start();
    let env = world_with(|env| crate::gemini_e2e::add_peer(env, &bin, "gm", &api));
    // The user contents holding an envelope in the newest turn's request.
    let conversation = || -> Vec<String> {
        let newest = api.turns().pop().unwrap_or_default();
        newest["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["role"] == "user")
            .map(|c| last_text(&serde_json::json!({"contents": [c]})))
            .filter(|t| t.contains("<iap "))
            .collect()
    };
    let requests = || {
        api.recorded()
            .into_iter()
            .filter(is_stream)
            .map(|r| (r.at, last_text(&r.body)))
            .collect()
    };
    let n = wake_drive_check(&env, "gm", "gemini-gm", requests, Some(&conversation));
    eprintln!(
        "correctness: gemini-gm: Enter pressed again {} times in {n} deliveries",
        enters_again(&env)
    );
}

/// OpenCode 1.18.33 (issue 27 item 5).
#[test]
fn opencode_consecutive_deliveries_are_each_one_turn() {
    use common::openai_chat::{is_title_request, last_text, ChatStandIn};
    let api = ChatStandIn::start();
    let env = world_with(|env| {
        crate::opencode_peer::add_peer(env, "oc", &api);
    });
    let requests = || {
        api.recorded()
            .into_iter()
            .filter(|r| !r.body.is_null() && !is_title_request(&r.body))
            .map(|r| (r.at, last_text(&r.body)))
            .collect()
    };
    wake_drive_check(&env, "oc", "opencode-oc", requests, None);
}

/// A delivered message is one turn exactly; a `state unknown` one may be a turn once or
/// never, and is counted as it was.
#[test]
fn state_unknown_deliveries_are_counted_by_the_turns_they_became() {
    use Answer::{Delivered as D, Unknown as U};
    let sent: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let got = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let answers = [D, U, U, D];
    assert_eq!(
        compare_answered(&sent, &answers, &got(&["a", "b", "d"])),
        Ok(vec![1, 1, 0, 1])
    );
    assert_eq!(
        compare_answered(&sent, &answers, &got(&["a", "b", "b", "c", "d"])),
        Ok(vec![1, 2, 1, 1])
    );
    // Delivered ones stay strict: swallowed, merged, twice.
    assert!(compare_answered(&sent, &answers, &got(&["a", "b"])).is_err());
    assert!(compare_answered(&sent, &answers, &got(&["a", "c\nd"])).is_err());
    assert!(compare_answered(&sent, &answers, &got(&["a", "a", "d"])).is_err());
    assert!(compare_answered(&sent, &answers, &got(&["a", "d", "d"])).is_err());
    assert_eq!(compare(&sent, &got(&["a", "b", "c", "d"])), Ok(()));
}

#[test]
fn bodies_cover_the_sizes_and_end_without_white_space() {
    let sizes: Vec<usize> = (0..SIZES.len()).map(|i| body(i).len()).collect();
    assert_eq!(sizes[0], 1);
    assert!(sizes[SIZES.len() - 1] > 16_000 && sizes[SIZES.len() - 1] <= 16_384);
    for (i, size) in SIZES.iter().enumerate() {
        let b = body(i);
        assert!(b.len() <= *size, "{i}: {}", b.len());
        assert_eq!(b.trim(), b);
        assert!(!b.chars().any(|c| c.is_control() && c != '\n'));
    }
    assert!(body(9).contains('\n') && body(9).contains('漢'));
}

//! A turn refused by a rate or usage limit is taken up again (issue 32 item 3): what the real
//! Claude Code 2.1.332 and Codex 0.171.0 do when their model API answers 429 until they give
//! the turn up (recorded as fixtures), and iapeer taking the turn up again once the limit
//! resets, telling the sender both times.

use crate::common;

use common::anthropic::{last_user_text, Reply};
use common::TestEnv;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::interrupt::record_dir;

fn now_secs() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The words of iapeer's prompt to continue (`limits::continue_prompt`).
const CONTINUE: &str = "please continue where you left off";

/// A refused turn's story in `lifecycle.log`: `ev=limit action=limited` with `plan` and `due`
/// for `identity`.
fn planned(env: &TestEnv, identity: &str, plan: &str, due: Option<&str>) {
    let mut want = vec![
        ("action", "limited"),
        ("identity", identity),
        ("plan", plan),
    ];
    if let Some(d) = due {
        want.push(("due", d));
    }
    env.wait_until("the limit's plan", Duration::from_secs(60), |e| {
        e.has_event("lifecycle", "limit", &want)
    });
}

/// The stand-in's script for the Claude tests: the conversation's request whose last user
/// turn holds `LIMITED` is refused with a 429 and `headers` until the test clears the flag
/// returned (once the runtime gave the turn up: "429, then 200"); everything else is
/// answered `ok`.
/// "429 then 200"); everything else is answered `ok`.
fn claude_refuses(
    api: &common::anthropic::AnthropicStandIn,
    headers: Vec<(String, String)>,
) -> Arc<AtomicBool> {
    let limited = Arc::new(AtomicBool::new(true));
    let l = limited.clone();
    api.script(move |req| {
        let main = req["tools"].as_array().is_some_and(|t| !t.is_empty());
        if main && last_user_text(req).contains("LIMITED") && l.load(Ordering::SeqCst) {
            Reply::Headed(headers.clone(), Box::new(Reply::Error(429)))
        } else {
            Reply::Text("ok".into())
        }
    });
    limited
}

/// The API recovers: the stand-in answers from now on.
fn recover(limited: &AtomicBool) {
    limited.store(false, Ordering::SeqCst);
}

/// A claude world (`ea` live, `cb` woken) whose peer logs in with `auth` (a launch.env line),
/// with no retries of its own for an API key's 429 (`CLAUDE_CODE_MAX_RETRIES=0`: the runtime's
/// retrying is not what is tested), and the daemon's extra `vars`.
fn claude_limited(
    vars: &[(&str, &str)],
    auth: &str,
) -> (TestEnv, common::anthropic::AnthropicStandIn) {
    let mut all = vec![
        ("IAPEER_TICK_SECS", "1"),
        ("IAPEER_SUPERVISE_LOG_VERBOSE", "1"),
    ];
    all.extend_from_slice(vars);
    let (env, api) = crate::claude::world(&all);
    env.launch_env(
        "cb",
        "claude",
        &format!(
            "ANTHROPIC_BASE_URL={}\n{auth}\nIS_SANDBOX=1\nCLAUDE_CODE_MAX_RETRIES=0\n",
            api.url()
        ),
    );
    api.script(|_| Reply::Text("ok".into()));
    env.ok(&["new", "ea"]);
    crate::busy::wake_claude(&env);
    (env, api)
}

/// The conversation's requests after the refusal that carry iapeer's prompt to continue
/// with the refused message still in them.
fn claude_continued(api: &common::anthropic::AnthropicStandIn) -> bool {
    api.main_requests().iter().any(|r| {
        last_user_text(r).contains(CONTINUE)
            && common::anthropic::flatten(&r["messages"]).contains("LIMITED task")
    })
}

/// A Claude Code peer on an API key refused with a 429 — with no reset header, with
/// `retry-after`, and with the `anthropic-ratelimit-*-reset` headers (Claude Code records
/// no reset time for any of them) — is prompted to continue after the back-off; the turn is
/// answered; its sender is told it was limited, then that iapeer prompted.
#[test]
fn claude_rate_limited_turn_is_taken_up_after_the_backoff_and_the_sender_told() {
    let reset = jiff::Timestamp::from_second(now_secs() + 3)
        .unwrap()
        .to_string();
    for (case, headers) in [
        ("none", vec![]),
        (
            "retry-after",
            vec![("retry-after".to_string(), "3".to_string())],
        ),
        (
            "ratelimit-reset",
            vec![
                ("retry-after".to_string(), "3".to_string()),
                ("anthropic-ratelimit-requests-remaining".into(), "0".into()),
                ("anthropic-ratelimit-requests-reset".into(), reset.clone()),
                ("anthropic-ratelimit-tokens-reset".into(), reset.clone()),
            ],
        ),
    ] {
        eprintln!("case {case}");
        let (env, api) = claude_limited(
            &[("IAPEER_LIMIT_BACKOFF_MS", "4000")],
            "ANTHROPIC_API_KEY=sk-ant-standin-key",
        );
        let limited = claude_refuses(&api, headers);
        taken_up(&env, ("claude", "cb"), &limited, "backoff", || {
            claude_continued(&api)
        });
    }
}

/// With `IAPEER_LIMIT_RESUME=0` the refused turn is not taken up (no prompt within several
/// back-offs) and the sender is told so.
#[test]
fn claude_limited_turn_with_the_knob_off_is_not_taken_up_but_the_sender_told() {
    let (env, api) = claude_limited(
        &[
            ("IAPEER_LIMIT_RESUME", "0"),
            ("IAPEER_LIMIT_BACKOFF_MS", "1000"),
        ],
        "ANTHROPIC_API_KEY=sk-ant-standin-key",
    );
    let limited = claude_refuses(&api, vec![]);
    not_taken_up(&env, "claude", "cb", &limited, || claude_continued(&api));
}

/// A Claude Code peer on a plan (`CLAUDE_CODE_OAUTH_TOKEN`) refused for its usage limit with
/// the `anthropic-ratelimit-unified-*` headers (resetting in 20 s): Claude Code records the
/// reset and continues by itself after it (recorded: its own prompt "Your claude.ai usage
/// limit has reset. Continue the task …", 61 s after the reset); iapeer plans its own
/// prompt only as the fallback (`limits::RUNTIME_GRACE` after the reset), sees the turn
/// answered, does not prompt, and tells the sender both times.
#[test]
fn claude_usage_limited_turn_is_taken_up_by_the_runtime_after_the_reset_and_the_sender_told() {
    let (env, api) = claude_limited(&[], "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-standin");
    let limited = claude_refuses(&api, claude_case_headers("unified", 20));
    let sent = Instant::now();
    let phrase = "after the reset time its runtime reported";
    refused_and_told(
        &env,
        ("claude", "cb"),
        &limited,
        ("resume", Some("reset")),
        phrase,
    );
    env.wait_until("the turn taken up again", Duration::from_secs(240), |e| {
        e.has_event(
            "lifecycle",
            "limit",
            &[("action", "answered"), ("by", "runtime")],
        )
    });
    assert!(
        sent.elapsed() >= Duration::from_secs(15),
        "taken up before the reset"
    );
    assert!(
        api.main_requests().iter().any(|r| {
            last_user_text(r).contains("usage limit has reset")
                && common::anthropic::flatten(&r["messages"]).contains("LIMITED task")
        }),
        "Claude Code's own prompt to continue, with the refused message"
    );
    crate::busy::told_by_iapeer(&env, "echo-ea", "cb (claude)", "was taken up again");
    assert_eq!(
        env.count_events("lifecycle", "limit", &[("action", "prompted")]),
        0
    );
    assert!(!claude_continued(&api));
}

/// A codex world (`ea` live, `cx` woken) with the daemon's extra `vars`, whose stand-in
/// refuses the requests that bring `LIMITED` with `refusal` until the test clears the flag
/// returned ("429, then 200") and answers everything else `ok`.
fn codex_limited(
    vars: &[(&str, &str)],
    refusal: common::openai::Reply,
) -> (TestEnv, common::openai::OpenAiStandIn, Arc<AtomicBool>) {
    use common::openai::{last_input_text, Reply as OReply};
    let mut all = vec![
        ("IAPEER_TICK_SECS", "1"),
        ("IAPEER_SUPERVISE_LOG_VERBOSE", "1"),
    ];
    all.extend_from_slice(vars);
    let (env, api) = crate::codex::world_with(&all);
    let limited = Arc::new(AtomicBool::new(true));
    let l = limited.clone();
    api.script(move |req| {
        if last_input_text(req).contains("LIMITED") && l.load(Ordering::SeqCst) {
            refusal.clone()
        } else {
            OReply::Text("ok".into())
        }
    });
    env.ok(&["new", "ea"]);
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "hello"]);
    crate::busy::wait_codex_turns(&env, 1);
    (env, api, limited)
}

/// Codex's requests that carry iapeer's prompt to continue with the refused message still
/// in them.
fn codex_continued(api: &common::openai::OpenAiStandIn) -> bool {
    use common::openai::{input_text, last_input_text};
    api.recorded()
        .iter()
        .any(|r| last_input_text(r).contains(CONTINUE) && input_text(r).contains("LIMITED task"))
}

/// A plain 429 (`rate_limit_exceeded`), with or without `retry-after`.
fn codex_plain_429(retry_after: bool) -> common::openai::Reply {
    common::openai::Reply::Error {
        status: 429,
        body: serde_json::json!({"error": {"message": "stand-in: Rate limit reached for requests",
            "type": "requests", "code": "rate_limit_exceeded"}}),
        headers: if retry_after {
            vec![("retry-after".into(), "1".into())]
        } else {
            Vec::new()
        },
    }
}

/// A refused turn's first half: `LIMITED task` sent to `runtime`'s peer `peer` from `ea`,
/// the plan (`plan`, `due`) logged, the API recovered, the sender told with `phrase`.
fn refused_and_told(
    env: &TestEnv,
    (runtime, peer): (&str, &str),
    limited: &AtomicBool,
    (plan, due): (&str, Option<&str>),
    phrase: &str,
) {
    send_limited(env, peer);
    planned(env, &format!("{runtime}-{peer}"), plan, due);
    recover(limited);
    crate::busy::told_by_iapeer(env, "echo-ea", &format!("{peer} ({runtime})"), phrase);
}

/// The story of one turn taken up by iapeer: refused and planned (`due`), the sender told,
/// iapeer's prompt with the refused message in the request (`continued`), the turn
/// answered, the sender told again; one prompt in all.
fn taken_up(
    env: &TestEnv,
    who: (&str, &str),
    limited: &AtomicBool,
    due: &str,
    continued: impl Fn() -> bool,
) {
    let phrase = "will prompt the agent to continue";
    refused_and_told(env, who, limited, ("resume", Some(due)), phrase);
    env.wait_until("the prompt to continue", Duration::from_secs(90), |_| {
        continued()
    });
    env.wait_until("the answered turn", Duration::from_secs(60), |e| {
        e.has_event(
            "lifecycle",
            "limit",
            &[("action", "answered"), ("by", "iapeer")],
        )
    });
    let to = format!("{} ({})", who.1, who.0);
    crate::busy::told_by_iapeer(env, "echo-ea", &to, "iapeer prompted the agent to continue");
    assert_eq!(
        env.count_events("lifecycle", "limit", &[("action", "prompted")]),
        1
    );
}

/// A Codex peer refused with a plain 429 — without and with `retry-after` (Codex records no
/// reset time for either) — is prompted to continue after the back-off, and its sender told.
#[test]
fn codex_rate_limited_turn_is_taken_up_after_the_backoff_and_the_sender_told() {
    for retry_after in [false, true] {
        eprintln!("retry-after: {retry_after}");
        let (env, api, limited) = codex_limited(
            &[("IAPEER_LIMIT_BACKOFF_MS", "4000")],
            codex_plain_429(retry_after),
        );
        taken_up(&env, ("codex", "cx"), &limited, "backoff", || {
            codex_continued(&api)
        });
    }
}

/// A Codex peer refused for its plan's usage limit with the `x-codex-*` rate-limit headers
/// (the 5-hour window full, resetting in 15 s): Codex records the reset; iapeer prompts the
/// agent to continue after it (Codex does not continue by itself), and tells the sender.
/// Without the headers Codex records no reset: the back-off.
#[test]
fn codex_usage_limited_turn_is_taken_up_after_the_reset_and_the_sender_told() {
    let reset = now_secs() + 15;
    let refusal =
        crate::notices::codex_usage_limit(reset, crate::notices::codex_limit_headers(reset, true));
    let (env, api, limited) = codex_limited(&[], refusal);
    let sent = Instant::now();
    taken_up(&env, ("codex", "cx"), &limited, "reset", || {
        codex_continued(&api)
    });
    assert!(
        sent.elapsed() >= Duration::from_secs(12),
        "prompted before the reset"
    );
    let bare = crate::notices::codex_usage_limit(reset, Vec::new());
    let (env, api, limited) = codex_limited(&[("IAPEER_LIMIT_BACKOFF_MS", "4000")], bare);
    taken_up(&env, ("codex", "cx"), &limited, "backoff", || {
        codex_continued(&api)
    });
}

/// With `IAPEER_LIMIT_RESUME=0` a Codex turn refused for a limit is not taken up, and the
/// sender is told so.
#[test]
fn codex_limited_turn_with_the_knob_off_is_not_taken_up_but_the_sender_told() {
    let (env, api, limited) = codex_limited(
        &[
            ("IAPEER_LIMIT_RESUME", "0"),
            ("IAPEER_LIMIT_BACKOFF_MS", "1000"),
        ],
        codex_plain_429(false),
    );
    not_taken_up(&env, "codex", "cx", &limited, || codex_continued(&api));
}

/// The knob off: a turn refused for a limit (`runtime`'s peer `peer`, from `ea`) is planned
/// `off`, the API recovers, the sender is told it will not be taken up, and for six
/// supervise ticks (six back-offs) neither iapeer prompts nor `continued` shows a prompt.
fn not_taken_up(
    env: &TestEnv,
    runtime: &str,
    peer: &str,
    limited: &AtomicBool,
    continued: impl Fn() -> bool,
) {
    let phrase = "will NOT take the turn up again";
    refused_and_told(env, (runtime, peer), limited, ("off", None), phrase);
    env.watch_ticks(6, "a prompt to continue", |e| {
        continued() || e.has_event("lifecycle", "limit", &[("action", "prompted")])
    });
}

/// A recorder's middle: send `LIMITED task` to `identity` from `ea`, take its screen every
/// 5 s until `gave_up` (the runtime recorded giving the turn up), then write the screens and
/// the pane log to `dir`; returns the summary line (how long, how many refused requests,
/// the gaps between them, from `times`).
fn record_give_up(
    env: &TestEnv,
    identity: &str,
    dir: &Path,
    case: &str,
    times: &Mutex<Vec<Instant>>,
    gave_up: impl Fn(&TestEnv) -> bool,
) -> String {
    let start = Instant::now();
    send_limited(env, identity.split_once('-').unwrap().1);
    let mut shots = Vec::new();
    let mut last_shot = Instant::now();
    env.wait_until(
        "the runtime giving the turn up",
        Duration::from_secs(900),
        |e| {
            if last_shot.elapsed() > Duration::from_secs(5) {
                last_shot = Instant::now();
                shots.push(format!(
                    "--- {:?} ({} requests)\n{}",
                    start.elapsed(),
                    times.lock().unwrap().len(),
                    e.screen(identity)
                ));
            }
            gave_up(e)
        },
    );
    let took = start.elapsed();
    // The runtime's screen settles after the record (a recorder, not a test).
    env.pane_settled(identity);
    let ts = times.lock().unwrap().clone();
    let gaps: Vec<String> = ts
        .windows(2)
        .map(|w| format!("{:.1}", (w[1] - w[0]).as_secs_f64()))
        .collect();
    let summary = format!(
        "case {case}: gave up after {took:?}, {} request(s), gaps {gaps:?}\n",
        ts.len()
    );
    eprintln!("{summary}");
    std::fs::write(dir.join("screen-at-give-up.txt"), env.screen(identity)).unwrap();
    std::fs::write(dir.join("screens-while-retrying.txt"), shots.join("\n")).unwrap();
    std::fs::write(
        dir.join("pane.raw"),
        std::fs::read(env.paths().pane_log(identity)).unwrap_or_default(),
    )
    .unwrap();
    summary
}

/// `iapeer send <to> --from echo-ea --message "LIMITED task"`.
fn send_limited(env: &TestEnv, to: &str) {
    env.ok(&["send", to, "--from", "echo-ea", "--message", "LIMITED task"]);
}

/// `IAPEER_LIMIT_RESET_SECS` (a recorder's reset time from now), else an hour.
fn reset_in() -> i64 {
    std::env::var("IAPEER_LIMIT_RESET_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3600)
}

/// The headers of a Claude case whose limit resets `reset_in` seconds from now.
fn claude_case_headers(case: &str, reset_in: i64) -> Vec<(String, String)> {
    let reset = now_secs() + reset_in;
    let rfc = jiff::Timestamp::from_second(reset).unwrap().to_string();
    let h: Vec<(&str, String)> = match case {
        "plain" => vec![],
        "retry-after" => vec![("retry-after", "3".into())],
        "ratelimit-reset" => vec![
            ("anthropic-ratelimit-requests-limit", "50".into()),
            ("anthropic-ratelimit-requests-remaining", "0".into()),
            ("anthropic-ratelimit-requests-reset", rfc.clone()),
            ("anthropic-ratelimit-tokens-reset", rfc.clone()),
            ("anthropic-ratelimit-input-tokens-reset", rfc),
            ("retry-after", "3".into()),
        ],
        "unified" => vec![
            ("anthropic-ratelimit-unified-status", "rejected".into()),
            ("anthropic-ratelimit-unified-reset", reset.to_string()),
            (
                "anthropic-ratelimit-unified-representative-claim",
                "five_hour".into(),
            ),
            ("anthropic-ratelimit-unified-5h-status", "rejected".into()),
            ("anthropic-ratelimit-unified-5h-reset", reset.to_string()),
            ("anthropic-ratelimit-unified-5h-utilization", "1.0".into()),
        ],
        other => panic!("unknown case {other}"),
    };
    h.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Exploratory recorder: a live claude peer whose stand-in answers the `LIMITED` turn with 429
/// (`IAPEER_LIMIT_CASE`: `plain`, `retry-after`, `ratelimit-reset`, `unified`) with Claude
/// Code's default retries, until it gives the turn up; then the stand-in recovers and the
/// next message's request shows what the conversation kept.
#[test]
#[ignore = "re-records fixtures from the real Claude Code; run by name with --ignored"]
fn record_claude_limit_give_up() {
    let case = std::env::var("IAPEER_LIMIT_CASE").unwrap_or_else(|_| "plain".into());
    let dir = record_dir(&format!("claude-{case}"));
    let (env, api) = crate::claude::world(&[("IAPEER_TICK_SECS", "1")]);
    let retries = std::env::var("IAPEER_LIMIT_RETRIES")
        .map(|n| format!("CLAUDE_CODE_MAX_RETRIES={n}\n"))
        .unwrap_or_default();
    // A subscription's login (its usage limits come as `anthropic-ratelimit-unified-*`).
    let auth = if std::env::var("IAPEER_LIMIT_OAUTH").is_ok() {
        "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-standin\n"
    } else {
        "ANTHROPIC_API_KEY=sk-ant-standin-key\n"
    };
    env.launch_env(
        "cb",
        "claude",
        &format!(
            "ANTHROPIC_BASE_URL={}\n{auth}IS_SANDBOX=1\n{retries}",
            api.url()
        ),
    );
    let headers = claude_case_headers(&case, reset_in());
    let reset_marks: Vec<String> = headers
        .iter()
        .filter(|(k, _)| k.ends_with("-reset"))
        .map(|(_, v)| v.clone())
        .collect();
    let limited = Arc::new(AtomicBool::new(true));
    let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let (l, t) = (limited.clone(), times.clone());
    api.script(move |req| {
        let main = req["tools"].as_array().is_some_and(|t| !t.is_empty());
        if main && last_user_text(req).contains("LIMITED") && l.load(Ordering::SeqCst) {
            t.lock().unwrap().push(Instant::now());
            Reply::Headed(headers.clone(), Box::new(Reply::Error(429)))
        } else {
            Reply::Text("ok".into())
        }
    });
    crate::busy::wake_claude(&env);
    let projects = env.home.join(".claude/projects");
    let summary = record_give_up(&env, "claude-cb", &dir, &case, &times, |_| {
        crate::busy::records(&projects)
            .iter()
            .any(|r| r["isApiErrorMessage"] == true)
    });
    let lines: Vec<String> = crate::busy::jsonl_lines(&projects);
    std::fs::write(dir.join("transcript.jsonl"), lines.join("\n") + "\n").unwrap();
    // Recovered: what does the next turn carry?
    limited.store(false, Ordering::SeqCst);
    let before = api.main_requests().len();
    let req = if std::env::var("IAPEER_LIMIT_WAIT_OWN").is_ok() {
        // Does the runtime take the turn up again by itself?
        env.wait_until(
            "the runtime's own next request",
            Duration::from_secs(300),
            |_| api.main_requests().len() > before,
        );
        std::fs::write(dir.join("screen-after-own.txt"), env.screen("claude-cb")).unwrap();
        api.main_requests().pop().unwrap()
    } else {
        env.ok(&["send", "cb", "--from", "echo-ea", "--message", "NEXT one"]);
        env.wait_until("the next turn", Duration::from_secs(60), |_| {
            api.has_main_request_with("NEXT one")
        });
        api.main_requests()
            .into_iter()
            .rfind(|r| last_user_text(r).contains("NEXT one"))
            .unwrap()
    };
    let msgs: Vec<String> = req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = common::anthropic::flatten(&m["content"]);
            let short: String = text.chars().take(300).collect();
            format!("{}: {}", m["role"], short.replace('\n', "⏎"))
        })
        .collect();
    std::fs::write(
        dir.join("next-request.txt"),
        summary + &msgs.join("\n") + "\n",
    )
    .unwrap();
    // The runtime's transcript settles after the record (a recorder, not a test).
    let lines: Vec<String> =
        common::settled(Duration::from_secs(60), Duration::from_secs(1), || {
            crate::busy::jsonl_lines(&projects)
        });
    std::fs::write(dir.join("transcript-after.jsonl"), lines.join("\n") + "\n").unwrap();
    // Files anywhere under HOME that hold a reset time the stand-in sent.
    let mut holders = Vec::new();
    find_holders(&env.home, &reset_marks, &mut holders);
    find_holders(&env.root, &reset_marks, &mut holders);
    eprintln!("files holding a reset time: {holders:?}");
}

fn find_holders(dir: &Path, marks: &[String], out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            find_holders(&p, marks, out);
        } else if let Ok(bytes) = std::fs::read(&p) {
            let text = String::from_utf8_lossy(&bytes);
            for m in marks {
                if let Some(at) = text.find(m.as_str()) {
                    let from = at.saturating_sub(200);
                    let ctx: String = text[from..].chars().take(300).collect();
                    out.push(format!("{}: …{ctx}", p.display()));
                }
            }
        }
    }
}

/// Exploratory recorder: a live codex peer whose stand-in answers the `LIMITED` turn with a
/// 429 (`IAPEER_LIMIT_CASE`: `plain`, `retry-after`, `usage-limit`, `usage-limit-bare`) with
/// Codex's default retries, until it gives the turn up; then the stand-in recovers and the
/// next message's request shows what the conversation kept.
#[test]
#[ignore = "re-records fixtures from the real Codex CLI; run by name with --ignored"]
fn record_codex_limit_give_up() {
    use common::openai::{input_text, last_input_text, Reply as OReply};
    let case = std::env::var("IAPEER_LIMIT_CASE").unwrap_or_else(|_| "plain".into());
    let dir = record_dir(&format!("codex-{case}"));
    let (env, api) = crate::codex::world_with(&[("IAPEER_TICK_SECS", "1")]);
    let reset = now_secs() + reset_in();
    let plain = serde_json::json!({"error": {"message": "stand-in: Rate limit reached for requests",
        "type": "requests", "code": "rate_limit_exceeded"}});
    let refusal = match case.as_str() {
        "plain" => OReply::error(429, plain),
        "retry-after" => OReply::Error {
            status: 429,
            body: plain,
            headers: vec![("retry-after".into(), "3".into())],
        },
        "usage-limit" => crate::notices::codex_usage_limit(
            reset,
            crate::notices::codex_limit_headers(reset, true),
        ),
        "usage-limit-bare" => crate::notices::codex_usage_limit(reset, Vec::new()),
        other => panic!("unknown case {other}"),
    };
    let limited = Arc::new(AtomicBool::new(true));
    let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let (l, t) = (limited.clone(), times.clone());
    api.script(move |req| {
        if last_input_text(req).contains("LIMITED") && l.load(Ordering::SeqCst) {
            t.lock().unwrap().push(Instant::now());
            refusal.clone()
        } else {
            OReply::Text("ok".into())
        }
    });
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "hello"]);
    crate::busy::wait_codex_turns(&env, 1);
    let sessions = env.home.join(".codex/sessions");
    let summary = record_give_up(&env, "codex-cx", &dir, &case, &times, |_| {
        crate::busy::records(&sessions)
            .iter()
            .filter(|r| r["type"] == "event_msg" && r["payload"]["type"] == "task_complete")
            .count()
            >= 2
    });
    let lines = crate::busy::jsonl_lines(&sessions);
    std::fs::write(dir.join("rollout.jsonl"), lines.join("\n") + "\n").unwrap();
    limited.store(false, Ordering::SeqCst);
    let before = api.recorded().len();
    if std::env::var("IAPEER_LIMIT_WAIT_OWN").is_ok() {
        common::poll(Duration::from_secs(120), || api.recorded().len() != before);
        eprintln!(
            "own requests after the refusal: {}",
            api.recorded().len() - before
        );
    }
    env.ok(&["send", "cx", "--from", "echo-ea", "--message", "NEXT one"]);
    env.wait_until("the next turn", Duration::from_secs(90), |_| {
        api.has_request_with("NEXT one")
    });
    let req = api
        .recorded()
        .into_iter()
        .rfind(|r| last_input_text(r).contains("NEXT one"))
        .unwrap();
    let items: Vec<String> = req["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = input_text(&serde_json::json!({ "input": m }));
            let short: String = text.chars().take(300).collect();
            format!("{} {}: {}", m["type"], m["role"], short.replace('\n', "⏎"))
        })
        .collect();
    std::fs::write(
        dir.join("next-request.txt"),
        summary + &items.join("\n") + "\n",
    )
    .unwrap();
    // The runtime's rollout settles after the record (a recorder, not a test).
    let lines = common::settled(Duration::from_secs(60), Duration::from_secs(1), || {
        crate::busy::jsonl_lines(&sessions)
    });
    std::fs::write(dir.join("rollout-after.jsonl"), lines.join("\n") + "\n").unwrap();
}

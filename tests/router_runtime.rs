//! A router runtime installed from a `runtime.json` (spec 04 §2 "Router runtimes", spec 05
//! always-on): a shell script on pipes receives wire-form envelopes on stdin, replies through
//! `iapeer send` with the identity the daemon gave it, is restarted when it dies, and stays
//! down while stopped.

use crate::common;

use common::TestEnv;
use std::path::PathBuf;
use std::time::Duration;

/// The bot: logs every stdin line, answers each message that is not an echo with
/// `iapeer send alice --message "got it"` (the echo agent answers "got it" with "echo: got
/// it", which must not be answered again).
const BOT: &str = r#"#!/bin/sh
bin="$1"; log="$2"; pidfile="$3"
echo $$ > "$pidfile.tmp" && mv "$pidfile.tmp" "$pidfile"
echo "bot up as $PEER_IDENTITY"
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$log"
  case "$line" in
    *'<message><![CDATA[echo: '*) ;;
    *'<message><![CDATA['*) "$bin" send alice --message "got it" || echo "reply failed" ;;
  esac
done
"#;

struct Bot {
    log: PathBuf,
    pidfile: PathBuf,
}

impl Bot {
    /// Install runtime `bot` whose run descriptor starts the script.
    fn install(env: &TestEnv) -> Bot {
        let script = env.dir.path().join("bot.sh");
        std::fs::write(&script, BOT).unwrap();
        let bot = Bot {
            log: env.dir.path().join("bot-stdin.log"),
            pidfile: env.dir.path().join("bot.pid"),
        };
        let manifest = serde_json::json!({
            "runtime": "bot",
            "version": "0.0.1",
            "run": {"command": "/bin/sh", "args": [script, common::bin(), bot.log, bot.pidfile]},
        });
        let path = env.root.join("runtimes/bot/runtime.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, manifest.to_string()).unwrap();
        bot
    }

    fn pid(&self) -> Option<u32> {
        common::read(&self.pidfile).trim().parse().ok()
    }

    fn stdin_log(&self) -> String {
        common::read(&self.log)
    }
}

fn started(env: &TestEnv) -> usize {
    env.count_events(
        "lifecycle",
        "always-on",
        &[("identity", "bot-bot"), ("action", "started")],
    )
}

fn pid_live(env: &TestEnv, bot: &Bot, not: Option<u32>) -> u32 {
    env.wait_until("the bot writes a new pid", Duration::from_secs(20), |_| {
        bot.pid()
            .is_some_and(|p| Some(p) != not && common::alive(p))
    });
    bot.pid().unwrap()
}

#[test]
fn a_router_runtime_gets_wire_envelopes_replies_and_is_kept_always_on() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    let bot = Bot::install(&env);
    env.start_daemon();

    // Created while the daemon runs: always-on, so it starts at once. A chat bot, not a
    // service: the echo agent answers no service (intelligence absent).
    let out = env.ok(&[
        "create",
        "bot",
        "--runtime",
        "bot",
        "--intelligence",
        "artificial",
    ]);
    assert!(
        out.contains("runtimes: bot (default bot), intelligence artificial"),
        "{out}"
    );
    env.wait_until("bot-bot starts", Duration::from_secs(20), |e| {
        started(e) == 1
    });
    let first_pid = pid_live(&env, &bot, None);
    assert_eq!(env.status_of("bot", "bot"), "live");
    env.wait_until(
        "the bot's stdout reaches its pane log",
        Duration::from_secs(10),
        |e| e.pane("bot-bot").contains("bot up as bot-bot"),
    );
    assert!(
        env.events("lifecycle", "wake").is_empty(),
        "a router peer is started, not woken"
    );

    // A message arrives on stdin in the wire form.
    let out = env.ok(&[
        "send",
        "bot",
        "--from",
        "echo-alice",
        "--message",
        "hello <bot> & ]]> you",
        "--topic",
        "t&\"9<>",
        "--json",
    ]);
    let result: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        result["delivered_to"],
        serde_json::json!({"personality": "bot", "runtime": "bot"})
    );
    assert_eq!(result["woke"], false);
    let ts = result["ts"].as_str().unwrap().to_string();
    let wire = format!(
        "<iap from-personality=\"alice\" from-runtime=\"echo\" from-intelligence=\"artificial\" ts=\"{ts}\" topic=\"t&amp;&quot;9&lt;&gt;\">\n\
         Reply via send_to_peer.\n\
         <message><![CDATA[hello <bot> & ]]]]><![CDATA[> you]]></message>\n\
         </iap>\n"
    );
    env.wait_until("the bot logs the envelope", Duration::from_secs(10), |_| {
        bot.stdin_log().contains(&wire)
    });
    assert!(
        bot.stdin_log().starts_with(&wire),
        "nothing else came first: {:?}",
        bot.stdin_log()
    );

    // Its reply (sent with the PEER_IDENTITY the daemon set) is routed to alice.
    env.wait_until(
        "the bot's reply reaches alice",
        Duration::from_secs(30),
        |e| {
            e.has_event(
                "delivery",
                "delivery",
                &[
                    ("caller", "bot-bot"),
                    ("to", "alice"),
                    ("ok", "true"),
                    ("path", "cli"),
                ],
            )
        },
    );
    env.wait_until("alice shows the reply", Duration::from_secs(10), |e| {
        e.pane("echo-alice").contains("from bot: got it")
    });
    // alice's echo comes back to the bot through MCP, and is not answered again.
    env.wait_until(
        "alice's echo reaches the bot",
        Duration::from_secs(30),
        |_| {
            bot.stdin_log()
                .contains("<message><![CDATA[echo: got it]]></message>")
        },
    );
    assert!(env.has_event(
        "delivery",
        "delivery",
        &[
            ("caller", "echo-alice"),
            ("to", "bot"),
            ("path", "mcp"),
            ("ok", "true")
        ]
    ));
    assert!(
        !env.pane("bot-bot").contains("reply failed"),
        "{}",
        env.diagnostics()
    );

    // Killed behind the daemon's back: restarted. A message sent right away waits for the
    // restart (within the revive grace) and reaches the new process.
    common::signal(first_pid, nix::sys::signal::Signal::SIGKILL);
    let out = env.ok(&[
        "send",
        "bot",
        "--from",
        "echo-alice",
        "--message",
        "while restarting",
    ]);
    assert_eq!(out.trim(), "delivered to bot (bot)");
    env.wait_until("a restart is scheduled", Duration::from_secs(10), |e| {
        e.has_event(
            "lifecycle",
            "always-on",
            &[("identity", "bot-bot"), ("action", "restart-scheduled")],
        )
    });
    env.wait_until("bot-bot starts again", Duration::from_secs(20), |e| {
        started(e) == 2
    });
    let second_pid = pid_live(&env, &bot, Some(first_pid));
    assert!(
        env.has_event(
            "exits",
            "session-exit",
            &[
                ("identity", "bot-bot"),
                ("cause", "child-exit"),
                ("signal", "SIGKILL")
            ]
        ),
        "{}",
        env.diagnostics()
    );
    assert_eq!(env.status_of("bot", "bot"), "live");
    env.wait_until("the new process reads", Duration::from_secs(10), |_| {
        bot.stdin_log()
            .contains("<message><![CDATA[while restarting]]></message>")
    });

    // Stopped: it ends, is not restarted and refuses messages.
    let out = env.ok(&["stop", "bot"]);
    assert!(out.contains("bot-bot"), "{out}");
    env.wait_until("the bot ends", Duration::from_secs(15), |_| {
        !common::alive(second_pid)
    });
    env.wait_until("the session is gone", Duration::from_secs(10), |e| {
        e.status_of("bot", "bot") == "stopped"
    });
    // Longer than the back-off of a second death (2 s).
    env.stays_false(
        "a restart of the stopped bot",
        Duration::from_millis(2500),
        |e| {
            started(e) != 2
                || e.count_events(
                    "lifecycle",
                    "always-on",
                    &[("identity", "bot-bot"), ("action", "restart-scheduled")],
                ) != 1
        },
    );
    assert_eq!(bot.pid(), Some(second_pid));
    let (_, err) = env.fails(
        &[
            "send",
            "bot",
            "--from",
            "echo-alice",
            "--message",
            "anyone?",
        ],
        1,
    );
    assert_eq!(
        err.trim(),
        "iapeer send: \"bot\" (bot) is stopped and not accepting messages; start it to resume: iapeer start bot"
    );

    // Started: running again at once.
    let out = env.ok(&["start", "bot"]);
    assert!(out.contains("running now: bot-bot"), "{out}");
    env.wait_until(
        "bot-bot starts a third time",
        Duration::from_secs(20),
        |e| started(e) == 3,
    );
    pid_live(&env, &bot, Some(second_pid));
    assert_eq!(env.status_of("bot", "bot"), "live");
    let out = env.ok(&[
        "send",
        "bot",
        "--from",
        "echo-alice",
        "--message",
        "welcome back",
    ]);
    assert_eq!(out.trim(), "delivered to bot (bot)");
    assert_eq!(env.ok(&["live-runtime", "bot"]), "bot\n");

    // Removed with --force: ended and never restarted.
    let third_pid = bot.pid().unwrap();
    let (_, err) = env.fails(&["remove", "bot"], 1);
    assert!(err.contains("peer \"bot\" is live (bot-bot)"), "{err}");
    let out = env.ok(&["remove", "bot", "--force"]);
    assert!(out.contains("folder kept: "), "{out}");
    env.wait_until("the removed bot ends", Duration::from_secs(15), |_| {
        !common::alive(third_pid)
    });
    env.stays_false(
        "a restart of the removed bot",
        Duration::from_millis(1500),
        |e| started(e) != 3,
    );
    assert_eq!(bot.pid(), Some(third_pid));
}

#[test]
fn a_router_peer_created_while_the_daemon_is_down_starts_with_it() {
    let mut env = TestEnv::new();
    let bot = Bot::install(&env);
    let out = env.run(&[
        "create",
        "bot",
        "--runtime",
        "bot",
        "--intelligence",
        "absent",
    ]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("starts when it does"),
        "{}",
        common::describe(&out)
    );
    assert!(bot.pid().is_none());
    env.start_daemon();
    env.wait_until(
        "bot-bot starts with the daemon",
        Duration::from_secs(20),
        |e| started(e) == 1,
    );
    let pid = pid_live(&env, &bot, None);
    // The daemon ends it on shutdown, and it is not restarted then.
    env.stop_daemon();
    assert!(!common::alive(pid), "the daemon ended its router session");
    assert!(
        env.has_event(
            "exits",
            "session-exit",
            &[("identity", "bot-bot"), ("cause", "shutdown")]
        ),
        "{}",
        env.diagnostics()
    );
    assert_eq!(started(&env), 1, "no restart during shutdown");
}

/// A daemon started over a registry it cannot read starts its always-on peers at the first
/// tick after `verify --fix` repaired it (it used to leave them down until a restart).
#[test]
fn always_on_peers_start_once_a_damaged_registry_is_repaired() {
    let mut env = TestEnv::new();
    env.set("IAPEER_TICK_SECS", "1");
    env.create_echo("alice");
    env.ok(&["create", "you", "--runtime", "human"]);
    std::fs::write(env.paths().registry(), "[]").unwrap();
    env.start_daemon();
    // A tick has run over the damaged registry (and started nobody).
    env.wait_hook("tick-done", 1);
    env.ok(&["verify", "--fix"]);
    env.wait_until("the human's writer is up", Duration::from_secs(15), |e| {
        e.status_of("you", "human") == "live"
    });
    env.ok(&[
        "send",
        "you",
        "--from",
        "echo-alice",
        "--message",
        "after the fix",
    ]);
}

/// A router peer created with `--no-bootstrap` while the daemon runs is not started, and
/// nothing will start it: `create` says how to, and a send to it says "start it", not
/// "retry" (which could never help).
#[test]
fn a_router_peer_created_without_bootstrap_is_refused_with_how_to_start_it() {
    let mut env = TestEnv::new();
    env.set("IAP_ALWAYS_ON_REVIVE_GRACE_MS", "1000");
    env.create_echo("alice");
    env.start_daemon();
    let out = env.run(&["create", "nob", "--runtime", "human", "--no-bootstrap"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("nob was not started (--no-bootstrap): iapeer start nob starts it"),
        "{}",
        common::describe(&out)
    );
    let (_, err) = env.fails(
        &["send", "nob", "--from", "echo-alice", "--message", "hi"],
        1,
    );
    assert_eq!(
        err.trim(),
        "iapeer send: peer \"nob\" (human) is not running and nothing is starting it — start it: iapeer start nob"
    );
    env.ok(&["start", "nob"]);
    env.wait_until("nob is up", Duration::from_secs(10), |e| {
        e.status_of("nob", "human") == "live"
    });
    env.ok(&["send", "nob", "--from", "echo-alice", "--message", "hi"]);
}

#[test]
fn a_router_that_cannot_take_input_never_reports_delivered() {
    let mut env = TestEnv::new();
    env.set("IAP_ALWAYS_ON_REVIVE_GRACE_MS", "1000");
    env.create_echo("alice");
    // Closes its stdin, then lives on: every write to it fails.
    let script = env.dir.path().join("deaf.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nexec 0<&-\necho deaf and alive\nexec sleep 600\n",
    )
    .unwrap();
    let manifest =
        serde_json::json!({"runtime": "deaf", "run": {"command": "/bin/sh", "args": [script]}});
    let path = env.root.join("runtimes/deaf/runtime.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, manifest.to_string()).unwrap();
    env.ok(&[
        "create",
        "deaf",
        "--runtime",
        "deaf",
        "--intelligence",
        "absent",
        "--no-bootstrap",
    ]);
    env.start_daemon();
    env.wait_until("the deaf router is up", Duration::from_secs(20), |e| {
        e.pane("deaf-deaf").contains("deaf and alive")
    });

    // The bytes cannot be written: a failure (after the revive grace), never "delivered".
    let (out, err) = env.fails(
        &[
            "send",
            "deaf",
            "--from",
            "echo-alice",
            "--message",
            "hello?",
        ],
        1,
    );
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err.trim(),
        "iapeer send: peer \"deaf\" (deaf) is offline and did not come back within 1000ms — retry"
    );
    assert!(
        env.has_event("delivery", "delivery", &[("to", "deaf"), ("ok", "false")]),
        "{}",
        env.diagnostics()
    );
    assert!(
        !env.has_event("delivery", "delivery", &[("to", "deaf"), ("ok", "true")]),
        "{}",
        env.diagnostics()
    );
}

/// Issue 7 item 8 (spec 11 §2): a peer whose program floods its output keeps a bounded pane
/// log: the base file stays near `IAPEER_PANELOG_MAX_BYTES`, at most `IAPEER_PANELOG_KEEP`
/// copies exist, and the newest output is in the base file.
#[test]
fn a_flooding_peer_keeps_a_bounded_pane_log_with_its_newest_output() {
    let mut env = TestEnv::new();
    // 40 MB of output, then a last line, then quiet.
    let script = env.dir.path().join("flood.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nhead -c 40000000 /dev/zero | tr '\\0' 'x'\necho\necho FLOOD-DONE\nexec sleep 100000\n",
    )
    .unwrap();
    let manifest = serde_json::json!({
        "runtime": "flood",
        "version": "0.0.1",
        "run": {"command": "/bin/sh", "args": [script]},
    });
    let path = env.root.join("runtimes/flood/runtime.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, manifest.to_string()).unwrap();
    let max: u64 = 9 * 1024 * 1024 + 1;
    env.set("IAPEER_PANELOG_MAX_BYTES", &max.to_string());
    env.start_daemon();
    env.ok(&[
        "create",
        "fl",
        "--runtime",
        "flood",
        "--intelligence",
        "absent",
    ]);
    let log = env.paths().pane_log("flood-fl");
    env.wait_until("the flood ends", Duration::from_secs(120), |_| {
        std::fs::read(&log).is_ok_and(|b| b.ends_with(b"FLOOD-DONE\n"))
    });
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let copy = |n: u32| PathBuf::from(format!("{}.{n}", log.display()));
    // One read of a pipe is at most 64 KiB past the bound.
    assert!(size(&log) <= max + 64 * 1024, "base {}", size(&log));
    assert!(size(&copy(1)) > 0 && size(&copy(1)) <= max);
    assert!(size(&copy(2)) > 0 && size(&copy(2)) <= max);
    assert!(!copy(3).exists(), "only two copies are kept");
    let total: u64 = std::fs::read_dir(env.paths().pane_logs_dir())
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(total <= 3 * (max + 64 * 1024), "folder {total}");
    env.ok(&["stop", "fl"]);
}

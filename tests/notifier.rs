//! The built-in scheduler and watcher (spec 09, issue 9) with the real daemon: service peers
//! `timer` and `watcher` on the built-in `notifier` runtime (`iapeer notifier-run`), called
//! by echo peers over MCP and the CLI; fires, watcher lines, the spool across a `kill -9` of
//! the daemon, and triggers written in the `@agfpd/notifier-runtime` package's format.

use crate::common;

use common::TestEnv;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Deliveries `notifier-<service>` → `to` that succeeded.
fn delivered(env: &TestEnv, service: &str, to: &str) -> usize {
    env.events("delivery", "delivery")
        .iter()
        .filter(|d| {
            d["caller"] == format!("notifier-{service}") && d["to"] == to && d["ok"] == "true"
        })
        .count()
}

/// The service's own log (`<root>/logs/notifier/<peer>.log`), parsed, lines of event `ev`.
fn service_events(
    env: &TestEnv,
    peer: &str,
    ev: &str,
) -> Vec<std::collections::HashMap<String, String>> {
    let path = env
        .root
        .join("logs")
        .join("notifier")
        .join(format!("{peer}.log"));
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            iapeer::eventlog::parse_line(l)
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>()
        })
        .filter(|m| m.get("ev").map(String::as_str) == Some(ev))
        .collect()
}

/// Wait (30 s at most) until the `timer` service has reported `n` sends (`sent`) that
/// `which` picks.
fn wait_sent(
    env: &TestEnv,
    what: &str,
    n: usize,
    which: impl Fn(&std::collections::HashMap<String, String>) -> bool,
) {
    env.wait_until(what, Duration::from_secs(30), |e| {
        service_events(e, "timer", "sent")
            .iter()
            .filter(|s| which(s))
            .count()
            >= n
    });
}

/// How many times the watcher service started the script of trigger `id`.
fn watch_starts(env: &TestEnv, id: &str) -> usize {
    service_events(env, "watcher", "watch-start")
        .iter()
        .filter(|s| s["id"] == id)
        .count()
}

fn profile(env: &TestEnv, peer: &str) -> Value {
    let p = env.peer_dir(peer).join(".iapeer").join("peer-profile.json");
    serde_json::from_str(&common::read(&p)).unwrap()
}

fn spool_dir(env: &TestEnv, service: &str) -> PathBuf {
    env.root
        .join("state")
        .join("notifier")
        .join(service)
        .join("escalation")
}

fn spool_files(dir: &Path) -> Vec<Value> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|f| f.path().extension().is_some_and(|e| e == "json"))
                .map(|f| serde_json::from_str(&common::read(&f.path())).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// The package's default id: prefix + 12 hex of sha256 over the compact JSON of the fields.
/// The bodies of the messages from `from` in human `peer`'s inbox, oldest first.
fn inbox_bodies_from(env: &TestEnv, peer: &str, from: &str) -> Vec<String> {
    let inbox = std::fs::read_to_string(env.paths().inbox(peer)).unwrap_or_default();
    inbox
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["from"] == from)
        .filter_map(|r| r["body"].as_str().map(str::to_string))
        .collect()
}

/// Send `call` (a JSON body) to the notifier service `service` as `from`.
fn call_service(env: &TestEnv, service: &str, from: &str, call: &Value) -> String {
    env.ok(&[
        "send",
        service,
        "--from",
        from,
        "--message",
        &call.to_string(),
    ])
}

fn package_id(prefix: &str, fields_json: &str) -> String {
    let d = Sha256::digest(fields_json.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}-{}", &hex[..12])
}

/// Every live process whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name "(…)": state ppid pgrp …
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split(' ').collect();
        // A zombie counts too: nobody reaped it.
        if f.len() > 2 && f[2] == pgid.to_string() {
            out.push(pid);
        }
    }
    out
}

#[test]
fn an_echo_peer_registers_an_every_2s_timer_through_mcp_and_gets_three_fires() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    // The registry description is the call card, so every agent sees how to call it.
    let rows = env.list();
    let timer = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["personality"] == "timer")
        .cloned()
        .unwrap();
    let card = timer["description"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        card.starts_with("Scheduler.") && card.contains("@every") && card.chars().count() <= 450,
        "{timer}"
    );
    env.start_daemon();
    let token = crate::mcp::wake_and_token(&env, "alice");
    let bearer = format!("Bearer {token}");
    let call =
        json!({"when":"@every 2s","message":"tick from timer","target":"self","topic":"beat"});
    let result = crate::mcp::call(
        env.port(),
        &[
            ("X-IAPeer-Identity", "echo-alice"),
            ("Authorization", &bearer),
        ],
        "timer",
        &call.to_string(),
    );
    assert_ne!(result["isError"], true, "{result}\n{}", env.diagnostics());
    // The trigger is stored in alice's profile, in the package's shape, with the package's id.
    env.wait_until(
        "the trigger in alice's profile",
        Duration::from_secs(15),
        |e| profile(e, "alice")["notifier"]["triggers"].is_array(),
    );
    let stored = profile(&env, "alice")["notifier"]["triggers"][0].clone();
    let id = package_id(
        "time",
        r#"{"when":"@every 2s","message":"tick from timer","target":"alice","topic":"beat"}"#,
    );
    assert_eq!(
        stored,
        json!({"role":"time","id":id,"owner":"alice","target":"alice","when":"@every 2s",
               "message":"tick from timer","topic":"beat"})
    );
    // A confirmation plus three fires reach alice.
    wait_sent(
        &env,
        "a confirmation and 3 fires delivered to alice",
        3,
        |s| s["kind"] == "fire" && s["to"] == "alice",
    );
    assert!(
        delivered(&env, "timer", "alice") >= 4,
        "{}",
        env.diagnostics()
    );
    let pane = env.pane("echo-alice");
    assert!(pane.contains("from timer: tick from timer"), "{pane}");
    assert!(
        pane.contains(&format!("registered timer trigger \"{id}\"")),
        "{pane}"
    );
    assert!(!pane.contains("not a registered peer"), "{pane}");
    // The fires are 2 s apart on the grid armed at registration.
    let fires: Vec<String> = service_events(&env, "timer", "sent")
        .iter()
        .filter(|s| s["kind"] == "fire")
        .map(|s| s["scheduled"].clone())
        .collect();
    let ts: Vec<jiff::Timestamp> = fires.iter().map(|s| s.parse().unwrap()).collect();
    for w in ts.windows(2) {
        assert_eq!(
            w[1].duration_since(w[0]),
            jiff::SignedDuration::from_secs(2),
            "{fires:?}"
        );
    }
    // The echo stand-in answers none of a service's messages (issue 26 item 7): its one
    // message to the timer is its call, and the timer has nothing to reject.
    assert_eq!(
        env.count_events(
            "delivery",
            "delivery",
            &[("caller", "echo-alice"), ("to", "timer")]
        ),
        1,
        "{}",
        env.diagnostics()
    );
    assert!(
        service_events(&env, "timer", "call-rejected").is_empty(),
        "{}",
        env.diagnostics()
    );
}

/// `rename` of a peer with a timer trigger (stored resolved: `self` as its name), and of a
/// peer another one's trigger falls back to: every trigger follows the new name, the running
/// timer reads them again, and the fires reach the renamed peer (they went to the old name,
/// failed and were lost).
#[test]
fn a_renamed_peer_keeps_its_timer_triggers_and_the_fires_reach_it() {
    let mut env = TestEnv::new();
    env.ok(&["create", "kay", "--runtime", "human"]);
    env.ok(&["create", "ann", "--runtime", "human"]);
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    env.start_daemon();
    env.wait_until("the timer is up", Duration::from_secs(15), |e| {
        e.status_of("timer", "notifier") == "live"
    });
    call_service(
        &env,
        "timer",
        "human-kay",
        &json!({"when":"@every 1s","message":"tick for kay","target":"self","id":"tk"}),
    );
    call_service(
        &env,
        "timer",
        "human-ann",
        &json!({"when":"@every 1s","message":"tock for ann","target":"self","id":"ta",
                "fallback":"kay"}),
    );
    env.wait_until("kay got a tick", Duration::from_secs(15), |e| {
        inbox_bodies_from(e, "kay", "timer")
            .iter()
            .any(|b| b == "tick for kay")
    });
    let out = env.ok(&["rename", "kay", "kai", "--force"]);
    assert!(
        out.contains(
            "timer/watcher triggers naming kay now name kai (in the profiles of ann, kai)"
        ),
        "{out}"
    );
    let kai = profile(&env, "kai")["notifier"]["triggers"][0].clone();
    assert_eq!(kai["target"], "kai", "{kai}");
    assert_eq!(
        profile(&env, "ann")["notifier"]["triggers"][0]["fallback"],
        json!(["kai"])
    );
    let ticks = |e: &TestEnv| {
        inbox_bodies_from(e, "kai", "timer")
            .iter()
            .filter(|b| *b == "tick for kay")
            .count()
    };
    let before = ticks(&env);
    env.wait_until(
        "kai gets fires after the rename",
        Duration::from_secs(20),
        |e| ticks(e) >= before + 2,
    );
    call_service(&env, "timer", "human-kai", &json!({"cmd":"list"}));
    env.wait_until("the list names kai", Duration::from_secs(10), |e| {
        inbox_bodies_from(e, "kai", "timer")
            .iter()
            .any(|b| b.contains("tk — @every 1s → kai"))
    });
    assert!(
        service_events(&env, "timer", "notifier-lost").is_empty(),
        "no fire was lost: {:?}",
        service_events(&env, "timer", "notifier-lost")
    );
}

#[test]
fn a_watcher_scripts_lines_reach_the_target_and_no_process_outlives_a_stop() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&["create", "watcher", "--runtime", "notifier"]);
    env.start_daemon();
    let call = json!({"script":"echo first line; echo; echo second line >&1; echo oops >&2; sleep 300 & sleep 300",
                      "target":"self","topic":"watch"});
    env.ok(&[
        "send",
        "watcher",
        "--from",
        "echo-alice",
        "--message",
        &call.to_string(),
    ]);
    env.wait_until("both lines reach alice", Duration::from_secs(30), |e| {
        let pane = e.pane("echo-alice");
        pane.contains("from watcher: first line") && pane.contains("from watcher: second line")
    });
    // stderr is only logged; the empty line is no message.
    assert!(!env.pane("echo-alice").contains("from watcher: oops"));
    assert!(service_events(&env, "watcher", "watch-stderr")
        .iter()
        .any(|e| e["line"] == "oops"));
    let forwards = |e: &TestEnv| {
        service_events(e, "watcher", "sent")
            .iter()
            .filter(|s| s["kind"] == "forward")
            .count()
    };
    env.wait_until("both forwards logged", Duration::from_secs(10), |e| {
        forwards(e) >= 2
    });
    assert_eq!(forwards(&env), 2);
    let pgid: u32 = service_events(&env, "watcher", "watch-start")[0]["pid"]
        .parse()
        .unwrap();
    assert!(
        group_members(pgid).len() >= 2,
        "the script's group (sh and its sleeps) runs"
    );
    env.ok(&["stop", "watcher"]);
    env.wait_until(
        "no process of the script's group is left",
        Duration::from_secs(10),
        |_| group_members(pgid).is_empty(),
    );
    // Started again, the script runs again; a daemon restart leaves nothing behind either.
    env.ok(&["start", "watcher"]);
    env.wait_until("the script started again", Duration::from_secs(15), |e| {
        service_events(e, "watcher", "watch-start").len() >= 2
    });
    let pgid2: u32 = service_events(&env, "watcher", "watch-start")[1]["pid"]
        .parse()
        .unwrap();
    env.stop_daemon();
    env.wait_until(
        "no process of the second run is left",
        Duration::from_secs(10),
        |_| group_members(pgid2).is_empty(),
    );
}

#[test]
fn a_signal_pending_in_the_spool_when_the_daemon_is_killed_is_delivered_after_restart_exactly_once()
{
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    // A check program that lets exactly one fire through.
    let flag = env.dir.path().join("fired-once");
    let check = env.dir.path().join("once.sh");
    std::fs::write(
        &check,
        format!(
            "#!/bin/sh\ntest -e {0} && exit 1\ntouch {0}\nexit 0\n",
            flag.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&check, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.start_daemon();
    // "ghost" does not exist yet: the fire cannot be delivered and waits in the spool.
    let call = json!({"when":"@every 2s","message":"the one signal","target":"ghost",
                      "check": check.to_str().unwrap()});
    env.ok(&[
        "send",
        "timer",
        "--from",
        "echo-alice",
        "--message",
        &call.to_string(),
    ]);
    // Registered all the same (the peer may come later), with a note that says so.
    env.wait_until(
        "the confirmation notes the unregistered target",
        Duration::from_secs(20),
        |e| {
            e.pane("echo-alice")
                .contains("Note: not a registered peer (yet): \"ghost\"")
        },
    );
    let dir = spool_dir(&env, "timer");
    env.wait_until(
        "the fire failed once and waits in the spool",
        Duration::from_secs(20),
        |_| {
            spool_files(&dir)
                .iter()
                .any(|f| f["attempts"].as_array().is_some_and(|a| a.len() == 1))
        },
    );
    let pending = spool_files(&dir);
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["status"], "pending");
    assert_eq!(pending[0]["kind"], "fire");
    assert_eq!(pending[0]["chain"], json!(["ghost", "alice"]));
    let sig = pending[0]["id"].as_str().unwrap().to_string();

    // kill -9: the service sees its input close and ends; the signal stays in the spool.
    let mut daemon = env.daemon.take().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    env.create_echo("ghost");
    env.start_daemon();
    env.wait_until("the signal reaches ghost", Duration::from_secs(30), |e| {
        e.pane("echo-ghost").contains("from timer: the one signal")
    });
    // Exactly once. The two ways to a second delivery are shut, as the service reports: the
    // re-driven signal was sent (its spool entry is gone, nothing is left to re-drive), and
    // then the timer came round twice more and its check let nothing through.
    wait_sent(&env, "the re-driven signal is reported sent", 1, |s| {
        s["sig"] == sig
    });
    let skipped = service_events(&env, "timer", "check-skip").len();
    env.wait_until(
        "two more turns of the timer, skipped by its check",
        Duration::from_secs(30),
        |e| service_events(e, "timer", "check-skip").len() >= skipped + 2,
    );
    env.router_settled();
    assert_eq!(
        delivered(&env, "timer", "ghost"),
        1,
        "{}",
        env.diagnostics()
    );
    assert_eq!(
        env.pane("echo-ghost")
            .matches("from timer: the one signal")
            .count(),
        1,
        "received once"
    );
    assert!(spool_files(&dir).is_empty(), "the spool file is removed");
    assert!(service_events(&env, "timer", "spool-redrive")
        .iter()
        .any(|e| e["sig"] == sig));
    assert_eq!(
        delivered(&env, "timer", "alice"),
        1,
        "only the confirmation"
    );
}

#[test]
fn triggers_written_in_the_package_format_are_picked_up_unchanged() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    // alice's profile as the @agfpd/notifier-runtime package writes it: an entry without id,
    // one with a single-string fallback, a malformed one, and a watcher entry.
    let path = env
        .peer_dir("alice")
        .join(".iapeer")
        .join("peer-profile.json");
    let mut p: Value = serde_json::from_str(&common::read(&path)).unwrap();
    p["notifier"] = json!({"triggers":[
        {"role":"time","owner":"alice","target":"alice","when":"@every 2s","message":"from the package"},
        {"role":"time","id":"nightly","owner":"alice","target":"alice","when":"0 3 * * *","message":"n","fallback":"self"},
        {"role":"time","owner":"alice","target":"alice","when":"0 0 30 2 *","message":"never"},
        {"role":"event","owner":"alice","target":"alice","script":"true"}
    ]});
    p["somethingElse"] = json!({"kept": true});
    let text = serde_json::to_string_pretty(&p).unwrap() + "\n";
    std::fs::write(&path, &text).unwrap();
    env.start_daemon();
    env.wait_until(
        "the package's trigger fires",
        Duration::from_secs(30),
        |e| {
            e.pane("echo-alice")
                .contains("from timer: from the package")
        },
    );
    // The malformed entry is skipped with a line in the lifecycle log (iapeer logs shows it).
    assert!(env
        .events("lifecycle", "notifier-trigger-skipped")
        .iter()
        .any(|e| {
            e["detail"].starts_with("alice[2]:") && e["detail"].contains("can never fire")
        }));
    // list shows the package's ids: the content hash for the unnamed entry.
    env.ok(&[
        "send",
        "timer",
        "--from",
        "echo-alice",
        "--message",
        r#"{"cmd":"list"}"#,
    ]);
    let id = package_id(
        "time",
        r#"{"when":"@every 2s","message":"from the package","target":"alice"}"#,
    );
    env.wait_until("the list reply", Duration::from_secs(20), |e| {
        let pane = e.pane("echo-alice");
        pane.contains("Your timer triggers (2):") && pane.contains(&id) && pane.contains("nightly")
    });
    // Reading never rewrote the profile.
    assert_eq!(common::read(&path), text);
    // Unregistering one keeps every other entry and key as it was.
    env.ok(&[
        "send",
        "timer",
        "--from",
        "echo-alice",
        "--message",
        &json!({"cmd":"unregister","id":"nightly"}).to_string(),
    ]);
    env.wait_until("nightly removed", Duration::from_secs(20), |e| {
        profile(e, "alice")["notifier"]["triggers"]
            .as_array()
            .unwrap()
            .len()
            == 3
    });
    let after = profile(&env, "alice");
    assert_eq!(after["somethingElse"], json!({"kept": true}));
    assert_eq!(
        after["notifier"]["triggers"][0],
        p["notifier"]["triggers"][0]
    );
    assert_eq!(
        after["notifier"]["triggers"][2],
        p["notifier"]["triggers"][3]
    );
}

#[test]
fn a_crash_looping_script_is_stopped_and_a_silent_one_restarted_with_alerts_to_the_owner() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&["create", "watcher", "--runtime", "notifier"]);
    env.start_daemon();
    for call in [
        json!({"id":"broken","script":"exit 3","target":"self"}),
        json!({"id":"quiet","script":"sleep 300","target":"self","heartbeatSec":2}),
        json!({"id":"leaver","script":"sleep 300 & sleep 1; exit 0","target":"self"}),
    ] {
        env.ok(&[
            "send",
            "watcher",
            "--from",
            "echo-alice",
            "--message",
            &call.to_string(),
        ]);
    }
    // quiet: no line for 2 s → the owner is alerted, the script's group killed and restarted.
    env.wait_until("the silence alert", Duration::from_secs(20), |e| {
        e.pane("echo-alice")
            .contains("from watcher: [watcher] Your watcher quiet printed nothing for 2s")
    });
    let first: u32 = service_events(&env, "watcher", "watch-start")
        .iter()
        .find(|s| s["id"] == "quiet")
        .unwrap()["pid"]
        .parse()
        .unwrap();
    env.wait_until(
        "quiet restarted, its first group gone",
        Duration::from_secs(15),
        |e| {
            service_events(e, "watcher", "watch-start")
                .iter()
                .filter(|s| s["id"] == "quiet")
                .count()
                >= 2
                && group_members(first).is_empty()
        },
    );
    // leaver: its shell exits and leaves a child; the child goes with its group, then the
    // script starts again.
    let leaver = |e: &TestEnv| -> Vec<u32> {
        service_events(e, "watcher", "watch-start")
            .iter()
            .filter(|s| s["id"] == "leaver")
            .map(|s| s["pid"].parse().unwrap())
            .collect()
    };
    env.wait_until("leaver started twice", Duration::from_secs(20), |e| {
        leaver(e).len() >= 2
    });
    let first_leaver = leaver(&env)[0];
    env.wait_until(
        "the first run's child is gone",
        Duration::from_secs(10),
        |_| group_members(first_leaver).is_empty(),
    );
    // broken: five quick failures (back-off 1, 2, 4, 8 s) stop it for good, and alice hears.
    env.wait_until("the crash-loop alert", Duration::from_secs(45), |e| {
        e.pane("echo-alice")
            .contains("from watcher: [watcher] Your watcher broken failed 5 times within 60 s")
    });
    let starts = |e: &TestEnv| watch_starts(e, "broken");
    assert_eq!(starts(&env), 5);
    assert!(env
        .events("lifecycle", "watch-stopped")
        .iter()
        .any(|e| e["id"] == "broken"));
    // Stopped for good: the alert went out when its slot was dropped (nothing is left to
    // restart it), and the stop is stored with alice's trigger, so no later start of the
    // service runs it either.
    assert!(env
        .pane("echo-alice")
        .contains("and is stopped (it stays stopped across restarts)"));
    let triggers = profile(&env, "alice")["notifier"]["triggers"].clone();
    let broken = triggers
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["id"] == "broken"))
        .unwrap_or_else(|| panic!("no trigger broken: {triggers}"));
    assert!(broken["stopped"].is_object(), "{broken}");
    assert_eq!(starts(&env), 5, "not started again");
    // alice's echoes of the alerts get no teaching reply.
    assert!(service_events(&env, "watcher", "call-rejected").is_empty());
}

/// Newcomer walkthrough: a watcher stopped after 5 quick failures came back at every start of
/// the service (`iapeer new watcher`, a daemon restart), ran 5 more times and alerted again,
/// and `list` showed it as if it ran. The stop is now stored with the trigger: a restart
/// leaves it stopped, `list` marks it with how to run it again, and registering it again
/// (same id) clears the stop.
#[test]
fn a_watcher_stopped_for_good_stays_stopped_across_a_restart_until_registered_again() {
    let mut env = TestEnv::new();
    env.ok(&["create", "op", "--runtime", "human"]);
    env.ok(&["create", "watcher", "--runtime", "notifier"]);
    env.start_daemon();
    let register = |env: &TestEnv, script: &str| {
        call_service(
            env,
            "watcher",
            "human-op",
            &json!({"script":script,"target":"self","id":"bad"}),
        )
    };
    register(&env, "exit 7");
    let alerts = |e: &TestEnv| {
        inbox_bodies_from(e, "op", "watcher")
            .iter()
            .filter(|b| b.starts_with("[watcher] Your watcher bad failed 5 times"))
            .count()
    };
    env.wait_until("the crash-loop alert", Duration::from_secs(45), |e| {
        alerts(e) == 1
    });
    let starts = |e: &TestEnv| watch_starts(e, "bad");
    assert_eq!(starts(&env), 5);
    let stored = profile(&env, "op")["notifier"]["triggers"][0].clone();
    assert_eq!(stored["stopped"]["last"], "exit status 7", "{stored}");

    // A new service process reads the triggers again at its start, before it takes calls:
    // once it answered a list, it has decided about "bad".
    env.ok(&["new", "watcher"]);
    env.wait_until("the new process started", Duration::from_secs(20), |e| {
        service_events(e, "watcher", "notifier-start").len() == 2
    });
    call_service(&env, "watcher", "human-op", &json!({"cmd":"list"}));
    let listed = |e: &TestEnv| {
        inbox_bodies_from(e, "op", "watcher")
            .into_iter()
            .rfind(|b| b.starts_with("Your watcher triggers (1):"))
    };
    env.wait_until("the list reply", Duration::from_secs(20), |e| {
        listed(e).is_some()
    });
    let list = listed(&env).unwrap();
    assert!(
        list.contains("• bad — exit 7 → op\n  STOPPED since ")
            && list.contains("register it again with the same id"),
        "{list}"
    );
    assert_eq!(starts(&env), 5, "not run again by the restart");
    assert_eq!(alerts(&env), 1, "no second alert");

    // Registered again (fixed): the stop is cleared and the script runs.
    register(&env, "echo fixed; sleep 300");
    env.wait_until("the fixed script's line", Duration::from_secs(20), |e| {
        inbox_bodies_from(e, "op", "watcher").contains(&"fixed".to_string())
    });
    let stored = profile(&env, "op")["notifier"]["triggers"][0].clone();
    assert!(stored.get("stopped").is_none(), "{stored}");
}

/// A signal's send reached the peer, then the service died before it removed the spool file
/// (the window between `iapeer send` answering and the removal): the next process sends the
/// spool file again, and the daemon answers it "delivered earlier" from the message id (the
/// spool id) instead of delivering it twice. Before the fix the notifier sent without an id
/// and the peer got the signal twice (the flake of the watcher-restart test above).
#[test]
fn a_signal_sent_before_the_service_died_is_not_delivered_again_by_the_next_one() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    env.start_daemon();
    env.wait_until("the service started", Duration::from_secs(20), |e| {
        service_events(e, "timer", "notifier-start").len() == 1
    });
    // What the first process did before it died: the send with the spool id went through.
    let id = "mj0a1b2c-0001beef";
    env.ok(&[
        "send",
        "alice",
        "--from",
        "notifier-timer",
        "--id",
        id,
        "--message",
        "ONCE ONLY reminder",
    ]);
    // ...and its spool file was still there, pending.
    let dir = spool_dir(&env, "timer");
    std::fs::create_dir_all(&dir).unwrap();
    let pending = json!({"v":1,"id":id,"createdAt":"2026-12-07T05:00:00.000Z",
        "kind":"fire","target":"alice","message":"ONCE ONLY reminder",
        "owner":"alice","chain":["alice"],"attempts":[],"status":"pending"});
    std::fs::write(
        dir.join(format!("{id}.json")),
        serde_json::to_string_pretty(&pending).unwrap() + "\n",
    )
    .unwrap();
    env.ok(&["new", "timer"]);
    env.wait_until("the spool file is removed", Duration::from_secs(30), |_| {
        spool_files(&dir).is_empty()
    });
    let sent = service_events(&env, "timer", "sent");
    assert_eq!(
        sent.len(),
        1,
        "the redriven signal counted as sent: {sent:?}"
    );
    let pane = env.pane("echo-alice");
    assert_eq!(
        pane.matches("ONCE ONLY reminder").count(),
        1,
        "delivered once: {pane}"
    );
}

#[test]
fn spool_files_in_the_package_format_are_redriven_and_lost_ones_listed() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    // Written as @agfpd/notifier-runtime 0.3.x writes them: a pending fire with one failed
    // attempt, and a dead letter.
    let dir = spool_dir(&env, "timer");
    std::fs::create_dir_all(&dir).unwrap();
    let pending = json!({"v":1,"id":"mio0a1b2-1a2b3c4d","createdAt":"2026-12-01T05:00:00.000Z",
        "kind":"fire","target":"alice","message":"left over from the package","topic":"pkg",
        "owner":"alice","chain":["alice"],
        "attempts":[{"target":"alice","at":"2026-12-01T05:00:01.000Z","error":"wake failed"}],
        "status":"pending","meta":{"owner":"alice","when":"0 5 * * *"}});
    let lost = json!({"v":1,"id":"mio0a1b3-5e6f7a8b","createdAt":"2026-12-01T04:00:00.000Z",
        "kind":"forward","target":"bob","message":"disk full on db-1","owner":"alice",
        "chain":["bob","alice"],"attempts":[],"status":"lost"});
    for v in [&pending, &lost] {
        let path = dir.join(format!("{}.json", v["id"].as_str().unwrap()));
        std::fs::write(path, serde_json::to_string_pretty(v).unwrap() + "\n").unwrap();
    }
    env.start_daemon();
    env.wait_until(
        "the pending signal reaches alice",
        Duration::from_secs(30),
        |e| {
            e.pane("echo-alice")
                .contains("from timer: left over from the package")
        },
    );
    env.wait_until("its spool file is removed", Duration::from_secs(10), |_| {
        spool_files(&dir).len() == 1
    });
    assert_eq!(
        spool_files(&dir)[0]["status"],
        "lost",
        "the dead letter stays"
    );
    env.ok(&[
        "send",
        "timer",
        "--from",
        "echo-alice",
        "--message",
        r#"{"cmd":"list"}"#,
    ]);
    env.wait_until("list shows the lost signal", Duration::from_secs(20), |e| {
        let pane = e.pane("echo-alice");
        pane.contains("Lost signals") && pane.contains("mio0a1b3-5e6f7a8b")
    });
    // alice has no triggers: the list offers to dismiss the lost signal, not to remove a
    // trigger (newcomer walkthrough: both hints came with every list, and unregistering a
    // lost signal's id answered "you have no timer trigger").
    let pane = env.pane("echo-alice");
    assert!(
        pane.contains("Dismiss one (its spool file is deleted)") && !pane.contains("Remove one"),
        "{pane}"
    );
    // Another peer cannot dismiss it; alice can, with unregister and its id.
    env.create_echo("bob");
    for (peer, answer, left) in [
        ("bob", "no timer trigger and no lost signal with id", 1),
        ("alice", "lost signal \"mio0a1b3-5e6f7a8b\" dismissed", 0),
    ] {
        let from = format!("echo-{peer}");
        let call = json!({"cmd":"unregister","id":"mio0a1b3-5e6f7a8b"});
        call_service(&env, "timer", &from, &call);
        env.wait_until(answer, Duration::from_secs(20), |e| {
            e.pane(&from).contains(answer)
        });
        assert_eq!(spool_files(&dir).len(), left, "{peer}");
    }
}

#[test]
fn a_signal_no_link_accepts_is_lost_and_shown_by_logs_and_list() {
    let mut env = TestEnv::new();
    env.set("IAPEER_NOTIFIER_RETRY_MS", "300");
    env.create_echo("alice");
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    // A check that lets one fire through once the test says go.
    let go = env.dir.path().join("go");
    let fired = env.dir.path().join("fired");
    let check = env.dir.path().join("gate.sh");
    std::fs::write(
        &check,
        format!(
            "#!/bin/sh\ntest -e {} || exit 1\ntest -e {} && exit 1\ntouch {}\nexit 0\n",
            go.display(),
            fired.display(),
            fired.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&check, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.start_daemon();
    let call = json!({"when":"@every 1s","message":"nobody hears this","target":"ghost",
                      "check": check.to_str().unwrap()});
    env.ok(&[
        "send",
        "timer",
        "--from",
        "echo-alice",
        "--message",
        &call.to_string(),
    ]);
    env.wait_until(
        "the confirmation reached alice",
        Duration::from_secs(20),
        |e| delivered(e, "timer", "alice") >= 1,
    );
    // Nobody can take it: ghost does not exist and the owner is stopped.
    env.ok(&["stop", "alice"]);
    std::fs::write(&go, "").unwrap();
    env.wait_until("the signal is lost", Duration::from_secs(30), |e| {
        !e.events("lifecycle", "notifier-lost").is_empty()
    });
    let lost = &env.events("lifecycle", "notifier-lost")[0];
    assert_eq!(
        (
            lost["for"].as_str(),
            lost["owner"].as_str(),
            lost["attempts"].as_str()
        ),
        ("ghost", "alice", "4")
    );
    let sig = lost["sig"].clone();
    let files = spool_files(&spool_dir(&env, "timer"));
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["status"], "lost");
    assert_eq!(files[0]["chain"], json!(["ghost", "alice"]));
    // iapeer logs shows it.
    let logs = env.ok(&["logs"]);
    assert!(
        logs.contains("notifier-lost") && logs.contains(&sig),
        "{logs}"
    );
    // …and so does the owner's next list.
    env.ok(&["start", "alice"]);
    env.ok(&[
        "send",
        "timer",
        "--from",
        "echo-alice",
        "--message",
        r#"{"cmd":"list"}"#,
    ]);
    env.wait_until("list shows the lost signal", Duration::from_secs(20), |e| {
        let pane = e.pane("echo-alice");
        pane.contains("Lost signals") && pane.contains(&sig)
    });
}

#[test]
fn replies_carry_the_inbound_topic_and_an_ephemeral_requester_gets_none() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("worker");
    let path = env
        .peer_dir("worker")
        .join(".iapeer")
        .join("peer-profile.json");
    let mut p: Value = serde_json::from_str(&common::read(&path)).unwrap();
    p["wake_policy"] = "ephemeral".into();
    std::fs::write(&path, serde_json::to_string_pretty(&p).unwrap()).unwrap();
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    env.start_daemon();
    // alice's reply comes back on her topic.
    env.ok(&[
        "send",
        "timer",
        "--from",
        "echo-alice",
        "--topic",
        "plans",
        "--message",
        "help",
    ]);
    env.wait_until("the help reply", Duration::from_secs(20), |e| {
        delivered(e, "timer", "alice") >= 1
    });
    let reply = env
        .events("delivery", "delivery")
        .into_iter()
        .find(|d| d["caller"] == "notifier-timer" && d["to"] == "alice")
        .unwrap();
    assert_eq!(reply["topic"], "plans");
    // The ephemeral worker registers (stored in its profile) but no reply would start a worker.
    let call = json!({"when":"0 3 * * *","message":"nightly","target":"self"});
    env.ok(&[
        "send",
        "timer",
        "--from",
        "echo-worker",
        "--message",
        &call.to_string(),
    ]);
    env.wait_until(
        "the worker's trigger stored",
        Duration::from_secs(20),
        |e| profile(e, "worker")["notifier"]["triggers"].is_array(),
    );
    env.wait_until(
        "the suppressed reply logged",
        Duration::from_secs(10),
        |e| {
            service_events(e, "timer", "reply-suppressed-ephemeral")
                .iter()
                .any(|s| s["to"] == "worker")
        },
    );
    assert_eq!(delivered(&env, "timer", "worker"), 0);
}

/// A watcher line longer than a signal may be arrives whole, as order-marked parts that each
/// fit the daemon's limit, and a watcher's messages arrive in the order printed (found by
/// newcomer walkthroughs: a 16 500-character line was refused on every link and lost; lines
/// made in one millisecond went out in random order).
#[test]
fn a_watcher_line_over_the_limit_arrives_in_parts() {
    let mut env = TestEnv::new();
    env.ok(&["create", "you", "--runtime", "human"]);
    env.ok(&["create", "watcher", "--runtime", "notifier"]);
    env.start_daemon();
    // The long line, then twenty short ones at once: all arrive, in the order printed.
    let call = json!({"script":"head -c 16500 /dev/zero | tr '\\0' L; echo; \
                                for i in $(seq 1 20); do echo line$i; done; sleep 300",
                      "target":"self","id":"longline"});
    call_service(&env, "watcher", "human-you", &call);
    // The script's messages (the registration's confirmation comes from the watcher too).
    let signals = |e: &TestEnv| -> Vec<String> {
        inbox_bodies_from(e, "you", "watcher")
            .into_iter()
            .filter(|b| !b.starts_with("✓ registered"))
            .collect()
    };
    env.wait_until(
        "every message reaches the inbox",
        Duration::from_secs(60),
        |e| signals(e).len() >= 22,
    );
    let got = signals(&env);
    let whole: String = got[..2]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            p.strip_prefix(&format!("[part {}/2] ", i + 1))
                .unwrap_or_else(|| panic!("part {} in place: {:?}", i + 1, &p[..20]))
                .to_string()
        })
        .collect();
    assert_eq!(whole, "L".repeat(16_500));
    let lines: Vec<String> = (1..=20).map(|i| format!("line{i}")).collect();
    assert_eq!(got[2..], lines[..], "in the order printed");
    call_service(
        &env,
        "watcher",
        "human-you",
        &json!({"cmd":"unregister","id":"longline"}),
    );
}

/// A trigger aimed at the service itself is refused at registration (its signals could only
/// fail and escalate "cannot send to self" to the owner; found by a newcomer walkthrough).
#[test]
fn a_trigger_aimed_at_the_service_itself_is_refused() {
    let mut env = TestEnv::new();
    env.ok(&["create", "you", "--runtime", "human"]);
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    env.start_daemon();
    let call = json!({"when":"@every 1m","message":"m","target":"timer","id":"loop"});
    call_service(&env, "timer", "human-you", &call);
    let answer = |e: &TestEnv| inbox_bodies_from(e, "you", "timer").into_iter().next();
    env.wait_until("the timer answers", Duration::from_secs(30), |e| {
        answer(e).is_some()
    });
    let text = answer(&env).unwrap();
    assert!(text.contains("\"timer\" is this service itself"), "{text}");
    assert!(profile(&env, "you")["notifier"]["triggers"]
        .as_array()
        .is_none_or(|t| t.is_empty()));
}

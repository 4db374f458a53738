//! Every send has a deadline (spec 03 §1; `--timeout`, `IAPEER_SEND_TIMEOUT_MS`): a router
//! peer whose program stops reading its stdin never makes `iapeer send` hang, and a message
//! it refuses as timed out is either taken back whole or finished whole — the peer's input
//! never holds half an envelope followed by the next one.

use crate::common;

use common::TestEnv;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Install router runtime `stuck`: its program reads nothing for `hold_secs`, then copies
/// everything it was sent to `log`.
fn install_stuck_runtime(env: &TestEnv, hold_secs: u32, log: &Path) {
    let script = format!("sleep {hold_secs}; exec cat > '{}'", log.display());
    let manifest = serde_json::json!({
        "runtime": "stuck",
        "run": {"command": "/bin/sh", "args": ["-c", script]},
    });
    let path = env.root.join("runtimes/stuck/runtime.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, manifest.to_string()).unwrap();
}

/// One send of a body tagged `MSG-<n>-`: 3 000 bytes for message 0, 15 990 four-byte
/// characters (64 KB, about the whole pipe) for message 1, 100 bytes after that. Its exit
/// code, stderr and time.
fn send(env: &TestEnv, n: usize, extra: &[&str]) -> (Option<i32>, String, Duration) {
    let fill = match n {
        0 => "x".repeat(3000),
        1 => "\u{1F600}".repeat(15_990),
        _ => "x".repeat(100),
    };
    let body = format!("MSG-{n}-{fill}");
    let mut args = vec!["send", "stuck", "--from", "echo-alice", "--message", &body];
    args.extend_from_slice(extra);
    let t = Instant::now();
    let mut child = env
        .cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded here, so a send that hangs fails this test instead of hanging it.
    if common::exit_within(&mut child, Duration::from_secs(20)).is_none() {
        let _ = child.kill();
        let _ = child.wait();
        return (
            None,
            "still waiting after 20 s (killed)".into(),
            t.elapsed(),
        );
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed(),
    )
}

/// A daemon with echo peer `alice` and a live router peer `stuck` on the runtime of
/// [`install_stuck_runtime`] (holding for `hold_secs`, logging to the returned path), with
/// the extra `vars` set.
fn stuck_world(hold_secs: u32, vars: &[(&str, &str)]) -> (TestEnv, std::path::PathBuf) {
    let mut env = TestEnv::new();
    let log = env.dir.path().join("stuck-stdin.log");
    install_stuck_runtime(&env, hold_secs, &log);
    env.create_echo("alice");
    for (k, v) in vars {
        env.set(k, v);
    }
    env.start_daemon();
    env.ok(&[
        "create",
        "stuck",
        "--runtime",
        "stuck",
        "--intelligence",
        "absent",
    ]);
    env.wait_until("stuck-stuck starts", Duration::from_secs(20), |e| {
        e.status_of("stuck", "stuck") == "live"
    });
    (env, log)
}

#[test]
fn a_send_to_a_router_peer_that_stopped_reading_is_answered_at_its_deadline() {
    // Long enough for every send below to meet its deadline first.
    let (mut env, log) = stuck_world(25, &[("IAPEER_SEND_TIMEOUT_MS", "2000")]);

    // Linux's pipe holds 16 pages of 4 KiB: message 0 takes one, message 1 needs 16 and
    // stops mid-envelope; messages 2 and 3 find it full.
    let mut outcomes = Vec::new();
    for n in 0..4 {
        let extra: &[&str] = if n == 3 { &[] } else { &["--timeout", "3"] };
        let (code, err, took) = send(&env, n, extra);
        eprintln!("send {n}: exit {code:?} in {took:?}: {}", err.trim());
        // The figure: how long a sender to a stuck peer waits for its answer.
        assert!(
            took < Duration::from_secs(6),
            "send {n} took {took:?}\n{}",
            env.diagnostics()
        );
        outcomes.push((code, err));
    }
    assert_eq!(outcomes[0], (Some(0), String::new()));
    // Part of it was written: it may arrive, so its state is unknown (exit 3), never "NOT
    // delivered" (issue 26 item 5).
    let (code, partial) = &outcomes[1];
    assert_eq!(*code, Some(3), "{partial}");
    let prefix = "iapeer send: state unknown: it may have arrived — the message was written (in \
                  part or whole) to the input of peer \"stuck\" (stuck) and its arrival was never \
                  confirmed: it did not take all of it within 3 s: its program stopped reading its \
                  input after ";
    let counts: Vec<u64> = partial
        .strip_prefix(prefix)
        .and_then(|rest| rest.split_once(" bytes; "))
        .map(|(n, _)| {
            n.split(" of the message's ")
                .map(|x| x.parse().unwrap())
                .collect()
        })
        .unwrap_or_else(|| panic!("{partial}"));
    assert!(counts[0] > 0 && counts[0] < counts[1], "{partial}");
    assert!(
        partial.contains(
            " bytes; the rest stays queued for it, so the message arrives whole if it reads \
             again. Message id m-"
        ),
        "{partial}"
    );
    assert!(
        partial.contains("— to retry: iapeer send stuck --id m-"),
        "{partial}"
    );
    for (i, within) in [(2, "3 s"), (3, "2 s")] {
        let (code, err) = &outcomes[i];
        assert_eq!(*code, Some(1), "send {i}");
        assert_eq!(
            err.trim_end(),
            format!(
                "iapeer send: peer \"stuck\" (stuck) did not take the message within {within}: \
                 its program is not reading its input (none of the message was written); \
                 message NOT delivered"
            ),
            "send {i}"
        );
    }
    // A message queued behind one the session holds meets its deadline in the queue.
    let (held, queued) = std::thread::scope(|sc| {
        let held = sc.spawn(|| send(&env, 4, &["--timeout", "3"]));
        // Send 4 has reached the router (after sends 0 to 3), which gave it to the session.
        env.wait_hook("router-send:stuck", 5);
        let queued = send(&env, 5, &["--timeout", "1"]);
        (held.join().unwrap(), queued)
    });
    eprintln!("send 5 (queued): {queued:?}");
    assert_eq!(queued.0, Some(1));
    assert!(queued.2 < Duration::from_secs(3), "{queued:?}");
    assert_eq!(
        queued.1.trim_end(),
        "iapeer send: peer \"stuck\" (stuck) did not take the message within 1 s: it is still \
         busy with 1 earlier request (a message, wake or compaction); message NOT delivered"
    );
    assert_eq!(held.0, Some(1), "{held:?}");
    assert!(
        held.1.contains("none of the message was written"),
        "{held:?}"
    );
    // Every attempt has its delivery.log line; the refused ones say timeout.
    let lines = env.events("delivery", "delivery");
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l["ok"] == "false").count(), 5);

    // When the program reads again, its input holds whole envelopes only: the accepted ones
    // and the one whose rest was kept, never a taken-back one.
    env.wait_until(
        "the program reads its input",
        Duration::from_secs(60),
        |_| common::read(&log).matches("</iap>").count() == 2,
    );
    let seen = common::read(&log);
    assert_eq!(seen.matches("<iap ").count(), 2, "{}", &seen[..400]);
    for n in 0..6 {
        assert_eq!(
            seen.contains(&format!("MSG-{n}-")),
            n <= 1,
            "message {n} in the peer's input"
        );
    }
    for envelope in seen.split_inclusive("</iap>\n") {
        assert!(envelope.starts_with("<iap "), "{}", &envelope[..80]);
        assert_eq!(envelope.matches("<message>").count(), 1);
    }
    env.stop_daemon();
}

#[test]
fn a_send_whose_sender_gave_up_is_not_begun() {
    let (mut env, log) = stuck_world(10, &[]);
    assert_eq!(send(&env, 0, &[]).0, Some(0));
    // Message 1 fills the pipe mid-envelope and waits (its sender too, up to 60 s) …
    let big = std::thread::scope(|s| {
        let big = s.spawn(|| send(&env, 1, &["--timeout", "60"]));
        env.wait_hook("router-send:stuck", 2);
        // … the next sender queues behind it and gives up (Ctrl-C).
        let mut cmd = env.cmd(&[
            "send",
            "stuck",
            "--from",
            "echo-alice",
            "--message",
            "MSG-2-gave-up",
        ]);
        // Ctrl-C ends a CLI that runs as a person runs it. A suite started as a background job
        // of a non-interactive shell (`.ci/run &`) has SIGINT ignored, and children inherit
        // that; the quitter gets the default back, as at a terminal.
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::signal::signal(
                    nix::sys::signal::Signal::SIGINT,
                    nix::sys::signal::SigHandler::SigDfl,
                )
                .map(|_| ())
                .map_err(std::io::Error::from)
            });
        }
        let mut quitter = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Its send has reached the router and queued (the program reads again only 10 s
        // after message 0).
        env.wait_hook("router-send:stuck", 3);
        common::signal(quitter.id(), nix::sys::signal::Signal::SIGINT);
        let _ = quitter.wait();
        big.join().unwrap()
    });
    // The program reads again: message 1 is finished and answered …
    assert_eq!(big.0, Some(0), "{}\n{}", big.1, env.diagnostics());
    env.wait_until(
        "the program reads its input",
        Duration::from_secs(30),
        |_| common::read(&log).matches("</iap>").count() >= 2,
    );
    // … and the abandoned message is never written.
    env.wait_until(
        "the abandoned send is logged",
        Duration::from_secs(10),
        |e| {
            e.events("delivery", "delivery")
                .iter()
                .any(|d| d["ok"] == "false" && d["err"].contains("the sender stopped waiting"))
        },
    );
    // A later message arrives after anything queued before it: had the abandoned one been
    // begun, it would be in the input before this one.
    assert_eq!(send(&env, 3, &[]).0, Some(0));
    env.wait_until("message 3 is read", Duration::from_secs(30), |_| {
        common::read(&log).contains("MSG-3-")
    });
    let seen = common::read(&log);
    assert!(!seen.contains("MSG-2-gave-up"), "{}", env.diagnostics());
    assert_eq!(seen.matches("<iap ").count(), 3);
    env.stop_daemon();
}

#[test]
fn an_agents_send_to_peer_to_a_stuck_peer_is_answered_at_the_deadline() {
    let (mut env, _log) = stuck_world(
        30,
        &[
            ("IAPEER_SEND_TIMEOUT_MS", "2000"),
            ("IAPEER_MCP_AUTH", "header"),
        ],
    );
    assert_eq!(send(&env, 0, &[]).0, Some(0));
    assert_eq!(
        send(&env, 1, &[]).0,
        Some(3),
        "the pipe is full mid-message: its state is unknown"
    );
    let t = Instant::now();
    let result = crate::mcp::call(
        env.port(),
        &[("X-IAPeer-Identity", "echo-alice")],
        "stuck",
        "from an agent",
    );
    let took = t.elapsed();
    eprintln!("send_to_peer answered in {took:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    assert_eq!(
        crate::mcp::tool_error(&result),
        "peer \"stuck\" (stuck) did not take the message within 2 s: its program is not \
         reading its input (none of the message was written); message NOT delivered"
    );
    env.stop_daemon();
}

/// The same over MCP: an agent's `send_to_peer` queued behind a stuck message whose HTTP
/// client hangs up is dropped before it begins, logged, and never written to the peer.
#[test]
fn an_mcp_send_whose_client_hung_up_is_not_begun() {
    use std::io::Write;
    let (mut env, log) = stuck_world(8, &[("IAPEER_MCP_AUTH", "header")]);
    assert_eq!(send(&env, 0, &[]).0, Some(0));
    let big = std::thread::scope(|s| {
        let big = s.spawn(|| send(&env, 1, &["--timeout", "60"]));
        env.wait_hook("router-send:stuck", 2);
        // An agent's call queues behind it; its HTTP client gives up once it has.
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "send_to_peer", "arguments": {
                "personality": "stuck", "message": "MCP-gave-up"}}
        })
        .to_string();
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", env.port())).unwrap();
        write!(
            conn,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nX-IAPeer-Identity: echo-alice\r\n\
             Content-Length: {}\r\n\r\n{body}",
            env.port(),
            body.len()
        )
        .unwrap();
        env.wait_hook("router-send:stuck", 3);
        drop(conn);
        big.join().unwrap()
    });
    assert_eq!(big.0, Some(0), "{}\n{}", big.1, env.diagnostics());
    env.wait_until(
        "the abandoned MCP send is logged",
        Duration::from_secs(10),
        |e| {
            e.events("delivery", "delivery").iter().any(|d| {
                d["path"] == "mcp" && d["ok"] == "false" && d["err"].contains("stopped waiting")
            })
        },
    );
    env.wait_until(
        "the program reads its input",
        Duration::from_secs(30),
        |_| common::read(&log).matches("</iap>").count() >= 2,
    );
    // A later message arrives after anything queued before it (as above).
    assert_eq!(send(&env, 3, &[]).0, Some(0));
    env.wait_until("message 3 is read", Duration::from_secs(30), |_| {
        common::read(&log).contains("MSG-3-")
    });
    assert!(
        !common::read(&log).contains("MCP-gave-up"),
        "{}",
        env.diagnostics()
    );
    env.stop_daemon();
}

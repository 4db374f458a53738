//! Failure containment (issue 6 item 5, spec 02 §1): a panic on the router thread, injected
//! with the test-only `IAPEER_TEST_HOOK`, answers every waiting sender, ends the sessions'
//! children and makes `iapeer daemon` exit non-zero within 5 s with the panic in `daemon.log`.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use common::{alive, describe, TestEnv};

/// Wait for `child` at most `limit`; kill it and fail the test if it is still running.
fn output_within(mut child: Child, limit: Duration, what: &str, env: &TestEnv) -> Output {
    if common::exit_within(&mut child, limit).is_some() {
        return child.wait_with_output().expect("output");
    }
    let _ = child.kill();
    let out = child.wait_with_output().expect("output");
    panic!(
        "{what} still running after {limit:?}: {}\n{}",
        describe(&out),
        env.diagnostics()
    );
}

/// An MCP `send_to_peer` call as `echo-alice` (header auth) on its own thread; returns the
/// raw HTTP response (the server closes the connection after it).
fn mcp_send(port: u16, to: &str) -> std::thread::JoinHandle<String> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"send_to_peer","arguments":{{"personality":"{to}","message":"via mcp"}}}}}}"#
    );
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nX-IAPeer-Identity: echo-alice\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).expect("send request");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    })
}

fn send(env: &TestEnv, to: &str, message: &str) -> Child {
    env.spawn(&["send", to, "--from", "echo-alice", "--message", message])
}

#[test]
fn a_router_panic_answers_waiting_senders_ends_sessions_and_exits_non_zero() {
    let mut env = TestEnv::new();
    for p in ["alice", "bob", "carol"] {
        env.create_echo(p);
    }
    // bob never draws its prompt: a send to it waits in the boot.
    env.launch_env("bob", "echo", "PEER_START_ARGS=--no-prompt\n");
    env.set("IAPEER_TEST_HOOK", "router-panic-on-send:carol");
    env.set("IAPEER_MCP_AUTH", "header");
    env.start_daemon();

    let blocked = send(&env, "bob", "waits for a boot that never ends");
    env.wait_until("bob's session booting", Duration::from_secs(15), |e| {
        e.has_event("lifecycle", "wake", &[("identity", "echo-bob")])
    });
    let bob_pid: u32 = env
        .events("lifecycle", "wake")
        .iter()
        .find(|e| e["identity"] == "echo-bob")
        .and_then(|e| e["pid"].parse().ok())
        .expect("bob's pid");
    assert!(alive(bob_pid));
    // An MCP caller waits behind it: its send has reached the router (test event).
    let mcp = mcp_send(env.port(), "bob");
    env.wait_hook("router-send:bob", 2);

    // The send to carol makes the router thread panic.
    let t0 = Instant::now();
    let trigger = output_within(
        send(&env, "carol", "boom"),
        Duration::from_secs(5),
        "the triggering send",
        &env,
    );
    let waiting = output_within(blocked, Duration::from_secs(5), "the blocked send", &env);
    let answered = t0.elapsed();
    for (what, out) in [("trigger", &trigger), ("blocked", &waiting)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{what} send: {:?}, stderr: {}", out.status, stderr.trim());
        assert_eq!(out.status.code(), Some(255), "{what}: {}", describe(out));
        assert!(
            stderr.contains("internal error: the router thread panicked")
                && stderr.contains("the daemon is exiting"),
            "{what}: {}",
            describe(out)
        );
    }

    let mcp = mcp.join().expect("mcp caller");
    eprintln!("mcp answer: {}", mcp.lines().last().unwrap_or_default());
    assert!(
        mcp.contains("internal error: the router thread panicked")
            && mcp.contains("the daemon is exiting"),
        "mcp: {mcp}"
    );

    // The daemon exits non-zero within 5 s of the panic.
    let mut daemon = env.daemon.take().expect("daemon");
    let Some(status) = common::exit_within(&mut daemon, Duration::from_secs(5)) else {
        let _ = daemon.kill();
        panic!(
            "the daemon still runs 5 s after the panic\n{}",
            env.diagnostics()
        );
    };
    let exited = t0.elapsed();
    assert!(!status.success(), "daemon exit: {status:?}");
    // A thread the daemon cannot run without failed: an internal error (issue 29 item 6).
    assert_eq!(status.code(), Some(255), "daemon exit: {status:?}");
    eprintln!("senders answered after {answered:?}, daemon exited after {exited:?}");

    let log = env.log("daemon");
    for line in log.lines().filter(|l| l.contains("panicked")) {
        eprintln!("daemon.log: {line}");
    }
    assert!(
        log.contains("thread 'router' panicked at")
            && log.contains("IAPEER_TEST_HOOK=router-panic-on-send:carol"),
        "{log}"
    );
    // bob's child was ended by its process group although the router's sessions are gone
    // (not merely by the pty closing when the daemon exited).
    assert!(
        log.contains("shutdown: ended 1 child process group(s) the router did not"),
        "{log}"
    );
    env.wait_until("bob's child gone", Duration::from_secs(2), |_| {
        !alive(bob_pid)
    });
}

#[test]
fn without_the_hook_a_send_to_the_same_peer_is_delivered() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("carol");
    env.start_daemon();
    let out = output_within(
        send(&env, "carol", "hello"),
        Duration::from_secs(60),
        "the send",
        &env,
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert!(env.stop_daemon().is_some_and(|s| s.success()));
}

#[test]
fn a_panic_while_preparing_a_send_answers_the_sender_and_the_daemon_carries_on() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("dave");
    env.set("IAPEER_TEST_HOOK", "prep-panic-on-send:dave");
    env.start_daemon();
    let out = output_within(
        send(&env, "dave", "boom"),
        Duration::from_secs(10),
        "the send",
        &env,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // An internal error exits 255, apart from refusals (issue 29 item 6).
    assert_eq!(out.status.code(), Some(255), "{}", describe(&out));
    assert!(
        stderr.contains("internal error: preparing the send failed (test hook"),
        "{}",
        describe(&out)
    );
    assert!(
        env.log("daemon")
            .contains("thread 'send-prep-plain' panicked at src/daemon/test_hooks.rs"),
        "{}",
        env.log("daemon")
    );
    // Only the worker failed: the daemon still serves and stops cleanly.
    env.ok(&["list", "--json"]);
    assert!(env.stop_daemon().is_some_and(|s| s.success()));
}

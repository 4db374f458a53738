//! Answers that were lost or wrong (issue 12 item 4): a control client that half-closes after
//! its request, `stop` when the stop flag cannot be written, senders in flight at SIGTERM, and
//! a send to a parked always-on peer.

use crate::common;

use common::TestEnv;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Install router runtime `name` running `script` (a `/bin/sh` script) and create peer
/// `name` on it.
fn router_peer(env: &TestEnv, name: &str, script: &str) {
    let path = env.dir.path().join(format!("{name}.sh"));
    std::fs::write(&path, script).unwrap();
    let manifest =
        serde_json::json!({"runtime": name, "run": {"command": "/bin/sh", "args": [path]}});
    let at = env.root.join(format!("runtimes/{name}/runtime.json"));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(at, manifest.to_string()).unwrap();
    env.ok(&[
        "create",
        name,
        "--runtime",
        name,
        "--intelligence",
        "absent",
        "--no-bootstrap",
    ]);
}

/// Write `request` and shut down the writing side, as `nc -N` does; return everything the
/// daemon wrote back before closing.
fn half_closed(env: &TestEnv, request: &[u8]) -> String {
    let mut s = UnixStream::connect(env.socket()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read the answer");
    out
}

#[test]
fn a_half_closed_control_client_gets_its_answers() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    let out = half_closed(&env, b"{\"op\":\"ping\"}\n");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| {
        panic!(
            "no answer to a half-closed ping ({e}): {out:?}\n{}",
            env.diagnostics()
        )
    });
    assert_eq!(v["ok"], true, "{v}");
    // A send that takes a wake: the answer comes seconds later, after the client's EOF; a
    // last line without its newline counts too.
    let out = half_closed(
        &env,
        br#"{"op":"send","from":"echo-alice","to":"bob","message":"half closed"}"#,
    );
    let last = out.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("no final answer ({e}): {out:?}\n{}", env.diagnostics()));
    assert_eq!(v["ok"], true, "{out}\n{}", env.diagnostics());
    assert!(env.pane("echo-bob").contains("from alice: half closed"));
}

#[test]
fn stop_and_start_fail_with_the_reason_when_the_flag_cannot_be_changed() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.start_daemon();
    assert_eq!(
        env.control(r#"{"op":"wake","personality":"alice"}"#)["ok"],
        true
    );
    // The lifecycle folder becomes a file: no marker can be written there (as root too).
    let lifecycle = env.paths().lifecycle_dir();
    assert!(lifecycle.is_dir(), "{}", lifecycle.display());
    let away = lifecycle.with_extension("away");
    std::fs::rename(&lifecycle, &away).unwrap();
    std::fs::write(&lifecycle, b"not a folder").unwrap();
    // The daemon could not do its own part (code internal): exit 255.
    let (out, err) = env.fails(&["stop", "alice"], 255);
    std::fs::remove_file(&lifecycle).unwrap();
    std::fs::rename(&away, &lifecycle).unwrap();
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("could not stop echo-alice")
            && err.contains("echo-alice.stopped")
            && err.contains("run stop again"),
        "{err}"
    );
    // Nothing was changed: the session still runs and takes messages.
    assert_eq!(
        env.status_of("alice", "echo"),
        "live",
        "{}",
        env.diagnostics()
    );

    // `start` whose flag cannot be removed (a non-empty folder in its place) fails too,
    // rather than saying "started" while the peer stays stopped.
    let flag = env.marker("echo-alice", ".stopped");
    std::fs::create_dir_all(flag.join("stuck")).unwrap();
    let (out, err) = env.fails(&["start", "alice"], 255);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("could not start echo-alice")
            && err.contains("echo-alice.stopped")
            && err.contains("run start again"),
        "{err}"
    );
}

#[test]
fn senders_in_flight_at_sigterm_are_answered_and_logged() {
    let mut env = TestEnv::new();
    // The message is held for the revive grace: the daemon is stopped while it waits.
    env.set("IAP_ALWAYS_ON_REVIVE_GRACE_MS", "60000");
    env.create_echo("alice");
    router_peer(
        &env,
        "deaf",
        "#!/bin/sh\nexec 0<&-\necho deaf and alive\nexec sleep 600\n",
    );
    env.start_daemon();
    env.wait_until("the deaf router is up", Duration::from_secs(20), |e| {
        e.pane("deaf-deaf").contains("deaf and alive")
    });
    let senders: Vec<_> = (0..3)
        .map(|i| {
            env.spawn(&[
                "send",
                "deaf",
                "--from",
                "echo-alice",
                "--message",
                &format!("in flight {i}"),
            ])
        })
        .collect();
    // The three have reached the router, which holds them (they would wait 60 s there).
    env.wait_hook("router-send:deaf", 3);
    env.stop_daemon();
    for s in senders {
        let out = s.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("the daemon is shutting down") && !err.contains("lost the connection"),
            "{err}\n{}",
            env.diagnostics()
        );
    }
    let lines: Vec<_> = env
        .events("delivery", "delivery")
        .into_iter()
        .filter(|d| d["to"] == "deaf")
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}\n{}", env.diagnostics());
    for l in lines {
        assert_eq!(l["ok"], "false");
        assert!(l["err"].contains("shutting down"), "{l:?}");
    }
}

#[test]
fn a_send_to_a_parked_always_on_peer_is_refused_at_once_with_the_reason() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    router_peer(&env, "crash", "#!/bin/sh\necho crashing\nexit 3\n");
    env.start_daemon();
    // Restarts after 1, 2, 4 and 8 s; the fifth death within 60 s parks it.
    env.wait_until("the crash loop parks it", Duration::from_secs(40), |e| {
        e.has_event(
            "lifecycle",
            "always-on",
            &[("identity", "crash-crash"), ("action", "parked")],
        )
    });
    let started = Instant::now();
    let (out, err) = env.fails(
        &[
            "send",
            "crash",
            "--from",
            "echo-alice",
            "--message",
            "anyone?",
        ],
        1,
    );
    let took = started.elapsed();
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("is parked") && err.contains("iapeer start crash crash"),
        "{err}"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(env.has_event("delivery", "delivery", &[("to", "crash"), ("ok", "false")]));
}

//! A dialog at boot that iapeer has no answer for goes to a human (spec 10 §4, default
//! mode) instead of waiting out the boot deadline: the echo agent's `--boot-menu` stands in
//! for a CLI's unknown start-up dialog. The human approves (the menu's default is chosen and
//! the wake goes on), chooses another option by number or label, or denies (the boot ends
//! at once with the reason).

use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, TestEnv};

/// A daemon with alice (a plain echo peer) and bob, whose echo agent asks `Telemetry?`
/// with the options Yes (the default) and No before its composer.
fn world() -> TestEnv {
    world_with(&[])
}

/// [`world`] with these variables in the daemon's environment.
fn world_with(vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    env.create_echo("alice");
    env.create_echo("bob");
    env.launch_env(
        "bob",
        "echo",
        "PEER_START_ARGS=--boot-menu Telemetry?|Yes|No\n",
    );
    env.start_daemon();
    env
}

/// `iapeer send bob` from alice, in the background (the wake waits for the human).
fn send_to_bob(env: &TestEnv) -> Child {
    env.spawn(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: after the dialog",
    ])
}

/// The pending approvals (`approvals --json`).
fn approvals(env: &TestEnv) -> Vec<Value> {
    let out = env.ok(&["approvals", "--json"]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    v["approvals"].as_array().cloned().unwrap_or_default()
}

/// Wait for bob's boot dialog to be put to a human; its request.
fn the_dialog(env: &TestEnv) -> Value {
    let mut found = Value::Null;
    env.wait_until(
        "the boot dialog in iapeer approvals",
        Duration::from_secs(20),
        |e| {
            found = approvals(e)
                .into_iter()
                .find(|a| a["tool"] == "dialog")
                .unwrap_or(Value::Null);
            !found.is_null()
        },
    );
    assert_eq!(found["identity"], "echo-bob", "{found}");
    assert_eq!(
        found["options"],
        serde_json::json!(["Yes", "No"]),
        "{found}"
    );
    assert_eq!(found["default_option"], 0, "{found}");
    let summary = found["summary"].as_str().unwrap();
    for part in [
        "Telemetry?",
        "1. Yes (default)",
        "2. No",
        "deny ends the boot",
    ] {
        assert!(summary.contains(part), "{part} missing: {summary}");
    }
    found
}

#[test]
fn approving_an_unknown_boot_dialog_chooses_its_default_and_the_wake_goes_on() {
    let env = world();
    let t0 = Instant::now();
    let send = send_to_bob(&env);
    let dialog = the_dialog(&env);
    let id = dialog["id"].as_str().unwrap();
    // The fleet API lists it too.
    let board = crate::fleet::get(&env, "/fleet/v1/approvals").json();
    assert!(board.to_string().contains(id), "{board}");
    env.ok(&["approve", id]);
    let out = send.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "delivered to bob (echo), woke"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "not the boot deadline"
    );
    let screen = env.screen("echo-bob");
    assert!(screen.contains("boot menu: Yes"), "{screen}");
    assert!(screen.contains("received "), "{screen}");
    assert!(env.has_event(
        "lifecycle",
        "approval-requested",
        &[("id", id), ("tool", "dialog")]
    ));
    assert!(env.has_event(
        "lifecycle",
        "approval-approved",
        &[("id", id), ("by", "approved")]
    ));
    assert!(approvals(&env).is_empty());
}

#[test]
fn denying_an_unknown_boot_dialog_ends_the_boot_at_once_with_the_reason() {
    let env = world();
    let send = send_to_bob(&env);
    let id = the_dialog(&env)["id"].as_str().unwrap().to_string();
    let t0 = Instant::now();
    env.ok(&["deny", &id, "not on this machine"]);
    let out = send.wait_with_output().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the boot ended at once"
    );
    assert!(!out.status.success(), "{}", common::describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a dialog iapeer does not know") && err.contains("not on this machine"),
        "{err}"
    );
    env.wait_until("bob's session ended", Duration::from_secs(10), |e| {
        e.log("exits").contains("identity=echo-bob")
    });
    assert!(
        env.log("exits").contains("cause=dialog-refused"),
        "{}",
        env.log("exits")
    );
    // Refusals are no crashes: three more sends are each put to a human again, none is
    // refused as crash-looping.
    for _ in 0..3 {
        let send = send_to_bob(&env);
        let id = the_dialog(&env)["id"].as_str().unwrap().to_string();
        env.ok(&["deny", &id]);
        let out = send.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("a dialog iapeer does not know"), "{err}");
        assert!(!err.contains("crash-looping"), "{err}");
    }
    assert!(env.has_event("lifecycle", "wake-failed", &[("identity", "echo-bob")]));
    assert!(approvals(&env).is_empty());
}

#[test]
fn approve_with_an_option_chooses_it_and_a_wrong_option_is_refused_and_kept() {
    let env = world();
    let send = send_to_bob(&env);
    let id = the_dialog(&env)["id"].as_str().unwrap().to_string();
    let wrong = env.run(&["approve", &id, "Maybe"]);
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("choose one of: 1. Yes, 2. No"),
        "{}",
        common::describe(&wrong)
    );
    assert_eq!(approvals(&env).len(), 1, "a wrong option keeps the request");
    env.ok(&["approve", &id, "2"]);
    let out = send.wait_with_output().unwrap();
    assert!(env.has_event(
        "lifecycle",
        "approval-approved",
        &[("id", id.as_str()), ("option", "2. No")]
    ));
    assert!(out.status.success(), "{}", common::describe(&out));
    let screen = env.screen("echo-bob");
    assert!(screen.contains("boot menu: No"), "{screen}");
    assert!(approvals(&env).is_empty());
    let again = env.run(&["approve", &id]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is not pending"),
        "{}",
        common::describe(&again)
    );
}

#[test]
fn a_human_asked_has_the_approval_timeout_not_the_boot_deadline() {
    let env = world_with(&[("IAPEER_BOOT_DEADLINE_SECS", "5")]);
    let t0 = Instant::now();
    let send = send_to_bob(&env);
    let id = the_dialog(&env)["id"].as_str().unwrap().to_string();
    // Time is the thing tested: past the 5 s boot deadline, the dialog still waits for its
    // human (looked at all along, up to 7 s after the send).
    env.stays_false(
        "the end of the dialog before its human answered",
        Duration::from_secs(7).saturating_sub(t0.elapsed()),
        |env| approvals(env).len() != 1,
    );
    env.ok(&["approve", &id]);
    let out = send.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(env.screen("echo-bob").contains("boot menu: Yes"));
}

//! `iapeer demo` runs the main job on the built-in echo runtime: it must finish in under 30 s,
//! exit 0, show the deliveries (one with a wake) and clean up its temporary root.

use crate::common;

use iapeer::paths::Paths;

use common::TestEnv;
use std::time::{Duration, Instant};

#[test]
fn demo_shows_deliveries_and_a_wake_then_cleans_up() {
    let env = TestEnv::new();
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let start = Instant::now();
    let out = env
        .cmd(&["demo"])
        .env("TMPDIR", &tmp)
        .env_remove("IAPEER_ROOT")
        .output()
        .unwrap();
    let took = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(took < Duration::from_secs(30), "the demo took {took:?}");
    for want in [
        "delivered to alice (echo), woke",
        "delivered to bob (echo), woke",
        "delivered to alice (echo)\n",
        "✓ delivery: human-you → alice via echo-alice, woke",
        "✓ delivery: echo-alice → bob via echo-bob, woke",
        "✓ delivery: echo-bob → alice via echo-alice",
        "you got a message from alice (echo): echo: Hello Alice, are you there?",
        "all stopped after",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "the demo left {left:?} behind");
}

#[test]
fn demo_keep_leaves_the_root_and_says_where() {
    let env = TestEnv::new();
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = env
        .cmd(&["demo", "--keep"])
        .env("TMPDIR", &tmp)
        .env_remove("IAPEER_ROOT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let kept: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(kept.len(), 1, "{stdout}");
    assert!(
        stdout.contains(&format!("the demo root is kept: {}", kept[0].display())),
        "{stdout}"
    );
    let kept = Paths::at(&kept[0]);
    assert!(kept.registry().is_file());
    assert!(kept.delivery_log().is_file());
    // The daemon is stopped: its socket is gone.
    assert!(!kept.socket().exists());
}

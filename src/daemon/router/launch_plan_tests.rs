//! Unit tests of the launch decision ([`plan`]): one per check of spec 05 §2 steps 1–5 in
//! its order, the crash-loop window on fake time, and what rides the wake. No files, no
//! processes: the facts are written by hand.

use std::time::{Duration, Instant};

use super::*;
use crate::protocol::Code;

const MS: u64 = 1_700_000_000_000;

fn now() -> Now {
    Now {
        at: Instant::now(),
        ms: MS,
    }
}

fn peer(runtimes: &[&str], intelligence: &str) -> RegistryPeer {
    RegistryPeer::new("bob", runtimes, intelligence, "/work/bob")
}

/// A registered artificial agent on claude, asleep, its folder present, nothing queued.
fn facts() -> LaunchFacts {
    LaunchFacts {
        ident: Identity::parse("claude-bob").unwrap(),
        mode_req: ModeRequest::Auto,
        topic: None,
        peer: Some(peer(&["claude"], "artificial")),
        runtime: Ok((RuntimeKind::Agent, ConversationNaming::Chosen)),
        stopped: false,
        deaths_ms: Vec::new(),
        markers: PeerMarkers::default(),
        folder_exists: true,
        ephemeral: false,
        gated: false,
        initial_prompt: Some("You are bob.".into()),
        head_send: None,
    }
}

/// `.idle-reaped` set and conversation `id` recorded.
fn recorded(id: &str) -> PeerMarkers {
    PeerMarkers {
        idle_reaped: true,
        conversation: Some(id.into()),
        ..PeerMarkers::default()
    }
}

fn cfg() -> Config {
    Config {
        crashloop_max: 3,
        crashloop_window: Duration::from_secs(300),
        approval_timeout: Duration::from_secs(600),
        ..Config::default()
    }
}

fn refusal(f: &LaunchFacts) -> Refusal {
    plan(f, &cfg(), now()).expect_err("the launch is refused")
}

/// Each refusal names the first thing wrong, in the order the plan checks them.
#[test]
fn refusals_name_the_first_thing_wrong() {
    let cases = [
        (
            "a peer not in the index is not registered",
            LaunchFacts {
                peer: None,
                stopped: true,
                ..facts()
            },
            Refusal::new(
                Code::NotRegistered,
                "peer \"bob\" is not in the iapeer peers index",
            ),
        ),
        (
            "an undeclared runtime is refused before the adapter",
            LaunchFacts {
                peer: Some(peer(&["codex"], "artificial")),
                runtime: Err("no such runtime".into()),
                ..facts()
            },
            Refusal::new(
                Code::InvalidArgument,
                "peer \"bob\" does not declare runtime \"claude\"",
            ),
        ),
        (
            "an unusable adapter is offline before stopped",
            LaunchFacts {
                runtime: Err("the adapter is broken".into()),
                stopped: true,
                ..facts()
            },
            Refusal::new(
                Code::Offline,
                "peer \"bob\" offline and wake failed: the adapter is broken",
            ),
        ),
        (
            "a stopped peer is refused before its folder is checked",
            LaunchFacts {
                stopped: true,
                folder_exists: false,
                ..facts()
            },
            stopped_refusal(&facts().ident),
        ),
    ];
    for (case, f, want) in cases {
        assert_eq!(refusal(&f), want, "{case}");
    }
}

#[test]
fn a_natural_peer_cannot_run_on_an_agent_runtime() {
    let r = refusal(&LaunchFacts {
        peer: Some(peer(&["claude"], "natural")),
        ..facts()
    });
    assert_eq!(r.code, Code::InvalidArgument);
    assert!(r.error.starts_with("a peer of intelligence "), "{r:?}");
    assert!(r.error.contains("/work/bob/"), "{r:?}");
}

#[test]
fn a_missing_folder_is_offline() {
    let r = refusal(&LaunchFacts {
        folder_exists: false,
        ..facts()
    });
    assert_eq!(r.code, Code::Offline);
    assert!(
        r.error.ends_with("working folder /work/bob does not exist"),
        "{r:?}"
    );
}

#[test]
fn the_crash_loop_guard_counts_deaths_inside_the_window_only() {
    let within = |ago_s: u64| MS - ago_s * 1000;
    let looping = LaunchFacts {
        deaths_ms: vec![within(10), within(100), within(299)],
        ..facts()
    };
    let r = refusal(&looping);
    assert_eq!(r.code, Code::Offline);
    assert!(
        r.error
            .ends_with("crash-looping: 3 deaths in 300s — see exits.log; iapeer new bob to force"),
        "{}",
        r.error
    );
    // One of the three is older than the window: the launch goes.
    let old = LaunchFacts {
        deaths_ms: vec![within(10), within(100), within(301)],
        ..facts()
    };
    assert!(plan(&old, &cfg(), now()).is_ok());
    // A router peer is never held by the guard.
    let router = LaunchFacts {
        runtime: Ok((RuntimeKind::Router, ConversationNaming::Folder)),
        ..looping
    };
    assert!(plan(&router, &cfg(), now()).is_ok());
}

#[test]
fn a_fresh_agent_launch_carries_the_head_with_the_initial_prompt() {
    let c = plan(
        &LaunchFacts {
            head_send: Some(7),
            gated: true,
            ..facts()
        },
        &cfg(),
        now(),
    )
    .unwrap();
    assert_eq!(c.kind, RuntimeKind::Agent);
    assert_eq!(c.mode, WakeMode::Fresh);
    assert_eq!(c.decision.map(|d| d.cause), Some("not-idle-reaped"));
    assert_eq!(c.first, Some((7, Some("You are bob.".to_string()))));
    assert_eq!(c.gated, Some(Duration::from_secs(600)));
    assert!(!c.ephemeral);
}

#[test]
fn a_resumed_agent_gets_no_seed_before_its_first_message() {
    let c = plan(
        &LaunchFacts {
            topic: Some("t1".into()),
            markers: PeerMarkers {
                topics: vec!["t1".into()],
                ..recorded("conv-1")
            },
            head_send: Some(7),
            ..facts()
        },
        &cfg(),
        now(),
    )
    .unwrap();
    assert_eq!(c.mode, WakeMode::Resume);
    assert_eq!(c.first, Some((7, None)));
}

#[test]
fn a_router_peer_has_no_wake_decision_and_no_first_delivery() {
    let c = plan(
        &LaunchFacts {
            runtime: Ok((RuntimeKind::Router, ConversationNaming::Folder)),
            head_send: Some(7),
            ephemeral: true,
            gated: true,
            ..facts()
        },
        &cfg(),
        now(),
    )
    .unwrap();
    assert_eq!(
        (c.mode, c.decision, c.first, c.ephemeral, c.gated),
        (WakeMode::Fresh, None, None, false, None)
    );
}

#[test]
fn an_ephemeral_agent_starts_fresh() {
    let c = plan(
        &LaunchFacts {
            ephemeral: true,
            markers: recorded("conv-1"),
            ..facts()
        },
        &cfg(),
        now(),
    )
    .unwrap();
    assert!(c.ephemeral);
    assert_eq!(
        c.decision.map(|d| (d.mode, d.cause)),
        Some((WakeMode::Fresh, "ephemeral"))
    );
}

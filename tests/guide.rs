//! A CLI that guides (issue 8 item 5, spec 07 "General rules"): did-you-mean for verbs, flags
//! and peer names, `--message` named when the text comes as a word, names explained in words,
//! and no internal field names in the CLI's refusals. The real binary and daemon.

use crate::common;

use common::TestEnv;

fn alice_bob_carol() -> TestEnv {
    let mut env = TestEnv::new();
    for p in ["alice", "bob", "carol"] {
        env.create_echo(p);
    }
    env.start_daemon();
    env
}

#[test]
fn a_mistyped_verb_or_flag_is_a_usage_error_with_the_word_meant() {
    let env = TestEnv::new();
    let (_, err) = env.fails(&["sned", "bob"], 2);
    assert_eq!(
        err.trim(),
        "iapeer: unknown verb \"sned\" — did you mean \"send\"? (iapeer help lists the verbs)"
    );
    let (_, err) = env.fails(&["frobnicate"], 2);
    assert!(!err.contains("did you mean"), "{err}");
    let (_, err) = env.fails(&["send", "bob", "--mesage", "hi"], 2);
    assert!(
        err.starts_with(
            "iapeer: unknown flag --mesage (did you mean --message?) — usage: iapeer send"
        ),
        "{err}"
    );
    let (_, err) = env.fails(&["list", "--jsn"], 2);
    assert!(err.contains("(did you mean --json?)"), "{err}");
}

#[test]
fn the_text_as_a_word_points_to_message() {
    let env = TestEnv::new();
    let (_, err) = env.fails(&["send", "bob", "hi there"], 2);
    assert!(
        err.starts_with(
            "iapeer: unexpected argument \"hi there\" — the text of a message goes in --message: --message \"hi there\""
        ),
        "{err}"
    );
}

#[test]
fn peer_names_are_explained_in_words_and_typos_get_the_registered_name() {
    let env = alice_bob_carol();
    let from = ["--from", "echo-alice"];
    let send = |to: &str| {
        let mut args = vec!["send", to, "--message", "hi"];
        args.extend_from_slice(&from);
        env.fails(&args, 1).1
    };
    let err = send("Carol");
    assert_eq!(
        err.trim(),
        "iapeer send: \"Carol\" is not a peer name: a peer name is 1 to 32 lowercase letters, digits and dashes, starting with a letter — did you mean \"carol\"?"
    );
    assert!(!err.contains('^') && !err.contains('$'), "no regex: {err}");
    let err = send("bobb");
    assert!(
        err.trim().ends_with("did you mean \"bob\"?") && err.contains("\"bobb\""),
        "{err}"
    );
    let err = send("zed");
    assert!(!err.contains("did you mean"), "{err}");
    // A name error from create says the rule in words as well.
    let (_, err) = env.fails(&["create", "Dave_2", "--runtime", "echo"], 1);
    assert!(
        err.contains("a peer name is 1 to 32 lowercase letters") && !err.contains('^'),
        "{err}"
    );
}

#[test]
fn an_empty_message_or_peer_is_refused_without_internal_names() {
    let env = alice_bob_carol();
    for (args, want) in [
        (
            ["send", "bob", "--message", "", "--from", "echo-alice"],
            "iapeer send: the message is empty — give its text with --message \"...\" (or --message-file <path>)",
        ),
        (
            ["send", "", "--message", "hi", "--from", "echo-alice"],
            "iapeer send: the peer name is empty — name one of the peers iapeer list shows",
        ),
    ] {
        let (_, err) = env.fails(&args, 1);
        assert_eq!(err.trim(), want);
        assert!(!err.contains("send_to_peer") && !err.contains("personality"));
    }
    // With --json the refusal is a failure object.
    let (out, _) = env.fails(
        &[
            "send",
            "bob",
            "--message",
            "",
            "--from",
            "echo-alice",
            "--json",
        ],
        1,
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], false, "{out}");
    assert!(v["error"]
        .as_str()
        .unwrap()
        .starts_with("the message is empty"));
}

#[test]
fn lifecycle_verbs_name_the_registered_peer_meant() {
    let env = alice_bob_carol();
    let (_, err) = env.fails(&["stop", "Carol"], 1);
    assert_eq!(
        err.trim(),
        "iapeer stop: peer \"Carol\" is not in the iapeer peers index — did you mean \"carol\"?"
    );
    let (_, err) = env.fails(&["start", "carl"], 1);
    assert!(err.trim().ends_with("did you mean \"carol\"?"), "{err}");
    let (_, err) = env.fails(&["stop", "zed"], 1);
    assert!(!err.contains("did you mean"), "{err}");
}

//! What a sender is told when a wake fails (spec 05 §2): the most informative line of the
//! failure, not the last line of the screen. With the real Codex CLI against the stand-in.

use crate::codex::world;
use crate::common;

use common::openai::Reply;

#[test]
fn a_codex_peer_whose_model_provider_was_renamed_says_so_to_the_sender() {
    let (mut env, api) = world();
    api.script(|_| Reply::Text("ok".into()));
    let out = env.ok(&[
        "send",
        "cx",
        "--from",
        "echo-ea",
        "--message",
        "first",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cx (codex), woke",
        "{}",
        env.diagnostics()
    );
    // A daemon restart leaves the conversation resume-eligible …
    env.stop_daemon();
    // … and the user renames the provider it was held with.
    let config_path = env.home.join(".codex/config.toml");
    let config = std::fs::read_to_string(&config_path).unwrap();
    let renamed = config
        .replace(
            "model_provider = \"standin\"",
            "model_provider = \"standin2\"",
        )
        .replace("[model_providers.standin]", "[model_providers.standin2]");
    assert_ne!(config, renamed);
    std::fs::write(&config_path, renamed).unwrap();
    env.start_daemon();

    let (_, err) = env.fails(
        &[
            "send",
            "cx",
            "--from",
            "echo-ea",
            "--message",
            "second",
            "--topic",
            "t1",
        ],
        1,
    );
    assert_eq!(
        err.trim_end(),
        "iapeer send: peer \"cx\" offline and wake failed: exited during boot (status 1) (on \
         screen: Error: account/gatewayOAuth/read failed: This chat uses model provider \
         “standin”, which is no longer configured. Restore this provider’s configuration to \
         continue. (code -32600), data: {\"type\":\"modelProviderNotConfigured\",\
         \"modelProvider\":\"standin\"})",
        "{}",
        env.diagnostics()
    );
}

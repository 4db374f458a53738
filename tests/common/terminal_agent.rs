//! The terminal agent `parrot` (`tests/terminal_agent/`: its `runtime.json` of kind
//! `terminal` and its program), installed into a [`TestEnv`] with the real verb
//! (`iapeer install-runtime <dir>`), for any test that wants a manifest runtime among its
//! peers (issue 27 items 3 and 4). The program answers each message with `send_to_peer` to its
//! sender, through its own MCP client (the official Python SDK), and logs what it did in
//! `<peer folder>/.parrot/events.jsonl` ([`events`]). For a chain of agents, give a parrot
//! peer `PARROT_REPLY_TO=<peer>` in its launch.env (`env.launch_env(name, RUNTIME, …)`): it
//! then sends each message on to that peer instead of back to its sender.

use super::TestEnv;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The runtime's name, as its manifest gives it.
pub const RUNTIME: &str = "parrot";

/// The Python with the official MCP SDK (`IAPEER_TEST_PYTHON`), or `None` after saying why
/// the test skips.
pub fn python() -> Option<String> {
    let python = std::env::var("IAPEER_TEST_PYTHON").ok();
    if python.is_none() {
        eprintln!(
            "skipped: IAPEER_TEST_PYTHON is not set (the parrot agent's MCP client is the \
             official Python SDK; scripts/test.sh sets it)"
        );
    }
    python
}

/// The folder in the source tree.
fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/terminal_agent")
}

/// Install parrot into `env` with `iapeer install-runtime <dir>`: a copy of
/// `tests/terminal_agent` whose manifest runs `python` (the manifest as shipped says
/// `python3`, which has no MCP SDK here). Returns the verb's output.
pub fn install(env: &TestEnv, python: &str) -> String {
    let dir = env.dir.path().join("parrot-runtime");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["parrot.py", "mcp_client.py", "runtime.json"] {
        std::fs::copy(source().join(file), dir.join(file)).unwrap();
    }
    let manifest = dir.join("runtime.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    m["terminal"]["command"] = python.into();
    std::fs::write(&manifest, m.to_string()).unwrap();
    env.ok(&["install-runtime", dir.to_str().unwrap()])
}

/// What the parrot of peer `personality` logged (`.parrot/events.jsonl`), oldest first.
pub fn events(env: &TestEnv, personality: &str) -> Vec<Value> {
    let path = env.peer_dir(personality).join(".parrot/events.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The logged events of kind `ev` (`start`, `message`, `reply`).
pub fn events_of(env: &TestEnv, personality: &str, ev: &str) -> Vec<Value> {
    events(env, personality)
        .into_iter()
        .filter(|e| e["ev"] == ev)
        .collect()
}

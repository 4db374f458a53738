//! The integration suite: one test crate (one binary, one link of the library), as in
//! ripgrep's `tests/tests.rs`. Each `tests/<area>.rs` is a module of it; `tests/common/` holds
//! the shared helpers.
//!
//! Cargo.toml sets `autotests = false`, so cargo builds only this file as a test target. To add
//! a test file: create `tests/<area>.rs` starting with `use crate::common;` (not `mod common;`)
//! and add `mod <area>;` below; [`every_test_file_is_a_module`] fails if the line is missing.
//! Run one file's tests with `cargo test --test integration <area>::`.

#![warn(clippy::self_named_module_files)]

// The daemon under test (`CARGO_BIN_EXE_iapeer`, built with this crate's profile and features)
// needs its test hooks (src/daemon/test_hooks.rs): a debug build has them, a release build only
// with the `test-hooks` feature.
#[cfg(not(any(debug_assertions, feature = "test-hooks")))]
compile_error!(
    "the integration tests need the daemon's test hooks, which a release build lacks: \
     run `cargo test` (a debug build) or `cargo test --release --features test-hooks`"
);

mod common;

mod access;
mod agent_program;
mod answers;
mod approvals;
mod attach;
mod attachments;
mod background;
mod boot_dialog;
mod busy;
mod bypass_prompts;
mod claude;
mod cli;
mod codex;
mod composer;
mod contain;
mod conversations;
mod correctness;
mod demo;
mod echo_input;
mod ephemeral;
mod failure;
mod fairness;
mod federation;
mod federation_tls;
mod fleet;
mod gemini;
mod gemini_e2e;
mod guide;
mod http;
mod idle;
mod if_busy;
mod inbox;
mod install;
mod interrupt;
mod lifecycle;
mod lifecycle_verbs;
mod limits;
mod logins;
mod mcp;
mod memory;
mod migrate;
mod mixed_team;
mod notice_board;
mod notices;
mod notifier;
mod opencode;
mod opencode_peer;
mod origin;
mod packages;
mod paste;
mod paste_transforms;
mod paths;
mod peers;
mod plugins;
mod prompt;
mod readme_walk;
mod realtime;
mod regressions;
mod release;
mod rename;
mod router_runtime;
mod scale;
mod send;
mod send_deadline;
mod send_rules;
mod service;
mod session_env;
mod soak;
mod storm;
mod telegram;
mod terminal_runtime;
mod truth;
mod ui;
mod views;
mod wake_failure;
mod worktree;

/// With `autotests = false` a file in `tests/` that no `mod` line names would never build or
/// run; this makes that loud.
#[test]
fn every_test_file_is_a_module() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let this = std::fs::read_to_string(dir.join("tests.rs")).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && stem != "tests" {
            assert!(
                this.lines().any(|l| l == format!("mod {stem};")),
                "tests/{stem}.rs is not part of the suite: add `mod {stem};` to tests/tests.rs"
            );
        }
    }
}

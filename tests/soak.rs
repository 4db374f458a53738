//! The soak (issue 12 item 6): `scripts/soak.sh` drives the real daemon under a mixed load and
//! checks resources and answers at the end. The long run is manual; here are the unit tests of
//! its checks (fast, in CI) and a ≤ 60 s smoke of the whole soak (ignored: CI time matters;
//! run it with `cargo test --test integration soak:: -- --ignored`).

use crate::common;

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python the suite uses (the venv from scripts/setup-python.sh when set), else python3.
fn python() -> String {
    std::env::var("IAPEER_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

#[test]
fn soak_checks_flag_hangs_mismatched_log_lines_and_growth() {
    let out = Command::new(python())
        .args(["-B", "scripts/soak/test_soak.py"])
        .current_dir(repo())
        .output()
        .expect("run python");
    assert!(out.status.success(), "{}", common::describe(&out));
}

#[test]
#[ignore = "a 40 s soak of the real daemon; run by hand"]
fn soak_smoke_passes_its_checks() {
    let out = Command::new("scripts/soak.sh")
        .arg("--smoke")
        .env("SOAK_NO_BUILD", "1")
        .env("SOAK_BIN", common::bin())
        .current_dir(repo())
        .output()
        .expect("run scripts/soak.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(text.contains("all checks passed"), "{text}");
}

//! The environment a session's program starts with (spec 04 §1 "Spawning"): nothing that
//! describes the terminal the daemon was started from reaches it.

use crate::common;

use common::TestEnv;
use std::time::Duration;

/// Stands in for the claude program: records the size its terminal reports (`stty size`
/// asks the pty) next to the size variables it inherited, then idles.
const PROBE: &str = r#"#!/bin/sh
[ "$1" = "--version" ] && { echo "2.1.332 (Claude Code)"; exit 0; }
out="$IAPEER_TEST_PROBE_OUT"
printf 'tty=%s columns=%s lines=%s term_program=%s tmux=%s\n' "$(stty size)" "${COLUMNS-unset}" "${LINES-unset}" "${TERM_PROGRAM-unset}" "${TMUX-unset}" > "$out.tmp"
mv "$out.tmp" "$out"
exec sleep 60
"#;

#[test]
fn a_session_sees_its_own_pty_size_not_the_daemons_terminal() {
    let mut env = TestEnv::new();
    let probe = env.dir.path().join("claude-probe.sh");
    std::fs::write(&probe, PROBE).unwrap();
    let mut perms = std::fs::metadata(&probe).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&probe, perms).unwrap();
    let out = env.dir.path().join("probe.out");
    env.set("IAPEER_CLAUDE_BIN", probe.to_str().unwrap())
        .set("IAPEER_TEST_PROBE_OUT", out.to_str().unwrap())
        // The daemon is started from a small terminal inside tmux.
        .set("COLUMNS", "40")
        .set("LINES", "10")
        .set("TERM_PROGRAM", "tmux")
        .set("TMUX", "/tmp/tmux-1000/default,1,0");
    env.ok(&["create", "cb", "--runtime", "claude"]);
    env.create_echo("ea");
    env.start_daemon();
    // The probe never shows a prompt: the wake fails later, the probe has run by then.
    let mut wake = env
        .cmd(&["send", "cb", "--from", "echo-ea", "--message", "hi"])
        .spawn()
        .unwrap();
    env.wait_until("the probe runs in its pty", Duration::from_secs(30), |_| {
        out.exists()
    });
    let _ = wake.kill();
    let _ = wake.wait();
    let seen = common::read(&out);
    assert_eq!(
        seen.trim(),
        "tty=50 220 columns=unset lines=unset term_program=unset tmux=unset",
        "{}",
        env.diagnostics()
    );
    env.stop_daemon();
}

//! The environment a session's program starts with (spec 04 §1 "Spawning"): nothing that
//! describes the terminal the daemon was started from reaches it.

use crate::common;

use common::TestEnv;
use std::time::Duration;

/// Stands in for the claude program: records the size its terminal reports (`stty size`
/// asks the pty) next to the size variables it inherited, then idles; answers `--version`
/// and `auth status` (asked by `create`) without recording.
const PROBE: &str = r#"#!/bin/sh
[ "$1" = "--version" ] && { echo "2.1.332 (Claude Code)"; exit 0; }
# `create` asks the program whether it is logged in (`claude auth status`): not the session.
[ "$1" = "auth" ] && { echo '{"loggedIn": true}'; exit 0; }
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

/// A router-runtime program that writes its environment to
/// `$IAPEER_TEST_ENV_DIR/<identity>` and then reads its input for ever.
const ENV_DUMP: &str = r#"env > "$IAPEER_TEST_ENV_DIR/$PEER_IDENTITY.tmp" && mv "$IAPEER_TEST_ENV_DIR/$PEER_IDENTITY.tmp" "$IAPEER_TEST_ENV_DIR/$PEER_IDENTITY"; exec cat > /dev/null"#;

/// `NAME=value` lines of a process's environment, from `/proc/<pid>/environ`.
fn environ_of(pid: u64) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .map(|kv| String::from_utf8_lossy(kv).into_owned())
        .collect()
}

/// The value of `IAPEER_BEARER_TOKEN` in `NAME=value` lines.
fn bearer_in(lines: &[String]) -> Option<String> {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("IAPEER_BEARER_TOKEN="))
        .map(str::to_string)
}

/// The fleet's secret (issue 26 item 1) reaches the one router runtime that calls the fleet
/// API (telegram: `@agfpd/telegram-runtime` sends `IAPEER_BEARER_TOKEN`) and no other
/// process: not another router package, not the human's inbox writer, not an agent. A bearer
/// set in the daemon's own environment is handed the same way: to telegram, and to agents,
/// whose MCP configurations send it in that mode (spec 02 §4), never to anything else.
#[test]
fn the_fleet_secret_reaches_the_fleet_client_and_no_agent() {
    for user_bearer in [None, Some("user-s3cret-of-thirty-two-characters")] {
        let mut env = TestEnv::new();
        let dumps = env.dir.path().join("env");
        std::fs::create_dir_all(&dumps).unwrap();
        env.set("IAPEER_TEST_ENV_DIR", dumps.to_str().unwrap());
        if let Some(b) = user_bearer {
            env.set("IAPEER_BEARER_TOKEN", b);
        }
        for rt in ["telegram", "mailbox"] {
            let path = env.paths().runtime_manifest(rt);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let manifest = serde_json::json!({"runtime": rt,
                "run": {"command": "/bin/sh", "args": ["-c", ENV_DUMP]}});
            std::fs::write(path, manifest.to_string()).unwrap();
        }
        for (p, rt) in [("tg", "telegram"), ("mb", "mailbox")] {
            env.ok(&[
                "create",
                p,
                "--runtime",
                rt,
                "--intelligence",
                "natural",
                "--no-bootstrap",
            ]);
        }
        env.ok(&["create", "you", "--runtime", "human"]);
        env.create_echo("alice");
        env.start_daemon();
        env.wait_until("both packages ran", Duration::from_secs(30), |_| {
            dumps.join("telegram-tg").exists() && dumps.join("mailbox-mb").exists()
        });
        let woke = env.control(r#"{"op":"wake","personality":"alice"}"#);
        assert_eq!(woke["ok"], true, "{woke}");
        env.wait_until("the human is up", Duration::from_secs(30), |e| {
            e.status_of("you", "human") == "live"
        });
        let pid_of = |identity: &str| {
            env.control(r#"{"op":"list"}"#)["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["identity"] == identity)
                .and_then(|s| s["pid"].as_u64())
                .unwrap_or_else(|| panic!("{identity} has no session"))
        };
        let lines = |name: &str| -> Vec<String> {
            common::read(&dumps.join(name))
                .lines()
                .map(str::to_string)
                .collect()
        };
        let telegram = lines("telegram-tg");
        let mailbox = lines("mailbox-mb");
        let human = environ_of(pid_of("human-you"));
        let agent = environ_of(pid_of("echo-alice"));
        let (fleet_secret, agent_gets) = match user_bearer {
            None => (env.fleet_token(), None),
            Some(b) => (b.to_string(), Some(b.to_string())),
        };
        assert_eq!(
            bearer_in(&telegram),
            Some(fleet_secret.clone()),
            "{user_bearer:?}"
        );
        assert_eq!(bearer_in(&mailbox), None, "{user_bearer:?}");
        assert_eq!(bearer_in(&human), None, "{user_bearer:?}");
        assert_eq!(bearer_in(&agent), agent_gets, "{user_bearer:?}");
        if user_bearer.is_none() {
            // The fleet token is in no variable of any of them.
            for (who, env_lines) in [("mailbox", &mailbox), ("human", &human), ("agent", &agent)] {
                assert!(
                    !env_lines.iter().any(|l| l.contains(&fleet_secret)),
                    "{who} has the fleet token"
                );
            }
            // The agent has its own session token, which is not the fleet's.
            let own = agent
                .iter()
                .find_map(|l| l.strip_prefix("IAPEER_TOKEN="))
                .unwrap();
            assert_ne!(own, fleet_secret);
        }
        env.stop_daemon();
    }
}

//! Running iapeer as a service (issue 8 item 2, spec 08 §1): `onboard` (risk gate,
//! `--dry-run`, the service manager or `daemon --detach`, the health wait), the `status`
//! service line, `update` / `rollback` with the mid-turn refusal and the health check, and
//! `uninstall` removing exactly what install created.
//!
//! No service manager runs on this machine (nor in CI or containers): the tests that need
//! one replace `systemctl` through the seam, `IAPEER_SERVICE_CTL`, with a script that records
//! its command lines and does what systemd would do to the daemon (`enable --now` starts
//! `iapeer daemon --detach`, `disable --now` stops it).

use crate::common;

use crate::attach::Terminal;
use common::{alive, bin, describe, TestEnv};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

/// Every entry under `dir` (recursively): folders as `None`, files with (size, mtime).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<(u64, SystemTime)>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                out.insert(p.clone(), None);
                stack.push(p);
            } else {
                out.insert(p, Some((meta.len(), meta.modified().unwrap())));
            }
        }
    }
    out
}

/// The files (not folders) under `dir`, with their bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    tree(dir)
        .into_iter()
        .filter(|(_, v)| v.is_some())
        .map(|(p, _)| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Runs `iapeer shutdown` in this world when dropped: a failed assertion must not leak a
/// detached daemon.
pub(crate) struct StopAtEnd<'a>(pub(crate) &'a TestEnv);

impl Drop for StopAtEnd<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["shutdown"]);
    }
}

/// A stand-in for `systemctl` behind the seam: appends each command line to `calls`, keeps
/// "enabled" as a file beside it, and starts (`enable --now`, `restart`) the program the
/// unit's `ExecStart=` names, as `<program> daemon --detach`.
pub(crate) struct FakeSystemctl {
    script: PathBuf,
    calls: PathBuf,
}

impl FakeSystemctl {
    fn new(dir: &Path, unit: &Path) -> FakeSystemctl {
        std::fs::create_dir_all(dir).unwrap();
        let calls = dir.join("calls");
        let enabled = dir.join("enabled");
        let script = dir.join("fake-systemctl");
        let iapeer = bin();
        std::fs::write(
            &script,
            format!(
                r#"#!/bin/sh
echo "$*" >> "{calls}"
start() {{ exe=$(sed -n 's/^ExecStart=\(.*\) daemon$/\1/p' "{unit}"); exec "$exe" daemon --detach >/dev/null; }}
case "$*" in
  "systemctl --user daemon-reload") exit 0 ;;
  "systemctl --user enable --now iapeer") touch "{enabled}"; start ;;
  "systemctl --user restart iapeer") "{iapeer}" shutdown >/dev/null; start ;;
  "systemctl --user disable --now iapeer") rm -f "{enabled}"; exec "{iapeer}" shutdown >/dev/null ;;
  "systemctl --user is-enabled iapeer") if [ -e "{enabled}" ]; then echo enabled; else echo disabled; exit 1; fi ;;
  "systemctl --user is-active iapeer") if [ -e "{enabled}" ]; then echo active; else echo inactive; exit 3; fi ;;
  *) echo "fake systemctl: unexpected $*" >&2; exit 1 ;;
esac
"#,
                calls = calls.display(),
                enabled = enabled.display(),
                iapeer = iapeer.display(),
                unit = unit.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeSystemctl { script, calls }
    }

    /// The command lines run so far.
    pub(crate) fn calls(&self) -> Vec<String> {
        common::read(&self.calls)
            .lines()
            .map(String::from)
            .collect()
    }
}

/// The world of a systemd user manager behind the seam: the unit folder and the fake.
pub(crate) fn with_fake_systemd(env: &mut TestEnv) -> (PathBuf, FakeSystemctl) {
    // Outside env.dir's root and home, so that snapshots of them do not see its files.
    let sd = env.dir.path().join("systemd-user");
    let fake = FakeSystemctl::new(&env.dir.path().join("fake"), &sd.join("iapeer.service"));
    env.set("IAPEER_SYSTEMD_DIR", sd.to_str().unwrap());
    env.set("IAPEER_SERVICE_CTL", fake.script.to_str().unwrap());
    (sd, fake)
}

#[test]
fn onboard_dry_run_prints_every_step_and_changes_nothing() {
    // Without a service manager.
    let env = TestEnv::new();
    let before = tree(env.dir.path());
    let out = env.ok(&["onboard", "--dry-run"]);
    assert_eq!(
        tree(env.dir.path()),
        before,
        "--dry-run changed files:\n{out}"
    );
    assert!(out.contains("permission prompts are bypassed"), "{out}");
    for step in [
        "1. prepare the root",
        "2. no service manager runs here: start the daemon in the background with `iapeer daemon --detach`",
        "3. wait until the daemon is healthy (2 answered pings in a row within 15 s)",
        "4. agent logins: nothing to check — no agent CLI with a login (claude or codex or gemini or opencode) is installed",
        "5. create your human peer",
        "6. create the built-in notifier service peers timer and watcher",
    ] {
        assert!(out.contains(step), "missing {step:?} in:\n{out}");
    }
    assert!(!env.socket().exists());

    // With systemd behind the seam: the unit would be written and loaded; nothing is run.
    let mut env = TestEnv::new();
    let (sd, fake) = with_fake_systemd(&mut env);
    let before = tree(env.dir.path());
    let out = env.ok(&["onboard", "--dry-run"]);
    let mut after = tree(env.dir.path());
    after.remove(&fake.calls);
    assert_eq!(after, before, "--dry-run changed files:\n{out}");
    assert!(
        out.contains(&format!(
            "2. write the systemd service file {}",
            sd.join("iapeer.service").display()
        )) && out.contains(
            "3. load the systemd service and start the daemon: systemctl --user daemon-reload && systemctl --user enable --now iapeer"
        ),
        "{out}"
    );
    assert_eq!(fake.calls(), Vec::<String>::new(), "dry-run ran systemctl");
}

/// Spec 08 §1 step 2 with the real Claude Code and Codex CLIs in a fresh home: neither is
/// logged in, and onboard says so with what to do; a dry run only says what it would ask
/// (asking writes the CLIs' own config files); with an API key Claude Code counts as logged in.
#[test]
fn onboard_warns_about_agent_clis_that_are_not_logged_in() {
    let mut env = TestEnv::new();
    env.set(
        "IAPEER_CLAUDE_BIN",
        &std::env::var("IAPEER_TEST_CLAUDE_BIN").expect("IAPEER_TEST_CLAUDE_BIN (scripts/test.sh)"),
    );
    env.set("IAPEER_CODEX_BIN", &crate::codex::codex_bin());
    let out = env.ok(&["onboard", "--dry-run"]);
    assert!(
        out.contains("4. check whether claude is logged in ("),
        "{out}"
    );
    assert!(out.contains("check whether codex is logged in ("), "{out}");
    assert!(
        !env.home.join(".claude.json").exists(),
        "a dry run asked claude"
    );

    let out = env.ok(&["onboard", "--accept-risk"]);
    assert!(
        out.contains("- warning: claude (")
            && out.contains(") is installed but not logged in: agents on it cannot answer until you log in by running `claude` once"),
        "{out}"
    );
    assert!(
        out.contains("- warning: codex (") && out.contains("log in with `codex login`"),
        "{out}"
    );
    env.ok(&["shutdown"]);
    env.set("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key");
    let out = env.ok(&["onboard", "--accept-risk"]);
    assert!(out.contains("- agent login: claude is logged in"), "{out}");
    env.ok(&["shutdown"]);
}

/// Spec 08 §1 step 2 for Gemini CLI and OpenCode, the real CLIs in a fresh home: neither is
/// logged in and onboard says so with what to do; with `GEMINI_API_KEY` (Gemini CLI's own
/// rules, read from its bundle: `host::gemini_login`) and a provider's key in the
/// environment (counted by `opencode auth list`) both are.
#[test]
fn onboard_checks_the_gemini_and_opencode_logins() {
    let (Some(gemini), Ok(opencode)) = (
        crate::gemini_e2e::gemini_bin(),
        std::env::var("IAPEER_TEST_OPENCODE_BIN"),
    ) else {
        eprintln!("skipped: IAPEER_TEST_GEMINI_BIN / IAPEER_TEST_OPENCODE_BIN not set");
        return;
    };
    let mut env = TestEnv::new();
    env.set("IAPEER_GEMINI_BIN", &gemini)
        .set("IAPEER_OPENCODE_BIN", &opencode)
        .set("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .set("OPENCODE_DISABLE_AUTOUPDATE", "1");
    let out = env.ok(&["onboard", "--dry-run"]);
    assert!(out.contains("check whether gemini is logged in ("), "{out}");
    assert!(
        out.contains("check whether opencode is logged in ("),
        "{out}"
    );
    let out = env.ok(&["onboard", "--accept-risk"]);
    assert!(
        out.contains("- warning: gemini (")
            && out.contains("cannot answer until you give the peers a GEMINI_API_KEY"),
        "{out}"
    );
    assert!(
        out.contains("- warning: opencode (") && out.contains("`opencode auth login`"),
        "{out}"
    );
    env.ok(&["shutdown"]);
    env.set("GEMINI_API_KEY", "not-a-real-key")
        .set("OPENAI_API_KEY", "sk-not-a-real-key");
    let out = env.ok(&["onboard", "--accept-risk"]);
    assert!(out.contains("- agent login: gemini is logged in"), "{out}");
    assert!(
        out.contains("- agent login: opencode is logged in"),
        "{out}"
    );
    env.ok(&["shutdown"]);
}

#[test]
fn onboard_without_a_terminal_needs_accept_risk() {
    let env = TestEnv::new();
    let (out, err) = env.fails(&["onboard"], 2);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("permission prompts are bypassed") && err.contains("pass --accept-risk"),
        "{err}"
    );
    assert!(
        !env.root.exists(),
        "onboard changed something before the gate"
    );
    assert!(!env.socket().exists());
}

/// A shell on a real pty, with this world's environment, running `line` and then staying.
fn shell_on_pty(env: &TestEnv, line: &str) -> Terminal {
    let inner = env.cmd(&[]);
    let mut sh = Command::new("sh");
    sh.args(["-c", &format!("{line}; sleep 60")]);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.current_dir(inner.get_current_dir().unwrap());
    Terminal::spawn(sh)
}

fn wait_screen(env: &TestEnv, term: &Terminal, needle: &str) {
    assert!(
        common::poll(Duration::from_secs(30), || term.screen().contains(needle)),
        "the terminal never showed {needle:?}; screen:\n{}\n{}",
        term.screen(),
        env.diagnostics()
    );
}

/// Issue 8's "must show": `onboard --accept-risk` typed in a terminal reaches a healthy
/// daemon (here `daemon --detach`: no service manager runs), which survives the terminal
/// closing (SIGHUP to the shell's session, the pty gone).
#[test]
fn onboard_reaches_a_healthy_daemon_that_survives_the_terminal_closing() {
    let env = TestEnv::new();
    let _stop = StopAtEnd(&env);
    let term = shell_on_pty(
        &env,
        &format!("\"{}\" onboard --accept-risk --human ada", bin().display()),
    );
    wait_screen(&env, &term, "service: none");
    let screen = term.screen();
    assert!(
        screen.contains("created your human peer ada"),
        "onboard gives the operator an inbox:\n{screen}"
    );
    assert!(
        screen.contains("started the daemon in the background with `iapeer daemon --detach`")
            && screen.contains("iapeer shutdown")
            && screen.contains("daemon: healthy (pid"),
        "onboard says which way it used and how to stop it:\n{screen}"
    );
    let pid = daemon_pid(&env);

    // The terminal closes: SIGHUP to its shell's process group, the pty gone. The daemon is
    // in neither the terminal's session nor its group, so the hang-up does not reach it.
    assert!(
        common::out_of_reach(pid, term.pid()),
        "the daemon is the terminal's"
    );
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(term.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    );
    drop(term);
    assert!(alive(pid), "the daemon died with the terminal");
    let out = env.ok(&["status"]);
    assert!(
        out.contains("daemon: healthy @") && out.contains("service: none (no service manager here"),
        "{out}"
    );
    assert!(env.root.join("docs/iapeer/README.md").exists());

    // The operator's human peer is live, and what is sent to it waits in its inbox.
    env.wait_until("human-ada is live", Duration::from_secs(20), |e| {
        e.status_of("ada", "human") == "live"
    });
    env.create_echo("alice");
    env.ok(&[
        "send",
        "ada",
        "--from",
        "echo-alice",
        "--message",
        "welcome aboard",
        "--topic",
        "hello",
    ]);
    let inbox = env.ok(&["inbox", "ada"]);
    assert!(
        inbox.contains("welcome aboard") && inbox.contains("alice"),
        "{inbox}"
    );
    // A second onboard keeps the human peer it made.
    let again = env.ok(&["onboard", "--accept-risk", "--dry-run"]);
    assert!(again.contains("human peer ada exists already"), "{again}");
}

/// On a terminal without the flag, the risk is explained and a typed "yes" goes ahead.
#[test]
fn onboard_on_a_terminal_asks_and_a_typed_yes_goes_ahead() {
    let env = TestEnv::new();
    let _stop = StopAtEnd(&env);
    let mut term = shell_on_pty(&env, &format!("\"{}\" onboard", bin().display()));
    wait_screen(&env, &term, "Go ahead? [yes/no]");
    assert!(
        term.screen().contains("permission prompts are bypassed"),
        "{}",
        term.screen()
    );
    assert!(
        !env.socket().exists(),
        "changed something before the answer"
    );
    term.type_bytes(b"yes\r");
    wait_screen(&env, &term, "service: none");
    env.ok(&["status"]);
}

/// Through the seam (no service manager runs here): onboard writes the unit, runs
/// `daemon-reload` and `enable --now iapeer`, waits for health; status reports the service
/// loaded from `is-enabled`/`is-active`; a second onboard loads nothing; update points the
/// unit at the installed binary and restarts the service (rollback restarts it again);
/// uninstall disables it and removes the unit; status then says not loaded and exits 1.
#[test]
fn onboard_status_update_and_uninstall_drive_systemd_through_the_seam() {
    let mut env = TestEnv::new();
    let (sd, fake) = with_fake_systemd(&mut env);
    let bin_dir = installed(&mut env);
    let (newer, _) = newer_build(&env);
    let _stop = StopAtEnd(&env);
    let out = env.ok(&["onboard", "--accept-risk"]);
    let unit = sd.join("iapeer.service");
    assert_eq!(
        fake.calls(),
        [
            "systemctl --user daemon-reload",
            "systemctl --user enable --now iapeer"
        ],
        "{out}"
    );
    assert!(
        common::read(&unit).starts_with("# com.iapeer.managed"),
        "{out}"
    );
    assert!(
        out.contains("daemon: healthy (pid")
            && out.contains("service: systemd — the service manager runs the daemon"),
        "{out}"
    );

    let out = env.ok(&["status"]);
    assert!(
        out.contains("service: systemd loaded (enabled, active)"),
        "{out}"
    );
    let doc: serde_json::Value = serde_json::from_str(&env.ok(&["status", "--json"])).unwrap();
    assert_eq!(
        (&doc["service"], &doc["service_loaded"]),
        (&serde_json::json!("systemd"), &serde_json::json!(true)),
        "{doc}"
    );
    assert!(fake
        .calls()
        .contains(&"systemctl --user is-active iapeer".to_string()));

    let n = fake.calls().len();
    let out = env.ok(&["onboard", "--accept-risk"]);
    assert!(
        out.contains("the systemd service is loaded already"),
        "{out}"
    );
    assert!(
        !fake.calls()[n..].iter().any(|c| c.contains("enable --now")),
        "{:?}",
        fake.calls()
    );

    // The unit names the binary that ran onboard (the build under test); update makes it
    // name the installed one and restarts through systemd.
    let first = daemon_pid(&env);
    let n = fake.calls().len();
    let out = env.ok(&["update", newer.to_str().unwrap()]);
    let installed_bin = bin_dir.join("iapeer");
    assert_eq!(
        fake.calls()[n..]
            .iter()
            .filter(|c| !c.contains(" is-"))
            .collect::<Vec<_>>(),
        [
            "systemctl --user daemon-reload",
            "systemctl --user restart iapeer"
        ],
        "{out}"
    );
    assert!(
        common::read(&unit)
            .lines()
            .any(|l| l == format!("ExecStart={} daemon", installed_bin.display())),
        "{}",
        common::read(&unit)
    );
    let second = daemon_pid(&env);
    assert!(
        second != first
            && out.contains(&format!(
                "daemon: restarted by systemd, healthy (pid {second}"
            )),
        "{out}"
    );
    assert_eq!(exe_of(second), installed_bin);
    let n = fake.calls().len();
    let out = env.ok(&["rollback"]);
    assert_eq!(
        fake.calls()[n..]
            .iter()
            .filter(|c| !c.contains(" is-"))
            .collect::<Vec<_>>(),
        ["systemctl --user restart iapeer"],
        "{out}"
    );
    assert!(daemon_pid(&env) != second, "{out}");

    let n = fake.calls().len();
    let out = env.ok(&["uninstall", "--yes"]);
    assert_eq!(
        fake.calls()[n..]
            .iter()
            .filter(|c| !c.contains(" is-"))
            .collect::<Vec<_>>(),
        [
            "systemctl --user disable --now iapeer",
            "systemctl --user daemon-reload"
        ],
        "{out}"
    );
    assert!(!unit.exists(), "{out}");
    assert!(!env.socket().exists(), "the daemon is gone: {out}");
    let (out, _) = env.fails(&["status"], 1);
    assert!(
        out.contains("service: systemd not loaded (no service file at"),
        "{out}"
    );
    assert!(env.root.exists(), "the root is kept without --purge");
}

/// The installed binary in `<dir>/bin`, a copy of the binary under test.
pub(crate) fn installed(env: &mut TestEnv) -> PathBuf {
    let bin_dir = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::fs::copy(bin(), bin_dir.join("iapeer")).unwrap();
    env.set("IAPEER_BIN_DIR", bin_dir.to_str().unwrap());
    bin_dir
}

/// Another build: the binary under test with bytes appended (it runs the same).
fn newer_build(env: &TestEnv) -> (PathBuf, Vec<u8>) {
    let newer = env.dir.path().join("iapeer-newer");
    let mut bytes = std::fs::read(bin()).unwrap();
    bytes.extend_from_slice(b"\n# another build\n");
    std::fs::write(&newer, &bytes).unwrap();
    std::fs::set_permissions(&newer, std::fs::Permissions::from_mode(0o755)).unwrap();
    (newer, bytes)
}

/// The pid `status --json` reports for the daemon.
fn daemon_pid(env: &TestEnv) -> u32 {
    let doc: serde_json::Value = serde_json::from_str(&env.ok(&["status", "--json"])).unwrap();
    doc["daemon"]["pid"].as_u64().expect("a healthy daemon") as u32
}

/// The program a process runs.
fn exe_of(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
}

#[test]
fn update_refuses_mid_turn_then_force_restarts_on_the_new_binary_and_rollback_goes_back() {
    let mut env = TestEnv::new();
    let bin_dir = installed(&mut env);
    let (newer, new_bytes) = newer_build(&env);
    let old_bytes = std::fs::read(bin()).unwrap();
    env.create_echo("alice");
    env.create_echo("bob");
    env.launch_env("bob", "echo", "PEER_START_ARGS=--reply-delay-ms 15000\n");
    // list's `busy` follows the screen at once (the session reports each flip), not the
    // supervise tick (60 s by default, left as it is here).
    let _stop = StopAtEnd(&env);
    env.ok(&["daemon", "--detach"]);
    let first = daemon_pid(&env);

    // bob is mid-turn: replying, for 15 s.
    env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "please answer",
    ]);
    env.wait_until("bob is mid-turn", Duration::from_secs(3), |e| {
        e.control(r#"{"op":"list"}"#)["sessions"]
            .as_array()
            .is_some_and(|s| {
                s.iter()
                    .any(|s| s["identity"] == "echo-bob" && s["busy"] == true)
            })
    });
    let (out, err) = env.fails(&["update", newer.to_str().unwrap()], 1);
    assert!(out.contains("echo-bob (mid-turn)"), "{out}");
    assert!(
        err.contains("not updated: an agent is mid-turn (echo-bob)") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(bin_dir.join("iapeer")).unwrap(), old_bytes);
    assert!(!bin_dir.join("iapeer.prev").exists());
    assert_eq!(daemon_pid(&env), first, "the daemon was not restarted");

    let out = env.ok(&["update", newer.to_str().unwrap(), "--force"]);
    assert_eq!(
        std::fs::read(bin_dir.join("iapeer")).unwrap(),
        new_bytes,
        "{out}"
    );
    assert_eq!(
        std::fs::read(bin_dir.join("iapeer.prev")).unwrap(),
        old_bytes
    );
    let second = daemon_pid(&env);
    assert!(
        out.contains(&format!(
            "daemon: restarted with `iapeer daemon --detach`, healthy (pid {second}"
        )),
        "{out}"
    );
    assert!(second != first && !alive(first), "{out}");
    assert_eq!(
        exe_of(second),
        bin_dir.join("iapeer"),
        "runs the installed binary"
    );

    // The same build again: nothing to do.
    let out = env.ok(&["update", newer.to_str().unwrap()]);
    assert!(out.contains("nothing to do"), "{out}");
    assert_eq!(daemon_pid(&env), second);

    let out = env.ok(&["rollback"]);
    assert_eq!(
        std::fs::read(bin_dir.join("iapeer")).unwrap(),
        old_bytes,
        "{out}"
    );
    assert!(!bin_dir.join("iapeer.prev").exists());
    let third = daemon_pid(&env);
    assert!(third != second && out.contains("healthy (pid"), "{out}");
    // The daemon works: a message still wakes and reaches a peer.
    env.ok(&[
        "send",
        "alice",
        "--from",
        "echo-bob",
        "--message",
        "echo: back",
    ]);
    let (_, err) = env.fails(&["rollback"], 1);
    assert!(err.contains("no previous binary"), "{err}");
}

/// A build that cannot run the daemon: update exits 1 and advises rollback, which brings a
/// healthy daemon back. A version instead of a path is refused with what to do.
#[test]
fn update_to_a_broken_build_advises_rollback_and_rollback_heals() {
    let mut env = TestEnv::new();
    let bin_dir = installed(&mut env);
    let build = |name: &str, case: &str| {
        let path = env.dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\ncase {case} esac\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let broken = build(
        "iapeer-broken",
        "\"$1\" in --version) echo 'iapeer 9.9.9' ;; *) echo 'broken build' >&2; exit 1 ;;",
    );
    let (_, err) = env.fails(&["update", "0.2.0"], 1);
    assert!(
        err.contains("from the package registry (cargo) is not available")
            && err.contains("iapeer update target/release/iapeer"),
        "{err}"
    );
    // A build that answers --version where it was built but not once installed: caught
    // before any restart, with the same advice.
    let here_only = build(
        "iapeer-here-only",
        "\"$0\" in *here-only) echo 'iapeer 9.9.8' ;; *) exit 1 ;;",
    );
    let (_, err) = env.fails(&["update", here_only.to_str().unwrap()], 1);
    let prev = bin_dir.join("iapeer.prev");
    let advice = format!(
        "go back to the previous binary with: {} rollback",
        prev.display()
    );
    assert!(
        err.contains("the installed binary does not run") && err.contains(&advice),
        "{err}"
    );
    // Rollback also starts the daemon (it was not running).
    let _stop = StopAtEnd(&env);
    let rolled = env.cmd_of(&prev, &["rollback"]).output().unwrap();
    assert!(rolled.status.success(), "{}", describe(&rolled));
    assert_eq!(
        std::fs::read(bin_dir.join("iapeer")).unwrap(),
        std::fs::read(bin()).unwrap()
    );
    env.ok(&["status"]);

    let (out, err) = env.fails(&["update", broken.to_str().unwrap()], 1);
    assert!(out.contains("is now iapeer 9.9.9"), "{out}");
    // `iapeer` is the broken build now: the advice names the previous binary (newcomer
    // walkthrough: "go back with: iapeer rollback" ran the broken one again).
    assert!(
        err.contains("broken build") && err.contains(&advice),
        "{err}"
    );
    env.fails(&["status"], 1);
    // The command the advice names works.
    let rolled = env.cmd_of(&prev, &["rollback"]).output().unwrap();
    assert!(rolled.status.success(), "{}", describe(&rolled));
    let out = String::from_utf8_lossy(&rolled.stdout);
    assert!(out.contains("healthy (pid"), "{out}");
    assert_eq!(
        std::fs::read(bin_dir.join("iapeer")).unwrap(),
        std::fs::read(bin()).unwrap()
    );
    env.ok(&["status"]);
}

/// `scripts/install.sh` then `uninstall`: without a terminal and without --yes it exits 2;
/// --dry-run lists and changes nothing; --yes leaves the home exactly as before install
/// (files the user had there are kept; Codex's config.toml loses the MCP server block and
/// update setting a codex peer's creation added, and keeps the user's comments and settings
/// around them), keeps the root; --purge deletes the root.
/// A user's Codex config: comments, a root setting, tables before and after where iapeer
/// puts its own.
const CODEX_USER_CONFIG: &str = "# my Codex settings\nmodel = \"o3\" # favourite\n\n\
    [mcp_servers.other]\ncommand = \"other-server\"\n\n# keep this one\n[profiles.fast]\nmodel = \"o4-mini\"\n";

#[test]
fn uninstall_removes_exactly_what_install_created() {
    let mut env = TestEnv::new();
    let (sd, _fake) = with_fake_systemd(&mut env);
    env.set("IAPEER_BIN_DIR", "");
    env.set("XDG_DATA_HOME", "");
    env.set("XDG_CONFIG_HOME", "");
    let home = env.home.clone();
    // The user's own files next to where install puts its own.
    for (p, text) in [
        (".local/bin/other-tool", "#!/bin/sh\n"),
        (".local/share/man/man1/other.1", ".TH OTHER 1\n"),
        (".config/fish/completions/other.fish", "complete -c other\n"),
        (".codex/config.toml", CODEX_USER_CONFIG),
    ] {
        let p = home.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let before = files(&home);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install.sh");
    let out = Command::new("bash")
        .arg(&script)
        .env("HOME", &home)
        .env("IAPEER_ROOT", &env.root)
        .env("IAPEER_INSTALL_FROM", bin())
        .env("IAPEER_SYSTEMD_DIR", &sd)
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", home.join(".local/bin").display()),
        )
        .env_remove("IAPEER_BIN_DIR")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("run scripts/install.sh");
    assert!(out.status.success(), "install.sh: {}", describe(&out));
    let installed = files(&home);
    assert!(
        installed.len() >= before.len() + 5,
        "{:?}",
        installed.keys()
    );
    assert!(sd.join("iapeer.service").exists());
    // A codex peer's creation adds iapeer's MCP server, the update setting and its folder's
    // trust to Codex's config (the fake codex only makes the runtime "installed").
    let codex = home.join("fake-codex");
    std::fs::write(&codex, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.set("IAPEER_CODEX_BIN", codex.to_str().unwrap());
    env.set("CODEX_HOME", home.join(".codex").to_str().unwrap());
    env.ok(&["create", "cx", "--runtime", "codex", "--no-bootstrap"]);
    let config = home.join(".codex/config.toml");
    let set_up = std::fs::read_to_string(&config).unwrap();
    assert!(
        set_up.contains("[mcp_servers.iapeer]") && set_up.contains("check_for_update_on_startup"),
        "{set_up}"
    );
    std::fs::remove_file(&codex).unwrap();
    let installed = files(&home);

    let (_, err) = env.fails(&["uninstall"], 2);
    assert!(err.contains("pass --yes"), "{err}");
    let out = env.ok(&["uninstall", "--dry-run"]);
    assert!(
        out.contains(&format!(
            "remove {}",
            home.join(".local/bin/iapeer").display()
        )) && out.contains(&format!("remove {}", sd.join("iapeer.service").display()))
            && out.contains("keep the root"),
        "{out}"
    );
    assert_eq!(files(&home), installed, "--dry-run removed files");

    assert!(
        out.contains(&format!(
            "take iapeer's MCP server block and update setting out of {}",
            config.display()
        )),
        "{out}"
    );
    let out = env.ok(&["uninstall", "--yes"]);
    // The peer's folder stays (the root is kept), and with it its trust entry.
    let left = std::fs::read_to_string(&config).unwrap();
    let trust = format!(
        "\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        env.root.join("peers/cx").canonicalize().unwrap().display()
    );
    assert_eq!(left, format!("{CODEX_USER_CONFIG}{trust}"), "{out}");
    std::fs::write(&config, CODEX_USER_CONFIG).unwrap();
    assert_eq!(
        files(&home),
        before,
        "uninstall left or removed other files:\n{out}"
    );
    assert!(files(&sd).is_empty(), "{out}");
    assert!(
        env.root.join("IAPEER.md").exists(),
        "the root is kept: {out}"
    );
    let out = env.ok(&["uninstall", "--yes", "--purge"]);
    assert!(!env.root.exists(), "{out}");
    assert_eq!(files(&home), before);
}

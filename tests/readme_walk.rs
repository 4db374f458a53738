//! The README walked from top to bottom on a fresh account (issue 30's must-show): the
//! commands of README.md's `sh` blocks, taken from the README itself and run by `bash` as a
//! new user types them, in the README's order, each with its real outcome checked (exit code,
//! the words it prints, a message in the echo transcript or a human's inbox). When the README
//! changes a command this test runs the new one; when a command it relies on is gone,
//! [`Readme::line`] fails and names it.
//!
//! The fresh account: `HOME` and `IAPEER_ROOT` (= `$HOME/.iapeer`, the default) in a temp
//! folder, `USER=ada` (onboard names the operator's human peer after the login name), `PATH` =
//! the temp `~/.local/bin` + `/usr/bin:/bin`, `iapeer` installed there by `scripts/install.sh`
//! from the binary under test (`IAPEER_INSTALL_FROM`, so nothing is built again).
//!
//! No real service manager is touched: `IAPEER_SERVICE_CTL` (the seam every `systemctl` /
//! `launchctl` call goes through, `host::control`) names a guard script that records a call
//! and fails, and the walk checks that it was never called: with no user manager running here
//! (`/run/systemd/system` absent, as in containers and CI) `onboard` takes the README's
//! `iapeer daemon --detach` way. On a machine where a systemd user manager runs, `install`
//! would choose it and the walk would be another one, so the test says it is skipped there.
//!
//! Substitutions, each said where it is made: `cargo run --release -- demo` runs the built
//! binary (`iapeer demo`); `scripts/install.sh` is the repository's script by its absolute path;
//! the daemon listens on port 0 (`IAPEER_PORT=0`, not 8765, so parallel tests cannot collide)
//! and the fleet `curl` line gets the port the daemon took; the human the README calls `you`
//! is `ada`, the one onboard made from `USER`; message texts are changed where the walk needs
//! to tell two sends apart.
//!
//! Skipped, with why: `scripts/test.sh` (the whole suite, of which this test is part);
//! `iapeer attach bob` (an interactive screen until Ctrl-]: tests/attach.rs drives it on a
//! pty); the Claude Code and Codex sections, approvals and gated agents (they need a logged-in
//! account, tests/claude.rs and tests/codex.rs run them against local model stand-ins);
//! "Moving over from the original iapeer" (needs a root written by the TypeScript tool,
//! tests/migrate.rs); memory providers and `iapeer enable` (need npm packages and the agfpd
//! marketplace from the network); Telegram (needs a bot token and Telegram's servers);
//! `man man/iapeer.1` (a pager; the installed man page's file is checked instead); the page's
//! picker of humans and its buttons (a browser: tests/ui.rs drives them in headless Chromium;
//! here the link `iapeer ui` prints is fetched with curl).

use crate::common;

use crate::attach::Terminal;
use common::{alive, describe, TestEnv};
use std::io::Write;
use std::ops::Not;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const README: &str = include_str!("../README.md");

/// The README's shell commands: every logical line of its `sh` blocks (a `\` continuation is
/// kept as written, for bash to join).
struct Readme {
    lines: Vec<String>,
}

impl Readme {
    fn parse() -> Readme {
        let mut lines = Vec::new();
        let mut in_sh = false;
        let mut pending = String::new();
        for raw in README.lines() {
            if !in_sh {
                in_sh = raw.trim_end() == "```sh";
                continue;
            }
            if raw.trim_end() == "```" {
                in_sh = false;
                continue;
            }
            // A `\` continuation stays as it is written: bash joins the lines.
            pending.push_str(raw);
            if raw.ends_with('\\') {
                pending.push('\n');
            } else {
                lines.push(std::mem::take(&mut pending));
            }
        }
        Readme { lines }
    }

    /// The one command line starting with `prefix` (its comment kept: bash ignores it).
    fn line(&self, prefix: &str) -> String {
        self.line_with(prefix, "")
    }

    /// The one command line starting with `prefix` that also has `also` (e.g. words of its
    /// comment, where the README runs one command twice).
    fn line_with(&self, prefix: &str, also: &str) -> String {
        let found: Vec<&String> = self
            .lines
            .iter()
            .filter(|l| l.starts_with(prefix) && l.contains(also))
            .collect();
        match found.as_slice() {
            [one] => one.to_string(),
            [] => panic!("the README has no command starting with {prefix:?} any more"),
            many => panic!("the README has several commands starting with {prefix:?}: {many:?}"),
        }
    }

    /// The `sh` block that follows `marker` in the README, as it is written.
    fn block_after(marker: &str) -> String {
        let at = README
            .find(marker)
            .unwrap_or_else(|| panic!("the README lost {marker:?}"));
        let body = README[at + marker.len()..]
            .trim_start()
            .strip_prefix("```sh\n")
            .expect("a sh block after the marker");
        body[..body.find("\n```\n").expect("the end of the block") + 1].to_string()
    }
}

/// The fresh account: a [`TestEnv`] whose root is `$HOME/.iapeer`, with a shell's `PATH`.
struct Account {
    env: TestEnv,
    repo: PathBuf,
    guard_calls: PathBuf,
}

impl Account {
    fn new() -> Account {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let root = home.join(".iapeer");
        let mut env = TestEnv {
            dir,
            root,
            home: home.clone(),
            daemon: None,
            env: common::hide_the_machines_agent_clis(),
        };
        let guard = env.dir.path().join("no-service-manager");
        let guard_calls = env.dir.path().join("service-manager-calls");
        let mut script = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o755)
            .open(&guard)
            .unwrap();
        writeln!(
            script,
            "#!/bin/sh\necho \"$*\" >> '{}'\necho 'the README walk reaches no service manager' >&2\nexit 1",
            guard_calls.display()
        )
        .unwrap();
        drop(script);
        let tmp = env.dir.path().to_str().unwrap().to_string();
        env.set("IAPEER_SERVICE_CTL", guard.to_str().unwrap())
            .set("USER", "ada")
            .set("SHELL", "/bin/bash")
            .set(
                "PATH",
                &format!("{}:/usr/bin:/bin", home.join(".local/bin").display()),
            )
            .set("TMPDIR", &tmp);
        for unset in ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "IAPEER_BIN_DIR"] {
            env.set(unset, "");
        }
        Account {
            env,
            repo: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
            guard_calls,
        }
    }

    /// `bash -c <line>` in the account's home, as its user types it.
    fn bash(&self, line: &str) -> Command {
        let template = self.env.cmd(&[]);
        let mut sh = Command::new("bash");
        sh.args(["-c", line]);
        sh.env_clear();
        for (k, v) in template.get_envs() {
            if let Some(v) = v {
                sh.env(k, v);
            }
        }
        sh.current_dir(&self.env.home).stdin(Stdio::null());
        sh
    }

    fn run(&self, line: &str) -> Output {
        self.bash(line).output().expect("run bash")
    }

    /// Run `line`, require exit 0, return stdout + stderr.
    fn ok(&self, line: &str) -> String {
        let out = self.run(line);
        assert!(
            out.status.success(),
            "`{line}` failed: {}\n{}",
            describe(&out),
            self.env.diagnostics()
        );
        text(&out)
    }

    /// Run `line`, require exit `code`, return stdout + stderr.
    fn fails(&self, line: &str, code: i32) -> String {
        let out = self.run(line);
        assert_eq!(
            out.status.code(),
            Some(code),
            "`{line}`: expected exit {code}: {}\n{}",
            describe(&out),
            self.env.diagnostics()
        );
        text(&out)
    }

    /// The echo agent's transcript of `peer` (`<folder>/.echo-agent/transcript.jsonl`).
    fn transcript(&self, peer: &str) -> String {
        common::read(&self.env.peer_dir(peer).join(".echo-agent/transcript.jsonl"))
    }

    fn wait_transcript(&self, peer: &str, needle: &str) {
        self.env.wait_until(
            &format!("{peer}'s echo transcript has {needle:?}"),
            Duration::from_secs(30),
            |_| self.transcript(peer).contains(needle),
        );
    }

    /// `<root>/state/iapeer/inbox/<human>.jsonl`.
    fn inbox_file(&self, human: &str) -> String {
        common::read(&self.env.paths().inbox(human))
    }

    /// `~/.local/bin/iapeer`.
    fn installed(&self) -> PathBuf {
        self.env.home.join(".local/bin/iapeer")
    }

    /// A README line running `scripts/install.sh`, with the repository's script by its
    /// absolute path and `IAPEER_INSTALL_FROM` = the binary under test (substitution).
    fn install_sh(&self, line: &str) -> String {
        let script = self.repo.join("scripts/install.sh");
        format!(
            "export IAPEER_INSTALL_FROM='{}'; {}",
            common::bin().display(),
            line.replacen("scripts/install.sh", &script.display().to_string(), 1)
        )
    }

    /// Wait until process `pid` has ended.
    fn gone(&self, pid: u32, what: &str) {
        self.env.wait_until(
            &format!("{what} (pid {pid}) ended"),
            Duration::from_secs(10),
            |_| !alive(pid),
        );
    }

    fn daemon_pid(&self) -> Option<u32> {
        let out = self.env.run(&["status", "--json"]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        doc["daemon"]["pid"].as_u64().map(|p| p as u32)
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn has_all(out: &str, words: &[&str]) {
    for w in words {
        assert!(out.contains(w), "missing {w:?} in:\n{out}");
    }
}

/// Ends what the walk started when it fails half-way: `iapeer shutdown`, then SIGKILL to
/// every daemon pid seen that is still alive, and the `inbox --follow` child.
struct Cleanup<'a> {
    account: &'a Account,
    pids: std::cell::RefCell<Vec<u32>>,
    follow: std::cell::RefCell<Option<Child>>,
}

impl Cleanup<'_> {
    fn note_daemon(&self) -> u32 {
        let pid = self
            .account
            .daemon_pid()
            .expect("a healthy daemon reports its pid");
        self.pids.borrow_mut().push(pid);
        pid
    }
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if let Some(mut c) = self.follow.borrow_mut().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = self.account.env.run(&["shutdown"]);
        for pid in self.pids.borrow().iter() {
            if alive(*pid) {
                common::signal(*pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

/// The processes whose working folder or command line is under `dir`: what the walk may leave
/// behind (the daemon, its sessions, a watcher's script, `inbox --follow`).
fn processes_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
        let cmdline = common::read(&e.path().join("cmdline")).replace('\0', " ");
        if (cwd.starts_with(dir) || cmdline.contains(dir.to_str().unwrap())) && alive(pid) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

#[test]
fn the_readme_walked_from_top_to_bottom_on_a_fresh_account() {
    if Path::new("/run/systemd/system").is_dir() {
        eprintln!(
            "skipped: a systemd user manager runs here, so install and onboard would take the \
             service way; this walk follows the README's no-service-manager way (containers, CI)"
        );
        return;
    }
    let started = Instant::now();
    let readme = Readme::parse();
    let a = Account::new();
    let cleanup = Cleanup {
        account: &a,
        pids: Default::default(),
        follow: Default::default(),
    };
    first_block(&a, &readme);
    using_it(&a, &readme, &cleanup);
    a_team_of_two(&a, &readme, &cleanup);
    a_role(&a, &readme);
    humans(&a, &readme, &cleanup);
    timer_and_watcher(&a, &readme);
    router_runtime_and_json(&a, &readme);
    the_page(&a, &readme);

    // The end: the daemon down, nothing of the walk left running, no service manager called.
    let out = a.ok("iapeer shutdown");
    assert!(out.contains("daemon stopped"), "{out}");
    a.env.wait_until(
        "no process of the walk is left",
        Duration::from_secs(15),
        |e| processes_under(e.dir.path()).is_empty(),
    );
    drop(cleanup);
    assert_eq!(
        common::read(&a.guard_calls),
        "",
        "the walk called the service manager"
    );
    eprintln!("the README walk took {:?}", started.elapsed());
}

/// The README's first block: the demo, the suite (skipped), the install.
fn first_block(a: &Account, readme: &Readme) {
    let env = &a.env;
    // `cargo run --release -- demo`: the built binary instead of a second build
    // (substitution); it runs in a temporary folder under TMPDIR (the account's temp folder).
    let demo = readme.line("cargo run --release -- demo").replacen(
        "cargo run --release --",
        &common::bin().display().to_string(),
        1,
    );
    let out = a.ok(&demo);
    has_all(
        &out,
        &[
            "✓ delivery: human-you → alice via echo-alice, woke",
            "✓ delivery: echo-alice → bob via echo-bob, woke",
            "✓ delivery: echo-bob → alice via echo-alice",
            "you got a message from alice (echo): echo: Hello Alice, are you there?",
            "all stopped after",
        ],
    );
    assert!(!env.root.exists(), "the demo touched ~/.iapeer:\n{out}");
    let mut left: Vec<String> = std::fs::read_dir(env.dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // The harness's own file: where the daemon under test writes its test events.
        .filter(|name| {
            Some(name.as_str()) != env.hook_events_path().file_name().and_then(|n| n.to_str())
        })
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["home", "no-service-manager"],
        "the demo left files:\n{out}"
    );

    // `scripts/test.sh`: skipped (the whole suite, this test among it).
    readme.line("scripts/test.sh");

    // `scripts/install.sh`: the repository's script by its absolute path (the account's
    // shell is in its home), installing the binary under test (IAPEER_INSTALL_FROM: nothing
    // is built) to ~/.local/bin.
    let out = a.ok(&a.install_sh(&readme.line("scripts/install.sh  ")));
    let bin = a.installed();
    has_all(
        &out,
        &[
            &format!("binary: {} (installed)", bin.display()),
            "man page:",
            "completions: bash, zsh, fish",
            "doctrine:",
            "service: none (no service manager available",
        ],
    );
    assert_eq!(
        std::fs::read(&bin).unwrap(),
        std::fs::read(common::bin()).unwrap()
    );
    for file in [
        ".local/share/man/man1/iapeer.1",
        ".local/share/bash-completion/completions/iapeer",
        ".iapeer/IAPEER.md",
        ".iapeer/docs/iapeer/README.md",
    ] {
        assert!(
            env.home.join(file).is_file(),
            "install made no {file}:\n{out}"
        );
    }
    assert!(
        env.socket().exists().not(),
        "install started something:\n{out}"
    );
}

/// "Using it": install + onboard, status, doctor, update, rollback, uninstall --dry-run.
fn using_it(a: &Account, readme: &Readme, cleanup: &Cleanup) {
    let env = &a.env;
    let bin = a.installed();
    let out =
        a.ok(&a.install_sh(&readme.line("scripts/install.sh && iapeer onboard --accept-risk")));
    has_all(
        &out,
        &[
            &format!("binary: {} (unchanged)", bin.display()),
            "✓ started the daemon in the background with `iapeer daemon --detach`",
            "daemon: healthy (pid",
            "✓ created your human peer ada",
            "✓ create the built-in notifier service peers timer and watcher",
            "service: none — no service manager runs here",
        ],
    );
    let daemon = cleanup.note_daemon();
    assert_eq!(
        std::fs::read_link(format!("/proc/{daemon}/exe")).unwrap(),
        bin,
        "the daemon runs the installed binary"
    );
    for (peer, rt) in [
        ("ada", "human"),
        ("timer", "notifier"),
        ("watcher", "notifier"),
    ] {
        env.wait_until(
            &format!("{rt}-{peer} is live"),
            Duration::from_secs(20),
            |e| e.status_of(peer, rt) == "live",
        );
    }

    let out = a.ok(&readme.line("iapeer status "));
    has_all(
        &out,
        &[
            "daemon: healthy @",
            "service: none (no service manager here",
            "peers: 3 (runtimes: 3 live",
        ],
    );
    // doctor: status, then verify; the last line is the verdict.
    let out = a.ok(&readme.line("iapeer doctor "));
    assert!(out.contains("daemon: healthy @"), "{out}");
    assert_eq!(
        out.trim_end().lines().last(),
        Some("doctor: no problems"),
        "{out}"
    );
    // --json: each check's name, level ok/warn/fail, message, fix.
    let doc: serde_json::Value = serde_json::from_str(&a.ok("iapeer doctor --json")).unwrap();
    assert_eq!(doc["ok"], true, "{doc:#}");
    let checks = doc["checks"].as_array().expect("checks");
    for c in checks {
        assert!(
            c["name"].is_string()
                && ["ok", "warn", "fail"].contains(&c["level"].as_str().unwrap_or(""))
                && c["message"].is_string()
                && c.get("fix").is_some(),
            "{c}"
        );
    }
    let names: Vec<&str> = checks.iter().filter_map(|c| c["name"].as_str()).collect();
    for want in ["daemon", "service", "peers", "outbox", "registry"] {
        assert!(names.contains(&want), "no {want} check: {names:?}");
    }

    // `iapeer update target/release/iapeer`: another build of the binary under test (its
    // bytes with a line appended; it runs the same) instead of a release build (substitution).
    let newer = env.dir.path().join("iapeer-newer");
    let mut bytes = std::fs::read(common::bin()).unwrap();
    bytes.extend_from_slice(b"\n# another build\n");
    std::fs::write(&newer, &bytes).unwrap();
    std::fs::set_permissions(&newer, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let update = readme.line("iapeer update target/release/iapeer").replacen(
        "target/release/iapeer",
        newer.to_str().unwrap(),
        1,
    );
    let out = a.ok(&update);
    let updated = cleanup.note_daemon();
    has_all(
        &out,
        &[
            "live sessions: human-ada (idle), notifier-timer (idle), notifier-watcher (idle)",
            &format!("the previous one is {}.prev", bin.display()),
            &format!("daemon: restarted with `iapeer daemon --detach`, healthy (pid {updated}"),
        ],
    );
    assert!(updated != daemon, "{out}");
    a.gone(daemon, "the daemon before update");
    assert_eq!(std::fs::read(&bin).unwrap(), bytes, "{out}");
    let out = a.ok(&readme.line("iapeer rollback "));
    let rolled = cleanup.note_daemon();
    has_all(
        &out,
        &[
            "is the previous one again",
            &format!("healthy (pid {rolled}"),
        ],
    );
    assert_eq!(
        std::fs::read(&bin).unwrap(),
        std::fs::read(common::bin()).unwrap()
    );

    let out = a.ok(&readme.line("iapeer uninstall --dry-run"));
    has_all(
        &out,
        &[
            "nothing is changed",
            &format!("stop the daemon (pid {rolled})"),
            &format!("remove {}", bin.display()),
            "iapeer.1",
            "keep the root",
        ],
    );
    assert!(
        bin.is_file() && alive(rolled),
        "--dry-run changed something:\n{out}"
    );
}

/// The second block: alice and bob on `echo`, a send, the list, the lifecycle verbs, and the
/// outbox with the daemon down.
fn a_team_of_two(a: &Account, readme: &Readme, cleanup: &Cleanup) {
    let env = &a.env;
    // `iapeer daemon --detach  # without onboard`: onboard started the daemon; the line is
    // run below, after `iapeer shutdown`, to deliver what the outbox kept.
    let detach = readme.line("iapeer daemon --detach");
    for name in ["alice", "bob"] {
        let out = a.ok(&readme.line(&format!("iapeer create {name} --runtime echo")));
        assert!(
            out.contains(&format!(
                "created peer {name} in {}",
                env.peer_dir(name).display()
            )),
            "{out}"
        );
    }
    let send_hi = readme.line("iapeer send bob --from echo-alice --message \"hi\"");
    let out = a.ok(&send_hi);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
    a.wait_transcript("bob", r#""from":"alice","runtime":"echo","#);
    a.wait_transcript("alice", r#""from":"bob","runtime":"echo","ts""#);
    a.wait_transcript("alice", r#""body":"echo: hi""#);
    let out = a.ok(&readme.line("iapeer list "));
    has_all(
        &out,
        &[
            "NAME",
            "ada      ●human*",
            "alice    ●echo*",
            "bob      ●echo*",
            "timer    ●notifier*",
        ],
    );

    // `iapeer attach bob`: skipped (an interactive screen until Ctrl-]; tests/attach.rs).
    readme.line("iapeer attach bob");
    // Each verb names the session's pid: `(pid N)`.
    let pid_in = |out: &str| -> u32 {
        let at = out
            .rfind("(pid ")
            .unwrap_or_else(|| panic!("no pid in {out:?}"));
        out[at + 5..].split(')').next().unwrap().parse().unwrap()
    };
    let out = a.ok(&readme.line("iapeer wake bob"));
    assert!(out.contains("echo-bob"), "{out}");
    assert_eq!(env.status_of("bob", "echo"), "live", "{out}");
    let woken = pid_in(&out);
    // "(echo records none: fresh)": the echo runtime's conversation is its folder's, and
    // restart takes up only a conversation iapeer recorded.
    let out = a.ok(&readme.line_with("iapeer restart bob", "# end bob"));
    assert!(
        out.starts_with("echo-bob restarted with a fresh conversation (none recorded to continue)"),
        "{out}"
    );
    let restarted = pid_in(&out);
    assert!(restarted != woken && alive(restarted), "{out}");
    a.gone(woken, "bob's session before restart");
    let out = a.ok(&readme.line("iapeer new bob"));
    assert!(out.starts_with("echo-bob restarted fresh"), "{out}");
    let fresh = pid_in(&out);
    assert!(fresh != restarted && alive(fresh), "{out}");
    a.gone(restarted, "bob's session before new");
    let out = a.ok(&readme.line("iapeer stop bob"));
    assert!(out.contains("stopped echo-bob"), "{out}");
    assert_eq!(env.status_of("bob", "echo"), "stopped");
    // "refuse messages until `iapeer start bob`".
    let out = a.fails(&send_hi, 1);
    assert!(
        out.contains("is stopped and not accepting messages") && out.contains("iapeer start bob"),
        "{out}"
    );
    let out = a.ok("iapeer start bob");
    assert!(out.contains("started echo-bob"), "{out}");
    let out = a.ok(&readme.line("iapeer stop --all"));
    has_all(
        &out,
        &[
            "stopped echo-alice, echo-bob",
            "left running: human-ada, notifier-timer, notifier-watcher",
        ],
    );
    for (peer, rt) in [("alice", "echo"), ("bob", "echo")] {
        assert_eq!(env.status_of(peer, rt), "stopped", "{out}");
    }
    for (peer, rt) in [
        ("ada", "human"),
        ("timer", "notifier"),
        ("watcher", "notifier"),
    ] {
        assert_eq!(env.status_of(peer, rt), "live", "{out}");
    }
    a.ok("iapeer start alice && iapeer start bob");
    let daemon = a.daemon_pid().unwrap();
    let out = a.ok(&readme.line("iapeer shutdown"));
    assert!(
        out.contains(&format!("daemon stopped (pid {daemon})")),
        "{out}"
    );
    // "returns once it is gone".
    assert!(
        !alive(daemon) && !env.socket().exists(),
        "shutdown returned before the daemon was gone: {out}"
    );

    // A send made while the daemon is not running: kept in the outbox (exit 0, says so),
    // delivered as soon as the daemon starts. Another text than "hi" (substitution), to tell
    // this message from the first.
    let kept = send_hi.replacen("\"hi\"", "\"kept while the daemon was down\"", 1);
    let out = a.ok(&kept);
    has_all(
        &out,
        &["kept for bob in the outbox", "the daemon is not running"],
    );
    let outbox = env.root.join("state/iapeer/outbox");
    assert_eq!(std::fs::read_dir(&outbox).unwrap().count(), 1, "{out}");
    let out = a.ok(&detach);
    assert!(out.contains("daemon running in the background"), "{out}");
    cleanup.note_daemon();
    a.wait_transcript("bob", r#""body":"kept while the daemon was down""#);
    env.wait_until("the outbox is empty", Duration::from_secs(10), |_| {
        std::fs::read_dir(&outbox).unwrap().count() == 0
    });
    assert!(
        env.log("delivery")
            .lines()
            .any(|l| l.contains("caller=echo-alice to=bob")
                && l.contains("ok=true")
                && l.contains("len=30")),
        "{}",
        env.log("delivery")
    );
}

/// "Give your agent a role": bob's IAPEER.md as the block writes it, shown by `iapeer prompt`.
fn a_role(a: &Account, readme: &Readme) {
    // The block's first command, with its `\` continuation, as written (`~/.iapeer` is the
    // account's root).
    a.ok(&readme.line("echo \"You review pull requests"));
    let out = a.ok(&readme.line("iapeer prompt bob"));
    has_all(
        &out,
        &[
            "── peer-doctrine · ~/.iapeer/peers/bob/.iapeer/IAPEER.md ──",
            "You review pull requests for the web team; answer with a verdict first.",
            "── host-doctrine · ~/.iapeer/IAPEER.md ──",
            "── known-peers · the registry ──",
        ],
    );
    let out = a.ok(&readme.line_with("iapeer restart bob", "new prompt"));
    assert!(out.starts_with("echo-bob restarted"), "{out}");
    let prompt = common::read(&a.env.root.join("state/lifecycle/echo-bob.system-prompt.md"));
    assert!(
        prompt.contains("You review pull requests"),
        "the new session's prompt:\n{prompt}"
    );
}

/// "Humans": the inbox of the human onboard made, then a second person; both send and
/// receive, and a send that cannot tell who sends names them.
fn humans(a: &Account, readme: &Readme, cleanup: &Cleanup) {
    let env = &a.env;
    // The README's `you` is `ada`, the human onboard made from USER (substitution).
    let you = |line: String| line.replace("human-you", "human-ada");
    // `iapeer create you --runtime human`: "only without onboard"; onboard made ada.
    readme.line("iapeer create you --runtime human");
    assert_eq!(env.status_of("ada", "human"), "live");
    let out = a.ok(&readme.line("iapeer inbox  "));
    assert_eq!(out.trim(), "inbox of ada: no messages yet");

    // On an interactive terminal outside any peer's folder, `send` signs as the only human.
    let mut term = Terminal::spawn(a.bash("iapeer send alice --message 'from my terminal'"));
    assert!(term.wait(env).success(), "{}", term.text());
    assert!(
        term.text().contains("delivered to alice (echo)"),
        "{}",
        term.text()
    );
    a.wait_transcript("alice", r#""from":"ada","runtime":"human","ts""#);
    // A script (no terminal) is not taken for the human: it is told the --from to pass.
    let out = a.fails("iapeer send alice --message 'from a script'", 1);
    assert!(out.contains("pass --from human-ada"), "{out}");

    let follow_file = env.dir.path().join("follow.out");
    let follow = a
        .bash(&readme.line("iapeer inbox --all --follow"))
        .stdout(std::fs::File::create(&follow_file).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    *cleanup.follow.borrow_mut() = Some(follow);
    let out = a.ok(&you(
        readme.line("iapeer send alice --topic plans --from human-you")
    ));
    assert_eq!(out.trim(), "delivered to alice (echo)");
    a.wait_transcript("alice", r#""from":"ada","runtime":"human","ts""#);
    env.wait_until(
        "inbox --follow shows alice's answer",
        Duration::from_secs(30),
        |_| {
            let seen = common::read(&follow_file);
            seen.contains("alice (echo)  topic: plans") && seen.contains("echo: go ahead")
        },
    );
    // Ctrl-C ends it: SIGINT to its pid.
    let mut follow = cleanup.follow.borrow_mut().take().unwrap();
    common::signal(follow.id(), nix::sys::signal::Signal::SIGINT);
    env.wait_until(
        "inbox --follow ends on Ctrl-C",
        Duration::from_secs(10),
        |_| follow.try_wait().unwrap().is_some(),
    );
    assert!(a.inbox_file("ada").contains("echo: go ahead"));
    let out = a.ok(&readme.line("iapeer logs --since 1h"));
    has_all(
        &out,
        &[
            "ada → alice  delivered  topic=plans",
            "alice → ada  delivered  topic=plans",
            "alice → bob  delivered (woke)",
        ],
    );

    // A second person, as the prose says: `iapeer create ann --runtime human`.
    for said in [
        "`iapeer create ann --runtime human`",
        "`iapeer\ninbox ann`",
        "--from human-ann",
    ] {
        assert!(README.contains(said), "the README no longer says {said:?}");
    }
    let out = a.ok("iapeer create ann --runtime human");
    assert!(
        out.contains("created peer ann") && out.contains("intelligence natural"),
        "{out}"
    );
    env.wait_until("human-ann is live", Duration::from_secs(20), |e| {
        e.status_of("ann", "human") == "live"
    });
    // Without a name, `inbox` cannot tell whose: it names them.
    let out = a.fails("iapeer inbox", 1);
    assert!(
        out.contains("several human peers (ada, ann) — name the one to show: iapeer inbox <peer>"),
        "{out}"
    );
    // A send that cannot tell lists the people to choose from, on a terminal too.
    let mut term = Terminal::spawn(a.bash("iapeer send alice --message 'who am I'"));
    assert_eq!(term.wait(env).code(), Some(1), "{}", term.text());
    assert!(
        term.text().contains(
            "this team has several people — say which with --from human-ada or --from human-ann"
        ),
        "{}",
        term.text()
    );
    // Both people send and receive.
    let out = a.ok("iapeer send ada --from human-ann --message 'hello ada, ann here'");
    assert_eq!(out.trim(), "delivered to ada (human)");
    let out = a.ok("iapeer send ann --from human-ada --message 'welcome ann'");
    assert_eq!(out.trim(), "delivered to ann (human)");
    let out = a.ok("iapeer send alice --topic intro --from human-ann --message 'ann checks in'");
    assert_eq!(out.trim(), "delivered to alice (echo)");
    env.wait_until(
        "alice's echo lands in ann's inbox",
        Duration::from_secs(30),
        |_| a.inbox_file("ann").contains("echo: ann checks in"),
    );
    let out = a.ok("iapeer inbox ann");
    has_all(
        &out,
        &[
            "ada (human)",
            "welcome ann",
            "alice (echo)  topic: intro",
            "echo: ann checks in",
            "inbox of ann: 2 unread of 2",
        ],
    );
    let out = a.ok("iapeer inbox ada");
    has_all(
        &out,
        &[
            "ann (human)",
            "hello ada, ann here",
            "inbox of ada: 1 unread",
        ],
    );
    assert!(
        !out.contains("welcome ann"),
        "ada's inbox shows ann's mail:\n{out}"
    );
    // "shown = read": a second look shows nothing new.
    let out = a.ok("iapeer inbox ann");
    assert_eq!(
        out.trim(),
        "inbox of ann: no unread messages (2 in all — iapeer inbox --all shows them)"
    );
}

/// "Acting on time and on events": the four calls as written; the watcher's script sees a
/// line in alice's `app.log` and alice gets it.
fn timer_and_watcher(a: &Account, readme: &Readme) {
    for prefix in [
        "iapeer send timer   --from echo-alice --message '{\"when\":\"0 9",
        "iapeer send timer   --from echo-alice --message '{\"when\":\"@every",
        "iapeer send watcher --from echo-alice",
        "iapeer send timer   --from echo-alice --message '{\"cmd\":\"list\"}'",
    ] {
        let out = a.ok(&readme.line(prefix));
        assert!(out.starts_with("delivered to"), "{prefix}: {out}");
    }
    a.wait_transcript("alice", r#"registered watcher trigger"#);
    a.wait_transcript("alice", r#"Your timer triggers (2):\n• time-"#);
    let t = a.transcript("alice");
    assert!(
        t.contains("— 0 9 * * 1-5 → alice") && t.contains("— @every 30m → alice (topic ci)"),
        "{t}"
    );
    // The watcher runs its script in its owner's folder.
    std::fs::write(
        a.env.peer_dir("alice").join("app.log"),
        "boot\nERROR disk full\n",
    )
    .unwrap();
    a.wait_transcript("alice", r#""from":"watcher","runtime":"notifier","ts""#);
    a.wait_transcript("alice", r#""body":"ERROR disk full""#);
}

/// The router runtime example (as tests/guide.rs runs it), the `--json` paragraph, and the
/// fleet API's `curl` line.
fn router_runtime_and_json(a: &Account, readme: &Readme) {
    let env = &a.env;
    let out = a.ok(&Readme::block_after(
        "<!-- example: router runtime (tests/guide.rs runs this block as it is) -->",
    ));
    has_all(
        &out,
        &[
            "created peer pat",
            "delivered to pat (mailbox)",
            "delivered to alice (echo)",
        ],
    );
    env.wait_until(
        "pat's mailbox has the messages",
        Duration::from_secs(20),
        |_| {
            let mailbox = common::read(&env.peer_dir("pat").join("mailbox.txt"));
            mailbox.contains("from alice: the build is green")
                && mailbox.contains("from alice: echo: thanks")
        },
    );
    // Every verb that reports on the team takes --json.
    let rows: serde_json::Value = serde_json::from_str(&a.ok("iapeer list --json")).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(7), "{rows:#}");
    // The fleet API with the port the daemon took instead of 8765 (substitution).
    let curl = readme.line("curl -s -H \"Authorization: Bearer").replacen(
        "127.0.0.1:8765",
        &format!("127.0.0.1:{}", env.port()),
        1,
    );
    let snap: serde_json::Value = serde_json::from_str(&a.ok(&curl)).unwrap();
    let names: Vec<&str> = snap["peers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["personality"].as_str())
        .collect();
    for want in ["ada", "alice", "ann", "bob", "pat", "timer", "watcher"] {
        assert!(
            names.contains(&want),
            "{want} not in the snapshot: {names:?}"
        );
    }
    // Without the token: 401.
    let out = a.ok(&format!(
        "curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{}/fleet/v1/snapshot",
        env.port()
    ));
    assert_eq!(out, "401");
}

/// `iapeer ui`: stdout is no terminal here, so it prints the link instead of opening a browser;
/// the link signs a client in once.
fn the_page(a: &Account, readme: &Readme) {
    let out = a.ok(&readme.line("iapeer ui "));
    let link = out.trim();
    assert!(
        link.starts_with(&format!("http://127.0.0.1:{}/ui/?k=", a.env.port())),
        "{out}"
    );
    let jar = a.env.dir.path().join("cookies");
    let page = a.ok(&format!(
        "curl -s -L -c '{0}' -b '{0}' '{link}'",
        jar.display()
    ));
    assert!(page.contains("<title>iapeer — the team"), "{page}");
    // The key is traded once: the same link again opens nothing and says what to do.
    let again = a.ok(&format!("curl -s -w ' %{{http_code}}' '{link}'"));
    assert!(
        again.ends_with(" 403") && again.contains("iapeer ui"),
        "{again}"
    );
}

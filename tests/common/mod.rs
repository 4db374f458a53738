//! Shared helpers for integration tests: a private root and home per test, the real
//! `iapeer` binary, a real daemon on port 0, and diagnostics on failure (the tails of the
//! daemon, delivery, lifecycle and pane logs).

#![allow(dead_code)]

pub mod agents;
pub mod anthropic;
pub mod fuse;
pub mod gemini;
pub mod netns;
pub mod npm;
pub mod openai;
pub mod openai_chat;
pub mod other_user;
pub mod pty_record;
pub mod redis;
pub mod standin;
pub mod terminal_agent;
pub mod tls;

use iapeer::paths::{peer, Paths};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_iapeer"))
}

/// One test's world: `HOME` and `IAPEER_ROOT` in a temp folder, optionally a daemon.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub root: PathBuf,
    pub daemon: Option<Child>,
    /// Extra environment for every command and the daemon.
    pub env: Vec<(String, String)>,
}

/// The agent runtimes whose program the daemon looks up (the rows of `src/runtime_table.rs`
/// whose program is `Program::Located`; keep in step with it).
pub const LOCATED_RUNTIMES: [&str; 4] = ["claude", "codex", "gemini", "opencode"];

/// Where every test's daemon and commands look for each agent CLI unless the test says
/// otherwise: `IAPEER_<RT>_BIN` set to a path that is not there, for each of
/// [`LOCATED_RUNTIMES`]. The machine's own installs (a CI image with Claude Code in
/// `/usr/bin`, say) would otherwise be found on `PATH`, in the login shell's `PATH` or in the
/// installers' folders, and every peer `create` makes would declare them as fallbacks. A test
/// that wants a real CLI sets its variable (`env.set("IAPEER_CLAUDE_BIN", &claude_bin())`);
/// one that tests the lookup itself removes it (`env.set("IAPEER_CLAUDE_BIN", "")`) and
/// controls `PATH`, `SHELL` and `HOME` itself.
pub fn hide_the_machines_agent_clis() -> Vec<(String, String)> {
    LOCATED_RUNTIMES
        .iter()
        .map(|rt| {
            (
                format!("IAPEER_{}_BIN", rt.to_ascii_uppercase()),
                format!("/nonexistent/iapeer-tests-hide-the-machines-{rt}"),
            )
        })
        .collect()
}

/// This process's `PATH` with every folder that holds one of [`LOCATED_RUNTIMES`] replaced by
/// a copy made of links to all its other entries (made once per test process, under
/// `CARGO_TARGET_TMPDIR`, and removed by a later process once this one has ended): a machine's `PATH` as if no agent CLI were installed on it, for the
/// tests of the lookup itself (a CI image may have Claude Code in `/usr/bin`, beside `sh`, `env`
/// and `node`, which the tests need).
pub fn path_without_agent_clis() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("path-without-agent-clis");
        // Copies left by test processes that have ended go.
        for old in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let pid = old
                .file_name()
                .to_string_lossy()
                .split('-')
                .next()
                .map(str::to_owned);
            if pid.is_some_and(|p| !Path::new("/proc").join(p).exists()) {
                let _ = std::fs::remove_dir_all(old.path());
            }
        }
        let dirs: Vec<PathBuf> = std::env::split_paths(&path)
            .map(|dir| {
                if LOCATED_RUNTIMES.iter().all(|rt| !dir.join(rt).exists()) {
                    return dir;
                }
                let name = dir.to_string_lossy().replace('/', "_");
                let shadow = base.join(format!("{}-{}", std::process::id(), name));
                std::fs::create_dir_all(&shadow).unwrap();
                for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                    let file = entry.file_name();
                    if LOCATED_RUNTIMES.iter().any(|rt| file == *rt) {
                        continue;
                    }
                    let _ = std::os::unix::fs::symlink(entry.path(), shadow.join(&file));
                }
                shadow
            })
            .collect();
        std::env::join_paths(dirs).unwrap().into_string().unwrap()
    })
    .clone()
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let root = dir.path().join("root");
        std::fs::create_dir_all(&home).unwrap();
        TestEnv {
            dir,
            home,
            root,
            daemon: None,
            env: hide_the_machines_agent_clis(),
        }
    }

    /// Set an environment variable for later commands and daemons.
    pub fn set(&mut self, k: &str, v: &str) -> &mut Self {
        self.env.retain(|(key, _)| key != k);
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    /// A command running the real binary in this world.
    pub fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_of(&bin(), args)
    }

    /// A command running `program` (a copy of the binary, e.g. an installed one) in this
    /// world, with the environment [`TestEnv::cmd`] gives.
    pub fn cmd_of(&self, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(program);
        c.args(args)
            .env("HOME", &self.home)
            .env("IAPEER_ROOT", &self.root)
            .env("IAPEER_PORT", "0")
            .env("IS_SANDBOX", "1")
            // The daemon's test events (config::test_events::emit), for hook_count and friends.
            .env("IAPEER_TEST_EVENTS", self.hook_events_path())
            // No desktop notifications from human peers' inboxes in tests.
            .env("IAPEER_NOTIFY", "0")
            // CI runners set them; the daemon must not pass them to the agents, whose dim
            // composer placeholders would then read as drafts (session::env::COLOUR_SWITCHES).
            .env("NO_COLOR", "1")
            .env("CI", "true")
            .env_remove("PEER_IDENTITY")
            .env_remove("PEER_PERSONALITY")
            .env_remove("PEER_RUNTIME")
            .env_remove("IAPEER_TOKEN")
            .env_remove("IAPEER_DAEMON_SOCKET")
            .env_remove("IAPEER_BEARER_TOKEN")
            .env_remove("IAPEER_MCP_AUTH")
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        for (k, v) in &self.env {
            // An empty value removes the variable (e.g. IS_SANDBOX for the root-refusal test).
            if v.is_empty() {
                c.env_remove(k);
            } else {
                c.env(k, v);
            }
        }
        c
    }

    /// `scripts/install.sh` installing `from` into this world's HOME (its defaults: no
    /// `IAPEER_BIN_DIR`, XDG folders or systemd folder from the caller), to run with `output()`.
    pub fn install_script(&self, from: &Path) -> Command {
        let mut c = Command::new("bash");
        c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install.sh"))
            .env("HOME", &self.home)
            .env("IAPEER_ROOT", &self.root)
            .env("IAPEER_INSTALL_FROM", from)
            .env_remove("IAPEER_BIN_DIR")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("IAPEER_SYSTEMD_DIR");
        c
    }

    /// Start the real binary with `args` in the background, stdout and stderr piped (read
    /// them with `wait_with_output`).
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn `iapeer {}`: {e}", args.join(" ")))
    }

    /// Run and return the output, whatever the exit code.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run iapeer")
    }

    /// Run, require exit 0, return stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        if !out.status.success() {
            panic!(
                "`iapeer {}` failed: {}\n{}",
                args.join(" "),
                describe(&out),
                self.diagnostics()
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Run, require exit `code`, return (stdout, stderr).
    pub fn fails(&self, args: &[&str], code: i32) -> (String, String) {
        let out = self.run(args);
        if out.status.code() != Some(code) {
            panic!(
                "`iapeer {}`: expected exit {code}, got {}\n{}",
                args.join(" "),
                describe(&out),
                self.diagnostics()
            );
        }
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Start `iapeer daemon` and wait until its socket answers.
    pub fn start_daemon(&mut self) {
        self.start_daemon_by(self.cmd(&["daemon"]));
    }

    /// [`TestEnv::start_daemon`] by `cmd`, a command that becomes `iapeer daemon` in this world
    /// (e.g. through `unshare`, [`netns`]), keeping its pid.
    pub fn start_daemon_by(&mut self, mut cmd: Command) {
        assert!(self.daemon.is_none(), "daemon already started");
        std::fs::create_dir_all(&self.root).unwrap();
        let log = std::fs::File::create(self.dir.path().join("daemon-stderr.log")).unwrap();
        let child = cmd
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn daemon");
        self.daemon = Some(child);
        self.wait_until("the daemon answers", Duration::from_secs(15), |env| {
            std::os::unix::net::UnixStream::connect(env.socket()).is_ok()
                && env.router_json().exists()
        });
    }

    /// SIGTERM the daemon and wait for it (it ends its sessions first).
    pub fn stop_daemon(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.daemon.take()?;
        signal(child.id(), nix::sys::signal::Signal::SIGTERM);
        if let Some(status) = exit_within(&mut child, Duration::from_secs(15)) {
            return Some(status);
        }
        let _ = child.kill();
        child.wait().ok()
    }

    /// This world's storage layout, as the daemon and CLI resolve it (the helpers below spell
    /// no path of their own).
    pub fn paths(&self) -> Paths {
        Paths::at(&self.root)
    }

    pub fn socket(&self) -> PathBuf {
        self.paths().socket()
    }

    pub fn router_json(&self) -> PathBuf {
        self.paths().router_json()
    }

    /// The daemon's MCP URL from router.json.
    pub fn mcp_url(&self) -> String {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(self.router_json()).unwrap()).unwrap();
        v["tcp"].as_str().unwrap().to_string()
    }

    /// The fleet API's token, read as a script of the same user reads it
    /// (`$(cat <root>/state/iapeer/fleet.token)`).
    pub fn fleet_token(&self) -> String {
        let file = self.paths().fleet_token();
        std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("cannot read the fleet token {}: {e}", file.display()))
            .trim()
            .to_string()
    }

    /// The header line that admits a fleet request: `Authorization: Bearer <fleet token>`.
    pub fn fleet_auth(&self) -> String {
        format!("Authorization: Bearer {}", self.fleet_token())
    }

    /// The loopback port of the daemon's HTTP server.
    pub fn port(&self) -> u16 {
        let url = self.mcp_url();
        url.trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .unwrap()
    }

    /// `<root>/logs/iapeer/<name>.log` as text (empty when missing); `name` is one of
    /// `daemon`, `delivery`, `lifecycle`, `exits`.
    pub fn log(&self, name: &str) -> String {
        let p = self.paths();
        let path = match name {
            "daemon" => p.daemon_log(),
            "delivery" => p.delivery_log(),
            "lifecycle" => p.lifecycle_log(),
            "exits" => p.exits_log(),
            other => panic!("no event log named {other:?}"),
        };
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// The pane log of an identity.
    pub fn pane(&self, identity: &str) -> String {
        String::from_utf8_lossy(&std::fs::read(self.paths().pane_log(identity)).unwrap_or_default())
            .into_owned()
    }

    /// Wait until the pane log of `identity` has not grown for a second (at most 30 s): the
    /// program has finished drawing, as a recorder saves it. A program's screen gives no
    /// other sign that it is done, so a still second is the measure.
    pub fn pane_settled(&self, identity: &str) {
        let quiet = Duration::from_secs(1);
        let len =
            |e: &TestEnv| std::fs::metadata(e.paths().pane_log(identity)).map_or(0, |m| m.len());
        let (mut last, mut since) = (len(self), Instant::now());
        self.wait_until(
            &format!("{identity}'s screen stays still for {quiet:?}"),
            Duration::from_secs(30),
            |e| {
                let now = len(e);
                if now != last {
                    (last, since) = (now, Instant::now());
                }
                since.elapsed() >= quiet
            },
        );
    }

    /// The current screen of an identity's session, replayed from its pane log through a
    /// terminal model at the session size (220×50; valid while nobody attached and resized it).
    pub fn screen(&self, identity: &str) -> String {
        let bytes = std::fs::read(self.paths().pane_log(identity)).unwrap_or_default();
        let mut parser = vt100::Parser::new(50, 220, 0);
        parser.process(&bytes);
        parser.screen().contents()
    }

    /// Parsed lines of an event log whose `ev` is `ev`.
    pub fn events(&self, log: &str, ev: &str) -> Vec<std::collections::HashMap<String, String>> {
        self.log(log)
            .lines()
            .map(|l| {
                iapeer::eventlog::parse_line(l)
                    .into_iter()
                    .collect::<std::collections::HashMap<_, _>>()
            })
            .filter(|m| m.get("ev").map(String::as_str) == Some(ev))
            .collect()
    }

    /// A marker file path.
    pub fn marker(&self, identity: &str, suffix: &str) -> PathBuf {
        self.paths().marker(identity, suffix)
    }

    /// The working folder of a peer made by `create`.
    pub fn peer_dir(&self, name: &str) -> PathBuf {
        self.paths().peers_dir().join(name)
    }

    /// `iapeer create <name> --runtime echo`.
    pub fn create_echo(&self, name: &str) {
        self.ok(&["create", name, "--runtime", "echo"]);
    }

    /// Write the peer's launch.env for a runtime.
    pub fn launch_env(&self, name: &str, runtime: &str, text: &str) {
        let p = peer::launch_env(&self.peer_dir(name), runtime);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Install the router runtime `runtime` whose process appends every line delivered to it
    /// to `log` (a `/bin/sh` loop): a channel or peer whose messages a test reads back.
    pub fn install_line_sink(&self, runtime: &str, log: &Path) {
        let script = self.dir.path().join(format!("{runtime}-sink.sh"));
        std::fs::write(
            &script,
            "#!/bin/sh\nwhile IFS= read -r line; do printf '%s\\n' \"$line\" >> \"$1\"; done\n",
        )
        .unwrap();
        let manifest = serde_json::json!({
            "runtime": runtime,
            "version": "0.0.1",
            "run": {"command": "/bin/sh", "args": [script, log]},
        });
        let path = self.root.join(format!("runtimes/{runtime}/runtime.json"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, manifest.to_string()).unwrap();
    }

    /// The `list --json` rows.
    pub fn list(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["list", "--json"])).unwrap()
    }

    /// The status of `identity` (`live`, `asleep`, `stopped`, `parked`) from `list --json`.
    pub fn status_of(&self, personality: &str, runtime: &str) -> String {
        let rows = self.list();
        rows.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["personality"] == personality)
            .flat_map(|r| r["runtimes"].as_array().unwrap().clone())
            .find(|r| r["runtime"] == runtime)
            .map(|r| r["status"].as_str().unwrap().to_string())
            .unwrap_or_default()
    }

    /// Poll `f` every 50 ms until true; panic with diagnostics after `timeout`.
    pub fn wait_until(&self, what: &str, timeout: Duration, mut f: impl FnMut(&TestEnv) -> bool) {
        if poll_every(Duration::from_millis(50), timeout, || f(self)) {
            return;
        }
        panic!(
            "timed out after {timeout:?} waiting for: {what}\n{}",
            self.diagnostics()
        );
    }

    /// [`TestEnv::wait_until`] for a condition on what `probe` shows (a status, counts):
    /// poll `probe` every 50 ms until `ok` holds of it and return it; on `timeout`, panic
    /// with the last one seen as well as the diagnostics.
    pub fn wait_seen(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&TestEnv) -> serde_json::Value,
        mut ok: impl FnMut(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut seen = serde_json::Value::Null;
        if poll_every(Duration::from_millis(50), timeout, || {
            seen = probe(self);
            ok(&seen)
        }) {
            return seen;
        }
        panic!(
            "timed out after {timeout:?} waiting for: {what}\nlast seen: {seen}\n{}",
            self.diagnostics()
        );
    }

    /// The file every daemon of this world appends its test events to (`IAPEER_TEST_EVENTS`).
    pub fn hook_events_path(&self) -> PathBuf {
        self.dir.path().join("test-events.log")
    }

    /// How many times the daemon has reported `event` (`router-idle`, `tick-done`,
    /// `router-send:<personality>`, `approvals-wait`, `session-held:<identity>`;
    /// daemon::test_hooks).
    pub fn hook_count(&self, event: &str) -> usize {
        std::fs::read_to_string(self.hook_events_path())
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == event)
            .count()
    }

    /// Wait until the daemon has reported `event` `n` times in all.
    pub fn wait_hook(&self, event: &str, n: usize) {
        self.wait_until(
            &format!("{n} test events {event:?}"),
            Duration::from_secs(30),
            |e| e.hook_count(event) >= n,
        );
    }

    /// Wait until the daemon has reported `event` `n` more times from now.
    pub fn wait_hook_more(&self, event: &str, n: usize) {
        self.wait_hook(event, self.hook_count(event) + n);
    }

    /// The positive signal for "a message the session holds was not written": the session
    /// thread of `identity` has looked at it again twice from now and kept holding it
    /// (`session-held:<identity>`); nothing of a held message reaches the agent in between.
    pub fn wait_still_held(&self, identity: &str) {
        self.wait_hook_more(&format!("session-held:{identity}"), 2);
    }

    /// The positive signal for "nothing more follows from what the daemon has been told":
    /// the router has handled everything sent to it before this call (a `list` answered in
    /// order behind it) and then found no message and no session event waiting
    /// (`router-idle` reported after a second `list`). What a session thread or an agent does
    /// later on its own is not covered: the router has not heard of it yet.
    pub fn router_settled(&self) {
        self.ok(&["list"]);
        let after_first = self.hook_count("router-idle");
        self.ok(&["list"]);
        self.wait_hook("router-idle", after_first + 1);
    }

    /// Require `cond` to stay false for `window`, polled: for what must not happen within a
    /// time the daemon is given (a back-off, a restart delay), where no event says "it will
    /// not"; the window is the thing tested.
    pub fn stays_false(&self, what: &str, window: Duration, cond: impl Fn(&TestEnv) -> bool) {
        let start = Instant::now();
        while start.elapsed() < window {
            assert!(!cond(self), "{what} happened\n{}", self.diagnostics());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The positive signal for "X does not happen while the daemon keeps supervising": wait
    /// until the supervise tick has run `n` more times, requiring `happened` to stay false at
    /// every poll. Needs `IAPEER_SUPERVISE_LOG_VERBOSE=1` (one `ev=supervise action=tick` line
    /// per tick). Unlike a fixed sleep, this cannot pass on a loaded machine where the tick
    /// never ran inside the window.
    pub fn watch_ticks(&self, n: usize, what: &str, happened: impl Fn(&TestEnv) -> bool) {
        let ticks = |e: &TestEnv| e.count_events("lifecycle", "supervise", &[("action", "tick")]);
        let base = ticks(self);
        self.wait_until(
            &format!("{n} supervise ticks without {what}"),
            Duration::from_secs(30),
            |e| {
                assert!(!happened(e), "{what} happened\n{}", e.diagnostics());
                ticks(e) >= base + n
            },
        );
    }

    /// Tails of every log that explains a failure.
    pub fn diagnostics(&self) -> String {
        let tail = |text: String, n: usize| -> String {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        };
        let mut out = String::new();
        for name in ["daemon", "delivery", "lifecycle", "exits"] {
            out.push_str(&format!(
                "--- {name}.log ---\n{}\n",
                tail(self.log(name), 30)
            ));
        }
        out.push_str(&format!(
            "--- daemon stderr ---\n{}\n",
            tail(
                std::fs::read_to_string(self.dir.path().join("daemon-stderr.log"))
                    .unwrap_or_default(),
                30
            )
        ));
        if let Ok(entries) = std::fs::read_dir(self.paths().pane_logs_dir()) {
            for e in entries.flatten() {
                let text = String::from_utf8_lossy(&std::fs::read(e.path()).unwrap_or_default())
                    .into_owned();
                let text: String = text
                    .chars()
                    .rev()
                    .take(1500)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                out.push_str(&format!(
                    "--- pane {} (tail) ---\n{}\n",
                    e.file_name().to_string_lossy(),
                    text
                ));
            }
        }
        out
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        self.stop_daemon();
    }
}

/// Send `sig` to a pid (ignored when it is gone).
pub fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
}

/// Exit status plus both streams, for failure messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Poll `done` every 20 ms until it is true (true) or `timeout` has passed (false): the
/// suite's one loop for a condition outside a [`TestEnv`] (a child, a terminal, a stand-in).
pub fn poll(timeout: Duration, done: impl FnMut() -> bool) -> bool {
    poll_every(Duration::from_millis(20), timeout, done)
}

/// [`poll`] every `every` instead of every 20 ms: for a moment that passes quickly.
pub fn poll_every(every: Duration, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= timeout {
            return false;
        }
        std::thread::sleep(every);
    }
}

/// What `read` gives once it has stopped changing for `quiet` (polled every 20 ms; the last
/// value read after `timeout`): for a measure that settles with no event to say so (a
/// process's threads or fds, what a CLI writes after its turn); the quiet time is the measure.
pub fn settled<T: PartialEq>(timeout: Duration, quiet: Duration, mut read: impl FnMut() -> T) -> T {
    let mut last = read();
    let mut since = Instant::now();
    poll(timeout, || {
        let now = read();
        if now != last {
            (last, since) = (now, Instant::now());
        }
        since.elapsed() >= quiet
    });
    last
}

/// `child`'s exit status once it has exited, or `None` while it still runs after `limit`.
pub fn exit_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let mut status = None;
    poll(limit, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    status
}

/// Whether `pid` is outside the process session and the process group of `shell`, a
/// terminal's shell (the leader of both): a hang-up of that terminal (SIGHUP to the
/// session's processes, or `killpg` of the group) cannot reach it. The positive form of
/// "it survives the terminal closing", which no wait after the hang-up can prove.
pub fn out_of_reach(pid: u32, shell: u32) -> bool {
    use nix::unistd::{getpgid, getsid, Pid};
    let (p, sh) = (Pid::from_raw(pid as i32), Pid::from_raw(shell as i32));
    let (sid, pgid) = (getsid(Some(p)).unwrap(), getpgid(Some(p)).unwrap());
    sid != getsid(Some(sh)).unwrap() && pgid != getpgid(Some(sh)).unwrap()
}

/// Whether the main thread of process `pid` is parked in a call that waits (a sleep, a
/// wait for a signal or a lock), read from `/proc/<pid>/syscall`: a process that
/// has gone to wait rather than run on or exit.
pub fn in_sleep(pid: u32) -> bool {
    use nix::libc;
    let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let nr: i64 = call
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1);
    [
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_rt_sigsuspend,
        libc::SYS_rt_sigtimedwait,
        libc::SYS_futex,
    ]
    .contains(&nr)
}

/// Whether a process is alive.
pub fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(false)
}

/// Read `path` relative to nothing; convenience for assertions.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl TestEnv {
    /// The pid of `identity`'s live session (`list`'s `pid`: the agent, leader of its process
    /// group). Panics when it is not live.
    pub fn session_pid(&self, identity: &str) -> u32 {
        let v = self.control(r#"{"op":"list"}"#);
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["identity"] == identity)
            .and_then(|s| s["pid"].as_u64())
            .unwrap_or_else(|| panic!("{identity} is not live: {v}")) as u32
    }

    /// Write one raw line to the control socket and return the final answer (progress lines
    /// are skipped). For requests the CLI would never build (e.g. relative attachment paths).
    pub fn control(&self, line: &str) -> serde_json::Value {
        use std::io::{BufRead, BufReader, Write};
        let mut stream = std::os::unix::net::UnixStream::connect(self.socket())
            .expect("connect to the control socket");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream.write_all(line.as_bytes()).unwrap();
        stream.write_all(b"\n").unwrap();
        let mut reader = BufReader::new(stream);
        loop {
            let mut buf = String::new();
            let n = reader.read_line(&mut buf).expect("read the control answer");
            assert!(
                n > 0,
                "the daemon closed the connection without an answer to {line}\n{}",
                self.diagnostics()
            );
            let v: serde_json::Value = serde_json::from_str(buf.trim_end()).expect("a JSON answer");
            if v.get("progress").is_none() {
                return v;
            }
        }
    }

    /// Run with `input` on stdin and return the output, whatever the exit code.
    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        use std::io::Write;
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn iapeer");
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().expect("wait for iapeer")
    }

    /// True when `log` has an `ev` line carrying every `(key, value)` of `fields`.
    pub fn has_event(&self, log: &str, ev: &str, fields: &[(&str, &str)]) -> bool {
        self.events(log, ev).iter().any(|e| {
            fields
                .iter()
                .all(|(k, v)| e.get(*k).map(String::as_str) == Some(*v))
        })
    }

    /// The number of `ev` lines of `log` carrying every `(key, value)` of `fields`.
    pub fn count_events(&self, log: &str, ev: &str, fields: &[(&str, &str)]) -> usize {
        self.events(log, ev)
            .iter()
            .filter(|e| {
                fields
                    .iter()
                    .all(|(k, v)| e.get(*k).map(String::as_str) == Some(*v))
            })
            .count()
    }
}

impl TestEnv {
    /// Wake the asleep `peer` of runtime `rt` with `message` from `echo-ea` (asserting the
    /// CLI's `delivered to <peer> (<rt>), woke`) and return the first model request with the
    /// message, as `find` picks it from the stand-in's requests (waited for up to 60 s).
    pub fn wake_and_first_request(
        &self,
        peer: &str,
        rt: &str,
        message: &str,
        find: impl Fn() -> Option<serde_json::Value>,
    ) -> serde_json::Value {
        let out = self.ok(&["send", peer, "--from", "echo-ea", "--message", message]);
        let woke = format!("delivered to {peer} ({rt}), woke");
        assert_eq!(out.trim(), woke, "{}", self.diagnostics());
        self.wait_until(
            "the model gets the message",
            Duration::from_secs(60),
            |_| find().is_some(),
        );
        find().expect("the request found a moment ago")
    }

    /// Wait (60 s at most) until the daemon shows `identity` asleep, or live with no turn
    /// running (its reading of the runtime's busy sign) in three reads in a row, 50 ms apart.
    /// Cheaper than reading the screen: it does not replay the pane log.
    pub fn wait_turn_over(&self, identity: &str) {
        let mut quiet = 0;
        self.wait_until(
            &format!("{identity} shows no turn"),
            Duration::from_secs(60),
            |e| {
                let list = e.control(r#"{"op":"list"}"#);
                let idle = list["sessions"]
                    .as_array()
                    .and_then(|a| a.iter().find(|s| s["identity"] == identity))
                    .is_none_or(|s| s["status"] == "live" && s["busy"] == false);
                quiet = if idle { quiet + 1 } else { 0 };
                quiet >= 3
            },
        );
    }
}

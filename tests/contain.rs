//! What a session started ends with it (issue 32 item 5): a process that left the session's
//! process group (as Codex starts its MCP servers) and one that left its process session and
//! lost its parent (as Claude Code's `cmd &` does) are both ended at `stop`, at an idle sleep
//! and at the daemon's shutdown — by the session's cgroup where the machine offers one, by the
//! daemon as child subreaper otherwise (`IAPEER_TEST_HOOK=contain:subreaper` chooses it here,
//! where the tests run as root and cgroup v2 is writable) — while processes the user started
//! outside iapeer, with the same command lines in the same folder, live on. Real processes,
//! the real daemon, the real echo agent (`--spawn`, a process group of its own).

use crate::common;

use common::{alive, TestEnv};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Which way the daemon contains its sessions in a test.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Way {
    /// Whatever the daemon chooses (a cgroup here: root, cgroup v2, Linux ≥ 5.14).
    Default,
    /// The fallback, forced by the test hook.
    Subreaper,
}

impl Way {
    /// The daemon's environment for this way.
    pub(crate) fn vars(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Way::Default => vec![],
            Way::Subreaper => vec![("IAPEER_TEST_HOOK", "contain:subreaper")],
        }
    }

    /// The line `daemon.log` has once the daemon chose.
    pub(crate) fn logged(self) -> &'static str {
        match self {
            Way::Default => "session containment: a cgroup per session",
            Way::Subreaper => "session containment: the daemon as child subreaper",
        }
    }
}

/// Fields of `/proc/<pid>/stat` after the command name: (state, ppid, pgid, sid).
pub(crate) fn stat(pid: u32) -> Option<(char, u32, u32, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let mut num = || f.next()?.parse::<u32>().ok();
    Some((state, num()?, num()?, num()?))
}

/// Every live process whose command line is exactly `cmdline` (words joined by spaces), with
/// its parent.
pub(crate) fn running(cmdline: &str) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let raw = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let words: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect();
        if words.join(" ") == cmdline && alive(pid) {
            if let Some((_, ppid, _, _)) = stat(pid) {
                out.push((pid, ppid));
            }
        }
    }
    out
}

/// A pid written to `path` (by a script), once it is there.
pub(crate) fn pid_in(env: &TestEnv, path: &Path) -> u32 {
    env.wait_until(
        &format!("{} is written", path.display()),
        Duration::from_secs(30),
        |_| common::read(path).trim().parse::<u32>().is_ok(),
    );
    common::read(path).trim().parse().unwrap()
}

/// Processes the user started themselves, outside iapeer; SIGKILLed when dropped.
pub(crate) struct Outside(pub Vec<Child>);

impl Outside {
    /// Start each command line (split on spaces) in `cwd` as the user would from a shell:
    /// `own_group` puts it in a process group of its own, as a shell with job control does.
    pub(crate) fn start(cwd: &Path, lines: &[(&str, bool)]) -> Outside {
        Outside::start_as(cwd, lines, None)
    }

    /// [`Outside::start`] as the user `uid_gid`.
    pub(crate) fn start_as(
        cwd: &Path,
        lines: &[(&str, bool)],
        uid_gid: Option<(u32, u32)>,
    ) -> Outside {
        Outside(
            lines
                .iter()
                .map(|(line, own_group)| {
                    let words: Vec<&str> = line.split(' ').collect();
                    let mut c = Command::new(words[0]);
                    // stdin stays open while this lives (a stdio server reading it waits).
                    c.args(&words[1..])
                        .current_dir(cwd)
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null());
                    if *own_group {
                        c.process_group(0);
                    }
                    if let Some((uid, gid)) = uid_gid {
                        c.uid(uid).gid(gid);
                    }
                    c.spawn().unwrap()
                })
                .collect(),
        )
    }

    pub(crate) fn pids(&self) -> Vec<u32> {
        self.0.iter().map(|c| c.id()).collect()
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Pids a test saw in a session's tree: SIGKILLed when dropped, so a failing test leaves
/// nothing behind.
pub(crate) struct Strays(pub Vec<u32>);

impl Drop for Strays {
    fn drop(&mut self) {
        for &p in &self.0 {
            if alive(p) {
                common::signal(p, nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

/// Wait until every pid of `strays` is gone, then require that no process with one of the
/// `lines` runs but the user's own (`outside`), alive, and none under PID 1.
pub(crate) fn assert_ended(env: &TestEnv, strays: &Strays, lines: &[&str], outside: &Outside) {
    env.wait_until(
        "the session's tree is gone",
        Duration::from_secs(20),
        |_| strays.0.iter().all(|&p| !alive(p)),
    );
    let users = outside.pids();
    for line in lines {
        for (pid, ppid) in running(line) {
            assert!(
                users.contains(&pid),
                "`{line}` (pid {pid}, parent {ppid}) outlived its session{}\n{}",
                if ppid == 1 { " under PID 1" } else { "" },
                env.diagnostics()
            );
        }
    }
    for pid in users {
        assert!(
            alive(pid),
            "the user's own process {pid} was ended\n{}",
            env.diagnostics()
        );
    }
}

/// A tree the echo agent starts with `--spawn`: `sleep <group>` in a process group of its
/// own, and `sleep <setsid>` in a process session of its own whose parent (a `sh -c`) has
/// exited, so it was re-parented at once. The numbers are the test's own (tests run side by
/// side).
struct Tree {
    dir: PathBuf,
    group: String,
    setsid: String,
}

impl Tree {
    fn new(env: &TestEnv, base: u32) -> Tree {
        let tree = Tree {
            dir: env.dir.path().join("tree"),
            group: format!("sleep {base}"),
            setsid: format!("sleep {}", base + 1),
        };
        std::fs::create_dir_all(&tree.dir).unwrap();
        let script = format!(
            "d='{d}'\n\
             sh -c 'setsid {setsid} & echo $! > \"$0/setsid.tmp\"; mv \"$0/setsid.tmp\" \"$0/setsid.pid\"' \"$d\"\n\
             echo $$ > \"$d/group.tmp\"; mv \"$d/group.tmp\" \"$d/group.pid\"\n\
             exec {group}\n",
            d = tree.dir.display(),
            setsid = tree.setsid,
            group = tree.group,
        );
        std::fs::write(tree.dir.join("tree.sh"), script).unwrap();
        tree
    }

    /// The launch.env line that makes the echo agent start the tree.
    fn launch_env(&self) -> String {
        format!(
            "PEER_START_ARGS=--spawn {}\n",
            self.dir.join("tree.sh").display()
        )
    }

    /// Both pids once written, checked to have left the agent's group and session.
    fn pids(&self, env: &TestEnv, agent: u32) -> Strays {
        let strays = Strays(vec![
            pid_in(env, &self.dir.join("group.pid")),
            pid_in(env, &self.dir.join("setsid.pid")),
        ]);
        let (_, _, agent_pgid, agent_sid) = stat(agent).expect("the agent runs");
        let (_, _, pgid, sid) = stat(strays.0[0]).expect("the group child runs");
        assert!(
            pgid != agent_pgid && sid == agent_sid,
            "own group, same session"
        );
        let (_, ppid, _, sid) = stat(strays.0[1]).expect("the setsid child runs");
        assert!(
            sid != agent_sid && ppid != agent,
            "own session, re-parented"
        );
        strays
    }

    fn lines(&self) -> [&str; 2] {
        [&self.group, &self.setsid]
    }

    /// The same command lines, started by the user in the peer's folder.
    fn outside(&self, cwd: &Path) -> Outside {
        self.outside_as(cwd, None)
    }

    /// [`Tree::outside`] as the user `uid_gid`.
    fn outside_as(&self, cwd: &Path, uid_gid: Option<(u32, u32)>) -> Outside {
        let setsid = format!("setsid {}", self.setsid);
        Outside::start_as(cwd, &[(&self.group, true), (&setsid, false)], uid_gid)
    }
}

/// A world with echo peers alice and bob, bob starting `tree`, the daemon running with
/// `way` and `vars`; bob woken. Returns bob's pid.
fn world(way: Way, base: u32, vars: &[(&str, &str)]) -> (TestEnv, Tree, u32) {
    let mut env = TestEnv::new();
    for (k, v) in way.vars().into_iter().chain(vars.iter().copied()) {
        env.set(k, v);
    }
    env.create_echo("alice");
    env.create_echo("bob");
    let tree = Tree::new(&env, base);
    env.launch_env("bob", "echo", &tree.launch_env());
    env.start_daemon();
    env.wait_until("the daemon chose", Duration::from_secs(10), |e| {
        e.log("daemon").contains(way.logged())
    });
    let out = send(&env, "bob", "echo-alice", "echo: hi");
    assert!(out.contains("woke"), "{out}");
    let pid = env
        .events("lifecycle", "wake")
        .iter()
        .rev()
        .find(|w| w["identity"] == "echo-bob")
        .expect("bob's wake")["pid"]
        .parse()
        .unwrap();
    (env, tree, pid)
}

/// `iapeer send <to> --from <from> --message <message>`, required to succeed; its output.
fn send(env: &TestEnv, to: &str, from: &str, message: &str) -> String {
    env.ok(&["send", to, "--from", from, "--message", message])
}

/// How a session ends in a test.
#[derive(Clone, Copy)]
enum End {
    Stop,
    Idle,
    Shutdown,
}

impl End {
    /// The daemon's environment this end needs.
    fn vars(self) -> &'static [(&'static str, &'static str)] {
        match self {
            End::Idle => &[("IAPEER_IDLE_SECS", "3"), ("IAPEER_TICK_SECS", "1")],
            _ => &[],
        }
    }

    /// [`End::vars`] and [`Way::vars`].
    fn with(self, way: Way) -> Vec<(&'static str, &'static str)> {
        let mut v = self.vars().to_vec();
        v.extend(way.vars());
        v
    }

    /// End the session of `personality` (`identity`) this way, and wait for its end.
    fn run(self, env: &mut TestEnv, personality: &str, identity: &str) {
        match self {
            End::Stop => {
                env.ok(&["stop", personality]);
            }
            End::Idle => env.wait_until(
                &format!("{identity} sleeps"),
                Duration::from_secs(60),
                |e| {
                    e.events("exits", "session-exit")
                        .iter()
                        .any(|x| x["identity"] == identity && x["cause"] == "idle-sleep")
                },
            ),
            End::Shutdown => {
                let status = env.stop_daemon().expect("the daemon ran");
                assert!(status.success(), "{status:?}");
            }
        }
    }
}

fn ends_with_its_session(way: Way, end: End, base: u32) {
    let (mut env, tree, bob) = world(way, base, end.vars());
    let strays = tree.pids(&env, bob);
    if way == Way::Subreaper {
        let daemon = env.daemon.as_ref().unwrap().id();
        assert_eq!(
            stat(strays.0[1]).unwrap().1,
            daemon,
            "the orphan was re-parented to the daemon, its subreaper"
        );
    }
    let outside = tree.outside(&env.peer_dir("bob"));
    end.run(&mut env, "bob", "echo-bob");
    assert_ended(&env, &strays, &tree.lines(), &outside);
    if let Some(daemon) = env.daemon.as_ref().map(|d| d.id()) {
        env.wait_until(
            "the daemon reaps what was re-parented to it",
            Duration::from_secs(10),
            |_| zombies_of(daemon).is_empty(),
        );
    }
}

/// The children of `parent` that ended and wait to be reaped.
pub(crate) fn zombies_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|(state, ppid, _, _)| state == 'Z' && ppid == parent))
        .collect()
}

#[test]
fn what_a_session_started_ends_at_stop() {
    ends_with_its_session(Way::Default, End::Stop, 7310);
}

#[test]
fn what_a_session_started_ends_at_idle_sleep() {
    ends_with_its_session(Way::Default, End::Idle, 7320);
}

#[test]
fn what_a_session_started_ends_at_daemon_shutdown() {
    ends_with_its_session(Way::Default, End::Shutdown, 7330);
}

#[test]
fn what_a_session_started_ends_at_stop_with_the_subreaper() {
    ends_with_its_session(Way::Subreaper, End::Stop, 7340);
}

#[test]
fn what_a_session_started_ends_at_idle_sleep_with_the_subreaper() {
    ends_with_its_session(Way::Subreaper, End::Idle, 7350);
}

#[test]
fn what_a_session_started_ends_at_daemon_shutdown_with_the_subreaper() {
    ends_with_its_session(Way::Subreaper, End::Shutdown, 7360);
}

/// The folder of session cgroups the daemon logged it uses.
fn cgroup_base(env: &TestEnv) -> PathBuf {
    let log = env.log("daemon");
    let line = log
        .lines()
        .rev()
        .find_map(|l| l.split_once("a cgroup per session, below ").map(|(_, d)| d))
        .unwrap_or_else(|| panic!("no cgroup in the daemon's log\n{log}"));
    PathBuf::from(line.trim())
}

/// The cgroups of sessions in `base` now.
fn session_cgroups(base: &Path) -> Vec<String> {
    std::fs::read_dir(base)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A daemon killed with SIGKILL cannot end anything: the agent leaves (its pty hung up) but
/// what it started in other groups and sessions stays, in its cgroup. The next daemon of the
/// same root ends it and removes the cgroup before anything else, and leaves the user's own
/// processes alone.
#[test]
fn what_a_crashed_daemons_sessions_left_is_ended_at_the_next_start() {
    let (mut env, tree, bob) = world(Way::Default, 7370, &[]);
    let strays = tree.pids(&env, bob);
    let base = cgroup_base(&env);
    assert_eq!(
        session_cgroups(&base).len(),
        1,
        "bob's cgroup in {}",
        base.display()
    );
    let outside = tree.outside(&env.peer_dir("bob"));
    let mut daemon = env.daemon.take().unwrap();
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    env.wait_until("bob left with the daemon", Duration::from_secs(10), |_| {
        !alive(bob)
    });
    assert!(
        strays.0.iter().all(|&p| alive(p)),
        "SIGKILL of the daemon left them"
    );
    env.start_daemon();
    assert_ended(&env, &strays, &tree.lines(), &outside);
    assert!(
        env.log("daemon").contains(
            "ended 2 process(es) the sessions of a previous daemon (it crashed) had left"
        ),
        "{}",
        env.diagnostics()
    );
    assert_eq!(cgroup_base(&env), base, "the same folder for the same root");
    assert!(
        session_cgroups(&base).is_empty(),
        "{:?}",
        session_cgroups(&base)
    );
    // A clean shutdown removes the folder itself.
    let stopped = env.stop_daemon();
    assert!(
        !base.exists(),
        "{} is left (daemon {stopped:?}, inside: {:?})\n{}",
        base.display(),
        session_cgroups(&base),
        env.diagnostics()
    );
}

/// The pid of the newest wake of `identity`.
fn woken_pid(env: &TestEnv, identity: &str) -> u32 {
    env.events("lifecycle", "wake")
        .iter()
        .rev()
        .find(|w| w["identity"] == identity)
        .unwrap_or_else(|| panic!("no wake of {identity}\n{}", env.diagnostics()))["pid"]
        .parse()
        .unwrap()
}

/// The real Claude Code runs `tail -f <file> &` with its Bash tool (the model stand-in asks
/// for it; Claude Code refuses a plain `sleep`): it lives in a process session of its own and
/// its shell is gone at once. Ending the session ends it; the user's own `tail -f <file>`
/// in the same folder lives on.
fn claude_background_ends(way: Way, end: End) {
    use common::anthropic::{has_tool_result, last_user_text, Reply};
    let (mut env, api) = crate::claude::world(&end.with(way));
    let pidfile = env.dir.path().join("bg.pid");
    let followed = env.dir.path().join("followed.txt");
    std::fs::write(&followed, "").unwrap();
    let line = format!("tail -f {}", followed.display());
    let command = format!("{line} >/dev/null 2>&1 & echo $! > {}", pidfile.display());
    api.script(move |req| {
        if has_tool_result(req) {
            Reply::Text("started".into())
        } else if last_user_text(req).contains("START-BACKGROUND") {
            Reply::ToolUse(
                "Bash".into(),
                serde_json::json!({"command": command, "description": "follow a file in the background"}),
            )
        } else {
            Reply::Text("ok".into())
        }
    });
    crate::busy::wake_claude(&env);
    let claude = woken_pid(&env, "claude-cb");
    send(&env, "cb", "echo-ea", "START-BACKGROUND");
    let strays = Strays(vec![pid_in(&env, &pidfile)]);
    env.wait_until("claude's turn ends", Duration::from_secs(60), |e| {
        e.screen("claude-cb").contains("started")
    });
    let (_, _, _, sid) = stat(strays.0[0]).expect("the background command runs");
    let (_, _, _, claude_sid) = stat(claude).unwrap();
    assert_ne!(
        sid, claude_sid,
        "Claude Code runs it in a session of its own"
    );
    let outside = Outside::start(&env.peer_dir("cb"), &[(&line, true)]);
    end.run(&mut env, "cb", "claude-cb");
    assert_ended(&env, &strays, &[&line], &outside);
}

#[test]
fn what_claude_code_runs_in_the_background_ends_at_stop() {
    claude_background_ends(Way::Default, End::Stop);
}

#[test]
fn what_claude_code_runs_in_the_background_ends_at_idle_sleep() {
    claude_background_ends(Way::Default, End::Idle);
}

#[test]
fn what_claude_code_runs_in_the_background_ends_at_daemon_shutdown() {
    claude_background_ends(Way::Default, End::Shutdown);
}

/// A stdio MCP server (the official Python SDK) that starts a helper in a process session
/// of its own (as servers that launch a browser or a daemon do), writes both pids to the
/// file named by its first argument, and serves one tool.
const MCP_SERVER: &str = r#"import os, subprocess, sys
helper = subprocess.Popen(["tail", "-f", sys.argv[2]], start_new_session=True,
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {helper.pid}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
from mcp.server.mcpserver import MCPServer
app = MCPServer("stray")

@app.tool()
def ping() -> str:
    return "pong"

app.run()
"#;

/// The real Codex starts a stdio MCP server of the user's config in a process group of its
/// own; the server starts a helper in a session of its own. Codex ends its server's group
/// when it is told to go, but not the helper: ending the session ends both, and the user's
/// own `tail -f <file>` lives on.
fn codex_mcp_server_ends(way: Way, end: End) {
    let python = std::env::var("IAPEER_TEST_PYTHON")
        .expect("IAPEER_TEST_PYTHON names the Python with the MCP SDK (scripts/test.sh)");
    let (mut env, api) = crate::codex::world_with(&end.with(way));
    api.script(|_| common::openai::Reply::Text("ok".into()));
    let server = env.dir.path().join("stray_server.py");
    std::fs::write(&server, MCP_SERVER).unwrap();
    let pidfile = env.dir.path().join("mcp.pid");
    let followed = env.dir.path().join("followed.txt");
    std::fs::write(&followed, "").unwrap();
    let config = env.home.join(".codex/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[mcp_servers.stray]\ncommand = \"{python}\"\nargs = [\"{}\", \"{}\", \"{}\"]\n",
        server.display(),
        pidfile.display(),
        followed.display()
    ));
    std::fs::write(&config, text).unwrap();
    // Delivered, or queued behind the runtime's start-up: either way Codex runs.
    send(&env, "cx", "echo-ea", "echo: hi");
    let codex = woken_pid(&env, "codex-cx");
    env.wait_until(
        "the server writes its pids",
        Duration::from_secs(30),
        |_| common::read(&pidfile).split(' ').count() == 2,
    );
    let strays = Strays(
        common::read(&pidfile)
            .split(' ')
            .map(|p| p.trim().parse().unwrap())
            .collect(),
    );
    let (_, _, codex_pgid, codex_sid) = stat(codex).unwrap();
    let (_, _, pgid, _) = stat(strays.0[0]).expect("the MCP server runs");
    assert_ne!(
        pgid, codex_pgid,
        "Codex starts it in a process group of its own"
    );
    let (_, _, _, sid) = stat(strays.0[1]).expect("the helper runs");
    assert_ne!(sid, codex_sid, "the helper runs in a session of its own");
    let helper = format!("tail -f {}", followed.display());
    let server_line = format!(
        "{python} {} {} {}",
        server.display(),
        pidfile.display(),
        followed.display()
    );
    let outside = Outside::start(&env.peer_dir("cx"), &[(&helper, true)]);
    end.run(&mut env, "cx", "codex-cx");
    assert_ended(&env, &strays, &[&helper, &server_line], &outside);
}

#[test]
fn what_codex_and_its_mcp_server_started_ends_at_stop() {
    codex_mcp_server_ends(Way::Default, End::Stop);
}

#[test]
fn what_codex_and_its_mcp_server_started_ends_at_idle_sleep() {
    codex_mcp_server_ends(Way::Default, End::Idle);
}

#[test]
fn what_codex_and_its_mcp_server_started_ends_at_daemon_shutdown() {
    codex_mcp_server_ends(Way::Default, End::Shutdown);
}

#[test]
fn what_claude_code_runs_in_the_background_ends_at_stop_with_the_subreaper() {
    claude_background_ends(Way::Subreaper, End::Stop);
}

#[test]
fn what_codex_and_its_mcp_server_started_ends_at_stop_with_the_subreaper() {
    codex_mcp_server_ends(Way::Subreaper, End::Stop);
}

/// Give `dir` and everything below it to `uid`:`gid`.
fn chown_tree(dir: &Path, uid: u32, gid: u32) {
    let owner = (
        Some(nix::unistd::Uid::from_raw(uid)),
        Some(nix::unistd::Gid::from_raw(gid)),
    );
    nix::unistd::chown(dir, owner.0, owner.1).unwrap();
    if dir.is_dir() && !dir.is_symlink() {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            chown_tree(&e.path(), uid, gid);
        }
    }
}

/// A daemon run by a normal user from a shell sits in a cgroup it cannot write (here the
/// root's): its probe fails and it contains sessions as child subreaper — for real, without
/// the test hook — and still ends what a session started, leaving the user's own processes
/// of the same command lines alone.
#[test]
fn a_normal_users_daemon_without_a_cgroup_of_its_own_is_the_subreaper() {
    let Some(user) = common::other_user::OtherUser::create() else {
        return;
    };
    let as_user = (user.uid, user.gid);
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    let tree = Tree::new(&env, 7390);
    env.launch_env("bob", "echo", &tree.launch_env());
    let stderr = env.dir.path().join("daemon-stderr.log");
    std::fs::write(&stderr, "").unwrap();
    // The other user runs a copy of the binary kept in the test's own folder: the build's
    // folder may be out of their reach (a clone in a 0700 `mktemp -d` folder, as a CI's is).
    let bin = env.dir.path().join("iapeer");
    std::fs::copy(common::bin(), &bin).unwrap();
    chown_tree(env.dir.path(), user.uid, user.gid);
    common::other_user::open_path_to(env.dir.path());
    let daemon = env
        .cmd_of(&bin, &["daemon"])
        .uid(user.uid)
        .gid(user.gid)
        .stdout(Stdio::null())
        .stderr(std::fs::File::options().append(true).open(&stderr).unwrap())
        .spawn()
        .unwrap();
    let daemon_pid = daemon.id();
    env.daemon = Some(daemon);
    let run = |args: &[&str]| {
        let out = env
            .cmd_of(&bin, args)
            .uid(user.uid)
            .gid(user.gid)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::describe(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    env.wait_until("the daemon answers", Duration::from_secs(15), |e| {
        e.router_json().exists()
    });
    let log = env.log("daemon");
    assert!(
        log.contains(
            "session containment: the daemon as child subreaper (no cgroup: cannot create"
        ),
        "{log}"
    );
    assert!(run(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "echo: hi"
    ])
    .contains("woke"));
    let bob = woken_pid(&env, "echo-bob");
    let strays = tree.pids(&env, bob);
    assert_eq!(
        stat(strays.0[1]).unwrap().1,
        daemon_pid,
        "the orphan was re-parented to the daemon, its subreaper"
    );
    let outside = tree.outside_as(&env.peer_dir("bob"), Some(as_user));
    run(&["stop", "bob"]);
    assert_ended(&env, &strays, &tree.lines(), &outside);
    env.wait_until(
        "the daemon reaps what was re-parented to it",
        Duration::from_secs(10),
        |_| zombies_of(daemon_pid).is_empty(),
    );
    env.stop_daemon();
}

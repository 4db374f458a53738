//! Recording a real CLI on a real pty (for the fixture recorders of runtimes iapeer does not
//! host yet): the program runs as the session leader of a 220×50 pty, every byte it writes is
//! kept unchanged, the terminal queries it sends are answered as the daemon's pane answers
//! them (`src/term/responder.rs`: cursor position, device attributes, kitty keyboard flags,
//! default colours), and a terminal emulator of the pty's size renders the screen to wait on.

#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The pty size of the recordings (as the Claude Code ones).
pub const ROWS: u16 = 50;
pub const COLS: u16 = 220;

struct Shared {
    raw: Vec<u8>,
    parser: vt100::Parser,
    last_output: Instant,
    /// Answers to terminal queries read but not written yet (held `late`).
    answers_held: usize,
}

/// A CLI running on a pty, its output recorded: at its end, every byte it wrote goes to
/// `<out>/<name>.raw` and the byte offset of each saved step to `<out>/<name>.marks.json`
/// (`[{"step": <name>, "offset": <bytes>}]`: the screen of a step is the rendering of the
/// bytes before its offset); each step's screen is also kept as `<out>/<step>.screen.txt`.
pub struct PtyRecording {
    child: Child,
    master: File,
    shared: Arc<Mutex<Shared>>,
    out: PathBuf,
    name: String,
    marks: Vec<serde_json::Value>,
}

/// The queries answered, and how the daemon answers them (its fixed dark palette).
fn reply_to(query: &[u8], cursor: (u16, u16)) -> Option<Vec<u8>> {
    Some(match query {
        b"\x1b[6n" => format!("\x1b[{};{}R", cursor.0 + 1, cursor.1 + 1).into_bytes(),
        b"\x1b[c" | b"\x1b[0c" => b"\x1b[?62;22c".to_vec(),
        b"\x1b[>c" | b"\x1b[>0c" => b"\x1b[>0;276;0c".to_vec(),
        b"\x1b[?u" => b"\x1b[?0u".to_vec(),
        b"\x1b]10;?\x07" => b"\x1b]10;rgb:d8d8/d8d8/d8d8\x07".to_vec(),
        b"\x1b]10;?\x1b\\" => b"\x1b]10;rgb:d8d8/d8d8/d8d8\x1b\\".to_vec(),
        b"\x1b]11;?\x07" => b"\x1b]11;rgb:1c1c/1c1c/1c1c\x07".to_vec(),
        b"\x1b]11;?\x1b\\" => b"\x1b]11;rgb:1c1c/1c1c/1c1c\x1b\\".to_vec(),
        b"\x1b[>q" | b"\x1b[>0q" => {
            format!("\x1bP>|iapeer({})\x1b\\", env!("CARGO_PKG_VERSION")).into_bytes()
        }
        _ => return None,
    })
}

const QUERIES: &[&[u8]] = &[
    b"\x1b[6n",
    b"\x1b[c",
    b"\x1b[0c",
    b"\x1b[>c",
    b"\x1b[>0c",
    b"\x1b[?u",
    b"\x1b]10;?\x07",
    b"\x1b]10;?\x1b\\",
    b"\x1b]11;?\x07",
    b"\x1b]11;?\x1b\\",
    b"\x1b[>q",
    b"\x1b[>0q",
];

impl PtyRecording {
    /// Start `cmd` on a new 220×50 pty; its output is saved under `out` as `<name>.raw`.
    pub fn spawn(cmd: Command, out: &Path, name: &str) -> PtyRecording {
        Self::spawn_answering_late(cmd, out, name, Duration::ZERO)
    }

    /// [`Self::spawn`], the answers to the terminal queries written `late` after the query
    /// was read (as a daemon on a loaded machine answers them: after the program stopped
    /// waiting for them).
    pub fn spawn_answering_late(
        mut cmd: Command,
        out: &Path,
        name: &str,
        late: Duration,
    ) -> PtyRecording {
        let ws = nix::pty::Winsize {
            ws_row: ROWS,
            ws_col: COLS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&ws), None).expect("openpty");
        let slave: OwnedFd = pty.slave;
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if nix::libc::setsid() < 0 || nix::libc::ioctl(0, nix::libc::TIOCSCTTY as _, 0) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn on the pty");
        drop(cmd);
        let master = File::from(pty.master);
        let shared = Arc::new(Mutex::new(Shared {
            raw: Vec::new(),
            parser: vt100::Parser::new(ROWS, COLS, 0),
            last_output: Instant::now(),
            answers_held: 0,
        }));
        let (mut reader, mut answerer, sink) = (
            master.try_clone().unwrap(),
            master.try_clone().unwrap(),
            shared.clone(),
        );
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            // The end of the previous read, so a query split across reads is still seen.
            let mut carry: Vec<u8> = Vec::new();
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut replies: Vec<u8> = Vec::new();
                {
                    let mut s = sink.lock().unwrap();
                    s.raw.extend_from_slice(&buf[..n]);
                    s.last_output = Instant::now();
                    let mut scan = std::mem::take(&mut carry);
                    let old = scan.len();
                    scan.extend_from_slice(&buf[..n]);
                    let mut found: Vec<(usize, &[u8])> = Vec::new();
                    for q in QUERIES {
                        found.extend(
                            scan.windows(q.len())
                                .enumerate()
                                .filter(|(i, w)| w == q && i + q.len() > old)
                                .map(|(i, _)| (i, *q)),
                        );
                    }
                    found.sort();
                    // Each query is answered with the cursor where the output up to it left it.
                    let mut done = 0;
                    for (i, q) in found {
                        let end = (i + q.len() - old).max(done);
                        s.parser.process(&buf[done..end]);
                        done = end;
                        if let Some(r) = reply_to(q, s.parser.screen().cursor_position()) {
                            replies.extend(r);
                        }
                    }
                    s.parser.process(&buf[done..n]);
                    carry = scan[scan.len().saturating_sub(8)..].to_vec();
                    // Counted with the screen they answer, so no one sees that screen without
                    // them.
                    if !replies.is_empty() && !late.is_zero() {
                        s.answers_held += 1;
                    }
                }
                if replies.is_empty() {
                } else if late.is_zero() {
                    let _ = answerer.write_all(&replies);
                } else {
                    let mut answerer = answerer.try_clone().unwrap();
                    let held = sink.clone();
                    std::thread::spawn(move || {
                        // Time is the thing recorded: the answer comes this late.
                        std::thread::sleep(late);
                        let _ = answerer.write_all(&replies);
                        held.lock().unwrap().answers_held -= 1;
                    });
                }
            }
        });
        std::fs::create_dir_all(out).unwrap();
        PtyRecording {
            child,
            master,
            shared,
            out: out.to_path_buf(),
            name: name.to_string(),
            marks: Vec::new(),
        }
    }

    /// The pid of the program (the pty's session leader).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the terminal shows now.
    pub fn screen(&self) -> String {
        self.shared.lock().unwrap().parser.screen().contents()
    }

    /// Every byte written so far.
    pub fn raw(&self) -> Vec<u8> {
        self.shared.lock().unwrap().raw.clone()
    }

    /// Wait (at most `timeout`) until the screen satisfies `pred`; panics with the screen.
    pub fn wait(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) {
        let shown = super::poll_every(Duration::from_millis(100), timeout, || pred(&self.screen()));
        assert!(
            shown,
            "{what}: not within {timeout:?}; the screen:\n{}",
            self.screen()
        );
    }

    /// Wait (at most `timeout`) until every answer to a terminal query that
    /// [`Self::spawn_answering_late`] held back has been written to the program.
    pub fn wait_answers_written(&self, timeout: Duration) {
        let written = super::poll(timeout, || self.shared.lock().unwrap().answers_held == 0);
        assert!(written, "answers still held after {timeout:?}");
    }

    /// Wait for the screen to hold `needle`.
    pub fn wait_for(&self, needle: &str, timeout: Duration) {
        self.wait(&format!("`{needle}` on screen"), timeout, |s| {
            s.contains(needle)
        });
    }

    /// Wait (at most 120 s) for `needle` on screen and for the output to go still for 1.5 s,
    /// then [`Self::save`] the step.
    pub fn shot(&mut self, needle: &str, step: &str) {
        self.wait_for(needle, Duration::from_secs(120));
        self.settle(Duration::from_millis(1500));
        self.save(step);
    }

    /// Wait (at most 120 s) for `needle` on screen, then [`Self::save`] the step at once (a
    /// busy screen's spinner never goes still).
    pub fn shot_now(&mut self, needle: &str, step: &str) {
        self.wait_for(needle, Duration::from_secs(120));
        self.save(step);
    }

    /// Wait until the program has written nothing for `quiet` (at most 30 s: a spinner
    /// never goes quiet, then the screen as it is).
    pub fn settle(&self, quiet: Duration) {
        super::poll_every(Duration::from_millis(100), Duration::from_secs(30), || {
            self.shared.lock().unwrap().last_output.elapsed() >= quiet
        });
    }

    /// Send bytes as typed keys.
    pub fn keys(&mut self, bytes: &[u8]) {
        self.master.write_all(bytes).expect("write to the pty");
    }

    /// Send `text` as one bracketed paste.
    pub fn paste(&mut self, text: &str) {
        let mut b = b"\x1b[200~".to_vec();
        b.extend_from_slice(text.as_bytes());
        b.extend_from_slice(b"\x1b[201~");
        self.keys(&b);
    }

    /// Mark the output so far as step `step` and save the screen now as
    /// `<out>/<step>.screen.txt` (trailing blanks trimmed); print the screen.
    pub fn save(&mut self, step: &str) {
        let (offset, screen) = {
            let s = self.shared.lock().unwrap();
            (s.raw.len(), s.parser.screen().contents())
        };
        self.marks
            .push(serde_json::json!({"step": step, "offset": offset}));
        let screen: String = screen
            .lines()
            .map(|l| l.trim_end().to_string() + "\n")
            .collect();
        std::fs::write(
            self.out.join(format!("{step}.screen.txt")),
            screen.trim_end().to_string() + "\n",
        )
        .unwrap();
        eprintln!("=== {step}:\n{screen}");
    }

    /// End the program's process group (SIGTERM, then SIGKILL after 5 s), reap it, and write
    /// `<name>.raw` (up to the last mark: what the ending drew is left out) and
    /// `<name>.marks.json`.
    pub fn end(mut self) {
        self.stop();
        let raw = self.raw();
        let last = self
            .marks
            .last()
            .and_then(|m| m["offset"].as_u64())
            .map_or(raw.len(), |o| o as usize);
        std::fs::write(self.out.join(format!("{}.raw", self.name)), &raw[..last]).unwrap();
        std::fs::write(
            self.out.join(format!("{}.marks.json", self.name)),
            serde_json::to_string_pretty(&self.marks).unwrap() + "\n",
        )
        .unwrap();
    }
}

impl PtyRecording {
    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGTERM);
        if super::exit_within(&mut self.child, Duration::from_secs(5)).is_none() {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// A recording given up (a failed wait) still ends its program.
impl Drop for PtyRecording {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A streamable-HTTP MCP server (the official Python SDK) with one tool, `send_to_peer(to,
/// body)`; it appends one JSON line per HTTP request (`method`, `path`, the `authorization`
/// and `x-iapeer-token` headers) and per tool call (`call`, `to`, `body`) to the file named by
/// its first argument, and writes its port to the file named by its second.
pub const MCP_SERVER: &str = r#"import json, os, socket, sys
import uvicorn
from mcp.server.mcpserver import MCPServer

log, portfile = sys.argv[1], sys.argv[2]

def note(entry):
    with open(log, "a") as f:
        f.write(json.dumps(entry) + "\n")

app = MCPServer("iapeer")

@app.tool()
def send_to_peer(to: str, body: str) -> str:
    """Send a message to another peer of the team."""
    note({"call": "send_to_peer", "to": to, "body": body})
    return "delivered to " + to

inner = app.streamable_http_app()

async def asgi(scope, receive, send):
    if scope["type"] == "http":
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        note({"method": scope["method"], "path": scope["path"],
              "authorization": headers.get("authorization"),
              "x-iapeer-token": headers.get("x-iapeer-token")})
    await inner(scope, receive, send)

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
with open(portfile + ".tmp", "w") as f:
    f.write(str(sock.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
uvicorn.Server(uvicorn.Config(asgi, log_level="warning")).run(sockets=[sock])
"#;

/// The running MCP server of [`MCP_SERVER`].
pub struct McpServer {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl McpServer {
    /// Start it with `python` (the venv with the MCP SDK), its files in `dir`.
    pub fn start(python: &str, dir: &Path) -> McpServer {
        let script = dir.join("mcp_server.py");
        std::fs::write(&script, MCP_SERVER).unwrap();
        let (log, portfile) = (dir.join("mcp.log"), dir.join("mcp.port"));
        let child = Command::new(python)
            .arg(&script)
            .arg(&log)
            .arg(&portfile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the MCP server");
        assert!(
            super::poll(Duration::from_secs(30), || portfile.exists()),
            "the MCP server wrote no port within 30 s"
        );
        let port = super::read(&portfile).trim().parse().unwrap();
        McpServer { child, port, log }
    }

    /// Its endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The lines logged so far.
    pub fn entries(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The screen of step `step` of the recording `<dir>/<session>.raw`: its bytes up to the
/// step's mark in `<session>.marks.json`, rendered at 220×50.
pub fn recorded_screen(dir: &Path, session: &str, step: &str) -> String {
    let raw = std::fs::read(dir.join(format!("{session}.raw"))).unwrap();
    let marks: Vec<serde_json::Value> =
        serde_json::from_str(&super::read(&dir.join(format!("{session}.marks.json")))).unwrap();
    let offset = marks
        .iter()
        .find(|m| m["step"] == step)
        .and_then(|m| m["offset"].as_u64())
        .unwrap_or_else(|| panic!("no step {step} in {session}.marks.json"));
    let mut parser = vt100::Parser::new(ROWS, COLS, 0);
    parser.process(&raw[..offset as usize]);
    parser.screen().contents()
}

/// The Python with the official MCP SDK (`IAPEER_TEST_PYTHON`).
pub fn python() -> String {
    std::env::var("IAPEER_TEST_PYTHON")
        .expect("IAPEER_TEST_PYTHON names the Python with the MCP SDK (scripts/test.sh)")
}

/// The bin named by `var`, or a panic saying how to get `package`.
pub fn bin_from(var: &str, package: &str) -> String {
    std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set: install {package} with npm and name its bin"))
}

/// `nice <bin> <args>` in `cwd` with `home` as HOME and a cleared environment but for `PATH`,
/// `TERM` and `COLORTERM` as the daemon sets them (spec 04 §1) and `env`.
pub fn cli(bin: &str, home: &Path, cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = Command::new("nice");
    c.arg(bin)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", home)
        .env("TERM", "xterm-256color")
        .env("COLORTERM", "truecolor")
        .envs(env.iter().copied());
    c
}

/// A recorder's world: a temp dir with a HOME (`home`) and a working folder (`proj`), the MCP
/// server, and the fixture folder `out` it writes to, with the temp dir's path replaced by
/// `/tmp/rec` in what it writes.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub cwd: PathBuf,
    pub out: PathBuf,
    pub mcp: McpServer,
}

impl Scratch {
    pub fn new(out: PathBuf) -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let (home, cwd) = (dir.path().join("home"), dir.path().join("proj"));
        std::fs::create_dir_all(&cwd).unwrap();
        let mcp = McpServer::start(&python(), dir.path());
        Scratch {
            dir,
            home,
            cwd,
            out,
            mcp,
        }
    }

    /// `text` with the temp dir's path (with or without its leading `/`) as `/tmp/rec`.
    pub fn local(&self, text: &str) -> String {
        let tmp = self.dir.path().display().to_string();
        text.replace(&tmp, "/tmp/rec").replace(&tmp[1..], "tmp/rec")
    }

    /// Write `<out>/<name>` holding [`Self::local`] of `text`.
    pub fn write(&self, name: &str, text: &str) {
        std::fs::write(self.out.join(name), self.local(text)).unwrap();
    }

    /// Write `<out>/<name>` holding `value` as pretty JSON.
    pub fn write_json(&self, name: &str, value: &serde_json::Value) {
        self.write(name, &(serde_json::to_string_pretty(value).unwrap() + "\n"));
    }

    /// How many times the MCP tool was called.
    pub fn calls(&self) -> usize {
        self.mcp
            .entries()
            .iter()
            .filter(|e| e["call"] == "send_to_peer")
            .count()
    }

    /// Save the MCP server's log as `mcp-requests.jsonl` and check every HTTP request to it
    /// carried `Authorization: Bearer <token>`.
    pub fn save_mcp_log(&self, token: &str) {
        let entries = self.mcp.entries();
        let lines: String = entries.iter().map(|e| e.to_string() + "\n").collect();
        self.write("mcp-requests.jsonl", &lines);
        let heads: Vec<&serde_json::Value> =
            entries.iter().filter(|e| e["method"].is_string()).collect();
        assert!(
            !heads.is_empty()
                && heads
                    .iter()
                    .all(|e| e["authorization"] == format!("Bearer {token}")),
            "every MCP request carried the token: {heads:?}"
        );
    }

    /// Run `cmd` (no pty) to its end; its stdout and stderr.
    pub fn output(&self, mut cmd: Command) -> String {
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

/// Every file under `root` (recursively, sorted), leaving out the folders `skip` names.
pub fn files_under(root: &Path, skip: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                if !skip(&p) {
                    stack.push(p);
                }
            } else {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

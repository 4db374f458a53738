//! The echo agent in a real pty against a loopback fake MCP server.

use crate::envelope::{render_agent, Envelope};
use crate::names::Intelligence;
use crossbeam_channel::Receiver;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "IAPEER_ECHO_AGENT_TEST_CHILD";
const ARGS_ENV: &str = "IAPEER_ECHO_AGENT_TEST_ARGS";
const WAIT: Duration = Duration::from_secs(20);

/// Entry point of the child process of `echo_agent_in_a_pty_replies_over_mcp` (the test
/// binary re-runs itself with this name). Ignored in normal runs; without the child variable
/// it returns at once.
#[test]
#[ignore = "child-process entry of echo_agent_in_a_pty_replies_over_mcp"]
fn pty_child_entry() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let args: Vec<String> = std::env::var(ARGS_ENV)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    std::process::exit(super::run(&args));
}

/// One request the fake MCP server saw.
#[derive(Debug)]
struct Seen {
    method: String,
    headers: Vec<(String, String)>,
    msg: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Serve at most 10 requests or until `stop`/20 s: `initialize` as JSON, the notification
/// with 202, `tools/call` as a one-event SSE stream.
fn fake_mcp(server: tiny_http::Server, stop: Arc<AtomicBool>) -> Vec<Seen> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + WAIT;
    while seen.len() < 10 && Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
        let Ok(Some(mut req)) = server.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        let mut body = String::new();
        let _ = req.as_reader().read_to_string(&mut body);
        let msg: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let method = msg["method"].as_str().unwrap_or("").to_string();
        let headers = req
            .headers()
            .iter()
            .map(|h| {
                (
                    h.field.as_str().as_str().to_ascii_lowercase(),
                    h.value.as_str().to_string(),
                )
            })
            .collect();
        let header = |v: &str| tiny_http::Header::from_bytes("Content-Type", v).unwrap();
        let response = match method.as_str() {
            "initialize" => tiny_http::Response::from_string(
                json!({"jsonrpc":"2.0","id":msg["id"],"result":{
                    "protocolVersion":"2025-06-18","capabilities":{"tools":{}},
                    "serverInfo":{"name":"fake","version":"0"}}})
                .to_string(),
            )
            .with_header(header("application/json")),
            "tools/call" => {
                let result = json!({"ok":true,"woke":false,
                    "delivered_to":{"personality":"alice","runtime":"claude"}});
                let answer = json!({"jsonrpc":"2.0","id":msg["id"],"result":{
                    "content":[{"type":"text","text":result.to_string()}],
                    "structuredContent":result}});
                tiny_http::Response::from_string(format!("event: message\ndata: {answer}\n\n"))
                    .with_header(header("text/event-stream"))
            }
            _ => tiny_http::Response::from_string("").with_status_code(202),
        };
        let _ = req.respond(response);
        seen.push(Seen {
            method,
            headers,
            msg,
        });
    }
    seen
}

/// Everything the child wrote to the pty, searched in order.
struct Screen {
    rx: Receiver<Vec<u8>>,
    text: String,
    cursor: usize,
}

impl Screen {
    /// Wait until `needle` appears after the previous match; panic with the output if not.
    fn expect(&mut self, needle: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(i) = self.text[self.cursor..].find(needle) {
                self.cursor += i + needle.len();
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(chunk) => self.text.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => panic!("no {needle:?} in output:\n{:?}", self.text),
            }
        }
    }

    fn drain(&mut self, wait: Duration) {
        while let Ok(chunk) = self.rx.recv_timeout(wait) {
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

fn envelope(ts: &str, body: &str) -> Envelope {
    Envelope {
        from: "alice".into(),
        runtime: "claude".into(),
        intelligence: Some(Intelligence::Artificial),
        ts: Some(format!("2026-07-14T{ts}+03:00")),
        topic: Some("release".into()),
        attachments: vec![],
        body: body.into(),
    }
}

fn paste(pty: &mut File, env: &Envelope) {
    let now = "2026-07-14T10:00:00Z"
        .parse::<jiff::Timestamp>()
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::get("Europe/Moscow").unwrap());
    let text = render_agent(env, &now);
    let (a, b) = text.split_at(text.len() / 2);
    // The paste arrives in two reads, the way a large paste does.
    pty.write_all(format!("\x1b[200~{a}").as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    pty.write_all(format!("{b}\x1b[201~").as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    pty.write_all(b"\r").unwrap();
}

#[test]
fn echo_agent_in_a_pty_replies_over_mcp() {
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();

    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let server_thread = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || fake_mcp(server, stop))
    };

    let env = TestEnv {
        home: home.path(),
        root: root.path(),
        cwd: cwd.path(),
        mcp_url: format!("http://127.0.0.1:{port}/mcp"),
    };
    let (mut child, mut master, mut screen) = env.spawn("--reply-delay-ms 1000");

    screen.expect("\x1b[?2004h");
    screen.expect("iapeer echo agent — demo stand-in runtime (echo-bob)");
    screen.expect("❯ ");

    // 1. An envelope: acknowledged, replied to over MCP with the busy marker shown meanwhile.
    paste(
        &mut master,
        &envelope("01:23:45", "hello there\nsecond line"),
    );
    screen.expect("[Pasted text #1 +4 lines]");
    screen.expect("received 01:23:45 from alice: hello there\r\nsecond line");
    screen.expect("esc to interrupt");
    screen.expect("replied to alice: delivered");
    screen.expect("❯ ");

    // 2. Typed text with a correction is not an envelope.
    master.write_all(b"hellp\x7fo\r").unwrap();
    screen.expect("you: hello");
    // 2b. Esc clears the composer (how iapeer clears a cut paste of its own): what is typed
    // next is sent alone.
    master
        .write_all(b"\x1b[200~cut\nrest\x1b[201~draft")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    master.write_all(b"\x1b").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    master.write_all(b"after\r").unwrap();
    screen.expect("you: after");

    // 3. An echo is acknowledged but never answered.
    paste(&mut master, &envelope("01:23:46", "echo: ping"));
    screen.expect("received 01:23:46 from alice: echo: ping");

    // 4. Escape while a reply waits: interrupted, nothing sent.
    paste(&mut master, &envelope("01:23:47", "third"));
    screen.expect("received 01:23:47 from alice: third");
    screen.expect("esc to interrupt");
    master.write_all(b"\x1b").unwrap();
    screen.expect("interrupted");
    // Past the 1000 ms reply delay: a cancelled reply would have reached the server by now.
    std::thread::sleep(Duration::from_millis(1500));

    terminate(&mut child);
    screen.drain(Duration::from_millis(200));
    assert!(
        screen.text.contains("\x1b[?2004l"),
        "bracketed paste not turned off"
    );
    assert!(
        !screen.text.contains("<iap "),
        "the raw envelope was echoed"
    );

    stop.store(true, Ordering::SeqCst);
    let seen = server_thread.join().unwrap();
    let methods: Vec<&str> = seen.iter().map(|s| s.method.as_str()).collect();
    assert_eq!(
        methods,
        ["initialize", "notifications/initialized", "tools/call"]
    );
    assert_eq!(seen[0].msg["params"]["protocolVersion"], "2025-06-18");
    let call = &seen[2];
    assert_eq!(
        call.msg["params"],
        json!({"name":"send_to_peer","arguments":{
            "personality":"alice","message":"echo: hello there\nsecond line","topic":"release"}})
    );
    assert_eq!(call.header("x-iapeer-identity"), Some("echo-bob"));
    assert_eq!(call.header("authorization"), Some("Bearer tok-123"));
    assert_eq!(call.header("x-iapeer-token"), None);
    assert_eq!(call.header("content-type"), Some("application/json"));
    assert_eq!(
        call.header("accept"),
        Some("application/json, text/event-stream")
    );

    let text = std::fs::read_to_string(super::transcript::path(cwd.path())).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["user", "assistant", "user", "user"]);
    assert_eq!(records[0]["from"], "alice");
    assert_eq!(records[0]["ts"], "01:23:45");
    assert_eq!(records[0]["topic"], "release");
    assert_eq!(records[0]["body"], "hello there\nsecond line");
    assert_eq!(records[1]["to"], "alice");
    assert_eq!(records[1]["body"], "echo: hello there\nsecond line");
    assert_eq!(records[1]["ok"], true);
    assert_eq!(records[1]["result"], "delivered");
    assert!(records[0]["at"].as_u64().unwrap() > 0);

    // A resumed run counts the earlier messages; --no-prompt never draws the prompt.
    let (mut child, _master, mut screen) = env.spawn("--resume --no-prompt");
    screen.expect("iapeer echo agent — demo stand-in runtime (echo-bob)");
    screen.expect("resumed conversation (4 earlier messages)");
    screen.drain(Duration::from_millis(300));
    terminate(&mut child);
    screen.drain(Duration::from_millis(100));
    assert!(!screen.text.contains("❯"), "prompt drawn with --no-prompt");
}

#[test]
fn fail_boot_and_bad_arguments_exit_at_once() {
    assert_eq!(
        super::run(&["--fail-boot".to_string()]),
        super::FAIL_BOOT_EXIT
    );
    assert_eq!(super::run(&["--bogus".to_string()]), 2);
    assert_eq!(
        super::run(&["--reply-delay-ms".to_string(), "soon".to_string()]),
        2
    );
    assert_eq!(
        super::parse_options(&[
            "--resume".into(),
            "--no-prompt".into(),
            "--reply-delay-ms".into(),
            "250".into(),
            "--boot-delay-ms".into(),
            "40".into(),
            "--boot-menu".into(),
            "Q?|a|b".into(),
            "--spawn".into(),
            "/t/tree.sh".into(),
            "--refuse-input".into(),
        ])
        .unwrap(),
        super::Options {
            resume: true,
            boot: super::BootSwitches {
                fail: false,
                no_prompt: true,
                delay_ms: 40,
                menu: Some("Q?|a|b".into()),
            },
            refuse_input: true,
            reply_delay_ms: 250,
            system_prompt_file: None,
            spawn: Some("/t/tree.sh".into()),
        }
    );
    let err = super::parse_options(&["--boot-menu".into(), "Q?|only".into()]).unwrap_err();
    assert!(err.to_string().contains("at least two"), "{err}");
}

/// SIGTERM the child and require a clean exit within the wait.
fn terminate(child: &mut std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("echo agent ignored SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status:?}");
}

/// Folders and endpoint for a child echo agent.
struct TestEnv<'a> {
    home: &'a std::path::Path,
    root: &'a std::path::Path,
    cwd: &'a std::path::Path,
    mcp_url: String,
}

impl TestEnv<'_> {
    /// Run the echo agent with `args` in a new 220x50 pty; returns the child, the pty master
    /// and its output.
    fn spawn(&self, args: &str) -> (std::process::Child, File, Screen) {
        let size = nix::pty::Winsize {
            ws_row: 50,
            ws_col: 220,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(&size, None).unwrap();
        let slave = File::from(pty.slave);
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "echo_agent::tests::pty_child_entry",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_ENV, "1")
            .env(ARGS_ENV, args)
            .env("HOME", self.home)
            .env("IAPEER_ROOT", self.root)
            .env("IAPEER_MCP_URL", &self.mcp_url)
            .env("PEER_IDENTITY", "echo-bob")
            .env("IAPEER_TOKEN", "tok-123")
            .env_remove("IAPEER_BEARER_TOKEN")
            .current_dir(self.cwd)
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .spawn()
            .unwrap();
        // The Command (and with it the parent's slave copies) is gone here, so the reader
        // sees EOF/EIO when the child exits.
        let master = File::from(pty.master);
        let mut reader = master.try_clone().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let screen = Screen {
            rx,
            text: String::new(),
            cursor: 0,
        };
        (child, master, screen)
    }
}

//! The loopback HTTP server against hostile local clients (issue 12 item 2): a real daemon,
//! raw TCP clients, and the daemon's own `/proc` entries for what it holds.

use crate::common;

use common::TestEnv;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

/// A daemon whose soft and hard `RLIMIT_NOFILE` are `nofile` (as under systemd's default 1024),
/// set between fork and exec.
fn daemon_with_nofile(nofile: u64) -> TestEnv {
    daemon_with_nofile_and(nofile, &[])
}

/// [`daemon_with_nofile`] with `vars` in its environment (and that of later commands).
fn daemon_with_nofile_and(nofile: u64, vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    std::fs::create_dir_all(&env.root).unwrap();
    let log = std::fs::File::create(env.dir.path().join("daemon-stderr.log")).unwrap();
    let mut cmd = env.cmd(&["daemon"]);
    cmd.stdout(Stdio::null()).stderr(log);
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let lim = nix::libc::rlimit {
                rlim_cur: nofile,
                rlim_max: nofile,
            };
            if nix::libc::setrlimit(nix::libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    env.daemon = Some(cmd.spawn().expect("spawn daemon"));
    env.wait_until("the daemon answers", Duration::from_secs(15), |e| {
        std::os::unix::net::UnixStream::connect(e.socket()).is_ok() && e.router_json().exists()
    });
    env
}

/// Create the echo peers alice and bob and wake bob with `message` from alice.
fn wake_bob(env: &TestEnv, message: &str) {
    env.create_echo("alice");
    env.create_echo("bob");
    env.ok(&["send", "bob", "--from", "echo-alice", "--message", message]);
}

fn daemon() -> TestEnv {
    let mut env = TestEnv::new();
    env.start_daemon();
    env
}

fn pid(env: &TestEnv) -> u32 {
    env.daemon.as_ref().unwrap().id()
}

/// Entries in `/proc/<pid>/<dir>` (`fd`: open fds, `task`: threads).
fn count(pid: u32, dir: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/{dir}"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// A field of `/proc/<pid>/status` in KiB (`VmHWM`: peak resident memory).
fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Send `bytes`, read until the server closes (at most `timeout`), return the status code.
fn exchange(port: u16, bytes: &[u8], timeout: Duration) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr(port), timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    let _ = s.write_all(bytes);
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

fn ping_request(port: u16) -> Vec<u8> {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{PING}",
        PING.len()
    )
    .into_bytes()
}

/// One MCP ping; its status (None: no answer within 5 s) and how long it took.
fn mcp_ping(port: u16) -> (Option<u16>, Duration) {
    let started = Instant::now();
    let status = exchange(port, &ping_request(port), Duration::from_secs(5));
    (status, started.elapsed())
}

/// The hostile request shapes of issue 12 item 2, each as (name, bytes).
fn hostile_shapes(port: u16) -> Vec<(&'static str, Vec<u8>)> {
    let host = format!("127.0.0.1:{port}");
    vec![
        (
            "HTTP/2.0 request line",
            format!("GET /mcp HTTP/2.0\r\nHost: {host}\r\n\r\n").into_bytes(),
        ),
        (
            "PRI * preface",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(),
        ),
        (
            "Content-Length over 64 MiB",
            format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 67108865\r\n\r\n{{\"jsonrpc\":")
                .into_bytes(),
        ),
        (
            "Content-Length 2^62",
            format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 4611686018427387904\r\n\r\n{{")
                .into_bytes(),
        ),
    ]
}

/// (fds, threads) of the daemon once they have stopped changing for a while (at most 10 s).
fn settled(pid: u32) -> (usize, usize) {
    settled_by(|| (count(pid, "fd"), count(pid, "task")))
}

/// What `read` gives once it has stopped changing for 700 ms (at most 10 s).
fn settled_by<T: PartialEq>(read: impl Fn() -> T) -> T {
    common::settled(Duration::from_secs(10), Duration::from_millis(700), read)
}

/// Issue 12 item 2: every hostile shape is answered and leaves no thread or fd behind.
/// `IAPEER_TEST_HOSTILE_N` sets the requests per shape (default 200; the report's figure was
/// measured with 10 000).
#[test]
fn hostile_requests_leave_no_thread_or_fd_behind() {
    let env = daemon();
    let port = env.port();
    let pid = pid(&env);
    let n: usize = std::env::var("IAPEER_TEST_HOSTILE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    // Warm up (lazy allocations, log files), then take the baseline.
    assert_eq!(mcp_ping(port).0, Some(200));
    let before = settled(pid);
    for (name, bytes) in hostile_shapes(port) {
        let started = Instant::now();
        let clients: Vec<_> = (0..4)
            .map(|_| {
                let bytes = bytes.clone();
                std::thread::spawn(move || {
                    (0..n / 4)
                        .filter(|_| exchange(port, &bytes, Duration::from_secs(5)).is_some())
                        .count()
                })
            })
            .collect();
        let answered: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
        let after = settled(pid);
        eprintln!(
            "{name}: {} requests in {:?}, {answered} answered; fds/threads {before:?} -> {after:?}",
            n / 4 * 4,
            started.elapsed()
        );
        assert_eq!(answered, n / 4 * 4, "{name}: every request gets an answer");
        assert_eq!(
            after,
            before,
            "{name}: (fds, threads) grew\n{}",
            env.diagnostics()
        );
    }
    assert_eq!(mcp_ping(port).0, Some(200));
}

/// Issue 31 item 3: the daemon sizes its descriptor table at start for its open-file limit,
/// so the first burst of connections does not wait while the kernel grows it (the table
/// never shrinks, so `FDSize` shows it with only a handful of descriptors open).
#[test]
fn the_daemon_sizes_its_descriptor_table_at_start() {
    let env = daemon_with_nofile(4096);
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid(&env))).unwrap();
    let slots: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert!(
        slots >= 4096,
        "FDSize {slots}, open {}",
        count(pid(&env), "fd")
    );
    assert!(
        count(pid(&env), "fd") < 64,
        "the sizing descriptor was closed"
    );
}

/// Issue 12 item 2: with the daemon at nofile 1024, 2 000 slowloris connections (heads that
/// never end) and 100 stalled bodies are held while MCP is asked 100 times: every ask is
/// answered, promptly. After the flood the daemon is healthy.
#[test]
fn mcp_answers_while_slowloris_connections_are_held_at_nofile_1024() {
    let env = daemon_with_nofile(1024);
    let port = env.port();
    let host = format!("127.0.0.1:{port}");
    let mut held = Vec::new();
    for i in 0..2100 {
        let Ok(mut s) = TcpStream::connect_timeout(&addr(port), Duration::from_secs(2)) else {
            continue;
        };
        let partial = if i < 2000 {
            format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\n")
        } else {
            format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{{\"jsonrpc\"")
        };
        let _ = s.write_all(partial.as_bytes());
        held.push(s);
    }
    let mut times = Vec::new();
    for _ in 0..100 {
        let (status, took) = mcp_ping(port);
        assert_eq!(
            status,
            Some(200),
            "an MCP ask was not answered after {took:?}\n{}",
            env.diagnostics()
        );
        times.push(took);
    }
    times.sort();
    let p99 = times[98];
    eprintln!(
        "held {} connections; MCP ping p50 {:?} p99 {p99:?} max {:?}",
        held.len(),
        times[49],
        times[99]
    );
    assert!(p99 < Duration::from_secs(1), "p99 {p99:?}");
    drop(held);
    assert_eq!(mcp_ping(port).0, Some(200));
    let out = env.run(&["status"]);
    assert!(out.status.success(), "{}", common::describe(&out));
}

/// Issue 12 item 2: a daemon that runs out of fds (nofile 256, 1 000 idle connections at once)
/// keeps accepting once they are gone; `tiny_http`'s accept loop ended on the first `EMFILE`.
#[test]
fn the_listener_survives_running_out_of_fds() {
    let env = daemon_with_nofile(256);
    let port = env.port();
    let held: Vec<TcpStream> = (0..1000)
        .filter_map(|_| TcpStream::connect_timeout(&addr(port), Duration::from_secs(1)).ok())
        .collect();
    // Some of them are answered 503 (refused or evicted); none may end the listener. Held
    // until the daemon has answered one: it has met its bound on them.
    for s in &held {
        s.set_nonblocking(true).unwrap();
    }
    let answered = common::poll(Duration::from_secs(30), || {
        held.iter().any(|s| !matches!(s.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock))
    });
    assert!(
        answered,
        "no held connection was answered\n{}",
        env.diagnostics()
    );
    drop(held);
    for _ in 0..20 {
        assert_eq!(mcp_ping(port).0, Some(200), "{}", env.diagnostics());
    }
    let out = env.run(&["status"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    // The sessions' side still has fds: a wake works.
    wake_bob(&env, "echo: still here");
}

/// Issue 12 item 2: a 256 MB header line is refused at the head limit; the daemon's peak
/// memory does not grow by it.
#[test]
fn a_256_mb_header_line_is_refused_without_the_memory() {
    let env = daemon();
    let port = env.port();
    let pid = pid(&env);
    assert_eq!(mcp_ping(port).0, Some(200));
    let peak_before = status_kib(pid, "VmHWM");
    let mut s = TcpStream::connect(addr(port)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let mut sent = 0usize;
    if s.write_all(b"GET /mcp HTTP/1.1\r\nX-Big: ").is_ok() {
        let chunk = vec![b'a'; 64 * 1024];
        while sent < 256 << 20 {
            match s.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let peak_after = status_kib(pid, "VmHWM");
    eprintln!(
        "sent {sent} bytes in {:?} before the daemon closed; peak RSS {peak_before} -> {peak_after} KiB; answer {:?}",
        started.elapsed(),
        String::from_utf8_lossy(&answer[..answer.len().min(40)])
    );
    assert!(sent < 256 << 20, "the daemon read all 256 MB");
    assert!(
        peak_after < peak_before + 32 * 1024,
        "peak RSS grew from {peak_before} to {peak_after} KiB"
    );
    assert_eq!(mcp_ping(port).0, Some(200));
}

/// Issue 12 item 2: a dead HTTP listener makes `status` say NOT healthy (exit 1) although the
/// control socket still answers. The listener is killed by a test hook that panics the
/// acceptor thread at every connection (it is restarted each time, and `status` says so).
#[test]
fn status_notices_a_dead_mcp_endpoint() {
    let mut env = TestEnv::new();
    env.set("IAPEER_TEST_HOOK", "http-accept-panic:any");
    env.start_daemon();
    let port = env.port();
    assert_eq!(mcp_ping(port).0, None, "the hook ends the acceptor");
    // The restart is recorded before its log line (`guard::supervise`), so status names it.
    env.wait_until(
        "the acceptor's panic and restart are logged",
        Duration::from_secs(10),
        |e| {
            let log = e.log("daemon");
            log.contains("http-accept-panic") && log.contains("restarting it (restart")
        },
    );
    let (stdout, _) = env.fails(&["status"], 1);
    assert!(
        stdout.contains(&format!(
            "daemon: NOT healthy (the MCP endpoint http://127.0.0.1:{port}/mcp does not answer"
        )) && stdout.contains("daemon: the http-accept thread panicked and was restarted"),
        "{stdout}"
    );
    let out = env.run(&["status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["healthy"], false, "{doc}");
    // The control socket itself still answers.
    assert_eq!(env.control(r#"{"op":"ping"}"#)["ok"], true);
}

/// After a panic injected with `hook` on the daemon's `thread` (at or after `since`): the
/// log names the thread and says it was restarted, and `status` (healthy, exit 0) says what
/// happened and when, in its text and in `--json`.
fn assert_restart_reported(env: &TestEnv, thread: &str, hook: &str, since: SystemTime) {
    let log = env.log("daemon");
    assert!(
        log.contains(&format!("thread '{thread}' panicked at"))
            && log.contains(&format!("the {thread} thread panicked at"))
            && log.contains("restarting it (restart 1)")
            && log.contains(hook),
        "{log}"
    );
    let stdout = env.ok(&["status"]);
    eprintln!("{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("daemon: the {thread} thread panicked")))
        .unwrap_or_else(|| panic!("no restart line for {thread}: {stdout}"));
    assert!(
        line.contains("was restarted 1 time, last at ") && line.contains(hook),
        "{line}"
    );
    let out = env.run(&["status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["healthy"], true, "{doc}");
    let r = &doc["daemon"]["restarts"][0];
    assert_eq!(r["thread"], thread, "{doc}");
    assert_eq!(r["restarts"], 1, "{doc}");
    let at = std::time::UNIX_EPOCH + Duration::from_millis(r["last_ms"].as_u64().unwrap());
    // `last_ms` is whole milliseconds.
    assert!(
        at + Duration::from_millis(1) > since && at <= SystemTime::now(),
        "{doc}"
    );
    assert!(r["last"].as_str().unwrap().contains(hook), "{doc}");
}

/// Issue 26 item 9: a panic of the HTTP acceptor thread (injected at its first connection)
/// does not leave the port dead: the thread's loop starts again, MCP answers, and the log and
/// `status` say what happened and when.
#[test]
fn a_panic_of_the_http_acceptor_restarts_it_and_status_says_so() {
    let mut env = TestEnv::new();
    env.set("IAPEER_TEST_HOOK", "http-accept-panic-once:any");
    env.start_daemon();
    let port = env.port();
    let since = SystemTime::now();
    assert_eq!(
        mcp_ping(port).0,
        None,
        "the first connection meets the panic"
    );
    env.wait_until("MCP answers again", Duration::from_secs(10), |_| {
        mcp_ping(port).0 == Some(200)
    });
    assert_restart_reported(&env, "http-accept", "http-accept-panic-once:any", since);
    assert!(env.stop_daemon().is_some_and(|s| s.success()));
}

/// Issue 26 item 9: a panic of the event-stream thread (injected when it takes its first
/// stream) ends that stream, not the streams: the next one is served, and the log and
/// `status` say what happened and when.
#[test]
fn a_panic_of_the_event_stream_thread_restarts_it_and_status_says_so() {
    let mut env = TestEnv::new();
    env.set("IAPEER_TEST_HOOK", "http-streams-panic-once:any");
    env.set("IAPEER_BEARER_TOKEN", BEARER);
    env.start_daemon();
    let port = env.port();
    let since = SystemTime::now();
    let first = fleet_get(port, "/fleet/v1/events");
    let got = read_to_end_within(&first, Duration::from_secs(10));
    assert!(
        got.as_ref()
            .map_or(true, |b| !b.windows(11).any(|w| w == b": connected")),
        "the first stream meets the panic: {got:?}"
    );
    // The thread is back: a new stream gets its head and `: connected`, then live events.
    let mut s = connected_stream(port);
    wake_bob(&env, "echo: hi");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("event: wake") {
        let n = s.read(&mut buf).expect("a live event on the new stream");
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert_restart_reported(&env, "http-streams", "http-streams-panic-once:any", since);
    assert!(env.stop_daemon().is_some_and(|s| s.success()));
}

/// Open `GET /fleet/v1/events` with the fleet token (`auth`, its header line); the status of
/// its answer and the stream (left open).
fn open_event_stream(port: u16, auth: &str) -> (Option<u16>, TcpStream) {
    let mut s = TcpStream::connect(addr(port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(
        format!("GET /fleet/v1/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut head = [0u8; 12];
    let status = s
        .read_exact(&mut head)
        .ok()
        .and_then(|()| std::str::from_utf8(&head[9..12]).ok()?.parse().ok());
    (status, s)
}

/// `n` MCP clients that sent part of a head (its request line and `Host`) and stopped.
fn slow_mcp_clients(port: u16, n: usize) -> Vec<TcpStream> {
    let host = format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(addr(port)).unwrap();
            s.write_all(host.as_bytes()).unwrap();
            s
        })
        .collect()
}

/// True once the server closed `s` (what it sent before is read and dropped).
fn closed(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 4096];
    let closed = loop {
        match (&*s).read(&mut b) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    s.set_nonblocking(false).unwrap();
    closed
}

/// Fleet event streams have their own budget (spec 10 §1, issue 10 item 1, issue 26 item 3):
/// at nofile 256 the daemon holds 64 connections and, on top, 32 streams. With 32 streams
/// open a 33rd is served and the oldest is ended cleanly; 63 slow MCP clients are all still
/// held (no eviction: streams do not take their places) and a prompt MCP call is answered.
#[test]
fn event_streams_do_not_take_the_places_of_mcp_requests() {
    let env = daemon_with_nofile(256);
    let port = env.port();
    let auth = env.fleet_auth();
    let streams: Vec<TcpStream> = (0..32)
        .map(|i| {
            let (status, s) = open_event_stream(port, &auth);
            assert_eq!(status, Some(200), "stream {i}\n{}", env.diagnostics());
            s
        })
        .collect();
    // Over the stream budget the newcomer is served and the oldest stream is ended cleanly
    // (issue 26 item 3): its client reads the end of the stream, not a reset.
    let (status, newest) = open_event_stream(port, &auth);
    assert_eq!(
        status,
        Some(200),
        "over the stream budget the newcomer is served"
    );
    let end = read_to_end_within(&streams[0], Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("the oldest stream did not end cleanly: {e}"));
    assert!(
        String::from_utf8_lossy(&end).ends_with("\n\n"),
        "the oldest stream ends on a frame boundary: {:?}",
        String::from_utf8_lossy(&end)
    );
    let streams: Vec<TcpStream> = streams.into_iter().skip(1).chain([newest]).collect();
    let slow = slow_mcp_clients(port, 63);
    let (status, took) = mcp_ping(port);
    assert_eq!(status, Some(200), "{}", env.diagnostics());
    assert!(took < Duration::from_secs(2), "{took:?}");
    let evicted = slow.iter().filter(|s| closed(s)).count();
    assert_eq!(evicted, 0, "no slow client was evicted to make room");
    assert!(!streams.iter().any(closed), "every stream is still open");
}

/// How many connections wait in the backlog of the listening socket on 127.0.0.1:`port`
/// (`/proc/net/tcp`: a listening socket's `rx_queue` is its accept backlog).
fn backlog(port: u16) -> usize {
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"0A"))
        .and_then(|f| usize::from_str_radix(f[4].split(':').nth(1)?, 16).ok())
        .expect("the daemon's listening socket in /proc/net/tcp")
}

/// The connection that fills the table evicts nobody: at nofile 256 (64 connections) with 63
/// slow MCP clients held, a 64th taken off the backlog before its request arrived is served
/// and every slow client is still held. The accept loop comes round after each accept; it used
/// to find the table full there and evict the oldest slow client (503) for a newcomer that
/// was not there (`event_streams_do_not_take_the_places_of_mcp_requests` failed so under
/// load, whenever its ping was accepted before its request was sent).
#[test]
fn the_connection_that_fills_the_table_evicts_nobody() {
    let env = daemon_with_nofile(256);
    let port = env.port();
    let slow = slow_mcp_clients(port, 63);
    env.wait_until(
        "the slow clients are accepted",
        Duration::from_secs(10),
        |_| backlog(port) == 0,
    );
    // Older than EVICT_AFTER, a slow client may be evicted for a newcomer whether or not its
    // part of a head was read yet: the case is set.
    std::thread::sleep(Duration::from_millis(1100));
    let mut last = TcpStream::connect(addr(port)).unwrap();
    env.wait_until(
        "the 64th connection is accepted",
        Duration::from_secs(10),
        |_| backlog(port) == 0,
    );
    last.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    last.write_all(&ping_request(port)).unwrap();
    let mut answer = Vec::new();
    let _ = last.read_to_end(&mut answer);
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "the 64th connection is served: {:?}\n{}",
        String::from_utf8_lossy(&answer),
        env.diagnostics()
    );
    let evicted = slow.iter().filter(|s| closed(s)).count();
    assert_eq!(
        evicted, 0,
        "no slow client was evicted for the one that filled the table"
    );
}

/// Everything `s` sends until it closes, within `limit`; an error (a reset, the time running
/// out) otherwise.
fn read_to_end_within(s: &TcpStream, limit: Duration) -> std::io::Result<Vec<u8>> {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "still open after {limit:?}; got {:?}",
                    String::from_utf8_lossy(&got)
                ),
            ));
        }
        s.set_read_timeout(Some(left)).unwrap();
        match (&*s).read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The bearer the budget tests run with (so their fleet requests pass any default gate).
const BEARER: &str = "budget-test-bearer";

/// Send `GET <path>` to the fleet API with the test bearer and leave the connection open.
fn fleet_get(port: u16, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr(port)).unwrap();
    s.write_all(
        format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {BEARER}\r\n\r\n"
        )
        .as_bytes(),
    )
    .unwrap();
    s
}

/// Read what `s` has without waiting; true once the server has closed it.
fn take_available(s: &TcpStream, into: &mut Vec<u8>) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 4096];
    let closed = loop {
        match (&*s).read(&mut b) {
            Ok(0) => break true,
            Ok(n) => into.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break true,
        }
    };
    s.set_nonblocking(false).unwrap();
    closed
}

/// Issue 26 item 3: fleet long polls have their own budget (an eighth of the fd limit: 128 at
/// nofile 1024). 600 held `GET /fleet/v1/approvals?wait=300` leave MCP and the control
/// socket answering; over the budget the oldest long polls get their normal answer (200,
/// the pending list) early, the newest 128 are still held.
#[test]
fn held_long_polls_leave_mcp_answering_at_nofile_1024() {
    const POLLS: usize = 600;
    const BUDGET: usize = 1024 / 8;
    let env = daemon_with_nofile_and(
        1024,
        &[
            ("IAPEER_BEARER_TOKEN", BEARER),
            ("IAPEER_MCP_AUTH", "header"),
        ],
    );
    let port = env.port();
    // bob is live, so the MCP call below is a plain delivery.
    wake_bob(&env, "echo: up");
    let path = "/fleet/v1/approvals?wait=300&since=0";
    let started = Instant::now();
    let mut polls: Vec<TcpStream> = Vec::new();
    let mut got: Vec<Vec<u8>> = vec![Vec::new(); POLLS];
    let mut done = vec![false; POLLS];
    // In batches of 64, each taken by the daemon before the next is sent: 600 connections in
    // one burst are over the connection limit (256 at nofile 1024) before their heads are
    // read, and the newest would be refused 503 by that limit, not by the long polls.
    while polls.len() < POLLS {
        let batch = 64.min(POLLS - polls.len());
        polls.extend((0..batch).map(|_| fleet_get(port, path)));
        let over = polls.len().saturating_sub(BUDGET);
        env.wait_until(
            "the oldest long polls over the budget are answered",
            Duration::from_secs(30),
            |_| {
                for (i, s) in polls.iter().enumerate() {
                    if !done[i] {
                        done[i] = take_available(s, &mut got[i]);
                    }
                }
                done.iter().filter(|d| **d).count() >= over
            },
        );
    }
    let answered: Vec<usize> = (0..POLLS).filter(|i| done[*i]).collect();
    eprintln!(
        "{POLLS} long polls: {} answered early within {:?}",
        answered.len(),
        started.elapsed()
    );
    assert_eq!(
        answered,
        (0..POLLS - BUDGET).collect::<Vec<_>>(),
        "the oldest are answered, the newest {BUDGET} held"
    );
    for i in answered {
        let text = String::from_utf8_lossy(&got[i]);
        assert!(
            text.starts_with("HTTP/1.1 200 ") && text.contains("\"approvals\":[]"),
            "long poll {i} got its normal answer: {text}"
        );
    }
    // MCP: a tools/call is delivered, promptly.
    let t = Instant::now();
    let auth = format!("Bearer {BEARER}");
    let result = crate::mcp::call(
        port,
        &[
            ("X-IAPeer-Identity", "echo-alice"),
            ("Authorization", &auth),
        ],
        "bob",
        "echo: past the long polls",
    );
    let took = t.elapsed();
    eprintln!("MCP tools/call beside {BUDGET} held long polls: {took:?}");
    assert_ne!(result["isError"], true, "{result}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(env.control(r#"{"op":"ping"}"#)["ok"], true);
    let out = env.run(&["status"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    // The held ones are still waiting.
    let still = (POLLS - BUDGET..POLLS)
        .filter(|i| !take_available(&polls[*i], &mut got[*i]))
        .count();
    assert_eq!(still, BUDGET, "the newest long polls are still held");
}

/// Open `GET /fleet/v1/events` with the test bearer and read until `: connected`.
fn connected_stream(port: u16) -> TcpStream {
    let s = fleet_get(port, "/fleet/v1/events");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(13).any(|w| w == b": connected\n\n") {
        let n = (&s).read(&mut buf).expect("the stream's head");
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    s
}

/// Issue 26 item 3: an event stream opened and closed while nothing is published gives back
/// what it held at once (each used to keep its 1 024-slot bus queue, ~16 KB, until the next
/// event: 60 000 took the daemon from 14 MB to 980 MB). `IAPEER_TEST_STREAMS_N` sets the
/// count (default 4 000; the report's figure was measured with 20 000); the daemon's
/// resident memory grows by less than 30 MB, and its fds come back.
#[test]
fn opened_and_closed_event_streams_give_back_what_they_held() {
    let n: usize = std::env::var("IAPEER_TEST_STREAMS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let mut env = TestEnv::new();
    env.set("IAPEER_BEARER_TOKEN", BEARER);
    env.start_daemon();
    let port = env.port();
    let pid = pid(&env);
    // Warm up (thread stacks, maps at their working size), then take the baseline.
    for _ in 0..200 {
        drop(connected_stream(port));
    }
    let (fds, _) = settled(pid);
    let before = settled_by(|| status_kib(pid, "VmRSS"));
    let started = Instant::now();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..n / 4 {
                    drop(connected_stream(port));
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let took = started.elapsed();
    env.wait_until(
        "the closed streams' fds are let go",
        Duration::from_secs(10),
        |_| count(pid, "fd") <= fds,
    );
    let after = settled_by(|| status_kib(pid, "VmRSS"));
    eprintln!(
        "{} streams opened and closed in {took:?}: VmRSS {before} -> {after} KiB ({:+} KiB)",
        n / 4 * 4,
        after as i64 - before as i64
    );
    assert!(
        after < before + 30 * 1024,
        "VmRSS grew from {before} to {after} KiB"
    );
    drop(connected_stream(port));
}

/// A port another program holds: the daemon exits at once with the error and says how to
/// pick another port (`IAPEER_PORT`, 0 for any free one), and leaves no `router.json`.
#[test]
fn a_port_in_use_is_refused_with_the_way_out() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.root).unwrap();
    let out = env
        .cmd(&["daemon"])
        .env("IAPEER_PORT", &port)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run the daemon");
    assert!(
        !out.status.success(),
        "the daemon must not run without its port"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && err.contains("set IAPEER_PORT to a free port, or to 0 for any free one"),
        "{err}"
    );
    assert!(
        !env.router_json().exists(),
        "no router.json for a daemon that is not there"
    );
    assert!(!env.socket().exists(), "no control socket either");
    // And `status` says plainly that no daemon runs (exit 1).
    let (stdout, _) = env.fails(&["status"], 1);
    assert!(
        stdout.contains("daemon: not running (nothing answers on its socket) — start it with:"),
        "{stdout}"
    );
}

/// What another local user runs in the slowloris tests: for `$2` seconds, connections to
/// port `$1` that each send a partial head and are held, the oldest closed beyond `$3`;
/// prints how many it opened.
const SLOWLORIS: &str = r#"
import collections, socket, sys, time
port, until, keep = int(sys.argv[1]), time.time() + float(sys.argv[2]), int(sys.argv[3])
head = ("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % port).encode()
held, opened = collections.deque(), 0
while time.time() < until:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=1)
        s.sendall(head)
        held.append(s)
        opened += 1
    except OSError:
        pass
    while len(held) > keep:
        held.popleft().close()
print(opened)
"#;

/// Issue 26 follow-up (FAIL B): another local user, with no token, holds ~1 000 slowloris
/// connections (4 processes, the oldest closed as they go) against a daemon at nofile 1024
/// while the owner's client asks MCP from 4 threads: every ask is answered 200 (before, the
/// other user's partial heads counted against the owner's connection limit and about 1 in 100
/// of the owner's asks was evicted with 503). The other user's connections are answered 401
/// before anything of them is read, and the daemon says so in its log.
#[test]
fn another_users_slowloris_takes_no_place_of_the_owners_mcp_calls() {
    let Some(other) = common::other_user::OtherUser::create() else {
        return;
    };
    let env = daemon_with_nofile(1024);
    let port = env.port();
    const SECONDS: u64 = 12;
    let attackers: Vec<_> = (0..4)
        .map(|_| {
            other
                .command("python3")
                .args(["-c", SLOWLORIS, &port.to_string(), &SECONDS.to_string()])
                .arg("250")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("python3 as the other user")
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(SECONDS);
    let askers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                while Instant::now() < until {
                    answers.push(mcp_ping(port));
                }
                answers
            })
        })
        .collect();
    let answers: Vec<(Option<u16>, Duration)> =
        askers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let opened: u64 = attackers
        .into_iter()
        .map(|a| {
            let out = a.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", common::describe(&out));
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    let refused: Vec<_> = answers.iter().filter(|(s, _)| *s != Some(200)).collect();
    let slowest = answers.iter().map(|(_, t)| *t).max().unwrap();
    eprintln!(
        "uid {} opened {opened} slowloris connections in {SECONDS} s; the owner's {} MCP asks: \
         {} not answered 200, the slowest in {slowest:?}",
        other.uid,
        answers.len(),
        refused.len()
    );
    assert!(opened >= 1000, "the attack was real: {opened} connections");
    assert!(answers.len() >= 100, "{} asks", answers.len());
    assert!(refused.is_empty(), "{refused:?}\n{}", env.diagnostics());
    let log = std::fs::read_to_string(env.dir.path().join("daemon-stderr.log")).unwrap();
    assert!(
        log.contains(&format!(
            "unread: its client socket belongs to uid {}, and this daemon serves only uid",
            other.uid
        )),
        "{log}"
    );
}

/// Issue 26 follow-up (FAIL B): the owner's 600 fleet long polls opened at once at nofile
/// 1024 (limit 256 connections, 128 held polls) while MCP is asked: none is answered 503
/// (before, the polls whose heads had not been read yet counted against the connection limit
/// and 41–132 of them were evicted with 503). Each is held or answered early (200), and
/// every MCP ask is answered 200.
#[test]
fn the_owners_600_long_polls_at_nofile_1024_get_no_503() {
    const POLLS: usize = 600;
    let env = daemon_with_nofile(1024);
    let port = env.port();
    let auth = env.fleet_auth();
    let request = format!(
        "GET /fleet/v1/approvals?wait=300 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n\r\n"
    );
    let start = std::sync::Arc::new(std::sync::Barrier::new(POLLS));
    let polls: Vec<_> = (0..POLLS)
        .map(|_| {
            let (request, start) = (request.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                // None: still held when the test stops waiting (15 s).
                exchange(port, request.as_bytes(), Duration::from_secs(15))
            })
        })
        .collect();
    let pings: Vec<_> = (0..50).map(|_| mcp_ping(port)).collect();
    let statuses: Vec<Option<u16>> = polls.into_iter().map(|t| t.join().unwrap()).collect();
    let answered = statuses.iter().filter(|s| **s == Some(200)).count();
    let held = statuses.iter().filter(|s| s.is_none()).count();
    let other: Vec<_> = statuses
        .iter()
        .filter(|s| !matches!(s, None | Some(200)))
        .collect();
    eprintln!(
        "{POLLS} long polls at nofile 1024: {answered} answered early (200), {held} held, \
         others: {other:?}"
    );
    assert!(other.is_empty(), "{other:?}\n{}", env.diagnostics());
    assert_eq!(answered + held, POLLS);
    assert!(held <= 128, "the long-poll budget: {held} held");
    for (status, took) in pings {
        assert_eq!(status, Some(200), "an MCP ask after {took:?}");
    }
}

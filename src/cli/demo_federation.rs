//! `iapeer demo --federation` (issue 28 item 9): two hosts of one team on this machine. A
//! private `redis-server` on a free loopback port (a random password, nothing saved, its
//! files in the demo's root), two daemons with roots of their own joined to it as hosts `a`
//! (you, the operator, and alice) and `b` (bob), and messages crossing both ways: you → bob@b,
//! bob's echo back to you@a, and b's bob → alice@a. Each delivery is printed on the host that
//! logged it. Without a `redis-server` it says how to install one and starts nothing.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::demo::{spawn_daemon, Demo, Pids};
use super::error::fail;
use super::{CliError, CliResult};
use crate::paths::Paths;
use crate::runtime_table::{ECHO, HUMAN};

/// Where a `redis-server` (or Valkey's `valkey-server`) is looked for after `PATH`.
const PLACES: &[&str] = &[
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
];

/// Longest the demo waits for one step (a roster crosses with the next heartbeat, 5 s).
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// The `redis-server` (else `valkey-server`) this machine has: on `PATH`, else in [`PLACES`].
///
/// Errors: none is installed; the message says how to install one.
pub fn redis_program() -> Result<PathBuf, CliError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(PLACES.iter().map(PathBuf::from))
        .collect();
    redis_program_in(&dirs)
}

/// [`redis_program`] looking in `dirs` only.
fn redis_program_in(dirs: &[PathBuf]) -> Result<PathBuf, CliError> {
    ["redis-server", "valkey-server"]
        .iter()
        .flat_map(|name| dirs.iter().map(move |d| d.join(name)))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            fail(
                "demo --federation needs a redis-server (or valkey-server) on this machine and \
                 none is installed: install one (Debian/Ubuntu: sudo apt-get install \
                 redis-server; Fedora: sudo dnf install valkey; macOS: brew install redis), \
                 then run iapeer demo --federation again — it starts its own private server \
                 on a loopback port and leaves the system's alone",
            )
        })
}

/// The private server: ended (SIGTERM, then SIGKILL) when dropped.
struct Redis {
    child: Child,
    url: String,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `program` on a free loopback port with a random password, nothing saved, its
/// files in `dir`, and wait until it answers.
fn start_redis(program: &Path, dir: &Path, pids: &Pids) -> Result<Redis, CliError> {
    crate::fsutil::ensure_dir(dir).map_err(fail)?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| fail(format!("no free loopback port for redis-server: {e}")))?;
    let password = crate::fsutil::random_hex(16);
    let child = pids
        .spawn(
            Command::new(program)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--requirepass", &password])
                .arg("--dir")
                .arg(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
        .map_err(|e| fail(format!("cannot start {}: {e}", program.display())))?;
    let redis = Redis {
        child,
        url: format!("redis://:{password}@127.0.0.1:{port}"),
    };
    let start = Instant::now();
    loop {
        let joined = crate::federation::Joined {
            url: redis.url.clone(),
            ..Default::default()
        };
        let answers = crate::federation::link::connect(&joined)
            .map_err(|e| e.to_string())
            .and_then(|mut c| {
                redis::cmd("PING")
                    .query::<String>(&mut c)
                    .map_err(|e| e.to_string())
            });
        match answers {
            Ok(_) => break,
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => {
                return Err(fail(format!(
                    "the demo's redis-server does not answer: {e}"
                )))
            }
        }
    }
    println!(
        "redis-server up on 127.0.0.1:{port} (private to this demo: {})",
        program.display()
    );
    Ok(redis)
}

/// Wait until `root`'s link lists the peer `address` (`name@host`) of another host.
fn wait_seen(root: &Path, address: &str) -> Result<(), CliError> {
    let paths = Paths::at(root);
    let start = Instant::now();
    while start.elapsed() < STEP_TIMEOUT {
        let rows = crate::roster::remote::remote_rows(&paths);
        if rows.iter().any(|r| r.address == address && r.host_online) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(fail(format!(
        "{address} did not show up within {} s; see {}",
        STEP_TIMEOUT.as_secs(),
        paths.daemon_log().display()
    )))
}

/// `iapeer send <to> --from <from> --message <message>` on the `sender` host, then wait until
/// the sender and the other host have each logged `deliveries` successful deliveries in all
/// (the message and its echo back count on both).
fn send_across(
    sender: &mut Demo,
    other: &mut Demo,
    from: &str,
    to: &str,
    message: &str,
    deliveries: usize,
) -> Result<(), CliError> {
    sender.run(&["send", to, "--from", from, "--message", message])?;
    sender.wait_deliveries(deliveries)?;
    other.wait_deliveries(deliveries)
}

/// Run the federation demo in `root` (the caller made it, handles Ctrl-C and removes it).
pub(super) fn run(
    program: &Path,
    exe: &Path,
    root: &Path,
    pids: &Pids,
    started: Instant,
) -> CliResult {
    println!(
        "iapeer demo --federation — two hosts of one team on this machine, in {}",
        root.display()
    );
    println!("host a: you (the operator, an inbox) and alice; host b: bob — alice and bob on");
    println!("the built-in echo stand-in agent. The hosts meet through a private redis-server.");
    let redis = start_redis(program, &root.join("redis"), pids)?;
    let mut hosts = Vec::new();
    for host in ["a", "b"] {
        let dir = root.join(host);
        crate::fsutil::ensure_dir(&dir).map_err(fail)?;
        let daemon = spawn_daemon(exe, &dir, pids)?;
        println!("host {host}: daemon up (pid {})", daemon.id());
        hosts.push(Demo::new(&dir, exe, daemon, &format!("[host {host}] ")));
    }
    let (a, b) = match hosts.as_mut_slice() {
        [a, b] => (a, b),
        _ => return Err(fail("internal error: two hosts expected")),
    };
    const ECHOES: &str = "Demo agent: echoes every message back to its sender.";
    a.run(&[
        "create",
        "you",
        "--runtime",
        HUMAN.name,
        "--description",
        "The operator of this demo.",
    ])?;
    a.run(&[
        "create",
        "alice",
        "--runtime",
        ECHO.name,
        "--description",
        ECHOES,
    ])?;
    b.run(&[
        "create",
        "bob",
        "--runtime",
        ECHO.name,
        "--description",
        ECHOES,
    ])?;
    // The URL carries the password: the commands are shown with it masked.
    let shown = crate::federation::masked(&redis.url);
    for (demo, host) in [(&mut *a, "a"), (&mut *b, "b")] {
        let join = |url| ["federation", "join", url, "--host-name", host];
        demo.run_shown(&join(&redis.url), &join(&shown))?;
    }
    println!("\n# each host publishes its peers with its heartbeat; a lists b's as name@host.");
    wait_seen(a.root(), "bob@b")?;
    wait_seen(b.root(), "alice@a")?;
    a.run(&["list"])?;

    println!("\n# a → b: you write to bob on host b; his echo comes back across to you@a.");
    send_across(a, b, "human-you", "bob@b", "Hello Bob, this is host a.", 2)?;
    println!("\n# b → a: bob writes to alice on host a; her echo goes back across to bob@b.");
    send_across(
        b,
        a,
        "echo-bob",
        "alice@a",
        "Hi Alice, greetings from host b.",
        4,
    )?;
    for demo in [&mut *a, &mut *b] {
        demo.stop_daemon();
        demo.pump_logs();
    }
    drop(redis);
    println!(
        "\nall stopped after {:.1} s (both daemons and the private redis-server)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_redis_server_it_says_how_to_install_one() {
        let empty = tempfile::tempdir().unwrap();
        let e = redis_program_in(&[empty.path().to_path_buf()]).unwrap_err();
        let text = format!("{e:?}");
        assert!(text.contains("apt-get install redis-server"), "{text}");
        assert!(text.contains("brew install redis"), "{text}");
        let valkey = empty.path().join("valkey-server");
        std::fs::write(&valkey, "").unwrap();
        let found = redis_program_in(&[empty.path().to_path_buf()]).unwrap();
        assert_eq!(found, valkey);
    }
}

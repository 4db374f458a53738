//! A private `redis-server` for the federation tests (issue 28 item 7): on 127.0.0.1 at a port
//! picked free, no persistence (or append-only, [`RedisServer::start_append_only`]), its files
//! in a temp folder, ended by its pid when dropped. Or on a Unix socket only
//! ([`RedisServer::start_on_socket`]), for hosts in network namespaces of their own.
//! `scripts/test.sh` installs `redis-server` (Debian's package) when it is missing.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One running (or stopped) private server.
pub struct RedisServer {
    /// Its TCP port on 127.0.0.1; 0 when it listens on a Unix socket only.
    pub port: u16,
    /// Its Unix socket, when it listens on one (and no TCP port).
    pub socket: Option<PathBuf>,
    /// The `requirepass` it was started with.
    pub password: String,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Started with `--appendonly yes --appendfsync always`.
    append_only: bool,
}

pub fn program() -> PathBuf {
    for dir in [
        "/usr/bin",
        "/usr/local/bin",
        "/usr/sbin",
        "/opt/homebrew/bin",
    ] {
        let p = PathBuf::from(dir).join("redis-server");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "redis-server is not installed: scripts/test.sh installs it (apt-get install redis-server)"
    );
}

/// A port nothing listens on now (the kernel's pick for a listener, released at once).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl RedisServer {
    /// Start a server requiring `password`, and wait until it answers PING.
    pub fn start(password: &str) -> RedisServer {
        RedisServer::start_with(password, false)
    }

    /// [`RedisServer::start`] with append-only persistence, each write on disk before it is
    /// answered (`--appendonly yes --appendfsync always`): a restart, even after SIGKILL,
    /// keeps every acknowledged write.
    pub fn start_append_only(password: &str) -> RedisServer {
        RedisServer::start_with(password, true)
    }

    /// [`RedisServer::start`] listening on a Unix socket in its folder only (`--port 0
    /// --unixsocket <dir>/redis.sock --unixsocketperm 700`): reached by its path from any
    /// network namespace, by no TCP connection.
    pub fn start_on_socket(password: &str) -> RedisServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = RedisServer {
            port: 0,
            socket: Some(dir.path().join("redis.sock")),
            password: password.to_string(),
            dir,
            child: None,
            append_only: false,
        };
        s.resume();
        s
    }

    fn start_with(password: &str, append_only: bool) -> RedisServer {
        let mut s = RedisServer {
            port: free_port(),
            socket: None,
            password: password.to_string(),
            dir: tempfile::tempdir().expect("tempdir"),
            child: None,
            append_only,
        };
        s.resume();
        s
    }

    /// A connection of the test's own to this server (to read or write keys as a host would).
    pub fn connection(&self) -> ::redis::Connection {
        ::redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("a connection to the test's redis-server")
    }

    /// The URL with the password.
    pub fn url(&self) -> String {
        match &self.socket {
            Some(path) => format!("unix://{}?pass={}", path.display(), self.password),
            None => format!("redis://:{}@127.0.0.1:{}", self.password, self.port),
        }
    }

    /// Start it again on the same port (empty unless append-only: then with what it had).
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "already running");
        let persistence: &[&str] = if self.append_only {
            &["--appendonly", "yes", "--appendfsync", "always"]
        } else {
            &["--appendonly", "no"]
        };
        let mut cmd = Command::new(program());
        match &self.socket {
            Some(path) => cmd
                .args(["--port", "0", "--unixsocketperm", "700", "--unixsocket"])
                .arg(path),
            None => cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"]),
        };
        let child = cmd
            .args(["--save", ""])
            .args(persistence)
            .args(["--requirepass", &self.password])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        let answered = super::poll(Duration::from_secs(10), || self.answers());
        assert!(
            answered,
            "redis-server on port {} (socket {:?}) did not answer",
            self.port, self.socket
        );
    }

    /// Stop it (SIGTERM by pid, then wait; SIGKILL after 5 s).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        super::signal(child.id(), nix::sys::signal::Signal::SIGTERM);
        if super::exit_within(&mut child, Duration::from_secs(5)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kill it outright (SIGKILL by pid), as a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// True when it answers `AUTH` + `PING` with `+OK`, `+PONG`.
    fn answers(&self) -> bool {
        match &self.socket {
            Some(path) => match UnixStream::connect(path) {
                Ok(s) => {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                    self.pongs(s)
                }
                Err(_) => false,
            },
            None => match TcpStream::connect(("127.0.0.1", self.port)) {
                Ok(s) => {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                    self.pongs(s)
                }
                Err(_) => false,
            },
        }
    }

    /// Whether `s` answers `AUTH` + `PING` with `+OK`, `+PONG`.
    fn pongs<S: Read + Write>(&self, mut s: S) -> bool {
        let pw = &self.password;
        let req = format!(
            "*2\r\n$4\r\nAUTH\r\n${}\r\n{pw}\r\n*1\r\n$4\r\nPING\r\n",
            pw.len()
        );
        if s.write_all(req.as_bytes()).is_err() {
            return false;
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while !got.ends_with(b"+PONG\r\n") {
            match s.read(&mut buf) {
                Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                _ => return false,
            }
        }
        true
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

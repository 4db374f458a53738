//! The CLI end of the control socket (spec 02 §2, spec 07 "General rules"): connect, send one
//! request line, show progress lines as a one-line indicator on a TTY, return the final reply
//! as its type from [`crate::protocol`].

use std::io::{self, BufRead, BufReader, IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::paths::Paths;
use crate::protocol::{call, Answer, Call, Line, Progress, Request};

/// Why a request did not produce a final answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answers on the socket.
    #[error(
        "the daemon is not running (no answer on {0}) — start it with: iapeer daemon (foreground) or iapeer onboard (as a service)"
    )]
    NotRunning(PathBuf),
    /// The connection broke before the request was written whole, or the answer was not
    /// JSON of the expected shape.
    #[error("lost the connection to the daemon: {0}")]
    Broken(String),
    /// The request was written whole and the connection broke before its final answer: the
    /// daemon may have acted on it (a send may have arrived).
    #[error("lost the connection to the daemon: {0}")]
    Unanswered(String),
    /// The daemon did not understand the request (`bad-request`, `unknown-op`) and runs
    /// another version of iapeer than this CLI.
    #[error("{0}")]
    VersionMismatch(VersionMismatch),
}

/// The daemon runs iapeer `daemon`, this CLI is `cli` (both `CARGO_PKG_VERSION` strings, as
/// [`crate::protocol::Pong::version`] carries them). Its `Display` says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the daemon runs iapeer {daemon}, this CLI is iapeer {cli}: restart the daemon on this build \
     (iapeer shutdown, then iapeer daemon --detach; a service started by iapeer onboard: \
     iapeer update <this binary> installs it and restarts the service)"
)]
pub struct VersionMismatch {
    /// The daemon's version.
    pub daemon: String,
    /// This CLI's version.
    pub cli: String,
}

impl VersionMismatch {
    /// The mismatch between the daemon's `daemon` version and this CLI's, if they differ.
    pub fn of(daemon: &str) -> Option<VersionMismatch> {
        let cli = env!("CARGO_PKG_VERSION");
        (daemon != cli).then(|| VersionMismatch {
            daemon: daemon.to_string(),
            cli: cli.to_string(),
        })
    }
}

/// A connection to the daemon.
pub struct Client {
    reader: BufReader<UnixStream>,
    /// The daemon runs another version than this CLI (learned at connect).
    mismatch: Option<VersionMismatch>,
}

impl Client {
    /// Connect to the control socket of `paths` and compare the daemon's version with this
    /// CLI's (a `ping`, after shpool's version header): on a mismatch a warning on stderr says
    /// what to do, and a request the daemon does not understand fails with
    /// [`ClientError::VersionMismatch`] instead of its bare `bad-request`.
    ///
    /// Errors: [`ClientError::NotRunning`] when nothing listens there.
    pub fn connect(paths: &Paths) -> Result<Client, ClientError> {
        let mut c = Client::connect_unchecked(paths)?;
        let pong = c.request(&call::Ping {}, |_| {});
        c.mismatch = match pong {
            Ok(Answer::Ok(p)) => VersionMismatch::of(&p.version),
            // Refused (the daemon is shutting down) or unreadable: the request itself tells.
            _ => None,
        };
        if let Some(m) = &c.mismatch {
            eprintln!("warning: {m}");
        }
        Ok(c)
    }

    /// Connect to the control socket of `paths` without comparing versions: for the waits
    /// of `update` and `rollback`, whose CLI is the build before (or after) the daemon's.
    ///
    /// Errors: [`ClientError::NotRunning`] when nothing listens there.
    pub fn connect_unchecked(paths: &Paths) -> Result<Client, ClientError> {
        let sock = paths.socket();
        let stream = UnixStream::connect(&sock).map_err(|_| ClientError::NotRunning(sock))?;
        Ok(Client {
            reader: BufReader::new(stream),
            mismatch: None,
        })
    }

    /// `answer` (or the failure to read it), unless the daemon did not understand the request
    /// and runs another version: then the mismatch.
    fn checked<T>(&self, answer: Result<Answer<T>, ClientError>) -> Result<Answer<T>, ClientError> {
        // An answer it could not read is left as it is: the daemon understood the request
        // and may have acted on it (a send may have arrived).
        let not_understood = matches!(
            &answer,
            Ok(Answer::Failed(f)) if matches!(
                f.code,
                crate::protocol::Code::BadRequest | crate::protocol::Code::UnknownOp
            )
        );
        match &self.mismatch {
            Some(m) if not_understood => Err(ClientError::VersionMismatch(m.clone())),
            _ => answer,
        }
    }

    /// Send `req` and wait for the final reply, read as its op's success type
    /// ([`Call::Reply`], e.g. [`crate::protocol::StopReply`] for `stop`) or a failure. `progress` sees every
    /// progress line, and `None` whenever a read timeout set by the caller passes.
    ///
    /// Errors: [`ClientError::Broken`] when the request could not be written whole or a line
    /// does not parse; [`ClientError::Unanswered`] when the connection breaks after the
    /// request was written.
    pub fn request<C: Call>(
        &mut self,
        req: &C,
        progress: impl FnMut(Option<&Progress>),
    ) -> Result<Answer<C::Reply>, ClientError> {
        let answer = self.exchange(&req.clone().into(), progress);
        self.checked(answer)
    }

    /// One request and its final answer, as read ([`Client::request`]).
    fn exchange<T: DeserializeOwned>(
        &mut self,
        req: &Request,
        mut progress: impl FnMut(Option<&Progress>),
    ) -> Result<Answer<T>, ClientError> {
        let unwritten = |e: io::Error| ClientError::Broken(e.to_string());
        let broken = |e: io::Error| ClientError::Unanswered(e.to_string());
        let mut line = serde_json::to_string(req)
            .map_err(|e| ClientError::Broken(format!("cannot encode the request: {e}")))?;
        line.push('\n');
        self.reader
            .get_mut()
            .write_all(line.as_bytes())
            .map_err(unwritten)?;
        loop {
            let mut buf = String::new();
            match self.reader.read_line(&mut buf) {
                Ok(0) => {
                    return Err(ClientError::Unanswered(
                        "the daemon closed the connection".into(),
                    ))
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    progress(None);
                    // read_line may have consumed a partial line into buf; keep reading it.
                    if !buf.is_empty() {
                        let mut rest = String::new();
                        self.reader
                            .get_mut()
                            .set_read_timeout(None)
                            .map_err(broken)?;
                        self.reader.read_line(&mut rest).map_err(broken)?;
                        buf.push_str(&rest);
                    } else {
                        continue;
                    }
                }
                Err(e) => return Err(broken(e)),
            }
            match Line::<T>::parse(buf.trim_end())
                .map_err(|e| ClientError::Unanswered(format!("bad answer: {e}")))?
            {
                Line::Progress(p) => progress(Some(&p)),
                Line::Final(answer) => return Ok(answer),
            }
        }
    }

    /// Like [`Client::request`], showing progress as a one-line indicator on stderr when it
    /// is a terminal (never otherwise).
    pub fn request_with_indicator<C: Call>(
        &mut self,
        req: &C,
        what: &str,
    ) -> Result<Answer<C::Reply>, ClientError> {
        if !io::stderr().is_terminal() {
            return self.request(req, |_| {});
        }
        let _ = self
            .reader
            .get_mut()
            .set_read_timeout(Some(Duration::from_millis(250)));
        let mut ind = Indicator::new(what);
        let result = self.request(req, |v| ind.update(v));
        ind.clear();
        // The timeout only paces the indicator: the connection may go on as an attach
        // stream, whose reader must block until the daemon sends something.
        self.reader
            .get_mut()
            .set_read_timeout(None)
            .map_err(|e| ClientError::Unanswered(e.to_string()))?;
        result
    }

    /// A second handle on the socket: shutting it down ends a wait in [`Client::request`]
    /// from another thread (how `attach` cancels while a peer boots).
    ///
    /// Errors: the descriptor could not be duplicated.
    pub fn stream_handle(&self) -> io::Result<UnixStream> {
        self.reader.get_ref().try_clone()
    }

    /// The socket, for the attach stream that follows a successful `attach`.
    pub fn into_stream(self) -> UnixStream {
        self.reader.into_inner()
    }
}

/// A one-line progress indicator: `⠹ waking bob — booting (3 s)`.
struct Indicator {
    what: String,
    phase: String,
    started: Instant,
    frame: usize,
    shown: bool,
}

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

impl Indicator {
    fn new(what: &str) -> Indicator {
        Indicator {
            what: what.to_string(),
            phase: "waiting".into(),
            started: Instant::now(),
            frame: 0,
            shown: false,
        }
    }

    fn update(&mut self, p: Option<&Progress>) {
        if let Some(p) = p {
            // A phase may quote the agent's screen (a dialog's label): one line, controls
            // visible.
            self.phase = crate::visible::line(&p.progress).into_owned();
        }
        // Only show once the wait is noticeable.
        if self.started.elapsed() < Duration::from_millis(400) {
            return;
        }
        self.frame = (self.frame + 1) % FRAMES.len();
        let mut err = io::stderr();
        let _ = write!(
            err,
            "\r\x1b[2K{} {} — {} ({} s)",
            FRAMES[self.frame],
            self.what,
            self.phase,
            self.started.elapsed().as_secs()
        );
        let _ = err.flush();
        self.shown = true;
    }

    fn clear(&mut self) {
        if self.shown {
            let _ = write!(io::stderr(), "\r\x1b[2K");
            let _ = io::stderr().flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client on one end of a socket pair whose other end answers one request with
    /// `answer` — a stand-in for a daemon of another build, which cannot run here.
    fn answered(answer: &'static str, mismatch: Option<VersionMismatch>) -> Client {
        let (ours, theirs) = UnixStream::pair().unwrap();
        std::thread::spawn(move || {
            let mut r = BufReader::new(theirs);
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            r.get_mut().write_all(answer.as_bytes()).unwrap();
        });
        Client {
            reader: BufReader::new(ours),
            mismatch,
        }
    }

    #[test]
    fn a_request_another_version_does_not_understand_names_the_versions() {
        let old = VersionMismatch {
            daemon: "0.0.1".into(),
            cli: "0.1.0".into(),
        };
        let unknown =
            "{\"ok\":false,\"code\":\"unknown-op\",\"error\":\"unknown op \\\"fly\\\"\"}\n";
        let mut c = answered(unknown, Some(old.clone()));
        match c.request(&call::Ping {}, |_| {}) {
            Err(ClientError::VersionMismatch(m)) => {
                assert_eq!(m, old);
                assert!(m.to_string().starts_with(
                    "the daemon runs iapeer 0.0.1, this CLI is iapeer 0.1.0: restart the daemon"
                ));
            }
            other => panic!("{other:?}"),
        }
        // The same versions: the daemon's own answer.
        let mut c = answered(unknown, None);
        assert!(matches!(
            c.request(&call::Ping {}, |_| {}),
            Ok(Answer::Failed(f)) if f.code == crate::protocol::Code::UnknownOp
        ));
        // Another failure is the daemon's, whatever the versions.
        let offline = "{\"ok\":false,\"code\":\"offline\",\"error\":\"x\"}\n";
        let mut c = answered(offline, Some(old));
        assert!(matches!(
            c.request(&call::Ping {}, |_| {}),
            Ok(Answer::Failed(f)) if f.code == crate::protocol::Code::Offline
        ));
    }
}

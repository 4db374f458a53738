//! The echo agent's terminal: raw mode with bracketed paste, and unbuffered fd I/O.

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{self, SetArg, Termios};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;

const PASTE_ON: &[u8] = b"\x1b[?2004h";
const PASTE_OFF: &[u8] = b"\x1b[?2004l";

/// Raw mode on stdin (when it is a tty) plus bracketed paste; both undone on drop.
pub struct RawMode {
    saved: Option<Termios>,
}

impl RawMode {
    /// Enter raw mode if stdin is a terminal; otherwise do nothing.
    pub fn enter() -> RawMode {
        let stdin = std::io::stdin();
        let saved = match nix::unistd::isatty(stdin.as_fd()) {
            Ok(true) => termios::tcgetattr(stdin.as_fd()).ok(),
            _ => None,
        };
        if let Some(orig) = &saved {
            let mut raw = orig.clone();
            termios::cfmakeraw(&mut raw);
            if termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).is_ok() {
                write_out(PASTE_ON);
                return RawMode { saved };
            }
        }
        RawMode { saved: None }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(orig) = &self.saved {
            write_out(PASTE_OFF);
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, orig);
        }
    }
}

/// Write `bytes` to stdout with one `write(2)` (repeated only for a partial write). Errors
/// are ignored: a closed terminal is noticed on the input side.
pub fn write_out(bytes: &[u8]) {
    let stdout = std::io::stdout();
    let mut rest = bytes;
    while !rest.is_empty() {
        match nix::unistd::write(stdout.as_fd(), rest) {
            Ok(0) => return,
            Ok(n) => rest = &rest[n..],
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(_) => return,
        }
    }
}

/// A self-pipe that ends a wait on stdin (issue 13 item 4: the idle agent sleeps in `poll`
/// with no timeout): written by the reply worker when a reply is done, and by SIGTERM/SIGHUP.
pub struct Wake {
    rx: UnixStream,
    tx: UnixStream,
}

/// The write end of a [`Wake`], for another thread.
pub struct WakeSender(UnixStream);

impl WakeSender {
    /// End the main loop's current wait (a full pipe already has a wake pending).
    pub fn wake(&self) {
        let _ = (&self.0).write(&[1]);
    }
}

impl Wake {
    /// A non-blocking socket pair.
    ///
    /// Errors: the pair cannot be created (out of fds).
    pub fn new() -> std::io::Result<Wake> {
        let (rx, tx) = UnixStream::pair()?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok(Wake { rx, tx })
    }

    /// Another write end (for a thread, or for a signal handler with `into_raw_fd`).
    ///
    /// Errors: the fd cannot be duplicated.
    pub fn sender(&self) -> std::io::Result<WakeSender> {
        Ok(WakeSender(self.tx.try_clone()?))
    }

    /// A duplicate of the write end as a socket, for `signal_hook`'s pipe registration.
    ///
    /// Errors: the fd cannot be duplicated.
    pub fn raw_sender(&self) -> std::io::Result<UnixStream> {
        self.tx.try_clone()
    }

    /// Read away pending wakes.
    fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!((&self.rx).read(&mut buf), Ok(n) if n > 0) {}
    }
}

/// What one wait on stdin produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// This many bytes were read into the buffer.
    Data(usize),
    /// Nothing arrived within the timeout (or a signal interrupted the wait).
    Idle,
    /// The [`Wake`] was written: something other than input needs attention.
    Woken,
    /// End of input: EOF, hang-up or a read error.
    Closed,
}

/// Wait for stdin or `wake`, at most `timeout_ms` (`None` = no limit), and read what is
/// there. Input wins over a wake; a wake is drained when reported.
pub fn read_in(buf: &mut [u8], wake: &Wake, timeout_ms: Option<u16>) -> Input {
    let stdin = std::io::stdin();
    let mut fds = [
        PollFd::new(stdin.as_fd(), PollFlags::POLLIN),
        PollFd::new(wake.rx.as_fd(), PollFlags::POLLIN),
    ];
    let timeout = timeout_ms.map_or(PollTimeout::NONE, PollTimeout::from);
    match poll(&mut fds, timeout) {
        Ok(0) | Err(Errno::EINTR) => return Input::Idle,
        Ok(_) => {}
        Err(_) => return Input::Closed,
    }
    let ready = fds[0].revents().unwrap_or(PollFlags::empty());
    if ready.is_empty() {
        wake.drain();
        return Input::Woken;
    }
    if !ready.contains(PollFlags::POLLIN) {
        return Input::Closed;
    }
    match nix::unistd::read(stdin.as_fd(), buf) {
        Ok(0) => Input::Closed,
        Ok(n) => Input::Data(n),
        Err(Errno::EINTR | Errno::EAGAIN) => Input::Idle,
        Err(_) => Input::Closed,
    }
}

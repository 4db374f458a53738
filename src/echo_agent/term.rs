//! The echo agent's terminal: raw mode with bracketed paste, and unbuffered fd I/O.

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{self, SetArg, Termios};
use std::os::fd::AsFd;

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

/// What one wait on stdin produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// This many bytes were read into the buffer.
    Data(usize),
    /// Nothing arrived within the timeout (or a signal interrupted the wait).
    Idle,
    /// End of input: EOF, hang-up or a read error.
    Closed,
}

/// Wait up to `timeout_ms` for stdin and read what is there.
pub fn read_in(buf: &mut [u8], timeout_ms: u16) -> Input {
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(timeout_ms)) {
        Ok(0) | Err(Errno::EINTR) => return Input::Idle,
        Ok(_) => {}
        Err(_) => return Input::Closed,
    }
    let ready = fds[0].revents().unwrap_or(PollFlags::empty());
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

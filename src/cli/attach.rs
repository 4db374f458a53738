//! The attach client (spec 04 §1 "Attach"): raw terminal, resize frames, stdin as data
//! frames, screen bytes to stdout; Ctrl-] detaches. The terminal is raw from the start, so
//! Ctrl-] (or Ctrl-C) also cancels while the daemon is still waking the peer.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use nix::sys::termios::{self, SetArg, Termios};

use crate::session::frame::{self, Deframer, Frame};

/// The detach key: Ctrl-] (0x1d).
pub const DETACH: u8 = 0x1d;

/// Ctrl-C (0x03) as a raw terminal delivers it.
const INTERRUPT: u8 = 0x03;

/// The line printed on stderr before the terminal is handed over.
pub fn detach_hint(peer: &str) -> String {
    format!("attaching to {peer} — press Ctrl-] to detach (the session keeps running)")
}

/// What keys typed while the daemon still wakes the peer mean.
#[derive(Debug, PartialEq, Eq)]
pub enum WaitKeys {
    /// Ctrl-] or Ctrl-C: give up the attach; the peer goes on booting.
    Cancel,
    /// Anything else: typed ahead, sent to the session once attached.
    TypeAhead,
}

/// Classify a chunk of keys typed during the wait for a boot. Ctrl-C cancels too: before the
/// session's screen is shown it is the reflex for "stop waiting", and sending it on to the
/// agent once attached could end the agent.
pub fn wait_keys(chunk: &[u8]) -> WaitKeys {
    if chunk.iter().any(|b| *b == DETACH || *b == INTERRUPT) {
        WaitKeys::Cancel
    } else {
        WaitKeys::TypeAhead
    }
}

/// Keys typed on this terminal: one thread reads stdin for the whole attach (the wait for a
/// boot, then the session) and sends each chunk; the channel closes at end of input.
pub fn keys() -> crossbeam_channel::Receiver<Vec<u8>> {
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut stdin = io::stdin();
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    rx
}

/// Undo what a TUI may have left on the terminal: alternate screen, bracketed paste, mouse
/// modes, hidden cursor, scroll region.
pub const RESTORE: &str =
    "\x1b[?1049l\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?25h\x1b[r";

/// Restores the saved terminal mode when dropped.
pub struct RawGuard {
    saved: Option<Termios>,
}

impl RawGuard {
    /// Put stdin's terminal in raw mode (nothing happens when it is not a terminal).
    pub fn enter() -> RawGuard {
        let stdin = io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(s) = &saved {
            let mut raw = s.clone();
            termios::cfmakeraw(&mut raw);
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
        }
        RawGuard { saved }
    }

    /// The end of a line printed on the terminal now: `\r\n` while it is raw (no output
    /// processing), `\n` when stdin is no terminal.
    pub fn line_end(&self) -> &'static str {
        if self.saved.is_some() {
            "\r\n"
        } else {
            "\n"
        }
    }
}

impl Drop for RawGuard {
    fn drop(&mut self) {
        if let Some(s) = &self.saved {
            let _ = termios::tcsetattr(io::stdin().as_fd(), SetArg::TCSANOW, s);
        }
    }
}

/// The terminal size of stdout (rows, cols), if it is a terminal.
pub fn terminal_size() -> Option<(u16, u16)> {
    let mut ws = nix::pty::Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    for fd in [1, 0] {
        // SAFETY: TIOCGWINSZ writes one Winsize into the pointed struct.
        let rc = unsafe { nix::libc::ioctl(fd, nix::libc::TIOCGWINSZ as _, &mut ws) };
        if rc == 0 && ws.ws_row > 0 && ws.ws_col > 0 {
            return Some((ws.ws_row, ws.ws_col));
        }
    }
    None
}

fn send_frame(w: &Mutex<UnixStream>, f: &Frame) -> io::Result<()> {
    let bytes = frame::encode(f);
    w.lock()
        .unwrap_or_else(|p| p.into_inner())
        .write_all(&bytes)
}

/// Run the attach stream on `stream` until detach or session end: `keys` from [`keys`],
/// `typed_ahead` what was typed during the wait, `guard` the raw mode (restored before the
/// closing note).
///
/// Errors: the terminal or socket failed.
pub fn run(
    stream: UnixStream,
    keys: crossbeam_channel::Receiver<Vec<u8>>,
    typed_ahead: Vec<u8>,
    guard: RawGuard,
) -> io::Result<()> {
    let writer = Arc::new(Mutex::new(stream.try_clone()?));
    let (rows, cols) = terminal_size().unwrap_or((24, 80));
    send_frame(&writer, &Frame::Resize { cols, rows })?;

    // SIGWINCH → resize frame.
    let w = writer.clone();
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGWINCH])?;
    let sig_handle = signals.handle();
    std::thread::spawn(move || {
        for _ in signals.forever() {
            if let Some((rows, cols)) = terminal_size() {
                if send_frame(&w, &Frame::Resize { cols, rows }).is_err() {
                    return;
                }
            }
        }
    });

    // stdin → data frames; Ctrl-] anywhere in a chunk detaches (that chunk is dropped).
    let (done_tx, done_rx) = crossbeam_channel::bounded::<&'static str>(2);
    let w = writer.clone();
    let stdin_done = done_tx.clone();
    std::thread::spawn(move || {
        let ahead = (!typed_ahead.is_empty()).then_some(typed_ahead);
        for chunk in ahead.into_iter().chain(keys.iter()) {
            if chunk.contains(&DETACH) {
                break;
            }
            if send_frame(&w, &Frame::Data(chunk)).is_err() {
                return;
            }
        }
        // Ctrl-] or the end of input.
        let _ = stdin_done.send("detached — session still running");
    });

    // socket → stdout.
    let mut reader = stream;
    std::thread::spawn(move || {
        let mut deframer = Deframer::new();
        let mut buf = [0u8; 32 * 1024];
        let mut out = io::stdout();
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => deframer.push(&buf[..n]),
            }
            while let Ok(Some(f)) = deframer.next() {
                if let Frame::Data(d) = f {
                    let _ = out.write_all(&d);
                }
            }
            let _ = out.flush();
        }
        let _ = done_tx.send("session ended");
    });

    let why = done_rx.recv().unwrap_or("session ended");
    sig_handle.close();
    let mut out = io::stdout();
    let _ = out.write_all(RESTORE.as_bytes());
    // Resetting the scroll region homes the cursor: go to the last row before writing, so the
    // note and the next shell prompt do not land on top of the session's screen.
    let (rows, _) = terminal_size().unwrap_or((24, 80));
    let _ = write!(out, "\x1b[{rows};1H");
    let _ = out.flush();
    drop(guard);
    let _ = writeln!(out, "\r\n{why}");
    let _ = writer.lock().map(|s| s.shutdown(std::net::Shutdown::Both));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_bracket_or_ctrl_c_cancels_a_wait_other_keys_are_typed_ahead() {
        assert_eq!(wait_keys(b"\x1d"), WaitKeys::Cancel);
        assert_eq!(wait_keys(b"ab\x03"), WaitKeys::Cancel);
        assert_eq!(wait_keys(b"hello\r"), WaitKeys::TypeAhead);
        assert_eq!(wait_keys(b"\x1b[A"), WaitKeys::TypeAhead);
    }

    #[test]
    fn the_hint_names_the_key_and_the_peer() {
        let h = detach_hint("bob");
        assert!(h.contains("bob") && h.contains("Ctrl-]"), "{h}");
    }
}

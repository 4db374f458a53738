//! The attach client (spec 04 §1 "Attach"): raw terminal, resize frames, stdin as data
//! frames, screen bytes to stdout; Ctrl-] detaches.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use nix::sys::termios::{self, SetArg, Termios};

use crate::session::frame::{self, Deframer, Frame};

/// The detach key: Ctrl-] (0x1d).
pub const DETACH: u8 = 0x1d;

/// Undo what a TUI may have left on the terminal: alternate screen, bracketed paste, mouse
/// modes, hidden cursor, scroll region.
pub const RESTORE: &str =
    "\x1b[?1049l\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?25h\x1b[r";

/// Restores the saved terminal mode when dropped.
struct RawGuard {
    saved: Option<Termios>,
}

impl RawGuard {
    fn enter() -> RawGuard {
        let stdin = io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(s) = &saved {
            let mut raw = s.clone();
            termios::cfmakeraw(&mut raw);
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
        }
        RawGuard { saved }
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

/// Run the attach stream on `stream` until detach or session end.
///
/// Errors: the terminal or socket failed.
pub fn run(stream: UnixStream) -> io::Result<()> {
    let writer = Arc::new(Mutex::new(stream.try_clone()?));
    let guard = RawGuard::enter();
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
        let mut buf = [0u8; 4096];
        let mut stdin = io::stdin();
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = stdin_done.send("detached — session still running");
                    return;
                }
                Ok(n) => {
                    if buf[..n].contains(&DETACH) {
                        let _ = stdin_done.send("detached — session still running");
                        return;
                    }
                    if send_frame(&w, &Frame::Data(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
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

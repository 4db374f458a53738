//! The session thread's attached clients: hand-over, frames in, screen bytes out.

use super::*;

impl Session {
    pub(super) fn attach(&mut self, stream: std::os::unix::net::UnixStream, prebuf: Vec<u8>) {
        let mut client = match Client::new(stream, &prebuf) {
            Ok(c) => c,
            Err(e) => {
                log::warn!("attach to {} failed: {e}", self.cfg.identity);
                return;
            }
        };
        let token = Token(self.next_client);
        self.next_client += 1;
        if let Err(e) = self.poll.registry().register(
            &mut client.stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warn!("attach to {} failed: {e}", self.cfg.identity);
            return;
        }
        let input = client.pending_input().unwrap_or_default();
        self.clients.insert(token, client);
        self.handle_client_input(token, input);
    }

    pub(super) fn client_event(&mut self, token: Token, readable: bool, writable: bool) {
        let Some(client) = self.clients.get_mut(&token) else {
            return;
        };
        if writable && client.flush().is_err() {
            self.drop_client(token);
            return;
        }
        if readable {
            let (input, gone) = client.read();
            self.handle_client_input(token, input);
            if gone {
                self.drop_client(token);
            }
        }
    }

    pub(super) fn handle_client_input(&mut self, token: Token, input: Vec<ClientInput>) {
        for i in input {
            match i {
                ClientInput::Data(bytes) => {
                    self.own.human_input(self.now);
                    self.write_child(&bytes);
                }
                ClientInput::Resize { rows, cols, first } => {
                    // Resize first (once booted), so the snapshot is taken at the client's size
                    // and the TUI's redraw for that size follows it.
                    if rows > 0 && cols > 0 {
                        // Never resize during boot: some TUIs hang when resized while starting.
                        if self.state.boot().is_some() {
                            self.pending_size = Some((rows, cols));
                        } else {
                            self.resize(rows, cols);
                        }
                    }
                    if first {
                        let snapshot = self.screen.snapshot();
                        if let Some(c) = self.clients.get_mut(&token) {
                            if !c.queue(&snapshot) || c.flush().is_err() {
                                self.drop_client(token);
                                return;
                            }
                        }
                        let n = self.clients.values().filter(|c| c.sized).count();
                        self.emit(EventKind::Attached(n));
                    }
                }
            }
        }
    }

    /// Give the child's pty and the screen model the client's size, bounded by
    /// [`crate::term::clamp_size`] (a peer chooses these numbers).
    pub(super) fn resize(&mut self, rows: u16, cols: u16) {
        let (rows, cols) = crate::term::clamp_size(rows, cols);
        if let Io::Pty(m) = &self.io {
            let fd: std::os::fd::OwnedFd = match m.try_clone() {
                Ok(f) => f.into(),
                Err(_) => return,
            };
            if spawn::set_pty_size(&fd, rows, cols).is_ok() {
                self.screen.resize(rows, cols);
            }
        }
    }

    pub(super) fn drop_client(&mut self, token: Token) {
        if let Some(mut c) = self.clients.remove(&token) {
            let _ = self.poll.registry().deregister(&mut c.stream);
            if c.sized {
                let n = self.clients.values().filter(|c| c.sized).count();
                self.emit(EventKind::Attached(n));
            }
        }
    }
}

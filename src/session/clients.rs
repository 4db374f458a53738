//! Attached interactive clients of one session (spec 04 §1 "Attach"): each is a Unix socket
//! past its JSON handshake, speaking the framed stream of spec 02 §2, owned by the session
//! thread and polled with the child's fds.

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use super::frame::{self, Deframer, Frame};

/// A client whose unsent output exceeds this is dropped (a stuck terminal must not make the
/// daemon buffer without bound).
const OUT_CAP: usize = 8 << 20;

/// What a client sent.
#[derive(Debug, PartialEq)]
pub enum ClientInput {
    /// Keystrokes for the child.
    Data(Vec<u8>),
    /// The client's terminal size; `first` on its first resize (time to send the snapshot).
    Resize {
        /// Rows.
        rows: u16,
        /// Columns.
        cols: u16,
        /// True for the client's first resize frame.
        first: bool,
    },
}

/// What one read of a non-blocking socket gave ([`read_chunk`]).
pub(crate) enum Chunk {
    /// This many bytes, at the start of the buffer.
    Read(usize),
    /// Nothing more for now (it would block).
    Drained,
    /// The peer is gone: end of stream, or an error.
    Gone,
}

/// Read once from the non-blocking `stream` into `buf`, again when interrupted by a signal.
pub(crate) fn read_chunk(stream: &mut impl Read, buf: &mut [u8]) -> Chunk {
    loop {
        return match stream.read(buf) {
            Ok(0) => Chunk::Gone,
            Ok(n) => Chunk::Read(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Chunk::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => Chunk::Gone,
        };
    }
}

/// One attached client.
pub struct Client {
    /// The socket, registered with the session's poll.
    pub stream: mio::net::UnixStream,
    deframer: Deframer,
    out: VecDeque<u8>,
    /// Set once the client sent its size and got the snapshot: it then receives live output.
    pub sized: bool,
}

impl Client {
    /// Wrap a handed-over socket; `prebuf` holds bytes already read past the handshake.
    pub fn new(stream: std::os::unix::net::UnixStream, prebuf: &[u8]) -> io::Result<Client> {
        stream.set_nonblocking(true)?;
        let mut deframer = Deframer::new();
        deframer.push(prebuf);
        Ok(Client {
            stream: mio::net::UnixStream::from_std(stream),
            deframer,
            out: VecDeque::new(),
            sized: false,
        })
    }

    /// Decode frames already buffered (from the handshake's extra bytes).
    pub fn pending_input(&mut self) -> io::Result<Vec<ClientInput>> {
        self.decode()
    }

    /// Read everything available. Returns the decoded input and whether the client is gone
    /// (EOF, a socket error or a framing error).
    pub fn read(&mut self) -> (Vec<ClientInput>, bool) {
        let mut buf = [0u8; 16 * 1024];
        let gone = loop {
            match read_chunk(&mut self.stream, &mut buf) {
                Chunk::Read(n) => self.deframer.push(&buf[..n]),
                Chunk::Drained => break false,
                Chunk::Gone => break true,
            }
        };
        match self.decode() {
            Ok(input) => (input, gone),
            Err(_) => (Vec::new(), true),
        }
    }

    fn decode(&mut self) -> io::Result<Vec<ClientInput>> {
        let mut input = Vec::new();
        while let Some(f) = self
            .deframer
            .next()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
        {
            match f {
                Frame::Data(d) => input.push(ClientInput::Data(d)),
                Frame::Resize { cols, rows } => {
                    let first = !self.sized;
                    self.sized = true;
                    input.push(ClientInput::Resize { rows, cols, first });
                }
            }
        }
        Ok(input)
    }

    /// Queue screen bytes as a data frame. Returns false when the client fell too far behind
    /// and must be dropped.
    pub fn queue(&mut self, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return true;
        }
        self.out.extend(frame::encode(&Frame::Data(bytes.to_vec())));
        self.out.len() <= OUT_CAP
    }

    /// Write queued output until done or the socket is full. Errors mean the client is gone.
    pub fn flush(&mut self) -> io::Result<()> {
        while !self.out.is_empty() {
            let (a, _) = self.out.as_slices();
            match self.stream.write(a) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

//! Attach stream framing (spec 02 §2).
//!
//! After the final `{"ok":true,…}` line of an `attach` request the control connection carries
//! frames in both directions: 1 byte type, 4 bytes big-endian payload length, payload.
//! Type 0 = data (keystrokes in, screen bytes out); type 1 = resize (payload: cols u16 BE,
//! rows u16 BE). [`Deframer`] reassembles frames from arbitrarily split or coalesced reads.

/// Largest payload a [`Deframer`] accepts (1 MiB). [`encode`] never produces a bigger one.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// Size of a frame header: type byte + 4 length bytes.
pub const HEADER_LEN: usize = 5;

const TYPE_DATA: u8 = 0;
const TYPE_RESIZE: u8 = 1;
const RESIZE_LEN: usize = 4;

/// One frame of the attach stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Raw terminal bytes: keystrokes from a client, screen output to a client.
    Data(Vec<u8>),
    /// The client's terminal size, in character cells.
    Resize { cols: u16, rows: u16 },
}

/// Why a byte stream is not a valid frame sequence. The stream cannot be resynchronised after
/// any of these; the connection should be closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The type byte is neither 0 (data) nor 1 (resize).
    #[error("attach stream: unknown frame type {0} (expected 0 = data or 1 = resize)")]
    UnknownType(u8),
    /// A resize frame whose payload is not exactly 4 bytes.
    #[error("attach stream: resize frame carries {0} bytes (expected 4: cols and rows as u16)")]
    BadResizeLength(u32),
    /// A payload longer than [`MAX_PAYLOAD`].
    #[error("attach stream: frame of {0} bytes exceeds the {MAX_PAYLOAD}-byte limit")]
    TooLarge(u32),
}

fn push_header(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.push(kind);
    // Callers bound `len` by MAX_PAYLOAD, which fits in u32.
    out.extend_from_slice(&(len as u32).to_be_bytes());
}

/// Encode one frame as bytes ready to write.
///
/// A data frame longer than [`MAX_PAYLOAD`] is emitted as several consecutive data frames of at
/// most [`MAX_PAYLOAD`] bytes each (the receiver sees the same byte stream). An empty data frame
/// is encoded as a single frame with length 0.
pub fn encode(frame: &Frame) -> Vec<u8> {
    match frame {
        Frame::Data(bytes) => {
            let mut out = Vec::with_capacity(bytes.len() + HEADER_LEN);
            if bytes.is_empty() {
                push_header(&mut out, TYPE_DATA, 0);
            }
            for part in bytes.chunks(MAX_PAYLOAD) {
                push_header(&mut out, TYPE_DATA, part.len());
                out.extend_from_slice(part);
            }
            out
        }
        Frame::Resize { cols, rows } => {
            let mut out = Vec::with_capacity(HEADER_LEN + RESIZE_LEN);
            push_header(&mut out, TYPE_RESIZE, RESIZE_LEN);
            out.extend_from_slice(&cols.to_be_bytes());
            out.extend_from_slice(&rows.to_be_bytes());
            out
        }
    }
}

/// Incremental decoder: feed it whatever the socket returned with [`Deframer::push`], then call
/// [`Deframer::next`] until it returns `Ok(None)`.
#[derive(Debug, Default)]
pub struct Deframer {
    buf: Vec<u8>,
    /// Offset of the first undecoded byte in `buf`.
    start: usize,
}

impl Deframer {
    /// An empty decoder.
    pub fn new() -> Deframer {
        Deframer::default()
    }

    /// Append received bytes (any split: half a header, several frames, …).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Number of received bytes not yet decoded into frames.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed.
    ///
    /// Errors ([`FrameError`]) are detected from the header alone, before the payload arrives,
    /// and are sticky: the bad header stays in place and every later call returns the same error.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Frame>, FrameError> {
        let avail = &self.buf[self.start..];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let kind = avail[0];
        let len32 = u32::from_be_bytes([avail[1], avail[2], avail[3], avail[4]]);
        let len = len32 as usize;
        match kind {
            TYPE_DATA if len > MAX_PAYLOAD => return Err(FrameError::TooLarge(len32)),
            TYPE_DATA => {}
            TYPE_RESIZE if len != RESIZE_LEN => return Err(FrameError::BadResizeLength(len32)),
            TYPE_RESIZE => {}
            other => return Err(FrameError::UnknownType(other)),
        }
        if avail.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let payload = &avail[HEADER_LEN..HEADER_LEN + len];
        let frame = if kind == TYPE_DATA {
            Frame::Data(payload.to_vec())
        } else {
            Frame::Resize {
                cols: u16::from_be_bytes([payload[0], payload[1]]),
                rows: u16::from_be_bytes([payload[2], payload[3]]),
            }
        };
        self.start += HEADER_LEN + len;
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(d: &mut Deframer) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Some(f) = d.next().expect("valid stream") {
            out.push(f);
        }
        out
    }

    #[test]
    fn resize_wire_form() {
        let bytes = encode(&Frame::Resize {
            cols: 220,
            rows: 50,
        });
        assert_eq!(bytes, vec![1, 0, 0, 0, 4, 0, 220, 0, 50]);
    }

    #[test]
    fn data_wire_form_and_empty_data() {
        assert_eq!(
            encode(&Frame::Data(b"hi".to_vec())),
            b"\0\0\0\0\x02hi".to_vec()
        );
        let mut d = Deframer::new();
        d.push(&encode(&Frame::Data(Vec::new())));
        assert_eq!(decode_all(&mut d), vec![Frame::Data(Vec::new())]);
    }

    #[test]
    fn header_split_waits_for_more() {
        let mut d = Deframer::new();
        let bytes = encode(&Frame::Data(b"abc".to_vec()));
        d.push(&bytes[..3]);
        assert_eq!(d.next(), Ok(None));
        d.push(&bytes[3..6]);
        assert_eq!(d.next(), Ok(None));
        d.push(&bytes[6..]);
        assert_eq!(d.next(), Ok(Some(Frame::Data(b"abc".to_vec()))));
        assert_eq!(d.next(), Ok(None));
        assert_eq!(d.pending(), 0);
    }

    #[test]
    fn unknown_type_is_a_sticky_error() {
        let mut d = Deframer::new();
        d.push(&[7, 0, 0, 0, 1, b'x']);
        assert_eq!(d.next(), Err(FrameError::UnknownType(7)));
        assert_eq!(d.next(), Err(FrameError::UnknownType(7)));
        assert!(FrameError::UnknownType(7).to_string().contains("type 7"));
    }

    #[test]
    fn bad_resize_length_and_oversize_are_rejected_from_the_header() {
        let mut d = Deframer::new();
        d.push(&[1, 0, 0, 0, 3]);
        assert_eq!(d.next(), Err(FrameError::BadResizeLength(3)));
        let mut d = Deframer::new();
        d.push(&[0, 0, 0x10, 0, 1]);
        assert_eq!(d.next(), Err(FrameError::TooLarge(0x10_0001)));
    }

    #[test]
    fn oversize_data_is_split_on_encode() {
        let big = vec![b'z'; MAX_PAYLOAD + 10];
        let mut d = Deframer::new();
        d.push(&encode(&Frame::Data(big.clone())));
        let frames = decode_all(&mut d);
        assert_eq!(frames.len(), 2);
        let joined: Vec<u8> = frames
            .into_iter()
            .flat_map(|f| match f {
                Frame::Data(b) => b,
                Frame::Resize { .. } => Vec::new(),
            })
            .collect();
        assert_eq!(joined, big);
    }

    fn frame_strategy() -> impl Strategy<Value = Frame> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Frame::Data),
            (any::<u16>(), any::<u16>()).prop_map(|(cols, rows)| Frame::Resize { cols, rows }),
        ]
    }

    proptest! {
        #[test]
        fn any_chunking_decodes_to_the_same_frames(
            frames in proptest::collection::vec(frame_strategy(), 0..20),
            cuts in proptest::collection::vec(1usize..64, 0..200),
        ) {
            let stream: Vec<u8> = frames.iter().flat_map(encode).collect();
            let mut d = Deframer::new();
            let mut got = Vec::new();
            let mut pos = 0;
            let mut cuts = cuts.into_iter();
            while pos < stream.len() {
                let n = cuts.next().unwrap_or(stream.len()).min(stream.len() - pos);
                d.push(&stream[pos..pos + n]);
                pos += n;
                got.extend(decode_all(&mut d));
            }
            prop_assert_eq!(got, frames);
            prop_assert_eq!(d.pending(), 0);
        }
    }
}

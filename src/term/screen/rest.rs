//! A screen model set aside while its session is quiet (issue 31 item 4: 1 000 live sessions
//! in ≤ 256 MiB). A `vt100` grid of 50 × 220 cells costs 344 KiB whatever it shows (32 bytes
//! a cell), more than the whole budget of a session; an idle session's screen is kept instead
//! as the bytes that redraw it ([`Screen::snapshot`](super::Screen::snapshot), the attach
//! redraw: scrollback, contents, cursor, modes), usually a few hundred bytes, and rebuilt
//! from them on its next use.
//!
//! Only an exact round trip is set aside: the model rebuilt from the bytes must equal the one
//! it replaces in every field `vt100` keeps (compared through their `Debug` forms, which
//! cover them all: grids, scrollback, cursor, saved cursor, scroll region, modes, pens), a
//! cell by its visible content and attributes: `vt100` keeps a cleared or shortened cell's old
//! bytes past its length, which no read and no redraw shows (they kept every Claude Code and
//! Codex screen from resting).
//! A state the redraw cannot carry (a scroll region, a saved cursor, an alternate screen in
//! use or left behind) stays in memory as before. The byte parser's own state (an escape
//! sequence cut between two reads) never leaves the `vt100::Parser`: only its screen is swapped.

use std::hash::{BuildHasher, Hasher};

/// A screen set aside: the bytes that redraw it on a blank model of `rows` × `cols` with
/// `scrollback` lines of scrollback.
#[derive(Debug, Clone)]
pub struct Resting {
    bytes: Vec<u8>,
    rows: u16,
    cols: u16,
    scrollback: usize,
}

impl Resting {
    /// The redraw bytes of `screen`, made by `redraw`, when a blank model fed them equals
    /// `screen` (see [`same`]); `None` when it would not. A cursor saved (DECSC) where the
    /// cursor is, with the pen in use — what Claude Code's `ESC 7 ESC [r ESC 8` leaves — is
    /// carried by a DECSC after the redraw.
    pub fn of(
        screen: &vt100::Screen,
        scrollback: usize,
        redraw: impl FnOnce(&vt100::Screen) -> Vec<u8>,
    ) -> Option<Resting> {
        let (rows, cols) = screen.size();
        let mut resting = Resting {
            bytes: redraw(screen),
            rows,
            cols,
            scrollback,
        };
        if same(screen, &resting.rebuild()) {
            return Some(resting);
        }
        resting.bytes.extend_from_slice(SAVE_CURSOR);
        same(screen, &resting.rebuild()).then_some(resting)
    }

    /// The screen again, as it was when set aside.
    pub fn rebuild(&self) -> vt100::Screen {
        let mut p = vt100::Parser::new(self.rows, self.cols, self.scrollback);
        p.process(&self.bytes);
        p.screen().clone()
    }

    /// Bytes held while resting.
    #[cfg(test)]
    pub fn held_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// DECSC: save the cursor's position, the pen and the origin mode.
const SAVE_CURSOR: &[u8] = b"\x1b7";

/// The smallest model `vt100` makes (2 × 2, no scrollback): what a resting screen's parser
/// holds in place of its grid.
pub fn placeholder() -> vt100::Screen {
    vt100::Parser::new(2, 2, 0).screen().clone()
}

/// Whether two models are equal in every field, a cell by the bytes within its length
/// (`vt100::Screen` has no `PartialEq`; its derived `Debug` writes every field). Compared by a
/// keyed hash of that text, streamed, so no copy of the text is made; the key is random per
/// process.
pub(super) fn same(a: &vt100::Screen, b: &vt100::Screen) -> bool {
    let keys = std::collections::hash_map::RandomState::new();
    debug_hash(a, &keys) == debug_hash(b, &keys)
}

fn debug_hash(s: &vt100::Screen, keys: &std::collections::hash_map::RandomState) -> u64 {
    let mut w = VisibleCells {
        hasher: keys.build_hasher(),
        pending: String::new(),
    };
    // Writing into a hasher cannot fail.
    let _ = std::fmt::write(&mut w, format_args!("{s:?}"));
    w.finish()
}

/// What opens a cell's byte array in `vt100`'s `Debug` text: `Cell { contents: [32, 0, …],
/// len: 1, attrs: … }`.
const CELL_BYTES: &str = "contents: [";
/// What follows the byte array, before the cell's length.
const CELL_LEN: &str = "], len: ";
/// The bits of a cell's `len` that count its bytes (the others mark wide characters).
const LEN_BITS: usize = 0b1_1111;

/// A `fmt::Write` that hashes `Debug` text with each cell's byte array cut to the cell's
/// length. Text that may hold an unfinished cell waits in `pending` for the next write.
struct VisibleCells<H: Hasher> {
    hasher: H,
    pending: String,
}

impl<H: Hasher> VisibleCells<H> {
    /// Hash what `pending` holds up to the first cell it cannot finish yet.
    fn drain(&mut self) {
        let mut done = 0;
        loop {
            let text = &self.pending[done..];
            let Some(open) = text.find(CELL_BYTES) else {
                // Keep a tail that may be the start of the next `contents: [`.
                let mut keep = text.len().saturating_sub(CELL_BYTES.len() - 1);
                while !text.is_char_boundary(keep) {
                    keep -= 1;
                }
                self.hasher.write(&text.as_bytes()[..keep]);
                done += keep;
                break;
            };
            let cell = &text[open + CELL_BYTES.len()..];
            let Some((bytes, len, used)) = cell_bytes(cell) else {
                self.hasher.write(&text.as_bytes()[..open]);
                done += open;
                break;
            };
            self.hasher.write(&text.as_bytes()[..open]);
            for b in bytes.split(", ").take(len & LEN_BITS) {
                self.hasher.write(b.as_bytes());
                self.hasher.write_u8(b',');
            }
            self.hasher.write_usize(len);
            done += open + CELL_BYTES.len() + used;
        }
        self.pending.drain(..done);
    }

    fn finish(mut self) -> u64 {
        self.drain();
        self.hasher.write(self.pending.as_bytes());
        self.hasher.finish()
    }
}

/// The text after `contents: [`: its byte list, the cell's `len` and how much text they took;
/// `None` while the length's end is not in `text` yet.
fn cell_bytes(text: &str) -> Option<(&str, usize, usize)> {
    let close = text.find(CELL_LEN)?;
    let after = &text[close + CELL_LEN.len()..];
    let digits = after.find(|c: char| !c.is_ascii_digit())?;
    let len = after[..digits].parse().ok()?;
    Some((&text[..close], len, close + CELL_LEN.len() + digits))
}

impl<H: Hasher> std::fmt::Write for VisibleCells<H> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.pending.push_str(s);
        if self.pending.len() >= 4096 {
            self.drain();
        }
        Ok(())
    }
}

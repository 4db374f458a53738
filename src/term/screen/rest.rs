//! A screen model set aside while its session is quiet (issue 31 item 4: 1 000 live sessions
//! in ≤ 256 MiB). A `vt100` grid of 50 × 220 cells costs 344 KiB whatever it shows (32 bytes
//! a cell), more than the whole budget of a session; an idle session's screen is kept instead
//! as the bytes that redraw it ([`Screen::snapshot`](super::Screen::snapshot), the attach
//! redraw: scrollback, contents, cursor, modes), usually a few hundred bytes, and rebuilt
//! from them on its next use.
//!
//! Only an exact round trip is set aside: the model rebuilt from the bytes must equal the one
//! it replaces in every field `vt100` keeps (compared through their `Debug` forms, which
//! cover them all: grids, scrollback, cursor, saved cursor, scroll region, modes, pens).
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
    /// `screen` exactly; `None` when it would not.
    pub fn of(
        screen: &vt100::Screen,
        scrollback: usize,
        redraw: impl FnOnce(&vt100::Screen) -> Vec<u8>,
    ) -> Option<Resting> {
        let (rows, cols) = screen.size();
        let resting = Resting {
            bytes: redraw(screen),
            rows,
            cols,
            scrollback,
        };
        let rebuilt = resting.rebuild();
        same(screen, &rebuilt).then_some(resting)
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

/// The smallest model `vt100` makes (2 × 2, no scrollback): what a resting screen's parser
/// holds in place of its grid.
pub fn placeholder() -> vt100::Screen {
    vt100::Parser::new(2, 2, 0).screen().clone()
}

/// Whether two models are equal in every field (`vt100::Screen` has no `PartialEq`; its
/// derived `Debug` writes every field). Compared by a keyed hash of that text, streamed, so
/// no copy of the text is made; the key is random per process.
fn same(a: &vt100::Screen, b: &vt100::Screen) -> bool {
    let keys = std::collections::hash_map::RandomState::new();
    debug_hash(a, &keys) == debug_hash(b, &keys)
}

fn debug_hash(s: &vt100::Screen, keys: &std::collections::hash_map::RandomState) -> u64 {
    struct HashWriter<H: Hasher>(H);
    impl<H: Hasher> std::fmt::Write for HashWriter<H> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.write(s.as_bytes());
            Ok(())
        }
    }
    let mut w = HashWriter(keys.build_hasher());
    // Writing into a hasher cannot fail.
    let _ = std::fmt::write(&mut w, format_args!("{s:?}"));
    w.0.finish()
}

//! Screen model and terminal capability responder (spec 04 §1 "What the session thread does with
//! output", steps 2–3; attach snapshot; composer check of spec 05 §7).
//!
//! Every byte the child writes goes through [`Screen::feed`]: it reaches the `vt100` model, the
//! capability queries in it are answered (when no human terminal is attached to answer them),
//! and what attached clients should see is returned.

mod rest;
#[cfg(test)]
mod tests;

use super::responder::{self, Scanner};

/// Rows of a session's pty and screen (spec 04 §1: spawned at the final size, 220 × 50).
pub const SESSION_ROWS: u16 = 50;
/// Columns of a session's pty and screen.
pub const SESSION_COLS: u16 = 220;
/// Largest rows an attached client may give a session (issue 12: the attach resize frame
/// carries any u16; a 2000 × 2000 request cost the daemon 434 MB). 500 rows × 1000 columns is
/// more than a 8K display shows at a readable font size.
pub const MAX_ROWS: u16 = 500;
/// Largest columns an attached client may give a session (see [`MAX_ROWS`]).
pub const MAX_COLS: u16 = 1000;

/// Fewest rows of a model (and of the pty it mirrors): vt100 0.16.2 panics on a one-row screen
/// as soon as a line wraps (`Grid::col_wrap` subtracts the scrolled row count from row 0: an
/// overflow, then an `unwrap` of a missing row). Found by the `screen` fuzz target (issue 12).
pub const MIN_ROWS: u16 = 2;
/// Fewest columns, for the same reason: on a one-column screen vt100 0.16.2 computes
/// `cols - width` for a double-width character (an overflow).
pub const MIN_COLS: u16 = 2;

/// A client's requested terminal size `(rows, cols)` bounded to what a terminal can be:
/// at least `MIN_ROWS` × `MIN_COLS` and at most [`MAX_ROWS`] × [`MAX_COLS`].
pub fn clamp_size(rows: u16, cols: u16) -> (u16, u16) {
    (
        rows.clamp(MIN_ROWS, MAX_ROWS),
        cols.clamp(MIN_COLS, MAX_COLS),
    )
}

/// Scrollback lines kept by the model (replayed to attaching clients).
pub const SCROLLBACK_LINES: usize = 2000;

/// Version reported in the XTVERSION answer `iapeer(<version>)`.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What one chunk of child output produced.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fed {
    /// Answers to write back to the child's pty, in query order (empty when not answering).
    pub replies: Vec<u8>,
    /// Bytes for attached clients: the chunk minus the queries the daemon answered. Bytes that
    /// may start a query split across chunks are held back until the next chunk decides them.
    pub forward: Vec<u8>,
}

/// The composer (input line) of an agent TUI, as found by [`Screen::composer_text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposerState {
    /// Text after the prompt glyph on the composer row, trimmed (placeholders included).
    pub text: String,
    /// True when that text holds at least one visible character that is neither dim nor in a
    /// non-default foreground colour: something a human typed or pasted (spec 05 §7).
    pub typed: bool,
}

/// A terminal screen model (`vt100`) plus the capability-query responder.
pub struct Screen {
    /// The byte parser and, unless the screen is resting, its model.
    parser: vt100::Parser,
    /// Set while the screen rests ([`Screen::rest`]): the parser then holds a 2 × 2
    /// placeholder and the model is these bytes.
    resting: Option<rest::Resting>,
    /// The resting model rebuilt by a read ([`Screen::vt`]); it goes back into the parser at
    /// the next change, or is dropped by the next [`Screen::rest`].
    woken: std::cell::OnceCell<vt100::Screen>,
    /// A rest was refused since the last change (the redraw cannot carry this state).
    refused: bool,
    scanner: Scanner,
    /// [`Screen::rows`] of the current state, made on first use after each change: a session
    /// reads them several times per chunk of output (busy line, composer, confirmation), and
    /// making them walks every cell (in a burst of 1 000 deliveries it was the daemon's
    /// busiest function).
    rows_cache: std::cell::OnceCell<Vec<String>>,
    /// [`Screen::text`] of the current state, likewise (the busy line is looked for in it on
    /// every chunk).
    text_cache: std::cell::OnceCell<String>,
}

impl Screen {
    /// A blank screen of `rows` × `cols` cells (at least `MIN_ROWS` × `MIN_COLS`) with
    /// `SCROLLBACK_LINES` of scrollback.
    /// Sessions use `SESSION_ROWS` × `SESSION_COLS`.
    pub fn new(rows: u16, cols: u16) -> Screen {
        Screen {
            parser: vt100::Parser::new(rows.max(MIN_ROWS), cols.max(MIN_COLS), SCROLLBACK_LINES),
            resting: None,
            woken: std::cell::OnceCell::new(),
            refused: false,
            scanner: Scanner::default(),
            rows_cache: std::cell::OnceCell::new(),
            text_cache: std::cell::OnceCell::new(),
        }
    }

    /// Process one chunk of child output.
    ///
    /// All bytes reach the model. With `answer_queries` true, each recognised capability query
    /// (cursor position, primary/secondary DA, XTVERSION, OSC 10/11 colours, kitty keyboard) is
    /// answered in `replies` and left out of `forward`; a cursor-position report uses the model
    /// state right after the bytes that precede the query. With `answer_queries` false (a human's
    /// terminal is attached and answers), nothing is answered and every byte is forwarded,
    /// including any held back from the previous chunk.
    pub fn feed(&mut self, bytes: &[u8], answer_queries: bool) -> Fed {
        self.wake();
        self.changed();
        let mut fed = Fed::default();
        if !answer_queries {
            fed.forward = self.scanner.take_pending();
            fed.forward.extend_from_slice(bytes);
            self.parser.process(bytes);
            return fed;
        }
        fed.forward.reserve(bytes.len());
        let mut modelled = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if let Some(query) = self.scanner.push(b, &mut fed.forward) {
                self.parser.process(&bytes[modelled..=i]);
                modelled = i + 1;
                let answer = responder::answer(query, self.report_position(), VERSION);
                fed.replies.extend_from_slice(&answer);
            }
        }
        self.parser.process(&bytes[modelled..]);
        fed
    }

    /// Cursor position for a report: 0-based, clamped inside the screen (a cursor parked past
    /// the last column after a full row reports the last column).
    fn report_position(&self) -> (u16, u16) {
        let (rows, cols) = self.size();
        let (r, c) = self.vt().cursor_position();
        (r.min(rows - 1), c.min(cols - 1))
    }

    /// Current size as (rows, cols).
    pub fn size(&self) -> (u16, u16) {
        self.vt().size()
    }

    /// Resize the model (after the child's pty was resized for an attached client); at least
    /// `MIN_ROWS` × `MIN_COLS`.
    pub fn resize(&mut self, rows: u16, cols: u16) {
        self.wake();
        self.changed();
        self.parser
            .screen_mut()
            .set_size(rows.max(MIN_ROWS), cols.max(MIN_COLS));
    }

    /// The model: the parser's, or the resting one rebuilt on this first read after a rest.
    fn vt(&self) -> &vt100::Screen {
        match &self.resting {
            None => self.parser.screen(),
            Some(r) => self.woken.get_or_init(|| r.rebuild()),
        }
    }

    /// A resting model goes back into the parser (before a change).
    fn wake(&mut self) {
        if let Some(r) = self.resting.take() {
            let model = self.woken.take().unwrap_or_else(|| r.rebuild());
            *self.parser.screen_mut() = model;
        }
    }

    /// Set the model aside as the bytes that redraw it (issue 31 item 4: a 50 × 220 model
    /// holds 344 KiB; a quiet session's screen rests in a few hundred bytes), when a model
    /// rebuilt from them is exactly this one; every read and change after this behaves as
    /// before (the first one rebuilds the model, ~1 ms). Returns whether the screen rests.
    /// A model rebuilt by a read since the last rest is dropped again.
    pub fn rest(&mut self) -> bool {
        if self.resting.is_some() {
            self.woken.take();
            return true;
        }
        let Some(r) = rest::Resting::of(self.parser.screen(), SCROLLBACK_LINES, redraw) else {
            self.refused = true;
            return false;
        };
        *self.parser.screen_mut() = rest::placeholder();
        self.resting = Some(r);
        self.changed();
        true
    }

    /// Whether the model is in memory: not resting, or rebuilt by a read since its rest.
    pub fn in_memory(&self) -> bool {
        self.resting.is_none() || self.woken.get().is_some()
    }

    /// Whether a [`Screen::rest`] now would set a model aside: it is in memory and no rest
    /// was refused since its last change.
    pub fn may_rest(&self) -> bool {
        self.in_memory() && !self.refused
    }

    /// The state changed: what was made of the old one is dropped.
    fn changed(&mut self) {
        self.refused = false;
        self.rows_cache.take();
        self.text_cache.take();
    }

    /// The visible rows as plain text, each right-trimmed; always `size().0` entries. Made
    /// once per state and borrowed after that.
    pub fn rows(&self) -> &[String] {
        self.rows_cache.get_or_init(|| {
            let (_, cols) = self.size();
            self.vt()
                .rows(0, cols)
                .map(|r| r.trim_end().to_string())
                .collect()
        })
    }

    /// Row `r`'s text as in [`Screen::rows`] (right-trimmed; empty past the last row). When
    /// the rows are not made yet, only this row is: a decision that reads a few rows per
    /// chunk of output does not make the others (issue 31 item 3).
    pub fn row_text(&self, r: u16) -> String {
        if let Some(rows) = self.rows_cache.get() {
            return rows.get(usize::from(r)).cloned().unwrap_or_default();
        }
        // vt100 writes row `r` whole (as its `rows` does), then nothing of row `r + 1`: a
        // line break, or none after a wrapped row; the rows above are skipped, not written.
        let mut text = self.vt().contents_between(r, 0, r.saturating_add(1), 0);
        text.truncate(text.trim_end().len());
        text
    }

    /// The last row whose text, leading blanks skipped, starts with `glyph` — the row
    /// [`Screen::composer_text`] reads — found from the bottom up, making only the rows up to
    /// it. `None` when no row does.
    pub fn last_row_starting_with(&self, glyph: &str) -> Option<u16> {
        let (rows, _) = self.size();
        (0..rows)
            .rev()
            .find(|&r| self.row_text(r).trim_start().starts_with(glyph))
    }

    /// The visible screen as plain text: [`Screen::rows`] joined by `\n`. Made once per
    /// state and borrowed after that.
    pub fn text(&self) -> &str {
        self.text_cache.get_or_init(|| self.rows().join("\n"))
    }

    /// The last `max_bytes` bytes (at most) of the screen text with trailing blank lines
    /// removed, cut forward to a char boundary (for the `tail=` of exits.log, spec 04 §1).
    pub fn tail_text(&self, max_bytes: usize) -> String {
        let text = self.text();
        let text = text.trim_end();
        let mut start = text.len().saturating_sub(max_bytes);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        text[start..].to_string()
    }

    /// Cursor position as 0-based (row, col); the column may equal the width (pending wrap).
    pub fn cursor(&self) -> (u16, u16) {
        self.vt().cursor_position()
    }

    /// Whether the child switched the terminal to application-cursor mode (DECCKM): arrow keys
    /// must then be sent as `ESC O A..D` (see [`encode_keys`](super::keys::encode_keys)).
    #[cfg(test)]
    pub fn application_cursor(&self) -> bool {
        self.vt().application_cursor()
    }

    /// Bytes that redraw the current state on a fresh terminal for an attaching client
    /// (spec 04 §1 "Attach"): hide the cursor, clear, replay the scrollback (with colours) so it
    /// scrolls into the client's history, then the formatted screen, the cursor position and
    /// visibility, and the input modes (application cursor/keypad, bracketed paste, mouse).
    pub fn snapshot(&self) -> Vec<u8> {
        redraw(self.vt())
    }

    /// The composer of an agent TUI (spec 05 §7): the LAST row whose first visible character is
    /// `glyph` (`❯` for claude, `›` for codex). `None` when no row starts with it.
    pub fn composer_text(&self, glyph: &str) -> Option<ComposerState> {
        let screen = self.vt();
        let (_, cols) = screen.size();
        let row = self.last_row_starting_with(glyph)?;
        let mut past_glyph = false;
        let mut seen = String::new();
        let mut text = String::new();
        let mut typed = false;
        for col in 0..cols {
            let Some(cell) = screen.cell(row, col) else {
                break;
            };
            if cell.is_wide_continuation() {
                continue;
            }
            let contents = cell.contents();
            if !past_glyph {
                seen.push_str(if contents.is_empty() { " " } else { contents });
                past_glyph = seen.trim_start().starts_with(glyph);
                continue;
            }
            text.push_str(if contents.is_empty() { " " } else { contents });
            let visible = contents.chars().any(|c| !c.is_whitespace());
            // The TUI's own drawn cursor is an inverse cell: over a placeholder's first letter
            // it has the default colour, yet nobody typed it.
            if visible && !cell.dim() && !cell.inverse() && cell.fgcolor() == vt100::Color::Default
            {
                typed = true;
            }
        }
        Some(ComposerState {
            text: text.trim().to_string(),
            typed,
        })
    }
}

/// [`Screen::snapshot`] of a model.
fn redraw(screen: &vt100::Screen) -> Vec<u8> {
    let mut out = b"\x1b[?25l\x1b[m\x1b[H\x1b[2J".to_vec();
    if screen.alternate_screen() {
        out.extend_from_slice(b"\x1b[?1049h");
    } else {
        write_scrollback(screen, &mut out);
    }
    out.extend_from_slice(&screen.state_formatted());
    out
}

/// Append the model's scrollback, oldest line first, so that it scrolls into the history of
/// the client terminal: each page is drawn at the top of a blank screen, then scrolled off by
/// line feeds at the bottom row, leaving the screen blank again.
fn write_scrollback(screen: &vt100::Screen, out: &mut Vec<u8>) {
    let (rows, cols) = screen.size();
    let mut view = screen.clone();
    view.set_scrollback(usize::MAX);
    let mut left = view.scrollback();
    while left > 0 {
        view.set_scrollback(left);
        let page = left.min(usize::from(rows));
        for (i, line) in view.rows_formatted(0, cols).take(page).enumerate() {
            out.extend_from_slice(format!("\x1b[{};1H", i + 1).as_bytes());
            out.extend_from_slice(&line);
            out.extend_from_slice(b"\x1b[m");
        }
        out.extend_from_slice(format!("\x1b[{rows};1H").as_bytes());
        out.extend(std::iter::repeat_n(b'\n', page));
        left -= page;
    }
}

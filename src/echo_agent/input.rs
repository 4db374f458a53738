//! Terminal input for the echo agent, as pure state machines: [`InputParser`] turns raw bytes
//! into [`Key`]s (bracketed pastes reassembled across reads), [`Composer`] holds what the
//! user is writing.

/// One thing the user did at the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A typed character.
    Char(char),
    /// A whole bracketed paste (`ESC[200~ … ESC[201~`), markers removed.
    Paste(String),
    /// `\r`: submit the composer.
    Enter,
    /// DEL (0x7f) or BS (0x08).
    Backspace,
    /// A lone ESC.
    Escape,
    /// Ctrl-C (0x03).
    CtrlC,
    /// Ctrl-D (0x04).
    CtrlD,
}

const PASTE_START: &[u8] = b"200";
const PASTE_END: &[u8] = b"\x1b[201~";
/// Longest CSI parameter run kept; longer sequences are dropped as garbage.
const MAX_CSI: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum State {
    #[default]
    Ground,
    /// Just saw ESC.
    Esc,
    /// Inside `ESC [` with these parameter bytes so far.
    Csi(Vec<u8>),
    /// Inside `ESC O` (one more byte ends it).
    Ss3,
    /// Inside a bracketed paste with these bytes so far.
    Paste(Vec<u8>),
}

/// Raw-mode byte parser. Feed it every read; call [`InputParser::flush`] when no byte came
/// for a short while, so that a lone ESC becomes [`Key::Escape`].
#[derive(Debug, Default)]
pub struct InputParser {
    state: State,
    utf8: Vec<u8>,
}

impl InputParser {
    /// A parser in the ground state.
    pub fn new() -> InputParser {
        InputParser::default()
    }

    /// Parse `bytes`, returning the keys completed by them. Partial escape sequences, pastes
    /// and UTF-8 characters wait for the next call.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        let mut keys = Vec::new();
        for &b in bytes {
            self.byte(b, &mut keys);
        }
        keys
    }

    /// True when a lone ESC is waiting to be told apart from an escape sequence.
    pub fn escape_pending(&self) -> bool {
        self.state == State::Esc
    }

    /// Input went quiet: a pending lone ESC is an Escape key.
    pub fn flush(&mut self) -> Vec<Key> {
        if self.state == State::Esc {
            self.state = State::Ground;
            vec![Key::Escape]
        } else {
            Vec::new()
        }
    }

    fn byte(&mut self, b: u8, keys: &mut Vec<Key>) {
        match std::mem::take(&mut self.state) {
            State::Ground => self.ground(b, keys),
            State::Esc => match b {
                b'[' => self.state = State::Csi(Vec::new()),
                b'O' => self.state = State::Ss3,
                0x1b => {
                    keys.push(Key::Escape);
                    self.state = State::Esc;
                }
                _ => {
                    keys.push(Key::Escape);
                    self.ground(b, keys);
                }
            },
            State::Csi(mut params) => match b {
                0x20..=0x3f if params.len() < MAX_CSI => {
                    params.push(b);
                    self.state = State::Csi(params);
                }
                0x40..=0x7e if b == b'~' && params == PASTE_START => {
                    self.state = State::Paste(Vec::new());
                }
                // Any other sequence (arrows, focus, …) is ignored.
                _ => {}
            },
            State::Ss3 => {}
            State::Paste(mut buf) => {
                buf.push(b);
                if buf.ends_with(PASTE_END) {
                    buf.truncate(buf.len() - PASTE_END.len());
                    keys.push(Key::Paste(String::from_utf8_lossy(&buf).into_owned()));
                } else {
                    self.state = State::Paste(buf);
                }
            }
        }
    }

    fn ground(&mut self, b: u8, keys: &mut Vec<Key>) {
        if b >= 0x80 {
            self.utf8.push(b);
            match std::str::from_utf8(&self.utf8) {
                Ok(s) => {
                    keys.extend(s.chars().map(Key::Char));
                    self.utf8.clear();
                }
                Err(e) if e.error_len().is_some() => {
                    keys.push(Key::Char(char::REPLACEMENT_CHARACTER));
                    self.utf8.clear();
                }
                Err(_) => {}
            }
            return;
        }
        if !self.utf8.is_empty() {
            // A character cut short by an ASCII byte.
            keys.push(Key::Char(char::REPLACEMENT_CHARACTER));
            self.utf8.clear();
        }
        match b {
            0x1b => self.state = State::Esc,
            b'\r' => keys.push(Key::Enter),
            0x7f | 0x08 => keys.push(Key::Backspace),
            0x03 => keys.push(Key::CtrlC),
            0x04 => keys.push(Key::CtrlD),
            0x20..=0x7e => keys.push(Key::Char(b as char)),
            // LF, TAB and other control bytes are not used by the composer.
            _ => {}
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Typed(String),
    Pasted { text: String, label: String },
}

/// Most characters the prompt line shows of the composer (the session is 220 columns wide).
pub const DISPLAY_MAX: usize = 200;

/// The composer: typed text and pastes, in order. Pastes are shown as
/// `[Pasted text #k +n lines]`, never raw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Composer {
    segments: Vec<Segment>,
    pastes: usize,
}

impl Composer {
    /// An empty composer.
    pub fn new() -> Composer {
        Composer::default()
    }

    /// Type one character.
    pub fn insert_char(&mut self, c: char) {
        if let Some(Segment::Typed(s)) = self.segments.last_mut() {
            s.push(c);
        } else {
            self.segments.push(Segment::Typed(c.to_string()));
        }
    }

    /// Add a paste; it is numbered from 1 within this composer.
    pub fn insert_paste(&mut self, text: String) {
        self.pastes += 1;
        let label = format!(
            "[Pasted text #{} +{} lines]",
            self.pastes,
            line_breaks(&text)
        );
        self.segments.push(Segment::Pasted { text, label });
    }

    /// Remove the last typed character, or the whole last paste. False when empty.
    pub fn backspace(&mut self) -> bool {
        match self.segments.last_mut() {
            None => false,
            Some(Segment::Typed(s)) => {
                s.pop();
                if s.is_empty() {
                    self.segments.pop();
                }
                true
            }
            Some(Segment::Pasted { .. }) => {
                self.segments.pop();
                true
            }
        }
    }

    /// What the prompt line shows after `❯ `: the composer's display text, or, beyond
    /// [`DISPLAY_MAX`] characters, `…` and its last `DISPLAY_MAX - 1` (issue 12 item 3: a
    /// redraw costs the same whatever the composer holds, so typing a 2 MB line stays linear).
    /// Built from the end, in time proportional to what it shows.
    pub fn display(&self) -> String {
        let mut tail: Vec<char> = Vec::new();
        let mut cut = false;
        'segments: for seg in self.segments.iter().rev() {
            let shown = match seg {
                Segment::Typed(t) => t.as_str(),
                Segment::Pasted { label, .. } => label.as_str(),
            };
            for c in shown.chars().rev() {
                if tail.len() == DISPLAY_MAX {
                    cut = true;
                    break 'segments;
                }
                tail.push(c);
            }
        }
        if cut {
            tail.truncate(DISPLAY_MAX - 1);
            tail.push('…');
        }
        tail.iter().rev().collect()
    }

    /// The full text that a submit sends (pastes expanded).
    pub fn text(&self) -> String {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Typed(t) => t.as_str(),
                Segment::Pasted { text, .. } => text.as_str(),
            })
            .collect()
    }

    /// True when nothing is typed or pasted.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Submit: return the full text and start over (paste numbers restart at 1).
    pub fn take(&mut self) -> String {
        let text = self.text();
        *self = Composer::default();
        text
    }
}

/// Number of line breaks (`\r\n`, `\n` or `\r`) in `text`.
fn line_breaks(text: &str) -> usize {
    text.replace("\r\n", "\n")
        .chars()
        .filter(|c| *c == '\n' || *c == '\r')
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(p: &mut InputParser, chunks: &[&[u8]]) -> Vec<Key> {
        chunks.iter().flat_map(|c| p.feed(c)).collect()
    }

    #[test]
    fn paste_markers_split_at_every_byte() {
        let stream = b"a\x1b[200~<iap x>\r\nline\x1b[201~\r";
        for cut in 0..=stream.len() {
            let mut p = InputParser::new();
            let keys = feed_all(&mut p, &[&stream[..cut], &stream[cut..]]);
            assert_eq!(
                keys,
                vec![
                    Key::Char('a'),
                    Key::Paste("<iap x>\r\nline".into()),
                    Key::Enter
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn paste_of_multibyte_text_split_inside_a_char() {
        let stream = "\x1b[200~привет\x1b[201~".as_bytes();
        let mut p = InputParser::new();
        let keys = feed_all(&mut p, &[&stream[..8], &stream[8..]]);
        assert_eq!(keys, vec![Key::Paste("привет".into())]);
        let mut p = InputParser::new();
        let bytes = "ü".as_bytes();
        assert!(p.feed(&bytes[..1]).is_empty());
        assert_eq!(p.feed(&bytes[1..]), vec![Key::Char('ü')]);
    }

    #[test]
    fn control_keys_and_sequences() {
        let mut p = InputParser::new();
        assert_eq!(
            p.feed(b"x\x7f\x08\x03\x04\n\t\x1b[A\x1bOB"),
            vec![
                Key::Char('x'),
                Key::Backspace,
                Key::Backspace,
                Key::CtrlC,
                Key::CtrlD
            ]
        );
        // A lone ESC waits until input goes quiet.
        assert!(p.feed(b"\x1b").is_empty());
        assert!(p.escape_pending());
        assert_eq!(p.flush(), vec![Key::Escape]);
        assert!(p.flush().is_empty());
        // ESC followed by a plain key: Escape, then the key.
        assert_eq!(p.feed(b"\x1bq"), vec![Key::Escape, Key::Char('q')]);
    }

    #[test]
    fn composer_shows_pastes_as_labels_and_edits() {
        let mut c = Composer::new();
        for ch in "hi ".chars() {
            c.insert_char(ch);
        }
        c.insert_paste("one\ntwo\nthree".into());
        c.insert_char('!');
        assert_eq!(c.display(), "hi [Pasted text #1 +2 lines]!");
        assert_eq!(c.text(), "hi one\ntwo\nthree!");
        assert!(c.backspace());
        assert!(c.backspace());
        assert_eq!(c.display(), "hi ");
        c.insert_paste("a\r\nb".into());
        assert_eq!(c.display(), "hi [Pasted text #2 +1 lines]");
        assert_eq!(c.take(), "hi a\r\nb");
        assert!(c.is_empty());
        assert!(!c.backspace());
        c.insert_paste("x".into());
        assert_eq!(c.display(), "[Pasted text #1 +0 lines]");
    }

    #[test]
    fn a_long_composer_shows_its_tail() {
        let mut c = Composer::new();
        for _ in 0..DISPLAY_MAX {
            c.insert_char('a');
        }
        assert_eq!(c.display(), "a".repeat(DISPLAY_MAX));
        c.insert_char('b');
        let shown = c.display();
        assert_eq!(shown.chars().count(), DISPLAY_MAX);
        assert!(shown.starts_with('…') && shown.ends_with("ab"), "{shown}");
        c.insert_paste("x\ny".into());
        assert!(c.display().ends_with("ab[Pasted text #1 +1 lines]"));
        assert_eq!(c.text().len(), DISPLAY_MAX + 1 + 3);
    }

    #[test]
    fn enter_submits_typed_text_with_edits() {
        let mut p = InputParser::new();
        let mut c = Composer::new();
        let mut submitted = Vec::new();
        for key in p.feed(b"hellp\x7fo\r") {
            match key {
                Key::Char(ch) => c.insert_char(ch),
                Key::Backspace => {
                    c.backspace();
                }
                Key::Enter => submitted.push(c.take()),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(submitted, vec!["hello".to_string()]);
    }
}

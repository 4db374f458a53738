//! Terminal capability queries (spec 04 §1 step 3): recognising them in the child's output,
//! even when split across reads, and the answers the daemon gives in place of a terminal.

/// Longest run of bytes held back while deciding whether they form a query (spec: at most 16).
pub const MAX_PENDING: usize = 16;

const ESC: u8 = 0x1b;

/// Which colour an OSC 10/11 query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OscColor {
    /// OSC 10: default foreground.
    Foreground,
    /// OSC 11: default background.
    Background,
}

/// A recognised query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// `ESC[6n`: cursor position report.
    CursorPosition,
    /// `ESC[c`, `ESC[0c`: primary device attributes.
    PrimaryDa,
    /// `ESC[>c`, `ESC[>0c`: secondary device attributes.
    SecondaryDa,
    /// `ESC[>0q` (or `ESC[>q`): terminal name and version.
    XtVersion,
    /// `ESC]10;?` / `ESC]11;?`; `st` is true when terminated by `ESC \` rather than BEL.
    Color { which: OscColor, st: bool },
    /// `ESC[?u`: kitty keyboard protocol flags.
    KittyKeyboard,
}

const PATTERNS: &[(&[u8], Query)] = &[
    (b"\x1b[6n", Query::CursorPosition),
    (b"\x1b[c", Query::PrimaryDa),
    (b"\x1b[0c", Query::PrimaryDa),
    (b"\x1b[>c", Query::SecondaryDa),
    (b"\x1b[>0c", Query::SecondaryDa),
    (b"\x1b[>q", Query::XtVersion),
    (b"\x1b[>0q", Query::XtVersion),
    (b"\x1b[?u", Query::KittyKeyboard),
    (
        b"\x1b]10;?\x07",
        Query::Color {
            which: OscColor::Foreground,
            st: false,
        },
    ),
    (
        b"\x1b]10;?\x1b\\",
        Query::Color {
            which: OscColor::Foreground,
            st: true,
        },
    ),
    (
        b"\x1b]11;?\x07",
        Query::Color {
            which: OscColor::Background,
            st: false,
        },
    ),
    (
        b"\x1b]11;?\x1b\\",
        Query::Color {
            which: OscColor::Background,
            st: true,
        },
    ),
];

/// Foreground of the fixed dark palette, in the `rgb:` form of xterm colour reports.
const DARK_FOREGROUND: &str = "rgb:d8d8/d8d8/d8d8";
/// Background of the fixed dark palette.
const DARK_BACKGROUND: &str = "rgb:1c1c/1c1c/1c1c";

enum Match {
    Full(Query),
    Prefix,
    None,
}

fn match_pending(pending: &[u8]) -> Match {
    let mut prefix = false;
    for (pattern, query) in PATTERNS {
        if *pattern == pending {
            return Match::Full(*query);
        }
        prefix |= pattern.starts_with(pending);
    }
    if prefix && pending.len() < MAX_PENDING {
        Match::Prefix
    } else {
        Match::None
    }
}

/// Byte-at-a-time recogniser. Bytes that may start a query are held back until they either
/// complete one or cannot; everything else passes through untouched and in order.
#[derive(Debug, Default)]
pub struct Scanner {
    pending: Vec<u8>,
}

impl Scanner {
    /// Feed one byte. Bytes that are certainly not part of a query are appended to `out`; a
    /// completed query is returned (its bytes are not appended).
    pub fn push(&mut self, byte: u8, out: &mut Vec<u8>) -> Option<Query> {
        if self.pending.is_empty() {
            if byte == ESC {
                self.pending.push(byte);
            } else {
                out.push(byte);
            }
            return None;
        }
        self.pending.push(byte);
        match match_pending(&self.pending) {
            Match::Full(q) => {
                self.pending.clear();
                Some(q)
            }
            Match::Prefix => None,
            Match::None => {
                // Release the leading ESC and rescan the rest: it may hold the start of a query.
                let held = std::mem::take(&mut self.pending);
                out.push(held[0]);
                let mut found = None;
                for &b in &held[1..] {
                    // Held bytes were a strict prefix of a pattern, so a query found by the
                    // rescan can only end with the last byte, `byte`: at most one is found.
                    if let Some(q) = self.push(b, out) {
                        found = Some(q);
                    }
                }
                found
            }
        }
    }

    /// Give up on the held bytes (the caller forwards them as they are).
    pub fn take_pending(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

/// The reply to `query`. `cursor` is the model's 0-based (row, col) at the point of the query;
/// the report is 1-based. `version` goes into the XTVERSION answer `iapeer(<version>)`.
pub fn answer(query: Query, cursor: (u16, u16), version: &str) -> Vec<u8> {
    match query {
        Query::CursorPosition => format!(
            "\x1b[{};{}R",
            u32::from(cursor.0) + 1,
            u32::from(cursor.1) + 1
        )
        .into_bytes(),
        Query::PrimaryDa => b"\x1b[?62;22c".to_vec(),
        Query::SecondaryDa => b"\x1b[>0;276;0c".to_vec(),
        Query::XtVersion => format!("\x1bP>|iapeer({version})\x1b\\").into_bytes(),
        Query::KittyKeyboard => b"\x1b[?0u".to_vec(),
        Query::Color { which, st } => {
            let (code, value) = match which {
                OscColor::Foreground => (10, DARK_FOREGROUND),
                OscColor::Background => (11, DARK_BACKGROUND),
            };
            let end = if st { "\x1b\\" } else { "\x07" };
            format!("\x1b]{code};{value}{end}").into_bytes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(s: &mut Scanner, bytes: &[u8]) -> (Vec<u8>, Vec<Query>) {
        let mut out = Vec::new();
        let mut queries = Vec::new();
        for &b in bytes {
            queries.extend(s.push(b, &mut out));
        }
        (out, queries)
    }

    #[test]
    fn recognises_every_query_form() {
        for (pattern, query) in PATTERNS {
            let mut s = Scanner::default();
            let (out, qs) = scan(&mut s, pattern);
            assert!(out.is_empty(), "{pattern:?}");
            assert_eq!(qs, vec![*query]);
        }
    }

    #[test]
    fn other_sequences_pass_through_unchanged() {
        let mut s = Scanner::default();
        let input = b"\x1b[?2004h\x1b[<u\x1b]7501;?\x07\x1b[38;5;1mx\x1b\x1b[6n";
        let (out, qs) = scan(&mut s, input);
        assert_eq!(qs, vec![Query::CursorPosition]);
        assert_eq!(out, input[..input.len() - 4].to_vec());
    }

    #[test]
    fn answers() {
        let v = "1.2.3";
        assert_eq!(answer(Query::CursorPosition, (0, 0), v), b"\x1b[1;1R");
        assert_eq!(answer(Query::CursorPosition, (46, 2), v), b"\x1b[47;3R");
        assert_eq!(
            answer(Query::XtVersion, (0, 0), v),
            b"\x1bP>|iapeer(1.2.3)\x1b\\"
        );
        // A colour answer starts with its OSC number and ends with the terminator the query
        // used (ST or BEL).
        for (which, st, head, end) in [
            (
                OscColor::Background,
                true,
                &b"\x1b]11;rgb:"[..],
                &b"\x1b\\"[..],
            ),
            (OscColor::Foreground, false, b"\x1b]10;rgb:", b"\x07"),
        ] {
            let got = answer(Query::Color { which, st }, (0, 0), v);
            assert!(
                got.starts_with(head) && got.ends_with(end),
                "{which:?}: {got:?}"
            );
        }
    }
}

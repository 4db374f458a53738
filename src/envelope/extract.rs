//! The stream extractor for router runtimes and agent inputs (spec 03 §2 "Decoding").

use super::decode::decode_at;
use super::scan::{self, OpenTag, OPEN};
use super::Envelope;

/// How many trailing bytes are kept when the buffer holds no `<iap ` at all (enough for a
/// split `<iap `).
const KEEP_WITHOUT_OPEN: usize = 5;

/// Pull every complete envelope out of `buf` (a byte stream that may also carry noise,
/// bracketed-paste markers `ESC[200~`/`ESC[201~`, CR and LF between envelopes).
///
/// Returns the envelopes in stream order and the number of bytes consumed: the caller keeps
/// `buf[consumed..]` and appends new bytes to it before the next call.
///
/// Rules: find `<iap `; its open tag must close with `>` within 1024 bytes (no `<` inside)
/// and carry the sender personality and runtime under either naming — incomplete: wait for
/// more bytes; invalid: skip one byte and rescan. Then find `</iap>` outside CDATA — missing:
/// wait. A candidate that fails to decode (including one that has another `<iap ` before its
/// close, or is not UTF-8) is skipped by one byte. Without any `<iap `, only the last 5 bytes
/// are kept.
pub fn extract(buf: &[u8]) -> (Vec<Envelope>, usize) {
    let mut found = Vec::new();
    let mut pos = 0;
    loop {
        let Some(start) = scan::find(buf, OPEN, pos) else {
            return (found, pos.max(buf.len().saturating_sub(KEEP_WITHOUT_OPEN)));
        };
        let gt = match scan::open_tag_end(buf, start) {
            OpenTag::Complete(i) => i,
            OpenTag::Incomplete => return (found, start),
            OpenTag::Invalid => {
                pos = start + 1;
                continue;
            }
        };
        let tag = String::from_utf8_lossy(&buf[start..=gt]);
        if scan::sender(&tag).is_none() {
            pos = start + 1;
            continue;
        }
        let close = match scan::find_outside_cdata(buf, gt + 1, &[scan::CLOSE, OPEN]) {
            Some((i, _)) => i,
            None => return (found, start),
        };
        // Decode exactly the candidate `<iap …>…</iap>` (or up to a nested `<iap `, which
        // fails to decode and is skipped like any other bad candidate).
        let end = (close + scan::CLOSE.len()).min(buf.len());
        match std::str::from_utf8(&buf[start..end])
            .ok()
            .and_then(|text| decode_at(text, 0).ok())
        {
            Some((env, used)) => {
                found.push(env);
                pos = start + used;
            }
            None => pos = start + 1,
        }
    }
}

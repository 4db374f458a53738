//! Decoding either envelope form (spec 03 §2 "Decoding").

use super::scan::{self, OpenTag, CLOSE, OPEN};
use super::Envelope;
use crate::names::Intelligence;

/// Why a text is not a decodable envelope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// No `<iap ` in the text.
    #[error("no <iap …> envelope in the text")]
    NoEnvelope,
    /// The open tag has no `>` within 1024 bytes, or contains a `<`.
    #[error("envelope open tag is not closed by '>' within 1024 bytes")]
    BadOpenTag,
    /// The open tag lacks the sender personality or runtime (under either naming).
    #[error("envelope open tag lacks the sender personality or runtime attribute")]
    NoSender,
    /// No `</iap>` outside CDATA (or a CDATA section never ends).
    #[error("envelope has no </iap> close tag")]
    Unclosed,
    /// Another `<iap ` starts (outside CDATA) before this envelope's `</iap>`.
    #[error("another <iap …> starts before this envelope's </iap>")]
    Nested,
    /// No `<message>` / `<msg>` element inside the envelope.
    #[error("envelope has no <message> or <msg> element")]
    NoMessage,
    /// The named element has no close tag, or a CDATA section in it never ends.
    #[error("envelope element <{0}> is not closed properly")]
    BadElement(&'static str),
}

/// Decode the first envelope in `text`, in either form.
///
/// Accepts both attribute namings (`from`/`runtime`/`intelligence` win over
/// `from-personality`/`from-runtime`/`from-intelligence`), `<message>` or `<msg>`, CDATA or
/// raw element text (adjacent CDATA sections concatenate). Attribute values are unescaped;
/// `human`/`scripted` intelligence read as natural/absent, unknown values are dropped; an
/// empty topic is `None`; empty attachments are no attachments. Text around the envelope is
/// ignored.
///
/// Errors: see `DecodeError`.
pub fn decode(text: &str) -> Result<Envelope, DecodeError> {
    let start = scan::find(text.as_bytes(), OPEN, 0).ok_or(DecodeError::NoEnvelope)?;
    decode_at(text, start).map(|(env, _)| env)
}

/// Decode the envelope whose `<iap ` starts at byte `start` of `text`; also returns the index
/// just past its `</iap>`.
pub(super) fn decode_at(text: &str, start: usize) -> Result<(Envelope, usize), DecodeError> {
    let bytes = text.as_bytes();
    let gt = match scan::open_tag_end(bytes, start) {
        OpenTag::Complete(i) => i,
        OpenTag::Incomplete | OpenTag::Invalid => return Err(DecodeError::BadOpenTag),
    };
    let tag = &text[start..=gt];
    let (from, runtime) = scan::sender(tag).ok_or(DecodeError::NoSender)?;
    let content = gt + 1;
    let close = match scan::find_outside_cdata(bytes, content, &[CLOSE, OPEN]) {
        Some((i, 0)) => i,
        Some(_) => return Err(DecodeError::Nested),
        None => return Err(DecodeError::Unclosed),
    };
    // Everything below searches only inside the envelope.
    let inner = &text[..close];

    let attachments = match scan::find_outside_cdata(inner.as_bytes(), content, &[b"<attachments>"])
    {
        Some((i, _)) => {
            let (list, _) = scan::element_text(inner, i + "<attachments>".len(), "</attachments>")
                .ok_or(DecodeError::BadElement("attachments"))?;
            if list.is_empty() {
                Vec::new()
            } else {
                list.split('\n').map(str::to_string).collect()
            }
        }
        None => Vec::new(),
    };

    let (at, which) =
        scan::find_outside_cdata(inner.as_bytes(), content, &[b"<message>", b"<msg>"])
            .ok_or(DecodeError::NoMessage)?;
    let (open, close_tag) = if which == 0 {
        ("<message>", "</message>")
    } else {
        ("<msg>", "</msg>")
    };
    let (body, _) = scan::element_text(inner, at + open.len(), close_tag).ok_or(
        DecodeError::BadElement(if which == 0 { "message" } else { "msg" }),
    )?;

    let env = Envelope {
        from,
        runtime,
        intelligence: scan::attr_any(tag, &["intelligence", "from-intelligence"])
            .and_then(|v| Intelligence::parse(&v)),
        ts: scan::attr(tag, "ts"),
        topic: scan::attr(tag, "topic").filter(|t| !t.is_empty()),
        attachments,
        body,
    };
    Ok((env, close + CLOSE.len()))
}

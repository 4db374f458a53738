//! Byte-level scanning shared by [`super::decode`] and [`super::extract`]: CDATA-aware tag
//! search, the open tag's bounds and anchored attribute lookup (spec 03 §2 "Decoding").

/// Start of an envelope.
pub(super) const OPEN: &[u8] = b"<iap ";
/// End of an envelope.
pub(super) const CLOSE: &[u8] = b"</iap>";
const CDATA_OPEN_STR: &str = "<![CDATA[";
const CDATA_CLOSE_STR: &str = "]]>";
const CDATA_OPEN: &[u8] = CDATA_OPEN_STR.as_bytes();
const CDATA_CLOSE: &[u8] = CDATA_CLOSE_STR.as_bytes();
/// The open tag must close with `>` within this many bytes of its `<`.
pub(super) const OPEN_TAG_LIMIT: usize = 1024;

/// First index `>= from` where `needle` occurs in `hay`.
pub(super) fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > hay.len() || needle.is_empty() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| i + from)
}

/// First occurrence at or after `from`, outside CDATA sections, of any of `needles`:
/// `(index, which needle)`. `None` when none occurs, or when the search runs into a CDATA
/// section that does not end (more bytes may still arrive).
pub(super) fn find_outside_cdata(
    hay: &[u8],
    from: usize,
    needles: &[&[u8]],
) -> Option<(usize, usize)> {
    let mut i = from;
    while i < hay.len() {
        let rest = &hay[i..];
        if rest.starts_with(CDATA_OPEN) {
            let end = find(hay, CDATA_CLOSE, i + CDATA_OPEN.len())?;
            i = end + CDATA_CLOSE.len();
            continue;
        }
        if let Some(k) = needles.iter().position(|n| rest.starts_with(n)) {
            return Some((i, k));
        }
        i += 1;
    }
    None
}

/// Where an open tag starting at `start` (`<iap `) ends.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum OpenTag {
    /// Index of its closing `>`.
    Complete(usize),
    /// No `>` yet and fewer than [`OPEN_TAG_LIMIT`] bytes seen: wait for more.
    Incomplete,
    /// No `>` within the limit, or a `<` inside (attribute values escape `<`).
    Invalid,
}

/// Find the `>` that closes the open tag at `start`.
pub(super) fn open_tag_end(hay: &[u8], start: usize) -> OpenTag {
    let limit = (start + OPEN_TAG_LIMIT).min(hay.len());
    for (i, &b) in hay.iter().enumerate().take(limit).skip(start + OPEN.len()) {
        match b {
            b'>' => return OpenTag::Complete(i),
            b'<' => return OpenTag::Invalid,
            _ => {}
        }
    }
    if hay.len() - start < OPEN_TAG_LIMIT {
        OpenTag::Incomplete
    } else {
        OpenTag::Invalid
    }
}

/// The unescaped value of attribute `name` in an open tag, anchored on the name: it must
/// follow whitespace, so `runtime=` never matches inside `from-runtime=`.
pub(super) fn attr(tag: &str, name: &str) -> Option<String> {
    let pattern = format!("{name}=\"");
    let mut from = 0;
    while let Some(rel) = tag[from..].find(&pattern) {
        let at = from + rel;
        let anchored = tag[..at]
            .chars()
            .next_back()
            .is_some_and(char::is_whitespace);
        let value_start = at + pattern.len();
        if anchored {
            let len = tag[value_start..].find('"')?;
            return Some(super::unescape_attr(&tag[value_start..value_start + len]));
        }
        from = value_start;
    }
    None
}

/// The first present of `names` (earlier names win).
pub(super) fn attr_any(tag: &str, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| attr(tag, n))
}

/// Sender personality and runtime of an open tag under either naming (short wins), both
/// non-empty.
pub(super) fn sender(tag: &str) -> Option<(String, String)> {
    let from = attr_any(tag, &["from", "from-personality"]).filter(|s| !s.is_empty())?;
    let runtime = attr_any(tag, &["runtime", "from-runtime"]).filter(|s| !s.is_empty())?;
    Some((from, runtime))
}

/// The text content of an element whose open tag ends just before `from`, up to
/// `close_tag`: CDATA sections contribute their inside (adjacent ones concatenate), other
/// text is taken raw. Returns the content and the index just past `close_tag`; `None` when
/// the close tag or a CDATA end is missing.
pub(super) fn element_text(text: &str, from: usize, close_tag: &str) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut i = from;
    loop {
        let rest = text.get(i..)?;
        if rest.starts_with(CDATA_OPEN_STR) {
            let inner = i + CDATA_OPEN_STR.len();
            let end = text[inner..].find(CDATA_CLOSE_STR)? + inner;
            out.push_str(&text[inner..end]);
            i = end + CDATA_CLOSE_STR.len();
        } else if rest.starts_with(close_tag) {
            return Some((out, i + close_tag.len()));
        } else {
            // Copy raw text up to the next `<` (the only byte that can start a CDATA or the
            // close tag).
            let first = rest.chars().next()?.len_utf8();
            let next = rest[first..].find('<').map_or(rest.len(), |k| k + first);
            out.push_str(&rest[..next]);
            i += next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_lookup_is_anchored() {
        let tag = r#"<iap from-personality="a" from-runtime="claude" runtime="codex">"#;
        assert_eq!(attr(tag, "runtime").as_deref(), Some("codex"));
        assert_eq!(attr(tag, "from-runtime").as_deref(), Some("claude"));
        let tag = r#"<iap from-personality="a" from-runtime="claude">"#;
        assert_eq!(attr(tag, "runtime"), None);
        assert_eq!(attr(tag, "from"), None);
        assert_eq!(
            attr(r#"<iap x="a&amp;lt;&quot;">"#, "x").as_deref(),
            Some("a&lt;\"")
        );
    }

    #[test]
    fn cdata_hides_needles() {
        let hay = b"<![CDATA[</iap>]]></iap>";
        assert_eq!(find_outside_cdata(hay, 0, &[CLOSE]), Some((18, 0)));
        assert_eq!(find_outside_cdata(b"<![CDATA[</iap>", 0, &[CLOSE]), None);
    }

    #[test]
    fn open_tag_bounds() {
        assert_eq!(open_tag_end(b"<iap from=\"a\">", 0), OpenTag::Complete(13));
        assert_eq!(open_tag_end(b"<iap from=\"a\"", 0), OpenTag::Incomplete);
        assert_eq!(open_tag_end(b"<iap from=<iap x>", 0), OpenTag::Invalid);
        let mut long = b"<iap ".to_vec();
        long.resize(OPEN_TAG_LIMIT, b'x');
        assert_eq!(open_tag_end(&long, 0), OpenTag::Invalid);
        long.truncate(OPEN_TAG_LIMIT - 1);
        assert_eq!(open_tag_end(&long, 0), OpenTag::Incomplete);
    }

    #[test]
    fn element_text_joins_cdata_and_raw() {
        let t = "<msg>a<![CDATA[]]]]><![CDATA[>]]>b</msg>rest";
        assert_eq!(
            element_text(t, 5, "</msg>"),
            Some(("a]]>b".to_string(), 40))
        );
        assert_eq!(element_text("<msg>a<![CDATA[x</msg>", 5, "</msg>"), None);
        assert_eq!(element_text("<msg>abc", 5, "</msg>"), None);
    }
}

//! Reading an HTTP/1.x request head (RFC 9112 §2–§6) as pure functions over the bytes
//! received so far, with the limits a local client cannot push past (issue 12 item 2): at most
//! [`MAX_HEAD_BYTES`] for the request line and headers together and at most [`MAX_HEADERS`]
//! header fields. Anything else is refused with the answer to send ([`Reply`]), never read
//! further.

use super::reply::Reply;

/// Largest request head (request line, header lines and the blank line), bytes. MCP clients
/// send well under 2 KiB.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Most header fields in one request.
pub const MAX_HEADERS: usize = 64;

/// A parsed request head. Header names are lowercase; values are trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The method token, e.g. `POST`.
    pub method: String,
    /// The request target as sent (origin-form or absolute-form).
    pub target: String,
    /// The minor version of `HTTP/1.x` (0 or 1).
    pub minor: u8,
    /// (lowercase name, value) in the order received.
    pub headers: Vec<(String, String)>,
    /// Declared `Content-Length`, bytes (`usize::MAX` when the number does not fit).
    pub content_length: Option<usize>,
    /// The client sent `Expect: 100-continue`.
    pub expect_continue: bool,
}

/// Where the head ends: the offset just past the blank line that closes it, searching `buf`
/// from `from` (the caller passes how far it has already looked, so a head arriving one byte
/// at a time is scanned once). Lines end with CRLF or a bare LF (RFC 9112 §2.2).
pub fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let start = from.saturating_sub(3);
    let mut i = start;
    while let Some(off) = buf.get(i..)?.iter().position(|b| *b == b'\n') {
        let nl = i + off;
        if nl >= 1 && buf[nl - 1] == b'\n' {
            return Some(nl + 1);
        }
        if nl >= 2 && buf[nl - 1] == b'\r' && buf[nl - 2] == b'\n' {
            return Some(nl + 1);
        }
        i = nl + 1;
    }
    None
}

/// Parse a complete head (`head` ends with its blank line, as found by [`head_end`]).
///
/// Errors, as the answer to send: 400 for a malformed request line, header line or
/// `Content-Length`; 431 beyond [`MAX_HEADERS`]; 505 for any version but HTTP/1.0 and 1.1
/// (e.g. `HTTP/2.0`, the `PRI * HTTP/2.0` preface); 501 for a `Transfer-Encoding` (bodies must
/// carry a `Content-Length`).
pub fn parse(head: &[u8]) -> Result<RequestHead, Reply> {
    let text = std::str::from_utf8(head)
        .map_err(|_| Reply::error(400, "bad request: the request head is not UTF-8"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or_default();
    let (method, target, minor) = request_line_parts(request_line)?;
    let mut headers = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        if headers.len() == MAX_HEADERS {
            return Err(Reply::error(
                431,
                &format!("request header fields too large: at most {MAX_HEADERS} fields"),
            ));
        }
        headers.push(header_line(line)?);
    }
    if headers.iter().any(|(n, _)| n == "transfer-encoding") {
        return Err(Reply::error(
            501,
            "Transfer-Encoding is not supported: send the body with a Content-Length",
        ));
    }
    let content_length = content_length(&headers)?;
    let expect_continue = headers
        .iter()
        .any(|(n, v)| n == "expect" && v.eq_ignore_ascii_case("100-continue"));
    Ok(RequestHead {
        method: method.to_owned(),
        target: target.to_owned(),
        minor,
        headers,
        content_length,
        expect_continue,
    })
}

/// The refusal for a head that has not ended within [`MAX_HEAD_BYTES`].
pub fn too_large() -> Reply {
    Reply::error(
        431,
        &format!("request header fields too large: the head is limited to {MAX_HEAD_BYTES} bytes"),
    )
}

fn request_line_parts(line: &str) -> Result<(&str, &str, u8), Reply> {
    let bad = || Reply::error(400, "bad request: expected `METHOD target HTTP/1.1`");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(bad());
    }
    if target.is_empty() || target.bytes().any(|b| b.is_ascii_control()) {
        return Err(bad());
    }
    let Some(number) = version.strip_prefix("HTTP/") else {
        return Err(bad());
    };
    match number {
        "1.1" => Ok((method, target, 1)),
        "1.0" => Ok((method, target, 0)),
        n if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
            Err(Reply::error(
                505,
                "HTTP version not supported: this server speaks HTTP/1.1",
            ))
        }
        _ => Err(bad()),
    }
}

fn header_line(line: &str) -> Result<(String, String), Reply> {
    let bad = || Reply::error(400, "bad request: malformed header line");
    let (name, value) = line.split_once(':').ok_or_else(bad)?;
    if name.is_empty() || !name.bytes().all(is_tchar) {
        return Err(bad());
    }
    let value = value.trim_matches([' ', '\t']);
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(bad());
    }
    Ok((name.to_ascii_lowercase(), value.to_owned()))
}

/// Every `Content-Length` must name the same decimal number (RFC 9112 §6.3).
fn content_length(headers: &[(String, String)]) -> Result<Option<usize>, Reply> {
    let mut found: Option<usize> = None;
    for (_, v) in headers.iter().filter(|(n, _)| n == "content-length") {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Reply::error(400, "bad request: malformed Content-Length"));
        }
        let n = v.parse::<usize>().unwrap_or(usize::MAX);
        if found.is_some_and(|f| f != n) {
            return Err(Reply::error(
                400,
                "bad request: conflicting Content-Length values",
            ));
        }
        found = Some(n);
    }
    Ok(found)
}

/// RFC 9110 §5.6.2 token characters.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(head: &str) -> u16 {
        parse(head.as_bytes()).unwrap_err().status
    }

    #[test]
    fn the_end_of_a_head_is_found_once_however_it_arrives() {
        let head = b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\nBODY";
        assert_eq!(head_end(head, 0), Some(head.len() - 4));
        for split in 0..head.len() {
            // What was received by then was searched; the search resumes where it stopped.
            match head_end(&head[..split], 0) {
                None => assert_eq!(head_end(head, split), Some(head.len() - 4), "{split}"),
                Some(end) => assert!(end == head.len() - 4 && split >= end),
            }
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\nHost: a\n\nx", 0), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n", 0), None);
    }

    #[test]
    fn a_plain_post_parses() {
        let h = parse(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Length: 12\r\nX-A:  v \r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (h.method.as_str(), h.target.as_str(), h.minor),
            ("POST", "/mcp", 1)
        );
        assert_eq!(h.content_length, Some(12));
        assert_eq!(h.headers[2], ("x-a".to_owned(), "v".to_owned()));
        assert!(!h.expect_continue);
        let h = parse(b"GET / HTTP/1.0\nExpect: 100-Continue\n\n").unwrap();
        assert_eq!(
            (h.minor, h.expect_continue, h.content_length),
            (0, true, None)
        );
    }

    #[test]
    fn other_versions_are_505_and_garbage_is_400() {
        assert_eq!(status("GET / HTTP/2.0\r\n\r\n"), 505);
        assert_eq!(status("PRI * HTTP/2.0\r\n\r\n"), 505);
        assert_eq!(status("GET / HTTP/3\r\n\r\n"), 505);
        for bad in [
            "GET / HTTP/x\r\n\r\n",
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "G(T / HTTP/1.1\r\n\r\n",
            "\r\n\r\n",
            "GET / HTTP/1.1\r\nno colon\r\n\r\n",
            "GET / HTTP/1.1\r\n folded: x\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            assert_eq!(status(bad), 400, "{bad:?}");
        }
        assert_eq!(
            status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            501
        );
    }

    #[test]
    fn header_count_and_huge_lengths() {
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: v\r\n")).collect();
        assert_eq!(status(&format!("GET / HTTP/1.1\r\n{many}\r\n")), 431);
        let h =
            parse(b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n").unwrap();
        assert_eq!(h.content_length, Some(usize::MAX));
        assert_eq!(too_large().status, 431);
    }
}

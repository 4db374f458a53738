//! Refusing a request whose declared body `tiny_http` 0.12 cannot be allowed to drain
//! (spec 02 §3, body limit; the mitigation of upstream issue "EqualReader drop allocates the
//! declared length", PR #290).
//!
//! The hazard: for a `Content-Length` above 1 KiB, `tiny_http` reads the body through an
//! `EqualReader` whose `Drop` discards what was not read by allocating `vec![0; remaining]`.
//! With an absurd declared length (e.g. 2^62) that allocation fails and the process aborts,
//! whatever our handler answered. Nothing short of reading every declared byte shrinks
//! `remaining`, so the reader must never be dropped.
//!
//! The mitigation, for declared lengths above [`DRAIN_LIMIT`] only (smaller over-limit bodies
//! are refused normally and drained by `tiny_http`, which releases everything):
//! 1. [`answer_and_abandon`] answers through `Request::upgrade`, which moves the body reader
//!    and the response writer out of the request into a stream; the request itself then drops
//!    harmlessly.
//! 2. The reply body is written to that stream. `upgrade` prints `Connection: upgrade` and
//!    `Upgrade: <token>` and no framing headers, and `Response::add_header` refuses
//!    `Content-Length` and `Connection`; so the status line and headers are followed by one
//!    extra header whose value carries `Content-Length: <n>` and `Connection: close` on their
//!    own lines. The client gets an ordinary, length-framed answer and closes the connection.
//!    This relies on `tiny_http` 0.12 printing header values verbatim; the HTTP tests read
//!    the framed answer and fail if that ever changes (the daemon would still not abort, but
//!    clients would wait for a close that never comes).
//! 3. The stream is `std::mem::forget`-ed, so the `EqualReader` is never dropped.
//!
//! The price, per abandoned connection and for the life of the process: two socket fds (the
//! read and write halves `tiny_http` dups), the `tiny_http` connection thread (blocked for
//! good waiting for the reader to be handed back; a 2 MiB virtual stack, a few KiB resident)
//! and a few KiB of buffers. The server-side socket stays in CLOSE_WAIT after the client
//! closes. This is the same exposure `tiny_http` already has to a client that connects and
//! never finishes its request (no socket timeouts): a local process can pin threads and fds,
//! but cannot crash the daemon. Each abandonment is logged with the running total.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use tiny_http::{Header, Method, Request, Response};

use super::reply::Reply;

/// Declared bodies larger than this (bytes, 64 MiB) are never left to `tiny_http` to drain:
/// their requests are answered with [`answer_and_abandon`]. Up to this size the drain's
/// zeroed allocation is always satisfiable (and lazily backed by the kernel).
pub const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// The `Upgrade` token `tiny_http` must print in an abandoned answer; clients ignore an
/// `Upgrade` they do not know on a non-101 response (RFC 9110 §7.8).
const UPGRADE_TOKEN: &str = "iapeer-refused";

/// Connections abandoned since the process started.
static ABANDONED: AtomicUsize = AtomicUsize::new(0);

/// True when a request declaring `declared` body bytes must be answered with
/// [`answer_and_abandon`] instead of a normal response (declared length above
/// [`DRAIN_LIMIT`]; no declared length never needs it).
pub fn must_abandon(declared: Option<usize>) -> bool {
    declared.is_some_and(|n| n > DRAIN_LIMIT)
}

/// How many connections [`answer_and_abandon`] has abandoned in this process.
#[cfg(test)]
pub fn abandoned_count() -> usize {
    ABANDONED.load(Ordering::SeqCst)
}

/// The value of the extra header that frames an abandoned answer: a marker, then
/// `Content-Length` and `Connection: close` as header lines of their own.
pub fn framing_value(body_len: usize) -> String {
    format!("body not read\r\nContent-Length: {body_len}\r\nConnection: close")
}

/// Answer `reply` and abandon the connection without ever dropping its body reader (see the
/// module docs for the exact bytes and the leak). A `HEAD` request gets the head only. Returns the number of connections abandoned
/// so far, this one included. Write errors are logged and otherwise ignored (the client left).
pub fn answer_and_abandon(request: Request, reply: &Reply) -> usize {
    let declared = request.body_length().unwrap_or(0);
    let head_only = *request.method() == Method::Head;
    let mut head = Response::empty(reply.status);
    let headers = reply
        .content_type
        .map(|ct| ("content-type", ct.to_owned()))
        .into_iter()
        .chain(reply.headers.iter().map(|(n, v)| (*n, (*v).to_owned())))
        .chain([("x-iapeer-connection", framing_value(reply.body.len()))]);
    for (name, value) in headers {
        match Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            Ok(h) => head.add_header(h),
            Err(()) => log::warn!("http: cannot set header {name} on an abandoned answer"),
        }
    }
    let mut stream = request.upgrade(UPGRADE_TOKEN, head);
    let body: &[u8] = if head_only { &[] } else { &reply.body };
    if let Err(e) = stream.write_all(body).and_then(|()| stream.flush()) {
        log::debug!("http: could not send the answer of an abandoned request: {e}");
    }
    // Never drop the body reader inside `stream` (see the module docs).
    std::mem::forget(stream);
    let total = ABANDONED.fetch_add(1, Ordering::SeqCst) + 1;
    log::warn!(
        "http: answered {} to a request declaring a {declared}-byte body and abandoned its \
         connection (tiny_http would abort draining it); {total} abandoned so far",
        reply.status
    );
    total
}

//! The operator's web page (`iapeer ui`; issue 10 item 5, spec 10 §1): one HTML page, one
//! script and one style sheet embedded in the binary, served under `/ui/` on the loopback
//! listener, working offline. The page reads and drives the team through the fleet API
//! (`/fleet/v1`): the snapshot and the event stream for the live list, a peer's events and
//! screen, the human's inbox, `send` and the lifecycle verbs.
//!
//! Who may use it ([`auth`]): the daemon makes two secrets at start ([`UiKeys`]); the key is
//! stored 0600 in `<root>/state/iapeer/ui.key`, where `iapeer ui` reads it and passes it once
//! in the link (`/ui/?k=<key>`); the page trades it for an `HttpOnly; SameSite=Strict` cookie
//! holding the other secret and is redirected to `/ui/`, dropping the key from the address.
//! Every `/ui` request and every fleet request of the page needs that cookie; the page's
//! POSTs also need the daemon's own `Origin` and `X-Iapeer-UI: 1`. A valid cookie admits the
//! page's fleet requests in place of the `IAPEER_BEARER_TOKEN` bearer (the page cannot send
//! one); it never admits `/mcp`.

pub mod auth;

use std::borrow::Cow;
use std::io;
use std::path::Path;

use crate::daemon::http::reply::Reply;
use crate::fsutil::{self, MODE_PRIVATE};

/// The page.
const INDEX: &str = include_str!("page/index.html");
/// Its script.
const APP_JS: &str = include_str!("page/app.js");
/// Its style sheet.
const APP_CSS: &str = include_str!("page/app.css");

/// Bytes of each secret (hex in the link and the cookie: twice as many characters).
const SECRET_BYTES: usize = 32;

/// The page's two secrets, made at daemon start: `key` (in `ui.key` and the link) and
/// `cookie` (only ever in the cookie). `Debug` hides both.
#[derive(Clone, PartialEq, Eq)]
pub struct UiKeys {
    /// The secret `iapeer ui` passes in the link, 64 hex digits.
    pub key: String,
    /// The cookie's value, 64 hex digits.
    pub cookie: String,
}

impl std::fmt::Debug for UiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UiKeys(<hidden>)")
    }
}

impl UiKeys {
    /// Two fresh secrets from the operating system's random source.
    ///
    /// Errors: the OS has no random source (the page is then not served).
    pub fn generate() -> io::Result<UiKeys> {
        let secret = || -> io::Result<String> {
            let mut buf = [0u8; SECRET_BYTES];
            getrandom::fill(&mut buf).map_err(|e| io::Error::other(e.to_string()))?;
            Ok(fsutil::hex(&buf))
        };
        Ok(UiKeys {
            key: secret()?,
            cookie: secret()?,
        })
    }

    /// Write the key to `path` (`<root>/state/iapeer/ui.key`): one line, mode 0600,
    /// atomically.
    ///
    /// Errors: the file cannot be written.
    pub fn store(&self, path: &Path) -> io::Result<()> {
        fsutil::write_atomic(path, format!("{}\n", self.key).as_bytes(), MODE_PRIVATE)
    }
}

/// The page's link for the daemon on `port` with key `key`: `http://127.0.0.1:<port>/ui/?k=<key>`.
pub fn link(port: u16, key: &str) -> String {
    format!("http://127.0.0.1:{port}/ui/?k={key}")
}

/// Answer a `/ui` request (the gate has checked Host and Origin). `GET`/`HEAD` only (else
/// 405). `/ui` or `/ui/` with `?k=<key>`: the right key → 303 to `/ui/` setting the cookie;
/// a wrong one → 403 saying to run `iapeer ui`. Without a key: the page with a valid cookie,
/// else 401 saying to run `iapeer ui`; `/ui/app.js` and `/ui/app.css` likewise; anything
/// else under `/ui/` → 404.
pub fn serve(
    method: &str,
    target: &str,
    path: &str,
    headers: &[(String, String)],
    keys: &UiKeys,
    port: u16,
) -> Reply {
    if method != "GET" && method != "HEAD" {
        let mut r = Reply::error(405, "method not allowed: the page accepts GET only");
        r.headers.push(("allow", "GET".into()));
        return r;
    }
    let page = path == "/ui" || path == "/ui/";
    if page {
        if let Some(given) = auth::key_param(target) {
            if !auth::key_matches(given, keys) {
                return html(
                    403,
                    "This link's key is not the running daemon's (a new key is made at every \
                     daemon start). Run <code>iapeer ui</code> for a fresh link.",
                );
            }
            let mut r = answer(303, "text/plain; charset=utf-8", b"signed in; see /ui/\n");
            r.headers.push(("location", "/ui/".into()));
            r.headers
                .push(("set-cookie", Cow::Owned(auth::set_cookie(port, keys))));
            return r;
        }
    }
    let asset = match path {
        "/ui" | "/ui/" => Some(("text/html; charset=utf-8", INDEX)),
        "/ui/app.js" => Some(("text/javascript; charset=utf-8", APP_JS)),
        "/ui/app.css" => Some(("text/css; charset=utf-8", APP_CSS)),
        _ => None,
    };
    let Some((content_type, body)) = asset else {
        return Reply::error(
            404,
            &format!("not found: {path} is not part of the page; open /ui/ (run `iapeer ui`)"),
        );
    };
    if !auth::has_cookie(headers, port, keys) {
        return html(
            401,
            "This page is only for the operator of this host, and this browser is not signed in \
             to the running daemon. Run <code>iapeer ui</code> to open it.",
        );
    }
    answer(200, content_type, body.as_bytes())
}

/// An answer with the page's headers ([`auth::page_headers`]).
fn answer(status: u16, content_type: &'static str, body: &[u8]) -> Reply {
    Reply {
        status,
        content_type: Some(content_type),
        headers: auth::page_headers(),
        body: body.to_vec(),
    }
}

/// A small HTML answer saying `what` (trusted text: no input of the request is in it).
fn html(status: u16, what: &str) -> Reply {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>iapeer</title>\
         <h1>iapeer</h1><p>{what}</p>\n"
    );
    answer(status, "text/html; charset=utf-8", body.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> UiKeys {
        UiKeys {
            key: "k1".into(),
            cookie: "c1".into(),
        }
    }

    fn hs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn header<'a>(r: &'a Reply, name: &str) -> Option<&'a str> {
        r.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_ref())
    }

    #[test]
    fn the_key_is_traded_for_the_cookie() {
        let r = serve("GET", "/ui/?k=k1", "/ui/", &[], &keys(), 80);
        assert_eq!(r.status, 303);
        assert_eq!(header(&r, "location"), Some("/ui/"));
        assert_eq!(
            header(&r, "set-cookie"),
            Some("iapeer_ui_80=c1; HttpOnly; SameSite=Strict; Path=/")
        );
        let r = serve("GET", "/ui/?k=nope", "/ui/", &[], &keys(), 80);
        assert_eq!(r.status, 403);
        assert!(String::from_utf8_lossy(&r.body).contains("iapeer ui"));
    }

    #[test]
    fn the_page_needs_the_cookie() {
        for path in ["/ui/", "/ui/app.js", "/ui/app.css"] {
            let r = serve("GET", path, path, &[], &keys(), 80);
            assert_eq!(r.status, 401, "{path}");
            assert!(String::from_utf8_lossy(&r.body).contains("iapeer ui"));
            let c = hs(&[("cookie", "iapeer_ui_80=c1")]);
            let r = serve("GET", path, path, &c, &keys(), 80);
            assert_eq!(r.status, 200, "{path}");
            assert!(header(&r, "content-security-policy").is_some());
        }
        let c = hs(&[("cookie", "iapeer_ui_80=c1")]);
        assert_eq!(serve("GET", "/ui/x", "/ui/x", &c, &keys(), 80).status, 404);
        assert_eq!(serve("POST", "/ui/", "/ui/", &c, &keys(), 80).status, 405);
    }

    #[test]
    fn secrets_are_long_and_hidden() {
        let k = UiKeys::generate().unwrap();
        assert_eq!((k.key.len(), k.cookie.len()), (64, 64));
        assert_ne!(k.key, k.cookie);
        assert_eq!(format!("{k:?}"), "UiKeys(<hidden>)");
        assert_eq!(link(8765, "ab"), "http://127.0.0.1:8765/ui/?k=ab");
    }
}

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

/// The page's two secrets, made at daemon start: the link's key (in `ui.key` and the link)
/// and `cookie` (only ever in the cookie). The link's key works once: traded for the cookie
/// ([`UiKeys::redeem`]), it is replaced by a fresh one (stored for the next `iapeer ui`), so
/// a link left in a browser's history or a shell's scrollback opens nothing. `Debug` hides
/// both.
pub struct UiKeys {
    /// The secret `iapeer ui` passes in the link, 64 hex digits.
    key: std::sync::Mutex<String>,
    /// The cookie's value, 64 hex digits.
    pub cookie: String,
    /// Where the link's key is kept for `iapeer ui` ([`UiKeys::store`]).
    file: Option<std::path::PathBuf>,
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
        Ok(UiKeys::new(secret()?, secret()?))
    }

    /// Keys with these values, not stored anywhere (tests).
    pub fn new(key: impl Into<String>, cookie: impl Into<String>) -> UiKeys {
        UiKeys {
            key: std::sync::Mutex::new(key.into()),
            cookie: cookie.into(),
            file: None,
        }
    }

    /// Write the link's key to `path` (`<root>/state/iapeer/ui.key`): one line, mode 0600,
    /// atomically; a key made by [`UiKeys::redeem`] later goes there too.
    ///
    /// Errors: the file cannot be written.
    pub fn store(mut self, path: &Path) -> io::Result<UiKeys> {
        write_key(path, &self.key())?;
        self.file = Some(path.to_path_buf());
        Ok(self)
    }

    /// The link's key now.
    pub fn key(&self) -> String {
        self.key.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Trade `given` for the cookie: true when it is the link's key, which is then replaced
    /// by a fresh one (written to the key file; if that fails, the old key stays and the
    /// daemon log says why). Compared in constant time.
    pub fn redeem(&self, given: &str) -> bool {
        let mut key = self.key.lock().unwrap_or_else(|p| p.into_inner());
        if !crate::daemon::http::gate::secret_matches(given, &key) {
            return false;
        }
        let fresh = match secret() {
            Ok(s) => s,
            Err(e) => {
                log::warn!("ui: the link's key stays usable: no random source: {e}");
                return true;
            }
        };
        match self.file.as_deref().map(|f| (f, write_key(f, &fresh))) {
            Some((f, Err(e))) => {
                log::warn!(
                    "ui: the link's key stays usable: cannot write {}: {e}",
                    f.display()
                );
            }
            _ => *key = fresh,
        }
        true
    }
}

/// A fresh secret from the operating system's random source, in hex.
fn secret() -> io::Result<String> {
    let mut buf = [0u8; SECRET_BYTES];
    getrandom::fill(&mut buf).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(fsutil::hex(&buf))
}

/// Write `key` as the key file's one line, mode 0600, atomically.
fn write_key(path: &Path, key: &str) -> io::Result<()> {
    fsutil::write_atomic(path, format!("{key}\n").as_bytes(), MODE_PRIVATE)
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
            // A link checker or a chat's preview asks with HEAD: it must not use up the link.
            if method == "HEAD" {
                return answer(200, "text/plain; charset=utf-8", b"");
            }
            if !keys.redeem(given) {
                return html(
                    403,
                    "This link was used already or is not the running daemon's: a link opens \
                     the page once, and a new key is made at every daemon start. Run \
                     <code>iapeer ui</code> for a fresh link.",
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
        UiKeys::new("k1", "c1")
    }

    use crate::daemon::http::gate::owned_headers as hs;

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
    fn a_link_opens_the_page_once_and_the_next_key_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ui.key");
        let keys = UiKeys::new("k1", "c1").store(&file).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "k1\n");
        assert_eq!(
            serve("GET", "/ui/?k=k1", "/ui/", &[], &keys, 80).status,
            303
        );
        let next = keys.key();
        assert_eq!(next.len(), 64);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), format!("{next}\n"));
        let head = serve("HEAD", &format!("/ui/?k={next}"), "/ui/", &[], &keys, 80);
        assert_eq!(head.status, 200, "a HEAD");
        assert_eq!(header(&head, "set-cookie"), None);
        assert_eq!(keys.key(), next, "a HEAD does not use up the link");
        let again = serve("GET", "/ui/?k=k1", "/ui/", &[], &keys, 80);
        assert_eq!(again.status, 403, "the used link");
        assert!(String::from_utf8_lossy(&again.body).contains("used already"));
        let target = format!("/ui/?k={next}");
        assert_eq!(serve("GET", &target, "/ui/", &[], &keys, 80).status, 303);
        assert_eq!(
            keys.cookie, "c1",
            "the cookie stays: pages already open keep working"
        );
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
        assert_eq!((k.key().len(), k.cookie.len()), (64, 64));
        assert_ne!(k.key(), k.cookie);
        assert_eq!(format!("{k:?}"), "UiKeys(<hidden>)");
        assert_eq!(link(8765, "ab"), "http://127.0.0.1:8765/ui/?k=ab");
    }
}

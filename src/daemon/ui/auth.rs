//! Who may use the web page (`iapeer ui`), as pure functions: the secret passed once in the
//! link (`/ui/?k=<key>`), the cookie it is exchanged for, and the checks on the page's fleet
//! requests (a valid cookie; for a POST also the daemon's own `Origin` and the
//! `X-Iapeer-UI: 1` header, which a cross-site form cannot send).
//!
//! Cookies are not kept apart by port, so the cookie's name carries it
//! (`iapeer_ui_<port>`): two daemons on one host (tests, a second root) never overwrite each
//! other's.

use std::borrow::Cow;

use crate::daemon::http::gate::{first, origin_allowed, secret_matches};
use crate::daemon::http::reply::Reply;

use super::UiKeys;

/// The header every state-changing request of the page carries (`X-Iapeer-UI: 1`).
pub const UI_HEADER: &str = "x-iapeer-ui";

/// The cookie's name for the daemon on `port`: `iapeer_ui_<port>`.
pub fn cookie_name(port: u16) -> String {
    format!("iapeer_ui_{port}")
}

/// The value of cookie `name` in the request's `Cookie` headers (all of them, `;`-separated
/// pairs), if sent.
pub fn cookie<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .filter(|(n, _)| n == "cookie")
        .flat_map(|(_, v)| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim())
}

/// The `Set-Cookie` value that admits the page: the cookie secret, `HttpOnly` (no script
/// reads it), `SameSite=Strict` (no other site's request carries it), `Path=/` (the page and
/// the fleet API), for the browser's session.
pub fn set_cookie(port: u16, keys: &UiKeys) -> String {
    format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/",
        cookie_name(port),
        keys.cookie
    )
}

/// Whether the request carries this daemon's valid page cookie.
pub fn has_cookie(headers: &[(String, String)], port: u16, keys: &UiKeys) -> bool {
    cookie(headers, &cookie_name(port)).is_some_and(|v| secret_matches(v, &keys.cookie))
}

/// The `k` parameter of the request target's query (`/ui/?k=<key>`), if any.
pub fn key_param(target: &str) -> Option<&str> {
    let query = target.split_once('?')?.1;
    let query = query.split('#').next().unwrap_or("");
    query.split('&').find_map(|kv| kv.strip_prefix("k="))
}

/// Whether a fleet request comes from the page, and may go on: a request carrying the page's
/// cookie or its `X-Iapeer-UI` header is the page's. `Ok(false)`: not the page's (the usual
/// fleet rules, bearer included, apply); `Ok(true)`: the page's, admitted without a bearer.
///
/// Errors: 401 when the cookie is missing or not this daemon's (a page from an earlier
/// daemon: the text says to run `iapeer ui`); 403 for a method other than GET/HEAD without
/// the daemon's own `Origin` and `X-Iapeer-UI: 1` (a cross-site request).
pub fn page_request(
    method: &str,
    headers: &[(String, String)],
    port: u16,
    keys: &UiKeys,
) -> Result<bool, Reply> {
    let named = cookie(headers, &cookie_name(port)).is_some();
    let marked = first(headers, UI_HEADER).is_some();
    if !named && !marked {
        return Ok(false);
    }
    if !has_cookie(headers, port, keys) {
        return Err(unauthorized());
    }
    if method != "GET" && method != "HEAD" {
        let own_origin = first(headers, "origin").is_some_and(|o| origin_allowed(o, port));
        let header_ok = first(headers, UI_HEADER).is_some_and(|v| v.trim() == "1");
        if !own_origin || !header_ok {
            return Err(Reply::error(
                403,
                "forbidden: a cross-site request: the page's changes need the daemon's own \
                 Origin and the X-Iapeer-UI: 1 header; use the page that `iapeer ui` opens",
            ));
        }
    }
    Ok(true)
}

/// 401 for a page request without a valid cookie.
pub fn unauthorized() -> Reply {
    Reply::error(
        401,
        "unauthorized: this page is not signed in to this daemon (its key changes at every daemon \
         start); run `iapeer ui` to open it again",
    )
}

/// Headers every page answer carries: no caching, no framing, no referrer (the link's key
/// never leaves in a `Referer`), a content policy allowing only the daemon's own scripts,
/// styles and connections.
pub fn page_headers() -> Vec<(&'static str, Cow<'static, str>)> {
    vec![
        ("cache-control", "no-store".into()),
        ("x-content-type-options", "nosniff".into()),
        ("x-frame-options", "DENY".into()),
        ("referrer-policy", "no-referrer".into()),
        (
            "content-security-policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
                .into(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::daemon::http::gate::owned_headers as hs;

    fn keys() -> UiKeys {
        UiKeys::new("k1", "c1")
    }

    #[test]
    fn cookies_and_keys_are_read() {
        let h = hs(&[("cookie", "a=1; iapeer_ui_80=c1 ;b=2"), ("cookie", "z=9")]);
        assert_eq!(cookie(&h, "iapeer_ui_80"), Some("c1"));
        assert_eq!(cookie(&h, "z"), Some("9"));
        assert_eq!(cookie(&h, "iapeer_ui_81"), None);
        assert!(has_cookie(&h, 80, &keys()));
        assert!(!has_cookie(&h, 81, &keys()));
        assert_eq!(key_param("/ui/?k=abc"), Some("abc"));
        assert_eq!(key_param("/ui/?x=1&k=abc#f"), Some("abc"));
        assert_eq!(key_param("/ui/"), None);
        assert!(!keys().redeem("k2") && keys().redeem("k1"));
        assert!(
            !UiKeys::new("", "c").redeem(""),
            "an empty key never matches"
        );
        assert_eq!(
            set_cookie(80, &keys()),
            "iapeer_ui_80=c1; HttpOnly; SameSite=Strict; Path=/"
        );
    }

    #[test]
    fn page_requests_need_the_cookie_and_posts_the_cross_site_check() {
        let k = keys();
        let cookie = ("cookie", "iapeer_ui_80=c1");
        let header = ("x-iapeer-ui", "1");
        // (what, method, headers, the answer: is it the page, or the refusal's status)
        type Case<'a> = (
            &'a str,
            &'a str,
            &'a [(&'a str, &'a str)],
            Result<bool, u16>,
        );
        let cases: [Case; 8] = [
            (
                "not the page: the usual fleet rules",
                "POST",
                &[],
                Ok(false),
            ),
            (
                "the page with a stale cookie",
                "GET",
                &[("cookie", "iapeer_ui_80=old")],
                Err(401),
            ),
            ("its header without a cookie", "GET", &[header], Err(401)),
            ("a GET with the cookie", "GET", &[cookie], Ok(true)),
            (
                "a POST without origin and header",
                "POST",
                &[cookie],
                Err(403),
            ),
            (
                "a POST from the own origin without the header",
                "POST",
                &[cookie, ("origin", "http://127.0.0.1:80")],
                Err(403),
            ),
            (
                "a POST from a foreign origin",
                "POST",
                &[cookie, ("origin", "http://evil.example"), header],
                Err(403),
            ),
            (
                "a POST from the own origin with the header",
                "POST",
                &[cookie, ("origin", "http://localhost:80"), header],
                Ok(true),
            ),
        ];
        for (case, method, headers, want) in cases {
            let got = page_request(method, &hs(headers), 80, &k).map_err(|e| e.status);
            assert_eq!(got, want, "{case}");
        }
    }
}

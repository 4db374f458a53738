//! The checks every loopback HTTP request passes before it is served (spec 02 §3), as pure
//! functions: target normalisation, Host and Origin checks (DNS-rebinding and browser
//! defence), the bearer gates (`IAPEER_BEARER_TOKEN` on every request when set, else the fleet
//! token on every fleet request), the body limit, routing, and caller credentials.

use sha2::{Digest, Sha256};

use super::reply::Reply;
use crate::daemon::mcp::CallerCreds;
use crate::daemon::ui::{self, UiKeys};

/// Body limit of MCP requests (and of anything that is not fleet), bytes.
pub const MCP_BODY_LIMIT: usize = 1024 * 1024;
/// Body limit of fleet API requests, bytes.
pub const FLEET_BODY_LIMIT: usize = 64 * 1024;

/// What the gate sees of a request. Header names are lowercase.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    /// The method (`GET`, `POST`, …).
    pub method: &'a str,
    /// Request target as sent (origin-form or absolute-form).
    pub target: &'a str,
    /// (lowercase name, value) in the order received.
    pub headers: &'a [(String, String)],
    /// Declared `Content-Length`, when any.
    pub content_length: Option<usize>,
}

/// Where an admitted request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/mcp`.
    Mcp,
    /// `/fleet` and `/fleet/*` (the fleet API, part 10).
    Fleet,
    /// `/ui` and `/ui/*`: the operator's web page (`iapeer ui`, [`crate::daemon::ui`]).
    Ui,
    /// Anything else.
    NotFound,
}

/// A request that passed the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// Where to serve it.
    pub route: Route,
    /// Origin-form path without query, e.g. `/fleet/v1/send`.
    pub path: String,
    /// Body limit for this route, bytes.
    pub body_limit: usize,
    /// The caller's identity header and session token.
    pub creds: CallerCreds,
}

/// Run the checks of spec 02 §3 in order: Host (also the authority of an absolute-form
/// target), Origin, the web page's checks (`ui`, the daemon's page secrets; see
/// [`ui::auth::page_request`]), bearer ([`required_bearer`]: `bearer` = `IAPEER_BEARER_TOKEN`,
/// non-empty, on every request; without it `fleet_token` on every `/fleet` request, whatever
/// its path or method), declared body size. A fleet request from the page (a valid page
/// cookie) and every `/ui` request need no bearer: the page cannot send one, and `/ui` checks
/// its own secret. `Err` is the answer to send instead of serving.
pub fn admit(
    head: &Head<'_>,
    port: u16,
    bearer: Option<&str>,
    fleet_token: Option<&str>,
    ui: Option<&UiKeys>,
) -> Result<Admitted, Reply> {
    let (authority, path) = split_target(head.target);
    let hosts_ok = authority.is_none_or(|a| host_allowed(a, port))
        && all(head.headers, "host").all(|h| host_allowed(h, port));
    if !hosts_ok {
        return Err(Reply::forbidden(
            "Host must be 127.0.0.1:<port> or localhost:<port>",
        ));
    }
    if !all(head.headers, "origin").all(|o| origin_allowed(o, port)) {
        return Err(Reply::forbidden("cross-origin requests are not accepted"));
    }
    let route = route_of(path);
    let page = match (route, ui) {
        (Route::Ui, _) => true,
        (Route::Fleet, Some(keys)) => {
            ui::auth::page_request(head.method, head.headers, port, keys)?
        }
        _ => false,
    };
    if let Some(needed) = required_bearer(route, page, bearer, fleet_token) {
        // No fleet token (none could be made): nothing matches, the fleet stays closed.
        let expected = needed.unwrap_or_default();
        if !bearer_matches(first(head.headers, "authorization"), expected) {
            return Err(Reply::unauthorized());
        }
    }
    let body_limit = match route {
        Route::Fleet | Route::Ui => FLEET_BODY_LIMIT,
        Route::Mcp | Route::NotFound => MCP_BODY_LIMIT,
    };
    if head.content_length.is_some_and(|n| n > body_limit) {
        return Err(Reply::too_large(body_limit));
    }
    Ok(Admitted {
        route,
        path: path.to_owned(),
        body_limit,
        creds: creds(head.headers, bearer.is_some()),
    })
}

/// Which bearer a request on `route` must carry: `None` when none; `Some(None)` when one is
/// needed but the daemon has none (nothing is admitted). `IAPEER_BEARER_TOKEN` (`bearer`)
/// gates every request but the page's (`page`: a `/ui` request, or a fleet request with a
/// valid page cookie); without it the fleet token gates every fleet request but the page's,
/// and `/mcp` and other paths need none (MCP callers are authenticated by their session
/// tokens, spec 02 §4). Pure.
pub fn required_bearer<'a>(
    route: Route,
    page: bool,
    bearer: Option<&'a str>,
    fleet_token: Option<&'a str>,
) -> Option<Option<&'a str>> {
    match (bearer, route) {
        _ if page => None,
        (Some(b), _) => Some(Some(b)),
        (None, Route::Fleet) => Some(fleet_token),
        (None, Route::Mcp | Route::Ui | Route::NotFound) => None,
    }
}

/// Extra checks for `/mcp`: POST only (else 405), `Content-Type: application/json` with
/// optional parameters (else 415).
pub fn mcp_precheck(method: &str, headers: &[(String, String)]) -> Result<(), Reply> {
    if method != "POST" {
        return Err(Reply::method_not_allowed());
    }
    let media = first(headers, "content-type")
        .and_then(|ct| ct.split(';').next())
        .map(str::trim);
    match media {
        Some(m) if m.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(Reply::unsupported_media_type()),
    }
}

/// Split a request target into (authority of an absolute-form `http://` target, path without
/// query or fragment). `http://h:1/mcp?x` → (`Some("h:1")`, `/mcp`); `/mcp` → (`None`, `/mcp`);
/// `http://h:1` → (`Some("h:1")`, `/`).
pub fn split_target(target: &str) -> (Option<&str>, &str) {
    let (authority, rest) = match strip_prefix_ignore_case(target, "http://") {
        Some(after) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            (Some(&after[..end]), &after[end..])
        }
        None => (None, target),
    };
    let path = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    (authority, if path.is_empty() { "/" } else { path })
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// The route of an origin-form path without query.
pub fn route_of(path: &str) -> Route {
    if path == "/mcp" {
        Route::Mcp
    } else if path == "/fleet" || path.starts_with("/fleet/") {
        Route::Fleet
    } else if path == "/ui" || path.starts_with("/ui/") {
        Route::Ui
    } else {
        Route::NotFound
    }
}

/// True for `127.0.0.1:<port>` and `localhost:<port>` (host name case-insensitive).
pub fn host_allowed(value: &str, port: u16) -> bool {
    let value = value.trim();
    let Some((host, p)) = value.rsplit_once(':') else {
        return false;
    };
    p == port.to_string() && (host == "127.0.0.1" || host.eq_ignore_ascii_case("localhost"))
}

/// True only for exactly `http://127.0.0.1:<port>` and `http://localhost:<port>`.
pub fn origin_allowed(value: &str, port: u16) -> bool {
    let value = value.trim();
    value == format!("http://127.0.0.1:{port}") || value == format!("http://localhost:{port}")
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive), if any.
pub fn bearer_token(value: &str) -> Option<&str> {
    let value = value.trim();
    let rest = strip_prefix_ignore_case(value, "bearer ")?;
    Some(rest.trim()).filter(|t| !t.is_empty())
}

/// Constant-time check that `authorization` carries `Bearer <expected>`: both tokens are hashed
/// and the digests compared without early exit, so neither content nor length leaks by timing.
pub fn bearer_matches(authorization: Option<&str>, expected: &str) -> bool {
    secret_matches(authorization.and_then(bearer_token).unwrap_or(""), expected)
}

/// Constant-time check that `given` is the secret `expected` (both hashed, the digests
/// compared without early exit); an empty `given` never matches.
pub fn secret_matches(given: &str, expected: &str) -> bool {
    let a = Sha256::digest(given.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    let diff = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    diff == 0 && !given.is_empty()
}

/// Caller credentials (spec 02 §4): identity from `X-IAPeer-Identity`; the session token from
/// `Authorization: Bearer` when no bearer gate is configured, else from `X-IAPeer-Token`.
/// Values are trimmed; blank counts as absent.
pub fn creds(headers: &[(String, String)], bearer_configured: bool) -> CallerCreds {
    let trimmed = |v: &str| Some(v.trim().to_owned()).filter(|t| !t.is_empty());
    let session_token = if bearer_configured {
        first(headers, "x-iapeer-token").and_then(trimmed)
    } else {
        first(headers, "authorization")
            .and_then(bearer_token)
            .map(str::to_owned)
    };
    CallerCreds {
        identity_header: first(headers, "x-iapeer-identity").and_then(trimmed),
        session_token,
    }
}

/// First value of a header (name lowercase).
pub fn first<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn all<'a>(headers: &'a [(String, String)], name: &'static str) -> impl Iterator<Item = &'a str> {
    headers
        .iter()
        .filter(move |(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Tests: `pairs` as the owned header list the gate reads.
#[cfg(test)]
pub(crate) fn owned_headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::owned_headers as hs;

    #[test]
    fn targets_are_normalised() {
        assert_eq!(split_target("/mcp"), (None, "/mcp"));
        assert_eq!(split_target("/mcp?x=1#f"), (None, "/mcp"));
        assert_eq!(
            split_target("HTTP://h:1/fleet/v1?x"),
            (Some("h:1"), "/fleet/v1")
        );
        assert_eq!(split_target("http://h:1"), (Some("h:1"), "/"));
        assert_eq!(split_target("http://h:1?q"), (Some("h:1"), "/"));
        assert_eq!(split_target("*"), (None, "*"));
        assert_eq!(route_of("/fleet"), Route::Fleet);
        assert_eq!(route_of("/fleetx"), Route::NotFound);
        assert_eq!(route_of("/mcp/"), Route::NotFound);
    }

    #[test]
    fn host_and_origin_rules() {
        type Rule = fn(&str, u16) -> bool;
        let rules: [(&str, Rule, &[&str], &[&str]); 2] = [
            (
                "Host",
                host_allowed,
                &["127.0.0.1:8765", "LocalHost:8765"],
                &[
                    "127.0.0.1",
                    "127.0.0.1:8766",
                    "0.0.0.0:8765",
                    "u@localhost:8765",
                    "[::1]:8765",
                ],
            ),
            (
                "Origin",
                origin_allowed,
                &["http://127.0.0.1:8765", "http://localhost:8765"],
                &[
                    "https://localhost:8765",
                    "http://localhost",
                    "http://localhost:8765/",
                    "null",
                ],
            ),
        ];
        for (header, allowed, good, bad) in rules {
            for value in good {
                assert!(allowed(value, 8765), "{header}: {value}");
            }
            for value in bad {
                assert!(!allowed(value, 8765), "{header}: {value}");
            }
        }
    }

    #[test]
    fn bearer_and_credentials() {
        assert_eq!(bearer_token("Bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Basic abc"), None);
        assert!(bearer_matches(Some("Bearer tok"), "tok"));
        assert!(!bearer_matches(Some("Bearer tok2"), "tok"));
        assert!(!bearer_matches(None, "tok"));

        let h = hs(&[
            ("authorization", "Bearer t1"),
            ("x-iapeer-token", "t2"),
            ("x-iapeer-identity", " claude-a "),
        ]);
        assert_eq!(creds(&h, false).session_token.as_deref(), Some("t1"));
        assert_eq!(creds(&h, true).session_token.as_deref(), Some("t2"));
        assert_eq!(creds(&h, true).identity_header.as_deref(), Some("claude-a"));
        assert_eq!(
            creds(&hs(&[("x-iapeer-identity", "  ")]), false),
            CallerCreds::default()
        );
    }

    #[test]
    fn the_page_needs_no_bearer_but_mcp_does() {
        let keys = UiKeys::new("k", "c");
        let with_cookie = hs(&[("host", "127.0.0.1:1"), ("cookie", "iapeer_ui_1=c")]);
        let head = |method, target| Head {
            method,
            target,
            headers: &with_cookie,
            content_length: None,
        };
        // `/ui` checks its own secret; the page's fleet GET is admitted by its cookie.
        let ok = admit(&head("GET", "/ui/"), 1, Some("b"), None, Some(&keys)).unwrap();
        assert_eq!(ok.route, Route::Ui);
        assert!(admit(
            &head("GET", "/fleet/v1/snapshot"),
            1,
            Some("b"),
            None,
            Some(&keys)
        )
        .is_ok());
        // Never MCP; and a page POST without its header is cross-site.
        let r = admit(&head("POST", "/mcp"), 1, Some("b"), None, Some(&keys)).unwrap_err();
        assert_eq!(r.status, 401);
        let r = admit(
            &head("POST", "/fleet/v1/send"),
            1,
            Some("b"),
            None,
            Some(&keys),
        )
        .unwrap_err();
        assert_eq!(r.status, 403);
        // Without the page served, the cookie means nothing: the bearer is asked for.
        let r = admit(&head("GET", "/fleet/v1/snapshot"), 1, Some("b"), None, None).unwrap_err();
        assert_eq!(r.status, 401);
    }

    #[test]
    fn admit_order_and_limits() {
        let h = hs(&[("host", "evil:1")]);
        let head = Head {
            method: "POST",
            target: "/mcp",
            headers: &h,
            content_length: Some(10 << 20),
        };
        // Host is checked before the bearer and the size.
        assert_eq!(
            admit(&head, 1, Some("x"), None, None).unwrap_err().status,
            403
        );
        let h = hs(&[("host", "localhost:1")]);
        let head = Head {
            headers: &h,
            ..head
        };
        assert_eq!(
            admit(&head, 1, Some("x"), None, None).unwrap_err().status,
            401
        );
        assert_eq!(admit(&head, 1, None, None, None).unwrap_err().status, 413);
        let head = Head {
            content_length: Some(MCP_BODY_LIMIT),
            ..head
        };
        let ok = admit(&head, 1, None, None, None).unwrap();
        assert_eq!((ok.route, ok.body_limit), (Route::Mcp, MCP_BODY_LIMIT));
        let head = Head {
            target: "/fleet/v1/send",
            content_length: Some(FLEET_BODY_LIMIT + 1),
            ..head
        };
        // The fleet's token is asked for before the size is judged.
        assert_eq!(
            admit(&head, 1, None, Some("f"), None).unwrap_err().status,
            401
        );
        let h = hs(&[("host", "localhost:1"), ("authorization", "Bearer f")]);
        let head = Head {
            headers: &h,
            ..head
        };
        assert_eq!(
            admit(&head, 1, None, Some("f"), None).unwrap_err().status,
            413
        );
    }

    #[test]
    fn the_fleet_token_gates_every_fleet_request_and_nothing_else() {
        let plain = hs(&[("host", "127.0.0.1:1")]);
        let right = hs(&[("host", "127.0.0.1:1"), ("authorization", "Bearer f")]);
        let wrong = hs(&[("host", "127.0.0.1:1"), ("authorization", "Bearer g")]);
        let session = hs(&[("host", "127.0.0.1:1"), ("authorization", "Bearer session")]);
        let status = |method, target, headers: &[(String, String)], token| {
            let head = Head {
                method,
                target,
                headers,
                content_length: None,
            };
            admit(&head, 1, None, token, None).map_or_else(|r| r.status, |_| 200)
        };
        for method in ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
            for target in [
                "/fleet",
                "/fleet/",
                "/fleet/v1/snapshot",
                "/fleet/v1/events?replay=5",
                "/fleet/v1/approvals?wait=300",
                "/fleet/v1/nothing",
                "http://127.0.0.1:1/fleet/v1/inbox",
            ] {
                assert_eq!(
                    status(method, target, &plain, Some("f")),
                    401,
                    "{method} {target}"
                );
                assert_eq!(
                    status(method, target, &wrong, Some("f")),
                    401,
                    "{method} {target}"
                );
                assert_eq!(
                    status(method, target, &right, Some("f")),
                    200,
                    "{method} {target}"
                );
                // No token could be made: closed to every bearer.
                assert_eq!(
                    status(method, target, &right, None),
                    401,
                    "{method} {target}"
                );
                assert_eq!(
                    status(method, target, &plain, None),
                    401,
                    "{method} {target}"
                );
            }
        }
        // MCP keeps its session tokens in `Authorization`; other paths need no bearer.
        let head = Head {
            method: "POST",
            target: "/mcp",
            headers: &session,
            content_length: None,
        };
        let ok = admit(&head, 1, None, Some("f"), None).unwrap();
        assert_eq!(ok.creds.session_token.as_deref(), Some("session"));
        assert_eq!(status("GET", "/", &plain, Some("f")), 200);
        assert_eq!(status("GET", "/ui/", &plain, Some("f")), 200);
        // IAPEER_BEARER_TOKEN replaces the fleet token (and gates everything).
        let head = Head {
            method: "GET",
            target: "/fleet/v1/snapshot",
            headers: &right,
            content_length: None,
        };
        assert_eq!(
            admit(&head, 1, Some("b"), Some("f"), None)
                .unwrap_err()
                .status,
            401
        );
        assert_eq!(
            required_bearer(Route::Mcp, false, Some("b"), Some("f")),
            Some(Some("b"))
        );
        assert_eq!(
            required_bearer(Route::Fleet, true, Some("b"), Some("f")),
            None
        );
        assert_eq!(required_bearer(Route::Fleet, false, None, None), Some(None));
    }
}

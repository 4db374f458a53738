//! Federation (issue 28): the hosts of one team share a Redis (or Valkey) server. This step
//! is joining: `iapeer federation join <redis-url> [--host-name <name>]` stores the URL and
//! this host's name in `<root>/state/iapeer/federation.json` (0600: the URL carries the
//! password), `IAPEER_FEDERATION_URL` overrides the stored URL, and the daemon's link thread
//! ([`link`]) keeps a heartbeat in Redis ([`keys`], the wire contract) and sees the other
//! hosts'. `docs/FEDERATION.md` describes it for the operator.

pub mod address;
pub mod keys;
pub mod link;
pub mod peers;
pub mod skew;
pub mod tls;

use std::io;

use serde::{Deserialize, Serialize};

use crate::config::vars;
use crate::fsutil::{self, MODE_PRIVATE};
use crate::names;
use crate::paths::Paths;

/// What `federation.json` holds: `{"url","host"}`, and for `rediss://` the TLS files'
/// paths `"ca_file"`, `"client_cert"`, `"client_key"` when given ([`tls`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Joined {
    /// The Redis URL as given, password included (never printed: [`masked`]).
    pub url: String,
    /// This host's name in the federation (the peer-name rule).
    pub host: String,
    /// The TLS files, in the same object (`"ca_file"`, `"client_cert"`, `"client_key"`).
    #[serde(flatten)]
    pub tls: TlsFiles,
}

/// The TLS files of a membership (`rediss://`, [`tls`]): absolute paths of PEM files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsFiles {
    /// The CA(s) the server's certificate is checked against; `None`: the system's CA store.
    /// `IAPEER_FEDERATION_CA_FILE` overrides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// This host's client certificate (chain), for a server that asks for one
    /// (`tls-auth-clients yes`); with [`TlsFiles::client_key`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<String>,
    /// The client certificate's private key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<String>,
}

/// The stored membership, `None` when this root has not joined.
///
/// Errors: the file cannot be read or is not `{"url","host"}` (said with its path).
pub fn load(paths: &Paths) -> Result<Option<Joined>, String> {
    let path = paths.federation();
    match fsutil::read_optional(&path) {
        Ok(None) => Ok(None),
        Ok(Some(text)) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{} is not readable as a membership: {e}", path.display())),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Store the membership, atomically, mode 0600.
pub fn store(paths: &Paths, joined: &Joined) -> io::Result<()> {
    fsutil::write_json_atomic(&paths.federation(), joined, MODE_PRIVATE)
}

/// Forget the membership; `Ok(false)` when there was none.
pub fn forget(paths: &Paths) -> io::Result<bool> {
    let path = paths.federation();
    let was = path.exists();
    fsutil::remove_if_exists(&path)?;
    Ok(was)
}

/// Where the URL in use comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// `federation.json`.
    File,
    /// `IAPEER_FEDERATION_URL`.
    Env,
}

/// The membership in effect: the stored one with `IAPEER_FEDERATION_URL` over its URL (and,
/// without a stored one, the variable's URL with this machine's host name), and
/// `IAPEER_FEDERATION_CA_FILE` over its CA file. `None`: not joined.
///
/// Errors: the stored file is unreadable; the variable's URL is not valid; no host name; TLS
/// files with a `redis://` URL ([`tls::check`]).
pub fn effective(paths: &Paths) -> Result<Option<(Joined, Source)>, String> {
    let stored = load(paths)?;
    let var = |v: &vars::EnvVar| std::env::var(v.name).ok().filter(|v| !v.trim().is_empty());
    let env = var(&vars::IAPEER_FEDERATION_URL);
    let ca_file = var(&vars::IAPEER_FEDERATION_CA_FILE);
    let (mut joined, source) = match (stored, env) {
        (stored, Some(url)) => {
            check_url(&url).map_err(|e| format!("IAPEER_FEDERATION_URL: {e}"))?;
            let joined = match stored {
                Some(j) => Joined { url, ..j },
                None => Joined {
                    url,
                    host: default_host_name()?,
                    ..Joined::default()
                },
            };
            (joined, Source::Env)
        }
        (Some(j), None) => (j, Source::File),
        (None, None) => return Ok(None),
    };
    if ca_file.is_some() {
        joined.tls.ca_file = ca_file;
    }
    tls::check(&joined).map_err(|e| e.to_string())?;
    Ok(Some((joined, source)))
}

/// Check a Redis URL: scheme `redis` or `rediss` (TLS: [`tls`]), a host, an optional ACL
/// user and password, an optional database number; or a Unix socket of this machine,
/// `unix:///path` / `redis+unix:///path` with `?user=&pass=&db=` (docs/FEDERATION.md
/// "Joining"). Pure.
///
/// Errors: what is wrong, without repeating the URL (it may carry a password).
pub fn check_url(url: &str) -> Result<(), String> {
    const SHAPE: &str = "redis[s]://[user:password@]host[:port][/db]";
    let scheme = url.split("://").next().unwrap_or("");
    if !url.contains("://") {
        return Err(format!("not a URL: give {SHAPE}"));
    }
    match scheme {
        "redis" | "rediss" => {}
        "unix" | "redis+unix" => return check_unix_url(url),
        other => {
            return Err(format!(
                "the scheme \"{}\" is not redis: give {SHAPE}",
                crate::visible::line(other)
            ))
        }
    }
    let parsed =
        redis::parse_redis_url(url).ok_or_else(|| format!("not a valid URL: give {SHAPE}"))?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("the URL names no host: give {SHAPE}"));
    }
    let db = parsed.path().trim_start_matches('/');
    if !db.is_empty() && db.parse::<u32>().is_err() {
        return Err(format!(
            "the path \"/{db}\" is not a database number: give {SHAPE}"
        ));
    }
    if url.chars().any(char::is_whitespace) {
        return Err(format!("the URL has a space in it: give {SHAPE}"));
    }
    Ok(())
}

/// Check a Unix-socket URL, `unix:///path/to/redis.sock` or `redis+unix:///…` (a Redis on the
/// same machine reached without TCP), with optional `?user=…&pass=…&db=…`. Pure.
///
/// Errors: a host is named (a socket is on this machine only), the path is not absolute,
/// another query key, a database that is no number; without repeating the URL.
fn check_unix_url(url: &str) -> Result<(), String> {
    const SHAPE: &str = "unix:///path/to/redis.sock[?user=<user>&pass=<password>&db=<n>]";
    let parsed =
        redis::parse_redis_url(url).ok_or_else(|| format!("not a valid URL: give {SHAPE}"))?;
    if parsed.host_str().is_some_and(|h| !h.is_empty())
        || !parsed.username().is_empty()
        || parsed.password().is_some()
    {
        return Err(format!(
            "a Unix socket URL names no host or user@ (the socket is on this machine; a Redis \
             on another machine is redis://): give {SHAPE}"
        ));
    }
    if !parsed.path().starts_with('/') || parsed.path().len() < 2 {
        return Err(format!("the URL names no socket path: give {SHAPE}"));
    }
    for (key, value) in parsed.query_pairs() {
        match key.as_ref() {
            "user" | "pass" => {}
            "db" if value.parse::<u32>().is_ok() => {}
            "db" => return Err(format!("db is not a database number: give {SHAPE}")),
            other => {
                return Err(format!(
                    "the query key \"{}\" is not one of user, pass, db: give {SHAPE}",
                    crate::visible::line(other)
                ))
            }
        }
    }
    if url.chars().any(char::is_whitespace) {
        return Err(format!("the URL has a space in it: give {SHAPE}"));
    }
    Ok(())
}

/// The URL with its password replaced by `****`, for every place that shows it. Pure.
pub fn masked(url: &str) -> String {
    match redis::parse_redis_url(url) {
        // A Unix-socket URL carries its password in the query (`?pass=…`).
        Some(u) if matches!(u.scheme(), "unix" | "redis+unix") => {
            let pairs: Vec<(String, String)> = u
                .query_pairs()
                .map(|(k, v)| {
                    let v = if k == "pass" {
                        "****".into()
                    } else {
                        v.into_owned()
                    };
                    (k.into_owned(), v)
                })
                .collect();
            let mut u = u;
            if pairs.is_empty() {
                u.set_query(None);
            } else {
                u.query_pairs_mut().clear().extend_pairs(pairs);
            }
            u.to_string()
        }
        Some(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("****"));
            }
            u.to_string()
        }
        None => "(not a URL)".into(),
    }
}

/// Where the URL points, `host:port` (the port 6379 when it names none), without user or
/// password, for advice such as `redis-cli -h <host> -p <port> ping`. Pure.
pub fn endpoint(url: &str) -> (String, u16) {
    match redis::parse_redis_url(url) {
        Some(u) => (
            u.host_str().unwrap_or("?").to_string(),
            u.port().unwrap_or(6379),
        ),
        None => ("?".into(), 6379),
    }
}

/// How `redis-cli` reaches the URL's server: `-h <host> -p <port>`, or `-s <path>` for a
/// Unix-socket URL. Pure.
pub fn redis_cli_target(url: &str) -> String {
    match redis::parse_redis_url(url) {
        Some(u) if matches!(u.scheme(), "unix" | "redis+unix") => format!("-s {}", u.path()),
        _ => {
            let (host, port) = endpoint(url);
            format!("-h {host} -p {port}")
        }
    }
}

/// Where the URL's server is, for messages: `host:port`, or the socket's path. Pure.
pub fn place(url: &str) -> String {
    match redis::parse_redis_url(url) {
        Some(u) if matches!(u.scheme(), "unix" | "redis+unix") => u.path().to_string(),
        _ => {
            let (host, port) = endpoint(url);
            format!("{host}:{port}")
        }
    }
}

/// A host name given with `--host-name`, when it follows the peer-name rule. Pure.
///
/// Errors: the rule and what to do.
pub fn check_host_name(name: &str) -> Result<(), String> {
    if names::is_valid_personality(name) {
        Ok(())
    } else {
        Err(format!(
            "\"{}\" is not a valid host name: {}",
            crate::visible::line(name),
            names::PERSONALITY_RULE
        ))
    }
}

/// The host name this machine gets by default: its short host name (before the first dot),
/// lowercased and made valid ([`names::normalize`]). Pure.
///
/// Errors: nothing valid is left; the hint names `--host-name`.
pub fn host_name_from(machine: &str) -> Result<String, String> {
    let short = machine.split('.').next().unwrap_or("");
    let name = names::normalize(short);
    if names::is_valid_personality(&name) {
        Ok(name)
    } else {
        Err(format!(
            "this machine's host name \"{}\" makes no valid host name ({}): pass --host-name <name>",
            crate::visible::line(machine),
            names::PERSONALITY_RULE
        ))
    }
}

/// [`host_name_from`] this machine's host name.
///
/// Errors: it cannot be read, or makes no valid name.
pub fn default_host_name() -> Result<String, String> {
    let machine = nix::unistd::gethostname().map_err(|e| {
        format!("cannot read this machine's host name ({e}): pass --host-name <name>")
    })?;
    host_name_from(&machine.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_without_being_repeated() {
        assert_eq!(check_url("redis://127.0.0.1:6379"), Ok(()));
        assert_eq!(check_url("redis://u:p%40ss@redis.lan:6380/2"), Ok(()));
        assert_eq!(check_url("redis://:secret@h"), Ok(()));
        assert_eq!(check_url("rediss://u:secret@h:6380"), Ok(()));
        for (bad, says) in [
            ("http://u:secret@h", "scheme \"http\" is not redis"),
            ("h:6379", "not a URL"),
            ("redis://u:secret@h/x", "not a database number"),
            ("redis://", "names no host"),
        ] {
            let e = check_url(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains("secret"), "{bad}: {e}");
        }
    }

    #[test]
    fn unix_socket_urls_are_for_this_machine_only() {
        for good in [
            "unix:///run/redis/redis.sock",
            "redis+unix:///tmp/r.sock?pass=secret&db=2",
            "unix:///tmp/r.sock?user=a&pass=secret",
        ] {
            assert_eq!(check_url(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("unix://other.lan/tmp/r.sock?pass=secret", "names no host"),
            ("unix://u:secret@localhost/tmp/r.sock", "names no host"),
            ("unix://", "no socket path"),
            (
                "unix:///tmp/r.sock?pass=secret&db=x",
                "not a database number",
            ),
            (
                "unix:///tmp/r.sock?pass=secret&tls=1",
                "\"tls\" is not one of",
            ),
        ] {
            let e = check_url(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains("secret"), "{bad}: {e}");
        }
        assert_eq!(
            masked("redis+unix:///tmp/r.sock?user=a&pass=s3cret&db=1"),
            "redis+unix:///tmp/r.sock?user=a&pass=****&db=1"
        );
        assert_eq!(masked("unix:///tmp/r.sock"), "unix:///tmp/r.sock");
        assert_eq!(
            redis_cli_target("unix:///tmp/r.sock?pass=x"),
            "-s /tmp/r.sock"
        );
        assert_eq!(place("unix:///tmp/r.sock?pass=x"), "/tmp/r.sock");
        assert_eq!(redis_cli_target("redis://:x@h:6380"), "-h h -p 6380");
        assert_eq!(place("redis://:x@h"), "h:6379");
    }

    #[test]
    fn the_password_is_masked() {
        assert_eq!(
            masked("redis://alice:s3cret@h:6379/1"),
            "redis://alice:****@h:6379/1"
        );
        assert_eq!(masked("redis://:s3cret@h"), "redis://:****@h");
        assert_eq!(masked("redis://h:6379"), "redis://h:6379");
        assert_eq!(
            endpoint("redis://alice:s3cret@h:6380/1"),
            ("h".into(), 6380)
        );
        assert_eq!(
            endpoint("redis://:s3cret@10.0.0.9"),
            ("10.0.0.9".into(), 6379)
        );
    }

    #[test]
    fn the_default_host_name_is_the_short_name_made_valid() {
        assert_eq!(
            host_name_from("Build-Box.lan.example").unwrap(),
            "build-box"
        );
        assert_eq!(host_name_from("MacBook_Pro").unwrap(), "macbook-pro");
        let e = host_name_from("42.example").unwrap_err();
        assert!(e.contains("--host-name"), "{e}");
        assert!(check_host_name("a").is_ok());
        assert!(check_host_name("Bad Name").is_err());
    }

    /// A `rediss://` membership of host `a` with a CA file.
    fn with_a_ca_file() -> Joined {
        Joined {
            url: "rediss://:pw@h".into(),
            host: "a".into(),
            tls: TlsFiles {
                ca_file: Some("/etc/iapeer/ca.pem".into()),
                ..TlsFiles::default()
            },
        }
    }

    /// `federation.json` is one flat object: the TLS files stand beside `url` and `host`,
    /// absent when not given.
    #[test]
    fn the_membership_file_is_one_flat_object() {
        let j = with_a_ca_file();
        let text = serde_json::to_string(&j).unwrap();
        assert_eq!(
            text,
            r#"{"url":"rediss://:pw@h","host":"a","ca_file":"/etc/iapeer/ca.pem"}"#
        );
        assert_eq!(serde_json::from_str::<Joined>(&text).unwrap(), j);
        let plain: Joined = serde_json::from_str(r#"{"url":"redis://h","host":"a"}"#).unwrap();
        assert_eq!(plain.tls, TlsFiles::default());
    }

    #[test]
    fn the_membership_is_stored_private_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::at(dir.path());
        assert_eq!(load(&paths), Ok(None));
        let j = with_a_ca_file();
        store(&paths, &j).unwrap();
        let mode = crate::testkit::mode_of(paths.federation());
        assert_eq!(mode, 0o600);
        assert_eq!(load(&paths), Ok(Some(j)));
        assert!(forget(&paths).unwrap());
        assert!(!forget(&paths).unwrap());
    }
}

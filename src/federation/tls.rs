//! TLS for the federation's Redis (issue 28 item 1): a `rediss://` URL makes every connection
//! of the link, the stream threads and `doctor` a TLS one, through the `redis` crate's
//! synchronous API and rustls (the `ring` provider; no async runtime). The server's
//! certificate is checked against the CA file of the membership ([`Joined::ca_file`], `join
//! --ca-file`, `IAPEER_FEDERATION_CA_FILE`) when there is one, else against the system's CA
//! store (`rustls-native-certs`: no roots compiled into the binary). A client certificate and
//! key ([`Joined::client_cert`], [`Joined::client_key`]) answer Redis's `tls-auth-clients yes`.
//! A failure is put in words with what to do ([`explain`]); the password is never in them.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::Joined;

/// Why a membership's Redis client or connection cannot be had (issue 28 item 1). `Display`
/// says what is wrong and what to do, never the password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A CA file or client certificate with a `redis://` URL.
    #[error(
        "a CA file or client certificate is given but the URL is redis:// (no TLS): give \
         rediss://…, the server's tls-port, or leave the TLS files out"
    )]
    FilesWithoutTls,
    /// `--client-cert` without `--client-key`.
    #[error("a client certificate without its key: give --client-key too")]
    CertificateWithoutKey,
    /// `--client-key` without `--client-cert`.
    #[error("a client key without its certificate: give --client-cert too")]
    KeyWithoutCertificate,
    /// A named PEM file (`what`: "CA file", "client certificate", "client key") is unreadable.
    #[error(
        "cannot read the {what} {path}: {error}; give a readable PEM file (iapeer federation \
         join … --ca-file/--client-cert/--client-key, or IAPEER_FEDERATION_CA_FILE)"
    )]
    Unreadable {
        what: &'static str,
        path: String,
        error: String,
    },
    /// A CA file or client certificate with no PEM certificate in it.
    #[error("the {what} {path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")]
    NoCertificate { what: &'static str, path: String },
    /// A client key with no PEM private key in it.
    #[error("the client key {path} holds no PEM private key (-----BEGIN PRIVATE KEY-----)")]
    NoPrivateKey { path: String },
    /// The crate refused the URL or the connection: its error put in words by [`explain`].
    #[error("{0}")]
    Refused(String),
}

/// True when `url` asks for TLS (`rediss://`). Pure.
pub fn is_tls(url: &str) -> bool {
    url.trim_start()
        .to_ascii_lowercase()
        .starts_with("rediss://")
}

/// Check the TLS settings of a membership against its URL: a CA file or client certificate
/// only with `rediss://`, the client certificate and its key together. Pure.
///
/// Errors: [`ClientError::FilesWithoutTls`], [`ClientError::CertificateWithoutKey`],
/// [`ClientError::KeyWithoutCertificate`].
pub fn check(j: &Joined) -> Result<(), ClientError> {
    let tls_files =
        j.tls.ca_file.is_some() || j.tls.client_cert.is_some() || j.tls.client_key.is_some();
    if tls_files && !is_tls(&j.url) {
        return Err(ClientError::FilesWithoutTls);
    }
    match (&j.tls.client_cert, &j.tls.client_key) {
        (Some(_), None) => Err(ClientError::CertificateWithoutKey),
        (None, Some(_)) => Err(ClientError::KeyWithoutCertificate),
        _ => Ok(()),
    }
}

/// Read a PEM file the membership names, `what` saying which in errors.
fn read(what: &'static str, path: &str) -> Result<Vec<u8>, ClientError> {
    std::fs::read(path).map_err(|e| ClientError::Unreadable {
        what,
        path: path.to_string(),
        error: e.to_string(),
    })
}

/// The PEM of `path` when it holds at least one certificate. Pure but for the read.
///
/// Errors: unreadable, or no certificate in it.
fn certificates(what: &'static str, path: &str) -> Result<Vec<u8>, ClientError> {
    let pem = read(what, path)?;
    let found = CertificateDer::pem_slice_iter(&pem)
        .filter(Result::is_ok)
        .count();
    if found == 0 {
        return Err(ClientError::NoCertificate {
            what,
            path: path.to_string(),
        });
    }
    Ok(pem)
}

/// The Redis client for a membership: plain for `redis://`; for `rediss://`, TLS with the
/// CA file (else the system's CA store) and the client certificate when given. Reads the files
/// each time (a renewed certificate is taken at the next connection).
///
/// Errors: [`check`]'s; a file unreadable or without what it should hold; the URL refused by
/// the crate. In words, without the password.
pub fn client(j: &Joined) -> Result<redis::Client, ClientError> {
    check(j)?;
    let refused = |e: redis::RedisError| ClientError::Refused(explain(&e.to_string(), j));
    if !is_tls(&j.url) {
        return redis::Client::open(j.url.as_str()).map_err(refused);
    }
    let root_cert = match &j.tls.ca_file {
        Some(path) => Some(certificates("CA file", path)?),
        None => None,
    };
    let client_tls = match (&j.tls.client_cert, &j.tls.client_key) {
        (Some(cert), Some(key)) => {
            let client_cert = certificates("client certificate", cert)?;
            let client_key = read("client key", key)?;
            if PrivateKeyDer::from_pem_slice(&client_key).is_err() {
                return Err(ClientError::NoPrivateKey { path: key.clone() });
            }
            Some(redis::ClientTlsConfig {
                client_cert,
                client_key,
            })
        }
        _ => None,
    };
    redis::Client::build_with_tls(
        j.url.as_str(),
        redis::TlsCertificates {
            client_tls,
            root_cert,
        },
    )
    .map_err(refused)
}

/// Where the server's certificate is checked, for `status`: the CA file, or the system's
/// store; `None` for `redis://`. Pure.
pub fn trust(j: &Joined) -> Option<String> {
    if !is_tls(&j.url) {
        return None;
    }
    let client = match &j.tls.client_cert {
        Some(c) => format!(", client certificate {c}"),
        None => String::new(),
    };
    Some(match &j.tls.ca_file {
        Some(ca) => format!("TLS, the server's certificate checked against {ca}{client}"),
        None => {
            format!("TLS, the server's certificate checked against the system's CA store{client}")
        }
    })
}

/// A failed connection or command put in words: the crate's error `error` with what it means
/// for this membership and what to do, when it is one a TLS or scheme mistake makes. Pure.
pub fn explain(error: &str, j: &Joined) -> String {
    let (host, _) = super::endpoint(&j.url);
    let at = super::place(&j.url);
    let ca = "give the CA that signed it: iapeer federation join rediss://… --ca-file <ca.pem> \
              (or IAPEER_FEDERATION_CA_FILE)";
    let hint = if error.contains("UnknownIssuer") || error.contains("UnknownCA") {
        format!("the server's certificate at {at} is not signed by a CA this host trusts; {ca}")
    } else if error.contains("NotValidForName") || error.contains("not valid for name") {
        format!(
            "the server's certificate is not valid for \"{host}\", the host in the URL: name \
             the server as its certificate does (its subjectAltName), or issue it for {host}"
        )
    } else if error.contains("Expired") || error.contains("NotValidYet") {
        format!(
            "the server's certificate at {at} is outside its validity (or this host's clock is \
             wrong): renew it"
        )
    } else if error.contains("CertificateRequired") || error.contains("certificate required") {
        "the server asks for a client certificate (tls-auth-clients yes): give --client-cert \
         <pem> --client-key <pem> at join, or set tls-auth-clients no (or optional) in \
         redis.conf"
            .into()
    } else if error.contains("Unable to build client with TLS parameters") {
        "the client certificate or its key is not usable: give a PEM X.509 v3 certificate \
         (--client-cert) and the private key that matches it (--client-key)"
            .into()
    } else if is_tls(&j.url) && (error.contains("(os error 11)") || error.contains("timed out")) {
        format!(
            "{at} did not answer the TLS handshake in time; if it is a plain port, give \
             redis://… for it, or rediss://… with the server's tls-port"
        )
    } else if is_tls(&j.url)
        && (error.contains("InvalidContentType")
            || error.contains("corrupt message")
            || error.contains("InvalidMessage"))
    {
        format!(
            "{at} does not speak TLS: it is a plain port; give redis://… for it, or rediss://… \
             with the server's tls-port"
        )
    } else if !is_tls(&j.url)
        && (error.contains("end of file")
            || error.contains("reset by peer")
            || error.contains("broken pipe")
            || error.contains("Broken pipe"))
    {
        format!(
            "{at} closed the connection; if it is the server's tls-port, the URL must be \
             rediss://… (TLS)"
        )
    } else {
        return error.to_string();
    };
    format!("{error}: {hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(url: &str) -> Joined {
        Joined {
            url: url.into(),
            host: "a".into(),
            ..Joined::default()
        }
    }

    #[test]
    fn tls_files_go_with_rediss_and_a_certificate_with_its_key() {
        assert!(is_tls("rediss://h:6380") && is_tls("REDISS://h") && !is_tls("redis://h"));
        // `check` refuses `j` with `want`, whose words name `hint`.
        let refused = |j: &Joined, want: ClientError, hint: &str| {
            assert!(want.to_string().contains(hint), "{want}");
            assert_eq!(check(j), Err(want));
        };
        let mut j = joined("redis://:pw@h");
        assert_eq!(check(&j), Ok(()));
        j.tls.ca_file = Some("/ca.pem".into());
        refused(
            &j,
            ClientError::FilesWithoutTls,
            "the URL is redis:// (no TLS)",
        );
        j.url = "rediss://:pw@h".into();
        assert_eq!(check(&j), Ok(()));
        j.tls.client_cert = Some("/c.pem".into());
        refused(&j, ClientError::CertificateWithoutKey, "--client-key");
        j.tls.client_key = Some("/k.pem".into());
        assert_eq!(check(&j), Ok(()));
        j.tls.client_cert = None;
        refused(&j, ClientError::KeyWithoutCertificate, "--client-cert");
    }

    #[test]
    fn a_ca_file_unreadable_or_without_a_certificate_is_refused_before_connecting() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = joined("rediss://:secret@127.0.0.1:1");
        j.tls.ca_file = Some(dir.path().join("none.pem").display().to_string());
        let e = client(&j).err().unwrap().to_string();
        assert!(
            e.starts_with("cannot read the CA file") && e.contains("none.pem"),
            "{e}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        j.tls.ca_file = Some(empty.display().to_string());
        let e = client(&j).err().unwrap().to_string();
        assert!(e.contains("holds no PEM certificate"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        // The system's store: a client is built (nothing is connected yet).
        j.tls.ca_file = None;
        assert!(client(&j).is_ok());
    }

    #[test]
    fn tls_failures_are_put_in_words_with_what_to_do() {
        let tls = joined("rediss://:secret@redis.lan:6380");
        let plain = joined("redis://:secret@redis.lan:6380");
        let e = explain("invalid peer certificate: UnknownIssuer", &tls);
        assert!(
            e.starts_with(
                "invalid peer certificate: UnknownIssuer: the server's certificate at \
                           redis.lan:6380 is not signed by a CA this host trusts; give the CA"
            ) && e.contains("--ca-file"),
            "{e}"
        );
        let e = explain(
            "invalid peer certificate: certificate not valid for name \"redis.lan\"; \
             certificate is only valid for IpAddress(127.0.0.1)",
            &tls,
        );
        assert!(e.contains("not valid for \"redis.lan\""), "{e}");
        let e = explain("received corrupt message of type InvalidContentType", &tls);
        assert!(
            e.contains("does not speak TLS") && e.contains("redis://"),
            "{e}"
        );
        let e = explain("Resource temporarily unavailable (os error 11)", &tls);
        assert!(e.contains("did not answer the TLS handshake"), "{e}");
        let e = explain(
            "Unable to build client with TLS parameters provided. - KeyMismatch",
            &tls,
        );
        assert!(e.contains("--client-key"), "{e}");
        let e = explain("unexpected end of file", &plain);
        assert!(e.contains("the URL must be rediss://"), "{e}");
        let e = explain("received fatal alert: CertificateRequired", &tls);
        assert!(
            e.contains("--client-cert") && e.contains("tls-auth-clients"),
            "{e}"
        );
        // Other failures keep their words.
        for words in [
            "Connection refused (os error 111)",
            "unexpected end of file",
        ] {
            assert_eq!(explain(words, &tls), words);
        }
        assert_eq!(
            trust(&tls).unwrap(),
            "TLS, the server's certificate checked against the system's CA store"
        );
        assert_eq!(trust(&plain), None);
    }
}

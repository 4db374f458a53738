//! A private `redis-server` that speaks only TLS (issue 28 item 1, `rediss://`): no plain port
//! (`--port 0`), `--tls-port` on 127.0.0.1 at a port picked free, Redis's default
//! `tls-auth-clients yes` (a client must show a certificate of the test's CA). The test's own
//! certificates ([`Certs`]) are made with the `openssl` CLI (`scripts/test.sh` installs it when
//! missing) in a temp folder; the server is ended by its pid when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The test's PKI: a CA, a server certificate for `IP:127.0.0.1` only, a client certificate,
/// and a second CA that signed nothing the server shows (an untrusted one).
pub struct Certs {
    dir: tempfile::TempDir,
}

/// Run `openssl` in `dir` with `args`; panics with its output when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is not installed: scripts/test.sh installs it (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        super::describe(&out)
    );
}

/// A P-256 key and a certificate request (`new_key`) or a self-signed CA (`new_ca`).
const EC: &[&str] = &[
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

impl Certs {
    /// Make the CA, the other CA, the server's and a client's certificates (each v3, a day).
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for (name, cn) in [("ca", "iapeer test ca"), ("other-ca", "someone else's ca")] {
            let key = format!("{name}.key");
            let pem = format!("{name}.pem");
            let subj = format!("/CN={cn}");
            let mut args = vec!["req", "-x509"];
            args.extend_from_slice(EC);
            args.extend_from_slice(&["-keyout", &key, "-out", &pem, "-days", "1", "-subj", &subj]);
            args.extend_from_slice(&[
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ]);
            openssl(d, &args);
        }
        for (name, ext) in [
            (
                "server",
                "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
            ),
            ("client", "extendedKeyUsage=clientAuth\n"),
        ] {
            let (key, csr, pem, extfile) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.pem"),
                format!("{name}.ext"),
            );
            std::fs::write(d.join(&extfile), ext).unwrap();
            let mut args = vec!["req"];
            args.extend_from_slice(EC);
            args.extend_from_slice(&["-keyout", &key, "-out", &csr, "-subj", "/CN=127.0.0.1"]);
            openssl(d, &args);
            openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-out",
                    &pem,
                    "-days",
                    "1",
                    "-extfile",
                    &extfile,
                ],
            );
        }
        Certs { dir }
    }

    /// A file of the PKI: `ca.pem`, `other-ca.pem`, `server.pem`/`.key`, `client.pem`/`.key`.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// [`Certs::file`] as a string, for command lines.
    pub fn path(&self, name: &str) -> String {
        self.file(name).display().to_string()
    }
}

/// One running private TLS-only server requiring a password.
pub struct TlsRedis {
    pub port: u16,
    pub password: String,
    pub certs: Certs,
    /// Its working folder, removed when it is dropped.
    _dir: tempfile::TempDir,
    child: Child,
}

impl TlsRedis {
    /// Start it with new certificates and wait until it answers `PING` over TLS.
    pub fn start(password: &str) -> TlsRedis {
        let certs = Certs::new();
        let port = super::redis::free_port();
        let dir = tempfile::tempdir().expect("tempdir");
        let child = Command::new(super::redis::program())
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--requirepass", password])
            .arg("--tls-cert-file")
            .arg(certs.file("server.pem"))
            .arg("--tls-key-file")
            .arg(certs.file("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(certs.file("ca.pem"))
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let s = TlsRedis {
            port,
            password: password.to_string(),
            certs,
            _dir: dir,
            child,
        };
        let answered = super::poll(Duration::from_secs(10), || s.connection().is_ok());
        assert!(
            answered,
            "redis-server on TLS port {port} did not answer: {:?}",
            s.connection().err()
        );
        s
    }

    /// `rediss://:<password>@127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("rediss://:{}@127.0.0.1:{}", self.password, self.port)
    }

    /// `federation join` flags trusting the test's CA with the client certificate.
    pub fn join_flags(&self) -> Vec<String> {
        let c = &self.certs;
        [
            ("--ca-file", "ca.pem"),
            ("--client-cert", "client.pem"),
            ("--client-key", "client.key"),
        ]
        .iter()
        .flat_map(|(flag, name)| [flag.to_string(), c.path(name)])
        .collect()
    }

    /// A TLS connection of the test's own (the test's CA, the client certificate).
    pub fn connection(&self) -> ::redis::RedisResult<::redis::Connection> {
        let read = |name: &str| std::fs::read(self.certs.file(name)).expect("a test certificate");
        ::redis::Client::build_with_tls(
            self.url(),
            ::redis::TlsCertificates {
                client_tls: Some(::redis::ClientTlsConfig {
                    client_cert: read("client.pem"),
                    client_key: read("client.key"),
                }),
                root_cert: Some(read("ca.pem")),
            },
        )?
        .get_connection_with_timeout(Duration::from_secs(2))
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

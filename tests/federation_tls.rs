//! Federation over TLS (issue 28 item 1, `rediss://`): two hosts' daemons against a real
//! `redis-server` that speaks only TLS and asks for client certificates
//! (`common::tls::TlsRedis`), and the mistakes an operator makes with it told clearly.

use crate::common;
use crate::federation::{seen, send_ok, status_json, times_in_pane, wait_link};
use common::tls::TlsRedis;
use common::TestEnv;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const SECRET: &str = "Tls-Secret-pw";

/// `federation join <url> --host-name <host>` with `flags`, which succeeds.
fn join(env: &TestEnv, url: &str, host: &str, flags: &[String]) -> String {
    let mut args = vec!["federation", "join", url, "--host-name", host];
    args.extend(flags.iter().map(String::as_str));
    env.ok(&args)
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// a joins with `--ca-file` and a client certificate, b trusts the CA through
/// `IAPEER_FEDERATION_CA_FILE`; messages cross both ways over TLS, each delivered once; the
/// membership (the password and the files' paths) and the link's report stay 0600.
#[test]
fn messages_cross_both_ways_over_tls() {
    let redis = TlsRedis::start(SECRET);
    let mut a = TestEnv::new();
    let mut b = TestEnv::new();
    b.set("IAPEER_FEDERATION_CA_FILE", &redis.certs.path("ca.pem"));
    a.create_echo("alice");
    b.create_echo("bob");
    a.start_daemon();
    b.start_daemon();
    let out = join(&a, &redis.url(), "a", &redis.join_flags());
    assert!(
        out.contains("joined as host a at rediss://:****@127.0.0.1:"),
        "{out}"
    );
    let client: Vec<String> = redis.join_flags()[2..].to_vec();
    join(&b, &redis.url(), "b", &client);
    wait_link(&a, "a sees b online", |d| {
        seen(d, "b").is_some_and(|h| h["online"] == true)
    });
    wait_link(&b, "b sees a online", |d| {
        seen(d, "a").is_some_and(|h| h["online"] == true)
    });

    let out = send_ok(&a, "echo-alice", "bob@b", "over tls a to b", &[]);
    assert!(
        out.starts_with("delivered to bob (echo)"),
        "{out}\n{}",
        b.diagnostics()
    );
    a.wait_until("bob's echo reaches alice", Duration::from_secs(30), |a| {
        times_in_pane(a, "echo-alice", "from bob@b: echo: over tls a to b") == 1
    });
    let out = send_ok(&b, "echo-bob", "alice@a", "over tls b to a", &[]);
    assert!(
        out.starts_with("delivered to alice (echo)"),
        "{out}\n{}",
        a.diagnostics()
    );
    assert_eq!(
        times_in_pane(&a, "echo-alice", "from bob@b: over tls b to a"),
        1
    );
    assert_eq!(
        times_in_pane(&b, "echo-bob", "from alice@a: over tls a to b"),
        1
    );

    let status = a.ok(&["federation", "status"]);
    assert!(
        status.contains(&format!(
            "tls: TLS, the server's certificate checked against {}, client certificate {}",
            redis.certs.path("ca.pem"),
            redis.certs.path("client.pem")
        )),
        "{status}"
    );
    assert!(!status.contains(SECRET), "{status}");
    let doc = status_json(&b);
    assert_eq!(doc["link"]["state"], "connected", "{doc}");
    assert_eq!(
        doc["tls"].as_str().unwrap(),
        format!(
            "TLS, the server's certificate checked against {}, client certificate {}",
            redis.certs.path("ca.pem"),
            redis.certs.path("client.pem")
        )
    );

    for env in [&a, &b] {
        let p = env.paths();
        assert_eq!(mode(&p.federation()), 0o600);
        assert_eq!(mode(&p.federation_link()), 0o600);
        let stored: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p.federation()).unwrap()).unwrap();
        assert_eq!(stored["client_key"], redis.certs.path("client.key"));
    }
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(a.paths().federation()).unwrap()).unwrap();
    assert_eq!(stored["ca_file"], redis.certs.path("ca.pem"));
}

/// What an operator gets wrong, each told in `federation status`, `doctor` and the daemon log
/// with what to do, while local sends go on: a CA file that cannot be read (refused at join,
/// nothing stored), a server certificate of a CA this host does not trust, a host name the
/// certificate is not for, the TLS port given as `redis://`; then the right CA connects.
#[test]
fn tls_mistakes_are_told_clearly_and_local_sends_go_on() {
    let redis = TlsRedis::start(SECRET);
    let mut a = TestEnv::new();
    a.create_echo("alice");
    a.create_echo("ann");
    a.start_daemon();
    let url = redis.url();
    let client: Vec<String> = redis.join_flags()[2..].to_vec();

    let missing = redis.certs.path("no-such-ca.pem");
    let (_, err) = a.fails(
        &[
            "federation",
            "join",
            &url,
            "--host-name",
            "a",
            "--ca-file",
            &missing,
        ],
        1,
    );
    assert!(
        err.contains(&format!("cannot read the CA file {missing}: No such file")),
        "{err}"
    );
    assert!(!err.contains(SECRET), "{err}");
    assert!(!a.paths().federation().exists());

    let mut untrusted = vec!["--ca-file".to_string(), redis.certs.path("other-ca.pem")];
    untrusted.extend(client.iter().cloned());
    join(&a, &url, "a", &untrusted);
    let doc = wait_link(&a, "a's link refuses the server's certificate", |d| {
        d["link"]["state"] == "away"
            && d["link"]["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("UnknownIssuer"))
    });
    let error = doc["link"]["last_error"].as_str().unwrap().to_string();
    assert!(
        error.contains(&format!(
            "the server's certificate at 127.0.0.1:{} is not signed by a CA this host trusts; \
             give the CA that signed it: iapeer federation join rediss://… --ca-file <ca.pem>",
            redis.port
        )),
        "{error}"
    );
    let status = a.ok(&["federation", "status"]);
    assert!(status.contains(&error), "{status}");
    let doctor = a.run(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{text}");
    assert!(
        text.contains("federation: PROBLEM: host a away from rediss://:****@127.0.0.1:")
            && text.contains("is not signed by a CA this host trusts"),
        "{text}"
    );
    assert!(!text.contains(SECRET), "{text}");
    a.wait_until("the daemon log says why", Duration::from_secs(10), |a| {
        a.log("daemon")
            .contains("is not signed by a CA this host trusts")
    });
    let out = send_ok(&a, "echo-alice", "ann", "local while tls fails", &[]);
    assert!(out.starts_with("delivered to ann"), "{out}");

    let mut trusted = vec!["--ca-file".to_string(), redis.certs.path("ca.pem")];
    trusted.extend(client.iter().cloned());
    let by_name = url.replace("127.0.0.1", "localhost");
    join(&a, &by_name, "a", &trusted);
    let doc = wait_link(&a, "a's link: the certificate is not for localhost", |d| {
        d["link"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("not valid for name"))
    });
    let error = doc["link"]["last_error"].as_str().unwrap();
    assert!(
        error.contains(
            "the server's certificate is not valid for \"localhost\", the host in the URL"
        ),
        "{error}"
    );

    let plain = url.replace("rediss://", "redis://");
    join(&a, &plain, "a", &[]);
    let doc = wait_link(&a, "a's link: the TLS port given as redis://", |d| {
        d["link"]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("closed the connection"))
    });
    let error = doc["link"]["last_error"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "127.0.0.1:{} closed the connection; if it is the server's tls-port, the URL must be \
             rediss://… (TLS)",
            redis.port
        )),
        "{error}"
    );

    join(&a, &url, "a", &trusted);
    wait_link(&a, "a's link connects with the right CA", |d| {
        d["link"]["state"] == "connected"
    });
    let doctor = a.run(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("federation: host a connected to rediss://:****@127.0.0.1:"),
        "{text}"
    );
}

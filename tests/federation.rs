//! Federation, step 1 (issue 28 item 1): `federation join|leave|status` and the daemon's
//! link thread against a real `redis-server` (a private one per test, `common::redis`).

use crate::common;
use common::redis::RedisServer;
use common::TestEnv;
use serde_json::Value;
use std::time::Duration;

const SECRET: &str = "Sup3r-Secret-pw";

pub(crate) fn status_json(env: &TestEnv) -> Value {
    serde_json::from_str(&env.ok(&["federation", "status", "--json"])).unwrap()
}

/// The link's report for another host named `host`, if the link has seen it.
pub(crate) fn seen(doc: &Value, host: &str) -> Option<Value> {
    doc["link"]["hosts"]
        .as_array()?
        .iter()
        .find(|h| h["host"] == host)
        .cloned()
}

pub(crate) fn wait_link(env: &TestEnv, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    env.wait_seen(what, Duration::from_secs(30), status_json, ok)
}

#[test]
fn join_leave_and_status_round_trip_and_bad_input_is_refused() {
    let env = TestEnv::new();
    let out = env.ok(&["federation", "status"]);
    assert!(out.contains("not joined"), "{out}");
    assert_eq!(status_json(&env)["joined"], false);

    // Refusals: say what is wrong, never echo the password.
    let (_, err) = env.fails(&["federation", "join", &format!("http://u:{SECRET}@h")], 1);
    assert!(err.contains("scheme \"http\" is not redis"), "{err}");
    assert!(!err.contains(SECRET), "{err}");
    let (_, err) = env.fails(
        &[
            "federation",
            "join",
            &format!("rediss://u:{SECRET}@h"),
            "--ca-file",
            "/nonexistent/ca.pem",
        ],
        1,
    );
    assert!(
        err.contains("cannot read the CA file /nonexistent/ca.pem") && !err.contains(SECRET),
        "{err}"
    );
    // A Unix socket is this machine's: a URL naming another host for it is refused.
    let (_, err) = env.fails(
        &[
            "federation",
            "join",
            &format!("unix://redis.lan/run/redis.sock?pass={SECRET}"),
        ],
        1,
    );
    assert!(
        err.contains("a Unix socket URL names no host") && !err.contains(SECRET),
        "{err}"
    );
    let (_, err) = env.fails(
        &["federation", "join", "redis://h", "--host-name", "Bad_Name"],
        1,
    );
    assert!(err.contains("not a valid host name"), "{err}");
    let (_, err) = env.fails(&["federation", "join"], 2);
    assert!(err.contains("missing <redis-url>"), "{err}");
    let (_, err) = env.fails(&["federation", "frobnicate"], 2);
    assert!(err.contains("join, leave or status"), "{err}");
    assert!(!env.paths().federation().exists());

    let url = format!("redis://alice:{SECRET}@127.0.0.1:6399/2");
    let out = env.ok(&["federation", "join", &url, "--host-name", "a"]);
    assert!(
        out.contains("joined as host a at redis://alice:****@127.0.0.1:6399/2"),
        "{out}"
    );
    assert!(!out.contains(SECRET), "{out}");
    let file = env.paths().federation();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    assert!(common::read(&file).contains(SECRET));

    let text = env.ok(&["federation", "status"]);
    assert!(
        text.contains("joined as host a at redis://alice:****@"),
        "{text}"
    );
    assert!(text.contains("the daemon is not running"), "{text}");
    let doc = status_json(&env);
    assert_eq!(doc["joined"], true);
    assert_eq!(doc["host"], "a");
    assert_eq!(doc["source"], "file");
    assert!(!doc.to_string().contains(SECRET), "{doc}");

    // The variable overrides the stored URL; the host name stays.
    let out = env
        .cmd(&["federation", "status", "--json"])
        .env("IAPEER_FEDERATION_URL", "redis://:other-pw@10.0.0.9:6379")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["source"], "env");
    assert_eq!(doc["url"], "redis://:****@10.0.0.9:6379");
    assert_eq!(doc["host"], "a");

    let out = env.ok(&["federation", "leave"]);
    assert!(out.contains("left the federation"), "{out}");
    assert!(!file.exists());
    assert!(env
        .ok(&["federation", "leave"])
        .contains("nothing to leave"));
    assert_eq!(status_json(&env)["joined"], false);
}

#[test]
fn two_hosts_see_each_other_and_outlive_redis_going_away() {
    let mut redis = RedisServer::start(SECRET);
    let mut a = TestEnv::new();
    let mut b = TestEnv::new();
    a.create_echo("alice");
    a.create_echo("bob");
    a.start_daemon();
    b.start_daemon();
    // Both join while their daemons run: the links pick the membership up.
    a.ok(&["federation", "join", &redis.url(), "--host-name", "a"]);
    b.ok(&["federation", "join", &redis.url(), "--host-name", "b"]);

    let doc = wait_link(&a, "a sees b online", |d| {
        d["link"]["state"] == "connected" && seen(d, "b").is_some_and(|h| h["online"] == true)
    });
    assert!(doc["link"]["last_heartbeat_ms"].as_u64().is_some(), "{doc}");
    wait_link(&b, "b sees a online", |d| {
        seen(d, "a").is_some_and(|h| h["online"] == true)
    });
    let text = a.ok(&["federation", "status"]);
    assert!(text.contains("link: connected since"), "{text}");
    assert!(text.contains("host b online"), "{text}");

    // Redis goes away: the link says so, and local delivery goes on.
    redis.stop();
    let doc = wait_link(&a, "a's link away", |d| d["link"]["state"] == "away");
    assert!(doc["link"]["last_error"].as_str().is_some(), "{doc}");
    let text = a.ok(&["federation", "status"]);
    assert!(text.contains("link: away since"), "{text}");
    let out = a.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "local still works",
    ]);
    assert!(out.starts_with("delivered to bob"), "{out}");

    // Redis is back (empty: nothing was saved): both reconnect and write their heartbeats again.
    redis.resume();
    wait_link(&a, "a reconnected and sees b", |d| {
        d["link"]["state"] == "connected" && seen(d, "b").is_some_and(|h| h["online"] == true)
    });

    // b's daemon stops: its alive key goes with it, a sees it offline.
    b.stop_daemon();
    wait_link(&a, "a sees b offline", |d| {
        seen(d, "b").is_some_and(|h| h["online"] == false)
    });
    let text = a.ok(&["federation", "status"]);
    assert!(text.contains("host b offline"), "{text}");

    // a leaves: its link removes a from the hosts and its report.
    a.ok(&["federation", "leave"]);
    wait_link(&a, "a's link has nothing to report", |d| {
        d["link"].is_null()
    });
    assert!(a.ok(&["federation", "status"]).contains("not joined"));
    let mut con = redis.connection();
    let hosts: Vec<String> = ::redis::cmd("HKEYS")
        .arg("iapeer:v1:hosts")
        .query(&mut con)
        .unwrap();
    assert_eq!(hosts, ["b"], "a left, b only stopped");
    let alive: Vec<String> = ::redis::cmd("KEYS")
        .arg("iapeer:v1:alive:*")
        .query(&mut con)
        .unwrap();
    assert!(alive.is_empty(), "{alive:?}");

    // The password is in no output and no log.
    for env in [&a, &b] {
        for log in ["daemon", "lifecycle", "delivery"] {
            assert!(!env.log(log).contains(SECRET), "{log}.log has the password");
        }
        let stderr = common::read(&env.dir.path().join("daemon-stderr.log"));
        assert!(!stderr.contains(SECRET), "daemon stderr has the password");
        assert!(!common::read(&env.paths().federation_link()).contains(SECRET));
    }
    assert!(a
        .log("daemon")
        .contains("federation: connected to redis://:****@127.0.0.1"));
}

/// Issue 28 items 5 and 7: a host without the credentials — a wrong password, or none — is
/// refused by Redis: its link stays away and says why (the password never shown), its sends
/// to another host are refused at once (code `offline`), and the hosts that hold the
/// credentials never see it (not in their `hosts`, nothing delivered from it).
#[test]
fn a_host_with_a_wrong_password_is_refused_and_says_so() {
    let redis = RedisServer::start(SECRET);
    let mut a = TestEnv::new();
    a.create_echo("alice");
    a.start_daemon();
    a.ok(&["federation", "join", &redis.url(), "--host-name", "a"]);
    wait_link(&a, "a connected", |d| d["link"]["state"] == "connected");
    let wrong = format!("redis://:not-the-{SECRET}@127.0.0.1:{}", redis.port);
    let none = format!("redis://127.0.0.1:{}", redis.port);
    for (url, host) in [(wrong, "c"), (none, "d")] {
        let mut c = TestEnv::new();
        c.create_echo("carl");
        c.start_daemon();
        c.ok(&["federation", "join", &url, "--host-name", host]);
        let doc = wait_link(&c, "the link away", |d| {
            d["link"]["state"] == "away" && d["link"]["last_error"].is_string()
        });
        let error = doc["link"]["last_error"].as_str().unwrap().to_lowercase();
        assert!(error.contains("pass") || error.contains("auth"), "{doc}");
        assert!(!doc.to_string().contains(SECRET), "{doc}");
        assert!(!c.log("daemon").contains(SECRET));
        let out = c.run(&[
            "send",
            "alice@a",
            "--from",
            "echo-carl",
            "--message",
            "let me in",
            "--json",
        ]);
        let refused: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(refused["code"], "offline", "{refused}");
        // The hosts with the credentials never see it.
        let hosts: Vec<String> = ::redis::cmd("HKEYS")
            .arg("iapeer:v1:hosts")
            .query(&mut redis.connection())
            .unwrap();
        assert_eq!(hosts, vec!["a".to_string()]);
        assert!(seen(&status_json(&a), host).is_none());
    }
    assert!(!a.pane("echo-alice").contains("let me in"));
}

/// The check of `doctor --json` named `name`, if any.
fn doctor_check(doc: &Value, name: &str) -> Option<Value> {
    doc["checks"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
}

/// `doctor --json` and its exit code.
fn doctor_json(env: &TestEnv) -> (Value, Option<i32>) {
    let out = env.run(&["doctor", "--json"]);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("doctor --json: {e}: {}", common::describe(&out));
    });
    (doc, out.status.code())
}

/// Issue 28 item 6: `doctor` checks the federation when the root has joined — the link
/// connected or away (with why and what to do), the clock skew against Redis's `TIME` and
/// against the other hosts' heartbeats — and says nothing about it when not joined.
#[test]
fn doctor_checks_the_link_and_the_clock_skew_only_when_joined() {
    let mut redis = RedisServer::start(SECRET);
    let mut a = TestEnv::new();
    let mut b = TestEnv::new();
    a.create_echo("alice");
    a.start_daemon();
    b.start_daemon();

    // Not joined: no federation check, and doctor finds no problem.
    let (doc, code) = doctor_json(&a);
    assert_eq!(code, Some(0), "{doc}");
    assert!(
        !doc.to_string().contains("federation") && !doc.to_string().contains("clock-skew"),
        "{doc}"
    );
    assert!(!a.ok(&["doctor"]).contains("federation"));

    a.ok(&["federation", "join", &redis.url(), "--host-name", "a"]);
    b.ok(&["federation", "join", &redis.url(), "--host-name", "b"]);
    wait_link(&a, "a sees b online", |d| {
        d["link"]["state"] == "connected" && seen(d, "b").is_some_and(|h| h["online"] == true)
    });

    let (doc, code) = doctor_json(&a);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(doc["ok"], true, "{doc}");
    let link = doctor_check(&doc, "federation").expect("a federation check");
    assert_eq!(link["level"], "ok", "{doc}");
    assert!(
        link["message"]
            .as_str()
            .unwrap()
            .starts_with("host a connected to redis://:****@127.0.0.1:"),
        "{doc}"
    );
    // Both clocks are this machine's: the skew is a figure well under the warning's 2 s.
    let skew = doctor_check(&doc, "clock-skew").expect("a clock-skew check");
    assert_eq!(skew["level"], "ok", "{doc}");
    let message = skew["message"].as_str().unwrap();
    let figure = message
        .strip_prefix("this host's clock is ")
        .unwrap_or_else(|| panic!("{doc}"));
    let words: Vec<&str> = figure.split(' ').take(3).collect();
    assert!(
        figure.starts_with("in step (0 ms) with")
            || (words[0].parse::<u64>().is_ok_and(|ms| ms <= 2_000)
                && words[1] == "ms"
                && ["ahead", "behind"].contains(&words[2])),
        "{doc}"
    );
    assert!(
        message.contains(&format!("redis's at 127.0.0.1:{}", redis.port)),
        "{doc}"
    );
    let other = doctor_check(&doc, "clock-skew:b").expect("b's heartbeat measured");
    assert_eq!(other["level"], "ok", "{doc}");
    assert!(
        other["message"]
            .as_str()
            .unwrap()
            .starts_with("host b's clock is "),
        "{doc}"
    );
    let text = a.ok(&["doctor"]);
    assert!(text.contains("federation: host a connected to"), "{text}");
    assert!(text.contains("clock-skew: this host's clock is"), "{text}");
    assert_eq!(text.lines().last(), Some("doctor: no problems"), "{text}");
    assert!(!text.contains(SECRET) && !doc.to_string().contains(SECRET));

    // Hosts with wrong clocks, c 5 s ahead and d 30 s behind, write their heartbeats as a
    // host does (SET alive:<host> EX 15, HSET hosts): a's doctor warns about c and fails on d.
    let mut con = redis.connection();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for (host, off_ms) in [("c", 5_000), ("d", -30_000)] {
        fake_heartbeat(&mut con, host, now_ms + off_ms, 15);
    }
    let (doc, code) = doctor_json(&a);
    assert_eq!(code, Some(1), "{doc}");
    let c = doctor_check(&doc, "clock-skew:c").expect("c measured");
    assert_eq!(c["level"], "warn", "{doc}");
    let secs = |check: &Value, prefix: &str| -> f64 {
        let m = check["message"].as_str().unwrap();
        let rest = m.strip_prefix(prefix).unwrap_or_else(|| panic!("{m}"));
        rest.split(' ').next().unwrap().parse().unwrap()
    };
    let ahead = secs(&c, "host c's clock is ");
    assert!((4.5..=5.5).contains(&ahead), "{doc}");
    assert!(c["message"]
        .as_str()
        .unwrap()
        .contains(" s ahead of redis's"));
    assert!(c["fix"].as_str().unwrap().contains("NTP"), "{doc}");
    let d = doctor_check(&doc, "clock-skew:d").expect("d measured");
    assert_eq!(d["level"], "fail", "{doc}");
    let behind = secs(&d, "host d's clock is ");
    assert!((29.5..=30.5).contains(&behind), "{doc}");
    assert!(d["message"].as_str().unwrap().contains(" s behind redis's"));
    let text = String::from_utf8_lossy(&a.run(&["doctor"]).stdout).into_owned();
    assert!(
        text.contains("clock-skew:d: PROBLEM: host d's clock is"),
        "{text}"
    );
    assert_eq!(
        text.lines().last(),
        Some("doctor: the federation has a problem (above)"),
        "{text}"
    );
    ::redis::cmd("DEL")
        .arg("iapeer:v1:alive:c")
        .arg("iapeer:v1:alive:d")
        .query::<()>(&mut con)
        .unwrap();
    let (doc, code) = doctor_json(&a);
    assert_eq!(code, Some(0), "offline hosts are not measured: {doc}");
    assert!(doctor_check(&doc, "clock-skew:c").is_none(), "{doc}");

    // Redis goes away: doctor says the link is away since when, why, and what to do.
    redis.stop();
    wait_link(&a, "a's link away", |d| d["link"]["state"] == "away");
    let (doc, code) = doctor_json(&a);
    assert_eq!(code, Some(1), "{doc}");
    assert_eq!(doc["ok"], false, "{doc}");
    let link = doctor_check(&doc, "federation").unwrap();
    assert_eq!(link["level"], "fail", "{doc}");
    let message = link["message"].as_str().unwrap();
    assert!(
        message.starts_with("host a away from redis://:****@127.0.0.1:")
            && message.contains(" since ")
            && message.contains("local delivery goes on"),
        "{doc}"
    );
    let fix = link["fix"].as_str().unwrap();
    assert!(
        fix.contains(&format!("redis-cli -h 127.0.0.1 -p {} ping", redis.port)),
        "{doc}"
    );
    let skew = doctor_check(&doc, "clock-skew").unwrap();
    assert_eq!(skew["level"], "warn", "{doc}");
    assert!(
        skew["message"]
            .as_str()
            .unwrap()
            .starts_with("not measured: redis at 127.0.0.1:"),
        "{doc}"
    );
    let out = a.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert!(
        text.contains("federation: PROBLEM: host a away from"),
        "{text}"
    );
    assert_eq!(
        text.lines().last(),
        Some("doctor: the federation has a problem (above)"),
        "{text}"
    );
    assert!(!text.contains(SECRET) && !doc.to_string().contains(SECRET));

    // Left: no federation check again, whatever Redis does.
    a.ok(&["federation", "leave"]);
    let (doc, code) = doctor_json(&a);
    assert_eq!(code, Some(0), "{doc}");
    assert!(doctor_check(&doc, "federation").is_none(), "{doc}");
    assert!(doctor_check(&doc, "clock-skew").is_none(), "{doc}");
}

/// Write host `host`'s heartbeat, written at `time_ms` by its clock, as a host does (SET
/// alive:<host> EX `ttl_secs`, HSET hosts).
fn fake_heartbeat(con: &mut ::redis::Connection, host: &str, time_ms: i64, ttl_secs: u64) {
    let hb = serde_json::json!({"host": host, "time_ms": time_ms, "version": "0.1.0",
        "interval_secs": 5})
    .to_string();
    ::redis::pipe()
        .cmd("SET")
        .arg(format!("iapeer:v1:alive:{host}"))
        .arg(&hb)
        .arg("EX")
        .arg(ttl_secs)
        .cmd("HSET")
        .arg("iapeer:v1:hosts")
        .arg(host)
        .arg(&hb)
        .query::<()>(con)
        .unwrap();
}

/// Write a roster for a host `host` that is no daemon (its peers, then its heartbeat), as a
/// host's link writes them, so a test can have a third host cheaply.
fn fake_host(redis: &RedisServer, host: &str, peers: &[&str]) {
    let mut con = redis.connection();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let peers: Vec<Value> = peers
        .iter()
        .map(|p| {
            serde_json::json!({"name": p, "runtimes": ["echo"], "state": "available",
                "description": "", "intelligence": "artificial"})
        })
        .collect();
    let roster = serde_json::json!({"host": host, "time_ms": now_ms, "peers": peers}).to_string();
    ::redis::cmd("SET")
        .arg(format!("iapeer:v1:roster:{host}"))
        .arg(&roster)
        .arg("EX")
        .arg(60)
        .query::<()>(&mut con)
        .unwrap();
    fake_heartbeat(&mut con, host, now_ms, 60);
}

/// Where the two hosts' daemons run (issue 28 item 7).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Net {
    /// Each in a network namespace of its own with only its `lo` up: the hosts share no
    /// loopback, and reach each other through Redis on a Unix socket only.
    Separate,
    /// Both on this machine's loopback, Redis on a loopback port.
    Shared,
}

/// [`Net::Separate`] where this machine allows network namespaces; else [`Net::Shared`],
/// saying why on the test's output (never a silent pass).
fn net_where_allowed(test: &str) -> Net {
    match common::netns::available() {
        Ok(()) => Net::Separate,
        Err(why) => {
            eprintln!(
                "{test}: hosts a and b share this machine's loopback: no network namespace \
                 here ({why})"
            );
            Net::Shared
        }
    }
}

/// The hosts' Redis for `net`: on a Unix socket for separate namespaces (no TCP reaches
/// across them), on a loopback port for a shared loopback.
fn redis_for(net: Net) -> RedisServer {
    match net {
        Net::Separate => RedisServer::start_on_socket(SECRET),
        Net::Shared => RedisServer::start(SECRET),
    }
}

/// Start `env`'s daemon where `net` says: in a fresh network namespace (checked: not the
/// test's own), or as [`TestEnv::start_daemon`].
fn start_host(env: &mut TestEnv, net: Net) {
    match net {
        Net::Shared => env.start_daemon(),
        Net::Separate => {
            let cmd = common::netns::command_in_own_namespace(env, &common::bin(), &["daemon"]);
            env.start_daemon_by(cmd);
            assert_ne!(
                common::netns::namespace_of(daemon_pid(env)),
                common::netns::namespace_of(std::process::id()),
                "the daemon runs in a network namespace of its own"
            );
        }
    }
}

fn daemon_pid(env: &TestEnv) -> u32 {
    env.daemon.as_ref().expect("a running daemon").id()
}

/// Run `f` (a connection to the host's loopback, e.g. its fleet API) where `env`'s daemon
/// is: inside its network namespace when it has its own.
fn on_host<T: Send>(env: &TestEnv, f: impl FnOnce() -> T + Send) -> T {
    let pid = daemon_pid(env);
    if common::netns::namespace_of(pid) == common::netns::namespace_of(std::process::id()) {
        f()
    } else {
        common::netns::inside(pid, f)
    }
}

/// Hosts a and b share no loopback: a's HTTP port (MCP and fleet API) answers on a's
/// loopback, and neither on b's nor on the test's own; each daemon's namespace is its own.
fn assert_apart(a: &TestEnv, b: &TestEnv) {
    use common::netns::{inside, loopback_port_answers, namespace_of};
    let (a_pid, b_pid) = (daemon_pid(a), daemon_pid(b));
    assert_ne!(namespace_of(a_pid), namespace_of(b_pid));
    let port = a.port();
    assert!(
        inside(a_pid, || loopback_port_answers(port)),
        "a's port {port} answers in a's namespace"
    );
    assert!(
        !loopback_port_answers(port),
        "a's port {port} answered on the test's loopback"
    );
    // (Each namespace picks its ports alone: b's own server may hold the same number.)
    if b.port() != port {
        assert!(
            !inside(b_pid, || loopback_port_answers(port)),
            "a's port {port} answered from b's namespace: the hosts share a loopback"
        );
    }
}

/// Two hosts joined to `redis`: a with alice, b with `b_peers`, each seeing the other.
fn two_hosts(redis: &RedisServer, b_peers: &[&str]) -> (TestEnv, TestEnv) {
    two_hosts_with(redis, b_peers, &[])
}

/// [`two_hosts`] with more daemon environment on both.
fn two_hosts_with(
    redis: &RedisServer,
    b_peers: &[&str],
    vars: &[(&str, &str)],
) -> (TestEnv, TestEnv) {
    two_hosts_at((&redis.url(), &redis.url()), b_peers, vars)
}

/// [`two_hosts_with`], a joining with the URL `urls.0` and b with `urls.1`.
fn two_hosts_at(urls: (&str, &str), b_peers: &[&str], vars: &[(&str, &str)]) -> (TestEnv, TestEnv) {
    two_hosts_in(Net::Shared, urls, b_peers, vars)
}

/// [`two_hosts_at`] with the daemons where `net` says.
fn two_hosts_in(
    net: Net,
    urls: (&str, &str),
    b_peers: &[&str],
    vars: &[(&str, &str)],
) -> (TestEnv, TestEnv) {
    let mut a = TestEnv::new();
    let mut b = TestEnv::new();
    for (k, v) in vars {
        a.set(k, v);
        b.set(k, v);
    }
    a.create_echo("alice");
    for p in b_peers {
        b.create_echo(p);
    }
    start_host(&mut a, net);
    start_host(&mut b, net);
    a.ok(&["federation", "join", urls.0, "--host-name", "a"]);
    b.ok(&["federation", "join", urls.1, "--host-name", "b"]);
    wait_link(&a, "a sees b online", |d| {
        seen(d, "b").is_some_and(|h| h["online"] == true)
    });
    wait_link(&b, "b sees a online", |d| {
        seen(d, "a").is_some_and(|h| h["online"] == true)
    });
    (a, b)
}

/// `iapeer send <to> --from <from> --message <message>` on `env` with `more` flags, which
/// succeeds: its output.
pub(crate) fn send_ok(env: &TestEnv, from: &str, to: &str, message: &str, more: &[&str]) -> String {
    let mut args = vec!["send", to, "--from", from, "--message", message];
    args.extend_from_slice(more);
    env.ok(&args)
}

/// [`send_ok`] from `echo-alice` of host `a` to `to`, an echo peer of host `b` that sleeps:
/// answered delivered, and woke it.
fn send_waking(a: &TestEnv, b: &TestEnv, to: &str, message: &str, more: &[&str]) {
    let out = send_ok(a, "echo-alice", to, message, more);
    let name = to.split('@').next().unwrap();
    assert_eq!(
        out.trim(),
        format!("delivered to {name} (echo), woke"),
        "{}",
        b.diagnostics()
    );
}

/// `iapeer send <to> --from echo-alice --message <message> --json` on `env` with `more` flags:
/// its JSON document (the refusal's, when refused).
fn send_json(env: &TestEnv, to: &str, message: &str, more: &[&str]) -> Value {
    let mut args = vec![
        "send",
        to,
        "--from",
        "echo-alice",
        "--message",
        message,
        "--json",
    ];
    args.extend_from_slice(more);
    let out = env.run(&args);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", common::describe(&out)))
}

/// How many times `text` is in the pane of `identity`.
pub(crate) fn times_in_pane(env: &TestEnv, identity: &str, text: &str) -> usize {
    env.pane(identity).matches(text).count()
}

/// Issue 28 items 2–3: a send from host a reaches a live peer of host b (delivered), a
/// sleeping one (woken), by `name@host` and by a plain name only b has; the recipient answers
/// `alice@a` the same way; an ambiguous plain name is refused with the choices; a stopped
/// peer is refused with its code; every hop is in both hosts' delivery.log as
/// `path=federation`. Each host in a network namespace of its own where the machine allows
/// (checked: a's HTTP port is not reachable from b's), Redis on a Unix socket.
#[test]
fn sends_cross_hosts_to_live_and_sleeping_peers_and_come_back() {
    let net = net_where_allowed("sends_cross_hosts_to_live_and_sleeping_peers_and_come_back");
    let redis = redis_for(net);
    let (a, b) = two_hosts_in(net, (&redis.url(), &redis.url()), &["bob", "carol"], &[]);
    if net == Net::Separate {
        assert_apart(&a, &b);
        // Joined by the Unix socket's URL: its password is masked there too.
        let text = a.ok(&["federation", "status"]);
        assert!(
            text.contains("at unix://") && text.contains("pass=****"),
            "{text}"
        );
        assert!(
            !text.contains(SECRET) && !a.log("daemon").contains(SECRET),
            "{text}"
        );
    }
    assert_eq!(
        b.control(r#"{"op":"wake","personality":"carol"}"#)["ok"],
        true
    );

    let out = send_ok(&a, "echo-alice", "carol@b", "hello carol", &[]);
    assert_eq!(
        out.trim(),
        "delivered to carol (echo)",
        "{}",
        b.diagnostics()
    );
    assert_eq!(
        times_in_pane(&b, "echo-carol", "from alice@a: hello carol"),
        1
    );

    send_waking(&a, &b, "bob", "wake up bob", &[]);
    assert_eq!(
        times_in_pane(&b, "echo-bob", "from alice@a: wake up bob"),
        1
    );

    // The echo agents answer their sender as the envelope names it, `alice@a`, through MCP
    // `send_to_peer` on b: the answers cross back (and woke alice).
    a.wait_until(
        "carol's and bob's answers reach a",
        Duration::from_secs(30),
        |a| {
            times_in_pane(a, "echo-alice", "from carol@b: echo: hello carol") == 1
                && times_in_pane(a, "echo-alice", "from bob@b: echo: wake up bob") == 1
        },
    );
    // The fleet API takes `name@host` too.
    let sent = on_host(&a, || {
        crate::fleet::post(
            &a,
            "/fleet/v1/send",
            serde_json::json!({"personality": "carol@b", "from": "echo-alice",
                "message": "by the fleet API"}),
        )
    });
    assert_eq!(sent.status, 200, "{}", String::from_utf8_lossy(&sent.body));
    let sent = sent.json();
    assert_eq!(
        sent["result"]["delivered_to"]["personality"], "carol",
        "{sent}"
    );
    assert_eq!(
        times_in_pane(&b, "echo-carol", "from alice@a: by the fleet API"),
        1
    );
    assert!(
        a.has_event(
            "delivery",
            "delivery",
            &[
                ("path", "federation"),
                ("entry", "fleet"),
                ("to", "carol@b")
            ]
        ),
        "{}",
        a.log("delivery")
    );
    // And `iapeer send` on b takes `name@host` too.
    let out = send_ok(&b, "echo-bob", "alice@a", "back to you", &[]);
    assert_eq!(
        out.trim(),
        "delivered to alice (echo)",
        "{}",
        a.diagnostics()
    );
    assert_eq!(
        times_in_pane(&a, "echo-alice", "from bob@b: back to you"),
        1
    );
    assert!(
        b.has_event(
            "delivery",
            "delivery",
            &[
                ("path", "federation"),
                ("entry", "mcp"),
                ("to", "alice@a"),
                ("ok", "true")
            ]
        ),
        "{}",
        b.log("delivery")
    );

    // Both ends of a hop are logged as the federation's.
    assert!(
        a.has_event(
            "delivery",
            "delivery",
            &[("path", "federation"), ("to", "carol@b"), ("ok", "true")]
        ),
        "{}",
        a.log("delivery")
    );
    assert!(
        b.has_event(
            "delivery",
            "delivery",
            &[
                ("path", "federation"),
                ("caller", "echo-alice@a"),
                ("ok", "true")
            ]
        ),
        "{}",
        b.log("delivery")
    );

    // A third host with a bob too: the plain name is ambiguous and refused with the choices.
    fake_host(&redis, "c", &["bob"]);
    // (A host's roster is read with its heartbeat: seen online, its roster is known.)
    wait_link(&a, "a sees c online", |d| {
        seen(d, "c").is_some_and(|h| h["online"] == true)
    });
    let (_, refused) = a.fails(
        &[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            "which bob?",
        ],
        1,
    );
    assert!(
        refused.contains("\"bob\" is ambiguous") && refused.contains("name one: bob@b, bob@c"),
        "{refused}"
    );
    assert_eq!(times_in_pane(&b, "echo-bob", "which bob?"), 0);

    // A stopped peer of b is refused with b's reason and code.
    b.ok(&["stop", "carol"]);
    let doc = send_json(&a, "carol@b", "stopped?", &[]);
    assert_eq!(doc["code"], "stopped", "{doc}");
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("\"carol\" (echo) is stopped"),
        "{doc}"
    );
}

/// Issue 28 items 3–4: a message to a host whose daemon is down is answered `queued` at once
/// (kept in its inbox stream, at most the retention), or refused at once when the sender
/// chose not to wait (`--if-busy refuse`); it is delivered exactly once when the daemon comes
/// back, and the sender's `delivery.log` follows it there; a send again with the same message
/// id is not pasted twice. Each host in a network namespace of its own where the machine
/// allows.
#[test]
fn a_message_for_a_host_that_is_down_is_delivered_once_when_it_returns() {
    let net =
        net_where_allowed("a_message_for_a_host_that_is_down_is_delivered_once_when_it_returns");
    let redis = redis_for(net);
    let (a, mut b) = two_hosts_in(net, (&redis.url(), &redis.url()), &["bob"], &[]);
    b.stop_daemon();
    wait_link(&a, "a sees b offline", |d| {
        seen(d, "b").is_some_and(|h| h["online"] == false)
    });
    let started = std::time::Instant::now();
    let out = send_ok(
        &a,
        "echo-alice",
        "bob@b",
        "while you were out",
        &["--id", "m-down-1", "--timeout", "20"],
    );
    assert_eq!(
        out.trim(),
        "queued for bob@b (default) — host: waiting for host b, which is offline: kept until it \
         returns, at most 24 h",
        "{}",
        a.diagnostics()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered at once"
    );
    let doc = send_json(&a, "bob@b", "or not at all", &["--if-busy", "refuse"]);
    assert_eq!(doc["code"], "offline", "{doc}");
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .starts_with("host b is offline (its heartbeat lapsed); message NOT delivered"),
        "{doc}"
    );
    // The entry as b's daemon leaves it when it dies after reading it, before its outcome is
    // written: read by b's consumer and not acknowledged.
    let mut con = redis.connection();
    let read: ::redis::Value = ::redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("iapeer")
        .arg("b")
        .arg("STREAMS")
        .arg("iapeer:v1:inbox:b:from:a")
        .arg(">")
        .query(&mut con)
        .unwrap();
    assert!(
        format!("{read:?}").contains("while you were out"),
        "{read:?}"
    );
    start_host(&mut b, net);
    b.wait_until("b delivered it", Duration::from_secs(60), |b| {
        times_in_pane(b, "echo-bob", "from alice@a: while you were out") == 1
    });
    a.wait_until("a followed it there", Duration::from_secs(30), |a| {
        a.has_event(
            "delivery",
            "delivery-followup",
            &[
                ("path", "federation"),
                ("to", "bob@b"),
                ("qkind", "host"),
                ("msgid", "m-down-1"),
                ("outcome", "delivered"),
            ],
        )
    });
    assert_eq!(times_in_pane(&b, "echo-bob", "or not at all"), 0);
    // (While a's link has not seen b's heartbeat yet, a send again is kept as above.)
    wait_link(&a, "a sees b online", |d| {
        seen(d, "b").is_some_and(|h| h["online"] == true)
    });
    let out = send_ok(
        &a,
        "echo-alice",
        "bob@b",
        "while you were out",
        &["--id", "m-down-1"],
    );
    assert!(
        out.contains("earlier (message id m-down-1): not sent again"),
        "{out}"
    );
    assert_eq!(
        times_in_pane(&b, "echo-bob", "from alice@a: while you were out"),
        1
    );
    assert!(
        b.log("daemon")
            .contains("1 entries of iapeer:v1:inbox:b:from:a read before and not acknowledged"),
        "claimed again at the start: {}",
        b.log("daemon")
    );
    // Acknowledged once its outcome was written (just after the sender read it): nothing
    // stays pending.
    let pending = || -> u64 {
        let (n, ..): (u64, ::redis::Value, ::redis::Value, ::redis::Value) =
            ::redis::cmd("XPENDING")
                .arg("iapeer:v1:inbox:b:from:a")
                .arg("iapeer")
                .query(&mut con)
                .unwrap();
        n
    };
    let mut pending = pending;
    assert!(common::poll(Duration::from_secs(10), || pending() == 0));
}

/// Issue 28 item 7: a message on a topic to a peer of another host that slept since its last
/// message on that topic resumes that peer's conversation (b's wake: `mode=resume
/// cause=topic-match`). Each host in a network namespace of its own where the machine allows.
#[test]
fn a_topic_resumes_a_sleeping_peer_of_another_host() {
    let net = net_where_allowed("a_topic_resumes_a_sleeping_peer_of_another_host");
    let redis = redis_for(net);
    let sleepy = [("IAPEER_IDLE_SECS", "3"), ("IAPEER_TICK_SECS", "1")];
    let (a, b) = two_hosts_in(net, (&redis.url(), &redis.url()), &["bob"], &sleepy);
    send_waking(&a, &b, "bob@b", "remember 42", &["--topic", "t1"]);
    assert_eq!(crate::conversations::last_wake(&b, "echo-bob").0, "fresh");
    crate::conversations::wait_asleep(&b, "echo-bob");
    send_waking(&a, &b, "bob@b", "what was it?", &["--topic", "t1"]);
    assert_eq!(
        crate::conversations::last_wake(&b, "echo-bob"),
        ("resume".to_string(), "topic-match".to_string()),
        "{}",
        b.log("lifecycle")
    );
    assert_eq!(
        times_in_pane(&b, "echo-bob", "from alice@a: what was it?"),
        1
    );
}

/// Issue 28 item 4: a message kept for a host that stays offline longer than the retention
/// (2 s here, by the `federation-retention` test hook) is given up: the sender is told it
/// was NOT delivered, and the host, once back, refuses the entry as too old instead of
/// delivering it late.
#[test]
fn a_message_kept_past_the_retention_is_given_up_and_its_sender_told() {
    let redis = RedisServer::start(SECRET);
    let (a, mut b) = two_hosts_with(
        &redis,
        &["bob"],
        &[("IAPEER_TEST_HOOK", "federation-retention:2000")],
    );
    assert_eq!(
        a.control(r#"{"op":"wake","personality":"alice"}"#)["ok"],
        true
    );
    b.stop_daemon();
    wait_link(&a, "a sees b offline", |d| {
        seen(d, "b").is_some_and(|h| h["online"] == false)
    });
    let out = send_ok(&a, "echo-alice", "bob@b", "too late", &["--id", "m-late-1"]);
    assert!(out.ends_with("at most 2 s\n"), "{out}");
    a.wait_until("a gave it up", Duration::from_secs(30), |a| {
        a.has_event(
            "delivery",
            "delivery-followup",
            &[
                ("msgid", "m-late-1"),
                ("outcome", "expired"),
                ("ok", "false"),
            ],
        ) && received(a, "alice")
            .keys()
            .any(|m| m.contains("and NOT delivered: host b did not come back within the 2 s"))
    });
    b.start_daemon();
    b.wait_until("b refused it as too old", Duration::from_secs(30), |b| {
        b.log("daemon").contains("refused as too old")
    });
    assert_eq!(times_in_pane(&b, "echo-bob", "too late"), 0);
}

/// How many times the echo agent of `peer` received each body (its transcript keeps every
/// session's `user` records, across daemons).
fn received(env: &TestEnv, peer: &str) -> std::collections::HashMap<String, usize> {
    let path = env.peer_dir(peer).join(".echo-agent/transcript.jsonl");
    let mut n = std::collections::HashMap::new();
    for line in common::read(&path).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["type"] == "user" {
            *n.entry(v["body"].as_str().unwrap_or("").to_string())
                .or_insert(0) += 1;
        }
    }
    n
}

/// What a burst's sender saw: its sends again (after a `timeout` or `offline` answer) and
/// the bodies answered `state-unknown` (exit 3; never sent again).
type Seen = (usize, Vec<String>);

/// Send `bodies` in order from `from` to `to` with `run` (an `iapeer` command line's
/// output), each with the id `m-<tag>-<i>`, on a thread: a send not answered `ok` (its host or
/// Redis was down: `timeout`, `offline`) is sent again with its id after 200 ms until it is,
/// for at most 3 minutes each — the id ledger keeps it from being pasted twice.
fn send_all(
    run: impl Fn(&[&str]) -> std::process::Output + Send + 'static,
    from: &'static str,
    to: &'static str,
    bodies: Vec<String>,
    tag: &'static str,
) -> std::thread::JoinHandle<Seen> {
    std::thread::spawn(move || {
        let (mut retried, mut unknown) = (0, Vec::new());
        for (i, body) in bodies.iter().enumerate() {
            let id = format!("m-{tag}-{i:04}");
            let mut last = None;
            let answered =
                common::poll_every(Duration::from_millis(200), Duration::from_secs(180), || {
                    let out = run(&[
                        "send",
                        to,
                        "--from",
                        from,
                        "--message",
                        body,
                        "--id",
                        &id,
                        "--timeout",
                        "3",
                    ]);
                    if out.status.code() == Some(3) {
                        unknown.push(body.clone());
                    }
                    let done = out.status.success() || out.status.code() == Some(3);
                    if !done {
                        retried += 1;
                        last = Some(out);
                    }
                    done
                });
            assert!(
                answered,
                "{}",
                last.as_ref().map(common::describe).unwrap_or_default()
            );
        }
        (retried, unknown)
    })
}

/// The bodies of `sent` not received (lost) and those received more than once
/// (duplicated), by `got` (from [`received`]).
fn tally(
    sent: &[String],
    got: &std::collections::HashMap<String, usize>,
) -> (Vec<String>, Vec<String>) {
    let lost = sent
        .iter()
        .filter(|m| !got.contains_key(*m))
        .cloned()
        .collect();
    let twice = sent
        .iter()
        .filter(|m| got.get(*m).is_some_and(|n| *n > 1))
        .cloned()
        .collect();
    (lost, twice)
}

/// A burst of `n` messages from alice of host a to bob of host b (both joined to `redis`),
/// with `fault` done to b and Redis once a third is in: every message reaches bob exactly
/// once (0 lost, 0 duplicated); the figures are printed after `label`.
fn burst_under(
    redis: &mut RedisServer,
    n: usize,
    label: &'static str,
    fault: impl FnOnce(&mut TestEnv, &mut RedisServer),
) {
    let (a, mut b) = two_hosts_with(redis, &["bob"], &[("IAPEER_STORM_LIMIT", "1000000")]);
    assert_eq!(
        b.control(r#"{"op":"wake","personality":"bob"}"#)["ok"],
        true
    );
    // `echo:` bodies: the echo agent does not answer them (no traffic back).
    let bodies: Vec<String> = (0..n).map(|i| format!("echo: {label} {i:03}")).collect();
    let a = std::sync::Arc::new(a);
    let sender = {
        let a = a.clone();
        send_all(
            move |args| a.run(args),
            "echo-alice",
            "bob@b",
            bodies.clone(),
            label,
        )
    };
    b.wait_until(
        "a third of the burst is in",
        Duration::from_secs(120),
        |b| received(b, "bob").len() >= n / 3,
    );
    fault(&mut b, redis);
    let (retried, unknown) = sender.join().unwrap();
    b.wait_until("the whole burst is in", Duration::from_secs(120), |b| {
        received(b, "bob").len() >= n - unknown.len()
    });
    let got = received(&b, "bob");
    let (lost, twice) = tally(&bodies, &got);
    let recovered = b
        .log("daemon")
        .matches("records do not hold it: sent again")
        .count();
    eprintln!(
        "{label}: {n} sent, {} received, {retried} sends again, {} state unknown \
         ({unknown:?}), {recovered} cut pastes sent again, {} lost, {} duplicated",
        got.len(),
        unknown.len(),
        lost.len(),
        twice.len()
    );
    // (A send answered `state-unknown` is one whose paste the kill cut after the agent took
    // it — its records hold it — so it is among those received: not lost.)
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert!(twice.is_empty(), "duplicated: {twice:?}");
}

/// Issue 28 items 3 and 7: b's daemon is killed (-9) in the middle of a burst of 100 sends
/// from a and started again: every message reaches bob exactly once (0 lost, 0 duplicated);
/// the senders whose answer was cut off send again with the same id, as the answer tells
/// them. A paste the kill cut (begun, never confirmed) is not lost: the restarted daemon
/// finds it missing from the echo agent's transcript and delivers it again (before, it was
/// answered `state-unknown` and never sent: 1 lost in 3 runs); one the agent took before the
/// kill is in its transcript, so its retry is answered `state-unknown` (it arrived).
#[test]
fn a_burst_across_hosts_survives_kill_9_of_the_recipient_host() {
    let mut redis = RedisServer::start(SECRET);
    burst_under(&mut redis, 100, "burst", |b, _| {
        let mut daemon = b.daemon.take().unwrap();
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        b.start_daemon();
    });
}

/// Issue 28 item 7: Redis (append-only, each write on disk before it is answered) is killed
/// and started again while a burst crosses from a to b: the streams, the consumer group and
/// its unacknowledged entries come back from the append-only file, the hosts' links
/// reconnect, the sends answered `offline` meanwhile are sent again with their ids, and
/// every message reaches bob exactly once (0 lost, 0 duplicated).
#[test]
fn a_burst_across_hosts_survives_redis_restarted_with_append_only_persistence() {
    let mut redis = RedisServer::start_append_only(SECRET);
    burst_under(&mut redis, 60, "aof", |_, redis| {
        redis.kill();
        redis.resume();
    });
}

/// Issue 28 item 7: an entry Redis handed b's consumer in a reply that never reached b
/// (cut off with the connection when Redis went down) is pending in the append-only file:
/// b reads its pending entries again after a failed read, so it is delivered once Redis is
/// back (before, only at b's next start).
#[test]
fn an_entry_handed_out_in_a_reply_lost_to_a_redis_restart_is_read_again() {
    let mut redis = RedisServer::start_append_only(SECRET);
    let (_a, b) = two_hosts(&redis, &["bob"]);
    let key = "iapeer:v1:inbox:b:from:a";
    // b's daemon has its group and blocks reading new entries; the entry is added and
    // handed to consumer b in one transaction (the blocked read is served after it, and
    // finds nothing new): what b's daemon would have had in the reply it lost.
    b.wait_until("b's group made", Duration::from_secs(30), |_| {
        ::redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(key)
            .query::<::redis::Value>(&mut redis.connection())
            .is_ok()
    });
    let mut con = redis.connection();
    ::redis::pipe()
        .atomic()
        .cmd("XADD")
        .arg(key)
        .arg("*")
        .arg("ticket")
        .arg("t-lost-1")
        .arg("id")
        .arg("m-lost-1")
        .arg("from")
        .arg("echo-alice@a")
        .arg("intelligence")
        .arg("artificial")
        .arg("to")
        .arg("bob")
        .arg("body")
        .arg("lost in transit")
        .arg("timeout_ms")
        .arg(5000)
        .ignore()
        .cmd("XREADGROUP")
        .arg("GROUP")
        .arg("iapeer")
        .arg("b")
        .arg("STREAMS")
        .arg(key)
        .arg(">")
        .ignore()
        .query::<()>(&mut con)
        .unwrap();
    redis.kill();
    redis.resume();
    b.wait_until("b delivered it", Duration::from_secs(60), |b| {
        times_in_pane(b, "echo-bob", "from alice@a: lost in transit") == 1
    });
}

/// Issue 28 item 7, the 1 000-message run: `IAPEER_FED_RUN` messages (default 1 000) from
/// a to b and as many from b to a at once, with b's daemon killed (-9) and restarted at a
/// quarter, Redis (append-only) killed and restarted at half, a's daemon killed (-9) and
/// restarted at three quarters: 0 lost, 0 duplicated in each direction. Minutes long:
/// `cargo test --test integration -- --ignored federation::a_thousand`; its figures are
/// printed (`1000-run: …`).
#[test]
#[ignore = "minutes long: the 1 000-message run, run by hand with --ignored"]
fn a_thousand_messages_cross_each_way_under_faults() {
    use std::sync::{Arc, Mutex};
    let n: usize = std::env::var("IAPEER_FED_RUN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut redis = RedisServer::start_append_only(SECRET);
    let (a, b) = two_hosts_with(&redis, &["bob"], &[("IAPEER_STORM_LIMIT", "1000000")]);
    for (env, p) in [(&a, "alice"), (&b, "bob")] {
        let wake = format!(r#"{{"op":"wake","personality":"{p}"}}"#);
        assert_eq!(env.control(&wake)["ok"], true);
    }
    let started = std::time::Instant::now();
    let to_b: Vec<String> = (0..n).map(|i| format!("echo: a2b {i:04}")).collect();
    let to_a: Vec<String> = (0..n).map(|i| format!("echo: b2a {i:04}")).collect();
    let (a, b) = (Arc::new(Mutex::new(a)), Arc::new(Mutex::new(b)));
    let lock = |e: &Arc<Mutex<TestEnv>>| {
        let e = e.clone();
        move |args: &[&str]| e.lock().unwrap_or_else(|p| p.into_inner()).run(args)
    };
    let a_sender = send_all(lock(&a), "echo-alice", "bob@b", to_b.clone(), "a2b");
    let b_sender = send_all(lock(&b), "echo-bob", "alice@a", to_a.clone(), "b2a");
    // (Each look takes b's lock only for itself: b's sender goes on between them.)
    let in_b = |k: usize| {
        let every = Duration::from_millis(500);
        let there = common::poll_every(every, Duration::from_secs(900), || {
            received(&b.lock().unwrap_or_else(|p| p.into_inner()), "bob").len() >= k
        });
        assert!(there, "{k} of a2b in b");
    };
    let restart = |env: &Arc<Mutex<TestEnv>>| {
        let mut env = env.lock().unwrap_or_else(|p| p.into_inner());
        let mut daemon = env.daemon.take().unwrap();
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        env.start_daemon();
    };
    in_b(n / 4);
    restart(&b);
    in_b(n / 2);
    redis.kill();
    redis.resume();
    in_b(3 * n / 4);
    restart(&a);
    let (a_retried, a_unknown) = a_sender.join().unwrap();
    let (b_retried, b_unknown) = b_sender.join().unwrap();
    let (a, b) = (a.lock().unwrap(), b.lock().unwrap());
    b.wait_until("all of a2b", Duration::from_secs(300), |b| {
        received(b, "bob").len() >= n
    });
    a.wait_until("all of b2a", Duration::from_secs(300), |a| {
        received(a, "alice").len() >= n
    });
    let took = started.elapsed();
    let (got_b, got_a) = (received(&b, "bob"), received(&a, "alice"));
    let (lost_b, twice_b) = tally(&to_b, &got_b);
    let (lost_a, twice_a) = tally(&to_a, &got_a);
    for (dir, got, lost, twice, retried, unknown) in [
        ("a->b", &got_b, &lost_b, &twice_b, a_retried, &a_unknown),
        ("b->a", &got_a, &lost_a, &twice_a, b_retried, &b_unknown),
    ] {
        eprintln!(
            "1000-run {dir}: {n} sent, {} delivered, {} lost, {} duplicated, {retried} sends \
             again, {} state unknown; {:.1} s for both directions",
            got.len(),
            lost.len(),
            twice.len(),
            unknown.len(),
            took.as_secs_f64()
        );
    }
    assert!(
        lost_b.is_empty() && lost_a.is_empty(),
        "lost: {lost_b:?} {lost_a:?}"
    );
    assert!(
        twice_b.is_empty() && twice_a.is_empty(),
        "duplicated: {twice_b:?} {twice_a:?}"
    );
}

/// Issue 28 item 3: with Redis unreachable, sends between a's own peers go on and a send to
/// another host is answered at once, saying why; once Redis is back, it crosses again.
#[test]
fn redis_unreachable_leaves_local_sends_alone_and_answers_remote_ones_clearly() {
    let mut redis = RedisServer::start(SECRET);
    let (a, b) = two_hosts(&redis, &["bob"]);
    a.create_echo("ann");
    redis.stop();
    wait_link(&a, "a's link away", |d| d["link"]["state"] == "away");
    let out = send_ok(&a, "echo-alice", "ann", "local", &[]);
    assert!(out.starts_with("delivered to ann"), "{out}");
    let started = std::time::Instant::now();
    let doc = send_json(&a, "bob@b", "remote", &[]);
    assert_eq!(doc["code"], "offline", "{doc}");
    assert!(
        doc["error"].as_str().unwrap().starts_with(
            "host b cannot be reached: this host's link to the federation's Redis is away"
        ),
        "{doc}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at once"
    );

    redis.resume();
    wait_link(&a, "a sees b again", |d| {
        d["link"]["state"] == "connected" && seen(d, "b").is_some_and(|h| h["online"] == true)
    });
    wait_link(&b, "b connected again", |d| {
        d["link"]["state"] == "connected"
    });
    let out = send_ok(&a, "echo-alice", "bob@b", "remote again", &[]);
    assert!(out.starts_with("delivered to bob (echo)"), "{out}");
    assert_eq!(
        times_in_pane(&b, "echo-bob", "from alice@a: remote again"),
        1
    );
}

/// The ACL line of docs/FEDERATION.md ("Who may send") for `host` with password `pw`, as
/// the arguments of the `ACL` command.
fn acl_line(host: &str, pw: &str) -> Vec<String> {
    let doc =
        common::read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/FEDERATION.md"));
    let after = doc
        .split_once("<!-- acl-layout")
        .expect("docs/FEDERATION.md has the ACL layout")
        .1;
    let line = after
        .lines()
        .find(|l| l.starts_with("ACL SETUSER "))
        .expect("an ACL SETUSER line after the marker");
    line.replace("<host>", host)
        .replace("<password>", pw)
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect()
}

/// Host `host`'s password in the ACL tests.
fn acl_password(host: &str) -> String {
    format!("pw-of-{host}-{SECRET}")
}

/// The URL host `host` joins with: its own ACL user.
fn acl_url(redis: &RedisServer, host: &str) -> String {
    format!(
        "redis://iapeer-{host}:{}@127.0.0.1:{}",
        acl_password(host),
        redis.port
    )
}

/// A connection as host `host`'s ACL user.
fn acl_connection(redis: &RedisServer, host: &str) -> ::redis::Connection {
    ::redis::Client::open(acl_url(redis, host))
        .and_then(|c| c.get_connection())
        .expect("a connection as the host's ACL user")
}

/// Issue 28 item 5: with one ACL user per host, made by the lines docs/FEDERATION.md gives,
/// a message crosses from a to b and the answer comes back, `doctor` works, and Redis
/// refused nothing either host's daemon or CLI asked (its ACL LOG stays empty); host c's
/// user cannot write where a writes (`inbox:b:from:a`, `reply:a:from:b`), nor a's presence,
/// nor read b's messages: Redis itself says NOPERM.
#[test]
fn with_an_acl_user_per_host_messages_cross_and_no_host_can_write_as_another() {
    let redis = RedisServer::start(SECRET);
    let mut admin = redis.connection();
    for host in ["a", "b", "c"] {
        let line = acl_line(host, &acl_password(host));
        ::redis::cmd("ACL")
            .arg(&line)
            .query::<()>(&mut admin)
            .unwrap_or_else(|e| panic!("ACL {line:?}: {e}"));
    }
    let (a, b) = two_hosts_at(
        (&acl_url(&redis, "a"), &acl_url(&redis, "b")),
        &["bob"],
        &[],
    );
    let out = send_ok(&a, "echo-alice", "bob@b", "hello through the acl", &[]);
    assert_eq!(
        out.trim(),
        "delivered to bob (echo), woke",
        "{}",
        b.diagnostics()
    );
    a.wait_until("bob's answer reaches a", Duration::from_secs(30), |a| {
        times_in_pane(a, "echo-alice", "from bob@b: echo: hello through the acl") == 1
    });
    let (doc, code) = doctor_json(&a);
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(
        doctor_check(&doc, "clock-skew:b").unwrap()["level"],
        "ok",
        "{doc}"
    );
    let status = a.ok(&["federation", "status"]);
    assert!(status.contains("host b online"), "{status}");
    // b's daemon stops (deleting its alive and roster keys), a leaves (its hosts field too).
    let mut b = b;
    b.stop_daemon();
    a.ok(&["federation", "leave"]);
    wait_link(&a, "a's link has nothing to report", |d| {
        d["link"].is_null()
    });
    let hosts: Vec<String> = ::redis::cmd("HKEYS")
        .arg("iapeer:v1:hosts")
        .query(&mut admin)
        .unwrap();
    assert_eq!(hosts, ["b"], "a left, b only stopped");
    let log: Vec<::redis::Value> = ::redis::cmd("ACL").arg("LOG").query(&mut admin).unwrap();
    assert!(log.is_empty(), "Redis refused a command of a host: {log:?}");

    let mut c = acl_connection(&redis, "c");
    // Each as c's user, named by what it would do: Redis refuses it.
    let refused: [(&str, &[&str]); 7] = [
        (
            "write a's messages to b",
            &[
                "XADD",
                "iapeer:v1:inbox:b:from:a",
                "*",
                "from",
                "echo-alice@a",
            ],
        ),
        (
            "write b's answers to a",
            &["XADD", "iapeer:v1:reply:a:from:b", "*", "ticket", "t"],
        ),
        (
            "write b's stream to itself",
            &["XADD", "iapeer:v1:inbox:b:from:b", "*", "from", "x@b"],
        ),
        ("set a's presence", &["SET", "iapeer:v1:alive:a", "{}"]),
        ("set a's roster", &["SET", "iapeer:v1:roster:a", "{}"]),
        (
            "read a's messages to b",
            &[
                "XREADGROUP",
                "GROUP",
                "iapeer",
                "c",
                "STREAMS",
                "iapeer:v1:inbox:b:from:a",
                ">",
            ],
        ),
        (
            "read b's answers to a",
            &["XREAD", "STREAMS", "iapeer:v1:reply:a:from:b", "0"],
        ),
    ];
    for (what, args) in refused {
        let r: ::redis::RedisResult<::redis::Value> =
            ::redis::cmd(args[0]).arg(&args[1..]).query(&mut c);
        match r {
            Err(e) => assert!(
                e.to_string().to_lowercase().contains("noperm"),
                "c's {what}: {e}"
            ),
            Ok(v) => panic!("c may {what}: {v:?}"),
        }
    }
    // What c may write: its own streams to b, its presence.
    ::redis::cmd("XADD")
        .arg("iapeer:v1:inbox:b:from:c")
        .arg("*")
        .arg("from")
        .arg("echo-carl@c")
        .query::<String>(&mut c)
        .expect("c writes its own stream to b");
    fake_heartbeat(&mut c, "c", 0, 15);
    // Nothing a wrote was lost to c's attempts: the pair's streams hold only a's and b's.
    let len: u64 = ::redis::cmd("XLEN")
        .arg("iapeer:v1:inbox:b:from:a")
        .query(&mut admin)
        .unwrap();
    assert_eq!(len, 1);
}

/// Issue 28 item 5: an entry claiming sender `alice@a` written where b reads host c's
/// messages (with the password every host shares: the default user) is never delivered as
/// from alice@a: it is refused and logged, while an honest entry of c is delivered as from
/// `carl@c` and answered on `reply:c:from:b`. (Before, b's one inbox stream took the sender
/// host from the entry's body: the forged entry reached bob as "from alice@a".)
#[test]
fn a_forged_entry_is_never_delivered_as_from_the_host_it_claims() {
    let redis = RedisServer::start(SECRET);
    let (_a, b) = two_hosts(&redis, &["bob"]);
    fake_host(&redis, "c", &["carl"]);
    wait_link(&b, "b sees c online", |d| {
        seen(d, "c").is_some_and(|h| h["online"] == true)
    });
    let mut con = redis.connection();
    let xadd = |con: &mut ::redis::Connection, key: &str, from: &str, body: &str, id: &str| {
        ::redis::cmd("XADD")
            .arg(key)
            .arg("*")
            .arg("ticket")
            .arg(format!("t-{id}"))
            .arg("id")
            .arg(id)
            .arg("from")
            .arg(from)
            .arg("intelligence")
            .arg("artificial")
            .arg("to")
            .arg("bob")
            .arg("body")
            .arg(body)
            .arg("if_busy")
            .arg("queue")
            .arg("timeout_ms")
            .arg(5000)
            .query::<String>(con)
            .unwrap()
    };
    // Where b reads host c's messages: `inbox:b:from:c` (and, in the layout before, b's one
    // inbox `inbox:b`, which nothing reads now).
    for key in ["iapeer:v1:inbox:b:from:c", "iapeer:v1:inbox:b"] {
        xadd(&mut con, key, "echo-alice@a", "forged by c", "m-forged-1");
    }
    xadd(
        &mut con,
        "iapeer:v1:inbox:b:from:c",
        "echo-carl@c",
        "honest from c",
        "m-honest-1",
    );
    let forged = |b: &TestEnv| times_in_pane(b, "echo-bob", "forged by c") > 0;
    let honest = |b: &TestEnv| times_in_pane(b, "echo-bob", "from carl@c: honest from c") == 1;
    b.wait_until("c's entries read", Duration::from_secs(30), |b| {
        forged(b) || honest(b)
    });
    assert!(
        !forged(&b),
        "the forged entry was delivered: {}",
        b.pane("echo-bob")
    );
    assert!(honest(&b), "{}", b.diagnostics());
    b.wait_until("the refusal logged", Duration::from_secs(10), |b| {
        b.log("daemon").contains(
            "iapeer:v1:inbox:b:from:c entry",
        ) && b.log("daemon").contains(
            "refused: its sender \"echo-alice@a\" is not of host c, the host whose stream it is in",
        )
    });
    // The pane shows the message before the delivery is confirmed and logged.
    b.wait_until("the honest delivery logged", Duration::from_secs(10), |b| {
        b.has_event(
            "delivery",
            "delivery",
            &[
                ("path", "federation"),
                ("caller", "echo-carl@c"),
                ("ok", "true"),
            ],
        )
    });
    assert!(
        !b.log("delivery").contains("echo-alice@a"),
        "{}",
        b.log("delivery")
    );
    // The honest entry's outcome went to c's reply stream from b; both entries are acknowledged.
    let mut outcome = String::new();
    assert!(common::poll(Duration::from_secs(10), || {
        let read: ::redis::Value = ::redis::cmd("XREAD")
            .arg("STREAMS")
            .arg("iapeer:v1:reply:c:from:b")
            .arg("0")
            .query(&mut con)
            .unwrap();
        outcome = format!("{read:?}");
        outcome.contains("t-m-honest-1")
    }));
    assert!(!outcome.contains("t-m-forged-1"), "{outcome}");
    let pending = |con: &mut ::redis::Connection| -> u64 {
        let (n, ..): (u64, ::redis::Value, ::redis::Value, ::redis::Value) =
            ::redis::cmd("XPENDING")
                .arg("iapeer:v1:inbox:b:from:c")
                .arg("iapeer")
                .query(con)
                .unwrap();
        n
    };
    assert!(common::poll(Duration::from_secs(10), || pending(&mut con) == 0));

    // c's roster (a key only c writes under the ACL layout) claiming to be host a's, with a
    // peer zed: counted for no host, so a plain "zed" on b goes nowhere near host a.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let roster = serde_json::json!({"host": "a", "time_ms": now_ms, "peers": [{"name": "zed",
        "runtimes": ["echo"], "state": "available", "description": "",
        "intelligence": "artificial"}]});
    ::redis::cmd("SET")
        .arg("iapeer:v1:roster:c")
        .arg(roster.to_string())
        .arg("EX")
        .arg(60)
        .query::<()>(&mut con)
        .unwrap();
    wait_link(&b, "b's heartbeat after c's roster", |d| {
        d["link"]["last_heartbeat_ms"]
            .as_u64()
            .is_some_and(|t| t > now_ms)
    });
    let out = b.run(&["send", "zed", "--from", "echo-bob", "--message", "to zed"]);
    assert!(!out.status.success(), "{}", common::describe(&out));
    assert!(
        !b.has_event("delivery", "delivery", &[("to", "zed@a")]),
        "a roster in c's key made zed a peer of a: {}",
        b.log("delivery")
    );
}

/// Issue 28 item 5: an answer to a's send to b, written by another host (c, with the
/// password every host shares) under the send's ticket, is not taken: the send waits for b's
/// and ends in its own timeout. (Before, a's one reply stream took any host's answer: the
/// send was answered "forged by c".)
#[test]
fn an_answer_from_another_host_than_the_send_went_to_is_not_taken() {
    let redis = RedisServer::start(SECRET);
    let (a, mut b) = two_hosts(&redis, &["bob"]);
    fake_host(&redis, "c", &["carl"]);
    wait_link(&a, "a sees c online", |d| {
        seen(d, "c").is_some_and(|h| h["online"] == true)
    });
    b.stop_daemon();
    let a = std::sync::Arc::new(a);
    let sender = {
        let a = a.clone();
        std::thread::spawn(move || {
            send_json(
                &a,
                "bob@b",
                "who answers?",
                &["--id", "m-who-1", "--timeout", "6"],
            )
        })
    };
    // The send's ticket, as b would read it from its stream.
    let mut con = redis.connection();
    let mut ticket = None;
    assert!(common::poll(Duration::from_secs(10), || {
        let r: ::redis::streams::StreamRangeReply = ::redis::cmd("XRANGE")
            .arg("iapeer:v1:inbox:b:from:a")
            .arg("-")
            .arg("+")
            .query(&mut con)
            .unwrap();
        ticket = r.ids.iter().find_map(|e| e.get::<String>("ticket"));
        ticket.is_some()
    }));
    let forged = serde_json::json!({"code": "stopped", "error": "forged by c"}).to_string();
    // Where a reads c's answers (and, in the layout before, a's one reply stream).
    for key in ["iapeer:v1:reply:a:from:c", "iapeer:v1:reply:a"] {
        ::redis::cmd("XADD")
            .arg(key)
            .arg("*")
            .arg("ticket")
            .arg(ticket.as_deref().unwrap())
            .arg("id")
            .arg("m-who-1")
            .arg("outcome")
            .arg(&forged)
            .query::<String>(&mut con)
            .unwrap();
    }
    let doc = sender.join().unwrap();
    assert_eq!(doc["code"], "timeout", "{doc}");
    assert!(
        a.log("daemon")
            .contains("came from host c, not from the host it went to: dropped"),
        "{}",
        a.log("daemon")
    );
}

/// `iapeer list --json` on `env`: its rows.
fn list_json(env: &TestEnv) -> Value {
    serde_json::from_str(&env.ok(&["list", "--json"])).unwrap()
}

/// The row of `list --json` whose `address` is `address` (a peer of another host).
fn remote_row(rows: &Value, address: &str) -> Option<Value> {
    rows.as_array()?
        .iter()
        .find(|r| r["address"] == address)
        .cloned()
}

/// Issue 28 items 2 and 6: host a's `list` (text and `--json`), its fleet snapshot (the page's
/// source) and its agents' system prompt (`iapeer prompt` and the file a wake writes) show
/// host b's peers as `name@host` with b's state; when b's daemon stops they stay, shown
/// offline; with a's daemon down `list` says they are not known.
#[test]
fn other_hosts_peers_are_listed_prompted_and_in_the_snapshot() {
    let redis = RedisServer::start(SECRET);
    let (mut a, mut b) = two_hosts(&redis, &["bob", "carol"]);
    b.ok(&["stop", "carol"]);
    let rows = a.wait_seen(
        "a lists b's peers, carol stopped",
        Duration::from_secs(30),
        list_json,
        |rows| {
            remote_row(rows, "bob@b").is_some_and(|r| r["host_online"] == true)
                && remote_row(rows, "carol@b").is_some_and(|r| r["state"] == "stopped")
        },
    );
    let bob = remote_row(&rows, "bob@b").unwrap();
    assert_eq!(bob["personality"], "bob");
    assert_eq!(bob["host"], "b");
    assert_eq!(bob["state"], "available");
    assert_eq!(bob["default_runtime"], "echo");
    assert_eq!(bob["intelligence"], "artificial");
    // The local row is as before (no host field), and first.
    assert_eq!(rows[0]["personality"], "alice");
    assert!(rows[0].get("host").is_none(), "{rows}");

    let text = a.ok(&["list"]);
    assert!(text.contains("PEERS OF OTHER HOSTS"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("bob@b "))
        .unwrap_or_default();
    assert!(
        line.contains("b (online)") && line.contains("available"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("carol@b "))
        .unwrap_or_default();
    assert!(line.contains("stopped"), "{text}");

    // The system prompt's team list: as `iapeer prompt` shows it, and as a wake writes it.
    let prompt = a.ok(&["prompt", "alice", "--raw"]);
    assert!(prompt.contains("\n- bob@b\n  runtime: echo"), "{prompt}");
    assert!(prompt.contains("\n- carol@b\n"), "{prompt}");
    a.ok(&["wake", "alice"]);
    let written = a.paths().marker("echo-alice", ".system-prompt.md");
    a.wait_until(
        "alice's wake wrote her prompt",
        Duration::from_secs(30),
        |_| std::fs::read_to_string(&written).is_ok_and(|t| t.contains("\n- bob@b\n")),
    );

    // The fleet snapshot (what the page draws) carries them as `remote`.
    let snap = crate::fleet::get(&a, "/fleet/v1/snapshot").json();
    let remote = &snap["remote"];
    assert!(remote_row(remote, "bob@b").is_some(), "{snap}");
    assert!(remote_row(&snap["peers"], "bob@b").is_none(), "{snap}");

    // b's daemon stops: its peers stay listed, offline.
    b.stop_daemon();
    let rows = a.wait_seen(
        "a shows b offline",
        Duration::from_secs(30),
        list_json,
        |rows| remote_row(rows, "bob@b").is_some_and(|r| r["host_online"] == false),
    );
    assert_eq!(remote_row(&rows, "bob@b").unwrap()["state"], "offline");
    let text = a.ok(&["list"]);
    assert!(text.contains("b (offline)"), "{text}");

    // a's daemon stops: nothing is known of the other hosts.
    a.stop_daemon();
    let text = a.ok(&["list"]);
    assert!(
        text.contains("peers of other hosts: not known while the daemon is down"),
        "{text}"
    );
    assert!(!text.contains("bob@b"), "{text}");
    assert!(remote_row(&list_json(&a), "bob@b").is_none());
}

/// Issue 28 items 2 and 6, in a real browser (`tests/ui/remote.py`, headless Chromium): host
/// a's page shows host b's peers grouped under b, online, with their states; its "write"
/// button and the compose box send to `bob@b`, which b's bob gets once; with b's daemon
/// stopped the page shows b offline.
#[test]
fn the_page_shows_other_hosts_peers_and_sends_to_name_at_host() {
    let redis = RedisServer::start(SECRET);
    let (a, mut b) = two_hosts(&redis, &["bob", "carol"]);
    a.ok(&["create", "you", "--runtime", "human"]);
    a.wait_until("you are up", Duration::from_secs(30), |e| {
        e.status_of("you", "human") == "live"
    });
    b.ok(&["stop", "carol"]);
    let marker = format!("page-to-bob-at-b-{}", std::process::id());
    let out =
        crate::ui::page_script_in(&a, "remote.py", &["--phase", "online", "--marker", &marker]);
    let said = common::describe(&out);
    assert!(
        out.status.success(),
        "the browser check failed:\n{said}\n{}",
        a.diagnostics()
    );
    b.wait_until("bob got the page's message", Duration::from_secs(30), |e| {
        times_in_pane(e, "echo-bob", &marker) >= 1
    });
    assert!(
        a.has_event(
            "delivery",
            "delivery",
            &[("path", "federation"), ("entry", "ui"), ("to", "bob@b")]
        ),
        "{}",
        a.log("delivery")
    );
    b.stop_daemon();
    let out = crate::ui::page_script_in(&a, "remote.py", &["--phase", "offline"]);
    let said = common::describe(&out);
    assert!(
        out.status.success(),
        "the browser check failed:\n{said}\n{}",
        a.diagnostics()
    );
}

/// README's ACL line (its federation section, as `redis-cli` takes it in a shell) is the
/// layout of docs/FEDERATION.md (which the ACL test applies) for host `laptop`: they cannot
/// drift apart.
#[test]
fn the_readmes_acl_line_is_the_documented_layout() {
    let readme = common::read(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    let line = readme
        .lines()
        .find_map(|l| l.strip_prefix("redis-cli ACL SETUSER "))
        .expect("README has a redis-cli ACL SETUSER line");
    // The shell's quoting taken off: each word is quoted whole or not at all.
    let words: Vec<String> = line
        .split_whitespace()
        .map(|w| w.trim_matches('\'').to_string())
        .collect();
    let mut doc = acl_line("laptop", "laptop-password");
    assert_eq!(doc.remove(0), "SETUSER");
    assert_eq!(doc.remove(0), "iapeer-laptop");
    assert_eq!(words[0], "iapeer-laptop");
    assert_eq!(words[1..], doc[..], "README: {line}");
}

/// Issue 28 item 3: attachments cross hosts inline, up to 256 KiB in all: b's bob gets a's
/// files as files of b (in his attachment inbox, the same bytes, his agent shown their paths)
/// and the staging folder is gone after; more than the cap is refused on a at once, saying
/// the cap and what to do, and nothing reaches b.
#[test]
fn attachments_cross_hosts_inline_up_to_the_cap() {
    let redis = RedisServer::start(SECRET);
    let (a, b) = two_hosts(&redis, &["bob"]);
    let notes = a.dir.path().join("notes.txt");
    std::fs::write(&notes, "the plan, in a file\n").unwrap();
    let blob = a.dir.path().join("data.bin");
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&blob, &bytes).unwrap();
    let out = send_ok(
        &a,
        "echo-alice",
        "bob@b",
        "echo: two files for you",
        &[
            "--attachment",
            notes.to_str().unwrap(),
            "--attachment",
            blob.to_str().unwrap(),
        ],
    );
    assert!(out.starts_with("delivered to bob (echo)"), "{out}");
    // In bob's attachment inbox on b, byte for byte; his agent was shown their paths there.
    let inbox = b.paths().attachments_dir("bob");
    let copies: Vec<std::path::PathBuf> = std::fs::read_dir(&inbox)
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| f.path())
        .collect();
    let find = |name: &str| {
        copies
            .iter()
            .find(|p| p.file_name().unwrap() == name)
            .unwrap_or_else(|| panic!("no {name} in {copies:?}"))
            .clone()
    };
    assert_eq!(std::fs::read(find("data.bin")).unwrap(), bytes);
    assert_eq!(
        std::fs::read_to_string(find("notes.txt")).unwrap(),
        "the plan, in a file\n"
    );
    let pane = b.pane("echo-bob");
    assert!(
        pane.contains(&format!("attachment: {}", find("notes.txt").display())),
        "{pane}"
    );
    // The staging folder of the entry is removed once the outcome is written.
    let staging = b.paths().federation_attachments();
    b.wait_until(
        "the staging folder emptied",
        Duration::from_secs(10),
        |_| std::fs::read_dir(&staging).map_or(true, |mut d| d.next().is_none()),
    );

    // Over the cap (256 KiB in all): refused at once on a, nothing sent.
    let big = a.dir.path().join("big.bin");
    std::fs::write(&big, vec![1u8; 200_000]).unwrap();
    let doc = send_json(
        &a,
        "bob@b",
        "echo: too much",
        &[
            "--attachment",
            blob.to_str().unwrap(),
            "--attachment",
            big.to_str().unwrap(),
        ],
    );
    assert_eq!(doc["code"], "invalid-argument", "{doc}");
    let error = doc["error"].as_str().unwrap();
    assert!(
        error.contains("attachments cross hosts inline, at most 256 KiB in all per message")
            && error.contains(&format!("attachment 2 \"{}\"", big.display()))
            && error.contains("share a larger file another way"),
        "{error}"
    );
    assert_eq!(times_in_pane(&b, "echo-bob", "too much"), 0);
}

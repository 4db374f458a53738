//! Control-socket fairness (issue 12 item 3): one client pipelining requests as fast as it can
//! must not delay another client's request behind its whole backlog.

use crate::common;

use common::TestEnv;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Most pings the flooding client pipelines (the issue measured 200 000).
const PINGS: usize = 200_000;

/// One `ping` on a fresh connection; how long the answer took (30 s: none by then).
fn ping(env: &TestEnv) -> Duration {
    let started = Instant::now();
    let mut s = UnixStream::connect(env.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"{\"op\":\"ping\"}\n").unwrap();
    let mut line = String::new();
    if BufReader::new(s).read_line(&mut line).is_err() {
        return Duration::from_secs(30);
    }
    assert!(line.contains("\"ok\":true"), "{line}");
    started.elapsed()
}

/// While one connection pipelines pings as fast as it can write (up to 200 000), pings on
/// other connections are answered promptly, and the pipeline gets every answer.
#[test]
fn a_pipelining_client_does_not_delay_another_clients_ping() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let mut env = TestEnv::new();
    env.start_daemon();
    let flood = UnixStream::connect(env.socket()).unwrap();
    let mut writer = flood.try_clone().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicUsize::new(0));
    let feeder = {
        let (stop, written) = (Arc::clone(&stop), Arc::clone(&written));
        std::thread::spawn(move || {
            let batch = "{\"op\":\"ping\"}\n".repeat(1000);
            let mut sent = 0;
            while sent < PINGS && !stop.load(Ordering::SeqCst) {
                if writer.write_all(batch.as_bytes()).is_err() {
                    break;
                }
                sent += 1000;
                written.store(sent, Ordering::SeqCst);
            }
            sent
        })
    };
    // A backlog is there (a tenth of the flood written), then ask from other connections
    // while it is served.
    assert!(
        common::poll(Duration::from_secs(30), || written.load(Ordering::SeqCst)
            >= PINGS / 10),
        "the flood did not start"
    );
    let mut times: Vec<Duration> = (0..50).map(|_| ping(&env)).collect();
    stop.store(true, Ordering::SeqCst);
    let sent = feeder.join().unwrap();
    let mut answered = 0;
    let mut lines = BufReader::new(flood).lines();
    while answered < sent && lines.next().is_some_and(|l| l.is_ok()) {
        answered += 1;
    }
    times.sort();
    let p99 = times[48];
    eprintln!(
        "ping beside a pipeline of {sent} pings: p50 {:?} p99 {p99:?} max {:?}",
        times[25], times[49]
    );
    assert_eq!(answered, sent, "every pipelined ping is answered");
    assert!(p99 < Duration::from_secs(1), "p99 {p99:?}");
}

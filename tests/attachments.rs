//! What a sender's attachment may cost the host (issue 26 item 2), against the real daemon:
//! every kind of source it refuses (a FIFO, a link flipped between a file and a FIFO, a
//! device, a folder, a `/proc` file, a file over the cap), each refusal naming the
//! attachment, what was wrong and what to do; a sender flipping its attachment between a
//! file and a FIFO in a tight loop while it sends through MCP, and an unrelated send beside
//! it; and reads that never return (a real FUSE mount whose server stops answering), which
//! hold only their sender's share of the preparation pool and show in `status`/`doctor`.

use crate::common;
use crate::mcp::{post, wake_and_token};

use std::collections::HashMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fuse::StalledMount;
use common::TestEnv;
use serde_json::{json, Value};

/// Echo peers `names`, and a daemon started with `vars`.
fn world(names: &[&str], vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    for n in names {
        env.create_echo(n);
    }
    env.start_daemon();
    env
}

/// `iapeer send bob --from echo-alice` with a good attachment, then `bad`: the refusal's
/// text after `iapeer send: ` (exit 1, nothing printed on stdout).
pub(crate) fn refused_second_attachment(env: &TestEnv, bad: &Path) -> String {
    let good = env.dir.path().join("good.txt");
    std::fs::write(&good, "fine").unwrap();
    let (out, err) = env.fails(
        &[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            "two files",
            "--attachment",
            good.to_str().unwrap(),
            "--attachment",
            bad.to_str().unwrap(),
        ],
        1,
    );
    assert!(out.is_empty(), "{out}");
    err.trim_end()
        .strip_prefix("iapeer send: ")
        .unwrap_or_else(|| panic!("{err}"))
        .to_string()
}

/// The start of a refusal of attachment 2 at `path`.
pub(crate) fn second(path: &Path) -> String {
    format!("attachment 2 \"{}\" could not be copied: ", path.display())
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

const FIFO_REFUSAL: &str = "it is a named pipe (FIFO), not a regular file — write what it carries \
                            to a regular file and attach that";

#[test]
fn a_fifo_is_refused_with_what_to_do_by_the_daemon_and_without_it() {
    let mut env = world(&["alice", "bob"], &[]);
    let fifo = env.dir.path().join("pipe");
    mkfifo(&fifo);
    let want = format!("{}{FIFO_REFUSAL}", second(&fifo));
    assert_eq!(refused_second_attachment(&env, &fifo), want);
    // A link to it reads the same (the link is resolved, its target is never opened).
    let link = env.dir.path().join("report.txt");
    symlink(&fifo, &link).unwrap();
    assert_eq!(
        refused_second_attachment(&env, &link),
        format!("{}{FIFO_REFUSAL}", second(&link))
    );
    // With the daemon down the send would be kept in the outbox: refused the same way, and
    // nothing is kept.
    env.stop_daemon();
    assert_eq!(refused_second_attachment(&env, &fifo), want);
    assert!(
        iapeer_outbox(&env).is_empty(),
        "nothing kept: {:?}",
        iapeer_outbox(&env)
    );
}

fn iapeer_outbox(env: &TestEnv) -> Vec<PathBuf> {
    std::fs::read_dir(env.paths().state_dir().join("outbox"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn a_device_is_refused_without_being_opened() {
    let env = world(&["alice", "bob"], &[]);
    let dev = Path::new("/dev/null");
    assert_eq!(
        refused_second_attachment(&env, dev),
        format!(
            "{}it is a character device, not a regular file — copy what you need from it into a \
             regular file and attach that",
            second(dev)
        )
    );
}

#[test]
fn a_folder_is_refused_with_what_to_attach_instead() {
    let env = world(&["alice", "bob"], &[]);
    let folder = env.dir.path().join("results");
    std::fs::create_dir(&folder).unwrap();
    assert_eq!(
        refused_second_attachment(&env, &folder),
        format!(
            "{}it is a folder, not a regular file — attach the files in it, or an archive of it \
             (tar, zip)",
            second(&folder)
        )
    );
}

#[test]
fn a_proc_or_sys_file_is_refused() {
    let env = world(&["alice", "bob"], &[]);
    // Before issue 26 the daemon copied these (its own status and environment included).
    for (path, fs) in [
        ("/proc/self/status", "/proc (procfs)"),
        ("/proc/self/environ", "/proc (procfs)"),
        ("/sys/kernel/uevent_seqnum", "/sys (sysfs)"),
    ] {
        let path = Path::new(path);
        assert_eq!(
            refused_second_attachment(&env, path),
            format!(
                "{}it is on {fs}, a kernel file system whose files are made up as they are read \
                 (their size is not what a read gives) — copy what you need into a regular file \
                 and attach that",
                second(path)
            )
        );
    }
    // Only the good attachment was ever copied.
    let copies: Vec<String> = std::fs::read_dir(env.paths().attachments_dir("bob"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(copies, ["good.txt"]);
}

#[test]
fn a_file_over_the_cap_is_refused_naming_the_variable_that_raises_it() {
    let env = world(
        &["alice", "bob"],
        &[("IAPEER_ATTACHMENT_MAX_BYTES", "1000")],
    );
    let big = env.dir.path().join("big.log");
    std::fs::write(&big, vec![b'x'; 1001]).unwrap();
    assert_eq!(
        refused_second_attachment(&env, &big),
        format!(
            "{}it is 1001 bytes, over the 1000-byte limit for an attachment — attach a smaller \
             file, or raise IAPEER_ATTACHMENT_MAX_BYTES (for the daemon and iapeer send)",
            second(&big)
        )
    );
    // At the cap it goes.
    std::fs::write(&big, vec![b'x'; 1000]).unwrap();
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "at the cap",
        "--attachment",
        big.to_str().unwrap(),
    ]);
    assert!(out.starts_with("delivered to bob"), "{out}");
}

/// `tools/call send_to_peer` as `identity` with its session `token`; the JSON-RPC result.
fn mcp_send(
    port: u16,
    (identity, token): (&str, &str),
    to: &str,
    message: &str,
    attachments: &[&Path],
) -> Value {
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_to_peer","arguments":{"personality":to,"message":message,"attachments":attachments}}});
    let auth = format!("Bearer {token}");
    let r = post(
        port,
        &[("X-IAPeer-Identity", identity), ("Authorization", &auth)],
        &body.to_string(),
    );
    assert_eq!(r.status, 200);
    r.json()["result"].clone()
}

/// Run `iapeer args` and wait at most 20 s: how long it took and its output, or `None` when
/// it had not finished (it is killed).
fn timed(env: &TestEnv, args: &[&str]) -> (Duration, Option<Output>) {
    let started = Instant::now();
    let mut child = env.spawn(args);
    if common::exit_within(&mut child, Duration::from_secs(20)).is_some() {
        return (started.elapsed(), Some(child.wait_with_output().unwrap()));
    }
    let _ = child.kill();
    let _ = child.wait();
    (started.elapsed(), None)
}

/// `iapeer send <to> --from <from> --timeout 5`, as the issue measured it: (how long, the
/// first line it printed or why there is none).
fn unrelated_send(env: &TestEnv, from: &str, to: &str, message: &str) -> (Duration, String) {
    let (took, out) = timed(
        env,
        &[
            "send",
            to,
            "--from",
            from,
            "--timeout",
            "5",
            "--message",
            message,
        ],
    );
    let said = match out {
        Some(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Some(o) => format!("refused: {}", common::describe(&o)),
        None => "no answer within 20 s".to_string(),
    };
    (took, said)
}

/// `status --json`'s `daemon.prep`.
fn prep(env: &TestEnv) -> Value {
    let out = env.run(&["status", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("status --json ({e}): {}", common::describe(&out)));
    v["daemon"]["prep"].clone()
}

/// Issue 26 item 2's must-show: a sender whose attachment is a symbolic link flipped between
/// a regular file and a FIFO in a tight loop by a real thread, sending many MCP sends with
/// it (before the fix, 40–90 of them left all four preparation workers blocked in `open` for
/// ever), does not stall the host: an unrelated sender's `iapeer send --timeout 5` is
/// answered within 6 s, every flipped send is answered (delivered with the file's content,
/// or refused naming the FIFO or the swap), and nothing stalls in the pool.
#[test]
fn a_sender_flipping_its_attachment_between_a_file_and_a_fifo_stalls_no_one() {
    const CLIENTS: usize = 16;
    const EACH: usize = 25;
    let env = world(&["alice", "bob", "carol", "dan"], &[]);
    let port = env.port();
    let token = wake_and_token(&env, "alice");
    wake_and_token(&env, "bob");
    wake_and_token(&env, "dan");

    let dir = env.dir.path().join("flip");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("notes.txt");
    std::fs::write(&file, "the real notes").unwrap();
    let fifo = dir.join("pipe");
    mkfifo(&fifo);
    let link = dir.join("attachment.txt");
    symlink(&file, &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, dir, link) = (stop.clone(), dir.clone(), link.clone());
        std::thread::spawn(move || {
            let next = dir.join(".next");
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for target in [&fifo, &file] {
                    let _ = std::fs::remove_file(&next);
                    symlink(target, &next).unwrap();
                    std::fs::rename(&next, &link).unwrap();
                    flips += 1;
                }
            }
            flips
        })
    };

    let flood: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (token, link) = (token.clone(), link.clone());
            std::thread::spawn(move || {
                (0..EACH)
                    .map(|i| {
                        let started = Instant::now();
                        let r = mcp_send(
                            port,
                            ("echo-alice", &token),
                            "bob",
                            &format!("echo: flipped {c}-{i}"),
                            &[&link],
                        );
                        (started.elapsed(), r)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    // Beside the flood, as long as it lasts (at least three times, at most 60 s): carol's
    // unrelated send.
    let until = Instant::now() + Duration::from_secs(60);
    let mut beside = Vec::new();
    while beside.len() < 3 || (!flood.iter().all(|t| t.is_finished()) && Instant::now() < until) {
        let n = beside.len();
        beside.push(unrelated_send(
            &env,
            "echo-carol",
            "dan",
            &format!("echo: beside {n}"),
        ));
        // Time is the thing tested: a paced probe, not a flood of its own.
        std::thread::sleep(Duration::from_millis(100));
    }
    let during = prep(&env);
    let slowest_beside = beside.iter().map(|(t, _)| *t).max().unwrap();
    eprintln!(
        "{} unrelated `iapeer send --timeout 5` beside the flood, the slowest answered in \
         {slowest_beside:?}",
        beside.len()
    );
    for (took, said) in &beside {
        assert!(
            *took < Duration::from_secs(6) && said.starts_with("delivered to dan"),
            "the unrelated send: {said} after {took:?}\n{}",
            env.diagnostics()
        );
    }
    let answers: Vec<(Duration, Value)> = flood
        .into_iter()
        .flat_map(|t| t.join().expect("a flooding client got no answer"))
        .collect();
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();

    let (mut delivered, mut fifo_refused, mut swapped) = (0, 0, 0);
    let link_refusal = format!("attachment 1 \"{}\" could not be copied: ", link.display());
    for (took, r) in &answers {
        if r["isError"] == true {
            let text = r["content"][0]["text"].as_str().unwrap_or_default();
            let rest = text
                .strip_prefix(&link_refusal)
                .unwrap_or_else(|| panic!("unexpected refusal: {text}"));
            if rest == FIFO_REFUSAL {
                fifo_refused += 1;
            } else if rest.starts_with("it was replaced while it was being opened") {
                swapped += 1;
            } else {
                panic!("unexpected refusal: {text}");
            }
        } else {
            assert_eq!(r["structuredContent"]["ok"], true, "{r}");
            delivered += 1;
        }
        assert!(
            *took < Duration::from_secs(30),
            "a flipped send took {took:?}"
        );
    }
    let slowest = answers.iter().map(|(t, _)| *t).max().unwrap();
    eprintln!(
        "{} MCP sends with a link flipped {flips} times between a file and a FIFO: {delivered} \
         delivered, {fifo_refused} refused (FIFO), {swapped} refused (swapped while opened), the \
         slowest answered in {slowest:?}; prep during the flood: {during}",
        answers.len(),
    );
    assert_eq!(answers.len(), CLIENTS * EACH);
    assert!(
        delivered > 0 && fifo_refused > 0,
        "both sides of the flip were met"
    );
    // What was delivered is the file's content, never anything else.
    let inbox = env.paths().attachments_dir("bob");
    for d in std::fs::read_dir(&inbox).unwrap().flatten() {
        assert_eq!(
            common::read(&d.path().join("attachment.txt")),
            "the real notes"
        );
    }
    assert_eq!(during["stalled"], json!([]), "nothing stalls: {during}");
    assert!(during["threads"].as_u64().unwrap() <= 16, "{during}");
}

/// Reads that never return (a real FUSE mount whose server stops answering): two senders
/// each hold only their share (2) of the preparation pool, their other sends wait in their
/// own lines, a third sender's send is answered within 6 s although all four workers are
/// stuck, `status` and `doctor` name the stalled senders, how long and what they read, with
/// what to do; at their deadline the stalled senders are answered `timeout` with the reason;
/// once the file system is gone the threads come back and `status` is clear.
#[test]
fn reads_that_never_return_hold_only_their_senders_share_and_status_names_them() {
    let env = world(
        &["alice", "carol", "bob", "dan", "erin"],
        &[("IAPEER_SEND_TIMEOUT_MS", "20000")],
    );
    let port = env.port();
    let alice = wake_and_token(&env, "alice");
    let carol = wake_and_token(&env, "carol");
    wake_and_token(&env, "erin");
    let mount = StalledMount::mount(&env.dir.path().join("mnt"));
    let stalled = mount.file();

    let started = Instant::now();
    let stallers: Vec<_> = [("echo-alice", alice), ("echo-carol", carol)]
        .into_iter()
        .flat_map(|(who, token)| (0..3).map(move |i| (who, token.clone(), i)))
        .map(|(who, token, i)| {
            let stalled = stalled.clone();
            std::thread::spawn(move || {
                let r = mcp_send(
                    port,
                    (who, &token),
                    "bob",
                    &format!("echo: {i}"),
                    &[&stalled],
                );
                (who, started.elapsed(), r)
            })
        })
        .collect();
    env.wait_until(
        "each sender's share (2) of the workers to be stuck in a read",
        Duration::from_secs(15),
        |_| mount.reads() >= 4,
    );
    // All four workers are stuck: an unrelated send is still answered within 6 s.
    let (took, said) = unrelated_send(&env, "echo-dan", "erin", "echo: unrelated");
    eprintln!("unrelated send beside 4 stuck workers: {said} after {took:?}");
    assert!(
        took < Duration::from_secs(6) && said.starts_with("delivered to erin"),
        "the unrelated send: {said} after {took:?}\n{}",
        env.diagnostics()
    );
    // The status says who is stalled, on what, and what to do.
    env.wait_until(
        "status to show both stalled senders",
        Duration::from_secs(10),
        |e| prep(e)["stalled"].as_array().is_some_and(|s| s.len() == 2),
    );
    let p = prep(&env);
    for s in p["stalled"].as_array().unwrap() {
        assert_eq!(s["jobs"], 2, "{p}");
        assert_eq!(s["waiting"], 1, "{p}");
        assert_eq!(s["attachments"], json!([stalled]), "{p}");
    }
    let mut senders: Vec<&str> = p["stalled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sender"].as_str().unwrap())
        .collect();
    senders.sort();
    assert_eq!(senders, ["echo-alice", "echo-carol"]);
    assert_eq!(
        mount.reads(),
        4,
        "their third sends wait in their own lines"
    );
    let threads = p["threads"].as_u64().unwrap();
    assert!(
        (4..=5).contains(&threads),
        "4 stuck, at most 1 started for the one send that waited: {p}"
    );
    // (Its exit code is left alone: under load its HTTP probe may time out.)
    let status = String::from_utf8_lossy(&env.run(&["status"]).stdout).into_owned();
    eprintln!("{status}");
    for want in [
        "send preparation: STALLED — 4 preparation(s) running over 2 s".to_string(),
        "  echo-alice: 2 stalled, the oldest for ".to_string(),
        format!(
            " s, 1 more of its sends waiting behind them — reading {}",
            stalled.display()
        ),
        "  what to do: make that file system answer again, or unmount it".to_string(),
    ] {
        assert!(status.contains(&want), "{want:?} not in:\n{status}");
    }
    let doctor = env.run(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(text.contains("send preparation: STALLED"), "{text}");
    assert_eq!(doctor.status.code(), Some(1), "a stalled pool is a problem");

    // At their deadline the stalled senders are answered, with what held them.
    let answers: Vec<_> = stallers.into_iter().map(|t| t.join().unwrap()).collect();
    for who in ["echo-alice", "echo-carol"] {
        let mut texts: Vec<String> = answers
            .iter()
            .filter(|(w, _, _)| *w == who)
            .map(|(_, took, r)| {
                assert!(
                    *took < Duration::from_secs(30),
                    "{who}: answered after {took:?}"
                );
                r["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        texts.sort();
        let ran = "peer \"bob\" did not take the message within 20 s: its preparation (reading \
                   its attachments) did not finish — a file system that does not answer? \
                   (iapeer status shows stalled preparations); message NOT delivered";
        let waited = "peer \"bob\" did not take the message within 20 s: it waited for a \
                      preparation worker behind this sender's earlier sends, which are still \
                      being prepared (iapeer status shows them); message NOT delivered";
        assert_eq!(texts, [waited, ran, ran], "{who}");
    }
    // The threads are still stuck in their reads; the file system going away frees them.
    assert_eq!(prep(&env)["stalled"].as_array().unwrap().len(), 2);
    drop(mount);
    env.wait_until(
        "the stuck threads to come back",
        Duration::from_secs(15),
        |e| {
            let p = prep(e);
            p["running"] == 0 && p["stalled"] == json!([])
        },
    );
    let status = String::from_utf8_lossy(&env.run(&["status"]).stdout).into_owned();
    assert!(
        status.contains("send preparation: 0 running, 0 waiting"),
        "{status}"
    );
}

/// Issue 26 follow-up (FAIL A): eight senders whose attachment reads never return, two
/// sends each (before the fix their 16 preparations took all 16 threads of the one pool, and
/// every send on the host waited: a plain `iapeer send --timeout 10` failed after 10 s, an
/// MCP call waited 300 s, `status` said BLOCKED). Now each stalled sender holds only what it
/// started before its first read stalled, its further sends wait behind its own and are
/// answered, at their deadline, with that reason; an unrelated send without attachments (CLI
/// and MCP) and an unrelated send with one are answered within 6 s; `status` names the eight
/// and says the others are still served.
#[test]
fn eight_stalled_senders_leave_unrelated_sends_served() {
    const STALLERS: usize = 8;
    let names: Vec<String> = (1..=STALLERS).map(|i| format!("p{i}")).collect();
    let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
    all.extend(["bob", "carol", "dave", "dan", "erin"]);
    let env = world(&all, &[]);
    let port = env.port();
    let carol = wake_and_token(&env, "carol");
    wake_and_token(&env, "dave");
    wake_and_token(&env, "erin");
    let mount = StalledMount::mount(&env.dir.path().join("mnt"));
    let stalled = mount.file();

    let stallers: Vec<(String, std::process::Child)> = names
        .iter()
        .flat_map(|n| [n.clone(), n.clone()])
        .map(|n| {
            let from = format!("echo-{n}");
            let child = env.spawn(&[
                "send",
                "bob",
                "--from",
                &from,
                "--timeout",
                "15",
                "--message",
                "echo: x",
                "--attachment",
                stalled.to_str().unwrap(),
            ]);
            (from, child)
        })
        .collect();
    env.wait_seen(
        "every stalling sender to have a preparation stuck in a read",
        Duration::from_secs(15),
        prep,
        |p| p["stalled"].as_array().map_or(0, Vec::len) == STALLERS,
    );

    // A plain send from the CLI and from MCP, and a send with a readable attachment.
    let (took, said) = unrelated_send(&env, "echo-carol", "dave", "echo: plain");
    eprintln!("unrelated plain send beside {STALLERS} stalled senders: {said} after {took:?}");
    assert!(
        took < Duration::from_secs(6) && said.starts_with("delivered to dave"),
        "the unrelated plain send: {said} after {took:?}\n{}",
        env.diagnostics()
    );
    let started = Instant::now();
    let r = mcp_send(port, ("echo-carol", &carol), "dave", "echo: mcp", &[]);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(6) && r["structuredContent"]["ok"] == true,
        "the unrelated MCP send after {took:?}: {r}"
    );
    let good = env.dir.path().join("good.txt");
    std::fs::write(&good, "readable").unwrap();
    let (took, out) = timed(
        &env,
        &[
            "send",
            "erin",
            "--from",
            "echo-dan",
            "--timeout",
            "5",
            "--message",
            "echo: with a file",
            "--attachment",
            good.to_str().unwrap(),
        ],
    );
    let out = out.expect("the unrelated attachment send was answered");
    eprintln!(
        "unrelated attachment send beside {STALLERS} stalled senders: after {took:?}: {}",
        common::describe(&out)
    );
    assert!(
        took < Duration::from_secs(6)
            && String::from_utf8_lossy(&out.stdout).starts_with("delivered to erin"),
        "the unrelated attachment send after {took:?}: {}",
        common::describe(&out)
    );

    // The status is true: eight senders stalled, each with what it started before its
    // first read stalled (1 or 2, as the sends came), the rest waiting behind them; the
    // others are served.
    // Every read begun counts as stalled once it has run 2 s: wait for the status to agree.
    let running = |p: &Value| -> u64 {
        p["stalled"].as_array().map_or(0, |a| {
            a.iter().map(|s| s["jobs"].as_u64().unwrap_or(0)).sum()
        })
    };
    let seen = env.wait_seen(
        "every begun read counted stalled",
        Duration::from_secs(15),
        |e| json!({"prep": prep(e), "reads": mount.reads()}),
        |s| Some(running(&s["prep"])) == s["reads"].as_u64(),
    );
    let p = &seen["prep"];
    let mut behind: HashMap<String, u64> = HashMap::new();
    let mut stuck = 0;
    for s in p["stalled"].as_array().unwrap() {
        let (jobs, waiting) = (s["jobs"].as_u64().unwrap(), s["waiting"].as_u64().unwrap());
        // Under load a sender's second send may not have reached the pool yet.
        assert!((1..=2).contains(&jobs) && jobs + waiting <= 2, "{p}");
        assert_eq!(s["attachments"], json!([stalled]), "{p}");
        // What runs stays running (a stalled read never returns); every other send of the
        // sender, arrived by now or later, waits behind it.
        behind.insert(s["sender"].as_str().unwrap().to_string(), 2 - jobs);
        stuck += jobs;
    }
    assert_eq!(
        mount.reads() as u64,
        stuck,
        "the other sends wait behind their first"
    );
    let status = String::from_utf8_lossy(&env.run(&["status"]).stdout).into_owned();
    for want in [
        format!("send preparation: STALLED — {stuck} preparation(s) running over 2 s"),
        format!(
            "other senders are still served ({} more threads may stall",
            64 - stuck
        ),
    ] {
        assert!(status.contains(&want), "{want:?} not in:\n{status}");
    }

    // At their deadline each stalled sender is told what held each of its sends.
    let ran = "iapeer send: peer \"bob\" did not take the message within 15 s: its preparation \
               (reading its attachments) did not finish — a file system that does not answer? \
               (iapeer status shows stalled preparations); message NOT delivered";
    let waited = "iapeer send: peer \"bob\" did not take the message within 15 s: it waited for \
                  a preparation worker behind this sender's earlier sends, which are still \
                  being prepared (iapeer status shows them); message NOT delivered";
    let mut told: HashMap<String, Vec<String>> = HashMap::new();
    for (from, child) in stallers {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
        let err = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
        told.entry(from).or_default().push(err);
    }
    for (from, texts) in told {
        let waits = texts.iter().filter(|t| *t == waited).count() as u64;
        let runs = texts.iter().filter(|t| *t == ran).count() as u64;
        assert_eq!(
            (waits, runs),
            (behind[&from], 2 - behind[&from]),
            "{from}: {texts:?}"
        );
    }
    drop(mount);
    env.wait_seen(
        "the stuck threads to come back",
        Duration::from_secs(15),
        prep,
        |p| p["running"] == 0,
    );
}

/// Attacker re-check of issue 26 (attack27): when every one of the 64 threads that read
/// attachments is stuck (here 64 senders, each with a read that never returns), sends
/// without attachments are still prepared and delivered on their own pool, and the `send
/// preparation` line says so; but the daemon line above it said `daemon: NOT healthy (no
/// send can be prepared: …)`, which is not true. The status must not say that no send can
/// be prepared while sends are being prepared and delivered.
#[test]
fn a_blocked_attachment_pool_is_not_reported_as_no_send_can_be_prepared() {
    const STALLERS: usize = 64;
    let names: Vec<String> = (1..=STALLERS).map(|i| format!("p{i}")).collect();
    let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
    all.extend(["bob", "carol", "dave"]);
    let env = world(&all, &[]);
    wake_and_token(&env, "dave");
    let mount = StalledMount::mount(&env.dir.path().join("mnt"));
    let stalled = mount.file();
    let stallers: Vec<std::process::Child> = names
        .iter()
        .map(|n| {
            env.spawn(&[
                "send",
                "bob",
                "--from",
                &format!("echo-{n}"),
                "--timeout",
                "240",
                "--message",
                "echo: x",
                "--attachment",
                stalled.to_str().unwrap(),
            ])
        })
        .collect();
    env.wait_seen(
        "all 64 attachment threads stuck in reads",
        Duration::from_secs(120),
        prep,
        |p| p["threads"] == 64 && p["stalled"].as_array().map_or(0, Vec::len) == STALLERS,
    );
    let (took, said) = unrelated_send(&env, "echo-carol", "dave", "echo: plain");
    eprintln!("a plain send beside a blocked attachment pool: {said} after {took:?}");
    assert!(
        said.starts_with("delivered to dave"),
        "sends without attachments are prepared: {said}"
    );
    let status = String::from_utf8_lossy(&env.run(&["status"]).stdout).into_owned();
    eprintln!("{status}");
    assert!(status.contains("send preparation: BLOCKED"), "{status}");
    assert!(
        !status.contains("no send can be prepared"),
        "a plain send was just prepared and delivered, yet status says:\n{status}"
    );
    drop(mount);
    for mut child in stallers {
        let _ = child.wait();
    }
}

/// Attacker re-check of issue 26 (attack27): sends without attachments have their own pool
/// (8 threads, 2 per sender), but their preparation reads the target's folder (its
/// profile). A peer whose folder is on a file system that stopped answering (a hung NFS
/// or FUSE mount — or one its own agent mounted over its folder; here its profile is a link
/// to a file whose reads never return) takes that whole pool once four senders have sent
/// it two messages each: every other send without attachments on the host then waits out
/// its timeout (`--timeout 5`: refused after 5 s; an MCP call: 300 s), while `status` says
/// the others are still served. An unrelated plain send must still be answered within 6 s.
#[test]
fn a_peer_whose_folder_stops_answering_does_not_stall_every_plain_send() {
    let env = world(&["bob", "carol", "dave", "p1", "p2", "p3", "p4"], &[]);
    wake_and_token(&env, "dave");
    let mount = StalledMount::mount(&env.dir.path().join("mnt"));
    let profile = env.root.join("peers/bob/.iapeer/peer-profile.json");
    assert!(profile.is_file(), "{}", profile.display());
    std::fs::remove_file(&profile).unwrap();
    std::os::unix::fs::symlink(mount.file(), &profile).unwrap();
    let senders: Vec<std::process::Child> = ["p1", "p2", "p3", "p4"]
        .iter()
        .flat_map(|p| [p, p])
        .map(|p| {
            env.spawn(&[
                "send",
                "bob",
                "--from",
                &format!("echo-{p}"),
                "--timeout",
                "30",
                "--message",
                "echo: to bob",
            ])
        })
        .collect();
    // The plain pool's lines are the targets: bob's share (2) is stuck in reads of its
    // folder, its 6 other sends wait behind them, whoever sent them.
    env.wait_seen(
        "bob's share of the plain pool stuck in reads of its folder, the rest behind it",
        Duration::from_secs(30),
        prep,
        |p| {
            p["stalled"].as_array().is_some_and(|s| {
                s.iter()
                    .any(|e| e["peer"] == "bob" && e["jobs"] == 2 && e["waiting"] == 6)
            })
        },
    );
    assert_eq!(mount.reads(), 2, "only bob's share reads its folder");
    let (took, said) = unrelated_send(&env, "echo-carol", "dave", "echo: unrelated");
    eprintln!("an unrelated plain send beside bob's stuck folder: {said} after {took:?}");
    let status = String::from_utf8_lossy(&env.run(&["status"]).stdout).into_owned();
    eprintln!("{status}");
    assert!(
        took < Duration::from_secs(6) && said.starts_with("delivered to dave"),
        "the unrelated plain send: {said} after {took:?}"
    );
    // Status names the stuck folder's peer, for how long, and what to do.
    assert!(
        status.contains("send preparation: STALLED")
            && status.contains("  to bob: 2 stalled, the oldest for ")
            && status.contains(
                "6 more sends to it waiting behind them — reading the folder of peer \"bob\""
            )
            && status.contains("sends to other peers are still served")
            && status.contains("what to do: make that file system answer again"),
        "{status}"
    );
    // A send to bob with a short timeout is answered with the true reason.
    let (_, to_bob) = unrelated_send(&env, "echo-carol", "bob", "echo: to bob");
    assert!(
        to_bob.contains("behind earlier sends to peer \"bob\", whose preparation (reading its folder) did not finish")
            && !to_bob.contains("attachments"),
        "{to_bob}"
    );
    drop(mount);
    for mut child in senders {
        let _ = child.wait();
    }
}

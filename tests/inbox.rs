//! A human's inbox (issue 8 item 3): a peer on the built-in `human` runtime keeps every
//! message in `state/iapeer/inbox/<peer>.jsonl`; `iapeer inbox` shows it; the human answers
//! with `iapeer send … --from human-<peer>`. And `iapeer logs` (item 4) over the same run.

use crate::common;

use common::TestEnv;
use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A `--follow` child, killed when the test ends however it ends (a failed assertion must
/// not leave it running).
struct Follower(std::process::Child);

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Follower {
    /// `iapeer <args>` (an `inbox` or `logs` with `--follow`) with its stdout lines on a
    /// channel and its stderr piped.
    fn spawn(env: &TestEnv, args: &[&str]) -> (Follower, std::sync::mpsc::Receiver<String>) {
        let mut child = env
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        (Follower(child), rx)
    }

    /// Its exit status, within `secs` (`what` names the event that should have ended it).
    fn wait_exit(&mut self, secs: u64, what: &str) -> std::process::ExitStatus {
        common::exit_within(&mut self.0, Duration::from_secs(secs))
            .unwrap_or_else(|| panic!("--follow did not end on {what}"))
    }

    /// Everything it wrote to stderr (once it has ended).
    fn stderr(&mut self) -> String {
        let mut said = String::new();
        if let Some(mut e) = self.0.stderr.take() {
            std::io::Read::read_to_string(&mut e, &mut said).unwrap();
        }
        said
    }
}

/// alice on the echo stand-in, `you` on the human runtime, the daemon up.
fn human_and_agent() -> TestEnv {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&[
        "create",
        "you",
        "--runtime",
        "human",
        "--description",
        "the operator",
    ]);
    env.start_daemon();
    env.wait_until("the human peer is up", Duration::from_secs(10), |e| {
        e.status_of("you", "human") == "live"
    });
    env
}

/// The next record a `--follow --json` printed, within 10 s (`what` says what it should be).
fn next_record(rx: &std::sync::mpsc::Receiver<String>, what: &str) -> serde_json::Value {
    let line = rx.recv_timeout(Duration::from_secs(10)).expect(what);
    serde_json::from_str(&line).unwrap()
}

fn inbox_json(env: &TestEnv, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["inbox"];
    all.extend_from_slice(args);
    all.push("--json");
    env.ok(&all)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn delivered_to_you(env: &TestEnv, body_count: usize) -> bool {
    env.events("delivery", "delivery")
        .iter()
        .filter(|d| d["to"] == "you" && d["ok"] == "true" && d["caller"] == "echo-alice")
        .count()
        >= body_count
}

/// The round trip: the human writes to alice (waking her); the echo agent answers through
/// MCP into the human's inbox; `inbox` shows it unread with sender and topic; the human
/// replies on the topic with `--from human-you`; alice's screen and transcript get it; once
/// read, nothing is unread.
#[test]
fn human_inbox_round_trip_with_an_echo_agent() {
    let env = human_and_agent();
    let out = env.ok(&[
        "send",
        "alice",
        "--from",
        "human-you",
        "--topic",
        "plans",
        "--message",
        "are you there?",
    ]);
    assert_eq!(out.trim(), "delivered to alice (echo), woke");
    env.wait_until("alice's answer is stored", Duration::from_secs(15), |e| {
        delivered_to_you(e, 1)
    });
    let answer = env
        .events("delivery", "delivery")
        .into_iter()
        .find(|d| d["to"] == "you")
        .unwrap();
    assert_eq!(answer["path"], "mcp", "the echo agent itself sent it");
    assert_eq!(answer["via"], "human-you");

    let shown = env.ok(&["inbox"]);
    assert!(
        shown.contains("● ") && shown.contains("alice (echo)  topic: plans"),
        "{shown}"
    );
    assert!(shown.contains("    echo: are you there?"), "{shown}");
    assert!(shown.contains("inbox of you: 1 unread of 1"), "{shown}");
    assert!(
        shown.contains("reply: iapeer send alice --topic plans --from human-you"),
        "{shown}"
    );
    let again = env.ok(&["inbox"]);
    assert!(again.contains("no unread messages (1 in all"), "{again}");
    assert!(!again.contains("echo: are you there?"), "{again}");

    let out = env.ok(&[
        "send",
        "alice",
        "--topic",
        "plans",
        "--from",
        "human-you",
        "--message",
        "thanks, all good",
    ]);
    assert_eq!(out.trim(), "delivered to alice (echo)");
    env.wait_until("alice shows the reply", Duration::from_secs(10), |e| {
        e.pane("echo-alice").contains("from you: thanks, all good")
    });
    let transcript = common::read(&env.peer_dir("alice").join(".echo-agent/transcript.jsonl"));
    assert!(transcript.contains("thanks, all good"), "{transcript}");
    // alice echoes that too: one new unread message, then none.
    env.wait_until("alice's second answer", Duration::from_secs(15), |e| {
        delivered_to_you(e, 2)
    });
    let unread = inbox_json(&env, &[]);
    assert_eq!(unread.len(), 1, "{unread:?}");
    assert_eq!(unread[0]["body"], "echo: thanks, all good");
    assert_eq!(unread[0]["unread"], true);
    let none = env.ok(&["inbox"]);
    assert!(none.contains("no unread messages (2 in all"), "{none}");

    // `logs`: the wake before the delivery it carried, then the answers, one line each.
    let logs = env.ok(&["logs"]);
    let pos = |needle: &str| {
        logs.find(needle)
            .unwrap_or_else(|| panic!("missing {needle:?} in:\n{logs}"))
    };
    let woke = pos("alice (echo)  woke  fresh conversation: ");
    let first = pos("you → alice  delivered  topic=plans (woke)");
    let answer = pos("alice → you  delivered  topic=plans");
    let second = pos("you → alice  delivered  topic=plans\n");
    assert!(woke < first && first < answer && answer < second, "{logs}");
    assert!(pos("you (human)  always-on started") < woke, "{logs}");
    for line in logs.lines() {
        let t = line.split(' ').next().unwrap();
        assert!(
            t.len() == 8 && t.as_bytes()[2] == b':',
            "local time first: {line}"
        );
    }
    // --json: one object per entry with its log; a peer filter keeps what names it.
    let json: Vec<serde_json::Value> = env
        .ok(&["logs", "alice", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(json
        .iter()
        .all(|v| v["ts"].is_string() && v["log"].is_string()));
    assert!(json
        .iter()
        .any(|v| v["log"] == "lifecycle" && v["ev"] == "wake" && v["identity"] == "echo-alice"));
    assert!(json
        .iter()
        .any(|v| v["log"] == "delivery" && v["caller"] == "echo-alice"));
    assert!(
        !json.iter().any(|v| v["identity"] == "human-you"),
        "{json:?}"
    );
    let (_, err) = env.fails(&["logs", "--since", "soon"], 2);
    assert!(err.contains("--since: \"soon\""), "{err}");
    let out = env.run(&["logs", "--since", "2099-01-01"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(out.stdout.is_empty(), "{}", common::describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("no log entries in that time (logs are in "),
        "nothing to show is said, on stderr: {}",
        common::describe(&out)
    );
}

/// `delivered` means the record is on disk: the daemon is killed with SIGKILL right after
/// answering, and the message is still in the inbox (also after a restart).
#[test]
fn a_delivered_message_survives_the_daemon_being_killed() {
    let mut env = human_and_agent();
    let att = env.dir.path().join("notes.txt");
    std::fs::write(&att, "attached").unwrap();
    let out = env.ok(&[
        "send",
        "you",
        "--from",
        "echo-alice",
        "--message",
        "keep this",
        "--attachment",
        att.to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["delivered_to"]["runtime"], "human");
    let daemon = env.daemon.take().unwrap();
    common::signal(daemon.id(), nix::sys::signal::Signal::SIGKILL);
    let mut daemon = daemon;
    let _ = daemon.wait();
    let stored = common::read(&env.paths().inbox("you"));
    assert!(stored.contains("\"body\":\"keep this\""), "{stored}");
    // Works without the daemon, and shows where the attachment's copy is.
    let records = inbox_json(&env, &[]);
    assert_eq!(records.len(), 1);
    let r = &records[0];
    for key in [
        "id",
        "received",
        "ts",
        "from",
        "runtime",
        "intelligence",
        "body",
    ] {
        assert!(r[key].is_string(), "{key} in {r}");
    }
    assert_eq!(r["from"], "alice");
    assert_eq!(r["runtime"], "echo");
    assert_eq!(r["intelligence"], "artificial");
    assert_eq!(r["unread"], true);
    assert!(r.get("topic").is_none(), "no topic, no key: {r}");
    let copy = r["attachments"][0].as_str().unwrap();
    assert!(
        copy.starts_with(env.paths().attachments_dir("you").to_str().unwrap()),
        "{copy}"
    );
    assert_eq!(common::read(std::path::Path::new(copy)), "attached");
    env.start_daemon();
    let all = inbox_json(&env, &["--all"]);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["unread"], false, "shown once, read since");
    env.ok(&["send", "you", "--from", "echo-alice", "--message", "after"]);
    let all = inbox_json(&env, &["you", "--all"]);
    let bodies: Vec<&str> = all.iter().map(|r| r["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["keep this", "after"], "newest last");
}

/// `--follow` prints a message that arrives while it waits, and ends cleanly on SIGINT.
#[test]
fn inbox_follow_picks_up_a_new_message() {
    let env = human_and_agent();
    let (mut follower, rx) = Follower::spawn(&env, &["inbox", "--follow", "--json"]);
    env.ok(&[
        "send",
        "you",
        "--from",
        "echo-alice",
        "--topic",
        "late",
        "--message",
        "news",
    ]);
    let v = next_record(&rx, "--follow printed the new message");
    assert_eq!(v["body"], "news");
    assert_eq!(v["topic"], "late");
    common::signal(follower.0.id(), nix::sys::signal::Signal::SIGINT);
    let status = follower.wait_exit(5, "SIGINT");
    assert!(status.success(), "{status:?}");
    assert!(
        env.ok(&["inbox"]).contains("no unread messages"),
        "what --follow printed is read"
    );
}

/// `--follow` goes with its peer through a `rename` (the inbox moves with it) and ends with
/// exit 1 and the reason when the peer is removed; meanwhile a send to the old name says
/// what became of it (renamed to …, then removed), as does the same send over MCP.
#[test]
fn inbox_follow_follows_a_rename_and_ends_at_a_removal() {
    let env = human_and_agent();
    let (mut follower, rx) = Follower::spawn(&env, &["inbox", "you", "--follow", "--json"]);
    env.ok(&["rename", "you", "me", "--force"]);
    env.wait_until("me is up", Duration::from_secs(10), |e| {
        e.status_of("me", "human") == "live"
    });
    let (_, err) = env.fails(
        &["send", "you", "--from", "echo-alice", "--message", "lost?"],
        1,
    );
    assert!(
        err.contains("peer \"you\" is not in the iapeer peers index — it was renamed to \"me\""),
        "{err}"
    );
    env.ok(&[
        "send",
        "me",
        "--from",
        "echo-alice",
        "--message",
        "after the rename",
    ]);
    let v = next_record(&rx, "--follow printed the message sent to the new name");
    assert_eq!(v["body"], "after the rename");
    env.ok(&["remove", "me", "--force"]);
    let status = follower.wait_exit(10, "the removal of its peer");
    assert_eq!(status.code(), Some(1), "{status:?}");
    let said = follower.stderr();
    assert!(
        said.contains("you was renamed to me: following me"),
        "{said}"
    );
    assert!(
        said.contains("me was removed while followed; its messages were set aside as")
            && said.contains("me.removed-"),
        "{said}"
    );
    let (_, err) = env.fails(
        &["send", "you", "--from", "echo-alice", "--message", "x"],
        1,
    );
    assert!(
        err.contains("peer \"you\" is not in the iapeer peers index — it was removed"),
        "the trail ends at the removal: {err}"
    );
}

/// A reader that goes away mid-listing (`| head`) saw almost nothing: nothing is marked
/// read (every message used to be), and the exit says so. A line cut inside a character
/// spoils only itself (the whole inbox used to be unreadable).
#[test]
fn messages_a_closed_stdout_never_showed_stay_unread() {
    let env = human_and_agent();
    let long = "z".repeat(15_000);
    for i in 1..=5 {
        env.ok(&[
            "send",
            "you",
            "--from",
            "echo-alice",
            "--message",
            &format!("unread-{i} {long}"),
        ]);
    }
    let mut child = env
        .cmd(&["inbox", "you"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("they stay unread"),
        "{}",
        common::describe(&out)
    );
    assert_eq!(
        inbox_json(&env, &["you"]).len(),
        5,
        "all five are still unread"
    );
    // A torn append cut inside "ö", then a good message: both good ones read.
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(env.paths().inbox("you"))
        .unwrap()
        .write_all(b"{\"id\":\"x\",\"body\":\"K\xc3")
        .unwrap();
    env.ok(&[
        "send",
        "you",
        "--from",
        "echo-alice",
        "--message",
        "after the torn line",
    ]);
    let all = inbox_json(&env, &["you", "--all"]);
    assert_eq!(all.len(), 6, "{all:?}");
    assert_eq!(all[5]["body"], "after the torn line");
}

/// Without a name: the only human; with two, a clear refusal naming both; a peer that is
/// not on the human runtime has no inbox.
#[test]
fn which_inbox_without_a_name() {
    let env = TestEnv::new();
    env.create_echo("alice");
    let (_, err) = env.fails(&["inbox"], 1);
    assert!(
        err.contains("no peer is on the human runtime") && err.contains("--runtime human"),
        "{err}"
    );
    env.ok(&["create", "you", "--runtime", "human", "--no-bootstrap"]);
    assert!(env.ok(&["inbox"]).contains("inbox of you: no messages yet"));
    env.ok(&["create", "ann", "--runtime", "human", "--no-bootstrap"]);
    let (_, err) = env.fails(&["inbox"], 1);
    assert!(
        err.contains("several human peers (ann, you) — name the one to show: iapeer inbox <peer>"),
        "{err}"
    );
    let (_, err) = env.fails(&["inbox", "alice"], 1);
    assert!(
        err.contains("\"alice\" is not on the human runtime") && err.contains("ann, you"),
        "{err}"
    );
    let list = env.list();
    let you = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["personality"] == "you")
        .unwrap()
        .clone();
    assert_eq!(you["intelligence"], "natural");
}

/// The promise (spec 03 §1): a message the inbox cannot store is never answered
/// `delivered`. Here the inbox file's place is taken by a folder, so every append fails.
#[test]
fn a_message_that_cannot_be_stored_is_not_delivered() {
    let env = human_and_agent();
    std::fs::create_dir_all(env.paths().inbox("you")).unwrap();
    let (out, err) = env.fails(
        &["send", "you", "--from", "echo-alice", "--message", "lost?"],
        1,
    );
    assert!(!out.contains("delivered"), "{out}");
    assert!(err.contains("\"you\" (human)"), "{err}");
    let d = env.events("delivery", "delivery");
    assert!(d.iter().all(|e| e["ok"] == "false"), "{d:?}");
    // Once the inbox can be written again, the writer (still up) stores the next message.
    std::fs::remove_dir(env.paths().inbox("you")).unwrap();
    env.wait_until("the writer is back", Duration::from_secs(30), |e| {
        e.status_of("you", "human") == "live"
            && e.run(&["send", "you", "--from", "echo-alice", "--message", "again"])
                .status
                .success()
    });
    let records = inbox_json(&env, &[]);
    assert_eq!(records[0]["body"], "again", "{records:?}");
    assert!(!common::read(&env.paths().inbox("you")).contains("lost?"));
}

/// `iapeer send` typed on the human's own terminal (stdin a tty, outside any peer's folder)
/// signs as the host's only human peer: a reply needs no `--from`.
#[test]
fn send_on_the_humans_terminal_signs_as_the_human() {
    let env = human_and_agent();
    let out = crate::send_rules::on_terminal(env.cmd(&[
        "send",
        "alice",
        "--topic",
        "plans",
        "--message",
        "typed by hand",
    ]));
    assert!(out.status.success(), "{}", common::describe(&out));
    let sent = env.events("delivery", "delivery");
    let d = sent.iter().find(|d| d["to"] == "alice").unwrap();
    assert_eq!(d["caller"], "human-you");
    // alice's echo comes back to the inbox.
    env.wait_until("the echo is stored", Duration::from_secs(15), |e| {
        delivered_to_you(e, 1)
    });
    assert_eq!(inbox_json(&env, &[])[0]["body"], "echo: typed by hand");
}

/// `logs --follow` prints entries appended while it waits, and ends cleanly on SIGTERM.
#[test]
fn logs_follow_prints_new_entries() {
    let env = human_and_agent();
    let (mut follower, rx) = Follower::spawn(&env, &["logs", "you", "--follow", "--json"]);
    // What was there already: the human's writer started.
    let first: serde_json::Value =
        serde_json::from_str(&rx.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(first["identity"], "human-you", "{first}");
    env.ok(&["send", "you", "--from", "echo-alice", "--message", "ping"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let delivery = loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("--follow printed the delivery");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        if v["ev"] == "delivery" {
            break v;
        }
    };
    assert_eq!(delivery["to"], "you");
    assert_eq!(delivery["ok"], "true");
    common::signal(follower.0.id(), nix::sys::signal::Signal::SIGTERM);
    let s = follower.wait_exit(5, "SIGTERM");
    assert!(s.success(), "{s:?}");
}

/// An inbox that cannot be written fails each send at once with the writer's reason (not
/// "offline … retry"), and the human stays up: six failures in a row park nobody, and the
/// next send after the problem is gone is delivered (found by a newcomer walkthrough: the
/// writer used to exit, and five exits parked the operator's own peer).
#[test]
fn an_inbox_that_cannot_be_written_fails_the_send_with_why_and_parks_nobody() {
    let env = human_and_agent();
    let file = env.paths().inbox("you");
    std::fs::create_dir_all(&file).unwrap(); // a folder where the file goes: every write fails
    for i in 0..6 {
        let (_, err) = env.fails(
            &[
                "send",
                "you",
                "--from",
                "echo-alice",
                "--message",
                &format!("m{i}"),
            ],
            1,
        );
        assert!(
            err.contains("cannot store the message in") && err.contains("you.jsonl"),
            "send {i}: {err}"
        );
        assert!(!err.contains("offline") && !err.contains("parked"), "{err}");
    }
    // Scripts read it as the peer being unable to take messages now, not the daemon's fault.
    let out = env.run(&[
        "send",
        "you",
        "--from",
        "echo-alice",
        "--message",
        "m",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], "offline", "{v}");
    std::fs::remove_dir(&file).unwrap();
    let out = env.ok(&[
        "send",
        "you",
        "--from",
        "echo-alice",
        "--message",
        "now it fits",
    ]);
    assert!(out.contains("delivered to you"), "{out}");
    assert!(common::read(&file).contains("now it fits"));
}

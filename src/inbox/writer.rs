//! `iapeer human-inbox`: the program behind the built-in `human` runtime (issue 8 item 3). The
//! daemon runs it on pipes like any router runtime (spec 04 §1) and writes wire-form envelopes
//! to its stdin; for each one it appends a [`Record`] to the peer's inbox file, fsyncs, and
//! only then prints `stored <id>` on stdout — the acknowledgement the daemon waits for before
//! it answers the sender `delivered` — or `failed <id> <reason>` when it cannot store it (the
//! sender is told the reason at once). Then, when enabled, a desktop notification.
//!
//! Who it writes for: `PEER_PERSONALITY` (set by the daemon for every session). Where:
//! `IAPEER_ROOT` (the daemon passes its root).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{ack_line, append, failure_line, Record};
use crate::envelope::{extract, Envelope};
use crate::paths::Paths;

/// Exit code when the program cannot start (no personality, no root).
const SETUP_EXIT: i32 = 2;
/// Exit code when stdin cannot be read: the daemon sees the session die and the always-on
/// supervisor restarts the program.
const STORE_EXIT: i32 = 1;

/// The peer a program the daemon starts on pipes (`iapeer <verb>`, for a peer on
/// `runtime`, e.g. `"the human runtime"`) runs for: its personality (`PEER_PERSONALITY`) and
/// the layout (`IAPEER_ROOT`).
///
/// Errors: the line to print on stderr, `iapeer <verb>: …`, when either is unusable.
pub fn peer_from_env(verb: &str, runtime: &str) -> Result<(String, Paths), String> {
    let personality = std::env::var("PEER_PERSONALITY").unwrap_or_default();
    if !crate::names::is_valid_personality(&personality) {
        return Err(format!("iapeer {verb}: PEER_PERSONALITY is not set to a peer name — this program is started by the daemon for a peer on {runtime}"));
    }
    let paths = Paths::from_env().map_err(|e| format!("iapeer {verb}: {e}"))?;
    Ok((personality, paths))
}

/// Run the writer until stdin closes. Returns the process exit code.
pub fn run() -> i32 {
    let (personality, paths) = match peer_from_env("human-inbox", "the human runtime") {
        Ok(peer) => peer,
        Err(why) => {
            eprintln!("{why}");
            return SETUP_EXIT;
        }
    };
    let inbox = paths.inbox(&personality);
    let notify = Notifier::from_env();
    let mut stdin = std::io::stdin().lock();
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = match stdin.read(&mut chunk) {
            Ok(0) => return 0,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("iapeer human-inbox: reading stdin: {e}");
                return STORE_EXIT;
            }
        };
        buf.extend_from_slice(&chunk[..n]);
        let (envelopes, used) = extract(&buf);
        buf.drain(..used);
        for env in envelopes {
            store(&inbox, &env, &notify);
        }
    }
}

/// Store one message and answer for it on stdout: `stored <id>` once it is on disk, or
/// `failed <id> <reason>` when it cannot be (a full disk, a file that cannot be written).
/// The writer goes on either way: the daemon fails that delivery with the reason — never a
/// false `delivered` — and the next message is tried afresh, so a passing problem parks
/// nobody.
fn store(inbox: &std::path::Path, env: &Envelope, notify: &Notifier) {
    let received = crate::clock::log_ts(jiff::Timestamp::now());
    let record = Record::from_envelope(env, received);
    let line = match append(inbox, &record) {
        Ok(()) => ack_line(&record.id),
        Err(e) => {
            let reason = format!(
                "cannot store the message in {}: {e} — fix that (free space, permissions), then send it again",
                inbox.display()
            );
            eprintln!("iapeer human-inbox: {reason}");
            failure_line(&record.id, &reason)
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    if line.starts_with("stored ") {
        notify.notify(&record);
    }
}

/// Desktop notifications (`notify-send` on Linux, `osascript` on macOS), when the program
/// exists and `IAPEER_NOTIFY` is not `0`/`off`/`false`/`no`. At most
/// [`NOTIFY_MAX_IN_FLIGHT`] run at once, each ended after [`NOTIFY_DEADLINE`]: a burst of
/// messages or a notification program that hangs costs a bounded number of processes and
/// threads (before, one of each per message). Messages that arrive while the slots are
/// taken raise no notification of their own; the next one that runs says how many more came.
struct Notifier {
    program: Option<PathBuf>,
    in_flight: Arc<AtomicUsize>,
    skipped: Arc<AtomicUsize>,
}

/// Notifications shown at once, at most.
pub const NOTIFY_MAX_IN_FLIGHT: usize = 2;
/// How long a notification program may run before it is ended.
pub const NOTIFY_DEADLINE: Duration = Duration::from_secs(10);

/// Whether a notification may start with `in_flight` already running (the cap).
pub fn notify_admitted(in_flight: usize) -> bool {
    in_flight < NOTIFY_MAX_IN_FLIGHT
}

/// The text of the notification after `skipped` messages came without their own: the
/// message's own `text`, and how many more to read with `iapeer inbox`.
pub fn with_skipped(text: &str, skipped: usize) -> String {
    match skipped {
        0 => text.to_string(),
        n => format!("{text} (+{n} more: iapeer inbox)"),
    }
}

impl Notifier {
    fn from_env() -> Notifier {
        let enabled = std::env::var("IAPEER_NOTIFY")
            .map(|v| notify_enabled(&v))
            .unwrap_or(true);
        let name = if cfg!(target_os = "macos") {
            "osascript"
        } else {
            "notify-send"
        };
        Notifier {
            program: enabled.then(|| find_in_path(name)).flatten(),
            in_flight: Arc::new(AtomicUsize::new(0)),
            skipped: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn notify(&self, r: &Record) {
        let Some(program) = &self.program else {
            return;
        };
        if !notify_admitted(self.in_flight.fetch_add(1, Ordering::SeqCst)) {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.skipped.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let (title, text) = notification_text(r);
        let text = with_skipped(&text, self.skipped.swap(0, Ordering::SeqCst));
        let mut cmd = Command::new(program);
        if cfg!(target_os = "macos") {
            cmd.arg("-e").arg(format!(
                "display notification {} with title {}",
                applescript_string(&text),
                applescript_string(&title)
            ));
        } else {
            // `--` ends the options: a title or text starting with `-` is text, not an option
            // (notify-send parses its arguments with GLib's GOption, which honours `--`).
            cmd.arg("--app-name=iapeer")
                .arg("--")
                .arg(&title)
                .arg(&text);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match cmd.spawn() {
            Ok(mut child) => {
                // Reaped off the write path: a slow notification daemon never delays the
                // next ack; one that hangs is ended at the deadline.
                let in_flight = Arc::clone(&self.in_flight);
                std::thread::spawn(move || {
                    let until = std::time::Instant::now() + NOTIFY_DEADLINE;
                    while matches!(child.try_wait(), Ok(None)) {
                        if std::time::Instant::now() >= until {
                            let _ = child.kill();
                            let _ = child.wait();
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Err(_) => {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// Whether an `IAPEER_NOTIFY` value turns notifications on (anything but `0`, `off`, `false`,
/// `no`, case-insensitive).
pub fn notify_enabled(value: &str) -> bool {
    !matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "0" | "off" | "false" | "no"
    )
}

/// Title and text of the notification for `r`: `iapeer: alice (topic)` and the body's first
/// line, cut to 200 characters, both one-line fields with their control characters as
/// visible stand-ins ([`crate::visible::line`]).
pub fn notification_text(r: &Record) -> (String, String) {
    let title = match &r.topic {
        Some(t) => format!("iapeer: {} ({t})", r.from),
        None => format!("iapeer: {}", r.from),
    };
    let first = r.body.lines().next().unwrap_or("");
    let text: String = first.chars().take(200).collect();
    (
        crate::visible::line(&title).into_owned(),
        crate::visible::line(&text).into_owned(),
    )
}

fn applescript_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_are_capped_and_the_next_one_counts_the_rest() {
        assert!(notify_admitted(0) && notify_admitted(NOTIFY_MAX_IN_FLIGHT - 1));
        assert!(!notify_admitted(NOTIFY_MAX_IN_FLIGHT));
        assert_eq!(with_skipped("hi", 0), "hi");
        assert_eq!(with_skipped("hi", 38), "hi (+38 more: iapeer inbox)");
    }

    #[test]
    fn the_notify_knob() {
        for off in ["0", "off", "OFF", " false ", "no"] {
            assert!(!notify_enabled(off), "{off}");
        }
        for on in ["1", "on", "yes", ""] {
            assert!(notify_enabled(on), "{on}");
        }
    }

    #[test]
    fn notification_title_and_text() {
        let mut r = Record {
            id: "0".into(),
            received: "t".into(),
            ts: None,
            from: "alice".into(),
            runtime: "echo".into(),
            intelligence: None,
            topic: Some("plans".into()),
            body: format!("{}\nsecond line", "x".repeat(300)),
            attachments: vec![],
        };
        let (title, text) = notification_text(&r);
        assert_eq!(title, "iapeer: alice (plans)");
        assert_eq!(text, "x".repeat(200));
        r.topic = None;
        assert_eq!(notification_text(&r).0, "iapeer: alice");
        // What the sender wrote is one line of text, its controls visible.
        r.topic = Some("t\u{1b}]52;c;aGk=\u{7}\u{202e}".into());
        r.body = "\u{9b}2J\rx\tz\nnext".into();
        assert_eq!(
            notification_text(&r),
            (
                "iapeer: alice (t␛]52;c;aGk=␇<U+202E>)".to_string(),
                "<U+009B>2J␍x␉z".to_string()
            )
        );
        assert_eq!(
            applescript_string("say \"hi\" \\"),
            "\"say \\\"hi\\\" \\\\\""
        );
    }
}

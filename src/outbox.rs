//! The durable outbox (issue 11 item 7): `iapeer send` with the daemon down keeps the send
//! instead of losing it, and the daemon routes what it holds once it is ready.
//!
//! Layout: `<root>/state/iapeer/outbox/<ms>-<pid>-<n>.json`, one control-protocol `send`
//! request per file (written atomically, mode 0600), routed oldest first (names sort by
//! time). A send's attachments are copied beside it into `<name>.files/` and the kept request
//! names the copies (the sender's files may be gone by the time the daemon starts). A routed
//! send's file and copies are removed (the delivery log records it, as for any send); one
//! the daemon refuses is renamed `<name>.refused` with the reason in `<name>.refused.txt`
//! beside it (its copies stay), so nothing is lost without a trace — only for a refusal
//! that is final ([`final_refusal`]); one that passes (offline, a failed wake, shutting
//! down) leaves the file for the next try, every `IAPEER_OUTBOX_RETRY_MS` while the daemon
//! runs, and at its next start. A file that does not parse is renamed `<name>.unreadable`.
//!
//! A kept send holds its message id (the `id` of the request `iapeer send` made), so a try
//! cut off after the daemon took it — killed before it answered — is tried again without
//! risk: the daemon never writes an id twice to the same peer and answers the repeat with
//! what it knows. One whose state is unknown (code `state-unknown`: it may have arrived) is
//! not tried again; it is renamed `<name>.unknown` with the daemon's words beside it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::fsutil;
use crate::paths::Paths;
use crate::protocol::{Answer, Code, Line, Request, SendReply};

/// `<root>/state/iapeer/outbox/`.
pub fn dir(paths: &Paths) -> PathBuf {
    paths.state_dir().join("outbox")
}

/// Keep `req` (a `send`) in the outbox. Its attachments are copied first into
/// `<name>.files/<n>/<file name>` (the name the recipient sees is kept) and the kept request
/// names the copies: a script may delete its files once `send` returns. Returns the file
/// written.
///
/// Errors: the folder or file cannot be written, or an attachment cannot be copied (then
/// nothing is kept).
pub fn put(paths: &Paths, req: &Request) -> io::Result<PathBuf> {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let dir = dir(paths);
    fsutil::ensure_dir(&dir)?;
    let name = file_name(
        crate::clock::now_ms(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
    );
    let path = dir.join(name);
    let mut kept = req.clone();
    if let Request::Send { attachments, .. } = &mut kept {
        if !attachments.is_empty() {
            let copies = files_dir(&path);
            match copy_attachments(&copies, req, attachments) {
                Ok(names) => *attachments = names,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&copies);
                    return Err(e);
                }
            }
        }
    }
    if let Err(e) = fsutil::write_json_atomic(&path, &kept, fsutil::MODE_PRIVATE) {
        let _ = std::fs::remove_dir_all(files_dir(&path));
        return Err(e);
    }
    Ok(path)
}

/// `<name>.files/`: the copies of a kept send's attachments.
fn files_dir(file: &Path) -> PathBuf {
    let mut d = file.as_os_str().to_owned();
    d.push(".files");
    PathBuf::from(d)
}

/// Copy each attachment to `<into>/<n>/<its file name>`; the copies' paths, in order. A
/// source is opened and read as the daemon's spool reads it ([`crate::attachment_source`]:
/// never blocking on a FIFO, regular files only, under `IAPEER_ATTACHMENT_MAX_BYTES`), until
/// the send's deadline (its `timeoutMs`, else `IAPEER_SEND_TIMEOUT_MS`, from now).
///
/// Errors: `attachment N "<src>" could not be copied: <what was wrong> — <what to do>`.
fn copy_attachments(into: &Path, req: &Request, attachments: &[String]) -> io::Result<Vec<String>> {
    use crate::attachment_source::{self as source, Problem};
    let limits = copy_limits(req);
    let mut out = Vec::with_capacity(attachments.len());
    for (n, a) in attachments.iter().enumerate() {
        let from = Path::new(a);
        let copy = |to: &Path| -> Result<(), Problem> {
            let input = source::open(from, limits.max_bytes)?;
            let mut file =
                fsutil::create_new(to, fsutil::MODE_PRIVATE).map_err(Problem::WriteFailed)?;
            source::copy(input, &mut file, limits)?;
            file.sync_all().map_err(Problem::WriteFailed)
        };
        let to = source::name(from).and_then(|name| {
            let slot = into.join(n.to_string());
            fsutil::ensure_dir(&slot).map_err(Problem::WriteFailed)?;
            let to = slot.join(name);
            copy(&to)?;
            Ok(to)
        });
        let to = to.map_err(|e| io::Error::other(source::refusal(n, a, &e)))?;
        out.push(to.to_string_lossy().into_owned());
    }
    Ok(out)
}

/// How much of a kept send's attachments may be read, and until when (see
/// [`copy_attachments`]).
fn copy_limits(req: &Request) -> crate::attachment_source::Limits {
    use crate::config::vars::IAPEER_SEND_TIMEOUT_MS;
    let timeout = match req {
        Request::Send {
            timeout_ms: Some(ms),
            ..
        } => std::time::Duration::from_millis(*ms),
        _ => {
            let raw = std::env::var(IAPEER_SEND_TIMEOUT_MS.name).ok();
            IAPEER_SEND_TIMEOUT_MS.parse_duration(raw.as_deref(), &mut Vec::new())
        }
    };
    crate::attachment_source::Limits {
        max_bytes: crate::attachment_source::max_bytes_from_env(),
        deadline: std::time::Instant::now() + timeout,
    }
}

/// Remove a routed send's file and its attachments' copies.
fn remove_kept(file: &Path) {
    let _ = std::fs::remove_file(file);
    let _ = std::fs::remove_dir_all(files_dir(file));
}

/// The name of an outbox file: zero-padded so names sort by time, then process, then order.
pub fn file_name(ms: u64, pid: u32, seq: u32) -> String {
    format!("{ms:015}-{pid:010}-{seq:06}.json")
}

/// The waiting sends, oldest first.
pub fn pending(paths: &Paths) -> Vec<PathBuf> {
    files_ending(paths, &["json"])
}

/// The outbox's files whose extension is one of `extensions`, sorted (oldest first); none
/// when the folder is missing.
fn files_ending(paths: &Paths, extensions: &[&str]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir(paths))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| extensions.contains(&e))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// A kept send the daemon will not try again, found beside the outbox's waiting sends.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SetAside {
    /// The kept request, `<name>.refused`, `<name>.unknown` or `<name>.unreadable`.
    pub file: PathBuf,
    /// `refused`, `unknown` or `unreadable`.
    pub kind: String,
    /// Its reason, the first line of `<file>.txt` (empty when that is missing).
    pub reason: String,
}

/// The suffixes [`drain`] sets a send aside with.
const SET_ASIDE: [&str; 3] = ["refused", "unknown", "unreadable"];

/// The sends [`drain`] set aside (refused for good, of unknown state, unreadable), oldest
/// first; nothing when the outbox folder is missing. `status` and `doctor` show them (issue
/// 30 item 6): until then they were only in the daemon's log.
pub fn set_aside(paths: &Paths) -> Vec<SetAside> {
    files_ending(paths, &SET_ASIDE)
        .into_iter()
        .map(|file| {
            let kind = file
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_string();
            let mut why = file.as_os_str().to_owned();
            why.push(".txt");
            let reason = std::fs::read_to_string(&why)
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            SetAside { file, kind, reason }
        })
        .collect()
}

/// What became of one outbox file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drained {
    /// Routed (the `send` answer's human line).
    Sent(String),
    /// Refused by the daemon for good: kept as `.refused` with the reason.
    Refused(String),
    /// Not delivered for a reason that passes (the peer could not be woken now, the daemon
    /// is shutting down…): left in the outbox for the next try.
    Deferred(String),
    /// The file did not parse: kept as `.unreadable`.
    Unreadable(String),
    /// Its state is unknown (it may have arrived; trying again cannot tell more): kept as
    /// `.unknown` with the daemon's answer.
    Unknown(String),
}

/// Whether a refusal with `code` is final for a kept send (the send itself is wrong, or its
/// target is gone or stopped by the operator) rather than a state that passes (offline, a
/// failed wake, busy, timeout, shutting down, a paused storm, an internal error).
pub fn final_refusal(code: Code) -> bool {
    matches!(
        code,
        Code::NotRegistered
            | Code::Stopped
            | Code::InvalidArgument
            | Code::BadRequest
            | Code::UnknownOp
            | Code::Held
            | Code::Failed
    )
}

/// How long the daemon waits before it tries deferred sends again
/// (`IAPEER_OUTBOX_RETRY_MS`, default 30 s).
fn retry_after() -> std::time::Duration {
    std::time::Duration::from_millis(
        std::env::var("IAPEER_OUTBOX_RETRY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|ms| *ms > 0)
            .unwrap_or(crate::config::vars::IAPEER_OUTBOX_RETRY_MS.default_u64()),
    )
}

/// Route every waiting send through the daemon's control socket, oldest first. Stops (the
/// rest stays for the next start) when the daemon cannot be reached.
pub fn drain(paths: &Paths) -> Vec<(PathBuf, Drained)> {
    let mut out = Vec::new();
    for file in pending(paths) {
        let req = match std::fs::read_to_string(&file)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<Request>(&t).map_err(|e| e.to_string()))
        {
            Ok(r @ Request::Send { .. }) => r,
            Ok(_) => {
                put_aside(&file, "unreadable", "not a send request");
                out.push((file, Drained::Unreadable("not a send request".into())));
                continue;
            }
            Err(e) => {
                put_aside(&file, "unreadable", &e);
                out.push((file, Drained::Unreadable(e)));
                continue;
            }
        };
        match ask(paths, &req) {
            Ok(Answer::Ok(SendReply { result })) => {
                remove_kept(&file);
                let to = &result.delivered_to;
                let how = if result.queued.is_some() {
                    "queued for"
                } else {
                    "delivered to"
                };
                out.push((
                    file,
                    Drained::Sent(format!("{how} {} ({})", to.personality, to.runtime)),
                ));
            }
            Ok(Answer::Failed(f)) if final_refusal(f.code) => {
                put_aside(&file, "refused", &f.error);
                out.push((file, Drained::Refused(f.error)));
            }
            Ok(Answer::Failed(f)) if f.code == Code::StateUnknown => {
                put_aside(&file, "unknown", &f.error);
                out.push((file, Drained::Unknown(f.error)));
            }
            Ok(Answer::Failed(f)) => {
                let stop = f.code == Code::ShuttingDown;
                out.push((file, Drained::Deferred(f.error)));
                if stop {
                    break; // the rest waits for the next start
                }
            }
            Err(e) => {
                log::warn!(
                    "outbox: cannot reach the daemon ({e}); {} stays for the next start",
                    file.display()
                );
                break;
            }
        }
    }
    out
}

/// Send `req` on the daemon's control socket and read its final answer (progress lines
/// skipped). The storage layer speaks the protocol itself: it sits below `cli` and `daemon`.
///
/// Errors: the socket cannot be reached, or the connection breaks or answers garbage.
fn ask(paths: &Paths, req: &Request) -> io::Result<Answer<SendReply>> {
    use std::io::{BufRead, Write};
    let stream = std::os::unix::net::UnixStream::connect(paths.socket())?;
    let mut line = serde_json::to_string(req).map_err(io::Error::other)?;
    line.push('\n');
    (&stream).write_all(line.as_bytes())?;
    let mut reader = io::BufReader::new(stream);
    loop {
        let mut buf = String::new();
        if reader.read_line(&mut buf)? == 0 {
            return Err(io::Error::other("the daemon closed the connection"));
        }
        match Line::<SendReply>::parse(buf.trim_end()).map_err(io::Error::other)? {
            Line::Progress(_) => continue,
            Line::Final(answer) => return Ok(answer),
        }
    }
}

/// Rename `file` to `<name>.<suffix>` and write `reason` to `<name>.<suffix>.txt`.
fn put_aside(file: &Path, suffix: &str, reason: &str) {
    let mut kept = file.as_os_str().to_owned();
    kept.push(format!(".{suffix}"));
    let kept = PathBuf::from(kept);
    let _ = std::fs::rename(file, &kept);
    let mut why = kept.as_os_str().to_owned();
    why.push(".txt");
    let _ = fsutil::write_atomic(
        Path::new(&why),
        format!("{reason}\n").as_bytes(),
        fsutil::MODE_PRIVATE,
    );
}

/// Start draining on a thread of its own, logging each outcome (the daemon calls this once
/// its control socket listens). Deferred sends are tried again every
/// `IAPEER_OUTBOX_RETRY_MS` while the daemon runs (each logged the first time only).
pub fn drain_in_background(paths: Paths) {
    if pending(&paths).is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("outbox".into())
        .spawn(move || {
            let mut told = std::collections::HashSet::new();
            loop {
                let mut deferred = 0;
                for (file, what) in drain(&paths) {
                    let name = file.file_name().unwrap_or_default().to_string_lossy();
                    match what {
                        Drained::Sent(line) => log::info!("outbox: {name}: {line}"),
                        Drained::Refused(why) => {
                            log::warn!("outbox: {name} refused, kept as {name}.refused: {why}")
                        }
                        Drained::Deferred(why) => {
                            deferred += 1;
                            if told.insert(file.clone()) {
                                log::warn!(
                                    "outbox: {name} not delivered yet ({why}); kept, tried again every {} s",
                                    retry_after().as_secs_f32()
                                );
                            }
                        }
                        Drained::Unreadable(why) => {
                            log::warn!(
                                "outbox: {name} unreadable, kept as {name}.unreadable: {why}"
                            )
                        }
                        Drained::Unknown(why) => {
                            log::warn!("outbox: {name} may have arrived, kept as {name}.unknown: {why}")
                        }
                    }
                }
                if deferred == 0 || pending(&paths).is_empty() {
                    return;
                }
                std::thread::sleep(retry_after());
            }
        });
    if let Err(e) = spawned {
        log::error!("outbox: cannot start the thread that sends what it holds: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_time_then_process_then_order() {
        let a = file_name(999, 77, 5);
        let b = file_name(1000, 3, 0);
        let c = file_name(1000, 3, 1);
        assert!(a < b && b < c, "{a} {b} {c}");
    }

    #[test]
    fn a_kept_send_reads_back_and_junk_is_set_aside() {
        let (dir, paths) = Paths::temp();
        let req = Request::Send {
            from: "echo-a".into(),
            to: "b".into(),
            runtime: None,
            message: "hi".into(),
            topic: Some("t".into()),
            attachments: Vec::new(),
            timeout_ms: None,
            id: Some("m-1".into()),
            if_busy: None,
        };
        let f = put(&paths, &req).unwrap();
        assert_eq!(pending(&paths), vec![f.clone()]);
        let back: Request = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&req).unwrap()
        );
        std::fs::write(&f, "{junk").unwrap();
        // No daemon: the junk is set aside before any connection is tried.
        let drained = drain(&paths);
        assert!(matches!(drained[0].1, Drained::Unreadable(_)));
        assert!(pending(&paths).is_empty());
        assert!(
            dir.path()
                .join("state/iapeer/outbox")
                .read_dir()
                .unwrap()
                .count()
                == 2
        );
        let aside = set_aside(&paths);
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert_eq!(aside[0].kind, "unreadable");
        assert!(aside[0]
            .file
            .to_string_lossy()
            .ends_with(".json.unreadable"));
        assert!(
            aside[0].reason.contains("key must be a string"),
            "{aside:?}"
        );
        assert!(set_aside(&Paths::at(dir.path().join("none"))).is_empty());
    }

    /// A send kept while the daemon is down reads its attachments as the daemon would: a
    /// source that became a FIFO after the check is refused at once (it used to block the
    /// CLI in `open` until something wrote the pipe), in the spool's words, and nothing is
    /// kept.
    #[test]
    fn a_kept_send_whose_attachment_is_a_fifo_is_refused_at_once() {
        let (tmp, paths) = crate::testkit::temp_root();
        let fifo = tmp.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let fifo = fifo.display().to_string();
        let req = Request::Send {
            from: "echo-a".into(),
            to: "b".into(),
            runtime: None,
            message: "hi".into(),
            topic: None,
            attachments: vec![fifo.clone()],
            timeout_ms: None,
            id: None,
            if_busy: None,
        };
        let (tx, rx) = crossbeam_channel::bounded(1);
        let kept = paths.clone();
        std::thread::spawn(move || tx.send(put(&kept, &req).map_err(|e| e.to_string())));
        let err = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("put returned")
            .unwrap_err();
        assert_eq!(
            err,
            format!(
                "attachment 1 \"{fifo}\" could not be copied: it is a named pipe (FIFO), not a \
                 regular file — write what it carries to a regular file and attach that"
            )
        );
        assert!(pending(&paths).is_empty());
        assert_eq!(dir_entries(&dir(&paths)), 0, "nothing kept, no copies left");
    }

    fn dir_entries(d: &Path) -> usize {
        std::fs::read_dir(d).map_or(0, |d| d.count())
    }
}

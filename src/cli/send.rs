//! `iapeer send` (spec 07 "Messaging"): route one message through the daemon.

use std::io::Read;
use std::path::Path;

use super::client::Client;
use super::parse::Invocation;
use super::sender::resolve_sender;
use super::spec::{args, flags};
use super::{json_line, paths, print, usage, CliError, CliResult};
use crate::daemon::route::MAX_MESSAGE_CHARS;
use crate::protocol::{Answer, Code, Reply, Request, SendReply, SendResult, MAX_LINE};
use crate::registry::Registry;

/// The human line for a successful send result.
pub fn describe_result(result: &SendResult) -> String {
    let p = &result.delivered_to.personality;
    let rt = &result.delivered_to.runtime;
    if result.queued == Some(true) {
        match result.queued_by {
            Some(crate::protocol::QueuedBy::Runtime) => {
                format!("queued for {p} ({rt}) behind its running turn")
            }
            Some(crate::protocol::QueuedBy::Composer) => {
                format!("queued for {p} ({rt}) until its composer is free")
            }
            _ => format!("queued for {p} ({rt})"),
        }
    } else if result.woke {
        format!("delivered to {p} ({rt}), woke")
    } else {
        format!("delivered to {p} ({rt})")
    }
}

/// Bytes of a message body the CLI keeps; beyond them characters are only counted.
const KEEP_BYTES: usize = 256 * 1024;

/// Read a message body. An over-long body is normally sent and refused by the daemon (which
/// logs the attempt); one too big to travel — over [`KEEP_BYTES`], where the rest is only
/// counted so a 50 MB file neither fills memory nor breaks the control connection — is
/// refused here with the daemon's own words.
fn read_bounded(mut r: impl Read) -> Result<String, CliError> {
    let keep = KEEP_BYTES;
    let mut kept = Vec::new();
    let mut extra_chars = 0usize;
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::Failed(format!("cannot read the message: {e}"))),
        };
        let room = keep.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..room]);
        // Count the characters of what is not kept: every byte that does not continue a
        // UTF-8 sequence starts one.
        extra_chars += buf[room..n].iter().filter(|b| (**b & 0xC0) != 0x80).count();
    }
    let text = match String::from_utf8(kept) {
        Ok(t) => t,
        // The cut may split the last character; anything else is not UTF-8.
        Err(e) if extra_chars > 0 => String::from_utf8_lossy(&e.into_bytes()).into_owned(),
        Err(_) => {
            return Err(CliError::Failed(
                "the message is not valid UTF-8 text".into(),
            ))
        }
    };
    if extra_chars > 0 {
        let total = text.chars().count() + extra_chars;
        return Err(CliError::Failed(format!(
            "message exceeds {MAX_MESSAGE_CHARS} char limit (got {total})"
        )));
    }
    Ok(text)
}

fn read_message(inv: &Invocation) -> Result<String, CliError> {
    match (inv.value(flags::MESSAGE), inv.value(flags::MESSAGE_FILE)) {
        (Some(_), Some(_)) => Err(usage(inv, "pass --message or --message-file, not both")),
        (None, None) => Err(usage(
            inv,
            "missing --message <text> or --message-file <path|->",
        )),
        (Some(m), None) => read_bounded(m.as_bytes()),
        (None, Some("-")) => read_bounded(std::io::stdin().lock()),
        (None, Some(path)) => {
            let f = std::fs::File::open(path)
                .map_err(|e| CliError::Failed(format!("cannot read --message-file {path}: {e}")))?;
            read_bounded(f)
        }
    }
}

/// Run `iapeer send`.
pub fn run(inv: &Invocation) -> CliResult {
    let target = inv
        .positional(args::TARGET)
        .ok_or_else(|| usage(inv, "missing <target>"))?
        .to_string();
    let message = read_message(inv)?;
    let paths = paths()?;
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::Failed(format!("cannot read the current folder: {e}")))?;
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    let needs_registry = inv.value(flags::FROM).is_none()
        && std::env::var("PEER_IDENTITY").map_or(true, |v| v.trim().is_empty());
    let registry = if needs_registry {
        Registry::load(&paths).map_err(|e| CliError::Failed(e.to_string()))?
    } else {
        Registry::default()
    };
    let from = resolve_sender(
        inv.value(flags::FROM),
        std::env::var("PEER_IDENTITY").ok().as_deref(),
        &cwd,
        &registry,
    )
    .map_err(CliError::Failed)?;
    let attachments: Vec<String> = inv
        .values(flags::ATTACHMENT)
        .iter()
        .map(|a| absolute(&cwd, a))
        .collect();
    let n = message.chars().count();
    let req = Request::Send {
        from,
        to: target.clone(),
        runtime: inv.value(flags::SEND_RUNTIME).map(String::from),
        message,
        topic: inv.value(flags::TOPIC).map(String::from),
        attachments,
    };
    let json_out = inv.flag(flags::JSON);
    let encoded = serde_json::to_string(&req).map_or(usize::MAX, |line| line.len());
    if encoded >= MAX_LINE {
        // Too big for one protocol line (escaping can grow a body): refuse it here.
        return Err(CliError::Failed(format!(
            "message exceeds {MAX_MESSAGE_CHARS} char limit (got {n})"
        )));
    }
    let mut client = match Client::connect(&paths) {
        Ok(c) => c,
        Err(e) => {
            if json_out {
                // Scripts reading --json get a failure object even when the daemon is down.
                let failure = Reply::failure(Code::Offline, e.to_string());
                print(&format!("{}\n", json_line(&failure)))?;
            }
            return Err(e.into());
        }
    };
    let answer: Answer<SendReply> =
        client.request_with_indicator(&req, &format!("sending to {target}"))?;
    match answer {
        Answer::Ok(SendReply { result }) if json_out => print(&format!("{}\n", json_line(&result))),
        Answer::Ok(SendReply { result }) => print(&format!("{}\n", describe_result(&result))),
        Answer::Failed(f) => {
            if json_out {
                print(&format!("{}\n", json_line(&Reply::from(f.clone()))))?;
            }
            Err(CliError::Failed(f.error))
        }
    }
}

fn absolute(cwd: &Path, p: &str) -> String {
    let path = Path::new(p);
    if path.is_absolute() {
        p.to_string()
    } else {
        cwd.join(path).display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_reads_count_what_they_do_not_keep() {
        assert_eq!(read_bounded("héllo".as_bytes()).unwrap(), "héllo");
        // Over the limit but small enough to travel: the daemon refuses it (and logs it).
        let over = "é".repeat(MAX_MESSAGE_CHARS + 1);
        assert_eq!(read_bounded(over.as_bytes()).unwrap(), over);
        let big = "é".repeat(KEEP_BYTES);
        match read_bounded(big.as_bytes()) {
            Err(CliError::Failed(m)) => {
                assert_eq!(
                    m,
                    format!("message exceeds 16000 char limit (got {KEEP_BYTES})")
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(read_bounded(&[0xff, 0xfe][..]), Err(CliError::Failed(m)) if m.contains("UTF-8"))
        );
    }

    #[test]
    fn result_lines() {
        let mut r = SendResult {
            ok: true,
            delivered_to: crate::protocol::DeliveredTo {
                personality: "bob".into(),
                runtime: "echo".into(),
            },
            woke: false,
            ts: None,
            queued: None,
            queued_by: None,
            queue_depth: None,
        };
        assert_eq!(describe_result(&r), "delivered to bob (echo)");
        r.woke = true;
        assert_eq!(describe_result(&r), "delivered to bob (echo), woke");
        r.woke = false;
        r.queued = Some(true);
        r.queued_by = Some(crate::protocol::QueuedBy::Runtime);
        assert_eq!(
            describe_result(&r),
            "queued for bob (echo) behind its running turn"
        );
    }
}

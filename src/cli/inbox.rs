//! `iapeer inbox [peer] [--all] [--follow] [--json]` (issue 8 item 3): show the messages kept
//! for a human peer. Reads the inbox file directly (no daemon needed); what is shown is
//! marked read.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::error::fail;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{paths, print, CliError, CliResult};
use crate::inbox::{self, show, ReadMark, Record};
use crate::paths::Paths;
use crate::registry::former::{self, Fate};
use crate::registry::Registry;

/// How often `--follow` looks at the inbox file again. Short enough to feel immediate to a
/// person, long enough to cost nothing (one `stat` per period).
const FOLLOW_POLL: Duration = Duration::from_millis(300);

/// Run `iapeer inbox`.
pub fn run(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let registry = Registry::load(&paths)?;
    let cwd = std::env::current_dir().map_err(fail)?;
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    let given = inv.positional(args::SOME_PEER);
    if let Some(name) = given.filter(|n| registry.find(n).is_none()) {
        return Err(super::suggest::not_registered(&paths, name));
    }
    let peer = show::pick_peer(
        given,
        std::env::var("PEER_IDENTITY").ok().as_deref(),
        &cwd,
        &registry,
    )?;
    let view = View {
        json: inv.flag(flags::JSON),
        all: inv.flag(flags::INBOX_ALL),
    };
    let file = paths.inbox(&peer);
    let records =
        inbox::read(&file).map_err(|e| fail(format!("cannot read {}: {e}", file.display())))?;
    let mark = ReadMark::load(&paths, &peer);
    let shown = view.print_batch(&peer, &records, 0, mark)?;
    if !view.json && !inv.flag(flags::FOLLOW) {
        print(&view.summary(&peer, &records, mark, shown))?;
    }
    store_mark(&paths, &peer, mark.after_showing(records.len()))?;
    if inv.flag(flags::FOLLOW) {
        follow(&paths, &peer, &view, records.len())?;
    }
    Ok(())
}

/// How records are printed.
struct View {
    json: bool,
    all: bool,
}

impl View {
    /// Print the records from index `from` on that this view shows (unread ones, or all);
    /// returns how many were printed.
    ///
    /// Errors: stdout is closed or cannot be written (`| head`): nothing may be marked read
    /// then, so the caller stops before storing the mark.
    fn print_batch(
        &self,
        _peer: &str,
        records: &[Record],
        from: usize,
        mark: ReadMark,
    ) -> Result<usize, CliError> {
        let tz = jiff::tz::TimeZone::system();
        let today = jiff::Zoned::now().date();
        let mut out = String::new();
        let mut n = 0;
        for (i, r) in records.iter().enumerate().skip(from) {
            let unread = mark.is_unread(i);
            if !unread && !self.all {
                continue;
            }
            n += 1;
            if self.json {
                out.push_str(&show::json(r, unread));
                out.push('\n');
            } else {
                out.push_str(&show::render(r, unread, &tz, today));
            }
        }
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| fail(format!("cannot write the messages ({e}); they stay unread")))?;
        Ok(n)
    }

    /// The closing line of a listing: counts, and how to reply to the newest message.
    fn summary(&self, peer: &str, records: &[Record], mark: ReadMark, shown: usize) -> String {
        let unread = (0..records.len()).filter(|i| mark.is_unread(*i)).count();
        if records.is_empty() {
            return format!("inbox of {peer}: no messages yet\n");
        }
        if shown == 0 {
            return format!(
                "inbox of {peer}: no unread messages ({} in all — iapeer inbox --all shows them)\n",
                records.len()
            );
        }
        let hint = show::reply_hint(peer, records)
            .map(|h| format!("{h}\n"))
            .unwrap_or_default();
        format!(
            "inbox of {peer}: {unread} unread of {}\n{hint}",
            records.len()
        )
    }
}

fn store_mark(paths: &Paths, peer: &str, mark: ReadMark) -> CliResult {
    mark.store(paths, peer).map_err(|e| {
        fail(format!(
            "cannot write the read mark {}: {e}",
            paths.inbox_read_mark(peer).display()
        ))
    })
}

/// `--follow`: print records appended after the first `seen`, each marked read once shown,
/// until SIGINT/SIGTERM (exit 0). A rename of the peer is followed (its inbox moves with
/// it); its removal ends the follow with exit 1.
fn follow(paths: &Paths, peer: &str, view: &View, mut seen: usize) -> CliResult {
    let mut peer = peer.to_string();
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| fail(format!("cannot watch signals: {e}")))?;
    }
    if !view.json {
        eprintln!("waiting for messages to {peer} (Ctrl-C ends)");
    }
    let mut file = paths.inbox(&peer);
    let mut last_len = None;
    while !stop.load(Ordering::SeqCst) {
        let len = std::fs::metadata(&file).map(|m| m.len()).ok();
        if len.is_none() {
            // No file: no message yet, or the name left the registry with its inbox.
            if let Some(now) = renamed_to(paths, &peer)? {
                eprintln!("{peer} was renamed to {now}: following {now}");
                peer = now;
                file = paths.inbox(&peer);
                last_len = None;
                continue;
            }
        }
        if len != last_len {
            last_len = len;
            let records = inbox::read(&file).map_err(fail)?;
            if records.len() > seen {
                let mark = ReadMark::load(paths, &peer);
                view.print_batch(&peer, &records, seen, mark)?;
                seen = records.len();
                store_mark(paths, &peer, mark.after_showing(seen))?;
            }
        }
        std::thread::sleep(FOLLOW_POLL);
    }
    Ok(())
}

/// The followed peer's new name when `peer` was renamed; `None` while it is registered (or
/// the registry cannot be read: keep waiting). Errors: it was removed, or left the registry
/// some other way — nothing more will arrive under this name.
fn renamed_to(paths: &Paths, peer: &str) -> Result<Option<String>, CliError> {
    let Ok(registry) = Registry::load(paths) else {
        return Ok(None);
    };
    if registry.find(peer).is_some() {
        return Ok(None);
    }
    match former::fate_of(paths, &registry, peer) {
        Some(Fate::Renamed { now }) => Ok(Some(now)),
        Some(Fate::Removed) => {
            let aside = set_aside(paths, peer)
                .map(|f| format!("; its messages were set aside as {}", f.display()))
                .unwrap_or_default();
            Err(fail(format!("{peer} was removed while followed{aside}")))
        }
        None => Err(fail(format!(
            "{peer} is no longer in the iapeer peers index; nothing more will arrive for it"
        ))),
    }
}

/// The newest inbox `remove` set aside for `peer` (`<peer>.removed-<ms>.jsonl`), if any.
fn set_aside(paths: &Paths, peer: &str) -> Option<std::path::PathBuf> {
    let prefix = format!("{peer}.removed-");
    std::fs::read_dir(paths.inbox_dir())
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".jsonl"))
        })
        .max()
}

//! `iapeer logs [peer] [--since <dur|time>] [--follow] [--json]` (issue 8 item 4): the event
//! logs merged in time order, one readable line each ([`crate::logview`]). Reads the files
//! directly (no daemon needed).

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::parse::Invocation;
use super::spec::{args, flags};
use super::{paths, print, usage, CliError, CliResult};
use crate::logview::{self, Entry, Source};
use crate::paths::Paths;

/// How often `--follow` looks at the logs again (three `stat`s per period).
const FOLLOW_POLL: Duration = Duration::from_millis(500);
/// Rotated copies read besides the live file: `<log>.1` … `<log>.9` (more than the default
/// five are read when kept).
const MAX_COPIES: u32 = 9;

/// What to keep and how to print it.
struct Filter {
    peer: Option<String>,
    since: Option<jiff::Timestamp>,
    json: bool,
}

impl Filter {
    fn keeps(&self, e: &Entry) -> bool {
        logview::is_shown(e)
            && self.peer.as_deref().is_none_or(|p| logview::mentions(e, p))
            && self.since.is_none_or(|t| logview::is_since(e, t))
    }

    /// Print the entries this filter keeps; returns how many.
    fn print(&self, entries: Vec<Entry>) -> usize {
        let tz = jiff::tz::TimeZone::system();
        let today = jiff::Zoned::now().date();
        let mut out = String::new();
        let mut n = 0;
        for e in logview::merge(entries).iter().filter(|e| self.keeps(e)) {
            n += 1;
            if self.json {
                out.push_str(&logview::json(e));
            } else {
                out.push_str(&logview::render(e, &tz, today));
            }
            out.push('\n');
        }
        let _ = print(&out);
        n
    }
}

/// A log file's text; `None` when it does not exist (yet).
///
/// Errors: it exists but cannot be read (or the root is not a folder), with the path.
fn read_log(path: &std::path::Path) -> Result<Option<String>, CliError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::failed(format!(
            "cannot read the log {}: {e}",
            path.display()
        ))),
    }
}

fn sources(paths: &Paths) -> [(Source, PathBuf); 3] {
    [
        (Source::Lifecycle, paths.lifecycle_log()),
        (Source::Delivery, paths.delivery_log()),
        (Source::Exits, paths.exits_log()),
    ]
}

/// Run `iapeer logs`.
pub fn run(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let tz = jiff::tz::TimeZone::system();
    let since = inv
        .value(flags::SINCE)
        .map(|s| logview::parse_since(s, jiff::Timestamp::now(), &tz))
        .transpose()
        .map_err(|e| usage(inv, e.to_string()))?;
    let peer = inv.positional(args::SOME_PEER).map(str::to_string);
    if let Some(p) = &peer {
        if !crate::names::is_valid_personality(p) {
            return Err(usage(
                inv,
                format!("\"{p}\" is not a peer name (lower-case letters, digits and dashes, starting with a letter)"),
            ));
        }
    }
    let filter = Filter {
        peer,
        since,
        json: inv.flag(flags::JSON),
    };
    let mut entries = Vec::new();
    let mut offsets = Vec::new();
    for (source, path) in sources(&paths) {
        for i in (1..=MAX_COPIES).rev() {
            let copy = PathBuf::from(format!("{}.{i}", path.display()));
            if let Some(text) = read_log(&copy)? {
                entries.extend(logview::parse(&text, source));
            }
        }
        let text = read_log(&path)?.unwrap_or_default();
        offsets.push(text.len() as u64);
        entries.extend(logview::parse(&text, source));
    }
    // A name that is neither registered nor in any log is a mistake, not an empty history
    // (a removed peer's entries stay readable by its name).
    if let Some(p) = &filter.peer {
        let registered = crate::registry::Registry::load(&paths)
            .map(|r| r.find(p).is_some())
            .unwrap_or(false);
        if !registered && !entries.iter().any(|e| logview::mentions(e, p)) {
            return Err(super::suggest::not_registered(&paths, p));
        }
    }
    let shown = filter.print(entries);
    if shown == 0 && !filter.json && !inv.flag(flags::FOLLOW) {
        // Silence would read as a hang or a failure.
        let what = match (&filter.peer, filter.since.is_some()) {
            (Some(p), _) => format!("no log entries for {p}"),
            (None, true) => "no log entries in that time".to_string(),
            (None, false) => "no log entries yet".to_string(),
        };
        eprintln!("{what} (logs are in {})", paths.logs_dir().display());
    }
    if inv.flag(flags::FOLLOW) {
        follow(&paths, &filter, offsets)?;
    }
    Ok(())
}

/// `--follow`: print entries appended to the live files after `offsets`, until
/// SIGINT/SIGTERM (exit 0). A file that shrank was rotated: it is read again from its start.
fn follow(paths: &Paths, filter: &Filter, mut offsets: Vec<u64>) -> CliResult {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| CliError::failed(format!("cannot watch signals: {e}")))?;
    }
    let mut partial: Vec<String> = vec![String::new(); 3];
    while !stop.load(Ordering::SeqCst) {
        let mut fresh = Vec::new();
        for (i, (source, path)) in sources(paths).into_iter().enumerate() {
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if len < offsets[i] {
                offsets[i] = 0;
                partial[i].clear();
            }
            if len == offsets[i] {
                continue;
            }
            let mut buf = Vec::new();
            if let Ok(mut f) = std::fs::File::open(&path) {
                if f.seek(SeekFrom::Start(offsets[i])).is_ok() && f.read_to_end(&mut buf).is_ok() {
                    offsets[i] += buf.len() as u64;
                }
            }
            partial[i].push_str(&String::from_utf8_lossy(&buf));
            // Whole lines only; a line being written is completed on the next poll.
            let whole = partial[i].rfind('\n').map_or(0, |n| n + 1);
            let lines: String = partial[i].drain(..whole).collect();
            fresh.extend(logview::parse(&lines, source));
        }
        if !fresh.is_empty() {
            let _ = filter.print(fresh);
        }
        std::thread::sleep(FOLLOW_POLL);
    }
    Ok(())
}

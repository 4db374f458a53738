//! The spool of undelivered signals (spec 09): one file per signal,
//! `<root>/state/notifier/<personality>/escalation/<id>.json` ([`super::chain::Entry`],
//! pretty JSON), written atomically before the first attempt and after every failed one,
//! removed once a link accepted the signal. `status: "lost"` files stay for the operator.

use std::io;
use std::path::{Path, PathBuf};

use super::chain::{Entry, Status};
use crate::fsutil::{self, MODE_PRIVATE};
use crate::paths::Paths;

/// The spool folder of one service peer.
pub fn dir(paths: &Paths, personality: &str) -> PathBuf {
    paths
        .root()
        .join("state")
        .join("notifier")
        .join(personality)
        .join("escalation")
}

/// A new spool id: milliseconds since the epoch in base 36, a dash, 8 hex digits (the
/// package's shape). The first 4 hex digits count the ids this process made, the last 4 are
/// random, so ids made within one millisecond sort in the order they were made: the service
/// sends a recipient's signals in id order (a watcher's lines, a long line's parts).
pub fn new_id(now_ms: u64) -> String {
    static MADE: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let mut b36 = String::new();
    let mut n = now_ms;
    loop {
        let d = (n % 36) as u32;
        b36.insert(0, char::from_digit(d, 36).unwrap_or('0'));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    let mut rnd = [0u8; 2];
    let _ = getrandom::fill(&mut rnd);
    let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{b36}-{made:04x}{}", fsutil::hex(&rnd))
}

/// Write `entry` to `<dir>/<id>.json` atomically (folder 0700, file 0600).
///
/// Errors: the file cannot be written.
pub fn put(dir: &Path, entry: &Entry) -> io::Result<()> {
    fsutil::ensure_dir(dir)?;
    fsutil::write_json_atomic(&dir.join(format!("{}.json", entry.id)), entry, MODE_PRIVATE)
}

/// Remove the file of signal `id` (a missing file is fine).
///
/// Errors: the file exists and cannot be removed.
pub fn remove(dir: &Path, id: &str) -> io::Result<()> {
    fsutil::remove_if_exists(&dir.join(format!("{id}.json")))
}

/// Delete the spool file of `owner`'s lost signal `id` (what `unregister` does with a lost
/// signal's id). Returns false, touching nothing, when there is no such file, when it is
/// not lost (still on its way), when it is another peer's, or when `id` is not a spool id
/// (lowercase letters, digits and dashes: nothing that names a path elsewhere).
///
/// Errors: the file cannot be read or removed.
pub fn dismiss_lost(dir: &Path, owner: &str, id: &str) -> io::Result<bool> {
    let plain = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !plain {
        return Ok(false);
    }
    let path = dir.join(format!("{id}.json"));
    let Some(text) = fsutil::read_optional(&path)? else {
        return Ok(false);
    };
    let Ok(entry) = serde_json::from_str::<Entry>(&text) else {
        return Ok(false);
    };
    if entry.status != Status::Lost || entry.owner != owner || entry.id != id {
        return Ok(false);
    }
    fsutil::remove_if_exists(&path)?;
    Ok(true)
}

/// Every entry in the folder (pending and lost), oldest first, plus one line per file that
/// could not be read (skipped). A missing folder is empty.
pub fn load(dir: &Path) -> (Vec<Entry>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (out, errors);
    };
    for f in rd.flatten() {
        let p = f.path();
        if p.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        match std::fs::read_to_string(&p)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<Entry>(&t).map_err(|e| e.to_string()))
        {
            Ok(e) => out.push(e),
            Err(e) => errors.push(format!("{}: {e}", p.display())),
        }
    }
    out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    (out, errors)
}

#[cfg(test)]
mod tests {
    use super::super::chain::{build_chain, Kind};
    use super::*;

    /// Ids made within one millisecond sort in the order they were made (the service sends
    /// in id order), and keep the package's shape: base-36 ms, a dash, 8 hex digits.
    #[test]
    fn ids_of_one_millisecond_sort_in_the_order_made() {
        let ids: Vec<String> = (0..50).map(|_| new_id(1_764_567_747_123)).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        // A wrap of the 16-bit count lands between two of them at most once.
        let out_of_order = ids.windows(2).filter(|w| w[0] > w[1]).count();
        assert!(out_of_order <= 1, "{ids:?}");
        if out_of_order == 0 {
            assert_eq!(ids, sorted);
        }
        for id in &ids {
            let (ms, tail) = id.split_once('-').unwrap();
            assert_eq!(ms, "mimq2rlf");
            assert!(
                tail.len() == 8 && tail.bytes().all(|b| b.is_ascii_hexdigit()),
                "{id}"
            );
        }
    }

    #[test]
    fn entries_round_trip_and_bad_files_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("escalation");
        assert_eq!(load(&d).0, vec![]);
        let mut e = Entry {
            v: 1,
            id: new_id(1_764_567_747_123),
            created_at: "2026-12-01T05:42:27.123Z".into(),
            kind: Kind::Forward,
            target: "alice".into(),
            message: "line".into(),
            topic: None,
            owner: "alice".into(),
            chain: build_chain("alice", &[], "alice", ""),
            attempts: vec![],
            status: Status::Pending,
            meta: None,
        };
        assert!(
            e.id.starts_with("mimq2rlf-") && e.id.len() == 17,
            "{}",
            e.id
        );
        put(&d, &e).unwrap();
        e.failed("alice", "T".into(), "x", super::super::chain::RETRY_DELAY);
        put(&d, &e).unwrap();
        std::fs::write(d.join("junk.json"), "{").unwrap();
        let (all, errors) = load(&d);
        assert_eq!(all, vec![e.clone()]);
        assert_eq!(errors.len(), 1);
        let text = std::fs::read_to_string(d.join(format!("{}.json", e.id))).unwrap();
        assert!(text.starts_with("{\n  \"v\": 1,") && text.ends_with("}\n"));
        let mode = crate::testkit::mode_of(d.join(format!("{}.json", e.id)));
        assert_eq!(mode, 0o600);
        remove(&d, &e.id).unwrap();
        remove(&d, &e.id).unwrap();
        assert!(load(&d).0.is_empty());
    }

    #[test]
    fn only_the_owner_dismisses_a_lost_signal_and_only_a_lost_one() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("escalation");
        let entry = |id: &str, status: Status| Entry {
            v: 1,
            id: id.into(),
            created_at: "2026-12-01T05:42:27.123Z".into(),
            kind: Kind::Fire,
            target: "ghost".into(),
            message: "m".into(),
            topic: None,
            owner: "alice".into(),
            chain: build_chain("ghost", &[], "alice", ""),
            attempts: vec![],
            status,
            meta: None,
        };
        put(&d, &entry("mio0a1b3-5e6f7a8b", Status::Lost)).unwrap();
        put(&d, &entry("mio0a1b4-00000000", Status::Pending)).unwrap();
        assert!(
            !dismiss_lost(&d, "bob", "mio0a1b3-5e6f7a8b").unwrap(),
            "not bob's"
        );
        assert!(
            !dismiss_lost(&d, "alice", "mio0a1b4-00000000").unwrap(),
            "on its way"
        );
        assert!(!dismiss_lost(&d, "alice", "../escalation/mio0a1b3-5e6f7a8b").unwrap());
        assert!(!dismiss_lost(&d, "alice", "nope").unwrap());
        assert_eq!(load(&d).0.len(), 2);
        assert!(dismiss_lost(&d, "alice", "mio0a1b3-5e6f7a8b").unwrap());
        assert!(
            !dismiss_lost(&d, "alice", "mio0a1b3-5e6f7a8b").unwrap(),
            "gone"
        );
        assert_eq!(
            load(&d).0,
            vec![entry("mio0a1b4-00000000", Status::Pending)]
        );
    }
}

//! Tell the event stream when the team changes (issue 30 item 5): the CLI's `create`, `init`,
//! `rename`, `remove`, `add-runtime`, `describe`… write the registry without the daemon, so a
//! thread reads the registry file every [`INTERVAL`] and, when the peers in it differ from
//! the last look, logs `ev=peers` to `lifecycle.log` (and so the event stream): `added`,
//! `removed` and `changed` (comma-separated names; each only when not empty). The operator's
//! page refetches its list on it, within a second instead of at its 15 s poll.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::router::{RouterMsg, RouterTx};
use crate::eventlog::Event;
use crate::paths::Paths;
use crate::registry::Registry;

/// How often the registry file's metadata is looked at.
pub const INTERVAL: Duration = Duration::from_millis(500);

/// The peers as the page shows them: name → what of the peer a row shows (runtimes, default,
/// nature, description, folder), as one comparable text.
pub type Team = BTreeMap<String, String>;

/// The team of `registry`.
pub fn team(registry: &Registry) -> Team {
    registry
        .peers
        .iter()
        .map(|p| {
            let shown = serde_json::json!([
                p.runtimes,
                p.default_runtime,
                p.intelligence,
                p.description,
                p.cwd,
            ]);
            (p.personality.clone(), shown.to_string())
        })
        .collect()
}

/// The `ev=peers` event from `before` to `after`, or `None` when no peer changed. Pure.
pub fn change(before: &Team, after: &Team) -> Option<Event> {
    let names = |pick: &dyn Fn(&String) -> bool, of: &Team| -> Vec<String> {
        of.keys().filter(|n| pick(n)).cloned().collect()
    };
    let added = names(&|n| !before.contains_key(n), after);
    let removed = names(&|n| !after.contains_key(n), before);
    let changed = names(&|n| before.get(n).is_some_and(|b| after[n] != *b), after);
    if added.is_empty() && removed.is_empty() && changed.is_empty() {
        return None;
    }
    let list = |v: Vec<String>| (!v.is_empty()).then(|| v.join(","));
    Some(
        Event::new("peers")
            .opt("added", list(added))
            .opt("removed", list(removed))
            .opt("changed", list(changed)),
    )
}

/// Start the watching thread: each change goes to the router as [`RouterMsg::Lifecycle`]. It
/// ends when `stop` is raised or the router is gone.
///
/// Errors: the thread cannot be started.
pub fn spawn(paths: Paths, router: RouterTx, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    let file = paths.registry();
    // The file's text, compared whole (a small file): its metadata can look the same across
    // two quick atomic writes (a reused inode, a coarse modification time).
    let read = move || std::fs::read(&file).unwrap_or_default();
    let mut seen = read();
    let mut known = Registry::load(&paths).map(|r| team(&r)).unwrap_or_default();
    std::thread::Builder::new()
        .name("peers-watch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(INTERVAL);
                let text = read();
                if text == seen {
                    continue;
                }
                // A file being replaced reads as before or after, never half (atomic
                // writes); one that does not parse is looked at again next time.
                let Ok(registry) = Registry::load(&paths) else {
                    continue;
                };
                seen = text;
                let team = team(&registry);
                if let Some(ev) = change(&known, &team) {
                    if router.send(RouterMsg::Lifecycle(ev)).is_err() {
                        return;
                    }
                }
                known = team;
            }
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pairs: &[(&str, &str)]) -> Team {
        pairs
            .iter()
            .map(|(n, s)| (n.to_string(), s.to_string()))
            .collect()
    }

    fn line(ev: Option<Event>) -> String {
        crate::eventlog::format_line("t", &ev.expect("an event"))
    }

    #[test]
    fn a_created_renamed_or_changed_peer_is_one_event() {
        let before = t(&[("alice", "a"), ("bob", "b")]);
        assert!(change(&before, &before).is_none());
        let after = t(&[("alice", "a"), ("bob", "b"), ("carol", "c")]);
        assert_eq!(line(change(&before, &after)), "ts=t ev=peers added=carol");
        // A rename: the old name goes, the new one comes.
        let after = t(&[("alice", "a"), ("robert", "b")]);
        assert_eq!(
            line(change(&before, &after)),
            "ts=t ev=peers added=robert removed=bob"
        );
        let after = t(&[("alice", "a2"), ("bob", "b")]);
        assert_eq!(line(change(&before, &after)), "ts=t ev=peers changed=alice");
    }
}

//! What became of peer names that are no longer registered. `rename` and `remove` note each
//! name they free in `<root>/state/iapeer/former-names.json` (under the registry's lock, in
//! the same step as the registry), so that a send to an old name can say where the peer went
//! instead of only "not in the index", and `iapeer inbox --follow` can follow a human
//! through a rename.
//!
//! File shape (ours; the original tool has no such file):
//! `{"version": 1, "names": [{"name": "bob", "renamed_to": "robert", "at_ms": 1764745200000},
//! {"name": "carl", "at_ms": …}]}` — an entry without `renamed_to` is a removal. One entry
//! per name (the newest), at most [`KEEP`], oldest dropped first. A missing or unreadable file
//! reads as empty: the notes only ever add a hint.

use std::io;

use serde::{Deserialize, Serialize};

use crate::paths::Paths;

/// How many freed names are remembered.
pub const KEEP: usize = 64;

/// One freed name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormerName {
    /// The name as it was registered.
    pub name: String,
    /// The name the peer took (`rename`); `None` when it was removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_to: Option<String>,
    /// When, in Unix milliseconds.
    pub at_ms: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Book {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    names: Vec<FormerName>,
}

/// What became of a name that is not registered now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// The peer lives on under `now` (after one rename or several).
    Renamed { now: String },
    /// The peer was removed (possibly after renames).
    Removed,
}

impl Fate {
    /// The clause a refusal adds after `peer "<name>" is not …`: ` — it was renamed to
    /// "robert"` or ` — it was removed`.
    pub fn clause(&self) -> String {
        match self {
            Fate::Renamed { now } => format!(" — it was renamed to \"{now}\""),
            Fate::Removed => " — it was removed".into(),
        }
    }
}

fn file(paths: &Paths) -> std::path::PathBuf {
    paths.state_dir().join("former-names.json")
}

/// The remembered names, oldest first (empty when there is no readable file).
pub fn load(paths: &Paths) -> Vec<FormerName> {
    crate::fsutil::read_json_or_default::<Book>(&file(paths)).names
}

/// Note that `name` was freed at `at_ms`: renamed to `renamed_to`, or removed (`None`).
/// Call it while holding the registry's lock (inside `Registry::update`), so two notes never
/// race. Errors: the state folder or the file cannot be written.
pub fn note(paths: &Paths, name: &str, renamed_to: Option<&str>, at_ms: u64) -> io::Result<()> {
    let text = noted_text(paths, name, renamed_to, at_ms)?;
    // A state file (spec 01 §1: 0600); missing folders are made 0700.
    crate::fsutil::write_atomic(&file(paths), text.as_bytes(), crate::fsutil::MODE_PRIVATE)
}

/// The text [`note`] would write, without writing it (`rename` stages it, so the note and the
/// registry change together).
///
/// Errors: none in practice (serializing the notes).
pub fn noted_text(
    paths: &Paths,
    name: &str,
    renamed_to: Option<&str>,
    at_ms: u64,
) -> io::Result<String> {
    let mut names = load(paths);
    names.retain(|n| n.name != name);
    names.push(FormerName {
        name: name.to_string(),
        renamed_to: renamed_to.map(str::to_string),
        at_ms,
    });
    let drop = names.len().saturating_sub(KEEP);
    names.drain(..drop);
    let mut text =
        serde_json::to_string_pretty(&Book { version: 1, names }).map_err(io::Error::other)?;
    text.push('\n');
    Ok(text)
}

/// The notes file, `<root>/state/iapeer/former-names.json`.
pub fn path(paths: &Paths) -> std::path::PathBuf {
    file(paths)
}

/// What became of `name` (pure): follow its renames, each later than the one before, to a
/// name `registered` knows (`Renamed`) or to a removal (`Removed`). `None` when `name` is
/// registered, was never noted, or its trail ends at a name that is neither registered nor
/// noted later (the registry was edited by hand).
pub fn fate(names: &[FormerName], name: &str, registered: impl Fn(&str) -> bool) -> Option<Fate> {
    if registered(name) {
        return None;
    }
    let mut current = name;
    let mut since = 0;
    // Each step moves to a strictly newer entry, so the walk ends within `names.len()` steps.
    for _ in 0..=names.len() {
        let entry = names
            .iter()
            .rev()
            .find(|n| n.name == current && n.at_ms >= since)?;
        match &entry.renamed_to {
            None => return Some(Fate::Removed),
            Some(to) if registered(to) => return Some(Fate::Renamed { now: to.clone() }),
            Some(to) => {
                current = to;
                since = entry.at_ms + 1;
            }
        }
    }
    None
}

/// [`fate`] of `name` over the noted names of `paths` and `registry`.
pub fn fate_of(paths: &Paths, registry: &crate::registry::Registry, name: &str) -> Option<Fate> {
    fate(&load(paths), name, |n| registry.find(n).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamed(name: &str, to: &str, at_ms: u64) -> FormerName {
        FormerName {
            name: name.into(),
            renamed_to: Some(to.into()),
            at_ms,
        }
    }

    fn removed(name: &str, at_ms: u64) -> FormerName {
        FormerName {
            name: name.into(),
            renamed_to: None,
            at_ms,
        }
    }

    #[test]
    fn a_trail_of_renames_leads_to_the_registered_name_or_a_removal() {
        let names = vec![
            renamed("bob", "robert", 10),
            renamed("robert", "rob", 20),
            removed("carl", 5),
            renamed("dan", "dave", 30),
            removed("dave", 40),
        ];
        let registered = |n: &str| ["rob", "ann"].contains(&n);
        let now = |n: &str| Some(Fate::Renamed { now: n.into() });
        assert_eq!(fate(&names, "bob", registered), now("rob"));
        assert_eq!(fate(&names, "robert", registered), now("rob"));
        assert_eq!(fate(&names, "carl", registered), Some(Fate::Removed));
        assert_eq!(fate(&names, "dan", registered), Some(Fate::Removed));
        assert_eq!(fate(&names, "ann", registered), None, "registered");
        assert_eq!(fate(&names, "zed", registered), None, "never noted");
    }

    #[test]
    fn an_older_note_of_the_next_name_is_another_peer_and_loops_end() {
        // "robert" was removed before bob took that name; bob-as-robert then vanished from
        // the registry without a note: nothing can be said.
        let names = vec![removed("robert", 5), renamed("bob", "robert", 10)];
        assert_eq!(fate(&names, "bob", |_| false), None);
        // a → b → a (both noted, neither registered now, the newer note wins for a).
        let names = vec![renamed("a", "b", 1), renamed("b", "a", 2)];
        assert_eq!(fate(&names, "a", |_| false), None);
        assert_eq!(fate(&names, "b", |_| false), None);
    }

    #[test]
    fn notes_keep_one_entry_per_name_and_the_newest_keep() {
        let (_dir, paths) = crate::testkit::temp_root();
        assert!(load(&paths).is_empty(), "no file reads as empty");
        note(&paths, "bob", Some("robert"), 1).unwrap();
        // A state file, its user's alone, in folders made private.
        use crate::testkit::mode_of as mode;
        assert_eq!(mode(file(&paths)), 0o600);
        assert_eq!(mode(paths.state_dir()), 0o700);
        note(&paths, "bob", None, 2).unwrap();
        assert_eq!(load(&paths), vec![removed("bob", 2)]);
        for i in 0..(KEEP as u64 + 5) {
            note(&paths, &format!("p{i}"), None, 10 + i).unwrap();
        }
        let names = load(&paths);
        assert_eq!(names.len(), KEEP);
        assert_eq!(names[0].name, "p5", "the oldest were dropped");
        std::fs::write(file(&paths), "{not json").unwrap();
        assert!(load(&paths).is_empty(), "an unreadable file reads as empty");
        note(&paths, "x", Some("y"), 3).unwrap();
        assert_eq!(load(&paths), vec![renamed("x", "y", 3)]);
    }
}

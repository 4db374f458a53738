//! Reading and writing triggers in the owners' profiles (spec 09 "Storage"): the set of all
//! triggers of one role is rebuilt from every registered peer's
//! `<cwd>/.iapeer/peer-profile.json`; a register or unregister edits only the caller's own
//! profile, read-merge-write ([`crate::profile::Profile::update`]) so every other key, and
//! every entry this build cannot read, is kept as it was.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::trigger::{self, Role, Stopped, Trigger};
use super::when::WhenError;
use crate::paths::Paths;
use crate::profile::ProfileError;
use crate::registry::Registry;

/// Why a profile's trigger list could not be read or written. `Display` names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A profile could not be read.
    #[error("{path}: cannot be read: {source}")]
    Read {
        /// The profile file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A profile is JSON but not an object.
    #[error("{0}: not a JSON object")]
    NotObject(PathBuf),
    /// A profile is not JSON.
    #[error("{path}: not JSON: {source}")]
    NotJson {
        /// The profile file.
        path: PathBuf,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The folder or file of the profiles lock could not be made, opened or locked.
    #[error("{path}: {source}")]
    Lock {
        /// The folder or lock file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The profile could not be updated.
    #[error("{0}")]
    Profile(#[from] ProfileError),
    /// A value could not be turned into JSON.
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
}

/// The triggers of `role` in every registered profile, and one line per entry or file
/// skipped (malformed trigger, unreadable profile).
pub fn load_all(
    paths: &Paths,
    role: Role,
    check_when: &dyn Fn(&str) -> Result<(), WhenError>,
) -> (Vec<Trigger>, Vec<String>) {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let registry = match Registry::load(paths) {
        Ok(r) => r,
        Err(e) => return (out, vec![format!("the registry cannot be read: {e}")]),
    };
    for peer in &registry.peers {
        match read_raw(&peer.cwd) {
            Ok(None) => {}
            Ok(Some(map)) => {
                let (ok, errs) = trigger::from_profile(&map, &peer.personality, check_when);
                out.extend(ok.into_iter().filter(|t| t.role() == role));
                errors.extend(errs);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    (out, errors)
}

/// The folder of registered peer `personality`.
pub fn cwd_of(paths: &Paths, personality: &str) -> Option<PathBuf> {
    Registry::load(paths)
        .ok()?
        .find(personality)
        .map(|p| p.cwd.clone())
}

/// Those of `names` that are not registered peers, in order (none when the registry cannot
/// be read: nothing can be said then).
pub fn unregistered<'a>(paths: &Paths, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let Ok(registry) = Registry::load(paths) else {
        return Vec::new();
    };
    names
        .into_iter()
        .filter(|n| registry.find(n).is_none())
        .collect()
}

/// True when `personality` is registered with `wake_policy: "ephemeral"` (a reply would
/// start a new worker). Unknown or unreadable = false.
pub fn is_ephemeral(paths: &Paths, personality: &str) -> bool {
    cwd_of(paths, personality)
        .and_then(|cwd| crate::profile::Profile::read(&cwd).ok().flatten())
        .is_some_and(|p| p.is_ephemeral())
}

fn read_raw(cwd: &Path) -> Result<Option<Map<String, Value>>, StoreError> {
    let path = crate::paths::peer::profile(cwd);
    let text = match crate::fsutil::read_optional(&path) {
        Ok(text) => text,
        Err(source) => return Err(StoreError::Read { path, source }),
    };
    let Some(text) = text else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(StoreError::NotObject(path)),
        Err(source) => Err(StoreError::NotJson { path, source }),
    }
}

/// The id an entry of a profile list has (its `id`, else its content id), when readable.
fn entry_id(entry: &Value, owner: &str) -> Option<(String, Role)> {
    let t = trigger::parse_entry(entry, owner, &|_| Ok(())).ok()?;
    Some((t.id.clone(), t.role()))
}

/// Run `f` holding the exclusive lock on `<root>/state/notifier/profiles.lock` that every
/// writer of trigger lists holds, so the `timer` and `watcher` processes (and `rename`) never
/// interleave their edits of one profile. Do not take it again inside `f` (it would wait for
/// itself).
///
/// Errors: [`StoreError::Lock`], the lock file cannot be opened or locked.
pub fn with_profiles_lock<R>(paths: &Paths, f: impl FnOnce() -> R) -> Result<R, StoreError> {
    use fs2::FileExt;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = paths.root().join("state").join("notifier");
    if let Err(source) = crate::fsutil::ensure_dir(&dir) {
        return Err(StoreError::Lock { path: dir, source });
    }
    let lock_path = dir.join("profiles.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        // Its user's alone: another user who could open it could hold the lock for ever.
        .mode(crate::fsutil::MODE_PRIVATE)
        .open(&lock_path)
        .map_err(|source| StoreError::Lock {
            path: lock_path.clone(),
            source,
        })?;
    lock.lock_exclusive().map_err(|source| StoreError::Lock {
        path: lock_path.clone(),
        source,
    })?;
    Ok(f())
}

/// Edit the trigger list of the profile in `cwd` with `edit` (read-merge-write), under
/// [`with_profiles_lock`].
fn edit_list<R>(
    paths: &Paths,
    cwd: &Path,
    edit: impl FnOnce(&mut Vec<Value>) -> R,
) -> Result<R, StoreError> {
    with_profiles_lock(paths, || edit_list_locked(cwd, edit))?
}

fn edit_list_locked<R>(
    cwd: &Path,
    edit: impl FnOnce(&mut Vec<Value>) -> R,
) -> Result<R, StoreError> {
    let mut result = None;
    crate::profile::Profile::update(cwd, |p| {
        let notifier = p
            .extra
            .entry("notifier")
            .or_insert_with(|| Value::Object(Map::new()));
        if !notifier.is_object() {
            *notifier = Value::Object(Map::new());
        }
        let obj = notifier.as_object_mut().expect("an object");
        let list = obj
            .entry("triggers")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !list.is_array() {
            *list = Value::Array(Vec::new());
        }
        result = Some(edit(list.as_array_mut().expect("an array")));
    })?;
    Ok(result.expect("the edit ran"))
}

/// Store `t` in its owner's profile at `cwd`, replacing an entry with the same id. Returns
/// true when one was replaced.
///
/// Errors: the profile cannot be read or written (text names it).
pub fn upsert(paths: &Paths, cwd: &Path, t: &Trigger) -> Result<bool, StoreError> {
    let value = serde_json::to_value(t).map_err(StoreError::Encode)?;
    edit_list(paths, cwd, |list| {
        let at = list
            .iter()
            .position(|e| entry_id(e, &t.owner).is_some_and(|(id, _)| id == t.id));
        match at {
            Some(i) => {
                list[i] = value;
                true
            }
            None => {
                list.push(value);
                false
            }
        }
    })
}

/// Remove `owner`'s trigger `id` of `role` from the profile at `cwd`. Returns false when
/// there was none (an entry of the other role with that id is left alone).
///
/// Errors: the profile cannot be read or written.
pub fn remove(
    paths: &Paths,
    cwd: &Path,
    owner: &str,
    role: Role,
    id: &str,
) -> Result<bool, StoreError> {
    edit_list(paths, cwd, |list| {
        let before = list.len();
        list.retain(|e| entry_id(e, owner) != Some((id.to_string(), role)));
        list.len() != before
    })
}

/// After `rename <old> <new>`: every trigger in `extra` (a profile's keys beyond the known
/// ones, [`crate::profile::Profile::extra`]) that names `old` — as its target, a fallback, or
/// a stored owner — names `new` instead (the renamed peer's own triggers, and other peers'
/// triggers aimed at it). True when one named `old`.
pub fn rename_in(extra: &mut Map<String, Value>, old: &str, new: &str) -> bool {
    let Some(list) = extra
        .get_mut("notifier")
        .and_then(|n| n.get_mut("triggers"))
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    // Every entry is visited (no short cut): each one naming `old` is renamed.
    list.iter_mut()
        .map(|e| rename_entry(e, old, new))
        .filter(|hit| *hit)
        .count()
        > 0
}

/// Rename `old` to `new` in one stored trigger (`target`, `owner`, `fallback`: one name or
/// a list); true when it named `old`.
fn rename_entry(entry: &mut Value, old: &str, new: &str) -> bool {
    let Some(obj) = entry.as_object_mut() else {
        return false;
    };
    let mut hit = false;
    let mut swap = |v: &mut Value| {
        if v.as_str() == Some(old) {
            *v = Value::String(new.to_string());
            hit = true;
        }
    };
    for key in ["target", "owner"] {
        if let Some(v) = obj.get_mut(key) {
            swap(v);
        }
    }
    match obj.get_mut("fallback") {
        Some(Value::Array(items)) => items.iter_mut().for_each(&mut swap),
        Some(one) => swap(one),
        None => {}
    }
    hit
}

/// Mark watcher `t` stopped for good in its owner's profile at `cwd`: the entry that still
/// reads as `t` (same id, script and every other field) gets `stopped` (spec 09 "stop it for
/// good": the mark outlives the process, so no restart runs it again), every other key of it
/// kept. Returns false when no such entry is there any more (removed or replaced meanwhile).
///
/// Errors: the profile cannot be read or written.
pub fn mark_stopped(
    paths: &Paths,
    cwd: &Path,
    t: &Trigger,
    stopped: &Stopped,
) -> Result<bool, StoreError> {
    let mark = serde_json::to_value(stopped).map_err(StoreError::Encode)?;
    edit_list(paths, cwd, |list| {
        let same = |e: &Value| {
            trigger::parse_entry(e, &t.owner, &|_| Ok(())).is_ok_and(|mut found| {
                found.stopped = t.stopped.clone();
                found == *t
            })
        };
        match list
            .iter_mut()
            .find(|e| same(e))
            .and_then(Value::as_object_mut)
        {
            Some(entry) => {
                entry.insert("stopped".into(), mark);
                true
            }
            None => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A root in a fresh temp folder and the folder of peer `name` there holding `profile`
    /// as its profile (both gone when the returned folder is dropped).
    fn peer_with(name: &str, profile: &Value) -> (tempfile::TempDir, Paths, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let paths = Paths::at(dir.join("root"));
        let cwd = dir.join(name);
        std::fs::create_dir_all(crate::paths::peer::profile(&cwd).parent().unwrap()).unwrap();
        std::fs::write(crate::paths::peer::profile(&cwd), profile.to_string()).unwrap();
        (tmp, paths, cwd)
    }

    #[test]
    fn upsert_replaces_by_id_and_remove_keeps_everything_else() {
        let (_dir, paths, cwd) = peer_with(
            "alice",
            &json!({"personality":"alice","runtimes":["echo"],"default_runtime":"echo",
                   "zeta":{"kept":1},
                   "notifier":{"other":"kept","triggers":[
                       {"role":"event","id":"w","script":"x","target":"alice"},
                       "not a trigger"]}}),
        );
        let t = |msg: &str| {
            trigger::parse_entry(
                &json!({"role":"time","id":"t1","when":"@every 1m","message":msg,"target":"alice"}),
                "alice",
                &|_| Ok(()),
            )
            .unwrap()
        };
        assert!(!upsert(&paths, &cwd, &t("one")).unwrap(), "added");
        assert!(upsert(&paths, &cwd, &t("two")).unwrap(), "replaced");
        assert!(
            !remove(&paths, &cwd, "alice", Role::Time, "w").unwrap(),
            "w is a watcher trigger: not removed by the timer"
        );
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(crate::paths::peer::profile(&cwd)).unwrap(),
        )
        .unwrap();
        assert_eq!(v["zeta"], json!({"kept":1}));
        assert_eq!(v["notifier"]["other"], "kept");
        let list = v["notifier"]["triggers"].as_array().unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[1], "not a trigger");
        assert_eq!(list[2]["message"], "two");
        assert!(remove(&paths, &cwd, "alice", Role::Time, "t1").unwrap());
        assert!(!remove(&paths, &cwd, "alice", Role::Time, "t1").unwrap());
    }

    #[test]
    fn a_rename_follows_into_every_trigger_naming_the_old_name() {
        let extra = |triggers: Value| -> Map<String, Value> {
            match json!({"zeta": 1.0, "notifier": {"triggers": triggers}}) {
                Value::Object(m) => m,
                _ => unreachable!(),
            }
        };
        let mut kai = extra(
            json!([{"role":"time","id":"tk","when":"@every 2s","message":"tick",
                    "owner":"kay","target":"kay","fallback":["kay","ann"]}]),
        );
        assert!(rename_in(&mut kai, "kay", "kai"));
        let k = &kai["notifier"]["triggers"][0];
        assert_eq!(k["owner"], "kai");
        assert_eq!(k["target"], "kai");
        assert_eq!(k["fallback"], json!(["kai", "ann"]));
        let mut ann = extra(
            json!([{"role":"event","id":"w","script":"x","owner":"ann","target":"kay",
                    "fallback":"kay"},
                   {"role":"event","id":"v","script":"y","owner":"ann","target":"ann"}]),
        );
        assert!(rename_in(&mut ann, "kay", "kai"));
        let a = &ann["notifier"]["triggers"];
        assert_eq!(a[0]["target"], "kai");
        assert_eq!(a[0]["fallback"], "kai");
        assert_eq!(a[1]["target"], "ann", "a trigger not naming kay is kept");
        let bob = extra(json!([{"role":"event","id":"z","script":"x","target":"bob"}]));
        let mut after = bob.clone();
        assert!(!rename_in(&mut after, "kay", "kai"));
        assert_eq!(after, bob, "nothing to rename: nothing changed");
        assert!(!rename_in(&mut Map::new(), "kay", "kai"));
    }

    #[test]
    fn a_stop_mark_is_added_to_the_same_watcher_only_and_a_new_registration_clears_it() {
        let (_dir, paths, cwd) = peer_with(
            "op",
            &json!({"personality":"op","runtimes":["human"],"default_runtime":"human",
                   "notifier":{"triggers":[
                       {"role":"event","id":"bad","owner":"op","target":"op","script":"exit 7",
                        "futureKey":1}]}}),
        );
        let read = || -> Value {
            serde_json::from_str(
                &std::fs::read_to_string(crate::paths::peer::profile(&cwd)).unwrap(),
            )
            .unwrap()
        };
        let t = |script: &str| {
            trigger::parse_entry(
                &json!({"role":"event","id":"bad","script":script,"target":"op"}),
                "op",
                &|_| Ok(()),
            )
            .unwrap()
        };
        let mark = Stopped {
            at: "2026-12-01T05:42:27.123Z".into(),
            last: "exit status 7".into(),
        };
        assert!(
            !mark_stopped(&paths, &cwd, &t("exit 8"), &mark).unwrap(),
            "another script under that id is not the one that failed"
        );
        assert!(mark_stopped(&paths, &cwd, &t("exit 7"), &mark).unwrap());
        let entry = read()["notifier"]["triggers"][0].clone();
        assert_eq!(entry["stopped"]["last"], "exit status 7");
        assert_eq!(entry["futureKey"], 1, "the entry's other keys are kept");
        let (all, _) = load_in(&cwd);
        assert_eq!(all[0].stopped, Some(mark));
        // Registering it again stores it without the mark.
        assert!(upsert(&paths, &cwd, &t("exit 7")).unwrap());
        assert!(read()["notifier"]["triggers"][0].get("stopped").is_none());
    }

    /// The triggers of the profile in `cwd`.
    fn load_in(cwd: &Path) -> (Vec<Trigger>, Vec<String>) {
        let map = read_raw(cwd).unwrap().unwrap();
        trigger::from_profile(&map, "op", &|_| Ok(()))
    }
}

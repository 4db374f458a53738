//! A runtime installed from a folder (`iapeer install-runtime <dir>`, issue 27 item 3): the
//! folder holds its `runtime.json` (a `terminal` agent's, or a router runtime written by
//! hand) and whatever its program needs. The manifest is read and checked first; only a
//! valid one is copied, whole, to `<root>/runtimes/<rt>/`, through a staging folder renamed
//! into place, so a bad manifest installs nothing and a reader never sees half a runtime.

use std::path::{Path, PathBuf};

use super::manifest::Manifest;
use super::RuntimeError;
use crate::fsutil::IoError;
use crate::paths::Paths;

/// The manifest's file name in a runtime folder.
pub const MANIFEST_FILE: &str = "runtime.json";

/// The file in an installed runtime's folder that names the folder it was installed from
/// (its absolute path, one line), for `update-runtime`.
pub const FROM_FILE: &str = ".iapeer-installed-from";

/// Whether the `install-runtime` argument names a folder rather than a runtime: it has a `/`
/// (`./parrot`, `/opt/parrot`) or is `.` or `..`.
pub fn is_folder_arg(arg: &str) -> bool {
    arg.contains('/') || arg == "." || arg == ".."
}

/// Why a folder could not be installed as a runtime. `Display` says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// The folder has no `runtime.json`.
    #[error("{0} holds no runtime.json — a runtime folder holds its manifest (docs/RUNTIMES.md has an example)")]
    NoManifest(PathBuf),
    /// The runtime's name is not a runtime name.
    #[error("{path}: the runtime's name {name:?} is not a runtime name — set \"runtime\" to a lower-case letter then up to 31 letters or digits")]
    BadName {
        /// The manifest.
        path: PathBuf,
        /// The name it gives (or the folder's).
        name: String,
    },
    /// The name is a built-in runtime's.
    #[error("{path}: \"{name}\" is a built-in runtime — give yours another name in \"runtime\"")]
    BuiltIn {
        /// The manifest.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// The manifest is not valid.
    #[error("{0} — fix it and run install-runtime again; nothing was installed")]
    Invalid(RuntimeError),
    /// A file could not be read, copied or moved.
    #[error("{0} — nothing was installed")]
    Io(IoError),
}

/// Read and check the manifest in `dir`: the runtime's name (its `runtime`, else the
/// folder's name) and the manifest.
///
/// Errors: [`FolderError`], no manifest, a bad or built-in name, an invalid manifest.
pub fn read(dir: &Path) -> Result<(String, Manifest), FolderError> {
    let path = dir.join(MANIFEST_FILE);
    let text = match crate::fsutil::read_optional(&path) {
        Ok(Some(t)) => t,
        Ok(None) => return Err(FolderError::NoManifest(dir.to_path_buf())),
        Err(e) => return Err(FolderError::Io(IoError::at("read", &path)(e))),
    };
    let bad = |why: String| FolderError::Invalid(RuntimeError::BadManifest(path.clone(), why));
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let folder_name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let name = value["runtime"]
        .as_str()
        .map_or(folder_name, str::to_string);
    if !crate::names::is_valid_runtime(&name) {
        return Err(FolderError::BadName { path, name });
    }
    if crate::runtime_table::get(&name).is_some() {
        return Err(FolderError::BuiltIn { path, name });
    }
    let manifest = Manifest::parse(&text, &name).map_err(|e| bad(e.to_string()))?;
    Ok((name, manifest))
}

/// Copy `from` (files and folders; other entries skipped) into the new folder `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<(), IoError> {
    std::fs::create_dir(to).map_err(IoError::at("create", to))?;
    for entry in std::fs::read_dir(from).map_err(IoError::at("read", from))? {
        let entry = entry.map_err(IoError::at("read", from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = std::fs::metadata(&src).map_err(IoError::at("read", &src))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).map_err(IoError::at("copy", &src))?;
        }
    }
    Ok(())
}

/// Install the runtime `name` from `dir` (already [`read`]): its folder copied to a staging
/// folder beside `<root>/runtimes/<name>`, then renamed into place; a runtime of that name
/// installed before is replaced whole. On any failure the staging folder is removed and the
/// runtime installed before (if any) stays as it was.
///
/// Errors: [`FolderError::Io`], a file could not be copied or a folder moved.
pub fn install(paths: &Paths, name: &str, dir: &Path) -> Result<(), FolderError> {
    let runtimes = paths.runtimes_dir();
    crate::fsutil::ensure_dir(&runtimes)
        .map_err(|e| FolderError::Io(IoError::at("create", &runtimes)(e)))?;
    let staging = crate::fsutil::temp_path(&runtimes, &format!(".{name}.install-"));
    let target = runtimes.join(name);
    let from = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let done = copy_tree(dir, &staging)
        .and_then(|()| {
            let file = staging.join(FROM_FILE);
            std::fs::write(&file, format!("{}\n", from.display()))
                .map_err(IoError::at("write", &file))
        })
        .and_then(|()| swap_in(&staging, &target));
    if done.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    done.map_err(FolderError::Io)
}

/// The folder the runtime `name` was installed from by [`install`], when it was installed
/// from a folder (`None`: from a package, by hand, or before this was recorded).
pub fn installed_from(paths: &Paths, name: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(paths.runtimes_dir().join(name).join(FROM_FILE)).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| PathBuf::from(line))
}

/// The files (paths relative to `dir`, [`FROM_FILE`] left out) under `dir` with their bytes;
/// empty for a folder that cannot be read.
fn files_of(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(m) if m.is_file() => {
                    let rel = p.strip_prefix(dir).unwrap_or(&p).to_path_buf();
                    if rel != Path::new(FROM_FILE) {
                        out.insert(rel, std::fs::read(&p).unwrap_or_default());
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// What installing `from` over the installed folder `installed` would change, a line per
/// file (`added x`, `changed x`, `removed x`), in path order; empty when nothing would.
pub fn changes(installed: &Path, from: &Path) -> Vec<String> {
    let (old, new) = (files_of(installed), files_of(from));
    let mut out = Vec::new();
    for (path, bytes) in &new {
        match old.get(path) {
            None => out.push(format!("added {}", path.display())),
            Some(b) if b != bytes => out.push(format!("changed {}", path.display())),
            Some(_) => {}
        }
    }
    for path in old.keys().filter(|p| !new.contains_key(*p)) {
        out.push(format!("removed {}", path.display()));
    }
    out.sort_by(|a, b| {
        a.split_once(' ')
            .map(|x| x.1)
            .cmp(&b.split_once(' ').map(|x| x.1))
    });
    out
}

/// Put `staging` at `target`, moving a folder there aside first and removing it after.
fn swap_in(staging: &Path, target: &Path) -> Result<(), IoError> {
    let old = target.exists().then(|| {
        let name = crate::fsutil::file_name(target);
        crate::fsutil::temp_path(target.parent().unwrap_or(target), &format!(".{name}.old-"))
    });
    if let Some(old) = &old {
        std::fs::rename(target, old).map_err(IoError::at("move aside", target))?;
    }
    if let Err(e) = std::fs::rename(staging, target) {
        if let Some(old) = &old {
            let _ = std::fs::rename(old, target);
        }
        return Err(IoError::at("move into place", staging)(e));
    }
    if let Some(old) = old {
        let _ = std::fs::remove_dir_all(old);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"runtime":"parrot","kind":"terminal","terminal":{"command":"{dir}/parrot.py","ready":"^> ","busy":"^working"}}"#;

    #[test]
    fn a_good_folder_is_installed_whole_and_a_bad_one_not_at_all() {
        let (_root, paths) = Paths::temp();
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join(MANIFEST_FILE), GOOD).unwrap();
        std::fs::create_dir(src.path().join("lib")).unwrap();
        std::fs::write(src.path().join("lib/x.py"), "x").unwrap();
        let (name, m) = read(src.path()).unwrap();
        assert_eq!(name, "parrot");
        assert!(m.terminal.is_some());
        install(&paths, &name, src.path()).unwrap();
        let dir = paths.runtimes_dir().join("parrot");
        assert_eq!(std::fs::read_to_string(dir.join("lib/x.py")).unwrap(), "x");
        assert_eq!(
            installed_from(&paths, "parrot"),
            Some(src.path().canonicalize().unwrap())
        );
        assert!(changes(&dir, src.path()).is_empty());
        std::fs::write(src.path().join("lib/x.py"), "y").unwrap();
        std::fs::write(src.path().join("new.py"), "n").unwrap();
        assert_eq!(
            changes(&dir, src.path()),
            ["changed lib/x.py", "added new.py"]
        );
        std::fs::write(src.path().join("lib/x.py"), "x").unwrap();
        std::fs::remove_file(src.path().join("new.py")).unwrap();
        assert!(crate::runtime::is_installed(&paths, "parrot"));

        // A bad manifest: refused with the reason, the installed one untouched.
        std::fs::write(
            src.path().join(MANIFEST_FILE),
            GOOD.replace("^working", "(working"),
        )
        .unwrap();
        let err = read(src.path()).unwrap_err().to_string();
        assert!(
            err.contains("\"busy\" is not a regular expression"),
            "{err}"
        );
        assert!(err.contains("nothing was installed"), "{err}");
        assert_eq!(
            std::fs::read_to_string(paths.runtime_manifest("parrot")).unwrap(),
            GOOD
        );
        let leftovers: Vec<_> = std::fs::read_dir(paths.runtimes_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("parrot")]);

        for (text, want) in [
            (
                r#"{"runtime":"claude","kind":"terminal"}"#,
                "is a built-in runtime",
            ),
            (r#"{"runtime":"Bad Name"}"#, "is not a runtime name"),
            (
                r#"{"runtime":"parrot","kind":"terminal"}"#,
                "there is no \"terminal\" section",
            ),
            (
                r#"{"runtime":"parrot","kind":"tui"}"#,
                "\"kind\" is \"tui\"",
            ),
            (
                r#"{"runtime":"parrot","terminal":{}}"#,
                "no \"kind\": \"terminal\"",
            ),
            ("{nope", "is not a valid runtime manifest"),
        ] {
            std::fs::write(src.path().join(MANIFEST_FILE), text).unwrap();
            let err = read(src.path()).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
        std::fs::remove_file(src.path().join(MANIFEST_FILE)).unwrap();
        assert!(read(src.path())
            .unwrap_err()
            .to_string()
            .contains("holds no runtime.json"));
        assert!(is_folder_arg("./parrot") && is_folder_arg(".") && !is_folder_arg("parrot"));
    }
}

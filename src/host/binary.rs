//! The files `scripts/install.sh` puts outside the root (spec 08 §1), and the binary swaps of
//! `update` and `rollback`: the new binary is copied to a temp name in the bin folder and
//! renamed over `iapeer`, the old one kept as `iapeer.prev` (one level of rollback).
//!
//! A binary made by `scripts/release.sh` keeps its debug info (file and line for a panic's
//! backtrace) in a file beside it, `iapeer-<id>.debug`, named in its `.gnu_debuglink` section
//! ([`debuglink`]; README "Release binary"). The swaps carry that file: it is put in the bin
//! folder (under its own name, so `iapeer.prev` keeps reading its own) before the binary is
//! renamed over `iapeer`, and debug files neither `iapeer` nor `iapeer.prev` names are removed
//! afterwards.
//!
//! [`Layout`] must name the same places as `scripts/install.sh` (the uninstall test installs
//! with the script and checks that uninstall leaves the tree as it was).

use std::io;
use std::path::{Path, PathBuf};

use super::HostError;
use crate::fsutil;

/// Where install put each file, from `HOME`, `IAPEER_BIN_DIR`, `XDG_DATA_HOME` and
/// `XDG_CONFIG_HOME` (the script's defaults when unset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `$IAPEER_BIN_DIR` (default `~/.local/bin`).
    pub bin_dir: PathBuf,
    /// `$XDG_DATA_HOME` (default `~/.local/share`).
    pub data: PathBuf,
    /// `$XDG_CONFIG_HOME` (default `~/.config`).
    pub config: PathBuf,
}

impl Layout {
    /// The layout for `home` and the variables' values (`None` or empty: unset).
    pub fn new(
        home: &Path,
        bin_dir: Option<&str>,
        data: Option<&str>,
        config: Option<&str>,
    ) -> Layout {
        let pick = |v: Option<&str>, default: PathBuf| {
            v.filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or(default)
        };
        Layout {
            bin_dir: pick(bin_dir, home.join(".local").join("bin")),
            data: pick(data, home.join(".local").join("share")),
            config: pick(config, home.join(".config")),
        }
    }

    /// The layout of this process's environment.
    ///
    /// Errors: `HOME` is unset.
    pub fn from_env() -> Result<Layout, HostError> {
        let home =
            std::env::var("HOME")
                .ok()
                .filter(|h| !h.is_empty())
                .ok_or(HostError::NoHome {
                    rerun_install: false,
                })?;
        Ok(Layout::new(
            Path::new(&home),
            std::env::var("IAPEER_BIN_DIR").ok().as_deref(),
            std::env::var("XDG_DATA_HOME").ok().as_deref(),
            std::env::var("XDG_CONFIG_HOME").ok().as_deref(),
        ))
    }

    /// The installed binary, `<bin_dir>/iapeer`.
    pub fn bin(&self) -> PathBuf {
        self.bin_dir.join("iapeer")
    }

    /// The previous binary, `<bin_dir>/iapeer.prev`.
    pub fn prev(&self) -> PathBuf {
        self.bin_dir.join("iapeer.prev")
    }

    /// The man page and the completion scripts, with the `--generate` word that makes each.
    pub fn generated(&self) -> Vec<(PathBuf, &'static str)> {
        vec![
            (self.data.join("man/man1/iapeer.1"), "man"),
            (
                self.data.join("bash-completion/completions/iapeer"),
                "completions-bash",
            ),
            (
                self.data.join("zsh/site-functions/_iapeer"),
                "completions-zsh",
            ),
            (
                self.config.join("fish/completions/iapeer.fish"),
                "completions-fish",
            ),
        ]
    }

    /// Every file install may have put outside the root: binary, previous binary, the debug
    /// files in the bin folder ([`Layout::debug_files`]), man page, completions (the service
    /// file is the service module's).
    pub fn files(&self) -> Vec<PathBuf> {
        let mut out = vec![self.bin(), self.prev()];
        out.extend(self.debug_files());
        out.extend(self.generated().into_iter().map(|(p, _)| p));
        out
    }

    /// The debug files in the bin folder: `iapeer-<id>.debug` ([`is_debug_file_name`]) and
    /// the files `iapeer` and `iapeer.prev` name in their `.gnu_debuglink`, sorted; empty when
    /// the folder cannot be read.
    pub fn debug_files(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(&self.bin_dir)
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| is_debug_file_name(n))
                    .map(|n| self.bin_dir.join(n))
                    .collect()
            })
            .unwrap_or_default();
        for bin in [self.bin(), self.prev()] {
            if let Some(name) = debuglink_of(&bin) {
                out.push(self.bin_dir.join(name));
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// Whether `name` has the shape of the debug files `scripts/release.sh` makes:
/// `iapeer-<id>.debug`.
pub fn is_debug_file_name(name: &str) -> bool {
    name.strip_prefix("iapeer-")
        .and_then(|rest| rest.strip_suffix(".debug"))
        .is_some_and(|id| !id.is_empty())
}

/// The file name an ELF binary's `.gnu_debuglink` section names (its separate debug info,
/// looked up beside the binary), when it has one and it is a plain file name (no folder, not
/// `.` or `..`). `None` for anything else, an unsplit or non-ELF binary included.
pub fn debuglink(binary: &[u8]) -> Option<String> {
    use object::Object;
    let file = object::File::parse(binary).ok()?;
    let (name, _crc) = file.gnu_debuglink().ok()??;
    let name = std::str::from_utf8(name).ok()?;
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains('/');
    plain.then(|| name.to_string())
}

/// [`debuglink`] of the file at `path` (`None` when it cannot be read).
fn debuglink_of(path: &Path) -> Option<String> {
    debuglink(&std::fs::read(path).ok()?)
}

/// A temp name beside `target` (same folder, so a rename is atomic).
fn temp_beside(target: &Path) -> PathBuf {
    let name = crate::fsutil::file_name(target);
    target.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Install `src` as `layout.bin()`: the current binary becomes `iapeer.prev` (replacing an
/// older one), then a copy of `src` (mode 0755) is renamed over `iapeer`. At every moment
/// `iapeer` is a whole binary.
///
/// Errors: I/O, with the path.
pub fn replace(layout: &Layout, src: &Path) -> Result<(), HostError> {
    let dest = layout.bin();
    let prev = layout.prev();
    let err = |p: &Path, e: io::Error| HostError::io("write", p)(e);
    fsutil::ensure_dir(&layout.bin_dir).map_err(|e| err(&layout.bin_dir, e))?;
    let bytes = std::fs::read(src).map_err(HostError::io("read", src))?;
    // The debug file first, so that `iapeer` never names a file that is not there.
    if let Some(name) = debuglink(&bytes) {
        let to = layout.bin_dir.join(&name);
        if !to.exists() {
            let from = src.with_file_name(&name);
            let debug = std::fs::read(&from).map_err(|source| HostError::NoDebugFile {
                binary: src.to_path_buf(),
                debug: from.clone(),
                source,
            })?;
            fsutil::write_atomic(&to, &debug, 0o644).map_err(|e| err(&to, e))?;
        }
    }
    if dest.exists() {
        // A hard link of the current binary, renamed over iapeer.prev.
        let tmp = temp_beside(&prev);
        let _ = std::fs::remove_file(&tmp);
        if std::fs::hard_link(&dest, &tmp).is_err() {
            std::fs::copy(&dest, &tmp).map_err(|e| err(&tmp, e))?;
        }
        std::fs::rename(&tmp, &prev).map_err(|e| err(&prev, e))?;
    }
    fsutil::write_atomic(&dest, &bytes, 0o755).map_err(|e| err(&dest, e))?;
    remove_unnamed_debug_files(layout);
    Ok(())
}

/// Remove the `iapeer-<id>.debug` files in the bin folder that neither `iapeer` nor
/// `iapeer.prev` names (an older build's). Best effort: a file that cannot be removed stays.
fn remove_unnamed_debug_files(layout: &Layout) {
    let named: Vec<String> = [layout.bin(), layout.prev()]
        .iter()
        .filter_map(|b| debuglink_of(b))
        .collect();
    for f in layout.debug_files() {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if is_debug_file_name(&name) && !named.contains(&name) {
            let _ = std::fs::remove_file(&f);
        }
    }
}

/// Put `iapeer.prev` back as `iapeer` (one rename; `iapeer.prev` is gone afterwards).
///
/// Errors: no `iapeer.prev`, or I/O.
pub fn restore_prev(layout: &Layout) -> Result<(), HostError> {
    let prev = layout.prev();
    if !prev.exists() {
        return Err(HostError::NoPrevious(prev));
    }
    std::fs::rename(&prev, layout.bin())
        .map_err(|source| HostError::MoveBack { path: prev, source })?;
    remove_unnamed_debug_files(layout);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_follows_the_variables_and_the_scripts_defaults() {
        let l = Layout::new(Path::new("/h"), None, Some(""), None);
        assert_eq!(l.bin(), PathBuf::from("/h/.local/bin/iapeer"));
        assert_eq!(l.prev(), PathBuf::from("/h/.local/bin/iapeer.prev"));
        let files: Vec<String> = l.files().iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            files,
            [
                "/h/.local/bin/iapeer",
                "/h/.local/bin/iapeer.prev",
                "/h/.local/share/man/man1/iapeer.1",
                "/h/.local/share/bash-completion/completions/iapeer",
                "/h/.local/share/zsh/site-functions/_iapeer",
                "/h/.config/fish/completions/iapeer.fish",
            ]
        );
        let l = Layout::new(Path::new("/h"), Some("/opt/b"), Some("/d"), Some("/c"));
        assert_eq!(l.bin(), PathBuf::from("/opt/b/iapeer"));
        assert_eq!(l.generated()[0].0, PathBuf::from("/d/man/man1/iapeer.1"));
        assert_eq!(
            l.generated()[3].0,
            PathBuf::from("/c/fish/completions/iapeer.fish")
        );
    }

    #[test]
    fn replace_keeps_one_previous_binary_and_restore_puts_it_back() {
        let tmp = tempfile::tempdir().unwrap();
        let l = Layout::new(
            tmp.path(),
            Some(tmp.path().join("bin").to_str().unwrap()),
            None,
            None,
        );
        let (a, b, c) = (
            tmp.path().join("a"),
            tmp.path().join("b"),
            tmp.path().join("c"),
        );
        for (p, t) in [(&a, "A"), (&b, "B"), (&c, "C")] {
            std::fs::write(p, t).unwrap();
        }
        replace(&l, &a).unwrap();
        assert!(!l.prev().exists());
        replace(&l, &b).unwrap();
        replace(&l, &c).unwrap();
        assert_eq!(std::fs::read_to_string(l.bin()).unwrap(), "C");
        assert_eq!(std::fs::read_to_string(l.prev()).unwrap(), "B");
        let mode = crate::testkit::mode_of(l.bin());
        assert_eq!(mode, 0o755);
        restore_prev(&l).unwrap();
        assert_eq!(std::fs::read_to_string(l.bin()).unwrap(), "B");
        assert!(restore_prev(&l)
            .unwrap_err()
            .to_string()
            .contains("no previous binary"));
        let names: Vec<_> = std::fs::read_dir(&l.bin_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["iapeer"], "temp files left");
    }

    /// A small real ELF binary (a copy of the system's `true`) split the way
    /// `scripts/release.sh` splits: `<dir>/<id>/iapeer` naming `iapeer-<id>.debug` beside it
    /// (binutils' `objcopy --add-gnu-debuglink`, which reads that file for its CRC).
    #[cfg(target_os = "linux")]
    fn split_build(dir: &Path, id: &str) -> PathBuf {
        let true_bin = ["/usr/bin/true", "/bin/true"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists())
            .expect("no true binary to copy");
        let out = dir.join(id);
        std::fs::create_dir_all(&out).unwrap();
        let bin = out.join("iapeer");
        std::fs::copy(true_bin, &bin).unwrap();
        let debug = out.join(format!("iapeer-{id}.debug"));
        std::fs::write(&debug, format!("debug info of build {id}")).unwrap();
        // A distribution's `true` may name its own debug file already.
        for arg in [
            "--remove-section=.gnu_debuglink".to_string(),
            format!("--add-gnu-debuglink={}", debug.display()),
        ] {
            let status = std::process::Command::new("objcopy")
                .arg(arg)
                .arg(&bin)
                .status()
                .expect("objcopy (binutils) runs");
            assert!(status.success());
        }
        bin
    }

    #[cfg(target_os = "linux")]
    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_debug_file_name_comes_from_the_binarys_debuglink() {
        assert!(is_debug_file_name("iapeer-0123abcd.debug"));
        for n in [
            "iapeer.debug",
            "iapeer-.debug",
            "other-01.debug",
            "iapeer-01.dwp",
        ] {
            assert!(!is_debug_file_name(n), "{n}");
        }
        assert_eq!(debuglink(b"not an ELF file"), None);
        #[cfg(target_os = "linux")]
        {
            let tmp = tempfile::tempdir().unwrap();
            let bin = split_build(tmp.path(), "0123abcd");
            let bytes = std::fs::read(&bin).unwrap();
            assert_eq!(debuglink(&bytes).as_deref(), Some("iapeer-0123abcd.debug"));
            let unsplit = std::fs::read("/proc/self/exe").unwrap();
            assert_eq!(debuglink(&unsplit), None);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn replace_and_restore_carry_each_binarys_debug_file() {
        let tmp = tempfile::tempdir().unwrap();
        let bin_dir = tmp.path().join("bin");
        let l = Layout::new(tmp.path(), Some(bin_dir.to_str().unwrap()), None, None);
        let (a, b, c) = (
            split_build(tmp.path(), "aaaa"),
            split_build(tmp.path(), "bbbb"),
            split_build(tmp.path(), "cccc"),
        );
        replace(&l, &a).unwrap();
        assert_eq!(names_in(&bin_dir), ["iapeer", "iapeer-aaaa.debug"]);
        assert_eq!(
            std::fs::read_to_string(bin_dir.join("iapeer-aaaa.debug")).unwrap(),
            "debug info of build aaaa"
        );
        replace(&l, &b).unwrap();
        assert_eq!(
            names_in(&bin_dir),
            [
                "iapeer",
                "iapeer-aaaa.debug",
                "iapeer-bbbb.debug",
                "iapeer.prev"
            ]
        );
        // The third build pushes the first out: its debug file goes with it.
        replace(&l, &c).unwrap();
        assert_eq!(
            names_in(&bin_dir),
            [
                "iapeer",
                "iapeer-bbbb.debug",
                "iapeer-cccc.debug",
                "iapeer.prev"
            ]
        );
        assert_eq!(
            l.files()[..4],
            [
                l.bin(),
                l.prev(),
                bin_dir.join("iapeer-bbbb.debug"),
                bin_dir.join("iapeer-cccc.debug")
            ]
        );
        // Back to the second build: the third one's debug file is nobody's now.
        restore_prev(&l).unwrap();
        assert_eq!(names_in(&bin_dir), ["iapeer", "iapeer-bbbb.debug"]);
        assert_eq!(
            debuglink(&std::fs::read(l.bin()).unwrap()).as_deref(),
            Some("iapeer-bbbb.debug")
        );

        // A binary whose debug file is not beside it is refused, and nothing changes.
        let d = split_build(tmp.path(), "dddd");
        std::fs::remove_file(d.with_file_name("iapeer-dddd.debug")).unwrap();
        let e = replace(&l, &d).unwrap_err().to_string();
        assert!(
            e.contains("keeps its debug info") && e.contains("iapeer-dddd.debug"),
            "{e}"
        );
        assert_eq!(names_in(&bin_dir), ["iapeer", "iapeer-bbbb.debug"]);
    }
}

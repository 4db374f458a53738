//! The files `scripts/install.sh` puts outside the root (spec 08 §1), and the binary swaps of
//! `update` and `rollback`: the new binary is copied to a temp name in the bin folder and
//! renamed over `iapeer`, the old one kept as `iapeer.prev` (one level of rollback).
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

    /// Every file install may have put outside the root: binary, previous binary, man page,
    /// completions (the service file is the service module's).
    pub fn files(&self) -> Vec<PathBuf> {
        let mut out = vec![self.bin(), self.prev()];
        out.extend(self.generated().into_iter().map(|(p, _)| p));
        out
    }
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
    if dest.exists() {
        // A hard link of the current binary, renamed over iapeer.prev.
        let tmp = temp_beside(&prev);
        let _ = std::fs::remove_file(&tmp);
        if std::fs::hard_link(&dest, &tmp).is_err() {
            std::fs::copy(&dest, &tmp).map_err(|e| err(&tmp, e))?;
        }
        std::fs::rename(&tmp, &prev).map_err(|e| err(&prev, e))?;
    }
    let bytes = std::fs::read(src).map_err(HostError::io("read", src))?;
    fsutil::write_atomic(&dest, &bytes, 0o755).map_err(|e| err(&dest, e))
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
        .map_err(|source| HostError::MoveBack { path: prev, source })
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
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(l.bin()).unwrap().permissions().mode() & 0o777;
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
}

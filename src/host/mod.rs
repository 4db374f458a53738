//! Host integration (spec 08 §1): the reference docs embedded in the binary, the service
//! definitions for systemd and launchd, and `iapeer install`, which lays them down.

use std::path::{Path, PathBuf};

/// Why a host step (install, binary replacement) failed. `Display` is a sentence naming the
/// path and, where there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `HOME` is unset or empty; `rerun_install` adds "and run `iapeer install` again".
    NoHome {
        /// Whether the sentence ends with running `iapeer install` again.
        rerun_install: bool,
    },
    /// The running binary's path cannot be found.
    CurrentExe(#[source] std::io::Error),
    /// A file or folder could not be created, written or read.
    Io(#[source] crate::fsutil::IoError),
    /// The reference docs could not be written into their folder.
    Docs {
        /// The docs folder.
        dir: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// There is no previous binary (its path).
    NoPrevious(PathBuf),
    /// A binary names a debug file (`.gnu_debuglink`) that is not readable beside it.
    NoDebugFile {
        /// The binary.
        binary: PathBuf,
        /// The debug file it names, beside it.
        debug: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The previous binary could not be moved back.
    MoveBack {
        /// The previous binary.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostError::NoHome { rerun_install } => write!(
                f,
                "HOME is not set: set it to your home folder{}",
                if *rerun_install {
                    " and run `iapeer install` again"
                } else {
                    ""
                }
            ),
            HostError::CurrentExe(e) => {
                write!(f, "cannot find the path of the running iapeer binary: {e}")
            }
            HostError::Io(e) => write!(f, "{e}"),
            HostError::Docs { dir, source } => write!(
                f,
                "cannot write the reference docs in {}: {source}",
                dir.display()
            ),
            HostError::NoPrevious(prev) => write!(
                f,
                "there is no previous binary to go back to ({} does not exist)",
                prev.display()
            ),
            HostError::NoDebugFile {
                binary,
                debug,
                source,
            } => write!(
                f,
                "{} keeps its debug info (file and line in backtraces) in {}, which cannot be read ({source}): put that file beside the binary, or make both again with scripts/release.sh",
                binary.display(),
                debug.display()
            ),
            HostError::MoveBack { path, source } => {
                write!(f, "cannot move {} back: {source}", path.display())
            }
        }
    }
}

impl HostError {
    /// `cannot <action> <path>: <error>`, for `map_err`.
    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let at = crate::fsutil::IoError::at(action, path);
        move |e| HostError::Io(at(e))
    }
}

pub mod binary;
pub mod control;
pub mod docs;
pub mod gemini_login;
pub mod install;
pub mod login;
pub mod login_memo;
pub mod service;

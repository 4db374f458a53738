//! Why a peer could not be created or initialized.

use std::fmt;

use std::path::PathBuf;

use crate::names::{self, Intelligence};
use crate::profile::{ProfileError, DESCRIPTION_MAX_CHARS};
use crate::registry::RegistryError;
use crate::runtime::{RuntimeError, SetupError};

/// Why [`create_peer`](super::create_peer) or [`init_peer`](super::init_peer) refused or
/// failed. `Display` gives the one-line message the CLI prints after `iapeer <verb>: `.
#[derive(Debug)]
pub enum PeerError {
    /// The name does not match the personality pattern (spec 01 §3).
    InvalidName(String),
    /// No folder name normalizes to the requested name.
    NameNotReachable {
        /// The requested name.
        name: String,
        /// What a folder of that name gives.
        canonical: String,
    },
    /// The chosen folder's name gives another peer name.
    FolderGivesOtherName {
        /// The folder's last component.
        base: String,
        /// The name it gives.
        derived: String,
        /// The requested name.
        name: String,
    },
    /// `create`: another folder is registered under this name.
    NameTaken {
        /// The name.
        name: String,
        /// That peer's folder.
        at: PathBuf,
    },
    /// `init`: the folder's name is registered for another folder.
    FolderNameTaken {
        /// The name the folder gives.
        name: String,
        /// The registered peer's folder.
        at: PathBuf,
    },
    /// The folder's profile names another personality.
    HoldsOtherPeer {
        /// The folder.
        folder: PathBuf,
        /// The personality written in its profile.
        written: String,
    },
    /// The path to initialize is not a folder.
    NotAFolder(PathBuf),
    /// A runtime name that does not match the runtime pattern.
    InvalidRuntime(String),
    /// The runtime is unknown, not installed or has a bad manifest.
    Runtime(RuntimeError),
    /// No runtime was requested and no agent runtime is installed.
    NoAgentRuntime,
    /// An intelligence other than `artificial`, `natural` or `absent`.
    UnknownIntelligence(String),
    /// The intelligence cannot run on the runtime (spec 01 §4).
    IntelligenceNotAllowed {
        /// The intelligence.
        nature: Intelligence,
        /// The runtime.
        runtime: String,
    },
    /// The description is not one line of at most [`DESCRIPTION_MAX_CHARS`] characters.
    BadDescription,
    /// A file or folder could not be created, written or moved.
    Io(crate::fsutil::IoError),
    /// A runtime's setup failed (`runtime::setup_peer`, naming the file).
    Setup(SetupError),
    /// The profile could not be read or written.
    Profile(ProfileError),
    /// The registry could not be read or written.
    Registry(RegistryError),
    /// `rename`: no peer of that name is registered.
    NotRegistered(String),
    /// `rename`: the peer would move onto something that exists, or a move failed (the text
    /// says what, what was rolled back and what to do).
    Rename(String),
    /// A worktree peer (`create --worktree`, and `remove`/`rename` of one): the repository
    /// cannot be used, the folder has work that would be lost, or git refused (the text
    /// quotes git and says what to do).
    Worktree(String),
}

impl From<ProfileError> for PeerError {
    fn from(e: ProfileError) -> PeerError {
        PeerError::Profile(e)
    }
}

impl From<RegistryError> for PeerError {
    fn from(e: RegistryError) -> PeerError {
        PeerError::Registry(e)
    }
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerError::InvalidName(name) => write!(
                f,
                "invalid name \"{name}\" — {}{}",
                names::PERSONALITY_RULE,
                suggest_normalized(name)
            ),
            PeerError::NameNotReachable { name, canonical } => write!(
                f,
                "no folder can be named so that it gives \"{name}\" (a folder \"{name}\" gives \"{canonical}\") — choose {canonical}"
            ),
            PeerError::FolderGivesOtherName { base, derived, name } => write!(
                f,
                "the folder name \"{base}\" gives the peer name \"{derived}\", not \"{name}\" — a peer is named after its folder: choose a folder named {name}"
            ),
            PeerError::NameTaken { name, at } => write!(
                f,
                "peer \"{name}\" already exists at {} — two peers can never share a name",
                at.display()
            ),
            PeerError::FolderNameTaken { name, at } => write!(
                f,
                "peer \"{name}\" already exists at {} — two peers can never share a name; rename this folder",
                at.display()
            ),
            PeerError::HoldsOtherPeer { folder, written } => write!(
                f,
                "{} already holds the profile of peer \"{written}\" — a peer is named after its folder; move that peer with iapeer rename, or init another folder",
                folder.display()
            ),
            PeerError::NotAFolder(path) => write!(f, "{} is not a folder", path.display()),
            PeerError::NotRegistered(name) => write!(
                f,
                "peer \"{name}\" is not registered — see iapeer list for the peers there are"
            ),
            PeerError::Rename(why) | PeerError::Worktree(why) => write!(f, "{why}"),
            PeerError::InvalidRuntime(rt) => write!(
                f,
                "invalid runtime \"{rt}\" — {}",
                names::RUNTIME_RULE
            ),
            PeerError::Runtime(e) => write!(f, "{e}"),
            PeerError::NoAgentRuntime => f.write_str(
                "no agent runtime is installed (claude or codex) — install one, or pass --runtime echo for the built-in demo stand-in",
            ),
            PeerError::UnknownIntelligence(i) => write!(
                f,
                "unknown intelligence \"{i}\" — use artificial, natural or absent"
            ),
            PeerError::IntelligenceNotAllowed { nature, runtime } => {
                write!(
                    f,
                    "a peer of intelligence {nature} cannot run on {runtime} — all runtimes of \
                     a peer share one intelligence (agent runtimes artificial, human channels \
                     natural or absent, notifier absent): give the other kind its own peer"
                )
            }
            PeerError::BadDescription => write!(
                f,
                "--description must be one line of at most {DESCRIPTION_MAX_CHARS} characters"
            ),
            PeerError::Io(e) => write!(f, "{e}"),
            PeerError::Setup(e) => e.fmt(f),
            PeerError::Profile(e) => write!(f, "{e}"),
            PeerError::Registry(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PeerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PeerError::Runtime(e) => Some(e),
            PeerError::Io(e) => Some(&e.source),
            PeerError::Profile(e) => Some(e),
            PeerError::Registry(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::fsutil::IoError> for PeerError {
    fn from(e: crate::fsutil::IoError) -> Self {
        PeerError::Io(e)
    }
}

/// ` (for example "<normalized>")` when normalizing `name` gives a valid name, else nothing.
fn suggest_normalized(name: &str) -> String {
    let n = names::normalize(name);
    if names::is_valid_personality(&n) && n != name {
        format!(" (for example \"{n}\")")
    } else {
        String::new()
    }
}

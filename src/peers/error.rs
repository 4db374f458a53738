//! Why a peer could not be created or initialized.

use std::path::PathBuf;

use crate::names::{self, Intelligence};
use crate::profile::{ProfileError, DESCRIPTION_MAX_CHARS};
use crate::registry::RegistryError;
use crate::runtime::{RuntimeError, SetupError};

/// Why [`create_peer`](super::create_peer) or [`init_peer`](super::init_peer) refused or
/// failed. `Display` gives the one-line message the CLI prints after `iapeer <verb>: `.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The name does not match the personality pattern (spec 01 §3).
    #[error(
        "invalid name \"{0}\" — {rule}{suggest}",
        rule = names::PERSONALITY_RULE,
        suggest = suggest_normalized(.0)
    )]
    InvalidName(String),
    /// No folder name normalizes to the requested name.
    #[error(
        "no folder can be named so that it gives \"{name}\" (a folder \"{name}\" gives \"{canonical}\") — choose {canonical}"
    )]
    NameNotReachable {
        /// The requested name.
        name: String,
        /// What a folder of that name gives.
        canonical: String,
    },
    /// The chosen folder's name gives another peer name.
    #[error(
        "the folder name \"{base}\" gives the peer name \"{derived}\", not \"{name}\" — a peer is named after its folder: choose a folder named {name}"
    )]
    FolderGivesOtherName {
        /// The folder's last component.
        base: String,
        /// The name it gives.
        derived: String,
        /// The requested name.
        name: String,
    },
    /// `create`: another folder is registered under this name.
    #[error("peer \"{name}\" already exists at {at} — two peers can never share a name")]
    NameTaken {
        /// The name.
        name: String,
        /// That peer's folder.
        at: PathBuf,
    },
    /// `init`: the folder's name is registered for another folder.
    #[error(
        "peer \"{name}\" already exists at {at} — two peers can never share a name; rename this folder"
    )]
    FolderNameTaken {
        /// The name the folder gives.
        name: String,
        /// The registered peer's folder.
        at: PathBuf,
    },
    /// The folder's profile names another personality.
    #[error(
        "{folder} already holds the profile of peer \"{written}\" — a peer is named after its folder; move that peer with iapeer rename, or init another folder"
    )]
    HoldsOtherPeer {
        /// The folder.
        folder: PathBuf,
        /// The personality written in its profile.
        written: String,
    },
    /// The path to initialize is not a folder.
    #[error("{0} is not a folder")]
    NotAFolder(PathBuf),
    /// A runtime name that does not match the runtime pattern.
    #[error("invalid runtime \"{0}\" — {rule}", rule = names::RUNTIME_RULE)]
    InvalidRuntime(String),
    /// The runtime is unknown, not installed or has a bad manifest.
    #[error("{0}")]
    Runtime(#[source] RuntimeError),
    /// No runtime was requested and no agent runtime is installed.
    #[error(
        "no agent runtime is installed ({}) — install one, or pass --runtime echo for the built-in demo stand-in",
        agent_runtime_names()
    )]
    NoAgentRuntime,
    /// An intelligence other than `artificial`, `natural` or `absent`.
    #[error("unknown intelligence \"{0}\" — use artificial, natural or absent")]
    UnknownIntelligence(String),
    /// The intelligence cannot run on the runtime (spec 01 §4).
    #[error(
        "a peer of intelligence {nature} cannot run on {runtime} — all runtimes of \
         a peer share one intelligence (agent runtimes artificial, human channels \
         natural or absent, notifier absent): give the other kind its own peer"
    )]
    IntelligenceNotAllowed {
        /// The intelligence.
        nature: Intelligence,
        /// The runtime.
        runtime: String,
    },
    /// The description is not one line of at most [`DESCRIPTION_MAX_CHARS`] characters.
    #[error("--description must be one line of at most {DESCRIPTION_MAX_CHARS} characters")]
    BadDescription,
    /// A file or folder could not be created, written or moved.
    #[error(transparent)]
    Io(#[from] crate::fsutil::IoError),
    /// A runtime's setup failed (`runtime::setup_peer`, naming the file).
    #[error("{0}")]
    Setup(SetupError),
    /// The profile could not be read or written.
    #[error("{0}")]
    Profile(#[from] ProfileError),
    /// The registry could not be read or written.
    #[error("{0}")]
    Registry(#[from] RegistryError),
    /// `rename`: no peer of that name is registered.
    #[error("peer \"{0}\" is not registered — see iapeer list for the peers there are")]
    NotRegistered(String),
    /// `rename`: the peer would move onto something that exists, or a move failed (the text
    /// says what, what was rolled back and what to do).
    #[error("{0}")]
    Rename(String),
    /// A worktree peer (`create --worktree`, and `remove`/`rename` of one): the repository
    /// cannot be used, the folder has work that would be lost, or git refused (the text
    /// quotes git and says what to do).
    #[error("{0}")]
    Worktree(String),
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

/// The agent runtimes whose program is looked for, in preference order, as one list for a
/// sentence: `claude, codex, gemini or opencode` (the table's [`crate::runtime_table::located`]).
fn agent_runtime_names() -> String {
    let names: Vec<&str> = crate::runtime_table::located().map(|r| r.name).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((only, _)) => (*only).to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod no_agent_runtime_tests {
    use super::PeerError;

    #[test]
    fn no_agent_runtime_names_every_agent_cli_looked_for() {
        // It named claude or codex only after Gemini CLI and OpenCode became agent runtimes.
        assert_eq!(
            PeerError::NoAgentRuntime.to_string(),
            "no agent runtime is installed (claude, codex, gemini or opencode) — install one, \
             or pass --runtime echo for the built-in demo stand-in"
        );
    }
}

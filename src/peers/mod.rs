//! Peer creation (spec 07 "Peers" `create` and `init`; the on-disk results are spec 01): the
//! domain logic behind those verbs, free of any CLI, so that the CLI and a future fleet API
//! call the same functions and get the same typed [`PeerError`]s.
//!
//! A peer is born in its folder: profile (`.iapeer/peer-profile.json`), doctrine stub,
//! `launch.env` stubs, each runtime's setup (`runtime::setup_peer`), then the registry entry.

mod create;
mod error;
mod runtime_choice;

use std::path::{Path, PathBuf};

use crate::paths::peer;

pub use create::{
    check_name, create_peer, init_peer, write_launch_env_stub, InitOptions, Initialized,
};
pub use error::PeerError;
pub use runtime_choice::{choose_runtime, installed_agents};

/// Where a removed peer's profile is kept (the folder is kept; [`init_peer`] in that folder
/// restores it): `<folder>/.iapeer/peer-profile.removed.json`.
pub fn removed_profile(folder: &Path) -> PathBuf {
    peer::dir(folder).join("peer-profile.removed.json")
}

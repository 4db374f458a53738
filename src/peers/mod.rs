//! Peer creation (spec 07 "Peers" `create` and `init`; the on-disk results are spec 01): the
//! domain logic behind those verbs, free of any CLI, so that the CLI and a future fleet API
//! call the same functions and get the same typed [`PeerError`]s.
//!
//! A peer is born in its folder: profile (`.iapeer/peer-profile.json`), doctrine stub,
//! `launch.env` stubs, each runtime's setup (`runtime::setup_peer`), then the registry entry.

mod create;
mod error;
mod human;
mod provision;
mod refresh;
mod rename;
pub mod rename_journal;
mod runtime_choice;
mod service;
pub mod worktree;

pub use create::{
    check_name, create_peer, init_peer, write_launch_env_stub, InitOptions, Initialized,
};
pub use error::PeerError;
#[allow(unused_imports)] // for `onboard` (issue 8 item 2)
pub use human::create_human_peer;
pub use provision::{configure, provision_declared, Provisioned};
pub use refresh::{refresh_peer, RefreshError};
pub use rename::{plan_rename, rename_peer};
pub use runtime_choice::{choose_runtime, installed_agents};
pub use service::{create_notifier_peer, NOTIFIER_PEERS};

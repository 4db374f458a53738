//! iapeer: a host daemon plus CLI that keeps a team of peers (AI agents in ptys, humans,
//! services) reachable by message. See `README.md` and `docs/ARCHITECTURE.md`.
//!
//! The product specification lives outside this crate; doc comments name the part and section
//! (`spec 03 §2`) each item implements.
//!
//! Only what is used outside the crate is public: [`main`] (the binary), [`paths`],
//! [`eventlog`] and [`verb_table`] (the integration tests), [`untrusted`] (the fuzz targets in
//! `tests/fuzz/`); everything else is `pub(crate)`, so rustc reports dead code. Module layout:
//! see "House style" in `docs/ARCHITECTURE.md`.

// One module layout: a module with submodules is `foo/mod.rs` (docs/ARCHITECTURE.md).
#![warn(clippy::self_named_module_files)]

pub(crate) mod adapter;
pub(crate) mod attachment_source;
pub(crate) mod child;
pub(crate) mod cli;
pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod daemon;
pub(crate) mod echo_agent;
pub(crate) mod envelope;
pub(crate) mod eventbus;
pub mod eventlog;
pub(crate) mod federation;
#[cfg(test)]
mod fn_length_tests;
pub(crate) mod fsutil;
#[cfg(test)]
mod golden;
pub(crate) mod host;
pub(crate) mod inbox;
pub(crate) mod launch_env;
#[cfg(test)]
mod layers_tests;
pub(crate) mod limits;
pub(crate) mod logview;
pub(crate) mod markers;
pub(crate) mod memory;
pub(crate) mod msgids;
pub(crate) mod names;
pub(crate) mod notices;
pub(crate) mod notifier;
pub(crate) mod origin;
pub(crate) mod outbox;
pub mod paths;
pub(crate) mod peers;
pub(crate) mod plugins;
pub(crate) mod profile;
pub(crate) mod prompt;
pub(crate) mod protocol;
pub(crate) mod registry;
pub(crate) mod roster;
pub(crate) mod runtime;
#[cfg(test)]
mod runtime_names_tests;
pub(crate) mod runtime_table;
pub(crate) mod session;
pub(crate) mod telegram;
pub(crate) mod term;
#[cfg(test)]
mod testkit;
pub mod untrusted;
pub(crate) mod visible;
pub(crate) mod worktree;

/// The `iapeer` command line (the binary's whole body; see `src/main.rs`).
pub use cli::main;

/// The verb and flag table (spec 07), read by the integration tests that loop over every verb.
pub use cli::spec as verb_table;

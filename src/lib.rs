//! iapeer: a host daemon plus CLI that keeps a team of peers (AI agents in ptys, humans,
//! services) reachable by message. See `README.md` and `docs/ARCHITECTURE.md`.
//!
//! The product specification lives outside this crate; doc comments name the part and section
//! (`spec 03 §2`) each item implements.

pub mod adapter;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod echo_agent;
pub mod envelope;
pub mod eventlog;
pub mod fsutil;
pub mod launch_env;
pub mod markers;
pub mod names;
pub mod paths;
pub mod peers;
pub mod profile;
pub mod prompt;
pub mod protocol;
pub mod registry;
pub mod runtime;
pub mod session;
pub mod term;

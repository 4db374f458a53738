//! Sessions (spec 04 §1): one live process of one identity, owned by one daemon thread.

pub mod boot;
pub mod clear;
pub mod clients;
pub mod compact;
pub mod contain;
pub mod deliver;
pub mod env;
#[cfg(target_os = "linux")]
pub mod exits;
pub mod failure_line;
pub mod frame;
pub mod groups;
pub mod handle;
pub mod hold;
pub mod outcome;
pub mod own_text;
pub mod panelog;
pub mod priority;
pub mod prompts;
pub mod reap;
pub mod spawn;
pub mod thread;

//! The memory slot (spec 08 §3): the provider a host may have, declared by the provider in
//! `<root>/memory-provider.json`, and what the core does with it — the `provision` /
//! `unprovision` commands at a peer's birth and removal ([`provision`]), the runtimes' own
//! memory levers ([`native`]), Codex hook trust for the hooks a provider installs
//! ([`hook_trust`]), and the `memory:` line of `iapeer status` ([`slot`]).

pub mod hook_trust;
pub mod native;
pub mod provision;
pub mod slot;

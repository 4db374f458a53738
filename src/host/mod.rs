//! Host integration (spec 08 §1): the reference docs embedded in the binary, the service
//! definitions for systemd and launchd, and `iapeer install`, which lays them down.

pub mod binary;
pub mod control;
pub mod docs;
pub mod install;
pub mod login;
pub mod service;

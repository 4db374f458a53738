//! Sessions (spec 04 §1): one live process of one identity, owned by one daemon thread.

pub mod frame;
pub mod input;
pub mod screen;

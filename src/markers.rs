//! Lifecycle marker files under `state/lifecycle/` (spec 01 §7). [to be written]

//! The registry `peers-profiles.json` (spec 01 §5). [to be written]

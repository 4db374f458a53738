//! The peer profile `<cwd>/.iapeer/peer-profile.json` (spec 01 §4). [to be written]

//! Attach stream framing (spec 02 §2). [to be written]

//! Input encoding: bracketed paste and named keys (spec 04 §1). [to be written]

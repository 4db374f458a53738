//! logfmt event logs with rotation (spec 11 §1). [to be written]

//! The IAP envelope codec (spec 03 §2). [to be written]

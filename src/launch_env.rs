//! `launch.env` parsing (spec 01 §6). [to be written]

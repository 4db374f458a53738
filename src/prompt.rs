//! System prompt assembly (spec 06). [to be written]

//! The command-line interface (spec 07): one table of verbs and flags drives parsing, help,
//! the man page and completions; one file per verb group runs them.

pub mod completions;
pub mod help;
pub mod man;
pub mod parse;
pub mod spec;

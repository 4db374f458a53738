//! Runtime adapters (spec 04 §2): one implementation per runtime.

pub mod claude_screen;
pub mod dialog;

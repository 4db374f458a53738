//! The terminal layer (spec 04 §1 "Input" and "What the session thread does with output"): a
//! leaf that knows nothing of who drives it, used by both `session` (which owns the pty) and
//! `runtime` (whose adapters read screens and choose keys), in the way alacritty_terminal and
//! wezterm keep the terminal model apart from the pty.
//!
//! - [`screen`]: the `vt100` screen model a session's output is fed through.
//! - [`responder`]: recognising terminal capability queries in that output and the answers the
//!   daemon gives in place of a terminal.
//! - [`keys`]: encoding input: bracketed paste and tmux-like key names.
//! - [`menu`]: reading a TUI dialog's menu off the screen rows and the key towards an option.
//! - [`paste_view`]: how a runtime's composer shows a paste, recognised on the screen.

pub mod keys;
pub mod menu;
pub mod paste_view;
pub mod responder;
pub mod screen;

pub use keys::{bracketed_paste, encode_keys, paste_text};
pub use screen::Screen;
pub use screen::{clamp_size, SESSION_COLS, SESSION_ROWS};

pub mod claude_screen;
pub mod dialog;
pub mod echo;
pub mod manifest;
pub mod router;

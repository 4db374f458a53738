//! Every reader of bytes that iapeer does not control, public so that the coverage-guided fuzz
//! targets in `tests/fuzz/` (issue 12 item 5, `scripts/fuzz.sh`) can drive the real code. Only
//! re-exports: each item is documented where it is defined.
//!
//! | input | from | readers |
//! | --- | --- | --- |
//! | envelopes (spec 03 §2) | senders, router runtimes, agent inputs | [`decode_envelope`], [`extract_envelopes`]; written by [`encode_wire`], [`render_agent`], pasted through [`paste_text`] |
//! | control lines (spec 02 §1) | any local client of the control socket | [`parse_request`], [`Request`] |
//! | attach frames (spec 02 §2) | an attached client | [`Deframer`], [`Frame`]; written by [`encode_frame`] |
//! | MCP bodies (spec 02 §4) | any local HTTP client | [`mcp_handle`] with a [`McpBackend`] |
//! | pty output | the agent program in a session | [`Screen`], the [`Adapter`]s' detectors ([`Claude`], [`Codex`], [`Echo`]) |
//! | send fields (spec 03 §1) | CLI and MCP senders | [`validate_send`] (what an envelope can carry) |
//! | files (spec 07, spec 08 §2) | users and other tools | [`Registry::load`], [`Profile::read`], [`Manifest::load`], under [`Paths`] |

pub use crate::adapter::{Adapter, BootStep};
pub use crate::daemon::mcp::{
    handle as mcp_handle, Backend as McpBackend, CallerCreds, McpHeaders, McpResponse, SendArgs,
};
pub use crate::daemon::route::{validate as validate_send, Caller, SendInput};
pub use crate::envelope::{
    decode as decode_envelope, encode_wire, extract as extract_envelopes, render_agent, Envelope,
};
pub use crate::names::{is_valid_personality, is_valid_runtime, Intelligence};
pub use crate::paths::Paths;
pub use crate::profile::{Profile, DESCRIPTION_MAX_CHARS, KNOWN_KEYS as PROFILE_KEYS};
pub use crate::protocol::{parse_request, Code, DeliveredTo, Failure, Request, SendResult};
pub use crate::registry::Registry;
pub use crate::runtime::claude::{api_retry_line, Claude};
pub use crate::runtime::codex::{stream_error_line, Codex};
pub use crate::runtime::echo::Echo;
pub use crate::runtime::manifest::Manifest;
pub use crate::session::frame::{
    encode as encode_frame, Deframer, Frame, FrameError, HEADER_LEN, MAX_PAYLOAD,
};
pub use crate::term::paste_text;
pub use crate::term::screen::{clamp_size, Screen, MAX_COLS, MAX_ROWS};

//! The daemon (spec 02): control socket, loopback HTTP, router, sessions, ticker.

pub mod http;
pub mod mcp;

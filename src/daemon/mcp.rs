//! MCP over stateless streamable HTTP (spec 02 §4). [to be written]

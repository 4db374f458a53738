//! The IAP envelope codec (spec 03 §2): the block that carries one message, its sender and its
//! metadata.
//!
//! - [`encode_wire`]: the wire form, stored in queues and written to router runtimes;
//! - [`render_agent`]: the agent form an LLM sees (short names, relative `ts`, raw text);
//! - [`decode`]: reads either form back (and the attribute spellings of older writers);
//! - [`extract`]: pulls whole envelopes out of a byte stream that may also carry noise.
//!
//! What an agent sees of sender-controlled bytes: the agent form is pasted into a pty through
//! [`crate::term::paste_text`], so every control character in the body, topic or attachment
//! paths except LF, TAB and CR arrives as a visible stand-in (ESC as `␛`, C1 controls as
//! `U+FFFD`), never as a key; nothing is refused for it (issue 12, docs/ARCHITECTURE.md).

mod decode;
mod extract;
mod scan;
#[cfg(test)]
mod tests;

pub use decode::decode;
pub use extract::extract;

use crate::clock;
use crate::names::Intelligence;

/// The instruction line written as line 2 of both forms. Decoders never depend on it.
pub const INSTRUCTION: &str = "Reply via send_to_peer.";

/// Longest topic attribute value once escaped, in bytes. The open tag must close within 1024
/// bytes for every decoder (spec 03 §2 "Decoding"), and the rest of the longest open tag the
/// daemon writes takes 176 bytes (32-byte personality and runtime, `artificial`, a `ts` with
/// offset, the wire form's long attribute names), so 800 leaves room; 200 characters of up to 4 UTF-8 bytes
/// each fit, but 200 `"` (6 bytes each escaped) do not — the router refuses such topics
/// (issue 12: found by the `envelope` fuzz target).
pub const MAX_TOPIC_ATTR_BYTES: usize = 800;

/// Substrings that force CDATA in the agent form (spec 03 §2): raw text containing any of
/// them (or a CR) could be mistaken for envelope structure.
const MACHINERY: &[&str] = &[
    "<iap ",
    "</iap>",
    "<message>",
    "</message>",
    "<msg>",
    "</msg>",
    "<attachments>",
    "</attachments>",
    "<![CDATA[",
    "]]>",
];

/// One message with its sender and metadata, independent of the form it is written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Sender personality (`from-personality` / `from`).
    pub from: String,
    /// Sender runtime (`from-runtime` / `runtime`).
    pub runtime: String,
    /// Sender nature; `None` when absent or unknown.
    pub intelligence: Option<Intelligence>,
    /// Dispatch stamp as text: `2026-07-14T01:23:45+03:00` on the wire; in a decoded agent
    /// form whatever was rendered (`01:23:45`, `2026-07-13 23:59:59`).
    pub ts: Option<String>,
    /// Thread label; `None` when empty (an empty topic is never written).
    pub topic: Option<String>,
    /// Absolute attachment paths (inbox copies), without CR/LF.
    pub attachments: Vec<String>,
    /// The message body, byte for byte (CR kept).
    pub body: String,
}

/// Encode the wire form (spec 03 §2): lines joined by `\n`, no trailing newline, fixed
/// attribute order `from-personality`, `from-runtime`, `from-intelligence`, `ts`, `topic`
/// (each of the last three only when known / non-empty), body and attachments in CDATA.
///
/// ```text
/// <iap from-personality="boris" from-runtime="claude" from-intelligence="artificial" ts="…" topic="release">
/// Reply via send_to_peer.
/// <attachments><![CDATA[/abs/a.png
/// /abs/b.txt]]></attachments>
/// <message><![CDATA[the body]]></message>
/// </iap>
/// ```
pub fn encode_wire(env: &Envelope) -> String {
    let names = AttrNames {
        from: "from-personality",
        runtime: "from-runtime",
        intelligence: "from-intelligence",
    };
    let out = open_tag(env, &names, env.ts.as_deref());
    with_body(out, env, "message", cdata)
}

/// `head` (the open tag), then the instruction line, the attachments (when any) and the body
/// in `<body_tag>`, each text through `text` (CDATA or the agent form), and `</iap>`.
fn with_body(mut head: String, env: &Envelope, body_tag: &str, text: fn(&str) -> String) -> String {
    head.push('\n');
    head.push_str(INSTRUCTION);
    if !env.attachments.is_empty() {
        head.push_str("\n<attachments>");
        head.push_str(&text(&env.attachments.join("\n")));
        head.push_str("</attachments>");
    }
    head.push_str(&format!(
        "\n<{body_tag}>{}</{body_tag}>\n</iap>",
        text(&env.body)
    ));
    head
}

/// Render the agent form (spec 03 §2) for delivery into an agent session at `now`: short
/// attribute names, `ts` through `clock::render_agent_ts`, `<msg>`, and body/attachments raw
/// unless they contain envelope machinery or a CR (then CDATA as on the wire).
///
/// Deterministic for a given `(env, now)` (delivery confirmation searches for this text).
/// Fails open: if the rendering would not decode back to the same sender, body and
/// attachments, the wire form is returned instead.
pub fn render_agent(env: &Envelope, now: &jiff::Zoned) -> String {
    let names = AttrNames {
        from: "from",
        runtime: "runtime",
        intelligence: "intelligence",
    };
    let ts = env.ts.as_deref().map(|t| clock::render_agent_ts(t, now));
    let out = with_body(open_tag(env, &names, ts.as_deref()), env, "msg", agent_text);
    match decode(&out) {
        Ok(back)
            if back.from == env.from
                && back.runtime == env.runtime
                && back.body == env.body
                && back.attachments == env.attachments =>
        {
            out
        }
        _ => encode_wire(env),
    }
}

/// Escape an attribute value: `&` first, then `"`, `<`, `>`.
pub fn escape_attr(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Undo [`escape_attr`]: `&quot;`, `&lt;`, `&gt;`, then `&amp;` last.
pub fn unescape_attr(value: &str) -> String {
    value
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Wrap `text` in one CDATA section, splitting every `]]>` as `]]]]><![CDATA[>`.
pub fn cdata(text: &str) -> String {
    format!("<![CDATA[{}]]>", text.replace("]]>", "]]]]><![CDATA[>"))
}

/// True when `text` must stay in CDATA in the agent form (machinery or a CR inside).
pub fn needs_cdata(text: &str) -> bool {
    text.contains('\r') || MACHINERY.iter().any(|m| text.contains(m))
}

struct AttrNames {
    from: &'static str,
    runtime: &'static str,
    intelligence: &'static str,
}

fn open_tag(env: &Envelope, names: &AttrNames, ts: Option<&str>) -> String {
    let mut out = String::from("<iap");
    let mut attr = |name: &str, value: &str| {
        out.push(' ');
        out.push_str(name);
        out.push_str("=\"");
        out.push_str(&escape_attr(value));
        out.push('"');
    };
    attr(names.from, &env.from);
    attr(names.runtime, &env.runtime);
    if let Some(i) = env.intelligence {
        attr(names.intelligence, i.as_str());
    }
    if let Some(ts) = ts {
        attr("ts", ts);
    }
    if let Some(topic) = env.topic.as_deref().filter(|t| !t.is_empty()) {
        attr("topic", topic);
    }
    out.push('>');
    out
}

fn agent_text(text: &str) -> String {
    if needs_cdata(text) {
        cdata(text)
    } else {
        text.to_string()
    }
}

//! `prompt <peer> [--runtime <rt>] [--raw] [--json]`: the system prompt the peer's next wake
//! would start with (spec 06, issue 30 item 3), each layer labelled with where it comes from,
//! so a user can see what their agent is told and where to change it. Needs no daemon: the
//! prompt is a pure function of the files, the registry and the host ([`crate::prompt`]).

use super::parse::Invocation;
use super::spec::{args, flags};
use super::{done, paths, print, required, CliError, CliResult};
use crate::names::Identity;
use crate::paths::{self, Paths};
use crate::prompt::{Composition, HostFacts, LayerKind};
use crate::registry::{Registry, RegistryPeer};

/// Run the verb.
pub fn run(inv: &Invocation) -> CliResult {
    let name = required(inv, args::PEER)?;
    let paths = paths()?;
    let registry = Registry::load(&paths)?;
    let peer = registry
        .find(name)
        .ok_or_else(|| super::suggest::not_registered(&paths, name))?;
    let runtime = runtime_of(peer, inv.value(flags::PROMPT_RUNTIME))?;
    let identity = Identity::new(&runtime, &peer.personality)?;
    let adapter = crate::runtime::adapter_for(&paths, &runtime)?;
    if !adapter.wants_system_prompt() {
        return Err(CliError::failed(format!(
            "{identity} gets no system prompt from iapeer: only agent runtimes do (a human's \
             or a service's program is not a model)"
        )));
    }
    let home = paths::home_dir();
    let c = crate::prompt::compose(
        &paths,
        peer,
        &registry,
        &crate::roster::remote::prompt_peers(&paths),
        &HostFacts::detect(),
        home.as_deref(),
    );
    let written = paths.marker(&identity.to_string(), crate::prompt::PROMPT_SUFFIX);
    if inv.flag(flags::RAW) {
        return print(&c.text());
    }
    let doc = PromptDoc {
        identity: identity.to_string(),
        file: &written,
        layers: c
            .layers
            .iter()
            .map(|l| LayerRow {
                layer: l.kind.as_str(),
                source: l.source.as_deref(),
                text: &l.text,
            })
            .collect(),
        skipped: c
            .skipped
            .iter()
            .map(|s| SkippedRow {
                path: &s.path,
                reason: s.reason.to_string(),
            })
            .collect(),
        prompt: c.text(),
    };
    let text = labelled(&c, &paths, peer, &identity, &written, home.as_deref());
    done(inv, &doc, &text)
}

/// `prompt --json`: `{"identity","file","layers":[{"layer","source","text"}…],
/// "skipped":[{"path","reason"}…],"prompt"}`.
#[derive(Debug, serde::Serialize)]
pub struct PromptDoc<'a> {
    /// The session's identity.
    pub identity: String,
    /// The file the composed prompt is written to at launch.
    pub file: &'a std::path::Path,
    /// The layers, in order.
    pub layers: Vec<LayerRow<'a>>,
    /// The files left out, with why.
    pub skipped: Vec<SkippedRow<'a>>,
    /// The composed prompt.
    pub prompt: String,
}

/// A file `prompt --json` left out.
#[derive(Debug, serde::Serialize)]
pub struct SkippedRow<'a> {
    /// The file.
    pub path: &'a std::path::Path,
    /// Why: `empty`, `not UTF-8`, or the read error.
    pub reason: String,
}

/// One layer of `prompt --json`.
#[derive(Debug, serde::Serialize)]
pub struct LayerRow<'a> {
    /// The layer's kind.
    pub layer: &'static str,
    /// The file it came from, if any.
    pub source: Option<&'a std::path::Path>,
    /// Its text.
    pub text: &'a str,
}

/// The runtime asked for (it must be one the peer declares), else the peer's default.
fn runtime_of(peer: &RegistryPeer, asked: Option<&str>) -> Result<String, CliError> {
    match asked {
        None => Ok(peer.default_runtime.clone()),
        Some(rt) if peer.declares(rt) => Ok(rt.to_string()),
        Some(rt) => Err(CliError::failed(format!(
            "peer \"{}\" does not declare runtime \"{rt}\" (its runtimes: {}) — add it with: \
             iapeer add-runtime {rt} --peer {}",
            peer.personality,
            peer.runtimes.join(", "),
            peer.personality
        ))),
    }
}

/// The human view: a heading, then each layer under a `── label ──` line with its text as it
/// goes into the prompt, the doctrine files that are absent (where a role would go), and the
/// files left out with why.
fn labelled(
    c: &Composition,
    paths: &Paths,
    peer: &RegistryPeer,
    identity: &Identity,
    written: &std::path::Path,
    home: Option<&std::path::Path>,
) -> String {
    let shown = |p: &std::path::Path| paths::tilde(p, home);
    let mut out = format!(
        "The system prompt {identity}'s next wake starts with, in place of the runtime's own \
         ({} characters; written to {} at each wake; --raw prints it alone):\n",
        c.text().chars().count(),
        shown(written)
    );
    let doctrines = [
        (
            LayerKind::HostDoctrine,
            paths.host_doctrine(),
            "what every agent on this host should know",
        ),
        (
            LayerKind::PeerDoctrine,
            paths::peer::doctrine(&peer.cwd),
            "this peer's role",
        ),
    ];
    for (kind, file, what) in &doctrines {
        if !c.layers.iter().any(|l| l.kind == *kind) && !c.skipped.iter().any(|s| &s.path == file) {
            out.push_str(&format!(
                "(no {}: {} does not exist — write {what} there)\n",
                kind.as_str(),
                shown(file)
            ));
        }
    }
    for l in &c.layers {
        let from = match (&l.source, l.kind) {
            (Some(p), _) => shown(p),
            (None, LayerKind::Identity) => "the registry entry and this host".into(),
            (None, LayerKind::KnownPeers) => "the registry".into(),
            (None, _) => "iapeer".into(),
        };
        out.push_str(&format!(
            "\n── {} · {} ──\n{}\n",
            l.kind.as_str(),
            crate::visible::line(&from),
            crate::visible::text(l.text.trim_end_matches(['\n', '\r']))
        ));
    }
    for s in &c.skipped {
        out.push_str(&format!(
            "\n(left out: {} — {})\n",
            crate::visible::line(&shown(&s.path)),
            s.reason
        ));
    }
    out
}

//! The system prompt (spec 06): iapeer assembles the prompt each agent session starts with,
//! from an identity block, a docs pointer, doctrines, the team list, domain files and
//! fragments, and writes it to `<root>/state/lifecycle/<identity>.system-prompt.md` (0600)
//! at every bring-up.
//!
//! Assembly is a pure function of the files on disk, the registry and [`HostFacts`], so its
//! exact bytes are pinned by golden files under `tests/golden/prompt/`.

mod facts;
#[cfg(test)]
mod tests;

pub use facts::HostFacts;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::fsutil::{self, MODE_PRIVATE};
use crate::names::Identity;
use crate::paths::{self, Paths};
use crate::registry::{Registry, RegistryPeer};

/// The text of [`SkipReason::Empty`], a whitespace-only file (not worth a warning).
const EMPTY: &str = "empty";

/// Suffix of the prompt file among the per-identity lifecycle markers.
pub const PROMPT_SUFFIX: &str = ".system-prompt.md";

/// Assemble the system prompt of peer `me` from its layers as [`compose`] gives them (spec 06
/// "Assembly"), and warn in the log of each file skipped but for being empty. Layers, in order:
///
/// 1. the identity block (`---` fenced, JSON-string values, keys in the spec's order);
/// 2. one sentence pointing at `<root>/docs/`;
/// 3. doctrines: `<root>/IAPEER.md`, then `<me.cwd>/.iapeer/IAPEER.md`;
/// 4. `## Known peers` from `registry`, by personality, then the other hosts' peers `remote`
///    (issue 28 item 2) as `name@host`, by host and name (omitted when there are none);
/// 5. domain files: `*.md` directly in `<root>/` and `<me.cwd>/.iapeer/` except `IAPEER.md`,
///    by name, host file before peer file;
/// 6. fragments: the same for `<root>/fragments/` and `<me.cwd>/.iapeer/fragments/`.
///
/// Files of layers 3, 5 and 6 become sections headed by `<!-- <path> -->`, the path shown with
/// `home` as `~`. Empty (whitespace-only), unreadable and non-UTF-8 files are skipped, the last
/// two with a `log::warn`. Each section loses its trailing newlines, empty sections are
/// dropped, sections are joined by one blank line, and the text ends with exactly one `\n`.
pub fn assemble(c: Composition) -> String {
    for s in c.skipped.iter().filter(|s| s.reason != SkipReason::Empty) {
        log::warn!("system prompt: skipping {}: {}", s.path.display(), s.reason);
    }
    c.text()
}

/// Which of [`assemble`]'s layers a [`Layer`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// 1: the identity block (the registry entry and this host).
    Identity,
    /// 2: the pointer to `<root>/docs/`.
    Docs,
    /// 3: `<root>/IAPEER.md`, for every agent on the host.
    HostDoctrine,
    /// 3: `<peer folder>/.iapeer/IAPEER.md`, the peer's own role.
    PeerDoctrine,
    /// 4: the team list from the registry.
    KnownPeers,
    /// 5: a `*.md` file of `<root>/` or `<peer folder>/.iapeer/`.
    Domain,
    /// 6: a `*.md` file of `<root>/fragments/` or `<peer folder>/.iapeer/fragments/`.
    Fragment,
}

impl LayerKind {
    /// The layer's name in `iapeer prompt`'s labels and `--json` (`peer-doctrine`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            LayerKind::Identity => "identity",
            LayerKind::Docs => "docs",
            LayerKind::HostDoctrine => "host-doctrine",
            LayerKind::PeerDoctrine => "peer-doctrine",
            LayerKind::KnownPeers => "known-peers",
            LayerKind::Domain => "domain",
            LayerKind::Fragment => "fragment",
        }
    }
}

/// One section of the prompt: what it is, the file it came from (`None` for the generated
/// layers) and its text exactly as it goes into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The layer.
    pub kind: LayerKind,
    /// Its file, for layers 3, 5 and 6.
    pub source: Option<PathBuf>,
    /// Its text (a file's with its `<!-- path -->` heading), before [`join_sections`].
    pub text: String,
}

/// A file of layers 3, 5 or 6 that was found and left out, and why (`empty`, `not UTF-8`,
/// or the read error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file.
    pub path: PathBuf,
    /// Why it is not in the prompt.
    pub reason: SkipReason,
}

/// Why a layer file is left out of the prompt. `Display`: `empty`, `not UTF-8`, or the read
/// error's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    /// The file holds only white space (not worth a warning).
    #[error("{}", EMPTY)]
    Empty,
    /// The file is not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
    /// The file cannot be read (the error's text: an `io::Error` is neither `Clone` nor `Eq`,
    /// which [`Composition`] is).
    #[error("{0}")]
    Unreadable(String),
}

/// The prompt as its layers, in order, and the files left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composition {
    /// The layers with text, in the prompt's order.
    pub layers: Vec<Layer>,
    /// Files that exist and were left out.
    pub skipped: Vec<Skipped>,
}

impl Composition {
    /// The prompt text: the layers joined by [`join_sections`] (what [`assemble`] returns).
    pub fn text(&self) -> String {
        let sections: Vec<String> = self.layers.iter().map(|l| l.text.clone()).collect();
        join_sections(&sections)
    }
}

/// The system prompt's layers one by one (the rules are [`assemble`]'s), each with where it
/// came from (for `iapeer prompt`, issue 30 item 3, and for [`assemble`]).
pub fn compose(
    paths: &Paths,
    me: &RegistryPeer,
    registry: &Registry,
    remote: &[RemotePeer],
    facts: &HostFacts,
    home: Option<&Path>,
) -> Composition {
    let generated = |kind, text| Layer {
        kind,
        source: None,
        text,
    };
    let mut c = Composition {
        layers: vec![
            generated(LayerKind::Identity, identity_block(me, facts)),
            generated(LayerKind::Docs, docs_pointer(paths)),
        ],
        skipped: Vec::new(),
    };
    c.add_file(LayerKind::HostDoctrine, &paths.host_doctrine(), home);
    c.add_file(
        LayerKind::PeerDoctrine,
        &paths::peer::doctrine(&me.cwd),
        home,
    );
    if let Some(text) = known_peers(registry, remote) {
        c.layers.push(generated(LayerKind::KnownPeers, text));
    }
    for file in layer_files(paths.root(), &paths::peer::dir(&me.cwd)) {
        c.add_file(LayerKind::Domain, &file, home);
    }
    let fragments = layer_files(&paths.host_fragments(), &paths::peer::fragments(&me.cwd));
    for file in fragments {
        c.add_file(LayerKind::Fragment, &file, home);
    }
    c
}

impl Composition {
    /// Add `path` as a `kind` layer, or note why it is left out (nothing when it is absent).
    fn add_file(&mut self, kind: LayerKind, path: &Path, home: Option<&Path>) {
        match marked_section(path, home) {
            Ok(Some(text)) => self.layers.push(Layer {
                kind,
                source: Some(path.to_path_buf()),
                text,
            }),
            Ok(None) => {}
            Err(reason) => self.skipped.push(Skipped {
                path: path.to_path_buf(),
                reason,
            }),
        }
    }
}

/// Write the prompt of `identity` to `<root>/state/lifecycle/<identity>.system-prompt.md`
/// atomically with mode 0600 (creating the folder 0700), and return that path.
///
/// Errors: any I/O error of the write.
pub fn write(paths: &Paths, identity: &Identity, text: &str) -> io::Result<PathBuf> {
    let path = paths.marker(&identity.to_string(), PROMPT_SUFFIX);
    fsutil::write_atomic(&path, text.as_bytes(), MODE_PRIVATE)?;
    Ok(path)
}

/// Join sections: strip each one's trailing newlines, drop the empty ones, separate them with
/// one blank line and end with exactly one `\n`.
pub fn join_sections(sections: &[String]) -> String {
    let kept: Vec<&str> = sections
        .iter()
        .map(|s| s.trim_end_matches(['\n', '\r']))
        .filter(|s| !s.is_empty())
        .collect();
    let mut out = kept.join("\n\n");
    out.push('\n');
    out
}

/// `s` as a JSON string literal, quotes included. Beyond what JSON requires (`"`, `\` and
/// U+0000–U+001F), U+007F is escaped too, so no control character reaches the prompt raw.
pub fn json_string(s: &str) -> String {
    // serde_json escapes what JSON requires (`\b \f \n \r \t`, the rest as `\u00xx`);
    // serializing a `str` cannot fail.
    serde_json::to_string(s)
        .unwrap_or_default()
        .replace('\u{7f}', "\\u007f")
}

/// Layer 1: the identity block.
fn identity_block(me: &RegistryPeer, facts: &HostFacts) -> String {
    let cwd = me.cwd.to_string_lossy();
    let fields: [(&str, &str); 8] = [
        ("personality", &me.personality),
        ("description", &me.description),
        ("peer-cwd", &cwd),
        ("platform", &facts.platform),
        ("os_version", &facts.os_version),
        ("user", &facts.user),
        ("hostname", &facts.hostname),
        ("today", &facts.today),
    ];
    let mut out = String::from("---\n");
    for (key, value) in fields {
        let _ = writeln!(out, "{key}: {}", json_string(value));
    }
    out.push_str("---");
    out
}

/// Layer 2: where the reference docs are.
fn docs_pointer(paths: &Paths) -> String {
    format!(
        "Reference documentation for iapeer and each package installed with it is on this host \
         in {}/, one folder per package (begin with iapeer/README.md); when you need to know how \
         iapeer behaves, read it there rather than guessing.",
        paths.docs_dir().display()
    )
}

/// A peer of another host of the federation, for the team list (issue 28 item 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePeer {
    /// `name@host`, as a send names it.
    pub address: String,
    /// Its description (made one line here).
    pub description: String,
    /// Its runtimes, the default first (never empty: a roster peer without one is not given).
    pub runtimes: Vec<String>,
    /// `artificial`, `natural` or `absent`.
    pub intelligence: String,
}

/// Layer 4: the team list, or `None` when the registry is empty and no other host has peers.
fn known_peers(registry: &Registry, remote: &[RemotePeer]) -> Option<String> {
    if registry.peers.is_empty() && remote.is_empty() {
        return None;
    }
    let mut peers: Vec<&RegistryPeer> = registry.peers.iter().collect();
    peers.sort_by(|a, b| a.personality.as_bytes().cmp(b.personality.as_bytes()));
    let mut out = String::from("## Known peers");
    for p in peers {
        let nature = p.nature().to_string();
        known_peer(
            &mut out,
            &p.personality,
            &p.description,
            &p.default_runtime,
            &p.runtimes,
            &nature,
        );
    }
    for p in remote {
        let default = p.runtimes.first().map(String::as_str).unwrap_or_default();
        known_peer(
            &mut out,
            &p.address,
            &p.description,
            default,
            &p.runtimes,
            &p.intelligence,
        );
    }
    Some(out)
}

/// One peer of the team list: `- name — description` and its runtime(s) and intelligence.
fn known_peer(
    out: &mut String,
    name: &str,
    description: &str,
    runtime: &str,
    runtimes: &[String],
    intelligence: &str,
) {
    let _ = write!(out, "\n- {name}");
    let description = one_line(description);
    if !description.is_empty() {
        let _ = write!(out, " — {description}");
    }
    let _ = write!(
        out,
        "\n  runtime: {runtime}\n  runtimes: {}\n  intelligence: {intelligence}",
        runtimes.join(", "),
    );
}

/// A description flattened to one line: control characters that are not whitespace are
/// dropped, and every run of whitespace becomes one space.
fn one_line(s: &str) -> String {
    let kept: String = s
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Layers 5 and 6: the files of the union of `*.md` names of two folders, sorted; host file
/// first.
fn layer_files(host_dir: &Path, peer_dir: &Path) -> Vec<PathBuf> {
    let host = md_names(host_dir);
    let peer = md_names(peer_dir);
    let all: BTreeSet<&OsString> = host.iter().chain(peer.iter()).collect();
    let mut out = Vec::new();
    for name in all {
        for (dir, names) in [(host_dir, &host), (peer_dir, &peer)] {
            if names.contains(name) {
                out.push(dir.join(name));
            }
        }
    }
    out
}

/// Names of the regular files (symlinks followed) directly in `dir` whose name ends in `.md`
/// (any case), except `IAPEER.md` (any case) and dot-files. A missing folder is empty; other
/// read errors are logged and give an empty list.
fn md_names(dir: &Path) -> BTreeSet<OsString> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return BTreeSet::new(),
        Err(e) => {
            log::warn!("system prompt: cannot list {}: {e}", dir.display());
            return BTreeSet::new();
        }
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|name| is_layer_file_name(name.as_bytes()))
        .filter(|name| fs::metadata(dir.join(name)).is_ok_and(|m| m.is_file()))
        .collect()
}

/// True for `*.md` names (extension in any case) other than `IAPEER.md` and dot-files.
fn is_layer_file_name(name: &[u8]) -> bool {
    name.len() > 3
        && !name.starts_with(b".")
        && name[name.len() - 3..].eq_ignore_ascii_case(b".md")
        && !name.eq_ignore_ascii_case(b"IAPEER.md")
}

/// A file as a section headed by its path marker; `Ok(None)` when it is missing; `Err` with
/// the reason when it is empty, unreadable or not UTF-8 ([`assemble`] logs those).
fn marked_section(path: &Path, home: Option<&Path>) -> Result<Option<String>, SkipReason> {
    let text = match fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => return Err(SkipReason::NotUtf8),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SkipReason::Unreadable(e.to_string())),
    };
    if text.trim().is_empty() {
        return Err(SkipReason::Empty);
    }
    Ok(Some(format!(
        "<!-- {} -->\n{text}",
        paths::tilde(path, home)
    )))
}

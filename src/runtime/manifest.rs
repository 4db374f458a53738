//! Runtime package manifests `runtimes/<rt>/runtime.json` (spec 08 §2): written by the
//! package, read here. Every manifest the original tool accepts is accepted: a missing
//! `runtime` is the folder's name, a `version` that is not a string (a number) is read as its
//! text, `selfConfig` is a `{command,args}` object or a bare command string. Unknown keys are
//! ignored.
//!
//! A manifest of `"kind": "terminal"` declares an agent TUI instead (issue 27 item 3): its
//! `terminal` section is checked here at every load ([`super::terminal::spec`]), so a bad
//! one is refused with what is wrong before anything is installed or launched.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

use super::terminal::spec::{Terminal, TerminalSpec};
use super::RuntimeError;
use crate::names::is_valid_runtime;
use crate::paths::Paths;

/// A `{command, args}` descriptor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandSpec {
    /// Program path or name.
    pub command: String,
    /// Arguments.
    #[serde(default)]
    pub args: Vec<String>,
}

/// One peer a package declares (`peers[]`): iapeer creates it at `install-runtime`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredPeer {
    /// The peer's name (required).
    pub personality: String,
    /// `absent`, `natural` or `artificial`; absent = the runtime's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intelligence: Option<String>,
    /// Its registry description (one line, at most 450 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its folder (absolute); absent = `<root>/peers/<personality>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The program to run for this peer instead of the runtime's (written to the peer's
    /// `launch.env` as `<RT>_RUNTIME_BIN`).
    #[serde(
        default,
        rename = "runtimeBin",
        skip_serializing_if = "Option::is_none"
    )]
    pub runtime_bin: Option<String>,
}

/// The fields of `runtime.json` that iapeer reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifest {
    /// The runtime's name: the folder's name when the file does not say.
    pub runtime: String,
    /// Package version, when stamped (a number is kept as its text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The per-peer configuration hook, run in the peer's folder at its birth.
    #[serde(rename = "selfConfig", skip_serializing_if = "Option::is_none")]
    pub self_config: Option<CommandSpec>,
    /// The peers the package provides; empty = operator-add mode (`create --runtime <rt>`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<DeclaredPeer>,
    /// Our addition: how to run the runtime. Absent = `$<RT>_RUNTIME_BIN` or `<rt>-runtime`,
    /// with the argument `run`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<CommandSpec>,
    /// `"terminal"` for a terminal agent runtime; absent for a router package.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The terminal agent's declaration (checked), when `kind` is `terminal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<TerminalSpec>,
}

/// The `kind` of a terminal agent runtime's manifest.
pub const TERMINAL_KIND: &str = "terminal";

/// The file as written, before the lenient fields are read.
#[derive(Deserialize)]
struct RawManifest {
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    version: Value,
    #[serde(default, rename = "selfConfig")]
    self_config: Value,
    #[serde(default)]
    peers: Option<Vec<DeclaredPeer>>,
    #[serde(default)]
    run: Option<CommandSpec>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    terminal: Option<Value>,
}

/// Why manifest text is not a manifest of its folder's runtime. `Display` says which;
/// [`RuntimeError::BadManifest`] quotes it.
#[derive(Debug)]
pub enum ManifestError {
    /// Not JSON of the manifest's shape.
    Json(serde_json::Error),
    /// `runtime` names another runtime than its folder.
    OtherRuntime {
        /// The `runtime` written.
        runtime: String,
        /// The folder's runtime.
        folder: String,
    },
    /// `selfConfig` is neither a command string nor `{command,args}` (the decoder's error,
    /// for an object).
    BadSelfConfig(Option<serde_json::Error>),
    /// The `kind` and `terminal` section do not make a terminal runtime: what is wrong and
    /// what to do.
    Terminal(String),
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManifestError::Json(e) => e.fmt(f),
            ManifestError::OtherRuntime { runtime, folder } => {
                write!(f, "\"runtime\" is \"{runtime}\", expected \"{folder}\"")
            }
            ManifestError::BadSelfConfig(e) => {
                f.write_str("\"selfConfig\" must be a command or {\"command\", \"args\"}")?;
                match e {
                    Some(e) => write!(f, ": {e}"),
                    None => Ok(()),
                }
            }
            ManifestError::Terminal(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ManifestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ManifestError::Json(e) | ManifestError::BadSelfConfig(Some(e)) => Some(e),
            _ => None,
        }
    }
}

impl Manifest {
    /// Read manifest text found in the folder of runtime `folder` (pure).
    ///
    /// Errors: the text is not JSON of this shape, `runtime` names another runtime, or
    /// `selfConfig` is neither a command string nor `{command,args}` (`ManifestError`).
    pub fn parse(text: &str, folder: &str) -> Result<Manifest, ManifestError> {
        let raw: RawManifest = serde_json::from_str(text).map_err(ManifestError::Json)?;
        let runtime = raw.runtime.unwrap_or_else(|| folder.to_string());
        if runtime != folder {
            return Err(ManifestError::OtherRuntime {
                runtime,
                folder: folder.to_string(),
            });
        }
        let version = match raw.version {
            Value::String(s) if !s.trim().is_empty() => Some(s),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let self_config = match raw.self_config {
            Value::Null => None,
            Value::String(s) if s.trim().is_empty() => None,
            Value::String(s) => Some(CommandSpec {
                command: s,
                args: Vec::new(),
            }),
            v @ Value::Object(_) => {
                Some(serde_json::from_value(v).map_err(|e| ManifestError::BadSelfConfig(Some(e)))?)
            }
            _ => return Err(ManifestError::BadSelfConfig(None)),
        };
        let terminal = terminal_section(raw.kind.as_deref(), raw.terminal)?;
        Ok(Manifest {
            runtime,
            version,
            self_config,
            peers: raw.peers.unwrap_or_default(),
            run: raw.run,
            kind: raw.kind,
            terminal,
        })
    }

    /// Load the manifest of `runtime`. A missing file is `Ok(None)` (not installed).
    ///
    /// Errors: `RuntimeError::BadManifest` when the file is unreadable, not JSON of this
    /// shape, or names another runtime.
    pub fn load(paths: &Paths, runtime: &str) -> Result<Option<Manifest>, RuntimeError> {
        if !is_valid_runtime(runtime) {
            return Err(RuntimeError::NotInstalled(runtime.to_string()));
        }
        let path: PathBuf = paths.runtime_manifest(runtime);
        let text = match crate::fsutil::read_optional(&path) {
            Ok(None) => return Ok(None),
            Ok(Some(t)) => t,
            Err(e) => return Err(RuntimeError::BadManifest(path, e.to_string())),
        };
        Manifest::parse(&text, runtime)
            .map(Some)
            .map_err(|why| RuntimeError::BadManifest(path, why.to_string()))
    }
}

/// The checked `terminal` section of a manifest of `kind`, `None` for a router package.
///
/// Errors: [`ManifestError::Terminal`], an unknown `kind`, a `terminal` section without
/// `"kind": "terminal"` or the other way round, or a section [`Terminal::check`] refuses.
fn terminal_section(
    kind: Option<&str>,
    section: Option<Value>,
) -> Result<Option<TerminalSpec>, ManifestError> {
    let why = |s: String| ManifestError::Terminal(s);
    match (kind, section) {
        (None | Some("router"), None) => Ok(None),
        (None | Some("router"), Some(_)) => Err(why(
            "it has a \"terminal\" section but no \"kind\": \"terminal\": add it".into(),
        )),
        (Some(TERMINAL_KIND), None) => Err(why(
            "\"kind\" is \"terminal\" but there is no \"terminal\" section: declare the \
             command and the ready and busy patterns (docs/RUNTIMES.md)"
                .into(),
        )),
        (Some(TERMINAL_KIND), Some(v)) => {
            let spec: TerminalSpec =
                serde_json::from_value(v).map_err(|e| why(format!("\"terminal\": {e}")))?;
            Terminal::check(spec.clone()).map_err(|e| why(format!("\"terminal\": {e}")))?;
            Ok(Some(spec))
        }
        (Some(other), _) => Err(why(format!(
            "\"kind\" is {other:?}: use \"terminal\" for an agent in a terminal, or leave it \
             out for a router package"
        ))),
    }
}

/// The runtimes installed from packages: every folder under `<root>/runtimes/` with a
/// valid runtime name that holds a `runtime.json`, sorted. Empty when there is none.
pub fn installed(paths: &Paths) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(paths.runtimes_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|rt| is_valid_runtime(rt) && paths.runtime_manifest(rt).is_file())
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_original_s_lenient_manifests_are_accepted() {
        // No "runtime": the folder's name. A number as version. A bare selfConfig command.
        let m = Manifest::parse(
            r#"{"version":2,"selfConfig":"/opt/bot-config","peers":[{"personality":"pager","runtimeBin":"/opt/pager"}]}"#,
            "bot",
        )
        .unwrap();
        assert_eq!(m.runtime, "bot");
        assert_eq!(m.version.as_deref(), Some("2"));
        assert_eq!(
            m.self_config,
            Some(CommandSpec {
                command: "/opt/bot-config".into(),
                args: vec![]
            })
        );
        assert_eq!(m.peers[0].personality, "pager");
        assert_eq!(m.peers[0].runtime_bin.as_deref(), Some("/opt/pager"));
        let m = Manifest::parse(
            r#"{"runtime":"bot","version":null,"selfConfig":{"command":"b","args":["self-config"]}}"#,
            "bot",
        )
        .unwrap();
        assert_eq!(m.version, None);
        assert_eq!(m.self_config.unwrap().args, vec!["self-config"]);
        assert!(Manifest::parse(r#"{"selfConfig":3}"#, "bot")
            .unwrap_err()
            .to_string()
            .contains("selfConfig"));
        assert!(Manifest::parse(r#"{"peers":[{"intelligence":"absent"}]}"#, "bot").is_err());
    }

    #[test]
    fn missing_invalid_and_valid_manifests() {
        let (_dir, paths) = Paths::temp();
        assert_eq!(Manifest::load(&paths, "bot").unwrap(), None);
        let p = paths.runtime_manifest("bot");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "{nope").unwrap();
        assert!(matches!(
            Manifest::load(&paths, "bot"),
            Err(RuntimeError::BadManifest(..))
        ));
        std::fs::write(&p, r#"{"runtime":"other"}"#).unwrap();
        assert!(Manifest::load(&paths, "bot").is_err());
        std::fs::write(
            &p,
            r#"{"runtime":"bot","version":"1.0.0","run":{"command":"cat"},"peers":[]}"#,
        )
        .unwrap();
        let m = Manifest::load(&paths, "bot").unwrap().unwrap();
        assert_eq!(m.run.unwrap().command, "cat");
        std::fs::create_dir_all(paths.runtimes_dir().join("claude/plugins")).unwrap();
        assert_eq!(installed(&paths), vec!["bot".to_string()]);
    }
}

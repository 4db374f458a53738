//! Runtime package manifests `runtimes/<rt>/runtime.json` (spec 08 §2), as far as running a
//! router runtime needs them. Unknown keys are ignored.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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

/// The fields of `runtime.json` that iapeer reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Must equal the folder name.
    pub runtime: String,
    /// Package version, when stamped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Our addition: how to run the runtime. Absent = `$<RT>_RUNTIME_BIN` or `<rt>-runtime`,
    /// with the argument `run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<CommandSpec>,
}

impl Manifest {
    /// Load the manifest of `runtime`. A missing file is `Ok(None)` (not installed).
    ///
    /// Errors: [`RuntimeError::BadManifest`] when the file is unreadable, not JSON of this
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
        let m: Manifest = serde_json::from_str(&text)
            .map_err(|e| RuntimeError::BadManifest(path.clone(), e.to_string()))?;
        if m.runtime != runtime {
            return Err(RuntimeError::BadManifest(
                path,
                format!("\"runtime\" is \"{}\", expected \"{runtime}\"", m.runtime),
            ));
        }
        Ok(Some(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_invalid_and_valid_manifests() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::at(dir.path());
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
    }
}

//! Peers of runtime packages (spec 08 §2): the peers a package declares in `peers[]` are
//! created at `install-runtime`, and every peer born on a package runtime (declared, or added
//! with `create <name> --runtime <rt>`) gets the package's `selfConfig` run for it. A peer whose
//! hook fails is created but marked stopped, so the daemon does not start (and crash-loop) a
//! peer its package could not configure.

use std::path::{Path, PathBuf};

use super::{create_peer, InitOptions, Initialized, PeerError};
use crate::fsutil::{self, MODE_PRIVATE};
use crate::markers::{Flag, Markers};
use crate::names::Identity;
use crate::paths::{peer, Paths};
use crate::profile::DESCRIPTION_MAX_CHARS;
use crate::registry::RegistryPeer;
use crate::runtime::manifest::{DeclaredPeer, Manifest};
use crate::runtime::package::{run_self_config, HookPeer, SelfConfig};
use crate::runtime::router::bin_override_var;

/// A declared peer after [`provision_declared`].
#[derive(Debug)]
pub struct Provisioned {
    /// The peer as created.
    pub born: Initialized,
    /// What its package's `selfConfig` did.
    pub configured: SelfConfig,
    /// A declared description that was not used (not one line of at most 450 characters).
    pub description_skipped: bool,
}

/// Create (or bring up to date) the peer `decl` that `manifest`'s package declares: on the
/// package's runtime, with its description, intelligence and folder (`path`, else
/// `<root>/peers/<personality>`); its `runtimeBin` goes into the peer's `launch.env` as
/// `<RT>_RUNTIME_BIN`; then the package's `selfConfig` runs for it ([`configure`]).
///
/// Errors: everything [`create_peer`] returns (a taken name, an invalid one…), and a
/// `launch.env` that cannot be written.
pub fn provision_declared(
    paths: &Paths,
    manifest: &Manifest,
    decl: &DeclaredPeer,
) -> Result<Provisioned, PeerError> {
    let usable = |d: &&String| !d.contains('\n') && d.chars().count() <= DESCRIPTION_MAX_CHARS;
    let description = decl.description.as_ref().filter(usable);
    let folder = decl.path.as_ref().map(PathBuf::from);
    let born = create_peer(
        paths,
        &decl.personality,
        folder.as_deref(),
        &InitOptions {
            runtime: Some(&manifest.runtime),
            description: description.map(String::as_str),
            intelligence: decl.intelligence.as_deref(),
            bearer: false,
        },
    )?;
    if let Some(bin) = &decl.runtime_bin {
        set_launch_var(
            &born.peer.cwd,
            &manifest.runtime,
            &bin_override_var(&manifest.runtime),
            bin,
        )?;
    }
    let configured = configure(paths, manifest, &born.peer);
    Ok(Provisioned {
        born,
        configured,
        description_skipped: decl.description.is_some() && description.is_none(),
    })
}

/// Run `manifest`'s `selfConfig` for `peer` (a peer on that runtime). On a failure the
/// identity `<rt>-<peer>` is marked stopped (`iapeer start` brings it up once configured).
pub fn configure(paths: &Paths, manifest: &Manifest, peer: &RegistryPeer) -> SelfConfig {
    let outcome = run_self_config(
        paths,
        manifest,
        &HookPeer {
            personality: &peer.personality,
            cwd: &peer.cwd,
            intelligence: &peer.intelligence,
        },
    );
    if let SelfConfig::Failed(_) = outcome {
        if let Ok(ident) = Identity::new(&manifest.runtime, &peer.personality) {
            if let Err(e) = Markers::new(paths, &ident).set(Flag::Stopped) {
                log::warn!("cannot mark {ident} stopped: {e}");
            }
        }
    }
    outcome
}

/// Set `key=value` in the peer's `launch.env` for `runtime`, replacing an earlier line of
/// that key and keeping every other line (the stub is written first when there is none).
///
/// Errors: `Io { action: "write" }` naming the file.
fn set_launch_var(folder: &Path, runtime: &str, key: &str, value: &str) -> Result<(), PeerError> {
    super::write_launch_env_stub(folder, runtime)?;
    let path = peer::launch_env(folder, runtime);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let updated = with_var(&text, key, value);
    fsutil::write_atomic(&path, updated.as_bytes(), MODE_PRIVATE)
        .map_err(fsutil::IoError::at("write", &path))?;
    Ok(())
}

/// `text` (a `launch.env`) with every line setting `key` dropped and `key=value` appended.
fn with_var(text: &str, key: &str, value: &str) -> String {
    let mut out: String = text
        .lines()
        .filter(|l| crate::launch_env::parse_line(l).is_none_or(|(k, _)| k != key))
        .map(|l| format!("{l}\n"))
        .collect();
    out.push_str(&format!("{key}={value}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_var_replaces_its_old_line_and_keeps_the_rest() {
        let text =
            "# tuning\nPEER_START_ARGS=--x\nBOT_RUNTIME_BIN=/old\nexport BOT_RUNTIME_BIN=/older\n";
        assert_eq!(
            with_var(text, "BOT_RUNTIME_BIN", "/new"),
            "# tuning\nPEER_START_ARGS=--x\nBOT_RUNTIME_BIN=/new\n"
        );
        assert_eq!(with_var("", "K", "v"), "K=v\n");
    }

    #[test]
    fn declared_peers_are_created_with_their_card_and_a_failed_hook_stops_them() {
        let (_dir, paths) = Paths::temp();
        let write = |json: &str| {
            let p = paths.runtime_manifest("pager");
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, json).unwrap();
            Manifest::load(&paths, "pager").unwrap().unwrap()
        };
        let m = write(
            r#"{"selfConfig":{"command":"/bin/sh","args":["-c","exit 4"]},
               "peers":[{"personality":"beeper","intelligence":"absent","description":"pages people",
                         "runtimeBin":"/opt/beeper"},
                        {"personality":"long","description":"two\nlines"}]}"#,
        );
        let p = provision_declared(&paths, &m, &m.peers[0]).unwrap();
        assert_eq!(p.born.peer.description, "pages people");
        assert_eq!(p.born.peer.intelligence, "absent");
        assert_eq!(p.born.always_on.as_deref(), Some("pager"));
        assert!(matches!(p.configured, SelfConfig::Failed(_)));
        let ident = Identity::new("pager", "beeper").unwrap();
        assert!(Markers::new(&paths, &ident).is_set(Flag::Stopped));
        let env = crate::launch_env::read(&p.born.peer.cwd, "pager");
        assert_eq!(env.var("PAGER_RUNTIME_BIN"), Some("/opt/beeper"));
        let long = provision_declared(&paths, &m, &m.peers[1]).unwrap();
        assert!(long.description_skipped);
    }
}

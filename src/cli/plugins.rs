//! `enable <plugin> [peer]` (spec 08 §4): give a peer a capability plugin of the `agfpd`
//! marketplace through its agent runtimes' own plugin commands (`plugins`).

use super::error::fail;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{done, paths, required, CliError, CliResult};
use crate::plugins;
use crate::registry::{Registry, RegistryPeer};

/// `enable --json`: `{"plugin","personality","runtimes":[…],"setup"}`.
#[derive(Debug, serde::Serialize)]
pub struct EnabledDoc<'a> {
    /// The plugin named.
    pub plugin: &'a str,
    /// The peer.
    pub personality: &'a str,
    /// What happened on each Claude or Codex runtime.
    pub runtimes: Vec<EnabledRow>,
    /// The setup step: `ran`, `none`, `skipped` or `failed: <why>`.
    pub setup: &'a str,
}

/// One runtime of `enable --json`.
#[derive(Debug, serde::Serialize)]
pub struct EnabledRow {
    /// The runtime.
    pub runtime: String,
    /// `already`, `installed`, `runtime-missing` or `failed`.
    pub state: &'static str,
    /// Where the plugin is installed, if known.
    pub path: Option<std::path::PathBuf>,
    /// Why it failed.
    pub error: Option<String>,
}

/// The peer named, else the one whose folder is the current directory.
fn target(inv: &Invocation) -> Result<RegistryPeer, CliError> {
    let paths = paths()?;
    let registry = Registry::load(&paths)?;
    if let Some(name) = inv.positional(args::SOME_PEER) {
        return registry
            .find(name)
            .cloned()
            .ok_or_else(|| super::suggest::not_registered(&paths, name));
    }
    let here = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| fail(format!("cannot read the current folder: {e}")))?;
    registry
        .peers
        .iter()
        .find(|p| p.cwd.canonicalize().is_ok_and(|c| c == here))
        .cloned()
        .ok_or_else(|| {
            fail(format!(
                "{} is not a peer's folder — name the peer (iapeer enable <plugin> <peer>) or run iapeer init here first",
                here.display()
            ))
        })
}

/// `enable <plugin> [peer] [--no-setup]`: one line per agent runtime (`already`,
/// `installed`, `runtime-missing`, `failed`), then the plugin's setup step. Exit 1 when an
/// install or the setup failed.
pub fn enable(inv: &Invocation) -> CliResult {
    let plugin = required(inv, args::PLUGIN)?;
    let peer = target(inv)?;
    let runtimes: Vec<&String> = peer
        .runtimes
        .iter()
        .filter(|r| crate::runtime_table::get(r).is_some_and(|row| row.plugins.is_some()))
        .collect();
    if runtimes.is_empty() {
        return Err(fail(format!(
            "peer \"{}\" has no Claude or Codex runtime (runtimes: {}); plugins are for agents — iapeer add-runtime claude --peer {} first",
            peer.personality,
            peer.runtimes.join(", "),
            peer.personality
        )));
    }
    let mut text = String::new();
    let mut rows = Vec::new();
    let mut failed = false;
    let mut root = None;
    for rt in runtimes {
        let (outcome, installed) = plugins::enable_on(rt, plugin, &peer.cwd);
        let detail = outcome.failure().map(str::to_string);
        failed |= detail.is_some();
        text.push_str(&format!(
            "{} {rt}: {plugin}@{} {}{}\n",
            peer.personality,
            plugins::MARKETPLACE,
            outcome.word(),
            detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ));
        rows.push(EnabledRow {
            runtime: rt.clone(),
            state: outcome.word(),
            path: installed.clone(),
            error: detail,
        });
        root = root.or(installed);
    }
    let setup = match (&root, inv.flag(flags::NO_SETUP)) {
        (_, true) => "skipped".to_string(),
        (None, false) => "none".to_string(),
        (Some(root), false) => match plugins::run_setup(root, &peer.personality, &peer.cwd) {
            None => "none".to_string(),
            Some(Ok(())) => "ran".to_string(),
            Some(Err(why)) => {
                failed = true;
                format!("failed: {why}")
            }
        },
    };
    text.push_str(&format!("{} setup: {setup}\n", peer.personality));
    done(
        inv,
        &EnabledDoc {
            plugin,
            personality: &peer.personality,
            runtimes: rows,
            setup: &setup,
        },
        &text,
    )?;
    if failed {
        return Err(CliError::Exit(1));
    }
    Ok(())
}

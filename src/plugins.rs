//! Capability plugins (spec 08 §4, `iapeer enable`): a peer gets a plugin of the `agfpd`
//! marketplace through each agent runtime's own plugin commands, and the plugin's optional
//! `iapeer.json` `setup` step runs after. The commands and their answers were recorded from
//! the real programs (`tests/fixtures/claude-2.1.332/plugins/`,
//! `tests/fixtures/codex-0.171.0/plugins/`):
//!
//! - Claude Code: `claude plugin list --json` (run in the peer folder: a flat array; the
//!   peer's entry is the `project`-scope one whose `projectPath` is the folder), `claude
//!   plugin install <p>@agfpd --scope project` in the peer folder, `claude plugin marketplace
//!   update agfpd` to refresh;
//! - Codex: `codex plugin list --json` (`installed[]` by `pluginId`),
//!   `codex plugin add <p>@agfpd` (host-wide; its last line names the installed root),
//!   `codex plugin marketplace upgrade agfpd` to refresh.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::child;
use crate::runtime_table::PluginDialect;

/// The marketplace plugins come from.
pub const MARKETPLACE: &str = "agfpd";

/// Deadline of `plugin list` (read-only), in seconds.
const LIST_SECS: u64 = 60;
/// Deadline of an install or a marketplace refresh (may fetch from the network).
const INSTALL_SECS: u64 = 120;
/// Deadline of a plugin's own `setup` step (an installer of its own).
const SETUP_SECS: u64 = 300;

/// What `enable` did on one runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeOutcome {
    /// The plugin was already there for this peer.
    Already,
    /// Installed now (after a marketplace refresh when the first try failed).
    Installed,
    /// The runtime's program is not on this host: nothing to do, not a failure.
    RuntimeMissing,
    /// The install failed twice (the runtime's words).
    Failed(String),
}

impl RuntimeOutcome {
    /// `already`, `installed`, `runtime-missing` or `failed`.
    pub fn word(&self) -> &'static str {
        match self {
            RuntimeOutcome::Already => "already",
            RuntimeOutcome::Installed => "installed",
            RuntimeOutcome::RuntimeMissing => "runtime-missing",
            RuntimeOutcome::Failed(_) => "failed",
        }
    }

    /// The runtime's words when the install failed; `None` when it did not.
    pub fn failure(&self) -> Option<&str> {
        match self {
            RuntimeOutcome::Failed(why) => Some(why),
            _ => None,
        }
    }
}

/// The install path of `<plugin>@agfpd` for the peer folder `cwd` in the output of `claude
/// plugin list --json`: the project-scope entry whose `projectPath` is `cwd` (real paths
/// compared). `Some(None)` when the entry has no install path.
pub fn claude_entry(list: &str, plugin: &str, cwd: &Path) -> Option<Option<PathBuf>> {
    let v: Value = serde_json::from_str(list).ok()?;
    let id = format!("{plugin}@{MARKETPLACE}");
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let want = real(cwd);
    v.as_array()?
        .iter()
        .find(|e| {
            e["id"] == id.as_str()
                && e["scope"] == "project"
                && e["projectPath"]
                    .as_str()
                    .is_some_and(|p| real(Path::new(p)) == want)
        })
        .map(|e| e["installPath"].as_str().map(PathBuf::from))
}

/// Whether `codex plugin list --json` lists `<plugin>@agfpd` as installed, with its version.
pub fn codex_entry(list: &str, plugin: &str) -> Option<Option<String>> {
    let v: Value = serde_json::from_str(list).ok()?;
    let id = format!("{plugin}@{MARKETPLACE}");
    v["installed"]
        .as_array()?
        .iter()
        .find(|e| e["pluginId"] == id.as_str() && e["installed"] != false)
        .map(|e| e["version"].as_str().map(String::from))
}

/// The root `codex plugin add` names on its line `Installed plugin root: <path>`.
pub fn codex_added_root(stdout: &str) -> Option<PathBuf> {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("Installed plugin root:"))
        .map(|p| PathBuf::from(p.trim()))
        .filter(|p| p.is_absolute())
}

/// Where Codex keeps an installed plugin: `<codex home>/plugins/cache/agfpd/<p>/<version>`.
fn codex_root(plugin: &str, version: &str) -> Option<PathBuf> {
    Some(
        crate::runtime::codex_setup::codex_home()?
            .join("plugins/cache")
            .join(MARKETPLACE)
            .join(plugin)
            .join(version),
    )
}

/// A plugin's `setup` step from its `iapeer.json`: a command (relative to the plugin's
/// folder unless absolute) and its arguments. `None` when there is none or the file is not
/// what it should be (the install stands either way).
pub fn setup_step(manifest: &str, plugin_root: &Path) -> Option<(PathBuf, Vec<String>)> {
    let v: Value = serde_json::from_str(manifest).ok()?;
    let (command, args) = match &v["setup"] {
        Value::String(s) => (s.as_str(), Vec::new()),
        Value::Object(o) => (
            o.get("command")?.as_str()?,
            o.get("args")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        _ => return None,
    };
    let command = command.trim();
    if command.is_empty() {
        return None;
    }
    Some((plugin_root.join(command), args))
}

fn run(bin: &Path, args: &[&str], cwd: &Path, secs: u64) -> child::Finished {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    child::run(bin, &args, cwd, &[], Duration::from_secs(secs))
}

/// Enable `plugin` on `runtime` (one with a [`PluginDialect`] in its row: `claude`, `codex`)
/// for the peer folder `cwd`: check the runtime's list first, install when absent, refresh
/// the marketplace once and retry on failure. Returns the outcome and, when known, the
/// plugin's installed folder; [`RuntimeOutcome::RuntimeMissing`] when its program is not
/// found (or it takes no plugins).
pub fn enable_on(runtime: &str, plugin: &str, cwd: &Path) -> (RuntimeOutcome, Option<PathBuf>) {
    let Some(dialect) = crate::runtime_table::get(runtime).and_then(|r| r.plugins) else {
        return (RuntimeOutcome::RuntimeMissing, None);
    };
    let Some(bin) = crate::runtime::agent_program::locate(runtime).program else {
        return (RuntimeOutcome::RuntimeMissing, None);
    };
    let id = format!("{plugin}@{MARKETPLACE}");
    let find = || {
        let list = run(&bin, &["plugin", "list", "--json"], cwd, LIST_SECS).stdout;
        match dialect {
            PluginDialect::Claude => claude_entry(&list, plugin, cwd),
            PluginDialect::Codex => codex_entry(&list, plugin)
                .map(|v| v.and_then(|version| codex_root(plugin, &version))),
        }
    };
    if let Some(root) = find() {
        return (RuntimeOutcome::Already, root);
    }
    let install = || match dialect {
        PluginDialect::Claude => run(
            &bin,
            &["plugin", "install", &id, "--scope", "project"],
            cwd,
            INSTALL_SECS,
        ),
        PluginDialect::Codex => run(&bin, &["plugin", "add", &id], cwd, INSTALL_SECS),
    };
    let mut done = install();
    if !done.ok() {
        let refresh: &[&str] = match dialect {
            PluginDialect::Claude => &["plugin", "marketplace", "update", MARKETPLACE],
            PluginDialect::Codex => &["plugin", "marketplace", "upgrade", MARKETPLACE],
        };
        run(&bin, refresh, cwd, INSTALL_SECS);
        done = install();
    }
    if !done.ok() {
        return (RuntimeOutcome::Failed(done.tail(300)), None);
    }
    let root = codex_added_root(&done.stdout).or_else(|| find().flatten());
    (RuntimeOutcome::Installed, root)
}

/// Run the plugin's `setup` step found in `<root>/iapeer.json`, in the plugin's folder, with
/// `IAPEER_PEER_PERSONALITY` and `IAPEER_PEER_CWD`. `None` when it declares none; else
/// `Ok(())` or the failure's words.
pub fn run_setup(root: &Path, personality: &str, cwd: &Path) -> Option<Result<(), String>> {
    let manifest = std::fs::read_to_string(root.join("iapeer.json")).ok()?;
    let (command, args) = setup_step(&manifest, root)?;
    let cwd_text = cwd.to_string_lossy();
    let done = child::run(
        &command,
        &args,
        root,
        &[
            ("IAPEER_PEER_PERSONALITY", personality),
            ("IAPEER_PEER_CWD", &cwd_text),
        ],
        Duration::from_secs(SETUP_SECS),
    );
    Some(if done.ok() {
        Ok(())
    } else {
        Err(format!(
            "{} ended {:?}: {}",
            command.display(),
            done.ending,
            done.tail(300)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(path),
        )
        .unwrap()
    }

    #[test]
    fn the_peer_s_claude_entry_is_its_project_scope_one() {
        let list = fixture("claude-2.1.332/plugins/list-after-project-install.json");
        let proj = Path::new("/tmp/plg/proj");
        assert_eq!(
            claude_entry(&list, "recall", proj),
            Some(Some(PathBuf::from(
                "/tmp/plg/home/.claude/plugins/cache/agfpd/recall/1.0.0"
            )))
        );
        assert_eq!(
            claude_entry(&list, "recall", Path::new("/tmp/plg/other")),
            None
        );
        assert_eq!(claude_entry(&list, "nope", proj), None);
        assert_eq!(claude_entry("not json", "recall", proj), None);
    }

    #[test]
    fn codex_lists_installed_plugins_and_names_the_added_root() {
        let list = fixture("codex-0.171.0/plugins/list-after-add.json");
        assert_eq!(codex_entry(&list, "recall"), Some(Some("1.0.0".into())));
        assert_eq!(codex_entry(&list, "nope"), None);
        assert_eq!(
            codex_added_root(&fixture("codex-0.171.0/plugins/add.txt")),
            Some(PathBuf::from(
                "/tmp/plg/home/.codex/plugins/cache/agfpd/recall/1.0.0"
            ))
        );
        assert_eq!(codex_added_root("Added plugin"), None);
    }

    #[test]
    fn the_setup_step_is_a_command_in_the_plugin_folder() {
        let root = Path::new("/p");
        assert_eq!(
            setup_step(r#"{"setup":"./setup.sh"}"#, root),
            Some((PathBuf::from("/p/./setup.sh"), vec![]))
        );
        assert_eq!(
            setup_step(r#"{"setup":{"command":"/bin/x","args":["a",1,"b"]}}"#, root),
            Some((PathBuf::from("/bin/x"), vec!["a".into(), "b".into()]))
        );
        for none in [r#"{}"#, r#"{"setup":""}"#, r#"{"setup":3}"#, "junk"] {
            assert_eq!(setup_step(none, root), None, "{none}");
        }
    }
}

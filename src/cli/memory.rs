//! Memory verbs (spec 08 §3): `native-memory off|on` and `trust-hooks`. The provider's own
//! calls at birth and removal are in `memory::provision`; the status line in `cli::status`.

use std::path::Path;

use toml_edit::DocumentMut;

use super::error::fail;
use super::parse::Invocation;
use super::peers::selected_peers;
use super::spec::{args, flags};
use super::{done, paths, required, usage, CliError, CliResult};
use crate::memory::hook_trust::{self, TrustState, RECORDED_CODEX_VERSION};
use crate::memory::native::{self, Setting};
use crate::runtime::codex_setup;

/// `native-memory --json`: `{"setting":"off"|"on","levers":[…]}`.
#[derive(Debug, serde::Serialize)]
pub struct LeversDoc {
    /// The setting asked for.
    pub setting: &'static str,
    /// Each runtime's lever.
    pub levers: Vec<LeverRow>,
}

/// One lever of `native-memory --json`.
#[derive(Debug, serde::Serialize)]
pub struct LeverRow {
    /// The peer.
    pub personality: String,
    /// The runtime.
    pub runtime: String,
    /// The settings file.
    pub file: std::path::PathBuf,
    /// `written`, `already` or `failed`.
    pub state: &'static str,
    /// Why it failed.
    pub error: Option<String>,
}

/// `trust-hooks --check --json`: `{"file","trusted","hooks":[{"key","command","state"}…]}`.
#[derive(Debug, serde::Serialize)]
pub struct HooksChecked<'a> {
    /// The hooks file.
    pub file: &'a str,
    /// Whether every hook is trusted.
    pub trusted: bool,
    /// Each command hook.
    pub hooks: Vec<HookRow<'a>>,
}

/// One hook of `trust-hooks --check --json`.
#[derive(Debug, serde::Serialize)]
pub struct HookRow<'a> {
    /// `<file>:<event label>:<group index>:<handler index>`.
    pub key: &'a str,
    /// The command it runs.
    pub command: &'a str,
    /// Its trust state.
    pub state: &'static str,
}

/// `trust-hooks --json`: `{"file","config","changed","hooks":[<key>…]}`.
#[derive(Debug, serde::Serialize)]
pub struct HooksTrusted<'a> {
    /// The hooks file.
    pub file: &'a str,
    /// Codex's config file the trust is written to.
    pub config: &'a std::path::Path,
    /// Whether the config changed.
    pub changed: bool,
    /// The hooks' keys.
    pub hooks: Vec<&'a str>,
}

/// `native-memory <off|on> (--peer <p> | --all)`: flip each agent runtime's own memory in
/// the peers' folders; one line per lever (`written`, `already`, `failed`). Exit 1 when a
/// lever failed (after every lever was tried).
pub fn native_memory(inv: &Invocation) -> CliResult {
    let word = inv
        .positional(args::SETTING)
        .ok_or_else(|| usage(inv, "missing <setting> (off or on)"))?;
    let setting = Setting::parse(word)
        .ok_or_else(|| usage(inv, format!("<setting> is off or on, not \"{word}\"")))?;
    let paths = paths()?;
    let mut text = String::new();
    let mut rows = Vec::new();
    let mut failed = false;
    for peer in selected_peers(&paths, inv)? {
        let mut any = false;
        for rt in &peer.runtimes {
            let Some((file, state)) = native::set(rt, &peer.cwd, setting) else {
                continue;
            };
            any = true;
            let why = state.failure().map(str::to_string);
            failed |= why.is_some();
            text.push_str(&format!(
                "{}: {rt} {}{}\n",
                peer.personality,
                state.word(),
                why.as_deref()
                    .map_or_else(|| format!(" ({})", file.display()), |w| format!(": {w}"))
            ));
            rows.push(LeverRow {
                personality: peer.personality.clone(),
                runtime: rt.clone(),
                file,
                state: state.word(),
                error: why,
            });
        }
        if !any {
            text.push_str(&format!(
                "{}: no runtime with a native memory (runtimes: {})\n",
                peer.personality,
                peer.runtimes.join(", ")
            ));
        }
    }
    let setting = if setting == Setting::Off { "off" } else { "on" };
    done(
        inv,
        &LeversDoc {
            setting,
            levers: rows,
        },
        &text,
    )?;
    if failed {
        return Err(CliError::Exit(1));
    }
    Ok(())
}

/// `trust-hooks <hooks-file> [--check]`: record Codex trust for every command hook of the
/// file in `$CODEX_HOME/config.toml` (the format of Codex [`RECORDED_CODEX_VERSION`]), or
/// with `--check` report each as `trusted`, `missing` or `drift` and exit 1 unless all are
/// trusted. The first line of the output says what was done (`trusted …` or
/// `already trusted …`).
pub fn trust_hooks(inv: &Invocation) -> CliResult {
    let given = required(inv, args::HOOKS_FILE)?;
    // Codex keys each hook by the real path of its file.
    let real = Path::new(given)
        .canonicalize()
        .map_err(|e| fail(format!("cannot read {given}: {e}")))?;
    let text = std::fs::read_to_string(&real)
        .map_err(|e| fail(format!("cannot read {}: {e}", real.display())))?;
    let file = real.to_string_lossy().into_owned();
    let hooks = hook_trust::hooks_in(&file, &text).map_err(|e| {
        fail(format!(
            "{file} is not a Codex hooks file ({e}); it must be {{\"hooks\": {{\"<Event>\": [{{\"hooks\": [{{\"type\": \"command\", \"command\": …}}]}}]}}}}"
        ))
    })?;
    if let Some(note) = version_note(installed_codex_version().as_deref()) {
        eprintln!("note: {note}");
    }
    let config = codex_setup::config_path()
        .ok_or_else(|| fail("cannot find the Codex config folder: set CODEX_HOME or HOME"))?;
    if inv.flag(flags::CHECK) {
        let current = crate::fsutil::read_optional(&config)
            .map_err(|e| fail(format!("cannot read {}: {e}", config.display())))?
            .unwrap_or_default();
        let doc: DocumentMut = current
            .parse()
            .map_err(|e| fail(format!("{} is not valid TOML: {e}", config.display())))?;
        let states: Vec<_> = hooks
            .iter()
            .map(|h| (h, hook_trust::state_of(&doc, h)))
            .collect();
        let all = states.iter().all(|(_, s)| *s == TrustState::Trusted);
        let mut out = String::new();
        if hooks.is_empty() {
            out.push_str(&format!("no command hooks in {file}\n"));
        }
        for (h, s) in &states {
            out.push_str(&format!("{} {}\n", s.as_str(), h.key));
        }
        if !all {
            out.push_str(&format!(
                "run iapeer trust-hooks {file} to trust them (a changed hook needs its owner's review first)\n"
            ));
        }
        let rows: Vec<_> = states
            .iter()
            .map(|(h, s)| HookRow {
                key: &h.key,
                command: &h.command,
                state: s.as_str(),
            })
            .collect();
        done(
            inv,
            &HooksChecked {
                file: &file,
                trusted: all,
                hooks: rows,
            },
            &out,
        )?;
        return if all { Ok(()) } else { Err(CliError::Exit(1)) };
    }
    let changed =
        codex_setup::edit_config(|d| hook_trust::trust(d, &file, &hooks)).map_err(fail)?;
    let mut out = format!(
        "{} {} hook{} of {file} in {}\n",
        if changed {
            "trusted"
        } else {
            "already trusted:"
        },
        hooks.len(),
        if hooks.len() == 1 { "" } else { "s" },
        config.display()
    );
    for h in &hooks {
        out.push_str(&format!("  {}\n", h.key));
    }
    let keys: Vec<_> = hooks.iter().map(|h| h.key.as_str()).collect();
    done(
        inv,
        &HooksTrusted {
            file: &file,
            config: &config,
            changed,
            hooks: keys,
        },
        &out,
    )
}

/// The version `codex --version` prints (`codex-cli 0.171.0` → `0.171.0`), if Codex is
/// installed and answers.
fn installed_codex_version() -> Option<String> {
    let bin = crate::runtime::codex::resolve_binary()?;
    let out = std::process::Command::new(bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_codex_version(&String::from_utf8_lossy(&out.stdout))
}

/// `0.171.0` from `codex-cli 0.171.0`.
fn parse_codex_version(text: &str) -> Option<String> {
    text.split_whitespace()
        .last()
        .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(String::from)
}

/// What to tell the user when the installed Codex is not the version whose format is
/// written (`None` when it is).
fn version_note(installed: Option<&str>) -> Option<String> {
    match installed {
        Some(v) if v == RECORDED_CODEX_VERSION => None,
        Some(v) => Some(format!(
            "the hook-trust format written is Codex {RECORDED_CODEX_VERSION}'s; the installed Codex is {v} — \
             if codex still asks to review these hooks, its format changed (report it)"
        )),
        None => Some(format!(
            "Codex is not installed (codex on PATH or IAPEER_CODEX_BIN); the trust is written in \
             Codex {RECORDED_CODEX_VERSION}'s format"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installed_version_is_read_from_codex_s_answer() {
        assert_eq!(
            parse_codex_version("codex-cli 0.171.0\n").as_deref(),
            Some("0.171.0")
        );
        assert_eq!(parse_codex_version("").as_deref(), None);
        assert_eq!(parse_codex_version("usage: codex").as_deref(), None);
    }

    #[test]
    fn only_another_or_a_missing_codex_gets_a_note() {
        assert_eq!(version_note(Some(RECORDED_CODEX_VERSION)), None);
        assert!(version_note(Some("0.180.0"))
            .unwrap()
            .contains("installed Codex is 0.180.0"));
        assert!(version_note(None).unwrap().contains("not installed"));
    }
}

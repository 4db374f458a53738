//! Runtime adapters (spec 04 §2): one implementation per runtime answers how to launch it,
//! how to read its screen, how to confirm a delivery and how to find its activity.
//!
//! The contract itself (the [`Adapter`] trait and its answer types) lives in
//! [`crate::adapter`] and is re-exported here; screens and keys come from [`crate::term`].

pub mod agent_program;
pub mod api_error;
pub mod claude;
pub mod claude_gate;
pub mod claude_paths;
pub mod claude_screen;
pub mod claude_setup;
pub mod codex;
pub mod codex_gate;
pub mod codex_setup;
pub mod echo;
pub mod folder;
pub mod gemini;
pub mod gemini_setup;
pub mod human;
pub mod manifest;
pub mod notifier;
pub mod opencode;
pub mod opencode_records;
pub mod original_hook;
pub mod own_verb;
pub mod package;
pub mod pasted_form;
pub mod permission_hook;
pub mod router;
pub mod terminal;
pub mod transcript;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::adapter::{
    Acceptance, Adapter, BootStep, CompactOutcome, CompactRefused, CompactWatch, Confirm,
    ConversationNaming, GateState, GateWatch, LaunchCommand, LaunchCtx, LaunchError, RuntimeKind,
    WakeMode, NO_RECORDED_CONVERSATION,
};
use crate::paths::Paths;
use crate::runtime_table::{Class, McpClient, CLAUDE, CODEX, ECHO, GEMINI, OPENCODE};

/// What iapeer adds to the longest a `send_to_peer` call is held for the tool-call timeout
/// it writes ([`mcp_tool_timeout`]): room for the answer after the send deadline (a send the
/// session held is taken back first, then failed as a timeout) and for a loaded machine.
pub const MCP_TOOL_TIMEOUT_MARGIN: std::time::Duration = std::time::Duration::from_secs(30);

/// The least tool-call timeout iapeer writes for its own MCP server into each agent's MCP
/// client (issue 27): the default send deadline (`IAPEER_SEND_TIMEOUT_MS`, 300 s, spec 03
/// §1; a wake's boot runs within it) plus [`MCP_TOOL_TIMEOUT_MARGIN`]: 330 s. A daemon with a
/// longer send deadline writes a longer one ([`mcp_tool_timeout`]); a peer's birth, which
/// does not know the daemon's setting, writes this one, and the daemon's refresh at each
/// launch ([`refresh_peer`]) raises it. OpenCode's own default (60 s) is shorter than a
/// slow wake. What the setting means in each client, read in its shipped code:
/// - Claude Code 2.1.332, `.mcp.json` `timeout` (ms): "Per-server tool-call timeout in
///   milliseconds ... Hard wall-clock limit per call; progress notifications do not extend
///   it" (its config schema); a total. It also raises the POST's wait for a first byte
///   (`max(timeout, 60 s)`) and the idle limit (5 min for HTTP by default) in its fetch
///   wrapper. Default total 1e8 ms.
/// - Codex 0.171, `tool_timeout_sec` (s): the whole `tools/call` in a `tokio` timeout, a
///   total ("timed out awaiting …" in its binary; openai/codex `codex-rs`
///   `mcp_connection_manager.rs` of earlier versions: `DEFAULT_TOOL_TIMEOUT` 60 s). 0.171's
///   own default is longer than that: a 65 s call succeeded without the setting
///   (`tests/codex.rs`, `a_codex_send_to_peer_that_waits_over_60_s…`); set here so the bound
///   is iapeer's, not the CLI version's.
/// - Gemini CLI 0.61, `mcpServers.*.timeout` (ms): passed as the MCP SDK request `timeout`
///   of `callTool` without `resetTimeoutOnProgress` (its bundle, `McpCallableTool`); a total.
///   Default `MCP_DEFAULT_TIMEOUT_MSEC` 10 min. (Its fetch's separate 60 s `headersTimeout`
///   is met by the daemon's event-stream answer, `daemon::http::listen::HOLD_AS_EVENTS_AFTER`.)
/// - OpenCode 1.18.33, `mcp.*.timeout` (ms): the MCP SDK request `timeout` of `callTool`
///   with `resetTimeoutOnProgress: true` (its binary), reset only by progress notifications,
///   which iapeer does not send: a total here.
pub const MCP_TOOL_TIMEOUT: std::time::Duration = crate::config::vars::IAPEER_SEND_TIMEOUT_MS
    .default_duration()
    .saturating_add(MCP_TOOL_TIMEOUT_MARGIN);

/// The tool-call timeout for a daemon whose send deadline is `send_timeout`: the longest it
/// holds a `send_to_peer` call plus [`MCP_TOOL_TIMEOUT_MARGIN`], never below
/// [`MCP_TOOL_TIMEOUT`] (a shorter send deadline still leaves the usual room). Written into
/// each agent's MCP client at launch, so a call is never cut off by the agent's side while
/// the daemon still holds it.
pub fn mcp_tool_timeout(send_timeout: std::time::Duration) -> std::time::Duration {
    send_timeout
        .saturating_add(MCP_TOOL_TIMEOUT_MARGIN)
        .max(MCP_TOOL_TIMEOUT)
}

/// `timeout` in whole milliseconds, as Claude Code, Gemini CLI and OpenCode take it.
pub fn timeout_ms(timeout: std::time::Duration) -> u64 {
    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)
}

/// The `timeout` (ms) an MCP server entry should have, given the one it has (`existing`) and
/// iapeer's (`ours`, ms): a number at least `ours` (a user's longer one) is kept, anything
/// else becomes `ours`.
pub fn tool_timeout_ms_at_least(
    existing: Option<&serde_json::Value>,
    ours: u64,
) -> serde_json::Value {
    match existing.and_then(serde_json::Value::as_u64) {
        Some(ms) if ms >= ours => serde_json::Value::from(ms),
        _ => serde_json::Value::from(ours),
    }
}

/// Confirmation for runtimes where a complete write is the confirmation (router runtimes).
pub struct WrittenIsConfirmed;

impl Confirm for WrittenIsConfirmed {
    fn confirmed(&mut self, _output: &[u8]) -> bool {
        true
    }
}

/// Why a runtime cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuntimeError {
    /// Not built in and no `runtimes/<rt>/runtime.json`.
    #[error("runtime \"{0}\" is not installed — install its package with iapeer install-runtime {0} [--package <npm package or tarball>] or choose another runtime")]
    NotInstalled(String),
    /// A built-in agent runtime whose program is not found: why, naming every place looked
    /// at ([`agent_program::Lookup::refusal`]).
    #[error("{0}")]
    AgentMissing(String),
    /// The manifest exists but is invalid.
    #[error("{0} is not a valid runtime manifest: {1}")]
    BadManifest(PathBuf, String),
}

/// Why a runtime's setup in a peer's folder or in its host configuration failed
/// ([`setup_peer`], [`refresh_peer`], [`teardown_peer`]). `Display` names the file and, where
/// there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A file could not be read, written, backed up or removed.
    #[error(transparent)]
    Io(crate::fsutil::IoError),
    /// Neither `CODEX_HOME` nor `HOME` is set.
    #[error("cannot find the Codex config folder: set CODEX_HOME or HOME")]
    NoCodexHome,
    /// The Codex config is not valid TOML (it is left alone).
    #[error("{path} is not valid TOML, so iapeer left it alone: {source}")]
    NotToml {
        /// The config file.
        path: PathBuf,
        /// The parser's error.
        source: toml_edit::TomlError,
    },
    /// `HOME` is not set, so Gemini CLI's settings cannot be found.
    #[error("cannot find Gemini CLI's settings (~/.gemini/settings.json): set HOME")]
    NoGeminiHome,
    /// A settings file that is not a JSON object (it is left alone).
    #[error("{path} is not a JSON object, so iapeer left it alone: {why}")]
    NotJson {
        /// The settings file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A setup at a peer's birth failed: fix the file, then run the command again.
    #[error("{0} — fix it, then run the command again")]
    FixAndRetry(#[source] Box<SetupError>),
    /// A codex peer's folder trust could not be removed: it stays (the folder's key).
    #[error("{source} — the trust entry of {key} stays; delete its [projects] table by hand")]
    TrustStays {
        /// The folder's key in `[projects]`.
        key: String,
        /// Why.
        source: Box<SetupError>,
    },
}

impl SetupError {
    /// `cannot <action> <path>: <error>`, for `map_err`.
    pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let at = crate::fsutil::IoError::at(action, path);
        move |e| SetupError::Io(at(e))
    }
}

/// The class of `runtime` as installed here: its runtime table row's, except that a runtime
/// the table does not know ([`Class::Router`] by name) whose installed manifest declares a
/// terminal agent is [`Class::Agent`] (issue 27 item 3). A runtime that is not installed or
/// whose manifest does not load keeps the class its name gives.
pub fn class_installed(paths: &Paths, runtime: &str) -> Class {
    match crate::runtime_table::class_of(runtime) {
        Class::Router => match adapter_for(paths, runtime).map(|a| a.kind()) {
            Ok(RuntimeKind::Agent) => Class::Agent,
            _ => Class::Router,
        },
        class => class,
    }
}

/// The adapter for `runtime`: built-in agent runtimes, else an installed runtime: a terminal
/// agent when its manifest is of kind `terminal` ([`terminal`]), else a router runtime.
///
/// Errors: [`RuntimeError`] when the runtime is unknown or its manifest is invalid.
pub fn adapter_for(paths: &Paths, runtime: &str) -> Result<Arc<dyn Adapter>, RuntimeError> {
    match runtime {
        rt if rt == ECHO.name => Ok(Arc::new(echo::Echo::from_env())),
        crate::names::HUMAN_RUNTIME => Ok(Arc::new(human::from_env())),
        // An installed package manifest takes precedence over the built-in service.
        notifier::NAME => Ok(match manifest::Manifest::load(paths, runtime)? {
            Some(m) => Arc::new(router::RouterRuntime::new(m)),
            None => Arc::new(notifier::from_env()),
        }),
        rt if agent_program::is_located(rt) => {
            let found = agent_program::locate(runtime);
            match found.program.clone() {
                Some(p) => located_adapter(runtime, p),
                None => Err(RuntimeError::AgentMissing(
                    found.refusal().unwrap_or_default(),
                )),
            }
        }
        _ => {
            let manifest = manifest::Manifest::load(paths, runtime)?
                .ok_or_else(|| RuntimeError::NotInstalled(runtime.to_string()))?;
            Ok(match manifest.terminal {
                Some(spec) => {
                    let term = terminal::spec::Terminal::check(spec).map_err(|why| {
                        RuntimeError::BadManifest(paths.runtime_manifest(runtime), why.0)
                    })?;
                    Arc::new(terminal::TerminalAdapter::new(runtime, term))
                }
                None => Arc::new(router::RouterRuntime::new(manifest)),
            })
        }
    }
}

/// A JSON object read from a file, or why the file is not one.
pub(crate) type JsonObject = Result<serde_json::Map<String, serde_json::Value>, String>;

/// A JSON settings file read as an object: `None` when it does not exist, `Some(Err(why))`
/// when it is not a JSON object.
///
/// Errors: [`SetupError::Io`], it could not be read.
pub(crate) fn read_json_object(path: &Path) -> Result<Option<JsonObject>, SetupError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SetupError::io("read", path)(e)),
    };
    Ok(Some(match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(e.to_string()),
    }))
}

/// The runtime's part of a peer's birth (create/init/add-runtime): its MCP configuration and
/// folder trust. A no-op for runtimes that need none.
///
/// Errors: [`SetupError`], a configuration file could not be written (it names the file).
pub fn setup_peer(
    runtime: &str,
    cwd: &Path,
    personality: &str,
    bearer: bool,
) -> Result<(), SetupError> {
    match mcp_client(runtime) {
        McpClient::ProjectFile => claude_setup::setup(cwd, personality, bearer),
        McpClient::HostConfig => codex_setup::setup(cwd, &default_mcp_url(), bearer),
        McpClient::UserSettings => gemini_setup::setup(&default_mcp_url(), bearer),
        McpClient::Environment | McpClient::LaunchConfig | McpClient::None => Ok(()),
    }
}

/// What [`setup_peer`] and the echo agent write in a peer's folder, relative to it (a
/// trailing `/`: everything in that folder): Claude's MCP configuration and its approval,
/// the echo agent's transcript. `remove` of a worktree peer counts them as the peer's, not as
/// work (issue 32 item 8).
pub const FOLDER_FILES: &[&str] = &[".mcp.json", ".claude/settings.local.json", ".echo-agent/"];

/// Bring a peer's MCP configuration for `runtime` to the current form before it wakes (the
/// daemon calls this at every launch; issue 11 item 1): a configuration written by the
/// original TypeScript iapeer, or by an older iapeer, gets the session-token headers, the
/// user's other settings kept; the original's approval hook in the folder's hook files is
/// taken out ([`original_hook`]); its tool-call timeout becomes at least `tool_timeout`
/// (the daemon's [`mcp_tool_timeout`]). A no-op for runtimes without one. Returns whether a
/// file changed.
///
/// Errors: [`SetupError`], a configuration file could not be read or written (it names the
/// file).
pub fn refresh_peer(
    runtime: &str,
    cwd: &Path,
    personality: &str,
    bearer: bool,
    tool_timeout: std::time::Duration,
) -> Result<bool, SetupError> {
    // Launches run on several launcher threads, and the Codex config is one host-wide file:
    // its read-modify-write must not interleave (one peer's trust entry would be lost).
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let config = match mcp_client(runtime) {
        McpClient::ProjectFile => claude_setup::refresh(cwd, personality, bearer, tool_timeout),
        McpClient::HostConfig => codex_setup::refresh(cwd, &default_mcp_url(), bearer),
        McpClient::UserSettings => gemini_setup::refresh(&default_mcp_url(), bearer, tool_timeout),
        McpClient::Environment | McpClient::LaunchConfig | McpClient::None => Ok(false),
    }?;
    let hooks = match mcp_client(runtime) {
        McpClient::ProjectFile | McpClient::HostConfig => !original_hook::remove(cwd)?.is_empty(),
        McpClient::UserSettings
        | McpClient::Environment
        | McpClient::LaunchConfig
        | McpClient::None => false,
    };
    Ok(config || hooks)
}

/// The runtime's part of a peer's removal (`remove`), the counterpart of [`setup_peer`]: codex
/// forgets the folder's trust; other runtimes need nothing undone. The peer's folder and its
/// project files (e.g. claude's `.mcp.json`) are kept.
///
/// Errors: [`SetupError`], a configuration file could not be edited (it names the file and
/// what stays behind).
pub fn teardown_peer(runtime: &str, cwd: &Path) -> Result<(), SetupError> {
    match mcp_client(runtime) {
        McpClient::HostConfig => codex_setup::teardown(cwd),
        _ => Ok(()),
    }
}

/// How `runtime`'s MCP client is configured: its row's, else none (a router package).
fn mcp_client(runtime: &str) -> McpClient {
    crate::runtime_table::get(runtime).map_or(McpClient::None, |r| r.mcp)
}

/// The MCP URL written into configs that cannot expand variables: the running daemon's (from
/// `router.json`), else the default port. Sessions override it at launch with the real port.
pub fn default_mcp_url() -> String {
    crate::paths::Paths::from_env()
        .ok()
        .and_then(|p| std::fs::read_to_string(p.router_json()).ok())
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["tcp"].as_str().map(String::from))
        .unwrap_or_else(|| "http://127.0.0.1:8765/mcp".to_string())
}

/// This very binary's path: the program of the built-in runtimes (`echo`, `human`,
/// `notifier`); `iapeer`, looked up on `PATH`, when the OS cannot say.
///
/// A binary replaced under the running daemon (an install, `update`, a rebuild) is reported
/// by Linux as `<path> (deleted)`: the file now at `<path>` is used (the same install, newer),
/// and when nothing is there any more, the daemon's own image through `/proc/self/exe`
/// (issue 26 follow-up: before, no built-in session could start after a rebuild).
pub fn this_binary() -> std::ffi::OsString {
    match std::env::current_exe() {
        Ok(p) => running_binary(p, |c| c.is_file()).into_os_string(),
        Err(_) => "iapeer".into(),
    }
}

/// [`this_binary`]'s rule for the path the OS gives (`exists` tells whether a path holds a
/// file): a path that does not end in ` (deleted)` as it is; else that path without the
/// suffix when a file is there, else `/proc/self/exe`.
fn running_binary(reported: PathBuf, exists: impl Fn(&std::path::Path) -> bool) -> PathBuf {
    let Some(live) = reported
        .to_str()
        .and_then(|s| s.strip_suffix(" (deleted)"))
        .map(PathBuf::from)
    else {
        return reported;
    };
    if exists(&live) {
        live
    } else {
        PathBuf::from("/proc/self/exe")
    }
}

/// The launch of a built-in runtime hosted on pipes whose program is this very binary:
/// `<program> <verb> <the profile's start args…>`, with `IAPEER_ROOT` set to the daemon's
/// root (the program reads and stores under it, whatever its own environment says).
pub fn own_verb_command(program: &std::ffi::OsStr, verb: &str, ctx: &LaunchCtx) -> LaunchCommand {
    let mut args: Vec<std::ffi::OsString> = vec![verb.into()];
    args.extend(ctx.launch_env.start_args.iter().map(Into::into));
    LaunchCommand {
        program: program.to_owned(),
        args,
        extra_env: vec![(
            "IAPEER_ROOT".into(),
            ctx.paths.root().to_string_lossy().into_owned(),
        )],
    }
}

/// The adapter the daemon launches `runtime` with, without looking for an agent runtime's
/// program (which may block on the login shell, [`agent_program`]): Claude Code's and the
/// Codex CLI's adapters name their program by its bare name, and the launch finds it off the
/// router thread ([`agent_program::locate`]). Other runtimes as [`adapter_for`].
///
/// Errors: as [`adapter_for`], never for `claude` or `codex`.
pub fn launch_adapter_for(paths: &Paths, runtime: &str) -> Result<Arc<dyn Adapter>, RuntimeError> {
    match runtime {
        rt if agent_program::is_located(rt) => located_adapter(rt, rt.into()),
        _ => adapter_for(paths, runtime),
    }
}

/// The adapter of an agent runtime whose program is looked for ([`agent_program`]), running
/// `program`.
///
/// Errors: [`RuntimeError::NotInstalled`] for a runtime without such an adapter.
fn located_adapter(runtime: &str, program: PathBuf) -> Result<Arc<dyn Adapter>, RuntimeError> {
    match runtime {
        rt if rt == CLAUDE.name => Ok(Arc::new(claude::Claude::with_program(program))),
        rt if rt == CODEX.name => Ok(Arc::new(codex::Codex::with_program(program))),
        rt if rt == GEMINI.name => Ok(Arc::new(gemini::Gemini::with_program(program))),
        rt if rt == OPENCODE.name => Ok(Arc::new(opencode::OpenCode::with_program(program))),
        _ => Err(RuntimeError::NotInstalled(runtime.to_string())),
    }
}

/// Whether `runtime` can be used on this host (built in, or installed with a valid manifest).
pub fn is_installed(paths: &Paths, runtime: &str) -> bool {
    adapter_for(paths, runtime).is_ok()
}

/// Newest modification time (epoch ms) among `files`; missing files are skipped.
pub fn newest_mtime_ms<'a>(files: impl IntoIterator<Item = &'a Path>) -> Option<u64> {
    files
        .into_iter()
        .filter_map(|p| std::fs::metadata(p).ok()?.modified().ok())
        .filter_map(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
        .max()
}

#[cfg(test)]
mod this_binary_tests {
    use super::running_binary;
    use std::path::{Path, PathBuf};

    #[test]
    fn a_replaced_binary_is_found_at_its_path_else_through_proc() {
        let p = |s: &str| PathBuf::from(s);
        let there = |c: &Path| c == Path::new("/opt/bin/iapeer");
        assert_eq!(
            running_binary(p("/opt/bin/iapeer"), there),
            p("/opt/bin/iapeer")
        );
        assert_eq!(
            running_binary(p("/opt/bin/iapeer (deleted)"), there),
            p("/opt/bin/iapeer")
        );
        assert_eq!(
            running_binary(p("/gone/iapeer (deleted)"), there),
            p("/proc/self/exe")
        );
    }
}

#[cfg(test)]
mod tool_timeout_tests {
    use super::{mcp_tool_timeout, timeout_ms, tool_timeout_ms_at_least, MCP_TOOL_TIMEOUT};
    use serde_json::json;
    use std::time::Duration;

    /// Issue 27: the tool-call timeout follows the daemon's send deadline (plus 30 s), and
    /// is never below 330 s.
    #[test]
    fn the_tool_timeout_is_the_send_deadline_plus_its_margin_at_least_330_s() {
        assert_eq!(MCP_TOOL_TIMEOUT, Duration::from_secs(330));
        let secs = |s| mcp_tool_timeout(Duration::from_secs(s)).as_secs();
        assert_eq!(secs(300), 330, "the default");
        assert_eq!(secs(600), 630);
        assert_eq!(secs(3600), 3630);
        assert_eq!(secs(30), 330, "a shorter deadline keeps the usual room");
        assert_eq!(secs(0), 330);
        assert_eq!(
            mcp_tool_timeout(Duration::MAX),
            Duration::MAX,
            "no overflow"
        );
        assert_eq!(timeout_ms(Duration::from_secs(630)), 630_000);
        assert_eq!(timeout_ms(Duration::MAX), u64::MAX);
        // An entry's own timeout is kept only when it is at least ours.
        assert_eq!(
            tool_timeout_ms_at_least(Some(&json!(700_000)), 630_000),
            700_000
        );
        assert_eq!(
            tool_timeout_ms_at_least(Some(&json!(330_000)), 630_000),
            630_000
        );
        assert_eq!(
            tool_timeout_ms_at_least(Some(&json!("x")), 630_000),
            630_000
        );
        assert_eq!(tool_timeout_ms_at_least(None, 330_000), 330_000);
    }
}

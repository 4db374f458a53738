//! Runtime adapters (spec 04 §2): one implementation per runtime answers how to launch it,
//! how to read its screen, how to confirm a delivery and how to find its activity.

pub mod claude;
pub mod claude_screen;
pub mod claude_setup;
pub mod codex;
pub mod codex_setup;
pub mod dialog;
pub mod echo;
pub mod manifest;
pub mod router;
pub mod transcript;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::launch_env::LaunchEnv;
use crate::paths::Paths;
use crate::term::Screen;

/// How a runtime's sessions are hosted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    /// An agent TUI in a pty (claude, codex, echo): woken on demand, slept when idle.
    Agent,
    /// A router runtime on pipes (telegram, notifier, packages): always on.
    Router,
}

/// Fresh conversation or resume of the previous one (spec 05 §2 step 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeMode {
    /// A new conversation.
    Fresh,
    /// Continue the last conversation of this working folder.
    Resume,
}

impl WakeMode {
    /// The logfmt spelling (`mode=` in `lifecycle.log`).
    pub fn as_str(self) -> &'static str {
        match self {
            WakeMode::Fresh => "fresh",
            WakeMode::Resume => "resume",
        }
    }
}

/// Everything an adapter needs to build a launch command.
pub struct LaunchCtx<'a> {
    /// The storage layout.
    pub paths: &'a Paths,
    /// The peer's working folder.
    pub cwd: &'a Path,
    /// Fresh or resume.
    pub mode: WakeMode,
    /// The composed system prompt file, for runtimes that take one.
    pub system_prompt: Option<&'a Path>,
    /// The peer's `launch.env` for this runtime.
    pub launch_env: &'a LaunchEnv,
    /// The daemon's loopback HTTP port (for runtimes whose MCP URL cannot expand variables).
    pub port: u16,
}

/// Program, arguments and runtime-specific environment of one launch.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchCommand {
    /// The program (absolute path or a name looked up in `PATH`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Extra environment set last (after hygiene), e.g. `CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN`.
    pub extra_env: Vec<(String, String)>,
}

/// What to do with the screen during boot.
#[derive(Debug, Clone, PartialEq)]
pub enum BootStep {
    /// Nothing recognised yet: wait for more output.
    Wait,
    /// A dialog is up: write these bytes (one key), labelled for progress lines.
    Key {
        /// The key bytes.
        bytes: Vec<u8>,
        /// What is being answered, e.g. `trust this folder → Yes, I trust this folder`.
        label: String,
    },
    /// Ready for input.
    Ready,
    /// Boot cannot succeed (e.g. not logged in): the reason for the waiting sender.
    Fail(String),
}

/// Decides whether one delivery has been accepted by the runtime (spec 04 §1 table).
pub trait Confirm: Send {
    /// `output` is everything the child printed since the delivery started (capped).
    /// Returns true once the delivery is confirmed.
    fn confirmed(&mut self, output: &[u8]) -> bool;
}

/// How a compaction ended (spec 05 §5 `compact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactOutcome {
    /// The runtime wrote its completion record.
    Compacted,
    /// The runtime said there was nothing to compact (an honest, non-error outcome).
    NothingToCompact,
}

impl CompactOutcome {
    /// The wire spelling (`compacted`, `nothing-to-compact`).
    pub fn as_str(self) -> &'static str {
        match self {
            CompactOutcome::Compacted => "compacted",
            CompactOutcome::NothingToCompact => "nothing-to-compact",
        }
    }
}

/// Watches one compaction for its end.
pub trait CompactWatch: Send {
    /// `Some` once the compaction is over; `screen` is the current screen text.
    fn poll(&mut self, screen: &str) -> Option<CompactOutcome>;
}

/// Where a ready gate stands (spec 05 §2 step 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateState {
    /// No proof yet that the model started a turn.
    Pending,
    /// The model started a turn.
    Passed,
    /// The turn cannot start; the reason names the problem.
    Failed(String),
}

/// A runtime-specific ready gate, for runtimes whose transcript is written before the model
/// answers (so a bare activity time proves nothing).
pub trait GateWatch: Send {
    /// Check again; `screen` is the current screen text.
    fn poll(&mut self, screen: &str) -> GateState;
}

/// One runtime's behaviour. Implementations are stateless and shared.
pub trait Adapter: Send + Sync {
    /// The runtime name (`echo`, `claude`, …).
    fn name(&self) -> &str;
    /// Agent (pty) or router (pipes).
    fn kind(&self) -> RuntimeKind;
    /// Build the launch command. Errors are wake failure reasons (e.g. `no transcript to resume`).
    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, String>;
    /// Whether the runtime receives the composed system prompt (spec 06).
    fn wants_system_prompt(&self) -> bool {
        self.kind() == RuntimeKind::Agent
    }
    /// Boot: read the screen and say what to do (agent runtimes only).
    fn boot_step(&self, _screen: &Screen) -> BootStep {
        BootStep::Ready
    }
    /// Whether the boot should also wait for the agent's MCP client to connect (it lists the
    /// daemon's tools), so the first turn already has `send_to_peer`. True when the peer's
    /// configuration points the runtime at the daemon.
    fn waits_for_mcp(&self, _cwd: &Path) -> bool {
        false
    }
    /// The glyph that starts the composer row (`❯` for claude and echo, `›` for codex), for
    /// runtimes with a composer.
    fn prompt_glyph(&self) -> Option<&'static str> {
        None
    }
    /// How long the ready screen must stay ready before input is accepted.
    fn ready_settle(&self) -> Duration {
        Duration::ZERO
    }
    /// Whether the screen shows the runtime mid-turn.
    fn is_busy(&self, _screen: &Screen) -> bool {
        false
    }
    /// Start confirming one delivery of `text` (exactly what is pasted) into a session whose
    /// working folder is `cwd`; `agent_ts` is the envelope's agent-form `ts`.
    fn confirmer(&self, cwd: &Path, text: &str, agent_ts: Option<&str>) -> Box<dyn Confirm>;
    /// A runtime-specific ready gate, started just before the first message is pasted.
    /// `None` = the generic gate: the activity time must advance.
    fn gate_watch(&self, _cwd: &Path) -> Option<Box<dyn GateWatch>> {
        None
    }
    /// Newest activity time of the runtime for `cwd` (epoch ms), from its transcripts.
    fn activity_ms(&self, _cwd: &Path) -> Option<u64> {
        None
    }
    /// Whether a conversation exists to resume in `cwd`.
    fn resumable(&self, _cwd: &Path) -> bool {
        false
    }
    /// The keys that interrupt a turn, if the runtime supports control commands.
    fn interrupt_keys(&self) -> Option<Vec<u8>> {
        None
    }
    /// The command that compacts the conversation and a watcher for its end, when the
    /// runtime supports compaction.
    fn compact(&self, _cwd: &Path) -> Option<(&'static str, Box<dyn CompactWatch>)> {
        None
    }
    /// A better reason for an exit during boot, read from the last screen text.
    fn explain_exit(&self, _screen_text: &str) -> Option<String> {
        None
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
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeError {
    /// Not built in and no `runtimes/<rt>/runtime.json`.
    NotInstalled(String),
    /// A built-in agent runtime whose program is not installed: (runtime, what to do).
    AgentMissing(&'static str, &'static str),
    /// The manifest exists but is invalid.
    BadManifest(PathBuf, String),
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeError::NotInstalled(rt) => write!(
                f,
                "runtime \"{rt}\" is not installed — install its package (it provides runtimes/{rt}/runtime.json under the iapeer root) or choose another runtime"
            ),
            RuntimeError::AgentMissing(rt, hint) => write!(f, "{rt} is not installed — {hint}"),
            RuntimeError::BadManifest(p, why) => {
                write!(f, "{} is not a valid runtime manifest: {why}", p.display())
            }
        }
    }
}

impl std::error::Error for RuntimeError {}

/// The adapter for `runtime`: built-in agent runtimes, else an installed router runtime.
///
/// Errors: [`RuntimeError`] when the runtime is unknown or its manifest is invalid.
pub fn adapter_for(paths: &Paths, runtime: &str) -> Result<Arc<dyn Adapter>, RuntimeError> {
    match runtime {
        "echo" => Ok(Arc::new(echo::Echo::from_env())),
        "claude" => claude::Claude::find()
            .map(|c| Arc::new(c) as Arc<dyn Adapter>)
            .ok_or(RuntimeError::AgentMissing(
                "claude",
                "install Claude Code or pass --runtime",
            )),
        "codex" => codex::Codex::find()
            .map(|c| Arc::new(c) as Arc<dyn Adapter>)
            .ok_or(RuntimeError::AgentMissing(
                "codex",
                "install the Codex CLI or pass --runtime",
            )),
        _ => {
            let manifest = manifest::Manifest::load(paths, runtime)?
                .ok_or_else(|| RuntimeError::NotInstalled(runtime.to_string()))?;
            Ok(Arc::new(router::RouterRuntime::new(manifest)))
        }
    }
}

/// The runtime's part of a peer's birth (create/init/add-runtime): its MCP configuration and
/// folder trust. A no-op for runtimes that need none.
///
/// Errors: a configuration file could not be written (text names it).
pub fn setup_peer(
    runtime: &str,
    cwd: &Path,
    personality: &str,
    bearer: bool,
) -> Result<(), String> {
    match runtime {
        "claude" => claude_setup::setup(cwd, personality, bearer),
        "codex" => codex_setup::setup(cwd, &default_mcp_url()),
        _ => Ok(()),
    }
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

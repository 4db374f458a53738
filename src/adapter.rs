//! The runtime adapter contract (spec 04 §2): the trait one runtime implements and the
//! vocabulary of its answers (boot steps, confirmations, ready gates, compaction).
//!
//! It sits below both `session`, which drives a child through an [`Adapter`], and `runtime`,
//! which holds the implementations (echo, claude, codex, router packages), so neither of those
//! imports the other. Screens are the terminal layer's [`Screen`].

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::launch_env::LaunchEnv;
use crate::paths::Paths;
use crate::term::paste_view::PasteView;
use crate::term::Screen;

/// How a runtime's conversations get their ids: a fact of its row in the runtime table.
pub use crate::runtime_table::ConversationNaming;

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
    /// Continue the previous conversation: the one recorded by its id for a runtime that
    /// names its conversations ([`ConversationNaming`]), else the folder's.
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

/// Why a resume has nothing to name (a launch's failure reason): the peer's conversation id
/// was never recorded (a peer of the original tool or of an older iapeer). A resume of "the
/// folder's newest" could take a person's conversation (issue 32 item 1), so there is none.
pub const NO_RECORDED_CONVERSATION: &str = "no recorded conversation to resume";

/// Why an adapter could not build a launch command ([`Adapter::command`]): a wake failure
/// reason. `Display` gives the reason as the refusal quotes it.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A resume without a recorded conversation id ([`NO_RECORDED_CONVERSATION`]).
    #[error("{}", NO_RECORDED_CONVERSATION)]
    ConversationNotRecorded,
    /// The echo agent has no transcript in the folder to resume.
    #[error("no transcript to resume")]
    EchoTranscriptMissing,
    /// Claude Code has no transcript of the conversation (its id) in the folder.
    #[error("no transcript of conversation {0} to resume")]
    TranscriptMissing(String),
    /// Codex has no session file of the conversation (its id).
    #[error("no codex session file of conversation {0} to resume")]
    CodexSessionMissing(String),
    /// Gemini CLI has no session file of the conversation (its id).
    #[error("no gemini session file of conversation {0} to resume")]
    GeminiSessionMissing(String),
    /// No free loopback port for the runtime's own records server (OpenCode's `--port`).
    #[error("no free loopback port for the agent's records server")]
    NoFreePort,
    /// A terminal runtime's MCP config file (its manifest's `mcp.file`) could not be written:
    /// the file and why.
    #[error("cannot write the runtime's MCP config {0}")]
    ConfigFile(String),
    /// The iapeer binary, which a gated peer's approval hook runs, cannot be found.
    #[error("cannot find the iapeer binary for the approval hook: {0}")]
    HookBinaryNotFound(#[source] std::io::Error),
}

/// Everything an adapter needs to build a launch command.
pub struct LaunchCtx<'a> {
    /// The storage layout (the `human` runtime passes its root to the inbox writer).
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
    /// `Some` for a gated peer (`approval_mode: "gated"`, spec 10 §4): launch without the
    /// permission-bypass flags and send each permission prompt to the daemon's approval
    /// broker, which answers within this long (`IAPEER_APPROVAL_TIMEOUT_MS`). `None`: the
    /// default bypass mode.
    pub gated: Option<std::time::Duration>,
    /// Whether the session is handed the daemon's `IAPEER_BEARER_TOKEN` (the daemon requires
    /// it on every request, spec 02 §4): a runtime whose MCP configuration is made at launch
    /// then sends it as the bearer and the session token in `X-IAPeer-Token`.
    pub bearer: bool,
    /// The tool-call timeout a runtime whose MCP configuration is made at launch gives
    /// iapeer's server: the daemon's send deadline plus a margin
    /// ([`crate::runtime::mcp_tool_timeout`]).
    pub tool_timeout: std::time::Duration,
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

#[cfg(test)]
impl LaunchCommand {
    /// The arguments as strings (lossy), for assertions.
    pub fn arg_strings(&self) -> Vec<String> {
        self.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }
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
    /// The composer holds text nobody typed (Gemini CLI 0.61.0: the answers to its terminal
    /// queries that came after it stopped waiting for them): write these bytes to clear it.
    /// The boot presses them at most `session::boot::MAX_CLEARS` (3) times,
    /// `session::boot::CLEAR_GAP` (5 s) apart, and fails with `label` after that.
    Clear {
        /// The clear key's bytes.
        bytes: Vec<u8>,
        /// What is cleared, e.g. ``the late terminal answers `0u…` in the composer``.
        label: String,
    },
    /// Ready for input.
    Ready,
    /// Boot cannot succeed (e.g. not logged in): the reason for the waiting sender.
    Fail(String),
}

/// Where one delivery stands, as the runtime shows it (spec 04 §1 table, spec 03 §1 step 9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acceptance {
    /// No sign of the message yet.
    Pending,
    /// The runtime submitted it to the model (e.g. a `user` transcript record holds it).
    Accepted,
    /// The runtime put it into its own input queue behind a running turn (Claude Code's
    /// `queue-operation` `enqueue` record); it reaches the model when that turn ends.
    Queued,
    /// The runtime removed it from its queue without submitting it; the text says why.
    Removed(String),
}

/// Decides whether one delivery has been accepted by the runtime (spec 04 §1 table).
pub trait Confirm: Send {
    /// `output` is everything the child printed since the delivery started (capped).
    /// Returns true once the delivery is confirmed.
    fn confirmed(&mut self, output: &[u8]) -> bool;

    /// The runtime's id of the conversation whose records confirmed the message, once
    /// accepted, for a runtime whose ids iapeer learns ([`ConversationNaming::Learned`]).
    /// The default: none.
    fn conversation(&self) -> Option<String> {
        None
    }

    /// After the message was accepted: whether the turn that took it has ended, read from
    /// the runtime's records written after the message (issue 32 item 2: a message whose
    /// turn had not ended when the agent died was cut off). Called again while it says no.
    /// The default, for a runtime that records no turns: ended.
    fn turn_ended(&mut self) -> bool {
        true
    }

    /// When the runtime took the message, epoch ms, as the record that confirmed it says
    /// (its `timestamp`), once accepted (issue 31 item 2: "delivered" is the moment the
    /// runtime has the message; a runtime may write that record well after, with its model
    /// request). The default, for evidence that carries no time: none.
    fn taken_ms(&self) -> Option<u64> {
        None
    }

    /// Whether [`Confirm::acceptance`] reads its `screen`: when not, it is handed an empty
    /// text and the session does not make the screen's text for it (issue 31 item 3: a
    /// 50 × 220 screen walked cell by cell on every confirmation poll of a burst). The
    /// default: it does.
    fn reads_screen(&self) -> bool {
        true
    }

    /// The full answer for runtimes with an input queue: called instead of
    /// [`Confirm::confirmed`] while delivering, and again (with no new output) while
    /// following a [`Acceptance::Queued`] message until it is accepted or removed. `screen`
    /// is the session's current screen text (Codex shows its queue only there). The default
    /// knows no queue: confirmed or pending.
    fn acceptance(&mut self, output: &[u8], _screen: &str) -> Acceptance {
        if self.confirmed(output) {
            Acceptance::Accepted
        } else {
            Acceptance::Pending
        }
    }

    /// Whether the runtime was seen holding the message in a queue it submits by itself once
    /// its own start-up is done (Gemini CLI waiting for its MCP servers): a delivery still
    /// pending at its deadline is then answered queued by the runtime, not failed. The
    /// default: never.
    fn held_by_runtime(&self) -> bool {
        false
    }

    /// Whether Enter may go (asked while the paste settles, again until yes): a confirmer
    /// that reads what the runtime's records held before the message could be there
    /// (OpenCode's: `opencode_records::RecordsConfirm`) reads it off the session thread
    /// while the paste is drawn, and says no until it is done (issue 27 item 5). The
    /// default: yes.
    fn ready_for_enter(&mut self) -> bool {
        true
    }
}

/// How a compaction ended; defined with the protocol, whose `compact` reply carries it.
pub use crate::protocol::CompactOutcome;

/// A compaction the runtime gave up, in its own words (Gemini CLI 0.61.0's `Failed to
/// compress chat history: …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactRefused {
    /// What the runtime said, one line.
    pub said: String,
}

/// Watches one compaction for its end.
pub trait CompactWatch: Send {
    /// `Some` once the compaction is over: how it ended, or the runtime's refusal; `screen`
    /// is the current screen text.
    fn poll(&mut self, screen: &str) -> Option<Result<CompactOutcome, CompactRefused>>;
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

impl GateState {
    /// The state of a gate that watches the transcript and the screen: passed once the model
    /// answered (`answered`), failed while the screen shows the runtime retrying its model
    /// API (`retry_line`, read only when it has not answered), else pending.
    pub fn of(answered: bool, retry_line: impl FnOnce() -> Option<String>) -> GateState {
        if answered {
            return GateState::Passed;
        }
        match retry_line() {
            Some(line) => GateState::Failed(format!("the model API does not answer: {line}")),
            None => GateState::Pending,
        }
    }
}

/// A runtime-specific ready gate, for runtimes whose transcript is written before the model
/// answers (so a bare activity time proves nothing).
pub trait GateWatch: Send {
    /// Check again; `screen` is the current screen text.
    fn poll(&mut self, screen: &str) -> GateState;
}

/// A tool's permission prompt on an agent's screen (spec 10 §4, issue 32 item 4): what it
/// asks and the menu that answers it, read by [`Adapter::permission_prompt`]. In the default
/// bypass mode Claude Code 2.1.332 still asks for a command a project `permissions.ask` rule
/// names or a `PreToolUse` hook answers `ask` for (recorded in
/// `tests/fixtures/claude-2.1.332/approvals/bypass-*.raw`); iapeer puts each such prompt to a
/// human through the approval broker and keys in the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionPrompt {
    /// The tool in the runtime's own terms (`Bash`, `Write`, `Edit`, `MCP tool`, or the
    /// prompt's title when it is not a recorded one).
    pub tool: String,
    /// What it wants to do, one line: the command, the file, the MCP tool and its arguments.
    pub summary: String,
    /// Why the runtime asks, when the prompt says (`Rule Bash(rm:*) from shared project
    /// settings says to ask.`); empty when it does not.
    pub reason: String,
    /// The menu's option labels, top to bottom (`Yes`, …, `No`).
    pub options: Vec<String>,
    /// Index into `options` of the one that lets the tool run this once.
    pub approve: usize,
    /// Index into `options` of the one that refuses it.
    pub deny: usize,
    /// Index of the option under the marker; `None` mid-redraw.
    pub cursor: Option<usize>,
}

impl PermissionPrompt {
    /// Whether `other` is the same prompt (the same tool, request and menu), wherever its
    /// marker is.
    pub fn same_as(&self, other: &PermissionPrompt) -> bool {
        self.tool == other.tool && self.summary == other.summary && self.options == other.options
    }
}

/// How a human's answer to a permission prompt reaches the runtime
/// ([`Adapter::answer_permission`], spec 10 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Keyed in on the screen, one key at a time (Claude Code, Codex, Gemini CLI).
    Keys,
    /// The runtime's own API took it: nothing is keyed.
    Taken,
    /// The runtime answers only through its API, and the API did not take it (OpenCode
    /// 1.18.33's `GET /permission` fails while a `webfetch` without a timeout is pending):
    /// nothing can be keyed either, so the prompt is put to the human again.
    NotTaken,
}

/// The text typed into the composer row that starts with `glyph` (none without a glyph, or
/// when the row holds only a placeholder): the default reading of [`Adapter::composer_draft`].
pub fn typed_composer_text(screen: &Screen, glyph: Option<&str>) -> Option<String> {
    glyph
        .and_then(|g| screen.composer_text(g))
        .filter(|c| c.typed && !c.text.is_empty())
        .map(|c| c.text)
}

/// A composer's rows as one text (pure): joined by `\n`, trimmed; `None` when nothing is
/// left. What [`Adapter::composer_content`] gives.
pub fn composer_rows_text(rows: impl IntoIterator<Item = String>) -> Option<String> {
    let text = rows.into_iter().collect::<Vec<_>>().join("\n");
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Whether the composer row (the last row starting with `glyph`, typed or styled) shows the
/// whole of `paste` ([`PasteView::shown_in`]); `false` without a glyph. The default of
/// [`Adapter::paste_shown`].
pub fn composer_shows(screen: &Screen, glyph: Option<&str>, paste: &PasteView) -> bool {
    glyph
        .and_then(|g| screen.composer_text(g))
        .is_some_and(|row| paste.shown_in(&row.text))
}

/// What kind of refusal by a runtime's model API, as an operator acts on it (spec 10 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// Too many requests or a usage limit reached: wait for the reset.
    RateLimit,
    /// The API is overloaded (or another server-side failure): usually passes.
    Overloaded,
    /// The login expired or the key is wrong: a human must log in again.
    Auth,
    /// Any other refusal the runtime marks as an API error.
    Other,
}

impl ApiErrorKind {
    /// The logfmt / JSON word: `rate-limit`, `overloaded`, `auth`, `api-error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiErrorKind::RateLimit => "rate-limit",
            ApiErrorKind::Overloaded => "overloaded",
            ApiErrorKind::Auth => "auth",
            ApiErrorKind::Other => "api-error",
        }
    }
}

/// One refused turn, as a runtime's file records it ([`Adapter::api_error`]; the runtimes'
/// readers are in `runtime::api_error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The kind.
    pub kind: ApiErrorKind,
    /// The runtime's own word for it (Claude's `error`, e.g. `rate_limit`).
    pub error_type: String,
    /// The HTTP status, when recorded.
    pub status: Option<u16>,
    /// The model named by the record (`<synthetic>` for Claude's error records).
    pub model: String,
    /// The text the runtime showed the user.
    pub text: String,
    /// The record's timestamp, as written.
    pub at: String,
    /// When the limit resets, as the runtime recorded it, if it did: epoch seconds as
    /// written (Codex's fullest window; Claude Code's `apiErrorParams.rate_limit_info.resetsAt`
    /// for a plan's usage limit).
    pub resets_at: Option<String>,
    /// The runtime said it takes the refused turn up again by itself at the reset (Claude
    /// Code 2.1.332 for a plan's usage limit: a `system` record "… set to continue
    /// automatically at …" after the refusal).
    pub runtime_resumes: bool,
}

/// How a runtime clears its composer ([`Adapter::clear_keys`]; `session::clear` presses them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearKeys {
    /// The first key.
    pub first: Vec<u8>,
    /// When the runtime asks for a second press: the text it shows then, and the key.
    pub again: Option<(&'static str, Vec<u8>)>,
    /// The warning the runtime shows while one more press of `first` would quit it (Gemini
    /// CLI 0.61.0: `Press Ctrl+C again to exit.`, recorded in `late-1200ms-ctrl-c-cleared`),
    /// if `first` can arm its exit. Every press of such a key — on text nobody typed
    /// (`session::boot::ClearPresses`) or on iapeer's own text (`session::clear`) — is
    /// paced as [`ClearPresses`](crate::session::boot::ClearPresses) paces it and never goes
    /// while [`ClearKeys::exit_armed`] reads the warning.
    pub exit_warning: Option<&'static str>,
}

impl ClearKeys {
    /// Whether `screen` (a screen's text, or one of its rows) shows the runtime's exit
    /// warning ([`ClearKeys::exit_warning`]); false for keys that cannot arm an exit.
    pub fn exit_armed(&self, screen: &str) -> bool {
        self.exit_warning.is_some_and(|w| screen.contains(w))
    }
}

/// One runtime's behaviour. Implementations are immutable and shared; a runtime that names
/// its conversations gives a session its own copy bound to the session's conversation
/// ([`Adapter::for_conversation`]).
pub trait Adapter: Send + Sync {
    /// The runtime name (`echo`, `claude`, …).
    fn name(&self) -> &str;
    /// Agent (pty) or router (pipes). The default: what the runtime table's row says (an
    /// agent-class runtime is an agent, any other a router).
    fn kind(&self) -> RuntimeKind {
        if crate::names::is_agent_runtime(self.name()) {
            RuntimeKind::Agent
        } else {
            RuntimeKind::Router
        }
    }
    /// Build the launch command. Errors: `LaunchError`, a wake failure reason (e.g. `no
    /// transcript to resume`).
    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, LaunchError>;
    /// How this runtime's conversations get their ids. The default: what the runtime table's
    /// row says (one per folder for a runtime without a row).
    fn conversation_naming(&self) -> ConversationNaming {
        crate::runtime_table::naming_of(self.name())
    }
    /// This adapter bound to the conversation `id` (issue 32): a launch by it starts that
    /// conversation fresh (`ConversationNaming::Chosen`) or resumes it, and its readers —
    /// confirmation, ready gate, activity, API errors, compaction — follow that
    /// conversation's records only, not the folder's newest. `None` (the default) for a
    /// runtime whose conversations are the folder's.
    fn for_conversation(&self, _id: &str) -> Option<std::sync::Arc<dyn Adapter>> {
        None
    }
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
    /// How long after the agent's MCP client listed the daemon's tools no Enter may go (when
    /// [`Adapter::waits_for_mcp`]), for a runtime that answers `tools/list` before the tool
    /// is usable by its next turn: the first message is pasted at the listing and its Enter
    /// held this long after it. Zero by default.
    fn mcp_settle(&self) -> Duration {
        Duration::ZERO
    }
    /// The glyph that starts the composer row (`❯` for claude and echo, `›` for codex), for
    /// runtimes with a composer.
    fn prompt_glyph(&self) -> Option<&'static str> {
        None
    }
    /// A menu a ready session shows over its composer (not a boot dialog), which a delivery
    /// must not type into, and the key that answers it without changing the peer's settings:
    /// [`BootStep::Key`], or `None` when there is none. The default: none.
    fn live_dialog(&self, _screen: &Screen) -> Option<BootStep> {
        None
    }
    /// Text in the composer that nobody typed and the runtime's own key clears (read from
    /// recordings; Gemini CLI 0.61.0: the late answers to its terminal queries, read as typed
    /// keys): [`BootStep::Clear`] when the key may be pressed now, [`BootStep::Wait`] when
    /// such text is there but no key may go now (the runtime's exit warning shows), `None`
    /// when the composer holds no such text (empty, or a human's draft). The boot clears it
    /// through [`Adapter::boot_step`]; a delivery that finds it clears it first instead of
    /// holding behind it as a draft (`session::leftovers`). The default: none.
    fn composer_leftovers(&self, _screen: &Screen) -> Option<BootStep> {
        None
    }
    /// Whether a gated launch (`LaunchCtx::gated`) hands each permission request to a hook
    /// that asks the approval broker itself (Claude Code's and Codex's), so a prompt on its
    /// screen is not put to a human again. The default: no — a gated Gemini CLI asks on its
    /// screen (`--approval-mode default`), and iapeer puts what
    /// [`Adapter::permission_prompt`] reads there to a human.
    fn gated_by_hook(&self) -> bool {
        false
    }
    /// A tool's permission prompt the screen shows, if any (`PermissionPrompt`): recorded
    /// from the real CLI; `None` (the default) for a runtime that shows none.
    fn permission_prompt(&self, _screen: &Screen) -> Option<PermissionPrompt> {
        None
    }
    /// Answer the open permission `prompt` with its option `choice` through the runtime's
    /// own API instead of keys (for a runtime whose prompt iapeer cannot key reliably:
    /// OpenCode draws its marker in colour only): `PermissionAnswer::Taken` when the
    /// runtime took it (no key is written), `PermissionAnswer::NotTaken` when its API did
    /// not and its screen takes no keys for it either (the human is asked again, told so).
    /// The default: `PermissionAnswer::Keys` — the answer is keyed in.
    fn answer_permission(
        &self,
        _cwd: &Path,
        _prompt: &PermissionPrompt,
        _choice: usize,
    ) -> PermissionAnswer {
        PermissionAnswer::Keys
    }
    /// The draft in the composer, if any: text someone typed or left there (not a placeholder
    /// or suggestion), which a delivery must never be submitted with (spec 05 §7). The default
    /// reads the row that starts with [`Adapter::prompt_glyph`]: typed text is neither dim nor
    /// coloured (recorded for Claude Code 2.1.332 in
    /// `tests/fixtures/claude-2.1.332/composer-draft-dark.raw`).
    fn composer_draft(&self, screen: &Screen) -> Option<String> {
        typed_composer_text(screen, self.prompt_glyph())
    }
    /// Everything the composer holds, its rows joined by `\n` (typed text and paste
    /// placeholders, not a dim placeholder or suggestion), or `None` when it is empty: what
    /// `crate::session::own_text::Tracker::find` compares with iapeer's own pastes. The
    /// default: the typed text of the composer row, as [`Adapter::composer_draft`] reads it.
    fn composer_content(&self, screen: &Screen) -> Option<String> {
        typed_composer_text(screen, self.prompt_glyph())
    }
    /// Whether the runtime puts an interrupted prompt back into its composer (and out of its
    /// conversation): Claude Code 2.1.332 does, a moment after the turn ends
    /// (`tests/fixtures/claude-2.1.332/interrupt-restores-prompt.raw`); Codex 0.171.0 keeps it
    /// in the conversation. After an interrupt a delivery waits for it
    /// (`crate::session::own_text::RESTORE_SETTLE`). The default: no.
    fn restores_interrupted_prompt(&self) -> bool {
        false
    }
    /// The form in which this runtime shows a pasted `text` wherever iapeer reads it back
    /// (its transcript, its model request, its screen): `crate::runtime::pasted_form`,
    /// recorded from the real CLI (issue 32 item 6). Pure and idempotent; everything that
    /// looks for a paste compares in it (the confirmers, the composer's paste sign, iapeer's
    /// own text in a composer). The default: the text as pasted.
    fn pasted_form(&self, text: &str) -> String {
        text.to_string()
    }
    /// The runtime's own keys that clear its composer (`session::clear` presses them), recorded
    /// from the real CLI; `None` (the default): iapeer never clears it, and its own text
    /// there holds messages like a draft.
    fn clear_keys(&self) -> Option<ClearKeys> {
        None
    }
    /// Whether the screen shows the whole of iapeer's paste in the composer, taken and waiting
    /// for Enter (issue 13 item 1). The default reads the composer row (typed or styled:
    /// Codex 0.171 draws its `[Pasted Content N chars]` in colour) through
    /// `PasteView::shown_in`, whose forms are recorded from Claude Code 2.1.332, Codex 0.171
    /// and the echo agent.
    fn paste_shown(&self, screen: &Screen, paste: &PasteView) -> bool {
        composer_shows(screen, self.prompt_glyph(), paste)
    }
    /// Whether [`Adapter::paste_shown`] can ever say yes: then Enter waits for its sign (at
    /// most `session::deliver::PASTE_SIGNAL_WAIT`), else it goes after the fixed
    /// `session::deliver::SETTLE`. The default: a runtime with a composer row to read.
    fn has_paste_sign(&self) -> bool {
        self.prompt_glyph().is_some()
    }
    /// How long Enter waits after [`Adapter::paste_shown`] said yes: a runtime may take an
    /// Enter that follows a paste too closely for a line break, not a submit (recorded per
    /// runtime). The default: at once.
    fn enter_after_paste_sign(&self) -> Duration {
        Duration::ZERO
    }
    /// How often Enter is written again while a delivery is unconfirmed, when the runtime
    /// needs another pace than `session::deliver::ENTER_RETRY` (recorded per runtime; an
    /// Enter on an empty composer must do nothing there). `None` (the default): that pace.
    fn enter_retry(&self) -> Option<Duration> {
        None
    }
    /// How long the ready screen must stay ready before input is accepted, for a session in
    /// `cwd` (a runtime may raise a dialog just after its ready screen in some folders only).
    fn ready_settle(&self, _cwd: &Path) -> Duration {
        Duration::ZERO
    }
    /// How long a permission prompt ([`Adapter::permission_prompt`]) must have been on the
    /// screen before a key answers it: a runtime may take a key that comes sooner for stray
    /// typing and drop it; zero = at once.
    fn prompt_settle(&self) -> Duration {
        Duration::ZERO
    }
    /// The least time between two boot keys (dialog answers). Some TUIs take keys that come
    /// close together for typing rather than for answers; zero = no spacing.
    fn boot_key_gap(&self) -> Duration {
        Duration::ZERO
    }
    /// Whether the screen shows the runtime mid-turn.
    fn is_busy(&self, _screen: &Screen) -> bool {
        false
    }
    /// Whether the screen shows that `paste`, submitted from an idle composer, started a
    /// turn: the composer empty again, and the runtime busy or the paste drawn as the
    /// conversation's newest message. Only a wake's first message is confirmed by it
    /// (`session::deliver::ActiveDelivery::on_turn_shown`); `false` for runtimes whose
    /// screens were not recorded for it (their transcript or output confirms).
    fn turn_started(&self, _screen: &Screen, _paste: &PasteView) -> bool {
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
    /// The model API's refusal of the runtime's latest turn in `cwd`, when its newest
    /// outcome is one (spec 10 §3: read from structured files, never the screen).
    fn api_error(&self, _cwd: &Path) -> Option<ApiError> {
        None
    }
    /// Newest activity time of the runtime for `cwd` (epoch ms), from its transcripts.
    fn activity_ms(&self, _cwd: &Path) -> Option<u64> {
        None
    }
    /// Whether the runtime's own records in `cwd` (its transcript) hold a message whose body
    /// is `body`, received at or after `since_ms` (epoch ms): `Some(true)` they do,
    /// `Some(false)` they can tell and do not, `None` they cannot tell. Asked for a paste a
    /// killed daemon began and never confirmed (`msgids::free_after_restart`,
    /// issue 28 item 7). The default: `None` (no records read this way).
    fn records_hold(&self, _cwd: &Path, _body: &str, _since_ms: u64) -> Option<bool> {
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
    /// Interrupt the running turn of the session in `cwd` through the runtime's own
    /// interface instead of keys; whether it did (then [`Adapter::interrupt_keys`] are not
    /// written). The default: no (OpenCode stops a turn through its server).
    fn interrupt_turn(&self, _cwd: &Path) -> bool {
        false
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

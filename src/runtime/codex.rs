//! The `codex` runtime (spec 04 §2 "codex"): the Codex CLI in a pty. Its session files
//! (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, first line `session_meta` with the
//! working folder) drive confirmation, the ready gate, activity and resume.
//!
//! Codex 0.171 runs its agents in a shared background app server by default, which would
//! resolve the MCP server's environment (the session token, the identity) from whichever
//! session started it; iapeer passes `--no-daemon` so each session has its own. The MCP URL
//! cannot expand variables in Codex's config, so it is set at launch with `-c` from the
//! daemon's real port.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::agent_program::Bound;
use super::codex_setup::codex_home;
use super::pasted_form;
use super::transcript::{
    jsonl_files, RecordSource, SessionFileConfirm, SessionRules, TranscriptWatch,
};
use super::{
    Adapter, BootStep, CompactOutcome, CompactRefused, CompactWatch, Confirm, GateState, GateWatch,
    LaunchCommand, LaunchCtx, WakeMode,
};
use crate::runtime_table::{PromptSwap, CODEX};
use crate::term::menu as dialog;
use crate::term::{encode_keys, Screen};

/// The composer (and menu cursor) glyph of Codex.
pub const MARKER: char = '›';

/// Where codex's program is, as [`super::agent_program::locate`] finds it (`$IAPEER_CODEX_BIN`,
/// PATH, the login shell's PATH, the installers' folders).
pub fn resolve_binary() -> Option<PathBuf> {
    super::agent_program::locate(CODEX.name).program
}

/// `<codex home>/sessions`.
pub fn sessions_dir() -> Option<PathBuf> {
    Some(codex_home()?.join("sessions"))
}

/// Every day folder (`YYYY/MM/DD`) under `sessions`, oldest first.
fn day_dirs(sessions: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let sub = |p: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|e| {
                e.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    for y in sub(sessions) {
        for m in sub(&y) {
            out.extend(sub(&m));
        }
    }
    out
}

/// The folders a new session file may appear in soon: the two newest day folders and
/// today's (local and UTC; it may not exist yet).
fn recent_dirs(sessions: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = day_dirs(sessions).into_iter().rev().take(2).collect();
    let now = jiff::Zoned::now();
    for day in [
        now.date(),
        jiff::Timestamp::now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date(),
    ] {
        let d = sessions
            .join(format!("{:04}", day.year()))
            .join(format!("{:02}", day.month()))
            .join(format!("{:02}", day.day()));
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// The `payload` of a session file's first line when it is `session_meta`.
fn session_meta(path: &Path) -> Option<Value> {
    use std::io::BufRead;
    let f = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(f).read_line(&mut line).ok()?;
    let mut v: Value = serde_json::from_str(&line).ok()?;
    (v["type"] == "session_meta").then(|| v["payload"].take())
}

/// The working folder a session file belongs to (its `session_meta` first line).
pub fn rollout_cwd(path: &Path) -> Option<PathBuf> {
    session_meta(path)?["cwd"].as_str().map(PathBuf::from)
}

/// The conversation id a session file records (its `session_meta` first line's
/// `payload.id`; recorded for 0.171.0: the same id names the file, `rollout-<time>-<id>.jsonl`,
/// and `codex resume <id>` appends to it).
pub fn rollout_id(path: &Path) -> Option<String> {
    session_meta(path)?["id"].as_str().map(String::from)
}

/// Whether `path` is the session file of conversation `id` by its name
/// (`rollout-<time>-<id>.jsonl`).
fn names_conversation(path: &Path, id: &str) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(&format!("-{id}.jsonl")))
}

/// The session file of conversation `id` under `sessions` (newest day folder first), whose
/// name and `session_meta` both name it.
pub fn rollout_of(sessions: &Path, id: &str) -> Option<PathBuf> {
    day_dirs(sessions).iter().rev().find_map(|d| {
        jsonl_files(d)
            .into_iter()
            .find(|f| names_conversation(f, id) && rollout_id(f).as_deref() == Some(id))
    })
}

fn same_folder(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}

/// The newest session file of `cwd` under `sessions` (the one `codex resume --last` would
/// append to, in the day folder of the day it was created) — a person's as well as the
/// peer's: read only while the session's own conversation is not known yet.
pub fn newest_rollout(sessions: &Path, cwd: &Path) -> Option<PathBuf> {
    day_dirs(sessions).iter().rev().find_map(|d| {
        let mut files = jsonl_files(d);
        files.sort();
        files
            .into_iter()
            .rev()
            .find(|f| rollout_cwd(f).is_some_and(|c| same_folder(&c, cwd)))
    })
}

/// The folders records of `cwd`'s session may be appended to: the recent day folders (a new
/// session) and the day folder of its newest session file (a resumed session appends to its
/// file, however old).
fn watch_dirs(sessions: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut dirs = recent_dirs(sessions);
    if let Some(day) = newest_rollout(sessions, cwd).and_then(|f| f.parent().map(Path::to_path_buf))
    {
        if !dirs.contains(&day) {
            dirs.push(day);
        }
    }
    dirs
}

/// Watches the session folders of one working folder for appended records, keeping only
/// records of the session's own conversation file when it is known (issue 32), else of
/// session files whose `session_meta` names that folder (other codex peers write to the same
/// day folders).
struct Watch {
    cwd: PathBuf,
    /// The session's conversation, when known.
    conversation: Option<String>,
    watches: Vec<TranscriptWatch>,
    /// Whether each session file seen is one this watch keeps.
    ours: std::collections::HashMap<PathBuf, bool>,
}

impl Watch {
    fn start(cwd: &Path, conversation: Option<&str>) -> Watch {
        Watch::over(sessions_dir().as_deref(), cwd, conversation)
    }

    /// A watch of `cwd`'s records (or of `conversation`'s) under the `sessions` folder.
    fn over(sessions: Option<&Path>, cwd: &Path, conversation: Option<&str>) -> Watch {
        let dirs = |s: &Path| match conversation.and_then(|id| rollout_of(s, id)) {
            Some(file) => file.parent().map(Path::to_path_buf).into_iter().collect(),
            None => watch_dirs(s, cwd),
        };
        Watch {
            cwd: cwd.to_path_buf(),
            conversation: conversation.map(String::from),
            watches: sessions
                .map(|s| dirs(s).iter().map(|d| TranscriptWatch::start(d)).collect())
                .unwrap_or_default(),
            ours: std::collections::HashMap::new(),
        }
    }

    fn new_records(&mut self) -> Vec<Value> {
        self.new_records_by_file()
            .into_iter()
            .map(|(_, r)| r)
            .collect()
    }

    /// The records appended to the files this watch keeps, each with its file.
    fn new_records_by_file(&mut self) -> Vec<(PathBuf, Value)> {
        let mut out = Vec::new();
        for (file, record) in self
            .watches
            .iter_mut()
            .flat_map(|w| w.new_records_by_file())
        {
            let (cwd, conversation) = (&self.cwd, self.conversation.as_deref());
            let ours = *self
                .ours
                .entry(file.clone())
                .or_insert_with(|| match conversation {
                    Some(id) => names_conversation(&file, id),
                    None => rollout_cwd(&file).is_some_and(|c| same_folder(&c, cwd)),
                });
            if ours {
                out.push((file, record));
            }
        }
        out
    }
}

/// A record of the user's turn: `response_item` message with role user, or `user_message`.
fn is_user_record(r: &Value) -> bool {
    let p = &r["payload"];
    (r["type"] == "response_item" && p["type"] == "message" && p["role"] == "user")
        || (r["type"] == "event_msg" && p["type"] == "user_message")
}

/// A record from the model's side of a turn (proof it started one).
pub fn is_model_record(r: &Value) -> bool {
    let p = &r["payload"];
    (r["type"] == "response_item"
        && ((p["type"] == "message" && p["role"] == "assistant")
            || p["type"] == "function_call"
            || p["type"] == "reasoning"))
        || (r["type"] == "event_msg"
            && matches!(p["type"].as_str(), Some("agent_message" | "task_complete")))
}

/// Whether a record ends a turn (pure): the `event_msg` `task_complete` Codex 0.171.0 writes
/// at every turn's end, refused or answered (`api-*.jsonl`), or `turn_aborted` for an
/// interrupted one (`interrupt-rollout.jsonl`).
pub fn is_turn_end(r: &Value) -> bool {
    r["type"] == "event_msg"
        && matches!(
            r["payload"]["type"].as_str(),
            Some("task_complete" | "turn_aborted")
        )
}

/// What Codex 0.171.0 draws instead of its composer when the conversation it resumes is held
/// by another Codex (its app server outlives the TUI that opened it): `🔒 This conversation is
/// open in another app` over `Close it there and press R to continue here.` (recorded:
/// `tests/fixtures/codex-0.171.0/resume-open-in-another-app.raw`). It waits for a key.
pub const OPEN_ELSEWHERE: &str = "This conversation is open in another app";

/// A compaction's completion record.
pub fn is_compacted_record(r: &Value) -> bool {
    r["type"] == "compacted"
        || (r["type"] == "event_msg" && r["payload"]["type"] == "context_compacted")
}

/// How much of the newest session file's end [`Adapter::api_error`] reads, bytes: a turn's
/// records (its `turn_context` names the model) with room for large tool outputs.
const API_ERROR_TAIL: u64 = 256 * 1024;

/// The codex adapter: its program and the conversation it is bound to.
pub struct Codex(Bound);

impl Codex {
    /// The adapter for the Codex CLI binary at `program` (not checked until a launch).
    pub fn with_program(program: PathBuf) -> Codex {
        Codex(Bound::new(program))
    }

    /// The session file this session's records go to: the bound conversation's, else (not
    /// known yet) the folder's newest.
    fn own_rollout(&self, cwd: &Path) -> Option<PathBuf> {
        let sessions = sessions_dir()?;
        match self.0.conversation() {
            Some(id) => rollout_of(&sessions, id),
            None => newest_rollout(&sessions, cwd),
        }
    }
}

/// Codex boot dialogs (spec 04 §2) and the option to choose, by label. Each: every trigger
/// text on screen, and the label wanted.
const DIALOGS: &[(&str, &[&str], &str)] = &[
    (
        "update",
        &["Update available!", "Press enter to continue"],
        "Skip",
    ),
    ("trust", &["Trust this folder?"], "Trust and continue"),
    (
        "trust",
        &["Do you trust the contents of this directory"],
        "Yes, continue",
    ),
    ("hooks", &["Hooks need review"], "Trust all"),
];

/// Menus Codex opens over the composer of a running session, and the option that leaves the
/// peer as it was. Recorded for 0.171.0: a turn refused for a usage limit with the
/// rate-limit windows at 100 % opens "Approaching rate limits" / "Switch to <model> for lower
/// credit usage?" (`tests/fixtures/codex-0.171.0/usage-limit-switch-prompt.raw`); its first
/// option switches the model, so a paste and Enter typed into it would change the peer's model.
const LIVE_DIALOGS: &[(&str, &[&str], &str)] = &[(
    "model-switch",
    &["Approaching rate limits", "Keep current model"],
    "Keep current model",
)];

/// The dialog `table` finds on `rows` and the key towards its wanted option (pure):
/// `Some(Wait)` while the menu is mid-redraw or lacks the option.
fn dialog_step(rows: &[String], table: &[(&str, &[&str], &str)]) -> Option<BootStep> {
    let text = rows.join("\n");
    let (name, _, wanted) = table
        .iter()
        .find(|(_, triggers, _)| triggers.iter().all(|t| text.contains(t)))?;
    Some(match dialog::step_towards_with(rows, MARKER, wanted) {
        Some(step) => BootStep::Key {
            bytes: encode_keys(&[step.key_name()], false).unwrap_or_default(),
            label: format!("{name} ({})", step.key_name()),
        },
        None => BootStep::Wait,
    })
}

/// The ready settle in a folder Codex's config trusts (no trust dialog can follow).
const TRUSTED_READY_SETTLE: Duration = Duration::from_millis(100);
/// The ready settle in any other folder: the trust dialog may follow the ready screen.
const UNTRUSTED_READY_SETTLE: Duration = Duration::from_millis(800);

/// What a Codex screen asks for during boot (pure).
pub fn boot_step_for(rows: &[String]) -> BootStep {
    // A dialog's menu mid-redraw, or without the label, is waited for.
    if let Some(step) = dialog_step(rows, DIALOGS) {
        return step;
    }
    let text = rows.join("\n");
    // The composer is a `› ` row that is not a menu cursor (a dialog drawn in pieces shows
    // `› 1. Trust and continue` before its question).
    let composer = rows.iter().any(|r| r.starts_with("› "));
    let numbered = rows.iter().any(|r| {
        r.strip_prefix("› ").is_some_and(|rest| {
            rest.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
    });
    // While Codex is still `loading` (shown under its banner) it may paint a partial composer
    // before a dialog appears.
    let loading = rows.iter().any(|r| r.trim() == "loading");
    if composer && !numbered && !loading && !text.contains("Press enter to continue") {
        BootStep::Ready
    } else {
        BootStep::Wait
    }
}

/// What a delivery sees as the draft while Codex's own approval dialog is open.
const APPROVAL_DIALOG_OPEN: &str = "(an approval dialog is open: iapeer approvals)";

/// Whether `rows` show Codex's own approval dialog (pure): recorded from 0.171.0
/// (`tests/fixtures/codex-0.171.0/approvals/approval-dialog.raw`) as `Would you like to run
/// the following command?`, a menu `› 1. Yes, proceed (y)` … and `Press enter to confirm or
/// esc to cancel`. A gated peer's hook decides before it would appear; it shows only when no
/// hook decides (e.g. the hook was stopped by Codex's timeout).
pub fn approval_dialog_open(rows: &[String]) -> bool {
    let footer = rows
        .iter()
        .any(|r| r.contains("Press enter to confirm or esc to cancel"));
    let menu = rows.iter().any(|r| {
        r.strip_prefix("› ")
            .and_then(|rest| rest.split_once(". "))
            .is_some_and(|(n, label)| n.parse::<u32>().is_ok() && label.starts_with("Yes"))
    });
    footer && menu
}

impl Adapter for Codex {
    fn name(&self) -> &str {
        CODEX.name
    }

    fn for_conversation(&self, id: &str) -> Option<Arc<dyn Adapter>> {
        Some(Arc::new(Codex(self.0.to(id))))
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, super::LaunchError> {
        let mut args: Vec<OsString> = Vec::new();
        if ctx.mode == WakeMode::Resume {
            // By its id, never `--last`: the folder's newest may be a person's, open in their
            // Codex (issue 32 item 1).
            let id = self.0.resume_id(
                || self.resumable(ctx.cwd),
                super::LaunchError::CodexSessionMissing,
            )?;
            args.extend(["resume".into(), id.into()]);
        }
        args.extend([
            "--no-daemon".into(),
            "--no-alt-screen".into(),
            "-C".into(),
            ctx.cwd.as_os_str().to_owned(),
        ]);
        if let (Some(p), PromptSwap::ConfigKey(key)) = (ctx.system_prompt, CODEX.prompt) {
            let mut v = OsString::from(format!("{key}="));
            v.push(p.as_os_str());
            args.extend(["-c".into(), v]);
        }
        args.extend([
            "-c".into(),
            format!(
                "mcp_servers.iapeer.url=\"http://127.0.0.1:{}/mcp\"",
                ctx.port
            )
            .into(),
            // A send may be held minutes (a wake); Codex's default is 60 s.
            "-c".into(),
            format!(
                "mcp_servers.iapeer.tool_timeout_sec={}",
                ctx.tool_timeout.as_secs()
            )
            .into(),
        ]);
        // A gated peer never runs with the bypass flag: its approvals go to a human (spec 10
        // §4) through the `PermissionRequest` hook.
        match ctx.gated {
            None => args.push("--dangerously-bypass-approvals-and-sandbox".into()),
            Some(timeout) => {
                let exe =
                    std::env::current_exe().map_err(super::LaunchError::HookBinaryNotFound)?;
                args.extend(super::codex_gate::launch_args(&exe, timeout));
            }
        }
        args.extend(ctx.launch_env.start_args.iter().map(OsString::from));
        Ok(LaunchCommand {
            program: self.0.program(),
            args,
            extra_env: Vec::new(),
        })
    }

    fn boot_step(&self, screen: &Screen) -> BootStep {
        match screen.rows().iter().find(|r| r.contains(OPEN_ELSEWHERE)) {
            Some(row) => BootStep::Fail(open_elsewhere_reason(row)),
            None => boot_step_for(screen.rows()),
        }
    }

    fn waits_for_mcp(&self, _cwd: &Path) -> bool {
        super::codex_setup::config_path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| t.parse::<toml_edit::DocumentMut>().ok())
            .is_some_and(|d| d.get("mcp_servers").and_then(|s| s.get("iapeer")).is_some())
    }

    // No `mcp_settle` (issue 13 item 2): Codex 0.171 builds a turn's tools by awaiting each
    // MCP server's startup, which ends with the listing (openai/codex
    // `codex-rs/core/src/mcp_connection_manager.rs`, `listed_tools`), so once the iapeer
    // server has listed its tools the next turn has `send_to_peer`. Input that arrives
    // before that is held in Codex's own "Queued follow-up inputs" (seen here), which is why
    // the boot still waits for the listing itself. Checked with a listing answered 1 s after
    // the boot went on (issue 31 item 1, `tests/codex.rs`
    // `a_codex_wake_whose_tool_listing_is_answered_late…`): the first turn had the tool.

    fn prompt_glyph(&self) -> Option<&'static str> {
        Some("›")
    }

    fn live_dialog(&self, screen: &Screen) -> Option<BootStep> {
        dialog_step(screen.rows(), LIVE_DIALOGS)
    }

    fn composer_draft(&self, screen: &Screen) -> Option<String> {
        // Codex's approval dialog takes the keys: a paste would answer it (`y` is "Yes,
        // proceed", Enter confirms the highlighted `1. Yes`), past the human a gated peer's
        // approvals go to (spec 10 §4). It counts as a draft, so a delivery waits for it to
        // close (`IAPEER_COMPOSER_QUEUE_TIMEOUT_MS`).
        if approval_dialog_open(screen.rows()) {
            return Some(APPROVAL_DIALOG_OPEN.into());
        }
        self.composer_content(screen)
    }

    fn composer_content(&self, screen: &Screen) -> Option<String> {
        let rows = screen.rows();
        let glyph = MARKER.to_string();
        let start = rows
            .iter()
            .rposition(|r| r.trim_start().starts_with(MARKER))?;
        let end = rows[start..]
            .iter()
            .position(|r| r.trim().is_empty())
            .map_or(rows.len(), |n| start + n);
        // The glyph row: typed text, or a paste placeholder (drawn in colour,
        // `cut-paste-in-composer.raw`) — not the dim placeholder of an empty composer. A
        // composer taller than the screen shows its glyph on its first visible row
        // (`composer-tall-paste.raw`).
        let first = screen.composer_text(&glyph).and_then(|c| {
            let placeholder = crate::term::paste_view::placeholder_size(&c.text).is_some();
            (c.typed || placeholder).then_some(c.text)
        });
        crate::adapter::composer_rows_text(
            std::iter::once(first.unwrap_or_default())
                .chain(rows[start + 1..end].iter().map(|r| r.trim().to_string())),
        )
    }

    fn pasted_form(&self, text: &str) -> String {
        pasted_form::codex(text)
    }

    fn clear_keys(&self) -> Option<crate::adapter::ClearKeys> {
        // Recorded: Ctrl-C clears a composer holding text (`clear-ctrl-c-cleared.raw`).
        Some(crate::adapter::ClearKeys {
            first: vec![0x03],
            again: None,
            exit_warning: None,
        })
    }

    fn ready_settle(&self, cwd: &Path) -> Duration {
        // Codex paints its composer first and raises the folder-trust dialog just after, in a
        // folder its config does not trust (recorded: boot-trust-ready-paste-call.raw); ready
        // must hold that long before input goes in. A peer's folder is trusted at its birth
        // (codex_setup::setup): there the dialog never comes, and waiting for it was most of
        // a wake's overhead (issue 13 item 2).
        if super::codex_setup::is_trusted(cwd) {
            TRUSTED_READY_SETTLE
        } else {
            UNTRUSTED_READY_SETTLE
        }
    }

    fn is_busy(&self, screen: &Screen) -> bool {
        busy_sign(screen.text())
    }

    fn confirmer(&self, cwd: &Path, text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        Box::new(SessionFileConfirm::new(
            Watch::start(cwd, self.0.conversation()),
            text,
            SESSION_RULES,
        ))
    }

    fn gate_watch(&self, cwd: &Path) -> Option<Box<dyn GateWatch>> {
        Some(Box::new(CodexGate {
            watch: Watch::start(cwd, self.0.conversation()),
        }))
    }

    fn activity_ms(&self, cwd: &Path) -> Option<u64> {
        if self.0.conversation().is_some() {
            let own = self.own_rollout(cwd)?;
            return super::newest_mtime_ms([own.as_path()]);
        }
        let sessions = sessions_dir()?;
        let files: Vec<PathBuf> = watch_dirs(&sessions, cwd)
            .iter()
            .flat_map(|d| jsonl_files(d))
            .filter(|f| rollout_cwd(f).is_some_and(|c| same_folder(&c, cwd)))
            .collect();
        super::newest_mtime_ms(files.iter().map(PathBuf::as_path))
    }

    /// Whether the bound conversation's session file exists (an unbound adapter resumes
    /// nothing: `NO_RECORDED_CONVERSATION`).
    fn resumable(&self, cwd: &Path) -> bool {
        self.0.conversation().is_some() && self.own_rollout(cwd).is_some()
    }

    /// The newest turn outcome of the session's own session file (the folder's newest while
    /// it is not known), read from its end.
    fn api_error(&self, cwd: &Path) -> Option<crate::adapter::ApiError> {
        let own = self.own_rollout(cwd)?;
        super::api_error::latest_codex_outcome(&super::api_error::tail(&own, API_ERROR_TAIL))
    }

    fn interrupt_keys(&self) -> Option<Vec<u8>> {
        Some(vec![0x1b])
    }

    /// Its gated launch asks through the `PermissionRequest` hook (`codex_gate`).
    fn gated_by_hook(&self) -> bool {
        true
    }

    fn compact(&self, cwd: &Path) -> Option<(&'static str, Box<dyn CompactWatch>)> {
        Some((
            "/compact",
            Box::new(CodexCompact {
                watch: Watch::start(cwd, self.0.conversation()),
            }),
        ))
    }
}

/// How Codex 0.171's session files confirm a delivery (the spec asks less of codex — written
/// and alive 300 ms later — but the session file is a real proof). A message pasted mid-turn
/// is written to the file only when it joins the running turn (after the model's current
/// answer), and shows meanwhile under "Messages to be submitted after next tool call" above
/// the composer (recorded in `tests/fixtures/codex-0.171.0/mid-turn-steer.*`): that screen is
/// its queue. A message entered just after Codex's session started, while its own start-up
/// is not over, shows under "Queued follow-up inputs" with no turn running, and Codex submits
/// it by itself tens of milliseconds later (`boot-queue/enter-at-session-footer.*`): waited
/// for, as Gemini CLI's start-up queue is.
const SESSION_RULES: SessionRules = SessionRules {
    is_user: is_user_record,
    form: pasted_form::codex,
    is_turn_end,
    queued: queued_in_turn,
    waiting: queued_at_start,
    conversation: rollout_id,
};

/// Codex 0.171's sign of a running turn (pure): its status row `• Working (3s • esc to
/// interrupt)`, or the pending-steer header `… (press esc to interrupt and send immediately)`.
fn busy_sign(screen: &str) -> bool {
    screen.contains("esc to interrupt") || screen.contains("Esc to interrupt")
}

/// The message waits in Codex's pending input behind a running turn (pure).
fn queued_in_turn(screen: &str, text: &str) -> bool {
    busy_sign(screen) && pending_input_shows(screen, text)
}

/// The message waits in Codex's pending input with no turn running (pure): Enter came after
/// its session started but before its start-up was over, and Codex submits it by itself once
/// it is (`tests/fixtures/codex-0.171.0/boot-queue/enter-at-session-footer.*`: shown under
/// "Queued follow-up inputs" 17 ms after Enter, submitted 89 ms after that).
fn queued_at_start(screen: &str, text: &str) -> bool {
    !busy_sign(screen) && pending_input_shows(screen, text)
}

impl RecordSource for Watch {
    fn new_records_by_file(&mut self) -> Vec<(PathBuf, Value)> {
        Watch::new_records_by_file(self)
    }
}

/// The wake failure reason for Codex's "open in another app" screen (its row, `row`): what
/// Codex says and what to do (pure).
fn open_elsewhere_reason(row: &str) -> String {
    let said = row
        .trim()
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .trim();
    let said = said.split("  ").next().unwrap_or(said).trim();
    format!(
        "Codex says \"{said}\": another Codex (a person's, or its background app server, which \
         outlives the window that opened it) holds the peer's conversation — close it there \
         (or end that app server), then send again"
    )
}

/// Headers of the pending-input preview Codex 0.171 draws above its composer while a turn
/// runs: messages that join the running turn at its next step, steers retried at the turn's
/// end, and follow-ups queued with Tab (its `pending_input_preview.rs`).
pub const PENDING_HEADERS: [&str; 3] = [
    "Messages to be submitted after next tool call",
    "Messages to be submitted at end of turn",
    "Queued follow-up inputs",
];

/// Rows of one pending entry compared with the text's first lines (Codex previews three).
const PENDING_PREVIEW_LINES: usize = 3;

/// Whether the screen's pending-input preview holds `text` (pure): below one of
/// [`PENDING_HEADERS`] and above the composer, an entry (`↳` then indented rows) whose rows
/// are the text's first lines, a row cut with `…` matching a line's start; both in Codex's
/// [`pasted_form::codex`] (its preview drops a TAB: `tests/fixtures/codex-0.171.0/paste/tab-mid-turn.raw`).
pub fn pending_input_shows(screen: &str, text: &str) -> bool {
    let text = pasted_form::codex(text);
    let screen = pasted_form::codex(screen);
    let want: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take(PENDING_PREVIEW_LINES)
        .collect();
    if want.is_empty() {
        return false;
    }
    let rows: Vec<&str> = screen.lines().map(str::trim).collect();
    let Some(start) = rows
        .iter()
        .rposition(|r| PENDING_HEADERS.iter().any(|h| r.contains(h)))
    else {
        return false;
    };
    let block: Vec<&str> = rows[start + 1..]
        .iter()
        .take_while(|r| !r.starts_with(MARKER))
        .copied()
        .collect();
    let same = |row: &str, line: &str| {
        row == line
            || row
                .strip_suffix('…')
                .is_some_and(|cut| !cut.is_empty() && line.starts_with(cut.trim_end()))
    };
    block.iter().enumerate().any(|(i, row)| {
        let Some(first) = row.strip_prefix('↳') else {
            return false;
        };
        let mut entry = vec![first.trim()];
        entry.extend(block[i + 1..].iter().take(want.len() - 1).copied());
        entry.len() == want.len() && entry.iter().zip(&want).all(|(r, l)| same(r, l))
    })
}

/// Passes on the model's first record; fails early when Codex reports its stream failing.
struct CodexGate {
    watch: Watch,
}

impl GateWatch for CodexGate {
    fn poll(&mut self, screen: &str) -> GateState {
        let answered = self.watch.new_records().iter().any(is_model_record);
        GateState::of(answered, || stream_error_line(screen))
    }
}

/// Codex's reconnect status once past its first retry, e.g. `Reconnecting... 2/5` (pure).
pub fn stream_error_line(screen: &str) -> Option<String> {
    screen.lines().find_map(|l| {
        let at = l.find("Reconnecting")?;
        let rest = &l[at..];
        let n: u32 = rest
            .split_whitespace()
            .find_map(|w| w.split('/').next()?.parse().ok())?;
        (n >= 2).then(|| {
            l.trim()
                .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
                .trim()
                .to_string()
        })
    })
}

struct CodexCompact {
    watch: Watch,
}

impl CompactWatch for CodexCompact {
    fn poll(&mut self, _screen: &str) -> Option<Result<CompactOutcome, CompactRefused>> {
        self.watch
            .new_records()
            .iter()
            .any(is_compacted_record)
            .then_some(Ok(CompactOutcome::Compacted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch_env::LaunchEnv;
    use crate::paths::Paths;
    use crate::runtime::transcript::record_contains;
    use crate::runtime::Acceptance;
    use crate::testkit::launch_ctx;
    use serde_json::json;

    fn rows(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    #[test]
    fn argv_carries_the_flags_the_prompt_and_the_port() {
        let (dir, paths) = Paths::temp();
        let c = Codex::with_program("/bin/codex".into());
        let env = LaunchEnv {
            start_args: vec!["--model".into(), "o3".into()],
            ..LaunchEnv::default()
        };
        let prompt = dir.path().join("p.md");
        let ctx = LaunchCtx {
            system_prompt: Some(&prompt),
            ..launch_ctx(&paths, dir.path(), &env)
        };
        let args: Vec<String> = c.command(&ctx).unwrap().arg_strings();
        let cwd = dir.path().display().to_string();
        let instr = format!("model_instructions_file={}", prompt.display());
        assert_eq!(
            args,
            vec![
                "--no-daemon",
                "--no-alt-screen",
                "-C",
                cwd.as_str(),
                "-c",
                instr.as_str(),
                "-c",
                "mcp_servers.iapeer.url=\"http://127.0.0.1:8765/mcp\"",
                "-c",
                "mcp_servers.iapeer.tool_timeout_sec=330",
                "--dangerously-bypass-approvals-and-sandbox",
                "--model",
                "o3"
            ]
        );
        // A gated peer never runs with the bypass flag: Codex asks on request in a read-only
        // sandbox, and the approval hook answers.
        let gated = LaunchCtx {
            gated: Some(std::time::Duration::from_secs(300)),
            ..ctx
        };
        let args: Vec<String> = c.command(&gated).unwrap().arg_strings();
        assert!(!args.iter().any(|a| a.contains("dangerously")), "{args:?}");
        let at = args.iter().position(|a| a == "on-request").unwrap();
        assert_eq!(
            &args[at - 1..at + 3],
            &["-a", "on-request", "-s", "read-only"]
        );
        assert!(
            args[at + 8].starts_with("hooks=") && args[at + 8].contains("approval-request"),
            "{args:?}"
        );
        assert_eq!(&args[args.len() - 2..], &["--model", "o3"]);
        // A daemon with a longer send deadline gives the MCP client its own (issue 27).
        let longer = LaunchCtx {
            tool_timeout: crate::runtime::mcp_tool_timeout(std::time::Duration::from_secs(900)),
            ..ctx
        };
        let args: Vec<String> = c.command(&longer).unwrap().arg_strings();
        assert!(
            args.contains(&"mcp_servers.iapeer.tool_timeout_sec=930".to_string()),
            "{args:?}"
        );
    }

    #[test]
    fn boot_screens() {
        let trust = rows("  Folder access\n  /w/x\n  Trust this folder? Codex can read, edit, and run files here.\n\n› 1. Trust and continue\n  2. Back to Agent Command Center\n\n  enter continue · esc back");
        assert_eq!(
            boot_step_for(&trust),
            BootStep::Key {
                bytes: b"\r".to_vec(),
                label: "trust (Enter)".into()
            }
        );
        let ready = rows(
            "  >_ OpenAI Codex (v0.171.0)\n› Ask Codex to do anything\n  gpt-5.1 default · /w/x",
        );
        assert_eq!(boot_step_for(&ready), BootStep::Ready);
        let update = rows("  ✨ Update available! 0.171.0 -> 0.172.0\n\n› 1. Update now\n  2. Skip\n\n  Press enter to continue");
        assert!(
            matches!(boot_step_for(&update), BootStep::Key { ref label, .. } if label == "update (Down)")
        );
        assert_eq!(boot_step_for(&rows("loading...")), BootStep::Wait);
    }

    #[test]
    fn records() {
        assert!(is_user_record(
            &json!({"type":"response_item","payload":{"type":"message","role":"user","content":[]}})
        ));
        assert!(!is_user_record(
            &json!({"type":"response_item","payload":{"type":"message","role":"developer"}})
        ));
        assert!(is_model_record(
            &json!({"type":"response_item","payload":{"type":"function_call","name":"send_to_peer"}})
        ));
        assert!(is_model_record(
            &json!({"type":"event_msg","payload":{"type":"agent_message"}})
        ));
        assert!(is_compacted_record(
            &json!({"type":"event_msg","payload":{"type":"context_compacted"}})
        ));
        assert!(is_compacted_record(
            &json!({"type":"compacted","payload":{}})
        ));
        assert_eq!(
            stream_error_line("■ stream disconnected · Reconnecting... 2/5"),
            Some("stream disconnected · Reconnecting... 2/5".into())
        );
        assert_eq!(stream_error_line("Reconnecting... 1/5"), None);
    }

    /// Issue 7: Codex 0.171 shows a message pasted mid-turn under "Messages to be submitted
    /// after next tool call" and writes it to the session file only when it joins the running
    /// turn (recorded: `tests/fixtures/codex-0.171.0/mid-turn-steer.{raw,jsonl}`).
    #[test]
    fn fixture_mid_turn_steer_is_queued_then_accepted() {
        let dir = format!(
            "{}/tests/fixtures/codex-0.171.0",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"23:37:55\">\nReply via send_to_peer.\n<msg>MID-TURN</msg>\n</iap>";
        let bytes = std::fs::read(format!("{dir}/mid-turn-steer.raw")).unwrap();
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        let mut shown = Vec::new();
        for part in bytes.chunks(64) {
            screen.feed(part, true);
            let now = pending_input_shows(screen.text(), text);
            if shown.last() != Some(&now) {
                shown.push(now);
            }
        }
        assert_eq!(shown, [false, true, false], "shown, then submitted");
        let other = text.replace("MID-TURN", "OTHER");
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        let mut ever = false;
        for part in bytes.chunks(64) {
            screen.feed(part, true);
            ever |= pending_input_shows(screen.text(), &other);
        }
        assert!(!ever, "another message is not ours");

        let records: Vec<Value> = std::fs::read_to_string(format!("{dir}/mid-turn-steer.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let user = |r: &Value| is_user_record(r) && record_contains(r, text, pasted_form::codex);
        let at = records.iter().position(user).expect("the steer's record");
        // It joined the same turn: no new task_started between the held turn's and it.
        let started = records
            .iter()
            .rposition(|r| r["payload"]["type"] == "task_started")
            .unwrap();
        assert!(started < at);
    }

    /// The flake of `conversations::a_codex_peer_killed_mid_turn…` (a wake's first message
    /// answered `queued for cx (codex) — runtime` in CI): an Enter that comes just after
    /// Codex's session started (its footer names the model) but before its start-up is over
    /// puts the message under "Queued follow-up inputs", no turn running, and Codex submits it
    /// by itself 89 ms later (recorded by `tests/codex.rs`
    /// `record_codex_enter_at_session_footer`: `boot-queue/enter-at-session-footer.raw`). That
    /// is waited for, never answered queued; a steer behind a running turn
    /// (`mid-turn-steer.raw`) still is.
    #[test]
    fn fixture_enter_before_the_start_up_ends_is_waited_for_not_queued() {
        use crate::adapter::Confirm;
        struct NoRecords;
        impl RecordSource for NoRecords {
            fn new_records_by_file(&mut self) -> Vec<(PathBuf, Value)> {
                Vec::new()
            }
        }
        let (bytes, _) = recorded_at(
            "boot-queue/enter-at-session-footer.raw",
            "Queued follow-up inputs",
        );
        let text = "ENTER-AT-SESSION-FOOTER typed";
        let mut confirm = SessionFileConfirm::new(NoRecords, text, SESSION_RULES);
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        let (mut shown, mut answers) = (false, Vec::new());
        for part in bytes.chunks(64) {
            screen.feed(part, true);
            shown |= pending_input_shows(screen.text(), text);
            let a = confirm.acceptance(&[], screen.text());
            if answers.last() != Some(&a) {
                answers.push(a);
            }
        }
        assert!(shown, "the recording shows Codex's own queue");
        assert_eq!(answers, [Acceptance::Pending], "never queued");
        assert!(confirm.held_by_runtime(), "held by Codex until its record");

        let (bytes, _) = recorded_at("mid-turn-steer.raw", "MID-TURN");
        let text = "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"23:37:55\">\nReply via send_to_peer.\n<msg>MID-TURN</msg>\n</iap>";
        let mut confirm = SessionFileConfirm::new(NoRecords, text, SESSION_RULES);
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        let mut answers = Vec::new();
        for part in bytes.chunks(64) {
            screen.feed(part, true);
            let a = confirm.acceptance(&[], screen.text());
            if answers.last() != Some(&a) {
                answers.push(a);
            }
        }
        assert_eq!(answers, [Acceptance::Pending, Acceptance::Queued]);
        assert!(!confirm.held_by_runtime());
    }

    /// A recorded pane log of Codex 0.171.0 (`tests/fixtures/codex-0.171.0/<name>`), and
    /// where `needle` first stands in it.
    fn recorded_at(name: &str, needle: &str) -> (Vec<u8>, usize) {
        let path = format!(
            "{}/tests/fixtures/codex-0.171.0/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .unwrap_or_else(|| panic!("{path} has no {needle:?}"));
        (bytes, at)
    }

    /// A screen of the session's size that has been fed `bytes`.
    fn session_screen(bytes: &[u8]) -> Screen {
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        screen.feed(bytes, true);
        screen
    }

    /// Issue 7 item 2: a draft typed by an attached human into Codex 0.171 (recorded:
    /// `tests/fixtures/codex-0.171.0/composer-draft.raw`) is a draft; the placeholder of the
    /// empty composer before it ("Ask Codex to do anything") is not.
    #[test]
    fn fixture_composer_draft() {
        let (bytes, at) = recorded_at("composer-draft.raw", "unfinished");
        let codex = Codex::with_program("/bin/codex".into());
        let mut screen = session_screen(&bytes[..at.saturating_sub(40)]);
        assert!(screen.text().contains("Ask Codex to do anything"));
        assert_eq!(codex.composer_draft(&screen), None);
        screen.feed(&bytes[at.saturating_sub(40)..], true);
        assert_eq!(
            codex.composer_draft(&screen).as_deref(),
            Some("my unfinished draft")
        );
    }

    /// Codex's own approval dialog (shown when no hook decides) counts as a draft; while a
    /// gated peer's hook runs, the screen is busy with an open composer (a paste is a steer of
    /// the turn, which answers nothing), so nothing is held for it.
    #[test]
    fn fixture_approval_dialog_is_a_draft_and_a_running_hook_is_not() {
        let codex = Codex::with_program("/bin/codex".into());
        let dir = format!(
            "{}/tests/fixtures/codex-0.171.0/approvals",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(format!("{dir}/approval-dialog.raw")).unwrap();
        let mut screen = Screen::new(50, 160);
        screen.feed(&bytes, true);
        assert!(screen
            .text()
            .contains("Would you like to run the following command?"));
        assert_eq!(
            codex.composer_draft(&screen).as_deref(),
            Some(APPROVAL_DIALOG_OPEN)
        );

        let (bytes, at) = recorded_at("approvals/hook-pending.raw", "Running hook");
        let mut screen = Screen::new(50, 160);
        screen.feed(&bytes[..at + 300], true);
        assert!(screen.text().contains("Running hook"), "{}", screen.text());
        assert!(codex.is_busy(&screen));
        assert_eq!(codex.composer_draft(&screen), None);
        // The boot's folder-trust menu is not an approval dialog.
        let trust = [
            "  Do you trust the contents of this directory?".to_string(),
            "› 1. Yes, continue".to_string(),
            "  2. No, quit".to_string(),
            "  Press enter to continue".to_string(),
        ];
        assert!(!approval_dialog_open(&trust));
    }

    /// The model-switch menu a usage-limit refusal opens (recorded from the real 0.171.0, with
    /// the session's size) is answered towards "Keep current model", never option 1.
    #[test]
    fn the_model_switch_menu_is_answered_keep_current_model() {
        let (bytes, at) = recorded_at("usage-limit-switch-prompt.raw", "Approaching rate limits");
        let codex = Codex::with_program("/bin/codex".into());
        let mut screen = session_screen(&bytes[..at.saturating_sub(200)]);
        assert_eq!(codex.live_dialog(&screen), None, "no menu yet");
        let end = bytes[at..]
            .windows(b"back".len())
            .position(|w| w == b"back")
            .map_or(bytes.len(), |p| at + p + 4);
        screen.feed(&bytes[at.saturating_sub(200)..end], true);
        assert!(
            screen.text().contains("Switch to gpt-6-luna"),
            "{}",
            screen.text()
        );
        match codex.live_dialog(&screen) {
            Some(BootStep::Key { bytes, label }) => {
                assert_eq!(label, "model-switch (Down)");
                assert_eq!(bytes, encode_keys(&["Down"], false).unwrap());
            }
            other => panic!("{other:?}"),
        }
        // With the cursor on it, Enter; the boot table does not know this menu.
        let rows: Vec<String> = [
            "Approaching rate limits",
            "Switch to gpt-6-luna for lower credit usage?",
            "  1. Switch to gpt-6-luna",
            "     Fast and affordable model for easier tasks.",
            "› 2. Keep current model",
            "  3. Keep current model (never show again)",
            "press enter to confirm or esc to go back",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(matches!(
            dialog_step(&rows, LIVE_DIALOGS),
            Some(BootStep::Key { label, .. }) if label == "model-switch (Enter)"
        ));
        assert_eq!(dialog_step(&rows, DIALOGS), None);
    }

    /// Rows cut with `…` match a line's start; a composer row ends the preview.
    #[test]
    fn pending_preview_rules() {
        let text =
            "<iap from=\"a\" ts=\"1\">\nReply via send_to_peer.\n<msg>a long body</msg>\n</iap>";
        let screen = "• Working (3s • esc to interrupt)\n• Messages to be submitted after next tool call (press esc to interrupt and send immediately)\n  ↳ <iap from=\"a\" ts=\"1\">\n    Reply via send_to_peer.\n    <msg>a long…\n› Ask Codex to do anything";
        assert!(pending_input_shows(screen, text));
        let after_composer =
            "• Messages to be submitted after next tool call\n› <iap from=\"a\" ts=\"1\">";
        assert!(!pending_input_shows(after_composer, text));
        assert!(!pending_input_shows("no preview at all", text));
    }

    /// Replay the recorded boot in chunks: the trust dialog is answered with Enter (the cursor
    /// starts on the wanted option), and the screen ends ready.
    #[test]
    fn recorded_boot_visits_trust_then_ready() {
        let path = format!(
            "{}/tests/fixtures/codex-0.171.0/boot-trust-ready-paste-call.raw",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap();
        for chunk in [13usize] {
            let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
            let mut seen: Vec<String> = Vec::new();
            for part in bytes.chunks(chunk) {
                screen.feed(part, true);
                let label = match boot_step_for(screen.rows()) {
                    BootStep::Key { label, .. } => label,
                    BootStep::Ready => "ready".into(),
                    _ => continue,
                };
                if seen.last() != Some(&label) {
                    seen.push(label);
                }
            }
            // Codex 0.171 paints its ready screen first and raises the trust dialog a moment
            // later (hence the ready settle); the dialog is answered and ready follows.
            let trust = seen
                .iter()
                .position(|s| s == "trust (Enter)")
                .unwrap_or_else(|| panic!("{seen:?}"));
            assert_eq!(
                seen.last().map(String::as_str),
                Some("ready"),
                "chunks of {chunk}: {seen:?}"
            );
            assert!(trust < seen.len() - 1);
        }
    }

    /// A resumed session appends to its file in the day folder it was created in, however old;
    /// records of other working folders in the same day folders are not this peer's.
    #[test]
    fn a_resumed_session_in_an_old_day_folder_is_watched_and_others_are_ignored() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path();
        let meta = |cwd: &str| {
            format!("{{\"type\":\"session_meta\",\"payload\":{{\"cwd\":\"{cwd}\"}}}}\n")
        };
        let old = sessions.join("2020/01/02");
        std::fs::create_dir_all(&old).unwrap();
        let ours = old.join("rollout-2020-01-02T00-00-00-a.jsonl");
        std::fs::write(&ours, meta("/w/bob")).unwrap();
        // Three later days with other peers' sessions push 2020/01/02 out of the recent ones.
        for day in ["2021/01/01", "2022/01/01", "2023/01/01"] {
            std::fs::create_dir_all(sessions.join(day)).unwrap();
            std::fs::write(sessions.join(day).join("rollout-x.jsonl"), meta("/w/eve")).unwrap();
        }
        assert_eq!(
            newest_rollout(sessions, Path::new("/w/bob")),
            Some(ours.clone())
        );
        assert!(watch_dirs(sessions, Path::new("/w/bob")).contains(&old));
        let mut w = Watch::over(Some(sessions), Path::new("/w/bob"), None);
        let model = "{\"type\":\"event_msg\",\"payload\":{\"type\":\"agent_message\"}}\n";
        let append = |p: &Path| {
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(model.as_bytes()).unwrap();
        };
        append(&sessions.join("2023/01/01/rollout-x.jsonl"));
        assert!(w.new_records().is_empty(), "eve's record is not bob's");
        append(&ours);
        assert_eq!(w.new_records().len(), 1);
    }

    #[test]
    fn rollout_cwd_reads_the_session_meta() {
        let (_dir, f) = crate::testkit::temp_file(
            "rollout-x.jsonl",
            "{\"type\":\"session_meta\",\"payload\":{\"cwd\":\"/w/bob\"}}\n{}\n",
        );
        assert_eq!(rollout_cwd(&f), Some(PathBuf::from("/w/bob")));
        std::fs::write(&f, "{\"type\":\"other\"}\n").unwrap();
        assert_eq!(rollout_cwd(&f), None);
    }

    /// A recording of `tests/fixtures/codex-0.171.0/` replayed on a screen of the session's
    /// size.
    fn screen_of(name: &str) -> Screen {
        let path = format!(
            "{}/tests/fixtures/codex-0.171.0/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        screen.feed(&std::fs::read(path).unwrap(), true);
        screen
    }

    fn codex() -> Codex {
        Codex::with_program("/bin/codex".into())
    }

    /// The lines of a recording in `tests/fixtures/codex-0.171.0/`.
    fn fixture_lines(name: &str) -> Vec<String> {
        let path = format!(
            "{}/tests/fixtures/codex-0.171.0/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// The conversation id of `rollout-fresh-session.jsonl` (its name and `session_meta`).
    const RECORDED_ID: &str = "01a24be8-ec5a-7201-8ab7-041564656d45";

    /// Issue 32 item 1: the session's conversation is the session file that holds the
    /// message iapeer pasted — not the folder's newest, which may be a person's Codex in the
    /// same folder — and its id is what that file records. The turn that took the message
    /// ends with that file's `task_complete`, not another's. Replayed from a real Codex
    /// 0.171.0 session file (`rollout-fresh-session.jsonl`, the TUI asked `hello there`).
    #[test]
    fn fixture_the_conversation_is_the_file_holding_the_paste_and_its_turn_ends_there() {
        use std::io::Write;
        let lines = fixture_lines("rollout-fresh-session.jsonl");
        let cwd = Path::new("/tmp/ex/proj");
        assert_eq!(rollout_cwd_of_line(&lines[0]), cwd);
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sessions");
        let day = sessions.join("2026/12/06");
        std::fs::create_dir_all(&day).unwrap();
        let ours = day.join(format!("rollout-2026-12-06T15-11-25-{RECORDED_ID}.jsonl"));
        let person_id = "01a24beb-9606-7552-adc0-a7acd4c7b76d";
        let theirs = day.join(format!("rollout-2026-12-06T15-14-20-{person_id}.jsonl"));
        std::fs::write(&ours, &lines[0]).unwrap();
        std::fs::write(&theirs, lines[0].replace(RECORDED_ID, person_id)).unwrap();
        let append = |path: &Path, text: &str| {
            let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        let mut confirm = SessionFileConfirm::new(
            Watch::over(Some(&sessions), cwd, None),
            "hello there",
            SESSION_RULES,
        );
        // The person's turn, newest in the folder, holds other text.
        append(&theirs, &lines[1..7].concat());
        append(&theirs, &lines[7].replace("hello there", "the weather"));
        assert_eq!(confirm.acceptance(&[], ""), Acceptance::Pending);
        append(&ours, &lines[1..=10].concat());
        assert_eq!(confirm.acceptance(&[], ""), Acceptance::Accepted);
        assert_eq!(confirm.conversation().as_deref(), Some(RECORDED_ID));
        // Taken at the user record's own time (issue 31 item 2).
        let at: jiff::Timestamp = "2026-12-06T15:11:34.736Z".parse().unwrap();
        assert_eq!(confirm.taken_ms(), Some(at.as_millisecond() as u64));
        assert!(!confirm.turn_ended());
        append(&theirs, &lines[11..].concat());
        assert!(!confirm.turn_ended(), "another conversation's turn ended");
        append(&ours, &lines[11..].concat());
        assert!(confirm.turn_ended());
        assert_eq!(rollout_of(&sessions, RECORDED_ID), Some(ours.clone()));
        assert_eq!(rollout_of(&sessions, "01a2"), None, "a whole id only");
        // A watch of the known conversation reads its file only.
        let mut bound = Watch::over(Some(&sessions), cwd, Some(person_id));
        append(&ours, &lines[7]);
        append(&theirs, &lines[13]);
        let records = bound.new_records();
        assert_eq!(records.len(), 1);
        assert!(is_turn_end(&records[0]));
    }

    fn rollout_cwd_of_line(line: &str) -> PathBuf {
        let v: Value = serde_json::from_str(line).unwrap();
        PathBuf::from(v["payload"]["cwd"].as_str().unwrap())
    }

    /// A resume names the recorded conversation (`codex resume <id>`), never `--last`; with
    /// none recorded there is nothing to resume.
    #[test]
    fn a_resume_names_the_conversation_and_never_the_newest() {
        let (dir, paths) = Paths::temp();
        let env = LaunchEnv::default();
        let ctx = LaunchCtx {
            mode: WakeMode::Resume,
            system_prompt: None,
            ..launch_ctx(&paths, dir.path(), &env)
        };
        assert_eq!(
            codex().command(&ctx).unwrap_err().to_string(),
            super::super::NO_RECORDED_CONVERSATION
        );
        assert_eq!(
            codex().conversation_naming(),
            crate::adapter::ConversationNaming::Learned
        );
        let bound = codex().for_conversation(RECORDED_ID).unwrap();
        // Its session file is not there: refused, and said which.
        assert!(bound
            .command(&ctx)
            .unwrap_err()
            .to_string()
            .contains(&format!("conversation {RECORDED_ID}")));
        let fresh = LaunchCtx {
            mode: WakeMode::Fresh,
            ..ctx
        };
        let args = bound.command(&fresh).unwrap().arg_strings();
        assert!(
            !args.iter().any(|a| a == "resume" || a == "--last"),
            "{args:?}"
        );
    }

    /// Issue 32 item 1: a resume whose conversation another Codex holds shows "This
    /// conversation is open in another app" instead of a composer, and waits for a key
    /// (recorded: `resume-open-in-another-app.raw`, a person's `codex resume <id>` of the
    /// peer's conversation, quit, its app server still running). The boot fails with Codex's
    /// words, and the screen's most informative line is that one too.
    #[test]
    fn fixture_a_conversation_open_in_another_app_fails_the_boot_with_codex_s_words() {
        let screen = screen_of("resume-open-in-another-app.raw");
        match codex().boot_step(&screen) {
            BootStep::Fail(reason) => assert_eq!(
                reason,
                "Codex says \"This conversation is open in another app\": another Codex (a \
                 person's, or its background app server, which outlives the window that \
                 opened it) holds the peer's conversation — close it there (or end that app \
                 server), then send again"
            ),
            other => panic!("{other:?}\n{}", screen.text()),
        }
        let line = crate::session::failure_line::most_informative_line(
            screen.text(),
            crate::term::SESSION_COLS as usize,
        );
        assert_eq!(
            line.as_deref(),
            Some("🔒 This conversation is open in another app r to retry")
        );
    }

    /// Issue 26 item 5 (c): the rest of a paste cut off by its deadline lands in Codex's
    /// composer as `[Pasted Content 15117 chars]`, drawn in colour: content of the composer
    /// (a draft, not an empty composer: the next paste went in glued to it), with the pasted
    /// text's character count, so iapeer knows it for its own
    /// (`cut-paste-in-composer.raw`); Ctrl-C clears it (`clear-ctrl-c-cleared.raw`).
    #[test]
    fn fixture_a_cut_paste_is_content_and_ctrl_c_clears_it() {
        use crate::session::own_text::Tracker;
        let c = codex();
        let screen = screen_of("cut-paste-in-composer.raw");
        assert_eq!(
            c.composer_content(&screen).as_deref(),
            Some("[Pasted Content 15117 chars]")
        );
        assert!(c.composer_draft(&screen).is_some());
        let pasted = format!(
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"13:50:01\">\nReply via send_to_peer.\n<msg>BIG {}</msg>\n</iap>",
            "界".repeat(15000)
        );
        assert_eq!(pasted.chars().count(), 15117);
        let t0 = std::time::Instant::now();
        let mut own = Tracker::default();
        own.pasting(2, &pasted, t0);
        own.cut(2, 10);
        own.on_written(10, t0);
        assert_eq!(
            own.find("[Pasted Content 15117 chars]", t0).map(|o| o.id),
            Some(2)
        );
        assert_eq!(c.clear_keys().unwrap().first, vec![0x03]);
        let cleared = screen_of("clear-ctrl-c-cleared.raw");
        assert!(cleared.text().contains("Ask Codex to do anything"));
        assert_eq!(c.composer_content(&cleared), None);
    }

    /// Codex 0.171.0 keeps an interrupted prompt in its conversation (`■ Conversation
    /// interrupted`) and leaves its composer empty (`interrupt-keeps-prompt.raw`; its
    /// rollout, `interrupt-rollout.jsonl`, has a `turn_aborted` event with reason
    /// `interrupted`, and the next model request carried the prompt).
    #[test]
    fn fixture_an_interrupted_prompt_stays_in_the_conversation() {
        let screen = screen_of("interrupt-keeps-prompt.raw");
        assert!(screen.text().contains("Conversation interrupted"));
        assert_eq!(codex().composer_content(&screen), None);
        let path = format!(
            "{}/tests/fixtures/codex-0.171.0/interrupt-rollout.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        let records: Vec<Value> = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(records
            .iter()
            .any(|r| r["payload"]["type"] == "turn_aborted"
                && r["payload"]["reason"] == "interrupted"));
    }

    /// A composer taller than the screen: its glyph on the first row it shows, every row
    /// down to the blank one above the footer is its content (`composer-tall-paste.raw`, a
    /// human's paste of 60 lines on a 40-row terminal).
    #[test]
    fn fixture_a_tall_composer_is_read_to_its_end() {
        let content = codex()
            .composer_content(&screen_of("composer-tall-paste.raw"))
            .unwrap();
        let first = content.lines().next().unwrap();
        assert!(first.starts_with("pasted line "), "{content}");
        assert!(
            content.ends_with("pasted line 58\npasted line 59"),
            "{content}"
        );
    }

    /// The typed draft is the composer's content; the empty composer's dim placeholder is
    /// none (`composer-draft.raw`).
    #[test]
    fn fixture_a_typed_draft_is_the_composer_content() {
        assert_eq!(
            codex()
                .composer_content(&screen_of("composer-draft.raw"))
                .as_deref(),
            Some("my unfinished draft")
        );
        assert_eq!(
            codex().composer_content(&screen_of("boot-trust-ready-paste-call.raw")),
            None
        );
    }
}

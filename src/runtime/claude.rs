//! The `claude` runtime (spec 04 §2 "claude"): Claude Code CLI in a pty, its boot dialogs
//! answered by label, delivery confirmed from its JSONL transcript.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::agent_program::Bound;
use super::claude_paths;
use super::claude_screen::{self, ClaudeScreen};
use super::pasted_form;
use super::transcript::{jsonl_files, record_contains, TranscriptWatch, TurnProgress};
use super::{
    Acceptance, Adapter, BootStep, CompactOutcome, CompactRefused, CompactWatch, Confirm,
    GateState, GateWatch, LaunchCommand, LaunchCtx, LaunchError, WakeMode,
};
use crate::runtime_table::{PromptSwap, CLAUDE};
use crate::term::paste_view::PasteView;
use crate::term::{encode_keys, Screen};

/// How long after the agent's MCP client listed the daemon's tools a Claude Code boot holds
/// the Enter of its first message (issue 13 item 2; the paste goes in meanwhile). Claude Code 2.1.332 answers nothing
/// when the tool joins its state: its MCP connection handler queues the new server's tools
/// and applies its queue on a 16 ms timer (`rr=16` beside `applyQueuedUpdates` in its
/// bundle), behind whatever start-up work holds its event loop, and a message submitted
/// before that goes to the model without `send_to_peer`. Measured with the bench's stand-in
/// model (either MCP protocol era): no wait, 8–9 of 12 first requests lacked the tool;
/// 50 ms, 2 of 12; 100 ms, 1 of 67 over seven runs; 150 ms, 0 of 24. A first turn without
/// the tool cannot answer its sender, which costs far more than 50 ms, so 150 ms it is
/// (1 s before issue 13, most of a wake's overhead). Counted from the daemon's answer to the
/// listing (issue 31 item 1). Still needed (issue 31, `BENCH_WAKES=1`, load average 6–17 on
/// 2 cores): 0 ms, 4 of 100 wakes' first requests lacked the tool; 150 ms, 0 of 200. Claude Code's own first-turn holds
/// (`CLAUDE_CODE_MCP_PREWAIT_SERVERS`, `CLAUDE_CODE_MCP_STARTUP_WAIT_MS`, `--mcp-config`) are
/// for its headless modes only: its TUI sends a turn submitted while the server is pending
/// without the tool whatever they say, and draws nothing when the tool joins
/// (`tests/fixtures/claude-2.1.332/mcp-first-turn/`).
pub const MCP_SETTLE: Duration = Duration::from_millis(150);

/// The composer row of a Claude Code 2.1.332 screen: the last row starting with `glyph`,
/// right under a rule (`────`) and, with `closed`, right above one too (an empty or one-row
/// composer, as every recording shows it). `None` when that row is not framed so (pure).
fn framed_composer(rows: &[String], glyph: &str, closed: bool) -> Option<usize> {
    let at = rows
        .iter()
        .rposition(|r| r.trim_start().starts_with(glyph))?;
    let rule = |i: usize| rows.get(i).is_some_and(|r| r.trim_start().starts_with('─'));
    (at > 0 && rule(at - 1) && (!closed || rule(at + 1))).then_some(at)
}

/// The rows `[start, end)` of Claude Code 2.1.332's composer (pure): between its two rules,
/// the first starting with `glyph` (`interrupt-restores-prompt.raw`: an interrupted prompt
/// put back, one row per line). A composer taller than the screen has its top rule and glyph
/// row scrolled off and fills every row above its bottom rule, each indented
/// (`interrupt-restores-tall-prompt.raw`); rows above a lone rule that are not all so (a
/// frame drawn halfway, the conversation) are no composer.
fn composer_rows(rows: &[String], glyph: &str) -> Option<(usize, usize)> {
    let rule = |r: &String| r.trim_start().starts_with('─');
    let bottom = rows.iter().rposition(rule)?;
    match rows[..bottom].iter().rposition(rule) {
        Some(top) => rows
            .get(top + 1)
            .filter(|r| top + 1 < bottom && r.trim_start().starts_with(glyph))
            .map(|_| (top + 1, bottom)),
        None => {
            let continued = |r: &String| {
                r.is_empty() || (r.starts_with("  ") && !r.trim_start().starts_with('⎿'))
            };
            (bottom >= SCROLLED_COMPOSER_ROWS
                && !rows[0].is_empty()
                && rows[..bottom].iter().all(continued))
            .then_some((0, bottom))
        }
    }
}

/// The least rows above its bottom rule a composer scrolled past the screen's top fills.
const SCROLLED_COMPOSER_ROWS: usize = 10;

/// What Claude Code 2.1.332 draws under a message it queued behind a running turn
/// (`Queued · ctrl+enter to send now`, `tests/fixtures/claude-2.1.332/mid-turn-queue.raw`).
const QUEUED_ROW: &str = "Queued ·";

/// Boot keys are spaced this far apart. Claude Code 2.1.332's startup "Adding a new
/// directory" dialog takes a key that comes within 700 ms of a key it counted as typing for
/// more typing (its `kIn = 700` in the shipped bundle): once a first Enter lands as typing,
/// an arrow and Enter sent on each screen update keep landing inside that window, the menu
/// refuses the answer and resets, for ever (recorded in
/// `tests/fixtures/claude-2.1.332/add-dir-held-loop.txt`).
pub const BOOT_KEY_GAP: Duration = Duration::from_millis(800);

/// A permission prompt's keys wait this long after it shows. Claude Code 2.1.332 drops a
/// key whose run of keys (keys less than 700 ms apart) began within 700 ms of the prompt's
/// first frame, as stray typing (its menu guard in the shipped bundle: `Q < eT(H) + 700`,
/// `eT` the frame's `firstFrame.writtenAt`); an approve keyed 49 ms after the prompt showed
/// was dropped, and one keyed later taken (tests/bypass_prompts.rs).
pub const PROMPT_SETTLE: Duration = Duration::from_millis(1000);

/// The reason given when Claude Code shows its login picker.
pub const NOT_LOGGED_IN: &str = "Claude Code is not logged in — run claude once and log in";
/// The reason given when Claude Code cannot reach its API.
pub const CANNOT_CONNECT: &str = "Claude Code says \"Unable to connect to Anthropic services\" — run claude once by hand to check its login and network";

/// The tool disallowed by default (a question dialog would block an unattended agent).
pub const DEFAULT_DISALLOWED: &str = "AskUserQuestion";

/// Whether `p` is a regular file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A watch of the transcripts of `cwd`, wherever Claude Code puts them
/// ([`claude_paths::transcript_dir`]), found once they exist: only the conversation
/// `<id>.jsonl` when the session's conversation is known (issue 32), else every one.
/// The computed folder is checked on every look; the search by `cwd` (which reads every
/// project folder) at most every [`SCAN_EVERY`].
fn watch(cwd: &Path, conversation: Option<&str>) -> Option<TranscriptWatch> {
    let cwd = cwd.to_path_buf();
    let mut scanned: Option<std::time::Instant> = None;
    let watch = TranscriptWatch::located(Box::new(move || {
        if let Some(d) = claude_paths::computed_project_dir(&cwd).filter(|d| d.is_dir()) {
            return Some(d);
        }
        if scanned.is_some_and(|t| t.elapsed() < SCAN_EVERY) {
            return None;
        }
        scanned = Some(std::time::Instant::now());
        claude_paths::transcript_dir(&cwd)
    }));
    Some(match conversation {
        Some(id) => watch.only(transcript_name(id)),
        None => watch,
    })
}

/// The file name of conversation `id`'s transcript in its project folder (`<id>.jsonl`,
/// recorded: `claude -p … --session-id <uuid>` wrote `projects/<folder>/<uuid>.jsonl`, and
/// `--resume <uuid>` appended to it).
fn transcript_name(id: &str) -> String {
    format!("{id}.jsonl")
}

/// What a delivery held behind an open permission prompt is told it waits for.
const PERMISSION_PROMPT_OPEN: &str = "(a permission prompt is open: iapeer approvals)";

/// How often a watch searches the project folders for a transcript of its folder while the
/// computed project folder does not exist.
const SCAN_EVERY: Duration = Duration::from_secs(1);

/// The claude adapter: its program and the conversation it is bound to.
pub struct Claude(Bound);

impl Claude {
    /// The adapter for the Claude Code binary at `program` (not checked until a launch).
    pub fn with_program(program: PathBuf) -> Claude {
        Claude(Bound::new(program))
    }

    /// The transcript of the bound conversation in `cwd`'s project folder, if it exists.
    fn own_transcript(&self, cwd: &Path) -> Option<PathBuf> {
        let id = self.0.conversation()?;
        let path = claude_paths::transcript_dir(cwd)?.join(transcript_name(id));
        path.is_file().then_some(path)
    }
}

fn key(step: crate::term::menu::DialogStep) -> Vec<u8> {
    encode_keys(&[step.key_name()], false).unwrap_or_default()
}

impl Adapter for Claude {
    fn name(&self) -> &str {
        CLAUDE.name
    }

    fn for_conversation(&self, id: &str) -> Option<Arc<dyn Adapter>> {
        Some(Arc::new(Claude(self.0.to(id))))
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, LaunchError> {
        let mut args: Vec<OsString> = match ctx.gated {
            None => vec!["--dangerously-skip-permissions".into()],
            Some(timeout) => {
                let exe = std::env::current_exe().map_err(LaunchError::HookBinaryNotFound)?;
                super::claude_gate::launch_args(&exe, timeout)
            }
        };
        match ctx.launch_env.disallowed_tools.as_deref() {
            None => args.extend(["--disallowedTools".into(), DEFAULT_DISALLOWED.into()]),
            Some("") => {}
            Some(v) => args.extend(["--disallowedTools".into(), v.into()]),
        }
        args.extend(["--add-dir".into(), "/".into()]);
        if let (Some(p), PromptSwap::Flag(flag)) = (ctx.system_prompt, CLAUDE.prompt) {
            args.push(flag.into());
            args.push(p.as_os_str().to_owned());
        }
        // The conversation by its id, never the folder's newest (`--continue` took up a
        // person's conversation held in the peer's folder, issue 32 item 1).
        match (ctx.mode, self.0.conversation()) {
            (WakeMode::Fresh, Some(id)) => args.extend(["--session-id".into(), id.into()]),
            (WakeMode::Fresh, None) => {}
            (WakeMode::Resume, _) => {
                let id = self
                    .0
                    .resume_id(|| self.resumable(ctx.cwd), LaunchError::TranscriptMissing)?;
                args.extend(["--resume".into(), id.into()]);
            }
        }
        args.extend(ctx.launch_env.start_args.iter().map(OsString::from));
        Ok(LaunchCommand {
            program: self.0.program(),
            args,
            // Keep the main-screen renderer: its scrollback is what attach snapshots show.
            extra_env: vec![("CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN".into(), "1".into())],
        })
    }

    fn boot_step(&self, screen: &Screen) -> BootStep {
        let rows = screen.rows();
        match claude_screen::classify(rows) {
            s @ (ClaudeScreen::Dialog { .. } | ClaudeScreen::Nag { .. }) => {
                let name = match s {
                    ClaudeScreen::Dialog { name, .. } | ClaudeScreen::Nag { name, .. } => name,
                    _ => "dialog",
                };
                match claude_screen::next_key(&s, rows) {
                    Some(step) => BootStep::Key { bytes: key(step), label: format!("{name} ({})", step.key_name()) },
                    None => BootStep::Wait,
                }
            }
            ClaudeScreen::LoginRequired => BootStep::Fail(NOT_LOGGED_IN.into()),
            ClaudeScreen::CannotConnect => BootStep::Fail(CANNOT_CONNECT.into()),
            ClaudeScreen::RootRefused => BootStep::Fail("Claude Code refuses --dangerously-skip-permissions as root — run iapeer as a normal user, or set IS_SANDBOX=1 in the peer's launch.env inside a sandbox".into()),
            ClaudeScreen::Ready => BootStep::Ready,
            ClaudeScreen::PermissionPrompt | ClaudeScreen::Busy | ClaudeScreen::Booting => {
                BootStep::Wait
            }
        }
    }

    fn waits_for_mcp(&self, cwd: &Path) -> bool {
        std::fs::read_to_string(cwd.join(".mcp.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v["mcpServers"].get("iapeer").is_some())
    }

    fn prompt_glyph(&self) -> Option<&'static str> {
        Some("❯")
    }

    fn mcp_settle(&self) -> Duration {
        MCP_SETTLE
    }

    fn ready_settle(&self, cwd: &Path) -> Duration {
        // The composer is drawn a moment before Claude Code reads input. A peer whose boot
        // waits for its iapeer MCP server waits longer than that anyway: Claude Code
        // connects it only once its ready screen shows (130–330 ms later, measured), and
        // it sets its input modes (`ESC[?2004h`) before it draws the composer (pane logs).
        if self.waits_for_mcp(cwd) {
            Duration::from_millis(100)
        } else {
            Duration::from_millis(500)
        }
    }

    fn boot_key_gap(&self) -> Duration {
        BOOT_KEY_GAP
    }

    fn prompt_settle(&self) -> Duration {
        PROMPT_SETTLE
    }

    fn is_busy(&self, screen: &Screen) -> bool {
        screen.text().contains("esc to interrupt")
    }

    fn paste_shown(&self, screen: &Screen, paste: &PasteView) -> bool {
        // Only a composer under its top rule: the lowest glyph row of a frame drawn halfway
        // may be an older message's first line, which on a narrow screen can read as the
        // start of this paste.
        framed_composer(screen.rows(), self.prompt_glyph().unwrap_or("❯"), false).is_some()
            && crate::adapter::composer_shows(screen, self.prompt_glyph(), paste)
    }

    fn turn_started(&self, screen: &Screen, paste: &PasteView) -> bool {
        // Recorded: `boot-trust-apikey-bypass-ready-paste-busy.raw` (the paste in the
        // composer, then Enter: the message above, an empty composer, and `esc to interrupt`
        // in the status rows below it) and `wake-instant-turn.raw` (a model that answers at
        // once: the message above and an empty composer, but the turn ends before any
        // `esc to interrupt` is drawn). Only the rows below the composer count for the
        // words, and only the newest message above it for the paste: a resumed
        // conversation may hold either anywhere further up.
        let glyph = self.prompt_glyph().unwrap_or("❯");
        let rows = screen.rows();
        // An empty composer is one row between its two rules; a glyph row without them is a
        // frame drawn halfway or a dialog's option.
        let Some(composer) = framed_composer(rows, glyph, true) else {
            return false;
        };
        if self.composer_draft(screen).is_some() {
            return false;
        }
        let newest = rows[..composer]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, r)| r.trim_start().strip_prefix(glyph).map(|rest| (i, rest)));
        // A message queued behind a turn is drawn above the composer too, a `Queued ·` row
        // under it (`mid-turn-queue.raw`): not taken yet.
        let since = newest.map_or(0, |(i, _)| i);
        if rows[since..composer].iter().any(|r| r.contains(QUEUED_ROW)) {
            return false;
        }
        rows[composer + 1..]
            .iter()
            .any(|r| r.contains("esc to interrupt"))
            || newest.is_some_and(|(_, text)| paste.echoed_in(text))
    }

    fn permission_prompt(&self, screen: &Screen) -> Option<crate::adapter::PermissionPrompt> {
        claude_screen::permission_prompt(screen.rows())
    }

    fn composer_draft(&self, screen: &Screen) -> Option<String> {
        // A permission prompt takes the keys: a paste and Enter would answer it `Yes`, past
        // the human the gated peer's prompts go to (spec 10 §4). It counts as a draft, so a
        // delivery waits for it to close (`IAPEER_COMPOSER_QUEUE_TIMEOUT_MS`).
        if claude_screen::classify(screen.rows()) == ClaudeScreen::PermissionPrompt {
            return Some(PERMISSION_PROMPT_OPEN.into());
        }
        self.composer_content(screen)
    }

    fn composer_content(&self, screen: &Screen) -> Option<String> {
        let glyph = self.prompt_glyph().unwrap_or("❯");
        let rows = screen.rows();
        let (start, end) = composer_rows(rows, glyph)?;
        crate::adapter::composer_rows_text(rows[start..end].iter().enumerate().map(|(i, row)| {
            match i {
                // The glyph row: its typed text only (an empty composer shows a dim hint).
                0 if row.trim_start().starts_with(glyph) => {
                    crate::adapter::typed_composer_text(screen, Some(glyph)).unwrap_or_default()
                }
                _ => row.trim().to_string(),
            }
        }))
    }

    fn restores_interrupted_prompt(&self) -> bool {
        true
    }

    fn pasted_form(&self, text: &str) -> String {
        pasted_form::claude(text)
    }

    fn clear_keys(&self) -> Option<crate::adapter::ClearKeys> {
        // Recorded: `clear-esc-hint.raw`, `clear-esc-cleared.raw`.
        Some(crate::adapter::ClearKeys {
            first: vec![0x1b],
            again: Some(("esc again to clear", vec![0x1b])),
            exit_warning: None,
        })
    }

    fn confirmer(&self, cwd: &Path, text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        Box::new(TranscriptConfirm {
            watch: watch(cwd, self.0.conversation()),
            text: text.to_string(),
            state: Acceptance::Pending,
            turn: TurnProgress::default(),
            taken_ms: None,
        })
    }

    fn gate_watch(&self, cwd: &Path) -> Option<Box<dyn GateWatch>> {
        Some(Box::new(ClaudeGate {
            watch: watch(cwd, self.0.conversation()),
        }))
    }

    fn activity_ms(&self, cwd: &Path) -> Option<u64> {
        let dir = claude_paths::transcript_dir(cwd)?;
        // A bound session: its own transcript and its subagents' (`<id>/subagents/`).
        let (mut files, sub_dirs) = match self.0.conversation() {
            Some(id) => (vec![dir.join(transcript_name(id))], vec![dir.join(id)]),
            None => (
                jsonl_files(&dir),
                std::fs::read_dir(&dir)
                    .map(|es| {
                        es.flatten()
                            .map(|e| e.path())
                            .filter(|p| p.is_dir())
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
        };
        for d in sub_dirs {
            files.extend(jsonl_files(&d.join("subagents")));
        }
        super::newest_mtime_ms(files.iter().map(PathBuf::as_path))
    }

    fn resumable(&self, cwd: &Path) -> bool {
        self.own_transcript(cwd).is_some()
    }

    fn api_error(&self, cwd: &Path) -> Option<crate::adapter::ApiError> {
        let newest = match self.0.conversation() {
            Some(_) => self.own_transcript(cwd)?,
            None => jsonl_files(&claude_paths::transcript_dir(cwd)?)
                .into_iter()
                .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())?,
        };
        super::api_error::latest_claude_outcome(&super::api_error::tail(&newest, API_ERROR_TAIL))
    }

    fn interrupt_keys(&self) -> Option<Vec<u8>> {
        Some(vec![0x1b])
    }

    /// Its gated launch asks through the permission hook (`claude_gate`).
    fn gated_by_hook(&self) -> bool {
        true
    }

    fn compact(&self, cwd: &Path) -> Option<(&'static str, Box<dyn CompactWatch>)> {
        let watch = watch(cwd, self.0.conversation());
        Some((
            "/compact",
            Box::new(ClaudeCompact {
                watch,
                command_seen: false,
            }),
        ))
    }

    fn explain_exit(&self, screen_text: &str) -> Option<String> {
        screen_text
            .contains("cannot be used with root/sudo privileges")
            .then(|| "Claude Code refuses --dangerously-skip-permissions as root — run iapeer as a normal user, or set IS_SANDBOX=1 in the peer's launch.env inside a sandbox".to_string())
    }
}

/// Claude Code writes the user's message to its transcript before calling the model, so the
/// ready gate waits for the model's first record (`"type":"assistant"`), and fails early when
/// the screen shows the API retry loop (Claude retries up to 10 times with back-off).
struct ClaudeGate {
    watch: Option<TranscriptWatch>,
}

impl GateWatch for ClaudeGate {
    fn poll(&mut self, screen: &str) -> GateState {
        let answered = self
            .watch
            .as_mut()
            .is_some_and(|w| w.new_records().iter().any(|r| r["type"] == "assistant"));
        GateState::of(answered, || api_retry_line(screen))
    }
}

/// The status line of Claude Code's API retry loop once it is past its first retry, e.g.
/// `Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED) · retrying in 1s
/// · attempt 2/10` (pure).
pub fn api_retry_line(screen: &str) -> Option<String> {
    screen.lines().find_map(|l| {
        let at = l.find("· attempt ")?;
        l.contains("retrying in").then_some(())?;
        let n: u32 = l[at + "· attempt ".len()..]
            .split('/')
            .next()?
            .trim()
            .parse()
            .ok()?;
        (n >= 2).then(|| {
            l.trim()
                .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
                .trim()
                .to_string()
        })
    })
}

/// Claude Code says this when a conversation is empty.
const NOTHING_TO_COMPACT: &str = "No messages to compact";

/// Watches the transcript for the `compact_boundary` record (or Claude's "nothing" answer).
struct ClaudeCompact {
    watch: Option<TranscriptWatch>,
    /// This compaction's `/compact` command record has been seen.
    command_seen: bool,
}

impl CompactWatch for ClaudeCompact {
    fn poll(&mut self, _screen: &str) -> Option<Result<CompactOutcome, CompactRefused>> {
        let records = self.watch.as_mut()?.new_records();
        compact_outcome(&records, &mut self.command_seen).map(Ok)
    }
}

/// The outcome new transcript records show, if any (pure). A `compact_boundary` record (or
/// one with `compactMetadata`) is new, so it is ours wherever it lands. "No messages to
/// compact" counts only after this compaction's own `/compact` command record
/// (`command_seen` carries that across calls), since an earlier attempt may still be writing
/// its answer.
pub fn compact_outcome(
    records: &[serde_json::Value],
    command_seen: &mut bool,
) -> Option<CompactOutcome> {
    if records.iter().any(|r| {
        (r["type"] == "system" && r["subtype"] == "compact_boundary")
            || r.get("compactMetadata").is_some()
    }) {
        return Some(CompactOutcome::Compacted);
    }
    for r in records {
        let strings = super::transcript::strings(r);
        if !*command_seen {
            *command_seen = strings
                .iter()
                .any(|s| s.contains("<command-name>/compact</command-name>"));
            continue;
        }
        if strings.iter().any(|s| s.contains(NOTHING_TO_COMPACT)) {
            return Some(CompactOutcome::NothingToCompact);
        }
    }
    None
}

/// Confirmed when a new transcript record holds the pasted text; follows it through Claude
/// Code's input queue when it was pasted mid-turn.
struct TranscriptConfirm {
    watch: Option<TranscriptWatch>,
    text: String,
    /// Where the message stands so far (never goes back to `Pending`).
    state: Acceptance,
    /// Where the turn that took it stands.
    turn: TurnProgress,
    /// The accepting record's own time ([`super::transcript::record_ms`]).
    taken_ms: Option<u64>,
}

impl TranscriptConfirm {
    /// Read what was appended: the message's acceptance and its turn.
    fn read(&mut self) {
        let Some(w) = self.watch.as_mut() else {
            return;
        };
        let records = w.new_records();
        if matches!(self.state, Acceptance::Pending | Acceptance::Queued) {
            let before = self.state.clone();
            self.state = acceptance_from_records(&records, &self.text, before.clone());
            if self.state == Acceptance::Accepted {
                self.taken_ms = taken_ms_from_records(&records, &self.text, before);
            }
        }
        let text = &self.text;
        self.turn.read(
            &records,
            |r| {
                acceptance_from_records(std::slice::from_ref(r), text, Acceptance::Queued)
                    == Acceptance::Accepted
            },
            is_turn_end,
        );
    }
}

impl Confirm for TranscriptConfirm {
    fn confirmed(&mut self, output: &[u8]) -> bool {
        self.acceptance(output, "") == Acceptance::Accepted
    }

    fn acceptance(&mut self, _output: &[u8], _screen: &str) -> Acceptance {
        if matches!(self.state, Acceptance::Pending | Acceptance::Queued) {
            self.read();
        }
        self.state.clone()
    }

    fn reads_screen(&self) -> bool {
        false
    }

    fn turn_ended(&mut self) -> bool {
        if !self.turn.ended {
            self.read();
        }
        self.turn.ended
    }

    fn taken_ms(&self) -> Option<u64> {
        self.taken_ms
    }
}

/// Whether a Claude Code 2.1.332 transcript record ends a turn (pure): the `system` record
/// `turn_duration` it writes after every finished turn
/// (`tests/fixtures/claude-2.1.332/mid-turn-queue.jsonl`), or an `assistant` record that stops
/// without asking for a tool (`end_turn`, `stop_sequence`, `max_tokens`, `refusal`) or holds
/// an API error (`isApiErrorMessage`, `api-error-*.jsonl`). A turn interrupted by Esc writes
/// neither (`interrupt-transcript.jsonl`); the session counts an interrupt as its end.
pub fn is_turn_end(r: &serde_json::Value) -> bool {
    match r["type"].as_str() {
        Some("system") => r["subtype"] == "turn_duration",
        Some("assistant") => {
            r["isApiErrorMessage"] == true
                || matches!(
                    r["message"]["stop_reason"].as_str(),
                    Some("end_turn" | "stop_sequence" | "max_tokens" | "refusal")
                )
        }
        _ => false,
    }
}

/// When Claude Code took one pasted `text` (epoch ms), from the records that accepted it
/// ([`acceptance_from_records`] from `before`): the `timestamp` of the first record that alone
/// accepts it — the submitted `user` record (or the `remove … absorbed_mid_turn`), stamped
/// when Claude Code took the message, though the file gets it later, with the model request
/// (pure; `None` when no record does or it has no time).
pub fn taken_ms_from_records(
    records: &[serde_json::Value],
    text: &str,
    before: Acceptance,
) -> Option<u64> {
    records
        .iter()
        .find(|r| {
            acceptance_from_records(std::slice::from_ref(r), text, before.clone())
                == Acceptance::Accepted
        })
        .and_then(super::transcript::record_ms)
}

/// The `reason` of a `remove` queue record for a message Claude Code folded into the running
/// turn: pasted while a tool ran, it goes to the model with the turn's next request (after the
/// tool result) instead of waiting for a turn of its own. Read from the shipped 2.1.332 bundle
/// (its queue's `consume(…, {reason: "absorbed_mid_turn"})`, which writes the `remove` record
/// with the command's content) and recorded in `tests/fixtures/claude-2.1.332/mid-turn-absorbed.jsonl`.
/// The message was delivered: `Accepted`, never `Removed`.
pub const ABSORBED_MID_TURN: &str = "absorbed_mid_turn";

/// How much of the newest transcript's end [`Adapter::api_error`] reads, bytes.
const API_ERROR_TAIL: u64 = 64 * 1024;

/// What newly appended transcript records say about one pasted `text`, given where it
/// stood before (`Pending` or `Queued`); pure. Recorded from Claude Code 2.1.332
/// (`tests/fixtures/claude-2.1.332/mid-turn-queue.jsonl`):
/// - a `user` record holding the text: submitted to the model (`Accepted`). Only a submitted
///   user turn counts: Claude Code also saves drafts of the composer (`last-prompt`
///   records), which hold the text before Enter took effect. A queued message reaches the
///   model as such a record with `promptSource: "queued"`.
/// - `{"type":"queue-operation","operation":"enqueue","content":<text>}`: pasted mid-turn,
///   held in Claude Code's queue (`Queued`). Its `dequeue` record carries no content; the
///   `user` record that follows is what proves the model got it.
/// - `{"type":"queue-operation","operation":"remove","content":<text>,"reason":…}`: taken
///   out of the queue unsent (`Removed`); a hook's drop (`reason: "dropped_by_hook"`) has no
///   content, so it counts for a message known to be queued (a false failure is preferred
///   over a silent loss, spec 03 §1). One reason is not a loss: [`ABSORBED_MID_TURN`].
pub fn acceptance_from_records(
    records: &[serde_json::Value],
    text: &str,
    before: Acceptance,
) -> Acceptance {
    let mut state = before;
    for r in records {
        let op = r["operation"].as_str();
        match r["type"].as_str() {
            Some("user") if record_contains(r, text, pasted_form::claude) => {
                return Acceptance::Accepted
            }
            Some("queue-operation")
                if op == Some("enqueue") && record_contains(r, text, pasted_form::claude) =>
            {
                state = Acceptance::Queued;
            }
            Some("queue-operation") if op == Some("remove") => {
                let ours = match r.get("content") {
                    Some(_) => record_contains(r, text, pasted_form::claude),
                    None => state == Acceptance::Queued,
                };
                if ours {
                    let reason = r["reason"].as_str().unwrap_or("no reason given");
                    if reason == ABSORBED_MID_TURN {
                        return Acceptance::Accepted;
                    }
                    return Acceptance::Removed(format!(
                        "Claude Code removed it from its input queue ({reason})"
                    ));
                }
            }
            _ => {}
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch_env::LaunchEnv;
    use crate::paths::Paths;

    fn ctx<'a>(
        paths: &'a Paths,
        cwd: &'a Path,
        env: &'a LaunchEnv,
        mode: WakeMode,
        prompt: Option<&'a Path>,
    ) -> LaunchCtx<'a> {
        LaunchCtx {
            mode,
            system_prompt: prompt,
            ..crate::testkit::launch_ctx(paths, cwd, env)
        }
    }

    #[test]
    fn nothing_is_pasted_into_an_open_permission_prompt() {
        let bytes = recording("approvals/permission-dialog.raw");
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        screen.feed(&bytes, true);
        let c = Claude::with_program("/bin/claude".into());
        assert_eq!(
            c.composer_draft(&screen).as_deref(),
            Some(PERMISSION_PROMPT_OPEN)
        );
        assert!(matches!(c.boot_step(&screen), BootStep::Wait));
        let mut ready = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        ready.feed(&recording("approvals/ready-manual-mode.raw"), true);
        assert_eq!(c.composer_draft(&ready), None);
    }

    /// The bytes of a recording in `tests/fixtures/claude-2.1.332/` (`name` may hold a
    /// subfolder).
    fn recording(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude-2.1.332")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    /// Replays a recorded pane log in chunks of `step` bytes, checking [`Claude::turn_started`]
    /// for `paste` after each: never while a paste waits in the composer, nor before any was
    /// drawn. Returns the chunk where it first held and whether it holds at the end.
    fn replay_turn(fixture: &str, paste: &PasteView, step: usize) -> (Option<usize>, bool) {
        let bytes = recording(fixture);
        let c = Claude::with_program("/bin/claude".into());
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        let (mut drafted, mut started_at) = (false, None);
        for (i, chunk) in bytes.chunks(step).enumerate() {
            screen.feed(chunk, true);
            let started = c.turn_started(&screen, paste);
            if c.composer_draft(&screen).is_some() {
                drafted = true;
                assert!(
                    !started,
                    "a turn while the paste waits (chunk {i} of {step})"
                );
            }
            if started && started_at.is_none() {
                assert!(drafted, "a turn before any paste (chunk {i} of {step})");
                started_at = Some(i);
            }
        }
        (started_at, c.turn_started(&screen, paste))
    }

    /// Issue 13 item 2, replayed from the recorded boot (ready, a paste, Enter, busy): the
    /// turn shows only once the message left the composer — never while the paste waits in
    /// it, nor on the ready screen — and then at once.
    #[test]
    fn a_turn_shows_only_after_the_paste_left_the_composer() {
        let paste = PasteView::of(
            "<iap from=\"boris\" runtime=\"claude\">\n<msg>hello from boris</msg>\n</iap>\n",
        );
        for step in [7, 64, 512] {
            let (at, end) = replay_turn(
                "boot-trust-apikey-bypass-ready-paste-busy.raw",
                &paste,
                step,
            );
            assert!(at.is_some(), "the recorded turn shows (chunks of {step})");
            assert!(end, "and still shows at the end");
        }
        // The words in the conversation above an idle composer are not a turn.
        let c = Claude::with_program("/bin/claude".into());
        let mut history = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        let rule = "─".repeat(40);
        history.feed(
            format!("> press esc to interrupt a turn\r\n\r\n{rule}\r\n\u{276f} \r\n{rule}\r\n")
                .as_bytes(),
            true,
        );
        assert!(!c.turn_started(&history, &paste));
        history.feed(b"  ... esc to interrupt", true);
        assert!(c.turn_started(&history, &paste), "below the composer it is");
    }

    /// Issue 13 item 2, replayed from a recorded wake against a model that answers at once
    /// (the bench's stand-in): Claude Code never draws `esc to interrupt` for that turn, so the
    /// message drawn as the newest one above an empty composer is what shows it took the
    /// paste — on the frame right after Enter, before the answer. A later message (the same
    /// session's next delivery) is not this paste's.
    #[test]
    fn an_instant_turn_shows_by_the_message_above_the_composer() {
        let bytes = recording("wake-instant-turn.raw");
        let first =
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"10:34:40\">\n\
                     Reply via send_to_peer.\n<msg>echo: bench wake #claude-w03#</msg>\n</iap>";
        let paste = PasteView::of(first);
        // The answer row: `●` then `ok` in the default colour.
        let answer = bytes
            .windows(b"\x1b[39mok".len())
            .position(|w| w == b"\x1b[39mok")
            .expect("the recorded answer");
        for step in [7, 64, 512] {
            let (at, end) = replay_turn("wake-instant-turn.raw", &paste, step);
            let at = at.expect("the recorded turn shows");
            assert!(
                at * step < answer,
                "before the answer is drawn (chunks of {step})"
            );
            assert!(!end, "the newest message at the end is the next delivery's");
        }
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        for chunk in bytes.chunks(64) {
            screen.feed(chunk, true);
            assert!(
                !screen.text().contains("esc to interrupt"),
                "no busy words drawn"
            );
        }
        let other = PasteView::of(
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"10:34:43\">\nx",
        );
        let (at, end) = replay_turn("wake-instant-turn.raw", &other, 64);
        assert!(
            at.is_some_and(|at| at * 64 > answer) && end,
            "the second message is known too"
        );
    }

    /// A message Claude Code queued behind a running turn is drawn above the composer like
    /// a submitted one, with a `Queued ·` row under it (replayed from `mid-turn-queue.raw`):
    /// never a turn of its own while that row shows.
    #[test]
    fn a_queued_message_is_not_a_turn() {
        let bytes = recording("mid-turn-queue.raw");
        let paste = PasteView::of(
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"23:22:25\" topic=\"t\">\nx",
        );
        let c = Claude::with_program("/bin/claude".into());
        for step in [7, 64, 512] {
            let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
            let mut queued_frames = 0;
            for (i, chunk) in bytes.chunks(step).enumerate() {
                screen.feed(chunk, true);
                if screen.text().contains(QUEUED_ROW) {
                    queued_frames += 1;
                    assert!(
                        !c.turn_started(&screen, &paste),
                        "a queued message taken for a turn (chunk {i} of {step})"
                    );
                }
            }
            assert!(queued_frames > 0, "the recording shows the queued row");
        }
    }

    /// On a narrow screen an older message's first line wraps before its `ts`: what is left
    /// on the glyph's row names only the sender, so it is not this paste's echo.
    #[test]
    fn a_wrapped_older_message_from_the_same_sender_is_not_the_echo() {
        let c = Claude::with_program("/bin/claude".into());
        let paste = PasteView::of(
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"10:00:01\">\nnew",
        );
        let rule = "─".repeat(60);
        let frame = |first: &str| {
            let mut screen = Screen::new(24, 60);
            screen.feed(
                format!("\u{276f} {first}\r\n  ts=\"09:00:00\">\r\n\r\n{rule}\r\n\u{276f} \r\n{rule}\r\n")
                    .as_bytes(),
                true,
            );
            screen
        };
        let older = frame("<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\"");
        assert!(!c.turn_started(&older, &paste));
        // The same frame with this paste's whole first line on the row is its echo.
        let mut ours = Screen::new(24, 80);
        ours.feed(
            format!("\u{276f} <iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"10:00:01\">\r\n  new\r\n\r\n{rule}\r\n\u{276f} \r\n{rule}\r\n")
                .as_bytes(),
            true,
        );
        assert!(c.turn_started(&ours, &paste));
        // Without the rules around it the lowest glyph row is no composer (a frame drawn
        // halfway): nothing is taken from it.
        let mut half = Screen::new(24, 80);
        half.feed(
            "\u{276f} <iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"10:00:01\">\r\n\u{276f} \r\n"
                .as_bytes(),
            true,
        );
        assert!(!c.turn_started(&half, &paste));
    }

    /// The paste's sign is read only from a composer under its rule: in every recorded frame
    /// where the composer row shows a paste, that row is framed so (no sign lost), and a
    /// half-drawn frame whose lowest glyph row is an older message cut short by a narrow
    /// screen is not taken for the paste.
    #[test]
    fn the_paste_sign_is_read_only_from_a_framed_composer() {
        let c = Claude::with_program("/bin/claude".into());
        // Each recording's pastes are envelopes of three line breaks.
        let paste = PasteView::of("<iap from=\"ea\">\n<msg>x</msg>\n</iap>\n");
        for fixture in [
            "boot-trust-apikey-bypass-ready-paste-busy.raw",
            "mid-turn-queue.raw",
            "wake-instant-turn.raw",
        ] {
            let bytes = recording(fixture);
            for step in [7, 64, 512] {
                let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
                let (mut shown, mut before) = (0, false);
                for (i, chunk) in bytes.chunks(step).enumerate() {
                    screen.feed(chunk, true);
                    let plain = crate::adapter::composer_shows(&screen, Some("❯"), &paste);
                    let framed = c.paste_shown(&screen, &paste);
                    assert!(!framed || plain, "{fixture}, chunk {i} of {step}");
                    // The frame where a paste first shows is framed: the sign is never late.
                    // (Later frames may not be: Claude draws the submitted message over the
                    // composer's top rule while the placeholder is still below it.)
                    if plain && !before {
                        assert!(framed, "{fixture}, chunk {i} of {step}");
                        shown += 1;
                    }
                    before = plain;
                }
                assert!(shown > 0, "{fixture} shows a paste (chunks of {step})");
            }
        }
        let paste = PasteView::of(
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"10:00:01\">\nnew",
        );
        let mut half = Screen::new(24, 60);
        half.feed(
            "\r\n\u{276f} <iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\"\r\n"
                .as_bytes(),
            true,
        );
        assert!(crate::adapter::composer_shows(&half, Some("❯"), &paste));
        assert!(!c.paste_shown(&half, &paste));
    }

    #[test]
    fn a_gated_launch_has_manual_mode_and_the_hook_instead_of_the_bypass() {
        let (dir, paths) = Paths::temp();
        let c = Claude::with_program("/bin/claude".into());
        let env = LaunchEnv::default();
        let gated = LaunchCtx {
            gated: Some(Duration::from_secs(60)),
            ..ctx(&paths, dir.path(), &env, WakeMode::Fresh, None)
        };
        let args: Vec<String> = c.command(&gated).unwrap().arg_strings();
        assert!(
            !args.iter().any(|a| a == "--dangerously-skip-permissions"),
            "{args:?}"
        );
        assert_eq!(&args[..2], ["--permission-mode", "manual"]);
        let settings = &args[args.iter().position(|a| a == "--settings").unwrap() + 1];
        assert!(settings.contains("PermissionRequest") && settings.contains("approval-request"));
        // The rest of the default launch stays.
        assert!(args.windows(2).any(|w| w == ["--add-dir", "/"]), "{args:?}");
    }

    #[test]
    fn argv_fresh_resume_and_launch_env() {
        let (dir, paths) = Paths::temp();
        let c = Claude::with_program("/bin/claude".into());
        let env = LaunchEnv {
            start_args: vec!["--model".into(), "x".into()],
            ..LaunchEnv::default()
        };
        let prompt = dir.path().join("p.md");
        let cmd = c
            .command(&ctx(
                &paths,
                dir.path(),
                &env,
                WakeMode::Fresh,
                Some(&prompt),
            ))
            .unwrap();
        let args: Vec<String> = cmd.arg_strings();
        assert_eq!(
            args,
            vec![
                "--dangerously-skip-permissions",
                "--disallowedTools",
                "AskUserQuestion",
                "--add-dir",
                "/",
                "--system-prompt-file",
                prompt.to_str().unwrap(),
                "--model",
                "x"
            ]
        );
        assert_eq!(
            cmd.extra_env,
            vec![(
                "CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN".to_string(),
                "1".to_string()
            )]
        );
        let empty = LaunchEnv {
            disallowed_tools: Some(String::new()),
            ..LaunchEnv::default()
        };
        let cmd = c
            .command(&ctx(&paths, dir.path(), &empty, WakeMode::Fresh, None))
            .unwrap();
        assert!(!cmd.args.iter().any(|a| a == "--disallowedTools"));
        let custom = LaunchEnv {
            disallowed_tools: Some("Bash,Edit".into()),
            ..LaunchEnv::default()
        };
        let cmd = c
            .command(&ctx(&paths, dir.path(), &custom, WakeMode::Fresh, None))
            .unwrap();
        assert!(cmd
            .args
            .windows(2)
            .any(|w| w[0] == "--disallowedTools" && w[1] == "Bash,Edit"));
    }

    /// Issue 32 item 1: a fresh session is started with the conversation id iapeer chose
    /// (`--session-id`), a resume names the recorded one (`--resume`), and without one there
    /// is nothing to resume — never `--continue`, which took the folder's newest (a person's).
    #[test]
    fn the_conversation_is_chosen_at_a_fresh_start_and_named_by_a_resume() {
        let (dir, paths) = Paths::temp();
        let env = LaunchEnv::default();
        let id = "3f2c1a5e-1111-4222-8333-444455556666";
        let c = Claude::with_program("/bin/claude".into());
        assert_eq!(
            c.conversation_naming(),
            crate::adapter::ConversationNaming::Chosen
        );
        let bound = c.for_conversation(id).unwrap();
        let fresh = bound
            .command(&ctx(&paths, dir.path(), &env, WakeMode::Fresh, None))
            .unwrap()
            .arg_strings();
        assert!(
            fresh.windows(2).any(|w| w == ["--session-id", id]),
            "{fresh:?}"
        );
        let resume = ctx(&paths, dir.path(), &env, WakeMode::Resume, None);
        assert_eq!(
            c.command(&resume).unwrap_err().to_string(),
            super::super::NO_RECORDED_CONVERSATION
        );
        // No transcript of it in this folder: refused, and said which.
        assert!(bound
            .command(&resume)
            .unwrap_err()
            .to_string()
            .contains(&format!("conversation {id}")));
        assert!(!fresh.iter().any(|a| a == "--continue"), "{fresh:?}");
    }

    /// Issue 32 item 2: a message's turn ends with the records Claude Code 2.1.332 writes
    /// after it (`mid-turn-queue.jsonl`): `MID-TURN`, queued behind the held turn, is taken
    /// at its `user` record (after the held turn's end, which is not its own) and ends with
    /// its own turn's `assistant`/`turn_duration`.
    #[test]
    fn fixture_a_queued_message_s_turn_ends_after_it_was_taken() {
        let (records, enq) = recorded("mid-turn-queue.jsonl");
        let text = records[enq]["content"].as_str().unwrap().to_string();
        let user = records
            .iter()
            .position(|r| r["promptSource"] == "queued")
            .unwrap();
        assert!(
            records[enq..user].iter().any(is_turn_end),
            "the held turn ends first"
        );
        let takes = |r: &serde_json::Value| {
            acceptance_from_records(std::slice::from_ref(r), &text, Acceptance::Queued)
                == Acceptance::Accepted
        };
        let mut turn = TurnProgress::default();
        turn.read(&records[..user], takes, is_turn_end);
        assert!(!turn.taken && !turn.ended);
        turn.read(&records[user..=user], takes, is_turn_end);
        assert!(turn.taken && !turn.ended);
        turn.read(&records[user + 1..], takes, is_turn_end);
        assert!(turn.ended);
        // Every turn of the recording ends so; an API error's record does too.
        let ends = records.iter().filter(|r| r["type"] == "system").count();
        assert_eq!(ends, 3);
        let api_error: serde_json::Value =
            serde_json::from_slice(&recording("api-error-rate-limit.jsonl")).unwrap();
        assert!(is_turn_end(&api_error));
    }

    #[test]
    fn compact_outcomes_from_records() {
        use serde_json::json;
        let mut seen = false;
        let hi = json!({"type":"user","message":{"content":"hi"}});
        assert_eq!(compact_outcome(&[hi], &mut seen), None);
        let boundary = json!({"type":"system","subtype":"compact_boundary"});
        assert_eq!(
            compact_outcome(&[boundary], &mut seen),
            Some(CompactOutcome::Compacted)
        );
        let meta = json!({"type":"x","compactMetadata":{}});
        assert_eq!(
            compact_outcome(&[meta], &mut seen),
            Some(CompactOutcome::Compacted)
        );
        let nothing = json!({"type":"system","subtype":"local_command","content":"<local-command-stderr>Error: No messages to compact</local-command-stderr>"});
        let command =
            json!({"type":"user","message":{"content":"<command-name>/compact</command-name>"}});
        assert_eq!(
            compact_outcome(std::slice::from_ref(&nothing), &mut seen),
            None,
            "a late answer to an earlier attempt"
        );
        assert_eq!(compact_outcome(&[command], &mut seen), None);
        assert!(seen);
        assert_eq!(
            compact_outcome(&[nothing], &mut seen),
            Some(CompactOutcome::NothingToCompact)
        );
    }

    #[test]
    fn api_retry_lines() {
        let refused = "❯ hello\n✻ Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED) · retrying in 1s · attempt 4/10\n❯";
        assert_eq!(
            api_retry_line(refused).as_deref(),
            Some("Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED) · retrying in 1s · attempt 4/10")
        );
        assert_eq!(
            api_retry_line("✢ API error · retrying in 1s · attempt 1/10"),
            None,
            "the first retry is tolerated"
        );
        assert!(api_retry_line("✢ API error · retrying in 2s · attempt 2/10").is_some());
        assert_eq!(api_retry_line("we discussed the attempt 5/10 plan"), None);
    }

    /// Issue 7: Claude Code 2.1.332's own records of a message pasted mid-turn (recorded
    /// by iapeer: `tests/fixtures/claude-2.1.332/mid-turn-queue.jsonl`): `enqueue` → queued;
    /// the later `user` record (`promptSource: "queued"`) → accepted.
    /// The records of a transcript fixture (`tests/fixtures/claude-2.1.332/<name>`) and the
    /// index of its `enqueue` record.
    fn recorded(name: &str) -> (Vec<serde_json::Value>, usize) {
        let records: Vec<serde_json::Value> = String::from_utf8(recording(name))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let enq = records
            .iter()
            .position(|r| r["operation"] == "enqueue")
            .unwrap();
        (records, enq)
    }

    #[test]
    fn fixture_mid_turn_queue_records() {
        let text = "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"23:22:25\" topic=\"t\">\nReply via send_to_peer.\n<msg>MID-TURN</msg>\n</iap>";
        let (records, enq) = recorded("mid-turn-queue.jsonl");
        let user = records
            .iter()
            .position(|r| r["promptSource"] == "queued")
            .unwrap();
        assert!(enq < user);
        // Everything up to the enqueue (the running turn's records): queued.
        assert_eq!(
            acceptance_from_records(&records[..=enq], text, Acceptance::Pending),
            Acceptance::Queued
        );
        // The dequeue record carries no content: still queued until the user record.
        assert_eq!(
            acceptance_from_records(&records[enq + 1..user], text, Acceptance::Queued),
            Acceptance::Queued
        );
        assert_eq!(
            acceptance_from_records(&records[enq + 1..], text, Acceptance::Queued),
            Acceptance::Accepted
        );
        // Another message's records say nothing about this one.
        let other = text.replace("MID-TURN", "OTHER");
        assert_eq!(
            acceptance_from_records(&records, &other, Acceptance::Pending),
            Acceptance::Pending
        );
        // Taken at the queued `user` record's own time (issue 31 item 2), not at the
        // enqueue's nor at whenever the file was read.
        let at: jiff::Timestamp = records[user]["timestamp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            taken_ms_from_records(&records[enq + 1..], text, Acceptance::Queued),
            Some(at.as_millisecond() as u64)
        );
        assert_ne!(records[enq]["timestamp"], records[user]["timestamp"]);
        assert_eq!(
            taken_ms_from_records(&records, &other, Acceptance::Pending),
            None
        );
    }

    /// Recorded: a message pasted while a Bash tool ran is folded into the running turn
    /// (`enqueue`, then `remove` with `absorbed_mid_turn`, then the tool result's `user` record
    /// and a `queued_command` attachment holding it). Accepted at the `remove`, and from any
    /// later point too: never reported removed.
    #[test]
    fn fixture_mid_turn_absorbed_records() {
        let (records, enq) = recorded("mid-turn-absorbed.jsonl");
        let remove = records
            .iter()
            .position(|r| r["operation"] == "remove")
            .unwrap();
        assert_eq!(records[remove]["reason"], ABSORBED_MID_TURN);
        let text = records[enq]["content"].as_str().unwrap();
        assert_eq!(
            acceptance_from_records(&records[..=enq], text, Acceptance::Pending),
            Acceptance::Queued
        );
        assert_eq!(
            acceptance_from_records(&records, text, Acceptance::Pending),
            Acceptance::Accepted
        );
        assert_eq!(
            acceptance_from_records(&records[enq + 1..], text, Acceptance::Queued),
            Acceptance::Accepted,
            "a message already answered queued is followed as delivered"
        );
    }

    /// The `remove` record shape of the shipped 2.1.332 bundle (its queue's `g("remove",
    /// content, reason, …)`): with content for Esc/cancel, without for a hook's drop.
    #[test]
    fn removed_from_the_queue() {
        use serde_json::json;
        let text = "<iap from=\"ea\">\n<msg>x</msg>\n</iap>";
        let removed = json!({"type":"queue-operation","operation":"remove","content":text,"reason":"cleared_on_cancel"});
        assert_eq!(
            acceptance_from_records(&[removed], text, Acceptance::Queued),
            Acceptance::Removed(
                "Claude Code removed it from its input queue (cleared_on_cancel)".into()
            )
        );
        let hook =
            json!({"type":"queue-operation","operation":"remove","reason":"dropped_by_hook"});
        assert_eq!(
            acceptance_from_records(std::slice::from_ref(&hook), text, Acceptance::Pending),
            Acceptance::Pending,
            "a content-less removal is ours only when ours is queued"
        );
        assert!(matches!(
            acceptance_from_records(&[hook], text, Acceptance::Queued),
            Acceptance::Removed(_)
        ));
    }

    /// A recording replayed on a screen of the session's size.
    fn screen_of(name: &str) -> Screen {
        let mut screen = Screen::new(crate::term::SESSION_ROWS, crate::term::SESSION_COLS);
        screen.feed(&recording(name), true);
        screen
    }

    /// The envelope iapeer pasted for `body` with the first line `header`.
    fn envelope(header: &str, body: &str) -> String {
        format!("{header}\nReply via send_to_peer.\n<msg>{body}</msg>\n</iap>")
    }

    /// Issue 26 item 8: after `iapeer interrupt` Claude Code 2.1.332 puts the interrupted
    /// prompt back into its composer, in full, one row per line
    /// (`interrupt-restores-prompt.raw`): the composer's content is the envelope iapeer
    /// pasted, which iapeer knows for its own.
    #[test]
    fn fixture_an_interrupted_prompt_comes_back_into_the_composer() {
        use crate::session::own_text::{Own, Tracker};
        let c = Claude::with_program("/bin/claude".into());
        let screen = screen_of("interrupt-restores-prompt.raw");
        let content = c.composer_content(&screen).expect("the prompt is back");
        let header = content.lines().next().unwrap();
        assert!(
            header.starts_with("<iap from=\"ea\" runtime=\"echo\""),
            "{content}"
        );
        let pasted = envelope(header, "BUSY forever\nsecond line");
        assert_eq!(content, pasted);
        assert_eq!(c.composer_draft(&screen), Some(pasted.clone()));
        let t0 = std::time::Instant::now();
        let mut own = Tracker::default();
        own.pasting(5, &pasted, t0);
        own.ended(5, true, t0);
        assert_eq!(
            own.find(&content, t0),
            Some(Own {
                id: 5,
                settled: false
            })
        );
        own.interrupted(t0, c.restores_interrupted_prompt());
        assert_eq!(
            own.find(&content, t0),
            Some(Own {
                id: 5,
                settled: true
            })
        );
        let other = envelope(header, "BUSY forever\nanother line");
        let mut theirs = Tracker::default();
        theirs.pasting(6, &other, t0);
        theirs.ended(6, false, t0);
        assert_eq!(theirs.find(&content, t0), None);
    }

    /// A prompt taller than the screen comes back with its glyph row scrolled off: the
    /// composer is every row above its bottom rule (`interrupt-restores-tall-prompt.raw`),
    /// the end of the message, long enough to be known anywhere in it.
    #[test]
    fn fixture_a_tall_interrupted_prompt_shows_its_end() {
        use crate::session::own_text::Tracker;
        let c = Claude::with_program("/bin/claude".into());
        let screen = screen_of("interrupt-restores-tall-prompt.raw");
        let content = c.composer_content(&screen).expect("the prompt is back");
        assert!(!content.contains("<iap "), "{content}");
        assert!(content.ends_with("BUSY line 59</msg>\n</iap>"), "{content}");
        let lines: Vec<String> = (0..60).map(|i| format!("BUSY line {i}")).collect();
        let pasted = envelope(
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"13:48:40\">",
            &lines.join("\n"),
        );
        let t0 = std::time::Instant::now();
        let mut own = Tracker::default();
        own.pasting(8, &pasted, t0);
        own.ended(8, true, t0);
        assert_eq!(own.find(&content, t0).map(|o| o.id), Some(8));
        assert_eq!(
            c.composer_draft(&screen).as_deref(),
            Some(content.as_str()),
            "a scrolled composer is no empty one"
        );
    }

    /// Issue 26 item 5 (c): the rest of a paste cut off by its deadline lands in the composer
    /// without its Enter, shown as a placeholder with the paste's line breaks
    /// (`cut-paste-in-composer.raw`).
    #[test]
    fn fixture_a_cut_paste_sits_in_the_composer_as_a_placeholder() {
        use crate::session::own_text::Tracker;
        let c = Claude::with_program("/bin/claude".into());
        let screen = screen_of("cut-paste-in-composer.raw");
        let content = c.composer_content(&screen);
        assert_eq!(content.as_deref(), Some("[Pasted text #2 +3 lines]"));
        let pasted = envelope(
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"13:49:05\">",
            &format!("BIG {}", "界".repeat(15000)),
        );
        let t0 = std::time::Instant::now();
        let mut own = Tracker::default();
        own.pasting(3, &pasted, t0);
        own.cut(3, 100);
        assert!(own.on_written(100, t0));
        assert_eq!(
            own.find(&content.unwrap(), t0).map(|o| o.settled),
            Some(true)
        );
    }

    /// Claude Code 2.1.332 clears its composer on Esc, Esc: the first shows `esc again to
    /// clear` ([`Adapter::clear_keys`]'s hint), the second empties it
    /// (`clear-esc-hint.raw`, `clear-esc-cleared.raw`, a human's keys through `iapeer
    /// attach`).
    #[test]
    fn fixture_esc_esc_clears_the_composer() {
        let c = Claude::with_program("/bin/claude".into());
        let keys = c.clear_keys().unwrap();
        let (hint, again) = keys.again.clone().unwrap();
        assert_eq!(
            (keys.first.as_slice(), again.as_slice()),
            (&[0x1b][..], &[0x1b][..])
        );
        let hinted = screen_of("clear-esc-hint.raw");
        assert!(hinted.text().contains(hint));
        assert!(c.composer_content(&hinted).unwrap().contains("second line"));
        let cleared = screen_of("clear-esc-cleared.raw");
        assert_eq!(c.composer_content(&cleared), None);
        assert_eq!(c.composer_draft(&cleared), None);
    }

    /// A human's draft is the composer's content as typed; the empty composer's dim hint and
    /// a ready screen are no content (`composer-draft-*.raw`, `approvals/ready-manual-mode.raw`).
    #[test]
    fn fixture_a_typed_draft_is_the_composer_content() {
        let c = Claude::with_program("/bin/claude".into());
        for theme in ["dark", "light", "dark-ansi"] {
            let screen = screen_of(&format!("composer-draft-{theme}.raw"));
            assert_eq!(
                c.composer_content(&screen).as_deref(),
                Some("my unfinished draft"),
                "{theme}"
            );
        }
        assert_eq!(
            c.composer_content(&screen_of("approvals/ready-manual-mode.raw")),
            None
        );
        assert_eq!(
            c.composer_content(&screen_of("wake-instant-turn.raw")),
            None
        );
    }
}

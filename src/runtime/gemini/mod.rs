//! The `gemini` runtime (issue 27 item 2): Gemini CLI in a pty. Every rule here comes from
//! Gemini CLI 0.61.0 recorded on a real pty (`tests/fixtures/gemini-cli-0.61.0/README.md`).
//!
//! - **Launch**: `gemini --skip-trust --approval-mode yolo [--resume <id>]` in the peer's
//!   folder; the layered system prompt replaces the built-in one through `GEMINI_SYSTEM_MD`;
//!   the MCP server is the user's settings entry ([`super::gemini_setup`]). `--skip-trust`
//!   both skips the trust dialog and enables the user-level MCP server in the folder.
//! - **Records**: `~/.gemini/tmp/<short>/chats/session-<time>-<id8>.jsonl` (`<short>` from
//!   `~/.gemini/projects.json`, `{"projects": {"<folder>": "<short>"}}`): a header line with
//!   `sessionId`, then one record per message, a `user` record when a message is submitted.
//!   They confirm a delivery, name the conversation (learned, like Codex's) and pass the
//!   ready gate (a `gemini` record: the model answered).
//! - **Enter**: an Enter soon after a paste is taken as a newline (its composer's
//!   untrusted-paste mark): Enter goes [`ENTER_AFTER_PASTE`] after the paste shows, and is
//!   pressed again every [`ENTER_RETRY`] while the session file does not hold the message.

pub mod compress;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::agent_program::Bound;
use super::gemini_setup::gemini_dir;
use super::transcript::{jsonl_files, SessionFileConfirm, SessionRules, TranscriptWatch};
use super::{Adapter, BootStep, Confirm, GateState, GateWatch, LaunchCommand, LaunchCtx, WakeMode};
use crate::adapter::PermissionPrompt;
use crate::runtime_table::{PromptSwap, GEMINI};
use crate::term::paste_view::PasteView;
use crate::term::Screen;

/// The composer glyph (`>   Type your message or @path/to/file`; recorded in the default
/// approval mode).
pub const GLYPH: &str = ">";

/// The composer glyphs: [`GLYPH`], and `*` in the `yolo` approval mode iapeer starts it in
/// (`yolo-ready.raw`, with `YOLO Ctrl+Y` above the composer).
pub const GLYPHS: [&str; 2] = [GLYPH, "*"];

/// The empty composer's placeholder.
pub const PLACEHOLDER: &str = "Type your message or @path/to/file";

/// The busy sign: the spinner row `⠋ Thinking... (esc to cancel, 0s)` (`08-busy`).
pub const BUSY: &str = "esc to cancel";

/// The header of the queue of messages entered during a turn (`10-mid-turn-queued`).
pub const QUEUED: &str = "Queued (press ↑ to edit):";

/// How long Enter waits after the composer shows the paste. Gemini CLI 0.61.0 takes an Enter
/// that comes too soon after a paste for a line break: its composer marks a paste it does not
/// trust (`recentUnsafePasteTime`; a paste is untrusted unless the composer saw the kitty
/// keyboard protocol on when it was first drawn, which it never does: the protocol is turned on
/// just after) and clears the mark with a 40 ms timer, but an Enter is read against the
/// composer as last drawn, so the mark lasts until the redraw after the timer, later on a busy
/// machine. Recorded (`enter-timing.txt`, load average 11–16, the screen read every 2 ms as
/// the daemon does): a first Enter 0–75 ms after the paste showed submitted 0 of 16 times,
/// 100–150 ms after 6 of 8.
pub const ENTER_AFTER_PASTE: std::time::Duration = std::time::Duration::from_millis(100);

/// While a delivery is unconfirmed, Enter again this often (instead of the default 1.5 s):
/// the untrusted-paste mark above can outlast the first Enter on a loaded machine, and an
/// Enter on an empty composer does nothing in Gemini CLI 0.61.0 (its submit does nothing when
/// the composer's text is blank), so one that follows a taken message is harmless.
pub const ENTER_RETRY: std::time::Duration = std::time::Duration::from_millis(400);

/// The start of the rules above and under the composer.
const RULE_ABOVE: char = '▄';
const RULE_BELOW: char = '▀';

/// What a delivery sees as the draft while a tool confirmation is open (`13-tool-confirmation`):
/// Enter would answer it.
const CONFIRMATION_OPEN: &str = "(a tool confirmation is open)";

/// Gemini CLI 0.61.0's form of pasted text (pure, idempotent): line breaks as LF. Only LF
/// line breaks were recorded (`session.jsonl` holds an 8-line paste as pasted).
pub fn pasted_form(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// The chats folder of `cwd` under the Gemini folder `gemini` (pure but for reading
/// `projects.json`): `tmp/<short>/chats`, the short name as `projects.json` maps the folder
/// (as given, else its real path). `None` before Gemini CLI ran there.
pub fn chats_dir_in(gemini: &Path, cwd: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(gemini.join("projects.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let projects = &v["projects"];
    let short = [Some(cwd.to_path_buf()), cwd.canonicalize().ok()]
        .into_iter()
        .flatten()
        .find_map(|p| {
            projects[p.to_string_lossy().as_ref()]
                .as_str()
                .map(String::from)
        })?;
    (!short.contains('/') && !short.starts_with('.'))
        .then(|| gemini.join("tmp").join(short).join("chats"))
}

/// [`chats_dir_in`] the user's Gemini folder.
fn chats_dir(cwd: &Path) -> Option<PathBuf> {
    chats_dir_in(&gemini_dir()?, cwd)
}

/// The `sessionId` of a session file's header (its first line).
pub fn session_id(path: &Path) -> Option<String> {
    use std::io::BufRead;
    let f = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(f).read_line(&mut line).ok()?;
    let v: Value = serde_json::from_str(&line).ok()?;
    v["sessionId"].as_str().map(String::from)
}

/// The session file of conversation `id` in `chats`: named `session-*-<first 8 of id>.jsonl`
/// with `id` in its header; of several (a resume leaves a new file holding only a header and
/// the session context, `session-files-after-resume.txt`) the largest, which holds the
/// conversation (records of a resumed session are appended to it).
pub fn session_file(chats: &Path, id: &str) -> Option<PathBuf> {
    let tail = format!("-{}.jsonl", id.get(..8)?);
    jsonl_files(chats)
        .into_iter()
        .filter(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("session-") && n.ends_with(&tail))
                && session_id(f).as_deref() == Some(id)
        })
        .max_by_key(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
}

/// Whether a record ends a turn (pure): the model's answer with text and no tool calls. (The
/// answer is first written without its `toolCalls`, empty, then again with them:
/// `session.jsonl`; an empty record is not an end.)
pub fn is_turn_end(r: &Value) -> bool {
    r["type"] == "gemini"
        && r.get("toolCalls").is_none()
        && r["content"].as_str().is_some_and(|c| !c.is_empty())
}

/// The watch of a session's records: the bound conversation's files, else every session file
/// of the folder's chats (found once Gemini CLI made it).
fn watch(cwd: &Path, conversation: Option<&str>) -> TranscriptWatch {
    if let (Some(chats), Some(id)) = (chats_dir(cwd), conversation) {
        if let Some(w) = conversation_watch(&chats, id) {
            return w;
        }
    }
    let cwd = cwd.to_path_buf();
    TranscriptWatch::located(Box::new(move || chats_dir(&cwd)))
}

/// The watch of conversation `id`'s records in `chats`: every `session-*-<first 8 of
/// id>.jsonl`, those made later included. A resumed session writes to the conversation's
/// first file and to the file the resume made: its first message's `user` record went to the
/// new one, the turn's later records to the first (seen in `tests/mixed_team.rs`; the
/// recording `session-after-resume.jsonl` had them all in the first). `None` for an id
/// shorter than 8.
pub fn conversation_watch(chats: &Path, id: &str) -> Option<TranscriptWatch> {
    let tail = format!("-{}.jsonl", id.get(..8)?);
    Some(TranscriptWatch::start(chats).only_ending(tail))
}

/// The composer (pure): the rows between the last half-block rule `▄▄▄…` and the rule `▀▀▀…`
/// under it, the first starting with a glyph of [`GLYPHS`], cut off, each trimmed; with the
/// index of its first row. `None` without a composer.
pub fn composer_at(rows: &[String]) -> Option<(usize, Vec<String>)> {
    let top = rows.iter().rposition(|r| r.starts_with(RULE_ABOVE))? + 1;
    let end = rows[top..]
        .iter()
        .position(|r| r.starts_with(RULE_BELOW))
        .map_or(rows.len(), |n| top + n);
    let first = rows.get(top)?.trim_start();
    let glyph = GLYPHS.iter().find(|g| first.starts_with(*g))?;
    let first = first[glyph.len()..].trim().to_string();
    let rest = rows[top + 1..end].iter().map(|r| r.trim().to_string());
    Some((top, std::iter::once(first).chain(rest).collect()))
}

/// The composer's rows ([`composer_at`]).
pub fn composer_rows(rows: &[String]) -> Option<Vec<String>> {
    composer_at(rows).map(|(_, r)| r)
}

/// What the composer holds (pure), its rows joined by `\n`; `None` when empty (the
/// placeholder) or absent.
pub fn composer_text(rows: &[String]) -> Option<String> {
    let rows = composer_rows(rows)?;
    if rows.len() == 1 && rows[0] == PLACEHOLDER {
        return None;
    }
    crate::adapter::composer_rows_text(rows)
}

/// Whether a tool confirmation is open (pure): `Action Required` over a menu whose first
/// option is `Allow once` (`13-tool-confirmation`).
pub fn confirmation_open(rows: &[String]) -> bool {
    let text = rows.join("\n");
    text.contains("Action Required") && text.contains("1. Allow once")
}

/// The tool confirmation on the screen (pure), as a [`PermissionPrompt`]: recorded for an MCP
/// tool (`13-tool-confirmation`): a box `Action Required`, a row `?  <tool> (<server> MCP
/// Server) <arguments>`, the question `Allow execution of MCP tool …?`, and a menu `● 1. Allow
/// once` … `4. No, suggest changes (esc)`. In the `yolo` mode iapeer starts it in no tool
/// asks; one that still does (a user's policy) goes to a human like Claude Code's.
pub fn permission_prompt_in(rows: &[String]) -> Option<PermissionPrompt> {
    let start = rows.iter().rposition(|r| r.contains("Action Required"))?;
    let body: Vec<&str> = rows[start + 1..]
        .iter()
        .take_while(|r| !r.trim_start().starts_with('╰'))
        .map(|r| {
            r.trim()
                .trim_start_matches('│')
                .trim_end_matches('│')
                .trim()
        })
        .collect();
    let summary = body
        .iter()
        .find_map(|r| r.strip_prefix('?'))?
        .trim()
        .to_string();
    let question = body.iter().find(|r| r.starts_with("Allow execution"))?;
    let (mut options, mut cursor) = (Vec::new(), None);
    for row in &body {
        let (marked, rest) = match row.strip_prefix('●') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, *row),
        };
        let Some((n, label)) = rest.split_once(". ") else {
            continue;
        };
        if n.parse::<u32>().is_ok() {
            if marked {
                cursor = Some(options.len());
            }
            options.push(label.trim().to_string());
        }
    }
    let approve = options.iter().position(|o| o == "Allow once")?;
    let deny = options.iter().position(|o| o.starts_with("No"))?;
    Some(PermissionPrompt {
        tool: if question.contains("MCP tool") {
            "MCP tool".into()
        } else {
            "Action Required".into()
        },
        summary,
        reason: question.to_string(),
        options,
        approve,
        deny,
        cursor,
    })
}

/// `s` without white space (a composer wraps long lines at any character).
fn solid(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether the composer text `shown` is the whole `paste` (pure): a large paste's
/// placeholder `[Pasted Text: <n> lines]` with the paste's line count, or `[Pasted Text: <n>
/// chars]` (`07-paste-8-lines`), else the text itself drawn in full (`06-paste-4-lines`).
pub fn shows_paste(shown: &str, paste: &PasteView) -> bool {
    let shown = shown.trim();
    if let Some(n) = shown
        .strip_prefix("[Pasted Text: ")
        .and_then(|r| r.strip_suffix(']'))
    {
        return match n.strip_suffix(" lines") {
            Some(lines) => lines.parse::<usize>().ok() == Some(paste.breaks + 1),
            None => n.ends_with(" chars"),
        };
    }
    let shown = solid(shown);
    !shown.is_empty() && shown.starts_with(&solid(&paste.head))
}

/// Whether the queue of messages entered during a turn shows `text` (pure): a row under
/// [`QUEUED`] that is the text with its line breaks drawn as spaces, whole or cut with `…`,
/// and at least its first line (`10-mid-turn-queued` for one line; an envelope showed as
/// `<iap from="ea" … ts="06:08:21"> Reply via send_to_peer. <msg>MID-TURN one</msg> </iap>`
/// in `gemini_e2e`).
pub fn queued_shows(screen: &str, text: &str) -> bool {
    let text = pasted_form(text);
    let whole = solid(&text);
    let first = solid(text.lines().next().unwrap_or_default());
    if first.is_empty() {
        return false;
    }
    let rows: Vec<&str> = screen.lines().collect();
    let Some(start) = rows.iter().rposition(|r| r.contains(QUEUED)) else {
        return false;
    };
    rows[start + 1..]
        .iter()
        .take_while(|r| !r.starts_with(RULE_ABOVE))
        .any(|r| {
            let r = solid(r);
            let r = r.strip_suffix('…').unwrap_or(&r);
            r.len() >= first.len() && whole.starts_with(r)
        })
}

/// The exit warning a Ctrl-C can arm (`late-1200ms-ctrl-c-cleared`): another Ctrl-C while it
/// shows quits Gemini CLI.
pub const EXIT_ARMED: &str = "Press Ctrl+C again to exit.";

/// Gemini CLI 0.61.0's clear key: Ctrl-C clears a composer holding text (`05-draft` →
/// `06-paste-4-lines`) and can arm its exit ([`EXIT_ARMED`]), so no press goes while that
/// shows ([`crate::adapter::ClearKeys::exit_armed`]).
pub fn clear_keys() -> crate::adapter::ClearKeys {
    crate::adapter::ClearKeys {
        first: vec![0x03],
        again: None,
        exit_warning: Some(EXIT_ARMED),
    }
}

/// The answer to XTVERSION as the composer shows it when it comes late: the daemon's
/// `ESC P >|iapeer(<version>) ESC \` without its escapes.
const XTVERSION_LEFT: &str = ">|iapeer(";

/// Whether composer text is only what is left of the daemon's answers to terminal queries
/// (pure). Gemini CLI 0.61.0 waits 1 s for the answers to the queries it sends at start; the
/// ones that come later are read as typed keys, their escapes dropped: recorded with the
/// answers 1.2, 2 and 6 s late (`late-*-boot`), the composer held `0u>|iapeer(0.1.0)62;22c`
/// (kitty flags `ESC[?0u`, XTVERSION, primary DA `ESC[?62;22c`; the OSC 11 colour left
/// nothing). Accepted, white space aside: a run of `>|iapeer(…)` and CSI answer tails
/// (`[>?]<digits>(;<digits>)*` ended by `u`, `c` or `R`, the kitty flags, device attributes
/// and cursor position forms), at least one. Anything else (a human's draft) is not.
pub fn stray_answers(text: &str) -> bool {
    let s = solid(text);
    let mut rest = s.as_str();
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix(XTVERSION_LEFT) {
            let Some(end) = r.find(')') else {
                return false;
            };
            rest = &r[end + 1..];
            continue;
        }
        let r = rest.strip_prefix(['>', '?']).unwrap_or(rest);
        let params = r
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(r.len());
        let (p, tail) = r.split_at(params);
        let numbers_ok = !p.is_empty() && p.split(';').all(|n| !n.is_empty());
        match tail.chars().next() {
            Some('u' | 'c' | 'R') if numbers_ok => rest = &tail[1..],
            _ => return false,
        }
    }
    true
}

/// A boot dialog of Gemini CLI 0.61.0, as the question that opens it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialog {
    Trust,
    Auth,
    Key,
}

/// The dialogs' questions.
const DIALOGS: [(Dialog, &str); 3] = [
    (Dialog::Trust, "Do you trust the files in this folder?"),
    (Dialog::Auth, "How would you like to authenticate"),
    (Dialog::Key, "Enter Gemini API Key"),
];

/// What a Gemini CLI screen asks for during boot (pure): the lowest thing on the screen
/// decides (an answered trust dialog stays drawn above what follows the CLI's restart:
/// `02-auth-dialog`, `04-ready`). The trust dialog (not expected under `--skip-trust`) →
/// Enter (`1. Trust folder`, preselected); the auth choice with `Use Gemini API Key`
/// preselected and the key detected in the environment → Enter; the key entry prefilled →
/// Enter; the auth choice without a key → fail; the empty composer → ready; a composer holding
/// only the late answers to its terminal queries ([`stray_answers`]) → Ctrl-C, which cleared
/// it in every recording (`late-*-ctrl-c-cleared`; Esc only asks for a second Esc:
/// `late-2000ms-esc`), but not while [`EXIT_ARMED`] shows.
pub fn boot_step_for(rows: &[String]) -> BootStep {
    let enter = |label: &str| BootStep::Key {
        bytes: b"\r".to_vec(),
        label: format!("{label} (Enter)"),
    };
    let below = |from: usize, needle: &str| rows[from..].iter().any(|r| r.contains(needle));
    let composer = composer_at(rows);
    let dialog = DIALOGS
        .iter()
        .filter_map(|(d, q)| Some((rows.iter().rposition(|r| r.contains(q))?, *d)))
        .filter(|(at, d)| *d != Dialog::Trust || !below(*at, "Gemini CLI is restarting"))
        .max_by_key(|(at, _)| *at)
        .filter(|(at, _)| composer.as_ref().is_none_or(|(c, _)| c < at));
    match dialog {
        Some((at, Dialog::Trust)) if below(at, "● 1. Trust folder") => enter("trust"),
        Some((at, Dialog::Auth)) => {
            let key_chosen = below(at, "● 2. Use Gemini API Key");
            match (key_chosen, below(at, "Existing API key detected")) {
                (true, true) => enter("auth: Gemini API key"),
                (_, false) if below(at, "(Use Enter to select)") => BootStep::Fail(
                    "Gemini CLI asks how to log in: give the peer a GEMINI_API_KEY in its \
                     launch.env, or log in by running `gemini` once"
                        .into(),
                ),
                _ => BootStep::Wait,
            }
        }
        Some((at, Dialog::Key)) if below(at, "(Press Enter to submit") => enter("API key"),
        Some(_) => BootStep::Wait,
        None => match composer {
            Some((_, r)) if r.len() == 1 && r[0] == PLACEHOLDER => BootStep::Ready,
            _ => leftovers_step(rows).unwrap_or(BootStep::Wait),
        },
    }
}

/// What to do about a composer that holds only the late answers to Gemini CLI's terminal
/// queries ([`stray_answers`]) (pure): `None` when it holds anything else or nothing (or no
/// composer shows); [`BootStep::Clear`] with Ctrl-C, which cleared it in every recording —
/// at boot (`late-*-ctrl-c-cleared`) and when they came after the ready screen
/// (`late-30000ms-after-ready-*`) — or [`BootStep::Wait`] while [`EXIT_ARMED`] shows (another
/// Ctrl-C then quits). The boot ([`boot_step_for`]) and a delivery
/// ([`Adapter::composer_leftovers`]) both act on it.
pub fn leftovers_step(rows: &[String]) -> Option<BootStep> {
    let (_, r) = composer_at(rows)?;
    let text = crate::adapter::composer_rows_text(r).filter(|t| stray_answers(t))?;
    let keys = clear_keys();
    if rows.iter().any(|row| keys.exit_armed(row)) {
        return Some(BootStep::Wait);
    }
    Some(BootStep::Clear {
        bytes: keys.first,
        label: format!(
            "the composer holds `{text}`, the late answers to Gemini CLI's terminal queries \
             (Ctrl-C)"
        ),
    })
}

/// The gemini adapter: its program and the conversation it is bound to.
pub struct Gemini(Bound);

/// How much of a session file's end [`Adapter::api_error`] reads, bytes: the refusal's
/// records come after a `$set` record that repeats the whole history.
const API_ERROR_TAIL: u64 = 1024 * 1024;

impl Gemini {
    /// The adapter for the Gemini CLI binary at `program` (not checked until a launch).
    pub fn with_program(program: PathBuf) -> Gemini {
        Gemini(Bound::new(program))
    }

    /// The session file of the bound conversation.
    fn own_file(&self, cwd: &Path) -> Option<PathBuf> {
        session_file(&chats_dir(cwd)?, self.0.conversation()?)
    }
}

impl Adapter for Gemini {
    fn name(&self) -> &str {
        GEMINI.name
    }

    fn for_conversation(&self, id: &str) -> Option<Arc<dyn Adapter>> {
        Some(Arc::new(Gemini(self.0.to(id))))
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, super::LaunchError> {
        // `--skip-trust`: no trust dialog, and the user-level MCP server is enabled in the
        // folder (`20-preconfigured-mcp-list`). Bypass: every tool runs (`yolo`), as Claude
        // Code and Codex run with their bypass flags. Gated: `default`, where a tool asks on
        // the screen (`13-tool-confirmation`, read by `permission_prompt`) and iapeer puts it
        // to a human; iapeer's own MCP server is `trust`ed in the settings, so its tools run
        // without asking (`16-resumed-trusted-call`).
        let mode = if ctx.gated.is_some() {
            "default"
        } else {
            "yolo"
        };
        let mut args: Vec<OsString> =
            vec!["--skip-trust".into(), "--approval-mode".into(), mode.into()];
        if ctx.mode == WakeMode::Resume {
            let id = self.0.resume_id(
                || self.resumable(ctx.cwd),
                super::LaunchError::GeminiSessionMissing,
            )?;
            args.extend(["--resume".into(), id.into()]);
        }
        args.extend(ctx.launch_env.start_args.iter().map(OsString::from));
        let mut extra_env = Vec::new();
        if let (Some(p), PromptSwap::EnvVar(var)) = (ctx.system_prompt, GEMINI.prompt) {
            extra_env.push((var.to_string(), p.to_string_lossy().into_owned()));
        }
        Ok(LaunchCommand {
            program: self.0.program(),
            args,
            extra_env,
        })
    }

    fn boot_step(&self, screen: &Screen) -> BootStep {
        boot_step_for(screen.rows())
    }

    fn waits_for_mcp(&self, _cwd: &Path) -> bool {
        // Its MCP client lists the daemon's tools at start; keys typed before that were not
        // drawn for seconds (`yolo.raw`'s first recording).
        super::gemini_setup::settings_path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|v| v["mcpServers"]["iapeer"].is_object())
    }

    fn prompt_glyph(&self) -> Option<&'static str> {
        Some(GLYPH)
    }

    fn permission_prompt(&self, screen: &Screen) -> Option<PermissionPrompt> {
        permission_prompt_in(screen.rows())
    }

    fn composer_draft(&self, screen: &Screen) -> Option<String> {
        // Enter would answer an open tool confirmation: a delivery waits for it to close.
        if confirmation_open(screen.rows()) {
            return Some(CONFIRMATION_OPEN.into());
        }
        self.composer_content(screen)
    }

    fn composer_content(&self, screen: &Screen) -> Option<String> {
        composer_text(screen.rows())
    }

    fn composer_leftovers(&self, screen: &Screen) -> Option<BootStep> {
        if confirmation_open(screen.rows()) {
            return None;
        }
        leftovers_step(screen.rows())
    }

    fn pasted_form(&self, text: &str) -> String {
        pasted_form(text)
    }

    fn clear_keys(&self) -> Option<crate::adapter::ClearKeys> {
        Some(clear_keys())
    }

    fn paste_shown(&self, screen: &Screen, paste: &PasteView) -> bool {
        composer_text(screen.rows()).is_some_and(|shown| shows_paste(&shown, paste))
    }

    fn enter_after_paste_sign(&self) -> std::time::Duration {
        ENTER_AFTER_PASTE
    }

    fn enter_retry(&self) -> Option<std::time::Duration> {
        Some(ENTER_RETRY)
    }

    fn is_busy(&self, screen: &Screen) -> bool {
        screen.text().contains(BUSY)
    }

    fn confirmer(&self, cwd: &Path, text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        Box::new(SessionFileConfirm::new(
            watch(cwd, self.0.conversation()),
            text,
            SESSION_RULES,
        ))
    }

    fn gate_watch(&self, cwd: &Path) -> Option<Box<dyn GateWatch>> {
        Some(Box::new(ModelAnswered {
            watch: watch(cwd, self.0.conversation()),
        }))
    }

    fn activity_ms(&self, cwd: &Path) -> Option<u64> {
        if self.0.conversation().is_some() {
            let own = self.own_file(cwd)?;
            return super::newest_mtime_ms([own.as_path()]);
        }
        let files = jsonl_files(&chats_dir(cwd)?);
        super::newest_mtime_ms(files.iter().map(PathBuf::as_path))
    }

    /// The newest turn outcome of the newest-written session file of the bound conversation
    /// (of the folder while it is not known), read from its end.
    fn api_error(&self, cwd: &Path) -> Option<crate::adapter::ApiError> {
        let chats = chats_dir(cwd)?;
        let tail = self
            .0
            .conversation()
            .and_then(|id| id.get(..8))
            .map(|id8| format!("-{id8}.jsonl"));
        let newest = jsonl_files(&chats)
            .into_iter()
            .filter(|f| {
                tail.as_ref()
                    .is_none_or(|t| f.to_string_lossy().ends_with(t.as_str()))
            })
            .max_by_key(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())?;
        super::api_error::latest_gemini_outcome(&super::api_error::tail(&newest, API_ERROR_TAIL))
    }

    /// Whether the bound conversation's session file exists.
    fn resumable(&self, cwd: &Path) -> bool {
        self.own_file(cwd).is_some()
    }

    fn interrupt_keys(&self) -> Option<Vec<u8>> {
        // Recorded: Esc cancels the turn at once (`21-busy-before-esc`, `22-after-esc`).
        Some(vec![0x1b])
    }

    /// `/compress`, done when the session's records say so ([`compress`]).
    fn compact(&self, cwd: &Path) -> Option<(&'static str, Box<dyn crate::adapter::CompactWatch>)> {
        let watch = compress::CompressWatch::new(watch(cwd, self.0.conversation()));
        Some((compress::COMMAND, Box::new(watch)))
    }
}

/// How Gemini CLI's session files confirm a delivery: a `user` record holding the pasted
/// text; queued while the screen's queue shows it behind a running turn (a message entered
/// during a turn waits there and is recorded when its own turn starts: `10-mid-turn-queued`,
/// `11-queued-ran-ready`); waited for while the queue shows it and no turn runs (Gemini CLI
/// takes no prompt until every configured MCP server is discovered, and submits its queue by
/// itself then: `27-mcp-wait-queued`).
const SESSION_RULES: SessionRules = SessionRules {
    is_user: |r| r["type"] == "user",
    form: pasted_form,
    is_turn_end,
    queued: queued_in_turn,
    waiting: queued_waiting,
    conversation: session_id,
};

/// The message waits in Gemini CLI's queue behind a running turn (its busy sign shows).
fn queued_in_turn(screen: &str, text: &str) -> bool {
    screen.contains(BUSY) && queued_shows(screen, text)
}

/// The message waits in Gemini CLI's queue with no turn running: the CLI is still starting
/// (its config, or its MCP servers: `ℹ Waiting for MCP servers to initialize... prompts will be
/// queued.`, `27-mcp-wait-queued`) and submits the queue itself once it is ready (0.61.0's
/// composer: an idle, ready CLI with a queue submits it).
fn queued_waiting(screen: &str, text: &str) -> bool {
    !screen.contains(BUSY) && queued_shows(screen, text)
}

/// The ready gate: the model answered (a `gemini` record). The `user` record is written when
/// the message is submitted, before the model is asked, so the file's time proves nothing.
struct ModelAnswered {
    watch: TranscriptWatch,
}

impl GateWatch for ModelAnswered {
    fn poll(&mut self, _screen: &str) -> GateState {
        if self
            .watch
            .new_records()
            .iter()
            .any(|r| r["type"] == "gemini")
        {
            GateState::Passed
        } else {
            GateState::Pending
        }
    }
}

#[cfg(test)]
mod tests;

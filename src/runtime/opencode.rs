//! The `opencode` runtime: OpenCode (npm `opencode-ai`) in a pty. Every rule here is
//! recorded from 1.18.33 (`tests/fixtures/opencode-1.18.33/`, its README lists the
//! findings).
//!
//! - **Configuration at launch, nothing written to disk**: OpenCode merges the JSON in
//!   `OPENCODE_CONFIG_CONTENT` last over the user's config files. iapeer puts there the
//!   default agent `build` with `prompt: "{file:<composed prompt>}"` (an agent's `prompt`
//!   replaces OpenCode's own agent prompt, as `--system-prompt-file` does Claude Code's;
//!   `instructions` files would only be appended after it), and a remote MCP server
//!   `iapeer` with the daemon's real URL whose headers expand the session token themselves
//!   (`{env:IAPEER_TOKEN}`, recorded in `mcp-requests.jsonl`). The token never reaches a file.
//! - **Records**: OpenCode keeps its sessions in SQLite and serves them over the local
//!   server its TUI starts with `--port`; each launch gets a free port and a random
//!   `OPENCODE_SERVER_PASSWORD` ([`super::opencode_records`]), and delivery, the turn's end,
//!   the ready gate, activity and the conversation id (`ses_…`, learned) are read there.
//! - **Resume**: `--session <id>`.
//! - **Screen**: the composer is a box drawn with `┃` on its left and closed by a `╹▀▀…`
//!   row; its last `┃` row names the agent and model (`Build · <model>`); the row below the
//!   box shows `esc interrupt` while a turn runs and `ctrl+p commands` always.
//! - On its first start in a config folder OpenCode installs `@opencode-ai/plugin` there
//!   with npm, in the background (its `Npm.install`: skipped when the folder has a
//!   `node_modules` and its `package-lock.json` lists every dependency its `package.json`
//!   asks for); a failed install only logs a warning.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::agent_program::Bound;
use super::opencode_records::{self, RecordsConfirm, RecordsGate, Server, SharedServer};
use super::{Adapter, BootStep, Confirm, GateWatch, LaunchCommand, LaunchCtx, WakeMode};
use crate::adapter::{PermissionAnswer, PermissionPrompt};
use crate::runtime_table::{PromptSwap, OPENCODE};
use crate::term::paste_view::PasteView;
use crate::term::Screen;

/// The left edge of the composer box (and of every message box).
const BAR: char = '┃';
/// The row that closes the composer box starts with this.
const FOOT: &str = "╹▀";
/// The placeholder of the start screen's empty composer (`01-ready`).
pub const PLACEHOLDER: &str = "Ask anything…";
/// On the row under the composer always (`01-ready`, `05-busy`).
pub const READY_SIGN: &str = "ctrl+p commands";
/// On the row under the composer while a turn runs: `esc interrupt`, after one Esc `esc
/// again to interrupt` (`05-busy`, `14-after-one-esc`).
pub const BUSY_SIGNS: [&str; 2] = ["esc interrupt", "esc again to interrupt"];
/// The agent whose prompt iapeer sets (OpenCode's default primary agent, `Build`).
const AGENT: &str = "build";

/// The composer box on a screen: the rows between its top and its agent row, cut to the box.
struct ComposerBox {
    /// Each text row's inside (right of the bar, within the box), trimmed.
    rows: Vec<String>,
    /// The index of the row that closes the box.
    foot: usize,
}

/// The column (in characters) of the first `c` in `row`.
fn column_of(row: &str, c: char) -> Option<usize> {
    row.chars().position(|x| x == c)
}

/// The composer box of `rows` (pure): the last `╹▀` row, its agent row above it and the
/// `┃` rows in the same column above that.
fn composer_box(rows: &[String]) -> Option<ComposerBox> {
    let foot = rows
        .iter()
        .rposition(|r| r.trim_start().starts_with(FOOT))?;
    let col = column_of(&rows[foot], '╹')?;
    let width = rows[foot]
        .chars()
        .skip(col + 1)
        .take_while(|&c| c == '▀')
        .count();
    let bar_at = |r: &String| r.chars().nth(col) == Some(BAR);
    let agent = foot.checked_sub(1).filter(|&a| bar_at(&rows[a]))?;
    let mut top = agent;
    while top > 0 && bar_at(&rows[top - 1]) {
        top -= 1;
    }
    let inside = |r: &String| -> String {
        r.chars()
            .skip(col + 1)
            .take(width)
            .collect::<String>()
            .trim()
            .to_string()
    };
    Some(ComposerBox {
        rows: rows[top..agent].iter().map(inside).collect(),
        foot,
    })
}

/// The rows under the composer box (its status row), joined.
fn status_text(rows: &[String], foot: usize) -> String {
    rows[foot + 1..].join("\n")
}

/// Everything the composer holds, its rows joined by `\n`, or `None` when it is empty or
/// shows only the placeholder (pure; `02-draft`, `03-paste-2-lines`, `04-paste-4-lines`).
pub fn composer_text(rows: &[String]) -> Option<String> {
    let found = composer_box(rows)?;
    crate::adapter::composer_rows_text(found.rows).filter(|t| !t.starts_with(PLACEHOLDER))
}

/// Whether the screen shows a turn running (pure; `05-busy`, `13`, `14`).
pub fn is_busy_rows(rows: &[String]) -> bool {
    composer_box(rows).is_some_and(|b| {
        let status = status_text(rows, b.foot);
        BUSY_SIGNS.iter().any(|s| status.contains(s))
    })
}

/// Whether OpenCode is ready for input (pure): its composer drawn, its status row showing
/// [`READY_SIGN`] and no turn running (`01-ready`, `08`, `10`, `11`, `15`).
pub fn is_ready_rows(rows: &[String]) -> bool {
    composer_box(rows).is_some_and(|b| status_text(rows, b.foot).contains(READY_SIGN))
        && !is_busy_rows(rows)
}

/// `[Pasted ~<n> lines]`'s `n`, when `row` is that placeholder alone (pure; `04`).
pub fn pasted_lines(row: &str) -> Option<usize> {
    row.trim()
        .strip_prefix("[Pasted ~")?
        .strip_suffix(" lines]")?
        .parse()
        .ok()
}

/// OpenCode's form of a pasted `text` (pure, idempotent): trimmed (it stores a paste trimmed,
/// with a space after a placeholder: `requests.json`, `server-session-messages.json`), CR LF
/// and a lone CR as LF.
pub fn pasted_form(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .trim()
        .to_string()
}

/// Whether the composer `content` shows the whole `paste` (pure): a paste of 3 or more lines
/// as `[Pasted ~<lines> lines]` (`04`), a shorter one as its text (`03`).
pub fn paste_shown_in(content: &str, paste: &PasteView) -> bool {
    let first = content.lines().next().unwrap_or("");
    match pasted_lines(first) {
        Some(n) => n == paste.breaks + 1,
        None => paste.shown_in(first),
    }
}

/// The JSON OpenCode gets in `OPENCODE_CONFIG_CONTENT` (pure): the `build` agent's prompt
/// from `prompt` (when given) as the default agent, and the `iapeer` MCP server at the
/// daemon's `port` with the session's token and identity headers, expanded by OpenCode from
/// its environment. With `bearer` (the session is handed `IAPEER_BEARER_TOKEN`, which the
/// daemon requires on every request, spec 02 §4) `Authorization` carries that bearer and the
/// session token travels in `X-IAPeer-Token`.
///
/// With `gated` (a gated peer, spec 10 §4) it also carries [`gated_permission`].
pub fn launch_config(
    prompt: Option<&Path>,
    port: u16,
    bearer: bool,
    gated: bool,
    tool_timeout: std::time::Duration,
) -> serde_json::Value {
    let headers = if bearer {
        json!({
            "Authorization": "Bearer {env:IAPEER_BEARER_TOKEN}",
            "X-IAPeer-Token": "{env:IAPEER_TOKEN}",
            "X-IAPeer-Identity": "{env:PEER_IDENTITY}",
        })
    } else {
        json!({
            "Authorization": "Bearer {env:IAPEER_TOKEN}",
            "X-IAPeer-Identity": "{env:PEER_IDENTITY}",
        })
    };
    let mut config = json!({
        "mcp": {"iapeer": {
            "type": "remote",
            "url": format!("http://127.0.0.1:{port}/mcp"),
            "headers": headers,
            "timeout": super::timeout_ms(tool_timeout),
        }},
    });
    if gated {
        config["permission"] = gated_permission();
    }
    if let Some(p) = prompt {
        config["default_agent"] = json!(AGENT);
        config["agent"] = json!({AGENT: {"prompt": format!("{{file:{}}}", p.display())}});
    }
    config
}

/// The `permission` rules of a gated peer's launch config (pure; OpenCode 1.18.33's config
/// keys, read in its binary: an action `ask` / `allow` / `deny` or an object of patterns per
/// permission, `*` for every one; the last matching rule wins, in the object's order). Every
/// tool asks but the read-only ones (`read` keeps OpenCode's own `ask` for `.env` files) and
/// iapeer's own MCP server's (`iapeer_*`: `send_to_peer` never asks). Recorded with these
/// rules (`permission-config.json`): a `bash` call asks on the screen (`40-permission-bash`),
/// `iapeer_send_to_peer` runs without asking (`45-own-tool-called`).
pub fn gated_permission() -> serde_json::Value {
    json!({
        "*": "ask",
        "read": {"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"},
        "glob": "allow", "grep": "allow", "list": "allow", "lsp": "allow",
        "todowrite": "allow", "question": "allow", "plan_enter": "allow",
        "iapeer_*": "allow",
    })
}

/// The title row of OpenCode's permission prompt (`40-permission-bash`).
const PERMISSION_TITLE: &str = "△ Permission required";
/// Its options, left to right, and the reply to its server each stands for
/// ([`opencode_records::reply_permission`]).
pub const PERMISSION_OPTIONS: [(&str, &str); 3] = [
    ("Allow once", "once"),
    ("Allow always", "always"),
    ("Reject", "reject"),
];

/// A row of the conversation cut to its text (pure): the left bar and the sidebar to its
/// right (after a run of 10 or more blanks) taken off, trimmed.
fn conversation_text(row: &str) -> &str {
    let row = row.trim_start().trim_start_matches(BAR).trim();
    row.find("          ")
        .map_or(row, |at| row[..at].trim_end())
}

/// The titles of OpenCode 1.18.33's permission prompts that name their request after the
/// tool (read in its TUI, recorded in `permission-files.raw`): the tool, and what follows it
/// in the title is the request. `Edit <path>` is also what a `write` asks (its permission is
/// `edit`: `52-permission-write`); a path in the project is shown relative to it, one outside
/// in full (`55-permission-external-write`).
const TITLED_TOOLS: [&str; 3] = ["Edit", "Access external directory", "WebFetch"];

/// The recorded prompts' tools ([`permission_prompt_in`]) and the permission of the request
/// each stands for on OpenCode's server (`GET /permission`: `permission-pending.json`,
/// `permission-pending-<case>.json`).
pub const PROMPT_PERMISSIONS: [(&str, &str); 4] = [
    ("Shell command", "bash"),
    ("Edit", "edit"),
    ("Access external directory", "external_directory"),
    ("WebFetch", "webfetch"),
];

/// A prompt's header row, `<icon> <title>` (`# Shell command`, `→ Edit notes.txt`, `←
/// Access external directory /tmp/x`, `% WebFetch <url>`), cut to its title (pure).
fn prompt_title(row: &str) -> &str {
    match row.split_once(' ') {
        Some((icon, title))
            if icon.chars().count() == 1 && !icon.starts_with(char::is_alphanumeric) =>
        {
            title.trim()
        }
        _ => row,
    }
}

/// The first changed row of an `edit` prompt's diff (pure): `1 - colour = red` (the split
/// view's left side, `50-permission-edit`) or `1 + a new file` (a new file: the left side
/// blank, `52-permission-write`) as `- colour = red` / `+ a new file`.
fn first_change(body: &[&str]) -> Option<String> {
    body.iter().find_map(|r| {
        let (number, rest) = r.split_once(' ')?;
        let change = rest
            .strip_prefix("- ")
            .map(|t| ('-', t))
            .or_else(|| rest.strip_prefix("+ ").map(|t| ('+', t)))?;
        number
            .chars()
            .all(|c| c.is_ascii_digit())
            .then(|| format!("{} {}", change.0, change.1.trim()))
    })
}

/// OpenCode's permission prompt on the screen (pure), as a [`PermissionPrompt`]. Recorded
/// (`permission.raw`, `permission-files.raw`): in the conversation's `┃` box, `△ Permission
/// required`, a header `<icon> <title>`, the request's body, and a row `Allow once   Allow
/// always   Reject` with `⇆ select  enter confirm` on its right. Read as tool and summary:
/// - `# Shell command` then `$ touch allowed-file` (`40-permission-bash`): `Shell command`,
///   `touch allowed-file`;
/// - `→ Edit notes.txt` then the diff (`50-permission-edit`, and a `write`'s,
///   `52-permission-write`): `Edit`, `notes.txt (- colour = red)` (the path as shown, and
///   the diff's first changed row when it shows one);
/// - `← Access external directory /tmp/x/outside` then its patterns
///   (`54-permission-external`): `Access external directory`, `/tmp/x/outside`;
/// - `% WebFetch <url>` (`57-permission-webfetch`): `WebFetch`, the URL;
/// - any other title: the title, and the body's first row.
///
/// The marker is drawn in colour only, so `cursor` is `None`: iapeer answers through
/// OpenCode's server, never with keys ([`Adapter::answer_permission`]).
pub fn permission_prompt_in(rows: &[String]) -> Option<PermissionPrompt> {
    let start = rows.iter().rposition(|r| r.contains(PERMISSION_TITLE))?;
    let body: Vec<&str> = rows[start + 1..]
        .iter()
        .map(|r| conversation_text(r))
        .collect();
    let menu = body
        .iter()
        .position(|r| PERMISSION_OPTIONS.iter().all(|(o, _)| r.contains(o)))?;
    let (header, body) = match body[..menu].iter().position(|r| !r.is_empty()) {
        Some(at) => (prompt_title(body[at]), &body[at + 1..menu]),
        None => ("Permission required", &body[..0]),
    };
    let first_row = || {
        body.iter()
            .find(|r| !r.is_empty())
            .map(|r| r.strip_prefix("$ ").unwrap_or(r).to_string())
            .unwrap_or_default()
    };
    let titled = TITLED_TOOLS.iter().find_map(|tool| {
        let rest = header.strip_prefix(tool)?.strip_prefix(' ')?;
        Some((tool.to_string(), rest.trim().to_string()))
    });
    let (tool, summary) = match titled {
        Some((tool, path)) if tool == "Edit" => {
            let summary = match first_change(body) {
                Some(change) => format!("{path} ({change})"),
                None => path,
            };
            (tool, summary)
        }
        Some(titled) => titled,
        None => (header.to_string(), first_row()),
    };
    Some(PermissionPrompt {
        tool,
        summary,
        reason: String::new(),
        options: PERMISSION_OPTIONS
            .iter()
            .map(|(o, _)| o.to_string())
            .collect(),
        approve: 0,
        deny: PERMISSION_OPTIONS.len() - 1,
        cursor: None,
    })
}

/// The opencode adapter.
pub struct OpenCode {
    /// Its program and the conversation it is bound to.
    bound: Bound,
    /// The server of the session launched last (shared with the bound copies).
    server: SharedServer,
}

impl OpenCode {
    /// The adapter for the OpenCode binary at `program` (not checked until a launch).
    pub fn with_program(program: PathBuf) -> OpenCode {
        OpenCode {
            bound: Bound::new(program),
            server: Arc::new(Mutex::new(None)),
        }
    }
}

impl Adapter for OpenCode {
    fn name(&self) -> &str {
        OPENCODE.name
    }

    fn for_conversation(&self, id: &str) -> Option<Arc<dyn Adapter>> {
        Some(Arc::new(OpenCode {
            bound: self.bound.to(id),
            server: self.server.clone(),
        }))
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, super::LaunchError> {
        let server = Server::choose().ok_or(super::LaunchError::NoFreePort)?;
        let mut args: Vec<OsString> = vec!["--port".into(), server.port.to_string().into()];
        if ctx.mode == WakeMode::Resume {
            // By its id, never `--continue`: the folder's newest may be a person's.
            let Some(id) = self.bound.conversation() else {
                return Err(super::LaunchError::ConversationNotRecorded);
            };
            args.extend(["--session".into(), id.into()]);
        }
        args.extend(ctx.launch_env.start_args.iter().map(OsString::from));
        let PromptSwap::ConfigEnv(var) = OPENCODE.prompt else {
            unreachable!("the opencode row swaps the prompt through its config variable")
        };
        let extra_env = vec![
            (
                var.to_string(),
                launch_config(
                    ctx.system_prompt,
                    ctx.port,
                    ctx.bearer,
                    ctx.gated.is_some(),
                    ctx.tool_timeout,
                )
                .to_string(),
            ),
            ("OPENCODE_SERVER_PASSWORD".into(), server.password.clone()),
            // A peer's program must not replace itself mid-run.
            ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ];
        *self.server.lock().unwrap_or_else(|p| p.into_inner()) = Some(server);
        Ok(LaunchCommand {
            program: self.bound.program(),
            args,
            extra_env,
        })
    }

    fn boot_step(&self, screen: &Screen) -> BootStep {
        if is_ready_rows(screen.rows()) {
            BootStep::Ready
        } else {
            BootStep::Wait
        }
    }

    /// Yes: the peer's MCP server is always configured ([`launch_config`]). Without the wait
    /// the first turn still offered `iapeer_send_to_peer`, but OpenCode 1.18.33 then held the
    /// turn (no model request, no busy sign) until its MCP client connected — long enough
    /// under load for the idle reaper to take the session for idle (seen with the real CLI in
    /// `tests/opencode_peer.rs`).
    fn waits_for_mcp(&self, _cwd: &Path) -> bool {
        true
    }

    fn composer_draft(&self, screen: &Screen) -> Option<String> {
        composer_text(screen.rows())
    }

    fn permission_prompt(&self, screen: &Screen) -> Option<PermissionPrompt> {
        permission_prompt_in(screen.rows())
    }

    /// Through OpenCode's own server (`POST /permission/<id>/reply`, recorded in
    /// `permission-reply.json`): the request it lists as pending (`GET /permission`) for
    /// what the prompt shows. Its server only: the prompt takes no keys iapeer can aim (the
    /// marker is drawn in colour only), so an answer the server did not take is
    /// [`PermissionAnswer::NotTaken`].
    fn answer_permission(
        &self,
        _cwd: &Path,
        prompt: &PermissionPrompt,
        choice: usize,
    ) -> PermissionAnswer {
        let taken = PERMISSION_OPTIONS.get(choice).is_some_and(|(_, reply)| {
            opencode_records::reply_permission(
                &self.server,
                self.bound.conversation(),
                (&prompt.tool, &prompt.summary),
                reply,
            )
        });
        if taken {
            PermissionAnswer::Taken
        } else {
            PermissionAnswer::NotTaken
        }
    }

    fn composer_content(&self, screen: &Screen) -> Option<String> {
        composer_text(screen.rows())
    }

    fn pasted_form(&self, text: &str) -> String {
        pasted_form(text)
    }

    fn paste_shown(&self, screen: &Screen, paste: &PasteView) -> bool {
        composer_text(screen.rows()).is_some_and(|c| paste_shown_in(&c, paste))
    }

    fn has_paste_sign(&self) -> bool {
        true
    }

    fn is_busy(&self, screen: &Screen) -> bool {
        is_busy_rows(screen.rows())
    }

    /// Confirmed from OpenCode's records (its server), never from the screen.
    fn confirmer(&self, cwd: &Path, text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        Box::new(RecordsConfirm::start(
            &self.server,
            cwd,
            self.bound.conversation(),
            text,
        ))
    }

    fn gate_watch(&self, cwd: &Path) -> Option<Box<dyn GateWatch>> {
        Some(Box::new(RecordsGate::start(
            &self.server,
            cwd,
            self.bound.conversation(),
        )))
    }

    fn api_error(&self, cwd: &Path) -> Option<crate::adapter::ApiError> {
        opencode_records::api_error(&self.server, cwd, self.bound.conversation())
    }

    fn activity_ms(&self, cwd: &Path) -> Option<u64> {
        opencode_records::activity_ms(&self.server, cwd, self.bound.conversation())
    }

    /// Esc twice, for when its server cannot be reached: OpenCode 1.18.33 only arms the
    /// interrupt at the first Esc (`esc again to interrupt`, `14-after-one-esc`) and stops the
    /// turn at a second one that comes later (`15-after-esc`; both written at once, the turn
    /// runs on — seen with the real CLI). Never Ctrl-C: on an empty composer it quits.
    fn interrupt_keys(&self) -> Option<Vec<u8>> {
        Some(b"\x1b\x1b".to_vec())
    }

    /// Through OpenCode's own server: `POST /session/<id>/abort` stops the turn at once, as
    /// the second Esc does (`opencode_turn_is_interrupted` in `tests/opencode_peer.rs`).
    fn interrupt_turn(&self, cwd: &Path) -> bool {
        opencode_records::abort(&self.server, cwd, self.bound.conversation())
    }

    /// `/compact`, done from OpenCode's records (`opencode_records::RecordsCompact`). Recorded
    /// (`compact.raw`): typing it opens the command menu over the composer (`21`); Enter runs
    /// it; the conversation then shows `▣  Compaction · <model>` (`22-compacted`).
    fn compact(&self, cwd: &Path) -> Option<(&'static str, Box<dyn crate::adapter::CompactWatch>)> {
        Some((
            "/compact",
            Box::new(opencode_records::RecordsCompact::start(
                &self.server,
                cwd,
                self.bound.conversation(),
            )),
        ))
    }

    /// Whether a conversation is recorded for the peer (OpenCode's SQLite records are not
    /// read while it sleeps; a launch with an id it does not know fails and is reported).
    fn resumable(&self, _cwd: &Path) -> bool {
        self.bound.conversation().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step of a recorded pty session (`tests/fixtures/opencode-1.18.33/<session>.raw`
    /// up to the step's mark), rendered at the recording's 220×50.
    fn recorded(session: &str, step: &str) -> Screen {
        crate::testkit::recorded_step("opencode-1.18.33", session, step, 50, 220)
    }

    /// Ready, busy, draft and paste signs on every recorded screen.
    #[test]
    fn signs_on_the_recorded_screens() {
        // (session, step, ready, busy, composer)
        let cases: &[(&str, &str, bool, bool, Option<&str>)] = &[
            ("first-run", "01-ready", true, false, None),
            (
                "first-run",
                "02-draft",
                true,
                false,
                Some("my unfinished draft"),
            ),
            (
                "first-run",
                "03-paste-2-lines",
                true,
                false,
                Some("two line paste one\ntwo line paste two"),
            ),
            (
                "first-run",
                "04-paste-4-lines",
                true,
                false,
                Some("[Pasted ~4 lines]"),
            ),
            ("first-run", "05-busy", false, true, None),
            ("first-run", "07-mid-turn-queued", false, true, None),
            ("first-run", "08-queued-ran-ready", true, false, None),
            ("first-run", "10-tool-called", true, false, None),
            ("resume", "11-resumed-ready", true, false, None),
            ("resume", "13-busy-before-esc", false, true, None),
            ("resume", "14-after-one-esc", false, true, None),
            ("resume", "15-after-esc", true, false, None),
        ];
        let oc = OpenCode::with_program("/bin/opencode".into());
        for &(session, step, ready, busy, composer) in cases {
            let screen = recorded(session, step);
            assert_eq!(is_ready_rows(screen.rows()), ready, "{step} ready");
            assert_eq!(
                oc.boot_step(&screen) == BootStep::Ready,
                ready,
                "{step} boot"
            );
            assert_eq!(oc.is_busy(&screen), busy, "{step} busy");
            assert_eq!(
                oc.composer_draft(&screen).as_deref(),
                composer,
                "{step} draft"
            );
        }
        let four = recorded("first-run", "04-paste-4-lines");
        let text = "HOLD line 1\nHOLD line 2\nHOLD line 3\nHOLD line 4";
        assert!(oc.paste_shown(&four, &PasteView::of(text)));
        assert!(!oc.paste_shown(&four, &PasteView::of("HOLD line 1\nHOLD line 2")));
        let two = recorded("first-run", "03-paste-2-lines");
        let text = "two line paste one\ntwo line paste two";
        assert!(oc.paste_shown(&two, &PasteView::of(text)));
        assert!(!oc.paste_shown(&recorded("first-run", "01-ready"), &PasteView::of(text)));
    }

    /// The permission prompt of a `bash` call (`permission.raw`), as a gated peer's config
    /// asks for it: the request and the three options; none on the screens before it opens or
    /// after it was answered, nor on the own MCP tool's call.
    #[test]
    fn fixture_the_permission_prompt_is_read() {
        let oc = OpenCode::with_program("/bin/opencode".into());
        for (step, command) in [
            ("40-permission-bash", "touch allowed-file"),
            ("41-permission-right", "touch allowed-file"),
            ("43-permission-again", "touch rejected-file"),
            ("46-permission-api", "touch api-file"),
        ] {
            let p = oc
                .permission_prompt(&recorded("permission", step))
                .unwrap_or_else(|| panic!("{step}: no prompt read"));
            assert_eq!(p.tool, "Shell command", "{step}");
            assert_eq!(p.summary, command, "{step}");
            assert_eq!(p.options, ["Allow once", "Allow always", "Reject"]);
            assert_eq!((p.approve, p.deny, p.cursor), (0, 2, None), "{step}");
        }
        for (session, step) in [
            ("permission", "42-allowed-ran"),
            ("permission", "44-rejected"),
            ("permission", "45-own-tool-called"),
            ("permission", "47-replied-by-api"),
            ("first-run", "01-ready"),
            ("first-run", "05-busy"),
            ("first-run", "10-tool-called"),
        ] {
            assert_eq!(
                oc.permission_prompt(&recorded(session, step)),
                None,
                "{step}"
            );
        }
    }

    /// The permission prompts of an `edit`, a `write`, a file outside the project and a
    /// `webfetch` (`permission-files.raw`): the tool and what a human decides on (the path as
    /// shown and the diff's first change, the folder, the URL); none once answered.
    #[test]
    fn fixture_file_and_web_permission_prompts_are_read() {
        let oc = OpenCode::with_program("/bin/opencode".into());
        let outside = "/tmp/.tmpzL8nPC/outside";
        for (step, tool, summary) in [
            (
                "50-permission-edit",
                "Edit",
                "notes.txt (- colour = red)".to_string(),
            ),
            (
                "52-permission-write",
                "Edit",
                "new-file.txt (+ a new file)".into(),
            ),
            (
                "54-permission-external",
                "Access external directory",
                outside.into(),
            ),
            (
                "55-permission-external-write",
                "Edit",
                format!("{outside}/out.txt (+ outside the project)"),
            ),
            (
                "57-permission-webfetch",
                "WebFetch",
                "http://127.0.0.1:9/page".into(),
            ),
        ] {
            let p = oc
                .permission_prompt(&recorded("permission-files", step))
                .unwrap_or_else(|| panic!("{step}: no prompt read"));
            assert_eq!(
                (p.tool.as_str(), p.summary.as_str()),
                (tool, summary.as_str()),
                "{step}"
            );
            assert_eq!(p.options, ["Allow once", "Allow always", "Reject"]);
            assert_eq!((p.approve, p.deny, p.cursor), (0, 2, None), "{step}");
        }
        for step in [
            "51-edited",
            "53-written",
            "56-external-written",
            "58-webfetch-rejected",
        ] {
            assert_eq!(
                oc.permission_prompt(&recorded("permission-files", step)),
                None,
                "{step}"
            );
        }
    }

    /// The header's title without its icon, and an edit's first change.
    #[test]
    fn prompt_titles_and_changes() {
        assert_eq!(prompt_title("# Shell command"), "Shell command");
        assert_eq!(prompt_title("→ Edit a b.txt"), "Edit a b.txt");
        assert_eq!(prompt_title("Call tool x"), "Call tool x");
        assert_eq!(
            first_change(&["", "1   same", "12 - old row", "12 + new"]).as_deref(),
            Some("- old row")
        );
        assert_eq!(first_change(&["Patterns", "- /tmp/x/*"]), None);
    }

    /// A gated launch carries the recorded `permission` rules (`permission-config.json`:
    /// `iapeer_*` allowed, every other tool but the read-only ones asks); an ungated one none.
    #[test]
    fn a_gated_launch_asks_for_its_tools_but_iapeers_own() {
        let recorded: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/tests/fixtures/opencode-1.18.33/permission-config.json",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(gated_permission(), recorded);
        let gated = launch_config(None, 8765, false, true, crate::runtime::MCP_TOOL_TIMEOUT);
        assert_eq!(gated["permission"], recorded);
        assert_eq!(gated["permission"]["*"], "ask");
        assert_eq!(gated["permission"]["iapeer_*"], "allow");
        assert_eq!(
            launch_config(None, 8765, false, false, crate::runtime::MCP_TOOL_TIMEOUT)
                .get("permission"),
            None
        );
        // The reply each option stands for.
        assert_eq!(
            PERMISSION_OPTIONS.map(|(_, r)| r),
            ["once", "always", "reject"]
        );
    }

    #[test]
    fn pasted_form_is_trimmed_and_idempotent() {
        assert_eq!(pasted_form("  a\r\nb \n"), "a\nb");
        assert_eq!(pasted_form(&pasted_form(" x\ry ")), "x\ny");
    }

    /// The launch: its own server port and password, the prompt through the build agent,
    /// the MCP server with token headers expanded by OpenCode, a resume by id only.
    #[test]
    fn launch_command_and_config() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = crate::paths::Paths::at(tmp.path().join("root"));
        let launch_env = crate::launch_env::LaunchEnv::default();
        let prompt = tmp.path().join("prompt.md");
        let ctx = LaunchCtx {
            system_prompt: Some(&prompt),
            ..crate::testkit::launch_ctx(&paths, tmp.path(), &launch_env)
        };
        let oc = OpenCode::with_program("/bin/opencode".into());
        let cmd = oc.command(&ctx).unwrap();
        let server = oc.server.lock().unwrap().clone().unwrap();
        assert_eq!(cmd.arg_strings(), ["--port", &server.port.to_string()]);
        let env: std::collections::HashMap<_, _> = cmd.extra_env.iter().cloned().collect();
        assert_eq!(env["OPENCODE_SERVER_PASSWORD"], server.password);
        assert_eq!(server.password.len(), 32);
        let config: serde_json::Value =
            serde_json::from_str(&env["OPENCODE_CONFIG_CONTENT"]).unwrap();
        assert_eq!(
            config["agent"]["build"]["prompt"],
            format!("{{file:{}}}", prompt.display())
        );
        assert_eq!(config["mcp"]["iapeer"]["url"], "http://127.0.0.1:8765/mcp");
        assert_eq!(config["mcp"]["iapeer"]["timeout"], 330_000);
        assert_eq!(
            config["mcp"]["iapeer"]["headers"]["Authorization"],
            "Bearer {env:IAPEER_TOKEN}"
        );
        assert_eq!(
            config["mcp"]["iapeer"]["headers"].get("X-IAPeer-Token"),
            None
        );
        // Bearer mode: the daemon's bearer, the session token in its own header.
        let bearer_ctx = LaunchCtx {
            bearer: true,
            ..ctx
        };
        let cmd = oc.command(&bearer_ctx).unwrap();
        let env: std::collections::HashMap<_, _> = cmd.extra_env.iter().cloned().collect();
        let config: serde_json::Value =
            serde_json::from_str(&env["OPENCODE_CONFIG_CONTENT"]).unwrap();
        let headers = &config["mcp"]["iapeer"]["headers"];
        assert_eq!(headers["Authorization"], "Bearer {env:IAPEER_BEARER_TOKEN}");
        assert_eq!(headers["X-IAPeer-Token"], "{env:IAPEER_TOKEN}");
        assert_eq!(headers["X-IAPeer-Identity"], "{env:PEER_IDENTITY}");
        let resume = LaunchCtx {
            mode: WakeMode::Resume,
            ..ctx
        };
        assert!(matches!(
            oc.command(&resume),
            Err(super::super::LaunchError::ConversationNotRecorded)
        ));
        let bound = oc.for_conversation("ses_1").unwrap();
        let args = bound.command(&resume).unwrap().arg_strings();
        assert_eq!(args[2..], ["--session", "ses_1"]);
    }
}

//! Terminal runtimes declared by a manifest (issue 27 item 3): any agent TUI hosted in a pty
//! like the built-in ones, described by the `terminal` section of its `runtime.json`
//! ([`spec`]) instead of code. One adapter, [`TerminalAdapter`], is driven by that data; no
//! runtime has code of its own here.
//!
//! What the screen tells, through the manifest's patterns (the pure functions below): ready
//! (a row matches `ready`, none `busy`), busy (a row other than the composer's matches
//! `busy`), the composer's text (`composer`'s capture group: a draft, or iapeer's paste), the
//! paste taken (the composer matches `paste`, or shows the pasted text). A delivery is
//! confirmed from the screen, as such a program keeps no records iapeer can read: the busy
//! sign after Enter, or the paste leaving the composer after it was seen there.

pub mod spec;

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use super::{Adapter, BootStep, Confirm, LaunchCommand, LaunchCtx, LaunchError, WakeMode};
use crate::adapter::{Acceptance, ConversationNaming, GateState, GateWatch, RuntimeKind};
use crate::term::paste_view::PasteView;
use crate::term::Screen;
use spec::{fill, Naming, Terminal, Values};

/// The composer row of `rows`: the last one `composer` matches, and its capture (trimmed).
pub fn composer(t: &Terminal, rows: &[String]) -> Option<(usize, String)> {
    let re = t.patterns.composer.as_ref()?;
    rows.iter().enumerate().rev().find_map(|(i, row)| {
        let text = re.captures(row)?.get(1).map_or("", |m| m.as_str());
        Some((i, text.trim().to_string()))
    })
}

/// Whether a row other than the composer's matches `busy` (a message in the composer that
/// quotes the sign is no sign).
pub fn busy(t: &Terminal, rows: &[String]) -> bool {
    let skip = composer(t, rows).map(|(i, _)| i);
    rows.iter()
        .enumerate()
        .any(|(i, row)| Some(i) != skip && t.patterns.busy.is_match(row))
}

/// Whether the program waits for input: a row matches `ready` and it is not busy.
pub fn ready(t: &Terminal, rows: &[String]) -> bool {
    rows.iter().any(|r| t.patterns.ready.is_match(r)) && !busy(t, rows)
}

/// The text in the composer, when there is some.
pub fn draft(t: &Terminal, rows: &[String]) -> Option<String> {
    composer(t, rows)
        .map(|(_, text)| text)
        .filter(|t| !t.is_empty())
}

/// Whether the composer shows `paste` taken: its text matches `paste`, or (without one) it
/// shows the pasted text ([`PasteView::shown_in`]).
pub fn paste_shown(t: &Terminal, rows: &[String], paste: &PasteView) -> bool {
    let Some((_, text)) = composer(t, rows) else {
        return false;
    };
    match &t.patterns.paste {
        Some(re) => re.is_match(&text),
        None => !text.is_empty() && paste.shown_in(&text),
    }
}

/// The rows of a screen text.
fn rows_of(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

/// The installed terminal runtimes' programs as this process finds them on its PATH, for the
/// `agents:` lines of `status` and `doctor` (next to the built-in agents'), by name.
pub fn views(paths: &crate::paths::Paths) -> Vec<crate::protocol::AgentProgram> {
    let path_var = std::env::var_os("PATH");
    super::manifest::installed(paths)
        .into_iter()
        .filter_map(|rt| {
            let spec = super::manifest::Manifest::load(paths, &rt)
                .ok()??
                .terminal?;
            let dir = paths.runtimes_dir().join(&rt);
            let values = Values {
                dir: &dir.to_string_lossy(),
                ..Values::default()
            };
            let program = fill(&spec.command, &values);
            let found = super::router::find_program(program.as_ref(), &dir, path_var.as_deref());
            Some(crate::protocol::AgentProgram {
                runtime: rt,
                path: found.as_ref().map(|p| p.display().to_string()),
                looked: match found {
                    Some(_) => Vec::new(),
                    None => vec![format!(
                        "{program} (its manifest's \"terminal\".\"command\") on PATH"
                    )],
                },
            })
        })
        .collect()
}

/// Why the terminal runtime `runtime` (declared by `spec`) cannot start for a peer in `cwd`
/// because its `command` is not found (on this process's PATH, as the daemon of the same
/// user looks), with what to do; `None` when it is found.
pub fn missing_program(
    paths: &crate::paths::Paths,
    runtime: &str,
    spec: &spec::TerminalSpec,
    cwd: &Path,
) -> Option<String> {
    let dir = paths.runtimes_dir().join(runtime);
    let values = Values {
        dir: &dir.to_string_lossy(),
        cwd: &cwd.to_string_lossy(),
        ..Values::default()
    };
    let program = fill(&spec.command, &values);
    let path_var = std::env::var_os("PATH");
    super::router::find_program(program.as_ref(), cwd, path_var.as_deref())
        .is_none()
        .then(|| {
            format!(
                "the program of runtime {runtime}, {program}, is not found — install it, or fix \
                 \"terminal\".\"command\" in {}",
                paths.runtime_manifest(runtime).display()
            )
        })
}

/// One terminal runtime: its name and its checked manifest section, and the conversation a
/// session is bound to.
pub struct TerminalAdapter {
    name: String,
    term: Arc<Terminal>,
    conversation: Option<String>,
}

impl TerminalAdapter {
    /// The adapter of runtime `name` declared by `term`.
    pub fn new(name: &str, term: Terminal) -> TerminalAdapter {
        TerminalAdapter {
            name: name.to_string(),
            term: Arc::new(term),
            conversation: None,
        }
    }

    /// The MCP config file written from the template, if the manifest declares one.
    fn write_mcp_file(&self, ctx: &LaunchCtx, values: &Values) -> Result<(), LaunchError> {
        let Some(file) = &self.term.spec.mcp.file else {
            return Ok(());
        };
        let path = ctx.cwd.join(&file.path);
        let text = fill(&file.template, values);
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                crate::fsutil::ensure_dir(parent)?;
            }
            crate::fsutil::replace_atomic(&path, text.as_bytes(), 0o600)
        };
        write().map_err(|e| LaunchError::ConfigFile(format!("{}: {e}", path.display())))
    }
}

impl Adapter for TerminalAdapter {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Agent
    }

    fn conversation_naming(&self) -> ConversationNaming {
        match self.term.naming {
            Naming::Chosen => ConversationNaming::Chosen,
            Naming::Folder | Naming::NoResume => ConversationNaming::Folder,
        }
    }

    fn for_conversation(&self, id: &str) -> Option<Arc<dyn Adapter>> {
        (self.term.naming == Naming::Chosen).then(|| {
            Arc::new(TerminalAdapter {
                name: self.name.clone(),
                term: self.term.clone(),
                conversation: Some(id.to_string()),
            }) as Arc<dyn Adapter>
        })
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, LaunchError> {
        let url = format!("http://127.0.0.1:{}/mcp", ctx.port);
        let port = ctx.port.to_string();
        let cwd = ctx.cwd.to_string_lossy();
        let dir = ctx.paths.runtimes_dir().join(&self.name);
        let dir = dir.to_string_lossy();
        let values = Values {
            url: &url,
            port: &port,
            cwd: &cwd,
            dir: &dir,
            conversation: self.conversation.as_deref(),
        };
        let spec = &self.term.spec;
        let mut args: Vec<OsString> = spec.args.iter().map(|a| fill(a, &values).into()).collect();
        let mut extra_env = Vec::new();
        if let Some(file) = ctx.system_prompt {
            let file = file.to_string_lossy().into_owned();
            match (&spec.prompt.flag, &spec.prompt.env) {
                (Some(flag), _) => args.extend([flag.into(), file.into()]),
                (None, Some(var)) => extra_env.push((var.clone(), file)),
                (None, None) => {}
            }
        }
        let wake_args = match (ctx.mode, self.term.naming, &spec.resume) {
            (WakeMode::Fresh, _, _) => &spec.fresh,
            (WakeMode::Resume, Naming::Chosen, _) if self.conversation.is_none() => {
                return Err(LaunchError::ConversationNotRecorded)
            }
            (WakeMode::Resume, _, Some(resume)) => resume,
            (WakeMode::Resume, _, None) => &spec.fresh,
        };
        args.extend(wake_args.iter().map(|a| fill(a, &values).into()));
        args.extend(ctx.launch_env.start_args.iter().map(OsString::from));
        for (k, v) in &spec.mcp.env {
            extra_env.push((k.clone(), fill(v, &values)));
        }
        self.write_mcp_file(ctx, &values)?;
        Ok(LaunchCommand {
            program: fill(&spec.command, &values).into(),
            args,
            extra_env,
        })
    }

    fn boot_step(&self, screen: &Screen) -> BootStep {
        if ready(&self.term, screen.rows()) {
            BootStep::Ready
        } else {
            BootStep::Wait
        }
    }

    fn composer_draft(&self, screen: &Screen) -> Option<String> {
        draft(&self.term, screen.rows())
    }

    fn composer_content(&self, screen: &Screen) -> Option<String> {
        draft(&self.term, screen.rows())
    }

    fn paste_shown(&self, screen: &Screen, paste: &PasteView) -> bool {
        paste_shown(&self.term, screen.rows(), paste)
    }

    fn has_paste_sign(&self) -> bool {
        self.term.patterns.composer.is_some()
    }

    fn is_busy(&self, screen: &Screen) -> bool {
        busy(&self.term, screen.rows())
    }

    fn turn_started(&self, screen: &Screen, paste: &PasteView) -> bool {
        let rows = screen.rows();
        busy(&self.term, rows) && !paste_shown(&self.term, rows, paste)
    }

    fn confirmer(&self, _cwd: &Path, text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        Box::new(ScreenConfirm {
            term: self.term.clone(),
            paste: PasteView::of(&crate::term::paste_text(text)),
            seen: false,
        })
    }

    fn gate_watch(&self, _cwd: &Path) -> Option<Box<dyn GateWatch>> {
        Some(Box::new(TurnShown))
    }

    fn resumable(&self, _cwd: &Path) -> bool {
        match self.term.naming {
            Naming::Chosen => self.conversation.is_some(),
            Naming::Folder => true,
            Naming::NoResume => false,
        }
    }

    fn interrupt_keys(&self) -> Option<Vec<u8>> {
        (!self.term.interrupt.is_empty()).then(|| self.term.interrupt.clone())
    }
}

/// Confirms a delivery from the screen: the busy sign after Enter, or the paste gone from
/// the composer after it was seen there.
struct ScreenConfirm {
    term: Arc<Terminal>,
    paste: PasteView,
    seen: bool,
}

impl ScreenConfirm {
    /// The decision on one screen (pure but for remembering that the paste was seen).
    fn on_screen(&mut self, rows: &[String]) -> bool {
        if busy(&self.term, rows) {
            return true;
        }
        if paste_shown(&self.term, rows, &self.paste) {
            self.seen = true;
            return false;
        }
        self.seen
    }
}

impl Confirm for ScreenConfirm {
    fn confirmed(&mut self, _output: &[u8]) -> bool {
        false
    }

    fn acceptance(&mut self, _output: &[u8], screen: &str) -> Acceptance {
        if self.on_screen(&rows_of(screen)) {
            Acceptance::Accepted
        } else {
            Acceptance::Pending
        }
    }
}

/// The ready gate of a terminal runtime: its delivery was confirmed by the turn it started on
/// the screen (there are no records of the model to read), so it has passed.
struct TurnShown;

impl GateWatch for TurnShown {
    fn poll(&mut self, _screen: &str) -> GateState {
        GateState::Passed
    }
}

#[cfg(test)]
mod tests {
    use super::spec::TerminalSpec;
    use super::*;

    fn term() -> Terminal {
        let spec: TerminalSpec = serde_json::from_value(serde_json::json!({
            "command": "parrot",
            "fresh": ["--session-id", "{conversation}"],
            "resume": ["--resume", "{conversation}"],
            "ready": "^> ", "busy": "^\\* working", "composer": "^> ?(.*)$",
            "interrupt": ["Escape"]
        }))
        .unwrap();
        Terminal::check(spec).unwrap()
    }

    fn rows(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn ready_busy_and_draft_from_the_rows() {
        let t = term();
        let idle = rows(&["parrot 1.0", "", "> "]);
        assert!(ready(&t, &idle) && !busy(&t, &idle));
        assert_eq!(draft(&t, &idle), None);
        let working = rows(&["parrot 1.0", "* working (esc to stop)", "> "]);
        assert!(busy(&t, &working) && !ready(&t, &working));
        let typed = rows(&["parrot 1.0", "> half a thought"]);
        assert_eq!(draft(&t, &typed).as_deref(), Some("half a thought"));
        // The sign quoted in the composer is no sign.
        let quoted = rows(&["parrot 1.0", "> * working"]);
        assert!(!busy(&t, &quoted));
        let booting = rows(&["loading…"]);
        assert!(!ready(&t, &booting));
    }

    #[test]
    fn the_paste_is_seen_in_the_composer_as_text_or_placeholder() {
        let t = term();
        let view = PasteView::of("hello there\nsecond line");
        assert!(paste_shown(&t, &rows(&["> hello there"]), &view));
        assert!(!paste_shown(&t, &rows(&["> "]), &view));
        assert!(!paste_shown(&t, &rows(&["> other"]), &view));
        let mut placeholder = t.spec.clone();
        placeholder.paste = Some(r"^\[pasted \d+ lines\]$".into());
        let p = Terminal::check(placeholder).unwrap();
        assert!(paste_shown(&p, &rows(&["> [pasted 2 lines]"]), &view));
        assert!(!paste_shown(&p, &rows(&["> hello there"]), &view));
    }

    #[test]
    fn delivery_is_confirmed_by_busy_or_by_the_paste_leaving() {
        let mk = || ScreenConfirm {
            term: Arc::new(term()),
            paste: PasteView::of("hello"),
            seen: false,
        };
        let mut c = mk();
        assert!(
            !c.on_screen(&rows(&["> "])),
            "never seen: nothing proves it left"
        );
        assert!(c.on_screen(&rows(&["* working", "> "])));
        let mut c = mk();
        assert!(!c.on_screen(&rows(&["> hello"])));
        assert!(c.on_screen(&rows(&["you: hello", "> "])));
        assert_eq!(c.acceptance(b"", "* working\n> "), Acceptance::Accepted);
    }

    #[test]
    fn launch_arguments_follow_the_mode_and_the_conversation() {
        let (dir, paths) = crate::paths::Paths::temp();
        let env = crate::launch_env::LaunchEnv::default();
        let prompt = dir.path().join("prompt.md");
        let a = TerminalAdapter::new("parrot", term());
        let ctx = |mode| LaunchCtx {
            paths: &paths,
            cwd: dir.path(),
            mode,
            system_prompt: Some(&prompt),
            launch_env: &env,
            port: 8765,
            gated: None,
            bearer: false,
            tool_timeout: crate::runtime::MCP_TOOL_TIMEOUT,
        };
        assert_eq!(a.conversation_naming(), ConversationNaming::Chosen);
        assert!(matches!(
            a.command(&ctx(WakeMode::Resume)),
            Err(LaunchError::ConversationNotRecorded)
        ));
        let bound = a.for_conversation("c-1").unwrap();
        let fresh = bound.command(&ctx(WakeMode::Fresh)).unwrap();
        assert_eq!(fresh.arg_strings(), ["--session-id", "c-1"]);
        let resume = bound.command(&ctx(WakeMode::Resume)).unwrap();
        assert_eq!(resume.arg_strings(), ["--resume", "c-1"]);
        assert_eq!(bound.interrupt_keys(), Some(vec![0x1b]));
        assert_eq!(bound.kind(), RuntimeKind::Agent);

        // The prompt by a variable, the MCP endpoint by a variable and a file from a template.
        let mut spec = term().spec;
        spec.prompt.env = Some("PARROT_PROMPT".into());
        spec.mcp.env.insert("PARROT_URL".into(), "{url}".into());
        spec.mcp.file = Some(spec::FileTemplate {
            path: ".parrot/mcp.json".into(),
            template: r#"{"url": "{url}", "token": "{token_env}", "dir": "{dir}"}"#.into(),
        });
        let a = TerminalAdapter::new("parrot", Terminal::check(spec).unwrap());
        let cmd = a
            .for_conversation("c-2")
            .unwrap()
            .command(&ctx(WakeMode::Fresh))
            .unwrap();
        let prompt_path = prompt.to_string_lossy().into_owned();
        assert!(cmd
            .extra_env
            .contains(&("PARROT_PROMPT".into(), prompt_path)));
        let url = "http://127.0.0.1:8765/mcp".to_string();
        assert!(cmd.extra_env.contains(&("PARROT_URL".into(), url.clone())));
        let written = std::fs::read_to_string(dir.path().join(".parrot/mcp.json")).unwrap();
        let runtime_dir = paths.runtimes_dir().join("parrot");
        assert_eq!(
            written,
            format!(
                r#"{{"url": "{url}", "token": "IAPEER_TOKEN", "dir": "{}"}}"#,
                runtime_dir.display()
            )
        );
    }
}

//! `iapeer echo-agent`: the built-in demo/stand-in agent runtime (spec 04 §2 "echo").
//!
//! A small TUI run by the daemon in a pty like Claude Code or Codex, without any account: it
//! draws a `❯ ` prompt, takes bracketed pastes, decodes each pasted envelope, prints
//! `received <ts> from <from>: <body>` (the daemon's delivery confirmation looks for
//! `received <ts>`) and one `attachment: <path>` line per attached file, and replies
//! `echo: <body>` to the sender through the daemon's MCP endpoint — never to a message that
//! itself starts with `echo:`, nor to a service's (sender intelligence `absent`). While a
//! reply is in flight it shows `esc to interrupt` (the busy marker) and honours Escape. It keeps a JSONL transcript under `<cwd>/.echo-agent/`
//! for idle and resume logic.

pub mod boot_menu;
pub mod input;
pub mod mcp;
pub mod reply;
pub mod term;
pub mod transcript;
pub mod ui;

#[cfg(test)]
mod tests;

use crate::clock;
use crate::envelope;
use input::{Composer, InputParser, Key};
use reply::{Done, Job};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use transcript::Record;
use ui::Screen;

/// What `--refuse-input` shows for each message it does not take.
pub const REFUSED_INPUT: &str = "Error: this session takes no messages (--refuse-input)";

/// Exit code of `--fail-boot`.
pub const FAIL_BOOT_EXIT: i32 = 3;
/// Exit code for bad arguments.
const USAGE_EXIT: i32 = 2;
/// How long input must stay quiet before a lone ESC counts as the Escape key, in ms.
const ESC_SETTLE_MS: u16 = 50;

/// Command-line options of `iapeer echo-agent`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--resume`: continue the transcript in the working folder.
    pub resume: bool,
    /// How the boot goes: the switches of tests of failed, slow or interrupted boots.
    pub boot: BootSwitches,
    /// `--refuse-input`: take no message; show [`REFUSED_INPUT`] instead of an
    /// acknowledgement (tests of a wake whose first message the runtime does not take and
    /// says why on its screen, as Codex 0.171.0 does for a conversation open elsewhere).
    pub refuse_input: bool,
    /// `--reply-delay-ms N`: wait N ms before each reply (busy-state tests).
    pub reply_delay_ms: u64,
    /// `--system-prompt-file PATH`: the system prompt iapeer composed (spec 06); the echo
    /// agent has no model, so it only reports the file's size, proving it was passed.
    pub system_prompt_file: Option<PathBuf>,
    /// `--spawn SCRIPT`: at start, run `/bin/sh SCRIPT` in a process group of its own (as
    /// Codex starts its MCP servers), its output discarded, and leave it running (tests of
    /// what a session started, issue 32 item 5).
    pub spawn: Option<PathBuf>,
}

/// The echo agent's boot switches ([`Options::boot`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootSwitches {
    /// `--fail-boot`: print an error and exit 3 at once (crash-loop tests).
    pub fail: bool,
    /// `--no-prompt`: never draw the prompt (boot-deadline tests).
    pub no_prompt: bool,
    /// `--boot-delay-ms N`: wait N ms before drawing anything (tests of waits for a boot).
    pub delay_ms: u64,
    /// `--boot-menu "QUESTION|OPTION|OPTION…"`: show this menu before the composer and go on
    /// once an option is chosen (tests of the unknown boot dialog, spec 10 §4).
    pub menu: Option<String>,
}

/// Why the words after `echo-agent` were refused. `Display` is the text for the user.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// An unknown flag, or a missing or non-numeric value.
    #[error("{0}")]
    Args(#[from] lexopt::Error),
    /// A `--boot-menu` that is not a menu.
    #[error("{0}")]
    Menu(#[source] boot_menu::MenuError),
}

/// Parse the words after `echo-agent`.
///
/// Errors: [`OptionsError`], unknown flags, a missing / non-numeric `--reply-delay-ms` or
/// `--boot-delay-ms` value, or a `--boot-menu` that is not a menu.
pub fn parse_options(args: &[String]) -> Result<Options, OptionsError> {
    use lexopt::prelude::*;
    let mut opts = Options::default();
    let mut parser = lexopt::Parser::from_args(args.iter());
    while let Some(arg) = parser.next()? {
        match arg {
            Long("resume") => opts.resume = true,
            Long("fail-boot") => opts.boot.fail = true,
            Long("no-prompt") => opts.boot.no_prompt = true,
            Long("refuse-input") => opts.refuse_input = true,
            Long("boot-menu") => {
                let spec = parser.value()?;
                let spec = spec.to_string_lossy().into_owned();
                boot_menu::BootMenu::parse(&spec).map_err(OptionsError::Menu)?;
                opts.boot.menu = Some(spec);
            }
            Long("system-prompt-file") => {
                opts.system_prompt_file = Some(parser.value()?.into());
            }
            Long("spawn") => {
                opts.spawn = Some(parser.value()?.into());
            }
            Long("boot-delay-ms") => {
                opts.boot.delay_ms = parser.value()?.parse()?;
            }
            Long("reply-delay-ms") => {
                opts.reply_delay_ms = parser.value()?.parse()?;
            }
            other => return Err(other.unexpected().into()),
        }
    }
    Ok(opts)
}

/// Run the echo agent on this process's terminal; `args` are the words after `echo-agent`.
/// Returns the exit code: 0 on SIGTERM/SIGHUP, end of input or Ctrl-C/Ctrl-D on an empty
/// composer; 2 for bad arguments; 3 with `--fail-boot`.
pub fn run(args: &[String]) -> i32 {
    let opts = match parse_options(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("iapeer echo-agent: {e}");
            return USAGE_EXIT;
        }
    };
    if opts.boot.fail {
        eprintln!("iapeer echo-agent: failing at boot on purpose (--fail-boot)");
        return FAIL_BOOT_EXIT;
    }
    let wake = match term::Wake::new() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("iapeer echo-agent: cannot create its wake pipe: {e}");
            return 1;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        let watched = signal_hook::flag::register(sig, Arc::clone(&stop)).and_then(|_| {
            signal_hook::low_level::pipe::register(sig, wake.raw_sender()?).map(|_| ())
        });
        if let Err(e) = watched {
            eprintln!("iapeer echo-agent: cannot watch signal {sig}: {e}");
        }
    }
    if let Some(script) = &opts.spawn {
        if let Err(e) = spawn_script(script) {
            eprintln!("iapeer echo-agent: cannot run {}: {e}", script.display());
        }
    }
    std::thread::sleep(Duration::from_millis(opts.boot.delay_ms));
    let _raw = term::RawMode::enter();
    let chosen = match opts.boot.menu.as_deref().map(boot_menu::BootMenu::parse) {
        Some(Ok(menu)) => match ask(menu, &stop, &wake) {
            Some(label) => Some(label),
            None => return 0,
        },
        _ => None,
    };
    match App::new(opts, &wake) {
        Ok(mut app) => {
            app.chosen = chosen;
            app.run(&stop, &wake)
        }
        Err(e) => {
            eprintln!("iapeer echo-agent: cannot start its reply worker: {e}");
            1
        }
    }
}

/// `--spawn`: start `/bin/sh script` in a process group of its own with its output
/// discarded; a thread reaps it if it ends before the agent does.
fn spawn_script(script: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let mut child = std::process::Command::new("/bin/sh")
        .arg(script)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    std::thread::Builder::new()
        .name("spawned-script".into())
        .spawn(move || child.wait())?;
    Ok(())
}

/// Show `menu` until an option is chosen; `None` when told to stop or input ends first.
fn ask(mut menu: boot_menu::BootMenu, stop: &AtomicBool, wake: &term::Wake) -> Option<String> {
    term::write_out(menu.frame().as_bytes());
    let mut buf = [0u8; 256];
    loop {
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        match term::read_in(&mut buf, wake, None) {
            term::Input::Data(n) => {
                if let Some(label) = menu.feed(&buf[..n]) {
                    term::write_out(b"\x1b[H\x1b[2J");
                    return Some(label);
                }
                term::write_out(menu.frame().as_bytes());
            }
            term::Input::Idle | term::Input::Woken => {}
            term::Input::Closed => return None,
        }
    }
}

/// What a key did to the screen.
enum Step {
    /// Quit with this exit code.
    Exit(i32),
    /// The composer changed: redraw the prompt line.
    Redraw,
    /// The key's handler drew the screen, composer included.
    Drawn,
    /// Nothing to redraw.
    Nothing,
}

struct InFlight {
    id: u64,
    to: String,
    topic: Option<String>,
    message: String,
    cancel: Arc<AtomicBool>,
}

struct App {
    opts: Options,
    cwd: PathBuf,
    parser: InputParser,
    composer: Composer,
    screen: Screen,
    jobs: crossbeam_channel::Sender<Job>,
    done: crossbeam_channel::Receiver<Done>,
    in_flight: Vec<InFlight>,
    next_id: u64,
    /// The option chosen in the `--boot-menu`, said on the first screen.
    chosen: Option<String>,
}

impl App {
    fn new(opts: Options, wake: &term::Wake) -> std::io::Result<App> {
        let (jobs, done) = reply::spawn(wake.sender()?);
        Ok(App {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            screen: Screen::new(!opts.boot.no_prompt),
            opts,
            parser: InputParser::new(),
            composer: Composer::new(),
            jobs,
            done,
            in_flight: Vec::new(),
            next_id: 1,
            chosen: None,
        })
    }

    fn run(mut self, stop: &AtomicBool, wake: &term::Wake) -> i32 {
        let identity = std::env::var("PEER_IDENTITY").unwrap_or_else(|_| "no identity".into());
        let mut lines = vec![format!(
            "iapeer echo agent — demo stand-in runtime ({identity})"
        )];
        if let Some(p) = &self.opts.system_prompt_file {
            lines.push(match std::fs::metadata(p) {
                Ok(m) => format!("system prompt: {} bytes from {}", m.len(), p.display()),
                Err(e) => format!("system prompt {} unreadable: {e}", p.display()),
            });
        }
        if let Some(label) = &self.chosen {
            lines.push(format!("boot menu: {label}"));
        }
        if self.opts.resume {
            lines.push(match transcript::count(&self.cwd) {
                Ok(Some(n)) => format!("resumed conversation ({n} earlier messages)"),
                Ok(None) => "no earlier conversation to resume — starting fresh".into(),
                Err(e) => format!("cannot read the transcript: {e}"),
            });
        }
        self.show(&lines);

        let mut buf = [0u8; 4096];
        loop {
            if stop.load(Ordering::SeqCst) {
                return 0;
            }
            // Event-driven: no timeout unless a lone ESC waits to be told from a sequence.
            let wait = self.parser.escape_pending().then_some(ESC_SETTLE_MS);
            let keys = match term::read_in(&mut buf, wake, wait) {
                term::Input::Data(n) => self.parser.feed(&buf[..n]),
                term::Input::Idle => self.parser.flush(),
                term::Input::Woken => Vec::new(),
                term::Input::Closed => return 0,
            };
            // One redraw per read, not per key: a long paste-less line arrives as thousands of
            // keys per read.
            let mut redraw = false;
            for key in keys {
                match self.on_key(key) {
                    Step::Exit(code) => return code,
                    Step::Redraw => redraw = true,
                    Step::Drawn => redraw = false,
                    Step::Nothing => {}
                }
            }
            if redraw {
                self.show(&[]);
            }
            while let Ok(done) = self.done.try_recv() {
                self.on_done(done);
            }
        }
    }

    /// Print `lines` above the bottom block, in one write.
    fn show(&mut self, lines: &[String]) {
        let frame = self.screen.frame(lines, &self.composer.display());
        term::write_out(frame.as_bytes());
    }

    /// Apply one key. The caller redraws the prompt once per read when a key asked for it.
    fn on_key(&mut self, key: Key) -> Step {
        match key {
            Key::Char(c) => self.composer.insert_char(c),
            Key::Paste(text) => self.composer.insert_paste(text),
            Key::Backspace => {
                self.composer.backspace();
            }
            Key::Enter => {
                let text = self.composer.take();
                self.submit(&text);
                return Step::Drawn;
            }
            // Esc: interrupt a reply, else clear the composer (iapeer clears a cut paste of
            // its own with it: `Adapter::clear_keys`).
            Key::Escape => {
                if !self.in_flight.is_empty() {
                    self.interrupt();
                    return Step::Nothing;
                }
                if self.composer.is_empty() {
                    return Step::Nothing;
                }
                self.composer = Composer::new();
            }
            // Ctrl-C: interrupt a reply, else clear the composer, else quit.
            Key::CtrlC => {
                if !self.in_flight.is_empty() {
                    self.interrupt();
                    return Step::Nothing;
                }
                if self.composer.is_empty() {
                    return Step::Exit(0);
                }
                self.composer = Composer::new();
            }
            // Ctrl-D: quit on an empty composer.
            Key::CtrlD => {
                return if self.composer.is_empty() {
                    Step::Exit(0)
                } else {
                    Step::Nothing
                }
            }
        }
        Step::Redraw
    }

    fn submit(&mut self, text: &str) {
        if text.trim().is_empty() {
            self.show(&[]);
            return;
        }
        if self.opts.refuse_input {
            self.show(&[REFUSED_INPUT.to_string()]);
            return;
        }
        let env = match envelope::decode(text) {
            Ok(env) => env,
            Err(_) => {
                self.show(&[format!("you: {text}")]);
                return;
            }
        };
        let mut lines = vec![format!(
            "received {} from {}: {}",
            env.ts.as_deref().unwrap_or("-"),
            env.from,
            env.body
        )];
        lines.extend(env.attachments.iter().map(|a| format!("attachment: {a}")));
        // A fresh session's first message may start with the peer's initial_prompt.
        if let Some(seed) = text
            .split("<iap ")
            .next()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            lines.push(format!(
                "initial prompt: {}",
                seed.lines().next().unwrap_or(seed)
            ));
        }
        if let Err(e) = transcript::append(&self.cwd, &Record::received(&env, clock::now_ms())) {
            lines.push(format!("transcript write failed: {e}"));
        }
        if reply::wants_reply(&env) {
            let job = Job {
                id: self.next_id,
                to: env.from.clone(),
                message: reply::echo_message(&env.body),
                topic: env.topic.clone(),
                delay: Duration::from_millis(self.opts.reply_delay_ms),
                cancel: Arc::new(AtomicBool::new(false)),
            };
            self.next_id += 1;
            self.in_flight.push(InFlight {
                id: job.id,
                to: job.to.clone(),
                topic: job.topic.clone(),
                message: job.message.clone(),
                cancel: Arc::clone(&job.cancel),
            });
            if self.jobs.send(job).is_err() {
                lines.push("reply failed: the reply worker is gone".into());
                self.in_flight.pop();
            }
        }
        self.update_status();
        self.show(&lines);
    }

    fn on_done(&mut self, done: Done) {
        let Some(pos) = self.in_flight.iter().position(|f| f.id == done.id) else {
            return; // interrupted: no longer waited for
        };
        let job = self.in_flight.remove(pos);
        let (ok, result, line) = match done.result {
            Ok(short) => (
                true,
                short.clone(),
                format!("replied to {}: {short}", job.to),
            ),
            Err(e) => (false, e.to_string(), format!("reply failed: {e}")),
        };
        let mut lines = vec![line];
        let record = Record::Assistant {
            at: clock::now_ms(),
            to: job.to,
            topic: job.topic,
            body: job.message,
            ok,
            result,
        };
        if let Err(e) = transcript::append(&self.cwd, &record) {
            lines.push(format!("transcript write failed: {e}"));
        }
        self.update_status();
        self.show(&lines);
    }

    /// Escape while replying: stop waiting for every reply in flight.
    fn interrupt(&mut self) {
        for f in self.in_flight.drain(..) {
            f.cancel.store(true, Ordering::SeqCst);
        }
        self.update_status();
        self.show(&["interrupted".to_string()]);
    }

    fn update_status(&mut self) {
        let status = self
            .in_flight
            .first()
            .map(|f| format!("✻ replying to {}… (esc to interrupt)", f.to));
        self.screen.set_status(status);
    }
}

//! The `echo` runtime (spec 04 §2 "echo"): the built-in stand-in agent, `iapeer echo-agent`,
//! a real TUI in a real pty that answers through MCP. Used by the demo and the tests; it needs
//! no account.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Adapter, BootStep, Confirm, LaunchCommand, LaunchCtx, WakeMode};
use crate::runtime_table::{PromptSwap, ECHO};
use crate::term::Screen;

/// The folder, inside the peer's cwd, where the echo agent keeps its transcript.
pub const TRANSCRIPT_DIR: &str = ".echo-agent";
/// The transcript file name inside [`TRANSCRIPT_DIR`].
pub const TRANSCRIPT_FILE: &str = "transcript.jsonl";

/// The echo adapter. The program is this very binary (`iapeer echo-agent`).
pub struct Echo {
    program: OsString,
}

impl Echo {
    /// Use the running executable as the echo agent program.
    pub fn from_env() -> Echo {
        Echo {
            program: super::this_binary(),
        }
    }

    /// `<cwd>/.echo-agent/transcript.jsonl`.
    pub fn transcript(cwd: &Path) -> PathBuf {
        cwd.join(TRANSCRIPT_DIR).join(TRANSCRIPT_FILE)
    }
}

/// Whether a screen shows the echo agent's composer: a row starting with `❯` that is not
/// the marker of a menu (`--boot-menu`).
fn shows_prompt(screen: &Screen) -> bool {
    let rows = screen.rows();
    rows.iter().any(|r| r.starts_with('❯'))
        && crate::term::menu::find_menu_with(rows, '❯').is_none()
}

/// The echo agent's busy sign: the end of its status line (`echo_agent::mod`'s
/// `update_status`).
const BUSY_SIGN: &str = "esc to interrupt";

/// Whether the echo agent shows its busy sign where it draws it: in the status line right
/// above its prompt row (`echo_agent::ui::Screen::frame`: output lines, then the status line,
/// then `❯ ` and the composer's one-row display; nothing below). Only these two rows are made, not
/// the whole screen after every chunk of output (issue 31 item 3); so the words in an output
/// line further up (a message that quotes them) are no sign (in the newest output line, right
/// above the prompt when no status is drawn, they still are). Without a prompt row
/// (`--no-prompt`, before the first frame) the whole screen is read.
fn busy(screen: &Screen) -> bool {
    let Some(prompt) = screen.last_row_starting_with(crate::echo_agent::ui::PROMPT.trim_end())
    else {
        return screen.text().contains(BUSY_SIGN);
    };
    (prompt.saturating_sub(1)..=prompt).any(|r| screen.row_text(r).contains(BUSY_SIGN))
}

impl Adapter for Echo {
    fn name(&self) -> &str {
        ECHO.name
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, super::LaunchError> {
        let mut args: Vec<OsString> = vec![ECHO.own_verb().into()];
        if ctx.mode == WakeMode::Resume {
            if !self.resumable(ctx.cwd) {
                return Err(super::LaunchError::EchoTranscriptMissing);
            }
            args.push("--resume".into());
        }
        if let (Some(p), PromptSwap::Flag(flag)) = (ctx.system_prompt, ECHO.prompt) {
            args.push(flag.into());
            args.push(p.as_os_str().to_owned());
        }
        args.extend(ctx.launch_env.start_args.iter().map(OsString::from));
        Ok(LaunchCommand {
            program: self.program.clone(),
            args,
            extra_env: Vec::new(),
        })
    }

    fn boot_step(&self, screen: &Screen) -> BootStep {
        if shows_prompt(screen) && !busy(screen) {
            BootStep::Ready
        } else {
            BootStep::Wait
        }
    }

    fn prompt_glyph(&self) -> Option<&'static str> {
        Some("❯")
    }

    fn is_busy(&self, screen: &Screen) -> bool {
        busy(screen)
    }

    fn confirmer(&self, _cwd: &Path, _text: &str, agent_ts: Option<&str>) -> Box<dyn Confirm> {
        let needle = match agent_ts {
            Some(ts) => format!("received {ts} from "),
            None => "received ".to_string(),
        };
        Box::new(AckSeen {
            needle: needle.into_bytes(),
        })
    }

    fn activity_ms(&self, cwd: &Path) -> Option<u64> {
        super::newest_mtime_ms([Echo::transcript(cwd).as_path()])
    }

    fn resumable(&self, cwd: &Path) -> bool {
        Echo::transcript(cwd).is_file()
    }

    fn records_hold(&self, cwd: &Path, body: &str, since_ms: u64) -> Option<bool> {
        // The echo agent writes its `user` record as it takes a message: no transcript, no
        // message taken.
        match crate::fsutil::read_optional(&Echo::transcript(cwd)) {
            Ok(text) => {
                Some(text.is_some_and(|t| crate::echo_agent::transcript::holds(&t, body, since_ms)))
            }
            Err(_) => None,
        }
    }

    fn clear_keys(&self) -> Option<crate::adapter::ClearKeys> {
        // Our own program: Esc clears a composer that holds something and does nothing on an
        // empty one (`echo_agent::App::on_key`); no second press.
        Some(crate::adapter::ClearKeys {
            first: vec![0x1b],
            again: None,
            exit_warning: None,
        })
    }

    fn interrupt_keys(&self) -> Option<Vec<u8>> {
        Some(vec![0x1b])
    }
}

/// Confirmed when the echo agent's acknowledgement line for this envelope's `ts` appears.
struct AckSeen {
    needle: Vec<u8>,
}

impl Confirm for AckSeen {
    fn confirmed(&mut self, output: &[u8]) -> bool {
        output
            .windows(self.needle.len())
            .any(|w| w == self.needle.as_slice())
    }

    fn reads_screen(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch_env::LaunchEnv;
    use crate::paths::Paths;

    #[test]
    fn resume_needs_a_transcript() {
        let (dir, paths) = Paths::temp();
        let env = LaunchEnv::default();
        let echo = Echo::from_env();
        let ctx = LaunchCtx {
            mode: WakeMode::Resume,
            ..crate::testkit::launch_ctx(&paths, dir.path(), &env)
        };
        assert_eq!(
            echo.command(&ctx).unwrap_err().to_string(),
            "no transcript to resume"
        );
        std::fs::create_dir_all(dir.path().join(TRANSCRIPT_DIR)).unwrap();
        std::fs::write(Echo::transcript(dir.path()), "{}\n").unwrap();
        let cmd = echo.command(&ctx).unwrap();
        assert_eq!(
            cmd.args,
            vec![OsString::from("echo-agent"), "--resume".into()]
        );
        assert!(echo.activity_ms(dir.path()).is_some());
    }

    /// The screen the echo agent draws from `frames` (its own frame builder).
    fn drawn(frames: &[(&[&str], Option<&str>)]) -> Screen {
        let mut ui = crate::echo_agent::ui::Screen::new(true);
        let mut screen = Screen::new(50, 220);
        for (lines, status) in frames {
            ui.set_status(status.map(str::to_string));
            let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            screen.feed(ui.frame(&lines, "").as_bytes(), true);
        }
        screen
    }

    #[test]
    fn busy_is_the_status_line_above_the_prompt() {
        let echo = Echo::from_env();
        let status = Some("✻ replying to bob… (esc to interrupt)");
        assert!(!echo.is_busy(&drawn(&[(&["banner"], None)])));
        assert!(echo.is_busy(&drawn(&[(&["banner"], None), (&["received"], status)])));
        // Cleared when the reply is sent.
        let done = drawn(&[(&["banner"], status), (&["sent"], None)]);
        assert!(!echo.is_busy(&done));
        // A message further up that quotes the words is no sign: only the row above the
        // prompt (the status line, or the newest output line when there is none) counts.
        let quote = "received 12:00:00 from bob: esc to interrupt";
        let quoted = drawn(&[(&[quote, "sent"], None)]);
        assert!(quoted.text().contains(BUSY_SIGN));
        assert!(!echo.is_busy(&quoted));
        // With many lines above, the sign is still found (the screen scrolled).
        let many: Vec<String> = (0..80).map(|i| format!("line {i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(echo.is_busy(&drawn(&[(&many, status)])));
        // No prompt row drawn: the whole screen is read.
        let mut bare = Screen::new(50, 220);
        bare.feed("working (esc to interrupt)\r\n".as_bytes(), true);
        assert!(echo.is_busy(&bare));
    }

    #[test]
    fn ack_confirms_only_the_right_ts() {
        let echo = Echo::from_env();
        let mut c = echo.confirmer(Path::new("/"), "", Some("01:02:03"));
        assert!(!c.confirmed(b"received 01:02:04 from bob: hi"));
        assert!(c.confirmed(b"\x1b[2Kreceived 01:02:03 from bob: hi\r\n"));
    }
}

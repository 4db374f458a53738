//! What the echo agent draws, as pure string building: output lines above a bottom block made
//! of an optional status line (`… (esc to interrupt)`) and the `❯ ` prompt line.

/// The composer prompt (U+276F then a space), matched by readiness detection (spec 04).
pub const PROMPT: &str = "❯ ";

/// Tracks what the bottom block currently shows so it can be erased and redrawn around new
/// output. Every frame is meant to be written with one `write`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    prompt_enabled: bool,
    status: Option<String>,
    /// Lines the drawn bottom block occupies (0, 1 or 2); the cursor is on its last line.
    drawn_lines: usize,
}

impl Screen {
    /// A screen that draws the prompt unless `prompt_enabled` is false (`--no-prompt`).
    pub fn new(prompt_enabled: bool) -> Screen {
        Screen {
            prompt_enabled,
            status: None,
            drawn_lines: 0,
        }
    }

    /// Set or clear the status line (takes effect at the next frame).
    pub fn set_status(&mut self, status: Option<String>) {
        self.status = status;
    }

    /// One frame: erase the bottom block, print `lines` (each on its own line, inner line
    /// breaks shown as line breaks), then draw the status line and the prompt with
    /// `composer` (the composer's display text).
    pub fn frame(&mut self, lines: &[String], composer: &str) -> String {
        let mut out = String::new();
        if self.drawn_lines > 0 {
            out.push_str("\r\x1b[2K");
            for _ in 1..self.drawn_lines {
                out.push_str("\x1b[1A\x1b[2K");
            }
        }
        for line in lines {
            out.push_str(&terminal_lines(line));
            out.push_str("\r\n");
        }
        self.drawn_lines = 0;
        if let Some(status) = &self.status {
            out.push_str(status);
            self.drawn_lines = 1;
        }
        if self.prompt_enabled {
            if self.drawn_lines > 0 {
                out.push_str("\r\n");
            }
            out.push_str(PROMPT);
            out.push_str(composer);
            self.drawn_lines += 1;
        }
        out
    }
}

/// Show text with line breaks (`\r\n`, `\r`, `\n`) as terminal line breaks (`\r\n`, since raw
/// mode does no output translation).
pub fn terminal_lines(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace('\n', "\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_erase_and_redraw_the_bottom_block() {
        let mut s = Screen::new(true);
        assert_eq!(s.frame(&["banner".into()], ""), "banner\r\n❯ ");
        assert_eq!(s.frame(&[], "ab"), "\r\x1b[2K❯ ab");
        s.set_status(Some("· replying (esc to interrupt)".into()));
        assert_eq!(
            s.frame(&["received x: a\nb".into()], "ab"),
            "\r\x1b[2Kreceived x: a\r\nb\r\n· replying (esc to interrupt)\r\n❯ ab"
        );
        s.set_status(None);
        assert_eq!(
            s.frame(&["replied".into()], ""),
            "\r\x1b[2K\x1b[1A\x1b[2Kreplied\r\n❯ "
        );
    }

    #[test]
    fn no_prompt_mode_draws_only_lines_and_status() {
        let mut s = Screen::new(false);
        assert_eq!(s.frame(&["a".into()], "ignored"), "a\r\n");
        s.set_status(Some("st".into()));
        assert_eq!(s.frame(&[], ""), "st");
        s.set_status(None);
        assert_eq!(s.frame(&["b".into()], ""), "\r\x1b[2Kb\r\n");
    }
}

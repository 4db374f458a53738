//! `--boot-menu "QUESTION|OPTION|OPTION…"`: a menu the echo agent shows before its composer,
//! as a real CLI may show a dialog at start-up that iapeer has no answer for (the unknown
//! blocking dialog of spec 10 §4). Up and Down move the `❯` marker, Enter chooses; the agent
//! then goes on to its composer and says what was chosen. Pure: bytes in, frame text out.

/// The menu and its marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootMenu {
    question: String,
    options: Vec<String>,
    cursor: usize,
}

/// A `--boot-menu` value that is not a menu (the value as given). `Display` is the text for
/// the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--boot-menu wants \"QUESTION|OPTION|OPTION…\" with a question and at least two \
     non-empty options, not \"{0}\""
)]
pub struct MenuError(pub String);

impl BootMenu {
    /// Parse `QUESTION|OPTION|OPTION…`.
    ///
    /// Errors: [`MenuError`], fewer than two options, or an empty question or option.
    pub fn parse(spec: &str) -> Result<BootMenu, MenuError> {
        let mut parts = spec.split('|').map(str::trim);
        let question = parts.next().unwrap_or_default().to_string();
        let options: Vec<String> = parts.map(String::from).collect();
        if question.is_empty() || options.len() < 2 || options.iter().any(String::is_empty) {
            return Err(MenuError(spec.to_string()));
        }
        Ok(BootMenu {
            question,
            options,
            cursor: 0,
        })
    }

    /// The whole screen: cleared, the question, then one row per option, `❯` on the chosen
    /// one and a space on the others, numbered from 1.
    pub fn frame(&self) -> String {
        let mut out = String::from("\x1b[H\x1b[2J");
        out.push_str(&self.question);
        out.push_str("\r\n\r\n");
        for (i, o) in self.options.iter().enumerate() {
            let mark = if i == self.cursor { '❯' } else { ' ' };
            out.push_str(&format!("{mark} {}. {o}\r\n", i + 1));
        }
        out
    }

    /// Apply input bytes: `ESC [ A` / `ESC O A` up, `ESC [ B` / `ESC O B` down (at the ends
    /// the marker stays), CR or LF chooses. Returns the chosen label, if Enter came.
    pub fn feed(&mut self, bytes: &[u8]) -> Option<String> {
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\r' | b'\n' => return Some(self.options[self.cursor].clone()),
                0x1b if i + 2 < bytes.len() && matches!(bytes[i + 1], b'[' | b'O') => {
                    match bytes[i + 2] {
                        b'A' => self.cursor = self.cursor.saturating_sub(1),
                        b'B' => self.cursor = (self.cursor + 1).min(self.options.len() - 1),
                        _ => {}
                    }
                    i += 2;
                }
                _ => {}
            }
            i += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_refuses_what_is_not_a_menu() {
        assert!(BootMenu::parse("Q|a|b").is_ok());
        for bad in ["", "Q", "Q|a", "|a|b", "Q|a|"] {
            let err = BootMenu::parse(bad).unwrap_err();
            assert!(err.to_string().contains("--boot-menu"), "{bad}: {err}");
        }
    }

    #[test]
    fn keys_move_the_marker_and_enter_chooses() {
        let mut m = BootMenu::parse("Send telemetry?|Yes|No|Ask later").unwrap();
        assert!(m.frame().contains("❯ 1. Yes\r\n  2. No\r\n  3. Ask later"));
        assert_eq!(m.feed(b"\x1b[A"), None, "up at the top stays");
        assert_eq!(m.feed(b"\x1b[B\x1bOB\x1b[B"), None);
        assert!(
            m.frame().contains("  2. No\r\n❯ 3. Ask later"),
            "down stops at the end"
        );
        assert_eq!(m.feed(b"\x1b[A\r"), Some("No".to_string()));
    }

    #[test]
    fn the_frame_reads_as_a_menu_to_the_dialog_reader() {
        let mut m = BootMenu::parse("Send telemetry?|Yes|No").unwrap();
        m.feed(b"\x1b[B");
        let mut screen = crate::term::Screen::new(10, 60);
        screen.feed(m.frame().as_bytes(), false);
        let menu = crate::term::menu::find_menu_with(screen.rows(), '❯').unwrap();
        let labels: Vec<&str> = menu.options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Yes", "No"]);
        assert_eq!(menu.cursor, Some(1));
    }
}

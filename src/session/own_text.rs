//! iapeer's own text in an agent's composer (issue 26 items 8 and 5 (c); spec 05 §7): what
//! iapeer pasted is never a human's draft. Pure.
//!
//! How it gets there (recorded):
//! - Claude Code 2.1.332 puts an interrupted prompt back into its composer, in full and
//!   across rows, and takes it out of the conversation (the next model request does not carry
//!   it): `tests/fixtures/claude-2.1.332/interrupt-restores-prompt.raw`; one taller than the
//!   screen shows only its last rows, the composer's glyph row scrolled off
//!   (`interrupt-restores-tall-prompt.raw`). Codex 0.171.0 keeps an interrupted prompt in its
//!   conversation and leaves the composer empty (`codex-0.171.0/interrupt-keeps-prompt.raw`).
//! - A paste cut off by its deadline (`SessionCmd::Cancel` while its bytes are written) is
//!   finished when the program reads again, and sits in the composer without its Enter: Claude
//!   shows `[Pasted text #2 +3 lines]`, Codex `[Pasted Content 15117 chars]`
//!   (`cut-paste-in-composer.raw` of both).
//! - A delivery whose Enter never took leaves its paste there too.
//!
//! The [`Tracker`] remembers the session's last [`KEPT`] pastes (their text as pasted, by
//! delivery id) and says whether the composer's content is one of them ([`Tracker::find`]):
//! - a paste placeholder alone, whose size (line breaks, or characters) is that of one of
//!   them, and no attached human typed since that paste began (a human's own paste of the
//!   same size is then a draft);
//! - else its text, white space left out on both sides (the runtimes wrap, indent and redraw
//!   it): the start of one of them through at least its first line (an envelope's first line
//!   names the sender and the time), or any part of one of them of at least [`LONG_PART`]
//!   characters (a composer taller than the screen shows only its end). A human's draft
//!   that shares a start with an old message and goes on differently is not one of them.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::hold::RESIDUE;
use crate::term::paste_view::{placeholder_size, PasteView, PlaceholderSize};

/// Pastes remembered per session.
pub const KEPT: usize = 6;
/// The least characters (white space left out) of a part of a paste recognised away from its
/// start: more than a human types by chance, less than the rows a scrolled composer shows.
pub const LONG_PART: usize = 400;
/// After `iapeer interrupt`, how long the session looks for the interrupted message coming
/// back into the composer on its own (without a delivery waiting).
pub const WATCH: Duration = Duration::from_secs(15);
/// After a cut paste's last byte is written, how long its runtime may take to draw it before
/// the next delivery goes ahead anyway.
pub const CUT_SETTLE: Duration = Duration::from_secs(2);
/// After `iapeer interrupt`, how long the screen must show no turn, its composer empty,
/// before a delivery goes: Claude Code 2.1.332 puts the interrupted prompt back a moment
/// after (usually with) the redraw that ends the turn, and a paste in between would be
/// glued to it (seen in `tests/interrupt.rs`).
pub const RESTORE_SETTLE: Duration = Duration::from_secs(1);
/// The most a delivery waits after an interrupt for the turn to end ([`RESTORE_SETTLE`]).
pub const RESTORE_LIMIT: Duration = Duration::from_secs(10);

/// What becomes of the rest of a paste cut off while written (it stays queued for the
/// program's input), in the words its sender is told: through pipes (`pty` false) it is
/// read whole; on a pty it lands in the composer without an Enter, where iapeer clears it
/// when the runtime has keys for that (`clears`), else it waits there for someone's Enter.
/// Pure.
pub fn cut_rest_fate(pty: bool, clears: bool) -> &'static str {
    match (pty, clears) {
        (false, _) => {
            "the rest stays queued for it, so the message arrives whole if it reads again"
        }
        (true, true) => {
            "when its program reads again, the rest lands in its composer without an Enter and \
             iapeer clears it, so the message does not arrive (unless a person attached to the \
             session sends it first): send it again with the same id"
        }
        (true, false) => {
            "when its program reads again, the rest lands in its composer without an Enter, so \
             the message arrives only if someone at the session presses Enter"
        }
    }
}

/// One paste of iapeer into the session.
#[derive(Debug)]
struct Pasted {
    id: u64,
    /// The text as pasted, white space and control characters left out.
    bare: String,
    /// The byte length of the bare text of its first line.
    head: usize,
    /// Its line breaks ([`PasteView::breaks`]).
    breaks: usize,
    /// Its characters.
    chars: usize,
    /// When its paste began.
    began: Instant,
    /// Its Enter was written.
    entered: bool,
    /// When it stopped being iapeer's business: its delivery ended, or the rest of a cut
    /// paste was written. `None` while it is written.
    ended: Option<Instant>,
}

/// A paste recognised in the composer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Own {
    /// Its delivery id.
    pub id: u64,
    /// It is not the runtime still taking it in: its Enter never went, or it went more than
    /// [`RESIDUE`] ago, or an interrupt came after it. Only a settled paste is cleared.
    pub settled: bool,
}

/// A paste cut off by its deadline, its rest still written after it.
#[derive(Debug)]
struct Cut {
    /// Its delivery id.
    id: u64,
    /// The offset (in the session's input stream) just past its last byte.
    end: u64,
    /// When that byte was written.
    written: Option<Instant>,
}

/// What iapeer knows of its own text in one session's composer.
#[derive(Debug, Default)]
pub struct Tracker {
    recent: VecDeque<Pasted>,
    /// The last input an attached client wrote.
    human_at: Option<Instant>,
    /// The last `iapeer interrupt`.
    interrupted_at: Option<Instant>,
    /// Look for our own text without a delivery until then.
    watch_until: Option<Instant>,
    cut: Option<Cut>,
    /// After an interrupt, until the turn ended and (`true`: a runtime that puts the prompt
    /// back) the runtime had its chance to put the prompt back: when it came, and since when
    /// the screen shows no turn.
    restore: Option<(Instant, Option<Instant>, bool)>,
}

/// `s` without white space and control characters.
fn bare(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect()
}

impl Tracker {
    /// Delivery `id` begins to paste `text` (exactly the text between the paste markers), a
    /// runtime that shows it as it is (the tests' shorthand).
    #[cfg(test)]
    pub fn pasting(&mut self, id: u64, text: &str, now: Instant) {
        self.pasting_shown(id, text, text, now);
    }

    /// Delivery `id` begins to paste `pasted` (exactly the text between the paste markers),
    /// which the runtime shows as `shown` (its [`crate::adapter::Adapter::pasted_form`], as
    /// [`Tracker::find`]'s content). A placeholder's counts are the paste's as pasted.
    pub fn pasting_shown(&mut self, id: u64, pasted: &str, shown: &str, now: Instant) {
        self.recent.push_back(Pasted {
            id,
            bare: bare(shown),
            head: bare(shown.split(['\n', '\r']).next().unwrap_or_default()).len(),
            breaks: PasteView::of(pasted).breaks,
            chars: pasted.chars().count(),
            began: now,
            entered: false,
            ended: None,
        });
        while self.recent.len() > KEPT {
            self.recent.pop_front();
        }
    }

    /// Delivery `id` ended; `entered`: its Enter was written.
    pub fn ended(&mut self, id: u64, entered: bool, now: Instant) {
        if let Some(p) = self.recent.iter_mut().find(|p| p.id == id) {
            p.entered = entered;
            p.ended.get_or_insert(now);
        }
    }

    /// Delivery `id` is no longer ours to recognise (taken back unwritten, or cleared).
    pub fn forget(&mut self, id: u64) {
        self.recent.retain(|p| p.id != id);
    }

    /// Delivery `id` was cut off while pasting; its rest ends at offset `end` of the input.
    pub fn cut(&mut self, id: u64, end: u64) {
        if let Some(p) = self.recent.iter_mut().find(|p| p.id == id) {
            p.entered = false;
            p.ended = None;
        }
        self.cut = Some(Cut {
            id,
            end,
            written: None,
        });
    }

    /// `written` bytes of the input stream are written by `now`. True when that finished a
    /// cut paste (it is then in the composer, or about to be).
    pub fn on_written(&mut self, written: u64, now: Instant) -> bool {
        let Some(c) = self.cut.as_mut().filter(|c| c.written.is_none()) else {
            return false;
        };
        if written < c.end {
            return false;
        }
        c.written = Some(now);
        let id = c.id;
        if let Some(p) = self.recent.iter_mut().find(|p| p.id == id) {
            p.ended = Some(now);
        }
        self.watch_until = Some(now + WATCH);
        true
    }

    /// A cut paste's rest is still to be written (its program has not read it yet).
    pub fn cut_unwritten(&self) -> bool {
        self.cut.as_ref().is_some_and(|c| c.written.is_none())
    }

    /// Whether the next delivery must wait for a cut paste: its rest is not written yet, or
    /// was written less than [`CUT_SETTLE`] ago and the composer (`shown`: it holds
    /// something) does not show it yet. Once it need not, the cut is forgotten.
    pub fn waits_for_cut(&mut self, now: Instant, shown: bool) -> bool {
        let waits = self
            .cut
            .as_ref()
            .is_some_and(|c| c.written.is_none_or(|w| !shown && now < w + CUT_SETTLE));
        if !waits {
            self.cut = None;
        }
        waits
    }

    /// An attached client wrote input.
    pub fn human_input(&mut self, now: Instant) {
        self.human_at = Some(now);
    }

    /// `iapeer interrupt` (or a send with `--if-busy interrupt`) wrote its keys; `restores`:
    /// the runtime puts the interrupted prompt back into its composer
    /// ([`Tracker::waits_for_restore`]).
    pub fn interrupted(&mut self, now: Instant, restores: bool) {
        self.interrupted_at = Some(now);
        self.watch_until = Some(now + WATCH);
        self.restore = Some((now, None, restores));
    }

    /// The composer showed iapeer's own text: an interrupted prompt is back, nothing more
    /// to wait for ([`Tracker::waits_for_restore`]).
    pub fn seen_back(&mut self) {
        self.restore = None;
    }

    /// Whether the next delivery must wait, after an interrupt, for the turn to end and the
    /// runtime to put the interrupted prompt back (`busy`: the screen shows a turn; `shown`:
    /// the composer holds something): until the composer holds something, or it showed no
    /// turn — for [`RESTORE_SETTLE`] when the runtime puts the prompt back, else at once — or
    /// [`RESTORE_LIMIT`] passed. Then the interrupt is forgotten here. (A paste into a turn
    /// still ending would be queued behind it, or taken into it.)
    pub fn waits_for_restore(&mut self, now: Instant, busy: bool, shown: bool) -> bool {
        let Some((since, idle, restores)) = self.restore.as_mut() else {
            return false;
        };
        let waits = if shown || now >= *since + RESTORE_LIMIT {
            false
        } else if busy {
            *idle = None;
            true
        } else if !*restores {
            false
        } else {
            now < *idle.get_or_insert(now) + RESTORE_SETTLE
        };
        if !waits {
            self.restore = None;
        }
        waits
    }

    /// Whether to look for our own text in the composer now without a delivery (after an
    /// interrupt or a cut paste, for [`WATCH`]).
    pub fn watching(&self, now: Instant) -> bool {
        self.watch_until.is_some_and(|w| now < w)
    }

    /// The next time something here changes by itself: the end of a cut's settle.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.cut
            .as_ref()
            .and_then(|c| c.written)
            .map(|w| w + CUT_SETTLE)
    }

    fn settled(&self, p: &Pasted, now: Instant) -> bool {
        p.ended.is_some_and(|t| {
            !p.entered
                || now.saturating_duration_since(t) >= RESIDUE
                || self.interrupted_at.is_some_and(|i| i >= t)
        })
    }

    /// Which of our pastes the composer's `content` (its rows, as the adapter reads them, in
    /// its [`crate::adapter::Adapter::pasted_form`]) is, newest first; `None` for anything else
    /// (a draft).
    pub fn find(&self, content: &str, now: Instant) -> Option<Own> {
        let content = content.trim();
        if content.is_empty() {
            return None;
        }
        let done = self.recent.iter().rev().filter(|p| p.ended.is_some());
        let found = match placeholder_size(content) {
            Some(size) => done
                .filter(|p| self.human_at.is_none_or(|h| h < p.began))
                .find(|p| match size {
                    PlaceholderSize::Breaks(n) => n == Some(p.breaks),
                    PlaceholderSize::Chars(n) => n == Some(p.chars),
                }),
            None => {
                let c = bare(content);
                done.into_iter().find(|p| {
                    (c.len() >= p.head && p.bare.starts_with(&c))
                        || (c.chars().count() >= LONG_PART && p.bare.contains(&c))
                })
            }
        };
        found.map(|p| Own {
            id: p.id,
            settled: self.settled(p, now),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: &str = "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"13:48:25\">\nReply via send_to_peer.\n<msg>BUSY forever\nsecond line</msg>\n</iap>";

    fn with(id: u64, text: &str, t0: Instant) -> Tracker {
        let mut t = Tracker::default();
        t.pasting(id, text, t0);
        t.ended(id, true, t0);
        t
    }

    #[test]
    fn the_whole_message_or_its_start_is_ours() {
        let t0 = Instant::now();
        let t = with(7, ENV, t0);
        // As Claude Code draws it back (rows, indented, wrapped anywhere).
        let restored = "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"13:48:25\">\n  Reply via send_to_peer.\n  <msg>BUSY forever\n  second line</msg>\n  </iap>";
        assert_eq!(t.find(restored, t0).map(|o| o.id), Some(7));
        let wrapped =
            "<iap from=\"ea\" runtime=\"echo\" intellig\nence=\"artificial\" ts=\"13:48:25\">";
        assert_eq!(t.find(wrapped, t0).map(|o| o.id), Some(7));
    }

    #[test]
    fn a_draft_that_shares_a_start_with_an_old_message_is_a_draft() {
        let t0 = Instant::now();
        let t = with(7, ENV, t0);
        for draft in [
            // The old message's first line, then the human's own words.
            "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"13:48:25\">\nmy own reply",
            // Less than its first line.
            "<iap from=\"ea\"",
            // Part of it, short.
            "BUSY forever",
            "second line",
            "my unfinished draft",
            // The message and more.
            &format!("{ENV} and more"),
        ] {
            assert_eq!(t.find(draft, t0), None, "{draft:?}");
        }
    }

    #[test]
    fn a_long_part_of_a_message_is_ours_anywhere() {
        let t0 = Instant::now();
        let lines: Vec<String> = (0..60).map(|i| format!("BUSY line {i}")).collect();
        let env = format!(
            "<iap from=\"ea\" runtime=\"echo\" ts=\"1\">\n<msg>{}</msg>\n</iap>",
            lines.join("\n")
        );
        let t = with(3, &env, t0);
        let tail = format!("{}</msg>\n</iap>", lines[14..].join("\n  "));
        assert_eq!(t.find(&tail, t0).map(|o| o.id), Some(3));
        assert_eq!(
            t.find(&lines[50..].join("\n"), t0),
            None,
            "too short to tell"
        );
    }

    #[test]
    fn placeholders_by_size_and_only_when_nobody_typed_since() {
        let t0 = Instant::now();
        let mut t = with(9, ENV, t0);
        assert_eq!(
            t.find("[Pasted text #2 +4 lines]", t0).map(|o| o.id),
            Some(9)
        );
        assert_eq!(t.find("[Pasted text #2 +3 lines]", t0), None);
        assert_eq!(t.find("[Pasted text #2]", t0), None);
        let n = ENV.chars().count();
        assert_eq!(
            t.find(&format!("[Pasted Content {n} chars]"), t0)
                .map(|o| o.id),
            Some(9)
        );
        assert_eq!(
            t.find(&format!("[Pasted Content {} chars]", n + 1), t0),
            None
        );
        t.human_input(t0 + Duration::from_millis(1));
        assert_eq!(
            t.find("[Pasted text #2 +4 lines]", t0),
            None,
            "a human may have pasted the same size"
        );
    }

    /// A runtime that shows a paste changed (Codex's form drops a TAB, Claude Code's makes it
    /// spaces): its text is known in that form, its placeholder by the counts as pasted.
    #[test]
    fn a_paste_shown_changed_is_known_by_its_form_and_counted_as_pasted() {
        let t0 = Instant::now();
        let pasted = "<iap from=\"ea\">\n<msg>a\tb\u{2028}c\r\nd</msg>\n</iap>";
        let shown = crate::runtime::pasted_form::codex(pasted);
        let mut t = Tracker::default();
        t.pasting_shown(3, pasted, &shown, t0);
        t.ended(3, true, t0);
        let n = pasted.chars().count();
        assert_eq!(
            t.find(&format!("[Pasted Content {n} chars]"), t0)
                .map(|o| o.id),
            Some(3)
        );
        assert_eq!(t.find(&shown, t0).map(|o| o.id), Some(3));
        let claude = crate::runtime::pasted_form::claude(pasted);
        let mut c = Tracker::default();
        c.pasting_shown(4, pasted, &claude, t0);
        c.ended(4, true, t0);
        assert_eq!(
            c.find("[Pasted text #1 +3 lines]", t0).map(|o| o.id),
            Some(4)
        );
    }

    #[test]
    fn settled_after_the_residue_window_an_interrupt_or_without_enter() {
        let t0 = Instant::now();
        let mut t = with(1, ENV, t0);
        let own = |t: &Tracker, at| t.find(ENV, at).unwrap();
        assert!(!own(&t, t0).settled, "just taken: the runtime's redraw");
        assert!(own(&t, t0 + RESIDUE).settled);
        t.interrupted(t0 + Duration::from_secs(1), true);
        assert!(own(&t, t0 + Duration::from_secs(2)).settled);
        let mut t = Tracker::default();
        t.pasting(2, ENV, t0);
        assert_eq!(t.find(ENV, t0), None, "still being pasted");
        t.ended(2, false, t0);
        assert!(own(&t, t0).settled, "no Enter ever went");
    }

    #[test]
    fn a_cut_paste_s_sender_is_told_what_becomes_of_its_rest() {
        assert!(cut_rest_fate(false, true).contains("arrives whole if it reads again"));
        let cleared = cut_rest_fate(true, true);
        assert!(cleared.contains("iapeer clears it") && cleared.contains("does not arrive"));
        assert!(!cleared.contains("arrives whole"));
        assert!(cut_rest_fate(true, false).contains("only if someone at the session presses Enter"));
    }

    #[test]
    fn a_cut_paste_holds_the_next_delivery_until_it_is_written_and_drawn() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        t.pasting(4, ENV, t0);
        t.cut(4, 1000);
        assert!(t.waits_for_cut(t0, false));
        assert_eq!(t.find(ENV, t0), None);
        assert!(!t.on_written(999, t0));
        assert!(t.waits_for_cut(t0, true), "its rest is not written");
        let t1 = t0 + Duration::from_secs(1);
        assert!(t.on_written(1000, t1));
        assert!(t.watching(t1));
        assert!(t.waits_for_cut(t1, false), "not drawn yet");
        assert_eq!(t.next_deadline(), Some(t1 + CUT_SETTLE));
        assert_eq!(
            t.find(ENV, t1),
            Some(Own {
                id: 4,
                settled: true
            })
        );
        assert!(!t.waits_for_cut(t1, true), "drawn");
        assert!(!t.waits_for_cut(t1, false), "and forgotten");
    }

    #[test]
    fn after_an_interrupt_deliveries_wait_for_the_prompt_to_come_back() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut t = Tracker::default();
        assert!(!t.waits_for_restore(t0, false, false), "no interrupt");
        t.interrupted(t0, true);
        assert!(
            t.waits_for_restore(t0 + ms(100), true, false),
            "the turn runs"
        );
        assert!(
            t.waits_for_restore(t0 + ms(200), false, false),
            "just ended"
        );
        assert!(t.waits_for_restore(t0 + ms(900), true, false), "busy again");
        assert!(t.waits_for_restore(t0 + ms(1000), false, false));
        assert!(t.waits_for_restore(t0 + ms(1999), false, false));
        assert!(
            !t.waits_for_restore(t0 + ms(2000), false, false),
            "idle 1 s"
        );
        assert!(
            !t.waits_for_restore(t0 + ms(2001), true, false),
            "forgotten"
        );
        t.interrupted(t0, true);
        assert!(!t.waits_for_restore(t0, false, true), "the prompt is back");
        t.interrupted(t0, true);
        assert!(!t.waits_for_restore(t0 + RESTORE_LIMIT, true, false));
        t.interrupted(t0, false);
        assert!(
            t.waits_for_restore(t0, true, false),
            "a runtime that keeps the prompt: the turn still runs"
        );
        assert!(
            !t.waits_for_restore(t0 + ms(100), false, false),
            "a runtime that keeps the prompt: the turn ended"
        );
        assert!(!t.waits_for_restore(t0 + ms(200), true, false), "forgotten");
    }

    #[test]
    fn only_the_last_pastes_are_kept() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        for id in 0..KEPT as u64 + 2 {
            t.pasting(id, &format!("{ENV}{id}"), t0);
            t.ended(id, false, t0);
        }
        assert_eq!(t.find(&format!("{ENV}0"), t0), None);
        assert_eq!(t.find(&format!("{ENV}7"), t0).map(|o| o.id), Some(7));
        t.forget(7);
        assert_eq!(t.find(&format!("{ENV}7"), t0).map(|o| o.id), None);
    }
}

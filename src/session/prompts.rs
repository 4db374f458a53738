//! A tool's permission prompt on a live agent's screen (spec 10 §4, issue 32 item 4), as its
//! session watches it: when it opens, when it closes, and the keys of a human's answer. Pure:
//! fed with what the adapter reads on the screen
//! ([`crate::adapter::Adapter::permission_prompt`]) and the time; the session thread reports
//! what it returns and writes the keys.
//!
//! Each prompt that opens gets a number of its own; an answer names that number, so an
//! answer meant for one prompt is never keyed into another that looks the same (the same
//! command asked twice). A prompt counts as closed once the screen has not shown it for
//! [`CLOSED_AFTER`] (a redraw may hide it for a moment), or at once when it goes after the
//! answer's Enter. Keys wait until the prompt has been shown for the adapter's
//! [`crate::adapter::Adapter::prompt_settle`] (a runtime drops keys that come sooner) and
//! are spaced by its key gap; a key that changed nothing (the marker did not move, the
//! prompt did not close) is sent again after [`KEY_RETRY`]. An answer whose keys did not
//! close the prompt within [`ANSWER_LIMIT`] is given up: the prompt is reported again as a
//! new one, for a human to see.

use std::time::{Duration, Instant};

use crate::adapter::PermissionPrompt;
use crate::term::menu::DialogStep;

/// A prompt the screen has not shown for this long is closed.
pub const CLOSED_AFTER: Duration = Duration::from_millis(500);

/// An answer's keys that did not close the prompt within this long are given up.
pub const ANSWER_LIMIT: Duration = Duration::from_secs(10);

/// Said after the summary of a prompt asked again because the keys of its last answer did
/// not close it within [`ANSWER_LIMIT`].
pub const NOT_CLOSED: &str = "asked again: the last answer did not close the prompt within \
     10 s; if this repeats, answer it on the agent's screen (iapeer attach)";

/// Said after the summary of a prompt asked again because the runtime answers only through
/// its own API and that API did not take the last answer
/// ([`crate::adapter::PermissionAnswer::NotTaken`]).
pub const NOT_TAKEN: &str = "asked again: the runtime did not take the last answer through \
     its API; answer it on the agent's screen (iapeer attach)";

/// A key that did not move the marker is sent again after this long.
pub const KEY_RETRY: Duration = Duration::from_secs(2);

/// What the session reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Prompt number `n` opened.
    Opened(u64, PermissionPrompt),
    /// Prompt number `n` closed (answered, here or by someone attached; or its turn ended),
    /// and how.
    Closed(u64, Closing),
}

/// How a prompt closed, as far as a human's answer given through iapeer goes (what
/// `approve`/`deny` tell, [`crate::protocol::ApprovalOutcome`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closing {
    /// Gone from the screen after the answer went in: its keys up to their Enter
    /// (`by_runtime` false), or given through the runtime's API (true).
    Answered {
        /// The runtime's API took it; no key was written.
        by_runtime: bool,
    },
    /// Gone with no answer of iapeer's in it: answered on the screen by someone attached,
    /// its turn ended, or another prompt replaced it.
    Unanswered,
    /// Closed to be asked again at once as the next prompt, for this reason ([`NOT_CLOSED`],
    /// [`NOT_TAKEN`]).
    AskedAgain(&'static str),
}

/// The open prompt.
#[derive(Debug)]
struct Open {
    n: u64,
    prompt: PermissionPrompt,
    /// When it was first seen.
    opened: Instant,
    /// Since when the screen has not shown it.
    missing_since: Option<Instant>,
    answer: Option<Answering>,
}

/// A human's answer being keyed in.
#[derive(Debug)]
struct Answering {
    /// The option chosen.
    choice: usize,
    since: Instant,
    /// The last key and when it went, with the marker's option then.
    last_key: Option<(Instant, Option<usize>)>,
    /// Enter went: nothing more is keyed.
    entered: bool,
    /// Given to the runtime through its API: no key at all.
    by_runtime: bool,
}

impl Open {
    /// How it closes now: after its answer went in (its Enter, or the runtime's API), or
    /// with none.
    fn closing(&self) -> Closing {
        match &self.answer {
            Some(a) if a.entered => Closing::Answered {
                by_runtime: a.by_runtime,
            },
            _ => Closing::Unanswered,
        }
    }
}

/// The session's watch over permission prompts.
#[derive(Debug, Default)]
pub struct Watch {
    open: Option<Open>,
    last_n: u64,
    /// The least time between two keys.
    gap: Duration,
    /// How long a prompt is shown before its first key.
    settle: Duration,
}

impl Watch {
    /// A watch whose keys are `gap` apart, the first `settle` after its prompt shows (the
    /// adapter's [`crate::adapter::Adapter::boot_key_gap`] and
    /// [`crate::adapter::Adapter::prompt_settle`]).
    pub fn new(gap: Duration, settle: Duration) -> Watch {
        Watch {
            gap,
            settle,
            ..Watch::default()
        }
    }

    /// The prompt open now, with its number.
    pub fn open(&self) -> Option<(u64, &PermissionPrompt)> {
        self.open.as_ref().map(|o| (o.n, &o.prompt))
    }

    /// What the screen shows now (`shown`: the adapter's reading) at `now`; returns what to
    /// report, in order.
    pub fn look(&mut self, shown: Option<PermissionPrompt>, now: Instant) -> Vec<Report> {
        let mut out = Vec::new();
        match (self.open.as_mut(), shown) {
            (None, None) => {}
            (None, Some(p)) => out.push(self.begin(p, now)),
            (Some(o), Some(p)) if o.prompt.same_as(&p) => {
                let stuck = o
                    .answer
                    .as_ref()
                    .is_some_and(|a| now.saturating_duration_since(a.since) >= ANSWER_LIMIT);
                if stuck {
                    out.push(Report::Closed(o.n, Closing::AskedAgain(NOT_CLOSED)));
                    out.push(self.begin_again(p, now, NOT_CLOSED));
                } else {
                    o.prompt = p;
                    o.missing_since = None;
                }
            }
            (Some(o), Some(p)) => {
                out.push(Report::Closed(o.n, o.closing()));
                out.push(self.begin(p, now));
            }
            (Some(o), None) => {
                let entered = o.answer.as_ref().is_some_and(|a| a.entered);
                let since = *o.missing_since.get_or_insert(now);
                if entered || now.saturating_duration_since(since) >= CLOSED_AFTER {
                    out.push(Report::Closed(o.n, o.closing()));
                    self.open = None;
                }
            }
        }
        out
    }

    fn begin(&mut self, prompt: PermissionPrompt, now: Instant) -> Report {
        self.last_n += 1;
        self.open = Some(Open {
            n: self.last_n,
            prompt: prompt.clone(),
            opened: now,
            missing_since: None,
            answer: None,
        });
        Report::Opened(self.last_n, prompt)
    }

    /// Report `prompt` (still on the screen) as a new one whose summary ends with `why`; the
    /// watch keeps the screen's reading, so the next look sees the same prompt.
    fn begin_again(&mut self, prompt: PermissionPrompt, now: Instant, why: &str) -> Report {
        match self.begin(prompt, now) {
            Report::Opened(n, mut asked) => {
                asked.summary = format!("{} — {why}", asked.summary);
                Report::Opened(n, asked)
            }
            closed => closed,
        }
    }

    /// The runtime's API did not take the answer to prompt `n`, and its screen takes no keys
    /// for it ([`crate::adapter::PermissionAnswer::NotTaken`]): the prompt is closed and put
    /// to the human again at once, saying so ([`NOT_TAKEN`]). Nothing when `n` is no longer
    /// open.
    pub fn not_taken(&mut self, n: u64, now: Instant) -> Vec<Report> {
        match self.open.take() {
            Some(o) if o.n == n => vec![
                Report::Closed(n, Closing::AskedAgain(NOT_TAKEN)),
                self.begin_again(o.prompt, now, NOT_TAKEN),
            ],
            other => {
                self.open = other;
                Vec::new()
            }
        }
    }

    /// A human chose option `choice` of prompt `n`; false (nothing to key) when that prompt
    /// is no longer open or has no such option.
    pub fn answer(&mut self, n: u64, choice: usize, now: Instant) -> bool {
        match self.open.as_mut() {
            Some(o) if o.n == n && choice < o.prompt.options.len() => {
                o.answer = Some(Answering {
                    choice,
                    since: now,
                    last_key: None,
                    entered: false,
                    by_runtime: false,
                });
                true
            }
            _ => false,
        }
    }

    /// A human's option `choice` of prompt `n` was given to the runtime through its own API
    /// (`Adapter::answer_permission`): nothing is keyed; the prompt closes as soon as the
    /// screen no longer shows it, and if it still does after [`ANSWER_LIMIT`] it is reported
    /// again as a new one. False when that prompt is no longer open.
    pub fn answered_by_runtime(&mut self, n: u64, choice: usize, now: Instant) -> bool {
        if !self.answer(n, choice, now) {
            return false;
        }
        if let Some(a) = self.open.as_mut().and_then(|o| o.answer.as_mut()) {
            a.entered = true;
            a.by_runtime = true;
        }
        true
    }

    /// The key of the answer to write now, if any: nothing while the prompt is hidden or
    /// mid-redraw, before it has been shown for the settle time, before the gap has passed
    /// since the last key, or while the last key has changed nothing yet (sent again after
    /// [`KEY_RETRY`]: an arrow that did not move the marker, an Enter that did not close
    /// the prompt).
    pub fn key(&mut self, now: Instant) -> Option<DialogStep> {
        if self.next_key().is_none_or(|at| now < at) {
            return None;
        }
        let o = self.open.as_mut()?;
        let a = o.answer.as_mut()?;
        let cursor = o.prompt.cursor?;
        let step = match cursor.cmp(&a.choice) {
            std::cmp::Ordering::Less => DialogStep::Down,
            std::cmp::Ordering::Greater => DialogStep::Up,
            std::cmp::Ordering::Equal => DialogStep::Enter,
        };
        a.last_key = Some((now, Some(cursor)));
        a.entered |= step == DialogStep::Enter;
        Some(step)
    }

    /// When the answer's next key may go (pure over the watch): `None` while there is no
    /// answer, the prompt is hidden or its marker unread.
    fn next_key(&self) -> Option<Instant> {
        let o = self.open.as_ref()?;
        let a = o.answer.as_ref()?;
        if o.missing_since.is_some() || a.by_runtime {
            return None;
        }
        let cursor = o.prompt.cursor?;
        let settled = (o.opened + self.settle).max(a.since);
        Some(match a.last_key {
            None => settled,
            Some((at, from)) if from == Some(cursor) => at + self.gap.max(KEY_RETRY),
            Some((at, _)) => at + self.gap,
        })
    }

    /// When the watch next needs a look without new output (each deadline is one at which
    /// [`Watch::look`] or [`Watch::key`] acts): a hidden prompt's close, an answer's next
    /// key, an answer's limit.
    pub fn next_deadline(&self) -> Option<Instant> {
        let o = self.open.as_ref()?;
        if let Some(t) = o.missing_since {
            return Some(t + CLOSED_AFTER);
        }
        let a = o.answer.as_ref()?;
        let limit = a.since + ANSWER_LIMIT;
        Some(self.next_key().map_or(limit, |k| k.min(limit)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(summary: &str, cursor: usize) -> PermissionPrompt {
        PermissionPrompt {
            tool: "Bash".into(),
            summary: summary.into(),
            reason: String::new(),
            options: vec!["Yes".into(), "No".into()],
            approve: 0,
            deny: 1,
            cursor: Some(cursor),
        }
    }

    const GAP: Duration = Duration::from_millis(800);
    const SETTLE: Duration = Duration::from_millis(1000);

    fn watch() -> Watch {
        Watch::new(GAP, SETTLE)
    }

    /// A watch that saw the prompt `rm a` open (its marker on option 0) at the returned
    /// instant: prompt 1.
    fn watching_rm_a() -> (Instant, Watch) {
        let t0 = Instant::now();
        let mut w = watch();
        w.look(Some(prompt("rm a", 0)), t0);
        (t0, w)
    }

    #[test]
    fn opens_once_survives_a_redraw_and_closes_when_gone() {
        let t0 = Instant::now();
        let mut w = watch();
        assert_eq!(
            w.look(Some(prompt("rm a", 0)), t0),
            [Report::Opened(1, prompt("rm a", 0))]
        );
        assert!(w.look(Some(prompt("rm a", 0)), t0).is_empty());
        // Hidden for a moment by a redraw: still open.
        assert!(w.look(None, t0 + Duration::from_millis(10)).is_empty());
        assert!(w
            .look(Some(prompt("rm a", 0)), t0 + Duration::from_millis(20))
            .is_empty());
        assert!(w.look(None, t0 + Duration::from_millis(30)).is_empty());
        assert_eq!(
            w.next_deadline(),
            Some(t0 + Duration::from_millis(30) + CLOSED_AFTER)
        );
        assert!(w
            .look(Some(prompt("rm a", 0)), t0 + Duration::from_millis(40))
            .is_empty());
        assert_eq!(
            w.next_deadline(),
            None,
            "nothing to do until the screen changes"
        );
        assert!(w.look(None, t0 + Duration::from_millis(30)).is_empty());
        assert_eq!(
            w.look(None, t0 + Duration::from_millis(30) + CLOSED_AFTER),
            [Report::Closed(1, Closing::Unanswered)]
        );
        assert!(w.open().is_none());
        // Another prompt is another number; one replacing it closes it first.
        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(
            w.look(Some(prompt("rm b", 0)), t1),
            [Report::Opened(2, prompt("rm b", 0))]
        );
        assert_eq!(
            w.look(Some(prompt("rm c", 0)), t1),
            [
                Report::Closed(2, Closing::Unanswered),
                Report::Opened(3, prompt("rm c", 0))
            ]
        );
    }

    #[test]
    fn an_answer_is_keyed_one_step_at_a_time_into_its_own_prompt() {
        let (t0, mut w) = watching_rm_a();
        assert!(!w.answer(7, 1, t0), "another prompt's number");
        assert!(!w.answer(1, 5, t0), "no such option");
        assert_eq!(w.key(t0 + SETTLE), None, "nothing chosen yet");
        assert!(w.answer(1, 1, t0));
        // The prompt settles first: a key sooner would be dropped as typing.
        assert_eq!(w.next_deadline(), Some(t0 + SETTLE));
        assert_eq!(w.key(t0 + SETTLE / 2), None);
        let t1 = t0 + SETTLE;
        assert_eq!(w.key(t1), Some(DialogStep::Down));
        assert_eq!(w.key(t1 + GAP), None, "the marker has not moved yet");
        assert_eq!(w.next_deadline(), Some(t1 + KEY_RETRY));
        // The marker moved: Enter, after the gap.
        let t2 = t1 + Duration::from_millis(100);
        w.look(Some(prompt("rm a", 1)), t2);
        assert_eq!(w.next_deadline(), Some(t1 + GAP));
        assert_eq!(w.key(t2), None, "within the gap");
        assert_eq!(w.key(t1 + GAP), Some(DialogStep::Enter));
        assert_eq!(
            w.key(t1 + GAP * 2),
            None,
            "an Enter is given time to close it"
        );
        assert_eq!(w.next_deadline(), Some(t1 + GAP + KEY_RETRY));
        // Gone after the Enter: closed at once.
        assert_eq!(
            w.look(None, t1 + GAP * 2),
            [Report::Closed(1, Closing::Answered { by_runtime: false })]
        );
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn an_answer_after_the_settle_goes_at_once() {
        let (t0, mut w) = watching_rm_a();
        let t1 = t0 + Duration::from_secs(30);
        assert!(w.answer(1, 0, t1));
        assert_eq!(w.next_deadline(), Some(t1));
        assert_eq!(w.key(t1), Some(DialogStep::Enter));
    }

    #[test]
    fn a_lost_key_is_sent_again_and_a_stuck_answer_asks_again() {
        let (t0, mut w) = watching_rm_a();
        assert!(w.answer(1, 1, t0));
        let t1 = t0 + SETTLE;
        assert_eq!(w.key(t1), Some(DialogStep::Down));
        assert_eq!(w.key(t1 + KEY_RETRY), Some(DialogStep::Down));
        // An Enter that did not close the prompt is sent again too.
        let t2 = t1 + KEY_RETRY + GAP;
        w.look(Some(prompt("rm a", 1)), t2);
        assert_eq!(w.key(t2), Some(DialogStep::Enter));
        assert_eq!(w.key(t2 + GAP), None);
        assert_eq!(w.key(t2 + KEY_RETRY), Some(DialogStep::Enter));
        // Still open past the limit: closed and asked again as a new prompt.
        let late = t0 + ANSWER_LIMIT;
        assert_eq!(
            w.look(Some(prompt("rm a", 1)), late),
            [
                Report::Closed(1, Closing::AskedAgain(NOT_CLOSED)),
                Report::Opened(2, prompt(&format!("rm a — {NOT_CLOSED}"), 1))
            ]
        );
        assert_eq!(w.key(late + SETTLE), None, "the new prompt has no answer");
        // The watch keeps the screen's reading: the next look sees the same prompt.
        assert_eq!(w.look(Some(prompt("rm a", 1)), late + GAP), []);
    }

    #[test]
    fn an_answer_the_runtime_did_not_take_asks_again_at_once_saying_so() {
        let (t0, mut w) = watching_rm_a();
        // An answer for a prompt no longer open changes nothing.
        assert_eq!(w.not_taken(7, t0), []);
        assert_eq!(w.open().map(|(n, _)| n), Some(1));
        assert_eq!(
            w.not_taken(1, t0),
            [
                Report::Closed(1, Closing::AskedAgain(NOT_TAKEN)),
                Report::Opened(2, prompt(&format!("rm a — {NOT_TAKEN}"), 0))
            ]
        );
        assert_eq!(
            w.open().map(|(n, p)| (n, p.summary.as_str())),
            Some((2, "rm a"))
        );
        assert_eq!(w.look(Some(prompt("rm a", 0)), t0 + GAP), []);
        assert!(w.answer(2, 0, t0 + GAP), "the new request can be answered");
    }

    #[test]
    fn an_answer_for_a_closed_prompt_is_not_keyed_into_a_look_alike() {
        let (t0, mut w) = watching_rm_a();
        w.look(None, t0);
        w.look(None, t0 + CLOSED_AFTER);
        w.look(Some(prompt("rm a", 0)), t0 + CLOSED_AFTER);
        let t1 = t0 + CLOSED_AFTER + SETTLE;
        assert!(!w.answer(1, 0, t1), "prompt 1 is gone");
        assert_eq!(w.key(t1), None);
        assert!(w.answer(2, 0, t1));
        assert_eq!(w.key(t1), Some(DialogStep::Enter));
    }

    /// An answer the runtime took through its own API (OpenCode's server) writes no key,
    /// even with a marker to read; the prompt closes as soon as the screen drops it, and one
    /// still shown after [`ANSWER_LIMIT`] is reported again for a human.
    #[test]
    fn an_answer_given_through_the_runtime_writes_no_key() {
        let (t0, mut w) = watching_rm_a();
        assert!(!w.answered_by_runtime(9, 0, t0), "another prompt's number");
        assert!(w.answered_by_runtime(1, 0, t0));
        for later in [SETTLE, SETTLE + KEY_RETRY, ANSWER_LIMIT / 2] {
            assert_eq!(w.key(t0 + later), None, "a key at {later:?}");
        }
        assert_eq!(w.next_deadline(), Some(t0 + ANSWER_LIMIT));
        assert_eq!(
            w.look(Some(prompt("rm a", 0)), t0 + ANSWER_LIMIT),
            [
                Report::Closed(1, Closing::AskedAgain(NOT_CLOSED)),
                Report::Opened(2, prompt(&format!("rm a — {NOT_CLOSED}"), 0))
            ],
            "still shown at the limit: put to a human again"
        );
        assert!(w.answered_by_runtime(2, 1, t0 + ANSWER_LIMIT));
        assert_eq!(
            w.look(None, t0 + ANSWER_LIMIT + GAP),
            [Report::Closed(2, Closing::Answered { by_runtime: true })],
            "gone after the answer: closed at once"
        );
    }
}

/// The recorded pane log of Claude Code 2.1.332 in bypass mode, replayed through a screen in
/// small reads, the watch looking after each one as a session does.
#[cfg(test)]
mod recorded {
    use super::*;
    use crate::runtime::claude_screen::permission_prompt;
    use crate::term::{Screen, SESSION_COLS, SESSION_ROWS};

    /// `bypass-ask-rule-esc.raw` holds the whole recording: the ask rule's prompt answered
    /// Enter on `Yes` by a human attached, the hook's prompt Down then Enter on `No`, and the
    /// ask rule's prompt again, Esc. Each opens once and closes once, in order, and the marker
    /// the human moved is read where it is.
    #[test]
    fn each_recorded_prompt_opens_once_and_closes_when_answered_on_screen() {
        let path = format!(
            "{}/tests/fixtures/claude-2.1.332/approvals/bypass-ask-rule-esc.raw",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        let mut screen = Screen::new(SESSION_ROWS, SESSION_COLS);
        let mut w = Watch::new(Duration::from_millis(800), Duration::from_millis(1000));
        let mut t = Instant::now();
        let mut seen: Vec<(u64, String)> = Vec::new();
        let mut cursors: Vec<(u64, usize)> = Vec::new();
        for part in bytes.chunks(64) {
            screen.feed(part, true);
            t += Duration::from_millis(5);
            for r in w.look(permission_prompt(screen.rows()), t) {
                seen.push(match r {
                    Report::Opened(n, p) => (n, format!("open {}: {}", p.tool, p.summary)),
                    Report::Closed(n, _) => (n, "closed".into()),
                });
            }
            if let Some((n, Some(c))) = w.open().map(|(n, p)| (n, p.cursor)) {
                if cursors.last() != Some(&(n, c)) {
                    cursors.push((n, c));
                }
            }
        }
        seen.extend(w.look(None, t + CLOSED_AFTER).into_iter().map(|r| match r {
            Report::Closed(n, _) => (n, "closed".to_string()),
            other => panic!("{other:?}"),
        }));
        let shape: Vec<(u64, String)> = seen
            .iter()
            .map(|(n, s)| (*n, s.split("/tmp/").next().unwrap_or_default().to_string()))
            .collect();
        let expect = [
            (1, "open Bash: rm "),
            (1, "closed"),
            (2, "open Bash: touch "),
            (2, "closed"),
            (3, "open Bash: rm "),
            (3, "closed"),
        ];
        assert_eq!(shape, expect.map(|(n, s)| (n, s.to_string())), "{seen:#?}");
        assert!(seen[0].1.ends_with("/made/a"), "{seen:?}");
        assert!(seen[2].1.ends_with("/made/hook-asks"), "{seen:?}");
        assert!(seen[4].1.ends_with("/made/b"), "{seen:?}");
        assert_eq!(
            cursors,
            [(1, 0), (2, 0), (2, 1), (3, 0)],
            "the human's Down moved it"
        );
    }
}

//! Lifecycle decisions as pure functions (spec 05 §2, §4, §8): fresh or resume, idle sleep,
//! always-on restart back-off. The router gathers the facts and applies the outcome.

use std::time::Duration;

use crate::markers::{Flag, Markers};
use crate::runtime::WakeMode;
use crate::session::handle::SessionStatus;

/// What the caller of a wake asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeRequest {
    /// Let the rules decide (a message woke the peer).
    Auto,
    /// `iapeer <runtime>`, `new`: always fresh.
    Fresh,
    /// `attach`: resume, or fail when there is nothing to resume.
    Resume,
    /// `restart`: replace a live session, then continue the conversation iapeer recorded
    /// (fresh when there is none, or when `refresh` or an ephemeral profile asks for one).
    Restart,
}

/// What a peer's lifecycle markers say about its previous conversation (spec 05 §2 step 6,
/// §3), read in one place ([`PeerMarkers::read`]) for the launch plan and the fresh/resume
/// rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeerMarkers {
    /// `.fresh-next` is set (from `refresh`).
    pub fresh_next: bool,
    /// `.idle-reaped` is set (the last session ended by idle sleep or shutdown).
    pub idle_reaped: bool,
    /// The topics of the previous conversation (`.topic`).
    pub topics: Vec<String>,
    /// The previous conversation's recorded id (`.conversation`, issue 32).
    pub conversation: Option<String>,
}

impl PeerMarkers {
    /// Read `.fresh-next`, `.idle-reaped`, `.topic` and `.conversation` of `m`'s identity
    /// (absent or unreadable: not set, no topics, no conversation).
    pub fn read(m: &Markers) -> PeerMarkers {
        PeerMarkers {
            fresh_next: m.is_set(Flag::FreshNext),
            idle_reaped: m.is_set(Flag::IdleReaped),
            topics: m.topics(),
            conversation: m.conversation(),
        }
    }
}

/// The facts the fresh/resume rules read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WakeFacts {
    /// The peer's markers.
    pub markers: PeerMarkers,
    /// The peer is ephemeral.
    pub ephemeral: bool,
    /// The profile has `interfaces.telegram` (a human talks to this peer).
    pub human_facing: bool,
    /// The waking message's topic.
    pub topic: Option<String>,
    /// The runtime names its conversations ([`crate::adapter::ConversationNaming`]): a resume
    /// needs [`PeerMarkers::conversation`].
    pub named: bool,
}

/// The outcome of the fresh/resume rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeDecision {
    /// Fresh or resume.
    pub mode: WakeMode,
    /// Which rule applied (`cause=` in `lifecycle.log`).
    pub cause: &'static str,
    /// Remove `.fresh-next`.
    pub consume_fresh_next: bool,
    /// Remove `.idle-reaped`.
    pub consume_idle_reaped: bool,
}

/// Spec 05 §2 step 6: the first rule that applies decides. A rule that resumes on its own
/// (human-facing, topic-match) starts fresh instead when the runtime names its conversations
/// and none was recorded (a peer of the original tool or of an older iapeer, issue 32): the
/// folder's newest conversation may be a person's, so it is never taken up (`cause=
/// no-recorded-conversation`). An explicit resume (`attach`) is left to fail loudly.
pub fn decide_mode(req: ModeRequest, f: &WakeFacts) -> WakeDecision {
    let d = by_rules(req, f);
    let unnamed = f.named && f.markers.conversation.is_none();
    if d.mode == WakeMode::Resume && req == ModeRequest::Auto && unnamed {
        return WakeDecision {
            mode: WakeMode::Fresh,
            cause: "no-recorded-conversation",
            ..d
        };
    }
    d
}

/// Spec 05 §2 step 6's rules as written.
fn by_rules(req: ModeRequest, f: &WakeFacts) -> WakeDecision {
    let m = &f.markers;
    let d = |mode, cause, fresh_next, idle| WakeDecision {
        mode,
        cause,
        consume_fresh_next: fresh_next,
        consume_idle_reaped: idle,
    };
    match req {
        ModeRequest::Fresh => {
            return d(
                WakeMode::Fresh,
                "explicit-fresh",
                m.fresh_next,
                m.idle_reaped,
            )
        }
        ModeRequest::Resume => return d(WakeMode::Resume, "explicit-resume", false, m.idle_reaped),
        ModeRequest::Restart => return restart_rule(f),
        ModeRequest::Auto => {}
    }
    if m.fresh_next {
        return d(WakeMode::Fresh, "fresh-next", true, m.idle_reaped);
    }
    if f.ephemeral {
        return d(WakeMode::Fresh, "ephemeral", false, false);
    }
    if !m.idle_reaped {
        return d(WakeMode::Fresh, "not-idle-reaped", false, false);
    }
    if f.human_facing {
        return d(WakeMode::Resume, "human-facing", false, true);
    }
    match f.topic.as_deref() {
        Some(t) if m.topics.iter().any(|x| x == t) => {
            d(WakeMode::Resume, "topic-match", false, true)
        }
        Some(_) => d(WakeMode::Fresh, "new-topic", false, true),
        None => d(WakeMode::Fresh, "no-topic", false, true),
    }
}

/// `restart`'s rule: `refresh` and ephemeral profiles still mean fresh; otherwise the
/// conversation iapeer recorded is taken up again, and without one (a runtime that does not
/// name its conversations, or none recorded yet) the peer starts fresh — never the folder's
/// newest conversation, which may be a person's (issue 32 item 1).
fn restart_rule(f: &WakeFacts) -> WakeDecision {
    let m = &f.markers;
    let (mode, cause, fresh_next) = if m.fresh_next {
        (WakeMode::Fresh, "fresh-next", true)
    } else if f.ephemeral {
        (WakeMode::Fresh, "ephemeral", false)
    } else if f.named && m.conversation.is_some() {
        (WakeMode::Resume, "restart", false)
    } else {
        (WakeMode::Fresh, "restart-without-conversation", false)
    };
    WakeDecision {
        mode,
        cause,
        consume_fresh_next: fresh_next,
        consume_idle_reaped: m.idle_reaped,
    }
}

/// Idle age (ms) of a live agent session (spec 05 §4): now − the newest of runtime activity,
/// last delivery, wake time and last output while a human was attached. Pane output alone
/// does not count (status lines redraw).
pub fn idle_age_ms(
    now_ms: u64,
    status: &SessionStatus,
    woke_at_ms: u64,
    last_delivery_ms: Option<u64>,
) -> u64 {
    let newest = [
        status.activity_ms,
        last_delivery_ms,
        Some(woke_at_ms),
        status.attached_output_ms,
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(woke_at_ms);
    now_ms.saturating_sub(newest)
}

/// How long a session's screen must have drawn nothing before its missing busy sign counts
/// ([`settled_idle`]): a turn redraws its screen many times a second (a spinner, streamed
/// text), an idle screen not at all — the ephemeral wind-down's "quiet" reads the same.
pub const IDLE_SETTLE: Duration = Duration::from_secs(3);

/// Whether a session's screen has settled idle (pure; spec 05 §4 "not mid-turn"): no busy
/// sign on this probe (`now`) nor on the one before it (`before`; none yet → not settled),
/// and no output for [`IDLE_SETTLE`] before `now_ms` (epoch ms). One probe's missing busy
/// sign is not enough: a probe can fall between two redraws of a turn, or in the gap between
/// an agent's tool call and its approval prompt (OpenCode draws neither a busy sign nor the
/// prompt for a moment). The idle limit itself is not lengthened: the probe before the one
/// past the limit was taken while the session was already idle.
pub fn settled_idle(before: Option<&SessionStatus>, now: &SessionStatus, now_ms: u64) -> bool {
    let quiet = now
        .output_ms
        .is_none_or(|at| now_ms.saturating_sub(at) >= IDLE_SETTLE.as_millis() as u64);
    before.is_some_and(|b| !b.busy) && !now.busy && quiet
}

/// Whether to put a session to sleep: idle longer than `idle`, not mid-turn, nobody attached.
pub fn should_sleep(age_ms: u64, idle: Duration, status: &SessionStatus) -> bool {
    age_ms > idle.as_millis() as u64 && !status.busy && status.attached == 0
}

/// Restart policy of an always-on peer (spec 05 §8).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backoff {
    /// Recent death times (epoch ms), newest last.
    deaths: Vec<u64>,
    /// The delay the next restart will use.
    next_delay: Option<Duration>,
}

/// What to do after an always-on peer died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDeath {
    /// Restart after this delay.
    RestartIn(Duration),
    /// Too many deaths: park until `start` or `new`.
    Park,
}

/// First restart delay.
pub const BACKOFF_START: Duration = Duration::from_secs(1);
/// Longest restart delay.
pub const BACKOFF_CAP: Duration = Duration::from_secs(60);
/// A run at least this long resets the back-off.
pub const BACKOFF_RESET_RUN: Duration = Duration::from_secs(60);
/// This many deaths within [`PARK_WINDOW`] park the peer.
pub const PARK_DEATHS: usize = 5;
/// See [`PARK_DEATHS`].
pub const PARK_WINDOW: Duration = Duration::from_secs(60);

impl Backoff {
    /// Record a death at `now_ms` after a run of `ran`, and decide.
    pub fn on_death(&mut self, now_ms: u64, ran: Duration) -> AfterDeath {
        if ran >= BACKOFF_RESET_RUN {
            self.next_delay = None;
        }
        self.deaths.push(now_ms);
        let window = PARK_WINDOW.as_millis() as u64;
        self.deaths.retain(|t| now_ms.saturating_sub(*t) < window);
        if self.deaths.len() >= PARK_DEATHS {
            return AfterDeath::Park;
        }
        let delay = self.next_delay.unwrap_or(BACKOFF_START);
        self.next_delay = Some((delay * 2).min(BACKOFF_CAP));
        AfterDeath::RestartIn(delay)
    }

    /// Forget the history (after `start`/`new` un-parks the peer).
    pub fn reset(&mut self) {
        *self = Backoff::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> WakeFacts {
        WakeFacts::default()
    }

    /// Default facts but for the markers.
    fn marked(markers: PeerMarkers) -> WakeFacts {
        WakeFacts { markers, ..facts() }
    }

    /// `.idle-reaped` set, nothing else.
    fn reaped() -> PeerMarkers {
        PeerMarkers {
            idle_reaped: true,
            ..PeerMarkers::default()
        }
    }

    #[test]
    fn restart_continues_only_the_recorded_conversation() {
        let restart = |f: &WakeFacts| {
            let d = decide_mode(ModeRequest::Restart, f);
            (d.mode, d.cause, d.consume_fresh_next)
        };
        let recorded = WakeFacts {
            named: true,
            ..marked(PeerMarkers {
                conversation: Some("0b8a5c2e".into()),
                ..PeerMarkers::default()
            })
        };
        assert_eq!(restart(&recorded), (WakeMode::Resume, "restart", false));
        // Not reaped by idle sleep, no topic: a message would start fresh; restart does not.
        assert!(!recorded.markers.idle_reaped && recorded.topic.is_none());
        let none = WakeFacts {
            named: true,
            ..facts()
        };
        assert_eq!(
            restart(&none),
            (WakeMode::Fresh, "restart-without-conversation", false)
        );
        // A runtime that does not name its conversations: the folder's newest may be a
        // person's, so fresh.
        assert_eq!(restart(&facts()).0, WakeMode::Fresh);
        let mut refreshed = recorded.clone();
        refreshed.markers.fresh_next = true;
        assert_eq!(restart(&refreshed), (WakeMode::Fresh, "fresh-next", true));
        let ephemeral = WakeFacts {
            ephemeral: true,
            ..recorded
        };
        assert_eq!(restart(&ephemeral).1, "ephemeral");
    }

    #[test]
    fn fresh_or_resume_rules_in_order() {
        let auto = |f: &WakeFacts| decide_mode(ModeRequest::Auto, f);
        assert_eq!(
            decide_mode(ModeRequest::Fresh, &facts()).mode,
            WakeMode::Fresh
        );
        assert_eq!(
            decide_mode(ModeRequest::Resume, &facts()).mode,
            WakeMode::Resume
        );
        let d = auto(&marked(PeerMarkers {
            fresh_next: true,
            ..reaped()
        }));
        assert_eq!(
            (d.mode, d.cause, d.consume_fresh_next, d.consume_idle_reaped),
            (WakeMode::Fresh, "fresh-next", true, true)
        );
        let d = auto(&WakeFacts {
            ephemeral: true,
            ..marked(reaped())
        });
        assert_eq!((d.mode, d.cause), (WakeMode::Fresh, "ephemeral"));
        let d = auto(&facts());
        assert_eq!((d.mode, d.cause), (WakeMode::Fresh, "not-idle-reaped"));
        let d = auto(&WakeFacts {
            human_facing: true,
            ..marked(reaped())
        });
        assert_eq!((d.mode, d.consume_idle_reaped), (WakeMode::Resume, true));
        let topics = marked(PeerMarkers {
            topics: vec!["t1".to_string(), "t2".to_string()],
            ..reaped()
        });
        let d = auto(&WakeFacts {
            topic: Some("t1".into()),
            ..topics.clone()
        });
        assert_eq!((d.mode, d.cause), (WakeMode::Resume, "topic-match"));
        let d = auto(&WakeFacts {
            topic: Some("t9".into()),
            ..topics.clone()
        });
        assert_eq!(
            (d.mode, d.cause, d.consume_idle_reaped),
            (WakeMode::Fresh, "new-topic", true)
        );
        let d = auto(&WakeFacts {
            topic: None,
            ..topics
        });
        assert_eq!((d.mode, d.cause), (WakeMode::Fresh, "no-topic"));
    }

    #[test]
    fn a_named_runtime_resumes_only_a_recorded_conversation() {
        let topic_match = WakeFacts {
            topic: Some("t1".into()),
            named: true,
            ..marked(PeerMarkers {
                topics: vec!["t1".into()],
                ..reaped()
            })
        };
        let d = decide_mode(ModeRequest::Auto, &topic_match);
        assert_eq!(
            (d.mode, d.cause, d.consume_idle_reaped),
            (WakeMode::Fresh, "no-recorded-conversation", true)
        );
        let mut recorded = topic_match.clone();
        recorded.markers.conversation = Some("3f2c1a5e-1111-4222-8333-444455556666".into());
        let d = decide_mode(ModeRequest::Auto, &recorded);
        assert_eq!((d.mode, d.cause), (WakeMode::Resume, "topic-match"));
        let human = WakeFacts {
            human_facing: true,
            topic: None,
            ..topic_match.clone()
        };
        assert_eq!(
            decide_mode(ModeRequest::Auto, &human).cause,
            "no-recorded-conversation"
        );
        // `attach` asks for a resume: left to fail loudly.
        assert_eq!(
            decide_mode(ModeRequest::Resume, &topic_match).mode,
            WakeMode::Resume
        );
        // A runtime whose conversation is the folder's resumes as before.
        let folder = WakeFacts {
            named: false,
            ..topic_match
        };
        assert_eq!(decide_mode(ModeRequest::Auto, &folder).cause, "topic-match");
    }

    #[test]
    fn idle_age_uses_the_newest_signal() {
        let s = SessionStatus {
            activity_ms: Some(5_000),
            attached_output_ms: Some(7_000),
            ..Default::default()
        };
        assert_eq!(idle_age_ms(10_000, &s, 1_000, Some(6_000)), 3_000);
        let s = SessionStatus::default();
        assert_eq!(idle_age_ms(10_000, &s, 1_000, None), 9_000);
    }

    /// A missing busy sign counts only when the probe before saw none either and the screen
    /// has drawn nothing for IDLE_SETTLE: a probe between two redraws of a turn, or between
    /// a tool call and its approval prompt, is no idle.
    #[test]
    fn idle_only_when_the_screen_settled_over_two_probes() {
        let now_ms = 100_000;
        let settle = IDLE_SETTLE.as_millis() as u64;
        let idle = SessionStatus {
            output_ms: Some(now_ms - settle),
            ..SessionStatus::default()
        };
        let busy = SessionStatus {
            busy: true,
            ..idle.clone()
        };
        assert!(settled_idle(Some(&idle), &idle, now_ms));
        assert!(
            settled_idle(Some(&idle), &SessionStatus::default(), now_ms),
            "no output at all"
        );
        // The probe before showed a turn: this one may be a gap in it.
        assert!(!settled_idle(Some(&busy), &idle, now_ms));
        assert!(!settled_idle(None, &idle, now_ms), "the first probe");
        assert!(!settled_idle(Some(&idle), &busy, now_ms));
        // Output just now: a redraw's gap, not an idle screen.
        let drawing = SessionStatus {
            output_ms: Some(now_ms - settle + 1),
            ..idle.clone()
        };
        assert!(!settled_idle(Some(&idle), &drawing, now_ms));
        // A clock behind the output's stamp counts as just drawn.
        let ahead = SessionStatus {
            output_ms: Some(now_ms + 5),
            ..idle
        };
        assert!(!settled_idle(Some(&ahead), &ahead, now_ms));
    }

    #[test]
    fn sleep_only_when_idle_quiet_and_alone() {
        let idle = Duration::from_secs(2);
        let s = SessionStatus::default();
        assert!(!should_sleep(2_000, idle, &s));
        assert!(should_sleep(2_001, idle, &s));
        assert!(!should_sleep(
            9_000,
            idle,
            &SessionStatus {
                busy: true,
                ..s.clone()
            }
        ));
        assert!(!should_sleep(
            9_000,
            idle,
            &SessionStatus { attached: 1, ..s }
        ));
    }

    #[test]
    fn backoff_doubles_caps_resets_and_parks() {
        let mut b = Backoff::default();
        let short = Duration::from_secs(1);
        let mut t = 0u64;
        let mut delays = vec![];
        for _ in 0..4 {
            t += 20_000; // deaths 20 s apart: never 5 within 60 s
            match b.on_death(t, short) {
                AfterDeath::RestartIn(d) => delays.push(d.as_secs()),
                AfterDeath::Park => panic!("parked too early"),
            }
        }
        assert_eq!(delays, vec![1, 2, 4, 8]);
        assert_eq!(
            b.on_death(t + 20_000, Duration::from_secs(61)),
            AfterDeath::RestartIn(BACKOFF_START),
            "a long run resets"
        );
        let mut b = Backoff::default();
        for i in 0..4 {
            assert!(matches!(
                b.on_death(i * 1000, short),
                AfterDeath::RestartIn(_)
            ));
        }
        assert_eq!(b.on_death(4_000, short), AfterDeath::Park);
        let mut capped = Backoff::default();
        let mut last = Duration::ZERO;
        for i in 0..10u64 {
            if let AfterDeath::RestartIn(d) = capped.on_death(i * 100_000, short) {
                last = d;
            }
        }
        assert_eq!(last, BACKOFF_CAP);
    }
}

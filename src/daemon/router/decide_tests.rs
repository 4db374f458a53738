//! Unit tests of the router's decisions, one per rule of spec 03 §1 step 9 and spec 05 §2–§4,
//! §8, on fake time (a hand-made [`Now`]) and with no processes, in the style of watchexec's
//! `job/test.rs`. The fresh/resume rules themselves are tested in `daemon::lifecycle`.

use std::time::{Duration, Instant};

use super::*;
use crate::daemon::lifecycle::{AfterDeath, Backoff, ModeRequest};
use crate::daemon::router::sess_state::SessState;

const AGENT: RuntimeKind = RuntimeKind::Agent;
const ROUTER: RuntimeKind = RuntimeKind::Router;

fn asleep() -> Presence {
    Presence::Asleep {
        stopped: false,
        resumable: false,
    }
}

fn stopped() -> Presence {
    Presence::Asleep {
        stopped: true,
        resumable: false,
    }
}

fn idle_reaped() -> Presence {
    Presence::Asleep {
        stopped: false,
        resumable: true,
    }
}

fn session(live: Live) -> Presence {
    Presence::Session(live)
}

fn wake(mode: ModeRequest, launched: bool) -> Head {
    Head::Wake { mode, launched }
}

/// A fixed start of fake time.
fn t0() -> Now {
    Now {
        at: Instant::now(),
        ms: 1_700_000_000_000,
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn exit(kind: RuntimeKind, cause: Cause) -> ExitFacts {
    ExitFacts {
        kind,
        cause,
        boot_failed: false,
        inflight: false,
        shutting_down: false,
        stopped: false,
        new_eager: false,
        clean_exit: false,
        had_conversation: false,
    }
}

/// Every kind of queue head: a message to an agent or a router peer, a compaction, and a
/// wake of each mode, before and after its launch.
fn every_head() -> Vec<Head> {
    let modes = [
        ModeRequest::Auto,
        ModeRequest::Fresh,
        ModeRequest::Resume,
        ModeRequest::Restart,
    ];
    let wakes = modes
        .into_iter()
        .flat_map(|mode| [wake(mode, false), wake(mode, true)]);
    [Head::Send(AGENT), Head::Send(ROUTER), Head::Compact]
        .into_iter()
        .chain(wakes)
        .collect()
}

/// Check [`head_step`] against rows of (the queue's head, the endpoint's presence, the step
/// the router takes); a failure names its row.
fn assert_steps(rows: &[(Head, Presence, HeadStep)]) {
    for &(head, presence, want) in rows {
        assert_eq!(head_step(head, presence), want, "{head:?} on {presence:?}");
    }
}

// ---- spec 03 §1 step 9: endpoint state ----------------------------------------------------

/// Spec 03 §1 step 9 "live → deliver into the session".
#[test]
fn live_endpoint_gets_the_message_delivered() {
    assert_steps(&[
        (Head::Send(AGENT), session(Live::Ready), HeadStep::Deliver),
        (Head::Send(ROUTER), session(Live::Ready), HeadStep::Deliver),
    ]);
}

/// Spec 03 §1 step 9 "asleep (agent runtime, not stopped) → wake with this envelope as the
/// first message"; the fresh/resume rules pick the mode (`Auto`).
#[test]
fn asleep_agent_wakes_with_the_message_as_first() {
    use HeadStep::Launch;
    assert_steps(&[
        (Head::Send(AGENT), asleep(), Launch(ModeRequest::Auto)),
        (Head::Send(AGENT), idle_reaped(), Launch(ModeRequest::Auto)),
    ]);
}

/// Spec 03 §1 step 9 "stopped → refuse". For a router peer the pump refuses; for an agent
/// the launch it asks for refuses with the same `stopped` refusal (`Router::launch`, before
/// the crash-loop guard), so `head_step` asks for the launch.
#[test]
fn stopped_endpoint_is_refused_not_woken() {
    use HeadStep::{Launch, RefuseStopped};
    assert_steps(&[
        (Head::Send(ROUTER), stopped(), RefuseStopped),
        // The launch refuses a stopped agent.
        (Head::Send(AGENT), stopped(), Launch(ModeRequest::Auto)),
    ]);
}

/// Issue 12: a parked always-on peer has no restart coming, so a message to it is refused at
/// once with the park reason instead of waiting out the revive grace. Other requests go as
/// for any asleep peer; a stopped peer reads as stopped, not parked (the pump checks first).
#[test]
fn parked_always_on_peer_refuses_a_message_at_once() {
    assert_eq!(
        head_step(Head::Send(ROUTER), Presence::Parked),
        HeadStep::RefuseParked
    );
    let wake = Head::Wake {
        mode: ModeRequest::Fresh,
        launched: false,
    };
    assert_eq!(head_step(wake, Presence::Parked), head_step(wake, asleep()));
    assert_eq!(
        head_step(Head::Compact, Presence::Parked),
        HeadStep::NothingToCompact
    );
}

/// Spec 03 §1 step 9 "always-on peer not running (restarting) → retry for up to 4 s, then
/// `offline and did not come back within 4000ms`".
#[test]
fn always_on_peer_not_running_is_held_for_the_revive_grace() {
    assert_eq!(
        head_step(Head::Send(ROUTER), asleep()),
        HeadStep::HoldForRevive
    );
    let grace = Duration::from_millis(4000);
    let now = t0();
    let deadline = revive_deadline(now.at, grace);
    assert_eq!(deadline, now.plus(grace).at);
    // At the deadline: still the head and nothing can take it → give up.
    assert!(revive_gives_up(true, false));
    // The peer came back (ready session) or the message already went: nothing to do.
    assert!(!revive_gives_up(true, true));
    assert!(!revive_gives_up(false, false));
}

/// Spec 03 §1 step 9: a router session that could not take the message (its process died
/// first) keeps it for the revive grace instead of failing it.
#[test]
fn router_peer_that_could_not_take_a_message_holds_it() {
    assert_eq!(
        delivery_failure(ROUTER, false, false),
        DeliveryFailure::HoldForRevive
    );
    assert_eq!(
        delivery_failure(ROUTER, false, true),
        DeliveryFailure::HoldForRevive,
        "a stopped router peer is refused by the pump once the message is back at the head"
    );
    let died = after_exit(&ExitFacts {
        inflight: true,
        ..exit(ROUTER, Cause::ChildExit)
    });
    assert_eq!(died.inflight, Inflight::Requeue);
    assert!(died.pump);
}

/// Spec 03 §1 step 9 "wake failed → `offline and wake failed: <reason>`" and "the promise":
/// a live session that did not confirm is `listed live but did not accept`; a message
/// stopped while it waited says so.
#[test]
fn failed_delivery_is_reported_by_its_cause() {
    use DeliveryFailure::{NotAccepted, Stopped, WakeFailed};
    for (woke, stopped, want) in [
        (true, false, WakeFailed),
        (false, false, NotAccepted),
        (true, true, Stopped),
        (false, true, Stopped),
    ] {
        let got = delivery_failure(AGENT, woke, stopped);
        assert_eq!(got, want, "woke {woke}, stopped {stopped}");
    }
}

/// Spec 03 §1 step 9 "wake failed", spec 05 §2 "failures at any step are reported to the
/// waiting sender": an agent that ends with a message in flight fails it at once.
#[test]
fn agent_ending_with_a_message_in_flight_fails_it() {
    let plan = after_exit(&ExitFacts {
        inflight: true,
        boot_failed: true,
        ..exit(AGENT, Cause::KilledByDaemon)
    });
    assert_eq!(plan.inflight, Inflight::Fail);
    let plan = after_exit(&exit(AGENT, Cause::IdleSleep));
    assert_eq!(plan.inflight, Inflight::None);
}

// ---- spec 05 §2: wake ---------------------------------------------------------------------

/// Spec 05 §2 step 3 "one wake at a time per identity": while a session boots, the next
/// message waits; once it is ready, it is delivered live (and reports `woke: false`).
#[test]
fn one_wake_at_a_time_then_deliver_live() {
    use HeadStep::{Deliver, Wait};
    assert_steps(&[
        (Head::Send(AGENT), session(Live::Starting), Wait),
        (
            wake(ModeRequest::Auto, false),
            session(Live::Starting),
            Wait,
        ),
        (Head::Send(AGENT), session(Live::Ready), Deliver),
    ]);
}

/// Spec 05 §2 step 4 "already live → return live, not woken".
#[test]
fn wake_of_a_live_peer_answers_not_woken() {
    use ModeRequest::{Auto, Resume};
    assert_steps(&[
        (
            wake(Auto, false),
            session(Live::Ready),
            HeadStep::AnswerLive,
        ),
        (
            wake(Resume, false),
            session(Live::Ready),
            HeadStep::AnswerLive,
        ),
    ]);
}

/// Spec 05 §2 step 6.1 and §5 `new`/`iapeer <runtime>`: an explicit fresh wake replaces a
/// running session, then launches, then answers once the new session is ready. `restart`
/// (issue 30 item 4) does the same, then launches with its own rule (the recorded
/// conversation, [`crate::daemon::lifecycle::decide_mode`]).
#[test]
fn explicit_fresh_wake_and_restart_replace_the_running_session() {
    use HeadStep::{AnswerLive, Launch, Replace, Wait};
    for mode in [ModeRequest::Fresh, ModeRequest::Restart] {
        assert_steps(&[
            (wake(mode, false), session(Live::Ready), Replace),
            (wake(mode, false), session(Live::Starting), Replace),
            // The old session is ending: wait for it to go.
            (wake(mode, true), session(Live::Ending), Wait),
            (wake(mode, true), asleep(), Launch(mode)),
            (wake(mode, false), asleep(), Launch(mode)),
            (wake(mode, true), session(Live::Starting), Wait),
            (wake(mode, true), session(Live::Ready), AnswerLive),
        ]);
    }
}

/// Spec 05 §2 step 6.2 (`attach` → resume) and §5 `compact` ("a peer asleep after an idle
/// sleep is resumed first"; "nothing to compact" otherwise).
#[test]
fn resume_requests_and_compact_of_an_asleep_peer() {
    use HeadStep::{Launch, NothingToCompact, RefuseStopped, StartCompact, Wait};
    use ModeRequest::Resume;
    assert_steps(&[
        (wake(Resume, false), idle_reaped(), Launch(Resume)),
        (Head::Compact, idle_reaped(), Launch(Resume)),
        (Head::Compact, asleep(), NothingToCompact),
        (Head::Compact, stopped(), RefuseStopped),
        (Head::Compact, session(Live::Ready), StartCompact),
        (Head::Compact, session(Live::Starting), Wait),
    ]);
}

/// Spec 05 §2: nothing is handed to a session that was told to end (stop, idle sleep,
/// replace); the queue waits for its exit and then wakes a new one.
#[test]
fn ending_session_takes_nothing() {
    for head in every_head() {
        assert_eq!(head_step(head, session(Live::Ending)), HeadStep::Wait);
    }
    assert_eq!(Live::of(true, true), Live::Ending);
    assert_eq!(Live::of(false, true), Live::Ending);
    assert_eq!(Live::of(true, false), Live::Ready);
    assert_eq!(Live::of(false, false), Live::Starting);
}

/// Spec 05 §2 step 6.6 and §3: after an idle sleep an agent resumes only for a message on a
/// topic of its previous conversation; no topic or a new one starts fresh. (Every rule of
/// step 6 in order: `daemon::lifecycle` tests `fresh_or_resume_rules_in_order`.)
#[test]
fn idle_reaped_agent_resumes_only_on_a_known_topic() {
    use crate::daemon::lifecycle::{decide_mode, PeerMarkers, WakeFacts};
    use crate::runtime::WakeMode;
    let facts = |topic: Option<&str>| WakeFacts {
        markers: PeerMarkers {
            idle_reaped: true,
            topics: vec!["deploy".into(), "billing".into()],
            ..PeerMarkers::default()
        },
        topic: topic.map(str::to_string),
        ..WakeFacts::default()
    };
    let mode = |topic| decide_mode(ModeRequest::Auto, &facts(topic)).mode;
    assert_eq!(mode(Some("billing")), WakeMode::Resume);
    assert_eq!(mode(Some("lunch")), WakeMode::Fresh);
    assert_eq!(mode(None), WakeMode::Fresh);
    let mut not_reaped = facts(Some("billing"));
    not_reaped.markers.idle_reaped = false;
    assert_eq!(
        decide_mode(ModeRequest::Auto, &not_reaped).mode,
        WakeMode::Fresh,
        "a crash or self-close never resumes"
    );
}

/// Spec 05 §2 step 5, the crash-loop guard: 3 deaths within 300 s refuse an agent's wake;
/// older deaths drop out of the window; router peers have back-off instead.
#[test]
fn crash_loop_guard_three_deaths_in_300s() {
    let (max, window) = (3, secs(300));
    let now = t0().plus(secs(1000));
    let at = |ago: u64| now.ms - ago * 1000;
    assert!(crash_looping(
        AGENT,
        &[at(200), at(100), at(1)],
        now,
        max,
        window
    ));
    assert!(!crash_looping(AGENT, &[at(100), at(1)], now, max, window));
    assert!(
        !crash_looping(AGENT, &[at(301), at(100), at(1)], now, max, window),
        "a death older than the window does not count"
    );
    assert!(
        crash_looping(AGENT, &[at(300), at(100), at(1)], now, max, window),
        "the window's edge counts"
    );
    assert!(!crash_looping(
        ROUTER,
        &[at(3), at(2), at(1)],
        now,
        max,
        window
    ));
    assert!(
        !crash_looping(AGENT, &[at(3), at(2), at(1)], now, 0, window),
        "max 0 turns the guard off"
    );
}

/// Spec 05 §2 "a session that died during the wake counts as a death" (and §4 "dead
/// session: record a death"); ends the daemon or the operator asked for do not count.
#[test]
fn which_ends_count_as_deaths() {
    assert!(counts_as_death(Cause::ChildExit, false));
    assert!(counts_as_death(Cause::BootTimeout, false));
    assert!(counts_as_death(Cause::KilledByDaemon, true));
    assert!(!counts_as_death(Cause::KilledByDaemon, false));
    for cause in [
        Cause::IdleSleep,
        Cause::Stop,
        Cause::Shutdown,
        Cause::Replaced,
        Cause::Removed,
    ] {
        assert!(!counts_as_death(cause, false), "{cause:?}");
    }
    // A human who refused a boot's unknown dialog did not see a crash.
    assert!(!counts_as_death(Cause::DialogRefused, true));
    assert!(after_exit(&exit(AGENT, Cause::BootTimeout)).record_death);
    assert!(!after_exit(&exit(AGENT, Cause::IdleSleep)).record_death);
}

/// Issue 32 item 2: an agent that dies holding a conversation is resumed on its topic (its
/// conversation made resume-eligible), unlike spec 05 §2 rule 5's "crash → fresh"; a
/// self-close, a session that held none, an end on purpose, a stop or a shutdown are not.
#[test]
fn an_agent_that_died_holding_a_conversation_resumes_it() {
    // Whether an agent that held a conversation and ended by `cause`, its facts then changed
    // by `edit`, is resume-eligible.
    let died = |cause, edit: fn(&mut ExitFacts)| {
        let mut facts = ExitFacts {
            had_conversation: true,
            ..exit(AGENT, cause)
        };
        edit(&mut facts);
        after_exit(&facts).resume_eligible
    };
    assert!(died(Cause::ChildExit, |_| ()));
    assert!(
        died(Cause::KilledByDaemon, |f| f.boot_failed = true),
        "a resume that failed at boot stays resumable (the crash-loop guard ends it)"
    );
    assert!(died(Cause::BootTimeout, |_| ()));
    assert!(!died(Cause::ChildExit, |f| f.clean_exit = true));
    assert!(!died(Cause::ChildExit, |f| f.had_conversation = false));
    assert!(!died(Cause::ChildExit, |f| f.stopped = true));
    assert!(!died(Cause::ChildExit, |f| f.shutting_down = true));
    for cause in [
        Cause::Stop,
        Cause::IdleSleep,
        Cause::Replaced,
        Cause::Removed,
    ] {
        assert!(!died(cause, |_| ()), "{cause:?}");
    }
    assert!(
        !after_exit(&ExitFacts {
            had_conversation: true,
            ..exit(ROUTER, Cause::ChildExit)
        })
        .resume_eligible
    );
}

/// Spec 05 §2 step 8 (boot deadline 240 s, enforced in the session thread, see
/// `session::boot`): a failed boot fails a waiting wake job now; a message riding the wake
/// fails when the session answers its delivery.
#[test]
fn failed_boot_fails_a_waiting_wake_now() {
    assert!(boot_failure_fails_head(Some(wake(ModeRequest::Auto, true))));
    assert!(!boot_failure_fails_head(Some(Head::Send(AGENT))));
    assert!(!boot_failure_fails_head(Some(Head::Compact)));
    assert!(!boot_failure_fails_head(None));
}

// ---- spec 05 §4: the supervise tick -------------------------------------------------------

fn status() -> SessionStatus {
    SessionStatus {
        activity_ms: None,
        busy: false,
        attached: 0,
        attached_output_ms: None,
        output_ms: None,
        api_error: None,
    }
}

/// [`idle_sleep`] of `f` at `at` with spec 05 §4's idle limit, an hour: `Some(idle age, ms)`
/// once it is past.
fn sleeps(f: &IdleFacts, at: Now) -> Option<u64> {
    idle_sleep(f, at, secs(3600))
}

/// The facts of a session probed as `status`, the probe before it showing the same.
fn idle_facts(status: &SessionStatus, woke_at_ms: u64) -> IdleFacts<'_> {
    IdleFacts {
        status,
        before: Some(status),
        woke_at_ms,
        last_delivery_ms: None,
        ending: false,
        queue_busy: false,
        sending: false,
    }
}

/// Spec 05 §4 "idle longer than 3600 s and not mid-turn and no human attached → end it and
/// set `.idle-reaped`", on fake time.
#[test]
fn idle_sleep_after_an_hour() {
    let woke = t0();
    let st = status();
    let f = idle_facts(&st, woke.ms);
    assert_eq!(sleeps(&f, woke.plus(secs(3599))), None);
    assert_eq!(sleeps(&f, woke.plus(secs(3600))), None);
    assert_eq!(sleeps(&f, woke.plus(secs(3601))), Some(3_601_000));
}

/// A probe that shows no busy sign past the idle limit is no idle when the probe before it
/// showed a turn (it may fall between two redraws, or between a tool call and its approval
/// prompt), nor when the screen drew something within IDLE_SETTLE; the next settled probe
/// sleeps it, at the same age it would have had.
#[test]
fn idle_sleep_waits_for_a_settled_screen() {
    use crate::daemon::lifecycle::IDLE_SETTLE;
    let woke = t0();
    let at = woke.plus(secs(3601));
    let st = status();
    let busy = SessionStatus {
        busy: true,
        ..status()
    };
    let after_a_turn = IdleFacts {
        before: Some(&busy),
        ..idle_facts(&st, woke.ms)
    };
    assert_eq!(sleeps(&after_a_turn, at), None);
    let first = IdleFacts {
        before: None,
        ..idle_facts(&st, woke.ms)
    };
    assert_eq!(sleeps(&first, at), None);
    let drawn = SessionStatus {
        output_ms: Some(at.ms - IDLE_SETTLE.as_millis() as u64 + 1),
        ..status()
    };
    assert_eq!(sleeps(&idle_facts(&drawn, woke.ms), at), None);
    assert_eq!(sleeps(&idle_facts(&st, woke.ms), at), Some(3_601_000));
}

/// Spec 05 §4 idle age = now − max(activity, last delivery, wokeAt, attached output).
#[test]
fn idle_age_counts_from_the_newest_activity() {
    let woke = t0();
    let later = woke.plus(secs(3601));
    let st = SessionStatus {
        activity_ms: Some(woke.plus(secs(10)).ms),
        ..status()
    };
    assert_eq!(sleeps(&idle_facts(&st, woke.ms), later), None);
    let st = status();
    let f = IdleFacts {
        last_delivery_ms: Some(woke.plus(secs(10)).ms),
        ..idle_facts(&st, woke.ms)
    };
    assert_eq!(sleeps(&f, later), None);
    let st = SessionStatus {
        attached_output_ms: Some(woke.plus(secs(10)).ms),
        ..status()
    };
    assert_eq!(sleeps(&idle_facts(&st, woke.ms), later), None);
}

fn wind_down_facts(status: &SessionStatus, woke_at_ms: u64, armed: bool) -> WindDownFacts<'_> {
    WindDownFacts {
        status,
        woke_at_ms,
        last_delivery_ms: None,
        armed,
        ending: false,
    }
}

/// [`ephemeral_wind_down`] of `f` at `at` with spec 05 §4's limits: an armed worker quiet
/// for 20 s, an unarmed one idle for 600 s.
fn wind_down(f: &WindDownFacts, at: Now) -> Option<WindDown> {
    ephemeral_wind_down(f, at, secs(20), secs(600))
}

/// Spec 05 §4 "ephemeral and armed and quiet for 20 s → end it", where quiet means neither
/// model activity nor screen output.
#[test]
fn an_armed_ephemeral_worker_ends_after_20_s_of_quiet() {
    let woke = t0();
    let st = SessionStatus {
        activity_ms: Some(woke.plus(secs(30)).ms),
        output_ms: Some(woke.plus(secs(40)).ms),
        ..status()
    };
    let f = wind_down_facts(&st, woke.ms, true);
    assert_eq!(wind_down(&f, woke.plus(secs(59))), None);
    assert_eq!(
        wind_down(&f, woke.plus(secs(60))),
        Some(WindDown::ArmedQuiet(20_000))
    );
    // Output after the model's last activity keeps it alive (a tool still printing).
    let printing = SessionStatus {
        output_ms: Some(woke.plus(secs(55)).ms),
        ..st.clone()
    };
    let f = wind_down_facts(&printing, woke.ms, true);
    assert_eq!(wind_down(&f, woke.plus(secs(60))), None);
}

/// Spec 05 §4 "ephemeral and older than 600 s → end it" for a worker that never replied,
/// on its idle age; quiet alone does not end an unarmed worker.
#[test]
fn an_unarmed_ephemeral_worker_ends_after_600_s_idle() {
    let woke = t0();
    let st = status();
    let f = wind_down_facts(&st, woke.ms, false);
    assert_eq!(wind_down(&f, woke.plus(secs(60))), None);
    assert_eq!(wind_down(&f, woke.plus(secs(600))), None);
    assert_eq!(
        wind_down(&f, woke.plus(secs(601))),
        Some(WindDown::UnarmedIdle(601_000))
    );
}

/// A worker mid-turn, watched by an attached human, or already ending is never wound down.
#[test]
fn wind_down_spares_busy_attached_and_ending_workers() {
    let woke = t0();
    let late = woke.plus(secs(3600));
    for st in [
        SessionStatus {
            busy: true,
            ..status()
        },
        SessionStatus {
            attached: 1,
            ..status()
        },
    ] {
        for armed in [true, false] {
            let f = wind_down_facts(&st, woke.ms, armed);
            assert_eq!(wind_down(&f, late), None, "{st:?}");
        }
    }
    let st = status();
    let f = WindDownFacts {
        ending: true,
        ..wind_down_facts(&st, woke.ms, true)
    };
    assert_eq!(wind_down(&f, late), None);
}

/// Spec 05 §4: never put to sleep mid-turn, with a human attached, while work is queued
/// for it, or when it is already ending.
#[test]
fn idle_sleep_spares_busy_attached_queued_and_ending_sessions() {
    let woke = t0();
    let later = woke.plus(secs(7200));
    let busy = SessionStatus {
        busy: true,
        ..status()
    };
    assert_eq!(sleeps(&idle_facts(&busy, woke.ms), later), None);
    let attached = SessionStatus {
        attached: 1,
        ..status()
    };
    assert_eq!(sleeps(&idle_facts(&attached, woke.ms), later), None);
    let st = status();
    // Spared: the facts of an idle session, changed by `edit`.
    let spared = |edit: fn(&mut IdleFacts), why: &str| {
        let mut f = idle_facts(&st, woke.ms);
        edit(&mut f);
        assert_eq!(sleeps(&f, later), None, "{why}");
    };
    spared(|f| f.queue_busy = true, "queued");
    // Its agent is in a `send_to_peer` call (the peer it sends to still waking): mid-turn,
    // whatever its screen showed when it was probed.
    spared(|f| f.sending = true, "sending");
    spared(|f| f.ending = true, "ending");
}

/// Spec 05 §4 "live session with the stop flag → end it"; ready agents are probed for the
/// idle decision; router peers are never slept.
#[test]
fn tick_ends_stopped_sessions_and_probes_ready_agents() {
    assert_eq!(tick_step(AGENT, Live::Ready, true), TickStep::Stop);
    assert_eq!(tick_step(AGENT, Live::Starting, true), TickStep::Stop);
    assert_eq!(tick_step(ROUTER, Live::Ready, true), TickStep::Stop);
    assert_eq!(tick_step(AGENT, Live::Ending, true), TickStep::Skip);
    assert_eq!(tick_step(AGENT, Live::Ready, false), TickStep::Probe);
    assert_eq!(tick_step(AGENT, Live::Starting, false), TickStep::Skip);
    assert_eq!(tick_step(ROUTER, Live::Ready, false), TickStep::Skip);
}

/// Spec 05 §4 "dead session: if `.new-eager` → bring it up fresh now; else leave it
/// asleep"; nothing is brought up or pumped during shutdown (§9).
#[test]
fn dead_session_with_new_eager_comes_back_fresh() {
    let plan = after_exit(&ExitFacts {
        new_eager: true,
        ..exit(AGENT, Cause::Replaced)
    });
    assert!(plan.new_eager && plan.pump);
    let plan = after_exit(&exit(AGENT, Cause::ChildExit));
    assert!(!plan.new_eager && plan.pump && !plan.back_off);
    let plan = after_exit(&ExitFacts {
        new_eager: true,
        shutting_down: true,
        ..exit(AGENT, Cause::Shutdown)
    });
    assert!(!plan.new_eager && !plan.pump);
}

// ---- spec 05 §8: always-on peers ----------------------------------------------------------

/// Spec 05 §8 "if one exits, restart it with back-off"; not when it was stopped, replaced
/// (`new` restarts it itself), removed, or the daemon is shutting down.
#[test]
fn always_on_exit_backs_off_unless_ended_on_purpose() {
    let stopped = ExitFacts {
        stopped: true,
        ..exit(ROUTER, Cause::Stop)
    };
    let shutting_down = ExitFacts {
        shutting_down: true,
        ..exit(ROUTER, Cause::Shutdown)
    };
    for (facts, backs_off) in [
        (exit(ROUTER, Cause::ChildExit), true),
        (exit(ROUTER, Cause::KilledByDaemon), true),
        // The stop flag, not the cause, is what spares a stopped peer.
        (exit(ROUTER, Cause::Stop), true),
        (stopped, false),
        (exit(ROUTER, Cause::Replaced), false),
        (exit(ROUTER, Cause::Removed), false),
        (shutting_down, false),
        (exit(AGENT, Cause::ChildExit), false),
    ] {
        assert_eq!(after_exit(&facts).back_off, backs_off, "{facts:?}");
    }
}

/// Spec 05 §5 `new` on an always-on peer: the replaced session is started again as soon as
/// it is gone (if `new` asked for it).
#[test]
fn always_on_replaced_by_new_restarts_on_exit() {
    assert!(after_exit(&exit(ROUTER, Cause::Replaced)).restart_if_asked);
    assert!(!after_exit(&exit(ROUTER, Cause::ChildExit)).restart_if_asked);
    assert!(!after_exit(&exit(AGENT, Cause::Replaced)).restart_if_asked);
}

/// Spec 05 §8 back-off 1 s, 2 s, 4 s … capped at 60 s, on fake time, as the router feeds
/// it (a death after each short run).
#[test]
fn always_on_backoff_doubles_to_a_cap() {
    let mut b = Backoff::default();
    let mut now = t0();
    let mut delays = Vec::new();
    for _ in 0..8 {
        // Deaths 61 s apart never reach the park threshold.
        now = now.plus(secs(61));
        match b.on_death(now.ms, secs(1)) {
            AfterDeath::RestartIn(d) => delays.push(d.as_secs()),
            AfterDeath::Park => panic!("parked"),
        }
    }
    assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
}

/// Spec 05 §8 "a run that lasted ≥ 60 s resets the back-off".
#[test]
fn always_on_long_run_resets_backoff() {
    let mut b = Backoff::default();
    let now = t0();
    assert_eq!(b.on_death(now.ms, secs(1)), AfterDeath::RestartIn(secs(1)));
    let now = now.plus(secs(2));
    assert_eq!(b.on_death(now.ms, secs(1)), AfterDeath::RestartIn(secs(2)));
    let now = now.plus(secs(120));
    assert_eq!(b.on_death(now.ms, secs(60)), AfterDeath::RestartIn(secs(1)));
}

/// Spec 05 §8 "5 deaths within 60 s park it … until `start` or `new`": parked peers are
/// not started; `start`/`new` reset the history.
#[test]
fn always_on_five_deaths_in_a_minute_park() {
    let mut b = Backoff::default();
    let mut now = t0();
    for _ in 0..4 {
        assert!(matches!(
            b.on_death(now.ms, Duration::ZERO),
            AfterDeath::RestartIn(_)
        ));
        now = now.plus(secs(10));
    }
    assert_eq!(b.on_death(now.ms, Duration::ZERO), AfterDeath::Park);
    assert!(!may_start_always_on(false, false, false, true));
    b.reset();
    assert_eq!(
        b.on_death(now.ms, Duration::ZERO),
        AfterDeath::RestartIn(secs(1))
    );
}

/// Spec 05 §8 "started when the daemon starts (unless stopped)": only an always-on peer
/// that is not running, not stopped, not parked, and not during shutdown.
#[test]
fn always_on_start_conditions() {
    assert!(may_start_always_on(false, false, false, false));
    assert!(!may_start_always_on(true, false, false, false));
    assert!(!may_start_always_on(false, true, false, false));
    assert!(!may_start_always_on(false, false, true, false));
    assert!(!may_start_always_on(false, false, false, true));
}

fn launch_result(purpose: LaunchFor, started: bool, ending: Option<Cause>) -> LaunchedFacts {
    LaunchedFacts {
        purpose,
        started,
        ending,
        head_waits: ending.is_none(),
    }
}

/// Spec 05 §2 steps 2–4: while a launcher thread starts an identity's session, its queue
/// head waits (one wake at a time per identity), whatever the head is.
#[test]
fn launching_identity_holds_its_queue() {
    for head in every_head() {
        assert_eq!(head_step(head, Presence::Launching), HeadStep::Wait);
    }
}

/// Spec 05 §2 step 8: a launch that started its session makes it booting; an always-on
/// start likewise.
#[test]
fn launched_ok_is_booting() {
    assert_eq!(
        launched(&launch_result(LaunchFor::Head, true, None)),
        LaunchedStep::Booting
    );
    assert_eq!(
        launched(&launch_result(LaunchFor::AlwaysOn, true, None)),
        LaunchedStep::Booting
    );
}

/// Spec 05 §2 "failures at any step are reported": a launch that did not start fails the
/// head that asked for it with the launch's own refusal; an always-on start that failed
/// backs off like a death (spec 05 §8).
#[test]
fn launch_failed_fails_the_head_or_backs_off() {
    assert_eq!(
        launched(&launch_result(LaunchFor::Head, false, None)),
        LaunchedStep::FailHead { stopped: false }
    );
    assert_eq!(
        launched(&launch_result(LaunchFor::AlwaysOn, false, None)),
        LaunchedStep::StartFailed { back_off: true }
    );
    // The refusal is the one a launch on the router thread gave.
    let r = crate::daemon::router::launch::offline("alice", "cannot start /x: No such file");
    assert_eq!(r.code, crate::protocol::Code::Offline);
    assert_eq!(
        r.error,
        "peer \"alice\" offline and wake failed: cannot start /x: No such file"
    );
}

/// Spec 05 §5 `stop` while the session is launching: a started session ends at once with
/// cause `stop` (the message riding the wake then fails "stopped", as for a booting
/// session); a launch that failed fails that message "stopped" if it still waits, and
/// nothing if `stop` already answered the head.
#[test]
fn stop_while_launching() {
    assert_eq!(
        launched(&launch_result(LaunchFor::Head, true, Some(Cause::Stop))),
        LaunchedStep::EndAtOnce(Cause::Stop)
    );
    let failed = |head_waits| LaunchedFacts {
        purpose: LaunchFor::Head,
        started: false,
        ending: Some(Cause::Stop),
        head_waits,
    };
    assert_eq!(
        launched(&failed(true)),
        LaunchedStep::FailHead { stopped: true }
    );
    assert_eq!(launched(&failed(false)), LaunchedStep::Gone);
    // An always-on peer stopped (or forgotten) while launching does not back off.
    assert_eq!(
        launched(&launch_result(
            LaunchFor::AlwaysOn,
            false,
            Some(Cause::Stop)
        )),
        LaunchedStep::StartFailed { back_off: false }
    );
    // `new`/self-fresh and forget end it with their own cause.
    assert_eq!(
        launched(&launch_result(LaunchFor::Head, true, Some(Cause::Replaced))),
        LaunchedStep::EndAtOnce(Cause::Replaced)
    );
    assert_eq!(
        launched(&launch_result(
            LaunchFor::AlwaysOn,
            true,
            Some(Cause::Removed)
        )),
        LaunchedStep::EndAtOnce(Cause::Removed)
    );
}

/// Shutdown while launching: the launch's session ends at once with cause `shutdown`
/// (shutdown's cause replaces an earlier one), and a failed launch answers nobody (shutdown
/// already failed every queued job).
#[test]
fn shutdown_while_launching() {
    let mut state = SessState::Booting;
    state.end(Cause::Stop);
    state.end_now(Cause::Shutdown);
    let ending = state.ending_cause();
    assert_eq!(ending, Some(Cause::Shutdown));
    assert_eq!(
        launched(&LaunchedFacts {
            purpose: LaunchFor::Head,
            started: true,
            ending,
            head_waits: false,
        }),
        LaunchedStep::EndAtOnce(Cause::Shutdown)
    );
    assert_eq!(
        launched(&LaunchedFacts {
            purpose: LaunchFor::Head,
            started: false,
            ending,
            head_waits: false,
        }),
        LaunchedStep::Gone
    );
    assert_eq!(
        launched(&LaunchedFacts {
            purpose: LaunchFor::AlwaysOn,
            started: false,
            ending,
            head_waits: false,
        }),
        LaunchedStep::StartFailed { back_off: false }
    );
}

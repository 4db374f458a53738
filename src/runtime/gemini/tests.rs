//! The gemini adapter's rules on Gemini CLI 0.61.0's recorded screens and records
//! (`tests/fixtures/gemini-cli-0.61.0/`).

use super::*;
use crate::launch_env::LaunchEnv;
use crate::paths::Paths;
use crate::runtime::Acceptance;

/// A file of the fixture folder.
fn fixture(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/tests/fixtures/gemini-cli-0.61.0/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// The screen of recorded step `step` of the pty session `session` (`first-run`,
/// `preconfigured`, `resume`): its raw log up to the step's offset on a session-sized screen.
fn step_screen(session: &str, step: &str) -> Screen {
    crate::testkit::recorded_step(
        "gemini-cli-0.61.0",
        session,
        step,
        crate::term::SESSION_ROWS,
        crate::term::SESSION_COLS,
    )
}

fn gemini() -> Gemini {
    Gemini::with_program("/bin/gemini".into())
}

fn label(step: BootStep) -> String {
    match step {
        BootStep::Key { label, .. } => label,
        BootStep::Clear { label, .. } => format!("clear: {label}"),
        BootStep::Ready => "ready".into(),
        BootStep::Wait => "wait".into(),
        BootStep::Fail(why) => format!("fail: {why}"),
    }
}

/// The boot dialogs of a first run are answered with Enter, each on its recorded screen, and
/// the ready screens are ready; a busy or drafted composer is not a ready screen.
#[test]
fn fixture_boot_dialogs_are_answered_and_the_ready_screens_are_ready() {
    let g = gemini();
    for (session, step, want) in [
        ("first-run", "01-trust-dialog", "trust (Enter)"),
        (
            "first-run",
            "02-auth-dialog",
            "auth: Gemini API key (Enter)",
        ),
        ("first-run", "03-api-key-dialog", "API key (Enter)"),
        ("first-run", "04-ready", "ready"),
        ("first-run", "11-queued-ran-ready", "ready"),
        ("first-run", "14-tool-called", "ready"),
        ("preconfigured", "17-preconfigured-ready", "ready"),
        ("resume", "15-resumed-ready", "ready"),
        ("first-run", "05-draft", "wait"),
    ] {
        assert_eq!(
            label(g.boot_step(&step_screen(session, step))),
            want,
            "{step}"
        );
    }
}

/// Without a key in the environment the auth choice cannot be answered: the boot fails and
/// says what to do.
#[test]
fn the_auth_choice_without_a_key_fails_the_boot() {
    let rows: Vec<String> = step_screen("first-run", "02-auth-dialog")
        .rows()
        .iter()
        .filter(|r| !r.contains("Existing API key detected"))
        .cloned()
        .collect();
    assert!(label(boot_step_for(&rows)).contains("GEMINI_API_KEY"));
}

/// Busy is the spinner row's `esc to cancel` (`08-busy`, `21-busy-before-esc`), not the
/// ready screens.
#[test]
fn fixture_busy_is_the_spinner_row() {
    let g = gemini();
    assert!(g.is_busy(&step_screen("first-run", "08-busy")));
    assert!(g.is_busy(&step_screen("preconfigured", "21-busy-before-esc")));
    for (session, step) in [
        ("first-run", "04-ready"),
        ("first-run", "14-tool-called"),
        ("preconfigured", "22-after-esc"),
    ] {
        assert!(!g.is_busy(&step_screen(session, step)), "{step}");
    }
}

/// The composer: empty at the placeholder, a typed draft, a 4-line paste drawn in full, an
/// 8-line paste as its placeholder, a paste left there by an Enter that did not submit; an
/// open tool confirmation counts as a draft.
#[test]
fn fixture_the_composer_holds_drafts_and_pastes() {
    let g = gemini();
    let content = |session: &str, step: &str| g.composer_content(&step_screen(session, step));
    assert_eq!(content("first-run", "04-ready"), None);
    assert_eq!(content("first-run", "08-busy"), None);
    assert_eq!(content("preconfigured", "22-after-esc"), None);
    assert_eq!(
        content("first-run", "05-draft").as_deref(),
        Some("my unfinished draft")
    );
    let four = content("first-run", "06-paste-4-lines").unwrap();
    assert_eq!(four.lines().count(), 4, "{four}");
    assert_eq!(
        content("first-run", "07-paste-8-lines").as_deref(),
        Some("[Pasted Text: 8 lines]")
    );
    assert_eq!(
        content("preconfigured", "18a-paste-enter-not-submitted").as_deref(),
        Some("PEER message one\nsecond line")
    );
    assert_eq!(
        g.composer_draft(&step_screen("first-run", "13-tool-confirmation"))
            .as_deref(),
        Some(CONFIRMATION_OPEN)
    );
    assert_eq!(
        g.composer_draft(&step_screen("first-run", "14-tool-called")),
        None
    );
}

/// The paste sign: the whole paste in the composer, or the large-paste placeholder with the
/// paste's line count.
#[test]
fn fixture_the_paste_sign() {
    let g = gemini();
    let pasted = "PEER message one\nsecond line";
    let screen = step_screen("preconfigured", "18a-paste-enter-not-submitted");
    assert!(g.paste_shown(&screen, &PasteView::of(pasted)));
    assert!(!g.paste_shown(
        &screen,
        &PasteView::of("PEER message one\nsecond line\nthird")
    ));
    let eight: Vec<String> = (1..=8).map(|n| format!("HOLD line {n}")).collect();
    let eight = eight.join("\n");
    let screen = step_screen("first-run", "07-paste-8-lines");
    assert!(g.paste_shown(&screen, &PasteView::of(&eight)));
    assert!(!g.paste_shown(&screen, &PasteView::of("two\nlines")));
    assert!(!g.paste_shown(
        &step_screen("first-run", "04-ready"),
        &PasteView::of(pasted)
    ));
}

/// A message entered during a turn shows under `Queued (press ↑ to edit):`.
#[test]
fn fixture_a_mid_turn_message_is_queued() {
    let screen = step_screen("first-run", "10-mid-turn-queued");
    assert!(queued_shows(screen.text(), "MID-TURN message"));
    assert!(!queued_shows(screen.text(), "another message"));
    assert!(!queued_shows(
        step_screen("first-run", "08-busy").text(),
        "MID-TURN message"
    ));
    // An envelope is drawn on one row, its line breaks as spaces (seen in `gemini_e2e`).
    let envelope = "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"06:08:21\">\nReply via send_to_peer.\n<msg>MID-TURN one</msg>\n</iap>";
    let screen = "Queued (press ↑ to edit):\n    <iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"06:08:21\"> Reply via send_to_peer. <msg>MID-TURN one</msg> </iap>\n\n ⠏ Thinking... (esc to cancel, 1s)\n";
    assert!(queued_shows(screen, envelope));
    assert!(!queued_shows(
        screen,
        &envelope.replace("06:08:21", "06:08:22")
    ));
    assert!(!queued_shows(
        &screen.replace("ts=\"06:08:21\">", "ts=…"),
        envelope
    ));
}

/// A queue behind a running turn is answered queued at once; a queue while the CLI still waits
/// for its MCP servers (`27-mcp-wait-queued`, no turn runs) is submitted by the CLI itself and
/// is waited for.
#[test]
fn fixture_a_queue_before_the_mcp_servers_are_ready_is_waited_for() {
    let waiting = std::fs::read_to_string(fixture("27-mcp-wait-queued.screen.txt")).unwrap();
    let first = "<iap from=\"ea\" runtime=\"echo\" intelligence=\"artificial\" ts=\"08:51:48\">\nReply via send_to_peer.\n<msg>hello gemini, remember the number 42</msg>\n</iap>";
    assert!(waiting.contains("Waiting for MCP servers to initialize"));
    assert!(queued_waiting(&waiting, first));
    assert!(!queued_in_turn(&waiting, first));
    let in_turn = step_screen("first-run", "10-mid-turn-queued");
    assert!(queued_in_turn(in_turn.text(), "MID-TURN message"));
    assert!(!queued_waiting(in_turn.text(), "MID-TURN message"));
}

/// The recorded session file, replayed into a chats folder found through `projects.json`:
/// the message is accepted by its `user` record, the conversation is the header's id, the
/// turn ends with the model's text answer (not with the empty record before a tool call).
#[test]
fn fixture_the_session_file_confirms_names_the_conversation_and_ends_the_turn() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let gemini = dir.path().join(".gemini");
    let cwd = dir.path().join("proj");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&gemini).unwrap();
    std::fs::write(
        gemini.join("projects.json"),
        serde_json::json!({"projects": {cwd.to_string_lossy(): "proj"}}).to_string(),
    )
    .unwrap();
    let chats = chats_dir_in(&gemini, &cwd).unwrap();
    assert_eq!(chats, gemini.join("tmp/proj/chats"));
    std::fs::create_dir_all(&chats).unwrap();
    let lines: Vec<String> = std::fs::read_to_string(fixture("session.jsonl"))
        .unwrap()
        .lines()
        .map(|l| format!("{l}\n"))
        .collect();
    let id = "7ccd217d-b395-4601-b4f9-264fc354d134";
    let file = chats.join("session-2026-12-07T02-49-7ccd217d.jsonl");
    std::fs::write(&file, &lines[0]).unwrap();
    let mut confirm = SessionFileConfirm::new(
        TranscriptWatch::start(&chats),
        "CALL-PEER now",
        SESSION_RULES,
    );
    let append = |text: &str| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
    let call = at("\"CALL-PEER now\"");
    append(&lines[1..call].concat());
    assert_eq!(confirm.acceptance(&[], ""), Acceptance::Pending);
    append(&lines[call..=call + 3].concat());
    assert_eq!(confirm.acceptance(&[], ""), Acceptance::Accepted);
    assert_eq!(confirm.conversation().as_deref(), Some(id));
    assert!(
        !confirm.turn_ended(),
        "the empty record before the tool call"
    );
    append(&lines[call + 4..].concat());
    assert!(confirm.turn_ended());
    assert_eq!(session_file(&chats, id), Some(file.clone()));
    // A resume leaves a smaller file with the same id: the conversation stays the first.
    std::fs::write(
        chats.join("session-2026-12-07T02-50-7ccd217d.jsonl"),
        std::fs::read(fixture("session-resumed.jsonl")).unwrap(),
    )
    .unwrap();
    assert_eq!(session_file(&chats, id), Some(file));
    assert_eq!(session_file(&chats, "7ccd217d"), None, "a whole id only");
}

/// The launch: `--skip-trust`, approvals not asked, the prompt file in `GEMINI_SYSTEM_MD`; a
/// resume names the recorded conversation, and without one there is nothing to resume.
#[test]
fn the_launch_command() {
    let (dir, paths) = Paths::temp();
    let env = LaunchEnv::default();
    let prompt = dir.path().join("prompt.md");
    let ctx = LaunchCtx {
        system_prompt: Some(&prompt),
        ..crate::testkit::launch_ctx(&paths, dir.path(), &env)
    };
    let cmd = gemini().command(&ctx).unwrap();
    assert_eq!(
        cmd.arg_strings(),
        ["--skip-trust", "--approval-mode", "yolo"]
    );
    assert_eq!(
        cmd.extra_env,
        [(
            "GEMINI_SYSTEM_MD".to_string(),
            prompt.to_string_lossy().into_owned()
        )]
    );
    // A gated peer: the default approval mode, where tools ask on the screen.
    let gated = LaunchCtx {
        gated: Some(std::time::Duration::from_secs(60)),
        ..ctx
    };
    assert_eq!(
        gemini().command(&gated).unwrap().arg_strings(),
        ["--skip-trust", "--approval-mode", "default"]
    );
    assert!(
        !gemini().gated_by_hook(),
        "its screen prompt goes to a human"
    );
    let resume = LaunchCtx {
        mode: WakeMode::Resume,
        ..ctx
    };
    assert_eq!(
        gemini().command(&resume).unwrap_err().to_string(),
        super::super::NO_RECORDED_CONVERSATION
    );
    let bound = gemini().for_conversation("7ccd217d-b395").unwrap();
    assert!(bound
        .command(&resume)
        .unwrap_err()
        .to_string()
        .contains("conversation 7ccd217d-b395"));
    assert_eq!(
        gemini().conversation_naming(),
        crate::adapter::ConversationNaming::Learned
    );
}

/// The approval mode iapeer starts Gemini CLI in (`yolo`) draws `*` for the composer's glyph
/// (`yolo.raw`): ready, a draft, a paste and busy read as in the default mode.
#[test]
fn fixture_the_yolo_screens_read_as_the_default_ones() {
    let g = gemini();
    let screen = |step: &str| step_screen("yolo", step);
    assert_eq!(label(g.boot_step(&screen("23-yolo-ready"))), "ready");
    assert_eq!(g.composer_content(&screen("23-yolo-ready")), None);
    assert_eq!(
        g.composer_draft(&screen("24-yolo-draft")).as_deref(),
        Some("my yolo draft")
    );
    assert_eq!(label(g.boot_step(&screen("24-yolo-draft"))), "wait");
    assert!(g.paste_shown(
        &screen("25-yolo-paste"),
        &PasteView::of("YOLO paste one\nsecond line")
    ));
    assert!(g.is_busy(&screen("26-yolo-busy")));
    assert!(!g.is_busy(&screen("23-yolo-ready")));
}

/// The tool confirmation of `13-tool-confirmation` read as a permission prompt: the MCP tool
/// and its arguments, the question, the menu with `Allow once` under the marker and `No` last.
#[test]
fn fixture_the_tool_confirmation_is_a_permission_prompt() {
    let g = gemini();
    let p = g
        .permission_prompt(&step_screen("first-run", "13-tool-confirmation"))
        .unwrap();
    assert_eq!(p.tool, "MCP tool");
    assert!(
        p.summary
            .starts_with("send_to_peer (iapeer MCP Server) {\"body\":\"hi from gemini\""),
        "{}",
        p.summary
    );
    assert!(p
        .reason
        .starts_with("Allow execution of MCP tool \"send_to_peer\""));
    assert_eq!(
        p.options,
        [
            "Allow once",
            "Allow tool for this session",
            "Allow all server tools for this session",
            "No, suggest changes (esc)"
        ]
    );
    assert_eq!((p.approve, p.deny, p.cursor), (0, 3, Some(0)));
    assert_eq!(
        g.permission_prompt(&step_screen("first-run", "14-tool-called")),
        None
    );
    assert_eq!(
        g.permission_prompt(&step_screen("yolo", "23-yolo-ready")),
        None
    );
}

/// Enter goes [`ENTER_AFTER_PASTE`] after the paste shows, a pause longer than every recorded
/// one at which no first Enter submitted (`enter-timing.txt`: pause in ms, try, whether the
/// first Enter submitted), and is pressed again every [`ENTER_RETRY`], sooner than the
/// default 1.5 s. (Before: Enter at once on the sign, and again after 1.5 s.)
#[test]
fn fixture_enter_waits_out_the_untrusted_paste_mark() {
    let text = std::fs::read_to_string(fixture("enter-timing.txt")).unwrap();
    let tries: Vec<(u64, bool)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let pause = f.next()?.parse().ok()?;
            let submitted = f.nth(1)? == "true";
            Some((pause, submitted))
        })
        .collect();
    assert!(tries.len() >= 20, "{text}");
    let never = tries
        .iter()
        .filter(|(p, _)| !tries.iter().any(|(q, ok)| q == p && *ok))
        .map(|(p, _)| *p)
        .max()
        .unwrap();
    let pause = ENTER_AFTER_PASTE.as_millis() as u64;
    assert!(
        pause > never,
        "{pause} ms, but no first Enter submitted at {never} ms"
    );
    assert!(
        tries.iter().any(|(p, ok)| *p <= pause && *ok),
        "a first Enter submitted at {pause} ms or sooner: {text}"
    );
    let g = gemini();
    assert_eq!(g.enter_after_paste_sign(), ENTER_AFTER_PASTE);
    assert_eq!(g.enter_retry(), Some(ENTER_RETRY));
    assert!(ENTER_RETRY < crate::session::deliver::ENTER_RETRY);
}

/// A resumed session's first message lands in the file the resume made, not in the
/// conversation's first (larger) file (seen in `tests/mixed_team.rs`): the confirmation of a
/// bound conversation reads both. (Before: only the largest file, so the message was never
/// confirmed and a queued one was reported lost when the session slept.)
#[test]
fn a_bound_conversations_message_is_confirmed_from_the_file_a_resume_made() {
    let dir = tempfile::tempdir().unwrap();
    let chats = dir.path().join("chats");
    std::fs::create_dir_all(&chats).unwrap();
    let id = "7ccd217d-b395-4601-b4f9-264fc354d134";
    std::fs::copy(
        fixture("session.jsonl"),
        chats.join("session-2026-12-07T02-49-7ccd217d.jsonl"),
    )
    .unwrap();
    let mut confirm = SessionFileConfirm::new(
        conversation_watch(&chats, id).unwrap(),
        "RESUMED message",
        SESSION_RULES,
    );
    assert_eq!(confirm.acceptance(&[], ""), Acceptance::Pending);
    let resumed = std::fs::read_to_string(fixture("session-resumed.jsonl")).unwrap();
    let record = serde_json::json!({"id": "u1", "timestamp": "2026-12-07T02:50:10.000Z",
        "type": "user", "content": [{"text": "RESUMED message"}]});
    std::fs::write(
        chats.join("session-2026-12-07T02-50-7ccd217d.jsonl"),
        format!("{resumed}{record}\n"),
    )
    .unwrap();
    assert_eq!(confirm.acceptance(&[], ""), Acceptance::Accepted);
    assert!(conversation_watch(&chats, "short").is_none());
}

/// The answers to iapeer's terminal queries that the `late-*` recordings show in Gemini
/// CLI's composer (kitty flags, XTVERSION, primary DA; see [`stray_answers`]).
const STRAY: &str = "0u>|iapeer(0.1.0)62;22c";

/// `step` (of `session`) is the Ctrl-C that clears the stray answers, its label quoting them.
fn assert_clears_strays(step: Option<BootStep>, session: &str) {
    match step {
        Some(BootStep::Clear { bytes, label }) => {
            assert_eq!(bytes, vec![0x03], "{session}");
            assert!(label.contains(&format!("`{STRAY}`")), "{label}");
        }
        other => panic!("{session}: {other:?}"),
    }
}

/// The screen `step` of `session` shows the exit warning a Ctrl-C arms, and the clear keys
/// read it as armed (one more press would quit).
fn assert_exit_armed(g: &Gemini, session: &str, step: &str) {
    let armed = step_screen(session, step);
    assert!(armed.text().contains(EXIT_ARMED), "{step}");
    assert!(
        g.clear_keys().is_some_and(|k| k.exit_armed(armed.text())),
        "{step}"
    );
}

/// The rows of the screen `step` of `session`, the exit warning put in its first row.
fn with_exit_warning(session: &str, step: &str) -> Vec<String> {
    let mut rows = step_screen(session, step).rows().to_vec();
    rows[0] = format!(" {EXIT_ARMED}");
    rows
}

/// The answers to its terminal queries that came late (1.2, 2 and 6 s: `late-answers.txt`)
/// sit in the composer at boot: the boot clears them with Ctrl-C, and is ready once that
/// cleared them (`…-cleared`, with the exit warning the Ctrl-C armed in `late-1200ms`); a
/// screen with the exit warning and the text still there waits (another Ctrl-C would quit).
#[test]
fn fixture_late_terminal_answers_in_the_composer_are_cleared_at_boot() {
    let g = gemini();
    for session in [
        "late-1200ms-ctrl-c",
        "late-2000ms-ctrl-c",
        "late-6000ms-ctrl-c",
    ] {
        let boot = step_screen(session, &format!("{session}-boot"));
        let text = composer_text(boot.rows()).unwrap();
        assert!(stray_answers(&text), "{session}: {text}");
        assert_clears_strays(Some(g.boot_step(&boot)), session);
        let cleared = step_screen(session, &format!("{session}-cleared"));
        assert_eq!(label(g.boot_step(&cleared)), "ready", "{session}");
    }
    assert_exit_armed(&g, "late-1200ms-ctrl-c", "late-1200ms-ctrl-c-cleared");
    // Esc only asked for a second Esc (`late-answers.txt`); the text stayed, and Ctrl-C is
    // still the key.
    let esc = step_screen("late-2000ms-esc", "late-2000ms-esc-8s-after-key");
    assert_eq!(composer_text(esc.rows()).as_deref(), Some(STRAY));
    assert!(matches!(g.boot_step(&esc), BootStep::Clear { .. }));
    // The same text with the exit warning showing: wait.
    let rows = with_exit_warning("late-2000ms-ctrl-c", "late-2000ms-ctrl-c-boot");
    assert_eq!(label(boot_step_for(&rows)), "wait");
}

/// The answers came 30 s late, after the ready screen and a first turn
/// (`late-30000ms-after-ready-*`): they showed in the idle composer, in the `turn` recording
/// only once the turn running when they came had ended (`…-landed`, not busy). A delivery
/// finds them there as leftovers to clear with Ctrl-C, not as a draft; once cleared (the
/// exit warning armed in `…-turn-cleared`), and for a human's draft, there are none.
#[test]
fn fixture_late_terminal_answers_after_ready_are_leftovers_not_a_draft() {
    let g = gemini();
    for session in [
        "late-30000ms-after-ready-idle",
        "late-30000ms-after-ready-turn",
    ] {
        let landed = step_screen(session, &format!("{session}-landed"));
        assert!(!g.is_busy(&landed), "{session}");
        assert_clears_strays(g.composer_leftovers(&landed), session);
        for after in ["cleared", "8s-after-key", "delivered"] {
            let screen = step_screen(session, &format!("{session}-{after}"));
            assert_eq!(g.composer_leftovers(&screen), None, "{session}-{after}");
            assert_eq!(g.composer_draft(&screen), None, "{session}-{after}");
        }
    }
    assert_exit_armed(
        &g,
        "late-30000ms-after-ready-turn",
        "late-30000ms-after-ready-turn-cleared",
    );
    // The leftovers with the exit warning showing: no key (another Ctrl-C would quit).
    let rows = with_exit_warning(
        "late-30000ms-after-ready-idle",
        "late-30000ms-after-ready-idle-landed",
    );
    assert_eq!(leftovers_step(&rows), Some(BootStep::Wait));
    // A human's draft, a paste, the empty composer: none.
    for step in ["05-draft", "06-paste-4-lines", "04-ready"] {
        assert_eq!(
            g.composer_leftovers(&step_screen("first-run", step)),
            None,
            "{step}"
        );
    }
    let yolo_draft = step_screen("yolo", "24-yolo-draft");
    assert_eq!(g.composer_leftovers(&yolo_draft), None);
}

/// Only the answers' leftovers are taken for stray text; a human's draft is not.
#[test]
fn stray_answers_are_only_the_answers_leftovers() {
    for yes in [
        STRAY,
        "62;22c",
        "0u",
        ">|iapeer(0.1.0)",
        ">0;276;0c 12;40R",
        "0u>|iapeer(0.1.0)\n62;22c",
    ] {
        assert!(stray_answers(yes), "{yes}");
    }
    for no in [
        "",
        "my unfinished draft",
        "0u hello",
        ">|iapeer(0.1.0",
        "62;;22c",
        ";c",
        "u",
        "42",
        "[Pasted Text: 8 lines]",
    ] {
        assert!(!stray_answers(no), "{no}");
    }
    // The recorded draft waits, as before.
    assert_eq!(
        label(gemini().boot_step(&step_screen("first-run", "05-draft"))),
        "wait"
    );
}

/// `/compress`'s three recorded answers, read from the screen under the last `> /compress`
/// row, and its end read from the session's records.
#[test]
fn compress_answers_on_the_recorded_screens_and_records() {
    use crate::adapter::CompactOutcome;
    use compress::{answer_on_screen, ended_in_records};
    let screen = |step| step_screen("compress", step).text().to_string();
    let (nothing, compacted) = (
        Some(Ok(CompactOutcome::NothingToCompact)),
        Some(Ok(CompactOutcome::Compacted)),
    );
    for (step, want, why) in [
        ("31-compress-typed", &nothing, "the earlier answer"),
        ("30-compress-empty", &nothing, "the empty chat's answer"),
        ("32-compress-pending", &None, "still running"),
        ("33-compressed", &compacted, "compressed"),
        ("34-after", &compacted, "compressed, then idle"),
    ] {
        assert_eq!(&answer_on_screen(&screen(step)), want, "{step}: {why}");
    }
    match answer_on_screen(&screen("35-compress-refused")) {
        Some(Err(r)) => assert!(
            r.said
                .starts_with("Failed to compress chat history: Failed to generate content"),
            "{}",
            r.said
        ),
        other => panic!("{other:?}"),
    }
    let records: Vec<Value> = std::fs::read_to_string(fixture("compress-session-0.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The records up to the first turn: the empty compression's end.
    let first_turn = records.iter().position(|r| r["type"] == "user").unwrap();
    assert_eq!(ended_in_records(&records[..first_turn]), Some(Ok(())));
    // The four turns: no end.
    let compressed = records.iter().rposition(|r| r["type"] == "info").unwrap();
    assert_eq!(ended_in_records(&records[first_turn..compressed]), None);
    assert_eq!(
        ended_in_records(&records[first_turn..=compressed]),
        Some(Ok(()))
    );
    match ended_in_records(&records[compressed + 1..]) {
        Some(Err(r)) => assert!(r.said.contains("\"code\":400"), "{}", r.said),
        other => panic!("{other:?}"),
    }
}

/// A `/compress` watch ends only once the records say so, and then as the screen says.
#[test]
fn compress_watch_waits_for_the_record_then_reads_the_screen() {
    use crate::adapter::{CompactOutcome, CompactWatch};
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("session-x-abcdefgh.jsonl");
    std::fs::write(&file, "{\"sessionId\":\"abcdefgh-1\"}\n").unwrap();
    let mut w = compress::CompressWatch::new(TranscriptWatch::start(tmp.path()));
    let done = step_screen("compress", "33-compressed").text().to_string();
    assert_eq!(
        w.poll(&done),
        None,
        "no record yet: an earlier answer may be on screen"
    );
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    writeln!(f, "{{\"id\":\"1\",\"type\":\"info\",\"content\":\"\"}}").unwrap();
    assert_eq!(
        w.poll(step_screen("compress", "32-compress-pending").text()),
        None,
        "not drawn yet"
    );
    assert_eq!(w.poll(&done), Some(Ok(CompactOutcome::Compacted)));
}

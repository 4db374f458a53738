use super::lists::DEATHS_KEPT;
use super::*;
use crate::testkit::mode_of as mode;
use std::fs;

fn setup() -> (tempfile::TempDir, Paths, Markers) {
    let (tmp, paths) = crate::testkit::temp_root();
    let m = Markers::parse(&paths, "claude-bob").unwrap();
    (tmp, paths, m)
}

fn record() -> SessionRecord {
    SessionRecord {
        identity: "claude-bob".into(),
        runtime: "claude".into(),
        personality: "bob".into(),
        cwd: PathBuf::from("/w/bob"),
        woke_at: 1_752_441_825_000,
        pid: 4242,
    }
}

#[test]
fn session_record_round_trips_with_the_documented_keys() {
    let (_t, paths, m) = setup();
    assert_eq!(m.read_session(), None);
    m.write_session(&record()).unwrap();
    assert_eq!(m.read_session(), Some(record()));
    let path = paths.marker("claude-bob", ".session");
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["wokeAt"], 1_752_441_825_000u64);
    assert_eq!(v["pid"], 4242);
    assert_eq!(v["cwd"], "/w/bob");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(paths.lifecycle_dir()), 0o700);
    m.remove_session().unwrap();
    m.remove_session().unwrap();
    assert_eq!(m.read_session(), None);
}

#[test]
fn corrupt_json_markers_read_as_empty() {
    let (_t, _p, m) = setup();
    fs::create_dir_all(m.path("").parent().unwrap()).unwrap();
    fs::write(m.path(SESSION), "{\"identity\":").unwrap();
    fs::write(m.path(DEATHS), "[1, \"two\"]").unwrap();
    assert_eq!(m.read_session(), None);
    assert_eq!(m.deaths(), Vec::<u64>::new());
    // The next death overwrites the damage.
    assert_eq!(m.record_death(7).unwrap(), [7]);
    assert_eq!(m.deaths(), [7]);
}

#[test]
fn flags_set_clear_and_take() {
    let (_t, paths, m) = setup();
    for flag in Flag::ALL {
        assert!(!m.is_set(flag));
        m.set(flag).unwrap();
        assert!(m.is_set(flag));
        assert_eq!(mode(m.path(flag.suffix())), 0o600);
    }
    let names = lists::dir_names(&paths.lifecycle_dir());
    assert_eq!(names.len(), 5, "one file per flag: {names:?}");
    assert!(m.take(Flag::IdleReaped).unwrap());
    assert!(!m.take(Flag::IdleReaped).unwrap());
    assert!(!m.is_set(Flag::IdleReaped));
    assert!(m.is_set(Flag::FreshNext), "other flags untouched");
    m.clear(Flag::Stopped).unwrap();
    m.clear(Flag::Stopped).unwrap();
    assert!(!m.is_set(Flag::Stopped));
}

#[test]
fn only_one_of_many_racing_takers_consumes_a_flag() {
    let (_t, _p, m) = setup();
    m.set(Flag::FreshNext).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || m.take(Flag::FreshNext).unwrap())
        })
        .collect();
    let winners = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|&won| won)
        .count();
    assert_eq!(winners, 1);
}

#[test]
fn deaths_are_a_ring_of_sixteen() {
    let (_t, _p, m) = setup();
    for t in 1..=20u64 {
        m.record_death(t * 1000).unwrap();
    }
    let want: Vec<u64> = (5..=20).map(|t| t * 1000).collect();
    assert_eq!(m.deaths(), want);
    m.clear_deaths().unwrap();
    assert!(m.deaths().is_empty());
}

#[test]
fn crash_loop_guard() {
    let window = 300_000;
    let now = 1_000_000;
    assert!(!crash_looping(&[], now, 3, window));
    assert!(!crash_looping(&[now - 10, now - 20], now, 3, window));
    assert!(crash_looping(
        &[now - 10, now - 20, now - 30],
        now,
        3,
        window
    ));
    // Exactly on the window's edge counts; one ms older does not.
    assert!(crash_looping(&[now - window, now - 1, now], now, 3, window));
    assert!(!crash_looping(
        &[now - window - 1, now - 1, now],
        now,
        3,
        window
    ));
    // Future stamps (clock stepped back) count as recent.
    assert!(crash_looping(&[now + 5, now + 6, now], now, 3, window));
    assert!(
        !crash_looping(&[now, now, now], now, 0, window),
        "max 0 disables"
    );
    let mut ring = Vec::new();
    for t in 0..40 {
        push_death(&mut ring, t);
    }
    assert_eq!(ring.len(), DEATHS_KEPT);
    assert_eq!(ring[0], 24);
}

#[test]
fn topics_dedupe_move_to_end_and_cap() {
    let (_t, _p, m) = setup();
    assert!(m.topics().is_empty());
    assert!(m.note_topic("deploy").unwrap());
    assert!(m.note_topic("review").unwrap());
    assert!(!m.note_topic("review").unwrap(), "already most recent");
    assert!(m.note_topic("deploy").unwrap(), "moves to the end");
    assert_eq!(m.topics(), ["review", "deploy"]);
    assert!(!m.note_topic("").unwrap());
    assert!(!m.note_topic(" \n ").unwrap());
    assert!(m.note_topic("two\nlines").unwrap());
    assert_eq!(m.topics().last().unwrap(), "two lines");
    assert!(m.knows_topic("two\nlines"));
    assert!(m.knows_topic("review"));
    assert!(!m.knows_topic("other"));
    assert!(!m.knows_topic(""));
    for i in 0..20 {
        m.note_topic(&format!("t{i}")).unwrap();
    }
    let want: Vec<String> = (4..20).map(|i| format!("t{i}")).collect();
    assert_eq!(m.topics(), want);
    m.reset_topics().unwrap();
    assert!(m.topics().is_empty());
}

#[test]
fn a_conversation_id_is_recorded_validated_and_forgotten() {
    let (_t, _p, m) = setup();
    assert_eq!(m.conversation(), None);
    // An id written is the one read back.
    let recorded = |id: &str| {
        m.write_conversation(id).unwrap();
        assert_eq!(m.conversation().as_deref(), Some(id));
    };
    recorded("3f2c1a5e-1111-4222-8333-444455556666");
    let on_disk: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(m.path(CONVERSATION)).unwrap()).unwrap();
    assert_eq!(
        on_disk,
        serde_json::json!({"id": "3f2c1a5e-1111-4222-8333-444455556666"})
    );
    assert_eq!(mode(m.path(CONVERSATION)), 0o600);
    // Whatever is on disk, only an id can reach a command line.
    for bad in [
        "",
        "--continue",
        "_x",
        "a b",
        "x;rm",
        "a/b",
        &"a".repeat(65),
    ] {
        fs::write(m.path(CONVERSATION), format!("{{\"id\":{bad:?}}}")).unwrap();
        assert_eq!(m.conversation(), None, "{bad:?}");
    }
    fs::write(m.path(CONVERSATION), "not json").unwrap();
    assert_eq!(m.conversation(), None);
    // OpenCode 1.18.33's session ids (`tests/fixtures/opencode-1.18.33/session-list.txt`).
    recorded("ses_db18a5ee6ffeRyD67j6PZOFRbl");
    m.clear_conversation().unwrap();
    m.clear_conversation().unwrap();
    assert!(!m.path(CONVERSATION).exists());
}

#[test]
fn a_hand_edited_topic_file_is_normalized_on_read() {
    let (_t, _p, m) = setup();
    fs::create_dir_all(m.path("").parent().unwrap()).unwrap();
    fs::write(m.path(TOPIC), "a\n\nb\na\n").unwrap();
    assert_eq!(m.topics(), ["b", "a"]);
}

#[test]
fn identities_must_parse() {
    let paths = Paths::at("/r");
    assert!(Markers::parse(&paths, "../etc").is_err());
    assert!(Markers::parse(&paths, "claude").is_err());
    let m = Markers::parse(&paths, "codex-code-reviewer").unwrap();
    assert_eq!(m.identity().personality, "code-reviewer");
    assert_eq!(
        m.system_prompt_path(),
        PathBuf::from("/r/state/lifecycle/codex-code-reviewer.system-prompt.md")
    );
    assert_eq!(
        m.queue_dir(),
        PathBuf::from("/r/state/lifecycle/codex-code-reviewer.queue")
    );
}

#[test]
fn remove_all_deletes_only_this_identity() {
    let (_t, paths, m) = setup();
    let neighbour = Markers::parse(&paths, "claude-bob-two").unwrap();
    let other_rt = Markers::parse(&paths, "codex-bob").unwrap();
    for x in [&m, &neighbour, &other_rt] {
        x.set(Flag::Stopped).unwrap();
        x.write_session(&record()).unwrap();
        x.note_topic("t").unwrap();
    }
    m.record_death(1).unwrap();
    fs::write(m.system_prompt_path(), "prompt").unwrap();
    fs::create_dir_all(m.queue_dir()).unwrap();
    fs::write(m.queue_dir().join("000001"), "{}").unwrap();
    let dir = paths.lifecycle_dir();
    fs::write(dir.join(".claude-bob.session.tmp-1-ab"), "").unwrap();
    assert_eq!(m.remove_all().unwrap(), 7);
    let mut left = lists::dir_names(&dir);
    left.sort();
    assert_eq!(
        left,
        [
            "claude-bob-two.session",
            "claude-bob-two.stopped",
            "claude-bob-two.topic",
            "codex-bob.session",
            "codex-bob.stopped",
            "codex-bob.topic"
        ]
    );
    assert_eq!(m.remove_all().unwrap(), 0);
}

#[test]
fn identities_with_a_marker_are_listed_sorted() {
    let (_t, paths, _m) = setup();
    assert!(identities_with(&paths, Flag::Stopped.suffix()).is_empty());
    for id in ["codex-zed", "claude-bob", "claude-bob-two"] {
        Markers::parse(&paths, id)
            .unwrap()
            .set(Flag::Stopped)
            .unwrap();
    }
    Markers::parse(&paths, "claude-amy")
        .unwrap()
        .set(Flag::NewEager)
        .unwrap();
    let dir = paths.lifecycle_dir();
    fs::write(dir.join("Not-Valid.stopped"), "").unwrap();
    fs::write(dir.join(".claude-x.stopped.tmp-1"), "").unwrap();
    fs::write(dir.join("junk.stopped"), "").unwrap();
    let ids: Vec<String> = identities_with(&paths, Flag::Stopped.suffix())
        .iter()
        .map(|i| i.to_string())
        .collect();
    assert_eq!(ids, ["claude-bob", "claude-bob-two", "codex-zed"]);
    let eager = identities_with(&paths, Flag::NewEager.suffix());
    assert_eq!(eager.len(), 1);
    assert_eq!(eager[0].to_string(), "claude-amy");
}

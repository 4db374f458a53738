use super::*;
use proptest::prelude::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/claude-2.1.332/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

const BOOT: &str = "boot-trust-apikey-bypass-ready-paste-busy.raw";

/// Feed `bytes` in pieces of `step` bytes, collecting everything produced.
fn feed_chunked(screen: &mut Screen, bytes: &[u8], step: usize) -> Fed {
    let mut all = Fed::default();
    for chunk in bytes.chunks(step) {
        let fed = screen.feed(chunk, true);
        all.replies.extend(fed.replies);
        all.forward.extend(fed.forward);
    }
    all
}

#[test]
fn cursor_report_uses_the_model_after_preceding_bytes() {
    let mut s = Screen::new(24, 80);
    let fed = s.feed(b"abc\x1b[6n\x1b[5;10H\x1b[6nxyz\x1b[6n", true);
    assert_eq!(fed.replies, b"\x1b[1;4R\x1b[5;10R\x1b[5;13R".to_vec());
    assert_eq!(fed.forward, b"abc\x1b[5;10Hxyz".to_vec());
    assert_eq!(s.cursor(), (4, 12));
}

#[test]
fn query_split_across_chunks_is_reassembled() {
    let mut s = Screen::new(24, 80);
    let first = s.feed(b"ab\x1b[", true);
    assert_eq!(first.forward, b"ab".to_vec());
    assert!(first.replies.is_empty());
    let second = s.feed(b"6ncd", true);
    assert_eq!(second.replies, b"\x1b[1;3R".to_vec());
    assert_eq!(second.forward, b"cd".to_vec());
    assert_eq!(s.rows()[0], "abcd");
}

#[test]
fn held_bytes_that_are_not_a_query_are_forwarded_with_the_next_chunk() {
    let mut s = Screen::new(24, 80);
    assert_eq!(s.feed(b"x\x1b[", true).forward, b"x".to_vec());
    let fed = s.feed(b"31mred", true);
    assert_eq!(fed.forward, b"\x1b[31mred".to_vec());
    let cell = s.parser.screen().cell(0, 1).map(|c| c.fgcolor());
    assert_eq!(cell, Some(vt100::Color::Idx(1)));
}

#[test]
fn claude_startup_queries_are_answered_and_stripped() {
    let mut s = Screen::new(50, 220);
    let fed = s.feed(b"\x1b[>0q\x1b[?u\x1b]7501;?\x07\x1b[c\x1b]11;?\x1b\\", true);
    let mut expected = format!("\x1bP>|iapeer({VERSION})\x1b\\").into_bytes();
    expected.extend_from_slice(b"\x1b[?0u\x1b[?62;22c");
    assert!(fed.replies.starts_with(&expected), "{:?}", fed.replies);
    assert!(fed.replies.ends_with(b"\x1b\\"));
    assert_eq!(fed.forward, b"\x1b]7501;?\x07".to_vec());
}

#[test]
fn with_a_human_attached_nothing_is_answered_or_stripped() {
    let mut s = Screen::new(24, 80);
    assert_eq!(s.feed(b"a\x1b[", true).forward, b"a".to_vec());
    let fed = s.feed(b"6n\x1b[c", false);
    assert!(fed.replies.is_empty());
    assert_eq!(fed.forward, b"\x1b[6n\x1b[c".to_vec());
    // The held bytes are not replayed a second time.
    assert_eq!(s.feed(b"z", true).forward, b"z".to_vec());
}

#[test]
fn text_rows_and_tail() {
    let mut s = Screen::new(4, 20);
    s.feed("one   \r\ntwo\r\nдва три".as_bytes(), true);
    assert_eq!(s.rows(), vec!["one", "two", "два три", ""]);
    assert_eq!(s.text(), "one\ntwo\nдва три\n");
    assert_eq!(s.tail_text(6), "три");
    assert_eq!(s.tail_text(5), "ри", "a cut inside a char moves forward");
    assert_eq!(s.tail_text(1000), "one\ntwo\nдва три");
}

#[test]
fn application_cursor_mode_and_resize() {
    let mut s = Screen::new(24, 80);
    assert!(!s.application_cursor());
    s.feed(b"\x1b[?1h", true);
    assert!(s.application_cursor());
    s.resize(30, 100);
    assert_eq!(s.size(), (30, 100));
    assert_eq!(s.rows().len(), 30);
}

#[test]
fn composer_typed_text_versus_dim_or_coloured_placeholder() {
    let mut s = Screen::new(10, 60);
    s.feed(
        "❯ earlier message\r\n\r\n❯\u{a0}\x1b[2mTry \"fix lint\"\x1b[22m".as_bytes(),
        true,
    );
    let c = s.composer_text("❯").expect("composer row");
    assert_eq!(c.text, "Try \"fix lint\"");
    assert!(!c.typed, "dim placeholder is not typed text");

    let mut s = Screen::new(10, 60);
    s.feed(
        "❯ \x1b[38;5;246msuggestion\x1b[39m \x1b[7m \x1b[27m".as_bytes(),
        true,
    );
    assert!(!s.composer_text("❯").unwrap().typed, "coloured suggestion");

    let mut s = Screen::new(10, 60);
    s.feed("❯ \x1b[1mhello\x1b[22m\x1b[7m \x1b[27m".as_bytes(), true);
    let c = s.composer_text("❯").unwrap();
    assert_eq!(c.text, "hello");
    assert!(c.typed, "bold default-colour text is typed");

    assert_eq!(s.composer_text("›"), None);
}

#[test]
fn snapshot_redraws_screen_scrollback_cursor_and_modes() {
    let mut s = Screen::new(5, 30);
    for i in 0..12 {
        s.feed(
            format!("\x1b[3{}mline {i}\x1b[m\r\n", i % 8).as_bytes(),
            true,
        );
    }
    s.feed(b"\x1b[?1h\x1b[?2004hlast", true);

    let mut client = Screen::new(5, 30);
    client.feed(b"garbage on the client terminal", true);
    client.feed(&s.snapshot(), true);
    assert_eq!(client.rows(), s.rows());
    assert_eq!(client.cursor(), s.cursor());
    assert!(client.application_cursor());
    assert!(client.parser.screen().bracketed_paste());
    assert_eq!(
        client.parser.screen().cell(4, 0).map(|c| c.fgcolor()),
        s.parser.screen().cell(4, 0).map(|c| c.fgcolor())
    );
    // The history scrolled into the client's scrollback, oldest first.
    client.parser.screen_mut().set_scrollback(usize::MAX);
    // (Scrolling the model's view from here bypasses `Screen`: drop its rows made before.)
    client.changed();
    assert_eq!(client.parser.screen().scrollback(), 8);
    assert_eq!(client.rows()[0], "line 0");
    let first = client.parser.screen().cell(1, 0).map(|c| c.fgcolor());
    assert_eq!(first, Some(vt100::Color::Idx(1)));
}

#[test]
fn fixture_trust_dialog_renders() {
    let mut s = Screen::new(SESSION_ROWS, SESSION_COLS);
    let fed = feed_chunked(&mut s, &fixture("trust-dialog.raw"), 13);
    let rows = s.rows();
    assert_eq!(rows[12], " ❯ No, exit");
    assert_eq!(rows[13], "   Yes, I trust this folder");
    // XTVERSION, kitty and primary DA at the end of the first paint.
    assert!(fed.replies.ends_with(b"\x1b[?0u\x1b[?62;22c"));
}

#[test]
fn fixture_boot_composer_states() {
    let bytes = fixture(BOOT);
    let at = |needle: &[u8]| {
        bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("needle in fixture")
    };
    let mut s = Screen::new(SESSION_ROWS, SESSION_COLS);
    // Up to the ready screen (the first DA query after the bypass dialog is gone).
    let ready_end = at(b"shift+tab to cycle");
    s.feed(&bytes[..ready_end], true);
    let c = s.composer_text("❯").expect("composer on the ready screen");
    assert_eq!((c.text.as_str(), c.typed), ("", false));

    let pasted_end = at(b"paste again to expand");
    s.feed(&bytes[ready_end..pasted_end], true);
    let c = s.composer_text("❯").unwrap();
    assert_eq!(c.text, "[Pasted text #1 +3 lines]");
    assert!(c.typed, "a pasted, unsent message holds the composer");

    s.feed(&bytes[pasted_end..], true);
    let c = s.composer_text("❯").unwrap();
    assert_eq!((c.text.as_str(), c.typed), ("", false));
    assert!(s.text().contains("esc to interrupt"));
    assert!(s.tail_text(2048).ends_with("esc to interrupt"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Chunking never changes what is answered, forwarded or modelled.
    #[test]
    fn fixture_chunking_is_invisible(step in 1usize..40) {
        let bytes = fixture(BOOT);
        let mut whole = Screen::new(SESSION_ROWS, SESSION_COLS);
        let expected = whole.feed(&bytes, true);
        let mut pieces = Screen::new(SESSION_ROWS, SESSION_COLS);
        let got = feed_chunked(&mut pieces, &bytes, step);
        prop_assert_eq!(&got, &expected);
        prop_assert_eq!(pieces.text(), whole.text());
        // Four XTVERSION + DA pairs and one kitty query were answered and stripped.
        prop_assert_eq!(expected.forward.len(), bytes.len() - 4 * (5 + 3) - 4);
    }
}

#[test]
fn fixture_snapshot_reproduces_the_busy_screen() {
    let mut s = Screen::new(SESSION_ROWS, SESSION_COLS);
    s.feed(&fixture(BOOT), true);
    let mut client = Screen::new(SESSION_ROWS, SESSION_COLS);
    client.feed(&s.snapshot(), true);
    assert_eq!(client.text(), s.text());
    assert_eq!(client.cursor(), s.cursor());
    assert_eq!(client.composer_text("❯"), s.composer_text("❯"));
}

#[test]
fn client_sizes_are_clamped_to_what_a_terminal_can_be() {
    assert_eq!(clamp_size(40, 120), (40, 120));
    assert_eq!(clamp_size(2000, 2000), (MAX_ROWS, MAX_COLS));
    assert_eq!(clamp_size(u16::MAX, 0), (MAX_ROWS, MIN_COLS));
    assert_eq!(clamp_size(0, u16::MAX), (MIN_ROWS, MAX_COLS));
    assert_eq!(
        clamp_size(1, 80),
        (2, 80),
        "one row would crash the screen model"
    );
    assert_eq!(clamp_size(80, 1), (80, 2), "so would one column");
}

/// Issue 7 item 2: a draft typed by an attached human into Claude Code 2.1.332 (recorded in
/// its dark, light and dark-ansi themes, `tests/fixtures/claude-2.1.332/composer-draft-*.raw`)
/// is typed text; the ready screen's empty composer before it is not.
#[test]
fn fixture_claude_composer_draft() {
    for theme in ["dark", "light", "dark-ansi"] {
        claude_composer_draft_in(&format!("composer-draft-{theme}.raw"));
    }
}

fn claude_composer_draft_in(name: &str) {
    let bytes = fixture(name);
    let at = bytes
        .windows(b"unfinished".len())
        .rposition(|w| w == b"unfinished")
        .expect("the typed draft");
    let mut s = Screen::new(SESSION_ROWS, SESSION_COLS);
    s.feed(&bytes[..at.saturating_sub(40)], true);
    let c = s.composer_text("❯").expect("composer");
    assert!(!c.typed, "{name}: before typing: {c:?}");
    s.feed(&bytes[at.saturating_sub(40)..], true);
    let c = s.composer_text("❯").expect("composer");
    assert_eq!(c.text, "my unfinished draft", "{name}");
    assert!(c.typed, "{name}");
}

/// Issue 7: while messages wait in Claude Code 2.1.332's queue its empty composer shows the
/// placeholder "Press up to edit queued messages", dim, with the drawn cursor (an inverse,
/// default-colour cell) over its first letter: a placeholder, not a draft (recorded in
/// `tests/fixtures/claude-2.1.332/mid-turn-queue.raw`).
#[test]
fn fixture_claude_queued_placeholder_is_not_a_draft() {
    let bytes = fixture("mid-turn-queue.raw");
    // The screen a moment after the paste (its words are drawn with cursor moves between).
    let paste = bytes
        .windows(b"MID-TURN".len())
        .position(|w| w == b"MID-TURN")
        .expect("the paste");
    let mut s = Screen::new(SESSION_ROWS, SESSION_COLS);
    s.feed(&bytes[..paste + 3000], true);
    let c = s.composer_text("❯").expect("composer");
    assert_eq!(c.text, "Press up to edit queued messages");
    assert!(!c.typed, "{c:?}");
}

/// A line that wraps on a one-row screen panicked inside vt100 0.16.2 (issue 12, found by the
/// `screen` fuzz target: tests/fixtures/fuzz/screen/one-row-wrap). A client may ask for one
/// row; the model and the pty get two.
#[test]
fn a_line_that_wraps_on_a_one_row_screen_does_not_panic() {
    let mut s = Screen::new(1, 10);
    assert_eq!(s.size(), (MIN_ROWS, 10));
    s.feed(b"abcdefghijklmnop", true);
    assert_eq!(
        s.rows(),
        vec!["abcdefghij".to_string(), "klmnop".to_string()]
    );
    let mut s = Screen::new(30, 10);
    s.resize(1, 10);
    assert_eq!(s.size(), (MIN_ROWS, 10));
    s.feed(b"\x1b[rabcdefghijklmnop", true);
    assert_eq!(s.rows().len(), usize::from(MIN_ROWS));
}

/// A double-width character on a one-column screen overflowed inside vt100 0.16.2 (issue 12,
/// found by the `screen` fuzz target); the model gets two columns.
#[test]
fn a_wide_character_on_a_one_column_screen_does_not_panic() {
    let mut s = Screen::new(5, 1);
    assert_eq!(s.size(), (5, MIN_COLS));
    s.feed("漢字ab".as_bytes(), true);
    assert_eq!(s.rows()[..3], ["漢", "字", "ab"]);
}

/// `rows` and `text` (and what reads them) follow every chunk and resize, though they are
/// made once per change (`Screen::rows_cache`, `Screen::text_cache`).
#[test]
fn rows_follow_each_chunk_and_resize() {
    let mut s = Screen::new(24, 80);
    s.feed(b"first", true);
    assert_eq!(s.rows()[0], "first");
    assert_eq!(s.rows()[0], "first");
    s.feed(b"\r\nsecond", true);
    assert_eq!(&s.rows()[..2], ["first", "second"]);
    assert!(s.text().starts_with("first\nsecond"));
    s.feed(b"\x1b[2J\x1b[H", false);
    assert_eq!(s.rows()[0], "");
    assert!(
        s.text().trim().is_empty(),
        "the text after a clear: {:?}",
        s.text()
    );
    s.resize(30, 100);
    assert_eq!(s.rows().len(), 30);
    assert_eq!(s.text().split('\n').count(), 30);
}

/// Every recorded screen (`.raw`) of Claude Code and Codex, in name order.
fn recorded_screens() -> Vec<std::path::PathBuf> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut names = Vec::new();
    for dir in ["claude-2.1.332", "codex-0.171.0"] {
        let mut in_dir: Vec<_> = std::fs::read_dir(format!("{root}/tests/fixtures/{dir}"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "raw"))
            .collect();
        in_dir.sort();
        names.extend(in_dir);
    }
    names
}

/// Issue 31 item 3: a row made alone, and the prompt row found from the bottom up, are what
/// the whole rows say — on every recorded screen of Claude Code and Codex,
/// looked at after every chunk (wide characters, colours, frames, dialogs).
#[test]
fn fixture_a_row_made_alone_is_that_row() {
    let mut looked = 0;
    for path in recorded_screens() {
        let bytes = std::fs::read(&path).unwrap();
        let (mut cells, mut whole) = (Screen::new(50, 220), Screen::new(50, 220));
        for chunk in bytes.chunks(1024) {
            cells.feed(chunk, true);
            whole.feed(chunk, true);
            for r in 0..50u16 {
                assert_eq!(
                    cells.row_text(r),
                    whole.rows()[usize::from(r)],
                    "{path:?} {r}"
                );
            }
            for glyph in ["❯", "›", "Do you"] {
                let want = (0..50u16)
                    .rev()
                    .find(|&r| whole.rows()[usize::from(r)].trim_start().starts_with(glyph));
                assert_eq!(
                    cells.last_row_starting_with(glyph),
                    want,
                    "{path:?} {glyph}"
                );
            }
            looked += 1;
        }
    }
    assert!(looked > 100, "{looked} screens");
}

/// Every field of the model, for comparing a screen that rested with one that never did.
fn model(s: &Screen) -> String {
    format!("{:?}", s.vt())
}

fn codex_fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/codex-0.171.0/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4))]
    /// A screen told to rest between any two chunks of a real boot (Claude Code, Codex) reads,
    /// answers and forwards exactly as a twin that never rested, after every chunk.
    #[test]
    fn a_resting_screen_behaves_as_one_that_never_rested(step in 1000usize..6000, every in 1usize..4) {
        for bytes in [fixture(BOOT), codex_fixture("boot-trust-ready-paste-call.raw")] {
            let mut rested = Screen::new(SESSION_ROWS, SESSION_COLS);
            let mut twin = Screen::new(SESSION_ROWS, SESSION_COLS);
            let mut rests = 0;
            for (i, chunk) in bytes.chunks(step).enumerate() {
                prop_assert_eq!(rested.feed(chunk, true), twin.feed(chunk, true));
                if i % every == 0 && rested.rest() {
                    rests += 1;
                }
                prop_assert_eq!(rested.text(), twin.text());
                prop_assert_eq!(rested.cursor(), twin.cursor());
                prop_assert_eq!(rested.composer_text("❯"), twin.composer_text("❯"));
            }
            prop_assert_eq!(rested.snapshot(), twin.snapshot());
            // Every field equal, a cell by its visible bytes (vt100 keeps a cleared cell's
            // old bytes past its length; nothing reads them).
            prop_assert!(rest::same(rested.vt(), twin.vt()));
            prop_assert!(rests > 0);
        }
    }
}

/// The echo agent's idle screen (what 1 000 live echo sessions show) rests, and a read brings
/// it back into memory until the next rest.
#[test]
fn an_idle_echo_screen_rests_in_a_few_bytes() {
    let mut ui = crate::echo_agent::ui::Screen::new(true);
    let mut s = Screen::new(SESSION_ROWS, SESSION_COLS);
    let lines = vec![
        "echo agent ready".to_string(),
        "received 12:00:00 from bob: hi".to_string(),
    ];
    s.feed(ui.frame(&lines, "").as_bytes(), true);
    let before = (s.text().to_string(), s.cursor(), model(&s));
    assert!(s.in_memory());
    assert!(s.rest());
    assert!(!s.in_memory());
    let held = s.resting.as_ref().map(|r| r.held_bytes()).unwrap();
    assert!(held < 4096, "{held} bytes");
    assert_eq!((s.text().to_string(), s.cursor(), model(&s)), before);
    assert!(s.in_memory(), "read: rebuilt");
    assert!(s.rest());
    assert!(!s.in_memory(), "rests again");
}

/// What the redraw cannot carry (a scroll region; a cursor saved with DECSC) keeps the model
/// in memory.
#[test]
fn a_state_the_redraw_cannot_carry_stays_in_memory() {
    for setup in [&b"\x1b[5;10r"[..], b"\x1b[3;7H\x1b7\x1b[H"] {
        let mut s = Screen::new(24, 80);
        s.feed(setup, true);
        s.feed(b"text", true);
        let before = model(&s);
        assert!(!s.rest(), "{setup:?}");
        assert!(s.in_memory());
        assert_eq!(model(&s), before);
    }
}

/// An escape sequence cut by a rest ends as if there had been none: the byte parser's state
/// stays in the parser.
#[test]
fn a_sequence_cut_by_a_rest_ends_as_without_it() {
    let mut rested = Screen::new(24, 80);
    let mut twin = Screen::new(24, 80);
    for s in [&mut rested, &mut twin] {
        s.feed(b"ab\x1b[3", true);
    }
    assert!(rested.rest());
    for s in [&mut rested, &mut twin] {
        s.feed(b"1mX\xe2\x9d", true);
    }
    assert!(rested.rest());
    for s in [&mut rested, &mut twin] {
        s.feed(b"\xaf done", true);
    }
    assert_eq!(model(&rested), model(&twin));
    assert_eq!(rested.text().trim_end(), "abX\u{276f} done");
}

/// Issue 31 item 4: the screen of a quiet Claude Code or Codex session rests — every recorded
/// screen of both, at its end — and an attach after the rest redraws the same visible screen
/// (contents, colours and attributes of every cell, cursor) as a twin that never rested.
#[test]
fn fixture_a_quiet_claude_or_codex_screen_rests_and_redraws_the_same() {
    let mut rested_screens = 0;
    for path in recorded_screens() {
        let bytes = std::fs::read(&path).unwrap();
        let (mut rested, mut twin) = (
            Screen::new(SESSION_ROWS, SESSION_COLS),
            Screen::new(SESSION_ROWS, SESSION_COLS),
        );
        rested.feed(&bytes, true);
        twin.feed(&bytes, true);
        assert!(rested.rest(), "{path:?} did not rest");
        assert!(!rested.in_memory(), "{path:?}");
        // An attach after the rest: the client's terminal gets the redraw.
        let attach = rested.snapshot();
        assert_eq!(attach, twin.snapshot(), "{path:?}");
        let mut client = vt100::Parser::new(SESSION_ROWS, SESSION_COLS, 0);
        client.process(&attach);
        let shown = client.screen();
        assert_eq!(shown.contents_formatted(), twin.vt().contents_formatted());
        for r in 0..SESSION_ROWS {
            for c in 0..SESSION_COLS {
                assert_eq!(shown.cell(r, c), twin.vt().cell(r, c), "{path:?} {r},{c}");
            }
        }
        assert_eq!(rested.cursor(), twin.cursor(), "{path:?}");
        assert_eq!(rested.text(), twin.text(), "{path:?}");
        rested_screens += 1;
    }
    assert!(rested_screens >= 20, "{rested_screens} screens");
}

/// The rest's comparison sees every visible difference (a character, a colour, the cursor)
/// and none of the bytes `vt100` keeps past a cleared cell's length.
#[test]
fn the_rest_comparison_sees_what_shows_and_not_old_bytes() {
    let screen = |bytes: &[u8]| {
        let mut p = vt100::Parser::new(24, 80, SCROLLBACK_LINES);
        p.process(bytes);
        p.screen().clone()
    };
    // "bc" cleared: their bytes stay in the cells past a length of 0.
    assert!(rest::same(&screen(b"abc\x1b[1;2H\x1b[K"), &screen(b"a")));
    assert!(rest::same(&screen(b"x\r\n\x1b[2J\x1b[H"), &screen(b"")));
    for (a, b) in [
        (&b"ab"[..], &b"ac"[..]),
        (b"ab", b"a\x1b[31mb"),
        (b"ab", b"a\x1b[1mb"),
        (b"ab", b"ab\x1b[1;1H"),
        (b"ab", b"ab\x1b[5;10r"),
        (b"ab", b"\x1b[3;3H\x1b7\x1b[Hab"),
    ] {
        assert!(!rest::same(&screen(a), &screen(b)), "{a:?} {b:?}");
    }
}

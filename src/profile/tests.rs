use super::*;
use crate::runtime_table::class_of;
use std::fs;

/// A temp folder holding a peer folder named `name`.
fn peer_dir(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().join(name);
    fs::create_dir_all(&cwd).unwrap();
    (tmp, cwd)
}

fn write_raw(cwd: &Path, text: &str) {
    let p = paths::peer::profile(cwd);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// A temp folder holding a peer folder named `name` whose profile file holds `text` as is.
fn peer_with_profile(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let (tmp, cwd) = peer_dir(name);
    write_raw(&cwd, text);
    (tmp, cwd)
}

fn raw(cwd: &Path) -> String {
    fs::read_to_string(paths::peer::profile(cwd)).unwrap()
}

#[test]
fn missing_profile_reads_as_none() {
    let (_t, cwd) = peer_dir("bob");
    assert!(Profile::read(&cwd).unwrap().is_none());
}

#[test]
fn update_creates_a_profile_named_after_the_folder() {
    let (_t, cwd) = peer_dir("Code Reviewer");
    let p = Profile::update(&cwd, |p| {
        p.default_runtime = "claude".into();
        p.runtimes = vec!["codex".into()];
        p.personality = "something-else".into();
    })
    .unwrap();
    assert_eq!(p.personality, "code-reviewer");
    assert_eq!(p.runtimes, ["claude", "codex"]);
    let golden = "{\n  \"personality\": \"code-reviewer\",\n  \"runtimes\": [\n    \"claude\",\n    \"codex\"\n  ],\n  \"default_runtime\": \"claude\"\n}\n";
    assert_eq!(raw(&cwd), golden);
    let mode = crate::testkit::mode_of(paths::peer::profile(&cwd));
    assert_eq!(mode, 0o600);
    assert_eq!(Profile::read(&cwd).unwrap(), Some(p));
}

#[test]
fn read_merge_write_keeps_unknown_keys_and_migrates_legacy_runtime() {
    let (_t, cwd) = peer_with_profile(
        "timer",
        r#"{"personality":"timer","runtime":"notifier","intelligence":"scripted",
            "notifier":{"jobs":[{"cron":"0 9 * * *","say":"hi"}]},"zeta":1}"#,
    );
    let read = Profile::read(&cwd).unwrap().unwrap();
    assert_eq!(read.default_runtime(), "notifier");
    assert_eq!(read.runtimes, ["notifier"]);
    assert_eq!(read.legacy_runtime.as_deref(), Some("notifier"));
    assert_eq!(read.nature(), Intelligence::Absent);

    Profile::update(&cwd, |p| p.description = Some("Schedules things".into())).unwrap();
    let v: Value = serde_json::from_str(&raw(&cwd)).unwrap();
    assert_eq!(v["notifier"]["jobs"][0]["cron"], "0 9 * * *");
    assert_eq!(v["zeta"], 1);
    assert_eq!(v["default_runtime"], "notifier");
    assert_eq!(
        v["intelligence"], "scripted",
        "legacy value kept as written"
    );
    assert_eq!(v["description"], "Schedules things");
    assert!(v.get("runtime").is_none(), "legacy field never written");
}

#[test]
fn default_runtime_is_always_listed() {
    let (_t, cwd) = peer_with_profile(
        "bob",
        r#"{"personality":"bob","runtimes":["codex","codex"],"default_runtime":"claude"}"#,
    );
    let p = Profile::read(&cwd).unwrap().unwrap();
    assert_eq!(p.runtimes, ["claude", "codex"]);
    assert!(p.declares("codex"));
}

#[test]
fn corrupt_profiles_are_errors_naming_the_file() {
    let (_t, cwd) = peer_dir("bob");
    let path = paths::peer::profile(&cwd);
    for (text, needle) in [
        ("{not json", "invalid JSON"),
        ("[1,2]", "array instead of an object"),
        (r#"{"runtimes":"claude"}"#, "\"runtimes\" must be an array"),
        (
            r#"{"default_runtime":3}"#,
            "\"default_runtime\" must be a string",
        ),
        (
            r#"{"default_runtime":"x","interfaces":[]}"#,
            "\"interfaces\"",
        ),
    ] {
        write_raw(&cwd, text);
        let err = Profile::read(&cwd).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ProfileError::Corrupt { .. }), "{text}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains(needle), "{msg}");
        assert!(msg.contains("valid JSON object"), "{msg}");
        // A corrupt file is never overwritten by an update.
        assert!(Profile::update(&cwd, |p| p.default_runtime = "claude".into()).is_err());
        assert_eq!(raw(&cwd), text);
    }
}

#[test]
fn a_profile_without_any_runtime_is_refused() {
    let (_t, cwd) = peer_dir("bob");
    write_raw(&cwd, r#"{"personality":"bob"}"#);
    assert!(matches!(
        Profile::read(&cwd),
        Err(ProfileError::NoRuntime { .. })
    ));
    assert!(matches!(
        Profile::update(&cwd, |_| {}),
        Err(ProfileError::NoRuntime { .. })
    ));
    // An update that names a runtime repairs it.
    let p = Profile::update(&cwd, |p| p.default_runtime = "codex".into()).unwrap();
    assert_eq!(p.runtimes, ["codex"]);
}

#[test]
fn an_invalid_folder_name_is_refused_with_advice() {
    let (_t, cwd) = peer_dir("2nd");
    let err = Profile::update(&cwd, |p| p.default_runtime = "claude".into()).unwrap_err();
    assert!(matches!(err, ProfileError::FolderName { .. }));
    assert!(err.to_string().contains("rename the folder"));
    assert!(!paths::peer::profile(&cwd).exists());
    assert_eq!(personality_of(Path::new("/x/Привет")).unwrap(), "privet");
}

#[test]
fn description_is_clamped_to_one_short_line() {
    assert_eq!(clamp_description("  one\r\n\n  two  "), "one two");
    let long = "x".repeat(500);
    let c = clamp_description(&long);
    assert_eq!(c.chars().count(), DESCRIPTION_MAX_CHARS);
    assert!(c.ends_with('…'));
    let exact = "é".repeat(DESCRIPTION_MAX_CHARS);
    assert_eq!(clamp_description(&exact), exact);

    let (_t, cwd) = peer_with_profile(
        "bob",
        r#"{"default_runtime":"claude","description":"line one\nline two"}"#,
    );
    let p = Profile::read(&cwd).unwrap().unwrap();
    assert_eq!(p.description.as_deref(), Some("line one line two"));
}

#[test]
fn nature_ephemerality_and_registry_projection() {
    let (_t, cwd) = peer_dir("owner");
    let p = Profile::update(&cwd, |p| {
        p.default_runtime = "telegram".into();
        p.wake_policy = Some("ephemeral".into());
        let mut tg = Map::new();
        tg.insert("bot_username".into(), Value::from("owner_bot"));
        let mut ifs = Map::new();
        ifs.insert("telegram".into(), Value::Object(tg));
        p.interfaces = Some(ifs);
    })
    .unwrap();
    assert_eq!(p.nature(), Intelligence::Natural);
    assert!(p.is_ephemeral());
    let rp = p.to_registry_peer(&cwd);
    assert_eq!(rp.personality, "owner");
    assert_eq!(rp.intelligence, "natural");
    assert_eq!(rp.description, "");
    assert_eq!(rp.cwd, cwd);
    assert_eq!(rp.telegram_bot(), Some("owner_bot"));

    let mut q = Profile::blank("x");
    q.default_runtime = "claude".into();
    q.intelligence = Some("human".into());
    assert_eq!(q.nature(), Intelligence::Natural);
    // The original tool's legacy spelling is projected as the current term (issue 30 item 7).
    assert_eq!(q.to_registry_peer(&cwd).intelligence, "natural");
    q.intelligence = Some("scripted".into());
    assert_eq!(q.to_registry_peer(&cwd).intelligence, "absent");
    q.intelligence = Some("robot".into());
    assert_eq!(q.to_registry_peer(&cwd).intelligence, "robot");
    assert!(!q.is_ephemeral());
}

#[test]
fn check_accepts_a_conforming_profile() {
    let (_t, cwd) = peer_dir("bob");
    Profile::update(&cwd, |p| {
        p.default_runtime = "claude".into();
        p.description = Some("Reviews code.".into());
    })
    .unwrap();
    assert_eq!(check(&cwd, &class_of), Findings::default());
}

#[test]
fn check_lists_every_violation() {
    let (_t, cwd) = peer_dir("bob");
    let long = "y".repeat(451);
    write_raw(
        &cwd,
        &format!(
            r#"{{"personality":"robert","runtimes":["codex","Bad-RT"],"default_runtime":"claude",
                "runtime":"claude","intelligence":"robot","description":"a\nb{long}"}}"#
        ),
    );
    let found = check(&cwd, &class_of);
    let want = [
        "\"Bad-RT\" is not a valid runtime name",
        "default runtime \"claude\" is not listed",
        "unknown intelligence \"robot\"",
    ];
    assert_each_contains(&found.errors, &want);
    // What someone chose is a warning, not an error (issue 11 item 2).
    let want = [
        "\"robert\" does not match the folder name \"bob\"",
        "legacy field \"runtime\"",
        "several lines",
        "454 chars long",
    ];
    assert_each_contains(&found.warnings, &want);
}

#[test]
fn repair_fixes_only_what_is_broken_and_read_keeping_name_keeps_a_chosen_name() {
    let (_t, cwd) = peer_dir("Old Lab Agent");
    let card = format!("Timer.\nRegister with:\n{}", "x".repeat(1300));
    let text = serde_json::json!({
        "personality": "labbot", "runtime": "claude", "runtimes": ["claude"],
        "description": card, "notifier": {"k": 1}
    })
    .to_string();
    write_raw(&cwd, &text);
    assert_eq!(
        Profile::repair(&cwd).unwrap(),
        ["set \"default_runtime\" to \"claude\""]
    );
    let v: Value = serde_json::from_str(&raw(&cwd)).unwrap();
    assert_eq!(v["personality"], "labbot");
    assert_eq!(v["description"], card.as_str());
    assert_eq!(v["runtime"], "claude");
    assert_eq!(v["notifier"]["k"], 1);
    assert_eq!(v["default_runtime"], "claude");
    let before = raw(&cwd);
    assert!(Profile::repair(&cwd).unwrap().is_empty());
    assert_eq!(raw(&cwd), before, "nothing broken: nothing written");
    let p = Profile::read_keeping_name(&cwd).unwrap().unwrap();
    assert_eq!(p.personality, "labbot");
    assert_eq!(p.to_registry_peer(&cwd).personality, "labbot");
    let found = check(&cwd, &class_of);
    assert!(found.errors.is_empty(), "{found:#?}");
}

#[test]
fn check_reports_nature_runtime_mismatch_missing_and_corrupt_files() {
    let (_t, cwd) = peer_with_profile(
        "ann",
        r#"{"personality":"ann","runtimes":["telegram","claude"],"default_runtime":"telegram"}"#,
    );
    assert_eq!(
        check(&cwd, &class_of).errors,
        ["a peer of natural intelligence may not run on \"claude\""]
    );
    write_raw(&cwd, "nope");
    let c = check(&cwd, &class_of).errors;
    assert_eq!(c.len(), 1);
    assert!(c[0].contains("invalid JSON"));

    let (_t2, empty) = peer_dir("carl");
    let c = check(&empty, &class_of).errors;
    assert_eq!(c.len(), 1);
    assert!(c[0].contains("iapeer init"), "{c:?}");
    write_raw(&empty, "{}");
    assert_eq!(
        check(&empty, &class_of).errors,
        [
            "\"personality\" is missing (expected \"carl\")",
            "no runtime declared — set \"default_runtime\" (e.g. \"claude\")"
        ]
    );
}

mod byte_for_byte {
    use super::*;
    use proptest::prelude::*;
    use serde_json::value::RawValue;
    use std::collections::BTreeMap;

    /// JSON value texts in the many spellings another tool may write: numbers serde_json
    /// would print otherwise (`1.0`, `1e3`, `-0`, integers past `u64`, long fractions),
    /// strings with escapes, and nested arrays and objects with odd spacing. No whitespace at
    /// either end (the text of a value is what lies between its first and last byte).
    fn value_text() -> impl Strategy<Value = String> {
        let number = "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,2})?";
        let string = proptest::collection::vec(
            prop_oneof![
                1 => "[a-z é]",
                6 => proptest::sample::select(
                    &["\\u00e9", "\\n", "\\\"", "\\/", "\\\\", "\\ud83d\\ude00"][..]
                )
                .prop_map(String::from),
            ],
            0..8,
        )
        .prop_map(|parts| format!("\"{}\"", parts.concat()));
        let space = prop_oneof![Just(""), Just(" "), Just("\n    "), Just("\t")];
        let leaf = prop_oneof![
            number.prop_map(String::from),
            string,
            Just("true".to_string()),
            Just("null".to_string()),
        ];
        leaf.prop_recursive(4, 32, 5, move |inner| {
            let item = (space.clone(), inner, space.clone());
            prop_oneof![
                proptest::collection::vec(item.clone(), 0..5).prop_map(|items| {
                    let parts: Vec<String> = items
                        .into_iter()
                        .map(|(a, v, b)| format!("{a}{v}{b}"))
                        .collect();
                    format!("[{}]", parts.join(","))
                }),
                proptest::collection::btree_map("[a-z]{1,4}", item, 0..5).prop_map(|members| {
                    let parts: Vec<String> = members
                        .into_iter()
                        .map(|(k, (a, v, b))| format!("{a}\"{k}\"{b}:{a}{v}{b}"))
                        .collect();
                    format!("{{{}}}", parts.join(","))
                }),
            ]
        })
    }

    /// The unknown keys' value texts in a profile file, by key.
    fn unknown_texts(text: &str) -> BTreeMap<String, String> {
        let all: BTreeMap<String, Box<RawValue>> = serde_json::from_str(text).unwrap();
        all.into_iter()
            .filter(|(k, _)| k.starts_with("x-"))
            .map(|(k, v)| (k, v.get().to_string()))
            .collect()
    }

    proptest! {
        /// Issue 26 item 9 (spec 01 §4): whatever a writer changes in a profile — a known
        /// field, a key of its own — every key it does not own keeps its value's text byte for
        /// byte, and the profile reads back as written.
        #[test]
        fn a_rewrite_keeps_every_unknown_value_byte_for_byte(
            unknown in proptest::collection::btree_map("x-[a-z]{1,6}", value_text(), 1..6),
            compact in any::<bool>(),
        ) {
            let (_t, cwd) = peer_dir("bob");
            let sep = if compact { "" } else { "\n  " };
            let mut parts = vec![format!("{sep}\"default_runtime\":\"echo\"")];
            parts.extend(unknown.iter().map(|(k, v)| format!("{sep}\"{k}\": {v}")));
            write_raw(&cwd, &format!("{{{}}}", parts.join(",")));
            let kept = Profile::update(&cwd, |p| {
                p.description = Some("edited".into());
                p.extra.insert("plugin-own".into(), serde_json::json!({"n": 1.5}));
            })
            .unwrap();
            let text = raw(&cwd);
            prop_assert_eq!(unknown_texts(&text), unknown.clone(), "{}", text);
            prop_assert_eq!(Profile::read(&cwd).unwrap(), Some(kept));
            // A second writer that changes nothing changes no byte.
            Profile::update(&cwd, |_| {}).unwrap();
            prop_assert_eq!(raw(&cwd), text);
        }
    }
}

/// `got` has one line per `want`, each containing its `want`.
fn assert_each_contains(got: &[String], want: &[&str]) {
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (got, want) in got.iter().zip(want) {
        assert!(got.contains(want), "{got:?} should contain {want:?}");
    }
}

//! Where the agent CLIs keep a peer's transcripts, for every kind of working folder (issue 7
//! item 3): Claude Code shortens long project-folder names, and iapeer must find them.
//!
//! `record_claude_project_folders` (ignored; run it by name with `--ignored`) re-records
//! `tests/fixtures/claude-2.1.332/project-folders.json` from the real CLI; the unit tests of
//! `runtime::claude_paths` read that fixture.

use crate::common;

use common::anthropic::AnthropicStandIn;
use common::TestEnv;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The Claude tests of this file run one at a time, each with a 20 s confirmation grace: on a
/// loaded 2-core machine (load average 10–16) Claude Code 2.1.332 had written its
/// `file-history-snapshot` for the submitted message but not yet its `user` record 4 s after
/// the paste, so the default 4 s grace failed the first delivery in the right folder. With
/// the wrong folder no grace is long enough, so these tests still fail on the old rule.
static ONE_CLAUDE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The confirmation grace these tests give (`IAP_HOST_LIVENESS_GRACE_MS`).
const GRACE_MS: &str = "20000";

fn claude_bin() -> String {
    std::env::var("IAPEER_TEST_CLAUDE_BIN").unwrap_or_else(|_| {
        panic!("IAPEER_TEST_CLAUDE_BIN is not set: run scripts/test.sh (it installs Claude Code with scripts/setup-agents.sh)")
    })
}

/// A folder under `base` whose absolute path is exactly `len` characters long (ASCII), made of
/// components of at most 100 characters.
fn folder_of_length(base: &Path, len: usize) -> PathBuf {
    let mut p = base.to_path_buf();
    let mut n = 0;
    while p.to_string_lossy().chars().count() < len {
        let left = len - p.to_string_lossy().chars().count() - 1;
        let part = if left > 100 && left - 100 < 2 {
            left - 2
        } else {
            left.min(100)
        };
        let part = part.max(1);
        n += 1;
        p.push(
            format!("{n}")
                .repeat(part)
                .chars()
                .take(part)
                .collect::<String>(),
        );
    }
    assert_eq!(p.to_string_lossy().chars().count(), len);
    p
}

/// The odd working folders recorded: (what, folder to run in).
fn odd_folders(base: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut v = vec![
        ("plain", base.join("peer_1.x")),
        ("spaces and quotes", base.join("my 'peer' \"x\"")),
        ("punctuation", base.join("a%b+c@d~e#f!g(h)i[j]k{l}m,n;o=p")),
        ("accented nfc", base.join("caf\u{e9}")),
        ("accented nfd", base.join("cafe\u{301}")),
        ("cjk", base.join("日本語")),
        ("emoji", base.join("crab🦀x")),
        ("trailing dash and dot", base.join("x-.")),
        ("newline and tab", base.join("a\nb\tc")),
    ];
    for len in [199, 200, 201, 258] {
        v.push((
            ["len 199", "len 200", "len 201", "len 258"]
                [[199, 200, 201, 258].iter().position(|l| *l == len).unwrap()],
            folder_of_length(base, len),
        ));
    }
    let long = folder_of_length(base, 230);
    v.push(("long with emoji", long.join("🦀🦀")));
    v.push(("long with accents", long.join("éàü")));
    v.push(("long in a symlink", base.join("link")));
    v
}

/// Run `claude -p hi` in each odd folder against the stand-in and write which folder under
/// `~/.claude/projects` each run created.
#[test]
#[ignore = "re-records a fixture from the real Claude Code; run by name with --ignored"]
fn record_claude_project_folders() {
    let _one = ONE_CLAUDE.lock().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::new();
    let api = AnthropicStandIn::start();
    let base = env.dir.path().join("w");
    let folders = odd_folders(&base);
    let mut rows = Vec::new();
    for (what, cwd) in &folders {
        if *what == "long in a symlink" {
            let target = folders
                .iter()
                .find(|(w, _)| *w == "len 258")
                .unwrap()
                .1
                .clone();
            std::os::unix::fs::symlink(&target, cwd).unwrap();
        } else {
            std::fs::create_dir_all(cwd).unwrap();
        }
        let projects = env.home.join(".claude/projects");
        let before: Vec<String> = transcripts(&projects);
        api.run_claude_print(&claude_bin(), &env.home, cwd, &[]);
        let new: Vec<String> = transcripts(&projects)
            .into_iter()
            .filter(|n| !before.contains(n))
            .map(|n| n.split('/').next().unwrap().to_string())
            .collect();
        assert_eq!(new.len(), 1, "{what}: new transcripts in {new:?}");
        rows.push(json!({"what": what, "cwd": cwd.to_string_lossy(), "folder": new[0]}));
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-2.1.332/project-folders.json");
    std::fs::write(&out, serde_json::to_string_pretty(&rows).unwrap() + "\n").unwrap();
}

/// Run `iapeer <args>`, require exit 0 and return stdout; on failure show the transcripts'
/// records too (was the message written at all?).
fn send_ok(env: &TestEnv, args: &[&str]) -> String {
    let o = env.run(args);
    if !o.status.success() {
        panic!(
            "{}\ntranscripts:\n{}\n{}",
            common::describe(&o),
            transcript_records(&env.home.join(".claude/projects")),
            env.diagnostics()
        );
    }
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every record of every transcript under `projects`: its type and timestamp (diagnostics).
fn transcript_records(projects: &Path) -> String {
    let mut out = String::new();
    for t in transcripts(projects) {
        for l in common::read(&projects.join(&t)).lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            out.push_str(&format!(
                "{t}: {} {}\n",
                v["type"].as_str().unwrap_or("?"),
                v["timestamp"].as_str().unwrap_or("")
            ));
        }
    }
    out
}

/// `<folder>/<file>` of every transcript under `projects`.
fn transcripts(projects: &Path) -> Vec<String> {
    let names = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|r| {
                r.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    names(projects)
        .into_iter()
        .flat_map(|f| {
            names(&projects.join(&f))
                .into_iter()
                .filter(|n| n.ends_with(".jsonl"))
                .map(move |n| format!("{f}/{n}"))
        })
        .collect()
}

/// Issue 7 item 3: a claude peer whose folder path is 258 characters long (Claude Code
/// names its project folder with a prefix and a hash) is woken, confirmed, and every later
/// send is delivered; idle time reads its real transcripts.
#[test]
fn claude_peer_in_a_258_character_folder_is_confirmed_and_later_sends_are_delivered() {
    let _one = ONE_CLAUDE.lock().unwrap_or_else(|e| e.into_inner());
    let mut env = TestEnv::new();
    env.set("IAPEER_CLAUDE_BIN", &claude_bin());
    env.set("IAP_HOST_LIVENESS_GRACE_MS", GRACE_MS);
    std::fs::write(
        env.home.join(".claude.json"),
        "{\"hasCompletedOnboarding\": true}",
    )
    .unwrap();
    let api = AnthropicStandIn::start();
    // Each message gets its own answer, so the end of its turn can be seen on the screen.
    api.script(|req| {
        let text = common::anthropic::last_user_text(req);
        match ["first", "second", "third"]
            .iter()
            .find(|w| text.contains(&format!("{w} message")))
        {
            Some(w) => common::anthropic::Reply::Text(format!("answered the {w}")),
            None => common::anthropic::Reply::Text("ok".into()),
        }
    });
    // A peer is named after its folder.
    let folder = folder_of_length(&env.dir.path().join("deep"), 255).join("cb");
    assert_eq!(folder.to_string_lossy().chars().count(), 258);
    std::fs::create_dir_all(folder.parent().unwrap()).unwrap();
    env.ok(&[
        "create",
        "cb",
        "--runtime",
        "claude",
        "--path",
        folder.to_str().unwrap(),
    ]);
    env.create_echo("ea");
    // Written where launch.env lives for a peer made with --path.
    let p = iapeer::paths::peer::launch_env(&folder, "claude");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(
        p,
        format!(
            "ANTHROPIC_BASE_URL={}\nANTHROPIC_API_KEY=sk-ant-standin-key\nIS_SANDBOX=1\n",
            api.url()
        ),
    )
    .unwrap();
    // Short idle time: the peer sleeps after the sends, and the next send resumes it.
    env.set("IAPEER_IDLE_SECS", "8");
    env.set("IAPEER_TICK_SECS", "1");
    env.start_daemon();
    for (i, word) in ["first", "second", "third"].iter().enumerate() {
        let msg = format!("{word} message to the deep folder");
        let out = send_ok(
            &env,
            &[
                "send",
                "cb",
                "--from",
                "echo-ea",
                "--message",
                &msg,
                "--topic",
                "t",
            ],
        );
        let want = if i == 0 {
            "delivered to cb (claude), woke"
        } else {
            "delivered to cb (claude)"
        };
        assert_eq!(out.trim(), want, "{}", env.diagnostics());
        env.wait_until("the model got the message", Duration::from_secs(60), |_| {
            api.main_requests()
                .iter()
                .any(|r| common::anthropic::last_user_text(r).contains(&msg))
        });
        // The answer on the screen, then no turn in progress (the request alone is not
        // enough: under load the screen shows the turn after the request is made).
        let answered = format!("answered the {word}");
        env.wait_until("the turn is over", Duration::from_secs(60), |e| {
            let s = e.screen("claude-cb");
            s.contains(&answered) && !s.contains("esc to interrupt")
        });
    }
    // Idle sleep, then the same topic resumes the conversation from the real transcripts.
    env.wait_until("cb sleeps", Duration::from_secs(60), |e| {
        e.status_of("cb", "claude") == "asleep"
    });
    let out = env.ok(&[
        "send",
        "cb",
        "--from",
        "echo-ea",
        "--message",
        "what came first?",
        "--topic",
        "t",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cb (claude), woke",
        "{}",
        env.diagnostics()
    );
    let last = env.events("lifecycle", "wake").last().cloned().unwrap();
    assert_eq!(last["mode"].as_str(), "resume", "{last:?}");
    env.wait_until("the resumed request", Duration::from_secs(60), |_| {
        api.main_requests().iter().any(|r| {
            common::anthropic::last_user_text(r).contains("what came first?")
                && common::anthropic::flatten(&r["messages"])
                    .contains("first message to the deep folder")
        })
    });
    // The transcripts are where Claude Code put them: a folder with a shortened name.
    let projects = env.home.join(".claude/projects");
    let names = transcripts(&projects);
    assert!(
        names
            .iter()
            .all(|n| n.split('/').next().unwrap().len() < 220),
        "{names:?}"
    );
    assert!(!names.is_empty());
}

/// The same for Codex: its session files name the working folder in `session_meta`, so a
/// 258-character folder is found like any other (audit of issue 7 item 3).
#[test]
fn codex_peer_in_a_258_character_folder_is_confirmed_and_later_sends_are_delivered() {
    use common::openai::{last_input_text, OpenAiStandIn};
    let codex_bin = std::env::var("IAPEER_TEST_CODEX_BIN")
        .unwrap_or_else(|_| panic!("IAPEER_TEST_CODEX_BIN is not set: run scripts/test.sh"));
    let mut env = TestEnv::new();
    env.set("IAPEER_CODEX_BIN", &codex_bin);
    let codex_home = env.home.join(".codex");
    env.set("CODEX_HOME", codex_home.to_str().unwrap());
    let api = OpenAiStandIn::start();
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5.1\"\nmodel_provider = \"standin\"\n\n[model_providers.standin]\nname = \"Stand-in\"\nbase_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"STANDIN_API_KEY\"\n",
            api.base_url()
        ),
    )
    .unwrap();
    let folder = folder_of_length(&env.dir.path().join("deep"), 255).join("cx");
    std::fs::create_dir_all(folder.parent().unwrap()).unwrap();
    env.ok(&[
        "create",
        "cx",
        "--runtime",
        "codex",
        "--path",
        folder.to_str().unwrap(),
    ]);
    env.create_echo("ea");
    let p = iapeer::paths::peer::launch_env(&folder, "codex");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, "STANDIN_API_KEY=sk-standin-key\n").unwrap();
    env.start_daemon();
    for (i, word) in ["first", "second"].iter().enumerate() {
        let msg = format!("{word} message to the deep codex folder");
        let out = env.ok(&[
            "send",
            "cx",
            "--from",
            "echo-ea",
            "--message",
            &msg,
            "--topic",
            "t",
        ]);
        let want = if i == 0 {
            "delivered to cx (codex), woke"
        } else {
            "delivered to cx (codex)"
        };
        assert_eq!(out.trim(), want, "{}", env.diagnostics());
        env.wait_until("the model got the message", Duration::from_secs(60), |_| {
            api.recorded()
                .iter()
                .any(|r| last_input_text(r).contains(&msg))
        });
        // The next send goes to an agent whose turn is over (the screen cannot tell).
        crate::busy::wait_codex_turns(&env, i + 1);
    }
}

/// `rename` of a claude peer (issue 7 item 8): its Claude Code history moves with its folder
/// and its resume memory with its identity, so after the rename the same topic resumes the
/// same conversation.
#[test]
fn a_renamed_claude_peer_resumes_its_conversation() {
    let _one = ONE_CLAUDE.lock().unwrap_or_else(|e| e.into_inner());
    let mut env = TestEnv::new();
    env.set("IAPEER_CLAUDE_BIN", &claude_bin());
    env.set("IAP_HOST_LIVENESS_GRACE_MS", GRACE_MS);
    env.set("IAPEER_IDLE_SECS", "8");
    env.set("IAPEER_TICK_SECS", "1");
    std::fs::write(
        env.home.join(".claude.json"),
        "{\"hasCompletedOnboarding\": true}",
    )
    .unwrap();
    let api = AnthropicStandIn::start();
    env.ok(&["create", "cb", "--runtime", "claude"]);
    env.create_echo("ea");
    env.launch_env(
        "cb",
        "claude",
        &format!(
            "ANTHROPIC_BASE_URL={}\nANTHROPIC_API_KEY=sk-ant-standin-key\nIS_SANDBOX=1\n",
            api.url()
        ),
    );
    env.start_daemon();
    send_ok(
        &env,
        &[
            "send",
            "cb",
            "--from",
            "echo-ea",
            "--message",
            "remember the number 42",
            "--topic",
            "t1",
        ],
    );
    env.wait_until("cb sleeps", Duration::from_secs(60), |e| {
        e.status_of("cb", "claude") == "asleep"
    });
    let out = env.ok(&["rename", "cb", "cc"]);
    assert!(out.contains("Claude Code history moved"), "{out}");
    let out = env.ok(&[
        "send",
        "cc",
        "--from",
        "echo-ea",
        "--message",
        "what was the number?",
        "--topic",
        "t1",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cc (claude), woke",
        "{}",
        env.diagnostics()
    );
    let last = env.events("lifecycle", "wake").last().cloned().unwrap();
    assert_eq!(last["mode"].as_str(), "resume", "{last:?}");
    env.wait_until("the resumed request", Duration::from_secs(60), |_| {
        api.main_requests().iter().any(|r| {
            common::anthropic::last_user_text(r).contains("what was the number?")
                && common::anthropic::flatten(&r["messages"]).contains("remember the number 42")
        })
    });
}

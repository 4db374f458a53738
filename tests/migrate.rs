//! Moving a team over from the original TypeScript iapeer (issue 11; spec 08 §2–§5, spec 01):
//! a `~/.iapeer` built exactly as the original writes it — profiles with the legacy `runtime`
//! mirror, the version-2 registry, a Claude peer's `.mcp.json` that sends only the identity
//! header, the host Codex config's `[mcp_servers.iapeer]` block naming
//! `bearer_token_env_var = "IAPEER_BEARER"`, runtime packages' manifests — works once our
//! daemon is started: each peer's MCP configuration is brought to the current form at its
//! wake, and messages flow both ways through a real Claude Code and a real Codex.

use crate::common;

use common::anthropic::{self, AnthropicStandIn};
use common::openai::{self, OpenAiStandIn};
use common::TestEnv;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn bin(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run scripts/test.sh (it installs the agents)")
    })
}

/// Write `text` at `path`, making its folders.
fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A peer folder as the original's `init` leaves it: the profile (with its legacy `runtime`
/// mirror), the doctrine template, and the runtime scope folders.
fn original_peer(root: &Path, name: &str, runtime: &str, description: &str) -> PathBuf {
    let cwd = root.join("peers").join(name);
    let profile = json!({
        "personality": name,
        "runtime": runtime,
        "default_runtime": runtime,
        "runtimes": [runtime],
        "description": description,
        "intelligence": "artificial",
    });
    put(
        &cwd.join(".iapeer/peer-profile.json"),
        &format!("{}\n", serde_json::to_string_pretty(&profile).unwrap()),
    );
    put(&cwd.join(".iapeer/IAPEER.md"), "# Peer doctrine\n\n");
    std::fs::create_dir_all(
        cwd.join(".iapeer/runtimes")
            .join(runtime)
            .join("plugins/iap"),
    )
    .unwrap();
    cwd
}

/// The registry as the original's single writer leaves it: version 2, sorted, pretty, with
/// `default_runtime` only.
fn original_registry(root: &Path, peers: &[(&str, &str, &str, &Path)]) {
    let peers: Vec<_> = peers
        .iter()
        .map(|(name, rt, desc, cwd)| {
            json!({
                "personality": name,
                "default_runtime": rt,
                "runtimes": [rt],
                "description": desc,
                "intelligence": "artificial",
                "cwd": cwd,
            })
        })
        .collect();
    put(
        &root.join("peers-profiles.json"),
        &format!(
            "{}\n",
            serde_json::to_string_pretty(&json!({"version": 2, "peers": peers})).unwrap()
        ),
    );
    put(&root.join("peers-profiles.lock"), "");
}

/// A team written by the original tool: claude peer `cl`, codex peer `cx`, echo peer `ea`
/// (ours, the test's messenger), the two runtime packages' manifests, and the host configs.
/// The daemon is started (the one step the migration needs) with both model stand-ins.
fn moved_over_world() -> (TestEnv, AnthropicStandIn, OpenAiStandIn) {
    let mut env = TestEnv::new();
    env.set("IAPEER_CLAUDE_BIN", &bin("IAPEER_TEST_CLAUDE_BIN"));
    env.set("IAPEER_CODEX_BIN", &bin("IAPEER_TEST_CODEX_BIN"));
    let codex_home = env.home.join(".codex");
    env.set("CODEX_HOME", codex_home.to_str().unwrap());
    let claude_api = AnthropicStandIn::start();
    let openai_api = OpenAiStandIn::start();
    let root = env.root.clone();

    let cl = original_peer(&root, "cl", "claude", "Claude peer of the old team.");
    let cx = original_peer(&root, "cx", "codex", "Codex peer of the old team.");
    // The original's `.mcp.json`: only the identity header, the literal daemon URL.
    put(
        &cl.join(".mcp.json"),
        &format!(
            "{}\n",
            serde_json::to_string_pretty(&json!({"mcpServers": {
                "notes": {"command": "notes-server", "args": ["--ro"]},
                "iapeer": {
                    "type": "http",
                    "url": "http://127.0.0.1:8765/mcp",
                    "headers": {"X-IAPeer-Identity": "${PEER_IDENTITY:-claude-cl}"}
                }
            }}))
            .unwrap()
        ),
    );
    // The host Codex config: the user's provider, then the block the original appends (and
    // the update-check key it prepends).
    put(
        &codex_home.join("config.toml"),
        &format!(
            "check_for_update_on_startup = false\n# the user's own settings\nmodel = \"gpt-5.1\"\nmodel_provider = \"standin\"\n\n[model_providers.standin]\nname = \"Stand-in\"\nbase_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"STANDIN_API_KEY\"\n\n[mcp_servers.iapeer]\nurl = \"http://127.0.0.1:8765/mcp\"\ndefault_tools_approval_mode = \"approve\"\nbearer_token_env_var = \"IAPEER_BEARER\"\n\n[mcp_servers.iapeer.env_http_headers]\n\"X-IAPeer-Identity\" = \"PEER_IDENTITY\"\n",
            openai_api.base_url()
        ),
    );
    // Runtime packages' manifests as the packages write them at install (no peer of theirs
    // is registered here: this world is about the agents).
    put(
        &root.join("runtimes/telegram/runtime.json"),
        "{\n  \"runtime\": \"telegram\",\n  \"version\": \"0.9.3\",\n  \"selfConfig\": {\n    \"command\": \"telegram-runtime\",\n    \"args\": [\"self-config\"]\n  }\n}\n",
    );
    put(
        &root.join("runtimes/notifier/runtime.json"),
        "{\n  \"runtime\": \"notifier\",\n  \"version\": \"1.4.0\",\n  \"selfConfig\": \"notifier-runtime\",\n  \"peers\": [\n    {\n      \"personality\": \"timer\",\n      \"description\": \"Timers.\"\n    }\n  ]\n}\n",
    );
    original_registry(
        &root,
        &[
            ("cl", "claude", "Claude peer of the old team.", &cl),
            ("cx", "codex", "Codex peer of the old team.", &cx),
        ],
    );
    // What any user who has run Claude Code once has.
    put(
        &env.home.join(".claude.json"),
        "{\"hasCompletedOnboarding\": true}",
    );
    // The test's messenger (ours), then the models' keys for the two agents.
    env.ok(&["create", "ea", "--runtime", "echo"]);
    put(
        &cl.join(".iapeer/runtimes/claude/launch.env"),
        &format!(
            "ANTHROPIC_BASE_URL={}\nANTHROPIC_API_KEY=sk-ant-standin-key\nIS_SANDBOX=1\n",
            claude_api.url()
        ),
    );
    put(
        &cx.join(".iapeer/runtimes/codex/launch.env"),
        "STANDIN_API_KEY=sk-standin-key\n",
    );
    env.start_daemon();
    (env, claude_api, openai_api)
}

#[test]
fn a_team_moved_over_from_the_original_tool_sends_both_ways_through_claude_and_codex() {
    let (env, claude_api, openai_api) = moved_over_world();
    // Claude: a message from ea → send to cx; a message from cx → finish.
    claude_api.script(|req| {
        let text = anthropic::last_user_text(req);
        if anthropic::has_tool_result(req) {
            anthropic::Reply::Text("sent".into())
        } else if text.contains("<iap from=\"ea\"") {
            anthropic::Reply::ToolUse(
                "mcp__iapeer__send_to_peer".into(),
                json!({"personality": "cx", "message": "hello codex, claude here", "topic": "mv"}),
            )
        } else {
            anthropic::Reply::Text("ok".into())
        }
    });
    // Codex: a message from cl → answer cl.
    openai_api.script(|req| {
        let last = openai::last_input_text(req);
        if openai::last_is_tool_output(req) {
            openai::Reply::Text("sent".into())
        } else if last.contains("<iap from=\"cl\"") {
            openai::Reply::Call(
                "mcp__iapeer".into(),
                "send_to_peer".into(),
                json!({"personality": "cl", "message": "hello claude, codex here", "topic": "mv"}),
            )
        } else {
            openai::Reply::Text("ok".into())
        }
    });
    let out = env.ok(&[
        "send",
        "cl",
        "--from",
        "echo-ea",
        "--message",
        "start",
        "--topic",
        "mv",
    ]);
    assert_eq!(
        out.trim(),
        "delivered to cl (claude), woke",
        "{}",
        env.diagnostics()
    );
    env.wait_until(
        "claude → codex and codex → claude through MCP",
        Duration::from_secs(150),
        |e| {
            let d = e.events("delivery", "delivery");
            let sent = |caller: &str, to: &str| {
                d.iter().any(|x| {
                    x["caller"] == caller
                        && x["to"] == to
                        && x["ok"] == "true"
                        && x["path"] == "mcp"
                })
            };
            sent("claude-cl", "cx") && sent("codex-cx", "cl")
        },
    );
    // Claude read codex's message.
    env.wait_until(
        "codex's words reach claude's model",
        Duration::from_secs(60),
        |_| {
            claude_api
                .main_requests()
                .iter()
                .any(|r| anthropic::last_user_text(r).contains("hello claude, codex here"))
        },
    );

    // The configs are in the current form and the user's settings survived.
    let mcp: serde_json::Value =
        serde_json::from_str(&common::read(&env.peer_dir("cl").join(".mcp.json"))).unwrap();
    assert_eq!(
        mcp["mcpServers"]["iapeer"]["headers"]["Authorization"],
        "Bearer ${IAPEER_TOKEN}"
    );
    assert_eq!(mcp["mcpServers"]["notes"]["args"], json!(["--ro"]));
    let config = common::read(&env.home.join(".codex/config.toml"));
    assert!(
        config.contains("bearer_token_env_var = \"IAPEER_TOKEN\"")
            && config.contains("[model_providers.standin]")
            && config.contains("# the user's own settings"),
        "{config}"
    );
}

/// The call card a notifier-like runtime package writes as its peer's description at
/// `self-config`: several lines, about 1.3 KB.
fn call_card() -> String {
    let mut card = String::from(
        "Timer service (runtime notifier). Register a timer by sending it a message.\n\nFormat:\n",
    );
    for i in 0..24 {
        card.push_str(&format!(
            "  line {i:02}: every <duration> | at <HH:MM> | cron <expr> -> <peer>: <text>\n"
        ));
    }
    card
}

#[test]
fn verify_warns_about_package_owned_and_hand_named_peers_and_fix_rewrites_neither() {
    let env = TestEnv::new();
    let root = env.root.clone();
    let card = call_card();
    assert!(
        card.len() > 1200 && card.lines().count() > 3,
        "{}",
        card.len()
    );
    // A peer named by hand in a folder of another name, as the original allows.
    let lab = env.home.join("Peers/Old Lab Agent");
    put(
        &lab.join(".iapeer/peer-profile.json"),
        "{\n  \"personality\": \"labbot\",\n  \"runtime\": \"claude\",\n  \"default_runtime\": \"claude\",\n  \"runtimes\": [\"claude\"],\n  \"description\": \"Lab assistant.\",\n  \"intelligence\": \"artificial\"\n}\n",
    );
    // The notifier package's timer after its own self-config: its card, its own key.
    let timer = root.join("peers/timer");
    let profile = json!({
        "personality": "timer",
        "runtime": "notifier",
        "default_runtime": "notifier",
        "runtimes": ["notifier"],
        "description": card,
        "intelligence": "absent",
        "notifier": {"kind": "timer"},
    });
    put(
        &timer.join(".iapeer/peer-profile.json"),
        &format!("{}\n", serde_json::to_string_pretty(&profile).unwrap()),
    );
    // The original's registry keeps the first 450 characters of a description.
    let cut: String = card.chars().take(450).collect();
    let peers = json!({"version": 2, "peers": [
        {"personality": "labbot", "default_runtime": "claude", "runtimes": ["claude"],
         "description": "Lab assistant.", "intelligence": "artificial", "cwd": lab},
        {"personality": "timer", "default_runtime": "notifier", "runtimes": ["notifier"],
         "description": cut, "intelligence": "absent", "cwd": timer},
    ]});
    put(
        &root.join("peers-profiles.json"),
        &format!("{}\n", serde_json::to_string_pretty(&peers).unwrap()),
    );
    let lab_before = common::read(&lab.join(".iapeer/peer-profile.json"));
    let timer_before = common::read(&timer.join(".iapeer/peer-profile.json"));

    // Warnings, not errors: exit 0.
    let out = env.ok(&["verify"]);
    assert!(
        out.contains("warning: labbot: personality \"labbot\" does not match the folder name \"old-lab-agent\""),
        "{out}"
    );
    assert!(
        out.contains("warning: timer: description spans several lines"),
        "{out}"
    );
    assert!(out.contains("ok: 2 peer(s), no problems"), "{out}");
    let v: serde_json::Value = serde_json::from_str(env.ok(&["verify", "--json"]).trim()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["warnings"].as_array().unwrap().len() >= 3, "{v}");

    // --fix repairs nothing that is not broken: both profiles byte for byte, the names kept.
    let out = env.ok(&["verify", "--fix"]);
    assert!(!out.contains("fixed labbot"), "{out}");
    assert!(!out.contains("fixed timer"), "{out}");
    assert_eq!(
        common::read(&lab.join(".iapeer/peer-profile.json")),
        lab_before
    );
    assert_eq!(
        common::read(&timer.join(".iapeer/peer-profile.json")),
        timer_before
    );
    let names: Vec<String> = env
        .list()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["personality"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["labbot", "timer"], "messages to labbot still route");
    env.ok(&["verify"]);

    // What is broken is repaired: a profile without default_runtime gets it, nothing else.
    put(
        &lab.join(".iapeer/peer-profile.json"),
        "{\n  \"personality\": \"labbot\",\n  \"runtime\": \"claude\",\n  \"description\": \"Lab assistant.\"\n}\n",
    );
    let (out, _) = env.fails(&["verify"], 1);
    assert!(out.contains("labbot: legacy field \"runtime\""), "{out}");
    let out = env.ok(&["verify", "--fix"]);
    assert!(
        out.contains("fixed labbot: set \"default_runtime\" to \"claude\""),
        "{out}"
    );
    let p: serde_json::Value =
        serde_json::from_str(&common::read(&lab.join(".iapeer/peer-profile.json"))).unwrap();
    assert_eq!(p["personality"], "labbot");
    assert_eq!(p["default_runtime"], "claude");
}

/// The owner as the original tool knew a human (issue 30 item 7): a peer on a channel
/// runtime (`telegram`; the original has no `human` runtime), written with the legacy
/// intelligence `human` its live fleet still carries (its `src/core/constants.ts` reads
/// `human` as `natural` and does not rewrite it), in its profile and in its registry.
fn original_human(env: &TestEnv) -> PathBuf {
    let cwd = env.root.join("peers/arthur");
    let profile = json!({
        "personality": "arthur",
        "runtime": "telegram",
        "default_runtime": "telegram",
        "runtimes": ["telegram"],
        "description": "The owner.",
        "intelligence": "human",
        "interfaces": {"telegram": {"bot_username": "arthur_bot"}},
    });
    put(
        &cwd.join(".iapeer/peer-profile.json"),
        &format!("{}\n", serde_json::to_string_pretty(&profile).unwrap()),
    );
    let peers = json!({"version": 2, "peers": [
        {"personality": "arthur", "default_runtime": "telegram", "runtimes": ["telegram"],
         "description": "The owner.", "intelligence": "human", "cwd": cwd,
         "interfaces": {"telegram": {"bot_username": "arthur_bot"}}},
    ]});
    put(
        &env.root.join("peers-profiles.json"),
        &format!("{}\n", serde_json::to_string_pretty(&peers).unwrap()),
    );
    cwd
}

/// `onboard` on a team moved over from the original: its human (a Telegram peer, no
/// `human` runtime) is the operator's human, and no second one is planned.
#[test]
fn onboard_on_a_moved_team_recognises_its_human() {
    let mut env = TestEnv::new();
    env.set("USER", "zed");
    original_human(&env);
    let out = env.ok(&["onboard", "--accept-risk", "--dry-run"]);
    assert!(out.contains("human peer arthur exists already"), "{out}");
    assert!(!out.contains("create your human peer"), "{out}");
}

/// `verify --fix` writes the current term into the registry (`natural`, not the legacy
/// `human`) and keeps the profile as written; before the fix, `verify` says so as a warning.
#[test]
fn verify_fix_writes_the_current_intelligence_into_the_registry() {
    let env = TestEnv::new();
    let cwd = original_human(&env);
    let before = common::read(&cwd.join(".iapeer/peer-profile.json"));
    let out = env.ok(&["verify"]);
    assert!(
        out.contains("warning: arthur: the registry writes the legacy intelligence \"human\""),
        "{out}"
    );
    env.ok(&["verify", "--fix"]);
    let reg: serde_json::Value =
        serde_json::from_str(&common::read(&env.root.join("peers-profiles.json"))).unwrap();
    assert_eq!(reg["peers"][0]["intelligence"], "natural", "{reg}");
    assert_eq!(
        common::read(&cwd.join(".iapeer/peer-profile.json")),
        before,
        "the profile keeps what was written"
    );
    let out = env.ok(&["verify"]);
    assert!(!out.contains("legacy intelligence"), "{out}");
}

/// A writer of the original tool holding its registry lock for `secs` seconds, the way its
/// `proper-lockfile` does: the directory `peers-profiles.lock.lock`, its mtime refreshed
/// every second, removed at release. Prints `held` once it has the lock.
fn original_lock_holder(root: &Path, secs: u32) -> std::process::Child {
    let python = std::env::var("IAPEER_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!(
        "import os,sys,time\nd={:?}\nos.mkdir(d)\nprint('held',flush=True)\nfor _ in range({secs}):\n    time.sleep(1)\n    os.utime(d)\nos.rmdir(d)\n",
        root.join("peers-profiles.lock.lock").display().to_string()
    );
    let mut child = std::process::Command::new(python)
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held");
    child
}

#[test]
fn a_registry_locked_by_the_original_tool_blocks_our_writer_until_released() {
    let env = TestEnv::new();
    env.create_echo("first");
    let mut holder = original_lock_holder(&env.root, 3);
    let started = std::time::Instant::now();
    env.create_echo("second");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(2500),
        "our writer went ahead while the original's lock was held ({waited:?})"
    );
    assert!(holder.wait().unwrap().success());
    let names: Vec<String> = env
        .list()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["personality"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["first", "second"]);
    // Ours is released too: the original's writer could take it now.
    assert!(!env.root.join("peers-profiles.lock.lock").exists());
}

#[test]
fn a_send_while_the_daemon_is_down_is_kept_and_delivered_when_it_starts() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.create_echo("carol");
    // The original delivered in-process; a script's send must not be lost with ours down.
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "sent while down",
        "--topic",
        "night",
    ]);
    assert!(
        out.starts_with("kept for bob in the outbox (") && out.contains("it delivers"),
        "{out}"
    );
    // A send the registry already refuses (a misspelt target or sender) is refused at once,
    // in the daemon's words, and not kept.
    let refused = |args: &[&str]| env.fails(&[&["send"], args].concat(), 1).1;
    let err = refused(&["bobb", "--from", "echo-alice", "--message", "typo"]);
    assert!(
        err.contains("peer \"bobb\" is not in the iapeer peers index") && err.contains("bob"),
        "{err}"
    );
    let err = refused(&["bob", "--from", "echo-alicia", "--message", "typo"]);
    assert!(err.contains("unknown caller \"alicia\""), "{err}");
    let to_bob = |more: &[&str]| {
        refused(&[&["bob", "--from", "echo-alice", "--message", "x"], more].concat())
    };
    let err = to_bob(&["--topic", "a\nb"]);
    assert!(
        err.contains("topic must not contain newline characters"),
        "{err}"
    );
    // So is a send the daemon would refuse before any delivery: to a stopped peer, or with
    // an attachment that cannot be read.
    let stopped = env.marker("echo-bob", ".stopped");
    std::fs::create_dir_all(stopped.parent().unwrap()).unwrap();
    std::fs::write(&stopped, "").unwrap();
    let err = to_bob(&[]);
    assert!(
        err.contains("is stopped and not accepting messages"),
        "{err}"
    );
    std::fs::remove_file(&stopped).unwrap();
    let missing = env.dir.path().join("no-such-file.txt");
    let missing = missing.to_str().unwrap();
    let err = to_bob(&["--attachment", missing]);
    assert!(
        err.contains(&format!("attachment 1 \"{missing}\" could not be copied")),
        "{err}"
    );
    // A send that was fine when kept but is refused when the daemon starts (its target
    // removed meanwhile) is set aside with its reason.
    env.ok(&[
        "send",
        "carol",
        "--from",
        "echo-alice",
        "--message",
        "lost?",
    ]);
    env.ok(&["remove", "carol"]);
    let outbox = env.root.join("state/iapeer/outbox");
    assert_eq!(std::fs::read_dir(&outbox).unwrap().count(), 2);

    env.start_daemon();
    env.wait_until("the kept send reaches bob", Duration::from_secs(30), |e| {
        e.has_event(
            "delivery",
            "delivery",
            &[("caller", "echo-alice"), ("to", "bob"), ("ok", "true")],
        )
    });
    env.wait_until("bob shows it", Duration::from_secs(20), |e| {
        e.pane("echo-bob").contains("sent while down")
    });
    env.wait_until("the outbox is settled", Duration::from_secs(20), |_| {
        let names: Vec<String> = std::fs::read_dir(&outbox)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.len() == 2 && names.iter().all(|n| n.contains(".refused"))
    });
    let reason = std::fs::read_dir(&outbox)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".txt"))
        .map(|e| common::read(&e.path()))
        .unwrap();
    assert!(reason.contains("carol"), "{reason}");
    // status and doctor say so, with the reason, where it is and what to do (issue 30 item
    // 6: it used to be only in the daemon's log).
    let refused = std::fs::read_dir(&outbox)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".refused"))
        .unwrap();
    for verb in ["status", "doctor"] {
        let text = String::from_utf8_lossy(&env.run(&[verb]).stdout).into_owned();
        assert!(
            text.contains(&format!(
                "outbox: 1 kept send(s) NOT delivered and not tried again (in {}):",
                outbox.display()
            )) && text.contains(&format!("  {refused}: refused: "))
                && text.contains("carol")
                && text.contains("what to do: read each reason; once its cause is fixed, send the message again with iapeer send"),
            "{verb}: {text}"
        );
    }
    let status: serde_json::Value = serde_json::from_str(&env.ok(&["status", "--json"])).unwrap();
    assert_eq!(status["outbox"]["waiting"], 0, "{status}");
    assert_eq!(
        status["outbox"]["set_aside"][0]["kind"], "refused",
        "{status}"
    );
    let doctor: serde_json::Value =
        serde_json::from_slice(&env.run(&["doctor", "--json"]).stdout).unwrap();
    let check = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "outbox")
        .cloned()
        .unwrap();
    assert_eq!(check["level"], "warn", "{doctor}");
    assert!(
        check["message"].as_str().unwrap().contains(&refused)
            && check["fix"].as_str().unwrap().contains("iapeer send"),
        "{doctor}"
    );
}

/// A kept send carries copies of its attachments (a script may delete its files as soon as
/// `send` returns); the recipient gets them once the daemon starts, under the same file
/// name, and the copies go with the routed send. A root where no peer was ever created
/// refuses the send instead of keeping it where no daemon looks.
#[test]
fn a_kept_send_carries_copies_of_its_attachments() {
    let mut env = TestEnv::new();
    let (_, err) = env.fails(&["send", "ops", "--from", "echo-ed", "--message", "x"], 1);
    assert!(
        err.contains("no peers are registered under") && err.contains("IAPEER_ROOT"),
        "{err}"
    );
    assert!(
        !env.root.join("state/iapeer/outbox").exists(),
        "nothing kept in a root without peers"
    );
    env.ok(&["create", "ops", "--runtime", "human"]);
    env.create_echo("ed");
    let file = env.dir.path().join("report.txt");
    std::fs::write(&file, "the nightly report").unwrap();
    let out = env.ok(&[
        "send",
        "ops",
        "--from",
        "echo-ed",
        "--message",
        "report attached",
        "--attachment",
        file.to_str().unwrap(),
    ]);
    assert!(out.starts_with("kept for ops in the outbox ("), "{out}");
    std::fs::remove_file(&file).unwrap();
    let outbox = env.root.join("state/iapeer/outbox");
    env.start_daemon();
    env.wait_until("ops has the message", Duration::from_secs(30), |e| {
        e.ok(&["inbox", "ops", "--all"]).contains("report attached")
    });
    let line = env.ok(&["inbox", "ops", "--all", "--json"]);
    let record: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    let copy = record["attachments"][0].as_str().unwrap();
    assert!(copy.ends_with("/report.txt"), "{record}");
    assert_eq!(
        common::read(std::path::Path::new(copy)),
        "the nightly report"
    );
    env.wait_until("the outbox is empty", Duration::from_secs(10), |_| {
        std::fs::read_dir(&outbox).unwrap().count() == 0
    });
}

/// A kept send refused for a reason that passes (its peer cannot be woken now) stays in the
/// outbox and is tried again while the daemon runs; it used to be set aside as `.refused`
/// for good, as if its peer had been removed.
#[test]
fn a_kept_send_that_cannot_be_delivered_yet_is_tried_again() {
    let mut env = TestEnv::new();
    env.set("IAPEER_OUTBOX_RETRY_MS", "300");
    env.set("IAPEER_CRASHLOOP_MAX", "1000");
    env.create_echo("alice");
    env.create_echo("bob");
    env.launch_env("bob", "echo", "PEER_START_ARGS=--fail-boot\n");
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "when you can",
    ]);
    assert!(out.starts_with("kept for bob in the outbox ("), "{out}");
    let outbox = env.root.join("state/iapeer/outbox");
    env.start_daemon();
    env.wait_until("a wake of bob failed", Duration::from_secs(30), |e| {
        e.has_event("delivery", "delivery", &[("to", "bob"), ("ok", "false")])
    });
    let names: Vec<String> = std::fs::read_dir(&outbox)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.len() == 1 && names[0].ends_with(".json"),
        "kept as it was, not refused: {names:?}"
    );
    env.launch_env("bob", "echo", "");
    env.wait_until("bob shows it", Duration::from_secs(30), |e| {
        e.pane("echo-bob").contains("when you can")
    });
    env.wait_until("the outbox is empty", Duration::from_secs(10), |_| {
        std::fs::read_dir(&outbox).unwrap().count() == 0
    });
}

#[test]
fn the_answers_companion_packages_parse() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    // interrupt on a peer that is not live says `offline`.
    let (_, err) = env.fails(&["interrupt", "bob"], 1);
    assert!(err.contains("offline"), "{err}");
    // list --json has the original's `last_active_runtime`.
    let rows = env.list();
    assert!(rows[1].get("last_active_runtime").is_none(), "{rows}");
    env.ok(&["send", "bob", "--from", "echo-alice", "--message", "hi"]);
    let rows = env.list();
    let bob = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["personality"] == "bob")
        .unwrap();
    assert_eq!(bob["last_active_runtime"], "echo", "{bob}");
}

#[test]
fn an_old_run_infra_job_gets_a_migration_line_and_does_not_crash_loop() {
    let env = TestEnv::new();
    env.create_echo("alice");
    for args in [
        ["run-infra", "alice", "telegram"],
        ["run-infra", "telegram", "alice"],
    ] {
        let mut child = env
            .cmd(&args)
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stderr.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert!(
            line.starts_with("iapeer run-infra: this service job is the original iapeer's")
                && line.contains("com.iapeer.alice")
                && !line.contains("unknown verb"),
            "{line}"
        );
        // It waits instead of exiting: it has gone to sleep in the kernel until it is removed.
        assert!(
            common::poll(Duration::from_secs(10), || common::in_sleep(child.id())),
            "it never went to sleep"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "it waits instead of exiting"
        );
        common::signal(child.id(), nix::sys::signal::Signal::SIGTERM);
        child.wait().unwrap();
    }
}

/// A unit that `install` only wrote (never enabled: `onboard` asks first) is not turned on
/// by a send: the message waits in the outbox and stderr says why the service was left.
#[test]
fn a_send_while_the_daemon_is_down_leaves_a_service_that_is_not_enabled_alone() {
    use crate::service::{installed, with_fake_systemd};
    let mut env = TestEnv::new();
    let (sd, fake) = with_fake_systemd(&mut env);
    installed(&mut env);
    env.ok(&["install"]);
    assert!(sd.join("iapeer.service").exists(), "install wrote the unit");
    env.create_echo("alice");
    env.create_echo("bob");
    let out = env.run(&["send", "bob", "--from", "echo-alice", "--message", "later"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("kept for bob in the outbox"),
        "{}",
        common::describe(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("installed but not enabled"),
        "{}",
        common::describe(&out)
    );
    let calls = fake.calls();
    assert!(
        calls
            .iter()
            .all(|c| c.contains("is-enabled") || c.contains("is-active")),
        "only asked, never changed: {calls:?}"
    );
    assert!(!env.socket().exists(), "no daemon was started");
}

#[test]
fn a_send_while_the_daemon_is_down_starts_it_through_an_installed_service() {
    use crate::service::{installed, with_fake_systemd, StopAtEnd};
    let mut env = TestEnv::new();
    let (_sd, fake) = with_fake_systemd(&mut env);
    installed(&mut env);
    let _stop = StopAtEnd(&env);
    env.ok(&["onboard", "--accept-risk"]);
    env.create_echo("alice");
    env.create_echo("bob");
    env.ok(&["shutdown"]);
    assert!(!env.socket().exists());
    let out = env.run(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "wake up",
    ]);
    assert!(out.status.success(), "{}", common::describe(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "delivered to bob (echo), woke"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("started the daemon through its service (systemctl --user restart iapeer)"),
        "{}",
        common::describe(&out)
    );
    assert_eq!(
        fake.calls().last().map(String::as_str),
        Some("systemctl --user restart iapeer")
    );
    assert!(!env.root.join("state/iapeer/outbox").exists());
}

//! The memory slot (spec 08 §3, issue 11 item 4): a memory provider shaped like
//! `@agfpd/iapeer-memory` (its `init` claims the slot with `provision` / `unprovision`
//! commands; `provision-peer` puts a Codex `hooks.json` in the peer folder and trusts it with
//! `iapeer trust-hooks`), installed with the real `npm` from a tarball the test packs, is
//! called at a peer's birth and removal; `native-memory` flips the runtimes' own memory;
//! `trust-hooks` makes the real Codex run a peer's hooks without a review; `status` reports
//! the slot and its heartbeat.

use crate::common;

use common::TestEnv;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run scripts/test.sh (it installs the agents)")
    })
}

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A world with both agent runtimes installed and `iapeer` on PATH (the provider calls it).
fn world() -> TestEnv {
    let mut env = TestEnv::new();
    env.set("IAPEER_CLAUDE_BIN", &bin("IAPEER_TEST_CLAUDE_BIN"));
    env.set("IAPEER_CODEX_BIN", &bin("IAPEER_TEST_CODEX_BIN"));
    let path_dir = env.dir.path().join("path");
    std::fs::create_dir_all(&path_dir).unwrap();
    std::os::unix::fs::symlink(common::bin(), path_dir.join("iapeer")).unwrap();
    let path = format!(
        "{}:{}",
        path_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.set("PATH", &path);
    env
}

/// The provider program: `init` claims the slot (as the real package's `init` does),
/// `provision-peer` / `unprovision-peer` record their arguments in `calls.jsonl` and put or
/// take away the peer's Codex hooks, trusting them through `iapeer trust-hooks`.
const PROVIDER: &str = r#"#!/usr/bin/env node
const fs = require("fs"), path = require("path"), cp = require("child_process");
const root = process.env.IAPEER_ROOT;
const state = path.join(root, "state", "iapeer-memory");
fs.mkdirSync(state, { recursive: true });
const [verb, ...rest] = process.argv.slice(2);
const opt = (name) => rest[rest.indexOf("--" + name) + 1];
const self = path.resolve(process.argv[1]);
if (verb === "init") {
  const heartbeat = path.join(state, "memoryd.heartbeat");
  fs.writeFileSync(heartbeat, "");
  const common = ["--cwd", "{cwd}", "--runtime", "{runtime}"];
  const slot = {
    provider: "iapeer-memory", package: "@agfpd/iapeer-memory",
    version: "1.4.0-test", registeredAt: new Date().toISOString(), heartbeat,
    provision: { command: self, args: ["provision-peer", ...common, "--personality", "{personality}", "--occasion", "{occasion}"] },
    unprovision: { command: self, args: ["unprovision-peer", ...common, "--occasion", "{occasion}"] },
  };
  fs.writeFileSync(path.join(root, "memory-provider.json.tmp"), JSON.stringify(slot, null, 2) + "\n");
  fs.renameSync(path.join(root, "memory-provider.json.tmp"), path.join(root, "memory-provider.json"));
  console.log("slot claimed");
  process.exit(0);
}
fs.appendFileSync(path.join(state, "calls.jsonl"), JSON.stringify([verb, ...rest]) + "\n");
const hooks = path.join(opt("cwd"), ".codex", "hooks.json");
if (verb === "provision-peer" && opt("runtime") === "codex") {
  fs.mkdirSync(path.dirname(hooks), { recursive: true });
  fs.writeFileSync(hooks, JSON.stringify({ hooks: {
    PostToolUse: [{ hooks: [{ type: "command", command: path.join(state, "post-write.sh") }] }],
    SessionStart: [{ hooks: [{ type: "command", command: path.join(state, "session-start.sh") }] }],
  } }, null, 2) + "\n");
  const r = cp.spawnSync("iapeer", ["trust-hooks", fs.realpathSync(hooks)], { encoding: "utf8" });
  if (r.status !== 0) { process.stderr.write("trust-hooks failed: " + r.stderr); process.exit(4); }
}
if (verb === "unprovision-peer" && opt("runtime") === "codex") fs.rmSync(hooks, { force: true });
"#;

/// Pack the look-alike provider with the real `npm pack` and install the tarball with the
/// real `npm install` (offline, a private cache) into `<test>/npm`; then run its `init`.
/// Returns the installed program's path.
fn install_provider(env: &TestEnv) -> PathBuf {
    let dir = env.dir.path();
    let src = common::npm::write_package(
        dir,
        "provider-src",
        "@agfpd/iapeer-memory",
        "1.4.0-test",
        "iapeer-memory",
        PROVIDER,
    );
    let installed = common::npm::pack_and_install(dir, &env.home, &src, "iapeer-memory");
    let out = Command::new(&installed)
        .arg("init")
        .env("IAPEER_ROOT", &env.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "init: {}", common::describe(&out));
    installed
}

fn calls(env: &TestEnv) -> Vec<Vec<String>> {
    std::fs::read_to_string(env.root.join("state/iapeer-memory/calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn provisions(env: &TestEnv) -> Vec<std::collections::HashMap<String, String>> {
    env.events("lifecycle", "memory-provision")
}

fn codex_config(env: &TestEnv) -> String {
    std::fs::read_to_string(env.home.join(".codex/config.toml")).unwrap_or_default()
}

#[test]
fn the_memory_provider_equips_a_peer_at_birth_and_strips_it_at_removal() {
    let env = world();
    install_provider(&env);
    env.ok(&["create", "bob", "--runtime", "claude"]);
    let cwd = env.peer_dir("bob").canonicalize().unwrap();
    let cwd_s = cwd.to_str().unwrap();

    // One provision per agent runtime, the placeholders filled in inside each argument.
    let birth: Vec<Vec<String>> = ["claude", "codex"]
        .iter()
        .map(|rt| {
            [
                "provision-peer",
                "--cwd",
                cwd_s,
                "--runtime",
                rt,
                "--personality",
                "bob",
                "--occasion",
                "birth",
            ]
            .map(String::from)
            .to_vec()
        })
        .collect();
    assert_eq!(calls(&env), birth, "{}", env.diagnostics());
    for id in ["claude-bob", "codex-bob"] {
        let ev = provisions(&env)
            .into_iter()
            .find(|e| e["identity"] == id)
            .unwrap_or_else(|| {
                panic!(
                    "no memory-provision event for {id}: {}",
                    env.log("lifecycle")
                )
            });
        assert_eq!(
            (
                ev["occasion"].as_str(),
                ev["state"].as_str(),
                ev["exit"].as_str()
            ),
            ("birth", "ok", "0")
        );
        assert!(ev["ms"].parse::<u64>().is_ok(), "{ev:?}");
    }
    // Native memory went off before the provider ran.
    let claude: Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join(".claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(claude["autoMemoryEnabled"], Value::Bool(false));
    let codex_project = std::fs::read_to_string(cwd.join(".codex/config.toml")).unwrap();
    assert!(
        codex_project.contains("[features]\nmemories = false"),
        "{codex_project}"
    );
    // The provider's hooks are trusted for the real Codex (through iapeer trust-hooks).
    let hooks = cwd.join(".codex/hooks.json");
    env.ok(&["trust-hooks", hooks.to_str().unwrap(), "--check"]);
    let key = format!("{cwd_s}/.codex/hooks.json:session_start:0:0");
    assert!(codex_config(&env).contains(&key), "{}", codex_config(&env));

    env.ok(&["remove", "bob"]);
    let all = calls(&env);
    let removal: Vec<Vec<String>> = ["claude", "codex"]
        .iter()
        .map(|rt| {
            [
                "unprovision-peer",
                "--cwd",
                cwd_s,
                "--runtime",
                rt,
                "--occasion",
                "remove",
            ]
            .map(String::from)
            .to_vec()
        })
        .collect();
    assert_eq!(all[2..], removal[..]);
    assert_eq!(
        provisions(&env)
            .iter()
            .filter(|e| e["occasion"] == "remove" && e["state"] == "ok")
            .count(),
        2
    );
    assert!(!hooks.exists(), "the provider took its hooks away");
    assert!(
        !codex_config(&env).contains(&key),
        "remove drops the peer's hook trust: {}",
        codex_config(&env)
    );
}

/// A slot whose provision command is `program` with the given arguments.
fn hand_slot(env: &TestEnv, program: &Path, args: &[&str]) {
    put(
        &env.root.join("memory-provider.json"),
        &json!({
            "provider": "m", "package": "@x/m", "version": "1", "registeredAt": "",
            "provision": {"command": program, "args": args},
        })
        .to_string(),
    );
}

#[test]
fn a_failing_hanging_or_missing_provider_never_blocks_the_birth() {
    let mut env = world();
    let script = env.dir.path().join("provider.sh");
    put(
        &script,
        "#!/bin/sh\necho \"provisioning $1\" >&2\ncase \"$1\" in\n  *-fail) echo 'vault unreachable' >&2; exit 3;;\n  *-hang) sleep 30;;\nesac\n",
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    hand_slot(&env, &script, &["{personality}-{occasion}-fail"]);
    let out = env.run(&["create", "ann", "--runtime", "claude"]);
    assert!(out.status.success(), "{}", common::describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("provision for claude-ann ended failed (exit 3)"),
        "{stderr}"
    );
    let ev = provisions(&env).into_iter().next().expect("an event");
    assert_eq!((ev["state"].as_str(), ev["exit"].as_str()), ("failed", "3"));
    assert_eq!(
        ev["detail"],
        "provisioning ann-birth-fail\nvault unreachable"
    );

    env.set("IAPEER_MEMORY_PROVISION_SECS", "1");
    hand_slot(&env, &script, &["x-hang"]);
    let started = Instant::now();
    env.ok(&["create", "cid", "--runtime", "claude"]);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let states: Vec<_> = provisions(&env)
        .into_iter()
        .filter(|e| e["identity"].ends_with("-cid"))
        .map(|e| e["state"].clone())
        .collect();
    assert_eq!(states, ["timeout", "timeout"]);

    let not_exec = env.dir.path().join("not-executable");
    put(&not_exec, "#!/bin/sh\n");
    hand_slot(&env, &not_exec, &[]);
    env.ok(&["create", "dee", "--runtime", "claude"]);
    let ev = provisions(&env)
        .into_iter()
        .find(|e| e["identity"] == "claude-dee")
        .expect("an event for dee");
    assert_eq!(ev["state"], "not-executable");
    assert!(env.ok(&["list", "--json"]).contains("\"dee\""));
}

#[test]
fn native_memory_off_and_on_flip_each_runtime_s_lever_and_keep_the_rest() {
    let env = world();
    env.ok(&["create", "bob", "--runtime", "claude"]);
    let cwd = env.peer_dir("bob");
    let settings = cwd.join(".claude/settings.json");
    put(&settings, r#"{"model": "opus", "env": {"A": "1"}}"#);
    let project = cwd.join(".codex/config.toml");
    put(&project, "# mine\nmodel = \"o3\"\n");

    let out = env.ok(&["native-memory", "off", "--peer", "bob"]);
    assert!(out.contains("bob: claude written"), "{out}");
    assert!(out.contains("bob: codex written"), "{out}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(
        s,
        json!({"model": "opus", "env": {"A": "1"}, "autoMemoryEnabled": false})
    );
    assert_eq!(
        std::fs::read_to_string(&project).unwrap(),
        "# mine\nmodel = \"o3\"\n\n[features]\nmemories = false\n"
    );
    let again = env.ok(&["native-memory", "off", "--all"]);
    assert!(
        again.contains("bob: claude already") && again.contains("bob: codex already"),
        "{again}"
    );

    let on = env.ok(&["native-memory", "on", "--peer", "bob", "--json"]);
    let doc: Value = serde_json::from_str(&on).unwrap();
    assert_eq!(doc["levers"][0]["state"], "written", "{doc}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(
        s,
        json!({"model": "opus", "env": {"A": "1"}}),
        "on deletes, never writes true"
    );
    assert_eq!(
        std::fs::read_to_string(&project).unwrap(),
        "# mine\nmodel = \"o3\"\n"
    );

    put(&settings, "[1, 2]");
    let (stdout, _) = env.fails(&["native-memory", "off", "--peer", "bob"], 1);
    assert!(
        stdout.contains("bob: claude failed") && stdout.contains("not a JSON object"),
        "{stdout}"
    );
    assert!(
        stdout.contains("bob: codex written"),
        "the other lever still moves: {stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&settings).unwrap(),
        "[1, 2]",
        "never clobbered"
    );
    env.fails(&["native-memory", "sideways", "--peer", "bob"], 2);
}

/// Ask the real Codex (`codex app-server`, `hooks/list`) how it sees the hooks of `cwd`:
/// `(key, trustStatus)` of each.
fn codex_hook_trust(env: &TestEnv, cwd: &Path) -> Vec<(String, String)> {
    let mut child = Command::new(bin("IAPEER_TEST_CODEX_BIN"))
        .arg("app-server")
        .env("HOME", &env.home)
        .env("CODEX_HOME", env.home.join(".codex"))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("codex app-server");
    let pid = child.id();
    // A watchdog: a hung app-server is killed after 60 s; one that answered is let go.
    let (answered, hung) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            hung.recv_timeout(Duration::from_secs(60))
        {
            common::signal(pid, nix::sys::signal::Signal::SIGKILL);
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    for msg in [
        json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "test", "version": "0"}}}),
        json!({"method": "initialized"}),
        json!({"id": 2, "method": "hooks/list", "params": {"cwds": [cwd]}}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    let answer = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .find(|v| v["id"] == 2)
        .expect("codex answered hooks/list");
    drop(answered);
    watchdog.join().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    answer["result"]["data"][0]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["key"].as_str().unwrap().to_string(),
                h["trustStatus"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn trust_hooks_makes_the_real_codex_run_a_peer_s_hooks_without_review() {
    let env = world();
    env.ok(&["create", "cx", "--runtime", "codex"]);
    let cwd = env.peer_dir("cx").canonicalize().unwrap();
    let hooks = cwd.join(".codex/hooks.json");
    put(
        &hooks,
        r#"{"hooks": {"PreToolUse": [{"matcher": "^Bash$", "hooks": [{"type": "command", "command": "echo guard", "timeout": 30}]}],
                     "Stop": [{"hooks": [{"type": "command", "command": "echo stop", "statusMessage": "bye"}]}]}}"#,
    );
    let file = hooks.to_str().unwrap();
    let before = codex_hook_trust(&env, &cwd);
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(before.iter().all(|(_, t)| t == "untrusted"), "{before:?}");
    let (out, _) = env.fails(&["trust-hooks", file, "--check"], 1);
    assert!(
        out.contains(&format!("missing {file}:pre_tool_use:0:0")),
        "{out}"
    );

    let out = env.ok(&["trust-hooks", file]);
    assert!(
        out.starts_with(&format!("trusted 2 hooks of {file}")),
        "{out}"
    );
    let after = codex_hook_trust(&env, &cwd);
    assert!(
        after.iter().all(|(_, t)| t == "trusted"),
        "the real Codex: {after:?}"
    );
    assert!(env
        .ok(&["trust-hooks", file])
        .starts_with("already trusted: 2 hooks"));
    let check = env.ok(&["trust-hooks", file, "--check"]);
    assert!(
        check.contains(&format!("trusted {file}:stop:0:0")),
        "{check}"
    );

    // A changed hook is drift, for us and for Codex.
    let text = std::fs::read_to_string(&hooks)
        .unwrap()
        .replace("echo stop", "echo stopped");
    std::fs::write(&hooks, text).unwrap();
    let (out, _) = env.fails(&["trust-hooks", file, "--check"], 1);
    assert!(out.contains(&format!("drift {file}:stop:0:0")), "{out}");
    let codex = codex_hook_trust(&env, &cwd);
    assert!(
        codex.contains(&(format!("{file}:stop:0:0"), "modified".to_string())),
        "{codex:?}"
    );

    put(&cwd.join("bad.json"), "[]");
    let (_, err) = env.fails(&["trust-hooks", cwd.join("bad.json").to_str().unwrap()], 1);
    assert!(err.contains("is not a Codex hooks file"), "{err}");
}

#[test]
fn status_reports_the_memory_slot_and_the_age_of_its_heartbeat() {
    let env = world();
    let status = |env: &TestEnv| env.fails(&["status"], 1).0;
    assert!(status(&env).contains("\nmemory: none\n"));
    let heartbeat = env.dir.path().join("memoryd.heartbeat");
    let slot = |package: &str| {
        put(
            &env.root.join("memory-provider.json"),
            &json!({"provider": "iapeer-memory", "package": package, "version": "1.4.0",
                    "registeredAt": "", "heartbeat": heartbeat})
            .to_string(),
        )
    };
    slot("@agfpd/iapeer-memory");
    put(&heartbeat, "");
    let out = status(&env);
    assert!(
        out.contains("\nmemory: iapeer-memory 1.4.0 (heartbeat 0s ago)\n")
            || out.contains("\nmemory: iapeer-memory 1.4.0 (heartbeat 1s ago)\n"),
        "{out}"
    );
    let json: Value = serde_json::from_str(&env.fails(&["status", "--json"], 1).0).unwrap();
    assert_eq!(json["memory"]["provider"], "iapeer-memory", "{json}");
    assert_eq!(json["memory"]["package"], "@agfpd/iapeer-memory");
    assert!(json["memory"]["heartbeat_age_secs"].as_u64().unwrap() <= 1);

    std::fs::remove_file(&heartbeat).unwrap();
    let out = status(&env);
    assert!(
        out.contains("\nmemory: iapeer-memory 1.4.0 (heartbeat missing: its daemon is not running"),
        "{out}"
    );
    slot("");
    assert!(
        status(&env).contains("\nmemory: none\n"),
        "a slot without its package is empty"
    );
}

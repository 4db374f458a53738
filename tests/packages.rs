//! Runtime packages (spec 08 §2, issue 11 item 3, issue 9's `install-runtime notifier`):
//! small packages shaped like the real ones (`@agfpd/telegram-runtime`,
//! `@agfpd/notifier-runtime`) are built here, packed with the real `npm pack` and installed
//! from the tarball with the real `npm install` (no network: a local tarball without
//! dependencies, npm's cache in the test's folder). Run without arguments, the package's program
//! writes `runtimes/<rt>/runtime.json`; `self-config` records the `IAPEER_PEER_*` variables and
//! marks the peer configured; `run` refuses to run unconfigured (as telegram's does, "current
//! peer missing interfaces.telegram.user_id") and otherwise answers every message on its stdin
//! with `iapeer send`.

use crate::common;

use common::TestEnv;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The package's program. `@RT@`, `@VERSION_JSON@` and `@PEERS_JSON@` are filled in when the
/// package is built; in `@PEERS_JSON@`, `$self` is the program's own installed path.
const PROGRAM: &str = r#"#!/bin/sh
self=$(readlink -f "$0")
case "$1" in
"")
  # The package's own install, as npx runs it: write the manifest under IAPEER_ROOT.
  dir="$IAPEER_ROOT/runtimes/@RT@"
  mkdir -p "$dir"
  cat > "$dir/runtime.json.tmp" <<EOF
{"version": @VERSION_JSON@, "selfConfig": {"command": "$self", "args": ["self-config"]}, @RUN_JSON@ "peers": @PEERS_JSON@}
EOF
  mv "$dir/runtime.json.tmp" "$dir/runtime.json"
  echo "installed @RT@ at $self"
  ;;
self-config)
  env | grep '^IAPEER_' | sort > "$PWD/self-config.env"
  if [ -n "$PKG_FAIL_CONFIG" ]; then
    echo "no user id given for $IAPEER_PEER_PERSONALITY" >&2
    exit 3
  fi
  echo "user_id=42" > "$PWD/.iapeer/@RT@-configured"
  ;;
run)
  if [ ! -f "$PWD/.iapeer/@RT@-configured" ]; then
    echo "current peer missing interfaces.@RT@.user_id" >&2
    exit 1
  fi
  echo "@RT@ up as $PEER_IDENTITY"
  from=""
  while IFS= read -r line; do
    case "$line" in
      '<iap from-personality="'*)
        from=$(printf '%s\n' "$line" | sed 's/^<iap from-personality="\([^"]*\)".*/\1/') ;;
      *'<message><![CDATA[echo: '*) ;;
      *'<message><![CDATA['*)
        iapeer send "$from" --message "@RT@ @VERSION@ got it" || echo "reply failed" ;;
    esac
  done
  ;;
esac
"#;

/// One package to build.
struct Package<'a> {
    runtime: &'a str,
    /// package.json's version.
    version: &'a str,
    /// How the manifest states it (JSON: a string, or a number as older packages wrote).
    version_json: &'a str,
    /// The manifest's `peers` (JSON, may use `$self`).
    peers_json: &'a str,
    /// Whether the manifest names `run` (else each peer's `runtimeBin` is used).
    with_run: bool,
}

impl Package<'_> {
    /// Write the package's folder and pack it with `npm pack` into `out`; the tarball's path.
    fn pack(&self, env: &TestEnv, out: &Path) -> PathBuf {
        let src = env
            .dir
            .path()
            .join(format!("src-{}-{}", self.runtime, self.version));
        std::fs::create_dir_all(src.join("bin")).unwrap();
        let name = format!("iapeer-test-{}-runtime", self.runtime);
        let pkg = serde_json::json!({
            "name": name,
            "version": self.version,
            "bin": { format!("{}-runtime", self.runtime): "bin/program" },
        });
        std::fs::write(src.join("package.json"), pkg.to_string()).unwrap();
        let run = if self.with_run {
            r#""run": {"command": "$self", "args": ["run"]},"#
        } else {
            ""
        };
        let program = PROGRAM
            .replace("@RT@", self.runtime)
            .replace("@VERSION_JSON@", self.version_json)
            .replace("@VERSION@", self.version)
            .replace("@RUN_JSON@", run)
            .replace("@PEERS_JSON@", self.peers_json);
        let bin = src.join("bin/program");
        std::fs::write(&bin, program).unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        std::fs::create_dir_all(out).unwrap();
        let status = npm(env)
            .arg("pack")
            .arg(&src)
            .arg("--pack-destination")
            .arg(out)
            .status()
            .expect("npm pack");
        assert!(status.success(), "npm pack failed");
        out.join(format!("{name}-{}.tgz", self.version))
    }
}

/// `npm` with the test's cache, PATH and no registry traffic of its own.
fn npm(env: &TestEnv) -> Command {
    let mut c = Command::new("npm");
    c.current_dir(env.dir.path())
        .env("HOME", &env.home)
        .stdout(std::process::Stdio::null());
    for (k, v) in &env.env {
        c.env(k, v);
    }
    c
}

/// A world where `iapeer` is on PATH (the packages' programs call it) and npm keeps its cache
/// in the test's folder.
fn world() -> TestEnv {
    let mut env = TestEnv::new();
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let cache = env.dir.path().join("npm-cache");
    env.set("PATH", path.to_str().unwrap())
        .set("npm_config_cache", cache.to_str().unwrap())
        .set("npm_config_update_notifier", "false")
        .set("npm_config_audit", "false")
        .set("npm_config_fund", "false")
        .set("npm_config_loglevel", "warn");
    env
}

fn registry_peer(env: &TestEnv, name: &str) -> serde_json::Value {
    let text = common::read(&env.root.join("peers-profiles.json"));
    let reg: serde_json::Value = serde_json::from_str(&text).unwrap();
    reg["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["personality"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is not registered: {text}"))
}

fn started(env: &TestEnv, identity: &str) -> usize {
    env.count_events(
        "lifecycle",
        "always-on",
        &[("identity", identity), ("action", "started")],
    )
}

/// alice (echo) messages `to` and waits for its answer `reply` in her pane.
fn answers(env: &TestEnv, to: &str, reply: &str) {
    env.ok(&["send", to, "--from", "echo-alice", "--message", "ping"]);
    env.wait_until(
        &format!("{to}'s answer reaches alice"),
        Duration::from_secs(30),
        |e| {
            e.pane("echo-alice")
                .contains(&format!("from {to}: {reply}"))
        },
    );
}

#[test]
fn install_runtime_provisions_the_declared_peers_and_a_running_daemon_starts_them() {
    let mut env = world();
    env.create_echo("alice");
    // The daemon runs before the runtime exists: it is brought up without a restart.
    env.start_daemon();
    let team = env.dir.path().join("team/pinger");
    // As older packages wrote it: no "runtime" (the folder's name), a number as version.
    let peers = format!(
        r#"[{{"personality": "beeper", "intelligence": "absent", "description": "pages the team on call", "runtimeBin": "$self"}},
            {{"personality": "pinger", "path": "{}", "runtimeBin": "$self"}}]"#,
        team.display()
    );
    let tgz = Package {
        runtime: "pager",
        version: "1.0.0",
        version_json: "1",
        peers_json: &peers,
        with_run: false,
    }
    .pack(&env, &env.dir.path().join("dist"));

    let out = env.ok(&[
        "install-runtime",
        "pager",
        "--package",
        tgz.to_str().unwrap(),
    ]);
    assert!(
        out.contains("runtime pager installed at version 1"),
        "{out}"
    );
    assert!(
        env.root
            .join("runtimes/pager/package/node_modules/iapeer-test-pager-runtime/package.json")
            .is_file(),
        "npm installed the package under the runtime's folder"
    );
    assert!(
        out.contains(&format!(
            "peer beeper (pager) created in {} and configured",
            env.peer_dir("beeper").display()
        )),
        "{out}"
    );

    let beeper = registry_peer(&env, "beeper");
    assert_eq!(beeper["description"], "pages the team on call");
    assert_eq!(beeper["intelligence"], "absent");
    assert_eq!(beeper["default_runtime"], "pager");
    let pinger = registry_peer(&env, "pinger");
    assert_eq!(
        Path::new(pinger["cwd"].as_str().unwrap()),
        team.canonicalize().unwrap()
    );

    // selfConfig ran in the peer's folder with the peer's variables.
    let cwd = env.peer_dir("beeper");
    let seen = common::read(&cwd.join("self-config.env"));
    for want in [
        "IAPEER_PEER_PERSONALITY=beeper".to_string(),
        "IAPEER_PEER_RUNTIME=pager".to_string(),
        "IAPEER_PEER_INTELLIGENCE=absent".to_string(),
        format!("IAPEER_PEER_CWD={}", cwd.display()),
        format!("IAPEER_ROOT={}", env.root.display()),
    ] {
        assert!(seen.lines().any(|l| l == want), "{want} missing in {seen}");
    }
    // runtimeBin is the peer's program (the manifest has no run, and pager-runtime is not on
    // the daemon's PATH).
    assert!(common::read(&cwd.join(".iapeer/runtimes/pager/launch.env"))
        .contains("PAGER_RUNTIME_BIN=/"));

    env.wait_until("both pager peers start", Duration::from_secs(20), |e| {
        started(e, "pager-beeper") >= 1 && started(e, "pager-pinger") >= 1
    });
    answers(&env, "beeper", "pager 1.0.0 got it");
    answers(&env, "pinger", "pager 1.0.0 got it");
}

#[test]
fn create_on_a_package_runtime_runs_its_self_config_and_a_failed_one_leaves_the_peer_stopped() {
    let mut env = world();
    env.create_echo("alice");
    // Operator-add, like telegram: no peers[].
    let tgz = Package {
        runtime: "bot",
        version: "0.2.0",
        version_json: r#""0.2.0""#,
        peers_json: "[]",
        with_run: true,
    }
    .pack(&env, &env.dir.path().join("dist"));
    let out = env.ok(&["install-runtime", "bot", "--package", tgz.to_str().unwrap()]);
    assert!(
        out.contains("it declares no peers: add them with iapeer create <name> --runtime bot"),
        "{out}"
    );
    env.start_daemon();

    env.ok(&[
        "create",
        "carol",
        "--runtime",
        "bot",
        "--intelligence",
        "natural",
    ]);
    let seen = common::read(&env.peer_dir("carol").join("self-config.env"));
    assert!(
        seen.contains("IAPEER_PEER_PERSONALITY=carol")
            && seen.contains("IAPEER_PEER_INTELLIGENCE=natural"),
        "{seen}"
    );
    env.wait_until("bot-carol starts", Duration::from_secs(20), |e| {
        started(e, "bot-carol") >= 1
    });
    // Configured, it runs instead of crash-looping on the missing user id.
    answers(&env, "carol", "bot 0.2.0 got it");
    assert!(
        env.events("lifecycle", "always-on")
            .iter()
            .all(
                |e| e.get("identity").map(String::as_str) != Some("bot-carol")
                    || e.get("action").map(String::as_str) != Some("restart-scheduled")
            ),
        "bot-carol died: {}",
        env.diagnostics()
    );

    // The package cannot configure dave: he is made, said so (exit 1), and never started.
    env.set("PKG_FAIL_CONFIG", "1");
    let (out, err) = env.fails(&["create", "dave", "--runtime", "bot"], 1);
    assert!(out.contains("created peer dave"), "{out}");
    assert!(
        err.contains("could not configure dave")
            && err.contains("no user id given for dave")
            && err.contains("iapeer start dave"),
        "{err}"
    );
    assert_eq!(registry_peer(&env, "dave")["default_runtime"], "bot");
    assert!(env.marker("bot-dave", ".stopped").exists());
    env.stays_false("bot-dave started", Duration::from_secs(2), |e| {
        started(e, "bot-dave") > 0
    });
}

#[test]
fn install_runtime_notifier_without_a_package_provisions_the_built_in_timer_and_watcher() {
    let mut env = world();
    env.start_daemon();
    let out = env.ok(&["install-runtime", "notifier"]);
    assert!(
        out.contains("peer timer (notifier, built in) created")
            && out.contains("peer watcher (notifier, built in) created"),
        "{out}"
    );
    for name in ["timer", "watcher"] {
        let p = registry_peer(&env, name);
        assert_eq!(p["default_runtime"], "notifier");
        assert_eq!(p["intelligence"], "absent");
        let card = p["description"].as_str().unwrap();
        assert!(card.contains("Message it JSON"), "{name}: {card}");
    }
    env.wait_until("timer and watcher start", Duration::from_secs(20), |e| {
        started(e, "notifier-timer") >= 1 && started(e, "notifier-watcher") >= 1
    });
    assert!(
        !env.root.join("runtimes/notifier/package").exists(),
        "nothing was installed with npm"
    );
    let again = env.ok(&["install-runtime", "notifier"]);
    assert!(
        again.contains("peer timer exists already")
            && again.contains("peer watcher exists already"),
        "{again}"
    );
}

/// The built-in notifier runs timer and watcher; installing the notifier package (shaped
/// like `@agfpd/notifier-runtime` 0.3.4: its manifest declares `timer` and `watcher`,
/// intelligence absent, and a `selfConfig`) brings both up on the package's program at once,
/// with the same daemon (issue 30 item 7).
#[test]
fn installing_the_notifier_package_replaces_the_built_in_notifier_without_a_restart() {
    let mut env = world();
    env.create_echo("alice");
    env.start_daemon();
    let daemon = env.daemon.as_ref().unwrap().id();
    env.ok(&["install-runtime", "notifier"]);
    env.wait_until("timer and watcher start", Duration::from_secs(20), |e| {
        started(e, "notifier-timer") >= 1 && started(e, "notifier-watcher") >= 1
    });
    let tgz = Package {
        runtime: "notifier",
        version: "0.3.4",
        version_json: r#""0.3.4""#,
        peers_json: r#"[{"personality": "timer", "intelligence": "absent", "runtimeBin": "$self"},
            {"personality": "watcher", "intelligence": "absent", "runtimeBin": "$self"}]"#,
        with_run: true,
    }
    .pack(&env, &env.dir.path().join("dist"));
    let package = tgz.to_str().unwrap();
    let out = env.ok(&["install-runtime", "notifier", "--package", package]);
    assert!(
        out.contains("notifier-timer restarted") && out.contains("notifier-watcher restarted"),
        "{out}"
    );
    answers(&env, "timer", "notifier 0.3.4 got it");
    answers(&env, "watcher", "notifier 0.3.4 got it");
    assert!(
        common::alive(daemon) && env.daemon.as_ref().unwrap().id() == daemon,
        "the same daemon"
    );
}

#[test]
fn update_runtime_says_already_latest_and_reinstalls_a_newer_version() {
    let mut env = world();
    env.create_echo("alice");
    let dist = env.dir.path().join("dist");
    let peers = r#"[{"personality": "beeper", "intelligence": "absent"}]"#;
    let v1 = Package {
        runtime: "pager",
        version: "1.0.0",
        version_json: r#""1.0.0""#,
        peers_json: peers,
        with_run: true,
    }
    .pack(&env, &dist);
    // The operator installs from one file path; a newer build replaces that file later.
    let tgz = env.dir.path().join("pager.tgz");
    std::fs::copy(&v1, &tgz).unwrap();
    env.start_daemon();
    env.ok(&[
        "install-runtime",
        "pager",
        "--package",
        tgz.to_str().unwrap(),
    ]);
    answers(&env, "beeper", "pager 1.0.0 got it");

    let out = env.ok(&["update-runtime", "pager"]);
    assert!(out.contains("pager: already-latest (1.0.0)"), "{out}");

    let v2 = Package {
        runtime: "pager",
        version: "1.1.0",
        version_json: r#""1.1.0""#,
        peers_json: peers,
        with_run: true,
    }
    .pack(&env, &dist);
    std::fs::copy(&v2, &tgz).unwrap();
    let out = env.ok(&["update-runtime", "--all"]);
    assert!(out.contains("pager: 1.0.0 → 1.1.0"), "{out}");
    assert!(out.contains("pager-beeper restarted"), "{out}");
    let manifest = common::read(&env.root.join("runtimes/pager/runtime.json"));
    assert!(manifest.contains(r#""version": "1.1.0""#), "{manifest}");
    answers(&env, "beeper", "pager 1.1.0 got it");

    // --npx installs again what it was installed from, though the manifest exists.
    let out = env.ok(&["install-runtime", "pager", "--npx"]);
    assert!(
        out.contains(&format!("installing {} with npm", tgz.display()))
            && out.contains("runtime pager installed at version 1.1.0"),
        "{out}"
    );
    let out = env.ok(&["install-runtime", "pager"]);
    assert!(!out.contains("with npm"), "a manifest exists: {out}");

    // Runtimes written by hand (a runtime.json, no package) before and after pager: --all
    // notes them and goes on (newcomer walkthrough: it stopped at the first one with exit 1
    // and never checked pager).
    for rt in ["mailbox", "zmail"] {
        let manifest = env.paths().runtime_manifest(rt);
        std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
        std::fs::write(&manifest, r#"{"run": {"command": "/bin/cat"}}"#).unwrap();
    }
    let out = env.ok(&["update-runtime", "--all"]);
    assert!(
        out.contains("mailbox: skipped (no package is known for it")
            && out.contains("pager: already-latest (1.1.0)")
            && out.contains("zmail: skipped"),
        "{out}"
    );
    // One named runtime written by hand is still refused with what to do.
    let (_, err) = env.fails(&["update-runtime", "mailbox"], 1);
    assert!(
        err.contains("it is not known which package provides \"mailbox\""),
        "{err}"
    );
    // A real failure (pager's tarball is gone) exits 1, after the rest were checked.
    std::fs::remove_file(&tgz).unwrap();
    let out = env.run(&["update-runtime", "--all"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    assert!(
        stdout.contains("zmail: skipped")
            && stderr.contains("iapeer update-runtime: pager: cannot learn the latest version")
            && stderr.contains("not updated: pager"),
        "{}",
        common::describe(&out)
    );
}

#[test]
fn a_peer_registered_before_its_runtime_was_installed_comes_up_when_it_is() {
    let mut env = world();
    env.create_echo("alice");
    // A team moved over from the original tool: carol is on runtime bot (configured by the
    // package's self-config back then), but the package is not installed here yet.
    let manifest = env.root.join("runtimes/bot/runtime.json");
    std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    std::fs::write(&manifest, r#"{"runtime": "bot"}"#).unwrap();
    env.ok(&[
        "create",
        "carol",
        "--runtime",
        "bot",
        "--intelligence",
        "natural",
    ]);
    std::fs::remove_dir_all(manifest.parent().unwrap()).unwrap();
    std::fs::write(
        env.peer_dir("carol").join(".iapeer/bot-configured"),
        "user_id=42\n",
    )
    .unwrap();

    env.start_daemon();
    // Not installed: the daemon cannot start her (the router is past its start-up starts).
    env.router_settled();
    assert_eq!(started(&env, "bot-carol"), 0);

    let tgz = Package {
        runtime: "bot",
        version: "0.3.0",
        version_json: r#""0.3.0""#,
        peers_json: "[]",
        with_run: true,
    }
    .pack(&env, &env.dir.path().join("dist"));
    let out = env.ok(&["install-runtime", "bot", "--package", tgz.to_str().unwrap()]);
    assert!(out.contains("bot-carol restarted"), "{out}");
    // The same daemon, no restart: carol runs and answers.
    env.wait_until("bot-carol starts", Duration::from_secs(20), |e| {
        started(e, "bot-carol") >= 1
    });
    answers(&env, "carol", "bot 0.3.0 got it");
}

#[test]
fn a_runtime_a_package_installs_by_itself_is_picked_up_by_the_running_daemon() {
    let mut env = world();
    env.set("IAPEER_TICK_SECS", "1");
    env.create_echo("alice");
    let manifest = env.root.join("runtimes/bot/runtime.json");
    std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    std::fs::write(&manifest, r#"{"runtime": "bot"}"#).unwrap();
    env.ok(&[
        "create",
        "carol",
        "--runtime",
        "bot",
        "--intelligence",
        "natural",
    ]);
    std::fs::remove_dir_all(manifest.parent().unwrap()).unwrap();
    std::fs::write(
        env.peer_dir("carol").join(".iapeer/bot-configured"),
        "user_id=42\n",
    )
    .unwrap();
    env.start_daemon();

    // As `npx -y <package>` does, without iapeer: install, then run the program bare.
    let tgz = Package {
        runtime: "bot",
        version: "0.4.0",
        version_json: r#""0.4.0""#,
        peers_json: "[]",
        with_run: true,
    }
    .pack(&env, &env.dir.path().join("dist"));
    let prefix = env.dir.path().join("npx");
    let ok = npm(&env)
        .args(["install", "--prefix"])
        .arg(&prefix)
        .arg(&tgz)
        .status()
        .unwrap();
    assert!(ok.success());
    let ok = Command::new(prefix.join("node_modules/.bin/bot-runtime"))
        .env("IAPEER_ROOT", &env.root)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success() && manifest.is_file());

    env.wait_until(
        "the daemon starts bot-carol",
        Duration::from_secs(20),
        |e| started(e, "bot-carol") >= 1,
    );
    assert!(env.has_event("lifecycle", "runtime-installed", &[("runtimes", "bot")]));
    answers(&env, "carol", "bot 0.4.0 got it");
}

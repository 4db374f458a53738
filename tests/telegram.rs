//! Telegram (spec 08 §5, issue 11 item 5): `iapeer connect telegram <peer>` binds a bot
//! through the installed telegram-runtime package's own verbs. The package here is shaped like
//! `@agfpd/telegram-runtime` (its `self-install` writes `runtimes/telegram/runtime.json`,
//! `self-config` configures a new peer (run by `create`), `run` is the always-on bridge, `bot add` keeps credentials in `bots/<username>/.env` and refuses a
//! token Telegram would not accept, `interface bot` writes the binding into the peer's profile),
//! installed with the real `npm` from a tarball the test packs.

use crate::common;

use common::TestEnv;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const PACKAGE: &str = r#"#!/usr/bin/env node
const fs = require("fs"), path = require("path");
const root = process.env.IAPEER_ROOT;
const home = path.join(root, "runtimes", "telegram");
fs.mkdirSync(home, { recursive: true });
const [verb, sub, ...rest] = process.argv.slice(2);
const opt = (name) => rest[rest.indexOf("--" + name) + 1];
const self = path.resolve(process.argv[1]);
if (verb === "self-install") {
  fs.writeFileSync(path.join(home, "runtime.json"), JSON.stringify({
    runtime: "telegram", version: "0.10.3-test",
    selfConfig: { command: self, args: ["self-config"] },
    run: { command: self, args: ["run"] },
  }, null, 2) + "\n");
} else if (verb === "self-config") {
  // The real package asks for the human's Telegram user id here; this one records the call.
  fs.appendFileSync(path.join(home, "self-config.log"), `${process.env.IAPEER_PEER_PERSONALITY}\n`);
} else if (verb === "run") {
  const bots = fs.existsSync(path.join(home, "bots")) ? fs.readdirSync(path.join(home, "bots")) : [];
  fs.appendFileSync(path.join(home, "starts.log"), `start ${process.pid} bots=${bots.join(",")}\n`);
  process.stdin.resume();
  process.stdin.on("end", () => process.exit(0));
} else if (verb === "bot" && sub === "add") {
  const username = rest[0], token = opt("token");
  if (!/^\d+:[A-Za-z0-9_-]+$/.test(token)) {
    process.stderr.write("Telegram getMe refused the token (401 Unauthorized)\n");
    process.exit(2);
  }
  fs.mkdirSync(path.join(home, "bots", username), { recursive: true });
  fs.writeFileSync(path.join(home, "bots", username, ".env"), `TELEGRAM_BOT_TOKEN=${token}\nBOT_USERNAME=${username}\n`);
} else if (verb === "interface" && sub === "bot") {
  const username = rest[0], peer = opt("peer");
  const registry = JSON.parse(fs.readFileSync(path.join(root, "peers-profiles.json"), "utf8"));
  const entry = registry.peers.find((p) => p.personality === peer);
  if (!entry) { process.stderr.write(`peer ${peer} is not registered\n`); process.exit(3); }
  const file = path.join(entry.cwd, ".iapeer", "peer-profile.json");
  const profile = JSON.parse(fs.readFileSync(file, "utf8"));
  profile.interfaces = profile.interfaces || {};
  profile.interfaces.telegram = { ...(profile.interfaces.telegram || {}), bot_username: username, bound_by: "telegram-runtime" };
  fs.writeFileSync(file, JSON.stringify(profile, null, 2) + "\n");
} else {
  process.stderr.write(`unknown verb ${verb}\n`);
  process.exit(64);
}
"#;

fn starts(env: &TestEnv) -> Vec<String> {
    std::fs::read_to_string(env.root.join("runtimes/telegram/starts.log"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn connect_telegram_binds_a_bot_through_the_package_and_restarts_its_peers() {
    let mut env = TestEnv::new();
    let dir = env.dir.path().to_path_buf();
    let src = common::npm::write_package(
        &dir,
        "telegram-src",
        "@agfpd/telegram-runtime",
        "0.10.3-test",
        "telegram-runtime",
        PACKAGE,
    );
    let program = common::npm::pack_and_install(&dir, &env.home, &src, "telegram-runtime");
    let out = Command::new(&program)
        .arg("self-install")
        .env("IAPEER_ROOT", &env.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));

    env.start_daemon();
    env.ok(&[
        "create",
        "you",
        "--runtime",
        "telegram",
        "--intelligence",
        "natural",
    ]);
    env.wait_until("the bridge started", Duration::from_secs(30), |e| {
        starts(e).len() == 1
    });
    assert_eq!(
        std::fs::read_to_string(env.root.join("runtimes/telegram/self-config.log")).unwrap(),
        "you\n",
        "create ran the package's self-config"
    );
    env.create_echo("bob");

    let out = env.ok(&[
        "connect",
        "telegram",
        "bob",
        "--token",
        "123:abc",
        "--bot",
        "@bob_helper_bot",
    ]);
    assert!(
        out.starts_with("bob: connected to @bob_helper_bot — restarted telegram-you"),
        "{out}"
    );
    let env_file = env.root.join("runtimes/telegram/bots/bob_helper_bot/.env");
    assert!(std::fs::read_to_string(&env_file)
        .unwrap()
        .contains("TELEGRAM_BOT_TOKEN=123:abc"));
    env.wait_until(
        "the bridge restarted with the bot",
        Duration::from_secs(30),
        |e| starts(e).len() == 2 && starts(e)[1].ends_with("bots=bob_helper_bot"),
    );
    let profile: Value = serde_json::from_str(
        &std::fs::read_to_string(env.peer_dir("bob").join(".iapeer/peer-profile.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        profile["interfaces"]["telegram"]["bot_username"],
        "bob_helper_bot"
    );
    assert_eq!(
        profile["interfaces"]["telegram"]["bound_by"], "telegram-runtime",
        "the package's keys kept"
    );
    let registry: Value = serde_json::from_str(
        &std::fs::read_to_string(env.root.join("peers-profiles.json")).unwrap(),
    )
    .unwrap();
    let bob = registry["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["personality"] == "bob")
        .unwrap();
    assert_eq!(
        bob["interfaces"]["telegram"]["bot_username"], "bob_helper_bot",
        "{bob}"
    );

    // The same token again: nothing changes, nothing restarts.
    let out = env.ok(&[
        "connect",
        "telegram",
        "bob",
        "--token",
        "123:abc",
        "--bot",
        "bob_helper_bot",
    ]);
    assert!(
        out.contains("already connected to @bob_helper_bot"),
        "{out}"
    );
    assert_eq!(starts(&env).len(), 2);

    // A token Telegram refuses: the package's words, nothing bound.
    let (_, err) = env.fails(
        &[
            "connect",
            "telegram",
            "bob",
            "--token",
            "nope",
            "--bot",
            "other_bot",
        ],
        1,
    );
    assert!(err.contains("getMe refused the token"), "{err}");
    let (_, err) = env.fails(
        &[
            "connect",
            "telegram",
            "ghost",
            "--token",
            "1:a",
            "--bot",
            "ghost_bot",
        ],
        1,
    );
    assert!(err.contains("not registered"), "{err}");
    let (_, err) = env.fails(
        &["connect", "telegram", "bob", "--bot", "bob_helper_bot"],
        1,
    );
    assert!(err.contains("--token"), "{err}");
}

/// bun, the telegram package's own runtime: `IAPEER_TEST_BUN` (scripts/setup-agents.sh installs
/// it, scripts/test.sh exports it).
fn bun() -> String {
    std::env::var("IAPEER_TEST_BUN").unwrap_or_else(|_| {
        panic!(
            "IAPEER_TEST_BUN is not set: this test runs @agfpd/telegram-runtime's own fleet client \
             with bun; run scripts/test.sh (it installs bun with scripts/setup-agents.sh), or set \
             IAPEER_TEST_BUN=$PWD/.cache/agents/node_modules/.bin/bun after running that script"
        )
    })
}

/// A telegram runtime's program made of the package's real fleet client
/// (`tests/fixtures/telegram-runtime-0.28.1/`, `FIXTURE` below): it resolves the daemon from
/// `router.json` as the package does, probes the approvals and notices surfaces, lists both,
/// opens the event stream with its `FleetFace` and reconciles, writes what it learned to
/// `$IAPEER_TEST_FLEET_OUT` (with the bearer it found in its environment), then reads its input
/// until it ends, as a router runtime does.
const FLEET_DRIVER: &str = r#"
import { renameSync, writeFileSync } from 'fs'
import { APPROVALS_PATH, NOTICES_PATH, fleetAvailable, listApprovals, listNotices, probeSurface, resolveFleetBase } from 'FIXTURE/src/fleetClient.ts'
import { FleetFace } from 'FIXTURE/src/fleetFace.ts'

const out = process.env.IAPEER_TEST_FLEET_OUT as string
const base = resolveFleetBase()
const result: Record<string, unknown> = {
  bearer: process.env.IAPEER_BEARER_TOKEN ?? null,
  available: fleetAvailable(),
  approvals: await probeSurface(base, APPROVALS_PATH),
  notices: await probeSurface(base, NOTICES_PATH),
}
const count = async (what: string, list: () => Promise<unknown[]>) => {
  try { result[what] = (await list()).length } catch (e) { result[what] = String(e) }
}
await count('pending', () => listApprovals(base))
await count('board', () => listNotices(base))
const log: string[] = []
const face = new FleetFace({
  base,
  approval: { onRequest() {}, onResolved() {} },
  notice: { onNotice() {} },
  log: (evt: string) => { log.push(evt) },
  reconcileIntervalMs: 0,
})
face.start()
while (!log.some((e) => e === 'fleet.face.connected' || e === 'fleet.face.stream.error')) {
  await new Promise((r) => setTimeout(r, 20))
}
await face.reconcile()
face.stop()
result.face = log
writeFileSync(`${out}.tmp`, JSON.stringify(result))
renameSync(`${out}.tmp`, out)
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
"#;

/// The telegram runtime reaches the fleet API with the token the daemon hands it (issue 26
/// item 1): `@agfpd/telegram-runtime`'s own client code, run with bun as the program of a
/// telegram peer the daemon starts, finds `IAPEER_BEARER_TOKEN` = the fleet token in its
/// environment, and its probes, lists and event stream are let in. The same client without
/// the token (a process the daemon did not start) is refused at every step.
#[test]
fn the_telegram_runtime_reaches_the_fleet_api_with_the_token_it_is_handed() {
    let bun = bun();
    let mut env = TestEnv::new();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/telegram-runtime-0.28.1");
    let driver = env.dir.path().join("fleet-driver.ts");
    std::fs::write(
        &driver,
        FLEET_DRIVER.replace("FIXTURE", fixture.to_str().unwrap()),
    )
    .unwrap();
    let manifest = env.paths().runtime_manifest("telegram");
    std::fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    let run = serde_json::json!({"runtime": "telegram",
        "run": {"command": bun, "args": [driver.to_str().unwrap()]}});
    std::fs::write(&manifest, run.to_string()).unwrap();
    let out = env.dir.path().join("fleet-client.json");
    env.set("IAPEER_TEST_FLEET_OUT", out.to_str().unwrap());
    env.ok(&[
        "create",
        "you",
        "--runtime",
        "telegram",
        "--intelligence",
        "natural",
        "--no-bootstrap",
    ]);
    env.start_daemon();
    env.wait_until(
        "the telegram runtime reported",
        Duration::from_secs(60),
        |_| out.exists(),
    );
    let seen: Value = serde_json::from_str(&common::read(&out)).unwrap();
    assert_eq!(seen["bearer"], env.fleet_token().as_str(), "{seen}");
    assert_eq!(seen["available"], true, "{seen}");
    assert_eq!(seen["approvals"], "live", "{seen}");
    assert_eq!(seen["notices"], "live", "{seen}");
    assert_eq!(seen["pending"], 0, "{seen}");
    assert_eq!(seen["board"], 0, "{seen}");
    let face: Vec<&str> = seen["face"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(face.contains(&"fleet.face.connected"), "{face:?}");
    assert!(!face.iter().any(|e| e.ends_with(".error")), "{face:?}");

    // Without the token: every step refused (the surfaces look absent, the stream fails).
    let bare = env.dir.path().join("fleet-client-bare.json");
    let status = Command::new(&bun)
        .arg(&driver)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", &env.home)
        .env("IAPEER_ROOT", &env.root)
        .env("IAPEER_TEST_FLEET_OUT", &bare)
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let seen: Value = serde_json::from_str(&common::read(&bare)).unwrap();
    assert_eq!(seen["bearer"], Value::Null);
    assert_eq!(seen["approvals"], "absent", "{seen}");
    assert!(seen["pending"].as_str().unwrap().contains("401"), "{seen}");
    assert!(
        seen["face"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == "fleet.face.stream.error"),
        "{seen}"
    );
    env.stop_daemon();
}

/// The package's card builders on the real daemon's items (issue 30 item 7): with a pending
/// approval and a notice in force, `@agfpd/telegram-runtime` 0.28.1's own `listApprovals`,
/// `getApproval`, `listNotices`, `getNotice`, `buildCardText` and `buildNoticeText` (run with
/// bun, with the fleet token as the daemon hands it) read them without throwing, and the cards
/// carry the command, the peer and the runtime's words. An approval answered meanwhile is
/// `null` ("already handled"), as the package expects from a 404.
const CARDS_DRIVER: &str = r#"
import { writeFileSync } from 'fs'
import { getApproval, getNotice, listApprovals, listNotices, resolveFleetBase } from 'FIXTURE/src/fleetClient.ts'
import { buildCardText } from 'FIXTURE/src/approvalCard.ts'
import { buildNoticeText } from 'FIXTURE/src/noticeCard.ts'

const base = resolveFleetBase()
const out: Record<string, unknown> = {}
try {
  const pending = await listApprovals(base)
  out.listed = pending.map((a) => buildCardText(a))
  const one = await getApproval(base, pending[0].id)
  out.one = one ? buildCardText(one) : null
  out.gone = await getApproval(base, 'ap-00000000')
  const board = await listNotices(base)
  out.notices = board.map((n) => buildNoticeText(n, board[0].createdMs))
  const n = await getNotice(base, board[0].id)
  out.notice = n ? buildNoticeText(n, n.createdMs) : null
} catch (e) {
  out.error = String(e)
}
writeFileSync(process.env.IAPEER_TEST_FLEET_OUT as string, JSON.stringify(out))
"#;

#[test]
fn the_telegram_cards_read_the_fleet_items() {
    let bun = bun();
    let mut env = TestEnv::new();
    env.set("IAPEER_APPROVAL_TIMEOUT_MS", "600000");
    env.create_echo("alice");
    env.ok(&["create", "you", "--runtime", "human"]);
    crate::views::put_notice(&env, "API Error: Request rejected (429)\nslow down");
    env.start_daemon();
    let token = crate::views::live_token(&env, "alice");
    let command = "make deploy-to-staging";
    let hook = crate::views::Hook::ask(&env, "echo-alice", &token, command);
    env.wait_until("the prompt is pending", Duration::from_secs(30), |e| {
        e.has_event("lifecycle", "approval-requested", &[("summary", command)])
    });
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/telegram-runtime-0.28.1");
    let driver = env.dir.path().join("cards-driver.ts");
    std::fs::write(
        &driver,
        CARDS_DRIVER.replace("FIXTURE", fixture.to_str().unwrap()),
    )
    .unwrap();
    let out = env.dir.path().join("cards.json");
    let status = Command::new(&bun)
        .arg(&driver)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap())
        .env("HOME", &env.home)
        .env("IAPEER_ROOT", &env.root)
        .env("IAPEER_BEARER_TOKEN", env.fleet_token())
        .env("IAPEER_TEST_FLEET_OUT", &out)
        .stdin(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let seen: Value = serde_json::from_str(&common::read(&out)).unwrap();
    assert!(seen.get("error").is_none(), "{seen}");
    let card = seen["one"].as_str().unwrap();
    assert!(card.contains("alice · Bash"), "{card}");
    assert!(card.contains("echo · tool"), "{card}");
    assert!(card.contains(command), "{card}");
    assert_eq!(seen["listed"][0], card, "{seen}");
    assert_eq!(seen["gone"], Value::Null, "{seen}");
    let notice = seen["notice"].as_str().unwrap();
    assert!(notice.contains("<code>rate_limit</code>"), "{notice}");
    assert!(notice.contains("×2"), "{notice}");
    assert!(
        notice.contains("API Error: Request rejected (429)\nslow down"),
        "{notice}"
    );
    assert_eq!(seen["notices"][0], notice, "{seen}");
    env.ok(&["deny", &crate::views::pending_id(&env), "checked"]);
    assert_eq!(hook.decision()["behavior"], "deny");
}

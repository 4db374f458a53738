//! The operator's web page (`iapeer ui`, issue 10 item 5) against a real daemon: in a real
//! browser (headless Chromium driven by Selenium, `tests/ui/drive.py`) — the page lists the
//! peers, shows a delivery made with the CLI live, sends from its box, approves one pending
//! permission prompt and denies another with a reason, stops and starts a peer — and over
//! plain HTTP, every refusal: no key, a wrong key, a stale cookie, a
//! cross-site POST, and the bearer's relation to the page's cookie.

use crate::common;
use crate::fleet::{get, request};

use crate::views::Hook;
use common::TestEnv;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// alice and bob on the echo stand-in, `you` on the human runtime, the daemon up.
fn team(env_vars: &[(&str, &str)]) -> TestEnv {
    crate::fleet::team_with(env_vars)
}

/// The page's link, from `iapeer ui --print` (stdout is not a terminal: nothing is opened).
fn link(env: &TestEnv) -> String {
    let out = env.ok(&["ui", "--print"]);
    let url = out.trim().to_string();
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{}/ui/?k=", env.port())),
        "{out}"
    );
    url
}

#[test]
fn a_link_opens_the_page_once_and_iapeer_ui_prints_a_fresh_one() {
    let env = team(&[]);
    let first = link(&env);
    let target = first[first.find("/ui/").unwrap()..].to_string();
    assert_eq!(request(env.port(), "GET", &target, &[], b"").status, 303);
    let again = request(env.port(), "GET", &target, &[], b"");
    assert_eq!(again.status, 403, "a used link opens nothing");
    assert!(
        String::from_utf8_lossy(&again.body).contains("used already"),
        "{}",
        String::from_utf8_lossy(&again.body)
    );
    let second = link(&env);
    assert_ne!(second, first);
    let target = &second[second.find("/ui/").unwrap()..];
    assert_eq!(request(env.port(), "GET", target, &[], b"").status, 303);
}

/// The cookie (`name=value`) the link's key is traded for.
fn sign_in(env: &TestEnv) -> String {
    let url = link(env);
    let target = &url[url.find("/ui/").unwrap()..];
    let a = request(env.port(), "GET", target, &[], b"");
    assert_eq!(a.status, 303, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("location"), Some("/ui/"));
    let set = a.header("set-cookie").expect("a cookie").to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"),
        "{set}"
    );
    set.split(';').next().unwrap().to_string()
}

/// A program on `PATH` by one of `names`.
fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| p.is_file())
}

#[test]
fn the_page_in_a_real_browser() {
    let python = std::env::var("IAPEER_TEST_PYTHON").unwrap_or_else(|_| {
        panic!(
            "IAPEER_TEST_PYTHON is not set: this test drives the page with Selenium in headless \
             Chromium. Run scripts/test.sh (it creates .cache/venv with selenium and installs \
             chromium and chromium-driver), or run scripts/setup-python.sh and set \
             IAPEER_TEST_PYTHON=$PWD/.cache/venv/bin/python"
        )
    });
    let chromium = find_program(&["chromium", "chromium-browser"]).unwrap_or_else(|| {
        panic!(
            "chromium is not installed: this test needs a real browser. Install it with: \
             apt-get install chromium chromium-driver (scripts/test.sh does)"
        )
    });
    let chromedriver = find_program(&["chromedriver"]).unwrap_or_else(|| {
        panic!(
            "chromedriver is not installed: install it with: apt-get install chromium-driver \
             (scripts/test.sh does)"
        )
    });
    // The prompts wait for the page well past the script's slowest run.
    let env = team(&[("IAPEER_APPROVAL_TIMEOUT_MS", "600000")]);
    let url = link(&env);
    let screenshot = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ui-screenshot.png");
    let marker = format!("hello-{}", std::process::id());
    // Two permission prompts pending before the page opens, asked by alice's live session:
    // the page approves the first and denies the second with a reason.
    let woke = env.control(r#"{"op":"wake","personality":"alice"}"#);
    assert_eq!(woke["ok"], true, "{woke}");
    let token = crate::approvals::session_token(woke["pid"].as_u64().unwrap());
    let approve_cmd = format!("make build-{marker}");
    let deny_cmd = format!("rm -rf build-{marker}");
    let third_cmd = format!("deploy-{marker}");
    let approved = Hook::ask(&env, "echo-alice", &token, &approve_cmd);
    let denied = Hook::ask(&env, "echo-alice", &token, &deny_cmd);
    for cmd in [&approve_cmd, &deny_cmd] {
        env.wait_until(
            &format!("the prompt for {cmd} is pending"),
            Duration::from_secs(30),
            |env| env.has_event("lifecycle", "approval-requested", &[("summary", cmd)]),
        );
    }
    let pending: serde_json::Value =
        serde_json::from_str(env.ok(&["approvals", "--json"]).trim()).unwrap();
    let id_of = |cmd: &str| {
        pending["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["summary"] == cmd)
            .unwrap_or_else(|| panic!("no pending approval for {cmd}: {pending}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (approve_id, deny_id) = (id_of(&approve_cmd), id_of(&deny_cmd));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ui/drive.py");
    // The script runs the CLI itself (a send while the page is open): give it this world.
    let probe = env.cmd(&[]);
    let mut cmd = Command::new(&python);
    cmd.arg(script)
        .args(["--url", &url])
        .arg("--bin")
        .arg(common::bin())
        .arg("--chromium")
        .arg(&chromium)
        .arg("--chromedriver")
        .arg(&chromedriver)
        .arg("--screenshot")
        .arg(&screenshot)
        .args(["--marker", &marker])
        .args(["--approve", &approve_cmd, "--deny", &deny_cmd])
        .args(["--deny-reason", "not on main", "--third", &third_cmd]);
    for (k, v) in probe.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    // Its steps are read as they come: the third prompt is asked when the page is ready for it.
    let err_path = env.dir.path().join("drive.stderr");
    let mut child = cmd
        .current_dir(env.dir.path())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let mut said = String::new();
    let mut third = None;
    for line in std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap())) {
        let line = line.unwrap();
        if line.ends_with("(ask-now)") {
            third = Some(Hook::ask(&env, "echo-alice", &token, &third_cmd));
        }
        said.push_str(&line);
        said.push('\n');
    }
    let status = child.wait().unwrap();
    said.push_str(&common::read(&err_path));
    assert!(
        status.success(),
        "the browser script failed:\n{said}\n{}",
        env.diagnostics()
    );
    // What the page did reached the daemon: the page's message is on alice's screen and in
    // delivery.log as a send from the human; the CLI's message on bob's.
    let page_msg = format!("{marker}-page");
    assert!(
        env.screen("echo-alice").contains(&page_msg),
        "{}",
        env.diagnostics()
    );
    assert!(
        env.screen("echo-bob").contains(&format!("{marker}-cli")),
        "{}",
        env.diagnostics()
    );
    assert!(
        env.has_event(
            "delivery",
            "delivery",
            &[("caller", "human-you"), ("to", "alice"), ("ok", "true")]
        ),
        "{}",
        env.log("delivery")
    );
    assert!(
        env.has_event("lifecycle", "stop", &[]),
        "{}",
        env.log("lifecycle")
    );
    // The page's Approve let the first hook's tool run, its Deny refused the second with the
    // reason typed on the page; both decisions are logged as a human's.
    assert_eq!(
        approved.decision(),
        serde_json::json!({"behavior": "allow"})
    );
    assert_eq!(
        denied.decision(),
        serde_json::json!({"behavior": "deny", "message": "not on main"})
    );
    // The third, asked while the page was open, denied without a reason: the default one.
    assert_eq!(
        third
            .expect("the script never asked for the third prompt")
            .decision(),
        serde_json::json!({"behavior": "deny", "message": "denied by a human"})
    );
    assert!(
        env.has_event(
            "lifecycle",
            "approval-approved",
            &[
                ("id", &approve_id),
                ("identity", "echo-alice"),
                ("tool", "Bash"),
                ("by", "approved")
            ]
        ),
        "{}",
        env.log("lifecycle")
    );
    assert!(
        env.has_event(
            "lifecycle",
            "approval-denied",
            &[
                ("id", &deny_id),
                ("by", "denied"),
                ("reason", "not on main")
            ]
        ),
        "{}",
        env.log("lifecycle")
    );
    assert!(
        screenshot.is_file(),
        "no screenshot at {}",
        screenshot.display()
    );
}

/// Text a peer or an agent controls — a description, a notice, a pending approval's command,
/// a message to the human and its topic, the events logged for them — carrying the payload
/// family of issue 26 item 4 and an HTML tag with a script: in a real browser the page shows
/// each as inert visible text (`tests/ui/hostile.py`): no element made from it, no script
/// run, every control, bidi and separator character as its stand-in.
#[test]
fn hostile_text_is_inert_visible_text_in_a_real_browser() {
    use crate::views::{FAMILY, SHOWN};
    let tag = "<img src=x onerror=\"window.__pwned=1\"><b>bold</b>";
    let hostile = format!("{tag} {FAMILY}");
    let mut env = TestEnv::new();
    env.set("IAPEER_APPROVAL_TIMEOUT_MS", "600000");
    env.create_echo("alice");
    env.ok(&["create", "you", "--runtime", "human"]);
    crate::views::describe_in_registry(&env, "alice", &hostile);
    crate::views::put_notice(&env, &hostile);
    env.start_daemon();
    env.wait_until("the human peer is up", Duration::from_secs(30), |e| {
        e.status_of("you", "human") == "live"
    });
    crate::views::send_to_you(&env, "t\x1b]52;c;cHduZWQ=\x07\u{202e}x", &hostile);
    let token = crate::views::live_token(&env, "alice");
    let hook = Hook::ask(&env, "echo-alice", &token, &hostile);
    env.wait_until("the prompt is pending", Duration::from_secs(30), |env| {
        env.has_event("lifecycle", "approval-requested", &[("summary", &hostile)])
    });
    let shown = serde_json::json!(SHOWN).to_string();
    let out = page_script(&env, "hostile.py", &["--shown", &shown, "--tag", tag]);
    assert!(
        out.status.success(),
        "the browser check failed:\n{}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
    // The prompt is still the human's to answer.
    env.ok(&["deny", &crate::views::pending_id(&env), "checked"]);
    assert_eq!(hook.decision()["behavior"], "deny");
}

/// [`page_script`] with the test world's environment (HOME, IAPEER_ROOT…), for a script that
/// runs the CLI itself.
pub(crate) fn page_script_in(env: &TestEnv, script: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = page_command(env, script, args);
    for (k, v) in env.cmd(&[]).get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.current_dir(env.dir.path())
        .output()
        .unwrap_or_else(|e| panic!("cannot run the script {script}: {e}"))
}

/// Run the Selenium script `tests/ui/<script>` on the page of `env`'s daemon (a fresh link)
/// in headless Chromium with `args` after `--url`, `--chromium` and `--chromedriver`.
fn page_script(env: &TestEnv, script: &str, args: &[&str]) -> std::process::Output {
    page_command(env, script, args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the script {script}: {e}"))
}

/// The command of [`page_script`].
fn page_command(env: &TestEnv, script: &str, args: &[&str]) -> Command {
    let python = std::env::var("IAPEER_TEST_PYTHON")
        .expect("IAPEER_TEST_PYTHON is not set (see the_page_in_a_real_browser)");
    let chromium = find_program(&["chromium", "chromium-browser"]).expect("chromium");
    let chromedriver = find_program(&["chromedriver"]).expect("chromedriver");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/ui")
        .join(script);
    let mut cmd = Command::new(&python);
    cmd.arg(path)
        .args(["--url", &link(env)])
        .arg("--chromium")
        .arg(&chromium)
        .arg("--chromedriver")
        .arg(&chromedriver)
        .args(args);
    cmd
}

/// Issue 30 item 2: with two people on the team, the page shows a picker for whose inbox it
/// shows and whom it writes as (in a real browser), and the CLI's `send` names the choices.
#[test]
fn two_humans_pick_their_inbox_in_a_real_browser() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.ok(&["create", "you", "--runtime", "human"]);
    env.ok(&["create", "ann", "--runtime", "human"]);
    env.start_daemon();
    for h in ["you", "ann"] {
        env.wait_until("the human peers are up", Duration::from_secs(30), |e| {
            e.status_of(h, "human") == "live"
        });
    }
    let (for_ann, for_you) = ("review done, ann", "deploy ready, you");
    env.ok(&["send", "ann", "--from", "echo-alice", "--message", for_ann]);
    env.ok(&["send", "you", "--from", "echo-alice", "--message", for_you]);
    let reply = format!("thanks from the page {}", std::process::id());
    let screenshot = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ui-two-humans.png");
    let shot = screenshot.to_str().unwrap();
    let args = [
        "--for-ann",
        for_ann,
        "--for-you",
        for_you,
        "--reply",
        &reply,
        "--screenshot",
        shot,
    ];
    let out = page_script(&env, "humans.py", &args);
    assert!(
        out.status.success(),
        "the browser check failed:\n{}\n{}",
        common::describe(&out),
        env.diagnostics()
    );
    // The page's message is in ann's inbox, from you.
    let inbox = env.ok(&["inbox", "ann", "--all", "--json"]);
    let got: serde_json::Value = inbox
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|m| m["body"] == reply.as_str())
        .unwrap_or_else(|| panic!("the page's message is not in ann's inbox: {inbox}"));
    assert_eq!(
        (&got["from"], &got["runtime"]),
        (&"you".into(), &"human".into()),
        "{got}"
    );
}

/// Issue 30 item 5, in a real browser (`tests/ui/page.py`): each row offers only the verbs
/// that work on its runtime (a human's and a service's no wake or compact; an echo agent's
/// wake, then interrupt, which work); a peer the daemon cannot start (its agent's program is
/// not found) says why on its row; a peer created, renamed and removed with the CLI shows on
/// the open page within 3 s; the events read as `iapeer logs` prints them (24-hour times); a
/// send from the page is logged `path=ui`; at 390x844 nothing is wider than the screen and
/// the buttons work. Screenshots: `<temp>/shots/{wide,narrow}.png`, copied to
/// `target/ui-shots/`.
#[test]
fn the_page_offers_what_works_follows_the_team_and_fits_a_phone() {
    let mut env = TestEnv::new();
    // cb is made while a claude program is there; the daemon then finds none.
    let stub = env.dir.path().join("claude-stub");
    std::fs::write(&stub, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.set("IAPEER_CLAUDE_BIN", stub.to_str().unwrap());
    env.ok(&["create", "cb", "--runtime", "claude"]);
    let gone = env.dir.path().join("no-claude-here/claude");
    env.set("IAPEER_CLAUDE_BIN", gone.to_str().unwrap());
    env.create_echo("alice");
    env.ok(&["create", "you", "--runtime", "human"]);
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    env.start_daemon();
    for (p, rt) in [("you", "human"), ("timer", "notifier")] {
        env.wait_until(
            "the human and the service are up",
            Duration::from_secs(30),
            |e| e.status_of(p, rt) == "live",
        );
    }
    let shots = env.dir.path().join("shots");
    std::fs::create_dir_all(&shots).unwrap();
    let marker = format!("from-the-page-{}", std::process::id());
    let bin = common::bin();
    let args = [
        "--bin",
        bin.to_str().unwrap(),
        "--shots",
        shots.to_str().unwrap(),
        "--marker",
        &marker,
    ];
    let out = page_script_in(&env, "page.py", &args);
    let said = common::describe(&out);
    println!("{said}");
    assert!(
        out.status.success(),
        "the browser check failed:\n{said}\n{}",
        env.diagnostics()
    );
    let kept = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ui-shots");
    std::fs::create_dir_all(&kept).unwrap();
    for name in ["wide.png", "narrow.png"] {
        let shot = shots.join(name);
        assert!(shot.is_file(), "no screenshot at {}", shot.display());
        std::fs::copy(&shot, kept.join(name)).unwrap();
        println!(
            "screenshot: {} (kept as {})",
            shot.display(),
            kept.join(name).display()
        );
    }
    // The page's send is the page's in delivery.log; the team's changes are on the stream.
    assert!(
        env.has_event(
            "delivery",
            "delivery",
            &[
                ("path", "ui"),
                ("caller", "human-you"),
                ("to", "alice"),
                ("ok", "true")
            ]
        ),
        "{}",
        env.log("delivery")
    );
    // Changes within one look of the registry (500 ms) come as one event: under load the
    // create and the rename may read as dave added, a rename and a remove as carol removed.
    let peers = env.events("lifecycle", "peers");
    assert!(
        peers.iter().any(|e| {
            e.get("added")
                .is_some_and(|a| a.split(',').any(|n| n == "carol" || n == "dave"))
        }) && peers.iter().any(|e| e.contains_key("removed")),
        "{}",
        env.log("lifecycle")
    );
    assert!(
        env.has_event("lifecycle", "interrupt", &[("identity", "echo-alice")]),
        "{}",
        env.log("lifecycle")
    );
}

#[test]
fn requests_without_the_secret_or_cookie_are_refused() {
    let env = team(&[]);
    let port = env.port();
    let origin = format!("Origin: http://127.0.0.1:{port}");

    // No key, no cookie: 401 saying what to run; a wrong key: 403.
    for path in ["/ui/", "/ui/app.js", "/ui/app.css"] {
        let a = request(port, "GET", path, &[], b"");
        assert_eq!(a.status, 401, "{path}");
        assert!(
            String::from_utf8_lossy(&a.body).contains("iapeer ui"),
            "{path}"
        );
    }
    let a = request(port, "GET", "/ui/?k=0000", &[], b"");
    assert_eq!(a.status, 403);
    assert!(String::from_utf8_lossy(&a.body).contains("iapeer ui"));
    // Another site's page cannot reach the page at all.
    let a = request(port, "GET", "/ui/", &["Origin: http://evil.example"], b"");
    assert_eq!(a.status, 403);

    // Signed in: the page and its script load.
    let cookie = sign_in(&env);
    let c = format!("Cookie: {cookie}");
    let a = request(port, "GET", "/ui/", &[&c], b"");
    assert_eq!(a.status, 200);
    assert!(String::from_utf8_lossy(&a.body).contains("/ui/app.js"));
    assert!(a.header("content-security-policy").is_some());

    // A stale cookie (an earlier daemon's) is refused with what to do.
    let stale = format!("Cookie: iapeer_ui_{port}=0123");
    let a = request(port, "GET", "/fleet/v1/snapshot", &[&stale], b"");
    assert_eq!(a.status, 401);
    assert!(a.error().contains("iapeer ui"), "{}", a.error());

    // A cross-site POST: the cookie alone, or with the own Origin but without the header, or
    // the header from another origin: 403, nothing is sent.
    let body = br#"{"personality":"alice","message":"forged"}"#;
    for extra in [
        vec![c.as_str()],
        vec![c.as_str(), origin.as_str()],
        vec![c.as_str(), "X-Iapeer-UI: 1"],
        vec![c.as_str(), "Origin: http://evil.example", "X-Iapeer-UI: 1"],
    ] {
        let a = request(port, "POST", "/fleet/v1/send", &extra, body);
        assert_eq!(a.status, 403, "{extra:?}: {}", a.error());
    }
    let a = request(
        port,
        "POST",
        "/fleet/v1/peers/alice/stop",
        &[&c, &origin],
        b"{}",
    );
    assert_eq!(a.status, 403, "{}", a.error());
    assert_eq!(env.status_of("alice", "echo"), "asleep");
    // The header without a cookie is a page that is not signed in: 401.
    let a = request(port, "GET", "/fleet/v1/snapshot", &["X-Iapeer-UI: 1"], b"");
    assert_eq!(a.status, 401);
    // The page's own request passes and is delivered.
    let ok = [c.as_str(), origin.as_str(), "X-Iapeer-UI: 1"];
    let a = request(
        port,
        "POST",
        "/fleet/v1/send",
        &ok,
        br#"{"personality":"alice","message":"from the page"}"#,
    );
    assert_eq!(a.status, 200, "{}", a.error());
    assert!(!env.log("delivery").contains("forged"));
    assert_eq!(
        env.count_events("delivery", "delivery", &[("to", "alice")]),
        1,
        "{}",
        env.log("delivery")
    );

    // The screen and the inbox endpoints.
    let a = get(&env, "/fleet/v1/peers/alice/screen");
    assert_eq!(a.status, 200, "{}", a.error());
    let v = a.json();
    assert_eq!(v["identity"], "echo-alice");
    assert!(v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r.as_str().unwrap().contains("from the page")));
    let a = get(&env, "/fleet/v1/peers/bob/screen");
    assert_eq!(a.status, 502);
    assert!(
        a.error().contains("POST /fleet/v1/peers/bob/wake"),
        "{}",
        a.error()
    );
    let a = get(&env, "/fleet/v1/inbox");
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["identity"], "human-you");
    assert_eq!(get(&env, "/fleet/v1/inbox?peer=alice").status, 400);
    assert_eq!(get(&env, "/fleet/v1/inbox?peer=zed").status, 404);
}

#[test]
fn with_a_bearer_the_cookie_admits_the_page_but_not_mcp() {
    let env = team(&[("IAPEER_BEARER_TOKEN", "s3cret")]);
    let port = env.port();
    assert_eq!(
        request(port, "GET", "/fleet/v1/snapshot", &[], b"").status,
        401
    );
    let cookie = format!("Cookie: {}", sign_in(&env));
    let a = request(port, "GET", "/fleet/v1/snapshot", &[&cookie], b"");
    assert_eq!(a.status, 200, "{}", a.error());
    let a = request(
        port,
        "GET",
        "/fleet/v1/snapshot",
        &["Authorization: Bearer s3cret"],
        b"",
    );
    assert_eq!(a.status, 200);
    let a = request(
        port,
        "POST",
        "/mcp",
        &[&cookie, "Content-Type: application/json"],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(a.status, 401);
}

#[test]
fn ui_without_a_daemon_says_so() {
    let env = TestEnv::new();
    env.ok(&["create", "you", "--runtime", "human"]);
    let (_, err) = env.fails(&["ui", "--print"], 1);
    assert!(err.contains("daemon"), "{err}");
}

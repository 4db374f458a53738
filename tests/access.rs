//! Nobody else gets in (issue 26 item 1). Every way into a team that another local user could
//! try, tried as a real second uid (a user `useradd` makes for the test) against the real
//! daemon, with every folder from `/` down to the root open to everyone, so that only iapeer's
//! own modes protect what it keeps: the fleet API on every endpoint of its real list with every
//! method, the files under the root, the control socket, MCP without a session token,
//! `/proc/<pid>/environ` and every command line, the page and its link. And the fleet token's
//! life as its owner sees it: made once, kept across restarts, replaced when its file is not
//! to be trusted.
//!
//! Adding a user needs root (CI runs the suite as root); run as anyone else, the second-uid
//! tests print that they are skipped and why, and check nothing.

use crate::common;
use crate::fleet::{get, Answer};

use common::other_user::{open_path_to, OtherUser};
use common::TestEnv;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Every method a client could send.
const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

/// The fleet tests' team (alice and bob on the echo stand-in, `you` on the human runtime, the
/// daemon up) and ea on the echo stand-in, awake; ea's session token.
fn team() -> (TestEnv, String) {
    let env = crate::fleet::team_with(&[("IAPEER_APPROVAL_TIMEOUT_MS", "120000")]);
    env.create_echo("ea");
    // The daemon logs the new peer (`ev=peers`, within 500 ms): before a test counts lines.
    env.wait_until("ea on the event stream", Duration::from_secs(10), |e| {
        e.has_event("lifecycle", "peers", &[("added", "ea")])
    });
    let woke = env.control(r#"{"op":"wake","personality":"ea"}"#);
    assert_eq!(woke["ok"], true, "{woke}");
    let token = crate::approvals::session_token(woke["pid"].as_u64().unwrap());
    (env, token)
}

/// One request with the real `curl` run by `c` (as the owner, or as the other user), at most
/// 5 s (an event stream that is let in stays open: its head is what counts).
fn curl(mut c: Command, method: &str, url: &str, headers: &[&str], body: Option<&str>) -> Answer {
    c.args(["-s", "-i", "--max-time", "5"]);
    if method == "HEAD" {
        c.arg("-I");
    } else {
        c.args(["-X", method]);
    }
    for h in headers {
        c.args(["-H", h]);
    }
    if let Some(b) = body {
        c.args(["--data-binary", b]);
    }
    let out = c.arg(url).output().expect("curl (apt-get install curl)");
    assert!(
        out.stdout.windows(4).any(|w| w == b"\r\n\r\n"),
        "{method} {url}: no answer ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    crate::fleet::parse(&out.stdout)
}

/// One request with the real `curl` as another user (`c`), which the daemon must shut out:
/// since the issue 26 follow-up its connection is answered the fleet's 401 before anything
/// of it is read, whatever the path, method or body. Returns the body (empty for `HEAD`).
fn shut_out(c: Command, method: &str, url: &str, body: Option<&str>) -> String {
    let got = curl(c, method, url, &["Content-Type: application/json"], body);
    assert_eq!(
        got.status,
        401,
        "{method} {url} as another user: {}",
        got.text()
    );
    assert_eq!(
        got.header("www-authenticate"),
        Some("Bearer"),
        "{method} {url}"
    );
    got.text()
}

/// The concrete paths of one line of the fleet's endpoint list (`"POST
/// /fleet/v1/peers/<p>/(wake|stop)"`): each placeholder filled (`<p>` with `peer`, `<id>` with
/// `id`, `<rt>`, `N`, `S`, `MS` with small values) and each `(a|b|…)` alternative taken.
fn expand(line: &str, peer: &str, id: &str) -> Vec<String> {
    let path = line.split_once(' ').expect("METHOD /path").1;
    let path = path
        .replace("<p>", peer)
        .replace("<id>", id)
        .replace("<rt>", "echo")
        .replace("replay=N", "replay=5")
        .replace("wait=S", "wait=1")
        .replace("since=MS", "since=0");
    assert!(
        !path.contains('<'),
        "a placeholder this test does not know: {line}"
    );
    match (path.find('('), path.find(')')) {
        (Some(a), Some(b)) => path[a + 1..b]
            .split('|')
            .map(|alt| format!("{}{alt}{}", &path[..a], &path[b + 1..]))
            .collect(),
        _ => vec![path],
    }
}

/// Every file and folder under `dir` (links not followed; what the running daemon removes
/// meanwhile, such as an atomic write's temp file, is left out).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if is_dir(&p) {
                todo.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

/// A folder (not a link to one)?
fn is_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Open every folder under `root`, and `root`, to everyone (0755).
fn open_every_folder(root: &Path) {
    for p in walk(root).iter().chain([root.to_path_buf()].iter()) {
        if is_dir(p) {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

/// The processes descended from `pid` (children, their children, …).
fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// `IAPEER_TOKEN` of process `pid`, if it has one (read as its owner).
fn session_token_of(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix("IAPEER_TOKEN="))
        .map(str::to_string)
}

/// The pending approvals the owner sees.
fn pending(env: &TestEnv) -> Vec<Value> {
    get(env, "/fleet/v1/approvals").json()["approvals"]
        .as_array()
        .unwrap()
        .clone()
}

/// Another user asks every endpoint of the fleet's real list (from its own 404), with every
/// method, the event stream and a long poll among them, a forged send and an approval of a
/// pending `rm -rf` prompt included: 401 each, before anything of it is read (the kernel
/// names the client socket's owner), the same answer the owner gets without the token, and
/// nothing happens. The owner without the token gets 401 naming the token file; with the
/// token from `state/iapeer/fleet.token` it gets in everywhere, and approves.
#[test]
fn another_user_gets_401_from_every_fleet_endpoint_and_the_owner_gets_in_with_the_token_file() {
    let Some(other) = OtherUser::create() else {
        return;
    };
    let (env, ea_token) = team();
    open_path_to(&env.root);
    let base = format!("http://127.0.0.1:{}", env.port());
    let listed = get(&env, "/fleet/v1/nothing").json();
    let listed: Vec<String> = listed["endpoints"]
        .as_array()
        .expect("the fleet's 404 lists its endpoints")
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    // ea's gated tool asks to run `rm -rf`; its hook waits for a human.
    let hook = crate::approvals::hook_ask(&env, &ea_token, "rm -rf /srv/everything");
    env.wait_until("the prompt is pending", Duration::from_secs(30), |e| {
        !pending(e).is_empty()
    });
    let id = pending(&env)[0]["id"].as_str().unwrap().to_string();

    let mut paths: Vec<String> = listed
        .iter()
        .flat_map(|l| expand(l, "alice", &id))
        .collect();
    paths.extend(
        [
            "/fleet",
            "/fleet/",
            "/fleet/v1",
            "/fleet/v1/nothing",
            "/fleet/v2/snapshot",
        ]
        .map(String::from),
    );
    let forged =
        json!({"personality":"alice","message":"from another user","from":"echo-ea"}).to_string();
    let deliveries = env.count_events("delivery", "delivery", &[]);
    let lifecycle = env.log("lifecycle").lines().count();
    let started = Instant::now();
    let mut refused = 0;
    let mut stranger_401: Option<String> = None;
    for p in &paths {
        for m in METHODS {
            let url = format!("{base}{p}");
            let body = (!matches!(m, "GET" | "HEAD")).then_some(forged.as_str());
            let said = shut_out(other.command("curl"), m, &url, body);
            if m != "HEAD" {
                // The same answer everywhere: it tells nothing about what is there.
                let first = stranger_401.get_or_insert_with(|| said.clone());
                assert_eq!(&said, first, "{m} {p}");
            }
            refused += 1;
        }
    }
    let took = started.elapsed();
    // A long poll is shut out at once, not held.
    let t = Instant::now();
    shut_out(
        other.command("curl"),
        "GET",
        &format!("{base}/fleet/v1/approvals?wait=300"),
        None,
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // The owner without the token: 401, the same answer everywhere (it tells nothing about
    // what is there), naming the token file but not the root.
    let mut body_401 = None;
    for p in &paths {
        let got = curl(
            Command::new("curl"),
            "GET",
            &format!("{base}{p}"),
            &[],
            None,
        );
        assert_eq!(got.status, 401, "GET {p}: {}", got.text());
        assert_eq!(got.header("www-authenticate"), Some("Bearer"), "GET {p}");
        let first = body_401.get_or_insert_with(|| got.text());
        assert_eq!(&got.text(), first, "GET {p}");
    }
    let body_401 = body_401.unwrap();
    assert_eq!(
        stranger_401.as_ref(),
        Some(&body_401),
        "another user's 401 is the fleet's"
    );
    assert!(body_401.contains("state/iapeer/fleet.token"), "{body_401}");
    assert!(
        !body_401.contains(&env.root.display().to_string()),
        "{body_401}"
    );
    // Nothing happened: no send, no verb, and the prompt still waits for a human.
    assert_eq!(env.count_events("delivery", "delivery", &[]), deliveries);
    assert_eq!(
        env.log("lifecycle").lines().count(),
        lifecycle,
        "{}",
        env.log("lifecycle")
    );
    assert_eq!(pending(&env).len(), 1);
    eprintln!(
        "as uid {} ({}): {refused} requests ({} paths of the fleet's list and around it × {} \
         methods) → 401 each, unread, in {took:?}; a 300 s long poll refused in {:?}",
        other.uid,
        other.name,
        paths.len(),
        METHODS.len(),
        t.elapsed()
    );

    // The owner, with the token read from the file, gets in everywhere; `{}` bodies.
    let auth = env.fleet_auth();
    let mut admitted = 0;
    for p in &paths {
        for m in METHODS {
            let body = (!matches!(m, "GET" | "HEAD")).then_some("{}");
            let got = curl(
                Command::new("curl"),
                m,
                &format!("{base}{p}"),
                &[&auth],
                body,
            );
            assert_ne!(got.status, 401, "{m} {p}: {}", got.text());
            assert!(got.status != 403, "{m} {p}: {}", got.text());
            admitted += 1;
        }
    }
    for p in [
        "/fleet/v1/snapshot",
        "/fleet/v1/notices",
        "/fleet/v1/inbox",
        "/fleet/v1/peers/alice",
    ] {
        let got = curl(
            Command::new("curl"),
            "GET",
            &format!("{base}{p}"),
            &[&auth],
            None,
        );
        assert_eq!(got.status, 200, "{p}: {}", got.text());
    }
    // Its `{}` approve in the sweep answered the hook: allow.
    let verdict = crate::approvals::hook_answer(hook);
    assert_eq!(verdict["allow"], true, "{verdict}");
    eprintln!("the owner: {admitted} requests with the token from the file, none refused 401");
}

/// As another user: no file under the root can be read (but the public reference docs), even
/// with every folder opened to everyone; the control socket refuses the connection, and with
/// its mode opened the daemon refuses the uid; `/proc/<pid>/environ` of the daemon and of every
/// child it started cannot be read; and no process's command line holds any secret (the fleet
/// token, the page's key, a session token).
#[test]
fn another_user_reads_no_file_socket_environment_or_secret_on_a_command_line() {
    let Some(other) = OtherUser::create() else {
        return;
    };
    let (env, _) = team();
    // Something in every kind of file: an attachment, the human's inbox, pane logs, markers,
    // the note of a removed name, the scheduler's files.
    let attachment = env.dir.path().join("notes.txt");
    std::fs::write(&attachment, "private notes\n").unwrap();
    env.ok(&[
        "send",
        "alice",
        "--from",
        "human-you",
        "--message",
        "with notes",
        "--attachment",
        attachment.to_str().unwrap(),
    ]);
    let private = [
        "send",
        "you",
        "--from",
        "echo-alice",
        "--message",
        "eyes-only",
    ];
    env.ok(&private);
    env.wait_until("the inbox has it", Duration::from_secs(30), |e| {
        common::read(&e.paths().inbox("you")).contains("eyes-only")
    });
    // A removed peer's name is noted (state/iapeer/former-names.json).
    env.ok(&["remove", "bob"]);
    // The scheduler keeps a trigger for the human (its locks, spool and profile edits).
    env.ok(&["create", "timer", "--runtime", "notifier"]);
    let call = json!({"when":"@every 1h","message":"hourly","target":"self"}).to_string();
    env.ok(&["send", "timer", "--from", "human-you", "--message", &call]);
    let notifier = env.root.join("state").join("notifier");
    env.wait_until("the trigger is kept", Duration::from_secs(30), |_| {
        notifier.join("profiles.lock").exists() && notifier.join("timer").join("run.lock").exists()
    });
    open_path_to(&env.root);
    let root = &env.root;
    // As iapeer makes them, its folders are its user's alone.
    for p in walk(root).into_iter().filter(|p| is_dir(p)) {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}", p.display());
    }
    let daemon = env.daemon.as_ref().unwrap().id();
    let children = descendants(daemon);
    let mut secrets = vec![
        env.fleet_token(),
        common::read(&env.paths().ui_key()).trim().to_string(),
    ];
    secrets.extend(children.iter().filter_map(|p| session_token_of(*p)));
    assert!(
        secrets.len() >= 4,
        "the fleet token, the page key, two sessions' tokens"
    );
    assert!(secrets.iter().all(|s| s.len() >= 32));

    // The worst case: every folder under the root opened to everyone (a root made by hand,
    // or by another tool). Each file protects itself.
    open_every_folder(root);
    let files: Vec<String> = walk(root)
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
        .map(|p| p.display().to_string())
        .collect();
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let out = other.sh(
        r#"for f do if cat -- "$f" >/dev/null 2>&1; then echo "$f"; fi; done"#,
        &args,
    );
    let readable: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    let docs = env.paths().docs_dir().join("iapeer").display().to_string();
    for f in &readable {
        assert!(f.starts_with(&docs), "another user can read {f}");
        let text = common::read(Path::new(f));
        assert!(!secrets.iter().any(|s| text.contains(s.as_str())), "{f}");
    }
    eprintln!(
        "as uid {}: {} of {} files under the root readable (the public reference docs only)",
        other.uid,
        readable.len(),
        files.len()
    );

    // The control socket: its mode refuses the connection…
    let sock = env.socket();
    let probe = |o: &OtherUser| {
        o.command("curl")
            .args(["-s", "--max-time", "5", "--unix-socket"])
            .arg(&sock)
            .arg("http://localhost/")
            .output()
            .unwrap()
    };
    let out = probe(&other);
    assert_eq!(
        out.status.code(),
        Some(7),
        "curl could not connect: {out:?}"
    );
    // …and with its mode opened, the daemon refuses the uid (peer credentials): no answer.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = probe(&other);
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(out.stdout.is_empty(), "{out:?}");
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    env.wait_until("the daemon says it refused", Duration::from_secs(10), |e| {
        e.log("daemon")
            .contains("refused a control connection from another user")
    });
    assert_eq!(
        env.control(r#"{"op":"ping"}"#)["ok"],
        true,
        "the owner still gets in"
    );

    // /proc: no environment of the daemon or its children; no secret on any command line.
    assert!(
        children.len() >= 3,
        "two echo sessions and the inbox writer: {children:?}"
    );
    let mut looked = 0;
    for pid in [daemon].iter().chain(children.iter()) {
        let out = other.sh(r#"cat "/proc/$1/environ""#, &[&pid.to_string()]);
        if !Path::new(&format!("/proc/{pid}")).exists() {
            // A short-lived child (a notification, a probe) ended since it was listed.
            continue;
        }
        looked += 1;
        assert!(!out.status.success(), "pid {pid}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
            "pid {pid}: {out:?}"
        );
        let out = other.sh(r#"cat "/proc/$1/cmdline""#, &[&pid.to_string()]);
        let gone = !Path::new(&format!("/proc/{pid}")).exists();
        assert!(
            gone || (out.status.success() && !out.stdout.is_empty()),
            "pid {pid}: {out:?}"
        );
    }
    assert!(
        looked >= 3,
        "the daemon and its two sessions were looked at: {looked}"
    );
    let out = other.sh("cat /proc/[0-9]*/cmdline 2>/dev/null", &[]);
    let all = String::from_utf8_lossy(&out.stdout);
    assert!(
        all.contains("echo-agent"),
        "the sessions' command lines were read"
    );
    for s in &secrets {
        assert!(!all.contains(s.as_str()), "a secret on a command line");
    }
    eprintln!(
        "as uid {}: environ of the daemon and {} children refused; {} secrets on no command line",
        other.uid,
        children.len(),
        secrets.len()
    );
}

/// MCP needs no fleet token, and without a live session token it acts as nobody: another user
/// is shut out (401 before anything is read); the owner's client may `initialize` and list
/// the tools, but a `tools/call` naming a live agent, with no token, a wrong one or the
/// fleet's token, is refused and sends nothing.
#[test]
fn mcp_without_a_session_token_acts_as_nobody() {
    let Some(other) = OtherUser::create() else {
        return;
    };
    let (env, ea_token) = team();
    let url = env.mcp_url();
    let rpc = |c: Command, extra: &[&str], body: Value| -> Value {
        let mut headers = vec!["Content-Type: application/json", "Accept: application/json"];
        headers.extend_from_slice(extra);
        let got = curl(c, "POST", &url, &headers, Some(&body.to_string()));
        assert_eq!(got.status, 200, "{}", got.text());
        got.json()
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}});
    // Another user is shut out of MCP altogether (issue 26 follow-up).
    shut_out(other.command("curl"), "POST", &url, Some(&init.to_string()));
    assert_eq!(
        rpc(Command::new("curl"), &[], init)["result"]["serverInfo"]["name"],
        "iapeer"
    );
    let list = rpc(
        Command::new("curl"),
        &[],
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
    );
    assert_eq!(list["result"]["tools"][0]["name"], "send_to_peer");
    let call = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_to_peer",
        "arguments":{"personality":"alice","message":"as ea, without its token"}}});
    shut_out(other.command("curl"), "POST", &url, Some(&call.to_string()));
    let fleet = format!("Authorization: Bearer {}", env.fleet_token());
    let attempts: [(Command, Vec<&str>); 4] = [
        (Command::new("curl"), vec!["X-IAPeer-Identity: echo-ea"]),
        (
            Command::new("curl"),
            vec![
                "X-IAPeer-Identity: echo-ea",
                "Authorization: Bearer 00000000000000000000000000000000",
            ],
        ),
        (
            Command::new("curl"),
            vec!["Authorization: Bearer not-a-token"],
        ),
        // Even the fleet's token is no MCP credential.
        (
            Command::new("curl"),
            vec!["X-IAPeer-Identity: echo-ea", fleet.as_str()],
        ),
    ];
    for (c, extra) in attempts {
        let r = rpc(c, &extra, call.clone());
        assert_eq!(r["result"]["isError"], true, "{extra:?}: {r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("session token missing or not valid")
                || text.contains("x-iapeer-identity"),
            "{extra:?}: {text}"
        );
    }
    // Each refusal is logged; none was delivered.
    assert_eq!(
        env.count_events("delivery", "delivery", &[("to", "alice"), ("ok", "true")]),
        0,
        "{}",
        env.log("delivery")
    );
    // ea's own token still works, from its own user.
    let token = format!("Authorization: Bearer {ea_token}");
    let r = rpc(
        Command::new("curl"),
        &["X-IAPeer-Identity: echo-ea", &token],
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"send_to_peer",
            "arguments":{"personality":"alice","message":"from ea itself"}}}),
    );
    assert_eq!(r["result"]["structuredContent"]["ok"], true, "{r}");
}

/// `iapeer ui` never puts the page's key on a command line: the opener gets a file only its
/// user can read, which sends the browser on to the link. Another user watching every
/// process's command line sees no key, cannot read that file, and cannot open the page.
#[test]
fn the_page_link_never_reaches_a_command_line() {
    let Some(other) = OtherUser::create() else {
        return;
    };
    let mut env = TestEnv::new();
    env.ok(&["create", "you", "--runtime", "human"]);
    // A stand-in opener: it notes its pid and arguments, then stays (its command line with it).
    let bin = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let seen = env.dir.path().join("opener.seen");
    let opener = bin.join("xdg-open");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$$\" \"$@\" > '{0}.tmp'\nmv '{0}.tmp' '{0}'\nsleep 60\n",
            seen.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    env.set("PATH", &path);
    env.start_daemon();
    open_path_to(&env.root);
    open_every_folder(&env.root);
    // `iapeer ui` on a terminal opens the page.
    let pty = nix::pty::openpty(None, None).unwrap();
    let status = env
        .cmd(&["ui"])
        .stdout(std::process::Stdio::from(pty.slave))
        .status()
        .unwrap();
    assert!(status.success());
    env.wait_until("the opener ran", Duration::from_secs(10), |_| seen.exists());
    let noted = common::read(&seen);
    let mut lines = noted.lines();
    let pid: u32 = lines.next().unwrap().parse().unwrap();
    let args: Vec<&str> = lines.collect();
    let page = env.paths().ui_open();
    assert_eq!(
        args,
        [page.to_str().unwrap()],
        "the opener gets the page's file only"
    );
    let key = common::read(&env.paths().ui_key()).trim().to_string();
    // Another user reads the opener's command line: no key in it.
    let out = other.sh(r#"cat "/proc/$1/cmdline""#, &[&pid.to_string()]);
    let cmdline = String::from_utf8_lossy(&out.stdout).into_owned();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    assert!(cmdline.contains("ui-open.html"), "{cmdline:?}");
    assert!(
        !cmdline.contains(&key) && !cmdline.contains("?k="),
        "{cmdline:?}"
    );
    // Nor can it read the page that holds the link.
    let out = other.sh(r#"cat "$1""#, &[page.to_str().unwrap()]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::metadata(&page).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The owner's browser follows it to the link, which opens the page once.
    let html = common::read(&page);
    let link = format!("http://127.0.0.1:{}/ui/?k={key}", env.port());
    assert!(html.contains(&format!("url={link}")), "{html}");
    let got = curl(Command::new("curl"), "GET", &link, &[], None);
    assert_eq!(got.status, 303, "{}", got.text());
    // A guess of the key, by the other user: refused.
    let guess = format!("http://127.0.0.1:{}/ui/?k={}", env.port(), "0".repeat(64));
    shut_out(other.command("curl"), "GET", &guess, None);
    assert_eq!(
        curl(Command::new("curl"), "GET", &guess, &[], None).status,
        403
    );
    env.stop_daemon();
    assert!(
        !page.exists(),
        "the daemon removes the page's file when it stops"
    );
}

/// The permission bits of `p` (not following a link).
fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

/// The status of `GET /fleet/v1/snapshot` with `token` as the bearer.
fn snapshot_status(env: &TestEnv, token: &str) -> u16 {
    let auth = format!("Authorization: Bearer {token}");
    crate::fleet::request(env.port(), "GET", "/fleet/v1/snapshot", &[&auth], b"").status
}

/// Stop the daemon, `spoil` its token file, start it again: a new token is in a private
/// regular file, the daemon log says the old file was not trusted and `why`, and the old
/// token opens nothing.
fn replaced_after(env: &mut TestEnv, spoil: &dyn Fn(&Path), why: &str) {
    let file = env.paths().fleet_token();
    let before = env.fleet_token();
    env.stop_daemon();
    spoil(&file);
    env.start_daemon();
    let now = env.fleet_token();
    assert_ne!(now, before, "{why}");
    assert_eq!(mode(&file), 0o600, "{why}");
    assert!(std::fs::symlink_metadata(&file).unwrap().is_file(), "{why}");
    let log = env.log("daemon");
    assert!(
        log.contains("was not trusted") && log.contains(why),
        "{why}: {log}"
    );
    assert_eq!(snapshot_status(env, &before), 401, "{why}");
    assert_eq!(snapshot_status(env, &now), 200, "{why}");
}

/// A daemon with one human peer, started.
fn lone_daemon() -> TestEnv {
    let mut env = TestEnv::new();
    env.ok(&["create", "you", "--runtime", "human"]);
    env.start_daemon();
    env
}

/// The token is made once (0600), kept across restarts, and replaced — with the reason in
/// the daemon log — when its file is not to be trusted: readable or writable by others, a
/// link (never followed), a FIFO (never waited on). The old token then opens nothing.
#[test]
fn the_fleet_token_is_kept_across_restarts_and_replaced_when_its_file_is_not_trusted() {
    let mut env = lone_daemon();
    let file = env.paths().fleet_token();
    let first = env.fleet_token();
    assert_eq!(first.len(), 64, "{first}");
    assert_eq!(mode(&file), 0o600);
    assert!(
        env.log("daemon").contains("made its token"),
        "{}",
        env.log("daemon")
    );
    assert_eq!(snapshot_status(&env, &first), 200);

    // Kept across a restart.
    env.stop_daemon();
    env.start_daemon();
    assert_eq!(env.fleet_token(), first);
    assert_eq!(snapshot_status(&env, &first), 200);
    assert!(env.log("daemon").contains("its token is"));

    // Each untrusted file is replaced at the next start.
    for bits in [0o644, 0o620, 0o604] {
        replaced_after(
            &mut env,
            &|f| std::fs::set_permissions(f, std::fs::Permissions::from_mode(bits)).unwrap(),
            &format!("its mode {bits:04o}"),
        );
    }
    let elsewhere = env.dir.path().join("planted.token");
    let planted_text = format!("{}\n", "p".repeat(64));
    std::fs::write(&elsewhere, &planted_text).unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
    let planted = elsewhere.clone();
    replaced_after(
        &mut env,
        &move |f| {
            std::fs::remove_file(f).unwrap();
            std::os::unix::fs::symlink(&planted, f).unwrap();
        },
        "symbolic link",
    );
    assert_eq!(common::read(&elsewhere), planted_text, "not followed");
    replaced_after(
        &mut env,
        &|f| {
            std::fs::remove_file(f).unwrap();
            nix::unistd::mkfifo(f, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        },
        "a FIFO",
    );
    env.stop_daemon();
}

/// A token file that belongs to another user (here a real one, `useradd`'s) is not the
/// daemon's: replaced at start.
#[test]
fn a_token_file_another_user_owns_is_replaced() {
    let Some(other) = OtherUser::create() else {
        return;
    };
    let mut env = lone_daemon();
    let (uid, gid) = (other.uid, other.gid);
    replaced_after(
        &mut env,
        &move |f| {
            nix::unistd::chown(
                f,
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            )
            .unwrap()
        },
        &format!("belongs to uid {uid}"),
    );
    env.stop_daemon();
}

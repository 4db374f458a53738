//! Peer verbs through the real binary (spec 07 "Peers", spec 01 §5): create, init, verify,
//! remove, live-runtime, and the registry under 20 concurrent writers.

use crate::common;

use iapeer::paths::peer;

use common::TestEnv;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn registry_text(env: &TestEnv) -> String {
    common::read(&env.paths().registry())
}

fn registry(env: &TestEnv) -> Value {
    serde_json::from_str(&registry_text(env)).expect("the registry is valid JSON")
}

fn names_in(reg: &Value) -> Vec<String> {
    reg["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["personality"].as_str().unwrap().to_string())
        .collect()
}

fn entry<'a>(reg: &'a Value, name: &str) -> &'a Value {
    reg["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["personality"] == name)
        .unwrap_or_else(|| panic!("{name} in {reg}"))
}

fn profile_path(folder: &Path) -> PathBuf {
    peer::profile(folder)
}

#[test]
fn twenty_concurrent_creates_leave_every_entry() {
    let env = TestEnv::new();
    let names: Vec<String> = (1..=20).map(|i| format!("p{i:02}")).collect();
    // Start all 20 before waiting for any.
    let children: Vec<_> = names
        .iter()
        .rev()
        .map(|n| {
            env.cmd(&["create", n, "--runtime", "echo"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn create")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", common::describe(&out));
    }
    let text = registry_text(&env);
    let reg: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(
        names_in(&reg),
        names,
        "exactly the 20 peers, sorted by personality"
    );
    assert_eq!(reg["version"], 2);
    assert!(
        text.ends_with("}\n") && text.contains("\n  \"peers\": ["),
        "pretty, 2-space indent, final newline"
    );
    for n in &names {
        assert!(
            profile_path(&env.peer_dir(n)).is_file(),
            "{n} has its profile"
        );
    }
    // The atomic writer's temporary files (`.<name>.tmp-<pid>-<n>`, fsutil) are all gone.
    let leftovers: Vec<_> = std::fs::read_dir(&env.root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let out = env.ok(&["verify"]);
    assert_eq!(out.trim(), "ok: 20 peer(s), no problems");
}

#[test]
fn create_refuses_names_taken_or_not_matching_the_folder() {
    let env = TestEnv::new();
    env.create_echo("alice");
    // Again, the same: idempotent, the same line (spec 07). With another description: said,
    // with the old one (issue 30 item 6).
    let again = env.ok(&["create", "alice", "--runtime", "echo"]);
    assert!(again.starts_with("created peer alice in "), "{again}");
    let changed = env.ok(&["create", "alice", "--description", "writes the docs"]);
    assert!(
        changed.starts_with(
            "peer alice already exists: description set to \"writes the docs\" (was \"\")"
        ),
        "{changed}"
    );
    assert_eq!(
        entry(&registry(&env), "alice")["description"],
        "writes the docs"
    );
    let elsewhere = env.dir.path().join("elsewhere/alice");
    let (_, err) = env.fails(
        &[
            "create",
            "alice",
            "--runtime",
            "echo",
            "--path",
            elsewhere.to_str().unwrap(),
        ],
        1,
    );
    assert!(
        err.starts_with(&format!(
            "iapeer create: peer \"alice\" already exists at {}",
            env.peer_dir("alice").display()
        )),
        "{err}"
    );
    assert!(
        !profile_path(&elsewhere).exists(),
        "nothing written into the refused folder"
    );
    assert_eq!(
        entry(&registry(&env), "alice")["cwd"],
        env.peer_dir("alice").display().to_string()
    );

    let carol = env.dir.path().join("Carol");
    let (_, err) = env.fails(
        &[
            "create",
            "bob",
            "--runtime",
            "echo",
            "--path",
            carol.to_str().unwrap(),
        ],
        1,
    );
    assert!(
        err.starts_with(
            "iapeer create: the folder name \"Carol\" gives the peer name \"carol\", not \"bob\""
        ),
        "{err}"
    );
    assert!(!carol.exists(), "a refused folder is not made");
    // The folder's normalized name is the peer's name.
    let out = env.ok(&[
        "create",
        "carol",
        "--runtime",
        "echo",
        "--path",
        carol.to_str().unwrap(),
    ]);
    assert!(out.starts_with("created peer carol in "), "{out}");
    assert_eq!(names_in(&registry(&env)), ["alice", "carol"]);
    // Invalid names are refused before anything is made.
    let (_, err) = env.fails(&["create", "Bad_Name", "--runtime", "echo"], 1);
    assert!(err.contains("invalid name \"Bad_Name\""), "{err}");
}

#[test]
fn init_names_the_peer_after_its_folder_and_is_idempotent() {
    let env = TestEnv::new();
    let folder = env.dir.path().join("Мой Помощник");
    std::fs::create_dir(&folder).unwrap();
    let init = || {
        let out = env
            .cmd(&["init", "--runtime", "echo", "--description", "my helper"])
            .current_dir(&folder)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::describe(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = init();
    assert!(
        out.starts_with(&format!(
            "initialized peer moi-pomoshchnik in {}",
            folder.display()
        )),
        "{out}"
    );
    let reg = registry(&env);
    assert_eq!(names_in(&reg), ["moi-pomoshchnik"]);
    let e = entry(&reg, "moi-pomoshchnik");
    assert_eq!(e["cwd"], folder.display().to_string());
    assert_eq!(e["default_runtime"], "echo");
    assert_eq!(e["description"], "my helper");
    assert_eq!(e["intelligence"], "artificial");
    let profile: Value = serde_json::from_str(&common::read(&profile_path(&folder))).unwrap();
    assert_eq!(profile["personality"], "moi-pomoshchnik");
    let doctrine = peer::doctrine(&folder);
    assert!(doctrine.is_file());
    std::fs::write(&doctrine, "# mine\n").unwrap();

    // Again: same result, nothing rewritten that the user owns.
    let (reg_before, prof_before) = (registry_text(&env), common::read(&profile_path(&folder)));
    let out = init();
    assert!(out.starts_with("initialized peer moi-pomoshchnik"), "{out}");
    assert_eq!(registry_text(&env), reg_before);
    assert_eq!(common::read(&profile_path(&folder)), prof_before);
    assert_eq!(
        common::read(&doctrine),
        "# mine\n",
        "IAPEER.md is never overwritten"
    );
    // The folder given as an argument works the same.
    let out = env.ok(&["init", folder.to_str().unwrap()]);
    assert!(out.starts_with("initialized peer moi-pomoshchnik"), "{out}");
    assert_eq!(registry_text(&env), reg_before);
    assert_eq!(env.ok(&["verify"]).trim(), "ok: 1 peer(s), no problems");

    // A folder holding another peer's profile (copied by hand) is refused.
    let dave = env.dir.path().join("dave");
    std::fs::create_dir_all(peer::dir(&dave)).unwrap();
    std::fs::copy(profile_path(&folder), profile_path(&dave)).unwrap();
    let (_, err) = env.fails(&["init", dave.to_str().unwrap(), "--runtime", "echo"], 1);
    assert!(
        err.starts_with(&format!(
            "iapeer init: {} already holds the profile of peer \"moi-pomoshchnik\"",
            dave.display()
        )),
        "{err}"
    );
    assert_eq!(registry_text(&env), reg_before);
}

/// Issue 30 item 6: a peer folder moved by hand. `verify` says the folder is gone and that
/// `init` belongs in its new place (not `init <old path>`, nor `--fix`); `init` there
/// re-points the registry and messages reach the peer in its new folder. A second folder of
/// the same name while the first still holds the peer stays refused.
#[test]
fn init_in_a_folder_moved_by_hand_re_points_the_registry() {
    let mut env = TestEnv::new();
    env.create_echo("carl");
    let old = env.peer_dir("carl");
    let new = env.dir.path().join("work/carl");
    std::fs::create_dir_all(new.parent().unwrap()).unwrap();

    // While carl's folder is in place, another folder named carl is refused.
    let twin = env.dir.path().join("twin/carl");
    std::fs::create_dir_all(&twin).unwrap();
    let (_, err) = env.fails(&["init", twin.to_str().unwrap(), "--runtime", "echo"], 1);
    assert!(err.contains("peer \"carl\" already exists at"), "{err}");

    std::fs::rename(&old, &new).unwrap();
    let (out, _) = env.fails(&["verify"], 1);
    assert!(
        out.contains(&format!(
            "carl: its folder {} is gone — if you moved it, run `iapeer init` in its new place",
            old.display()
        )),
        "{out}"
    );
    assert!(!out.contains("verify --fix"), "{out}");
    let out = env.cmd(&["init"]).current_dir(&new).output().unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let canonical = new.canonicalize().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "moved peer carl: the registry now points to {} (was {})",
            canonical.display(),
            old.display()
        )
    );
    assert_eq!(
        entry(&registry(&env), "carl")["cwd"],
        canonical.display().to_string()
    );
    assert_eq!(env.ok(&["verify"]).trim(), "ok: 1 peer(s), no problems");
    // The twin is still refused: the moved folder holds carl now.
    let (_, err) = env.fails(&["init", twin.to_str().unwrap(), "--runtime", "echo"], 1);
    assert!(err.contains("peer \"carl\" already exists at"), "{err}");

    env.create_echo("alice");
    env.start_daemon();
    let out = env.ok(&[
        "send",
        "carl",
        "--from",
        "echo-alice",
        "--message",
        "echo: here?",
    ]);
    assert!(out.starts_with("delivered to carl (echo)"), "{out}");
    let pid: u32 = env.events("lifecycle", "wake").last().unwrap()["pid"]
        .parse()
        .unwrap();
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd, canonical, "the session runs in the new folder");
}

#[test]
fn verify_reports_drift_and_fix_rebuilds_the_registry_from_profiles() {
    let env = TestEnv::new();
    for n in ["alice", "bob", "carol"] {
        env.create_echo(n);
    }
    assert_eq!(env.ok(&["verify"]).trim(), "ok: 3 peer(s), no problems");
    let good = registry_text(&env);

    // A hand-edited profile: the registry does not have its description.
    let prof = profile_path(&env.peer_dir("bob"));
    let mut p: Value = serde_json::from_str(&common::read(&prof)).unwrap();
    p["description"] = Value::from("edited by hand");
    std::fs::write(&prof, serde_json::to_string_pretty(&p).unwrap()).unwrap();
    let (out, _) = env.fails(&["verify"], 1);
    assert!(
        out.contains("bob: the registry entry differs from the profile (the profile wins)"),
        "{out}"
    );
    assert!(out.contains("iapeer verify --fix"), "{out}");
    let v: Value = serde_json::from_str(env.fails(&["verify", "--json"], 1).0.trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["problems"][0]["peer"], "bob");
    let out = env.ok(&["verify", "--fix"]);
    assert_eq!(
        out.trim(),
        "ok: 3 peer(s), no problems (registry rebuilt from the profiles)"
    );
    assert_eq!(
        entry(&registry(&env), "bob")["description"],
        "edited by hand",
        "the profile wins"
    );
    let good_after_edit = registry_text(&env);
    assert_ne!(good_after_edit, good);

    // A deleted registry: every peer reported unregistered, then rebuilt as it was.
    std::fs::remove_file(env.paths().registry()).unwrap();
    let (out, _) = env.fails(&["verify"], 1);
    for n in ["alice", "bob", "carol"] {
        assert!(
            out.contains(&format!(
                "{n}: has a profile in {} but is not registered",
                env.peer_dir(n).display()
            )),
            "{out}"
        );
    }
    env.ok(&["verify", "--fix"]);
    assert_eq!(registry_text(&env), good_after_edit);

    // A corrupt registry: list fails naming the file and the fix; verify --fix rebuilds it.
    std::fs::write(env.paths().registry(), "{\"version\": 2, \"peers\": [").unwrap();
    let (out, err) = env.fails(&["list"], 1);
    assert!(out.is_empty());
    assert!(err.starts_with("iapeer list: "), "{err}");
    assert!(
        err.contains(&env.paths().registry().display().to_string()),
        "{err}"
    );
    assert!(err.contains("iapeer verify --fix"), "{err}");
    let (out, _) = env.fails(&["verify"], 1);
    assert!(out.contains("registry: the peer registry"), "{out}");
    let out = env.ok(&["verify", "--fix"]);
    assert_eq!(
        out.trim().lines().last(),
        Some("ok: 3 peer(s), no problems (registry rebuilt from the profiles)")
    );
    for p in ["alice", "bob", "carol"] {
        assert!(
            out.contains(&format!("fixed {p}: registered from")),
            "every change is reported: {out}"
        );
    }
    assert_eq!(registry_text(&env), good_after_edit);
    assert_eq!(env.list().as_array().unwrap().len(), 3);

    // A profile that is not JSON: --fix cannot repair it; it claims no fix for it, names the
    // problem, and the hint says where such an error is fixed.
    std::fs::write(profile_path(&env.peer_dir("bob")), "{ not json").unwrap();
    let (out, _) = env.fails(&["verify"], 1);
    assert!(out.lines().any(|l| l.starts_with("bob: ")), "{out}");
    assert!(
        out.contains("(an error inside a profile is fixed by editing that file)"),
        "{out}"
    );
    let (out, _) = env.fails(&["verify", "--fix"], 1);
    assert!(!out.contains("not repaired"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("bob: ")), "{out}");
}

#[test]
fn remove_and_live_runtime_with_a_live_peer() {
    let mut env = TestEnv::new();
    for n in ["alice", "bob", "carol"] {
        env.create_echo(n);
    }
    env.start_daemon();
    let file = env.dir.path().join("notes.txt");
    std::fs::write(&file, "n").unwrap();
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "hi",
        "--topic",
        "plans",
        "--attachment",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.trim(), "delivered to bob (echo), woke");
    // Let bob's echo reach alice, so nothing is in flight.
    env.wait_until("bob's echo reaches alice", Duration::from_secs(20), |e| {
        e.has_event(
            "delivery",
            "delivery",
            &[("caller", "echo-bob"), ("to", "alice"), ("ok", "true")],
        )
    });

    // live-runtime: the runtime of a live peer; exit 1 and nothing on stdout for an asleep one.
    assert_eq!(env.ok(&["live-runtime", "bob"]), "echo\n");
    let (out, _) = env.fails(&["live-runtime", "carol"], 1);
    assert_eq!(out, "");
    let (out, _) = env.fails(&["live-runtime", "nobody"], 1);
    assert_eq!(out, "");

    let session: Value = serde_json::from_str(&common::read(&env.marker("echo-bob", ".session")))
        .expect("bob's session marker");
    let pid = session["pid"].as_u64().unwrap() as u32;
    assert!(common::alive(pid));
    let inbox = env.paths().attachments_dir("bob");
    assert!(inbox.is_dir());
    let bob_markers = |e: &TestEnv| -> Vec<String> {
        std::fs::read_dir(e.paths().lifecycle_dir())
            .map(|d| {
                d.flatten()
                    .map(|x| x.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("echo-bob."))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(
        !bob_markers(&env).is_empty(),
        "bob has markers before removal"
    );

    // Refused while live without --force; nothing changed.
    let (_, err) = env.fails(&["remove", "bob"], 1);
    assert_eq!(
        err.trim(),
        "iapeer remove: peer \"bob\" is live (echo-bob)\n  hint: stop it first (iapeer stop bob) or pass --force"
    );
    assert!(names_in(&registry(&env)).contains(&"bob".to_string()));
    assert!(common::alive(pid) && inbox.is_dir());

    // --force: session ended, inbox and markers deleted, folder kept.
    let out = env.ok(&["remove", "bob", "--force"]);
    assert!(
        out.contains(&format!("folder kept: {}", env.peer_dir("bob").display())),
        "{out}"
    );
    env.wait_until("bob's session ends", Duration::from_secs(15), |_| {
        !common::alive(pid)
    });
    env.wait_until("the daemon records the end", Duration::from_secs(10), |e| {
        e.has_event("lifecycle", "session-end", &[("identity", "echo-bob")])
    });
    assert!(
        env.has_event(
            "lifecycle",
            "session-end",
            &[("identity", "echo-bob"), ("cause", "removed")]
        ),
        "{}",
        env.diagnostics()
    );
    assert_eq!(names_in(&registry(&env)), ["alice", "carol"]);
    assert!(!inbox.exists(), "the inbox is deleted");
    assert_eq!(
        bob_markers(&env),
        Vec::<String>::new(),
        "the markers are deleted"
    );
    assert!(env.peer_dir("bob").is_dir(), "the folder is kept");
    assert!(
        peer::removed_profile(&env.peer_dir("bob")).is_file(),
        "the profile is set aside (init restores it)"
    );
    let (out, _) = env.fails(&["live-runtime", "bob"], 1);
    assert_eq!(out, "");
    let (_, err) = env.fails(
        &[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            "still there?",
        ],
        1,
    );
    assert!(
        err.contains("peer \"bob\" is not in the iapeer peers index"),
        "{err}"
    );

    // Removing an unknown peer is a no-op that succeeds.
    let out = env.ok(&["remove", "bob"]);
    assert!(out.contains("nothing to remove"), "{out}");
    env.ok(&["remove", "zed"]);
    // An asleep peer needs no --force.
    env.ok(&["remove", "carol"]);
    assert_eq!(names_in(&registry(&env)), ["alice"]);
}

/// Issue 7 item 8: `iapeer rename <old> <new>` (spec 07), which refusals already pointed to.
/// A peer is named after its folder, so its folder moves beside itself, with its Claude Code
/// history; a live peer needs --force; taken and invalid names are refused.
#[test]
fn rename_moves_the_folder_history_profile_and_registry_and_refuses_what_it_must() {
    let mut env = TestEnv::new();
    env.create_echo("bob");
    env.create_echo("eve");
    let bob = env.peer_dir("bob");
    // Claude Code's history of bob's folder (its project folder is the real path, dashed).
    let dashed = |p: &Path| -> String {
        p.canonicalize()
            .unwrap_or_else(|_| p.to_path_buf())
            .to_string_lossy()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect()
    };
    let projects = env.home.join(".claude/projects");
    let bob_history = projects.join(dashed(&bob));
    std::fs::create_dir_all(&bob_history).unwrap();
    std::fs::write(bob_history.join("s.jsonl"), "{\"type\":\"user\"}\n").unwrap();
    env.start_daemon();
    env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-eve",
        "--message",
        "hi",
        "--topic",
        "t",
    ]);

    let (_, err) = env.fails(&["rename", "bob", "carol"], 1);
    assert!(err.contains("is live") && err.contains("--force"), "{err}");
    let (_, err) = env.fails(&["rename", "bob", "eve"], 1);
    assert!(err.contains("already exists"), "{err}");
    let (_, err) = env.fails(&["rename", "bob", "Not_Valid", "--force"], 1);
    assert!(err.contains("Not_Valid"), "{err}");
    let (_, err) = env.fails(&["rename", "nobody", "carol"], 1);
    assert!(err.contains("is not in the iapeer peers index"), "{err}");
    assert!(bob.is_dir(), "nothing moved on a refusal");

    // A human inbox left under bob's name (by a removed human) is no business of an echo
    // peer's rename.
    let stray = env.paths().inbox("bob");
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::write(&stray, "").unwrap();
    let out = env.ok(&["rename", "bob", "carol", "--force"]);
    assert!(stray.exists() && !env.paths().inbox("carol").exists());
    let carol = env.peer_dir("carol");
    assert!(out.contains("renamed bob to carol"), "{out}");
    assert!(carol.is_dir() && !bob.exists());
    let profile: Value = serde_json::from_str(&common::read(&profile_path(&carol))).unwrap();
    assert_eq!(profile["personality"], "carol");
    let reg = registry(&env);
    assert!(!names_in(&reg).contains(&"bob".to_string()));
    assert_eq!(
        entry(&reg, "carol")["cwd"].as_str().map(PathBuf::from),
        Some(carol.clone())
    );
    assert!(!bob_history.exists());
    assert!(projects.join(dashed(&carol)).join("s.jsonl").is_file());
    // The renamed peer works under its new name.
    let out = env.ok(&[
        "send",
        "carol",
        "--from",
        "echo-eve",
        "--message",
        "hi carol",
        "--topic",
        "t",
    ]);
    assert!(out.contains("delivered to carol"), "{out}");
    env.wait_until(
        "carol's pane shows the message",
        Duration::from_secs(20),
        |e| e.pane("echo-carol").contains("hi carol"),
    );
}

/// A renamed human keeps its inbox and read mark, runs again under its new name at once (its
/// inbox writer is always-on, spec 05 §8), and a later peer under the old name starts with an
/// empty inbox (found by a newcomer walkthrough: the inbox stayed under the old name); a
/// removed one's messages are set aside, not handed to the next peer of its name.
#[test]
fn rename_of_a_human_moves_its_inbox_and_starts_it_again() {
    let mut env = TestEnv::new();
    env.create_echo("al");
    env.start_daemon();
    env.ok(&["create", "frank", "--runtime", "human"]);
    let send = |to: &str, text: &str| env.ok(&["send", to, "--from", "echo-al", "--message", text]);
    assert!(send("frank", "important note").contains("delivered to frank"));
    let out = env.ok(&["inbox", "frank"]);
    assert!(out.contains("important note"), "{out}");

    env.ok(&["rename", "frank", "frankie", "--force"]);
    let out = env.ok(&["inbox", "frankie", "--all"]);
    assert!(out.contains("important note"), "{out}");
    let out = send("frankie", "after the rename");
    assert!(out.contains("delivered to frankie"), "{out}");
    // Only the new message is unread: the read mark moved too.
    let out = env.ok(&["inbox", "frankie"]);
    assert!(
        out.contains("after the rename") && !out.contains("important note"),
        "{out}"
    );

    env.ok(&["create", "frank", "--runtime", "human"]);
    let out = env.ok(&["inbox", "frank", "--all"]);
    assert!(!out.contains("important note"), "{out}");

    // Removed, a human's messages are kept aside: a new frankie starts empty.
    let out = env.ok(&["remove", "frankie", "--force", "--json"]);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let kept = PathBuf::from(v["inbox_kept"].as_str().expect("where the inbox went"));
    assert!(common::read(&kept).contains("important note"));
    assert!(!env.paths().inbox("frankie").exists());
    env.ok(&["create", "frankie", "--runtime", "human"]);
    let out = env.ok(&["inbox", "frankie", "--all"]);
    assert!(out.contains("no messages yet"), "{out}");
}

/// Every runtime a peer declares must take its intelligence: naming a human runtime with
/// `--intelligence natural` for an existing echo peer is refused and changes nothing (it used
/// to say "created" and leave a profile no send accepts).
#[test]
fn create_refuses_an_intelligence_that_a_declared_runtime_does_not_take() {
    let env = TestEnv::new();
    env.create_echo("alice");
    let before = common::read(&profile_path(&env.peer_dir("alice")));
    let (_, err) = env.fails(
        &[
            "create",
            "alice",
            "--runtime",
            "human",
            "--intelligence",
            "natural",
        ],
        1,
    );
    assert!(
        err.contains("a peer of intelligence natural cannot run on echo")
            && err.contains("its own peer"),
        "{err}"
    );
    assert_eq!(common::read(&profile_path(&env.peer_dir("alice"))), before);
    env.ok(&["verify"]);
}

/// A description another tool wrote into the registry (a newline, an escape sequence) is
/// shown by `list` as one row with its controls visible, and kept exact by `list --json`
/// (newcomer walkthrough: a newline split the row, `ESC[2J` cleared the terminal).
#[test]
fn list_shows_a_description_as_one_line_with_its_controls_visible() {
    let env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    let raw = "first line\nsecond \u{1b}[2J line";
    let mut reg = registry(&env);
    for p in reg["peers"].as_array_mut().unwrap() {
        if p["personality"] == "alice" {
            p["description"] = raw.into();
        }
    }
    std::fs::write(env.paths().registry(), reg.to_string()).unwrap();
    let out = env.ok(&["list"]);
    assert!(!out.contains('\u{1b}'), "{out:?}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("alice ")).collect();
    assert_eq!(rows.len(), 1, "{out}");
    assert!(
        rows[0].ends_with("first line\u{2424}second \u{241b}[2J line"),
        "{out}"
    );
    assert_eq!(out.lines().filter(|l| l.starts_with("bob ")).count(), 1);
    let rows = env.list();
    let described: Vec<&Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["description"])
        .collect();
    assert_eq!(described, [&Value::from(raw), &Value::from("")]);
}

/// `add-runtime` for one named peer that cannot take the runtime is a refusal (exit 1, the
/// reason and what to do), as `create` refuses the same; with `--all` such a peer is skipped
/// with a note (newcomer walkthrough: `add-runtime echo --peer you` on a human exited 0 with
/// outcome "skipped").
#[test]
fn add_runtime_refuses_a_named_peer_of_another_intelligence_and_all_skips_it() {
    let env = TestEnv::new();
    env.ok(&["create", "you", "--runtime", "human"]);
    env.create_echo("alice");
    let before = registry_text(&env);
    let (out, err) = env.fails(&["add-runtime", "echo", "--peer", "you"], 1);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("peer \"you\": a peer of intelligence natural cannot run on echo")
            && err.contains("iapeer create <name> --runtime echo"),
        "{err}"
    );
    assert_eq!(registry_text(&env), before, "nothing changed");
    let (_, err) = env.fails(&["add-runtime", "echo", "--peer", "you", "--json"], 1);
    assert!(err.contains("cannot run on echo"), "{err}");
    let out = env.ok(&["add-runtime", "echo", "--all"]);
    assert_eq!(
        out,
        "alice: echo already declared (setup refreshed)\n\
         you: skipped (a peer of intelligence natural cannot run on echo)\n",
    );
}

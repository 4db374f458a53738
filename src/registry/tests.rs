use super::*;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::paths::Paths;
use crate::testkit::temp_root;

fn peer(name: &str) -> RegistryPeer {
    RegistryPeer::new(name, &["claude"], "artificial", format!("/w/{name}"))
}

fn upsert(paths: &Paths, p: RegistryPeer) -> Result<(), RegistryError> {
    Registry::update(paths, |r| {
        r.upsert(p);
        Ok::<_, RegistryError>(())
    })
}

#[test]
fn a_missing_file_is_an_empty_registry() {
    let (_t, paths) = temp_root();
    assert_eq!(Registry::load(&paths).unwrap(), Registry::default());
}

#[test]
fn written_file_is_sorted_pretty_and_exact() {
    let (_t, paths) = temp_root();
    let mut zoe = peer("zoe");
    zoe.runtimes.push("codex".into());
    zoe.description = "Writes docs.".into();
    let mut ann = peer("ann");
    ann.default_runtime = "telegram".into();
    ann.runtimes = vec!["telegram".into()];
    ann.intelligence = "human".into();
    ann.cwd = PathBuf::from("/home/ann");
    ann.interfaces =
        Some(serde_json::from_str(r#"{"telegram":{"bot_username":"ann_bot"}}"#).unwrap());
    upsert(&paths, zoe).unwrap();
    upsert(&paths, ann).unwrap();
    let golden = r#"{
  "version": 2,
  "peers": [
    {
      "personality": "ann",
      "default_runtime": "telegram",
      "runtimes": [
        "telegram"
      ],
      "description": "",
      "intelligence": "human",
      "cwd": "/home/ann",
      "interfaces": {
        "telegram": {
          "bot_username": "ann_bot"
        }
      }
    },
    {
      "personality": "zoe",
      "default_runtime": "claude",
      "runtimes": [
        "claude",
        "codex"
      ],
      "description": "Writes docs.",
      "intelligence": "artificial",
      "cwd": "/w/zoe"
    }
  ]
}
"#;
    assert_eq!(fs::read_to_string(paths.registry()).unwrap(), golden);
    let loaded = Registry::load(&paths).unwrap();
    assert_eq!(loaded.to_file_text().unwrap(), golden);
    assert_eq!(loaded.find("ann").unwrap().telegram_bot(), Some("ann_bot"));
}

#[test]
fn corrupt_files_are_hard_errors_that_point_at_verify_fix() {
    let (_t, paths) = temp_root();
    fs::create_dir_all(paths.root()).unwrap();
    let dup = r#"{"version":2,"peers":[
        {"personality":"bob","default_runtime":"claude","cwd":"/a"},
        {"personality":"bob","default_runtime":"codex","cwd":"/b"}]}"#;
    let cases = [
        ("{\"version\":", "invalid JSON"),
        ("[]", "not a JSON object"),
        (r#"{"peers":{}}"#, "\"peers\" is not an array"),
        (
            r#"{"peers":[{"cwd":"/a","default_runtime":"claude"}]}"#,
            "peer #1 has no valid",
        ),
        (
            r#"{"peers":[{"personality":"Bob","cwd":"/a"}]}"#,
            "peer #1 has no valid",
        ),
        (
            r#"{"peers":[{"personality":"bob","cwd":"/a","runtimes":"x"}]}"#,
            "peer \"bob\"",
        ),
        (
            r#"{"peers":[{"personality":"bob","default_runtime":"claude"}]}"#,
            "no \"cwd\"",
        ),
        (dup, "personality \"bob\" is listed more than once"),
    ];
    for (text, needle) in cases {
        fs::write(paths.registry(), text).unwrap();
        let msg = Registry::load(&paths).unwrap_err().to_string();
        assert!(msg.contains(needle), "{text}: {msg}");
        assert!(
            msg.contains(&paths.registry().display().to_string()),
            "{msg}"
        );
        assert!(msg.contains("iapeer verify --fix"), "{msg}");
        // Writers refuse to build on a corrupt file and leave it alone.
        assert!(upsert(&paths, peer("eve")).is_err());
        assert_eq!(fs::read_to_string(paths.registry()).unwrap(), text);
    }
    // verify --fix can still replace it.
    let mut fixed = Registry::default();
    fixed.upsert(peer("bob"));
    Registry::replace(&paths, fixed.clone()).unwrap();
    assert_eq!(Registry::load(&paths).unwrap(), fixed);
}

#[test]
fn newer_versions_and_legacy_fields_read_the_known_fields() {
    let (_t, paths) = temp_root();
    fs::create_dir_all(paths.root()).unwrap();
    fs::write(
        paths.registry(),
        r#"{"version":7,"future":true,"peers":[
            {"personality":"tim","runtime":"notifier","cwd":"/t","color":"red"},
            {"personality":"ann","runtimes":["telegram"],"cwd":"/a"}]}"#,
    )
    .unwrap();
    let reg = Registry::load(&paths).unwrap();
    assert_eq!(reg.version, 7);
    let tim = reg.find("tim").unwrap();
    assert_eq!(tim.default_runtime, "notifier");
    assert_eq!(tim.runtimes, ["notifier"]);
    assert_eq!(tim.intelligence, "absent");
    let ann = reg.find("ann").unwrap();
    assert_eq!(ann.default_runtime, "telegram");
    assert_eq!(ann.intelligence, "natural");
    // The next write brings it back to version 2 with only the documented fields.
    upsert(&paths, peer("bob")).unwrap();
    let text = fs::read_to_string(paths.registry()).unwrap();
    assert!(text.starts_with("{\n  \"version\": 2,"));
    assert!(!text.contains("color") && !text.contains("future") && !text.contains("\"runtime\""));
}

#[test]
fn a_failed_edit_or_an_invalid_result_writes_nothing() {
    let (_t, paths) = temp_root();
    let r: Result<(), String> = Registry::update(&paths, |reg| {
        reg.upsert(peer("bob"));
        Err("changed my mind".to_string())
    });
    assert_eq!(r.unwrap_err(), "changed my mind");
    assert!(!paths.registry().exists());

    upsert(&paths, peer("bob")).unwrap();
    let before = fs::read_to_string(paths.registry()).unwrap();
    let err = Registry::update(&paths, |reg| {
        reg.peers.push(peer("bob"));
        Ok::<_, RegistryError>(())
    })
    .unwrap_err();
    assert!(matches!(err, RegistryError::Refused { .. }), "{err}");
    assert_eq!(fs::read_to_string(paths.registry()).unwrap(), before);
}

impl From<RegistryError> for String {
    fn from(e: RegistryError) -> String {
        e.to_string()
    }
}

#[test]
fn upsert_remove_and_containing() {
    let mut reg = Registry::default();
    assert!(reg.upsert(peer("bob")).is_none());
    let mut bob2 = peer("bob");
    bob2.description = "new".into();
    assert_eq!(reg.upsert(bob2).unwrap().description, "");
    assert_eq!(reg.peers.len(), 1);
    assert_eq!(reg.find("bob").unwrap().description, "new");
    let mut inner = peer("inner");
    inner.cwd = PathBuf::from("/w/bob/sub");
    reg.upsert(inner);
    assert_eq!(
        reg.containing(Path::new("/w/bob/sub/x"))
            .unwrap()
            .personality,
        "inner"
    );
    assert_eq!(
        reg.containing(Path::new("/w/bob/x")).unwrap().personality,
        "bob"
    );
    assert!(reg.containing(Path::new("/w/bobby")).is_none());
    assert!(reg.remove("bob"));
    assert!(!reg.remove("bob"));
    assert_eq!(reg.peers.len(), 1);
}

#[test]
fn threads_writing_at_once_lose_nothing() {
    let (_t, paths) = temp_root();
    crate::testkit::at_once(8, 5, |t, i| {
        upsert(&paths, peer(&format!("t{t}-{i}"))).unwrap();
    });
    assert_eq!(Registry::load(&paths).unwrap().peers.len(), 40);
}

const CHILD_ROOT: &str = "IAPEER_TEST_REGISTRY_CHILD_ROOT";
const CHILD_NAME: &str = "IAPEER_TEST_REGISTRY_CHILD_NAME";

/// Spec 01 §5: 20 processes each creating a different peer at the same moment leave all 20.
/// Each child is this test binary running [`child_upserts_one_peer`]; all start, then wait
/// for a `go` file so their writes collide.
#[test]
fn twenty_processes_writing_at_once_lose_nothing() {
    let (_t, paths) = temp_root();
    fs::create_dir_all(paths.root()).unwrap();
    let exe = std::env::current_exe().unwrap();
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let child_test = format!("{module}::child_upserts_one_peer");
    let mut children = Vec::new();
    for i in 0..20 {
        let child = Command::new(&exe)
            .args([&child_test, "--exact", "--ignored", "--test-threads=1"])
            .env(CHILD_ROOT, paths.root())
            .env(CHILD_NAME, format!("proc-{i:02}"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        children.push(child);
    }
    fs::write(paths.root().join("go"), "").unwrap();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let names: Vec<String> = Registry::load(&paths)
        .unwrap()
        .peers
        .into_iter()
        .map(|p| p.personality)
        .collect();
    let want: Vec<String> = (0..20).map(|i| format!("proc-{i:02}")).collect();
    assert_eq!(names, want);
}

#[test]
#[ignore = "child process of twenty_processes_writing_at_once_lose_nothing"]
fn child_upserts_one_peer() {
    let (Ok(root), Ok(name)) = (std::env::var(CHILD_ROOT), std::env::var(CHILD_NAME)) else {
        return;
    };
    let go = Path::new(&root).join("go");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !go.exists() {
        assert!(Instant::now() < deadline, "no go signal");
        std::thread::sleep(Duration::from_millis(1));
    }
    upsert(&Paths::at(&root), peer(&name)).unwrap();
}

#[test]
fn the_only_natural_peer_is_the_owner() {
    let human = |name: &str| RegistryPeer {
        intelligence: "natural".to_string(),
        ..peer(name)
    };
    let mut r = Registry {
        version: 2,
        peers: vec![peer("alice")],
    };
    assert_eq!(r.only_natural().map(|p| p.personality.clone()), Err(0));
    r.upsert(human("you"));
    assert_eq!(
        r.only_natural().map(|p| p.personality.clone()),
        Ok("you".to_string())
    );
    r.upsert(human("me"));
    r.upsert(human("them"));
    assert_eq!(r.only_natural().map(|p| p.personality.clone()), Err(3));
}

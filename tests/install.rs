//! `iapeer install`, the reference docs and `scripts/install.sh` (spec 08 §1): the docs the
//! system prompt points to exist after a plain daemon start; the systemd unit passes the real
//! `systemd-analyze verify` (the plist's check with Python's `plistlib` is a unit test of
//! `host::service`); a second install
//! changes nothing; a unit the user took over (no mark) is left alone; the script puts the binary, man page
//! and completions in place. No service manager runs here, and install never loads anything.

use crate::common;

use common::{bin, describe, TestEnv};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// The embedded README, as the repository holds it.
const README: &str = include_str!("../docs/reference/README.md");

/// Every file under `dir` (recursively) with its mtime, inode and change time (s, ns).
fn mtimes(dir: &Path) -> BTreeMap<PathBuf, (SystemTime, u64, i64, i64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else {
                use std::os::unix::fs::MetadataExt;
                let changed = (meta.ctime(), meta.ctime_nsec());
                out.insert(
                    p,
                    (meta.modified().unwrap(), meta.ino(), changed.0, changed.1),
                );
            }
        }
    }
    out
}

/// The system prompt of a session names `<root>/docs/` and `iapeer/README.md`; after a plain
/// daemon start (no install) that file exists with the embedded bytes, and so do the others.
#[test]
fn a_plain_daemon_start_writes_the_docs_the_system_prompt_names() {
    let mut env = TestEnv::new();
    env.create_echo("alice");
    env.create_echo("bob");
    env.start_daemon();
    env.ok(&["send", "bob", "--from", "echo-alice", "--message", "hi"]);
    let prompt = std::fs::read_to_string(env.marker("echo-bob", ".system-prompt.md")).unwrap();
    let docs = env.root.join("docs");
    let pointer = format!("{}/", docs.display());
    assert!(
        prompt.contains(&pointer) && prompt.contains("iapeer/README.md"),
        "the prompt does not point to {pointer}iapeer/README.md:\n{prompt}"
    );
    let readme = docs.join("iapeer").join("README.md");
    assert_eq!(
        std::fs::read_to_string(&readme).unwrap_or_default(),
        README,
        "{} is missing or differs from docs/reference/README.md\n{}",
        readme.display(),
        env.diagnostics()
    );
    for (name, text) in [
        ("PROTOCOL.md", include_str!("../docs/PROTOCOL.md")),
        ("ENVIRONMENT.md", include_str!("../docs/ENVIRONMENT.md")),
    ] {
        assert_eq!(
            std::fs::read_to_string(docs.join("iapeer").join(name)).unwrap_or_default(),
            text,
            "{name}"
        );
    }
}

/// With `IAPEER_SYSTEMD_DIR` set, install writes a unit the real `systemd-analyze verify`
/// accepts without a word (its ExecStart is the binary under test, which exists); the root
/// layout, the doctrine stub and the docs are there; a second install changes no file.
#[test]
fn install_writes_a_unit_systemd_accepts_and_a_second_install_changes_nothing() {
    let mut env = TestEnv::new();
    let sd = env.dir.path().join("systemd-user");
    env.set("IAPEER_SYSTEMD_DIR", sd.to_str().unwrap());
    let out = env.ok(&["install"]);
    let unit = sd.join("iapeer.service");
    assert!(
        out.contains(&format!(
            "service: systemd {} (written, not loaded)",
            unit.display()
        )),
        "{out}"
    );
    assert!(out.contains("systemctl --user daemon-reload"), "{out}");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(text.starts_with("# com.iapeer.managed"), "{text}");
    for line in [
        format!("ExecStart={} daemon", bin().display()),
        "Restart=on-failure".into(),
        "RestartSec=2".into(),
        "Delegate=yes".into(),
        format!("Environment=\"IAPEER_ROOT={}\"", env.root.display()),
        "Environment=\"IAPEER_PORT=0\"".into(),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "unit lacks {line}:\n{text}"
        );
    }
    assert!(
        text.lines().any(|l| l.starts_with("Environment=\"PATH=")),
        "{text}"
    );
    assert_systemd_accepts(&unit);
    for p in [
        env.root.join("IAPEER.md"),
        env.root.join("docs/iapeer/README.md"),
        env.root.join("state/iapeer"),
        env.root.join("logs/iapeer"),
        env.root.join("peers"),
        env.root.join("runtimes"),
    ] {
        assert!(p.exists(), "{} is missing after install", p.display());
    }
    assert!(!env.socket().exists(), "install started a daemon");

    // A file written again shows as another inode (an atomic write) or a later change time
    // (one in place: the second `install` process starts well after this reading).
    let before = (mtimes(&env.root), mtimes(&sd));
    let again = env.ok(&["install"]);
    assert_eq!((mtimes(&env.root), mtimes(&sd)), before, "{again}");
    for want in ["(kept)", "(up to date)", "(unchanged, not loaded)"] {
        assert!(again.contains(want), "missing {want:?} in:\n{again}");
    }
}

/// `systemd-analyze verify` on `unit`: accepted without a word.
fn assert_systemd_accepts(unit: &Path) {
    let verify = Command::new("/usr/bin/systemd-analyze")
        .arg("verify")
        .arg(unit)
        .output()
        .expect("run systemd-analyze (Debian's systemd package)");
    assert!(
        verify.status.success() && verify.stderr.is_empty() && verify.stdout.is_empty(),
        "systemd-analyze verify: {}\n{}",
        describe(&verify),
        std::fs::read_to_string(unit).unwrap_or_default()
    );
}

/// The unit's comment says how to keep one's own edits; doing exactly that makes the unit the
/// user's: install leaves it as it is, says so and how to get iapeer's version back, and
/// exits 0 (newcomer walkthrough: the comment named the wrong line, and a unit without the
/// mark made every install exit 1, failing scripts/install.sh's last step). A unit the user
/// wrote from scratch is left alone the same way.
#[test]
fn install_leaves_a_unit_the_user_took_over_alone_and_exits_0() {
    let mut env = TestEnv::new();
    let sd = env.dir.path().join("systemd-user");
    env.set("IAPEER_SYSTEMD_DIR", sd.to_str().unwrap());
    env.ok(&["install"]);
    let unit = sd.join("iapeer.service");
    let written = std::fs::read_to_string(&unit).unwrap();
    // Follow the comment: delete the line it names, then edit.
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(
        lines[1],
        "# To keep your own edits, delete the line above; iapeer will then leave the file alone."
    );
    let mut mine: Vec<&str> = lines[1..].to_vec();
    let at = mine.iter().position(|l| *l == "RestartSec=2").unwrap();
    mine[at] = "RestartSec=30";
    let mine = mine.join("\n") + "\n";
    std::fs::write(&unit, &mine).unwrap();
    assert_systemd_accepts(&unit);
    let out = env.ok(&["install"]);
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), mine, "{out}");
    assert!(
        out.contains(&format!(
            "service: systemd {} (yours: it has no com.iapeer.managed mark, so install left it as it is)",
            unit.display()
        )) && out.contains("to get iapeer's version back: move it aside (or delete it), then run iapeer install"),
        "{out}"
    );
    let doc: serde_json::Value = serde_json::from_str(&env.ok(&["install", "--json"])).unwrap();
    assert_eq!(doc["service"]["state"], "yours", "{doc}");

    let scratch = "[Service]\nExecStart=/opt/my/iapeer daemon\n";
    std::fs::write(&unit, scratch).unwrap();
    let out = env.ok(&["install"]);
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), scratch);
    assert!(
        out.contains("(yours: it has no com.iapeer.managed mark"),
        "{out}"
    );
    assert!(env.root.join("docs/iapeer/README.md").exists());
}

/// Where no service manager runs (this machine, containers, CI), install says so and how to
/// run the daemon by hand; the host doctrine a user wrote is kept.
#[test]
fn install_without_a_service_manager_says_how_to_run_the_daemon() {
    if Path::new("/run/systemd/system").exists() {
        eprintln!("skipped: a systemd manager runs on this machine");
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.root).unwrap();
    std::fs::write(env.root.join("IAPEER.md"), "my rules\n").unwrap();
    let out = env.ok(&["install"]);
    assert!(
        out.contains("service: none (no service manager available"),
        "{out}"
    );
    assert!(
        out.contains(&format!("{} daemon", bin().display())),
        "{out}"
    );
    assert!(out.contains("(kept)"), "{out}");
    assert_eq!(
        std::fs::read_to_string(env.root.join("IAPEER.md")).unwrap(),
        "my rules\n"
    );
}

/// `scripts/install.sh` with a temp HOME and the binary under test: the binary, man page and
/// completions land where each tool looks; a second run with a different binary keeps the
/// first as `iapeer.prev`; `man -w iapeer` finds the page through PATH alone (MANPATH unset).
#[test]
fn install_script_puts_binary_man_page_and_completions_in_place() {
    let env = TestEnv::new();
    let home = &env.home;
    let local_bin = home.join(".local/bin");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install.sh");
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", local_bin.display());
    let run = |from: &Path| {
        let out = Command::new("bash")
            .arg(&script)
            .env("HOME", home)
            .env("IAPEER_ROOT", &env.root)
            .env("IAPEER_INSTALL_FROM", from)
            .env("PATH", &path)
            .env_remove("IAPEER_BIN_DIR")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("IAPEER_SYSTEMD_DIR")
            .output()
            .expect("run scripts/install.sh");
        assert!(out.status.success(), "install.sh: {}", describe(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = run(&bin());
    let installed = local_bin.join("iapeer");
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(bin()).unwrap()
    );
    assert!(!local_bin.join("iapeer.prev").exists(), "{first}");
    for (file, what) in [
        (".local/share/man/man1/iapeer.1", "man"),
        (
            ".local/share/bash-completion/completions/iapeer",
            "completions-bash",
        ),
        (".local/share/zsh/site-functions/_iapeer", "completions-zsh"),
        (".config/fish/completions/iapeer.fish", "completions-fish"),
    ] {
        let want = env.ok(&["--generate", what]);
        let got = std::fs::read_to_string(home.join(file)).unwrap_or_default();
        assert!(
            !want.is_empty() && got == want,
            "{file} is not `iapeer --generate {what}`"
        );
    }
    assert!(env.root.join("docs/iapeer/README.md").exists(), "{first}");
    assert!(
        first.contains("doctrine:"),
        "install.sh did not run `iapeer install`:\n{first}"
    );

    // A second run with another build: the first binary becomes iapeer.prev.
    let newer = env.dir.path().join("iapeer-newer");
    let mut bytes = std::fs::read(bin()).unwrap();
    bytes.extend_from_slice(b"\n# another build\n");
    std::fs::write(&newer, &bytes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&newer, std::fs::Permissions::from_mode(0o755)).unwrap();
    let second = run(&newer);
    assert_eq!(std::fs::read(&installed).unwrap(), bytes, "{second}");
    assert_eq!(
        std::fs::read(local_bin.join("iapeer.prev")).unwrap(),
        std::fs::read(bin()).unwrap(),
        "{second}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&local_bin)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "iapeer" && n != "iapeer.prev")
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");

    let man = Command::new("man")
        .args(["-w", "iapeer"])
        .env("HOME", home)
        .env("PATH", &path)
        .env_remove("MANPATH")
        .output()
        .expect("run man");
    assert!(man.status.success(), "man -w iapeer: {}", describe(&man));
    assert_eq!(
        String::from_utf8_lossy(&man.stdout).trim(),
        home.join(".local/share/man/man1/iapeer.1")
            .display()
            .to_string()
    );
}

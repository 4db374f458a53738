//! What a sender's attachment may cost the host (issue 26 item 2), against the real daemon:
//! every kind of source it refuses (a FIFO, a device, a folder, a `/proc` file, a file over
//! the cap), each refusal naming the attachment, what was wrong and what to do.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::TestEnv;

/// Echo peers `names`, and a daemon started with `vars`.
fn world(names: &[&str], vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    for (k, v) in vars {
        env.set(k, v);
    }
    for n in names {
        env.create_echo(n);
    }
    env.start_daemon();
    env
}

/// `iapeer send bob --from echo-alice` with a good attachment, then `bad`: the refusal's
/// text after `iapeer send: ` (exit 1, nothing printed on stdout).
pub(crate) fn refused_second_attachment(env: &TestEnv, bad: &Path) -> String {
    let good = env.dir.path().join("good.txt");
    std::fs::write(&good, "fine").unwrap();
    let (out, err) = env.fails(
        &[
            "send",
            "bob",
            "--from",
            "echo-alice",
            "--message",
            "two files",
            "--attachment",
            good.to_str().unwrap(),
            "--attachment",
            bad.to_str().unwrap(),
        ],
        1,
    );
    assert!(out.is_empty(), "{out}");
    err.trim_end()
        .strip_prefix("iapeer send: ")
        .unwrap_or_else(|| panic!("{err}"))
        .to_string()
}

/// The start of a refusal of attachment 2 at `path`.
pub(crate) fn second(path: &Path) -> String {
    format!("attachment 2 \"{}\" could not be copied: ", path.display())
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

const FIFO_REFUSAL: &str = "it is a named pipe (FIFO), not a regular file — write what it carries \
                            to a regular file and attach that";

#[test]
fn a_fifo_is_refused_with_what_to_do_by_the_daemon_and_without_it() {
    let mut env = world(&["alice", "bob"], &[]);
    let fifo = env.dir.path().join("pipe");
    mkfifo(&fifo);
    let want = format!("{}{FIFO_REFUSAL}", second(&fifo));
    assert_eq!(refused_second_attachment(&env, &fifo), want);
    // A link to it reads the same (the link is resolved, its target is never opened).
    let link = env.dir.path().join("report.txt");
    symlink(&fifo, &link).unwrap();
    assert_eq!(
        refused_second_attachment(&env, &link),
        format!("{}{FIFO_REFUSAL}", second(&link))
    );
    // With the daemon down the send would be kept in the outbox: refused the same way, and
    // nothing is kept.
    env.stop_daemon();
    assert_eq!(refused_second_attachment(&env, &fifo), want);
    assert!(
        iapeer_outbox(&env).is_empty(),
        "nothing kept: {:?}",
        iapeer_outbox(&env)
    );
}

fn iapeer_outbox(env: &TestEnv) -> Vec<PathBuf> {
    std::fs::read_dir(env.paths().state_dir().join("outbox"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn a_device_is_refused_without_being_opened() {
    let env = world(&["alice", "bob"], &[]);
    let dev = Path::new("/dev/null");
    assert_eq!(
        refused_second_attachment(&env, dev),
        format!(
            "{}it is a character device, not a regular file — copy what you need from it into a \
             regular file and attach that",
            second(dev)
        )
    );
}

#[test]
fn a_folder_is_refused_with_what_to_attach_instead() {
    let env = world(&["alice", "bob"], &[]);
    let folder = env.dir.path().join("results");
    std::fs::create_dir(&folder).unwrap();
    assert_eq!(
        refused_second_attachment(&env, &folder),
        format!(
            "{}it is a folder, not a regular file — attach the files in it, or an archive of it \
             (tar, zip)",
            second(&folder)
        )
    );
}

#[test]
fn a_proc_or_sys_file_is_refused() {
    let env = world(&["alice", "bob"], &[]);
    // Before issue 26 the daemon copied these (its own status and environment included).
    for (path, fs) in [
        ("/proc/self/status", "/proc (procfs)"),
        ("/proc/self/environ", "/proc (procfs)"),
        ("/sys/kernel/uevent_seqnum", "/sys (sysfs)"),
    ] {
        let path = Path::new(path);
        assert_eq!(
            refused_second_attachment(&env, path),
            format!(
                "{}it is on {fs}, a kernel file system whose files are made up as they are read \
                 (their size is not what a read gives) — copy what you need into a regular file \
                 and attach that",
                second(path)
            )
        );
    }
    // Only the good attachment was ever copied.
    let copies: Vec<String> = std::fs::read_dir(env.paths().attachments_dir("bob"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(copies, ["good.txt"]);
}

#[test]
fn a_file_over_the_cap_is_refused_naming_the_variable_that_raises_it() {
    let env = world(
        &["alice", "bob"],
        &[("IAPEER_ATTACHMENT_MAX_BYTES", "1000")],
    );
    let big = env.dir.path().join("big.log");
    std::fs::write(&big, vec![b'x'; 1001]).unwrap();
    assert_eq!(
        refused_second_attachment(&env, &big),
        format!(
            "{}it is 1001 bytes, over the 1000-byte limit for an attachment — attach a smaller \
             file, or raise IAPEER_ATTACHMENT_MAX_BYTES (for the daemon and iapeer send)",
            second(&big)
        )
    );
    // At the cap it goes.
    std::fs::write(&big, vec![b'x'; 1000]).unwrap();
    let out = env.ok(&[
        "send",
        "bob",
        "--from",
        "echo-alice",
        "--message",
        "at the cap",
        "--attachment",
        big.to_str().unwrap(),
    ]);
    assert!(out.starts_with("delivered to bob"), "{out}");
}

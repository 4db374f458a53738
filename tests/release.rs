//! The release binary's debug info (README "Release binary", issue 29 item 7): moved out of the
//! binary by `scripts/split-debug.sh` (the last step of `scripts/release.sh`) into
//! `iapeer-<id>.debug` beside it, carried by `scripts/install.sh`, and read by a panic's
//! backtrace for file and line.
//!
//! This build's binary (a debug build, or a release build with the `test-hooks` feature) is
//! split here the way a release build is; `IAPEER_TEST_RELEASE_BIN=<binary>` runs the test on a
//! binary split already instead — `scripts/check-release.sh` passes its release build, since a
//! release build (fat LTO) takes minutes that the suite does not spend.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{self, TestEnv};

/// The section names of an ELF file (binutils' `readelf -S`).
fn sections(file: &Path) -> String {
    let out = Command::new("readelf")
        .args(["-S", "-W"])
        .arg(file)
        .output()
        .expect("readelf (binutils) runs");
    assert!(out.status.success(), "{}", common::describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Lines of a backtrace that give a file and line in iapeer's own source
/// (`at <path>/src/<file>.rs:<line>:<column>`).
fn own_frames(trace: &str) -> Vec<&str> {
    trace
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.strip_prefix("at ")
                .and_then(|at| at.split_once("src/"))
                .and_then(|(_, file)| file.split_once(".rs:"))
                .is_some_and(|(_, line)| line.starts_with(|c: char| c.is_ascii_digit()))
                && !l.contains("/rustc/")
                && !l.contains("/.cargo/")
        })
        .collect()
}

#[test]
fn a_split_binary_installed_by_the_script_names_file_and_line_in_a_backtrace() {
    let mut env = TestEnv::new();
    let bin = match std::env::var("IAPEER_TEST_RELEASE_BIN") {
        Ok(b) if !b.is_empty() => PathBuf::from(b),
        _ => {
            let build = env.dir.path().join("build");
            std::fs::create_dir_all(&build).unwrap();
            let bin = build.join("iapeer");
            std::fs::copy(common::bin(), &bin).unwrap();
            let out = Command::new("bash")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/split-debug.sh"))
                .arg(&bin)
                .output()
                .expect("run scripts/split-debug.sh");
            assert!(out.status.success(), "{}", common::describe(&out));
            bin
        }
    };
    // No line tables and no symbol table are left in the binary: function names, file and
    // line can only come from the debug file.
    let own = sections(&bin);
    assert!(
        own.contains(".gnu_debuglink") && !own.contains(".debug_line") && !own.contains(".symtab"),
        "{own}"
    );
    let link = Command::new("readelf")
        .args(["-p", ".gnu_debuglink"])
        .arg(&bin)
        .output()
        .expect("readelf (binutils) runs");
    let link = String::from_utf8_lossy(&link.stdout);
    let debug_name = link
        .split_whitespace()
        .find(|w| w.starts_with("iapeer-") && w.ends_with(".debug"))
        .unwrap_or_else(|| panic!("no debug link: {link}"));

    // Installed as a user installs it.
    let bin_dir = env.home.join(".local/bin");
    let out = env
        .install_script(&bin)
        .output()
        .expect("run scripts/install.sh");
    assert!(out.status.success(), "{}", common::describe(&out));

    // The installed daemon panics on its HTTP acceptor thread (a test hook) and logs the
    // backtrace, as it does for any panic with RUST_BACKTRACE=1.
    env.set("IAPEER_TEST_HOOK", "http-accept-panic-once:any");
    env.set("RUST_BACKTRACE", "1");
    std::fs::create_dir_all(&env.root).unwrap();
    let daemon = env
        .cmd_of(&bin_dir.join("iapeer"), &["daemon"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the installed daemon");
    env.daemon = Some(daemon);
    env.wait_until("the daemon answers", Duration::from_secs(15), |e| {
        std::os::unix::net::UnixStream::connect(e.socket()).is_ok() && e.router_json().exists()
    });
    // Held open: a connection whose client is gone is refused before the acceptor's hook.
    let _conn = std::net::TcpStream::connect(("127.0.0.1", env.port())).expect("connect");
    env.wait_until(
        "the acceptor's backtrace is logged",
        Duration::from_secs(30),
        |e| {
            e.log("daemon")
                .contains("backtrace of thread 'http-accept'")
        },
    );
    let log = env.log("daemon");
    let trace = &log[log.find("backtrace of thread 'http-accept'").unwrap()..];
    let frames = own_frames(trace);
    eprintln!("frames with iapeer's file and line:\n{}", frames.join("\n"));
    assert!(
        frames.iter().any(|f| f.contains("src/daemon/")),
        "no frame names a file and line of src/daemon:\n{trace}"
    );
    assert!(
        trace.contains("iapeer::daemon::"),
        "no frame names a function of iapeer::daemon:\n{trace}"
    );
    assert!(
        bin_dir.join(debug_name).is_file(),
        "{}",
        common::describe(&out)
    );
}

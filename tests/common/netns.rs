//! Separate network namespaces for the federation tests' hosts (issue 28 item 7): each
//! host's daemon in a fresh network namespace of its own with only its `lo` up, so two
//! "machines" on one test machine share no loopback and reach each other only through
//! Redis on a Unix socket (a socket file is reached by its path from any namespace).
//!
//! It needs the right to make a namespace (root, or `unshare --net` allowed) and `ip`;
//! [`available`] says whether this machine allows it, and why not.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The shell line run by `unshare --net`: bring the namespace's `lo` up, then become the
/// command (`$0 "$@"`), keeping the pid `unshare` started with.
const LO_UP_THEN_EXEC: &str = "ip link set lo up && exec \"$0\" \"$@\"";

/// `Ok` when this machine lets a process run in a network namespace of its own with its
/// `lo` up; else why not (the probe's own error). Probed once per test run.
pub fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let out = Command::new("unshare")
                .args(["--net", "--", "sh", "-c", LO_UP_THEN_EXEC, "true"])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run unshare: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "`unshare --net sh -c 'ip link set lo up'` failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        })
        .clone()
}

/// `command` (a program and its arguments, with `env`'s environment) run in a fresh network
/// namespace with its `lo` up, under the same pid.
pub fn command_in_own_namespace(env: &super::TestEnv, program: &Path, args: &[&str]) -> Command {
    let program = program.to_str().expect("a UTF-8 program path");
    let mut all = vec!["--net", "--", "sh", "-c", LO_UP_THEN_EXEC, program];
    all.extend_from_slice(args);
    env.cmd_of(Path::new("unshare"), &all)
}

/// The network namespace of process `pid` (`/proc/<pid>/ns/net`'s link, `net:[<inode>]`).
pub fn namespace_of(pid: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/ns/net: {e}"))
        .to_string_lossy()
        .into_owned()
}

/// Run `f` on a thread of its own inside the network namespace of process `pid` (so a TCP
/// connection it makes to 127.0.0.1 is to that namespace's loopback), and return its result.
/// A thread's `setns` moves that thread only.
pub fn inside<T: Send>(pid: u32, f: impl FnOnce() -> T + Send) -> T {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/ns/net: {e}"));
    std::thread::scope(|s| {
        s.spawn(move || {
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .unwrap_or_else(|e| panic!("setns into the namespace of pid {pid}: {e}"));
            f()
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// Whether a TCP connection to 127.0.0.1:`port` is accepted from where it is called.
pub fn loopback_port_answers(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        std::time::Duration::from_secs(2),
    )
    .is_ok()
}

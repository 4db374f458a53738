//! A real second local user, for the tests that try every way into a team as another uid
//! would (issue 26 item 1): made with `useradd` for one test, removed with `userdel` when it
//! ends. Adding a user needs root, as CI runs; elsewhere [`OtherUser::create`] prints that
//! the test is skipped and why, and the test returns without claiming anything.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The user; removed when dropped.
pub struct OtherUser {
    /// Its login name (`iapt<pid>x<n>`).
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its own group's gid.
    pub gid: u32,
}

/// Run `useradd`/`userdel` with `args`, again while another test holds the password files'
/// lock (both refuse at once then, exit 10 "cannot lock /etc/passwd").
fn admin(program: &str, args: &[&str]) {
    // Retried while the other holder, a separate process, keeps the lock (polled: nothing
    // to wait on).
    let done = super::poll(Duration::from_secs(10), || {
        let out = Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run {program}: {e} (it comes with the passwd package)")
            });
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() && !err.contains("lock") {
            panic!("{program} {}: {err}", args.join(" "));
        }
        out.status.success()
    });
    assert!(
        done,
        "{program} {}: the password files stayed locked",
        args.join(" ")
    );
}

impl OtherUser {
    /// A new unprivileged user with its own group, no home and no login shell; `None` (and a
    /// line saying that the calling test, named by its thread, is skipped, and why) when this
    /// process is not root.
    pub fn create() -> Option<OtherUser> {
        let me = nix::unistd::Uid::effective();
        let test = std::thread::current()
            .name()
            .unwrap_or("this test")
            .to_string();
        if !me.is_root() {
            eprintln!(
                "skipped: {test} tries the way in as a real second local user, which only root \
                 can add (useradd); this run is uid {me}, so nothing was checked. CI runs the \
                 suite as root."
            );
            return None;
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "iapt{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        admin(
            "useradd",
            &[
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                "--user-group",
                &name,
            ],
        );
        let user = nix::unistd::User::from_name(&name)
            .unwrap()
            .unwrap_or_else(|| panic!("useradd made no user {name}"));
        assert_ne!(user.uid.as_raw(), 0);
        Some(OtherUser {
            name,
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        })
    }

    /// `program` run as this user: its uid and gid (the standard library drops root's
    /// supplementary groups with them), a clean environment (`PATH`, `HOME=/`), in `/`.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new(program);
        c.uid(self.uid)
            .gid(self.gid)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", "/")
            .current_dir("/")
            .stdin(Stdio::null());
        c
    }

    /// `sh -c script` (with `args` as `$1…`) as this user; its output, whatever its exit.
    pub fn sh(&self, script: &str, args: &[&str]) -> Output {
        self.command("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .args(args)
            .output()
            .unwrap()
    }
}

impl Drop for OtherUser {
    fn drop(&mut self) {
        admin("userdel", &[&self.name]);
    }
}

/// Let every user traverse the folders from `/` down to `dir` (mode `o+x` added, nothing
/// else changed), as a home folder often is (Debian makes them 0755): from there on only
/// iapeer's own modes protect what it keeps.
pub fn open_path_to(dir: &Path) {
    for d in dir.ancestors() {
        let Ok(meta) = std::fs::metadata(d) else {
            continue;
        };
        let mode = meta.permissions().mode();
        if mode & 0o001 == 0 {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o005)).unwrap();
        }
    }
}

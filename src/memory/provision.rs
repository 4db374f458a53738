//! The memory provider at a peer's birth and removal (spec 08 §3). At birth (`create`,
//! `init`, `add-runtime`), for each agent runtime the provider can equip (claude, codex), in
//! order: the runtime's setup has trusted the folder (codex) → native memory off →
//! `provision`; at `remove`, `unprovision` before the peer's state is purged. The command is
//! the slot's, with `{cwd}`, `{runtime}`, `{personality}` and `{occasion}` substituted
//! inside each argument, spawned directly (no shell) in the peer folder, and killed after
//! `IAPEER_MEMORY_PROVISION_SECS` (120 s). Its outcome goes to `lifecycle.log`:
//!
//! ```text
//! ev=memory-provision identity=claude-bob occasion=birth state=ok exit=0 ms=84
//! ```
//!
//! It never fails the birth or the removal: a failure is logged and said on stderr.

use std::path::Path;
use std::time::Duration;

use super::native::{self, LeverState, Setting};
use super::slot::{read_slot, ProviderCommand};
use crate::child::{self, Ending};
use crate::eventlog::{Event, EventLog};
use crate::paths::Paths;

/// Why the provider is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occasion {
    /// The peer was created or initialized, or got a runtime.
    Birth,
    /// The peer is being removed.
    Remove,
}

impl Occasion {
    /// `birth` or `remove`, the value of `{occasion}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Occasion::Birth => "birth",
            Occasion::Remove => "remove",
        }
    }
}

/// The peer runtime the provider is called for.
#[derive(Debug, Clone, Copy)]
pub struct PeerRuntime<'a> {
    /// The peer folder (absolute): `{cwd}`.
    pub cwd: &'a Path,
    /// `{runtime}`.
    pub runtime: &'a str,
    /// `{personality}`.
    pub personality: &'a str,
}

/// `args` with every placeholder replaced inside each argument (an argument is never split
/// or joined: no shell sees them).
pub fn substitute(args: &[String], peer: &PeerRuntime, occasion: Occasion) -> Vec<String> {
    let cwd = peer.cwd.to_string_lossy();
    args.iter()
        .map(|a| {
            a.replace("{cwd}", &cwd)
                .replace("{runtime}", peer.runtime)
                .replace("{personality}", peer.personality)
                .replace("{occasion}", occasion.as_str())
        })
        .collect()
}

/// How a provider command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Exit status 0.
    Ok,
    /// Another exit status, or killed by a signal.
    Failed,
    /// Still running at the deadline; killed.
    Timeout,
    /// The program is missing or cannot be executed.
    NotExecutable,
}

impl State {
    /// The `state=` value of the event.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Failed => "failed",
            State::Timeout => "timeout",
            State::NotExecutable => "not-executable",
        }
    }
}

/// One run of a provider command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// How it ended.
    pub state: State,
    /// Its exit status, when it exited.
    pub exit: Option<i32>,
    /// How long it ran, in milliseconds.
    pub ms: u64,
    /// The tail of its stderr (at most [`DETAIL_CHARS`] characters), or why it could not start.
    pub detail: String,
}

/// The most characters of a command's stderr kept in the event.
pub const DETAIL_CHARS: usize = 300;

/// Run `program args` in `cwd` (`child::run`: its own process group, killed at `deadline`).
pub fn run(program: &Path, args: &[String], cwd: &Path, deadline: Duration) -> Outcome {
    let done = child::run(program, args, cwd, &[], deadline);
    let (state, exit) = match done.ending {
        Ending::Exited(Some(0)) => (State::Ok, Some(0)),
        Ending::Exited(code) => (State::Failed, code),
        Ending::Timeout => (State::Timeout, None),
        Ending::NotExecutable => (State::NotExecutable, None),
        Ending::SpawnFailed => (State::Failed, None),
    };
    let detail = if done.stderr.trim().is_empty() {
        String::new()
    } else {
        child::last_chars(done.stderr.trim(), DETAIL_CHARS)
    };
    Outcome {
        state,
        exit,
        ms: done.ms,
        detail,
    }
}

/// The deadline from `IAPEER_MEMORY_PROVISION_SECS` (a bad value: the default, with a
/// warning).
fn deadline() -> Duration {
    let var = crate::config::vars::IAPEER_MEMORY_PROVISION_SECS;
    let mut warnings = Vec::new();
    let raw = std::env::var(var.name).ok();
    let d = var.parse_duration(raw.as_deref(), &mut warnings);
    for w in warnings {
        log::warn!("{w}");
    }
    d
}

/// Call the provider's `provision` (birth) or `unprovision` (remove) for one peer runtime,
/// log the outcome, and say a failure on stderr. `None` when the slot is empty or declares
/// no such command.
pub fn call(
    paths: &Paths,
    command: Option<&ProviderCommand>,
    peer: &PeerRuntime,
    occasion: Occasion,
) -> Option<Outcome> {
    let command = command?;
    let args = substitute(&command.args, peer, occasion);
    let outcome = run(&command.command, &args, peer.cwd, deadline());
    let identity = format!("{}-{}", peer.runtime, peer.personality);
    EventLog::from_env(paths.lifecycle_log(), "LIFECYCLE").append(
        &Event::new("memory-provision")
            .field("identity", &identity)
            .field("occasion", occasion.as_str())
            .field("state", outcome.state.as_str())
            .opt("exit", outcome.exit)
            .field("ms", outcome.ms)
            .opt("detail", Some(&outcome.detail).filter(|d| !d.is_empty())),
    );
    if outcome.state != State::Ok {
        eprintln!(
            "warning: the memory provider's {} for {identity} ended {}{}{} (the peer is {} anyway; \
             see {})",
            match occasion {
                Occasion::Birth => "provision",
                Occasion::Remove => "unprovision",
            },
            outcome.state.as_str(),
            outcome.exit.map(|c| format!(" (exit {c})")).unwrap_or_default(),
            if outcome.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", outcome.detail)
            },
            match occasion {
                Occasion::Birth => "created",
                Occasion::Remove => "removed",
            },
            paths.lifecycle_log().display()
        );
    }
    Some(outcome)
}

/// The birth step for the peer `personality` in `cwd` on each of `runtimes` the provider
/// can equip: native memory off, then `provision`. Nothing when the slot is empty.
pub fn at_birth(paths: &Paths, cwd: &Path, personality: &str, runtimes: &[String]) {
    let Some(slot) = read_slot(paths) else {
        return;
    };
    for rt in runtimes.iter().filter(|rt| native::has_lever(rt)) {
        if let Some((file, LeverState::Failed(why))) = native::set(rt, cwd, Setting::Off) {
            eprintln!(
                "warning: native memory of {rt}-{personality} stays on ({why}); fix {} and run \
                 iapeer native-memory off --peer {personality}",
                file.display()
            );
        }
        let peer = PeerRuntime {
            cwd,
            runtime: rt,
            personality,
        };
        call(paths, slot.provision.as_ref(), &peer, Occasion::Birth);
    }
}

/// The removal step: `unprovision` for each of `runtimes` the provider can equip. Nothing
/// when the slot is empty. Native memory is not turned back on (the user does that).
pub fn at_remove(paths: &Paths, cwd: &Path, personality: &str, runtimes: &[String]) {
    let Some(slot) = read_slot(paths) else {
        return;
    };
    for rt in runtimes.iter().filter(|rt| native::has_lever(rt)) {
        let peer = PeerRuntime {
            cwd,
            runtime: rt,
            personality,
        };
        call(paths, slot.unprovision.as_ref(), &peer, Occasion::Remove);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn sh(script: &str) -> (PathBuf, Vec<String>) {
        (
            PathBuf::from("/bin/sh"),
            vec!["-c".to_string(), script.to_string()],
        )
    }

    #[test]
    fn placeholders_are_replaced_inside_each_argument() {
        let peer = PeerRuntime {
            cwd: Path::new("/w/my peer"),
            runtime: "codex",
            personality: "bob",
        };
        let args: Vec<String> = [
            "--cwd",
            "{cwd}",
            "x={runtime}-{personality}",
            "{occasion}",
            "{other}",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            substitute(&args, &peer, Occasion::Remove),
            ["--cwd", "/w/my peer", "x=codex-bob", "remove", "{other}"]
        );
    }

    #[test]
    fn each_ending_has_its_state() {
        let dir = tempfile::tempdir().unwrap();
        let long = Duration::from_secs(10);
        let (p, a) = sh("echo fine >&2; exit 0");
        let ok = run(&p, &a, dir.path(), long);
        assert_eq!(
            (ok.state, ok.exit, ok.detail.as_str()),
            (State::Ok, Some(0), "fine")
        );
        let (p, a) = sh("echo first >&2; echo 'disk full' >&2; exit 3");
        let failed = run(&p, &a, dir.path(), long);
        assert_eq!((failed.state, failed.exit), (State::Failed, Some(3)));
        assert_eq!(failed.detail, "first\ndisk full");
        let (p, a) = sh("sleep 30 & sleep 30");
        let t = run(&p, &a, dir.path(), Duration::from_millis(300));
        assert_eq!((t.state, t.exit), (State::Timeout, None));
        assert!(t.ms < 5000, "the group was killed, stderr closed: {}", t.ms);
        let missing = run(Path::new("/nonexistent/prov"), &[], dir.path(), long);
        assert_eq!(missing.state, State::NotExecutable);
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        assert_eq!(
            run(&plain, &[], dir.path(), long).state,
            State::NotExecutable
        );
    }
}

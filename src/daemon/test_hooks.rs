//! Test hooks: failures a test can inject into a real daemon to check that they are
//! contained (after shpool's `libshpool/src/test_hooks.rs`). **Test-only.** Compiled in only
//! where [`COMPILED_IN`]: a debug build (every plain `cargo test`) or the `test-hooks` cargo
//! feature; a release build without the feature never reads `IAPEER_TEST_HOOK`, so no
//! environment variable can make a shipped daemon panic. Where compiled in, off unless
//! `IAPEER_TEST_HOOK` is set when the daemon starts; the variable is read once, by [`init`],
//! and a daemon started without it never looks at it again.
//!
//! Values:
//! - `router-panic-on-send:<personality>`: the router thread panics when it receives a send
//!   to `<personality>` (from the CLI or MCP), with the sender waiting for its answer.
//! - `router-spin-on-send:<personality>`: the router thread spins on the CPU for
//!   [`ROUTER_SPIN`] when it receives a send to `<personality>`, as a router stuck in a loop
//!   would: the real-time watchdog must put it back to the normal policy (issue 31 item 3).
//! - `prep-panic-on-send:<personality>`: the send-preparation worker panics while preparing
//!   a send to `<personality>`.
//! - `http-accept-panic:<port>`: the HTTP acceptor thread panics when it accepts a connection
//!   while listening on `<port>` (`any` for every port): every connection meets the panic,
//!   so the MCP endpoint stays dead (the thread is restarted each time) while the control
//!   socket still answers.
//! - `http-accept-panic-once:<port>`: the same, at the first accepted connection only; the
//!   restarted thread serves the next ones.
//! - `http-streams-panic-once:<port>`: the event-stream thread panics when it takes its first
//!   stream (on `<port>`, or `any`); the restarted thread serves the next ones.
//! - `slow-launch-report:<personality>`: a launcher thread that started a session of
//!   `<personality>` waits [`SLOW_LAUNCH_REPORT`] before it reports to the router, so the
//!   session's first events (and its agent's first MCP calls) come before the router has it.
//! - `slow-tools-list:<ms>`: the MCP server holds its answer to every `tools/list` `<ms>`
//!   milliseconds (at most 10 000), as a daemon slow to list its tools (issue 31 item 1). The
//!   HTTP thread waits meanwhile: nothing else on it moves.
//! - `federation-retention:<ms>`: the federation keeps a message for a host that is offline
//!   `<ms>` milliseconds instead of `crate::federation::keys::RETENTION` (issue 28 item 4):
//!   the recipient refuses an older entry, the sender stops following it after that plus
//!   [`RETENTION_GRACE`].
//! - `late-query-answers:<ms>`: every session thread holds its answers to the child's
//!   terminal capability queries `<ms>` milliseconds (at most 60 000) before writing them, as
//!   on a loaded machine: a CLI that stopped waiting for them reads them as typed keys
//!   (Gemini CLI 0.61.0: `tests/fixtures/gemini-cli-0.61.0/late-answers.txt`).
//! - `daemon-version:<version>`: the daemon reports `<version>` as its version in its answer
//!   to `ping` (the CLI's version check at connect), as a daemon of another build would.
//! - `contain:subreaper`: the daemon contains its sessions as child subreaper even where it
//!   could make a cgroup per session (`session::contain`), so the fallback is tested where
//!   the tests run.
//!
//! Events (shpool's `emit`, written by [`crate::config::test_events`]): with
//! `IAPEER_TEST_EVENTS=<file>` set when the daemon starts, it appends one line per event to
//! `<file>`, so a test waits for "the daemon reached point X" instead of sleeping:
//! - `router-idle`: the router has handled every message and session event it had;
//! - `tick-done`: a supervise tick ended;
//! - `router-send:<personality>`: a send reached the router;
//! - `approvals-wait`: a long poll of `approvals` is parked;
//! - `session-held:<identity>`: the session thread looked again at a message it holds
//!   (behind a draft in the composer, or an open permission prompt) and kept holding it:
//!   nothing of it was written to the agent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Whether this build has the hooks: a debug build (`debug_assertions`, as every plain
/// `cargo test` is) or the `test-hooks` feature. False in a release build without the
/// feature: [`init`] then reads nothing and every hook below does nothing.
pub const COMPILED_IN: bool = crate::config::vars::TEST_HOOKS_COMPILED_IN;

/// How long `router-spin-on-send` keeps the router thread on the CPU: over two of the
/// real-time watchdog's periods, so it sees a whole period of it.
pub const ROUTER_SPIN: Duration = Duration::from_millis(2_500);

/// How long `slow-launch-report` holds a launcher thread's report.
pub const SLOW_LAUNCH_REPORT: Duration = Duration::from_millis(1500);

use crate::config::test_events::emit;
/// The environment variable that turns a hook on (test-only; listed in
/// [`crate::config::vars::NOT_KNOBS`]).
use crate::config::vars::TEST_HOOK as ENV;

/// An injected failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hook {
    /// Panic on the router thread when a send to this personality arrives.
    RouterPanicOnSend(String),
    /// Spin the router thread [`ROUTER_SPIN`] when a send to this personality arrives.
    RouterSpinOnSend(String),
    /// Panic on the send-prep worker preparing a send to this personality.
    PrepPanicOnSend(String),
    /// Panic on the HTTP acceptor thread at its next accepted connection (on this port, or
    /// `any`).
    HttpAcceptPanic(String),
    /// Panic on the HTTP acceptor thread at the first accepted connection (on this port, or
    /// `any`).
    HttpAcceptPanicOnce(String),
    /// Panic on the event-stream thread when it takes its first stream (on this port, or
    /// `any`).
    HttpStreamsPanicOnce(String),
    /// Hold the launcher thread's report of a started session of this personality.
    SlowLaunchReport(String),
    /// Contain sessions this way (`subreaper`) whatever the machine offers.
    Contain(String),
    /// Report this version in the answer to `ping`.
    DaemonVersion(String),
    /// Hold every `tools/list` answer this many milliseconds.
    SlowToolsList(u64),
    /// Keep messages for an offline host this many milliseconds.
    FederationRetention(u64),
    /// Hold the answers to terminal queries this many milliseconds.
    LateQueryAnswers(u64),
}

static HOOK: OnceLock<Option<Hook>> = OnceLock::new();
/// Raised when a `…-once` hook has fired.
static FIRED: AtomicBool = AtomicBool::new(false);

/// Read [`ENV`] once (daemon start). An unknown value is logged and ignored; a build
/// without the hooks ([`COMPILED_IN`] false) does not read it.
pub fn init() {
    HOOK.get_or_init(|| {
        if !COMPILED_IN {
            return None;
        }
        let value = std::env::var(ENV).ok()?;
        let hook = parse(&value);
        match &hook {
            Some(h) => log::warn!("{ENV} is set: test hook {h:?} is active"),
            None => log::warn!("{ENV}={value:?} is not a known test hook; ignored"),
        }
        hook
    });
    crate::config::test_events::init();
}

/// Parse a hook value (`router-panic-on-send:<personality>`,
/// `prep-panic-on-send:<personality>`).
pub fn parse(value: &str) -> Option<Hook> {
    let (name, personality) = value.split_once(':')?;
    let p = personality.to_string();
    match name {
        _ if p.is_empty() => None,
        "router-panic-on-send" => Some(Hook::RouterPanicOnSend(p)),
        "router-spin-on-send" => Some(Hook::RouterSpinOnSend(p)),
        "prep-panic-on-send" => Some(Hook::PrepPanicOnSend(p)),
        "http-accept-panic" => Some(Hook::HttpAcceptPanic(p)),
        "http-accept-panic-once" => Some(Hook::HttpAcceptPanicOnce(p)),
        "http-streams-panic-once" => Some(Hook::HttpStreamsPanicOnce(p)),
        "slow-launch-report" => Some(Hook::SlowLaunchReport(p)),
        "contain" if p == "subreaper" => Some(Hook::Contain(p)),
        "daemon-version" => Some(Hook::DaemonVersion(p)),
        "slow-tools-list" => p
            .parse()
            .ok()
            .filter(|ms| *ms <= 10_000)
            .map(Hook::SlowToolsList),
        "federation-retention" => p.parse().ok().map(Hook::FederationRetention),
        "late-query-answers" => p
            .parse()
            .ok()
            .filter(|ms| *ms <= 60_000)
            .map(Hook::LateQueryAnswers),
        _ => None,
    }
}

/// Called by the router when a send to `to` arrives: panics, or spins on the CPU for
/// [`ROUTER_SPIN`], if the hook asks for it.
pub fn on_router_send(to: &str) {
    emit(format_args!("router-send:{to}"));
    match HOOK.get() {
        Some(Some(Hook::RouterPanicOnSend(p))) if p == to => {
            panic!("test hook {ENV}=router-panic-on-send:{to}")
        }
        Some(Some(Hook::RouterSpinOnSend(p))) if p == to => spin(ROUTER_SPIN),
        _ => {}
    }
}

/// Keep this thread on the CPU for `how_long` (no sleep, no system call but the clock's).
fn spin(how_long: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < how_long {
        std::hint::spin_loop();
    }
}

/// Called by the send-prep worker before it prepares a send to `to`: panics if the hook
/// asks for it.
pub fn on_prepare(to: &str) {
    if let Some(Some(Hook::PrepPanicOnSend(p))) = HOOK.get() {
        if p == to {
            panic!("test hook {ENV}=prep-panic-on-send:{to}");
        }
    }
}

/// Called by the HTTP acceptor for each accepted connection: panics if the hook asks for it.
pub fn on_http_accept(port: u16) {
    match HOOK.get() {
        Some(Some(Hook::HttpAcceptPanic(p))) if on_port(p, port) => {
            panic!("test hook {ENV}=http-accept-panic:{p}")
        }
        Some(Some(Hook::HttpAcceptPanicOnce(p))) if on_port(p, port) && first_time() => {
            panic!("test hook {ENV}=http-accept-panic-once:{p}")
        }
        _ => {}
    }
}

/// Called by the event-stream thread for each stream it takes: panics if the hook asks for
/// it.
pub fn on_http_stream(port: u16) {
    if let Some(Some(Hook::HttpStreamsPanicOnce(p))) = HOOK.get() {
        if on_port(p, port) && first_time() {
            panic!("test hook {ENV}=http-streams-panic-once:{p}");
        }
    }
}

/// A hook's `<port>` value matches `port` (or is `any`).
fn on_port(value: &str, port: u16) -> bool {
    value == "any" || value == port.to_string()
}

/// True the first time only (for the `…-once` hooks).
fn first_time() -> bool {
    !FIRED.swap(true, Ordering::SeqCst)
}

/// Called by a launcher thread before it reports a started session of `personality`:
/// waits [`SLOW_LAUNCH_REPORT`] if the hook asks for it.
pub fn on_launch_report(personality: &str) {
    if let Some(Some(Hook::SlowLaunchReport(p))) = HOOK.get() {
        if p == personality {
            std::thread::sleep(SLOW_LAUNCH_REPORT);
        }
    }
}

/// Called by the MCP server while it makes its answer to `tools/list`: waits the hook's
/// milliseconds if `slow-tools-list` asks for it.
pub fn on_tools_list() {
    if let Some(Some(Hook::SlowToolsList(ms))) = HOOK.get() {
        std::thread::sleep(Duration::from_millis(*ms));
    }
}

/// The version the daemon reports in its `ping` answer: its own, unless `daemon-version`
/// says otherwise.
pub fn version() -> &'static str {
    match HOOK.get() {
        Some(Some(Hook::DaemonVersion(v))) => v,
        _ => env!("CARGO_PKG_VERSION"),
    }
}

/// How long the federation keeps a message for a host that is offline, and what the sender
/// waits past that: [`crate::federation::keys::RETENTION`] and
/// [`crate::federation::keys::RETENTION_GRACE`], unless `federation-retention` says otherwise
/// (then the grace is [`RETENTION_GRACE`]).
pub fn federation_retention() -> (Duration, Duration) {
    use crate::federation::keys;
    match HOOK.get() {
        Some(Some(Hook::FederationRetention(ms))) => (Duration::from_millis(*ms), RETENTION_GRACE),
        _ => (keys::RETENTION, keys::RETENTION_GRACE),
    }
}

/// How long a session holds its answers to terminal queries: zero, unless
/// `late-query-answers` says otherwise.
pub fn late_query_answers() -> Duration {
    match HOOK.get() {
        Some(Some(Hook::LateQueryAnswers(ms))) => Duration::from_millis(*ms),
        _ => Duration::ZERO,
    }
}

/// The sender's wait past a `federation-retention` for the recipient's refusal.
pub const RETENTION_GRACE: Duration = Duration::from_secs(3);

/// Whether sessions may be contained by cgroups (false when `contain:subreaper` is set).
pub fn allows_cgroups() -> bool {
    !matches!(HOOK.get(), Some(Some(Hook::Contain(_))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_router_panic_hook_only() {
        let hook = |make: fn(String) -> Hook, arg: &str| Some(make(arg.into()));
        for (text, want) in [
            (
                "router-panic-on-send:carol",
                hook(Hook::RouterPanicOnSend, "carol"),
            ),
            (
                "router-spin-on-send:erin",
                hook(Hook::RouterSpinOnSend, "erin"),
            ),
            (
                "prep-panic-on-send:dave",
                hook(Hook::PrepPanicOnSend, "dave"),
            ),
            ("http-accept-panic:any", hook(Hook::HttpAcceptPanic, "any")),
            (
                "http-accept-panic-once:8765",
                hook(Hook::HttpAcceptPanicOnce, "8765"),
            ),
            (
                "http-streams-panic-once:any",
                hook(Hook::HttpStreamsPanicOnce, "any"),
            ),
            (
                "slow-launch-report:worker",
                hook(Hook::SlowLaunchReport, "worker"),
            ),
            ("contain:subreaper", hook(Hook::Contain, "subreaper")),
            ("contain:other", None),
            ("daemon-version:0.0.1", hook(Hook::DaemonVersion, "0.0.1")),
            ("slow-tools-list:1000", Some(Hook::SlowToolsList(1000))),
            ("slow-tools-list:10001", None),
            ("slow-tools-list:soon", None),
            (
                "federation-retention:3000",
                Some(Hook::FederationRetention(3000)),
            ),
            (
                "late-query-answers:2000",
                Some(Hook::LateQueryAnswers(2000)),
            ),
            ("late-query-answers:60001", None),
            ("router-panic-on-send:", None),
            ("something-else", None),
        ] {
            assert_eq!(parse(text), want, "{text}");
            // The module doc lists every hook (`IAPEER_TEST_HOOK`'s description points to it).
            if want.is_some() {
                let name = text.split(':').next().unwrap();
                assert!(
                    include_str!("test_hooks.rs").contains(&format!("//! - `{name}:")),
                    "the module doc does not list {name}"
                );
            }
        }
    }

    /// Run by `cargo test --release --lib test_hooks` (or with the `iapeer` package's
    /// `debug-assertions` off, as scripts/test.sh does): what a shipped daemon does.
    #[cfg(not(any(debug_assertions, feature = "test-hooks")))]
    #[test]
    fn a_build_without_the_hooks_ignores_the_variable() {
        use crate::config::test_events::EVENTS_ENV;
        let events = std::env::temp_dir().join(format!("iapeer-events-{}", std::process::id()));
        std::env::set_var(ENV, "contain:subreaper");
        std::env::set_var(EVENTS_ENV, &events);
        init();
        assert_eq!(HOOK.get(), Some(&None), "the hook was read");
        emit("router-idle");
        // `init` creates the file when it opens it.
        assert!(!events.exists(), "the events file was opened or written");
        std::env::remove_var(EVENTS_ENV);
        assert!(allows_cgroups());
        std::env::set_var(ENV, "router-panic-on-send:carol");
        on_router_send("carol");
        std::env::set_var(ENV, "rename-kill-after:journal");
        crate::peers::rename_journal::kill_point("journal");
        std::env::remove_var(ENV);
    }

    #[test]
    fn without_init_nothing_fires() {
        on_router_send("carol");
        on_prepare("carol");
        on_http_accept(1);
        on_http_stream(1);
        on_launch_report("carol");
    }
}

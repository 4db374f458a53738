//! Test events (shpool's `emit`), **test-only**: with `IAPEER_TEST_EVENTS=<file>` set when the
//! daemon starts, the daemon appends one line per event to `<file>`, so a test waits for "the
//! daemon reached point X" instead of sleeping. Compiled in only where
//! [`super::vars::TEST_HOOKS_COMPILED_IN`] (a debug build or the `test-hooks` feature): a release
//! build never opens the file, and [`emit`] then costs one atomic load. Here on the ground floor
//! so that every thread can report, the session threads included; the events are listed in
//! `daemon::test_hooks`.

use std::sync::{Mutex, OnceLock};

/// The environment variable naming the file events are appended to (test-only; listed in
/// [`crate::config::vars::NOT_KNOBS`]).
pub const EVENTS_ENV: &str = "IAPEER_TEST_EVENTS";

/// The events file, open for appending (set by [`init`] from [`EVENTS_ENV`]).
static EVENTS: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();

/// Open [`EVENTS_ENV`]'s file once (daemon start), if set and this build has the hooks.
pub fn init() {
    EVENTS.get_or_init(|| {
        if !super::vars::TEST_HOOKS_COMPILED_IN {
            return None;
        }
        let path = std::env::var_os(EVENTS_ENV)?;
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            Ok(f) => Some(Mutex::new(f)),
            Err(e) => {
                log::warn!("{EVENTS_ENV}={path:?}: cannot open it ({e}); no events");
                None
            }
        }
    });
}

/// Report that the daemon reached `event` (one line in the events file; nothing without
/// one, and `event` is then not even formatted). A write error is ignored: a test that waits
/// for the line then fails on its deadline.
pub fn emit(event: impl std::fmt::Display) {
    if let Some(Some(f)) = EVENTS.get() {
        use std::io::Write as _;
        let mut f = f.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = f.write_all(format!("{event}\n").as_bytes());
    }
}

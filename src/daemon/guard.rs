//! Failure containment for the daemon's threads (spec 02 §1): a panic hook that logs every
//! panic with its thread, location and message; [`catch`] to turn a panic into a value; the
//! record of a fatal failure ([`Fatal`]) that the control loop and the HTTP workers answer
//! with; [`serve_restarting`] to start a thread's loop again after a panic, recorded in
//! [`Restarts`] for `status`; and [`finish_by`] to wait for a piece of shutdown work with a
//! deadline.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::protocol::{Code, Failure, ThreadRestart};

thread_local! {
    /// What the hook saw of this thread's last panic: `panicked at <location> (<message>)`.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Log every panic (`thread '<name>' panicked at <file:line:col>: <message>`) to the
/// daemon's log, on whatever thread it happens, and record a panic on the thread called
/// `fatal_thread` in `fatal` — before unwinding drops that thread's state, so whoever sees
/// its channels close can already read why. Replaces the default hook, which would print
/// the same to stderr a second time (its backtrace, when `RUST_BACKTRACE` asks for one, is
/// logged here too).
pub fn install_panic_hook(fatal: Fatal, fatal_thread: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        let location = info
            .location()
            .map(|l| l.to_string())
            .unwrap_or_else(|| "an unknown location".into());
        let message = payload_text(info.payload());
        log::error!("thread '{name}' panicked at {location}: {message}");
        let _ = LAST_PANIC.try_with(|last| {
            *last.borrow_mut() = Some(format!("panicked at {location} ({message})"));
        });
        // The default hook's backtrace, kept: printed when RUST_BACKTRACE asks for one.
        let trace = std::backtrace::Backtrace::capture();
        if trace.status() == std::backtrace::BacktraceStatus::Captured {
            log::error!("backtrace of thread '{name}':\n{trace}");
        }
        if name == fatal_thread {
            fatal.set(format!(
                "the {name} thread panicked at {location} ({message})"
            ));
        }
    }));
}

/// The message of a panic payload (`&str` or `String`; anything else is named as such).
pub fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

/// Run `f`; a panic becomes `Err(message)` (the hook has already logged where it happened).
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| payload_text(p.as_ref()))
}

/// A fatal failure of the daemon, recorded once and shared by the threads that must answer
/// with it (the control loop, HTTP workers) while the daemon exits.
#[derive(Clone, Default)]
pub struct Fatal(Arc<OnceLock<String>>);

impl Fatal {
    /// A record with nothing in it yet.
    pub fn new() -> Fatal {
        Fatal::default()
    }

    /// Record `what` failed (e.g. "the router thread panicked: <message>"); the first record
    /// wins.
    pub fn set(&self, what: String) {
        let _ = self.0.set(what);
    }

    /// What failed, if anything did.
    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    /// The sentence requesters get: `internal error: <what>; the daemon is exiting`.
    pub fn sentence(&self) -> Option<String> {
        self.get()
            .map(|what| format!("internal error: {what}; the daemon is exiting"))
    }

    /// The reply for a request that cannot be served: code `internal` with
    /// [`Fatal::sentence`], or `None` when nothing failed.
    pub fn failure(&self) -> Option<Failure> {
        self.sentence().map(|s| Failure::new(Code::Internal, s))
    }
}

/// The threads started again after a panic, with what happened to each (shared by those
/// threads and the router, which answers `status` with it). Clones share the record.
#[derive(Debug, Clone, Default)]
pub struct Restarts(Arc<Mutex<Vec<ThreadRestart>>>);

impl Restarts {
    /// A record with nothing in it yet.
    pub fn new() -> Restarts {
        Restarts::default()
    }

    /// Record that `thread` panicked (`what`, at `at_ms` epoch ms) and is restarted; returns
    /// how many times it has been.
    pub fn record(&self, thread: &str, what: String, at_ms: u64) -> u64 {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = match all.iter().position(|r| r.thread == thread) {
            Some(i) => &mut all[i],
            None => {
                all.push(ThreadRestart {
                    thread: thread.to_string(),
                    restarts: 0,
                    last_ms: 0,
                    last: String::new(),
                });
                let last = all.len() - 1;
                &mut all[last]
            }
        };
        entry.restarts += 1;
        entry.last_ms = at_ms;
        entry.last = what;
        entry.restarts
    }

    /// Every restarted thread, in the order of their first restart.
    pub fn list(&self) -> Vec<ThreadRestart> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The shortest time between two starts of one thread's loop by [`serve_restarting`]: a
/// panic that comes back at once costs a restart a second, not a spinning thread.
pub const RESTART_PAUSE: Duration = Duration::from_secs(1);

/// Run `serve(state)` until it returns. When it panics instead, the panic is recorded in
/// `restarts` under the current thread's name (what and when, for `status`) and logged,
/// `recover(state)` lets go of whatever the panic may have left half done, and `serve` runs
/// again (at most once per [`RESTART_PAUSE`]). For threads whose loop owns nothing the
/// daemon cannot lose (the HTTP acceptor and event-stream threads: their connections), so
/// that a panic costs those connections, never the port (issue 26 item 9).
pub fn serve_restarting<S>(
    state: &mut S,
    restarts: &Restarts,
    mut serve: impl FnMut(&mut S),
    mut recover: impl FnMut(&mut S),
) {
    let thread = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_string();
    let mut last_start: Option<Instant> = None;
    loop {
        let message = match catch(|| serve(state)) {
            Ok(()) => return,
            Err(message) => message,
        };
        let what = LAST_PANIC
            .with(|last| last.borrow_mut().take())
            .unwrap_or_else(|| format!("panicked ({message})"));
        let n = restarts.record(&thread, what.clone(), crate::clock::now_ms());
        log::error!("the {thread} thread {what}; restarting it (restart {n})");
        recover(state);
        if let Some(at) = last_start {
            std::thread::sleep(RESTART_PAUSE.saturating_sub(at.elapsed()));
        }
        last_start = Some(Instant::now());
    }
}

/// Run `work` on its own thread and wait for it until `deadline`. Returns false (and logs
/// that `what` did not finish) when the deadline passed first; the work then carries on
/// unobserved and ends with the process.
pub fn finish_by(deadline: Instant, what: &str, work: impl FnOnce() + Send + 'static) -> bool {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new()
        .name(format!("finish-{what}"))
        .spawn(move || {
            work();
            let _ = tx.send(());
        });
    if let Err(e) = spawned {
        log::error!("shutdown: cannot wait for {what}: {e}");
        return false;
    }
    let left = deadline.saturating_duration_since(Instant::now());
    match rx.recv_timeout(left) {
        Ok(()) => true,
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
            log::error!("shutdown: {what} panicked");
            true
        }
        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
            log::error!(
                "shutdown: {what} did not finish in time; exiting without it (bound {} ms)",
                left.as_millis()
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn catch_gives_the_panic_message() {
        assert_eq!(catch(|| 3), Ok(3));
        assert_eq!(
            catch(|| -> () { panic!("boom {}", 1) }),
            Err("boom 1".into())
        );
        assert_eq!(
            catch(|| std::panic::panic_any(5u8)),
            Err("a panic without a message".into())
        );
    }

    #[test]
    fn fatal_answers_internal_once_set() {
        let f = Fatal::new();
        assert!(f.failure().is_none());
        f.set("the router thread panicked: x".into());
        f.set("second".into());
        let failure = f.failure().expect("set");
        assert_eq!(failure.code, Code::Internal);
        assert_eq!(
            failure.error,
            "internal error: the router thread panicked: x; the daemon is exiting"
        );
    }

    /// A loop that panics twice is recorded and started again each time, after `recover`;
    /// it returns once `serve` does.
    #[test]
    fn a_panicking_loop_is_recorded_and_served_again() {
        let restarts = Restarts::new();
        let mut state = (0u32, 0u32); // (serves, recovers)
        let started = Instant::now();
        std::thread::Builder::new()
            .name("looping".into())
            .spawn({
                let restarts = restarts.clone();
                move || {
                    serve_restarting(
                        &mut state,
                        &restarts,
                        |s| {
                            s.0 += 1;
                            if s.0 < 3 {
                                panic!("boom {}", s.0);
                            }
                        },
                        |s| s.1 += 1,
                    );
                    assert_eq!(state, (3, 2));
                }
            })
            .unwrap()
            .join()
            .unwrap();
        let list = restarts.list();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].thread, "looping");
        assert_eq!(list[0].restarts, 2);
        assert_eq!(list[0].last, "panicked (boom 2)");
        assert!(list[0].last_ms > 0);
        assert!(
            started.elapsed() >= RESTART_PAUSE,
            "the second restart waited"
        );
    }

    #[test]
    fn finish_by_bounds_the_wait() {
        let start = Instant::now();
        assert!(!finish_by(
            start + Duration::from_millis(100),
            "sleeper",
            || std::thread::sleep(Duration::from_secs(5))
        ));
        assert!(start.elapsed() < Duration::from_secs(2));
        assert!(finish_by(
            Instant::now() + Duration::from_secs(5),
            "quick",
            || {}
        ));
    }
}

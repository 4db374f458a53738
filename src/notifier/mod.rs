//! The built-in scheduler and watcher (spec 09, issue 9): the `notifier` runtime, whose
//! program is `iapeer notifier-run`, serving the always-on peers `timer` (role `time`) and
//! `watcher` (role `event`). Storage is shared with the `@agfpd/notifier-runtime` package
//! 0.3.x: triggers in the owner's profile under `notifier.triggers[]`, undelivered signals
//! in `<root>/state/notifier/<personality>/escalation/<id>.json`.

pub mod backoff;
pub mod call;
pub mod chain;
pub mod proc;
pub mod run;
pub mod spool;
pub mod store;
pub mod trigger;
pub mod when;

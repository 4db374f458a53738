//! The built-in `notifier` runtime (spec 09, issue 9): the service peers `timer` and
//! `watcher` (intelligence absent), hosted like a router runtime — on pipes, always on — with
//! this very binary as their program, `iapeer notifier-run` ([`crate::notifier::run`]). An
//! installed `runtimes/notifier/runtime.json` (the `@agfpd/notifier-runtime` package) takes
//! precedence: then the package's program runs instead ([`super::adapter_for`]).

use super::own_verb::OwnVerb;
use super::WrittenIsConfirmed;
use crate::runtime_table::NOTIFIER;

/// The runtime's name.
pub const NAME: &str = NOTIFIER.name;

/// The built-in notifier adapter: `iapeer notifier-run`, a delivery confirmed once written.
pub fn from_env() -> OwnVerb {
    OwnVerb::from_env(NAME, NOTIFIER.own_verb(), |_| Box::new(WrittenIsConfirmed))
}

//! The built-in `notifier` runtime (spec 09, issue 9): the service peers `timer` and
//! `watcher` (intelligence absent), hosted like a router runtime — on pipes, always on — with
//! this very binary as their program, `iapeer notifier-run` ([`crate::notifier::run`]). An
//! installed `runtimes/notifier/runtime.json` (the `@agfpd/notifier-runtime` package) takes
//! precedence: then the package's program runs instead ([`super::adapter_for`]).

use std::ffi::OsString;
use std::path::Path;

use super::{Adapter, Confirm, LaunchCommand, LaunchCtx, RuntimeKind, WrittenIsConfirmed};

/// The runtime's name.
pub const NAME: &str = "notifier";

/// The built-in notifier adapter.
pub struct Notifier {
    program: OsString,
}

impl Notifier {
    /// Use the running executable as the service program.
    pub fn from_env() -> Notifier {
        Notifier {
            program: super::this_binary(),
        }
    }
}

impl Adapter for Notifier {
    fn name(&self) -> &str {
        NAME
    }

    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Router
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, super::LaunchError> {
        Ok(super::own_verb_command(&self.program, "notifier-run", ctx))
    }

    fn wants_system_prompt(&self) -> bool {
        false
    }

    fn confirmer(&self, _cwd: &Path, _text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        Box::new(WrittenIsConfirmed)
    }
}

//! The built-in `notifier` runtime (spec 09, issue 9): the service peers `timer` and
//! `watcher` (intelligence absent), hosted like a router runtime — on pipes, always on — with
//! this very binary as their program, `iapeer notifier-run` ([`crate::notifier::run`]). An
//! installed `runtimes/notifier/runtime.json` (the `@agfpd/notifier-runtime` package) takes
//! precedence: then the package's program runs instead ([`super::adapter_for`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

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
        let program = std::env::current_exe()
            .map(PathBuf::into_os_string)
            .unwrap_or_else(|_| OsString::from("iapeer"));
        Notifier { program }
    }
}

impl Adapter for Notifier {
    fn name(&self) -> &str {
        NAME
    }

    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Router
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, String> {
        let mut args: Vec<OsString> = vec!["notifier-run".into()];
        args.extend(ctx.launch_env.start_args.iter().map(OsString::from));
        Ok(LaunchCommand {
            program: self.program.clone(),
            args,
            // The service reads profiles and writes its spool under the daemon's root.
            extra_env: vec![(
                "IAPEER_ROOT".into(),
                ctx.paths.root().to_string_lossy().into_owned(),
            )],
        })
    }

    fn wants_system_prompt(&self) -> bool {
        false
    }

    fn confirmer(&self, _cwd: &Path, _text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        Box::new(WrittenIsConfirmed)
    }
}

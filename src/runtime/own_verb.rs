//! The adapter of a built-in runtime whose program is this very binary run with one of its
//! own verbs, hosted like a router runtime (on pipes, always on): `human`
//! (`iapeer human-inbox`, [`super::human`]) and `notifier` (`iapeer notifier-run`,
//! [`super::notifier`]).

use std::ffi::OsString;
use std::path::Path;

use super::{Adapter, Confirm, LaunchCommand, LaunchCtx};

/// A built-in runtime run as `<this binary> <verb>` ([`super::own_verb_command`]).
pub struct OwnVerb {
    name: &'static str,
    verb: &'static str,
    program: OsString,
    /// The confirmer of a delivery of the wire text.
    confirm: fn(&str) -> Box<dyn Confirm>,
}

impl OwnVerb {
    /// The runtime `name` run as the running executable's `verb`; `confirm` makes the
    /// confirmer of a delivery from its wire text.
    pub fn from_env(
        name: &'static str,
        verb: &'static str,
        confirm: fn(&str) -> Box<dyn Confirm>,
    ) -> OwnVerb {
        OwnVerb {
            name,
            verb,
            program: super::this_binary(),
            confirm,
        }
    }
}

impl Adapter for OwnVerb {
    fn name(&self) -> &str {
        self.name
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, super::LaunchError> {
        Ok(super::own_verb_command(&self.program, self.verb, ctx))
    }

    fn wants_system_prompt(&self) -> bool {
        false
    }

    fn confirmer(&self, _cwd: &Path, text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        (self.confirm)(text)
    }
}

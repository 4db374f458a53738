//! Router runtimes (spec 04 §2 "Router runtimes"): installed packages such as telegram and
//! notifier, run on pipes and kept always on. They read wire-form envelopes on stdin.

use std::ffi::OsString;
use std::path::Path;

use super::manifest::Manifest;
use super::{Adapter, Confirm, LaunchCommand, LaunchCtx, RuntimeKind, WrittenIsConfirmed};

/// An installed router runtime.
pub struct RouterRuntime {
    manifest: Manifest,
}

impl RouterRuntime {
    /// Wrap a loaded manifest.
    pub fn new(manifest: Manifest) -> RouterRuntime {
        RouterRuntime { manifest }
    }
}

/// `$<RT>_RUNTIME_BIN`, e.g. `NOTIFIER_RUNTIME_BIN` for `notifier`.
pub fn bin_override_var(runtime: &str) -> String {
    format!("{}_RUNTIME_BIN", runtime.to_ascii_uppercase())
}

impl Adapter for RouterRuntime {
    fn name(&self) -> &str {
        &self.manifest.runtime
    }

    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Router
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, String> {
        let rt = &self.manifest.runtime;
        let (program, mut args): (OsString, Vec<OsString>) = match &self.manifest.run {
            Some(run) => (
                run.command.clone().into(),
                run.args.iter().map(OsString::from).collect(),
            ),
            None => {
                let bin = std::env::var_os(bin_override_var(rt))
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| format!("{rt}-runtime").into());
                (bin, vec!["run".into()])
            }
        };
        args.extend(ctx.launch_env.start_args.iter().map(OsString::from));
        Ok(LaunchCommand {
            program,
            args,
            extra_env: Vec::new(),
        })
    }

    fn wants_system_prompt(&self) -> bool {
        false
    }

    fn confirmer(&self, _cwd: &Path, _text: &str, _agent_ts: Option<&str>) -> Box<dyn Confirm> {
        Box::new(WrittenIsConfirmed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch_env::LaunchEnv;
    use crate::paths::Paths;
    use crate::runtime::WakeMode;

    #[test]
    fn run_descriptor_wins_and_start_args_come_last() {
        let m: Manifest = serde_json::from_str(
            r#"{"runtime":"bot","run":{"command":"/opt/bot","args":["serve"]}}"#,
        )
        .unwrap();
        let rt = RouterRuntime::new(m);
        let env = LaunchEnv {
            start_args: vec!["--verbose".into()],
            ..LaunchEnv::default()
        };
        let paths = Paths::at("/r");
        let ctx = LaunchCtx {
            paths: &paths,
            cwd: Path::new("/w"),
            mode: WakeMode::Fresh,
            system_prompt: None,
            launch_env: &env,
            port: 8765,
        };
        let cmd = rt.command(&ctx).unwrap();
        assert_eq!(cmd.program, OsString::from("/opt/bot"));
        assert_eq!(cmd.args, vec![OsString::from("serve"), "--verbose".into()]);
    }

    #[test]
    fn default_command_is_rt_runtime_run() {
        let m: Manifest = serde_json::from_str(r#"{"runtime":"zzqbot"}"#).unwrap();
        let rt = RouterRuntime::new(m);
        let env = LaunchEnv::default();
        let paths = Paths::at("/r");
        let ctx = LaunchCtx {
            paths: &paths,
            cwd: Path::new("/w"),
            mode: WakeMode::Fresh,
            system_prompt: None,
            launch_env: &env,
            port: 8765,
        };
        let cmd = rt.command(&ctx).unwrap();
        assert_eq!(cmd.program, OsString::from("zzqbot-runtime"));
        assert_eq!(cmd.args, vec![OsString::from("run")]);
        assert_eq!(bin_override_var("notifier"), "NOTIFIER_RUNTIME_BIN");
    }
}

//! Router runtimes (spec 04 §2 "Router runtimes"): installed packages such as telegram and
//! notifier, run on pipes and kept always on. They read wire-form envelopes on stdin.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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

/// The router runtimes known to call the fleet API (spec 10 §1) with `IAPEER_BEARER_TOKEN`
/// from their environment as its bearer: `@agfpd/telegram-runtime` (0.28.1: `src/fleetClient.ts`
/// and `src/fleetFace.ts`, its approvals and notices faces). A package of your own reads the
/// token from `<root>/state/iapeer/fleet.token` instead.
pub const FLEET_CLIENTS: [&str; 1] = ["telegram"];

/// What a session of `runtime` (of `kind`) gets as `IAPEER_BEARER_TOKEN` (issue 26 item 1):
/// a fleet client ([`FLEET_CLIENTS`], on a router runtime) gets `fleet_secret`, the fleet API's
/// secret (`IAPEER_BEARER_TOKEN` when the daemon has one, else the fleet token); an agent gets
/// `user_bearer`, the daemon's `IAPEER_BEARER_TOKEN` when set, which its MCP configuration
/// sends on every MCP request (spec 02 §4: that bearer gates every request); nothing else gets
/// anything. An agent never gets the fleet token: its own session token is all it needs.
/// Pure.
pub fn handed_bearer<'a>(
    kind: RuntimeKind,
    runtime: &str,
    user_bearer: Option<&'a str>,
    fleet_secret: Option<&'a str>,
) -> Option<&'a str> {
    match kind {
        RuntimeKind::Router if FLEET_CLIENTS.contains(&runtime) => fleet_secret,
        RuntimeKind::Router => None,
        RuntimeKind::Agent => user_bearer,
    }
}

/// `$<RT>_RUNTIME_BIN`, e.g. `NOTIFIER_RUNTIME_BIN` for `notifier`.
pub fn bin_override_var(runtime: &str) -> String {
    format!("{}_RUNTIME_BIN", runtime.to_ascii_uppercase())
}

/// The program a router runtime runs and its arguments (before the launch env's start args):
/// `peer_bin` (the peer's `launch.env` `<RT>_RUNTIME_BIN`, written from a package's
/// `runtimeBin`) with the argument `run`, else the manifest's `run`, else
/// `$<RT>_RUNTIME_BIN` (from this process's environment) or `<rt>-runtime`, with the
/// argument `run`.
fn program_and_args(manifest: &Manifest, peer_bin: Option<&str>) -> (OsString, Vec<OsString>) {
    let rt = &manifest.runtime;
    if let Some(bin) = peer_bin.filter(|b| !b.is_empty()) {
        return (bin.into(), vec!["run".into()]);
    }
    match &manifest.run {
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
    }
}

/// The peer's own program for `runtime`, from its `launch.env` (`<RT>_RUNTIME_BIN`).
fn peer_bin<'a>(env: &'a crate::launch_env::LaunchEnv, runtime: &str) -> Option<&'a str> {
    let key = bin_override_var(runtime);
    env.vars
        .iter()
        .rev()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.as_str())
}

/// Where `program` is found when started in `cwd` with `path_var` as PATH: a name with a
/// slash is that file (relative to `cwd`), a bare name the first executable of that name in
/// `path_var`. `None` when there is no such executable file. Pure but for reading the disk.
pub fn find_program(program: &OsStr, cwd: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.as_bytes().contains(&b'/') {
        let full = cwd.join(p);
        return super::claude::is_executable(&full).then_some(full);
    }
    std::env::split_paths(path_var?)
        .map(|d| d.join(p))
        .find(|c| super::claude::is_executable(c))
}

/// Why the router runtime `runtime` cannot start for a peer in `cwd` because its program is
/// not there (looked up with this process's PATH, as the daemon of the same user does), with
/// what to do; `None` when the program is found, or when `runtime` is not an installed router
/// or terminal runtime (built-in agent runtimes and bad manifests are reported elsewhere).
pub fn missing_program(paths: &crate::paths::Paths, runtime: &str, cwd: &Path) -> Option<String> {
    let manifest = Manifest::load(paths, runtime).ok()??;
    if let Some(spec) = &manifest.terminal {
        return super::terminal::missing_program(paths, runtime, spec, cwd);
    }
    let env = crate::launch_env::read(cwd, runtime);
    let (program, _) = program_and_args(&manifest, peer_bin(&env, runtime));
    let path_var = std::env::var_os("PATH");
    if find_program(&program, cwd, path_var.as_deref()).is_some() {
        return None;
    }
    let how = if manifest.run.is_some() {
        format!(
            "install it, or fix \"run\" in {}",
            paths.runtime_manifest(runtime).display()
        )
    } else {
        format!(
            "install it on PATH, set {} to it, or give {} a \"run\" command",
            bin_override_var(runtime),
            paths.runtime_manifest(runtime).display()
        )
    };
    Some(format!(
        "the program of runtime {runtime}, {}, is not found — {how}",
        program.to_string_lossy()
    ))
}

impl Adapter for RouterRuntime {
    fn name(&self) -> &str {
        &self.manifest.runtime
    }

    fn kind(&self) -> RuntimeKind {
        RuntimeKind::Router
    }

    fn command(&self, ctx: &LaunchCtx) -> Result<LaunchCommand, super::LaunchError> {
        let (program, mut args) =
            program_and_args(&self.manifest, peer_bin(ctx.launch_env, self.name()));
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

    #[test]
    fn the_fleet_secret_goes_to_fleet_clients_and_no_agent() {
        use RuntimeKind::{Agent, Router};
        let (user, fleet) = (Some("user"), Some("fleet"));
        assert_eq!(handed_bearer(Router, "telegram", None, fleet), fleet);
        assert_eq!(handed_bearer(Router, "telegram", user, user), user);
        for rt in ["human", "notifier", "mailbox"] {
            assert_eq!(handed_bearer(Router, rt, None, fleet), None, "{rt}");
            assert_eq!(handed_bearer(Router, rt, user, user), None, "{rt}");
        }
        for rt in ["claude", "codex", "echo"] {
            assert_eq!(handed_bearer(Agent, rt, None, fleet), None, "{rt}");
            assert_eq!(handed_bearer(Agent, rt, user, user), user, "{rt}");
        }
    }
    use crate::launch_env::LaunchEnv;
    use crate::paths::Paths;
    use crate::runtime::WakeMode;

    /// The command a fresh launch of the router runtime `m` runs in `/w`.
    fn fresh_command(m: Manifest, env: &LaunchEnv) -> LaunchCommand {
        let paths = Paths::at("/r");
        let ctx = LaunchCtx {
            paths: &paths,
            cwd: Path::new("/w"),
            mode: WakeMode::Fresh,
            system_prompt: None,
            launch_env: env,
            port: 8765,
            gated: None,
            bearer: false,
        };
        RouterRuntime::new(m).command(&ctx).unwrap()
    }

    #[test]
    fn run_descriptor_wins_and_start_args_come_last() {
        let m = Manifest::parse(
            r#"{"runtime":"bot","run":{"command":"/opt/bot","args":["serve"]}}"#,
            "bot",
        )
        .unwrap();
        let env = LaunchEnv {
            start_args: vec!["--verbose".into()],
            ..LaunchEnv::default()
        };
        let cmd = fresh_command(m, &env);
        assert_eq!(cmd.program, OsString::from("/opt/bot"));
        assert_eq!(cmd.args, vec![OsString::from("serve"), "--verbose".into()]);
    }

    #[test]
    fn default_command_is_rt_runtime_run() {
        let m = Manifest::parse(r#"{"runtime":"zzqbot"}"#, "zzqbot").unwrap();
        let cmd = fresh_command(m, &LaunchEnv::default());
        assert_eq!(cmd.program, OsString::from("zzqbot-runtime"));
        assert_eq!(cmd.args, vec![OsString::from("run")]);
        assert_eq!(bin_override_var("notifier"), "NOTIFIER_RUNTIME_BIN");
    }

    #[test]
    fn a_program_is_found_by_path_with_a_slash_else_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let exe = bin.join("bot");
        crate::testkit::write_program(&exe, "#!/bin/sh\n");
        let plain = bin.join("notes");
        std::fs::write(&plain, "not executable").unwrap();
        let path = std::env::join_paths(["/nonexistent", bin.to_str().unwrap()]).unwrap();
        let find = |p: &str, cwd: &Path| find_program(OsStr::new(p), cwd, Some(&path));
        assert_eq!(find("bot", Path::new("/")), Some(exe.clone()));
        assert_eq!(find("notes", Path::new("/")), None, "not executable");
        assert_eq!(find("nope", Path::new("/")), None);
        assert_eq!(
            find(exe.to_str().unwrap(), Path::new("/")),
            Some(exe.clone())
        );
        assert_eq!(
            find("bin/bot", dir.path()),
            Some(exe.clone()),
            "relative to cwd"
        );
        assert_eq!(find("./bot", dir.path()), None);
        assert_eq!(find_program(OsStr::new("bot"), Path::new("/"), None), None);
    }

    #[test]
    fn a_missing_program_is_named_with_what_to_do() {
        let (dir, paths) = Paths::temp();
        let write = |rt: &str, json: &str| {
            let p = paths.runtime_manifest(rt);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, json).unwrap();
        };
        write(
            "pager",
            r#"{"runtime":"pager","run":{"command":"/nonexistent/pager"}}"#,
        );
        write(
            "shell",
            r#"{"runtime":"shell","run":{"command":"/bin/sh"}}"#,
        );
        let cwd = dir.path();
        let why = missing_program(&paths, "pager", cwd).unwrap();
        assert!(
            why.starts_with("the program of runtime pager, /nonexistent/pager, is not found")
                && why.contains("fix \"run\" in"),
            "{why}"
        );
        assert_eq!(missing_program(&paths, "shell", cwd), None);
        assert_eq!(
            missing_program(&paths, "echo", cwd),
            None,
            "not a router runtime"
        );
        assert_eq!(
            missing_program(&paths, "absent", cwd),
            None,
            "not installed"
        );
    }
}

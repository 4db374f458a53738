//! The command-line interface (spec 07): one table of verbs and flags drives parsing, help,
//! the man page and completions; one file per verb group runs them. Exit codes: 0 success
//! (including idempotent no-ops), 1 the operation failed or was refused, 2 usage error, 3 a
//! send whose state is unknown, 255 an internal error ([`error`]: how failures are shown).

pub mod approvals;
pub mod attach;
pub mod background;
pub mod client;
pub mod completions;
pub mod confirm;
pub mod connect;
pub mod demo;
mod demo_federation;
pub mod error;
pub mod federation;
pub mod health;
pub mod help;
pub mod inbox;
pub mod install;
pub mod lifecycle;
pub mod logs;
pub mod man;
pub mod memory;
pub mod onboard;
pub mod parse;
pub mod peers;
pub mod plugins;
pub mod prompt;
pub mod runtimes;
pub mod send;
pub mod sender;
pub mod spec;
pub mod status;
pub mod suggest;
pub mod ui;
pub mod uninstall;
pub mod update;
pub mod verify;
pub mod view;

use std::io::Write;

pub use error::CliError;

use parse::{Command, Generate, Invocation, UsageError};
use spec::Verb;

use crate::paths::Paths;
use crate::protocol::Answer;

/// A verb's result.
pub type CliResult = Result<(), CliError>;

/// The storage layout from the environment, or a failure naming what to set.
pub fn paths() -> Result<Paths, CliError> {
    Ok(Paths::from_env()?)
}

/// A usage error for `inv`'s verb: `iapeer: <what> — usage: iapeer <signature>`.
pub fn usage(inv: &Invocation, what: impl Into<String>) -> CliError {
    CliError::Usage(UsageError::Bad {
        what: what.into(),
        signature: inv.verb.signature,
    })
}

/// The required positional `arg` of `inv`'s verb, or the usage error `missing <name>`.
pub fn required(inv: &Invocation, arg: spec::PosSpec) -> Result<&str, CliError> {
    inv.positional(arg)
        .ok_or_else(|| usage(inv, format!("missing <{}>", arg.name)))
}

/// Parse the process arguments, run the verb, print errors, return the exit code.
pub fn main() -> i32 {
    let args = spec_aliases(std::env::args_os().skip(1).collect());
    let json_asked = args.iter().any(|a| a == "--json");
    let (verb_name, json, result) = match parse::parse(args) {
        Err(e) => ("iapeer".to_string(), json_asked, Err(CliError::Usage(e))),
        Ok(cmd) => {
            let json = matches!(&cmd, Command::Run(_, inv) if wants_json(inv));
            let (name, result) = run(cmd);
            (name, json, result)
        }
    };
    let Err(e) = result else { return 0 };
    if json {
        if let Some(f) = e.json_failure() {
            let _ = print(&format!("{}\n", json_line(&Answer::<()>::Failed(f))));
        }
    }
    for line in e.lines(&verb_name) {
        eprintln!("{line}");
    }
    e.exit_code()
}

/// True when `inv`'s verb has `--json` and it was given.
fn wants_json(inv: &Invocation) -> bool {
    inv.verb.flags.contains(&spec::flags::JSON) && inv.flag(spec::flags::JSON)
}

fn print(text: &str) -> CliResult {
    let mut out = std::io::stdout().lock();
    // A closed stdout (e.g. `| head`) is not worth an error message.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    Ok(())
}

/// The verb's result: with `--json` (when the verb has it) one document `{"ok":true, …}` with
/// the fields of `doc`, else `text` as is.
fn done(inv: &Invocation, doc: &impl serde::Serialize, text: &str) -> CliResult {
    if wants_json(inv) {
        print(&format!("{}\n", json_line(&Answer::Ok(doc))))
    } else {
        print(text)
    }
}

/// One JSON document for a `--json` output, with its keys in sorted order (as a
/// `serde_json::Value` prints them), without the trailing newline; control, bidi and
/// separator characters in its strings escaped ([`crate::visible::json`]).
fn json_line(v: &impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .map(|v| crate::visible::json(&v))
        .unwrap_or_else(|e| format!("{{\"ok\":false,\"code\":\"internal\",\"error\":\"{e}\"}}"))
}

/// Warnings from the library (a newer registry version, a profile key of the wrong type…)
/// reach the user of a CLI verb on stderr. The daemon and the echo agent set up their own.
fn init_cli_logging() {
    use simplelog::{ColorChoice, ConfigBuilder, LevelFilter, TermLogger, TerminalMode};
    let config = ConfigBuilder::new()
        .set_time_level(LevelFilter::Off)
        .set_target_level(LevelFilter::Off)
        .set_thread_level(LevelFilter::Off)
        .set_location_level(LevelFilter::Off)
        .build();
    let _ = TermLogger::init(
        LevelFilter::Warn,
        config,
        TerminalMode::Stderr,
        ColorChoice::Never,
    );
}

fn run(cmd: Command) -> (String, CliResult) {
    match cmd {
        Command::Help(verb) => (
            "help".into(),
            help::render_help(verb.as_deref())
                .map_err(CliError::Usage)
                .and_then(|t| print(&t)),
        ),
        // Spec 07: `iapeer x.y.z` (issue 30 item 6; no companion package reads the bare
        // number, and `update` reads either form: `update::version_of`).
        Command::Version => (
            "version".into(),
            print(&format!("iapeer {}\n", env!("CARGO_PKG_VERSION"))),
        ),
        Command::Generate(Generate::Man) => ("generate".into(), print(&man::render_man())),
        Command::Generate(Generate::PeerNames) => ("generate".into(), print(&peer_names())),
        Command::Generate(Generate::Runtimes) => ("generate".into(), print(&runtime_names())),
        Command::Generate(Generate::Identities) => ("generate".into(), print(&identities())),
        Command::Generate(Generate::Completions(shell)) => {
            ("generate".into(), print(&completions::render(shell)))
        }
        Command::RuntimeShortcut { runtime, inv } => {
            (runtime.clone(), lifecycle::runtime_shortcut(&runtime, &inv))
        }
        Command::Run(verb, inv) => {
            let name = inv.verb.name.to_string();
            if matches!(
                verb,
                Verb::Daemon | Verb::EchoAgent | Verb::HumanInbox | Verb::NotifierRun
            ) {
                return (name, run_verb(verb, &inv));
            }
            init_cli_logging();
            settle_rename();
            (name, catch_panic(|| run_verb(verb, &inv)))
        }
    }
}

/// Run a client verb; a panic (a defect: the default hook has printed where it happened)
/// becomes an internal error, exit [`error::EXIT_INTERNAL`], rather than Rust's 101. The
/// long-running verbs (`daemon`, the echo agent, the inbox writer, the notifier) keep their
/// own handling.
fn catch_panic(verb: impl FnOnce() -> CliResult) -> CliResult {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(verb)).unwrap_or_else(|p| {
        let what = crate::daemon::guard::payload_text(p.as_ref());
        Err(error::Failed {
            hints: vec![error::REPORT_A_DEFECT.into()],
            ..error::Failed::new(
                crate::protocol::Code::Internal,
                format!("internal error: {what}"),
            )
        }
        .into())
    })
}

/// A `rename` an earlier process left halfway (killed, or on a full disk) is finished or
/// undone before any verb looks at the peers (issue 26 item 9); one `stat` when there is
/// none. What was done is said on stderr.
fn settle_rename() {
    if let Ok(paths) = Paths::from_env() {
        if let Some(r) = crate::peers::rename_journal::recover(&paths) {
            eprintln!("iapeer: {r}");
        }
    }
}

/// The registry for shell completion, `None` when the root or the registry cannot be read
/// (a tab must never print an error).
fn completion_registry() -> Option<(Paths, crate::registry::Registry)> {
    let paths = Paths::from_env().ok()?;
    let registry = crate::registry::Registry::load(&paths).ok()?;
    Some((paths, registry))
}

/// The registered peers' names, one a line, for shell completion: nothing (and no error)
/// when the root or the registry cannot be read.
fn peer_names() -> String {
    registry_lines(|p| [p.personality.clone()])
}

/// Every identity the registry declares (`<runtime>-<peer>`, spec 03), one a line, for shell
/// completion (`--from`); nothing when the registry cannot be read.
fn identities() -> String {
    registry_lines(|p| {
        p.runtimes
            .iter()
            .map(|rt| format!("{rt}-{}", p.personality))
            .collect::<Vec<_>>()
    })
}

/// The lines `each` gives for every registered peer, in registry order, each ended by a
/// newline, for shell completion: nothing when the root or the registry cannot be read.
fn registry_lines<I: IntoIterator<Item = String>>(
    each: impl Fn(&crate::registry::RegistryPeer) -> I,
) -> String {
    let Some((_, registry)) = completion_registry() else {
        return String::new();
    };
    registry
        .peers
        .iter()
        .flat_map(each)
        .map(|line| line + "\n")
        .collect()
}

/// The runtimes a peer may name here, sorted, one a line, for shell completion: the built-in
/// ones, every folder of `<root>/runtimes/` with a `runtime.json`, and any runtime a peer
/// declares. Files only (no program lookup, no daemon), so a tab stays fast.
fn runtime_names() -> String {
    let mut names: Vec<String> = crate::runtime_table::BUILT_IN
        .iter()
        .map(|r| r.name.to_string())
        .collect();
    if let Ok(paths) = Paths::from_env() {
        if let Ok(dir) = std::fs::read_dir(paths.runtimes_dir()) {
            names.extend(
                dir.flatten()
                    .filter(|e| e.path().join("runtime.json").is_file())
                    .filter_map(|e| e.file_name().to_str().map(String::from)),
            );
        }
    }
    if let Some((_, registry)) = completion_registry() {
        names.extend(registry.peers.iter().flat_map(|p| p.runtimes.clone()));
    }
    names.sort();
    names.dedup();
    names.iter().map(|n| format!("{n}\n")).collect()
}

/// The spellings spec 07 gives as aliases, rewritten to the verb they stand for:
/// `enable telegram <peer> …` is `connect telegram <peer> …`.
fn spec_aliases(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if args.len() >= 2 && args[0] == "enable" && args[1] == "telegram" {
        args[0] = "connect".into();
    }
    args
}

/// Run one verb of the table. The `match` is exhaustive: a [`Verb`] without a handler does
/// not compile.
fn run_verb(verb: Verb, inv: &Invocation) -> CliResult {
    match verb {
        Verb::Send => send::run(inv),
        Verb::Create => peers::create(inv),
        Verb::Init => peers::init(inv),
        Verb::List => view::list(inv),
        Verb::Verify => verify::run(inv),
        Verb::Remove => peers::remove(inv),
        Verb::Rename => peers::rename(inv),
        Verb::Stop => lifecycle::stop_start(inv, true),
        Verb::Start => lifecycle::stop_start(inv, false),
        Verb::Attach => lifecycle::attach(inv),
        Verb::LiveRuntime => lifecycle::live_runtime(inv),
        Verb::Prompt => prompt::run(inv),
        Verb::New => lifecycle::new(inv),
        Verb::Wake => lifecycle::wake(inv),
        Verb::Restart => lifecycle::restart(inv),
        Verb::Refresh => lifecycle::refresh(inv),
        Verb::Interrupt => lifecycle::interrupt(inv),
        Verb::Compact => lifecycle::compact(inv),
        Verb::SelfFresh => lifecycle::self_fresh(inv),
        Verb::SelfDone => lifecycle::self_done(inv),
        Verb::AddRuntime => peers::add_runtime(inv),
        Verb::DefaultRuntime => peers::default_runtime(inv),
        Verb::Status => status::run(inv),
        Verb::Doctor => status::doctor(inv),
        Verb::ApprovalMode => peers::approval_mode(inv),
        Verb::Install => install::run(inv),
        Verb::Onboard => onboard::run(inv),
        Verb::Update => update::update(inv),
        Verb::InstallRuntime => runtimes::install_runtime(inv),
        Verb::UpdateRuntime => runtimes::update_runtime(inv),
        Verb::Rollback => update::rollback(inv),
        Verb::Uninstall => uninstall::run(inv),
        Verb::Daemon if inv.flag(spec::flags::DETACH) && inv.flag(spec::flags::FOREGROUND) => Err(
            usage(inv, "--foreground and --detach cannot be used together"),
        ),
        Verb::Daemon if inv.flag(spec::flags::DETACH) => background::detach(),
        Verb::Daemon => run_daemon(),
        Verb::Shutdown => background::shutdown(inv),
        Verb::Demo => demo::run(inv),
        Verb::EchoAgent => match crate::echo_agent::run(&inv.positionals) {
            0 => Ok(()),
            code => Err(CliError::Exit(code)),
        },
        Verb::Inbox => inbox::run(inv),
        Verb::Logs => logs::run(inv),
        Verb::HumanInbox => match crate::inbox::writer::run() {
            0 => Ok(()),
            code => Err(CliError::Exit(code)),
        },
        Verb::RunInfra => run_infra(inv),
        Verb::NativeMemory => memory::native_memory(inv),
        Verb::TrustHooks => memory::trust_hooks(inv),
        Verb::Enable => plugins::enable(inv),
        Verb::Connect => connect::connect(inv),
        Verb::Federation => federation::run(inv),
        Verb::ConfirmSend => send::confirm_send(inv),
        Verb::Ui => ui::run(inv),
        Verb::Approvals => approvals::list(inv),
        Verb::Approve => approvals::decide(inv, true),
        Verb::Deny => approvals::decide(inv, false),
        Verb::ApprovalRequest => approvals::hook(),
        Verb::NotifierRun => match crate::notifier::run::run() {
            0 => Ok(()),
            code => Err(CliError::Exit(code)),
        },
    }
}

/// `run-infra <p> <rt>` (either order), the entry of the original tool's always-on service
/// jobs (issue 11 item 6): one line on stderr saying how to move over, then wait until the
/// job is removed (exiting would only have the job's service manager restart it in a loop).
fn run_infra(inv: &Invocation) -> CliResult {
    let registry = paths()
        .ok()
        .and_then(|p| crate::registry::Registry::load(&p).ok())
        .unwrap_or_default();
    eprintln!(
        "iapeer run-infra: {}",
        run_infra_line(&inv.positionals, &registry)
    );
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// The migration line of `run-infra` for its arguments: the peer is whichever argument the
/// registry knows (the original's jobs put it first or second), the label its job's.
pub fn run_infra_line(args: &[String], registry: &crate::registry::Registry) -> String {
    let peer = args
        .iter()
        .find(|a| registry.find(a).is_some())
        .or_else(|| args.first())
        .map(String::as_str)
        .unwrap_or("<peer>");
    format!(
        "this service job is the original iapeer's; this daemon runs \"{peer}\" itself \
         (iapeer start {peer}) — remove the job: launchctl bootout gui/$(id -u)/com.iapeer.{peer} \
         and delete ~/Library/LaunchAgents/com.iapeer.{peer}.plist"
    )
}

fn run_daemon() -> CliResult {
    let paths = paths()?;
    crate::daemon::run(&paths).map_err(CliError::from)
}

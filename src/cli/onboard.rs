//! `iapeer onboard` (spec 08 §1, step 1 "Daemon"): after a risk gate, prepare the root, write
//! the service definition, load it through the service manager (or, where none runs, start
//! `iapeer daemon --detach`), and wait until the daemon is healthy.
//!
//! Then it gives the operator a human peer on the built-in `human` runtime (an inbox for
//! messages to them: `iapeer inbox`), named by `--human`, else the login name, else `you`,
//! unless a human peer (any natural peer, issue 30 item 7) exists already (issue 8 item 3), and the built-in notifier's service
//! peers `timer` and `watcher` that do not exist yet (spec 09, issue 9).
//!
//! The steps are decided by a pure function, [`plan`], from what [`OnboardEnv`] found; `run`
//! prints them (`--dry-run`) or carries them out. Spec 08 §1's later steps (Telegram,
//! memory) have their place in the plan as [`Later`] steps and are reported as not
//! available yet; their flags are not in the verb table.

use std::path::PathBuf;

use super::confirm::{self, Gate};
use super::parse::Invocation;
use super::spec::flags;
use super::{background, health, paths, print, usage, CliError, CliResult};
use crate::host::control::{self, ServiceCtl, ServiceState};
use crate::host::install::{self, InstallEnv};
use crate::host::login::{Agent, Login};
use crate::host::service::{Manager, WriteDecision};
use crate::paths::Paths;

/// The risk the gate explains before any change.
pub const RISK: &str =
    "iapeer runs AI agents that act without asking: Claude Code is started with \
--dangerously-skip-permissions and Codex with --dangerously-bypass-approvals-and-sandbox, so \
their permission prompts are bypassed and an agent can run any command and change any file \
your user can. Onboarding starts the daemon that wakes them when a message arrives.";

/// What onboard found on this machine, gathered once so that [`plan`] stays pure.
#[derive(Debug, Clone)]
pub struct OnboardEnv {
    /// The root (`IAPEER_ROOT`, default `~/.iapeer`).
    pub root: PathBuf,
    /// The service manager, its definition file and what writing it would do; `None` where
    /// no service manager runs.
    pub service: Option<(Manager, PathBuf, WriteDecision)>,
    /// What the manager says about the service (asked only when its file exists).
    pub state: Option<ServiceState>,
    /// The pid of a daemon answering on the control socket now.
    pub daemon_pid: Option<u32>,
    /// The user id (`gui/<uid>` for launchd).
    pub uid: u32,
    /// The human peers already registered (intelligence natural, on any runtime).
    pub humans: Vec<String>,
    /// The operator's human peer to create when there is none ([`operator_name`]).
    pub operator: String,
    /// Every registered peer name (to tell which notifier service peers exist).
    pub peers: Vec<String>,
    /// The agent CLIs found here and what each says of its login (step 2); `None` when not
    /// asked (a dry run: the CLIs write their own config files when asked).
    pub logins: Vec<(Agent, Option<Login>)>,
}

/// The operator's peer name: `--human` when given, else the login name when it is a valid
/// peer name (lowercased), else `you` (pure).
pub fn operator_name(flag: Option<&str>, login: Option<&str>) -> String {
    if let Some(name) = flag {
        return name.to_string();
    }
    login
        .map(str::to_lowercase)
        .filter(|l| crate::names::is_valid_personality(l))
        .unwrap_or_else(|| "you".to_string())
}

/// A step spec 08 §1 lists after the daemon that this version does not have yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Later {
    /// The Telegram human peer.
    Telegram,
    /// The default memory provider.
    Memory,
}

impl Later {
    /// Every later step, in spec 08 §1's order.
    pub const ALL: [Later; 2] = [Later::Telegram, Later::Memory];

    fn what(self) -> &'static str {
        match self {
            Later::Telegram => "create a human peer reachable over Telegram",
            Later::Memory => "install the default memory provider",
        }
    }
}

/// One step of onboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create the root's folders, the doctrine stub and the reference docs (as `install`).
    PrepareRoot {
        /// The root.
        root: PathBuf,
    },
    /// Write the service definition (or keep it: unchanged, or not ours).
    WriteService {
        /// The manager it is for.
        manager: Manager,
        /// The definition file.
        file: PathBuf,
        /// What writing it does.
        decision: WriteDecision,
    },
    /// A daemon runs outside the service manager: stop it so that the service can own the
    /// daemon (one daemon at a time).
    StopOutsideDaemon {
        /// Its pid.
        pid: u32,
    },
    /// Run the manager's commands that load (or reload) the service and start the daemon.
    LoadService {
        /// The manager.
        manager: Manager,
        /// The command lines, run in order.
        commands: Vec<Vec<String>>,
    },
    /// The service is loaded with this definition already: nothing to do.
    AlreadyLoaded {
        /// The manager.
        manager: Manager,
    },
    /// No service manager: start `iapeer daemon --detach`.
    StartDetached,
    /// No service manager, and a daemon already runs: keep it.
    KeepRunning {
        /// Its pid.
        pid: u32,
    },
    /// Wait for two answered pings in a row within 15 s.
    WaitHealthy,
    /// Create the operator's human peer on the `human` runtime and start its inbox writer.
    CreateHuman {
        /// Its name.
        name: String,
    },
    /// Human peers exist already: no new one.
    HumansExist {
        /// Their names.
        names: Vec<String>,
    },
    /// Create the built-in notifier's service peers that do not exist yet (spec 09).
    ProvisionNotifier {
        /// The names to create (`timer`, `watcher`).
        missing: Vec<String>,
    },
    /// Both notifier service peers exist: nothing to create.
    NotifierExists,
    /// Spec 08 §1 step 2: warn about agent CLIs that are installed but not logged in (what
    /// each said, asked through its own status command: `host::login`).
    CheckLogins(Vec<(Agent, Option<Login>)>),
    /// A step of spec 08 §1 that is not available yet.
    Later(Later),
}

/// The steps of onboard for `env`, in order.
pub fn plan(env: &OnboardEnv) -> Vec<Step> {
    let mut steps = vec![Step::PrepareRoot {
        root: env.root.clone(),
    }];
    match &env.service {
        Some((manager, file, decision)) => {
            let (manager, decision) = (*manager, *decision);
            steps.push(Step::WriteService {
                manager,
                file: file.clone(),
                decision,
            });
            let loaded = env.state.as_ref().is_some_and(|s| s.loaded);
            if let Some(pid) = env.daemon_pid.filter(|_| !loaded) {
                steps.push(Step::StopOutsideDaemon { pid });
            }
            let changed = matches!(decision, WriteDecision::Create | WriteDecision::Update);
            if loaded && !changed {
                steps.push(Step::AlreadyLoaded { manager });
            } else {
                let commands = if loaded {
                    // A changed definition replaces the loaded one.
                    control::restart_with(manager, file, env.uid, true)
                } else {
                    control::load_commands(manager, file, env.uid)
                };
                steps.push(Step::LoadService { manager, commands });
            }
        }
        None => steps.push(match env.daemon_pid {
            Some(pid) => Step::KeepRunning { pid },
            None => Step::StartDetached,
        }),
    }
    steps.push(Step::WaitHealthy);
    steps.push(Step::CheckLogins(env.logins.clone()));
    steps.push(if env.humans.is_empty() {
        Step::CreateHuman {
            name: env.operator.clone(),
        }
    } else {
        Step::HumansExist {
            names: env.humans.clone(),
        }
    });
    let missing: Vec<String> = crate::peers::NOTIFIER_PEERS
        .iter()
        .filter(|n| !env.peers.iter().any(|p| p == *n))
        .map(|n| n.to_string())
        .collect();
    steps.push(if missing.is_empty() {
        Step::NotifierExists
    } else {
        Step::ProvisionNotifier { missing }
    });
    steps.extend(Later::ALL.into_iter().map(Step::Later));
    steps
}

/// One line saying what `step` does (the `--dry-run` listing, and the progress of a run).
pub fn describe(step: &Step) -> String {
    match step {
        Step::PrepareRoot { root } => format!(
            "prepare the root {}: folders, the host doctrine IAPEER.md (kept when present), the reference docs",
            root.display()
        ),
        Step::WriteService {
            manager,
            file,
            decision,
        } => format!(
            "{} the {} service file {}",
            match decision {
                WriteDecision::Create => "write",
                WriteDecision::Update => "update",
                WriteDecision::Unchanged => "keep (unchanged)",
                WriteDecision::Foreign => "keep (not written by iapeer, left as it is)",
            },
            manager.name(),
            file.display()
        ),
        Step::StopOutsideDaemon { pid } => format!(
            "stop the daemon running outside the service manager (pid {pid}) so that the service runs it"
        ),
        Step::LoadService { manager, commands } => format!(
            "load the {} service and start the daemon: {}",
            manager.name(),
            crate::host::control::as_line(commands)
        ),
        Step::AlreadyLoaded { manager } => {
            format!("the {} service is loaded already: nothing to load", manager.name())
        }
        Step::StartDetached => "no service manager runs here: start the daemon in the background \
            with `iapeer daemon --detach` (stop it with `iapeer shutdown`; it does not start again \
            after a reboot or logout)"
            .to_string(),
        Step::KeepRunning { pid } => format!(
            "no service manager runs here, and a daemon runs already (pid {pid}): keep it"
        ),
        Step::WaitHealthy => format!(
            "wait until the daemon is healthy ({} answered pings in a row within {} s)",
            health::NEED_IN_A_ROW,
            health::WITHIN.as_secs()
        ),
        Step::CreateHuman { name } => format!(
            "create your human peer {name} on the human runtime: messages to {name} are kept in \
             an inbox you read with `iapeer inbox` (pick another name with --human)"
        ),
        Step::HumansExist { names } => format!(
            "human peer{} {} exist{} already: no new one (messages to you reach them; `iapeer \
             inbox` shows those kept in a human inbox)",
            if names.len() == 1 { "" } else { "s" },
            names.join(", "),
            if names.len() == 1 { "s" } else { "" }
        ),
        Step::ProvisionNotifier { missing } => format!(
            "create the built-in notifier service peer{} {} (runtime notifier, always on): agents \
             message timer to schedule their own check-ins and watcher to run scripts whose lines \
             reach them",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(" and ")
        ),
        Step::NotifierExists => {
            "the notifier service peers timer and watcher exist already: none created".to_string()
        }
        Step::Later(l) => format!("later: {} — not available in this version", l.what()),
        Step::CheckLogins(logins) => crate::host::login::lines(logins).join("\n     "),
    }
}

/// Gather [`OnboardEnv`] (asks the service manager through the seam when its file exists).
fn gather(
    paths: &Paths,
    install_env: &InstallEnv,
    ctl: &ServiceCtl,
    human_flag: Option<&str>,
    dry_run: bool,
) -> OnboardEnv {
    let uid = nix::unistd::getuid().as_raw();
    let service = install_env
        .service_file()
        .zip(install_env.service_decision())
        .map(|((m, f), d)| (m, f, d));
    let state = service
        .as_ref()
        .filter(|(_, file, _)| file.exists())
        .map(|(m, _, _)| ctl.state(*m, uid));
    OnboardEnv {
        root: paths.root().to_path_buf(),
        service,
        state,
        daemon_pid: health::ping(paths).map(|p| p.pid),
        uid,
        humans: crate::registry::Registry::load(paths)
            .map(|r| {
                r.peers
                    .iter()
                    // A team moved over from the original tool has its humans on channel
                    // runtimes (it has no `human` runtime): any natural peer counts.
                    .filter(|p| p.nature() == crate::names::Intelligence::Natural)
                    .map(|p| p.personality.clone())
                    .collect()
            })
            .unwrap_or_default(),
        operator: operator_name(human_flag, std::env::var("USER").ok().as_deref()),
        peers: crate::registry::Registry::load(paths)
            .map(|r| r.peers.iter().map(|p| p.personality.clone()).collect())
            .unwrap_or_default(),
        logins: crate::host::login::installed_agents()
            .into_iter()
            .map(|a| {
                let l = (!dry_run).then(|| crate::host::login::check(&a));
                (a, l)
            })
            .collect(),
    }
}

/// Ask for the owner's consent to the risk (or take `--accept-risk`); `--dry-run` needs none.
///
/// Errors: not confirmed at the terminal; no terminal to ask on and no `--accept-risk`.
fn consent(inv: &Invocation, dry_run: bool) -> Result<(), CliError> {
    match confirm::gate(
        inv.flag(flags::ACCEPT_RISK),
        dry_run,
        confirm::stdin_is_tty(),
    ) {
        Gate::Proceed => {}
        Gate::Ask => {
            eprintln!("{RISK}");
            if !confirm::ask("Go ahead?") {
                return Err(CliError::failed(
                    "not confirmed: nothing was changed (type yes, or pass --accept-risk)",
                ));
            }
        }
        Gate::Refuse => {
            eprintln!("{RISK}");
            return Err(usage(
                inv,
                "onboard needs your consent and stdin is not a terminal to ask on: pass --accept-risk (or --dry-run to see the steps)",
            ));
        }
    }
    Ok(())
}

/// The closing `service:` line: the service manager that runs the daemon, or how it runs
/// without one.
fn service_line(manager: Option<Manager>, paths: &Paths) -> String {
    match manager {
        None => format!(
            "service: none — no service manager runs here, so the daemon runs as `iapeer daemon --detach`: \
             it survives closing this terminal, not a reboot or logout; stop it with `iapeer shutdown`, \
             logs in {}\n",
            paths.logs_dir().display()
        ),
        Some(m) => format!(
            "service: {} — the service manager runs the daemon and starts it at login\n",
            m.name()
        ),
    }
}

/// Run `iapeer onboard`.
pub fn run(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let install_env = InstallEnv::from_process(&paths)?;
    let ctl = ServiceCtl::from_env();
    let human_flag = inv.value(flags::HUMAN);
    if let Some(name) = human_flag {
        crate::peers::check_name(name).map_err(|e| usage(inv, format!("--human: {e}")))?;
    }
    let dry_run = inv.flag(flags::DRY_RUN);
    let env = gather(&paths, &install_env, &ctl, human_flag, dry_run);
    let steps = plan(&env);
    consent(inv, dry_run)?;
    if dry_run {
        let mut out =
            format!("{RISK}\n\niapeer onboard --dry-run: nothing is changed. The steps:\n");
        for (i, s) in steps.iter().enumerate() {
            out.push_str(&format!("  {}. {}\n", i + 1, describe(s)));
        }
        return print(&out);
    }
    // The plan uses the service manager when one is available, else `daemon --detach`.
    let manager = env.service.as_ref().map(|(m, _, _)| *m);
    for step in &steps {
        match step {
            Step::PrepareRoot { .. } => {
                install::prepare_root(&paths)?;
            }
            Step::WriteService { manager, file, .. } => {
                let dir = file.parent().unwrap_or(file);
                install::write_service(*manager, dir, &install_env.spec)?;
            }
            Step::StopOutsideDaemon { .. } => {
                background::stop(&paths)?;
            }
            Step::LoadService { manager, commands } => {
                ctl.run_all(commands).map_err(|e| {
                    CliError::failed(format!(
                        "could not load the {} service: {e} — see {}",
                        manager.name(),
                        service_log_hint(*manager, &paths)
                    ))
                })?;
            }
            Step::CreateHuman { name } => started(
                &paths,
                name,
                crate::peers::create_human_peer(&paths, name, Some("the operator")),
                "your human peer",
                "pick another name with --human <name>",
            )?,
            Step::ProvisionNotifier { missing } => {
                for name in missing {
                    started(
                        &paths,
                        name,
                        crate::peers::create_notifier_peer(&paths, name),
                        "the notifier service peer",
                        "remove or rename what holds that name, then run onboard again",
                    )?;
                }
            }
            Step::AlreadyLoaded { .. }
            | Step::KeepRunning { .. }
            | Step::HumansExist { .. }
            | Step::NotifierExists
            | Step::CheckLogins(_)
            | Step::Later(_) => {}
            Step::StartDetached => {
                let exe = std::env::current_exe()
                    .map_err(|e| CliError::failed(format!("cannot find the iapeer binary: {e}")))?;
                background::start_detached(&paths, &exe)?;
            }
            Step::WaitHealthy => {
                let pong = health::wait_healthy(&paths, None).map_err(|e| {
                    CliError::failed(match manager {
                        Some(m) => format!("{e}; the service: {}", service_log_hint(m, &paths)),
                        None => e,
                    })
                })?;
                print(&format!(
                    "daemon: healthy (pid {}, iapeer {}) @ {}\n",
                    pong.pid,
                    pong.version,
                    paths.socket().display()
                ))?;
            }
        }
        if *step != Step::WaitHealthy {
            print(&format!("{}\n", done_line(step)))?;
        }
    }
    print(&service_line(manager, &paths))
}

/// A peer `onboard` created (`born`), started when it is always on; a refusal names it
/// (`what`: "could not create <what> <name>: …") with `hint`.
fn started(
    paths: &Paths,
    name: &str,
    born: Result<crate::peers::Initialized, crate::peers::PeerError>,
    what: &str,
    hint: &str,
) -> CliResult {
    let born =
        born.map_err(|e| CliError::hinted(format!("could not create {what} {name}: {e}"), hint))?;
    if let Some(rt) = &born.always_on {
        super::peers::start_always_on(paths, name, rt);
    }
    Ok(())
}

/// The line printed after a step is done.
fn done_line(step: &Step) -> String {
    match step {
        Step::Later(_) => format!("- {}", describe(step)),
        Step::CheckLogins(logins) => crate::host::login::lines(logins)
            .into_iter()
            .map(|l| format!("- {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
        Step::CreateHuman { name } => format!(
            "✓ created your human peer {name}: `iapeer inbox` shows what is sent to you; answer \
             with `iapeer send <peer> --topic <topic> --message …`"
        ),
        Step::StartDetached => {
            "✓ started the daemon in the background with `iapeer daemon --detach` \
            (no service manager runs here); stop it with `iapeer shutdown`"
                .to_string()
        }
        _ => format!("✓ {}", describe(step)),
    }
}

/// Where a failed load of `manager` explains itself.
fn service_log_hint(manager: Manager, paths: &Paths) -> String {
    match manager {
        Manager::Systemd => format!(
            "`systemctl --user status iapeer`, `journalctl --user -u iapeer` and {}",
            paths.daemon_log().display()
        ),
        Manager::Launchd => format!(
            "`launchctl print gui/$(id -u)/com.agfpd.iapeer` and {}",
            paths.logs_dir().display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(service: Option<(Manager, WriteDecision)>) -> OnboardEnv {
        OnboardEnv {
            root: PathBuf::from("/h/.iapeer"),
            service: service.map(|(m, d)| (m, PathBuf::from(format!("/s/{}", m.file_name())), d)),
            state: None,
            daemon_pid: None,
            uid: 501,
            humans: Vec::new(),
            operator: "ada".into(),
            peers: Vec::new(),
            logins: Vec::new(),
        }
    }

    fn tail() -> Vec<Step> {
        let mut v = vec![
            Step::WaitHealthy,
            Step::CheckLogins(Vec::new()),
            Step::CreateHuman { name: "ada".into() },
            Step::ProvisionNotifier {
                missing: vec!["timer".into(), "watcher".into()],
            },
        ];
        v.extend(Later::ALL.map(Step::Later));
        v
    }

    fn root() -> Step {
        Step::PrepareRoot {
            root: PathBuf::from("/h/.iapeer"),
        }
    }

    #[test]
    fn without_a_service_manager_it_detaches_or_keeps_the_running_daemon() {
        let mut want = vec![root(), Step::StartDetached];
        want.extend(tail());
        assert_eq!(plan(&env(None)), want);
        let mut e = env(None);
        e.daemon_pid = Some(42);
        assert_eq!(plan(&e)[1], Step::KeepRunning { pid: 42 });
    }

    #[test]
    fn with_systemd_it_writes_loads_and_waits() {
        let steps = plan(&env(Some((Manager::Systemd, WriteDecision::Create))));
        let mut want = vec![
            root(),
            Step::WriteService {
                manager: Manager::Systemd,
                file: PathBuf::from("/s/iapeer.service"),
                decision: WriteDecision::Create,
            },
            Step::LoadService {
                manager: Manager::Systemd,
                commands: control::load_commands(
                    Manager::Systemd,
                    std::path::Path::new("/s/iapeer.service"),
                    501,
                ),
            },
        ];
        want.extend(tail());
        assert_eq!(steps, want);
        assert_eq!(
            describe(&steps[2]),
            "load the systemd service and start the daemon: systemctl --user daemon-reload && systemctl --user enable --now iapeer"
        );
    }

    #[test]
    fn a_daemon_outside_the_service_is_stopped_first_and_a_loaded_service_is_left() {
        let mut e = env(Some((Manager::Launchd, WriteDecision::Unchanged)));
        e.daemon_pid = Some(42);
        let steps = plan(&e);
        assert_eq!(steps[2], Step::StopOutsideDaemon { pid: 42 });
        assert!(matches!(steps[3], Step::LoadService { .. }));

        e.state = Some(ServiceState {
            loaded: true,
            enabled: true,
            detail: "state = running".into(),
        });
        let steps = plan(&e);
        assert_eq!(
            steps[2],
            Step::AlreadyLoaded {
                manager: Manager::Launchd
            }
        );

        // A changed definition of a loaded service replaces the loaded one.
        e.service = Some((
            Manager::Launchd,
            PathBuf::from("/s/p.plist"),
            WriteDecision::Update,
        ));
        let Step::LoadService { commands, .. } = &plan(&e)[2] else {
            panic!("{:?}", plan(&e));
        };
        let lines: Vec<String> = commands.iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            lines,
            [
                "launchctl bootout gui/501/com.agfpd.iapeer",
                "launchctl bootstrap gui/501 /s/p.plist"
            ]
        );
        e.service = Some((
            Manager::Systemd,
            PathBuf::from("/s/iapeer.service"),
            WriteDecision::Update,
        ));
        let Step::LoadService { commands, .. } = &plan(&e)[2] else {
            panic!();
        };
        assert_eq!(
            commands.last().unwrap().join(" "),
            "systemctl --user restart iapeer"
        );
    }

    #[test]
    fn the_later_steps_say_they_are_not_available() {
        let text = describe(&Step::Later(Later::Telegram));
        assert!(text.starts_with("later: create a human peer"), "{text}");
        assert!(text.ends_with("not available in this version"));
    }

    #[test]
    fn the_operator_gets_a_human_peer_unless_one_exists() {
        let mut e = env(None);
        let steps = plan(&e);
        // After the daemon and the logins check (spec 08 §1 steps 1, 2).
        let after_health = steps.iter().skip_while(|s| **s != Step::WaitHealthy).nth(2);
        assert_eq!(
            after_health,
            Some(&Step::CreateHuman { name: "ada".into() })
        );
        e.humans = vec!["you".into()];
        assert!(plan(&e).contains(&Step::HumansExist {
            names: vec!["you".into()]
        }));
        assert!(!plan(&e)
            .iter()
            .any(|s| matches!(s, Step::CreateHuman { .. })));
    }

    #[test]
    fn the_notifier_peers_are_created_unless_they_exist() {
        let mut e = env(None);
        e.peers = vec!["timer".into(), "ada".into()];
        assert!(plan(&e).contains(&Step::ProvisionNotifier {
            missing: vec!["watcher".into()]
        }));
        e.peers.push("watcher".into());
        assert!(plan(&e).contains(&Step::NotifierExists));
    }

    #[test]
    fn the_operator_name_is_the_flag_else_the_login_else_you() {
        assert_eq!(operator_name(Some("boss"), Some("ada")), "boss");
        assert_eq!(operator_name(None, Some("Ada")), "ada");
        assert_eq!(
            operator_name(None, Some("root user")),
            "you",
            "not a peer name"
        );
        assert_eq!(operator_name(None, None), "you");
    }

    #[test]
    fn step_two_warns_about_each_agent_that_is_not_logged_in() {
        let mut e = env(None);
        e.logins = vec![
            (
                Agent {
                    runtime: "claude",
                    bin: PathBuf::from("/b/claude"),
                },
                Some(Login::Out),
            ),
            (
                Agent {
                    runtime: "codex",
                    bin: PathBuf::from("/b/codex"),
                },
                Some(Login::In),
            ),
        ];
        let steps = plan(&e);
        let at = steps
            .iter()
            .position(|s| matches!(s, Step::CheckLogins(_)))
            .unwrap();
        assert_eq!(steps[at - 1], Step::WaitHealthy, "right after the daemon");
        let text = describe(&steps[at]);
        assert!(
            text.contains("warning: claude (/b/claude) is installed but not logged in"),
            "{text}"
        );
        assert!(text.contains("codex is logged in"), "{text}");
        assert!(describe(&Step::CheckLogins(Vec::new()))
            .contains("no agent CLI with a login (claude or codex or gemini or opencode)"));
        e.logins[0].1 = None;
        assert!(
            describe(&plan(&e)[at])
                .contains("check whether claude is logged in (`/b/claude auth status`)"),
            "a dry run only says what it would ask"
        );
    }
}

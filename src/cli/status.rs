//! `iapeer status` (spec 08 §1 "Health"): daemon health, service, peers summary, memory slot.
//! Exit 1 iff the daemon is unhealthy.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::client::Client;
use super::parse::Invocation;
use super::spec::flags;
use super::{json_line, paths, print, CliError, CliResult};
use crate::host::control::ServiceCtl;
use crate::host::install::InstallEnv;
use crate::host::login::{Agent, Login};
use crate::host::login_memo::{self, Ask};
use crate::host::service::Manager;
use crate::markers::{Flag, Markers};
use crate::memory::{self, slot::Heartbeat};
use crate::paths::Paths;
use crate::protocol::{
    call, AgentProgram, Answer, ListReply, PrepStatus, StatusReply, ThreadRestart,
};
use crate::registry::Registry;
use crate::roster::{build_rows, LiveState, PeerRow};

/// What a healthy daemon answered to `status` and `list`.
struct DaemonState {
    status: Answer<StatusReply>,
    list: Answer<ListReply>,
}

/// Ask the daemon for `status` with a deadline of 2.5 s (health needs one answered ping).
fn daemon_status(paths: &Paths) -> Option<DaemonState> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let p = paths.clone();
    std::thread::spawn(move || {
        let answer = Client::connect(&p).ok().and_then(|mut c| {
            let ping = c.request(&call::Ping {}, |_| {}).ok()?;
            ping.into_result().ok()?;
            let status = c.request(&call::Status {}, |_| {}).ok()?;
            let list = c.request(&call::List {}, |_| {}).ok()?;
            Some(DaemonState { status, list })
        });
        let _ = tx.send(answer);
    });
    rx.recv_timeout(Duration::from_millis(2500)).ok().flatten()
}

/// The agent runtimes' programs as the running daemon finds them (issue 30 item 1), or `None`
/// when no daemon answers `status` within 2.5 s (or it is too old to say).
pub fn daemon_agents(paths: &Paths) -> Option<Vec<AgentProgram>> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let p = paths.clone();
    std::thread::spawn(move || {
        let answer = Client::connect(&p)
            .ok()
            .and_then(|mut c| c.request(&call::Status {}, |_| {}).ok())
            .and_then(|a| a.into_result().ok())
            .map(|st| st.agents)
            .filter(|a| !a.is_empty());
        let _ = tx.send(answer);
    });
    rx.recv_timeout(Duration::from_millis(2500)).ok().flatten()
}

/// Whether the daemon's loopback HTTP server answers (spec 08 §1: a daemon whose MCP endpoint
/// is dead is not healthy, whatever its control socket says): connect to `127.0.0.1:<port>`,
/// send `GET /mcp` and wait for an HTTP status line, all within `timeout`. Any status counts
/// (405, or 401 behind a bearer) but 503, which it answers when every connection it may hold
/// is being served: then no agent's call gets in either. `Err` says what failed
/// ([`HTTP_FULL`] first for a 503).
pub fn http_answers(port: u16, timeout: Duration) -> Result<(), String> {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + timeout;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot connect: {e}"))?;
    let left = || {
        deadline
            .saturating_duration_since(std::time::Instant::now())
            .max(Duration::from_millis(1))
    };
    let _ = s.set_write_timeout(Some(left()));
    s.write_all(
        format!("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .map_err(|e| format!("cannot send a request: {e}"))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while got.len() < 12 {
        let _ = s.set_read_timeout(Some(left()));
        match s.read(&mut buf) {
            Ok(0) => return Err("closed without an answer".into()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("no answer within {} ms ({e})", timeout.as_millis())),
        }
    }
    if !got.starts_with(b"HTTP/1.") {
        return Err("the answer is not HTTP".into());
    }
    if got[9..12] == *b"503" {
        return Err(format!(
            "{HTTP_FULL}: every connection it may hold is being served — raise the daemon's \
             open-file limit (LimitNOFILE= in its service, ulimit -n) to let it hold more"
        ));
    }
    Ok(())
}

/// How [`http_answers`]'s refusal of a full server begins.
pub const HTTP_FULL: &str = "it answers 503 (busy)";

/// The port of an MCP URL `http://127.0.0.1:<port>/mcp`.
fn port_of(tcp: &str) -> Option<u16> {
    tcp.strip_prefix("http://127.0.0.1:")?
        .strip_suffix("/mcp")?
        .parse()
        .ok()
}

/// The line for a daemon thread restarted after a panic (issue 26 item 9): which, how often,
/// when last and what happened, e.g. `daemon: the http-accept thread panicked and was
/// restarted 1 time, last at 2026-12-01T09:00:00.000Z: panicked at src/x.rs:1:2 (boom)`.
fn restart_line(r: &ThreadRestart) -> String {
    let when = i64::try_from(r.last_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| format!("{} ms", r.last_ms), crate::clock::log_ts);
    format!(
        "daemon: the {} thread panicked and was restarted {} time{}, last at {when}: {}",
        r.thread,
        r.restarts,
        if r.restarts == 1 { "" } else { "s" },
        crate::visible::line(&r.last)
    )
}

/// The `agents:` lines of `status` and `doctor` (issue 30 item 1): each agent runtime's
/// program as the daemon finds it, or that it finds none and where it looked, in order.
/// Empty for a daemon too old to say.
pub fn agent_lines(agents: &[AgentProgram]) -> String {
    let mut out = String::new();
    if agents.is_empty() {
        return out;
    }
    out.push_str(
        "agent programs, as the daemon finds them:
",
    );
    for a in agents {
        match &a.path {
            Some(p) => out.push_str(&format!(
                "  {}: {p}
",
                a.runtime
            )),
            None => out.push_str(&format!(
                "  {}: not found — looked at, in order: {}
",
                a.runtime,
                a.looked.join("; ")
            )),
        }
    }
    out
}

/// The problems of agent runtimes some peer declares and the daemon cannot find (issue 30
/// item 1), one paragraph each: which peers, where the daemon looked, what to do. Pure.
pub fn missing_agent_problems(registry: &Registry, agents: &[AgentProgram]) -> Vec<String> {
    agents
        .iter()
        .filter(|a| a.path.is_none())
        .filter_map(|a| {
            let peers: Vec<&str> = registry
                .peers
                .iter()
                .filter(|p| p.declares(&a.runtime))
                .map(|p| p.personality.as_str())
                .collect();
            (!peers.is_empty()).then(|| {
                format!(
                    "problem: {} declare{} runtime {} but the daemon cannot find its program — looked at, in order: {} — {}",
                    peers.join(", "),
                    if peers.len() == 1 { "s" } else { "" },
                    a.runtime,
                    a.looked.join("; "),
                    crate::runtime::agent_program::what_to_do(&a.runtime)
                )
            })
        })
        .collect()
}

/// Counts of runtimes by state across all peers: (live, asleep, stopped, parked).
pub fn summarize(rows: &[PeerRow]) -> (usize, usize, usize, usize) {
    let mut c = (0, 0, 0, 0);
    for r in rows.iter().flat_map(|r| &r.runtimes) {
        match r.status.as_str() {
            "live" => c.0 += 1,
            "stopped" => c.2 += 1,
            "parked" => c.3 += 1,
            _ => c.1 += 1,
        }
    }
    c
}

/// `status --json`'s `peers` object.
#[derive(Serialize)]
struct PeerCounts {
    count: usize,
    live: usize,
    asleep: usize,
    stopped: usize,
    parked: usize,
}

/// The `status --json` document.
#[derive(Serialize)]
struct StatusDoc<'a> {
    version: &'static str,
    healthy: bool,
    /// The daemon's `status` reply as it came (`null` when unhealthy).
    daemon: Option<&'a Answer<StatusReply>>,
    /// `systemd`, `launchd` or `none`.
    service: &'static str,
    /// Whether the service manager has the service loaded.
    service_loaded: bool,
    /// What the service manager said (or why it was not asked).
    service_detail: &'a str,
    peers: PeerCounts,
    /// The memory slot (spec 08 §3), `null` when empty.
    memory: Option<MemoryDoc<'a>>,
    /// The notices in force (spec 10 §3): live agents their model API refuses.
    notices: &'a [crate::notices::Notice],
    /// The outbox: sends kept while the daemon was down (issue 11 item 7).
    outbox: OutboxDoc<'a>,
    /// The logins of the agent CLIs some peer runs on by default (issue 27 item 2).
    logins: Vec<LoginDoc<'a>>,
}

/// One agent CLI's login in `status --json`.
#[derive(Debug, PartialEq, Eq, Serialize)]
struct LoginDoc<'a> {
    /// The runtime (`claude`, `gemini`…).
    runtime: &'a str,
    /// `in`, `out` or `unknown`.
    login: &'static str,
    /// Why it is unknown (`null` otherwise).
    why: Option<&'a str>,
    /// The peers whose default runtime it is.
    peers: Vec<&'a str>,
    /// How to log in (`null` when logged in).
    fix: Option<&'static str>,
}

/// The peers of `registry` whose default runtime is `runtime`.
fn defaulting_to<'r>(registry: &'r Registry, runtime: &str) -> Vec<&'r str> {
    registry
        .peers
        .iter()
        .filter(|p| p.default_runtime == runtime)
        .map(|p| p.personality.as_str())
        .collect()
}

/// `status --json`'s `logins` (pure).
fn login_docs<'a>(registry: &'a Registry, logins: &'a [(Agent, Login)]) -> Vec<LoginDoc<'a>> {
    logins
        .iter()
        .map(|(a, l)| LoginDoc {
            runtime: a.runtime,
            login: match l {
                Login::In => "in",
                Login::Out => "out",
                Login::Unknown(_) => "unknown",
            },
            why: match l {
                Login::Unknown(why) => Some(why),
                _ => None,
            },
            peers: defaulting_to(registry, a.runtime),
            fix: (*l != Login::In).then(|| crate::host::login::how_to_log_in(a.runtime)),
        })
        .collect()
}

/// The marks of `status` where a runtime some peer runs on by default is not logged in, a line each:
/// which peers cannot answer and how to log in; nothing when all are (or cannot tell). Pure.
pub fn login_marks(registry: &Registry, logins: &[(Agent, Login)]) -> String {
    logins
        .iter()
        .filter(|(_, l)| *l == Login::Out)
        .map(|(a, _)| {
            format!(
                "agent login: {} is NOT logged in — {} cannot answer until you {}\n",
                a.runtime,
                defaulting_to(registry, a.runtime).join(", "),
                crate::host::login::how_to_log_in(a.runtime)
            )
        })
        .collect()
}

/// The login lines of `doctor` (a line per installed agent CLI, `host::login::lines`) or the
/// marks of `status` ([`login_marks`]).
fn login_section(h: &Health, doctor: bool) -> String {
    if !doctor {
        return login_marks(&h.registry, &h.logins);
    }
    let asked: Vec<(Agent, Option<Login>)> = h
        .logins
        .iter()
        .map(|(a, l)| (a.clone(), Some(l.clone())))
        .collect();
    crate::host::login::lines(&asked)
        .into_iter()
        .map(|line| format!("{line}\n"))
        .collect()
}

/// One `agent-login:<runtime>` check per installed agent CLI (`doctor --json`): logged in,
/// or a warning (not logged in, or no answer) with what to do — never a failure: the check
/// runs in `doctor`'s environment, not the peers' (`host::login`).
fn login_checks(h: &Health) -> Vec<Check> {
    h.logins
        .iter()
        .map(|(a, l)| {
            let line = crate::host::login::lines(&[(a.clone(), Some(l.clone()))]).join("");
            let name = format!("agent-login:{}", a.runtime);
            match l {
                Login::In => Check::new(name, Level::Ok, "logged in"),
                Login::Out => Check::new(name, Level::Warn, crate::host::login::advice(a))
                    .fix(crate::host::login::how_to_log_in(a.runtime)),
                Login::Unknown(_) => Check::new(name, Level::Warn, line),
            }
        })
        .collect()
}

/// The outbox part of `status --json`.
#[derive(Serialize)]
struct OutboxDoc<'a> {
    /// Sends waiting for the daemon.
    waiting: usize,
    /// Sends the daemon will not try again: `{file, kind, reason}` (kind `refused`,
    /// `unknown` or `unreadable`).
    set_aside: &'a [crate::outbox::SetAside],
}

/// The memory part of `status --json`.
#[derive(Serialize)]
struct MemoryDoc<'a> {
    provider: &'a str,
    package: &'a str,
    version: &'a str,
    /// The heartbeat file, when the provider declares one.
    heartbeat: Option<&'a std::path::Path>,
    /// Seconds since the provider's daemon last refreshed it (`null`: none declared, or the
    /// file is missing — its daemon is not running).
    heartbeat_age_secs: Option<u64>,
}

/// The service part of `status`: the manager, whether it has the service loaded, and what
/// it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceReport {
    /// The available manager (`None`: no service manager here).
    pub manager: Option<Manager>,
    /// Loaded by the manager.
    pub loaded: bool,
    /// The manager's words, or why it was not asked.
    pub detail: String,
}

impl ServiceReport {
    /// The `service:` line.
    pub fn line(&self) -> String {
        match self.manager {
            None => format!("service: none ({})", self.detail),
            Some(m) => format!(
                "service: {} {} ({})",
                m.name(),
                if self.loaded { "loaded" } else { "not loaded" },
                self.detail
            ),
        }
    }
}

/// Ask the service manager (through the seam) about the service; not asked when its file is
/// missing.
fn service_report(paths: &Paths) -> ServiceReport {
    let none = |detail: String| ServiceReport {
        manager: None,
        loaded: false,
        detail,
    };
    let env = match InstallEnv::from_process(paths) {
        Ok(env) => env,
        Err(e) => return none(e.to_string()),
    };
    let Some((manager, file)) = env.service_file() else {
        return none(
            "no service manager here; iapeer onboard runs the daemon with iapeer daemon --detach"
                .into(),
        );
    };
    if !file.exists() {
        return ServiceReport {
            manager: Some(manager),
            loaded: false,
            detail: format!(
                "no service file at {}; iapeer onboard writes and loads it",
                file.display()
            ),
        };
    }
    let state = ServiceCtl::from_env().state(manager, nix::unistd::getuid().as_raw());
    ServiceReport {
        manager: Some(manager),
        loaded: state.loaded,
        detail: state.detail,
    }
}

/// How the daemon's send-preparation pools stand (issue 26 item 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrepHealth {
    /// Nothing stalled.
    Fine,
    /// Some preparations stalled; the other senders (for sends without attachments: the
    /// sends to other peers) are still served.
    Stalled,
    /// Every thread of a pool is stalled: sends with attachments (`attachments`) and/or sends
    /// without (`plain`) cannot be prepared.
    Blocked {
        /// The pool for sends with attachments is blocked.
        attachments: bool,
        /// The pool for sends without attachments is blocked.
        plain: bool,
    },
}

impl PrepHealth {
    /// What the `daemon:` line says when a pool is blocked; `None` when none is.
    pub fn blocked_line(self) -> Option<&'static str> {
        match self {
            PrepHealth::Blocked {
                attachments: true,
                plain: true,
            } => Some("no send can be prepared: see send preparation below"),
            PrepHealth::Blocked {
                attachments: true, ..
            } => Some(
                "sends with attachments cannot be prepared: see send preparation below; sends \
                 without attachments are served",
            ),
            PrepHealth::Blocked { .. } => Some(
                "sends without attachments cannot be prepared: see send preparation below; \
                 sends with attachments are served",
            ),
            _ => None,
        }
    }
}

/// What to do about stalled send preparations.
const PREP_FIX: &str = "make that file system answer again, or unmount it (umount -l <its mount \
    point>); the threads then come back by themselves";

/// One `  <sender>: …` line of a stalled sender: how many and how long, what waits behind
/// them, what they read.
fn stalled_line(s: &crate::protocol::StalledPrep) -> String {
    let (behind, reading) = match (s.attachments.as_slice(), s.peer.as_str()) {
        ([], "") => (" of its sends", "reading the registry".to_string()),
        ([], peer) => (
            " sends to it",
            format!("reading the folder of peer \"{peer}\" (its profile)"),
        ),
        (files, _) => (" of its sends", format!("reading {}", files.join(", "))),
    };
    let behind = match s.waiting {
        0 => String::new(),
        n => format!(", {n} more{behind} waiting behind them"),
    };
    format!(
        "  {}: {} stalled, the oldest for {} s{behind} — {reading}\n",
        s.sender,
        s.jobs,
        s.oldest_ms / 1000
    )
}

/// The `what is wrong` parts of stalled preparations, for the attachment pool and the pool
/// for sends without attachments: each `(stalled threads, all of them stalled)`.
fn what_is_wrong(
    p: &PrepStatus,
    (reading, blocked_att): (usize, bool),
    (folders, blocked_plain): (usize, bool),
) -> Vec<String> {
    let mut wrong = Vec::new();
    if reading > 0 {
        wrong.push(if blocked_att {
            "a read of these files does not return (a FUSE or network file system that stopped \
             answering?), and a thread in such a read cannot be stopped; every send with \
             attachments waits, and times out, until one comes back"
                .to_string()
        } else {
            format!(
                "a read of these files does not return (a FUSE or network file system that \
                 stopped answering?), and a thread in such a read cannot be stopped; their \
                 senders' sends wait and time out, other senders are still served ({} more \
                 threads may stall before every send with attachments waits)",
                p.threads_max - reading
            )
        });
    }
    if folders > 0 {
        let left = p.plain_threads_max.saturating_sub(folders);
        wrong.push(if blocked_plain {
            "a read of these peers' folders does not return (a FUSE or network file system \
             that stopped answering?), and a thread in such a read cannot be stopped; every \
             send without attachments waits, and times out, until one comes back"
                .to_string()
        } else {
            format!(
                "a read of these peers' folders does not return (a FUSE or network file system \
                 that stopped answering?), and a thread in such a read cannot be stopped; the \
                 sends to these peers wait and time out, sends to other peers are still served \
                 ({left} more threads may stall before every send without attachments waits)"
            )
        });
    }
    wrong
}

/// The `send preparation:` lines of `status` and `doctor`, and the pools' health: counts;
/// when preparations are stalled, which senders (for sends without attachments: which
/// peers' folders), how long, what they read, what is wrong and what to do.
pub fn prep_report(p: &PrepStatus) -> (String, PrepHealth) {
    let plain_threads = match p.plain_threads_max {
        0 => String::new(),
        max => format!(
            "; threads for sends without attachments {} of at most {max}",
            p.plain_threads
        ),
    };
    let counts = format!(
        "{} running, {} waiting; threads {} of at most {}{plain_threads}",
        p.running, p.waiting, p.threads, p.threads_max
    );
    let stalled: usize = p.stalled.iter().map(|s| s.jobs).sum();
    if stalled == 0 {
        return (format!("send preparation: {counts}\n"), PrepHealth::Fine);
    }
    let after = p.stalled_after_ms.div_ceil(1000);
    let sum = |attached: bool| -> usize {
        p.stalled
            .iter()
            .filter(|s| s.attachments.is_empty() != attached)
            .map(|s| s.jobs)
            .sum()
    };
    // Each pool's own stalled threads count against its own bound.
    let (reading, folders) = (sum(true), sum(false));
    let blocked_att = reading >= p.threads_max;
    let blocked_plain = p.plain_threads_max > 0 && folders >= p.plain_threads_max;
    let mut out = String::new();
    if blocked_att {
        out.push_str(&format!(
            "send preparation: BLOCKED — all {} threads that read attachments are stalled \
             (running over {after} s): no send with attachments can be prepared until one comes \
             back; sends without attachments are {} ({counts})\n",
            p.threads_max,
            if blocked_plain {
                "blocked too"
            } else {
                "still served"
            }
        ));
    } else if blocked_plain {
        out.push_str(&format!(
            "send preparation: BLOCKED — all {} threads that prepare sends without attachments \
             are stalled reading peers' folders (running over {after} s): no send without \
             attachments can be prepared until one comes back; sends with attachments are still \
             served ({counts})\n",
            p.plain_threads_max
        ));
    } else {
        out.push_str(&format!(
            "send preparation: STALLED — {stalled} preparation(s) running over {after} s \
             ({counts})\n"
        ));
    }
    for s in &p.stalled {
        out.push_str(&stalled_line(s));
    }
    let wrong = what_is_wrong(p, (reading, blocked_att), (folders, blocked_plain));
    out.push_str(&format!(
        "  what is wrong: {}\n  what to do: {PREP_FIX}\n",
        wrong.join("; and ")
    ));
    let health = if blocked_att || blocked_plain {
        PrepHealth::Blocked {
            attachments: blocked_att,
            plain: blocked_plain,
        }
    } else {
        PrepHealth::Stalled
    };
    (out, health)
}

/// How to let an unprivileged daemon run its latency threads real-time (`doctor`).
const REALTIME_FIX: &str = "to allow it: LimitRTPRIO=1 in the daemon's systemd user unit (it \
    works up to the user manager's own hard limit: systemctl --user show -p LimitRTPRIO), or \
    the line `<user> - rtprio 1` in /etc/security/limits.conf and a new login; then restart \
    the daemon";

/// `doctor`'s line about the daemon's real-time scheduling (issue 31 item 3,
/// `daemon::realtime`): on (which threads, why allowed), off, or not allowed with how to allow
/// it; empty for a daemon that does not report it. Pure.
pub fn realtime_line(rt: &crate::protocol::RealtimeStatus) -> String {
    let demoted = match rt.demoted.as_slice() {
        [] => String::new(),
        names => format!(
            "; put back to the normal policy for using over half a core: {}",
            names.join(", ")
        ),
    };
    match rt.mode.as_str() {
        "on" => format!(
            "realtime: the router, http-accept, http-streams and send-prep threads run SCHED_FIFO \
             {} (allowed: \
             {}; now: {}){demoted}\n",
            rt.priority,
            rt.detail,
            if rt.threads.is_empty() {
                "none".to_string()
            } else {
                rt.threads.join(", ")
            }
        ),
        "off" => "realtime: off (IAPEER_REALTIME=0): the latency threads run at the normal \
                  policy\n"
            .into(),
        "not-allowed" => format!(
            "realtime: not allowed (not root, no CAP_SYS_NICE, {}): the latency threads run at \
             the normal policy, and a burst's answers wait behind the agents on a busy host — \
             {REALTIME_FIX}\n",
            rt.detail
        ),
        "refused" => format!(
            "realtime: the kernel refused SCHED_FIFO ({}): the latency threads run at the \
             normal policy\n",
            rt.detail
        ),
        _ => String::new(),
    }
}

/// Run `iapeer status`.
pub fn run(inv: &Invocation) -> CliResult {
    report(inv.flag(flags::JSON), false)
}

/// `iapeer doctor`: [`report`] (where stalled send preparations are a problem too), the
/// federation's checks when this root has joined (`federation::doctor_checks`, issue 28 item
/// 6), then `verify` (read only); exit 1 when one finds a problem, after all have printed. With
/// `--json`, one document of the same checks ([`doctor_checks`]) and the same exit code.
pub fn doctor(inv: &Invocation) -> CliResult {
    if inv.flag(flags::JSON) {
        return doctor_json();
    }
    let status = report(false, true);
    // The federation (issue 28 item 6): nothing when this root has not joined.
    let federation = super::federation::doctor_checks(&paths()?);
    print(&super::federation::doctor_lines(&federation))?;
    let federation_failed = federation.iter().any(|c| c.level == Level::Fail);
    super::print("\n")?;
    let verify = super::verify::check(false, false, true);
    super::print(&verdict(
        status.is_err(),
        verify.is_err(),
        federation_failed,
    ))?;
    status.and(verify).and(match federation_failed {
        true => Err(CliError::Exit(1)),
        false => Ok(()),
    })
}

/// The last line of `doctor`: no problems, or which parts have one. It covers every part
/// (with the daemon down it is not "no problems"). Pure.
pub fn verdict(daemon: bool, registry: bool, federation: bool) -> String {
    let alone = [daemon, registry, federation]
        .iter()
        .filter(|p| **p)
        .count()
        == 1;
    let parts: Vec<&str> = [
        (daemon, "the daemon"),
        (
            registry,
            if alone {
                "the registry or a profile"
            } else {
                "the registry"
            },
        ),
        (federation, "the federation"),
    ]
    .iter()
    .filter(|(p, _)| *p)
    .map(|(_, name)| *name)
    .collect();
    match parts.as_slice() {
        [] => "doctor: no problems\n".into(),
        [one] => format!("doctor: {one} has a problem (above)\n"),
        [first @ .., last] => format!(
            "doctor: {} and {last} have problems (above)\n",
            first.join(", ")
        ),
    }
}

/// How one check of `doctor --json` came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Nothing to do.
    Ok,
    /// Worth a look; not a problem (the exit code stays 0).
    Warn,
    /// A problem: `doctor` exits 1.
    Fail,
}

/// One check of `doctor --json` (issue 30 item 6): what was checked, how it came out, what
/// was found (the text form's words) and, when something is to be done, what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked: `daemon`, `service`, `peers`, `memory`, `send-preparation`,
    /// `agent-program:<runtime>`, `agent-login:<runtime>`, `notice`, `outbox`, `federation`, `clock-skew`,
    /// `clock-skew:<host>` (these three only when joined: `cli::federation::doctor_checks`),
    /// `registry`, `profile:<peer>`, `daemon-thread:<thread>`.
    pub name: String,
    /// How it came out.
    pub level: Level,
    /// What was found.
    pub message: String,
    /// What to do (`null` when nothing is).
    pub fix: Option<String>,
}

impl Check {
    fn new(name: impl Into<String>, level: Level, message: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            level,
            message: message.into(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
}

/// The `doctor --json` document.
#[derive(Serialize)]
struct DoctorDoc<'a> {
    /// False when a check failed (then the exit code is 1).
    ok: bool,
    version: &'static str,
    checks: &'a [Check],
}

/// `doctor --json`: every check as [`doctor_checks`] makes it, exit 1 when one failed.
fn doctor_json() -> CliResult {
    let paths = paths()?;
    let health = gather(&paths, Logins::Installed)?;
    let findings = super::verify::findings(&paths, Vec::new());
    let federation = super::federation::doctor_checks(&paths);
    let checks = doctor_checks(&health, &findings, federation);
    let ok = checks.iter().all(|c| c.level != Level::Fail);
    print(&format!(
        "{}\n",
        json_line(&DoctorDoc {
            ok,
            version: env!("CARGO_PKG_VERSION"),
            checks: &checks,
        })
    ))?;
    if ok {
        Ok(())
    } else {
        Err(CliError::Exit(1))
    }
}

/// What to do when the daemon does not run.
const START_DAEMON: &str =
    "start it with: iapeer daemon (foreground), iapeer daemon --detach or iapeer onboard (as a \
     service)";

/// Everything `status` and `doctor` look at, gathered once.
struct Health {
    answer: Option<DaemonState>,
    registry: Registry,
    rows: Vec<PeerRow>,
    notices: Vec<crate::notices::Notice>,
    /// The MCP endpoint answers (`Ok` too when the daemon does not run).
    http: Result<(), String>,
    prep: Option<(String, PrepHealth)>,
    healthy: bool,
    service: ServiceReport,
    slot: Option<crate::memory::slot::MemorySlot>,
    heartbeat: Heartbeat,
    /// Sends waiting in the outbox.
    outbox_waiting: usize,
    /// Sends the outbox set aside.
    outbox_aside: Vec<crate::outbox::SetAside>,
    outbox_dir: std::path::PathBuf,
    /// What the agent CLIs asked said of their logins (`host::login`): every installed one
    /// for `doctor`, those some peer runs on by default for `status`.
    logins: Vec<(Agent, Login)>,
}

/// Which agent CLIs' logins [`gather`] asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Logins {
    /// Every installed agent CLI with a login check (`doctor`).
    Installed,
    /// Those some peer runs on by default (`status`): a peer declares every installed agent
    /// runtime as a fallback, and a fallback's login is `doctor`'s to tell.
    Declared,
}

impl Health {
    fn status(&self) -> Option<&StatusReply> {
        match self.answer.as_ref().map(|a| &a.status) {
            Some(Answer::Ok(st)) => Some(st),
            _ => None,
        }
    }

    fn agents(&self) -> &[AgentProgram] {
        self.status().map_or(&[], |st| &st.agents)
    }

    fn prep_health(&self) -> PrepHealth {
        self.prep.as_ref().map_or(PrepHealth::Fine, |(_, h)| *h)
    }
}

/// Ask the daemon, the service manager and the files what `status` shows, and the agent
/// CLIs of `logins` whether they are logged in (at the same time, each at most
/// `host::login::timeout`).
fn gather(paths: &Paths, logins: Logins) -> Result<Health, CliError> {
    let answer = daemon_status(paths);
    let registry = Registry::load(paths)?;
    if let Some(Answer::Ok(st)) = answer.as_ref().map(|a| &a.status) {
        // The daemon wakes the peers: its view of the programs is the one that counts.
        if !st.agents.is_empty() {
            crate::runtime::agent_program::adopt(st.agents.clone());
        }
    }
    let asked: Vec<Agent> = crate::host::login::installed_agents()
        .into_iter()
        .filter(|a| {
            logins == Logins::Installed
                || registry
                    .peers
                    .iter()
                    .any(|p| p.default_runtime == a.runtime)
        })
        .collect();
    // `doctor` asks afresh (its answers are remembered for `status`); `status` takes a
    // remembered answer while what it depends on is the same (`host::login_memo`).
    let ask = match logins {
        Logins::Installed => Ask::Fresh,
        Logins::Declared => Ask::Remembered,
    };
    let memo_paths = paths.clone();
    let logins = std::thread::spawn(move || login_memo::answers(&memo_paths, asked, ask));
    let live = match answer.as_ref().map(|a| &a.list) {
        Some(Answer::Ok(list)) => LiveState::from_reply(list.clone()),
        _ => LiveState::default(),
    };
    let rows = build_rows(
        &registry,
        &live,
        |id| Markers::parse(paths, id).is_ok_and(|m| m.is_set(Flag::Stopped)),
        |_| None,
        |_| 0,
    );
    let status = match answer.as_ref().map(|a| &a.status) {
        Some(Answer::Ok(st)) => Some(st),
        _ => None,
    };
    // The control socket answered; the MCP endpoint must answer too.
    let http = match status {
        Some(st) => port_of(&st.tcp)
            .ok_or_else(|| format!("unexpected MCP URL {}", st.tcp))
            .and_then(|port| http_answers(port, Duration::from_millis(1500)))
            .map_err(|why| match why.starts_with(HTTP_FULL) {
                true => format!("the MCP endpoint {} is full: {why}", st.tcp),
                false => format!("the MCP endpoint {} does not answer: {why}", st.tcp),
            }),
        None => Ok(()),
    };
    let prep = status.map(|st| prep_report(&st.prep));
    let blocked = prep
        .as_ref()
        .is_some_and(|(_, h)| h.blocked_line().is_some());
    let healthy = answer.is_some() && http.is_ok() && !blocked;
    let slot = crate::memory::slot::read_slot(paths);
    let heartbeat = slot
        .as_ref()
        .map(|s| Heartbeat::of(s, SystemTime::now()))
        .unwrap_or(Heartbeat::NotDeclared);
    Ok(Health {
        notices: crate::notices::current(paths),
        service: service_report(paths),
        outbox_waiting: crate::outbox::pending(paths).len(),
        outbox_aside: crate::outbox::set_aside(paths),
        outbox_dir: crate::outbox::dir(paths),
        answer,
        registry,
        rows,
        http,
        prep,
        healthy,
        slot,
        heartbeat,
        logins: logins.join().unwrap_or_default(),
    })
}

/// What to do about a send the outbox set aside.
const OUTBOX_FIX: &str = "read each reason; once its cause is fixed, send the message again with \
    iapeer send (the file holds the request, its text included), then delete the file and its \
    .txt";

/// The `outbox:` lines of `status` and `doctor` (issue 30 item 6): nothing when no send waits
/// and none was set aside; else how many wait for the daemon, and each send the daemon will
/// not try again (refused for good, of unknown state, unreadable) with its reason, where it
/// is and what to do. Pure.
pub fn outbox_lines(waiting: usize, aside: &[crate::outbox::SetAside], dir: &Path) -> String {
    let mut out = String::new();
    if waiting > 0 {
        out.push_str(&format!(
            "outbox: {waiting} send(s) kept while the daemon was down, waiting for it\n"
        ));
    }
    if aside.is_empty() {
        return out;
    }
    out.push_str(&format!(
        "outbox: {} kept send(s) NOT delivered and not tried again (in {}):\n",
        aside.len(),
        dir.display()
    ));
    for a in aside {
        let name = a.file.file_name().unwrap_or_default().to_string_lossy();
        let what = match a.kind.as_str() {
            "unknown" => "state unknown, it may have arrived",
            "unreadable" => "unreadable",
            _ => "refused",
        };
        out.push_str(&format!(
            "  {}: {what}: {}\n",
            crate::visible::line(&name),
            crate::visible::line(&a.reason)
        ));
    }
    out.push_str(&format!("  what to do: {OUTBOX_FIX}\n"));
    out
}

/// The `daemon` check: healthy with its addresses, not healthy (why), or not running.
fn daemon_check(h: &Health) -> Check {
    match (h.status(), &h.http) {
        (Some(_), Err(why)) => Check::new("daemon", Level::Fail, format!("NOT healthy: {why}"))
            .fix("restart it: iapeer shutdown, then iapeer daemon --detach (or iapeer onboard)"),
        (Some(st), Ok(())) => Check::new(
            "daemon",
            Level::Ok,
            format!("healthy @ {} + {}", st.tcp, st.sock),
        ),
        (None, _) if h.answer.is_some() => Check::new("daemon", Level::Ok, "healthy"),
        (None, _) => Check::new(
            "daemon",
            Level::Fail,
            "not running (nothing answers on its socket)",
        )
        .fix(START_DAEMON),
    }
}

/// One `agent-program:<runtime>` check per agent runtime: where its program is, or why not
/// finding it fails (a peer declares it) or does not.
fn agent_program_checks(h: &Health) -> Vec<Check> {
    let mut checks = Vec::new();
    let problems = missing_agent_problems(&h.registry, h.agents());
    for agent in h.agents() {
        let name = format!("agent-program:{}", agent.runtime);
        checks.push(match &agent.path {
            Some(path) => Check::new(name, Level::Ok, path.clone()),
            None => {
                let declared = h.registry.peers.iter().any(|p| p.declares(&agent.runtime));
                let problem = problems
                    .iter()
                    .find(|p| p.contains(&format!(" runtime {} ", agent.runtime)));
                match (declared, problem) {
                    (true, Some(problem)) => Check::new(
                        name,
                        Level::Fail,
                        problem.trim_start_matches("problem: ").to_string(),
                    )
                    .fix(crate::runtime::agent_program::what_to_do(&agent.runtime)),
                    _ => Check::new(
                        name,
                        Level::Ok,
                        format!(
                            "not found (no peer declares it) — looked at, in order: {}",
                            agent.looked.join("; ")
                        ),
                    ),
                }
            }
        });
    }
    checks
}

/// The `outbox` check: sends set aside warn, waiting ones are fine, or it is empty.
fn outbox_check(h: &Health) -> Check {
    let outbox = outbox_lines(h.outbox_waiting, &h.outbox_aside, &h.outbox_dir);
    let outbox = outbox
        .split("\n  what to do:")
        .next()
        .unwrap_or("")
        .trim_end()
        .trim_start_matches("outbox: ");
    if !h.outbox_aside.is_empty() {
        Check::new("outbox", Level::Warn, outbox).fix(OUTBOX_FIX)
    } else if h.outbox_waiting > 0 {
        Check::new("outbox", Level::Ok, outbox)
    } else {
        Check::new("outbox", Level::Ok, "empty")
    }
}

/// The checks of `doctor --json`, in the text form's order, with the same verdict: a check
/// fails exactly where the text form calls it a problem (exit 1). Pure.
fn doctor_checks(
    h: &Health,
    verify: &super::verify::Findings,
    federation: Vec<Check>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.push(daemon_check(h));
    if let Some(st) = h.status() {
        for r in &st.restarts {
            checks.push(Check::new(
                format!("daemon-thread:{}", r.thread),
                Level::Warn,
                restart_line(r),
            ));
        }
    }
    let line = h.service.line();
    let service = Check::new("service", Level::Ok, line.trim_start_matches("service: "));
    // Without a service manager there is nothing to load (the line says how the daemon runs).
    checks.push(if h.service.loaded || h.service.manager.is_none() {
        service
    } else {
        Check {
            level: Level::Warn,
            ..service
        }
        .fix("iapeer onboard writes and loads the service (the daemon then starts at login)")
    });
    let (l, a, s, p) = summarize(&h.rows);
    checks.push(Check::new(
        "peers",
        Level::Ok,
        format!(
            "{} peer(s); runtimes: {l} live, {a} asleep, {s} stopped, {p} parked",
            h.rows.len()
        ),
    ));
    let line = memory::slot::status_line(h.slot.as_ref(), h.heartbeat);
    let memory = Check::new("memory", Level::Ok, line.trim_start_matches("memory: "));
    checks.push(match (&h.slot, h.heartbeat) {
        (Some(slot), Heartbeat::Missing) => Check {
            level: Level::Warn,
            ..memory
        }
        .fix(format!(
            "start the memory provider's daemon (see {} status)",
            slot.provider
        )),
        _ => memory,
    });
    if let Some((text, health)) = &h.prep {
        let message = text
            .split("\n  what to do:")
            .next()
            .unwrap_or("")
            .trim_end()
            .trim_start_matches("send preparation: ");
        checks.push(match health {
            PrepHealth::Fine => Check::new("send-preparation", Level::Ok, message),
            _ => Check::new("send-preparation", Level::Fail, message).fix(PREP_FIX),
        });
    }
    checks.extend(agent_program_checks(h));
    checks.extend(login_checks(h));
    for n in &h.notices {
        checks.push(Check::new(
            "notice",
            Level::Warn,
            crate::notices::describe(n),
        ));
    }
    checks.push(outbox_check(h));
    checks.extend(federation);
    if verify.problems.is_empty() {
        checks.push(Check::new(
            "registry",
            Level::Ok,
            format!("{} peer(s), no problems", verify.peers),
        ));
    }
    for (peer, what) in &verify.problems {
        let check = Check::new(format!("profile:{peer}"), Level::Fail, what.clone());
        checks.push(if super::verify::has_own_advice(what) {
            check
        } else {
            check.fix(super::verify::FIX_ADVICE)
        });
    }
    for (peer, what) in &verify.warnings {
        checks.push(Check::new(
            format!("profile:{peer}"),
            Level::Warn,
            what.clone(),
        ));
    }
    checks
}

/// The `daemon:` line of `status` (healthy, not healthy and why, not running), then one line
/// per daemon thread that was restarted.
fn daemon_lines(h: &Health, prep_health: &PrepHealth) -> String {
    let daemon = match h.answer.as_ref().map(|a| &a.status) {
        Some(Answer::Ok(_)) if h.http.is_err() => format!(
            "daemon: NOT healthy ({})",
            h.http.as_ref().err().map_or("", String::as_str)
        ),
        Some(Answer::Ok(_)) if prep_health.blocked_line().is_some() => format!(
            "daemon: NOT healthy ({})",
            prep_health.blocked_line().unwrap_or_default()
        ),
        Some(Answer::Ok(st)) => format!("daemon: healthy @ {} + {}", st.tcp, st.sock),
        Some(Answer::Failed(_)) => "daemon: healthy @ ? + ?".to_string(),
        None => format!("daemon: not running (nothing answers on its socket) — {START_DAEMON}"),
    };
    match h.status() {
        Some(st) => std::iter::once(daemon)
            .chain(st.restarts.iter().map(restart_line))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => daemon,
    }
}

/// Print the status report (one JSON document with `json`); `Err` (exit 1) when the daemon
/// is not healthy (its send preparation blocked included), or with `stalled_is_a_problem`
/// (doctor) when some send preparations are stalled or an agent runtime a peer declares is
/// not found by the daemon.
fn report(json: bool, stalled_is_a_problem: bool) -> CliResult {
    let paths = paths()?;
    let h = gather(
        &paths,
        match stalled_is_a_problem {
            true => Logins::Installed,
            false => Logins::Declared,
        },
    )?;
    let (l, a, s, p) = summarize(&h.rows);
    let agents = h.agents();
    let agent_problems = missing_agent_problems(&h.registry, agents);
    let prep_health = h.prep_health();
    let (answer, service, slot, heartbeat, notices) =
        (&h.answer, &h.service, &h.slot, h.heartbeat, &h.notices);
    if json {
        let doc = StatusDoc {
            version: env!("CARGO_PKG_VERSION"),
            healthy: h.healthy,
            daemon: answer.as_ref().map(|a| &a.status),
            service: service.manager.map_or("none", Manager::name),
            service_loaded: service.loaded,
            service_detail: &service.detail,
            peers: PeerCounts {
                count: h.rows.len(),
                live: l,
                asleep: a,
                stopped: s,
                parked: p,
            },
            memory: slot.as_ref().map(|s| MemoryDoc {
                provider: &s.provider,
                package: &s.package,
                version: &s.version,
                heartbeat: s.heartbeat.as_deref(),
                heartbeat_age_secs: heartbeat.age_secs(),
            }),
            notices,
            outbox: OutboxDoc {
                waiting: h.outbox_waiting,
                set_aside: &h.outbox_aside,
            },
            logins: login_docs(&h.registry, &h.logins),
        };
        print(&format!("{}\n", json_line(&doc)))?;
    } else {
        let daemon = daemon_lines(&h, &prep_health);
        print(&format!(
            "iapeer {}\n{daemon}\n{}\npeers: {} (runtimes: {l} live, {a} asleep, {s} stopped{})\n{}\n",
            env!("CARGO_PKG_VERSION"),
            service.line(),
            h.rows.len(),
            if p > 0 {
                format!(", {p} parked")
            } else {
                String::new()
            },
            memory::slot::status_line(slot.as_ref(), heartbeat)
        ))?;
        let mut lines = h
            .prep
            .as_ref()
            .map(|(text, _)| text.clone())
            .unwrap_or_default();
        lines.push_str(&agent_lines(agents));
        lines.push_str(&login_section(&h, stalled_is_a_problem));
        lines.push_str(&format!("notices: {}\n", notices.len()));
        for n in notices {
            lines.push_str(&format!("  {}\n", crate::notices::describe(n)));
        }
        lines.push_str(&outbox_lines(
            h.outbox_waiting,
            &h.outbox_aside,
            &h.outbox_dir,
        ));
        if stalled_is_a_problem {
            if let Some(st) = h.status() {
                lines.push_str(&realtime_line(&st.realtime));
            }
            for p in &agent_problems {
                lines.push_str(&format!("{p}\n"));
            }
        }
        print(&lines)?;
    }
    let problem =
        stalled_is_a_problem && (prep_health == PrepHealth::Stalled || !agent_problems.is_empty());
    if h.healthy && !problem {
        Ok(())
    } else {
        Err(CliError::Exit(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doctor_says_whether_the_latency_threads_run_real_time_and_how_to_allow_it() {
        let rt = |mode: &str, detail: &str| crate::protocol::RealtimeStatus {
            mode: mode.into(),
            detail: detail.into(),
            priority: 1,
            threads: vec!["router".into(), "http-accept".into()],
            demoted: vec![],
        };
        assert_eq!(
            realtime_line(&rt("on", "root")),
            "realtime: the router, http-accept, http-streams and send-prep threads run SCHED_FIFO \
             1 (allowed: root; now: router, http-accept)\n"
        );
        let mut demoted = rt("on", "CAP_SYS_NICE");
        demoted.demoted = vec!["router".into()];
        assert!(realtime_line(&demoted)
            .ends_with("; put back to the normal policy for using over half a core: router\n"));
        assert!(realtime_line(&rt("off", "")).starts_with("realtime: off (IAPEER_REALTIME=0)"));
        let not = realtime_line(&rt("not-allowed", "RLIMIT_RTPRIO 0"));
        assert!(
            not.starts_with("realtime: not allowed (not root, no CAP_SYS_NICE, RLIMIT_RTPRIO 0)")
        );
        assert!(not.contains("LimitRTPRIO=1") && not.contains("/etc/security/limits.conf"));
        assert!(
            realtime_line(&rt("refused", "Operation not permitted (os error 1)"))
                .starts_with("realtime: the kernel refused SCHED_FIFO (Operation not permitted")
        );
        assert_eq!(
            realtime_line(&rt("", "")),
            "",
            "an older daemon says nothing"
        );
    }

    #[test]
    fn agent_programs_the_daemon_cannot_find_are_problems_only_when_declared() {
        let found = AgentProgram {
            runtime: "claude".into(),
            path: Some("/h/.local/bin/claude".into()),
            looked: vec![],
        };
        let missing = AgentProgram {
            runtime: "codex".into(),
            path: None,
            looked: vec!["IAPEER_CODEX_BIN (not set)".into(), "/usr/local/bin".into()],
        };
        let agents = [found, missing];
        assert_eq!(
            agent_lines(&agents),
            "agent programs, as the daemon finds them:\n  claude: /h/.local/bin/claude\n  codex: \
             not found — looked at, in order: IAPEER_CODEX_BIN (not set); /usr/local/bin\n"
        );
        assert_eq!(agent_lines(&[]), "");
        let peer = |name: &str, rts: &[&str]| {
            crate::registry::RegistryPeer::new(name, rts, "artificial", "/w")
        };
        let mut registry = Registry {
            peers: vec![peer("a", &["claude"]), peer("b", &["echo"])],
            ..Registry::default()
        };
        assert!(missing_agent_problems(&registry, &agents).is_empty());
        registry.peers.push(peer("c", &["claude", "codex"]));
        registry.peers.push(peer("d", &["codex"]));
        assert_eq!(
            missing_agent_problems(&registry, &agents),
            [
                "problem: c, d declare runtime codex but the daemon cannot find its program — \
              looked at, in order: IAPEER_CODEX_BIN (not set); /usr/local/bin — install the \
              Codex CLI so that one of these finds it (or set IAPEER_CODEX_BIN to the program \
              in the daemon's environment and restart it)"
            ]
        );
    }

    /// A mark only where a peer's runtime is not logged in (none for logged in or unknown),
    /// naming its peers and how to log in; the JSON says every asked runtime.
    #[test]
    fn a_runtime_that_is_not_logged_in_is_marked_with_its_peers() {
        let peer = |name: &str, rts: &[&str]| {
            crate::registry::RegistryPeer::new(name, rts, "artificial", "/w")
        };
        let registry = Registry {
            peers: vec![
                // a declares claude as a fallback only: its login marks gemini's line.
                peer("a", &["gemini", "claude"]),
                peer("b", &["gemini"]),
                peer("c", &["codex"]),
                peer("d", &["claude"]),
            ],
            ..Registry::default()
        };
        let agent = |rt: &'static str| Agent {
            runtime: rt,
            bin: format!("/b/{rt}").into(),
        };
        let logins = vec![
            (agent("claude"), Login::In),
            (
                agent("codex"),
                Login::Unknown("no answer within 15 s".into()),
            ),
            (agent("gemini"), Login::Out),
        ];
        assert_eq!(
            login_marks(&registry, &logins),
            format!(
                "agent login: gemini is NOT logged in — a, b cannot answer until you {}\n",
                crate::host::login::how_to_log_in("gemini")
            )
        );
        assert_eq!(login_marks(&registry, &logins[..2]), "");
        let docs = login_docs(&registry, &logins);
        assert_eq!(
            serde_json::to_value(&docs).unwrap(),
            serde_json::json!([
                {"runtime": "claude", "login": "in", "why": null, "peers": ["d"], "fix": null},
                {"runtime": "codex", "login": "unknown", "why": "no answer within 15 s",
                 "peers": ["c"], "fix": crate::host::login::how_to_log_in("codex")},
                {"runtime": "gemini", "login": "out", "why": null, "peers": ["a", "b"],
                 "fix": crate::host::login::how_to_log_in("gemini")},
            ])
        );
    }

    #[test]
    fn the_verdict_names_every_part_with_a_problem() {
        for (parts, want) in [
            ((false, false, false), "no problems"),
            ((true, false, false), "the daemon has a problem (above)"),
            (
                (false, true, false),
                "the registry or a profile has a problem (above)",
            ),
            (
                (true, true, false),
                "the daemon and the registry have problems (above)",
            ),
            ((false, false, true), "the federation has a problem (above)"),
            (
                (true, true, true),
                "the daemon, the registry and the federation have problems (above)",
            ),
        ] {
            assert_eq!(
                verdict(parts.0, parts.1, parts.2),
                format!("doctor: {want}\n")
            );
        }
    }

    #[test]
    fn the_outbox_lines_say_what_waits_what_was_set_aside_and_what_to_do() {
        use crate::outbox::SetAside;
        let dir = Path::new("/r/state/iapeer/outbox");
        assert_eq!(outbox_lines(0, &[], dir), "");
        assert_eq!(
            outbox_lines(2, &[], dir),
            "outbox: 2 send(s) kept while the daemon was down, waiting for it\n"
        );
        let aside = |name: &str, kind: &str, reason: &str| SetAside {
            file: dir.join(name),
            kind: kind.into(),
            reason: reason.into(),
        };
        let text = outbox_lines(
            0,
            &[
                aside(
                    "1.json.refused",
                    "refused",
                    "peer \"carol\" is not registered",
                ),
                aside("2.json.unknown", "unknown", "cut\x1b[31m off"),
            ],
            dir,
        );
        assert_eq!(
            text,
            format!(
                "outbox: 2 kept send(s) NOT delivered and not tried again (in \
                 /r/state/iapeer/outbox):\n  1.json.refused: refused: peer \"carol\" is not \
                 registered\n  2.json.unknown: state unknown, it may have arrived: cut␛[31m \
                 off\n  what to do: {OUTBOX_FIX}\n"
            )
        );
    }

    #[test]
    fn the_service_line_names_the_manager_and_whether_it_is_loaded() {
        let r = |manager, loaded, detail: &str| ServiceReport {
            manager,
            loaded,
            detail: detail.into(),
        };
        assert_eq!(
            r(Some(Manager::Systemd), true, "enabled, active").line(),
            "service: systemd loaded (enabled, active)"
        );
        assert_eq!(
            r(Some(Manager::Launchd), false, "launchctl does not know it").line(),
            "service: launchd not loaded (launchctl does not know it)"
        );
        assert_eq!(r(None, false, "why").line(), "service: none (why)");
    }

    #[test]
    fn a_restarted_thread_is_told_with_what_and_when() {
        let r = ThreadRestart {
            thread: "http-accept".into(),
            restarts: 1,
            last_ms: 1_764_579_600_123,
            last: "panicked at src/x.rs:1:2 (boom)".into(),
        };
        assert_eq!(
            restart_line(&r),
            "daemon: the http-accept thread panicked and was restarted 1 time, last at \
             2025-12-01T09:00:00.123Z: panicked at src/x.rs:1:2 (boom)"
        );
        let again = ThreadRestart { restarts: 3, ..r };
        assert!(restart_line(&again).contains("restarted 3 times, last at"));
    }

    #[test]
    fn the_prep_lines_say_who_stalled_what_is_wrong_and_what_to_do() {
        use crate::protocol::StalledPrep;
        let mut p = PrepStatus {
            running: 1,
            waiting: 0,
            threads: 2,
            threads_max: 16,
            plain_threads: 0,
            plain_threads_max: 0,
            stalled_after_ms: 2000,
            stalled: vec![],
        };
        assert_eq!(
            prep_report(&p),
            (
                "send preparation: 1 running, 0 waiting; threads 2 of at most 16\n".to_string(),
                PrepHealth::Fine
            )
        );
        p.running = 5;
        p.waiting = 3;
        p.threads = 6;
        p.stalled = vec![StalledPrep {
            sender: "echo-alice".into(),
            jobs: 2,
            oldest_ms: 34_500,
            waiting: 3,
            attachments: vec!["/mnt/x/a.txt".into()],
            peer: String::new(),
        }];
        let (text, health) = prep_report(&p);
        assert_eq!(health, PrepHealth::Stalled);
        assert_eq!(
            text,
            "send preparation: STALLED — 2 preparation(s) running over 2 s (5 running, 3 \
             waiting; threads 6 of at most 16)\n  echo-alice: 2 stalled, the oldest for 34 s, \
             3 more of its sends waiting behind them — reading /mnt/x/a.txt\n  what is wrong: \
             a read of these files does not return (a FUSE or network file system that stopped \
             answering?), and a thread in such a read cannot be stopped; their senders' sends \
             wait and time out, other senders are still served (14 more threads may stall \
             before every send with attachments waits)\n  what to do: make that file system answer again, or \
             unmount it (umount -l <its mount point>); the threads then come back by \
             themselves\n"
        );
        // Stalled registry reads (sends without attachments) do not use those threads.
        p.stalled[0].jobs = 15;
        p.stalled.push(StalledPrep {
            sender: "echo-bob".into(),
            jobs: 1,
            oldest_ms: 3_000,
            waiting: 0,
            attachments: vec![],
            peer: String::new(),
        });
        let (text, health) = prep_report(&p);
        assert_eq!(health, PrepHealth::Stalled);
        assert!(text.contains("(1 more threads may stall"), "{text}");
        assert!(text.contains("  echo-bob: 1 stalled, the oldest for 3 s — reading the registry"));
        p.stalled[0].jobs = 16;
        let (text, health) = prep_report(&p);
        assert_eq!(
            health,
            PrepHealth::Blocked {
                attachments: true,
                plain: false
            }
        );
        assert_eq!(
            health.blocked_line(),
            Some(
                "sends with attachments cannot be prepared: see send preparation below; sends \
                 without attachments are served"
            )
        );
        assert!(
            text.starts_with(
                "send preparation: BLOCKED — all 16 threads that read attachments are stalled \
                 (running over 2 s): no send with attachments can be prepared until one comes \
                 back; sends without attachments are still served"
            ),
            "{text}"
        );
        assert!(text.contains("every send with attachments waits, and times out, until one"));
    }

    #[test]
    fn a_stalled_plain_preparation_names_the_peer_whose_folder_does_not_answer() {
        use crate::protocol::StalledPrep;
        let to_bob = StalledPrep {
            sender: "to bob".into(),
            jobs: 2,
            oldest_ms: 12_300,
            waiting: 6,
            attachments: vec![],
            peer: "bob".into(),
        };
        let mut p = PrepStatus {
            running: 2,
            waiting: 6,
            threads: 0,
            threads_max: 64,
            plain_threads: 4,
            plain_threads_max: 64,
            stalled_after_ms: 2000,
            stalled: vec![to_bob.clone()],
        };
        let (text, health) = prep_report(&p);
        assert_eq!(health, PrepHealth::Stalled);
        assert_eq!(health.blocked_line(), None);
        assert_eq!(
            text,
            "send preparation: STALLED — 2 preparation(s) running over 2 s (2 running, 6 \
             waiting; threads 0 of at most 64; threads for sends without attachments 4 of at \
             most 64)\n  to bob: 2 stalled, the oldest for 12 s, 6 more sends to it waiting \
             behind them — reading the folder of peer \"bob\" (its profile)\n  what is wrong: \
             a read of these peers' folders does not return (a FUSE or network file system \
             that stopped answering?), and a thread in such a read cannot be stopped; the \
             sends to these peers wait and time out, sends to other peers are still served (62 \
             more threads may stall before every send without attachments waits)\n  what to \
             do: make that file system answer again, or unmount it (umount -l <its mount \
             point>); the threads then come back by themselves\n"
        );
        // 32 stuck peers take every thread: no plain send can be prepared, and it says so.
        p.stalled = (0..32)
            .map(|i| StalledPrep {
                sender: format!("to p{i}"),
                peer: format!("p{i}"),
                ..to_bob.clone()
            })
            .collect();
        let (text, health) = prep_report(&p);
        assert_eq!(
            health,
            PrepHealth::Blocked {
                attachments: false,
                plain: true
            }
        );
        assert!(text.starts_with(
            "send preparation: BLOCKED — all 64 threads that prepare sends without attachments \
             are stalled"
        ));
        assert!(text.contains("every send without attachments waits, and times out"));
        assert!(health
            .blocked_line()
            .unwrap()
            .starts_with("sends without attachments cannot be prepared"));
        assert_eq!(
            PrepHealth::Blocked {
                attachments: true,
                plain: true
            }
            .blocked_line(),
            Some("no send can be prepared: see send preparation below")
        );
    }

    /// A loopback server that answers its first connection `answer` (after one read of the
    /// request): its port and its thread.
    fn answer_once(answer: &'static [u8]) -> (u16, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 256];
            let _ = s.read(&mut buf);
            s.write_all(answer).unwrap();
        });
        (port, server)
    }

    #[test]
    fn the_http_probe_needs_an_answer_not_just_a_connection() {
        // Bound and listening, but nobody accepts: the kernel completes the handshake.
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = dead.local_addr().unwrap().port();
        let err = http_answers(port, Duration::from_millis(300)).unwrap_err();
        assert!(err.starts_with("no answer within 300 ms"), "{err}");
        drop(dead);
        assert!(http_answers(port, Duration::from_millis(300))
            .unwrap_err()
            .starts_with("cannot connect"));

        let (port, server) = answer_once(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n");
        assert_eq!(http_answers(port, Duration::from_secs(5)), Ok(()));
        server.join().unwrap();

        // A full server answers 503 to everyone: not healthy.
        let (port, server) =
            answer_once(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\r\n");
        let err = http_answers(port, Duration::from_secs(5)).unwrap_err();
        assert!(
            err.starts_with(HTTP_FULL) && err.contains("LimitNOFILE"),
            "{err}"
        );
        server.join().unwrap();
        assert_eq!(port_of("http://127.0.0.1:8765/mcp"), Some(8765));
        assert_eq!(port_of("http://localhost:8765/mcp"), None);
    }
}

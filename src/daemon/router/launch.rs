//! Bringing a session up (spec 05 §2 steps 1–7, spec 04 §1 "Spawning"): the checks, the
//! fresh/resume decision, the system prompt, the environment, the spawn, the markers.
//!
//! The router thread only decides ([`Router::plan_launch`]) and tracks the launch in
//! [`Tracked::Launching`](super::state::Tracked); a short-lived launcher thread
//! does the blocking part ([`prepare_spawn`], [`start_session`], the markers) and reports
//! [`RouterMsg::Launched`], which [`Router::on_launched`] turns into a booting session.

use std::sync::Arc;

use super::decide::{launched, LaunchFor, LaunchedFacts, LaunchedStep};
use super::endpoint::{delivery_for, Job};
use super::launch_plan::{self, LaunchFacts};
use super::sess_state::SessState;
use super::state::{Early, Launching, WakeLine};
use super::{logged, Router, RouterMsg, Sess};
use crate::config::Config;
use crate::daemon::lifecycle::{ModeRequest, PeerMarkers, WakeDecision};
use crate::daemon::route::{stopped_refusal, Refusal};
use crate::eventbus::TappedLog;
use crate::eventlog::Event;
use crate::markers::{Flag, Markers, SessionRecord};
use crate::names::Identity;
use crate::paths::Paths;
use crate::profile::Profile;
use crate::protocol::Code;
use crate::registry::{Registry, RegistryPeer};
use crate::runtime::{Adapter, ConversationNaming, LaunchCtx, RuntimeKind, WakeMode};
use crate::session::env::{session_env, EnvInput};
use crate::session::handle::{Cause, Delivery, EventSink, SessionCmd, SessionHandle};
use crate::session::spawn::SpawnSpec;
use crate::session::thread::{self, SessionConfig};

/// The refusal of a launch that failed: `peer "<p>" offline and wake failed: <reason>`.
pub(crate) fn offline(personality: &str, reason: impl std::fmt::Display) -> Refusal {
    Refusal {
        code: Code::Offline,
        error: format!("peer \"{personality}\" offline and wake failed: {reason}"),
    }
}

impl Router {
    /// Launch a session for the head of `identity`'s queue (a message or a wake job): the
    /// router decides here; the launcher thread does the rest and reports
    /// [`RouterMsg::Launched`].
    pub(crate) fn launch_for_head(
        &mut self,
        identity: &Identity,
        mode_req: ModeRequest,
    ) -> Result<(), Refusal> {
        let topic = match self.queues.head(identity) {
            Some(Job::Send(j)) => j.prepared.envelope.topic.clone(),
            _ => None,
        };
        // The fresh/resume decision reads the topic files, and a fresh launch empties them.
        self.topics.sync(&self.paths);
        let session = self.next_id();
        let plan = self.plan_launch(identity, mode_req, topic, session)?;
        // The head is the launch's now: a message rides it (in flight), a wake waits for it.
        if let Some(ep) = self.queues.endpoint_mut(identity) {
            match ep.queue.front_mut() {
                Some(Job::Send(j)) if Some(j.id) == plan.first_job => ep.inflight = Some(j.id),
                Some(Job::Wake(w)) => w.launched = true,
                _ => {}
            }
        }
        self.begin_launch(plan, LaunchFor::Head);
        Ok(())
    }

    /// Track the launch of `plan` and hand its blocking part ([`prepare_spawn`],
    /// [`start_session`]) to a short-lived launcher thread, guarded like the send-prep
    /// worker: its result, or its panic as a refusal, comes back as
    /// [`RouterMsg::Launched`].
    pub(crate) fn begin_launch(&mut self, plan: LaunchPlan, purpose: LaunchFor) {
        let ident = plan.ident.clone();
        let session = plan.session;
        let token = crate::fsutil::random_hex(32);
        self.live.begin_launch(
            ident.clone(),
            Launching {
                session,
                kind: plan.adapter.kind(),
                token: token.clone(),
                purpose,
                state: SessState::Booting,
                started: self.now,
                wake: WakeLine {
                    mode: plan.mode,
                    conversation: plan.conversation.clone(),
                    decision: plan.decision,
                },
                first_job: plan.first_job,
                early: Early::default(),
                ephemeral: plan.ephemeral,
            },
        );
        let ctx = LaunchEnv {
            paths: self.paths.clone(),
            cfg: self.cfg.clone(),
            port: self.info.port,
            fleet_secret: self.info.fleet_secret.clone(),
            sessions: self.sessions.clone(),
            exits_log: self.exits_log.clone(),
            woke_at_ms: self.now.ms,
            ids: self.ids.clone(),
        };
        let tx = self.tx.clone();
        let for_thread = ident.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("launch-{ident}"))
            .spawn(move || {
                // A panic here must still reach the router (the panic hook logs it).
                let result = crate::daemon::guard::catch(|| run_launch(&plan, token, &ctx))
                    .unwrap_or_else(|panic| {
                        Err(offline(
                            &plan.ident.personality,
                            format!("internal error: the launch failed ({panic})"),
                        ))
                    });
                if result.is_ok() {
                    crate::daemon::test_hooks::on_launch_report(&for_thread.personality);
                }
                let _ = tx.send(RouterMsg::Launched {
                    identity: for_thread,
                    session,
                    result: Box::new(result),
                });
            });
        if let Err(e) = spawned {
            let refusal = offline(
                &ident.personality,
                format!("cannot start a launcher thread: {e}"),
            );
            self.on_launched(&ident, session, Err(refusal));
        }
    }

    /// A launcher thread reported: track the new session (ending it at once if the router
    /// ended the identity meanwhile), or fail what waited for it, as [`launched`] decides.
    pub(crate) fn on_launched(
        &mut self,
        identity: &Identity,
        session: u64,
        result: Result<Spawned, Refusal>,
    ) {
        let Some(l) = self.live.end_launch(identity, session, result.is_err()) else {
            // Not the launch the router tracks (it gave up on it at the shutdown deadline).
            if let Ok(s) = result {
                s.handle.send(SessionCmd::Kill(Cause::Shutdown));
            }
            return;
        };
        let inflight = self.queues.endpoint(identity).and_then(|e| e.inflight);
        let ending = l.state.ending_cause();
        let step = launched(&LaunchedFacts {
            purpose: l.purpose,
            started: result.is_ok(),
            ending,
            head_waits: ending.is_none() || (l.first_job.is_some() && inflight == l.first_job),
        });
        let spawned = match result {
            Ok(s) => s,
            Err(refusal) => return self.launch_failed(identity, step, refusal),
        };
        if let Some(ep) = self.queues.endpoint_mut(identity) {
            if let Some(Job::Send(j)) = ep.queue.front_mut() {
                if Some(j.id) == l.first_job {
                    j.woke = true;
                }
            }
        }
        match l.purpose {
            LaunchFor::Head => {
                let mut ev = Event::new("wake")
                    .field("identity", identity)
                    .field("mode", l.wake.mode.as_str());
                if let Some(d) = l.wake.decision {
                    ev = ev.field("cause", d.cause);
                }
                let ev = ev.opt("conversation", l.wake.conversation.as_deref());
                self.lifecycle(ev.field("pid", spawned.pid.to_string()));
            }
            LaunchFor::AlwaysOn => self.lifecycle(
                Event::new("always-on")
                    .field("identity", identity)
                    .field("action", "started")
                    .field("pid", spawned.pid.to_string()),
            ),
        }
        let handle = spawned.handle.clone();
        self.live.register(Sess {
            id: session,
            identity: identity.clone(),
            handle: spawned.handle,
            pid: spawned.pid,
            kind: l.kind,
            state: l.state,
            woke_at_ms: l.started.ms,
            started: l.started.at,
            last_delivery_ms: None,
            attached: 0,
            token: l.token,
            status: None,
            mode: l.wake.mode,
            mcp_up: l.early.mcp_up,
            ephemeral: l.ephemeral,
            cut: Vec::new(),
        });
        if l.early.mcp_up {
            handle.send(SessionCmd::McpUp);
        }
        if let LaunchedStep::EndAtOnce(cause) = step {
            handle.send(SessionCmd::Kill(cause));
        }
        for ev in l.early.events {
            self.on_session_event(ev);
        }
    }

    /// A launch that did not start a session: answer what waited for it.
    fn launch_failed(&mut self, identity: &Identity, step: LaunchedStep, refusal: Refusal) {
        // A `stop` waiting for this identity to be gone is answered now.
        self.live.settle_gone_waiters(identity);
        match step {
            LaunchedStep::FailHead { stopped } => {
                let r = if stopped {
                    stopped_refusal(identity)
                } else {
                    refusal
                };
                self.fail_head(identity, r);
            }
            LaunchedStep::StartFailed { back_off } => {
                self.always_on_start_failed(identity, &refusal, back_off)
            }
            LaunchedStep::Gone | LaunchedStep::Booting | LaunchedStep::EndAtOnce(_) => {}
        }
        if self.shutdown.is_none() {
            self.pump(identity);
        }
    }

    /// The router's part of a launch: [`Router::launch_facts`] reads what the decision needs,
    /// the pure [`launch_plan::plan`] decides (the checks, fresh/resume, the first delivery),
    /// and the plan is assembled with the first delivery rendered.
    pub(crate) fn plan_launch(
        &self,
        ident: &Identity,
        mode_req: ModeRequest,
        topic: Option<String>,
        session: u64,
    ) -> Result<LaunchPlan, Refusal> {
        let p = ident.personality.as_str();
        let registry = Registry::load(&self.paths).map_err(|e| offline(p, e))?;
        let adapter = self.adapter(&ident.runtime);
        let facts = self.launch_facts(ident, mode_req, topic, &registry, &adapter);
        let choice = launch_plan::plan(&facts, &self.cfg, self.now)?;
        let adapter = adapter.map_err(|e| offline(p, e))?;
        let conversation = launch_conversation(
            choice.mode,
            adapter.conversation_naming(),
            facts.markers.conversation,
        );
        let first = choice.first.and_then(|(id, seed)| {
            match self.queues.head(ident) {
                // Only agents get a first delivery: `j.kind` is `Agent` here.
                Some(Job::Send(j)) if j.id == id => Some(delivery_for(
                    j,
                    seed.as_deref(),
                    &self.cfg,
                    Some(self.cfg.ready_gate),
                )),
                _ => None,
            }
        });
        Ok(LaunchPlan {
            ident: ident.clone(),
            session,
            registry,
            peer: facts
                .peer
                .ok_or_else(|| offline(p, "not in the peers index"))?,
            adapter,
            mode: choice.mode,
            conversation,
            decision: choice.decision,
            first_job: first.as_ref().map(|d| d.id),
            first,
            ephemeral: choice.ephemeral,
            gated: choice.gated,
            tool_timeout: crate::runtime::mcp_tool_timeout(self.cfg.send_timeout),
        })
    }

    /// What [`launch_plan::plan`] reads about launching `ident`: its registry entry, its
    /// adapter's kind, its markers, its folder and profile, the queue head.
    fn launch_facts(
        &self,
        ident: &Identity,
        mode_req: ModeRequest,
        topic: Option<String>,
        registry: &Registry,
        adapter: &Result<Arc<dyn Adapter>, crate::runtime::RuntimeError>,
    ) -> LaunchFacts {
        let peer = registry.find(&ident.personality).cloned();
        let markers = Markers::new(&self.paths, ident);
        let profile = peer
            .as_ref()
            .and_then(|peer| Profile::read(&peer.cwd).ok().flatten());
        LaunchFacts {
            ident: ident.clone(),
            mode_req,
            topic,
            runtime: adapter
                .as_ref()
                .map(|a| (a.kind(), a.conversation_naming()))
                .map_err(ToString::to_string),
            stopped: markers.is_set(Flag::Stopped),
            deaths_ms: markers.deaths(),
            markers: PeerMarkers::read(&markers),
            folder_exists: peer.as_ref().is_some_and(|peer| peer.cwd.is_dir()),
            ephemeral: profile.as_ref().is_some_and(Profile::is_ephemeral),
            gated: profile.as_ref().is_some_and(Profile::is_gated),
            initial_prompt: profile.and_then(|pr| pr.initial_prompt),
            head_send: match self.queues.head(ident) {
                Some(Job::Send(j)) => Some(j.id),
                _ => None,
            },
            peer,
        }
    }
}

/// What the router decided for one launch; everything the blocking part needs.
pub(crate) struct LaunchPlan {
    ident: Identity,
    /// The new session's id.
    session: u64,
    /// The registry as read for the checks (the system prompt lists the other peers).
    registry: Registry,
    peer: RegistryPeer,
    adapter: Arc<dyn Adapter>,
    mode: WakeMode,
    /// The conversation the session starts (a chosen id) or resumes, when its id is known
    /// at launch (issue 32); `None` for a runtime whose id is learned later, or that does
    /// not name its conversations.
    conversation: Option<String>,
    /// The fresh/resume decision (agents only).
    decision: Option<WakeDecision>,
    /// The queued message that rides the wake as its first delivery (agents only).
    first: Option<Delivery>,
    first_job: Option<u64>,
    /// The peer is an ephemeral worker.
    ephemeral: bool,
    /// A gated agent (`approval_mode: "gated"`): the approval timeout its launch gives the
    /// permission hook (spec 10 §4).
    gated: Option<std::time::Duration>,
    /// The tool-call timeout the agent's MCP client gives iapeer's server: the daemon's send
    /// deadline plus a margin ([`crate::runtime::mcp_tool_timeout`]).
    tool_timeout: std::time::Duration,
}

/// The conversation a launch starts or resumes, when known at launch (pure; issue 32): a
/// fresh one gets a new id where iapeer chooses it, a resume names the recorded one; a
/// runtime that learns its ids, or keeps one conversation per folder, has none yet.
fn launch_conversation(
    mode: WakeMode,
    naming: ConversationNaming,
    recorded: Option<String>,
) -> Option<String> {
    match (mode, naming) {
        (_, ConversationNaming::Folder) => None,
        (WakeMode::Fresh, ConversationNaming::Chosen) => Some(crate::fsutil::random_uuid()),
        (WakeMode::Fresh, ConversationNaming::Learned) => None,
        (WakeMode::Resume, _) => recorded,
    }
}

impl LaunchPlan {
    /// The adapter the session uses: bound to its conversation when that is known
    /// ([`Adapter::for_conversation`]).
    fn session_adapter(&self) -> Arc<dyn Adapter> {
        self.conversation
            .as_deref()
            .and_then(|id| self.adapter.for_conversation(id))
            .unwrap_or_else(|| self.adapter.clone())
    }
}

/// What the launcher thread needs besides the plan (owned copies of router state).
struct LaunchEnv {
    paths: Paths,
    cfg: Config,
    port: u16,
    /// The fleet API's secret ([`super::DaemonInfo::fleet_secret`]).
    fleet_secret: Option<String>,
    /// Where the session thread sends its events (the router's inbox).
    sessions: EventSink,
    /// `exits.log`, tapped into the event bus (the session thread writes it).
    exits_log: TappedLog,
    /// When the router decided the launch (`woke_at` of the session record).
    woke_at_ms: u64,
    /// The message-id ledger the session records begun deliveries in.
    ids: std::sync::Arc<crate::msgids::Ledger>,
}

/// A started session, as the launcher thread hands it to the router.
pub struct Spawned {
    /// Commands to the session thread.
    pub(crate) handle: SessionHandle,
    /// The child's pid.
    pub(crate) pid: u32,
}

/// The blocking part of a launch, on the launcher thread: [`prepare_spawn`], the markers
/// the decision consumes, [`start_session`], the session record and (fresh agents) the
/// topic list.
fn run_launch(plan: &LaunchPlan, token: String, env: &LaunchEnv) -> Result<Spawned, Refusal> {
    let ident = &plan.ident;
    refresh_mcp_config(plan, env.cfg.bearer.is_some());
    let bearer = crate::runtime::router::handed_bearer(
        plan.adapter.kind(),
        &ident.runtime,
        env.cfg.bearer.as_deref(),
        env.fleet_secret.as_deref(),
    );
    let adapter = plan.session_adapter();
    let spec = prepare_spawn(plan, &adapter, &token, bearer, &env.paths, env.port)?;
    // The decision is final now: consume the markers it read.
    let markers = Markers::new(&env.paths, ident);
    if let Some(d) = plan.decision {
        if d.consume_fresh_next {
            logged(markers.clear(Flag::FreshNext));
        }
        if d.consume_idle_reaped {
            logged(markers.clear(Flag::IdleReaped));
        }
    }
    // A new ephemeral worker starts unarmed (spec 05 §6).
    if plan.ephemeral {
        logged(markers.clear(Flag::EphemeralArmed));
    }
    let (handle, pid) = start_session(plan, adapter, spec, env)?;
    // The child runs now: whatever happens to the record keeping, the router must get the
    // session (a panic here is logged by the hook and the launch still reports it).
    let _ = crate::daemon::guard::catch(|| {
        logged(markers.write_session(&SessionRecord {
            identity: ident.to_string(),
            runtime: ident.runtime.clone(),
            personality: ident.personality.clone(),
            cwd: plan.peer.cwd.clone(),
            woke_at: env.woke_at_ms,
            pid,
        }));
        if plan.mode == WakeMode::Fresh && plan.adapter.kind() == RuntimeKind::Agent {
            logged(markers.reset_topics());
            // The topics' conversation: the one chosen now, or none until it is learned.
            logged(match plan.conversation.as_deref() {
                Some(id) => markers.write_conversation(id),
                None => markers.clear_conversation(),
            });
        }
    });
    Ok(Spawned { handle, pid })
}

/// Bring the peer's MCP configuration to the current form before the child reads it (a team
/// moved over from the original tool works from its first wake, issue 11 item 1). A change is
/// logged; a failure is logged and the launch goes on (the agent then lacks `send_to_peer`,
/// which the log line explains).
fn refresh_mcp_config(plan: &LaunchPlan, bearer: bool) {
    let ident = &plan.ident;
    let refreshed = crate::runtime::refresh_peer(
        &ident.runtime,
        &plan.peer.cwd,
        &ident.personality,
        bearer,
        plan.tool_timeout,
    );
    match refreshed {
        Ok(true) => log::info!("{ident}: brought its MCP configuration to the current form"),
        Ok(false) => {}
        Err(e) => {
            log::warn!("{ident}: cannot bring its MCP configuration to the current form: {e}")
        }
    }
}

/// The file work of a launch, which reads no router state: the system prompt (assembled
/// and written when the runtime takes one), `launch.env`, the adapter's command and the
/// child's environment (with its session `token` and the `bearer` it is handed).
fn prepare_spawn(
    plan: &LaunchPlan,
    adapter: &Arc<dyn Adapter>,
    token: &str,
    bearer: Option<&str>,
    paths: &Paths,
    port: u16,
) -> Result<SpawnSpec, Refusal> {
    let (ident, peer) = (&plan.ident, &plan.peer);
    let p = ident.personality.as_str();
    let prompt_path = if adapter.wants_system_prompt() {
        let facts = crate::prompt::HostFacts::detect();
        let home = crate::paths::home_dir();
        let remote = crate::roster::remote::prompt_peers(paths);
        let text = crate::prompt::assemble(crate::prompt::compose(
            paths,
            peer,
            &plan.registry,
            &remote,
            &facts,
            home.as_deref(),
        ));
        Some(
            crate::prompt::write(paths, ident, &text)
                .map_err(|e| offline(p, format!("cannot write the system prompt: {e}")))?,
        )
    } else {
        None
    };
    let launch_env = crate::launch_env::read(&peer.cwd, &ident.runtime);
    let ctx = LaunchCtx {
        paths,
        cwd: &peer.cwd,
        mode: plan.mode,
        system_prompt: prompt_path.as_deref(),
        launch_env: &launch_env,
        port,
        gated: plan.gated,
        bearer: bearer.is_some(),
        tool_timeout: plan.tool_timeout,
    };
    let mut cmd = adapter.command(&ctx).map_err(|e| offline(p, e))?;
    // An agent CLI is looked for at every launch, so one installed after the daemon started
    // is found (issue 30 item 1).
    let mut path_first = None;
    if crate::runtime::agent_program::is_located(&ident.runtime) {
        let found = crate::runtime::agent_program::locate(&ident.runtime);
        if let Some(why) = found.refusal() {
            return Err(offline(p, why));
        }
        cmd.program = found.program.unwrap_or_default().into_os_string();
        path_first = found.path_first;
    }
    let home = crate::paths::home_dir();
    let mut env = session_env(&EnvInput {
        inherited: std::env::vars().collect(),
        launch: &launch_env,
        identity: ident,
        token,
        bearer,
        root: paths.root(),
        port,
        home: home.as_deref(),
        extra: &cmd.extra_env,
    });
    if let Some(dir) = path_first {
        crate::session::env::put_first_on_path(&mut env, &dir);
    }
    Ok(SpawnSpec {
        program: cmd.program,
        args: cmd.args,
        cwd: peer.cwd.clone(),
        env,
    })
}

/// Fork the child and start its session thread (which owns it from here on).
fn start_session(
    plan: &LaunchPlan,
    adapter: Arc<dyn Adapter>,
    spec: SpawnSpec,
    env: &LaunchEnv,
) -> Result<(SessionHandle, u32), Refusal> {
    let (paths, cfg, sessions, exits_log) = (&env.paths, &env.cfg, &env.sessions, &env.exits_log);
    let identity = plan.ident.to_string();
    let scfg = SessionConfig {
        session: plan.session,
        identity: identity.clone(),
        cwd: plan.peer.cwd.clone(),
        adapter,
        conversation: plan.conversation.clone(),
        pane_log: paths.pane_log(&identity),
        exits_log: exits_log.clone(),
        boot_deadline: cfg.boot_deadline,
        human_wait: cfg.approval_timeout,
        first: plan.first.clone(),
        composer_hold: cfg.composer_hold,
        stall: cfg.send_stall,
        ids: Some(env.ids.clone()),
        gated: plan.gated.is_some(),
        late_answers: crate::daemon::test_hooks::late_query_answers(),
    };
    thread::start(scfg, &spec, sessions.clone()).map_err(|e| {
        offline(
            &plan.ident.personality,
            format!("cannot start {}: {e}", spec.program.to_string_lossy()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_knows_its_conversation_where_the_runtime_lets_it() {
        use ConversationNaming::{Chosen, Folder, Learned};
        let recorded = || Some("3f2c1a5e-1111-4222-8333-444455556666".to_string());
        let chosen = launch_conversation(WakeMode::Fresh, Chosen, recorded()).unwrap();
        assert!(crate::markers::valid_conversation_id(&chosen));
        assert_ne!(chosen, recorded().unwrap(), "a fresh start gets a new id");
        assert_eq!(
            launch_conversation(WakeMode::Fresh, Learned, recorded()),
            None
        );
        assert_eq!(
            launch_conversation(WakeMode::Resume, Chosen, recorded()),
            recorded()
        );
        assert_eq!(
            launch_conversation(WakeMode::Resume, Learned, recorded()),
            recorded()
        );
        assert_eq!(launch_conversation(WakeMode::Resume, Learned, None), None);
        assert_eq!(
            launch_conversation(WakeMode::Resume, Folder, recorded()),
            None
        );
    }
}

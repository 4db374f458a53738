//! Bringing a session up (spec 05 §2 steps 1–7, spec 04 §1 "Spawning"): the checks, the
//! fresh/resume decision, the system prompt, the environment, the spawn, the markers.

use std::sync::Arc;

use crossbeam_channel::Sender;

use super::decide::crash_looping;
use super::endpoint::{delivery_for, Job};
use super::{logged, Router, Sess};
use crate::config::Config;
use crate::daemon::lifecycle::{decide_mode, ModeRequest, WakeDecision, WakeFacts};
use crate::daemon::route::{stopped_refusal, Refusal};
use crate::eventlog::Event;
use crate::markers::{Flag, Markers, SessionRecord};
use crate::names::Identity;
use crate::paths::Paths;
use crate::profile::Profile;
use crate::protocol::Code;
use crate::registry::{Registry, RegistryPeer};
use crate::runtime::{Adapter, LaunchCtx, RuntimeKind, WakeMode};
use crate::session::env::{session_env, EnvInput};
use crate::session::handle::{Delivery, SessionEvent, SessionHandle};
use crate::session::spawn::SpawnSpec;
use crate::session::thread::{self, SessionConfig};

fn offline(personality: &str, reason: impl std::fmt::Display) -> Refusal {
    Refusal {
        code: Code::Offline,
        error: format!("peer \"{personality}\" offline and wake failed: {reason}"),
    }
}

impl Router {
    /// Launch a session for the head of `identity`'s queue (a message or a wake job).
    pub(crate) fn launch_for_head(
        &mut self,
        identity: &Identity,
        mode_req: ModeRequest,
    ) -> Result<(), Refusal> {
        let topic = match self
            .queues
            .endpoints
            .get(identity)
            .and_then(|e| e.queue.front())
        {
            Some(Job::Send(j)) => j.prepared.envelope.topic.clone(),
            _ => None,
        };
        let session = self.next_id();
        let (sess, decision, first_job) = self.launch(identity, mode_req, topic, session)?;
        let mode = decision.map(|d| d.mode).unwrap_or(WakeMode::Fresh);
        if let Some(ep) = self.queues.endpoints.get_mut(identity) {
            match ep.queue.front_mut() {
                Some(Job::Send(j)) if Some(j.id) == first_job => {
                    j.woke = true;
                    ep.inflight = Some(j.id);
                }
                Some(Job::Wake(w)) => w.launched = true,
                _ => {}
            }
        }
        let mut ev = Event::new("wake")
            .field("identity", identity)
            .field("mode", mode.as_str());
        if let Some(d) = decision {
            ev = ev.field("cause", d.cause);
        }
        self.lifecycle(ev.field("pid", sess.pid.to_string()));
        self.live.register(sess);
        Ok(())
    }

    /// Checks, decision and spawn. Returns the session, the decision (agents only) and the
    /// id of the queued send that rides the wake as its first message.
    ///
    /// Three phases: [`Router::plan_launch`] decides (which peer, mode, adapter, first
    /// delivery) from the router's state; [`prepare_spawn`] does the file work that needs
    /// no router state (system prompt, `launch.env`, the command and its environment);
    /// [`start_session`] forks the child and its session thread. All three run on the
    /// router thread today; the last two take no `&Router`.
    pub(crate) fn launch(
        &mut self,
        ident: &Identity,
        mode_req: ModeRequest,
        topic: Option<String>,
        session: u64,
    ) -> Result<(Sess, Option<WakeDecision>, Option<u64>), Refusal> {
        let plan = self.plan_launch(ident, mode_req, topic, session)?;
        let ready = prepare_spawn(&plan, &self.paths, self.info.port)?;
        // The decision is final now: consume the markers it read.
        let markers = Markers::new(&self.paths, ident);
        if let Some(d) = plan.decision {
            if d.consume_fresh_next {
                logged(markers.clear(Flag::FreshNext));
            }
            if d.consume_idle_reaped {
                logged(markers.clear(Flag::IdleReaped));
            }
        }
        let (handle, pid) =
            start_session(&plan, ready.spec, &self.paths, &self.cfg, &self.session_tx)?;
        let now_ms = self.now.ms;
        logged(markers.write_session(&SessionRecord {
            identity: ident.to_string(),
            runtime: ident.runtime.clone(),
            personality: ident.personality.clone(),
            cwd: plan.peer.cwd.clone(),
            woke_at: now_ms,
            pid,
        }));
        let kind = plan.adapter.kind();
        if plan.mode == WakeMode::Fresh && kind == RuntimeKind::Agent {
            logged(markers.reset_topics());
        }
        let sess = Sess {
            id: session,
            identity: ident.clone(),
            handle,
            pid,
            kind,
            state: super::SessState::Booting,
            woke_at_ms: now_ms,
            started: self.now.at,
            last_delivery_ms: None,
            attached: 0,
            token: ready.token,
            status: None,
            mode: plan.mode,
            mcp_up: false,
        };
        Ok((sess, plan.decision, plan.first_job))
    }

    /// The router's part of a launch: the checks (registered, declared, allowed, adapter,
    /// not stopped, folder, crash loop), the fresh/resume decision and the first delivery.
    fn plan_launch(
        &self,
        ident: &Identity,
        mode_req: ModeRequest,
        topic: Option<String>,
        session: u64,
    ) -> Result<LaunchPlan, Refusal> {
        let p = ident.personality.as_str();
        let registry = Registry::load(&self.paths).map_err(|e| offline(p, e))?;
        let peer = registry.find(p).cloned().ok_or_else(|| Refusal {
            code: Code::NotRegistered,
            error: format!("peer \"{p}\" is not in the iapeer peers index"),
        })?;
        if !peer.declares(&ident.runtime) {
            return Err(Refusal {
                code: Code::InvalidArgument,
                error: format!(
                    "peer \"{p}\" does not declare runtime \"{}\"",
                    ident.runtime
                ),
            });
        }
        let nature = peer.nature();
        if !nature.allowed_on(&ident.runtime) {
            return Err(Refusal {
                code: Code::InvalidArgument,
                error: format!(
                    "a peer of intelligence {nature} cannot run on {} — fix \"intelligence\" in {} (iapeer verify shows it)",
                    ident.runtime,
                    crate::paths::peer::profile(&peer.cwd).display()
                ),
            });
        }
        let adapter = self.adapter(&ident.runtime).map_err(|e| offline(p, e))?;
        let markers = Markers::new(&self.paths, ident);
        if markers.is_set(Flag::Stopped) {
            return Err(stopped_refusal(ident));
        }
        if !peer.cwd.is_dir() {
            return Err(offline(
                p,
                format!("working folder {} does not exist", peer.cwd.display()),
            ));
        }
        let deaths = markers.deaths();
        if crash_looping(
            adapter.kind(),
            &deaths,
            self.now,
            self.cfg.crashloop_max,
            self.cfg.crashloop_window,
        ) {
            return Err(offline(
                p,
                format!(
                    "crash-looping: {} deaths in {}s — see exits.log; iapeer new {p} to force",
                    self.cfg.crashloop_max,
                    self.cfg.crashloop_window.as_secs()
                ),
            ));
        }
        let profile = Profile::read(&peer.cwd).ok().flatten();
        let decision = (adapter.kind() == RuntimeKind::Agent).then(|| {
            let facts = WakeFacts {
                fresh_next: markers.is_set(Flag::FreshNext),
                ephemeral: profile.as_ref().is_some_and(|pr| pr.is_ephemeral()),
                idle_reaped: markers.is_set(Flag::IdleReaped),
                human_facing: peer.telegram_bot().is_some()
                    || peer
                        .interfaces
                        .as_ref()
                        .is_some_and(|i| i.contains_key("telegram")),
                topic: topic.clone(),
                topics: markers.topics(),
            };
            decide_mode(mode_req, &facts)
        });
        let mode = decision.map(|d| d.mode).unwrap_or(WakeMode::Fresh);
        let (first, first_job) = match self
            .queues
            .endpoints
            .get(ident)
            .and_then(|e| e.queue.front())
        {
            Some(Job::Send(j)) if adapter.kind() == RuntimeKind::Agent => {
                let seed = match mode {
                    WakeMode::Fresh => profile.as_ref().and_then(|pr| pr.initial_prompt.clone()),
                    WakeMode::Resume => None,
                };
                let d = delivery_for(
                    j.id,
                    &j.prepared,
                    RuntimeKind::Agent,
                    seed.as_deref(),
                    &self.cfg,
                    Some(self.cfg.ready_gate),
                );
                (Some(d), Some(j.id))
            }
            _ => (None, None),
        };
        Ok(LaunchPlan {
            ident: ident.clone(),
            session,
            registry,
            peer,
            adapter,
            mode,
            decision,
            first,
            first_job,
        })
    }
}

/// What the router decided for one launch; everything the blocking part needs.
struct LaunchPlan {
    ident: Identity,
    /// The new session's id.
    session: u64,
    /// The registry as read for the checks (the system prompt lists the other peers).
    registry: Registry,
    peer: RegistryPeer,
    adapter: Arc<dyn Adapter>,
    mode: WakeMode,
    /// The fresh/resume decision (agents only).
    decision: Option<WakeDecision>,
    /// The queued message that rides the wake as its first delivery (agents only).
    first: Option<Delivery>,
    first_job: Option<u64>,
}

/// The child's command line and environment, and its MCP session token.
struct SpawnReady {
    spec: SpawnSpec,
    token: String,
}

/// The file work of a launch, which reads no router state: the system prompt (assembled
/// and written when the runtime takes one), `launch.env`, the adapter's command, a fresh
/// session token and the child's environment.
fn prepare_spawn(plan: &LaunchPlan, paths: &Paths, port: u16) -> Result<SpawnReady, Refusal> {
    let (ident, peer) = (&plan.ident, &plan.peer);
    let p = ident.personality.as_str();
    let prompt_path = if plan.adapter.wants_system_prompt() {
        let facts = crate::prompt::HostFacts::detect();
        let home = crate::paths::home_dir();
        let text = crate::prompt::assemble(paths, peer, &plan.registry, &facts, home.as_deref());
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
    };
    let cmd = plan.adapter.command(&ctx).map_err(|e| offline(p, e))?;
    let token = crate::fsutil::random_hex(32);
    let home = crate::paths::home_dir();
    let env = session_env(&EnvInput {
        inherited: std::env::vars().collect(),
        launch: &launch_env,
        identity: ident,
        token: &token,
        root: paths.root(),
        port,
        home: home.as_deref(),
        extra: &cmd.extra_env,
    });
    let spec = SpawnSpec {
        program: cmd.program,
        args: cmd.args,
        cwd: peer.cwd.clone(),
        env,
    };
    Ok(SpawnReady { spec, token })
}

/// Fork the child and start its session thread (which owns it from here on).
fn start_session(
    plan: &LaunchPlan,
    spec: SpawnSpec,
    paths: &Paths,
    cfg: &Config,
    session_tx: &Sender<SessionEvent>,
) -> Result<(SessionHandle, u32), Refusal> {
    let identity = plan.ident.to_string();
    let scfg = SessionConfig {
        session: plan.session,
        identity: identity.clone(),
        cwd: plan.peer.cwd.clone(),
        adapter: plan.adapter.clone(),
        pane_log: paths.pane_log(&identity),
        exits_log: paths.exits_log(),
        boot_deadline: cfg.boot_deadline,
        first: plan.first.clone(),
    };
    thread::start(scfg, &spec, session_tx.clone()).map_err(|e| {
        offline(
            &plan.ident.personality,
            format!("cannot start {}: {e}", spec.program.to_string_lossy()),
        )
    })
}

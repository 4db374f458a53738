//! Control requests other than `send` (spec 02 §2, spec 05 §5): the dispatch of each
//! request to the file that owns its concern (`stop.rs`, `report.rs`, `verbs.rs`), and the
//! resolution of a request's target peer and runtime from the registry.

use super::Router;
use crate::daemon::lifecycle::ModeRequest;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::{undeclared_runtime_refusal, Refusal};
use crate::names::Identity;
use crate::protocol::{Code, Reply, Request};
use crate::registry::{Registry, RegistryPeer};
use crate::runtime::RuntimeKind;

pub(crate) fn refusal(code: Code, error: impl Into<String>) -> Refusal {
    Refusal {
        code,
        error: error.into(),
    }
}

/// Answer `reply` with what `work` returns, on a thread of its own (work that may block, which
/// the router thread must not do). A panic in `work` is logged and answered as `internal`.
fn spawn_answer(reply: ReplyTo, work: impl FnOnce() -> Reply + Send + 'static) {
    let spawned = std::thread::Builder::new()
        .name("answer".into())
        .spawn(move || match crate::daemon::guard::catch(work) {
            Ok(r) => reply.finish(r),
            Err(panic) => {
                log::error!("answering a request panicked: {panic}");
                reply.finish(refusal(Code::Internal, panic))
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot start a thread to answer a request: {e}");
    }
}

/// The agent runtimes' programs as this process finds them, for the `status` answer: the
/// built-in agents' (`runtime::agent_program`, which may ask the login shell: never on the
/// router thread), then the installed terminal runtimes'.
fn agent_programs(paths: &crate::paths::Paths) -> Vec<crate::protocol::AgentProgram> {
    let mut agents = crate::runtime::agent_program::views();
    agents.extend(crate::runtime::terminal::views(paths));
    agents
}

impl Router {
    pub(crate) fn on_op(&mut self, req: Request, reply: ReplyTo) {
        let result = match req {
            Request::List => Ok(self.op_list().into()),
            Request::Status => {
                // Looking for the agent programs may ask the login shell: not on this thread.
                let mut status = self.op_status();
                let paths = self.paths.clone();
                return spawn_answer(reply, move || {
                    status.agents = agent_programs(&paths);
                    status.into()
                });
            }
            Request::LiveRuntime { personality } => self.op_live_runtime(&personality),
            Request::Stop {
                personality,
                runtime,
                all,
                everyone,
            } => match self.op_stop(personality.as_deref(), runtime.as_deref(), all, everyone) {
                // Answer once the sessions are gone, so `stop` returning means stopped.
                Ok((answer, ending)) => return self.reply_when_gone(reply, answer.into(), ending),
                Err(r) => Err(r),
            },
            Request::Start {
                personality,
                runtime,
                all,
            } => self
                .op_start(personality.as_deref(), runtime.as_deref(), all)
                .map(Reply::from),
            Request::Forget { personality } => Ok(self.op_forget(&personality).into()),
            Request::Wake {
                personality,
                runtime,
            } => {
                return self.op_wake(
                    &personality,
                    runtime.as_deref(),
                    ModeRequest::Auto,
                    false,
                    reply,
                )
            }
            Request::Attach {
                personality,
                runtime,
                fresh,
                no_attach,
            } => {
                let mode = if fresh {
                    ModeRequest::Fresh
                } else {
                    ModeRequest::Resume
                };
                return self.op_wake(&personality, runtime.as_deref(), mode, !no_attach, reply);
            }
            Request::New {
                personality,
                runtime,
            } => return self.op_new(&personality, runtime.as_deref(), reply),
            Request::Restart {
                personality,
                runtime,
            } => return self.op_restart(&personality, runtime.as_deref(), reply),
            Request::Interrupt {
                personality,
                runtime,
            } => self.op_interrupt(&personality, runtime.as_deref()),
            Request::Compact {
                personality,
                runtime,
            } => return self.op_compact(&personality, runtime.as_deref(), reply),
            Request::SelfFresh { identity } => self.op_self_fresh(&identity),
            Request::Screen {
                personality,
                runtime,
            } => return self.op_screen(&personality, runtime.as_deref(), reply),
            Request::Approvals { wait_ms, since_ms } => {
                return self.op_approvals_wait(wait_ms, since_ms.unwrap_or(0), reply)
            }
            Request::Approve { id, option } => {
                return self.op_decide_approval(&id, true, None, option, reply)
            }
            Request::Deny { id, reason } => {
                return self.op_decide_approval(&id, false, reason, None, reply)
            }
            Request::Ping
            | Request::Send { .. }
            | Request::ConfirmSend { .. }
            | Request::ApprovalRequest { .. } => {
                unreachable!("handled by on_request")
            }
        };
        match result {
            Ok(v) => reply.finish(v),
            Err(r) => reply.finish(r),
        }
    }

    pub(crate) fn registry(&self) -> Result<Registry, Refusal> {
        Registry::load(&self.paths).map_err(|e| refusal(Code::Internal, e.to_string()))
    }

    pub(crate) fn peer<'r>(registry: &'r Registry, p: &str) -> Result<&'r RegistryPeer, Refusal> {
        registry.find(p).ok_or_else(|| {
            refusal(
                Code::NotRegistered,
                format!("peer \"{p}\" is not in the iapeer peers index"),
            )
        })
    }

    /// The runtime a control verb acts on (spec 05 §5): the requested one (must be declared),
    /// else the only live runtime, else the default runtime.
    pub(crate) fn control_runtime(
        &self,
        peer: &RegistryPeer,
        requested: Option<&str>,
    ) -> Result<String, Refusal> {
        if let Some(rt) = requested {
            if !peer.declares(rt) {
                return Err(undeclared_runtime_refusal(&peer.personality, rt));
            }
            return Ok(rt.to_string());
        }
        let live: Vec<&str> = self
            .live
            .identities()
            .filter(|i| i.personality == peer.personality)
            .map(|i| i.runtime.as_str())
            .collect();
        match live.as_slice() {
            [one] => Ok(one.to_string()),
            [] => Ok(peer.default_runtime.clone()),
            many => Err(refusal(
                Code::InvalidArgument,
                format!(
                    "\"{}\" is live on several runtimes ({}) — specify runtime",
                    peer.personality,
                    many.join(", ")
                ),
            )),
        }
    }

    pub(crate) fn targets(
        &self,
        personality: Option<&str>,
        runtime: Option<&str>,
        all: bool,
    ) -> Result<Vec<Identity>, Refusal> {
        let registry = self.registry()?;
        let peers: Vec<&RegistryPeer> = match (personality, all) {
            (_, true) => registry.peers.iter().collect(),
            (Some(p), false) => vec![Self::peer(&registry, p)?],
            (None, false) => {
                return Err(refusal(Code::InvalidArgument, "name a peer or pass --all"))
            }
        };
        let mut out = Vec::new();
        for peer in peers {
            let rts: Vec<String> = match runtime {
                Some(rt) if peer.declares(rt) => vec![rt.to_string()],
                Some(rt) if !all => return Err(undeclared_runtime_refusal(&peer.personality, rt)),
                Some(_) => vec![],
                None => peer.runtimes.clone(),
            };
            out.extend(rts.into_iter().map(|rt| Identity {
                runtime: rt,
                personality: peer.personality.clone(),
            }));
        }
        Ok(out)
    }

    /// The identity a control verb acts on, and its runtime kind.
    pub(crate) fn control_target(
        &self,
        personality: &str,
        runtime: Option<&str>,
    ) -> Result<(Identity, RuntimeKind), Refusal> {
        let registry = self.registry()?;
        let peer = Self::peer(&registry, personality)?;
        let rt = self.control_runtime(peer, runtime)?;
        let kind = self
            .adapter(&rt)
            .map_err(|e| refusal(Code::Offline, e.to_string()))?
            .kind();
        Ok((
            Identity {
                runtime: rt,
                personality: personality.to_string(),
            },
            kind,
        ))
    }
}

//! The launch decision as a pure function (spec 05 §2 steps 1–5): [`plan`] reads the
//! [`LaunchFacts`] the router gathered (registry entry, adapter, markers, profile, the queue
//! head) and the time, and refuses the launch or says how it goes. No files, no clock: tested
//! on fake time in `launch_plan_tests.rs`, beside `decide_tests.rs`.

use std::time::Duration;

use super::decide::crash_looping;
use super::launch::offline;
use super::now::Now;
use crate::config::Config;
use crate::daemon::lifecycle::{decide_mode, ModeRequest, PeerMarkers, WakeDecision, WakeFacts};
use crate::daemon::route::{stopped_refusal, undeclared_runtime_refusal, Refusal};
use crate::names::Identity;
use crate::protocol::Code;
use crate::registry::RegistryPeer;
use crate::runtime::{ConversationNaming, RuntimeKind, WakeMode};
use crate::runtime_table::{class_of, Class};

/// What a launch decision reads, gathered on the router thread by `Router::launch_facts`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LaunchFacts {
    pub ident: Identity,
    pub mode_req: ModeRequest,
    /// The topic of the queued message that asks for the launch, if any.
    pub topic: Option<String>,
    /// The peer's registry entry; `None`: not in the peers index.
    pub peer: Option<RegistryPeer>,
    /// The runtime's kind and conversation naming, or why its adapter cannot be used.
    pub runtime: Result<(RuntimeKind, ConversationNaming), String>,
    /// Markers: `stopped` and the deaths (epoch ms), then those the fresh/resume rules read.
    pub stopped: bool,
    pub deaths_ms: Vec<u64>,
    pub markers: PeerMarkers,
    /// The peer's working folder exists.
    pub folder_exists: bool,
    /// From the peer's profile: an ephemeral worker, a gated agent, its initial prompt.
    pub ephemeral: bool,
    pub gated: bool,
    pub initial_prompt: Option<String>,
    /// The id of the queue head when it is a message (it may ride the wake).
    pub head_send: Option<u64>,
}

/// How a launch goes (the pure part of `LaunchPlan`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LaunchChoice {
    pub kind: RuntimeKind,
    pub mode: WakeMode,
    /// The fresh/resume decision (agents only).
    pub decision: Option<WakeDecision>,
    pub ephemeral: bool,
    /// A gated agent: the approval timeout its launch gives the permission hook (spec 10 §4).
    pub gated: Option<Duration>,
    /// The queued message that rides the wake as its first delivery (agents only), with the
    /// seed to put before it (the profile's initial prompt, on a fresh start).
    pub first: Option<(u64, Option<String>)>,
}

/// Decide a launch: the checks in their order (registered, declared, allowed, adapter, not
/// stopped, folder, crash loop with `cfg`'s limits at `now`), then the fresh/resume decision
/// and the first delivery.
///
/// Errors: the [`Refusal`] the launch's requester gets (`not-registered`,
/// `invalid-argument`, `stopped`, `offline`).
pub(crate) fn plan(f: &LaunchFacts, cfg: &Config, now: Now) -> Result<LaunchChoice, Refusal> {
    let (ident, p) = (&f.ident, f.ident.personality.as_str());
    let peer = f.peer.as_ref().ok_or_else(|| Refusal {
        code: Code::NotRegistered,
        error: format!("peer \"{p}\" is not in the iapeer peers index"),
    })?;
    if !peer.declares(&ident.runtime) {
        return Err(undeclared_runtime_refusal(p, &ident.runtime));
    }
    let nature = peer.nature();
    // An installed terminal agent (a manifest's) is an agent though the table does not
    // know its name: the kind its adapter gave decides (issue 27 item 3).
    let class = match (class_of(&ident.runtime), &f.runtime) {
        (Class::Router, Ok((RuntimeKind::Agent, _))) => Class::Agent,
        (class, _) => class,
    };
    if !nature.allowed_in(class) {
        return Err(Refusal {
            code: Code::InvalidArgument,
            error: format!(
                "a peer of intelligence {nature} cannot run on {} — fix \"intelligence\" in {} (iapeer verify shows it)",
                ident.runtime,
                crate::paths::peer::profile(&peer.cwd).display()
            ),
        });
    }
    let (kind, naming) = f.runtime.clone().map_err(|e| offline(p, e))?;
    if f.stopped {
        return Err(stopped_refusal(ident));
    }
    if !f.folder_exists {
        return Err(offline(
            p,
            format!("working folder {} does not exist", peer.cwd.display()),
        ));
    }
    if crash_looping(
        kind,
        &f.deaths_ms,
        now,
        cfg.crashloop_max,
        cfg.crashloop_window,
    ) {
        return Err(offline(
            p,
            format!(
                "crash-looping: {} deaths in {}s — see exits.log; iapeer new {p} to force",
                cfg.crashloop_max,
                cfg.crashloop_window.as_secs()
            ),
        ));
    }
    let agent = kind == RuntimeKind::Agent;
    let ephemeral = agent && f.ephemeral;
    let decision = agent.then(|| {
        let facts = WakeFacts {
            markers: f.markers.clone(),
            ephemeral,
            human_facing: peer.telegram_bot().is_some()
                || peer
                    .interfaces
                    .as_ref()
                    .is_some_and(|i| i.contains_key("telegram")),
            topic: f.topic.clone(),
            named: naming != ConversationNaming::Folder,
        };
        decide_mode(f.mode_req, &facts)
    });
    let mode = decision.map(|d| d.mode).unwrap_or(WakeMode::Fresh);
    let first = f.head_send.filter(|_| agent).map(|id| {
        let seed = match mode {
            WakeMode::Fresh => f.initial_prompt.clone(),
            WakeMode::Resume => None,
        };
        (id, seed)
    });
    Ok(LaunchChoice {
        kind,
        mode,
        decision,
        ephemeral,
        gated: (agent && f.gated).then_some(cfg.approval_timeout),
        first,
    })
}

#[cfg(test)]
#[path = "launch_plan_tests.rs"]
mod tests;

//! Read-only views of the router's state (spec 05 §5): `list`, `status`, `live-runtime`,
//! and a session's screen (`screen`, for the operator's web page).

use super::ops::refusal;
use super::Router;
use crate::daemon::fair_pool::Load;
use crate::daemon::reply::ReplyTo;
use crate::daemon::route::Refusal;
use crate::protocol::{
    Code, ListReply, LiveRuntimeReply, PrepStatus, Reply, ScreenReply, SessionCounts, SessionInfo,
    StalledPrep, StatusReply,
};
use crate::session::handle::SessionCmd;

impl Router {
    /// `screen`: ask the peer's session (booting or live) for its screen as text; the session
    /// thread answers `reply` itself. `not-live` without a session, or when the session's
    /// thread is gone.
    pub(crate) fn op_screen(&mut self, personality: &str, runtime: Option<&str>, reply: ReplyTo) {
        let (ident, kind) = match self.control_target(personality, runtime) {
            Ok(t) => t,
            Err(r) => return reply.finish(r),
        };
        if kind == crate::runtime::RuntimeKind::Router {
            // It runs on pipes: there is no terminal screen, only its logs.
            return reply.finish(Reply::failure(
                Code::InvalidArgument,
                format!(
                    "peer \"{personality}\" runs on {} (a human's or a service's runtime, on pipes): it has no \
                     screen — its output is in logs/lifecycle/{ident}.log",
                    ident.runtime
                ),
            ));
        }
        let stopped =
            crate::markers::Markers::new(&self.paths, &ident).is_set(crate::markers::Flag::Stopped);
        let not_live = || {
            let way = if stopped {
                format!("it is stopped: POST /fleet/v1/peers/{personality}/start, then wake it")
            } else {
                format!(
                    "wake it with POST /fleet/v1/peers/{personality}/wake, or send it a message"
                )
            };
            Reply::failure(
                Code::NotLive,
                format!(
                    "peer \"{personality}\" has no session on {}: nothing to show ({way})",
                    ident.runtime
                ),
            )
        };
        let Some(s) = self.live.get(&ident) else {
            return reply.finish(not_live());
        };
        let identity = ident.to_string();
        let answer = reply.clone();
        let sent = s.handle.send(SessionCmd::Screen(Box::new(move |screen| {
            answer.finish(ScreenReply {
                identity,
                rows: screen.rows,
                cursor: [screen.cursor.0, screen.cursor.1],
            })
        })));
        if !sent {
            reply.finish(not_live());
        }
    }

    pub(crate) fn op_list(&self) -> ListReply {
        let mut sessions: Vec<SessionInfo> = self
            .live
            .spawned()
            .map(|s| {
                let last_active = s
                    .status
                    .as_ref()
                    .and_then(|st| st.activity_ms)
                    .into_iter()
                    .chain(s.last_delivery_ms)
                    .max()
                    .unwrap_or(s.woke_at_ms);
                SessionInfo {
                    identity: s.identity.to_string(),
                    personality: s.identity.personality.clone(),
                    runtime: s.identity.runtime.clone(),
                    status: if s.is_ready() { "live" } else { "booting" }.to_string(),
                    attached: s.attached,
                    pid: s.pid,
                    woke_at_ms: s.woke_at_ms,
                    last_active_ms: last_active,
                    busy: s.status.as_ref().is_some_and(|st| st.busy),
                    mode: s.mode.as_str().to_string(),
                }
            })
            .collect();
        // A session whose launcher has not reported yet is booting (it has no pid yet: 0).
        sessions.extend(self.live.launches().map(|(identity, l)| SessionInfo {
            identity: identity.to_string(),
            personality: identity.personality.clone(),
            runtime: identity.runtime.clone(),
            status: "booting".to_string(),
            attached: 0,
            pid: 0,
            woke_at_ms: l.started.ms,
            last_active_ms: l.started.ms,
            busy: false,
            mode: l.wake.mode.as_str().to_string(),
        }));
        sessions.sort_by(|a, b| a.identity.cmp(&b.identity));
        let mut parked: Vec<String> = self.supervisor.parked().map(|k| k.to_string()).collect();
        parked.sort();
        ListReply { sessions, parked }
    }

    pub(crate) fn op_status(&self) -> StatusReply {
        let live = self.live.spawned().filter(|s| s.is_ready()).count();
        // Launching sessions count as booting.
        let booting = self.live.len() - live;
        StatusReply {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            started_ms: self.info.started_ms,
            uptime_s: crate::clock::now_ms().saturating_sub(self.info.started_ms) / 1000,
            tcp: self.info.tcp.clone(),
            sock: self.info.sock.clone(),
            sessions: SessionCounts { live, booting },
            restarts: self.info.restarts.list(),
            prep: prep_status(&self.prep.load(), &self.prep_plain.load()),
            // Filled in off the router thread ([`super::Router::on_op`]).
            agents: Vec::new(),
            realtime: crate::daemon::realtime::status(),
        }
    }

    pub(crate) fn op_live_runtime(&self, personality: &str) -> Result<Reply, Refusal> {
        let live = self
            .live
            .spawned()
            .filter(|s| s.identity.personality == personality && s.is_ready())
            .max_by_key(|s| {
                s.status
                    .as_ref()
                    .and_then(|st| st.activity_ms)
                    .into_iter()
                    .chain(s.last_delivery_ms)
                    .chain([s.woke_at_ms])
                    .max()
            })
            .map(|s| {
                LiveRuntimeReply {
                    runtime: s.identity.runtime.clone(),
                }
                .into()
            });
        match live {
            Some(reply) => Ok(reply),
            // An unknown name is said as such (a typo is not "not live").
            None => {
                Self::peer(&self.registry()?, personality)?;
                Err(refusal(
                    Code::NotLive,
                    format!("peer \"{personality}\" is not live"),
                ))
            }
        }
    }
}

/// The preparation pools as `status` reports them: counts (running and waiting of both; the
/// threads of each), and the stalled preparations (those running for `stalled_after` or
/// longer) grouped by line, the longest-stalled first; those of the pool for sends without
/// attachments (`plain`, whose lines are the targets) after them, as their own entries
/// (their `attachments` are empty, their `peer` the target whose folder they read).
pub(crate) fn prep_status(load: &Load, plain: &Load) -> PrepStatus {
    let mut stalled = stalled_by_sender(load);
    stalled.extend(stalled_by_sender(plain));
    PrepStatus {
        running: load.running.len() + plain.running.len(),
        waiting: [load, plain]
            .iter()
            .flat_map(|l| &l.waiting)
            .map(|(_, n)| n)
            .sum(),
        threads: load.threads,
        threads_max: load.limits.threads,
        plain_threads: plain.threads,
        plain_threads_max: plain.limits.threads,
        stalled_after_ms: load.limits.stalled_after.as_millis() as u64,
        stalled,
    }
}

/// One pool's stalled preparations grouped by sender, the longest-stalled first.
fn stalled_by_sender(load: &Load) -> Vec<StalledPrep> {
    let after = load.limits.stalled_after;
    let mut stalled: Vec<StalledPrep> = Vec::new();
    // `running` is oldest first, so each sender's first entry is its oldest.
    for (info, age) in load.running.iter().filter(|(_, age)| *age >= after) {
        let at = match stalled.iter().position(|s| s.sender == info.sender) {
            Some(i) => i,
            None => {
                stalled.push(StalledPrep {
                    sender: info.sender.clone(),
                    jobs: 0,
                    oldest_ms: age.as_millis() as u64,
                    waiting: load
                        .waiting
                        .iter()
                        .find(|(s, _)| *s == info.sender)
                        .map_or(0, |(_, n)| *n),
                    attachments: Vec::new(),
                    peer: crate::daemon::fair_pool::line_target(&info.sender)
                        .filter(|_| info.attachments.is_empty())
                        .unwrap_or_default()
                        .to_string(),
                });
                stalled.len() - 1
            }
        };
        let entry = &mut stalled[at];
        entry.jobs += 1;
        for a in &info.attachments {
            if !entry.attachments.contains(a) {
                entry.attachments.push(a.clone());
            }
        }
    }
    stalled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::fair_pool::{JobInfo, PLAIN_PREP_LIMITS, PREP_LIMITS};
    use std::time::Duration;

    #[test]
    fn stalled_preparations_are_grouped_by_sender_longest_first() {
        let job = |sender: &str, att: &[&str]| JobInfo {
            sender: sender.into(),
            attachments: att.iter().map(|a| a.to_string()).collect(),
        };
        let load = Load {
            limits: PREP_LIMITS,
            threads: 6,
            running: vec![
                (job("echo-carol", &["/mnt/c"]), Duration::from_secs(40)),
                (job("echo-alice", &["/mnt/a"]), Duration::from_secs(30)),
                (
                    job("echo-alice", &["/mnt/a", "/mnt/b"]),
                    Duration::from_secs(3),
                ),
                (job("echo-bob", &[]), Duration::from_millis(5)),
            ],
            waiting: vec![("echo-alice".into(), 7), ("echo-dan".into(), 1)],
        };
        let plain = Load {
            limits: PLAIN_PREP_LIMITS,
            threads: 2,
            running: vec![
                (job("to erin", &[]), Duration::from_secs(9)),
                (job("to dan", &[]), Duration::from_millis(5)),
            ],
            waiting: vec![("to erin".into(), 1)],
        };
        let p = prep_status(&load, &plain);
        assert_eq!(
            (p.running, p.waiting, p.threads, p.threads_max),
            (6, 9, 6, 64)
        );
        assert_eq!((p.plain_threads, p.plain_threads_max), (2, 64));
        assert_eq!(p.stalled_after_ms, 2000);
        assert_eq!(
            p.stalled,
            vec![
                StalledPrep {
                    sender: "echo-carol".into(),
                    jobs: 1,
                    oldest_ms: 40_000,
                    waiting: 0,
                    attachments: vec!["/mnt/c".into()],
                    peer: String::new(),
                },
                StalledPrep {
                    sender: "echo-alice".into(),
                    jobs: 2,
                    oldest_ms: 30_000,
                    waiting: 7,
                    attachments: vec!["/mnt/a".into(), "/mnt/b".into()],
                    peer: String::new(),
                },
                StalledPrep {
                    sender: "to erin".into(),
                    jobs: 1,
                    oldest_ms: 9_000,
                    waiting: 1,
                    attachments: vec![],
                    peer: "erin".into(),
                },
            ]
        );
    }
}

//! The fleet API (spec 10 §1): plain HTTP+JSON under `/fleet/v1` on the loopback listener,
//! for dashboards, scripts and chat bridges. Kept apart from MCP (agents see only
//! `send_to_peer`); the same gate (Host, Origin, body size; `daemon::http::gate`) runs before
//! anything here, and admits a fleet request only with the fleet's secret ([`token`], or
//! `IAPEER_BEARER_TOKEN` when set) or the operator's page cookie.
//!
//! The acceptor thread calls [`Fleet::begin`] with a complete request. What needs no file or
//! router is answered at once ([`Begun::Done`]: unknown path, wrong method, bad body);
//! `events` becomes a stream fed by the event bus ([`Begun::Stream`]); a long poll of the
//! approvals ([`Begun::Held`]) finishes later, or sooner when the acceptor's long-poll budget
//! wants its place; the rest finishes later through `done` ([`Begun::Later`]): the lifecycle
//! verbs and `send` go to the router
//! as the control requests the CLI sends (answered through a callback, no thread waits),
//! and what reads files (snapshot rows, a peer's row, `refresh`, the sender of `send`) runs
//! on a small worker pool.

pub mod answer;
pub mod faces;
pub mod route;
pub mod token;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde_json::json;

use super::guard::Fatal;
use super::http::reply::Reply;
use super::pool::Pool;
use super::reply::{ReplyMsg, ReplyTo};
use super::route::{Caller, SendArgs, SendInput};
use super::router::{RouterMsg, RouterTx};
use super::ui::auth::UI_HEADER;
use crate::eventbus::{Bus, Subscription};
use crate::names::Identity;
use crate::paths::Paths;
use crate::protocol::{Code, Failure, Request};
use crate::registry::Registry;
use crate::roster::{list_rows, LiveState};
use route::{Endpoint, SendBody, Verb, VerbBody};

/// Threads reading files for fleet requests at once (more requests wait for one).
const WORKERS: usize = 4;
/// Events `GET /fleet/v1/peers/<p>` returns at most.
pub const PEER_EVENTS: usize = 50;
/// Records `GET /fleet/v1/inbox` returns at most (the newest).
pub const INBOX_RECORDS: usize = 200;

/// Where a later answer goes (called once, from any thread; must be quick).
pub type Done = Box<dyn FnOnce(Reply) + Send>;

/// Asks for a held long poll's answer now, without waiting (called at most once, on the
/// acceptor's thread): the answer goes to the `Done` given, and the `gone` flag given is
/// raised if its client hangs up meanwhile.
pub type Early = Box<dyn FnOnce(Arc<AtomicBool>, Done) + Send>;

/// A complete fleet request as the acceptor read it.
#[derive(Debug, Clone, Copy)]
pub struct FleetRequest<'a> {
    /// The method (`GET`, `POST`, …).
    pub method: &'a str,
    /// The target as sent (with its query).
    pub target: &'a str,
    /// The origin-form path without query.
    pub path: &'a str,
    /// (lowercase name, value) in order.
    pub headers: &'a [(String, String)],
    /// The body (`Content-Length` bytes).
    pub body: &'a [u8],
}

/// What [`Fleet::begin`] made of a request.
pub enum Begun {
    /// The answer, now.
    Done(Reply),
    /// `GET /fleet/v1/events`: stream the subscription's events; the first
    /// [`Subscription::replayed`] are the replay, after which `: connected` goes out.
    Stream {
        /// The subscriber's queue.
        sub: Subscription,
    },
    /// The answer comes later through `done`.
    Later,
    /// A long poll (`GET /fleet/v1/approvals?wait=S`, S > 0): the answer comes through
    /// `done` when there is news or after S seconds. `early` gets the answer the long poll
    /// would have had with nothing new, at once (its client gets its normal answer early).
    Held {
        /// Ask for the answer now.
        early: Early,
    },
}

/// What the fleet API reaches: the router, the event bus and the storage.
pub struct Fleet {
    paths: Paths,
    bus: Bus,
    router: RouterTx,
    fatal: Fatal,
    started_ms: u64,
    pool: Pool,
}

impl Fleet {
    /// The fleet API of the daemon whose router listens on `router` and started at
    /// `started_ms` (epoch ms).
    pub fn new(paths: Paths, bus: Bus, router: RouterTx, fatal: Fatal, started_ms: u64) -> Fleet {
        Fleet {
            paths,
            bus,
            router,
            fatal,
            started_ms,
            pool: Pool::new("fleet", WORKERS),
        }
    }

    /// The event bus (the acceptor wakes on its publishes).
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// Begin serving `req`. `gone` is raised by the acceptor when the client hangs up.
    pub fn begin(
        self: &Arc<Self>,
        req: &FleetRequest<'_>,
        gone: Arc<AtomicBool>,
        done: Done,
    ) -> Begun {
        let endpoint = match route::route(req.method, req.path) {
            Ok(e) => e,
            Err(r) => return Begun::Done(r),
        };
        match endpoint {
            Endpoint::Events => self.subscribe(req),
            Endpoint::Snapshot => self.later(done, |f| f.snapshot()),
            Endpoint::Notices => self.later(done, |f| f.notices()),
            Endpoint::Notice(id) => self.later(done, move |f| f.notice(&id)),
            Endpoint::Peer(p) => self.later(done, move |f| f.peer(&p)),
            Endpoint::Screen(p) => {
                let req = Request::Screen {
                    personality: p,
                    runtime: route::query(req.target, "runtime"),
                };
                self.ask(req, gone, move |r| done(answer::screen(r)));
                Begun::Later
            }
            Endpoint::Inbox => {
                let peer = route::query(req.target, "peer");
                self.later(done, move |f| f.inbox(peer.as_deref()))
            }
            Endpoint::Verb(p, verb) => {
                let b: VerbBody = match route::body(req.body) {
                    Ok(b) => b,
                    Err(r) => return Begun::Done(r),
                };
                if verb == Verb::Refresh {
                    return self.later(done, move |f| f.refresh(&p, b.runtime.as_deref()));
                }
                self.ask(control_request(p, verb, b.runtime), gone, move |r| {
                    done(answer::verb(r))
                });
                Begun::Later
            }
            Endpoint::Approvals => self.begin_approvals(req, gone, done),
            Endpoint::Approval(id) => {
                self.approval(id, gone, done);
                Begun::Later
            }
            Endpoint::Decide(id, allow) => self.begin_decide(id, allow, req, gone, done),
            Endpoint::Send => self.begin_send(req, gone, done),
        }
    }

    /// `GET /fleet/v1/events`: a subscription to the event bus, replaying what the query and
    /// `Last-Event-ID` ask for.
    fn subscribe(&self, req: &FleetRequest<'_>) -> Begun {
        let replay = match route::replay(req.target) {
            Ok(n) => n,
            Err(r) => return Begun::Done(r),
        };
        let after = crate::daemon::http::gate::first(req.headers, "last-event-id")
            .and_then(|v| v.trim().parse::<u64>().ok());
        let sub = self.bus.subscribe(replay, after);
        Begun::Stream { sub }
    }

    /// `GET /fleet/v1/approvals`: answered now, or held up to the query's `wait_ms`.
    fn begin_approvals(
        self: &Arc<Self>,
        req: &FleetRequest<'_>,
        gone: Arc<AtomicBool>,
        done: Done,
    ) -> Begun {
        let (wait_ms, since_ms) = match route::approvals_query(req.target) {
            Ok(q) => q,
            Err(r) => return Begun::Done(r),
        };
        self.approvals(wait_ms, since_ms, gone, done);
        if wait_ms.is_none_or(|w| w == 0) {
            return Begun::Later;
        }
        let fleet = Arc::clone(self);
        Begun::Held {
            early: Box::new(move |gone, done| fleet.approvals(None, since_ms, gone, done)),
        }
    }

    /// `POST /fleet/v1/approvals/<id>/(approve|deny)`: the decision goes to the router.
    fn begin_decide(
        &self,
        id: String,
        allow: bool,
        req: &FleetRequest<'_>,
        gone: Arc<AtomicBool>,
        done: Done,
    ) -> Begun {
        let req = if allow {
            let b: route::ApproveBody = match route::body(req.body) {
                Ok(b) => b,
                Err(r) => return Begun::Done(r),
            };
            Request::Approve {
                id,
                option: b.option,
            }
        } else {
            let b: route::DenyBody = match route::body(req.body) {
                Ok(b) => b,
                Err(r) => return Begun::Done(r),
            };
            Request::Deny {
                id,
                reason: b.reason,
            }
        };
        self.ask(req, gone, move |r| done(answer::verb(r)));
        Begun::Later
    }

    /// `POST /fleet/v1/send`: the sender resolved on a worker, then the CLI's send.
    fn begin_send(
        self: &Arc<Self>,
        req: &FleetRequest<'_>,
        gone: Arc<AtomicBool>,
        done: Done,
    ) -> Begun {
        let b: SendBody = match route::body(req.body) {
            Ok(b) => b,
            Err(r) => return Begun::Done(r),
        };
        // The page's requests carry its header (the gate admitted them only with its
        // cookie): its sends are logged `path=ui`, a script's `path=fleet`.
        let path = if crate::daemon::http::gate::first(req.headers, UI_HEADER).is_some() {
            "ui"
        } else {
            "fleet"
        };
        let fleet = Arc::clone(self);
        let job = move || match fleet.sender(b.from.as_deref()) {
            Err(r) => done(r),
            Ok(from) => {
                // The CLI's send (`SendInput::of_cli_request`) with its own path.
                let input = SendInput {
                    path,
                    caller: Caller::Cli(from.clone()),
                    args: SendArgs {
                        to: b.personality,
                        runtime: b.runtime,
                        message: b.message,
                        topic: b.topic,
                        attachments: Vec::new(),
                        id: b.id,
                        if_busy: b.if_busy.unwrap_or_default(),
                    },
                };
                fleet.post(
                    |reply| RouterMsg::Send {
                        input: Box::new(input),
                        reply,
                    },
                    gone,
                    move |r| done(answer::send(&from, r)),
                );
            }
        };
        self.run(job)
    }

    /// `GET /fleet/v1/approvals`: ask the router for the list (held up to `wait_ms` for a
    /// prompt newer than `since_ms`) and pass its answer to `done`.
    fn approvals(
        &self,
        wait_ms: Option<u64>,
        since_ms: Option<u64>,
        gone: Arc<AtomicBool>,
        done: Done,
    ) {
        let paths = self.paths.clone();
        self.ask(Request::Approvals { wait_ms, since_ms }, gone, move |r| {
            done(answer::approvals(r, &now_ts(), &people(&paths)))
        });
    }

    /// `GET /fleet/v1/approvals/<id>`: `{api, version, ts, approval}` of the pending
    /// prompt, 404 when none has that id (answered, expired or unknown). The telegram
    /// package reads a 404 as "already handled" (issue 30 item 7).
    fn approval(&self, id: String, gone: Arc<AtomicBool>, done: Done) {
        let paths = self.paths.clone();
        let req = Request::Approvals {
            wait_ms: None,
            since_ms: None,
        };
        self.ask(req, gone, move |r| {
            done(answer::one_approval(r, &id, &now_ts(), &people(&paths)))
        });
    }

    /// Run `work` on the pool and pass its answer to `done`.
    fn later(
        self: &Arc<Self>,
        done: Done,
        work: impl FnOnce(&Fleet) -> Reply + Send + 'static,
    ) -> Begun {
        let fleet = Arc::clone(self);
        self.run(move || done(work(&fleet)))
    }

    fn run(&self, job: impl FnOnce() + Send + 'static) -> Begun {
        match self.pool.run(job) {
            Ok(()) => Begun::Later,
            Err(e) => Begun::Done(route::error(
                500,
                &format!("internal error: cannot start a fleet worker: {e}"),
            )),
        }
    }

    /// Send `req` to the router; `then` gets its final reply (on the router thread) or the
    /// failure of a router that is gone.
    fn ask(
        &self,
        req: Request,
        gone: Arc<AtomicBool>,
        then: impl FnOnce(crate::protocol::Reply) + Send + 'static,
    ) {
        let req = Box::new(req);
        self.post(|reply| RouterMsg::Control { req, reply }, gone, then);
    }

    /// Send the router the message `msg` makes of a reply; `then` gets its final reply (on
    /// the router thread) or the failure of a router that is gone.
    fn post(
        &self,
        msg: impl FnOnce(ReplyTo) -> RouterMsg,
        gone: Arc<AtomicBool>,
        then: impl FnOnce(crate::protocol::Reply) + Send + 'static,
    ) {
        let fatal = self.fatal.clone();
        let reply = ReplyTo::on_final(gone, move |r| {
            then(r.unwrap_or_else(|| {
                Failure::new(Code::ShuttingDown, super::gone_reason(&fatal)).into()
            }))
        });
        if let Err(super::router::inbox::RouterGone(m)) = self.router.send(msg(reply)) {
            let (RouterMsg::Control { reply, .. } | RouterMsg::Send { reply, .. }) = *m else {
                return;
            };
            reply.finish(Failure::new(
                Code::ShuttingDown,
                super::gone_reason(&self.fatal),
            ));
        }
    }

    /// Ask the router and wait (pool workers only; `list` is answered at once).
    fn ask_blocking(&self, req: Request) -> crate::protocol::Reply {
        let (reply, rx) = ReplyTo::channel();
        if self
            .router
            .send(RouterMsg::Control {
                req: Box::new(req),
                reply,
            })
            .is_err()
        {
            return Failure::new(Code::ShuttingDown, super::gone_reason(&self.fatal)).into();
        }
        loop {
            match rx.recv() {
                Ok((_, ReplyMsg::Final(r))) => return r,
                Ok(_) => {}
                Err(_) => {
                    return Failure::new(Code::ShuttingDown, super::gone_reason(&self.fatal)).into()
                }
            }
        }
    }

    /// The registry and the rows of `list --json`.
    fn rows(&self) -> Result<(Registry, Vec<crate::roster::PeerRow>), Reply> {
        let registry = Registry::load(&self.paths)
            .map_err(|e| route::error(500, &format!("internal error: {e}")))?;
        let live = match self.ask_blocking(Request::List) {
            crate::protocol::Reply::List(l) => LiveState::from_reply(l),
            crate::protocol::Reply::Failed(f) => return Err(answer::failure(&f)),
            other => {
                return Err(route::error(
                    500,
                    &format!("internal error: list answered {other:?}"),
                ))
            }
        };
        let mut rows = list_rows(&self.paths, &registry, &live);
        let paths = &self.paths;
        let (cfg, _) = crate::config::Config::from_env();
        let now_ms = crate::clock::now_ms();
        crate::roster::add_daemon_view(
            &mut rows,
            |rt| {
                crate::runtime::adapter_for(paths, rt)
                    .map(|a| crate::roster::Abilities::of(a.as_ref()))
            },
            |id| crash_loop(paths, id, now_ms, &cfg),
        );
        Ok((registry, rows))
    }

    /// `GET /fleet/v1/snapshot`.
    fn snapshot(&self) -> Reply {
        match self.rows() {
            Ok((_, rows)) => document(json!({
                "host": answer::host(self.started_ms),
                "peers": rows,
                "remote": crate::roster::remote::remote_rows(&self.paths),
                "notices": faces::notices(&crate::notices::current(&self.paths)),
            })),
            Err(r) => r,
        }
    }

    /// `GET /fleet/v1/notices`: `{api, version, ts, notices:[notice…]}`, the notices in
    /// force, oldest first (spec 10 §3).
    fn notices(&self) -> Reply {
        document(json!({"notices": faces::notices(&crate::notices::current(&self.paths))}))
    }

    /// `GET /fleet/v1/notices/<id>`: `{api, version, ts, notice}`; 404 when no notice in
    /// force has that id.
    fn notice(&self, id: &str) -> Reply {
        let found = crate::notices::current(&self.paths)
            .into_iter()
            .find(|n| n.id == id);
        match found {
            Some(n) => document(json!({"notice": faces::notice(&n)})),
            None if !crate::notices::valid_id(id) => route::error(
                404,
                &format!(
                    "no notice {id:?}: a notice id is nt- and 8 hex digits; GET /fleet/v1/notices \
                     lists them"
                ),
            ),
            None => route::error(
                404,
                &format!(
                    "no notice {id}: it has expired or was cleared (GET /fleet/v1/notices lists \
                     the notices in force)"
                ),
            ),
        }
    }

    /// `GET /fleet/v1/peers/<p>`.
    fn peer(&self, p: &str) -> Reply {
        let rows = match self.rows() {
            Ok((_, rows)) => rows,
            Err(r) => return r,
        };
        let Some(row) = rows.into_iter().find(|r| r.personality == p) else {
            return answer::unknown_peer(p);
        };
        let tz = jiff::tz::TimeZone::system();
        let today = jiff::Timestamp::now().to_zoned(tz.clone()).date();
        let events: Vec<serde_json::Value> = self
            .bus
            .recent(PEER_EVENTS, |e| crate::logview::mentions(e, p))
            .iter()
            .map(|e| answer::event_json_at(e, &tz, today))
            .collect();
        document(json!({ "peer": row, "events": events }))
    }

    /// `GET /fleet/v1/inbox[?peer=<p>]`: `{api, version, ts, peer, identity, unread,
    /// records:[record + "unread"]}`, the newest [`INBOX_RECORDS`] records of the human peer's
    /// inbox (`p`, else the only peer on the human runtime), oldest first, as `iapeer inbox
    /// --json` prints them. Read marks are left as they are.
    fn inbox(&self, peer: Option<&str>) -> Reply {
        let registry = match Registry::load(&self.paths) {
            Ok(r) => r,
            Err(e) => return route::error(500, &format!("internal error: {e}")),
        };
        if let Some(p) = peer.filter(|p| registry.find(p).is_none()) {
            return answer::unknown_peer(p);
        }
        let name =
            match crate::inbox::show::pick_peer(peer, None, std::path::Path::new("/"), &registry) {
                Ok(n) => n,
                Err(why) => return route::error(400, &format!("bad request: {why}")),
            };
        let file = self.paths.inbox(&name);
        let records = match crate::inbox::read(&file) {
            Ok(r) => r,
            Err(e) => {
                return route::error(
                    500,
                    &format!("internal error: cannot read {}: {e}", file.display()),
                )
            }
        };
        let mark = crate::inbox::ReadMark::load(&self.paths, &name);
        let unread = (0..records.len()).filter(|&i| mark.is_unread(i)).count();
        let skip = records.len().saturating_sub(INBOX_RECORDS);
        let shown: Vec<serde_json::Value> = records
            .iter()
            .enumerate()
            .skip(skip)
            .map(|(i, r)| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("unread".into(), mark.is_unread(i).into());
                }
                v
            })
            .collect();
        route::ok(
            200,
            &json!({
                "api": 1,
                "version": env!("CARGO_PKG_VERSION"),
                "ts": now_ts(),
                "peer": name,
                "identity": format!("{}-{name}", crate::names::HUMAN_RUNTIME),
                "unread": unread,
                "records": shown,
            }),
        )
    }

    /// `POST /fleet/v1/peers/<p>/refresh`: the CLI's `refresh`.
    fn refresh(&self, p: &str, runtime: Option<&str>) -> Reply {
        let registry = match Registry::load(&self.paths) {
            Ok(r) => r,
            Err(e) => return route::error(500, &format!("internal error: {e}")),
        };
        let Some(peer) = registry.find(p) else {
            return answer::unknown_peer(p);
        };
        if let Some(rt) = runtime.filter(|rt| !peer.declares(rt)) {
            return route::error(
                400,
                &format!("bad request: peer \"{p}\" does not declare runtime \"{rt}\""),
            );
        }
        match crate::peers::refresh_peer(&self.paths, peer, runtime) {
            Ok(ids) => {
                let marked: Vec<String> = ids.iter().map(ToString::to_string).collect();
                route::ok(200, &json!({ "ok": true, "marked": marked }))
            }
            Err(e) => route::error(502, &e.to_string()),
        }
    }

    /// The sender of `POST /fleet/v1/send`: `from` when given, else the only natural peer.
    fn sender(&self, from: Option<&str>) -> Result<String, Reply> {
        if let Some(f) = from.map(str::trim).filter(|f| !f.is_empty()) {
            return Identity::parse(f)
                .map(|i| i.to_string())
                .map_err(|e| route::error(400, &format!("bad request: from: {e}")));
        }
        let registry = Registry::load(&self.paths)
            .map_err(|e| route::error(500, &format!("internal error: {e}")))?;
        answer::sole_natural(&registry)
    }
}

/// The people who may answer an approval (the natural peers, by name), for the companion
/// packages' `approvers`; empty when the registry cannot be read.
fn people(paths: &crate::paths::Paths) -> Vec<String> {
    Registry::load(paths)
        .map(|r| r.naturals().map(|p| p.personality.clone()).collect())
        .unwrap_or_default()
}

/// Why the crash-loop guard refuses to wake `identity` (an agent's; the router's rule,
/// `daemon::router::decide::crash_looping`), or `None`.
fn crash_loop(
    paths: &Paths,
    identity: &str,
    now_ms: u64,
    cfg: &crate::config::Config,
) -> Option<String> {
    let id = Identity::parse(identity).ok()?;
    let deaths = crate::markers::Markers::new(paths, &id).deaths();
    let window_ms = u64::try_from(cfg.crashloop_window.as_millis()).unwrap_or(u64::MAX);
    crate::markers::crash_looping(&deaths, now_ms, cfg.crashloop_max, window_ms).then(|| {
        format!(
            "crash-looping: it died {} times within {} s and is not woken until those deaths \
             are older — see iapeer logs {p} and its pane log; restart or new starts it now",
            cfg.crashloop_max,
            cfg.crashloop_window.as_secs(),
            p = id.personality
        )
    })
}

/// The control request of a verb (all but `refresh`, which is no daemon operation).
fn control_request(personality: String, verb: Verb, runtime: Option<String>) -> Request {
    match verb {
        Verb::Wake | Verb::Refresh => Request::Wake {
            personality,
            runtime,
        },
        Verb::Stop => Request::Stop {
            personality: Some(personality),
            runtime,
            all: false,
            everyone: false,
        },
        Verb::Start => Request::Start {
            personality: Some(personality),
            runtime,
            all: false,
        },
        Verb::New => Request::New {
            personality,
            runtime,
        },
        Verb::Restart => Request::Restart {
            personality,
            runtime,
        },
        Verb::Interrupt => Request::Interrupt {
            personality,
            runtime,
        },
        Verb::Compact => Request::Compact {
            personality,
            runtime,
        },
    }
}

/// A 200 answer: `fields` (an object) after `api`, `version` and `ts` (spec 10 §1).
fn document(fields: serde_json::Value) -> Reply {
    let mut doc = json!({
        "api": 1,
        "version": env!("CARGO_PKG_VERSION"),
        "ts": now_ts(),
    });
    if let (Some(d), serde_json::Value::Object(f)) = (doc.as_object_mut(), fields) {
        d.extend(f);
    }
    route::ok(200, &doc)
}

fn now_ts() -> String {
    crate::clock::log_ts(jiff::Timestamp::now())
}

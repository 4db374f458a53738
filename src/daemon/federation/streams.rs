//! Delivery across hosts (issue 28 item 3): three threads, each with its own blocking Redis
//! connection (the `redis` crate's synchronous API), started with the daemon and idle until
//! the link ([`super::link`]) says the host has joined. Every stream names both ends
//! (`…:<to>:from:<from>`, [`keys`]): a host writes only streams `…:from:<itself>` and reads
//! only streams addressed to itself, and takes the sending host from the key it read.
//!
//! - `federation-inbox` reads this host's inbox streams, one per other host the link saw
//!   (`iapeer:v1:inbox:<host>:from:<other>`, all in one `XREADGROUP`), with the consumer group
//!   [`keys::GROUP`] (consumer: the host's name; the group made with `MKSTREAM` on a stream's
//!   first sight), blocking up to [`BLOCK`] per read (no busy polling). Its first read of
//!   each stream after the daemon starts takes the entries this host read and never
//!   acknowledged (id `0`: a daemon killed mid-delivery), then the new ones (`>`). Each goes
//!   to the router as an [`Event::Inbound`] with the sending host of its stream's key (an
//!   entry whose `from` names another host is refused, logged and acknowledged): the router
//!   routes it as a local send with its message id, so the recipient's id ledger never pastes
//!   it twice.
//! - `federation-write` writes: a send to a remote peer (the sender authenticated and the
//!   fields checked first, [`entry_for`]) onto `inbox:<host>:from:<this host>`, and an inbox
//!   entry's outcome onto `reply:<sender host>:from:<this host>`, then `XACK`s the entry
//!   (only after the outcome is written).
//! - `federation-reply` reads this host's reply streams (`reply:<host>:from:<other>`, plain
//!   `XREAD`, blocking) and hands each outcome to the router ([`Event::Outcome`], with the
//!   answering host of the key), which answers the waiting sender.
//!
//! Each ends when the daemon's stop channel closes. Redis away: each tries again after
//! [`super::link::backoff`]; a send that cannot be written is answered at once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use redis::streams::StreamReadReply;

use super::hub::{outcome_of, Event, Hub, Write};
use crate::daemon::route::{self, Caller, SendInput};
use crate::federation::keys::{self, Entry, Outcome};
use crate::federation::link::{self, backoff, connect};
use crate::federation::Joined;
use crate::paths::Paths;
use crate::protocol::{Code, Failure};
use crate::registry::Registry;

/// The longest a blocking stream read waits before it looks at the stop channel again.
pub const BLOCK: Duration = Duration::from_millis(1000);

/// Entries read per `XREADGROUP`/`XREAD`.
const COUNT: usize = 100;

/// Where the threads hand what they read: the router's inbox. False when it is gone.
pub type Sink = Arc<dyn Fn(Event) -> bool + Send + Sync>;

/// Start the three threads (module doc).
pub fn spawn(
    paths: Paths,
    hub: Arc<Hub>,
    writes: Receiver<Write>,
    sink: Sink,
    stop: Receiver<()>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::new();
    {
        let (hub, sink, stop) = (hub.clone(), sink.clone(), stop.clone());
        threads.push(
            std::thread::Builder::new()
                .name("federation-inbox".into())
                .spawn(move || read_inbox(&hub, &sink, &stop))?,
        );
    }
    {
        let (hub, sink, stop) = (hub.clone(), sink.clone(), stop.clone());
        threads.push(
            std::thread::Builder::new()
                .name("federation-reply".into())
                .spawn(move || read_replies(&hub, &sink, &stop))?,
        );
    }
    threads.push(
        std::thread::Builder::new()
            .name("federation-write".into())
            .spawn(move || write_loop(&paths, &hub, &writes, &sink, &stop))?,
    );
    Ok(threads)
}

/// Wait `d` on the stop channel: false when the daemon stops.
fn pause(stop: &Receiver<()>, d: Duration) -> bool {
    matches!(stop.recv_timeout(d), Err(RecvTimeoutError::Timeout))
}

/// A connection for the membership in effect, reconnecting when it changes; `None` while
/// not joined or Redis is away (after a pause; the daemon may have stopped meanwhile).
struct Conn {
    con: Option<(Joined, redis::Connection)>,
    failures: u32,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            con: None,
            failures: 0,
        }
    }

    fn get(&mut self, hub: &Hub, stop: &Receiver<()>) -> Option<(Joined, &mut redis::Connection)> {
        let Some(j) = hub.joined() else {
            self.con = None;
            pause(stop, link::POLL);
            return None;
        };
        if self.con.as_ref().is_some_and(|(c, _)| *c != j) {
            self.con = None;
        }
        if self.con.is_none() {
            match connect(&j) {
                Ok(c) => {
                    self.failures = 0;
                    self.con = Some((j, c));
                }
                Err(_) => {
                    self.failed(stop);
                    return None;
                }
            }
        }
        self.con.as_mut().map(|(j, c)| (j.clone(), c))
    }

    /// A command failed: drop the connection and back off.
    fn failed(&mut self, stop: &Receiver<()>) {
        self.con = None;
        self.failures += 1;
        pause(stop, backoff(self.failures));
    }
}

fn stopped(stop: &Receiver<()>) -> bool {
    !matches!(stop.try_recv(), Err(crossbeam_channel::TryRecvError::Empty))
}

/// The streams addressed to host `own`, `key(own, other)` for each other host the link last
/// saw (the `hosts` hash, online or not); `None` after a pause of [`BLOCK`] while there is
/// no other host (nothing can be addressed to this one yet).
fn addressed(
    hub: &Hub,
    own: &str,
    key: fn(&str, &str) -> String,
    stop: &Receiver<()>,
) -> Option<Vec<String>> {
    let streams: Vec<String> = hub
        .view()
        .map(|(_, _, hosts)| hosts.iter().map(|h| key(own, &h.host)).collect())
        .unwrap_or_default();
    if streams.is_empty() {
        pause(stop, BLOCK);
        return None;
    }
    Some(streams)
}

/// `XREADGROUP GROUP iapeer <host> COUNT … [BLOCK …] STREAMS <keys…> <ids…>`, one id for
/// every key.
fn read_group(host: &str, streams: &[String], id: &str, block: bool) -> redis::Cmd {
    let mut cmd = redis::cmd("XREADGROUP");
    cmd.arg("GROUP")
        .arg(keys::GROUP)
        .arg(host)
        .arg("COUNT")
        .arg(COUNT);
    if block {
        cmd.arg("BLOCK").arg(BLOCK.as_millis() as u64);
    }
    cmd.arg("STREAMS").arg(streams);
    for _ in streams {
        cmd.arg(id);
    }
    cmd
}

/// Make the consumer group of each stream in `streams` not in `grouped` yet (from the
/// stream's start, the stream made if absent; one that exists already is fine), adding it to
/// `grouped`. False when Redis refused one (logged): the connection is to be dropped.
fn make_groups(
    con: &mut redis::Connection,
    streams: &[String],
    grouped: &mut HashSet<String>,
) -> bool {
    for stream in streams {
        if grouped.contains(stream) {
            continue;
        }
        let created: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(stream)
            .arg(keys::GROUP)
            .arg("0")
            .arg("MKSTREAM")
            .query(con);
        match created {
            Err(e) if e.code() != Some("BUSYGROUP") => {
                log::warn!("federation: cannot make the consumer group of {stream}: {e}");
                return false;
            }
            _ => {
                grouped.insert(stream.clone());
            }
        }
    }
    true
}

/// The refusal of an inbox entry older than `retention` (issue 28 item 4), by host `own`.
fn too_old(own: &str, retention: Duration) -> Failure {
    Failure::new(
        Code::Timeout,
        format!(
            "host {own} was offline longer than the {} a message is kept for it: NOT delivered \
             — send it again if it still matters",
            keys::retention_text(retention)
        ),
    )
}

fn read_inbox(hub: &Hub, sink: &Sink, stop: &Receiver<()>) {
    let retention = crate::daemon::test_hooks::federation_retention().0;
    let mut conn = Conn::new();
    // The streams whose consumer group exists (made on first sight; forgotten when a read
    // fails: Redis may have restarted empty).
    let mut grouped: HashSet<String> = HashSet::new();
    // The streams whose entries this host read before and never acknowledged were taken,
    // once per daemon.
    let mut pending_done: HashSet<String> = HashSet::new();
    while !stopped(stop) {
        let Some((j, con)) = conn.get(hub, stop) else {
            continue;
        };
        let Some(streams) = addressed(hub, &j.host, keys::inbox, stop) else {
            continue;
        };
        if !make_groups(con, &streams, &mut grouped) {
            conn.failed(stop);
            continue;
        }
        let pending: Vec<String> = streams
            .iter()
            .filter(|s| !pending_done.contains(*s))
            .cloned()
            .collect();
        let cmd = if pending.is_empty() {
            read_group(&j.host, &streams, ">", true)
        } else {
            read_group(&j.host, &pending, "0", false)
        };
        let Some(read) = read_stream(&mut conn, stop, &cmd, "this host's inbox streams") else {
            // Redis may have restarted (empty: groups to make again; from its append-only
            // file: entries it handed this host in a reply the failure cut off are pending
            // there, so they are read again — the id ledger answers any delivered `earlier`).
            grouped.clear();
            pending_done.clear();
            continue;
        };
        for (stream, ids) in read {
            if !pending.is_empty() && !ids.is_empty() {
                log::info!(
                    "federation: {} entries of {stream} read before and not acknowledged: routing them again",
                    ids.len()
                );
            }
            let Some(host) = keys::inbox_sender(&stream, &j.host) else {
                continue;
            };
            for sid in ids {
                let map = sid
                    .map
                    .iter()
                    .filter_map(|(k, v)| {
                        redis::from_redis_value_ref::<String>(v)
                            .ok()
                            .map(|v| (k.clone(), v))
                    })
                    .collect();
                let entry = Entry::from_fields(&map).and_then(|e| e.check_host(&host).map(|()| e));
                match entry {
                    Ok(entry) if keys::expired(&sid.id, crate::clock::now_ms(), retention) => {
                        log::info!(
                            "federation: {stream} entry {} kept longer than {}: refused as too old",
                            sid.id,
                            keys::retention_text(retention)
                        );
                        let outcome = Err(too_old(&j.host, retention));
                        hub.write(Write::Outcome {
                            host: host.clone(),
                            outcome: outcome_record(&entry, &outcome),
                            entry: sid.id,
                        });
                    }
                    Ok(entry) => {
                        if !sink(Event::Inbound {
                            host: host.clone(),
                            entry,
                            stream_id: sid.id,
                        }) {
                            return;
                        }
                    }
                    Err(e) => {
                        // Nothing to answer it with: acknowledged so it is not read again.
                        log::warn!("federation: {stream} entry {} refused: {e}", sid.id);
                        if let Some((_, con)) = conn.con.as_mut() {
                            let _: redis::RedisResult<()> = redis::cmd("XACK")
                                .arg(&stream)
                                .arg(keys::GROUP)
                                .arg(&sid.id)
                                .query(con);
                        }
                    }
                }
            }
        }
        // Every pending entry of those streams is handed on; their next reads take new ones.
        pending_done.extend(pending);
    }
}

fn read_replies(hub: &Hub, sink: &Sink, stop: &Receiver<()>) {
    let mut conn = Conn::new();
    // The replies are read from the daemon's start on (Redis's clock: stream ids grow with
    // it), so none written between two reads is missed: `since`, the first connection's
    // `TIME`, is where a stream first seen starts; `last`, each stream's last reply read.
    let mut since: Option<String> = None;
    let mut last: HashMap<String, String> = HashMap::new();
    while !stopped(stop) {
        let Some((j, con)) = conn.get(hub, stop) else {
            continue;
        };
        let start = match &since {
            Some(s) => s.clone(),
            None => match redis::cmd("TIME").query::<(u64, u64)>(con) {
                Ok((secs, micros)) => {
                    let s = format!("{}-0", secs * 1000 + micros / 1000);
                    since = Some(s.clone());
                    s
                }
                Err(_) => {
                    conn.failed(stop);
                    continue;
                }
            },
        };
        let Some(streams) = addressed(hub, &j.host, keys::reply, stop) else {
            continue;
        };
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(COUNT)
            .arg("BLOCK")
            .arg(BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(&streams);
        for s in &streams {
            cmd.arg(last.get(s).unwrap_or(&start));
        }
        let Some(read) = read_stream(&mut conn, stop, &cmd, "this host's reply streams") else {
            continue;
        };
        for (stream, ids) in read {
            let from = keys::reply_sender(&stream, &j.host);
            for sid in ids {
                last.insert(stream.clone(), sid.id.clone());
                let (Some(ticket), Some(json)) =
                    (sid.get::<String>("ticket"), sid.get::<String>("outcome"))
                else {
                    continue;
                };
                let outcome = match outcome_of(&json) {
                    Ok(o) => o,
                    Err(e) => Err(Failure::new(
                        Code::Internal,
                        format!(
                            "the remote host's answer cannot be read (not a send's outcome: {e})"
                        ),
                    )),
                };
                if !sink(Event::Outcome {
                    ticket,
                    from: from.clone(),
                    outcome,
                }) {
                    return;
                }
            }
        }
    }
}

fn write_loop(
    paths: &Paths,
    hub: &Hub,
    writes: &Receiver<Write>,
    sink: &Sink,
    stop: &Receiver<()>,
) {
    let mut conn = Conn::new();
    loop {
        let w = crossbeam_channel::select! {
            recv(writes) -> w => match w { Ok(w) => w, Err(_) => return },
            recv(stop) -> _ => return,
        };
        match w {
            Write::Send {
                ticket,
                input,
                name,
                host,
                timeout_ms,
            } => {
                let refused = |f: Failure| {
                    sink(Event::Outcome {
                        ticket: ticket.clone(),
                        from: None,
                        outcome: Err(f),
                    })
                };
                let Some(own) = hub.joined().map(|j| j.host) else {
                    refused(Failure::new(
                        Code::Offline,
                        "this host has left the federation; message NOT delivered",
                    ));
                    continue;
                };
                let entry =
                    match entry_for(paths, &ticket, &input, (&name, &host), &own, timeout_ms) {
                        Ok(e) => e,
                        Err(f) => {
                            refused(f);
                            continue;
                        }
                    };
                let stream = keys::inbox(&host, &own);
                match xadd_with(&mut conn, hub, stop, &stream, &entry.fields()) {
                    Ok(()) => sink(Event::Written {
                        ticket: ticket.clone(),
                        from: entry.from.rsplit_once('@').map_or("", |(f, _)| f).into(),
                    }),
                    Err(e) => refused(Failure::new(
                        Code::Offline,
                        format!(
                            "the federation's Redis does not answer ({e}); message NOT delivered \
                             to {name}@{host} — iapeer federation status says more"
                        ),
                    )),
                };
            }
            Write::Outcome {
                host,
                outcome,
                entry,
            } => {
                // Kept until written: an entry is acknowledged only after its outcome is.
                let fields = [
                    ("ticket", outcome.ticket.clone()),
                    ("id", outcome.id.clone()),
                    ("outcome", outcome.outcome.clone()),
                ];
                loop {
                    if stopped(stop) {
                        return;
                    }
                    let Some((j, _)) = conn.get(hub, stop) else {
                        continue;
                    };
                    let reply = keys::reply(&host, &j.host);
                    let r = xadd_with(&mut conn, hub, stop, &reply, &fields).and_then(|()| {
                        let (_, con) = conn.con.as_mut().ok_or_else(gone)?;
                        redis::cmd("XACK")
                            .arg(keys::inbox(&j.host, &host))
                            .arg(keys::GROUP)
                            .arg(&entry)
                            .query::<()>(con)
                    });
                    match r {
                        Ok(()) => break,
                        Err(e) => {
                            log::warn!("federation: the outcome of {entry} for host {host} is not written yet: {e}");
                            conn.failed(stop);
                        }
                    }
                }
            }
        }
    }
}

/// Run a stream read (`XREAD`/`XREADGROUP`) on the connection: its entries by stream key,
/// or `None` after a failure (logged; the connection is dropped and the thread backs off).
fn read_stream(
    conn: &mut Conn,
    stop: &Receiver<()>,
    cmd: &redis::Cmd,
    stream: &str,
) -> Option<Vec<(String, Vec<redis::streams::StreamId>)>> {
    let (_, con) = conn.con.as_mut()?;
    match cmd.query::<Option<StreamReadReply>>(con) {
        Ok(r) => Some(
            r.map(|r| r.keys.into_iter().map(|k| (k.key, k.ids)).collect())
                .unwrap_or_default(),
        ),
        Err(e) => {
            log::warn!("federation: reading {stream} failed: {e}");
            conn.failed(stop);
            None
        }
    }
}

fn gone() -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        "no connection to redis",
    ))
}

/// `XADD <stream> MAXLEN ~ STREAM_MAXLEN * <fields>` on the connection, connecting first.
fn xadd_with(
    conn: &mut Conn,
    hub: &Hub,
    stop: &Receiver<()>,
    stream: &str,
    fields: &[(&str, String)],
) -> redis::RedisResult<()> {
    if conn.con.is_none() && conn.get(hub, stop).is_none() {
        return Err(gone());
    }
    let (_, con) = conn.con.as_mut().ok_or_else(gone)?;
    let mut cmd = redis::cmd("XADD");
    cmd.arg(stream)
        .arg("MAXLEN")
        .arg("~")
        .arg(keys::STREAM_MAXLEN)
        .arg("*");
    for (k, v) in fields {
        cmd.arg(*k).arg(v);
    }
    let r = cmd.query::<String>(con).map(|_| ());
    if r.is_err() {
        conn.con = None;
    }
    r
}

/// The inbox entry of a send to peer `name` of `host` from this host (`own`): the sender
/// authenticated as for a local send ([`route::resolve_caller`]), the fields checked
/// ([`route::validate`]), attachments read inline ([`super::attach::inline`]).
///
/// Errors: the refusal, as a local send words it.
pub fn entry_for(
    paths: &Paths,
    ticket: &str,
    input: &SendInput,
    (name, host): (&str, &str),
    own: &str,
    timeout_ms: u64,
) -> Result<Entry, Failure> {
    let registry =
        Registry::load_cached(paths).map_err(|e| Failure::new(Code::Internal, e.to_string()))?;
    let (caller, peer) = match &input.caller {
        Caller::Remote { .. } | Caller::Daemon => {
            return Err(Failure::new(
                Code::InvalidArgument,
                "only a peer of this host sends to another host; message NOT delivered",
            ))
        }
        c => route::resolve_caller(c, &registry)?,
    };
    let mut local = input.clone();
    local.args.to = name.to_string();
    let topic = route::validate(&local)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms);
    let attachments = super::attach::inline(&input.args.attachments, (name, host), deadline)?;
    Ok(Entry {
        ticket: ticket.to_string(),
        id: input.args.id.clone().unwrap_or_else(crate::msgids::new_id),
        from: format!("{caller}@{own}"),
        intelligence: peer.nature().as_str().to_string(),
        to: name.to_string(),
        runtime: input.args.runtime.clone(),
        topic,
        body: input.args.message.clone(),
        if_busy: input.args.if_busy.as_str().to_string(),
        timeout_ms,
        attachments,
    })
}

/// The outcome record of an inbox entry's send.
pub fn outcome_record(entry: &Entry, outcome: &crate::daemon::reply::SendOutcome) -> Outcome {
    Outcome {
        ticket: entry.ticket.clone(),
        id: entry.id.clone(),
        outcome: super::hub::outcome_json(outcome),
    }
}

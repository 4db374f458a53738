//! `iapeer notifier-run`: the program of the built-in `notifier` runtime, one process per
//! service peer (`timer` or `watcher`; the role follows the name, see [`Role::of_personality`]).
//! The daemon runs it on pipes like any router runtime and writes wire-form envelopes to its
//! stdin; it answers calls, keeps the trigger set (rebuilt from every registered profile at
//! start, after each change and every minute), fires timers, runs watcher scripts and
//! delivers every signal through the chain with `iapeer send`.
//!
//! One event loop on one channel: stdin, child outcomes and signals arrive as messages; the
//! loop sleeps until the next fire, retry, restart or heartbeat (at most a minute) with
//! `recv_deadline` — nothing polls. It ends when stdin closes or on SIGTERM/SIGINT/SIGHUP,
//! killing every script's process group first. A lock file keeps a second process for the
//! same peer waiting until the first has gone, so a signal is never driven twice.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use fs2::FileExt;
use jiff::tz::TimeZone;
use jiff::Timestamp;

use super::backoff::{Backoff, Decision};
use super::call::{self, Command};
use super::chain::{self, Entry, Kind, Status, Step};
use super::proc::{self, ScriptEvent};
use super::trigger::{Role, Trigger};
use super::when::{self, When};
use super::{spool, store};
use crate::envelope::{extract, Envelope};
use crate::eventlog::{Event, EventLog};
use crate::names::Intelligence;
use crate::paths::Paths;

/// Exit code when the program cannot start.
const SETUP_EXIT: i32 = 2;
/// The longest sleep of the loop (clock jumps, hand-edited profiles).
const MAX_SLEEP: Duration = Duration::from_secs(60);

type Key = (String, String);

enum Ev {
    Inbound(Envelope),
    Closed(&'static str),
    Sent {
        sig: String,
        to: String,
        result: Result<(), proc::ProcError>,
    },
    Replied {
        to: String,
        result: Result<(), proc::ProcError>,
    },
    Checked {
        key: Key,
        result: Result<(), proc::ProcError>,
    },
    Script {
        key: Key,
        gen: u64,
        ev: ScriptEvent,
    },
}

/// Run the service until stdin closes or a stop signal. Returns the exit code.
pub fn run() -> i32 {
    let runs_on = "the notifier runtime (e.g. timer or watcher)";
    let (me, paths) = match crate::inbox::writer::peer_from_env("notifier-run", runs_on) {
        Ok(peer) => peer,
        Err(why) => {
            eprintln!("{why}");
            return SETUP_EXIT;
        }
    };
    let runtime = std::env::var("PEER_RUNTIME")
        .ok()
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "notifier".into());
    let spool_dir = spool::dir(&paths, &me);
    if let Err(e) = crate::fsutil::ensure_dir(&spool_dir) {
        eprintln!(
            "iapeer notifier-run: cannot create {}: {e}",
            spool_dir.display()
        );
        return SETUP_EXIT;
    }
    let lock_path = spool_dir.parent().unwrap_or(&spool_dir).join("run.lock");
    use std::os::unix::fs::OpenOptionsExt;
    let lock = match std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        // Its user's alone: another user who could open it could hold the lock for ever.
        .mode(crate::fsutil::MODE_PRIVATE)
        .open(&lock_path)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "iapeer notifier-run: cannot open {}: {e}",
                lock_path.display()
            );
            return SETUP_EXIT;
        }
    };
    if lock.lock_exclusive().is_err() {
        eprintln!("iapeer notifier-run: cannot lock {}", lock_path.display());
        return SETUP_EXIT;
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    spawn_stdin_reader(tx.clone());
    spawn_signal_watch(tx.clone());
    let mut svc = Service::new(paths, me, runtime, spool_dir, tx);
    svc.start();
    svc.run(&rx);
    svc.shutdown();
    drop(lock);
    0
}

fn spawn_stdin_reader(tx: Sender<Ev>) {
    std::thread::spawn(move || {
        let mut buf: Vec<u8> = Vec::new();
        let read = crate::fsutil::read_chunks(std::io::stdin().lock(), |chunk| {
            buf.extend_from_slice(chunk);
            let (envs, used) = extract(&buf);
            buf.drain(..used);
            envs.into_iter()
                .all(|env| tx.send(Ev::Inbound(env)).is_ok())
        });
        // A failed send means the service is gone: no one to tell.
        if !matches!(read, Ok(false)) {
            let _ = tx.send(Ev::Closed("stdin closed"));
        }
    });
}

fn spawn_signal_watch(tx: Sender<Ev>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]) {
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(Ev::Closed("stop signal"));
            }
        });
    }
}

struct TimerSlot {
    t: Trigger,
    when: When,
    anchor: Timestamp,
    next: Option<Timestamp>,
    checking: bool,
}

struct ScriptRun {
    pgid: u32,
    gen: u64,
    started: Instant,
    printed: bool,
    last_line: Instant,
}

struct WatchSlot {
    t: Trigger,
    run: Option<ScriptRun>,
    backoff: Backoff,
    restart_at: Option<Instant>,
}

enum DState {
    InFlight(String),
    Waiting(Instant),
    Ready,
}

struct Delivery {
    entry: Entry,
    state: DState,
}

struct Service {
    paths: Paths,
    me: String,
    identity: String,
    role: Role,
    tz: TimeZone,
    exe: PathBuf,
    tx: Sender<Ev>,
    spool_dir: PathBuf,
    backstop: String,
    retry: Duration,
    log: EventLog,
    lifecycle: EventLog,
    timers: BTreeMap<Key, TimerSlot>,
    watchers: BTreeMap<Key, WatchSlot>,
    deliveries: BTreeMap<String, Delivery>,
    reported: HashSet<String>,
    /// The latest texts sent to each peer, to recognise a message that only echoes one.
    recent: HashMap<String, VecDeque<String>>,
    gen: u64,
    epoch: Instant,
    next_rebuild: Instant,
}

impl Service {
    fn new(
        paths: Paths,
        me: String,
        runtime: String,
        spool_dir: PathBuf,
        tx: Sender<Ev>,
    ) -> Service {
        let log_path = paths
            .root()
            .join("logs")
            .join("notifier")
            .join(format!("{me}.log"));
        let lifecycle = EventLog::from_env(paths.lifecycle_log(), "lifecycle");
        Service {
            identity: format!("{runtime}-{me}"),
            role: Role::of_personality(&me),
            tz: TimeZone::system(),
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("iapeer")),
            backstop: std::env::var(chain::FALLBACK_TARGET_VAR)
                .unwrap_or_default()
                .trim()
                .to_string(),
            retry: chain::retry_delay(
                std::env::var(crate::config::vars::IAPEER_NOTIFIER_RETRY_MS.name)
                    .ok()
                    .as_deref(),
            ),
            log: EventLog::from_env(log_path, "notifier"),
            lifecycle,
            paths,
            me,
            tx,
            spool_dir,
            timers: BTreeMap::new(),
            watchers: BTreeMap::new(),
            deliveries: BTreeMap::new(),
            reported: HashSet::new(),
            recent: HashMap::new(),
            gen: 0,
            epoch: Instant::now(),
            next_rebuild: Instant::now() + MAX_SLEEP,
        }
    }

    fn ev(&self, name: &str) -> Event {
        Event::new(name).field("identity", &self.identity)
    }

    /// [`Self::ev`] about the trigger `k`: its owner and id follow the identity.
    fn trigger_ev(&self, name: &str, k: &Key) -> Event {
        self.ev(name).field("owner", &k.0).field("id", &k.1)
    }

    /// Re-drive the spool, then build the trigger set.
    fn start(&mut self) {
        self.log
            .append(&self.ev("notifier-start").field("role", self.role.as_str()));
        let (entries, errors) = spool::load(&self.spool_dir);
        for e in errors {
            self.log
                .append(&self.ev("spool-read-error").field("detail", e));
        }
        for entry in entries.into_iter().filter(|e| e.status == Status::Pending) {
            self.log.append(
                &self
                    .ev("spool-redrive")
                    .field("sig", &entry.id)
                    .field("target", &entry.target)
                    .field("attempts", entry.attempts.len()),
            );
            self.deliveries.insert(
                entry.id.clone(),
                Delivery {
                    entry,
                    state: DState::Ready,
                },
            );
        }
        self.rebuild();
    }

    fn run(&mut self, rx: &Receiver<Ev>) {
        loop {
            self.tick();
            let deadline = self.deadline();
            match rx.recv_deadline(deadline) {
                Ok(Ev::Closed(why)) => {
                    self.log
                        .append(&self.ev("notifier-stop").field("cause", why));
                    return;
                }
                Ok(ev) => self.handle(ev),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn shutdown(&mut self) {
        for slot in self.watchers.values_mut() {
            if let Some(run) = slot.run.take() {
                proc::end_group(run.pgid, true);
            }
        }
    }

    fn ms(&self, at: Instant) -> u64 {
        at.duration_since(self.epoch).as_millis() as u64
    }

    fn instant_of(&self, at: Timestamp, now: Timestamp, now_i: Instant) -> Instant {
        let d = at.duration_since(now);
        if d.is_negative() {
            now_i
        } else {
            now_i + Duration::try_from(d).unwrap_or(MAX_SLEEP)
        }
    }

    /// When the loop must wake next.
    fn deadline(&self) -> Instant {
        let now_i = Instant::now();
        let now = Timestamp::now();
        let mut d = (now_i + MAX_SLEEP).min(self.next_rebuild);
        for slot in self.timers.values() {
            if let Some(n) = slot.next {
                d = d.min(self.instant_of(n, now, now_i));
            }
        }
        for del in self.deliveries.values() {
            if let DState::Waiting(at) = del.state {
                d = d.min(at);
            }
        }
        for w in self.watchers.values() {
            if let Some(at) = w.restart_at {
                d = d.min(at);
            }
            if let (Some(run), Some(hb)) = (&w.run, w.t.heartbeat_ms()) {
                d = d.min(run.last_line + Duration::from_millis(hb));
            }
        }
        d
    }

    fn tick(&mut self) {
        let now_i = Instant::now();
        if now_i >= self.next_rebuild {
            self.rebuild();
        }
        self.fire_due_timers();
        self.tend_watchers(now_i);
        self.pump();
    }

    // ---- the trigger set -------------------------------------------------------------

    fn rebuild(&mut self) {
        self.next_rebuild = Instant::now() + MAX_SLEEP;
        let tz = self.tz.clone();
        let check = move |w: &str| when::check(w, Timestamp::now(), &tz).map(|_| ());
        let (list, errors) = store::load_all(&self.paths, self.role, &check);
        for e in errors {
            if self.reported.insert(e.clone()) {
                let ev = self.ev("notifier-trigger-skipped").field("detail", &e);
                self.log.append(&ev);
                self.lifecycle.append(&ev);
            }
        }
        let mut wanted: BTreeMap<Key, Trigger> = BTreeMap::new();
        for t in list {
            if let Some(stopped) = &t.stopped {
                // Stopped for good (spec 09): not run again until registered again.
                if self
                    .reported
                    .insert(format!("stopped {} {} {}", t.owner, t.id, stopped.at))
                {
                    self.log.append(
                        &self
                            .ev("watch-kept-stopped")
                            .field("owner", &t.owner)
                            .field("id", &t.id)
                            .field("since", &stopped.at),
                    );
                }
                continue;
            }
            wanted.insert((t.owner.clone(), t.id.clone()), t);
        }
        match self.role {
            Role::Time => self.rebuild_timers(wanted),
            Role::Event => self.rebuild_watchers(wanted),
        }
    }

    fn rebuild_timers(&mut self, wanted: BTreeMap<Key, Trigger>) {
        let now = Timestamp::now();
        self.timers.retain(|k, s| wanted.get(k) == Some(&s.t));
        for (k, t) in wanted {
            if self.timers.contains_key(&k) {
                continue;
            }
            let Some(w) = t.when.as_deref().and_then(|w| when::parse(w).ok()) else {
                continue;
            };
            let next = w.next_after(now, now, &self.tz);
            self.log.append(
                &self
                    .trigger_ev("armed", &k)
                    .opt("next", next.map(crate::clock::log_ts)),
            );
            self.timers.insert(
                k,
                TimerSlot {
                    t,
                    when: w,
                    anchor: now,
                    next,
                    checking: false,
                },
            );
        }
    }

    fn rebuild_watchers(&mut self, wanted: BTreeMap<Key, Trigger>) {
        let gone: Vec<Key> = self
            .watchers
            .iter()
            .filter(|(k, s)| wanted.get(*k) != Some(&s.t))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            if let Some(mut slot) = self.watchers.remove(&k) {
                if let Some(run) = slot.run.take() {
                    proc::end_group(run.pgid, false);
                }
                self.log.append(&self.trigger_ev("watch-ended", &k));
            }
        }
        for (k, t) in wanted {
            if self.watchers.contains_key(&k) {
                continue;
            }
            self.watchers.insert(
                k.clone(),
                WatchSlot {
                    t,
                    run: None,
                    backoff: Backoff::default(),
                    restart_at: None,
                },
            );
            self.start_script(&k);
        }
    }

    // ---- timers ----------------------------------------------------------------------

    fn fire_due_timers(&mut self) {
        let now = Timestamp::now();
        let slack = jiff::SignedDuration::from_millis(1);
        let keys: Vec<Key> = self.timers.keys().cloned().collect();
        for k in keys {
            let Some(slot) = self.timers.get_mut(&k) else {
                continue;
            };
            let (fire, next) = when::tick(&slot.when, slot.anchor, slot.next, now, slack, &self.tz);
            slot.next = next;
            let Some(sched) = fire else {
                continue;
            };
            if slot.checking {
                continue;
            }
            match slot.t.check.clone() {
                Some(program) => {
                    slot.checking = true;
                    let cwd = store::cwd_of(&self.paths, &k.0).unwrap_or_else(|| "/".into());
                    let tx = self.tx.clone();
                    let key = k.clone();
                    std::thread::spawn(move || {
                        let result = proc::run_check(&program, &cwd, proc::CHECK_TIMEOUT);
                        let _ = tx.send(Ev::Checked { key, result });
                    });
                }
                None => {
                    let t = slot.t.clone();
                    self.fire(&t, Some(sched));
                }
            }
        }
    }

    fn fire(&mut self, t: &Trigger, sched: Option<Timestamp>) {
        let meta = serde_json::json!({
            "trigger": t.id,
            "when": t.when,
            "scheduled": sched.map(crate::clock::log_ts),
        });
        self.signal(
            Kind::Fire,
            t,
            &t.target,
            t.message.clone().unwrap_or_default(),
            Some(meta),
        );
    }

    // ---- watchers --------------------------------------------------------------------

    fn start_script(&mut self, k: &Key) {
        self.gen += 1;
        let gen = self.gen;
        let cwd = store::cwd_of(&self.paths, &k.0).unwrap_or_else(|| "/".into());
        let Some(slot) = self.watchers.get_mut(k) else {
            return;
        };
        slot.restart_at = None;
        let script = slot.t.script.clone().unwrap_or_default();
        let key = k.clone();
        let started = proc::start_script(&script, &cwd, self.tx.clone(), move |ev| Ev::Script {
            key: key.clone(),
            gen,
            ev,
        });
        let now = Instant::now();
        match started {
            Ok(pgid) => {
                slot.run = Some(ScriptRun {
                    pgid,
                    gen,
                    started: now,
                    printed: false,
                    last_line: now,
                });
                self.log
                    .append(&self.trigger_ev("watch-start", k).field("pid", pgid));
            }
            Err(e) => {
                self.log
                    .append(&self.ev("watch-start-failed").field("detail", &e));
                let ms = self.ms(now);
                self.after_exit(k, ms, ms, false, &e.to_string());
            }
        }
    }

    fn tend_watchers(&mut self, now: Instant) {
        let keys: Vec<Key> = self.watchers.keys().cloned().collect();
        for k in keys {
            let Some(slot) = self.watchers.get_mut(&k) else {
                continue;
            };
            if slot.restart_at.is_some_and(|at| at <= now) {
                self.start_script(&k);
                continue;
            }
            let (Some(run), Some(hb)) = (slot.run.as_mut(), slot.t.heartbeat_ms()) else {
                continue;
            };
            if now.duration_since(run.last_line) >= Duration::from_millis(hb) {
                run.last_line = now;
                let pgid = run.pgid;
                let t = slot.t.clone();
                proc::end_group(pgid, false);
                let text = format!(
                    "[watcher] Your watcher {} printed nothing for {}s (heartbeatSec), so it was taken as hung and restarted. Script: {}",
                    t.id,
                    t.heartbeat_sec.as_ref().map(|h| h.to_string()).unwrap_or_default(),
                    t.script.as_deref().unwrap_or("")
                );
                self.log.append(&self.trigger_ev("watch-silent", &k));
                self.signal(Kind::Alert, &t, &t.owner, text, None);
            }
        }
    }

    fn on_script(&mut self, k: Key, gen: u64, ev: ScriptEvent) {
        let Some(slot) = self.watchers.get_mut(&k) else {
            return;
        };
        if slot.run.as_ref().map(|r| r.gen) != Some(gen) {
            return;
        }
        match ev {
            ScriptEvent::Line(line) => {
                if line.trim().is_empty() {
                    return;
                }
                if let Some(run) = slot.run.as_mut() {
                    run.printed = true;
                    run.last_line = Instant::now();
                }
                let t = slot.t.clone();
                for part in chain::split_signal(&line) {
                    let meta = serde_json::json!({"trigger": t.id});
                    self.signal(Kind::Forward, &t, &t.target, part, Some(meta));
                }
            }
            ScriptEvent::Stderr(line) => {
                self.log.append(
                    &self
                        .ev("watch-stderr")
                        .field("id", &k.1)
                        .field("line", line),
                );
            }
            ScriptEvent::Exited(how) => {
                let Some(run) = slot.run.take() else {
                    return;
                };
                // The shell is gone; whatever it left running in its group goes with it, so
                // a restart never leaves an orphan behind.
                proc::end_group(run.pgid, false);
                let started = self.ms(run.started);
                let ended = self.ms(Instant::now());
                self.log.append(
                    &self
                        .ev("watch-exit")
                        .field("id", &k.1)
                        .field("how", &how)
                        .field("ms", ended - started),
                );
                self.after_exit(&k, started, ended, run.printed, &how);
            }
        }
    }

    fn after_exit(&mut self, k: &Key, started: u64, ended: u64, printed: bool, how: &str) {
        let Some(slot) = self.watchers.get_mut(k) else {
            return;
        };
        match slot.backoff.on_exit(started, ended, printed) {
            Decision::Restart(d) => slot.restart_at = Some(Instant::now() + d),
            Decision::Stop => {
                slot.restart_at = None;
                let t = slot.t.clone();
                let kept = self.keep_stopped(k, &t, how);
                let text = format!(
                    "[watcher] Your watcher {} failed 5 times within 60 s (last: {how}) and is stopped{}. \
                     Fix the script and register it again (the same id replaces it and lets it run again). Script: {}",
                    t.id,
                    if kept { " (it stays stopped across restarts)" } else { "" },
                    t.script.as_deref().unwrap_or("")
                );
                let ev = self.trigger_ev("watch-stopped", k).field("how", how);
                self.log.append(&ev);
                self.lifecycle.append(&ev);
                self.signal(Kind::Alert, &t, &t.owner, text, None);
            }
        }
    }

    /// Store the stop of watcher `t` with the trigger, so no later start runs it, and drop
    /// its slot. Returns whether the mark was stored; when it was not (profile unwritable,
    /// trigger changed meanwhile) the slot stays, idle, and the failure is logged.
    fn keep_stopped(&mut self, k: &Key, t: &Trigger, how: &str) -> bool {
        let stopped = super::trigger::Stopped {
            at: crate::clock::log_ts(Timestamp::now()),
            last: how.to_string(),
        };
        let marked = store::cwd_of(&self.paths, &k.0)
            .ok_or_else(|| format!("{} is not a registered peer", k.0))
            .and_then(|cwd| {
                store::mark_stopped(&self.paths, &cwd, t, &stopped).map_err(|e| e.to_string())
            });
        match marked {
            Ok(true) => {
                self.watchers.remove(k);
                self.reported
                    .insert(format!("stopped {} {} {}", k.0, k.1, stopped.at));
                true
            }
            Ok(false) => false,
            Err(e) => {
                self.log.append(
                    &self
                        .trigger_ev("watch-stop-not-stored", k)
                        .field("detail", e),
                );
                false
            }
        }
    }

    // ---- delivery ----------------------------------------------------------------------

    fn signal(
        &mut self,
        kind: Kind,
        t: &Trigger,
        target: &str,
        message: String,
        meta: Option<serde_json::Value>,
    ) {
        let now = Timestamp::now();
        let entry = Entry {
            v: 1,
            id: spool::new_id(now.as_millisecond() as u64),
            created_at: crate::clock::log_ts(now),
            kind,
            target: target.to_string(),
            message,
            topic: t.topic.clone(),
            owner: t.owner.clone(),
            chain: chain::build_chain(target, t.fallbacks(), &t.owner, &self.backstop),
            attempts: Vec::new(),
            status: Status::Pending,
            meta,
        };
        if let Err(e) = spool::put(&self.spool_dir, &entry) {
            self.log.append(
                &self
                    .ev("spool-write-error")
                    .field("sig", &entry.id)
                    .field("detail", e),
            );
        }
        self.deliveries.insert(
            entry.id.clone(),
            Delivery {
                entry,
                state: DState::Ready,
            },
        );
    }

    /// Start every delivery that is due and whose recipient has no earlier signal still on
    /// its way, in id order (ids sort in the order they were made, [`spool::new_id`]): one
    /// send at a time per recipient, and none past an earlier one waiting for its retry,
    /// keeps a watcher's lines and a long line's parts in order.
    fn pump(&mut self) {
        let now = Instant::now();
        let mut busy: HashSet<String> = self
            .deliveries
            .values()
            .filter_map(|d| match &d.state {
                DState::InFlight(to) => Some(to.clone()),
                _ => None,
            })
            .collect();
        for (sig, d) in self.deliveries.iter_mut() {
            let due = match d.state {
                DState::Ready => true,
                DState::Waiting(at) => at <= now,
                DState::InFlight(_) => false,
            };
            if !due {
                if let (DState::Waiting(_), Some(to)) = (&d.state, d.entry.next_target()) {
                    busy.insert(to.to_string());
                }
                continue;
            }
            let Step::Send { to, text, link } = d.entry.next_send() else {
                continue;
            };
            if busy.contains(&to) {
                d.state = DState::Ready;
                continue;
            }
            busy.insert(to.clone());
            remember(&mut self.recent, &to, &text);
            d.state = DState::InFlight(to.clone());
            self.log.append(
                &Event::new("deliver-attempt")
                    .field("identity", &self.identity)
                    .field("sig", sig)
                    .field("to", &to)
                    .field("link", link + 1),
            );
            let (exe, from, topic, tx, sig) = (
                self.exe.clone(),
                self.identity.clone(),
                d.entry.topic.clone(),
                self.tx.clone(),
                sig.clone(),
            );
            std::thread::spawn(move || {
                // A spool file written by hand or by another tool may hold an id the
                // daemon refuses: sent without one (no dedupe) rather than never.
                let id = crate::msgids::valid_id(&sig).then_some(sig.as_str());
                let result = proc::send(&exe, &from, &to, &text, topic.as_deref(), id);
                let _ = tx.send(Ev::Sent { sig, to, result });
            });
        }
    }

    fn on_sent(&mut self, sig: String, to: String, result: Result<(), proc::ProcError>) {
        let Some(d) = self.deliveries.get_mut(&sig) else {
            return;
        };
        match result {
            Ok(()) => {
                let d = self.deliveries.remove(&sig).expect("present");
                let _ = spool::remove(&self.spool_dir, &sig);
                self.log.append(
                    &self
                        .ev("sent")
                        .field("sig", &sig)
                        .field("kind", format!("{:?}", d.entry.kind).to_lowercase())
                        .field("to", &to)
                        .opt(
                            "scheduled",
                            d.entry
                                .meta
                                .as_ref()
                                .and_then(|m| m.get("scheduled"))
                                .and_then(|s| s.as_str()),
                        )
                        .field("len", d.entry.message.len()),
                );
            }
            Err(e) => {
                if let Some(now) = renamed_to(&self.paths, &to) {
                    // The peer was renamed (a fire made before its triggers followed): send
                    // to the new name at once; the refusal is not an attempt of the chain.
                    if d.entry.renamed(&to, &now) {
                        let _ = spool::put(&self.spool_dir, &d.entry);
                        d.state = DState::Ready;
                        self.log.append(
                            &self
                                .ev("retarget")
                                .field("sig", &sig)
                                .field("from", &to)
                                .field("to", &now),
                        );
                        return;
                    }
                }
                let step = d.entry.failed(
                    &to,
                    crate::clock::log_ts(Timestamp::now()),
                    &e.to_string(),
                    self.retry,
                );
                let _ = spool::put(&self.spool_dir, &d.entry);
                self.log.append(
                    &Event::new("deliver-failed")
                        .field("identity", &self.identity)
                        .field("sig", &sig)
                        .field("to", &to)
                        .field("err", &e),
                );
                match step {
                    Step::Wait(w) => d.state = DState::Waiting(Instant::now() + w),
                    Step::Send { .. } => d.state = DState::Ready,
                    Step::Lost => {
                        let d = self.deliveries.remove(&sig).expect("present");
                        let ev = self
                            .ev("notifier-lost")
                            .field("sig", &sig)
                            .field("for", &d.entry.target)
                            .field("owner", &d.entry.owner)
                            .field("chain", d.entry.chain.join("→"))
                            .field("attempts", d.entry.attempts.len())
                            .field("file", self.spool_dir.join(format!("{sig}.json")).display());
                        self.log.append(&ev);
                        self.lifecycle.append(&ev);
                    }
                }
            }
        }
    }

    // ---- calls -------------------------------------------------------------------------

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Inbound(env) => self.on_call(env),
            Ev::Sent { sig, to, result } => self.on_sent(sig, to, result),
            Ev::Replied { to, result } => {
                let e = self.ev(if result.is_ok() {
                    "reply-sent"
                } else {
                    "reply-failed"
                });
                self.log.append(&e.field("to", to).opt("err", result.err()));
            }
            Ev::Checked { key, result } => {
                let Some(slot) = self.timers.get_mut(&key) else {
                    return;
                };
                slot.checking = false;
                let t = slot.t.clone();
                match result {
                    Ok(()) => self.fire(&t, None),
                    Err(why) => self.log.append(
                        &self
                            .ev("check-skip")
                            .field("id", &key.1)
                            .field("detail", why),
                    ),
                }
            }
            Ev::Script { key, gen, ev } => self.on_script(key, gen, ev),
            Ev::Closed(_) => {}
        }
    }

    fn reply(&mut self, env: &Envelope, text: String) {
        let to = env.from.clone();
        remember(&mut self.recent, &to, &text);
        if store::is_ephemeral(&self.paths, &to) {
            self.log
                .append(&self.ev("reply-suppressed-ephemeral").field("to", &to));
            return;
        }
        let (exe, from, topic, tx) = (
            self.exe.clone(),
            self.identity.clone(),
            env.topic.clone(),
            self.tx.clone(),
        );
        std::thread::spawn(move || {
            let result = proc::send(&exe, &from, &to, &text, topic.as_deref(), None);
            let _ = tx.send(Ev::Replied { to, result });
        });
    }

    fn mine(&self, owner: &str) -> Vec<Trigger> {
        let tz = self.tz.clone();
        let check = move |w: &str| when::check(w, Timestamp::now(), &tz).map(|_| ());
        let (list, _) = store::load_all(&self.paths, self.role, &check);
        list.into_iter().filter(|t| t.owner == owner).collect()
    }

    fn lost_of(&self, owner: &str) -> Vec<String> {
        spool::load(&self.spool_dir)
            .0
            .iter()
            .filter(|e| e.status == Status::Lost && e.owner == owner)
            .map(Entry::summary)
            .collect()
    }

    fn list_of(&self, owner: &str) -> String {
        let mine = self.mine(owner);
        let refs: Vec<&Trigger> = mine.iter().collect();
        call::list_text(self.role, &refs, &self.lost_of(owner))
    }

    /// `{"cmd":"unregister","id":…}` from `owner` (profile in `cwd`): removes `owner`'s
    /// trigger `id`, or else dismisses `owner`'s lost signal `id`; the reply.
    fn unregister(&mut self, cwd: &std::path::Path, owner: &str, id: &str) -> String {
        let service = self.role.service();
        let removed = match store::remove(&self.paths, cwd, owner, self.role, id) {
            Ok(true) => {
                self.rebuild();
                self.log.append(
                    &self
                        .ev("unregistered")
                        .field("owner", owner)
                        .field("id", id),
                );
                format!("✓ {service} trigger \"{id}\" removed.")
            }
            // Not a trigger: a lost signal's id dismisses that signal.
            Ok(false) => match spool::dismiss_lost(&self.spool_dir, owner, id) {
                Ok(true) => {
                    self.log.append(
                        &self
                            .ev("lost-dismissed")
                            .field("owner", owner)
                            .field("sig", id),
                    );
                    format!("✓ lost signal \"{id}\" dismissed (its spool file is deleted).")
                }
                Ok(false) => format!(
                    "{service}: you have no {service} trigger and no lost signal with id \"{id}\"; \
                     nothing removed."
                ),
                Err(e) => {
                    return format!(
                        "{service}: the lost signal \"{id}\" could not be deleted from {}: {e}",
                        self.spool_dir.display()
                    )
                }
            },
            Err(e) => return format!("{service}: your profile could not be changed: {e}"),
        };
        format!("{removed}\n\n{}", self.list_of(owner))
    }

    /// A trigger stored for `owner` (`replaced` one of the same id): the triggers rebuilt,
    /// the event logged, and the reply that says what was registered and lists them.
    fn registered(&mut self, t: &Trigger, replaced: bool, owner: &str) -> String {
        self.rebuild();
        self.log.append(
            &self
                .ev(if replaced { "replaced" } else { "registered" })
                .field("owner", &t.owner)
                .field("id", &t.id),
        );
        let what = match self.role {
            Role::Time => "it fires on schedule",
            Role::Event => "its script runs now",
        };
        format!(
            "✓ {} {} trigger \"{}\" → {}{}: {what}.{}\n\n{}",
            if replaced { "replaced" } else { "registered" },
            self.role.service(),
            t.id,
            t.target,
            t.topic
                .as_deref()
                .map(|x| format!(" (topic {x})"))
                .unwrap_or_default(),
            call::unregistered_note(&store::unregistered(
                &self.paths,
                std::iter::once(t.target.as_str())
                    .chain(t.fallback.iter().flatten().map(String::as_str))
            )),
            self.list_of(owner)
        )
    }

    fn on_call(&mut self, env: Envelope) {
        if env.from == self.me {
            return;
        }
        let from_service = env.intelligence == Some(Intelligence::Absent);
        let role = self.role;
        let cmd = match call::parse_call(&env.body) {
            Ok(c) => c,
            Err(why) => {
                if echoes_ours(&self.recent, &env.from, &env.body) {
                    // An agent answering what we sent it (a fire, a reply): not a call, and a
                    // teaching reply to it would start a ping-pong.
                    self.log
                        .append(&self.ev("ignored-echo").field("from", &env.from));
                } else if from_service {
                    // Another service's message (a teaching reply, a fallback note): answering
                    // it could start a storm between services.
                    self.log
                        .append(&self.ev("ignored-service-message").field("from", &env.from));
                } else {
                    self.log
                        .append(&self.ev("call-rejected").field("from", &env.from));
                    self.reply(&env, call::teaching(role, &why.to_string()));
                }
                return;
            }
        };
        let Some(cwd) = store::cwd_of(&self.paths, &env.from) else {
            self.reply(
                &env,
                call::teaching(
                    role,
                    &format!(
                        "you ({}) are not a registered peer, so there is no profile to keep your triggers in",
                        env.from
                    ),
                ),
            );
            return;
        };
        let text = match cmd {
            Command::Help => format!("{}\n\n{}", self.list_of(&env.from), call::format_text(role)),
            Command::List => self.list_of(&env.from),
            Command::Unregister(id) => self.unregister(&cwd, &env.from, &id),
            Command::Register(fields) => {
                let tz = self.tz.clone();
                let check = move |w: &str| when::check(w, Timestamp::now(), &tz).map(|_| ());
                let built = call::build_trigger(role, fields, &env.from, &check).and_then(|t| {
                    // Its signals would come back to this service, which cannot take them.
                    if t.target == self.me || t.fallbacks().contains(&self.me) {
                        return Err(call::CallError::TargetIsService(self.me.clone()));
                    }
                    Ok(t)
                });
                match built {
                    Err(why) => call::teaching(role, &why.to_string()),
                    Ok(t) => match store::upsert(&self.paths, &cwd, &t) {
                        Ok(replaced) => self.registered(&t, replaced, &env.from),
                        Err(e) => format!(
                            "{}: your profile could not be written, nothing registered: {e}",
                            role.service()
                        ),
                    },
                }
            }
        };
        self.reply(&env, text);
    }
}

/// How many texts per peer [`remember`] keeps.
const RECENT_PER_PEER: usize = 32;
/// How much of a text [`remember`] keeps (characters).
const RECENT_PREFIX: usize = 120;

/// Note that `text` was sent to `to`.
fn remember(recent: &mut HashMap<String, VecDeque<String>>, to: &str, text: &str) {
    let q = recent.entry(to.to_string()).or_default();
    q.push_back(text.trim().chars().take(RECENT_PREFIX).collect());
    while q.len() > RECENT_PER_PEER {
        q.pop_front();
    }
}

/// True when `body` from `from` quotes one of the texts recently sent to `from` (at least 8
/// characters of it): an echo or a quote of ours, not a call.
fn echoes_ours(recent: &HashMap<String, VecDeque<String>>, from: &str, body: &str) -> bool {
    recent.get(from).is_some_and(|q| {
        q.iter()
            .any(|t| t.chars().count() >= 8 && body.contains(t.as_str()))
    })
}

/// The name peer `name` now has when it was renamed (`rename`, [`crate::registry::former`]) and
/// is not registered under `name` any more.
fn renamed_to(paths: &Paths, name: &str) -> Option<String> {
    let registry = crate::registry::Registry::load(paths).ok()?;
    match crate::registry::former::fate_of(paths, &registry, name)? {
        crate::registry::former::Fate::Renamed { now } => Some(now),
        crate::registry::former::Fate::Removed => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_quoting_what_we_sent_is_recognised() {
        let mut recent = HashMap::new();
        remember(&mut recent, "alice", "tick from timer");
        remember(&mut recent, "alice", "ok");
        assert!(echoes_ours(&recent, "alice", "echo: tick from timer"));
        assert!(!echoes_ours(&recent, "bob", "echo: tick from timer"));
        assert!(
            !echoes_ours(&recent, "alice", "ok then"),
            "too short to tell"
        );
        let long = "x".repeat(500);
        remember(&mut recent, "alice", &long);
        assert!(echoes_ours(&recent, "alice", &format!("echo: {long}")));
        for i in 0..40 {
            remember(&mut recent, "alice", &format!("message number {i}"));
        }
        assert!(
            !echoes_ours(&recent, "alice", "echo: tick from timer"),
            "forgotten"
        );
    }
}

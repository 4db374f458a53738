//! The environment variables iapeer reads (spec 11 §3), each defined once, here, as data: its
//! name, what it holds with its default, which part of iapeer reads it and one line of doc.
//!
//! [`Config`](super::Config) takes its defaults and its parsing from these rows, the event
//! logs take their limits from them (`EventLog::from_env`), and the man page's ENVIRONMENT
//! section and `docs/ENVIRONMENT.md` are generated from [`ENV_VARS`] (tests keep both
//! checked-in files current). A default is written in exactly one place: the row's [`Kind`]
//! (or a constant the row names), and the doc line shows it through `{default}`.
//!
//! Variables iapeer reads that are not knobs of its own (inherited from the login, or set only
//! by tests) are listed in [`NOT_KNOBS`] with the reason; a test fails when the source reads a
//! variable that is in neither list.

use std::time::Duration;

/// An event log's default size limit of one file, in bytes (5 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 5 * 1024 * 1024;
/// An event log's default number of rotated copies kept (`<log>.1` … `<log>.5`).
pub const DEFAULT_KEEP: u32 = 5;

/// What a variable holds, with its default where iapeer has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A positive number of seconds.
    Secs(u64),
    /// A positive number of milliseconds.
    Millis(u64),
    /// A positive count.
    Count(u64),
    /// A positive size in bytes.
    Bytes(u64),
    /// A TCP port; 0 is allowed (any free port).
    Port(u16),
    /// `1` turns it on; anything else (or unset) leaves it off.
    Switch,
    /// One of these words; the first is the default.
    Choice(&'static [&'static str]),
    /// Free text: a path, a program or a token. A default, if any, is described in the doc.
    Text,
}

/// The part of iapeer that reads a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The storage layout (`paths`, spec 01 §1–§2), read by the CLI and the daemon.
    Paths,
    /// The daemon's [`Config`](super::Config) (spec 11 §3), read once at start-up.
    Config,
    /// The daemon's diagnostic log (`daemon.log`, spec 11).
    Logging,
    /// The rotation limits of one event log (`EventLog::from_env`, spec 11 §1).
    EventLog,
    /// The rotation and folder budget of the pane logs (`session::panelog`, spec 11 §2).
    PaneLog,
    /// Finding and setting up an agent runtime (spec 04).
    Runtime,
    /// Set by the daemon in a session's environment (spec 04 §1, spec 01 §6); read by the CLI
    /// and the echo agent running inside it.
    Session,
    /// `iapeer install` and `scripts/install.sh` (spec 08 §1).
    Install,
}

/// One environment variable iapeer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvVar {
    /// The variable's name (a `<RUNTIME>` placeholder stands for a runtime's name in capitals).
    pub name: &'static str,
    /// What it holds, with its default.
    pub kind: Kind,
    /// Which part of iapeer reads it.
    pub part: Part,
    /// What it does, lower case, no final period; `{default}` is replaced by the default.
    pub doc: &'static str,
}

impl EnvVar {
    /// The numeric default of a numeric variable. Panics (at compile time in a `const`) for a
    /// variable that is not a number.
    pub const fn default_u64(&self) -> u64 {
        match self.kind {
            Kind::Secs(n) | Kind::Millis(n) | Kind::Count(n) | Kind::Bytes(n) => n,
            Kind::Port(n) => n as u64,
            _ => panic!("not a numeric variable"),
        }
    }

    /// The default of a duration variable ([`Kind::Secs`] or [`Kind::Millis`]).
    pub const fn default_duration(&self) -> Duration {
        match self.kind {
            Kind::Secs(n) => Duration::from_secs(n),
            Kind::Millis(n) => Duration::from_millis(n),
            _ => panic!("not a duration variable"),
        }
    }

    /// The default as the docs show it, if the variable has one.
    pub fn default_text(&self) -> Option<String> {
        match self.kind {
            Kind::Secs(n) | Kind::Millis(n) | Kind::Count(n) | Kind::Bytes(n) => {
                Some(n.to_string())
            }
            Kind::Port(n) => Some(n.to_string()),
            Kind::Choice(words) => words.first().map(|w| w.to_string()),
            Kind::Switch | Kind::Text => None,
        }
    }

    /// The doc line with its default filled in (the man page and `docs/ENVIRONMENT.md`).
    pub fn meaning(&self) -> String {
        match self.default_text() {
            Some(d) => self.doc.replace("{default}", &d),
            None => self.doc.to_string(),
        }
    }

    /// Read a numeric variable from its raw value: unset or blank gives the default; text that
    /// is not a positive integer (zero allowed for a [`Kind::Port`]) gives the default and
    /// pushes one warning line.
    pub fn parse_u64(&self, raw: Option<&str>, warnings: &mut Vec<String>) -> u64 {
        let default = self.default_u64();
        let allow_zero = matches!(self.kind, Kind::Port(_));
        match raw {
            None => default,
            Some(v) if v.trim().is_empty() => default,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 || allow_zero => n,
                _ => {
                    warnings.push(format!(
                        "{}={v:?} is not a positive integer; using {default}",
                        self.name
                    ));
                    default
                }
            },
        }
    }

    /// Read a duration variable ([`Kind::Secs`] or [`Kind::Millis`]) like [`EnvVar::parse_u64`].
    pub fn parse_duration(&self, raw: Option<&str>, warnings: &mut Vec<String>) -> Duration {
        let n = self.parse_u64(raw, warnings);
        match self.kind {
            Kind::Millis(_) => Duration::from_millis(n),
            _ => Duration::from_secs(n),
        }
    }

    /// Read a [`Kind::Switch`]: on only for exactly `1`.
    pub fn parse_switch(&self, raw: Option<&str>) -> bool {
        raw == Some("1")
    }
}

/// Declares each row as a `pub const` [`EnvVar`] of the same name (`NAME = "…"` where the
/// variable's name is no Rust name), with the row's doc comment, and [`ENV_VARS`]: every row,
/// in the order given. A row: `NAME: kind, part, "doc";`.
macro_rules! env_vars {
    ($($(#[$attr:meta])* $konst:ident $(= $name:literal)?: $kind:expr, $part:expr, $doc:expr;)*) => {
        $(
            $(#[$attr])*
            pub const $konst: EnvVar = EnvVar {
                name: env_var_name!($konst $($name)?),
                kind: $kind,
                part: $part,
                doc: $doc,
            };
        )*

        /// Every environment variable iapeer reads, in the order the man page lists them.
        pub const ENV_VARS: &[EnvVar] = &[$($konst),*];
    };
}

/// A row's variable name: the one given, else the constant's.
macro_rules! env_var_name {
    ($konst:ident) => {
        stringify!($konst)
    };
    ($konst:ident $name:literal) => {
        $name
    };
}

env_vars! {
    /// `IAPEER_ROOT`: the storage root.
    IAPEER_ROOT: Kind::Text, Part::Paths,
        "the storage root (default ~/.iapeer)";
    /// `IAPEER_PORT`: the daemon's loopback HTTP port.
    IAPEER_PORT: Kind::Port(8765), Part::Config,
        "the loopback HTTP port of the daemon (default {default}; 0 picks a free port)";
    /// `IAPEER_DAEMON_SOCKET`: the control socket.
    IAPEER_DAEMON_SOCKET: Kind::Text, Part::Paths,
        "the control socket (default <root>/state/iapeer/router.sock)";
    /// `IAPEER_BEARER_TOKEN`: a bearer every HTTP request must carry (in place of the fleet token).
    IAPEER_BEARER_TOKEN: Kind::Text, Part::Config,
        "when set, every HTTP request (MCP too: agents' configs then send it, and their session \
         token in X-IAPeer-Token) must carry this bearer, and the fleet API takes it instead of \
         state/iapeer/fleet.token; unset, only fleet requests need a bearer, that file's token. \
         Sessions never inherit it: the daemon hands it to the telegram runtime and, in this mode, \
         to agents";
    /// `IAPEER_FEDERATION_URL`: the Redis URL of the federation (issue 28), over the stored one.
    IAPEER_FEDERATION_URL: Kind::Text, Part::Config,
        "a redis[s]://[user:password@]host[:port][/db] URL that overrides the one iapeer federation \
         join stored in state/iapeer/federation.json (the host name is still the stored one, else \
         this machine's short host name); the daemon's federation link connects to it. Sessions \
         never inherit it (it carries the Redis password)";
    /// `IAPEER_FEDERATION_CA_FILE`: the CA file a `rediss://` federation's server is checked
    /// against (issue 28 item 1), over the stored one.
    IAPEER_FEDERATION_CA_FILE: Kind::Text, Part::Config,
        "a PEM file of the CA(s) that signed the federation's Redis server certificate, for a \
         rediss:// (TLS) URL; overrides the --ca-file iapeer federation join stored (without either, \
         the system's CA store is used)";
    /// `IAPEER_MCP_AUTH`: how MCP callers are authenticated.
    IAPEER_MCP_AUTH: Kind::Choice(&["token", "header"]), Part::Config,
        "{default} (default): agents prove their identity with their session token; header: the \
         identity header is trusted, as the original tool did (then any local process, another \
         user's included, can send as any agent over MCP)";
    /// `IAPEER_IDLE_SECS`: idleness before an agent is slept.
    IAPEER_IDLE_SECS: Kind::Secs(3600), Part::Config,
        "seconds of idleness before an agent is put to sleep (default {default})";
    /// `IAPEER_EPHEMERAL_QUIET_SECS`: quiet time that ends an armed ephemeral worker.
    IAPEER_EPHEMERAL_QUIET_SECS: Kind::Secs(20), Part::Config,
        "seconds without model activity or screen output after which an ephemeral worker that \
         has sent its reply (or ran self-done) is ended (default {default})";
    /// `IAPEER_EPHEMERAL_UNARMED_IDLE_SECS`: idleness that ends an ephemeral worker that never
    /// replied.
    IAPEER_EPHEMERAL_UNARMED_IDLE_SECS: Kind::Secs(600), Part::Config,
        "seconds of idleness after which an ephemeral worker that has not replied is ended \
         (default {default})";
    /// `IAPEER_STORM_LIMIT`: messages each way that make an exchange a storm.
    IAPEER_STORM_LIMIT: Kind::Count(20), Part::Config,
        "messages in each direction between the same two non-human peers within \
         IAPEER_STORM_WINDOW_SECS that pause their exchange as a runaway (default {default}; a \
         human writing to either peer lifts the pause)";
    /// `IAPEER_STORM_WINDOW_SECS`: the storm guard's sliding window.
    IAPEER_STORM_WINDOW_SECS: Kind::Secs(60), Part::Config,
        "the window of IAPEER_STORM_LIMIT, in seconds (default {default})";
    /// `IAPEER_STORM_PAUSE_SECS`: how long a runaway exchange stays paused.
    IAPEER_STORM_PAUSE_SECS: Kind::Secs(600), Part::Config,
        "seconds a runaway exchange between two peers stays paused (default {default})";
    /// `IAPEER_ORIGIN_GUARD`: the origin guard (spec 10 §2), on unless `0`.
    IAPEER_ORIGIN_GUARD: Kind::Choice(&["1", "0"]), Part::Config,
        "0 turns the origin guard off: an agent's message to a human on another channel than the \
         one the human's unanswered message came from is then delivered instead of held (default \
         {default})";
    /// `IAPEER_ORIGIN_GUARD_ARM_TTL_MS`: how long a human's unanswered message arms the guard.
    IAPEER_ORIGIN_GUARD_ARM_TTL_MS: Kind::Millis(48 * 3600 * 1000), Part::Config,
        "milliseconds a human's unanswered message keeps the origin guard armed for that agent \
         (default {default}, 48 h)";
    /// `IAPEER_ORIGIN_HOLD_TTL_MS`: how long a held send waits for `confirm-send`.
    IAPEER_ORIGIN_HOLD_TTL_MS: Kind::Millis(15 * 60 * 1000), Part::Config,
        "milliseconds a message held by the origin guard waits for iapeer confirm-send before it \
         is dropped (default {default}, 15 min)";
    /// `IAPEER_ORIGIN_GUARD_PENDING_TTL_MS`: the original tool's name for
    /// [`IAPEER_ORIGIN_HOLD_TTL_MS`], read when that one is not set (issue 30 item 7).
    IAPEER_ORIGIN_GUARD_PENDING_TTL_MS: Kind::Millis(15 * 60 * 1000), Part::Config,
        "the original tool's name for IAPEER_ORIGIN_HOLD_TTL_MS, read when that one is not set \
         (default {default}, 15 min)";
    /// `IAPEER_NOTICE_TTL_MS`: how long a notice stays on the board after its last repeat.
    IAPEER_NOTICE_TTL_MS: Kind::Millis(3600 * 1000), Part::Config,
        "milliseconds a notice (a live agent its model API refuses: rate limit, overload, expired \
         login) stays on the board after its last repeat (default {default}, 1 h)";
    /// `IAPEER_LIMIT_RESUME`: take a turn refused by a rate or usage limit up again (issue 32
    /// item 3, [`crate::limits`]), on unless `0`.
    IAPEER_LIMIT_RESUME: Kind::Choice(&["1", "0"]), Part::Config,
        "0 turns off taking up a turn that the agent's model API refused for a rate or usage \
         limit: without it iapeer prompts the agent to continue at the reset time its runtime \
         recorded, else after IAPEER_LIMIT_BACKOFF_MS; the sender of the refused message is told \
         either way (default {default})";
    /// `IAPEER_LIMIT_BACKOFF_MS`: the first wait before a limited turn is taken up again when
    /// the runtime recorded no reset time.
    IAPEER_LIMIT_BACKOFF_MS: Kind::Millis(300 * 1000), Part::Config,
        "milliseconds iapeer waits before it prompts an agent whose turn was refused for a rate \
         limit with no reset time recorded (default {default}, 5 min); doubled for each prompt \
         refused in a row, at most 1 h; given up after 5";
    /// `IAPEER_APPROVAL_TIMEOUT_MS`: how long a gated peer's permission prompt waits for a
    /// human's `approve`/`deny` before it is denied (spec 10 §4).
    IAPEER_APPROVAL_TIMEOUT_MS: Kind::Millis(300 * 1000), Part::Config,
        "milliseconds a gated peer's permission prompt waits for iapeer approve or deny before it \
         is denied (default {default}, 5 min)";
    /// `IAPEER_FLEET_HOLD_MAX`: the cap on held fleet long polls, and on event streams
    /// (`daemon::http::listen::hold_limit`, issue 26 item 3).
    IAPEER_FLEET_HOLD_MAX: Kind::Count(1024), Part::Config,
        "the most fleet long polls (GET /fleet/v1/approvals?wait=S) held at once, and the most \
         event streams (GET /fleet/v1/events): each an eighth of the daemon's soft RLIMIT_NOFILE, \
         at least 16, at most this (default {default}); when one is full its oldest is answered \
         early (a long poll gets its answer, a stream ends) to make room, and neither ever takes \
         the places of MCP requests (a quarter of RLIMIT_NOFILE)";
    /// `IAPEER_BOOT_DEADLINE_SECS`: boot → ready deadline.
    IAPEER_BOOT_DEADLINE_SECS: Kind::Secs(240), Part::Config,
        "seconds a starting agent has to become ready (default {default})";
    /// `IAPEER_READY_GATE_SECS`: first message → model activity deadline.
    IAPEER_READY_GATE_SECS: Kind::Secs(120), Part::Config,
        "seconds after a wake's first message (answered once the agent accepted it) for the \
         model to show activity; past it, or when the agent shows that its model API does not \
         answer, lifecycle.log gets ready-gate ok=false and the sender a message from iapeer, \
         and the session is left running (default {default})";
    /// `IAPEER_CRASHLOOP_MAX`: deaths that trip the crash-loop guard.
    IAPEER_CRASHLOOP_MAX: Kind::Count(3), Part::Config,
        "deaths within the crash-loop window that stop restarts (default {default})";
    /// `IAPEER_CRASHLOOP_WINDOW_SECS`: the crash-loop window.
    IAPEER_CRASHLOOP_WINDOW_SECS: Kind::Secs(300), Part::Config,
        "the crash-loop window in seconds (default {default})";
    /// `IAP_HOST_LIVENESS_GRACE_MS`: the delivery confirmation grace.
    IAP_HOST_LIVENESS_GRACE_MS: Kind::Millis(4000), Part::Config,
        "milliseconds to wait for delivery confirmation (default {default}; 60000 with attachments)";
    /// `IAPEER_SEND_TIMEOUT_MS`: how long a send may wait for its answer (spec 03 §1).
    IAPEER_SEND_TIMEOUT_MS: Kind::Millis(300_000), Part::Config,
        "milliseconds a send waits for its answer before it is refused with code timeout and \
         taken out of the peer's queue (default {default}: covers a full agent wake); iapeer send \
         --timeout overrides it per send; each agent's MCP client is given this plus 30 s (at \
         least 330 s) as its send_to_peer call timeout at launch";
    /// `IAPEER_ATTACHMENT_MAX_BYTES`: the largest attachment (spec 03 §3, issue 26).
    IAPEER_ATTACHMENT_MAX_BYTES: Kind::Bytes(100 * 1024 * 1024), Part::Config,
        "the largest file a send may attach, in bytes (default {default}, 100 MiB); a larger one \
         fails the send, naming the attachment and this variable; read by the daemon when it \
         copies a send's attachments and by iapeer send when it checks or keeps a send while the \
         daemon is down";
    /// `IAPEER_SEND_STALL_MS`: how long a live session may take no byte of a message (issue 26
    /// item 6).
    IAPEER_SEND_STALL_MS: Kind::Millis(10_000), Part::Config,
        "milliseconds a live session's program may take no byte of a message still being written \
         to its input before the send ends: with none of it written the message is taken back and \
         refused (NOT delivered); with part written the rest stays queued for the program and the \
         sender is told its state is unknown (code state-unknown) (default {default}; 0 turns it \
         off; IAPEER_SEND_TIMEOUT_MS still bounds a wake)";
    /// `IAPEER_COMPOSER_QUEUE_TIMEOUT_MS`: how long a message waits for a free composer.
    IAPEER_COMPOSER_QUEUE_TIMEOUT_MS: Kind::Millis(120_000), Part::Config,
        "milliseconds a message waits while the agent's composer holds a draft (spec 05 §7); past \
         it the message fails and its sender is told — the draft is never submitted with it \
         (default {default})";
    /// `IAPEER_TICK_SECS`: the supervision tick period.
    IAPEER_TICK_SECS: Kind::Secs(60), Part::Config,
        "seconds between supervision ticks (default {default}); a knob for tests";
    /// `IAPEER_REALTIME`: the daemon's latency threads at `SCHED_FIFO` when it may (issue 31
    /// item 3, `daemon::realtime`), on unless `0`.
    IAPEER_REALTIME: Kind::Choice(&["1", "0"]), Part::Config,
        "0 keeps the daemon's router, HTTP acceptor and send-preparation threads at the normal \
         scheduling policy; otherwise they run SCHED_FIFO at priority 1 when the daemon may (root, \
         CAP_SYS_NICE, or an RLIMIT_RTPRIO of at least 1), which keeps a burst's latency low on a \
         busy host; never the agents or their session threads (default {default})";
    /// `IAPEER_CLAUDE_BIN`: the Claude Code program.
    IAPEER_CLAUDE_BIN: Kind::Text, Part::Runtime,
        "the Claude Code program (default: claude on the daemon's PATH, else on the login shell's PATH, else in an installer's folder such as ~/.local/bin, looked for at every launch)";
    /// `IAPEER_CODEX_BIN`: the Codex CLI program.
    IAPEER_CODEX_BIN: Kind::Text, Part::Runtime,
        "the Codex CLI program (default: codex on the daemon's PATH, else on the login shell's PATH, else in an installer's folder such as ~/.npm-global/bin, looked for at every launch)";
    /// `IAPEER_GEMINI_BIN`: the Gemini CLI program.
    IAPEER_GEMINI_BIN: Kind::Text, Part::Runtime,
        "the Gemini CLI program (default: gemini on the daemon's PATH, else on the login shell's PATH, else in an installer's folder such as ~/.npm-global/bin, looked for at every launch)";
    /// `IAPEER_OPENCODE_BIN`: the OpenCode program.
    IAPEER_OPENCODE_BIN: Kind::Text, Part::Runtime,
        "the OpenCode program (default: opencode on the daemon's PATH, else on the login shell's PATH, else in an installer's folder such as ~/.npm-global/bin, looked for at every launch)";
    /// `IAPEER_LOGIN_CHECK_SECS`: how long an agent CLI's login status command may take.
    IAPEER_LOGIN_CHECK_SECS: Kind::Secs(15), Part::Runtime,
        "how long an agent CLI's login status command (`claude auth status`, `codex login status`, `opencode auth list`) may take before onboard, doctor, status and create say they could not tell whether it is logged in (default {default} s)";
    /// `CODEX_HOME`: Codex's config folder.
    CODEX_HOME: Kind::Text, Part::Runtime,
        "the Codex config folder whose config.toml iapeer edits (default ~/.codex)";
    /// `CLAUDE_CONFIG_DIR`: Claude Code's config folder.
    CLAUDE_CONFIG_DIR: Kind::Text, Part::Runtime,
        "the Claude Code config folder iapeer looks in (default ~/.claude)";
    /// `<RUNTIME>_RUNTIME_BIN`: the program of a router runtime (see `runtime::router`).
    RUNTIME_BIN = "<RUNTIME>_RUNTIME_BIN": Kind::Text, Part::Runtime,
        "the program of a router runtime whose manifest gives no command, e.g. TELEGRAM_RUNTIME_BIN \
         (default <runtime>-runtime on PATH)";
    /// `IAP_ALWAYS_ON_REVIVE_GRACE_MS`: grace for a restarting always-on peer.
    IAP_ALWAYS_ON_REVIVE_GRACE_MS: Kind::Millis(4000), Part::Config,
        "milliseconds a message waits for a restarting always-on peer (default {default})";
    /// `IAPEER_SUPERVISE_LOG_VERBOSE`: log routine tick decisions.
    IAPEER_SUPERVISE_LOG_VERBOSE: Kind::Switch, Part::Config,
        "1 logs routine supervision decisions too";
    /// `IAPEER_NOTIFY`: desktop notifications for messages to human peers (issue 8 item 3).
    IAPEER_NOTIFY: Kind::Text, Part::Runtime,
        "0, off, false or no turns off the desktop notification (notify-send on Linux, osascript \
         on macOS, when installed) that the human runtime shows for each message stored in a human \
         peer's inbox; on by default (read by the daemon's human-inbox program, so set it for the \
         daemon)";
    /// `NOTIFIER_FALLBACK_TARGET`: the last link of every notifier delivery chain (spec 09).
    NOTIFIER_FALLBACK_TARGET: Kind::Text, Part::Runtime,
        "a peer name: the last link of the delivery chain of every signal of the built-in timer and \
         watcher (after the target, the trigger's fallbacks and its owner); unset or empty = none \
         (read by the daemon's notifier-run program, so set it for the daemon)";
    /// `IAPEER_NOTIFIER_RETRY_MS`: time between two attempts on one link of the notifier's chain.
    IAPEER_NOTIFIER_RETRY_MS: Kind::Millis(30000), Part::Runtime,
        "milliseconds between the two attempts on one link of the delivery chain of the built-in \
         timer and watcher (default {default}; read by the daemon's notifier-run program)";
    /// `IAPEER_OUTBOX_RETRY_MS`: how often the daemon tries a kept send again that could not be
    /// delivered yet.
    IAPEER_OUTBOX_RETRY_MS: Kind::Millis(30_000), Part::Config,
        "milliseconds between the daemon's tries of a send kept in the outbox that it could not \
         deliver yet (its peer could not be woken, the daemon was stopping) (default {default})";
    /// `IAPEER_MEMORY_PROVISION_SECS`: how long a memory provider's provision command may run.
    IAPEER_MEMORY_PROVISION_SECS: Kind::Secs(120), Part::Runtime,
        "seconds the memory provider's provision or unprovision command may run at a peer's birth \
         or removal before it is killed and logged as timeout (default {default})";
    /// `IAPEER_LOG`: level of the daemon's diagnostic log.
    IAPEER_LOG: Kind::Choice(&["info", "error", "warn", "debug", "trace"]), Part::Logging,
        "level of the daemon's diagnostic log: error, warn, {default} (default), debug or trace";
    /// `IAPEER_PANELOG_MAX_BYTES`: the size past which a pane log is rotated.
    IAPEER_PANELOG_MAX_BYTES: Kind::Bytes(16 * 1024 * 1024), Part::PaneLog,
        "the size in bytes past which a pane log is rotated (default {default}; at least 9437184)";
    /// `IAPEER_PANELOG_KEEP`: rotated copies kept per pane log.
    IAPEER_PANELOG_KEEP: Kind::Count(2), Part::PaneLog,
        "how many rotated copies of each pane log are kept (default {default})";
    /// `IAPEER_PANELOG_STALE_DAYS`: pane logs untouched this long are deleted.
    IAPEER_PANELOG_STALE_DAYS: Kind::Count(14), Part::PaneLog,
        "days after which an untouched pane log or copy is deleted (default {default})";
    /// `IAPEER_PANELOG_DIR_BUDGET`: the size bound of the pane-log folder.
    IAPEER_PANELOG_DIR_BUDGET: Kind::Bytes(512 * 1024 * 1024), Part::PaneLog,
        "bytes the pane-log folder may hold before its oldest rotated copies are deleted (default {default})";
    /// `IAPEER_LIFECYCLE_LOG_MAX_BYTES`.
    IAPEER_LIFECYCLE_LOG_MAX_BYTES: Kind::Bytes(DEFAULT_MAX_BYTES), Part::EventLog,
        "the size in bytes past which lifecycle.log is rotated (default {default})";
    /// `IAPEER_LIFECYCLE_LOG_KEEP`.
    IAPEER_LIFECYCLE_LOG_KEEP: Kind::Count(DEFAULT_KEEP as u64), Part::EventLog,
        "how many rotated copies of lifecycle.log are kept (default {default})";
    /// `IAPEER_DELIVERY_LOG_MAX_BYTES`.
    IAPEER_DELIVERY_LOG_MAX_BYTES: Kind::Bytes(DEFAULT_MAX_BYTES), Part::EventLog,
        "the size in bytes past which delivery.log is rotated (default {default})";
    /// `IAPEER_DELIVERY_LOG_KEEP`.
    IAPEER_DELIVERY_LOG_KEEP: Kind::Count(DEFAULT_KEEP as u64), Part::EventLog,
        "how many rotated copies of delivery.log are kept (default {default})";
    /// `IAPEER_EXITS_LOG_MAX_BYTES`.
    IAPEER_EXITS_LOG_MAX_BYTES: Kind::Bytes(DEFAULT_MAX_BYTES), Part::EventLog,
        "the size in bytes past which exits.log is rotated (default {default})";
    /// `IAPEER_EXITS_LOG_KEEP`.
    IAPEER_EXITS_LOG_KEEP: Kind::Count(DEFAULT_KEEP as u64), Part::EventLog,
        "how many rotated copies of exits.log are kept (default {default})";
    /// `PEER_PERSONALITY`: set in a session.
    PEER_PERSONALITY: Kind::Text, Part::Session,
        "set by the daemon in a session: the peer's name";
    /// `PEER_RUNTIME`: set in a session.
    PEER_RUNTIME: Kind::Text, Part::Session,
        "set by the daemon in a session: the runtime it runs on";
    /// `PEER_IDENTITY`: set in a session; the default sender of `iapeer send`.
    PEER_IDENTITY: Kind::Text, Part::Session,
        "set by the daemon in a session: <runtime>-<name>; the default sender of iapeer send";
    /// `IAPEER_TOKEN`: set in a session.
    IAPEER_TOKEN: Kind::Text, Part::Session,
        "set by the daemon in a session: the token that authenticates its MCP calls";
    /// `IAPEER_BEARER`: set in a session, for MCP configs written by the original tool.
    IAPEER_BEARER: Kind::Text, Part::Session,
        "set by the daemon in a session: the session token again, under the name the original \
         TypeScript iapeer's Codex config gives as its bearer_token_env_var";
    /// `IAPEER_SYSTEMD_DIR`: where `install` writes the systemd user unit.
    IAPEER_SYSTEMD_DIR: Kind::Text, Part::Install,
        "the folder iapeer install writes iapeer.service to (default ~/.config/systemd/user); \
         setting it also picks systemd where no systemd manager is detected";
    /// `IAPEER_LAUNCHAGENTS_DIR`: where `install` writes the launchd plist.
    IAPEER_LAUNCHAGENTS_DIR: Kind::Text, Part::Install,
        "the folder iapeer install writes com.agfpd.iapeer.plist to on macOS (default \
         ~/Library/LaunchAgents)";
    /// `IAPEER_BIN_DIR`: where `scripts/install.sh` puts the binary.
    IAPEER_BIN_DIR: Kind::Text, Part::Install,
        "the folder scripts/install.sh puts the iapeer binary in, keeping the previous one as \
         iapeer.prev (default ~/.local/bin); update, rollback and uninstall act there";
    /// `IAPEER_INSTALL_FROM`: the binary `scripts/install.sh` installs instead of building one.
    IAPEER_INSTALL_FROM: Kind::Text, Part::Install,
        "a built iapeer binary for scripts/install.sh to install, with the debug file it names \
         beside it (default: it runs scripts/release.sh and installs target/release/iapeer)";
}

/// The variable that turns a test hook on (test-only, a row of `NOT_KNOBS`): read by
/// `daemon::test_hooks` and by `peers::rename_journal`'s kill points.
pub const TEST_HOOK: &str = "IAPEER_TEST_HOOK";

/// Whether this build has the test hooks: a debug build (`debug_assertions`, as every plain
/// `cargo test` is) or the `test-hooks` feature. False in a release build without the feature:
/// nothing reads [`TEST_HOOK`] then. `daemon::test_hooks::COMPILED_IN` is this value.
pub const TEST_HOOKS_COMPILED_IN: bool = cfg!(any(debug_assertions, feature = "test-hooks"));

/// Variables iapeer reads that are not knobs of its own, with the reason (not documented as
/// knobs): inherited from the login environment, or set only by tests.
#[cfg(test)]
pub const NOT_KNOBS: &[(&str, &str)] = &[
    (
        "HOME",
        "inherited: the default root and the runtimes' config folders live under it",
    ),
    (
        "USER",
        "inherited: shown in the host facts of the system prompt",
    ),
    (
        "PATH",
        "inherited: where claude and codex are looked up first (then the login shell's PATH and the installers' folders)",
    ),
    (
        "SHELL",
        "the login shell (else the passwd entry's) whose PATH is read, with -l -c, to find claude and codex",
    ),
    (
        "CLAUDE_CODE_PROJECT_DIR_NAME",
        "Claude Code's own: with CLAUDE_CONFIG_DIR it names the project folder iapeer reads",
    ),
    (
        "NO_COLOR",
        "inherited, but never passed to an agent, as FORCE_COLOR, CLICOLOR, CLICOLOR_FORCE, CI and CONTINUOUS_INTEGRATION are not: each can make an agent CLI draw without colours, and iapeer tells a composer's dim placeholder from typed text by its colour",
    ),
    (
        "IAPEER_TEST_PYTHON",
        "test-only: the Python that checks the launchd plist with plistlib (default /usr/bin/python3)",
    ),
    (
        "IAPEER_MCP_URL",
        "test hook: the MCP URL of the echo agent, instead of router.json",
    ),
    (
        "IAPEER_TEST_HOOK",
        "test-only: put the daemon in a condition a test cannot otherwise make (a panic on one of its threads, a slow launch report or `tools/list` answer, late answers to terminal queries, a short federation retention, another version in its `ping` answer, subreaper containment; every value is listed in the module doc of daemon::test_hooks), or kill `iapeer rename` after one of its steps (`rename-kill-after:<step>`, see peers::rename_journal); read only by a debug build or one with the `test-hooks` cargo feature, so a release build ignores it",
    ),
    (
        "IAPEER_TEST_EVENTS",
        "test-only: a file the daemon appends its test events to, one per line (`router-idle`, `tick-done`, `router-send:<personality>`, `approvals-wait`, `session-held:<identity>`, see daemon::test_hooks), so a test waits for an event instead of sleeping; read only by a debug build or one with the `test-hooks` cargo feature, so a release build ignores it",
    ),
    (
        "XDG_DATA_HOME",
        "inherited: where scripts/install.sh put the man page and the bash and zsh completions (default ~/.local/share), which uninstall removes",
    ),
    (
        "XDG_CONFIG_HOME",
        "inherited: where scripts/install.sh put the fish completions (default ~/.config), which uninstall removes",
    ),
    (
        "IAPEER_SERVICE_CTL",
        "test seam: a program run instead of systemctl/launchctl, with the real program's name as its first argument (tests, where no service manager runs); never set in production",
    ),
    (
        "IAPEER_BLESS",
        "test-only: rewrite the checked-in generated files",
    ),
];

/// The variable called `name` in [`ENV_VARS`], or `None`.
pub fn find(name: &str) -> Option<&'static EnvVar> {
    ENV_VARS.iter().find(|v| v.name == name)
}

/// The size and count variables of the event log `name` (`LIFECYCLE`, `DELIVERY` or `EXITS`),
/// if the table has them.
pub fn event_log_limits(name: &str) -> Option<(&'static EnvVar, &'static EnvVar)> {
    let max = find(&format!("IAPEER_{name}_LOG_MAX_BYTES"))?;
    let keep = find(&format!("IAPEER_{name}_LOG_KEEP"))?;
    Some((max, keep))
}

/// `docs/ENVIRONMENT.md`, generated from [`ENV_VARS`] and [`NOT_KNOBS`].
#[cfg(test)]
pub fn render_markdown() -> String {
    let mut out = String::from(
        "# Environment variables\n\n\
         <!-- Generated from src/config/vars.rs by `IAPEER_BLESS=1 cargo test --lib config`. \
         Do not edit. -->\n\n\
         Every variable iapeer reads, with its default. The man page's ENVIRONMENT section \
         comes from the same table.\n\n\
         | Variable | Read by | Meaning |\n|---|---|---|\n",
    );
    for v in ENV_VARS {
        let part = match v.part {
            Part::Paths => "paths",
            Part::Config => "daemon config",
            Part::Logging => "daemon log",
            Part::EventLog => "event logs",
            Part::PaneLog => "pane logs",
            Part::Runtime => "runtimes",
            Part::Session => "session (set by the daemon)",
            Part::Install => "install",
        };
        out.push_str(&format!(
            "| `{}` | {part} | {} |\n",
            v.name,
            v.meaning().replace('|', "\\|").replace('<', "&lt;")
        ));
    }
    out.push_str("\nRead but not iapeer knobs:\n\n");
    for (name, why) in NOT_KNOBS {
        out.push_str(&format!("- `{name}`: {why}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::Path;

    #[test]
    fn names_are_unique_and_docs_well_formed() {
        let mut seen = HashSet::new();
        for v in ENV_VARS {
            assert!(seen.insert(v.name), "duplicate {}", v.name);
            assert!(!v.doc.is_empty() && !v.doc.ends_with('.'), "{}", v.name);
            let shows_default = v.doc.contains("{default}");
            assert_eq!(shows_default, v.default_text().is_some(), "{}", v.name);
        }
        for (name, _) in NOT_KNOBS {
            assert!(find(name).is_none(), "{name} is in both lists");
        }
        for log in ["LIFECYCLE", "DELIVERY", "EXITS"] {
            let (max, keep) = event_log_limits(log).unwrap();
            assert_eq!(max.default_u64(), DEFAULT_MAX_BYTES);
            assert_eq!(keep.default_u64(), u64::from(DEFAULT_KEEP));
        }
    }

    #[test]
    fn numbers_fall_back_with_one_warning() {
        let mut w = Vec::new();
        assert_eq!(IAPEER_IDLE_SECS.parse_u64(None, &mut w), 3600);
        assert_eq!(IAPEER_IDLE_SECS.parse_u64(Some(" "), &mut w), 3600);
        assert_eq!(IAPEER_IDLE_SECS.parse_u64(Some(" 7 "), &mut w), 7);
        assert!(w.is_empty());
        assert_eq!(IAPEER_IDLE_SECS.parse_u64(Some("0"), &mut w), 3600);
        assert_eq!(IAPEER_PORT.parse_u64(Some("0"), &mut w), 0);
        assert_eq!(
            w,
            ["IAPEER_IDLE_SECS=\"0\" is not a positive integer; using 3600"]
        );
        assert_eq!(
            IAP_HOST_LIVENESS_GRACE_MS.parse_duration(Some("5"), &mut w),
            Duration::from_millis(5)
        );
    }

    /// Every literal name the source passes to `env::var`/`env::var_os` (or the echo agent's
    /// `env(…)` lookup) is in [`ENV_VARS`] or [`NOT_KNOBS`].
    #[test]
    fn every_variable_read_in_src_is_listed() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src];
        let mut read = HashSet::new();
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            for opener in ["env::var(\"", "env::var_os(\"", " env(\"", "(env(\""] {
                for (i, _) in text.match_indices(opener) {
                    let rest = &text[i + opener.len()..];
                    let name = &rest[..rest.find('"').unwrap()];
                    read.insert(name.to_string());
                }
            }
        }
        assert!(
            read.contains("IAPEER_ROOT") && read.contains("HOME"),
            "{read:?}"
        );
        for name in read {
            assert!(
                find(&name).is_some() || NOT_KNOBS.iter().any(|(n, _)| *n == name),
                "{name} is read in src but is neither in ENV_VARS nor NOT_KNOBS"
            );
        }
    }

    #[test]
    fn checked_in_environment_doc_is_current() {
        crate::golden::check(
            "docs/ENVIRONMENT.md",
            &render_markdown(),
            "regenerate it with IAPEER_BLESS=1 cargo test --lib config and commit it",
        );
    }
}

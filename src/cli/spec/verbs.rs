//! The table itself: every verb of `iapeer` with its arguments and flags (spec 07).

use super::{Complete, FlagSpec, Group, PosSpec, Rule, Verb, VerbId, VerbSpec};

const fn boolean(long: &'static str, help: &'static str) -> FlagSpec {
    FlagSpec {
        long,
        short: None,
        value: None,
        complete: Complete::Nothing,
        repeatable: false,
        help,
    }
}

const fn valued(
    long: &'static str,
    value: &'static str,
    complete: Complete,
    help: &'static str,
) -> FlagSpec {
    FlagSpec {
        long,
        short: None,
        value: Some(value),
        complete,
        repeatable: false,
        help,
    }
}

const fn required(name: &'static str, complete: Complete) -> PosSpec {
    PosSpec {
        name,
        required: true,
        repeat: false,
        complete,
    }
}

const fn optional(name: &'static str, complete: Complete) -> PosSpec {
    PosSpec {
        name,
        required: false,
        repeat: false,
        complete,
    }
}

/// Every flag of the table as a named row: handlers pass these to `Invocation::flag`, `value`
/// and `values`, so a flag that does not exist does not compile (ripgrep's one value per flag
/// in `defs.rs`).
pub mod flags {
    use super::super::{Complete, FlagSpec};
    use super::{boolean, valued};

    /// `--json`.
    pub const JSON: FlagSpec = boolean("json", "print one JSON document on stdout, for scripts");
    /// `--all`.
    pub const ALL: FlagSpec = boolean("all", "act on every peer instead of one");
    /// `--everyone` of stop.
    pub const EVERYONE: FlagSpec = boolean(
        "everyone",
        "with --all: stop humans and services (timer, watcher, chat channels) too",
    );
    /// `--force` (remove, rename).
    pub const FORCE: FlagSpec = boolean(
        "force",
        "go ahead even when the peer is live (its sessions are ended)",
    );
    /// `--force` of remove.
    pub const REMOVE_FORCE: FlagSpec = boolean(
        "force",
        "go ahead when the peer is live (sessions ended) or its worktree holds work (lost)",
    );
    /// `--runtime <rt>` of create and init.
    pub const PEER_RUNTIME: FlagSpec = valued(
        "runtime",
        "<rt>",
        Complete::Runtime,
        "the peer's default runtime (must be installed)",
    );
    /// `--description <d>`.
    pub const DESCRIPTION: FlagSpec = valued(
        "description",
        "<d>",
        Complete::Text,
        "one line saying what the peer does (at most 450 characters)",
    );
    /// `--intelligence <i>`.
    pub const INTELLIGENCE: FlagSpec = valued(
        "intelligence",
        "<i>",
        Complete::Intelligence,
        "the peer's nature: artificial, natural or absent",
    );
    /// `--no-bootstrap`.
    pub const NO_BOOTSTRAP: FlagSpec = boolean(
        "no-bootstrap",
        "do not start an always-on peer now (router runtimes)",
    );
    /// `--message <text>` (send).
    pub const MESSAGE: FlagSpec = valued(
        "message",
        "<text>",
        Complete::Text,
        "the message text (use --message=<text> for text starting with -)",
    );
    /// `--message-file <path|->` (send).
    pub const MESSAGE_FILE: FlagSpec = valued(
        "message-file",
        "<path|->",
        Complete::Path,
        "read the message from a file, or from stdin with -",
    );
    /// `--from <runtime>-<name>` (send).
    pub const FROM: FlagSpec = valued(
        "from",
        "<runtime>-<name>",
        Complete::Identity,
        "the sending identity",
    );
    /// `--runtime <rt>` of send.
    pub const SEND_RUNTIME: FlagSpec = valued(
        "runtime",
        "<rt>",
        Complete::Runtime,
        "deliver to this runtime of the target instead of its default",
    );
    /// `--runtime <rt>` of confirm-send.
    pub const CONFIRM_RUNTIME: FlagSpec = valued(
        "runtime",
        "<rt>",
        Complete::Runtime,
        "send on this runtime instead (the human's origin channel, to redirect)",
    );
    /// `--topic <t>` (send).
    pub const TOPIC: FlagSpec = valued(
        "topic",
        "<t>",
        Complete::Text,
        "a short thread label on one line (at most 200 characters)",
    );
    /// `--timeout <seconds>` (send).
    pub const SEND_TIMEOUT: FlagSpec = valued(
        "timeout",
        "<seconds>",
        Complete::Text,
        "answer within this many seconds (default IAPEER_SEND_TIMEOUT_MS)",
    );
    /// `--id <id>` (send).
    pub const SEND_ID: FlagSpec = valued(
        "id",
        "<id>",
        Complete::Text,
        "message id (default: a new one); a retry with it never delivers twice",
    );
    /// `--if-busy <choice>` (send): `queue`, `interrupt` or `refuse`.
    pub const IF_BUSY: FlagSpec = valued(
        "if-busy",
        "<choice>",
        Complete::Text,
        "the agent is mid-turn: queue (default), interrupt it first, or refuse",
    );
    /// `--attachment <path>`, repeatable (send).
    pub const ATTACHMENT: FlagSpec = FlagSpec {
        long: "attachment",
        short: None,
        value: Some("<path>"),
        complete: Complete::Path,
        repeatable: true,
        help: "attach a local file by its absolute path (at most 20)",
    };
    /// `--path <folder>` (create).
    pub const PATH: FlagSpec = valued(
        "path",
        "<folder>",
        Complete::Path,
        "the peer's folder, named as the peer (default <root>/peers/<name>)",
    );
    /// `--worktree <repo>` (create).
    pub const WORKTREE: FlagSpec = valued(
        "worktree",
        "<repo>",
        Complete::Path,
        "make the folder a new git worktree of this repository (branch iapeer/<name>)",
    );
    /// `--branch <b>` (create, with --worktree).
    pub const BRANCH: FlagSpec = valued(
        "branch",
        "<b>",
        Complete::Text,
        "the worktree's branch: checked out if it exists, else made (with --worktree)",
    );
    /// `--fix` (verify).
    pub const FIX: FlagSpec = boolean(
        "fix",
        "rebuild the registry from the profiles; repair only what is broken in a profile",
    );
    /// `--peer <p>` (add-runtime, default-runtime).
    pub const PEER: FlagSpec = valued("peer", "<p>", Complete::Peer, "the peer to change");
    /// `--foreground` (daemon).
    pub const FOREGROUND: FlagSpec = boolean(
        "foreground",
        "stay in this terminal (always the case; accepted for scripts)",
    );
    /// `--detach` (daemon).
    pub const DETACH: FlagSpec = boolean(
        "detach",
        "run in the background (output to log files) and return once it answers",
    );
    /// `--print` (ui).
    pub const PRINT: FlagSpec = boolean(
        "print",
        "print the page's link instead of opening it in a browser",
    );
    /// `--runtime <rt>` of prompt.
    pub const PROMPT_RUNTIME: FlagSpec = valued(
        "runtime",
        "<rt>",
        Complete::Runtime,
        "the prompt for this runtime of the peer (default: its default runtime)",
    );
    /// `--raw` (prompt).
    pub const RAW: FlagSpec = boolean(
        "raw",
        "print the prompt alone, exactly as the runtime gets it, without labels",
    );
    /// `--keep` (demo).
    pub const KEEP: FlagSpec = boolean("keep", "keep the temporary root and print its path");
    /// `--federation` (demo).
    pub const FEDERATION: FlagSpec = boolean(
        "federation",
        "two hosts of one team on this machine, through a private redis-server",
    );
    /// `--dry-run` (onboard, uninstall).
    pub const DRY_RUN: FlagSpec = boolean("dry-run", "print every planned step and change nothing");
    /// `--human <name>` (onboard).
    pub const HUMAN: FlagSpec = valued(
        "human", // not a runtime name: the flag
        "<name>",
        Complete::Text,
        "the name of your own human peer (default: your login name, else you)",
    );
    /// `--accept-risk` (onboard).
    pub const ACCEPT_RISK: FlagSpec = boolean(
        "accept-risk",
        "agree that agents run with permission prompts bypassed (instead of typing yes)",
    );
    /// `--force` (update).
    pub const UPDATE_FORCE: FlagSpec = boolean(
        "force",
        "restart even while an agent is mid-turn (its conversation resumes by topic)",
    );
    /// `--foundation-only` (update): accepted as the original tool's flag; iapeer's update
    /// installs only its own binary anyway.
    pub const FOUNDATION_ONLY: FlagSpec = boolean(
        "foundation-only",
        "only iapeer itself (what update always does)",
    );
    /// `--package <spec>` (install-runtime).
    pub const PACKAGE: FlagSpec = valued(
        "package",
        "<spec>",
        Complete::Path,
        "the npm package to install: a name, name@version or local tarball",
    );
    /// `--npx` (install-runtime).
    pub const NPX: FlagSpec = boolean(
        "npx",
        "install the package again even when its manifest exists",
    );
    /// `--force` (update-runtime).
    pub const REINSTALL: FlagSpec = boolean(
        "force",
        "reinstall even when the installed version is the latest",
    );
    /// `--all` (update-runtime).
    pub const RUNTIMES_ALL: FlagSpec = boolean(
        "all",
        "update every installed runtime package instead of one",
    );
    /// `--yes` (uninstall).
    pub const YES: FlagSpec = boolean("yes", "do not ask (needed when stdin is not a terminal)");
    /// `--purge` (uninstall).
    pub const PURGE: FlagSpec = boolean(
        "purge",
        "also delete the root: every peer folder, log and message",
    );
    /// `--follow` (inbox, logs).
    pub const FOLLOW: FlagSpec = boolean(
        "follow",
        "keep running and print new entries as they come (Ctrl-C ends)",
    );
    /// `--all` (inbox).
    pub const INBOX_ALL: FlagSpec = boolean("all", "show every message, not only the unread ones");
    /// `--check` (trust-hooks).
    pub const CHECK: FlagSpec = boolean(
        "check",
        "write nothing: say trusted, missing or drift per hook (exit 1 unless all trusted)",
    );
    /// `--no-setup` (enable).
    pub const NO_SETUP: FlagSpec = boolean(
        "no-setup",
        "install only; do not run the plugin's own setup step",
    );
    /// `--token <t>` (connect).
    pub const TOKEN: FlagSpec = valued(
        "token",
        "<t>",
        Complete::Text,
        "the bot's token from @BotFather (asked for on a terminal when absent)",
    );
    /// `--bot <username>` (connect).
    pub const BOT: FlagSpec = valued(
        "bot",
        "<username>",
        Complete::Text,
        "the bot's @username, checked against the token by the package",
    );
    /// `--host-name <name>` (federation join).
    pub const HOST_NAME: FlagSpec = valued(
        "host-name",
        "<name>",
        Complete::Text,
        "this host's name in the federation (default: the machine's short host name)",
    );
    /// `--ca-file <pem>` (federation join).
    pub const CA_FILE: FlagSpec = valued(
        "ca-file",
        "<pem>",
        Complete::Path,
        "rediss://: the CA(s) of the server's certificate (default: the system's)",
    );
    /// `--client-cert <pem>` (federation join).
    pub const CLIENT_CERT: FlagSpec = valued(
        "client-cert",
        "<pem>",
        Complete::Path,
        "rediss://: this host's certificate, for a server with tls-auth-clients yes",
    );
    /// `--client-key <pem>` (federation join).
    pub const CLIENT_KEY: FlagSpec = valued(
        "client-key",
        "<pem>",
        Complete::Path,
        "rediss://: the client certificate's private key",
    );
    /// `--since <dur|time>` (logs).
    pub const SINCE: FlagSpec = valued(
        "since",
        "<dur|time>",
        Complete::Text,
        "only entries since this long ago (15m, 2h, 1d) or this time (14:03)",
    );
}

/// Every positional argument of the table as a named row: handlers pass these to
/// `Invocation::positional`, so a positional that does not exist does not compile.
pub mod args {
    use super::super::{Complete, PosSpec};
    use super::{optional, required};

    /// `[verb]` (help).
    pub const VERB: PosSpec = optional("verb", Complete::Verb);
    /// `<target>` (send).
    pub const TARGET: PosSpec = required("target", Complete::Peer);
    /// `<name>` (create).
    pub const NAME: PosSpec = required("name", Complete::Text);
    /// `[folder]` (init).
    pub const FOLDER: PosSpec = optional("folder", Complete::Path);
    /// `<peer>`.
    pub const PEER: PosSpec = required("peer", Complete::Peer);
    /// `[peer]` (inbox, logs).
    pub const SOME_PEER: PosSpec = optional("peer", Complete::Peer);
    /// `[runtime]` after `<peer>`.
    pub const RUNTIME: PosSpec = optional("runtime", Complete::Runtime);
    /// `<old>` (rename).
    pub const OLD: PosSpec = required("old", Complete::Peer);
    /// `<new>` (rename).
    pub const NEW: PosSpec = required("new", Complete::Text);
    /// `<rt>` (add-runtime, default-runtime).
    pub const RT: PosSpec = required("rt", Complete::Runtime);
    /// `[path-or-version]` (update).
    pub const PATH_OR_VERSION: PosSpec = optional("path-or-version", Complete::Path);
    /// `<setting>` (native-memory): `off` or `on`.
    pub const SETTING: PosSpec = required("setting", Complete::Text);
    /// `<action>` (federation): `join`, `leave` or `status`.
    pub const FEDERATION_ACTION: PosSpec = required("action", Complete::Text);
    /// `[redis-url]` (federation join).
    pub const REDIS_URL: PosSpec = optional("redis-url", Complete::Text);
    /// `<channel>` (connect): `telegram`.
    pub const CHANNEL: PosSpec = required("channel", Complete::Text);
    /// `<plugin>` (enable).
    pub const PLUGIN: PosSpec = required("plugin", Complete::Text);
    /// `<hooks-file>` (trust-hooks).
    pub const HOOKS_FILE: PosSpec = required("hooks-file", Complete::Path);
    /// `<id>` (confirm-send): a hold id, `og-<8 hex>`.
    pub const HOLD_ID: PosSpec = required("id", Complete::Text);
    /// `<id>` (approve, deny): an approval id, `ap-<8 hex>`.
    pub const APPROVAL_ID: PosSpec = required("id", Complete::Text);
    /// `[reason]` (deny): why, for the model.
    pub const REASON: PosSpec = optional("reason", Complete::Text);
    /// `[mode]` (approval-mode): `gated` or `bypass`.
    pub const MODE: PosSpec = optional("mode", Complete::Text);
    /// `[option]` (approve): the option of a boot dialog to choose, by number or label.
    pub const OPTION: PosSpec = optional("option", Complete::Text);
    /// `[args]...` (echo-agent): every word after the verb.
    pub const ARGS: PosSpec = PosSpec {
        name: "args",
        required: false,
        repeat: true,
        complete: Complete::Text,
    };
}

use args::{APPROVAL_ID, ARGS, FOLDER, HOLD_ID, NAME, OPTION, REASON, RT, RUNTIME, TARGET, VERB};
use flags::IF_BUSY;
use flags::{
    ACCEPT_RISK, ALL, ATTACHMENT, DESCRIPTION, DETACH, DRY_RUN, FEDERATION, FIX, FORCE, FOREGROUND,
    FROM, INTELLIGENCE, JSON, KEEP, MESSAGE, MESSAGE_FILE, NO_BOOTSTRAP, NPX, PACKAGE, PATH,
    PEER_RUNTIME, PURGE, REINSTALL, RUNTIMES_ALL, SEND_ID, SEND_RUNTIME, SEND_TIMEOUT, TOPIC,
    UPDATE_FORCE, YES,
};
use flags::{
    BRANCH, CONFIRM_RUNTIME, EVERYONE, FOLLOW, HUMAN, INBOX_ALL, PRINT, PROMPT_RUNTIME, RAW, SINCE,
    WORKTREE,
};

const PEER_AND_RUNTIME: &[PosSpec] = &[args::PEER, RUNTIME];
/// The flags of a verb that acts on one peer or on all of them.
const PEER_OR_ALL: &[FlagSpec] = &[flags::PEER, ALL, JSON];
/// Its rule: one of `--peer <p>` and `--all`.
const ONE_OF_PEER_OR_ALL: &[Rule] = &[Rule::ExactlyOne(&[flags::PEER, ALL])];

/// Every verb, in the order help lists them within a group.
pub static VERBS: &[VerbSpec] = &[
    VerbSpec {
        id: VerbId::Help,
        name: "help",
        signature: "help [verb]",
        summary: "show the verb list, or the usage and flags of one verb",
        description: "Print the list of verbs, or the usage line, description and flags of one verb. \
            The flag --help (or -h) anywhere on a command line does the same for its verb and runs nothing.",
        positionals: &[VERB],
        flags: &[],
        rules: &[],
        hidden: false,
        group: Group::General,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Version,
        name: "version",
        signature: "version",
        summary: "print the version",
        description: "Print one line, iapeer and the version (iapeer x.y.z). The flags --version and -v \
            do the same.",
        positionals: &[],
        flags: &[],
        rules: &[],
        hidden: false,
        group: Group::General,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Send),
        name: "send",
        signature: "send <target> (--message <text> | --message-file <path|->) [--from <runtime>-<name>] \
            [--runtime <rt>] [--topic <t>] [--attachment <path>]... [--timeout <seconds>] [--id <id>] \
            [--if-busy <choice>] [--json]",
        summary: "route one message to a peer, waking it when asleep",
        description: "Route one message to the peer <target>. When this root has joined a federation \
(iapeer federation join), <target> may be <name>@<host>, a peer of another host; a plain name \
is the local peer, else the only peer of that name on the hosts online, and one several hosts \
have is refused with the choices (docs/FEDERATION.md). A message to a host that is offline (its \
heartbeat lapsed) is kept in its inbox stream and answered \"queued for <name>@<host> (…) — \
host\" at once, delivered when the host returns, at most 24 h later (its sender, if live, is \
told by a message from iapeer when it is not delivered then); with --if-busy refuse it is \
refused at once (code offline). A sleeping agent is woken first and gets \
            the message once it is ready; a message with a topic resumes the conversation held on that \
            topic. A message to an ephemeral peer (profile wake_policy \"ephemeral\") is put in its \
            task queue on disk and answered at once; each task runs as the first message of its own \
            fresh session. The sender is --from, else PEER_IDENTITY from the environment, else the peer whose \
            folder holds the current directory, else — only when run from an interactive terminal \
            (stdin a tty) with no PEER_* variable in the environment — the host's only human peer; \
            when none of these applies the message is refused with the --from to pass. Prints whether the message was delivered (and whether a wake \
            was needed) or queued, and for which runtime. Exits 0 only when it was delivered or queued. \
            Every message carries an id (--id, else a new one; --json shows it): a recipient never \
            gets two messages with the same id from the same sender, so a retry with the same \
            --id is never delivered twice — a message delivered earlier is answered \"delivered to \
            <p> (<rt>) earlier\" (exit 0) and nothing is sent again. When the outcome is not known \
            — some of the message reached the peer's input and its arrival was never confirmed, \
            or the connection to the daemon broke after the request was sent — it says \"state \
            unknown: it may have arrived\" with the message id and exits 3 (code state-unknown; \
            --json: the failure with the message's \"id\"); \
            \"NOT delivered\" (exit 1) is said only when none of it reached the peer. \
            --if-busy says what to do when the peer's agent is mid-turn (busy, as list shows it) \
            when the message's turn to go in comes: queue (the default) pastes it anyway, and its \
            runtime queues it behind the turn (\"queued … runtime\") or takes it in; interrupt \
            stops the turn with the runtime's own keys, as iapeer interrupt does (the sender of \
            the interrupted message, if live, is told), then delivers it (\"…, interrupted its \
            turn\"; --json: \"interrupted\":true); refuse sends nothing and fails with code busy \
            (exit 1). An agent asleep or idle gets the message as usual whatever the choice. \
            A send never waits longer than --timeout (default IAPEER_SEND_TIMEOUT_MS, 300 s): past \
            it the send is refused with code timeout, naming the peer and what the message waited \
            for, and a message that has not started is taken back. With the daemon not running, an \
            enabled service (iapeer onboard) is started and the message sent; without one a \
            message the daemon would refuse at once (an unknown peer or sender, a stopped peer, a \
            topic with a line break, an attachment that cannot be read, a root with no peers) is \
            refused now (exit 1), and any other is kept in <root>/state/iapeer/outbox/ with copies \
            of its attachments (exit 0, the file named; --json: {\"outbox\": <file>, \"to\": <peer>}) and routed when the daemon starts; one it \
            then refuses is kept beside as .refused with the reason.",
        positionals: &[TARGET],
        flags: &[
            MESSAGE,
            MESSAGE_FILE,
            FROM,
            SEND_RUNTIME,
            TOPIC,
            ATTACHMENT,
            SEND_TIMEOUT,
            SEND_ID,
            IF_BUSY,
            JSON,
        ],
        rules: &[Rule::ExactlyOne(&[MESSAGE, MESSAGE_FILE])],
        hidden: false,
        group: Group::Messaging,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::ConfirmSend),
        name: "confirm-send",
        signature: "confirm-send <id> [--runtime <rt>] [--json]",
        summary: "send a message the origin guard held",
        description: "When a human writes to an agent from one channel and the agent, before \
            answering there, writes to that human on another channel, the origin guard holds the \
            message (code held) and names its id (og-<8 hex>) and when it expires (15 minutes, \
            IAPEER_ORIGIN_HOLD_TTL_MS). confirm-send <id> sends it as addressed, as its original \
            sender; with --runtime <rt> it goes to that runtime of the human instead (the origin \
            channel, to redirect). Inside a session (PEER_IDENTITY set) only the session's own held \
            messages can be confirmed; the operator may confirm any. The hold is taken by one \
            confirm-send only, deleted once the message is delivered or queued and kept when it is \
            refused. Prints what send prints. IAPEER_ORIGIN_GUARD=0 turns the guard off.",
        positionals: &[HOLD_ID],
        flags: &[CONFIRM_RUNTIME, JSON],
        rules: &[],
        hidden: false,
        group: Group::Messaging,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Approvals),
        name: "approvals",
        signature: "approvals [--json]",
        summary: "list what waits for a human: agents' permission prompts, unknown boot dialogs",
        description: "A peer whose profile says approval_mode \"gated\" runs without the runtime's \
            permission-bypass flag (Claude Code: --permission-mode manual instead of \
            --dangerously-skip-permissions; Codex: -a on-request -s read-only instead of \
            --dangerously-bypass-approvals-and-sandbox), and each permission prompt of its agent \
            waits here for a \
            human: its id (ap-<8 hex>), the peer, the tool and what it wants to run, and how long it \
            has left, one line per prompt with the command's control characters as visible \
            stand-ins (␍ for CR, ␛ for ESC, ␤ for a line break, <U+009B> for a C1 control), so \
            nothing in it can rewrite the line. A peer stopped at start-up by a dialog iapeer has no answer for (gated or not) \
            is listed too, with tool \"dialog\", the dialog's question and numbered options. \
            So is any other permission prompt on a live agent's screen (Claude Code asks even with \
            --dangerously-skip-permissions for a command a project permissions.ask rule names or a \
            PreToolUse hook answers ask for), with its menu ([1. Yes | 2. No]); meanwhile list \
            shows the peer (approval) and messages to it wait. Answer with iapeer approve <id> [option] or iapeer deny <id> [reason]. A prompt nobody \
            answers within IAPEER_APPROVAL_TIMEOUT_MS (5 minutes) is denied, and so is every prompt \
            whose session ends or whose daemon stops. --json prints the daemon's answer, \
            {\"ok\":true,\"approvals\":[…]}, oldest first.",
        positionals: &[],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Messaging,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Approve),
        name: "approve",
        signature: "approve <id> [option] [--json]",
        summary: "let a gated peer's pending tool call run, or answer a boot dialog",
        description: "Answer the permission prompt <id> (from iapeer approvals) with allow: the agent's \
            tool call runs. For a dialog at boot that iapeer does not know (tool \"dialog\"), approve \
            chooses [option] (its number or label; default: the option the dialog has selected) and \
            the boot goes on; deny ends the boot. For a prompt read from an agent's screen, approve \
            chooses its Yes, or [option] (not the one that refuses), and the reply waits (up to \
            15 s: the session gives up on an answer its prompt did not take within 10 s) for the \
            session to say what became of it: taken (keyed in, or taken by the runtime's API, and \
            the prompt closed); NOT taken and asked again as a new id, with the reason; NOT taken, \
            the prompt left the screen first; the session ended; or NOT confirmed in 15 s (look \
            with iapeer screen). Exits 1 when the answer is not known to be taken. The --json \
            document's outcome.kind is handed, taken, asked-again, prompt-gone, session-ended, \
            shutdown or unconfirmed. Refused when <id> is not pending (answered already, denied \
            when its time ran out, or unknown), or [option] is not one of the menu's.",
        positionals: &[APPROVAL_ID, OPTION],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Messaging,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Deny),
        name: "deny",
        signature: "deny <id> [reason] [--json]",
        summary: "refuse a gated peer's pending tool call, or end a boot stopped at a dialog",
        description: "Answer the permission prompt <id> (from iapeer approvals) with deny: the tool call \
            does not run and the agent is told [reason] (default \"denied by a human\"; quote a reason \
            of several words). For a boot dialog (tool \"dialog\"), the boot ends at once and the \
            waiting sender is told [reason]. For a prompt read from an agent's screen, its No is \
            chosen: the turn ends, and [reason] is only logged; the reply waits for the session to \
            say what became of it, as approve's does (exit 1 when not known to be taken). Refused \
            when <id> is not pending.",
        positionals: &[APPROVAL_ID, REASON],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Messaging,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::ApprovalRequest),
        name: "approval-request",
        signature: "approval-request",
        summary: "the permission hook of a gated Claude Code or Codex peer: asks a human through the daemon",
        description: "The command a gated Claude Code or Codex session runs for its PermissionRequest \
            hook (the launch installs it: Claude Code with --settings, Codex with -c hooks={…} and \
            its trust). It reads the hook's JSON on stdin (tool_name, tool_input) in the shape of \
            the session's PEER_RUNTIME, asks the daemon with the session's PEER_IDENTITY and \
            IAPEER_TOKEN, waits until a human approves or denies (or the request is denied: \
            timeout, session end, daemon stop) and prints the runtime's answer (hookSpecificOutput \
            with decision.behavior allow or deny). Any failure (no daemon, bad input, a broken \
            connection) prints a deny. It is started by the agent's CLI, not by hand.",
        positionals: &[],
        flags: &[],
        rules: &[],
        hidden: true,
        group: Group::Messaging,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Inbox),
        name: "inbox",
        signature: "inbox [peer] [--all] [--follow] [--json]",
        summary: "show the messages sent to a human peer",
        description: "Show the messages kept in the inbox of a peer on the human runtime, oldest first \
            and newest last: time, sender, topic, body and attachments (their inbox copies), unread ones \
            marked; the body keeps its line breaks, and every other control character a sender wrote \
            shows as a visible stand-in (␛ for ESC, ␍ for a lone CR, <U+202E> for a bidi control). Shows the unread messages, or every message with --all; what is shown counts as \
            read. Without [peer] it shows the inbox of the human this terminal speaks as (PEER_IDENTITY, \
            else the folder's peer, else the host's only human peer); with several humans and none of \
            these, name one. --follow keeps waiting for new messages until Ctrl-C, through a rename of the \
            peer; its removal ends it (exit 1). --json prints one \
            JSON object per message and line (the stored record plus \"unread\"). Reply with iapeer send \
            <sender> --topic <topic> --from human-<peer>. The inbox lives in \
            state/iapeer/inbox/<peer>.jsonl under the iapeer root, and is kept when nobody reads it.",
        positionals: &[args::SOME_PEER],
        flags: &[INBOX_ALL, FOLLOW, JSON],
        rules: &[],
        hidden: false,
        group: Group::Messaging,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Create),
        name: "create",
        signature: "create <name> [--runtime <rt>] [--path <folder>] [--worktree <repo> [--branch <b>]] \
            [--description <d>] [--intelligence <i>] [--no-bootstrap] [--json]",
        summary: "make a folder for a new peer and register it",
        description: "Make the working folder of a new peer (--path, else the peers folder of the iapeer \
            root) and turn it into a peer as init does. The folder's name, normalized, must equal <name>. \
            With --worktree <repo> the folder is a new git worktree of that repository (a folder of its \
            working tree, or a bare repository), on a new branch iapeer/<name> made from its HEAD (refused \
            when that branch exists); --branch <b> checks out the branch b instead (refused when another \
            worktree has it checked out) or, when there is none, makes it: tracking the one remote branch \
            of that name, else from HEAD — create says which. The peer's own files (.iapeer/) are \
            ignored by git there. list shows the branch; remove removes the worktree and keeps the branch; \
            rename moves it with git. \
            When the agent CLI --runtime names is not logged in (asked as onboard asks), create warns on \
            stderr with how to log in, and makes the peer all the same. \
            --json prints the registry entry; with --worktree it adds \"worktree\": {\"repository\", \"branch\", \"branch_made\", \"from\"}.",
        positionals: &[NAME],
        flags: &[
            PEER_RUNTIME,
            PATH,
            WORKTREE,
            BRANCH,
            DESCRIPTION,
            INTELLIGENCE,
            NO_BOOTSTRAP,
            JSON,
        ],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Init),
        name: "init",
        signature: "init [folder] [--runtime <rt>] [--description <d>] [--intelligence <i>] \
            [--no-bootstrap] [--json]",
        summary: "turn a folder into a peer named after it",
        description: "Turn a folder (the current one by default) into a peer named after the folder: write \
            its profile, a doctrine stub, launch settings, the registry entry and the agent's MCP \
            configuration. Without --runtime the runtime follows a .claude, .codex, .gemini or .opencode folder, else the \
            installed agent runtimes. Starts no agent session. Running it again for the same peer changes \
            nothing; it refuses a folder or name that belongs to another peer.",
        positionals: &[FOLDER],
        flags: &[PEER_RUNTIME, DESCRIPTION, INTELLIGENCE, NO_BOOTSTRAP, JSON],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::List),
        name: "list",
        signature: "list [--json]",
        summary: "show every peer with its runtimes and their state",
        description: "Show one row per peer: its name, its runtimes with their state (live, asleep, stopped, \
            parked, or missing: a router runtime whose program is not there, with the reason on a line \
            of its own) and the default one marked, whether a terminal is attached, queue depth, last \
            activity and description (on one line, its control characters as visible stand-ins: ␛ for \
            ESC, ␤ for a line break, <U+202E> for a bidi control; --json gives it exactly). Works when \
            the daemon is down; then every agent shows asleep. When a peer's folder is a git worktree \
            (create --worktree) a BRANCH column shows its branch as git lists it ((detached), or ! with \
            a line below when git no longer knows the worktree); --json gives it as worktree: \
            {repository, branch, head, problem}. When this root has joined a federation (iapeer \
            federation join), a second table, PEERS OF OTHER HOSTS, lists the other hosts' peers as \
            their daemon's roster shows them: NAME as a send names it (<name>@<host>), HOST with \
            online or offline, STATE (available, stopped, or offline while its host is: the roster \
            it showed last), RUNTIMES (the default marked *) and DESCRIPTION; they are known while \
            the daemon runs (its federation link reads them), and list says so when it is down. \
            --json adds one row per such peer after the local ones: {personality, host, address, \
            host_online, state, description, intelligence, default_runtime, runtimes} (a local row \
            has no host).",
        positionals: &[],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Verify),
        name: "verify",
        signature: "verify [--json] [--fix]",
        summary: "check the profiles and the registry against each other",
        description: "Check every peer profile (valid name, default runtime declared and listed, known nature \
            allowed on its runtimes) and the registry against the profiles. Exits 1 while problems remain. \
            What a runtime package or the user chose is a warning and exits 0: a name other than the \
            folder's, a description of several lines or over 450 characters, the legacy runtime field. \
            A worktree peer (create --worktree) whose worktree git no longer knows is a problem, with \
            what to do: --fix runs git worktree repair for a folder moved without git; for a worktree \
            git pruned it prints the git commands that attach the folder again.",
        positionals: &[],
        flags: &[
            JSON,
            FIX,
        ],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Remove),
        name: "remove",
        signature: "remove <peer> [--force] [--json]",
        summary: "unregister a peer, keeping its folder (or a worktree's branch)",
        description: "Drop the peer from the registry, end its sessions, and delete its attachment inbox \
            and lifecycle markers. The folder is kept, and a human's messages too, set aside as \
            <name>.removed-<ms>.jsonl so a later peer of that name starts with an empty inbox. A live \
            peer is refused without --force; removing an unknown peer does nothing and succeeds. A \
            later send to the name says it was removed. A peer made with create --worktree has its \
            worktree removed (git worktree remove; files git ignores go with it) and its branch kept, \
            with the command that deletes the branch; a worktree holding uncommitted changes or \
            untracked files is refused, naming them, and --force removes it with them (they are lost; \
            the branch's commits are kept). A worktree git has locked is refused; one git no longer \
            knows is kept as a folder. --json prints {\"removed\": false} for a name that is not \
            registered, else \"removed\": true with the kept \"folder\", \"inbox_kept\" (where a \
            human's messages were set aside, or null) and, for a worktree peer, \"worktree\": \
            {\"removed\", \"branch\", \"note\"}.",
        positionals: &[args::PEER],
        flags: &[flags::REMOVE_FORCE, JSON],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Rename),
        name: "rename",
        signature: "rename <old> <new> [--force] [--json]",
        summary: "rename a peer by renaming its folder",
        description: "A peer is named after its folder: move the folder to <new> beside it, move its \
            Claude Code history with it, and update the profile and the registry (and each runtime's \
            setup, and every timer or watcher trigger that names the peer). A live peer is refused without --force, which ends its sessions first; a taken or \
            invalid name, or a folder <new> that exists, is refused. All or nothing: undone when a step \
            fails (a full disk too); a rename killed halfway is finished or undone by the next \
            iapeer command or the daemon (state/iapeer/rename.json is its journal). A later \
            send to <old> is refused with the name it was renamed to (the last 64 freed names are \
            kept in state/iapeer/former-names.json). A worktree peer's folder is moved with git \
            worktree move (uncommitted work moves with it), a step the journal undoes or finishes; a \
            worktree git has locked or no longer knows is refused. \
            --json prints the old folder (\"from\"), the registry entry as written (\"peer\"), where the Claude Code history moved (\"history\", or null), the peers whose triggers named the old name (\"triggers_in\") and, for a worktree peer, \"worktree\": {\"branch\"}.",
        positionals: &[args::OLD, args::NEW],
        flags: &[FORCE, JSON],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Prompt),
        name: "prompt",
        signature: "prompt <peer> [--runtime <rt>] [--raw] [--json]",
        summary: "show the system prompt a peer's next wake starts with",
        description: "Print the system prompt iapeer gives the peer's agent at its next wake, in \
            place of the runtime's own: each layer under a label naming where it comes from (the \
            identity block, the docs pointer, <root>/IAPEER.md for every agent, \
            <folder>/.iapeer/IAPEER.md for this peer's role, the team list, the *.md domain files \
            and fragments), which doctrine files are absent, and files left out (empty, not \
            UTF-8). --raw prints the prompt alone. Needs no daemon. \
            --json prints {\"identity\", \"file\", \"layers\": [{\"layer\", \"source\", \"text\"}], \"skipped\": [{\"path\", \"reason\"}], \"prompt\"}.",
        positionals: &[args::PEER],
        flags: &[PROMPT_RUNTIME, RAW, JSON],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::LiveRuntime),
        name: "live-runtime",
        signature: "live-runtime <peer> [--json]",
        summary: "print the runtime a peer is live on",
        description: "Print the runtime the peer is live on (the most recently active one when several \
            are). Exits 1 with nothing on stdout when none is live.",
        positionals: &[args::PEER],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Stop),
        name: "stop",
        signature: "stop (<peer> [runtime] | --all [--everyone]) [--json]",
        summary: "end a peer's sessions and refuse messages until started",
        description: "Mark the peer stopped on a runtime (or every agent with --all) and end its \
            session. A stopped peer is never woken and messages to it are refused; an always-on \
            peer is not restarted. Without a runtime: every runtime the peer declares. --all \
            leaves humans and services (the human's inbox, timer, watcher, chat channels) running \
            so messages to the operator still arrive, and names them; name one to stop it, or add \
            --everyone. Idempotent.",
        positionals: PEER_AND_RUNTIME,
        flags: &[ALL, EVERYONE, JSON],
        rules: &[Rule::ReplacesPositionals(ALL)],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Start),
        name: "start",
        signature: "start (<peer> [runtime] | --all) [--json]",
        summary: "let a stopped peer take messages again",
        description: "Undo stop: the peer on a runtime (or every peer with --all) takes messages again. Agents \
            are not started: they wake on their next message. Always-on peers start at once.",
        positionals: PEER_AND_RUNTIME,
        flags: &[ALL, JSON],
        rules: &[Rule::ReplacesPositionals(ALL)],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Wake),
        name: "wake",
        signature: "wake <peer> [runtime] [--json]",
        summary: "bring a peer's session up now, without a message",
        description: "Wake the peer as a message would (resuming or starting fresh by the same rules) \
            and return once its session is ready; a live peer is left as it is. A stopped peer is \
            refused: start it first.",
        positionals: PEER_AND_RUNTIME,
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Restart),
        name: "restart",
        signature: "restart <peer> [runtime] [--json]",
        summary: "end a peer's session and bring it up again on its conversation",
        description: "End the peer's session if it has one and bring it up again, continuing the \
            conversation iapeer recorded for it (fresh when none was recorded, after refresh, or \
            for an ephemeral peer); returns once the session is ready and says which. Forgets the \
            crash history like new; an always-on peer is restarted and un-parked. For a fresh \
            conversation use new.",
        positionals: PEER_AND_RUNTIME,
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Attach),
        name: "attach",
        signature: "attach <peer> [runtime]",
        summary: "connect this terminal to a peer's live session",
        description: "Connect this terminal to the peer's session, resuming the conversation first when \
            the peer is asleep (and failing when there is nothing to resume). Ctrl-] detaches and \
            leaves the session running; while the peer is still waking, Ctrl-] or Ctrl-C cancels \
            the attach and the peer goes on waking.",
        positionals: PEER_AND_RUNTIME,
        flags: &[],
        rules: &[],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::New),
        name: "new",
        signature: "new <peer> [runtime] [--json]",
        summary: "restart a peer now with a fresh conversation",
        description: "End the peer's session if any, forget its crash history and bring up a fresh \
            session with no message; returns once the new session is ready. Always-on peers are \
            restarted and un-parked.",
        positionals: PEER_AND_RUNTIME,
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Refresh),
        name: "refresh",
        signature: "refresh (<peer> [runtime] | --all) [--json]",
        summary: "make the next wake start a fresh conversation",
        description: "Mark the peer so that its next natural wake starts a fresh conversation (re-reading \
            its doctrine) instead of resuming. Nothing is ended or woken now. Router runtimes are \
            skipped. \
            --json prints {\"marked\": [<identity>]}.",
        positionals: PEER_AND_RUNTIME,
        flags: &[ALL, JSON],
        rules: &[Rule::ReplacesPositionals(ALL)],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Interrupt),
        name: "interrupt",
        signature: "interrupt <peer> [runtime] [--json]",
        summary: "interrupt the turn a live agent is running",
        description: "Send the runtime's interrupt key (Escape) to the peer's live session. Refused for \
            router runtimes and for peers that are not live. Claude Code puts the interrupted message \
            back into its composer and out of its conversation: iapeer clears it, the next message \
            goes in alone, and the message's sender (when live) is told by a message from iapeer \
            that it was interrupted. Codex keeps an interrupted message in its conversation.",
        positionals: PEER_AND_RUNTIME,
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Compact),
        name: "compact",
        signature: "compact <peer> [runtime] [--json]",
        summary: "compact an agent's conversation",
        description: "Ask the peer's runtime to compact its conversation and wait for it to finish. A \
            peer asleep after an idle sleep is resumed first. Prints <identity>: compacted; a \
            conversation that is fresh is refused with exit 1 and <identity>: nothing-to-compact \
            (as the original tool did: its callers read the exit status and that word).",
        positionals: PEER_AND_RUNTIME,
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::SelfFresh),
        name: "self-fresh",
        signature: "self-fresh [--json]",
        summary: "from inside a session: restart yourself fresh",
        description: "For an agent's own use (needs PEER_IDENTITY): end this session; a fresh one is \
            brought up right after.",
        positionals: &[],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::SelfDone),
        name: "self-done",
        signature: "self-done [--json]",
        summary: "from inside an ephemeral worker: finish without replying",
        description: "For an ephemeral worker's own use (needs PEER_IDENTITY): arm the quiet wind-down \
            without sending anything. For a peer that is not ephemeral the mark is inert, and a \
            note says so. \
            --json prints {\"identity\", \"ephemeral\"}.",
        positionals: &[],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Lifecycle,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::AddRuntime),
        name: "add-runtime",
        signature: "add-runtime <rt> (--peer <p> | --all) [--json]",
        summary: "declare another agent runtime for a peer",
        description: "Declare another agent runtime for the peer (or every peer) and do that runtime's \
            setup (MCP configuration, folder trust). The default runtime never changes. \
            Idempotent. Only a peer of intelligence artificial takes an agent runtime: for a named \
            peer of another kind (a human) it is refused (exit 1) as create refuses it; --all skips \
            such peers with a note. \
            --json prints {\"runtime\", \"peers\": [{\"personality\", \"outcome\": added, refreshed or skipped}]}.",
        positionals: &[RT],
        flags: PEER_OR_ALL,
        rules: ONE_OF_PEER_OR_ALL,
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::DefaultRuntime),
        name: "default-runtime",
        signature: "default-runtime <rt> (--peer <p> | --all) [--json]",
        summary: "switch a peer's primary runtime",
        description: "Make a declared runtime the peer's default (or every peer's): where messages route \
            by default and what comes up first. Refused for a peer that does not declare it. \
            --json prints {\"runtime\", \"peers\": [<name>]}.",
        positionals: &[RT],
        flags: PEER_OR_ALL,
        rules: ONE_OF_PEER_OR_ALL,
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::ApprovalMode),
        name: "approval-mode",
        signature: "approval-mode [mode] (--peer <p> | --all) [--json]",
        summary: "show or set whether a peer's permission prompts go to a human",
        description: "Without [mode], print each peer's approval mode; [mode] is gated or bypass. gated: the peer's Claude or Codex \
            sessions launch without the permission-bypass flags and every permission prompt waits for a \
            human (iapeer approvals, approve, deny); bypass (the default): they run with the bypass \
            flags. Written to the peer's profile (approval_mode); it applies from the peer's next \
            session (iapeer new <peer> starts one now). \
            --json prints {\"peers\": [{\"peer\", \"mode\"}]}.",
        positionals: &[args::MODE],
        flags: PEER_OR_ALL,
        rules: ONE_OF_PEER_OR_ALL,
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Enable),
        name: "enable",
        signature: "enable <plugin> [peer] [--no-setup] [--json]",
        summary: "install a plugin of the agfpd marketplace for a peer's agent runtimes",
        description: "For each Claude or Codex runtime of the peer (default: the peer of the current \
            folder), install <plugin>@agfpd with the runtime's own plugin commands unless its plugin \
            list already has it for this peer: claude plugin install --scope project in the peer's \
            folder, codex plugin add (host-wide). A failed install refreshes the marketplace once \
            and tries again. Then the plugin's setup step, when its iapeer.json declares one, runs in \
            the plugin's folder with IAPEER_PEER_PERSONALITY and IAPEER_PEER_CWD. Prints already, \
            installed, runtime-missing (not a failure) or failed per runtime, and the setup's \
            outcome; exits 1 when an install or the setup failed. \
            --json prints {\"plugin\", \"personality\", \"runtimes\": [{\"runtime\", \"state\", \"path\", \"error\"}], \"setup\"}.",
        positionals: &[args::PLUGIN, args::SOME_PEER],
        flags: &[flags::NO_SETUP, JSON],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Connect),
        name: "connect",
        signature: "connect <channel> <peer> [--token <t>] [--bot <username>] [--json]",
        summary: "bind a Telegram bot to a peer (channel: telegram)",
        description: "Bind the bot to the peer through the installed telegram-runtime package: its bot \
            add (which checks the token with Telegram and that it is the named bot's) and interface \
            bot verbs; then interfaces.telegram.bot_username goes into the peer's profile and the \
            registry, and the telegram peers are restarted in a running daemon so they load the \
            bot. The same token again changes nothing and restarts nothing. The token and the \
            bot's @username are asked for on a terminal when not given. \
            --json prints {\"peer\", \"bot_username\", \"changed\", \"restarted\", \"interfaces\"}.",
        positionals: &[args::CHANNEL, args::PEER],
        flags: &[flags::TOKEN, flags::BOT, JSON],
        rules: &[],
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Federation),
        name: "federation",
        signature: "federation <action> [redis-url] [--host-name <name>] [--ca-file <pem>] [--client-cert <pem> --client-key <pem>] [--json]",
        summary: "join, leave or show this host's federation through Redis (action: join, leave, status)",
        description: "Hosts of one team share a Redis (or Valkey) server (docs/FEDERATION.md). join \
            <redis-url> checks the URL (redis://[user:password@]host[:port][/db], rediss:// for \
            TLS, or unix:///path/redis.sock[?user=&pass=&db=] for a Redis on this machine) and \
            the host name (the peer-name rule; default: the machine's short host name, \
            lowercased), and stores both in <root>/state/iapeer/federation.json (0600); a \
            running daemon's federation link picks it up within a second, else the next start \
            does. With rediss:// the server's certificate is checked against --ca-file (a PEM \
            file, stored as an absolute path; default: the system's CA store), and \
            --client-cert with --client-key answer a server that asks for a client certificate \
            (tls-auth-clients yes); the files are read at each connection. \
            IAPEER_FEDERATION_URL overrides the stored URL, IAPEER_FEDERATION_CA_FILE the CA file. \
            leave deletes the file; the link \
            then removes this host's keys from Redis. status shows whether this root has joined, \
            the host name, the URL with its password masked, and what the daemon's link last saw: \
            connected, or away since when with the last error (local delivery is unaffected; it \
            retries 1 s doubling to 10 s), the last heartbeat written (every 5 s) and the other \
            hosts with online or offline. The password is never printed. \
            --json prints for join {\"host\", \"url\"}, for leave {\"left\"}, for status \
            {\"joined\", \"host\", \"url\", \"source\", \"tls\", \"link\"} (tls: null for \
            redis://, else where the server's certificate is checked) where link is null when not joined or without a \
            running daemon, else {\"state\" (connected or away), \"host\", \"url\", \
            \"since_ms\", \"last_error\", \"last_heartbeat_ms\", \"updated_ms\", \"hosts\": \
            [{\"host\", \"version\", \"last_heartbeat_ms\", \"online\"}]}.",
        positionals: &[args::FEDERATION_ACTION, args::REDIS_URL],
        flags: &[
            flags::HOST_NAME,
            flags::CA_FILE,
            flags::CLIENT_CERT,
            flags::CLIENT_KEY,
            JSON,
        ],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::NativeMemory),
        name: "native-memory",
        signature: "native-memory <setting> (--peer <p> | --all) [--json]",
        summary: "turn an agent runtime's own memory off or back on",
        description: "With off, turn off the native memory of each agent runtime of the peer (or every \
            peer): Claude Code's autoMemoryEnabled false in <folder>/.claude/settings.json, Codex's \
            memories = false under [features] in <folder>/.codex/config.toml, other settings kept. \
            With on, delete those keys (the runtime's default applies). Prints written, already or \
            failed per runtime; a file that cannot be read as JSON or TOML is left alone and exits 1. \
            A memory provider's peers get off at birth. \
            --json prints {\"setting\", \"levers\": [{\"personality\", \"runtime\", \"file\", \"state\", \"error\"}]}.",
        positionals: &[args::SETTING],
        flags: PEER_OR_ALL,
        rules: ONE_OF_PEER_OR_ALL,
        hidden: false,
        group: Group::Peers,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Daemon),
        name: "daemon",
        signature: "daemon [--foreground] [--detach]",
        summary: "run the daemon in this terminal (or in the background with --detach)",
        description: "Run the iapeer daemon until it is told to stop. It owns every agent session, answers \
            the CLI on the control socket and agents over loopback HTTP, keeps always-on peers running and \
            puts idle agents to sleep. It never forks by itself, so launchd, systemd, containers and tests \
            run it as is. Where no service manager runs, --detach starts it in the background in a \
            session of its own (closing the terminal does not end it), with its output in \
            <root>/logs/iapeer/daemon-stdout.log and daemon-stderr.log next to daemon.log, and returns \
            once it answers; one daemon at a time. When it stops, every session ends, and live agents \
            resume on their next message. Whatever a session started ends with it (at stop, idle sleep \
            and shutdown), in whatever process group or session it runs: on Linux each session gets a \
            cgroup of its own where the daemon can make one (as root, or under the systemd unit install \
            writes), else the daemon adopts orphans as their child subreaper; on macOS its process group \
            is ended, as before.",
        positionals: &[],
        flags: &[FOREGROUND, DETACH],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Shutdown),
        name: "shutdown",
        signature: "shutdown [--json]",
        summary: "stop the running daemon and wait until it is gone",
        description: "Stop the daemon that answers on the control socket (however it was started) and \
            return once it is gone: every session ends, and live agents resume on their next message. \
            With no daemon running it says so and succeeds. --json prints {\"stopped\": <pid>}, \
            null when none was running.",
        positionals: &[],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Status),
        name: "status",
        signature: "status [--json]",
        summary: "show the health of the daemon and a summary of the peers",
        description: "Show the version, whether the daemon answers on its socket and on its MCP endpoint, the service state, how \
            many peers are live, asleep or stopped, the memory provider, and the send preparation: how many \
            sends are being prepared (their attachments copied) or wait for it, and the preparations stalled \
            over 2 s by sender (a read of an attachment that does not return) or, for sends without \
            attachments, by the peer whose folder does not answer, with what they read, for how long and \
            what to do. A daemon thread that panicked and was restarted (the HTTP acceptor or the event-stream \
            writer) gets a line saying how often, when last and what happened. Then where the daemon finds \
            each agent CLI (claude, codex, gemini, opencode) now, or that it finds none and every place it looked at, in \
            order. Then, for each agent CLI some peer runs on by default that is not logged in (asked as \
            onboard asks: claude auth status, codex login status, opencode auth list, Gemini CLI's \
            settings and files; each at most IAPEER_LOGIN_CHECK_SECS), a line naming its peers and how \
            to log in (in --json, \"logins\": runtime, login in/out/unknown, why, peers, fix). Exits 1 \
            when the daemon is not healthy, or when every thread of a send-preparation pool is stalled (the daemon line then says which sends cannot be prepared: with attachments, without, or none).",
        positionals: &[],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Doctor),
        name: "doctor",
        signature: "doctor [--json]",
        summary: "check the daemon's health and the peers' files",
        description: "iapeer status (version, daemon on its socket and MCP endpoint, service, peers, \
            memory provider, send preparation, outbox), then iapeer verify (registry, profiles, folders: read only; \
            verify --fix repairs). Exits 1 when either finds a problem (a stalled send preparation is one, and \
            so is an agent runtime a peer declares whose program the daemon cannot find: the places it \
            looked at are named); a line per installed agent CLI says whether it is logged in, or how \
            to log in (a warning, not a problem: it is asked in doctor's environment, not the peers' \
            launch.env); the last line is the verdict. With --json, one document \
            {\"ok\", \"version\", \"checks\"} where each check has a name (daemon, daemon-thread:<thread>, \
            service, peers, memory, send-preparation, agent-program:<runtime>, \
            agent-login:<runtime>, notice, outbox, \
            federation, clock-skew, clock-skew:<host>, registry, profile:<peer>), a level (ok, warn \
            or fail), a message and what to do (fix, null when nothing is); the exit code is the \
            same, 1 when a check fails. When this root has joined a federation (iapeer federation \
            join), doctor also checks it: the daemon's link to Redis (fails while away, with since \
            when, the error and what to do; the URL shown with its password masked), this host's \
            clock against Redis's TIME (measured by doctor over a short connection of its own) and \
            each other online host's clock by its last heartbeat: warn above 2 s of skew, fail \
            above 10 s (see docs/FEDERATION.md). Not joined, nothing about it is shown.",
        positionals: &[],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Ui),
        name: "ui",
        signature: "ui [--print] [--json]",
        summary: "open the team's page in a browser: peers, deliveries, screens, inbox, send",
        description: "Open the running daemon's web page in a browser (xdg-open or open, when stdout is \
            a terminal; otherwise, or with --print, print its link). The page lists every peer with its \
            state, queue depths and notices, updated live; shows a peer's recent deliveries and a \
            read-only view of its live screen; shows the human peer's inbox with a box to answer or to \
            write to any peer; and has buttons for wake, stop, start, new, interrupt and compact. It is \
            served on the daemon's loopback port and only for the operator: the link carries a key the \
            daemon makes at every start (kept 0600 in state/iapeer/ui.key under the iapeer root), which \
            the page trades for a cookie; without it the page answers 401. A link opens the page once \
            (its key is then replaced), and a link from an earlier daemon no longer works: run iapeer \
            ui again for another. The browser opener is given state/iapeer/ui-open.html (0600), a page \
            that leads on to the link, never the link itself: every user can read a command line. \
            --json prints {\"url\", \"opened\"}.",
        positionals: &[],
        flags: &[PRINT, JSON],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::TrustHooks),
        name: "trust-hooks",
        signature: "trust-hooks <hooks-file> [--check] [--json]",
        summary: "trust the hooks of a Codex hooks.json so Codex runs them without a review",
        description: "Record in $CODEX_HOME/config.toml (hooks.state) that every command hook of the \
            Codex hooks file is trusted, in the format of Codex 0.171.0, so Codex runs them without \
            asking for a review (a headless session skips untrusted hooks). The first output line \
            says trusted or already trusted; entries of hooks no longer in the file are dropped. \
            With --check nothing is written: each hook is reported trusted, missing or drift (changed \
            since trusted), and the exit code is 1 unless all are trusted. A note says when the \
            installed Codex is another version. \
            --json prints {\"file\", \"config\", \"changed\", \"hooks\": [<key>]}, with --check {\"file\", \"trusted\", \"hooks\": [{\"key\", \"command\", \"state\"}]}.",
        positionals: &[args::HOOKS_FILE],
        flags: &[flags::CHECK, JSON],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Install),
        name: "install",
        signature: "install [--json]",
        summary: "set up the root, the reference docs and the service file, starting nothing",
        description: "Create the root's folders, the host doctrine <root>/IAPEER.md when it is absent (never \
            overwritten), the reference docs in <root>/docs/iapeer/, and the service definition: a systemd \
            user unit (~/.config/systemd/user/iapeer.service, or in $IAPEER_SYSTEMD_DIR) where a systemd \
            user manager runs, a launchd agent (~/Library/LaunchAgents/com.agfpd.iapeer.plist, or in \
            $IAPEER_LAUNCHAGENTS_DIR) on macOS. The service runs this binary with the verb daemon; it is \
            written only when its bytes change, never over a file that lacks iapeer's ownership mark \
            (the unit's first line, the plist's com.iapeer.managed key: delete it to keep your own \
            edits; install then says it left your file as it is, and how to get iapeer's version back), \
            and never loaded: iapeer onboard loads it (install also prints the command that does). \
            Without a service manager it says so; iapeer onboard then runs the daemon with daemon \
            --detach. Running it again changes nothing. \
            --json prints {\"root\", \"doctrine\", \"docs_written\", \"service\": {\"manager\", \"file\", \"state\", and \"load\" or \"restore\"} or null}.",
        positionals: &[],
        flags: &[JSON],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Onboard),
        name: "onboard",
        signature: "onboard [--dry-run] [--accept-risk] [--human <name>]",
        summary: "set iapeer up to run as a service and wait until the daemon is healthy",
        description: "Explain the risk (agents run with their permission prompts bypassed) and go on only \
            with --accept-risk or a yes typed on the terminal; without a terminal and without the flag \
            it exits 2. Then: prepare the root as install does, write the service file (a systemd user \
            unit or a launchd agent, never over a file iapeer did not write), load it (systemctl --user \
            daemon-reload and enable --now iapeer, or launchctl bootstrap) and wait until the daemon \
            answers ping twice in a row within 15 s. Where no service manager runs (containers, CI) it \
            starts iapeer daemon --detach instead and says so; iapeer shutdown stops it. A daemon \
            already running outside a service manager is stopped first so that the service runs it. \
            It warns about the agent CLIs (claude, codex) that are installed but not logged in, \
            asking each through its own status command (claude auth status, codex login status; not \
            in a dry run, since asking writes their config files). Then, unless a human peer exists \
            already, it creates yours on the built-in human runtime \
            (named by --human, else your login name, else you): messages to it wait in the inbox that \
            iapeer inbox shows. It creates the built-in notifier's always-on service peers timer \
            (agents schedule their own messages) and watcher (scripts whose output lines reach a \
            peer) unless peers of those names exist, each with its call card as description. The \
            Telegram and memory steps are listed as not available yet (iapeer connect telegram and \
            the memory slot's verbs do them by hand). With \
            --dry-run it prints every step and changes nothing.",
        positionals: &[],
        flags: &[DRY_RUN, ACCEPT_RISK, HUMAN],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Update),
        name: "update",
        signature: "update [path-or-version] [--force] [--foundation-only]",
        summary: "install a newer iapeer build and restart the daemon on it",
        description: "Install the iapeer binary at the given path (a local build, e.g. target/release/iapeer) \
            as $IAPEER_BIN_DIR/iapeer (default ~/.local/bin), atomically, keeping the current one as \
            iapeer.prev; a build of scripts/release.sh brings the debug file it names \
            (iapeer-<id>.debug, file and line in backtraces) from beside it, and a debug file neither \
            binary names is removed. Then restart the daemon (through the service manager when the service is \
            loaded, else iapeer shutdown and iapeer daemon --detach) and wait until it is healthy. It \
            lists the live agent sessions first and refuses while any is mid-turn (its screen shows a \
            turn in progress), unless --force. A loaded \
            service's file is first made to run the installed binary (only when iapeer wrote it). \
            Exits 1 when the installed binary does not run or the new daemon is not healthy, naming \
            the command that goes back: $IAPEER_BIN_DIR/iapeer.prev rollback (iapeer itself is the new \
            binary then). Installing a \
            published version from the package registry is not available yet: build it and give its \
            path. --foundation-only (the original tool's flag) changes nothing: runtimes are updated \
            with update-runtime.",
        positionals: &[args::PATH_OR_VERSION],
        flags: &[UPDATE_FORCE, flags::FOUNDATION_ONLY],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::InstallRuntime),
        name: "install-runtime",
        signature: "install-runtime (<rt> | <dir>) [--package <spec>] [--npx] [--no-bootstrap]",
        summary: "install a runtime package (or a runtime folder) and provision the peers it declares",
        description: "Install the package that provides runtime <rt> with npm into \
            <root>/runtimes/<rt>/package (--package: an npm package name, name@version or a local \
            tarball; known without it: telegram is @agfpd/telegram-runtime, notifier is \
            @agfpd/notifier-runtime) and run its program once without arguments, which writes \
            <root>/runtimes/<rt>/runtime.json — skipped when that manifest exists, unless --package or \
            --npx is given (--npx alone installs the package it was installed from again). Then every peer the manifest declares (peers[]) is created with its description, \
            intelligence, folder (path) and program (runtimeBin), the package's selfConfig runs in \
            its folder with IAPEER_PEER_PERSONALITY, IAPEER_PEER_CWD, IAPEER_PEER_RUNTIME, \
            IAPEER_PEER_INTELLIGENCE and IAPEER_ROOT set, and a running daemon starts it unless \
            --no-bootstrap. A peer whose selfConfig fails is created but stays stopped (exit 1; \
            iapeer start <peer> once configured). A manifest without peers[] is operator-add: \
            iapeer create <name> --runtime <rt>. install-runtime notifier without --package and \
            without an installed package provisions the built-in notifier's timer and watcher. \
            A <dir> (an argument with a /, such as ./parrot) is a runtime folder: its runtime.json \
            is checked (a terminal agent's, \"kind\": \"terminal\", declares its command, how the \
            system prompt and the MCP endpoint reach it, its ready, busy, composer and paste \
            patterns, its fresh and resume arguments and its interrupt keys; docs/RUNTIMES.md) and \
            only a valid one is copied, whole, to <root>/runtimes/<rt>/, replacing that runtime's \
            folder at once; a bad manifest is refused with what is wrong and installs nothing. \
            Then iapeer create <name> --runtime <rt>.",
        positionals: &[RT],
        flags: &[PACKAGE, NPX, NO_BOOTSTRAP],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::UpdateRuntime),
        name: "update-runtime",
        signature: "update-runtime (<rt> | --all) [--force]",
        summary: "reinstall a runtime package when a newer version exists",
        description: "Compare the installed manifest's version with the latest version of the package it \
            was installed from (npm view, 60 s; a local tarball's own version). Equal and no --force: \
            already-latest, nothing changes. Otherwise reinstall it as install-runtime does, provision \
            its declared peers again and restart the running peers of that runtime. A manifest \
            without a version is reinstalled (the version gate is skipped, and said so). With --all, \
            a runtime written by hand (a runtime.json no package is known for) is skipped with a note, \
            one that fails does not stop the others, and the exit is 1 only when an update failed. \
            A runtime installed from a folder (install-runtime <dir>) is updated from that folder: \
            read and checked again, installed whole in place of the old copy, with which files were \
            added, changed or removed (or unchanged: nothing is done); a folder that is gone or now \
            invalid is refused and the installed runtime kept as it was.",
        positionals: &[RT],
        flags: &[RUNTIMES_ALL, REINSTALL],
        rules: &[Rule::ReplacesPositionals(RUNTIMES_ALL)],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Rollback),
        name: "rollback",
        signature: "rollback",
        summary: "go back to the previous binary and restart the daemon on it",
        description: "Put $IAPEER_BIN_DIR/iapeer.prev back as iapeer, restart the daemon as update does \
            and wait until it is healthy (exit 1 when it is not). One level only: iapeer.prev is gone \
            afterwards.",
        positionals: &[],
        flags: &[],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Uninstall),
        name: "uninstall",
        signature: "uninstall [--dry-run] [--yes] [--purge]",
        summary: "remove what install put on this machine",
        description: "Stop the daemon (unloading the service), then remove exactly what install created: \
            the binary and iapeer.prev in $IAPEER_BIN_DIR with their debug files (iapeer-<id>.debug), the man page, the bash, zsh and fish \
            completions, and the service file when iapeer wrote it; and take out of \
            $CODEX_HOME/config.toml the [mcp_servers.iapeer] block and the \
            check_for_update_on_startup setting that codex peers added (the user's other settings \
            and comments stay). The root (peers, logs, messages) is kept unless --purge. Asks on a terminal; without one it needs --yes (else exit 2). \
            With --dry-run it prints what it would remove and changes nothing.",
        positionals: &[],
        flags: &[DRY_RUN, YES, PURGE],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Demo),
        name: "demo",
        signature: "demo [--keep] [--federation]",
        summary: "watch two stand-in agents talk, with no accounts needed",
        description: "Start a private daemon in a temporary root, create two peers on the echo stand-in \
            runtime, send messages both ways (one to a sleeping peer, so the wake shows) and print each \
            delivery as it happens; then stop everything and delete the temporary root. \
            --federation shows a team across machines (docs/FEDERATION.md) on this one: a private \
            redis-server on a free loopback port (nothing saved, a random password), two daemons as \
            hosts a (you and alice) and b (bob) joined to it, and messages crossing both ways (you → \
            bob@b and his echo back, bob → alice@a and hers back), each delivery printed on the host \
            that logged it. It needs redis-server (or valkey-server) installed; without one it says \
            how to install it and starts nothing (exit 1).",
        positionals: &[],
        flags: &[KEEP, FEDERATION],
        rules: &[],
        hidden: false,
        group: Group::Demo,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::Logs),
        name: "logs",
        signature: "logs [peer] [--since <dur|time>] [--follow] [--json]",
        summary: "show deliveries, wakes, sleeps and deaths in time order",
        description: "Merge the event logs (delivery.log, lifecycle.log and exits.log under logs/iapeer of \
            the iapeer root, rotated copies included) into one list in time order, one readable line \
            each: the local time, who, what and the details, e.g. \"14:03:07 alice → bob  delivered  \
            topic=x (woke)\"; a control character in a logged value shows as a visible stand-in (␛, \
            ␤ for a line break). [peer] keeps the entries that name that peer; --since keeps the recent \
            ones; --follow keeps printing new entries until Ctrl-C; --json prints one JSON object per \
            entry and line. The logfmt files stay the machine-readable source.",
        positionals: &[args::SOME_PEER],
        flags: &[SINCE, FOLLOW, JSON],
        rules: &[],
        hidden: false,
        group: Group::Host,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::HumanInbox),
        name: "human-inbox",
        signature: "human-inbox",
        summary: "the program behind the human runtime: stores messages in the inbox",
        description: "The program the human runtime runs for a human peer: it reads the messages the \
            daemon writes to its input, appends each to the peer's inbox file, syncs it to disk and \
            acknowledges it, so a send to a human is answered delivered only once the message is \
            stored. It is started by the daemon, not by hand. IAPEER_NOTIFY=0 turns off its desktop \
            notifications (notify-send or osascript, when installed).",
        positionals: &[],
        flags: &[],
        rules: &[],
        hidden: true,
        group: Group::Demo,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::RunInfra),
        name: "run-infra",
        signature: "run-infra [args]...",
        summary: "the original iapeer's service entry: says how to move over",
        description: "Service jobs written by the original TypeScript iapeer run iapeer run-infra with a \
            peer and its runtime. This daemon runs such peers itself, so the verb prints one line \
            saying how to remove the old job and then waits without exiting, so the job's service \
            manager does not restart it in a loop.",
        positionals: &[ARGS],
        flags: &[],
        rules: &[],
        hidden: true,
        group: Group::Demo,
        passthrough: true,
    },
    VerbSpec {
        id: VerbId::Run(Verb::NotifierRun),
        name: "notifier-run",
        signature: "notifier-run",
        summary: "the program behind the notifier runtime: the timer and watcher services",
        description: "The program the built-in notifier runtime runs for the service peers timer and \
            watcher (a peer whose name ends in watcher runs scripts, any other fires timers). It reads \
            the messages the daemon writes to its input — calls whose body is JSON: register, list, \
            unregister, help — keeps each caller's triggers under notifier.triggers in the caller's \
            profile, and sends every timer fire and watcher line with iapeer send, through the chain \
            target, fallbacks, owner, NOTIFIER_FALLBACK_TARGET (two attempts per link, 30 s apart); \
            undelivered signals wait in <root>/state/notifier/<peer>/escalation/. Its own log is \
            <root>/logs/notifier/<peer>.log. It is started by the daemon, not by hand; an installed \
            runtimes/notifier/runtime.json (the @agfpd/notifier-runtime package) replaces it.",
        positionals: &[],
        flags: &[],
        rules: &[],
        hidden: true,
        group: Group::Demo,
        passthrough: false,
    },
    VerbSpec {
        id: VerbId::Run(Verb::EchoAgent),
        name: "echo-agent",
        signature: "echo-agent [args]...",
        summary: "the stand-in agent program behind the echo runtime",
        description: "The stand-in agent that the echo runtime runs in a pty: it draws a prompt, prints each \
            message it receives and answers the sender with the same text through the daemon (never \
            a service's message: sender intelligence absent). It is started by the daemon, not by hand; every word after the verb is passed to it untouched.",
        positionals: &[ARGS],
        flags: &[],
        rules: &[],
        hidden: true,
        group: Group::Demo,
        passthrough: true,
    },
];

/// The bare form `iapeer <runtime>` (one of [`SHORTCUT_RUNTIMES`](super::SHORTCUT_RUNTIMES)), described like a verb.
pub static RUNTIME_SHORTCUT: VerbSpec = VerbSpec {
    id: VerbId::RuntimeShortcut,
    name: crate::runtime_table::SHORTCUT_NAMES,
    signature: crate::runtime_table::SHORTCUT_CHOICE,
    summary: "start a fresh session of this folder's peer on that runtime and attach",
    description:
        "Typed in a peer's folder, a runtime name starts a fresh session of that peer on the \
        runtime, then connects this terminal to it (on a terminal) or reports and exits.",
    positionals: &[],
    flags: &[],
    rules: &[],
    hidden: false,
    group: Group::Lifecycle,
    passthrough: false,
};

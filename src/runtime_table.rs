//! The table of runtimes (issue 27 item 1): every fact about a built-in runtime in one row —
//! its name and class, how its program is found, how its system prompt is swapped, how its
//! MCP client gets the session token, its login check, its native-memory lever, its plugin
//! dialect, whether its approvals can be gated, whether it is a shortcut verb, its place in
//! the default preference order, the folder that marks a project as its own, its
//! `launch.env` examples, how its conversations get their ids.
//!
//! Only data lives here; how a runtime behaves stays behind the `Adapter` trait
//! (`crate::adapter`, implemented in `crate::runtime`), which reads its row where a fact is
//! spelled. Outside this module and the adapters no code matches a runtime's name as a string
//! (`runtime_names_tests` fails when one does): it asks [`get`] for the row and reads it.
//!
//! A row borrows its text (`RuntimeInfo<'a>`): the built-in rows are `'static` ([`BUILT_IN`]),
//! and a row can also be made at run time from something that outlives it (an installed
//! runtime's manifest, later), so the lookups that take such rows take `&[RuntimeInfo]`.
//! Adding a built-in runtime is one row here and one adapter in `runtime`.
//!
//! Nothing here imports another module of the crate: it is the bottom floor, so every user
//! (`names` included) imports it downward.

use std::path::{Path, PathBuf};

/// What a runtime's peers are (spec 01 §4, spec 04 §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// An agent TUI hosted in a pty: woken on demand, slept when idle; artificial peers only.
    Agent,
    /// A runtime on pipes, always on (the router packages): peers of any nature.
    Router,
    /// A built-in service on pipes whose peers are absent (the `notifier`).
    Service,
    /// A channel to a person (the built-in `human`, the chat and mail packages): natural or
    /// absent peers.
    Human,
}

/// How a runtime's program is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program<'a> {
    /// An agent CLI looked for at every launch (`runtime::agent_program::locate`):
    /// `IAPEER_<RT>_BIN`, `PATH`, the login shell's `PATH`, the installers' folders.
    Located {
        /// What to install, for advice (`Claude Code`).
        product: &'a str,
    },
    /// This very binary run with one of its own verbs (`iapeer echo-agent`).
    OwnVerb(&'a str),
}

/// How the layered system prompt (spec 06) reaches a runtime's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptSwap<'a> {
    /// A flag followed by the prompt file's path (`--system-prompt-file <file>`).
    Flag(&'a str),
    /// A config override `-c <key>=<file>` (`model_instructions_file`).
    ConfigKey(&'a str),
    /// An environment variable holding the prompt file's path, which replaces the program's
    /// whole built-in prompt (`GEMINI_SYSTEM_MD`).
    EnvVar(&'a str),
    /// The config given at launch in this environment variable (OpenCode's
    /// `OPENCODE_CONFIG_CONTENT`, merged last over the user's) sets the default agent's
    /// `prompt` to `{file:<file>}`, which replaces the agent's own prompt.
    ConfigEnv(&'a str),
    /// The program takes no system prompt.
    None,
}

/// How a runtime's MCP client reaches the daemon with the session token (`IAPEER_TOKEN`,
/// spec 02 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpClient {
    /// The project's `.mcp.json` entry `iapeer`, written at the peer's birth and refreshed at
    /// every wake; its headers expand `IAPEER_TOKEN` (Claude Code).
    ProjectFile,
    /// The host's config (`[mcp_servers.iapeer]` with `bearer_token_env_var = "IAPEER_TOKEN"`)
    /// and the folder's trust, written at birth, refreshed at every wake, removed at the
    /// peer's removal; the URL given at launch with `-c` (the Codex CLI).
    HostConfig,
    /// The user's settings file (`~/.gemini/settings.json`): an `mcpServers.iapeer` entry
    /// whose headers expand `${IAPEER_TOKEN}`, trusted (no confirmation per call), merged in
    /// at birth and refreshed at every wake, the user's other settings kept (Gemini CLI).
    UserSettings,
    /// The program reads the daemon's address and `IAPEER_TOKEN` from its environment
    /// (the echo agent).
    Environment,
    /// A remote `mcp.iapeer` entry in the config given at launch in an environment variable
    /// ([`PromptSwap::ConfigEnv`]'s), with the real port; its headers expand `IAPEER_TOKEN`
    /// themselves (`{env:IAPEER_TOKEN}`). Nothing is written to disk (OpenCode).
    LaunchConfig,
    /// None: the program is iapeer itself and speaks the control socket.
    None,
}

/// How a runtime's CLI answers whether it is logged in (spec 08 §1, `host::login`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginCheck<'a> {
    /// The status command's arguments (`auth status`).
    pub args: &'a [&'a str],
    /// How its answer is read.
    pub answer: LoginAnswer,
    /// What to do when logged out: the end of a sentence starting "agents on it cannot answer
    /// until you".
    pub advice: &'a str,
    /// The files the status command reads to answer (recorded with `strace` from the real
    /// CLI, logged out and in): a remembered answer holds while none of them changed
    /// (`host::login_memo`). Empty for a check without a command (nothing to spare).
    pub records: &'a [LoginFile<'a>],
}

/// A file (or folder) a login status command reads: `$<var>/<in_var>` when `var` is set
/// and not empty, and `~/<path>` (or `path` itself when absolute) in any case — both are
/// watched, so a variable the CLI may or may not honour never hides a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginFile<'a> {
    /// The environment variable that moves the file's folder (`CODEX_HOME`), if any.
    pub var: Option<&'a str>,
    /// The file under `$<var>` (empty: the variable names the file itself).
    pub in_var: &'a str,
    /// The file under the home folder, or an absolute path.
    pub path: &'a str,
}

/// A [`LoginFile`] at `path` (under the home folder unless absolute) only.
const fn at(path: &str) -> LoginFile<'_> {
    LoginFile {
        var: None,
        in_var: "",
        path,
    }
}

/// A [`LoginFile`] under `$<var>`, else under the home folder at `path`.
const fn moved<'a>(var: &'a str, in_var: &'a str, path: &'a str) -> LoginFile<'a> {
    LoginFile {
        var: Some(var),
        in_var,
        path,
    }
}

/// How a login status command says its answer (recorded from the real CLIs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginAnswer {
    /// JSON on stdout with `"loggedIn"`, else the exit status (Claude Code 2.1.332).
    LoggedInJson,
    /// The exit status: 0 logged in, 1 not (Codex 0.171.0).
    ExitStatus,
    /// `auth list`'s counts of saved credentials and provider keys in the environment
    /// (OpenCode 1.18.33; it exits 0 either way).
    CredentialCount,
    /// No status command: the settings, credential files and environment, read as the CLI
    /// reads them at start (Gemini CLI 0.61.0, `host::gemini_login`). `args` is empty.
    GeminiSettings,
}

/// A runtime's native-memory lever (spec 08 §3, `memory::native`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLever<'a> {
    /// The file, in the runtime's project folder ([`RuntimeInfo::project_folder`]).
    pub file: &'a str,
    /// How the file is edited.
    pub edit: LeverEdit,
}

/// How a native-memory lever file is edited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeverEdit {
    /// Claude Code's `settings.json` key `autoMemoryEnabled`.
    ClaudeSettings,
    /// The Codex `config.toml` memories switches.
    CodexConfig,
}

/// How a runtime's CLI lists and installs plugins (spec 08 §4, `plugins`; recorded in
/// `tests/fixtures/*/plugins/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginDialect {
    /// `claude plugin list --json` (the project-scope entry), `plugin install --scope
    /// project`, `plugin marketplace update`.
    Claude,
    /// `codex plugin list --json`, `plugin add`, `plugin marketplace upgrade`.
    Codex,
}

/// The runtime-specific lines of the commented `launch.env` template (`launch_env::stub`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchEnvExample<'a> {
    /// The example `PEER_START_ARGS` line, commented, with its newline.
    pub start_args: &'a str,
    /// The lines after it for the runtime's own keys (may be empty).
    pub own_keys: &'a str,
    /// The example environment lines, commented.
    pub env: &'a str,
}

/// The template lines of a runtime without a row or without examples of its own.
pub const GENERIC_LAUNCH_ENV: LaunchEnvExample<'static> = LaunchEnvExample {
    start_args: "#PEER_START_ARGS=--verbose\n",
    own_keys: "",
    env: "#LOG_LEVEL=debug\n",
};

/// How a runtime's conversations get the id a resume names (issue 32 item 1): a resume of
/// "the folder's newest conversation" (`--continue`, `resume --last`) can take up one a
/// person held in the peer's folder, so a runtime with several conversations per folder is
/// resumed only by the id iapeer recorded for the peer's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConversationNaming {
    /// One conversation per folder that only iapeer's sessions write (the echo agent), or no
    /// conversation (router runtimes): resumed as the folder's.
    Folder,
    /// iapeer chooses the id of a fresh conversation at launch (Claude Code's
    /// `--session-id <uuid>`).
    Chosen,
    /// The runtime chooses it; iapeer learns it from the runtime's records of the session's
    /// first confirmed delivery (`adapter::Confirm::conversation`; Codex's session file).
    Learned,
}

/// One runtime's facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeInfo<'a> {
    /// The runtime's name (spec 01 §3): the part of an identity before the personality.
    pub name: &'a str,
    /// What its peers are.
    pub class: Class,
    /// How its program is found.
    pub program: Program<'a>,
    /// How the system prompt reaches it.
    pub prompt: PromptSwap<'a>,
    /// How its MCP client gets the session token.
    pub mcp: McpClient,
    /// Its login check, for agent CLIs that have one.
    pub login: Option<LoginCheck<'a>>,
    /// Its native-memory lever, if it has one.
    pub memory: Option<MemoryLever<'a>>,
    /// Its plugin dialect, if `iapeer enable` can install plugins on it.
    pub plugins: Option<PluginDialect>,
    /// Whether its approvals can be gated to a human (spec 10 §4).
    pub gates_approvals: bool,
    /// Whether `iapeer <name>` is a verb (start a fresh session, then attach).
    pub shortcut: bool,
    /// Its place in the default preference order of a new peer's runtime (0 first); `None`
    /// when it is never chosen by default.
    pub preference: Option<u8>,
    /// The folder that marks a project as the runtime's own (`.claude`), where its project
    /// settings live.
    pub project_folder: Option<&'a str>,
    /// The folder under the home the runtime is started with where it keeps its own
    /// settings, credentials and records (`.gemini`: read by `host::gemini_login` and the
    /// Gemini adapter's setup; `.codex`, `.claude`); `None` where iapeer reads none.
    pub home_folder: Option<&'a str>,
    /// Its `launch.env` template lines; `None`: [`GENERIC_LAUNCH_ENV`].
    pub launch_env: Option<LaunchEnvExample<'a>>,
    /// How its conversations get the id a resume names.
    pub naming: ConversationNaming,
}

/// A row with every optional fact absent (the base the built-in rows fill in).
const NO_FACTS: RuntimeInfo<'static> = RuntimeInfo {
    name: "",
    class: Class::Router,
    program: Program::OwnVerb(""),
    prompt: PromptSwap::None,
    mcp: McpClient::None,
    login: None,
    memory: None,
    plugins: None,
    gates_approvals: false,
    shortcut: false,
    preference: None,
    project_folder: None,
    home_folder: None,
    launch_env: None,
    naming: ConversationNaming::Folder,
};

/// Claude Code (spec 04 §2 "claude").
pub const CLAUDE: RuntimeInfo<'static> = RuntimeInfo {
    name: "claude",
    class: Class::Agent,
    program: Program::Located {
        product: "Claude Code",
    },
    prompt: PromptSwap::Flag("--system-prompt-file"),
    mcp: McpClient::ProjectFile,
    login: Some(LoginCheck {
        args: &["auth", "status"],
        answer: LoginAnswer::LoggedInJson,
        advice: "log in by running `claude` once, or give the peers an ANTHROPIC_API_KEY in \
                 their launch.env",
        // 2.1.332: `~/.claude.json` holds a `/login` key (`primaryApiKey`), `.credentials.json`
        // the claude.ai login, `settings.json` an `apiKeyHelper`; all move to
        // `$CLAUDE_CONFIG_DIR` when it is set.
        records: &[
            moved("CLAUDE_CONFIG_DIR", ".claude.json", ".claude.json"),
            moved("CLAUDE_CONFIG_DIR", ".credentials.json", ".claude/.credentials.json"),
            moved("CLAUDE_CONFIG_DIR", "settings.json", ".claude/settings.json"),
            moved("CLAUDE_CONFIG_DIR", ".config.json", ".claude/.config.json"),
            at(".config/anthropic/active_config"),
            at(".config/anthropic/configs"),
            at(".config/anthropic/configs/default.json"),
            at("/etc/claude-code/managed-settings.json"),
            at("/etc/claude-code/managed-settings.d"),
        ],
    }),
    memory: Some(MemoryLever {
        file: "settings.json",
        edit: LeverEdit::ClaudeSettings,
    }),
    plugins: Some(PluginDialect::Claude),
    gates_approvals: true,
    shortcut: true,
    preference: Some(0),
    project_folder: Some(".claude"),
    home_folder: Some(".claude"),
    launch_env: Some(LaunchEnvExample {
        start_args: "#PEER_START_ARGS=--model opus\n",
        own_keys: "#\n\
                   # PEER_DISALLOWED_TOOLS: value of --disallowedTools. Not set: AskUserQuestion (a\n\
                   # peer has nobody at its keyboard to answer). Set but empty: no --disallowedTools.\n\
                   #PEER_DISALLOWED_TOOLS=AskUserQuestion\n",
        env: "#ANTHROPIC_BASE_URL=http://127.0.0.1:8080\n\
              # Claude refuses to skip permission prompts as root unless it is told it runs\n\
              # in a sandbox (only inside a container or VM):\n\
              #IS_SANDBOX=1\n",
    }),
    naming: ConversationNaming::Chosen,
};

/// The Codex CLI (spec 04 §2 "codex").
pub const CODEX: RuntimeInfo<'static> = RuntimeInfo {
    name: "codex",
    class: Class::Agent,
    program: Program::Located {
        product: "the Codex CLI",
    },
    prompt: PromptSwap::ConfigKey("model_instructions_file"),
    mcp: McpClient::HostConfig,
    login: Some(LoginCheck {
        args: &["login", "status"],
        answer: LoginAnswer::ExitStatus,
        advice: "log in with `codex login` (or `codex login --with-api-key`), unless a model \
                 provider in ~/.codex/config.toml brings its own key",
        // 0.171.0: `auth.json` (or, by `config.toml`, the keyring), `.env`, the system's config.
        records: &[
            moved("CODEX_HOME", "auth.json", ".codex/auth.json"),
            moved("CODEX_HOME", "config.toml", ".codex/config.toml"),
            moved("CODEX_HOME", ".env", ".codex/.env"),
            at("/etc/codex/config.toml"),
            at("/etc/codex/managed_config.toml"),
            at("/etc/codex/requirements.toml"),
        ],
    }),
    memory: Some(MemoryLever {
        file: "config.toml",
        edit: LeverEdit::CodexConfig,
    }),
    plugins: Some(PluginDialect::Codex),
    gates_approvals: true,
    shortcut: true,
    preference: Some(1),
    project_folder: Some(".codex"),
    // `$CODEX_HOME` moves it.
    home_folder: Some(".codex"),
    launch_env: Some(LaunchEnvExample {
        start_args: "#PEER_START_ARGS=-c model_reasoning_effort=high\n",
        own_keys: "",
        env: "#OPENAI_BASE_URL=http://127.0.0.1:8080/v1\n",
    }),
    // No flag chooses a new session's id (0.171.0's `--help`): it is learned from the
    // session file holding the first confirmed delivery.
    naming: ConversationNaming::Learned,
};

/// Gemini CLI (issue 27 item 2; recorded in `tests/fixtures/gemini-cli-0.61.0/`). It has no
/// login status command (0.61.0's `--help`): its login is read from its settings and files.
pub const GEMINI: RuntimeInfo<'static> = RuntimeInfo {
    name: "gemini",
    class: Class::Agent,
    program: Program::Located {
        product: "Gemini CLI (npm install -g @google/gemini-cli)",
    },
    prompt: PromptSwap::EnvVar("GEMINI_SYSTEM_MD"),
    mcp: McpClient::UserSettings,
    login: Some(LoginCheck {
        args: &[],
        answer: LoginAnswer::GeminiSettings,
        advice: "give the peers a GEMINI_API_KEY in their launch.env, or log in by running \
                 `gemini` once",
        records: &[],
    }),
    // Gated: `--approval-mode default`, its tool confirmations read from the screen.
    gates_approvals: true,
    preference: Some(2),
    project_folder: Some(".gemini"),
    home_folder: Some(".gemini"),
    launch_env: Some(LaunchEnvExample {
        start_args: "#PEER_START_ARGS=--model gemini-2.5-pro\n",
        own_keys: "",
        env: "#GEMINI_API_KEY=...\n#GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8080\n",
    }),
    // Learned from the session file that holds the first confirmed delivery.
    naming: ConversationNaming::Learned,
    ..NO_FACTS
};

/// OpenCode (npm `opencode-ai`; recorded for 1.18.33 in `tests/fixtures/opencode-1.18.33/`).
pub const OPENCODE: RuntimeInfo<'static> = RuntimeInfo {
    name: "opencode",
    class: Class::Agent,
    program: Program::Located {
        product: "OpenCode (npm install -g opencode-ai)",
    },
    prompt: PromptSwap::ConfigEnv("OPENCODE_CONFIG_CONTENT"),
    mcp: McpClient::LaunchConfig,
    login: Some(LoginCheck {
        args: &["auth", "list"],
        answer: LoginAnswer::CredentialCount,
        advice: "log in with `opencode auth login`, or give the peers a provider's key (such as \
                 ANTHROPIC_API_KEY or OPENAI_API_KEY) in their launch.env, unless a provider in \
                 opencode.json brings its own key",
        // 1.18.33: the saved credentials, the config, and the models list whose providers'
        // variables it counts.
        records: &[
            moved(
                "XDG_DATA_HOME",
                "opencode/auth.json",
                ".local/share/opencode/auth.json",
            ),
            moved("XDG_CONFIG_HOME", "opencode", ".config/opencode"),
            moved(
                "XDG_CONFIG_HOME",
                "opencode/opencode.json",
                ".config/opencode/opencode.json",
            ),
            moved(
                "XDG_CONFIG_HOME",
                "opencode/opencode.jsonc",
                ".config/opencode/opencode.jsonc",
            ),
            moved(
                "XDG_CONFIG_HOME",
                "opencode/config.json",
                ".config/opencode/config.json",
            ),
            moved(
                "XDG_CACHE_HOME",
                "opencode/models.json",
                ".cache/opencode/models.json",
            ),
            moved("OPENCODE_CONFIG", "", ".config/opencode/opencode.json"),
        ],
    }),
    // Gated: `ask` rules for its tools in the launch config, its permission prompts answered
    // through its own server (`runtime::opencode`).
    gates_approvals: true,
    preference: Some(3),
    project_folder: Some(".opencode"),
    launch_env: Some(LaunchEnvExample {
        start_args: "#PEER_START_ARGS=--model standin/standin-model\n",
        own_keys: "",
        env: "#OPENCODE_CONFIG=/path/to/extra-opencode.json\n",
    }),
    // A new session's id is OpenCode's (`ses_…`); no flag chooses it.
    naming: ConversationNaming::Learned,
    ..NO_FACTS
};

/// The built-in stand-in agent (spec 04 §2 "echo", `iapeer echo-agent`).
pub const ECHO: RuntimeInfo<'static> = RuntimeInfo {
    name: "echo",
    class: Class::Agent,
    program: Program::OwnVerb("echo-agent"),
    prompt: PromptSwap::Flag("--system-prompt-file"),
    mcp: McpClient::Environment,
    shortcut: true,
    ..NO_FACTS
};

/// A person at a terminal with a durable inbox (`iapeer human-inbox`).
pub const HUMAN: RuntimeInfo<'static> = RuntimeInfo {
    name: "human",
    class: Class::Human,
    program: Program::OwnVerb("human-inbox"),
    ..NO_FACTS
};

/// The built-in scheduler and watcher (spec 09, `iapeer notifier-run`); an installed package
/// of the same name takes precedence.
pub const NOTIFIER: RuntimeInfo<'static> = RuntimeInfo {
    name: "notifier",
    class: Class::Service,
    program: Program::OwnVerb("notifier-run"),
    ..NO_FACTS
};

/// The built-in runtimes.
pub const BUILT_IN: &[RuntimeInfo<'static>] =
    &[CLAUDE, CODEX, GEMINI, OPENCODE, ECHO, HUMAN, NOTIFIER];

/// Runtime packages that are channels to people (chat and mail): [`Class::Human`].
pub const HUMAN_CHANNEL_PACKAGES: &[&str] =
    &["telegram", "discord", "matrix", "email", "web", "voicetalk"];

/// Runtime packages whose peers are absent unless said otherwise (services).
pub const SERVICE_PACKAGES: &[&str] = &["webhook", "api", "cron"];

/// The built-in row of `name`.
pub fn get(name: &str) -> Option<&'static RuntimeInfo<'static>> {
    find(BUILT_IN, name)
}

/// The row of `name` among `rows` (the built-in rows with rows made at run time).
pub fn find<'r, 'a>(rows: &'r [RuntimeInfo<'a>], name: &str) -> Option<&'r RuntimeInfo<'a>> {
    rows.iter().find(|r| r.name == name)
}

/// How the conversations of `name` get their ids: its row's [`RuntimeInfo::naming`], one per
/// folder for a runtime without a row.
pub fn naming_of(name: &str) -> ConversationNaming {
    get(name).map_or(ConversationNaming::Folder, |r| r.naming)
}

/// The class of `name`: its row's, else [`Class::Human`] for a chat or mail package, else
/// [`Class::Router`] (an installed package).
pub fn class_of(name: &str) -> Class {
    match get(name) {
        Some(r) => r.class,
        None if HUMAN_CHANNEL_PACKAGES.contains(&name) => Class::Human,
        None => Class::Router,
    }
}

/// The rows whose program is looked for ([`Program::Located`]), in preference order.
pub fn located() -> impl Iterator<Item = &'static RuntimeInfo<'static>> {
    by_preference(BUILT_IN).filter(|r| matches!(r.program, Program::Located { .. }))
}

/// The rows of `rows` chosen by default for a new peer, in preference order.
pub fn by_preference<'r, 'a>(
    rows: &'r [RuntimeInfo<'a>],
) -> impl Iterator<Item = &'r RuntimeInfo<'a>> {
    let mut ranked: Vec<&RuntimeInfo> = rows.iter().filter(|r| r.preference.is_some()).collect();
    ranked.sort_by_key(|r| r.preference);
    ranked.into_iter()
}

impl<'a> RuntimeInfo<'a> {
    /// The verb of this very binary that is the runtime's program ([`Program::OwnVerb`]);
    /// empty for a program looked for.
    pub const fn own_verb(&self) -> &'a str {
        match self.program {
            Program::OwnVerb(verb) => verb,
            Program::Located { .. } => "",
        }
    }

    /// The file holding this runtime's native-memory lever for the peer folder `cwd`.
    pub fn lever_file(&self, cwd: &Path) -> Option<PathBuf> {
        Some(cwd.join(self.project_folder?).join(self.memory?.file))
    }

    /// The product to install, for advice: [`Program::Located`]'s, else `its program`.
    pub fn product(&self) -> &str {
        match self.program {
            Program::Located { product } => product,
            Program::OwnVerb(_) => "its program",
        }
    }
}

/// How many built-in rows are shortcut verbs.
const fn shortcut_count() -> usize {
    let (mut n, mut i) = (0, 0);
    while i < BUILT_IN.len() {
        if BUILT_IN[i].shortcut {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The runtimes that can be typed as a verb (`iapeer claude`), in table order.
pub const SHORTCUTS: [&str; shortcut_count()] = {
    let mut out = [""; shortcut_count()];
    let (mut n, mut i) = (0, 0);
    while i < BUILT_IN.len() {
        if BUILT_IN[i].shortcut {
            out[n] = BUILT_IN[i].name;
            n += 1;
        }
        i += 1;
    }
    out
};

/// The length of [`SHORTCUTS`] joined by `sep` between `open` and `close`.
const fn joined_len(open: &str, sep: &str, close: &str) -> usize {
    let (mut n, mut i) = (open.len() + close.len(), 0);
    while i < SHORTCUTS.len() {
        if i > 0 {
            n += sep.len();
        }
        n += SHORTCUTS[i].len();
        i += 1;
    }
    n
}

/// `s` copied into `out` at `at`; the offset after it.
const fn put<const N: usize>(out: &mut [u8; N], at: usize, s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        out[at + i] = b[i];
        i += 1;
    }
    at + b.len()
}

/// [`SHORTCUTS`] joined by `sep` between `open` and `close`, as bytes (`N`: [`joined_len`]).
const fn joined<const N: usize>(open: &str, sep: &str, close: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let (mut at, mut i) = (put(&mut out, 0, open), 0);
    while i < SHORTCUTS.len() {
        if i > 0 {
            at = put(&mut out, at, sep);
        }
        at = put(&mut out, at, SHORTCUTS[i]);
        i += 1;
    }
    put(&mut out, at, close);
    out
}

/// Bytes made of runtime names (ASCII) as text.
const fn text(bytes: &'static [u8]) -> &'static str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => panic!("runtime names are ASCII"),
    }
}

/// The bytes of [`SHORTCUT_NAMES`].
const SHORTCUT_NAMES_BYTES: [u8; joined_len("", "|", "")] = joined("", "|", "");

/// The bytes of [`SHORTCUT_CHOICE`].
const SHORTCUT_CHOICE_BYTES: [u8; joined_len("(", " | ", ")")] = joined("(", " | ", ")");

/// The shortcut verbs as one name for help (`claude|codex|echo`).
pub const SHORTCUT_NAMES: &str = text(&SHORTCUT_NAMES_BYTES);

/// The shortcut verbs as a choice in a usage line (`(claude | codex | echo)`).
pub const SHORTCUT_CHOICE: &str = text(&SHORTCUT_CHOICE_BYTES);

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts as they were spelled across the crate before the table (issue 27 item 1).
    #[test]
    fn the_table_says_what_the_modules_said() {
        assert_eq!(SHORTCUTS, ["claude", "codex", "echo"]);
        assert_eq!(SHORTCUT_NAMES, "claude|codex|echo");
        assert_eq!(SHORTCUT_CHOICE, "(claude | codex | echo)");
        let located: Vec<&str> = located().map(|r| r.name).collect();
        assert_eq!(located, ["claude", "codex", "gemini", "opencode"]);
        let agents: Vec<&str> = BUILT_IN
            .iter()
            .filter(|r| r.class == Class::Agent)
            .map(|r| r.name)
            .collect();
        assert_eq!(agents, ["claude", "codex", "gemini", "opencode", "echo"]);
        assert_eq!(class_of("telegram"), Class::Human);
        assert_eq!(class_of("human"), Class::Human);
        assert_eq!(class_of("notifier"), Class::Service);
        assert_eq!(class_of("mailbox"), Class::Router);
        let cwd = Path::new("/w/bob");
        assert_eq!(
            CLAUDE.lever_file(cwd),
            Some(cwd.join(".claude").join("settings.json"))
        );
        assert_eq!(
            CODEX.lever_file(cwd),
            Some(cwd.join(".codex").join("config.toml"))
        );
        assert_eq!(ECHO.lever_file(cwd), None);
        let names: Vec<&str> = BUILT_IN.iter().map(|r| r.name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a name on two rows: {names:?}");
    }

    /// A row made at run time is looked up like a built-in one.
    #[test]
    fn rows_made_at_run_time_are_found() {
        let name = String::from("mytui");
        let mut rows = BUILT_IN.to_vec();
        rows.push(RuntimeInfo {
            name: &name,
            class: Class::Agent,
            preference: Some(9),
            ..NO_FACTS
        });
        assert_eq!(find(&rows, "mytui").map(|r| r.class), Some(Class::Agent));
        let order: Vec<&str> = by_preference(&rows).map(|r| r.name).collect();
        assert_eq!(order, ["claude", "codex", "gemini", "opencode", "mytui"]);
    }
}

//! The verb and flag table (spec 07): every verb and flag of `iapeer` is defined once, here,
//! as data. The parser (`parse`), the help text (`help`), the man page (`man`) and the shell
//! completions (`completions`) are all generated from it, so they cannot drift.
//!
//! Adding a verb is one entry in [`VERBS`]; a flag used by several verbs with the same meaning
//! is one `const` shared by their entries.

mod examples;
mod verbs;

pub use examples::examples_of;
pub use verbs::{args, flags, RUNTIME_SHORTCUT, VERBS};

/// What the shell completions offer for a flag's value or a positional (ripgrep's
/// `CompletionType`): data in the table, read by `completions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Complete {
    /// Nothing to complete: a boolean flag takes no value.
    Nothing,
    /// Free text (a message, a topic, a new name): nothing is offered.
    Text,
    /// A file or folder name: the shell's file completion.
    Path,
    /// The name of a registered peer: the bash script asks `iapeer --generate peer-names`
    /// for the registry's names at each tab (zsh and fish do not offer them yet).
    Peer,
    /// A runtime name: the bash script asks `iapeer --generate runtimes` (built-in and
    /// installed runtimes) at each tab.
    Runtime,
    /// A sending identity, `<runtime>-<name>`: the bash script asks `iapeer --generate
    /// identities` (the registry's) at each tab.
    Identity,
    /// A peer's nature (artificial, natural, absent). Not offered yet.
    Intelligence,
    /// A verb of this table (`help <verb>`). Not offered yet.
    Verb,
}

impl Complete {
    /// True when the shell should offer file names.
    pub fn offers_files(self) -> bool {
        self == Complete::Path
    }
}

/// One flag of a verb, e.g. `--message <text>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlagSpec {
    /// The long name without dashes, e.g. `message-file`.
    pub long: &'static str,
    /// An optional one-letter form, e.g. `h` for `-h`.
    pub short: Option<char>,
    /// The value's name as shown, brackets included (`<text>`); `None` for a boolean flag,
    /// which never takes a value.
    pub value: Option<&'static str>,
    /// What completions offer for the value ([`Complete::Nothing`] for a boolean flag).
    pub complete: Complete,
    /// True when every occurrence is kept (`--attachment`); otherwise the last one wins.
    pub repeatable: bool,
    /// One line of help, lower case, no final period.
    pub help: &'static str,
}

/// One positional argument of a verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PosSpec {
    /// The name shown in signatures, `<name>` when required and `[name]` when optional.
    pub name: &'static str,
    /// True when the argument must be given (unless a [`Rule::ReplacesPositionals`] flag is).
    pub required: bool,
    /// True when the argument takes every remaining word (last positional only).
    pub repeat: bool,
    /// What completions offer for it.
    pub complete: Complete,
}

/// A constraint across a verb's arguments, checked by the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Exactly one of these flags must be given.
    ExactlyOne(&'static [FlagSpec]),
    /// This boolean flag stands instead of the positionals: with it, no positional may be
    /// given; without it, the required positionals are required.
    ReplacesPositionals(FlagSpec),
}

/// Where a verb is listed in help and the man page (in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// help, version.
    General,
    /// send.
    Messaging,
    /// create, init, list, verify, remove, live-runtime.
    Peers,
    /// stop, start, attach and the bare runtime form.
    Lifecycle,
    /// daemon, status.
    Host,
    /// demo and its stand-in agent.
    Demo,
}

impl Group {
    /// Every group in display order.
    pub const ALL: [Group; 6] = [
        Group::General,
        Group::Messaging,
        Group::Peers,
        Group::Lifecycle,
        Group::Host,
        Group::Demo,
    ];

    /// The heading shown in help and the man page.
    pub fn title(self) -> &'static str {
        match self {
            Group::General => "General",
            Group::Messaging => "Messaging",
            Group::Peers => "Peers",
            Group::Lifecycle => "Lifecycle",
            Group::Host => "Host",
            Group::Demo => "Demo",
        }
    }
}

/// What a table entry is, as a typed id: the parser turns `Help`, `Version` and
/// `RuntimeShortcut` into their own `Command`s, and every other entry
/// into a [`Verb`] that `cli::run` matches on exhaustively.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VerbId {
    /// `help [verb]`.
    Help,
    /// `version`.
    Version,
    /// The bare form `iapeer <runtime>` ([`RUNTIME_SHORTCUT`]).
    RuntimeShortcut,
    /// A verb that runs an operation.
    Run(Verb),
}

/// A verb that runs an operation. Adding one means a row in [`VERBS`] (the table test checks
/// that every variant has exactly one) and an arm in `cli::run` (the compiler checks that).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `send`.
    Send,
    /// `create`.
    Create,
    /// `init`.
    Init,
    /// `list`.
    List,
    /// `verify`.
    Verify,
    /// `remove`.
    Remove,
    /// `rename`.
    Rename,
    /// `live-runtime`.
    LiveRuntime,
    /// `prompt`.
    Prompt,
    /// `stop`.
    Stop,
    /// `start`.
    Start,
    /// `wake`.
    Wake,
    /// `restart`.
    Restart,
    /// `attach`.
    Attach,
    /// `new`.
    New,
    /// `refresh`.
    Refresh,
    /// `interrupt`.
    Interrupt,
    /// `compact`.
    Compact,
    /// `self-fresh`.
    SelfFresh,
    /// `self-done`.
    SelfDone,
    /// `add-runtime`.
    AddRuntime,
    /// `default-runtime`.
    DefaultRuntime,
    /// `approval-mode`.
    ApprovalMode,
    /// `doctor`.
    Doctor,
    /// `daemon`.
    Daemon,
    /// `shutdown`.
    Shutdown,
    /// `status`.
    Status,
    /// `install`.
    Install,
    /// `onboard`.
    Onboard,
    /// `update`.
    Update,
    /// `rollback`.
    Rollback,
    /// `uninstall`.
    Uninstall,
    /// `demo`.
    Demo,
    /// `echo-agent`.
    EchoAgent,
    /// `inbox`.
    Inbox,
    /// `logs`.
    Logs,
    /// `human-inbox`.
    HumanInbox,
    /// `run-infra`: the original tool's service entry, answered with a migration line.
    RunInfra,
    /// `notifier-run`.
    NotifierRun,
    /// `install-runtime`.
    InstallRuntime,
    /// `update-runtime`.
    UpdateRuntime,
    /// `native-memory`.
    NativeMemory,
    /// `trust-hooks`.
    TrustHooks,
    /// `enable`.
    Enable,
    /// `connect`.
    Connect,
    /// `federation`.
    Federation,
    /// `confirm-send`.
    ConfirmSend,
    /// `ui`.
    Ui,
    /// `approvals`.
    Approvals,
    /// `approve`.
    Approve,
    /// `deny`.
    Deny,
    /// `approval-request` (hidden: a gated Claude Code or Codex session's permission hook).
    ApprovalRequest,
}

impl Verb {
    /// Every variant (the table test checks that each has exactly one row in [`VERBS`]).
    #[cfg(test)]
    pub const ALL: [Verb; 52] = [
        Verb::Send,
        Verb::Create,
        Verb::Init,
        Verb::List,
        Verb::Verify,
        Verb::Remove,
        Verb::Rename,
        Verb::LiveRuntime,
        Verb::Prompt,
        Verb::Stop,
        Verb::Start,
        Verb::Wake,
        Verb::Restart,
        Verb::Attach,
        Verb::New,
        Verb::Refresh,
        Verb::Interrupt,
        Verb::Compact,
        Verb::SelfFresh,
        Verb::SelfDone,
        Verb::AddRuntime,
        Verb::DefaultRuntime,
        Verb::ApprovalMode,
        Verb::Doctor,
        Verb::Daemon,
        Verb::Shutdown,
        Verb::Status,
        Verb::Install,
        Verb::Onboard,
        Verb::Update,
        Verb::Rollback,
        Verb::Uninstall,
        Verb::Demo,
        Verb::EchoAgent,
        Verb::Inbox,
        Verb::Logs,
        Verb::HumanInbox,
        Verb::RunInfra,
        Verb::NotifierRun,
        Verb::InstallRuntime,
        Verb::UpdateRuntime,
        Verb::NativeMemory,
        Verb::TrustHooks,
        Verb::Enable,
        Verb::Connect,
        Verb::Federation,
        Verb::ConfirmSend,
        Verb::Ui,
        Verb::Approvals,
        Verb::Approve,
        Verb::Deny,
        Verb::ApprovalRequest,
    ];
}

/// One verb: everything the parser, help, man page and completions need to know about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerbSpec {
    /// The entry's typed id.
    pub id: VerbId,
    /// The word typed after `iapeer`.
    pub name: &'static str,
    /// The usage line after `iapeer `, e.g. `remove <peer> [--force]`.
    pub signature: &'static str,
    /// One line for the verb list, lower case, no final period.
    pub summary: &'static str,
    /// A paragraph for the man page and the verb's help.
    pub description: &'static str,
    /// Positional arguments in order.
    pub positionals: &'static [PosSpec],
    /// The verb's flags (`--help`/`-h` is global and not listed here).
    pub flags: &'static [FlagSpec],
    /// Constraints the parser checks.
    pub rules: &'static [Rule],
    /// Hidden from help and completions (still in the man page).
    pub hidden: bool,
    /// Where it is listed.
    pub group: Group,
    /// Every word after the verb is passed through untouched, flags included.
    pub passthrough: bool,
}

impl VerbSpec {
    /// The flag with this long name, if the verb has it.
    pub fn flag(&self, long: &str) -> Option<&'static FlagSpec> {
        self.flags.iter().find(|f| f.long == long)
    }

    /// The flag with this one-letter form, if the verb has it.
    pub fn flag_by_short(&self, short: char) -> Option<&'static FlagSpec> {
        self.flags.iter().find(|f| f.short == Some(short))
    }
}

/// The signature of iapeer as a whole, used by usage errors before a verb is known.
pub const GENERAL_SIGNATURE: &str = "<verb> [args] [flags]";

/// One sentence saying what iapeer is (help, man page NAME).
pub const ABOUT: &str =
    "keep a team of AI agents, humans and services on this host reachable by message";

/// Agent runtimes that can be typed as a verb (`claude`, `codex`, `echo`: the rows of the
/// table of runtimes marked `shortcut`): `iapeer claude` starts a fresh session of the current
/// folder's peer on that runtime, then attaches.
pub const SHORTCUT_RUNTIMES: &[&str] = &crate::runtime_table::SHORTCUTS;

/// `--help`/`-h`: accepted anywhere; prints help instead of running anything.
pub const HELP_FLAG: FlagSpec = FlagSpec {
    long: "help",
    short: Some('h'),
    value: None,
    complete: Complete::Nothing,
    repeatable: false,
    help: "print help (for the verb, when one is given) and run nothing",
};

/// `--version`/`-v`: only in place of a verb.
pub const VERSION_FLAG: FlagSpec = FlagSpec {
    long: "version",
    short: Some('v'),
    value: None,
    complete: Complete::Nothing,
    repeatable: false,
    help: "print the version",
};

/// The hidden `--generate <what>` flag (in place of a verb): prints the man page or a
/// completion script built from this table.
pub const GENERATE_FLAG: FlagSpec = FlagSpec {
    long: "generate",
    short: None,
    value: Some("<what>"),
    complete: Complete::Text,
    repeatable: false,
    help: "print the man page, a completion script or the words completions offer (man, completions-bash, completions-zsh, completions-fish, peer-names, runtimes, identities)",
};

/// Flags accepted before any verb and shown in the general help.
pub const GLOBAL_FLAGS: &[FlagSpec] = &[HELP_FLAG, VERSION_FLAG];

/// The verb called `name`, or `None`.
pub fn find_verb(name: &str) -> Option<&'static VerbSpec> {
    VERBS.iter().find(|v| v.name == name)
}

/// The visible verbs of `group`, in table order, followed by the runtime shortcut in its group.
pub fn visible_in(group: Group) -> impl Iterator<Item = &'static VerbSpec> {
    VERBS
        .iter()
        .chain(std::iter::once(&RUNTIME_SHORTCUT))
        .filter(move |v| v.group == group && !v.hidden)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn all_specs() -> impl Iterator<Item = &'static VerbSpec> {
        VERBS.iter().chain(std::iter::once(&RUNTIME_SHORTCUT))
    }

    #[test]
    fn verb_names_are_unique_and_do_not_shadow_runtimes() {
        let mut seen = HashSet::new();
        for v in VERBS {
            assert!(seen.insert(v.name), "duplicate verb {}", v.name);
            assert!(
                !SHORTCUT_RUNTIMES.contains(&v.name),
                "{} is a runtime",
                v.name
            );
            assert!(!v.name.starts_with('-'));
        }
    }

    #[test]
    fn signatures_show_every_argument_and_flag() {
        for v in VERBS {
            assert!(v.signature.starts_with(v.name), "{}", v.signature);
        }
        for v in all_specs() {
            for p in v.positionals {
                let shown = if p.required {
                    format!("<{}>", p.name)
                } else {
                    format!("[{}]", p.name)
                };
                assert!(v.signature.contains(&shown), "{}: {shown}", v.name);
            }
            for f in v.flags {
                let shown = match f.value {
                    Some(value) => format!("--{} {value}", f.long),
                    None => format!("--{}", f.long),
                };
                assert!(v.signature.contains(&shown), "{}: {shown}", v.name);
            }
        }
    }

    #[test]
    fn flags_are_well_formed() {
        for v in all_specs() {
            let mut longs = HashSet::new();
            for f in v.flags {
                assert!(longs.insert(f.long), "{}: duplicate --{}", v.name, f.long);
                assert!(f.long != "help" && f.short != Some('h'), "{}", v.name);
                assert!(!f.long.starts_with('-') && !f.help.is_empty());
                if let Some(value) = f.value {
                    assert!(value.starts_with('<') && value.ends_with('>'), "{value}");
                }
                assert!(!(f.repeatable && f.value.is_none()), "--{}", f.long);
                assert_eq!(
                    f.value.is_none(),
                    f.complete == Complete::Nothing,
                    "{}: --{} completes {:?}",
                    v.name,
                    f.long,
                    f.complete
                );
            }
            for (i, p) in v.positionals.iter().enumerate() {
                assert!(!p.repeat || i + 1 == v.positionals.len(), "{}", v.name);
                assert!(p.complete != Complete::Nothing, "{}: <{}>", v.name, p.name);
            }
            let mut optional_seen = false;
            for p in v.positionals {
                assert!(
                    !(p.required && optional_seen),
                    "{}: required after optional",
                    v.name
                );
                optional_seen |= !p.required;
            }
            for rule in v.rules {
                match rule {
                    Rule::ExactlyOne(set) => {
                        assert!(set.len() >= 2);
                        assert!(set.iter().all(|f| v.flags.contains(f)), "{}", v.name);
                    }
                    Rule::ReplacesPositionals(f) => {
                        assert!(v.flags.contains(f) && f.value.is_none(), "{}", v.name);
                    }
                }
            }
            assert!(!v.passthrough || v.positionals.iter().any(|p| p.repeat));
        }
    }

    #[test]
    fn every_verb_has_exactly_one_row() {
        let mut ids = HashSet::new();
        for v in all_specs() {
            assert!(ids.insert(v.id), "{}: duplicate id {:?}", v.name, v.id);
        }
        for verb in Verb::ALL {
            assert!(ids.contains(&VerbId::Run(verb)), "{verb:?} has no row");
        }
        assert_eq!(ids.len(), Verb::ALL.len() + 3);
        assert_eq!(RUNTIME_SHORTCUT.id, VerbId::RuntimeShortcut);
    }

    #[test]
    fn lookups() {
        assert_eq!(find_verb("send").map(|v| v.name), Some("send"));
        assert!(find_verb("claude").is_none());
        assert!(find_verb("nope").is_none());
        let send = find_verb("send").unwrap();
        assert!(send.flag("attachment").is_some_and(|f| f.repeatable));
        assert!(send.flag("nope").is_none());
        let lifecycle: Vec<_> = visible_in(Group::Lifecycle).map(|v| v.name).collect();
        assert!(lifecycle.contains(&"stop") && lifecycle.contains(&RUNTIME_SHORTCUT.name));
        assert!(visible_in(Group::Demo).all(|v| v.name != "echo-agent"));
    }
}

//! Command-line parsing from the table (spec 07 "General rules"), with `lexopt`.
//!
//! `iapeer [--help|-h] [--version|-v|--generate <what>] <verb> [positionals] [flags]`:
//! `--help`/`-h` anywhere (before `--`) turns the command into help for the verb; flags take
//! `--key value` or `--key=value` (the `=` form keeps the value verbatim, even `--literal`);
//! booleans never consume the next token; `--` ends flags. Every mistake is one
//! [`UsageError`] line naming the verb's signature.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;

use lexopt::Arg;

use super::completions::Shell;
use super::spec::{
    find_verb, FlagSpec, PosSpec, Rule, Verb, VerbId, VerbSpec, GENERAL_SIGNATURE,
    RUNTIME_SHORTCUT, SHORTCUT_RUNTIMES, VERBS,
};
use super::suggest;

/// The exit status of a usage error (spec 07).
pub const EXIT_USAGE: i32 = 2;

/// A command line iapeer cannot run. `Display` is the single line printed to stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageError {
    /// `iapeer: <what> — usage: iapeer <signature>`.
    Bad {
        /// What is wrong, e.g. `missing <target>` or `unknown flag --frob`.
        what: String,
        /// The signature of the verb (or [`GENERAL_SIGNATURE`] before a verb).
        signature: &'static str,
    },
    /// `iapeer: unknown verb "<verb>" — run iapeer help for the list of verbs`.
    UnknownVerb(String),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::Bad { what, signature } => {
                write!(f, "iapeer: {what} — usage: iapeer {signature}")
            }
            UsageError::UnknownVerb(verb) => {
                let known = VERBS
                    .iter()
                    .filter(|v| !v.hidden)
                    .map(|v| v.name)
                    .chain(SHORTCUT_RUNTIMES.iter().copied());
                match suggest::closest(verb, known) {
                    Some(meant) => write!(
                        f,
                        "iapeer: unknown verb \"{verb}\" — did you mean \"{meant}\"? (iapeer help lists the verbs)"
                    ),
                    None => write!(
                        f,
                        "iapeer: unknown verb \"{verb}\" — run iapeer help for the list of verbs"
                    ),
                }
            }
        }
    }
}

impl std::error::Error for UsageError {}

/// What the hidden `--generate <what>` flag prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generate {
    /// `man`: the roff man page (`man/iapeer.1`).
    Man,
    /// `completions-bash|zsh|fish`: a completion script.
    Completions(Shell),
    /// `peer-names`: the registered peers' names, one a line (what the completion scripts
    /// offer for a peer; nothing when the registry cannot be read).
    PeerNames,
    /// `runtimes`: the runtimes a peer may use here, one a line: the built-in ones, the
    /// installed packages' (`<root>/runtimes/<rt>/runtime.json`) and any a peer declares.
    Runtimes,
    /// `identities`: every `<runtime>-<peer>` the registry declares, one a line.
    Identities,
}

impl Generate {
    /// Every accepted value of `--generate`, with its meaning.
    pub const ALL: [(&'static str, Generate); 7] = [
        ("man", Generate::Man),
        ("completions-bash", Generate::Completions(Shell::Bash)),
        ("completions-zsh", Generate::Completions(Shell::Zsh)),
        ("completions-fish", Generate::Completions(Shell::Fish)),
        ("peer-names", Generate::PeerNames),
        ("runtimes", Generate::Runtimes),
        ("identities", Generate::Identities),
    ];

    /// The value named `s`, or `None`.
    pub fn parse(s: &str) -> Option<Generate> {
        Generate::ALL.iter().find(|(n, _)| *n == s).map(|(_, g)| *g)
    }
}

/// What a command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Print help: general (`None`) or for the named verb (which may turn out unknown).
    Help(Option<String>),
    /// Print `iapeer <version>`.
    Version,
    /// Print a generated artifact (`--generate`).
    Generate(Generate),
    /// Run a verb of the table: its typed id and its parsed arguments.
    Run(Verb, Invocation),
    /// The bare form `iapeer <runtime>`; `inv.verb` is [`RUNTIME_SHORTCUT`].
    RuntimeShortcut {
        /// One of [`SHORTCUT_RUNTIMES`].
        runtime: String,
        /// The parsed rest of the line.
        inv: Invocation,
    },
}

/// A parsed verb with its positionals and flags, already checked against the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The verb's table entry.
    pub verb: &'static VerbSpec,
    /// Positional words in order (for a passthrough verb: every word after it).
    pub positionals: Vec<String>,
    /// Given flags by long name: every value in order (empty for booleans).
    given: BTreeMap<&'static str, Vec<String>>,
}

impl Invocation {
    fn new(verb: &'static VerbSpec) -> Invocation {
        Invocation {
            verb,
            positionals: Vec::new(),
            given: BTreeMap::new(),
        }
    }

    /// The value of `flag` (the last one when given several times), if given.
    ///
    /// `flag` is a row of [`flags`](super::spec::flags), so a flag that does not exist does
    /// not compile; asking for a flag the verb does not have is a bug, caught by a
    /// `debug_assert!` in tests.
    pub fn value(&self, flag: FlagSpec) -> Option<&str> {
        self.values(flag).last().map(String::as_str)
    }

    /// Every value of `flag` in order (empty when not given, or for a boolean).
    pub fn values(&self, flag: FlagSpec) -> &[String] {
        self.check_flag(&flag);
        self.given.get(flag.long).map(Vec::as_slice).unwrap_or(&[])
    }

    /// True when `flag` was given (booleans and valued flags alike).
    ///
    /// `flag` is a row of the table, e.g. `inv.flag(flags::FIX)`; a flag named by a string
    /// (`inv.flag("fix")`) or one the table does not have (`flags::FIXX`) does not compile,
    /// since only [`flags`](super::spec::flags) makes a [`FlagSpec`]. (No doc test shows it:
    /// `cli` is crate-private, so a doc test could not name it and would fail for that reason.)
    pub fn flag(&self, flag: FlagSpec) -> bool {
        self.check_flag(&flag);
        self.given_long(flag.long)
    }

    /// The positional `arg` (a row of [`args`](super::spec::args)), if given (the first word
    /// of a repeated one).
    pub fn positional(&self, arg: PosSpec) -> Option<&str> {
        let i = self.verb.positionals.iter().position(|p| *p == arg);
        debug_assert!(
            i.is_some(),
            "{} has no positional <{}>",
            self.verb.name,
            arg.name
        );
        self.positionals.get(i?).map(String::as_str)
    }

    /// True when the flag with this long name was given (the table's rules name flags so).
    fn given_long(&self, long: &str) -> bool {
        self.given.contains_key(long)
    }

    fn check_flag(&self, flag: &FlagSpec) {
        debug_assert!(
            self.verb.flags.contains(flag),
            "{} has no flag --{}",
            self.verb.name,
            flag.long
        );
    }
}

/// Parse the command line **without** the program name (`std::env::args_os().skip(1)`).
///
/// Errors: [`UsageError`] for an unknown verb or flag, a missing or extra argument, a missing
/// value, a value given to a boolean, a broken rule of the table, or a word that is not UTF-8.
/// No verb at all is `Help(None)`; `--help` anywhere wins over every other mistake.
pub fn parse(args: Vec<OsString>) -> Result<Command, UsageError> {
    let mut p = lexopt::Parser::from_args(args);
    let mut st = Status::default();
    let mut global: Option<Command> = None;
    let word = loop {
        let arg = match p.next() {
            Ok(Some(arg)) => arg,
            Ok(None) => break None,
            Err(e) => {
                st.fail(GENERAL_SIGNATURE, e.to_string());
                continue;
            }
        };
        match arg {
            Arg::Long("help") | Arg::Short('h') => st.help = true,
            Arg::Long("version") | Arg::Short('v') => global = Some(Command::Version),
            Arg::Long("generate") => match take_value(&mut p) {
                Ok(v) => match Generate::parse(&v) {
                    Some(g) => global = Some(Command::Generate(g)),
                    None => st.fail(GENERAL_SIGNATURE, format!("cannot generate \"{v}\"")),
                },
                Err(what) => st.fail(GENERAL_SIGNATURE, format!("--generate {what}")),
            },
            Arg::Value(v) => break Some(v),
            other => {
                let what = format!("unknown flag {}", show(&other));
                let _ = p.optional_value();
                st.fail(GENERAL_SIGNATURE, what);
            }
        }
    };
    let Some(word) = word else {
        return st.finish(|| global.unwrap_or(Command::Help(None)), None);
    };
    let word = match utf8(word) {
        Ok(w) => w,
        Err(what) => {
            st.fail(GENERAL_SIGNATURE, what);
            return st.finish(|| Command::Help(None), None);
        }
    };
    if global.is_some() && !st.help {
        st.fail(GENERAL_SIGNATURE, format!("unexpected argument \"{word}\""));
        return st.finish(|| Command::Help(None), None);
    }
    let spec = if SHORTCUT_RUNTIMES.contains(&word.as_str()) {
        &RUNTIME_SHORTCUT
    } else if let Some(spec) = find_verb(&word) {
        spec
    } else if st.help {
        return Ok(Command::Help(Some(word)));
    } else {
        return Err(UsageError::UnknownVerb(word));
    };
    let inv = parse_verb(&mut p, spec, &mut st);
    let help_word = word.clone();
    st.finish(
        move || match spec.id {
            VerbId::Help => Command::Help(inv.positionals.first().cloned()),
            VerbId::Version => Command::Version,
            VerbId::RuntimeShortcut => Command::RuntimeShortcut { runtime: word, inv },
            VerbId::Run(verb) => Command::Run(verb, inv),
        },
        Some(help_word),
    )
}

/// Help seen and the first mistake, while parsing.
#[derive(Default)]
struct Status {
    help: bool,
    error: Option<UsageError>,
}

impl Status {
    /// Keep the first mistake only.
    fn fail(&mut self, signature: &'static str, what: String) {
        self.error
            .get_or_insert(UsageError::Bad { what, signature });
    }

    /// Help wins, then the first mistake, then the command.
    fn finish(
        self,
        command: impl FnOnce() -> Command,
        verb: Option<String>,
    ) -> Result<Command, UsageError> {
        if self.help {
            Ok(Command::Help(verb))
        } else if let Some(e) = self.error {
            Err(e)
        } else {
            Ok(command())
        }
    }
}

/// Parse everything after the verb word against `spec`.
fn parse_verb(p: &mut lexopt::Parser, spec: &'static VerbSpec, st: &mut Status) -> Invocation {
    let sig = spec.signature;
    let mut inv = Invocation::new(spec);
    if spec.passthrough {
        if st.help {
            return inv;
        }
        match p.raw_args() {
            Ok(raw) => {
                for word in raw {
                    match utf8(word) {
                        Ok(w) => inv.positionals.push(w),
                        Err(what) => st.fail(sig, what),
                    }
                }
            }
            Err(e) => st.fail(sig, e.to_string()),
        }
        return inv;
    }
    loop {
        let arg = match p.next() {
            Ok(Some(arg)) => arg,
            Ok(None) => break,
            Err(e) => {
                st.fail(sig, e.to_string());
                continue;
            }
        };
        let flag: Option<&'static FlagSpec> = match arg {
            Arg::Long("help") | Arg::Short('h') => {
                st.help = true;
                continue;
            }
            Arg::Value(v) => {
                match utf8(v) {
                    Ok(w) => inv.positionals.push(w),
                    Err(what) => st.fail(sig, what),
                }
                continue;
            }
            Arg::Long(long) => spec.flag(long),
            Arg::Short(c) => spec.flag_by_short(c),
        };
        let Some(flag) = flag else {
            let meant = match arg {
                Arg::Long(long) => {
                    suggest::closest(long, spec.flags.iter().map(|f| f.long).chain(["help"]))
                }
                _ => None,
            };
            let what = match meant {
                Some(m) => format!("unknown flag {} (did you mean --{m}?)", show(&arg)),
                None => format!("unknown flag {}", show(&arg)),
            };
            let _ = p.optional_value();
            st.fail(sig, what);
            continue;
        };
        let entry = inv.given.entry(flag.long).or_default();
        if flag.value.is_none() {
            if p.optional_value().is_some() {
                st.fail(sig, format!("--{} takes no value", flag.long));
            }
        } else {
            match take_value(p) {
                Ok(v) => entry.push(v),
                Err(what) => st.fail(sig, format!("--{} {what}", flag.long)),
            }
        }
    }
    if st.error.is_none() {
        if let Err(what) = check_rules(&inv) {
            st.fail(sig, what);
        }
    }
    inv
}

/// The value of the flag just read: attached (`--key=value`, verbatim) or the next word,
/// unless that word looks like a flag. `Err` holds what is wrong, after the flag's name.
fn take_value(p: &mut lexopt::Parser) -> Result<String, String> {
    let mut dashed = None;
    let value = match p.optional_value() {
        Some(v) => Some(v),
        None => p.raw_args().ok().and_then(|mut raw| {
            // A word that starts with a dash but is no flag of ours (`-5m`, `-hi there`,
            // `-- x`): refused with a hint, and taken, so its letters are not read as flags
            // (`-hi` would otherwise print the help and exit 0 with nothing sent).
            dashed = raw
                .peek()
                .and_then(|w| w.to_str())
                .filter(|w| {
                    w.len() > 1
                        && w.starts_with('-')
                        && (!w.starts_with("--") || w.contains(char::is_whitespace))
                })
                .map(str::to_string);
            if dashed.is_some() {
                raw.next();
                return None;
            }
            raw.next_if(|w| !looks_like_flag(w))
        }),
    };
    match (value, dashed) {
        (Some(v), _) => utf8(v).map_err(|what| format!("value: {what}")),
        // `--since -5m`: a value that starts with a dash reads as a flag.
        (None, Some(w)) => Err(format!(
            "needs a value (\"{w}\" starts with a dash, so it reads as a flag; to give it \
             as the value, join them with =)"
        )),
        (None, None) => Err("needs a value".to_string()),
    }
}

/// True for `-x`, `--x` and `--`; a lone `-` (stdin) is a value.
fn looks_like_flag(w: &OsStr) -> bool {
    let b = w.as_encoded_bytes();
    b.len() > 1 && b[0] == b'-'
}

/// Check positional counts and the verb's rules. `Err` holds what is wrong.
fn check_rules(inv: &Invocation) -> Result<(), String> {
    let spec = inv.verb;
    let replacing = spec.rules.iter().find_map(|r| match r {
        Rule::ReplacesPositionals(f) => Some(f.long),
        Rule::ExactlyOne(_) => None,
    });
    match replacing {
        Some(l) if inv.given_long(l) => {
            if let Some(extra) = inv.positionals.first() {
                return Err(format!("unexpected argument \"{extra}\" with --{l}"));
            }
        }
        _ => {
            if let Some(missing) = spec
                .positionals
                .iter()
                .skip(inv.positionals.len())
                .find(|p| p.required)
            {
                let alt = replacing
                    .map(|l| format!(" (or --{l})"))
                    .unwrap_or_default();
                return Err(format!("missing <{}>{alt}", missing.name));
            }
            let repeats = spec.positionals.last().is_some_and(|p| p.repeat);
            if !repeats {
                if let Some(extra) = inv.positionals.get(spec.positionals.len()) {
                    // `iapeer send bob "hi"`: the text goes in --message.
                    if spec.flag("message").is_some() && !inv.given_long("message") {
                        return Err(format!(
                            "unexpected argument \"{extra}\" — the text of a message goes in --message: --message \"{extra}\""
                        ));
                    }
                    return Err(format!("unexpected argument \"{extra}\""));
                }
            }
        }
    }
    for rule in spec.rules {
        if let Rule::ExactlyOne(set) = rule {
            let given: Vec<String> = set
                .iter()
                .filter(|f| inv.given_long(f.long))
                .map(|f| format!("--{}", f.long))
                .collect();
            let all: Vec<String> = set.iter().map(|f| format!("--{}", f.long)).collect();
            match given.len() {
                1 => {}
                0 => return Err(format!("missing {}", all.join(" or "))),
                _ => return Err(format!("{} cannot be used together", given.join(" and "))),
            }
        }
    }
    Ok(())
}

/// A word as UTF-8, or what is wrong with it.
fn utf8(w: OsString) -> Result<String, String> {
    w.into_string()
        .map_err(|w| format!("argument is not valid UTF-8: {:?}", w.to_string_lossy()))
}

/// A flag as typed: `--long` or `-s`.
fn show(arg: &Arg<'_>) -> String {
    match arg {
        Arg::Long(l) => format!("--{l}"),
        Arg::Short(c) => format!("-{c}"),
        Arg::Value(v) => v.to_string_lossy().into_owned(),
    }
}

#[cfg(test)]
mod tests;

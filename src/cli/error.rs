//! A verb's failure as the user sees it (spec 07 "General rules", issue 29 item 6): one
//! message, the causes behind it, then what to do as `hint:` lines; an exit code by kind.
//!
//! One [`LibraryError`] impl per library error picks the hint and the `--json` code, and one
//! `From` turns any of them into a [`CliError`], so a verb writes `?` and the wording lives
//! here. A library error's `Display` is a whole sentence (the daemon sends the same text to
//! its clients), often `<what happened> — <what to do>`: the impl names the "what to do"
//! part, which becomes a hint line when the sentence ends with it ([`Failed::hinted`]). The `--json` failure keeps the whole sentence
//! in `error`, so its text is the one the wire carries.
//!
//! Printed by [`super::main`]:
//!
//! ```text
//! iapeer <verb>: <message>
//!   caused by: <a cause the message does not quote>
//!   hint: <what to do>
//! ```
//!
//! Exit codes: [`EXIT_FAILED`] (1) for a failure or refusal, [`EXIT_INTERNAL`] (255, as jj)
//! for an internal error (code `internal`: the daemon's, or a panic of the CLI), 2 for a usage
//! error ([`super::parse::EXIT_USAGE`]), 3 for a send whose state is unknown
//! ([`super::send::EXIT_STATE_UNKNOWN`]).

use std::error::Error;
use std::fmt;

use super::client::ClientError;
use super::parse::UsageError;
use crate::daemon::DaemonError;
use crate::host::HostError;
use crate::inbox::show::PickError;
use crate::markers::MarkerError;
use crate::names::IdentityError;
use crate::paths::PathsError;
use crate::peers::{PeerError, RefreshError};
use crate::profile::ProfileError;
use crate::protocol::{Code, Failure};
use crate::registry::RegistryError;
use crate::runtime::RuntimeError;

/// Exit code of a failed or refused operation.
pub const EXIT_FAILED: i32 = 1;

/// Exit code of an internal error (code `internal`): a defect, not something the user did;
/// 255 as jj, apart from the refusals (1), usage errors (2) and unknown send states (3).
pub const EXIT_INTERNAL: i32 = 255;

/// The hint under an internal error of the CLI itself (a panic).
pub const REPORT_A_DEFECT: &str =
    "this is a defect in iapeer: please report it with the lines above (RUST_BACKTRACE=1 shows where it happened)";

/// The typed error behind a message, kept for its cause chain.
pub type Source = Box<dyn Error + Send + Sync + 'static>;

/// A verb's failure, converted to text and an exit code at the edge.
#[derive(Debug)]
pub enum CliError {
    /// Exit 2 with the one-line usage message.
    Usage(UsageError),
    /// Exit 1 (255 for code `internal`) with `iapeer <verb>: <message>`, causes and hints;
    /// `iapeer: <message>` for code `offline` (nothing answers on the control socket).
    Failed(Failed),
    /// Exit 1 (255 for code `internal`) with `iapeer <verb>: <error>`; the daemon's failure
    /// (or one the CLI words with a protocol code), its code kept for `--json` output.
    Refused(Failure),
    /// Exit with this code; everything was printed already.
    Exit(i32),
}

/// A failure the CLI words: the message, the typed error behind it, what to do.
#[derive(Debug)]
pub struct Failed {
    /// The `--json` code: [`Code::Failed`] for the CLI's own refusals, [`Code::Offline`] when
    /// the daemon does not answer, [`Code::Internal`] for a defect.
    pub code: Code,
    /// What happened, one line (without the hints).
    pub message: String,
    /// The typed error the message words; its [`Error::source`] chain is printed as
    /// `caused by:` lines, except a cause whose text the message already quotes.
    pub source: Option<Source>,
    /// What to do, one `hint:` line each.
    pub hints: Vec<String>,
}

impl Failed {
    /// `message` with code `failed`, no cause and no hint.
    pub fn new(code: Code, message: impl Into<String>) -> Failed {
        Failed {
            code,
            message: message.into(),
            source: None,
            hints: Vec::new(),
        }
    }

    /// `error`'s sentence as the message, `error` as the source, and `hint` as a hint line
    /// when the sentence ends with ` — <hint>` (then cut from the message). A hint the
    /// sentence does not end with is left out: the sentence stays whole and nothing is said
    /// twice.
    pub fn hinted(
        code: Code,
        error: impl Error + Send + Sync + 'static,
        hint: Option<String>,
    ) -> Failed {
        let sentence = error.to_string();
        let mut failed = Failed::new(code, sentence);
        if let Some(h) = hint {
            if let Some(message) = failed.message.strip_suffix(&format!(" — {h}")) {
                failed.message = message.to_string();
                failed.hints.push(h);
            }
        }
        failed.source = Some(Box::new(error));
        failed
    }

    /// The causes to print: the texts of the source's chain (the source itself is what the
    /// message words) that the whole sentence does not already contain.
    pub fn causes(&self) -> Vec<String> {
        let sentence = self.to_string();
        let mut out = Vec::new();
        let mut next = self.source.as_deref().and_then(|e| e.source());
        while let Some(e) = next {
            let text = e.to_string();
            if !text.is_empty() && !sentence.contains(&text) {
                out.push(text);
            }
            next = e.source();
        }
        out
    }

    /// The lines printed on stderr for `verb` (without their newlines), control characters
    /// made visible ([`crate::visible::text`]).
    pub fn lines(&self, verb: &str) -> Vec<String> {
        let visible = crate::visible::text;
        let head = if self.code == Code::Offline {
            // Spec 07: printed as `iapeer: the daemon is not running …`.
            format!("iapeer: {}", visible(&self.message))
        } else {
            format!("iapeer {verb}: {}", visible(&self.message))
        };
        std::iter::once(head)
            .chain(
                self.causes()
                    .iter()
                    .map(|c| format!("  caused by: {}", visible(c))),
            )
            .chain(self.hints.iter().map(|h| format!("  hint: {}", visible(h))))
            .collect()
    }
}

/// The whole sentence, `<message> — <hint> — …`: the `--json` failure's `error`, and the text a
/// caller quotes inside its own sentence.
impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        for h in &self.hints {
            write!(f, " — {h}")?;
        }
        Ok(())
    }
}

impl CliError {
    /// The CLI's own refusal (code `failed`) saying `message`.
    pub fn failed(message: impl Into<String>) -> CliError {
        CliError::Failed(Failed::new(Code::Failed, message))
    }

    /// The CLI's own refusal (code `failed`): `message`, then what to do as a hint line.
    pub fn hinted(message: impl Into<String>, hint: impl Into<String>) -> CliError {
        let mut f = Failed::new(Code::Failed, message);
        f.hints.push(hint.into());
        CliError::Failed(f)
    }

    /// The exit code: [`EXIT_INTERNAL`] for code `internal`, 2 for a usage error, 1 for
    /// any other failure, the given code for [`CliError::Exit`].
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => super::parse::EXIT_USAGE,
            CliError::Failed(Failed { code, .. }) | CliError::Refused(Failure { code, .. }) => {
                if *code == Code::Internal {
                    EXIT_INTERNAL
                } else {
                    EXIT_FAILED
                }
            }
            CliError::Exit(code) => *code,
        }
    }

    /// The lines printed on stderr for `verb`: nothing for [`CliError::Exit`].
    pub fn lines(&self, verb: &str) -> Vec<String> {
        match self {
            CliError::Usage(e) => vec![e.to_string()],
            CliError::Failed(f) => f.lines(verb),
            // A failure may quote what a peer or agent wrote (a topic, a file name, a
            // command): shown with its control characters visible.
            CliError::Refused(f) => {
                vec![format!("iapeer {verb}: {}", crate::visible::text(&f.error))]
            }
            CliError::Exit(_) => Vec::new(),
        }
    }

    /// The one `--json` shape of every verb's failure, the control protocol's
    /// `{"ok":false,"code":…,"error":…}` (docs/PROTOCOL.md): a usage error is
    /// `invalid-argument`, a daemon that does not answer `offline`, the CLI's own refusal
    /// `failed`, and the daemon's refusal keeps its code; `error` is the whole sentence, hints
    /// included. `None` for [`CliError::Exit`], whose verb printed its document.
    pub fn json_failure(&self) -> Option<Failure> {
        match self {
            CliError::Usage(u) => Some(Failure::new(Code::InvalidArgument, u.to_string())),
            CliError::Failed(f) => Some(Failure::new(f.code, f.to_string())),
            CliError::Refused(f) => Some(f.clone()),
            CliError::Exit(_) => None,
        }
    }
}

impl From<Failed> for CliError {
    fn from(f: Failed) -> Self {
        CliError::Failed(f)
    }
}

impl From<UsageError> for CliError {
    fn from(e: UsageError) -> Self {
        CliError::Usage(e)
    }
}

/// A library error as the CLI says it: its sentence (`Display`) is the message, and this
/// picks the hint the sentence ends with and the `--json` code. One impl per library error;
/// the one `From` below turns any of them into a [`CliError`], so a verb writes `?`.
pub trait LibraryError: Error + Send + Sync + Sized + 'static {
    /// The "what to do" part the sentence ends with (after ` — `), if any.
    fn hint(&self) -> Option<String> {
        None
    }

    /// The `--json` code: [`Code::Failed`] unless said otherwise.
    fn code(&self) -> Code {
        Code::Failed
    }
}

impl<E: LibraryError> From<E> for CliError {
    fn from(e: E) -> Self {
        let (code, hint) = (e.code(), e.hint());
        Failed::hinted(code, e, hint).into()
    }
}

/// What to do when nothing answers on the control socket.
pub const START_THE_DAEMON: &str =
    "start it with: iapeer daemon (foreground) or iapeer onboard (as a service)";

/// Spec 07: a daemon that does not answer is printed as `iapeer: the daemon is not running …`
/// (code `offline`).
impl LibraryError for ClientError {
    fn hint(&self) -> Option<String> {
        matches!(self, ClientError::NotRunning(_)).then(|| START_THE_DAEMON.into())
    }

    fn code(&self) -> Code {
        match self {
            ClientError::NotRunning(_) => Code::Offline,
            _ => Code::Failed,
        }
    }
}

impl LibraryError for PathsError {}

impl LibraryError for IdentityError {}

impl LibraryError for MarkerError {}

impl LibraryError for HostError {}

impl LibraryError for PickError {}

impl LibraryError for RefreshError {}

impl LibraryError for RegistryError {
    fn hint(&self) -> Option<String> {
        match self {
            RegistryError::Corrupt { .. } => {
                Some("run `iapeer verify --fix` to rebuild it from the peer profiles".into())
            }
            _ => None,
        }
    }
}

impl LibraryError for ProfileError {
    fn hint(&self) -> Option<String> {
        match self {
            ProfileError::Corrupt { .. } => Some(
                "the file must be a valid JSON object; fix it by hand (run `iapeer verify` to \
                 check it)"
                    .into(),
            ),
            ProfileError::FolderName { .. } => Some("rename the folder".into()),
            ProfileError::NoRuntime { .. } => Some(
                "set \"default_runtime\" (e.g. \"claude\") in it, or run `iapeer init` in that \
                 folder"
                    .into(),
            ),
            _ => None,
        }
    }
}

impl LibraryError for RuntimeError {
    fn hint(&self) -> Option<String> {
        match self {
            RuntimeError::NotInstalled(rt) => Some(format!(
                "install its package with iapeer install-runtime {rt} [--package <npm package or \
                 tarball>] or choose another runtime"
            )),
            _ => None,
        }
    }
}

impl LibraryError for PeerError {
    fn hint(&self) -> Option<String> {
        match self {
            PeerError::NameNotReachable { canonical, .. } => Some(format!("choose {canonical}")),
            PeerError::FolderNameTaken { .. } => {
                Some("two peers can never share a name; rename this folder".into())
            }
            PeerError::HoldsOtherPeer { .. } => Some(
                "a peer is named after its folder; move that peer with iapeer rename, or init \
                 another folder"
                    .into(),
            ),
            PeerError::NotRegistered(_) => Some("see iapeer list for the peers there are".into()),
            PeerError::NoAgentRuntime => {
                Some("install one, or pass --runtime echo for the built-in demo stand-in".into())
            }
            PeerError::UnknownIntelligence(_) => Some("use artificial, natural or absent".into()),
            PeerError::Runtime(e) => e.hint(),
            PeerError::Profile(e) => e.hint(),
            PeerError::Registry(e) => e.hint(),
            _ => None,
        }
    }
}

/// `iapeer daemon`'s failure: a thread it cannot run without failed (code `internal`, exit
/// [`EXIT_INTERNAL`]), or it could not start (code `failed`).
impl LibraryError for DaemonError {
    fn hint(&self) -> Option<String> {
        matches!(self, DaemonError::Listen(..)).then(|| {
            "another program (or the daemon of another iapeer root) holds the port: set \
             IAPEER_PORT to a free port, or to 0 for any free one"
                .into()
        })
    }

    fn code(&self) -> Code {
        match self {
            DaemonError::Fatal(_) => Code::Internal,
            _ => Code::Failed,
        }
    }
}

/// The CLI's own refusal (code `failed`) whose message is `e`'s text, for an error without a
/// `From` impl here: a library function that still returns a `String`, or an
/// [`std::io::Error`] a caller does not word.
pub fn fail(e: impl fmt::Display) -> CliError {
    CliError::failed(e.to_string())
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use super::*;

    /// Each `From` impl's hint is the end of its error's sentence: cut into a hint line,
    /// and the `--json` error keeps the whole sentence.
    #[test]
    fn hints_are_cut_from_the_sentences_they_end() {
        let p = PathBuf::from("/r/peers-profiles.json");
        let cases: Vec<CliError> = vec![
            ClientError::NotRunning("/r/daemon.sock".into()).into(),
            RegistryError::Corrupt {
                path: p.clone(),
                reason: "not JSON".into(),
            }
            .into(),
            RuntimeError::NotInstalled("gemini".into()).into(),
            ProfileError::Corrupt {
                path: p.clone(),
                reason: "x".into(),
            }
            .into(),
            ProfileError::FolderName {
                cwd: p.clone(),
                normalized: "-".into(),
            }
            .into(),
            ProfileError::NoRuntime { path: p.clone() }.into(),
            PeerError::NameNotReachable {
                name: "a".into(),
                canonical: "b".into(),
            }
            .into(),
            PeerError::FolderNameTaken {
                name: "a".into(),
                at: p.clone(),
            }
            .into(),
            PeerError::HoldsOtherPeer {
                folder: p.clone(),
                written: "a".into(),
            }
            .into(),
            PeerError::NotRegistered("bob".into()).into(),
            PeerError::NoAgentRuntime.into(),
            PeerError::UnknownIntelligence("x".into()).into(),
            PeerError::Runtime(RuntimeError::NotInstalled("gemini".into())).into(),
        ];
        for e in cases {
            let CliError::Failed(f) = &e else {
                panic!("{e:?}")
            };
            assert_eq!(f.hints.len(), 1, "{f:?}");
            let source = f.source.as_ref().unwrap().to_string();
            assert_eq!(f.to_string(), source, "the sentence is whole again");
            assert_eq!(e.json_failure().unwrap().error, source);
            assert!(!f.message.ends_with(&f.hints[0]), "{f:?}");
        }
    }

    #[test]
    fn the_daemon_not_running_is_said_as_spec_07_words_it() {
        let e: CliError = ClientError::NotRunning("/r/daemon.sock".into()).into();
        assert_eq!(
            e.lines("stop"),
            [
                "iapeer: the daemon is not running (no answer on /r/daemon.sock)".to_string(),
                format!("  hint: {START_THE_DAEMON}"),
            ]
        );
        let f = e.json_failure().unwrap();
        assert_eq!(f.code, Code::Offline);
        assert_eq!(
            f.error,
            format!("the daemon is not running (no answer on /r/daemon.sock) — {START_THE_DAEMON}")
        );
        assert_eq!(e.exit_code(), EXIT_FAILED);
    }

    /// A cause the message does not quote gets its own line; one it quotes does not.
    #[test]
    fn causes_the_message_does_not_quote_are_listed() {
        #[derive(Debug)]
        struct Outer(io::Error, &'static str);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.1)
            }
        }
        impl Error for Outer {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let quiet = Outer(io::Error::other("disk full"), "cannot keep the hold");
        let f = Failed::hinted(Code::Failed, quiet, Some("free some space".into()));
        assert_eq!(f.causes(), ["disk full"]);
        assert_eq!(
            f.lines("send"),
            [
                "iapeer send: cannot keep the hold",
                "  caused by: disk full",
            ],
            "a hint the sentence does not end with is not added"
        );
        let quoting = RegistryError::Io(crate::fsutil::IoError::named(
            "read",
            "the peer registry ",
            "/r/p.json".as_ref(),
        )(io::Error::other("disk full")));
        let f = Failed::hinted(Code::Failed, quoting, None);
        assert!(f.causes().is_empty());
        assert_eq!(
            f.lines("list"),
            ["iapeer list: cannot read the peer registry /r/p.json: disk full"]
        );
    }

    /// `iapeer daemon` whose router thread panicked is an internal error; a port in use says
    /// what to do on its own line.
    #[test]
    fn daemon_failures_pick_their_code_and_hint() {
        let fatal: CliError = DaemonError::Fatal("the router thread panicked".into()).into();
        assert_eq!(fatal.exit_code(), EXIT_INTERNAL);
        let taken = io::Error::from(io::ErrorKind::AddrInUse);
        let lines = CliError::from(DaemonError::Listen(7, taken)).lines("daemon");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("iapeer daemon: cannot listen on 127.0.0.1:7: "));
        assert!(lines[1].starts_with("  hint: another program"), "{lines:?}");
    }

    #[test]
    fn internal_errors_exit_255_and_others_1() {
        let internal = CliError::Refused(Failure::new(Code::Internal, "boom"));
        assert_eq!(internal.exit_code(), EXIT_INTERNAL);
        let own = CliError::Failed(Failed::new(Code::Internal, "boom"));
        assert_eq!(own.exit_code(), 255);
        assert_eq!(CliError::failed("no").exit_code(), 1);
        let refused = CliError::Refused(Failure::new(Code::NotLive, "asleep"));
        assert_eq!(refused.exit_code(), 1);
        assert_eq!(CliError::Exit(3).exit_code(), 3);
        assert!(CliError::Exit(3).lines("send").is_empty());
    }

    /// A control character a peer wrote is shown visibly on every line.
    #[test]
    fn lines_show_control_characters() {
        let mut f = Failed::new(Code::Failed, "topic \u{1b}[31m");
        f.hints.push("rename \u{7}".into());
        let lines = f.lines("send");
        assert!(
            lines
                .iter()
                .all(|l| !l.contains('\u{1b}') && !l.contains('\u{7}')),
            "{lines:?}"
        );
    }
}

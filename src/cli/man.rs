//! The man page `man/iapeer.1` (roff, section 1), generated from the verb table (spec 07
//! "Man page and completions"). The checked-in file is regenerated with
//! `cargo run -- --generate man > man/iapeer.1` (or `IAPEER_BLESS=1 cargo test --lib cli::man`)
//! and a test fails while it differs from [`render_man`]. The ENVIRONMENT section comes from
//! the table of environment variables, [`crate::config::vars::ENV_VARS`].

use std::fmt::Write as _;

use crate::config::vars::ENV_VARS;

use super::spec::{
    FlagSpec, Group, VerbSpec, ABOUT, GENERATE_FLAG, GLOBAL_FLAGS, RUNTIME_SHORTCUT, VERBS,
};

/// Files the man page lists: (path, meaning).
const FILES: &[(&str, &str)] = &[
    ("~/.iapeer/", "the storage root (IAPEER_ROOT)"),
    (
        "~/.iapeer/IAPEER.md",
        "the host doctrine, part of every agent's system prompt",
    ),
    (
        "~/.iapeer/*.md, ~/.iapeer/fragments/*.md",
        "host domain files and fragments of the system prompt",
    ),
    ("~/.iapeer/peers-profiles.json", "the registry of peers"),
    (
        "~/.iapeer/state/iapeer/outbox/",
        "sends made while the daemon was not running, routed when it starts",
    ),
    (
        "~/.iapeer/peers-profiles.lock",
        "the registry writers' lock: an flock on this file, and the directory \
         peers-profiles.lock.lock that the original TypeScript iapeer's writers also take",
    ),
    (
        "~/.iapeer/peers/<name>/",
        "the working folder of a peer made by create",
    ),
    ("~/.iapeer/docs/", "reference docs, one folder per package"),
    (
        "~/.iapeer/docs/iapeer/README.md",
        "the guide for agents (how to reach peers, what they receive), written by install and at \
         every daemon start, with PROTOCOL.md and ENVIRONMENT.md",
    ),
    (
        "~/.config/systemd/user/iapeer.service",
        "the systemd user unit written by install (Linux)",
    ),
    (
        "~/Library/LaunchAgents/com.agfpd.iapeer.plist",
        "the launchd agent written by install (macOS)",
    ),
    (
        "~/.iapeer/state/iapeer/router.sock",
        "the daemon's control socket",
    ),
    (
        "~/.iapeer/state/iapeer/fleet.token",
        "the token the fleet API asks for (Authorization: Bearer $(cat ~/.iapeer/state/iapeer/fleet.token)); \
         made 0600 at the daemon's first start and kept; unused while IAPEER_BEARER_TOKEN is set",
    ),
    (
        "~/.iapeer/state/iapeer/ui.key",
        "the key of the page's next link (iapeer ui), 0600, made at every daemon start",
    ),
    (
        "~/.iapeer/state/lifecycle/<identity>.system-prompt.md",
        "the system prompt of a session, rebuilt at every start",
    ),
    (
        "~/.iapeer/logs/iapeer/",
        "lifecycle.log, delivery.log, exits.log and daemon.log",
    ),
    (
        "~/.iapeer/logs/lifecycle/<identity>.log",
        "the raw terminal output of a peer's sessions",
    ),
    (
        "<cwd>/.iapeer/peer-profile.json",
        "a peer's profile, the source of truth about it",
    ),
    ("<cwd>/.iapeer/IAPEER.md", "a peer's own doctrine"),
    (
        "<cwd>/.iapeer/*.md, <cwd>/.iapeer/fragments/*.md",
        "a peer's domain files and fragments",
    ),
    (
        "<cwd>/.iapeer/runtimes/<runtime>/launch.env",
        "launch settings of a peer on one runtime",
    ),
];

/// The whole man page as roff, ending with a newline. Pure: the same build always gives the
/// same bytes (no date; the version is the crate's).
pub fn render_man() -> String {
    let mut out = String::new();
    out.push_str(".\\\" Generated from the verb table by: iapeer --generate man. Do not edit.\n");
    let _ = writeln!(
        out,
        ".TH IAPEER 1 \"\" \"iapeer {}\" \"User Commands\"",
        env!("CARGO_PKG_VERSION")
    );
    // No hyphenation: flags and paths must read exactly as typed.
    out.push_str(".nh\n");
    let _ = write!(out, ".SH NAME\niapeer \\- {}\n", prose(ABOUT));
    out.push_str(
        ".SH SYNOPSIS\n\\fBiapeer\\fR \\fIverb\\fR [\\fIargs\\fR] [\\fIflags\\fR]\n.br\n\
         \\fBiapeer\\fR \\fIruntime\\fR\n.br\n\\fBiapeer\\fR \\-\\-help | \\-\\-version\n",
    );
    out.push_str(".SH DESCRIPTION\n");
    for para in DESCRIPTION {
        let _ = write!(out, ".PP\n{}\n", prose(para));
    }
    out.push_str(".SH OPTIONS\n");
    for f in GLOBAL_FLAGS.iter().chain(std::iter::once(&GENERATE_FLAG)) {
        flag_item(&mut out, f);
    }
    out.push_str(".SH VERBS\n");
    for group in Group::ALL {
        let _ = writeln!(out, ".SS {}", group.title());
        let verbs = VERBS.iter().chain(std::iter::once(&RUNTIME_SHORTCUT));
        for v in verbs.filter(|v| v.group == group) {
            verb_item(&mut out, v);
        }
    }
    out.push_str(".SH RUNTIME PACKAGES\n");
    for para in RUNTIME_PACKAGES {
        let _ = write!(out, ".PP\n{}\n", prose(para));
    }
    out.push_str(".PP\n.nf\n.RS 4\n");
    for line in readme_block(README, EXAMPLE_MARKER).lines() {
        let _ = writeln!(out, "{}", code(line));
    }
    out.push_str(".RE\n.fi\n");
    out.push_str(".SH MOVING OVER FROM THE ORIGINAL IAPEER\n");
    for para in MOVING_OVER {
        let _ = write!(out, ".PP\n{}\n", prose(para));
    }
    out.push_str(".SH ENVIRONMENT\n");
    for e in ENV_VARS {
        let _ = write!(
            out,
            ".TP\n\\fB{}\\fR\n{}\n",
            code(e.name),
            prose(&e.meaning())
        );
    }
    out.push_str(".SH FILES\n");
    for (path, meaning) in FILES {
        let _ = write!(out, ".TP\n\\fI{}\\fR\n{}\n", code(path), prose(meaning));
    }
    out.push_str(
        ".SH EXIT STATUS\n.TP\n0\nsuccess, including requests that changed nothing because \
         nothing needed changing\n.TP\n1\nthe operation failed or was refused (peer stopped, \
         not registered, daemon not running, ...)\n.TP\n2\n\
         a usage error: unknown verb, missing argument, unknown flag\n.TP\n3\nsend and \
         confirm-send only: the message's state is unknown (code state-unknown) \\[u2014] some of \
         it reached the peer's input and its arrival was never confirmed, or the connection to \
         the daemon broke after the request was sent; it may have arrived, and a retry with the \
         same --id is never delivered twice\n.TP\n255\nan internal error (code internal): the \
         daemon or the CLI failed on its own side \\[u2014] a panic, or a file of its own it could \
         not write \\[u2014] rather than because of the request; the message says what, and a \
         panic's hint says how to report it\n",
    );
    out.push_str(&format!(
        ".SH SEE ALSO\n{}\n",
        prose(
            "launchctl(1), systemctl(1), and the reference docs installed in \
             ~/.iapeer/docs/iapeer/."
        )
    ));
    out
}

/// RUNTIME PACKAGES paragraphs: how humans and services join (the README says the same at
/// more length); the worked example after them is the README's, so the two cannot drift.
const RUNTIME_PACKAGES: &[&str] = &[
    "A human or a service joins through a router runtime: a program iapeer starts for the peer, on \
     pipes, and keeps running. A runtime is installed when ~/.iapeer/runtimes/<rt>/runtime.json \
     exists, written by a runtime package or by hand, with the keys runtime (its name, equal to the \
     folder name: 1 to 32 lowercase letters and digits, starting with a letter), version (optional) \
     and run, {\"command\": ..., \"args\": [...]} (optional; without it iapeer runs \
     $<RT>_RUNTIME_BIN, else <rt>-runtime from PATH, with the argument run). Other keys are ignored.",
    "A peer made with create --runtime <rt> is always on: the daemon starts the program in the \
     peer's folder, restarts it when it exits (back-off 1 s to 60 s; five deaths within a minute \
     park it until start) and ends it on stop. Its environment has PEER_IDENTITY, \
     PEER_PERSONALITY, PEER_RUNTIME, IAPEER_ROOT and the peer's launch.env. Each message arrives \
     on its stdin as a wire envelope: a line <iap from-personality=... from-runtime=... \
     from-intelligence=... ts=... topic=...>, the line Reply via send_to_peer., an <attachments> \
     line when there are any, the body as <message><![CDATA[...]]></message>, then </iap>; it \
     counts as delivered once written. The program answers with iapeer send, as PEER_IDENTITY. \
     create warns, and list shows a runtime as missing, when the program cannot be found.",
    "--intelligence natural makes the peer a human (the program carries messages to the person: a \
     chat bot, a pager, a file they read); absent a service with no intelligence. A worked example, \
     a human reached through a file (it needs the daemon and a peer alice on echo):",
];

/// MOVING OVER paragraphs: what a `~/.iapeer` written by the original TypeScript tool needs
/// (issue 11 item 1; the README says the same).
const MOVING_OVER: &[&str] = &[
    "A ~/.iapeer written by the original TypeScript iapeer (its profiles, peers-profiles.json, the \
     peers' .mcp.json files, the iapeer block in ~/.codex/config.toml, runtime packages' \
     runtime.json) is read as it is. The one step is to start this daemon (iapeer onboard, or \
     iapeer daemon). At every wake the daemon brings the waking peer's MCP configuration to the \
     current form: the iapeer entry of a Claude peer's .mcp.json gets the session-token headers \
     and is listed in .claude/settings.local.json; the [mcp_servers.iapeer] block of the Codex \
     config has bearer_token_env_var \"IAPEER_BEARER\" changed to \"IAPEER_TOKEN\" and gets the \
     identity header if it lacks one. Other servers, keys and comments are kept, a file is \
     written only when it changes, and each change is logged. Sessions also export \
     IAPEER_BEARER, so a Codex config the daemon could not edit still authenticates. Registry \
     writes take both tools' locks, so the original's companion tools may keep writing it.",
];

/// The README, whose worked example of a router runtime the man page shows.
const README: &str = include_str!("../../README.md");

/// The line before that example's `sh` block in the README.
pub const EXAMPLE_MARKER: &str =
    "<!-- example: router runtime (tests/guide.rs runs this block as it is) -->";

/// The body of the ```` ```sh ```` block right after the line `marker` in `markdown`, each
/// line ending with a newline; empty when there is none.
pub fn readme_block(markdown: &str, marker: &str) -> String {
    let Some(at) = markdown.find(&format!("{marker}\n```sh\n")) else {
        return String::new();
    };
    let body = &markdown[at + marker.len() + "\n```sh\n".len()..];
    match body.find("\n```\n") {
        Some(end) => body[..=end].to_string(),
        None => String::new(),
    }
}

/// DESCRIPTION paragraphs, in our own words.
const DESCRIPTION: &[&str] = &[
    "iapeer keeps a team of participants on one host reachable by message. Every participant is a \
     peer with a name and a working folder: an AI agent (a real interactive Claude Code or Codex \
     session in a terminal the daemon owns), a human (over a chat runtime such as Telegram, or by \
     attaching a terminal to an agent), or a program with no intelligence (a scheduler, a watcher).",
    "Agents reach any peer with the MCP tool send_to_peer; shell scripts use iapeer send. The daemon \
     wakes a sleeping agent before delivering to it and puts idle agents to sleep after an hour; the \
     next message on the same topic resumes the earlier conversation.",
    "Each verb takes its positionals and flags in any order. Flags take --key value or --key=value \
     (the second form keeps the value exactly, even when it starts with a dash); --help or -h anywhere \
     prints help for the verb and runs nothing; -- ends the flags. Results go to stdout, errors to \
     stderr: iapeer <verb>: <what happened>, then a line \"  caused by: ...\" for each cause the \
     message does not already say and a line \"  hint: ...\" for each thing to do; --json gives one \
     JSON document on stdout for scripts, and a failure as {\"ok\":false,\"code\":...,\"error\":...} \
     with the codes of the control protocol (failed for the CLI's own refusals, internal for a \
     defect) and the hints at the end of error, after dashes. Text a peer or an agent wrote (a message, a topic, a description, a \
     command, a logged value) is shown with its control characters as visible stand-ins (␛ for \
     ESC, ␍ for CR, <U+009B> for a C1 control, <U+202E> for a bidi control), never sent to the \
     terminal; in --json output the C0 and C1 controls, DEL, the bidi controls and U+2028/U+2029 \
     are escaped as \\uXXXX (the parsed value is exact). The bash completion offers verbs, flags \
     and the registered peer names.",
];

fn verb_item(out: &mut String, v: &VerbSpec) {
    let _ = write!(
        out,
        ".TP\n\\fB{}\\fR\n{}\n",
        code(v.signature),
        prose(v.description)
    );
    if v.hidden {
        out.push_str(".br\nThis verb is not listed by iapeer help.\n");
    }
    if !v.flags.is_empty() {
        out.push_str(".RS\n");
        for f in v.flags {
            flag_item(out, f);
        }
        out.push_str(".RE\n");
    }
}

fn flag_item(out: &mut String, f: &FlagSpec) {
    let mut label = match f.short {
        Some(c) => format!("\\fB\\-{c}\\fR, \\fB\\-\\-{}\\fR", code(f.long)),
        None => format!("\\fB\\-\\-{}\\fR", code(f.long)),
    };
    if let Some(value) = f.value {
        let _ = write!(label, " \\fI{}\\fR", code(value));
    }
    let repeat = if f.repeatable { " (repeatable)" } else { "" };
    let _ = write!(out, ".TP\n{label}\n{}{repeat}\n", prose(f.help));
}

/// Escape text for roff where every hyphen is a real minus (flags, names, paths): `\` → `\e`,
/// `-` → `\-`, non-ASCII → `\[uXXXX]`, and a leading `.` or `'` is guarded with `\&`.
pub fn code(s: &str) -> String {
    escape(s, |_| true)
}

/// Escape running text for roff like [`code`], but only hyphens that begin a word (flags such
/// as `--all`) become `\-`; hyphens inside words (`always-on`) stay hyphens.
pub fn prose(s: &str) -> String {
    escape(s, |prev| {
        prev.is_none_or(|p| p.is_whitespace() || matches!(p, '-' | '(' | '[' | '|' | '"'))
    })
}

fn escape(s: &str, minus: impl Fn(Option<char>) -> bool) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut prev: Option<char> = None;
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' if minus(prev) => out.push_str("\\-"),
            '.' | '\'' if prev.is_none() || prev == Some('\n') => {
                out.push_str("\\&");
                out.push(c);
            }
            c if !c.is_ascii() => {
                let _ = write!(out, "\\[u{:04X}]", c as u32);
            }
            c => out.push(c),
        }
        prev = Some(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_in_man_page_is_current() {
        crate::golden::check(
            "man/iapeer.1",
            &render_man(),
            "regenerate it with `cargo run -- --generate man > man/iapeer.1` \
             (or IAPEER_BLESS=1 cargo test --lib cli::man) and commit it",
        );
    }

    #[test]
    fn page_documents_every_verb_flag_and_variable() {
        let page = render_man();
        assert!(page.contains(&format!("\"iapeer {}\"", env!("CARGO_PKG_VERSION"))));
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "VERBS",
            "RUNTIME PACKAGES",
            "ENVIRONMENT",
            "FILES",
        ] {
            assert!(page.contains(&format!("\n.SH {section}\n")), "{section}");
        }
        assert!(page.contains("\n.SH EXIT STATUS\n") && page.contains("\n.SH SEE ALSO\n"));
        for v in VERBS.iter().chain(std::iter::once(&RUNTIME_SHORTCUT)) {
            assert!(
                page.contains(&format!("\\fB{}", code(v.signature))),
                "{}",
                v.name
            );
            for f in v.flags {
                assert!(
                    page.contains(&format!("\\-\\-{}", code(f.long))),
                    "--{}",
                    f.long
                );
            }
        }
        assert!(page.contains("echo\\-agent"));
        for e in ENV_VARS {
            assert!(
                page.contains(&format!("\\fB{}\\fR", code(e.name))),
                "{}",
                e.name
            );
        }
        for name in [
            "IAPEER_ROOT",
            "IAPEER_TICK_SECS",
            "PEER_IDENTITY",
            "IAPEER_LOG",
            "IAPEER_LIFECYCLE_LOG_MAX_BYTES",
            "IAPEER_DELIVERY_LOG_KEEP",
            "IAPEER_EXITS_LOG_MAX_BYTES",
        ] {
            assert!(ENV_VARS.iter().any(|e| e.name == name), "{name}");
        }
    }

    #[test]
    fn page_is_plain_ascii_roff() {
        let page = render_man();
        assert!(page.is_ascii());
        for line in page.lines() {
            if line.starts_with('.') {
                let ok = [
                    ".\\\"", ".TH ", ".SH ", ".SS ", ".TP", ".PP", ".RS", ".RE", ".br", ".nh",
                    ".nf", ".fi",
                ];
                assert!(
                    ok.iter().any(|m| line.starts_with(m)),
                    "stray request: {line}"
                );
            }
            assert!(!line.starts_with('\''), "{line}");
        }
    }

    #[test]
    fn the_worked_example_is_the_readmes() {
        let block = readme_block(README, EXAMPLE_MARKER);
        assert!(
            block.starts_with("root=") && block.contains("runtime.json"),
            "{block}"
        );
        let page = render_man();
        for line in block.lines() {
            assert!(page.contains(&format!("\n{}\n", code(line))), "{line}");
        }
        assert_eq!(readme_block("x\n", EXAMPLE_MARKER), "");
        let md = format!("{EXAMPLE_MARKER}\n```sh\na\nb\n```\nafter\n");
        assert_eq!(readme_block(&md, EXAMPLE_MARKER), "a\nb\n");
    }

    #[test]
    fn escaping() {
        assert_eq!(code("--all"), "\\-\\-all");
        assert_eq!(code("a\\b"), "a\\eb");
        assert_eq!(code(".hidden"), "\\&.hidden");
        assert_eq!(prose("'quoted"), "\\&'quoted");
        assert_eq!(
            prose("always-on peers with --all"),
            "always-on peers with \\-\\-all"
        );
        assert_eq!(prose("(-h) a — b"), "(\\-h) a \\[u2014] b");
        assert_eq!(prose("end."), "end.");
    }

    /// The keys of a `--json` document, nested objects' (and arrays' objects) too, but not
    /// those inside a registry entry (`"peer"`), which `list` describes.
    fn keys(doc: &serde_json::Value, out: &mut Vec<String>) {
        match doc {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    out.push(k.clone());
                    if k != "peer" {
                        keys(v, out);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }

    /// Each `--json` document type beside its verb (issue 29 item 6) has every field named
    /// in that verb's description, which the man page prints. `ok`, `code` and `error` are
    /// the protocol's, described once in the general rules; a registry entry's fields where
    /// the description says "the registry entry".
    #[test]
    fn json_documents_have_their_fields_in_the_man_page() {
        use crate::cli::{
            background, connect, federation, install, lifecycle, memory, peers, plugins, prompt,
            send, ui,
        };
        use std::path::{Path, PathBuf};
        /// `(verb, its document as JSON)`.
        fn doc(verb: &str, d: impl serde::Serialize) -> (&str, serde_json::Value) {
            (verb, serde_json::to_value(d).unwrap())
        }
        let entry = crate::registry::RegistryPeer::new("bob", &["echo"], "artificial", "/p/bob");
        let file = Path::new("/f");
        let names = ["bob".to_string()];
        let docs: Vec<(&str, serde_json::Value)> = vec![
            doc(
                "ui",
                ui::UiDoc {
                    url: "u".into(),
                    opened: false,
                },
            ),
            doc("shutdown", background::ShutdownDoc { stopped: Some(7) }),
            doc(
                "remove",
                peers::RemovedDoc {
                    removed: true,
                    folder: Some("/p/bob".into()),
                    inbox_kept: Some(None),
                    worktree: Some(peers::RemovedWorktree {
                        removed: true,
                        branch: Some("b".into()),
                        note: "n".into(),
                    }),
                },
            ),
            doc(
                "send",
                send::KeptDoc {
                    ok: true,
                    outbox: file,
                    to: "bob",
                },
            ),
            doc(
                "send",
                send::StateUnknownDoc {
                    ok: false,
                    code: crate::protocol::Code::StateUnknown,
                    error: "e",
                    id: Some("m1"),
                },
            ),
            doc(
                "add-runtime",
                peers::RuntimeDoc {
                    runtime: "codex",
                    peers: vec![peers::AddedRow {
                        personality: "bob".into(),
                        outcome: "added",
                    }],
                },
            ),
            doc(
                "default-runtime",
                peers::RuntimeDoc {
                    runtime: "codex",
                    peers: vec!["bob"],
                },
            ),
            doc(
                "approval-mode",
                peers::ModesDoc {
                    peers: vec![peers::ModeRow {
                        peer: "bob".into(),
                        mode: "gated",
                    }],
                },
            ),
            doc(
                "rename",
                peers::RenamedDoc {
                    from: file,
                    peer: &entry,
                    history: Some(file),
                    triggers_in: &names,
                    worktree: Some(peers::RenamedWorktree { branch: Some("b") }),
                },
            ),
            doc(
                "create",
                peers::CreatedWorktreeDoc {
                    peer: &entry,
                    worktree: peers::CreatedWorktree {
                        repository: file,
                        branch: "b",
                        branch_made: true,
                        from: Some("HEAD"),
                    },
                },
            ),
            doc(
                "refresh",
                lifecycle::RefreshDoc {
                    marked: names.to_vec(),
                },
            ),
            doc(
                "self-done",
                lifecycle::SelfDoneDoc {
                    identity: "echo-bob".into(),
                    ephemeral: true,
                },
            ),
            doc(
                "enable",
                plugins::EnabledDoc {
                    plugin: "p",
                    personality: "bob",
                    runtimes: vec![plugins::EnabledRow {
                        runtime: "claude".into(),
                        state: "installed",
                        path: Some(PathBuf::from("/x")),
                        error: None,
                    }],
                    setup: "ran",
                },
            ),
            doc(
                "native-memory",
                memory::LeversDoc {
                    setting: "off",
                    levers: vec![memory::LeverRow {
                        personality: "bob".into(),
                        runtime: "claude".into(),
                        file: file.into(),
                        state: "written",
                        error: None,
                    }],
                },
            ),
            doc(
                "trust-hooks",
                memory::HooksTrusted {
                    file: "h.json",
                    config: file,
                    changed: true,
                    hooks: vec!["k"],
                },
            ),
            doc(
                "trust-hooks",
                memory::HooksChecked {
                    file: "h.json",
                    trusted: false,
                    hooks: vec![memory::HookRow {
                        key: "k",
                        command: "c",
                        state: "missing",
                    }],
                },
            ),
            doc(
                "connect",
                connect::ConnectedDoc {
                    peer: "you",
                    bot_username: "a_bot",
                    changed: true,
                    restarted: &names,
                    interfaces: &None,
                },
            ),
            doc(
                "federation",
                federation::JoinedDoc {
                    host: "a".into(),
                    url: "redis://h".into(),
                },
            ),
            doc("federation", federation::LeftDoc { left: true }),
            doc(
                "federation",
                federation::StatusDoc {
                    joined: true,
                    host: Some("a".into()),
                    url: Some("redis://h".into()),
                    source: Some(crate::federation::Source::File),
                    tls: Some("TLS".into()),
                    link: Some(crate::federation::link::LinkReport {
                        state: crate::federation::link::LinkState::Connected,
                        host: Some("a".into()),
                        url: Some("redis://h".into()),
                        since_ms: 1,
                        last_error: Some("e".into()),
                        last_heartbeat_ms: Some(1),
                        hosts: vec![crate::federation::link::HostSeen {
                            host: "b".into(),
                            version: "v".into(),
                            last_heartbeat_ms: 1,
                            online: true,
                        }],
                        updated_ms: 1,
                    }),
                },
            ),
            doc(
                "prompt",
                prompt::PromptDoc {
                    identity: "echo-bob".into(),
                    file,
                    layers: vec![prompt::LayerRow {
                        layer: "identity",
                        source: Some(file),
                        text: "t",
                    }],
                    skipped: vec![prompt::SkippedRow {
                        path: file,
                        reason: "empty".into(),
                    }],
                    prompt: "p".into(),
                },
            ),
            doc(
                "install",
                install::InstalledDoc {
                    root: file,
                    doctrine: "kept",
                    docs_written: &[],
                    service: Some(install::ServiceDoc::Written {
                        manager: "systemd",
                        file,
                        state: "written",
                        load: "l".into(),
                    }),
                },
            ),
            doc(
                "install",
                install::ServiceDoc::Foreign {
                    manager: "systemd",
                    file,
                    state: "yours",
                    restore: "r",
                },
            ),
        ];
        let general = DESCRIPTION.concat();
        let entry_keys: Vec<String> = serde_json::to_value(&entry)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        for (verb, doc) in docs {
            let described = crate::cli::spec::find_verb(verb).unwrap().description;
            let mut names = Vec::new();
            keys(&doc, &mut names);
            assert!(!names.is_empty(), "{verb}: {doc}");
            for key in names {
                if entry_keys.contains(&key) && described.contains("the registry entry") {
                    continue;
                }
                let protocol = matches!(key.as_str(), "ok" | "code")
                    || (key == "error" && doc.get("ok").is_some());
                let text = if protocol { &general } else { described };
                assert!(
                    text.contains(&format!("\"{key}\"")),
                    "{verb} --json has \"{key}\", which its man page description does not name"
                );
            }
        }
    }
}

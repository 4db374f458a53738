//! Table-driven tests of the command-line rules (spec 07 "General rules").

use super::*;
use crate::cli::spec::{args, find_verb, flags};

fn parse_words(words: &[&str]) -> Result<Command, UsageError> {
    parse(words.iter().map(OsString::from).collect())
}

fn run(words: &[&str]) -> Invocation {
    match parse_words(words) {
        Ok(Command::Run(_, inv)) => inv,
        other => panic!("{words:?}: expected a run, got {other:?}"),
    }
}

fn err(words: &[&str]) -> String {
    match parse_words(words) {
        Err(e) => e.to_string(),
        other => panic!("{words:?}: expected an error, got {other:?}"),
    }
}

const SEND_SIG: &str = "send <target> (--message <text> | --message-file <path|->) \
    [--from <runtime>-<name>] [--runtime <rt>] [--topic <t>] [--attachment <path>]... [--timeout <seconds>] [--id <id>] [--if-busy <choice>] [--json]";

#[test]
fn help_version_and_generate() {
    let help = |v: Option<&str>| Ok(Command::Help(v.map(String::from)));
    let cases: &[(&[&str], Result<Command, UsageError>)] = &[
        (&[], help(None)),
        (&["help"], help(None)),
        (&["--help"], help(None)),
        (&["-h"], help(None)),
        (&["help", "send"], help(Some("send"))),
        (&["help", "frob"], help(Some("frob"))),
        (&["send", "--help"], help(Some("send"))),
        (&["send", "bob", "-h", "--bogus"], help(Some("send"))),
        (&["send", "--bogus", "--help"], help(Some("send"))),
        (&["--help", "send"], help(Some("send"))),
        (&["--help", "--bogus"], help(None)),
        (&["stop", "--help"], help(Some("stop"))),
        (&["claude", "--help"], help(Some("claude"))),
        (&["--help", "echo-agent", "--x"], help(Some("echo-agent"))),
        (&["help", "--help"], help(Some("help"))),
        (&["version"], Ok(Command::Version)),
        (&["--version"], Ok(Command::Version)),
        (&["-v"], Ok(Command::Version)),
        (&["--generate", "man"], Ok(Command::Generate(Generate::Man))),
        (
            &["--generate=completions-zsh"],
            Ok(Command::Generate(Generate::Completions(Shell::Zsh))),
        ),
        (
            &["--generate", "completions-bash"],
            Ok(Command::Generate(Generate::Completions(Shell::Bash))),
        ),
        (
            &["--generate", "completions-fish"],
            Ok(Command::Generate(Generate::Completions(Shell::Fish))),
        ),
    ];
    for (words, want) in cases {
        assert_eq!(&parse_words(words), want, "{words:?}");
    }
}

#[test]
fn usage_errors_are_one_targeted_line() {
    let gen = "<verb> [args] [flags]";
    let cases: &[(&[&str], String)] = &[
        (
            &["frob"],
            "iapeer: unknown verb \"frob\" — run iapeer help for the list of verbs".into(),
        ),
        (&["frob", "--help"], "iapeer: unknown verb \"frob\" — run iapeer help for the list of verbs".into()),
        (&["--bogus"], format!("iapeer: unknown flag --bogus — usage: iapeer {gen}")),
        (&["-x", "list"], format!("iapeer: unknown flag -x — usage: iapeer {gen}")),
        (&["--generate"], format!("iapeer: --generate needs a value — usage: iapeer {gen}")),
        (&["--generate", "pdf"], format!("iapeer: cannot generate \"pdf\" — usage: iapeer {gen}")),
        (&["--version", "list"], format!("iapeer: unexpected argument \"list\" — usage: iapeer {gen}")),
        (&["send"], format!("iapeer: missing <target> — usage: iapeer {SEND_SIG}")),
        (
            &["send", "bob"],
            format!("iapeer: missing --message or --message-file — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "x", "--message-file", "-"],
            format!(
                "iapeer: --message and --message-file cannot be used together — usage: iapeer {SEND_SIG}"
            ),
        ),
        (
            &["send", "bob", "--message"],
            format!("iapeer: --message needs a value — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "--json"],
            format!("iapeer: --message needs a value — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "-hi there"],
            format!("iapeer: --message needs a value (\"-hi there\" starts with a dash, so it reads as a flag; to give it as the value, join them with =) — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "-- x"],
            format!("iapeer: --message needs a value (\"-- x\" starts with a dash, so it reads as a flag; to give it as the value, join them with =) — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "-x"],
            format!("iapeer: --message needs a value (\"-x\" starts with a dash, so it reads as a flag; to give it as the value, join them with =) — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "--", "x"],
            format!("iapeer: --message needs a value — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "carol", "--message", "x"],
            format!("iapeer: unexpected argument \"carol\" — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "x", "--frob"],
            format!("iapeer: unknown flag --frob (did you mean --from?) — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "x", "--frobnicate=1"],
            format!("iapeer: unknown flag --frobnicate — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "--message", "x", "--json=yes"],
            format!("iapeer: --json takes no value — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["send", "bob", "-m", "x"],
            format!("iapeer: unknown flag -m — usage: iapeer {SEND_SIG}"),
        ),
        (
            &["list", "extra"],
            "iapeer: unexpected argument \"extra\" — usage: iapeer list [--json]".into(),
        ),
        (
            &["list", "--version"],
            "iapeer: unknown flag --version — usage: iapeer list [--json]".into(),
        ),
        (
            &["stop"],
            "iapeer: missing <peer> (or --all) — usage: iapeer stop (<peer> [runtime] | --all [--everyone]) [--json]".into(),
        ),
        (
            &["stop", "bob", "--all"],
            "iapeer: unexpected argument \"bob\" with --all — usage: iapeer stop (<peer> [runtime] | --all [--everyone]) [--json]"
                .into(),
        ),
        (
            &["stop", "bob", "claude", "x"],
            "iapeer: unexpected argument \"x\" — usage: iapeer stop (<peer> [runtime] | --all [--everyone]) [--json]".into(),
        ),
        (
            &["help", "send", "list"],
            "iapeer: unexpected argument \"list\" — usage: iapeer help [verb]".into(),
        ),
        (
            &["version", "now"],
            "iapeer: unexpected argument \"now\" — usage: iapeer version".into(),
        ),
        (
            &["claude", "bob"],
            "iapeer: unexpected argument \"bob\" — usage: iapeer (claude | codex | echo)".into(),
        ),
        (
            &["live-runtime"],
            "iapeer: missing <peer> — usage: iapeer live-runtime <peer> [--json]".into(),
        ),
    ];
    for (words, want) in cases {
        let got = err(words);
        assert_eq!(&got, want, "{words:?}");
        assert!(!got.contains('\n'));
    }
}

#[test]
fn values_flags_and_positionals() {
    let inv = run(&[
        "send",
        "bob",
        "--message=--literal",
        "--topic",
        "t1",
        "--topic=t2",
        "--attachment",
        "/a",
        "--attachment=/b",
        "--json",
        "--from",
        "claude-ann",
    ]);
    assert_eq!(inv.verb.name, "send");
    assert_eq!(inv.positional(args::TARGET), Some("bob"));
    assert_eq!(inv.value(flags::MESSAGE), Some("--literal"));
    assert_eq!(inv.value(flags::TOPIC), Some("t2"), "last one wins");
    assert_eq!(inv.values(flags::ATTACHMENT), ["/a", "/b"]);
    assert_eq!(inv.value(flags::FROM), Some("claude-ann"));
    assert!(inv.flag(flags::JSON));
    assert!(!inv.flag(flags::SEND_RUNTIME));
    assert_eq!(inv.value(flags::SEND_RUNTIME), None);
    assert!(inv.values(flags::SEND_RUNTIME).is_empty());

    // `=` keeps the value verbatim, even empty or with `=` inside.
    let inv = run(&["send", "bob", "--message=", "--topic=a=b"]);
    assert_eq!(inv.value(flags::MESSAGE), Some(""));
    assert_eq!(inv.value(flags::TOPIC), Some("a=b"));

    // A lone `-` is a value (stdin).
    let inv = run(&["send", "bob", "--message-file", "-"]);
    assert_eq!(inv.value(flags::MESSAGE_FILE), Some("-"));

    // Booleans never consume the next word.
    let inv = run(&["list", "--json"]);
    assert!(inv.flag(flags::JSON) && inv.positionals.is_empty());
    let inv = run(&["remove", "--force", "bob"]);
    assert_eq!(inv.positionals, ["bob"]);
    assert!(inv.flag(flags::REMOVE_FORCE));

    // `--` ends flags.
    let inv = run(&["send", "--message", "hi", "--", "--bob"]);
    assert_eq!(inv.positional(args::TARGET), Some("--bob"));
    let inv = run(&["init", "--", "-folder"]);
    assert_eq!(inv.positional(args::FOLDER), Some("-folder"));

    // Flags may come before positionals; optional positionals may be absent.
    let inv = run(&["init", "--runtime", "codex"]);
    assert_eq!(inv.positional(args::FOLDER), None);
    assert_eq!(inv.value(flags::PEER_RUNTIME), Some("codex"));

    let inv = run(&["stop", "--all"]);
    assert!(inv.flag(flags::ALL) && inv.positionals.is_empty());
    let inv = run(&["start", "bob", "codex"]);
    assert_eq!(inv.positional(args::RUNTIME), Some("codex"));
    let inv = run(&["daemon", "--foreground"]);
    assert!(inv.flag(flags::FOREGROUND));
}

#[test]
fn echo_agent_passes_everything_through() {
    let inv = run(&["echo-agent", "--resume", "--fail-boot", "-h", "--", "x=y"]);
    assert_eq!(inv.verb.name, "echo-agent");
    assert_eq!(
        inv.positionals,
        ["--resume", "--fail-boot", "-h", "--", "x=y"]
    );
    assert!(run(&["echo-agent"]).positionals.is_empty());
}

#[test]
fn runtime_shortcut() {
    for rt in ["claude", "codex", "echo"] {
        match parse_words(&[rt]) {
            Ok(Command::RuntimeShortcut { runtime, inv }) => {
                assert_eq!(runtime, rt);
                assert!(std::ptr::eq(inv.verb, &RUNTIME_SHORTCUT));
            }
            other => panic!("{rt}: {other:?}"),
        }
    }
}

#[test]
fn non_utf8_words_are_usage_errors() {
    use std::os::unix::ffi::OsStringExt;
    let bad = OsString::from_vec(vec![b'b', 0xff]);
    let e = parse(vec![
        "send".into(),
        bad.clone(),
        "--message".into(),
        "x".into(),
    ])
    .unwrap_err();
    assert!(matches!(&e, UsageError::Bad { signature, .. } if *signature == SEND_SIG));
    assert!(e.to_string().contains("not valid UTF-8"), "{e}");
    let e = parse(vec![
        "send".into(),
        "bob".into(),
        "--message".into(),
        bad.clone(),
    ])
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("iapeer: --message value: argument is not valid UTF-8"),
        "{e}"
    );
    assert!(parse(vec![bad.clone()]).is_err());
    assert!(parse(vec!["echo-agent".into(), bad]).is_err());
}

#[test]
fn every_verb_parses_with_its_required_arguments() {
    for verb in crate::cli::spec::VERBS {
        let mut words: Vec<&str> = vec![verb.name];
        words.extend(verb.positionals.iter().filter(|p| p.required).map(|_| "x"));
        for rule in verb.rules {
            if let Rule::ExactlyOne(set) = rule {
                words.extend([format!("--{}", set[0].long).leak() as &str, "v"]);
            }
        }
        let got = parse_words(&words);
        match verb.name {
            "help" => assert_eq!(got, Ok(Command::Help(None))),
            "version" => assert_eq!(got, Ok(Command::Version)),
            _ => assert!(
                matches!(&got, Ok(Command::Run(id, inv))
                    if std::ptr::eq(inv.verb, find_verb(verb.name).unwrap())
                        && crate::cli::spec::VerbId::Run(*id) == verb.id),
                "{words:?}: {got:?}"
            ),
        }
    }
}

/// Asking for a flag or positional the verb does not have is a bug in the handler; debug
/// builds (and so every test) catch it.
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "list has no flag --force")]
fn asking_for_a_flag_of_another_verb_panics_in_tests() {
    run(&["list"]).flag(flags::FORCE);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "send has no flag --runtime")]
fn a_flag_is_its_row_not_its_name() {
    // create's --runtime is another row than send's, with another meaning.
    run(&["send", "bob", "--message", "hi"]).value(flags::PEER_RUNTIME);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "list has no positional <peer>")]
fn asking_for_a_positional_of_another_verb_panics_in_tests() {
    run(&["list"]).positional(args::PEER);
}

//! Examples for each verb's long help (`iapeer help <verb>`, `iapeer <verb> --help`; issue 30
//! item 6): one to three real command lines a verb, kept beside the table rather than in it
//! so the table's rows stay short. A test runs every example through the parser.

/// `(verb, examples)`: each example is the command line after `iapeer`, words separated by
/// single spaces, a word with spaces in double quotes; then `  # what it does`.
pub static EXAMPLES: &[(&str, &[&str])] = &[
    ("help", &["help send  # the usage, description and flags of send"]),
    ("version", &["version  # iapeer x.y.z"]),
    (
        "send",
        &[
            "send bob --message \"the build is green\"  # from you, to bob's default runtime",
            "send bob --message-file notes.md --topic release --from claude-alice  # as alice",
            "send bob --message \"see the log\" --attachment /tmp/build.log --if-busy refuse",
        ],
    ),
    (
        "confirm-send",
        &["confirm-send 7f3a9c  # send the held message 7f3a9c as it is"],
    ),
    ("approvals", &["approvals  # the permission prompts waiting for an answer"]),
    (
        "approve",
        &["approve 42  # the tool call runs", "approve 42 2  # a boot dialog: choose option 2"],
    ),
    (
        "deny",
        &["deny 42 \"not on main\"  # refuse, telling the agent why"],
    ),
    (
        "inbox",
        &[
            "inbox  # your unread messages",
            "inbox --all --follow  # every message, then new ones as they come",
        ],
    ),
    (
        "create",
        &[
            "create alice --runtime claude --description \"reviews pull requests\"",
            "create fixer --runtime codex --worktree ~/src/app  # in a new git worktree",
            "create ops --intelligence natural --runtime human  # a person reached through their inbox",
        ],
    ),
    (
        "init",
        &[
            "init  # the current folder becomes a peer named after it",
            "init ~/src/app --runtime codex",
        ],
    ),
    ("list", &["list", "list --json  # for scripts"]),
    (
        "verify",
        &["verify", "verify --fix  # rebuild the registry from the profiles"],
    ),
    ("remove", &["remove bob", "remove bob --force  # even while it is live"]),
    ("rename", &["rename bob robert"]),
    (
        "prompt",
        &["prompt alice", "prompt alice --runtime codex --raw"],
    ),
    ("live-runtime", &["live-runtime alice"]),
    (
        "stop",
        &[
            "stop bob  # bob takes no messages until iapeer start bob",
            "stop bob codex  # only its codex runtime",
            "stop --all",
        ],
    ),
    ("start", &["start bob", "start --all"]),
    ("wake", &["wake bob", "wake bob codex"]),
    ("restart", &["restart bob  # taking up its conversation again"]),
    ("attach", &["attach bob  # Ctrl-] detaches; the session keeps running", "attach bob codex"]),
    ("new", &["new bob  # a fresh conversation now"]),
    (
        "refresh",
        &["refresh bob  # fresh at its next wake", "refresh --all"],
    ),
    ("interrupt", &["interrupt bob  # Escape in its session"]),
    ("compact", &["compact bob"]),
    ("self-fresh", &["self-fresh  # from inside an agent's session"]),
    ("self-done", &["self-done  # an ephemeral worker: wind down once quiet"]),
    (
        "add-runtime",
        &["add-runtime codex --peer alice", "add-runtime claude --all"],
    ),
    (
        "default-runtime",
        &["default-runtime codex --peer alice"],
    ),
    (
        "approval-mode",
        &[
            "approval-mode --all  # each peer's mode",
            "approval-mode gated --peer alice  # alice asks before each tool call",
        ],
    ),
    (
        "enable",
        &["enable recall alice  # install the recall@agfpd plugin for alice's runtimes"],
    ),
    (
        "connect",
        &["connect telegram alice --token 123456:ABC --bot alice_bot"],
    ),
    (
        "federation",
        &[
            "federation join redis://iapeer:secret@redis.lan:6379 --host-name laptop",
            "federation status",
            "federation leave",
        ],
    ),
    (
        "native-memory",
        &["native-memory off --all", "native-memory on --peer alice"],
    ),
    (
        "daemon",
        &[
            "daemon  # in the foreground, until Ctrl-C",
            "daemon --detach  # in the background",
        ],
    ),
    ("shutdown", &["shutdown"]),
    ("status", &["status", "status --json"]),
    (
        "doctor",
        &["doctor", "doctor --json  # each check: name, level, message, fix"],
    ),
    ("ui", &["ui", "ui --print  # the page's link only"]),
    (
        "trust-hooks",
        &["trust-hooks ~/src/app/.codex/hooks.json --check"],
    ),
    ("install", &["install"]),
    (
        "onboard",
        &[
            "onboard --dry-run  # what it would do",
            "onboard --accept-risk --human ana",
        ],
    ),
    (
        "update",
        &[
            "update target/release/iapeer",
            "update target/release/iapeer --force  # even with agents mid-turn",
        ],
    ),
    (
        "install-runtime",
        &[
            "install-runtime telegram",
            "install-runtime pager --package ./pager-1.0.0.tgz --no-bootstrap",
            "install-runtime ./parrot  # a terminal agent's folder with its runtime.json",
        ],
    ),
    (
        "update-runtime",
        &["update-runtime telegram", "update-runtime --all"],
    ),
    ("rollback", &["rollback  # back to iapeer.prev"]),
    (
        "uninstall",
        &[
            "uninstall --dry-run",
            "uninstall --yes --purge  # and delete ~/.iapeer",
        ],
    ),
    ("demo", &["demo", "demo --keep  # keep the temporary root"]),
    (
        "logs",
        &[
            "logs --since 15m",
            "logs bob --follow",
            "logs --since 14:03 --json",
        ],
    ),
    (
        crate::runtime_table::SHORTCUT_NAMES,
        &["claude  # a fresh Claude session of this folder's peer, attached"],
    ),
];

/// The examples of the verb named `name` (the bare-runtime form under `claude|codex|echo`),
/// empty when it has none.
pub fn examples_of(name: &str) -> &'static [&'static str] {
    EXAMPLES
        .iter()
        .find(|(verb, _)| *verb == name)
        .map_or(&[], |(_, e)| e)
}

/// The argument words of an example (without `iapeer` and without its `# comment`): split at
/// spaces, a double-quoted word kept whole without its quotes.
#[cfg(test)]
fn example_args(example: &str) -> Vec<String> {
    let line = example.split("  #").next().unwrap_or("");
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse::{parse, Command};
    use crate::cli::spec::{RUNTIME_SHORTCUT, VERBS};

    #[test]
    fn every_visible_verb_has_one_to_three_examples_and_no_other_name_has_any() {
        for v in VERBS
            .iter()
            .chain(std::iter::once(&RUNTIME_SHORTCUT))
            .filter(|v| !v.hidden)
        {
            let n = examples_of(v.name).len();
            assert!((1..=3).contains(&n), "{}: {n} examples", v.name);
        }
        for (name, _) in EXAMPLES {
            let known = VERBS
                .iter()
                .chain(std::iter::once(&RUNTIME_SHORTCUT))
                .any(|v| v.name == *name && !v.hidden);
            assert!(known, "examples for {name}, which is not a visible verb");
        }
    }

    /// Every example is a command line the parser accepts, for the verb it illustrates.
    #[test]
    fn every_example_parses_as_its_verb() {
        for (name, examples) in EXAMPLES {
            for example in *examples {
                let args = example_args(example);
                let parsed = parse(args.iter().map(Into::into).collect());
                let verb = match &parsed {
                    Ok(Command::Run(_, inv)) => inv.verb.name.to_string(),
                    Ok(Command::RuntimeShortcut { .. }) => RUNTIME_SHORTCUT.name.to_string(),
                    Ok(Command::Help(Some(_))) => "help".to_string(),
                    Ok(Command::Version) => "version".to_string(),
                    other => panic!("{example:?}: {other:?}"),
                };
                assert_eq!(&verb, name, "{example:?} parses as {parsed:?}");
            }
        }
    }

    #[test]
    fn example_words_split_like_a_shell() {
        assert_eq!(
            example_args("send bob --message \"a b\"  # note"),
            ["send", "bob", "--message", "a b"]
        );
        assert_eq!(example_args("list"), ["list"]);
    }
}

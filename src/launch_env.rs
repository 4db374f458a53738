//! `launch.env` (spec 01 §6): per peer and runtime launch tuning, read at every launch from
//! `<cwd>/.iapeer/runtimes/<runtime>/launch.env`.
//!
//! Lines are `KEY=VALUE` or `export KEY=VALUE`; blank lines and `#` comments are ignored;
//! one pair of matching surrounding quotes is stripped from a value; keys match
//! `[A-Za-z_][A-Za-z0-9_]*`; nothing is expanded. Invalid lines are skipped.

use std::path::Path;

use crate::paths;

/// Extra argv for the runtime, split on whitespace and appended last; never exported.
pub const START_ARGS_KEY: &str = "PEER_START_ARGS";
/// The claude `--disallowedTools` value; never exported.
pub const DISALLOWED_TOOLS_KEY: &str = "PEER_DISALLOWED_TOOLS";
/// Identity variables iapeer sets itself; a launch.env can never override them.
pub const IDENTITY_VARS: [&str; 4] = [
    "PEER_PERSONALITY",
    "PEER_RUNTIME",
    "PEER_IDENTITY",
    "IAPEER_TOKEN",
];

/// What a launch.env asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchEnv {
    /// `PEER_START_ARGS` split on whitespace (empty when absent).
    pub start_args: Vec<String>,
    /// `PEER_DISALLOWED_TOOLS`: `None` = key absent (the adapter's default),
    /// `Some("")` = present and empty (omit `--disallowedTools`), else the value.
    pub disallowed_tools: Option<String>,
    /// Every other variable, in order of first appearance; a repeated key keeps its last
    /// value. Identity variables are never included.
    pub vars: Vec<(String, String)>,
}

impl LaunchEnv {
    /// The value of the environment variable `key`, if the file sets it.
    #[cfg(test)]
    pub fn var(&self, key: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parse launch.env text. Never fails: invalid lines are skipped (logged at debug level),
/// identity variables are dropped (logged as a warning).
pub fn parse(text: &str) -> LaunchEnv {
    let mut env = LaunchEnv::default();
    for (n, line) in text.lines().enumerate() {
        let Some((key, value)) = parse_line(line) else {
            let t = line.trim();
            if !t.is_empty() && !t.starts_with('#') {
                log::debug!("launch.env line {} skipped: not KEY=VALUE", n + 1);
            }
            continue;
        };
        if key == START_ARGS_KEY {
            env.start_args = value.split_whitespace().map(str::to_string).collect();
        } else if key == DISALLOWED_TOOLS_KEY {
            env.disallowed_tools = Some(value);
        } else if IDENTITY_VARS.contains(&key.as_str()) {
            log::warn!("launch.env line {}: {key} is set by iapeer; ignored", n + 1);
        } else if let Some(slot) = env.vars.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = value;
        } else {
            env.vars.push((key, value));
        }
    }
    env
}

/// One line as `(key, value)`, or `None` for blanks, comments and invalid lines.
pub fn parse_line(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let line = match line.strip_prefix("export") {
        Some(rest) if rest.starts_with([' ', '\t']) => rest.trim_start(),
        _ => line,
    };
    let (key, value) = line.split_once('=')?;
    let key = key.trim_end();
    if !is_valid_key(key) {
        return None;
    }
    Some((key.to_string(), unquote(value.trim()).to_string()))
}

/// True when `key` matches `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_valid_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Strip one pair of matching surrounding quotes (`"…"` or `'…'`).
fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

/// Read `<cwd>/.iapeer/runtimes/<runtime>/launch.env`. A missing or unreadable file means
/// no extras (unreadable is logged as a warning); invalid UTF-8 is replaced.
pub fn read(cwd: &Path, runtime: &str) -> LaunchEnv {
    let path = paths::peer::launch_env(cwd, runtime);
    // A FIFO would block the launch until someone writes to it.
    match crate::fsutil::regular_file(&path).and_then(|()| std::fs::read(&path)) {
        Ok(bytes) => parse(&String::from_utf8_lossy(&bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => LaunchEnv::default(),
        Err(e) => {
            log::warn!("cannot read {}: {e}; launching without it", path.display());
            LaunchEnv::default()
        }
    }
}

/// The commented template `iapeer init` writes for `runtime` (every line a comment, so it
/// changes nothing until the operator uncomments a line).
pub fn stub(runtime: &str) -> String {
    let mut s = format!(
        "# launch.env for this peer on the {runtime} runtime; read at every launch.\n\
         # One KEY=VALUE per line (a leading `export` is allowed). Values are literal: one\n\
         # pair of surrounding quotes is removed, nothing is expanded ($VARS and ~ stay as\n\
         # written). Lines starting with # are comments.\n\
         #\n\
         # PEER_START_ARGS: extra arguments for the {runtime} command, split on spaces and\n\
         # added last.\n"
    );
    let example = crate::runtime_table::get(runtime)
        .and_then(|r| r.launch_env)
        .unwrap_or(crate::runtime_table::GENERIC_LAUNCH_ENV);
    s.push_str(example.start_args);
    s.push_str(example.own_keys);
    s.push_str(
        "#\n\
         # Every other KEY=VALUE becomes an environment variable of the session; a PATH set\n\
         # here replaces the inherited one. PEER_PERSONALITY, PEER_RUNTIME, PEER_IDENTITY and\n\
         # IAPEER_TOKEN are set by iapeer and cannot be changed here; TERM, COLORTERM and the\n\
         # colour switches (NO_COLOR, FORCE_COLOR, CLICOLOR, CLICOLOR_FORCE, CI) neither: iapeer\n\
         # reads the agent's screen by its colours.\n",
    );
    s.push_str(example.env);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keys_quotes_and_no_expansion() {
        let text = "\
# a comment
   # an indented comment

FOO=bar
export  QUOTED=\"two words\"
SINGLE='it''s'
MIXED=\"half'
EMPTY=
SPACED = padded value  
HOME_DIR=~/x/$HOME
1BAD=x
BAD-KEY=x
no equals sign
exportFOO=glued
export
";
        let env = parse(text);
        let want: Vec<(String, String)> = [
            ("FOO", "bar"),
            ("QUOTED", "two words"),
            ("SINGLE", "it''s"),
            ("MIXED", "\"half'"),
            ("EMPTY", ""),
            ("SPACED", "padded value"),
            ("HOME_DIR", "~/x/$HOME"),
            ("exportFOO", "glued"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env.vars, want);
        assert_eq!(env.start_args, Vec::<String>::new());
        assert_eq!(env.disallowed_tools, None);
        assert_eq!(env.var("SPACED"), Some("padded value"));
        assert_eq!(parse_line("X=\""), Some(("X".into(), "\"".into())));
    }

    #[test]
    fn special_keys_are_taken_out_and_identity_is_dropped() {
        let env = parse(
            "PEER_START_ARGS=\"--model  opus\t--verbose\"\n\
             PEER_DISALLOWED_TOOLS=\n\
             PEER_IDENTITY=claude-mallory\n\
             export IAPEER_TOKEN=stolen\n\
             PEER_PERSONALITY=x\nPEER_RUNTIME=y\n\
             PATH=/opt/bin\nPATH=/usr/bin\nA=1\n",
        );
        assert_eq!(env.start_args, ["--model", "opus", "--verbose"]);
        assert_eq!(env.disallowed_tools.as_deref(), Some(""));
        assert_eq!(
            env.vars,
            [("PATH".into(), "/usr/bin".into()), ("A".into(), "1".into())]
        );
        let present = parse("PEER_DISALLOWED_TOOLS='Bash WebFetch'");
        assert_eq!(present.disallowed_tools.as_deref(), Some("Bash WebFetch"));
    }

    #[test]
    fn read_missing_or_unreadable_is_empty() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read(tmp.path(), "claude"), LaunchEnv::default());
        let path = paths::peer::launch_env(tmp.path(), "codex");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"K=v\xff\nPEER_START_ARGS=-x\n").unwrap();
        let env = read(tmp.path(), "codex");
        assert_eq!(env.var("K"), Some("v\u{fffd}"));
        assert_eq!(env.start_args, ["-x"]);
        // A folder where the file should be is unreadable: no extras, no error.
        std::fs::create_dir_all(paths::peer::launch_env(tmp.path(), "echo")).unwrap();
        assert_eq!(read(tmp.path(), "echo"), LaunchEnv::default());
        // So is a FIFO, at once (reading it would wait for a writer for ever).
        let fifo = paths::peer::launch_env(tmp.path(), "bot");
        std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read(tmp.path(), "bot"), LaunchEnv::default());
    }

    #[test]
    fn claude_stub_golden() {
        let want = "\
# launch.env for this peer on the claude runtime; read at every launch.
# One KEY=VALUE per line (a leading `export` is allowed). Values are literal: one
# pair of surrounding quotes is removed, nothing is expanded ($VARS and ~ stay as
# written). Lines starting with # are comments.
#
# PEER_START_ARGS: extra arguments for the claude command, split on spaces and
# added last.
#PEER_START_ARGS=--model opus
#
# PEER_DISALLOWED_TOOLS: value of --disallowedTools. Not set: AskUserQuestion (a
# peer has nobody at its keyboard to answer). Set but empty: no --disallowedTools.
#PEER_DISALLOWED_TOOLS=AskUserQuestion
#
# Every other KEY=VALUE becomes an environment variable of the session; a PATH set
# here replaces the inherited one. PEER_PERSONALITY, PEER_RUNTIME, PEER_IDENTITY and
# IAPEER_TOKEN are set by iapeer and cannot be changed here; TERM, COLORTERM and the
# colour switches (NO_COLOR, FORCE_COLOR, CLICOLOR, CLICOLOR_FORCE, CI) neither: iapeer
# reads the agent's screen by its colours.
#ANTHROPIC_BASE_URL=http://127.0.0.1:8080
# Claude refuses to skip permission prompts as root unless it is told it runs
# in a sandbox (only inside a container or VM):
#IS_SANDBOX=1
";
        assert_eq!(stub("claude"), want);
    }

    /// The stub with every commented `KEY=VALUE` example line uncommented.
    fn uncomment_examples(stub: &str) -> String {
        stub.lines()
            .filter_map(|l| l.strip_prefix('#'))
            .filter(|l| parse_line(l).is_some())
            .map(|l| format!("{l}\n"))
            .collect()
    }

    #[test]
    fn other_stubs_and_every_stub_is_inert_until_uncommented() {
        let codex = stub("codex");
        assert!(codex.contains("on the codex runtime"));
        assert!(codex.ends_with("#OPENAI_BASE_URL=http://127.0.0.1:8080/v1\n"));
        assert!(!codex.contains("DISALLOWED"));
        assert!(stub("notifier").contains("#PEER_START_ARGS=--verbose\n"));
        for rt in ["claude", "codex", "echo", "notifier", "telegram"] {
            let s = stub(rt);
            assert_eq!(parse(&s), LaunchEnv::default(), "{rt}");
            let env = parse(&uncomment_examples(&s));
            assert!(!env.start_args.is_empty(), "{rt}");
            assert!(!env.vars.is_empty(), "{rt}");
        }
        let claude = parse(&uncomment_examples(&stub("claude")));
        assert_eq!(claude.start_args, ["--model", "opus"]);
        assert_eq!(claude.disallowed_tools.as_deref(), Some("AskUserQuestion"));
        assert_eq!(claude.var("IS_SANDBOX"), Some("1"));
        assert_eq!(
            claude.var("ANTHROPIC_BASE_URL"),
            Some("http://127.0.0.1:8080")
        );
    }
}

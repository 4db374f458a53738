//! Telegram (spec 08 §5, `iapeer connect telegram`): a bot is bound to a peer through the
//! installed `@agfpd/telegram-runtime` package's own verbs — `bot add <bot-username> --token
//! <token>` (stores the credentials under `runtimes/telegram/bots/<bot-username>/.env` and
//! checks the token with Telegram) and `interface bot <bot-username> --peer <peer>` (writes the
//! binding into the peer's profile) — and the package's always-on peers are restarted so they
//! load the credentials (the package reads its bots once, at start).
//!
//! iapeer has no HTTPS client, so it does not ask Telegram for the bot's `@username` itself:
//! the operator names it, and the package's `bot add` refuses a name that is not the token's.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::paths::Paths;

/// The runtime's name.
pub const RUNTIME: &str = "telegram";

/// The package's own program, as its manifest names it: its `selfConfig` command (a
/// `{command,args}` or a command line), else its `run` command, else `telegram-runtime` on
/// PATH. `None` when the package is not installed (no `runtimes/telegram/runtime.json`).
pub fn package_program(paths: &Paths) -> Option<PathBuf> {
    let text = std::fs::read_to_string(paths.runtime_manifest(RUNTIME)).ok()?;
    Some(program_of_manifest(&text).unwrap_or_else(|| PathBuf::from("telegram-runtime")))
}

/// The program a manifest's `selfConfig` (else `run`) names.
fn program_of_manifest(text: &str) -> Option<PathBuf> {
    let v: Value = serde_json::from_str(text).ok()?;
    let of = |d: &Value| match d {
        Value::String(s) => s.split_whitespace().next().map(String::from),
        Value::Object(o) => o.get("command")?.as_str().map(String::from),
        _ => None,
    };
    of(&v["selfConfig"])
        .or_else(|| of(&v["run"]))
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
}

/// `runtimes/telegram/bots/<bot-username>/.env`: where the package keeps a bot's credentials.
pub fn bot_env(paths: &Paths, bot: &str) -> PathBuf {
    paths
        .runtimes_dir()
        .join(RUNTIME)
        .join("bots")
        .join(bot)
        .join(".env")
}

/// A bot's `@username` as the operator typed it, bare (`@helper_bot` → `helper_bot`), when it
/// is one Telegram allows: 5 to 32 letters, digits and underscores, starting with a letter.
pub fn bot_username(raw: &str) -> Option<String> {
    let u = raw.trim().trim_start_matches('@');
    let ok = (5..=32).contains(&u.len())
        && u.starts_with(|c: char| c.is_ascii_alphabetic())
        && u.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then(|| u.to_string())
}

/// The folder a package verb runs in: the root (its files are there).
pub fn package_cwd(paths: &Paths) -> &Path {
    paths.root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_program_comes_from_its_manifest() {
        let p = |t: &str| program_of_manifest(t);
        assert_eq!(
            p(r#"{"runtime":"telegram","selfConfig":{"command":"/x/tg","args":["self-config"]}}"#),
            Some(PathBuf::from("/x/tg"))
        );
        assert_eq!(
            p(r#"{"runtime":"telegram","selfConfig":"/x/tg self-config"}"#),
            Some(PathBuf::from("/x/tg"))
        );
        assert_eq!(
            p(r#"{"runtime":"telegram","run":{"command":"/y/tg"}}"#),
            Some(PathBuf::from("/y/tg"))
        );
        assert_eq!(p(r#"{"runtime":"telegram"}"#), None);
    }

    #[test]
    fn a_bot_username_is_checked_and_made_bare() {
        assert_eq!(bot_username("@helper_bot").as_deref(), Some("helper_bot"));
        assert_eq!(bot_username("Helper2Bot").as_deref(), Some("Helper2Bot"));
        for bad in ["", "@ab", "my-bot", "1stbot", "a b c d e"] {
            assert_eq!(bot_username(bad), None, "{bad}");
        }
    }
}

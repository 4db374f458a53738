//! `connect telegram <peer>` (spec 08 §5): bind a Telegram bot to a peer through the installed
//! telegram-runtime package's own verbs (`telegram`), record `interfaces.telegram.bot_username`
//! in the profile and the registry, and restart the package's always-on peers.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use serde_json::{Map, Value};

use super::client::Client;
use super::error::fail;
use super::parse::Invocation;
use super::spec::{args, flags};
use super::{done, paths, required, usage, CliError, CliResult};
use crate::child;
use crate::paths::Paths;
use crate::profile::Profile;
use crate::protocol::call;
use crate::registry::{Registry, RegistryError, RegistryPeer};
use crate::telegram;

/// Deadline of one package verb (`bot add` asks Telegram), in seconds.
const PACKAGE_SECS: u64 = 60;

/// `connect <channel> <peer> [--token <t>] [--bot <username>]`; `telegram` is the one channel.
pub fn connect(inv: &Invocation) -> CliResult {
    let channel = required(inv, args::CHANNEL)?;
    if channel != telegram::RUNTIME {
        return Err(usage(
            inv,
            format!("unknown channel \"{channel}\"; the one channel is telegram"),
        ));
    }
    let name = required(inv, args::PEER)?;
    let paths = paths()?;
    let registry = Registry::load(&paths)?;
    let peer = registry.find(name).cloned().ok_or_else(|| {
        CliError::hinted(
            format!("peer \"{name}\" is not registered"),
            format!("create it first (iapeer create {name})"),
        )
    })?;
    let program = telegram::package_program(&paths).ok_or_else(|| {
        CliError::hinted(
            "the telegram runtime is not installed (no runtimes/telegram/runtime.json)",
            "install @agfpd/telegram-runtime first (iapeer install-runtime telegram)",
        )
    })?;
    let token = match inv.value(flags::TOKEN) {
        Some(t) if !t.trim().is_empty() => t.trim().to_string(),
        _ => ask("bot token (message @BotFather, /newbot, copy the token): ").ok_or_else(|| {
            CliError::hinted(
                "no --token and no terminal to ask on",
                "pass --token <bot-token> (create one: message @BotFather, /newbot)",
            )
        })?,
    };
    let bot_raw = match inv.value(flags::BOT) {
        Some(b) => b.to_string(),
        None => ask("the bot's @username (BotFather shows it): ").ok_or_else(|| {
            fail("pass --bot <bot-username> too: the bot's @username, which BotFather shows (the package checks it against the token)")
        })?,
    };
    let bot = telegram::bot_username(&bot_raw).ok_or_else(|| {
        fail(format!("\"{bot_raw}\" is not a bot @username (5–32 letters, digits or _, starting with a letter)"))
    })?;

    let env_file = telegram::bot_env(&paths, &bot);
    let before = std::fs::read(&env_file).ok();
    package(
        &paths,
        &program,
        &["bot", "add", &bot, "--token", &token],
        "bot add",
    )?;
    package(
        &paths,
        &program,
        &["interface", "bot", &bot, "--peer", name],
        "interface bot",
    )?;
    let entry = record_binding(&paths, &peer, &bot)?;
    let after = std::fs::read(&env_file).ok();
    let unchanged = before.is_some() && before == after;
    let restarted = if unchanged {
        Vec::new()
    } else {
        restart_telegram_peers(&paths, &registry)
    };
    let text = if unchanged {
        format!("{name}: already connected to @{bot} (same token) — nothing restarted\n")
    } else {
        format!(
            "{name}: connected to @{bot}{}\nsend the bot a first message in Telegram: a bot cannot start a chat\n",
            if restarted.is_empty() {
                " (no telegram peer running to restart; it loads the bot when it starts)".to_string()
            } else {
                format!(" — restarted {}", restarted.join(", "))
            }
        )
    };
    done(
        inv,
        &ConnectedDoc {
            peer: name,
            bot_username: &bot,
            changed: !unchanged,
            restarted: &restarted,
            interfaces: &entry.interfaces,
        },
        &text,
    )
}

/// `connect telegram --json`: `{"peer","bot_username","changed","restarted","interfaces"}`.
#[derive(Debug, serde::Serialize)]
pub struct ConnectedDoc<'a> {
    /// The human peer.
    pub peer: &'a str,
    /// The bot's @username, without the @.
    pub bot_username: &'a str,
    /// Whether the token or the binding changed (else nothing was restarted).
    pub changed: bool,
    /// The telegram sessions restarted to load the bot.
    pub restarted: &'a [String],
    /// The peer's interfaces as the registry holds them now.
    pub interfaces: &'a Option<serde_json::Map<String, serde_json::Value>>,
}

/// A line typed on the terminal, when stdin is one.
fn ask(question: &str) -> Option<String> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Some(line.trim().to_string()).filter(|l| !l.is_empty())
}

/// Run one verb of the package in the root; its words on failure.
fn package(
    paths: &Paths,
    program: &std::path::Path,
    argv: &[&str],
    what: &str,
) -> Result<(), CliError> {
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    let root = paths.root().to_string_lossy().into_owned();
    let done = child::run(
        program,
        &argv,
        telegram::package_cwd(paths),
        &[("IAPEER_ROOT", &root)],
        Duration::from_secs(PACKAGE_SECS),
    );
    if done.ok() {
        return Ok(());
    }
    Err(fail(format!(
        "telegram-runtime {what} failed ({:?}): {}",
        done.ending,
        done.tail(400)
    )))
}

/// Merge `interfaces.telegram.bot_username` into the peer's profile (the package's own keys
/// kept) and project the profile into the registry.
fn record_binding(paths: &Paths, peer: &RegistryPeer, bot: &str) -> Result<RegistryPeer, CliError> {
    let profile = Profile::update(&peer.cwd, |p| {
        let interfaces = p.interfaces.get_or_insert_with(Map::new);
        let tg = interfaces
            .entry(telegram::RUNTIME)
            .or_insert_with(|| Value::Object(Map::new()));
        if !tg.is_object() {
            *tg = Value::Object(Map::new());
        }
        tg["bot_username"] = Value::String(bot.to_string());
    })?;
    let entry = profile.to_registry_peer(&peer.cwd);
    let stored = entry.clone();
    Registry::update(paths, |r| -> Result<(), RegistryError> {
        r.upsert(stored);
        Ok(())
    })?;
    Ok(entry)
}

/// Stop and start every peer on the telegram runtime in a running daemon (they read their
/// bots only at start); the identities restarted.
fn restart_telegram_peers(paths: &Paths, registry: &Registry) -> Vec<String> {
    let Ok(mut client) = Client::connect(paths) else {
        return Vec::new();
    };
    let mut restarted = Vec::new();
    for p in registry
        .peers
        .iter()
        .filter(|p| p.declares(telegram::RUNTIME))
    {
        let personality = Some(p.personality.clone());
        let runtime = Some(telegram::RUNTIME.to_string());
        let stop = call::Stop {
            personality: personality.clone(),
            runtime: runtime.clone(),
            all: false,
            everyone: false,
        };
        if client.request(&stop, |_| {}).is_err() {
            continue;
        }
        let start = call::Start {
            personality,
            runtime,
            all: false,
        };
        if let Ok(crate::protocol::Answer::Ok(_)) = client.request(&start, |_| {}) {
            restarted.push(format!("{}-{}", telegram::RUNTIME, p.personality));
        }
    }
    restarted
}

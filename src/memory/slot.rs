//! `memory-provider.json` (spec 08 §3): written by the memory provider, only read here. A
//! missing or invalid file is the empty slot, never an error.
//!
//! ```json
//! {"provider":"iapeer-memory","package":"@agfpd/iapeer-memory","version":"1.4.0",
//!  "registeredAt":"2026-11-30T10:00:00Z","heartbeat":"/abs/memoryd.heartbeat",
//!  "provision":{"command":"/abs/bin/iapeer-memory","args":["provision-peer","--cwd","{cwd}"]},
//!  "unprovision":{"command":"/abs/bin/iapeer-memory","args":["unprovision-peer","--cwd","{cwd}"]}}
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::paths::Paths;

/// A command the provider declares: an absolute program and its arguments (placeholders
/// still in them).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProviderCommand {
    /// Absolute path of the program (a relative one makes the block invalid: the daemon
    /// and a service job run with a minimal `PATH`).
    pub command: PathBuf,
    /// The arguments, each a string.
    pub args: Vec<String>,
}

/// A claimed memory slot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MemorySlot {
    /// The provider's name, e.g. `iapeer-memory`.
    pub provider: String,
    /// Its npm package, e.g. `@agfpd/iapeer-memory`.
    pub package: String,
    /// Its version as the provider wrote it.
    pub version: String,
    /// When it claimed the slot (text as written; may be empty).
    #[serde(rename = "registeredAt")]
    pub registered_at: String,
    /// A file whose modification time the provider's daemon refreshes while it runs.
    pub heartbeat: Option<PathBuf>,
    /// Run at a peer's birth.
    pub provision: Option<ProviderCommand>,
    /// Run at a peer's removal.
    pub unprovision: Option<ProviderCommand>,
}

/// The slot described by `text`, or `None` (the empty slot) when it is not a JSON object
/// whose `provider`, `package` and `version` are non-empty strings. An invalid `provision`
/// or `unprovision` block (command not an absolute path, args not all strings) is ignored.
pub fn parse_slot(text: &str) -> Option<MemorySlot> {
    let v: Value = serde_json::from_str(text).ok()?;
    let text_field = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    Some(MemorySlot {
        provider: text_field("provider")?,
        package: text_field("package")?,
        version: text_field("version")?,
        registered_at: text_field("registeredAt").unwrap_or_default(),
        heartbeat: text_field("heartbeat").map(PathBuf::from),
        provision: v.get("provision").and_then(command_block),
        unprovision: v.get("unprovision").and_then(command_block),
    })
}

fn command_block(v: &Value) -> Option<ProviderCommand> {
    let command = Path::new(v.get("command")?.as_str()?.trim());
    if !command.is_absolute() {
        return None;
    }
    let args = v
        .get("args")?
        .as_array()?
        .iter()
        .map(|a| a.as_str().map(String::from))
        .collect::<Option<Vec<_>>>()?;
    Some(ProviderCommand {
        command: command.to_path_buf(),
        args,
    })
}

/// The host's slot: `None` when `<root>/memory-provider.json` is missing or invalid.
pub fn read_slot(paths: &Paths) -> Option<MemorySlot> {
    parse_slot(&std::fs::read_to_string(paths.memory_provider()).ok()?)
}

/// What the heartbeat file says about the provider's daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// The slot declares no heartbeat file.
    NotDeclared,
    /// Declared, but the file is not there: the provider removes it when its daemon stops.
    Missing,
    /// Last refreshed this long ago.
    Age(Duration),
}

impl Heartbeat {
    /// Read the heartbeat of `slot` at `now`. A file dated in the future counts as fresh.
    pub fn of(slot: &MemorySlot, now: SystemTime) -> Heartbeat {
        let Some(file) = &slot.heartbeat else {
            return Heartbeat::NotDeclared;
        };
        match std::fs::metadata(file).and_then(|m| m.modified()) {
            Ok(t) => Heartbeat::Age(now.duration_since(t).unwrap_or_default()),
            Err(_) => Heartbeat::Missing,
        }
    }

    /// Seconds since the last refresh, when there is one.
    pub fn age_secs(self) -> Option<u64> {
        match self {
            Heartbeat::Age(d) => Some(d.as_secs()),
            _ => None,
        }
    }
}

/// The `memory:` line of `iapeer status` (spec 08 §1): `memory: none`, `memory: <provider>
/// <version>`, `… (heartbeat <n>s ago)`, or `… (heartbeat missing: its daemon is not
/// running)`. The core only reports the heartbeat; reviving the daemon is the provider's job.
pub fn status_line(slot: Option<&MemorySlot>, heartbeat: Heartbeat) -> String {
    let Some(slot) = slot else {
        return "memory: none".into();
    };
    let hb = match heartbeat {
        Heartbeat::NotDeclared => String::new(),
        Heartbeat::Missing => format!(
            " (heartbeat missing: its daemon is not running — see {} status)",
            slot.provider
        ),
        Heartbeat::Age(d) => format!(" (heartbeat {}s ago)", d.as_secs()),
    };
    // The provider's file is written by its package: its words are shown, never acted on.
    crate::visible::line(&format!("memory: {} {}{hb}", slot.provider, slot.version)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"{"provider":"iapeer-memory","package":"@agfpd/iapeer-memory","version":"1.4.0",
        "registeredAt":"2026-11-30T10:00:00Z","heartbeat":"/x/hb",
        "provision":{"command":"/x/bin/mem","args":["provision-peer","--cwd","{cwd}"]},
        "unprovision":{"command":"relative/mem","args":[]}}"#;

    #[test]
    fn a_full_slot_parses_and_an_invalid_block_is_dropped() {
        let s = parse_slot(FULL).unwrap();
        assert_eq!(
            (s.provider.as_str(), s.package.as_str(), s.version.as_str()),
            ("iapeer-memory", "@agfpd/iapeer-memory", "1.4.0")
        );
        assert_eq!(s.heartbeat.as_deref(), Some(Path::new("/x/hb")));
        let p = s.provision.unwrap();
        assert_eq!(p.command, Path::new("/x/bin/mem"));
        assert_eq!(p.args, ["provision-peer", "--cwd", "{cwd}"]);
        assert_eq!(s.unprovision, None, "a relative command is not a command");
    }

    #[test]
    fn a_slot_without_its_three_names_is_empty() {
        for text in [
            "",
            "[]",
            r#"{"provider":"m","version":"1"}"#,
            r#"{"provider":"m","package":"","version":"1"}"#,
            r#"{"provider":"m","package":"p","version":2}"#,
        ] {
            assert_eq!(parse_slot(text), None, "{text}");
        }
        let args_not_strings = r#"{"provider":"m","package":"p","version":"1",
            "provision":{"command":"/m","args":["a",1]}}"#;
        assert_eq!(parse_slot(args_not_strings).unwrap().provision, None);
    }

    #[test]
    fn the_status_line_reports_the_heartbeat_without_acting_on_it() {
        let s = parse_slot(FULL).unwrap();
        assert_eq!(status_line(None, Heartbeat::NotDeclared), "memory: none");
        assert_eq!(
            status_line(Some(&s), Heartbeat::NotDeclared),
            "memory: iapeer-memory 1.4.0"
        );
        assert_eq!(
            status_line(Some(&s), Heartbeat::Age(Duration::from_millis(12_900))),
            "memory: iapeer-memory 1.4.0 (heartbeat 12s ago)"
        );
        assert!(status_line(Some(&s), Heartbeat::Missing).starts_with(
            "memory: iapeer-memory 1.4.0 (heartbeat missing: its daemon is not running"
        ));
    }

    #[test]
    fn a_heartbeat_file_is_read_by_its_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let hb = dir.path().join("hb");
        let mut s = parse_slot(FULL).unwrap();
        s.heartbeat = Some(hb.clone());
        assert_eq!(Heartbeat::of(&s, SystemTime::now()), Heartbeat::Missing);
        std::fs::write(&hb, "").unwrap();
        let later = SystemTime::now() + Duration::from_secs(30);
        let age = Heartbeat::of(&s, later).age_secs().unwrap();
        assert!((29..=31).contains(&age), "{age}");
        s.heartbeat = None;
        assert_eq!(Heartbeat::of(&s, later), Heartbeat::NotDeclared);
    }
}

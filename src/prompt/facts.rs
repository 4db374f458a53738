//! Facts about the host shown in the identity block of the system prompt (spec 06, layer 1).

use std::path::Path;
use std::process::Command;

/// The host facts of the identity block. Every field is plain text, already in the form the
/// prompt shows (`platform` is `darwin` or `linux`, `today` is `YYYY-MM-DD`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// `darwin` on macOS, `linux` elsewhere.
    pub platform: String,
    /// `sw_vers -productVersion` (macOS) or `VERSION_ID` of `/etc/os-release`; `unknown`.
    pub os_version: String,
    /// The login name: `$USER`, else the name of the current uid, else `unknown`.
    pub user: String,
    /// The short host name (up to the first dot), else `unknown`.
    pub hostname: String,
    /// The local calendar date, `YYYY-MM-DD`.
    pub today: String,
}

/// Shown when a fact cannot be found out.
const UNKNOWN: &str = "unknown";

impl HostFacts {
    /// Find out the facts of this host now. Never fails: a fact that cannot be read is
    /// `unknown`. Runs `sw_vers` on macOS (one short child process).
    pub fn detect() -> HostFacts {
        HostFacts {
            platform: platform().to_string(),
            os_version: os_version().unwrap_or_else(|| UNKNOWN.to_string()),
            user: user().unwrap_or_else(|| UNKNOWN.to_string()),
            hostname: hostname().unwrap_or_else(|| UNKNOWN.to_string()),
            today: jiff::Zoned::now().date().strftime("%Y-%m-%d").to_string(),
        }
    }
}

fn platform() -> &'static str {
    if cfg!(target_os = "macos") {
        "darwin"
    } else {
        "linux"
    }
}

fn os_version() -> Option<String> {
    if cfg!(target_os = "macos") {
        let out = Command::new("sw_vers")
            .arg("-productVersion")
            .output()
            .ok()?;
        let v = String::from_utf8(out.stdout).ok()?;
        let v = v.trim();
        (out.status.success() && !v.is_empty()).then(|| v.to_string())
    } else {
        let text = std::fs::read_to_string(Path::new("/etc/os-release")).ok()?;
        os_release_version_id(&text)
    }
}

/// The `VERSION_ID` value of an `os-release` file's text, without its quotes; `None` when the
/// key is missing or empty.
pub fn os_release_version_id(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("VERSION_ID="))
        .map(|v| {
            let v = v.trim();
            let unquoted = ['"', '\'']
                .iter()
                .find_map(|q| v.strip_prefix(*q).and_then(|r| r.strip_suffix(*q)));
            unquoted.unwrap_or(v).to_string()
        })
        .next_back()
        .filter(|v| !v.is_empty())
}

fn user() -> Option<String> {
    if let Some(u) = std::env::var("USER").ok().filter(|u| !u.is_empty()) {
        return Some(u);
    }
    let uid = nix::unistd::getuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .filter(|n| !n.is_empty())
}

fn hostname() -> Option<String> {
    let name = nix::unistd::gethostname().ok()?;
    short_hostname(&name.to_string_lossy())
}

/// The short form of a host name: everything before the first dot; `None` when empty.
pub fn short_hostname(name: &str) -> Option<String> {
    let short = name.trim().split('.').next().unwrap_or("");
    (!short.is_empty()).then(|| short.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_id_is_unquoted() {
        let text = "NAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n";
        assert_eq!(os_release_version_id(text).as_deref(), Some("12"));
        assert_eq!(
            os_release_version_id("VERSION_ID=22.04\n").as_deref(),
            Some("22.04")
        );
        assert_eq!(
            os_release_version_id("VERSION_ID='3.19'").as_deref(),
            Some("3.19")
        );
        assert_eq!(os_release_version_id("ID=arch\n"), None);
        assert_eq!(os_release_version_id("VERSION_ID=\"\"\n"), None);
    }

    #[test]
    fn hostname_is_cut_at_the_first_dot() {
        assert_eq!(short_hostname("box.local").as_deref(), Some("box"));
        assert_eq!(short_hostname("box").as_deref(), Some("box"));
        assert_eq!(short_hostname(".local"), None);
        assert_eq!(short_hostname(""), None);
    }

    #[test]
    fn detect_gives_well_formed_facts() {
        let f = HostFacts::detect();
        assert!(f.platform == "darwin" || f.platform == "linux");
        assert_eq!(f.today.len(), 10);
        assert!(jiff::civil::Date::strptime("%Y-%m-%d", &f.today).is_ok());
        assert!(!f.user.is_empty() && !f.hostname.contains('.'));
    }
}

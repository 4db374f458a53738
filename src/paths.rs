//! The storage layout (spec 01 §1–§2): the only place where iapeer spells a path.
//!
//! Everything lives under one **root**: `$IAPEER_ROOT`, else `$HOME/.iapeer`. A peer's own
//! files live in its working folder under `<cwd>/.iapeer/`.

use std::path::{Path, PathBuf};

/// File name of the registry inside the root.
pub const REGISTRY_FILE: &str = "peers-profiles.json";

/// Why the root could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    /// Neither `IAPEER_ROOT` nor `HOME` is set (or they are empty).
    #[error("cannot find the iapeer root: set IAPEER_ROOT or HOME to a folder")]
    NoRoot,
}

/// Accessors of the files and folders at fixed names in one folder of the layout:
/// `under! { base: name => "a" / "b"; … }` makes each `pub fn name(&self) -> PathBuf`, the
/// folder `self.base()` joined with `a`, then `b` (`base`: `root`, or another accessor).
macro_rules! under {
    ($base:ident: $($(#[$doc:meta])* $name:ident => $($seg:tt)/+;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> PathBuf {
                self.$base()$(.join($seg))+
            }
        )*
    };
}

/// The resolved storage root plus the control-socket override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    root: PathBuf,
    socket_override: Option<PathBuf>,
}

impl Paths {
    /// Resolve from the environment: `IAPEER_ROOT`, else `$HOME/.iapeer`;
    /// `IAPEER_DAEMON_SOCKET` overrides the control socket path.
    ///
    /// Errors: [`PathsError::NoRoot`] when neither variable is usable.
    pub fn from_env() -> Result<Paths, PathsError> {
        let root = match std::env::var_os("IAPEER_ROOT").filter(|v| !v.is_empty()) {
            Some(r) => absolutize(PathBuf::from(r)),
            None => home_dir().ok_or(PathsError::NoRoot)?.join(".iapeer"),
        };
        let socket_override = std::env::var_os("IAPEER_DAEMON_SOCKET")
            .filter(|v| !v.is_empty())
            .map(|s| absolutize(PathBuf::from(s)));
        Ok(Paths {
            root,
            socket_override,
        })
    }

    /// A layout rooted at `root` with the default socket path (tests, the demo).
    pub fn at(root: impl Into<PathBuf>) -> Paths {
        Paths {
            root: root.into(),
            socket_override: None,
        }
    }

    /// Tests: a layout rooted in a new temporary folder, which lives as long as the guard.
    #[cfg(test)]
    pub(crate) fn temp() -> (tempfile::TempDir, Paths) {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::at(dir.path());
        (dir, paths)
    }

    /// The root folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    under! { root:
        /// `<root>/IAPEER.md`: the host doctrine (system prompt layer 3, shared half).
        host_doctrine => "IAPEER.md";
        /// `<root>/fragments/`: host prompt fragments (layer 6).
        host_fragments => "fragments";
        /// `<root>/peers-profiles.json`: the registry.
        registry => REGISTRY_FILE;
        /// `<root>/peers-profiles.lock`: the registry writers' lock file.
        registry_lock => "peers-profiles.lock";
        /// `<root>/memory-provider.json`.
        memory_provider => "memory-provider.json";
        /// `<root>/peers/`: parent of the default working folders made by `create`.
        peers_dir => "peers";
        /// `<root>/docs/`: reference docs, one folder per package.
        docs_dir => "docs";
        /// `<root>/runtimes/`: installed runtime packages.
        runtimes_dir => "runtimes";
        /// `<root>/state/iapeer/`: the daemon's state folder.
        state_dir => "state" / "iapeer";
        /// `<root>/state/lifecycle/`: per-identity marker files (spec 01 §7).
        lifecycle_dir => "state" / "lifecycle";
        /// `<root>/logs/iapeer/`: event logs and the daemon log.
        logs_dir => "logs" / "iapeer";
        /// `<root>/logs/lifecycle/`: pane logs.
        pane_logs_dir => "logs" / "lifecycle";
        /// `<root>/cache/iapeer/`: rebuildable data only.
        cache_dir => "cache" / "iapeer";
    }

    under! { state_dir:
        /// `<root>/state/iapeer/message-ids/`: the message ids begun per recipient
        /// (`msgids`).
        message_ids_dir => "message-ids";
        /// `<root>/state/iapeer/router.json`: the discovery file.
        router_json => "router.json";
        /// `<root>/state/iapeer/ui.key`: the web page's secret (`iapeer ui`), written 0600 by the
        /// daemon at start and removed when it stops.
        ui_key => "ui.key";
        /// `<root>/state/iapeer/ui-open.html`: the page that `iapeer ui` hands the browser opener
        /// (0600), redirecting to the link, so the link's key is never on a command line where
        /// `ps` shows it to every user.
        ui_open => "ui-open.html";
        /// `<root>/state/iapeer/fleet.token`: the secret the fleet API asks for (issue 26 item 1;
        /// `Authorization: Bearer <it>`), one line, written 0600 by the daemon at its first start
        /// and kept across restarts (`daemon::fleet::token`). Unused while `IAPEER_BEARER_TOKEN` is
        /// set.
        fleet_token => "fleet.token";
        /// `<root>/state/iapeer/federation.json`: the Redis URL (credentials included) and this
        /// host's name, written 0600 by `iapeer federation join` (`federation::Joined`).
        federation => "federation.json";
        /// `<root>/state/iapeer/federation-link.json`: what the daemon's federation link last saw
        /// (`federation::link::LinkReport`; no secret), written 0600 by the link thread and
        /// removed when the daemon stops or the root is not joined.
        federation_link => "federation-link.json";
        /// `<root>/state/iapeer/federation-peers.json`: the other hosts' peers as the daemon's
        /// federation link last saw them (`federation::peers::RemotePeers`; no secret), written
        /// 0600 by the link thread when they change and removed when the daemon stops or the root
        /// is not joined.
        federation_peers => "federation-peers.json";
        /// `<root>/state/iapeer/federation-attachments/`: the attachments of messages from other
        /// hosts while they are routed (one folder per message, removed once its outcome is known;
        /// `daemon::federation::attach`).
        federation_attachments => "federation-attachments";
        /// `<root>/state/iapeer/inbox/`: the durable inboxes of peers on the `human` runtime.
        inbox_dir => "inbox";
    }

    under! { logs_dir:
        /// `<root>/logs/iapeer/lifecycle.log`.
        lifecycle_log => "lifecycle.log";
        /// `<root>/logs/iapeer/delivery.log`.
        delivery_log => "delivery.log";
        /// `<root>/logs/iapeer/exits.log`.
        exits_log => "exits.log";
        /// `<root>/logs/iapeer/daemon.log`.
        daemon_log => "daemon.log";
    }

    /// `<root>/runtimes/<rt>/runtime.json`: the manifest of an installed runtime.
    pub fn runtime_manifest(&self, runtime: &str) -> PathBuf {
        self.runtimes_dir().join(runtime).join("runtime.json")
    }

    /// The control socket: `IAPEER_DAEMON_SOCKET`, else `<root>/state/iapeer/router.sock`.
    pub fn socket(&self) -> PathBuf {
        self.socket_override
            .clone()
            .unwrap_or_else(|| self.state_dir().join("router.sock"))
    }

    /// `<root>/state/iapeer/attachments/<recipient>/`: a recipient's attachment inbox.
    pub fn attachments_dir(&self, recipient: &str) -> PathBuf {
        self.state_dir().join("attachments").join(recipient)
    }

    /// `<root>/state/iapeer/inbox/<personality>.jsonl`: one JSON record per message to that
    /// human peer, append-only (written by `iapeer human-inbox`, read by `iapeer inbox`).
    pub fn inbox(&self, personality: &str) -> PathBuf {
        self.inbox_dir().join(format!("{personality}.jsonl"))
    }

    /// `<root>/state/iapeer/inbox/<personality>.read`: how many records of that inbox have
    /// been shown (`{"read":<n>}`, written atomically).
    pub fn inbox_read_mark(&self, personality: &str) -> PathBuf {
        self.inbox_dir().join(format!("{personality}.read"))
    }

    /// `<root>/state/lifecycle/<identity><suffix>`, e.g. `marker("echo-bob", ".stopped")`.
    pub fn marker(&self, identity: &str, suffix: &str) -> PathBuf {
        self.lifecycle_dir().join(format!("{identity}{suffix}"))
    }

    /// `<root>/logs/lifecycle/<identity>.log`: raw output of that identity's sessions.
    pub fn pane_log(&self, identity: &str) -> PathBuf {
        self.pane_logs_dir().join(format!("{identity}.log"))
    }
}

/// Paths inside a peer's working folder (`<cwd>/.iapeer/…`).
pub mod peer {
    use std::path::{Path, PathBuf};

    /// `<cwd>/.iapeer/`.
    pub fn dir(cwd: &Path) -> PathBuf {
        cwd.join(".iapeer")
    }

    /// `<cwd>/.iapeer/peer-profile.json`: the profile, source of truth about the peer.
    pub fn profile(cwd: &Path) -> PathBuf {
        dir(cwd).join("peer-profile.json")
    }

    /// `<cwd>/.iapeer/peer-profile.removed.json`: where `remove` sets a peer's profile aside
    /// (the folder is kept; `init` in that folder restores it).
    pub fn removed_profile(cwd: &Path) -> PathBuf {
        dir(cwd).join("peer-profile.removed.json")
    }

    /// `<cwd>/.iapeer/IAPEER.md`: the personal doctrine.
    pub fn doctrine(cwd: &Path) -> PathBuf {
        dir(cwd).join("IAPEER.md")
    }

    /// `<cwd>/.iapeer/fragments/`.
    pub fn fragments(cwd: &Path) -> PathBuf {
        dir(cwd).join("fragments")
    }

    /// `<cwd>/.iapeer/runtimes/<runtime>/launch.env`.
    pub fn launch_env(cwd: &Path, runtime: &str) -> PathBuf {
        dir(cwd).join("runtimes").join(runtime).join("launch.env")
    }
}

/// `$HOME`, when set and non-empty.
pub fn home_dir() -> Option<PathBuf> {
    env_dir("HOME")
}

/// The folder the environment variable `var` names, when set and non-empty.
pub fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `$<var>` ([`env_dir`]), else `~/<dot_dir>`: where a CLI keeps its config, e.g.
/// (`CLAUDE_CONFIG_DIR`, `.claude`) or (`CODEX_HOME`, `.codex`).
pub fn env_or_home_dir(var: &str, dot_dir: &str) -> Option<PathBuf> {
    env_dir(var).or_else(|| Some(home_dir()?.join(dot_dir)))
}

/// Show `path` with the home prefix written as `~` (used in prompt path markers, spec 06).
pub fn tilde(path: &Path, home: Option<&Path>) -> String {
    if let Some(home) = home {
        if let Ok(rest) = path.strip_prefix(home) {
            if rest.as_os_str().is_empty() {
                return "~".to_string();
            }
            return format!("~/{}", rest.display());
        }
    }
    path.display().to_string()
}

fn absolutize(p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        p
    } else {
        std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_under_the_root() {
        let p = Paths::at("/r");
        assert_eq!(p.registry(), Path::new("/r/peers-profiles.json"));
        assert_eq!(p.socket(), Path::new("/r/state/iapeer/router.sock"));
        assert_eq!(p.state_dir(), Path::new("/r/state/iapeer"));
        assert_eq!(p.fleet_token(), Path::new("/r/state/iapeer/fleet.token"));
        assert_eq!(p.daemon_log(), Path::new("/r/logs/iapeer/daemon.log"));
        assert_eq!(
            p.marker("echo-bob", ".stopped"),
            Path::new("/r/state/lifecycle/echo-bob.stopped")
        );
        assert_eq!(
            p.pane_log("echo-bob"),
            Path::new("/r/logs/lifecycle/echo-bob.log")
        );
        assert_eq!(
            peer::launch_env(Path::new("/w/bob"), "claude"),
            Path::new("/w/bob/.iapeer/runtimes/claude/launch.env")
        );
    }

    #[test]
    fn tilde_replaces_only_a_real_home_prefix() {
        let home = Path::new("/home/me");
        assert_eq!(
            tilde(Path::new("/home/me/.iapeer/IAPEER.md"), Some(home)),
            "~/.iapeer/IAPEER.md"
        );
        assert_eq!(tilde(Path::new("/home/meow/x"), Some(home)), "/home/meow/x");
        assert_eq!(tilde(Path::new("/srv/x"), None), "/srv/x");
    }
}

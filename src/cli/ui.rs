//! `iapeer ui [--print] [--json]` (issue 10 item 5): the link to the running daemon's web page
//! (`/ui/?k=<key>`, [`crate::daemon::ui`]), opened in a browser when stdout is a terminal and
//! an opener (`xdg-open`, `open`) is installed, else printed.
//!
//! The opener never gets the link itself: every user can read a process's command line
//! (`ps`, `/proc/<pid>/cmdline`), and another user who read the key there first would trade
//! it for the page's cookie. It gets a file only this user can read,
//! `<root>/state/iapeer/ui-open.html` (0600), that sends the browser on to the link (as
//! Jupyter opens its token links).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::client::Client;
use super::parse::Invocation;
use super::spec::flags;
use super::{done, paths, CliError, CliResult};
use crate::fsutil::MODE_PRIVATE;
use crate::protocol::{Answer, Request, StatusReply};

/// Programs that open a link in the desktop's browser, tried in order.
const OPENERS: &[&str] = &["xdg-open", "open"];

/// Run `iapeer ui`.
pub fn run(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let status = match Client::connect(&paths)?.request::<StatusReply>(&Request::Status, |_| {})? {
        Answer::Ok(s) => s,
        Answer::Failed(f) => return Err(CliError::Refused(f)),
    };
    let port = port_of(&status.tcp).ok_or_else(|| {
        CliError::failed(format!(
            "the daemon's HTTP address {:?} names no port; restart it: iapeer shutdown && iapeer \
             daemon --detach",
            status.tcp
        ))
    })?;
    let key_file = paths.ui_key();
    let key = read_key(&key_file)?;
    let url = crate::daemon::ui::link(port, &key);
    let wants_open = !inv.flag(flags::PRINT) && std::io::stdout().is_terminal();
    let opened = wants_open && open(&paths.ui_open(), &url);
    let text = if opened {
        format!("opened the team's page in your browser: {url}\n")
    } else {
        if wants_open {
            eprintln!(
                "iapeer ui: no browser opener ({}) found: open this link yourself",
                OPENERS.join(", ")
            );
        }
        format!("{url}\n")
    };
    done(inv, &UiDoc { url, opened }, &text)
}

/// `ui --json`: `{"ok":true,"url":…,"opened":…}` (the man page names the fields).
#[derive(Debug, serde::Serialize)]
pub struct UiDoc {
    /// The page's link, with its key.
    pub url: String,
    /// Whether a browser was asked to open it.
    pub opened: bool,
}

/// The port of the daemon's MCP address `http://127.0.0.1:<port>/mcp`.
fn port_of(tcp: &str) -> Option<u16> {
    let rest = tcp.strip_prefix("http://")?;
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

/// The page's key from `ui.key`.
///
/// Errors: the file is missing or empty (a daemon that serves no page: older, or it could not
/// write the key), or unreadable.
fn read_key(file: &Path) -> Result<String, CliError> {
    let missing = |why: String| {
        CliError::failed(format!(
            "the running daemon serves no page: {why} (a daemon older than this iapeer, or one \
             that could not make the key: see its daemon.log); restart it: iapeer shutdown && \
             iapeer daemon --detach"
        ))
    };
    match std::fs::read_to_string(file) {
        Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_string()),
        Ok(_) => Err(missing(format!("its key file {} is empty", file.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(missing(format!("there is no key file {}", file.display())))
        }
        Err(e) => Err(CliError::failed(format!(
            "cannot read the page's key {}: {e}",
            file.display()
        ))),
    }
}

/// Open `url` with the first opener on `PATH` through the redirect page `page` ([`redirect`],
/// written 0600); true when one was started. It runs on its own (stdio closed); its outcome is
/// the desktop's. Without an opener, or when the page cannot be written, nothing is started.
fn open(page: &Path, url: &str) -> bool {
    let Some(opener) = OPENERS.iter().find_map(|o| on_path(o)) else {
        return false;
    };
    if let Err(e) = crate::fsutil::write_atomic(page, redirect(url).as_bytes(), MODE_PRIVATE) {
        eprintln!("iapeer ui: cannot write {}: {e}", page.display());
        return false;
    }
    Command::new(opener)
        .arg(page)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .is_ok()
}

/// A page that sends the browser on to `url` at once (a link to follow by hand too), with no
/// referrer. `url` is the daemon's link: ASCII letters, digits and `:/.?=`, nothing to escape.
fn redirect(url: &str) -> String {
    format!(
        "<!doctype html>\n<meta charset=utf-8>\n<meta name=referrer content=no-referrer>\n\
         <meta http-equiv=refresh content=\"0;url={url}\">\n<title>iapeer</title>\n\
         <p><a href=\"{url}\">Open the team's page</a></p>\n"
    )
}

/// The executable `name` in a folder of `PATH`, if any.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_comes_from_the_mcp_address() {
        assert_eq!(port_of("http://127.0.0.1:8765/mcp"), Some(8765));
        assert_eq!(port_of("http://127.0.0.1/mcp"), None);
        assert_eq!(port_of("nonsense"), None);
    }

    #[test]
    fn the_redirect_page_sends_the_browser_to_the_link() {
        let page = redirect("http://127.0.0.1:8765/ui/?k=abc");
        assert!(
            page.contains(
                r#"<meta http-equiv=refresh content="0;url=http://127.0.0.1:8765/ui/?k=abc">"#
            ),
            "{page}"
        );
        assert!(page.contains("no-referrer"), "{page}");
    }

    #[test]
    fn a_missing_key_says_to_restart_the_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ui.key");
        let Err(CliError::Failed(text)) = read_key(&file) else {
            panic!("a missing key is refused");
        };
        let text = text.to_string();
        assert!(text.contains("iapeer shutdown"), "{text}");
        std::fs::write(&file, "abc\n").unwrap();
        assert_eq!(read_key(&file).unwrap(), "abc");
    }
}

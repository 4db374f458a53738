//! `iapeer install` (spec 08 §1): runs [`crate::host::install`] and reports each step in one
//! line; a service file without iapeer's mark is the user's and is left as it is (said, with
//! how to get iapeer's version back).

use std::path::{Path, PathBuf};

use super::parse::Invocation;
use super::{done, paths, CliResult};
use crate::host::install::{install, InstallEnv, ServiceOutcome};
use crate::host::service::{WriteDecision, OWNERSHIP_MARK};

/// `install --json`: `{"root","doctrine","docs_written","service"}`, `service` null when no
/// service file was written or found.
#[derive(Debug, serde::Serialize)]
pub struct InstalledDoc<'a> {
    /// The iapeer root.
    pub root: &'a Path,
    /// `created` or `kept`.
    pub doctrine: &'static str,
    /// The reference docs written (none when up to date).
    pub docs_written: &'a [PathBuf],
    /// The service file.
    pub service: Option<ServiceDoc<'a>>,
}

/// `install --json`'s `"service"`.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum ServiceDoc<'a> {
    /// iapeer's own file: `{"manager","file","state":"written"|"updated"|"unchanged","load"}`.
    Written {
        /// `launchd` or `systemd`.
        manager: &'static str,
        /// The service file.
        file: &'a Path,
        /// What install did to it.
        state: &'static str,
        /// The command that loads it.
        load: String,
    },
    /// A file without iapeer's mark: `{"manager","file","state":"yours","restore"}`.
    Foreign {
        /// `launchd` or `systemd`.
        manager: &'static str,
        /// The service file.
        file: &'a Path,
        /// `yours`.
        state: &'static str,
        /// How to get iapeer's version back.
        restore: &'static str,
    },
}

/// Run `install`. Exit 1 when a step fails. A service file without the ownership mark (one
/// the user took over by deleting the mark, or wrote) is left alone and said so: not a
/// failure, so `scripts/install.sh` goes through.
pub fn run(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let env = InstallEnv::from_process(&paths)?;
    let report = install(&paths, &env)?;
    let mut out = format!("root: {} (ready)\n", paths.root().display());
    out.push_str(&format!(
        "doctrine: {} ({})\n",
        paths.host_doctrine().display(),
        if report.doctrine_created {
            "created"
        } else {
            "kept"
        }
    ));
    out.push_str(&format!(
        "docs: {}/ ({})\n",
        crate::host::docs::dir(&paths).display(),
        match report.docs_written.len() {
            0 => "up to date".to_string(),
            n => format!("{n} written"),
        }
    ));
    let mut service = None;
    match &report.service {
        ServiceOutcome::Written {
            manager,
            file,
            decision,
        } => {
            let what = match decision {
                WriteDecision::Create => "written",
                WriteDecision::Update => "updated",
                _ => "unchanged",
            };
            service = Some(ServiceDoc::Written {
                manager: manager.name(),
                file,
                state: what,
                load: manager.load_hint(file),
            });
            out.push_str(&format!(
                "service: {} {} ({what}, not loaded)\n  load it with: iapeer onboard (or by hand: {})\n",
                manager.name(),
                file.display(),
                manager.load_hint(file)
            ));
        }
        ServiceOutcome::NoManager => {
            out.push_str(&format!(
                "service: none (no service manager available: this is not macOS and no systemd user \
                 manager runs)\n  start it with: iapeer onboard (it runs {} daemon --detach)\n",
                env.spec.bin.display()
            ));
        }
        ServiceOutcome::Foreign { manager, file } => {
            let back = "to get iapeer's version back: move it aside (or delete it), then run iapeer install";
            service = Some(ServiceDoc::Foreign {
                manager: manager.name(),
                file,
                state: "yours",
                restore: back,
            });
            out.push_str(&format!(
                "service: {} {} (yours: it has no {OWNERSHIP_MARK} mark, so install left it as it is)\n  {back}\n",
                manager.name(),
                file.display(),
            ));
        }
    }
    let doc = InstalledDoc {
        root: paths.root(),
        doctrine: if report.doctrine_created {
            "created"
        } else {
            "kept"
        },
        docs_written: &report.docs_written,
        service,
    };
    done(inv, &doc, &out)
}

//! `iapeer install` (spec 08 §1): runs [`crate::host::install`] and reports each step in one
//! line; a service file without iapeer's mark is the user's and is left as it is (said, with
//! how to get iapeer's version back).

use super::parse::Invocation;
use super::{done, paths, CliError, CliResult};
use crate::host::install::{install, InstallEnv, ServiceOutcome};
use crate::host::service::{WriteDecision, OWNERSHIP_MARK};

/// Run `install`. Exit 1 when a step fails. A service file without the ownership mark (one
/// the user took over by deleting the mark, or wrote) is left alone and said so: not a
/// failure, so `scripts/install.sh` goes through.
pub fn run(inv: &Invocation) -> CliResult {
    let paths = paths()?;
    let env = InstallEnv::from_process(&paths).map_err(|e| CliError::Failed(e.to_string()))?;
    let report = install(&paths, &env).map_err(|e| CliError::Failed(e.to_string()))?;
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
    let mut service = serde_json::Value::Null;
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
            service = serde_json::json!({
                "manager": manager.name(),
                "file": file,
                "state": what,
                "load": manager.load_hint(file),
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
            service = serde_json::json!({
                "manager": manager.name(),
                "file": file,
                "state": "yours",
                "restore": back,
            });
            out.push_str(&format!(
                "service: {} {} (yours: it has no {OWNERSHIP_MARK} mark, so install left it as it is)\n  {back}\n",
                manager.name(),
                file.display(),
            ));
        }
    }
    let doc = serde_json::json!({
        "root": paths.root(),
        "doctrine": if report.doctrine_created { "created" } else { "kept" },
        "docs_written": report.docs_written,
        "service": service,
    });
    done(inv, &doc, &out)
}

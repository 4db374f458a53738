//! The service definitions (spec 08 §1) as pure functions: the systemd user unit, the launchd
//! agent plist, which service manager to use, and whether an existing file may be replaced.
//! Both files are generated on every OS (and tested on Linux); only [`choose`] looks at the OS.

use std::path::{Path, PathBuf};

/// The ownership mark: a comment line in the unit, a key in the plist. A file without it was
/// not written by iapeer and is never overwritten.
pub const OWNERSHIP_MARK: &str = "com.iapeer.managed";

/// The launchd label, also the plist's file name stem.
pub const LAUNCHD_LABEL: &str = "com.agfpd.iapeer";

/// The systemd unit's file name.
pub const SYSTEMD_UNIT: &str = "iapeer.service";

/// A service manager iapeer can write a definition for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    /// systemd's per-user manager (Linux): `~/.config/systemd/user/iapeer.service`.
    Systemd,
    /// launchd (macOS): `~/Library/LaunchAgents/com.agfpd.iapeer.plist`.
    Launchd,
}

impl Manager {
    /// The name `status` and `install` print: `systemd` or `launchd`.
    pub fn name(self) -> &'static str {
        match self {
            Manager::Systemd => "systemd",
            Manager::Launchd => "launchd",
        }
    }

    /// The file name of the definition inside its folder.
    pub fn file_name(self) -> String {
        match self {
            Manager::Systemd => SYSTEMD_UNIT.to_string(),
            Manager::Launchd => format!("{LAUNCHD_LABEL}.plist"),
        }
    }

    /// The definition's text for `spec`.
    pub fn render(self, spec: &ServiceSpec) -> String {
        match self {
            Manager::Systemd => systemd_unit(spec),
            Manager::Launchd => launchd_plist(spec),
        }
    }

    /// The command that loads the written definition (printed, never run, by `install`).
    pub fn load_hint(self, file: &Path) -> String {
        match self {
            Manager::Systemd => {
                "systemctl --user daemon-reload && systemctl --user enable --now iapeer".into()
            }
            Manager::Launchd => format!("launchctl bootstrap gui/$(id -u) {}", file.display()),
        }
    }
}

/// Which service manager to use: macOS → launchd; Linux (any other OS) → systemd when a user
/// manager runs or `IAPEER_SYSTEMD_DIR` names the folder explicitly; else none.
///
/// `os` is `std::env::consts::OS`; `systemd_runs` whether `/run/systemd/system` exists.
pub fn choose(os: &str, systemd_dir_set: bool, systemd_runs: bool) -> Option<Manager> {
    if os == "macos" {
        Some(Manager::Launchd)
    } else if systemd_dir_set || systemd_runs {
        Some(Manager::Systemd)
    } else {
        None
    }
}

/// What the service runs, and with which environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    /// The absolute path of the `iapeer` binary (run as `<bin> daemon`).
    pub bin: PathBuf,
    /// The user's home: launchd's `WorkingDirectory`.
    pub home: PathBuf,
    /// The service's environment.
    pub env: ServiceEnv,
    /// The daemon's log folder, `<root>/logs/iapeer/` (launchd's stdout/stderr go there).
    pub logs_dir: PathBuf,
}

/// The environment a service gives the daemon ([`ServiceEnv::environment`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEnv {
    /// `PATH` for the daemon (where it finds `claude` and `codex`).
    pub path: String,
    /// `IAPEER_ROOT` when it was set at install time.
    pub root: Option<String>,
    /// `IAPEER_PORT` when it was set at install time.
    pub port: Option<String>,
}

impl ServiceEnv {
    /// The variables, in a fixed order: `PATH`, then `IAPEER_ROOT` and `IAPEER_PORT` when
    /// set.
    pub fn environment(&self) -> Vec<(&'static str, &str)> {
        let mut env = vec![("PATH", self.path.as_str())];
        if let Some(r) = &self.root {
            env.push(("IAPEER_ROOT", r));
        }
        if let Some(p) = &self.port {
            env.push(("IAPEER_PORT", p));
        }
        env
    }
}

/// The systemd user unit for `spec`: `ExecStart=<bin> daemon`, `Restart=on-failure`,
/// `RestartSec=2`, `Delegate=yes` (the daemon makes a cgroup per session below its own:
/// `session::contain`), the environment, and the ownership comment as its first line,
/// followed by how to take the file over: delete that first line (the mark; [`is_ours`]
/// reads only it).
pub fn systemd_unit(spec: &ServiceSpec) -> String {
    let mut out = format!(
        "# {OWNERSHIP_MARK}: written by `iapeer install`, which rewrites it when iapeer changes.\n\
         # To keep your own edits, delete the line above; iapeer will then leave the file alone.\n\
         [Unit]\n\
         Description=iapeer daemon: keeps agents, humans and services reachable by message\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={} daemon\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         Delegate=yes\n",
        systemd_exec_word(&spec.bin.to_string_lossy())
    );
    for (k, v) in spec.env.environment() {
        out.push_str(&format!("Environment={}\n", systemd_env(k, v)));
    }
    out.push_str("\n[Install]\nWantedBy=default.target\n");
    out
}

/// One word of `ExecStart=`: `%` and `$` doubled (specifiers, variables), quoted with `"`
/// (and `\`/`"` escaped) when it holds whitespace or quotes.
fn systemd_exec_word(word: &str) -> String {
    let w = word.replace('%', "%%").replace('$', "$$");
    if w.chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
    {
        format!("\"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        w
    }
}

/// One `Environment=` assignment, always quoted: `"KEY=value"` with `\`, `"` escaped and `%`
/// doubled.
fn systemd_env(key: &str, value: &str) -> String {
    let v = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    format!("\"{key}={v}\"")
}

/// The launchd agent plist for `spec`: `Label`, `ProgramArguments` = `[<bin>, "daemon"]`,
/// `RunAtLoad`, `KeepAlive` = `{SuccessfulExit: false}`, `WorkingDirectory` = home,
/// `EnvironmentVariables`, stdout/stderr to `<logs>/daemon-std{out,err}.log`, and the
/// ownership key `com.iapeer.managed` = true.
pub fn launchd_plist(spec: &ServiceSpec) -> String {
    let s = |p: &Path| xml_escape(&p.to_string_lossy());
    let mut env = String::new();
    for (k, v) in spec.env.environment() {
        env.push_str(&format!(
            "\t\t<key>{}</key>\n\t\t<string>{}</string>\n",
            xml_escape(k),
            xml_escape(v)
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \t<key>Label</key>\n\t<string>{LAUNCHD_LABEL}</string>\n\
         \t<key>ProgramArguments</key>\n\t<array>\n\t\t<string>{bin}</string>\n\t\t<string>daemon</string>\n\t</array>\n\
         \t<key>RunAtLoad</key>\n\t<true/>\n\
         \t<key>KeepAlive</key>\n\t<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>\n\t</dict>\n\
         \t<key>WorkingDirectory</key>\n\t<string>{home}</string>\n\
         \t<key>EnvironmentVariables</key>\n\t<dict>\n{env}\t</dict>\n\
         \t<key>StandardOutPath</key>\n\t<string>{out}</string>\n\
         \t<key>StandardErrorPath</key>\n\t<string>{err}</string>\n\
         \t<key>{OWNERSHIP_MARK}</key>\n\t<true/>\n\
         </dict>\n\
         </plist>\n",
        bin = s(&spec.bin),
        home = s(&spec.home),
        out = s(&spec.logs_dir.join("daemon-stdout.log")),
        err = s(&spec.logs_dir.join("daemon-stderr.log")),
    )
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What to do with the definition file, given its current bytes (`None`: absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteDecision {
    /// No file yet: write it.
    Create,
    /// Ours and different: rewrite it.
    Update,
    /// Already these bytes: leave it (launchd would notify on every write).
    Unchanged,
    /// A file without our ownership mark: never overwrite it.
    Foreign,
}

/// Decide whether to write `new` over `existing` (spec 08 §1: only when the bytes change,
/// never over a file without the ownership mark).
pub fn decide(existing: Option<&[u8]>, new: &[u8]) -> WriteDecision {
    match existing {
        None => WriteDecision::Create,
        Some(old) if old == new => WriteDecision::Unchanged,
        Some(old) if is_ours(old) => WriteDecision::Update,
        Some(_) => WriteDecision::Foreign,
    }
}

/// The start of the unit's second line, how to take the file over (in both wordings iapeer
/// has written: "delete this line" before, "delete the line above" now).
const TAKE_OVER_LINE: &str = "# To keep your own edits, delete ";

/// Whether a definition carries our mark: the plist key `<key>com.iapeer.managed</key>`, or
/// the unit's comment line `# com.iapeer.managed…` still followed by the take-over line. A
/// unit whose take-over line is gone is the user's too: units before this build told the
/// user to delete that line (it said "delete this line"), and one who did meant to keep
/// their edits.
pub fn is_ours(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let plist = lines
        .iter()
        .any(|l| *l == format!("<key>{OWNERSHIP_MARK}</key>"));
    let unit = lines.windows(2).any(|w| {
        w[0].starts_with(&format!("# {OWNERSHIP_MARK}")) && w[1].starts_with(TAKE_OVER_LINE)
    });
    plist || unit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ServiceSpec {
        ServiceSpec {
            bin: PathBuf::from("/home/u/.local/bin/iapeer"),
            home: PathBuf::from("/home/u"),
            env: ServiceEnv {
                path: "/home/u/.local/bin:/usr/bin:/bin".into(),
                root: None,
                port: None,
            },
            logs_dir: PathBuf::from("/home/u/.iapeer/logs/iapeer"),
        }
    }

    #[test]
    fn unit_has_the_spec_lines_and_the_mark_first() {
        let u = systemd_unit(&spec());
        assert!(u.starts_with("# com.iapeer.managed"));
        for line in [
            "ExecStart=/home/u/.local/bin/iapeer daemon",
            "Restart=on-failure",
            "RestartSec=2",
            "Delegate=yes",
            "Environment=\"PATH=/home/u/.local/bin:/usr/bin:/bin\"",
            "WantedBy=default.target",
        ] {
            assert!(u.lines().any(|l| l == line), "unit lacks {line}:\n{u}");
        }
        assert!(!u.contains("IAPEER_ROOT"));
    }

    #[test]
    fn root_and_port_are_in_the_environment_only_when_set() {
        let mut s = spec();
        s.env.root = Some("/srv/ia peer".into());
        s.env.port = Some("9000".into());
        let u = systemd_unit(&s);
        assert!(u.contains("Environment=\"IAPEER_ROOT=/srv/ia peer\"\n"));
        assert!(u.contains("Environment=\"IAPEER_PORT=9000\"\n"));
        let p = launchd_plist(&s);
        assert!(p.contains("<key>IAPEER_ROOT</key>\n\t\t<string>/srv/ia peer</string>"));
        assert!(p.contains("<key>IAPEER_PORT</key>\n\t\t<string>9000</string>"));
    }

    #[test]
    fn exec_words_and_env_values_are_escaped_for_systemd() {
        assert_eq!(systemd_exec_word("/a/b"), "/a/b");
        assert_eq!(systemd_exec_word("/a b/100%"), "\"/a b/100%%\"");
        assert_eq!(systemd_exec_word("/a$x"), "/a$$x");
        assert_eq!(systemd_env("PATH", "a\"b%c\\"), "\"PATH=a\\\"b%%c\\\\\"");
    }

    #[test]
    fn plist_escapes_xml_and_has_the_mark() {
        let mut s = spec();
        s.bin = PathBuf::from("/a&b/<iapeer>");
        let p = launchd_plist(&s);
        assert!(p.contains("<string>/a&amp;b/&lt;iapeer&gt;</string>"));
        assert!(p.contains("<key>com.iapeer.managed</key>\n\t<true/>"));
        assert!(is_ours(p.as_bytes()));
        assert!(p.contains("/home/u/.iapeer/logs/iapeer/daemon-stderr.log"));
    }

    #[test]
    fn decide_writes_only_changes_and_never_over_a_foreign_file() {
        let ours = systemd_unit(&spec());
        let newer = ours.replace("RestartSec=2", "RestartSec=3");
        assert_eq!(decide(None, ours.as_bytes()), WriteDecision::Create);
        assert_eq!(
            decide(Some(ours.as_bytes()), ours.as_bytes()),
            WriteDecision::Unchanged
        );
        assert_eq!(
            decide(Some(ours.as_bytes()), newer.as_bytes()),
            WriteDecision::Update
        );
        let foreign = "[Service]\nExecStart=/usr/bin/other\n# mentions com.iapeer.managed later\n";
        assert_eq!(
            decide(Some(foreign.as_bytes()), ours.as_bytes()),
            WriteDecision::Foreign
        );
    }

    /// The unit's comment says how to take it over; doing what it says makes the file the
    /// user's (newcomer walkthrough: it said "delete this line" on the line after the mark,
    /// and deleting that line left the file iapeer's).
    #[test]
    fn deleting_the_line_the_unit_comment_names_takes_the_unit_over() {
        let unit = systemd_unit(&spec());
        let lines: Vec<&str> = unit.lines().collect();
        assert_eq!(
            lines[1],
            "# To keep your own edits, delete the line above; iapeer will then leave the file alone."
        );
        let without = |n: usize| -> String {
            let mut l = lines.clone();
            l.remove(n);
            l.join("\n") + "\n"
        };
        assert!(
            !is_ours(without(0).as_bytes()),
            "the line above is the mark"
        );
        assert!(is_ours(unit.as_bytes()));
        // A unit written before this build, whose comment said "delete this line" on the
        // line after the mark: deleting that line (as it said) made it the user's as well.
        let old = unit.replace("delete the line above;", "delete this line;");
        assert!(is_ours(old.as_bytes()));
        let old_lines: Vec<&str> = old.lines().collect();
        let followed = format!("{}\n{}\n", old_lines[0], old_lines[2..].join("\n"));
        assert!(!is_ours(followed.as_bytes()));
        assert_eq!(
            decide(Some(without(0).as_bytes()), unit.as_bytes()),
            WriteDecision::Foreign
        );
    }

    #[test]
    fn the_manager_is_chosen_by_os_and_systemd_presence() {
        assert_eq!(choose("macos", false, false), Some(Manager::Launchd));
        assert_eq!(choose("macos", true, true), Some(Manager::Launchd));
        assert_eq!(choose("linux", false, true), Some(Manager::Systemd));
        assert_eq!(choose("linux", true, false), Some(Manager::Systemd));
        assert_eq!(choose("linux", false, false), None);
    }

    /// The launchd plist (generated on Linux too) parses with Python's real `plistlib` and has
    /// the keys spec 08 §1 lists.
    #[test]
    fn the_launchd_plist_parses_with_plistlib_and_has_the_spec_keys() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = ServiceSpec {
            bin: PathBuf::from("/Users/u/.local/bin/iapeer"),
            home: PathBuf::from("/Users/u"),
            env: ServiceEnv {
                path: "/Users/u/.local/bin:/usr/bin:/bin".into(),
                root: Some("/Users/u/team & co".into()),
                port: Some("9000".into()),
            },
            logs_dir: PathBuf::from("/Users/u/team & co/logs/iapeer"),
        };
        let file = tmp.path().join("com.agfpd.iapeer.plist");
        std::fs::write(&file, launchd_plist(&spec)).unwrap();
        let out = std::process::Command::new(
            std::env::var("IAPEER_TEST_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into()),
        )
        .args([
            "-c",
            "import json, plistlib, sys; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))",
        ])
        .arg(&file)
        .output()
        .expect("run python");
        assert!(
            out.status.success(),
            "plistlib: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["Label"], "com.agfpd.iapeer");
        assert_eq!(
            v["ProgramArguments"],
            serde_json::json!(["/Users/u/.local/bin/iapeer", "daemon"])
        );
        assert_eq!(v["RunAtLoad"], true);
        assert_eq!(v["KeepAlive"], serde_json::json!({"SuccessfulExit": false}));
        assert_eq!(v["WorkingDirectory"], "/Users/u");
        assert_eq!(
            v["EnvironmentVariables"],
            serde_json::json!({
                "PATH": "/Users/u/.local/bin:/usr/bin:/bin",
                "IAPEER_ROOT": "/Users/u/team & co",
                "IAPEER_PORT": "9000",
            })
        );
        assert_eq!(
            v["StandardOutPath"],
            "/Users/u/team & co/logs/iapeer/daemon-stdout.log"
        );
        assert_eq!(
            v["StandardErrorPath"],
            "/Users/u/team & co/logs/iapeer/daemon-stderr.log"
        );
        assert_eq!(v["com.iapeer.managed"], true);
    }
}

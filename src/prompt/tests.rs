//! Golden-file tests of the system prompt (spec 06). Expected bytes live in
//! `tests/golden/prompt/<case>.md`; run with `IAPEER_BLESS=1` to rewrite them after an
//! intended change, then review the diff.

use super::*;
use tempfile::TempDir;

/// The home folder every golden file shows (the temp folder is replaced by it).
const GOLDEN_HOME: &str = "/home/me";

struct Fixture {
    _tmp: TempDir,
    home: PathBuf,
    paths: Paths,
    me: RegistryPeer,
    registry: Registry,
    /// The other hosts' peers (issue 28).
    remote: Vec<RemotePeer>,
}

impl Fixture {
    /// A home with a root `~/.iapeer` and the peer `bob` working in `~/work/bob`; empty
    /// registry; no prompt files.
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let paths = Paths::at(home.join(".iapeer"));
        let me = peer("bob", "Builds things.", &home.join("work/bob"));
        fs::create_dir_all(paths.root()).unwrap();
        fs::create_dir_all(&me.cwd).unwrap();
        Fixture {
            _tmp: tmp,
            home,
            paths,
            me,
            registry: Registry::default(),
            remote: Vec::new(),
        }
    }

    /// Write `text` at `rel` under the home folder, creating folders.
    fn put(&self, rel: &str, text: impl AsRef<[u8]>) {
        let p = self.home.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn assemble(&self) -> String {
        let out = assemble(compose(
            &self.paths,
            &self.me,
            &self.registry,
            &self.remote,
            &facts(),
            Some(&self.home),
        ));
        out.replace(self.home.to_str().unwrap(), GOLDEN_HOME)
    }
}

fn peer(name: &str, description: &str, cwd: &Path) -> RegistryPeer {
    RegistryPeer {
        description: description.to_string(),
        ..RegistryPeer::new(name, &["claude", "codex"], "artificial", cwd)
    }
}

fn facts() -> HostFacts {
    HostFacts {
        platform: "linux".into(),
        os_version: "12".into(),
        user: "me".into(),
        hostname: "box".into(),
        today: "2026-11-30".into(),
    }
}

/// Compare `actual` with `tests/golden/prompt/<case>.md` (see [`crate::golden`]).
fn golden(case: &str, actual: &str) {
    crate::golden::check(
        &format!("tests/golden/prompt/{case}.md"),
        actual,
        "run IAPEER_BLESS=1 cargo test --lib prompt",
    );
}

/// A fixture holding `files` (`(path under home, text)`), whose assembled prompt is compared
/// with the golden file of `case`.
fn golden_with_files(case: &str, files: &[(&str, &str)]) {
    let fx = Fixture::new();
    for (rel, text) in files {
        fx.put(rel, text);
    }
    golden(case, &fx.assemble());
}

#[test]
fn golden_no_files_at_all() {
    golden_with_files("no-files", &[]);
}

#[test]
fn golden_host_doctrine_only() {
    golden_with_files(
        "host-doctrine",
        &[(".iapeer/IAPEER.md", "# House rules\n\nBe kind.\n\n\n")],
    );
}

#[test]
fn golden_both_doctrines() {
    golden_with_files(
        "both-doctrines",
        &[
            (".iapeer/IAPEER.md", "# House rules\n\nBe kind.\n"),
            ("work/bob/.iapeer/IAPEER.md", "# Bob\nYou build things.\n"),
        ],
    );
}

#[test]
fn golden_peers_with_and_without_descriptions() {
    let mut fx = Fixture::new();
    let mut timer = peer("timer", "", Path::new("/srv/timer"));
    timer.default_runtime = "notifier".into();
    timer.runtimes = vec!["notifier".into()];
    timer.intelligence = "scripted".into();
    let mut owner = peer("ann", "The owner.", Path::new("/home/me"));
    owner.default_runtime = "telegram".into();
    owner.runtimes = vec!["telegram".into()];
    owner.intelligence = "natural".into();
    let alice = peer("alice-2", "Reviews pull requests.", Path::new("/w/a"));
    fx.registry.peers = vec![timer, fx.me.clone(), owner, alice];
    golden("peers", &fx.assemble());
}

/// Issue 28 item 2: the other hosts' peers follow this host's as `name@host`, their
/// descriptions made one line as the local ones.
#[test]
fn golden_peers_of_other_hosts_follow_as_name_at_host() {
    let mut fx = Fixture::new();
    fx.registry.peers = vec![fx.me.clone()];
    let remote = |address: &str, description: &str, runtimes: &[&str]| RemotePeer {
        address: address.into(),
        description: description.into(),
        runtimes: runtimes.iter().map(|r| r.to_string()).collect(),
        intelligence: "artificial".into(),
    };
    fx.remote = vec![
        remote(
            "bob@b",
            "Runs the GPU jobs.\nAll of them.",
            &["claude", "codex"],
        ),
        remote("carol@c", "", &["echo"]),
    ];
    golden("remote-peers", &fx.assemble());
    // Only other hosts' peers: the layer is there too.
    fx.registry.peers.clear();
    assert!(fx
        .assemble()
        .contains("## Known peers\n- bob@b — Runs the GPU jobs. All of them."));
}

#[test]
fn golden_domain_files_on_both_levels() {
    let fx = Fixture::new();
    fx.put(".iapeer/notes.md", "host notes\n");
    fx.put(".iapeer/Style.MD", "host style\n");
    fx.put(".iapeer/iapeer.md", "not a domain file\n");
    fx.put(".iapeer/readme.txt", "not markdown\n");
    fx.put(".iapeer/empty.md", "\n\n");
    fx.put(".iapeer/latin1.md", b"caf\xe9\n");
    fx.put(".iapeer/docs/deep.md", "subfolders are not scanned\n");
    fx.put(".iapeer/fragments/x.md", "a fragment, not a domain file\n");
    fx.put("work/bob/.iapeer/notes.md", "peer notes\n");
    fx.put("work/bob/.iapeer/api.md", "peer api\n");
    fx.put(
        "work/bob/.iapeer/Iapeer.md",
        "the doctrine is not a domain file\n",
    );
    fx.put("work/bob/.iapeer/peer-profile.json", "{}\n");
    fs::create_dir_all(fx.home.join(".iapeer/dir.md")).unwrap();
    let out = fx.assemble();
    assert!(!out.contains("caf"), "non-UTF-8 files are skipped");
    golden("domain-files", &out);
}

#[test]
fn golden_fragments() {
    golden_with_files(
        "fragments",
        &[
            (".iapeer/fragments/memory.md", "memory map\n"),
            (".iapeer/fragments/b.md", "host b\n"),
            ("work/bob/.iapeer/fragments/b.md", "peer b\n"),
            ("work/bob/.iapeer/fragments/a.md", "peer a\n"),
            ("work/bob/.iapeer/fragments/note.txt", "not markdown\n"),
        ],
    );
}

#[test]
fn golden_all_layers_in_order() {
    let mut fx = Fixture::new();
    fx.put(".iapeer/IAPEER.md", "host doctrine\n");
    fx.put("work/bob/.iapeer/IAPEER.md", "peer doctrine\n");
    fx.put(".iapeer/domain.md", "host domain\n");
    fx.put("work/bob/.iapeer/fragments/zz.md", "peer fragment\n");
    fx.registry.peers = vec![fx.me.clone()];
    golden("all-layers", &fx.assemble());
}

#[test]
fn golden_tricky_description() {
    let mut fx = Fixture::new();
    fx.me.description = "Says \"hi\": twice\nthen \u{1}stops\u{7f}\u{0}.".into();
    fx.registry.peers = vec![fx.me.clone()];
    let out = fx.assemble();
    assert!(out.contains(r#"description: "Says \"hi\": twice\nthen \u0001stops\u007f\u0000.""#));
    assert!(!out.contains('\u{7f}') && !out.contains('\u{1}'));
    golden("tricky-description", &out);
}

#[test]
fn home_outside_paths_keeps_absolute_markers() {
    let fx = Fixture::new();
    fx.put(".iapeer/IAPEER.md", "rules\n");
    let out = assemble(compose(
        &fx.paths,
        &fx.me,
        &fx.registry,
        &[],
        &facts(),
        None,
    ));
    let marker = format!("<!-- {} -->", fx.paths.host_doctrine().display());
    assert!(out.contains(&marker), "{out}");
}

#[test]
fn join_strips_drops_and_ends_with_one_newline() {
    let s = |x: &str| x.to_string();
    assert_eq!(
        join_sections(&[s("a\n\n"), s(""), s("\n"), s("b")]),
        "a\n\nb\n"
    );
    assert_eq!(join_sections(&[s("a\r\n")]), "a\n");
}

#[test]
fn json_string_escapes_controls_and_del() {
    assert_eq!(json_string("a\"b\\c"), r#""a\"b\\c""#);
    assert_eq!(
        json_string("\u{0}\u{1f}\u{7f}\t"),
        r#""\u0000\u001f\u007f\t""#
    );
    assert_eq!(json_string("\u{8}\u{c}\r\n"), r#""\b\f\r\n""#);
    assert_eq!(json_string("é: ok"), "\"é: ok\"");
    let parsed: String = serde_json::from_str(&json_string("x\u{7f}\n\"")).unwrap();
    assert_eq!(parsed, "x\u{7f}\n\"");
}

#[test]
fn layer_file_names() {
    assert!(is_layer_file_name(b"notes.md"));
    assert!(is_layer_file_name(b"Notes.MD"));
    assert!(!is_layer_file_name(b"IAPEER.md"));
    assert!(!is_layer_file_name(b"iapeer.MD"));
    assert!(!is_layer_file_name(b".md"));
    assert!(!is_layer_file_name(b".hidden.md"));
    assert!(!is_layer_file_name(b"notes.mdx"));
}

#[test]
fn write_puts_the_prompt_in_the_lifecycle_folder_private() {
    let fx = Fixture::new();
    let id = Identity::parse("claude-bob").unwrap();
    let path = write(&fx.paths, &id, "hello\n").unwrap();
    assert_eq!(path, fx.paths.marker("claude-bob", ".system-prompt.md"));
    assert_eq!(fs::read_to_string(&path).unwrap(), "hello\n");
    let mode = crate::testkit::mode_of(&path);
    assert_eq!(mode, 0o600);
    write(&fx.paths, &id, "again\n").unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "again\n");
}

//! Where Claude Code keeps the transcripts of a working folder (spec 04 §2 "claude"): the
//! project folder `<config>/projects/<name>/`, its name computed exactly as Claude Code
//! 2.1.332 computes it, and, when that folder does not exist, found from the transcripts
//! themselves (their `cwd` field).
//!
//! The rule, read from the shipped bundle and checked against folders the real CLI created
//! (`tests/fixtures/claude-2.1.332/project-folders.json`): the real path (symlinks resolved,
//! no Unicode normalization) with every UTF-16 code unit outside `[A-Za-z0-9]` as `-` (an
//! emoji is two dashes, `é` one, `e`+combining accent `e-`); when that is longer than 200
//! units, its first 200 followed by `-` and the base-36 absolute value of the 32-bit
//! `s[i] + 31·h` string hash of the path (UTF-16 code units). With `CLAUDE_CONFIG_DIR` set,
//! a valid `CLAUDE_CODE_PROJECT_DIR_NAME` (`[A-Za-z0-9_-]{1,64}`, not a DOS device name)
//! replaces the computed name.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::transcript::jsonl_files;

/// Names longer than this many UTF-16 code units are shortened.
pub const MAX_NAME_UNITS: usize = 200;

/// Claude's config folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub fn config_dir() -> Option<PathBuf> {
    crate::paths::env_or_home_dir("CLAUDE_CONFIG_DIR", ".claude")
}

/// `<config>/projects`.
pub fn projects_dir() -> Option<PathBuf> {
    Some(config_dir()?.join("projects"))
}

/// The 32-bit string hash Claude Code uses (`h = 31·h + unit`, wrapping), over UTF-16 code
/// units (pure).
pub fn string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// `n` in base 36, lowercase digits (pure).
fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The project-folder name of a working folder given as Claude Code sees it (its real path
/// as text) (pure).
pub fn folder_name(path: &str) -> String {
    let units: Vec<u16> = path.encode_utf16().collect();
    let dashed: String = units
        .iter()
        .map(|&u| match u8::try_from(u) {
            Ok(b) if b.is_ascii_alphanumeric() => char::from(b),
            _ => '-',
        })
        .collect();
    if units.len() <= MAX_NAME_UNITS {
        return dashed;
    }
    let hash = i64::from(string_hash(path)).unsigned_abs();
    format!("{}-{}", &dashed[..MAX_NAME_UNITS], base36(hash))
}

/// Whether `name` is a valid `CLAUDE_CODE_PROJECT_DIR_NAME` (pure).
fn valid_override(name: &str) -> bool {
    let dos = {
        let l = name.to_ascii_lowercase();
        ["con", "prn", "aux", "nul"].contains(&l.as_str())
            || ((l.starts_with("com") || l.starts_with("lpt"))
                && l.len() == 4
                && l.as_bytes()[3].is_ascii_digit())
    };
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !dos
}

/// The real path of `cwd` (symlinks resolved), as Claude Code's working folder.
fn real(cwd: &Path) -> PathBuf {
    cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf())
}

/// `<config>/projects/<name>/` as Claude Code computes it for `cwd` (it may not exist yet).
pub fn computed_project_dir(cwd: &Path) -> Option<PathBuf> {
    let name = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.is_empty())
        .and_then(|_| std::env::var("CLAUDE_CODE_PROJECT_DIR_NAME").ok())
        .filter(|n| valid_override(n))
        .unwrap_or_else(|| folder_name(&real(cwd).to_string_lossy()));
    Some(projects_dir()?.join(name))
}

/// Folders found by [`find_by_cwd`], per real working folder.
static FOUND: Mutex<Option<HashMap<PathBuf, PathBuf>>> = Mutex::new(None);

/// The folder holding the transcripts of `cwd`: the computed one when it exists, else the
/// project folder whose newest transcript records `cwd` as its working folder (remembered
/// once found). `None` while Claude Code has written no transcript for `cwd`.
pub fn transcript_dir(cwd: &Path) -> Option<PathBuf> {
    let computed = computed_project_dir(cwd)?;
    if computed.is_dir() {
        return Some(computed);
    }
    let cwd = real(cwd);
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = found.as_ref().and_then(|m| m.get(&cwd)) {
        if d.is_dir() {
            return Some(d.clone());
        }
    }
    let d = find_by_cwd(&projects_dir()?, &cwd)?;
    log::info!(
        "claude transcripts of {} are in {} (not the computed {})",
        cwd.display(),
        d.display(),
        computed.display()
    );
    found
        .get_or_insert_with(HashMap::new)
        .insert(cwd, d.clone());
    Some(d)
}

/// The project folder under `projects` whose newest transcript's records name `cwd` as their
/// working folder (`"cwd"` field); the newest such transcript wins.
pub fn find_by_cwd(projects: &Path, cwd: &Path) -> Option<PathBuf> {
    let want = cwd.to_string_lossy();
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(projects).ok()?.flatten() {
        let dir = entry.path();
        let newest = jsonl_files(&dir)
            .into_iter()
            .filter_map(|f| Some((std::fs::metadata(&f).ok()?.modified().ok()?, f)))
            .max();
        let Some((at, file)) = newest else {
            continue;
        };
        if best.as_ref().is_some_and(|(b, _)| *b >= at) {
            continue;
        }
        if first_cwd(&file).as_deref() == Some(&*want) {
            best = Some((at, dir));
        }
    }
    best.map(|(_, d)| d)
}

/// The first `cwd` field among the first records of a transcript (at most 64 KiB read).
fn first_cwd(file: &Path) -> Option<String> {
    let f = std::fs::File::open(file).ok()?;
    BufReader::new(f.take(64 * 1024))
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .find_map(|v| v["cwd"].as_str().map(String::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Folders the real Claude Code 2.1.332 created (`claude -p` run in each working folder).
    #[test]
    fn names_match_the_folders_the_real_cli_created() {
        let text = include_str!("../../tests/fixtures/claude-2.1.332/project-folders.json");
        let rows: Vec<serde_json::Value> = serde_json::from_str(text).unwrap();
        assert!(rows.len() >= 15);
        for r in rows {
            let (what, cwd, folder) = (
                r["what"].as_str().unwrap(),
                r["cwd"].as_str().unwrap(),
                r["folder"].as_str().unwrap(),
            );
            // The symlink row is recorded by its link; Claude Code resolved it first.
            let target = rows_target(what, text).unwrap_or_else(|| cwd.to_string());
            assert_eq!(folder_name(&target), folder, "{what}: {cwd:?}");
        }
    }

    /// The link row of the fixture points at the "len 258" folder.
    fn rows_target(what: &str, text: &str) -> Option<String> {
        (what == "long in a symlink").then(|| {
            let rows: Vec<serde_json::Value> = serde_json::from_str(text).unwrap();
            rows.iter().find(|r| r["what"] == "len 258").unwrap()["cwd"]
                .as_str()
                .unwrap()
                .to_string()
        })
    }

    #[test]
    fn hash_and_base36_edges() {
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        assert_eq!(string_hash("ab"), 97 * 31 + 98);
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
        // Math.abs of the most negative 32-bit value is 2147483648 in JavaScript.
        assert_eq!(
            base36(i64::from(i32::MIN).unsigned_abs()),
            base36(2_147_483_648)
        );
    }

    #[test]
    fn short_names_keep_every_unit() {
        assert_eq!(folder_name("/a/b_c.d"), "-a-b-c-d");
        assert_eq!(
            folder_name("/x/🦀"),
            "-x---",
            "an emoji is two UTF-16 units"
        );
        assert_eq!(folder_name(&"/".repeat(200)), "-".repeat(200));
        let long = folder_name(&"/".repeat(201));
        assert!(long.starts_with(&format!("{}-", "-".repeat(200))), "{long}");
        assert!(long[201..].bytes().all(|b| b.is_ascii_alphanumeric()));
    }

    #[test]
    fn project_dir_override_is_validated() {
        assert!(valid_override("my-proj_1"));
        assert!(!valid_override(""));
        assert!(!valid_override("a/b"));
        assert!(!valid_override("COM1"));
        assert!(!valid_override("nul"));
        assert!(!valid_override(&"a".repeat(65)));
    }

    #[test]
    fn a_folder_is_found_by_the_cwd_its_transcripts_record() {
        let dir = tempfile::tempdir().unwrap();
        let projects = dir.path();
        std::fs::create_dir_all(projects.join("other")).unwrap();
        std::fs::write(
            projects.join("other/s1.jsonl"),
            "{\"type\":\"user\",\"cwd\":\"/elsewhere\"}\n",
        )
        .unwrap();
        std::fs::create_dir_all(projects.join("some-odd-name")).unwrap();
        std::fs::write(
            projects.join("some-odd-name/s2.jsonl"),
            "{\"type\":\"queue-operation\"}\n{\"type\":\"user\",\"cwd\":\"/w/a\\nb\"}\n",
        )
        .unwrap();
        assert_eq!(
            find_by_cwd(projects, Path::new("/w/a\nb")),
            Some(projects.join("some-odd-name"))
        );
        assert_eq!(find_by_cwd(projects, Path::new("/w/none")), None);
    }
}

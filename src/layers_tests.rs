//! The module layers (issue 29 item 1): every `crate::<module>` reference in production code
//! — `use` lines, grouped `use crate::{a, b::c}`, and paths written inline — goes strictly
//! down [`LAYERS`]. Test code (`#[cfg(test)]` items, `tests.rs` and `*_tests.rs` files, test-only
//! modules of `lib.rs`) may reach anywhere. `docs/ARCHITECTURE.md` quotes the table
//! ([`quoted`]); a test keeps the two the same.
//!
//! The scan reads the source as text with comments and literals blanked, so a doc link or a
//! string naming a module is not an import; a `pub use` kept at an old path counts as the edge
//! it is (the re-exporting module imports the item's home).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The floors, top first: a module may use only modules on floors below its own. Two modules
/// on one floor do not import each other (`session` and `runtime` share a floor on purpose).
const LAYERS: &[&[&str]] = &[
    &["cli", "untrusted"],
    &["daemon"],
    &["host", "peers", "plugins", "roster"],
    &["runtime", "session"],
    &["eventbus", "limits", "notices", "notifier", "worktree"],
    &[
        "adapter",
        "echo_agent",
        "federation",
        "inbox",
        "logview",
        "memory",
        "outbox",
        "profile",
        "prompt",
    ],
    &[
        "attachment_source",
        "envelope",
        "eventlog",
        "launch_env",
        "markers",
        "msgids",
        "origin",
        "registry",
        "telegram",
    ],
    &[
        "child", "clock", "config", "fsutil", "names", "paths", "protocol", "term", "visible",
    ],
    &["runtime_table"],
];

/// The floor of a module, 0 at the bottom.
fn floor_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|floor| floor.contains(&module))
        .map(|i| LAYERS.len() - 1 - i)
}

/// The table as `docs/ARCHITECTURE.md` quotes it: one line per floor, top first.
fn quoted() -> String {
    LAYERS
        .iter()
        .enumerate()
        .map(|(i, floor)| format!("{}  {}\n", LAYERS.len() - 1 - i, floor.join(" ")))
        .collect()
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `text` with comments and string/char literal contents replaced by spaces (newlines kept),
/// so only code is left to search.
fn mask(text: &str) -> String {
    mask_noting(text, &mut Vec::new())
}

/// [`mask`], noting where each string literal (plain, byte or raw) was: `(start, end)` byte
/// offsets in `text`, quotes (and a raw string's `r#`) included.
pub(crate) fn mask_noting(text: &str, literals: &mut Vec<(usize, usize)>) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let word = |i: usize| i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (0, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (b[i] == b'r' || b[i..].starts_with(b"br")) && !word(i) && {
            let k = i + if b[i] == b'b' { 2 } else { 1 };
            let hashes = b[k..].iter().take_while(|&&c| c == b'#').count();
            b.get(k + hashes) == Some(&b'"')
        } {
            let k = i + if b[i] == b'b' { 2 } else { 1 };
            let hashes = b[k..].iter().take_while(|&&c| c == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes)).into_bytes();
            let body = k + hashes + 1;
            let end = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |n| body + n + close.len());
            literals.push((i, end));
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            literals.push((i, (j + 1).min(b.len())));
            blank(&mut out, i, (j + 1).min(b.len()));
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{1b}', '{'); a lifetime ('a) has no closing quote
            // right after one character.
            let rest = &text[i + 1..];
            let len = if let Some(esc) = rest.strip_prefix('\\') {
                let c = esc.chars().next().map_or(0, char::len_utf8);
                esc[c..].find('\'').map(|n| 1 + c + n)
            } else {
                let c = rest.chars().next().map_or(0, char::len_utf8);
                (c > 0 && rest[c..].starts_with('\'')).then_some(c)
            };
            match len {
                Some(n) => {
                    let end = (i + n + 2).min(b.len());
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("whole characters were blanked")
}

/// `masked` with every item under a `#[cfg(...test...)]` attribute blanked (up to its `;` or
/// its closing brace).
fn drop_test_items(masked: &str) -> String {
    let mut out = masked.as_bytes().to_vec();
    for (at, end) in test_items(masked) {
        for c in &mut out[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    String::from_utf8(out).expect("whole characters were blanked")
}

/// Where the items under a `#[cfg(...test...)]` attribute are in `masked` (the output of
/// [`mask`]): `(start, end)` byte offsets, the attribute included.
pub(crate) fn test_items(masked: &str) -> Vec<(usize, usize)> {
    let b = masked.as_bytes();
    let mut items = Vec::new();
    let mut from = 0;
    while let Some(n) = masked[from..].find("#[cfg(") {
        let at = from + n;
        let Some(close) = masked[at..].find(']').map(|n| at + n) else {
            break;
        };
        let cond = &masked[at..close];
        let is_test = cond.contains("test") && !cond.contains("not(");
        from = close + 1;
        if !is_test {
            continue;
        }
        let mut depth = 0usize;
        let mut j = close + 1;
        while j < b.len() {
            match b[j] {
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 && b[j] == b'}' {
                        break;
                    }
                }
                b';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        items.push((at, (j + 1).min(b.len())));
        from = j + 1;
    }
    items
}

/// The top-level modules one file's production code names: `(line, module, what was written)`.
/// `depth` is how many `super::` reach the crate root from the file.
fn references(code: &str, depth: usize) -> Vec<(usize, String, String)> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let b = code.as_bytes();
    let mut from = 0;
    while let Some(n) = code[from..].find("crate::") {
        let at = from + n;
        from = at + "crate::".len();
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b'$') {
            continue;
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d::{e, f}}`: the first segment of each top-level entry.
            let mut level = 0usize;
            let end = group
                .char_indices()
                .find(|&(_, c)| match c {
                    '{' => {
                        level += 1;
                        false
                    }
                    '}' if level == 0 => true,
                    '}' => {
                        level -= 1;
                        false
                    }
                    _ => false,
                })
                .map_or(group.len(), |(k, _)| k);
            let written = format!("crate::{{{}}}", &group[..end]);
            let mut level = 0usize;
            for entry in group[..end].split(|c| {
                level = match c {
                    '{' => level + 1,
                    '}' => level - 1,
                    _ => level,
                };
                c == ',' && level == 0
            }) {
                found.push((line_of(at), ident(entry.trim_start()), written.clone()));
            }
        } else {
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // `crate::a::{B, C}`: the group as written, up to its closing brace.
            let group = if path.ends_with("::") {
                rest[path.len()..].split_inclusive('}').next().unwrap_or("")
            } else {
                ""
            };
            found.push((line_of(at), ident(rest), format!("crate::{path}{group}")));
        }
    }
    // `super::super::x` from deep enough reaches the crate root too.
    let chain = "super::".repeat(depth);
    let mut from = 0;
    while let Some(n) = code[from..].find(&chain) {
        let at = from + n;
        from = at + chain.len();
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':') {
            continue;
        }
        let name = ident(&code[from..]);
        if name != "super" && !name.is_empty() {
            found.push((line_of(at), name.clone(), format!("{chain}{name}")));
        }
    }
    found.retain(|(_, name, _)| !name.is_empty() && name != "self");
    found
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("src/ is readable")
        .map(|e| e.expect("src/ entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The modules `lib.rs` declares: `(name, test only)`.
fn declared_modules() -> Vec<(String, bool)> {
    let lib = mask(&fs::read_to_string(src().join("lib.rs")).expect("src/lib.rs"));
    let mut test_only = false;
    let mut out = Vec::new();
    for line in lib.lines().map(str::trim) {
        if line.starts_with("#[cfg(") {
            test_only = line.contains("test") && !line.contains("not(");
            continue;
        }
        let decl = line
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        if let Some(name) = decl.strip_prefix("mod ").and_then(|s| s.strip_suffix(';')) {
            out.push((name.trim().to_string(), test_only));
        }
        if !line.is_empty() {
            test_only = false;
        }
    }
    out
}

/// One edge that does not go down, with where it is written.
struct Upward {
    at: String,
    from: String,
    to: String,
    written: String,
}

/// One production source file of `src/` (not `lib.rs`, `main.rs`, a `tests.rs` or
/// `*_tests.rs` file, a file in a `tests/` folder, or a file of a test-only module).
pub(crate) struct Source {
    /// Its path under `src/`.
    pub rel: PathBuf,
    /// The top-level module it belongs to.
    pub top: String,
    /// How many `super::` reach the crate root from it.
    pub depth: usize,
    /// Its text.
    pub text: String,
}

/// Every production source file of `src/`, in path order.
pub(crate) fn production_sources() -> Vec<Source> {
    let test_only: Vec<String> = declared_modules()
        .into_iter()
        .filter(|(_, t)| *t)
        .map(|(n, _)| n)
        .collect();
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut out = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&root).expect("under src/");
        let parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let file = parts.last().expect("a file name").as_str();
        let top = parts[0].trim_end_matches(".rs");
        if parts.len() == 1 && (top == "lib" || top == "main")
            || file == "tests.rs"
            || parts[..parts.len() - 1].iter().any(|d| d == "tests")
            || file.ends_with("_tests.rs")
            || test_only.iter().any(|t| t == top)
        {
            continue;
        }
        out.push(Source {
            rel: rel.to_path_buf(),
            top: top.to_string(),
            depth: parts.len() - usize::from(file == "mod.rs"),
            text: fs::read_to_string(&path).expect("a readable source file"),
        });
    }
    out
}

fn upward_edges() -> Vec<Upward> {
    let modules = declared_modules();
    let mut up = Vec::new();
    for Source {
        rel,
        top,
        depth,
        text,
    } in production_sources()
    {
        let top = top.as_str();
        let code = drop_test_items(&mask(&text));
        for (line, to, written) in references(&code, depth) {
            // Names that are not modules (a `super::` chain inside an inline module, a re-export
            // of `lib.rs`) are not module edges.
            if to == top || !modules.iter().any(|(n, _)| *n == to) {
                continue;
            }
            let allowed = match (floor_of(top), floor_of(&to)) {
                (Some(a), Some(b)) => b < a,
                _ => false,
            };
            if !allowed {
                up.push(Upward {
                    at: format!("src/{}:{line}", rel.display()),
                    from: top.to_string(),
                    to,
                    written,
                });
            }
        }
    }
    up
}

/// Every `crate::<module>` reference in production code goes to a lower floor.
#[test]
fn imports_go_down_the_layers() {
    let up = upward_edges();
    let floor = |m: &str| floor_of(m).map_or("on no floor".to_string(), |f| format!("floor {f}"));
    let lines: Vec<String> = up
        .iter()
        .map(|u| {
            format!(
                "{}: `{}` ({}) uses `{}` ({}, {}) through `{}`",
                u.at,
                u.from,
                floor(&u.from),
                u.to,
                floor(&u.to),
                match (floor_of(&u.from), floor_of(&u.to)) {
                    (Some(a), Some(b)) if a == b => "the same floor",
                    (Some(_), Some(_)) => "above",
                    _ => "not in LAYERS",
                },
                u.written
            )
        })
        .collect();
    assert!(
        lines.is_empty(),
        "{} import(s) do not go down the module layers (LAYERS in src/layers_tests.rs, quoted \
         in docs/ARCHITECTURE.md):\n  {}\nA module uses only modules on floors below its own. \
         Move the item you need down to a module below the one that uses it (its natural \
         home: a type of a contract to that contract's module, a name to `names`, a limit \
         to `config`), or pass it in from above; change LAYERS (and the docs' quote) only \
         when the design itself changes, never to let one import through.",
        lines.len(),
        lines.join("\n  ")
    );
}

/// Every top-level module of `src/` is on exactly one floor, and the table names no other.
#[test]
fn every_module_is_on_one_floor() {
    let modules = declared_modules();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for m in LAYERS.iter().flat_map(|f| f.iter()) {
        *seen.entry(m).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "on more than one floor of LAYERS: {twice:?}"
    );
    let production: Vec<&str> = modules
        .iter()
        .filter(|(_, t)| !t)
        .map(|(n, _)| n.as_str())
        .collect();
    let missing: Vec<_> = production
        .iter()
        .filter(|m| !seen.contains_key(*m))
        .collect();
    assert!(
        missing.is_empty(),
        "modules declared in src/lib.rs but on no floor of LAYERS (src/layers_tests.rs): \
         {missing:?}; put each on the floor just above the highest module it uses, and quote \
         the new table in docs/ARCHITECTURE.md"
    );
    let unknown: Vec<_> = seen.keys().filter(|m| !production.contains(m)).collect();
    assert!(
        unknown.is_empty(),
        "LAYERS names modules src/lib.rs does not declare (or declares test-only): {unknown:?}"
    );
    // Every file and folder of src/ is a declared module.
    let mut entries: Vec<String> = fs::read_dir(src())
        .expect("src/")
        .map(|e| {
            e.expect("src/ entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n != "lib.rs" && n != "main.rs")
        .map(|n| n.trim_end_matches(".rs").to_string())
        .collect();
    entries.sort();
    let undeclared: Vec<_> = entries
        .iter()
        .filter(|e| !modules.iter().any(|(n, _)| n == *e))
        .collect();
    assert!(
        undeclared.is_empty(),
        "in src/ but not declared in src/lib.rs: {undeclared:?}"
    );
}

/// `docs/ARCHITECTURE.md` quotes [`LAYERS`] as it is.
#[test]
fn architecture_doc_quotes_the_layers() {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md"))
            .expect("docs/ARCHITECTURE.md");
    let table = quoted();
    assert!(
        doc.contains(&format!("```text\n{table}```\n")),
        "docs/ARCHITECTURE.md does not quote LAYERS (src/layers_tests.rs) as it is; its layer \
         section should hold this block (floor, then its modules):\n```text\n{table}```"
    );
}

/// The scanner sees grouped uses and inline paths, and not comments, strings or test items.
#[test]
fn the_scan_reads_code_only() {
    let src = r##"
use crate::alpha::A;
use crate::{beta, gamma::{G, H}};
// crate::comment::X
/// [`crate::doc::Y`]
fn f() -> crate::delta::D { let _ = "crate::string"; let _ = r#"crate::raw"#; let _ = '{'; pub(crate) fn g() {} }
#[cfg(test)]
mod tests { use crate::test_only::T; }
#[cfg(all(test, target_os = "linux"))]
fn t() { crate::linux_test::x(); }
fn h() { super::super::epsilon::e(); crate::zeta::z() }
"##;
    let found: Vec<(usize, String)> = references(&drop_test_items(&mask(src)), 2)
        .into_iter()
        .map(|(l, m, _)| (l, m))
        .collect();
    let names: Vec<&str> = found.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(
        names,
        ["alpha", "beta", "gamma", "delta", "zeta", "epsilon"]
    );
    assert_eq!(found[0].0, 2);
    assert_eq!(found[3].0, 6);
}

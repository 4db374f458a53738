//! No production function is longer than [`MAX_LINES`] lines (issue 29 item 4).
//!
//! Walks `src/`, blanks comments and literals, skips test code (files named `*_tests.rs` or
//! `tests.rs`, files declared by a `#[cfg(test)] mod x;`, and items under `#[cfg(test)]`), and
//! measures each `fn` with a body from its `fn` line to its closing brace, both included.
//! Run `cargo test --lib fn_length -- --nocapture` to see the longest functions.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The longest a production function may be, in lines.
const MAX_LINES: usize = 100;

/// One function with a body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FnSpan {
    file: String,
    name: String,
    line: usize,
    lines: usize,
}

/// `text` with comments, strings and char literals replaced by spaces (newlines kept), so that
/// braces and keywords in it are code.
fn blank_non_code(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        let prev_ident = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if !prev_ident && (c[i] == 'r' || (c[i] == 'b' && at(i + 1) == 'r')) && {
            let mut k = i + if c[i] == 'b' { 2 } else { 1 };
            while at(k) == '#' {
                k += 1;
            }
            at(k) == '"'
        } {
            // Raw string: r"…", r#"…"#, br#"…"#.
            let mut k = i + if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(k) == '#' {
                hashes += 1;
                k += 1;
            }
            k += 1;
            while k < c.len() && !(c[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#')) {
                k += 1;
            }
            let end = (k + 1 + hashes).min(c.len());
            for &ch in &c[i..end] {
                blank(&mut out, ch);
            }
            i = end;
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '\'' && (at(i + 1) == '\\' || at(i + 2) == '\'') {
            // A char literal ('x', '\n', '\u{..}'); a lifetime ('a) has no closing quote.
            let mut k = i + 1;
            if at(k) == '\\' {
                k += 2;
            } else {
                k += 1;
            }
            while k < c.len() && c[k] != '\'' {
                k += 1;
            }
            let end = (k + 1).min(c.len());
            for &ch in &c[i..end] {
                blank(&mut out, ch);
            }
            i = end;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Index of the brace that closes the one at `open`.
fn closing_brace(code: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &ch) in code.iter().enumerate().skip(open) {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    code.len().saturating_sub(1)
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// What one file holds: its functions with bodies (outside `#[cfg(test)]` items) and the names
/// of the modules it declares under `#[cfg(test)]` as `mod x;` with an optional `#[path]`.
fn scan(file: &str, text: &str) -> (Vec<FnSpan>, Vec<(String, Option<String>)>) {
    let code: Vec<char> = blank_non_code(text).chars().collect();
    let raw: Vec<char> = text.chars().collect();
    let line_at = |k: usize| code[..k].iter().filter(|&&ch| ch == '\n').count() + 1;
    let word_at = |k: usize, w: &str| {
        let w: Vec<char> = w.chars().collect();
        code.get(k..k + w.len()) == Some(&w[..])
            && (k == 0 || !is_ident(code[k - 1]))
            && !code.get(k + w.len()).copied().is_some_and(is_ident)
    };
    let mut fns = Vec::new();
    let mut test_mods = Vec::new();
    let mut k = 0;
    while k < code.len() {
        if code[k] == '#' && code[k..].starts_with(&"#[cfg(test)]".chars().collect::<Vec<_>>()) {
            // The item this attribute covers: skip it whole.
            let mut j = k + "#[cfg(test)]".len();
            let mut path = None;
            loop {
                while j < code.len() && code[j].is_whitespace() {
                    j += 1;
                }
                if code.get(j) == Some(&'#') {
                    let end = j + code[j..].iter().position(|&ch| ch == ']').unwrap_or(0);
                    let attr: String = raw[j..=end].iter().collect();
                    if let Some(p) = attr.strip_prefix("#[path = \"") {
                        path = Some(p.trim_end_matches("\"]").to_string());
                    }
                    j = end + 1;
                } else {
                    break;
                }
            }
            let stop = j + code[j..]
                .iter()
                .position(|&ch| ch == '{' || ch == ';')
                .unwrap_or(code.len() - j - 1);
            let head: String = code[j..stop].iter().collect();
            let words: Vec<&str> = head.split_whitespace().collect();
            if code[stop] == ';' {
                if let Some(pos) = words.iter().position(|&w| w == "mod") {
                    test_mods.push((words[pos + 1].to_string(), path));
                }
                k = stop + 1;
            } else {
                k = closing_brace(&code, stop) + 1;
            }
            continue;
        }
        if word_at(k, "fn") {
            let mut j = k + 2;
            while j < code.len() && code[j].is_whitespace() {
                j += 1;
            }
            let name: String = code[j..].iter().take_while(|&&ch| is_ident(ch)).collect();
            if !name.is_empty() {
                let mut paren = 0i32;
                let mut m = j;
                while m < code.len() {
                    match code[m] {
                        '(' => paren += 1,
                        ')' => paren -= 1,
                        '{' | ';' if paren == 0 => break,
                        _ => {}
                    }
                    m += 1;
                }
                if code.get(m) == Some(&'{') {
                    let end = closing_brace(&code, m);
                    let line = line_at(k);
                    fns.push(FnSpan {
                        file: file.to_string(),
                        name,
                        line,
                        lines: line_at(end) - line + 1,
                    });
                }
            }
            k = j;
            continue;
        }
        k += 1;
    }
    (fns, test_mods)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every production function in `src/`, longest first.
fn production_fns() -> Vec<FnSpan> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut scanned = Vec::new();
    let mut test_files: HashSet<PathBuf> = HashSet::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read source");
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let (fns, test_mods) = scan(&rel, &text);
        let name = path.file_stem().unwrap().to_string_lossy();
        let dir = if name == "mod" || name == "lib" || name == "main" {
            path.parent().unwrap().to_path_buf()
        } else {
            path.with_extension("")
        };
        for (module, at) in test_mods {
            match at {
                Some(p) => {
                    test_files.insert(path.parent().unwrap().join(p));
                }
                None => {
                    test_files.insert(dir.join(format!("{module}.rs")));
                    test_files.insert(dir.join(&module));
                }
            }
        }
        scanned.push((path.clone(), fns));
    }
    let mut all: Vec<FnSpan> = scanned
        .into_iter()
        .filter(|(path, _)| {
            let stem = path.file_stem().unwrap().to_string_lossy();
            let test_file = stem == "tests" || stem.ends_with("_tests");
            let test_module = test_files
                .iter()
                .any(|t| path == t || (t.is_dir() && path.starts_with(t)));
            !(test_file || test_module)
        })
        .flat_map(|(_, fns)| fns)
        .collect();
    all.sort_by(|a, b| b.lines.cmp(&a.lines).then(a.file.cmp(&b.file)));
    all
}

#[test]
fn no_production_function_is_over_the_limit() {
    let all = production_fns();
    assert!(
        all.len() > 1000,
        "the scan found too few functions: {}",
        all.len()
    );
    for f in all.iter().take(15) {
        println!("{:4} {}:{} {}", f.lines, f.file, f.line, f.name);
    }
    let long: Vec<String> = all
        .iter()
        .filter(|f| f.lines > MAX_LINES)
        .map(|f| format!("{}:{} {} is {} lines", f.file, f.line, f.name, f.lines))
        .collect();
    assert!(
        long.is_empty(),
        "production functions over {MAX_LINES} lines; split them:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_scan_measures_bodies_and_skips_test_code() {
    let text = r##"
fn short() { let s = "}"; let c = '{'; }
/// doc with { brace
fn long<'a>(x: &'a str, f: fn(u8) -> u8) -> &'a str
where
    'a: 'a,
{
    let r = r#"}}"#; // }
    /* { */
    x
}
trait T { fn decl(&self); }
#[cfg(test)]
mod tests {
    fn hidden() {}
}
#[cfg(test)]
#[path = "x_tests.rs"]
mod x;
"##;
    let (fns, mods) = scan("f.rs", text);
    let got: Vec<(&str, usize, usize)> = fns
        .iter()
        .map(|f| (f.name.as_str(), f.line, f.lines))
        .collect();
    assert_eq!(got, vec![("short", 2, 1), ("long", 4, 8)]);
    assert_eq!(
        mods,
        vec![("x".to_string(), Some("x_tests.rs".to_string()))]
    );
}

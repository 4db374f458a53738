//! Golden files for unit tests: a generated text must equal its checked-in copy byte for
//! byte; with `IAPEER_BLESS=1` the copy is rewritten instead (then review the diff).

use std::path::Path;

/// Compare `actual` with the file at `relative` (from the crate root). Panics on a
/// difference, naming the first differing line and `regenerate` (how to refresh the copy).
pub(crate) fn check(relative: &str, actual: &str, regenerate: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    if std::env::var_os("IAPEER_BLESS").is_some_and(|v| v == "1") {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{relative} differs from what the code generates (first difference at line {}); \
             if the change is intended, {regenerate} and review the diff\n\
             --- checked in\n{expected}\n--- generated\n{actual}",
            line + 1
        );
    }
}

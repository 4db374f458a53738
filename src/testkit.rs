//! Helpers that unit tests of several modules share (test builds only).

use std::path::Path;

/// Write `script` to `path` and make it executable (0755): a stand-in program for a test.
/// Panics when either step fails.
pub(crate) fn write_program(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// A temp folder and the storage layout rooted at its `root` subfolder (not created): the
/// folder is removed when the `TempDir` is dropped, so keep it for the test's length.
pub(crate) fn temp_root() -> (tempfile::TempDir, crate::paths::Paths) {
    let dir = tempfile::tempdir().unwrap();
    let paths = crate::paths::Paths::at(dir.path().join("root"));
    (dir, paths)
}

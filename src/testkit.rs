//! Helpers that unit tests of several modules share (test builds only).

use std::path::Path;

/// Write `script` to `path` and make it executable (0755): a stand-in program for a test.
/// Panics when either step fails.
pub(crate) fn write_program(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

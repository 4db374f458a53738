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

/// A temp folder and the path `name` inside it (parent folders made, the file not): the
/// folder is removed when the `TempDir` is dropped, so keep it for the test's length.
pub(crate) fn temp_path(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    (dir, path)
}

/// [`temp_path`] with the file written: `contents` at `name` in a fresh temp folder.
pub(crate) fn temp_file(
    name: &str,
    contents: impl AsRef<[u8]>,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, path) = temp_path(name);
    std::fs::write(&path, contents).unwrap();
    (dir, path)
}

/// Calls `write(t, i)` for `i` in `0..each` on each of `threads` threads `t` running at once,
/// and returns when all are done (a panic in one is the test's panic): concurrent writers.
pub(crate) fn at_once(threads: usize, each: usize, write: impl Fn(usize, usize) + Sync) {
    std::thread::scope(|s| {
        for t in 0..threads {
            let write = &write;
            s.spawn(move || (0..each).for_each(|i| write(t, i)));
        }
    });
}

/// A fresh launch's context in `cwd` on port 8765: no system prompt, not gated, no bearer, the
/// least tool-call timeout. A test changes what it needs with `LaunchCtx { mode: …, ..launch_ctx(…) }`.
pub(crate) fn launch_ctx<'a>(
    paths: &'a crate::paths::Paths,
    cwd: &'a Path,
    env: &'a crate::launch_env::LaunchEnv,
) -> crate::adapter::LaunchCtx<'a> {
    crate::adapter::LaunchCtx {
        paths,
        cwd,
        mode: crate::adapter::WakeMode::Fresh,
        system_prompt: None,
        launch_env: env,
        port: 8765,
        gated: None,
        bearer: false,
        tool_timeout: crate::runtime::MCP_TOOL_TIMEOUT,
    }
}

/// The screen at step `step` of the recorded pty session `tests/fixtures/<folder>/<session>`:
/// `<session>.raw` up to the `offset` its `<session>.marks.json` gives the step, fed to a
/// `rows`×`cols` screen. Panics when a file or the step is missing.
pub(crate) fn recorded_step(
    folder: &str,
    session: &str,
    step: &str,
    rows: u16,
    cols: u16,
) -> crate::term::Screen {
    let dir = format!("{}/tests/fixtures/{folder}", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read(format!("{dir}/{session}.raw")).unwrap();
    let marks: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{dir}/{session}.marks.json")).unwrap(),
    )
    .unwrap();
    let offset = marks
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["step"] == step)
        .and_then(|m| m["offset"].as_u64())
        .unwrap_or_else(|| panic!("no step {step}")) as usize;
    let mut screen = crate::term::Screen::new(rows, cols);
    screen.feed(&raw[..offset], true);
    screen
}

/// The permission bits (`mode & 0o777`) of the file or folder at `path`. Panics when it
/// cannot be read.
pub(crate) fn mode_of(path: impl AsRef<Path>) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

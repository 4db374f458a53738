//! Installing a package the way a user does, with the real `npm`: pack a folder the test
//! wrote (`npm pack`) and install the tarball (`npm install --prefix`), offline with a private
//! cache, so no network and no real home are touched.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Write a package at `<dir>/<folder>`: `package.json` with `name`, `version` and one bin
/// `bin_name` → `bin/<bin_name>.js` holding `program` (made executable).
pub fn write_package(
    dir: &Path,
    folder: &str,
    name: &str,
    version: &str,
    bin_name: &str,
    program: &str,
) -> PathBuf {
    let src = dir.join(folder);
    std::fs::create_dir_all(src.join("bin")).unwrap();
    let manifest = serde_json::json!({
        "name": name, "version": version,
        "bin": {bin_name: format!("bin/{bin_name}.js")}, "files": ["bin"],
    });
    std::fs::write(src.join("package.json"), manifest.to_string()).unwrap();
    let file = src.join("bin").join(format!("{bin_name}.js"));
    std::fs::write(&file, program).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    src
}

/// Pack `src` and install the tarball under `<dir>/npm`; returns the installed bin
/// `<dir>/npm/node_modules/.bin/<bin_name>`. `home` is npm's HOME.
pub fn pack_and_install(dir: &Path, home: &Path, src: &Path, bin_name: &str) -> PathBuf {
    let cache = dir.join("npm-cache");
    let npm = |args: &[&str], cwd: &Path| {
        let out = Command::new("npm")
            .args(args)
            .args([
                "--cache",
                cache.to_str().unwrap(),
                "--offline",
                "--no-audit",
                "--no-fund",
            ])
            .current_dir(cwd)
            .env("HOME", home)
            .output()
            .expect("npm");
        assert!(
            out.status.success(),
            "npm {args:?}: {}",
            super::describe(&out)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let tarball = npm(&["pack", "--silent"], src);
    let prefix = dir.join("npm");
    std::fs::create_dir_all(&prefix).unwrap();
    npm(
        &[
            "install",
            "--prefix",
            prefix.to_str().unwrap(),
            src.join(&tarball).to_str().unwrap(),
        ],
        &prefix,
    );
    prefix.join("node_modules/.bin").join(bin_name)
}

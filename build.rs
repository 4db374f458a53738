//! Build script: one link flag for release binaries on Linux.
//!
//! A release binary keeps line tables (`debug = "line-tables-only"` in Cargo.toml) so that a
//! panic's backtrace names the file and line; `scripts/release.sh` then moves them into
//! `iapeer-<id>.debug` beside the binary (README "Release binary"). On Linux the linker is
//! asked to compress them with zlib (`--compress-debug-sections=zlib`, GNU ld, gold, lld and
//! mold all take it), which the debug file keeps: 9.6 MB instead of about 30. Rust's backtraces
//! read zlib-compressed sections (they do not read zstd ones, which is why zlib). macOS keeps
//! its debug info outside the binary already, so nothing is added there.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if release && linux {
        println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    }
}

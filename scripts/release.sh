#!/usr/bin/env bash
# The release build (README "Release binary"): `cargo build --release`, then on Linux the debug
# info (line tables and inlined frames: `debug = "line-tables-only"` in Cargo.toml) moved out
# of target/release/iapeer into target/release/iapeer-<id>.debug beside it
# (scripts/split-debug.sh), which keeps the binary under 10 MB and a panic's backtrace with file
# and line. scripts/install.sh, `iapeer update` and `iapeer rollback` carry the debug file with
# the binary. Cargo does not run steps after a build, hence this script.
#
#   scripts/release.sh [cargo build options]     # prints the binary and its debug file
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
cargo build --release "$@"
bin="$target/release/iapeer"
if [[ "$(uname -s)" != Linux ]]; then
    echo "release binary: $bin ($(wc -c <"$bin") bytes; its debug info where the platform keeps it)"
    exit 0
fi
# A DWARF package left by a build before split-debuginfo was "off" (std would open it too).
rm -f "$target/release/iapeer.dwp"
debug="$(scripts/split-debug.sh "$bin")"
echo "release binary: $bin ($(wc -c <"$bin") bytes)"
echo "its debug info: $debug ($(wc -c <"$debug") bytes; keep it beside the binary)"

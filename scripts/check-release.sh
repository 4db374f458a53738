#!/usr/bin/env bash
# The release binary's two promises (README "Release binary", issue 29 item 7), checked on real
# release builds — minutes of fat LTO each, so by hand rather than in scripts/test.sh, whose
# tests/release.rs checks the same split, install and backtrace on the debug build:
#   1. scripts/release.sh makes a binary of at most 10 MB (10 000 000 bytes);
#   2. that build, with the test hooks compiled in (`--features test-hooks`, in its own target
#      folder target/check-release so the release binary stays as it is), installed by
#      scripts/install.sh, names file and line in a panic's backtrace
#      (tests/release.rs with IAPEER_TEST_RELEASE_BIN).
#
#   scripts/check-release.sh
set -euo pipefail
cd "$(dirname "$0")/.."

limit=10000000
target="${CARGO_TARGET_DIR:-target}"
echo "== scripts/release.sh"
scripts/release.sh --quiet
size="$(wc -c <"$target/release/iapeer")"
if [[ "$size" -gt "$limit" ]]; then
    echo "check-release.sh: $target/release/iapeer is $size bytes, more than $limit" >&2
    exit 1
fi
echo "size: $size bytes (at most $limit)"

echo "== scripts/release.sh --features test-hooks (target/check-release)"
hooks_target="$PWD/target/check-release"
CARGO_TARGET_DIR="$hooks_target" scripts/release.sh --quiet --features test-hooks

echo "== tests/release.rs on that binary"
IAPEER_TEST_RELEASE_BIN="$hooks_target/release/iapeer" \
    cargo test --quiet --test integration release:: -- --nocapture

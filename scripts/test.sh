#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls exactly this):
# format check, clippy with warnings as errors, unit and integration tests — including the
# official MCP Python SDK as a real client and the demo — and a short coverage-guided run of
# every fuzz target (scripts/fuzz.sh). Installs what it needs itself.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --all-targets --quiet -- -D warnings

echo "== python venv with the official MCP SDK (cached in .cache/venv)"
scripts/setup-python.sh
export IAPEER_TEST_PYTHON="$PWD/.cache/venv/bin/python"

echo "== the real agent CLIs from npm (cached in .cache/agents)"
scripts/setup-agents.sh
export IAPEER_TEST_CLAUDE_BIN="$PWD/.cache/agents/node_modules/.bin/claude"
export IAPEER_TEST_CODEX_BIN="$PWD/.cache/agents/node_modules/.bin/codex"

echo "== the fuzz package (tests/fuzz): fmt, clippy, seeds and regressions replayed"
# Same target folder as the main crate (the two lockfiles pin the same versions), so this reuses
# its compiled dependencies instead of building them again.
fuzz_manifest=tests/fuzz/Cargo.toml
cargo fmt --manifest-path "$fuzz_manifest" -- --check
CARGO_TARGET_DIR="$PWD/target" cargo clippy --manifest-path "$fuzz_manifest" --all-targets --quiet -- -D warnings
CARGO_TARGET_DIR="$PWD/target" cargo test --manifest-path "$fuzz_manifest" --lib --quiet

echo "== a short coverage-guided run of every fuzz target (AFL++; ${IAPEER_FUZZ_SECONDS:=5}s each)"
AFL_FAST_CAL=1 scripts/fuzz.sh all "$IAPEER_FUZZ_SECONDS"

echo "== cargo test"
cargo test --all-targets

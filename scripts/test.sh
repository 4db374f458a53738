#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls exactly this):
# format check, clippy with warnings as errors, unit and integration tests — including the
# official MCP Python SDK as a real client and the demo. Installs what it needs itself.
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

echo "== cargo test"
cargo test --all-targets

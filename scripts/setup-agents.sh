#!/usr/bin/env bash
# Install the real agent CLIs used by the end-to-end tests (spec 12 layer 4) into
# .cache/agents, reused between runs when the pinned versions are present, and bun, the runtime
# of @agfpd/telegram-runtime, whose fleet client tests/telegram.rs runs, and Gemini CLI and
# OpenCode (issue 27). Prints the versions.
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_VERSION=2.1.332
CODEX_VERSION=0.171.0
BUN_VERSION=1.4.4
GEMINI_VERSION=0.61.0
OPENCODE_VERSION=1.18.33
DIR=.cache/agents
mkdir -p "$DIR"
have() { [ -f "$DIR/node_modules/$1/package.json" ] && grep -q "\"version\": \"$2\"" "$DIR/node_modules/$1/package.json"; }
if ! have @anthropic-ai/claude-code "$CLAUDE_VERSION" || ! have @openai/codex "$CODEX_VERSION" \
  || ! have bun "$BUN_VERSION" || ! have @google/gemini-cli "$GEMINI_VERSION" \
  || ! have opencode-ai "$OPENCODE_VERSION"; then
  npm install --no-audit --no-fund --loglevel=error --prefix "$DIR" \
    "@anthropic-ai/claude-code@$CLAUDE_VERSION" "@openai/codex@$CODEX_VERSION" "bun@$BUN_VERSION" \
    "@google/gemini-cli@$GEMINI_VERSION" "opencode-ai@$OPENCODE_VERSION"
fi
"$DIR/node_modules/.bin/claude" --version
"$DIR/node_modules/.bin/codex" --version
echo "bun $("$DIR/node_modules/.bin/bun" --version)"
echo "gemini $("$DIR/node_modules/.bin/gemini" --version)"
echo "opencode $("$DIR/node_modules/.bin/opencode" --version)"

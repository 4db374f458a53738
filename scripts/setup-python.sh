#!/usr/bin/env bash
# Create .cache/venv with the official MCP Python SDK (used by tests/mcp.rs as a real client).
# Idempotent: reuses the venv when the package is already importable.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import mcp" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet "mcp>=1.9"
fi
"$VENV/bin/python" -c "import mcp, importlib.metadata as m; print('mcp', m.version('mcp'))"

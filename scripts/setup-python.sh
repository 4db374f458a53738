#!/usr/bin/env bash
# Create .cache/venv with the official MCP Python SDK (used by tests/mcp.rs as a real client)
# and Selenium (tests/ui.rs drives the operator's page in headless Chromium with it).
# Idempotent: reuses the venv when the packages are already importable.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import mcp" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet "mcp>=1.9"
fi
# Pinned: the browser test's waits and element calls are written against this version.
SELENIUM=4.51.0
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('selenium') != '$SELENIUM')" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet "selenium==$SELENIUM"
fi
"$VENV/bin/python" -c "import mcp, importlib.metadata as m; print('mcp', m.version('mcp'), 'selenium', m.version('selenium'))"

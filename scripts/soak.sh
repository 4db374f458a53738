#!/usr/bin/env bash
# Soak the real daemon under a mixed load for a bounded time (issue 12 item 6) and check that
# nothing leaks or is lost: see scripts/soak/soak.py for the load and the checks.
#
#   scripts/soak.sh [seconds]   default 1800 (30 minutes); warm-up min(120, seconds/10)
#   scripts/soak.sh --smoke     a 40 s run with a 10 s warm-up (not part of CI)
#
# Never touches the real ~/.iapeer: a temp HOME and IAPEER_ROOT, port 0 on 127.0.0.1, and
# every process it starts is ended by pid. Knobs: SOAK_KEEP=1 keeps the temp folder,
# SOAK_NO_BUILD=1 skips `cargo build --release`, SOAK_IDLE_SECS (default 6).
# Exit status: 0 when every check passed, 1 when one failed, 2 when the soak could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
if [ "$(uname -s)" != "Linux" ]; then
  echo "soak.sh reads /proc: Linux only" >&2
  exit 2
fi
command -v python3 >/dev/null 2>&1 || {
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 >/dev/null
}
SECS=1800
WARM=""
case "${1:-}" in
  --smoke) SECS=40; WARM=10 ;;
  "") ;;
  *[!0-9]*) echo "usage: scripts/soak.sh [seconds | --smoke]" >&2; exit 2 ;;
  *) SECS=$1 ;;
esac
if [ -z "$WARM" ]; then
  WARM=$(( SECS / 10 )); [ "$WARM" -gt 120 ] && WARM=120; [ "$WARM" -lt 5 ] && WARM=5
fi
if [ "${SOAK_NO_BUILD:-0}" != "1" ]; then
  echo "building the release binary (cargo build --release)…"
  cargo build --release --quiet
fi
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' ||
  echo "$REPO/target")
BIN=${SOAK_BIN:-$TARGET_DIR/release/iapeer}
[ -x "$BIN" ] || { echo "no binary at $BIN" >&2; exit 2; }
exec python3 -B "$REPO/scripts/soak/soak.py" "$BIN" "$SECS" "$WARM"

#!/usr/bin/env bash
# The figures of issue 26 item 5: SIGTERM and SIGKILL cycles of the real daemon during bursts
# from 4 concurrent `iapeer send` processes to two echo agents, checking that what each sender
# was told matches where its message landed (delivered <-> once in the recipient's transcript,
# NOT delivered <-> absent, kept in the outbox <-> once after the next start, state unknown
# <-> at most once) and that no recipient got a message twice, retries of every "unknown"
# with its id included. It runs the suite's test `truth::sigterm_and_kill_cycles_…` with more
# cycles and prints its table.
#
#   scripts/truth.sh [cycles]   default 8 (8 SIGTERM + 8 SIGKILL cycles), release build
#
# Knobs: TRUTH_PROFILE=debug uses the debug build (faster to build, slower to run).
# Never touches the real ~/.iapeer: the test runs in a temp HOME and IAPEER_ROOT, port 0 on
# 127.0.0.1, and ends every process it started by pid.
# Exit status: 0 when every check passed, else the test's failure.
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${1:-8}
case "$CYCLES" in
  ''|*[!0-9]*) echo "usage: scripts/truth.sh [cycles]" >&2; exit 2 ;;
esac
PROFILE=()
# A release build has the daemon's test hooks (which the integration tests need) only with the feature.
[ "${TRUTH_PROFILE:-release}" = "release" ] && PROFILE=(--release --features test-hooks)
IAPEER_TRUTH_CYCLES=$CYCLES exec cargo test "${PROFILE[@]}" --test integration \
  truth::sigterm_and_kill_cycles_tell_every_sender_the_truth -- --exact --nocapture

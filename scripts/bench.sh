#!/usr/bin/env bash
# Benchmark iapeer on this machine: `iapeer send` / MCP tools/call / control ping latency,
# daemon memory and threads with 0, 10 and 50 live echo peers, idle CPU and wakeups with 10
# live peers over 60 s, a comparison with tmux (`send-keys`, `paste-buffer` + Enter) into a
# pane running the same echo agent, a burst of 1 000 concurrent MCP tools/call from 1 000
# connections to 20 live echo peers (scripts/bench/burst.py), and the real Claude Code, Codex,
# Gemini CLI and OpenCode (scripts/setup-agents.sh installs them into .cache/agents) with a loopback
# stand-in model API: `iapeer send` to an asleep peer until `…, woke`, and to a live one.
# It ends with one [PASS]/[MISS] line per target of issue 13 (scripts/bench/targets.py), each
# with median, p99 and its reference from the same run. A benchmark, not a test: not in CI.
#
# Never touches the real ~/.iapeer: temp HOMEs and IAPEER_ROOTs, port 0, and every process it
# starts is ended by pid. Installs tmux / python3 with apt-get when missing.
#
# Knobs: BENCH_RUNS=N (default 200), BENCH_QUICK=1 (under 2 minutes: 20 runs, 0/10 peers,
#        10 s idle window, 1 warm-up + 3 agent cycles per runtime; the burst stays 1 000
#        calls), BENCH_PINGS, BENCH_IDLE_SECS, BENCH_PEERS="0,10,50", BENCH_IDLE_PEERS=10,
#        BENCH_BURST_CALLS=1000 (0 skips the burst), BENCH_BURST_PEERS=20, BENCH_BURSTS=3,
#        BENCH_BURST_ONLY=1 (only the burst phase: BENCH_BURSTS bursts, each one's daemon
#        overhead p50/p99 with the load average, and the daemon's CPU and run-queue wait
#        per thread group from /proc/<pid>/task/*/schedstat; issue 31 item 3),
#        BENCH_AGENTS=claude,codex,gemini,opencode (0 skips the agent phase), BENCH_AGENT_RUNS=10,
#        BENCH_AGENTS_ONLY=1 (only the agent phase and its floor: the FLOOR and AGENTS tables
#        and each selected runtime's live send -> model request line beside its floor),
#        BENCH_MODEL_DELAY_MS=0 (the stand-in model thinks this long before each answer: what
#        of a wake waits on the model; a real model's first answer takes seconds),
#        BENCH_PERF=/tmp/burst.perf (perf record of the daemon during the burst),
#        BENCH_OUT=/tmp/file.txt, BENCH_KEEP=1 (keep the temp folders), BENCH_NO_BUILD=1,
#        BENCH_CORRECTNESS=N (the correctness mode of issue 13 item 1 and issue 27 item 5: N
#        consecutive deliveries of 1 B-16 KB bodies to echo, the real Claude Code, Codex,
#        Gemini CLI and OpenCode — tests/correctness.rs with IAPEER_CORRECTNESS_N=N — before
#        the rest; a `correctness:` line per runtime, and for Gemini CLI and OpenCode a
#        `latency:` line (send -> model request of every live delivery, with the load
#        average); 500 takes about an hour for the first three),
#        BENCH_CORRECTNESS_RUNTIMES=echo,claude,codex,gemini,opencode (which of them),
#        BENCH_CORRECTNESS_STRICT=1 (a send answered `state unknown` stops the runtime's run;
#        by default it is counted, the run carries on, and the line ends with
#        `N state-unknown (k reached the model once, m never, j twice or more)` from the
#        model stand-in's requests — IAPEER_CORRECTNESS_UNKNOWN=count),
#        BENCH_WAKES=1 (only the wake check of issue 31 item 1: BENCH_AGENT_RUNS wakes per
#        runtime, default 100, a count of first model requests without send_to_peer and the
#        wake latency median and p90 per runtime — scripts/bench/wakecheck.py),
#        BENCH_FLOOR=0 (skip the runtimes' floor: Claude Code and Codex driven directly in a
#        bare pty with no daemon, each step of a wake and a live delivery timed on the
#        daemon's own screen signs; Gemini CLI and OpenCode started once, warm, one live
#        delivery per cycle — scripts/bench/floor.py — one floor cycle after each
#        cycle of the agent phase and the wake check, so both see the same load; the wake
#        target is iapeer's part above it), BENCH_FLOOR=only (the floor alone, no build:
#        BENCH_FLOOR_RUNS cycles per runtime, default 20),
#        BENCH_SCALE=10,100,1000 (the scale mode of issue 31 item 4, instead of the rest: one
#        daemon with that many live echo sessions in turn, and at each level its VmRSS and PSS,
#        descriptors per session (and what they are), threads, `iapeer send` p50 and wake p50
#        (scripts/bench/scale.py; BENCH_SCALE=1 for 10,100,1000; about 5 minutes),
#        BENCH_FEDERATION=1 (the federation line of issue 28 item 8, instead of the rest: a
#        private redis-server on loopback, two daemons as hosts a and b, a live echo send to a
#        local peer and to b's, interleaved, BENCH_FED_RUNS=100 each; goal remote p50 ≤ local
#        p50 + 5 ms — scripts/bench/federation.py).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ "$(uname -s)" != "Linux" ]; then
  echo "bench.sh reads /proc: Linux only" >&2
  exit 2
fi

echo "uptime at start: $(uptime)"
if [ "${BENCH_NO_BUILD:-0}" != "1" ] && [ "${BENCH_FLOOR:-1}" != "only" ]; then
  echo "building the release binary (cargo build --release)…"
  cargo build --release --quiet
fi
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' ||
  echo "$REPO/target")
# The floor driver (scripts/bench/floor.py) reads the CLIs' screens with pyte (pip, into the
# target folder: never the system's or the shared venv's packages).
BENCH_PY="$TARGET_DIR/bench-py"
if [ "${BENCH_FLOOR:-1}" != "0" ] && ! PYTHONPATH="$BENCH_PY" python3 -c 'import pyte' 2>/dev/null; then
  echo "installing pyte into $BENCH_PY for the floor driver (pip)"
  python3 -m pip install --quiet --target "$BENCH_PY" pyte >/dev/null 2>&1 ||
    echo "pip could not install pyte: the floor is reported as not measured" >&2
fi
export PYTHONPATH="$BENCH_PY${PYTHONPATH:+:$PYTHONPATH}"

# The runtimes' floor alone (issue 31 item 2): the CLIs of BENCH_AGENTS in a bare pty.
if [ "${BENCH_FLOOR:-1}" = "only" ]; then
  exec python3 -B "$REPO/scripts/bench/floor.py"
fi

BIN="$TARGET_DIR/release/iapeer"
[ -x "$BIN" ] || { echo "no release binary at $BIN" >&2; exit 1; }

if [ -n "${BENCH_CORRECTNESS:-}" ]; then
  scripts/setup-agents.sh >/dev/null
  scripts/setup-python.sh >/dev/null
  export BENCH_CORRECTNESS_LOG=${BENCH_CORRECTNESS_LOG:-$(mktemp /tmp/iapeer-correctness.XXXXXX)}
  echo "correctness mode: $BENCH_CORRECTNESS deliveries per runtime (output: $BENCH_CORRECTNESS_LOG)"
  filters=()
  for rt in $(echo "${BENCH_CORRECTNESS_RUNTIMES:-echo,claude,codex,gemini,opencode}" | tr , ' '); do
    filters+=("correctness::${rt}_consecutive")
  done
  bins=$REPO/.cache/agents/node_modules/.bin
  unknown=count
  [ "${BENCH_CORRECTNESS_STRICT:-0}" = "1" ] && unknown=stop
  IAPEER_CORRECTNESS_N=$BENCH_CORRECTNESS IAPEER_CORRECTNESS_UNKNOWN=$unknown \
    IAPEER_TEST_PYTHON=$REPO/.cache/venv/bin/python \
    IAPEER_TEST_CLAUDE_BIN=$bins/claude IAPEER_TEST_CODEX_BIN=$bins/codex \
    IAPEER_TEST_GEMINI_BIN=$bins/gemini IAPEER_TEST_OPENCODE_BIN=$bins/opencode \
    cargo test --quiet --test integration -- "${filters[@]}" --test-threads=1 --nocapture \
    >"$BENCH_CORRECTNESS_LOG" 2>&1 || true
  grep -E '^correctness: [a-z]*-[a-z]*: ([0-9]* deliveries, 0|Enter pressed again|delivery [0-9]* .*state unknown)|^latency: ' \
    "$BENCH_CORRECTNESS_LOG" || true
fi

# The wake check alone (issue 31 item 1): BENCH_AGENT_RUNS (100) wakes per runtime, each
# first model request checked for send_to_peer (scripts/bench/wakecheck.py).
if [ "${BENCH_WAKES:-0}" = "1" ]; then
  exec python3 -B "$REPO/scripts/bench/wakecheck.py" "$BIN" "$REPO"
fi

if [ -n "${BENCH_SCALE:-}" ]; then
  levels=$BENCH_SCALE
  [ "$levels" = "1" ] && levels=10,100,1000
  exec python3 -B "$REPO/scripts/bench/scale.py" "$BIN" "$levels"
fi

if [ "${BENCH_FEDERATION:-0}" = "1" ]; then
  exec python3 -B "$REPO/scripts/bench/federation.py" "$BIN"
fi

# Python is the parent of every process the bench starts and ends them in its `finally`;
# exec keeps signals (Ctrl-C) going straight to it.
exec python3 -B "$REPO/scripts/bench/bench.py" "$BIN" "$REPO"

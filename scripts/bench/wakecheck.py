"""The wake cycle of the benchmark alone (issue 31 item 1): the real Claude Code / Codex CLIs
woken through iapeer `runs` times each (agentbench.py, stand-in model), every first model
request of a wake checked for `send_to_peer`, and one line per runtime with the count of
wakes whose first turn went to the model WITHOUT the tool, beside the wake latency
(`iapeer send` to an asleep peer until `…, woke`: median, p90) and the load average.

Usage: python3 wakecheck.py <iapeer binary> <repo root>
Environment: BENCH_AGENTS (claude,codex), BENCH_AGENT_RUNS (100), BENCH_KEEP=1,
BENCH_FLOOR=0 (skip the runtimes' floor, floor.py: one cycle after each wake cycle),
BENCH_OUT (the result lines are also written there, the raw samples beside it as .json).
Driven by `scripts/bench.sh` with BENCH_WAKES=1.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import agentbench  # noqa: E402
from report import write_out  # noqa: E402
import floor  # noqa: E402
import targets  # noqa: E402


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, repo = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    rts = [x.strip() for x in os.environ.get("BENCH_AGENTS", "claude,codex").split(",")
           if x.strip()]
    runs = int(os.environ.get("BENCH_AGENT_RUNS") or 100)
    # The runtimes' own floor, one cycle after each of the daemon's (BENCH_FLOOR=0 skips
    # it): the wake target is iapeer's part above it (issue 31 item 2).
    floors = floor.Interleaved(rts, log) if os.environ.get("BENCH_FLOOR", "1") != "0" else None
    b = agentbench.AgentBench(binary, repo, runs, rts, os.environ.get("BENCH_KEEP") == "1",
                              log, between=floors.cycle if floors else None)
    loads = {"start": load()}
    try:
        res = b.run()
    finally:
        b.close()
        floor_res = floors.result() if floors else None
    loads["end"] = load()
    lines = [f"WAKES ({binary}; load average at start {loads['start']}, at end {loads['end']})"]
    lines += agentbench.tool_lines(res)
    lines += [""] + agentbench.render(res)
    r = {"agents": res}
    if floor_res is not None:
        r["floor"] = floor_res
        lines += [""] + floor.render(floor_res)
    lines += ["", "TARGETS (issue 31 item 2: iapeer's part of a wake above the runtime's floor)"]
    settles = {rt: 0 for rt in rts}
    lines += [targets.item2_wake(r, rt, settles[rt]) for rt in rts]
    lines += [targets.item1_agent(r, rt) for rt in rts]
    text = "\n".join(lines)
    print(text)
    write_out(text, agentbench.to_json({"agents": res, "floor": floor_res}))
    return 0 if all("error" not in res.get(rt, {}) for rt in rts) else 1


if __name__ == "__main__":
    sys.exit(main())

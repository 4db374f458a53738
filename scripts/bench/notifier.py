#!/usr/bin/env python3
"""Figures for the built-in notifier (issue 9): timer fire jitter and idle CPU.

Usage: python3 scripts/bench/notifier.py [--bin target/release/iapeer] [--seconds 120]
       [--idle-seconds 60] [--triggers 100]

On a private temp root (temp HOME and IAPEER_ROOT, port 0, every process cleaned up by pid):

1. Jitter. A human peer `ops` (an inbox: no echo, no storm guard) registers
   `@every 1s` with the service peer `timer` and the timer runs for --seconds. For every fire,
   from the timer's own log (<root>/logs/notifier/timer.log): `wake` = the start of the
   delivery (`deliver-attempt`) minus the scheduled instant, `delivered` = when `iapeer send`
   answered delivered (`sent`) minus the scheduled instant. p50/p99/max in ms.
2. Idle CPU. `ops` registers --triggers timers (daily cron) and --triggers watchers (a
   sleeping script each); then the CPU time of the two `iapeer notifier-run` processes is read
   from /proc/<pid>/stat (utime+stime, ticks) and /proc/<pid>/task/*/schedstat (ns) over
   --idle-seconds, with their context switches (wakeups).
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import procfs  # noqa: E402
from world import World  # noqa: E402


def parse_log(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                fields = {}
                for part in line.strip().split(" "):
                    k, _, v = part.partition("=")
                    fields[k] = v.strip('"')
                out.append(fields)
    except FileNotFoundError:
        pass
    return out


def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = min(len(v) - 1, max(0, round(p / 100 * (len(v) - 1))))
    return v[k]


def send(world, to, body):
    world.run(["send", to, "--from", "human-ops", "--message", body])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/iapeer")
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--idle-seconds", type=int, default=60)
    ap.add_argument("--triggers", type=int, default=100)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    world = World(os.path.abspath(a.bin), keep=a.keep, prefix="iapeer-notifier-bench.")
    try:
        world.run(["create", "ops", "--runtime", "human"])
        world.run(["create", "timer", "--runtime", "notifier"])
        world.run(["create", "watcher", "--runtime", "notifier"])
        world.start_daemon()
        timer_log = os.path.join(world.root, "logs/notifier/timer.log")

        # 1. jitter
        send(world, "timer", json.dumps(
            {"id": "tick", "when": "@every 1s", "message": "tick", "target": "self"}))
        print(f"jitter: @every 1s for {a.seconds} s …", flush=True)
        time.sleep(a.seconds)
        send(world, "timer", json.dumps({"cmd": "unregister", "id": "tick"}))
        time.sleep(2)
        events = parse_log(timer_log)
        attempts = {e["sig"]: ts(e["ts"]) for e in events if e.get("ev") == "deliver-attempt"}
        wake, delivered = [], []
        for e in events:
            if e.get("ev") == "sent" and e.get("kind") == "fire" and e.get("scheduled"):
                sched = ts(e["scheduled"])
                delivered.append((ts(e["ts"]) - sched) * 1000)
                if e["sig"] in attempts:
                    wake.append((attempts[e["sig"]] - sched) * 1000)
        fails = sum(1 for e in events if e.get("ev") == "deliver-failed")
        for name, vals in (("wake (scheduled → send started)", wake),
                           ("delivered (scheduled → send answered delivered)", delivered)):
            print(f"  {name}: n={len(vals)} p50={pct(vals, 50):.1f} ms "
                  f"p99={pct(vals, 99):.1f} ms max={max(vals, default=float('nan')):.1f} ms "
                  f"mean={statistics.fmean(vals) if vals else float('nan'):.1f} ms")
        print(f"  failed attempts: {fails}")

        # 2. idle CPU with registered triggers
        print(f"idle: registering {a.triggers} timers and {a.triggers} watchers …", flush=True)
        for i in range(a.triggers):
            send(world, "timer", json.dumps(
                {"id": f"daily-{i}", "when": f"{i % 60} {i % 24} * * *",
                 "message": f"daily {i}", "target": "self"}))
            send(world, "watcher", json.dumps(
                {"id": f"w-{i}", "script": "exec sleep 86400", "target": "self"}))
        time.sleep(5)
        sessions = world.sessions()
        pids = {name: sessions[f"notifier-{name}"]["pid"] for name in ("timer", "watcher")}
        before = {n: (procfs.cpu_ticks(p), procfs.sched_ns(p), procfs.ctx_switches(p))
                  for n, p in pids.items()}
        print(f"idle: measuring {a.idle_seconds} s …", flush=True)
        time.sleep(a.idle_seconds)
        for n, p in pids.items():
            t0, s0, c0 = before[n]
            t1, s1, c1 = procfs.cpu_ticks(p), procfs.sched_ns(p), procfs.ctx_switches(p)
            cpu_ms = (s1 - s0) / 1e6
            print(f"  {n} (pid {p}): {t1 - t0} ticks ({procfs.CLK_TCK}/s), "
                  f"{cpu_ms:.1f} ms CPU in {a.idle_seconds} s = "
                  f"{100 * cpu_ms / 1000 / a.idle_seconds:.4f} % of a core, "
                  f"{c1 - c0} context switches, {procfs.threads(p)} threads, "
                  f"RSS {procfs.vm_rss_kib(p)} KiB")
    finally:
        world.close()


if __name__ == "__main__":
    main()

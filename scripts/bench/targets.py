"""The targets of issue 13, each judged against its reference measured in the same run and
printed as one line: `PASS`/`MISS`, the target, the figures (median and p99) and the
reference. A target whose measure did not run (or cannot be taken yet) is `MISS` with
"not measured" and the reason, so a quick look never mistakes a gap for a pass.

Verdicts are on medians unless the target names p99; the p99 is printed beside them.
"""

import os
import re
from report import summary

MS = 1e6

# Issue 13's limits.
SEND_VS_TMUX = 1.5          # item 1: live echo send <= 1.5 x tmux paste-buffer + Enter
MODEL_REQUEST_MS = 150      # item 1: live agent send -> stand-in model request
FLOOR_MARGIN_MS = 50        # issue 31 item 2: wake ready screen -> delivered <= floor + 50 ms
OVERHEAD_P99_MS = 5         # item 3: daemon overhead per call, p99
POOL_THREADS = 5            # item 3: the send-preparation pool (4) and the topic writer (1)
IDLE_CPU_PCT = 0.0005       # item 4: prints as 0.000 %
IDLE_WAKEUPS_PER_AGENT = 0.1  # item 4: "~0 wakeups" = under one per 10 s per agent


def _ms(s, key, div=1):
    return f"{s[key] / div:.1f}"


def _line(ok, item, target, figures):
    tag = "PASS" if ok else "MISS"
    return f"[{tag}] {item:<3} {target}: {figures}"


def _not_measured(item, target, why):
    return f"[MISS] {item:<3} {target}: not measured — {why}"


def item1_echo(r):
    target = f"live echo send (whole CLI) <= {SEND_VS_TMUX} x tmux paste-buffer+Enter"
    if not r.get("cli") or not r.get("tmux_paste"):
        return _not_measured("1", target, "the latency phase did not run")
    c, t = summary(r["cli"]), summary(r["tmux_paste"])
    limit = SEND_VS_TMUX * t["median"]
    return _line(c["median"] <= limit, "1", target,
                 f"send median {_ms(c, 'median', MS)} p99 {_ms(c, 'p99', MS)} ms; "
                 f"reference tmux median {_ms(t, 'median', MS)} p99 {_ms(t, 'p99', MS)} ms "
                 f"-> limit {limit / MS:.1f} ms (ratio {c['median'] / t['median']:.1f}x)")


def _agent(r, rt):
    """The agent results for `rt`, or the reason there are none."""
    a = r.get("agents")
    if a is None:
        return None, "agent phase skipped (BENCH_AGENTS=0)"
    if "error" in a:
        return None, f"agent phase failed: {a['error'][:120]}"
    x = a.get(rt)
    if x is None:
        return None, f"{rt} not selected (BENCH_AGENTS)"
    if "error" in x:
        return None, f"{rt} series failed: {x['error'][:120]}"
    return x, None


# The runtimes of the agent phase with a live send -> model request target (issue 13 item 1,
# issue 27 item 5).
AGENT_RUNTIMES = ("claude", "codex", "gemini", "opencode")


def item1_agent(r, rt):
    target = f"live {rt} send -> stand-in model request <= {MODEL_REQUEST_MS} ms"
    x, why = _agent(r, rt)
    if x is None:
        return _not_measured("1", target, why)
    s = summary([v["model_request_ms"] for v in x["live"]])
    floor, why = floor_of(r, rt, "live_paste_to_model")
    beside = (f"; floor (bare pty paste -> model request) {floor:.0f} ms, ratio "
              f"{s['median'] / floor:.2f}x, iapeer's part {s['median'] - floor:+.0f} ms "
              f"(goal <= +{FLOOR_MARGIN_MS})" + (
                  f"; the runtime's own floor is above {MODEL_REQUEST_MS} ms"
                  if floor > MODEL_REQUEST_MS else "")
              if floor else f"; no floor: {why}")
    return _line(s["median"] <= MODEL_REQUEST_MS, "1", target,
                 f"median {s['median']:.0f} p99 {s['p99']:.0f} ms (n={s['n']}){beside}"
                 + load_note(r, rt))


CORRECTNESS_RUNTIMES = (("echo", "echo-eb"), ("claude", "claude-cb"), ("codex", "codex-cx"))


def item1_correctness(log_path):
    """One line per runtime from the correctness mode's output (tests/correctness.rs run with
    IAPEER_CORRECTNESS_N; bench.sh writes it to BENCH_CORRECTNESS_LOG)."""
    if not log_path:
        return [_not_measured("1", "N deliveries per runtime, 0 swallowed/merged/false refusals",
                              "run with BENCH_CORRECTNESS=500 for the correctness mode")]
    try:
        text = open(log_path, encoding="utf-8", errors="replace").read()
    except OSError as e:
        return [_not_measured("1", "correctness mode", f"cannot read {log_path}: {e}")]
    out = []
    for rt, ident in CORRECTNESS_RUNTIMES:
        ok = re.search(rf"correctness: {ident}: (\d+) deliveries, 0 swallowed, 0 merged", text)
        run = re.search(rf"correctness: {ident}: (\d+) deliveries, (\d+) queued by the runtime, "
                        rf"Enter on the settle fallback (\d+), slowest answer (\d+) ms", text)
        target = f"{rt}: consecutive deliveries 1 B-16 KB, 0 swallowed / merged / false refusals"
        if ok and run:
            out.append(_line(True, "1", target,
                             f"{ok.group(1)} deliveries, all one turn with exactly their body; "
                             f"{run.group(2)} queued by the runtime, Enter on the settle "
                             f"fallback {run.group(3)}, slowest answer {run.group(4)} ms"))
        else:
            failed = re.search(rf"correctness::{rt}_\S+ \.\.\. (\S+)", text)
            why = (f"the test {failed.group(1)}" if failed else "no result line")
            first = re.search(r"panicked at .*\n(.*)", text)
            out.append(_line(False, "1", target,
                             why + (f": {first.group(1)[:300]}" if first and failed else "")))
    return out


def floor_of(r, rt, key):
    """The floor's median of `key` for `rt` (floor.py, the CLI in a bare pty), or the reason
    there is none."""
    f = r.get("floor")
    if f is None:
        return None, "the floor was not measured (BENCH_FLOOR=0)"
    x = f.get(rt)
    if x is None:
        return None, f"no floor for {rt}"
    if "error" in x:
        return None, f"the {rt} floor failed: {x['error'].splitlines()[0][:120]}"
    xs = [s[key] for s in x["samples"] if key in s]
    if not xs:
        return None, f"no {rt} floor cycle finished"
    return summary(xs)["median"], None


def item2_wake(r, rt, ready_settle_ms):
    """Issue 31 item 2: iapeer's part of a wake. Ready screen -> delivered (lifecycle `ready`
    screen_ms + `ready` -> delivery.log ts) against the runtime's own floor for the same steps
    (ready -> tool listing, paste -> drawn, Enter -> delivered, floor.py), at the median."""
    target = f"wake {rt}: ready screen -> delivered <= the runtime's floor + {FLOOR_MARGIN_MS} ms"
    x, why = _agent(r, rt)
    if x is None:
        return _not_measured("2", target, why)
    floor, why = floor_of(r, rt, "ready_to_delivered")
    cold = "; no warm-up: the first wake of the run, cold" if not r["agents"].get(
        "warmup", 1) else ""
    exact = [v["screen_to_delivered_ms"] for v in x["asleep"] if "screen_to_delivered_ms" in v]
    if not exact:
        return _not_measured("2", target, "no lifecycle `ready` line with screen_ms for the "
                             f"wakes (the adapter's ready settle is {ready_settle_ms} ms)")
    if floor is None:
        return _not_measured("2", target, why)
    s = summary(exact)
    parts = summary([v["ready_to_delivered_ms"] for v in x["asleep"]
                     if "ready_to_delivered_ms" in v])
    mcp = [v["mcp_before_ready_ms"] for v in x["asleep"] if "mcp_before_ready_ms" in v]
    mcp_note = (f"; the agent's MCP client listed the tools a median "
                f"{summary(mcp)['median']:.0f} ms before `ready`" if mcp else "")
    # A wake counts only if the model's first request had the tool to answer with.
    tooled = [v.get("has_tool") for v in x["asleep"]]
    without = sum(1 for t in tooled if t is False)
    tool_note = (f"; {without} of {len(tooled)} first model requests WITHOUT send_to_peer"
                 if without else "; send_to_peer in every first model request")
    limit = floor + FLOOR_MARGIN_MS
    return _line(s["median"] <= limit and not without, "2", target,
                 f"median {s['median']:.0f} p99 {s['p99']:.0f} ms (n={s['n']}{cold}); floor "
                 f"{floor:.0f} ms -> limit {limit:.0f} ms (ratio {s['median'] / floor:.2f}x, "
                 f"iapeer's part {s['median'] - floor:+.0f} ms); of it `ready` -> delivered "
                 f"median {parts['median']:.0f} ms{mcp_note}{tool_note}"
                 + load_note(r, rt))


def load_note(r, rt):
    """`; load …` (1, 5, 15 min averages at start and end) of `rt`'s floor and agent series."""
    f = ((r.get("floor") or {}).get(rt) or {}).get("load")
    a = ((r.get("agents") or {}).get(rt) or {}).get("load")
    parts = [f"{k} {v[0]} .. {v[1]}" for k, v in (("floor", f), ("iapeer", a)) if v]
    return ("; load " + ", ".join(parts)) if parts else ""


def item3(r):
    b = r.get("burst")
    t_all = "1 000 concurrent tools/call to 20 live echo peers: all answered and delivered"
    t_over = (f"daemon overhead per call (Server-Timing - delivery.log ms=) p99 < "
              f"{OVERHEAD_P99_MS} ms")
    t_thr = f"daemon threads during the burst <= at rest + {POOL_THREADS} (preparation pool, topic writer)"
    if b is None:
        why = "the burst phase was skipped (BENCH_BURST_CALLS=0)"
        return [_not_measured("3", t, why) for t in (t_all, t_over, t_thr)]
    if b["calls"] != 1000 or b["peers"] != 20:
        t_all = (f"{b['calls']} concurrent tools/call to {b['peers']} live echo peers "
                 "(target is 1 000 to 20): all answered and delivered")
    rounds = b.get("rounds", 1)
    total = b["calls"] * rounds
    each = f" in each of {rounds} bursts" if rounds > 1 else ""
    out = [_line(b["delivered"] == total, "3", t_all + each,
                 f"{b['answered']}/{total} answered, {b['delivered']} delivered, "
                 f"{b['refused']} refused ({b['status_503']} x 503, {b['retry_after']} with "
                 f"Retry-After), {b['unanswered']} without an answer; the slowest burst "
                 f"took {b['wall_ns'] / 1e9:.1f} s"
                 + (f"; first failure: {b['first_error']}" if b["first_error"] else ""))]
    seq = ""
    calls, dms = r.get("mcp_call") or [], r.get("mcp_daemon_ms") or []
    if calls and len(calls) == len(dms):
        q = summary([c / MS - d for c, d in zip(calls, dms)])
        seq = (f"; one call at a time on a keep-alive connection: median {q['median']:.1f} "
               f"p99 {q['p99']:.1f} ms")
    if b.get("served_overhead_ms"):
        o, lat = summary(b["served_overhead_ms"]), summary([x / MS for x in b["latency_ns"]])
        c = summary(b["overhead_ms"])
        per = b.get("round_p99_ms") or []
        per = (f", p99 of each burst " + " / ".join(f"{x:.1f}" for x in per)
               if len(per) > 1 else "")
        out.append(_line(o["p99"] < OVERHEAD_P99_MS, "3", t_over,
                         f"overhead median {o['median']:.1f} p99 {o['p99']:.1f} ms "
                         f"(n={o['n']}{per});"
                         f" reference: call latency median {lat['median']:.0f} p99 "
                         f"{lat['p99']:.0f} ms, of which delivery.log ms= median "
                         f"{summary(b['daemon_ms'])['median']:.0f}; seen by the client "
                         f"(latency - ms=, with the accept queue and its own lag) median "
                         f"{c['median']:.1f} p99 {c['p99']:.1f} ms{seq}"))
    elif b["overhead_ms"]:
        out.append(_not_measured("3", t_over, "the daemon's answers carry no Server-Timing"))
    else:
        out.append(_not_measured("3", t_over, "no call was delivered with a delivery.log line"))
    limit = b["threads_rest"] + POOL_THREADS
    out.append(_line(b["threads_busiest"] <= limit, "3", t_thr,
                     f"at most {b['threads_busiest']} during the burst "
                     f"({b['thread_samples']} samples), {b['threads_rest']} at rest with "
                     f"{b['live_sessions']} live sessions -> limit {limit}"))
    return out


def item4_idle(r):
    i = r.get("idle")
    target = "idle echo agents: 0.000 % CPU and ~0 wakeups/s"
    if i is None:
        return _not_measured("4", target, "the idle window did not run")
    a, d = i["agents"], i["daemon"]
    limit = IDLE_WAKEUPS_PER_AGENT * i["peers"]
    ok = a["pct_sched"] < IDLE_CPU_PCT and a["ctx_per_s"] <= limit
    return _line(ok, "4", target,
                 f"{i['peers']} agents over {i['window_s']:.0f} s: {a['pct_sched']:.3f} % of a "
                 f"core, {a['ctx_per_s']:.2f} wakeups/s (limit {limit:.1f}); reference daemon "
                 f"{d['pct_sched']:.3f} %, {d['ctx_per_s']:.2f} wakeups/s")


def item4_threads(r):
    target = "daemon threads <= 1 per live session + a fixed number"
    mem = {m["live"]: m["daemon_threads"] for m in r.get("memory", [])}
    if 0 not in mem or len(mem) < 2:
        return _not_measured("4", target, "needs 0 and at least one other level in BENCH_PEERS")
    fixed = mem[0]
    worst = max((mem[n] - fixed) / n for n in mem if n > 0)
    levels = ", ".join(f"{n} live: {t}" for n, t in sorted(mem.items()))
    return _line(worst <= 1.0, "4", target,
                 f"{levels} -> fixed {fixed} (0 live), at most {worst:.2f} per session")


def lines(r, ready_settles):
    """Every target line, in issue order. `r` is the bench's results dict; `ready_settles`
    maps runtime -> the adapter's ready settle in ms."""
    out = [item1_echo(r)]
    out += [item1_agent(r, rt) for rt in AGENT_RUNTIMES]
    out += item1_correctness(os.environ.get("BENCH_CORRECTNESS_LOG"))
    out += [item2_wake(r, rt, ready_settles.get(rt, 0)) for rt in ("claude", "codex")]
    out += item3(r)
    out += [item4_idle(r), item4_threads(r)]
    return out

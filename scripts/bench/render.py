"""The benchmark's report: the latency, ratio, memory and idle-CPU tables, the agent section
(agentbench.render) and the notes that say what each measure is."""

import agentbench
import floor
from report import f1, f2, latency_row, summary, table

MS = 1e6
MIB = 1024.0


def confirmation_split(results, settle):
    """How many deliveries were confirmed right after Enter (daemon ms < settle + 50)."""
    st, lines = settle, []
    for key, label in (("cli_daemon_ms", "iapeer send"), ("mcp_daemon_ms", "MCP tools/call")):
        xs = results.get(key) or []
        if not xs:
            continue
        fast = [x for x in xs if x < st + 50]
        slow = [x for x in xs if x >= st + 50]
        part = f"{label}: {len(fast)}/{len(xs)} confirmed < {st + 50} ms"
        if fast:
            part += f" (median {summary(fast)['median']:.0f})"
        if slow:
            part += f", {len(slow)} later (median {summary(slow)['median']:.0f})"
        lines.append(part)
    return ("CONFIRMATION (daemon ms=): " + "; ".join(lines) +
            ".\n  A gap of ~100 ms between the groups is the confirmation re-check period "
            "(CONFIRM_POLL in src/session/deliver.rs).")

def beside(name, s, unit_div, fmt, note="", floor_s=None, load=""):
    """A latency row (report.latency_row) with the floor's median (`floor_s`, a summary in
    the same unit), the ratio of the medians and the phase's load average (issue 31 item 5)."""
    row = latency_row(name, s, unit_div, fmt, note)
    if floor_s is None:
        return row[:7] + ["", "", load, row[7]]
    ratio = f"{s['median'] / floor_s['median']:.2f}x" if floor_s["median"] else ""
    return row[:7] + [fmt(floor_s["median"] / unit_div), ratio, load, row[7]]


def render(results, settle, phase_load, header):
    r = results
    out = [header, ""]
    rows = []
    one = lambda k: phase_load.get(k, "").split(" ")[0]  # noqa: E731 (1-min load average)
    ver = summary(r["version"])
    tp = summary(r["tmux_paste"])
    mp = summary(r["mcp_ping"])
    rows.append(beside("iapeer --version (process spawn+exit baseline)", ver, MS, f1,
                       load=one("send")))
    cli = summary(r["cli"])
    rows.append(beside("iapeer send -> live echo (CLI start..exit)", cli, MS, f1,
                       "floor: tmux paste-buffer -p + Enter", tp, one("send")))
    dm = r["cli_daemon_ms"]
    if len(dm) == len(r["cli"]):
        rows.append(beside("  daemon delivery.log ms= (arrival..confirmed)", summary(dm), 1,
                           f1, "integer ms", load=one("send")))
        rows.append(beside("  CLI side = wall - daemon ms (paired)", summary(
            [c / MS - d for c, d in zip(r["cli"], dm)]), 1, f1, "spawn, connect, exit",
            load=one("send")))
    else:
        rows.append(["  daemon ms=", len(dm), "?", "", "", "", "", "", "", "",
                     f"log lines {len(dm)} != runs {len(r['cli'])}"])
    mc = summary(r["mcp_call"])
    conns = r["mcp_connections"]
    rows.append(beside("MCP tools/call send_to_peer RTT (keep-alive)", mc, MS, f2,
                       f"{conns} TCP connection(s); floor: MCP ping", mp, one("mcp")))
    if r["mcp_daemon_ms"]:
        rows.append(beside("  daemon delivery.log ms=", summary(r["mcp_daemon_ms"]), 1, f1,
                           load=one("mcp")))
    rows.append(beside("MCP ping RTT (keep-alive, no routing)", mp, MS, f2,
                       "the bare round trip", load=one("mcp")))
    rows.append(beside("control socket ping RTT (one connection)", summary(r["ping"]), MS,
                       lambda x: f"{x:.3f}", load=one("ping")))
    tk = summary(r["tmux_keys"])
    rows.append(beside("tmux send-keys -l + Enter -> 'received' seen", tk, MS, f1,
                       "2 tmux calls + capture-pane polls", load=one("send")))
    rows.append(beside("tmux paste-buffer -p + Enter -> 'received' seen", tp, MS, f1,
                       "1 chained tmux call + polls; a floor", load=one("send")))
    rows.append(beside("tmux capture-pane, one call (poll granularity)",
                       summary(r["capture"]), MS, f1, load=one("send")))
    out.append("LATENCY (ms; floor = the bare counterpart's median, ratio = median / floor, "
               "load = 1-min load average at the phase's start)")
    out.append(table(["measure", "n", "median", "p10", "p90", "p99", "mean", "floor", "ratio",
                      "load", "note"], rows, "lrrrrrrrrrl"))
    out.append("")
    out.append(confirmation_split(results, settle))
    out.append("")
    out.append("RATIO (medians)")
    out.append(table(["comparison", "ratio"], [
        ["iapeer send (CLI, confirmed) / tmux send-keys (ack seen)",
         f2(cli["median"] / tk["median"])],
        ["iapeer send (CLI, confirmed) / tmux paste-buffer -p (ack seen)",
         f2(cli["median"] / summary(r["tmux_paste"])["median"])],
    ]))
    out.append("")

    rows = []
    for m in r["memory"]:
        rows.append([m["live"], f1(m["daemon_rss"] / MIB), f1(m["daemon_pss"] / MIB),
                     m["daemon_threads"], m["agents"], f1(m["agents_rss"] / MIB),
                     f1(m["agents_pss"] / MIB), f1(m["agent_rss_median"] / MIB)])
    out.append("MEMORY (MiB; daemon = the daemon process only, all its threads; "
               "agents = its echo-agent children)")
    out.append(table(["live peers", "daemon VmRSS", "daemon PSS", "threads", "agents",
                      "agents VmRSS sum", "agents PSS sum", "VmRSS/agent"], rows, "r" * 8))
    a = r["after"]
    out.append(f"after the latency phase ({a['deliveries']} deliveries, 2 live peers): "
               f"daemon VmRSS {a['daemon_rss'] / MIB:.1f} MiB, PSS "
               f"{a['daemon_pss'] / MIB:.1f} MiB, {a['threads']} threads")
    ws = summary(r["wake_s"]) if r["wake_s"] else None
    if ws:
        out.append(f"echo peer wake (control `wake` until ready, sequential): median "
                   f"{ws['median'] * 1000:.0f} ms, p90 {ws['p90'] * 1000:.0f} ms "
                   f"(n={ws['n']})")
    out.append("")
    i = r["idle"]
    out.append(f"IDLE CPU ({i['peers']} live idle echo peers, {i['window_s']:.1f} s window; "
               f"% of one core)")
    rows = []
    for k, label in (("daemon", "daemon (all threads)"),
                     ("agents", f"echo agents (sum of {i['peers']})")):
        c = i[k]
        rows.append([label, f"{c['cpu_s_ticks']:.2f}", f"{c['pct_ticks']:.3f}",
                     f"{c['pct_sched']:.3f}", f"{c['ctx_per_s']:.1f}"])
    out.append(table(["process", "utime+stime s", "% (stat)", "% (schedstat)",
                      "ctx switches/s"], rows))
    out.append("")
    out.append("load average at phase start: " + ", ".join(
        f"{k} {v}" for k, v in phase_load.items()) +
        f", idle window {i['load']}")
    if "burst" in r:
        out.append("")
        out.extend(burst_lines(r["burst"]))
    out.extend(agent_lines(r))
    return "\n".join(out)


def agent_lines(r):
    """The FLOOR and AGENTS sections (each after a blank line), those that ran."""
    out = []
    if "floor" in r:
        out.append("")
        out.extend(floor.render(r["floor"]))
    if "agents" in r:
        out.append("")
        out.extend(agentbench.render(r["agents"], r.get("floor")))
    return out


def burst_lines(b):
    """The BURST section: concurrent MCP calls (issue 13 item 3)."""
    rounds = b.get("rounds", 1)
    out = [f"BURST ({rounds} x {b['calls']} concurrent MCP tools/call send_to_peer, one "
           f"connection each, to {b['peers']} live echo peers; load {b['load']})",
           f"  {b['answered']} answered, {b['delivered']} delivered, {b['refused']} refused "
           f"({b['status_503']} x 503), {b['unanswered']} unanswered, the slowest burst in "
           f"{b['wall_ns'] / 1e9:.1f} s; daemon threads {b['threads_rest']} at rest, at most "
           f"{b['threads_busiest']} during a burst; the client's own CPU "
           f"{b.get('client_cpu_ms', 0) / rounds:.0f} ms per burst"]
    rows = []
    if b["latency_ns"]:
        rows.append(latency_row("call latency (request written .. answer read)",
                                summary(b["latency_ns"]), MS, f1))
        rows.append(latency_row("  before it: release .. connected", summary(
            b["connect_ns"]), MS, f1, "kernel + client"))
        rows.append(latency_row("  before it: connected .. request written", summary(
            b["send_ns"]), MS, f1, "client's event loop"))
        rows.append(latency_row("  first answer byte .. close", summary(b["tail_ns"]), MS,
                                f1))
    if b["daemon_ms"]:
        rows.append(latency_row("  delivery.log ms= (queue wait + delivery)",
                                summary(b["daemon_ms"]), 1, f1))
        rows.append(latency_row("  overhead = latency - ms=", summary(b["overhead_ms"]), 1,
                                f1))
    if b.get("served_ms"):
        rows.append(latency_row("  daemon's time (Server-Timing: request read .. answer)",
                                summary(b["served_ms"]), 1, f1))
        rows.append(latency_row("  daemon overhead = Server-Timing - ms=",
                                summary(b["served_overhead_ms"]), 1, f1, "the target"))
    if b.get("after_ms"):
        rows.append(latency_row("    of it after the outcome (answer read - log ts)",
                                summary(b["after_ms"]), 1, f1, "wall clocks, ms ts"))
    if rows:
        out.append(table(["measure", "n", "median", "p10", "p90", "p99", "mean", "note"],
                         rows, "lrrrrrrl"))
    out.extend(burst_rounds(b))
    return out


def burst_rounds(b):
    """Each burst's daemon overhead (Server-Timing - ms=) p50 / p99 with the load average
    when it was released, the count under 5 ms, and the daemon's CPU and run-queue wait per
    thread group summed over the bursts (issue 31 item 3)."""
    p50s, p99s = b.get("round_p50_ms") or [], b.get("round_p99_ms") or []
    loads = b.get("round_load") or []
    if not p99s or len(p50s) != len(p99s):
        return []
    out = [f"  per burst, daemon overhead p50 / p99 ms (load 1/5/15 min): "
           f"{sum(1 for x in p99s if x < 5)} of {len(p99s)} with p99 < 5 ms"]
    for i, (p50, p99) in enumerate(zip(p50s, p99s)):
        load = loads[i] if i < len(loads) else "?"
        out.append(f"    burst {i + 1:2d}: {p50:5.1f} / {p99:5.1f}  (load {load})")
    per = b.get("round_threads") or []
    if per:
        groups = {}
        for burst in per:
            for name, n, cpu, wait, most in burst:
                g = groups.setdefault(name, [0, 0.0, 0.0, 0.0])
                g[0] = max(g[0], n)
                g[1] += cpu
                g[2] += wait
                g[3] = max(g[3], most)
        rows = [[name, str(n), f"{cpu / len(per):.0f}", f"{wait / len(per):.0f}",
                 f"{most:.1f}"]
                for name, (n, cpu, wait, most) in sorted(groups.items(),
                                                         key=lambda kv: -kv[1][1])
                if cpu > 0.5 * len(per) or wait > 0.5 * len(per)]
        out.append("  the daemon's threads during a burst (/proc/<pid>/task/*/schedstat, "
                   "mean per burst)")
        out.append(table(["thread group", "threads", "CPU ms", "run-queue wait ms",
                          "one thread's most wait ms"], rows, "lrrrr"))
    return out


NOTES = """\
WHAT EACH MEASURE IS
- iapeer send: wall time of one whole `iapeer send bob --from echo-alice --message 'echo: …'`
  process (spawn .. exit) to a LIVE echo peer. It returns after the daemon confirmed the
  delivery: bracketed paste written to the pty, Enter as soon as the screen shows the paste
  (after the {settle} ms settle only when no sign comes), then the pane output showed
  `received <ts> from` (the echo agent acknowledged it). The body starts with
  `echo:` so the agent never replies (no extra traffic).
- daemon ms=: the delivery.log field, from the request reaching the router to the answer
  (integer ms). CLI side = wall - ms (spawn, socket connect, exit).
- MCP tools/call: one POST /mcp `send_to_peer` on a persistent HTTP/1.1 connection with
  alice's live session token, same target and confirmation as above.
- control ping: `{{"op":"ping"}}` line out, answer line in, on one Unix-socket connection
  (goes through the control loop and the router thread). Times include Python's own cost.
- tmux send-keys: `tmux send-keys -l <one-line envelope>` then `tmux send-keys Enter`
  (2 tmux client processes) into a private tmux server whose pane runs the same
  `iapeer echo-agent` argv and session environment, then `tmux capture-pane -p` in a tight
  loop until `received <ts> from` is visible. So it includes the agent's reaction (it redraws
  its composer once per typed character) and up to one capture-pane call of detection lag.
  No settle, no retry, no confirmation semantics beyond our own polling; typed characters,
  so the newlines of a real envelope cannot be sent this way (a one-line envelope is used).
- tmux paste-buffer: same, but set-buffer + paste-buffer -p (bracketed) + send-keys Enter in
  one chained tmux call: the closest tmux analogue of iapeer's paste.
- Memory: VmRSS and PSS (smaps_rollup) of the daemon pid (threads share one address
  space), and separately the sum over its echo-agent children (the same binary, so their
  shared text pages are counted once per process in VmRSS and split in PSS).
- Burst: every call its own TCP connection (one epoll loop in the bench process, released
  together; asyncio's per-call objects cost twice the CPU on the 2 cores the daemon needs),
  a unique `topic` so its delivery.log line can be found. BENCH_BURSTS bursts (3) run one
  after another and their samples are pooled; the target line gives each burst's p99 too.
  Call latency runs from the request being written (in the kernel's buffer; the daemon
  accepts and reads it later) to the answer read; connect and write before it are the
  client's and the kernel's, reported apart.
  Overhead = call latency minus that line's `ms=` (the router's time from taking the send to
  its outcome, including the wait behind the peer's other sends): accept, HTTP, MCP decoding,
  the trip to the router and the answer back. Integer ms, so overhead is over-stated by
  < 1 ms; the single-threaded Python client's own lag is in it too. The daemon measures
  itself as well: each answer's `Server-Timing: total;dur=` is its time from having read the whole
  request to the answer, and that minus `ms=` is the daemon's overhead per call, the
  target's measure (without the kernel's queues, the wait for the client's bytes and the
  client's lag, which the client-side overhead above keeps). Threads sampled every 10 ms from /proc.
- Idle CPU: utime+stime from /proc/<pid>/stat (clock ticks) and summed task schedstat (ns)
  before/after the window; context switches ~ wakeups.
"""

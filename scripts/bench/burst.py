"""The burst phase of the benchmark (issue 13 item 3): N concurrent MCP `tools/call
send_to_peer` from N connections to M live echo peers, all released at once.

Each call opens its own TCP connection (asyncio, one event loop in this process), writes one
POST /mcp with a unique `topic` and `Connection: close`, and reads the answer. Per call:
  connect  = from the release until the TCP handshake completed (kernel and this client:
             not the daemon's, which accepts later; reported, not counted);
  write    = from connected until the request was in the kernel's socket buffer (this
             client's event loop is busy with the other 999 then; reported, not counted);
  latency  = from the request written until the answer was read (the server closes after
             it), as this client saw it (ns): includes the daemon's accept;
  daemon   = the `ms=` of its delivery.log line (found by its topic): the router's time from
             taking the send to its outcome (queue wait behind the peer's other sends,
             paste, settle, Enter, confirmation);
  overhead = latency - daemon: what the HTTP server, MCP decoding, preparation and the
             answer add around the delivery (the log's integer ms truncates, so overhead is
             over-stated by < 1 ms; the Python client's own scheduling is in it too);
  served   = the answer's `Server-Timing: total;dur=` (µs precision): the daemon's own time
             from having read the whole request to its answer;
  daemon overhead = served - daemon: the same overhead measured inside the daemon, without
             the kernel's queues, the wait for this client's bytes and its scheduling.
after    = the answer read minus the delivery.log line's `ts` (wall clocks, ms resolution):
             the part of the overhead after the router had the outcome (the HTTP thread's
             answer and this client's reading of it); the rest is before the router took it.
The daemon's thread count is sampled every 10 ms during the burst and compared with the count
at rest.
"""

import asyncio
import datetime
import json
import os
import resource
import signal
import socket
import subprocess
import threading
import time

import measure
import procfs

now = time.perf_counter_ns


def raise_fd_limit(need):
    """Lift this process's soft RLIMIT_NOFILE towards `need` (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def parse_answer(raw):
    """(HTTP status, Retry-After header or None, JSON-RPC message or None, the daemon's
    Server-Timing `total;dur=` in ms or None) of a raw answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return 0, None, None, None
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    text = body.decode(errors="replace")
    if headers.get("content-type", "").startswith("text/event-stream"):
        text = "\n".join(l[5:].lstrip() for l in text.splitlines() if l.startswith("data:"))
    try:
        msg = json.loads(text) if text.strip() else None
    except ValueError:
        msg = None
    served = None
    timing = headers.get("server-timing", "")
    if timing.startswith("total;dur="):
        try:
            served = float(timing[len("total;dur="):])
        except ValueError:
            pass
    return status, headers.get("retry-after"), msg, served


async def _call(port, headers, body, gate):
    await gate.wait()
    t0 = now()
    try:
        # A ready socket (no getaddrinfo in asyncio's thread pool, which would queue).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        t_conn = now()
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(headers + body)
        await writer.drain()
        t_sent = now()
        raw = await reader.read(1)
        t_first = now()
        raw += await reader.read(-1)  # the server closes after its answer
        t1, t1_wall = now(), time.time()
        writer.close()
    except OSError as e:
        return {"latency_ns": now() - t0, "connect_ns": 0, "send_ns": 0, "tail_ns": 0,
                "status": 0, "error": str(e)}
    status, retry, msg, served = parse_answer(raw)
    ok = bool(msg and ((msg.get("result") or {}).get("structuredContent") or {}).get("ok"))
    return {"latency_ns": t1 - t_sent, "connect_ns": t_conn - t0, "send_ns": t_sent - t_conn,
            "tail_ns": t1 - t_first, "t1_wall": t1_wall, "status": status, "retry_after": retry, "ok": ok, "served_ms": served,
            "error": None if ok else (json.dumps(msg)[:200] if msg else raw[:200].decode(
                errors="replace"))}


async def _burst(port, identity, token, calls, peers):
    gate = asyncio.Event()
    tasks = []
    for i in range(calls):
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "send_to_peer", "arguments": {
                "personality": peers[i % len(peers)], "message": f"echo: burst {i}",
                "topic": f"burst{i}"}}}).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\n"
                f"X-IAPeer-Identity: {identity}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        tasks.append(asyncio.ensure_future(_call(port, head, body, gate)))
    await asyncio.sleep(0.2)  # every task is parked at the gate
    t0 = now()
    gate.set()
    out = await asyncio.gather(*tasks)
    return out, now() - t0


class ThreadSampler:
    """Samples /proc/<pid>/status Threads every `period` s in a thread until stopped."""

    def __init__(self, pid, period=0.01):
        self.pid, self.period, self.most, self.samples = pid, period, 0, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.most = max(self.most, procfs.threads(self.pid))
                self.samples += 1
            except OSError:
                return
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._t.join()
        return self.most


def run(world, identity, token, peers, calls, log):
    """Fire `calls` concurrent calls at `peers` (personalities, all live) as `identity`.
    Returns the raw results for render.burst_lines (ns and ms as in the module doc)."""
    raise_fd_limit(calls + 256)
    dpid = world.daemon.pid
    dlog = world.log_path("delivery")
    offset = measure.file_size(dlog)
    at_rest = procfs.threads(dpid)
    sampler = ThreadSampler(dpid)
    log(f"burst: {calls} concurrent tools/call from {calls} connections to {len(peers)} "
        f"live echo peers (daemon threads at rest {at_rest})")
    perf = start_perf(dpid)
    answers, wall = asyncio.run(_burst(world.port(), identity, token, calls, peers))
    busiest = sampler.stop()
    stop_perf(perf, log)
    # The log line is written before the answer leaves; read after every answer came.
    by_topic = {f.get("topic"): f for f in measure.events_since(dlog, offset, "delivery")
                if f.get("path") == "mcp"}
    for i, a in enumerate(answers):
        line = by_topic.get(f"burst{i}")
        if line is not None and line.get("ok") == "true" and a["ok"]:
            a["daemon_ms"] = float(line["ms"])
            # The log's ts (ms resolution) is when the router had the outcome.
            a["after_ms"] = 1000 * (a["t1_wall"] - log_ts(line["ts"]))
    refused = [a for a in answers if a["status"] not in (0, 200) or
               (a["status"] == 200 and not a["ok"])]
    return {
        "calls": calls, "peers": len(peers), "wall_ns": wall,
        "answered": sum(1 for a in answers if a["status"] != 0),
        "delivered": sum(1 for a in answers if a["ok"]),
        "refused": len(refused),
        "status_503": sum(1 for a in answers if a["status"] == 503),
        "retry_after": sum(1 for a in refused if a.get("retry_after")),
        "unanswered": sum(1 for a in answers if a["status"] == 0),
        "first_error": next((a["error"] for a in answers if not a["ok"]), None),
        "latency_ns": [a["latency_ns"] for a in answers if a["ok"]],
        "connect_ns": [a["connect_ns"] for a in answers if a["ok"]],
        "send_ns": [a["send_ns"] for a in answers if a["ok"]],
        "tail_ns": [a["tail_ns"] for a in answers if a["ok"]],
        "daemon_ms": [a["daemon_ms"] for a in answers if "daemon_ms" in a],
        "overhead_ms": [a["latency_ns"] / 1e6 - a["daemon_ms"] for a in answers
                        if "daemon_ms" in a],
        "served_ms": [a["served_ms"] for a in answers
                      if "daemon_ms" in a and a.get("served_ms") is not None],
        "served_overhead_ms": [a["served_ms"] - a["daemon_ms"] for a in answers
                               if "daemon_ms" in a and a.get("served_ms") is not None],
        "after_ms": [a["after_ms"] for a in answers if "after_ms" in a],
        "threads_rest": at_rest, "threads_busiest": busiest,
        "thread_samples": sampler.samples, "live_sessions": len(world.sessions()),
        "load": measure_load(),
    }


def start_perf(pid):
    """With BENCH_PERF=<file>: `perf record -g` of the daemon during the burst into that
    file (read it with `perf report -i <file>`), else nothing."""
    out = os.environ.get("BENCH_PERF")
    if not out:
        return None
    proc = subprocess.Popen(["perf", "record", "-F", "4000", "-g", "-p", str(pid), "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # perf attaches before the burst is released
    return proc


def stop_perf(proc, log):
    if proc is None:
        return
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    log(f"burst: perf profile of the daemon in {os.environ['BENCH_PERF']}")


def log_ts(value):
    """An event log's `ts=` (2026-01-02T03:04:05.678Z) as epoch seconds."""
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def measure_load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])

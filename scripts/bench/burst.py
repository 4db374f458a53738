"""The burst phase of the benchmark (issue 13 item 3): N concurrent MCP `tools/call
send_to_peer` from N connections to M live echo peers, all released at once.

Each call opens its own TCP connection (one epoll loop in this process), writes one
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
at rest; each thread's CPU time and run-queue wait over the burst (/proc/<pid>/task/*/schedstat:
time on a CPU, time runnable but waiting for one) are summed per thread group.
"""

import datetime
import errno
import json
import os
import resource
import select
import signal
import socket
import subprocess
import threading
import time

import measure
import procfs
from report import quantile

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


class _Call:
    """One call's socket, request bytes and times (ns)."""

    __slots__ = ("sock", "data", "sent", "raw", "t_conn", "t_sent", "t_first", "t1",
                 "t1_wall", "error")

    def __init__(self, data):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.data, self.sent, self.raw = data, 0, bytearray()
        self.t_conn = self.t_sent = self.t_first = self.t1 = None
        self.t1_wall, self.error = None, None


def _requests(port, identity, token, calls, peers, tag):
    """The raw HTTP request of each call (one POST /mcp, `Connection: close`), call i with
    the topic `<tag><i>`."""
    out = []
    for i in range(calls):
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "send_to_peer", "arguments": {
                "personality": peers[i % len(peers)], "message": f"echo: burst {i}",
                "topic": f"{tag}{i}"}}}).encode()
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\n"
                f"X-IAPeer-Identity: {identity}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        out.append(head + body)
    return out


def _burst(port, identity, token, calls, peers, tag, timeout=120.0):
    """Release every call at once and drive them all from one epoll loop (no asyncio: its
    per-call futures and stream objects made this client half of the machine's CPU in the
    burst window, starving the daemon it measures). Answers are parsed after the last one."""
    calls_ = [_Call(r) for r in _requests(port, identity, token, calls, peers, tag)]
    by_fd = {c.sock.fileno(): c for c in calls_}
    ep = select.epoll(sizehint=calls)
    t0 = now()
    for c in calls_:
        err = c.sock.connect_ex(("127.0.0.1", port))
        if err not in (0, errno.EINPROGRESS):
            c.error, c.t1 = os.strerror(err), now()
            continue
        ep.register(c.sock.fileno(), select.EPOLLOUT)
    left = sum(1 for c in calls_ if c.error is None)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        for fd, ev in ep.poll(1.0):
            c = by_fd[fd]
            t = now()
            if c.t_sent is None:
                if c.t_conn is None:
                    err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        c.error, c.t1 = os.strerror(err), t
                        ep.unregister(fd)
                        left -= 1
                        continue
                    c.t_conn = t
                try:
                    c.sent += c.sock.send(c.data[c.sent:])
                except BlockingIOError:
                    continue
                except OSError as e:
                    c.error, c.t1 = str(e), now()
                    ep.unregister(fd)
                    left -= 1
                    continue
                if c.sent == len(c.data):
                    c.t_sent = now()
                    ep.modify(fd, select.EPOLLIN)
                continue
            try:
                chunk = c.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                chunk, c.error = b"", str(e)
            if chunk:
                if c.t_first is None:
                    c.t_first = t
                c.raw += chunk
                continue
            # The server closes after its answer.
            c.t1, c.t1_wall = t, time.time()
            ep.unregister(fd)
            left -= 1
    wall = now() - t0
    ep.close()
    out = []
    for c in calls_:
        c.sock.close()
        if c.t1 is None:
            c.error = c.error or "no answer within the bench's timeout"
        if c.t_sent is None or c.t1 is None or (c.error and not c.raw):
            out.append({"latency_ns": (c.t1 or now()) - t0, "connect_ns": 0, "send_ns": 0,
                        "tail_ns": 0, "status": 0, "error": c.error})
            continue
        raw = bytes(c.raw)
        status, retry, msg, served = parse_answer(raw)
        ok = bool(msg and ((msg.get("result") or {}).get("structuredContent") or {}).get("ok"))
        out.append({
            "latency_ns": c.t1 - c.t_sent, "connect_ns": c.t_conn - t0,
            "send_ns": c.t_sent - c.t_conn, "tail_ns": c.t1 - (c.t_first or c.t1),
            "t1_wall": c.t1_wall, "status": status, "retry_after": retry, "ok": ok,
            "served_ms": served,
            "error": None if ok else (json.dumps(msg)[:200] if msg else raw[:200].decode(
                errors="replace"))})
    return out, wall


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


def run(world, identity, token, peers, calls, log, tag="burst"):
    """Fire `calls` concurrent calls at `peers` (personalities, all live) as `identity`, with
    topics `<tag><i>` (unique per burst). Returns the raw results for render.burst_lines
    (ns and ms as in the module doc)."""
    raise_fd_limit(calls + 256)
    dpid = world.daemon.pid
    dlog = world.log_path("delivery")
    offset = measure.file_size(dlog)
    at_rest = procfs.threads(dpid)
    sampler = ThreadSampler(dpid)
    log(f"burst: {calls} concurrent tools/call from {calls} connections to {len(peers)} "
        f"live echo peers (daemon threads at rest {at_rest})")
    perf = start_perf(dpid)
    load = measure_load()
    sched0 = procfs.task_sched(dpid)
    cpu0 = time.process_time()
    answers, wall = _burst(world.port(), identity, token, calls, peers, tag)
    client_cpu = time.process_time() - cpu0
    sched = procfs.sched_delta(sched0, procfs.task_sched(dpid))
    busiest = sampler.stop()
    stop_perf(perf, log)
    # The log line is written before the answer leaves; read after every answer came.
    by_topic = {f.get("topic"): f for f in measure.events_since(dlog, offset, "delivery")
                if f.get("path") == "mcp"}
    for i, a in enumerate(answers):
        line = by_topic.get(f"{tag}{i}")
        if line is not None and line.get("ok") == "true" and a["ok"]:
            a["daemon_ms"] = float(line["ms"])
            # The log's ts (ms resolution) is when the router had the outcome.
            a["after_ms"] = 1000 * (a["t1_wall"] - log_ts(line["ts"]))
    served_overhead = [a["served_ms"] - a["daemon_ms"] for a in answers
                       if "daemon_ms" in a and a.get("served_ms") is not None]
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
        "served_overhead_ms": served_overhead,
        "after_ms": [a["after_ms"] for a in answers if "after_ms" in a],
        "threads_rest": at_rest, "threads_busiest": busiest,
        "thread_samples": sampler.samples, "live_sessions": len(world.sessions()),
        "load": load, "client_cpu_ms": 1000 * client_cpu, "rounds": 1,
        "round_p99_ms": [quantile(served_overhead, 0.99)] if served_overhead else [],
        "round_p50_ms": [quantile(served_overhead, 0.5)] if served_overhead else [],
        "round_load": [load],
        "round_threads": [sched],
    }


SUMMED = ("answered", "delivered", "refused", "status_503", "retry_after", "unanswered",
          "thread_samples", "client_cpu_ms", "rounds")
POOLED = ("latency_ns", "connect_ns", "send_ns", "tail_ns", "daemon_ms", "overhead_ms",
          "served_ms", "served_overhead_ms", "after_ms", "round_p99_ms", "round_p50_ms",
          "round_load", "round_threads")


def merge(rounds):
    """One result of several bursts of the same size (run one after another): counts summed,
    samples pooled (so a p99 is over every call of every burst), the slowest burst's wall
    time, the most threads seen, and each burst's own p99 of the daemon overhead."""
    out = dict(rounds[-1])
    for k in SUMMED:
        out[k] = sum(r[k] for r in rounds)
    for k in POOLED:
        out[k] = [x for r in rounds for x in r[k]]
    out["wall_ns"] = max(r["wall_ns"] for r in rounds)
    out["threads_rest"] = min(r["threads_rest"] for r in rounds)
    out["threads_busiest"] = max(r["threads_busiest"] for r in rounds)
    out["first_error"] = next((r["first_error"] for r in rounds if r["first_error"]), None)
    return out


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

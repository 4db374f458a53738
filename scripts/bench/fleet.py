#!/usr/bin/env python3
"""Figures for the fleet API's event stream (issue 10 item 1, spec 10 §1).

Usage: python3 scripts/bench/fleet.py [--bin target/release/iapeer] [--events 200]
       [--clients 200] [--hold-seconds 60]

On a private temp root (temp HOME and IAPEER_ROOT, port 0, every process cleaned up by pid),
with a human peer `ops` and a live echo peer `bob`, the daemon in `IAPEER_MCP_AUTH=header`
mode (so the bench can call `send_to_peer` as `human-ops` without a session token):

1. Delivery → event latency. One client holds `GET /fleet/v1/events`; the bench sends
   --events messages to `bob` over MCP (`tools/call send_to_peer`, one at a time). For each
   delivery the figure is the arrival of its `event: delivery` frame at the client minus the
   time the daemon stamped on the delivery.log line it came from (`ts`, ms; the same clock),
   and, as a cross-check, minus the arrival of the MCP answer (the daemon publishes the event
   just before it answers, so this is usually negative). p50/p99/max in ms.
2. Many streams. MCP latency (JSON-RPC `ping`, and `send_to_peer` to bob: 30 pings and 10
   sends in a loop) for --hold-seconds with no stream open, then for --hold-seconds with
   --clients streams held (all reading, each receiving every event of the sends), p50/p99
   of each, and how many streams the daemon closed meanwhile.
"""

import argparse
import http.client
import json
import os
import selectors
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import procfs  # noqa: E402
from world import BenchError, World  # noqa: E402


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = min(len(v) - 1, max(0, round(p / 100 * (len(v) - 1))))
    return v[k]


def line(name, vals):
    return (f"  {name}: n={len(vals)} p50={pct(vals, 50):.1f} ms p99={pct(vals, 99):.1f} ms "
            f"max={max(vals, default=float('nan')):.1f} ms "
            f"mean={statistics.fmean(vals) if vals else float('nan'):.1f} ms")


def ts_ms(ts):
    import datetime
    return datetime.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000


def open_stream(port, token, query=""):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /fleet/v1/events{query} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
              f"Authorization: Bearer {token}\r\n\r\n".encode())
    return s


class Collector(threading.Thread):
    """Reads every stream; records (arrival epoch ms, data) of each frame of the first one."""

    def __init__(self, socks, record_first=True):
        super().__init__(daemon=True)
        self.sel = selectors.DefaultSelector()
        self.bufs = {}
        for s in socks:
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ)
            self.bufs[s] = b""
        self.first = socks[0] if record_first else None
        self.frames = []  # (arrival ms, data dict)
        self.closed = 0
        self.stop = False

    def run(self):
        while not self.stop and self.bufs:
            for key, _ in self.sel.select(timeout=0.2):
                s = key.fileobj
                try:
                    chunk = s.recv(1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                now = time.time() * 1000
                if not chunk:
                    self.sel.unregister(s)
                    del self.bufs[s]
                    self.closed += 1
                    continue
                if s is not self.first:
                    continue
                buf = self.bufs[s] + chunk
                while b"\n\n" in buf:
                    frame, _, buf = buf.partition(b"\n\n")
                    for l in frame.split(b"\n"):
                        if l.startswith(b"data: "):
                            self.frames.append((now, json.loads(l[6:])))
                self.bufs[s] = buf


class Mcp:
    """`send_to_peer` and `ping` as human-ops (header auth), one connection per call."""

    def __init__(self, port):
        self.port = port
        self.n = 0

    def call(self, method, params):
        self.n += 1
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        t0 = time.perf_counter()
        c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                              "params": params}),
                  {"Content-Type": "application/json", "Accept": "application/json",
                   "X-IAPeer-Identity": "human-ops"})
        r = c.getresponse()
        body = r.read()
        dt = (time.perf_counter() - t0) * 1000
        c.close()
        if r.status != 200:
            raise BenchError(f"MCP HTTP {r.status}: {body[:300]}")
        v = json.loads(body)
        if "error" in v or (v.get("result") or {}).get("isError"):
            raise BenchError(f"MCP error: {v}")
        return dt, time.time() * 1000

    def ping(self):
        return self.call("ping", {})[0]

    def send(self, text):
        return self.call("tools/call", {"name": "send_to_peer",
                                        "arguments": {"personality": "bob", "message": text}})


def mcp_figures(mcp, pings, sends):
    p = [mcp.ping() for _ in range(pings)]
    s = [mcp.send(f"load {i}")[0] for i in range(sends)]
    return p, s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/iapeer")
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--hold-seconds", type=int, default=60)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    world = World(os.path.abspath(a.bin), keep=a.keep, prefix="iapeer-fleet-bench.")
    world.env["IAPEER_MCP_AUTH"] = "header"
    try:
        world.run(["create", "ops", "--runtime", "human"])
        world.create_echo("bob")
        world.start_daemon()
        world.wake("bob")
        port = world.port()
        mcp = Mcp(port)

        # 1. delivery -> event latency
        print(f"latency: {a.events} deliveries to a live echo peer, one event client …",
              flush=True)
        token = world.fleet_token()
        col = Collector([open_stream(port, token)])
        col.start()
        time.sleep(0.5)
        answered = {}
        for i in range(a.events):
            _, at = mcp.send(f"m{i}")
            answered[i] = at
        time.sleep(1)
        col.stop = True
        col.join()
        by_ts, by_answer = [], []
        seen = set()
        for arrival, d in col.frames:
            if d.get("ev") != "delivery" or d.get("to") != "bob" or d.get("caller") != "human-ops":
                continue
            seen.add(d["id"])
            by_ts.append(arrival - ts_ms(d["ts"]))
        # Pair the i-th event with the i-th answer (sends are one at a time, in order).
        arrivals = [arr for arr, d in col.frames
                    if d.get("ev") == "delivery" and d.get("to") == "bob"
                    and d.get("caller") == "human-ops"]
        for i, arr in enumerate(arrivals[:a.events]):
            by_answer.append(arr - answered[i])
        print(line("event arrival − delivery.log ts", by_ts))
        print(line("event arrival − MCP answer arrival", by_answer))
        print(f"  events received: {len(seen)} of {a.events}")

        # 2. many streams
        daemon_pid = world.daemon.pid

        def mcp_loop(label):
            print(f"mcp {label}: pings and sends for {a.hold_seconds} s …", flush=True)
            start = time.monotonic()
            cpu0, own0 = procfs.cpu_ticks(daemon_pid), time.process_time()
            pings, sends = [], []
            while time.monotonic() - start < a.hold_seconds:
                p, s = mcp_figures(mcp, 30, 10)
                pings += p
                sends += s
            cpu = (procfs.cpu_ticks(daemon_pid) - cpu0) / procfs.CLK_TCK
            own = time.process_time() - own0
            print(f"  CPU over the window: daemon {cpu:.1f} s, this bench (clients) {own:.1f} s")
            return pings, sends

        p0, s0 = mcp_loop("without streams")
        print(line("ping", p0))
        print(line("send_to_peer", s0))
        socks = [open_stream(port, token, "?replay=50") for _ in range(a.clients)]
        many = Collector(socks, record_first=False)
        many.start()
        p1, s1 = mcp_loop(f"with {a.clients} event streams held")
        print(line(f"ping with {a.clients} streams", p1))
        print(line(f"send_to_peer with {a.clients} streams", s1))
        print(f"  streams closed by the daemon during the hold: {many.closed} of {a.clients}")
        many.stop = True
        many.join()
        for s in socks:
            s.close()
    finally:
        world.close()


if __name__ == "__main__":
    main()

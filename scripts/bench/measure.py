"""Latency probes. Every probe returns durations in nanoseconds (time.perf_counter_ns)."""

import http.client
import json
import os
import re
import socket
import subprocess
import time

from world import BenchError

now = time.perf_counter_ns


# ----- control socket --------------------------------------------------------------------

def control_pings(sock_path, n):
    """n `ping` round trips on ONE persistent control connection (write line, read line)."""
    out = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(sock_path)
        line = b'{"op":"ping"}\n'
        buf = b""
        for _ in range(n):
            t0 = now()
            s.sendall(line)
            while b"\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    raise BenchError("daemon closed the control connection")
                buf += chunk
            t1 = now()
            answer, _, buf = buf.partition(b"\n")
            if b'"ok":true' not in answer:
                raise BenchError(f"ping failed: {answer!r}")
            out.append(t1 - t0)
    return out


# ----- whole CLI processes ---------------------------------------------------------------

def timed_process(argv, env, cwd, expect=None):
    """Spawn argv, wait for exit; returns ns from just before spawn to just after exit."""
    t0 = now()
    p = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    t1 = now()
    if p.returncode != 0 or (expect and expect not in p.stdout):
        raise BenchError(f"{' '.join(argv[:3])}… exited {p.returncode}: {p.stdout}{p.stderr}")
    return t1 - t0


def cli_send(world, target, sender, body):
    return timed_process([world.bin, "send", target, "--from", sender, "--message", body],
                         world.env, world.dir, expect=f"delivered to {target} (echo)")


def events_since(log_path, offset, ev=None):
    """The logfmt lines of an event log written after byte `offset`, as dicts of fields
    (quoted values keep their quotes), optionally only those whose `ev` is `ev`."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        fields = dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', line))
        if ev is None or fields.get("ev") == ev:
            out.append(fields)
    return out


def daemon_ms(log_path, offset, path, to):
    """`ms=` of ok delivery.log lines written after byte `offset` for entry `path` → `to`."""
    return [float(f["ms"]) for f in events_since(log_path, offset, "delivery")
            if f.get("path") == path and f.get("to") == to and f.get("ok") == "true"]


def file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


# ----- MCP over HTTP (keep-alive) --------------------------------------------------------

class Mcp:
    """A persistent HTTP/1.1 connection to /mcp with a session's credentials."""

    def __init__(self, port, identity, token):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "X-IAPeer-Identity": identity,
            "Authorization": f"Bearer {token}",
        }
        self.next_id = 1
        self.local_ports = set()

    def post(self, msg):
        self.conn.request("POST", "/mcp", json.dumps(msg), self.headers)
        if self.conn.sock is not None:
            self.local_ports.add(self.conn.sock.getsockname()[1])
        r = self.conn.getresponse()
        body = r.read().decode()
        if r.status == 202:
            return None
        if r.status != 200:
            raise BenchError(f"MCP HTTP {r.status}: {body[:300]}")
        if r.getheader("Content-Type", "").startswith("text/event-stream"):
            body = "\n".join(l[5:].lstrip() for l in body.splitlines() if l.startswith("data:"))
        v = json.loads(body)
        if "error" in v:
            raise BenchError(f"MCP error: {v['error']}")
        return v["result"]

    def request(self, method, params):
        self.next_id += 1
        return self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                          "params": params})

    def initialize(self):
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "iapeer-bench", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def timed_ping(self):
        t0 = now()
        self.request("ping", {})
        return now() - t0

    def timed_send(self, personality, message):
        t0 = now()
        r = self.request("tools/call", {"name": "send_to_peer",
                                        "arguments": {"personality": personality,
                                                      "message": message}})
        dt = now() - t0
        if r.get("isError") or not (r.get("structuredContent") or {}).get("ok"):
            raise BenchError(f"send_to_peer failed: {r}")
        return dt

    def close(self):
        self.conn.close()


# ----- tmux pane running the same echo agent ---------------------------------------------

class TmuxPane:
    """A private tmux server (own socket, no config) with one pane running `argv`."""

    def __init__(self, world, argv, env, cwd):
        self.world = world
        self.sock = os.path.join(world.dir, "tmux.sock")
        self.target = "bench:0.0"
        tmux_env = dict(env)
        tmux_env.pop("TMUX", None)
        self.env = tmux_env
        self.tmux(["-f", "/dev/null", "new-session", "-d", "-s", "bench", "-x", "240", "-y",
                   "50", "-c", cwd, "--", *argv])
        self.server_pid = int(self.tmux(["display-message", "-p", "#{pid}"]).strip())
        self.pane_pid = int(self.tmux(["display-message", "-p", "-t", self.target,
                                       "#{pane_pid}"]).strip())
        world.own(self.server_pid, "tmux server")
        world.own(self.pane_pid, "tmux pane echo agent")
        self.wait_for("❯", 15)

    def tmux(self, args, check=True):
        p = subprocess.run(["tmux", "-S", self.sock, *args], env=self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise BenchError(f"tmux {' '.join(args[:2])} failed: {p.stderr.strip()}")
        return p.stdout

    def capture(self):
        return self.tmux(["capture-pane", "-p", "-t", self.target])

    def wait_for(self, needle, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.capture():
                return
        raise BenchError(f"tmux pane never showed {needle!r}:\n{self.capture()}")

    def timed_capture(self):
        t0 = now()
        self.capture()
        return now() - t0

    def timed_send_keys(self, envelope, ack, timeout=10):
        """`send-keys -l <envelope>`, `send-keys Enter`, then capture-pane until `ack` shows."""
        t0 = now()
        self.tmux(["send-keys", "-t", self.target, "-l", envelope])
        self.tmux(["send-keys", "-t", self.target, "Enter"])
        return self._until(ack, t0, timeout)

    def timed_paste(self, envelope, ack, timeout=10):
        """One tmux call: set-buffer, paste-buffer -p (bracketed), send-keys Enter; then poll."""
        t0 = now()
        self.tmux(["set-buffer", "-b", "bench", envelope, ";",
                   "paste-buffer", "-p", "-d", "-b", "bench", "-t", self.target, ";",
                   "send-keys", "-t", self.target, "Enter"])
        return self._until(ack, t0, timeout)

    def _until(self, ack, t0, timeout):
        limit = t0 + int(timeout * 1e9)
        while now() < limit:
            if ack in self.capture():
                return now() - t0
        raise BenchError(f"the tmux pane never showed {ack!r}:\n{self.capture()}")

    def close(self):
        self.tmux(["kill-server"], check=False)

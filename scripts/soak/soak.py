"""iapeer soak (driven by scripts/soak.sh): the real daemon under a mixed load for a bounded
time, then checks of its resources and of every send's answer against delivery.log.

Load (one thread each, all bounded by timeouts): `iapeer send` between echo peers, MCP
tools/call send_to_peer with a live session's token, wakes over the control socket (idle
sleeps come from a short IAPEER_IDLE_SECS), attach/detach through a pty, bad HTTP (garbage,
slow heads, oversized declared bodies, HTTP/2.0 request lines), control-socket garbage, and
kill -9 of echo agent processes the daemon started for this soak (by pid, after checking they
descend from our daemon).
The storm guard is lifted (IAPEER_STORM_LIMIT) so sends are real deliveries, and
delivery.log is not rotated during the run (its rotated copies are read anyway).

Checks (exit 1 when one fails):
  * the daemon is still running and answers a ping;
  * fds, threads and RSS of the daemon at rest (no live session) after the warm-up and at the
    end: fds and threads may grow by at most FD_SLACK / THREAD_SLACK, RSS by at most
    max(RSS_SLACK_KIB, 50 % of the start);
  * no sender left hanging: every send got an answer before its client timeout;
  * delivery.log agrees with the senders: every send the client saw as delivered or queued
    has an ok=true line with its topic, every refusal an ok=false line.
"""

import http.client
import json
import os
import pty
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import procfs  # noqa: E402
from world import World, BenchError  # noqa: E402

PEERS = [f"p{i}" for i in range(6)]
CLIENT_TIMEOUT = 90  # seconds any one send may take before we call it hanging
FD_SLACK = 8
THREAD_SLACK = 4
RSS_SLACK_KIB = 32 * 1024


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Soak:
    def __init__(self, binary, seconds, warmup):
        self.seconds = seconds
        self.warmup = warmup
        self.w = World(binary, keep=os.environ.get("SOAK_KEEP") == "1", prefix="iapeer-soak.")
        self.w.env.update({"IAPEER_IDLE_SECS": os.environ.get("SOAK_IDLE_SECS", "6"),
                           "IAPEER_TICK_SECS": "1",
                           # Not a storm test: every pair exchanges far more than the guard's
                           # 20 a minute, and its instant refusals would turn the load into a
                           # busy loop of refusals.
                           "IAPEER_STORM_LIMIT": "1000000",
                           # Keep every delivery line for the check (no rotation away).
                           "IAPEER_DELIVERY_LOG_MAX_BYTES": str(1 << 30)})
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.lock = threading.Lock()
        self.seq = 0
        self.sends = []  # dicts: topic, path, outcome (delivered/queued/refused/hang/error), code
        self.counts = {}
        self.errors = []

    # ----- bookkeeping --------------------------------------------------------------

    def next_topic(self):
        with self.lock:
            self.seq += 1
            return f"soak-{self.seq}"

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def record(self, **kw):
        with self.lock:
            self.sends.append(kw)

    def gate(self):
        """Wait while the load is paused (for a measurement); False when the soak is over."""
        while self.paused.is_set() and not self.stop.is_set():
            time.sleep(0.2)
        return not self.stop.is_set()

    def daemon_pid(self):
        return self.w.daemon.pid

    def live_sessions(self):
        try:
            return [s for s in self.w.sessions().values() if s.get("status") == "live"]
        except (OSError, BenchError, ValueError):
            return []

    # ----- load workers ---------------------------------------------------------------

    def cli_sender(self):
        while self.gate():
            frm, to = random.sample(PEERS, 2)
            if random.random() < 0.05:
                to = "nobody"  # a refusal: not registered
            topic = self.next_topic()
            args = [self.w.bin, "send", to, "--from", f"echo-{frm}", "--message",
                    f"echo: soak {topic}", "--topic", topic, "--json"]
            try:
                p = subprocess.run(args, env=self.w.env, cwd=self.w.dir, capture_output=True,
                                   text=True, stdin=subprocess.DEVNULL, timeout=CLIENT_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.record(topic=topic, path="cli", outcome="hang", code="")
                continue
            try:
                v = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                self.record(topic=topic, path="cli", outcome="error",
                            code=f"exit {p.returncode}: {p.stdout[:200]} {p.stderr[:200]}")
                continue
            self.record(topic=topic, path="cli", **outcome_of(v))
            self.stop.wait(random.uniform(0, 0.2))

    def mcp_sender(self):
        while self.gate():
            live = self.live_sessions()
            if not live:
                self.w.run(["send", random.choice(PEERS), "--from", "echo-soak",
                            "--message", "echo: wake"], check=False)
                time.sleep(0.5)
                continue
            s = random.choice(live)
            try:
                token = procfs.environ(s["pid"])["IAPEER_TOKEN"]
            except (OSError, KeyError):
                continue
            me = s["identity"]
            to = random.choice([p for p in PEERS if f"echo-{p}" != me])
            topic = self.next_topic()
            body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": "send_to_peer", "arguments": {
                                   "personality": to, "message": f"echo: soak {topic}",
                                   "topic": topic}}})
            headers = {"Content-Type": "application/json",
                       "Accept": "application/json, text/event-stream",
                       "X-IAPeer-Identity": me, "Authorization": f"Bearer {token}"}
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.w.port(),
                                               timeout=CLIENT_TIMEOUT)
                c.request("POST", "/mcp", body, headers)
                r = c.getresponse()
                text = r.read().decode(errors="replace")
                c.close()
            except socket.timeout:
                self.record(topic=topic, path="mcp", outcome="hang", code="")
                continue
            except OSError as e:
                self.record(topic=topic, path="mcp", outcome="error", code=f"http: {e}")
                continue
            if r.status in (401, 403):
                # The session ended (slept or killed) between our look-up and the call: the
                # daemon never accepted this send, so there is nothing to log.
                self.count("mcp auth refused (session gone)")
                continue
            if r.status != 200:
                self.record(topic=topic, path="mcp", outcome="error",
                            code=f"HTTP {r.status}: {text[:200]}")
                continue
            if text.lstrip().startswith("event:") or text.lstrip().startswith("data:"):
                text = "\n".join(l[5:].lstrip() for l in text.splitlines()
                                 if l.startswith("data:"))
            try:
                v = mcp_answer(json.loads(text)["result"])
            except (ValueError, KeyError, IndexError, TypeError):
                self.record(topic=topic, path="mcp", outcome="error", code=text[:200])
                self.stop.wait(random.uniform(0, 0.2))
                continue
            self.record(topic=topic, path="mcp", **outcome_of(v))
            self.stop.wait(random.uniform(0, 0.2))

    def waker(self):
        while self.gate():
            try:
                v = self.w.control({"op": "wake", "personality": random.choice(PEERS)},
                                   timeout=CLIENT_TIMEOUT)
                self.count("wake ok" if v.get("ok") else "wake refused")
            except (OSError, BenchError) as e:
                self.count("wake error")
                self.errors.append(f"wake: {e}")
            self.stop.wait(random.uniform(2, 8))

    def attacher(self):
        while self.gate():
            live = self.live_sessions()
            if not live:
                self.stop.wait(1)
                continue
            name = live[0]["identity"].split("-", 1)[1]
            pid, fd = pty.fork()
            if pid == 0:
                os.environ.clear()
                os.environ.update(self.w.env)
                os.environ["TERM"] = "xterm-256color"
                os.chdir(self.w.dir)
                os.execv(self.w.bin, [self.w.bin, "attach", name])
            got = 0
            end = time.monotonic() + random.uniform(0.5, 3)
            try:
                while time.monotonic() < end:
                    r, _, _ = select.select([fd], [], [], 0.2)
                    if r:
                        got += len(os.read(fd, 65536))
                os.write(fd, b"\x1d")  # Ctrl-]: detach
            except OSError:
                pass
            ok = wait_pid(pid, 10)
            if not ok:
                os.kill(pid, signal.SIGKILL)
                wait_pid(pid, 5)
                self.count("attach client stuck (killed)")
            else:
                self.count("attach/detach")
            try:
                os.close(fd)
            except OSError:
                pass
            self.stop.wait(random.uniform(1, 4))

    def bad_http(self):
        shapes = [
            b"\x00\xff garbage \r\n\r\n",
            b"GET /mcp HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n{",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\n\r\n",
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 200000 + b"\r\n\r\n",
        ]
        while self.gate():
            kind = random.randrange(len(shapes) + 1)
            try:
                s = socket.create_connection(("127.0.0.1", self.w.port()), timeout=10)
                if kind == len(shapes):
                    s.sendall(b"GET /mcp HTTP/1.1\r\nHo")  # a slow head, then hold it
                    self.stop.wait(random.uniform(2, 8))
                else:
                    s.sendall(shapes[kind])
                    try:
                        s.recv(4096)
                    except OSError:
                        pass
                s.close()
                self.count("bad http")
            except OSError:
                self.count("bad http (connection refused or reset)")
            self.stop.wait(random.uniform(0.05, 0.5))

    def control_garbage(self):
        shapes = [b"not json\n", b"{\"op\":\"nope\"}\n", b"{\"op\":\n", b"\xff\xfe\x00\n",
                  b"{" * 5000 + b"\n", b"[]\n", b"{\"op\":\"send\"}\n", b"x" * 100000 + b"\n"]
        while self.gate():
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(10)
                    s.connect(self.w.socket_path)
                    s.sendall(random.choice(shapes))
                    if random.random() < 0.3:
                        s.shutdown(socket.SHUT_WR)
                    try:
                        s.recv(4096)
                    except OSError:
                        pass
                self.count("control garbage")
            except OSError as e:
                self.count("control garbage error")
                self.errors.append(f"control: {e}")
            self.stop.wait(random.uniform(0.05, 0.5))

    def killer(self):
        while self.gate():
            self.stop.wait(random.uniform(10, 30))
            if self.stop.is_set() or self.paused.is_set():
                continue
            live = self.live_sessions()
            if not live:
                continue
            s = random.choice(live)
            pid = s["pid"]
            # Only a process of this soak: a descendant of our daemon running our binary.
            if pid in procfs.descendants(self.daemon_pid()) and any(
                    self.w.bin in a for a in procfs.cmdline(pid)):
                try:
                    os.kill(pid, signal.SIGKILL)
                    self.count("kill -9 agent")
                except ProcessLookupError:
                    pass

    # ----- measurement ------------------------------------------------------------------

    def at_rest(self, label):
        """Pause the load, wait for every session to sleep, and sample the daemon."""
        self.paused.set()
        time.sleep(3)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.live_sessions():
            time.sleep(1)
        time.sleep(3)
        dpid = self.daemon_pid()
        m = {"fds": fd_count(dpid), "threads": procfs.threads(dpid),
             "rss_kib": procfs.vm_rss_kib(dpid), "live": len(self.live_sessions())}
        log(f"{label}: {m}")
        self.paused.clear()
        return m

    def run(self):
        w = self.w
        for p in PEERS + ["soak"]:
            w.create_echo(p)
        w.start_daemon()
        log(f"daemon pid {self.daemon_pid()}, folder {w.dir}, {self.seconds} s, "
            f"warm-up {self.warmup} s")
        workers = [self.cli_sender, self.cli_sender, self.mcp_sender, self.waker,
                   self.attacher, self.bad_http, self.bad_http, self.control_garbage,
                   self.killer]
        threads = [threading.Thread(target=f, daemon=True) for f in workers]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        self.stop.wait(self.warmup)
        start = self.at_rest("at rest after warm-up")
        end_at = t0 + self.seconds
        while time.monotonic() < end_at:
            time.sleep(min(60, max(0, end_at - time.monotonic())))
            dpid = self.daemon_pid()
            if w.daemon.poll() is not None:
                break
            log(f"progress: sends {len(self.sends)}, fds {fd_count(dpid)}, threads "
                f"{procfs.threads(dpid)}, rss {procfs.vm_rss_kib(dpid)} KiB, {self.counts}")
        self.stop.set()
        for t in threads:
            t.join(CLIENT_TIMEOUT + 30)
        stuck = [t for t in threads if t.is_alive()]
        return self.check(start, stuck)

    # ----- checks -----------------------------------------------------------------------

    def check(self, start, stuck):
        w = self.w
        failures = []
        if w.daemon.poll() is not None:
            failures.append(f"the daemon exited with {w.daemon.returncode}")
            end = None
        else:
            end = self.at_rest("at rest at the end")
            try:
                if not w.control({"op": "ping"}, timeout=10).get("ok"):
                    failures.append("the daemon does not answer ping")
            except (OSError, BenchError) as e:
                failures.append(f"the daemon does not answer ping: {e}")
        if stuck:
            failures.append(f"{len(stuck)} load thread(s) still running after the stop")
        if end:
            failures += resource_failures(start, end)
        by = {}
        for s in self.sends:
            by[s["outcome"]] = by.get(s["outcome"], 0) + 1
        hangs = [s for s in self.sends if s["outcome"] == "hang"]
        errs = [s for s in self.sends if s["outcome"] == "error"]
        if hangs:
            failures.append(f"{len(hangs)} send(s) got no answer within {CLIENT_TIMEOUT} s: "
                            f"{[s['topic'] for s in hangs[:10]]}")
        if errs:
            failures.append(f"{len(errs)} send(s) got an answer that is not a send result: "
                            f"{errs[:5]}")
        mismatched = consistency_failures(self.sends, delivery_lines(w.log_path("delivery")))
        if mismatched:
            failures.append(f"{len(mismatched)} send(s) disagree with delivery.log: "
                            f"{mismatched[:10]}")
        codes = {}
        for s in self.sends:
            if s["outcome"] == "refused":
                codes[s["code"]] = codes.get(s["code"], 0) + 1
        print()
        print("=== soak summary ===")
        print(f"duration: {self.seconds} s (warm-up {self.warmup} s), daemon pid "
              f"{self.daemon_pid()}")
        print(f"sends: {len(self.sends)} total, by outcome {by}")
        print(f"  cli {sum(1 for s in self.sends if s['path'] == 'cli')}, "
              f"mcp {sum(1 for s in self.sends if s['path'] == 'mcp')}")
        print(f"refusal codes: {codes}")
        print(f"other load: {self.counts}")
        print(f"daemon at rest after warm-up: {start}")
        print(f"daemon at rest at the end:    {end}")
        print(f"bounds: fds +{FD_SLACK}, threads +{THREAD_SLACK}, "
              f"RSS +max({RSS_SLACK_KIB} KiB, 50 %)")
        if self.errors:
            print(f"load errors (not checks): {len(self.errors)}, first: {self.errors[:3]}")
        if failures:
            print("FAILED:")
            for f in failures:
                print(f"  - {f}")
            return 1
        print("all checks passed")
        return 0


def mcp_answer(res):
    """A tools/call result -> the send answer: structuredContent when present; a tool error
    (isError, a sentence in content[0].text) is a refusal with code "tool-error"."""
    if res.get("structuredContent"):
        return res["structuredContent"]
    if res.get("isError"):
        return {"ok": False, "code": "tool-error", "error": res["content"][0]["text"]}
    return json.loads(res["content"][0]["text"])


def outcome_of(v):
    """A send's answer (CLI --json or MCP structuredContent) -> outcome and code."""
    if v.get("ok"):
        return {"outcome": "queued" if v.get("queued") else "delivered", "code": ""}
    return {"outcome": "refused", "code": v.get("code", "?")}


def resource_failures(start, end):
    """Growth of the daemon at rest beyond the bounds: a list of sentences (empty = fine).

    `start`/`end` are dicts with fds, threads and rss_kib (KiB)."""
    out = []
    if end["fds"] > start["fds"] + FD_SLACK:
        out.append(f"fds grew {start['fds']} -> {end['fds']} (bound +{FD_SLACK})")
    if end["threads"] > start["threads"] + THREAD_SLACK:
        out.append(f"threads grew {start['threads']} -> {end['threads']} "
                   f"(bound +{THREAD_SLACK})")
    rss_bound = start["rss_kib"] + max(RSS_SLACK_KIB, start["rss_kib"] // 2)
    if end["rss_kib"] > rss_bound:
        out.append(f"RSS grew {start['rss_kib']} -> {end['rss_kib']} KiB (bound {rss_bound})")
    return out


def consistency_failures(sends, lines):
    """Sends whose answer has no matching delivery.log line: delivered/queued need an
    ok=true line with their topic, refusals an ok=false line. `lines` is delivery_lines()."""
    out = []
    for s in sends:
        want = {"delivered": "true", "queued": "true", "refused": "false"}.get(s["outcome"])
        if want is None:
            continue
        got = lines.get(s["topic"], [])
        if want not in got:
            out.append(f"{s['path']} {s['topic']} {s['outcome']} {s.get('code', '')}"
                       f" -> delivery.log ok={got}")
    return out


def delivery_lines(path):
    """topic -> list of ok values of its `ev=delivery` lines in `path` and its rotated
    copies (`path.1` … `path.9`)."""
    out = {}
    for p in [path] + [f"{path}.{i}" for i in range(1, 10)]:
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if " ev=delivery " not in line:
                        continue
                    t = re.search(r" topic=(soak-\d+)", line)
                    ok = re.search(r" ok=(\w+)", line)
                    if t and ok:
                        out.setdefault(t.group(1), []).append(ok.group(1))
        except OSError:
            pass
    return out


def wait_pid(pid, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        time.sleep(0.05)
    return False


def main():
    binary, seconds, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    soak = Soak(binary, seconds, warmup)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    code = 2
    try:
        code = soak.run()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        soak.stop.set()
        soak.w.close()
    sys.exit(code)


if __name__ == "__main__":
    main()

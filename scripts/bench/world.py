"""A private iapeer world for the benchmark: temp HOME and IAPEER_ROOT, port 0, the release
binary, a real daemon, echo peers, and cleanup of every process started (by pid)."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import procfs

# Variables that would point the benchmark at a real daemon or change its auth rules.
SCRUB = [
    "PEER_IDENTITY", "PEER_PERSONALITY", "PEER_RUNTIME", "IAPEER_TOKEN",
    "IAPEER_DAEMON_SOCKET", "IAPEER_BEARER_TOKEN", "IAPEER_MCP_AUTH", "IAPEER_MCP_URL",
    "TMUX", "TMUX_PANE",
]


class BenchError(Exception):
    pass


class World:
    def __init__(self, binary, keep=False, prefix="iapeer-bench."):
        self.bin = binary
        self.keep = keep
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.home = os.path.join(self.dir, "home")
        self.root = os.path.join(self.dir, "root")
        os.makedirs(self.home)
        os.makedirs(self.root)
        env = {k: v for k, v in os.environ.items() if k not in SCRUB}
        env.update({"HOME": self.home, "IAPEER_ROOT": self.root, "IAPEER_PORT": "0",
                    "IS_SANDBOX": "1"})
        self.env = env
        self.daemon = None
        self.daemon_log = None
        # Every pid we caused to exist and must see gone at the end.
        self.owned = {}  # pid -> description
        # A leftover pid is killed only while its argv mentions one of these (guards against
        # pid reuse): our binary, tmux, and whatever else a phase adds (agent CLI folders).
        self.marks = [binary, "tmux"]

    # ----- plain commands ------------------------------------------------------------

    def run(self, args, check=True, env=None):
        p = subprocess.run([self.bin, *args], env=env or self.env, cwd=self.dir,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise BenchError(f"iapeer {' '.join(args)} exited {p.returncode}: "
                             f"{p.stdout}{p.stderr}")
        return p

    def create_echo(self, name):
        self.run(["create", name, "--runtime", "echo"])

    # ----- daemon ----------------------------------------------------------------------

    @property
    def socket_path(self):
        return os.path.join(self.root, "state/iapeer/router.sock")

    @property
    def router_json(self):
        return os.path.join(self.root, "state/iapeer/router.json")

    def fleet_token(self):
        """The fleet API's token, read as a script of the same user reads it."""
        with open(os.path.join(self.root, "state/iapeer/fleet.token")) as f:
            return f.read().strip()

    def log_path(self, name):
        return os.path.join(self.root, "logs/iapeer", f"{name}.log")

    def start_daemon(self):
        assert self.daemon is None
        self.daemon_log = open(os.path.join(self.dir, "daemon-stderr.log"), "ab")
        self.daemon = subprocess.Popen([self.bin, "daemon"], env=self.env, cwd=self.dir,
                                       stdin=subprocess.DEVNULL, stdout=self.daemon_log,
                                       stderr=self.daemon_log)
        self.owned[self.daemon.pid] = "daemon"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.daemon.poll() is not None:
                raise BenchError(f"the daemon exited with {self.daemon.returncode}; "
                                 f"see {self.dir}/daemon-stderr.log")
            if os.path.exists(self.router_json):
                try:
                    if self.control({"op": "ping"}).get("ok"):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise BenchError("the daemon did not answer within 30 s")

    def stop_daemon(self):
        """SIGTERM the daemon (it ends its sessions), then make sure every session is gone."""
        if self.daemon is None:
            return
        kids = procfs.descendants(self.daemon.pid)
        for k in kids:
            self.owned.setdefault(k, "session child")
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        self.owned.pop(self.daemon.pid, None)
        self.daemon = None
        self.daemon_log.close()
        self._reap_owned(grace=10)

    def port(self):
        with open(self.router_json) as f:
            tcp = json.load(f)["tcp"]
        m = re.match(r"http://127\.0\.0\.1:(\d+)/mcp", tcp)
        if not m:
            raise BenchError(f"unexpected tcp address in router.json: {tcp}")
        return int(m.group(1))

    def control(self, req, timeout=300):
        """One request on a fresh control connection; returns the final (non-progress) line."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.socket_path)
            s.sendall((json.dumps(req) + "\n").encode())
            buf = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    raise BenchError(f"daemon closed the connection during {req['op']}")
                buf += chunk
                while b"\n" in buf:
                    line, _, buf = buf.partition(b"\n")
                    v = json.loads(line)
                    if "progress" not in v:
                        return v

    def wake(self, name):
        """Wake an echo peer; returns seconds until the daemon answered (session ready)."""
        t0 = time.perf_counter()
        v = self.control({"op": "wake", "personality": name})
        dt = time.perf_counter() - t0
        if not v.get("ok"):
            raise BenchError(f"wake {name} failed: {v}")
        return dt

    def list_rows(self):
        """`iapeer list --json`: one row per peer with its runtimes and their status."""
        return json.loads(self.run(["list", "--json"]).stdout)

    def status_of(self, personality, runtime):
        """live / asleep / stopped / parked / booting for one identity ("" when unknown)."""
        for row in self.list_rows():
            if row.get("personality") == personality:
                for rt in row.get("runtimes", []):
                    if rt.get("runtime") == runtime:
                        return rt.get("status", "")
        return ""

    def sessions(self):
        v = self.control({"op": "list"})
        if not v.get("ok"):
            raise BenchError(f"list failed: {v}")
        out = {s["identity"]: s for s in v["sessions"]}
        for s in out.values():
            self.owned.setdefault(s["pid"], f"session {s['identity']}")
        return out

    def live_pid(self, identity):
        s = self.sessions().get(identity)
        if not s or s["status"] != "live":
            raise BenchError(f"{identity} is not live: {s}")
        return s["pid"]

    # ----- cleanup -------------------------------------------------------------------

    def own(self, pid, what):
        self.owned[pid] = what

    def _ours(self, pid):
        """pid still runs one of our programs (guards against pid reuse)."""
        cmd = procfs.cmdline(pid)
        return procfs.alive(pid) and any(m in a for m in self.marks for a in cmd)

    def _reap_owned(self, grace):
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not any(procfs.alive(p) for p in self.owned):
                break
            time.sleep(0.1)
        for pid, what in list(self.owned.items()):
            if self._ours(pid):
                print(f"  cleanup: killing leftover {what} (pid {pid})")
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.owned = {p: w for p, w in self.owned.items() if procfs.alive(p)}

    def close(self):
        try:
            self.stop_daemon()
        finally:
            self._reap_owned(grace=5)
            if self.keep:
                print(f"  kept the bench folder: {self.dir}")
            else:
                shutil.rmtree(self.dir, ignore_errors=True)

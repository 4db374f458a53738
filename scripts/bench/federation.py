"""The bench's federation line (issue 28 item 8): a live echo send to a peer of another host
next to the same send to a local one. A private redis-server on a free loopback port (nothing
saved), two daemons with roots of their own joined to it as hosts a (alice, bob) and b (carol),
every recipient live before the runs; then `iapeer send bob` and `iapeer send carol@b` from
echo-alice, interleaved, each timed as a whole CLI process until its answer ("delivered to …").
Goal: the remote median at most the local median + 5 ms (loopback Redis).

Usage: python3 federation.py <iapeer binary>
Environment: BENCH_FED_RUNS (100 sends of each kind), BENCH_FED_WARMUP (10), BENCH_KEEP=1,
BENCH_OUT (text file).
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import measure  # noqa: E402
from report import summary, table  # noqa: E402
from world import BenchError, World  # noqa: E402

GOAL_MS = 5.0


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def redis_program():
    for d in os.environ.get("PATH", "").split(":") + ["/usr/bin", "/usr/sbin", "/usr/local/bin"]:
        for name in ("redis-server", "valkey-server"):
            p = os.path.join(d, name)
            if os.path.isfile(p):
                return p
    raise BenchError("redis-server is not installed (apt-get install redis-server)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(folder):
    port = free_port()
    password = os.urandom(16).hex()
    p = subprocess.Popen([redis_program(), "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "no", "--requirepass", password,
                          "--dir", folder],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(f"AUTH {password}\r\nPING\r\n".encode())
                got = b""
                while b"PONG" not in got:
                    chunk = s.recv(64)
                    if not chunk:
                        break
                    got += chunk
                if b"PONG" in got:
                    return p, f"redis://:{password}@127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise BenchError("the private redis-server did not answer")


def wait(what, cond, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise BenchError(f"timed out waiting for {what}")


def main():
    binary = os.path.abspath(sys.argv[1])
    runs = int(os.environ.get("BENCH_FED_RUNS", "100"))
    warmup = int(os.environ.get("BENCH_FED_WARMUP", "10"))
    keep = os.environ.get("BENCH_KEEP") == "1"
    folder = tempfile.mkdtemp(prefix="iapeer-bench-fed.")
    redis = None
    a = World(binary, keep=keep, prefix="iapeer-bench-fed-a.")
    b = World(binary, keep=keep, prefix="iapeer-bench-fed-b.")
    try:
        redis, url = start_redis(folder)
        for name in ("alice", "bob"):
            a.create_echo(name)
        b.create_echo("carol")
        for w, host in ((a, "a"), (b, "b")):
            w.start_daemon()
            w.run(["federation", "join", url, "--host-name", host])
        wait("a lists carol@b online", lambda: any(
            r.get("address") == "carol@b" and r.get("host_online") for r in a.list_rows()))
        for w, name in ((a, "alice"), (a, "bob"), (b, "carol")):
            w.wake(name)
        print(f"uptime before the runs: load average {loadavg()}")
        local, remote = [], []
        for i in range(warmup + runs):
            l_ns = measure.timed_process(
                [a.bin, "send", "bob", "--from", "echo-alice", "--message", f"echo: bench local {i}"],
                a.env, a.dir, expect="delivered to bob (echo)")
            r_ns = measure.timed_process(
                [a.bin, "send", "carol@b", "--from", "echo-alice", "--message", f"echo: bench remote {i}"],
                a.env, a.dir, expect="delivered to carol (echo)")
            if i >= warmup:
                local.append(l_ns / 1e6)
                remote.append(r_ns / 1e6)
        load = loadavg()
        ls, rs = summary(local), summary(remote)
        rows = [[k, f"{s['n']}", f"{s['median']:.1f}", f"{s['p90']:.1f}", f"{s['p99']:.1f}"]
                for k, s in (("local live echo send", ls),
                             ("remote live echo send (carol@b)", rs))]
        out = [table(["iapeer send (whole CLI process, ms)", "n", "p50", "p90", "p99"], rows)]
        diff = rs["median"] - ls["median"]
        verdict = "PASS" if diff <= GOAL_MS else "MISS"
        out.append(f"[{verdict}] federation: remote p50 {rs['median']:.1f} ms = local p50 "
                   f"{ls['median']:.1f} ms + {diff:.1f} ms (goal: ≤ local + {GOAL_MS:.0f} ms, "
                   f"loopback redis) — load average {load}")
        text = "\n".join(out)
        print(text)
        if os.environ.get("BENCH_OUT"):
            with open(os.environ["BENCH_OUT"], "a") as f:
                f.write(text + "\n")
    finally:
        for w in (a, b):
            w.close()
        if redis is not None:
            redis.terminate()
            try:
                redis.wait(timeout=5)
            except subprocess.TimeoutExpired:
                redis.kill()
                redis.wait()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        sys.exit(1)

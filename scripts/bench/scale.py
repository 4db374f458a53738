"""The bench's scale mode (issue 31 item 4): one daemon, live echo sessions brought to each
level (10 / 100 / 1 000 by default), and at each level the daemon's memory (VmRSS and PSS
from smaps_rollup, MiB), its open descriptors per live session (what they are, from
/proc/<pid>/fd), its threads, `iapeer send` p50 to live peers and wake p50 of a fresh peer.

Memory and descriptors are robust; the latencies move with the machine's load (printed
beside them).

Usage: python3 scale.py <release iapeer binary> [levels, e.g. 10,100,1000]
Environment: BENCH_SCALE_LEVELS (10,100,1000), BENCH_SCALE_SENDS (30 sends per level),
BENCH_SCALE_WAKES (10 wakes of fresh peers per level), BENCH_SCALE_JOBS (8 wakes at once
while filling a level), BENCH_SCALE_QUIET (15: seconds after the last wake of a level when
memory and descriptors are read; a session goes quiet 10 s after its last output:
QUIET_AFTER in src/session/thread/mod.rs), BENCH_KEEP=1, BENCH_OUT (text file).
"""

import concurrent.futures
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import measure  # noqa: E402
import procfs  # noqa: E402
from report import summary, table  # noqa: E402
from world import BenchError, World  # noqa: E402

MIB = 1024.0


def env_int(name, default):
    v = os.environ.get(name, "").strip()
    return int(v) if v else default


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fd_kind(target):
    """What an fd is, from its /proc/<pid>/fd link: 'eventpoll', 'eventfd', 'pidfd',
    'pty master', 'unix socket' (sockets are told apart no further), 'pipe', or 'file'."""
    if target.startswith("anon_inode:"):
        return target[len("anon_inode:"):].strip("[]")
    if target in ("/dev/ptmx", "/dev/pts/ptmx"):
        return "pty master"
    if target.startswith("socket:"):
        return "socket"
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("/dev/"):
        return target
    return "file"


def fds(pid):
    """{kind: count} of the open descriptors of pid."""
    out = {}
    base = f"/proc/{pid}/fd"
    for name in os.listdir(base):
        try:
            k = fd_kind(os.readlink(os.path.join(base, name)))
        except OSError:
            continue
        out[k] = out.get(k, 0) + 1
    return out


def smaps_classes(pid):
    """Rss in KiB of the daemon's mappings by what they hold: 'thread stacks' (anonymous
    mappings of a thread stack's size, as std sizes them), 'malloc arenas' (the rest of
    the anonymous mappings), '[heap]', 'binary and libraries' (file-backed)."""
    out = {}
    cur = None
    stack_kib = stack_size_kib()
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                m = re.match(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$", line)
                if m:
                    path = m.group(2).strip()
                    cur = ("[heap]" if path == "[heap]" else
                           "binary and libraries" if path.startswith("/") else
                           path if path.startswith("[") else None)
                    continue
                if line.startswith("Size:"):
                    size = int(line.split()[1])
                    if cur is None:
                        cur = "thread stacks" if size in stack_kib else "malloc arenas"
                elif line.startswith("Rss:"):
                    out[cur] = out.get(cur, 0) + int(line.split()[1])
    except OSError:
        pass
    return out


def stack_size_kib():
    """Mapping sizes (KiB) that are thread stacks: glibc maps the stack and its guard page
    together, so a thread of stack size S is one mapping of S + 4 KiB... or S when the guard
    is a separate mapping. Std's default 2 MiB, the session threads' size and 8 MiB."""
    sizes = set()
    for s in (2048, 8192, env_int("BENCH_SCALE_STACK_KIB", 256)):
        sizes.update({s, s + 4})
    return sizes


class Scale:
    def __init__(self, binary, levels):
        self.levels = sorted(levels)
        self.sends = env_int("BENCH_SCALE_SENDS", 30)
        self.wakes = env_int("BENCH_SCALE_WAKES", 10)
        self.jobs = env_int("BENCH_SCALE_JOBS", 8)
        self.quiet = env_int("BENCH_SCALE_QUIET", 15)
        self.world = World(binary, keep=os.environ.get("BENCH_KEEP") == "1",
                           prefix="iapeer-scale.")
        self.rows = []

    def create(self, names):
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            list(ex.map(self.world.create_echo, names))

    def fill(self, names):
        with concurrent.futures.ThreadPoolExecutor(self.jobs) as ex:
            list(ex.map(self.world.wake, names))

    def stop(self, name):
        v = self.world.control({"op": "stop", "personality": name})
        if not v.get("ok"):
            raise BenchError(f"stop {name} failed: {v}")

    def live_count(self):
        return sum(1 for s in self.world.sessions().values() if s.get("status") == "live")

    def measure(self, level, live_names, probes, base, filled_at):
        w = self.world
        dpid = w.daemon.pid
        time.sleep(2)  # boots' screen and transcript work settles
        if self.live_count() != level:
            raise BenchError(f"expected {level} live sessions, found {self.live_count()}")
        fresh = {"rss_kib": procfs.vm_rss_kib(dpid), "fds": sum(fds(dpid).values())}
        time.sleep(max(0.0, filled_at + self.quiet - time.monotonic()))
        fd = fds(dpid)
        rss, pss = procfs.vm_rss_kib(dpid), procfs.pss_kib(dpid)
        threads = procfs.threads(dpid)
        classes = smaps_classes(dpid)
        load_mem = loadavg()
        # Sends: `iapeer send` to live echo peers, round robin; "echo:" bodies are not
        # answered, so no reply traffic adds to the next sample.
        sender = f"echo-{live_names[0]}"
        offset = measure.file_size(w.log_path("delivery"))
        cli = []
        for i in range(self.sends):
            to = live_names[1 + i % (len(live_names) - 1)]
            cli.append(measure.cli_send(w, to, sender, f"echo: scale {level} {i}"))
        daemon_ms = [float(f["ms"]) for f in
                     measure.events_since(w.log_path("delivery"), offset, "delivery")
                     if f.get("path") == "cli" and f.get("ok") == "true"]
        load_send = loadavg()
        wakes = []
        for name in probes:
            wakes.append(w.wake(name))
            self.stop(name)
        load_wake = loadavg()
        per = {k: (fd.get(k, 0) - base["fds"].get(k, 0)) / level
               for k in set(fd) | set(base["fds"])}
        row = {
            "live": level,
            "rss_kib": rss,
            "pss_kib": pss,
            "rss_per_session_kib": (rss - base["rss_kib"]) / level,
            "fds": sum(fd.values()),
            "fds_per_session": (sum(fd.values()) - sum(base["fds"].values())) / level,
            "fds_per_session_by_kind": {k: v for k, v in per.items() if v},
            "fresh_rss_kib": fresh["rss_kib"],
            "fresh_fds_per_session": (fresh["fds"] - sum(base["fds"].values())) / level,
            "threads": threads,
            "smaps_rss_kib": classes,
            "send_ms": [x / 1e6 for x in cli],
            "send_daemon_ms": daemon_ms,
            "wake_ms": [x * 1e3 for x in wakes],
            "load": {"memory": load_mem, "send": load_send, "wake": load_wake},
        }
        self.rows.append(row)
        log(f"{level} live: VmRSS {rss / MIB:.1f} MiB (PSS {pss / MIB:.1f}), "
            f"{row['fds_per_session']:.2f} fds/session, {threads} threads, send p50 "
            f"{summary(row['send_ms'])['median']:.1f} ms, wake p50 "
            f"{summary(row['wake_ms'])['median']:.0f} ms (load {load_wake})")
        return row

    def run(self):
        w = self.world
        top = self.levels[-1]
        live_names = [f"s{i:04d}" for i in range(top)]
        probes = {lv: [f"w{lv}x{i:02d}" for i in range(self.wakes)] for lv in self.levels}
        all_names = live_names + [n for ps in probes.values() for n in ps]
        log(f"creating {len(all_names)} echo peers")
        self.create(all_names)
        w.start_daemon()
        time.sleep(2)
        dpid = w.daemon.pid
        base = {"fds": fds(dpid), "rss_kib": procfs.vm_rss_kib(dpid),
                "pss_kib": procfs.pss_kib(dpid), "threads": procfs.threads(dpid)}
        self.base = base
        log(f"0 live: VmRSS {base['rss_kib'] / MIB:.1f} MiB, {sum(base['fds'].values())} "
            f"fds, {base['threads']} threads")
        live = 0
        for level in self.levels:
            log(f"waking {level - live} peers ({self.jobs} at once)")
            t0 = time.monotonic()
            self.fill(live_names[live:level])
            live = level
            log(f"  {level} live after {time.monotonic() - t0:.0f} s")
            self.measure(level, live_names[:level], probes[level], base, time.monotonic())
        w.stop_daemon()

    def render(self):
        b = self.base
        lines = [f"SCALE (issue 31 item 4): one daemon, live echo sessions; at 0 live "
                 f"VmRSS {b['rss_kib'] / MIB:.1f} MiB, {sum(b['fds'].values())} fds, "
                 f"{b['threads']} threads"]
        head = ["live", "VmRSS MiB", "PSS MiB", "KiB/session", "fds/session", "threads",
                "send p50 ms", "(daemon ms)", "wake p50 ms", "load (mem/send/wake)"]
        rows = []
        for r in self.rows:
            dm = r["send_daemon_ms"]
            rows.append([r["live"], f"{r['rss_kib'] / MIB:.1f}", f"{r['pss_kib'] / MIB:.1f}",
                         f"{r['rss_per_session_kib']:.0f}", f"{r['fds_per_session']:.2f}",
                         r["threads"], f"{summary(r['send_ms'])['median']:.1f}",
                         f"{summary(dm)['median']:.0f}" if dm else "?",
                         f"{summary(r['wake_ms'])['median']:.0f}",
                         " / ".join(r["load"][k] for k in ("memory", "send", "wake"))])
        lines.append(table(head, rows))
        for r in self.rows:
            kinds = ", ".join(f"{k} {v:.2f}" for k, v in
                              sorted(r["fds_per_session_by_kind"].items(), key=lambda x: -x[1]))
            mem = ", ".join(f"{k} {v / MIB:.1f}" for k, v in
                            sorted(r["smaps_rss_kib"].items(), key=lambda x: -x[1]))
            lines.append(f"  {r['live']} live: fds per session: {kinds}; VmRSS MiB by "
                         f"mapping: {mem}; 2 s after the last wake: VmRSS "
                         f"{r['fresh_rss_kib'] / MIB:.1f} MiB, "
                         f"{r['fresh_fds_per_session']:.2f} fds/session")
        lines.append(f"  memory and descriptors: {self.quiet} s after a level's last wake (the "
                     "sessions quiet: no output for 10 s); ")
        lines[-1] += ("send: `iapeer send` CLI start..exit to a live echo peer (round robin; "
                     "daemon ms = delivery.log ms=); wake: control `wake` of a fresh echo "
                     "peer until ready, then `stop`. CAVEAT: 2 shared cores, latencies follow "
                     "the load beside them; memory and descriptors do not.")
        return "\n".join(lines)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    binary = os.path.abspath(sys.argv[1])
    spec = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("BENCH_SCALE_LEVELS",
                                                                "10,100,1000")
    levels = [int(x) for x in spec.split(",") if x.strip()]
    if not levels or min(levels) < 2:
        raise SystemExit("scale levels: at least 2 live sessions per level, e.g. 10,100,1000")
    s = Scale(binary, levels)
    ok = False
    try:
        s.run()
        ok = True
    except BenchError as e:
        print(f"scale bench failed: {e}", file=sys.stderr)
        s.world.keep = True
    except KeyboardInterrupt as e:
        print(f"scale bench interrupted ({e}); cleaning up", file=sys.stderr)
    finally:
        s.world.close()
    if not ok:
        return 1
    text = s.render()
    print()
    print(text)
    out = os.environ.get("BENCH_OUT")
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

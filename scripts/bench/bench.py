"""iapeer benchmark (driven by scripts/bench.sh): latency of `iapeer send`, MCP tools/call
and control `ping`; daemon memory with 0/10/50 live echo peers; idle CPU; a comparison
with `tmux send-keys` into a pane running the same echo agent; a burst of concurrent MCP
calls (burst.py); the real Claude Code, Codex, Gemini CLI and OpenCode woken and messaged
through iapeer with a stand-in model API (agentbench.py); and one PASS/MISS line per issue 13 target (targets.py).

Usage: python3 bench.py <release iapeer binary> <repo root>
Environment: BENCH_RUNS, BENCH_QUICK=1, BENCH_PINGS, BENCH_IDLE_SECS, BENCH_PEERS (e.g.
"0,10,50"), BENCH_IDLE_PEERS, BENCH_OUT (table file), BENCH_KEEP=1 (keep the temp folder),
BENCH_AGENTS ("claude,codex,gemini,opencode" by default; 0 skips the agent phase), BENCH_AGENT_RUNS,
BENCH_MODEL_DELAY_MS (the stand-in model's thinking time, standin.py), BENCH_BURST_CALLS (1000; 0 skips the burst), BENCH_BURST_PEERS (20), BENCH_BURSTS (3 bursts, one
after another; their samples are pooled), BENCH_BURST_ONLY=1 (the burst phase alone),
BENCH_AGENTS_ONLY=1 (the agent phase and its floor alone, with each runtime's live send ->
model request target line).
"""

import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import agentbench  # noqa: E402
import burst  # noqa: E402
import floor  # noqa: E402
import measure  # noqa: E402
import procfs  # noqa: E402
import render  # noqa: E402
import targets  # noqa: E402
from world import BenchError, World  # noqa: E402

MS = 1e6
US = 1e3
MIB = 1024.0


def env_int(name, default):
    v = os.environ.get(name, "").strip()
    return int(v) if v else default


def settle_ms(repo):
    """The paste settle the daemon uses, read from src/session/deliver.rs (fallback 300)."""
    try:
        with open(os.path.join(repo, "src/session/deliver.rs")) as f:
            m = re.search(r"pub const SETTLE: Duration = Duration::from_millis\((\d+)\)", f.read())
        return int(m.group(1)) if m else 300
    except OSError:
        return 300


def ready_settles(repo):
    """{runtime: ms} of each adapter's `ready_settle` in src/runtime/<rt>.rs (0 if unknown)."""
    out = {}
    for rt in ("claude", "codex"):
        try:
            with open(os.path.join(repo, f"src/runtime/{rt}.rs")) as f:
                m = re.search(r"fn ready_settle\(&self\) -> Duration \{[^}]*?"
                              r"Duration::from_millis\((\d+)\)", f.read())
            out[rt] = int(m.group(1)) if m else 0
        except OSError:
            out[rt] = 0
    return out


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, shell=True).stdout.strip()
    except OSError:
        return "?"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Bench:
    def __init__(self, binary, repo):
        quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
        self.quick = quick
        self.runs = env_int("BENCH_RUNS", 20 if quick else 200)
        self.pings = env_int("BENCH_PINGS", 500 if quick else 5000)
        self.idle_secs = env_int("BENCH_IDLE_SECS", 10 if quick else 60)
        levels = os.environ.get("BENCH_PEERS", "0,10" if quick else "0,10,50")
        self.levels = sorted({int(x) for x in levels.split(",") if x.strip()})
        self.idle_peers = env_int("BENCH_IDLE_PEERS", 10)
        self.warmup = 2 if quick else 5
        self.settle = settle_ms(repo)
        self.binary = binary
        self.repo = repo
        self.world = World(binary, keep=os.environ.get("BENCH_KEEP") == "1")
        self.results = {}
        self.phase_load = {}
        self.tmux = None
        every = ",".join(agentbench.RUNTIMES)
        sel = os.environ.get("BENCH_AGENTS", every).strip().lower()
        sel = every if sel in ("", "1") else sel
        self.agent_rts = [] if sel == "0" else [x.strip() for x in sel.split(",") if x.strip()]
        bad = [x for x in self.agent_rts if x not in agentbench.RUNTIMES]
        if bad:
            raise SystemExit(f"BENCH_AGENTS: unknown runtime(s) {bad}; use {every} or 0")
        self.agent_runs = env_int("BENCH_AGENT_RUNS", 3 if quick else 10)
        self.agent_warmup = 1
        self.floor = os.environ.get("BENCH_FLOOR", "1") != "0"
        self.burst_calls = env_int("BENCH_BURST_CALLS", 1000)
        self.burst_peers = env_int("BENCH_BURST_PEERS", 20)
        self.bursts = max(1, env_int("BENCH_BURSTS", 3))
        self.agent_bench = None

    # ----- phase 1: memory and idle CPU --------------------------------------------------

    def agents(self, daemon_pid):
        return [p for p in procfs.descendants(daemon_pid)
                if procfs.cmdline(p)[1:2] == ["echo-agent"]]

    def resources(self):
        w = self.world
        npeers = max(self.levels + [self.idle_peers])
        names = [f"p{i:02d}" for i in range(1, npeers + 1)]
        log(f"creating {npeers} echo peers")
        for n in names:
            w.create_echo(n)
        w.start_daemon()
        dpid = w.daemon.pid
        time.sleep(2)
        mem, wakes, live = [], [], 0
        levels = sorted(set(self.levels + [self.idle_peers]))
        for level in levels:
            while live < level:
                wakes.append(w.wake(names[live]))
                live += 1
            time.sleep(3)  # let boots, transcripts and screen work finish
            w.sessions()  # records session pids as ours
            agents = self.agents(dpid)
            if len(agents) != level:
                raise BenchError(f"expected {level} echo agents, found {len(agents)}")
            rss = [procfs.vm_rss_kib(p) for p in agents]
            row = {
                "live": level,
                "daemon_rss": procfs.vm_rss_kib(dpid),
                "daemon_pss": procfs.pss_kib(dpid),
                "daemon_threads": procfs.threads(dpid),
                "agents": len(agents),
                "agents_rss": sum(rss),
                "agents_pss": sum(procfs.pss_kib(p) for p in agents),
                "agent_rss_median": sorted(rss)[len(rss) // 2] if rss else 0,
                "load": loadavg(),
            }
            if level in self.levels:
                mem.append(row)
            log(f"{level} live: daemon VmRSS {row['daemon_rss'] / MIB:.1f} MiB, "
                f"{row['daemon_threads']} threads; agents VmRSS sum "
                f"{row['agents_rss'] / MIB:.1f} MiB")
            if level == self.idle_peers:
                self.results["idle"] = self.idle_cpu(dpid, agents)
        self.results["memory"] = mem
        self.results["wake_s"] = wakes
        w.stop_daemon()

    def idle_cpu(self, dpid, agents):
        log(f"idle CPU: {len(agents)} live idle peers, {self.idle_secs} s window")
        procs = {"daemon": [dpid], "agents": agents}

        def sample():
            return {k: (sum(procfs.cpu_ticks(p) for p in ps), sum(procfs.sched_ns(p) for p in ps),
                        sum(procfs.ctx_switches(p) for p in ps)) for k, ps in procs.items()}

        t0, a = time.monotonic(), sample()
        time.sleep(self.idle_secs)
        t1, b = time.monotonic(), sample()
        dt = t1 - t0
        out = {"window_s": dt, "peers": len(agents), "load": loadavg()}
        for k in procs:
            ticks = b[k][0] - a[k][0]
            out[k] = {
                "cpu_s_ticks": ticks / procfs.CLK_TCK,
                "pct_ticks": 100.0 * ticks / procfs.CLK_TCK / dt,
                "pct_sched": 100.0 * (b[k][1] - a[k][1]) / 1e9 / dt,
                "ctx_per_s": (b[k][2] - a[k][2]) / dt,
            }
        return out

    # ----- phase 2: latency --------------------------------------------------------------

    def latency(self):
        w = self.world
        for n in ("alice", "bob"):
            w.create_echo(n)
        w.start_daemon()
        for n in ("alice", "bob"):
            w.wake(n)
        time.sleep(1)
        bob_pid, alice_pid = w.live_pid("echo-bob"), w.live_pid("echo-alice")
        token = procfs.environ(alice_pid)["IAPEER_TOKEN"]
        r = self.results
        runs, warm = self.runs, self.warmup

        log(f"baseline: `iapeer --version` x{runs}")
        r["version"] = [measure.timed_process([w.bin, "--version"], w.env, w.dir)
                        for _ in range(runs)]

        log(f"control socket: {self.pings} pings on one connection")
        measure.control_pings(w.socket_path, 100)
        self.phase_load["ping"] = loadavg()
        r["ping"] = measure.control_pings(w.socket_path, self.pings)

        # The tmux pane runs bob's exact argv and environment, as another identity and
        # without a daemon token (bodies start with "echo:", so it never replies).
        env = procfs.environ(bob_pid)
        env.update({"PEER_IDENTITY": "echo-tpane", "PEER_PERSONALITY": "tpane"})
        env.pop("IAPEER_TOKEN", None)
        argv = procfs.cmdline(bob_pid)
        argv = [a for a in argv if a != ""]
        cwd = os.path.join(w.dir, "tpane")
        os.makedirs(cwd)
        log("tmux: starting a pane running the same echo agent")
        self.tmux = measure.TmuxPane(w, argv, env, cwd)
        r["capture"] = [self.tmux.timed_capture() for _ in range(runs)]

        def envelope(ts, i):
            body = f"echo: bench tmux {i}"
            return (f'<iap from="alice" runtime="echo" ts="{ts}">Reply via send_to_peer.'
                    f"<msg>{body}</msg></iap>"), f"received {ts} from alice"

        log(f"send vs tmux, interleaved: {warm} warm-up + {runs} runs each")
        cli, keys, paste = [], [], []
        offset = 0
        self.phase_load["send"] = loadavg()
        for i in range(warm + runs):
            if i == warm:
                offset = measure.file_size(w.log_path("delivery"))
            c = measure.cli_send(w, "bob", "echo-alice", f"echo: bench cli {i}")
            k = self.tmux.timed_send_keys(*envelope(f"tk{i}", i))
            p = self.tmux.timed_paste(*envelope(f"tp{i}", i))
            if i >= warm:
                cli.append(c)
                keys.append(k)
                paste.append(p)
            if (i + 1) % 50 == 0:
                log(f"  {i + 1}/{warm + runs}")
        r["cli"], r["tmux_keys"], r["tmux_paste"] = cli, keys, paste
        r["cli_daemon_ms"] = measure.daemon_ms(w.log_path("delivery"), offset, "cli", "bob")
        self.tmux.close()
        self.tmux = None

        log(f"MCP over HTTP keep-alive: ping x{self.pings // 5}, tools/call x{runs}")
        mcp = measure.Mcp(w.port(), "echo-alice", token)
        try:
            mcp.initialize()
            for _ in range(20):
                mcp.timed_ping()
            r["mcp_ping"] = [mcp.timed_ping() for _ in range(max(100, self.pings // 5))]
            self.phase_load["mcp"] = loadavg()
            calls = []
            for i in range(warm + runs):
                if i == warm:
                    offset = measure.file_size(w.log_path("delivery"))
                dt = mcp.timed_send("bob", f"echo: bench mcp {i}")
                if i >= warm:
                    calls.append(dt)
            r["mcp_call"] = calls
            r["mcp_daemon_ms"] = measure.daemon_ms(w.log_path("delivery"), offset, "mcp", "bob")
            r["mcp_connections"] = len(mcp.local_ports)
        finally:
            mcp.close()
        dpid = w.daemon.pid
        r["after"] = {"daemon_rss": procfs.vm_rss_kib(dpid), "daemon_pss": procfs.pss_kib(dpid),
                      "threads": procfs.threads(dpid),
                      "deliveries": 2 * (warm + runs)}
        w.stop_daemon()

    # ----- phase 3: concurrent MCP calls (issue 13 item 3) --------------------------------

    def burst_phase(self):
        if self.burst_calls <= 0:
            return
        w = self.world
        peers = [f"b{i:02d}" for i in range(1, self.burst_peers + 1)]
        for n in ["burster"] + peers:
            w.create_echo(n)
        w.start_daemon()
        for n in ["burster"] + peers:
            w.wake(n)
        time.sleep(1)  # launch helpers end with their launch
        token = procfs.environ(w.live_pid("echo-burster"))["IAPEER_TOKEN"]
        self.phase_load["burst"] = loadavg()
        rounds = []
        for k in range(self.bursts):
            if k:
                time.sleep(1)  # the peers settle between bursts
            rounds.append(burst.run(w, "echo-burster", token, peers, self.burst_calls, log,
                                    tag=f"burst{k}-"))
        self.results["burst"] = b = burst.merge(rounds)
        log(f"burst: {b['delivered']}/{b['calls'] * b['rounds']} delivered, the slowest burst in {b['wall_ns'] / 1e9:.1f} s, "
            f"threads {b['threads_rest']} at rest, at most {b['threads_busiest']}")
        w.stop_daemon()

    # ----- phase 4: real agent CLIs ----------------------------------------------------

    def agent_phase(self):
        if not self.agent_rts:
            return
        # The runtimes' own floor (issue 31 items 2 and 5): the same CLIs in a bare pty, one
        # cycle after each of the daemon's, so both see the same load.
        floors = floor.Interleaved(self.agent_rts, log) if self.floor else None
        self.agent_bench = agentbench.AgentBench(self.binary, self.repo, self.agent_runs,
                                             self.agent_rts, self.world.keep, log,
                                             warmup=self.agent_warmup,
                                             between=floors.cycle if floors else None)
        self.phase_load["agents"] = loadavg()
        try:
            self.results["agents"] = self.agent_bench.run()
        finally:
            if floors:
                self.results["floor"] = floors.result()


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, repo = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    started = datetime.datetime.now()
    up0 = sh("uptime")
    b = Bench(binary, repo)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    mode = "QUICK" if b.quick else "full"
    log(f"{mode} run: {b.runs} runs, {b.pings} pings, peers {b.levels}, idle "
        f"{b.idle_secs} s with {b.idle_peers} peers; temp folder {b.world.dir}")
    burst_only = os.environ.get("BENCH_BURST_ONLY", "") not in ("", "0")
    agents_only = os.environ.get("BENCH_AGENTS_ONLY", "") not in ("", "0")
    log(f"agent phase: {', '.join(b.agent_rts) or 'skipped (BENCH_AGENTS=0)'}"
        + (f", {b.agent_runs} cycles each" if b.agent_rts else ""))
    log(f"burst phase: " + (f"{b.burst_calls} concurrent calls to {b.burst_peers} peers"
                             if b.burst_calls > 0 else "skipped (BENCH_BURST_CALLS=0)"))
    if b.quick:
        log("QUICK mode shrinks: 20 latency runs (not 200), 500 pings, peers 0/10 (no 50), "
            "10 s idle window (not 60), 1+3 agent cycles per runtime (not 1+10); "
            "the 1 000-call burst runs in full")
    log(f"uptime at start: {up0}")
    ok = False
    try:
        if not (burst_only or agents_only):
            b.resources()
            b.latency()
            b.burst_phase()
        if burst_only:
            b.burst_phase()
        if not burst_only:
            b.agent_phase()
        ok = True
    except BenchError as e:
        print(f"bench failed: {e}", file=sys.stderr)
        b.world.keep = True
    except KeyboardInterrupt as e:
        print(f"bench interrupted ({e}); cleaning up", file=sys.stderr)
    finally:
        if b.tmux is not None:
            b.tmux.close()
        try:
            if b.agent_bench is not None:
                b.agent_bench.close()
        finally:
            b.world.close()
    if not ok:
        return 1
    up1 = sh("uptime")
    elapsed = (datetime.datetime.now() - started).total_seconds()
    commit = sh(f"git -C '{repo}' rev-parse --short HEAD") + (
        " (dirty)" if sh(f"git -C '{repo}' status --porcelain -- src Cargo.toml") else "")
    cpu_model = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2")
    version = sh(f"'{binary}' --version")
    header = "\n".join([
        f"iapeer benchmark — {started:%Y-%m-%d %H:%M:%S} — {mode} run, {elapsed:.0f} s",
        f"commit {commit}; {version}; {platform.platform()}; "
        f"{os.cpu_count()} CPUs ({cpu_model})",
        f"runs per latency measure: {b.runs} (+{b.warmup} warm-up); paste settle "
        f"{b.settle} ms, only when the screen shows no sign (src/session/deliver.rs)",
        f"uptime at start: {up0}",
        f"uptime at end:   {up1}",
        "CAVEAT: 2 shared cores; other builds may run concurrently — see the load averages.",
    ])
    if burst_only:
        text = "\n".join([header, ""] + render.burst_lines(b.results["burst"]))
    elif agents_only:
        text = "\n".join([header, ""] + render.agent_lines(b.results) + [
            "", "TARGETS (the agent phase alone, BENCH_AGENTS_ONLY=1)"] + [
                targets.item1_agent(b.results, rt) for rt in b.agent_rts])
    else:
        target_lines = targets.lines(b.results, ready_settles(repo))
        text = (render.render(b.results, b.settle, b.phase_load, header) + "\n\n" +
                render.NOTES.format(settle=b.settle))
        if "agents" in b.results:
            text += agentbench.NOTES + "\n"
        text += ("\nTARGETS (issue 13; verdict on the median unless p99 is named; "
                 + ("QUICK run: few samples, p99 is rough" if b.quick else "full run")
                 + f"; {elapsed:.0f} s in all)\n" + "\n".join(target_lines))
    out_path = os.environ.get("BENCH_OUT") or f"/tmp/iapeer-bench-{started:%Y%m%d-%H%M%S}.txt"
    with open(out_path, "w") as f:
        f.write(text + "\n")
    with open(os.path.splitext(out_path)[0] + ".json", "w") as f:
        json.dump({k: v for k, v in b.results.items()}, f)
    print()
    print(text)
    print(f"\n(table written to {out_path}; raw samples in "
          f"{os.path.splitext(out_path)[0]}.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

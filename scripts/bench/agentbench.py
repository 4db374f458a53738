"""The agent phase of the benchmark: the real Claude Code, Codex, Gemini CLI and OpenCode
(installed by scripts/setup-agents.sh into .cache/agents) in iapeer sessions, their model API
replaced by a loopback stand-in (standin.py) so the model's own time is near zero.

Per runtime, `runs` cycles (after one uncounted warm-up cycle) of:
  1. the peer is ASLEEP (no session): time `iapeer send <p> --from echo-ea` until the CLI
     prints `delivered to <p> (<rt>), woke` (wake + boot dialogs + ready gate + delivery);
  2. wait until the agent's turn is over (the stand-in got the message, the screen is idle);
  3. the peer is LIVE: time another `iapeer send` until `delivered to <p> (<rt>)`
     (paste, Enter on its sign, confirmation from the agent's screen); wait for the turn;
  4. `iapeer stop <p>`, wait until the session and its processes are gone, `iapeer start
     <p>` (clears the stop flag; agents are not started by start), wait for `asleep`.
Each send also yields the daemon's delivery.log `ms=` and, for wakes, the lifecycle.log
`wake` -> `ready` split.
"""

import datetime
import json
import os
import subprocess
import time

import measure
import procfs
from report import summary, table
from standin import StandIn, write_opencode_user_config
from world import BenchError, World

MS = 1e6
SEND_TIMEOUT = 360  # s; above the daemon's default boot deadline
RUNTIMES = ("claude", "codex", "gemini", "opencode")
PEER = {"claude": "cb", "codex": "cx", "gemini": "gm", "opencode": "oc"}
# The stand-in protocol each runtime's CLI speaks (standin.py).
API = {"claude": "anthropic", "codex": "openai", "gemini": "gemini", "opencode": "chat"}
# Runtimes whose "send -> model request" is taken from their turn's request (the one that
# declares tools): OpenCode's session-title request also carries the message, and may come
# first.
TURN_REQUEST = ("gemini", "opencode")
SENDER = "ea"
TOOL = "send_to_peer"


def _ts(value):
    """A log `ts=` (2026-01-02T03:04:05.678Z) as epoch seconds."""
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def _loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def declares_tool(body, tool=""):
    """Whether a model request (JSON text) declares a tool whose name ends with `tool` (any
    tool when `tool` is empty):
    Anthropic's `tools[].name` (`mcp__iapeer__send_to_peer`), the Responses API's
    `tools[].name` (`send_to_peer` in a namespace) or `tools[].function.name`, the Gemini
    API's `tools[].functionDeclarations[].name`. The envelope
    itself mentions send_to_peer, so the body's text alone proves nothing."""
    try:
        tools = json.loads(body).get("tools") or []
    except (ValueError, AttributeError):
        return False
    names = []
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, dict):
            names.append(t.get("name") or (t.get("function") or {}).get("name") or "")
            for group in ("tools", "functionDeclarations"):
                names += [x.get("name", "") for x in t.get(group) or [] if isinstance(x, dict)]
    return any(isinstance(n, str) and n.endswith(tool) for n in names)


class AgentBench:
    """A private world (own HOME, IAPEER_ROOT, daemon, stand-ins) with a peer per runtime
    (claude `cb`, codex `cx`, gemini `gm`, opencode `oc`) and an echo peer `ea` that sends."""

    def __init__(self, binary, repo, runs, runtimes, keep, log, warmup=1, between=None):
        self.binary, self.repo, self.runs, self.runtimes = binary, repo, runs, runtimes
        self.keep, self.log = keep, log
        self.warmup = warmup
        # Called as between(rt, i) after each cycle: the floor's cycle (floor.Interleaved),
        # so both are measured under the same load.
        self.between = between
        self.world = None
        self.standins = {}
        self.versions = {}

    # ----- set-up --------------------------------------------------------------------

    def install(self):
        """Run scripts/setup-agents.sh (reuses .cache/agents); returns {runtime: binary}."""
        self.log("agents: scripts/setup-agents.sh (reuses .cache/agents when present)")
        p = subprocess.run(["bash", os.path.join(self.repo, "scripts/setup-agents.sh")],
                           cwd=self.repo, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True)
        if p.returncode != 0:
            raise BenchError(f"scripts/setup-agents.sh exited {p.returncode}: "
                             f"{(p.stdout + p.stderr)[-800:]}")
        lines = [l for l in p.stdout.splitlines() if l.strip()]
        # The script prints one version line per CLI it installs, each naming its CLI.
        self.versions = {rt: next((l for l in lines if name in l.lower()), "?")
                         for rt, name in (("claude", "claude"), ("codex", "codex"),
                                          ("gemini", "gemini"), ("opencode", "opencode"))}
        bins = os.path.join(self.repo, ".cache/agents/node_modules/.bin")
        return {rt: os.path.join(bins, rt) for rt in RUNTIMES}

    def setup(self):
        bins = self.install()
        w = self.world = World(self.binary, keep=self.keep, prefix="iapeer-bench-agents.")
        w.marks.append(os.path.join(self.repo, ".cache/agents"))
        codex_home = os.path.join(w.home, ".codex")
        w.env.update({"IAPEER_CLAUDE_BIN": bins["claude"], "IAPEER_CODEX_BIN": bins["codex"],
                      "IAPEER_GEMINI_BIN": bins["gemini"],
                      "IAPEER_OPENCODE_BIN": bins["opencode"], "CODEX_HOME": codex_home})
        for rt in self.runtimes:
            self.standins[rt] = StandIn(API[rt])
        # What a user who has run the CLI once has; every dialog is left to the adapter.
        with open(os.path.join(w.home, ".claude.json"), "w") as f:
            f.write('{"hasCompletedOnboarding": true}')
        if "codex" in self.runtimes:
            os.makedirs(codex_home)
            with open(os.path.join(codex_home, "config.toml"), "w") as f:
                f.write('model = "gpt-5.1"\nmodel_provider = "standin"\n\n'
                        '[model_providers.standin]\nname = "Stand-in"\n'
                        f'base_url = "{self.standins["codex"].base_url}"\n'
                        'wire_api = "responses"\nenv_key = "STANDIN_API_KEY"\n')
        if "gemini" in self.runtimes:
            # An API-key login, as Gemini CLI's first run writes it (tests/gemini_e2e.rs).
            os.makedirs(os.path.join(w.home, ".gemini"))
            with open(os.path.join(w.home, ".gemini/settings.json"), "w") as f:
                json.dump({"security": {"auth": {"selectedType": "gemini-api-key"}},
                           "privacy": {"usageStatisticsEnabled": False}}, f)
        if "opencode" in self.runtimes:
            self.opencode_config(self.standins["opencode"].base_url)
        w.create_echo(SENDER)
        for rt in self.runtimes:
            w.run(["create", PEER[rt], "--runtime", rt])
        if "claude" in self.runtimes:
            self.launch_env("claude", f"ANTHROPIC_BASE_URL={self.standins['claude'].url}\n"
                            "ANTHROPIC_API_KEY=sk-ant-standin-key\nIS_SANDBOX=1\n")
        if "codex" in self.runtimes:
            self.launch_env("codex", "STANDIN_API_KEY=sk-standin-key\n")
        if "gemini" in self.runtimes:
            self.launch_env("gemini", "GEMINI_API_KEY=standin-key\n"
                            f"GOOGLE_GEMINI_BASE_URL={self.standins['gemini'].url}\n")
        if "opencode" in self.runtimes:
            self.launch_env("opencode", "STANDIN_API_KEY=sk-standin-key\n"
                            "OPENCODE_DISABLE_MODELS_FETCH=1\n")
        w.start_daemon()

    def opencode_config(self, base_url):
        """The user's OpenCode config naming the stand-in (standin.py)."""
        write_opencode_user_config(self.world.home, base_url)

    def launch_env(self, rt, text):
        d = os.path.join(self.world.root, "peers", PEER[rt], ".iapeer/runtimes", rt)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "launch.env"), "w") as f:
            f.write(text)

    # ----- one send --------------------------------------------------------------------

    def send(self, rt, body, expect):
        """Time one `iapeer send`; returns a sample dict (wall ns, daemon ms, log splits)."""
        w, p = self.world, PEER[rt]
        dlog, llog = w.log_path("delivery"), w.log_path("lifecycle")
        d_off, l_off = measure.file_size(dlog), measure.file_size(llog)
        argv = [w.bin, "send", p, "--from", f"echo-{SENDER}", "--message", body]
        t0 = time.perf_counter_ns()
        t0_wall = time.time()
        try:
            out = subprocess.run(argv, env=w.env, cwd=w.dir, stdin=subprocess.DEVNULL,
                                 capture_output=True, text=True, timeout=SEND_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise BenchError(f"`iapeer send {p}` did not return within {SEND_TIMEOUT} s")
        wall = time.perf_counter_ns() - t0
        t0_mono = time.monotonic() - wall / 1e9
        answer = out.stdout.strip()
        # Gemini CLI queues a message that comes while it is still starting: a wake may be
        # answered so (and delivered once the CLI is up).
        queued = f"queued for {p} ({rt}) — runtime"
        if out.returncode != 0 or (answer != expect and not (expect.endswith(", woke")
                                                            and answer == queued)):
            raise BenchError(f"`iapeer send {p}` exited {out.returncode}: expected {expect!r},"
                             f" got {out.stdout.strip()!r} {out.stderr.strip()!r}")
        lines = [f for f in measure.events_since(dlog, d_off, "delivery")
                 if f.get("to") == p and f.get("ok") == "true"]
        if len(lines) != 1:
            raise BenchError(f"expected one delivery.log line to {p}, found {lines}")
        d = lines[0]
        sample = {"wall_ns": wall, "daemon_ms": float(d["ms"]), "woke": d.get("woke"),
                  "t0_mono": t0_mono, "delivered_wall": _ts(d["ts"]),
                  "queued": answer == queued}
        ident = f"{rt}-{p}"
        life = [f for f in measure.events_since(llog, l_off) if f.get("identity") == ident]
        wake = next((f for f in life if f.get("ev") == "wake"), None)
        ready = next((f for f in life if f.get("ev") == "ready"), None)
        if wake and ready:
            sample["boot_ms"] = 1000 * (_ts(ready["ts"]) - _ts(wake["ts"]))
            sample["ready_to_delivered_ms"] = 1000 * (_ts(d["ts"]) - _ts(ready["ts"]))
            # The `ready` line says how long the ready screen had been up and since when the
            # agent's MCP client had listed the tools (issue 13 item 2).
            if "screen_ms" in ready:
                sample["screen_to_delivered_ms"] = (sample["ready_to_delivered_ms"]
                                                    + float(ready["screen_ms"]))
            if "mcp_ms" in ready:
                sample["mcp_before_ready_ms"] = float(ready["mcp_ms"])
            sample["send_to_wake_ms"] = 1000 * (_ts(wake["ts"]) - t0_wall)
            sample["mode"] = wake.get("mode")
        return sample

    def wait_turn(self, rt, tag, sample):
        """Wait until the stand-in saw the message and the agent's screen is idle again."""
        found = self.standins[rt].wait_request(tag, 120)
        if found is None:
            raise BenchError(f"the {rt} stand-in never got a model request with {tag!r}")
        at, _ = found
        sample["model_request_ms"] = 1000 * (at - sample["t0_mono"])
        # delivery.log `ts=` against the moment the model request left (wall clocks; the
        # log's ts has ms resolution): how long after the runtime had it "delivered" is
        # recorded (issue 31 item 2).
        sample["model_to_delivered_ms"] = 1000 * (
            sample["delivered_wall"] - (at + time.time() - time.monotonic()))
        # A wake that delivers before the agent's MCP client has the tools is fast and
        # useless: the model could not answer through send_to_peer (issue 13 item 2). The
        # turn's request is the first with the message that declares tools: Claude Code
        # sends a small tool-less side request with the message just before it, and the
        # turn's own may come after "delivered" (waited for here, not read at once).
        turn = self.standins[rt].wait_request(tag, 30, accept=declares_tool)
        sample["has_tool"] = turn is not None and declares_tool(turn[1], TOOL)
        if rt in TURN_REQUEST and turn is not None:
            sample["model_request_ms"] = 1000 * (turn[0] - sample["t0_mono"])
        ident = f"{rt}-{PEER[rt]}"
        deadline, quiet = time.monotonic() + 120, 0
        while time.monotonic() < deadline:
            s = self.world.sessions().get(ident)
            if s is None:
                raise BenchError(f"{ident} ended during its turn")
            quiet = quiet + 1 if s["status"] == "live" and not s["busy"] else 0
            if quiet >= 3:
                return
            time.sleep(0.1)
        raise BenchError(f"{ident} stayed busy for 120 s after {tag!r}")

    def put_to_sleep(self, rt):
        """stop + start: the session ends and the peer is asleep (not stopped)."""
        w, p = self.world, PEER[rt]
        ident = f"{rt}-{p}"
        s = w.sessions().get(ident)
        procs = ([s["pid"]] + procfs.descendants(s["pid"])) if s else []
        for pid in procs:
            w.own(pid, f"{ident} session process")
        w.run(["stop", p, rt])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ident not in w.sessions() and not any(procfs.alive(x) for x in procs):
                break
            time.sleep(0.05)
        else:
            raise BenchError(f"{ident} did not end within 60 s of `iapeer stop`")
        w.run(["start", p, rt])
        status = w.status_of(p, rt)
        if status != "asleep":
            raise BenchError(f"{ident} is {status!r} after stop + start, not asleep")

    # ----- the series ------------------------------------------------------------------

    def series(self, rt):
        p = PEER[rt]
        woke_expect, live_expect = f"delivered to {p} ({rt}), woke", f"delivered to {p} ({rt})"
        if self.world.status_of(p, rt) != "asleep":
            raise BenchError(f"{rt}-{p} is not asleep at the start")
        out = {"asleep": [], "live": [], "cold": None}
        total = self.warmup + self.runs
        for i in range(total):
            tag = f"#{rt}-w{i:02d}#"
            s = self.send(rt, f"echo: bench wake {tag}", woke_expect)
            if s["woke"] != "true":
                raise BenchError(f"delivery.log says woke={s['woke']} for an asleep peer")
            self.wait_turn(rt, tag, s)
            tag = f"#{rt}-l{i:02d}#"
            live = self.send(rt, f"echo: bench live {tag}", live_expect)
            self.wait_turn(rt, tag, live)
            if i < self.warmup:
                out["cold"] = s
            else:
                out["asleep"].append(s)
                out["live"].append(live)
            self.log(f"  {rt} {i + 1}/{total}: asleep->woke {s['wall_ns'] / MS:.0f} ms "
                     f"(boot {s.get('boot_ms', float('nan')):.0f}), live "
                     f"{live['wall_ns'] / MS:.0f} ms")
            self.put_to_sleep(rt)
            if self.between is not None:
                self.between(rt, i)
        return out

    def run(self):
        """Every runtime's series; returns the results dict (errors are recorded, not lost)."""
        results = {"runs": self.runs, "warmup": self.warmup, "versions": self.versions}
        try:
            self.setup()
            results["versions"] = self.versions
            for rt in self.runtimes:
                self.log(f"agents: {rt}, {self.warmup} warm-up + {self.runs} cycles "
                         f"(asleep->woke send, live send, stop+start)")
                try:
                    start = _loadavg()
                    results[rt] = self.series(rt)
                    results[rt]["load"] = [start, _loadavg()]
                except BenchError as e:
                    results[rt] = {"error": str(e)}
                    self.keep = self.world.keep = True
                    self.log(f"agents: {rt} failed: {e}")
        except BenchError as e:
            results["error"] = str(e)
            self.log(f"agents: failed: {e}")
            if self.world:
                self.world.keep = True
        return results

    def close(self):
        try:
            if self.world:
                self.world.close()
        finally:
            for s in self.standins.values():
                s.close()
            self.standins = {}


# ----- report ------------------------------------------------------------------------------

def _row(name, xs, note="", floor=None, load=""):
    """A row of the AGENTS table; `floor` is the runtime's own median for the same span
    (floor.py), printed with the ratio to it (issue 31 item 5)."""
    s = summary(xs)
    # A ratio of spans only: a signed difference (model request -> log) gets none.
    ratio = f"{s['median'] / floor:.2f}x" if floor and floor > 0 and s["median"] > 0 else ""
    return [name, s["n"], f"{s['median']:.0f}", f"{s['p10']:.0f}", f"{s['p90']:.0f}",
            f"{s['min']:.0f}", f"{s['max']:.0f}", "" if floor is None else f"{floor:.0f}",
            ratio, load, note]


def _floor(floor_res, rt, key):
    """The floor's median of `key` for `rt`, or None."""
    x = (floor_res or {}).get(rt) or {}
    xs = [s[key] for s in x.get("samples", []) if key in s]
    return summary(xs)["median"] if xs else None


def _load(r):
    """`a..b`: the 1-minute load average at the start and end of a series."""
    lo = r.get("load")
    return f"{lo[0].split()[0]}..{lo[1].split()[0]}" if lo else ""


def tool_lines(res):
    """One line per runtime: wakes whose first model request had no `send_to_peer`, and the
    wake latency (send to an asleep peer until `…, woke`) median and p90 (issue 31 item 1)."""
    out = []
    for rt in RUNTIMES:
        r = res.get(rt)
        if r is None:
            continue
        if "error" in r:
            out.append(f"  {rt}: FAILED: {r['error'][:200]}")
            continue
        a = r["asleep"]
        without = sum(1 for x in a if not x.get("has_tool"))
        s = summary([x["wall_ns"] / MS for x in a])
        queued = sum(1 for x in a if x.get("queued"))
        out.append(f"  {rt}: {without} of {len(a)} wakes' first model requests WITHOUT "
                   f"{TOOL}; wake (send -> 'woke') median {s['median']:.0f} ms, "
                   f"p90 {s['p90']:.0f} ms" + (f"; {queued} answered 'queued … runtime'"
                                               if queued else ""))
    return out


def render(res, floor_res=None):
    """The AGENTS section of the report (list of lines): each span beside the runtime's own
    floor for it, when measured (floor.py), and the load average of its series."""
    v = res.get("versions", {})
    shown = ", ".join(v.get(rt, "?") for rt in RUNTIMES if rt in res)
    out = [f"AGENTS (ms; real CLIs — {shown} — with a "
           f"loopback stand-in model API; {res['runs']} cycles per runtime after "
           f"{res.get('warmup', 1)} warm-up; floor = the same span with the CLI in a bare pty "
           f"and no iapeer, ratio = median / floor, load = 1-min load average during the series)"]
    if "error" in res:
        return out + [f"  not measured: {res['error']}"]
    rows = []
    for rt in RUNTIMES:
        r = res.get(rt)
        if r is None:
            continue
        if "error" in r:
            rows.append([f"{rt}: FAILED", "", "", "", "", "", "", "", "", "", r["error"][:100]])
            continue
        a, live, ld = r["asleep"], r["live"], _load(r)

        def fl(key):
            return _floor(floor_res, rt, key)
        rows.append(_row(f"{rt}: send -> ASLEEP peer, CLI until 'woke'",
                         [x["wall_ns"] / MS for x in a], "wake+dialogs+ready gate+delivery",
                         fl("start_to_delivered"), ld))
        rows.append(_row("  daemon delivery.log ms=", [x["daemon_ms"] for x in a], load=ld))
        boots = [x for x in a if "boot_ms" in x]
        if boots:
            rows.append(_row("  lifecycle wake -> ready (boot)",
                             [x["boot_ms"] for x in boots], "log ts, ms resolution",
                             fl("start_to_ready"), ld))
            rows.append(_row("  ready -> delivery confirmed",
                             [x["ready_to_delivered_ms"] for x in boots],
                             "paste, MCP settle, Enter, confirm", load=ld))
        exact = [x["screen_to_delivered_ms"] for x in a if "screen_to_delivered_ms" in x]
        if exact:
            rows.append(_row("  ready screen -> delivered (target)", exact,
                             "the floor: listing, paste drawn, Enter -> delivered",
                             fl("ready_to_delivered"), ld))
        rows.append(_row("  send -> first model request", [x["model_request_ms"] for x in a],
                         "stand-in saw the message", fl("start_to_model"), ld))
        rows.append(_row("  first model request -> delivery.log ts",
                         [x["model_to_delivered_ms"] for x in a if "model_to_delivered_ms" in x],
                         "wall clocks, ms ts", fl("model_to_delivered"), ld))
        rows.append(_row(f"{rt}: send -> LIVE peer, CLI until 'delivered'",
                         [x["wall_ns"] / MS for x in live], "paste, Enter on its sign, confirm",
                         fl("live_paste_to_record"), ld))
        rows.append(_row("  daemon delivery.log ms=", [x["daemon_ms"] for x in live], load=ld))
        rows.append(_row("  send -> model request", [x["model_request_ms"] for x in live],
                         "floor: bare pty paste -> model request", fl("live_paste_to_model"),
                         ld))
        rows.append(_row("  model request -> delivery.log ts",
                         [x["model_to_delivered_ms"] for x in live
                          if "model_to_delivered_ms" in x], "wall clocks, ms ts",
                         fl("live_model_to_record"), ld))
        c = r.get("cold")
        if c:
            rows.append([f"  {rt} first wake of the run (warm-up, not counted)", 1,
                         f"{c['wall_ns'] / MS:.0f}", "", "", "", "", "", "", "",
                         f"daemon ms={c['daemon_ms']:.0f}"])
    out.append(table(["measure", "n", "median", "p10", "p90", "min", "max", "floor", "ratio",
                      "load", "note"], rows, "lrrrrrrrrrl"))
    return out + tool_lines(res)


NOTES = """\
- AGENTS: one daemon with a claude, a codex, a gemini and an opencode peer (those of
  BENCH_AGENTS) whose model API is a Python stand-in on 127.0.0.1 (answers every model request with the text "ok", at once unless
  BENCH_MODEL_DELAY_MS says otherwise), and an echo peer `ea` as the sender (`--from
  echo-ea`). Each cycle: the peer is asleep (no session); `iapeer send` (body `echo: …`) is
  timed until the CLI prints `…, woke` (spawn, boot, start-up dialogs answered by the
  adapter, the wait for the agent's MCP client, then paste + Enter on the composer's sign +
  confirmation: the transcript, or for Claude's first message its turn on screen; the ready
  gate runs after the answer, its outcome in lifecycle.log `ready-gate`); then the turn
  is let finish and a second send to the now LIVE peer is timed until `delivered to …`;
  then `iapeer stop` + `iapeer start` put it back to sleep (wake mode stays `fresh`).
  wake -> ready and ready -> delivery come from lifecycle.log/delivery.log timestamps;
  'first model request' is when the stand-in received the request carrying the message."""


def to_json(res):
    """The results with only JSON-friendly values."""
    return json.loads(json.dumps(res, default=str))

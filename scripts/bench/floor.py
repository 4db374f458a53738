"""The runtimes' own floor (issue 31 items 2 and 5): the real Claude Code and Codex CLIs
(Gemini CLI and OpenCode below) started directly in a pty by this process, with no
coordinator (no iapeer daemon), against the bench's stand-in model API (standin.py) and a
loopback MCP server in the shape iapeer configures (`iapeer` over streamable HTTP, one tool
`send_to_peer`), driven step by step the way the daemon drives a wake and a live delivery,
each step timed from the moment its input was written (or the previous sign came) to the pty
read that brought the sign:

  wake:  start -> ready screen; ready -> tool listing answered (0 when it came first);
         paste -> paste drawn; Enter -> first model request; Enter -> delivered (what the
         daemon takes as the message received: Claude Code's turn on screen, Codex's
         rollout record holding the message); and their sum from the ready screen, the
         wake's floor (`ready -> delivered`).
  live:  (the turn over) paste -> paste drawn; Enter -> model request; paste -> model
         request (the floor of a live `send` -> model request); Enter -> transcript/rollout
         record (what confirms a live delivery).

The signs are the daemon's, ported from the Rust adapters (src/runtime/claude.rs,
claude_screen/, codex.rs, term/paste_view.rs) onto a pyte screen of the daemon's pty size
(220 x 50); the terminal queries are answered as src/term/responder.rs answers them. What
the daemon adds on top of this floor is iapeer's part: its ready settle, the wait for the
listing, MCP_SETTLE, the channel hops and the log line. The floor answers no boot dialog:
the folder trust, the API key and the bypass mode are accepted in the CLIs' own files, and
Claude Code runs without `--add-dir /` (its dialog is iapeer's choice).

Gemini CLI and OpenCode (`BENCH_AGENTS=gemini,opencode`; issue 27 item 5) are floored warm:
one CLI started once (its dialogs answered, its tools listed, a first message sent and
answered, uncounted), then one live delivery per cycle, the figure their live target is
judged against. Their signs are runtime::gemini's and runtime::opencode's; the model request
is the turn's own (the one declaring tools, as agentbench.TURN_REQUEST); delivery is read
from Gemini CLI's session file and from OpenCode's records over the server of `--port`, as
the daemon reads them. Gemini CLI takes an Enter too soon after a paste for a line break:
its floor presses Enter again every 25 ms until the composer lets the text go (the earliest
Enter it submits on), and says how many went.

Usage: python3 floor.py [runs]   (BENCH_AGENTS=claude,codex,gemini,opencode; BENCH_FLOOR_RUNS,
default 20)
Needs pyte (bench.sh puts it in <target>/bench-py with pip when missing).
"""

import collections
import fcntl
import glob
import http.server
import json
import os
import pty
import re
import shutil
import signal
import struct
import sys
import tempfile
import termios
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import pyte  # noqa: E402
except ImportError:  # bench.sh installs it; without it the floor says so and the rest runs
    pyte = None

from report import summary, table, write_out  # noqa: E402
from agentbench import TURN_REQUEST, declares_tool  # noqa: E402
from standin import StandIn, write_opencode_user_config  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
BINS = os.path.join(REPO, ".cache/agents/node_modules/.bin")
COLS, ROWS = 220, 50  # src/session/frame.rs: the daemon's pty
STEP_TIMEOUT = 60  # s per sign
READ_GAP_DAEMON = 0.15  # s: opencode_records::READ_GAP (Floor.live_read)
ENTER_RETRY_FLOOR = 0.025  # s: Gemini CLI's floor presses Enter again this often (Floor.enter)
PASTE_TIMEOUT = 5  # s: a paste not drawn by then is a failed cycle (the daemon would Enter
#                     blind after 1.5 s, session::deliver::PASTE_SIGNAL_WAIT)
TOKEN = "tok-floor-0123456789"

# src/term/responder.rs: the daemon's answers to the terminal queries it recognises.
ANSWERS = [
    (b"\x1b[c", b"\x1b[?62;22c"), (b"\x1b[0c", b"\x1b[?62;22c"),
    (b"\x1b[>c", b"\x1b[>0;276;0c"), (b"\x1b[>0c", b"\x1b[>0;276;0c"),
    (b"\x1b[>q", b"\x1bP>|iapeer(floor)\x1b\\"), (b"\x1b[>0q", b"\x1bP>|iapeer(floor)\x1b\\"),
    (b"\x1b[?u", b"\x1b[?0u"),
    (b"\x1b]10;?\x07", b"\x1b]10;rgb:d8d8/d8d8/d8d8\x07"),
    (b"\x1b]10;?\x1b\\", b"\x1b]10;rgb:d8d8/d8d8/d8d8\x1b\\"),
    (b"\x1b]11;?\x07", b"\x1b]11;rgb:1c1c/1c1c/1c1c\x07"),
    (b"\x1b]11;?\x1b\\", b"\x1b]11;rgb:1c1c/1c1c/1c1c\x1b\\"),
]
CPR = b"\x1b[6n"


class FloorError(Exception):
    pass


# ----- the daemon's signs (ported; see the Rust named beside each) ---------------------------

def squeeze(s):
    return " ".join(s.split())


class PasteView:
    """term::paste_view::PasteView for a paste shown as pasted (no tabs or controls)."""

    def __init__(self, text):
        self.head = text
        self.breaks = text.replace("\r\n", "\n").replace("\r", "\n").count("\n")

    def shown_in(self, row):
        row = row.strip()
        if not row:
            return False
        if row.startswith("[") and row.endswith("]") and row[1:].startswith("Pasted ") \
                and "[" not in row[1:-1] and "]" not in row[1:-1]:
            inner = row[1:-1]
            if inner.startswith("Pasted text #"):
                m = re.search(r" \+(\d+) lines$", inner)
                return m is None or int(m.group(1)) == self.breaks
            return inner.startswith("Pasted Content ")
        return squeeze(self.head).startswith(squeeze(row))

    def echoed_in(self, row):
        first = squeeze(re.split(r"[\r\n]", self.head)[0])
        return bool(first) and squeeze(row) == first


def composer_text(rows, glyph):
    """Screen::composer_text: what follows the glyph on the last row starting with it."""
    for r in reversed(rows):
        s = r.lstrip()
        if s.startswith(glyph):
            return s[len(glyph):]
    return None


def framed_composer(rows, glyph, closed):
    """runtime::claude::framed_composer."""
    at = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].lstrip().startswith(glyph)),
              None)
    if at is None:
        return None

    def rule(i):
        return 0 <= i < len(rows) and rows[i].lstrip().startswith("─")
    return at if at > 0 and rule(at - 1) and (not closed or rule(at + 1)) else None


class Claude:
    name, glyph = "claude", "❯"
    READY = ("bypass permissions on", "manual mode on")  # claude_screen::READY

    def ready(self, rows):
        """claude_screen::classify == Ready (no dialog is ever up on the floor)."""
        text = "\n".join(rows)
        return (any(r.lstrip().startswith(self.glyph) for r in rows)
                and any(x in text for x in self.READY))

    def paste_shown(self, rows, paste):
        """Claude::paste_shown."""
        row = composer_text(rows, self.glyph)
        return (framed_composer(rows, self.glyph, False) is not None and row is not None
                and paste.shown_in(row))

    def turn_shown(self, rows, paste):
        """Claude::turn_started, a wake's first message's confirmation. The draft check is
        the composer no longer showing the paste (nobody types on the floor)."""
        composer = framed_composer(rows, self.glyph, True)
        if composer is None or self.paste_shown(rows, paste):
            return False
        newest = None
        for i in range(composer - 1, -1, -1):
            s = rows[i].lstrip()
            if s.startswith(self.glyph):
                newest = (i, s[len(self.glyph):])
                break
        since = newest[0] if newest else 0
        if any("Queued ·" in r for r in rows[since:composer]):
            return False
        return (any("esc to interrupt" in r for r in rows[composer + 1:])
                or (newest is not None and paste.echoed_in(newest[1])))

    def busy(self, rows):
        return any("esc to interrupt" in r for r in rows)


class Codex:
    name, glyph = "codex", "›"

    def ready(self, rows):
        """codex::boot_step_for == Ready."""
        text = "\n".join(rows)
        composer = any(r.startswith("› ") for r in rows)
        numbered = any(re.match(r"› \d+\. ", r) for r in rows)
        loading = any(r.strip() == "loading" for r in rows)
        return composer and not numbered and not loading and "Press enter to continue" not in text

    def paste_shown(self, rows, paste):
        """adapter::composer_shows (Codex's paste_shown)."""
        row = composer_text(rows, self.glyph)
        return row is not None and paste.shown_in(row)

    turn_shown = None  # Codex: no turn sign; the rollout confirms (codex::SessionFileConfirm)

    def busy(self, rows):
        return any("esc to interrupt" in r.lower() for r in rows)


class OpenCode:
    """runtime::opencode's signs (recorded for 1.18.33): the composer box `┃ … ╹▀▀`, the
    status row under it."""
    name = "opencode"
    BUSY = ("esc interrupt", "esc again to interrupt")  # opencode::BUSY_SIGNS

    @staticmethod
    def box(rows):
        """opencode::composer_box: (its text rows' insides, the foot row's index) or None."""
        foot = next((i for i in range(len(rows) - 1, -1, -1)
                     if rows[i].lstrip().startswith("╹▀")), None)
        if foot is None:
            return None
        col = rows[foot].find("╹")
        width = len(rows[foot][col + 1:]) - len(rows[foot][col + 1:].lstrip("▀"))

        def bar(r):
            return len(r) > col and r[col] == "┃"
        agent = foot - 1
        if agent < 0 or not bar(rows[agent]):
            return None
        top = agent
        while top > 0 and bar(rows[top - 1]):
            top -= 1
        return [r[col + 1:col + 1 + width].strip() for r in rows[top:agent]], foot

    def busy(self, rows):
        b = self.box(rows)
        return b is not None and any(x in "\n".join(rows[b[1] + 1:]) for x in self.BUSY)

    def ready(self, rows):
        b = self.box(rows)
        return (b is not None and "ctrl+p commands" in "\n".join(rows[b[1] + 1:])
                and not self.busy(rows))

    def paste_shown(self, rows, paste):
        """opencode::paste_shown_in: `[Pasted ~<lines> lines]` for 3 lines or more."""
        b = self.box(rows)
        if b is None:
            return False
        texts = [t for t in b[0] if t]
        first = texts[0] if texts else ""
        m = re.fullmatch(r"\[Pasted ~(\d+) lines\]", first)
        if m:
            return int(m.group(1)) == paste.breaks + 1
        return not first.startswith("Ask anything") and paste.shown_in(first)

    turn_shown = None  # confirmed from its records (opencode_records::RecordsConfirm)


class Gemini:
    """runtime::gemini's signs (recorded for Gemini CLI 0.61.0): the composer between the
    half-block rules `▄▄▄…` and `▀▀▀…`, its first row starting with `>` (or `*` in `yolo`)."""
    name = "gemini"
    GLYPHS = (">", "*")
    PLACEHOLDER = "Type your message or @path/to/file"
    BUSY = "esc to cancel"  # gemini::BUSY

    def composer(self, rows):
        """gemini::composer_rows: the composer's rows, the glyph cut off, or None."""
        top = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].startswith("▄")), None)
        if top is None or top + 1 >= len(rows):
            return None
        top += 1
        end = next((i for i in range(top, len(rows)) if rows[i].startswith("▀")), len(rows))
        first = rows[top].lstrip()
        glyph = next((g for g in self.GLYPHS if first.startswith(g)), None)
        if glyph is None:
            return None
        return [first[len(glyph):].strip()] + [r.strip() for r in rows[top + 1:end]]

    def text(self, rows):
        """gemini::composer_text: what the composer holds, None when empty or absent."""
        c = self.composer(rows)
        if c is None or c == [self.PLACEHOLDER]:
            return None
        return "\n".join(c).strip() or None

    def boot_keys(self, rows):
        """gemini::boot_step_for's Enter for the auth choice (the key detected) and the key
        entry (prefilled), else None: the floor answers them as the adapter does."""
        text = "\n".join(rows)
        if "How would you like to authenticate" in text and "Existing API key detected" in text:
            return b"\r"
        if "Enter Gemini API Key" in text and "(Press Enter to submit" in text:
            return b"\r"
        return None

    def ready(self, rows):
        """gemini::boot_step_for == Ready (no dialog on the floor): the empty composer."""
        return self.composer(rows) == [self.PLACEHOLDER] and not self.busy(rows)

    def paste_shown(self, rows, paste):
        """gemini::shows_paste on the composer's text."""
        shown = self.text(rows)
        if shown is None:
            return False
        m = re.fullmatch(r"\[Pasted Text: (\d+) (lines|chars)\]", shown.strip())
        if m:
            return m.group(2) == "chars" or int(m.group(1)) == paste.breaks + 1
        solid = "".join(shown.split())
        return bool(solid) and solid.startswith("".join(paste.head.split()))

    def busy(self, rows):
        return any(self.BUSY in r for r in rows)

    turn_shown = None  # confirmed from its session file (gemini::SESSION_RULES)


# ----- the MCP server iapeer's configuration points at ---------------------------------------

class McpStandIn:
    """Streamable-HTTP MCP with JSON answers, in the daemon's shape: one tool
    `send_to_peer` (alwaysLoad, as the daemon lists it). Records when each tools/list answer
    was written (the daemon's "tools listed" moment)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.listed = []  # monotonic s of every tools/list answer written
        me = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_a):
                pass

            def _empty(self, code):
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                self._empty(405)

            def do_DELETE(self):
                self._empty(200)

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    msg = json.loads(raw)
                except ValueError:
                    return self._empty(400)
                if not isinstance(msg, dict) or "id" not in msg:
                    return self._empty(202)
                m = msg.get("method")
                if m == "initialize":
                    res = {"protocolVersion": (msg.get("params") or {}).get(
                        "protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                        "serverInfo": {"name": "iapeer", "version": "floor"}}
                elif m == "tools/list":
                    res = {"tools": [{"name": "send_to_peer",
                                      "description": "Send a message to a peer.",
                                      "inputSchema": {"type": "object", "properties": {
                                          "personality": {"type": "string"},
                                          "message": {"type": "string"}},
                                          "required": ["personality", "message"]},
                                      "_meta": {"anthropic/alwaysLoad": True}}]}
                else:
                    res = {}
                body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": res}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Mcp-Session-Id", "floor")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                if m == "tools/list":
                    with me.cond:
                        me.listed.append(time.monotonic())
                        me.cond.notify_all()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def listed_after(self, t0):
        with self.cond:
            return next((t for t in self.listed if t >= t0), None)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ----- one CLI in a pty ----------------------------------------------------------------------

def new_queries(seen, carried, query):
    """How many times `query` ends in `seen` after its first `carried` bytes (the tail of
    the read before, kept for a query split across reads): one already answered with the
    read before is not answered again (a second answer reaches the CLI as typed keys: Gemini
    CLI showed `62;22c` in its composer)."""
    n, at = 0, seen.find(query)
    while at >= 0:
        if at + len(query) > carried:
            n += 1
        at = seen.find(query, at + 1)
    return n


def floor_screen():
    """pyte's Screen, taking the private form of SGR (`CSI > 4 ; 2 m`, xterm's
    modifyOtherKeys, which Gemini CLI sends) as the daemon's screen does: no change."""
    class FloorScreen(pyte.Screen):
        def select_graphic_rendition(self, *attrs, private=False):
            if not private:
                super().select_graphic_rendition(*attrs)
    return FloorScreen


class Pty:
    """A child in a pty of the daemon's size, its output fed to a pyte screen. A reader
    thread stamps every read as it comes, so the time a sign is seen by is the read that
    brought it, not the moment this driver's slower screen got to it."""

    def __init__(self, argv, env, cwd):
        self.screen = floor_screen()(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.carry = b""
        self.held = b""  # an APC string not ended yet
        self.raw = []  # every read, for a failed cycle's record (BENCH_KEEP=1)
        self.chunks = collections.deque()  # (monotonic s, bytes); b"" at the end
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self.read_all, daemon=True)
        self.reader.start()

    def read_all(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            with self.cond:
                self.chunks.append((time.monotonic(), data))
                self.cond.notify()
            if not data:
                return

    def rows(self):
        return [r.rstrip() for r in self.screen.display]

    def write(self, data):
        t = time.monotonic()
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        return t

    def pump(self, timeout):
        """Feed the screen the next read (waiting at most `timeout` s for one) and answer
        its queries. Returns the monotonic time of that read, or None."""
        with self.cond:
            if not self.chunks:
                self.cond.wait(timeout)
            if not self.chunks:
                return None
            at, data = self.chunks.popleft()
        self.raw.append(data)
        if not data:
            self.chunks.appendleft((at, data))
            raise FloorError("the CLI exited:\n" + "\n".join(self.rows()))
        seen = self.carry + data
        for query, answer in ANSWERS:
            for _ in range(new_queries(seen, len(self.carry), query)):
                os.write(self.fd, answer)
        for _ in range(new_queries(seen, len(self.carry), CPR)):
            y, x = self.screen.cursor.y, self.screen.cursor.x
            os.write(self.fd, f"\x1b[{y + 1};{x + 1}R".encode())
        self.carry = seen[-16:]
        self.stream.feed(self.without_apc(data))
        return at

    def without_apc(self, data):
        """`data` without APC strings (`ESC _ … ESC \\`, Claude Code's kitty graphics
        query), which pyte does not know and would print; one split across reads is held
        until its end comes."""
        data = self.held + data
        self.held = b""
        out = b""
        while True:
            start = data.find(b"\x1b_")
            if start < 0:
                return out + data
            end = data.find(b"\x1b\\", start + 2)
            if end < 0:
                self.held = data[start:]
                return out + data[:start]
            out += data[:start]
            data = data[end + 2:]

    def until(self, sign, what, timeout=STEP_TIMEOUT, other=None):
        """Pump until `sign(rows)` holds; the time of the read that made it so. `other()`
        (a time or None) is checked between reads and ends the wait too."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if other is not None:
                t = other()
                if t is not None:
                    return t
            at = self.pump(0.005 if other else 0.05)
            if at is not None and sign(self.rows()):
                return at
        raise FloorError(f"no sign of {what} within {timeout} s; the screen:\n"
                         + "\n".join(r for r in self.rows() if r))

    def close(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.reader.join(5)  # its read fails once the child is gone
        os.close(self.fd)


# ----- the records that confirm a delivery ---------------------------------------------------

def is_user_record(r):
    """Claude Code: a `user` record (claude::acceptance_from_records); Codex:
    codex::is_user_record."""
    p = r.get("payload") if isinstance(r.get("payload"), dict) else {}
    return (r.get("type") == "user"
            or (r.get("type") == "response_item" and p.get("type") == "message"
                and p.get("role") == "user")
            or (r.get("type") == "event_msg" and p.get("type") == "user_message"))


def record_with(pattern, tag):
    """The wall-clock time (the file's mtime, s) of the JSONL file matching `pattern` that
    holds a user record with `tag`, or None."""
    for path in glob.glob(pattern, recursive=True):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                mtime = os.fstat(f.fileno()).st_mtime
                for line in f:
                    if tag not in line:
                        continue
                    try:
                        r = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(r, dict) and is_user_record(r):
                        return mtime
        except OSError:
            pass
    return None


# ----- the driver ----------------------------------------------------------------------------

def envelope(tag):
    """A message in the daemon's envelope shape (4 lines, as a wake pastes it)."""
    ts = time.strftime("%H:%M:%S")
    return (f'<iap from="ea" runtime="echo" intelligence="artificial" ts="{ts}">\n'
            f"Reply via send_to_peer.\n<msg>echo: floor {tag}</msg>\n</iap>")


def bracketed(text):
    return b"\x1b[200~" + text.encode() + b"\x1b[201~"


KINDS = {"claude": (Claude, "anthropic"), "codex": (Codex, "openai"),
         "gemini": (Gemini, "gemini"), "opencode": (OpenCode, "chat")}
# Runtimes whose floor is a warm CLI: started once, then one live delivery per cycle (their
# live latency is the target; a fresh start per cycle measured a first message, seconds).
WARM = ("gemini", "opencode")


class Floor:
    def __init__(self, rt, log):
        self.rt, self.log = rt, log
        kind, api = KINDS[rt]
        self.kind = kind()
        self.standin = StandIn(api)
        self.mcp = McpStandIn()
        self.dir = tempfile.mkdtemp(prefix=f"iapeer-floor-{rt}.")
        self.home = os.path.join(self.dir, "home")
        self.cwd = os.path.join(self.dir, "peer")
        os.makedirs(self.home)
        os.makedirs(self.cwd)
        self.env = {"HOME": self.home, "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "TERM": "xterm-256color", "COLORTERM": "truecolor", "LANG": "C.UTF-8",
                    "IAPEER_TOKEN": TOKEN, "PEER_IDENTITY": f"{rt}-floor",
                    "IAPEER_PORT": str(self.mcp.port)}
        getattr(self, f"setup_{rt}")()
        self.warm = None  # the CLI of a WARM runtime, started at its first cycle

    def setup_claude(self):
        key = "sk-ant-standin-key-0123456789abcdefghij"
        with open(os.path.join(self.home, ".claude.json"), "w") as f:
            json.dump({"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True,
                       "customApiKeyResponses": {"approved": [key[-20:]]},
                       "projects": {self.cwd: {"hasTrustDialogAccepted": True}}}, f)
        # runtime::claude_setup: the project entry and the setting that loads it.
        entry = {"type": "http", "url": "http://127.0.0.1:${IAPEER_PORT:-8765}/mcp",
                 "headers": {"X-IAPeer-Identity": "${PEER_IDENTITY:-claude-floor}",
                             "Authorization": "Bearer ${IAPEER_TOKEN}"}}
        with open(os.path.join(self.cwd, ".mcp.json"), "w") as f:
            json.dump({"mcpServers": {"iapeer": entry}}, f)
        os.makedirs(os.path.join(self.cwd, ".claude"))
        with open(os.path.join(self.cwd, ".claude/settings.local.json"), "w") as f:
            json.dump({"enabledMcpjsonServers": ["iapeer"]}, f)
        self.env.update({"IS_SANDBOX": "1", "ANTHROPIC_BASE_URL": self.standin.url,
                         "ANTHROPIC_API_KEY": key, "CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN": "1"})
        self.argv = [os.path.join(BINS, "claude"), "--dangerously-skip-permissions",
                     "--disallowedTools", "AskUserQuestion"]
        self.records = os.path.join(self.home, ".claude/projects/**/*.jsonl")

    def setup_codex(self):
        codex_home = os.path.join(self.home, ".codex")
        os.makedirs(codex_home)
        # runtime::codex_setup: the iapeer block, the folder trusted.
        with open(os.path.join(codex_home, "config.toml"), "w") as f:
            f.write('model = "gpt-5.1"\nmodel_provider = "standin"\n\n'
                    '[model_providers.standin]\nname = "Stand-in"\n'
                    f'base_url = "{self.standin.base_url}"\n'
                    'wire_api = "responses"\nenv_key = "STANDIN_API_KEY"\n\n'
                    f'[projects."{self.cwd}"]\ntrust_level = "trusted"\n\n'
                    '[mcp_servers.iapeer]\n'
                    f'url = "http://127.0.0.1:{self.mcp.port}/mcp"\n'
                    'default_tools_approval_mode = "approve"\n'
                    'bearer_token_env_var = "IAPEER_TOKEN"\n\n'
                    '[mcp_servers.iapeer.env_http_headers]\n'
                    '"X-IAPeer-Identity" = "PEER_IDENTITY"\n')
        self.env.update({"CODEX_HOME": codex_home, "STANDIN_API_KEY": "sk-standin-key"})
        self.argv = [os.path.join(BINS, "codex"), "--no-daemon", "--no-alt-screen", "-C",
                     self.cwd, "-c",
                     f'mcp_servers.iapeer.url="http://127.0.0.1:{self.mcp.port}/mcp"',
                     "--dangerously-bypass-approvals-and-sandbox"]
        self.records = os.path.join(codex_home, "sessions/**/*.jsonl")

    def setup_gemini(self):
        # runtime::gemini_setup: the user's settings hold the `iapeer` MCP entry (token and
        # identity expanded from the environment, trusted); an API-key login as the bench's
        # agent phase writes it; `--skip-trust --approval-mode yolo` as the adapter starts it.
        os.makedirs(os.path.join(self.home, ".gemini"))
        with open(os.path.join(self.home, ".gemini/settings.json"), "w") as f:
            json.dump({"security": {"auth": {"selectedType": "gemini-api-key"}},
                       "privacy": {"usageStatisticsEnabled": False},
                       "mcpServers": {"iapeer": {
                           "httpUrl": f"http://127.0.0.1:{self.mcp.port}/mcp",
                           "headers": {"Authorization": "Bearer ${IAPEER_TOKEN}",
                                       "X-IAPeer-Identity": "${PEER_IDENTITY}"},
                           "trust": True}}}, f)
        self.env.update({"GEMINI_API_KEY": "standin-key",
                         "GOOGLE_GEMINI_BASE_URL": self.standin.url})
        self.argv = [os.path.join(BINS, "gemini"), "--skip-trust", "--approval-mode", "yolo"]
        self.records = os.path.join(self.home, ".gemini/tmp/*/chats/*.jsonl")

    def setup_opencode(self):
        # runtime::opencode: the user's config names the provider (as in agentbench.py, the
        # plugin install pre-seeded); iapeer's part comes in OPENCODE_CONFIG_CONTENT, and
        # the records are read over the TUI's own server (`--port`, a password).
        write_opencode_user_config(self.home, self.standin.base_url)
        config = {"mcp": {"iapeer": {
            "type": "remote", "url": f"http://127.0.0.1:{self.mcp.port}/mcp",
            "headers": {"Authorization": "Bearer {env:IAPEER_TOKEN}",
                        "X-IAPeer-Identity": "{env:PEER_IDENTITY}"}}}}
        import socket
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.oc_port = sock.getsockname()[1]
        self.oc_password = os.urandom(16).hex()
        self.env.update({"OPENCODE_CONFIG_CONTENT": json.dumps(config),
                         "OPENCODE_SERVER_PASSWORD": self.oc_password,
                         "OPENCODE_DISABLE_AUTOUPDATE": "1",
                         "OPENCODE_DISABLE_MODELS_FETCH": "1",
                         "STANDIN_API_KEY": "sk-standin-key"})
        self.argv = [os.path.join(BINS, "opencode"), "--port", str(self.oc_port)]
        self.records = None

    def opencode_get(self, path):
        """GET `path` on OpenCode's server (opencode_records::Server::get), JSON or None."""
        import base64
        import urllib.request
        auth = base64.b64encode(f"opencode:{self.oc_password}".encode()).decode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.oc_port}{path}",
                                     headers={"Authorization": f"Basic {auth}"})
        try:
            with urllib.request.urlopen(req, timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def opencode_delivered(self, tag):
        """A function: when a user message holding `tag` was first seen in OpenCode's
        records (a page of the newest 20, as RecordsConfirm reads), else None."""
        def check():
            now = time.monotonic()
            for ses in self.opencode_get("/session") or []:
                page = self.opencode_get(f"/session/{ses.get('id')}/message?limit=20") or []
                for m in page:
                    info = m.get("info", {})
                    if info.get("role") == "user" and any(
                            tag in (p.get("text") or "") for p in m.get("parts", [])):
                        return now
            return None
        return check

    def delivered(self, tag):
        """A function: the time the record holding `tag` was first seen, else None."""
        if self.rt == "opencode":
            return self.opencode_delivered(tag)

        def check():
            wall = record_with(self.records, tag)
            # The file's mtime (its last write, on the wall clock) when earlier than this
            # poll: the record was there by then.
            now = time.monotonic()
            return None if wall is None else min(now, wall - (time.time() - now))
        return check

    def model_request(self, tag):
        """A function: when the first model request holding `tag` came, else None. For
        Gemini CLI and OpenCode the turn's own request (the one that declares tools), as
        the agent phase times theirs (agentbench.TURN_REQUEST): OpenCode's session-title
        request carries the message too and may come first."""
        turn = self.rt in TURN_REQUEST

        def check():
            with self.standin.cond:
                return next((at for at, body in self.standin.model_calls
                             if tag in body and (not turn or declares_tool(body))), None)
        return check

    def cycle(self, i):
        """One wake and one live delivery (a fresh CLI), or for a runtime of [`WARM`] one live
        delivery into the CLI started once; a dict of step times in ms."""
        if self.rt in WARM:
            return self.warm_cycle(i)
        k, s = self.kind, {}
        t_start = time.monotonic()
        p = Pty(self.argv, self.env, self.cwd)
        try:
            t_ready = p.until(k.ready, "the ready screen")
            s["start_to_ready"] = 1000 * (t_ready - t_start)
            # The daemon pastes once the agent's MCP client listed the tools.
            t_listed = p.until(lambda _rows: False, "the tool listing",
                               other=lambda: self.mcp.listed_after(t_start))
            s["ready_to_listed"] = max(0.0, 1000 * (t_listed - t_ready))
            tag = f"#floor-{self.rt}-{os.getpid()}-{i}w#"
            paste, s["paste_to_drawn"] = self.paste(p, tag)
            t_enter = p.write(b"\r")
            model = self.model_request(tag)
            if k.turn_shown is not None:
                t_done = p.until(lambda rows: k.turn_shown(rows, paste), "the turn shown")
            else:
                t_done = p.until(lambda _r: False, "the rollout record",
                                 other=self.delivered(tag))
            s["enter_to_delivered"] = 1000 * (t_done - t_enter)
            t_model = p.until(lambda _r: False, "the model request", other=model)
            s["enter_to_model"] = 1000 * (t_model - t_enter)
            s["ready_to_delivered"] = (s["ready_to_listed"] + s["paste_to_drawn"]
                                       + s["enter_to_delivered"])
            # Sums of steps, never spans of this driver's own clock: its reactions (a
            # Python screen) are not the runtime's.
            s["start_to_delivered"] = s["start_to_ready"] + s["ready_to_delivered"]
            s["start_to_model"] = (s["start_to_ready"] + s["ready_to_listed"]
                                   + s["paste_to_drawn"] + s["enter_to_model"])
            s["model_to_delivered"] = s["enter_to_delivered"] - s["enter_to_model"]
            with self.standin.cond:
                s["has_tool"] = any(tag in b and "send_to_peer" in b
                                    for _, b in self.standin.model_calls)
            self.rest(p, tag)
            # Live: the turn is over, the composer empty.
            self.live(p, i, s)
        except FloorError:
            self.keep_raw(p, i)
            raise
        finally:
            p.close()
        return s

    def live(self, p, i, s):
        """One live delivery into the idle CLI in `p`: its step times into `s` (ms)."""
        tag = f"#floor-{self.rt}-{os.getpid()}-{i}l#"
        paste, s["live_paste_to_drawn"] = self.paste(p, tag)
        t_enter, enters = self.enter(p, paste)
        if self.rt == "gemini":
            s["live_enters"] = enters
        t_model = p.until(lambda _r: False, "the live model request",
                          other=self.model_request(tag))
        s["live_enter_to_model"] = 1000 * (t_model - t_enter)
        s["live_paste_to_model"] = s["live_paste_to_drawn"] + s["live_enter_to_model"]
        t_rec = p.until(lambda _r: False, "the live record", other=self.delivered(tag))
        s["live_enter_to_record"] = 1000 * (t_rec - t_enter)
        s["live_paste_to_record"] = s["live_paste_to_drawn"] + s["live_enter_to_record"]
        s["live_model_to_record"] = s["live_enter_to_record"] - s["live_enter_to_model"]
        self.rest(p, tag)

    def live_read(self, p, i, s):
        """OpenCode: one more live delivery, its records read from Enter on every
        READ_GAP_DAEMON until they hold it, as the daemon confirms one
        (opencode_records::RecordsConfirm: a page of the newest 20 of the known session, the
        first read at Enter): what those reads cost OpenCode before its model request."""
        tag = f"#floor-{self.rt}-{os.getpid()}-{i}r#"
        paste, _ = self.paste(p, tag)
        sessions = [x.get("id") for x in self.opencode_get("/session") or []]
        t_enter, _ = self.enter(p, paste)
        model = self.model_request(tag)
        next_read, t_model = t_enter, None
        while t_model is None:
            if time.monotonic() > t_enter + STEP_TIMEOUT:
                raise FloorError("no model request with the records read")
            if next_read is not None and time.monotonic() >= next_read:
                pages = [self.opencode_get(f"/session/{x}/message?limit=20") or []
                         for x in sessions]
                held = any(tag in (q.get("text") or "") for page in pages for m in page
                           for q in m.get("parts", []))
                next_read = None if held else time.monotonic() + READ_GAP_DAEMON
            p.pump(0.005)
            t_model = model()
        s["read_enter_to_model"] = 1000 * (t_model - t_enter)
        self.rest(p, tag)

    def enter(self, p, paste):
        """Enter after a drawn paste: (the time of the first Enter, how many went). Gemini
        CLI takes an Enter too soon after a paste for a line break (gemini::ENTER_AFTER_PASTE,
        its untrusted-paste mark); its floor is the earliest Enter it submits on, so Enter
        goes again every ENTER_RETRY_FLOOR while the composer still holds the text (an Enter
        on its empty composer does nothing, gemini::ENTER_RETRY)."""
        t_enter = p.write(b"\r")
        if self.rt != "gemini":
            return t_enter, 1
        enters, last = 1, t_enter
        deadline = t_enter + PASTE_TIMEOUT
        while time.monotonic() < deadline:
            p.pump(0.002)
            rows = p.rows()
            if self.kind.text(rows) is None or self.kind.busy(rows):
                return t_enter, enters
            if time.monotonic() - last >= ENTER_RETRY_FLOOR:
                last = p.write(b"\r")
                enters += 1
        raise FloorError("the composer still holds the paste:\n" + "\n".join(
            r for r in p.rows() if r))

    def start(self, t_start):
        """Start the CLI in a pty and wait for its ready screen (answering the dialogs a
        kind knows: `boot_keys`) and the tool listing: (the Pty, ready, listed times)."""
        k = self.kind
        p = Pty(self.argv, self.env, self.cwd)
        answered = [0.0]

        def ready(rows):
            keys = getattr(k, "boot_keys", lambda _r: None)(rows)
            if keys and time.monotonic() - answered[0] > 0.5:
                answered[0] = p.write(keys)
                return False
            return k.ready(rows)
        try:
            t_ready = p.until(ready, "the ready screen")
            t_listed = p.until(lambda _rows: False, "the tool listing",
                               other=lambda: self.mcp.listed_after(t_start))
        except FloorError:
            p.close()
            raise
        return p, t_ready, t_listed

    def warm_cycle(self, i):
        """One live delivery into the CLI started at the first cycle (and again after a
        failed one); its first message, a wake's, goes uncounted."""
        s = {}
        if self.warm is None:
            t_start = time.monotonic()
            p, t_ready, _ = self.start(t_start)
            try:
                tag = f"#floor-{self.rt}-{os.getpid()}-{i}w#"
                paste, _ = self.paste(p, tag)
                self.enter(p, paste)
                self.rest(p, tag)
            except FloorError:
                self.keep_raw(p, i)
                p.close()
                raise
            self.warm = p
            s["start_to_ready"] = 1000 * (t_ready - t_start)
        try:
            self.live(self.warm, i, s)
            if self.rt == "opencode":
                self.live_read(self.warm, i, s)
        except FloorError:
            self.keep_raw(self.warm, i)
            self.warm.close()
            self.warm = None
            raise
        return s

    def keep_raw(self, p, i):
        """With BENCH_KEEP=1, everything `p` read, for failed cycle `i`."""
        if os.environ.get("BENCH_KEEP") == "1":
            with open(os.path.join(self.dir, f"failed-{i}.raw"), "wb") as f:
                f.write(b"".join(p.raw))

    def paste(self, p, tag):
        """Paste an envelope holding `tag` (bracketed, as the daemon does) and wait for the
        paste sign: (its PasteView, ms from the write to the read that drew it)."""
        paste = PasteView(envelope(tag))
        t_paste = p.write(bracketed(paste.head))
        t_drawn = p.until(lambda rows: self.kind.paste_shown(rows, paste), "the paste drawn",
                          PASTE_TIMEOUT)
        return paste, 1000 * (t_drawn - t_paste)

    def rest(self, p, tag):
        """Wait until the turn with `tag` is answered and the screen is quiet (no busy sign,
        no output for 300 ms)."""
        p.until(lambda _r: False, "the turn's model request", other=self.model_request(tag))
        deadline = time.monotonic() + STEP_TIMEOUT
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            if p.pump(0.05) is not None:
                quiet_since = time.monotonic()
            if not self.kind.busy(p.rows()) and time.monotonic() - quiet_since >= 0.3:
                return
        raise FloorError("the turn never ended:\n" + "\n".join(r for r in p.rows() if r))

    def run(self, runs, warmup=1):
        out, errors = [], []
        i = -1
        while len(out) < runs:
            i += 1
            try:
                s = self.cycle(i)
            except FloorError as e:
                errors.append(str(e).split("\n")[0])
                self.log(f"floor {self.rt}: cycle {i} failed: {str(e)[:300]}")
                if len(errors) > max(3, runs // 5):
                    raise
                continue
            if i >= warmup:
                out.append(s)
            self.log(f"  floor {self.rt} {len(out)}/{runs}: {cycle_line(s)}")
        return out, errors

    def close(self):
        if self.warm is not None:
            self.warm.close()
            self.warm = None
        self.standin.close()
        self.mcp.close()
        if os.environ.get("BENCH_KEEP") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)


def cycle_line(s):
    """A floor cycle's progress line: its wake (when it had one) and live figures."""
    wake = (f"ready -> delivered {s['ready_to_delivered']:.0f} ms, "
            if "ready_to_delivered" in s else "")
    return (f"{wake}live paste -> drawn {s['live_paste_to_drawn']:.0f}, Enter -> model "
            f"request {s['live_enter_to_model']:.0f}, paste -> model request "
            f"{s['live_paste_to_model']:.0f} ms")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def measure(runtimes, runs, log):
    """{runtime: {"samples": [...], "errors": [...], "load": (start, end)} or {"error": …}}."""
    res = {}
    if pyte is None:
        return {rt: {"error": "pyte is not installed (scripts/bench.sh puts it in "
                     "<target>/bench-py)"} for rt in runtimes}
    for rt in runtimes:
        f = None
        start = loadavg()
        try:
            f = Floor(rt, log)
            log(f"floor {rt}: 1 warm-up + {runs} cycles, the CLI in a bare pty")
            samples, errors = f.run(runs)
            res[rt] = {"samples": samples, "errors": errors, "load": [start, loadavg()]}
        except (FloorError, OSError) as e:
            res[rt] = {"error": str(e)[:500]}
        finally:
            if f is not None:
                f.close()
    return res


class Interleaved:
    """Floor cycles run one at a time between the daemon's own cycles (agentbench.py calls
    `cycle(rt, i)` after each), so the floor and iapeer are measured under the same load on
    a shared machine; `result()` is in the form of [`measure`]'s."""

    def __init__(self, runtimes, log, warmup=1):
        self.log, self.warmup, self.floors = log, warmup, {}
        self.res = {rt: {"samples": [], "errors": [], "load": [loadavg(), None]}
                    if rt in KINDS else {"error": f"no floor driver for {rt} (floor.py KINDS)"}
                    for rt in runtimes}
        if pyte is None:
            for rt in runtimes:
                self.res[rt] = {"error": "pyte is not installed (scripts/bench.sh puts it in "
                                         "<target>/bench-py)"}

    def cycle(self, rt, i):
        r = self.res.get(rt)
        if r is None or "error" in r:
            return
        try:
            if rt not in self.floors:
                self.floors[rt] = Floor(rt, self.log)
            s = self.floors[rt].cycle(i)
        except (FloorError, OSError) as e:
            r["errors"].append(str(e).split("\n")[0])
            self.log(f"  floor {rt}: cycle {i} failed: {str(e).splitlines()[0][:200]}")
            return
        if i >= self.warmup:
            r["samples"].append(s)
            self.log(f"  floor {rt} {len(r['samples'])}: {cycle_line(s)}")

    def result(self):
        for rt, r in self.res.items():
            if "load" in r:
                r["load"][1] = loadavg()
        for f in self.floors.values():
            f.close()
        self.floors = {}
        return self.res


# ----- report --------------------------------------------------------------------------------

STEPS = (
    ("start_to_ready", "wake: start -> ready screen"),
    ("ready_to_listed", "  ready -> tool listing answered"),
    ("paste_to_drawn", "  paste -> paste drawn"),
    ("enter_to_delivered", "  Enter -> delivered (turn shown / rollout record)"),
    ("enter_to_model", "  Enter -> first model request"),
    ("ready_to_delivered", "  ready -> delivered: the wake's floor"),
    ("live_paste_to_drawn", "live: paste -> paste drawn"),
    ("live_enter_to_model", "  Enter -> model request"),
    ("live_paste_to_model", "  paste -> model request: the live floor"),
    ("live_enter_to_record", "  Enter -> transcript/rollout record"),
    ("live_enters", "  Enters until taken (Gemini CLI: again every 25 ms)"),
    ("read_enter_to_model", "  Enter -> model request, its records read as the daemon does"),
)


def median(res, rt, key):
    """The floor's median of `key` for `rt`, or None."""
    xs = [s[key] for s in (res.get(rt) or {}).get("samples", []) if key in s]
    return summary(xs)["median"] if xs else None


def render(res):
    out = ["FLOOR (ms; the CLIs driven directly in a bare pty, no iapeer: the runtimes' own "
           "time for each step, scripts/bench/floor.py; load = 1-min load average at the "
           "series' start and end)"]
    rows = []
    for rt, r in res.items():
        if "error" in r:
            rows.append([f"{rt}: FAILED", "", "", "", "", "", "", "",
                         r["error"].split("\n")[0][:100]])
            continue
        xs = r["samples"]
        if not xs:
            rows.append([f"{rt}: no cycle", "", "", "", "", "", "", "",
                         "; ".join(r["errors"])[:100]])
            continue
        for key, label in STEPS:
            v = [s[key] for s in xs if key in s]
            if not v:
                continue
            m = summary(v)
            load = f"{r['load'][0].split()[0]}..{r['load'][1].split()[0]}"
            rows.append([f"{rt} {label}" if not label.startswith(" ") else label, m["n"],
                         f"{m['median']:.0f}", f"{m['p10']:.0f}", f"{m['p90']:.0f}",
                         f"{m['min']:.0f}", f"{m['max']:.0f}", load, ""])
        wakes = [s for s in xs if "has_tool" in s]
        if wakes:
            without = sum(1 for s in wakes if not s["has_tool"])
            rows.append(["  first model requests without send_to_peer", len(wakes), without,
                         "", "", "", "", "", "no settle on the floor"])
        if r["errors"]:
            rows.append(["  cycles that failed", len(r["errors"]), "", "", "", "", "", "",
                         r["errors"][0][:80]])
    out.append(table(["measure", "n", "median", "p10", "p90", "min", "max", "load", "note"],
                     rows, "lrrrrrrrl"))
    return out


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else int(
        os.environ.get("BENCH_FLOOR_RUNS") or 20)
    rts = [x.strip() for x in os.environ.get("BENCH_AGENTS", "claude,codex").split(",")
           if x.strip() in KINDS]
    start = loadavg()
    res = measure(rts, runs, log)
    text = "\n".join(render(res) + [f"load average at start {start}, at end {loadavg()}"])
    print(text)
    write_out(text, res)
    return 0 if all("error" not in r for r in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

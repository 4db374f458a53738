#!/usr/bin/env python3
"""parrot: a small terminal agent for iapeer's tests of manifest runtimes (issue 27 item 3).

Installed with its runtime.json (this folder) by `iapeer install-runtime <dir>`; iapeer knows
it only from that manifest. It draws a composer row `> …`, takes bracketed pastes, and for
each message submitted with Enter shows `* working… (esc to interrupt)` above the composer
while it answers: with its own MCP client (the official Python SDK, streamable HTTP) it calls
`send_to_peer` back to the message's sender, `parrot heard: <the message>`. A message that is
an echo agent's echo (`echo: …`) is taken and not answered, so two agents do not talk forever.
With PARROT_REPLY_TO=<peer> in its environment (the peer's launch.env) it sends to that peer
instead of the sender: a hop in a chain of agents.

Arguments: --system-prompt-file FILE, --session-id ID (a fresh conversation iapeer named),
--resume ID (that conversation again; it must exist). Files, in the peer's folder:
  .parrot/mcp.json                 written by iapeer from the manifest's template:
                                   {"url": <MCP endpoint>, "tokenEnv": <the token's variable>}
  .parrot/conversations/<id>.jsonl the conversation's messages, one JSON string a line
  .parrot/events.jsonl             what happened, for the tests: start, message, reply
Its MCP connection is scripts/mcp_client.py's (mcp_client.py here is a link to it).
"""

import argparse
import asyncio
import json
import os
import re
import sys
import termios
import time
import tty
import types

# The MCP connection and its headers, shared with iapeer's MCP test client
# (scripts/mcp_client.py; a link in this folder, copied with it at install).
from mcp_client import connect, headers_for

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
BUSY = "* working… (esc to interrupt)"
STATE = ".parrot"


def out(text):
    sys.stdout.buffer.write(text.encode())
    sys.stdout.buffer.flush()


def event(**fields):
    fields["at"] = time.time()
    with open(os.path.join(STATE, "events.jsonl"), "a") as f:
        f.write(json.dumps(fields) + "\n")


def squeeze(text):
    return " ".join(text.split())


def envelope(text):
    """(sender, topic, body) of an iapeer envelope; (None, None, text) for anything else."""
    sender = re.search(r'\bfrom="([^"]+)"', text)
    topic = re.search(r'\btopic="([^"]+)"', text)
    body = re.search(r"<(msg|message)>(?:<!\[CDATA\[)?(.*?)(?:\]\]>)?</\1>", text, re.S)
    return (
        sender.group(1) if sender else None,
        topic.group(1) if topic else None,
        body.group(2) if body else text,
    )


async def send_to_peer(to, message, topic):
    """Call send_to_peer with the endpoint and token the manifest's config file names."""
    from mcp import ClientSession

    with open(os.path.join(STATE, "mcp.json")) as f:
        config = json.load(f)
    headers = headers_for(
        types.SimpleNamespace(
            identity=os.environ.get("PEER_IDENTITY"),
            token=os.environ.get(config["tokenEnv"]),
            bearer=os.environ.get("IAPEER_BEARER_TOKEN"),
        )
    )
    arguments = {"personality": to, "message": message}
    if topic:
        arguments["topic"] = topic
    async with connect(config["url"], headers) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("send_to_peer", arguments)
    text = " ".join(c.text for c in result.content if getattr(c, "text", None))
    return (not result.isError), text


class Parrot:
    def __init__(self, conversation):
        self.conversation = conversation
        self.composer = ""

    def draw_composer(self):
        out("\r\x1b[2K> " + squeeze(self.composer)[:100])

    def record(self, body):
        with open(os.path.join(STATE, "conversations", self.conversation + ".jsonl"), "a") as f:
            f.write(json.dumps(body) + "\n")

    def submit(self):
        text, self.composer = self.composer, ""
        if not text.strip():
            self.draw_composer()
            return
        sender, topic, body = envelope(text)
        out("\r\x1b[2Kyou: " + squeeze(text)[:100] + "\r\n" + BUSY + "\r\n> ")
        started = time.time()
        self.record(body)
        event(ev="message", conversation=self.conversation, sender=sender, body=body)
        if sender is None or body.startswith("echo: "):
            outcome = "taken"
        else:
            try:
                to = os.environ.get("PARROT_REPLY_TO") or sender
                ok, said = asyncio.run(send_to_peer(to, "parrot heard: " + body[:60], topic))
            except BaseException as e:  # the SDK wraps failures in exception groups
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                ok, said = False, f"{type(e).__name__}: {e!r}"
            event(ev="reply", to=to, ok=ok, said=said)
            outcome = f"replied to {to}" if ok else f"could not reply: {said}"
        # The busy line stays long enough to be seen on any screen reader's poll.
        time.sleep(max(0.0, 0.3 - (time.time() - started)))
        out("\r\x1b[2K\x1b[1A\r\x1b[2Kparrot: " + outcome[:100] + "\r\n")
        self.draw_composer()

    def feed(self, buf):
        """Handle the input in `buf`; return what is kept for the next read (a part)."""
        while buf:
            if buf.startswith(PASTE_START):
                end = buf.find(PASTE_END)
                if end < 0:
                    return buf
                self.composer += buf[len(PASTE_START):end].decode(errors="replace")
                buf = buf[end + len(PASTE_END):]
                self.draw_composer()
            elif len(buf) > 1 and PASTE_START.startswith(buf):
                return buf
            elif buf[:1] in (b"\r", b"\n"):
                buf = buf[1:]
                self.submit()
            elif buf[:1] == b"\x1b":
                buf = buf[1:]
                self.composer = ""
                self.draw_composer()
            elif buf[:1] == b"\x7f":
                buf = buf[1:]
                self.composer = self.composer[:-1]
                self.draw_composer()
            else:
                self.composer += buf[:1].decode(errors="replace")
                buf = buf[1:]
                self.draw_composer()
        return b""


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--system-prompt-file")
    p.add_argument("--session-id")
    p.add_argument("--resume")
    args = p.parse_args(argv)
    os.makedirs(os.path.join(STATE, "conversations"), exist_ok=True)
    conversation = args.resume or args.session_id or "default"
    path = os.path.join(STATE, "conversations", conversation + ".jsonl")
    if args.resume and not os.path.exists(path):
        print(f"parrot: no conversation {conversation} to resume", file=sys.stderr)
        return 1
    earlier = open(path).read().count("\n") if os.path.exists(path) else 0
    prompt = open(args.system_prompt_file).read() if args.system_prompt_file else ""
    import mcp  # noqa: F401  (loaded before the composer shows: ready means ready)

    event(
        ev="start",
        mode="resume" if args.resume else "fresh",
        conversation=conversation,
        earlier=earlier,
        prompt_names_peer=f'personality: "{os.environ.get("PEER_PERSONALITY", "")}"' in prompt,
    )
    saved = termios.tcgetattr(0) if os.isatty(0) else None
    if saved:
        tty.setraw(0)
    out("\x1b[?2004h")
    how = f"resumed, {earlier} earlier messages" if args.resume else "fresh"
    out(f"parrot 1.0 — conversation {conversation} ({how})\r\n")
    parrot = Parrot(conversation)
    parrot.draw_composer()
    pending = b""
    try:
        while True:
            chunk = os.read(0, 65536)
            if not chunk:
                return 0
            pending = parrot.feed(pending + chunk)
    finally:
        out("\x1b[?2004l")
        if saved:
            termios.tcsetattr(0, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

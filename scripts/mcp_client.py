#!/usr/bin/env python3
"""A real MCP client for iapeer's end-to-end tests (tests/mcp.rs): the official MCP Python
SDK (`mcp` package, installed into .cache/venv by scripts/setup-python.sh) speaking
streamable HTTP to the daemon, the way an agent's MCP client does (spec 02 §4).

It connects (the `initialize` handshake, or with --mode auto the SDK's `server/discover`
probe of MCP 2026-07-28 with its fallback to the handshake), then runs tools/list ->
tools/call send_to_peer and prints one JSON object on stdout:

    {"sdk": "<mcp version>",
     "protocolVersion": "<the version the connection speaks>",
     "initialize": {"protocolVersion": ..., "serverInfo": ..., "capabilities": ..., ...},
     "tools": [<tool>, ...],
     "call": {"content": [...], "structuredContent": {...}, "isError": false}}

With --mode auto, "initialize" is replaced by "discover": the server/discover result the
connection adopted (absent when the server is handshake-only).

Arguments (each falls back to an environment variable):
    --url URL          IAPEER_MCP_URL        e.g. http://127.0.0.1:8765/mcp
    --identity ID      PEER_IDENTITY         sent as X-IAPeer-Identity, e.g. echo-alice
    --token TOKEN      IAPEER_TOKEN          the session token
    --bearer TOKEN     IAPEER_BEARER_TOKEN   optional daemon-wide bearer; when set it goes in
                                             Authorization and the session token in
                                             X-IAPeer-Token
    --to PERSONALITY   (required)            target of send_to_peer
    --message TEXT     (required)
    --topic TEXT       (optional)
    --mode MODE        legacy (default: the initialize handshake) or auto (probe first)

Exit status: 0 when all three steps answered (a tool error still counts as an answer and is
printed), 2 for bad arguments, 1 when the SDK failed (the error goes to stderr).
"""

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(description="Call iapeer's MCP endpoint with the official SDK.")
    p.add_argument("--url", default=os.environ.get("IAPEER_MCP_URL"))
    p.add_argument("--identity", default=os.environ.get("PEER_IDENTITY"))
    p.add_argument("--token", default=os.environ.get("IAPEER_TOKEN"))
    p.add_argument("--bearer", default=os.environ.get("IAPEER_BEARER_TOKEN"))
    p.add_argument("--to", required=True)
    p.add_argument("--message", required=True)
    p.add_argument("--topic")
    p.add_argument("--mode", choices=["legacy", "auto"], default="legacy")
    args = p.parse_args(argv)
    if not args.url:
        p.error("--url (or IAPEER_MCP_URL) is required")
    return args


def headers_for(args):
    """The headers an agent's MCP config sends (spec 02 §4, caller authentication)."""
    headers = {}
    if args.identity:
        headers["X-IAPeer-Identity"] = args.identity
    if args.bearer:
        headers["Authorization"] = f"Bearer {args.bearer}"
        if args.token:
            headers["X-IAPeer-Token"] = args.token
    elif args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    return headers


@contextlib.asynccontextmanager
async def connect(url, headers):
    """(read, write) streams of the SDK's streamable HTTP transport, whichever API this SDK
    version has: `streamable_http_client(url, http_client=...)` (newer) or
    `streamablehttp_client(url, headers=...)` (older)."""
    import mcp.client.streamable_http as transport

    if hasattr(transport, "streamable_http_client"):
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with create_mcp_http_client(headers=headers) as http:
            async with transport.streamable_http_client(url, http_client=http) as streams:
                yield streams[0], streams[1]
    else:
        async with transport.streamablehttp_client(url, headers=headers) as streams:
            yield streams[0], streams[1]


def dump(model):
    """A result model as the JSON the server sent (camelCase keys, no nulls)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run(args):
    from mcp import ClientSession

    arguments = {"personality": args.to, "message": args.message}
    if args.topic:
        arguments["topic"] = args.topic
    out = {"sdk": importlib.metadata.version("mcp")}
    async with connect(args.url, headers_for(args)) as (read, write):
        async with ClientSession(read, write) as session:
            if args.mode == "auto":
                # The SDK's own connect policy for mode="auto" (what `mcp.Client` runs).
                from mcp.client._probe import negotiate_auto

                await negotiate_auto(session)
                if session.discover_result is not None:
                    out["discover"] = dump(session.discover_result)
            else:
                out["initialize"] = dump(await session.initialize())
            out["protocolVersion"] = session.protocol_version
            tools = await session.list_tools()
            call = await session.call_tool("send_to_peer", arguments)
    out["tools"] = [dump(t) for t in tools.tools]
    out["call"] = dump(call)
    return out


def main(argv):
    args = parse_args(argv)
    try:
        out = asyncio.run(run(args))
    except BaseException as e:  # the SDK wraps failures in exception groups
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        print(f"mcp_client: {type(e).__name__}: {e!r}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

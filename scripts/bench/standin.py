"""Loopback stand-ins for the model APIs the real agent CLIs call (Python stdlib only), so a
benchmark of iapeer with Claude Code / Codex measures iapeer and the CLI, not a model.

They speak the same protocol as the Rust stand-ins of the integration tests
(tests/common/anthropic.rs, openai.rs, gemini.rs and openai_chat.rs) and always answer with a
short text:
- Anthropic: POST /v1/messages (not count_tokens) -> a streamed SSE text message when the
  request has "stream": true, plain JSON otherwise; any other request -> {"input_tokens":12}.
- OpenAI Responses: POST .../responses -> the SSE sequence response.created,
  response.output_item.added, response.output_text.delta, response.output_item.done,
  response.completed; any other request -> {}.
- Gemini API (Gemini CLI): POST .../models/<m>:streamGenerateContent -> one SSE chunk; the
  model router's non-streamed :generateContent -> a JSON complexity score; :countTokens.
- Chat Completions (OpenCode's OpenAI-compatible provider): POST .../chat/completions ->
  streamed chunks and [DONE] (its session-title requests are model calls too).

Each server runs on 127.0.0.1, port 0 (the kernel picks), in a daemon thread of this process,
and records the time and text of every model request so a caller can wait for a turn.
"""

import gzip
import http.server
import json
import threading
import os
import time

REPLY_TEXT = "ok"

# How long the stand-in model thinks before it answers a model request, seconds
# (BENCH_MODEL_DELAY_MS; 0 by default): a real model takes seconds, which shows what of a
# wake waits on the model.
MODEL_DELAY = float(os.environ.get("BENCH_MODEL_DELAY_MS") or 0) / 1000


def _sse(events):
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)


def anthropic_reply(req):
    """(content type, body) answering one Anthropic Messages request with REPLY_TEXT."""
    model = req.get("model") or "claude-standin"
    if req.get("stream") is not True:
        body = {"id": "msg_standin", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": REPLY_TEXT}], "stop_reason": "end_turn",
                "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 7}}
        return "application/json", json.dumps(body)
    return "text/event-stream", _sse([
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_standin", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": REPLY_TEXT}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 7}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def openai_reply(req):
    """(content type, body) answering one Responses API request with REPLY_TEXT (SSE)."""
    model = req.get("model") or "gpt-standin"
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    item = {"id": "msg_standin", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": REPLY_TEXT, "annotations": []}]}
    return "text/event-stream", _sse([
        ("response.created", {"type": "response.created", "response": {
            "id": "resp_standin", "object": "response", "status": "in_progress",
            "model": model, "output": []}}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": {
                                            "id": "msg_standin", "type": "message",
                                            "status": "in_progress", "role": "assistant",
                                            "content": []}}),
        ("response.output_text.delta", {"type": "response.output_text.delta",
                                        "item_id": "msg_standin", "output_index": 0,
                                        "content_index": 0, "delta": REPLY_TEXT}),
        ("response.output_item.done", {"type": "response.output_item.done",
                                       "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": {
            "id": "resp_standin", "object": "response", "status": "completed",
            "model": model, "output": [item], "usage": usage}}),
    ])


def _gemini_chunk(model, text):
    return {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3,
                              "totalTokenCount": 15},
            "modelVersion": model}


def gemini_reply(req, path):
    """(content type, body) answering one Gemini API request: a turn
    (`:streamGenerateContent`) with REPLY_TEXT as Server-Sent Events (`\\r\\n\\r\\n` between
    them, as the real API), the model router's non-streamed side question with a JSON
    complexity score, token counting with a count."""
    model = path.split("/models/")[-1].split(":")[0] if "/models/" in path else "gemini-standin"
    if ":streamGenerateContent" in path:
        return "text/event-stream", f"data: {json.dumps(_gemini_chunk(model, REPLY_TEXT))}\r\n\r\n"
    if ":countTokens" in path:
        return "application/json", '{"totalTokens": 12}'
    system = json.dumps(req.get("systemInstruction") or {})
    text = (json.dumps({"complexity_reasoning": "stand-in", "complexity_score": 10})
            if "Complexity Score" in system else "Stand-in summary")
    return "application/json", json.dumps(_gemini_chunk(model, text))


def chat_reply(req):
    """(content type, body) answering one Chat Completions request with REPLY_TEXT: streamed
    chunks (role, content, finish, usage) and `data: [DONE]`, or plain JSON."""
    model = req.get("model") or "standin-model"
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    if req.get("stream") is not True:
        return "application/json", json.dumps({
            "id": "chatcmpl-standin", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": REPLY_TEXT}}],
            "usage": usage})

    def chunk(delta, finish=None):
        return {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1,
                "model": model, "choices": [{"index": 0, "delta": delta,
                                             "finish_reason": finish}]}
    done = {"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 1,
            "model": model, "choices": [], "usage": usage}
    chunks = [chunk({"role": "assistant", "content": ""}), chunk({"content": REPLY_TEXT}),
              chunk({}, "stop"), done]
    return "text/event-stream", "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + \
        "data: [DONE]\n\n"


def is_gemini_model_call(method, path):
    return method == "POST" and ":streamGenerateContent" in path


def is_chat_model_call(method, path):
    return method == "POST" and path.endswith("/chat/completions")


def is_anthropic_model_call(method, path):
    return method == "POST" and path.startswith("/v1/messages") and "count_tokens" not in path


def is_openai_model_call(method, path):
    return method == "POST" and "/responses" in path


class StandIn:
    """One stand-in server. kind: "anthropic", "openai", "gemini" or "chat"."""

    def __init__(self, kind):
        if kind == "anthropic":
            self.is_model, self.reply, self.other = (is_anthropic_model_call, anthropic_reply,
                                                     '{"input_tokens":12}')
        elif kind == "openai":
            self.is_model, self.reply, self.other = is_openai_model_call, openai_reply, "{}"
        elif kind == "gemini":
            self.is_model, self.reply, self.other = is_gemini_model_call, None, "{}"
        elif kind == "chat":
            self.is_model, self.reply, self.other = is_chat_model_call, chat_reply, "{}"
        else:
            raise ValueError(f"unknown stand-in kind {kind!r}")
        self.kind = kind
        self.cond = threading.Condition()
        self.model_calls = []  # (monotonic seconds, body text)
        self.other_calls = 0
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the real APIs

            def log_message(self, *_args):
                pass

            def _body(self):
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    raw = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            break
                        raw += self.rfile.read(size)
                        self.rfile.readline()
                else:
                    raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    try:
                        raw = gzip.decompress(raw)
                    except OSError:
                        pass
                return raw.decode("utf-8", errors="replace")

            def _answer(self):
                text = self._body()
                if standin.is_model(self.command, self.path):
                    try:
                        req = json.loads(text)
                    except ValueError:
                        req = {}
                    with standin.cond:
                        standin.model_calls.append((time.monotonic(), text))
                        standin.cond.notify_all()
                    if MODEL_DELAY:
                        time.sleep(MODEL_DELAY)
                    req = req if isinstance(req, dict) else {}
                    ctype, body = (gemini_reply(req, self.path) if standin.kind == "gemini"
                                   else standin.reply(req))
                elif standin.kind == "gemini" and self.command == "POST" and ":" in self.path:
                    # The model router's side question and token counting.
                    try:
                        req = json.loads(text)
                    except ValueError:
                        req = {}
                    with standin.cond:
                        standin.other_calls += 1
                    ctype, body = gemini_reply(req if isinstance(req, dict) else {}, self.path)
                else:
                    with standin.cond:
                        standin.other_calls += 1
                    ctype, body = "application/json", standin.other
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                if ctype == "text/event-stream":
                    self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_POST = do_GET = do_HEAD = do_PUT = do_DELETE = do_PATCH = _answer

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                       name=f"standin-{kind}")
        self.thread.start()

    @property
    def url(self):
        """ANTHROPIC_BASE_URL form (no /v1)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self):
        """Codex model provider base_url form (with /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def count(self, needle):
        """Model requests so far whose body contains needle."""
        with self.cond:
            return sum(1 for _, t in self.model_calls if needle in t)

    def wait_for(self, needle, timeout):
        """Seconds (monotonic) of the first model request containing needle, or None."""
        found = self.wait_request(needle, timeout)
        return found and found[0]

    def wait_request(self, needle, timeout, accept=None):
        """(seconds (monotonic), body text) of the first model request containing needle (and
        that `accept(body text)` takes, when given), or None."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for at, text in self.model_calls:
                    if needle in text and (accept is None or accept(text)):
                        return at, text
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def write_opencode_user_config(home, base_url):
    """The user's OpenCode config under `home` naming the stand-in at `base_url` as its
    provider, and the config folder pre-seeded so OpenCode's first-start plugin install finds
    nothing to fetch (tests/opencode_peer.rs `preseed_plugin_install`)."""
    d = os.path.join(home, ".config/opencode")
    os.makedirs(os.path.join(d, "node_modules"))
    with open(os.path.join(d, "package-lock.json"), "w") as f:
        json.dump({"name": "opencode", "lockfileVersion": 3, "packages": {
            "": {"dependencies": {"@opencode-ai/plugin": "1.18.33"}}}}, f)
    with open(os.path.join(d, "opencode.json"), "w") as f:
        json.dump({"provider": {"standin": {
            "npm": "@ai-sdk/openai-compatible", "name": "Stand-in",
            "options": {"baseURL": base_url, "apiKey": "{env:STANDIN_API_KEY}"},
            "models": {"standin-model": {"name": "Stand-in model"}}}},
            "model": "standin/standin-model", "small_model": "standin/standin-model",
            "share": "disabled"}, f)

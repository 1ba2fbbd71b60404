"""A real OpenAI-compatible Chat Completions server on loopback, for the judge's tests and
benchmark: `POST /v1/chat/completions` on a ThreadingHTTPServer in a thread, scripted per
request. A reply function gets the parsed request and returns the assistant's content (a dict
dumped as JSON, or a raw string) or a Fault (429 with Retry-After, 500, a hang, malformed JSON).
Every request received is logged (the source of truth for call counts) without its
Authorization header: the log says only whether the expected key came with it."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class ChatRequest:
    """A parsed request: the claims are the JSON list on the last line of the last user
    message, the context is what the first user message holds before them."""

    n: int                      # 0-based order of arrival
    model: str
    messages: list[dict]
    response_format: dict | None
    temperature: float | None
    claims: list[str]
    context: str


@dataclass(frozen=True)
class Fault:
    """kind: '429' (with Retry-After: retry_after seconds), '500', '503' (both with
    Retry-After when retry_after is given), '408' (a proxy's request timeout), 'hang' (sleep
    `seconds` before answering, past the client's timeout), 'malformed' (content that is not JSON);
    with status 200, bodies that are no chat completion at all: 'cut body' (JSON cut short),
    'html' (a proxy's page), 'bytes' (not UTF-8); or a completion of a faulty shape: 'no
    message' (a choice a content filter stopped), 'null message', 'choice text' (a choice that
    is a string), 'usage text' (total_tokens "n/a", content '{}'); 'trickle': a whole
    completion whose body goes out a byte every `seconds` (a gateway sending keep-alive blanks
    while the model works): each read is quick, the answer is not."""

    kind: str
    retry_after: float | None = None
    seconds: float = 0.0


Reply = Callable[[ChatRequest], "dict | str | Fault"]

# The worked example of the design (4 claims, the rural one not in the context), shared by the
# judge, claims-route and contract tests.
WORKED_CLAIMS = [
    "The minimum balance for urban branches is 5000 rupees.",
    "A fee of 50 rupees applies when the balance falls below the minimum.",
    "The minimum balance for rural branches is 1000 rupees.",
    "The minimum balance for semi-urban branches is 2500 rupees.",
]

_WORD = re.compile(r"\w+")


def words_judge(request: ChatRequest) -> dict:
    """A deterministic stand-in for a model: a claim is attributed when every word of it
    longer than three letters, and every number, appears in the context."""
    found = set(_WORD.findall(request.context.casefold()))
    rows = []
    for claim in request.claims:
        needed = {w for w in _WORD.findall(claim.casefold()) if len(w) > 3 or w.isdigit()}
        missing = sorted(needed - found)
        rows.append({"statement": claim, "attributed": 0 if missing else 1,
                     "reason": (f"the context does not mention {', '.join(missing)}" if missing
                                else "the context states this")})
    return {"classifications": rows}


def wrong_claims(request: ChatRequest) -> dict:
    """A reply that classifies other statements than the ones asked about."""
    reply = words_judge(request)
    for row in reply["classifications"]:
        row["statement"] = "something else: " + row["statement"]
    return reply


def script(*steps: Reply | Fault, then: Reply = words_judge) -> Reply:
    """A reply function that answers the i-th request with steps[i] (a Fault or a reply
    function), and every later one with `then`."""
    lock, count = threading.Lock(), [0]

    def reply(request: ChatRequest):
        with lock:
            i = count[0]
            count[0] += 1
        step = steps[i] if i < len(steps) else then
        return step if isinstance(step, Fault) else step(request)

    return reply


@dataclass
class JudgeServer:
    """Start with `with JudgeServer(...) as server:`; point the client at `server.url`.
    latency: seconds every answer waits; api_key: when set, a request without
    `Authorization: Bearer <api_key>` gets 401; usage: False leaves `usage` out of replies,
    as some servers do; total_tokens: the total every reply's usage reports (default: its
    characters / 4)."""

    reply: Reply = words_judge
    latency: float = 0.0
    api_key: str | None = None
    usage: bool = True
    total_tokens: int | None = None
    log: list[dict] = field(default_factory=list)
    max_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _started: float = field(default_factory=time.monotonic)

    def __enter__(self) -> JudgeServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as separate writes: with Nagle's algorithm the body
            # waits for the client's delayed ACK (~40 ms), which would swamp `latency`
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet: the log below is the record
                pass

            def do_POST(self):
                owner._handle(self)

            def do_GET(self):  # counters for a client in another process (the benchmark)
                if self.path != "/stats":
                    return _send(self, 404, {"error": {"message": "not found"}})
                _send(self, 200, {"calls": owner.calls, "max_in_flight": owner.max_in_flight})

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def calls(self) -> int:
        return len(self.log)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"{}")
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            request = _parse(len(self.log), body)
            self.log.append({
                "n": request.n, "at": time.monotonic() - self._started,
                "path": handler.path, "model": request.model, "messages": request.messages,
                "response_format": request.response_format,
                "temperature": request.temperature, "claims": request.claims,
                "authorized": (handler.headers.get("Authorization")
                               == f"Bearer {self.api_key}") if self.api_key else None,
            })
        try:
            if self.latency:
                time.sleep(self.latency)
            if handler.path != "/v1/chat/completions":
                return _send(handler, 404, {"error": {"message": "not found"}})
            if self.api_key and not self.log[request.n]["authorized"]:
                return _send(handler, 401, {"error": {"message": "invalid api key",
                                                       "type": "invalid_request_error"}})
            outcome = self.reply(request)
            if isinstance(outcome, Fault):
                return _fault(handler, outcome)
            content = outcome if isinstance(outcome, str) else json.dumps(outcome)
            prompt_tokens = sum(len(m.get("content") or "") for m in request.messages) // 4
            completion_tokens = len(content) // 4
            body = {
                "id": f"chatcmpl-{request.n}", "object": "chat.completion",
                "created": int(time.time()), "model": request.model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": prompt_tokens,
                          "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}
            if self.total_tokens is not None:
                body["usage"]["total_tokens"] = self.total_tokens
            if not self.usage:
                del body["usage"]
            _send(handler, 200, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a hang past its timeout)
        finally:
            with self._lock:
                self._in_flight -= 1


class _Server(ThreadingHTTPServer):
    # The default listen backlog of 5 drops the connections of a burst of more than 5 clients
    # connecting at once; each dropped SYN is retried only after 1 s, a stall the benchmark
    # would measure as the client's.
    request_queue_size = 128


def _parse(n: int, body: dict) -> ChatRequest:
    messages = body.get("messages") or []
    users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
    claims: list[str] = []
    context = ""
    if users:
        head, _, last_line = users[-1].rpartition("\n")
        try:
            claims = json.loads(last_line)
        except json.JSONDecodeError:
            claims = []
        context = users[0].rpartition("\n")[0]
    return ChatRequest(n=n, model=body.get("model", ""), messages=messages,
                       response_format=body.get("response_format"),
                       temperature=body.get("temperature"), claims=claims, context=context)


def _fault(handler: BaseHTTPRequestHandler, fault: Fault) -> None:
    if fault.kind == "429":
        headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None \
            else {}
        return _send(handler, 429, {"error": {"message": "rate limited",
                                               "type": "rate_limit_error"}}, headers)
    if fault.kind in ("408", "500", "503"):
        headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None \
            else {}
        return _send(handler, int(fault.kind), {"error": {"message": "internal error"}},
                     headers)
    if fault.kind == "hang":
        time.sleep(fault.seconds)
        return _send(handler, 500, {"error": {"message": "too late"}})
    if fault.kind == "malformed":
        return _send(handler, 200, {
            "id": "chatcmpl-bad", "object": "chat.completion", "created": int(time.time()),
            "model": "judge", "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": '{"classifications": [{"statement": '}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    completion = {"id": "x", "object": "chat.completion", "created": 1, "model": "judge"}
    if fault.kind == "trickle":
        data = b" " * 40 + json.dumps({**completion, "choices": [{
            "index": 0, "finish_reason": "stop", "message": {"role": "assistant",
                                                              "content": "{}"}}]}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.flush()
        for i in range(len(data)):
            handler.wfile.write(data[i:i + 1])
            handler.wfile.flush()
            time.sleep(fault.seconds)
        return None
    shapes = {
        "no message": {"choices": [{"index": 0, "finish_reason": "content_filter"}]},
        "null message": {"choices": [{"index": 0, "finish_reason": "stop", "message": None}]},
        "choice text": {"choices": ["oops"]},
        "usage text": {"choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": "{}"}}], "usage": {"total_tokens": "n/a"}}}
    bodies = {"cut body": (b'{"id": "x", "choices": [', "application/json"),
              "html": (b"<html><body>502 Bad Gateway</body></html>", "text/html"),
              "bytes": (b'{"id": "\xff\xfe"}', "application/json"),
              **{kind: (json.dumps({**completion, **shape}).encode(), "application/json")
                 for kind, shape in shapes.items()}}
    if fault.kind in bodies:
        data, kind = bodies[fault.kind]
        handler.send_response(200)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        return None
    raise ValueError(f"unknown fault {fault.kind!r}")


def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict,
          headers: dict | None = None) -> None:
    data = json.dumps(payload).encode("utf-8")
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def main() -> None:
    """Serve words_judge in this process (for a benchmark that measures only the client):
    prints the base URL, then serves until stdin closes."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    with JudgeServer(latency=args.latency) as server:
        print(server.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()

"""Loopback servers speaking the real OpenAI chat-completions and Gemini generateContent wire
protocols, for tests and perf scripts: clients under test go through their real HTTP stack.

    with OpenAILoopback(reply=lambda body: "A", latency_s=0.2, faults=["429", "500"]) as srv:
        client = make_client("openai-compatible", "m", endpoints=[srv.url])

``reply(body) -> str | dict`` gets the parsed request JSON; a str becomes the reply text, a dict
is sent as the whole response body. ``faults`` are consumed one per request, in order (then
every request succeeds); each is a ``Fault`` or one of "ok", "429", "500", "timeout" (reply
after ``slow_s``, past the client's timeout), "malformed" (200 with a broken JSON body) and
"die" (the server dies: it stops listening and drops this and every later request unanswered)
and "reset" (this connection is closed unanswered, as a busy server with a full backlog does;
the server goes on answering).
A callable ``faults(index, body) -> Fault | str | None`` scripts any pattern.

Request bodies are kept in ``.requests``; credentials are never logged or stored (only their
sha256, in ``.credential_hashes``, so tests can check a key was sent)."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Fault:
    kind: str  # ok | 429 | 500 | timeout | malformed | die | reset
    retry_after: float | None = 1.0  # Retry-After header for 429 (None: no header)
    delay_s: float | None = None  # for timeout: how long to stall (default: server's slow_s)


FaultSpec = Sequence["Fault | str | None"] | Callable[[int, dict], "Fault | str | None"]
_CREDENTIAL_HEADERS = ("authorization", "x-goog-api-key", "api-key")


def _as_fault(f: Fault | str | None) -> Fault:
    if f is None:
        return Fault("ok")
    if isinstance(f, Fault):
        return f
    if f not in ("ok", "429", "500", "timeout", "slow", "malformed", "die", "reset"):
        raise ValueError(f"unknown fault {f!r}")
    return Fault("timeout" if f == "slow" else f)


class _Dropped(Exception):
    """The server died: the connection closes without a reply."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out close their socket mid-reply: not an error worth printing


class _Loopback:
    """Base: threads, fault script, recording. Subclasses route paths to protocol handlers."""

    def __init__(
        self,
        reply: Callable[[dict[str, Any]], str | dict[str, Any]] | None = None,
        latency_s: float = 0.0,
        faults: FaultSpec = (),
        slow_s: float = 2.0,
        require_key: str | None = None,
        sleep: Callable[[float], Any] = time.sleep,
    ):
        self.reply = reply or (lambda body: "ok")
        self.require_key = require_key  # when set, a call without this key gets HTTP 401
        self.latency_s = latency_s
        self.slow_s = slow_s
        self.sleep = sleep  # how latency and stalls wait (tests may record them instead)
        self._faults = faults
        self.requests: list[dict[str, Any]] = []  # bodies of model calls, in arrival order
        self.paths: list[str] = []
        self.credential_hashes: set[str] = set()
        self.count = 0
        self.dead = False  # a "die" fault happened: nothing is answered any more
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> _Loopback:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
            disable_nagle_algorithm = True  # small replies must not wait for delayed ACKs

            def log_message(self, format: str, *args: Any) -> None:
                pass  # never log requests (headers carry credentials)

            def do_POST(self) -> None:
                outer._dispatch(self, "POST")

            def do_GET(self) -> None:
                outer._dispatch(self, "GET")

        self._server = _Server(("127.0.0.1", 0), Handler)
        host, port = self._server.server_address[:2]
        self.url = self._base_url(f"http://{host}:{port}")
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def die(self) -> None:
        """Stop listening (new connections are refused) and answer nothing more on the open
        ones: a server process that crashed."""
        self.dead = True
        threading.Thread(target=self.stop, daemon=True).start()

    def _base_url(self, root: str) -> str:
        return root

    # -- plumbing ----------------------------------------------------------------------------
    def _next_fault(self, body: dict[str, Any]) -> tuple[int, Fault]:
        with self._lock:
            i = self.count
            self.count += 1
            self.requests.append(body)
        if callable(self._faults):
            return i, _as_fault(self._faults(i, body))
        return i, _as_fault(self._faults[i] if i < len(self._faults) else None)

    def _dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        if self.dead:  # a kept-alive connection of a dead server: drop it unanswered
            h.close_connection = True
            return
        sent = set()
        for name in _CREDENTIAL_HEADERS:
            v = h.headers.get(name)
            if v:
                v = v.removeprefix("Bearer ")
                sent.add(v)
                with self._lock:
                    self.credential_hashes.add(hashlib.sha256(v.encode()).hexdigest())
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        with self._lock:
            self.paths.append(h.path)
        try:
            if self.require_key is not None and self.require_key not in sent:
                status, headers = 401, {}
                payload = json.dumps({"error": {"message": "invalid key", "code": 401}}).encode()
            else:
                status, headers, payload = self.route(method, h.path, dict(h.headers), raw)
        except _Dropped:
            h.close_connection = True
            return
        except Exception as e:  # a bug in a test's reply function: tell the client, loudly
            status, headers, payload = 599, {}, json.dumps({"error": repr(e)}).encode()
        h.send_response(status)
        for k, v in {"Content-Type": "application/json", **headers}.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(payload)))
        # headers and body in one write: one packet per small reply
        h._headers_buffer.append(b"\r\n" + payload)  # type: ignore[attr-defined]
        try:
            h.flush_headers()
        except OSError:
            pass

    def _model_call(
        self, body: dict[str, Any], ok: Callable[[str | dict[str, Any]], dict[str, Any]],
        error: Callable[[int, str], dict[str, Any]],
    ) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
        _, fault = self._next_fault(body)
        if fault.kind == "die" or self.dead:
            self.die()
            raise _Dropped
        if fault.kind == "reset":
            raise _Dropped
        if fault.kind == "timeout":
            self.sleep(fault.delay_s if fault.delay_s is not None else self.slow_s)
        elif self.latency_s:
            self.sleep(self.latency_s)
        if fault.kind == "429":
            hdr = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
            return 429, hdr, json.dumps(error(429, "rate limited (scripted)")).encode()
        if fault.kind == "500":
            return 500, {}, json.dumps(error(500, "internal error (scripted)")).encode()
        if fault.kind == "malformed":
            return 200, {}, b'{"choices": [{"message": {"content": "trunc'
        out = self.reply(body)
        return 200, {}, json.dumps(ok(out)).encode()

    def route(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        raise NotImplementedError


def _words(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


def loopback_tokens(text: str) -> list[str]:
    """The loopback servers' tokenizer (their ``/tokenize`` and ``countTokens``): words and
    punctuation marks as the word fallback splits them, each word further cut into pieces of at
    most 4 characters, as a BPE splits rarer words ("barks." -> "bark", "s", "."). Counts differ
    from the word fallback, so a test can tell which counter a length came from."""
    out = []
    for w in re.findall(r"\w+|[^\w\s]", text):
        out += [w[i : i + 4] for i in range(0, len(w), 4)]
    return out


class OpenAILoopback(_Loopback):
    """``POST /v1/chat/completions``; ``.url`` is the base URL clients take (…/v1). Also the
    Files and Batches endpoints (see ``cafe.testing.batch_loopback.OpenAIBatchRoutes``):
    ``batch_plans`` scripts how each batch ends (``BatchPlan``)."""

    def __init__(
        self, *args: Any, batch_plans: Any = (), tokenize: bool = True,
        models: list[dict[str, Any]] | None = None, **kwargs: Any,
    ):  # fmt: skip
        super().__init__(*args, **kwargs)
        from cafe.testing.batch_loopback import OpenAIBatchRoutes

        self.batches = OpenAIBatchRoutes(self, batch_plans)
        self.tokenize = tokenize  # serve vLLM's POST /tokenize (False: 404, as some servers)
        self.tokenized: list[str] = []  # texts /tokenize was asked to count
        #: GET /v1/models answers ``{"object": "list", "data": models}`` (vLLM's shape: each
        #: entry's id, root = the weights it loaded, owned_by); None: 404, as some servers
        self.models: list[dict[str, Any]] | None = models

    def _base_url(self, root: str) -> str:
        return root + "/v1"

    def route(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        bare = path.split("?")[0]
        if bare.startswith(("/v1/files", "/v1/batches")):
            return self.batches.route(method, path, headers, raw)
        if method == "POST" and bare == "/tokenize" and self.tokenize:
            text = json.loads(raw)["prompt"]  # vLLM's field (llama.cpp's is "content")
            with self._lock:
                self.tokenized.append(text)
            toks = loopback_tokens(text)
            return (
                200,
                {},
                json.dumps({"count": len(toks), "tokens": list(range(len(toks)))}).encode(),
            )
        if method == "GET" and bare == "/v1/models" and self.models is not None:
            return 200, {}, json.dumps({"object": "list", "data": self.models}).encode()
        if method != "POST" or bare != "/v1/chat/completions":
            return 404, {}, json.dumps({"error": {"message": f"no route {path}"}}).encode()
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {}, json.dumps({"error": {"message": "body is not JSON"}}).encode()

        def error(code: int, msg: str) -> dict[str, Any]:
            return {"error": {"message": msg, "type": "scripted", "code": code}}

        return self._model_call(body, lambda out: self.completion(body, out), error)

    _ids = itertools.count()

    def completion(self, body: dict[str, Any], out: str | dict[str, Any]) -> dict[str, Any]:
        """The chat.completion body for reply ``out`` (a dict is sent as it is)."""
        if isinstance(out, dict):
            return out
        prompt = sum(
            _words(p.get("text", "")) if isinstance(p, dict) else 0
            for m in body.get("messages", [])
            for p in (
                m["content"] if isinstance(m.get("content"), list) else [{"text": m["content"]}]
            )
        )
        completion = _words(out)
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": out},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


class GeminiLoopback(_Loopback):
    """``POST /v1beta/models/{model}:generateContent`` plus the Files API's resumable upload
    (``POST /upload/{version}/files``, then the upload URL) and ``GET /v1beta/files/{id}``.
    ``.url`` is the root clients put in http_options.base_url; uploads land in ``.files``."""

    _GEN = re.compile(r"^/(v1beta|v1|v1alpha)/models/([^/:?]+):generateContent")
    _COUNT = re.compile(r"^/(v1beta|v1|v1alpha)/models/([^/:?]+):countTokens")

    def __init__(self, *args: Any, batch_plans: Any = (), **kwargs: Any):
        super().__init__(*args, **kwargs)
        from cafe.testing.batch_loopback import GeminiBatchRoutes

        self.files: dict[str, dict[str, Any]] = {}  # name -> {"meta": {...}, "data": bytes}
        self.tokenized: list[str] = []  # texts countTokens was asked to count
        self._uploads: dict[str, dict[str, Any]] = {}
        self.batches = GeminiBatchRoutes(self, batch_plans)  # batch mode (see batch_loopback)

    def route(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        h = {k.lower(): v for k, v in headers.items()}
        bare = path.split("?")[0]
        if "batch" in bare or bare.endswith(":download"):
            answered = self.batches.route(method, path, headers, raw)
            if answered is not None:
                return answered
        c = self._COUNT.match(bare)
        if c and method == "POST":  # the API's token counting (loopback_tokens of the text)
            parts = [p for x in json.loads(raw).get("contents", []) for p in x.get("parts", [])]
            text = "".join(p.get("text", "") for p in parts)
            with self._lock:
                self.tokenized.append(text)
            return 200, {}, json.dumps({"totalTokens": len(loopback_tokens(text))}).encode()
        m = self._GEN.match(bare)
        if m and method == "POST":
            try:
                body = json.loads(raw)
            except ValueError:
                return 400, {}, json.dumps(self._err(400, "body is not JSON")).encode()
            body = {**body, "_model": m.group(2)}  # which model was asked, for assertions
            return self._model_call(body, self._ok(body), self._err)
        if re.match(r"^/upload/v1\w*/files$", bare) and method == "POST":
            return self._upload(path, h, raw)
        fm = re.match(r"^/v1\w*/(files/[^/?]+)$", bare)
        if fm and method == "GET" and fm.group(1) in self.files:
            return 200, {}, json.dumps(self.files[fm.group(1)]["meta"]).encode()
        return 404, {}, json.dumps(self._err(404, f"no route {path}")).encode()

    @staticmethod
    def _err(code: int, msg: str) -> dict[str, Any]:
        status = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 400: "INVALID_ARGUMENT"}
        return {"error": {"code": code, "message": msg, "status": status.get(code, "UNKNOWN")}}

    @staticmethod
    def _ok(body: dict[str, Any]) -> Callable[[str | dict[str, Any]], dict[str, Any]]:
        def ok(out: str | dict[str, Any]) -> dict[str, Any]:
            if isinstance(out, dict):
                return out
            prompt = sum(
                _words(p.get("text", "")) for c in body.get("contents", []) for p in c["parts"]
            )
            completion = _words(out)
            return {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": out}]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": prompt,
                    "candidatesTokenCount": completion,
                    "totalTokenCount": prompt + completion,
                },
                "modelVersion": body.get("_model"),
            }

        return ok

    def _upload(self, path: str, h: dict[str, str], raw: bytes):  # type: ignore[no-untyped-def]
        command = h.get("x-goog-upload-command", "")
        if "start" in command:
            with self._lock:
                uid = str(len(self._uploads))
                meta = (json.loads(raw) if raw else {}).get("file", {})
                self._uploads[uid] = {"meta": meta, "data": b"", "mime": meta.get("mimeType")}
            root = self.url
            upload_url = f"{root}{path.split('?')[0]}?upload_id={uid}"
            return 200, {"X-Goog-Upload-URL": upload_url}, b"{}"
        uid = path.split("upload_id=")[-1]
        up = self._uploads.get(uid)
        if up is None:
            return 404, {}, json.dumps(self._err(404, "unknown upload")).encode()
        up["data"] += raw
        if "finalize" not in command:
            return 200, {"X-Goog-Upload-Status": "active"}, b""
        name = f"files/clip{uid}"
        meta = {
            "name": name,
            "uri": f"{self.url}/v1beta/{name}",
            "mimeType": up["mime"] or h.get("x-goog-upload-header-content-type", "audio/wav"),
            "sizeBytes": str(len(up["data"])),
            "state": "ACTIVE",
        }
        with self._lock:
            self.files[name] = {"meta": meta, "data": up["data"]}
        return 200, {"X-Goog-Upload-Status": "final"}, json.dumps({"file": meta}).encode()


def main(argv: list[str] | None = None) -> None:
    """Serve a loopback in its own process (perf scripts: the server must not share the
    client's interpreter lock): prints its URL, replies "ok", runs until stdin closes."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m cafe.testing.loopback")
    ap.add_argument("protocol", choices=["openai", "gemini"])
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--reply", default="ok")
    args = ap.parse_args(argv)
    cls = OpenAILoopback if args.protocol == "openai" else GeminiLoopback
    with cls(reply=lambda body: args.reply, latency_s=args.latency) as srv:
        print(srv.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()

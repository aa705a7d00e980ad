"""Batch protocols for the loopback servers: OpenAI's Files + Batches endpoints and Gemini's
batchGenerateContent / batches / file download, answering each line with the server's own
``reply`` function (so a batch and a direct call give the same text), with scripted endings.

``BatchPlan`` (one per created batch, in order; the last repeats): ``polls`` status checks
before it ends; ``outcome`` completed | expired | cancelled | failed | stall (never ends);
``done`` how many lines finish before an expiry or cancel (None: all); ``line_errors`` maps a
line index to an HTTP status for that line. A cancel request ends the batch as cancelled at the
next status check.

Accounting for the "never paid twice" checks: ``submitted[custom_id]`` counts how often a line
was submitted, ``paid[custom_id]`` how often it was answered."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

Response = tuple[int, dict[str, str], bytes]


@dataclass
class BatchPlan:
    polls: int = 1
    outcome: str = "completed"
    done: int | None = None
    line_errors: dict[int, int] = field(default_factory=dict)


def _j(status: int, obj: Any, headers: dict[str, str] | None = None) -> Response:
    return status, headers or {}, json.dumps(obj).encode()


class _BatchBook:
    """What both protocols share: plans, files, counters."""

    def __init__(self, server: Any, plans: Any):
        self.server = server
        self.plans = list(plans) if not isinstance(plans, BatchPlan) else [plans]
        self.files: dict[str, dict[str, Any]] = {}  # id -> {"meta": {...}, "data": bytes}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.submitted: Counter[str] = Counter()
        self.paid: Counter[str] = Counter()
        self.created = 0
        self.status_checks = 0

    def plan(self, i: int) -> BatchPlan:
        if not self.plans:
            return BatchPlan()
        return self.plans[min(i, len(self.plans) - 1)]

    def add_file(self, data: bytes, **meta: Any) -> str:
        fid = f"file-{len(self.files)}"
        self.files[fid] = {"meta": {"id": fid, "bytes": len(data), **meta}, "data": data}
        return fid

    def run_lines(
        self, lines: list[tuple[str, dict[str, Any]]], plan: BatchPlan, outcome: str
    ) -> list[tuple[str, int | None, dict[str, Any] | None]]:
        """(id, status or None when never reached, request body) per line; answered lines are
        counted as paid."""
        reach = len(lines) if outcome == "completed" or plan.done is None else plan.done
        out = []
        for i, (cid, body) in enumerate(lines):
            if i >= reach:
                out.append((cid, None, body))
                continue
            status = plan.line_errors.get(i, 200)
            if status == 200:
                self.paid[cid] += 1
            out.append((cid, status, body))
        return out


class OpenAIBatchRoutes(_BatchBook):
    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Response:
        bare = path.split("?")[0]
        parts = bare.strip("/").split("/")[1:]  # after "v1"
        with self.server._lock:
            if parts == ["files"] and method == "POST":
                return self._upload(headers, raw)
            if len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
                f = self.files.get(parts[1])
                if f is None:
                    return _j(404, {"error": {"message": "no such file"}})
                return 200, {"Content-Type": "application/octet-stream"}, f["data"]
            if len(parts) == 2 and parts[0] == "files" and parts[1] in self.files:
                return _j(200, self.files[parts[1]]["meta"])
            if parts == ["batches"] and method == "POST":
                return self._create(json.loads(raw))
            if parts == ["batches"] and method == "GET":
                data = [self._advance(b) for b in reversed(list(self.jobs))]
                return _j(200, {"object": "list", "data": data, "has_more": False})
            if len(parts) >= 2 and parts[0] == "batches" and parts[1] in self.jobs:
                job = self.jobs[parts[1]]
                if len(parts) == 3 and parts[2] == "cancel" and method == "POST":
                    job["cancel"] = True
                    job["obj"]["status"] = "cancelling"
                    return _j(200, job["obj"])
                if len(parts) == 2 and method == "GET":
                    self.status_checks += 1
                    job["polls"] += 1
                    return _j(200, self._advance(parts[1]))
        return _j(404, {"error": {"message": f"no route {path}"}})

    def _upload(self, headers: dict[str, str], raw: bytes) -> Response:
        ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
        msg = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw
        )
        fields: dict[str, Any] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[name] = (part.get_filename(), part.get_payload(decode=True))
        filename, data = fields.get("file", (None, b""))
        purpose = (fields.get("purpose", (None, b""))[1] or b"").decode()
        fid = self.add_file(
            data,
            object="file",
            created_at=int(time.time()),
            filename=filename or "upload.jsonl",
            purpose=purpose,
            status="processed",
        )
        return _j(200, self.files[fid]["meta"])

    def _create(self, req: dict[str, Any]) -> Response:
        f = self.files.get(req.get("input_file_id", ""))
        if f is None:
            return _j(400, {"error": {"message": "input_file_id not found"}})
        lines = []
        for raw in f["data"].splitlines():
            if raw.strip():
                d = json.loads(raw)
                lines.append((d["custom_id"], d["body"]))
                self.submitted[d["custom_id"]] += 1
        bid = f"batch_{self.created}"
        self.jobs[bid] = {
            "lines": lines,
            "plan": self.plan(self.created),
            "polls": 0,
            "cancel": False,
            "obj": {
                "id": bid,
                "object": "batch",
                "endpoint": req.get("endpoint"),
                "input_file_id": req["input_file_id"],
                "completion_window": "24h",
                "status": "validating",
                "created_at": int(time.time()),
                "metadata": req.get("metadata"),
                "output_file_id": None,
                "error_file_id": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            },
        }
        self.created += 1
        return _j(200, self.jobs[bid]["obj"])

    def _advance(self, bid: str) -> dict[str, Any]:
        job = self.jobs[bid]
        obj, plan = job["obj"], job["plan"]
        if obj["status"] in ("completed", "expired", "cancelled", "failed"):
            return obj
        if job["cancel"]:
            outcome = "cancelled"
        elif plan.outcome == "stall" or job["polls"] < plan.polls:
            obj["status"] = "in_progress"
            return obj
        else:
            outcome = plan.outcome
        if outcome == "failed":
            obj["status"] = "failed"
            obj["errors"] = {
                "object": "list",
                "data": [{"code": "invalid_request", "message": "scripted failure", "line": None}],
            }
            return obj
        out_lines, err_lines = [], []
        for cid, status, body in self.run_lines(job["lines"], plan, outcome):
            if status is None:
                code = "batch_expired" if outcome == "expired" else "batch_cancelled"
                err_lines.append(
                    {
                        "id": f"req_{cid}",
                        "custom_id": cid,
                        "response": None,
                        "error": {"code": code, "message": f"scripted {outcome}"},
                    }
                )
                continue
            if status == 200:
                reply = self.server.completion(body, self.server.reply(body))
                resp_body: Any = reply
            else:
                resp_body = {"error": {"message": f"scripted {status}", "code": status}}
            line = {
                "id": f"req_{cid}",
                "custom_id": cid,
                "error": None,
                "response": {"status_code": status, "request_id": cid, "body": resp_body},
            }
            (out_lines if status == 200 else err_lines).append(line)
        for key, rows in (("output_file_id", out_lines), ("error_file_id", err_lines)):
            if rows:
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                obj[key] = self.add_file(
                    data, object="file", purpose="batch_output", filename=f"{bid}_{key}.jsonl"
                )
        obj["request_counts"] = {
            "total": len(job["lines"]),
            "completed": len(out_lines),
            "failed": len(err_lines),
        }
        obj["status"] = outcome
        return obj


class GeminiBatchRoutes(_BatchBook):
    """``POST /{v}/models/{model}:batchGenerateContent`` (inline requests or an uploaded JSONL
    file), ``GET /{v}/batches/{id}``, ``POST /{v}/batches/{id}:cancel``, ``GET /{v}/batches``
    and the responses file's download; line errors are google.rpc codes (a 500 in the plan
    becomes code 13, a 400 code 3)."""

    _RPC = {400: 3, 429: 8, 500: 13, 503: 14}

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Response | None:
        import re

        bare = path.split("?")[0]
        with self.server._lock:
            m = re.match(r"^/(v1\w*)/models/([^/:]+):batchGenerateContent$", bare)
            if m and method == "POST":
                return self._create(m.group(2), json.loads(raw))
            m = re.match(r"^/(v1\w*)/batches$", bare)
            if m and method == "GET":
                ops = [self._advance(b) for b in reversed(list(self.jobs))]
                return _j(200, {"operations": ops})
            m = re.match(r"^/(v1\w*)/batches/([^/:]+)(:cancel)?$", bare)
            if m and m.group(2) in self.jobs:
                job = self.jobs[m.group(2)]
                if m.group(3) and method == "POST":
                    job["cancel"] = True
                    return _j(200, {})
                if method == "GET":
                    self.status_checks += 1
                    job["polls"] += 1
                    return _j(200, self._advance(m.group(2)))
            m = re.match(r"^(?:/download)?/(v1\w*)/files/([^/:]+):download$", bare)
            if m and method == "GET":
                f = self.server.files.get(f"files/{m.group(2)}")
                if f is None:
                    return _j(404, {"error": {"code": 404, "message": "no such file"}})
                return 200, {"Content-Type": "application/octet-stream"}, f["data"]
        return None

    def _create(self, model: str, req: dict[str, Any]) -> Response:
        batch = req.get("batch") or {}
        src = batch.get("inputConfig") or {}
        lines: list[tuple[str, dict[str, Any]]] = []
        inline = "requests" in src
        if inline:
            for i, r in enumerate(src["requests"].get("requests", [])):
                key = (r.get("metadata") or {}).get("key") or str(i)
                lines.append((key, r["request"]))
        else:
            f = self.server.files.get(src.get("fileName", ""))
            if f is None:
                return _j(400, {"error": {"code": 400, "message": "fileName not found"}})
            for raw in f["data"].splitlines():
                if raw.strip():
                    d = json.loads(raw)
                    lines.append((d["key"], d["request"]))
        for key, _ in lines:
            self.submitted[key] += 1
        bid = f"batch-{self.created}"
        self.jobs[bid] = {
            "lines": lines, "plan": self.plan(self.created), "polls": 0, "cancel": False,
            "model": model, "inline": inline,
            "meta": {"model": f"models/{model}", "displayName": batch.get("displayName"),
                     "state": "BATCH_STATE_PENDING", "name": f"batches/{bid}"},
        }  # fmt: skip
        self.created += 1
        return _j(200, {"name": f"batches/{bid}", "metadata": self.jobs[bid]["meta"]})

    def _advance(self, bid: str) -> dict[str, Any]:
        job = self.jobs[bid]
        meta, plan = job["meta"], job["plan"]
        op = {"name": f"batches/{bid}", "metadata": meta}
        if meta["state"] not in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
            return {**op, "done": True}
        if job["cancel"]:
            outcome = "cancelled"
        elif plan.outcome == "stall" or job["polls"] < plan.polls:
            meta["state"] = "BATCH_STATE_RUNNING"
            return op
        else:
            outcome = plan.outcome
        states = {"completed": "SUCCEEDED", "expired": "EXPIRED", "cancelled": "CANCELLED",
                  "failed": "FAILED"}  # fmt: skip
        meta["state"] = f"BATCH_STATE_{states[outcome]}"
        if outcome == "failed":
            return {**op, "done": True, "error": {"code": 3, "message": "scripted failure"}}
        rows = []
        for key, status, req in self.run_lines(job["lines"], plan, outcome):
            if status is None:  # never reached: no line at all
                continue
            if status == 200:
                body = {**req, "_model": job["model"]}
                rows.append(
                    {"key": key, "response": self.server._ok(body)(self.server.reply(body))}
                )
            else:
                code = self._RPC.get(status, 13)
                rows.append({"key": key, "error": {"code": code, "message": f"scripted {status}"}})
        if job["inline"]:
            inl = [{"metadata": {"key": r["key"]}, **{k: v for k, v in r.items() if k != "key"}}
                   for r in rows]  # fmt: skip
            meta["output"] = {"inlinedResponses": {"inlinedResponses": inl}}
        else:
            name = f"files/batch-{bid}-out"
            data = "".join(json.dumps(r) + "\n" for r in rows).encode()
            self.server.files[name] = {"meta": {"name": name}, "data": data}
            meta["output"] = {"responsesFile": name}
        return {**op, "done": True}

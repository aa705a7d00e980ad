"""Ground-truth captions (SPEC §2): an audio-capable chat model writes one chronological narrative
paragraph per clip. Captions are keyed by sample id + audio content hash, written to a resumable
JSONL file that can be shared and passed to `cafe judge --captions FILE`. The synth benchmark
already carries exact captions and events.

Caption file line: {"sample_id", "audio_sha256", "caption", "captioner", "template_hash"}."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cafe.benchmarks import BENCHMARKS
from cafe.cache import Cache, cache_file
from cafe.caller import Caller, CallerSpec, client_for
from cafe.errors import CafeError, CafeUsageError, ConfigError, RunFolderError
from cafe.execution import execute, run_sync
from cafe.judge.spec import JudgeSpec
from cafe.locking import file_lock
from cafe.prompts import text_template
from cafe.records import InputError, Problem, Sample
from cafe.store import JsonlWriter, iter_jsonl, numbered_jsonl, read_json_file

TEMPERATURE = 0.0
MAX_TOKENS = 1024


def load_captions(path: str | Path) -> dict[str, str]:
    """sample id -> caption from a captions JSONL file (last line wins) or a JSON object
    {id: caption}. A line without a sample id or caption is an InputError naming it."""
    path = Path(path)
    if path.suffix == ".json":
        try:
            data = read_json_file(path, "fix the captions file")
        except RunFolderError as e:  # not JSON, nested too deep, a NUL or lone surrogate
            raise ConfigError(str(e).replace(" is damaged", "")) from None
        if not isinstance(data, dict):
            raise InputError(Problem(str(path), "expected a JSON object {sample_id: caption}"))
        for k, v in data.items():  # a caption that is no text is never used as "None"
            if not isinstance(v, str) or not v.strip():
                what = "empty" if isinstance(v, str) else f"a {type(v).__name__}, not text"
                raise InputError(Problem(str(path), f"caption is {what}", str(k), "caption"))
        return {str(k): v for k, v in data.items()}
    out: dict[str, str] = {}
    for n, d in numbered_jsonl(path):
        if not isinstance(d, dict):
            raise InputError(Problem(f"{path}:{n}", "not a JSON object"))
        sid, cap = d.get("sample_id"), d.get("caption")
        if isinstance(sid, bool) or not isinstance(sid, (str, int)) or not str(sid).strip():
            raise InputError(Problem(f"{path}:{n}", "missing or empty", None, "sample_id"))
        if not isinstance(cap, str) or not cap.strip():  # never used as the text "None"
            what = "missing or empty" if cap is None or isinstance(cap, str) else (
                f"a {type(cap).__name__}, not text")  # fmt: skip
            raise InputError(Problem(f"{path}:{n}", what, str(sid), "caption"))
        out[str(sid)] = cap
    return out


def _todo(
    samples: Sequence[Sample], out: Path, identity: str, template_hash: str
) -> tuple[list[tuple[Sample, list[str]]], list[Problem]]:
    """(sample, its audio hashes) not yet captioned, and a problem line per unusable sample."""
    from cafe.audio import file_sha256

    # files written before identities dropped the endpoint carry "kind:model@url"
    done = {
        (d["sample_id"], d.get("audio_sha256", ""))
        for d in iter_jsonl(out)
        if str(d.get("captioner", "")).split("@")[0] == identity
        and d.get("template_hash") == template_hash
    }
    problems: list[Problem] = []
    todo = []
    for s in samples:
        if s.error:
            problems.append(Problem(str(out), s.error, s.id, "audio"))
            continue
        try:
            hashes = [file_sha256(p) for p in s.audio]
        except OSError as e:
            problems.append(Problem(str(s.audio[0] if s.audio else ""), str(e), s.id, "audio"))
            continue
        if (s.id, ",".join(hashes)) not in done:
            todo.append((s, hashes))
    return todo, problems


async def caption_samples(
    samples: Sequence[Sample], client: Any, out: str | Path, *,
    template: str | Path | None = None, concurrency: int = 8, cache: Cache | None = None,
    progress: bool = True, endpoint: str = "service",
) -> dict[str, Any]:  # fmt: skip
    """Caption every usable sample not yet in ``out`` (same captioner and template) -> counts;
    failed ones are reported and left out, so a re-run retries them (``endpoint``: JudgeSpec's)."""
    text, template_hash = text_template("caption", template)
    # protocol and model, never where it is served: resuming through another spelling of the
    # same server (localhost vs 127.0.0.1, a second replica) captions nothing twice
    kind, model = getattr(client, "kind", None), getattr(client, "model", None)
    identity = f"{kind}:{model}" if kind and model else str(client.identity).split("@")[0]
    kind, _, model = identity.partition(":")
    spec = JudgeSpec(
        task="caption", kind=kind, model=model or None, template_hash=template_hash,
        endpoint=endpoint, thinking=bool(getattr(client, "thinking", False)), max_tokens=MAX_TOKENS,
        temperature=TEMPERATURE,
    )  # fmt: skip
    caller = Caller(CallerSpec(kind, model, concurrency=concurrency, role="captioner"),
                    identity=spec, cache=cache, client=client)  # fmt: skip
    out = Path(out)
    todo, problems = _todo(samples, out, identity, template_hash)
    skipped = len(samples) - len(todo) - len(problems)

    def parse(final: str | None) -> tuple[Any, str | None]:
        return (final, None) if final else (None, "no caption")

    async def one(item: tuple[Sample, list[str]]) -> dict | None:
        s, hashes = item
        content = [{"type": "audio", "path": p} for p in s.audio]
        content.append({"type": "text", "text": text})
        # a thinking captioner's reasoning is not the caption: its final answer is
        got = await caller.ask([{"role": "user", "content": content}], {"audio": hashes}, parse,
                               temperature=TEMPERATURE, max_tokens=MAX_TOKENS,
                               final=True)  # fmt: skip
        if not got.ok:
            why = got.error or ("only thinking, no caption" if got.text else "empty")
            return failed(item, why)
        return {
            "sample_id": s.id,
            "audio_sha256": ",".join(hashes),
            "caption": got.value,
            "captioner": identity,
            "template_hash": template_hash,
        }

    def failed(item: tuple[Sample, list[str]], why: str) -> None:
        problems.append(Problem(str(out), f"captioner: {why}", item[0].id))  # left out: retried

    # the one executor: bounded, one fsynced line per clip (a kill loses at most one), a dead
    # server (ServerUnreachable) or Ctrl-C stopping the rest
    with JsonlWriter(out) as writer:
        # the captions file as the executor writes it: a failed clip (None) is left out
        kept = SimpleNamespace(write_many=lambda rows: writer.write_many([r for r in rows if r]))
        rows = await execute(todo, one, failed, kept, concurrency=concurrency, desc="caption",
                             progress=progress, flush_every=1)  # fmt: skip
    written = sum(r is not None for r in rows)
    return {"written": written, "skipped_done": skipped, "problems": problems,
            "calls": caller.calls, "template_hash": template_hash}  # fmt: skip


def caption(
    bench: str, out: str | Path, *, captioner: str, model: str, data: str | None = None,
    version: str | None = None, endpoints: Sequence[str] = (), template: str | None = None,
    concurrency: int = 8, limit: int | None = None, cache: str | Path | None = None,
    audio_root: str | Path | None = None, api_key_env: str | None = None, calls: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """Caption every clip of ``bench`` with an audio-capable model (``captioner``: its client
    kind) into ``out`` (resumable) -> counts and "problems" (the benchmark's and the failed
    calls'); ``audio_root``: the folder audio paths must stay inside; ``calls``: a CallPlan."""
    if not model:
        raise CafeUsageError("--model is required: the captioner's model name")
    # the client first: a missing key or server is said in one line before any other work
    how = CallerSpec(captioner, model, tuple(endpoints), concurrency=concurrency,
                     key_env=api_key_env, thinking=False,  # a captioner is a judge: no thinking
                     server_option="--endpoint", role="captioner")  # fmt: skip
    try:
        client = client_for(how, calls)
    except KeyError as e:  # unknown kind
        raise CafeUsageError(str(e)) from None
    except ValueError as e:  # missing API key, no server named
        raise CafeError(str(e)) from None
    try:
        bench_obj = BENCHMARKS.get(bench)()
        bench_obj.audio_root = str(audio_root) if audio_root is not None else None
        loaded = bench_obj.load(data, version)
    except (InputError, FileNotFoundError) as e:
        raise CafeError(str(e)) from None
    samples = loaded.samples[:limit] if limit else loaded.samples

    async def go() -> dict[str, Any]:
        try:
            return await caption_samples(
                samples, client, out, template=template,
                concurrency=calls.item_concurrency(concurrency) if calls else concurrency,
                cache=Cache(cache or cache_file("captions.sqlite")),
                endpoint=JudgeSpec.endpoint_of(list(endpoints)),
            )  # fmt: skip
        finally:
            await client.aclose()

    out_path = Path(out)  # one writer per captions file, as per run folder (cafe.locking)
    with file_lock(out_path.with_name(f".{out_path.name}.lock"), out_path, "cafe caption"):
        res = run_sync(go())
    res["failed"] = len(res["problems"])
    res["attempted"] = len(samples) - res["skipped_done"]
    res["problems"] = [*loaded.problems, *res["problems"]]
    return res

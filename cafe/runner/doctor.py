"""`cafe doctor`: does the model really hear its audio? Send a few items with their real audio and
again with silence of the same length; outputs that never change mean the audio was dropped
somewhere between the prompt and the model (the silent audio-drop bug other harnesses shipped).

Works for every adapter through ``generate``; adapters that expose ``next_token_logits``
(transformers) get a stronger check: the first-token logits must differ for every item."""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cafe.audio import load_audio, write_wav
from cafe.errors import CafeError
from cafe.records import Request

#: logits closer than this (max abs difference) count as unchanged
LOGIT_TOLERANCE = 1e-5


@dataclass
class DoctorItem:
    sample_id: str
    real_text: str | None
    silent_text: str | None
    text_changed: bool
    logit_diff: float | None = None  # max |logit(real) - logit(silent)| of the first token
    error: str | None = None


@dataclass
class DoctorReport:
    items: list[DoctorItem] = field(default_factory=list)
    logits_checked: bool = False

    @property
    def ok(self) -> bool:
        """Audio heard: with logits, every item's logits change; otherwise some output changes."""
        usable = [i for i in self.items if i.error is None]
        if not usable:
            return False
        if self.logits_checked:
            return all((i.logit_diff or 0.0) > LOGIT_TOLERANCE for i in usable)
        return any(i.text_changed for i in usable)

    def lines(self) -> list[str]:
        out = []
        for i in self.items:
            if i.error:
                out.append(f"{i.sample_id}: error: {i.error}")
                continue
            diff = (
                "" if i.logit_diff is None else f", first-token logits differ by {i.logit_diff:.3g}"
            )
            state = "changed" if i.text_changed else "UNCHANGED"
            out.append(f"{i.sample_id}: output {state} with silence{diff}")
        verdict = (
            "ok: the model's outputs depend on its audio"
            if self.ok
            else "WARNING: outputs do not change when the audio is replaced by silence; "
            "the audio is probably not reaching the model"
        )
        return [*out, verdict]


def silent_copy(request: Request, folder: str | Path) -> Request:
    """The same request with every clip replaced by silence of the same duration."""
    folder = Path(folder)
    mapping: dict[str, str] = {}

    def silence_for(path: str) -> str:
        if path not in mapping:
            n = len(load_audio(path, sample_id=request.sample_id))
            out = folder / f"silence_{len(mapping)}_{abs(hash((request.sample_id, path)))}.wav"
            write_wav(out, np.zeros(n, dtype=np.float32))
            mapping[path] = str(out)
        return mapping[path]

    messages = []
    for m in request.messages:
        content = m.get("content")
        if isinstance(content, list):
            content = [
                {**p, "path": silence_for(p["path"])}
                if p.get("type") == "audio" and p.get("path")
                else p
                for p in content
            ]
        messages.append({**m, "content": content})
    audio = [silence_for(p) for p in request.audio]
    return dataclasses.replace(request, messages=messages, audio=audio)


def check_audio(adapter: Any, requests: list[Request]) -> DoctorReport:
    """Run each request with real and silent audio through ``adapter`` (the runner's execute
    stage: batches, async adapters, per-item errors) and compare."""
    from cafe.runner.execute import generate

    with tempfile.TemporaryDirectory(prefix="cafe-doctor-") as tmp:
        silent = [silent_copy(r, tmp) for r in requests]
        real_out = generate(adapter, requests)
        silent_out = generate(adapter, silent)
        diffs: list[float | None] = [None] * len(requests)
        logits_checked = callable(getattr(adapter, "next_token_logits", None))
        if logits_checked:
            for k, (r, s) in enumerate(zip(requests, silent, strict=True)):
                try:
                    a, b = adapter.next_token_logits([r]), adapter.next_token_logits([s])
                    diffs[k] = float((a - b).abs().max())
                except Exception:  # the item's error is already in its completion
                    diffs[k] = None
    report = DoctorReport(logits_checked=logits_checked)
    for r, a, b, d in zip(requests, real_out, silent_out, diffs, strict=True):
        error = a.error or b.error
        report.items.append(
            DoctorItem(r.sample_id, a.text, b.text, a.text != b.text, logit_diff=d, error=error)
        )
    return report


def _requests(card: Any, bench: str, data: str | None, n: int, max_new_tokens: int) -> list:
    from cafe.benchmarks import BENCHMARKS
    from cafe.prompts import build_request

    loaded = BENCHMARKS.get(bench)().load(data)
    samples = [s for s in loaded.samples if s.error is None and s.audio][:n]
    if not samples:
        raise CafeError(f"benchmark {bench!r}: no usable items with audio")
    generation = {**card.generation, "max_new_tokens": max_new_tokens, "temperature": 0}
    return [build_request(s, card.prompt_style, 0, 0, generation) for s in samples]


def doctor(
    model: str,
    bench: str = "synth",
    *,
    checkpoint: str | None = None,
    data: str | None = None,
    limit: int = 3,
    max_new_tokens: int = 64,
    cards: list[str] | tuple[str, ...] = (),
    options: dict[str, Any] | None = None,
) -> DoctorReport:
    """Send ``limit`` items of ``bench`` to ``model`` with their real audio and with silence of
    the same length -> DoctorReport (``.ok``, ``.lines()``). ``options`` are the adapter options
    (-o pairs; ``endpoints`` for a served model)."""
    from cafe.adapters import load_model

    resolved, adapter = load_model(model, checkpoint, cards, options)
    try:
        return check_audio(adapter, _requests(resolved.card, bench, data, limit, max_new_tokens))
    finally:
        adapter.close()

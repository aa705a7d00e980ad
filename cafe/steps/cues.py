"""`cafe cues` on the step engine: cue recall of MMAR v2 runs, offline always and by the cue
judge (cafe.judge.cues.CueJudge) when one is named; its judgements go to
``cues.judgements.<judge>.jsonl`` under the judge's spec, resumed and compacted by the engine
(each judge call cached in the engine's call cache under the judge's spec)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cafe.cache import Cache
from cafe.folder.status import StepStatus, by_counts, require_usable
from cafe.judge.base import JudgeItem
from cafe.judge.cues import NO_CAPTION, CueJudge, format_cues
from cafe.metrics.cues import cues_of, cues_section
from cafe.records import Judgement
from cafe.steps.base import Flags, Option, Step, View
from cafe.store import judge_records_name


def bench_breakdowns(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The run's benchmark's own breakdowns (as its accuracy uses), else None."""
    from cafe.benchmarks import BENCHMARKS

    try:
        name = (manifest.get("bench") or {}).get("name")
        return (dict(BENCHMARKS.get(name).breakdowns) or None) if name else None
    except (KeyError, ValueError, AttributeError):
        return None


class CuesStep(Step):
    name = "cues"
    help = "Cue recall of MMAR runs: offline matcher and CAFE judge, vs required events."
    section_name = "cues"
    record_cls = Judgement
    caches = "calls"  # the cue judge caches each call under its JudgeSpec
    options = (
        Option(
            "judge",
            str,
            None,
            "Also ask this CAFE judge (cue list as required events); offline matcher only without.",
            kind=("openai", "gemini", "openai-compatible"),
            needs="judge_model",
        ),
        Option("judge_model", str, None, "Judge model name."),
        Option("template", str, None, "Own template.", kind="file"),
        Option("captions", str, None, "Captions file (optional).", kind="file"),
    )
    layout = ("judge", "judge_model",
              Flags("judge_server", {"concurrency": "judge_concurrency"},
                    {"endpoint_help": "Judge server URL (repeatable).", "concurrency_help": None,
                     "order": ("endpoints", "concurrency", "api_key_env")}),
              "captions", "template", Flags("cache"), Flags("json"), Flags("progress"))  # fmt: skip

    def __init__(self, concurrency: int = 16, endpoints: Sequence[str] = (),
                 **client_options: Any) -> None:  # fmt: skip
        self.concurrency = concurrency
        self.endpoints, self.client_options = tuple(endpoints), client_options
        self.judge: CueJudge | None = None

    def spec(self, **options: Any) -> dict[str, Any]:
        """The cue judge's spec (its records are kept while it is the same), or the offline
        matcher's."""
        self.opts = {o.name: options.get(o.name, o.default) for o in self.options}
        if not self.opts["judge"]:
            return {"step": self.name, "version": self.version}
        template = self.opts["template"]
        self.judge = CueJudge(self.opts["judge"], self.opts["judge_model"],
                              str(template) if template else None, endpoints=self.endpoints,
                              cache=self.call_cache.cache, concurrency=self.concurrency,
                              **self.client_options)  # fmt: skip
        return self.judge.spec.to_dict()

    def records_file(self, spec: dict[str, Any]) -> str | None:
        return judge_records_name("cues", self.judge.identity) if self.judge else None

    def check(self, view: View) -> None:
        if not view.predictions:
            raise ValueError(f"{view.root}: no predictions.jsonl records")
        if not any(cues_of(s) for s in view.samples):
            raise ValueError(
                f"{view.root}: no sample carries cues; cue recall needs MMAR v2 metadata "
                "(MMAR-meta.jsonl, field 'cue')"
            )
        require_usable("cafe cues", self._answered(view), str(view.root))

    @staticmethod
    def _answered(view: View) -> StepStatus:
        n = sum(p.error is None and p.raw_output is not None for p in view.predictions)
        return by_counts(len(view.predictions), n, "items", "failed")

    def plan(self, view: View, spec: dict[str, Any]) -> list[Any]:
        """Answered predictions of items with cues (a failed one counts 0 of its cues offline
        and is not asked; nor is one whose sample is gone)."""
        from cafe.judge.pipeline import load_caption_map

        caption_of = load_caption_map(view.samples, self.opts["captions"])
        by_id = {s.id: s for s in view.samples}
        return [
            JudgeItem(by_id[p.sample_id], p, caption_of.get(p.sample_id) or NO_CAPTION)
            for p in view.predictions
            if p.error is None and p.raw_output is not None
            and p.sample_id in by_id and cues_of(by_id[p.sample_id])
        ]  # fmt: skip

    def key(self, item: Any) -> tuple[str, int]:
        return item.prediction.sample_id, item.prediction.run_index

    def failed(self, item: Any, why: str) -> Any:
        return self.judge.failed(item, why)  # type: ignore[union-attr]

    async def call(self, item: Any, spec: dict[str, Any]) -> Any:
        return await self.judge.ajudge(item)  # type: ignore[union-attr]

    async def aclose(self) -> None:
        if self.judge is not None:
            await self.judge.aclose()

    def status(self, view: View, records: Sequence[Any]) -> StepStatus:
        if self.judge is None:  # the offline matcher: every answered prediction
            return self._answered(view)
        return super().status(view, records)

    def section(self, view: View, records: Sequence[Any], spec: dict[str, Any]) -> dict[str, Any]:
        described = None
        if self.judge is not None:
            described = {**self.judge.describe(), "file": self.records_file(spec),
                         "calls_sent": self.judge.calls}  # fmt: skip
        cafe_judgements = [j for j in view.judgements if j.status == "ok"] or None
        return cues_section(
            view.samples, view.predictions, bench_breakdowns(view.manifest),
            list(records) if self.judge else None, described, cafe_judgements,
        )  # fmt: skip

    def format(self, section: dict[str, Any]) -> str:
        return format_cues(section)


def cues_run(
    run_dir: str | Path,
    judge: str | None = None,
    judge_model: str | None = None,
    endpoints: Sequence[str] = (),
    concurrency: int = 16,
    *,
    template: str | Path | None = None,
    captions: str | Path | None = None,
    cache: Cache | str | Path | None = None,
    progress: bool = True,
    limit: int | None = None,
    **client_options: Any,
) -> dict[str, Any]:
    """Write (and return) the "cues" section; with ``judge`` (openai, gemini,
    openai-compatible) the cue judge runs too, resumably and cached (``limit``: on the first
    N (item, run)s only)."""
    from cafe.steps.engine import run_step

    step = CuesStep(concurrency, endpoints, **client_options)
    options = dict(judge=judge, judge_model=judge_model, template=template, captions=captions)
    return run_step(step, run_dir, cache=cache, concurrency=concurrency, progress=progress,
                    limit=limit, **options).section  # fmt: skip

"""The data pipeline's stages, each resumable (append-only JSONL per stage in the work folder;
a re-run skips ids already done) and each printing its counts. Backends per stage: "rule"
(deterministic stand-ins from ground-truth events, for synth; `rules.py`) or an LLM through the
shared chat clients (`llm.py`). The difficulty filter always runs the base model through the
harness's adapter (`difficulty.py`)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.execution import run_calls
from cafe.records import Event, Sample
from cafe.training.data import rules
from cafe.training.data.difficulty import Answerer, harness_answerer, keep_by_difficulty

STAGE_FILES = (
    "clips",
    "captions",
    "questions",
    "question_filter",
    "difficulty",
    "pools",
    "cot",
    "cot_filter",
)


@dataclass
class DataConfig:
    workdir: Path
    source: str = "synth"  # synth | clips (AVQA-style JSONL: id, audio, caption?, events?)
    clips: str | None = None
    synth_n: int = 50
    synth_seed: int = 0
    backend: str = "rule"  # rule | a chat client kind ("openai-compatible", "openai", "gemini")
    llm_model: str | None = None
    llm_endpoints: list[str] = field(default_factory=list)
    llm_api_key_env: str | None = None  # key variable of llm_endpoints [CAFE_ENDPOINT_API_KEY]
    # the captioner (Gemini-2.5-Pro in the paper) apart from the writer/filters (Qwen3-32B):
    # None = the llm_* settings
    caption_backend: str | None = None
    caption_model: str | None = None
    caption_endpoints: list[str] = field(default_factory=list)
    caption_api_key_env: str | None = None
    # section 4.1's four aspects; add "counting" (appendix E.2's fifth) to opt in
    dimensions: list[str] = field(default_factory=lambda: list(rules.DEFAULT_DIMENSIONS))
    question_min_score: int = 4
    difficulty_model: str | None = None  # card, adapter or checkpoint folder; None = base_model
    difficulty_checkpoint: str | None = None
    difficulty_cards: list[str] = field(default_factory=list)  # extra model cards YAML
    difficulty_options: dict[str, Any] = field(default_factory=dict)  # adapter options (-o)
    difficulty_n: int = 16
    difficulty_generation: dict[str, Any] = field(default_factory=dict)
    sft_size: int = 5000
    # the SFT pool is balanced over dimensions x clip-duration bins (equal-count bins over the
    # candidates' clip lengths; the paper: "across four aspects and different time durations",
    # no bin count given); 1 = dimensions only
    duration_bins: int = 1
    cot_min_reasoning: float = 7.0
    cot_min_review: float = 7.0
    cot_style: str = "full"  # rule CoT writer only: full | concise (rules.COT_STYLES)
    templates: dict[str, str] = field(default_factory=dict)
    cache: str | None = None

    def __post_init__(self) -> None:
        unknown = [d for d in self.dimensions if d not in rules.DIMENSIONS]
        if unknown or not self.dimensions:
            raise ValueError(
                f"recipe data.dimensions {self.dimensions}: "
                f"{'unknown ' + ', '.join(map(repr, unknown)) if unknown else 'none given'}; "
                f"choose from {', '.join(rules.DIMENSIONS)}"
            )

    @classmethod
    def from_recipe(cls, recipe: dict[str, Any], workdir: str | Path | None = None) -> DataConfig:
        d = dict(recipe.get("data") or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"recipe data: unknown key(s) {sorted(unknown)}")
        d["workdir"] = Path(workdir or d.get("workdir") or "train-data")
        if d.get("difficulty_model") is None:
            d["difficulty_model"] = recipe.get("base_model")
        return cls(**d)


class StageFile:
    """Append-only JSONL keyed by "id"; a torn last line (killed run) is ignored and redone."""

    def __init__(self, path: Path):
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").split("\n"):
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.rows[row["id"]] = row

    def add(self, rows: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                self.rows[row["id"]] = row


def clips_from_samples(samples: list[Sample]) -> list[dict[str, Any]]:
    """Synth samples → clips (one per audio file; the caption and events are ground truth)."""
    clips: dict[str, dict[str, Any]] = {}
    for s in samples:
        if s.error or not s.audio:
            continue
        clips.setdefault(
            s.audio[0],
            {
                "id": s.id,
                "audio": s.audio[0],
                "caption": s.caption,
                "events": [_event_dict(e) for e in s.events or []],
            },
        )
    return list(clips.values())


def _event_dict(e: Event | dict) -> dict[str, Any]:
    e = e if isinstance(e, dict) else e.to_dict()
    return {
        "label": e["label"],
        "onset": float(e["onset"]),
        "offset": float(e["offset"]),
        "attributes": dict(e.get("attributes") or {}),
        "required": bool(e.get("required", False)),
    }


def read_clips(path: str | Path) -> list[dict[str, Any]]:
    """AVQA-style input: JSONL (or a JSON list) of {id, audio, caption?, events?}; audio paths
    relative to the file. Bad rows raise InputError naming file, row id and field."""
    from cafe.records import InputError, Problem

    path = Path(path)
    text = path.read_text(encoding="utf-8")
    rows = (
        json.loads(text)
        if text.lstrip().startswith("[")
        else [json.loads(line) for line in text.split("\n") if line.strip()]
    )
    out = []
    for row in rows:
        for key in ("id", "audio"):
            if not row.get(key):
                raise InputError(Problem(str(path), f"missing {key}", row.get("id"), key))
        audio = Path(row["audio"])
        out.append(
            {
                "id": str(row["id"]),
                "audio": str(audio if audio.is_absolute() else path.parent / audio),
                "caption": row.get("caption"),
                "events": [_event_dict(e) for e in row.get("events") or []],
            }
        )
    return out


def _label_pool(clips: list[dict[str, Any]]) -> list[str]:
    try:
        from cafe import synth_vocabulary as vocabulary

        return sorted(vocabulary.SOURCES)
    except (ImportError, AttributeError):
        return sorted({e["label"] for c in clips for e in c["events"]})


def _letter_to_text(q: dict[str, Any]) -> str:
    letter = str(q["answer"]).strip().upper()[:1]
    return q["choices"]["ABCDEFGH".index(letter)]


class Pipeline:
    def __init__(
        self,
        cfg: DataConfig,
        *,
        answerer: Answerer | None = None,
        echo: Callable[[str], None] = print,
        recipe: dict[str, Any] | None = None,
    ):
        self.cfg = cfg
        self.echo = echo
        self.recipe = recipe or {}
        self.files = {name: StageFile(cfg.workdir / f"{name}.jsonl") for name in STAGE_FILES}
        self._answerer = answerer
        self._llm = None
        self._captioner = None
        self.counts: dict[str, dict[str, int]] = {}

    # helpers -----------------------------------------------------------------------------
    def _stages(self, backend: str, model: str | None, endpoints: list[str], key_env: str | None):
        from cafe.cache import Cache
        from cafe.caller import CallerSpec, client_for
        from cafe.training.data.llm import LLMStages, load_data_templates

        how = CallerSpec(backend, model, tuple(endpoints), key_env=key_env, thinking=None,
                         role="data LLM", server_option=None)  # fmt: skip
        client = client_for(how)
        return LLMStages(
            client, cache=Cache(self.cfg.cache), templates=load_data_templates(self.cfg.templates)
        )

    @property
    def llm(self):
        """The writer and filters (questions, question filter, CoT, CoT filter)."""
        if self._llm is None:
            c = self.cfg
            self._llm = self._stages(c.backend, c.llm_model, c.llm_endpoints, c.llm_api_key_env)
        return self._llm

    @property
    def captioner(self):
        """The captioner: its own model where the recipe names one (caption_*), else the llm."""
        c = self.cfg
        if not (c.caption_model or c.caption_backend):
            return self.llm
        if self._captioner is None:
            self._captioner = self._stages(
                c.caption_backend or c.backend,
                c.caption_model or c.llm_model,
                c.caption_endpoints or ([] if c.caption_backend else c.llm_endpoints),
                c.caption_api_key_env,
            )
        return self._captioner

    def _rule(self) -> bool:
        return self.cfg.backend == "rule"

    def _report(self, stage: str, **counts: int) -> None:
        self.counts[stage] = counts
        backend = "rule stand-in" if self._rule() and stage in _LLM_STAGES else None
        label = f"{stage} [{backend}]" if backend else stage
        self.echo(f"{label}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))

    # stages --------------------------------------------------------------------------------
    def stage_clips(self) -> list[dict[str, Any]]:
        f = self.files["clips"]
        if not f.rows:
            if self.cfg.source == "synth":
                from cafe.benchmarks.synth import SynthBenchmark

                loaded = SynthBenchmark().load(
                    version=f"n{self.cfg.synth_n}-seed{self.cfg.synth_seed}"
                )
                f.add(clips_from_samples(loaded.samples))
            elif self.cfg.source == "clips":
                if not self.cfg.clips:
                    raise ValueError("recipe data.source is clips but data.clips names no file")
                f.add(read_clips(self.cfg.clips))
            else:
                raise ValueError(f"recipe data.source {self.cfg.source!r}: use synth or clips")
        clips = list(f.rows.values())
        self._report("clips", clips=len(clips))
        return clips

    def stage_captions(self, clips: list[dict[str, Any]]) -> list[dict[str, Any]]:
        f = self.files["captions"]
        todo = [c for c in clips if c["id"] not in f.rows]
        if todo:
            if self._rule():
                caps = [c.get("caption") or rules.caption_from_events(c["events"]) for c in todo]
                f.add(
                    [
                        {**c, "caption": cap, "failed": cap is None}
                        for c, cap in zip(todo, caps, strict=True)
                    ]
                )
            else:
                fresh = run_calls([self.captioner.caption(c) for c in todo if not c.get("caption")])
                it = iter(fresh)
                rows = []
                for c in todo:
                    if c.get("caption"):
                        rows.append({**c, "failed": False})
                        continue
                    got = next(it)
                    row = {**c, "caption": got["caption"] if got else None, "failed": got is None}
                    if got and got["events"] and not c.get("events"):
                        # the captioner's events, with their spans: the review judge's
                        # ground-truth annotations for clips that came without any
                        row["events"] = got["events"]
                        row["events_source"] = "captioner"
                    rows.append(row)
                f.add(rows)
        rows = [f.rows[c["id"]] for c in clips]
        ok = [r for r in rows if not r["failed"]]
        self._report("captions", clips=len(rows), captioned=len(ok), failed=len(rows) - len(ok))
        return ok

    def stage_questions(self, clips: list[dict[str, Any]]) -> list[dict[str, Any]]:
        f = self.files["questions"]
        pool = _label_pool(clips)
        pairs = [
            (c, d) for c in clips for d in self.cfg.dimensions if f"{c['id']}-{d}" not in f.rows
        ]
        if pairs:
            if self._rule():
                got = [rules.write_question(c, d, pool) for c, d in pairs]
                got = [q if q is not None else {"not_suitable": True} for q in got]
            else:
                got = run_calls([self.llm.question(c, d) for c, d in pairs])
            rows = []
            for (c, d), q in zip(pairs, got, strict=True):
                row = {"id": f"{c['id']}-{d}", "clip": c["id"], "dimension": d}
                if q is None:
                    row["status"] = "failed"
                elif q.get("not_suitable"):
                    row["status"] = "not_suitable"
                else:
                    row.update(q, status="ok", answer_text=_letter_to_text(q))
                rows.append(row)
            f.add(rows)
        ids = {c["id"] for c in clips}
        rows = [r for r in f.rows.values() if r["clip"] in ids]
        ok = [r for r in rows if r["status"] == "ok"]
        self._report(
            "questions",
            asked=len(rows),
            written=len(ok),
            not_suitable=sum(r["status"] == "not_suitable" for r in rows),
            failed=sum(r["status"] == "failed" for r in rows),
        )
        return ok

    def stage_question_filter(self, clips, questions) -> list[dict[str, Any]]:
        f = self.files["question_filter"]
        by_clip = {c["id"]: c for c in clips}
        todo = [q for q in questions if q["id"] not in f.rows]
        if todo:
            if self._rule():
                got = [rules.score_question(by_clip[q["clip"]], q) for q in todo]
            else:
                got = run_calls([self.llm.question_filter(by_clip[q["clip"]], q) for q in todo])
            f.add(
                [
                    {"id": q["id"], **(v or {"score": 0, "failed": True})}
                    for q, v in zip(todo, got, strict=True)
                ]
            )
        kept = [q for q in questions if f.rows[q["id"]]["score"] >= self.cfg.question_min_score]
        self._report("question_filter", scored=len(questions), kept=len(kept))
        return kept

    def stage_difficulty(self, clips, questions) -> list[dict[str, Any]]:
        f = self.files["difficulty"]
        by_clip = {c["id"]: c for c in clips}
        todo = [q for q in questions if q["id"] not in f.rows]
        if todo:
            answer = self._answerer or harness_answerer(
                self.cfg.difficulty_model,
                self.cfg.difficulty_checkpoint,
                cards=self.cfg.difficulty_cards,
                options=self.cfg.difficulty_options,
                n=self.cfg.difficulty_n,
                generation=self.cfg.difficulty_generation,
            )
            samples = [self._sample(q, by_clip[q["clip"]]) for q in todo]
            outcomes = answer(samples)
            f.add([{"id": q["id"], "outcomes": outcomes[q["id"]]} for q in todo])
        kept, always, never = [], 0, 0
        for q in questions:
            o = f.rows[q["id"]]["outcomes"]
            if keep_by_difficulty(o):
                kept.append(q)
            elif all(o):
                always += 1
            else:
                never += 1
        self._report(
            "difficulty",
            answered=len(questions),
            kept=len(kept),
            always_right=always,
            always_wrong=never,
        )
        return kept

    @staticmethod
    def _sample(q: dict[str, Any], clip: dict[str, Any]) -> Sample:
        return Sample(
            id=q["id"],
            bench="mpar2-data",
            version="pipeline",
            question=q["question"],
            choices=list(q["choices"]),
            answer=q["answer_text"],
            audio=[clip["audio"]],
            meta={"dimension": q["dimension"]},
            caption=clip["caption"],
            events=[Event.from_dict(e) for e in clip["events"]],
        )

    def stage_pools(self, questions, clips=()) -> tuple[list[dict], list[dict]]:
        """SFT pool balanced over dimensions x duration bins (balanced_pick; ids in order within
        a cell, for determinism); everything else feeds RL."""
        f = self.files["pools"]
        if any(q["id"] not in f.rows for q in questions):
            cell = duration_cells(questions, clips, self.cfg.duration_bins)
            by_cell: dict[tuple[str, int], list[dict]] = defaultdict(list)
            for q in sorted(questions, key=lambda q: q["id"]):
                by_cell[(q["dimension"], cell.get(q["id"], 0))].append(q)
            sft = balanced_pick(by_cell, self.cfg.sft_size)
            chosen = set(sft)
            f.add(
                [
                    {"id": q["id"], "pool": "sft" if q["id"] in chosen else "rl"}
                    for q in questions
                    if q["id"] not in f.rows
                ]
            )
        sft_q = [q for q in questions if f.rows[q["id"]]["pool"] == "sft"]
        rl_q = [q for q in questions if f.rows[q["id"]]["pool"] == "rl"]
        per_dim = defaultdict(int)
        for q in sft_q:
            per_dim[q["dimension"]] += 1
        per_bin: dict[str, int] = {}
        if self.cfg.duration_bins > 1:
            cell = duration_cells(questions, clips, self.cfg.duration_bins)
            for q in sft_q:
                key = f"sft_duration{cell.get(q['id'], 0)}"
                per_bin[key] = per_bin.get(key, 0) + 1
        self._report(
            "pools",
            sft=len(sft_q),
            rl=len(rl_q),
            **{f"sft_{k}": v for k, v in sorted(per_dim.items())},
            **dict(sorted(per_bin.items())),
        )
        return sft_q, rl_q

    def stage_cot(self, clips, questions) -> list[dict[str, Any]]:
        f = self.files["cot"]
        by_clip = {c["id"]: c for c in clips}
        todo = [q for q in questions if q["id"] not in f.rows]
        if todo:
            if self._rule():
                got = [rules.write_cot(by_clip[q["clip"]], q, self.cfg.cot_style) for q in todo]
            else:
                got = run_calls([self.llm.cot(by_clip[q["clip"]], q) for q in todo])
            f.add([{"id": q["id"], "cot": c} for q, c in zip(todo, got, strict=True)])
        out = [{**q, "cot": f.rows[q["id"]]["cot"]} for q in questions if f.rows[q["id"]]["cot"]]
        self._report(
            "cot", asked=len(questions), written=len(out), failed=len(questions) - len(out)
        )
        return out

    def stage_cot_filter(self, clips, questions) -> list[dict[str, Any]]:
        from cafe.parsing import parse_sections

        f = self.files["cot_filter"]
        by_clip = {c["id"]: c for c in clips}
        todo = [q for q in questions if q["id"] not in f.rows]
        if todo:
            if self._rule():
                got = [self._rule_cot_scores(by_clip[q["clip"]], q) for q in todo]
            else:
                got = run_calls(
                    [self.llm.cot_filter(by_clip[q["clip"]], q, q["cot"]) for q in todo]
                )
            f.add(
                [
                    {"id": q["id"], **(v or {"ReasoningScore": 0, "ReviewScore": 0})}
                    for q, v in zip(todo, got, strict=True)
                ]
            )
        kept = []
        for q in questions:
            v = f.rows[q["id"]]
            fmt = parse_sections(q["cot"]).format_ok
            if (
                fmt
                and v["ReasoningScore"] >= self.cfg.cot_min_reasoning
                and v["ReviewScore"] >= self.cfg.cot_min_review
            ):
                kept.append(q)
        self._report("cot_filter", scored=len(questions), kept=len(kept))
        return kept

    @staticmethod
    def _rule_cot_scores(clip: dict[str, Any], q: dict[str, Any]) -> dict[str, float]:
        """0-10 scores from the offline reward judge (perception + steps; review)."""
        from cafe.parsing import parse_sections
        from cafe.training.reward_judge import OfflineRewardJudge, RewardItem, score_group

        s = parse_sections(q["cot"])
        item = RewardItem(s, True, q["question"], q["answer_text"], clip["caption"], clip["events"])
        sc = run_calls([score_group(OfflineRewardJudge(), [item])])[0][0]
        parts = [sc.perception or 0.0, *(sc.steps or [0.0])]
        return {
            "ReasoningScore": round(10 * sum(parts) / len(parts), 1),
            "ReviewScore": round(10 * (sc.review or 0.0), 1),
        }

    def write(self, clips, sft_q, rl_q) -> dict[str, Path]:
        from cafe.training.data.formats import rl_row, sft_row

        by_clip = {c["id"]: c for c in clips}
        out = {"sft": self.cfg.workdir / "sft.jsonl", "rl": self.cfg.workdir / "rl.jsonl"}
        for name, rows in (
            ("sft", [sft_row(q, by_clip[q["clip"]]) for q in sft_q]),
            ("rl", [rl_row(q, by_clip[q["clip"]]) for q in rl_q]),
        ):
            tmp = out[name].with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
            tmp.replace(out[name])
        self._report("write", sft=len(sft_q), rl=len(rl_q))
        return out

    def run(self) -> dict[str, Path]:
        clips = self.stage_captions(self.stage_clips())
        questions = self.stage_questions(clips)
        questions = self.stage_question_filter(clips, questions)
        questions = self.stage_difficulty(clips, questions)
        sft_pool, rl_pool = self.stage_pools(questions, clips)
        sft = self.stage_cot_filter(clips, self.stage_cot(clips, sft_pool))
        return self.write(clips, sft, rl_pool)


def balanced_pick(cells: dict[tuple[str, int], list[dict]], size: int) -> list[str]:
    """Up to ``size`` ids from (dimension, duration bin) cells: each pick comes from the
    non-empty cell whose dimension and bin have been picked least (their counts summed; ties in
    cell order). With one bin this is a round robin over the dimensions."""
    queues = {k: list(v) for k, v in sorted(cells.items())}
    dims: dict[str, int] = defaultdict(int)
    bins: dict[int, int] = defaultdict(int)
    out: list[str] = []
    while len(out) < size:
        open_cells = [k for k, v in queues.items() if v]
        if not open_cells:
            break
        k = min(open_cells, key=lambda c: dims[c[0]] + bins[c[1]])
        out.append(queues[k].pop(0)["id"])
        dims[k[0]] += 1
        bins[k[1]] += 1
    return out


def clip_seconds(clip: dict[str, Any]) -> float:
    """A clip's length from its audio header (0 when unreadable: the difficulty stage has
    already reported such clips)."""
    from cafe.audio import audio_info
    from cafe.records import InputError

    try:
        info = audio_info(clip["audio"], sample_id=clip.get("id"))
    except InputError:
        return 0.0
    return info.frames / info.samplerate if info.samplerate else 0.0


def duration_cells(questions, clips, bins: int) -> dict[str, int]:
    """Question id -> its clip's duration bin: the candidates' distinct clip lengths split in
    ``bins`` runs of about equally many, shortest first (clips of one length share a bin);
    {} (every question in bin 0) when bins is 1."""
    if bins <= 1 or not questions:
        return {}
    by_clip = {c["id"]: c for c in clips}
    secs = {q["id"]: clip_seconds(by_clip[q["clip"]]) if q["clip"] in by_clip else 0.0
            for q in questions}  # fmt: skip
    ordered = sorted(set(secs.values()))
    # the bin edge after every len/bins-th distinct length, so bins hold about as many lengths
    rank = {v: min(bins - 1, i * bins // len(ordered)) for i, v in enumerate(ordered)}
    return {qid: rank[v] for qid, v in secs.items()}


_LLM_STAGES = {"captions", "questions", "question_filter", "cot", "cot_filter"}


def run_pipeline(
    recipe: dict[str, Any],
    *,
    workdir: str | Path | None = None,
    answerer: Answerer | None = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Path]:
    cfg = DataConfig.from_recipe(recipe, workdir)
    return Pipeline(cfg, answerer=answerer, echo=echo, recipe=recipe).run()

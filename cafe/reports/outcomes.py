"""Each (item, run) of a run folder, scored again from its records: what `cafe compare` pairs and
`cafe explain` replays. The scoring is the accuracy section's own (cafe.benchmarks.scoring: the
benchmark's rule on the answer text, its choice rule on the mapped answer), so a figure rebuilt
from these outcomes is the folder's figure, and the same outcomes can be re-scored against
another answer key (another benchmark version) or counted under another protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.records import Judgement, Prediction, Sample

Key = tuple[str, int]  # (sample id, run index)


@dataclass(frozen=True)
class Outcome:
    """One (item, run) under the folder's answer key."""

    official: bool  # the benchmark's rule on the answer text (the headline)
    lenient: bool  # the choice rule on the answer mapped to a choice
    answered: bool  # there is an answer text for the rule to read
    failed: bool  # the output errored or is missing


@dataclass
class RunOutcomes:
    root: Path
    manifest: dict[str, Any]
    metrics: dict[str, Any]
    samples: dict[str, Sample]  # scorable items (with an answer), by id
    runs: list[int]  # the run indices the folder covers (missing outputs included)
    predictions: dict[Key, Prediction]
    judgements: dict[Key, Judgement]  # status ok only
    units: dict[Key, Outcome] = field(default_factory=dict)

    @classmethod
    def load(cls, run_dir: str | Path) -> RunOutcomes:
        from cafe.reports.freshness import current_metrics
        from cafe.store import RunStore

        store = RunStore(run_dir)
        manifest = store.read_manifest()
        samples = {s.id: s for s in store.samples() if s.answer is not None and s.error is None}
        preds = {(p.sample_id, p.run_index): p for p in store.predictions()}
        runs = manifest.get("runs")
        declared = range(runs) if isinstance(runs, int) and not isinstance(runs, bool) else ()
        run_ids = sorted({k[1] for k in preds} | set(declared)) or [0]
        judged = {(j.sample_id, j.run_index): j for j in store.judgements() if j.status == "ok"}
        out = cls(store.root, manifest, current_metrics(store).metrics, samples, run_ids, preds,
                  judged)  # fmt: skip
        out.units = out.scored(samples)
        return out

    @property
    def bench(self) -> tuple[str, str]:
        from cafe.reports.leaderboard import _bench_of

        return _bench_of(self.manifest)

    @property
    def title(self) -> str:
        m = self.manifest.get("model") or {}
        name = (m.get("name") if isinstance(m, dict) else m) or self.root.name
        return f"{name} ({self.root.name})"

    def benchmark(self) -> Any:
        from cafe.benchmarks.base import benchmark_class

        return benchmark_class(self.bench[0])()

    def scored(self, key: dict[str, Sample]) -> dict[Key, Outcome]:
        """This folder's outputs scored against the answer key ``key`` (its own, or another
        version's), for every (item, run) of the items both hold."""
        from cafe.benchmarks.scoring import PARSE_STATUSES, _score_pair

        bench = self.benchmark()
        status = dict.fromkeys(PARSE_STATUSES, 0)
        out = {}
        for sid in sorted(set(self.samples) & set(key)):
            s = key[sid]
            for r in self.runs:
                p = self.predictions.get((sid, r))
                ok, lenient, answered, _ = _score_pair(
                    s, p, bench.is_correct, bench.choice_is_correct, status
                )
                out[(sid, r)] = Outcome(ok, lenient, answered, p is None or p.error is not None)
        return out

    def breakdown_values(self) -> dict[str, dict[str, list[str]]]:
        """breakdown -> value -> item ids, by the benchmark's own breakdowns."""
        out: dict[str, dict[str, list[str]]] = {}
        for name, fn in self.benchmark().breakdowns.items():
            for sid, s in sorted(self.samples.items()):
                v = fn(s)
                for x in v if isinstance(v, (list, tuple, set)) else [v]:
                    out.setdefault(name, {}).setdefault("none" if x is None else str(x), [])
                    out[name]["none" if x is None else str(x)].append(sid)
        return {n: v for n, v in out.items() if set(v) != {"none"}}  # no meta: no breakdown

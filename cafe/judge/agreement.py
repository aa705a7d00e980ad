"""`cafe judge-agreement RUN_DIR --judges A B`: the judgement sets of two judges in a run folder
compared (cafe.metrics.agreement: alignment, Cohen's kappa, the CAFE metric deltas B - A)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cafe.errors import CafeUsageError
from cafe.metrics.agreement import agreement
from cafe.records import Judgement
from cafe.store import JUDGE_RECORDS, judge_slug, latest_records


def resolve(run_dir: Path, name: str) -> Path:
    """A judgement set by file path, by judge identity or slug, or by unique prefix."""
    prefix = JUDGE_RECORDS["cafe"]
    if Path(name).is_file():
        return Path(name)
    for cand in (run_dir / f"{prefix}.{n}.jsonl" for n in (name, judge_slug(name))):
        if cand.is_file():
            return cand
    hits = sorted(run_dir.glob(f"{prefix}.{judge_slug(name)}*.jsonl"))
    if len(hits) == 1:
        return hits[0]
    known = sorted(
        p.name[len(prefix) + 1 : -len(".jsonl")] for p in run_dir.glob(f"{prefix}.*.jsonl")
    )
    raise CafeUsageError(
        f"{run_dir}: no judgement set {name!r}; known: {', '.join(known) or 'none'} "
        "(or give a judgements file path)"
    )


def judge_agreement(run_dir: str | Path, a: str, b: str, mode: str = "micro") -> dict[str, Any]:
    """Two judges compared on one run (``a``, ``b``: judge names or judgement files, resolve)."""
    root = Path(run_dir)
    pa, pb = resolve(root, a), resolve(root, b)
    res = agreement(latest_records(pa, Judgement), latest_records(pb, Judgement), mode)
    res["a"], res["b"] = pa.name, pb.name
    return res

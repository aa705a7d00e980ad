"""`cafe leaderboard verify`: every row added from a run is recomputed from its folder.

A row added by `leaderboard add` holds the digests of what it was computed from (``digests``:
the samples the run was scored against, its predictions and judgements as metrics read them,
the manifest's spec, the benchmark data's sha256 and cafe's version). Verify scores the
folder's records again (accuracy from samples + predictions by the benchmark's rule; the other
figures from the sections of metrics.json that still describe the records) and says for each
row: verified, changed (which figure, row and folder value, by how much; or which input), or
folder missing. The paper's rows are published figures: nothing to recompute.

The outcome is kept beside the file (``<file>.verified.json``) so `leaderboard html` can mark
the rows verified, with the time they were checked."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cafe.reports.leaderboard import run_digests

TOLERANCE = 0.005  # rows hold two decimals
RECORDS = ("samples", "predictions", "judgements")


@dataclass
class Verdict:
    index: int
    model: str
    status: str  # verified | changed | missing | published
    changes: list[str] = field(default_factory=list)
    run_dir: str | None = None
    manifest_sha256: str | None = None

    @property
    def line(self) -> str:
        head = f"rows[{self.index}] {self.model}: {self.status}"
        if self.status == "missing":
            return f"{head} (no run folder at {self.run_dir})"
        return head + (": " + "; ".join(self.changes) if self.changes else "")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def recompute(run_dir: str | Path, row: Any) -> tuple[dict[str, float | None], list[str]]:
    """The row's figures computed again from the folder -> (figures, notes on sections that
    could not be used)."""
    from cafe.benchmarks.base import benchmark_class
    from cafe.benchmarks.scoring import bench_accuracy
    from cafe.reports.freshness import current_metrics
    from cafe.reports.leaderboard import _official_acc, _row_metrics
    from cafe.store import RunStore

    store = RunStore(run_dir)
    manifest = store.read_manifest()
    fresh = current_metrics(store)
    notes = [f"section {k} is stale ({why})" for k, why in sorted(fresh.stale.items())]
    doc = dict(fresh.metrics)
    bench = benchmark_class(row.benchmark)()
    acc = bench_accuracy(bench, store.samples(), store.predictions(), manifest.get("runs"))
    judged = doc.get("judged_accuracy") or {}
    if "†" in row.markers:  # the row's accuracy is the judge's: as recorded, if still fresh
        acc = {**acc, "total": judged.get("total"), "breakdowns": judged.get("breakdowns") or {}}
        acc.pop("ci95", None)
    elif doc.get("official"):
        acc = _official_acc(acc, doc["official"], {})
    figures, _ = _row_metrics(acc, doc.get("cafe") or {}, doc, row.benchmark)
    return figures, notes


def verify_row(row: Any) -> Verdict:
    from cafe.errors import CafeError
    from cafe.store import MANIFEST, RunStore

    if row.is_paper:
        return Verdict(row.index, row.display, "published")
    folder = str(row.folder)
    store = RunStore(folder)
    out = Verdict(row.index, row.display, "verified", run_dir=folder)
    if not store.has_manifest():
        out.status = "missing"
        return out
    out.manifest_sha256 = _sha256(store.path(MANIFEST).read_bytes())
    try:
        now, notes = recompute(folder, row)
    except (CafeError, OSError, ValueError) as e:
        out.status, out.changes = "changed", [f"cannot recompute: {str(e).splitlines()[0]}"]
        return out
    for key, value in row.metrics.items():
        if value is None:
            continue
        got = now.get(key)
        if got is None:
            why = "; ".join(notes) or "the folder has no such figure"
            out.changes.append(f"{key}: row {value:.2f}, folder none ({why})")
        elif abs(got - value) > TOLERANCE:
            out.changes.append(f"{key}: row {value:.2f}, folder {got:.2f} ({got - value:+.2f})")
    recorded = row.source.get("digests") or {}
    current = run_digests(store, store.read_manifest()) if recorded else {}
    for name in (*RECORDS, "spec", "bench_data"):
        if name in recorded and recorded[name] != current.get(name):
            out.changes.append(f"{name} differ from those the row was computed from")
    out.changes += _benchmark_file(store.read_manifest(), recorded.get("bench_data"))
    if out.changes:
        out.status = "changed"
    return out


def _benchmark_file(manifest: dict[str, Any], recorded: str | None) -> list[str]:
    """The benchmark's metadata file, where it is still at the path the run read it from,
    hashed again against the sha256 the row was computed with."""
    bench = manifest.get("bench") if isinstance(manifest.get("bench"), dict) else {}
    source = Path(str((bench or {}).get("source") or ""))
    if not recorded or not source.name or not source.is_file():
        return []
    if _sha256(source.read_bytes()) == recorded:
        return []
    return [f"benchmark data {source} differs from the sha256 the row was computed with"]


def record_path(board_path: Path) -> Path:
    return board_path.with_name(board_path.name + ".verified.json")


def verify(
    path: str | Path | None = None, *, record: bool = True, now: _dt.datetime | None = None
) -> list[Verdict]:
    """Every row of the leaderboard file: published (paper), verified, changed or missing. The
    outcomes of run rows are kept in ``<file>.verified.json`` (``record``), with the time."""
    from cafe.reports.leaderboard import PACKAGE_DIR, load_leaderboard

    board = load_leaderboard(path)
    verdicts = [verify_row(r) for r in board.rows]
    runs = [v for v in verdicts if v.status != "published"]
    if record and runs and not board.path.resolve().is_relative_to(PACKAGE_DIR):
        from cafe.safe_files import replace_file

        when = (now or _dt.datetime.now(_dt.timezone.utc)).isoformat(timespec="seconds")
        doc = {"leaderboard": str(board.path), "checked": when,
               "rows": {str(v.index): {**asdict(v), "checked": when} for v in runs}}  # fmt: skip
        text = json.dumps(doc, indent=2) + "\n"
        replace_file(record_path(board.path), lambda f: f.write(text))
    return verdicts


def checked(board: Any) -> dict[int, dict[str, Any]]:
    """Row index -> its last verify outcome, where it still describes the row (same folder
    manifest); for `leaderboard html`."""
    p = record_path(Path(board.path))
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        rows = doc.get("rows") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    for r in board.rows:
        got = rows.get(str(r.index)) if isinstance(rows, dict) else None
        if isinstance(got, dict) and got.get("manifest_sha256") == r.source.get("manifest_sha256"):
            out[r.index] = got
    return out

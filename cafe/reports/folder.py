"""`cafe report runs/`: one table over the run folders inside a folder (the lmms-eval habit of
looking at a results directory): model, benchmark, coverage, accuracy, CAFE and status per run;
a missing value is "–", a partial run is marked ◐ with its coverage."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from cafe.folder.status import run_failed
from cafe.reports.cells import csv_cell, md_cell
from cafe.reports.tables import PARTIAL, tex_escape
from cafe.store import MANIFEST, RunStore

COLUMNS = ("run", "model", "benchmark", "version", "items", "runs", "accuracy", "Acc_per",
           "Err_per", "Err_use", "Err_omit", "status")  # fmt: skip
MISSING = "–"


def run_folders(root: str | Path) -> list[Path]:
    """The run folders directly inside ``root`` (those with a manifest.json), by name."""
    return sorted(p.parent for p in Path(root).glob(f"*/{MANIFEST}"))


def _stale(store: RunStore, metrics: dict[str, Any]) -> dict[str, str]:
    """The sections of ``metrics`` that are stale (cafe.reports.freshness)."""
    if not metrics:
        return {}
    from cafe.reports.freshness import current_metrics

    try:
        return current_metrics(store).stale
    except (OSError, ValueError):  # unreadable records: every section is suspect
        return dict.fromkeys(metrics, "its records cannot be read")


def _num(v: Any) -> str:
    return MISSING if not isinstance(v, (int, float)) or isinstance(v, bool) else f"{v:.2f}"


def run_line(run: Path) -> list[str]:
    """One run's cells; a damaged manifest or metrics.json (a count that is not one, a file
    that is no JSON object) is the run's status, naming the file."""
    from cafe.errors import RunFolderError

    try:
        return _run_line(run)
    except RunFolderError as e:
        return [run.name, *[MISSING] * (len(COLUMNS) - 2), f"damaged: {e}"]


def _run_line(run: Path) -> list[str]:
    from cafe.reports.leaderboard import run_coverage
    from cafe.reports.names import model_name

    store = RunStore(run)  # read through the store, as every reader of a run folder does
    manifest, metrics = store.read_manifest(), store.read_metrics()
    stale = _stale(store, metrics)  # a section computed on other records shows no figure
    metrics = {k: v for k, v in metrics.items() if k not in stale}
    bench = manifest.get("bench") if isinstance(manifest.get("bench"), dict) else {}
    model = model_name(manifest)
    cov = run_coverage(manifest, run / MANIFEST)
    n = bench.get("n_samples")
    items = MISSING if n is None else str(n)
    if cov:
        items = f"{PARTIAL} {cov['items']} of {cov['of'] or '?'}"
    status = str(manifest.get("status") or MISSING)
    if manifest.get("status_reason"):  # the counts that decided it
        status += f" ({manifest['status_reason']})"
    if stale:
        status += f"; stale: {', '.join(sorted(stale))} (its records changed since)"
    if run_failed(manifest):  # nothing usable: its figures are absent, never 0.00
        metrics = {}
    total = (metrics.get("accuracy") or {}).get("total") or {}
    cafe = metrics.get("cafe") or {}
    return [
        run.name, str(model or MISSING), str(bench.get("name") or MISSING),
        str(bench.get("version") or MISSING), items, str(manifest.get("runs") or MISSING),
        _num(total.get("acc")), *(_num(cafe.get(k)) for k in ("acc_per", "err_per", "err_use",
                                                               "err_omit")),
        status,
    ]  # fmt: skip


def folder_table(root: str | Path, fmt: str = "md") -> str:
    runs = run_folders(root)
    rows = [run_line(r) for r in runs]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(COLUMNS)
        w.writerows([csv_cell(c) for c in r] for r in rows)
        return buf.getvalue()
    if fmt == "tex":
        # a model name is user text: every LaTeX special escaped, a line break (a blank line
        # would end the tabular's paragraph) a space
        body = [" & ".join(tex_escape(c) for c in COLUMNS) + r" \\ \midrule"]
        body += [" & ".join(tex_escape(" ".join(c.split())) for c in r) + r" \\" for r in rows]
        return (
            "\\begin{tabular}{"
            + "l" * len(COLUMNS)
            + "}\n\\toprule\n"
            + "\n".join(body)
            + "\n\\bottomrule\n\\end{tabular}\n"
        )
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    lines.append(f"\n{len(rows)} run folders in {Path(root)}"
                 + (f"; {PARTIAL} partial run (--limit): items run of items in the benchmark"
                    if any(r[4].startswith(PARTIAL) for r in rows) else ""))  # fmt: skip
    from cafe.reports.robustness import folder_lines  # circular accuracy, necessity, sweeps

    return "\n".join(lines) + "\n" + folder_lines(root, runs)

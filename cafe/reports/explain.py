"""`cafe explain RUN --against RUN_OR_ROW`: why two accuracy figures differ, as the protocol
differences cafe can replay from the folders, one at a time, in a fixed order:

1. items in common        the items only one side holds left out (both ends of the path)
2. benchmark version      RUN's outputs scored against the other side's answer key
3. failed items           outputs that errored or are missing: counted wrong, or dropped
4. denominator            every item, or only those with an answer text (unparsed dropped)
5. scoring rule           the benchmark's rule on the answer text (official), or on the answer
                          mapped to a choice (lenient)
6. runs aggregation       how many runs, pooled over (item, run) or the mean of per-run figures
7. the model's outputs    what remains: RUN's outputs against the other side's, same protocol

Each step is the change of RUN's figure when that one setting takes the other side's value (the
settings before it already changed), so the steps add up to the whole gap exactly. Each has a
paired bootstrap interval: the same resampled items move every figure of the path. Against a
leaderboard row without a folder, only what the row records is replayed (the other side's
protocol applied to RUN); items, version and outputs stay one unexplained remainder, said so.

A side's protocol is its headline figure's: official rule, failed counted, every item, pooled
over runs (what `cafe run` prints and `leaderboard add` stores); ``protocol`` /
``against_protocol`` set another ("rule=lenient,denominator=answered,failed=dropped,runs=mean")."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from cafe.errors import CafeError
from cafe.reports.outcomes import Key, Outcome, RunOutcomes

CHOICES = {
    "rule": ("official", "lenient", "judged"),
    "failed": ("counted", "dropped"),
    "denominator": ("every", "answered"),
    "runs": ("pooled", "mean"),
}
STEPS = (
    ("items", "items in common"),
    ("version", "benchmark version"),
    ("failed", "failed items"),
    ("denominator", "denominator"),
    ("rule", "scoring rule"),
    ("runs", "runs aggregation"),
    ("outputs", "the model's outputs"),
)


class ExplainError(CafeError):
    """A gap that cannot be explained as asked; the message says what to give instead."""


@dataclass(frozen=True)
class Protocol:
    rule: str = "official"
    failed: str = "counted"
    denominator: str = "every"
    runs: str = "pooled"
    n_runs: int | None = None  # the first n runs (None: every run)

    @classmethod
    def parse(cls, text: str | None, where: str = "--protocol") -> Protocol:
        """``key=value,…`` over rule / failed / denominator / runs / n_runs."""
        out = cls()
        for part in filter(None, (text or "").split(",")):
            key, _, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if key == "n_runs" and value.isdigit() and int(value) > 0:
                out = replace(out, n_runs=int(value))
            elif key in CHOICES and value in CHOICES[key]:
                out = replace(out, **{key: value})
            else:
                allowed = "; ".join(f"{k}={'|'.join(v)}" for k, v in CHOICES.items())
                raise ExplainError(f"{where}: {part!r} is not a setting ({allowed}; n_runs=N)")
        return out


# figures over items ---------------------------------------------------------------------------
def _arrays(
    units: dict[Key, Outcome], items: list[str], runs: list[int], p: Protocol
) -> tuple[np.ndarray, np.ndarray]:
    """(correct, counted) per (item in ``items`` order, run) under protocol ``p``; an item the
    side does not hold, or a run past ``p.n_runs``, counts nothing."""
    runs = runs[: p.n_runs] if p.n_runs else runs
    col = {r: j for j, r in enumerate(runs)}
    num, den = np.zeros((len(items), len(runs))), np.zeros((len(items), len(runs)))
    for i, sid in enumerate(items):
        for r, j in col.items():
            o = units.get((sid, r))
            if o is None or (o.failed and p.failed == "dropped"):
                continue
            if not o.failed and not o.answered and p.denominator == "answered":
                continue
            den[i, j] = 1
            num[i, j] = o.lenient if p.rule == "lenient" else o.official
    return num, den


def _figure(num: np.ndarray, den: np.ndarray, p: Protocol, idx: np.ndarray) -> np.ndarray:
    """The figure for each row of the item index matrix ``idx`` (NaN where nothing counts)."""
    n, d = num[idx].sum(axis=1), den[idx].sum(axis=1)  # (resamples, runs)
    with np.errstate(invalid="ignore", divide="ignore"):
        if p.runs == "mean":
            per = np.where(d > 0, 100.0 * n / np.where(d > 0, d, 1), np.nan)
            out = np.full(len(per), np.nan)
            ok = ~np.all(np.isnan(per), axis=1)
            out[ok] = np.nanmean(per[ok], axis=1)
            return out
        return np.where(d.sum(axis=1) > 0, 100.0 * n.sum(axis=1) / d.sum(axis=1), np.nan)


@dataclass
class Stage:
    """One figure on the path: arrays over the union of items and the protocol they count by."""

    num: np.ndarray
    den: np.ndarray
    protocol: Protocol

    def value(self, idx: np.ndarray) -> np.ndarray:
        return _figure(self.num, self.den, self.protocol, idx)


def _stage(
    units: dict[Key, Outcome], items: list[str], keep: set[str], runs: list[int], p: Protocol
) -> Stage:
    kept = {k: o for k, o in units.items() if k[0] in keep}
    return Stage(*_arrays(kept, items, runs, p), p)


# the path --------------------------------------------------------------------------------------
@dataclass
class Against:
    """What the gap is measured against: a run folder, or a leaderboard row's figure."""

    label: str
    protocol: Protocol
    run: RunOutcomes | None = None
    figure: float | None = None  # a row without a folder: its recorded accuracy
    version: str | None = None
    notes: tuple[str, ...] = ()


def _steps_between(ours: RunOutcomes, p_ours: Protocol, other: Against) -> list[tuple[str, Stage]]:
    """The figures of the path from RUN's figure to the other side's, in STEPS order; each
    (step, the figure after it)."""
    theirs = other.run
    mine = set(ours.samples)
    common = mine & set(theirs.samples) if theirs else mine
    items = sorted(mine | (set(theirs.samples) if theirs else set()))
    p_other = other.protocol
    n_other = p_other.n_runs or (len(theirs.runs) if theirs else None)
    path: list[tuple[str, Stage]] = [("start", _stage(ours.units, items, mine, ours.runs, p_ours))]
    units = ours.units
    if theirs:
        path.append(("items", _stage(units, items, common, ours.runs, p_ours)))
        units = ours.scored(theirs.samples)  # RUN's outputs against the other answer key
        path.append(("version", _stage(units, items, common, ours.runs, p_ours)))
    p = p_ours
    for name in ("failed", "denominator", "rule"):
        if name == "rule" and p_other.rule == "judged":
            continue  # no per-item verdicts to replay: part of the remainder
        p = replace(p, **{name: getattr(p_other, name)})
        path.append((name, _stage(units, items, common, ours.runs, p)))
    n_runs = min(x for x in (n_other, len(ours.runs)) if x) if n_other else p.n_runs
    p = replace(p, runs=p_other.runs, n_runs=n_runs)
    path.append(("runs", _stage(units, items, common, ours.runs, p)))
    if theirs:
        path.append(("outputs", _stage(theirs.units, items, common, theirs.runs, p_other)))
        path.append(("end", _stage(theirs.units, items, set(theirs.samples), theirs.runs,
                                   p_other)))  # fmt: skip
    return path


def explain(
    run_dir: str | Path,
    against: str | Path,
    *,
    protocol: str | Protocol | None = None,
    against_protocol: str | Protocol | None = None,
    leaderboard: str | Path | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The gap RUN − AGAINST in accuracy, in STEPS order -> {"ours", "against", "total",
    "steps": [{"step", "label", "contribution", "ci95", "replayed", "note"}], "not_replayed",
    "protocols", "method"}. The contributions add up to ``total``."""
    from cafe.metrics.stats import bootstrap_ci

    ours = RunOutcomes.load(run_dir)
    p_ours = protocol if isinstance(protocol, Protocol) else Protocol.parse(protocol)
    other = resolve_against(ours, against, against_protocol, leaderboard)
    path = _steps_between(ours, p_ours, other)
    n = len(path[0][1].num)
    full = np.arange(n)[None, :]
    values = [float(stage.value(full)[0]) for _, stage in path]
    if other.run is None:  # a row's figure closes the path
        if other.figure is None:
            raise ExplainError(f"{other.label}: the row records no accuracy (acc) to explain")
        values.append(float(other.figure))
    if any(np.isnan(v) for v in values):
        raise ExplainError(f"{ours.root}: a figure on the path counts no item (nothing to divide)")
    recorded = other.figure if other.run is not None else None
    if recorded is not None and abs(recorded - values[-1]) > 0.005:  # said, never silent
        other.notes += (
            f"the row holds {recorded:.2f}, its folder replays to {values[-1]:.2f} (`cafe "
            "leaderboard verify` says why); the gap is to the folder's figure",
        )
    # a step's pairs of figures (before, after): the items step is both ends of the path
    pairs: dict[str, list[tuple[int, int]]] = {}
    for k in range(1, len(values)):
        name = path[k][0] if k < len(path) else "remainder"
        pairs.setdefault("items" if name == "end" else name, []).append((k - 1, k))
    steps: dict[str, dict[str, Any]] = {}
    for name, ks in pairs.items():
        delta = sum(values[i] - values[j] for i, j in ks)
        ci = None
        if name != "remainder":  # a row's figure has no items to resample

            def stat(idx: np.ndarray, ks: list[tuple[int, int]] = ks) -> np.ndarray:
                return sum(path[i][1].value(idx) - path[j][1].value(idx) for i, j in ks)

            ci = bootstrap_ci(n, stat, resamples=resamples, seed=seed)
        steps[name] = {"contribution": delta, "ci95": list(ci) if ci else None}
    return _result(ours, other, p_ours, steps, values, resamples, seed)


def _result(
    ours: RunOutcomes, other: Against, p_ours: Protocol, steps: dict[str, dict[str, Any]],
    values: list[float], resamples: int, seed: int,
) -> dict[str, Any]:  # fmt: skip
    rows, skipped = [], []
    for name, label in STEPS:
        got = steps.get(name)
        if got is None and name == "outputs" and "remainder" in steps:
            got = steps["remainder"]
            label = "remainder: items, version, outputs"
        if got is None:
            why = _why_not(name, other)
            skipped.append(f"{label}: {why}")
            rows.append({"step": name, "label": label, "contribution": None, "ci95": None,
                         "replayed": False, "note": why})  # fmt: skip
            continue
        rows.append({"step": name, "label": label, "contribution": got["contribution"],
                     "ci95": got["ci95"], "replayed": name != "outputs" or other.run is not None,
                     "note": None})  # fmt: skip
    total = values[0] - values[-1]
    return {
        "ours": ours.title,
        "ours_dir": str(ours.root),
        "against": other.label,
        "metric": "acc",
        "ours_figure": values[0],
        "against_figure": values[-1],
        "total": total,
        "steps": rows,
        "not_replayed": skipped,
        "notes": list(other.notes),
        "protocols": {"ours": asdict(p_ours), "against": asdict(other.protocol)},
        "method": f"each step: RUN's figure before minus after that setting takes the other "
        f"side's value; paired percentile bootstrap over items (the same items for every "
        f"figure), {resamples} resamples, seed {seed}",
    }


def _why_not(step: str, other: Against) -> str:
    if step == "rule" and other.protocol.rule == "judged":
        return "the other figure is judged by an LLM; its verdicts are not in a folder here"
    if step == "items":
        return "the row records no item list"
    if step == "version":
        return f"the row records its version ({other.version}) but no answer key"
    return "not recorded"


# the other side --------------------------------------------------------------------------------
def resolve_against(
    ours: RunOutcomes, against: str | Path, protocol: str | Protocol | None,
    leaderboard: str | Path | None,
) -> Against:  # fmt: skip
    """A run folder, or a leaderboard row: ``#N`` (its index in `leaderboard show`) or a model
    name (the row of RUN's benchmark, its version preferred)."""
    from cafe.store import RunStore

    def proto(default: Protocol) -> Protocol:
        if isinstance(protocol, Protocol):
            return protocol
        return Protocol.parse(protocol, "--against-protocol") if protocol else default

    if Path(against).is_dir() and RunStore(against).has_manifest():
        run = RunOutcomes.load(against)
        if run.bench[0] != ours.bench[0]:
            raise ExplainError(f"{ours.root} is {ours.bench[0]}, {run.root} is {run.bench[0]}: "
                               "explain a gap between runs of one benchmark")  # fmt: skip
        return Against(run.title, proto(Protocol()), run=run, version=run.bench[1])
    row = _row(ours, str(against), leaderboard)
    folder = row.folder
    judged = "†" in row.markers
    label = f"leaderboard row {row.index} ({row.display}, {row.benchmark}/{row.version})"
    if folder and not judged and RunStore(folder).has_manifest():
        run = RunOutcomes.load(folder)
        return Against(label, proto(Protocol()), run=run, figure=row.metrics.get("acc"),
                       version=row.version)  # fmt: skip
    notes = [] if not folder else [f"the row's folder {folder} is not here: the row only"]
    return Against(label, proto(_row_protocol(row)), figure=row.metrics.get("acc"),
                   version=row.version, notes=tuple(notes))  # fmt: skip


def _row_protocol(row: Any) -> Protocol:
    """What a row's accuracy was counted by, as far as it records: the paper's rows come from
    the official scripts (items without a prediction skipped), averaged over its runs."""
    rule = "judged" if "†" in row.markers else "official"
    if row.is_paper:
        from cafe.reports.protocol import paper_protocol

        runs = paper_protocol(row).get("runs")
        return Protocol(rule, "dropped", "every", "mean", runs if isinstance(runs, int) else None)
    runs = row.source.get("runs")
    return Protocol(rule, n_runs=runs if isinstance(runs, int) else None)


def _row(ours: RunOutcomes, against: str, leaderboard: str | Path | None) -> Any:
    from cafe.reports.leaderboard import load_leaderboard

    board = load_leaderboard(leaderboard)
    text = against.lstrip("#")
    if text.isdigit():
        if int(text) >= len(board.rows):
            raise ExplainError(f"{board.path}: no row {text} ({len(board.rows)} rows)")
        return board.rows[int(text)]
    bench, version = ours.bench
    rows = board.select(benchmark=bench, model=against)
    if not rows:
        names = sorted({r.display for r in board.select(benchmark=bench)})
        raise ExplainError(
            f"{against!r} is neither a run folder nor a {bench} row of {board.path}"
            + (f" (rows: {', '.join(names)})" if names else "")
        )
    same = [r for r in rows if r.version == version]
    return (same or rows)[-1]


# output ------------------------------------------------------------------------------------------
def format_explain(result: dict[str, Any]) -> str:
    lines = [
        f"{result['ours']} {result['ours_figure']:.2f} vs {result['against']} "
        f"{result['against_figure']:.2f}: gap {result['total']:+.2f} (accuracy, points)",
        f"  {'step':<42} {'contribution':>12} {'95% interval':>18}",
    ]
    for i, s in enumerate(result["steps"], 1):
        if s["contribution"] is None:
            lines.append(f"  {i}. {s['label']:<39} {'not replayed':>12}  ({s['note']})")
            continue
        ci = s["ci95"]
        lines.append(f"  {i}. {s['label'][:39]:<39} {s['contribution']:>+12.2f} "
                     f"{'-' if not ci else f'[{ci[0]:+.2f}, {ci[1]:+.2f}]':>18}")  # fmt: skip
    lines.append(f"  {'sum of the steps':<42} {sum_of_steps(result):>+12.2f}")
    lines += [f"  note: {n}" for n in result["notes"]]
    lines.append(f"method: {result['method']}")
    return "\n".join(lines) + "\n"


def sum_of_steps(result: dict[str, Any]) -> float:
    return float(sum(s["contribution"] or 0.0 for s in result["steps"]))


def markdown_table(result: dict[str, Any]) -> str:
    rows = ["| # | step | contribution | 95% interval |", "|---|---|---:|---|"]
    for i, s in enumerate(result["steps"], 1):
        c, ci = s["contribution"], s["ci95"]
        rows.append(f"| {i} | {s['label']} | {'not replayed' if c is None else f'{c:+.2f}'} | "
                    f"{'-' if not ci else f'[{ci[0]:+.2f}, {ci[1]:+.2f}]'} |")  # fmt: skip
    head = (f"{result['ours']} {result['ours_figure']:.2f} vs {result['against']} "
            f"{result['against_figure']:.2f}: gap {result['total']:+.2f}\n\n")  # fmt: skip
    return head + "\n".join(rows) + f"\n\n{result['method']}\n"


def draw_waterfall(result: dict[str, Any]) -> Any:
    """From RUN's figure down (or up) by each step to the other side's figure."""
    from cafe.plotting import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 2.6))
    labels, level = ["RUN"], result["ours_figure"]
    ax.bar(0, level, color="#1f77b4")
    for i, s in enumerate([s for s in result["steps"] if s["contribution"] is not None], 1):
        c = s["contribution"]
        ax.bar(i, -c, bottom=level, color="#d62728" if c > 0 else "#2ca02c")
        if s["ci95"]:
            lo, hi = s["ci95"]
            ax.errorbar(i, level - c, yerr=[[max(0.0, hi - c)], [max(0.0, c - lo)]],
                        color="black", capsize=2, linewidth=0.8)  # fmt: skip
        level -= c
        labels.append(s["label"].split(":")[0])
    ax.bar(len(labels), result["against_figure"], color="#7f7f7f")
    labels.append("against")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"gap {result['total']:+.2f} points, step by step")
    return fig


def write_explain(
    result: dict[str, Any], out: str | Path | None, figure: bool = True
) -> list[Path]:
    """explain.json, explain.md and (``figure``) the waterfall as PNG and PDF into ``out``
    (default RUN/report/explain, never through a link leading out of the run folder)."""
    import json

    from cafe.redaction import scrub_text
    from cafe.safe_files import replace_file

    root = Path(result["ours_dir"])
    folder = Path(out) if out else root / "report" / "explain"
    if not out:
        from cafe.safe_files import refuse_links_out

        refuse_links_out(root, folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (("explain.json", json.dumps(result, indent=2) + "\n"),
                       ("explain.md", markdown_table(result))):  # fmt: skip
        replace_file(folder / name, lambda f, t=scrub_text(text): f.write(t))
        written.append(folder / name)
    if figure:
        from cafe.plotting import save_figure

        written += save_figure(draw_waterfall(result), folder, "explain_waterfall")
    return written

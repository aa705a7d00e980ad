"""The paper's figures from run-folder data: Figure 3 (perception decay panels), Figure 5 (base vs
trained decay), Figure 6 (audio attention ratio), Figure 7 (reasoning length by task group) and
accuracy by breakdown. Each is written as PNG and PDF, sized for a 3.3 in paper column.

matplotlib is imported inside the functions (Agg backend), so metric and table code stays light."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cafe.plotting import pyplot, save_figure
from cafe.records import Prediction, Sample

COLUMN_IN = 3.3  # one paper column
PANEL_H_IN = 2.3
PERCEPTION_COLOR = "#1f77b4"
REASONING_COLOR = "#d62728"


def to_svg(fig: Any, name: str) -> str:
    """The figure as an inline <svg> element: text kept as text (crisp, searchable), element ids
    salted by ``name`` (unique per page) so several figures share one HTML page, no XML prolog."""
    import io

    import matplotlib
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    # the RDF metadata block (creator, date) is noise on a page and changes on every write
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", text[text.index("<svg") :], flags=re.S)
    return _scaled(svg, SCREEN_SCALE)


#: figures are drawn at print size (7 pt text); on a screen they are shown this much larger
SCREEN_SCALE = 1.6


def _scaled(svg: str, k: float) -> str:
    """The <svg> element's width and height (pt) times ``k``: the viewBox keeps the drawing,
    so text and lines grow together (CSS still caps it at the page width)."""

    def one(m: re.Match[str]) -> str:
        return f'{m.group(1)}="{float(m.group(2)) * k:.2f}pt"'

    head, sep, rest = svg.partition(">")
    return re.sub(r'\b(width|height)="([0-9.]+)pt"', one, head) + sep + rest


def _grid(plt: Any, n: int, ncols_max: int = 2) -> tuple[Any, list[Any]]:
    ncols = min(n, ncols_max)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(COLUMN_IN * ncols, PANEL_H_IN * nrows), squeeze=False
    )
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _percent(values: Sequence[float | None]) -> list[float | None]:
    """Decay series may hold fractions or percent; plot percent either way."""
    real = [v for v in values if v is not None]
    scale = 100.0 if real and max(real) <= 1.0 else 1.0
    return [None if v is None else v * scale for v in values]


def _series(decay: dict[str, Any]) -> tuple[list[float], list[float | None], list[float | None]]:
    bins = decay.get("bins") or []
    if not bins:
        raise ValueError("decay section has no bins (run `cafe decay RUN_DIR`)")
    x = [float(b.get("x", (b.get("lo", 0) + b.get("hi", 0)) / 2)) for b in bins]
    per = _percent([b.get("acc_per") for b in bins])
    rea = _percent([b.get("reasoning_acc") for b in bins])
    return x, per, rea


def _sparse(decay: dict[str, Any]) -> list[bool]:
    return [bool(b.get("sparse")) for b in decay.get("bins") or []]


def _plot_xy(
    ax: Any, x: Sequence[float], y: Sequence[float | None], sparse: Sequence[bool] = (), **kw: Any
) -> None:
    pts = [(a, b) for a, b in zip(x, y, strict=True) if b is not None]
    if not pts:
        return
    (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", **kw)
    # bins too small to enter the correlation are drawn hollow
    hollow = [(a, b) for a, b, s in zip(x, y, sparse, strict=False) if s and b is not None]
    if hollow:
        ax.plot(
            [p[0] for p in hollow],
            [p[1] for p in hollow],
            "o",
            color=line.get_color(),
            mfc="white",
            mec=line.get_color(),
            zorder=3,
        )


#: what the panels' r and ρ correlate
CORR_PAIR = "reasoning acc. vs Acc$_{per}$ across bins"


def _corr_text(decay: dict[str, Any]) -> str:
    parts = []
    for name, sym in (("pearson", "r"), ("spearman", "ρ")):
        c = decay.get(name) or {}
        r = c.get("r", c.get("rho"))  # the decay section names Spearman's coefficient rho
        if r is not None:
            p = c.get("p")
            ptxt = "= n/a" if p is None else (f"= {p:.3f}" if p >= 0.001 else "< 0.001")
            parts.append(f"{sym} = {r:.2f}, p {ptxt}")
    return "\n".join(parts)


def length_axis(decay: dict[str, Any]) -> str:
    """The length axis as the decay section names its unit: tokens of the model's tokenizer, or
    words where the run had none (sections from before the unit was recorded say neither)."""
    from cafe.adapters.token_counts import length_label

    st = decay.get("settings") or {}
    return length_label(st["token_counter"]) if "token_counter" in st else "Reasoning length"


#: the legend's word for the hollow markers (_plot_xy)
SPARSE_LABEL = "hollow: too few items in the bin (left out of r, ρ)"


def _length_axis(ax: Any, decay: dict[str, Any], sparse: Sequence[bool] = ()) -> None:
    """The length axis (its unit: length_axis): integer ticks (lengths are counts); a legend
    entry explaining hollow markers where a bin is sparse."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel(length_axis(decay))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if any(sparse):
        ax.plot([], [], "o", color="#7f7f7f", mfc="white", mec="#7f7f7f", label=SPARSE_LABEL)


#: said instead of a figure (or in its panel) for a model that wrote no reasoning
NO_REASONING = "the model wrote no reasoning (every output's reasoning length is 0): {what}"


def wrote_no_reasoning(decay: dict[str, Any]) -> bool:
    """Every item the decay section binned has reasoning length 0 (a chance baseline, a model
    that answers at once): there is no length axis to draw."""
    bins = [b for b in decay.get("bins") or [] if b.get("n")]
    return bool(bins) and all(float(b.get("x_mean", b.get("x", 0)) or 0) == 0 for b in bins)


def decay_panel(ax: Any, decay: dict[str, Any], title: str, legend: bool = True) -> None:
    if wrote_no_reasoning(decay):  # a sentence in the panel, not one point on a bare axis
        import textwrap

        what = "no decay curve to draw"
        ax.text(0.5, 0.5, textwrap.fill(NO_REASONING.format(what=what), 40), ha="center",
                va="center", transform=ax.transAxes, fontsize=6)  # fmt: skip
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(title)
        return
    x, per, rea = _series(decay)
    sp = _sparse(decay)
    _plot_xy(ax, x, per, sp, color=PERCEPTION_COLOR, label="Perception acc. (Acc$_{per}$)")
    _plot_xy(ax, x, rea, sp, color=REASONING_COLOR, label="Reasoning acc.", linestyle="--")
    # correlations under the title: never on top of the curves; they pair the two accuracies
    # across bins (the paper's), not either against length, and say so
    text = _corr_text(decay).replace("\n", "; ")
    ax.set_title(f"{title}\n{text}\n({CORR_PAIR})" if text else title)
    _length_axis(ax, decay, sp)
    ax.set_ylabel("Accuracy (%)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3, linewidth=0.5)
    if legend:
        ax.legend(loc="lower left", frameon=False)


def figure1(spec: dict[str, Any], out_dir: str | Path, stem: str = "figure1_rl") -> list[Path]:
    return save_figure(draw_figure1(spec), out_dir, stem)


def draw_figure1(spec: dict[str, Any]) -> Any:
    """A published figure from leaderboard.yaml's ``figures`` block: one line per series over the
    x positions, each value written beside its point (the numbers are the paper's)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(COLUMN_IN, PANEL_H_IN))
    xs = list(range(len(spec["x"])))
    for k, series in enumerate(spec["series"]):
        ys = series["values"]
        label = series["label"] + (f" ({series['meaning']})" if series.get("meaning") else "")
        ax.plot(xs, ys, marker="o", linestyle="-" if k == 0 else "--", label=label)
        for x, y in zip(xs, ys, strict=True):
            ax.annotate(f"{y:g}", (x, y), textcoords="offset points", xytext=(0, 4),
                        ha="center", fontsize=5.5)  # fmt: skip
    ax.set_xticks(xs)
    ax.set_xticklabels(spec["x"])
    ax.set_xlabel(spec.get("x_label", ""))
    ax.set_ylabel(f"{spec['benchmark'].upper()} {spec['metric']} (%)")
    ax.set_title(spec["title"])
    ax.grid(alpha=0.3, linewidth=0.5)
    ax.legend(loc="best", frameon=False)
    fig.tight_layout()
    return fig


def figure3(
    panels: Sequence[tuple[str, dict[str, Any]]], out_dir: str | Path, stem: str = "figure3_decay"
) -> list[Path]:
    return save_figure(draw_figure3(panels), out_dir, stem)


def draw_figure3(panels: Sequence[tuple[str, dict[str, Any]]]) -> Any:
    """Perception decay: one panel per (title, decay section), Acc_per and reasoning accuracy
    against token-length bins with Pearson r and p (of the two accuracies across the bins)
    annotated."""
    if not panels:
        raise ValueError("figure 3 needs at least one run with a decay section")
    if all(wrote_no_reasoning(d) for _, d in panels):
        raise ValueError(NO_REASONING.format(what="no decay curve to draw"))
    plt = pyplot()
    fig, axes = _grid(plt, len(panels))
    for i, (ax, (title, decay)) in enumerate(zip(axes, panels, strict=True)):
        decay_panel(ax, decay, f"({chr(97 + i)}) {title}" if len(panels) > 1 else title)
    fig.tight_layout()
    return fig


def figure5(
    base: tuple[str, dict[str, Any]],
    trained: tuple[str, dict[str, Any]],
    out_dir: str | Path,
    stem: str = "figure5_base_vs_trained",
) -> list[Path]:
    """Base against trained model: perception (left) and reasoning accuracy (right) by length."""
    plt = pyplot()
    fig, (ax_p, ax_r) = plt.subplots(1, 2, figsize=(COLUMN_IN * 2, PANEL_H_IN))
    # fixed colours: the same model has the same colour in both panels
    for (label, decay), style, color in ((base, "--", "#7f7f7f"), (trained, "-", "#1f77b4")):
        x, per, rea = _series(decay)
        r = (decay.get("pearson") or {}).get("r")
        lab = label + (f" (r = {r:.2f})" if r is not None else "")
        _plot_xy(ax_p, x, per, _sparse(decay), linestyle=style, label=lab, color=color)
        _plot_xy(ax_r, x, rea, _sparse(decay), linestyle=style, label=label, color=color)
    sparse = [*_sparse(base[1]), *_sparse(trained[1])]
    for ax, what in ((ax_p, "Perception accuracy (%)"), (ax_r, "Reasoning accuracy (%)")):
        _length_axis(ax, trained[1], sparse)
        ax.set_ylabel(what)
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3, linewidth=0.5)
        ax.legend(loc="lower left", frameon=False)
    fig.tight_layout()
    return save_figure(fig, out_dir, stem)


def figure6(
    curves: Sequence[tuple[str, dict[str, Any]]],
    out_dir: str | Path,
    stem: str = "figure6_attention",
) -> list[Path]:
    return save_figure(draw_figure6(curves), out_dir, stem)


def draw_figure6(curves: Sequence[tuple[str, dict[str, Any]]]) -> Any:
    """Audio attention ratio per generated token, one curve per (label, attention.json).
    Reads ``token_index``/``ratio`` or the averaged ``index``/``mean`` (``std`` shaded)."""
    if not curves:
        raise ValueError("figure 6 needs at least one attention.json")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(COLUMN_IN, PANEL_H_IN))
    top = 0.0
    for label, att in curves:
        idx = att.get("token_index", att.get("index")) or []
        ratio = att.get("ratio", att.get("mean")) or []
        if len(idx) != len(ratio) or not idx:
            raise ValueError(f"{label}: attention.json needs token_index and ratio of equal length")
        (line,) = ax.plot(idx, ratio, label=label)
        std = att.get("std")
        if std and len(std) == len(ratio):
            lo = [max(0.0, m - s) for m, s in zip(ratio, std, strict=True)]
            hi = [m + s for m, s in zip(ratio, std, strict=True)]
            ax.fill_between(idx, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
        top = max(top, max(ratio))
    ax.set_xlabel("Generated token index")
    ax.set_ylabel("Audio attention ratio")
    ax.set_ylim(0, max(0.10, top * 1.1))  # the paper's 0-0.10 unless the data goes higher
    ax.grid(alpha=0.3, linewidth=0.5)
    ax.legend(frameon=False)
    fig.tight_layout()
    return fig


# Figure 7 groups (SPEC §5) --------------------------------------------------------------------
DIFFICULTY = ("easy", "medium", "hard")
TASK_TYPES = ("Information Extraction", "Reasoning")
LOW_LAYERS = {"signal", "perception"}  # MMAR layers read as perception-level
HIGH_LAYERS = {"semantic", "cultural"}  # MMAR layers read as high-level cognition


def _scalar(v: Any) -> Any:
    # MMAU stores 13 categories as one-element lists
    return v[0] if isinstance(v, list) and len(v) == 1 else v


def task_groups(sample: Sample) -> dict[str, str]:
    """panel -> group label for one sample; samples lacking a field are left out of that panel."""
    meta = sample.meta or {}
    out: dict[str, str] = {}
    diff = str(meta.get("difficulty", "")).lower()
    if diff in DIFFICULTY:
        out["Difficulty"] = diff.capitalize()
    cat = _scalar(meta.get("category"))
    if isinstance(cat, str):
        if cat in TASK_TYPES:
            out["Question type"] = cat
        elif cat.lower() in LOW_LAYERS:
            out["Layer"] = "Perception"
        elif cat.lower() in HIGH_LAYERS:
            out["Layer"] = "High-level Cognitive"
    mod = meta.get("modality")
    if isinstance(mod, str) and mod:
        out["Sources"] = "Acoustic Mixtures" if mod.startswith("mix") else "Single-Source"
    return out


PANEL_ORDER = {
    "Difficulty": ["Easy", "Medium", "Hard"],
    "Question type": list(TASK_TYPES),
    "Sources": ["Acoustic Mixtures", "Single-Source"],
    "Layer": ["Perception", "High-level Cognitive"],
}


def reasoning_length_by_group(
    samples: Iterable[Sample], predictions: Iterable[Prediction]
) -> dict[str, dict[str, tuple[float, int]]]:
    """panel -> group -> (mean reasoning tokens, n predictions); every run's prediction counts.
    Panels with fewer than two groups are dropped (no contrast to show)."""
    by_id = {s.id: task_groups(s) for s in samples}
    sums: dict[str, dict[str, list[float]]] = {}
    for p in predictions:
        if p.reasoning_tokens is None or p.sample_id not in by_id:
            continue
        for panel, group in by_id[p.sample_id].items():
            sums.setdefault(panel, {}).setdefault(group, []).append(float(p.reasoning_tokens))
    out: dict[str, dict[str, tuple[float, int]]] = {}
    for panel in PANEL_ORDER:
        groups = sums.get(panel, {})
        if len(groups) < 2:
            continue
        out[panel] = {
            g: (sum(groups[g]) / len(groups[g]), len(groups[g]))
            for g in PANEL_ORDER[panel]
            if g in groups
        }
    return out


def figure7(
    title: str,
    lengths: dict[str, dict[str, tuple[float, int]]],
    out_dir: str | Path,
    stem: str = "figure7_reasoning_length",
    counter: str | None = None,
) -> list[Path]:
    return save_figure(draw_figure7(title, lengths, counter), out_dir, stem)


def draw_figure7(
    title: str, lengths: dict[str, dict[str, tuple[float, int]]], counter: str | None = None
) -> Any:
    """Mean reasoning length per task group (bars), with the largest gap in each panel noted;
    ``counter`` (the run's token_counter) names the unit: tokens, or words without a tokenizer."""
    from cafe.adapters.token_counts import length_unit

    if not lengths:
        raise ValueError(
            "figure 7 needs predictions with reasoning_tokens and samples with difficulty, "
            "category or modality in their meta"
        )
    if all(m == 0 for groups in lengths.values() for m, _ in groups.values()):
        raise ValueError(NO_REASONING.format(what="no length contrast between task groups"))
    plt = pyplot()
    fig, axes = _grid(plt, len(lengths))
    for ax, (panel, groups) in zip(axes, lengths.items(), strict=True):
        names = list(groups)
        means = [groups[g][0] for g in names]
        bars = ax.bar(range(len(names)), means, color="#4c72b0", width=0.6)
        for b, g in zip(bars, names, strict=True):
            ax.annotate(
                f"{groups[g][0]:.0f}\n(n={groups[g][1]})",
                (b.get_x() + b.get_width() / 2, b.get_height()),
                ha="center",
                va="bottom",
                fontsize=5.5,
            )
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([n.replace(" ", "\n", 1) for n in names])
        ax.set_ylabel(f"Mean reasoning length ({length_unit(counter)})")
        ax.set_title(f"{panel} (gap {max(means) - min(means):.0f})")
        ax.set_ylim(0, max(means) * 1.3 if max(means) > 0 else 1)
    fig.suptitle(title, fontsize=7.5)
    fig.tight_layout()
    return fig


def breakdown_figure(
    title: str, accuracy: dict[str, Any], out_dir: str | Path, stem: str = "accuracy_by_breakdown"
) -> list[Path]:
    return save_figure(draw_breakdown(title, accuracy), out_dir, stem)


def draw_breakdown(title: str, accuracy: dict[str, Any]) -> Any:
    """Accuracy per value of each breakdown (horizontal bars, total as a dashed line)."""
    breakdowns = {k: v for k, v in (accuracy.get("breakdowns") or {}).items() if v}
    if not breakdowns:
        raise ValueError("accuracy section has no breakdowns")
    total = (accuracy.get("total") or {}).get("acc")
    plt = pyplot()
    heights = [max(1.2, 0.16 * len(v) + 0.5) for v in breakdowns.values()]
    fig, axes = plt.subplots(
        len(breakdowns),
        1,
        figsize=(COLUMN_IN, sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, (name, values) in zip(axes[:, 0], breakdowns.items(), strict=True):
        keys = list(values)
        accs = [values[k].get("acc") or 0.0 for k in keys]
        ax.barh(range(len(keys)), accs, color="#55a868", height=0.7)
        for i, (k, a) in enumerate(zip(keys, accs, strict=True)):  # a 0 bar draws nothing: say it
            ax.text(a + 1, i, f"{a:.1f}" if values[k].get("acc") is not None else "–",
                    va="center", fontsize=5.5)  # fmt: skip
        ax.set_yticks(range(len(keys)))
        ax.set_yticklabels([f"{k} (n={values[k].get('total', '?')})" for k in keys])
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_title(name)
        if total is not None:
            ax.axvline(total, color="0.3", linestyle="--", linewidth=0.8)
    axes[-1, 0].set_xlabel(
        "Accuracy (%)" + (f"; dashed: total {total:.2f}" if total is not None else "")
    )
    fig.suptitle(title, fontsize=7.5)
    fig.tight_layout()
    return fig

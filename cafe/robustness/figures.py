"""The robustness figures, drawn with the report's matplotlib setup (cafe.plotting):
accuracy and perception against the reasoning budget, accuracy per choice ordering with the
positional bias, and the audio-necessity labels."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cafe.plotting import pyplot, save_figure


def _err(values: list[Any], cis: list[Any]) -> tuple[list[float], list[list[float]]]:
    ys = [float("nan") if v is None else float(v) for v in values]
    lo = [0.0 if c is None or v is None else v - c[0] for v, c in zip(values, cis, strict=True)]
    hi = [0.0 if c is None or v is None else c[1] - v for v, c in zip(values, cis, strict=True)]
    return ys, [lo, hi]


def draw_sweep(section: Mapping[str, Any]) -> Any:
    plt = pyplot()
    rows = section["rows"]
    xs = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    drawn = []
    for key, label, marker in (("acc", "accuracy", "o"), ("acc_per", "CAFE Acc_per", "s"),
                               ("err_per", "CAFE Err_per", "^")):  # fmt: skip
        ys, err = _err([r[key] for r in rows], [r.get(f"{key}_ci95") for r in rows])
        if all(y != y for y in ys):  # nothing measured (no judge): no line
            continue
        ax.errorbar(xs, ys, yerr=err, marker=marker, capsize=3, label=label)
        drawn.append(key)
    ax.set_xticks(xs, [str(r["budget"]) for r in rows])
    ax.set_xlabel(f"reasoning budget N ({rows[0]['method'] if rows else ''})", fontsize=7)
    ax.set_ylabel("percent (95% bootstrap CI)")
    what = ("accuracy and perception" if "acc_per" in drawn
            else "accuracy (no CAFE Acc_per: perception not measured)")  # fmt: skip
    ax.set_title(f"{section.get('model', '')} on {section.get('bench', '')}: {what} against "
                 "budget", fontsize=8)  # fmt: skip
    ax.legend(fontsize=7)
    return fig


def sweep_figure(section: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    return save_figure(draw_sweep(section), out_dir, "sweep")


def draw_choices(section: Mapping[str, Any]) -> Any:
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(7.0, 3.0))
    rows = section["by_ordering"]
    names = [f"order {o['k']}" for o in rows] + ["circular", "consistency"]
    vals = [o["acc"] for o in rows] + [section["circular"]["acc"], section["consistency"]["acc"]]
    cis = [o["ci95"] for o in rows] + [section["circular"]["ci95"], section["consistency"]["ci95"]]
    ys, err = _err(vals, cis)
    a.bar(range(len(ys)), ys, yerr=err, capsize=3, color=["C0"] * len(rows) + ["C1", "C2"])
    a.set_xticks(range(len(ys)), names, rotation=30, fontsize=7)
    a.set_ylabel("percent (95% bootstrap CI)")
    a.set_title(f"{section['orderings']} orderings ({section['mode']})", fontsize=8)
    bias = section["positional_bias"]
    pos = list(bias["observed"])
    b.bar([i - 0.2 for i in range(len(pos))], [bias["observed"][p] for p in pos], 0.4,
          label="answers")  # fmt: skip
    b.bar([i + 0.2 for i in range(len(pos))], [bias["expected"][p] for p in pos], 0.4,
          label="uniform")  # fmt: skip
    b.set_xticks(range(len(pos)), pos)
    b.set_xlabel("displayed position")
    b.set_ylabel(f"answers (count, of {bias['n']})")
    chi = "–" if bias["chi2"] is None else f"{bias['chi2']:.2f}, p {bias['p']:.3g}"
    b.set_title(f"answers per position (chi-square {chi})", fontsize=8)
    b.legend(fontsize=7)
    return fig


def draw_necessity(section: Mapping[str, Any]) -> Any:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    counts = section["counts"]
    ax.barh(list(counts), list(counts.values()), color=["C3", "C1", "C0", "C7"][: len(counts)])
    ax.invert_yaxis()
    ax.set_xlabel("items")
    need = section["audio_needed"]
    shown = "–" if need["acc"] is None else f"{need['acc']:.2f}%"
    ci = need.get("ci95")
    ax.set_title(f"audio necessity over {section['items']} items\naccuracy on the {need['n']} "
                 f"items only the audio answers: {shown}"
                 + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""), fontsize=8)  # fmt: skip
    return fig

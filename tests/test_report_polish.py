"""Report polish seen in a browser (issue 21): token-length ticks are integers, hollow (sparse)
markers are explained in the legend, figures are shown larger than print size, and the
correlation tables of the listening signals start folded."""

from __future__ import annotations

import re
from pathlib import Path

from cafe.plotting import pyplot
from cafe.reports import figures

DECAY = {
    "bins": [
        {"x": 12.5, "acc_per": 70.0, "reasoning_acc": 80.0},
        {"x": 37.5, "acc_per": 55.0, "reasoning_acc": 75.0},
        {"x": 62.5, "acc_per": 40.0, "reasoning_acc": 70.0, "sparse": True},
    ]
}


def _panel(decay):
    plt = pyplot()
    fig, ax = plt.subplots()
    figures.decay_panel(ax, decay, "t")
    fig.canvas.draw()
    return fig, ax


def test_length_ticks_are_integers_and_sparse_bins_are_in_the_legend():
    fig, ax = _panel(DECAY)
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert figures.SPARSE_LABEL in labels
    fig2, ax2 = _panel({"bins": [{**b, "sparse": False} for b in DECAY["bins"]]})
    assert figures.SPARSE_LABEL not in [t.get_text() for t in ax2.get_legend().get_texts()]


def test_figures_on_a_page_are_drawn_larger_than_print_size():
    plt = pyplot()
    fig, _ = plt.subplots(figsize=(3.0, 2.0))
    svg = figures.to_svg(fig, "x")
    width = float(re.search(r'<svg[^>]*\bwidth="([0-9.]+)pt"', svg).group(1))
    box = [float(v) for v in re.search(r'viewBox="([^"]+)"', svg).group(1).split()]
    assert abs(width - box[2] * figures.SCREEN_SCALE) < 0.05  # same drawing, shown larger


def test_correlation_tables_start_folded(tmp_path: Path, monkeypatch) -> None:
    from report_runs import make_run

    from cafe.reports import signals
    from cafe.reports.html import Source, signals_html
    from cafe.store import RunStore

    run = make_run(tmp_path / "run")
    RunStore(run).update_metrics("listening", {"controls": {"silence": {"gap": 18.75}}})
    # the signals as run_signals computes them for a run with per-item correlations (the page's
    # layout is under test here, not the statistics: tests/test_signals.py has those)
    row = {"a": "acc", "b": "acc_per", "n": 20, "rho": 0.5, "p": 0.02, "ci95": None}
    monkeypatch.setattr(signals, "run_signals", lambda root: {
        "values": {"acc": {"value": 56.25, "ci95": None}}, "across_items": [row]})  # fmt: skip
    page = signals_html(Source.load(run))
    folded = re.findall(r"<details( open)? class=corr><summary>correlations across items", page)
    assert folded == [""]  # present and closed
    assert page.index("56.25") < page.index("<details class=corr>")  # the values stay open

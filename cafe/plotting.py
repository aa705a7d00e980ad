"""Matplotlib as every cafe figure uses it (the report's, the robustness steps'): the paper's
style on the Agg backend, and the writer of a figure's PNG and PDF files. Here, below the steps
and the reports that both draw, so neither imports the other for it; matplotlib is imported
only when a figure is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DPI = 300  # PNG resolution (the PDF is vector)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend with the paper's font sizes and line widths."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 7,
            "axes.titlesize": 7.5,
            "axes.labelsize": 7,
            "legend.fontsize": 6,
            "xtick.labelsize": 6,
            "ytick.labelsize": 6,
            "lines.linewidth": 1.2,
            "lines.markersize": 3,
            "pdf.fonttype": 42,  # embed TrueType: editable text in the PDF
            "savefig.bbox": "tight",
            "savefig.pad_inches": 0.02,
        }
    )
    return plt


def save_figure(fig: Any, out_dir: str | Path, stem: str) -> list[Path]:
    """``fig`` as OUT_DIR/STEM.png and .pdf (closed afterwards) -> the two paths."""
    import io

    from cafe.safe_files import safe_dir, write_file

    out = safe_dir(out_dir)
    paths = [out / f"{stem}.png", out / f"{stem}.pdf"]
    for path, options in zip(paths, ({"dpi": DPI, "format": "png"}, {"format": "pdf"}),
                             strict=True):  # fmt: skip
        buf = io.BytesIO()  # rendered, then written by the writer that never follows a link
        fig.savefig(buf, **options)
        write_file(path, buf.getvalue())
    import matplotlib.pyplot as plt

    plt.close(fig)
    return paths

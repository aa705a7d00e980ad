"""The robustness sections in the reports: summary.md lines, the HTML headline tables, the
figures the run report and index.html draw, and the lines `cafe report runs/` adds under its
table. Sections are read from metrics.json ("choices", "necessity") and a sweep folder's
sweep.json; nothing here computes a statistic."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from html import escape
from pathlib import Path
from typing import Any

from cafe.robustness.necessity import CONDITIONS, LABELS


def _f(v: Any) -> str:
    return "–" if v is None else f"{v:.2f}"


def _ci(c: Any) -> str:
    return f"[{_f(c[0])}, {_f(c[1])}]" if c else "–"


def choices_rows(sec: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(figure, value, 95% interval, vs original order) rows of a "choices" section."""
    rows = []
    for o in sec["by_ordering"]:
        vs = o.get("vs_original")
        rows.append((f"accuracy, ordering {o['k']}", _f(o["acc"]), _ci(o["ci95"]),
                     f"{_f(vs['diff'])} {_ci(vs['ci95'])}" if vs else "original"))  # fmt: skip
    c = sec["circular"]
    rows.append(("circular accuracy (right under every ordering)", _f(c["acc"]), _ci(c["ci95"]),
                 f"{_f(c['vs_original']['diff'])} {_ci(c['vs_original']['ci95'])}"))  # fmt: skip
    k = sec["consistency"]
    rows.append(("consistency (same option under every ordering)", _f(k["acc"]), _ci(k["ci95"]),
                 ""))  # fmt: skip
    b = sec["positional_bias"]
    shares = ", ".join(f"{p} {_f(v)}" for p, v in (b.get("share") or {}).items())
    test = "–" if b["chi2"] is None else f"chi-square {b['chi2']:.2f}, df {b['df']}, p {b['p']:.3g}"
    rows.append(("answers per position (percent) vs uniform", shares or "–", test, ""))
    return rows


def necessity_rows(sec: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    rows = [(lab, str(sec["counts"][lab]), f"{_f(sec['share'][lab])}%") for lab in LABELS]
    n = sec["audio_needed"]
    what = f"accuracy on the {n['n']} items only the audio answers (needs the audio + never right)"
    rows.append((what, _f(n["acc"]), _ci(n["ci95"])))
    acc = sec["accuracy"]
    rows += [(f"accuracy, {c}", _f(acc[c]), "") for c in CONDITIONS]
    return rows


#: what rewrites a section, for the line that names a damaged one
REWRITE = {"choices": "cafe run --permute-choices K", "necessity": "cafe necessity RUN_DIR"}
_DAMAGE = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def damaged(name: str, e: BaseException) -> str:
    """One line naming the metrics.json section and the field a hand-edited or foreign section
    got wrong (the report goes on without it)."""
    what = (f"field {e.args[0]!r} missing" if isinstance(e, KeyError)
            else f"a field of the wrong type or value ({e})")  # fmt: skip
    return (
        f'metrics.json "{name}" section is unreadable: {what}; rerun '
        f"`{REWRITE.get(name, 'its step')}` to write it again"
    )


def _rows_or_note(name: str, sec: Any, rows: Callable[[Any], list]) -> tuple[list, str | None]:
    try:
        return rows(sec), None
    except _DAMAGE as e:
        return [], damaged(name, e)


def _html_table(rows: list[tuple[str, ...]]) -> str:
    body = "".join(
        f"<tr><th>{escape(r[0])}</th>" + "".join(f"<td>{escape(x)}</td>" for x in r[1:]) + "</tr>"
        for r in rows
    )
    return f'<table class="headline">{body}</table>'


def _headline(name: str, rows: Callable[[Any], list]) -> Callable[[dict[str, Any]], str]:
    def html(sec: dict[str, Any]) -> str:
        got, note = _rows_or_note(name, sec, rows)
        return f'<p class="note">{escape(note)}</p>' if note else _html_table(got)

    return html


choices_html = _headline("choices", choices_rows)
necessity_html = _headline("necessity", necessity_rows)


#: metrics.json section -> its HTML headline (cafe.reports.html.HEADLINES)
HEADLINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "choices": choices_html,
    "necessity": necessity_html,
}


def robustness_md(metrics: Mapping[str, Any]) -> list[str]:
    """summary.md lines for the run's robustness sections (none: no line)."""
    lines: list[str] = []
    sec = metrics.get("choices")
    if isinstance(sec, dict) and sec.get("by_ordering"):
        rows, note = _rows_or_note("choices", sec, choices_rows)
        lines += ["", f"## Choice order ({sec.get('orderings')} orderings, {sec.get('mode')}; "
                  "percent)", ""]  # fmt: skip
        lines += [note] if note else ["| figure | value | 95% interval | vs original order "
                                      "(paired) |", "|---|---:|---|---|"]  # fmt: skip
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    sec = metrics.get("necessity")
    if isinstance(sec, dict) and sec.get("counts"):
        rows, note = _rows_or_note("necessity", sec, necessity_rows)
        lines += ["", f"## Audio necessity ({sec.get('items')} items; right = most runs right)",
                  ""]  # fmt: skip
        lines += [note] if note else ["| label / figure | items or percent | share or 95% "
                                      "interval |", "|---|---:|---|"]  # fmt: skip
        lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
        src = (sec.get("conditions") or {}).get("caption") if not note else None
        src = src.get("source") if isinstance(src, dict) else None
        if src:
            lines.append(f"\nCaption-only used: {src}.")
    return lines


def _guarded(name: str, draw: Callable[[Any], Any], sec: Any) -> Any:
    """A figure of a section; a damaged one is a ValueError in one line (the reports note it
    and go on)."""
    try:
        return draw(sec)
    except _DAMAGE as e:
        raise ValueError(damaged(name, e)) from None


def figures(metrics: Mapping[str, Any]) -> list[tuple[str, str, Callable[[], Any]]]:
    """(caption, file stem, draw) for each robustness figure the run's sections allow."""
    from cafe.robustness import figures as F

    out = []
    if isinstance(metrics.get("choices"), dict):
        sec = metrics["choices"]
        caption = "Choice order: accuracy per ordering, circular, consistency; positional bias"
        out.append((caption, "choices", lambda: _guarded("choices", F.draw_choices, sec)))
    if isinstance(metrics.get("necessity"), dict):
        nec = metrics["necessity"]
        out.append(("Audio necessity per item", "necessity",
                    lambda: _guarded("necessity", F.draw_necessity, nec)))  # fmt: skip
    return out


def folder_lines(root: str | Path, runs: list[Path]) -> str:
    """What `cafe report runs/` adds under its table: per run its circular accuracy,
    consistency and audio-needed accuracy; per sweep folder its table. Empty when none."""
    from cafe.robustness.budgets import format_sweep

    lines = []
    for run in runs:
        m = _fresh_metrics(run)
        ch, nec = m.get("choices"), m.get("necessity")
        bits = []
        try:
            bits += _folder_bits(ch, nec)
        except _DAMAGE as e:
            bits.append(damaged("choices or necessity", e))
        if bits:
            lines.append(f"- {run.name}: " + "; ".join(bits))
    root = Path(root)
    sweeps = [p for p in [root / "sweep.json", *sorted(root.glob("*/sweep.json"))] if p.exists()]
    for p in sweeps:
        sec = _json_or_empty(p)
        if sec.get("rows"):
            lines += ["", f"{p.parent.name}:", "```", format_sweep(sec), "```"]
    if not lines:
        return ""
    return "\nrobustness (docs/robustness.md):\n" + "\n".join(lines) + "\n"


def _folder_bits(ch: Any, nec: Any) -> list[str]:
    bits = []
    if isinstance(ch, dict) and ch.get("circular"):
        bits.append(f"circular accuracy {_f(ch['circular']['acc'])} "
                    f"{_ci(ch['circular']['ci95'])} over {ch['orderings']} orderings, "
                    f"consistency {_f(ch['consistency']['acc'])}")  # fmt: skip
    if isinstance(nec, dict) and nec.get("audio_needed"):
        n = nec["audio_needed"]
        bits.append(f"accuracy on the {n['n']} items only the audio answers {_f(n['acc'])} "
                    f"{_ci(n['ci95'])}")  # fmt: skip
    return bits


def _fresh_metrics(run: Path) -> dict[str, Any]:
    """The run's sections that still describe its records (a stale one shows nothing); a
    damaged folder reads as empty here, as in the table above these lines."""
    from cafe.errors import CafeError
    from cafe.reports.freshness import current_metrics
    from cafe.store import RunStore

    try:
        return current_metrics(RunStore(run)).metrics
    except (CafeError, OSError, ValueError):
        return {}


def _json_or_empty(path: Path) -> dict[str, Any]:
    from cafe.errors import CafeError
    from cafe.store import read_json_file

    try:
        data = read_json_file(path, "rerun `cafe sweep` to write it again")
    except (CafeError, OSError):
        return {}
    return data if isinstance(data, dict) else {}

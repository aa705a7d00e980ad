"""The paper's Tables 1-5 rendered from leaderboard rows (plus rows built from run folders) as
Markdown, LaTeX (booktabs) or CSV. Best and second-best per group and column are computed here from
the numbers, respecting each column's direction (↑ higher is better, ↓ lower is better)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cafe.reports.cells import csv_cell, md_cell
from cafe.reports.leaderboard import GROUP_ORDER, Leaderboard, Row

FORMATS = ("md", "tex", "csv")


def higher_is_better(metric: str) -> bool:
    """The metric's direction as the section registry declares it (cafe.folder.sections: the
    CAFE error rates read lower-is-better); a key no section declares reads higher-is-better."""
    from cafe.folder.sections import sections

    for info in sections().values():
        d = info.direction(metric)
        if d is not None:
            return d == "up"
    return True


@dataclass(frozen=True)
class Column:
    benchmark: str
    metric: str
    header: str
    tex: str | None = None  # LaTeX header when the plain one needs markup
    #: which end is best (None: the section registry's direction of ``metric``)
    higher_is_better: bool | None = None

    def __post_init__(self) -> None:
        if self.higher_is_better is None:
            object.__setattr__(self, "higher_is_better", higher_is_better(self.metric))

    @property
    def arrow(self) -> str:
        return "↑" if self.higher_is_better else "↓"


@dataclass(frozen=True)
class TableSpec:
    number: int
    title: str
    columns: tuple[Column, ...]
    # benchmark -> accepted versions (empty: any); keeps MMAU releases apart (SPEC §9)
    versions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the metric a run row must have to join this table (None: any of the table's columns)
    requires: str | None = None
    note: str = ""

    def accepts(self, row: Row) -> bool:
        allowed = self.versions.get(row.benchmark, ())
        return not allowed or row.version in allowed


def _cafe_columns() -> tuple[Column, ...]:
    return (
        Column("mmar", "acc_per", "Acc_per", r"Acc$_{per}$"),
        Column("mmar", "err_per", "Err_per", r"Err$_{per}$"),
        Column("mmar", "err_use", "Err_use", r"Err$_{use}$"),
        Column("mmar", "err_omit", "Err_omit", r"Err$_{omit}$"),
        Column("mmar", "acc", "MMAR acc"),
    )


def _split_columns(bench: str, prefix: str) -> tuple[Column, ...]:
    return tuple(
        Column(bench, m, f"{prefix} {h}".strip())
        for m, h in (("sound", "Sound"), ("music", "Music"), ("speech", "Speech"), ("acc", "Avg"))
    )


MMAU_ORIGINAL = {"mmau": ("original",)}
#: a run over part of a benchmark (--limit): its coverage is in the footnote
PARTIAL = "◐"
PARTIAL_MEANING = "a partial run over only some of the benchmark's items (coverage below)"
IDENTICAL = "≡"
IDENTICAL_MEANING = (
    "its runs gave identical outputs (greedy decoding): not three sampled runs as in the paper, "
    "and no spread over runs"
)
CAFE_NOTE = "CAFE metrics in percent, averaged over three inference runs."
TABLES: dict[int, TableSpec] = {
    1: TableSpec(1, "CAFE perception metrics on MMAR", _cafe_columns(), {}, "acc_per", CAFE_NOTE),
    2: TableSpec(
        2,
        "Accuracy on MMAU test-mini (original) and MMAR; MMAR Sound/Music/Speech are the "
        "isolated-modality subsets, Avg is over all items",
        _split_columns("mmau", "MMAU") + _split_columns("mmar", "MMAR"),
        MMAU_ORIGINAL,
    ),
    3: TableSpec(
        3,
        "Accuracy on MMAU test-mini v05.15.25 (other rows from the MMAU leaderboard)",
        _split_columns("mmau", ""),
        {"mmau": ("v05.15.25",)},
    ),
    4: TableSpec(
        4,
        "Qwen2.5-Omni and MPAR² at 3B and 7B: accuracy on MMAU test-mini (original) and MMAR",
        _split_columns("mmau", "MMAU") + _split_columns("mmar", "MMAR"),
        MMAU_ORIGINAL,
    ),
    5: TableSpec(5, "CAFE on MMAR at 3B and 7B", _cafe_columns(), {}, "acc_per", CAFE_NOTE),
}


@dataclass
class TableRow:
    model: str
    group: str
    markers: list[str]
    values: list[float | None]
    rows: list[Row]  # the leaderboard rows the values come from (provenance)


@dataclass
class Table:
    spec: TableSpec
    rows: list[TableRow]  # already in group order
    marker_notes: list[tuple[str, str]]  # (symbol, meaning) of markers shown

    def groups(self) -> list[tuple[str, list[int]]]:
        out: list[tuple[str, list[int]]] = []
        for i, r in enumerate(self.rows):
            if not out or out[-1][0] != r.group:
                out.append((r.group, []))
            out[-1][1].append(i)
        return out

    def marks(self) -> dict[tuple[int, int], str]:
        """(row, column) -> "best" | "second", within each group and column.

        Ties share a mark; the second mark goes to the next distinct value. A group with fewer
        than two numbers in a column gets no mark (nothing to compare)."""
        out: dict[tuple[int, int], str] = {}
        for _, idx in self.groups():
            for j, col in enumerate(self.spec.columns):
                vals = [(i, self.rows[i].values[j]) for i in idx]
                vals = [(i, v) for i, v in vals if v is not None]
                if len(vals) < 2:
                    continue
                distinct = sorted({v for _, v in vals}, reverse=col.higher_is_better)
                for i, v in vals:
                    if v == distinct[0]:
                        out[(i, j)] = "best"
                    elif len(distinct) > 1 and v == distinct[1]:
                        out[(i, j)] = "second"
        return out


def _entity_key(row: Row) -> tuple[str, str]:
    # paper rows of one model join across benchmarks; run rows join only with run rows
    return (row.model, "paper" if row.is_paper else "run")


def build_table(number: int, board: Leaderboard, extra: Iterable[Row] = ()) -> Table:
    """Assemble table `number`: the paper's rows in the paper's order (layout), then run rows
    (from the file or `extra`) that carry the table's required metric, each in its group."""
    if number not in TABLES:
        raise ValueError(f"no table {number}; tables are {sorted(TABLES)}")
    spec = TABLES[number]
    layout = board.layout.get(number, [])
    benches = {c.benchmark for c in spec.columns}
    by_entity: dict[tuple[str, str], dict[str, Row]] = {}
    order: list[tuple[str, str]] = []
    for r in [*board.rows, *extra]:
        if r.benchmark not in benches or not spec.accepts(r):
            continue
        key = _entity_key(r)
        if r.is_paper and r.model not in layout:
            continue
        if key not in by_entity:
            by_entity[key] = {}
            order.append(key)
        by_entity[key][r.benchmark] = r  # a later run row of the same model wins
    keep = []
    for key in order:
        got = by_entity[key]
        # a run row joins when it measured what the table is about
        wanted = [spec.requires] if spec.requires else [c.metric for c in spec.columns]
        if key[1] == "paper" or any(
            r.metrics.get(m) is not None for r in got.values() for m in wanted
        ):
            keep.append(key)

    def sort_key(key: tuple[str, str]) -> tuple[int, int, int]:
        first = next(iter(by_entity[key].values()))
        g = GROUP_ORDER.index(first.group) if first.group in GROUP_ORDER else len(GROUP_ORDER)
        pos = layout.index(key[0]) if key[1] == "paper" else len(layout)
        return (g, pos, order.index(key))

    keep.sort(key=sort_key)
    paper_names = {k[0] for k in keep if k[1] == "paper"}
    rows: list[TableRow] = []
    shown: list[str] = []
    for key in keep:
        got = by_entity[key]
        primary = got.get(spec.columns[0].benchmark) or next(iter(got.values()))
        values = []
        for c in spec.columns:
            r = got.get(c.benchmark)
            values.append(None if r is None else r.metrics.get(c.metric))
        markers: list[str] = []
        for r in got.values():
            for m in r.markers:
                mk = board.markers.get(m)
                if mk and mk.shown_in(number) and m not in markers:
                    markers.append(m)
        if any(r.source.get("identical_runs") for r in got.values()):
            markers.append(IDENTICAL)  # greedy decoding: no spread over runs to speak of
        if any(r.source.get("coverage") for r in got.values()):
            markers.append(PARTIAL)  # beside full-benchmark rows it must say it is not one
        shown += [m for m in markers if m not in shown]
        name = primary.display
        if key[1] == "run" and name in paper_names:
            name += " (run)"
        rows.append(TableRow(name, primary.group, markers, values, list(got.values())))
    notes = [(m, board.markers[m].meaning) for m in board.markers if m in shown]
    if IDENTICAL in shown:
        notes.append((IDENTICAL, IDENTICAL_MEANING))
    if PARTIAL in shown:
        notes.append((PARTIAL, PARTIAL_MEANING))
    return Table(spec, rows, notes)


# rendering ----------------------------------------------------------------------------------
def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _footnotes(table: Table) -> list[str]:
    lines = [f"{sym} {meaning}." for sym, meaning in table.marker_notes]
    lines.append(
        "Best per group and column in bold, second underlined (↑ higher is better, ↓ lower is "
        "better)."
    )
    if table.spec.note:
        lines.append(table.spec.note)
    runs = [r for tr in table.rows for r in tr.rows if not r.is_paper]
    for r in runs:
        s = r.source
        lines.append(
            f"{r.display} ({r.benchmark}/{r.version}): run {s.get('run_dir')}, manifest sha256 "
            f"{str(s.get('manifest_sha256'))[:12]}, {r.date}"
            + (f", CAFE {s['cafe_mode']}" if s.get("cafe_mode") else "")
            + (
                f", accuracy judged by {s['judged_by']} "
                f"(official rule: {_num(s.get('official_acc'))})"
                if s.get("judged_by")
                else ""
            )
            + (_coverage(s["coverage"]) if s.get("coverage") else "")
            + "."
        )
    return lines


def _coverage(c: dict[str, Any]) -> str:
    of = c.get("of")
    share = f" ({100 * c['items'] / of:.0f}%)" if of and c.get("items") is not None else ""
    return f", {PARTIAL} covers {c.get('items')} of {of if of else 'more'} items{share}"


def _name(tr: TableRow) -> str:
    return md_cell(tr.model + (" " + "".join(tr.markers) if tr.markers else ""))


def render_md(table: Table) -> str:
    spec = table.spec
    marks = table.marks()
    head = ["Group", "Model", *[f"{c.header} {c.arrow}" for c in spec.columns]]
    out = [f"**Table {spec.number}.** {spec.title}.", ""]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["---", "---"] + ["---:"] * len(spec.columns)) + "|")
    for i, tr in enumerate(table.rows):
        cells = []
        for j, v in enumerate(tr.values):
            s = _num(v)
            mark = marks.get((i, j))
            s = f"**{s}**" if mark == "best" else f"<u>{s}</u>" if mark == "second" else s
            cells.append(s)
        out.append("| " + " | ".join([md_cell(tr.group), _name(tr), *cells]) + " |")
    out.append("")
    out += [md_cell(line) for line in _footnotes(table)]  # user text (names, paths): plain
    return "\n".join(out) + "\n"


def render_csv(table: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["group", "model", "markers", *[csv_cell(c.header) for c in table.spec.columns]])
    for tr in table.rows:
        w.writerow(
            [
                csv_cell(tr.group),
                csv_cell(tr.model),
                csv_cell("".join(tr.markers)),
                # numbers we formatted ourselves: a negative one stays a number
                *["" if v is None else f"{v:.2f}" for v in tr.values],
            ]
        )
    return buf.getvalue()


_TEX_CHARS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "²": r"\textsuperscript{2}",
    "†": r"\textsuperscript{\dag}",
    "‡": r"\textsuperscript{\ddag}",
    "≡": r"$\equiv$",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
}


def tex_escape(text: str) -> str:
    return "".join(_TEX_CHARS.get(ch, ch) for ch in text)


def _tex_marker(sym: str) -> str:
    return tex_escape(sym) if sym in ("†", "‡") else rf"\textsuperscript{{{tex_escape(sym)}}}"


def render_tex(table: Table) -> str:
    spec = table.spec
    marks = table.marks()
    n = len(spec.columns) + 1
    out = [
        r"% requires \usepackage{booktabs}",
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{tex_escape(spec.title)}.}}",
        rf"\label{{tab:cafe-{spec.number}}}",
        r"\small",
        r"\begin{tabular}{l" + "r" * len(spec.columns) + "}",
        r"\toprule",
    ]
    benches = [c.benchmark for c in spec.columns]
    if len(set(benches)) > 1:  # a spanning header per benchmark block
        spans, rules, start = [], [], 2
        for b in dict.fromkeys(benches):
            k = benches.count(b)
            spans.append(rf"\multicolumn{{{k}}}{{c}}{{{b.upper()}}}")
            rules.append(rf"\cmidrule(lr){{{start}-{start + k - 1}}}")
            start += k
        out.append(" & " + " & ".join(spans) + r" \\")
        out.append("".join(rules))
        heads = [c.header.split(" ", 1)[-1] for c in spec.columns]
    else:
        heads = [c.tex or tex_escape(c.header) for c in spec.columns]
    heads = [f"{h} {tex_escape(c.arrow)}" for h, c in zip(heads, spec.columns, strict=True)]
    out.append("Model & " + " & ".join(heads) + r" \\")
    for group, idx in table.groups():
        out.append(r"\midrule")
        out.append(rf"\multicolumn{{{n}}}{{l}}{{\textit{{{tex_escape(group)}}}}} \\")
        for i in idx:
            tr = table.rows[i]
            cells = []
            for j, v in enumerate(tr.values):
                s = _num(v)
                mark = marks.get((i, j))
                s = rf"\textbf{{{s}}}" if mark == "best" else s
                s = rf"\underline{{{s}}}" if mark == "second" else s
                cells.append(s)
            name = tex_escape(tr.model) + "".join(_tex_marker(m) for m in tr.markers)
            out.append(name + " & " + " & ".join(cells) + r" \\")
    out.append(r"\bottomrule")
    out.append(r"\end{tabular}")
    notes = []
    for line in _footnotes(table):
        sym = next((s for s, _ in table.marker_notes if line.startswith(s + " ")), None)
        notes.append(_tex_marker(sym) + tex_escape(line[len(sym) :]) if sym else tex_escape(line))
    out.append(r"\par\smallskip{\footnotesize " + r" \\ ".join(notes) + "}")
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"


RENDERERS = {"md": render_md, "tex": render_tex, "csv": render_csv}


def render_table(
    number: int, board: Leaderboard, fmt: str = "md", extra: Sequence[Row] = ()
) -> str:
    if fmt not in RENDERERS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return RENDERERS[fmt](build_table(number, board, extra))

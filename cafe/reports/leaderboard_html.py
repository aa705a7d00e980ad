"""`cafe leaderboard html`: the paper's Tables 1-5 and every row of leaderboard.yaml as one
self-contained page. The tables are the ones the text renderers print (cafe.reports.tables: same
rows, groups, markers and best/second marks); a click on a column header sorts within each group,
and each row carries its provenance (paper table, or run folder, manifest sha256, judge, date)."""

from __future__ import annotations

import datetime as _dt
import html
from pathlib import Path
from typing import Any

from cafe.reports.leaderboard import GROUP_ORDER, Leaderboard, Row
from cafe.reports.page import WEB, render_page
from cafe.reports.tables import TABLES, Table, build_table


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def provenance(r: Row, checked: dict[int, dict[str, Any]] | None = None) -> str:
    """The row's provenance as HTML; every value from the file or a run folder is escaped.
    ``checked``: `leaderboard verify`'s outcomes by row index (cafe.reports.verify.checked)."""
    s = r.source
    if r.is_paper:
        return _e(f"{s.get('ref', 'paper')} Table {s.get('table', '?')} ({r.date}); "
                  "published figure, not verifiable")  # fmt: skip
    sha = str(s.get("manifest_sha256", ""))
    parts = [
        _e(f"run folder {s.get('run_dir')}"),
        f'manifest sha256 <code title="{_e(sha)}">{_e(sha[:12])}</code>',
    ]
    if s.get("judge"):
        parts.append(f"judge {_e(s['judge'])}")
    if s.get("cafe_mode"):
        parts.append(f"CAFE {_e(s['cafe_mode'])}")
    parts.append(_e(r.date))
    got = (checked or {}).get(r.index)
    if got:  # `leaderboard verify`'s last word on this row, with when it was said
        mark = "✓ verified" if got.get("status") == "verified" else f"✗ {got.get('status')}"
        parts.append(f'<span class="verify">{_e(mark)} {_e(got.get("checked"))}</span>')
    return "; ".join(parts)


def _value_cell(v: float | None, mark: str | None) -> str:
    cls = "num" + (f" {mark}" if mark else "")
    data = "" if v is None else f' data-v="{v}"'
    return f'<td class="{cls}"{data}>{"-" if v is None else f"{v:.2f}"}</td>'


def _markers(syms: list[str], board: Leaderboard) -> str:
    return "".join(
        f'<sup class="marker" title="{_e(board.markers[m].meaning if m in board.markers else m)}">'
        f"{_e(m)}</sup>"
        for m in syms
    )


def row_anchor(table: int, row: Row) -> str:
    return f"t{table}-row{row.index}"


def your_rows_html(board: Leaderboard, tables: list[Table]) -> str:
    """The user's own rows first (a page of the paper's rows puts them thousands of pixels
    down): each with its figures and a link to its place in every table that holds it."""
    mine = [r for r in board.rows if not r.is_paper]
    if not mine:
        return ""
    items = []
    for r in mine:
        where = [
            f'<a href="#{row_anchor(t.spec.number, r)}">Table {t.spec.number}</a>'
            for t in tables
            if any(x is r for tr in t.rows for x in tr.rows)
        ]
        figures = ", ".join(
            f"{_e(k)} {'-' if v is None else f'{v:.2f}'}" for k, v in r.metrics.items()
        )
        items.append(
            f"<li><b>{_e(r.display)}</b> ({_e(r.group)}, {_e(r.benchmark)}/{_e(r.version)}): "
            f"{figures}. In: {', '.join(where) or 'no paper table'}; "
            f'<a href="#row{r.index}">row #{r.index} of all rows</a></li>'
        )
    return (
        '<section class="table" id="your-rows"><h2>Your rows</h2>'
        f"<ul>{''.join(items)}</ul></section>"
    )


def table_html(table: Table, board: Leaderboard) -> str:
    from cafe.reports.verify import checked

    verified = checked(board)
    spec = table.spec
    marks = table.marks()
    head = "".join(
        f'<th class="sortable" data-col="{j + 1}" title="{_e(c.benchmark)} {_e(c.metric)}">'
        f"{_e(c.header)} {c.arrow}</th>"
        for j, c in enumerate(spec.columns)
    )
    body = []
    for group, idx in table.groups():
        body.append(
            f'<tbody data-group="{_e(group)}"><tr class="group"><th colspan="'
            f'{len(spec.columns) + 2}">{_e(group)}</th></tr>'
        )
        for i in idx:
            tr = table.rows[i]
            run = any(not r.is_paper for r in tr.rows)
            cells = "".join(_value_cell(v, marks.get((i, j))) for j, v in enumerate(tr.values))
            prov = "<br>".join(
                f"{_e(r.benchmark)}/{_e(r.version)}: {provenance(r, verified)}" for r in tr.rows
            )
            mine = next((r for r in tr.rows if not r.is_paper), None)
            anchor = f' id="{row_anchor(spec.number, mine)}"' if mine is not None else ""
            body.append(
                f'<tr class="{"run" if run else "paper"}"{anchor} data-order="{i}">'
                f"<td>{_e(tr.model)}{_markers(tr.markers, board)}</td>{cells}"
                f'<td class="prov">{prov}</td></tr>'
            )
        body.append("</tbody>")
    notes = [f"{_e(sym)} {_e(meaning)}." for sym, meaning in table.marker_notes]
    notes.append(
        "Best per group and column in bold, second underlined (↑ higher is better, ↓ lower is "
        "better)."
    )
    if spec.note:
        notes.append(_e(spec.note))
    return (
        f'<section class="table" id="table{spec.number}"><h2>Table {spec.number}. '
        f'{_e(spec.title)}</h2><table class="board"><thead><tr><th data-col="0" class="sortable">'
        f"Model</th>{head}<th>Provenance</th></tr></thead>{''.join(body)}</table>"
        f'<p class="note">{"<br>".join(notes)}</p></section>'
    )


def rows_html(board: Leaderboard) -> str:
    """Every row of the file: model, group, benchmark/version, metrics, provenance."""
    from cafe.reports.verify import checked

    verified = checked(board)
    metrics = list(dict.fromkeys(k for r in board.rows for k in r.metrics))
    head = "".join(
        # a long metric name (mix_sound_music_speech) breaks at its underscores, not mid-word
        f'<th class="sortable" data-col="{j + 4}">{_e(m).replace("_", "_<wbr>")}</th>'
        for j, m in enumerate(metrics)
    )
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    rows = sorted(board.rows, key=lambda r: (order.get(r.group, len(order)), r.index))
    body = []
    for r in rows:
        cells = "".join(_value_cell(r.metrics.get(m), None) for m in metrics)
        body.append(
            f'<tr class="{"paper" if r.is_paper else "run"}" id="row{r.index}" '
            f'data-order="{r.index}">'
            f"<td>{r.index}</td><td>{_e(r.display)}{_markers(r.markers, board)}</td>"
            f"<td>{_e(r.group)}</td><td>{_e(r.benchmark)}/{_e(r.version)}</td>{cells}"
            f'<td class="prov">{provenance(r, verified)}</td></tr>'
        )
    return (
        '<section class="table" id="rows-all"><h2>All rows of the leaderboard file</h2>'
        '<table class="board"><thead><tr><th class="sortable" data-col="0">#</th>'
        '<th class="sortable" data-col="1">Model</th><th class="sortable" data-col="2">Group</th>'
        f'<th class="sortable" data-col="3">Benchmark</th>{head}<th>Provenance</th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></section>"
    )


def leaderboard_page(board: Leaderboard) -> str:
    from cafe.reports.names import shared_path

    tables = [build_table(n, board) for n in sorted(TABLES)]
    sections = [your_rows_html(board, tables)] + [table_html(t, board) for t in tables]
    sections.append(rows_html(board))
    nav = " ".join(f'<a href="#table{n}">Table {n}</a>' for n in sorted(TABLES))
    runs = sum(1 for r in board.rows if not r.is_paper)
    if runs:
        nav = f'<a href="#your-rows">Your rows</a> {nav}'
    sub = (
        f"{_e(shared_path(board.path) if board.path else board.path)} · {len(board.rows)} rows "
        f"({runs} from run folders) · written "
        f"{_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC"
    )
    return render_page(
        title="cafe leaderboard",
        subtitle=sub,
        nav=f'{nav} <a href="#rows-all">All rows</a>',
        body="\n".join(sections),
        data="{}",
        js=(WEB / "leaderboard.js").read_text(encoding="utf-8"),
    )


def write_leaderboard_html(board: Leaderboard, out: str | Path) -> Path:
    path = Path(out)
    from cafe.safe_files import write_file

    write_file(path, leaderboard_page(board))
    return path

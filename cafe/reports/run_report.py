"""`cafe report RUN_DIR`: a run folder's report/ (summary.md, tables, figures), the run placed
beside the paper's rows, and `--compare` deltas against one leaderboard row."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.benchmarks.official import averages
from cafe.records import Prediction, Sample
from cafe.reports import figures, tables
from cafe.reports.cells import md_cell
from cafe.reports.freshness import Fresh, current_metrics
from cafe.reports.leaderboard import (
    CAFE_METRICS,
    GROUP_ORDER,
    Leaderboard,
    LeaderboardError,
    Row,
    judge_name,
    load_leaderboard,
    row_from_run,
)
from cafe.reports.names import model_name, shared_path, without_machine_paths
from cafe.safe_files import safe_dir, write_file
from cafe.store import RunStore

ATTENTION = "attention.json"
# which command writes each part of a run folder (said whenever a part is missing)
PRODUCERS = {
    "accuracy": "`cafe run` (or `cafe score`)",
    "cafe": "`cafe judge RUN_DIR`",
    "decay": "`cafe decay RUN_DIR`",
    "attention": "`cafe attention --model M --bench B --out RUN_DIR`",
    "samples": "`cafe run` (copies samples.jsonl into the run folder)",
    "predictions": "`cafe run`",
}


class MissingPart(LeaderboardError):
    """A section or file a report needs is absent; the message names the command that makes it."""


MODE_MEANING = {
    "micro": "counts pooled over items within a run",
    "macro": "mean of per-sample ratios within a run",
}


def missing(run: str | Path, part: str, stale: str | None = None) -> MissingPart:
    if stale is not None:  # there, but computed on other records than the folder's now
        return MissingPart(f"{run}: metrics.json's {part!r} is stale ({stale}); re-run "
                           f"{PRODUCERS[part]} to recompute it")  # fmt: skip
    where = "metrics.json has no" if part in ("accuracy", "cafe", "decay") else "no"
    return MissingPart(f"{run}: {where} {part!r} (produced by {PRODUCERS[part]})")


@dataclass
class RunData:
    root: Path
    manifest: dict[str, Any]
    metrics: dict[str, Any]  # its sections that still describe the records (freshness)
    _samples: list[Sample] | None = field(default=None, repr=False)
    _predictions: list[Prediction] | None = field(default=None, repr=False)
    stale: dict[str, str] = field(default_factory=dict)  # section -> why it is stale

    @classmethod
    def load(cls, run_dir: str | Path) -> RunData:
        store = RunStore(run_dir)
        try:
            manifest = store.read_manifest()
        except FileNotFoundError as e:
            raise LeaderboardError(str(e)) from None
        fresh = current_metrics(store)
        return cls(Path(run_dir), manifest, fresh.metrics, stale=fresh.stale)

    @property
    def model(self) -> str:
        return model_name(self.manifest) or self.root.name

    @property
    def bench(self) -> tuple[str, str]:
        b = self.manifest.get("bench") or {}
        if isinstance(b, str):
            return b, "unspecified"
        return str(b.get("name", "unknown")), str(b.get("version") or "unspecified")

    def section(self, name: str) -> dict[str, Any]:
        sec = self.metrics.get(name)
        if not sec:
            raise missing(self.root, name, self.stale.get(name))
        return sec

    def samples(self) -> list[Sample]:
        if self._samples is None:
            store = RunStore(self.root)
            if not store.has_samples():
                raise missing(self.root, "samples")
            self._samples = store.samples()
        return self._samples

    def predictions(self) -> list[Prediction]:
        if self._predictions is None:
            preds = RunStore(self.root).predictions()
            if not preds:
                raise missing(self.root, "predictions")
            self._predictions = preds
        return self._predictions

    def attention(self) -> dict[str, Any]:
        path = self.root / ATTENTION
        if not path.exists():
            raise missing(self.root, "attention")
        return json.loads(path.read_text())


def run_row(run: RunData, group: str | None = None) -> Row:
    """The run's leaderboard row; a card group outside the table groups is shown as Ours."""
    card = run.manifest.get("model") or {}
    card_group = card.get("group") if isinstance(card, dict) else None
    grp = group or (card_group if card_group in GROUP_ORDER else "Ours")
    return row_from_run(run.root, group=grp)


def tables_for(row: Row) -> list[int]:
    """Every paper table the run can join (by benchmark, version and what was measured),
    Tables 4 and 5 (the 3B/7B comparisons) included: an MMAR or MMAU-original run belongs there
    as it belongs to Table 2."""
    out = []
    for n, spec in tables.TABLES.items():
        if row.benchmark in {c.benchmark for c in spec.columns} and spec.accepts(row):
            wanted = [spec.requires] if spec.requires else [c.metric for c in spec.columns]
            if any(row.metrics.get(m) is not None for m in wanted):
                out.append(n)
    return out


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, (int, float)) else str(v)


def _p(p: Any) -> str:
    return "-" if p is None else f"{p:.3g}"


def _runs(runs: Any) -> str:
    return str(runs.get("n", "?")) if isinstance(runs, dict) else str(runs or "?")


def _ci(ci: Any) -> str:
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


def official_md(section: dict[str, Any]) -> list[str]:
    """The "official" section as markdown: one table of the headline and each labelled variant
    (figure, dropped pairs, averages, label), then the headline's per-category scores (MMAU-Pro)
    or its first breakdown."""

    def figure(fig: dict[str, Any]) -> str:
        t = fig.get("total") or {}
        if t.get("acc") is None:
            why = str(fig.get("absent_reason") or "").replace("|", "/")
            return f"absent ({why})" if why else "absent"
        return f"**{t['acc']:.2f}**" + (f" ({t['correct']}/{t['total']})" if "correct" in t else "")

    lines = [f"Official rule: {section.get('rule', '')}", ""]
    lines += ["| figure | value | dropped | average | what it is |", "|---|---:|---:|---|---|"]
    rows = [("official", section.get("headline") or {})]
    rows += list((section.get("variants") or {}).items())
    for name, fig in rows:
        avg = averages(fig)
        label = md_cell(str(fig.get("label", "")).replace("|", "/"))
        lines.append(
            f"| {md_cell(name)} | {figure(fig)} | {md_cell(fig.get('dropped', ''))} "
            f"| {md_cell(avg)} | {label} |"
        )
    head = section.get("headline") or {}
    if head.get("categories"):
        lines += ["", "| category | path | pairs | score |", "|---|---|---:|---:|"]
        for name, c in head["categories"].items():
            score = "absent: " + c["label"] if c.get("score") is None else f"{c['score']:.2f}"
            cells = (md_cell(x) for x in (name, c.get("path"), c.get("n", ""), score))
            lines.append("| " + " | ".join(cells) + " |")
    for name, cells in list((head.get("breakdowns") or {}).items())[-1:]:
        lines += ["", f"| {md_cell(name)} | correct | total | acc |", "|---|---:|---:|---:|"]
        for k, v in cells.items():
            lines.append(f"| {md_cell(k)} | {v['correct']} | {v['total']} | {v['acc']:.2f} |")
    return lines


def _judged_md(judged: dict[str, Any]) -> list[str]:
    if not judged:
        return []
    jt = judged.get("total") or {}
    return [
        "", "## Judged accuracy (percent; the paper's † kind, not the headline)", "",
        f"{judged.get('label', '')}: **{_fmt(jt.get('acc'))}** "
        f"({jt.get('correct')}/{jt.get('total')}); verdicts {judged.get('verdicts')}",
    ]  # fmt: skip


def _cafe_md(caf: dict[str, Any]) -> list[str]:
    if not caf:
        return []
    ci = caf.get("ci95") or {}
    mode = caf.get("mode", "?")
    lines = ["", "## CAFE (percent)", ""]
    lines.append(
        f"Mode **{mode}** ({MODE_MEANING.get(mode, '?')}); "
        f"judge {judge_name(caf.get('judge'))}; "
        f"template {str(caf.get('template_hash', '?'))[:12]}; runs {_runs(caf.get('runs'))}."
    )
    lines.append(
        f"Headline: {caf.get('headline', 'pooled over every (item, run)')}; the interval is a "
        "bootstrap over items of that statistic. Pooled: every (item, run) at once."
    )
    pooled = caf.get("pooled") or {}
    lines += ["", "| metric | value | 95% interval | pooled |", "|---|---:|---|---:|"]
    for k in CAFE_METRICS:
        lines.append(
            f"| {k} | {_fmt(caf.get(k))} | {_ci(ci.get(k)).strip() or '-'} "
            f"| {_fmt(pooled.get(k))} |"
        )
    return lines


def _decay_md(dec: dict[str, Any]) -> list[str]:
    if not dec:
        return []
    p, s = dec.get("pearson") or {}, dec.get("spearman") or {}
    rho = s.get("rho", s.get("r"))
    st = dec.get("settings") or {}
    unit = (
        f"reasoning length in {st['length_unit']} ({st.get('token_counter')}); "
        if "length_unit" in st
        else ""
    )
    return [
        "", "## Perception decay", "",
        f"{unit}{len(dec.get('bins', []))} length bins; Pearson r = {_fmt(p.get('r'))} "
        f"(p = {_p(p.get('p'))}), Spearman ρ = {_fmt(rho)} (p = {_p(s.get('p'))}); "
        "reasoning accuracy against Acc_per across bins.",
    ]  # fmt: skip


def _registered_md(metrics: dict[str, Any]) -> list[str]:
    """Registered metrics (cafe.metrics.METRICS): their scalar values."""
    from cafe.metrics import METRICS

    lines: list[str] = []
    for name in METRICS.names():
        section = metrics.get(name)
        if isinstance(section, dict):
            lines += ["", f"## {name}", "", "| key | value |", "|---|---:|"]
            lines += [
                f"| {md_cell(k)} | {md_cell(_fmt(v))} |"
                for k, v in section.items()
                if isinstance(v, int | float | str) or v is None
            ]
    return lines


def summary_md(
    run: RunData,
    made: dict[str, list[Path]],
    notes: list[str],
    row: Row | None,
    signals: str | None = None,
    report: Path | None = None,
) -> str:
    bench, version = run.bench
    report = report or run.root / "report"  # files are named from where the summary is
    from cafe.prompts import style_label

    m = run.manifest
    prompt = m.get("prompt") or {}
    style = prompt.get("style", "?") if isinstance(prompt, dict) else prompt
    lines = [f"# Run report: {run.model} on {bench} ({version})", ""]
    lines += [
        f"- run folder: `{shared_path(run.root)}`",
        f"- prompt style: {style_label(style)}",
        f"- runs per item: {m.get('runs', '?')}",
    ]
    if row is not None:
        lines.append(f"- manifest sha256: `{row.source['manifest_sha256']}`")
    acc = run.metrics.get("accuracy") or {}
    if acc:
        lines += _accuracy_md(acc)
    official = run.metrics.get("official") or {}
    if official:  # the benchmark's own official figure, where accuracy's headline is not it
        lines += ["", "## Official figure and its labelled variants (percent)", ""]
        lines += official_md(official)
    lines += _judged_md(run.metrics.get("judged_accuracy") or {})
    lines += _cafe_md(run.metrics.get("cafe") or {})
    lines += _decay_md(run.metrics.get("decay") or {})
    from cafe.reports.robustness import robustness_md

    lines += robustness_md(run.metrics)  # choice order, audio necessity (docs/robustness.md)
    lines += _registered_md(run.metrics)
    if signals:
        lines += ["", "## Is it listening? Accuracy, perception, rubric, cues, controls", ""]
        lines.append(signals.rstrip("\n"))
    lines += ["", "## Files", ""]
    for what, paths in made.items():
        lines.append(f"- {what}: " + ", ".join(f"`{p.relative_to(report)}`" for p in paths))
    if notes:
        lines += ["", "## Not produced", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _accuracy_md(acc: dict[str, Any]) -> list[str]:
    """The accuracy section: headline, lenient figure, runs and breakdown tables."""
    t = acc.get("total") or {}
    from cafe.benchmarks.scoring import RULE_LABEL

    rule = acc.get("rule")
    title = "Accuracy (official rule on the answer text, percent)"
    if rule and rule != RULE_LABEL:  # a benchmark's own, labelled rule
        title = f"Accuracy (percent; {rule})"
    lines = ["", f"## {title}", ""]
    lines.append(
        f"Total: **{_fmt(t.get('acc'))}** ({t.get('correct', '?')}/{t.get('total', '?')}; "
        f"every (item, run) counted; unanswered {acc.get('unanswered', '?')}, "
        f"failed {acc.get('failed', '?')}, parse rate {_fmt(acc.get('parse_rate'))})"
    )
    lenient = acc.get("lenient") or {}
    if lenient:
        lt = lenient.get("total") or {}
        status = ", ".join(f"{k} {v}" for k, v in (acc.get("parse_status") or {}).items() if v)
        what = lenient.get("label") or "answer mapped to a choice first; not the official figure"
        lines.append(
            f"Lenient ({what}): {_fmt(lt.get('acc'))} ({lt.get('correct')}/{lt.get('total')}); "
            f"mapping: {status}"
        )
    if acc.get("identical_runs"):
        lines.append("Runs: identical outputs in every run (greedy decoding): no spread.")
    runs = acc.get("runs") or {}
    if runs.get("n", 1) and runs.get("n", 1) > 1:
        lines.append(
            f"Per run: {', '.join(_fmt(x) for x in runs.get('per_run', []))} "
            f"(mean {_fmt(runs.get('mean'))}, std {_fmt(runs.get('std'))})"
        )
    for name, values in (acc.get("breakdowns") or {}).items():
        lines += ["", f"| {md_cell(name)} | correct | total | acc |", "|---|---:|---:|---:|"]
        for k, v in values.items():
            acc_k = _fmt(v.get("acc"))
            cells = (md_cell(x) for x in (k, v.get("correct"), v.get("total"), acc_k))
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _write_tables(
    row: Row, board: Leaderboard, tdir: Path, made: dict[str, list[Path]], notes: list[str]
) -> None:
    """The paper's tables that cover the run's benchmark, with its row beside the paper's."""
    joins = tables_for(row)
    for n in joins:
        paths = []
        for fmt in tables.FORMATS:
            p = tdir / f"table{n}.{fmt}"
            write_file(p, tables.render_table(n, board, fmt, extra=[row]))
            paths.append(p)
        made[f"Table {n} with this run"] = paths
    if not joins:
        notes.append(f"paper tables: none covers {row.benchmark}/{row.version}")


def _draw_figures(run: RunData, fdir: Path, made: dict[str, list[Path]], notes: list[str]) -> None:
    """Each figure the run's sections allow; a missing section is said once in ``notes``."""
    title = f"{run.model} ({run.bench[0]})"
    steps = [
        ("Figure 3 (decay)", lambda: figures.figure3([(title, run.section("decay"))], fdir)),
        (
            "accuracy by breakdown",
            lambda: figures.breakdown_figure(title, run.section("accuracy"), fdir),
        ),
        (
            "Figure 7 (reasoning length)",
            lambda: figures.figure7(
                title,
                figures.reasoning_length_by_group(run.samples(), run.predictions()),
                fdir,
                counter=run.manifest.get("token_counter"),
            ),
        ),
        ("Figure 6 (attention)", lambda: figures.figure6([(run.model, run.attention())], fdir)),
    ]
    from cafe.plotting import save_figure
    from cafe.reports.robustness import figures as robustness_figures

    steps += [(cap, lambda d=draw, st=stem: save_figure(d(), fdir, st))
              for cap, stem, draw in robustness_figures(run.metrics)]  # fmt: skip
    for what, make in steps:
        try:
            made[what] = make()
        except MissingPart as e:
            if e.message not in " ".join(notes):  # a missing section is said once
                notes.append(f"{what}: {e.message}")
        except (LeaderboardError, ValueError) as e:
            notes.append(f"{what}: {getattr(e, 'message', None) or e}")


def write_run_report(
    run_dir: str | Path,
    board: Leaderboard | None = None,
    group: str | None = None,
    out: str | Path | None = None,
    draw: bool = True,
    html: bool = True,
    compare_with: str | Path | None = None,
    embed_audio_s: float | None = None,
) -> Path:
    """Write report/ for one run: summary.md, tables/, figures/ and index.html; returns the
    folder. Missing parts are listed in summary.md with the command that produces them. ``board``
    defaults to the leaderboard file `load_leaderboard` finds; ``draw=False`` skips figures;
    ``html=False`` skips index.html, ``compare_with`` (a second run folder) adds a comparison to
    it, and clips up to ``embed_audio_s`` seconds are embedded in it (cafe.reports.html)."""
    from cafe.steps.plugins import compute_metrics

    board = board or load_leaderboard()
    compute_metrics(run_dir)  # registered metrics are recomputed with every report
    run = RunData.load(run_dir)
    report = Path(out) if out else run.root / "report"
    if not out:
        from cafe.safe_files import refuse_links_out

        refuse_links_out(run.root, report)
    tdir, fdir = report / "tables", report / "figures"
    safe_dir(report)
    safe_dir(tdir)
    made: dict[str, list[Path]] = {}
    notes: list[str] = []
    row = None
    try:
        row = run_row(run, group)
    except LeaderboardError as e:
        notes.append(f"leaderboard row: {e}")
    if row is not None:
        _write_tables(row, board, tdir, made, notes)
    # metric sections first, so the summary names them whether or not figures are drawn
    for part in ("accuracy", "cafe", "decay"):
        if not run.metrics.get(part):
            notes.append(f"{part}: {missing(run.root, part, run.stale.get(part)).message}")
    notes += Fresh(run.metrics, run.stale).notes(skip=("accuracy", "cafe", "decay"))
    if draw:
        _draw_figures(run, fdir, made, notes)
    from cafe.reports.signals import LISTENING_PARTS, format_signals, run_signals

    signals = None
    if any(run.metrics.get(p) for p in LISTENING_PARTS):
        signals = format_signals(run_signals(run.root, board))
        path = tdir / "signals.md"
        write_file(path, signals)
        made["signals (accuracy, Acc_per, rubric, cue recall, listening gap)"] = [path]
    if html:
        from cafe.reports.html import write_html_report

        page = write_html_report(run.root, compare_with, report, embed_audio_s, draw)
        made["HTML report (open in a browser)"] = [page.path]
        notes += [f"index.html: {n}" for n in page.notes]
    from cafe.redaction import scrub_text

    text = scrub_text(summary_md(run, made, notes, row, signals, report))
    text = without_machine_paths(text, run.root)
    write_file(report / "summary.md", text)
    return report


def compare(
    run_dir: str | Path, against: str | None = None, board: Leaderboard | None = None
) -> str:
    """Deltas of a run against one leaderboard row of the same benchmark (and MMAU release),
    with the run's 95% intervals shifted by the row's value where the run has them, then the
    protocol settings of both (prompt style, runs, decoding, judge, extractor, CAFE pooling),
    those that differ marked. Without ``against``: the paper's row for the run's model."""
    from cafe.reports.protocol import paper_protocol, paper_row_for, protocol_lines, run_protocol

    board = board or load_leaderboard()
    run = RunData.load(run_dir)
    row = run_row(run)
    bench, version = run.bench
    if against is None:
        ref = paper_row_for(board, row.model, bench, version)
        if ref is None:
            raise LeaderboardError(
                f"no paper row for {row.model!r} on {bench}/{version}; name one with --against"
            )
        cands = [ref]
        same_version = [ref] if ref.version == version else []
    else:
        from cafe.benchmarks.base import benchmark_class

        cands = [r for r in board.select(benchmark=bench, model=against)]
        same_version = [r for r in cands if r.version == version]
        if not benchmark_class(bench).versions_comparable:  # e.g. MMAU's releases: other tests
            cands = same_version
    if not cands:
        import difflib

        names = sorted({r.model for r in board.select(benchmark=bench)})
        close = difflib.get_close_matches(against or "", names, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; rows: {', '.join(names)}"
        raise LeaderboardError(f"no leaderboard row {against!r} for {bench}/{version}{hint}")
    ref = (same_version or cands)[-1]
    lines = [
        f"{row.model} ({run.root}) vs {ref.display} [{ref.benchmark}/{ref.version}, "
        f"{'paper Table ' + ref.source.get('table', '?') if ref.is_paper else 'run'}]",
        f"{'metric':<10} {'run':>8} {'run 95% CI':>18} {'row':>8} {'delta':>8} "
        f"{'delta 95% CI':>18}",
    ]
    lower_better = {"err_per", "err_use", "err_omit"}
    for key, ours in row.metrics.items():
        theirs = ref.metrics.get(key)
        if ours is None or theirs is None:
            continue
        ci = row.intervals.get(key)
        dci = [ci[0] - theirs, ci[1] - theirs] if ci else None
        arrow = "↓" if key in lower_better else "↑"
        lines.append(
            f"{key + ' ' + arrow:<10} {ours:8.2f} {_ci(ci) or '-':>18} {theirs:8.2f} "
            f"{ours - theirs:+8.2f} {_ci(dci) or '-':>18}"
        )
    if len(lines) == 2:
        lines.append("(no metric in common)")
    ours_p = run_protocol(run.manifest, run.metrics)
    if ref.is_paper:
        theirs_p = paper_protocol(ref)
    else:
        other = RunData.load(ref.folder) if ref.folder and ref.folder.exists() else None
        theirs_p = run_protocol(other.manifest, other.metrics) if other else {}
    if ref.version != version:
        lines.append(f"benchmark version: run {version}, row {ref.version}")
    lines.append("protocol (≠ marks a setting that differs):")
    lines += protocol_lines(ours_p, theirs_p)
    return "\n".join(lines) + "\n"

"""The protocol behind a number: what the paper's rows were measured under (SPEC §2, §6, §9-10)
and what a run folder was measured under, side by side, so a difference between a run and the
paper's row comes with the settings that could explain it (prompt style, runs, decoding, judge,
answer extractor, CAFE pooling)."""

from __future__ import annotations

import re
from typing import Any

from cafe.prompts import style_label
from cafe.reports.leaderboard import CAFE_METRICS, Leaderboard, Row, judge_name

FIELDS = ("prompt_style", "runs", "decoding", "judge", "extractor", "cafe_mode")
UNSPECIFIED = "unspecified in the paper"
#: the paper's prompt per group (appendix B): LALMs and commercial models answer first and then
#: give a "Reasoning:" line; reasoning models (and MPAR²) select one option
PAPER_STYLE = {"LALM": "lalm", "Commercial": "lalm", "LARM": "larm", "Ours": "larm",
               "Ablation": "larm"}  # fmt: skip
#: the authors' evaluation code (their repository) ran these; decoding and extraction from it
AUTHORS_CODE = {"Qwen2.5-Omni-7B", "Qwen2.5-Omni-3B", "MPAR²-7B", "MPAR²-3B"}
AUTHORS_DECODING = {
    "mmar": "max_new_tokens=2048, repetition_penalty=1.03",
    "mmau": "max_new_tokens=2048, repetition_penalty=1.02",
}
#: marker -> how that row's accuracy was extracted
MARKER_EXTRACTOR = {"†": "GPT-5 reads the output and names the option"}
PAPER_JUDGE = "gemini-3-pro (captions and events)"


def paper_protocol(row: Row) -> dict[str, Any]:
    """The settings the paper states (or its authors' code shows) for one of its rows."""
    authors = row.model in AUTHORS_CODE or row.group == "Ablation"
    extractor = next((MARKER_EXTRACTOR[m] for m in row.markers if m in MARKER_EXTRACTOR), None)
    if extractor is None:
        extractor = "official string match on the answer" + (
            " (first <answer> tag)" if authors else ""
        )
    has_cafe = any(row.metrics.get(m) is not None for m in CAFE_METRICS)
    # the authors' own code shows its prompt text (SPEC §6); appendix B gives the others by group
    style = f"authors-{row.benchmark}" if authors else PAPER_STYLE.get(row.group, UNSPECIFIED)
    return {
        "prompt_style": style,
        # Table 1 (CAFE and MMAR accuracy, the same MMAR numbers as Table 2) averages 3 runs
        "runs": 3 if (has_cafe or row.benchmark == "mmar") else UNSPECIFIED,
        "decoding": AUTHORS_DECODING.get(row.benchmark, UNSPECIFIED) if authors else UNSPECIFIED,
        "judge": PAPER_JUDGE if has_cafe else "-",
        "extractor": extractor,
        "cafe_mode": UNSPECIFIED if has_cafe else "-",
    }


def _decoding(manifest: dict[str, Any]) -> str:
    card = manifest.get("model") if isinstance(manifest.get("model"), dict) else {}
    gen = {**(card or {}).get("generation", {}), **(manifest.get("generation") or {})}
    return ", ".join(f"{k}={v}" for k, v in sorted(gen.items())) or "adapter defaults"


def run_protocol(manifest: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """The same settings for a run folder, from its manifest and metrics.json."""
    prompt = manifest.get("prompt") or {}
    acc = metrics.get("accuracy") or {}
    caf = metrics.get("cafe") or {}
    runs = manifest.get("runs")
    return {
        "prompt_style": prompt.get("style") if isinstance(prompt, dict) else prompt,
        "runs": runs.get("n") if isinstance(runs, dict) else runs,
        "decoding": _decoding(manifest),
        "judge": judge_name(caf.get("judge")) if caf else "-",
        "extractor": acc.get("rule")
        or acc.get("extractor")
        or "official string match on the answer",
        "cafe_mode": caf.get("mode") if caf else "-",
    }


def _same(field: str, a: Any, b: Any) -> bool:
    if UNSPECIFIED in (a, b):
        return True  # nothing to say against a setting the paper does not state
    if field == "prompt_style":  # mpar2 shows the LARM text (the model adds the tags)
        return {a, b} <= {"larm", "mpar2"} or a == b
    return str(a).lower() == str(b).lower()


def protocol_lines(run: dict[str, Any], paper: dict[str, Any]) -> list[str]:
    """One line per setting, the differing ones marked with '≠'."""
    lines = []
    for f in FIELDS:
        a, b = run.get(f), paper.get(f)
        mark = " " if _same(f, a, b) else "≠"
        if f == "prompt_style":  # a named variant says it is not the paper's prompt
            a = style_label(a)
        lines.append(f"  {mark} {f:<13} run: {a!s:<40} paper: {b}")
    return lines


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9²]+", "", name.lower())


def paper_row_for(board: Leaderboard, model: str, bench: str, version: str) -> Row | None:
    """The paper's row for the same model (names equal after lowercasing and dropping
    punctuation) and benchmark; the same version where the paper states one (MMAU releases
    are different tests and never mix; the paper does not say which MMAR release it used)."""
    rows = [
        r for r in board.rows
        if r.is_paper and r.benchmark == bench and _norm(r.model) == _norm(model)
    ]  # fmt: skip
    same = [r for r in rows if r.version == version]
    if same:
        return same[-1]
    from cafe.benchmarks.base import benchmark_class

    if not benchmark_class(bench).versions_comparable:  # MMAU: each release is another test
        return None
    return next((r for r in rows if r.version == "unspecified"), None)

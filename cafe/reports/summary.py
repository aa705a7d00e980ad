"""The console summary `cafe run` prints: accuracy by breakdown, parse rate, runs, CAFE."""

from __future__ import annotations

from typing import Any

from cafe.metrics.cafe import neutral_share  # CAFE's own arithmetic (issue 42)


def _num(v: Any) -> str:
    """A figure as printed; a missing one (None: nothing to divide by) as "–", never "None"."""
    return "–" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def summary_table(metrics: dict[str, Any]) -> str:
    acc = metrics.get("accuracy") or {}
    total = acc.get("total") or {}
    rows = [("total", total.get("correct"), total.get("total"), total.get("acc"))]
    for name, values in (acc.get("breakdowns") or {}).items():
        for value, cell in values.items():
            rows.append(
                (f"{name}={value}", cell.get("correct"), cell.get("total"), cell.get("acc"))
            )
    width = max(len(r[0]) for r in rows)
    lines = [f"accuracy: {acc.get('rule') or 'official string match on the answer text'}"]
    lines.append(f"{'':{width}}  correct  total     acc   (denominator: every item)")
    for label, correct, n, a in rows:
        lines.append(f"{label:{width}}  {correct!s:>7}  {n!s:>5}  {_num(a):>6}")
    runs = acc.get("runs") or {}
    pr = acc.get("parse_rate")
    pr = "–" if pr is None else pr
    # parse_rate is the share with a text to score (the official rule reads the whole output
    # where no answer was parsed), so the parsed answers are counted beside it
    st = acc.get("parse_status") or {}
    n = sum(st.values())
    parsed = st.get("ok", 0) + st.get("unmapped", 0)
    lines.append(
        f"parse rate {pr}%   unanswered {acc.get('unanswered')}   failed {acc.get('failed')}"
        + (
            f"   runs {runs.get('n')}: mean {runs.get('mean')} ± {runs.get('std')} "
            "(± sample std over runs)"
            if runs.get("n", 1) > 1
            else ""
        )
        + (
            f"   (parse rate: a text to score; an answer section parsed in {parsed} of {n})"
            if n and parsed < n
            else ""
        )
    )
    official = acc.get("official_denominator")
    if official:
        # the official scripts' denominator only where the official figure is this rule's
        name = "answered only (not the official figure)" if metrics.get("official") else (
            "official scripts' denominator (answered only)")  # fmt: skip
        lines.append(
            f"{name}: {official.get('correct')}/{official.get('total')} = "
            f"{_num(official.get('acc'))}"
        )
    lenient = acc.get("lenient")
    if lenient:
        lt, st = lenient.get("total") or {}, acc.get("parse_status") or {}
        lines.append(
            f"lenient (answer mapped to a choice first; every item; not the official figure): "
            f"{lt.get('correct')}/{lt.get('total')} = {_num(lt.get('acc'))}   mapping: "
            + ", ".join(f"{k} {v}" for k, v in st.items() if v)
        )
    if acc.get("identical_runs"):
        lines.append("runs: identical outputs in every run (greedy decoding): no spread")
    judged = metrics.get("judged_accuracy")
    if judged:
        jt = judged.get("total") or {}
        lines.append(
            f"{judged.get('label')}: {jt.get('correct')}/{jt.get('total')} = {jt.get('acc')}"
        )
    cafe = metrics.get("cafe")
    if cafe:
        keys = ("acc_per", "err_per", "err_use", "err_omit")
        neutral = neutral_share(cafe)
        lines.append(
            "CAFE "
            + "  ".join(f"{k} {_num(cafe.get(k))}" for k in keys)
            + f"  ({cafe.get('mode', 'micro')}"
            + (", mean over runs" if "headline" in cafe else "")
            + ")"
            + (
                f"  neutral {_num(neutral)} (true events the question does not need: with "
                "acc_per, err_per and err_use, 100% of the events reported)"
                if neutral is not None
                else ""
            )
        )
    return "\n".join(lines)

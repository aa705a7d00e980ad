"""The listening gap: real accuracy minus accuracy under a listening control (cafe.controls),
per control and per breakdown, with a paired bootstrap 95% interval over items (an item's
accuracy is its mean correctness over runs; an item with no prediction counts as wrong, as in
the accuracy section). A gap near zero means the score does not depend on the audio."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cafe.controls import SILENT_TRUTH
from cafe.metrics.cafe import METRICS as CAFE_METRICS
from cafe.metrics.cafe import neutral_share
from cafe.metrics.stats import paired_bootstrap
from cafe.records import Prediction, Sample


def item_accuracy(samples: Sequence[Sample], predictions: Sequence[Prediction]) -> dict[str, float]:
    """Item -> mean correctness over its runs (percent); every sample present, missing = 0."""
    runs = sorted({p.run_index for p in predictions}) or [0]
    got: dict[tuple[str, int], bool] = {(p.sample_id, p.run_index): p.correct for p in predictions}
    return {s.id: 100.0 * sum(got.get((s.id, r), False) for r in runs) / len(runs) for s in samples}


def chance_level(samples: Sequence[Sample]) -> float | None:
    """Expected accuracy of a uniform guess among the choices, in percent."""
    ks = [len(s.choices) for s in samples if s.choices]
    return round(float(np.mean([100.0 / k for k in ks])), 2) if ks else None


def _r2(v: Any) -> float | None:
    return None if v is None else round(float(v), 2)


def _gap(ids: list[str], real: dict[str, float], ctrl: dict[str, float], **kw: Any) -> dict:
    a = [real.get(i, 0.0) for i in ids]
    b = [ctrl.get(i, 0.0) for i in ids]
    boot = paired_bootstrap(a, b, **kw)
    return {
        "real_acc": _r2(np.mean(a)) if a else None,
        "acc": _r2(np.mean(b)) if b else None,
        "gap": _r2(boot["diff"]),
        "ci95": [_r2(x) for x in boot["ci95"]] if boot["ci95"] else None,
        "n": boot["n"],
    }


def listening_section(
    samples: Sequence[Sample],
    real: Sequence[Prediction],
    controls: dict[str, dict[str, Any]],
    breakdowns: dict[str, Callable[[Sample], Any]] | None = None,
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """``controls``: name -> {"predictions": [...], "run_dir": str, "cafe": section or None}.
    Returns the real run's metrics.json "listening" section."""
    real_acc = item_accuracy(samples, real)
    ids = sorted(s.id for s in samples if s.error is None)  # resampled units: in one order
    kw = {"resamples": resamples, "seed": seed}
    out: dict[str, Any] = {
        "chance": chance_level([s for s in samples if s.error is None]),
        "method": f"real minus control accuracy (percent); paired percentile bootstrap over "
        f"items, {resamples} resamples, seed {seed}",
        "controls": {},
    }
    for name, ctl in controls.items():
        ctrl_acc = item_accuracy(samples, ctl["predictions"])
        entry: dict[str, Any] = {
            "run_dir": ctl.get("run_dir"),
            **_gap(ids, real_acc, ctrl_acc, **kw),
        }
        groups: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        by_id = {s.id: s for s in samples}
        for key, func in (breakdowns or {}).items():
            for i in ids:
                v = func(by_id[i])
                for x in v if isinstance(v, (list, tuple)) else [v]:
                    groups[key]["none" if x is None else str(x)].append(i)
        entry["breakdowns"] = {
            key: {v: _gap(members, real_acc, ctrl_acc, **kw) for v, members in sorted(vals.items())}
            for key, vals in groups.items()
        }
        caf = ctl.get("cafe")
        if caf:
            entry["cafe"] = {m: caf.get(m) for m in CAFE_METRICS}
            entry["cafe"]["judge"] = (caf.get("judge") or {}).get("judge")
            entry["cafe"]["mode"] = caf.get("mode")
            entry["cafe"]["judged"] = (caf.get("judgements") or {}).get("ok")
        out["controls"][name] = entry
    return out


def format_listening(section: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}"

    lines = [f"listening gap (real minus control accuracy; chance {f(section.get('chance'))})"]
    for name, c in section["controls"].items():
        ci = c.get("ci95")
        lines.append(
            f"  {name:<10} real {f(c['real_acc'])}  control {f(c['acc'])}  gap {f(c['gap'])}"
            + (f" [{f(ci[0])}, {f(ci[1])}]" if ci else "")
            + f"  over {c['n']} items"
        )
        caf = c.get("cafe")
        if caf and caf.get("judged") == 0:  # no figure from no judgement
            lines.append(f"  {'':<10} CAFE under {name}: nothing judged (no Acc_per, no Err_per)")
        elif caf:
            lines.append(
                f"  {'':<10} CAFE under {name}: Acc_per {f(caf.get('acc_per'))}, Err_per "
                f"{f(caf.get('err_per'))}, neutral {f(neutral_share(caf))}"
                + (
                    " (the clip holds no event: every event reported is a hallucination)"
                    if name in SILENT_TRUTH
                    else " (judged against the clip that was played, none of whose events this "
                    "question needs: an event heard right is neutral, so Acc_per is 0 by "
                    "construction; Err_per is what was heard wrong)"
                )
            )
    return "\n".join(lines)

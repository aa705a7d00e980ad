"""`report/index.html`: one self-contained page per run (or per pair of runs) that opens from disk
with no network: inline CSS and JS, figures as inline SVG (drawn by cafe.reports.figures), and the
run's items as one JSON blob that a small vanilla script renders into an item browser.

The page shows whatever sections metrics.json holds, with labels for the keys we know and the key
itself for the rest, so a new section (or a new key in an old one) appears without a change here.
Everything is read through RunStore."""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import json
import math
import os
import re
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.adapters.token_counts import length_unit
from cafe.folder.status import run_failed
from cafe.jsontext import finite
from cafe.prompts import style_label
from cafe.records import Judgement, Prediction, Sample
from cafe.reports.names import model_name, shared_path, without_machine_paths
from cafe.store import MANIFEST, RunStore

WEB = Path(__file__).with_name("web")
INDEX = "index.html"
ATTENTION = "attention.json"
#: judge category -> Judgement field (cafe.metrics.cafe.FIELDS, spelled here to keep numpy out)
CATEGORIES = {
    "matched": "matched_events",
    "hallucinated": "error_matched",
    "misused": "error_use",
    "neutral": "neutral_events",
    "missed": "missed_events",
}
#: labels for the metrics keys we know; any other key is shown as itself
LABELS = {
    "total": "Accuracy, official rule (every (item, run) counted)",
    "official_denominator": "Official scripts' denominator (answered only)",
    "lenient": "Lenient (letter or option text mapped to a choice)",
    "acc": "Accuracy (%)",
    "parse_rate": "Parse rate (%)",
    "parse_status": "Parse status (item, run counts)",
    "unanswered": "Unanswered",
    "failed": "Failed",
    "unscorable": "Unscorable",
    "acc_per": "Acc_per ↑",
    "err_per": "Err_per ↓",
    "err_use": "Err_use ↓",
    "err_omit": "Err_omit ↓",
    "mode": "Mode",
    "ci95": "95% intervals",
    "runs": "Runs",
    "breakdowns": "Breakdowns",
    "pearson": "Pearson",
    "spearman": "Spearman",
    "accuracy": "Accuracy",
    "cafe": "CAFE perception metrics",
    "decay": "Perception decay",
    "attention": "Audio attention",
}
LOWER_BETTER = {"err_per", "err_use", "err_omit"}
CAFE_KEYS = ("acc_per", "err_per", "err_use", "err_omit")


def label(key: str) -> str:
    return LABELS.get(key, key.replace("_", " "))


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


#: how a missing value (None, or a ratio with nothing to divide by) reads on a page
MISSING = "–"


def _num(v: Any) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        v = None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return _e(MISSING if v is None else v)
    return f"{v:.4g}" if abs(v) < 0.01 and v else f"{v:,.2f}" if isinstance(v, float) else f"{v:,}"


# the folder ----------------------------------------------------------------------------------
@dataclass
class Source:
    """One run folder as the page shows it; everything read through RunStore."""

    key: str  # "A", "B"
    store: RunStore
    manifest: dict[str, Any]
    metrics: dict[str, Any]
    samples: list[Sample]
    predictions: list[Prediction]
    judgements: list[Judgement]
    manifest_sha256: str
    attention: dict[str, Any] | None = None
    stale: list[str] = field(default_factory=list)  # a line per stale section (not shown)

    @classmethod
    def load(cls, run_dir: str | Path, key: str = "A") -> Source:
        from cafe.reports.freshness import current_metrics

        store = RunStore(run_dir)
        manifest = store.read_manifest()
        att = store.path(ATTENTION)
        fresh = current_metrics(store)
        return cls(
            key,
            store,
            manifest,
            fresh.metrics,
            store.samples() if store.has_samples() else [],
            store.predictions(),
            store.judgements(),
            hashlib.sha256(store.path(MANIFEST).read_bytes()).hexdigest(),
            json.loads(att.read_text()) if att.exists() else None,
            fresh.notes(),
        )

    @property
    def model(self) -> str:
        return model_name(self.manifest) or self.store.root.name

    @property
    def bench(self) -> tuple[str, str]:
        b = self.manifest.get("bench") or {}
        if isinstance(b, str):
            return b, "unspecified"
        return str(b.get("name", "unknown")), str(b.get("version") or "unspecified")

    @property
    def title(self) -> str:
        return f"{self.model} ({self.bench[0]})"


# event highlighting ----------------------------------------------------------------------------
_BRACKET = re.compile(r"\s*\[([^\]]*)\]\s*$")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _free(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return all(span[1] <= a or span[0] >= b for a, b in taken)


def _exact(low: str, needle: str, taken: list[tuple[int, int]]) -> tuple[int, int] | None:
    start = low.find(needle)
    while start >= 0 and needle:
        span = (start, start + len(needle))
        if _free(span, taken):
            return span
        start = low.find(needle, start + 1)
    return None


def _near(text: str, low: str, event: str, taken: list[tuple[int, int]]) -> tuple[int, int] | None:
    """An event named as "label [onset-offset]" (rule judge) or "label (details)": the free
    mention of its label whose line carries a number closest to the onset (first one if none)."""
    onset = None
    m = _BRACKET.search(event)
    core = event
    if m:
        nums = _NUMBER.findall(m.group(1))
        onset = float(nums[0]) if nums else None
        core = event[: m.start()]
    core = _PAREN.sub("", core).strip().lower()
    if len(core) < 3:
        return None
    best: tuple[float, int, tuple[int, int]] | None = None
    for hit in re.finditer(r"\b" + re.escape(core) + r"\b", low):
        span = hit.span()
        if not _free(span, taken):
            continue
        line_start = text.rfind("\n", 0, span[0]) + 1
        line_end = text.find("\n", span[1])
        line = text[line_start : line_end if line_end >= 0 else len(text)]
        nums = [float(x) for x in _NUMBER.findall(line)] if onset is not None else []
        score = min((abs(x - onset) for x in nums), default=float("inf")) if nums else 1e9
        cand = (score, span[0], span)
        if best is None or cand[:2] < best[:2]:
            best = cand
    return best[2] if best else None


def event_spans(text: str | None, lists: dict[str, list[str]]) -> list[list[Any]]:
    """[start, end, category, event] for each judged event found in the model's text: exact
    mentions first (an LLM judge quotes the text), then by label and time (the rule judge names
    ground-truth events). Spans never overlap; missed events are by definition not in the text."""
    if not text:
        return []
    low = text.lower()
    taken: list[tuple[int, int]] = []
    found: dict[tuple[str, int], tuple[int, int]] = {}
    for finder in (
        lambda ev: _exact(low, ev.lower().strip(), taken),
        lambda ev: _near(text, low, ev, taken),
    ):
        for cat, events in lists.items():
            if cat == "missed":
                continue
            for i, ev in enumerate(events):
                if (cat, i) in found or not isinstance(ev, str):
                    continue
                span = finder(ev)
                if span:
                    found[(cat, i)] = span
                    taken.append(span)
    return sorted([a, b, cat, lists[cat][i]] for (cat, i), (a, b) in found.items())


# compact item data -----------------------------------------------------------------------------
def pack(value: Any, raw: str | None, min_len: int = 12) -> Any:
    """Parsed sections repeat the raw output; a string found in it is stored as {"@": [a, b]}
    (offsets into the raw text), which keeps a 1,000-item x 3-run report small."""
    if isinstance(value, str):
        if raw and len(value) >= min_len:
            at = raw.find(value)
            if at >= 0:
                return {"@": [at, at + len(value)]}
        return value
    if isinstance(value, dict):
        return {k: pack(v, raw, min_len) for k, v in value.items()}
    if isinstance(value, list):
        return [pack(v, raw, min_len) for v in value]
    return value


def data_roots(manifest: dict[str, Any]) -> list[Path]:
    """The folders a run's audio may come from: the benchmark metadata's folder and the
    --audio-root it ran with (what the loaders kept every clip inside)."""
    bench = manifest.get("bench") if isinstance(manifest.get("bench"), dict) else {}
    roots = []
    for value, folder in ((bench.get("source"), True), (bench.get("audio_root"), False)):
        if isinstance(value, str) and value and "://" not in value:
            p = Path(value).expanduser()
            roots.append((p.parent if folder else p).resolve())
    return roots


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    real = path.resolve()
    return any(real == r or r in real.parents for r in roots)


def _audio_entry(
    path: str, out_dir: Path, embed_s: float | None, roots: Sequence[Path] = ()
) -> dict[str, Any]:
    p = Path(path)
    entry: dict[str, Any] = {
        "src": urllib.parse.quote(Path(os.path.relpath(p, out_dir)).as_posix()),
        "name": p.name,
        "exists": p.exists(),
    }
    # only a clip inside the run's data roots is embedded: samples.jsonl may have been edited
    # to name any file on the machine, which the page would then carry inside it
    if embed_s and p.exists() and p.is_file() and _inside(p, roots):
        import soundfile as sf

        try:
            short = sf.info(str(p)).duration <= embed_s
        except RuntimeError:  # a format soundfile cannot read: keep the link
            short = False
        if short:
            mime = "audio/" + (p.suffix.lstrip(".").lower() or "wav").replace("mp3", "mpeg")
            entry["src"] = f"data:{mime};base64," + base64.b64encode(p.read_bytes()).decode()
            entry["embedded"] = True
    return entry


def _judgement(j: Judgement, raw_output: str | None) -> dict[str, Any]:
    lists = {cat: list(getattr(j, f) or []) for cat, f in CATEGORIES.items()}
    out: dict[str, Any] = {
        "status": j.status,
        "judge": j.judge,
        "lists": {k: v for k, v in lists.items() if v},
        "spans": [s[:3] for s in event_spans(raw_output, lists)],
    }
    if j.reason:
        out["reason"] = j.reason
    if j.raw_reply:
        out["raw"] = j.raw_reply
    return out


def _prediction(p: Prediction, src: int, j: Judgement | None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "s": src,
        "r": p.run_index,
        "out": p.raw_output,
        "sec": pack(p.sections, p.raw_output) if p.sections else {},
        "ans": p.answer,
        "ps": p.parse_status,
        "ok": bool(p.correct),
        "len": p.reasoning_tokens,
    }
    if p.error:
        d["err"] = p.error
    if p.front:  # a cascade: what its answering model read, beside the answer
        d["fr"] = {k: p.front.get(k) for k in ("text", "front", "latency_s", "cached")}
    if p.option_scores:
        d["os"] = p.option_scores
    if j is not None:
        d["j"] = _judgement(j, p.raw_output)
    return d


def breakdown_keys(sources: Sequence[Source]) -> list[str]:
    """Meta keys offered as filters: the accuracy section's breakdowns, else the benchmark's
    usual ones present in the items."""
    keys: list[str] = []
    for s in sources:
        for k in ((s.metrics.get("accuracy") or {}).get("breakdowns") or {}).keys():
            if k not in keys:
                keys.append(k)
    if not keys:
        seen = {k for s in sources for smp in s.samples for k in (smp.meta or {})}
        keys = [k for k in ("modality", "category", "task", "difficulty", "dimension") if k in seen]
    return keys


def _meta_value(v: Any) -> Any:
    if isinstance(v, list) and len(v) == 1:
        return v[0]
    return v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v)


def items_blob(
    sources: Sequence[Source], out_dir: Path, embed_audio_s: float | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every item of every source with its (source, run) predictions, in the first run's order."""
    keys = breakdown_keys(sources)
    items: dict[str, dict[str, Any]] = {}
    for si, s in enumerate(sources):
        roots = data_roots(s.manifest) if embed_audio_s else []
        judged = {(j.sample_id, j.run_index): j for j in s.judgements}
        for smp in s.samples:
            if smp.id in items:
                continue
            items[smp.id] = {
                "id": smp.id,
                "q": smp.question,
                "choices": smp.choices,
                "answer": smp.answer,
                "meta": {k: _meta_value(smp.meta.get(k)) for k in keys if k in (smp.meta or {})},
                "audio": [_audio_entry(a, out_dir, embed_audio_s, roots) for a in smp.audio],
                "preds": [],
            }
            if smp.error:
                items[smp.id]["error"] = smp.error
        for p in sorted(s.predictions, key=lambda p: (p.sample_id, p.run_index)):
            item = items.get(p.sample_id)
            if item is None:  # a prediction without its sample: still shown, never dropped
                item = items[p.sample_id] = {
                    "id": p.sample_id,
                    "q": None,
                    "choices": [],
                    "answer": None,
                    "meta": {},
                    "audio": [],
                    "preds": [],
                }
            item["preds"].append(_prediction(p, si, judged.get((p.sample_id, p.run_index))))
    return list(items.values()), keys


#: a page with more (item, run) units than this keeps each unit's output, parsed sections,
#: front, option scores and judge lists gzip-compressed in pages of PAGE_UNITS inside the file,
#: opened when an item is shown or the outputs are searched: a 30,000-unit page stays a few
#: MB and draws its list at once (perf/html_report_size.py); a small page keeps them inline
INLINE_UNITS = 2000
PAGE_UNITS = 500
#: the item list shows this many rows that pass the filters, then "list N more" (a table of
#: 30,000 rows took Chromium seconds to lay out)
LIST_STEP = 1000
_DETAIL_KEYS = ("out", "sec", "fr", "os")
_JUDGE_DETAIL_KEYS = ("lists", "spans", "raw")


def paged_details(
    items: list[dict[str, Any]], inline_units: int = INLINE_UNITS, page_units: int = PAGE_UNITS
) -> list[str]:
    """Move each unit's long fields out of ``items`` into gzip+base64 pages (returned); a unit
    keeps ``d`` = [page, index] and its judge's counts per category (``j.n``). None moved when
    the page holds ``inline_units`` units or fewer. Each page is scrubbed of secrets before it
    is compressed (the page's own scrubbing cannot read inside it)."""
    import base64
    import gzip

    from cafe.redaction import scrub_text

    preds = [p for it in items for p in it["preds"]]
    if len(preds) <= inline_units:
        return []
    pages: list[str] = []
    current: list[dict[str, Any]] = []

    def close() -> None:
        text = json.dumps(finite(current), ensure_ascii=False, separators=(",", ":"))
        pages.append(base64.b64encode(gzip.compress(scrub_text(text).encode(), mtime=0)).decode())
        current.clear()

    for p in preds:
        heavy = {k: p.pop(k) for k in _DETAIL_KEYS if k in p}
        if p.get("j"):
            heavy["j"] = {k: p["j"].pop(k) for k in _JUDGE_DETAIL_KEYS if k in p["j"]}
            p["j"]["n"] = {c: len(v) for c, v in (heavy["j"].get("lists") or {}).items()}
        p["d"] = [len(pages), len(current)]
        current.append(heavy)
        if len(current) == page_units:
            close()
    if current:
        close()
    return pages


def script_json(data: Any) -> str:
    """JSON safe inside <script>: no "<", ">" or "&" survives (so no "</script>" or "<!--"),
    and the result still parses as the same JSON."""
    # strict: a browser rejects NaN in the page's data, and a missing value is not a number
    text = json.dumps(finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# summary ----------------------------------------------------------------------------------------
def _generic(value: Any, depth: int = 0) -> str:
    """Any JSON value as nested HTML: dicts of scalars as key/value tables, dicts of dicts of
    scalars as one table (rows x keys), lists of scalars inline, lists of dicts as tables."""
    if isinstance(value, dict):
        if not value:
            return "<i>empty</i>"
        inner = list(value.values())
        if all(isinstance(v, dict) and v for v in inner) and all(
            all(not isinstance(x, (dict, list)) or _scalars(x) for x in v.values()) for v in inner
        ):
            cols = list(dict.fromkeys(k for v in inner for k in v))
            head = "".join(f"<th>{_e(label(c))}</th>" for c in cols)
            rows = "".join(
                f"<tr><th>{_e(k)}</th>" + "".join(f"<td>{_cell(v.get(c))}</td>" for c in cols)
                for k, v in value.items()
            )
            return f'<table class="kv"><tr><th></th>{head}</tr>{rows}</table>'
        rows = "".join(
            f"<tr><th>{_e(label(k))}</th><td>{_generic(v, depth + 1)}</td></tr>"
            for k, v in value.items()
        )
        return f'<table class="kv">{rows}</table>'
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            cols = list(dict.fromkeys(k for v in value for k in v))
            head = "".join(f"<th>{_e(label(c))}</th>" for c in cols)
            rows = "".join(
                "<tr>" + "".join(f"<td>{_cell(v.get(c))}</td>" for c in cols) + "</tr>"
                for v in value
            )
            return f'<table class="kv"><tr>{head}</tr>{rows}</table>'
        return _cell(value)
    return _cell(value)


def _scalars(x: Any) -> bool:
    return isinstance(x, list) and all(not isinstance(v, (dict, list)) for v in x)


def _cell(v: Any) -> str:
    if isinstance(v, list):
        if len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
            return f"[{_num(v[0])}, {_num(v[1])}]"
        return ", ".join(_num(x) if not isinstance(x, (dict, list)) else _generic(x) for x in v)
    if isinstance(v, dict):
        return _generic(v)
    return _num(v)


def _rate(v: Any) -> dict[str, Any] | None:
    """A {correct, total, acc} cell, directly or as the ``total`` of a labelled variant."""
    if isinstance(v, dict) and "acc" in v and not isinstance(v.get("acc"), dict):
        return v
    if isinstance(v, dict) and isinstance(v.get("total"), dict):
        return _rate(v["total"])
    return None


def _rate_rows(section: dict[str, Any]) -> str:
    """Rows for every rate the section holds: the headline ``total`` (named by the section's
    ``rule`` when it says which), and any variant beside it (official denominator, lenient, …)
    under its own ``label`` when it carries one."""
    out = ""
    for k, v in section.items():
        cell = _rate(v)
        if cell is None or k == "breakdowns":
            continue
        name = label(k)
        if k == "total" and isinstance(section.get("rule"), str):
            name = f"Accuracy ({section['rule']})"
        elif k == "official_denominator" and isinstance(section.get("official_label"), str):
            name = section["official_label"]  # answered only: official or not, as it says
        elif isinstance(v, dict) and isinstance(v.get("label"), str):
            name = v["label"]
        frac = f"{cell.get('correct', '?')}/{cell.get('total', '?')}"
        ci = cell.get("ci95") or (section.get("ci95") if k == "total" else None)
        ci_txt = f" <span class=ci>[{_num(ci[0])}, {_num(ci[1])}]</span>" if ci else ""
        out += (
            f"<tr><th>{_e(name)}</th><td class=big>{_num(cell.get('acc'))}</td>"
            f"<td>{_e(frac)}{ci_txt}</td></tr>"
        )
    return out


def accuracy_html(acc: dict[str, Any]) -> str:
    rows = _rate_rows(acc)
    for k in ("parse_rate", "unanswered", "failed", "unscorable"):
        if k in acc:
            rows += f"<tr><th>{_e(label(k))}</th><td>{_num(acc[k])}</td><td></td></tr>"
    status = acc.get("parse_status")
    if isinstance(status, dict) and status:
        counts = " · ".join(f"{k} {_num(v)}" for k, v in status.items())
        rows += f"<tr><th>{_e(label('parse_status'))}</th><td colspan=2>{_e(counts)}</td></tr>"
    runs = acc.get("runs") or {}
    if isinstance(runs, dict) and (runs.get("n") or 1) > 1:
        per = ", ".join(_num(x) for x in runs.get("per_run") or [])
        rows += (
            f"<tr><th>Per run (mean ± sample std)</th><td>{_num(runs.get('mean'))} ± "
            f"{_num(runs.get('std'))}</td>"
            f"<td>{_e(per)}</td></tr>"
        )
    return f'<table class="headline">{rows}</table>'


def cafe_html(caf: dict[str, Any]) -> str:
    from cafe.reports.leaderboard import judge_name

    ci = caf.get("ci95") or {}
    runs = caf.get("runs") if isinstance(caf.get("runs"), dict) else {}
    rows = ""
    for k in CAFE_KEYS:
        if k not in caf:
            continue
        c = ci.get(k)
        per = (runs or {}).get(k) or {}
        spread = (
            f"{_num(per.get('mean'))} ± {_num(per.get('std'))} (sample std) over "
            f"{per.get('n')} runs"
            if isinstance(per, dict) and (per.get("n") or 1) > 1
            else ""
        )
        rows += (
            f"<tr><th>{_e(label(k))}</th><td class=big>{_num(caf.get(k))}</td>"
            f"<td>{'[' + _num(c[0]) + ', ' + _num(c[1]) + ']' if c else '-'}</td>"
            f"<td>{_e(spread)}</td></tr>"
        )
    judge = caf.get("judge")
    lines = [
        f"mode <b>{_e(caf.get('mode', '?'))}</b>",
        f"judge <b>{_e(judge_name(judge) or '?')}</b>",
        f"template {_e(str(caf.get('template_hash', '?'))[:12])}",
    ]
    if ci.get("method"):
        lines.append(_e(ci["method"]))
    return (
        '<table class="headline"><tr><th></th><th>value</th><th>95% interval</th>'
        f"<th>over runs</th></tr>{rows}</table><p>{'; '.join(lines)}</p>"
    )


def decay_html(dec: dict[str, Any]) -> str:
    parts = []
    for k in ("pearson", "spearman"):
        c = dec.get(k) or {}
        r = c.get("r", c.get("rho"))
        if r is not None:
            parts.append(f"{label(k)} {_num(r)} (p = {_num(c.get('p'))})")
    st = dec.get("settings") or {}
    if "length_unit" in st:  # words for a run without a tokenizer, said before any number
        parts.insert(0, f"reasoning length in {st['length_unit']} ({st.get('token_counter')})")
    return f"<p>{_e('; '.join(parts))}</p>" if parts else ""


def listening_html(sec: dict[str, Any]) -> str:
    """One labelled row per listening control (accuracy with the real clip and with the
    control, the gap with its interval, CAFE under the control), like the other sections."""
    from cafe.reports.summary import neutral_share

    rows = ""
    for name, c in (sec.get("controls") or {}).items():
        if not isinstance(c, dict):
            continue
        ci = c.get("ci95")
        caf = c.get("cafe") if isinstance(c.get("cafe"), dict) else None
        under = "-"
        if caf and caf.get("judged"):
            under = (f"Acc_per {_num(caf.get('acc_per'))}, Err_per {_num(caf.get('err_per'))}, "
                     f"neutral {_num(neutral_share(caf))}")  # fmt: skip
        rows += (
            f"<tr><th>{_e(name)}</th><td>{_num(c.get('real_acc'))}</td>"
            f"<td>{_num(c.get('acc'))}</td><td class=big>{_num(c.get('gap'))}</td>"
            f"<td>{'[' + _num(ci[0]) + ', ' + _num(ci[1]) + ']' if ci else '-'}</td>"
            f"<td>{_e(c.get('n'))}</td><td>{_e(under)}</td></tr>"
        )
    if not rows:
        return ""
    return (
        '<table class="headline"><tr><th>control</th><th>real clip acc.</th>'
        "<th>control acc.</th><th>gap</th><th>95% interval</th><th>items</th>"
        f"<th>CAFE under the control</th></tr>{rows}</table>"
        f"<p>gap: accuracy with the real clip minus with the control; chance "
        f"{_num(sec.get('chance'))}</p>"
    )


HEADLINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "accuracy": accuracy_html,
    "cafe": cafe_html,
    "decay": decay_html,
    "listening": listening_html,
}


def failed_html(manifest: dict[str, Any]) -> str:
    why = manifest.get("status_reason") or "no usable item"
    return (
        f'<p class="failed"><strong>Run failed</strong>: {_e(why)}; it has no figures '
        "(the items below say why each failed).</p>"
    )


def sections_html(metrics: dict[str, Any]) -> str:
    """Each metrics.json section: its headline (for the sections we know) and every key it holds
    (collapsed), so new sections and keys show up as they are."""
    from cafe.reports.robustness import HEADLINES as ROBUSTNESS_HEADLINES  # choices, necessity

    out = []
    for name, sec in metrics.items():
        head = HEADLINES.get(name) or ROBUSTNESS_HEADLINES.get(name)
        body = head(sec) if head and isinstance(sec, dict) else ""
        out.append(
            f'<section class="metric" id="sec-{_e(name)}"><h3>{_e(label(name))}</h3>{body}'
            f"<details{'' if body else ' open'}><summary>all keys of <code>{_e(name)}</code>"
            f"</summary>{_generic(sec)}</details></section>"
        )
    return "\n".join(out)


def _get(d: Any, key: str) -> Any:
    return d.get(key) if isinstance(d, dict) else d


def protocol_html(s: Source) -> str:
    m = s.manifest
    prompt = m.get("prompt") or {}
    model = m.get("model") if isinstance(m.get("model"), dict) else {}
    caf = s.metrics.get("cafe") or {}
    from cafe.reports.leaderboard import judge_name

    rows = [
        ("model", s.model),
        ("adapter", (model or {}).get("adapter")),
        ("checkpoint", _get(m.get("checkpoint"), "path")),
        ("benchmark", "/".join(s.bench)),
        (
            "items",
            (m.get("bench") or {}).get("n_samples") if isinstance(m.get("bench"), dict) else None,
        ),
        ("prompt style", style_label(prompt.get("style") if isinstance(prompt, dict) else prompt)),
        (
            "template hash",
            str(prompt.get("template_hash", ""))[:12] if isinstance(prompt, dict) else None,
        ),
        ("runs per item", m.get("runs")),
        ("seeds", m.get("seeds")),
        ("generation", m.get("generation") or (model or {}).get("generation")),
        ("judge", judge_name(caf.get("judge")) or (m.get("judge") or {}).get("name")),
        ("run folder", shared_path(s.store.root)),
        ("manifest sha256", s.manifest_sha256),
        ("git commit", m.get("git_commit")),
        ("created", m.get("created")),
        ("status", m.get("status")),
    ]
    body = "".join(
        f"<tr><th>{_e(k)}</th><td>{_cell(v) if not isinstance(v, str) else _e(v)}</td></tr>"
        for k, v in rows
        if v not in (None, "", {}, [])
    )
    return f'<table class="kv">{body}</table>'


def signals_html(s: Source) -> str:
    """The "is it listening?" view (cafe.reports.signals) when the run has its parts."""
    from cafe.reports.signals import LISTENING_PARTS

    if not any(s.metrics.get(p) for p in LISTENING_PARTS):
        return ""
    from cafe.reports.signals import _label, run_signals

    sec = run_signals(s.store.root)
    sec["values"] = {_label(k): v for k, v in sec["values"].items()}
    for key in ("across_items", "across_correct_items"):
        for row in sec.get(key) or []:
            row["a"], row["b"] = _label(row["a"]), _label(row["b"])
    # the values open; the correlation tables (long, for the curious) folded away
    tables = {k: sec.pop(k) for k in ("across_items", "across_correct_items") if sec.get(k)}
    folded = "".join(
        f"<details class=corr><summary>correlations {_e(k.replace('_', ' '))}</summary>"
        f"{_generic(v)}</details>"
        for k, v in tables.items()
    )
    return (
        '<section class="metric" id="sec-signals"><h3>Is it listening? Accuracy, perception, '
        f"rubric, cues, controls</h3>{_generic(sec)}{folded}</section>"
    )


# figures ----------------------------------------------------------------------------------------
def figures_svg(s: Source) -> tuple[list[tuple[str, str]], list[str]]:
    """(caption, inline svg) for each figure the run's data allows; notes for the rest."""
    from cafe.reports import figures

    steps: list[tuple[str, Callable[[], Any]]] = []
    if s.metrics.get("decay"):
        steps.append(
            (
                "Figure 3: perception decay",
                lambda: figures.draw_figure3([(s.title, s.metrics["decay"])]),
            )
        )
    if s.metrics.get("accuracy"):
        steps.append(
            (
                "Accuracy by breakdown",
                lambda: figures.draw_breakdown(s.title, s.metrics["accuracy"]),
            )
        )
    if s.samples and s.predictions:
        steps.append(
            (
                "Figure 7: reasoning length by task group",
                lambda: figures.draw_figure7(
                    s.title,
                    figures.reasoning_length_by_group(s.samples, s.predictions),
                    s.manifest.get("token_counter"),
                ),
            )
        )
    if s.attention:
        steps.append(
            (
                "Figure 6: audio attention ratio",
                lambda: figures.draw_figure6([(s.model, s.attention)]),
            )
        )
    from cafe.reports.robustness import figures as robustness_figures

    steps += [(caption, draw) for caption, _, draw in robustness_figures(s.metrics)]
    out, notes = [], []
    for i, (caption, draw) in enumerate(steps):
        try:
            out.append((caption, figures.to_svg(draw(), f"{s.key}{i}")))
        except ValueError as e:
            notes.append(f"{caption}: {e}")
    return out, notes


# comparison -------------------------------------------------------------------------------------
def _flips(pa: dict, pb: dict, common: list) -> dict[str, list[list[Any]]]:
    """The (item, run)s both runs hold whose correctness flipped, each way."""
    flips: dict[str, list[list[Any]]] = {"right_to_wrong": [], "wrong_to_right": []}
    for k in common:
        if pa[k].correct and not pb[k].correct:
            flips["right_to_wrong"].append(list(k))
        elif pb[k].correct and not pa[k].correct:
            flips["wrong_to_right"].append(list(k))
    return flips


def compare_data(a: Source, b: Source, resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Flips per (item, run) and metric deltas B - A over the items both ran, with paired
    bootstrap 95% intervals (the same resampled items for both runs)."""
    import numpy as np

    from cafe.metrics.cafe import _ratios, counts_of
    from cafe.metrics.stats import bootstrap_ci

    pa = {(p.sample_id, p.run_index): p for p in a.predictions}
    pb = {(p.sample_id, p.run_index): p for p in b.predictions}
    common = sorted(set(pa) & set(pb))
    # deltas pair items, each side over every run it holds of them (a 3-run A against a 1-run
    # B compares A's mean over its runs, not its run 0); flips pair the (item, run)s both hold
    ids = sorted({k[0] for k in pa} & {k[0] for k in pb})
    pos = {sid: i for i, sid in enumerate(ids)}
    deltas: list[dict[str, Any]] = []

    def add(
        name: str,
        va: np.ndarray,
        vb: np.ndarray,
        stat: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ) -> None:
        full = np.arange(len(ids))[None, :]
        # a ratio with nothing to divide by (no Acc_per for a random baseline, no Err_omit for
        # a shuffled control) is missing: None, never NaN, and no delta or interval with it
        xa, xb = finite(float(stat(va, full)[0])), finite(float(stat(vb, full)[0]))
        ci = None
        if xa is not None and xb is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                ci = bootstrap_ci(
                    len(ids), lambda idx: stat(vb, idx) - stat(va, idx), resamples=resamples,
                    seed=seed,
                )  # fmt: skip
        ci = finite(list(ci)) if ci else None
        if ci is not None and None in ci:
            ci = None
        delta = None if xa is None or xb is None else xb - xa
        deltas.append({"metric": name, "a": xa, "b": xb, "delta": delta, "ci95": ci})

    if ids:
        acc = np.zeros((2, len(ids), 2))  # source, item, (correct, n)
        for src, preds in ((0, pa), (1, pb)):
            for k, p in preds.items():
                if k[0] in pos:
                    acc[src, pos[k[0]]] += (float(p.correct), 1.0)

        def acc_stat(v: np.ndarray, idx: np.ndarray) -> np.ndarray:
            s = v[idx].sum(axis=1)
            return 100.0 * s[..., 0] / s[..., 1]

        add("acc", acc[0], acc[1], acc_stat)
        ja = {(j.sample_id, j.run_index): j for j in a.judgements if j.status == "ok"}
        jb = {(j.sample_id, j.run_index): j for j in b.judgements if j.status == "ok"}
        ja = {k: j for k, j in ja.items() if k in pa and k[0] in pos}
        jb = {k: j for k, j in jb.items() if k in pb and k[0] in pos}
        if ja and jb:
            cnt = np.zeros((2, len(ids), 5))
            for src, js in ((0, ja), (1, jb)):
                for k, j in js.items():
                    cnt[src, pos[k[0]]] += counts_of(j)
            for name in CAFE_KEYS:

                def cafe_stat(v: np.ndarray, idx: np.ndarray, name: str = name) -> np.ndarray:
                    return _ratios(v[idx].sum(axis=1))[name]

                add(name, cnt[0], cnt[1], cafe_stat)
    return {
        "a": a.title,
        "b": b.title,
        "pairs": len(common),
        "items": len(ids),
        "runs": {"a": len({k[1] for k in pa}), "b": len({k[1] for k in pb})},
        "flips": _flips(pa, pb, common),
        "deltas": deltas,
        "method": f"paired percentile bootstrap over items, {resamples} resamples, seed {seed}",
    }


def _runs_note(runs: dict[str, int]) -> str:
    """What a comparison of folders with different run counts compares (said, never silent)."""
    a, b = runs.get("a"), runs.get("b")
    if a == b or a is None or b is None:
        return ""
    return (
        f" A holds {a} run(s), B {b}: each metric is over every run of each side (its mean over "
        "runs per item), the flips over the runs both hold."
    )


def compare_html(c: dict[str, Any]) -> str:
    rows = ""
    for d in c["deltas"]:
        ci, delta = d["ci95"], d["delta"]
        lower = d["metric"] in LOWER_BETTER
        if delta is None:  # one side has no value: nothing to compare
            cls, shown = "missing", MISSING
        else:
            good = delta < 0 if lower else delta > 0
            cls = "" if abs(delta) < 1e-12 else ("up" if good else "down")
            shown = f"{delta:+.2f}"
        rows += (
            f"<tr><th>{_e(label(d['metric']))}</th><td>{_num(d['a'])}</td><td>{_num(d['b'])}</td>"
            f"<td class='{cls}'>{shown}</td>"
            f"<td>{'[' + _num(ci[0]) + ', ' + _num(ci[1]) + ']' if ci else MISSING}</td></tr>"
        )

    def flip_list(name: str, pairs: list[list[Any]]) -> str:
        links = " ".join(
            f'<a href="#item={urllib.parse.quote(str(sid))}&amp;run=0.{r}">{_e(sid)}#{r}</a>'
            for sid, r in pairs
        )
        return f"<p><b>{_e(name)}</b>: {len(pairs)} <span class=flips>{links}</span></p>"

    return (
        f"<p>A = {_e(c['a'])}, B = {_e(c['b'])}; {c['pairs']} (item, run) pairs over "
        f"{c['items']} items in both.{_runs_note(c.get('runs') or {})}</p>"
        '<table class="headline" id="deltas"><tr><th>metric</th><th>A</th><th>B</th>'
        f"<th>B − A</th><th>95% interval</th></tr>{rows}</table><p class=note>{_e(c['method'])}</p>"
        + flip_list("right → wrong", c["flips"]["right_to_wrong"])
        + flip_list("wrong → right", c["flips"]["wrong_to_right"])
    )


# the page ---------------------------------------------------------------------------------------


def page(title: str, subtitle: str, body: str, data: Any, js: str, nav_extra: str = "") -> str:
    """The run report page; the values it carries from the run folders are scrubbed of
    secrets here (the body's HTML and the data's JSON text; never the page's own script, which
    the Content-Security-Policy names by its hash)."""
    from cafe.redaction import scrub_text
    from cafe.reports.page import render_page

    return render_page(
        title=scrub_text(title),
        subtitle=scrub_text(subtitle),
        body=scrub_text(body),
        data=scrub_text(script_json(data)),
        js=js,
        nav=f'<a href="#summary">Summary</a> {nav_extra}<a href="#figures">Figures</a> '
        '<a href="#items">Items</a>',
    )


@dataclass
class HtmlReport:
    path: Path
    notes: list[str] = field(default_factory=list)


def _run_parts(
    s: Source, tag: str, draw: bool, into: tuple[list[str], dict[str, list[str]], list[str]]
) -> None:
    """One run's summary section, figures (by caption) and notes, added to ``into`` (summary,
    figures, notes); ``tag`` names the run when the page shows two."""
    summary, figs, notes = into
    failed = run_failed(s.manifest)  # nothing usable: no figure of it, a line saying why
    shown = failed_html(s.manifest) if failed else sections_html(s.metrics)
    shown += "".join(f'<p class="stale">{_e(line)}</p>' for line in s.stale)
    notes += [f"{s.store.root}: {line}" for line in s.stale]
    summary.append(
        f'<section class="run"><h2>{_e(s.title)}{_e(tag)}</h2>'
        f"<h3>Protocol</h3>{protocol_html(s)}{signals_html(s)}{shown}"
        "</section>"
    )
    svgs, fig_notes = figures_svg(s) if draw and not failed else ([], [])
    notes += [f"{s.key}: {n}" if tag else n for n in fig_notes]
    for cap, svg in svgs:  # by caption: a comparison shows A's and B's side by side
        figs.setdefault(cap, []).append(
            f'<figure><div class="svg">{svg}</div><figcaption>{_e(cap + tag)}</figcaption></figure>'
        )
    if not s.metrics:
        notes.append(f"{s.store.root}: metrics.json holds no section yet (`cafe run`)")


def _source_data(s: Source) -> dict[str, Any]:
    """What the page's script knows of one run."""
    return {
        "key": s.key,
        "title": s.title,
        "model": s.model,
        "bench": list(s.bench),
        "folder": shared_path(s.store.root),
        "manifest_sha256": s.manifest_sha256,
        "runs": s.manifest.get("runs"),
        # reasoning lengths: tokens, or words for a run without a tokenizer
        "unit": length_unit(s.manifest.get("token_counter")),
    }


def write_html_report(
    run_dir: str | Path,
    compare_with: str | Path | None = None,
    out: str | Path | None = None,
    embed_audio_s: float | None = None,
    draw: bool = True,
    inline_units: int = INLINE_UNITS,
    list_step: int = LIST_STEP,
) -> HtmlReport:
    """Write report/index.html for RUN_DIR (with a comparison against ``compare_with`` when
    given); ``out`` is the folder to write into. Clips up to ``embed_audio_s`` seconds are
    embedded as data URIs; others are relative links from the page to the audio file."""
    sources = [Source.load(run_dir, "A")]
    if compare_with is not None:
        sources.append(Source.load(compare_with, "B"))
    out_dir = Path(out) if out else sources[0].store.report_dir
    if not out:
        from cafe.safe_files import refuse_links_out

        refuse_links_out(sources[0].store.root, out_dir)
    from cafe.safe_files import safe_dir, write_file

    safe_dir(out_dir)
    items, keys = items_blob(sources, out_dir.resolve(), embed_audio_s)
    pages = paged_details(items, inline_units)  # after every count above was taken
    notes: list[str] = []
    summary: list[str] = []
    figs: dict[str, list[str]] = {}  # by caption: a comparison shows A's and B's side by side
    for s in sources:
        _run_parts(s, f" ({s.key})" if len(sources) > 1 else "", draw, (summary, figs, notes))
    grid = ' class="pair"' if len(sources) > 1 else ""  # the two runs side by side
    body = [f'<section id="summary"><h2>Summary</h2><div{grid}>{"".join(summary)}</div></section>']
    nav = ""
    comparison = None
    if len(sources) == 2:
        comparison = compare_data(*sources)
        body.append(
            f'<section id="compare"><h2>Comparison: B − A</h2>{compare_html(comparison)}</section>'
        )
        from cafe.reports.compare import tests_section  # `cafe compare`'s paired tests

        body.append(tests_section(sources[0].store.root, sources[1].store.root))
        nav = '<a href="#compare">Comparison</a> '
    shown_figs = "".join(
        f'<div class="figpair">{"".join(f)}</div>' if len(sources) > 1 else "".join(f)
        for f in figs.values()
    )
    body.append(
        f'<section id="figures"><h2>Figures</h2>{shown_figs or "<p>none</p>"}'
        + "".join(f"<p class=note>{_e(n)}</p>" for n in notes)
        + "</section>"
    )
    body.append(
        '<section id="items"><h2>Items</h2><div id="filters"></div><div id="browser">'
        '<div id="list"></div><div id="detail"><p class=note>Pick an (item, run).</p></div>'
        "</div></section>"
    )
    data = {
        "sources": [_source_data(s) for s in sources],
        "breakdowns": keys,
        "categories": list(CATEGORIES),
        "items": items,
        "pages": pages,
        "list_step": list_step,
        "comparison": comparison,
    }
    title = " vs ".join(s.title for s in sources)
    subtitle = (
        f"cafe run report · written {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC · "
        f"{sum(len(i['preds']) for i in items)} (item, run) outputs over {len(items)} items"
    )
    js = (WEB / "report.js").read_text(encoding="utf-8")
    path = out_dir / INDEX
    text = page(title, _e(subtitle), "\n".join(body), data, js, nav)
    # a page meant to be shared: the run folders as the working folder names them
    text = without_machine_paths(text, *(s.store.root for s in sources))
    write_file(path, text)
    return HtmlReport(path, notes)

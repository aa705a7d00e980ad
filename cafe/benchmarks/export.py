"""Export a run folder's predictions in the official scripts' input format: the metadata items
with the prediction added under the benchmark's ``export_format.prediction_key`` (MMAU
evaluation.py: `model_output`; MMAR code/evaluation.py: `answer_prediction`), as a JSON list
(.json) or JSONL (.jsonl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cafe.benchmarks.base import ExportFormat, benchmark_class
from cafe.benchmarks.metadata import ADDED_META
from cafe.benchmarks.string_match import official_text
from cafe.errors import CafeUsageError
from cafe.jsontext import strict_dumps
from cafe.records import Sample
from cafe.safe_files import safe_dir, write_file
from cafe.store import RunStore


def official_item(sample: Sample, fmt: ExportFormat) -> dict[str, Any]:
    """The metadata item as the official file has it (original category form restored, fields
    the loader added left out), keys in the official order."""
    audio_field = fmt.audio_field
    meta = dict(sample.meta)
    if fmt.layout:  # the row as the benchmark's inference script writes it
        own = {"question": sample.question, fmt.prediction_key: ""}
        if sample.audio:
            own[audio_field] = sample.audio[0]
        return {k: meta[k] if k in meta else own.get(k) for k in fmt.layout}
    item: dict[str, Any] = {"id": sample.id}
    if audio_field in meta:
        item[audio_field] = meta.pop(audio_field)
    elif sample.audio:
        item[audio_field] = sample.audio[0]
    item["question"] = sample.question
    item["choices"] = list(sample.choices)
    if sample.answer is not None:
        item["answer"] = sample.answer
    if "category_original" in meta:
        meta["category"] = meta["category_original"]
    for k, v in meta.items():
        if k not in ADDED_META and k not in fmt.leave_out:
            item[k] = v
    return item


def export_run(
    run_dir: str | Path,
    fmt: str,
    out: str | Path,
    run_index: int = 0,
    field: str | None = None,
    skip_unanswered: bool = False,
) -> dict[str, int]:
    """Write the export in benchmark ``fmt``'s format (``Benchmark.export_format``); returns
    counts (items, answered, unanswered). The prediction is the
    model's answer text (``field="answer"``: the answer section, unmodified, so the official
    scripts on this file reproduce the headline item for item), the answer mapped to a choice
    (``field="choice"``: the lenient figure) or the raw model output (``field="raw"``); None:
    the benchmark's default (``ExportFormat.default_field``: the whole output where the official
    script reads the whole response). Unanswered and failed items get the benchmark's
    ``unanswered`` value ("" : the official script counts them wrong; None: a null, read as the
    script reads one); with ``skip_unanswered`` they get no key and the official script skips
    them (its own default), or, for a benchmark whose official file has a fixed layout
    (``ExportFormat.layout``), their rows are left out. A ``.parquet`` out writes a parquet file
    (MMAU-Pro's input); a benchmark whose official layout is several files (SAKURA) writes them
    into the folder ``out``."""
    export = benchmark_class(fmt).export_format
    if export is None:
        raise CafeUsageError(f"{fmt} has no official scorer to export for: {_with_formats()}")
    store = RunStore(run_dir)
    samples = store.samples()  # RunFolderError names the folder
    key = export.prediction_key
    field = field or export.default_field
    every = store.predictions()
    present = sorted({p.run_index for p in every})
    if present and run_index not in present:  # else every item exports as unanswered, exit 0
        raise CafeUsageError(f"{run_dir}: no run {run_index} (runs present: {present})")
    preds = {p.sample_id: p for p in every if p.run_index == run_index}
    items, answered, triples = [], 0, []
    for s in samples:
        item = official_item(s, export)
        p = preds.get(s.id)
        value = None
        if p is not None and p.error is None:
            value = {"answer": official_text(p), "choice": p.answer, "raw": p.raw_output}[field]
        if value is not None:
            answered += 1
            item[key] = value
        elif not skip_unanswered:
            item[key] = export.unanswered
        elif export.layout:  # the official script never sees it: in no denominator
            continue
        else:
            item.pop(key, None)
        items.append(item)
        triples.append((s, item, value))
    out = Path(out)
    safe_dir(out.parent)
    if export.writer is not None:
        export.writer(triples, out)
    elif out.suffix == ".parquet":
        write_parquet(out, items)
    elif out.suffix == ".jsonl":
        text = "".join(strict_dumps(i, ensure_ascii=False) + "\n" for i in items)
        write_file(out, text)
    else:
        from cafe.redaction import scrub_text

        write_file(out, scrub_text(strict_dumps(items, indent=2, ensure_ascii=False) + "\n"))
    return {"items": len(items), "answered": answered, "unanswered": len(samples) - answered}


def write_parquet(out: Path, items: list[dict[str, Any]]) -> None:
    """The items as one parquet table (column types inferred: a dict column becomes a struct
    with every key any row has, as the official test.parquet holds kwargs)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise CafeUsageError("writing parquet needs pyarrow (pip install pyarrow; "
                             "cafe-audio-eval[hf] has it)") from None  # fmt: skip
    try:
        table = pa.Table.from_pylist(items)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise CafeUsageError(f"{out}: the items do not fit one parquet table ({e})") from None
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_file(out, sink.getvalue().to_pybytes())  # whole or not at all


def _with_formats() -> str:
    """'pass --bench A or --bench B': the registered benchmarks that declare an export format."""
    from cafe.benchmarks import BENCHMARKS

    names = []
    for name in BENCHMARKS.names():
        try:
            if BENCHMARKS.get(name).export_format is not None:
                names.append(name)
        except ImportError:  # a plugin whose package is broken: not offered
            continue
    return "pass " + " or ".join(f"--bench {n}" for n in names)


def export(
    run_dir: str | Path,
    out: str | Path,
    bench: str | None = None,
    run_index: int = 0,
    field: str | None = None,
    skip_unanswered: bool = False,
) -> dict[str, int]:
    """Export a run folder's predictions as ``bench``'s official scorer input (default: the
    run's own benchmark) -> counts (items, answered, unanswered). See export_run."""
    if bench is None:
        try:
            bench = RunStore(run_dir).read_manifest().get("bench", {}).get("name")
        except FileNotFoundError:
            bench = None
        if not bench:
            raise CafeUsageError(f"the run names no benchmark: {_with_formats()}")
    else:
        from cafe.benchmarks import BENCHMARKS

        try:
            BENCHMARKS.get(bench)  # an explicit name must be a known benchmark (did you mean…)
        except KeyError as e:
            raise CafeUsageError(str(e)) from None
    return export_run(run_dir, bench, out, run_index, field, skip_unanswered)

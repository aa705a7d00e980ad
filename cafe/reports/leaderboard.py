"""leaderboard.yaml: the paper's published rows plus rows added from our own run folders.

Which file: ``--leaderboard FILE``, else ``$CAFE_LEADERBOARD``, else ``./leaderboard.yaml`` in the
working directory, else the copy shipped in the package (``cafe/reports/leaderboard.yaml``, the
paper's rows only). The file is validated against ``leaderboard_schema.json`` on every load; a bad
row gives one error naming its index, model and field.

The shipped file is read-only package data: ``leaderboard add`` writes the user's file (the same
order without the package's copy; created from the paper's rows on first use) and refuses any
path inside the installed package. An add is one transaction under the file's own lock
(cafe.locking): parallel adds all land, and a full disk leaves the old file whole."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from cafe.errors import CafeError
from cafe.reports.names import model_name, served_model, shared_path
from cafe.store import MANIFEST

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # cafe/: package data, never written
SCHEMA_PATH = Path(__file__).with_name("leaderboard_schema.json")
PACKAGED = Path(__file__).with_name("leaderboard.yaml")
DEFAULT_NAME = "leaderboard.yaml"
# the paper's group order; Baseline (reference listeners, synth runs) goes last
# (Cascade: a recognizer or captioner, then a text model; MPAR²: checkpoints cafe train wrote)
GROUP_ORDER = ("LALM", "LARM", "Commercial", "Cascade", "Ours", "MPAR²", "Ablation", "Baseline")
CAFE_METRICS = ("acc_per", "err_per", "err_use", "err_omit")


class LeaderboardError(CafeError):
    """A leaderboard file or run folder that cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class Marker:
    symbol: str
    meaning: str
    tables: tuple[int, ...] = ()  # empty: shown in every table

    def shown_in(self, table: int) -> bool:
        return not self.tables or table in self.tables


@dataclass
class Row:
    model: str
    group: str
    benchmark: str
    version: str
    metrics: dict[str, float | None]
    source: dict[str, Any]
    date: str
    markers: list[str] = field(default_factory=list)
    label: str | None = None
    intervals: dict[str, list[float]] = field(default_factory=dict)
    notes: str | None = None
    index: int = -1  # position in the file's rows
    #: the leaderboard file's folder, which a run row's relative ``run_dir`` is read against
    base: Path | None = field(default=None, repr=False, compare=False)

    @property
    def folder(self) -> Path | None:
        """The run folder a row was added from: ``run_dir`` relative to the leaderboard file's
        folder (how `leaderboard add` writes it), else as written (older rows: absolute, or
        relative to the working folder)."""
        if self.is_paper or not self.source.get("run_dir"):
            return None
        d = Path(str(self.source["run_dir"]))
        if d.is_absolute() or self.base is None:
            return d
        near = self.base / d
        return near if near.exists() or not d.exists() else d

    @property
    def display(self) -> str:
        return self.label or self.model

    @property
    def is_paper(self) -> bool:
        return self.source.get("kind") == "paper"

    def to_yaml_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"model": self.model}
        if self.label:
            d["label"] = self.label
        d.update(
            group=self.group,
            benchmark=self.benchmark,
            version=self.version,
            metrics=self.metrics,
            markers=self.markers,
        )
        if self.intervals:
            d["intervals"] = self.intervals
        d.update(source=self.source, date=self.date)
        if self.notes:
            d["notes"] = self.notes
        return d


@dataclass
class Leaderboard:
    path: Path
    rows: list[Row]
    markers: dict[str, Marker]
    layout: dict[int, list[str]]
    #: the paper's figures drawn from published numbers ("1": Figure 1), as the file holds them
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def select(
        self, benchmark: str | None = None, version: str | None = None, model: str | None = None
    ) -> list[Row]:
        out = []
        for r in self.rows:
            if benchmark and r.benchmark != benchmark:
                continue
            if version and r.version != version:
                continue
            if model and model.lower() not in (r.model.lower(), r.display.lower()):
                continue
            out.append(r)
        return out


@cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def resolve_path(path: str | Path | None = None) -> Path:
    if path:
        return Path(path)
    env = os.environ.get("CAFE_LEADERBOARD")
    if env:
        return Path(env)
    local = Path.cwd() / DEFAULT_NAME
    return local if local.exists() else PACKAGED


def _field_of(error: Any) -> str:
    """Dotted field path of a jsonschema error, below the row (required/extra keys included)."""
    parts = [str(p) for p in error.absolute_path]
    if parts[:1] == ["rows"]:
        parts = parts[2:]
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else "?"
        parts.append(missing)
    elif error.validator == "additionalProperties" and "'" in error.message:
        parts.append(error.message.split("'")[1])
    return ".".join(parts) or "<row>"


def _describe(doc: Any, error: Any, where: str) -> str:
    path = list(error.absolute_path)
    if len(path) >= 2 and path[0] == "rows" and isinstance(path[1], int):
        i = path[1]
        row = doc["rows"][i] if isinstance(doc.get("rows"), list) else {}
        model = row.get("model", "?") if isinstance(row, dict) else "?"
        return f"{where}: rows[{i}] ({model}): field {_field_of(error)}: {error.message}"
    return f"{where}: field {'.'.join(map(str, path)) or '<top>'}: {error.message}"


def validate(doc: Any, where: str = DEFAULT_NAME) -> None:
    """Raise LeaderboardError naming the first bad row (index + model) and field."""
    import jsonschema

    if not isinstance(doc, dict):
        raise LeaderboardError(f"{where}: expected a mapping with schema_version and rows")
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        # deepest error of the first failing place: names the field, not just the row
        first = errors[0]
        same = [e for e in errors if list(e.absolute_path)[:2] == list(first.absolute_path)[:2]]
        best = max(same, key=lambda e: len(e.absolute_path))
        more = len(errors) - 1
        extra = f" (and {more} more problem{'s' * (more > 1)})" if more else ""
        raise LeaderboardError(_describe(doc, best, where) + extra)
    defined = {m["symbol"] for m in doc.get("markers", [])}
    for i, row in enumerate(doc["rows"]):
        for sym in row.get("markers", []):
            if sym not in defined:
                raise LeaderboardError(
                    f"{where}: rows[{i}] ({row['model']}): field markers: {sym!r} is not defined "
                    f"in the top-level markers list"
                )


def parse(doc: dict[str, Any], path: Path) -> Leaderboard:
    validate(doc, str(path))
    rows = []
    for i, d in enumerate(doc["rows"]):
        rows.append(Row(**{k: v for k, v in d.items()}, index=i, base=path.resolve().parent))
    markers = {
        m["symbol"]: Marker(m["symbol"], m["meaning"], tuple(m.get("tables", ())))
        for m in doc.get("markers", [])
    }
    layout = {int(k): list(v) for k, v in (doc.get("layout") or {}).items()}
    figures = {str(k): dict(v) for k, v in (doc.get("figures") or {}).items()}
    for k, f in figures.items():
        lengths = {len(x["values"]) for x in f["series"]}
        if lengths != {len(f["x"])}:
            raise LeaderboardError(
                f"{path}: field figures.{k}: every series needs one value per x position "
                f"({len(f['x'])}), got {sorted(lengths)}"
            )
    return Leaderboard(path=path, rows=rows, markers=markers, layout=layout, figures=figures)


def load_leaderboard(path: str | Path | None = None) -> Leaderboard:
    p = resolve_path(path)
    if not p.exists():
        raise LeaderboardError(f"{p}: no such leaderboard file (give --leaderboard FILE)")
    return parse(_load_yaml(p.read_text(encoding="utf-8"), p), p)


# rows from run folders ----------------------------------------------------------------------
def _r2(x: Any) -> float | None:
    return None if x is None else round(float(x), 2)


def _bench_of(manifest: dict[str, Any]) -> tuple[str, str]:
    bench = manifest.get("bench") or {}
    if isinstance(bench, str):
        return bench, "unspecified"
    return str(bench.get("name", "unknown")), str(bench.get("version") or "unspecified")


def judge_name(judge: Any) -> str | None:
    """The judge's identity, whether the cafe section stores a name or a dict describing it."""
    if isinstance(judge, dict):
        return judge.get("judge") or judge.get("name") or judge.get("model")
    return None if judge is None else str(judge)


def listening_metrics(metrics_doc: dict[str, Any]) -> dict[str, float | None]:
    """The "is it listening?" numbers of a run: MMAR rubric score, cue recall (offline matcher
    and judge) and the listening gap per control (gap_<control>, may be negative)."""
    out: dict[str, float | None] = {}
    rub = metrics_doc.get("rubric") or {}
    out["rubric"] = _r2(rub.get("score"))
    cues = metrics_doc.get("cues") or {}
    out["cue_recall"] = _r2((cues.get("offline") or {}).get("recall"))
    out["cue_recall_judge"] = _r2((cues.get("judge") or {}).get("recall"))
    for name, c in ((metrics_doc.get("listening") or {}).get("controls") or {}).items():
        out["gap_" + name.replace("-", "_")] = _r2(c.get("gap"))
    return out


def served_group(served: str) -> str | None:
    """The table group of the card that names the served model (by card name or checkpoint):
    a vLLM-served Qwen2-Audio is an LALM, whatever adapter talked to it."""
    from cafe.adapters.cards import load_cards

    for card in load_cards().values():
        if served in (card.name, card.checkpoint) and card.group in GROUP_ORDER:
            return card.group
    return None


def run_coverage(manifest: dict[str, Any], where: Any = MANIFEST) -> dict[str, Any] | None:
    """{"items": run, "of": in the benchmark} for a partial (--limit) run; None for a whole one.
    ("of" is None for folders written before the manifest recorded the benchmark's size.) A
    count that is not one (``"7"``) is a RunFolderError naming ``where`` and the field."""
    bench = manifest.get("bench") or {}
    if not isinstance(bench, dict) or not manifest.get("limit"):
        return None
    n, of = (_count(bench.get(k), f"{where}: field bench.{k}") for k in ("n_samples", "n_items"))
    if of is not None and n is not None and n >= of:
        return None
    return {"items": n, "of": of}


def _count(value: Any, field: str) -> int | None:
    from cafe.errors import RunFolderError
    from cafe.records import kind_of

    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise RunFolderError(f"{field}: expected a count of items, found {kind_of(value)} "
                         f"{str(value)[:40]!r}; restore the manifest from a backup")  # fmt: skip


def run_digests(store: Any, manifest: dict[str, Any]) -> dict[str, Any]:
    """What a row from this folder is computed from, each as a digest (kept with the row:
    `leaderboard verify` compares them again)."""
    from cafe import __version__
    from cafe.errors import ConfigError
    from cafe.store import _DAMAGED, SAMPLES, read_regular

    samples = store.path(SAMPLES)
    try:  # a damaged folder says so as every reader of it does
        samples_bytes = read_regular(samples) if samples.exists() else None
    except OSError as e:
        raise ConfigError(f"{samples}: cannot read ({e.strerror}); {_DAMAGED}") from None
    bench = manifest.get("bench") if isinstance(manifest.get("bench"), dict) else {}
    spec = json.dumps(manifest.get("spec"), sort_keys=True, default=str).encode()
    return {
        "samples": None if samples_bytes is None else hashlib.sha256(samples_bytes).hexdigest(),
        "predictions": store.input_digest("predictions").get("digest"),
        "judgements": store.input_digest("judgements").get("digest"),
        "spec": hashlib.sha256(spec).hexdigest(),
        "bench_data": (bench or {}).get("sha256"),
        "cafe_version": __version__,
    }


def row_from_run(run_dir: str | Path, group: str | None = None, name: str | None = None) -> Row:
    """A leaderboard row for one run folder: its metrics plus provenance (path, manifest hash)."""
    from cafe.store import RunStore

    store = RunStore(run_dir)
    manifest, acc, caf, metrics_doc = _run_sections(store)
    model, grp = _model_and_group(store, manifest, group, name)
    bench, version = _bench_of(manifest)
    markers: list[str] = []
    judged = metrics_doc.get("judged_accuracy") or {}
    extra_source: dict[str, Any] = {}
    if judged and acc:
        # the paper's † rows: accuracy as an LLM judge read the outputs, marked and footnoted
        # with the judge and the official figure it stands in for
        extra_source = {
            "judged_by": judge_name(judged.get("judge")),
            "official_acc": _r2((acc.get("total") or {}).get("acc")),
        }
        acc = {**acc, "total": judged.get("total"), "breakdowns": judged.get("breakdowns")}
        acc.pop("ci95", None)
        markers.append("†")
    official = metrics_doc.get("official") or {}
    if official and acc and not judged:
        acc = _official_acc(acc, official, extra_source)
    metrics, intervals = _row_metrics(acc, caf, metrics_doc, bench)
    if not metrics:
        why = extra_source.get("acc_absent")
        raise LeaderboardError(
            f"{store.root}: metrics.json holds no numbers to add"
            + (f" (the official accuracy is absent: {why})" if why else "")
        )
    source: dict[str, Any] = {
        "kind": "run",
        "run_dir": shared_path(run_dir),
        "manifest_sha256": hashlib.sha256(store.path(MANIFEST).read_bytes()).hexdigest(),
    }
    source["digests"] = run_digests(store, manifest)
    prompt = manifest.get("prompt") or {}
    extras = {
        "prompt_style": prompt.get("style") if isinstance(prompt, dict) else prompt,
        "runs": manifest.get("runs"),
        "judge": judge_name(caf.get("judge")),
        "cafe_mode": caf.get("mode"),
        "identical_runs": True if acc.get("identical_runs") else None,
        "coverage": run_coverage(manifest, store.path(MANIFEST)),
        # a sweep point's budget (cafe sweep): rows of one model at several budgets told apart
        "reasoning_budget": ((manifest.get("spec") or {}).get("generation") or {}).get(
            "reasoning_budget"
        ),
    }
    source.update({k: v for k, v in extras.items() if v is not None})
    source.update(extra_source)
    date = _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    return Row(
        model=str(model),
        group=grp,
        benchmark=bench,
        version=version,
        metrics=metrics,
        source=source,
        date=date,
        intervals=intervals,
        markers=markers,
    )


def _run_sections(store: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Any]:
    """(manifest, accuracy, cafe, all of metrics.json) of a folder worth a row; else one line
    saying why not (no scores, a judge that mostly failed)."""
    from cafe.folder.sections import AccuracySection, CafeSection, SectionError
    from cafe.folder.status import run_failed

    try:
        manifest = store.read_manifest()
    except FileNotFoundError as e:
        raise LeaderboardError(str(e)) from None
    if run_failed(manifest):  # nothing usable: a row would print 0.00 for a run that failed
        why = manifest.get("status_reason") or "no usable item"
        raise LeaderboardError(f"{store.root}: the run failed ({why}); it has no row to add")
    from cafe.reports.freshness import current_metrics

    fresh = current_metrics(store)
    if fresh.stale:  # figures of other records than the folder's: never a row
        name, why = sorted(fresh.stale.items())[0]
        more = (
            f" (and {len(fresh.stale) - 1} more stale section(s))" if len(fresh.stale) > 1 else ""
        )
        raise LeaderboardError(
            f"{store.root}: metrics.json's {name!r} section is stale ({why}){more}; recompute it "
            "(`cafe run` on the folder rescores it) before adding the run"
        )
    try:  # typed and version-checked: a folder from a newer cafe says so
        acc_s, caf_s = store.read_section(AccuracySection), store.read_section(CafeSection)
    except SectionError as e:
        raise LeaderboardError(str(e)) from None
    acc = acc_s.to_dict() if acc_s else {}
    caf = caf_s.to_dict() if caf_s else {}
    if not acc and not caf:
        raise LeaderboardError(
            f"{store.root}: metrics.json has no 'accuracy' or 'cafe' section "
            "(run `cafe run` to score it, `cafe judge` for CAFE)"
        )
    counts = caf.get("judgements") or {}
    if (
        isinstance(counts, dict)
        and counts.get("total")
        and (2 * int(counts.get("failed") or 0) > int(counts["total"]))
    ):  # a judge that mostly failed measured nothing: its numbers must not look like a result
        raise LeaderboardError(
            f"{store.root}: {counts.get('failed')} of {counts['total']} CAFE judgements failed; "
            "re-judge it (`cafe judge`) before adding it"
        )
    return manifest, acc, caf, fresh.metrics  # untyped sections too (listening, rubric)


def _model_and_group(
    store: Any, manifest: dict[str, Any], group: str | None, name: str | None
) -> tuple[str, str]:
    card = manifest.get("model") or {}
    card = card if isinstance(card, dict) else {"name": str(card)}
    served = served_model(manifest)
    model = name or model_name(manifest)
    if not model:
        raise LeaderboardError(f"{store.root}: manifest has no model name; pass --name")
    grp = group or (served and served_group(served)) or card.get("group")
    if grp not in GROUP_ORDER:
        raise LeaderboardError(
            f"{store.root}: model group {grp!r} is not a leaderboard group; pass --group "
            f"({', '.join(GROUP_ORDER)})"
        )
    return str(model), str(grp)


def _official_acc(
    acc: dict[str, Any], official: dict[str, Any], extra_source: dict[str, Any]
) -> dict[str, Any]:
    """A benchmark whose official figure is not accuracy's headline (SAKURA's judge, MMSU's
    denominator, MMAU-Pro's paths): the row's acc is that figure, or absent, never the labelled
    variant in its place (which ``extra_source`` keeps, labelled)."""
    head = official.get("headline") or {}
    figure = (head.get("total") or {}).get("acc")
    extra_source["accuracy_variant"] = {"acc": _r2((acc.get("total") or {}).get("acc")),
                                        "label": acc.get("rule")}  # fmt: skip
    if figure is None:
        extra_source["acc_absent"] = head.get("absent_reason") or head.get("label")
        return {k: v for k, v in acc.items() if k not in ("total", "breakdowns", "ci95")}
    extra_source["official_rule"] = official.get("rule")
    out = {**acc, "total": head.get("total"), "breakdowns": head.get("breakdowns") or {}}
    out.pop("ci95", None)
    return out


def _row_metrics(
    acc: dict[str, Any], caf: dict[str, Any], metrics_doc: dict[str, Any], bench: str
) -> tuple[dict[str, float | None], dict[str, list[float]]]:
    """The row's numbers and their 95% intervals from the run's sections."""
    metrics: dict[str, float | None] = {}
    intervals: dict[str, list[float]] = {}
    if acc.get("total"):  # absent where a benchmark's official figure is (the official block)
        metrics["acc"] = _r2((acc.get("total") or {}).get("acc"))
        # the isolated sound / music / speech subsets (SPEC §9): the benchmark says where
        from cafe.benchmarks.base import benchmark_class

        modality = benchmark_class(bench).modality_breakdown
        split = (acc.get("breakdowns") or {}).get(modality or "", {})
        for key in ("sound", "music", "speech"):
            if key in split:
                metrics[key] = _r2(split[key].get("acc"))
        if acc.get("ci95"):
            intervals["acc"] = [_r2(v) for v in acc["ci95"]]  # type: ignore[misc]
    # the paper averages CAFE over its three runs: the section's headline is the mean of per-run
    # values (sections written before it was: take the per-run mean when there are several runs)
    per_run = caf.get("runs") or {}
    several = isinstance(per_run, dict) and (per_run.get("n") or 1) > 1
    for key in CAFE_METRICS:
        mean = (per_run.get(key) or {}).get("mean") if several and "headline" not in caf else None
        value = mean if mean is not None else caf.get(key)
        if value is not None:
            metrics[key] = _r2(value)
    for key, ci in (caf.get("ci95") or {}).items():
        if key in CAFE_METRICS and ci:
            intervals[key] = [_r2(v) for v in ci]  # type: ignore[misc]
    metrics.update(listening_metrics(metrics_doc))
    for name, c in ((metrics_doc.get("listening") or {}).get("controls") or {}).items():
        if c.get("ci95"):
            intervals["gap_" + name.replace("-", "_")] = [_r2(v) for v in c["ci95"]]  # type: ignore[misc]
    rub_ci = (metrics_doc.get("rubric") or {}).get("ci95")
    if rub_ci:
        intervals["rubric"] = [_r2(v) for v in rub_ci]  # type: ignore[misc]
    return {k: v for k, v in metrics.items() if v is not None}, intervals


def user_file(path: str | Path | None = None) -> Path:
    """The leaderboard ``add`` writes: ``path``, else $CAFE_LEADERBOARD, else ./leaderboard.yaml;
    never a file of the installed package (a link to one included)."""
    target = Path(path) if path else Path(os.environ.get("CAFE_LEADERBOARD") or DEFAULT_NAME)
    real = target.resolve()
    if real == PACKAGED.resolve() or real.is_relative_to(PACKAGE_DIR):
        raise LeaderboardError(
            f"{target} is cafe's own data ({real}: the paper's rows, read-only); give "
            "--leaderboard FILE or set CAFE_LEADERBOARD to your own file (created from the "
            "paper's rows on first use)"
        )
    return target


def append_row(row: Row, path: str | Path | None = None) -> Path:
    """Append one row to the user's file's `rows` list (text append keeps the file's comments),
    as one transaction under the file's lock."""
    from cafe.locking import file_lock
    from cafe.redaction import scrub
    from cafe.safe_files import replace_file

    target = user_file(path)
    real = target.resolve()  # a link to the user's own file is written through
    with file_lock(real.with_name(f".{real.name}.lock"), target, "cafe leaderboard add"):
        source = real if real.exists() else PACKAGED  # first use: start from the paper's rows
        text = source.read_text(encoding="utf-8")
        board = parse(_load_yaml(text, target), target)
        sha = row.source.get("manifest_sha256")
        for r in board.rows:
            if sha and r.source.get("manifest_sha256") == sha:
                raise LeaderboardError(
                    f"{target}: rows[{r.index}] ({r.model}) already holds this run "
                    f"(manifest sha256 {sha[:12]}…)"
                )
        block = yaml.safe_dump(
            [scrub(row.to_yaml_dict())], allow_unicode=True, sort_keys=False,
            default_flow_style=None,
        )  # fmt: skip
        if not text.endswith("\n"):
            text += "\n"
        indented = "".join("  " + ln if ln.strip() else ln for ln in block.splitlines(True))
        new = text + indented
        parse(_load_yaml(new, target), target)  # never write a file that would not load
        replace_file(real, lambda f: f.write(new))
    return target


def _load_yaml(text: str, where: Path) -> Any:
    """Bounded (cafe.records.load_yaml: size, expanded aliases); one line naming the file."""
    from cafe.records import YamlBoundsError, load_yaml

    try:
        return load_yaml(text)
    except YamlBoundsError as e:
        raise LeaderboardError(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        raise LeaderboardError(f"{where}: not valid YAML: {str(e).splitlines()[0]}") from None


# command ------------------------------------------------------------------------------------
def add_run(
    run_dir: str | Path,
    group: str | None = None,
    name: str | None = None,
    path: str | Path | None = None,
) -> tuple[Row, Path]:
    """Append a run folder's row to the leaderboard file -> (the row, the file written)."""
    row = row_from_run(run_dir, group=group, name=name)
    # the folder as seen from the leaderboard file: no machine path, and `leaderboard verify`
    # finds it again wherever the command runs
    board_dir = user_file(path).resolve().parent
    row.source["run_dir"] = Path(os.path.relpath(Path(run_dir).resolve(), board_dir)).as_posix()
    return row, append_row(row, path)


def _fmt_metrics(m: dict[str, float | None]) -> str:
    return " ".join(f"{k}={'-' if v is None else f'{v:.2f}'}" for k, v in m.items())


def _fmt_source(s: dict[str, Any]) -> str:
    if s.get("kind") == "paper":
        return f"{s.get('ref')} Table {s.get('table')}"
    return f"run {s.get('run_dir')} ({str(s.get('manifest_sha256', ''))[:12]})"

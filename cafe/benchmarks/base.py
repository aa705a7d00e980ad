"""The benchmark contract: load samples (with their problems reported, never raised per item) and
name the breakdowns that scoring reports."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cafe.records import Problem, Sample
from cafe.registry import Registry


@dataclass
class LoadedBenchmark:
    samples: list[Sample]  # items with Sample.error set are recorded as failed, not run
    version: str
    source: str  # file or folder it came from
    sha256: str | None = None  # of the metadata file, identifies the version
    problems: list[Problem] = field(default_factory=list)


def by_meta(*keys: str) -> dict[str, Callable[[Sample], Any]]:
    """Breakdowns that each read one Sample.meta field of the same name."""
    return {k: (lambda s, k=k: s.meta.get(k)) for k in keys}


@dataclass(frozen=True)
class ExportFormat:
    """The official evaluation script's input: the metadata items with the prediction added."""

    prediction_key: str  # where the official script reads the prediction
    audio_field: str  # the field holding the clip path in the official file
    #: what `cafe export` writes by default: "answer" (the answer section), "raw" (the whole
    #: output, where the official script reads the model's whole response) or "choice"
    default_field: str = "answer"
    #: the prediction written for an unanswered or failed item ("": the script counts it
    #: wrong; None: a null, which the script reads its own way)
    unanswered: str | None = ""
    #: fields the loader added to Sample.meta, left out of the official file
    leave_out: tuple[str, ...] = ()
    #: writes the official layout itself when it is not one JSON list / JSONL of items:
    #: (each sample with its item and prediction, or None; out) -> files written
    writer: Callable[[list[tuple[Sample, dict[str, Any], str | None]], Path], list[Path]] | None = (
        None
    )
    #: the official file's keys in order, as its inference script writes a row (values from the
    #: item's own fields); empty: the metadata item with ``id``, ``choices``, ``answer`` added.
    #: With a layout, an item left unanswered on purpose is a row left out (its script reads a
    #: missing prediction key as "" or stops on it)
    layout: tuple[str, ...] = ()


@dataclass
class OfficialFile:
    """A predictions file in a benchmark's own official layout, read as items with ``id`` and
    the prediction key; ``judged``: what the official section gets beside (a judgements file's
    verdicts); ``problems``: lines that file's reading noted."""

    rows: list[dict[str, Any]]
    judged: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


class Benchmark(ABC):
    """A benchmark and every fact about it that the rest of cafe needs, so that nothing keys
    behaviour on a benchmark's name and one registered from another package (entry point group
    ``cafe.benchmarks``) works with run, score, export, judge, report and leaderboard."""

    name: str = ""
    #: breakdown name -> function of a Sample giving its value (or list of values)
    breakdowns: dict[str, Callable[[Sample], Any]] = {}
    #: judge run after `cafe run` when --judge is not given (None: no judge; samples need
    #: ground-truth events or captions for one)
    default_judge: str | None = None
    #: keys an official-format predictions file holds the prediction under (first present
    #: wins), for `cafe score`
    prediction_keys: tuple[str, ...] = ("model_output",)
    #: how the official script reads a predictions file row by row, where it scores each row
    #: from its own fields (string_match_rows.RowScript: MMAU, MMAR); None: it does not
    script_rows: Any = None
    #: keys a predictions file names its item under (first present wins), for `cafe score`
    prediction_id_keys: tuple[str, ...] = ("id",)
    #: the official script's input format for `cafe export` (None: no official scorer to
    #: export for; `cafe export` says so)
    export_format: ExportFormat | None = None
    #: the breakdown whose values include the isolated sound / music / speech subsets that the
    #: leaderboard shows as columns (None: no such columns)
    modality_breakdown: str | None = None
    #: whether results of two versions may be compared (False: each release is another test)
    versions_comparable: bool = True
    #: folder the metadata's audio paths are relative to and must stay inside (--audio-root);
    #: None: the metadata file's own folder
    audio_root: str | None = None
    #: a benchmark that builds its set on first use draws its bar (`--no-progress`: none)
    progress: bool = True
    #: the benchmark's own scoring rule in one line (`cafe bench list`, tables,
    #: docs/benchmarks.md); each benchmark whose rule is another declares its own
    official_rule: str = "the official string match (MMAU / MMAR evaluation scripts)"
    #: the licence its repository or card states (`cafe bench list`)
    licence: str = "see the benchmark's repository"
    #: known version -> number of items, None: any number (`cafe bench list`)
    version_items: dict[str, int | None] = {}
    #: what the accuracy section's headline is, where it is not the official figure (then
    #: ``official_section`` gives that figure); None: the default rule's label
    accuracy_label: str | None = None
    #: the LLM judge of an official rule that is one (cafe.benchmarks.official_judge's
    #: VerdictSpec), run by `cafe judge-official`; None: the official rule needs no LLM
    official_judge: Any = None
    #: the embedding model an official rule matches outputs to choices with (`cafe
    #: judge-official --embedder`); None: no embedding path
    official_embedder: str | None = None
    #: the columns every row of this benchmark's files has: a file lacking them, or holding a
    #: larger signature of another benchmark, is refused saying what it looks like (empty: no
    #: check; cafe.benchmarks.metadata.check_signature)
    signature: tuple[str, ...] = ()
    #: whether some items are open questions (no choices), which the runner's checks allow
    open_items: bool = False
    #: the prompt style `cafe run` uses when --prompt-style is not given (a style restating the
    #: benchmark's official inference input, cafe.prompts); None: the model card's style
    default_prompt_style: str | None = None

    @abstractmethod
    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark: ...

    def read_official_file(self, path: Path, samples: list[Sample]) -> OfficialFile | None:
        """A predictions file read from this benchmark's own official layout (SAKURA's per-track
        results JSON); None: the file is a JSON list / JSONL (or parquet) of items with ``id``,
        read the common way."""
        return None

    def has_answers(self, version: str) -> bool:
        """Whether this version's items carry answers (one without them is predictions and
        export only: it is scored by the benchmark's own leaderboard)."""
        return True

    def choice_is_correct(self, choice: str | None, answer: str, choices: list[str]) -> bool:
        """A reply already mapped to one of the choices (the lenient figure, a judge-named
        option): right by the benchmark's rule on that choice's text. A benchmark whose rule
        reads something else than the option's text (a letter) overrides it."""
        return choice is not None and self.is_correct(choice, answer, choices)

    #: what the accuracy section's lenient figure is (``choice_is_correct`` on the mapped choice)
    lenient_label: str = (
        "lenient: the answer mapped to a choice first (a letter or the option text), then the "
        "benchmark's rule on that choice; denominator every item; not the official figure"
    )

    @property
    def answered_label(self) -> str:
        """What the accuracy section's answered-only figure is: the official scripts' own
        denominator where accuracy's rule is official, else only a count of replies."""
        if type(self).official_section is Benchmark.official_section:
            return (
                "official denominator: items without a prediction skipped, as the official "
                "scripts do; cafe's own figure counts them wrong"
            )
        return (
            "answered only: items without a reply left out; not the official figure (that is "
            "the 'official' section's)"
        )

    def official_section(
        self, samples: list[Sample], predictions: list[Any], runs: int | None = None, **judged: Any
    ) -> dict[str, Any] | None:
        """The metrics.json "official" section where the official script's figure is not the
        accuracy section's headline (another denominator, an LLM judge, several paths): the
        headline and each labelled variant beside it (cafe.benchmarks.official). ``judged``:
        what `cafe judge-official` adds (its verdicts); `cafe score` passes ``file_rows``, the
        file's rows in order as (id, value under the prediction key or letters.MISSING),
        for a script that reads each line, and ``file_records``, the rows themselves. None:
        accuracy's headline is official (or, with ``script_rows``, the file's rows count as the
        script counts them: cafe.benchmarks.string_match_rows)."""
        records = judged.get("file_records")
        if self.script_rows is None or records is None:
            return None
        from cafe.benchmarks.string_match_rows import official_rows

        return official_rows(self.script_rows, samples, predictions, records)

    @classmethod
    def info(cls) -> dict[str, Any]:
        """What `cafe bench list` shows: versions with their item counts, the official rule,
        the licence."""
        return {
            "name": cls.name,
            "versions": dict(cls.version_items),
            "rule": cls.official_rule,
            "licence": cls.licence,
        }

    def is_correct(self, prediction: str | None, answer: str, choices: list[str]) -> bool:
        """The benchmark's correctness rule, used by the runner, `cafe score`, the training
        data filter and rewards alike. Default: the official MMAU / MMAR string match. Callers
        pass the model's answer text, unmodified (the answer section its prompt style defines,
        as the official script reads it from `cafe export`): that is the headline; the lenient
        figure passes the answer mapped to a choice first."""
        from cafe.benchmarks.string_match import is_correct

        return is_correct(prediction, answer, choices)


def benchmark_class(name: str) -> type[Benchmark]:
    """The registered class, or the plain Benchmark facts for a name no installed package
    registers (a run folder written elsewhere): reading a folder never needs its plugin."""
    try:
        return BENCHMARKS.get(name)
    except (KeyError, ImportError):
        return _Unregistered


BENCHMARKS: Registry[type[Benchmark]] = Registry(
    "benchmark", entry_point_group="cafe.benchmarks", base=Benchmark
)


class _Unregistered(Benchmark):
    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        raise KeyError("benchmark not installed")

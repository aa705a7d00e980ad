"""The Python API: every command of the command line, as a function.

Each delegates to the module that owns the operation, imported on first call, so
``import cafe.api`` stays light and a missing optional extra only fails the function that
needs it (with an error naming the module). Errors the user must fix are
``cafe.errors.CafeError`` (the command line prints the same message as one line). Example::

    from cafe import api

    result = api.run("reference", "synth", limit=50)
    print(result.metrics["accuracy"]["total"])
    api.judge(result.run_dir)               # CAFE perception metrics ("cafe" section)
    api.decay(result.run_dir)               # "decay" section
    section, problems = api.score("mmar", "MMAR-meta.json", "predictions.jsonl")
    print(api.table(1, [result.run_dir]))   # paper Table 1 with this run beside the paper's rows

command line               function
``cafe run``               run
``cafe score``             score
``cafe export``            export
``cafe bench synth``       bench
``cafe adapters``          adapters
``cafe doctor``            doctor
``cafe caption``           caption
``cafe judge-agreement``   judge_agreement
``cafe listen``            listen
``cafe run --permute-choices``  permute_choices
``cafe necessity``         necessity
``cafe sweep``             sweep
``cafe STEP`` (a plugin)   run_step
``cafe attention``         attention
``cafe report``            report, table, figure, compare_row
``cafe compare``           compare
``cafe explain``           explain
``cafe leaderboard``       leaderboard, leaderboard_add, leaderboard_html, leaderboard_verify
``cafe train``             train_data, train_sft, train_grpo, train_smoke, train_recipes
``cafe serve``             serve
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

from cafe.commands import TABLE
from cafe.steps import STEPS

# the docstring's rows of cafe's own steps on the engine, from their registrations
__doc__ = (__doc__ or "").replace("``cafe STEP``", "".join(
    f"{f'``cafe {c.name}``':<27}{c.step}\n" for c in TABLE if c.name in STEPS.builtins
) + "``cafe STEP``", 1)  # fmt: skip

#: operation -> "module:function" that implements it (cafe.commands.TABLE: the one table)
TARGETS: dict[str, str] = {
    **{op: target for c in TABLE for op, target in c.api.items()},
    "run_step": "cafe.steps:run_step",
}


def _target(name: str) -> Any:
    target = TARGETS[name]
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        hint = (
            ""
            if missing == "cafe" or missing.startswith("cafe.")
            else "; install the matching extra (pip install 'cafe-audio-eval[all]')"
        )
        raise ImportError(
            f"cafe.api.{name} needs {target}, which cannot be imported ({e}){hint}"
        ) from e
    except AttributeError as e:
        raise ImportError(f"cafe.api.{name} needs {target}, which does not exist ({e})") from e


# run and score ------------------------------------------------------------------------------
def run(model: str = "reference", bench: str = "synth", /, **options: Any) -> Any:
    """Run a model on a benchmark into a resumable run folder -> RunResult (run_dir, metrics).
    Options: the fields of cafe.runner.spec.RunRequest (checkpoint, data, runs, limit, out,
    prompt_style, judge…; adapter options go in options={...})."""
    return _target("run")(model, bench, **options)


def score(bench: str, data: str, predictions: str, **options: Any) -> Any:
    """Score an official-format predictions file against the metadata file ``data`` ->
    (accuracy section, problems). Options: key, version."""
    return _target("score")(bench, data, predictions, **options)


def export(run_dir: str | Path, out: str | Path, bench: str | None = None, **options: Any) -> Any:
    """Write a run's predictions as the official scorer's input file -> counts (items, answered,
    unanswered). Options: run_index, field ("answer" or "raw"), skip_unanswered."""
    return _target("export")(run_dir, out, bench, **options)


def bench(out: str | Path, limit: int = 200, seed: int = 0, progress: bool = False) -> Any:
    """Generate the synthetic benchmark (``limit`` items, byte-identical for a seed) into
    ``out`` -> the synth.jsonl path."""
    return _target("bench")(out, n=limit, seed=seed, progress=progress)


# models ------------------------------------------------------------------------------------
def adapters(name: str | None = None, cards: list[str] | tuple[str, ...] = ()) -> Any:
    """Without ``name``: every model card and card-less adapter as rows (dicts). With a
    ``name``: that model's card as a dict with its prompt template hash."""
    if name is None:
        return _target("list_models")(cards)
    return _target("show_model")(name, cards)


def doctor(model: str, bench: str = "synth", **options: Any) -> Any:
    """Check that ``model`` hears its audio (real vs silent clips) -> DoctorReport (.ok,
    .lines()). Options: checkpoint, data, limit, max_new_tokens, cards, options (adapter
    options, e.g. {"endpoints": [URL], "model": NAME} for a served model)."""
    return _target("doctor")(model, bench, **options)


# judging and metrics -----------------------------------------------------------------------
def judge_agreement(run_dir: str | Path, a: str, b: str, mode: str = "micro") -> Any:
    """Two judges on one run -> Cohen's kappa (overall, per category) and CAFE deltas B - A."""
    return _target("judge_agreement")(run_dir, a, b, mode)


def permute_choices(run_dir: str | Path, k: int, **options: Any) -> Any:
    """K orderings of a run's options (the run is ordering 0), each its own run folder -> the
    metrics.json "choices" section (docs/robustness.md). Options: mode ("rotate" | "shuffle"),
    seed, run_options, and run()'s execution options."""
    return _target("permute_choices")(run_dir, k, **options)


def necessity(run_dir: str | Path, **options: Any) -> Any:
    """Caption-only, text-only and silence runs of a run -> the metrics.json "necessity"
    section (a label per item, accuracy on the items that need the audio). Options: captions,
    run_options, and run()'s execution options."""
    return _target("necessity")(run_dir, **options)


def sweep(model: str, bench: str, budgets: Any, out: str | Path, **options: Any) -> Any:
    """One run per reasoning budget (OUT/budget-N) -> the sweep table (also OUT/sweep.json).
    Options: options (adapter -o pairs), cards, and run()'s (data, limit, judge…)."""
    return _target("sweep")(model, bench, list(budgets), out=out, **options)


def run_step(name: str, run_dir: str | Path, **options: Any) -> Any:
    """Any registered step (cafe.steps: cafe's own on the engine and plugins') over a run
    folder -> cafe.steps.engine.StepResult (its section, status and records). Options: the
    step's declared ones, and cache, concurrency, progress."""
    return _target("run_step")(name, run_dir, **options)


def step(name: str) -> Any:
    """The function of a registered step (a plugin's too), made from its declaration:
    ``step(NAME)(run_dir, **options)`` runs it -> its section; its signature names the step's
    options and the engine's (cache, concurrency, progress), its docstring is the step's help."""
    from cafe.steps import step_function

    return step_function(STEPS.get(name), name)


class StepFunction:
    """A cafe.api function made from its row of cafe.commands.TABLE: calls the step's own
    function (imported on first call) with its signature and docstring: the function its row
    names, or for a registered built-in step the one made from its declaration."""

    def __init__(self, row: Any) -> None:
        self.row, self.__name__, self.__qualname__ = row, row.step, row.step
        self.__module__ = __name__

    def function(self) -> Any:
        if self.__name__ in TARGETS:
            return _target(self.__name__)
        from cafe.steps import step_function

        return step_function(STEPS.get(self.row.name), self.row.name)

    def __call__(self, *args: Any, **options: Any) -> Any:
        return self.function()(*args, **options)

    @property  # type: ignore[misc]  # the instance's docstring: its row's, or its step's
    def __doc__(self) -> str:
        return self.row.doc or self.function().__doc__

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.function())

    def __repr__(self) -> str:
        return f"<cafe.api.{self.__name__}>"


#: judging and metrics: each post-run step's function (judge, decay, caption…), made from its
#: row of the table (cafe's own steps on the engine: from their one-line registration)
globals().update({c.step: StepFunction(c) for c in TABLE if c.step})


# reports -----------------------------------------------------------------------------------
def report(run_dir: str | Path, leaderboard: str | Path | None = None, **options: Any) -> Any:
    """Write report/ for a run folder (summary.md, tables, figures) -> the folder. Options:
    group, out, draw (False: no figures)."""
    board = _target("leaderboard")(leaderboard)
    return _target("report")(run_dir, board, **options)


def table(number: int | str, run_dirs: Any = (), **options: Any) -> Any:
    """Paper table ``number`` (1-5) as text, run folders beside the leaderboard's rows.
    Options: fmt ("md", "tex", "csv"), leaderboard, group."""
    return _target("table")(number, run_dirs, **options)


def figure(number: int | str, run_dirs: Any, out: str | Path, **options: Any) -> Any:
    """Paper figure ``number`` into ``out`` -> files written: 1 from leaderboard.yaml's
    published numbers (run_dirs may be empty; option leaderboard), 3, 5, 6, 7 from run folders."""
    return _target("figure")(number, run_dirs, out, **options)


def compare_row(
    run_dir: str | Path, against: str | None = None, leaderboard: str | Path | None = None
) -> Any:
    """A run's numbers against a leaderboard row (default: the paper's row for the run's
    model): Markdown text with deltas and the protocol settings of both."""
    board = _target("leaderboard")(leaderboard)
    return _target("compare_row")(run_dir, against, board)


def compare(run_a: str | Path, run_b: str | Path, *more: str | Path, **options: Any) -> Any:
    """Each later run folder against ``run_a``, paired over the (item, run)s both hold -> dict:
    accuracy difference with its item bootstrap interval, McNemar's exact test or Wilcoxon
    over items, breakdown cells (Holm), CAFE, listening gap, decay r; the method and seed.
    Options: resamples, seed, level."""
    return _target("compare")(run_a, run_b, *more, **options)


def explain(run_dir: str | Path, against: str | Path, **options: Any) -> Any:
    """The accuracy gap of a run against a run folder or a leaderboard row, taken apart into
    the protocol steps cafe can replay (each with its paired interval; they add up to the
    gap) -> dict. Options: protocol, against_protocol, leaderboard, resamples, seed."""
    return _target("explain")(run_dir, against, **options)


def leaderboard(path: str | Path | None = None) -> Any:
    """The leaderboard (file given, $CAFE_LEADERBOARD, ./leaderboard.yaml or the paper's rows),
    validated -> Leaderboard (.rows, .select(benchmark=, version=))."""
    return _target("leaderboard")(path)


def leaderboard_add(run_dir: str | Path, **options: Any) -> Any:
    """Append a run folder's row to the leaderboard file -> (row, file). Options: group, name,
    path."""
    return _target("leaderboard_add")(run_dir, **options)


def leaderboard_html(out: str | Path = "leaderboard.html", path: str | Path | None = None) -> Any:
    """Write the leaderboard as one self-contained page (Tables 1-5 and every row, sortable,
    with provenance) -> the page's path."""
    return _target("leaderboard_html")(_target("leaderboard")(path), out)


def leaderboard_verify(path: str | Path | None = None, **options: Any) -> Any:
    """Recompute every run row of the leaderboard from its folder -> one verdict per row
    (published, verified, changed with the figures that moved, missing). Options: record."""
    return _target("leaderboard_verify")(path, **options)


# training ----------------------------------------------------------------------------------
def train_data(recipe: Any, **options: Any) -> Any:
    """MPAR² data pipeline for a recipe (name, path or dict) -> {"sft": path, "rl": path}.
    Options: workdir, model, checkpoint, cards, options (the difficulty filter's model)."""
    return _target("train_data")(recipe, **options)


def train_sft(recipe: Any, **options: Any) -> Any:
    """Supervised fine-tuning -> checkpoint folder. Options: data, out, model, max_steps."""
    return _target("train_sft")(recipe, **options)


def train_grpo(recipe: Any, **options: Any) -> Any:
    """GRPO with the MPAR² rewards -> checkpoint folder. Options: data, out, model, judge,
    judge_model, judge_endpoints, judge_concurrency, max_steps."""
    return _target("train_grpo")(recipe, **options)


def train_smoke(workdir: str | Path | None = None, **options: Any) -> Any:
    """The whole MPAR² path at toy scale on a CPU -> before/after scores and signals.
    Options: limit, recipe."""
    return _target("train_smoke")(workdir, **options)


def train_recipes() -> Any:
    """The built-in training recipe names."""
    return _target("train_recipes")()


def serve(model: str, **options: Any) -> Any:
    """K replicas of a model card's server on a Ray cluster -> a started
    cafe.cluster.replicas.Replicas (``.listing().endpoints``; ``.stop()`` or ``with``).
    Options: replicas, checkpoint, cards, options, served_name, address, host, server_args,
    ready_timeout_s."""
    return _target("serve")(model, **options)


#: the public functions, one per command (test_api checks each resolves)
FUNCTIONS = (
    "run",
    "score",
    "export",
    "bench",
    "adapters",
    "doctor",
    "judge_agreement",
    "permute_choices",
    "necessity",
    "sweep",
    *(c.step for c in TABLE if c.step),  # each post-run step's (StepFunction)
    "report",
    "table",
    "figure",
    "compare_row",
    "compare",
    "explain",
    "leaderboard",
    "leaderboard_add",
    "leaderboard_html",
    "leaderboard_verify",
    "train_data",
    "train_sft",
    "train_grpo",
    "train_smoke",
    "train_recipes",
    "serve",
)

__all__ = ["FUNCTIONS", "TARGETS", "run_step", *FUNCTIONS]

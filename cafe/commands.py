"""The one table of cafe's commands. Each row: `cafe NAME`, the click command that implements
it ("module:command"), its line in `cafe --help`, the cafe.api operations it offers
({operation: "module:function"}), and for a post-run step the metrics.json section it writes,
whether it runs on the step engine and its cafe.api function's docstring. The rows of cafe's
own steps on the engine are made from their one-line registrations (cafe.steps: STEPS.builtin).

cafe.cli's COMMANDS and HELP, cafe.api's TARGETS and step functions, and cafe.steps.TABLE are
all made from it, so they cannot drift. Data: `cafe --help` imports no command module."""

from __future__ import annotations

from dataclasses import dataclass, field

from cafe.steps import STEPS, Builtin


@dataclass(frozen=True)
class Command:
    name: str  # `cafe NAME`
    click: str  # "module:click_command"
    help: str  # its line in `cafe --help`
    api: dict[str, str] = field(default_factory=dict)  # cafe.api operation -> "module:function"
    #: a post-run step: cafe.api's function of that name is generated from this row (its doc)
    step: str | None = None
    doc: str = ""
    section: str | None = None  # the metrics.json section the step writes (None: its own file)
    engine: bool = False  # runs on cafe.steps.engine


def step_row(b: Builtin) -> Command:
    """The row of a registered built-in step: its `cafe --help` line, the section it writes,
    and the names of its command and cafe.api function, both made from the step's declaration
    (cafe.steps.cli.step_command, cafe.steps.step_function: no "module:function" to name)."""
    function = b.name.replace("-", "_")
    return Command(b.name, f"cafe.steps.cli:{function}_command", b.help, step=function,
                   section=b.section, engine=True)  # fmt: skip


#: the commands written by hand (cafe's own steps on the engine: step_row)
WRITTEN: tuple[Command, ...] = (
    Command("run", "cafe.runner.cli:run_command",
            "Run a model on a benchmark into a resumable run folder.",
            {"run": "cafe.runner.main:run_with",
             "permute_choices": "cafe.robustness.steps:run_orderings"}),
    Command("serve", "cafe.cluster.cli:serve_command",
            "Serve a model as K replicas on a Ray cluster; prints their endpoints.",
            {"serve": "cafe.cluster.replicas:serve"}),
    Command("necessity", "cafe.robustness.cli:necessity_command",
            "Audio necessity per item (real, caption-only, text-only, silence), exportable.",
            {"necessity": "cafe.robustness.steps:run_necessity"}),
    Command("sweep", "cafe.robustness.cli:sweep_command",
            "Reasoning-budget sweep: one run per budget, accuracy and perception against it.",
            {"sweep": "cafe.robustness.steps:run_sweep"}),
    Command("score", "cafe.benchmarks.cli:score_command",
            "Score a predictions file with its benchmark's official rule (`cafe bench list`).",
            {"score": "cafe.benchmarks.scoring:score_file"}),
    Command("export", "cafe.benchmarks.cli:export_command",
            "Export a run's predictions in an official scorer's input format.",
            {"export": "cafe.benchmarks.export:export"}),
    Command("bench", "cafe.benchmarks.cli:bench_command",
            "List benchmarks (versions, items, scoring, licence) or generate the synthetic one.",
            {"bench": "cafe.benchmarks.synth.generator:generate"}),
    Command("adapters", "cafe.adapters.cli:adapters_command",
            "List model adapters and model cards.",
            {"list_models": "cafe.adapters:list_models", "show_model": "cafe.adapters:show_model"}),
    Command("doctor", "cafe.adapters.cli:doctor_command",
            "Check that a model really hears its audio (real vs silent clips).",
            {"doctor": "cafe.runner.doctor:doctor"}),
    Command("caption", "cafe.judge.cli:caption_command",
            "Write ground-truth captions for a benchmark's clips.",
            {"caption": "cafe.judge.captions:caption"}, step="caption",
            doc="Ground-truth captions for a benchmark's clips into ``out`` (resumable) -> counts "
                "and problems. Options: captioner, model, data, version, endpoints, template, "
                "concurrency, limit, cache."),
    Command("judge-agreement", "cafe.judge.cli:agreement_command",
            "Compare two judges on the same run (Cohen's kappa, metric deltas).",
            {"judge_agreement": "cafe.judge.agreement:judge_agreement"}),
    # the controls run through `cafe run`; the section they make runs on the engine
    Command("listen", "cafe.steps.cli:listen_command",
            "Listening controls for a run (silence, noise, shuffled, text-only) and the gap.",
            {"listen": "cafe.steps.listening:run_controls"}, step="listen", section="listening",
            engine=True,
            doc="Listening controls for a run (silence, noise, shuffled, text-only), each in "
                'its own run folder -> the metrics.json "listening" section (the gap per '
                "control with a paired 95% interval). Arguments: run_dir, controls; options: "
                "control_seed, run_options, judge, judge_options, and run()'s execution "
                "options (batch_size, concurrency, progress, cache, cards)."),
    Command("attention", "cafe.metrics.cli:attention_command",
            "Audio attention ratio per generated token (Figure 6).",
            {"attention": "cafe.metrics.attention:attention"}, step="attention",
            doc="Audio attention share per generated token (Figure 6) -> the attention.json "
                "dict. Arguments: model, bench; options: checkpoint, data, limit, "
                "prompt_style, max_new_tokens, min_items, out, cards, options."),
    Command("report", "cafe.reports.cli:report_command",
            "Regenerate the paper's tables and figures from runs and leaderboard.yaml.",
            {"report": "cafe.reports.run_report:write_run_report",
             "table": "cafe.reports.paper:table", "figure": "cafe.reports.paper:figure",
             "compare_row": "cafe.reports.run_report:compare"}),
    Command("compare", "cafe.reports.cli:compare_command",
            "Is run B really better than A? Paired tests over items, a CI regression gate.",
            {"compare": "cafe.reports.compare:compare"}),
    Command("explain", "cafe.reports.cli:explain_command",
            "Why two accuracy figures differ: the gap taken apart step by step.",
            {"explain": "cafe.reports.explain:explain"}),
    Command("leaderboard", "cafe.reports.cli:leaderboard_command",
            "Show leaderboard.yaml, add run rows to it, or write it as a page.",
            {"leaderboard": "cafe.reports.leaderboard:load_leaderboard",
             "leaderboard_add": "cafe.reports.leaderboard:add_run",
             "leaderboard_html": "cafe.reports.leaderboard_html:write_leaderboard_html",
             "leaderboard_verify": "cafe.reports.verify:verify"}),
    Command("train", "cafe.training.cli:train_command",
            "MPAR² training: data pipeline, SFT, GRPO, smoke test.",
            {"train_data": "cafe.training.api:data", "train_sft": "cafe.training.api:sft",
             "train_grpo": "cafe.training.api:grpo", "train_smoke": "cafe.training.api:smoke",
             "train_recipes": "cafe.training.api:recipes"}),
)  # fmt: skip


TABLE: tuple[Command, ...] = (*WRITTEN, *(step_row(b) for b in STEPS.builtins.values()))

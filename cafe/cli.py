"""`cafe` command line. Thin: each subcommand lives in the module that owns the operation and is
imported only when invoked, so `cafe --help` stays fast and heavy extras stay optional."""

from __future__ import annotations

import importlib

import click

from cafe.cli_options import Group

# command name -> "module:click_command"; modules define the command next to the code it calls
COMMANDS: dict[str, str] = {
    "run": "cafe.runner.cli:run_command",
    "score": "cafe.benchmarks.cli:score_command",
    "export": "cafe.benchmarks.cli:export_command",
    "bench": "cafe.benchmarks.cli:bench_command",
    "adapters": "cafe.adapters.cli:adapters_command",
    "doctor": "cafe.adapters.cli:doctor_command",
    "judge": "cafe.judge.cli:judge_command",
    "caption": "cafe.judge.cli:caption_command",
    "judge-agreement": "cafe.judge.cli:agreement_command",
    "judge-accuracy": "cafe.judge.cli:judge_accuracy_command",
    "judge-official": "cafe.judge.cli:judge_official_command",
    "rubric": "cafe.steps.cli:rubric_command",
    "cues": "cafe.steps.cli:cues_command",
    "listen": "cafe.steps.cli:listen_command",
    "decay": "cafe.steps.cli:decay_command",
    "attention": "cafe.metrics.cli:attention_command",
    "report": "cafe.reports.cli:report_command",
    "leaderboard": "cafe.reports.cli:leaderboard_command",
    "train": "cafe.training.cli:train_command",
    "necessity": "cafe.robustness.cli:necessity_command",
    "sweep": "cafe.robustness.cli:sweep_command",
}

HELP = {
    "run": "Run a model on a benchmark into a resumable run folder.",
    "score": "Score a predictions file with its benchmark's official rule (`cafe bench list`).",
    "export": "Export a run's predictions in an official scorer's input format.",
    "bench": "List benchmarks (versions, items, scoring, licence) or generate the synthetic one.",
    "adapters": "List model adapters and model cards.",
    "doctor": "Check that a model really hears its audio (real vs silent clips).",
    "judge": "Run the CAFE judge on a run folder and compute perception metrics.",
    "caption": "Write ground-truth captions for a benchmark's clips.",
    "judge-agreement": "Compare two judges on the same run (Cohen's kappa, metric deltas).",
    "judge-accuracy": "Judged accuracy (the paper's † figures): an LLM names each chosen option.",
    "judge-official": "A benchmark's official LLM-judged figure (SAKURA's judge).",
    "listen": "Listening controls for a run (silence, noise, shuffled, text-only) and the gap.",
    "cues": "Cue recall of MMAR runs: offline matcher and CAFE judge, vs required events.",
    "rubric": "Score MMAR predictions against each item's rubric (the MMAR authors' protocol).",
    "decay": "Perception decay curves: accuracy and Acc_per by reasoning length.",
    "attention": "Audio attention ratio per generated token (Figure 6).",
    "report": "Regenerate the paper's tables and figures from runs and leaderboard.yaml.",
    "leaderboard": "Show leaderboard.yaml, add run rows to it, or write it as a page.",
    "train": "MPAR² training: data pipeline, SFT, GRPO, smoke test.",
    "necessity": "Audio necessity per item (real, caption-only, text-only, silence), exportable.",
    "sweep": "Reasoning-budget sweep: one run per budget, accuracy and perception against it.",
}


def _plugin_steps() -> list[str]:
    """Steps registered by other packages (cafe.steps): each is `cafe NAME`."""
    from cafe.steps import STEPS

    return [n for n in STEPS.names() if n not in COMMANDS]


class LazyGroup(Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*COMMANDS, *_plugin_steps()])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            from cafe.steps import STEPS

            if name not in STEPS:
                return None
            from cafe.steps.cli import step_command  # a step's command, made from its options

            return step_command(STEPS.step(name))
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # help lines from the table, so `cafe --help` imports no command module
        with formatter.section("Commands"):
            rows = [(n, HELP.get(n, "")) for n in sorted(COMMANDS)]
            rows += [(n, "A step registered by a plugin (cafe.steps).") for n in _plugin_steps()]
            formatter.write_dl(sorted(rows))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cafe-audio-eval")
def main() -> None:
    """cafe: audio reasoning evaluation with CAFE perception metrics and MPAR² training.

    Start with `cafe run` (the synthetic benchmark with the reference listener), then
    `cafe run --model NAME --bench mmar --data PATH`."""


if __name__ == "__main__":
    main()

"""`cafe train …`: the MPAR² data pipeline, SFT, GRPO and the CPU smoke run. Each subcommand
calls its function in cafe.training.api (the same functions as cafe.api.train_*)."""

from __future__ import annotations

import click

from cafe.cli_options import (
    ModelChoice,
    group,
    judge_server_options,
    limit_option,
    model_options,
    option,
)

RECIPE_HELP = "Recipe YAML file or built-in name (`cafe train recipes` lists them)."


@group("train")
def train_command() -> None:
    """MPAR² training: `data` builds SFT/RL files, `sft` and `grpo` train on TRL, `smoke` runs
    the whole path on a CPU at toy scale. Checkpoints load back with `cafe run --checkpoint`."""


@train_command.command("recipes")
def recipes_command() -> None:
    """List the built-in recipes."""
    from cafe.training.api import load, recipes

    for name in recipes():
        click.echo(load(name).get("name") or name)


@train_command.command("data")
@click.option("--recipe", required=True, help=RECIPE_HELP)
@click.option("--workdir", type=click.Path(), help="Stage files and outputs [recipe data.workdir].")
@model_options(required=False)
def data_command(
    recipe: str,
    workdir: str | None,
    model: ModelChoice,
) -> None:
    """Build the SFT and RL files: captions, questions per dimension, question filter,
    difficulty filter (the base model through its adapter; --model, -o, --endpoint override
    the recipe's), balanced SFT pool, CoT synthesis and filter. Every stage is resumable:
    re-run the same command after an interruption."""
    from cafe.training.api import data

    out = data(
        recipe,
        workdir=workdir,
        model=model.name,
        **model.load_kwargs(),
        echo=click.echo,
    )
    click.echo(f"SFT file: {out['sft']}\nRL file: {out['rl']}")


@train_command.command("sft")
@click.option("--recipe", required=True, help=RECIPE_HELP)
@click.option("--data", required=True, type=click.Path(exists=True), help="sft.jsonl.")
@click.option("--out", required=True, type=click.Path(), help="Checkpoint folder to write.")
@click.option("--model", help="Checkpoint folder to start from [recipe model].")
@click.option("--max-steps", type=click.IntRange(1, 10**9), help="Stop after N optimizer steps.")
def sft_command(recipe: str, data: str, out: str, model: str | None, max_steps: int | None) -> None:
    """Supervised fine-tuning on MPAR² chains (TRL SFTTrainer, audio-aware collator; full or
    LoRA per the recipe, LoRA merged on save). Launch with `accelerate launch --config_file
    cafe/training/accelerate/deepspeed-zero2.yaml -m cafe.cli train sft …` on several GPUs."""
    from cafe.training.api import sft

    path = sft(recipe, data=data, out=out, model=model, max_steps=max_steps)
    click.echo(f"checkpoint: {path}")


@train_command.command("grpo")
@click.option("--recipe", required=True, help=RECIPE_HELP)
@click.option("--data", required=True, type=click.Path(exists=True), help="rl.jsonl.")
@click.option("--out", required=True, type=click.Path(), help="Checkpoint folder to write.")
@click.option("--model", help="Checkpoint folder to start from [recipe model].")
@option("--judge", "judge_kind", help="Reward judge: offline or a chat client kind.")
@judge_server_options(endpoint_old=("--endpoint",))
@click.option("--max-steps", type=click.IntRange(1, 10**9), help="Stop after N optimizer steps.")
def grpo_command(
    recipe: str,
    data: str,
    out: str,
    model: str | None,
    judge_kind: str | None,
    judge_model: str | None,
    judge_endpoints: tuple[str, ...],
    judge_concurrency: int | None,
    judge_api_key_env: str | None,
    max_steps: int | None,
) -> None:
    """GRPO with the MPAR² rewards (TRL GRPOTrainer extended with audio; vLLM rollouts on GPU
    per the recipe, transformers generation on CPU)."""
    from cafe.training.api import grpo

    path = grpo(
        recipe,
        data=data,
        out=out,
        model=model,
        judge=judge_kind,
        judge_model=judge_model,
        judge_endpoints=judge_endpoints,
        judge_concurrency=judge_concurrency,
        judge_api_key_env=judge_api_key_env,
        max_steps=max_steps,
    )
    click.echo(f"checkpoint: {path}")


@train_command.command("smoke")
@click.option("--workdir", type=click.Path(), help="Work folder [a new temporary folder].")
@limit_option(default=8, help="Synth items scored before/after.")
@click.option("--recipe", default="smoke", show_default=True, help=RECIPE_HELP)
def smoke_command(workdir: str | None, limit: int, recipe: str) -> None:
    """The whole MPAR² path on a CPU in a few minutes: a tiny model built on the spot, synth
    data through the offline pipeline, SFT, GRPO with the offline reward judge, a merged
    checkpoint, and `cafe run` on synth before and after."""
    from cafe.training.api import smoke

    smoke(workdir, limit=limit, recipe=recipe, echo=click.echo)

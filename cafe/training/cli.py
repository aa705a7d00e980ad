"""`cafe train …`: the MPAR² data pipeline, SFT, GRPO and the CPU smoke run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

RECIPE_HELP = "Recipe YAML file or built-in name (`cafe train recipes` lists them)."


def _recipe(name: str) -> dict[str, Any]:
    from cafe.training.recipes import load_recipe

    try:
        return load_recipe(name)
    except ValueError as e:
        raise click.UsageError(str(e)) from None


def _model(recipe: dict[str, Any], model: str | None) -> str:
    path = model or recipe.get("model")
    if not path:
        raise click.UsageError("no model: pass --model PATH or set `model:` in the recipe")
    return str(path)


@click.group("train")
def train_command() -> None:
    """MPAR² training: `data` builds SFT/RL files, `sft` and `grpo` train on TRL, `smoke` runs
    the whole path on a CPU at toy scale. Checkpoints load back with `cafe run --checkpoint`."""


@train_command.command("recipes")
def recipes_command() -> None:
    """List the built-in recipes."""
    from cafe.training.recipes import load_recipe, recipe_names

    for name in recipe_names():
        first = load_recipe(name).get("name") or name
        click.echo(first)


@train_command.command("data")
@click.option("--recipe", required=True, help=RECIPE_HELP)
@click.option("--workdir", type=click.Path(), help="Stage files and outputs [recipe data.workdir].")
def data_command(recipe: str, workdir: str | None) -> None:
    """Build the SFT and RL files: captions, questions per dimension, question filter,
    difficulty filter (the base model through its adapter), balanced SFT pool, CoT synthesis
    and filter. Every stage is resumable: re-run the same command after an interruption."""
    from cafe.records import InputError
    from cafe.training.data.pipeline import run_pipeline

    try:
        out = run_pipeline(_recipe(recipe), workdir=workdir, echo=click.echo)
    except (InputError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"SFT file: {out['sft']}\nRL file: {out['rl']}")


@train_command.command("sft")
@click.option("--recipe", required=True, help=RECIPE_HELP)
@click.option("--data", required=True, type=click.Path(exists=True), help="sft.jsonl.")
@click.option("--out", required=True, type=click.Path(), help="Checkpoint folder to write.")
@click.option("--model", help="Checkpoint to start from [recipe model].")
@click.option("--max-steps", type=int, help="Stop after N optimizer steps.")
def sft_command(recipe: str, data: str, out: str, model: str | None, max_steps: int | None) -> None:
    """Supervised fine-tuning on MPAR² chains (TRL SFTTrainer, audio-aware collator; full or
    LoRA per the recipe, LoRA merged on save). Launch with `accelerate launch --config_file
    cafe/training/accelerate/deepspeed-zero2.yaml -m cafe.cli train sft …` on several GPUs."""
    from cafe.training.sft import train_sft

    r = _recipe(recipe)
    path = train_sft(r, model_path=_model(r, model), data=data, out=out, max_steps=max_steps)
    click.echo(f"checkpoint: {path}")


@train_command.command("grpo")
@click.option("--recipe", required=True, help=RECIPE_HELP)
@click.option("--data", required=True, type=click.Path(exists=True), help="rl.jsonl.")
@click.option("--out", required=True, type=click.Path(), help="Checkpoint folder to write.")
@click.option("--model", help="Checkpoint to start from [recipe model].")
@click.option("--judge", "judge_kind", help="Reward judge: offline or a chat client kind.")
@click.option("--judge-model", help="Judge model name (e.g. Qwen/Qwen3-32B).")
@click.option("--endpoint", multiple=True, help="Judge endpoint URL (repeat to spread load).")
@click.option(
    "--api-key-env",
    metavar="NAME",
    help="Variable holding the judge server's key [CAFE_ENDPOINT_API_KEY].",
)
@click.option("--max-steps", type=int, help="Stop after N optimizer steps.")
def grpo_command(
    recipe, data, out, model, judge_kind, judge_model, endpoint, api_key_env, max_steps
) -> None:
    """GRPO with the MPAR² rewards (TRL GRPOTrainer extended with audio; vLLM rollouts on GPU
    per the recipe, transformers generation on CPU)."""
    from cafe.training.grpo import train_grpo

    r = _recipe(recipe)
    from cafe.training.reward_judge import judge_from_recipe

    try:
        judge = judge_from_recipe(r, judge_kind, judge_model, endpoint, api_key_env=api_key_env)
    except ValueError as e:  # no server named, no key
        raise click.ClickException(str(e)) from None
    path = train_grpo(
        r, model_path=_model(r, model), data=data, out=out, judge=judge, max_steps=max_steps
    )
    click.echo(f"checkpoint: {path}")


@train_command.command("smoke")
@click.option("--workdir", type=click.Path(), help="Work folder [a new temporary folder].")
@click.option("--limit", default=8, show_default=True, help="Synth items scored before/after.")
@click.option("--recipe", default="smoke", show_default=True, help=RECIPE_HELP)
def smoke_command(workdir: str | None, limit: int, recipe: str) -> None:
    """The whole MPAR² path on a CPU in a few minutes: a tiny model built on the spot, synth
    data through the offline pipeline, SFT, GRPO with the offline reward judge, a merged
    checkpoint, and `cafe run` on synth before and after."""
    from cafe.training.smoke import run_smoke

    run_smoke(
        Path(workdir) if workdir else None, limit=limit, recipe=_recipe(recipe), echo=click.echo
    )

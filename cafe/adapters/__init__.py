"""Model adapters. Built-ins register lazily here (module imported on first use); other packages
register through the ``cafe.adapters`` entry-point group."""

from __future__ import annotations

import click

from cafe.adapters.base import ADAPTERS, Adapter, ModelCard

# name -> "module:Class"; heavy engines import only when their adapter is asked for
for _name, _target in {
    "qwen2-audio": "cafe.adapters.hf.qwen2_audio:Qwen2AudioAdapter",
    "qwen2.5-omni": "cafe.adapters.hf.qwen2_5_omni:Qwen25OmniAdapter",
    "audio-flamingo-3": "cafe.adapters.hf.audio_flamingo3:AudioFlamingo3Adapter",
    "phi-4-multimodal": "cafe.adapters.hf.phi4mm:Phi4MultimodalAdapter",
    "hf-remote-code": "cafe.adapters.hf.remote:RemoteCodeAdapter",
    "desta2.5": "cafe.adapters.hf.remote:DeSTA25Adapter",
    "reference": "cafe.adapters.reference:ReferenceAdapter",
    "random": "cafe.adapters.random_baseline:RandomAdapter",
    "openai-compatible": "cafe.adapters.openai_compat:OpenAICompatAdapter",
    "openai-audio": "cafe.adapters.openai_audio:OpenAIAudioAdapter",
    "gemini": "cafe.adapters.gemini:GeminiAdapter",
    "vllm": "cafe.adapters.vllm:VLLMAdapter",
}.items():
    ADAPTERS.add_lazy(_name, _target)

__all__ = ["ADAPTERS", "Adapter", "ModelCard", "adapters_command"]


@click.group("adapters")
def adapters_command() -> None:
    """List model adapters and model cards, or show one."""


@adapters_command.command("list")
@click.option("--cards", multiple=True, type=click.Path(exists=True), help="Extra cards YAML.")
def list_command(cards: tuple[str, ...]) -> None:
    """Every model card (name, engine, group, checkpoint, prompt style), then registered
    adapters that no card uses (run them with --model ADAPTER)."""
    from cafe.adapters.cards import load_cards

    all_cards = load_cards(list(cards))
    # decoding: greedy cards give identical --runs (marked "greedy"); unsupported ones say so
    rows = [("name", "adapter", "engine", "group", "prompt style", "decoding", "checkpoint")]
    for c in sorted(all_cards.values(), key=lambda c: (c.group, c.name)):
        decoding = "unsupported" if c.unsupported else "greedy" if c.greedy else "sampled"
        rows.append(
            (c.name, c.adapter, c.engine, c.group, c.prompt_style, decoding, c.checkpoint or "-")
        )
    used = {c.adapter for c in all_cards.values()}
    for name in ADAPTERS.names():
        if name not in used and name not in all_cards:
            rows.append((name, name, "-", "-", "-", "-", "(adapter, no card)"))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(f"{v!s:{w}}" for v, w in zip(r, widths, strict=True)).rstrip())


@adapters_command.command("show")
@click.argument("name")
@click.option("--cards", multiple=True, type=click.Path(exists=True), help="Extra cards YAML.")
def show_command(name: str, cards: tuple[str, ...]) -> None:
    """One model card (or an adapter's default card) as YAML, with its prompt template hash."""
    import dataclasses

    import yaml

    from cafe.adapters.resolve import ModelNotFound, resolve_model
    from cafe.prompts import load_template

    try:
        card = resolve_model(name, None, list(cards)).card
    except ModelNotFound as e:
        raise click.ClickException(str(e)) from None
    from cafe.redaction import scrub

    data = scrub(dataclasses.asdict(card))  # card options may name credentials or URL keys
    data["prompt_template_hash"] = load_template(card.prompt_style).hash
    click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip())

"""`cafe train smoke`: every MPAR² stage, the real code, at toy scale on a CPU."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _score(
    checkpoint: Path, out: Path, limit: int, version: str, max_new_tokens: int
) -> dict[str, Any]:
    """`cafe run --model CHECKPOINT --bench synth --limit K` through the runner API."""
    from cafe.runner.main import run_with

    result = run_with(
        str(checkpoint),
        "synth",
        version=version,
        limit=limit,
        out=out,
        prompt_style="mpar2",
        progress=False,
        cache=False,
        max_new_tokens=max_new_tokens,
    )
    from cafe.store import RunStore

    acc = result.metrics.get("accuracy", {})
    preds = RunStore(result.run_dir).predictions()
    format_ok = sum(bool(p.sections.get("format_ok")) for p in preds)
    return {
        "run_dir": str(result.run_dir),
        "acc": acc.get("total", {}).get("acc"),
        "parse_rate": acc.get("parse_rate"),
        # SPEC §7 strict tag order, share of predictions in percent (the runner has no such metric)
        "format_ok_rate": round(100.0 * format_ok / len(preds), 2) if preds else None,
        "cafe_acc_per": (result.metrics.get("cafe") or {}).get("acc_per"),
        "cafe_err_omit": (result.metrics.get("cafe") or {}).get("err_omit"),
    }


def tokenizer_corpus() -> list[str]:
    """Domain text the tiny model's tokenizer is trained on, so that words are single tokens as
    in a real model's vocabulary (a byte-level BPE of 400 symbols spells most words letter by
    letter, which makes every MPAR² target a few hundred tokens): the synth vocabulary and
    answer words, the mpar2 prompt, and one concise MPAR² chain per source."""
    from cafe import synth_vocabulary as v
    from cafe.training.data import rules
    from cafe.training.data.formats import prompt_text

    words = [
        *rules.NUMBER_WORDS,
        *v.PITCH_CONTOURS,
        *v.RHYTHMS,
        *v.DIMENSIONS,
        *(w for f in rules.FALLBACK_LABELS for w in rules.words(f).split()),
        "steady regular irregular accelerating slowing heard first longest sound source clip",
    ]
    out = [" ".join(words)]
    for src in v.SOURCES.values():
        clip = {"events": [{"label": src.label, "onset": 0.4, "offset": 1.2}]}
        cot = rules.write_cot(clip, {"answer_text": src.label, "dimension": "timbre"}, "concise")
        question = f"Which of these sound sources makes the {src.label} in the clip?"
        out += [cot, prompt_text(question, list(src.synonyms)), src.description]
    return out


def format_on_training_items(checkpoint: Path, sft_rows: Path, max_new_tokens: int) -> int:
    """How many of the SFT items (prompts seen in training) the checkpoint answers, greedily, in
    the strict MPAR² format: whether SFT took, apart from whether it generalises. The checkpoint
    loads and generates the way `cafe run` does it (model resolution, adapter, execute stage)."""
    from cafe.adapters.resolve import load_adapter, resolve_model
    from cafe.parsing import parse_sections
    from cafe.records import Request
    from cafe.runner.execute import generate
    from cafe.training.grpo import read_rows

    requests = [
        Request(
            sample_id=str(r.get("id", i)),
            run_index=0,
            messages=r["messages"][:1],  # the user turn: the clip and the prompt
            audio=[r["audio"]],
            generation={"max_new_tokens": max_new_tokens, "temperature": 0.0},
            seed=0,
            prompt_style="mpar2",
            template_hash="",
        )
        for i, r in enumerate(read_rows(sft_rows))
    ]
    adapter = load_adapter(resolve_model(str(checkpoint)))
    try:
        completions = generate(adapter, requests)
    finally:
        adapter.close()
    return sum(parse_sections(c.text or "").format_ok for c in completions)


def _log_history(checkpoint: Path) -> list[dict[str, Any]]:
    from cafe.training.grpo import trainer_dir

    path = trainer_dir(checkpoint) / "log_history.json"
    return json.loads(path.read_text()) if path.is_file() else []


def training_signals(sft: Path, grpo: Path) -> dict[str, Any]:
    """What the trainers logged: SFT loss per step, GRPO reward mean/std, loss and grad norm per
    step (TRL's own figures from `<checkpoint>.trainer/log_history.json`)."""
    sft_loss = [h["loss"] for h in _log_history(sft) if "loss" in h]
    keys = ("reward", "reward_std", "loss", "grad_norm", "mpar2/format", "mpar2/acc")
    grpo_steps = [
        {k: h.get(k) for k in (*keys, "completions/mean_length")}
        for h in _log_history(grpo)
        if "reward" in h
    ]
    return {"sft_loss": sft_loss, "grpo_steps": grpo_steps}


def _steps_of(recipe: dict[str, Any], block: str) -> str:
    """What the recipe says of a trainer's length (its max_steps, else its epochs)."""
    cfg = recipe.get(block) or {}
    if cfg.get("max_steps"):
        return f"{cfg['max_steps']} steps"
    return f"{cfg.get('num_train_epochs', 'the default')} epoch(s)"


def _fmt(x: Any, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def run_smoke(
    workdir: Path | None,
    *,
    limit: int = 8,
    recipe: dict[str, Any],
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    from cafe.testing.tiny_models import build_tiny_qwen2_audio
    from cafe.training.data.pipeline import run_pipeline
    from cafe.training.grpo import train_grpo, trainer_dir
    from cafe.training.reward_judge import judge_from_recipe
    from cafe.training.sft import train_sft

    work = workdir or Path(tempfile.mkdtemp(prefix="cafe-train-smoke-"))
    work.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        timings[name] = round(now - t, 1)
        t = now
        echo(f"[smoke] {name} done in {timings[name]} s")

    tiny = dict(recipe.get("tiny_model") or {})
    vocab = int(tiny.pop("vocab_size", 400))
    base = build_tiny_qwen2_audio(
        work / "base", vocab_size=vocab, corpus=tokenizer_corpus(), text=tiny
    )
    lap("tiny model")
    files = run_pipeline(recipe, workdir=work / "data", echo=lambda s: echo(f"[data] {s}"))
    lap("data pipeline")
    eval_version = f"n{max(limit, 1)}-seed{int(recipe.get('eval_seed', 1))}"
    max_new = int(recipe.get("eval_max_new_tokens", 256))
    before = _score(base, work / "runs" / "before", limit, eval_version, max_new)
    lap("score before")
    # TRL's per-step dicts go to <checkpoint>.trainer/log.jsonl, named before each trainer
    # starts (minutes on a CPU); the smoke prints a short line per step
    echo(f"[smoke] SFT: {_steps_of(recipe, 'sft')}; per-step log "
         f"{trainer_dir(work / 'sft')}/log.jsonl")  # fmt: skip
    sft = train_sft(recipe, model_path=base, data=files["sft"], out=work / "sft", quiet=True,
                    echo=lambda s: echo(f"[SFT] {s}"))  # fmt: skip
    lap("SFT")
    n_sft = sum(1 for line in Path(files["sft"]).read_text().splitlines() if line.strip())
    sft_format_ok = format_on_training_items(sft, files["sft"], max_new)
    lap("SFT format check")
    echo(f"[smoke] GRPO: {_steps_of(recipe, 'grpo')}; per-step log "
         f"{trainer_dir(work / 'grpo')}/log.jsonl")  # fmt: skip
    final = train_grpo(
        recipe,
        model_path=sft,
        data=files["rl"],
        out=work / "grpo",
        judge=judge_from_recipe(recipe),
        quiet=True,
        echo=lambda s: echo(f"[GRPO] {s}"),
    )
    lap("GRPO")
    after = _score(final, work / "runs" / "after", limit, eval_version, max_new)
    lap("score after")
    signals = training_signals(sft, final)
    _say_training(echo, recipe, signals, (sft, final), (sft_format_ok, n_sft))
    _say_scores(echo, {"before": before, "after": after}, eval_version, limit, max_new)
    return {
        "before": before,
        "after": after,
        "checkpoint": str(final),
        "timings": timings,
        "sft_train_format_ok": [sft_format_ok, n_sft],
        **signals,
    }


def _say_training(
    echo: Callable[[str], None],
    recipe: dict[str, Any],
    signals: dict[str, Any],
    checkpoints: tuple[Path, Path],
    sft_format: tuple[int, int],
) -> None:
    """The SFT and GRPO lines of the smoke run: checkpoints, logs, losses, the groups."""
    from cafe.training.grpo import trainer_dir

    sft, final = checkpoints
    sft_format_ok, n_sft = sft_format
    echo(f"[smoke] checkpoint: {final}")
    logs = ", ".join(str(trainer_dir(p) / "log.jsonl") for p in (sft, final))
    echo(f"[smoke] trainer logs (TRL's per-step dicts): {logs}")
    losses = signals["sft_loss"]
    if losses:
        echo(
            f"[smoke] SFT loss: first {_fmt(losses[0], 4)}, last {_fmt(losses[-1], 4)} "
            f"({len(losses)} steps)"
        )
    echo(
        f"[smoke] SFT checkpoint on its {n_sft} training prompts: {sft_format_ok}/{n_sft} in the "
        "strict MPAR² format (greedy)"
    )
    scripted = int(recipe.get("scripted_rollouts") or 0)
    if scripted:
        group = (recipe.get("grpo") or {}).get("num_generations")
        echo(
            f"[smoke] GRPO groups: {scripted} of {group} completions scripted (the reference "
            "chain, then it without tags), the rest sampled"
        )
    for i, st in enumerate(signals["grpo_steps"], 1):
        echo(
            f"[smoke] GRPO step {i}: reward mean {_fmt(st['reward'])} std {_fmt(st['reward_std'])}"
            f"  format {_fmt(st['mpar2/format'])} acc {_fmt(st['mpar2/acc'])}"
            f"  loss {_fmt(st['loss'])} grad norm {_fmt(st['grad_norm'])}"
            f"  mean length {_fmt(st['completions/mean_length'])}"
        )


def _say_scores(
    echo: Callable[[str], None],
    scores: dict[str, dict[str, Any]],
    eval_version: str,
    limit: int,
    max_new: int,
) -> None:
    """The before / after table of the smoke run's two scoring runs."""
    echo(
        f"[smoke] synth {eval_version}, {limit} items, prompt style mpar2, {max_new} new tokens "
        "(acc: the official rule on the answer text; CAFE: mean over runs):"
    )
    echo(f"[smoke]   {'':6s} {'acc %':>7s} {'parse %':>8s} {'format %':>9s} {'CAFE Acc_per':>13s}")
    for name, s in scores.items():
        echo(
            f"[smoke]   {name:6s} {_fmt(s['acc']):>7s} {_fmt(s['parse_rate']):>8s} "
            f"{_fmt(s['format_ok_rate']):>9s} {_fmt(s['cafe_acc_per']):>13s}  ({s['run_dir']})"
        )
    echo(SMOKE_SCOPE.format(limit=limit))


#: what the before / after table can and cannot say (a toy model, a few steps, a few items)
SMOKE_SCOPE = (
    "[smoke] what this shows: the whole MPAR² path runs end to end (data pipeline, SFT, GRPO "
    "with its rewards, the trained checkpoint scored on the same harness under its own card). "
    "What it does not show: that training helps. A toy model after a few steps, scored on "
    "{limit} items, moves either way by chance; before -> after is no effect. The paper's "
    "recipe: `cafe train grpo --recipe mpar2-7b-grpo` on a GPU (docs/training.md)."
)

"""Listening controls for a run: the same model and spec with the audio replaced (cafe.controls),
each control in its own run folder beside the real one (``<real>-ctl-<control>``, the control
in its run spec, its manifest linking back), then the listening gap in the real run's
metrics.json "listening" section. `cafe run --controls LIST` and `cafe listen RUN_DIR`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from cafe.cli_options import (
    IN_FLIGHT,
    SEED,
    command,
    concurrency_option,
    judge_server_kwargs,
    judge_server_options,
    no_progress_option,
    option,
)
from cafe.controls import CONTROLS, control_captions, parse_controls
from cafe.locking import writes_folder
from cafe.store import RunStore

SECTION = "listening"


def control_dir(real_dir: str | Path, control: str) -> Path:
    real = Path(real_dir)
    return real.with_name(f"{real.name}-ctl-{control}")


def rerun_options(manifest: dict[str, Any]) -> dict[str, Any]:
    """run() arguments that rebuild a folder's spec, from its manifest (format 2: "spec")."""
    spec = manifest.get("spec")
    if not spec:
        raise ValueError(
            "the run folder has no run spec (written by an older cafe): run the controls with "
            "`cafe run … --controls LIST` and the real run's options instead"
        )
    from cafe.prompts import load_template

    prompt = manifest.get("prompt") or {}
    template = None
    try:
        packaged = load_template(spec["prompt_style"]).hash
    except (KeyError, FileNotFoundError, ValueError):
        packaged = None
    if spec["template_hash"] != packaged:
        template = prompt.get("template_source")
    gen = spec.get("generation") or {}
    return {
        "model": spec["model"],
        "bench": spec["bench"],
        "checkpoint": spec.get("checkpoint"),
        "data": (manifest.get("bench") or {}).get("source"),
        "version": spec["version"],
        "runs": spec["runs"],
        "limit": spec.get("limit"),
        "seed": spec["seed"],
        "prompt_style": spec["prompt_style"],
        "prompt_template": template,
        "max_new_tokens": gen.get("max_new_tokens"),
        "options": dict(spec.get("adapter_options") or {}),
    }


def control_captions_file(
    real_dir: Path, out: Path, control: str, seed: int, captions: str | Path
) -> str:
    """The captions a control run's LLM judge needs: the played clip's, or the silent truth."""
    from cafe.judge.captions import load_captions

    samples = RunStore(real_dir).samples()
    mapping = control_captions(samples, control, seed, load_captions(captions))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "control_captions.json"  # {sample_id: caption}, as load_captions reads it
    path.write_text(json.dumps(mapping, ensure_ascii=False, indent=1), encoding="utf-8")
    return str(path)


def run_controls(
    real_dir: str | Path,
    controls: Sequence[str],
    *,
    control_seed: int = 0,
    run_options: dict[str, Any] | None = None,
    judge: str | None = None,
    judge_options: dict[str, Any] | None = None,
    **execution: Any,
) -> dict[str, Any]:
    """Run each control of the run in ``real_dir`` (its spec from ``run_options``, else from its
    manifest) and write the "listening" section; returns it. ``execution``: run() options that
    do not change a prediction (batch_size, concurrency, progress, cache, strict, cards)."""
    from cafe.runner import run

    real = Path(real_dir)
    store = RunStore(real)
    manifest = store.read_manifest()
    opts = dict(run_options or rerun_options(manifest))
    model, bench = opts.pop("model"), opts.pop("bench")
    opts.pop("out", None)
    results = {}
    for name in parse_controls(list(controls)):
        out = control_dir(real, name)
        jopts = dict(judge_options or {})
        if jopts.get("captions"):
            jopts["captions"] = control_captions_file(real, out, name, control_seed,
                                                       jopts["captions"])  # fmt: skip
        res = run(
            model, bench, **opts, out=out, control=name, control_seed=control_seed,
            control_of=str(real), judge=judge, judge_options=jopts, **execution,
        )  # fmt: skip
        results[name] = res
    return write_listening(real, {n: r.run_dir for n, r in results.items()})


@writes_folder("cafe listen")
def write_listening(real_dir: str | Path, controls: dict[str, str | Path]) -> dict[str, Any]:
    """The real run's "listening" section from its control folders."""
    from cafe.judge.pipeline import _bench_breakdowns
    from cafe.metrics.listening import listening_section

    store = RunStore(real_dir)
    samples = store.samples()
    data = {}
    for name, d in controls.items():
        ctl = RunStore(d)
        data[name] = {
            "predictions": ctl.predictions(),
            "run_dir": str(Path(d).resolve()),
            "cafe": ctl.read_metrics().get("cafe"),
        }
    section = listening_section(samples, store.predictions(), data, _bench_breakdowns(store))
    store.update_metrics(SECTION, section)
    return section


@command("listen")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@option(
    "--controls",
    default="all",
    show_default=True,
    help=f"Comma-separated controls: {', '.join(CONTROLS)} (or all).",
)
@option("--control-seed", default=0, show_default=True, type=SEED, help="Seed of noise, shuffling.")
@option("--judge", help="CAFE judge on the controls (default: the real run's judge; none: skip).")
@judge_server_options()
@option("--captions", type=click.Path(exists=True), help="The real run's captions file.")
@option(
    "--endpoint",
    "endpoints",
    multiple=True,
    help="Model server base URL for served models (repeat to shard the work).",
)
@option("--cards", multiple=True, type=click.Path(exists=True), help="Extra model cards YAML.")
@concurrency_option(help="generate() calls in flight [adapter default].")
@option("--batch-size", type=IN_FLIGHT, help="Requests per generate() call [adapter default].")
@option("--no-cache", is_flag=True, help="Neither read nor write the model call cache.")
@no_progress_option()
def listen_command(
    run_dir: str,
    controls: str,
    control_seed: int,
    judge: str | None,
    judge_model: str | None,
    judge_api_key_env: str | None,
    judge_endpoints: tuple[str, ...],
    judge_concurrency: int | None,
    captions: str | None,
    endpoints: tuple[str, ...],
    cards: tuple[str, ...],
    concurrency: int | None,
    batch_size: int | None,
    no_cache: bool,
    no_progress: bool,
) -> None:
    """Is RUN_DIR's model listening? Run the same model and spec with the audio replaced by
    silence of the same length, noise at the clip's level, another item's clip (seeded
    derangement) and no audio, each in its own run folder RUN_DIR-ctl-CONTROL; write the
    listening gap (real minus control accuracy, paired bootstrap 95% interval over items) into
    RUN_DIR/metrics.json and print it.

    \b
    cafe listen runs/qwen2.5-omni-7b-mmar-v2
    cafe listen runs/reference-synth-v2-n200-seed0 --controls silence,shuffled
    """
    from cafe.metrics.listening import format_listening

    try:
        names = parse_controls(controls)
        manifest = RunStore(run_dir).read_manifest()
        opts = rerun_options(manifest)
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    if endpoints:
        opts["options"] = {**opts["options"], "endpoints": list(endpoints)}
    jopts = judge_server_kwargs(
        judge_model, judge_endpoints, judge_concurrency, judge_api_key_env, captions
    )
    if judge is None and manifest.get("judge"):  # the real run's judge (keys: environment)
        recorded = dict(manifest["judge"])
        judge = recorded.pop("name", None)
        jopts = {**recorded, **jopts}
    section = run_controls(
        run_dir, names, control_seed=control_seed, run_options=opts, judge=judge,
        judge_options=jopts, concurrency=concurrency, batch_size=batch_size,
        cards=list(cards) or None, cache=not no_cache, progress=not no_progress,
    )  # fmt: skip
    click.echo(format_listening(section))

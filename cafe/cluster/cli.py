"""`cafe serve`: K replicas of a model server on a Ray cluster until Ctrl-C."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import click

from cafe.cli_options import adapter_options, command, option

#: how often the replicas are checked, and the endpoint file rewritten when one has gone
WATCH_S = 2.0


@command("serve", context_settings={"ignore_unknown_options": True})
@option("--model", required=True, help="Model card to serve (adapter llama-cpp or vllm).")
@option("--checkpoint", help="Checkpoint path, hub id or package:DIST:PATH overriding the card's.")
@option("--cards", multiple=True, type=click.Path(exists=True), help="Extra model cards YAML.")
@option("-o", "--option", "pairs", multiple=True, help="Card option KEY=VALUE (n_ctx, "
        "tensor_parallel_size, max_model_len…) for the server (repeat).")  # fmt: skip
@option(
    "--replicas",
    default=1,
    show_default=True,
    type=click.IntRange(1, 4096),
    help="Server replicas, each a Ray actor with its card's GPUs (spread over nodes).",
)
@option("--ray", "address", metavar="ADDRESS", help="Ray cluster to place them on (`ray start "
        "--head` prints it; auto: RAY_ADDRESS) [a local cluster on 127.0.0.1].")  # fmt: skip
@option(
    "--endpoints-file",
    default="endpoints.json",
    show_default=True,
    type=click.Path(),
    help="Where the replicas' URLs are written (kept current; removed on exit): pass "
    "--endpoint @FILE / --judge-endpoint @FILE to cafe run, judge and the judging steps.",
)
@option("--served-name", help="Model name the servers answer to [the card's name].")
@option("--host", help="Address the servers listen on [127.0.0.1 on a local cluster, the node's "
        "IP on a real one].")  # fmt: skip
@option("--ready-timeout", default=900.0, show_default=True, type=click.FloatRange(min=1),
        help="Seconds to wait for every replica to be placed and answer.")  # fmt: skip
@click.argument("server_args", nargs=-1, type=click.UNPROCESSED)
def serve_command(
    model: str, checkpoint: str | None, cards: tuple[str, ...], pairs: tuple[str, ...],
    replicas: int, address: str | None, endpoints_file: str, served_name: str | None,
    host: str | None, ready_timeout: float, server_args: tuple[str, ...],
) -> None:  # fmt: skip
    """Serve a model card as K replicas on a Ray cluster until Ctrl-C.

    Each replica is the card's engine behind the OpenAI protocol: `vllm serve` with the card's
    tensor parallelism on its GPUs, or llama.cpp's server for a GGUF on a CPU. Once every
    replica answers, their URLs go to --endpoints-file; a replica that dies is dropped from
    it. Arguments after `--` go to the server as they are.

    \b
      cafe serve --model smollm2 --replicas 2 --endpoints-file eps.json &
      cafe run --model openai-compatible -o model=smollm2 --endpoint @eps.json
      cafe judge RUN_DIR --judge-model smollm2 --judge-endpoint @eps.json
    (--endpoint ray:ADDRESS finds the replicas of a cluster without the file)."""
    from cafe.cluster import endpoints
    from cafe.cluster.replicas import serve

    path = Path(endpoints_file)
    taken = endpoints.live_elsewhere(path)
    if taken:  # another serve keeps it: neither take it over nor remove it on exit
        raise click.ClickException(
            f"{path}: another `cafe serve` keeps this endpoint file ({taken[0]} answers); "
            "give this one its own --endpoints-file, or stop that one first"
        )
    _stop_on_signals()
    where = address or "a local Ray cluster (127.0.0.1)"
    click.echo(f"starting {replicas} replica(s) of {model} on {where}", err=True)
    pool = written = None
    try:
        pool = serve(
            model, replicas=replicas, checkpoint=checkpoint, cards=cards,
            options=adapter_options(pairs), served_name=served_name, address=address,
            host=host, server_args=server_args, ready_timeout_s=ready_timeout,
        )  # fmt: skip
        _stop_on_signals()  # joining Ray put its own SIGTERM handler in place (a crash dump)
        listing = written = pool.listing()
        endpoints.write(path, listing)
        for url in listing.endpoints:
            click.echo(url)
        click.echo(f"{len(listing.endpoints)} replica(s) answering; endpoints in {path}; "
                   "Ctrl-C stops them", err=True)  # fmt: skip
        served = listing.endpoints
        while True:
            time.sleep(WATCH_S)
            now = pool.alive()
            if now != served:
                gone = sorted(set(served) - set(now))
                click.echo(f"replica(s) gone: {', '.join(gone)}; {len(now)} left", err=True)
                if not now:
                    raise click.ClickException("every replica has stopped")
                written = pool.listing(now)
                endpoints.write(path, written)
                served = now
    except KeyboardInterrupt:
        click.echo("stopping the replicas", err=True)
    finally:
        if pool is not None:
            pool.stop()
        endpoints.remove_if_ours(path, written)


def _stop_on_signals() -> None:
    """Ctrl-C and a `kill` (SIGTERM) stop the replicas and remove the endpoint file; SIGINT too
    when a shell started `cafe serve &` with it ignored, as shells do for background jobs."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def placement(
    engine: str, address: str | None, actors: int, gpus: float, grace: float | None = None
) -> dict:
    """The adapter option ``ray`` that --engine ray asks for (none for in-process)."""
    if engine != "ray":
        if address or actors != 1 or gpus or grace is not None:
            raise click.UsageError(
                "--ray, --actors, --actor-gpus and --actor-grace go with --engine ray"
            )
        return {}
    wait = {} if grace is None else {"grace_s": grace}
    return {"ray": {"address": address, "actors": actors, "gpus": gpus, **wait}}


def engine_options(f):  # type: ignore[no-untyped-def]
    """--engine, --ray, --actors, --actor-gpus as one ``engine`` argument: adapter options
    that place the model (execution options: no part of the run's identity)."""
    from cafe.cli_options import compose, gathered
    from cafe.cluster.pool import GRACE_S

    return compose(
        gathered("engine", placement,
                 ("engine", "ray_address", "actors", "actor_gpus", "actor_grace")),
        option("--engine", type=click.Choice(["local", "ray"]), default="local",
               show_default=True, help="Where an in-process model runs: here, or as Ray actors "
               "(one per replica, each with --actor-gpus; a lost one is retried by a re-run)."),
        option("--ray", "ray_address", metavar="ADDRESS",
               help="Ray cluster for --engine ray [a local cluster on 127.0.0.1]."),
        option("--actors", default=1, show_default=True, type=click.IntRange(1, 4096),
               help="Model replicas for --engine ray (placed spread over the nodes)."),
        option("--actor-gpus", default=0.0, type=click.FloatRange(min=0),
               help="GPUs each actor of --engine ray asks for [0: CPU]."),
        option("--actor-grace", type=click.FloatRange(min=0), help="Seconds the other actors "
               "get to be placed once the first is (a cluster short of room runs on those "
               f"placed by then) [{GRACE_S:g}]."),
    )(f)  # fmt: skip

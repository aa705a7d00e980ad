"""An in-process adapter's replicas as Ray actors behind a driver-side proxy (`cafe run
--engine ray`; the offline vLLM adapter's data parallel). One actor per replica with its GPUs
loads the model; the driver's ``RayAdapter`` holds the adapter's identity, served identity and
batch shape as the first actor reported them, loads no weights, and counts tokens on an actor.
Each generate() call is split over the live actors with every run of a sample on one actor (so
greedy sharing and ``runs_as: n`` see all of them), the completions back in request order.

A lost actor (killed, out of memory, its node removed) is dropped: its share of the call comes
back as transient model failures, which a plain re-run retries, and no further work goes to it.
With every actor lost the calls come back unreachable: the runner stops, their items pending.
Where the actors run and how many there are is no part of the run's identity."""

from __future__ import annotations

import inspect
import itertools
import threading
from collections import defaultdict
from typing import Any

from cafe.adapters.base import Adapter, ModelCard
from cafe.cluster.session import AT_NODE_PRIORITY, ClusterError, connect
from cafe.records import Completion, Request

#: seconds to wait for the first actor to be placed and load its model
READY_TIMEOUT_S = 900.0
#: seconds the others then get: the ones still waiting for room (a node lost) are left out
GRACE_S = 120.0
#: seconds one actor's share of a call may take before the actor counts as frozen (killed,
#: its items retried by the next run): a hung actor must not hang the run for good
CALL_TIMEOUT_S = 3600.0


def shard(requests: list[Request], ranks: int) -> list[list[int]]:
    """Request indices per rank: samples dealt round-robin in order of first appearance, all
    runs of a sample on the same rank."""
    by_sample: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(requests):
        by_sample[r.sample_id].append(i)
    out: list[list[int]] = [[] for _ in range(ranks)]
    for k, idx in enumerate(by_sample.values()):
        out[k % ranks].extend(idx)
    return out


class AdapterActor:
    """The actor: one ordinary adapter, loaded where Ray placed it."""

    def __init__(self, adapter: str, card: ModelCard, checkpoint: str | None, options: dict):
        from cafe.adapters.base import ADAPTERS  # importing it runs cafe.adapters: the lazy rows

        self.adapter = ADAPTERS.get(adapter)(card, checkpoint=checkpoint, **options)

    def describe(self) -> dict[str, Any]:
        a = self.adapter
        return {
            "identity": a.identity(), "served": a.served_identity(),
            "token_counter": a.token_counter, "batch_size": a.default_batch_size,
            "concurrency": a.default_concurrency, "usage": hasattr(a, "usage"),
        }  # fmt: skip

    def generate(self, requests: list[Request]) -> list[Completion]:
        from cafe.execution import run_sync  # the one way to run a coroutine from sync code

        out = self.adapter.generate(requests)
        return run_sync(out) if inspect.isawaitable(out) else out

    def count_tokens(self, text: str) -> int | None:
        return self.adapter.count_tokens(text)

    def usage(self) -> dict[str, Any]:
        return dict(getattr(self.adapter, "usage", {}) or {})

    def close(self) -> None:
        self.adapter.close()


def _lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for an actor or node that is gone (not the adapter's own exceptions)."""
    e = ray.exceptions
    return (e.RayActorError, e.NodeDiedError, e.WorkerCrashedError, e.ObjectLostError,
            e.ActorUnschedulableError, e.RaySystemError)  # fmt: skip


class ActorPool:
    """``actors`` actors of adapter ``adapter``, each asking Ray for ``gpus`` and ``cpus``."""

    def __init__(
        self, adapter: str, card: ModelCard, checkpoint: str | None, options: dict[str, Any],
        *, actors: int, gpus: float = 0, cpus: float = 1, address: str | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S, grace_s: float = GRACE_S,
        call_timeout_s: float = CALL_TIMEOUT_S,
    ):  # fmt: skip
        if actors < 1:
            raise ClusterError(f"--actors {actors}: run at least one actor")
        self.ray = ray = connect(address)
        self.shard = shard
        self.lost = _lost_errors(ray)
        self.call_timeout_s = float(call_timeout_s)
        self._lock = threading.Lock()
        cls = ray.remote(AdapterActor)
        self.actors: list[Any] = []
        self.alive: list[bool] = []
        made = [
            cls.options(
                num_gpus=gpus,
                num_cpus=cpus,
                scheduling_strategy="SPREAD",
                max_concurrency=64,
                runtime_env=AT_NODE_PRIORITY,
            ).remote(adapter, card, checkpoint, options)  # fmt: skip
            for _ in range(actors)
        ]
        probes = [a.describe.remote() for a in made]
        one, rest = ray.wait(probes, num_returns=1, timeout=ready_timeout_s)
        # the others get a grace: a cluster that lost a node runs on what it has
        later, _ = ray.wait(rest, num_returns=len(rest), timeout=grace_s) if rest else ([], 0)
        ready = set(one) | set(later)
        described = [self._described(made, p) if p in ready else None for p in probes]
        self.actors = [a for a, d in zip(made, described, strict=True) if d is not None]
        self._kill([a for a, d in zip(made, described, strict=True) if d is None])
        if not self.actors:
            raise ClusterError(
                f"none of {actors} Ray actor(s) was placed and loaded within {ready_timeout_s:g} "
                f"s: each asks for {gpus:g} GPU(s) and {cpus:g} CPU(s) (`ray status`)"
            )
        self.alive = [True] * len(self.actors)
        self.placed = len(self.actors)  # actors that came up (fewer than asked: cluster short)
        self.note = (
            None if self.placed == actors else f"{self.placed} of {actors} Ray actors were "
            f"placed within {grace_s:g} s of the first; the run goes on with them"
        )  # fmt: skip
        self.description = next(d for d in described if d is not None)
        self._rr = itertools.count()

    def _described(self, made: list[Any], probe: Any) -> dict[str, Any] | None:
        """What a placed actor says of its adapter; None where it died meanwhile (its node
        removed: the run goes on with the others); the adapter failing to load is the error."""
        try:
            return self.ray.get(probe)
        except self.ray.exceptions.RayActorError as e:
            if not e.actor_init_failed:
                return None
            self._kill(made)
            cause = getattr(e, "cause", None) or e
            first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
            raise ValueError(f"in a Ray actor: {first}") from None
        except self.lost:
            return None

    def live(self) -> list[int]:
        with self._lock:
            return [i for i, ok in enumerate(self.alive) if ok]

    def _drop(self, i: int) -> None:
        with self._lock:
            self.alive[i] = False

    def generate(self, requests: list[Request]) -> list[Completion]:
        live = self.live()
        if not live:
            return [_lost(r, "every Ray actor is lost", unreachable=True) for r in requests]
        parts = self.shard(requests, len(live))
        futures = [
            (i, idx, self.actors[i].generate.remote([requests[j] for j in idx]))
            for i, idx in zip(live, parts, strict=True)
            if idx
        ]
        out: list[Completion | None] = [None] * len(requests)
        lost: list[int] = []
        for i, idx, fut in futures:
            try:
                done = self.ray.get(fut, timeout=self.call_timeout_s)
            except self.lost as e:  # the actor or its node is gone: transient, retried
                self._drop(i)
                why = f"Ray actor {i} lost ({type(e).__name__}); retried by the next run"
                done, lost = [_lost(requests[j], why) for j in idx], lost + idx
            except self.ray.exceptions.GetTimeoutError:  # frozen: killed, its share retried
                self._drop(i)
                self._kill([self.actors[i]])
                why = (f"Ray actor {i} gave no answer within {self.call_timeout_s:g} s "
                       "(frozen?); killed; retried by the next run")  # fmt: skip
                done, lost = [_lost(requests[j], why) for j in idx], lost + idx
            for j, c in zip(idx, done, strict=True):
                out[j] = c
        if lost and not self.live():  # none left to retry on: the items stay pending
            for j in lost:
                out[j] = _lost(requests[j], "every Ray actor is lost", unreachable=True)
        return out  # type: ignore[return-value]

    def call(self, method: str, *args: Any) -> Any:
        """``method`` on one live actor (round-robin), moving on when one is lost; None when
        every actor is (the run stops on its next call)."""
        while True:
            live = self.live()
            if not live:
                return None
            i = live[next(self._rr) % len(live)]
            try:
                return self.ray.get(getattr(self.actors[i], method).remote(*args))
            except self.lost:
                self._drop(i)

    def usage(self) -> dict[str, Any]:
        """Every live actor's usage, numbers added up."""
        total: dict[str, Any] = {}
        for i in self.live():
            try:
                part = self.ray.get(self.actors[i].usage.remote(), timeout=60)
            except self.lost:
                continue
            for k, v in part.items():
                num = isinstance(v, int | float) and not isinstance(v, bool)
                total[k] = total.get(k, 0) + v if num else total.get(k, v)
        return total

    def _kill(self, actors: list[Any]) -> None:
        for a in actors:
            try:
                self.ray.kill(a)
            except Exception:
                pass

    def close(self) -> None:
        for i in self.live():
            try:
                self.ray.get(self.actors[i].close.remote(), timeout=60)
            except Exception:  # closing must never fail a finished run
                pass
        self._kill(self.actors)
        self.actors, self.alive = [], []


def _lost(r: Request, why: str, unreachable: bool = False) -> Completion:
    backend = {"failure": "unreachable"} if unreachable else {}
    return Completion(r.sample_id, r.run_index, None, error=why, backend=backend)


class RayAdapter(Adapter):
    """What the runner holds for ``--engine ray``: the adapter's contract, its work on actors."""

    def __init__(
        self, adapter: str, card: ModelCard, checkpoint: str | None, options: dict[str, Any],
        **placement: Any,
    ):  # fmt: skip
        super().__init__(card, checkpoint, **options)
        self.pool = ActorPool(adapter, card, checkpoint, options, **placement)
        d = self.pool.description
        self._identity, self._served = d["identity"], d["served"]
        self.token_counter = d["token_counter"]
        self.default_batch_size = int(d["batch_size"])
        # each call goes to every live actor: as many in flight as one adapter takes, per actor
        self.default_concurrency = int(d["concurrency"]) * self.pool.placed
        if self.pool.note:
            from cafe.reporting import warn

            warn(self.pool.note)

    def __getattr__(self, name: str) -> Any:
        # ``usage`` (calls, tokens, cost) only where the adapter keeps it, added over actors
        pool = self.__dict__.get("pool")
        if name == "usage" and pool is not None and pool.description["usage"]:
            return pool.usage()
        raise AttributeError(name)

    def identity(self) -> dict[str, Any]:
        return self._identity

    def served_identity(self) -> dict[str, Any] | None:
        return self._served

    def count_tokens(self, text: str) -> int | None:  # type: ignore[override]
        return self.pool.call("count_tokens", text)

    def generate(self, requests: list[Request]) -> list[Completion]:
        return self.pool.generate(requests)

    def close(self) -> None:
        self.pool.close()
